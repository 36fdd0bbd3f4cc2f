//! Rendering: the whole screen drawn from `&App` alone, one file per region.
//!
//! `impl Widget for &App` lays the screen out and hands each region to its
//! `render_*` function; overlays (help, confirmation, prompts, reports) are
//! drawn last, over the panels. The layout follows the screen's size
//! ([`Shape`]): at 80x24 the queue is a short list and the panels of the
//! selected operation take most of the screen; at 180 columns and more
//! those panels stand in two columns. Panels in a column share their lines
//! and are sized to their text, in order of priority (the verdict and the
//! decisions it allows, the snapshot's matches, the payload, the evidence),
//! and what does not fit is named on the panel's top line. Nothing here calls the library or changes
//! state, so any screen can be rendered into a test buffer. Every string
//! that came from outside goes through [`super::text::clean`] on its way
//! into a span. Below 80x24 the console says it needs more room instead of
//! drawing a squeezed screen.

mod evidence;
mod field;
mod filters;
mod operation;
mod overlay;
mod panel;
mod queue;
mod snapshot;
mod status;
mod title;
mod verdict;

pub use operation::operation_text;
pub use overlay::{confirm_fits, overlay_scroll, Scroll};
pub use queue::filter_words;

use super::app::App;
use super::text;
use panel::{frame_rows, Edges, Need};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// How the screen is laid out, by its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Under 100 columns or 32 rows: the queue is a short list above the
    /// selected operation on the left; its snapshot, verdict and evidence
    /// take the right. The panels that decide get the room, not the queue.
    Stacked,
    /// The queue down the left, the selected operation's four panels
    /// stacked on the right.
    Beside,
    /// From 180 columns: the queue, then the selected operation's panels in
    /// two columns (the operation and its evidence; the snapshot and the
    /// verdict), so no panel is wider than its text.
    Wide,
}

pub fn shape(width: u16, height: u16) -> Shape {
    if width >= 180 {
        Shape::Wide
    } else if width < 100 || height < 32 {
        Shape::Stacked
    } else {
        Shape::Beside
    }
}

/// The fixed rows of the screen.
pub struct Areas {
    pub title: Rect,
    pub filters: Rect,
    pub main: Rect,
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
    Areas {
        title,
        filters,
        main,
        status,
        keys,
    }
}

/// A column of the selected operation's panels, sharing their lines.
struct Column {
    area: Rect,
    panels: Vec<Panel>,
    /// The panel that takes the rows the others leave: the last, so the
    /// panels read from the top and the room left is at the bottom.
    fill: Panel,
    /// Its top line is the queue's bottom line.
    joined_above: bool,
}

/// Where the queue and the panels of the selected operation go.
struct Regions {
    queue: Rect,
    queue_edges: Edges,
    /// Whether the queue has a row of column heads.
    queue_header: bool,
    columns: Vec<Column>,
}

fn column(area: Rect, panels: &[Panel], fill: Panel, joined_above: bool) -> Column {
    Column {
        area,
        panels: panels.to_vec(),
        fill,
        joined_above,
    }
}

fn regions(shape: Shape, main: Rect) -> Regions {
    use Panel::{Evidence, Operation, Snapshot, Verdict};
    let width = main.width;
    match shape {
        Shape::Stacked => {
            let right = (width * 55 / 100).max(46).min(width.saturating_sub(30));
            let [left, right] =
                Layout::horizontal([Constraint::Fill(1), Constraint::Length(right)]).areas(main);
            let rows = (main.height / 3).clamp(3, 10);
            let [queue, below] =
                Layout::vertical([Constraint::Length(rows + 2), Constraint::Fill(1)]).areas(left);
            Regions {
                queue,
                queue_edges: Edges {
                    joined_above: false,
                    bottom: false,
                },
                queue_header: true,
                columns: vec![
                    column(below, &[Operation], Operation, true),
                    column(right, &[Snapshot, Verdict, Evidence], Evidence, false),
                ],
            }
        }
        Shape::Beside => {
            let [queue, detail] =
                Layout::horizontal([Constraint::Percentage(44), Constraint::Fill(1)]).areas(main);
            Regions {
                queue,
                queue_edges: Edges::ALONE,
                queue_header: true,
                columns: vec![column(
                    detail,
                    &[Operation, Snapshot, Verdict, Evidence],
                    Evidence,
                    false,
                )],
            }
        }
        Shape::Wide => {
            // From 200 columns the queue takes the room its whole verdict
            // names need; the panels beside it keep more than 50 each.
            let queue_width = if width >= 200 {
                (width * 48 / 100).min(110)
            } else {
                (width * 36 / 100).min(72)
            };
            let [queue, left, right] = Layout::horizontal([
                Constraint::Length(queue_width),
                Constraint::Fill(1),
                Constraint::Fill(1),
            ])
            .areas(main);
            Regions {
                queue,
                queue_edges: Edges::ALONE,
                queue_header: true,
                columns: vec![
                    column(left, &[Operation, Evidence], Evidence, false),
                    column(right, &[Snapshot, Verdict], Verdict, false),
                ],
            }
        }
    }
}

