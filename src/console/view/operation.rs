//! The selected operation: kind, action, state, version, what it
//! compensates or confirmed, and its payload pretty-printed.

use super::super::app::{App, Detail};
use super::super::text::{clean, fit, json_lines, wrap, wrap_hanging, wrap_parts};
use super::panel::{block, frame_rows, Edges, Need};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

/// The header lines, as plain text (wrapped by the caller).
fn header(d: &Detail) -> Vec<String> {
    let op = &d.operation;
    let mut lines = vec![
        format!(
            "{} · {} · action {}",
            clean(&op.op_id),
            op.kind,
            clean(&op.action_kind)
        ),
        format!(
            "state {} · version {} · dispatched {}×",
            op.state, op.version, d.dispatches
        ),
    ];
    if let Some(origin) = &d.origin {
        let client = origin
            .client
            .as_deref()
            .map_or("no name given".into(), clean);
        lines.push(format!(
            "via {} · key {} · client {client}",
            clean(&origin.door),
            clean(&origin.key)
        ));
    }
    if let Some(effect) = &op.compensates_effect_id {
        lines.push(format!(
            "compensates effect {} of {}",
            clean(effect),
            clean(op.compensates_op_id.as_deref().unwrap_or("?"))
        ));
    }
    if let Some(effect) = &op.confirmed_effect_id {
        lines.push(format!("confirmed effect {}", clean(effect)));
    }
    if let Some(e) = &op.triage.escalated {
        lines.push(format!(
            "ESCALATED by {}: {}",
            clean(&e.by),
            clean(&e.reason)
        ));
    }
    lines.push("payload:".to_string());
    lines
}

/// The whole operation as plain lines, header, payload, evidence history
/// and every recorded observation, for the unabridged view (`p`).
pub fn operation_text(d: &Detail) -> Vec<String> {
    let mut lines = header(d);
    lines.extend(json_lines(&d.operation.payload).into_iter().map(|l| l.text));
    lines.push(String::new());
    lines.push("history:".to_string());
    lines.extend(super::evidence::history_lines(d));
    lines.push(String::new());
    lines.push("observations:".to_string());
    lines.extend(super::evidence::observation_lines(d));
    lines
}

/// The payload as the panel shows it in `rows` lines, in the first of
/// these forms that fits: pretty-printed and wrapped; wrapped without the
/// outer braces (each field back by their indent); one line per field,
/// each cut at the panel's edge, inside the braces, then without them.
fn payload_lines(d: &Detail, width: usize, rows: usize) -> Vec<String> {
    let json = json_lines(&d.operation.payload);
    let all: Vec<&str> = json.iter().map(|l| l.text.as_str()).collect();
    let inner: Vec<&str> = if all.len() >= 3 {
        all[1..all.len() - 1]
            .iter()
            .map(|l| l.strip_prefix("  ").unwrap_or(l))
            .collect()
    } else {
        all.clone()
    };
    let wrapped = |lines: &[&str], hang: bool| -> Vec<String> {
        lines
            .iter()
            .flat_map(|l| {
                if hang {
                    wrap_hanging(l, width, 2)
                } else {
                    wrap(l, width)
                }
            })
            .collect()
    };
    let cut = |lines: &[&str]| -> Vec<String> { lines.iter().map(|l| fit(l, width)).collect() };
    let mut forms = [
        wrapped(&all, false),
        wrapped(&inner, true),
        cut(&all),
        cut(&inner),
    ]
    .into_iter();
    let last = forms.next_back().unwrap_or_default();
    forms.find(|f| f.len() <= rows).unwrap_or(last)
}

/// The header always, and the payload's first three fields at least (so
/// a payload of three fields is always whole, each on its line).
pub fn need(app: &App, width: usize) -> Need {
    let Some(d) = app.selected_detail() else {
        return Need::lines(1, 1);
    };
    let head: usize = header(d).iter().map(|l| wrap_parts(l, width).len()).sum();
    let body = payload_lines(d, width, usize::MAX).len();
    let fields = payload_lines(d, width, 0).len();
    Need::lines(head + fields.min(3), head + body)
}

pub fn render_operation(app: &App, area: Rect, buf: &mut Buffer, edges: Edges) {
    let theme = &app.theme;
    let title = Line::styled(" Operation ", theme.heading());
    let width = usize::from(area.width.saturating_sub(2));
    let Some(d) = app.selected_detail() else {
        let block = block(theme, edges, theme.border(), title, &[], area.width);
        Paragraph::new(Line::styled(" Nothing selected.", theme.note()))
            .block(block)
            .render(area, buf);
        return;
    };
    let mut lines: Vec<Line> = Vec::new();
    for (i, text) in header(d).into_iter().enumerate() {
        for part in wrap_parts(&text, width) {
            let line = match i {
                0 => Line::styled(part, theme.heading()),
                1 => Line::from(vec![Span::styled(part, theme.state(d.operation.state))]),
                _ => Line::styled(part, theme.label()),
            };
            lines.push(line);
        }
    }
    let rows = usize::from(area.height.saturating_sub(frame_rows(edges)));
    let payload = payload_lines(d, width, rows.saturating_sub(lines.len()));
    lines.extend(payload.into_iter().map(Line::raw));
    let hidden = lines.len().saturating_sub(rows);
    let notes = if hidden > 0 {
        vec![
            format!(
                "{hidden} more line{} · p shows all",
                if hidden == 1 { "" } else { "s" }
            ),
            format!("+{hidden} · p"),
        ]
    } else {
        Vec::new()
    };
    let block = block(theme, edges, theme.border(), title, &notes, area.width);
    Paragraph::new(lines).block(block).render(area, buf);
}
