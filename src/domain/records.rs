//! Values that cross the seams: what a caller asks a store or a receiver to
//! do, and what comes back. They are plain data in domain terms, so the
//! facade, the stores and the receivers can all name them without naming
//! each other.

use super::time::Timestamp;
use super::triage::{EscalationAction, SortOrder, VerdictFilter};
use super::{OpState, Operation, Provenance, Snapshot, Verdict};
use serde_json::Value;

/// A new operation to put in the outbox, in state `prepared`.
#[derive(Debug, Clone)]
pub struct NewOperation<'a> {
    pub op_id: &'a str,
    pub action_kind: &'a str,
    pub payload: &'a Value,
    /// The key and client of an operation sent through MCP (SPEC 13),
    /// kept in its `prepared` entry.
    pub origin: Option<&'a super::origin::Origin>,
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
    /// The closing snapshot as recorded, and its canonical SHA-256: what a
    /// decision resting on this close must carry exactly (SPEC 12).
    pub snapshot: serde_json::Value,
    pub snapshot_sha256: String,
    /// The closing login the receiver's tombstone names, when it gives one.
    pub closed_by: Option<String>,
    /// When the outbox recorded the close: stamped by the store as a
    /// [`NewObservation`]'s `at` is.
    pub closed_at: Timestamp,
}

/// An operation as a bulk mark keeps it: what a bulk act later checks it
/// against (the version, the state, the payload, the receiver), without
/// the rest of its row.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueKey {
    pub op_id: String,
    pub version: i64,
    pub state: OpState,
    pub payload: serde_json::Value,
    pub receiver: String,
}

/// An operation the journal named after some position, as it is now: what
/// a reader who saw that position compares its marks and dialogs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub op_id: String,
    pub state: OpState,
    pub version: i64,
}

/// The newest journal entry that names an operation: its seq is how far
/// the operation's history goes (any act on it, a note or a marker as much
/// as a new version, appends one), and its kind and person say what the
/// latest change was and who made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestEntry {
    pub seq: i64,
    /// The entry's kind, as the journal names it (`noted`, `escalated`…).
    pub kind: String,
    /// The person the entry names (who noted, decided, authorized,
    /// observed or approved), if it names one.
    pub by: Option<String>,
    /// The authenticated role that wrote it (team mode).
    pub role: Option<String>,
}

impl LatestEntry {
    /// What the change was and who made it, in words: `escalated by bob
    /// (role bob)`.
    pub fn describe(&self) -> String {
        let by = self
            .by
            .as_deref()
            .map(|b| format!(" by {b}"))
            .unwrap_or_default();
        let role = (self.role.as_deref())
            .map(|r| format!(" (role {r})"))
            .unwrap_or_default();
        format!("{}{by}{role}", self.kind)
    }
}

/// Which operations the queue shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueFilter<'a> {
    /// Only this state; every state when `None`.
    pub state: Option<OpState>,
    /// Only operations whose op id, action kind or payload (its JSON
    /// text) contains this text (ASCII case-insensitive).
    pub search: Option<&'a str>,
    /// Only operations whose latest observation has this verdict, or that
    /// were never observed.
    pub verdict: Option<VerdictFilter>,
    /// Only escalated operations (`Some(true)`), or only the others.
    pub escalated: Option<bool>,
    /// Only contradicted operations (`Some(true)`), or only the others.
    pub contradicted: Option<bool>,
    /// Only operations whose `updated_at` is before this instant.
    pub updated_before: Option<Timestamp>,
    /// Only operations routed to this receiver (`operations.receiver`).
    pub receiver: Option<&'a str>,
    /// Only operations with a surplus effect (SPEC 14) not yet compensated
    /// (`Some(true)`, no approval for it yet), or only the others.
    pub surplus: Option<bool>,
}

/// One page of a listing in either order: the rows matching `filter`
/// after `after`, at most `limit` of them. Keyset paging, so a page costs
/// what the page holds, not what the outbox holds.
#[derive(Debug, Clone, Default)]
pub struct OpsQuery<'a> {
    pub filter: QueueFilter<'a>,
    pub sort: SortOrder,
    pub after: Option<Cursor>,
    pub limit: usize,
}

