//! What is drawn over the panels: the help (generated from the key table,
//! with each action's availability and reason), the confirmation of a
//! mutation, the reviewer-name prompt, the compensation form, and reports
//! (refusals in words with their code, bulk results).

use super::super::action::Action;
use super::super::app::{
    AnnotateForm, Annotation, App, CompensationForm, Filter, KeepPicker, Mode, Pending, Report,
    Tone,
};
use super::super::bindings::{bindings, Binding, Context};
use super::super::field::TextField;
use super::super::text::{clean, wrap, wrap_hanging};
use super::super::theme::Theme;
use super::field::field_spans;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget};
use unicode_width::UnicodeWidthStr;

pub fn render_overlay(app: &App, area: Rect, buf: &mut Buffer) {
    match &app.mode {
        Mode::Normal | Mode::Search { .. } => {}
        Mode::Help { scroll } => render_help(app, *scroll, area, buf),
        Mode::Confirm(pending) => render_confirm(app, pending, area, buf),
        Mode::Reviewer { input, error, .. } => {
            render_reviewer(app, input, error.as_deref(), area, buf)
        }
        Mode::Compensate(form) => render_form(app, form, area, buf),
        Mode::Keep(picker) => render_keep(app, picker, area, buf),
        Mode::Annotate(form) => render_annotate(app, form, area, buf),
        Mode::Report(report) => render_report(app, report, area, buf),
    }
}

/// A centered box of at most `width` columns and `height` rows.
fn popup(area: Rect, width: u16, height: u16) -> Rect {
    area.centered(
        Constraint::Length(width.min(area.width.saturating_sub(4))),
        Constraint::Length(height.min(area.height.saturating_sub(2))),
    )
}

fn frame<'a>(theme: &Theme, title: String) -> Block<'a> {
    Block::bordered()
        .title(Line::styled(title, theme.heading()))
        .border_style(theme.border_focus())
        .style(theme.popup())
}

/// Key hints for a context, from the key table.
fn hints(context: Context, fields: bool) -> String {
    bindings(context)
        .filter(|b| !b.label.is_empty())
        .filter(|b| fields || !matches!(b.action, Action::NextField | Action::PrevField))
        .map(|b| format!("{}: {}", b.key_names(), b.label))
        .collect::<Vec<_>>()
        .join("   ")
}

fn wrapped(text: &str, width: usize, style: Style, out: &mut Vec<Line<'static>>) {
    for part in wrap(&clean(text), width) {
        out.push(Line::styled(part, style));
    }
}

/// Renders lines in a popup sized to them, scrolled by `scroll`.
fn render_box(
    area: Rect,
    buf: &mut Buffer,
    block: Block<'_>,
    lines: Vec<Line<'static>>,
    width: u16,
    scroll: u16,
) {
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let rect = popup(area, width, height);
    Clear.render(rect, buf);
    let visible = rect.height.saturating_sub(2);
    let max = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .saturating_sub(visible);
    Paragraph::new(lines)
        .block(block)
        .scroll((scroll.min(max), 0))
        .render(rect, buf);
}

fn box_width(area: Rect) -> u16 {
    area.width.saturating_sub(8).min(100)
}

/// How far the open help or report can scroll in `area`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scroll {
    /// The furthest its first shown line can go: its lines less the rows
    /// its box shows.
    pub last: u16,
    /// A page: the rows its box shows (at least one).
    pub page: u16,
}

/// How the open help or report scrolls in `area` (the box it is drawn in
/// there, as the render sizes it); `None` in any other mode.
pub fn overlay_scroll(app: &App, area: Rect) -> Option<Scroll> {
    let (width, lines) = match &app.mode {
        Mode::Help { .. } => {
            let width = help_width(area);
            (width, help_lines(app, inner_of(width)).len())
        }
        Mode::Report(report) => {
            let width = box_width(area);
            (width, report_lines(app, report, inner_of(width)).len())
        }
        _ => return None,
    };
    let height = u16::try_from(lines + 2).unwrap_or(u16::MAX);
    let visible = popup(area, width, height).height.saturating_sub(2);
    Some(Scroll {
        last: u16::try_from(lines)
            .unwrap_or(u16::MAX)
            .saturating_sub(visible),
        page: visible.max(1),
    })
}

fn inner_of(width: u16) -> usize {
    usize::from(width.saturating_sub(2))
}

fn help_width(area: Rect) -> u16 {
    box_width(area).max(20)
}

