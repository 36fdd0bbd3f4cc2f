//! Work that comes back: the reads and the confirmed jobs that asked a
//! registered adapter (a process that may take up to its timeout to
//! answer), the bulk jobs, and `v`'s operations, run off the key loop (by
//! the state's `Background`) and applied here on the next poll. A job's
//! report that lands while the reviewer is typing or reading something
//! else waits until they are back in the queue.
//!
//! A result is applied only where it still belongs: a read lands on the
//! detail only while that operation is selected, still waiting for it, and
//! at the version the read classified; otherwise it is read again or
//! dropped. Meanwhile every key keeps working. The built-in ledger is read
//! in process, as before: a read of it is one SQLite transaction.
//!
//! A read is not started twice for one operation: moving away and back, or
//! pressing the read key, while one is running waits for that one. At most
//! `MAX_READS` run at once; past that, the newest request waits and starts
//! when a read ends, if its operation is still the selected one.

use super::super::app::{
    App, Found, Landed, Mark, MarkErrand, Mode, Origin, ReadErrand, ReadState, Tone,
};
use super::jobs;
use super::live::{drop_stale_marks, land_head, land_screen};
use super::queue::{land_search, reload_row, shown, start_read};
use super::quit;
use super::status::{fail, set_status};
use crate::domain::Operation;
use crate::error::Result;
use crate::workspace::Classified;

/// Applies what came back: reads where they still belong, then a job's
/// report; then starts the queued read if its operation is still waiting.
/// One errand's storage trouble does not drop the others: the first is
/// reported after all are applied.
pub(super) fn land(app: &mut App) -> Result<()> {
    let mut trouble = Ok(());
    for landed in app.background.take_landed() {
        let applied = match landed {
            Landed::Read { errand, result } => {
                land_read(app, errand, result);
                Ok(())
            }
            Landed::Job(done) => {
                app.working = None;
                let mode = std::mem::replace(&mut app.mode, Mode::Normal);
                let applied = done.and_then(|done| jobs::finish(app, done));
                hold_report(app, mode);
                if let (true, Err(error)) = (app.quitting, &applied) {
                    fail(app, error);
                }
                quit::landed(app);
                applied
            }
            Landed::Marks { errand, result } => {
                let cancelled = app.working.take().is_some_and(|w| w.progress.cancelled());
                let applied = result.and_then(|found| land_marks(app, &errand, found, cancelled));
                quit::landed(app);
                applied
            }
            Landed::Search { errand, result } => land_search(app, errand, result),
            Landed::Head(marker) => {
                land_head(app, marker);
                Ok(())
            }
            Landed::Screen { errand, result } => land_screen(app, errand, result),
        };
        if trouble.is_ok() {
            trouble = applied;
        }
    }
    if let Some(errand) = app.background.take_queued_search() {
        if app.search_errand().as_ref() == Some(&errand) {
            if let Err(e) = app.background.search(errand) {
                app.searching = None;
                set_status(app, Tone::Bad, format!("the search could not start: {e}"));
            }
        }
    }
    if let Some(errand) = app.background.take_queued() {
        if still_reading(app, &errand.op_id) {
            start_read(app, errand);
        }
    }
    trouble
}

/// A job's report that landed while the reviewer was in `mode` (typing a
/// search, reading the help, answering a dialog): that mode comes back,
/// and the report waits until they are back in the queue, so no key
/// typed for one lands in the other.
fn hold_report(app: &mut App, mode: Mode) {
    if matches!(mode, Mode::Normal) {
        return;
    }
    if let Mode::Report(report) = std::mem::replace(&mut app.mode, mode) {
        let text = format!(
            "{}: the report opens when you are back in the queue",
            report.title
        );
        app.held_report = Some(report);
        set_status(app, Tone::Warn, text);
    }
}

/// Opens the report [`hold_report`] kept, once the reviewer is back in the
/// queue.
pub(super) fn open_held_report(app: &mut App) {
    if matches!(app.mode, Mode::Normal) {
        if let Some(report) = app.held_report.take() {
            app.mode = Mode::Report(report);
        }
    }
}

