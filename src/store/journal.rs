//! Appending to the journal, always inside the transaction of the act it
//! records, so an act and its entry commit or roll back together.
//!
//! The head (the last entry's seq and hash) is read in that same
//! transaction, which holds the write lock (`SqlStore::write`; SQLite's
//! `BEGIN IMMEDIATE`), so two
//! writers can never chain to the same entry. Should two writers ever read
//! one head (a store without that lock), the journal's `seq` primary key
//! refuses the second insert and its act rolls back whole: the chain
//! cannot fork, the act fails. A store whose writers run side by side must
//! therefore take its head lock first, as every act here takes SQLite's.
//! Written over [`Db`], for every store.

use super::sql::Db;
use crate::audit::{Checkpoint, EntryKind, Sealed};
use crate::error::StoreError;
use serde_json::{Map, Value};

/// The journal's length and the hash of its last entry, as stored.
pub(crate) fn head(db: &mut dyn Db) -> Result<Checkpoint, StoreError> {
    db.query_opt(
        "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1",
        &[],
        |r| {
            Ok(Checkpoint {
                length: r.get(0)?,
                head_hash: r.get(1)?,
            })
        },
    )
    .map(|head| head.unwrap_or_else(Checkpoint::genesis))
}

/// Writes a sealed entry.
pub(crate) fn insert(
    db: &mut dyn Db,
    kind: EntryKind,
    op_id: Option<&str>,
    sealed: &Sealed,
) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[
            &sealed.seq,
            &kind.as_str(),
            &op_id,
            &sealed.entry,
            &sealed.prev_hash,
            &sealed.hash,
        ],
    )
    .map(drop)
}

/// Appends one entry after the current head; returns it as written.
pub(crate) fn append(
    db: &mut dyn Db,
    kind: EntryKind,
    op_id: Option<&str>,
    fields: Map<String, Value>,
) -> Result<Sealed, StoreError> {
    let sealed = head(db)?.seal(kind, op_id, fields);
    insert(db, kind, op_id, &sealed)?;
    Ok(sealed)
}

/// The last entry of the journal after `seq`: what the transaction
/// reading it appended, when `seq` was the head it took, as the kind of
/// that entry and its `(seq, hash)`.
pub(crate) fn last_after(db: &mut dyn Db, seq: i64) -> Result<Option<Appended>, StoreError> {
    db.query_opt(
        "SELECT seq, hash, kind FROM journal WHERE seq > ?1 ORDER BY seq DESC LIMIT 1",
        &[&seq],
        |r| {
            Ok(Appended {
                seq: r.get(0)?,
                hash: r.get(1)?,
                kind: r.get(2)?,
            })
        },
    )
}

/// A journal entry an act appended, sealed: what settles whether the act
/// committed when its COMMIT lost its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Appended {
    pub(crate) seq: i64,
    pub(crate) hash: String,
    pub(crate) kind: String,
}
