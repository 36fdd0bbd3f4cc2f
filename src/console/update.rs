//! Acting on actions: the only code that changes the [`App`], and the only
//! console code that calls the library.
//!
//! Navigation reads one keyset page (or one row) next to what is on screen;
//! a selection change reloads the selected operation's detail and a fresh,
//! non-closing snapshot. Every mutation takes the same road: availability
//! (the reason is shown when it is not), the reviewer's name (asked once),
//! a confirmation that names exactly what will happen, and only then the
//! library call, with the version the reviewer saw. Refusals come back as
//! reports in words with their code; a stale version says what the
//! operation is now and who changed it, and the console refreshes. Errors
//! never escape `update`: they become the status line or a report, so
//! nothing a database or a child process does can crash the console.

use super::action::{Action, Request};
use super::app::{
    App, CompensationForm, Detail, Filter, Job, Mark, Mode, Origin, Pending, Report, Shown, Status,
    Target, Tone,
};
use super::view;
use crate::domain::policy::{self, Act};
use crate::domain::{differing_paths, names, normalize_name, CompensationRequest, Decision};
use crate::domain::{PageBound, QueueFilter};
use crate::error::{Error, Refusal};
use crate::sanitize;
use crate::workspace::ReconcileRequest;

type Result<T> = crate::Result<T>;

/// Applies one action to the app.
pub fn update(app: &mut App, action: Action) {
    if let Err(error) = apply(app, action) {
        fail(app, &error);
    }
}

