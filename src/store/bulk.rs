//! Bulk writes for generated workspaces (`recon demo --ops N`): many rows in
//! one large transaction per call, through one prepared statement each.
//!
//! The normal write paths commit once per step, because each step is a
//! decision that must be durable on its own. Generated load is not a
//! decision, and 100,000 single-row transactions under `synchronous = FULL`
//! would spend minutes in fsync. The rows still go through plain `INSERT`s
//! with their constraints checked. Two per-row triggers are dropped for the
//! length of a chunk's transaction and their work done once for the chunk
//! (`state_counts` gets the chunk's count; the receiver's close barrier
//! checks the chunk against the tombstones), so a generated effect for a
//! closed operation is refused as a real one is. Each call's rows commit or
//! roll back as a whole; the demo makes one call per chunk of 10,000
//! operations.
//!
//! Payloads arrive as canonical JSON text (what [`crate::domain::canonical_json`]
//! would print) so that a million rows are not parsed and printed again; the
//! generator in `crate::demo` has a test proving its text is canonical.
//!
//! Each generated operation is journaled as what it stands for, a prepare
//! and a dispatch: two chained entries in the same transaction as its rows,
//! sealed from that text too ([`crate::audit::seal_generated`]).

use super::receiver::REFUSE_CLOSED;
use super::sender::STATE_COUNTS_INSERT;
use super::sql::Sqlite;
use super::triage::insert_observation_row;
use super::{journal, sql_error, SqlContext};
use crate::audit::{seal_generated, Checkpoint, EntryKind, Sealed};
use crate::domain::{
    effect_id_for, Appended, BulkEffect, BulkOperation, NewObservation, NumberedIds,
};
use crate::error::{Refusal, Result, StoreError};
use crate::store::{BulkLoad, ReceiverStore, SqliteSender};
use rusqlite::{params, Connection, OptionalExtension, Statement, TransactionBehavior};
use std::path::Path;

/// The page cache a bulk transaction works with (64 MiB), so index pages
/// stay in memory instead of being spilled and re-read.
const BULK_CACHE_KIB: i64 = 64 * 1024;

/// How many WAL pages a bulk writer lets accumulate before it checkpoints
/// them into the database (64 MiB): each checkpoint syncs both files, and
/// at SQLite's default (1,000 pages) a million generated operations would
/// pay for several hundred of them.
const BULK_CHECKPOINT_PAGES: i64 = 16_384;

/// Runs `body` with a larger page cache and checkpoint interval and its
/// temporary storage in memory, then restores the previous ones.
fn with_bulk_cache<T>(
    conn: &mut Connection,
    path: &std::path::Path,
    body: impl FnOnce(&mut Connection) -> Result<T>,
) -> Result<T> {
    let pragma = |name: &str| -> Result<i64> {
        Ok(conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .at(path)?)
    };
    let (cache, checkpoint, temp) = (
        pragma("cache_size")?,
        pragma("wal_autocheckpoint")?,
        pragma("temp_store")?,
    );
    // Statement journals (a row with a trigger needs one) stay in memory.
    conn.execute_batch(&format!(
        "PRAGMA cache_size = -{BULK_CACHE_KIB}; \
         PRAGMA wal_autocheckpoint = {BULK_CHECKPOINT_PAGES}; PRAGMA temp_store = MEMORY"
    ))
    .at(path)?;
    let result = body(conn);
    conn.execute_batch(&format!(
        "PRAGMA cache_size = {cache}; PRAGMA wal_autocheckpoint = {checkpoint}; \
         PRAGMA temp_store = {temp}"
    ))
    .at(path)?;
    result
}

