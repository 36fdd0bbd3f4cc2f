//! The sender's database: the journal, and the tables that are its
//! projection (the outbox of operations, evidence, compensation approvals,
//! the dispatch log, closes).
//!
//! Every act is one `BEGIN IMMEDIATE` transaction that appends its journal
//! entry and writes its rows; a state change is a conditional update
//! (`WHERE state = ? AND version = ?`) in it, so a change, its record and
//! its entry commit or roll back together. The rules that decide whether a change is allowed are
//! the pure functions of [`crate::domain`]; this module only runs them inside
//! the right transaction against freshly read rows.

use super::{journal, open_database, Outbox, Role, SqlContext};
use crate::audit::{self, EntryKind};
use crate::domain::{
    canonical_json, check_approval, check_compensation_dispatch, check_review, Approval,
    CloseRecord, CompensationRequest, Decision, Effect, EvidenceRecord, EvidenceSource,
    NewOperation, OpKind, OpState, Operation, Provenance, Recorded, Review, Verdict,
};
use crate::error::{Refusal, Result, StoreError};
use crate::faults::{crash_point, CrashPoint};
use crate::settings::OpenOptions;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) const ROLE: Role = Role {
    application_id: 0x7263_6e73, // "rcns"
    schema: SCHEMA,
};

const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE operations (
    op_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('original', 'compensation')),
    action_kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    compensates_effect_id TEXT,
    compensates_op_id TEXT REFERENCES operations(op_id),
    state TEXT NOT NULL CHECK (state IN ('prepared', 'unknown', 'confirmed', 'not_applied')),
    version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    confirmed_effect_id TEXT,
    receiver TEXT NOT NULL,
    CHECK ((kind = 'original') = (compensates_effect_id IS NULL)),
    CHECK ((kind = 'original') = (compensates_op_id IS NULL))
) WITHOUT ROWID;
CREATE INDEX operations_by_state ON operations(state, op_id);