/// Where a listing continues: after this row under this order. Written as
/// an opaque string holding a space (`op_id ID`, `age TIME ID`), which no
/// op id holds, so a bare op id is still read as the cursor of the op id
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    OpId(String),
    Age(Timestamp, String),
}

impl Cursor {
    /// The cursor of a row under an order.
    pub fn of(op: &Operation, sort: SortOrder) -> Cursor {
        match sort {
            SortOrder::OpId => Cursor::OpId(op.op_id.clone()),
            SortOrder::Age => Cursor::Age(op.triage.updated_at, op.op_id.clone()),
        }
    }

    pub fn encode(&self) -> String {
        match self {
            Cursor::OpId(id) => format!("op_id {id}"),
            Cursor::Age(at, id) => format!("age {at} {id}"),
        }
    }

    /// Reads a cursor for a listing under `sort`; one written for the
    /// other order is refused with the reason, as is anything else that is
    /// not a cursor.
    pub fn parse(text: &str, sort: SortOrder) -> Result<Cursor, String> {
        let cursor = match text.split_once(' ') {
            None if !text.is_empty() => Cursor::OpId(text.to_string()),
            Some(("op_id", id)) if !id.is_empty() => Cursor::OpId(id.to_string()),
            Some(("age", rest)) => match rest.split_once(' ') {
                Some((at, id)) if !id.is_empty() => Cursor::Age(
                    Timestamp::parse(at).ok_or_else(|| not_a_cursor(text))?,
                    id.to_string(),
                ),
                _ => return Err(not_a_cursor(text)),
            },
            _ => return Err(not_a_cursor(text)),
        };
        match (&cursor, sort) {
            (Cursor::OpId(_), SortOrder::OpId) | (Cursor::Age(..), SortOrder::Age) => Ok(cursor),
            (Cursor::OpId(_), SortOrder::Age) => Err(format!(
                "{} continues a listing by op id, not by age (use the cursor `ops --sort age \
                 --json` printed)",
                super::sanitize::escape(text)
            )),
            (Cursor::Age(..), SortOrder::OpId) => Err(format!(
                "{} continues a listing by age; add --sort age",
                super::sanitize::escape(text)
            )),
        }
    }
}

fn not_a_cursor(text: &str) -> String {
    format!(
        "{} is not a cursor of `recon ops --json` (nor an op id)",
        super::sanitize::escape(text)
    )
}

/// A read of a receiver to record as an observation.
#[derive(Debug, Clone, Copy)]
pub struct NewObservation<'a> {
    pub op_id: &'a str,
    pub by: &'a str,
    /// The time of the act: a store that records it stamps it with the
    /// time it reads once it holds its write lock.
    pub at: Timestamp,
    pub snapshot: &'a Snapshot,
    pub verdict: Verdict,
    pub provenance: &'a Provenance,
}

/// A note to leave on an operation.
#[derive(Debug, Clone, Copy)]
pub struct NewNote<'a> {
    pub op_id: &'a str,
    pub by: &'a str,
    /// The time of the act: a store that records it stamps it with the
    /// time it reads once it holds its write lock.
    pub at: Timestamp,
    pub text: &'a str,
}

/// Raising or lowering an operation's escalation marker.
#[derive(Debug, Clone, Copy)]
pub struct Marking<'a> {
    pub op_id: &'a str,
    pub action: EscalationAction,
    pub by: &'a str,
    /// The time of the act: a store that records it stamps it with the
    /// time it reads once it holds its write lock.
    pub at: Timestamp,
    pub reason: &'a str,
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
    /// When it was prepared and dispatched.
    pub at: Timestamp,
    /// A read of its receiver recorded as an observation after them.
    pub observation: Option<BulkObservation>,
}

/// A generated operation's observation: what an ordinary read of the
/// built-in ledger returns for it once its effects are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkObservation {
    pub at: Timestamp,
    pub by: String,
    pub snapshot: Snapshot,
    pub verdict: Verdict,
    /// The built-in ledger's, filled in by the facade.
    pub provenance: Provenance,
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
    /// A stable id of the store behind the adapter (the ledger database,
    /// the mailbox): another instance is another receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// `"session": true`: the adapter answers request after request in one
    /// process (`PROGRAM ARG... session`), so a command starts it once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub session: bool,
    /// `"batch": N`: a query or a close may carry up to N op ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
}

