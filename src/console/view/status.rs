//! The status line (the last outcome, and the reviewer's name) and the
//! bottom key bar, generated from the key table for the current mode, with
//! the actions the current evidence does not allow shown as unavailable.

use super::super::action::{Action, Request};
use super::super::app::{App, Mode, Tone, Working};
use super::super::bindings::{bindings, Context};
use super::super::keys::context;
use super::super::text::{clean, fit};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

pub fn render_status(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let reviewer = match &app.reviewer {
        Some(name) => format!(" reviewer: {} ", clean(name)),
        None => " reviewer: not set ".to_string(),
    };
    let reviewer_width = u16::try_from(reviewer.width()).unwrap_or(u16::MAX);
    let [left, right] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(reviewer_width)]).areas(area);
    let (style, text) = match &app.status {
        Some(status) => (
            match status.tone {
                Tone::Plain => theme.label(),
                Tone::Good => theme.good(),
                Tone::Bad => theme.bad(),
                Tone::Warn => theme.warn(),
            },
            match status.age(app.now) {
                Some(age) => format!(
                    "{} ({} ago)",
                    clean(&status.text),
                    crate::domain::time::age_text(age)
                ),
                None => clean(&status.text),
            },
        ),
        None => (
            theme.note(),
            "select an operation with ↑/↓; ? lists every key".to_string(),
        ),
    };
    let width = usize::from(left.width);
    match app.working.as_ref().map(|w| (progress_text(w), w)) {
        Some((progress, working)) => {
            let progress = fit(&format!(" {progress}"), width);
            let used = progress.width();
            // The line the job started with says what the progress says.
            let rest = match &app.status {
                Some(s) if !s.text.starts_with(&working.text) => {
                    fit(&format!(" │ {text}"), width.saturating_sub(used))
                }
                _ => String::new(),
            };
            Line::from(vec![
                Span::styled(progress, theme.warn()),
                Span::styled(rest, style),
            ])
            .render(left, buf);
        }
        None => Line::styled(fit(&format!(" {text}"), width), style).render(left, buf),
    }
    Line::styled(reviewer, theme.title()).render(right, buf);
}

/// A job running off the key loop: what it does, how far it has got, how
/// fast, about how long the rest will take, and the key that cancels it.
fn progress_text(working: &Working) -> String {
    let progress = &working.progress;
    let (done, total) = progress.counts();
    let of = if total > 0 {
        format!("{done} of {total}")
    } else {
        format!("{done} so far")
    };
    let what = clean(&working.text);
    if progress.cancelled() {
        return format!("{of} · cancelling after the operation in hand: {what}");
    }
    let left = progress.left().map_or(String::new(), |left| {
        format!(", ~{} left", crate::domain::time::age_text(left))
    });
    format!(
        "{of} ({:.0}/s{left}) · Esc cancels · {what}",
        progress.rate()
    )
}

pub fn render_keys(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let ctx = context(&app.mode);
    let mut spans = vec![Span::raw(" ")];
    let mut used = 1;
    let width = usize::from(area.width);
    let mut entries: Vec<_> = bindings(ctx)
        .chain(bindings(Context::Global))
        .filter(|b| !b.label.is_empty())
        // Only the compensation form has fields to move between.
        .filter(|b| {
            matches!(app.mode, Mode::Compensate(_))
                || !matches!(b.action, Action::NextField | Action::PrevField)
        })
        // "Keep one" is on the bar only where it is allowed.
        .filter(|b| {
            b.action != Action::Request(Request::Keep) || app.availability(Request::Keep).is_ok()
        })
        .collect();
    let lacks = |action: Action| app.lacks(action).filter(|_| ctx == Context::Queue);
    let available = |action: Action| match action {
        _ if lacks(action).is_some() => false,
        Action::Request(request) if ctx == Context::Queue => app.availability(request).is_ok(),
        _ => true,
    };
    // The most used first, so a narrow bar keeps them: help and quit, the
    // acts the evidence allows now, moving between filters, searching,
    // marking and reading, then the rest in the table's order, and the
    // acts not allowed now last. What does not fit is left out, and the
    // shorter items after it still get their turn.
    entries.sort_by_key(|b| (!available(b.action), bar_rank(b.action)));
    for binding in entries {
        let available = available(binding.action);
        let key = binding.keys.first().map(|k| k.name()).unwrap_or_default();
        // An act the login lacks the role for says so in words too.
        let label = match lacks(binding.action) {
            Some(role) => format!("{} (needs {})", binding.label, role.short()),
            None => binding.label.to_string(),
        };
        let item_width = key.width() + 1 + label.width() + 2;
        if used + item_width > width {
            continue;
        }
        used += item_width;
        let (key_style, label_style) = if available {
            (theme.key(), theme.label())
        } else {
            (theme.key_unavailable(), theme.key_unavailable())
        };
        spans.push(Span::styled(key, key_style));
        spans.push(Span::raw(" "));
        spans.push(Span::styled(label, label_style));
        spans.push(Span::raw("  "));
    }
    Line::from(spans).render(area, buf);
}

/// Where a key stands on the bottom bar, most used first.
fn bar_rank(action: Action) -> u8 {
    match action {
        Action::Help => 0,
        Action::Quit | Action::Confirm | Action::Submit => 1,
        Action::Cancel => 2,
        Action::Request(_) => 3,
        Action::NextFilter => 4,
        Action::Search => 5,
        Action::ShowOperation => 6,
        Action::ToggleMark => 7,
        Action::ReadSnapshot => 8,
        Action::Note | Action::Escalate => 9,
        _ => 10,
    }
}
