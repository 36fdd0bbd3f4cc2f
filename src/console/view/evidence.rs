//! The history of the selected operation, with times: every recorded
//! state change out of `unknown` (receipts and reviews, with reviewer,
//! decision, verdict and versions), its closes, notes, escalations, the
//! receiver calls that gave no usable answer, a contradiction and its
//! acknowledgements in the order they happened, its compensation
//! approvals, and how many observations were recorded. In team mode each
//! name a person typed is shown with the authenticated role its journal
//! entry records beside it.

use super::super::app::{App, Detail};
use super::super::text::{clean, wrap_hanging};
use super::panel::{block, frame_rows, Edges, Need};
use crate::domain::{Approval, EscalationAction, Timestamp};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};

/// A time as the history shows it: the day and the minute, UTC
/// (`12-03 08:15Z`); the unabridged view and `recon show` have the rest.
fn when(at: Timestamp) -> String {
    let text = at.to_string();
    match (text.get(5..10), text.get(11..16)) {
        (Some(day), Some(minute)) => format!("{day} {minute}Z"),
        _ => text,
    }
}

/// A name as typed, with the authenticated role its journal entry
/// records beside it (team mode), both cleaned: `ann (role ann_ops)`.
fn named(name: &str, role: Option<&String>) -> String {
    match role {
        Some(role) => format!("{} (role {})", clean(name), clean(role)),
        None => clean(name),
    }
}

