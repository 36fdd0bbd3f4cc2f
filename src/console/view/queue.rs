//! The queue: one screenful of operations in op id order, the cursor, and
//! the bulk-triage marks. The rows are exactly the page `update` read, so
//! the view never needs more than what fits.

use super::super::app::App;
use super::super::text::{clean, fit, fit_middle};
use super::panel::{block, Edges};
use crate::domain::Operation;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Widget};
use unicode_width::UnicodeWidthStr;

/// How the queue sits on the screen: its frame, and whether it has a row
/// of column heads (not in the short list of a small screen, where each
/// column speaks for itself).
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub edges: Edges,
    pub header: bool,
}

pub fn render_queue(app: &App, area: Rect, buf: &mut Buffer, layout: Layout) {
    let theme = &app.theme;
    let title = Line::styled(
        title(app, usize::from(area.width.saturating_sub(2))),
        theme.heading(),
    );
    let block = block(
        theme,
        layout.edges,
        theme.border_focus(),
        title,
        &[],
        area.width,
    );
    if app.queue.rows.is_empty() {
        render_empty(app, block, area, buf);
        return;
    }
    let columns = Columns::fit(app, area.width.saturating_sub(2));
    let rows = app
        .queue
        .rows
        .iter()
        .enumerate()
        .map(|(i, op)| columns.row(app, i, op));
    let table = Table::new(rows, columns.widths.clone())
        .column_spacing(1)
        .block(block);
    let table = if layout.header {
        table.header(Row::new(columns.header.clone()).style(theme.column_head()))
    } else {
        table
    };
    table.render(area, buf);
}

/// The title: the filter, the search, and where the cursor is (`59 of
/// 100008`; with a search, which match; the count alone while the position
/// is not known), in the longest form that fits.
fn title(app: &App, width: usize) -> String {
    let filter = app.filter.label();
    let count = app.count(app.filter);
    let (at, tail) = match (&app.search, app.queue.position()) {
        (None, Some(position)) => {
            let at = format!("{position} of {count}");
            (at.clone(), format!(" · {at}"))
        }
        (None, None) => (count.to_string(), format!(" ({count})")),
        (Some(_), Some(position)) => {
            let at = format!("match {position}");
            (at.clone(), format!(" · {at}"))
        }
        (Some(_), None) => (String::new(), String::new()),
    };
    let mut forms = Vec::new();
    if let Some(search) = &app.search {
        forms.push(format!(
            " Queue: {filter}, search \"{}\"{tail} ",
            clean(search)
        ));
    }
    forms.push(format!(" Queue: {filter}{tail} "));
    forms.push(format!(" {filter}{tail} "));
    forms.push(format!(" {at} "));
    let last = forms.len() - 1;
    forms
        .into_iter()
        .enumerate()
        .find(|(i, t)| t.width() <= width || *i == last)
        .map(|(_, t)| t)
        .unwrap_or_default()
}

fn render_empty(app: &App, block: Block<'_>, area: Rect, buf: &mut Buffer) {
    let text = match &app.search {
        Some(s) => format!(
            "No {} operation matches \"{}\".",
            app.filter.label(),
            clean(s)
        ),
        None => format!("No {} operations.", app.filter.label()),
    };
    Paragraph::new(vec![
        Line::raw(""),
        Line::styled(format!(" {text}"), app.theme.note()),
    ])
    .block(block)
    .render(area, buf);
}

/// The table's columns for the rows on screen and the width they have.
struct Columns {
    header: Vec<&'static str>,
    widths: Vec<Constraint>,
    /// The state column only matters when the filter mixes states.
    show_state: bool,
    show_version: bool,
    show_action: bool,
    /// What the longest visible action kind needs, up to a cap.
    action_width: usize,
    /// The op id column takes the rest.
    id_width: usize,
}

impl Columns {
    /// The op id always; the state when the filter mixes states; the
    /// version and the action kind as the width allows.
    fn fit(app: &App, inner_width: u16) -> Columns {
        let show_state = app.filter.state().is_none();
        let show_version = inner_width >= 36;
        let show_action = inner_width >= 44;
        let cap = if inner_width >= 64 { 24 } else { 14 };
        let action_width = app
            .queue
            .rows
            .iter()
            .map(|op| clean(&op.action_kind).width())
            .max()
            .unwrap_or(0)
            .clamp(6, cap);
        let mut header = vec!["", "op id"];
        let mut widths = vec![Constraint::Length(2), Constraint::Fill(1)];
        if show_action {
            header.push("action");
            widths.push(Constraint::Length(
                u16::try_from(action_width).unwrap_or(18),
            ));
        }
        if show_state {
            header.push("state");
            widths.push(Constraint::Length(11));
        }
        if show_version {
            header.push("ver");
            widths.push(Constraint::Length(4));
        }
        let fixed: usize = widths
            .iter()
            .map(|w| match w {
                Constraint::Length(n) => usize::from(*n),
                _ => 0,
            })
            .sum();
        let id_width = usize::from(inner_width).saturating_sub(fixed + widths.len() - 1);
        Columns {
            header,
            widths,
            show_state,
            show_version,
            show_action,
            action_width,
            id_width,
        }
    }

    /// One operation's row. An id cut to fit loses its middle, not its end,
    /// so ids that differ only at the end still differ here.
    fn row(&self, app: &App, i: usize, op: &Operation) -> Row<'static> {
        let theme = &app.theme;
        let selected = i == app.queue.cursor;
        let marked = app.marks.contains_key(&op.op_id);
        let lead = format!(
            "{}{}",
            if selected { ">" } else { " " },
            if marked { "*" } else { " " }
        );
        let mut cells = vec![
            Cell::from(Span::styled(lead, theme.marked())),
            Cell::from(fit_middle(&clean(&op.op_id), self.id_width)),
        ];
        if self.show_action {
            cells.push(Cell::from(fit(&clean(&op.action_kind), self.action_width)));
        }
        if self.show_state {
            cells.push(Cell::from(Span::styled(
                op.state.as_str(),
                theme.state(op.state),
            )));
        }
        if self.show_version {
            cells.push(Cell::from(format!("v{}", op.version)));
        }
        let row = Row::new(cells);
        if selected {
            row.style(theme.selected())
        } else {
            row
        }
    }
}
