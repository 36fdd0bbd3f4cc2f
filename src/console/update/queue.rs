//! What is on screen, and how it is reloaded: one keyset page of the queue,
//! the cursor in it, and the selected operation's detail with a fresh read.
//!
//! The queue never holds more than a screenful. Moving past either end
//! reads the next rows from the database next to what is shown, and a
//! reload keeps the cursor on the same operation when it is still listed,
//! so a refresh after another process's commit (or the console's own) does
//! not throw the reviewer off their place. A selection change always takes
//! a new, non-closing snapshot: the verdict shown is never older than the
//! selection. The built-in ledger is read in process; an adapter is read
//! off the key loop (started here, landed by `background`), and its
//! verdict shows when the read lands; a read that cannot start says why.

use super::super::app::{
    App, Detail, Filter, Mode, Origin, Pending, ReadErrand, ReadState, Report, SearchErrand, Shown,
    Tone,
};
use super::super::view;
use super::status::set_status;
use crate::domain::{differing_paths, Moved, Operation, PageBound};
use crate::error::{Result, StoreError};
use crate::workspace::{ChangeMarker, Classified};

/// Where to (re)load the queue from.
pub(super) enum Anchor {
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

fn page(app: &App, bound: PageBound<'_>, limit: usize) -> Result<Vec<Operation>> {
    app.ws.queue_page(app.queue_filter(), bound, limit)
}

/// Counts what a verdict or escalation filter selects (one index range),
/// so the title keeps the position under every filter.
fn count_filter(app: &mut App) -> Result<()> {
    app.filter_count = if app.triage_filtered() {
        Some(app.ws.queue_count(app.queue_filter())?)
    } else {
        None
    };
    Ok(())
}

/// The page on screen as an anchor; `kept` says whether the operations
/// before it are still the ones counted (nothing changed them since).
fn current_anchor(app: &App, kept: bool) -> Anchor {
    match (app.queue.rows.first(), app.selected()) {
        (Some(top), Some(selected)) => Anchor::At {
            top: top.op_id.clone(),
            selected: selected.op_id.clone(),
            offset: app.queue.offset.filter(|_| kept),
        },
        _ => Anchor::Start,
    }
}

pub(super) fn load_queue(app: &mut App, anchor: Anchor) -> Result<()> {
    load_queue_as(app, anchor, Origin::Selected)
}

/// Loads one screenful at the anchor, filling it from above near the end of
/// the list, and reloads the selected operation's detail.
fn load_queue_as(app: &mut App, anchor: Anchor, origin: Origin) -> Result<()> {
    count_filter(app)?;
    let height = app.queue.height.max(1);
    let (mut rows, mut cursor, mut offset) = match &anchor {
        Anchor::Start => (page(app, PageBound::Start, height)?, 0, Some(0)),
        Anchor::End => (page(app, PageBound::End, height)?, usize::MAX, None),
        Anchor::At { top, offset, .. } => (
            page(app, PageBound::From(top), height)?,
            app.queue.cursor,
            *offset,
        ),
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
        // Fewer than asked for: the page now starts at the first row.
        offset = if before.len() < missing {
            Some(0)
        } else {
            offset.and_then(|o| o.checked_sub(before.len()))
        };
        rows.splice(0..0, before);
    }
    if let Anchor::At { selected, .. } = &anchor {
        if let Some(i) = rows.iter().position(|r| &r.op_id == selected) {
            cursor = i;
        }
    }
    app.queue.cursor = cursor.min(rows.len().saturating_sub(1));
    app.queue.rows = rows;
    app.queue.offset = match (offset, &anchor) {
        (None, Anchor::End) => offset_at_end(app),
        (None, _) => find_offset(app)?,
        (known, _) => known,
    };
    selection_changed(app, origin)
}

/// The offset of a page that ends at the filter's last row, from the
/// filter's count; a search has no count.
fn offset_at_end(app: &App) -> Option<usize> {
    let count = usize::try_from(app.shown_count()?).ok()?;
    count.checked_sub(app.queue.rows.len())
}

/// The offset of a page whose offset was lost, when the page is at either
/// end of the filter: one indexed row on each side tells. A search is not
/// probed, since its rows are found by reading past those that do not
/// match, which is not cheap in a large outbox.
fn find_offset(app: &App) -> Result<Option<usize>> {
    let (Some(first), Some(last), None) = (
        app.queue.rows.first(),
        app.queue.rows.last(),
        app.search.as_ref(),
    ) else {
        return Ok(None);
    };
    if page(app, PageBound::Before(&first.op_id), 1)?.is_empty() {
        return Ok(Some(0));
    }
    if page(app, PageBound::After(&last.op_id), 1)?.is_empty() {
        return Ok(offset_at_end(app));
    }
    Ok(None)
}

pub(super) fn move_down(app: &mut App, by: usize) -> Result<()> {
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
    let at_end = fetched.len() < by;
    let mut combined = std::mem::take(&mut app.queue.rows);
    combined.extend(fetched);
    let target = (app.queue.cursor + by).min(combined.len() - 1);
    // The target ends up on the last row of a full screen.
    let start = (target + 1).saturating_sub(height);
    combined.truncate(target + 1);
    app.queue.rows = combined.split_off(start);
    app.queue.cursor = target - start;
    app.queue.offset = match app.queue.offset {
        Some(offset) => Some(offset + start),
        None if at_end => offset_at_end(app),
        None => None,
    };
    selection_changed(app, Origin::Selected)
}

pub(super) fn move_up(app: &mut App, by: usize) -> Result<()> {
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
    // Fewer than asked for: the combined rows start at the first row.
    let base = if shift < by {
        Some(0)
    } else {
        app.queue.offset.and_then(|o| o.checked_sub(shift))
    };
    let mut combined = fetched;
    combined.append(&mut app.queue.rows);
    // The target ends up on the first row.
    let target = (app.queue.cursor + shift).saturating_sub(by);
    let mut rows = combined.split_off(target);
    rows.truncate(height);
    app.queue.rows = rows;
    app.queue.cursor = 0;
    app.queue.offset = base.map(|b| b + target);
    selection_changed(app, Origin::Selected)
}

pub(super) fn set_filter(app: &mut App, index: usize) -> Result<()> {
    let Some(filter) = Filter::ORDER.get(index).copied() else {
        return Ok(());
    };
    app.filter = filter;
    load_queue(app, Anchor::Start)
}

/// Shows the queue under its search from the first match. A substring
/// match reads rows until it has a page (at 60,000 operations a search
/// that matches nothing took 75-110 ms), so it runs off the key loop and
/// its rows land on a later poll; meanwhile the filter line says it is
/// searching. With no search the queue is one indexed page, read here.
pub(super) fn start_search(app: &mut App) -> Result<()> {
    let Some(errand) = app.search_errand() else {
        app.searching = None;
        return load_queue(app, Anchor::Start);
    };
    app.searching = Some(errand.text.clone());
    app.background.search(errand).map_err(StoreError::from)?;
    Ok(())
}

/// A search that came back: shown only while the queue still asks for
/// exactly it (a newer one typed meanwhile lands after it).
pub(super) fn land_search(
    app: &mut App,
    errand: SearchErrand,
    result: Result<Vec<Operation>>,
) -> Result<()> {
    if app.search_errand().as_ref() != Some(&errand) {
        return Ok(());
    }
    app.searching = None;
    app.queue.rows = result?;
    app.queue.cursor = 0;
    app.queue.offset = Some(0);
    selection_changed(app, Origin::Selected)
}

/// Steps the verdict filter by `step` (1 or -1) through its order.
pub(super) fn step_verdict(app: &mut App, step: isize) -> Result<()> {
    let steps = super::super::app::verdict_filters();
    let at = steps
        .iter()
        .position(|f| *f == app.verdict_filter)
        .unwrap_or(0);
    let len = steps.len();
    let next = (at + len).wrapping_add_signed(step) % len;
    app.verdict_filter = steps[next];
    load_queue(app, Anchor::Start)
}

/// Steps the escalation filter: any, escalated only, not escalated.
pub(super) fn step_escalated(app: &mut App) -> Result<()> {
    app.escalated_filter = match app.escalated_filter {
        None => Some(true),
        Some(true) => Some(false),
        Some(false) => None,
    };
    load_queue(app, Anchor::Start)
}

pub(super) fn resize(app: &mut App, width: u16, height: u16) -> Result<()> {
    app.width = width;
    app.height = height;
    let rows = view::queue_rows(width, height);
    if rows != app.queue.height || app.queue.rows.is_empty() {
        app.queue.height = rows;
        let anchor = current_anchor(app, true);
        load_queue(app, anchor)?;
    }
    Ok(())
}

/// After the cursor moved: a new operation starts at the top of its
/// snapshot panel, and every selection gets a fresh read.
pub(super) fn selection_changed(app: &mut App, origin: Origin) -> Result<()> {
    let same = matches!(
        (app.selected(), &app.detail),
        (Some(s), Some(d)) if s.op_id == d.operation.op_id
    );
    if !same {
        app.snapshot_scroll = 0;
    }
    load_detail(app, origin)
}

/// Loads the selected operation's record, evidence, approvals, closure,
/// triage history and receiver, and a fresh non-closing read of it: in
/// process from the built-in ledger, off the key loop from an adapter. An
/// adapter's read costs a process, so a reload that finds the same
/// operation at the same version keeps the read it has (or is waiting
/// for); a selection of another operation, a new version, or the read key
/// reads again. The read key's read is recorded as the reviewer's
/// observation; every other read is shown only.
pub(super) fn load_detail(app: &mut App, origin: Origin) -> Result<()> {
    let Some(op_id) = app.selected().map(|o| o.op_id.clone()) else {
        app.detail = None;
        return Ok(());
    };
    let record_as = app.reviewer.clone().filter(|_| origin == Origin::Read);
    let shown_detail = app.ws.show(&op_id)?;
    let receiver = app.ws.registration_of(&shown_detail.operation)?;
    let mut recorded = false;
    let (operation, read) = if receiver.builtin && receiver.can_close() {
        let classified = app.ws.snapshot_by(&op_id, None, record_as.as_deref())?;
        recorded = classified.observation.is_some();
        let read = ReadState::Shown(shown(
            &classified.operation,
            classified.clone(),
            origin.clone(),
        ));
        (classified.operation, read)
    } else {
        let read = match kept_read(app, &shown_detail.operation, &origin) {
            Some(read) => read,
            None => ReadState::Reading {
                origin: origin.clone(),
            },
        };
        (shown_detail.operation, read)
    };
    let reading = matches!(read, ReadState::Reading { .. });
    let mut approved_at = std::collections::BTreeMap::new();
    for a in &shown_detail.approvals {
        if let Some(compensation) = app.ws.operation(&a.compensation_op_id)? {
            approved_at.insert(a.compensation_op_id.clone(), compensation.triage.created_at);
        }
    }
    app.detail = Some(Detail {
        closure: app.ws.closure(&op_id)?,
        dispatches: app.ws.dispatch_count(&op_id)?,
        operation,
        receiver,
        evidence: shown_detail.evidence,
        approvals: shown_detail.approvals,
        read,
        notes: shown_detail.notes,
        closes: shown_detail.closes,
        escalations: shown_detail.escalations,
        failures: shown_detail.failures,
        acknowledgements: shown_detail.acknowledgements,
        observations: shown_detail.observations,
        approved_at,
        roles: shown_detail.roles,
        approval_roles: shown_detail.approval_roles,
    });
    if recorded {
        reload_row(app, &op_id)?;
    }
    if reading {
        let receiver = app.detail.as_ref().map(|d| d.receiver.name.clone());
        start_read(
            app,
            ReadErrand {
                op_id,
                receiver: receiver.unwrap_or_default(),
                origin,
                record_as,
            },
        );
    }
    Ok(())
}

/// After an observation was recorded: the operation's row (its latest
/// verdict and when it was seen) and the detail's observations, read
/// again. The version is the same, so nothing else moves.
pub(super) fn reload_row(app: &mut App, op_id: &str) -> Result<()> {
    let Some(fresh) = app.ws.operation(op_id)? else {
        return Ok(());
    };
    if let Some(row) = app.queue.rows.iter_mut().find(|r| r.op_id == op_id) {
        *row = fresh.clone();
    }
    if app
        .detail
        .as_ref()
        .is_some_and(|d| d.operation.op_id == op_id)
    {
        let observations = app.ws.show(op_id)?.observations;
        if let Some(d) = app.detail.as_mut() {
            d.observations = observations;
            d.operation = fresh;
        }
    }
    Ok(())
}

/// Starts a read for the detail; a read that cannot start fails in words.
pub(super) fn start_read(app: &mut App, errand: ReadErrand) {
    let receiver = errand.receiver.clone();
    if let Err(e) = app.background.read(errand) {
        if let Some(detail) = app.detail.as_mut() {
            let origin = match &detail.read {
                ReadState::Reading { origin } => origin.clone(),
                _ => Origin::Selected,
            };
            detail.read = ReadState::Failed {
                origin,
                error: format!("the read of receiver {receiver} could not start: {e}"),
            };
        }
    }
}

/// The adapter read already on screen for this operation at this version,
/// unless the reviewer asked for a new one.
fn kept_read(app: &App, op: &Operation, origin: &Origin) -> Option<ReadState> {
    if *origin == Origin::Read {
        return None;
    }
    app.detail
        .as_ref()
        .filter(|d| d.operation.op_id == op.op_id && d.operation.version == op.version)
        .map(|d| d.read.clone())
}

/// What the console itself just changed, for [`refresh`]: the operations,
/// and whether anyone else had changed the outbox since the last refresh,
/// judged before the console's act (whose own entries move the journal's
/// head too).
pub(super) struct Own<'a> {
    pub touched: &'a [String],
    pub outside: bool,
}