fn render_help(app: &App, scroll: u16, area: Rect, buf: &mut Buffer) {
    let width = help_width(area);
    let lines = help_lines(app, inner_of(width));
    let block = frame(
        &app.theme,
        " Help: every key (↑/↓ scroll, PgDn/PgUp page, Esc closes) ".to_string(),
    );
    render_box(area, buf, block, lines, width, scroll);
}

/// The help's lines at `inner` columns: every context's keys from the key
/// table, then the notes.
fn help_lines(app: &App, inner: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for context in [
        Context::Queue,
        Context::Confirm,
        Context::Pick,
        Context::Input,
        Context::Overlay,
        Context::Global,
    ] {
        lines.push(Line::styled(context.title(), theme.heading()));
        let all: Vec<&Binding> = bindings(context).collect();
        let mut i = 0;
        while i < all.len() {
            let b = all[i];
            // Consecutive filter keys read better as one line.
            if let Action::Filter(_) = b.action {
                let run: Vec<&Binding> = all[i..]
                    .iter()
                    .copied()
                    .take_while(|b| matches!(b.action, Action::Filter(_)))
                    .collect();
                lines.extend(filter_lines(theme, &run, inner));
                i += run.len();
                continue;
            }
            i += 1;
            lines.extend(binding_lines(app, context, b, inner));
        }
        lines.push(Line::raw(""));
    }
    for note in [
        "In the queue, > is the cursor, * a mark, ! an escalated operation, ? a decision a \
         recorded read contradicts and + a kept duplicate whose surplus awaits compensation \
         (the bar counts those effects); verdict is the \
         latest recorded observation's (never: none recorded), seen how long ago it was \
         recorded, age the time since the operation's state or version last changed. A narrow \
         queue writes verdicts short: dups (duplicate_matches), payload (payload_mismatch), \
         scope (action_scope_mismatch), unique (unique_exact_match), exists \
         (exact_match_existence_only), absent (terminal_absence), unsure (inconclusive), and \
         obs for seen; and, narrower still, states short: unkn (unknown), prep (prepared), conf \
         (confirmed), n_app (not_applied). In a snapshot, ≠ marks a payload field \
         that differs from the operation's payload. Untrusted text shows control characters \
         as escapes (\\x1b, \\u{202e}).",
        "A decision is always checked against the version on screen; if another reviewer or \
         the command line changed the operation first, it is refused as stale_version and \
         the console shows what changed.",
    ] {
        wrapped(note, inner, theme.label(), &mut lines);
    }
    lines
}

/// A run of filter keys, as one line naming every filter they show.
fn filter_lines(theme: &Theme, run: &[&Binding], inner: usize) -> Vec<Line<'static>> {
    let keys: Vec<String> = run.iter().map(|b| b.key_names()).collect();
    let names: Vec<&str> = run
        .iter()
        .filter_map(|b| match b.action {
            Action::Filter(n) => Filter::ORDER.get(n).map(|f| f.label()),
            _ => None,
        })
        .collect();
    let text = format!(
        "  {:<12} show {} operations",
        keys.join("/"),
        names.join(", ")
    );
    wrap_hanging(&text, inner, 15)
        .into_iter()
        .map(|part| Line::styled(part, theme.label()))
        .collect()
}

/// One binding and what it does; a request in the queue also says whether
/// it is available now, and why not, and any key of the queue whose act
/// needs a role the login lacks says which.
fn binding_lines(app: &App, context: Context, b: &Binding, inner: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let keys = b.key_names();
    let mut text = format!("  {keys:<12} {}", b.help);
    let mut style = theme.label();
    let lacks = app.lacks(b.action).filter(|_| context == Context::Queue);
    if let Some(role) = lacks {
        text.push_str(&format!(" [unavailable: {}]", app.needs(role)));
        style = theme.note();
    } else if let (Action::Request(request), Context::Queue) = (b.action, context) {
        match app.availability(request) {
            Ok(_) => {
                text.push_str(" [available now]");
                style = theme.good();
            }
            Err(why) => {
                text.push_str(&format!(" [unavailable: {why}]"));
                style = theme.note();
            }
        }
    }
    wrap_hanging(&clean(&text), inner, 15)
        .into_iter()
        .map(|part| Line::styled(part, style))
        .collect()
}

