//! The sender's database: the journal, and the tables that are its
//! projection (the outbox of operations, evidence, compensation approvals,
//! the dispatch log, closes).
//!
//! Every act is one write transaction ([`SqlStore::write`]; on SQLite
//! `BEGIN IMMEDIATE`) that appends its journal entry and writes its rows;
//! a state change is a conditional update (`WHERE state = ? AND version =
//! ?`) in it, so a change, its record and its entry commit or roll back
//! together. The rules that decide whether a change is allowed are the
//! pure functions of [`crate::domain`]; this module only runs them inside
//! the right transaction against freshly read rows.
//!
//! The acts are transaction scripts over [`Db`], and [`Outbox`] is
//! implemented once for every [`SqlStore`]: SQLite's ([`SqliteSender`],
//! with its schema, here) and any other store that speaks SQL.
//!
//! No argument rests on SQLite's single writer alone, so that a store whose
//! writers run side by side keeps the same rules: an update that touches no
//! row is refused as the row, read again, now is; a violated unique key is
//! the refusal it means (`store::conflict`); and the time of an act is read
//! once the write lock is held ([`SqlStore::write`]).

use super::conflict::{self, Claim};
use super::rows::{
    approval_where, evidence_row, get_op, parse_evidence, query_ops, require_op, APPROVAL_COLUMNS,
    EVIDENCE_COLUMNS, EVIDENCE_READ, OP_SELECT,
};
use super::sql::{each_alone, Db, SqlStore, Sqlite, ToValue};
use super::upgrade::{Rebuild, Steps};
use super::{journal, open_database, triage, Outbox, ReceiptRecorded, Role, SqlContext};
use crate::audit::{self, EntryKind};
use crate::clock::Clock;
use crate::domain::team::Act;
use crate::domain::{
    backing_close, canonical_json, check_approval, check_compensation_dispatch,
    check_policy_review, check_review, Approval, CloseRecord, CompensationRequest, Decision,
    Description, Effect, EvidenceRecord, EvidenceSource, NewObservation, NewOperation, Observation,
    OpKind, OpState, Operation, Policy, Provenance, Recorded, RecordedClose, Registration, Review,
    RouteAdvice, Timestamp, Verdict, BUILTIN_NAME,
};
use crate::error::{DatabaseProblem, Error, Refusal, Result, StoreError};
use crate::faults::{crash_point, hold_point, CrashPoint, HoldPoint};
use crate::settings::OpenOptions;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The trigger that counts inserted operations per state. The bulk writer
/// (store/bulk.rs) drops it for a generated chunk and adds the chunk's
/// count itself, in the same transaction, then creates it again from this
/// same text.
macro_rules! state_counts_insert {
    () => {
        "CREATE TRIGGER state_counts_insert AFTER INSERT ON operations
BEGIN
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;
"
    };
}

/// [`state_counts_insert!`], for the bulk writer.
pub(crate) const STATE_COUNTS_INSERT: &str = state_counts_insert!();

pub(crate) const ROLE: Role = Role {
    application_id: 0x7263_6e73, // "rcns"
    schema: SCHEMA,
    from_four: FROM_FOUR,
    from_five: FROM_FIVE,
    from_six: FROM_SIX,
    finish: register_implicit_builtin,
};

/// Schema 5 to 6: a registration says whether it is recon's own ledger and
/// which variables its adapter gets.
const FROM_FIVE: Steps = Steps {
    rebuild: &[
        Rebuild {
            table: "operations",
            added: &["receiver_id", "contradiction", "surplus_effect_ids"],
            copy: "INSERT INTO operations SELECT *, NULL, NULL, NULL FROM upgrade_old
                WHERE ?1 IS NOT NULL",
        },
        Rebuild {
            table: "evidence",
            added: &["receiver_id", "receiver_version", "policy", "close_seq"],
            copy: "INSERT INTO evidence SELECT *, NULL, NULL, NULL, NULL FROM upgrade_old
                WHERE ?1 IS NOT NULL",
        },
        JOURNAL_KNOWS_UPDATES,
        RECEIVERS_GAIN_IDENTITY,
    ],
    record: OLDER_SCHEMA_RECORD,
};

/// Schema 6 to 7: an operation gains the surplus of a kept duplicate
/// (SPEC 14, none before), and a decision the close it rests on
/// (`close_seq`, SPEC 12, none before); the rest that changed are the rules
/// the acts are held to (SPEC 12), which every entry written before kept
/// but the one that closed snapshots are recorded closes: the last entry
/// written before is recorded (`older_schema_through_seq`), and `verify`
/// holds only later decisions to it.
const FROM_SIX: Steps = Steps {
    rebuild: &[
        Rebuild {
            table: "operations",
            added: &["surplus_effect_ids"],
            copy: "INSERT INTO operations SELECT *, NULL FROM upgrade_old WHERE ?1 IS NOT NULL",
        },
        Rebuild {
            table: "evidence",
            added: &["close_seq"],
            copy: "INSERT INTO evidence SELECT *, NULL FROM upgrade_old WHERE ?1 IS NOT NULL",
        },
    ],
    record: OLDER_SCHEMA_RECORD,
};

/// What every upgrade records: the last entry an older schema wrote,
/// exempt from the rule that a closed snapshot is a recorded close (its
/// decisions name no close).
const OLDER_SCHEMA_RECORD: &str = "INSERT OR IGNORE INTO meta (key, value)
    SELECT 'older_schema_through_seq', CAST(COALESCE(MAX(seq), 0) AS TEXT) FROM journal
    WHERE ?1 IS NOT NULL";

/// The journal's kinds gain `receiver_updated` (a CHECK of the table).
const JOURNAL_KNOWS_UPDATES: Rebuild = Rebuild {
    table: "journal",
    added: &[],
    copy: "INSERT INTO journal SELECT * FROM upgrade_old WHERE ?1 IS NOT NULL",
};

/// The rebuild of `receivers` that schemas 4 and 5 both need (`?1`, the
/// time, is not a column of it). A registration's id is the seq of the
/// entry that registered it (never reused, as no seq is), at version 1.
const RECEIVERS_GAIN_IDENTITY: Rebuild = Rebuild {
    table: "receivers",
    added: &["builtin", "env", "id", "version"],
    copy: "INSERT INTO receivers (name, program, args, timeout_ms, describe, describe_sha256, id)
        SELECT name, program, args, timeout_ms, describe, describe_sha256,
            (SELECT MAX(seq) FROM journal
             WHERE kind = 'receiver_registered' AND json_extract(entry, '$.name') = name)
        FROM upgrade_old WHERE ?1 IS NOT NULL",
};

/// Before schema 6 an operation whose action kind routed nowhere went to
/// the built-in ledger, unregistered. No receiver is implicit now, so the
/// upgrade registers the ledger as `builtin`, journaled like any
/// registration, for exactly the action kinds its operations were routed
/// to that way and that route nowhere else (never `*`); when every one of
/// them has been routed elsewhere since, it is registered for none, and
/// still reads the operations that went to it.
fn register_implicit_builtin(
    tx: &Transaction<'_>,
    path: &Path,
    at: Timestamp,
    from: i64,
) -> Result<(), StoreError> {
    if from >= 6 {
        return Ok(());
    }
    let used: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM operations WHERE receiver = ?1)",
            [BUILTIN_NAME],
            |r| r.get(0),
        )
        .at(path)?;
    if !used {
        return Ok(());
    }
    let actions: Vec<String> = tx
        .prepare(
            "SELECT DISTINCT action_kind FROM operations
             WHERE receiver = ?1 AND kind = 'original'
               AND action_kind NOT IN (SELECT action_kind FROM routes)
             ORDER BY action_kind",
        )
        .and_then(|mut s| s.query_map([BUILTIN_NAME], |r| r.get(0))?.collect())
        .at(path)?;
    let describe = Description::builtin(true);
    let registration = Registration {
        id: 0,
        version: 1,
        name: BUILTIN_NAME.to_string(),
        actions,
        builtin: true,
        program: String::new(),
        args: Vec::new(),
        env: Vec::new(),
        timeout_ms: BUILTIN_TIMEOUT_MS,
        describe_sha256: audit::sha256_hex(canonical_json(&describe.answer()).as_bytes()),
        describe,
    };
    // The upgrade registers it where no registration is (the file was
    // schema 4 or 5, where none is implicit): a refusal here means the
    // file is not what its version says.
    let db = &mut Sqlite { conn: tx, path };
    super::receivers::insert_registration(db, &registration, at).map_err(|e| match e {
        crate::error::Error::Store(e) => e,
        other => StoreError::Corrupt(format!("registering the built-in ledger: {other}")),
    })
}

/// The timeout recorded for the built-in ledger's registration; its child
/// runs under the timeout of the recon that starts it.
pub(crate) const BUILTIN_TIMEOUT_MS: u64 = 30_000;

