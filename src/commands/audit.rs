//! The integrity commands: `verify` and `export` of the evidence log.
//!
//! Both open only the evidence log ([`super::open::open_log`]), so they work
//! when the receiver's file is gone. A broken log is a finding, not a
//! failure: the report is printed as usual and the exit code is 1, which is
//! why the results carry their own exit code rather than raising one.

use super::open::{open_log, required_workspace};
use super::output::write_file;
use super::{Failure, Out, Render, EXIT_MISMATCH, EXIT_OK};
use crate::audit::{StoredRow, VerifyReport};
use crate::cli::{ExportArgs, VerifyArgs};
use crate::domain::sanitize::{escape, json_for_terminal};
use std::path::{Path, PathBuf};

/// `recon verify`: the hash chain, the states, and optionally an earlier
/// export, which is read (and must parse) before the workspace is opened.
pub struct Verify {
    dir: PathBuf,
    against: Option<Vec<StoredRow>>,
}

impl Verify {
    pub fn validate(args: VerifyArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        let dir = required_workspace(workspace)?;
        let against = args.against.as_deref().map(read_export).transpose()?;
        Ok(Verify { dir, against })
    }

    pub fn run(self) -> Result<Verified, Failure> {
        Ok(Verified(
            open_log(&self.dir)?.verify(self.against.as_deref())?,
        ))
    }
}

/// Reads an earlier `recon export`, skipping blank lines.
fn read_export(path: &Path) -> Result<Vec<StoredRow>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            StoredRow::from_export_line(line).map_err(|e| {
                Failure::Usage(format!(
                    "{} line {} is not an exported evidence row: {e}",
                    path.display(),
                    n + 1
                ))
            })
        })
        .collect()
}

pub struct Verified(VerifyReport);

impl Verified {
    fn broken_lines(&self, out: &mut Out) -> Result<(), Failure> {
        let report = &self.0;
        out.line(format!("evidence log BROKEN ({} rows)", report.rows))?;
        if let Some(broken) = &report.first_broken {
            out.line(format!(
                "  first broken link: row {} (seq {}): {}",
                broken.index, broken.seq, broken.reason
            ))?;
        }
        for mismatch in &report.state_mismatches {
            out.line(format!("  {}", escape(mismatch)))?;
        }
        if let Some(difference) = report
            .export
            .as_ref()
            .and_then(|e| e.first_difference.as_ref())
        {
            out.line(format!(
                "  exported copy: row {} (seq {}): {}",
                difference.index, difference.seq, difference.reason
            ))?;
        }
        Ok(())
    }
}

impl Render for Verified {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let report = &self.0;
        if !report.intact {
            return self.broken_lines(out);
        }
        let export = report
            .export
            .as_ref()
            .map(|e| format!("; the exported copy's {} rows are a prefix of it", e.rows))
            .unwrap_or_default();
        out.line(format!(
            "evidence log intact: {} rows, head {}{export}",
            report.rows, report.head_hash
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }

    fn exit_code(&self) -> i32 {
        if self.0.intact {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}

/// `recon export`: every row as stored, one JSON line each, to a file
/// (atomically) or to stdout.
pub struct Export {
    dir: PathBuf,
    output: Option<PathBuf>,
}

impl Export {
    pub fn validate(args: ExportArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        Ok(Export {
            dir: required_workspace(workspace)?,
            output: args.output,
        })
    }

    /// Writes the file when one was asked for, even from a broken log: the
    /// copy is how damage is shown later.
    pub fn run(self) -> Result<Exported, Failure> {
        let (rows, report) = open_log(&self.dir)?.export()?;
        let mut text = String::new();
        for row in &rows {
            text.push_str(&row.export_line());
            text.push('\n');
        }
        let stdout = match &self.output {
            Some(path) => {
                write_file(path, &text)?;
                None
            }
            None => Some(json_for_terminal(text)),
        };
        Ok(Exported {
            rows: rows.len(),
            intact: report.intact,
            stdout,
        })
    }
}

pub struct Exported {
    rows: usize,
    intact: bool,
    /// The lines, when they go to stdout rather than to a file; the same
    /// JSON with the controls a terminal would obey escaped (a file gets
    /// them as stored).
    stdout: Option<String>,
}

impl Render for Exported {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        if let Some(text) = &self.stdout {
            out.direct(text)?;
        }
        if !self.intact {
            // A finding, so an archiving script notices; not an error.
            out.stderr_line(&format!(
                "error: exported {} rows, but the evidence log is broken; run `recon verify`",
                self.rows
            ));
        }
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        if self.intact {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}