impl BulkLoad for SqliteSender {
    /// Walks down the op id index from the series' greatest possible id
    /// and stops at the first id of the series: ids between the bounds
    /// that are not of it (`op-bulk-5a`) are passed over, so only a
    /// workspace holding many such ids makes this walk long.
    fn last_numbered_op(&self, ids: NumberedIds) -> Result<Option<u64>, StoreError> {
        let (low, high) = ids.bounds();
        let path = self.path();
        let mut statement = self
            .conn()
            .prepare_cached(
                "SELECT op_id FROM operations WHERE op_id >= ?1 AND op_id <= ?2
                 ORDER BY op_id DESC",
            )
            .at(path)?;
        let mut rows = statement.query([low, high]).at(path)?;
        while let Some(row) = rows.next().at(path)? {
            let op_id: String = row.get(0).at(path)?;
            if let Some(n) = ids.number(&op_id) {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// Inserts generated operations as dispatched originals whose receipt
    /// was lost, routed to `receiver`, each with its observation when it
    /// has one, in one transaction. An op id that already exists rolls the whole batch
    /// back with `duplicate_operation`.
    ///
    /// The per-row trigger that counts operations per state costs about a
    /// fifth of a generated row, so the transaction drops it, adds the
    /// chunk's count itself and creates it again before it commits: no
    /// other connection ever sees the schema without it. Foreign keys are
    /// checked at the commit, which spares each insert a statement journal;
    /// no row is ever written before a row it names (see
    /// [`BulkWriter::write`]), so no check is ever pending.
    fn insert_lost_receipts(
        &mut self,
        receiver: &str,
        ops: &mut dyn Iterator<Item = BulkOperation>,
    ) -> Result<u64> {
        let path = self.path().to_path_buf();
        with_bulk_cache(self.conn_mut(), &path, |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .at(&path)?;
            tx.execute_batch("PRAGMA defer_foreign_keys = ON; DROP TRIGGER state_counts_insert;")
                .at(&path)?;
            let mut writer = BulkWriter::new(&tx, &path, receiver)?;
            let mut count = 0u64;
            for op in ops {
                writer.write(&op)?;
                count += 1;
            }
            drop(writer);
            tx.execute(
                "UPDATE state_counts SET n = n + ?1 WHERE state = 'unknown'",
                [i64::try_from(count).unwrap_or(i64::MAX)],
            )
            .at(&path)?;
            tx.execute_batch(STATE_COUNTS_INSERT).at(&path)?;
            tx.commit().at(&path)?;
            Ok(count)
        })
    }
}

/// The statements of one bulk transaction of the outbox, and where its
/// journal and dispatch log continue.
struct BulkWriter<'c> {
    path: &'c Path,
    conn: &'c Connection,
    /// The registration every operation of the transaction routes to.
    receiver: &'c str,
    insert_op: Statement<'c>,
    insert_dispatch: Statement<'c>,
    insert_entry: Statement<'c>,
    observe_op: Statement<'c>,
    head: Checkpoint,
    next_dispatch: i64,
}

impl<'c> BulkWriter<'c> {
    fn new(conn: &'c Connection, path: &'c Path, receiver: &'c str) -> Result<Self> {
        let next_dispatch: i64 = conn
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_log",
                [],
                |r| r.get(0),
            )
            .at(path)?;
        Ok(BulkWriter {
            path,
            conn,
            receiver,
            insert_op: conn
                .prepare(
                    "INSERT INTO operations
                         (op_id, kind, action_kind, payload, state, version, receiver,
                          created_at, updated_at, dispatch_count, last_dispatched_at,
                          latest_observation, latest_verdict)
                     VALUES (?1, 'original', ?2, ?3, 'unknown', 2, ?4, ?5, ?5, 1, ?5, NULL, NULL)",
                )
                .at(path)?,
            insert_dispatch: conn
                .prepare("INSERT INTO dispatch_log (seq, op_id, from_version) VALUES (?1, ?2, 1)")
                .at(path)?,
            insert_entry: conn
                .prepare(
                    "INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .at(path)?,
            observe_op: conn
                .prepare(
                    "UPDATE operations SET latest_observation = ?1, latest_verdict = ?2
                     WHERE op_id = ?3",
                )
                .at(path)?,
            head: journal::head(&mut Sqlite { conn, path })?,
            next_dispatch,
        })
    }