/// Schema 4 to 6 (`store::upgrade`): the three tables that gained times
/// are rebuilt, each row timed at the upgrade (`?1`), and an operation's
/// dispatch count is its dispatch log's; the triage tables are new; and
/// `receivers` gains schema 6's columns, as from schema 5.
const FROM_FOUR: Steps = Steps {
    rebuild: &[
        Rebuild {
            table: "operations",
            added: &[
                "created_at",
                "updated_at",
                "dispatch_count",
                "last_dispatched_at",
                "latest_observation",
                "latest_verdict",
                "escalation",
                "receiver_id",
                "contradiction",
                "surplus_effect_ids",
            ],
            copy: "INSERT INTO operations (op_id, kind, action_kind, payload,
                compensates_effect_id, compensates_op_id, state, version, confirmed_effect_id,
                receiver, created_at, updated_at, dispatch_count, last_dispatched_at)
            SELECT o.op_id, o.kind, o.action_kind, o.payload, o.compensates_effect_id,
                o.compensates_op_id, o.state, o.version, o.confirmed_effect_id, o.receiver,
                ?1, ?1, COALESCE(d.n, 0), CASE WHEN d.n IS NOT NULL THEN ?1 END
            FROM upgrade_old o
            LEFT JOIN (SELECT op_id, COUNT(*) AS n FROM dispatch_log GROUP BY op_id) d
                ON d.op_id = o.op_id",
        },
        Rebuild {
            table: "evidence",
            added: &[
                "recorded_at",
                "receiver_id",
                "receiver_version",
                "policy",
                "close_seq",
            ],
            copy: "INSERT INTO evidence (seq, op_id, source, reviewer, decision, verdict,
                snapshot, from_version, to_version, effect_id, receiver,
                receiver_describe_sha256, response_sha256, journal_seq, recorded_at)
            SELECT seq, op_id, source, reviewer, decision, verdict, snapshot, from_version,
                to_version, effect_id, receiver, receiver_describe_sha256, response_sha256,
                journal_seq, ?1
            FROM upgrade_old",
        },
        Rebuild {
            table: "closes",
            added: &["closed_at"],
            copy: "INSERT INTO closes (op_id, receiver, authorized_by, journal_seq, closed_at)
            SELECT op_id, receiver, authorized_by, journal_seq, ?1 FROM upgrade_old",
        },
        JOURNAL_KNOWS_UPDATES,
        RECEIVERS_GAIN_IDENTITY,
    ],
    record: "INSERT INTO meta (key, value)
        VALUES ('upgraded_at', ?1),
            ('upgraded_through_seq', CAST((SELECT COALESCE(MAX(seq), 0) FROM journal) AS TEXT)),
            ('older_schema_through_seq',
                CAST((SELECT COALESCE(MAX(seq), 0) FROM journal) AS TEXT))",
};

const SCHEMA: &str = concat!(
    "
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
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    dispatch_count INTEGER NOT NULL DEFAULT 0 CHECK (dispatch_count >= 0),
    last_dispatched_at TEXT,
    latest_observation INTEGER REFERENCES observations(seq),
    latest_verdict TEXT CHECK (latest_verdict IN ('duplicate_matches', 'payload_mismatch',
        'action_scope_mismatch', 'unique_exact_match', 'exact_match_existence_only',
        'terminal_absence', 'inconclusive')),
    escalation INTEGER REFERENCES escalations(seq),
    receiver_id INTEGER,
    contradiction INTEGER REFERENCES observations(seq),
    surplus_effect_ids TEXT,
    CHECK ((kind = 'original') = (compensates_effect_id IS NULL)),
    CHECK ((kind = 'original') = (compensates_op_id IS NULL)),
    CHECK ((latest_observation IS NULL) = (latest_verdict IS NULL))
) WITHOUT ROWID;
CREATE INDEX operations_by_state ON operations(state, op_id);
-- The queue's pages (store/console_queries.rs): each filter and order is
-- one range of one of these, so a page costs what it holds.
CREATE INDEX operations_by_state_age ON operations(state, updated_at, op_id);
CREATE INDEX operations_by_verdict ON operations(latest_verdict, op_id);
CREATE INDEX operations_by_verdict_age ON operations(latest_verdict, updated_at, op_id);
CREATE INDEX operations_by_age ON operations(updated_at, op_id);
CREATE INDEX operations_escalated ON operations(op_id) WHERE escalation IS NOT NULL;
CREATE INDEX operations_escalated_by_age ON operations(updated_at, op_id)
    WHERE escalation IS NOT NULL;

CREATE TABLE state_counts (
    state TEXT PRIMARY KEY,
    n INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO state_counts (state, n)
VALUES ('prepared', 0), ('unknown', 0), ('confirmed', 0), ('not_applied', 0);
",
    state_counts_insert!(),
    "CREATE TRIGGER state_counts_update AFTER UPDATE OF state ON operations
WHEN OLD.state <> NEW.state
BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;

CREATE TABLE journal (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('prepared', 'dispatched', 'receipt', 'observed', 'closed',
        'decided', 'approved', 'noted', 'escalated', 'deescalated', 'receiver_registered',
        'receiver_updated', 'receiver_removed', 'acknowledged', 'call_failed',
        'close_requested')),
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
    source TEXT NOT NULL CHECK (source IN ('receipt', 'review', 'policy')),
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
    journal_seq INTEGER NOT NULL UNIQUE REFERENCES journal(seq),
    recorded_at TEXT NOT NULL,
    receiver_id INTEGER,
    receiver_version INTEGER,
    policy TEXT CHECK (policy IN ('provable')),
    close_seq INTEGER,
    CHECK ((source = 'policy') = (policy IS NOT NULL))
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
    journal_seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    closed_at TEXT NOT NULL
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

-- Triage: observations, notes and escalations, each row the projection of
-- its journal entry, whose seq is the row's. An observation's snapshot is
-- in its entry only (rows::observations reads it from there).
CREATE TABLE observations (
    seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    receiver TEXT NOT NULL,
    observed_by TEXT NOT NULL,
    observed_at TEXT NOT NULL,
    verdict TEXT NOT NULL,
    complete INTEGER NOT NULL CHECK (complete IN (0, 1)),
    authoritative INTEGER NOT NULL CHECK (authoritative IN (0, 1)),
    closed INTEGER NOT NULL CHECK (closed IN (0, 1)),
    matches INTEGER NOT NULL CHECK (matches >= 0),
    receiver_describe_sha256 TEXT NOT NULL,
    response_sha256 TEXT NOT NULL
);
CREATE INDEX observations_by_op ON observations(op_id, seq);
CREATE TABLE notes (
    seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    noted_by TEXT NOT NULL,
    noted_at TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX notes_by_op ON notes(op_id, seq);
CREATE TABLE escalations (
    seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    action TEXT NOT NULL CHECK (action IN ('escalate', 'deescalate')),
    acted_by TEXT NOT NULL,
    acted_at TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX escalations_by_op ON escalations(op_id, seq);
CREATE INDEX operations_contradicted ON operations(op_id) WHERE contradiction IS NOT NULL;
-- Kept duplicates (SPEC 14): `ops --surplus` and the surplus metric.
CREATE INDEX operations_with_surplus ON operations(op_id) WHERE surplus_effect_ids IS NOT NULL;
CREATE TABLE acknowledgements (
    seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    acknowledged_by TEXT NOT NULL,
    acknowledged_at TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX acknowledgements_by_op ON acknowledgements(op_id, seq);
CREATE TABLE call_failures (
    seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    verb TEXT NOT NULL CHECK (verb IN ('apply', 'query', 'close')),
    receiver TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    exit_code INTEGER,
    stderr TEXT NOT NULL,
    failed_at TEXT NOT NULL
);
CREATE INDEX call_failures_by_op ON call_failures(op_id, seq);
CREATE TABLE close_requests (
    seq INTEGER PRIMARY KEY REFERENCES journal(seq),
    op_id TEXT NOT NULL REFERENCES operations(op_id),
    receiver TEXT NOT NULL,
    authorized_by TEXT NOT NULL,
    requested_at TEXT NOT NULL
);
CREATE INDEX close_requests_by_op ON close_requests(op_id, seq);
CREATE TRIGGER close_requests_append_only_update BEFORE UPDATE ON close_requests
BEGIN
    SELECT RAISE(ABORT, 'close requests are append-only');
END;
CREATE TRIGGER close_requests_append_only_delete BEFORE DELETE ON close_requests
BEGIN
    SELECT RAISE(ABORT, 'close requests are append-only');
END;
CREATE TRIGGER call_failures_append_only_update BEFORE UPDATE ON call_failures
BEGIN
    SELECT RAISE(ABORT, 'call failures are append-only');
END;
CREATE TRIGGER call_failures_append_only_delete BEFORE DELETE ON call_failures
BEGIN
    SELECT RAISE(ABORT, 'call failures are append-only');
END;
CREATE TRIGGER acknowledgements_append_only_update BEFORE UPDATE ON acknowledgements
BEGIN
    SELECT RAISE(ABORT, 'acknowledgements are append-only');
END;
CREATE TRIGGER acknowledgements_append_only_delete BEFORE DELETE ON acknowledgements
BEGIN
    SELECT RAISE(ABORT, 'acknowledgements are append-only');
END;
CREATE TRIGGER observations_append_only_update BEFORE UPDATE ON observations
BEGIN
    SELECT RAISE(ABORT, 'observations are append-only');
END;
CREATE TRIGGER observations_append_only_delete BEFORE DELETE ON observations
BEGIN
    SELECT RAISE(ABORT, 'observations are append-only');
END;
CREATE TRIGGER notes_append_only_update BEFORE UPDATE ON notes
BEGIN
    SELECT RAISE(ABORT, 'notes are append-only');
END;
CREATE TRIGGER notes_append_only_delete BEFORE DELETE ON notes
BEGIN
    SELECT RAISE(ABORT, 'notes are append-only');
END;
CREATE TRIGGER escalations_append_only_update BEFORE UPDATE ON escalations
BEGIN
    SELECT RAISE(ABORT, 'escalations are append-only');
END;
CREATE TRIGGER escalations_append_only_delete BEFORE DELETE ON escalations
BEGIN
    SELECT RAISE(ABORT, 'escalations are append-only');
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
    describe_sha256 TEXT NOT NULL,
    builtin INTEGER NOT NULL DEFAULT 0 CHECK (builtin IN (0, 1)),
    env TEXT NOT NULL DEFAULT '[]',
    id INTEGER NOT NULL UNIQUE,
    version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1)
) WITHOUT ROWID;
CREATE TABLE routes (
    action_kind TEXT PRIMARY KEY,
    receiver TEXT NOT NULL REFERENCES receivers(name)
) WITHOUT ROWID;
CREATE INDEX routes_by_receiver ON routes(receiver);
CREATE INDEX operations_by_receiver ON operations(receiver, state);
-- `ops --receiver` (with or without a state) in either order: one range each.
CREATE INDEX operations_by_receiver_state ON operations(receiver, state, op_id);
CREATE INDEX operations_by_receiver_state_age ON operations(receiver, state, updated_at, op_id);
CREATE INDEX operations_by_receiver_op ON operations(receiver, op_id);
CREATE INDEX operations_by_receiver_age ON operations(receiver, updated_at, op_id);
"
);

pub struct SqliteSender {
    conn: Connection,
    path: PathBuf,
}

/// Who made the latest recorded change to an operation: the reviewer, or
/// "a receipt".
fn last_changed_by(db: &mut dyn Db, op_id: &str) -> Option<String> {
    db.query_opt(
        "SELECT source, reviewer FROM evidence WHERE op_id = ?1 ORDER BY seq DESC LIMIT 1",
        &[&op_id],
        |r| {
            let source: String = r.get(0)?;
            let reviewer: Option<String> = r.get(1)?;
            Ok(match reviewer {
                Some(name) => format!("reviewer {name}"),
                None => format!("a {source}"),
            })
        },
    )
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
    /// The matches not kept of a kept duplicate (SPEC 14).
    surplus: Vec<String>,
    provenance: &'a Provenance,
    policy: Option<Policy>,
    /// The recorded close its snapshot rests on (SPEC 12).
    close_seq: Option<i64>,
    at: Timestamp,
}

/// Applies a transition out of `unknown` at its time (which moves
/// `updated_at` and clears the escalation marker) and appends its journal
/// entry and its evidence row (the entry's projection), in the caller's
/// transaction. Returns the evidence seq, or `None` when the conditional
/// update found the operation changed.
fn transition(db: &mut dyn Db, t: Transition<'_>) -> Result<Option<i64>> {
    let changed = db.execute(
        "UPDATE operations
             SET state = ?1, version = version + 1,
                 confirmed_effect_id = COALESCE(?2, confirmed_effect_id),
                 updated_at = ?5, escalation = NULL,
                 surplus_effect_ids = COALESCE(?6, surplus_effect_ids)
             WHERE op_id = ?3 AND state = 'unknown' AND version = ?4",
        &[
            &t.to.as_str(),
            &t.effect_id,
            &t.op.op_id,
            &t.op.version,
            &t.at.to_string(),
            &(!t.surplus.is_empty()).then(|| canonical_json(&serde_json::json!(t.surplus))),
        ],
    )?;
    if changed != 1 {
        return Ok(None);
    }
    if t.source != EvidenceSource::Receipt {
        crash_point(CrashPoint::ReconcileAfterStateUpdate);
    }
    let evidence_seq: i64 =
        db.query_one("SELECT COALESCE(MAX(seq), 0) + 1 FROM evidence", &[], |r| {
            r.get(0)
        })?;
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
        surplus_effect_ids: t.surplus,
        receiver: t.provenance.receiver.clone(),
        receiver_describe_sha256: t.provenance.receiver_describe_sha256.clone(),
        response_sha256: t.provenance.response_sha256.clone(),
        receiver_id: t.provenance.receiver_id,
        receiver_version: t.provenance.receiver_version,
        policy: t.policy,
        close_seq: t.close_seq,
        recorded_at: t.at,
        journal_seq: 0,
        hash: String::new(),
    };
    let sealed = journal::append(
        db,
        EntryKind::of_evidence(t.source),
        Some(&record.op_id),
        audit::evidence(&record),
    )?;
    record.journal_seq = sealed.seq;
    record.hash = sealed.hash;
    insert_evidence(db, &record)?;
    Ok(Some(record.seq))
}