/// Whether the outbox's journal moved since the last refresh: asked just
/// before an act of the console's own, whose entries move it too.
pub(super) fn changed_since_refresh(app: &App) -> Result<bool> {
    Ok(app.ws.change_marker()?.journal != app.seen.journal)
}

/// Reloads counts, the page on screen and the selected detail. `own` says
/// what the console itself just changed; the position in the queue is kept
/// when no other process changed the outbox since the last refresh and
/// none of those operations comes before the page, since then the
/// operations before it are the same.
pub(super) fn refresh(app: &mut App, origin: Origin, own: Option<Own<'_>>) -> Result<()> {
    // The marker is taken before anything is read, so a change that lands
    // while this refresh reads is looked at again by the next one.
    let marker = app.ws.change_marker()?;
    app.counts = app.ws.counts()?;
    drop_stale_marks(app, app.seen.journal.length)?;
    let top = app.queue.rows.first().map(|r| r.op_id.as_str());
    let kept = match (own, top) {
        (Some(own), Some(top)) => !own.outside && own.touched.iter().all(|id| id.as_str() >= top),
        _ => false,
    };
    let anchor = current_anchor(app, kept);
    load_queue_as(app, anchor, origin)?;
    app.seen = marker;
    Ok(())
}

/// A mark never outlives a change: a marked operation whose version is no
/// longer the marked one (or that is gone) loses its mark, and the status
/// line says which. Only the marked operations the journal names after
/// `since` (the head the last refresh saw) are read again, so a refresh
/// costs what changed, not what is marked.
pub(super) fn drop_stale_marks(app: &mut App, since: i64) -> Result<()> {
    if app.marks.is_empty() {
        return Ok(());
    }
    let mut dropped = Vec::new();
    for now in app.ws.changed_since(since)? {
        let Some(mark) = app.marks.get(&now.op_id) else {
            continue;
        };
        if now.version != mark.version {
            let found = format!("{} at version {}", now.state, now.version);
            dropped.push((now.op_id, mark.version, found));
        }
    }
    if dropped.is_empty() {
        return Ok(());
    }
    for (op_id, ..) in &dropped {
        app.marks.remove(op_id);
    }
    let named: Vec<String> = dropped
        .iter()
        .take(3)
        .map(|(id, was, now)| format!("{id} (marked at version {was}, now {now})"))
        .collect();
    let more = dropped.len().saturating_sub(3);
    let text = format!(
        "{} mark{} dropped, changed since marked: {}{}; {} still marked",
        dropped.len(),
        if dropped.len() == 1 { "" } else { "s" },
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        },
        app.marks.len()
    );
    set_status(app, Tone::Warn, text);
    Ok(())
}

