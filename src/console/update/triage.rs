//! The triage acts that record who did them besides the decisions: the
//! reviewer's own read (the read key), a re-read of the marked operations
//! (or of the rows on screen), a note, and the escalation marker.
//!
//! Each asks for the reviewer's name once, as a request does, and none of
//! them changes an operation's state or version, so none goes through a
//! confirmation: a read records what the receiver showed, a note is kept
//! in the history, and a marker can be lowered again (the history keeps
//! both). A refusal (`not_unknown`, `already_escalated`, `not_escalated`)
//! is shown with its code before any form opens, and again if another
//! process got there first while the reason was typed.
//!
//! This module sits above `confirm` (a request resumed after the name
//! prompt goes there) and below `forms` and `normal`, which start these
//! acts.

use super::super::action::Resume;
use super::super::app::{AnnotateForm, Annotation, App, Mode, Origin, ReadState, Tone};
use super::super::field::TextField;
use super::super::view::filter_words;
use super::background::announce_read;
use super::confirm;
use super::status::set_status;
use super::{live, queue};
use crate::domain::EscalationAction;
use crate::error::{Error, Result};
use crate::workspace::Selection;

/// Starts an act that records the reviewer's name, asking for the name
/// first when it is not set; the prompt carries on here afterwards.
pub(super) fn start(app: &mut App, what: Resume) -> Result<()> {
    if let Resume::Request(request) = what {
        return confirm::start_request(app, request);
    }
    if app.selected().is_none() {
        set_status(app, Tone::Warn, "no operation is selected");
        return Ok(());
    }
    if app.reviewer.is_none() {
        app.mode = Mode::Reviewer {
            input: TextField::default(),
            error: None,
            resume: what,
        };
        return Ok(());
    }
    match what {
        Resume::Request(_) => Ok(()),
        Resume::Read => read_snapshot(app),
        Resume::Reread => reread(app),
        Resume::Resolve => resolve(app),
        Resume::Note => open_form(app, Annotation::Note),
        Resume::Escalate => open_form(app, Annotation::Escalate),
        Resume::Deescalate => open_form(app, Annotation::Deescalate),
    }
}

/// A fresh non-closing read of the selected operation, labelled as the
/// reviewer's own and recorded as their observation. An adapter's read
/// runs off the key loop: the status says so now, and announces the
/// verdict when it lands.
fn read_snapshot(app: &mut App) -> Result<()> {
    queue::selection_changed(app, Origin::Read)?;
    if let Some(d) = &app.detail {
        if let ReadState::Reading { .. } = d.read {
            let text = format!(
                "reading {} from receiver {}…",
                d.operation.op_id, d.receiver.name
            );
            set_status(app, Tone::Plain, text);
            return Ok(());
        }
    }
    announce_read(app);
    Ok(())
}

/// Asks to read every marked operation again, or the rows on screen when
/// none is marked, each to be recorded as the reviewer's observation; the
/// dialog says how many and which before anything is recorded.
fn reread(app: &mut App) -> Result<()> {
    if let Some(working) = &app.working {
        let text = format!(
            "re-read is unavailable: wait: {} is still running (Esc cancels it)",
            working.text
        );
        set_status(app, Tone::Warn, text);
        return Ok(());
    }
    let (op_ids, receivers): (Vec<String>, Vec<String>) = if app.marks.is_empty() {
        app.queue
            .rows
            .iter()
            .map(|op| (op.op_id.clone(), op.receiver.clone()))
            .unzip()
    } else {
        app.marks
            .iter()
            .map(|(id, mark)| (id.clone(), mark.receiver.clone()))
            .unzip()
    };
    let n = op_ids.len();
    let scope = match (app.marks.is_empty(), op_ids.first(), op_ids.last()) {
        (false, ..) => format!("the {n} marked operation{}", if n == 1 { "" } else { "s" }),
        (true, Some(first), Some(last)) if n > 1 => {
            format!("the {n} rows on screen, {first} to {last}")
        }
        _ => format!("the row on screen, {}", op_ids.concat()),
    };
    let reviewer = app.reviewer.clone().unwrap_or_default();
    let pending = confirm::reread_pending(&reviewer, op_ids, receivers, scope);
    confirm::open_dialog(app, pending);
    Ok(())
}