/// Applies a reviewer's transition, built from the row as the caller read
/// and checked it; returns the evidence seq. When another writer changed
/// the row after that read (a store whose writers run side by side), the
/// row is read again and the decision refused `stale_version` as it now
/// is: the version found and who changed it.
fn decide(db: &mut dyn Db, t: Transition<'_>) -> Result<i64> {
    let (op_id, expected) = (t.op.op_id.clone(), t.op.version);
    match transition(db, t)? {
        Some(seq) => Ok(seq),
        None => {
            let fresh = require_op(db, &op_id)?;
            Err(stale(db, expected, &fresh).into())
        }
    }
}

/// The state change a review records; a decision taken by `policy` is
/// evidence of the source `policy`, naming it.
fn review_transition<'a>(
    review: &'a Review<'a>,
    op: &'a Operation,
    (verdict, policy, close_seq): (Verdict, Option<Policy>, Option<i64>),
    snapshot: &'a Value,
    provenance: &'a Provenance,
    at: Timestamp,
) -> Transition<'a> {
    let to = match review.decision {
        Decision::Confirmed => OpState::Confirmed,
        Decision::NotApplied => OpState::NotApplied,
    };
    Transition {
        op,
        to,
        source: match policy {
            Some(_) => EvidenceSource::Policy,
            None => EvidenceSource::Review,
        },
        reviewer: crate::domain::normalize_name(review.reviewer),
        decision: review.decision,
        verdict: Some(verdict),
        evidence: snapshot,
        effect_id: review.confirmed_effect(),
        surplus: review.surplus_effects(),
        provenance,
        policy,
        close_seq,
        at,
    }
}

/// How a decision is recorded: by a person (with the read it rests on
/// recorded as their observation when `observe`), or by a policy.
#[derive(Clone, Copy)]
enum Decider {
    Person { observe: bool },
    Policy(Policy),
}

/// The decision script, written once: the rules of [`check_review`] (and
/// of the policy, for a policy's decision) against the row as it is inside
/// the caller's transaction, then (for a person, with `observe`) the
/// snapshot as their observation, with the verdict the rules found, the
/// conditional update and the evidence append with the full snapshot. A
/// refusal writes nothing.
fn review_in(
    db: &mut dyn Db,
    review: &Review<'_>,
    provenance: &Provenance,
    at: Timestamp,
    decider: Decider,
) -> Result<Recorded> {
    let Some(reviewer) = crate::domain::normalize_name(review.reviewer) else {
        return Err(Refusal::EmptyReviewer.into());
    };
    let op = require_op(db, review.op_id)?;
    let verdict = check_review(&op, review, || last_changed_by(db, &op.op_id))?;
    hold_point(HoldPoint::AfterCheck);
    let policy = match decider {
        Decider::Policy(policy) => {
            check_policy_review(policy, review, verdict)?;
            Some(policy)
        }
        Decider::Person { observe: true } => {
            let observation = NewObservation {
                op_id: review.op_id,
                by: reviewer,
                at,
                snapshot: review.snapshot,
                verdict,
                provenance,
            };
            triage::insert_observation(db, &observation)?;
            None
        }
        Decider::Person { observe: false } => None,
    };
    let snapshot = serde_json::to_value(review.snapshot)
        .map_err(|e| StoreError::Corrupt(format!("snapshot: {e}")))?;
    let close_seq = backing_close(&op.op_id, &snapshot, &recorded_closes(db, &op.op_id)?)?;
    let judged = (verdict, policy, close_seq);
    let transition_of = review_transition(review, &op, judged, &snapshot, provenance, at);
    let seq = decide(db, transition_of)?;
    let operation = require_op(db, &op.op_id)?;
    crash_point(CrashPoint::ReconcileBeforeCommit);
    Ok(Recorded {
        operation,
        verdict,
        evidence_seq: seq,
    })
}

/// The operation's recorded closes, in seq order, each with the canonical
/// SHA-256 of the snapshot its `closed` entry recorded (none for one an
/// older schema wrote): what a decision on a closed snapshot must name
/// (SPEC 12, [`backing_close`]).
fn recorded_closes(db: &mut dyn Db, op_id: &str) -> Result<Vec<RecordedClose>> {
    let entries = db.query(
        "SELECT seq, entry FROM journal WHERE op_id = ?1 AND kind = 'closed' ORDER BY seq",
        &[&op_id],
        |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?)),
    )?;
    Ok(entries
        .into_iter()
        .map(|(seq, entry)| RecordedClose {
            seq,
            snapshot_sha256: serde_json::from_str::<Value>(&entry).ok().and_then(|v| {
                v.get("snapshot_sha256")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
        })
        .collect())
}

fn insert_evidence(db: &mut dyn Db, record: &EvidenceRecord) -> Result<()> {
    db.execute(
        &format!(
            "INSERT INTO evidence ({EVIDENCE_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
                 ?18, ?19)"
        ),
        &[
            &record.seq,
            &record.op_id,
            &record.source.as_str(),
            &record.reviewer,
            &record.decision.as_str(),
            &record.verdict.map(Verdict::as_str),
            &canonical_json(&record.snapshot),
            &record.from_version,
            &record.to_version,
            &record.effect_id,
            &record.receiver,
            &record.receiver_describe_sha256,
            &record.response_sha256,
            &record.journal_seq,
            &record.recorded_at.to_string(),
            &record.receiver_id,
            &record.receiver_version,
            &record.policy.map(Policy::as_str),
            &record.close_seq,
        ],
    )?;
    Ok(())
}