CREATE TABLE state_counts (
    state TEXT PRIMARY KEY,
    n INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO state_counts (state, n)
VALUES ('prepared', 0), ('unknown', 0), ('confirmed', 0), ('not_applied', 0);
CREATE TRIGGER state_counts_insert AFTER INSERT ON operations
BEGIN
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;
CREATE TRIGGER state_counts_update AFTER UPDATE OF state ON operations
WHEN OLD.state <> NEW.state
BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;

CREATE TABLE journal (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('prepared', 'dispatched', 'receipt', 'observed', 'closed',
        'decided', 'approved', 'noted', 'escalated', 'deescalated', 'receiver_registered',
        'receiver_removed')),
    op_id TEXT,
    entry TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX journal_by_op ON journal(op_id, seq);
CREATE TRIGGER journal_append_only_update BEFORE UPDATE ON journal
BEGIN
    SELECT RAISE(ABORT, 'the journal is append-only');
END;
CREATE TRIGGER journal_append_only_delete BEFORE DELETE ON journal
BEGIN
    SELECT RAISE(ABORT, 'the journal is append-only');
END;

CREATE TABLE evidence (
    seq INTEGER PRIMARY KEY,
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    source TEXT NOT NULL CHECK (source IN ('receipt', 'review')),
    reviewer TEXT,
    decision TEXT NOT NULL CHECK (decision IN ('confirmed', 'not_applied')),
    verdict TEXT,
    snapshot TEXT NOT NULL,
    from_version INTEGER NOT NULL,
    to_version INTEGER NOT NULL,
    effect_id TEXT,
    receiver TEXT NOT NULL,
    receiver_describe_sha256 TEXT NOT NULL,
    response_sha256 TEXT NOT NULL,
    journal_seq INTEGER NOT NULL UNIQUE REFERENCES journal(seq)
);
CREATE INDEX evidence_by_op ON evidence(op_id, seq);
CREATE TRIGGER evidence_append_only_update BEFORE UPDATE ON evidence
BEGIN
    SELECT RAISE(ABORT, 'evidence is append-only');
END;
CREATE TRIGGER evidence_append_only_delete BEFORE DELETE ON evidence
BEGIN
    SELECT RAISE(ABORT, 'evidence is append-only');
END;

CREATE TABLE closes (
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    receiver TEXT NOT NULL,
    authorized_by TEXT NOT NULL,
    journal_seq INTEGER PRIMARY KEY REFERENCES journal(seq)
);
CREATE INDEX closes_by_op ON closes(op_id, journal_seq);
CREATE TRIGGER closes_append_only_update BEFORE UPDATE ON closes
BEGIN
    SELECT RAISE(ABORT, 'closes are append-only');
END;
CREATE TRIGGER closes_append_only_delete BEFORE DELETE ON closes
BEGIN
    SELECT RAISE(ABORT, 'closes are append-only');
END;

CREATE TABLE compensation_approvals (
    original_op_id TEXT NOT NULL REFERENCES operations(op_id),
    effect_id TEXT NOT NULL,
    approved_version INTEGER NOT NULL,
    approver TEXT NOT NULL,
    compensation_op_id TEXT NOT NULL UNIQUE,
    action_kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    UNIQUE (original_op_id, effect_id)
);

CREATE TABLE dispatch_log (
    seq INTEGER PRIMARY KEY,
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    from_version INTEGER NOT NULL
);
CREATE INDEX dispatch_log_by_op ON dispatch_log(op_id, from_version);

CREATE TABLE receivers (
    name TEXT PRIMARY KEY,
    program TEXT NOT NULL,
    args TEXT NOT NULL,
    timeout_ms INTEGER NOT NULL CHECK (timeout_ms > 0),
    describe TEXT NOT NULL,
    describe_sha256 TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE routes (
    action_kind TEXT PRIMARY KEY,
    receiver TEXT NOT NULL REFERENCES receivers(name)
) WITHOUT ROWID;
CREATE INDEX routes_by_receiver ON routes(receiver);
CREATE INDEX operations_by_receiver ON operations(receiver, state);
";

pub struct SqliteSender {
    conn: Connection,
    path: PathBuf,
}

const OP_COLUMNS: &str = "op_id, kind, action_kind, payload, state, version, \
     compensates_effect_id, compensates_op_id, confirmed_effect_id, receiver";

/// Raw columns of an operation row; the payload and enums are parsed after
/// the statement finishes so a malformed row is a typed error, not a panic.
type OpRow = (
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

fn op_row(row: &Row<'_>) -> rusqlite::Result<OpRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
    ))
}

fn parse_op(row: OpRow) -> Result<Operation, StoreError> {
    let (op_id, kind, action_kind, payload, state, version, fx, comp_op, confirmed, receiver) = row;
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of operation {op_id}"));
    Ok(Operation {
        kind: OpKind::parse(&kind).ok_or_else(|| corrupt("kind"))?,
        state: OpState::parse(&state).ok_or_else(|| corrupt("state"))?,
        payload: serde_json::from_str(&payload).map_err(|_| corrupt("payload"))?,
        action_kind,
        version,
        compensates_effect_id: fx,
        compensates_op_id: comp_op,
        confirmed_effect_id: confirmed,
        receiver,
        op_id,
    })
}

const EVIDENCE_COLUMNS: &str = "seq, op_id, source, reviewer, decision, verdict, snapshot, \
     from_version, to_version, effect_id, receiver, receiver_describe_sha256, response_sha256, \
     journal_seq";

/// The evidence columns read back, with the hash of each row's journal
/// entry (empty when the entry is missing, which `verify` reports).
const EVIDENCE_READ: &str = "SELECT e.seq, e.op_id, e.source, e.reviewer, e.decision, e.verdict, \
     e.snapshot, e.from_version, e.to_version, e.effect_id, e.receiver, \
     e.receiver_describe_sha256, e.response_sha256, e.journal_seq, COALESCE(j.hash, '') \
     FROM evidence e LEFT JOIN journal j ON j.seq = e.journal_seq";

/// An evidence row with its enums and snapshot still as stored text; they
/// are parsed after the statement finishes so a malformed row is a typed
/// error, not a panic.
struct RawEvidence {
    record: EvidenceRecord,
    source: String,
    decision: String,
    verdict: Option<String>,
    snapshot: String,
}

fn evidence_row(row: &Row<'_>) -> rusqlite::Result<RawEvidence> {
    Ok(RawEvidence {
        record: EvidenceRecord {
            seq: row.get(0)?,
            op_id: row.get(1)?,
            source: EvidenceSource::Review,
            reviewer: row.get(3)?,
            decision: Decision::Confirmed,
            verdict: None,
            snapshot: Value::Null,
            from_version: row.get(7)?,
            to_version: row.get(8)?,
            effect_id: row.get(9)?,
            receiver: row.get(10)?,
            receiver_describe_sha256: row.get(11)?,
            response_sha256: row.get(12)?,
            journal_seq: row.get(13)?,
            hash: row.get(14)?,
        },
        source: row.get(2)?,
        decision: row.get(4)?,
        verdict: row.get(5)?,
        snapshot: row.get(6)?,
    })
}

fn parse_evidence(raw: RawEvidence) -> Result<EvidenceRecord, StoreError> {
    let RawEvidence {
        mut record,
        source,
        decision,
        verdict,
        snapshot,
    } = raw;
    let seq = record.seq;
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of evidence row {seq}"));
    record.source = EvidenceSource::parse(&source).ok_or_else(|| corrupt("source"))?;
    record.decision = Decision::parse(&decision).ok_or_else(|| corrupt("decision"))?;
    record.verdict = match verdict {
        Some(v) => Some(Verdict::parse(&v).ok_or_else(|| corrupt("verdict"))?),
        None => None,
    };
    record.snapshot = serde_json::from_str(&snapshot).map_err(|_| corrupt("snapshot"))?;
    Ok(record)
}

const APPROVAL_COLUMNS: &str = "original_op_id, effect_id, approved_version, approver, \
     compensation_op_id, action_kind, payload";

fn approval_row(row: &Row<'_>) -> rusqlite::Result<(Approval, String)> {
    Ok((
        Approval {
            original_op_id: row.get(0)?,
            effect_id: row.get(1)?,
            approved_version: row.get(2)?,
            approver: row.get(3)?,
            compensation_op_id: row.get(4)?,
            action_kind: row.get(5)?,
            payload: Value::Null,
        },
        row.get(6)?,
    ))
}

fn parse_approval((mut approval, payload): (Approval, String)) -> Result<Approval, StoreError> {
    approval.payload = serde_json::from_str(&payload).map_err(|_| {
        StoreError::Corrupt(format!(
            "payload of the approval for {}",
            approval.compensation_op_id
        ))
    })?;
    Ok(approval)
}

fn get_op(conn: &Connection, path: &Path, op_id: &str) -> Result<Option<Operation>> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {OP_COLUMNS} FROM operations WHERE op_id = ?1"
        ))
        .and_then(|mut s| s.query_row([op_id], op_row).optional())
        .at(path)?;
    Ok(row.map(parse_op).transpose()?)
}

