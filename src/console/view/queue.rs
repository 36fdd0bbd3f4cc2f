//! The queue: one screenful of operations in op id order, the cursor, the
//! bulk-triage marks, the escalation markers and the kept duplicates
//! awaiting compensation, and per row the latest
//! recorded verdict, how long ago it was seen and the operation's age,
//! measured at the time `update` last took from the workspace's clock. The
//! rows are exactly the page `update` read, so the view never needs more
//! than what fits.

use super::super::app::{verdict_filter_label, App};
use super::super::text::{age_short, apart_width, clean, fit, fit_apart};
use super::panel::{block, Edges};
use crate::domain::{OpState, Operation, Verdict};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Widget};
use unicode_width::UnicodeWidthStr;

/// How the queue sits on the screen: its frame, and whether it has a row
/// of column heads (every layout has them now that a row carries ages).
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

/// The filters in words: the state, then a verdict and an escalation
/// filter when they are on (`unknown, never, escalated`).
pub fn filter_words(app: &App) -> String {
    let mut words = app.filter.label().to_string();
    if let Some(v) = app.verdict_filter {
        words.push_str(", ");
        words.push_str(verdict_filter_label(v));
    }
    match app.escalated_filter {
        Some(true) => words.push_str(", escalated"),
        Some(false) => words.push_str(", not escalated"),
        None => {}
    }
    words
}

/// The title: the filters, the search, and where the cursor is (`59 of
/// 100008`; with a search, which match; the count alone while the position
/// is not known), in the longest form that fits.
fn title(app: &App, width: usize) -> String {
    let filter = filter_words(app);
    let (at, tail) = match (app.shown_count(), app.queue.position()) {
        (Some(count), Some(position)) => {
            let at = format!("{position} of {count}");
            (at.clone(), format!(" · {at}"))
        }
        (Some(count), None) => (count.to_string(), format!(" ({count})")),
        (None, Some(position)) => {
            let at = format!("match {position}");
            (at.clone(), format!(" · {at}"))
        }
        (None, None) => (String::new(), String::new()),
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
            filter_words(app),
            clean(s)
        ),
        None => format!("No {} operations.", filter_words(app)),
    };
    Paragraph::new(vec![
        Line::raw(""),
        Line::styled(format!(" {text}"), app.theme.note()),
    ])
    .block(block)
    .render(area, buf);
}

/// A verdict in at most 7 columns, for a queue too narrow for its name;
/// the help lists each short name beside the verdict it stands for.
pub fn verdict_short(verdict: Option<Verdict>) -> &'static str {
    match verdict {
        None => "never",
        Some(Verdict::DuplicateMatches) => "dups",
        Some(Verdict::PayloadMismatch) => "payload",
        Some(Verdict::ActionScopeMismatch) => "scope",
        Some(Verdict::UniqueExactMatch) => "unique",
        Some(Verdict::ExactMatchExistenceOnly) => "exists",
        Some(Verdict::TerminalAbsence) => "absent",
        Some(Verdict::Inconclusive) => "unsure",
    }
}

/// The table's columns for the rows on screen and the width they have.
struct Columns {
    header: Vec<&'static str>,
    widths: Vec<Constraint>,
    /// The state column only matters when the filter mixes states.
    show_state: bool,
    /// The state in [`STATE_SHORT`] columns.
    short_state: bool,
    show_version: bool,
    show_action: bool,
    /// The latest verdict's whole name, or its short form.
    full_verdict: bool,
    /// What the longest visible action kind needs, up to a cap.
    action_width: usize,
    /// Whether the time since the latest observation and the operation's
    /// age have room: they go, in that order, before the op ids would
    /// read alike.
    show_seen: bool,
    show_age: bool,
    /// Each row's op id, cut to the column the rest leaves so that no two
    /// read the same.
    ids: Vec<String>,
}

/// Below this many columns an op id is cut harder than the optional
/// columns are worth.
const ID_ROOM: usize = 26;