/// Live updates: any commit to the outbox moves its journal's head, and
/// another connection's commit to the built-in ledger its file's version
/// (the change marker). The console's own commits move the journal too:
/// every act refreshes where it happens and remembers the marker then, so
/// only a change since is refreshed here. While a job of the console's own
/// runs off the key loop, its commits move the marker all the time: the
/// screen refreshes when it lands, not on each. While a dialog is open the
/// screen behind it stays on its operation; the dialog is checked instead.
pub(super) fn poll(app: &mut App) -> Result<()> {
    // A workspace deleted, moved or replaced under the console: every
    // mutation is refused by the library; the screen says so at once.
    if let Err(gone) = app.ws.ensure_present() {
        set_status(app, Tone::Bad, format!("error: {gone}"));
        return Ok(());
    }
    if app.working.is_some() {
        return Ok(());
    }
    let now = app.ws.change_marker()?;
    if now == app.seen {
        return Ok(());
    }
    if let Mode::Confirm(pending) = &app.mode {
        if app.dialog_seen.as_ref() == Some(&now) {
            return Ok(());
        }
        return recheck_dialog(app, pending.clone(), now);
    }
    refresh(app, Origin::Refreshed, None)?;
    if app.status.as_ref().is_none_or(|s| s.tone == Tone::Plain) {
        set_status(
            app,
            Tone::Plain,
            "updated: another process changed the workspace",
        );
    }
    Ok(())
}