fn require_op(conn: &Connection, path: &Path, op_id: &str) -> Result<Operation> {
    get_op(conn, path, op_id)?.ok_or_else(|| Refusal::UnknownOperation(op_id.to_string()).into())
}

fn approval_where(
    conn: &Connection,
    path: &Path,
    column: &str,
    value: &str,
) -> Result<Vec<Approval>> {
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM compensation_approvals WHERE {column} = ?1 ORDER BY rowid"
        ))
        .and_then(|mut s| {
            s.query_map([value], approval_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .at(path)?;
    Ok(rows
        .into_iter()
        .map(parse_approval)
        .collect::<Result<Vec<_>, _>>()?)
}

/// Who made the latest recorded change to an operation: the reviewer, or
/// "a receipt".
fn last_changed_by(conn: &Connection, op_id: &str) -> Option<String> {
    conn.prepare_cached(
        "SELECT source, reviewer FROM evidence WHERE op_id = ?1 ORDER BY seq DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row([op_id], |r| {
            let source: String = r.get(0)?;
            let reviewer: Option<String> = r.get(1)?;
            Ok(match reviewer {
                Some(name) => format!("reviewer {name}"),
                None => format!("a {source}"),
            })
        })
        .optional()
    })
    .ok()
    .flatten()
}

/// A state change out of `unknown` and the evidence it rests on.
struct Transition<'a> {
    op: &'a Operation,
    to: OpState,
    source: EvidenceSource,
    reviewer: Option<&'a str>,
    decision: Decision,
    verdict: Option<Verdict>,
    evidence: &'a Value,
    effect_id: Option<&'a str>,
    provenance: &'a Provenance,
}

