//! The status line (the last outcome, and the reviewer's name) and the
//! bottom key bar, generated from the key table for the current mode, with
//! the actions the current evidence does not allow shown as unavailable.

use super::super::action::{Action, Request};
use super::super::app::{App, Mode, Tone, Working};
use super::super::bindings::{bindings, Context};
use super::super::keys::context;
use super::super::text::clean;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

/// The status line's words in their styles: the job's progress and the
/// last outcome (or a hint when there is none).
fn segments(app: &App) -> Vec<(String, Style)> {
    let theme = &app.theme;
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
    match &app.working {
        Some(working) => {
            let mut out = vec![(progress_text(working), theme.warn())];
            // The line the job started with says what the progress says.
            if app
                .status
                .as_ref()
                .is_some_and(|s| !s.text.starts_with(&working.text))
            {
                out.push((format!("│ {text}"), style));
            }
            out
        }
        None => vec![(text, style)],
    }
}

/// The reviewer's badge at the right of the status line's first row.
fn badge(app: &App) -> String {
    match &app.reviewer {
        Some(name) => format!(" reviewer: {} ", clean(name)),
        None => " reviewer: not set ".to_string(),
    }
}

/// The status line at `width` columns: its rows, and whether the
/// reviewer's badge stands at the right of the first. Its words wrap beside
/// the badge, then on a second row of the whole width; when two rows do not
/// hold them so, the badge gives way. A line is never cut while two whole
/// rows hold it; beyond them (a storage error's long text, which its
/// report shows whole) the second row ends with `…`.
fn status_lines(app: &App, width: u16) -> (Vec<Line<'static>>, bool) {
    let rest = usize::from(width).saturating_sub(1);
    let beside = rest.saturating_sub(badge(app).width());
    let segments = segments(app);
    let mut lines = wrap_styled(&segments, beside, rest);
    let badged = lines.len() <= STATUS_ROWS;
    if !badged {
        lines = wrap_styled(&segments, rest, rest);
    }
    if lines.len() > STATUS_ROWS {
        lines.truncate(STATUS_ROWS);
        if let Some(last) = lines.last_mut() {
            elide_end(last, rest);
        }
    }
    let lines = lines
        .into_iter()
        .map(|spans| {
            let mut line = vec![Span::raw(" ")];
            line.extend(spans);
            Line::from(line)
        })
        .collect();
    (lines, badged)
}

/// The most rows the status line takes.
const STATUS_ROWS: usize = 2;

/// How many rows the status line takes at `width` columns: one, or two
/// when its words need them (the second drawn over the bottom border of
/// the panels above it).
pub fn status_rows(app: &App, width: u16) -> u16 {
    u16::try_from(status_lines(app, width).0.len()).unwrap_or(1)
}

/// Draws the status line in `area` (its one or two rows, as
/// [`status_rows`] says), the reviewer's badge at the right of the first
/// unless the words need its room.
pub fn render_status(app: &App, area: Rect, buf: &mut Buffer) {
    let badge = badge(app);
    let badge_width = u16::try_from(badge.width()).unwrap_or(u16::MAX);
    let [first, second] =
        Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(badge_width)]).areas(first);
    // A second row covers the border drawn there.
    ratatui::widgets::Clear.render(area, buf);
    let (lines, badged) = status_lines(app, area.width);
    let mut lines = lines.into_iter();
    if let Some(line) = lines.next() {
        line.render(if badged { left } else { first }, buf);
    }
    if let Some(line) = lines.next() {
        line.render(second, buf);
    }
    if badged {
        Line::styled(badge, app.theme.title()).render(right, buf);
    }
}

/// Word-wraps styled runs of text: the first line to `first` columns, the
/// rest to `rest`, broken at spaces (one kept between words), a word
/// longer than a line broken where it must be.
fn wrap_styled(runs: &[(String, Style)], first: usize, rest: usize) -> Vec<Vec<Span<'static>>> {
    let mut wrapper = Wrapper {
        lines: Vec::new(),
        line: Vec::new(),
        used: 0,
        width: first.max(1),
        rest: rest.max(1),
    };
    for (text, style) in runs {
        for word in text.split(' ').filter(|w| !w.is_empty()) {
            wrapper.word(word, *style);
        }
    }
    wrapper.lines.push(wrapper.line);
    wrapper.lines
}

/// [`wrap_styled`]'s state: the lines done and the one being filled.
struct Wrapper {
    lines: Vec<Vec<Span<'static>>>,
    line: Vec<Span<'static>>,
    used: usize,
    width: usize,
    rest: usize,
}

impl Wrapper {
    fn next_line(&mut self) {
        self.lines.push(std::mem::take(&mut self.line));
        (self.used, self.width) = (0, self.rest);
    }

    fn word(&mut self, word: &str, style: Style) {
        if self.used > 0 && self.used + 1 + word.width() > self.width {
            self.next_line();
        }
        if self.used > 0 {
            self.line.push(Span::styled(" ", style));
            self.used += 1;
        }
        let mut piece = String::new();
        for c in word.chars() {
            let w = c.to_string().width();
            if self.used + w > self.width && self.used > 0 {
                self.line
                    .push(Span::styled(std::mem::take(&mut piece), style));
                self.next_line();
            }
            piece.push(c);
            self.used += w;
        }
        self.line.push(Span::styled(piece, style));
    }
}

/// Ends a line with `…` within `width` columns, dropping what it must.
fn elide_end(spans: &mut Vec<Span<'static>>, width: usize) {
    let style = spans.last().map_or(Style::new(), |s| s.style);
    let mut used: usize = spans.iter().map(|s| s.content.width()).sum();
    while used + 1 > width {
        let Some(mut last) = spans.pop() else { break };
        let mut text = last.content.to_string();
        let popped = text.pop().map_or(0, |c| c.to_string().width());
        used -= popped;
        if !text.is_empty() {
            last.content = text.into();
            spans.push(last);
        }
    }
    spans.push(Span::styled("…", style));
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
