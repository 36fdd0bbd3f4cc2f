//! The receiver seam: what recon asks of any tool that performs a side
//! effect, in domain terms.
//!
//! The shape follows Cargo's credential providers: a small trait that a
//! provider implements ([`Receiver`]: `describe`, `apply`, `query`, `close`)
//! and a function that serves it to the host. The built-in ledger
//! ([`Builtin`], over `receiver.sqlite`) is the first implementation; a
//! process speaking `recon-adapter/1` is the next, and the facade will hold
//! either without knowing which. A receiver returns records (effects and
//! snapshots with their flags), never verdicts: `domain::classify` is the
//! only judge.
//!
//! [`serve_apply`] is the child side of a dispatch: what `recon receiver
//! apply` runs, with the two drills that model a lost receipt (exit 23 after
//! the commit) and a lost request (exit 24 before it).

mod builtin;

pub use builtin::Builtin;

use crate::domain::{Description, Effect, EffectRequest, Snapshot};
use crate::error::Result;
use crate::settings::OpenOptions;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// A tool that performs side effects and can be asked what it holds.
pub trait Receiver {
    /// What the receiver says of itself: name, version, and its ceiling.
    fn describe(&mut self) -> Result<Description>;
    /// Performs the effect once and returns its receipt; refused
    /// `operation_closed` once the operation is closed.
    fn apply(&mut self, request: &EffectRequest<'_>) -> Result<Effect>;
    /// Every effect the receiver holds for the operation, read without
    /// changing anything.
    fn query(&mut self, op_id: &str) -> Result<Snapshot>;
    /// Closes the operation for good (no effect can be written for it
    /// afterwards) and returns what it held at that moment, in one step.
    fn close(&mut self, op_id: &str, authorized_by: &str) -> Result<Snapshot>;
}

/// Exit code of a receiver that committed and then died before its receipt.
pub const EXIT_CRASH_AFTER_COMMIT: i32 = 23;
/// Exit code of a receiver that died before writing anything.
pub const EXIT_CRASH_BEFORE_COMMIT: i32 = 24;
/// The line a `--wait-permit` receiver prints once its database is open.
pub const READY_LINE: &str = "ready";

/// A receiver fault, for the experiment and for drills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    CrashAfterCommit,
    CrashBeforeCommit,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::CrashAfterCommit => "crash-after-commit",
            Fault::CrashBeforeCommit => "crash-before-commit",
        }
    }
}

/// The JSON line a receiver prints after its commit.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReceiptLine {
    pub receipt: Effect,
}

/// The arguments of `recon receiver apply`.
#[derive(Debug, Clone)]
pub struct ApplyArgs {
    pub workspace: PathBuf,
    pub op_id: String,
    pub action_kind: String,
    pub payload: Value,
    pub compensates_effect_id: Option<String>,
    pub fault: Option<Fault>,
    pub wait_permit: bool,
}

/// Runs the receiver side of one call on the built-in ledger.
///
/// Under `crash-after-commit` the process exits with code 23 right after the
/// commit, through `std::process::exit`: no unwinding, no receipt, nothing on
/// stdout. Under `crash-before-commit` it exits with code 24 before writing
/// anything.
pub fn serve_apply(args: &ApplyArgs, options: OpenOptions) -> Result<()> {
    let mut ledger = Builtin::open(&args.workspace, options)?;
    if args.wait_permit {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{READY_LINE}").and_then(|()| out.flush())?;
        let mut permit = String::new();
        std::io::stdin().lock().read_line(&mut permit)?;
    }
    if args.fault == Some(Fault::CrashBeforeCommit) {
        std::process::exit(EXIT_CRASH_BEFORE_COMMIT);
    }
    let effect = ledger.apply(&EffectRequest {
        op_id: &args.op_id,
        action_kind: &args.action_kind,
        payload: &args.payload,
        compensates_effect_id: args.compensates_effect_id.as_deref(),
    })?;
    if args.fault == Some(Fault::CrashAfterCommit) {
        std::process::exit(EXIT_CRASH_AFTER_COMMIT);
    }
    let line = serde_json::to_string(&ReceiptLine { receipt: effect })
        .map_err(|e| crate::error::StoreError::Corrupt(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())?;
    Ok(())
}
