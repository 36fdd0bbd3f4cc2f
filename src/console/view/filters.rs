//! The filter bar: one tab per state and `all`, each with its count (from
//! the trigger-maintained counts, so free at any size), the search being
//! typed or applied, and how many operations are marked.

use super::super::app::{App, Filter, Mode};
use super::super::text::clean;
use super::field::field_spans;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

pub fn render_filters(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let mut spans = vec![Span::raw(" ")];
    for (i, filter) in Filter::ORDER.iter().enumerate() {
        let text = format!("{} {} {}", i + 1, filter.label(), app.count(*filter));
        if *filter == app.filter {
            spans.push(Span::styled(format!("[{text}]"), theme.tab_active()));
        } else {
            spans.push(Span::styled(format!(" {text} "), theme.tab()));
        }
        spans.push(Span::raw(" "));
    }
    match (&app.mode, &app.search) {
        (Mode::Search { input, .. }, _) => {
            spans.push(Span::styled(" search: ", theme.heading()));
            spans.push(Span::styled("/", theme.input()));
            let used = Line::from(spans.clone()).width();
            let room = usize::from(area.width).saturating_sub(used + 1);
            spans.extend(field_spans(theme, input, room, true));
        }
        (_, Some(search)) => {
            spans.push(Span::styled(" search: ", theme.heading()));
            spans.push(Span::raw(format!("\"{}\" (Esc clears)", clean(search))));
        }
        _ => {}
    }
    if !app.marks.is_empty() {
        spans.push(Span::styled(
            format!("  {} marked", app.marks.len()),
            theme.marked(),
        ));
    }
    Line::from(spans).render(area, buf);
}
