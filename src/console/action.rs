//! Everything that can happen to the console, as plain values.
//!
//! The key map turns a key press into an [`Action`]; the terminal loop adds
//! `Resize` and `Poll`; [`super::update::update`] is the only code that acts
//! on them. Actions carry no state of their own beyond a typed character or
//! a size, so the key table can hold them as constants and tests can build
//! them without a terminal.

use crate::domain::policy::Act;
use crate::domain::team;
use crate::domain::Decision;

/// A change of workspace state the reviewer can ask for: the domain's
/// [`Act`], as the console names it and can apply it to marks. Each one
/// goes through the reviewer prompt (once) and a confirmation that says
/// exactly what will happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// A closing snapshot: the receiver mutation that bars late writes.
    Close,
    /// Record `confirmed` or `not_applied` against the version shown.
    Decide(Decision),
    /// Approve a compensation for the confirmed effect.
    Compensate,
    /// Dispatch a prepared operation.
    Dispatch,
    /// Keep one effect of an exact duplicate, picked with the cursor, and
    /// record `confirmed` with the rest as surplus (SPEC 14). Not in
    /// [`Request::ALL`]: the verdict panel offers it only on a duplicate.
    Keep,
}

impl Request {
    pub const ALL: [Request; 5] = [
        Request::Close,
        Request::Decide(Decision::Confirmed),
        Request::Decide(Decision::NotApplied),
        Request::Compensate,
        Request::Dispatch,
    ];

    /// How the request is named in the verdict panel and the help.
    pub fn name(self) -> &'static str {
        match self {
            Request::Close => "closing snapshot",
            Request::Decide(Decision::Confirmed) => "record confirmed",
            Request::Decide(Decision::NotApplied) => "record not_applied",
            Request::Compensate => "approve compensation",
            Request::Dispatch => "dispatch",
            Request::Keep => "keep one",
        }
    }

    /// Whether it can apply to every marked operation at once.
    pub fn is_bulk(self) -> bool {
        matches!(self, Request::Close | Request::Decide(_))
    }

    /// The act the domain judges.
    pub fn act(self) -> Act {
        match self {
            Request::Close => Act::Close,
            Request::Decide(decision) => Act::Decide(decision),
            Request::Compensate => Act::Compensate,
            Request::Dispatch => Act::Dispatch,
            // Keeping one records `confirmed`, from `unknown`.
            Request::Keep => Act::Decide(Decision::Confirmed),
        }
    }

    /// The outbox's act it is, whose roles the database asks for in team
    /// mode ([`team::Act::roles`]).
    pub fn team_act(self) -> team::Act {
        match self {
            Request::Close => team::Act::Close,
            Request::Decide(_) | Request::Keep => team::Act::Decide,
            Request::Compensate => team::Act::Approve,
            Request::Dispatch => team::Act::Dispatch,
        }
    }
}

/// What the reviewer's name was asked for: a request, or one of the
/// triage acts that record who did them (an explicit read, a re-read of
/// many, a note, raising or lowering the escalation marker). The console
/// carries on with it once the name is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    Request(Request),
    Read,
    Reread,
    Resolve,
    Note,
    Escalate,
    Deescalate,
}

/// What a key does to a text field besides typing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    Left,
    Right,
    Home,
    End,
    /// Delete the character before the cursor.
    Backspace,
    /// Delete the character at the cursor.
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    First,
    Last,
    NextFilter,
    PrevFilter,
    /// Show one filter: an index into [`super::app::Filter::ORDER`].
    Filter(usize),
    /// The next (or previous) latest-verdict filter: off, never, then
    /// each verdict.
    NextVerdict,
    PrevVerdict,
    /// The escalation filter: off, escalated only, not escalated.
    NextEscalated,
    /// Start typing a search.
    Search,
    ToggleMark,
    /// Mark every operation the current filters show, on every page.
    MarkAll,
    /// Take a non-closing snapshot of the selected operation now.
    ReadSnapshot,
    /// Read the marked operations again (or the rows on screen when none
    /// is marked), each recorded as the reviewer's observation.
    Reread,
    /// Resolve every operation the filter shows by the policy `provable`
    /// (`recon resolve`), after a confirmation naming the counts.
    Resolve,
    /// Leave a note on the selected operation (a form).
    Note,
    /// Raise or lower the selected operation's escalation marker, with a
    /// reason (a form).
    Escalate,
    Deescalate,
    /// Show the whole selected operation, its payload and evidence history
    /// unabridged, in a scrollable view.
    ShowOperation,
    Request(Request),
    /// Scroll the snapshot panel, the help or a result.
    ScrollDown,
    ScrollUp,
    Help,
    /// Yes, in a confirmation.
    Confirm,
    /// No, in a confirmation; leave a prompt, an overlay or a form; in the
    /// queue, back out one level: cancel a running bulk act, else clear the
    /// search, else the verdict and escalation filters, else (asked first)
    /// the marks.
    Cancel,
    /// Text typed into a prompt, the search or a form field, at the cursor.
    Input(char),
    /// A cursor move or a deletion in a text field.
    Edit(Edit),
    NextField,
    PrevField,
    Submit,
    Resize(u16, u16),
    /// Check whether another process changed the workspace, and refresh.
    Poll,
    /// A signal (SIGTERM, SIGHUP) asked the console to end: a running job
    /// stops between chunks and the console quits when it lands, as after
    /// a quit confirmed; with none running, it quits at once.
    Stop,
    Quit,
}

impl Action {
    /// The outbox's act a key starts, if it writes: what a login must hold
    /// the roles of in team mode. The reads and the moves are none.
    pub fn team_act(self) -> Option<team::Act> {
        match self {
            Action::Request(request) => Some(request.team_act()),
            // A read the reviewer asks for is recorded as an observation.
            Action::ReadSnapshot | Action::Reread => Some(team::Act::Observe),
            Action::Resolve => Some(team::Act::Resolve),
            Action::Note => Some(team::Act::Note),
            Action::Escalate | Action::Deescalate => Some(team::Act::Escalate),
            _ => None,
        }
    }
}