impl SqliteSender {
    /// Opens the file, upgrading a schema-4 one at `now` first.
    pub fn open(path: &Path, options: OpenOptions, now: Timestamp) -> Result<Self, StoreError> {
        let conn = open_database(path, ROLE, options, now)?;
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

    /// The connection as a [`Db`], outside any transaction.
    pub(crate) fn db(&self) -> Sqlite<'_> {
        Sqlite {
            conn: &self.conn,
            path: &self.path,
        }
    }
}

impl SqlStore for SqliteSender {
    /// Takes the write lock (`BEGIN IMMEDIATE`), then reads the time of
    /// the act from `clock`, runs it and commits it (dropped on an error,
    /// the transaction rolls back).
    fn write<T>(
        &mut self,
        clock: &dyn Clock,
        _what: Act,
        act: impl FnOnce(&mut dyn Db, Timestamp) -> Result<T>,
    ) -> Result<T> {
        hold_point(HoldPoint::BeforeWriteLock);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(&self.path)?;
        crate::actlog::begin();
        let at = clock.now();
        let done = act(
            &mut Sqlite {
                conn: &tx,
                path: &self.path,
            },
            at,
        )?;
        tx.commit().at(&self.path)?;
        crate::actlog::ended("committed");
        Ok(done)
    }

    /// Reads on the connection, each statement in its own snapshot, as
    /// before scripts had a store to run on.
    fn read<T, E: From<StoreError>>(
        &self,
        act: impl FnOnce(&mut dyn Db) -> Result<T, E>,
    ) -> Result<T, E> {
        act(&mut self.db())
    }
}

/// The evidence rows `sql` (over [`EVIDENCE_READ`]) selects.
fn evidence_query(
    db: &mut dyn Db,
    sql: &str,
    params: &[&dyn ToValue],
) -> Result<Vec<EvidenceRecord>> {
    let rows = db.query(sql, params, evidence_row)?;
    Ok(rows
        .into_iter()
        .map(parse_evidence)
        .collect::<Result<Vec<_>, _>>()?)
}

/// A new original operation, `prepared` at version 1, and its journal
/// entry; refused when its id is taken or its action kind routes nowhere.
fn prepare_one(db: &mut dyn Db, new: &NewOperation<'_>, at: Timestamp) -> Result<Operation> {
    if get_op(db, new.op_id)?.is_some() {
        return Err(Refusal::DuplicateOperation(new.op_id.to_string()).into());
    }
    require_route(db, new.action_kind)?;
    insert_op(db, new, OpKind::Original, None, None, at)?;
    let op = require_op(db, new.op_id)?;
    let mut fields = with_registration(db, &op.op_id, audit::prepared(&op))?;
    if let Some(origin) = new.origin {
        fields.insert(journal::ORIGIN.into(), serde_json::json!(origin));
    }
    journal::append(db, EntryKind::Prepared, Some(&op.op_id), fields)?;
    Ok(op)
}

/// The outbox's flow, written once for every store whose outbox is SQL.
impl<S: SqlStore> Outbox for S {
    /// Puts a new original operation in the outbox, `prepared` at version 1.
    fn prepare(&mut self, new: &NewOperation<'_>, clock: &dyn Clock) -> Result<Operation> {
        self.write(clock, Act::Prepare, |db, at| prepare_one(db, new, at))
    }

    fn prepare_each(
        &mut self,
        news: &[NewOperation<'_>],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Operation>>> {
        self.write(clock, Act::Prepare, |db, at| {
            news.iter()
                .map(|new| each_alone(db, |db| prepare_one(db, new, at)))
                .collect()
        })
    }

    fn get(&self, op_id: &str) -> Result<Option<Operation>> {
        self.read(|db| get_op(db, op_id))
    }

    /// The operation, or the `unknown_operation` refusal.
    fn require(&self, op_id: &str) -> Result<Operation> {
        self.read(|db| require_op(db, op_id))
    }

    fn require_each(&self, op_ids: &[&str]) -> Result<Vec<Result<Operation>>> {
        self.read(|db| {
            let mut found = Vec::with_capacity(op_ids.len());
            for op_id in op_ids {
                found.push(match require_op(db, op_id) {
                    Err(Error::Refused(refusal)) => Err(refusal.into()),
                    other => Ok(other?),
                });
            }
            Ok(found)
        })
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
        self.read(|db| match state {
            Some(state) => query_ops(
                db,
                &format!(
                    "{OP_SELECT} WHERE o.state = ?1 AND o.op_id > ?2 ORDER BY o.op_id LIMIT ?3"
                ),
                &[&state.as_str(), &after, &limit],
            ),
            None => query_ops(
                db,
                &format!("{OP_SELECT} WHERE o.op_id > ?1 ORDER BY o.op_id LIMIT ?2"),
                &[&after, &limit],
            ),
        })
    }

    /// Operations per state, from the trigger-maintained counts table, so it
    /// costs the same at 100 ops as at 100,000.
    fn count_by_state(&self) -> Result<BTreeMap<OpState, i64>> {
        let rows = self.read(|db| {
            db.query("SELECT state, n FROM state_counts", &[], |r| {
                Ok((r.get::<String>(0)?, r.get::<i64>(1)?))
            })
        })?;
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
    fn begin_dispatch(&mut self, op_id: &str, clock: &dyn Clock) -> Result<Operation> {
        self.write(clock, Act::Dispatch, |db, at| {
            let op = require_op(db, op_id)?;
            check_dispatch(db, &op)?;
            hold_point(HoldPoint::AfterCheck);
            mark_dispatched(db, &op, at)?;
            db.execute(
                "INSERT INTO dispatch_log (seq, op_id, from_version)
             VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_log), ?1, ?2)",
                &[&op_id, &op.version],
            )?;
            let fields = audit::dispatched(op.version, op.version + 1, at);
            journal::append(db, EntryKind::Dispatched, Some(op_id), fields)?;
            require_op(db, op_id)
        })
    }

    /// Records a receipt the receiver printed for a dispatch: `unknown` at
    /// the dispatched version becomes `confirmed`, with the receipt as its
    /// evidence. Returns `None` when the operation changed meanwhile (a
    /// reviewer decided first); the receipt is then not recorded (the
    /// transaction commits having written nothing).
    fn record_receipt(
        &mut self,
        op: &Operation,
        receipt: &Effect,
        provenance: &Provenance,
        clock: &dyn Clock,
    ) -> Result<Option<ReceiptRecorded>> {
        self.write(clock, Act::Receipt, |db, at| {
            check_receipt(db, &op.op_id)?;
            let evidence = serde_json::json!({ "receipt": receipt });
            let seq = transition(
                db,
                Transition {
                    op,
                    to: OpState::Confirmed,
                    source: EvidenceSource::Receipt,
                    reviewer: None,
                    decision: Decision::Confirmed,
                    verdict: None,
                    evidence: &evidence,
                    effect_id: Some(&receipt.effect_id),
                    surplus: Vec::new(),
                    provenance,
                    policy: None,
                    close_seq: None,
                    at,
                },
            )?;
            let Some(seq) = seq else {
                return late_receipt(db, &op.op_id, receipt, provenance, at);
            };
            let op = require_op(db, &op.op_id)?;
            crash_point(CrashPoint::ReceiptBeforeCommit);
            Ok(Some(ReceiptRecorded {
                operation: op,
                seq,
                late: false,
                contradicts: false,
            }))
        })
    }

    /// Runs the rules of [`check_review`] against the stored row without
    /// writing anything: what [`Outbox::record_review`] would refuse.
    /// A caller about to take a closing snapshot (a receiver mutation) asks
    /// first, so a decision that is going to be refused closes nothing.
    fn precheck_review(&self, review: &Review<'_>) -> Result<Verdict> {
        self.read(|db| {
            let op = require_op(db, review.op_id)?;
            Ok(check_review(&op, review, || {
                last_changed_by(db, &op.op_id)
            })?)
        })
    }

    /// Records a reviewer's decision: the rules of [`check_review`] against
    /// the row as it is inside this transaction, then (with `observe`) the
    /// snapshot it rests on as the reviewer's observation, with the verdict
    /// the rules found, the conditional update and the evidence append with
    /// the full snapshot. If the append fails, the state change rolls back
    /// with it.
    fn record_review(
        &mut self,
        review: &Review<'_>,
        provenance: &Provenance,
        clock: &dyn Clock,
        observe: bool,
    ) -> Result<Recorded> {
        if crate::domain::normalize_name(review.reviewer).is_none() {
            return Err(Refusal::EmptyReviewer.into());
        }
        self.write(clock, Act::Decide, |db, at| {
            review_in(db, review, provenance, at, Decider::Person { observe })
        })
    }

