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

/// The routed action kind a refused kind was most likely meant to be: the
/// nearest by edit distance (a swap of two neighbours counts as one edit),
/// when it is at most two edits away and fewer than half the refused
/// kind's characters; ties go to the first in `routed`'s order. `*` is
/// never suggested. A `no_receiver` refusal names it instead of advising
/// to register a receiver for what is probably a typo.
pub fn nearest_kind<'a>(kind: &str, routed: &'a [String]) -> Option<&'a str> {
    let limit = (kind.chars().count().saturating_sub(1) / 2).min(2);
    routed
        .iter()
        .filter(|candidate| candidate.as_str() != super::ANY_ACTION)
        .map(|candidate| (edits(kind, candidate), candidate.as_str()))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// The optimal-string-alignment distance between two strings, by
/// characters: insertions, deletions, substitutions and swaps of two
/// neighbours each count one.
fn edits(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::nearest_kind;
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

    #[track_caller]
    fn near(kind: &str, routed: &[&str], expected: Option<&str>) {
        let routed: Vec<String> = routed.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            nearest_kind(kind, &routed),
            expected,
            "{kind:?} in {routed:?}"
        );
    }

    #[test]
    fn a_misspelled_kind_is_offered_the_nearest_routed_kind_and_nothing_far_or_star() {
        near(
            "send_emial",
            &["charge_card", "send_email"],
            Some("send_email"),
        );
        near("send_mail", &["send_email"], Some("send_email"));
        near("sendemail", &["send_email"], Some("send_email"));
        near(
            "send_emails",
            &["send_email", "send_emails_x"],
            Some("send_email"),
        );
        near("refund", &["send_email", "charge_card"], None);
        near("send_sms", &["send_email"], None);
        near("ab", &["ac"], None);
        near("abc", &["abd"], Some("abd"));
        near("send_emial", &["*"], None);
        near("send_emial", &[], None);
        // The nearest wins over the first; among equals, the first.
        near("chrage", &["change", "charge"], Some("charge"));
        near(
            "charge_crd",
            &["charge_cart", "charge_card"],
            Some("charge_card"),
        );
        near("abc", &["abe", "abd"], Some("abe"));
    }
}
