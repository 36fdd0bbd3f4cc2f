//! The one renderer: a command's typed result, or its [`Failure`], becomes
//! bytes on stdout and stderr and an exit code here, and nowhere else.
//!
//! Each result type says how it reads as text and as JSON by implementing
//! [`Render`]; [`finish`] picks the form the command line asked for
//! ([`Format`]) and handles failures on the same path. A result's JSON is
//! serialized from the typed value itself, not through `serde_json::Value`,
//! because a `Value` object sorts its keys and the field order of every
//! document would change.

use super::{Failure, Out, EXIT_OK};
use crate::cli::Cli;
use crate::domain::sanitize::escape;
use serde_json::Value;

/// The form the command line asked for: `--json`, or human text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    /// Read from the command line before anything is validated, so that a
    /// failure anywhere afterwards knows the form too.
    pub fn of(cli: &Cli) -> Format {
        if cli.command.as_ref().is_some_and(|command| command.json()) {
            Format::Json
        } else {
            Format::Text
        }
    }
}

/// A command's result, as the user sees it.
pub trait Render {
    /// The human form on stdout; untrusted text escaped for the terminal.
    fn text(&self, out: &mut Out) -> Result<(), Failure>;

    /// The `--json` form: one document, whose field names are the contract
    /// of SPEC 6. Commands without `--json` are never asked for it
    /// ([`Format::of`]) and keep this default.
    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        self.text(out)
    }

    /// 0, or 1 for a result that is a finding (`--check` mismatch, a
    /// broken journal).
    fn exit_code(&self) -> i32 {
        EXIT_OK
    }
}

/// A result that prints nothing: the console, which drew its own screen,
/// and `receiver apply`, whose receipt line is the receiver protocol's.
pub struct Silent;

impl Render for Silent {
    fn text(&self, _out: &mut Out) -> Result<(), Failure> {
        Ok(())
    }
}

/// Prints a result or a failure and returns the process's exit code.
pub fn finish(result: Result<Box<dyn Render>, Failure>, format: Format, mut out: Out) -> i32 {
    let printed = result.and_then(|report| {
        match format {
            Format::Text => report.text(&mut out)?,
            Format::Json => report.json(&mut out)?,
        }
        out.flush()?;
        Ok(report.exit_code())
    });
    match printed {
        Ok(code) => code,
        Err(failure) => {
            // Whatever reached the buffer goes out before the message, as
            // it would have when the buffer was dropped.
            let _ = out.flush();
            // SPEC 6: under `--json` a failure is still one JSON document
            // on stdout, besides its one line on stderr.
            if let (Format::Json, Some(document)) = (format, failure.json()) {
                let _ = out.json(&document).and_then(|()| out.flush());
            }
            if let Some(line) = failure.message() {
                out.stderr_line(&line);
            }
            failure.exit_code()
        }
    }
}

/// A payload as one line: canonical JSON, escaped for the terminal.
pub fn payload_line(value: &Value) -> String {
    escape(&crate::domain::canonical_json(value)).into_owned()
}

/// What one recorded read saw, in one line: the verdict, the matches, the
/// flags and the receiver (`observe` and `show`).
pub fn observation_line(o: &crate::domain::Observed) -> String {
    let matches = match o.matches {
        1 => "1 match".to_string(),
        n => format!("{n} matches"),
    };
    format!(
        "{} ({matches}; complete {}, authoritative {}, closed {}) from {}",
        o.verdict,
        o.complete,
        o.authoritative,
        o.closed,
        crate::domain::sanitize::escape(&o.receiver)
    )
}