/// The queue's width and what its columns so far take.
struct Budget {
    inner: usize,
    used: usize,
}

impl Budget {
    /// Takes `extra` columns if `need` are still left for the op id.
    fn take(&mut self, extra: usize, need: usize) -> bool {
        let fits = self.inner >= self.used + extra + need;
        if fits {
            self.used += extra;
        }
        fits
    }
}

/// The columns of a state's short form ([`state_short`]).
const STATE_SHORT: usize = 5;

/// A state in [`STATE_SHORT`] columns, for a queue whose op ids need the
/// room; the help lists each beside its state.
fn state_short(state: OpState) -> &'static str {
    match state {
        OpState::Unknown => "unkn",
        OpState::Prepared => "prep",
        OpState::Confirmed => "conf",
        OpState::NotApplied => "n_app",
    }
}

/// The fewest columns an op id keeps, when the ids on screen are apart
/// in fewer.
const ID_FLOOR: usize = 8;

impl Columns {
    /// The op id, the latest verdict, when it was observed and the
    /// operation's age always; the state when the filter mixes states;
    /// then the verdict's whole name, the action kind and the version, in
    /// that order, while the op id keeps [`ID_ROOM`] columns.
    fn fit(app: &App, inner_width: u16) -> Columns {
        let inner = usize::from(inner_width);
        let show_state = app.filter.state().is_none();
        let cap = if inner >= 64 { 24 } else { 14 };
        let action_width = app
            .queue
            .rows
            .iter()
            .map(|op| clean(&op.action_kind).width())
            .max()
            .unwrap_or(0)
            .clamp(6, cap);
        let full_width = app
            .queue
            .rows
            .iter()
            .map(|op| verdict_name(op).width())
            .max()
            .unwrap_or(0)
            .max(7);
        // Ages are 3 columns wide (`<1m`, `59m`, `23h`, `9d`) and get a
        // fourth (`120d`) when the queue is not at its narrowest.
        let age_width = if inner < 40 { 3 } else { 4 };
        let ids: Vec<String> = app.queue.rows.iter().map(|op| clean(&op.op_id)).collect();
        // The op id never gets fewer columns than keep the rows apart.
        let apart = apart_width(&ids, ID_FLOOR);
        // lead, verdict (short), and the spaces around the op id.
        let mut used = 3 + 7 + 2;
        if show_state {
            used += 12;
        }
        let mut room = Budget { inner, used };
        let show_age = room.take(age_width + 1, apart);
        let show_seen = show_age && room.take(age_width + 1, apart);
        // The state's short form when even without the ages the ids
        // would read alike.
        let short_state = show_state && !room.take(0, apart);
        if short_state {
            room.used -= 11 - STATE_SHORT;
        }
        let optional = ID_ROOM.max(apart);
        let full_verdict = room.take(full_width - 7, optional);
        let show_action = room.take(action_width + 1, optional);
        let show_version = room.take(5, optional);
        let mut columns = Columns {
            header: Vec::new(),
            widths: Vec::new(),
            show_state,
            short_state,
            show_version,
            show_action,
            full_verdict,
            action_width,
            show_seen,
            show_age,
            ids: Vec::new(),
        };
        let verdict_width = if full_verdict { full_width } else { 7 };
        columns.lay_out(inner, verdict_width, age_width, &ids);
        columns
    }

