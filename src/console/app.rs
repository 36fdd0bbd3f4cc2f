//! The console's whole state, in one struct that the view reads and only
//! `update` writes.
//!
//! The workspace handle lives here so that `update` can reach the library
//! API; the view never touches it and renders only the values `update`
//! loaded: the counts, one screenful of queue rows (keyset-paged, never the
//! whole outbox), and the selected operation's detail. Whether an action is
//! available right now is a pure function of this state
//! ([`App::availability`]): the domain's policy judges the selected
//! operation, and only the bulk case (marks) is the console's own. The key
//! bar, the help overlay, the verdict panel and `update` all ask it, so they
//! cannot disagree.
//!
//! A read of a registered adapter runs off the key loop, so the selected
//! operation's read has three states ([`ReadState`]): shown, still running,
//! or failed; a confirmed job that asks an adapter runs off the loop too,
//! and [`App::working`] says what it is doing meanwhile. The threads and
//! the channel those errands come back on are state as well (`Background`,
//! at the end of this file: with the watcher of other hosts' changes and
//! the refresher that reads the screen again on a handle of its own), with
//! what a job did (`Done`), so that the
//! state is a bottom layer: this file names no console module but the
//! actions, the text field, the key table (a reason can name its key) and
//! the theme, and everything else in the console is built on it.

use super::action::{Action, Request, Resume};
use super::bindings::key_for;
use super::field::TextField;
use super::theme::Theme;
use crate::clock::Clock;
use crate::dispatch::ReceiverProgram;
use crate::domain::policy::{self, Facts, LatestRead};
use crate::domain::{
    Approval, CloseEntry, Closure, Decision, EscalationRecord, EvidenceRecord, Note, OpState,
    Operation, PageBound, QueueKey, Registration, Snapshot, Verdict, VerdictFilter,
};
use crate::error::{Refusal, Result, StoreError};
use crate::settings::OpenOptions;
use crate::workspace::{ChangeMarker, Classified, Location, Workspace};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which operations the queue lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    State(OpState),
    All,
}

/// The verdict filter's steps, in the order its key goes through them:
/// off, never observed, then each verdict.
pub fn verdict_filters() -> Vec<Option<VerdictFilter>> {
    let mut steps = vec![None, Some(VerdictFilter::Never)];
    steps.extend(Verdict::ALL.iter().map(|v| Some(VerdictFilter::Is(*v))));
    steps
}

/// How a verdict filter is named on screen.
pub fn verdict_filter_label(filter: VerdictFilter) -> &'static str {
    match filter {
        VerdictFilter::Never => "never",
        VerdictFilter::Is(v) => v.as_str(),
    }
}

impl Filter {
    /// The filter tabs, in order; `unknown` first because it is the work.
    pub const ORDER: [Filter; 5] = [
        Filter::State(OpState::Unknown),
        Filter::State(OpState::Prepared),
        Filter::State(OpState::Confirmed),
        Filter::State(OpState::NotApplied),
        Filter::All,
    ];

    pub fn state(self) -> Option<OpState> {
        match self {
            Filter::State(s) => Some(s),
            Filter::All => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Filter::State(s) => s.as_str(),
            Filter::All => "all",
        }
    }

    pub fn index(self) -> usize {
        Filter::ORDER.iter().position(|f| *f == self).unwrap_or(0)
    }
}

/// Where the workspace came from, for the title bar: a workspace
/// directory or a database (shown redacted, as its `Display` does).
#[derive(Debug, Clone)]
pub struct Source {
    pub location: Location,
    /// A fresh temporary demo workspace, removed when the console exits.
    pub temporary_demo: bool,
}

/// How the console was started.
#[derive(Debug, Clone)]
pub struct Options {
    /// The reviewer's name from `--reviewer`; asked for when `None`.
    pub reviewer: Option<String>,
    /// What decides the colours (`NO_COLOR`, `TERM`, `--theme`, ...).
    pub colours: super::theme::Choice,
}

/// One screenful of the queue: the rows shown, in `op_id` order, and the
/// cursor among them. Paging replaces rows; it never accumulates them.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    pub rows: Vec<Operation>,
    pub cursor: usize,
    /// How many rows fit on screen (the page size).
    pub height: usize,
    /// How many operations of the filter come before the first row, when
    /// that is known without counting them: at the first page, at the last
    /// (from the filter's count), and carried along as the cursor pages by
    /// known steps. Unknown after another process changed the outbox in
    /// the middle of the queue, until the reviewer reaches an end.
    pub offset: Option<usize>,
}

impl Queue {
    pub fn selected(&self) -> Option<&Operation> {
        self.rows.get(self.cursor)
    }

    /// The selected row's place in the filter, counting from 1.
    pub fn position(&self) -> Option<usize> {
        let offset = self.offset?;
        self.selected().map(|_| offset + self.cursor + 1)
    }
}

/// How the snapshot on screen was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Read automatically when the operation was selected (not closing).
    Selected,
    /// Read again automatically after another process changed the
    /// workspace (not closing).
    Refreshed,
    /// A read the reviewer took with the read key (not closing).
    Read,
    /// The closing snapshot the reviewer took.
    Closing { authorized_by: String },
    /// The closing snapshot another host's close recorded, read from the
    /// outbox (no call of the receiver).
    Recorded { by: String },
}

impl Origin {
    pub fn describe(&self) -> String {
        match self {
            Origin::Selected => "read on selection (not closing)".to_string(),
            Origin::Refreshed => "re-read after an outside change (not closing)".to_string(),
            Origin::Read => "your read (not closing)".to_string(),
            Origin::Closing { authorized_by } => {
                format!("your CLOSING snapshot, authorized by {authorized_by}")
            }
            Origin::Recorded { by } => {
                format!("CLOSING snapshot {by} recorded (read from the outbox)")
            }
        }
    }
}

/// A classified snapshot as shown, with the payload paths of each match that
/// differ from the operation's payload.
#[derive(Debug, Clone)]
pub struct Shown {
    pub snapshot: Snapshot,
    pub verdict: Verdict,
    pub origin: Origin,
    pub differing: Vec<Vec<String>>,
    /// Whether the read was recorded as the reviewer's observation.
    pub recorded: bool,
}

/// Where the selected operation's read of its receiver stands.
#[derive(Debug, Clone)]
pub enum ReadState {
    /// The read came back and is classified.
    Shown(Shown),
    /// The read is running off the key loop (an adapter's process).
    Reading { origin: Origin },
    /// The read did not come back: `error` says why, naming the receiver.
    Failed { origin: Origin, error: String },
}

