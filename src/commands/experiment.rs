//! The scripted experiment of SPEC section 5: `recon experiment` runs it
//! and prints (or writes) its JSON; `recon --check` runs it and compares
//! the result with the expected one.
//!
//! Both spawn this same binary as the receiver, in fresh temporary
//! workspaces, so neither takes `--workspace`. They class a failure to run
//! differently, as they always have: `experiment` as storage or process
//! trouble (exit 4), `--check` as a usage error (exit 2); exit 1 is left
//! to a real difference.

use super::output::read_bounded;
use super::output::write_file;
use super::{Failure, Out, Render, EXIT_MISMATCH, EXIT_OK};
use crate::cli::ExperimentArgs;
use crate::dispatch::ReceiverProgram;
use crate::domain::sanitize::escape;
use crate::experiment::{self, Difference};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `recon experiment [--output PATH]`.
pub struct Experiment {
    output: Option<PathBuf>,
}

impl Experiment {
    pub fn validate(args: ExperimentArgs) -> Self {
        Experiment {
            output: args.output,
        }
    }

    pub fn run(self) -> Result<Ran, Failure> {
        let results = experiment::run(&ReceiverProgram::current()?)?;
        let text = experiment::to_text(&results);
        match &self.output {
            Some(path) => {
                write_file(path, &text)?;
                Ok(Ran { stdout: None })
            }
            None => Ok(Ran { stdout: Some(text) }),
        }
    }
}

pub struct Ran {
    /// The results' JSON, when it goes to stdout rather than to a file.
    stdout: Option<String>,
}

impl Render for Ran {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        match &self.stdout {
            Some(text) => out.text(text),
            None => Ok(()),
        }
    }
}

/// `recon --check [EXPECTED] [--output PATH]`.
/// The largest EXPECTED file `--check` reads: 16 MiB, far above any
/// results document (`results.json` is about 12 KiB).
pub const MAX_EXPECTED_BYTES: u64 = 16 * 1024 * 1024;

pub struct Check {
    expected: Value,
    output: Option<PathBuf>,
}

impl Check {
    /// Reads and parses the expected results: the compiled-in
    /// `results.json`, or the file given.
    pub fn validate(expected: Option<&Path>, output: Option<PathBuf>) -> Result<Self, Failure> {
        let (text, source) = match expected {
            None => (
                experiment::EXPECTED_RESULTS.to_string(),
                "the compiled-in results.json".to_string(),
            ),
            Some(path) => (
                read_bounded(path, MAX_EXPECTED_BYTES)?,
                path.display().to_string(),
            ),
        };
        let expected = crate::domain::parse_json(&text).map_err(|e| {
            Failure::Usage(format!("{} {e}", crate::domain::sanitize::escape(&source)))
        })?;
        Ok(Check { expected, output })
    }

    pub fn run(self) -> Result<Checked, Failure> {
        let program = ReceiverProgram::current()
            .map_err(|e| Failure::Usage(format!("cannot find the recon binary: {e}")))?;
        let actual = experiment::run(&program)
            .map_err(|e| Failure::Usage(format!("the experiment could not run: {e}")))?;
        if let Some(path) = &self.output {
            write_file(path, &experiment::to_text(&actual))?;
        }
        Ok(Checked {
            differences: experiment::compare(&self.expected, &actual),
            scenarios: actual["scenarios"].as_object().map_or(0, |s| s.len()),
            receiver_child_processes: actual["receiver_child_processes"].clone(),
        })
    }
}

pub struct Checked {
    differences: Vec<Difference>,
    scenarios: usize,
    receiver_child_processes: Value,
}

impl Render for Checked {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        if self.differences.is_empty() {
            return out.line(format!(
                "check passed: {} scenarios, {} receiver child processes, results equal",
                self.scenarios, self.receiver_child_processes
            ));
        }
        for d in &self.differences {
            out.line(escape(&d.to_string()))?;
        }
        out.line(format!(
            "check FAILED: {} differing paths",
            self.differences.len()
        ))
    }

    fn exit_code(&self) -> i32 {
        if self.differences.is_empty() {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}