    /// The heads and widths of the columns shown, and the op ids cut to
    /// the column they leave.
    fn lay_out(&mut self, inner: usize, verdict_width: usize, age_width: usize, ids: &[String]) {
        let mut header = vec!["", "op id"];
        let mut widths = vec![Constraint::Length(3), Constraint::Fill(1)];
        let length = |n: usize| Constraint::Length(u16::try_from(n).unwrap_or(u16::MAX));
        if self.show_action {
            header.push("action");
            widths.push(length(self.action_width));
        }
        if self.show_state {
            header.push("state");
            widths.push(length(if self.short_state { STATE_SHORT } else { 11 }));
        }
        if self.show_version {
            header.push("ver");
            widths.push(Constraint::Length(4));
        }
        header.push("verdict");
        widths.push(length(verdict_width));
        if self.show_seen {
            header.push(if age_width < 4 { "obs" } else { "seen" });
            widths.push(length(age_width));
        }
        if self.show_age {
            header.push("age");
            widths.push(length(age_width));
        }
        let fixed: usize = widths
            .iter()
            .map(|w| match w {
                Constraint::Length(n) => usize::from(*n),
                _ => 0,
            })
            .sum();
        let id_width = inner.saturating_sub(fixed + widths.len() - 1);
        self.ids = fit_apart(ids, id_width)
            .unwrap_or_else(|| ids.iter().map(|id| fit(id, id_width)).collect());
        self.header = header;
        self.widths = widths;
    }

    /// One operation's row. An id cut to fit loses its middle, not its end,
    /// so ids that differ only at the end still differ here. The lead says
    /// in characters what colours also say: `>` the cursor, `*` a mark,
    /// `!` an escalated operation, `?` a decision a recorded read
    /// contradicts (an escalated one keeps `!`; the panel says both), `+`
    /// a kept duplicate with a surplus effect awaiting compensation.
    fn row(&self, app: &App, i: usize, op: &Operation) -> Row<'static> {
        let theme = &app.theme;
        let selected = i == app.queue.cursor;
        let marked = app.marks.contains_key(&op.op_id);
        let lead = format!(
            "{}{}{}",
            if selected { ">" } else { " " },
            if marked { "*" } else { " " },
            match (&op.triage.escalated, &op.triage.contradicted) {
                (Some(_), _) => "!",
                (None, Some(_)) => "?",
                (None, None) if awaits_compensation(app, op) => "+",
                (None, None) => " ",
            }
        );
        // On the cursor row a span keeps the row's colours (its words say
        // the rest), so it reads at full contrast.
        let span_style = |style| {
            if selected {
                theme.on_cursor(style)
            } else {
                style
            }
        };
        let mut cells = vec![
            Cell::from(Span::styled(lead, span_style(theme.marked()))),
            Cell::from(self.ids.get(i).cloned().unwrap_or_default()),
        ];
        if self.show_action {
            cells.push(Cell::from(fit(&clean(&op.action_kind), self.action_width)));
        }
        if self.show_state {
            let name = if self.short_state {
                state_short(op.state)
            } else {
                op.state.as_str()
            };
            cells.push(Cell::from(Span::styled(
                name,
                span_style(theme.state(op.state)),
            )));
        }
        if self.show_version {
            cells.push(Cell::from(format!("v{}", op.version)));
        }
        let latest = op.triage.latest_observation.as_ref();
        let verdict = if self.full_verdict {
            verdict_name(op)
        } else {
            verdict_short(latest.map(|l| l.verdict))
        };
        cells.push(Cell::from(verdict));
        if self.show_seen {
            cells.push(Cell::from(match latest {
                Some(l) => age_short(app.now.since(l.observed_at)),
                None => "-".to_string(),
            }));
        }
        if self.show_age {
            cells.push(Cell::from(age_short(app.now.since(op.triage.updated_at))));
        }
        let row = Row::new(cells);
        if selected {
            row.style(theme.selected())
        } else {
            row
        }
    }
}

/// Whether `op` is a kept duplicate with a surplus effect no approval
/// compensates yet (SPEC 14).
fn awaits_compensation(app: &App, op: &Operation) -> bool {
    app.surplus.get(&op.op_id).is_some_and(|n| *n > 0)
}

/// The latest verdict's whole name, or `never`.
fn verdict_name(op: &Operation) -> &'static str {
    op.triage
        .latest_observation
        .as_ref()
        .map_or("never", |l| l.verdict.as_str())
}
