//! The verdict on the snapshot shown, the one sentence on what it permits
//! and forbids, and, for each action the evidence governs, whether it is
//! available now and why (or why not).

use super::super::action::Request;
use super::super::app::{App, ReadState};
use super::super::bindings::key_for;
use super::super::text::{clean, fit, wrap, wrap_hanging};
use super::panel::{block, frame_rows, Edges, Need};
use crate::domain::policy::{self, LatestRead};
use crate::domain::{duplicates, OpState, Verdict};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

/// The requests worth listing: with marks, the ones that apply to all of
/// them; otherwise those that start from the selected operation's state.
fn relevant(app: &App) -> Vec<Request> {
    let bulk = !app.marks.is_empty();
    let state = app.selected_detail().map(|d| d.operation.state);
    Request::ALL
        .into_iter()
        .filter(|r| {
            if bulk {
                r.is_bulk()
            } else {
                state == Some(r.act().from_state())
            }
        })
        .collect()
}

fn text_lines(app: &App, width: usize, one_line: bool) -> Vec<(bool, Option<bool>, String)> {
    let Some(d) = app.selected_detail() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let receiver = clean(&d.receiver.name);
    let explanation = match &d.read {
        ReadState::Shown(shown) => {
            let read = LatestRead {
                verdict: shown.verdict,
                closed: shown.snapshot.closed,
            };
            policy::explanation(read, &d.receiver.describe).to_string()
        }
        ReadState::Reading { .. } => {
            format!("no verdict yet: waiting for receiver {receiver} to answer")
        }
        ReadState::Failed { .. } => {
            format!("no verdict: the read of receiver {receiver} failed; s reads again")
        }
    };
    for part in wrap(&explanation, width) {
        out.push((true, None, part));
    }
    let note = match d.operation.state {
        OpState::NotApplied => {
            Some("not_applied ends the flow: nothing reopens or replaces this operation")
        }
        OpState::Prepared => Some(
            "prepared: never dispatched, so this read decides nothing; a dispatch sends it once",
        ),
        OpState::Unknown | OpState::Confirmed => None,
    };
    for part in note.into_iter().flat_map(|text| wrap(text, width)) {
        out.push((false, None, part));
    }
    for request in relevant(app).into_iter().chain(keep_offered(app)) {
        let (ok, reason) = match app.availability(request) {
            Ok(why) => (true, why),
            Err(why) => (false, why),
        };
        let text = format!(
            "{} {}: {} — {}",
            key_for(request),
            request.name(),
            if ok { "available" } else { "unavailable" },
            clean(&reason)
        );
        // On a small screen each action keeps to one line; the help has
        // the whole reason.
        let parts = if one_line {
            vec![fit(&text, width)]
        } else {
            wrap_hanging(&text, width, 2)
        };
        for part in parts {
            out.push((false, Some(ok), part));
        }
    }
    for part in surplus_lines(app, width) {
        out.push((false, Some(false), part));
    }
    out
}

/// "Keep one", offered only on an unknown operation whose read on screen
/// found duplicate matches (available or not, with the reason).
fn keep_offered(app: &App) -> Option<Request> {
    let d = app.selected_detail()?;
    let duplicate = d.shown().map(|s| s.verdict) == Some(Verdict::DuplicateMatches);
    (duplicate && d.operation.state == OpState::Unknown && app.marks.is_empty())
        .then_some(Request::Keep)
}

/// A kept duplicate's surplus effects, each with its compensation or the
/// key that approves one (SPEC 14).
fn surplus_lines(app: &App, width: usize) -> Vec<String> {
    let Some(d) = app.selected_detail() else {
        return Vec::new();
    };
    let op = &d.operation;
    let awaiting = duplicates::awaiting(op, &d.approvals);
    let mut lines = Vec::new();
    for effect in &op.surplus_effect_ids {
        let text = match d.approvals.iter().find(|a| &a.effect_id == effect) {
            Some(a) => format!(
                "surplus {}: compensated by {}",
                clean(effect),
                clean(&a.compensation_op_id)
            ),
            None if awaiting.first() == Some(effect) => format!(
                "surplus {}: awaiting compensation — {} approves it (reason {})",
                clean(effect),
                key_for(Request::Compensate),
                duplicates::SURPLUS_REASON
            ),
            None => format!("surplus {}: awaiting compensation", clean(effect)),
        };
        lines.extend(wrap_hanging(&text, width, 2));
    }
    lines
}

/// All of it: which decisions are available, and why, comes first; at
/// least with each action on one line (the help has each whole reason).
pub fn need(app: &App, width: usize, one_line: bool) -> Need {
    let want = text_lines(app, width, one_line).len().max(1);
    let min = text_lines(app, width, true).len().max(1);
    Need {
        min,
        want,
        whole_or_min: true,
    }
}

pub fn render_verdict(app: &App, area: Rect, buf: &mut Buffer, edges: Edges, one_line: bool) {
    let theme = &app.theme;
    let Some(d) = app.selected_detail() else {
        let title = Line::styled(" Verdict ", theme.heading());
        block(theme, edges, theme.border(), title, &[], area.width).render(area, buf);
        return;
    };
    let (verdict, tone) = match d.shown().map(|shown| shown.verdict) {
        Some(v) if v.supported_decision().is_some() => (v.to_string(), theme.good()),
        Some(v) => (v.to_string(), theme.bad()),
        None if matches!(d.read, ReadState::Failed { .. }) => ("none".to_string(), theme.bad()),
        None => ("none yet".to_string(), theme.warn()),
    };
    let title = Line::from(vec![
        Span::styled(" Verdict: ", theme.heading()),
        Span::styled(format!("{verdict} "), tone),
    ]);
    let width = usize::from(area.width.saturating_sub(2));
    let visible = usize::from(area.height.saturating_sub(frame_rows(edges)));
    let mut text = text_lines(app, width, one_line);
    if text.len() > visible {
        text = text_lines(app, width, true);
    }
    let lines: Vec<Line> = text
        .into_iter()
        .map(|(explanation, available, text)| match available {
            _ if explanation => Line::raw(text),
            Some(true) => Line::styled(text, theme.good()),
            Some(false) => Line::styled(text, theme.note()),
            None => Line::styled(text, theme.label()),
        })
        .collect();
    let hidden = lines.len().saturating_sub(visible);
    let notes = if hidden > 0 {
        vec![
            format!("{hidden} more · ? has each reason"),
            format!("+{hidden}"),
        ]
    } else {
        Vec::new()
    };
    let block = block(theme, edges, theme.border(), title, &notes, area.width);
    Paragraph::new(lines).block(block).render(area, buf);
}