/// Whether the selected operation is `op_id` and waits for its read.
fn still_reading(app: &App, op_id: &str) -> bool {
    app.selected_detail()
        .is_some_and(|d| d.operation.op_id == op_id && matches!(d.read, ReadState::Reading { .. }))
}

/// A read that came back: shown if its operation is still selected and
/// waiting for it at the version it classified; read again if the
/// operation moved on meanwhile; a failure said in words. The reviewer's
/// own read (the read key) is announced in the status line, as in process.
fn land_read(app: &mut App, errand: ReadErrand, result: Result<Classified>) {
    if !still_reading(app, &errand.op_id) {
        return;
    }
    let Some(detail) = app.detail.as_mut() else {
        return;
    };
    // The read key pressed while this read ran waited for it: announce it.
    let announce = errand.origin == Origin::Read
        || matches!(&detail.read, ReadState::Reading { origin } if *origin == Origin::Read);
    match result {
        Ok(classified) if classified.operation.version == detail.operation.version => {
            let recorded = classified.observation.is_some();
            detail.read = ReadState::Shown(shown(&detail.operation, classified, errand.origin));
            if recorded {
                if let Err(e) = reload_row(app, &errand.op_id) {
                    let text = format!("the recorded read could not be shown: {e}");
                    set_status(app, Tone::Bad, text);
                }
            }
            if announce {
                announce_read(app);
            }
        }
        Ok(_) => start_read(app, errand),
        Err(error) => {
            detail.read = ReadState::Failed {
                origin: errand.origin,
                error: error.to_string(),
            };
            if announce {
                let text = format!("reading {} failed: {error}", errand.receiver);
                set_status(app, Tone::Bad, text);
            }
        }
    }
}

/// The status line after the reviewer's own read came back.
pub(super) fn announce_read(app: &mut App) {
    let Some((d, shown)) = app.detail.as_ref().and_then(|d| Some((d, d.shown()?))) else {
        return;
    };
    let n = shown.snapshot.matches.len();
    let recorded = match (&app.reviewer, shown.recorded) {
        (Some(name), true) => format!("; recorded as {name}'s observation"),
        _ => String::new(),
    };
    let text = format!(
        "read snapshot of {}: {} ({n} match{}){recorded}",
        d.operation.op_id,
        shown.verdict,
        if n == 1 { "" } else { "es" }
    );
    set_status(app, Tone::Plain, text);
}

/// The most operations `v` marks at once: each mark holds the payload
/// it was marked with, and a bulk decision reads each receiver, so a
/// filter that shows more is narrowed first.
pub const MAX_MARKS: usize = 100_000;

pub(super) fn mark_of(op: &Operation) -> Mark {
    Mark {
        version: op.version,
        state: op.state,
        payload: op.payload.clone(),
        receiver: op.receiver.clone(),
    }
}

/// `v`'s operations landed: marked, and counted in the status line; or
/// nothing marked, saying why (cancelled, or too many).
fn land_marks(
    app: &mut App,
    errand: &MarkErrand,
    found: Option<Found>,
    cancelled: bool,
) -> Result<()> {
    let Some((found, moved)) = found else {
        let text = if cancelled {
            "v cancelled: nothing was marked".to_string()
        } else {
            format!(
                "nothing marked: the filter shows more than {MAX_MARKS} operations; narrow it \
                 (f verdict, ! escalation, / search) first"
            )
        };
        set_status(app, Tone::Warn, text);
        return Ok(());
    };
    let before = app.marks.len();
    let shown = found.len();
    for key in found {
        let mark = Mark {
            version: key.version,
            state: key.state,
            payload: key.payload,
            receiver: key.receiver,
        };
        app.marks.insert(key.op_id, mark);
    }
    let new = app.marks.len() - before;
    let text = format!(
        "marked all {shown} operation{} the filter shows ({}; {new} newly), each at its \
         current version; {} marked in all: x, c or n applies to every mark",
        if shown == 1 { "" } else { "s" },
        errand.words,
        app.marks.len()
    );
    set_status(app, Tone::Plain, text);
    // A key read before a change that landed meanwhile is not kept.
    drop_stale_marks(app, &moved);
    Ok(())
}