/// Everything shown about the selected operation.
#[derive(Debug, Clone)]
pub struct Detail {
    pub operation: Operation,
    /// The receiver the operation routes to, as registered: its name and
    /// the ceiling of what its reads can claim.
    pub receiver: Registration,
    pub evidence: Vec<EvidenceRecord>,
    pub approvals: Vec<Approval>,
    pub closure: Option<Closure>,
    pub dispatches: i64,
    pub read: ReadState,
    /// The triage history: notes, closes as the outbox journaled them,
    /// escalations, and how many observations were recorded.
    pub notes: Vec<Note>,
    pub closes: Vec<CloseEntry>,
    pub escalations: Vec<EscalationRecord>,
    /// Receiver calls that gave no usable answer, and the acknowledgements
    /// of contradictions: why it is unknown, and what people saw.
    pub failures: Vec<crate::domain::CallFailure>,
    pub acknowledgements: Vec<crate::domain::Acknowledgement>,
    /// The recorded observations, oldest first.
    pub observations: Vec<crate::domain::Observation>,
    /// When each compensation approval was made (its compensation
    /// operation's creation, in the same transaction), by compensation op id.
    pub approved_at: std::collections::BTreeMap<String, crate::domain::Timestamp>,
    /// The authenticated role each journal entry records (team mode), by
    /// seq, and each approval's: shown beside the names typed.
    pub roles: std::collections::BTreeMap<i64, String>,
    pub approval_roles: Vec<Option<String>>,
    /// The MCP key and client the operation came with (SPEC 13).
    pub origin: Option<crate::domain::origin::Origin>,
    /// The seq of the newest journal entry naming the operation, read
    /// before the rest of the detail: everything up to it is on screen, so
    /// a dialog for this operation is bound to it.
    pub latest_seq: i64,
}

impl Detail {
    /// The classified read on screen, once it has come back.
    pub fn shown(&self) -> Option<&Shown> {
        match &self.read {
            ReadState::Shown(shown) => Some(shown),
            ReadState::Reading { .. } | ReadState::Failed { .. } => None,
        }
    }

    /// What the policy judges an act on: the operation, its receiver and
    /// the read on screen, as the reviewer sees them.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            operation: &self.operation,
            read: self.shown().map(|shown| LatestRead {
                verdict: shown.verdict,
                closed: shown.snapshot.closed,
            }),
            receiver: &self.receiver.describe,
            closure: self.closure.as_ref(),
            approvals: &self.approvals,
        }
    }
}

/// What the reviewer marked for bulk triage: the version and payload they
/// saw, which is what each decision is checked against.
#[derive(Debug, Clone)]
pub struct Mark {
    pub version: i64,
    pub state: OpState,
    pub payload: Value,
    pub receiver: String,
}

/// One operation a confirmed job acts on, as the reviewer saw it.
#[derive(Debug, Clone)]
pub struct Target {
    pub op_id: String,
    pub version: i64,
    pub state: OpState,
    pub payload: Value,
    /// The receiver it routes to.
    pub receiver: String,
}

/// A mutation waiting for its confirmation, with the exact values it will
/// submit.
#[derive(Debug, Clone)]
pub enum Job {
    Close {
        targets: Vec<Target>,
    },
    Decide {
        decision: Decision,
        targets: Vec<Target>,
        /// The verdict on screen when the reviewer asked (single decisions).
        verdict_shown: Option<Verdict>,
        /// The effect kept of a duplicate (`confirmed --keep`, SPEC 14).
        keep: Option<String>,
    },
    Approve {
        original_op_id: String,
        effect_id: String,
        expected_version: i64,
        compensation_op_id: String,
        action_kind: String,
        payload: Value,
        /// `duplicate` for a surplus effect of a kept duplicate.
        reason: Option<String>,
    },
    Dispatch {
        op_id: String,
        version: i64,
        receiver: String,
    },
    /// Read each operation's receiver again and record what it saw.
    Observe {
        op_ids: Vec<String>,
        /// The receivers they route to.
        receivers: Vec<String>,
        /// Which operations they are, in words ("the 3 marked operations").
        scope: String,
    },
    /// Resolve an exact list by the policy `provable` (`recon resolve`).
    Resolve {
        list: Vec<crate::domain::resolve::Planned>,
        /// The filter it was read under, in words.
        scope: String,
    },
    /// Drop every mark (the queue's Esc, asked before it drops them).
    Unmark,
    /// Stop the running job between chunks and quit (`q` or Ctrl-C while
    /// one runs, asked first): its report is printed once the terminal is
    /// restored.
    Quit,
}

impl Job {
    /// The registered adapters (receivers other than the built-in ledger)
    /// the job will ask, by name: a job that asks one runs off the key loop.
    pub fn adapters(&self) -> Vec<&str> {
        let mut names: Vec<&str> = match self {
            Job::Close { targets } | Job::Decide { targets, .. } => {
                targets.iter().map(|t| t.receiver.as_str()).collect()
            }
            Job::Dispatch { receiver, .. } => vec![receiver.as_str()],
            Job::Observe { receivers, .. } => receivers.iter().map(String::as_str).collect(),
            Job::Resolve { list, .. } => list.iter().map(|op| op.receiver.as_str()).collect(),
            Job::Approve { .. } | Job::Unmark | Job::Quit => Vec::new(),
        };
        names.retain(|name| *name != crate::receiver::BUILTIN_NAME);
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The operations the job may change or create: those it acts on, and
    /// a compensation it approves.
    pub fn touches(&self) -> Vec<String> {
        let mut ids = self.op_ids();
        if let Job::Approve {
            compensation_op_id, ..
        } = self
        {
            ids.push(compensation_op_id.clone());
        }
        ids
    }

    /// The operations the job acts on.
    pub fn op_ids(&self) -> Vec<String> {
        match self {
            Job::Close { targets } | Job::Decide { targets, .. } => {
                targets.iter().map(|t| t.op_id.clone()).collect()
            }
            Job::Dispatch { op_id, .. } => vec![op_id.clone()],
            Job::Observe { op_ids, .. } => op_ids.clone(),
            Job::Resolve { list, .. } => list.iter().map(|op| op.op_id.clone()).collect(),
            Job::Approve { original_op_id, .. } => vec![original_op_id.clone()],
            Job::Unmark | Job::Quit => Vec::new(),
        }
    }

    /// The operations the dialog is bound to: anything that happens to one
    /// of them after it opened (a new version, a note, a marker, an
    /// observation, a close) means it no longer says what `y` would do. A
    /// re-read records observations only, and dropping marks writes
    /// nothing: they are bound to nothing.
    pub fn bound_ops(&self) -> Vec<String> {
        match self {
            Job::Observe { .. } | Job::Unmark | Job::Quit => Vec::new(),
            _ => self.op_ids(),
        }
    }

    /// Whether it is a long act over many operations, run off the key loop
    /// with its progress on screen whatever receiver it asks.
    pub fn is_bulk(&self) -> bool {
        self.op_ids().len() > 1
    }
}

/// How far a job off the key loop has got, shared between its thread (which
/// counts) and the console (which shows it and can ask it to stop).
#[derive(Debug)]
pub struct Progress {
    /// Operations taken in hand: done, plus the one being done.
    begun: AtomicUsize,
    done: AtomicUsize,
    total: AtomicUsize,
    cancel: AtomicBool,
    started: Instant,
    /// How many operations are in each state, read by the job after its
    /// latest chunk: the filter bar's tabs show them while it runs.
    states: std::sync::Mutex<Option<BTreeMap<OpState, i64>>>,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress {
            begun: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            total: AtomicUsize::new(total),
            cancel: AtomicBool::new(false),
            started: Instant::now(),
            states: std::sync::Mutex::new(None),
        }
    }

