//! A one-line text field with a cursor: the search, the reviewer's name and
//! each field of the compensation form.
//!
//! Typing inserts at the cursor; the arrows, Home and End move it; Backspace
//! deletes before it and Delete at it. The cursor moves over a character and
//! the combining marks that follow it as one, so it never sits between an
//! `e` and its accent. What the field holds is raw text; [`TextField::window`]
//! is how it is shown: each character made safe as [`clean`] makes it (an
//! escape such as `\x1b` is one step for the cursor, as it is one character
//! in the text), cut to the room there is around the cursor, so the cursor
//! is always in view.

use super::action::Edit;
use super::text::{clean, fit};
use crate::domain::sanitize;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextField {
    text: String,
    /// A byte offset into `text`, always at a character boundary.
    cursor: usize,
}

/// A field as drawn: the text before the cursor, the cell under it (a space
/// at the end), and the text after it, already cut to fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub before: String,
    pub at: String,
    pub after: String,
}

/// A combining mark: drawn on the character before it, so it moves and is
/// deleted with that character. (Invisible characters are not among them:
/// they are shown escaped, and count as characters of their own.)
fn joins_previous(c: char) -> bool {
    c.width() == Some(0) && !sanitize::is_unsafe(c)
}

impl TextField {
    /// A field holding `text`, the cursor at its end.
    pub fn new(text: impl Into<String>) -> TextField {
        let text = text.into();
        TextField {
            cursor: text.len(),
            text,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.text[..self.cursor].chars().count()
    }

    pub fn insert(&mut self, c: char) {
        self.text.insert(self.cursor, c);
        self.cursor += c.len_utf8();
    }

    /// Applies a cursor move or a deletion.
    pub fn edit(&mut self, edit: Edit) {
        match edit {
            Edit::Left => self.cursor = self.previous(),
            Edit::Right => self.cursor = self.next(),
            Edit::Home => self.cursor = 0,
            Edit::End => self.cursor = self.text.len(),
            Edit::Backspace => {
                let start = self.previous();
                self.text.replace_range(start..self.cursor, "");
                self.cursor = start;
            }
            Edit::Delete => {
                let end = self.next();
                self.text.replace_range(self.cursor..end, "");
            }
        }
    }

    /// Where the character before the cursor (with its marks) starts.
    fn previous(&self) -> usize {
        let mut at = self.cursor;
        for (i, c) in self.text[..self.cursor].char_indices().rev() {
            at = i;
            if !joins_previous(c) {
                break;
            }
        }
        at
    }

    /// Where the character after the cursor (with its marks) ends.
    fn next(&self) -> usize {
        let mut chars = self.text[self.cursor..].char_indices();
        if chars.next().is_none() {
            return self.cursor;
        }
        for (i, c) in chars {
            if !joins_previous(c) {
                return self.cursor + i;
            }
        }
        self.text.len()
    }

    /// The field as shown in `room` columns: all of it when it fits;
    /// otherwise the cursor stays in view, with as much before it as fits
    /// beside some of what follows it, each cut end marked `…`.
    pub fn window(&self, room: usize) -> Window {
        let (head, tail) = self.text.split_at(self.cursor);
        let at_end = tail.is_empty();
        let split = if at_end { 0 } else { self.next() - self.cursor };
        let at = if at_end {
            " ".to_string()
        } else {
            clean(&tail[..split])
        };
        let before = clean(head);
        let after = clean(&tail[split..]);
        let budget = room.saturating_sub(at.width());
        if before.width() + after.width() <= budget {
            return Window { before, at, after };
        }
        // Some of what follows stays in view, a third of the room at
        // least, unless what precedes the cursor leaves more.
        let right = after
            .width()
            .min((budget / 3).max(budget.saturating_sub(before.width())));
        let after = fit(&after, right);
        let left = budget.saturating_sub(after.width());
        Window {
            before: fit_start(&before, left),
            at,
            after,
        }
    }
}

/// Keeps the end of `text` within `width` columns, marking a cut start `…`.
fn fit_start(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut kept = Vec::new();
    let mut used = 1;
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        kept.push(c);
        used += w;
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

impl PartialEq<&str> for TextField {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}
