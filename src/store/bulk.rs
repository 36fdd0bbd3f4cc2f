//! Bulk writes for generated workspaces (`recon demo --ops N`): many rows in
//! one large transaction per call, through one prepared statement each.
//!
//! The normal write paths commit once per step, because each step is a
//! decision that must be durable on its own. Generated load is not a
//! decision, and 100,000 single-row transactions under `synchronous = FULL`
//! would spend minutes in fsync. The rows still go through plain `INSERT`s,
//! so every trigger sees them: `state_counts` stays right, and the receiver's
//! close barrier refuses a generated effect for a closed operation exactly as
//! it refuses a real one. Each call's rows commit or roll back as a whole;
//! the demo makes one call per chunk of 10,000 operations.
//!
//! Payloads arrive as canonical JSON text (what [`crate::domain::canonical_json`]
//! would print) so that a million rows are not parsed and printed again; the
//! generator in `crate::demo` has a test proving its text is canonical.
//!
//! Each generated operation is journaled as what it stands for, a prepare
//! and a dispatch: two chained entries in the same transaction as its rows,
//! sealed from that text too ([`crate::audit::seal_generated`]).

use super::{journal, sql_error, SqlContext};
use crate::audit::{seal_generated, Checkpoint, EntryKind};
use crate::domain::{effect_id_for, Appended, BulkEffect, BulkOperation};
use crate::error::{Refusal, Result, StoreError};
use crate::store::{BulkLoad, ReceiverStore, SqliteSender};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// Generated evidence is written to the built-in ledger, so generated
/// operations route there.
const GENERATED_RECEIVER: &str = "builtin";

/// The page cache a bulk transaction works with (64 MiB), so index pages
/// stay in memory instead of being spilled and re-read.
const BULK_CACHE_KIB: i64 = 64 * 1024;

/// Runs `body` with a larger page cache, then restores the previous size.
fn with_bulk_cache<T>(
    conn: &mut Connection,
    path: &std::path::Path,
    body: impl FnOnce(&mut Connection) -> Result<T>,
) -> Result<T> {
    let previous: i64 = conn
        .query_row("PRAGMA cache_size", [], |r| r.get(0))
        .at(path)?;
    conn.execute_batch(&format!("PRAGMA cache_size = -{BULK_CACHE_KIB}"))
        .at(path)?;
    let result = body(conn);
    conn.execute_batch(&format!("PRAGMA cache_size = {previous}"))
        .at(path)?;
    result
}

impl BulkLoad for SqliteSender {
    /// The greatest op id in `low..=high` whose text matches the GLOB
    /// `pattern`: one step down the primary key, whatever the table size.
    fn last_op_id_between(
        &self,
        low: &str,
        high: &str,
        pattern: &str,
    ) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT op_id FROM operations
                 WHERE op_id >= ?1 AND op_id <= ?2 AND op_id GLOB ?3
                 ORDER BY op_id DESC LIMIT 1",
            )
            .and_then(|mut s| s.query_row([low, high, pattern], |r| r.get(0)).optional())
            .at(self.path())
    }

    /// Inserts generated operations as dispatched originals whose receipt
    /// was lost, in one transaction. An op id that already exists rolls the
    /// whole batch back with `duplicate_operation`.
    fn insert_lost_receipts(
        &mut self,
        ops: &mut dyn Iterator<Item = BulkOperation>,
    ) -> Result<u64> {
        let path = self.path().to_path_buf();
        with_bulk_cache(self.conn_mut(), &path, |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .at(&path)?;
            let mut next_dispatch: i64 = tx
                .query_row(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_log",
                    [],
                    |r| r.get(0),
                )
                .at(&path)?;
            let mut head = journal::head(&tx, &path)?;
            let mut count = 0u64;
            {
                let mut insert_op = tx
                    .prepare(
                        "INSERT INTO operations
                             (op_id, kind, action_kind, payload, state, version, receiver)
                         VALUES (?1, 'original', ?2, ?3, 'unknown', 2, ?4)",
                    )
                    .at(&path)?;
                let mut insert_dispatch = tx
                    .prepare(
                        "INSERT INTO dispatch_log (seq, op_id, from_version)
                         VALUES (?1, ?2, 1)",
                    )
                    .at(&path)?;
                let mut insert_entry = tx
                    .prepare(
                        "INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .at(&path)?;
                for op in ops {
                    insert_generated(
                        &path,
                        (&mut insert_op, &mut insert_dispatch, &mut insert_entry),
                        &mut head,
                        &op,
                        next_dispatch,
                    )?;
                    next_dispatch += 1;
                    count += 1;
                }
            }
            tx.commit().at(&path)?;
            Ok(count)
        })
    }
}

