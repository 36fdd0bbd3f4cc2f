//! Receiver work that comes back: the reads and the confirmed jobs that
//! asked a registered adapter, which is a process that may take up to its
//! timeout to answer, run off the key loop (by the state's `Background`)
//! and are applied here on the next poll.
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

use super::super::app::{App, Landed, Origin, ReadErrand, ReadState, Tone};
use super::jobs;
use super::queue::{land_search, reload_row, shown, start_read};
use super::status::set_status;
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
                done.and_then(|done| jobs::finish(app, done))
            }
            Landed::Search { errand, result } => land_search(app, errand, result),
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