/// Another process changed the workspace while a dialog is open: if it
/// changed an operation the dialog names, the dialog no longer says what
/// `y` would do, so it closes with a report that says so (and the screen
/// refreshes behind it); otherwise it stays, and so does the screen.
fn recheck_dialog(app: &mut App, pending: Pending, now: ChangeMarker) -> Result<()> {
    // What moved since the screen behind the dialog was read, in one
    // query, however many operations the dialog names.
    let moved: std::collections::HashMap<String, Moved> = (app.ws)
        .changed_since(app.seen.journal.length)?
        .into_iter()
        .map(|m| (m.op_id.clone(), m))
        .collect();
    let mut changed = Vec::new();
    for (op_id, seen) in pending.job.seen_versions() {
        if let Some(found) = moved.get(op_id).filter(|m| m.version != seen) {
            let is = format!("now {} at version {}", found.state, found.version);
            changed.push(format!("  {op_id}: you saw version {seen}; it is {is}"));
        }
    }
    if changed.is_empty() {
        // Nothing it names moved: the screen refreshes after the dialog.
        app.dialog_seen = Some(now);
        return Ok(());
    }
    let n = changed.len();
    let mut lines = vec![(
        Tone::Bad,
        format!(
            "While this dialog was open, another process changed {n} of the operations it \
             named, so it no longer said what y would do. It was closed; nothing was written."
        ),
    )];
    lines.extend(changed.into_iter().take(12).map(|l| (Tone::Plain, l)));
    if n > 12 {
        lines.push((Tone::Plain, format!("  … and {} more", n - 12)));
    }
    lines.push((Tone::Plain, String::new()));
    lines.push((
        Tone::Plain,
        "The screen now shows the workspace as it is; look again and ask again.".to_string(),
    ));
    app.mode = Mode::Normal;
    refresh(app, Origin::Refreshed, None)?;
    let title = format!("{}: closed, its operation changed", pending.title);
    set_status(app, Tone::Warn, title.clone());
    app.mode = Mode::Report(Report {
        title,
        lines,
        scroll: 0,
    });
    Ok(())
}

/// A classified read as the snapshot panel shows it, with the payload
/// paths where each match differs from the operation's payload.
pub(super) fn shown(op: &Operation, classified: Classified, origin: Origin) -> Shown {
    let differing = classified
        .snapshot
        .matches
        .iter()
        .map(|m| differing_paths(&op.payload, &m.payload))
        .collect();
    Shown {
        recorded: classified.observation.is_some(),
        snapshot: classified.snapshot,
        verdict: classified.verdict,
        origin,
        differing,
    }
}