/// One generated operation's rows: the operation, its dispatch record, and
/// its `prepared` and `dispatched` journal entries, chained onto `head`.
fn insert_generated(
    path: &std::path::Path,
    (insert_op, insert_dispatch, insert_entry): (
        &mut rusqlite::Statement<'_>,
        &mut rusqlite::Statement<'_>,
        &mut rusqlite::Statement<'_>,
    ),
    head: &mut Checkpoint,
    op: &BulkOperation,
    dispatch_seq: i64,
) -> Result<()> {
    insert_op
        .execute(params![
            op.op_id,
            op.action_kind,
            op.canonical_payload,
            GENERATED_RECEIVER
        ])
        .map_err(|e| match e.sqlite_error().map(|f| f.extended_code) {
            Some(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY) => {
                crate::error::Error::from(Refusal::DuplicateOperation(op.op_id.clone()))
            }
            _ => sql_error(path, e).into(),
        })?;
    insert_dispatch
        .execute(params![dispatch_seq, op.op_id])
        .at(path)?;
    let kinds = [EntryKind::Prepared, EntryKind::Dispatched];
    for (kind, sealed) in kinds
        .into_iter()
        .zip(seal_generated(head, op, GENERATED_RECEIVER))
    {
        insert_entry
            .execute(params![
                sealed.seq,
                kind.as_str(),
                op.op_id,
                sealed.entry,
                sealed.prev_hash,
                sealed.hash
            ])
            .at(path)?;
    }
    Ok(())
}

impl ReceiverStore {
    /// Appends generated effects to the ledger in one transaction, each with
    /// the deterministic id of its row. The close barrier's trigger refuses
    /// the whole batch if any effect is for a closed operation.
    ///
    /// `commit_if` runs after the last insert, before the commit: when it
    /// says no, the batch rolls back and nothing is appended (`Ok(None)`).
    /// The demo uses it to commit the receiver's rows only once the sender's
    /// rows, written in parallel, have committed.
    pub fn append_effects(
        &mut self,
        effects: impl IntoIterator<Item = BulkEffect>,
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
            let mut seq = first;
            {
                let mut insert = tx
                    .prepare(
                        "INSERT INTO effects
                             (seq, effect_id, op_id, action_kind, compensates_effect_id, payload)
                         VALUES (?1, ?2, ?3, ?4, NULL, ?5)",
                    )
                    .at(&path)?;
                for effect in effects {
                    insert
                        .execute(params![
                            seq,
                            effect_id_for(seq),
                            effect.op_id,
                            effect.action_kind,
                            effect.canonical_payload
                        ])
                        .map_err(|e| match &e {
                            rusqlite::Error::SqliteFailure(_, Some(m))
                                if m == "operation_closed" =>
                            {
                                crate::error::Error::from(Refusal::OperationClosed(
                                    effect.op_id.clone(),
                                ))
                            }
                            _ => sql_error(&path, e).into(),
                        })?;
                    seq += 1;
                }
            }
            if !commit_if() {
                return Ok(None);
            }
            tx.commit().at(&path)?;
            let count = u64::try_from(seq - first).unwrap_or(0);
            Ok(Some(Appended {
                count,
                seq_range: (count > 0).then_some((first, seq - 1)),
            }))
        })
    }
}
