//! The queue's own keys, and the overlays a reviewer only reads.
//!
//! Everything here moves, filters, marks, reads or scrolls; none of it
//! writes. A mutation key only starts a request, which goes through
//! [`super::confirm`] before anything is written. Marks record the version
//! and payload the reviewer saw, because that is what a bulk decision is
//! later checked against.

use super::super::action::{Action, Resume};
use super::super::app::{App, Filter, Mark, Mode, Origin, Report, Tone};
use super::super::field::TextField;
use super::super::view::{self, filter_words};
use super::confirm;
use super::queue::{self, Anchor};
use super::status::{fail, set_status};
use super::triage;
use crate::domain::Operation;
use crate::error::Result;

/// A key in the queue.
pub(super) fn normal(app: &mut App, action: Action) -> Result<()> {
    match action {
        Action::Down => queue::move_down(app, 1),
        Action::Up => queue::move_up(app, 1),
        Action::PageDown => queue::move_down(app, app.queue.height.max(1)),
        Action::PageUp => queue::move_up(app, app.queue.height.max(1)),
        Action::First => queue::load_queue(app, Anchor::Start),
        Action::Last => queue::load_queue(app, Anchor::End),
        Action::NextFilter => {
            queue::set_filter(app, (app.filter.index() + 1) % Filter::ORDER.len())
        }
        Action::PrevFilter => queue::set_filter(
            app,
            (app.filter.index() + Filter::ORDER.len() - 1) % Filter::ORDER.len(),
        ),
        Action::Filter(index) => queue::set_filter(app, index),
        Action::NextVerdict => queue::step_verdict(app, 1),
        Action::PrevVerdict => queue::step_verdict(app, -1),
        Action::NextEscalated => queue::step_escalated(app),
        Action::Search => {
            app.mode = Mode::Search {
                input: TextField::default(),
                previous: app.search.clone(),
            };
            Ok(())
        }
        Action::ToggleMark => {
            toggle_mark(app);
            Ok(())
        }
        Action::MarkAll => mark_all(app),
        Action::ReadSnapshot => triage::start(app, Resume::Read),
        Action::Reread => triage::start(app, Resume::Reread),
        Action::Note => triage::start(app, Resume::Note),
        Action::Escalate => triage::start(app, Resume::Escalate),
        Action::Deescalate => triage::start(app, Resume::Deescalate),
        Action::ShowOperation => {
            show_operation(app);
            Ok(())
        }
        Action::Request(request) => confirm::start_request(app, request),
        Action::ScrollDown => {
            app.snapshot_scroll = app.snapshot_scroll.saturating_add(1);
            Ok(())
        }
        Action::ScrollUp => {
            app.snapshot_scroll = app.snapshot_scroll.saturating_sub(1);
            Ok(())
        }
        Action::Help => {
            app.mode = Mode::Help { scroll: 0 };
            Ok(())
        }
        Action::Cancel => clear(app),
        _ => Ok(()),
    }
}

/// A key in the help overlay.
pub(super) fn help(app: &mut App, scroll: u16, action: Action) {
    match action {
        Action::ScrollDown => app.mode = Mode::Help { scroll: scroll + 1 },
        Action::ScrollUp => {
            app.mode = Mode::Help {
                scroll: scroll.saturating_sub(1),
            }
        }
        Action::Cancel | Action::Help => app.mode = Mode::Normal,
        _ => {}
    }
}

/// A key in a report.
pub(super) fn report(app: &mut App, mut report: Report, action: Action) {
    match action {
        Action::ScrollDown => {
            report.scroll += 1;
            app.mode = Mode::Report(report);
        }
        Action::ScrollUp => {
            report.scroll = report.scroll.saturating_sub(1);
            app.mode = Mode::Report(report);
        }
        Action::Cancel => app.mode = Mode::Normal,
        _ => {}
    }
}

/// Esc in the queue: the search and the marks go, and the status says
/// which.
fn clear(app: &mut App) -> Result<()> {
    let had_search = app.search.take().is_some();
    let marks = app.marks.len();
    app.marks.clear();
    if had_search {
        queue::load_queue(app, Anchor::Start)?;
    }
    match (had_search, marks) {
        (false, 0) => {}
        (true, 0) => set_status(app, Tone::Plain, "search cleared"),
        (_, n) => set_status(
            app,
            Tone::Plain,
            format!(
                "{}{n} mark{} cleared",
                if had_search { "search and " } else { "" },
                if n == 1 { "" } else { "s" }
            ),
        ),
    }
    Ok(())
}

/// The selected operation in full, as a scrollable report: the payload
/// panel shows only what fits beside the evidence.
fn show_operation(app: &mut App) {
    let Some(d) = app.selected_detail() else {
        set_status(app, Tone::Warn, "no operation is selected");
        return;
    };
    let lines = view::operation_text(d)
        .into_iter()
        .map(|line| (Tone::Plain, line))
        .collect();
    app.mode = Mode::Report(Report {
        title: format!("operation {}", d.operation.op_id),
        lines,
        scroll: 0,
    });
}

/// The most operations `v` marks at once: each mark holds the payload
/// it was marked with, and a bulk decision reads each receiver, so a
/// filter that shows more is narrowed first.
pub const MAX_MARKS: usize = 100_000;

fn mark_of(op: &Operation) -> Mark {
    Mark {
        version: op.version,
        state: op.state,
        payload: op.payload.clone(),
        receiver: op.receiver.clone(),
    }
}

/// `v`: every operation the filters show, read as keys in one walk of
/// the filter's index (up to one more than [`MAX_MARKS`]), each marked at
/// the version it has now. It still runs on the key loop: 63 ms (median)
/// for 49,896 operations in the console bench (`-- never`); a background
/// job would free the keys entirely. A filter that shows more than
/// [`MAX_MARKS`] marks nothing and says so.
fn mark_all(app: &mut App) -> Result<()> {
    let filter = app.queue_filter();
    // One walk of the filter's index, keys only (not whole queue rows).
    let found = app.ws.queue_keys(filter, MAX_MARKS + 1)?;
    if found.len() > MAX_MARKS {
        let text = format!(
            "nothing marked: the filter shows more than {MAX_MARKS} operations; narrow it \
             (f verdict, ! escalation, / search) first"
        );
        set_status(app, Tone::Warn, text);
        return Ok(());
    }
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
        filter_words(app),
        app.marks.len()
    );
    set_status(app, Tone::Plain, text);
    Ok(())
}

fn toggle_mark(app: &mut App) {
    let Some(op) = app.selected().cloned() else {
        set_status(app, Tone::Warn, "no operation is selected");
        return;
    };
    if app.marks.remove(&op.op_id).is_some() {
        let text = format!("unmarked {}; {} marked", op.op_id, app.marks.len());
        set_status(app, Tone::Plain, text);
    } else {
        app.marks.insert(op.op_id.clone(), mark_of(&op));
        let text = format!(
            "marked {} at version {}; {} marked: x, c or n applies to all of them",
            op.op_id,
            op.version,
            app.marks.len()
        );
        set_status(app, Tone::Plain, text);
    }
    // Marking moves on, so several can be marked with repeated presses.
    if app.queue.cursor + 1 < app.queue.rows.len() {
        app.queue.cursor += 1;
        if let Err(e) = queue::selection_changed(app, Origin::Selected) {
            fail(app, &e);
        }
    }
}
