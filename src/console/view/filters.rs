//! The filter bar: one tab per state and `all`, each with its count (from
//! the trigger-maintained counts, so free at any size), the search being
//! typed or applied, how many operations are marked, and how many surplus
//! effects of kept duplicates await compensation (none shown at none).

use super::super::action::Action;
use super::super::app::{verdict_filter_label, App, Filter, Mode};
use super::super::bindings::{bindings, Context};
use super::super::text::{clean, fit};
use super::field::field_spans;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

/// The state tabs, in the shortest form that leaves `room` columns for
/// what follows them: every tab with its count, then the other tabs
/// without theirs, then the other tabs by their key alone.
fn tabs(app: &App, room: usize, width: usize) -> Vec<Span<'static>> {
    let theme = &app.theme;
    let mut forms = Vec::new();
    for detail in 0..3 {
        let mut spans = vec![Span::raw(" ")];
        for (i, filter) in Filter::ORDER.iter().enumerate() {
            let count = app.count(*filter);
            if *filter == app.filter {
                let text = format!("{} {} {count}", i + 1, filter.label());
                spans.push(Span::styled(format!("[{text}]"), theme.tab_active()));
            } else {
                let text = match detail {
                    0 => format!("{} {} {count}", i + 1, filter.label()),
                    1 => format!("{} {}", i + 1, filter.label()),
                    _ => format!("{}", i + 1),
                };
                spans.push(Span::styled(format!(" {text} "), theme.tab()));
            }
            spans.push(Span::raw(" "));
        }
        forms.push(spans);
    }
    let last = forms.len() - 1;
    forms
        .into_iter()
        .enumerate()
        .find(|(i, spans)| Line::from(spans.clone()).width() + room <= width || *i == last)
        .map(|(_, spans)| spans)
        .unwrap_or_default()
}

/// The verdict and escalation filters when they are on, with their keys.
fn triage_filters(app: &App) -> Vec<Span<'static>> {
    let theme = &app.theme;
    let mut spans = Vec::new();
    if let Some(v) = app.verdict_filter {
        spans.push(Span::styled(
            format!(
                "[{} verdict {}]",
                key_of(Action::NextVerdict),
                verdict_filter_label(v)
            ),
            theme.tab_active(),
        ));
        spans.push(Span::raw(" "));
    }
    if let Some(escalated) = app.escalated_filter {
        let words = if escalated {
            "escalated"
        } else {
            "not escalated"
        };
        spans.push(Span::styled(
            format!("[{} {words}]", key_of(Action::NextEscalated)),
            theme.tab_active(),
        ));
        spans.push(Span::raw(" "));
    }
    spans
}

/// The first key the table binds to a queue action.
fn key_of(action: Action) -> String {
    bindings(Context::Queue)
        .find(|b| b.action == action)
        .map(|b| b.key_names())
        .unwrap_or_default()
}

/// The columns a search being typed keeps at the least, past its label.
const MIN_FIELD: usize = 12;

/// The bar: the tabs in the form that leaves room for the rest, the
/// triage filters, the search, and last what is never cut: the word that
/// a search is running and how many operations are marked (the scope of
/// a bulk act). An applied search's text gives way to them, cut with `…`.
pub fn render_filters(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let width = usize::from(area.width);
    let extra = triage_filters(app);
    let mut kept = Vec::new();
    if app.searching.is_some() {
        kept.push(Span::styled("  searching…", theme.warn()));
    }
    if !app.marks.is_empty() {
        kept.push(Span::styled(
            format!("  {} marked", app.marks.len()),
            theme.marked(),
        ));
    }
    let awaiting: usize = app.surplus.values().sum();
    if awaiting > 0 {
        // Short on a narrow bar, so the tabs keep their names.
        let words = if width < 100 { "" } else { " to compensate" };
        kept.push(Span::styled(
            format!("  +{awaiting} surplus{words}"),
            theme.warn(),
        ));
    }
    let kept_width = Line::from(kept.clone()).width();
    let search_label = Span::styled(" search: ", theme.heading());
    let search_room = match (&app.mode, &app.search) {
        (Mode::Search { .. }, _) => search_label.width() + 1 + MIN_FIELD,
        (_, Some(search)) => search_label.width() + Span::raw(applied(search)).width(),
        _ => 0,
    };
    let room = Line::from(extra.clone()).width() + kept_width + search_room;
    let mut spans = tabs(app, room, width);
    spans.extend(extra);
    let used = |spans: &Vec<Span<'static>>| Line::from(spans.clone()).width();
    match (&app.mode, &app.search) {
        (Mode::Search { input, .. }, _) => {
            spans.push(search_label);
            spans.push(Span::styled("/", theme.input()));
            let room = width.saturating_sub(used(&spans) + kept_width + 1);
            spans.extend(field_spans(theme, input, room, true));
        }
        (_, Some(search)) => {
            spans.push(search_label);
            let room = width.saturating_sub(used(&spans) + kept_width);
            spans.push(Span::raw(fit(&applied(search), room)));
        }
        _ => {}
    }
    spans.extend(kept);
    Line::from(spans).render(area, buf);
}

/// An applied search as the bar says it.
fn applied(search: &str) -> String {
    format!("\"{}\" (Esc clears)", clean(search))
}
