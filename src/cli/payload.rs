//! `--payload`: JSON text, `@PATH`, or `@-` for stdin, as curl does.
//!
//! Payloads can be larger than a command line allows, so they may come from
//! a file or stdin; both are read with a size limit. What the text may hold
//! is the domain's rule (`domain::parse_payload`, which the console's
//! compensation form uses too): JSON with no duplicate key, nested at most
//! [`MAX_PAYLOAD_DEPTH`] levels, with I-JSON numbers, so that whatever is
//! accepted here can be stored, wrapped by the engine, and read back, and
//! its canonical form (what is stored and hashed) says what was sent. A
//! payload that breaks a rule is a usage error before any database is
//! opened.

use super::UsageError;
use crate::domain::parse_payload;
/// The largest payload accepted, from an argument, a file or stdin: the
/// domain's bound (`domain::bounds`), which keeps an answer holding eight
/// matches of it, escaped at worst, within the protocol's line.
pub use crate::domain::MAX_PAYLOAD_BYTES;
pub use crate::domain::MAX_PAYLOAD_DEPTH;
use serde_json::Value;
use std::io::Read;
use std::path::Path;

/// Why `--payload` was refused: a usage error (exit 2), with the code its
/// JSON error carries (`bad_number` for a number with no one meaning).
#[derive(Debug)]
pub struct PayloadError {
    pub code: Option<&'static str>,
    pub message: String,
}

impl From<UsageError> for PayloadError {
    fn from(e: UsageError) -> Self {
        PayloadError {
            code: None,
            message: e.0,
        }
    }
}

/// Reads `--payload`: JSON text, `@PATH`, or `@-` for stdin, as curl does.
pub fn read_payload(arg: &str) -> Result<Value, PayloadError> {
    let text = match arg.strip_prefix('@') {
        Some("-") => read_limited(std::io::stdin().lock(), "stdin")?,
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| UsageError(format!("cannot read payload file {path}: {e}")))?;
            read_limited(file, path)?
        }
        None => arg.to_string(),
    };
    parse_payload(&text).map_err(|why| {
        let hint = if !arg.starts_with('@') && looks_like_a_path(arg) {
            format!(
                "; to read a file, write @PATH (--payload @{})",
                crate::domain::sanitize::escape(arg)
            )
        } else {
            String::new()
        };
        PayloadError {
            code: why.code(),
            message: format!("--payload {why}{hint}"),
        }
    })
}

/// Whether text that is not JSON was probably meant as a file: it names
/// one, or it is written as a path.
fn looks_like_a_path(arg: &str) -> bool {
    ["/", "./", "../", "~/"].iter().any(|p| arg.starts_with(p)) || Path::new(arg).is_file()
}

fn read_limited(reader: impl Read, what: &str) -> Result<String, UsageError> {
    let mut text = String::new();
    reader
        .take(MAX_PAYLOAD_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| UsageError(format!("cannot read payload from {what}: {e}")))?;
    if text.len() > MAX_PAYLOAD_BYTES {
        return Err(UsageError(format!(
            "payload from {what} is larger than {MAX_PAYLOAD_BYTES} bytes"
        )));
    }
    Ok(text)
}