/// Asks to resolve every unknown operation the filter shows by the
/// policy `provable`: the exact list (each at its version now) is read
/// here, and the dialog names its counts; `y` authorizes that list, as
/// `recon resolve`'s printed list is authorized, with the reviewer as both
/// the one who runs the policy and the one who authorizes the closes.
fn resolve(app: &mut App) -> Result<()> {
    if let Some(working) = &app.working {
        let text = format!(
            "resolve is unavailable: wait: {} is still running (Esc cancels it)",
            working.text
        );
        set_status(app, Tone::Warn, text);
        return Ok(());
    }
    let filter = crate::domain::QueueFilter {
        state: Some(crate::domain::OpState::Unknown),
        ..app.queue_filter()
    };
    let list = app.ws.resolve_selection(Selection::Filter(filter))?;
    if list.is_empty() {
        set_status(
            app,
            Tone::Warn,
            "resolve: the filter shows no unknown operation",
        );
        return Ok(());
    }
    let reviewer = app.reviewer.clone().unwrap_or_default();
    let scope = filter_words(app);
    let pending = confirm::resolve_pending(&reviewer, list, &scope);
    confirm::open_dialog(app, pending);
    Ok(())
}

/// Opens the note or escalation form for the selected operation, unless
/// the domain refuses the marker's change now (shown with its code).
fn open_form(app: &mut App, kind: Annotation) -> Result<()> {
    let Some(op_id) = app.selected().map(|op| op.op_id.clone()) else {
        return Ok(());
    };
    let action = match kind {
        Annotation::Note => None,
        Annotation::Escalate => Some(EscalationAction::Escalate),
        Annotation::Deescalate => Some(EscalationAction::Deescalate),
    };
    if let Some(action) = action {
        match app.ws.check_escalation(&op_id, action) {
            Ok(()) => {}
            Err(Error::Refused(refusal)) => {
                let text = format!(
                    "{} is unavailable: refused: {}: {refusal}",
                    action.as_str(),
                    refusal.code()
                );
                set_status(app, Tone::Warn, text);
                return Ok(());
            }
            Err(other) => return Err(other),
        }
    }
    app.mode = Mode::Annotate(AnnotateForm {
        kind,
        op_id,
        input: TextField::default(),
        error: None,
    });
    Ok(())
}

/// Records the note or the marker's change as the reviewer. Text the
/// facade finds unusable (empty, too long) keeps the form open with the
/// reason; a refusal closes it and is reported with its code.
pub(super) fn submit(app: &mut App, form: AnnotateForm) -> Result<()> {
    let reviewer = app.reviewer.clone().unwrap_or_default();
    let text = form.input.text().to_string();
    let op_id = form.op_id.clone();
    let outside = live::changed_since_refresh(app)?;
    let done = match form.kind {
        Annotation::Note => app
            .ws
            .note(&op_id, &reviewer, &text)
            .map(|note| format!("note #{} left on {op_id} by {reviewer}", note.seq)),
        Annotation::Escalate => app.ws.escalate(&op_id, &reviewer, &text).map(|_| {
            format!("escalated {op_id} as {reviewer}; it stays unknown (! marks it in the queue)")
        }),
        Annotation::Deescalate => app
            .ws
            .deescalate(&op_id, &reviewer, &text)
            .map(|_| format!("lowered the escalation of {op_id} as {reviewer}")),
    };
    match done {
        Ok(status) => {
            app.mode = Mode::Normal;
            let own = live::Own {
                touched: &[op_id],
                outside,
            };
            live::refresh(app, Origin::Selected, Some(own))?;
            set_status(app, Tone::Good, status);
            Ok(())
        }
        Err(Error::Invalid(reason)) => {
            app.mode = Mode::Annotate(AnnotateForm {
                error: Some(reason),
                ..form
            });
            Ok(())
        }
        Err(other) => {
            app.mode = Mode::Normal;
            Err(other)
        }
    }
}