/// Applies a transition out of `unknown` and appends its journal entry and
/// its evidence row (the entry's projection), in the caller's transaction. Returns the evidence seq, or `None` when the
/// conditional update found the operation changed.
fn transition(tx: &Transaction<'_>, path: &Path, t: Transition<'_>) -> Result<Option<i64>> {
    let changed = tx
        .prepare_cached(
            "UPDATE operations
             SET state = ?1, version = version + 1,
                 confirmed_effect_id = COALESCE(?2, confirmed_effect_id)
             WHERE op_id = ?3 AND state = 'unknown' AND version = ?4",
        )
        .and_then(|mut s| {
            s.execute(params![
                t.to.as_str(),
                t.effect_id,
                t.op.op_id,
                t.op.version
            ])
        })
        .at(path)?;
    if changed != 1 {
        return Ok(None);
    }
    if t.source == EvidenceSource::Review {
        crash_point(CrashPoint::ReconcileAfterStateUpdate);
    }
    let evidence_seq: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM evidence")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .at(path)?;
    let mut record = EvidenceRecord {
        seq: evidence_seq,
        op_id: t.op.op_id.clone(),
        source: t.source,
        reviewer: t.reviewer.map(str::to_string),
        decision: t.decision,
        verdict: t.verdict,
        snapshot: t.evidence.clone(),
        from_version: t.op.version,
        to_version: t.op.version + 1,
        effect_id: t.effect_id.map(str::to_string),
        receiver: t.provenance.receiver.clone(),
        receiver_describe_sha256: t.provenance.receiver_describe_sha256.clone(),
        response_sha256: t.provenance.response_sha256.clone(),
        journal_seq: 0,
        hash: String::new(),
    };
    let sealed = journal::append(
        tx,
        path,
        EntryKind::of_evidence(t.source),
        Some(&record.op_id),
        audit::evidence(&record),
    )?;
    record.journal_seq = sealed.seq;
    record.hash = sealed.hash;
    tx.prepare_cached(&format!(
        "INSERT INTO evidence ({EVIDENCE_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            record.seq,
            record.op_id,
            record.source.as_str(),
            record.reviewer,
            record.decision.as_str(),
            record.verdict.map(Verdict::as_str),
            canonical_json(&record.snapshot),
            record.from_version,
            record.to_version,
            record.effect_id,
            record.receiver,
            record.receiver_describe_sha256,
            record.response_sha256,
            record.journal_seq,
        ])
    })
    .at(path)?;
    Ok(Some(record.seq))
}

impl SqliteSender {
    pub fn open(path: &Path, options: OpenOptions) -> Result<Self, StoreError> {
        let conn = open_database(path, ROLE, options)?;
        Ok(SqliteSender {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    fn immediate(&mut self) -> Result<Transaction<'_>, StoreError> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(&self.path)
    }

    fn evidence_query(&self, sql: &str, op_id: Option<&str>) -> Result<Vec<EvidenceRecord>> {
        let rows: Vec<RawEvidence> = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut s| match op_id {
                Some(id) => s.query_map([id], evidence_row)?.collect(),
                None => s.query_map([], evidence_row)?.collect(),
            })
            .at(&self.path)?;
        Ok(rows
            .into_iter()
            .map(parse_evidence)
            .collect::<Result<Vec<_>, _>>()?)
    }
}

impl Outbox for SqliteSender {
    /// Puts a new original operation in the outbox, `prepared` at version 1.
    fn prepare(&mut self, new: &NewOperation<'_>) -> Result<Operation> {
        let path = self.path.clone();
        let tx = self.immediate()?;
        if get_op(&tx, &path, new.op_id)?.is_some() {
            return Err(Refusal::DuplicateOperation(new.op_id.to_string()).into());
        }
        insert_op(&tx, &path, new, OpKind::Original, None, None)?;
        let op = require_op(&tx, &path, new.op_id)?;
        let fields = audit::prepared(&op);
        journal::append(&tx, &path, EntryKind::Prepared, Some(&op.op_id), fields)?;
        tx.commit().at(&path)?;
        Ok(op)
    }