    /// Records the decisions `policy` took, each on its own snapshot, in
    /// one transaction: each is checked as a review is (its own version,
    /// its state, its verdict under the policy) and refused alone, while
    /// the others are recorded. A storage failure fails them all.
    fn record_policy_reviews(
        &mut self,
        policy: Policy,
        reviews: &[(Review<'_>, Provenance)],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Recorded>>> {
        self.write(clock, Act::Resolve, |db, at| {
            let mut recorded = Vec::with_capacity(reviews.len());
            for (review, provenance) in reviews {
                match review_in(db, review, provenance, at, Decider::Policy(policy)) {
                    Err(crate::error::Error::Refused(refusal)) => {
                        recorded.push(Err(refusal.into()))
                    }
                    Err(other) => return Err(other),
                    Ok(done) => recorded.push(Ok(done)),
                }
            }
            Ok(recorded)
        })
    }

    /// Approves a compensation for one confirmed effect and prepares the
    /// compensation operation, in one transaction.
    fn approve_compensation(
        &mut self,
        request: &CompensationRequest<'_>,
        clock: &dyn Clock,
    ) -> Result<Approval> {
        let Some(approver) = crate::domain::normalize_name(request.approver) else {
            return Err(Refusal::EmptyReviewer.into());
        };
        self.write(clock, Act::Approve, |db, at| {
            approve(db, request, approver, at)
        })
    }

    /// Records closes the receivers have committed: for each, a `closed`
    /// entry and its `closes` row, then the observation of the closing
    /// read, each under its own savepoint, in one transaction of the
    /// outbox (the receivers' were others, already committed).
    fn record_closes(
        &mut self,
        closes: &[(CloseRecord, NewObservation<'_>)],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Observation>>> {
        self.write(clock, Act::Close, |db, at| {
            let mut recorded = Vec::with_capacity(closes.len());
            for (close, observation) in closes {
                let close = &CloseRecord {
                    closed_at: at,
                    ..close.clone()
                };
                let observation = &NewObservation { at, ..*observation };
                recorded.push(each_alone(db, |db| record_close(db, close, observation))?);
            }
            Ok(recorded)
        })
    }

    /// The evidence of one operation, oldest first.
    fn evidence(&self, op_id: &str) -> Result<Vec<EvidenceRecord>> {
        let sql = format!("{EVIDENCE_READ} WHERE e.op_id = ?1 ORDER BY e.seq");
        self.read(|db| evidence_query(db, &sql, &[&op_id]))
    }

    /// Every evidence row in `seq` order.
    fn evidence_log(&self) -> Result<Vec<EvidenceRecord>> {
        let sql = format!("{EVIDENCE_READ} ORDER BY e.seq");
        self.read(|db| evidence_query(db, &sql, &[]))
    }

    /// Approvals where the operation is the original or the compensation.
    fn approvals(&self, op_id: &str) -> Result<Vec<Approval>> {
        self.read(|db| {
            let mut all = approval_where(db, "original_op_id", op_id)?;
            all.extend(approval_where(db, "compensation_op_id", op_id)?);
            Ok(all)
        })
    }

    /// How many times the sender invoked the receiver for an operation.
    fn dispatch_count(&self, op_id: &str) -> Result<i64, StoreError> {
        self.read(|db| {
            db.query_one(
                "SELECT COUNT(*) FROM dispatch_log WHERE op_id = ?1",
                &[&op_id],
                |r| r.get(0),
            )
        })
    }
}

/// The database's four-eyes refusal of an approval (team mode) as the
/// refusal `same_person`, naming the original and the role.
fn four_eyes(error: Error, original_op_id: &str) -> Error {
    match error {
        Error::Store(StoreError::Database {
            problem: DatabaseProblem::SamePerson { role, .. },
            ..
        }) => Refusal::SamePerson {
            op_id: original_op_id.to_string(),
            role,
        }
        .into(),
        other => other,
    }
}

/// The approval of a compensation and its operation, in the caller's
/// transaction: the rules of [`check_approval`] against the rows as read,
/// then the approval's row, the compensation's, and the `approved` entry.
fn approve(
    db: &mut dyn Db,
    request: &CompensationRequest<'_>,
    approver: &str,
    at: Timestamp,
) -> Result<Approval> {
    let original = require_op(db, request.original_op_id)?;
    let existing: Vec<Approval> = approval_where(db, "original_op_id", request.original_op_id)?
        .into_iter()
        .filter(|a| a.effect_id == request.effect_id)
        .collect();
    check_approval(&original, request, existing.first())
        .map_err(|refused| naming_who(db, refused, Some(&original)))?;
    if get_op(db, request.compensation_op_id)?.is_some() {
        return Err(Refusal::DuplicateOperation(request.compensation_op_id.to_string()).into());
    }
    insert_approval(db, request, approver).map_err(|e| four_eyes(e, request.original_op_id))?;
    crash_point(CrashPoint::ApprovalAfterApprovalInsert);
    insert_op(
        db,
        &NewOperation {
            op_id: request.compensation_op_id,
            action_kind: request.action_kind,
            payload: request.payload,
            origin: None,
        },
        OpKind::Compensation,
        Some(request.effect_id),
        Some(request.original_op_id),
        at,
    )?;
    let approval = Approval {
        reason: request.reason.map(str::to_string),
        original_op_id: request.original_op_id.to_string(),
        effect_id: request.effect_id.to_string(),
        approved_version: request.expected_version,
        approver: approver.to_string(),
        compensation_op_id: request.compensation_op_id.to_string(),
        action_kind: request.action_kind.to_string(),
        payload: request.payload.clone(),
    };
    let compensation = require_op(db, request.compensation_op_id)?;
    let fields = with_registration(
        db,
        &compensation.op_id,
        audit::approved(&approval, &compensation),
    )?;
    let op_id = Some(request.compensation_op_id);
    journal::append(db, EntryKind::Approved, op_id, fields)?;
    crash_point(CrashPoint::ApprovalBeforeCommit);
    Ok(approval)
}

/// The rules of a dispatch against `op` as read: anything not `prepared`
/// is a blind retry; a compensation needs its approval to still hold
/// ([`check_compensation_dispatch`]).
fn check_dispatch(db: &mut dyn Db, op: &Operation) -> Result<()> {
    if op.state != OpState::Prepared {
        return Err(Refusal::BlindRetry {
            op_id: op.op_id.clone(),
            state: op.state,
        }
        .into());
    }
    if op.kind == OpKind::Compensation {
        let approval = approval_where(db, "compensation_op_id", &op.op_id)?;
        let original = match approval.first() {
            Some(a) => get_op(db, &a.original_op_id)?,
            None => None,
        };
        check_compensation_dispatch(op, approval.first(), original.as_ref())
            .map_err(|refused| naming_who(db, refused, original.as_ref()))?;
    }
    Ok(())
}

/// SPEC 12: a receipt answers the operation's one dispatch, as its first
/// outcome (no receipt and no failed `apply` of it before), in the name of
/// the role that dispatched it. The journal of one operation is short, so
/// its entries of those kinds are read whole; the database of team mode
/// holds the same rule for a login that writes without recon.
fn check_receipt(db: &mut dyn Db, op_id: &str) -> Result<()> {
    let entries = db.query(
        "SELECT kind, entry FROM journal WHERE op_id = ?1
             AND kind IN ('dispatched', 'receipt', 'call_failed') ORDER BY seq",
        &[&op_id],
        |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)),
    )?;
    let field = |entry: &str, name: &str| {
        serde_json::from_str::<Value>(entry)
            .ok()
            .and_then(|v| v.get(name).and_then(Value::as_str).map(str::to_string))
    };
    let mut dispatcher: Option<Option<String>> = None;
    for (kind, entry) in &entries {
        let answered = kind == "receipt"
            || (kind == "call_failed" && field(entry, "verb").as_deref() == Some("apply"));
        if kind == "dispatched" && dispatcher.is_none() {
            dispatcher = Some(field(entry, journal::ROLE));
        } else if answered && dispatcher.is_some() {
            return Err(rule(format!(
                "operation {op_id}: a receipt is the first outcome of its dispatch, and it has \
                 had one"
            )));
        }
    }
    match dispatcher {
        None => Err(rule(format!(
            "operation {op_id}: a receipt answers a dispatch, and it has none"
        ))),
        Some(role) if role.as_deref() != db.role() => Err(rule(format!(
            "operation {op_id}: its receipt is written by the login that dispatched it ({}), \
             not {}",
            role.unwrap_or_default(),
            db.role().unwrap_or_default()
        ))),
        Some(_) => Ok(()),
    }
}

/// A receipt that reached its operation after a decision (SPEC 12): never
/// dropped, journaled as a `receipt` entry with `late: true` that changes
/// no state; recorded as a read of one match (its observation row), which
/// raises the contradiction marker when it contradicts the decision
/// (section 9's rule; the entry says `contradicts: true`). `None` when the
/// operation is not decided (still `unknown`, at another version).
fn late_receipt(
    db: &mut dyn Db,
    op_id: &str,
    receipt: &Effect,
    provenance: &Provenance,
    at: Timestamp,
) -> Result<Option<ReceiptRecorded>> {
    let op = require_op(db, op_id)?;
    if !matches!(op.state, OpState::Confirmed | OpState::NotApplied) {
        return Ok(None);
    }
    let snapshot = crate::domain::Snapshot {
        op_id: op_id.to_string(),
        matches: vec![receipt.clone()],
        complete: false,
        authoritative: false,
        closed: false,
        closed_by: None,
    };
    let read = NewObservation {
        op_id,
        by: LATE_RECEIPT_BY,
        at,
        snapshot: &snapshot,
        verdict: crate::domain::classify(op.scope(), &snapshot),
        provenance,
    };
    let (seq, contradicts) = triage::insert_late_receipt(db, &read, &receipt.effect_id)?;
    Ok(Some(ReceiptRecorded {
        operation: require_op(db, op_id)?,
        seq,
        late: true,
        contradicts,
    }))
}

/// Who a late receipt's read is recorded as: the receiver's receipt, not
/// a person.
pub(crate) const LATE_RECEIPT_BY: &str = "receipt";

/// A refusal by a rule of SPEC 12.
fn rule(rule: String) -> Error {
    Refusal::RuleViolation { rule }.into()
}

/// Moves `op`, as the caller read it, from `prepared` to `unknown`. The
/// update holds under its own predicate what [`check_dispatch`] checked:
/// the state and version read, and for a compensation an approval whose
/// original is still confirmed, at the approved version, with the
/// approved effect and action. When it changes no row (a writer changed
/// the operation or its original after the read), the row is read again
/// and refused as what it now is; nothing is logged, so the receiver is
/// never invoked twice.
fn mark_dispatched(db: &mut dyn Db, op: &Operation, at: Timestamp) -> Result<()> {
    let changed = db.execute(
        "UPDATE operations SET state = 'unknown', version = version + 1,
                 updated_at = ?3, last_dispatched_at = ?3,
                 dispatch_count = dispatch_count + 1
             WHERE op_id = ?1 AND state = 'prepared' AND version = ?2
               AND (kind = 'original' OR EXISTS (
                   SELECT 1 FROM compensation_approvals a
                   JOIN operations o ON o.op_id = a.original_op_id
                   WHERE a.compensation_op_id = operations.op_id
                     AND a.effect_id = operations.compensates_effect_id
                     AND a.action_kind = operations.action_kind
                     AND o.state = 'confirmed' AND o.version = a.approved_version
                     -- a surplus effect's approval was held to the surplus,
                     -- which is set once, with the confirmation (SPEC 14)
                     AND (o.confirmed_effect_id = a.effect_id
                         OR o.surplus_effect_ids IS NOT NULL)))",
        &[&op.op_id, &op.version, &at.to_string()],
    )?;
    if changed == 1 {
        return Ok(());
    }
    let fresh = require_op(db, &op.op_id)?;
    check_dispatch(db, &fresh)?;
    if fresh.version != op.version {
        return Err(stale(db, op.version, &fresh).into());
    }
    Err(StoreError::Corrupt(format!(
        "the dispatch of {} matched no row, though every rule holds on it",
        op.op_id
    ))
    .into())
}

/// The `stale_version` refusal of a writer that expected `expected`,
/// naming the version found in `fresh` (the row as it is now) and who
/// changed it last.
fn stale(db: &mut dyn Db, expected: i64, fresh: &Operation) -> Refusal {
    Refusal::StaleVersion {
        expected,
        found: fresh.version,
        state: fresh.state,
        changed_by: last_changed_by(db, &fresh.op_id),
    }
}

/// A `stale_version` refusal about `op` that names nobody, naming who
/// changed it last; any other refusal as it is.
fn naming_who(db: &mut dyn Db, refused: Refusal, op: Option<&Operation>) -> Refusal {
    match (refused, op) {
        (
            Refusal::StaleVersion {
                expected,
                changed_by: None,
                ..
            },
            Some(op),
        ) => stale(db, expected, op),
        (refused, _) => refused,
    }
}

/// The route of a new operation, as SQL over `?action` and `?original`: a
/// compensation goes to the receiver of the operation it compensates; an
/// original to the receiver its action kind is routed to, or else to the
/// one that takes every kind (`*`), or nowhere (NULL: there is no implicit
/// receiver). Computed in the inserting transaction, so it cannot race a
/// registration.
pub(crate) fn route_sql(action: &str, original: &str) -> String {
    format!(
        "COALESCE((SELECT receiver FROM operations WHERE op_id = {original}),
                  (SELECT receiver FROM routes WHERE action_kind = {action}),
                  (SELECT receiver FROM routes WHERE action_kind = '*'))"
    )
}

/// An operation's creating entry with the id of the registration it was
/// routed to, so that the journal proves the route to one identity.
fn with_registration(
    db: &mut dyn Db,
    op_id: &str,
    mut fields: serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>> {
    if let Some(id) = super::receivers::receiver_id_of(db, op_id)? {
        fields.insert("receiver_id".into(), id.into());
    }
    Ok(fields)
}

/// Refuses `no_receiver`, before anything is written, an original whose
/// action kind routes nowhere.
fn require_route(db: &mut dyn Db, action_kind: &str) -> Result<()> {
    let routed: Option<String> = db.query_one(
        &format!("SELECT {}", route_sql("?1", "NULL")),
        &[&action_kind],
        |r| r.get(0),
    )?;
    if routed.is_some() {
        return Ok(());
    }
    let kinds = db.query("SELECT action_kind FROM routes", &[], |r| r.get(0))?;
    let advice = match crate::domain::names::nearest_kind(action_kind, &kinds) {
        Some(near) => RouteAdvice::Nearest(near.to_string()),
        None => RouteAdvice::Register,
    };
    Err(Refusal::NoReceiver {
        kind: action_kind.to_string(),
        advice,
    }
    .into())
}

/// Writes an approval's row: refused `already_approved` when the effect
/// has one, `duplicate_operation` when its compensation id is taken.
fn insert_approval(
    db: &mut dyn Db,
    request: &CompensationRequest<'_>,
    approver: &str,
) -> Result<()> {
    let claim = Claim {
        op_id: Some(request.compensation_op_id),
        approval: Some((request.original_op_id, request.effect_id)),
        ..Claim::default()
    };
    conflict::insert(
        db,
        &format!(
            "INSERT INTO compensation_approvals ({APPROVAL_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ),
        &[
            &request.original_op_id,
            &request.effect_id,
            &request.expected_version,
            &approver,
            &request.compensation_op_id,
            &request.action_kind,
            &canonical_json(request.payload),
        ],
        &claim,
    )?;
    Ok(())
}

fn insert_op(
    db: &mut dyn Db,
    new: &NewOperation<'_>,
    kind: OpKind,
    compensates_effect_id: Option<&str>,
    compensates_op_id: Option<&str>,
    at: Timestamp,
) -> Result<()> {
    let claim = Claim {
        op_id: Some(new.op_id),
        ..Claim::default()
    };
    conflict::insert(
        db,
        &format!(
            "INSERT INTO operations
             (op_id, kind, action_kind, payload, state, version,
              compensates_effect_id, compensates_op_id, receiver, created_at, updated_at,
              receiver_id)
         VALUES (?1, ?2, ?3, ?4, 'prepared', 1, ?5, ?6, {route}, ?7, ?7,
              COALESCE((SELECT receiver_id FROM operations WHERE op_id = ?6),
                       (SELECT id FROM receivers WHERE name = {route})))",
            route = route_sql("?3", "?6")
        ),
        &[
            &new.op_id,
            &kind.as_str(),
            &new.action_kind,
            &canonical_json(new.payload),
            &compensates_effect_id,
            &compensates_op_id,
            &at.to_string(),
        ],
        &claim,
    )?;
    Ok(())
}

/// An outbox in a temporary directory with recon's own ledger registered
/// for every action kind, on a stopped clock: what the store's own tests
/// start from.
#[cfg(test)]
pub(crate) mod fixture {
    use super::SqliteSender;
    use crate::clock::{Clock, FixedClock};
    use crate::domain::{
        CloseRecord, Description, Effect, NewObservation, NewOperation, Operation, Provenance,
        Registration, Snapshot, Timestamp,
    };
    use crate::store::{Outbox, ReceiverRegistry, TriageLog};
    use serde_json::{json, Value};

    pub(crate) struct Fixture {
        pub store: SqliteSender,
        pub clock: FixedClock,
        _dir: tempfile::TempDir,
    }

    pub(crate) fn payload() -> Value {
        json!({"n": 1})
    }

    /// A complete and authoritative read of `op_id` with no match.
    pub(crate) fn absent(op_id: &str, closed: bool) -> crate::domain::Snapshot {
        crate::domain::Snapshot {
            op_id: op_id.into(),
            matches: Vec::new(),
            complete: true,
            authoritative: true,
            closed,
            closed_by: None,
        }
    }

    pub(crate) fn provenance() -> Provenance {
        Provenance {
            receiver: "builtin".into(),
            receiver_describe_sha256: "0".repeat(64),
            response_sha256: "0".repeat(64),
            ..Provenance::default()
        }
    }

    /// A registration of `name` for `actions`.
    pub(crate) fn registration(name: &str, actions: &[&str]) -> Registration {
        Registration {
            id: 0,
            version: 1,
            name: name.into(),
            actions: actions.iter().map(|a| a.to_string()).collect(),
            builtin: true,
            program: String::new(),
            args: Vec::new(),
            env: Vec::new(),
            timeout_ms: 1,
            describe_sha256: "0".repeat(64),
            describe: Description::builtin(true),
        }
    }

    impl Fixture {
        pub(crate) fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let options = crate::settings::OpenOptions::default().creating();
            let path = dir.path().join("s.sqlite");
            let mut store = SqliteSender::open(&path, options, Timestamp::from_millis(0)).unwrap();
            let clock = FixedClock::at(Timestamp::from_millis(1_796_285_702_123));
            let ledger = registration("builtin", &["*"]);
            store.register_receiver(&ledger, &clock).unwrap();
            Fixture {
                store,
                clock,
                _dir: dir,
            }
        }

        /// A close of `op_id` recorded as the flows record it: its
        /// request, then its `closed` entry with `snapshot` (SPEC 12).
        pub(crate) fn recorded_close(&mut self, snapshot: &Snapshot) {
            let op_id = snapshot.op_id.as_str();
            let requested = self
                .store
                .record_close_requests(&[op_id], "builtin", "ann", &self.clock)
                .unwrap();
            assert_eq!(requested.len(), 1);
            let value = serde_json::to_value(snapshot).unwrap();
            let close = CloseRecord {
                receiver: "builtin".into(),
                authorized_by: "ann".into(),
                response_sha256: "0".repeat(64),
                matches: Vec::new(),
                snapshot_sha256: crate::domain::canonical_sha256(&value),
                snapshot: value,
                closed_by: None,
                closed_at: self.clock.now(),
            };
            let provenance = provenance();
            let observation = NewObservation {
                op_id,
                by: "ann",
                at: self.clock.now(),
                snapshot,
                verdict: crate::domain::Verdict::TerminalAbsence,
                provenance: &provenance,
            };
            let recorded = self
                .store
                .record_closes(&[(close, observation)], &self.clock);
            assert!(recorded.unwrap()[0].is_ok());
        }

        pub(crate) fn prepared(&mut self, op_id: &str) -> Operation {
            let payload = payload();
            let new = NewOperation {
                op_id,
                action_kind: "pay",
                payload: &payload,
                origin: None,
            };
            self.store.prepare(&new, &self.clock).unwrap()
        }

        /// `unknown` at version 2.
        pub(crate) fn dispatched(&mut self, op_id: &str) -> Operation {
            self.prepared(op_id);
            self.store.begin_dispatch(op_id, &self.clock).unwrap()
        }

        /// The effect `fx-OP` of a dispatched operation.
        pub(crate) fn effect(op_id: &str) -> Effect {
            Effect {
                effect_id: format!("fx-{op_id}"),
                op_id: op_id.into(),
                action_kind: "pay".into(),
                compensates_effect_id: None,
                payload: payload(),
            }
        }

        /// `confirmed` at version 3 by its receipt.
        pub(crate) fn confirmed(&mut self, op_id: &str) -> Operation {
            let op = self.dispatched(op_id);
            let receipt = Fixture::effect(op_id);
            let clock = &self.clock;
            let recorded = self
                .store
                .record_receipt(&op, &receipt, &provenance(), clock);
            recorded.unwrap().unwrap().operation
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{payload, provenance, Fixture};
    use crate::audit::EntryKind;
    use crate::clock::Clock;
    use crate::domain::{CompensationRequest, OpState, Operation, Refusal};
    use crate::error::Error;
    use crate::store::sql::Sqlite;
    use crate::store::Outbox;

    /// A transaction the test holds, as the scripts see it.
    fn on<'a>(tx: &'a rusqlite::Transaction<'_>, path: &'a std::path::Path) -> Sqlite<'a> {
        Sqlite { conn: tx, path }
    }

    #[track_caller]
    fn refusal<T: std::fmt::Debug>(result: crate::error::Result<T>) -> Refusal {
        match result {
            Err(Error::Refused(refused)) => refused,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// The conditional update out of `unknown` holds only at the version the
    /// caller saw: a writer whose view is stale (reachable when a store runs
    /// transactions side by side under READ COMMITTED) changes nothing, even
    /// while the operation is still `unknown`.
    #[test]
    fn a_transition_at_a_stale_version_changes_nothing_even_while_unknown() {
        let mut fx = Fixture::new();
        let prepared = fx.prepared("op");
        let dispatched = fx.store.begin_dispatch("op", &fx.clock).unwrap();
        assert_eq!(dispatched.version, prepared.version + 1);
        // The operation as it was before the dispatch: unknown now, but at
        // another version than the one this writer holds.
        let stale = Operation {
            surplus_effect_ids: Vec::new(),
            state: OpState::Unknown,
            ..prepared
        };
        let receipt = Fixture::effect("op");
        let recorded = fx
            .store
            .record_receipt(&stale, &receipt, &provenance(), &fx.clock);
        assert_eq!(recorded.unwrap(), None);
        assert_eq!(fx.store.require("op").unwrap(), dispatched);
        assert!(fx.store.evidence("op").unwrap().is_empty());
    }

    /// SPEC 12 in SQLite's script: a receipt is the first outcome of its
    /// dispatch, so one that comes after the dispatch's failed apply is
    /// refused `rule_violation` and writes nothing.
    #[test]
    fn a_receipt_after_its_dispatch_failed_is_refused_rule_violation() {
        let mut fx = Fixture::new();
        let op = fx.dispatched("op");
        let failure = crate::domain::CallFailure {
            seq: 0,
            op_id: "op".into(),
            verb: "apply".into(),
            receiver: "builtin".into(),
            kind: crate::domain::FailureKind::Crash,
            detail: "no answer".into(),
            exit_code: Some(23),
            stderr: String::new(),
            at: fx.clock.now(),
        };
        use crate::store::sql::SqlStore;
        use crate::store::{journal, TriageLog};
        fx.store.record_call_failure(&failure, &fx.clock).unwrap();
        let head = fx.store.read(|db| journal::head(db)).unwrap();
        let receipt = Fixture::effect("op");
        let refused = refusal(
            fx.store
                .record_receipt(&op, &receipt, &provenance(), &fx.clock),
        );
        assert_eq!(refused.code(), "rule_violation", "{refused}");
        assert!(refused.to_string().contains("first outcome"), "{refused}");
        let after = fx.store.read(|db| journal::head(db)).unwrap();
        assert_eq!(after, head, "nothing was written");
        assert_eq!(fx.store.require("op").unwrap(), op);
    }

    /// A second dispatcher that read `prepared` before the first committed
    /// (side by side under READ COMMITTED) finds its update touching no row:
    /// it is refused as the row now is, `blind_retry`, in every build, and
    /// logs no second dispatch, so the receiver is never started twice.
    #[test]
    fn a_dispatch_whose_update_touched_no_row_is_refused_and_logs_nothing() {
        let mut fx = Fixture::new();
        let read = fx.prepared("op");
        fx.store.begin_dispatch("op", &fx.clock).unwrap();
        let tx = fx.store.conn.transaction().unwrap();
        let at = fx.clock.now();
        let refused = refusal(super::mark_dispatched(
            &mut on(&tx, &fx.store.path),
            &read,
            at,
        ));
        assert_eq!(refused.code(), "blind_retry");
        assert!(
            matches!(
                refused,
                Refusal::BlindRetry {
                    state: OpState::Unknown,
                    ..
                }
            ),
            "{refused:?}"
        );
        drop(tx);
        assert_eq!(fx.store.dispatch_count("op").unwrap(), 1);
        assert_eq!(fx.store.require("op").unwrap().version, 2);
    }

    /// A compensation's dispatch holds its approval in the update's own
    /// predicate: when the original is no longer at the approved version
    /// after the rules read it, the update changes nothing and the dispatch
    /// is refused `stale_version`, naming the version found.
    #[test]
    fn a_compensation_dispatch_whose_original_moved_after_the_read_changes_nothing() {
        let mut fx = Fixture::new();
        fx.confirmed("op");
        let payload = payload();
        let request = CompensationRequest {
            reason: None,
            original_op_id: "op",
            effect_id: "fx-op",
            approver: "ann",
            expected_version: 3,
            compensation_op_id: "comp",
            action_kind: "refund",
            payload: &payload,
        };
        fx.store.approve_compensation(&request, &fx.clock).unwrap();
        let read = fx.store.require("comp").unwrap();
        // What no rule lets happen, written behind the rules' back.
        fx.store
            .conn
            .execute("UPDATE operations SET version = 4 WHERE op_id = 'op'", [])
            .unwrap();
        let tx = fx.store.conn.transaction().unwrap();
        let at = fx.clock.now();
        let refused = refusal(super::mark_dispatched(
            &mut on(&tx, &fx.store.path),
            &read,
            at,
        ));
        assert!(
            matches!(
                &refused,
                Refusal::StaleVersion { expected: 3, found: 4, changed_by: Some(who), .. }
                    if who == "a receipt"
            ),
            "{refused:?}"
        );
        drop(tx);
        assert_eq!(fx.store.dispatch_count("comp").unwrap(), 0);
        assert_eq!(fx.store.require("comp").unwrap().state, OpState::Prepared);
    }

    /// A decision whose conditional update touched no row (another writer
    /// decided after this one read the row) is refused `stale_version`
    /// from the row read again: the version found and who changed it, not
    /// the version this writer had read.
    #[test]
    fn a_stale_decision_names_the_version_found_and_who_changed_it() {
        use crate::domain::{Decision, Review, Verdict};
        let mut fx = Fixture::new();
        let read = fx.dispatched("op");
        let payload = payload();
        let absent = super::fixture::absent("op", true);
        let review = |reviewer| Review {
            keep: None,
            op_id: "op",
            payload: &payload,
            reviewer,
            decision: Decision::NotApplied,
            snapshot: &absent,
            expected_version: 2,
        };
        let provenance = provenance();
        fx.recorded_close(&absent);
        let won = fx
            .store
            .record_review(&review("rosa"), &provenance, &fx.clock, false)
            .unwrap();
        assert_eq!(won.operation.version, 3);
        let snapshot = serde_json::to_value(&absent).unwrap();
        let late = review("sam");
        let at = fx.clock.now();
        let verdict = Verdict::TerminalAbsence;
        let judged = (verdict, None, None);
        let t = super::review_transition(&late, &read, judged, &snapshot, &provenance, at);
        let tx = fx.store.conn.transaction().unwrap();
        let refused = refusal(super::decide(&mut on(&tx, &fx.store.path), t));
        assert_eq!(
            refused.to_string(),
            "expected version 2, found 3; the operation is now not_applied (last changed by reviewer rosa)",
        );
        assert_eq!(refused.code(), "stale_version");
        drop(tx);
        assert_eq!(fx.store.evidence("op").unwrap().len(), 1);
    }

    /// SPEC 12: a decision on a closed snapshot rests on a recorded close
    /// holding exactly that snapshot, and names it (`close_seq`); one with
    /// no close recorded, or whose snapshot is not the close's, is refused
    /// `unbacked_close` and writes nothing.
    #[test]
    fn a_decision_on_a_closed_snapshot_names_its_recorded_close_or_is_refused_unbacked_close() {
        use crate::domain::{Decision, Review, Snapshot};
        let mut fx = Fixture::new();
        fx.dispatched("op");
        let payload = payload();
        let absent = super::fixture::absent("op", true);
        let review = |snapshot| Review {
            keep: None,
            op_id: "op",
            payload: &payload,
            reviewer: "rosa",
            decision: Decision::NotApplied,
            snapshot,
            expected_version: 2,
        };
        let provenance = provenance();
        let head = |fx: &Fixture| {
            use crate::store::sql::SqlStore;
            (fx.store.read(|db| crate::store::journal::head(db)))
                .unwrap()
                .length
        };
        let before = head(&fx);
        let refused = fx
            .store
            .record_review(&review(&absent), &provenance, &fx.clock, true)
            .unwrap_err();
        assert_eq!(refused.code(), Some("unbacked_close"), "{refused}");
        assert_eq!(head(&fx), before, "nothing was written");
        let other = Snapshot {
            closed_by: Some("someone".into()),
            ..absent.clone()
        };
        fx.recorded_close(&other);
        let before = head(&fx);
        let refused = fx
            .store
            .record_review(&review(&absent), &provenance, &fx.clock, true)
            .unwrap_err();
        assert_eq!(refused.code(), Some("unbacked_close"), "{refused}");
        assert_eq!(head(&fx), before, "nothing was written");
        fx.recorded_close(&absent);
        let close_seq = head(&fx) - 1;
        fx.store
            .record_review(&review(&absent), &provenance, &fx.clock, true)
            .unwrap();
        let evidence = fx.store.evidence("op").unwrap();
        assert_eq!(evidence[0].close_seq, Some(close_seq));
    }

    /// A policy's decisions of one chunk are one transaction, each checked
    /// on its own: one whose version moved since its read is refused
    /// `stale_version` alone, one whose snapshot is not closed is refused
    /// `unsupported_verdict` alone, and the other is recorded as the
    /// policy's (`source: "policy"`, naming it).
    #[test]
    fn a_policy_decision_refused_alone_leaves_the_others_of_its_chunk_recorded() {
        use crate::domain::{Decision, EvidenceSource, Policy, Provenance, Review};
        let mut fx = Fixture::new();
        for op in ["ok", "stale", "open"] {
            fx.dispatched(op);
        }
        let payload = payload();
        let absent = super::fixture::absent;
        let snapshots = [
            absent("ok", true),
            absent("stale", true),
            absent("open", false),
        ];
        let versions = [2, 1, 2];
        let provenance = provenance();
        fx.recorded_close(&snapshots[0]);
        let reviews: Vec<(Review<'_>, Provenance)> = (snapshots.iter().zip(versions))
            .map(|(snapshot, expected_version)| {
                let review = Review {
                    keep: None,
                    op_id: &snapshot.op_id,
                    payload: &payload,
                    reviewer: "robot",
                    decision: Decision::NotApplied,
                    snapshot,
                    expected_version,
                };
                (review, provenance.clone())
            })
            .collect();
        let results = fx
            .store
            .record_policy_reviews(Policy::Provable, &reviews, &fx.clock)
            .unwrap();
        let codes: Vec<Option<&str>> = results
            .iter()
            .map(|r| {
                r.as_ref()
                    .err()
                    .and_then(|e| e.refusal())
                    .map(Refusal::code)
            })
            .collect();
        assert_eq!(
            codes,
            [None, Some("stale_version"), Some("unsupported_verdict")]
        );
        let evidence = fx.store.evidence("ok").unwrap();
        assert_eq!(
            (
                evidence[0].source,
                evidence[0].policy,
                evidence[0].reviewer.as_deref()
            ),
            (
                EvidenceSource::Policy,
                Some(Policy::Provable),
                Some("robot")
            )
        );
        for op in ["stale", "open"] {
            assert!(fx.store.evidence(op).unwrap().is_empty(), "{op}");
            assert_eq!(fx.store.require(op).unwrap().state, OpState::Unknown);
        }
    }

    /// Two writers that both read an op id as free (side by side under READ
    /// COMMITTED) race to insert it: the loser's key violation is
    /// `duplicate_operation` (exit 3), not a storage failure (exit 4).
    #[test]
    fn an_op_id_taken_after_the_read_is_refused_duplicate_operation() {
        use crate::domain::{NewOperation, OpKind};
        let mut fx = Fixture::new();
        fx.prepared("op");
        let payload = payload();
        let new = NewOperation {
            op_id: "op",
            action_kind: "pay",
            payload: &payload,
            origin: None,
        };
        let tx = fx.store.conn.transaction().unwrap();
        let at = fx.clock.now();
        let db = &mut on(&tx, &fx.store.path);
        let inserted = super::insert_op(db, &new, OpKind::Original, None, None, at);
        let refused = refusal(inserted);
        assert_eq!(refused, Refusal::DuplicateOperation("op".into()));
    }

    /// The same for approvals: a second approval of one effect that passed
    /// the read is `already_approved`; one whose compensation id is taken,
    /// `duplicate_operation`.
    #[test]
    fn an_approval_taken_after_the_read_is_refused_already_approved() {
        let mut fx = Fixture::new();
        fx.confirmed("op");
        fx.confirmed("other");
        let payload = payload();
        let request = |original_op_id, effect_id, compensation_op_id| CompensationRequest {
            reason: None,
            original_op_id,
            effect_id,
            approver: "ann",
            expected_version: 3,
            compensation_op_id,
            action_kind: "refund",
            payload: &payload,
        };
        fx.store
            .approve_compensation(&request("op", "fx-op", "comp"), &fx.clock)
            .unwrap();
        let tx = fx.store.conn.transaction().unwrap();
        let path = fx.store.path.clone();
        let db = &mut on(&tx, &path);
        let again = super::insert_approval(db, &request("op", "fx-op", "comp-2"), "bob");
        assert_eq!(
            refusal(again),
            Refusal::AlreadyApproved {
                op_id: "op".into(),
                effect_id: "fx-op".into()
            }
        );
        let taken = request("other", "fx-other", "comp");
        let taken = super::insert_approval(db, &taken, "bob");
        assert_eq!(refusal(taken), Refusal::DuplicateOperation("comp".into()));
    }

    /// A key that is not a claim (here the journal's seq) stays a storage
    /// error: only the keys that mean a refusal are mapped.
    #[test]
    fn a_violation_of_another_key_stays_a_storage_error() {
        let fx = Fixture::new();
        let error = fx
            .store
            .conn
            .execute(
                "INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
                 VALUES (1, 'noted', NULL, '{}', '', '')",
                [],
            )
            .unwrap_err();
        assert_eq!(super::super::keys::violated(&error), None);
        let claim = super::Claim {
            op_id: Some("op"),
            ..super::Claim::default()
        };
        let error = crate::store::sql_error(&fx.store.path, error);
        let mapped =
            super::conflict::Claimed::claiming(Err::<(), _>(error), &mut fx.store.db(), &claim);
        assert!(matches!(mapped, Err(Error::Store(_))), "{mapped:?}");
    }

    /// `SqlStore::write` commits what an act wrote when it returns `Ok`,
    /// and rolls all of it back when it returns an error, after writing.
    #[test]
    fn a_write_commits_an_act_that_succeeds_and_rolls_back_one_that_fails() {
        use crate::store::journal;
        use crate::store::sql::SqlStore;
        let mut fx = Fixture::new();
        let before = fx.store.read(|db| journal::head(db)).unwrap();
        let append = |db: &mut dyn crate::store::sql::Db| {
            let fields = serde_json::Map::new();
            journal::append(db, EntryKind::Noted, None, fields)
        };
        let failed: crate::error::Result<()> =
            fx.store
                .write(&fx.clock, crate::domain::team::Act::Note, |db, _| {
                    append(db)?;
                    Err(Refusal::EmptyReviewer.into())
                });
        assert_eq!(refusal(failed), Refusal::EmptyReviewer);
        let head = fx.store.read(|db| journal::head(db)).unwrap();
        assert_eq!(head, before);
        let sealed = fx
            .store
            .write(&fx.clock, crate::domain::team::Act::Note, |db, _| {
                Ok(append(db)?)
            })
            .unwrap();
        let head = fx.store.read(|db| journal::head(db)).unwrap();
        assert_eq!((head.length, head.head_hash), (sealed.seq, sealed.hash));
        assert_eq!(sealed.seq, before.length + 1);
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
        // `upgraded` is PostgreSQL's alone (`recon db upgrade`): a file is
        // upgraded on opening, with no entry.
        let kinds: Vec<&str> = EntryKind::ALL
            .iter()
            .filter(|k| **k != EntryKind::Upgraded)
            .map(|k| k.as_str())
            .collect();
        assert_eq!(listed, kinds);
    }
}

/// One close the receiver committed: its `closed` entry and `closes` row,
/// and the observation of its closing read.
fn record_close(
    db: &mut dyn Db,
    close: &CloseRecord,
    observation: &NewObservation<'_>,
) -> Result<Observation> {
    let op_id = observation.op_id;
    require_op(db, op_id)?;
    let fields = audit::closed(close);
    let sealed = journal::append(db, EntryKind::Closed, Some(op_id), fields)?;
    db.execute(
        "INSERT INTO closes (op_id, receiver, authorized_by, journal_seq, closed_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        &[
            &op_id,
            &close.receiver,
            &close.authorized_by,
            &sealed.seq,
            &close.closed_at.to_string(),
        ],
    )?;
    triage::insert_observation(db, observation)
}
