//! Untrusted text made fit for a terminal cell grid, and JSON laid out line
//! by line with the path of every line, so the view can highlight the fields
//! that differ from the expected payload.
//!
//! Every string that came from a database or a user (payloads, ids, action
//! kinds, reviewer names, refusal details) goes through [`clean`] before the
//! view turns it into a span: tabs become spaces, and control characters
//! (C0, DEL, C1) and bidirectional overrides become visible escapes
//! (`\x1b`, `\u{202e}`) instead of being dropped, so the reviewer sees that
//! they are there and the terminal never receives them. Column widths are
//! left to ratatui, which measures wide characters by their display width.

use crate::domain::sanitize;
use serde_json::Value;
use std::collections::BTreeSet;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Tab stops for expanded tabs, in display columns.
const TAB_STOP: usize = 4;

/// One line of text, safe for one terminal row: tabs expanded, every other
/// control or bidi character (newlines included) shown escaped.
pub fn clean(text: &str) -> String {
    let expanded = expand_tabs(text);
    sanitize::escape(&expanded).into_owned()
}

/// Several lines: split on newlines, then each line [`clean`]ed.
pub fn clean_lines(text: &str) -> Vec<String> {
    text.split('\n').map(clean).collect()
}

fn expand_tabs(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let spaces = TAB_STOP - column % TAB_STOP;
                out.extend(std::iter::repeat_n(' ', spaces));
                column += spaces;
            }
            '\n' => {
                out.push(c);
                column = 0;
            }
            c => {
                out.push(c);
                column += c.width().unwrap_or(0);
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A JSON value as one line of canonical JSON, safe for the terminal.
pub fn json_inline(value: &Value) -> String {
    clean(&sanitize::json_for_terminal(value.to_string()))
}

/// One line of pretty-printed JSON and the path of the value it belongs to
/// (the same paths as [`crate::domain::differing_paths`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLine {
    pub text: String,
    pub path: String,
}

impl JsonLine {
    /// True when this line shows a value at or under one of `paths`.
    pub fn is_under(&self, paths: &BTreeSet<String>) -> bool {
        paths.iter().any(|p| {
            p == "/"
                || self.path == *p
                || (self.path.starts_with(p.as_str())
                    && self.path.as_bytes().get(p.len()) == Some(&b'/'))
        })
    }
}

/// Pretty-prints a JSON value (two-space indent, keys in order) and tags
/// each line with its path. Strings are JSON-escaped, and the characters
/// JSON leaves raw (C1, DEL, bidi) are escaped too, so no line carries a
/// control character.
pub fn json_lines(value: &Value) -> Vec<JsonLine> {
    let mut out = Vec::new();
    let mut path = String::new();
    emit(&mut out, &mut path, None, value, 0, false);
    out
}

fn scalar(value: &Value) -> String {
    sanitize::json_for_terminal(value.to_string())
}

fn key_text(key: &str) -> String {
    scalar(&Value::String(key.to_string()))
}

fn line_path(path: &str) -> String {
    if path.is_empty() {
        "/".to_string()
    } else {
        path.to_string()
    }
}

fn emit(
    out: &mut Vec<JsonLine>,
    path: &mut String,
    key: Option<&str>,
    value: &Value,
    depth: usize,
    comma: bool,
) {
    let indent = "  ".repeat(depth);
    let prefix = match key {
        Some(k) => format!("{indent}{}: ", key_text(k)),
        None => indent.clone(),
    };
    let tail = if comma { "," } else { "" };
    let here = line_path(path);
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push(JsonLine {
                text: clean(&format!("{prefix}{{")),
                path: here.clone(),
            });
            let last = map.len() - 1;
            for (i, (k, v)) in map.iter().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(k);
                emit(out, path, Some(k), v, depth + 1, i < last);
                path.truncate(len);
            }
            out.push(JsonLine {
                text: format!("{indent}}}{tail}"),
                path: here,
            });
        }
        Value::Array(items) if !items.is_empty() => {
            out.push(JsonLine {
                text: clean(&format!("{prefix}[")),
                path: here.clone(),
            });
            let last = items.len() - 1;
            for (i, v) in items.iter().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                emit(out, path, None, v, depth + 1, i < last);
                path.truncate(len);
            }
            out.push(JsonLine {
                text: format!("{indent}]{tail}"),
                path: here,
            });
        }
        other => out.push(JsonLine {
            text: clean(&format!("{prefix}{}{tail}", scalar(other))),
            path: here,
        }),
    }
}

/// Truncates to at most `width` display columns, ending with `…` when cut.
pub fn fit(text: &str, width: usize) -> String {
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// Truncates to at most `width` display columns by cutting out the middle
/// (`op-1002…-email`), for identifiers: ids often share a long prefix and
/// differ at the end, so the end must stay visible.
pub fn fit_middle(text: &str, width: usize) -> String {
    let widths: Vec<usize> = text.chars().map(|c| c.width().unwrap_or(0)).collect();
    if widths.iter().sum::<usize>() <= width {
        return text.to_string();
    }
    if width < 8 {
        return fit(text, width);
    }
    let room = width - 1;
    let tail_room = room / 3;
    let mut tail_len = 0;
    let mut tail_chars = 0;
    for w in widths.iter().rev() {
        if tail_len + w > tail_room {
            break;
        }
        tail_len += w;
        tail_chars += 1;
    }
    let head = fit(text, room - tail_len + 1);
    let head = head.trim_end_matches('…');
    let tail: String = text.chars().skip(widths.len() - tail_chars).collect();
    format!("{head}…{tail}")
}

/// `text` in `width` columns as its first `head` characters, `…` and as
/// many of its last characters as the rest of the width holds.
fn elide_at(text: &str, width: usize, head: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let head: String = chars.iter().take(head).collect();
    let room = width.saturating_sub(head.width() + 1);
    let mut tail = Vec::new();
    let mut used = 0;
    for c in chars.iter().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        tail.push(*c);
    }
    tail.reverse();
    format!("{head}…{}", tail.into_iter().collect::<String>())
}