fn apply(app: &mut App, action: Action) -> Result<()> {
    match action {
        Action::Quit => {
            app.should_quit = true;
            Ok(())
        }
        Action::Resize(width, height) => resize(app, width, height),
        Action::Poll => poll(app),
        other => match app.mode.clone() {
            Mode::Normal => normal(app, other),
            Mode::Help { scroll } => {
                match other {
                    Action::ScrollDown => app.mode = Mode::Help { scroll: scroll + 1 },
                    Action::ScrollUp => {
                        app.mode = Mode::Help {
                            scroll: scroll.saturating_sub(1),
                        }
                    }
                    Action::Cancel | Action::Help => app.mode = Mode::Normal,
                    _ => {}
                }
                Ok(())
            }
            Mode::Report(mut report) => {
                match other {
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
                Ok(())
            }
            Mode::Search { input } => search_input(app, input, other),
            Mode::Reviewer {
                input,
                error,
                resume,
            } => reviewer_input(app, input, error, resume, other),
            Mode::Compensate(form) => form_input(app, form, other),
            Mode::Confirm(pending) => match other {
                Action::Confirm => {
                    app.mode = Mode::Normal;
                    run_job(app, pending.job)
                }
                Action::Cancel => {
                    app.mode = Mode::Normal;
                    set_status(app, Tone::Plain, "cancelled; nothing was written");
                    Ok(())
                }
                _ => Ok(()),
            },
        },
    }
}

fn normal(app: &mut App, action: Action) -> Result<()> {
    match action {
        Action::Down => move_down(app, 1),
        Action::Up => move_up(app, 1),
        Action::PageDown => move_down(app, app.queue.height.max(1)),
        Action::PageUp => move_up(app, app.queue.height.max(1)),
        Action::First => load_queue(app, Anchor::Start),
        Action::Last => load_queue(app, Anchor::End),
        Action::NextFilter => set_filter(app, (app.filter.index() + 1) % Filter::ORDER.len()),
        Action::PrevFilter => set_filter(
            app,
            (app.filter.index() + Filter::ORDER.len() - 1) % Filter::ORDER.len(),
        ),
        Action::Filter(index) => set_filter(app, index),
        Action::Search => {
            app.mode = Mode::Search {
                input: String::new(),
            };
            Ok(())
        }
        Action::ToggleMark => {
            toggle_mark(app);
            Ok(())
        }
        Action::ReadSnapshot => {
            if app.selected().is_none() {
                set_status(app, Tone::Warn, "no operation is selected");
                return Ok(());
            }
            load_detail(app, Origin::Read)?;
            if let Some(d) = &app.detail {
                let text = format!(
                    "read snapshot of {}: {} ({} match{})",
                    d.operation.op_id,
                    d.snapshot.verdict,
                    d.snapshot.snapshot.matches.len(),
                    if d.snapshot.snapshot.matches.len() == 1 {
                        ""
                    } else {
                        "es"
                    }
                );
                set_status(app, Tone::Plain, text);
            }
            Ok(())
        }
        Action::ShowOperation => {
            show_operation(app);
            Ok(())
        }
        Action::Request(request) => start_request(app, request),
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
        Action::Cancel => {
            let had_search = app.search.take().is_some();
            let marks = app.marks.len();
            app.marks.clear();
            if had_search {
                load_queue(app, Anchor::Start)?;
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
        _ => Ok(()),
    }
}

// ---- the queue -------------------------------------------------------------

/// Where to (re)load the queue from.
enum Anchor {
    Start,
    End,
    /// Keep the rows from this op id on, and the cursor on `selected` if it
    /// is still listed.
    At {
        top: String,
        selected: String,
    },
}

fn queue_filter(app: &App) -> QueueFilter<'_> {
    QueueFilter {
        state: app.filter.state(),
        search: app.search.as_deref(),
    }
}

fn page(app: &App, bound: PageBound<'_>, limit: usize) -> Result<Vec<crate::domain::Operation>> {
    app.ws.queue_page(queue_filter(app), bound, limit)
}

fn current_anchor(app: &App) -> Anchor {
    match (app.queue.rows.first(), app.selected()) {
        (Some(top), Some(selected)) => Anchor::At {
            top: top.op_id.clone(),
            selected: selected.op_id.clone(),
        },
        _ => Anchor::Start,
    }
}

fn load_queue(app: &mut App, anchor: Anchor) -> Result<()> {
    load_queue_as(app, anchor, Origin::Selected)
}

/// Loads one screenful at the anchor, filling it from above near the end of
/// the list, and reloads the selected operation's detail.
fn load_queue_as(app: &mut App, anchor: Anchor, origin: Origin) -> Result<()> {
    let height = app.queue.height.max(1);
    let (mut rows, mut cursor) = match &anchor {
        Anchor::Start => (page(app, PageBound::Start, height)?, 0),
        Anchor::End => (page(app, PageBound::End, height)?, usize::MAX),
        Anchor::At { top, .. } => (page(app, PageBound::From(top), height)?, app.queue.cursor),
    };
    if rows.len() < height {
        let missing = height - rows.len();
        let before = match (rows.first(), &anchor) {
            (Some(first), _) => page(app, PageBound::Before(&first.op_id), missing)?,
            (None, Anchor::At { top, .. }) => page(app, PageBound::Before(top), missing)?,
            (None, _) => Vec::new(),
        };
        if cursor != usize::MAX {
            cursor += before.len();
        }
        rows.splice(0..0, before);
    }
    if let Anchor::At { selected, .. } = &anchor {
        if let Some(i) = rows.iter().position(|r| &r.op_id == selected) {
            cursor = i;
        }
    }
    app.queue.cursor = cursor.min(rows.len().saturating_sub(1));
    app.queue.rows = rows;
    selection_changed(app, origin)
}

fn move_down(app: &mut App, by: usize) -> Result<()> {
    let height = app.queue.height.max(1);
    let len = app.queue.rows.len();
    let Some(last) = app.queue.rows.last().map(|r| r.op_id.clone()) else {
        return Ok(());
    };
    if app.queue.cursor + by < len {
        app.queue.cursor += by;
        return selection_changed(app, Origin::Selected);
    }
    let fetched = page(app, PageBound::After(&last), by)?;
    if fetched.is_empty() && app.queue.cursor + 1 == len {
        return Ok(());
    }
    let mut combined = std::mem::take(&mut app.queue.rows);
    combined.extend(fetched);
    let target = (app.queue.cursor + by).min(combined.len() - 1);
    // The target ends up on the last row of a full screen.
    let start = (target + 1).saturating_sub(height);
    combined.truncate(target + 1);
    app.queue.rows = combined.split_off(start);
    app.queue.cursor = target - start;
    selection_changed(app, Origin::Selected)
}

fn move_up(app: &mut App, by: usize) -> Result<()> {
    let height = app.queue.height.max(1);
    let Some(first) = app.queue.rows.first().map(|r| r.op_id.clone()) else {
        return Ok(());
    };
    if app.queue.cursor >= by {
        app.queue.cursor -= by;
        return selection_changed(app, Origin::Selected);
    }
    let fetched = page(app, PageBound::Before(&first), by)?;
    if fetched.is_empty() && app.queue.cursor == 0 {
        return Ok(());
    }
    let shift = fetched.len();
    let mut combined = fetched;
    combined.append(&mut app.queue.rows);
    // The target ends up on the first row.
    let target = (app.queue.cursor + shift).saturating_sub(by);
    let mut rows = combined.split_off(target);
    rows.truncate(height);
    app.queue.rows = rows;
    app.queue.cursor = 0;
    selection_changed(app, Origin::Selected)
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

fn set_filter(app: &mut App, index: usize) -> Result<()> {
    let Some(filter) = Filter::ORDER.get(index).copied() else {
        return Ok(());
    };
    app.filter = filter;
    load_queue(app, Anchor::Start)
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
        app.marks.insert(
            op.op_id.clone(),
            Mark {
                version: op.version,
                state: op.state,
                payload: op.payload.clone(),
            },
        );
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
        if let Err(e) = selection_changed(app, Origin::Selected) {
            fail(app, &e);
        }
    }
}

fn resize(app: &mut App, width: u16, height: u16) -> Result<()> {
    app.width = width;
    app.height = height;
    let rows = view::queue_rows(width, height);
    if rows != app.queue.height || app.queue.rows.is_empty() {
        app.queue.height = rows;
        let anchor = current_anchor(app);
        load_queue(app, anchor)?;
    }
    Ok(())
}

// ---- the selected operation --------------------------------------------------

fn selection_changed(app: &mut App, origin: Origin) -> Result<()> {
    let same = matches!(
        (app.selected(), &app.detail),
        (Some(s), Some(d)) if s.op_id == d.operation.op_id
    );
    if !same {
        app.snapshot_scroll = 0;
    }
    load_detail(app, origin)
}

/// Loads the selected operation's record, evidence, approvals and closure,
/// and takes a fresh non-closing snapshot of it.
fn load_detail(app: &mut App, origin: Origin) -> Result<()> {
    let Some(op_id) = app.selected().map(|o| o.op_id.clone()) else {
        app.detail = None;
        return Ok(());
    };
    let shown = app.ws.show(&op_id)?;
    let classified = app.ws.snapshot(&op_id, None)?;
    app.detail = Some(detail_from(app, shown, classified, origin)?);
    Ok(())
}

fn detail_from(
    app: &App,
    shown_detail: crate::workspace::OpDetail,
    classified: crate::workspace::Classified,
    origin: Origin,
) -> Result<Detail> {
    let op_id = shown_detail.operation.op_id.clone();
    Ok(Detail {
        closure: app.ws.closure(&op_id)?,
        dispatches: app.ws.dispatch_count(&op_id)?,
        snapshot: shown(&classified.operation, classified.clone(), origin),
        operation: classified.operation,
        evidence: shown_detail.evidence,
        approvals: shown_detail.approvals,
    })
}

/// Reloads counts, the page on screen and the selected detail.
fn refresh(app: &mut App, origin: Origin) -> Result<()> {
    app.counts = app.ws.counts()?;
    let anchor = current_anchor(app);
    load_queue_as(app, anchor, origin)?;
    app.seen_version = app.ws.data_version()?;
    Ok(())
}

/// Live updates: another process's commit changes `PRAGMA data_version`;
/// this connection's own commits do not, and are refreshed where they
/// happen.
fn poll(app: &mut App) -> Result<()> {
    let now = app.ws.data_version()?;
    if now == app.seen_version {
        return Ok(());
    }
    refresh(app, Origin::Refreshed)?;
    if app.status.as_ref().is_none_or(|s| s.tone == Tone::Plain) {
        set_status(
            app,
            Tone::Plain,
            "updated: another process changed the workspace",
        );
    }
    Ok(())
}

// ---- text input ---------------------------------------------------------------

fn search_input(app: &mut App, mut input: String, action: Action) -> Result<()> {
    match action {
        Action::Input(c) => {
            input.push(c);
            app.mode = Mode::Search { input };
        }
        Action::Backspace => {
            input.pop();
            app.mode = Mode::Search { input };
        }
        Action::Cancel => app.mode = Mode::Normal,
        Action::Submit => {
            app.mode = Mode::Normal;
            let text = input.trim().to_string();
            app.search = (!text.is_empty()).then_some(text);
            load_queue(app, Anchor::Start)?;
            let text = match &app.search {
                Some(s) if app.queue.rows.is_empty() => {
                    format!("no {} operation matches \"{s}\"", app.filter.label())
                }
                Some(s) => format!("search \"{s}\" in {}; Esc clears it", app.filter.label()),
                None => "search cleared".to_string(),
            };
            set_status(app, Tone::Plain, text);
        }
        _ => app.mode = Mode::Search { input },
    }
    Ok(())
}

/// Checks a reviewer name as the command line does: blank is refused as
/// `empty_reviewer`, control characters and overlong names too.
pub fn check_reviewer(name: &str) -> std::result::Result<String, String> {
    let Some(name) = normalize_name(name) else {
        return Err(format!(
            "refused: {}: {}",
            Refusal::EmptyReviewer.code(),
            Refusal::EmptyReviewer
        ));
    };
    if name.chars().any(sanitize::is_unsafe) {
        return Err("the name contains control characters".to_string());
    }
    if name.chars().count() > 200 {
        return Err("the name is longer than 200 characters".to_string());
    }
    Ok(name.to_string())
}

fn reviewer_input(
    app: &mut App,
    mut input: String,
    error: Option<String>,
    resume: Request,
    action: Action,
) -> Result<()> {
    match action {
        Action::Input(c) => {
            input.push(c);
            app.mode = Mode::Reviewer {
                input,
                error: None,
                resume,
            };
        }
        Action::Backspace => {
            input.pop();
            app.mode = Mode::Reviewer {
                input,
                error,
                resume,
            };
        }
        Action::Cancel => {
            app.mode = Mode::Normal;
            set_status(app, Tone::Plain, "cancelled; nothing was written");
        }
        Action::Submit => match check_reviewer(&input) {
            Ok(name) => {
                app.reviewer = Some(name.clone());
                app.mode = Mode::Normal;
                set_status(
                    app,
                    Tone::Plain,
                    format!("reviewing as {name}; the name is recorded with each change"),
                );
                return start_request(app, resume);
            }
            Err(reason) => {
                app.mode = Mode::Reviewer {
                    input,
                    error: Some(reason),
                    resume,
                }
            }
        },
        _ => {
            app.mode = Mode::Reviewer {
                input,
                error,
                resume,
            }
        }
    }
    Ok(())
}

fn form_input(app: &mut App, mut form: CompensationForm, action: Action) -> Result<()> {
    match action {
        Action::Input(c) => {
            form.fields[form.focus].push(c);
            form.error = None;
        }
        Action::Backspace => {
            form.fields[form.focus].pop();
        }
        Action::NextField => form.focus = (form.focus + 1) % form.fields.len(),
        Action::PrevField => form.focus = (form.focus + form.fields.len() - 1) % form.fields.len(),
        Action::Cancel => {
            app.mode = Mode::Normal;
            set_status(app, Tone::Plain, "cancelled; nothing was written");
            return Ok(());
        }
        Action::Submit => {
            match approval_pending(app, &form) {
                Ok(pending) => app.mode = Mode::Confirm(pending),
                Err(reason) => {
                    form.error = Some(reason);
                    app.mode = Mode::Compensate(form);
                }
            }
            return Ok(());
        }
        _ => {}
    }
    app.mode = Mode::Compensate(form);
    Ok(())
}

// ---- mutations: request, confirm, run ------------------------------------------

fn start_request(app: &mut App, request: Request) -> Result<()> {
    if let Err(reason) = app.availability(request) {
        set_status(
            app,
            Tone::Warn,
            format!("{} is unavailable: {reason}", request.name()),
        );
        return Ok(());
    }
    let Some(reviewer) = app.reviewer.clone() else {
        app.mode = Mode::Reviewer {
            input: String::new(),
            error: None,
            resume: request,
        };
        return Ok(());
    };
    let bulk = request.is_bulk() && !app.marks.is_empty();
    let targets = if bulk {
        app.marks
            .iter()
            .map(|(op_id, m)| Target {
                op_id: op_id.clone(),
                version: m.version,
                state: m.state,
                payload: m.payload.clone(),
            })
            .collect()
    } else {
        match app.selected_detail() {
            Some(d) => vec![Target {
                op_id: d.operation.op_id.clone(),
                version: d.operation.version,
                state: d.operation.state,
                payload: d.operation.payload.clone(),
            }],
            None => Vec::new(),
        }
    };
    let verdict_shown = app.selected_detail().map(|d| d.snapshot.verdict);
    let pending = match request {
        Request::Close => close_pending(&reviewer, targets),
        Request::Decide(decision) => decide_pending(
            &reviewer,
            decision,
            targets,
            (!bulk).then_some(verdict_shown).flatten(),
        ),
        Request::Compensate => {
            let Some(d) = app.selected_detail() else {
                return Ok(());
            };
            let op = &d.operation;
            let effect = op.confirmed_effect_id.clone().unwrap_or_default();
            app.mode = Mode::Compensate(CompensationForm {
                original_op_id: op.op_id.clone(),
                effect_id: effect.clone(),
                expected_version: op.version,
                fields: [
                    format!("{}-undo", op.op_id),
                    format!("undo_{}", op.action_kind),
                    serde_json::json!({
                        "original_op_id": op.op_id,
                        "undo_effect_id": effect,
                    })
                    .to_string(),
                ],
                focus: 0,
                error: None,
            });
            return Ok(());
        }
        Request::Dispatch => {
            let Some(d) = app.selected_detail() else {
                return Ok(());
            };
            dispatch_pending(&d.operation)
        }
    };
    app.mode = Mode::Confirm(pending);
    Ok(())
}

fn close_pending(reviewer: &str, targets: Vec<Target>) -> Pending {
    let mut lines = Vec::new();
    if let [one] = targets.as_slice() {
        lines.push(format!(
            "Take a CLOSING snapshot of {}, authorized by {reviewer}.",
            one.op_id
        ));
    } else {
        lines.push(format!(
            "Take a CLOSING snapshot of each of these {} marked operations, authorized by {reviewer}:",
            targets.len()
        ));
        for t in &targets {
            lines.push(format!("  {}  (marked at version {})", t.op_id, t.version));
        }
    }
    lines.push(String::new());
    lines.push(
        "This is a receiver mutation, not a read: it writes a durable close tombstone in \
         receiver.sqlite, and from then on the receiver refuses every write for the operation. \
         A request that is still in flight is refused instead of applied: closing can cancel \
         an original that has not landed yet. It cannot be undone."
            .to_string(),
    );
    lines.push(format!(
        "{reviewer} is recorded in the tombstone as the one who authorized it. An operation \
         whose version changed since you saw it is not closed."
    ));
    Pending {
        title: "closing snapshot (receiver mutation)".to_string(),
        lines,
        yes: "close".to_string(),
        job: Job::Close { targets },
    }
}

fn decide_pending(
    reviewer: &str,
    decision: Decision,
    targets: Vec<Target>,
    verdict_shown: Option<crate::domain::Verdict>,
) -> Pending {
    let mut lines = Vec::new();
    if let [one] = targets.as_slice() {
        lines.push(format!(
            "Record {decision} for {} as reviewer {reviewer}, against version {} ({}).",
            one.op_id, one.version, one.state
        ));
        lines.push(String::new());
        lines.push(format!(
            "recon takes a fresh non-closing snapshot and classifies it; the decision is \
             recorded only if {} is still unknown at version {} and the verdict supports \
             {decision}{}.",
            one.op_id,
            one.version,
            verdict_shown
                .map(|v| format!(" (the snapshot on screen says {v})"))
                .unwrap_or_default()
        ));
    } else {
        lines.push(format!(
            "Record {decision} for each of these {} marked operations as reviewer {reviewer}, \
             each against the version it had when you marked it:",
            targets.len()
        ));
        for t in &targets {
            lines.push(format!(
                "  {}  version {} ({})",
                t.op_id, t.version, t.state
            ));
        }
        lines.push(String::new());
        lines.push(format!(
            "Each gets its own fresh non-closing snapshot and verdict. One that is no longer \
             at its marked version, or whose verdict does not support {decision}, is refused \
             and left unchanged; the result lists what was recorded and what was refused."
        ));
    }
    lines.push(match decision {
        Decision::Confirmed => {
            "The snapshot is appended to the evidence log with your name, and the one matching \
             effect becomes the operation's confirmed effect."
                .to_string()
        }
        Decision::NotApplied => {
            "The snapshot is appended to the evidence log with your name. not_applied ends the \
             flow: nothing retries or replaces the operation."
                .to_string()
        }
    });
    Pending {
        title: format!("record {decision}"),
        lines,
        yes: format!("record {decision}"),
        job: Job::Decide {
            decision,
            targets,
            verdict_shown,
        },
    }
}

fn approval_pending(app: &App, form: &CompensationForm) -> std::result::Result<Pending, String> {
    let Some(reviewer) = app.reviewer.clone() else {
        return Err("no reviewer name".to_string());
    };
    let op_id = names::identifier("the compensation op id", form.fields[0].trim())?.to_string();
    let action = names::identifier("the action kind", form.fields[1].trim())?.to_string();
    let payload: serde_json::Value = serde_json::from_str(&form.fields[2])
        .map_err(|e| format!("the payload is not JSON: {e}"))?;
    let lines = vec![
        format!(
            "Approve compensation {op_id} for effect {} of {} (confirmed at version {}), \
             approved by {reviewer}:",
            form.effect_id, form.original_op_id, form.expected_version
        ),
        format!("  action:  {action}"),
        format!("  payload: {payload}"),
        String::new(),
        format!(
            "The approval and the new compensation operation {op_id} (prepared, compensating \
             exactly {}) commit in one transaction. Nothing is sent yet: dispatch {op_id} \
             with d, which checks the approval again first.",
            form.effect_id
        ),
    ];
    Ok(Pending {
        title: "approve compensation".to_string(),
        lines,
        yes: "approve".to_string(),
        job: Job::Approve {
            original_op_id: form.original_op_id.clone(),
            effect_id: form.effect_id.clone(),
            expected_version: form.expected_version,
            compensation_op_id: op_id,
            action_kind: action,
            payload,
        },
    })
}

fn dispatch_pending(op: &crate::domain::Operation) -> Pending {
    let mut lines = vec![
        format!(
            "Dispatch {} ({}) now, from version {} ({}).",
            op.op_id, op.action_kind, op.version, op.state
        ),
        String::new(),
        format!(
            "recon first commits {} as unknown (version {}) with a dispatch log row, then runs \
             the receiver child (recon receiver apply). A receipt confirms it; without one it \
             stays unknown for review. This happens once: a second dispatch is refused as \
             blind_retry.",
            op.op_id,
            op.version + 1
        ),
    ];
    if let Some(effect) = &op.compensates_effect_id {
        lines.push(format!(
            "It compensates {effect}; its approval and the original's version are checked \
             again before the receiver runs."
        ));
    }
    Pending {
        title: "dispatch".to_string(),
        lines,
        yes: "dispatch".to_string(),
        job: Job::Dispatch {
            op_id: op.op_id.clone(),
            version: op.version,
        },
    }
}

/// What a job did to one operation.
struct Outcome {
    op_id: String,
    lines: Vec<(Tone, String)>,
    refusal: Option<Refusal>,
}

impl Outcome {
    fn done(op_id: &str, text: String) -> Outcome {
        Outcome {
            op_id: op_id.to_string(),
            lines: vec![(Tone::Good, text)],
            refusal: None,
        }
    }

    fn refused(op_id: &str, refusal: Refusal) -> Outcome {
        Outcome {
            op_id: op_id.to_string(),
            lines: refusal_lines(op_id, &refusal),
            refusal: Some(refusal),
        }
    }

    /// A refusal is an outcome; storage trouble stops the job.
    fn of<T>(op_id: &str, result: Result<T>, text: impl FnOnce(T) -> String) -> Result<Outcome> {
        match result {
            Ok(value) => Ok(Outcome::done(op_id, text(value))),
            Err(Error::Refused(refusal)) => Ok(Outcome::refused(op_id, refusal)),
            Err(other) => Err(other),
        }
    }
}

fn run_job(app: &mut App, job: Job) -> Result<()> {
    let reviewer = app.reviewer.clone().unwrap_or_default();
    match job {
        Job::Close { targets } => {
            let mut outcomes = Vec::new();
            let mut closing = None;
            for t in &targets {
                let result = close_one(app, t, &reviewer);
                outcomes.push(Outcome::of(&t.op_id, result, |classified| {
                    let n = classified.snapshot.matches.len();
                    let text = format!(
                        "closed {} (authorized by {reviewer}): {} ({n} match{})",
                        t.op_id,
                        classified.verdict,
                        if n == 1 { "" } else { "es" }
                    );
                    closing = Some(classified);
                    text
                })?);
            }
            finish_job(app, "closing snapshot", outcomes)?;
            // A single close: show the closing snapshot itself, labelled so.
            if let (Some(classified), [_]) = (closing, targets.as_slice()) {
                let origin = Origin::Closing {
                    authorized_by: reviewer.clone(),
                };
                if let Some(detail) = app
                    .detail
                    .as_mut()
                    .filter(|d| d.operation.op_id == classified.operation.op_id)
                {
                    detail.snapshot = shown(&detail.operation, classified, origin);
                }
            }
            Ok(())
        }
        Job::Decide {
            decision, targets, ..
        } => {
            let mut outcomes = Vec::new();
            for t in &targets {
                let result = app.ws.reconcile(&ReconcileRequest {
                    op_id: &t.op_id,
                    reviewer: &reviewer,
                    decision,
                    expected_version: t.version,
                    payload: Some(&t.payload),
                    close_authorized_by: None,
                });
                outcomes.push(Outcome::of(&t.op_id, result, |recorded| {
                    format!(
                        "recorded {decision} for {} on {}: evidence #{}, now version {}",
                        t.op_id,
                        recorded.verdict,
                        recorded.evidence_seq,
                        recorded.operation.version
                    )
                })?);
            }
            finish_job(app, &format!("record {decision}"), outcomes)
        }
        Job::Approve {
            original_op_id,
            effect_id,
            expected_version,
            compensation_op_id,
            action_kind,
            payload,
        } => {
            let result = app.ws.approve_compensation(&CompensationRequest {
                original_op_id: &original_op_id,
                effect_id: &effect_id,
                approver: &reviewer,
                expected_version,
                compensation_op_id: &compensation_op_id,
                action_kind: &action_kind,
                payload: &payload,
            });
            let outcome = Outcome::of(&original_op_id, result, |a| {
                format!(
                    "approved {} for {}; it waits under 2 prepared, where d dispatches it",
                    a.compensation_op_id, a.effect_id
                )
            })?;
            finish_job(app, "approve compensation", vec![outcome])
        }
        Job::Dispatch { op_id, version } => {
            let current = app.ws.require(&op_id)?;
            let result = recheck(app, Act::Dispatch, &current, version)
                .and_then(|()| app.ws.dispatch(&op_id, Default::default()));
            let outcome = Outcome::of(&op_id, result, |report| match &report.effect_id {
                Some(effect) => format!(
                    "dispatched {}: receipt for {effect}; now {} at version {}",
                    report.op_id, report.state, report.version
                ),
                None => format!(
                    "dispatched {}: no receipt (receiver exit {}); now {} at version {}: take \
                     a snapshot",
                    report.op_id,
                    report
                        .receiver_exit_code
                        .map_or("by signal".to_string(), |c| c.to_string()),
                    report.state,
                    report.version
                ),
            })?;
            finish_job(app, "dispatch", vec![outcome])
        }
    }
}

fn shown(
    op: &crate::domain::Operation,
    classified: crate::workspace::Classified,
    origin: Origin,
) -> Shown {
    let differing = classified
        .snapshot
        .matches
        .iter()
        .map(|m| differing_paths(&op.payload, &m.payload))
        .collect();
    Shown {
        snapshot: classified.snapshot,
        verdict: classified.verdict,
        origin,
        differing,
    }
}

/// One closing snapshot, only if the operation is still what the reviewer
/// saw (unknown, at that version), as `Workspace::reconcile` does.
fn close_one(
    app: &mut App,
    target: &Target,
    reviewer: &str,
) -> Result<crate::workspace::Classified> {
    let current = app.ws.require(&target.op_id)?;
    recheck(app, Act::Close, &current, target.version)?;
    app.ws.snapshot(&target.op_id, Some(reviewer))
}

/// The domain's recheck of an act against the version the reviewer saw; a
/// stale version names who made the latest recorded change.
fn recheck(
    app: &App,
    act: Act,
    current: &crate::domain::Operation,
    seen_version: i64,
) -> Result<()> {
    match policy::recheck(act, current, seen_version) {
        Err(Refusal::StaleVersion {
            expected,
            found,
            state,
            ..
        }) => {
            let changed_by = policy::last_changed_by(&app.ws.evidence(&current.op_id)?);
            Err(Refusal::StaleVersion {
                expected,
                found,
                state,
                changed_by,
            }
            .into())
        }
        other => Ok(other?),
    }
}

/// A refusal in words, with its code; a stale version also says what the
/// operation is now and who changed it.
fn refusal_lines(op_id: &str, refusal: &Refusal) -> Vec<(Tone, String)> {
    let mut lines = vec![(
        Tone::Bad,
        format!("refused {op_id}: {}: {refusal}", refusal.code()),
    )];
    match refusal {
        Refusal::StaleVersion {
            expected,
            found,
            state,
            ..
        } => lines.push((
            Tone::Plain,
            format!(
                "  you saw version {expected}; {op_id} is now {state} at version {found}, so \
                 nothing was recorded for it"
            ),
        )),
        Refusal::UnsupportedVerdict { verdict, .. } => {
            lines.push((Tone::Plain, format!("  {}", verdict.explanation())))
        }
        _ => {}
    }
    lines
}

/// After a job: refresh; one operation done reports in the status line, one
/// refused gets a refusal report, several get a report listing each. The
/// refused ones of a bulk job stay marked.
fn finish_job(app: &mut App, what: &str, outcomes: Vec<Outcome>) -> Result<()> {
    let refused: Vec<&Outcome> = outcomes.iter().filter(|o| o.refusal.is_some()).collect();
    let done = outcomes.len() - refused.len();
    let stale = refused
        .iter()
        .any(|o| matches!(o.refusal, Some(Refusal::StaleVersion { .. })));
    let refused_ids: Vec<String> = refused.iter().map(|o| o.op_id.clone()).collect();
    let bulk = outcomes.len() > 1;
    if bulk {
        app.marks.retain(|id, _| refused_ids.contains(id));
    }
    refresh(app, Origin::Selected)?;
    if let ([only], false) = (outcomes.as_slice(), bulk) {
        if only.refusal.is_none() {
            let text = only
                .lines
                .first()
                .map(|(_, t)| t.clone())
                .unwrap_or_default();
            set_status(app, Tone::Good, text);
            return Ok(());
        }
    }
    let mut lines = Vec::new();
    if bulk {
        lines.push((
            Tone::Plain,
            format!(
                "{done} recorded, {} refused, of {} marked operations; each was checked \
                 against its own version and verdict.",
                refused_ids.len(),
                outcomes.len()
            ),
        ));
        lines.push((Tone::Plain, String::new()));
    }
    for outcome in &outcomes {
        lines.extend(outcome.lines.iter().cloned());
    }
    lines.push((Tone::Plain, String::new()));
    lines.push((
        Tone::Plain,
        match (stale, bulk && !refused_ids.is_empty()) {
            (true, _) => "The console has refreshed and shows the workspace as it is now; look \
                          at the evidence again before deciding."
                .to_string(),
            (false, true) => "The refused operations stay marked and unchanged.".to_string(),
            (false, false) if refused_ids.is_empty() => String::new(),
            (false, false) => "Nothing was written.".to_string(),
        },
    ));
    let title = if bulk {
        format!(
            "bulk {what}: {done} recorded, {} refused",
            refused_ids.len()
        )
    } else {
        let code = refused
            .first()
            .and_then(|o| o.refusal.as_ref())
            .map_or("", Refusal::code);
        format!("{what} refused: {code}")
    };
    let tone = if refused_ids.is_empty() {
        Tone::Good
    } else {
        Tone::Bad
    };
    set_status(app, tone, title.clone());
    app.mode = Mode::Report(Report {
        title,
        lines,
        scroll: 0,
    });
    Ok(())
}

fn set_status(app: &mut App, tone: Tone, text: impl Into<String>) {
    app.status = Some(Status {
        tone,
        text: text.into(),
    });
}

/// Storage trouble, or a refusal outside a job: a report, never a crash.
fn fail(app: &mut App, error: &Error) {
    let (title, text) = match error {
        Error::Refused(r) => (
            format!("refused: {}", r.code()),
            format!("refused: {}: {r}", r.code()),
        ),
        Error::Store(e) => ("storage error".to_string(), format!("error: {e}")),
    };
    set_status(app, Tone::Bad, text.clone());
    app.mode = Mode::Report(Report {
        title,
        lines: vec![(Tone::Bad, text)],
        scroll: 0,
    });
}

impl App {
    /// Opens the console on a workspace: reads the counts and the first
    /// page for a screen of `width` x `height`, and selects the first row.
    pub fn open(
        ws: crate::workspace::Workspace,
        source: super::app::Source,
        options: super::app::Options,
        (width, height): (u16, u16),
    ) -> Result<App> {
        let mut app = App {
            seen_version: ws.data_version()?,
            counts: ws.counts()?,
            ws,
            source,
            reviewer: options.reviewer,
            theme: super::theme::Theme::new(options.no_color),
            width,
            height,
            filter: Filter::ORDER[0],
            search: None,
            queue: super::app::Queue {
                rows: Vec::new(),
                cursor: 0,
                height: view::queue_rows(width, height),
            },
            marks: Default::default(),
            detail: None,
            snapshot_scroll: 0,
            mode: Mode::Normal,
            status: None,
            should_quit: false,
            _demo_dir: None,
        };
        load_queue(&mut app, Anchor::Start)?;
        Ok(app)
    }

    /// Keeps a temporary workspace directory until the console is dropped.
    pub fn keep_dir(mut self, dir: tempfile::TempDir) -> App {
        self._demo_dir = Some(dir);
        self
    }
}
