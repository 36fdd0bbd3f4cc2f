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

use super::sql::{Appended, Db};
use crate::actlog::ActLine;
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
    )?;
    inserted(db, kind, op_id, sealed);
    Ok(())
}

/// What follows an entry's insert, however it was written (one statement
/// each, or a set of them, `store::sets`): the executor told of it, and
/// its line in the log of acts.
pub(crate) fn inserted(db: &mut dyn Db, kind: EntryKind, op_id: Option<&str>, sealed: &Sealed) {
    db.journaled(Appended {
        seq: sealed.seq,
        hash: sealed.hash.clone(),
        kind: kind.as_str().to_string(),
    });
    if crate::actlog::enabled() {
        crate::actlog::note(logged(db, kind, op_id, sealed));
    }
}

/// The fields of an entry that name the person who typed the act, in the
/// order they are looked for (an entry has one of them at most).
const PERSON: [&str; 5] = ["reviewer", "observed_by", "by", "authorized_by", "approver"];

/// An entry as the log of acts shows it (`crate::actlog`): who did it is
/// the session's login in team mode, else the name typed for the act.
fn logged(db: &dyn Db, kind: EntryKind, op_id: Option<&str>, sealed: &Sealed) -> ActLine {
    let fields: Map<String, Value> = serde_json::from_str(&sealed.entry).unwrap_or_default();
    let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_string);
    let typed = PERSON.iter().find_map(|key| text(key));
    ActLine {
        ts: text("at"),
        act: kind.as_str().to_string(),
        op_id: op_id.map(str::to_string),
        seq: sealed.seq,
        login: db.role().map(str::to_string).or(typed),
        outcome: "committed",
    }
}

/// The field of an entry that names the authenticated role that wrote it
/// (team mode): the database checks it is the session's own.
pub(crate) const ROLE: &str = "role";

/// The roles recorded by the entries that name the operation `op_id` (an
/// entry names the operation it is about: a compensation's approval
/// names the compensation), by seq; entries without a role (a workspace
/// directory's) are left out. The entries of one operation are few, so
/// each is read whole and its role picked out here, the same on every
/// store.
pub(crate) fn roles_of(
    db: &mut dyn Db,
    op_id: &str,
) -> Result<std::collections::BTreeMap<i64, String>, StoreError> {
    let entries = db.query(
        "SELECT seq, entry FROM journal WHERE op_id = ?1 ORDER BY seq",
        &[&op_id],
        |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?)),
    )?;
    Ok(entries
        .into_iter()
        .filter_map(|(seq, entry)| {
            let fields: Map<String, Value> = serde_json::from_str(&entry).ok()?;
            match fields.get(ROLE) {
                Some(Value::String(role)) => Some((seq, role.clone())),
                _ => None,
            }
        })
        .collect())
}

/// The field of a `prepared` entry that keeps where an operation came
/// from (SPEC 13: an MCP key and client).
pub(crate) const ORIGIN: &str = "origin";

/// Where operation `op_id` came from, as its `prepared` entry keeps it;
/// `None` for an operation prepared by a command.
pub(crate) fn origin_of(
    db: &mut dyn Db,
    op_id: &str,
) -> Result<Option<crate::domain::origin::Origin>, StoreError> {
    let entries = db.query(
        "SELECT entry FROM journal WHERE op_id = ?1 AND kind = 'prepared' ORDER BY seq LIMIT 1",
        &[&op_id],
        |r| r.get::<String>(0),
    )?;
    Ok(entries.first().and_then(|entry| {
        let mut fields: Map<String, Value> = serde_json::from_str(entry).ok()?;
        serde_json::from_value(fields.remove(ORIGIN)?).ok()
    }))
}

/// The newest entry that names `op_id`: its seq, its kind, the person
/// and the role it records (one step down the `(op_id, seq)` index).
pub(crate) fn latest_of(
    db: &mut dyn Db,
    op_id: &str,
) -> Result<Option<crate::domain::LatestEntry>, StoreError> {
    let newest = db.query_opt(
        "SELECT seq, kind, entry FROM journal WHERE op_id = ?1 ORDER BY seq DESC LIMIT 1",
        &[&op_id],
        |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?, r.get::<String>(2)?)),
    )?;
    Ok(newest.map(|(seq, kind, entry)| {
        let fields: Map<String, Value> = serde_json::from_str(&entry).unwrap_or_default();
        let text = |v: Option<&str>| v.map(str::to_string);
        crate::domain::LatestEntry {
            seq,
            kind,
            by: text(crate::audit::person_of(&fields)),
            role: text(fields.get(ROLE).and_then(Value::as_str)),
        }
    }))
}

/// Appends one entry after the current head, naming the role that writes
/// it when the store knows one; returns it as written.
pub(crate) fn append(
    db: &mut dyn Db,
    kind: EntryKind,
    op_id: Option<&str>,
    fields: Map<String, Value>,
) -> Result<Sealed, StoreError> {
    let mut head = head(db)?;
    let sealed = seal_after(db, &mut head, kind, op_id, fields);
    insert(db, kind, op_id, &sealed)?;
    Ok(sealed)
}

/// Seals the entry after `head`, naming the role that writes it when the
/// store knows one, and moves `head` past it: what [`append`] writes, and
/// what a set of entries written together (`store::sets`) is sealed by,
/// one after another from the head read once.
pub(crate) fn seal_after(
    db: &dyn Db,
    head: &mut Checkpoint,
    kind: EntryKind,
    op_id: Option<&str>,
    mut fields: Map<String, Value>,
) -> Sealed {
    if let Some(role) = db.role() {
        fields.insert(ROLE.into(), Value::String(role.to_string()));
    }
    let sealed = head.seal(kind, op_id, fields);
    head.after(&sealed);
    sealed
}
