//! Staying live: other hosts' acts reach the screen without a key press,
//! and without a query on the key loop.
//!
//! The watcher (`Workspace::watch_head`, on a thread of its own) tells the
//! change marker each time it moves; the poll compares it with the marker
//! the screen was read at ([`App::seen`]) and, when it is newer, hands a
//! [`ScreenErrand`] to the refresher (the state's `Background`), which
//! reads the whole screen on a handle of its own: the marker first, the
//! counts, what moved since the screen's head (one query, however many
//! operations are marked), the page and the selected detail. What lands
//! is applied here, on the next poll, only where it still belongs: a
//! screen read for a place the reviewer has since left, or older than an
//! act of the console's own, is dropped and asked for again.
//!
//! The console's own acts move the journal too: each act refreshes where
//! it happens (`refresh`, on the handle that acted) and remembers the
//! marker then, so the watcher's next marker is no news. While a job of
//! the console's own runs off the key loop, its commits move the marker all
//! the time: the screen refreshes when it lands, not on each (only the
//! filter bar's state counts follow it, read by the job itself after each
//! chunk: `Progress::states`). While a
//! dialog is open the screen behind it stays on its operation; the dialog
//! is checked against what moved instead: anything about one of its
//! operations (a new version, a note, a marker, an observation, a close)
//! after what the dialog is bound to closes it, saying what changed and
//! who changed it.

use super::super::app::{
    App, Changed, Mode, Origin, Pending, Report, Rows, Screen, ScreenErrand, Tone,
};
use super::queue::{
    current_anchor, place_rows, read_detail, read_rows, screen_errand, show_detail,
};
use super::status::set_status;
use crate::domain::Moved;
use crate::error::Result;
use crate::workspace::{ChangeMarker, Workspace};

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

/// Reads a whole screen (see the module docs): on the refresher's handle
/// off the key loop, or on the console's own after its act.
pub(super) fn read_screen(ws: &mut Workspace, errand: &ScreenErrand) -> Result<Screen> {
    // The marker is taken before anything is read, so a change that lands
    // while this refresh reads is looked at again by the next one.
    let marker = ws.change_marker()?;
    let counts = ws.counts()?;
    let surplus = ws.surplus_awaiting()?;
    let moved = if marker.journal.length > errand.since {
        ws.changed_since(errand.since)?
    } else {
        Vec::new()
    };
    let rows = read_rows(ws, errand, &counts)?;
    let detail = match rows.rows.get(rows.cursor) {
        Some(op) => Some(read_detail(ws, &op.op_id, None)?),
        None => None,
    };
    Ok(Screen {
        marker,
        counts,
        surplus,
        moved,
        rows,
        detail,
    })
}

/// Puts a screen read on screen, and remembers the marker it was read at.
fn apply_screen(app: &mut App, screen: Screen, origin: Origin) -> Result<()> {
    app.counts = screen.counts;
    app.surplus = screen.surplus;
    drop_stale_marks(app, &screen.moved);
    place_rows(app, screen.rows);
    match screen.detail {
        Some(detail) => show_detail(app, detail, origin, None)?,
        None => app.detail = None,
    }
    app.seen = screen.marker;
    Ok(())
}

/// A screen read for this page while the reviewer moved the cursor within
/// it: the rows and counts are newer than what is shown, and the detail on
/// screen was read by that move, after the refresh was asked. So the
/// screen applies with the reviewer's cursor and detail, unless the change
/// names the operation they moved to (or moved the ledger, which the
/// journal does not name), whose detail may then be older than it; false
/// when it did not apply.
fn apply_in_page(app: &mut App, screen: Screen) -> bool {
    let Some(selected) = app.selected().map(|o| o.op_id.clone()) else {
        return false;
    };
    let touched =
        screen.moved.iter().any(|m| m.op_id == selected) || screen.marker.ledger != app.seen.ledger;
    let cursor = screen.rows.rows.iter().position(|r| r.op_id == selected);
    let (false, Some(cursor)) = (touched, cursor) else {
        return false;
    };
    app.counts = screen.counts;
    app.surplus = screen.surplus;
    drop_stale_marks(app, &screen.moved);
    place_rows(
        app,
        Rows {
            cursor,
            ..screen.rows
        },
    );
    app.seen = screen.marker;
    true
}