fn render_confirm(app: &App, pending: &Pending, area: Rect, buf: &mut Buffer) {
    let width = confirm_width(area);
    let lines = confirm_lines(&app.theme, pending, usize::from(width.saturating_sub(2)));
    let block = frame(&app.theme, format!(" Confirm: {} ", clean(&pending.title)));
    render_box(area, buf, block, lines, width, 0);
}

fn confirm_width(area: Rect) -> u16 {
    box_width(area).min(90)
}

/// Whether the whole confirmation, down to the line that names its keys,
/// fits on a screen of `area`: a dialog is never scrolled, so one that does
/// not fit hides what `y` would do.
pub fn confirm_fits(pending: &Pending, area: Rect) -> bool {
    let inner = usize::from(confirm_width(area).saturating_sub(2));
    let lines = confirm_lines(&Theme::new(true), pending, inner).len();
    !super::too_small(area) && lines + 2 <= usize::from(area.height.saturating_sub(2))
}

/// The confirmation's lines at `inner` columns: what will happen, then
/// which key does it and which cancels.
fn confirm_lines(theme: &Theme, pending: &Pending, inner: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = Vec::new();
    for text in &pending.lines {
        if text.is_empty() {
            lines.push(Line::raw(""));
        } else {
            wrapped(text, inner, Style::new(), &mut lines);
        }
    }
    lines.push(Line::raw(""));
    let yes_keys = bindings(Context::Confirm)
        .find(|b| b.action == Action::Confirm)
        .map(|b| b.key_names())
        .unwrap_or_default();
    let no_keys = bindings(Context::Confirm)
        .find(|b| b.action == Action::Cancel)
        .map(|b| b.key_names())
        .unwrap_or_default();
    lines.push(Line::from(vec![
        Span::styled(yes_keys, theme.key()),
        Span::styled(format!(": {}", clean(&pending.yes)), theme.warn()),
        Span::raw("     "),
        Span::styled(no_keys, theme.key()),
        Span::raw(": cancel, nothing is written"),
    ]));
    lines
}

fn render_reviewer(
    app: &App,
    input: &TextField,
    error: Option<&str>,
    area: Rect,
    buf: &mut Buffer,
) {
    let theme = &app.theme;
    let width = box_width(area).min(70);
    let inner = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line<'static>> = Vec::new();
    wrapped(
        "Who is reviewing? Your name is recorded with every change you make here (decisions, \
         closing snapshots, approvals). It is asked once.",
        inner,
        Style::new(),
        &mut lines,
    );
    lines.push(Line::raw(""));
    let mut name = vec![Span::styled("name: ", theme.label())];
    name.extend(field_spans(theme, input, inner.saturating_sub(6), true));
    lines.push(Line::from(name));
    if let Some(error) = error {
        lines.push(Line::raw(""));
        wrapped(error, inner, theme.bad(), &mut lines);
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(hints(Context::Input, false), theme.note()));
    let block = frame(theme, " Reviewer ".to_string());
    render_box(area, buf, block, lines, width, 0);
}

fn render_form(app: &App, form: &CompensationForm, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let width = box_width(area).min(96);
    let inner = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line<'static>> = Vec::new();
    let which = match &form.reason {
        Some(reason) => format!(
            "surplus effect {} (reason {})",
            clean(&form.effect_id),
            clean(reason)
        ),
        None => format!("effect {}", clean(&form.effect_id)),
    };
    wrapped(
        &format!(
            "Compensate {which} of {} (confirmed at version {}). The defaults are \
             suggestions; edit any field.",
            clean(&form.original_op_id),
            form.expected_version
        ),
        inner,
        Style::new(),
        &mut lines,
    );
    lines.push(Line::raw(""));
    let label_width = CompensationForm::LABELS
        .iter()
        .map(|l| l.len())
        .max()
        .unwrap_or(0);
    for (i, label) in CompensationForm::LABELS.iter().enumerate() {
        let focused = i == form.focus;
        let room = inner.saturating_sub(label_width + 4);
        let mut line = vec![Span::styled(
            format!(
                "{} {label:<label_width$}: ",
                if focused { ">" } else { " " }
            ),
            if focused {
                theme.heading()
            } else {
                theme.label()
            },
        )];
        line.extend(field_spans(theme, &form.fields[i], room, focused));
        lines.push(Line::from(line));
    }
    if let Some(error) = &form.error {
        lines.push(Line::raw(""));
        wrapped(error, inner, theme.bad(), &mut lines);
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Enter: review the approval (it asks before writing)   Tab: next field   Esc: cancel",
        theme.note(),
    ));
    let block = frame(theme, " Approve compensation ".to_string());
    render_box(area, buf, block, lines, width, 0);
}

