//! The frame of a panel: panels stacked in a column share their borders,
//! so a column of four panels spends five rows on lines, not eight. A
//! panel's top line carries its title on the left and, on the right, what
//! does not fit ("7 more lines · p shows all"), so the note is always on
//! the panel it speaks of, in a shorter form when the title needs the room;
//! a title that would still run into the note is cut.

use super::super::text::fit;
use super::super::theme::Theme;
use ratatui::style::Style;
use ratatui::symbols::border;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};
use unicode_width::UnicodeWidthStr;

/// The rows of text a panel has: `min` must stay in view (the rest is
/// named on its top line when cut), `want` is all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub min: usize,
    pub want: usize,
    /// The panel shows either all of `want` or its short form in `min`
    /// (nothing between), so rows between the two would stay empty.
    pub whole_or_min: bool,
}

impl Need {
    /// A panel that shows as many of its `want` lines as it gets.
    pub fn lines(min: usize, want: usize) -> Need {
        Need {
            min,
            want,
            whole_or_min: false,
        }
    }
}

/// How a panel meets its neighbours in a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edges {
    /// Its top line is the bottom line of the panel above (`├ … ┤`).
    pub joined_above: bool,
    /// It draws its own bottom line: the last panel of a column.
    pub bottom: bool,
}

impl Edges {
    /// A panel on its own.
    pub const ALONE: Edges = Edges {
        joined_above: false,
        bottom: true,
    };
}

/// The rows a panel's frame takes from its area: its top line, and its
/// bottom line if it draws one.
pub fn frame_rows(edges: Edges) -> u16 {
    1 + u16::from(edges.bottom)
}

const JOINED: border::Set<'static> = border::Set {
    top_left: "├",
    top_right: "┤",
    ..border::PLAIN
};

/// A panel's block: its lines, its title, and a note on the right of the
/// top line; `notes` are the note's forms, longest first, and the longest
/// that leaves the title whole is used (or the shortest, with the title
/// cut). `width` is the panel's whole width.
pub fn block<'a>(
    theme: &Theme,
    edges: Edges,
    border_style: Style,
    title: Line<'a>,
    notes: &[String],
    width: u16,
) -> Block<'a> {
    let borders = if edges.bottom {
        Borders::ALL
    } else {
        Borders::TOP | Borders::LEFT | Borders::RIGHT
    };
    let set = if edges.joined_above {
        JOINED
    } else {
        border::PLAIN
    };
    let room = usize::from(width.saturating_sub(2));
    let note = pick_note(notes, title.width(), room);
    let title_room = room.saturating_sub(note.as_ref().map_or(0, |n| n.width() + 1));
    let block = Block::new()
        .borders(borders)
        .border_set(set)
        .border_style(border_style)
        .title_top(cut(title, title_room));
    match note {
        Some(note) => block.title_top(Line::styled(note, theme.note()).right_aligned()),
        None => block,
    }
}

/// The note beside a title of `title` columns in `room`: the longest form
/// that leaves the title whole, else the shortest if the title keeps a
/// dozen columns.
fn pick_note(notes: &[String], title: usize, room: usize) -> Option<String> {
    let padded: Vec<String> = notes.iter().map(|n| format!(" {n} ")).collect();
    let fits = |n: &String, title: usize| title + 1 + n.width() <= room;
    padded
        .iter()
        .find(|n| fits(n, title))
        .or_else(|| padded.last().filter(|n| fits(n, title.min(12))))
        .cloned()
}

/// A title cut to `room` columns, ending in `…` when cut; each span keeps
/// its style.
fn cut(title: Line<'_>, room: usize) -> Line<'_> {
    if title.width() <= room {
        return title;
    }
    let mut used = 0;
    let mut spans = Vec::new();
    for span in title.spans {
        let left = room.saturating_sub(used);
        if left == 0 {
            break;
        }
        let text = fit(&span.content, left);
        used += text.width();
        let done = text.ends_with('…') && !span.content.ends_with('…');
        spans.push(ratatui::text::Span::styled(text, span.style));
        if done {
            break;
        }
    }
    Line::from(spans).style(title.style)
}