    /// One generated operation: its row, its dispatch, its `prepared` and
    /// `dispatched` entries, and its observation's entry and row.
    ///
    /// Every row is written after the rows it names, so no foreign key is
    /// ever pending: an operation names its observation and the observation
    /// its operation, so the operation's row is inserted first and names
    /// its observation by an update once that exists. (With a check
    /// pending, SQLite looks for the operation naming each new observation,
    /// and `latest_observation` has no index: a scan of the whole table per
    /// observation.)
    fn write(&mut self, op: &BulkOperation) -> Result<()> {
        let at = op.at.to_string();
        self.insert_op
            .execute(params![
                op.op_id,
                op.action_kind,
                op.canonical_payload,
                self.receiver,
                at
            ])
            .map_err(|e| match e.sqlite_error().map(|f| f.extended_code) {
                Some(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY) => {
                    crate::error::Error::from(Refusal::DuplicateOperation(op.op_id.clone()))
                }
                _ => sql_error(self.path, e).into(),
            })?;
        self.insert_dispatch
            .execute(params![self.next_dispatch, op.op_id])
            .at(self.path)?;
        self.next_dispatch += 1;
        let kinds = [EntryKind::Prepared, EntryKind::Dispatched];
        let sealed = seal_generated(&mut self.head, op, self.receiver);
        for (kind, sealed) in kinds.into_iter().zip(sealed) {
            self.entry(kind, &op.op_id, &sealed)?;
        }
        if let Some(observation) = &op.observation {
            let new = NewObservation {
                op_id: &op.op_id,
                by: &observation.by,
                at: observation.at,
                snapshot: &observation.snapshot,
                verdict: observation.verdict,
                provenance: &observation.provenance,
            };
            let sealed = self.head.seal(
                EntryKind::Observed,
                Some(&op.op_id),
                crate::audit::observed(&new),
            );
            self.head.after(&sealed);
            self.entry(EntryKind::Observed, &op.op_id, &sealed)?;
            let db = &mut Sqlite {
                conn: self.conn,
                path: self.path,
            };
            insert_observation_row(db, sealed.seq, &new)?;
            let verdict = observation.verdict.as_str();
            self.observe_op
                .execute(params![sealed.seq, verdict, op.op_id])
                .at(self.path)?;
        }
        Ok(())
    }

    fn entry(&mut self, kind: EntryKind, op_id: &str, sealed: &Sealed) -> Result<()> {
        self.insert_entry
            .execute(params![
                sealed.seq,
                kind.as_str(),
                op_id,
                sealed.entry,
                sealed.prev_hash,
                sealed.hash
            ])
            .map(drop)
            .at(self.path)?;
        Ok(())
    }
}

impl ReceiverStore {
    /// Appends generated effects to the ledger in one transaction, each with
    /// the deterministic id of its row. If any effect is for a closed
    /// operation the whole batch is refused (`operation_closed`).
    ///
    /// The close barrier's trigger costs a statement journal and a lookup
    /// per row, so the transaction drops it, checks the chunk against the
    /// tombstones once after the inserts (one index probe per closed
    /// operation) and creates it again before it commits: no other
    /// connection ever sees the schema without it.
    ///
    /// `started` runs once the transaction holds the write lock, with the
    /// `seq` (so the effect id) the first effect will have; `commit_if`
    /// runs after the last insert, before the commit. When either says no,
    /// the batch rolls back and nothing is appended (`Ok(None)`). The demo
    /// uses them to tell the outbox the effect ids its observations name,
    /// and to commit the receiver's rows only once the sender's rows,
    /// written in parallel, have committed.
    pub fn append_effects(
        &mut self,
        effects: impl IntoIterator<Item = BulkEffect>,
        started: impl FnOnce(i64) -> bool,
        commit_if: impl FnOnce() -> bool,
    ) -> Result<Option<Appended>> {
        let path = self.path().to_path_buf();
        with_bulk_cache(self.conn_mut(), &path, |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .at(&path)?;
            let first: i64 = tx
                .query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM effects", [], |r| {
                    r.get(0)
                })
                .at(&path)?;
            if !started(first) {
                return Ok(None);
            }
            tx.execute_batch("DROP TRIGGER effects_refuse_closed")
                .at(&path)?;
            let next = insert_effects(&tx, &path, first, effects)?;
            refuse_closed_since(&tx, &path, first)?;
            tx.execute_batch(REFUSE_CLOSED).at(&path)?;
            if !commit_if() {
                return Ok(None);
            }
            tx.commit().at(&path)?;
            let count = u64::try_from(next - first).unwrap_or(0);
            Ok(Some(Appended {
                count,
                seq_range: (count > 0).then_some((first, next - 1)),
            }))
        })
    }
}