    /// The state counts the job read after its latest chunk.
    pub fn counted(&self, states: BTreeMap<OpState, i64>) {
        // A lock whose holder panicked still holds a whole map.
        let mut held = self.states.lock().unwrap_or_else(|e| e.into_inner());
        *held = Some(states);
    }

    /// The state counts as of the job's latest chunk, once it has read any.
    pub fn states(&self) -> Option<BTreeMap<OpState, i64>> {
        let held = self.states.lock().unwrap_or_else(|e| e.into_inner());
        held.clone()
    }

    /// How many operations are done (committed or refused), of how many.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }

    /// Operations per second since the job started.
    pub fn rate(&self) -> f64 {
        let secs = self.started.elapsed().as_secs_f64();
        if secs > 0.0 {
            self.counts().0 as f64 / secs
        } else {
            0.0
        }
    }

    /// About how long the rest will take at the rate so far: `None` until
    /// an operation is done (there is no rate yet) and once none is left.
    pub fn left(&self) -> Option<std::time::Duration> {
        let (done, total) = self.counts();
        let rate = self.rate();
        if done == 0 || done >= total || rate <= 0.0 {
            return None;
        }
        std::time::Duration::try_from_secs_f64((total - done) as f64 / rate).ok()
    }

    /// `by` more operations taken in hand.
    pub fn begin(&self, by: usize) {
        self.begun.fetch_add(by, Ordering::Relaxed);
    }

    /// Whether an operation is in hand: begun and not done yet.
    pub fn in_hand(&self) -> bool {
        self.begun.load(Ordering::Relaxed) > self.done.load(Ordering::Relaxed)
    }

    /// `by` more operations done.
    pub fn step(&self, by: usize) {
        self.done.fetch_add(by, Ordering::Relaxed);
    }

    /// Asks the job to stop after the operation in hand.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// A confirmed job running off the key loop, because it asks an adapter.
#[derive(Debug, Clone)]
pub struct Working {
    /// What it is doing, in words, for the status line and the detail.
    pub text: String,
    pub op_ids: Vec<String>,
    /// How far it has got; the queue's Esc asks it to stop.
    pub progress: Arc<Progress>,
}

/// What a confirmed job did, ready to be reported: built by the job, in
/// process or on a thread off the key loop, and applied by `update`.
pub(crate) struct Done {
    pub(crate) what: String,
    pub(crate) outcomes: Vec<Outcome>,
    /// A single closing snapshot, to be shown on screen, and who authorized
    /// it.
    pub(crate) closing: Option<(Classified, String)>,
    /// The operations the job may have changed or created.
    pub(crate) touched: Vec<String>,
    /// Whether the marks it acted on are done with (a decision or a close
    /// on them), or stay (a re-read).
    pub(crate) unmark: bool,
    /// The operations not attempted because the reviewer cancelled the job
    /// before their turn: nothing was written for them.
    pub(crate) skipped: Vec<String>,
    /// The operations skipped because they changed after the dialog that
    /// named them opened: nothing was written for them either.
    pub(crate) changed: Vec<Changed>,
    /// The report's first sentence, when the job says it its own way (a
    /// re-read); otherwise the decisions' count.
    pub(crate) summary: Option<String>,
    /// Whether another process had changed the outbox when it ran: a job
    /// off the key loop counts as one (its handle is another connection).
    pub(crate) outside: bool,
}

/// An operation a dialog named that changed after the dialog opened: the
/// newest journal entry naming it says what changed and who changed it.
#[derive(Debug, Clone)]
pub(crate) struct Changed {
    pub(crate) op_id: String,
    pub(crate) entry: crate::domain::LatestEntry,
    /// Its state and version now, read with it.
    pub(crate) now: (OpState, i64),
}

impl Changed {
    /// `op-1 escalated by bob`, for the status line.
    pub(crate) fn short(&self) -> String {
        format!("{} {}", self.op_id, self.entry.describe())
    }

    /// `op-1: escalated by bob, journal entry 57`, for a report.
    pub(crate) fn describe(&self) -> String {
        let (state, version) = self.now;
        format!(
            "{}: {}, journal entry {}; now {state} at version {version}",
            self.op_id,
            self.entry.describe(),
            self.entry.seq
        )
    }
}

/// What a job did to one operation.
pub(crate) struct Outcome {
    pub(crate) op_id: String,
    pub(crate) lines: Vec<(Tone, String)>,
    pub(crate) refusal: Option<Refusal>,
}

/// A confirmation dialog: what will happen, in words, and the job.
#[derive(Debug, Clone)]
pub struct Pending {
    pub title: String,
    pub lines: Vec<String>,
    /// What `y` does, for the dialog's last line.
    pub yes: String,
    pub job: Job,
}

/// The compensation approval form.
#[derive(Debug, Clone)]
pub struct CompensationForm {
    pub original_op_id: String,
    pub effect_id: String,
    pub expected_version: i64,
    /// `duplicate` when the effect is a surplus one of a kept duplicate.
    pub reason: Option<String>,
    /// Compensation op id, action kind, payload (JSON text).
    pub fields: [TextField; 3],
    pub focus: usize,
    pub error: Option<String>,
}

impl CompensationForm {
    pub const LABELS: [&'static str; 3] = ["compensation op id", "action kind", "payload (JSON)"];
}

/// One match of a duplicate as the keep picker lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepChoice {
    pub effect_id: String,
    pub action_kind: String,
    /// [`crate::domain::duplicates::payload_hash`] of its payload.
    pub payload_hash: String,
}

/// "Keep one": the matches of the duplicate on screen, in the receiver's
/// order, and the one under the cursor. Built from the read the reviewer
/// sees; it and its confirmation are bound to the operation's history as
/// far as the detail it was built from went (`since`), so any change after
/// the picker opened closes it, or its confirmation, with nothing written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepPicker {
    pub op_id: String,
    pub version: i64,
    /// The scope the reviewer sees, submitted with the decision.
    pub payload: Value,
    pub receiver: String,
    pub choices: Vec<KeepChoice>,
    pub cursor: usize,
    /// When the read on screen was taken, in words (receivers give no time
    /// per effect).
    pub read: String,
    pub since: i64,
}

