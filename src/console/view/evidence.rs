//! The evidence history of the selected operation: every recorded state
//! change out of `unknown` (receipts and reviews, with reviewer, decision,
//! verdict and versions), its compensation approvals, and the receiver's
//! close tombstone.

use super::super::app::{App, Detail};
use super::super::text::{clean, wrap_hanging};
use super::panel::{block, frame_rows, Edges, Need};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};

/// The history as plain lines, oldest first; the unabridged view (`p`)
/// shows them all.
pub(super) fn history_lines(d: &Detail) -> Vec<String> {
    let mut out = Vec::new();
    for e in &d.evidence {
        let who = match &e.reviewer {
            Some(name) => format!("review by {}", clean(name)),
            None => "receipt from the receiver".to_string(),
        };
        out.push(format!(
            "#{} {who}: {}{} · v{}→v{}{}",
            e.seq,
            e.decision,
            e.verdict.map(|v| format!(" on {v}")).unwrap_or_default(),
            e.from_version,
            e.to_version,
            e.effect_id
                .as_deref()
                .map(|fx| format!(" · effect {}", clean(fx)))
                .unwrap_or_default()
        ));
    }
    for a in &d.approvals {
        out.push(format!(
            "approval: {} compensates {} of {} · action {} · by {} at v{}",
            clean(&a.compensation_op_id),
            clean(&a.effect_id),
            clean(&a.original_op_id),
            clean(&a.action_kind),
            clean(&a.approver),
            a.approved_version
        ));
    }
    if let Some(c) = &d.closure {
        out.push(format!(
            "receiver closed it, authorized by {} ({} effect{} at close)",
            clean(&c.authorized_by),
            c.effects_at_close,
            if c.effects_at_close == 1 { "" } else { "s" }
        ));
    }
    if out.is_empty() {
        out.push("nothing recorded yet".to_string());
    }
    out
}

fn wrapped(d: &Detail, width: usize) -> Vec<String> {
    history_lines(d)
        .iter()
        .flat_map(|l| wrap_hanging(l, width, 2))
        .collect()
}

/// The newest entry at least; all of them up to a quarter of the screen.
pub fn need(app: &App, width: usize) -> Need {
    let want = app.selected_detail().map_or(1, |d| wrapped(d, width).len());
    let cap = usize::from(app.height / 4).max(1);
    Need {
        min: 1,
        want: want.min(cap),
    }
}

pub fn render_evidence(app: &App, area: Rect, buf: &mut Buffer, edges: Edges) {
    let theme = &app.theme;
    let title = Line::styled(" Evidence history ", theme.heading());
    let Some(d) = app.selected_detail() else {
        block(theme, edges, theme.border(), title, &[], area.width).render(area, buf);
        return;
    };
    let all = wrapped(d, usize::from(area.width.saturating_sub(2)));
    let visible = usize::from(area.height.saturating_sub(frame_rows(edges)));
    // The newest entries matter most when they do not all fit.
    let skip = all.len().saturating_sub(visible);
    let shown: Vec<Line> = all.into_iter().skip(skip).map(Line::raw).collect();
    let notes = if skip > 0 {
        vec![
            format!("{skip} older lines · p shows all"),
            format!("+{skip} · p"),
        ]
    } else {
        Vec::new()
    };
    let block = block(theme, edges, theme.border(), title, &notes, area.width);
    Paragraph::new(shown).block(block).render(area, buf);
}
