//! `--payload`: JSON text, `@PATH`, or `@-` for stdin, as curl does.
//!
//! Payloads can be larger than a command line allows, so they may come from
//! a file or stdin; both are read with a size limit, and the JSON is held to
//! a nesting limit, so that whatever is accepted here can be stored, wrapped
//! by the engine, and read back. A payload that breaks a limit, or is not
//! JSON, is a usage error before any database is opened. So is a number
//! outside I-JSON (an integer beyond ±(2^53−1), or more digits than a double
//! keeps): its canonical form, which is what is stored and hashed, would not
//! say what was sent.

use super::UsageError;
use crate::domain::check_i_json;
use serde_json::Value;
use std::io::Read;

/// The largest payload accepted, read from an argument, a file or stdin:
/// 4 MiB, so that a receipt (which carries the payload back) fits in the
/// 8 MiB answer line of `recon-adapter/1` with room for everything around
/// it, and a snapshot of one match does too.
pub const MAX_PAYLOAD_BYTES: u64 = 4 * 1024 * 1024;

/// The deepest nesting of arrays and objects accepted in a payload. The
/// engine wraps a payload in up to four more levels (a receipt line, a
/// snapshot in an evidence row, an exported evidence line), and serde_json
/// reads at most 128; a payload nested deeper than this limit would be
/// stored, and then its receipt, its evidence or its export would not read
/// back.
pub const MAX_PAYLOAD_DEPTH: usize = 64;

/// Reads `--payload`: JSON text, `@PATH`, or `@-` for stdin, as curl does.
pub fn read_payload(arg: &str) -> Result<Value, UsageError> {
    let text = match arg.strip_prefix('@') {
        Some("-") => read_limited(std::io::stdin().lock(), "stdin")?,
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| UsageError(format!("cannot read payload file {path}: {e}")))?;
            read_limited(file, path)?
        }
        None => arg.to_string(),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| UsageError(format!("--payload is not JSON: {e}")))?;
    if depth(&value) > MAX_PAYLOAD_DEPTH {
        return Err(UsageError(format!(
            "--payload is nested deeper than {MAX_PAYLOAD_DEPTH} levels"
        )));
    }
    check_i_json(&text).map_err(|why| UsageError(format!("--payload {why}")))?;
    Ok(value)
}

/// How many arrays and objects deep a value is (a scalar is 0). Iterative,
/// so no input can exhaust the stack here.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(level + 1);
        stack.extend(children.map(|child| (child, level + 1)));
    }
    deepest
}

fn read_limited(reader: impl Read, what: &str) -> Result<String, UsageError> {
    let mut text = String::new();
    reader
        .take(MAX_PAYLOAD_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| UsageError(format!("cannot read payload from {what}: {e}")))?;
    if text.len() as u64 > MAX_PAYLOAD_BYTES {
        return Err(UsageError(format!(
            "payload from {what} is larger than {MAX_PAYLOAD_BYTES} bytes"
        )));
    }
    Ok(text)
}
