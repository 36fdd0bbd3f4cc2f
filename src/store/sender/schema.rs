//! The SQLite outbox's schema: its creation SQL, the role it plays among
//! recon's files (`store::upgrade`'s `Role`), and the steps that upgrade
//! a file of schema 4, 5 or 6 to this build's.

use super::super::upgrade::{Rebuild, Steps};
use super::super::{Role, SqlContext};
use super::Sqlite;
use crate::audit;
use crate::domain::{canonical_json, Description, Registration, Timestamp, BUILTIN_NAME};
use crate::error::StoreError;
use rusqlite::Transaction;
use std::path::Path;

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
    finish: finish_upgrade,
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
/// What the outbox's upgrade does last: it registers the built-in ledger
/// its operations were routed to implicitly before schema 6, then gives
/// every operation that names no registration (prepared before schema 6)
/// the one its receiver's name holds now, so no later registration under
/// that name can take it (SPEC 12, "Routes are fixed"), and records the
/// journal's last entry then (`routes_fixed_through_seq`), which `verify`
/// replays the registrations through to hold each to it.
fn finish_upgrade(
    tx: &Transaction<'_>,
    path: &Path,
    at: Timestamp,
    from: i64,
) -> Result<(), StoreError> {
    register_implicit_builtin(tx, path, at, from)?;
    let fixed = tx
        .execute(
            "UPDATE operations SET receiver_id =
                (SELECT r.id FROM receivers r WHERE r.name = operations.receiver)
             WHERE receiver_id IS NULL
               AND EXISTS (SELECT 1 FROM receivers r WHERE r.name = operations.receiver)",
            [],
        )
        .at(path)?;
    if fixed > 0 {
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value)
             SELECT ?1, CAST(COALESCE(MAX(seq), 0) AS TEXT) FROM journal",
            [crate::store::upgrade::ROUTES_FIXED_THROUGH_SEQ],
        )
        .at(path)?;
    }
    Ok(())
}

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
    super::super::receivers::insert_registration(db, &registration, at).map_err(|e| match e {
        crate::error::Error::Store(e) => e,
        other => StoreError::Corrupt(format!("registering the built-in ledger: {other}")),
    })
}

/// The timeout recorded for the built-in ledger's registration; its child
/// runs under the timeout of the recon that starts it.
const BUILTIN_TIMEOUT_MS: u64 = 30_000;

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

pub(super) const SCHEMA: &str = concat!(
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