/// Inserts `effects` from `seq` on; returns the `seq` after the last.
fn insert_effects(
    conn: &Connection,
    path: &Path,
    mut seq: i64,
    effects: impl IntoIterator<Item = BulkEffect>,
) -> Result<i64> {
    let mut insert = conn
        .prepare(
            "INSERT INTO effects
                 (seq, effect_id, op_id, action_kind, compensates_effect_id, payload)
             VALUES (?1, ?2, ?3, ?4, NULL, ?5)",
        )
        .at(path)?;
    for effect in effects {
        insert
            .execute(params![
                seq,
                effect_id_for(seq),
                effect.op_id,
                effect.action_kind,
                effect.canonical_payload
            ])
            .at(path)?;
        seq += 1;
    }
    Ok(seq)
}

/// The close barrier for the rows from `first` on: `operation_closed` if
/// any of them is for an operation with a tombstone.
fn refuse_closed_since(conn: &Connection, path: &Path, first: i64) -> Result<()> {
    let closed: Option<String> = conn
        .query_row(
            "SELECT c.op_id FROM closed_ops c
             WHERE EXISTS (SELECT 1 FROM effects e WHERE e.op_id = c.op_id AND e.seq >= ?1)
             LIMIT 1",
            [first],
            |r| r.get(0),
        )
        .optional()
        .at(path)?;
    match closed {
        Some(op_id) => Err(Refusal::OperationClosed(op_id).into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;
    use crate::settings::OpenOptions;

    fn effect(op_id: &str) -> BulkEffect {
        BulkEffect {
            op_id: op_id.to_string(),
            action_kind: "send_email".to_string(),
            canonical_payload: "{}".to_string(),
        }
    }

    /// The close barrier holds for generated effects without its trigger:
    /// the chunk is refused as a whole, and the trigger is back afterwards.
    #[test]
    fn a_generated_chunk_with_an_effect_for_a_closed_op_is_refused_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receiver.sqlite");
        let mut store = ReceiverStore::open(
            &path,
            OpenOptions::default().creating(),
            Timestamp::from_millis(0),
        )
        .unwrap();
        store
            .conn()
            .execute(
                "INSERT INTO closed_ops (op_id, authorized_by, effects_at_close)
                 VALUES ('op-closed', 'rosa', 0)",
                [],
            )
            .unwrap();
        let chunk = [effect("ext-a"), effect("op-closed"), effect("ext-b")];
        let refused = store.append_effects(chunk, |_| true, || true).unwrap_err();
        assert_eq!(
            refused.refusal().map(|r| r.code()),
            Some("operation_closed")
        );
        assert_eq!(store.effect_count(None).unwrap(), 0);
        let appended = store
            .append_effects([effect("ext-a"), effect("ext-b")], |_| true, || true)
            .unwrap()
            .unwrap();
        assert_eq!((appended.count, appended.seq_range), (2, Some((1, 2))));
        let trigger: i64 = store
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'effects_refuse_closed'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(trigger, 1);
    }
}