/// "Keep one": the duplicate's matches side by side, one row each (the
/// receiver's effect id, its action and the hash of its payload), the
/// cursor on the one to keep. Receivers give no time per effect, so the
/// time shown is the read's, and the rows are in the receiver's order.
fn render_keep(app: &App, picker: &KeepPicker, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let width = box_width(area).min(96);
    let inner = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line<'static>> = Vec::new();
    let intro = format!(
        "Keep one effect of {} (unknown at version {}): the one kept becomes its confirmed \
         effect, the others its surplus, each compensated afterwards. The matches of the \
         read on screen ({}), in the receiver's order; a receiver gives no time per effect:",
        clean(&picker.op_id),
        picker.version,
        picker.read
    );
    wrapped(&intro, inner, Style::new(), &mut lines);
    lines.push(Line::raw(""));
    let id_width = (picker.choices.iter())
        .map(|c| clean(&c.effect_id).width())
        .max()
        .unwrap_or(0)
        .max(9);
    lines.push(Line::styled(
        format!(
            "    {:<id_width$}  {:<16}  action",
            "effect id", "payload sha256"
        ),
        theme.column_head(),
    ));
    for (i, choice) in picker.choices.iter().enumerate() {
        let on = i == picker.cursor;
        let text = format!(
            "{} {:<id_width$}  {:<16}  {}",
            if on { " >" } else { "  " },
            clean(&choice.effect_id),
            choice.payload_hash,
            clean(&choice.action_kind)
        );
        let style = if on { theme.selected() } else { theme.label() };
        lines.push(Line::styled(super::super::text::fit(&text, inner), style));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(hints(Context::Pick, false), theme.note()));
    let block = frame(theme, " Keep one ".to_string());
    render_box(area, buf, block, lines, width, 0);
}

/// The note or escalation form: what Enter records, for which operation,
/// and as whom, then the one text field.
fn render_annotate(app: &App, form: &AnnotateForm, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let width = box_width(area).min(80);
    let inner = usize::from(width.saturating_sub(2));
    let who = app.reviewer.as_deref().map(clean).unwrap_or_default();
    let op = clean(&form.op_id);
    let (title, label, what) = form.kind.words();
    let intro = match form.kind {
        Annotation::Note => format!(
            "A note on {op}, kept in its history with your name ({who}) and the time. It \
             changes nothing else."
        ),
        Annotation::Escalate => format!(
            "Escalate {op} to people who can decide what recon cannot, as {who}. It stays \
             unknown and every rule still applies; a decision clears the marker."
        ),
        Annotation::Deescalate => {
            format!("Lower the escalation marker of {op}, as {who}. The history keeps both.")
        }
    };
    let mut lines: Vec<Line<'static>> = Vec::new();
    wrapped(&intro, inner, Style::new(), &mut lines);
    lines.push(Line::raw(""));
    let mut field = vec![Span::styled(format!("{label}: "), theme.label())];
    field.extend(field_spans(
        theme,
        &form.input,
        inner.saturating_sub(label.len() + 2),
        true,
    ));
    lines.push(Line::from(field));
    if let Some(error) = &form.error {
        lines.push(Line::raw(""));
        wrapped(error, inner, theme.bad(), &mut lines);
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        format!("Enter: record {what} as {who}   Esc: cancel, nothing is written"),
        theme.note(),
    ));
    let block = frame(theme, format!(" {} {op} ", capitalized(title)));
    render_box(area, buf, block, lines, width, 0);
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn render_report(app: &App, report: &Report, area: Rect, buf: &mut Buffer) {
    let width = box_width(area);
    let lines = report_lines(app, report, inner_of(width));
    let block = frame(&app.theme, format!(" {} ", clean(&report.title)));
    render_box(area, buf, block, lines, width, report.scroll);
}

/// A report's lines at `inner` columns, its key hints last.
fn report_lines(app: &App, report: &Report, inner: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for (tone, text) in &report.lines {
        let style = match tone {
            Tone::Plain => Style::new(),
            Tone::Good => theme.good(),
            Tone::Bad => theme.bad(),
            Tone::Warn => theme.warn(),
        };
        if text.is_empty() {
            lines.push(Line::raw(""));
        } else {
            wrapped(text, inner, style, &mut lines);
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(hints(Context::Overlay, false), theme.note()));
    lines
}