    fn get(&self, op_id: &str) -> Result<Option<Operation>> {
        get_op(&self.conn, &self.path, op_id)
    }

    /// The operation, or the `unknown_operation` refusal.
    fn require(&self, op_id: &str) -> Result<Operation> {
        require_op(&self.conn, &self.path, op_id)
    }

    /// One page of the outbox in `op_id` order, starting after `after`
    /// (keyset paging: the cost depends on the page, not the table).
    fn list(
        &self,
        state: Option<OpState>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        let after = after.unwrap_or("");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match state {
            Some(state) => self
                .conn
                .prepare_cached(&format!(
                    "SELECT {OP_COLUMNS} FROM operations
                     WHERE state = ?1 AND op_id > ?2 ORDER BY op_id LIMIT ?3"
                ))
                .and_then(|mut s| {
                    s.query_map(params![state.as_str(), after, limit], op_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                }),
            None => self
                .conn
                .prepare_cached(&format!(
                    "SELECT {OP_COLUMNS} FROM operations
                     WHERE op_id > ?1 ORDER BY op_id LIMIT ?2"
                ))
                .and_then(|mut s| {
                    s.query_map(params![after, limit], op_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                }),
        }
        .at(&self.path)?;
        Ok(rows
            .into_iter()
            .map(parse_op)
            .collect::<Result<Vec<_>, _>>()?)
    }

    /// Operations per state, from the trigger-maintained counts table, so it
    /// costs the same at 100 ops as at 100,000.
    fn count_by_state(&self) -> Result<BTreeMap<OpState, i64>> {
        let rows = self
            .conn
            .prepare_cached("SELECT state, n FROM state_counts")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .at(&self.path)?;
        rows.into_iter()
            .map(|(state, n)| {
                OpState::parse(&state)
                    .map(|s| (s, n))
                    .ok_or_else(|| StoreError::Corrupt(format!("state count {state}")).into())
            })
            .collect()
    }

    /// Moves a `prepared` operation to `unknown` and logs the dispatch, in
    /// one transaction that commits before the receiver is invoked. Anything
    /// not `prepared` is refused as a blind retry; a compensation is refused
    /// unless its approval still holds.
    fn begin_dispatch(&mut self, op_id: &str) -> Result<Operation> {
        let path = self.path.clone();
        let tx = self.immediate()?;
        let op = require_op(&tx, &path, op_id)?;
        if op.state != OpState::Prepared {
            return Err(Refusal::BlindRetry {
                op_id: op.op_id,
                state: op.state,
            }
            .into());
        }
        if op.kind == OpKind::Compensation {
            let approval = approval_where(&tx, &path, "compensation_op_id", op_id)?;
            let original = match approval.first() {
                Some(a) => get_op(&tx, &path, &a.original_op_id)?,
                None => None,
            };
            check_compensation_dispatch(&op, approval.first(), original.as_ref())?;
        }
        let changed = tx
            .prepare_cached(
                "UPDATE operations SET state = 'unknown', version = version + 1
                 WHERE op_id = ?1 AND state = 'prepared' AND version = ?2",
            )
            .and_then(|mut s| s.execute(params![op_id, op.version]))
            .at(&path)?;
        debug_assert_eq!(changed, 1, "the row was read in this transaction");
        tx.prepare_cached(
            "INSERT INTO dispatch_log (seq, op_id, from_version)
             VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_log), ?1, ?2)",
        )
        .and_then(|mut s| s.execute(params![op_id, op.version]))
        .at(&path)?;
        let fields = audit::dispatched(op.version, op.version + 1);
        journal::append(&tx, &path, EntryKind::Dispatched, Some(op_id), fields)?;
        let op = require_op(&tx, &path, op_id)?;
        tx.commit().at(&path)?;
        Ok(op)
    }

