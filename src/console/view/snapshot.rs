//! The selected operation's latest snapshot: the receiver it came from and
//! that receiver's ceiling in words, how it was taken (an automatic read,
//! the reviewer's read, or their closing snapshot), its flags, and every
//! match, with the payload fields that differ from the operation's marked
//! `≠` and highlighted; a read of an operation with no recorded
//! observation says it is live and unrecorded (the queue's `never`). While an adapter's read runs off the key loop the
//! panel says so, and a read that failed says why.

use super::super::app::{App, Detail, ReadState, Shown};
use super::super::text::{clean, json_lines, wrap, wrap_hanging};
use super::super::theme::Theme;
use super::panel::{block, frame_rows, Edges, Need};
use crate::domain::policy;
use crate::domain::{Effect, Operation, Snapshot};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};
use serde_json::Value;
use std::collections::BTreeSet;
use unicode_width::UnicodeWidthStr;

fn yes_no(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}

/// The title and the lines of the panel for the selected operation.
fn content(app: &App, d: &Detail, width: usize, compact: bool) -> (String, Vec<Line<'static>>) {
    let theme = &app.theme;
    let receiver = clean(&d.receiver.name);
    let title = match &d.read {
        ReadState::Shown(shown) => format!(" Snapshot: {} ", clean(&shown.origin.describe())),
        ReadState::Reading { .. } => format!(" Snapshot: reading {receiver}… "),
        ReadState::Failed { .. } => format!(" Snapshot: the read of {receiver} failed "),
    };
    let mut lines = receiver_lines(app, d, width);
    match &d.read {
        ReadState::Shown(shown) => lines.extend(shown_lines(theme, d, shown, width, compact)),
        ReadState::Reading { origin } => {
            let text = format!(
                "reading {receiver}…: {}; keys keep working",
                clean(&origin.describe())
            );
            lines.extend(styled(wrap(&text, width), theme.note()));
        }
        ReadState::Failed { error, .. } => {
            let text = format!("reading {receiver} failed: {}", clean(error));
            lines.extend(styled(wrap_hanging(&text, width, 2), theme.bad()));
            lines.push(Line::styled("s reads again", theme.note()));
        }
    }
    (title, lines)
}

/// The receiver, the flags and every match with the payload lines that
/// differ at least (the compact form); all of it if there is room.
pub fn need(app: &App, width: usize) -> Need {
    let Some(d) = app.selected_detail() else {
        return Need::lines(1, 1);
    };
    let want = content(app, d, width, false).1.len();
    let compact = content(app, d, width, true).1.len();
    Need {
        min: want.min(compact),
        want,
        whole_or_min: true,
    }
}

pub fn render_snapshot(app: &App, area: Rect, buf: &mut Buffer, edges: Edges) {
    let theme = &app.theme;
    let width = usize::from(area.width.saturating_sub(2));
    let Some(d) = app.selected_detail() else {
        let title = Line::styled(" Snapshot ", theme.heading());
        block(theme, edges, theme.border(), title, &[], area.width).render(area, buf);
        return;
    };
    // When the whole read does not fit and the reviewer has not scrolled,
    // the compact form keeps every differing line in view.
    let visible = usize::from(area.height.saturating_sub(frame_rows(edges)));
    let (title, mut lines) = content(app, d, width, false);
    if lines.len() > visible && app.snapshot_scroll == 0 {
        lines = content(app, d, width, true).1;
    }
    render_scrolled(
        app,
        Line::styled(title, theme.heading()),
        lines,
        area,
        buf,
        edges,
    );
}

fn styled(parts: Vec<String>, style: Style) -> impl Iterator<Item = Line<'static>> {
    parts.into_iter().map(move |part| Line::styled(part, style))
}

/// The receiver the operation routes to and its ceiling in words, warned
/// when it cannot prove an absence; and, while a confirmed job asks it
/// about this operation off the key loop, what that job is doing.
fn receiver_lines(app: &App, d: &Detail, width: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let words = clean(&policy::ceiling_in_words(
        &d.receiver.name,
        &d.receiver.describe,
    ));
    // On a narrow panel (80 columns) the leading word goes when that keeps
    // the sentence on one line, so the flags below stay in view.
    let words = match words.strip_prefix("receiver ") {
        Some(short) if words.width() > width && short.width() <= width => short.to_string(),
        _ => words,
    };
    let style = if policy::proves_absence(&d.receiver.describe) {
        theme.label()
    } else {
        theme.warn()
    };
    let mut lines: Vec<Line<'static>> = styled(wrap_hanging(&words, width, 2), style).collect();
    if let Some(working) = app
        .working
        .as_ref()
        .filter(|w| w.op_ids.contains(&d.operation.op_id))
    {
        lines.extend(styled(
            wrap_hanging(&clean(&working.text), width, 2),
            theme.warn(),
        ));
    }
    lines
}

/// A read that came back: its flags, then every match.
fn shown_lines(
    theme: &Theme,
    d: &Detail,
    shown: &Shown,
    width: usize,
    compact: bool,
) -> Vec<Line<'static>> {
    let snap = &shown.snapshot;
    let mut lines = flag_lines(theme, snap, width);
    // The queue's `never` is about what is recorded; this read is not.
    if !shown.recorded && d.operation.triage.latest_observation.is_none() {
        lines.extend(styled(
            wrap_hanging("live, unrecorded read: the queue keeps never", width, 2),
            theme.note(),
        ));
    }
    if snap.matches.is_empty() {
        lines.push(Line::styled(
            "no receiver effect carries this op id",
            theme.note(),
        ));
    } else {
        lines.push(Line::styled(
            format!(
                "{} matching effect{}:",
                snap.matches.len(),
                if snap.matches.len() == 1 { "" } else { "s" }
            ),
            theme.label(),
        ));
    }
    for (i, m) in snap.matches.iter().enumerate() {
        let differing: BTreeSet<String> = shown
            .differing
            .get(i)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default();
        lines.extend(match_lines(
            theme,
            &d.operation,
            m,
            &differing,
            width,
            compact,
        ));
    }
    lines
}