/// The batch the built-in ledger declares: what one request may carry.
pub const BUILTIN_BATCH: u32 = 500;

impl Description {
    /// What recon's own ledger says of itself: complete and authoritative,
    /// and able to close unless registered with `--no-close`.
    pub fn builtin(can_close: bool) -> Description {
        Description {
            name: BUILTIN_NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            can_close,
            query: Ceiling {
                complete: true,
                authoritative: true,
            },
            mandatory: Vec::new(),
            instance: None,
            session: true,
            batch: Some(BUILTIN_BATCH),
        }
    }

    /// How many operations one read or close of this receiver may carry:
    /// its declared `batch`, and 1 when it declares none.
    pub fn batch_size(&self) -> usize {
        self.batch.map_or(1, |n| (n as usize).max(1))
    }

    /// The `describe` answer this description is, as an adapter writes it
    /// (`recon_adapter` beside the fields): what its SHA-256 is taken over.
    pub fn answer(&self) -> serde_json::Value {
        let mut answer = serde_json::Map::new();
        answer.insert("recon_adapter".into(), serde_json::Value::from(1u64));
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(self) {
            answer.extend(fields);
        }
        serde_json::Value::Object(answer)
    }
}

/// The name of recon's own ledger: reserved for it, and the name `demo`,
/// the experiment and an upgrade register it under.
pub const BUILTIN_NAME: &str = "builtin";

/// The action kind that routes every kind not routed elsewhere.
pub const ANY_ACTION: &str = "*";

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
    /// The registration's identity: the seq of the journal entry that
    /// registered it, never reused; a name can be taken again, an id not.
    #[serde(default)]
    pub id: i64,
    /// 1 at registration, one more at each journaled update.
    #[serde(default)]
    pub version: i64,
    pub name: String,
    pub actions: Vec<String>,
    /// recon's own ledger: no program is stored; it runs as this recon's
    /// `receiver adapter` on the workspace (`--no-close` in `args`).
    #[serde(default)]
    pub builtin: bool,
    pub program: String,
    pub args: Vec<String>,
    /// The names of the variables passed to the adapter from recon's
    /// environment (their values are read at run time, never stored).
    #[serde(default)]
    pub env: Vec<String>,
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

    pub fn parse(text: &str) -> Option<FailureKind> {
        [
            FailureKind::SpawnFailed,
            FailureKind::Crash,
            FailureKind::Timeout,
            FailureKind::Garbage,
            FailureKind::ExtraOutput,
            FailureKind::Oversize,
            FailureKind::Mismatch,
            FailureKind::Error,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// A receiver call that gave no usable answer, kept with the act it
/// belongs to (SPEC 8 rule 7): a reviewer sees why an operation became or
/// stayed `unknown`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallFailure {
    /// The journal entry that recorded it (0 before it is recorded).
    pub seq: i64,
    pub op_id: String,
    /// `apply` (a dispatch), `query` (a read someone recorded) or `close`.
    pub verb: String,
    pub receiver: String,
    pub kind: FailureKind,
    pub detail: String,
    /// `None` when recon killed the process or it never ran.
    pub exit_code: Option<i32>,
    /// The last lines the adapter wrote on stderr (at most
    /// [`CallFailure::STDERR_KEPT`] bytes), as written: escape it to show it.
    pub stderr: String,
    /// When it was recorded: stamped by the store as a
    /// [`NewObservation`]'s `at` is.
    pub at: super::Timestamp,
}

impl CallFailure {
    /// How much of an adapter's stderr a failure keeps in the journal.
    pub const STDERR_KEPT: usize = 4096;

    /// The tail of `stderr` a failure keeps, cut at a character boundary.
    pub fn tail(stderr: &str) -> String {
        let mut start = stderr.len().saturating_sub(Self::STDERR_KEPT);
        while !stderr.is_char_boundary(start) {
            start += 1;
        }
        stderr[start..].to_string()
    }
}

/// A failed receiver call, as the dispatch report shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdapterFailure {
    pub kind: FailureKind,
    pub detail: String,
}
