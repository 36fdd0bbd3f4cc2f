//! One workspace, one pair: both files of a workspace carry the same
//! workspace id, written when each is created, and the outbox carries the
//! mark that creation completed.
//!
//! Creation goes outbox first (with a fresh id), then the ledger (with the
//! outbox's id), then the completion mark in the outbox. A crash at any
//! point leaves nothing, or an outbox without the mark, which the next
//! command completes (creating or adopting a ledger with no id). Once the
//! mark is there, a missing file is lost, not new, and a file with another
//! id belongs to another workspace (swapped, copied, symlinked, or opened
//! through a stale WAL): both are refused, never recreated.

use super::SqlContext;
use crate::audit::meta::{CREATION_COMPLETE as COMPLETE_KEY, WORKSPACE_ID as ID_KEY};
use crate::error::StoreError;
use rusqlite::{Connection, OptionalExtension};
use std::io::Read;
use std::path::Path;

// Each file's schema includes
// `CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`.

fn get(conn: &Connection, path: &Path, key: &str) -> Result<Option<String>, StoreError> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .at(path)
}

fn set(conn: &Connection, path: &Path, key: &str, value: &str) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)",
        [key, value],
    )
    .map(drop)
    .at(path)
}

/// The file's workspace id; `None` while its creation has not written one.
pub(crate) fn workspace_id(conn: &Connection, path: &Path) -> Result<Option<String>, StoreError> {
    get(conn, path, ID_KEY)
}

pub(crate) fn set_workspace_id(conn: &Connection, path: &Path, id: &str) -> Result<(), StoreError> {
    set(conn, path, ID_KEY, id)
}

/// Whether the outbox's creation completed: its mark, or any act in its
/// journal. An act is journaled only after creation completed (every one
/// opens the pair first), so an outbox with entries and no mark had its
/// mark removed, and its lost ledger must still be refused, never made
/// afresh (`verify` reports the missing mark).
pub(crate) fn creation_complete(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
    if get(conn, path, COMPLETE_KEY)?.is_some() {
        return Ok(true);
    }
    conn.query_row("SELECT EXISTS (SELECT 1 FROM journal)", [], |r| r.get(0))
        .at(path)
}

pub(crate) fn mark_complete(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    set(conn, path, COMPLETE_KEY, "1")
}

/// A new workspace id: 128 random bits as 32 hex digits.
pub(crate) fn new_workspace_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
