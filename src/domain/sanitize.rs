//! Untrusted text (payloads, ids, reviewer names, receiver output) made safe
//! for a terminal.
//!
//! Control characters (C0, DEL, C1) and the bidirectional formatting
//! characters are shown as visible escapes (`\x1b`, `\u{202e}`) rather than
//! dropped, so a reviewer sees that they are there; nothing else changes.
//! JSON text gets the same treatment in JSON's own escape syntax, so output
//! that is still valid JSON cannot move a cursor or reorder what a terminal
//! shows.

use std::borrow::Cow;
use std::fmt::Write;

/// Characters that reorder or hide text on screen.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Characters that show nothing: the default-ignorable code points
/// (zero-width spaces and joiners, bidi marks, variation selectors, tags,
/// fillers). A terminal draws them as nothing or joins their neighbours
/// into one glyph, so text holding them has no width a layout can trust,
/// and a name made of them looks empty.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}'
        | '\u{17b5}' | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}' | '\u{fff0}'..='\u{fff8}'
        | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// True for every character [`escape`] rewrites: controls, bidi controls,
/// and invisible characters (shown as `\u{200d}`, so a zero-width joiner
/// in a payload can neither hide nor break a row's layout).
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_invisible(c)
}

/// Escapes control and bidi characters; keeps newlines when `keep_newlines`.
pub fn escape_with(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| is_unsafe(c) && !(keep_newlines && c == '\n'))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && is_unsafe(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Escapes every control and bidi character, newlines included: for text
/// that must stay on one line (ids, names, table cells).
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, false)
}

/// Rewrites the characters serde_json leaves raw (C1 controls, DEL, bidi
/// controls, invisible characters) as `\uXXXX`: one escape per UTF-16 code
/// unit, so a character above U+FFFF (a variation selector such as
/// U+E0100, a flag's tags) is its surrogate pair `\udb40\udd00`, which
/// every JSON parser reads back as that one character. The result is still
/// the same JSON document.
pub fn json_for_terminal(json: String) -> String {
    if !json.chars().any(is_unsafe_in_json) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe_in_json(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// serde_json escapes C0 controls itself; raw newlines in pretty output are
/// structure, not content, and stay.
fn is_unsafe_in_json(c: char) -> bool {
    is_unsafe(c) && !matches!(c, '\n' | ' ')
}

#[cfg(test)]
mod tests {
    use super::json_for_terminal;
    use serde_json::Value;

    #[test]
    fn json_for_terminal_reads_back_as_the_same_text() {
        let text = "a\u{e0100}b\u{1f3f4}\u{e0067}\u{e007f}\u{202e}\u{85}\u{1f1eb}\u{1f1f7}";
        let json = json_for_terminal(Value::from(text).to_string());
        assert_eq!(
            json,
            "\"a\\udb40\\udd00b\u{1f3f4}\\udb40\\udc67\\udb40\\udc7f\\u202e\\u0085\u{1f1eb}\u{1f1f7}\""
        );
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), text);
    }
}