impl KeepPicker {
    /// The picker over `shown`'s matches for the operation of `detail`.
    pub fn of(detail: &Detail, shown: &Shown) -> KeepPicker {
        let choices = (shown.snapshot.matches.iter())
            .map(|m| KeepChoice {
                effect_id: m.effect_id.clone(),
                action_kind: m.action_kind.clone(),
                payload_hash: crate::domain::duplicates::payload_hash(&m.payload),
            })
            .collect();
        KeepPicker {
            op_id: detail.operation.op_id.clone(),
            version: detail.operation.version,
            payload: detail.operation.payload.clone(),
            receiver: detail.operation.receiver.clone(),
            choices,
            cursor: 0,
            read: shown.origin.describe(),
            since: detail.latest_seq,
        }
    }

    /// The cursor moved by `by` rows, held within the list.
    pub fn moved(mut self, by: isize) -> KeepPicker {
        let last = self.choices.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(by).min(last);
        self
    }

    /// The matches shown when only `rows` fit: a window that holds the
    /// cursor, from the first match while it can.
    pub fn window(&self, rows: usize) -> std::ops::Range<usize> {
        let rows = rows.max(1).min(self.choices.len());
        let start = (self.cursor + 1).saturating_sub(rows);
        start..start + rows
    }

    /// The effect under the cursor, and the others: its surplus.
    pub fn chosen(&self) -> Option<(&str, Vec<&str>)> {
        let kept = self.choices.get(self.cursor)?;
        let surplus = (self.choices.iter())
            .filter(|c| c.effect_id != kept.effect_id)
            .map(|c| c.effect_id.as_str())
            .collect();
        Some((kept.effect_id.as_str(), surplus))
    }
}

/// What an annotation form records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    Note,
    Escalate,
    Deescalate,
}

impl Annotation {
    /// The form's title, the label of its field, and what Enter records.
    pub fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Annotation::Note => ("note", "note", "the note"),
            Annotation::Escalate => ("escalate", "reason", "the escalation"),
            Annotation::Deescalate => ("deescalate", "reason", "its lowering"),
        }
    }
}

/// The note or escalation form: one text field, for one operation.
#[derive(Debug, Clone)]
pub struct AnnotateForm {
    pub kind: Annotation,
    pub op_id: String,
    pub input: TextField,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Bad,
    Warn,
}

/// A result shown in a modal: a refusal, or what a bulk job did.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub lines: Vec<(Tone, String)>,
    pub scroll: u16,
}

/// What the console is doing besides showing the queue.
#[derive(Debug, Clone)]
pub enum Mode {
    Normal,
    Help {
        scroll: u16,
    },
    /// Typing a search, applied to the queue as it is typed; `previous`
    /// is the search to go back to if the reviewer leaves with Esc.
    Search {
        input: TextField,
        previous: Option<String>,
    },
    /// Asking for the reviewer's name before the first act that records
    /// it; `resume` is what to carry on with.
    Reviewer {
        input: TextField,
        error: Option<String>,
        resume: Resume,
    },
    /// A note or an escalation's reason being typed.
    Annotate(AnnotateForm),
    Compensate(CompensationForm),
    /// "Keep one" of a duplicate: the cursor picks the effect kept.
    Keep(KeepPicker),
    Confirm(Pending),
    Report(Report),
}

/// What the reviewer could not see happen while the terminal was below
/// the console's minimum size: the keys and pastes ignored, and the
/// dialog closed when it no longer fitted.
#[derive(Debug, Clone, Default)]
pub struct Unseen {
    pub ignored: usize,
    /// The title of the dialog closed, with nothing written.
    pub closed: Option<String>,
}

/// The status line.
#[derive(Debug, Clone)]
pub struct Status {
    pub tone: Tone,
    pub text: String,
    /// When it was said (the workspace clock): an old line says its age,
    /// and a plain one expires.
    pub at: crate::domain::Timestamp,
}

impl Status {
    /// How long a plain status line (a move, a mark, a read) stays: after
    /// that it no longer describes what the reviewer is looking at. A
    /// result or a warning stays, and says its age once it is
    /// [`Status::SHOWS_AGE`] old.
    pub const PLAIN_EXPIRES: Duration = Duration::from_secs(60);

    /// From this age on, the status line says how old it is.
    pub const SHOWS_AGE: Duration = Duration::from_secs(10);

    /// Its age at `now`, when old enough to be said.
    pub fn age(&self, now: crate::domain::Timestamp) -> Option<Duration> {
        let age = now.since(self.at);
        (age >= Status::SHOWS_AGE).then_some(age)
    }
}

