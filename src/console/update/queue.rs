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
    Anchor, App, Detail, DetailRead, Filter, Filters, Origin, ReadErrand, ReadState, Rows,
    ScreenErrand, SearchErrand, Shown,
};
use super::super::view;
use crate::domain::{differing_paths, OpState, Operation, PageBound};
use crate::error::{Result, StoreError};
use crate::workspace::{Classified, OpDetail, Workspace};
use std::collections::BTreeMap;

fn page(
    ws: &Workspace,
    filters: &Filters,
    bound: PageBound<'_>,
    limit: usize,
) -> Result<Vec<Operation>> {
    ws.queue_page(filters.queue_filter(), bound, limit)
}

/// The page on screen as an anchor; `kept` says whether the operations
/// before it are still the ones counted (nothing changed them since).
pub(super) fn current_anchor(app: &App, kept: bool) -> Anchor {
    match (app.queue.rows.first(), app.selected()) {
        (Some(top), Some(selected)) => Anchor::At {
            top: top.op_id.clone(),
            selected: selected.op_id.clone(),
            offset: app.queue.offset.filter(|_| kept),
        },
        _ => Anchor::Start,
    }
}

/// The screen at `anchor`, as a read (here or off the key loop) takes it.
pub(super) fn screen_errand(app: &App, anchor: Anchor) -> ScreenErrand {
    ScreenErrand {
        filters: app.filters(),
        height: app.queue.height.max(1),
        anchor,
        cursor: app.queue.cursor,
        since: app.seen.journal.length,
    }
}

pub(super) fn load_queue(app: &mut App, anchor: Anchor) -> Result<()> {
    let errand = screen_errand(app, anchor);
    let rows = read_rows(&app.ws, &errand, &app.counts)?;
    place_rows(app, rows);
    selection_changed(app, Origin::Selected)
}