    /// Records a receipt the receiver printed for a dispatch: `unknown` at
    /// the dispatched version becomes `confirmed`, with the receipt as its
    /// evidence. Returns `None` when the operation changed meanwhile (a
    /// reviewer decided first); the receipt is then not recorded.
    fn record_receipt(
        &mut self,
        op: &Operation,
        receipt: &Effect,
        provenance: &Provenance,
    ) -> Result<Option<(Operation, i64)>> {
        let path = self.path.clone();
        let tx = self.immediate()?;
        let evidence = serde_json::json!({ "receipt": receipt });
        let seq = transition(
            &tx,
            &path,
            Transition {
                op,
                to: OpState::Confirmed,
                source: EvidenceSource::Receipt,
                reviewer: None,
                decision: Decision::Confirmed,
                verdict: None,
                evidence: &evidence,
                effect_id: Some(&receipt.effect_id),
                provenance,
            },
        )?;
        let Some(seq) = seq else {
            return Ok(None);
        };
        let op = require_op(&tx, &path, &op.op_id)?;
        crash_point(CrashPoint::ReceiptBeforeCommit);
        tx.commit().at(&path)?;
        Ok(Some((op, seq)))
    }

    /// Runs the rules of [`check_review`] against the stored row without
    /// writing anything: what [`SqliteSender::record_review`] would refuse.
    /// A caller about to take a closing snapshot (a receiver mutation) asks
    /// first, so a decision that is going to be refused closes nothing.
    fn precheck_review(&self, review: &Review<'_>) -> Result<Verdict> {
        let op = require_op(&self.conn, &self.path, review.op_id)?;
        Ok(check_review(&op, review, || {
            last_changed_by(&self.conn, &op.op_id)
        })?)
    }

    /// Records a reviewer's decision: the rules of [`check_review`] against
    /// the row as it is inside this transaction, then the conditional update
    /// and the evidence append with the full snapshot. If the append fails,
    /// the state change rolls back with it.
    fn record_review(&mut self, review: &Review<'_>, provenance: &Provenance) -> Result<Recorded> {
        let path = self.path.clone();
        if crate::domain::normalize_name(review.reviewer).is_none() {
            return Err(Refusal::EmptyReviewer.into());
        }
        let tx = self.immediate()?;
        let op = require_op(&tx, &path, review.op_id)?;
        let verdict = check_review(&op, review, || last_changed_by(&tx, &op.op_id))?;
        let to = match review.decision {
            Decision::Confirmed => OpState::Confirmed,
            Decision::NotApplied => OpState::NotApplied,
        };
        let effect_id = match review.decision {
            Decision::Confirmed => review
                .snapshot
                .matches
                .first()
                .map(|m| m.effect_id.as_str()),
            Decision::NotApplied => None,
        };
        let snapshot = serde_json::to_value(review.snapshot)
            .map_err(|e| StoreError::Corrupt(format!("snapshot: {e}")))?;
        let reviewer = crate::domain::normalize_name(review.reviewer);
        let seq = transition(
            &tx,
            &path,
            Transition {
                op: &op,
                to,
                source: EvidenceSource::Review,
                reviewer,
                decision: review.decision,
                verdict: Some(verdict),
                evidence: &snapshot,
                effect_id,
                provenance,
            },
        )?
        // The row was read and checked in this same IMMEDIATE transaction,
        // so the conditional update cannot miss; treat it as a stale version
        // anyway rather than assume.
        .ok_or(Refusal::StaleVersion {
            expected: review.expected_version,
            found: op.version,
            state: op.state,
            changed_by: None,
        })?;
        let operation = require_op(&tx, &path, &op.op_id)?;
        crash_point(CrashPoint::ReconcileBeforeCommit);
        tx.commit().at(&path)?;
        Ok(Recorded {
            operation,
            verdict,
            evidence_seq: seq,
        })
    }

