//! Rendering: the whole screen drawn from `&App` alone, one file per region.
//!
//! `impl Widget for &App` lays the screen out and hands each region to its
//! `render_*` function; overlays (help, confirmation, prompts, reports) are
//! drawn last, over the panels. Nothing here calls the library or changes
//! state, so any screen can be rendered into a test buffer. Every string
//! that came from outside goes through [`super::text::clean`] on its way
//! into a span. Below 80x24 the console says it needs more room instead of
//! drawing a squeezed screen.

mod evidence;
mod field;
mod filters;
mod operation;
mod overlay;
mod queue;
mod snapshot;
mod status;
mod title;
mod verdict;

pub use operation::operation_text;

use super::app::App;
use super::text;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// The fixed regions of the screen.
pub struct Areas {
    pub title: Rect,
    pub filters: Rect,
    pub queue: Rect,
    pub detail: Rect,
    pub status: Rect,
    pub keys: Rect,
}

pub fn areas(area: Rect) -> Areas {
    let [title, filters, main, status, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let [queue, detail] =
        Layout::horizontal([Constraint::Percentage(44), Constraint::Fill(1)]).areas(main);
    Areas {
        title,
        filters,
        queue,
        detail,
        status,
        keys,
    }
}

/// How many queue rows fit on a screen of this size: the page size that
/// `update` reads from the database.
pub fn queue_rows(width: u16, height: u16) -> usize {
    let queue = areas(Rect::new(
        0,
        0,
        width.max(MIN_WIDTH),
        height.max(MIN_HEIGHT),
    ))
    .queue;
    // Two border rows and the header row.
    usize::from(queue.height.saturating_sub(3)).max(1)
}

pub fn too_small(area: Rect) -> bool {
    area.width < MIN_WIDTH || area.height < MIN_HEIGHT
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if too_small(area) {
            render_too_small(area, buf);
            return;
        }
        let areas = areas(area);
        title::render_title(self, areas.title, buf);
        filters::render_filters(self, areas.filters, buf);
        queue::render_queue(self, areas.queue, buf);
        render_detail(self, areas.detail, buf);
        status::render_status(self, areas.status, buf);
        status::render_keys(self, areas.keys, buf);
        overlay::render_overlay(self, area, buf);
    }
}

/// The selected operation's panels, sized to their content: the payload and
/// the evidence history take what they need up to a share of the height,
/// the verdict its lines, the snapshot the rest.
fn render_detail(app: &App, area: Rect, buf: &mut Buffer) {
    let inner_width = usize::from(area.width.saturating_sub(2));
    let op_lines = operation::line_count(app, inner_width);
    let verdict_lines = verdict::line_count(app, inner_width);
    let evidence_lines = evidence::line_count(app, inner_width);
    let op_height = (op_lines + 2)
        .min(usize::from(area.height) * 30 / 100)
        .max(4);
    let evidence_height = (evidence_lines + 2)
        .min(usize::from(area.height) * 25 / 100)
        .max(3);
    let verdict_height = verdict_lines + 2;
    let [op, snap, verdict, evidence] = Layout::vertical([
        Constraint::Length(clamp_u16(op_height)),
        Constraint::Min(5),
        Constraint::Length(clamp_u16(verdict_height)),
        Constraint::Length(clamp_u16(evidence_height)),
    ])
    .areas(area);
    operation::render_operation(app, op, buf);
    snapshot::render_snapshot(app, snap, buf);
    verdict::render_verdict(app, verdict, buf);
    evidence::render_evidence(app, evidence, buf);
}

fn clamp_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

fn render_too_small(area: Rect, buf: &mut Buffer) {
    let message = format!(
        "recon needs a terminal of at least {MIN_WIDTH}x{MIN_HEIGHT} to show the review \
         console; this one is {}x{}. Make it larger, or press q to quit.",
        area.width, area.height
    );
    let lines: Vec<Line> = text::wrap(&message, usize::from(area.width.max(1)))
        .into_iter()
        .map(Line::from)
        .collect();
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .render(area, buf);
}
