//! `RECON_LOG` (SPEC 15): with `json`, every command but the console
//! writes one JSON line per act it commits to stderr (`crate::actlog`
//! notes them; this installs where they go), and the console writes them
//! only to the file `RECON_LOG_FILE` names, when it is set (its screen
//! owns the terminal). Unset, empty or `text`: no JSON log, and the text
//! a command prints stays as it is; any other value is a usage error.
//!
//! A line on stderr never lands inside a progress line (`watch`): the
//! progress line is cleared first and drawn again after it
//! ([`super::watch::log_line`]).

use super::Failure;
use crate::actlog::{self, ActLine, Sink};
use crate::domain::sanitize::{escape, json_for_terminal};
use std::io::Write;
use std::sync::Mutex;

pub const LOG_VARIABLE: &str = "RECON_LOG";
pub const LOG_FILE_VARIABLE: &str = "RECON_LOG_FILE";

/// Reads `RECON_LOG` and installs the sink it asks for; `console` says
/// whether the command is the interactive console.
pub fn configure(console: bool) -> Result<(), Failure> {
    let value = std::env::var(LOG_VARIABLE).unwrap_or_default();
    match value.as_str() {
        "" | "text" => Ok(()),
        "json" if !console => {
            actlog::install(Box::new(Stderr));
            Ok(())
        }
        "json" => {
            let Some(path) = std::env::var_os(LOG_FILE_VARIABLE).filter(|p| !p.is_empty()) else {
                return Ok(());
            };
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| {
                    Failure::Usage(format!(
                        "{LOG_FILE_VARIABLE}: cannot open {}: {e}",
                        escape(&path.to_string_lossy())
                    ))
                })?;
            actlog::install(Box::new(File(Mutex::new(file))));
            Ok(())
        }
        other => Err(Failure::Usage(format!(
            "{LOG_VARIABLE} must be json (one JSON line per act on stderr) or text (the \
             default), not {}",
            escape(other)
        ))),
    }
}

/// One act as its JSON line (without the line feed), with what a terminal
/// must not see raw escaped.
fn json_line(line: &ActLine) -> String {
    json_for_terminal(serde_json::to_string(line).unwrap_or_default())
}

/// Lines on stderr, around the progress line.
struct Stderr;

impl Sink for Stderr {
    fn write(&self, line: &ActLine) {
        super::watch::log_line(&json_line(line));
    }
}

/// Lines appended to a file, one write each.
struct File(Mutex<std::fs::File>);

impl Sink for File {
    fn write(&self, line: &ActLine) {
        let mut file = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // A log that cannot be written never stops an act that committed.
        let _ = file.write_all(format!("{}\n", json_line(line)).as_bytes());
    }
}