pub struct App {
    pub(super) ws: Workspace,
    pub source: Source,
    pub reviewer: Option<String>,
    pub theme: Theme,
    pub width: u16,
    pub height: u16,
    pub filter: Filter,
    /// The latest-verdict filter beside the state filter (`never`: no
    /// observation recorded).
    pub verdict_filter: Option<VerdictFilter>,
    /// Only escalated operations (`Some(true)`), or only the others.
    pub escalated_filter: Option<bool>,
    /// How many operations the state, verdict and escalation filters
    /// select together, counted when a verdict or escalation filter is on
    /// (the state counts serve otherwise).
    pub filter_count: Option<i64>,
    pub search: Option<String>,
    /// The search typed and still running off the key loop: the rows on
    /// screen are the previous search's until it lands.
    pub searching: Option<String>,
    pub counts: BTreeMap<OpState, i64>,
    /// Each kept duplicate by op id, with how many of its surplus effects
    /// await compensation (SPEC 14): the header counts them, the queue
    /// marks the rows with any.
    pub surplus: BTreeMap<String, usize>,
    pub queue: Queue,
    pub marks: BTreeMap<String, Mark>,
    pub detail: Option<Detail>,
    pub snapshot_scroll: u16,
    pub mode: Mode,
    pub status: Option<Status>,
    /// The confirmed job running off the key loop, if any.
    pub working: Option<Working>,
    /// Reads and jobs that ask an adapter, running on their own threads.
    pub(super) background: Background,
    /// The workspace's change marker (the journal's head and the ledger
    /// file's version) when last refreshed.
    pub(super) seen: crate::workspace::ChangeMarker,
    /// A job's report that landed while the reviewer was typing or reading
    /// something else: it opens when they are back in the queue, so no key
    /// meant for that lands in it.
    pub(super) held_report: Option<Report>,
    /// The change marker an open dialog was last checked at.
    pub(super) dialog_seen: Option<crate::workspace::ChangeMarker>,
    /// The journal position an open dialog is bound to: an entry naming
    /// one of its operations after it closes the dialog, and a job that
    /// finds one skips that operation (`Job::bound_ops`).
    pub(super) dialog_since: i64,
    /// What happened while the terminal was too small to show the console:
    /// said once it fits again.
    pub(super) unseen: Unseen,
    /// While a terminal's late answer to the background question is being
    /// dropped (begun by Alt+], which is how `ESC ]` reads as a key): how
    /// many of its keys have been dropped so far.
    pub(super) late_answer: Option<usize>,
    pub should_quit: bool,
    /// The reviewer asked to quit while a job ran (or a signal did): the
    /// job stops between chunks, and the console quits when it lands.
    pub(super) quitting: bool,
    /// What the console says on the normal screen once it has quit: the
    /// report of the job a quit stopped.
    pub exit_report: Option<Report>,
    /// The workspace clock's time when the last action was applied: what
    /// the ages on screen are measured against (so a fixed clock renders
    /// fixed ages).
    pub now: crate::domain::Timestamp,
    /// The team roles the login holds, as the database answered at the
    /// console's start (and when its watcher reconnected): an act needing
    /// another is marked and not offered. `None` on a workspace directory,
    /// or when the database did not say: every act is offered, and the
    /// database judges each when it runs, as it does anyway.
    pub roles: Option<Vec<crate::domain::team::TeamRole>>,
    /// Keeps a temporary demo workspace alive until the console is dropped.
    pub(super) _demo_dir: Option<tempfile::TempDir>,
}

impl App {
    pub fn total(&self) -> i64 {
        self.counts.values().sum()
    }

    /// How many operations a state's tab counts: while a job runs, as of
    /// its latest chunk (the page and its position stay as read until it
    /// lands and the screen refreshes).
    pub fn count(&self, filter: Filter) -> i64 {
        let latest = self.working.as_ref().and_then(|w| w.progress.states());
        let counts = latest.as_ref().unwrap_or(&self.counts);
        match filter {
            Filter::State(s) => counts.get(&s).copied().unwrap_or(0),
            Filter::All => counts.values().sum(),
        }
    }

    pub fn selected(&self) -> Option<&Operation> {
        self.queue.selected()
    }

    /// Whether a verdict or an escalation filter is on.
    pub fn triage_filtered(&self) -> bool {
        self.verdict_filter.is_some() || self.escalated_filter.is_some()
    }

    /// How many operations the queue's filters select, when known: not
    /// under a search (its matches are found by reading, not counted).
    pub fn shown_count(&self) -> Option<i64> {
        self.filters().shown_count(&self.counts, self.filter_count)
    }

    /// The queue's filters, owned, for a read off the key loop.
    pub(crate) fn filters(&self) -> Filters {
        Filters {
            state: self.filter.state(),
            verdict: self.verdict_filter,
            escalated: self.escalated_filter,
            search: self.search.clone(),
        }
    }

    /// The search the queue shows, as an errand to run off the key loop.
    pub(crate) fn search_errand(&self) -> Option<SearchErrand> {
        self.search.as_ref()?;
        Some(SearchErrand {
            filters: self.filters(),
            limit: self.queue.height.max(1),
        })
    }

    /// The queue's filters, as the store takes them.
    pub fn queue_filter(&self) -> crate::domain::QueueFilter<'_> {
        crate::domain::QueueFilter {
            state: self.filter.state(),
            search: self.search.as_deref(),
            verdict: self.verdict_filter,
            escalated: self.escalated_filter,
            ..Default::default()
        }
    }

    /// The first role the act a key starts needs that the login does not
    /// hold, by the domain's table of acts ([`crate::domain::team::Act`]);
    /// `None` when it holds them all, the key writes nothing, or the roles
    /// are not known.
    pub fn lacks(&self, action: Action) -> Option<crate::domain::team::TeamRole> {
        let held = self.roles.as_ref()?;
        let act = action.team_act()?;
        act.roles()
            .iter()
            .copied()
            .find(|role| !held.contains(role))
    }

    /// A role the login lacks, in words: which, and who lacks it.
    pub fn needs(&self, role: crate::domain::team::TeamRole) -> String {
        let login = self.ws.session_role().unwrap_or("this login");
        format!("needs the {} role, which {login} lacks", role.short())
    }

    /// The detail, when it belongs to the selected row.
    pub fn selected_detail(&self) -> Option<&Detail> {
        let selected = self.selected()?;
        self.detail
            .as_ref()
            .filter(|d| d.operation.op_id == selected.op_id)
    }

    /// Whether a request can be made now, or why not. An act needing a
    /// role the login lacks never can ([`App::lacks`]). While a job runs
    /// off the key loop, none can: one mutation at a time. With marks, the
    /// bulk requests apply to the marked operations, each checked against
    /// its own version and verdict when it runs; otherwise the domain's
    /// policy judges the selected operation, and a refusal that a closing
    /// snapshot could lift names the key that takes one.
    pub fn availability(&self, request: Request) -> Result<String, String> {
        if let Some(role) = self.lacks(Action::Request(request)) {
            return Err(self.needs(role));
        }
        if let Some(working) = &self.working {
            return Err(format!(
                "wait: {} is still running (Esc cancels it)",
                working.text
            ));
        }
        if request.is_bulk() && !self.marks.is_empty() {
            let cursor = match self.selected() {
                Some(op) if self.marks.contains_key(&op.op_id) => ", this one among them",
                Some(_) => ", not on this one",
                None => "",
            };
            return Ok(format!(
                "acts on the {} marked operation{}{cursor}",
                self.marks.len(),
                if self.marks.len() == 1 { "" } else { "s" }
            ));
        }
        let Some(detail) = self.selected_detail() else {
            return Err("no operation is selected".to_string());
        };
        if request == Request::Keep {
            return keep_availability(detail);
        }
        policy::availability(request.act(), &detail.facts()).map_err(|no| {
            if no.close_first {
                format!(
                    "{}; {} takes a closing snapshot",
                    no.reason,
                    key_for(Request::Close)
                )
            } else {
                no.reason
            }
        })
    }
}