    /// Approves a compensation for one confirmed effect and prepares the
    /// compensation operation, in one transaction.
    fn approve_compensation(&mut self, request: &CompensationRequest<'_>) -> Result<Approval> {
        let path = self.path.clone();
        if crate::domain::normalize_name(request.approver).is_none() {
            return Err(Refusal::EmptyReviewer.into());
        }
        let tx = self.immediate()?;
        let original = require_op(&tx, &path, request.original_op_id)?;
        let existing: Vec<Approval> =
            approval_where(&tx, &path, "original_op_id", request.original_op_id)?
                .into_iter()
                .filter(|a| a.effect_id == request.effect_id)
                .collect();
        check_approval(&original, request, existing.first())?;
        if get_op(&tx, &path, request.compensation_op_id)?.is_some() {
            return Err(Refusal::DuplicateOperation(request.compensation_op_id.to_string()).into());
        }
        let approver = crate::domain::normalize_name(request.approver).unwrap_or_default();
        tx.prepare_cached(&format!(
            "INSERT INTO compensation_approvals ({APPROVAL_COLUMNS})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ))
        .and_then(|mut s| {
            s.execute(params![
                request.original_op_id,
                request.effect_id,
                request.expected_version,
                approver,
                request.compensation_op_id,
                request.action_kind,
                canonical_json(request.payload),
            ])
        })
        .at(&path)?;
        crash_point(CrashPoint::ApprovalAfterApprovalInsert);
        insert_op(
            &tx,
            &path,
            &NewOperation {
                op_id: request.compensation_op_id,
                action_kind: request.action_kind,
                payload: request.payload,
            },
            OpKind::Compensation,
            Some(request.effect_id),
            Some(request.original_op_id),
        )?;
        let approval = Approval {
            original_op_id: request.original_op_id.to_string(),
            effect_id: request.effect_id.to_string(),
            approved_version: request.expected_version,
            approver: approver.to_string(),
            compensation_op_id: request.compensation_op_id.to_string(),
            action_kind: request.action_kind.to_string(),
            payload: request.payload.clone(),
        };
        let compensation = require_op(&tx, &path, request.compensation_op_id)?;
        let fields = audit::approved(&approval, &compensation);
        let op_id = Some(request.compensation_op_id);
        journal::append(&tx, &path, EntryKind::Approved, op_id, fields)?;
        crash_point(CrashPoint::ApprovalBeforeCommit);
        tx.commit().at(&path)?;
        Ok(approval)
    }

    /// Records a close the receiver has committed: a `closed` entry and
    /// its `closes` row, in one transaction of the outbox (the receiver's
    /// was another, already committed).
    fn record_close(&mut self, op_id: &str, close: &CloseRecord) -> Result<i64> {
        let path = self.path.clone();
        let tx = self.immediate()?;
        require_op(&tx, &path, op_id)?;
        let fields = audit::closed(close);
        let sealed = journal::append(&tx, &path, EntryKind::Closed, Some(op_id), fields)?;
        tx.prepare_cached(
            "INSERT INTO closes (op_id, receiver, authorized_by, journal_seq)
             VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| {
            s.execute(params![
                op_id,
                close.receiver,
                close.authorized_by,
                sealed.seq
            ])
        })
        .at(&path)?;
        tx.commit().at(&path)?;
        Ok(sealed.seq)
    }

    /// The evidence of one operation, oldest first.
    fn evidence(&self, op_id: &str) -> Result<Vec<EvidenceRecord>> {
        self.evidence_query(
            &format!("{EVIDENCE_READ} WHERE e.op_id = ?1 ORDER BY e.seq"),
            Some(op_id),
        )
    }

    /// Every evidence row in `seq` order.
    fn evidence_log(&self) -> Result<Vec<EvidenceRecord>> {
        self.evidence_query(&format!("{EVIDENCE_READ} ORDER BY e.seq"), None)
    }

    /// Approvals where the operation is the original or the compensation.
    fn approvals(&self, op_id: &str) -> Result<Vec<Approval>> {
        let mut all = approval_where(&self.conn, &self.path, "original_op_id", op_id)?;
        all.extend(approval_where(
            &self.conn,
            &self.path,
            "compensation_op_id",
            op_id,
        )?);
        Ok(all)
    }

    /// How many times the sender invoked the receiver for an operation.
    fn dispatch_count(&self, op_id: &str) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached("SELECT COUNT(*) FROM dispatch_log WHERE op_id = ?1")
            .and_then(|mut s| s.query_row([op_id], |r| r.get(0)))
            .at(&self.path)
    }

    /// SQLite's `data_version`: changes when another connection commits.
    fn data_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .at(&self.path)
    }
}

/// The route of a new operation, as SQL over `?action` and `?original`: a
/// compensation goes to the receiver of the operation it compensates; an
/// original to the receiver its action kind is routed to, or the built-in
/// ledger. Computed in the inserting transaction, so it cannot race a
/// registration.
pub(crate) fn route_sql(action: &str, original: &str) -> String {
    format!(
        "COALESCE((SELECT receiver FROM operations WHERE op_id = {original}),
                  (SELECT receiver FROM routes WHERE action_kind = {action}),
                  'builtin')"
    )
}