/// The read's flags, on one line when they fit and never cut: "closed n"
/// could read as either answer.
fn flag_lines(theme: &Theme, snap: &Snapshot, width: usize) -> Vec<Line<'static>> {
    let mut flags = vec![
        Span::styled("complete ", theme.label()),
        Span::raw(yes_no(snap.complete)),
        Span::styled(" · authoritative ", theme.label()),
        Span::raw(yes_no(snap.authoritative)),
    ];
    let closed = [
        Span::styled("closed ", theme.label()),
        Span::styled(
            yes_no(snap.closed),
            if snap.closed {
                theme.good()
            } else {
                theme.warn()
            },
        ),
    ];
    let separator = Span::styled(" · ", theme.label());
    let one_line =
        Line::from(flags.clone()).width() + separator.width() + Line::from(closed.to_vec()).width();
    if one_line <= width {
        flags.push(separator);
        flags.extend(closed);
        vec![Line::from(flags)]
    } else {
        vec![Line::from(flags), Line::from(closed.to_vec())]
    }
}

/// One matching effect: its id and action, how its scope differs from the
/// operation's, and its payload with the differing fields marked.
fn match_lines(
    theme: &Theme,
    op: &Operation,
    m: &Effect,
    differing: &BTreeSet<String>,
    width: usize,
    compact: bool,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut head = vec![Span::styled(
        format!("{} · action {}", clean(&m.effect_id), clean(&m.action_kind)),
        theme.heading(),
    )];
    if let Some(c) = &m.compensates_effect_id {
        head.push(Span::raw(format!(" · compensates {}", clean(c))));
    }
    lines.push(Line::from(head));
    let mut scope = Vec::new();
    if m.action_kind != op.action_kind {
        scope.push(format!(
            "≠ action {} differs from the operation's {}",
            clean(&m.action_kind),
            clean(&op.action_kind)
        ));
    }
    if m.compensates_effect_id != op.compensates_effect_id {
        scope.push(format!(
            "≠ compensation target {} differs from the operation's {}",
            clean(m.compensates_effect_id.as_deref().unwrap_or("(none)")),
            clean(op.compensates_effect_id.as_deref().unwrap_or("(none)"))
        ));
    }
    for part in scope.iter().flat_map(|text| wrap_hanging(text, width, 2)) {
        lines.push(Line::styled(part, theme.differs()));
    }
    if differing.is_empty() {
        lines.extend(styled(
            wrap("  payload: identical to the operation's payload", width),
            theme.good(),
        ));
    } else {
        lines.extend(payload_lines(theme, &m.payload, differing, width, compact));
    }
    lines
}

/// A payload that differs: where, then the whole payload with each line at
/// or under a differing path marked `≠` (in the compact form only those,
/// and how many lines agree), then the paths it lacks.
fn payload_lines(
    theme: &Theme,
    payload: &Value,
    differing: &BTreeSet<String>,
    width: usize,
    compact: bool,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let listed: Vec<String> = differing.iter().map(|p| clean(p)).collect();
    for part in wrap(
        &format!("  payload differs at {}:", listed.join(", ")),
        width,
    ) {
        lines.push(Line::styled(part, theme.differs()));
    }
    let json = json_lines(payload);
    let mut agreeing = 0;
    for line in &json {
        let differs = line.is_under(differing);
        if compact && !differs {
            agreeing += 1;
            continue;
        }
        let marker = if differs { "≠ " } else { "  " };
        for part in wrap(&format!("{marker}{}", line.text), width) {
            lines.push(if differs {
                Line::styled(part, theme.differs())
            } else {
                Line::raw(part)
            });
        }
    }
    if agreeing > 0 {
        lines.extend(styled(
            wrap(
                &format!(
                    "  + {agreeing} line{} that agree (J scrolls)",
                    if agreeing == 1 { "" } else { "s" }
                ),
                width,
            ),
            theme.note(),
        ));
    }
    for path in differing {
        if !json.iter().any(|l| &l.path == path) {
            lines.push(Line::styled(
                format!("≠ {} is missing here", clean(path)),
                theme.differs(),
            ));
        }
    }
    lines
}

/// The lines in the panel, scrolled as the reviewer scrolled them, with
/// the position shown when they do not all fit.
fn render_scrolled(
    app: &App,
    title: Line<'static>,
    lines: Vec<Line<'static>>,
    area: Rect,
    buf: &mut Buffer,
    edges: Edges,
) {
    let visible = usize::from(area.height.saturating_sub(frame_rows(edges)));
    let max_scroll = lines.len().saturating_sub(visible);
    let scroll = usize::from(app.snapshot_scroll).min(max_scroll);
    let notes = if max_scroll > 0 {
        vec![
            format!("J/K scroll · line {} of {}", scroll + 1, lines.len()),
            format!("J/K {}/{}", scroll + 1, lines.len()),
        ]
    } else {
        Vec::new()
    };
    let block = block(
        &app.theme,
        edges,
        app.theme.border(),
        title,
        &notes,
        area.width,
    );
    Paragraph::new(lines)
        .block(block)
        .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0))
        .render(area, buf);
}