/// Whether one effect of the duplicate on screen may be kept, or why not
/// in words: an unknown operation, a read on screen, and the domain's rule
/// ([`crate::domain::duplicates::why_not_keep`]); a read that is not closed
/// names the key that takes a closing snapshot.
fn keep_availability(detail: &Detail) -> Result<String, String> {
    let op = &detail.operation;
    if op.state != OpState::Unknown {
        return Err(format!(
            "only an unknown operation takes a decision; this one is {}",
            op.state
        ));
    }
    let Some(shown) = detail.shown() else {
        return Err(format!(
            "keeping one needs a verdict, and no read of receiver {} has come back",
            op.receiver
        ));
    };
    let why = crate::domain::duplicates::why_not_keep(op.scope(), &shown.snapshot, shown.verdict);
    match why {
        None => Ok(format!(
            "pick which of the {} matches is kept; the rest become surplus, each to compensate",
            shown.snapshot.matches.len()
        )),
        Some(why) if !shown.snapshot.closed && detail.receiver.describe.can_close => Err(format!(
            "{why}; {} takes a closing snapshot",
            key_for(Request::Close)
        )),
        Some(why) => Err(why),
    }
}

/// How many adapter reads run at once.
pub(crate) const MAX_READS: usize = 4;

/// A read of one operation's receiver, as asked for.
#[derive(Debug, Clone)]
pub(crate) struct ReadErrand {
    pub op_id: String,
    pub receiver: String,
    pub origin: Origin,
    /// The reviewer the read is recorded as an observation of (the read
    /// key); `None` shows it only.
    pub record_as: Option<String>,
}

/// A search as typed: the filters and the text, owned, so that it runs
/// on a thread of its own and is recognized when it lands (only the search
/// the queue still asks for is shown).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchErrand {
    /// The filters, the search text among them (never `None` here).
    pub filters: Filters,
    /// The page size: one screenful from the first match.
    pub limit: usize,
}

impl SearchErrand {
    /// The text searched for.
    pub(crate) fn text(&self) -> &str {
        self.filters.search.as_deref().unwrap_or_default()
    }
}

/// `v` as asked: the filters it marks under, owned, for a thread of its own.
#[derive(Debug, Clone)]
pub(crate) struct MarkErrand {
    pub filters: Filters,
    /// The most it marks: past this, nothing.
    pub limit: usize,
    /// The filters in words, for the status line.
    pub words: String,
    /// The journal's head (its seq) the console had seen when `v` was
    /// asked: the marks that land are checked against every change after
    /// it, as a refresh checks the marks it keeps.
    pub since: i64,
}

impl MarkErrand {
    /// Reads the keys of every operation the filter shows in one walk of
    /// the filter's index (`Workspace::queue_keys`, at most one past the
    /// limit), counted on `progress`; `None` if cancelled meanwhile or past
    /// the limit. With them, what moved since `v` was asked (one query),
    /// for the marks to be checked against when they land.
    fn find(&self, ws: &Workspace, progress: &Progress) -> Result<Option<Found>> {
        let found = ws.queue_keys(self.filters.queue_filter(), self.limit + 1)?;
        progress.step(found.len());
        let kept = !progress.cancelled() && found.len() <= self.limit;
        if !kept {
            return Ok(None);
        }
        let moved = ws.changed_since(self.since)?;
        Ok(Some((found, moved)))
    }
}

/// `v`'s operations, and what moved since it was asked.
pub(crate) type Found = (Vec<QueueKey>, Vec<crate::domain::Moved>);

/// An errand that came back.
pub(crate) enum Landed {
    Read {
        errand: ReadErrand,
        result: Result<Classified>,
    },
    Job(Result<Done>),
    /// Every operation a filter shows, for `v` to mark; `None` when the
    /// reviewer cancelled it, or when it shows more than `limit`.
    Marks {
        errand: MarkErrand,
        result: Result<Option<Found>>,
    },
    Search {
        errand: SearchErrand,
        result: Result<Vec<Operation>>,
    },
    /// The watcher saw the workspace's change marker move (or failed to
    /// read it, and tries again).
    Head(Result<ChangeMarker>),
    /// A refresh read off the key loop, for the screen it was asked for.
    Screen {
        errand: ScreenErrand,
        result: Result<Box<Screen>>,
    },
}

/// The queue's filters, owned: what a read off the key loop needs of them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Filters {
    pub state: Option<OpState>,
    pub verdict: Option<VerdictFilter>,
    pub escalated: Option<bool>,
    pub search: Option<String>,
}

impl Filters {
    pub(crate) fn queue_filter(&self) -> crate::domain::QueueFilter<'_> {
        crate::domain::QueueFilter {
            state: self.state,
            search: self.search.as_deref(),
            verdict: self.verdict,
            escalated: self.escalated,
            ..Default::default()
        }
    }

    /// Whether a verdict or an escalation filter is on (then the state
    /// counts do not say how many the queue shows).
    pub(crate) fn triage_filtered(&self) -> bool {
        self.verdict.is_some() || self.escalated.is_some()
    }

    /// How many operations the filters select, when known: not under a
    /// search (its matches are found by reading, not counted); under a
    /// verdict or escalation filter, its own count; else the state counts.
    pub(crate) fn shown_count(
        &self,
        counts: &BTreeMap<OpState, i64>,
        filter_count: Option<i64>,
    ) -> Option<i64> {
        if self.search.is_some() {
            return None;
        }
        if self.triage_filtered() {
            return filter_count;
        }
        Some(match self.state {
            Some(state) => counts.get(&state).copied().unwrap_or(0),
            None => counts.values().sum(),
        })
    }
}

/// Where to (re)load the queue from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Anchor {
    Start,
    End,
    /// Keep the rows from this op id on, and the cursor on `selected` if it
    /// is still listed; `offset` is how many of the filter's operations
    /// come before `top`, if that is still known.
    At {
        top: String,
        selected: String,
        offset: Option<usize>,
    },
}

/// A screenful to read: the queue's filters and place, and how far the
/// journal was when the screen was last read (what moved since is read
/// too, for the marks and an open dialog).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScreenErrand {
    pub filters: Filters,
    /// The page size.
    pub height: usize,
    pub anchor: Anchor,
    /// The cursor's row in the page, kept when the anchor's selected
    /// operation is gone.
    pub cursor: usize,
    /// The journal's length the screen was read at.
    pub since: i64,
}

