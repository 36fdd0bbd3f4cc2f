//! The receiver's database: the ledger of effects and the durable close
//! tombstones.
//!
//! The receiver is genuinely non-idempotent: `effects.op_id` is indexed but not
//! unique, so a repeated call writes a second row. The only protection is the
//! close barrier: a closed operation is in `closed_ops` forever, and a
//! `BEFORE INSERT` trigger on `effects` aborts any write for it, so no write
//! path can forget the explicit check that [`ReceiverStore::apply`] also
//! makes. (The bulk writer for generated load drops the trigger inside its
//! own transaction and makes the same check once per chunk before it puts
//! the trigger back and commits.) Effect ids come from the ledger row number (`fx-000001`), assigned
//! inside the writing transaction, so they are deterministic.

use super::upgrade::Steps;
use super::{open_database, Role, SqlContext};
use crate::domain::{
    canonical_json, effect_id_for, Closure, Effect, EffectRequest, Snapshot, Timestamp,
};
use crate::error::{Refusal, Result, StoreError};
use crate::faults::{crash_point, CrashPoint};
use crate::settings::OpenOptions;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub(crate) const ROLE: Role = Role {
    application_id: 0x7263_6e72, // "rcnr"
    schema: SCHEMA,
    // The ledger's tables are the same in schema 4: only the version and
    // the time of the upgrade change.
    from_four: Steps {
        rebuild: &[],
        record: "INSERT INTO meta (key, value) VALUES ('upgraded_at', ?1)",
    },
    // Nor in schema 5 or 6.
    from_five: Steps {
        rebuild: &[],
        record: "",
    },
    from_six: Steps {
        rebuild: &[],
        record: "",
    },
    finish: |_, _, _, _| Ok(()),
};

/// The close barrier's trigger. The bulk writer (store/bulk.rs) drops it
/// for a generated chunk, makes the same check once for the whole chunk,
/// and creates it again from this same text before it commits.
macro_rules! refuse_closed {
    () => {
        "CREATE TRIGGER effects_refuse_closed BEFORE INSERT ON effects
WHEN EXISTS (SELECT 1 FROM closed_ops WHERE op_id = NEW.op_id)
BEGIN
    SELECT RAISE(ABORT, 'operation_closed');
END;
"
    };
}

/// [`refuse_closed!`], for the bulk writer.
pub(crate) const REFUSE_CLOSED: &str = refuse_closed!();

const SCHEMA: &str = concat!(
    "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE effects (
    seq INTEGER PRIMARY KEY,
    effect_id TEXT NOT NULL UNIQUE,
    op_id TEXT NOT NULL,
    action_kind TEXT NOT NULL,
    compensates_effect_id TEXT,
    payload TEXT NOT NULL
);
CREATE INDEX effects_by_op ON effects(op_id);
CREATE TABLE closed_ops (
    op_id TEXT PRIMARY KEY,
    authorized_by TEXT NOT NULL,
    effects_at_close INTEGER NOT NULL
);
",
    refuse_closed!(),
    "CREATE TRIGGER effects_append_only_update BEFORE UPDATE ON effects
BEGIN
    SELECT RAISE(ABORT, 'the receiver ledger is append-only');
END;
CREATE TRIGGER effects_append_only_delete BEFORE DELETE ON effects
BEGIN
    SELECT RAISE(ABORT, 'the receiver ledger is append-only');
END;
CREATE TRIGGER closed_ops_durable_update BEFORE UPDATE ON closed_ops
BEGIN
    SELECT RAISE(ABORT, 'close tombstones are durable');
END;
CREATE TRIGGER closed_ops_durable_delete BEFORE DELETE ON closed_ops
BEGIN
    SELECT RAISE(ABORT, 'close tombstones are durable');
END;
"
);

pub struct ReceiverStore {
    conn: Connection,
    path: PathBuf,
}

const EFFECT_COLUMNS: &str = "effect_id, op_id, action_kind, compensates_effect_id, payload";