/// How many queue rows fit on a screen of this size: the page size that
/// `update` reads from the database.
pub fn queue_rows(width: u16, height: u16) -> usize {
    let (width, height) = (width.max(MIN_WIDTH), height.max(MIN_HEIGHT));
    let main = areas(Rect::new(0, 0, width, height)).main;
    let regions = regions(shape(width, height), main);
    let chrome = frame_rows(regions.queue_edges) + u16::from(regions.queue_header);
    usize::from(regions.queue.height.saturating_sub(chrome)).max(1)
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
        let shape = shape(area.width, area.height);
        let regions = regions(shape, areas.main);
        title::render_title(self, areas.title, buf);
        filters::render_filters(self, areas.filters, buf);
        let queue_layout = queue::Layout {
            edges: regions.queue_edges,
            header: regions.queue_header,
        };
        queue::render_queue(self, regions.queue, buf, queue_layout);
        for column in &regions.columns {
            render_column(self, column, shape, buf);
        }
        // A status line that needs a second row takes the row above it,
        // where the panels above draw only their bottom border.
        let extra = status::status_rows(self, area.width).saturating_sub(1);
        let status_area = Rect {
            y: areas.status.y.saturating_sub(extra),
            height: areas.status.height + extra,
            ..areas.status
        };
        status::render_status(self, status_area, buf);
        status::render_keys(self, areas.keys, buf);
        overlay::render_overlay(self, area, buf);
    }
}

/// The panels of the selected operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Panel {
    Operation,
    Snapshot,
    Verdict,
    Evidence,
}

impl Panel {
    /// Which panel keeps its lines first when rows are short: the verdict
    /// (which decisions are available, and why), then the snapshot's
    /// matches, then the payload, then the older evidence.
    const PRIORITY: [Panel; 4] = [
        Panel::Verdict,
        Panel::Snapshot,
        Panel::Operation,
        Panel::Evidence,
    ];

    fn need(self, app: &App, width: usize, shape: Shape) -> Need {
        match self {
            Panel::Operation => operation::need(app, width),
            Panel::Snapshot => snapshot::need(app, width),
            Panel::Verdict => verdict::need(app, width, shape == Shape::Stacked),
            Panel::Evidence => evidence::need(app, width),
        }
    }

    fn render(self, app: &App, area: Rect, buf: &mut Buffer, edges: Edges, shape: Shape) {
        match self {
            Panel::Operation => operation::render_operation(app, area, buf, edges),
            Panel::Snapshot => snapshot::render_snapshot(app, area, buf, edges),
            Panel::Verdict => {
                verdict::render_verdict(app, area, buf, edges, shape == Shape::Stacked)
            }
            Panel::Evidence => evidence::render_evidence(app, area, buf, edges),
        }
    }
}

/// A column of panels sized to their content: each gets its minimum in
/// order of priority, then what it wants in that order, and the fill panel
/// the rest.
fn render_column(app: &App, column: &Column, shape: Shape, buf: &mut Buffer) {
    let count = column.panels.len();
    let lines = usize::from(column.area.height).saturating_sub(count + 1);
    let width = usize::from(column.area.width.saturating_sub(2));
    let needs: Vec<Need> = column
        .panels
        .iter()
        .map(|p| p.need(app, width, shape))
        .collect();
    let order: Vec<usize> = Panel::PRIORITY
        .iter()
        .filter_map(|p| column.panels.iter().position(|q| q == p))
        .collect();
    let mut rows = vec![0usize; count];
    let mut left = lines;
    let passes: [fn(&Need) -> usize; 2] = [|n| n.min, |n| n.want];
    for pass in passes {
        for &i in &order {
            let mut more = pass(&needs[i]).saturating_sub(rows[i]);
            // A panel with two forms gets the rows of its whole form or
            // none more than its short one.
            if needs[i].whole_or_min && more > left {
                more = 0;
            }
            let more = more.min(left);
            rows[i] += more;
            left -= more;
        }
    }
    if let Some(fill) = column.panels.iter().position(|p| *p == column.fill) {
        rows[fill] += left;
    }
    let mut y = column.area.y;
    for (i, panel) in column.panels.iter().enumerate() {
        let edges = Edges {
            joined_above: i > 0 || column.joined_above,
            bottom: i + 1 == count,
        };
        let height = clamp_u16(rows[i]) + frame_rows(edges);
        let area = Rect {
            y,
            height,
            ..column.area
        };
        panel.render(app, area.intersection(column.area), buf, edges, shape);
        y = y.saturating_add(height);
    }
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