impl ScreenErrand {
    /// Whether `other` asks for the same screen (the same filters and
    /// place), whatever it knows of the journal.
    pub(crate) fn same_place(&self, other: &ScreenErrand) -> bool {
        let selected = |e: &ScreenErrand| match &e.anchor {
            Anchor::At { selected, .. } => Some(selected.clone()),
            Anchor::Start | Anchor::End => None,
        };
        self.same_page(other) && self.cursor == other.cursor && selected(self) == selected(other)
    }

    /// Whether `other` asks for the same page (the same filters, size and
    /// first row), wherever its cursor is.
    pub(crate) fn same_page(&self, other: &ScreenErrand) -> bool {
        let top = |e: &ScreenErrand| match &e.anchor {
            Anchor::At { top, .. } => Some(top.clone()),
            Anchor::Start | Anchor::End => None,
        };
        self.filters == other.filters && self.height == other.height && top(self) == top(other)
    }
}

/// One page of the queue as read: its rows, the cursor among them, the
/// offset when known, and the count of a verdict or escalation filter.
pub(crate) struct Rows {
    pub rows: Vec<Operation>,
    pub cursor: usize,
    pub offset: Option<usize>,
    pub filter_count: Option<i64>,
}

/// Everything the detail panel shows of one operation, as read (the read
/// of an adapter aside, which runs on its own).
pub(crate) struct DetailRead {
    pub shown: crate::workspace::OpDetail,
    pub receiver: Registration,
    /// The built-in ledger's read, taken in the same errand; `None` for an
    /// adapter.
    pub builtin_read: Option<Classified>,
    pub closure: Option<Closure>,
    pub dispatches: i64,
    pub approved_at: BTreeMap<String, crate::domain::Timestamp>,
    /// The seq of the newest entry naming the operation, read before the
    /// rest (`Detail::latest_seq`).
    pub latest_seq: i64,
}

/// A whole screen as a refresh reads it: the marker first (a change that
/// lands while the rest is read is looked at again), then the counts (of
/// states and of surplus effects),
/// what moved since the errand's head, the page and the selected detail.
pub(crate) struct Screen {
    pub marker: ChangeMarker,
    pub counts: BTreeMap<OpState, i64>,
    /// The kept duplicates, with their surplus effects awaiting
    /// compensation ([`App::surplus`]).
    pub surplus: BTreeMap<String, usize>,
    pub moved: Vec<crate::domain::Moved>,
    pub rows: Rows,
    pub detail: Option<DetailRead>,
}

/// How a screen is read, handed to the refresher by `update` (which owns
/// the reading code; this file only runs it).
pub(crate) type ReadScreen = fn(&mut Workspace, &ScreenErrand) -> Result<Screen>;

/// The errands running off the key loop, and the channel they come back
/// on: the reads and the confirmed jobs that ask a registered adapter,
/// which is a process that may take up to its timeout to answer.
///
/// Each errand runs on a thread of its own with its own [`Workspace`]
/// handle, opened on the same location, so the console's handle is never
/// shared and never waited on; the result comes back over a channel and is
/// applied by `update` on the next poll. A read is not started twice for
/// one operation, and at most [`MAX_READS`] run at once, so holding a key
/// down over many operations does not start a process for each; past that,
/// the newest request waits ([`Background::take_queued`]).
pub(crate) struct Background {
    location: Location,
    program: ReceiverProgram,
    clock: Arc<dyn Clock>,
    send: Sender<Landed>,
    inbox: Receiver<Landed>,
    /// Errands that came back while a caller waited, not yet applied.
    arrived: VecDeque<Landed>,
    /// The operations whose read is running.
    reading: BTreeSet<String>,
    /// The newest read past [`MAX_READS`].
    queued: Option<ReadErrand>,
    job_running: bool,
    /// Whether a search is running; the newest one typed meanwhile waits.
    searching: bool,
    queued_search: Option<SearchErrand>,
    /// The newest change marker the watcher told, once it runs.
    pub(crate) watched: Option<ChangeMarker>,
    /// Whether the watcher's last word was a failure (it tries again).
    pub(crate) watch_failing: bool,
    /// Set when the console goes: the watcher stops at its next wake.
    watch_stop: Option<Arc<AtomicBool>>,
    /// Where refreshes are sent, once the refresher runs, and whether one
    /// is out.
    refresher: Option<Sender<ScreenErrand>>,
    refreshing: bool,
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(stop) = &self.watch_stop {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// A handle of an errand's own on the console's workspace, with the
/// console's receiver program and clock.
fn open_handle(
    location: &Location,
    program: &ReceiverProgram,
    clock: &Arc<dyn Clock>,
) -> Result<Workspace> {
    Ok(Workspace::open(location.clone(), OpenOptions::default())?
        .with_receiver_program(program.clone())
        .with_clock(Arc::clone(clock)))
}

/// Reads a screen on the refresher's handle, opening it first if needed;
/// a handle that fails (a server restarted under it) is dropped and the
/// read tried once more on a fresh one.
fn read_on(
    handle: &mut Option<Workspace>,
    open: &dyn Fn() -> Result<Workspace>,
    read: ReadScreen,
    errand: &ScreenErrand,
) -> Result<Screen> {
    let fresh = handle.is_none();
    let ws = match handle {
        Some(ws) => ws,
        None => handle.insert(open()?),
    };
    match read(ws, errand) {
        Err(_) if !fresh => {
            *handle = None;
            read_on(handle, open, read, errand)
        }
        Err(e) => {
            *handle = None;
            Err(e)
        }
        done => done,
    }
}

impl Background {
    /// Errands for the workspace `ws` is a handle on; each opens its own.
    pub(crate) fn new(ws: &Workspace) -> Background {
        let (send, inbox) = mpsc::channel();
        Background {
            location: ws.location().clone(),
            program: ws.receiver_program().clone(),
            clock: ws.clock(),
            send,
            inbox,
            arrived: VecDeque::new(),
            reading: BTreeSet::new(),
            queued: None,
            job_running: false,
            searching: false,
            queued_search: None,
            watched: None,
            watch_failing: false,
            watch_stop: None,
            refresher: None,
            refreshing: false,
        }
    }

    /// Starts the watcher on a thread of its own: it tells the change
    /// marker each time it moves, on the errands' channel. Once only.
    pub(crate) fn watch(&mut self, watch: crate::workspace::HeadWatch) -> std::io::Result<()> {
        if self.watch_stop.is_some() {
            return Ok(());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, send) = (Arc::clone(&stop), self.send.clone());
        std::thread::Builder::new()
            .name("recon-watch".to_string())
            .spawn(move || {
                watch.run(&flag, |marker| {
                    send.send(Landed::Head(marker.map_err(Into::into))).is_ok()
                })
            })?;
        self.watch_stop = Some(stop);
        Ok(())
    }

    /// Whether a refresh is out.
    pub(crate) fn refreshing(&self) -> bool {
        self.refreshing
    }

    /// Reads a screen off the key loop, on the refresher: a thread of its
    /// own that keeps one handle on the workspace (one connection, not one
    /// per refresh), started on first use.
    pub(crate) fn refresh(&mut self, errand: ScreenErrand, read: ReadScreen) -> Result<()> {
        let refresher = match &self.refresher {
            Some(refresher) => refresher.clone(),
            None => self.start_refresher(read).map_err(StoreError::from)?,
        };
        if refresher.send(errand).is_err() {
            // The refresher ended (it never does while the console runs);
            // the next refresh starts another.
            self.refresher = None;
            return Err(StoreError::Io(std::io::Error::other("the refresher stopped")).into());
        }
        self.refreshing = true;
        Ok(())
    }

    fn start_refresher(&mut self, read: ReadScreen) -> std::io::Result<Sender<ScreenErrand>> {
        let (errands, inbox) = mpsc::channel::<ScreenErrand>();
        let (location, program) = (self.location.clone(), self.program.clone());
        let (send, clock) = (self.send.clone(), Arc::clone(&self.clock));
        std::thread::Builder::new()
            .name("recon-refresh".to_string())
            .spawn(move || {
                let open = || open_handle(&location, &program, &clock);
                let mut handle = None;
                for errand in inbox {
                    let result = read_on(&mut handle, &open, read, &errand).map(Box::new);
                    if send.send(Landed::Screen { errand, result }).is_err() {
                        return;
                    }
                }
            })?;
        self.refresher = Some(errands.clone());
        Ok(errands)
    }

    /// Whether anything is running or waiting to run.
    pub(crate) fn busy(&self) -> bool {
        !self.reading.is_empty()
            || self.queued.is_some()
            || self.job_running
            || self.searching
            || self.queued_search.is_some()
            || self.refreshing
    }

    /// Starts a search off the key loop; while one runs, the newest one
    /// typed waits for it ([`Background::take_queued_search`]), so fast
    /// typing starts no pile of scans.
    pub(crate) fn search(&mut self, errand: SearchErrand) -> std::io::Result<()> {
        if self.searching {
            self.queued_search = Some(errand);
            return Ok(());
        }
        self.spawn("recon-search", move |ws| {
            let result = ws.and_then(|ws| {
                ws.queue_page(
                    errand.filters.queue_filter(),
                    PageBound::Start,
                    errand.limit,
                )
            });
            Landed::Search { errand, result }
        })?;
        self.searching = true;
        Ok(())
    }

    /// The search typed while another ran, once that one has landed.
    pub(crate) fn take_queued_search(&mut self) -> Option<SearchErrand> {
        if self.searching {
            None
        } else {
            self.queued_search.take()
        }
    }

    /// Blocks until an errand comes back or `timeout` passes; true when one
    /// came back (it is applied by the next poll).
    pub(crate) fn wait(&mut self, timeout: Duration) -> bool {
        if !self.arrived.is_empty() {
            return true;
        }
        match self.inbox.recv_timeout(timeout) {
            Ok(landed) => {
                self.arrived.push_back(landed);
                true
            }
            Err(_) => false,
        }
    }

    /// Runs `work` on a thread of its own, on a new handle on the
    /// workspace, and sends what it returns back to the console.
    fn spawn(
        &self,
        name: &str,
        work: impl FnOnce(Result<Workspace>) -> Landed + Send + 'static,
    ) -> std::io::Result<()> {
        let (location, program) = (self.location.clone(), self.program.clone());
        let send = self.send.clone();
        let clock = Arc::clone(&self.clock);
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let ws = open_handle(&location, &program, &clock);
                // The console may have quit; then nobody waits for this.
                let _ = send.send(work(ws));
            })
            .map(drop)
    }