/// Reloads counts, the page on screen and the selected detail, after an
/// act of the console's own, on its own handle. `own` says what the
/// console itself just changed; the position in the queue is kept when no
/// other process changed the outbox since the last refresh and none of
/// those operations comes before the page, since then the operations
/// before it are the same.
pub(super) fn refresh(app: &mut App, origin: Origin, own: Option<Own<'_>>) -> Result<()> {
    let top = app.queue.rows.first().map(|r| r.op_id.as_str());
    let kept = match (own, top) {
        (Some(own), Some(top)) => !own.outside && own.touched.iter().all(|id| id.as_str() >= top),
        _ => false,
    };
    let errand = screen_errand(app, current_anchor(app, kept));
    let screen = read_screen(&mut app.ws, &errand)?;
    apply_screen(app, screen, origin)
}

/// A mark never outlives a change: a marked operation whose version is no
/// longer the marked one loses its mark, and the status line says which.
/// `moved` is what the journal names after the head the marks were last
/// checked at, read in one query off the key loop (or with the console's
/// own act), so a refresh costs what changed, not what is marked.
pub(super) fn drop_stale_marks(app: &mut App, moved: &[Moved]) {
    if app.marks.is_empty() {
        return;
    }
    let mut dropped = Vec::new();
    for now in moved {
        let Some(mark) = app.marks.get(&now.op_id) else {
            continue;
        };
        if now.version != mark.version {
            let found = format!("{} at version {}", now.state, now.version);
            dropped.push((now.op_id.clone(), mark.version, found));
        }
    }
    if dropped.is_empty() {
        return;
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
}

/// The poll: no query here. When the watcher's newest marker shows a
/// change the screen (or the open dialog) has not seen, and nothing of the
/// console's own is running, the refresher is asked for the screen.
pub(super) fn poll(app: &mut App) -> Result<()> {
    // A workspace deleted, moved or replaced under the console: every
    // mutation is refused by the library; the screen says so at once.
    // (Files' metadata, on a directory; nothing on a database.)
    if let Err(gone) = app.ws.ensure_present() {
        set_status(app, Tone::Bad, format!("error: {gone}"));
        return Ok(());
    }
    if app.working.is_some() || app.background.refreshing() {
        return Ok(());
    }
    let Some(watched) = app.background.watched.clone() else {
        return Ok(());
    };
    if !watched.is_newer_than(&app.seen) {
        return Ok(());
    }
    let dialog_saw = matches!(app.mode, Mode::Confirm(_))
        .then_some(app.dialog_seen.as_ref())
        .flatten();
    if dialog_saw.is_some_and(|seen| !watched.is_newer_than(seen)) {
        return Ok(());
    }
    let errand = screen_errand(app, current_anchor(app, false));
    app.background.refresh(errand, read_screen)
}

/// A screen the refresher read: applied if the reviewer is still where it
/// was asked for and no act of the console's own refreshed since; with a
/// dialog open, the dialog is checked instead.
pub(super) fn land_screen(
    app: &mut App,
    errand: ScreenErrand,
    screen: Result<Box<Screen>>,
) -> Result<()> {
    let screen = *screen?;
    let here = screen_errand(app, current_anchor(app, false));
    if errand.since != app.seen.journal.length || app.working.is_some() {
        // The console's own act refreshed since (or runs): this is older.
        return Ok(());
    }
    if let Mode::Confirm(pending) = &app.mode {
        return recheck_dialog(app, pending.clone(), screen);
    }
    if let Mode::Keep(picker) = &app.mode {
        let (op_id, since) = (picker.op_id.clone(), picker.since);
        if let Some(changed) = picker_overtaken(app, &screen, &op_id, since)? {
            app.mode = Mode::Normal;
            apply_screen(app, screen, Origin::Refreshed)?;
            let text = format!(
                "keep one closed, nothing written: {} after the picker opened",
                changed.short()
            );
            set_status(app, Tone::Warn, text);
            return Ok(());
        }
    }
    if errand.same_place(&here) {
        apply_screen(app, screen, Origin::Refreshed)?;
    } else if !(errand.same_page(&here) && apply_in_page(app, screen)) {
        // The reviewer left for another page, or the change touched what
        // they moved to: the next poll asks again, for where they are now.
        return Ok(());
    }
    if app.status.as_ref().is_none_or(|s| s.tone == Tone::Plain) {
        set_status(
            app,
            Tone::Plain,
            "updated: another process changed the workspace",
        );
    }
    Ok(())
}

/// What changed the operation of an open "keep one" picker after it
/// opened, if the screen read says it moved: the picker no longer shows
/// what the reviewer would keep.
fn picker_overtaken(
    app: &App,
    screen: &Screen,
    op_id: &str,
    since: i64,
) -> Result<Option<Changed>> {
    if !screen.moved.iter().any(|m| m.op_id == op_id) {
        return Ok(None);
    }
    changed_after(&app.ws, op_id, since)
}

/// Whether `op_id` changed after the journal position `since` that a
/// dialog is bound to: the newest entry naming it, when it is newer, with
/// the operation's state and version now.
pub(super) fn changed_after(ws: &Workspace, op_id: &str, since: i64) -> Result<Option<Changed>> {
    let Some(entry) = ws.latest_entry(op_id)?.filter(|entry| entry.seq > since) else {
        return Ok(None);
    };
    let now = ws.require(op_id)?;
    Ok(Some(Changed {
        op_id: op_id.to_string(),
        entry,
        now: (now.state, now.version),
    }))
}

/// How many changed operations a closed dialog's report describes one by
/// one (the count above them is exact).
const DESCRIBED: usize = 12;

/// Another process changed the workspace while a dialog is open: if it
/// changed anything about an operation the dialog is bound to (its state
/// or version, a note, a marker, an observation, a close), the dialog no
/// longer says what `y` would do, so it closes with a report that says
/// what changed and who changed it (and the screen refreshes behind it);
/// otherwise it stays, and so does the screen. What moved is read since
/// the screen's head; the newest entry of each of the dialog's operations
/// among them says whether it is newer than what the dialog is bound to.
fn recheck_dialog(app: &mut App, pending: Pending, screen: Screen) -> Result<()> {
    let bound: std::collections::HashSet<String> = pending.job.bound_ops().into_iter().collect();
    let moved: Vec<&Moved> = (screen.moved.iter())
        .filter(|m| bound.contains(&m.op_id))
        .collect();
    let mut changed = Vec::new();
    for m in moved.iter().take(DESCRIBED) {
        changed.extend(changed_after(&app.ws, &m.op_id, app.dialog_since)?);
    }
    // Past the described ones, a bulk dialog's operations that moved since
    // the screen's head (which it is bound to) are counted as they are.
    let more = moved.len().saturating_sub(DESCRIBED);
    if changed.is_empty() && more == 0 {
        // Nothing it names moved: the screen refreshes after the dialog.
        app.dialog_seen = Some(screen.marker);
        return Ok(());
    }
    app.mode = Mode::Normal;
    apply_screen(app, screen, Origin::Refreshed)?;
    overtaken(app, &pending, &changed, more);
    Ok(())
}

/// A dialog closed, with nothing written, because operations it is bound
/// to changed after it opened: a report naming each change and who made
/// it, and the first in the status line.
pub(super) fn overtaken(app: &mut App, pending: &Pending, changed: &[Changed], more: usize) {
    let n = changed.len() + more;
    let mut lines = vec![(
        Tone::Bad,
        format!(
            "After this dialog opened, {n} of the operations it named changed, so it no longer \
             said what y would do. It was closed; nothing was written."
        ),
    )];
    lines.extend((changed.iter()).map(|c| (Tone::Plain, format!("  {}", c.describe()))));
    if more > 0 {
        lines.push((Tone::Plain, format!("  … and {more} more")));
    }
    lines.push((Tone::Plain, String::new()));
    lines.push((
        Tone::Plain,
        "The screen now shows the workspace as it is; look again and ask again.".to_string(),
    ));
    let first = match changed.first() {
        Some(c) => format!(": {}", c.short()),
        None => format!(": {n} of its operations changed"),
    };
    let text = format!("{} closed, nothing written{first}", pending.title);
    set_status(app, Tone::Warn, text);
    app.mode = Mode::Report(Report {
        title: format!("{}: closed, its operation changed", pending.title),
        lines,
        scroll: 0,
    });
}

/// What the watcher said: its newest marker, kept for the next poll; a
/// failure said once in the status line (it tries again by itself), and
/// its return said once too, when the login's roles are asked again.
pub(super) fn land_head(app: &mut App, marker: Result<ChangeMarker>) {
    match marker {
        Ok(marker) => {
            if app.background.watch_failing {
                app.background.watch_failing = false;
                set_status(app, Tone::Plain, "live again: other hosts' changes show");
                // The roles may have changed while it was away: asked
                // again, once (not known offers every act, as at start).
                app.roles = app.ws.roles_held().unwrap_or(None);
            }
            app.background.watched = Some(marker);
        }
        Err(error) => {
            if !app.background.watch_failing {
                app.background.watch_failing = true;
                let text = format!("not live: {error}; trying again");
                set_status(app, Tone::Warn, text);
            }
        }
    }
}
