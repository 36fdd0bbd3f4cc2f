//! The command line: clap definitions, then validation into typed values.
//!
//! The low level is [`Cli`], exactly the flags of SPEC section 6. The high
//! level is [`crate::commands`], which takes validated arguments, calls the
//! library, and prints. Anything that is wrong with the input itself (a
//! payload that is not JSON, an id with control characters, `--close`
//! without `--authorized-by`) is a usage error, exit 2, before any database is
//! opened.

use crate::dispatch::Fault;
use crate::domain::{Decision, OpState};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  `--check`: the reproduced results differ from the expected ones;
     `verify`, `export`: the evidence log is broken (tampered with)
  2  usage error (bad flags, a payload that is not JSON, a malformed id)
  3  refused by a safety rule; stderr says `refused: <code>: <detail>`
  4  storage or I/O error (missing workspace, not a recon database,
     database locked past the busy timeout)

Environment:
  RECON_BUSY_TIMEOUT_MS  how long to wait for another process's write lock
                         (default 5000)";

#[derive(Debug, Parser)]
#[command(
    name = "recon",
    version,
    about = "Keep lost-receipt side effects durably unknown, gather receiver evidence, \
             and let a named human reviewer decide.",
    long_about = "Keep lost-receipt side effects durably unknown, refuse every blind retry, \
                  query the receiver for evidence, classify it conservatively, and let a \
                  named human reviewer record confirmed or not_applied against the version \
                  they saw.\n\nWith no command, opens the review console (on a fresh \
                  temporary demo workspace when --workspace is not given).",
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// The workspace directory (holding sender.sqlite and receiver.sqlite).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Console: the reviewer's name (asked before the first mutation if absent).
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,

    /// Rerun the whole experiment and compare it with EXPECTED (default: the
    /// checked-in results.json compiled into this binary).
    #[arg(long, value_name = "EXPECTED", num_args = 0..=1, default_missing_value = "")]
    pub check: Option<PathBuf>,

    /// With --check: also write the reproduced JSON to PATH.
    #[arg(long, value_name = "PATH", requires = "check")]
    pub output: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scripted experiment and print (or write) its JSON only.
    #[command(after_help = EXIT_CODES)]
    Experiment {
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
    },
    /// Put a new operation in the outbox, state prepared at version 1.
    #[command(after_help = EXIT_CODES)]
    Prepare {
        #[arg(long = "op", value_name = "ID")]
        op_id: String,
        #[arg(long = "action", value_name = "KIND")]
        action_kind: String,
        /// JSON text, or @PATH to read it from a file (@- for stdin).
        #[arg(long, value_name = "JSON")]
        payload: String,
    },
    /// Dispatch a prepared operation: persist unknown, then invoke the
    /// receiver. Exits 0 whenever the receiver was invoked; a lost receipt is
    /// an outcome (`unknown`), not an error.
    #[command(after_help = EXIT_CODES)]
    Dispatch {
        #[arg(value_name = "ID")]
        op_id: String,
        /// Make the receiver child fail (a drill).
        #[arg(long, value_enum)]
        fault: Option<FaultArg>,
        #[arg(long)]
        json: bool,
    },
    /// List operations in op id order.
    #[command(after_help = EXIT_CODES)]
    Ops {
        #[arg(long, value_enum)]
        state: Option<StateArg>,
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Start after this op id (keyset paging).
        #[arg(long, value_name = "ID")]
        after: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show one operation, its evidence history and its approvals.
    #[command(after_help = EXIT_CODES)]
    Show {
        #[arg(value_name = "ID")]
        op_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Print the receiver's effects.
    #[command(after_help = EXIT_CODES)]
    Ledger {
        #[arg(long = "op", value_name = "ID")]
        op_id: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Read the receiver's effects for an operation and classify them. With
    /// --close this is a receiver mutation: it closes the operation for good,
    /// which can cancel an original still in flight.
    #[command(after_help = EXIT_CODES)]
    Snapshot {
        #[arg(value_name = "ID")]
        op_id: String,
        #[command(flatten)]
        close: CloseArgs,
        #[arg(long)]
        json: bool,
    },
    /// Take a fresh snapshot, classify it, and record the reviewer's decision
    /// only when the verdict supports it.
    #[command(after_help = EXIT_CODES)]
    Reconcile {
        #[arg(value_name = "ID")]
        op_id: String,
        #[arg(long, value_name = "NAME")]
        reviewer: String,
        #[arg(long, value_enum)]
        decision: DecisionArg,
        /// The version the reviewer saw.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
        expected_version: i64,
        /// The payload scope the reviewer decided on (default: the stored one).
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        #[command(flatten)]
        close: CloseArgs,
        #[arg(long)]
        json: bool,
    },
    /// Approve a compensation for one confirmed effect and prepare its
    /// operation, in one transaction.
    #[command(name = "approve-compensation", after_help = EXIT_CODES)]
    ApproveCompensation {
        #[arg(value_name = "ID")]
        op_id: String,
        #[arg(long, value_name = "EFFECT")]
        effect: String,
        #[arg(long, value_name = "NAME")]
        approver: String,
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
        expected_version: i64,
        #[arg(long = "compensation-op", value_name = "CID")]
        compensation_op: String,
        #[arg(long = "action", value_name = "KIND")]
        action_kind: String,
        #[arg(long, value_name = "JSON")]
        payload: String,
        #[arg(long)]
        json: bool,
    },
    /// Recompute the evidence log's hash chain, cross-check it with the
    /// operations' states, and report the first broken link. Exits 0 when
    /// intact, 1 when broken.
    #[command(after_help = EXIT_CODES)]
    Verify {
        /// Also check that this earlier `recon export` is still a prefix of
        /// the log (catches a rewritten chain or removed last rows).
        #[arg(long, value_name = "FILE")]
        against: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Write the evidence log as JSON lines with their hashes, to keep a
    /// copy outside the database. Writes every row as stored, then exits 1 if
    /// the log is broken.
    #[command(after_help = EXIT_CODES)]
    Export {
        /// Write to PATH (atomically) instead of stdout.
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
    },
    /// The receiver side (what `dispatch` spawns).
    #[command(subcommand)]
    Receiver(ReceiverCommand),
}

#[derive(Debug, Subcommand)]
pub enum ReceiverCommand {
    /// Write one effect and print its receipt. Exits 3 with
    /// `refused: operation_closed` on a closed operation, 23 under
    /// crash-after-commit (committed, no receipt), 24 under
    /// crash-before-commit (nothing written).
    #[command(after_help = EXIT_CODES)]
    Apply {
        #[arg(long = "op", value_name = "ID")]
        op_id: String,
        #[arg(long = "action", value_name = "KIND")]
        action_kind: String,
        #[arg(long, value_name = "JSON")]
        payload: String,
        #[arg(long, value_name = "EFFECT")]
        compensates: Option<String>,
        #[arg(long, value_enum)]
        fault: Option<FaultArg>,
        /// Print `ready` once the database is open, then wait for one line on
        /// stdin before writing.
        #[arg(long)]
        wait_permit: bool,
    },
}

#[derive(Debug, Args)]
pub struct CloseArgs {
    /// Take a closing snapshot (a receiver mutation).
    #[arg(long, requires = "authorized_by")]
    pub close: bool,
    /// Who authorized the close; recorded in the receiver's tombstone.
    #[arg(long, value_name = "NAME", requires = "close")]
    pub authorized_by: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FaultArg {
    CrashAfterCommit,
    CrashBeforeCommit,
}

impl From<FaultArg> for Fault {
    fn from(arg: FaultArg) -> Fault {
        match arg {
            FaultArg::CrashAfterCommit => Fault::CrashAfterCommit,
            FaultArg::CrashBeforeCommit => Fault::CrashBeforeCommit,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StateArg {
    Prepared,
    Unknown,
    Confirmed,
    #[value(name = "not_applied", alias = "not-applied")]
    NotApplied,
}

impl From<StateArg> for OpState {
    fn from(arg: StateArg) -> OpState {
        match arg {
            StateArg::Prepared => OpState::Prepared,
            StateArg::Unknown => OpState::Unknown,
            StateArg::Confirmed => OpState::Confirmed,
            StateArg::NotApplied => OpState::NotApplied,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DecisionArg {
    Confirmed,
    #[value(name = "not_applied", alias = "not-applied")]
    NotApplied,
}

impl From<DecisionArg> for Decision {
    fn from(arg: DecisionArg) -> Decision {
        match arg {
            DecisionArg::Confirmed => Decision::Confirmed,
            DecisionArg::NotApplied => Decision::NotApplied,
        }
    }
}

/// A usage error found after clap: exit 2, one line.
#[derive(Debug)]
pub struct UsageError(pub String);

/// The largest payload accepted, read from an argument, a file or stdin.
pub const MAX_PAYLOAD_BYTES: u64 = 16 * 1024 * 1024;

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

/// Checks an identifier (op id, action kind, effect id): 1 to 200
/// characters, no whitespace or control characters.
pub fn identifier<'a>(what: &str, text: &'a str) -> Result<&'a str, UsageError> {
    if text.is_empty() {
        return Err(UsageError(format!("{what} is empty")));
    }
    if text.chars().count() > 200 {
        return Err(UsageError(format!("{what} is longer than 200 characters")));
    }
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_whitespace() || crate::sanitize::is_unsafe(c))
    {
        return Err(UsageError(format!(
            "{what} {} contains {}",
            crate::sanitize::escape(text),
            crate::sanitize::escape(&c.to_string())
        )));
    }
    Ok(text)
}

/// Checks a person's name: control characters are refused as a usage
/// error; a blank name is left for the engine to refuse as `empty_reviewer`.
pub fn person<'a>(what: &str, text: &'a str) -> Result<&'a str, UsageError> {
    if text.chars().count() > 200 {
        return Err(UsageError(format!("{what} is longer than 200 characters")));
    }
    if text.chars().any(crate::sanitize::is_unsafe) {
        return Err(UsageError(format!(
            "{what} {} contains control characters",
            crate::sanitize::escape(text)
        )));
    }
    Ok(text)
}
