//! What a typed name may hold: identifiers (op ids, action kinds, effect
//! ids) and people's names (reviewers, approvers, authorizers). The command
//! line and the console both check input here, so they cannot disagree.
//! A refusal is a one-line message naming what was refused, escaped.

use super::sanitize;

/// Checks an identifier (op id, action kind, effect id): 1 to 200
/// characters, no whitespace or control characters.
pub fn identifier<'a>(what: &str, text: &'a str) -> Result<&'a str, String> {
    if text.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if text.chars().count() > 200 {
        return Err(format!("{what} is longer than 200 characters"));
    }
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_whitespace() || sanitize::is_unsafe(c))
    {
        return Err(format!(
            "{what} {} contains {}",
            sanitize::escape(text),
            sanitize::escape(&c.to_string())
        ));
    }
    Ok(text)
}

/// Checks a person's name: control characters are refused as a usage
/// error; a blank name is left for the engine to refuse as `empty_reviewer`.
pub fn person<'a>(what: &str, text: &'a str) -> Result<&'a str, String> {
    if text.chars().count() > 200 {
        return Err(format!("{what} is longer than 200 characters"));
    }
    if text.chars().any(sanitize::is_unsafe) {
        return Err(format!(
            "{what} {} contains control characters",
            sanitize::escape(text)
        ));
    }
    Ok(text)
}