    /// Starts a non-closing read, unless one of the same operation is
    /// running; past [`MAX_READS`] it waits for one to end.
    pub(crate) fn read(&mut self, errand: ReadErrand) -> std::io::Result<()> {
        if self.reading.contains(&errand.op_id) {
            return Ok(());
        }
        if self.reading.len() >= MAX_READS {
            self.queued = Some(errand);
            return Ok(());
        }
        let op_id = errand.op_id.clone();
        self.spawn("recon-read", move |ws| {
            let result = ws.and_then(|mut ws| {
                ws.snapshot_by(&errand.op_id, None, errand.record_as.as_deref())
            });
            Landed::Read { errand, result }
        })?;
        self.reading.insert(op_id);
        Ok(())
    }

    /// Starts a confirmed job: `work` carries it out, as in process, on the
    /// thread's own handle, counting on `progress`.
    pub(crate) fn job(
        &mut self,
        progress: Arc<Progress>,
        work: impl FnOnce(&mut Workspace, &Progress) -> Result<Done> + Send + 'static,
    ) -> Result<()> {
        self.spawn("recon-job", move |ws| {
            Landed::Job(ws.and_then(|mut ws| work(&mut ws, &progress)))
        })
        .map_err(StoreError::from)?;
        self.job_running = true;
        Ok(())
    }

    /// Starts `v`: the filter's operations are read on a thread of their
    /// own, counted on `progress`, and marked when they land.
    pub(crate) fn mark_all(&mut self, errand: MarkErrand, progress: Arc<Progress>) -> Result<()> {
        self.spawn("recon-marks", move |ws| {
            let result = ws.and_then(|ws| errand.find(&ws, &progress));
            Landed::Marks { errand, result }
        })
        .map_err(StoreError::from)?;
        self.job_running = true;
        Ok(())
    }

    /// Everything that came back since the last call, with the bookkeeping
    /// of what is still running brought up to date.
    pub(crate) fn take_landed(&mut self) -> Vec<Landed> {
        let mut landed: Vec<Landed> = self.arrived.drain(..).collect();
        landed.extend(self.inbox.try_iter());
        for l in &landed {
            match l {
                Landed::Read { errand, .. } => {
                    self.reading.remove(&errand.op_id);
                }
                Landed::Job(_) | Landed::Marks { .. } => self.job_running = false,
                Landed::Search { .. } => self.searching = false,
                Landed::Screen { .. } => self.refreshing = false,
                Landed::Head(_) => {}
            }
        }
        landed
    }

    /// The read that waited past [`MAX_READS`], once one has ended.
    pub(crate) fn take_queued(&mut self) -> Option<ReadErrand> {
        if self.reading.len() < MAX_READS {
            self.queued.take()
        } else {
            None
        }
    }
}