/// Reads one screenful at the anchor, filling it from above near the end of
/// the list, and counts what a verdict or escalation filter selects (one
/// index range), so the title keeps the position under every filter.
/// `counts` are the state counts the page is shown with.
pub(super) fn read_rows(
    ws: &Workspace,
    errand: &ScreenErrand,
    counts: &BTreeMap<OpState, i64>,
) -> Result<Rows> {
    let filters = &errand.filters;
    let filter_count = if filters.triage_filtered() {
        Some(ws.queue_count(filters.queue_filter())?)
    } else {
        None
    };
    let shown = filters.shown_count(counts, filter_count);
    let height = errand.height;
    let (mut rows, mut cursor, mut offset) = match &errand.anchor {
        Anchor::Start => (page(ws, filters, PageBound::Start, height)?, 0, Some(0)),
        Anchor::End => (page(ws, filters, PageBound::End, height)?, usize::MAX, None),
        Anchor::At { top, offset, .. } => (
            page(ws, filters, PageBound::From(top), height)?,
            errand.cursor,
            *offset,
        ),
    };
    if rows.len() < height {
        let missing = height - rows.len();
        let before = match (rows.first(), &errand.anchor) {
            (Some(first), _) => page(ws, filters, PageBound::Before(&first.op_id), missing)?,
            (None, Anchor::At { top, .. }) => page(ws, filters, PageBound::Before(top), missing)?,
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
    if let Anchor::At { selected, .. } = &errand.anchor {
        if let Some(i) = rows.iter().position(|r| &r.op_id == selected) {
            cursor = i;
        }
    }
    let offset = match (offset, &errand.anchor) {
        (None, Anchor::End) => offset_at_end(shown, rows.len()),
        (None, _) => find_offset(ws, filters, &rows, shown)?,
        (known, _) => known,
    };
    Ok(Rows {
        cursor: cursor.min(rows.len().saturating_sub(1)),
        rows,
        offset,
        filter_count,
    })
}

/// Puts a page read on screen.
pub(super) fn place_rows(app: &mut App, rows: Rows) {
    app.filter_count = rows.filter_count;
    app.queue.cursor = rows.cursor;
    app.queue.rows = rows.rows;
    app.queue.offset = rows.offset;
}

/// The offset of a page of `len` rows that ends at the filter's last row,
/// from the filter's count (`shown`); a search has no count.
fn offset_at_end(shown: Option<i64>, len: usize) -> Option<usize> {
    let count = usize::try_from(shown?).ok()?;
    count.checked_sub(len)
}

/// The offset of a page whose offset was lost, when the page is at either
/// end of the filter: one indexed row on each side tells. A search is not
/// probed, since its rows are found by reading past those that do not
/// match, which is not cheap in a large outbox.
fn find_offset(
    ws: &Workspace,
    filters: &Filters,
    rows: &[Operation],
    shown: Option<i64>,
) -> Result<Option<usize>> {
    let (Some(first), Some(last), None) = (rows.first(), rows.last(), filters.search.as_ref())
    else {
        return Ok(None);
    };
    if page(ws, filters, PageBound::Before(&first.op_id), 1)?.is_empty() {
        return Ok(Some(0));
    }
    if page(ws, filters, PageBound::After(&last.op_id), 1)?.is_empty() {
        return Ok(offset_at_end(shown, rows.len()));
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
    let fetched = app
        .ws
        .queue_page(app.queue_filter(), PageBound::After(&last), by)?;
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
        None if at_end => offset_at_end(app.shown_count(), app.queue.rows.len()),
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
    let fetched = app
        .ws
        .queue_page(app.queue_filter(), PageBound::Before(&first), by)?;
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
    app.searching = Some(errand.text().to_string());
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
    let Some(op_id) = app.selected().map(|o| o.op_id.clone()) else {
        app.detail = None;
        return Ok(());
    };
    let record_as = app.reviewer.clone().filter(|_| origin == Origin::Read);
    let read = read_detail(&mut app.ws, &op_id, record_as.as_deref())?;
    show_detail(app, read, origin, record_as)
}

/// Reads the detail of `op_id`: its record, evidence, approvals, closure,
/// triage history and receiver, and a fresh non-closing read of the
/// built-in ledger, recorded as `record_as`'s observation when named (an
/// adapter is read off the key loop, when the detail is shown). On the
/// key loop, or on the refresher's own handle.
pub(super) fn read_detail(
    ws: &mut Workspace,
    op_id: &str,
    record_as: Option<&str>,
) -> Result<DetailRead> {
    // The built-in ledger's read first (it may record the reviewer's
    // observation), then how far the operation's history goes, then the
    // history itself: whatever the newest entry says is on screen, so a
    // dialog bound to it misses nothing and is not closed by the read.
    let operation = ws.require(op_id)?;
    let receiver = ws.registration_of(&operation)?;
    let builtin_read = if receiver.builtin && receiver.can_close() {
        Some(ws.snapshot_by(op_id, None, record_as)?)
    } else {
        None
    };
    let latest_seq = ws.latest_entry(op_id)?.map_or(0, |e| e.seq);
    let shown = ws.show(op_id)?;
    let mut approved_at = BTreeMap::new();
    for a in &shown.approvals {
        if let Some(compensation) = ws.operation(&a.compensation_op_id)? {
            approved_at.insert(a.compensation_op_id.clone(), compensation.triage.created_at);
        }
    }
    Ok(DetailRead {
        closure: ws.closure(op_id)?,
        dispatches: ws.dispatch_count(op_id)?,
        shown,
        receiver,
        builtin_read,
        approved_at,
        latest_seq,
    })
}

/// Shows a detail read of the selected operation. An adapter's read costs
/// a process, so a reload that finds the same operation at the same
/// version keeps the read it has (or is waiting for); a selection of
/// another operation, a new version, or the read key reads again. The read
/// key's read is recorded as the reviewer's observation (`record_as`);
/// every other read is shown only.
pub(super) fn show_detail(
    app: &mut App,
    read: DetailRead,
    origin: Origin,
    record_as: Option<String>,
) -> Result<()> {
    let op_id = read.shown.operation.op_id.clone();
    let same = app
        .detail
        .as_ref()
        .is_some_and(|d| d.operation.op_id == op_id);
    if !same {
        app.snapshot_scroll = 0;
    }
    let shown_detail = read.shown;
    let mut recorded = false;
    let (operation, state) = match read.builtin_read {
        Some(classified) => {
            recorded = classified.observation.is_some();
            let state = ReadState::Shown(shown(
                &classified.operation,
                classified.clone(),
                origin.clone(),
            ));
            (classified.operation, state)
        }
        None => {
            let kept = kept_read(app, &shown_detail.operation, &origin);
            let state = closed_since(kept, &shown_detail).unwrap_or(ReadState::Reading {
                origin: origin.clone(),
            });
            (shown_detail.operation, state)
        }
    };
    let reading = matches!(state, ReadState::Reading { .. });
    let receiver = read.receiver.name.clone();
    app.detail = Some(Detail {
        closure: read.closure,
        dispatches: read.dispatches,
        operation,
        receiver: read.receiver,
        evidence: shown_detail.evidence,
        approvals: shown_detail.approvals,
        read: state,
        notes: shown_detail.notes,
        closes: shown_detail.closes,
        escalations: shown_detail.escalations,
        failures: shown_detail.failures,
        acknowledgements: shown_detail.acknowledgements,
        observations: shown_detail.observations,
        approved_at: read.approved_at,
        roles: shown_detail.roles,
        approval_roles: shown_detail.approval_roles,
        origin: shown_detail.origin,
        latest_seq: read.latest_seq,
    });
    if recorded {
        reload_row(app, &op_id)?;
    }
    if reading {
        start_read(
            app,
            ReadErrand {
                op_id,
                receiver,
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

/// The read kept on screen, unless it says the operation is open and the
/// outbox has recorded a close since (another host's, which moves no
/// version): then the closing snapshot that close recorded, as the outbox
/// keeps it, with no new call of the receiver.
fn closed_since(kept: Option<ReadState>, shown: &OpDetail) -> Option<ReadState> {
    let open = matches!(&kept, Some(ReadState::Shown(read)) if !read.snapshot.closed);
    let close = shown.observations.iter().rev().find(|o| o.seen.closed);
    let (true, Some(close)) = (open, close) else {
        return kept;
    };
    let op = &shown.operation;
    Some(ReadState::Shown(Shown {
        differing: (close.snapshot.matches.iter())
            .map(|m| differing_paths(&op.payload, &m.payload))
            .collect(),
        snapshot: close.snapshot.clone(),
        verdict: close.seen.verdict,
        origin: Origin::Recorded {
            by: close.seen.observed_by.clone(),
        },
        recorded: true,
    }))
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