fn effect_from_row(row: &Row<'_>) -> rusqlite::Result<(Effect, String)> {
    let payload: String = row.get(4)?;
    Ok((
        Effect {
            effect_id: row.get(0)?,
            op_id: row.get(1)?,
            action_kind: row.get(2)?,
            compensates_effect_id: row.get(3)?,
            payload: Value::Null,
        },
        payload,
    ))
}

fn parse_effect((mut effect, payload): (Effect, String)) -> Result<Effect, StoreError> {
    effect.payload = serde_json::from_str(&payload)
        .map_err(|e| StoreError::Corrupt(format!("payload of effect {}: {e}", effect.effect_id)))?;
    Ok(effect)
}

/// The `BEFORE INSERT` trigger's abort is the same refusal as the explicit
/// check; anything else is a storage error.
fn refusal_from_trigger(error: rusqlite::Error, op_id: &str, path: &Path) -> crate::error::Error {
    match &error {
        rusqlite::Error::SqliteFailure(_, Some(message)) if message == "operation_closed" => {
            Refusal::OperationClosed(op_id.to_string()).into()
        }
        _ => super::sql_error(path, error).into(),
    }
}

impl ReceiverStore {
    /// Opens the file, upgrading a schema-4 one at `now` first.
    pub fn open(path: &Path, options: OpenOptions, now: Timestamp) -> Result<Self, StoreError> {
        let conn = open_database(path, ROLE, options, now)?;
        Ok(ReceiverStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The workspace id the ledger was created with (see `store::identity`).
    pub fn workspace_id(&self) -> Result<String, StoreError> {
        super::identity::workspace_id(&self.conn, &self.path)?
            .ok_or_else(|| StoreError::Corrupt(format!("{}: no workspace id", self.path.display())))
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Writes one effect in one `BEGIN IMMEDIATE` transaction, unless the
    /// operation is closed. Returns the committed effect: the receipt.
    pub fn apply(&mut self, request: &EffectRequest<'_>) -> Result<Effect> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(&path)?;
        let closed: bool = tx
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM closed_ops WHERE op_id = ?1)")
            .and_then(|mut s| s.query_row([request.op_id], |r| r.get(0)))
            .at(&path)?;
        if closed {
            return Err(Refusal::OperationClosed(request.op_id.to_string()).into());
        }
        let payload = canonical_json(request.payload);
        let seq: i64 = tx
            .query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM effects", [], |r| {
                r.get(0)
            })
            .at(&path)?;
        let effect_id = effect_id_for(seq);
        tx.prepare_cached(
            "INSERT INTO effects (seq, effect_id, op_id, action_kind, compensates_effect_id, payload)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![
                seq,
                effect_id,
                request.op_id,
                request.action_kind,
                request.compensates_effect_id,
                payload
            ])
        })
        .map_err(|e| refusal_from_trigger(e, request.op_id, &path))?;
        tx.commit().at(&path)?;
        Ok(Effect {
            effect_id,
            op_id: request.op_id.to_string(),
            action_kind: request.action_kind.to_string(),
            compensates_effect_id: request.compensates_effect_id.map(str::to_string),
            payload: request.payload.clone(),
        })
    }

    /// Reads every visible effect of an operation in one transaction.
    ///
    /// With `close_authorized_by`, this is a receiver mutation, not a read:
    /// one `BEGIN IMMEDIATE` transaction writes the durable close tombstone and
    /// reads the effects, so SQLite serializes it with every write. An
    /// original either committed before and is in the snapshot, or is refused
    /// afterwards. The first authorizer of a close is the one kept.
    pub fn snapshot(&mut self, op_id: &str, close_authorized_by: Option<&str>) -> Result<Snapshot> {
        let path = self.path.clone();
        let behavior = match close_authorized_by {
            Some(_) => TransactionBehavior::Immediate,
            None => TransactionBehavior::Deferred,
        };
        let tx = self.conn.transaction_with_behavior(behavior).at(&path)?;
        if let Some(who) = close_authorized_by {
            tx.prepare_cached(
                "INSERT OR IGNORE INTO closed_ops (op_id, authorized_by, effects_at_close)
                 VALUES (?1, ?2, (SELECT COUNT(*) FROM effects WHERE op_id = ?1))",
            )
            .and_then(|mut s| s.execute(params![op_id, who]))
            .at(&path)?;
        }
        let closed: bool = tx
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM closed_ops WHERE op_id = ?1)")
            .and_then(|mut s| s.query_row([op_id], |r| r.get(0)))
            .at(&path)?;
        let matches = {
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT {EFFECT_COLUMNS} FROM effects WHERE op_id = ?1 ORDER BY seq"
                ))
                .at(&path)?;
            let rows = stmt
                .query_map([op_id], effect_from_row)
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .at(&path)?;
            rows.into_iter()
                .map(parse_effect)
                .collect::<Result<Vec<_>, _>>()?
        };
        if close_authorized_by.is_some() {
            crash_point(CrashPoint::CloseBeforeCommit);
        }
        tx.commit().at(&path)?;
        if close_authorized_by.is_some() {
            crash_point(CrashPoint::CloseAfterCommit);
        }
        Ok(Snapshot {
            op_id: op_id.to_string(),
            matches,
            complete: true,
            authoritative: true,
            closed,
            closed_by: None,
        })
    }

    /// The ledger, in write order: every effect, or one operation's.
    pub fn ledger(&self, op_id: Option<&str>) -> Result<Vec<Effect>> {
        let sql = match op_id {
            Some(_) => {
                format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE op_id = ?1 ORDER BY seq")
            }
            None => format!("SELECT {EFFECT_COLUMNS} FROM effects ORDER BY seq"),
        };
        let mut stmt = self.conn.prepare_cached(&sql).at(&self.path)?;
        let rows = match op_id {
            Some(id) => stmt.query_map([id], effect_from_row),
            None => stmt.query_map([], effect_from_row),
        }
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .at(&self.path)?;
        Ok(rows
            .into_iter()
            .map(parse_effect)
            .collect::<Result<Vec<_>, _>>()?)
    }

    /// True when the ledger holds no effect and no tombstone: a database
    /// that was never used, which may be recreated without losing anything.
    pub fn is_unused(&self) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT NOT EXISTS (SELECT 1 FROM effects) AND NOT EXISTS (SELECT 1 FROM closed_ops)",
                [],
                |r| r.get(0),
            )
            .at(&self.path)
    }

    pub fn effect_count(&self, op_id: Option<&str>) -> Result<i64, StoreError> {
        match op_id {
            Some(id) => self
                .conn
                .prepare_cached("SELECT COUNT(*) FROM effects WHERE op_id = ?1")
                .and_then(|mut s| s.query_row([id], |r| r.get(0))),
            None => self
                .conn
                .query_row("SELECT COALESCE(MAX(seq), 0) FROM effects", [], |r| {
                    r.get(0)
                }),
        }
        .at(&self.path)
    }

    pub fn closure(&self, op_id: &str) -> Result<Option<Closure>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT op_id, authorized_by, effects_at_close FROM closed_ops WHERE op_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([op_id], |r| {
                    Ok(Closure {
                        op_id: r.get(0)?,
                        authorized_by: r.get(1)?,
                        effects_at_close: r.get(2)?,
                    })
                })
                .optional()
            })
            .at(&self.path)
    }

    /// A number that grows with every effect and every close the ledger
    /// holds (both tables are append-only, so the largest seq and rowid
    /// only grow), the same whichever connection reads it: a console's
    /// watcher compares it with what its screen was read at. Two index
    /// lookups, whatever the ledger's size.
    pub fn mark(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row(
                "SELECT coalesce((SELECT max(seq) FROM effects), 0) \
                 + coalesce((SELECT max(rowid) FROM closed_ops), 0)",
                [],
                |r| r.get(0),
            )
            .at(&self.path)
    }
}