fn insert_op(
    tx: &Transaction<'_>,
    path: &Path,
    new: &NewOperation<'_>,
    kind: OpKind,
    compensates_effect_id: Option<&str>,
    compensates_op_id: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached(&format!(
        "INSERT INTO operations
             (op_id, kind, action_kind, payload, state, version,
              compensates_effect_id, compensates_op_id, receiver)
         VALUES (?1, ?2, ?3, ?4, 'prepared', 1, ?5, ?6, {})",
        route_sql("?3", "?6")
    ))
    .and_then(|mut s| {
        s.execute(params![
            new.op_id,
            kind.as_str(),
            new.action_kind,
            canonical_json(new.payload),
            compensates_effect_id,
            compensates_op_id
        ])
    })
    .at(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::audit::EntryKind;

    /// The conditional update out of `unknown` holds only at the version the
    /// caller saw: a writer whose view is stale (reachable when a store runs
    /// transactions side by side under READ COMMITTED) changes nothing, even
    /// while the operation is still `unknown`.
    #[test]
    fn a_transition_at_a_stale_version_changes_nothing_even_while_unknown() {
        use crate::domain::{Effect, NewOperation, Provenance};
        use crate::store::Outbox;
        let dir = tempfile::tempdir().unwrap();
        let options = crate::settings::OpenOptions::default().creating();
        let mut store = super::SqliteSender::open(&dir.path().join("s.sqlite"), options).unwrap();
        let payload = serde_json::json!({"n": 1});
        let new = NewOperation {
            op_id: "op",
            action_kind: "pay",
            payload: &payload,
        };
        let prepared = store.prepare(&new).unwrap();
        let dispatched = store.begin_dispatch("op").unwrap();
        assert_eq!(dispatched.version, prepared.version + 1);
        let receipt = Effect {
            effect_id: "fx-000001".into(),
            op_id: "op".into(),
            action_kind: "pay".into(),
            compensates_effect_id: None,
            payload: payload.clone(),
        };
        let provenance = Provenance {
            receiver: "builtin".into(),
            receiver_describe_sha256: "0".repeat(64),
            response_sha256: "0".repeat(64),
        };
        // The operation as it was before the dispatch: unknown now, but at
        // another version than the one this writer holds.
        let stale = crate::domain::Operation {
            state: crate::domain::OpState::Unknown,
            ..prepared
        };
        assert_eq!(
            store.record_receipt(&stale, &receipt, &provenance).unwrap(),
            None
        );
        assert_eq!(store.require("op").unwrap(), dispatched);
        assert!(store.evidence("op").unwrap().is_empty());
    }

    /// The schema's CHECK on `journal.kind` names exactly the entry kinds.
    #[test]
    fn the_journal_accepts_exactly_the_kinds_of_entry() {
        let check = super::SCHEMA
            .split("CREATE TABLE journal (")
            .nth(1)
            .and_then(|table| table.split("kind TEXT NOT NULL CHECK (kind IN (").nth(1))
            .and_then(|rest| rest.split("))").next())
            .unwrap();
        let listed: Vec<String> = check
            .split(',')
            .map(|k| k.trim().trim_matches('\'').to_string())
            .collect();
        let kinds: Vec<&str> = EntryKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(listed, kinds);
    }
}
