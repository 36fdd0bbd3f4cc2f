//! The adapter's own drills, for tests: named hooks, each at one boundary,
//! read from the environment. They are not part of `recon-adapter/1` (recon
//! never sends them); a test sets them on the adapter process it starts, or
//! on the `recon` process whose child it is.
//!
//! - `RECON_PG_LEDGER_HOLD_POINT=NAME` with `RECON_PG_LEDGER_HOLD_FIFO=PATH`:
//!   on reaching the named hold point, the process opens the fifo for
//!   reading (so a test's open for writing returns: the test now knows
//!   where it is, and which lock it holds) and waits for one line before it
//!   goes on. The points:
//!   - `apply.after_gate_lock`: `apply` holds the shared gate lock and has
//!     seen the operation open; it has not inserted yet. This is how a test
//!     holds eight writers inside their transactions while a close arrives,
//!     and releases them in the order it chooses, without sleeping.
//!   - `close.after_gate_lock`: `close` holds the exclusive gate lock and
//!     has read whether the operation is closed; it has not marked it yet.
//!     This is how a test lands a second close while the first holds the
//!     row.
//! - `RECON_PG_LEDGER_CRASH=after-apply-commit | after-close-commit`: the
//!   process exits with code 23 right after that commit, before it answers:
//!   a lost receipt, or a lost close answer.

use recon::receiver::EXIT_CRASH_AFTER_COMMIT;
use std::io::BufRead;

pub const HOLD_POINT_ENV: &str = "RECON_PG_LEDGER_HOLD_POINT";
pub const HOLD_FIFO_ENV: &str = "RECON_PG_LEDGER_HOLD_FIFO";
pub const CRASH_ENV: &str = "RECON_PG_LEDGER_CRASH";

/// A boundary where a drill can hold the process (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldPoint {
    /// `apply`, holding the shared gate lock, before its insert.
    ApplyAfterGateLock,
    /// `close`, holding the exclusive gate lock, before it marks the row.
    CloseAfterGateLock,
}

impl HoldPoint {
    fn name(self) -> &'static str {
        match self {
            HoldPoint::ApplyAfterGateLock => "apply.after_gate_lock",
            HoldPoint::CloseAfterGateLock => "close.after_gate_lock",
        }
    }
}

/// The commit a crash drill can follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    Apply,
    Close,
}

impl Commit {
    fn drill_name(self) -> &'static str {
        match self {
            Commit::Apply => "after-apply-commit",
            Commit::Close => "after-close-commit",
        }
    }
}

/// Waits for the test's line if this hold point is armed; does nothing
/// otherwise, or when the fifo cannot be read (a drill never breaks a run).
pub fn hold(point: HoldPoint) {
    if std::env::var(HOLD_POINT_ENV).ok().as_deref() != Some(point.name()) {
        return;
    }
    let Some(fifo) = std::env::var_os(HOLD_FIFO_ENV) else {
        return;
    };
    if let Ok(file) = std::fs::File::open(fifo) {
        let mut line = String::new();
        let _ = std::io::BufReader::new(file).read_line(&mut line);
    }
}

/// Dies here, committed and unanswered, if this commit's drill is armed.
pub fn after_commit(commit: Commit) {
    if std::env::var(CRASH_ENV).ok().as_deref() == Some(commit.drill_name()) {
        std::process::exit(EXIT_CRASH_AFTER_COMMIT);
    }
}