/// The history as plain lines, oldest first, each with its time: the
/// recorded state changes (receipts and reviews, with reviewer, decision,
/// verdict and versions), the closes, the notes and the escalation
/// marker's changes, in the order they happened (by time, then by their
/// journal entry), the compensation approvals among them at the time
/// each was made; and the count of recorded observations first. The
/// unabridged view (`p`) shows them all, and lists the observations.
pub(super) fn history_lines(d: &Detail) -> Vec<String> {
    let timed = timed_lines(d);
    // The count first: the panel keeps the newest lines when short.
    let mut out = Vec::new();
    if !d.observations.is_empty() {
        let count = d.observations.len();
        out.push(format!(
            "{count} observation{} recorded (p lists them)",
            if count == 1 { "" } else { "s" }
        ));
    }
    out.extend(timed);
    // An approval whose compensation operation is not there has no time.
    for (a, role) in
        approvals(d).filter(|(a, _)| !d.approved_at.contains_key(&a.compensation_op_id))
    {
        out.push(approval_text(a, role));
    }
    if let (Some(c), true) = (&d.closure, d.closes.is_empty()) {
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

/// The entries with a time, in the order they happened: by time, then
/// by journal entry; a close comes before what was decided on it at the
/// same instant.
fn timed_lines(d: &Detail) -> Vec<String> {
    let mut timed: Vec<(Timestamp, i64, String)> = Vec::new();
    for e in &d.evidence {
        let who = match (&e.reviewer, e.policy) {
            (Some(name), Some(policy)) => format!(
                "policy {policy}, run by {}",
                named(name, d.roles.get(&e.journal_seq))
            ),
            (Some(name), None) => format!("review by {}", named(name, d.roles.get(&e.journal_seq))),
            (None, _) => "receipt from the receiver".to_string(),
        };
        let line = format!(
            "{} #{} {who}: {}{} · v{}→v{}{}",
            when(e.recorded_at),
            e.seq,
            e.decision,
            e.verdict.map(|v| format!(" on {v}")).unwrap_or_default(),
            e.from_version,
            e.to_version,
            e.effect_id
                .as_deref()
                .map(|fx| format!(" · effect {}", clean(fx)))
                .unwrap_or_default()
        );
        timed.push((e.recorded_at, e.journal_seq, line));
    }
    for c in &d.closes {
        let line = format!(
            "{} closed at receiver {}, authorized by {}",
            when(c.closed_at),
            clean(&c.receiver),
            named(&c.authorized_by, d.roles.get(&c.seq))
        );
        timed.push((c.closed_at, -1, line));
    }
    for n in &d.notes {
        let line = format!(
            "{} note by {}: {}",
            when(n.at),
            named(&n.by, d.roles.get(&n.seq)),
            clean(&n.text)
        );
        timed.push((n.at, n.seq, line));
    }
    for e in &d.escalations {
        let verb = match e.action {
            EscalationAction::Escalate => "escalated",
            EscalationAction::Deescalate => "deescalated",
        };
        let line = format!(
            "{} {verb} by {}: {}",
            when(e.at),
            named(&e.by, d.roles.get(&e.seq)),
            clean(&e.reason)
        );
        timed.push((e.at, e.seq, line));
    }
    calls_and_contradictions(d, &mut timed);
    approval_lines(d, &mut timed);
    timed.sort_by_key(|(at, seq, _)| (*at, *seq));
    timed.into_iter().map(|(_, _, line)| line).collect()
}

/// Each approval with the role that approved it, when known.
fn approvals(d: &Detail) -> impl Iterator<Item = (&Approval, Option<&String>)> {
    let roles = (d.approval_roles.iter().map(Option::as_ref)).chain(std::iter::repeat(None));
    d.approvals.iter().zip(roles)
}

fn approval_text(a: &Approval, role: Option<&String>) -> String {
    format!(
        "approval by {}: {} compensates {} of {} · action {} · at v{}",
        named(&a.approver, role),
        clean(&a.compensation_op_id),
        clean(&a.effect_id),
        clean(&a.original_op_id),
        clean(&a.action_kind),
        a.approved_version
    )
}

/// The compensation approvals, each at the time it was made (its
/// compensation operation was prepared in the same transaction).
fn approval_lines(d: &Detail, timed: &mut Vec<(Timestamp, i64, String)>) {
    for (a, role) in approvals(d) {
        let Some(at) = d.approved_at.get(&a.compensation_op_id) else {
            continue;
        };
        let line = format!("{} {}", when(*at), approval_text(a, role));
        timed.push((*at, i64::MAX, line));
    }
}

/// The recorded observations, oldest first, each in one line: when, by
/// whom, through which receiver, the verdict, the flags and the matches.
pub(super) fn observation_lines(d: &Detail) -> Vec<String> {
    if d.observations.is_empty() {
        return vec!["none recorded: a read on screen is live until s records it".to_string()];
    }
    d.observations
        .iter()
        .map(|o| {
            let seen = &o.seen;
            let flag = |name: &str, on: bool| format!("{name} {}", if on { "yes" } else { "no" });
            format!(
                "{} #{} by {} from {}: {} · {} · {} · {} · {} match{}",
                when(seen.observed_at),
                o.seq,
                named(&seen.observed_by, d.roles.get(&o.seq)),
                clean(&seen.receiver),
                seen.verdict,
                flag("complete", seen.complete),
                flag("authoritative", seen.authoritative),
                flag("closed", seen.closed),
                seen.matches,
                if seen.matches == 1 { "" } else { "es" }
            )
        })
        .collect()
}

/// The receiver calls that gave no usable answer, the contradiction on
/// the decision and its acknowledgements, as timed lines.
fn calls_and_contradictions(d: &Detail, timed: &mut Vec<(Timestamp, i64, String)>) {
    for f in &d.failures {
        let line = format!(
            "{} {} to {} gave no usable answer: {}: {}",
            when(f.at),
            f.verb,
            clean(&f.receiver),
            f.kind.as_str(),
            clean(&f.detail)
        );
        timed.push((f.at, f.seq, line));
    }
    if let Some(c) = &d.operation.triage.contradicted {
        let line = format!(
            "{} read #{} ({}) contradicts the decision: look, then `recon acknowledge`",
            when(c.at),
            c.seq,
            c.verdict
        );
        timed.push((c.at, c.seq, line));
    }
    for a in &d.acknowledgements {
        let line = format!(
            "{} contradiction acknowledged by {}: {}",
            when(a.at),
            named(&a.by, d.roles.get(&a.seq)),
            clean(&a.reason)
        );
        timed.push((a.at, a.seq, line));
    }
}

/// The history's entries, oldest first, each wrapped at `width`.
fn wrapped_entries(d: &Detail, width: usize) -> Vec<Vec<String>> {
    history_lines(d)
        .iter()
        .map(|l| wrap_hanging(l, width, 2))
        .collect()
}

fn wrapped(d: &Detail, width: usize) -> Vec<String> {
    wrapped_entries(d, width).concat()
}

/// The lines of the newest whole entries that fit in `rows`, oldest of
/// them first, and how many lines are left out: an entry is shown whole or
/// not at all, never its tail without its start. Should even the newest
/// not fit, its start is shown, cut where the rows end (the third answer
/// says so).
fn newest_whole(entries: Vec<Vec<String>>, rows: usize) -> (Vec<String>, usize, bool) {
    let total: usize = entries.iter().map(Vec::len).sum();
    let mut kept: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    for entry in entries.into_iter().rev() {
        if used + entry.len() > rows {
            if kept.is_empty() {
                let start: Vec<String> = entry.into_iter().take(rows).collect();
                let left = total - start.len();
                return (start, left, true);
            }
            break;
        }
        used += entry.len();
        kept.push(entry);
    }
    kept.reverse();
    (kept.concat(), total - used, false)
}

/// The newest entry at least; all of them up to a quarter of the screen.
pub fn need(app: &App, width: usize) -> Need {
    let want = app.selected_detail().map_or(1, |d| wrapped(d, width).len());
    let cap = usize::from(app.height / 4).max(1);
    Need::lines(1, want.min(cap))
}

pub fn render_evidence(app: &App, area: Rect, buf: &mut Buffer, edges: Edges) {
    let theme = &app.theme;
    let title = Line::styled(" History ", theme.heading());
    let Some(d) = app.selected_detail() else {
        block(theme, edges, theme.border(), title, &[], area.width).render(area, buf);
        return;
    };
    let entries = wrapped_entries(d, usize::from(area.width.saturating_sub(2)));
    let visible = usize::from(area.height.saturating_sub(frame_rows(edges)));
    // The newest entries matter most when they do not all fit.
    let (lines, skip, cut) = newest_whole(entries, visible);
    let shown: Vec<Line> = lines.into_iter().map(Line::raw).collect();
    let plural = if skip == 1 { "" } else { "s" };
    let notes = match (skip, cut) {
        (0, _) => Vec::new(),
        (_, false) => vec![
            format!("{skip} older line{plural} · p shows all"),
            format!("+{skip} · p"),
        ],
        (_, true) => vec![
            format!("{skip} more line{plural} · p shows all"),
            format!("+{skip} · p"),
        ],
    };
    let block = block(theme, edges, theme.border(), title, &notes, area.width);
    Paragraph::new(shown).block(block).render(area, buf);
}
