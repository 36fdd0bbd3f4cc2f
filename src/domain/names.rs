//! What a typed name may hold: identifiers (op ids, action kinds, effect
//! ids) and people's names (reviewers, approvers, authorizers). The command
//! line and the console both check input here, so they cannot disagree.
//! A refusal is a one-line message naming what was refused, escaped, and
//! the character that made it refuse, visibly (`a space (U+0020)`).

use super::sanitize;

/// The most characters an identifier or a person's name may hold.
pub const MAX_ID_CHARS: usize = 200;

/// Checks an identifier (op id, action kind, effect id): 1 to
/// [`MAX_ID_CHARS`] characters, no whitespace or control characters.
pub fn identifier<'a>(what: &str, text: &'a str) -> Result<&'a str, String> {
    if text.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if text.chars().count() > MAX_ID_CHARS {
        return Err(format!("{what} is longer than {MAX_ID_CHARS} characters"));
    }
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_whitespace() || sanitize::is_unsafe(c))
    {
        return Err(format!(
            "{what} {} contains {}",
            sanitize::escape(text),
            describe(c)
        ));
    }
    Ok(text)
}

/// Checks a person's name: a control character or a bidi override,
/// embedding or isolate (which reorder what a reader sees) is a usage
/// error; a name with no visible character (blank, zero-width, bidi marks)
/// is left for the engine to refuse as empty ([`has_visible`]).
pub fn person<'a>(what: &str, text: &'a str) -> Result<&'a str, String> {
    if text.chars().count() > MAX_ID_CHARS {
        return Err(format!("{what} is longer than {MAX_ID_CHARS} characters"));
    }
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_control() || is_bidi_override(c))
    {
        return Err(format!(
            "{what} {} contains control characters: {}",
            sanitize::escape(text),
            describe(c)
        ));
    }
    Ok(text)
}

/// Bidi overrides, embeddings and isolates: they reorder the text around
/// them, so a name holding one could read as another name.
fn is_bidi_override(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether a name holds at least one character a reader can see.
pub fn has_visible(name: &str) -> bool {
    name.chars()
        .any(|c| !c.is_whitespace() && !sanitize::is_invisible(c))
}

/// A character named so a reader sees what it is: `a space (U+0020)`,
/// `\x1b (a control character, U+001B)`.
pub fn describe(c: char) -> String {
    let code = format!("U+{:04X}", c as u32);
    let shown = sanitize::escape_with(&c.to_string(), false).into_owned();
    match c {
        ' ' => format!("a space ({code})"),
        c if c.is_control() => format!("{shown} (a control character, {code})"),
        c if is_bidi_override(c) => format!("{shown} (a bidi override, {code})"),
        c if sanitize::is_invisible(c) => format!("{shown} (an invisible character, {code})"),
        c if c.is_whitespace() => format!("a white-space character ({code})"),
        _ => format!("{shown} ({code})"),
    }
}

/// Checks a receiver's name: `[a-z0-9][a-z0-9_-]{0,39}`, so it reads the
/// same in a list, a log line and a file name. (That `builtin` is reserved
/// is a refusal, not a usage error: the facade says so.)
pub fn receiver(text: &str) -> Result<&str, String> {
    let mut chars = text.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if first_ok && rest_ok && text.len() <= 40 {
        Ok(text)
    } else {
        Err(format!(
            "receiver name {} must match [a-z0-9][a-z0-9_-]{{0,39}}",
            sanitize::escape(text)
        ))
    }
}

/// Checks the name of an environment variable passed to an adapter
/// (`--env`): a portable name, `[A-Za-z_][A-Za-z0-9_]*`.
pub fn env_var(text: &str) -> Result<&str, String> {
    let mut chars = text.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && text.len() <= 200 {
        Ok(text)
    } else {
        Err(format!(
            "--env takes a variable's name ([A-Za-z_][A-Za-z0-9_]*), not {}",
            sanitize::escape(text)
        ))
    }
}

/// A series of op ids that are one prefix followed by a fixed number of
/// decimal digits (`op-bulk-0000042`): fixed width, so the ids' text order
/// (byte order) is their numbers' order, and the last one of a series is
/// one step down an index on op ids, whatever else the outbox holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberedIds {
    pub prefix: &'static str,
    pub digits: usize,
}

impl NumberedIds {
    /// The id numbered `n`.
    pub fn id(self, n: u64) -> String {
        format!("{}{n:0width$}", self.prefix, width = self.digits)
    }

    /// The number of an id of the series, or `None` for any other id.
    pub fn number(self, op_id: &str) -> Option<u64> {
        let digits = op_id.strip_prefix(self.prefix)?;
        if digits.len() != self.digits || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// The greatest number the width holds.
    pub fn max_number(self) -> u64 {
        (0..self.digits).fold(0u64, |n, _| n.saturating_mul(10).saturating_add(9))
    }

    /// The least and the greatest id of the series in byte order: every id
    /// of the series is between them (others may be too).
    pub fn bounds(self) -> (String, String) {
        (
            format!("{}{}", self.prefix, "0".repeat(self.digits)),
            format!("{}{}", self.prefix, "9".repeat(self.digits)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::receiver;
    use super::NumberedIds;

    #[test]
    fn numbered_ids_round_trip_and_their_bounds_hold_the_series_only_in_byte_order() {
        let ids = NumberedIds {
            prefix: "op-bulk-",
            digits: 3,
        };
        assert_eq!(ids.id(42), "op-bulk-042");
        assert_eq!(ids.number("op-bulk-042"), Some(42));
        assert_eq!(ids.number("op-bulk-42"), None);
        assert_eq!(ids.number("op-bulk-0x2"), None);
        assert_eq!(ids.number("op-bulk-+42"), None);
        assert_eq!(ids.max_number(), 999);
        let (low, high) = ids.bounds();
        assert!(low == ids.id(0) && high == ids.id(ids.max_number()));
        // Ids between the bounds need not be of the series.
        assert!(low.as_str() < "op-bulk-5a" && "op-bulk-5a" < high.as_str());
        assert_eq!(ids.number("op-bulk-5a"), None);
    }

    #[track_caller]
    fn check(name: &str, ok: bool) {
        assert_eq!(receiver(name).is_ok(), ok, "{name:?}");
    }

    #[test]
    fn receiver_names_follow_the_pattern() {
        check("mail", true);
        check("0-payments_eu", true);
        check(&"a".repeat(40), true);
        check(&"a".repeat(41), false);
        check("", false);
        check("-mail", false);
        check("_mail", false);
        check("Mail", false);
        check("mail.eu", false);
        check("ma il", false);
        check("mäil", false);
    }
}
