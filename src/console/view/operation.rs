//! The selected operation: kind, action, state, version, what it
//! compensates or confirmed, and its payload pretty-printed.

use super::super::app::{App, Detail};
use super::super::text::{clean, json_lines, wrap, wrap_parts};
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

/// The whole operation as plain lines, header, payload and evidence
/// history, for the unabridged view (`p`).
pub fn operation_text(d: &Detail) -> Vec<String> {
    let mut lines = header(d);
    lines.extend(json_lines(&d.operation.payload).into_iter().map(|l| l.text));
    lines.push(String::new());
    lines.push("history:".to_string());
    lines.extend(super::evidence::history_lines(d));
    lines
}

/// The header always, and a few lines of the payload at least.
pub fn need(app: &App, width: usize) -> Need {
    let Some(d) = app.selected_detail() else {
        return Need { min: 1, want: 1 };
    };
    let head: usize = header(d).iter().map(|l| wrap_parts(l, width).len()).sum();
    let body: usize = json_lines(&d.operation.payload)
        .iter()
        .map(|l| wrap(&l.text, width).len())
        .sum();
    Need {
        min: head + body.min(3),
        want: head + body,
    }
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
    for json in json_lines(&d.operation.payload) {
        for part in wrap(&json.text, width) {
            lines.push(Line::raw(part));
        }
    }
    let hidden = lines
        .len()
        .saturating_sub(usize::from(area.height.saturating_sub(frame_rows(edges))));
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