/// Identifiers cut to `width` columns so that no two that differ read
/// the same: each keeps its whole text when it fits; otherwise they are
/// cut in the middle at one place for all, the place that leaves them
/// apart, trying first the cut [`fit_middle`] would make (a third of the
/// width kept at the end), then ones that keep more of the start (ids
/// that share a prefix differ just after it, `op-1001-…`, `op-1002-…`),
/// then ones that keep more of the end.
/// `None` when no cut at this width keeps them apart.
pub fn fit_apart(ids: &[String], width: usize) -> Option<Vec<String>> {
    let whole = |id: &String| id.width() <= width;
    let distinct = |cut: &[String]| {
        let mut seen = std::collections::BTreeMap::new();
        ids.iter()
            .zip(cut)
            .all(|(id, c)| *seen.entry(c.clone()).or_insert(id) == id)
    };
    if width == 0 {
        return ids.iter().all(String::is_empty).then(|| ids.to_vec());
    }
    let balanced = (width - 1) - (width - 1) / 3;
    let heads = std::iter::once(balanced)
        .chain(balanced + 1..width)
        .chain((0..balanced).rev());
    heads
        .map(|head| {
            ids.iter()
                .map(|id| {
                    if whole(id) {
                        id.clone()
                    } else {
                        elide_at(id, width, head)
                    }
                })
                .collect::<Vec<String>>()
        })
        .find(|cut| distinct(cut))
}

/// The narrowest width at least `floor` (and at most the widest id) at
/// which [`fit_apart`] keeps the ids apart.
pub fn apart_width(ids: &[String], floor: usize) -> usize {
    let widest = ids.iter().map(|id| id.width()).max().unwrap_or(0);
    (floor.min(widest)..=widest)
        .find(|w| fit_apart(ids, *w).is_some())
        .unwrap_or(widest)
}

/// Word-wraps one line of clean text to `width` display columns, breaking
/// words longer than a line. Deterministic, so layout code can count the
/// lines a paragraph will take before rendering it.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    // Continuation lines keep the first line's indent.
    let indent_len = text.len() - text.trim_start_matches(' ').len();
    let (indent, rest) = text.split_at(indent_len);
    let body = (width.max(1)).saturating_sub(indent_len).max(1);
    wrap_body(rest, body, body)
        .into_iter()
        .map(|line| format!("{indent}{line}"))
        .collect()
}

/// Wraps a line made of parts joined by ` · ` between the parts, so that
/// no line starts or ends with the separator; a part longer than a line is
/// wrapped like [`wrap`].
pub fn wrap_parts(text: &str, width: usize) -> Vec<String> {
    const SEPARATOR: &str = " · ";
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for part in text.split(SEPARATOR) {
        let joined = if line.is_empty() {
            part.to_string()
        } else {
            format!("{line}{SEPARATOR}{part}")
        };
        if joined.width() <= width.max(1) {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        let mut pieces = wrap(part, width);
        line = pieces.pop().unwrap_or_default();
        lines.extend(pieces);
    }
    lines.push(line);
    lines
}

/// Wraps like [`wrap`], indenting every line after the first by `hang`
/// columns (within `width`).
pub fn wrap_hanging(text: &str, width: usize, hang: usize) -> Vec<String> {
    let width = width.max(1);
    let rest = width.saturating_sub(hang).max(1);
    let pad = " ".repeat(hang.min(width.saturating_sub(1)));
    wrap_body(text, width, rest)
        .into_iter()
        .enumerate()
        .map(|(i, line)| if i == 0 { line } else { format!("{pad}{line}") })
        .collect()
}

fn wrap_body(text: &str, first_width: usize, rest_width: usize) -> Vec<String> {
    let mut width = first_width.max(1);
    let rest_width = rest_width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    for word in text.split(' ') {
        let w: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
        let gap = usize::from(!line.is_empty());
        if used + gap + w <= width {
            if gap == 1 {
                line.push(' ');
            }
            line.push_str(word);
            used += gap + w;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
            used = 0;
            width = rest_width;
        }
        // A word longer than a line is broken where it has to be.
        for c in word.chars() {
            let cw = c.width().unwrap_or(0);
            if used + cw > width && !line.is_empty() {
                lines.push(std::mem::take(&mut line));
                used = 0;
                width = rest_width;
            }
            line.push(c);
            used += cw;
        }
    }
    lines.push(line);
    lines
}

/// An age in one short word, as the queue shows it: under a minute is
/// `<1m` (a triage day is counted in minutes, and a screenshot of a
/// workspace built seconds apart reads the same), then the domain's
/// `15m`, `2h`, `3d`.
pub fn age_short(age: std::time::Duration) -> String {
    if age.as_secs() < 60 {
        "<1m".to_string()
    } else {
        crate::domain::time::age_text(age)
    }
}
