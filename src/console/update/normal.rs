//! The queue's own keys, and the overlays a reviewer only reads.
//!
//! Everything here moves, filters, marks, reads or scrolls; none of it
//! writes. A mutation key only starts a request, which goes through
//! [`super::confirm`] before anything is written. Marks record the version
//! and payload the reviewer saw, because that is what a bulk decision is
//! later checked against.

use super::super::action::{Action, Resume};
use super::super::app::Anchor;
use super::super::app::{App, Filter, MarkErrand, Mode, Origin, Progress, Report, Tone, Working};
use super::super::bindings::key_for_action;
use super::super::field::TextField;
use super::super::view::{self, filter_words};
use super::background::{mark_of, MAX_MARKS};
use super::confirm;
use super::queue;
use super::status::{fail, set_status};
use super::triage;
use crate::domain::team::TeamRole;
use crate::error::Result;
use std::sync::Arc;

/// A key in the queue.
pub(super) fn normal(app: &mut App, action: Action) -> Result<()> {
    if let Some(role) = app.lacks(action) {
        lacking(app, action, role);
        return Ok(());
    }
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
            // What the last search (or anything else) said is not about
            // the one being typed.
            app.status = None;
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
        Action::Resolve => triage::start(app, Resume::Resolve),
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
        Action::Cancel => back_out(app),
        _ => Ok(()),
    }
}

/// A key whose act needs a role the login lacks, as the database said:
/// no dialog, no form, nothing written; the status line names the role
/// and who grants it.
fn lacking(app: &mut App, action: Action, role: TeamRole) {
    let login = app.ws.session_role().unwrap_or("LOGIN").to_string();
    let text = format!(
        "{} {}; ask the outbox's owner: recon db grant {login} {}",
        key_for_action(action),
        app.needs(role),
        role.short()
    );
    set_status(app, Tone::Warn, text);
}

/// A key in the help overlay.
pub(super) fn help(app: &mut App, scroll: u16, action: Action) {
    if let Some(scroll) = scrolled(app, scroll, action) {
        app.mode = Mode::Help { scroll };
    } else if matches!(action, Action::Cancel | Action::Help) {
        app.mode = Mode::Normal;
    }
}

/// A key in a report.
pub(super) fn report(app: &mut App, mut report: Report, action: Action) {
    if let Some(scroll) = scrolled(app, report.scroll, action) {
        report.scroll = scroll;
        app.mode = Mode::Report(report);
    } else if action == Action::Cancel {
        app.mode = Mode::Normal;
    }
}

/// Where a scroll key moves the open help or report, now scrolled to
/// `scroll`: a line, a page, the top or the end, never past its last line
/// (so a key back up always moves it); `None` for any other key.
fn scrolled(app: &App, scroll: u16, action: Action) -> Option<u16> {
    let area = ratatui::layout::Rect::new(0, 0, app.width, app.height);
    let view::Scroll { last, page } = view::overlay_scroll(app, area)?;
    let to = match action {
        Action::ScrollDown => scroll.saturating_add(1),
        Action::ScrollUp => scroll.saturating_sub(1),
        Action::PageDown => scroll.saturating_add(page),
        Action::PageUp => scroll.saturating_sub(page),
        Action::First => 0,
        Action::Last => last,
        _ => return None,
    };
    Some(to.min(last))
}

/// Esc in the queue backs out one level: a job running off the key loop
/// is asked to stop (after the operation in hand); otherwise the search
/// goes, then the verdict and escalation filters, then (asked first) the
/// marks. The status line says which.
fn back_out(app: &mut App) -> Result<()> {
    if let Some(working) = &app.working {
        working.progress.cancel();
        let text = format!(
            "cancelling {}: it stops after the operation in hand, and its report says what \
             was written",
            working.text.trim_end_matches('…')
        );
        set_status(app, Tone::Warn, text);
        return Ok(());
    }
    if app.search.take().is_some() {
        queue::load_queue(app, Anchor::Start)?;
        set_status(
            app,
            Tone::Plain,
            "search cleared; Esc again clears the filters",
        );
        return Ok(());
    }
    if app.triage_filtered() {
        app.verdict_filter = None;
        app.escalated_filter = None;
        queue::load_queue(app, Anchor::Start)?;
        let next = if app.marks.is_empty() {
            ""
        } else {
            "; Esc again asks to drop the marks"
        };
        set_status(
            app,
            Tone::Plain,
            format!("verdict and escalation filters cleared{next}"),
        );
        return Ok(());
    }
    if !app.marks.is_empty() {
        let pending = confirm::unmark_pending(app.marks.len());
        confirm::open_dialog(app, pending);
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

/// `v`: every operation the filters show, read page by page off the key
/// loop (its progress on screen, Esc cancels it) and marked when they
/// land ([`land_marks`]), each at the version it has then. Refused, with
/// the reason, while another long act runs.
fn mark_all(app: &mut App) -> Result<()> {
    if let Some(working) = &app.working {
        let text = format!(
            "v is unavailable: wait: {} is still running (Esc cancels it)",
            working.text
        );
        set_status(app, Tone::Warn, text);
        return Ok(());
    }
    let errand = MarkErrand {
        filters: app.filters(),
        limit: MAX_MARKS,
        words: filter_words(app),
        since: app.seen.journal.length,
    };
    let total = app
        .shown_count()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    let progress = Arc::new(Progress::new(total));
    let working = Working {
        text: format!(
            "marking every operation the filter shows ({})…",
            errand.words
        ),
        op_ids: Vec::new(),
        progress: Arc::clone(&progress),
    };
    app.background.mark_all(errand, progress)?;
    let text = format!("{}; keys keep working, Esc cancels", working.text);
    set_status(app, Tone::Plain, text);
    app.working = Some(working);
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
