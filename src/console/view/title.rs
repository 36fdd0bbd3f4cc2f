//! The title bar: what this is and which workspace it shows, including
//! that a workspace is a temporary demo one when no `--workspace` was given,
//! or a database (`--database`, its URL without a password).

use super::super::app::App;
use super::super::text::clean;
use crate::workspace::Location;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

pub fn render_title(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let path = clean(&app.source.location.to_string());
    let mut spans = vec![Span::styled(" recon review console ", theme.title())];
    if app.source.temporary_demo {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(" TEMPORARY DEMO ", theme.demo_badge()));
        spans.push(Span::raw(format!(
            " workspace (made by `recon demo`, removed on quit): {path}"
        )));
    } else if let Location::Database(_) = app.source.location {
        spans.push(Span::raw(format!(" database: {path}")));
    } else {
        spans.push(Span::raw(format!(" workspace: {path}")));
    }
    Line::from(spans).render(area, buf);
}
