//! Values that cross the seams: what a caller asks a store or a receiver to
//! do, and what comes back. They are plain data in domain terms, so the
//! facade, the stores and the receivers can all name them without naming
//! each other.

use super::{OpState, Operation, Verdict};
use serde_json::Value;

/// A new operation to put in the outbox, in state `prepared`.
#[derive(Debug, Clone)]
pub struct NewOperation<'a> {
    pub op_id: &'a str,
    pub action_kind: &'a str,
    pub payload: &'a Value,
}

/// What a recorded review produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub operation: Operation,
    pub verdict: Verdict,
    pub evidence_seq: i64,
}

/// A request to write one effect.
#[derive(Debug, Clone)]
pub struct EffectRequest<'a> {
    pub op_id: &'a str,
    pub action_kind: &'a str,
    pub payload: &'a Value,
    pub compensates_effect_id: Option<&'a str>,
}

/// Who closed an operation, and how many effects it had then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    pub op_id: String,
    pub authorized_by: String,
    pub effects_at_close: i64,
}

/// A close a receiver committed, as the outbox's journal records it: who
/// closed the operation where, the answer that says so, and the effects the
/// closing snapshot held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseRecord {
    pub receiver: String,
    pub authorized_by: String,
    pub response_sha256: String,
    /// The effect ids of the closing snapshot's matches.
    pub matches: Vec<String>,
}

/// Which operations the queue shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueFilter<'a> {
    /// Only this state; every state when `None`.
    pub state: Option<OpState>,
    /// Only operations whose op id or action kind contains this text
    /// (ASCII case-insensitive).
    pub search: Option<&'a str>,
}

/// Where a page starts. Pages come back in ascending `op_id` order whichever
/// way they were read.
#[derive(Debug, Clone, Copy)]
pub enum PageBound<'a> {
    /// The first rows.
    Start,
    /// The last rows.
    End,
    /// Rows after this op id.
    After(&'a str),
    /// Rows from this op id on, itself included.
    From(&'a str),
    /// The rows just before this op id.
    Before(&'a str),
}

/// A generated original operation whose receipt was lost: it is stored as
/// dispatched (`unknown` at version 2, one `dispatch_log` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkOperation {
    pub op_id: String,
    pub action_kind: String,
    /// Canonical JSON text.
    pub canonical_payload: String,
}

/// A generated receiver effect; its id comes from its ledger row, as in
/// the built-in ledger's own writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkEffect {
    pub op_id: String,
    pub action_kind: String,
    /// Canonical JSON text.
    pub canonical_payload: String,
}

/// The ledger rows one bulk append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub count: u64,
    /// The first and last `seq` written; `None` when nothing was.
    pub seq_range: Option<(i64, i64)>,
}

/// What a receiver says of itself (`describe` in `recon-adapter/1`): its
/// name and version, whether it can close an operation for good, and the
/// ceiling on what its reads can ever claim.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Description {
    pub name: String,
    pub version: String,
    pub can_close: bool,
    pub query: Ceiling,
    /// Capabilities a host must understand to use this receiver at all.
    #[serde(default)]
    pub mandatory: Vec<String>,
}

/// The most a receiver's read can claim: a snapshot's `complete` and
/// `authoritative` flags are never higher than these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ceiling {
    pub complete: bool,
    pub authoritative: bool,
}

/// A receiver registered in the outbox: the program recon runs for it, the
/// action kinds routed to it, and its stored `describe` answer (the ceiling
/// every one of its answers is held to) with that answer's SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Registration {
    pub name: String,
    pub actions: Vec<String>,
    pub program: String,
    pub args: Vec<String>,
    pub timeout_ms: u64,
    pub describe: Description,
    pub describe_sha256: String,
}

impl Registration {
    pub fn can_close(&self) -> bool {
        self.describe.can_close
    }
}

/// Why a receiver call produced no usable answer. None of these is
/// evidence: a dispatch that ends in one leaves its operation `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The program could not be started.
    SpawnFailed,
    /// It ended without a response line.
    Crash,
    /// It ran past the receiver's timeout and was killed.
    Timeout,
    /// Its answer is not one `recon-adapter/1` JSON object.
    Garbage,
    /// It wrote more than one line.
    ExtraOutput,
    /// Its answer is longer than the bound.
    Oversize,
    /// Its receipt is for another operation, payload, action or target.
    Mismatch,
    /// It answered `ok: false`.
    Error,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::SpawnFailed => "spawn_failed",
            FailureKind::Crash => "crash",
            FailureKind::Timeout => "timeout",
            FailureKind::Garbage => "garbage",
            FailureKind::ExtraOutput => "extra_output",
            FailureKind::Oversize => "oversize",
            FailureKind::Mismatch => "mismatch",
            FailureKind::Error => "error",
        }
    }
}

/// A failed receiver call, as the dispatch report shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdapterFailure {
    pub kind: FailureKind,
    pub detail: String,
}
