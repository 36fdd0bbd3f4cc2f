//! Upgrading a file an older recon wrote (schema 4, wave 1, schema 5,
//! wave 2, or schema 6, wave 3) to this build's schema, in place, in one
//! transaction.
//!
//! The upgrade runs when a file is opened, before anything reads it, with
//! the time the caller passes down (the workspace's clock; nothing here
//! reads one). It is all or nothing: one `BEGIN IMMEDIATE` transaction
//! rebuilds the tables whose definition changed, creates the new tables,
//! indexes and triggers, records the time in `meta` and only then sets
//! `user_version`; a failure or a death anywhere before the commit leaves
//! the file at its old schema, readable, and upgraded by the next open. Two
//! processes opening the same old file upgrade it once: the second finds
//! the version changed once it holds the write lock, and does nothing.
//!
//! The target is this build's creation SQL itself, not a copy of it: it
//! is run on an in-memory database, whose `sqlite_master` gives each
//! table, index and trigger as SQLite stores it. A changed table is renamed
//! aside, created again from that text and its rows copied; every object
//! missing is created from it; and before the commit the file's objects
//! must be exactly those, text for text, or nothing is kept. So an upgraded
//! file has the schema a fresh one has, and a file that only says it is
//! schema 4 is refused untouched.
//!
//! An operation, evidence row or close that predates times gets the time
//! of the upgrade (SPEC 9). Their journal entries carry no `at`; `meta`
//! records the upgrade time and the last entry written before it
//! ([`recorded`]), and `verify` takes that time for those entries only.

use super::{Role, SqlContext, SCHEMA_VERSION};
use crate::audit::meta::{UPGRADED_AT, UPGRADED_THROUGH_SEQ};
use crate::audit::{Difference, SchemaDifference, Upgraded};
use crate::domain::Timestamp;
use crate::error::StoreError;
use crate::faults::{crash_point, CrashPoint};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};
use std::path::Path;

/// The schemas this build upgrades from.
pub(crate) const UPGRADABLE_VERSIONS: [i64; 3] = [4, 5, 6];

/// A table whose definition changed: created again under its new one, and
/// its rows copied by `copy` from `upgrade_old` (the table as it was),
/// with `?1` the time of the upgrade. `added` names the new columns: the
/// old table must have exactly the others, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rebuild {
    pub table: &'static str,
    pub added: &'static [&'static str],
    pub copy: &'static str,
}

/// How a role's file goes from an older schema to this one: the tables
/// rebuilt, in order, and the statement that records the upgrade in
/// `meta` (`?1` its time; empty for none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steps {
    pub rebuild: &'static [Rebuild],
    pub record: &'static str,
}

/// What a role does last, once the file has this schema and before the
/// version is set, given the version it upgrades from: the outbox
/// journals the registration of the built-in ledger its operations were
/// routed to implicitly before schema 6.
pub(crate) type Finish = fn(&Transaction<'_>, &Path, Timestamp, i64) -> Result<(), StoreError>;

/// A schema object as `sqlite_master` holds it: type, name, table, SQL.
type Object = (String, String, String, String);

/// Upgrades the file from schema 4 in one transaction (see the module
/// docs). Foreign keys are switched off for it (a table is dropped and
/// created again under their references, and they cannot be switched
/// inside a transaction); `open_database` switches them on after.
pub(crate) fn upgrade(
    conn: &mut Connection,
    path: &Path,
    role: Role,
    at: Timestamp,
) -> Result<(), StoreError> {
    // Renaming a table aside must not rewrite the other tables' references
    // to it: they are to name the table created again under the old name.
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = OFF; PRAGMA legacy_alter_table = ON;",
    )
    .at(path)?;
    let result = upgrade_in(conn, path, role, at);
    conn.execute_batch("PRAGMA legacy_alter_table = OFF;")
        .at(path)?;
    result
}

fn upgrade_in(
    conn: &mut Connection,
    path: &Path,
    role: Role,
    at: Timestamp,
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .at(path)?;
    if version == SCHEMA_VERSION {
        // Another process upgraded it between our first look and the lock.
        return Ok(());
    }
    let not_upgradable = |why: String| StoreError::NotUpgradable {
        path: path.to_path_buf(),
        found: version,
        why,
    };
    let steps = match version {
        4 => role.from_four,
        5 => role.from_five,
        6 => role.from_six,
        _ => {
            return Err(StoreError::IncompatibleSchema {
                path: path.to_path_buf(),
                found: version,
                expected: SCHEMA_VERSION,
            })
        }
    };
    let wanted = target_objects(path, role)?;
    let time = at.to_string();
    for rebuild in steps.rebuild {
        rebuild_table(&tx, path, rebuild, &wanted, &time).map_err(|e| match e {
            Rebuilt::Shape(why) => not_upgradable(why),
            Rebuilt::Store(e) => e,
        })?;
    }
    create_missing(&tx, path, &wanted)?;
    let have = objects(&tx, path)?;
    if let Some(why) = first_difference(&wanted, &have) {
        return Err(not_upgradable(why));
    }
    let dangling: Option<String> = tx
        .query_row("SELECT \"table\" FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .optional()
        .at(path)?;
    if let Some(table) = dangling {
        return Err(not_upgradable(format!(
            "a row of {table} names a row that does not exist"
        )));
    }
    if !steps.record.is_empty() {
        tx.execute(steps.record, [&time]).at(path)?;
    }
    (role.finish)(&tx, path, at, version)?;
    crash_point(CrashPoint::UpgradeBeforeCommit);
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
        .at(path)?;
    tx.commit().at(path)
}

/// Why a rebuild failed: the old table is not schema 4's, or storage.
enum Rebuilt {
    Shape(String),
    Store(StoreError),
}

impl From<StoreError> for Rebuilt {
    fn from(e: StoreError) -> Self {
        Rebuilt::Store(e)
    }
}

/// Renames the table aside, creates it again from the target's text,
/// copies its rows and drops the old one. Its indexes and triggers go
/// first (they would follow it aside); the target's are created later,
/// after every copy, so that no trigger fires on copied rows.
fn rebuild_table(
    tx: &Transaction<'_>,
    path: &Path,
    rebuild: &Rebuild,
    wanted: &[Object],
    time: &str,
) -> Result<(), Rebuilt> {
    let Some(create) = wanted
        .iter()
        .find(|(kind, name, _, _)| kind == "table" && name == rebuild.table)
    else {
        return Err(Rebuilt::Shape(format!(
            "no table {} to rebuild",
            rebuild.table
        )));
    };
    let old = columns(tx, path, rebuild.table)?;
    let new = columns_of_sql(path, &create.3, rebuild.table)?;
    let expected: Vec<&String> = new
        .iter()
        .filter(|c| !rebuild.added.contains(&c.as_str()))
        .collect();
    if old.iter().collect::<Vec<_>>() != expected {
        return Err(Rebuilt::Shape(format!(
            "its table {} has the columns ({}), not those of its schema",
            rebuild.table,
            old.join(", ")
        )));
    }
    for (kind, name, _, sql) in objects(tx, path)?
        .into_iter()
        .filter(|(kind, _, table, _)| table == rebuild.table && kind != "table")
    {
        // Dropped with the table and made again from the target's text: so
        // one the target also has must already be that text, or a trigger
        // made a no-op behind recon's back would be healed unseen.
        if let Some(target) = wanted.iter().find(|o| o.0 == kind && o.1 == name) {
            if target.3 != sql {
                return Err(Rebuilt::Shape(format!("its {kind} {name} differs")));
            }
        }
        tx.execute_batch(&format!("DROP {kind} \"{name}\""))
            .at(path)?;
    }
    tx.execute_batch(&format!(
        "ALTER TABLE \"{}\" RENAME TO upgrade_old; {}; ",
        rebuild.table, create.3
    ))
    .at(path)?;
    tx.execute(rebuild.copy, [time]).at(path)?;
    tx.execute_batch("DROP TABLE upgrade_old").at(path)?;
    Ok(())
}

/// Creates every target object the file lacks: tables first, then
/// indexes and triggers, each in the order the creation SQL has them.
fn create_missing(tx: &Transaction<'_>, path: &Path, wanted: &[Object]) -> Result<(), StoreError> {
    let have = objects(tx, path)?;
    let missing = |object: &&Object| !have.iter().any(|o| o.1 == object.1);
    let tables = wanted.iter().filter(|o| o.0 == "table");
    let others = wanted.iter().filter(|o| o.0 != "table");
    for (_, _, _, sql) in tables.chain(others).filter(missing) {
        tx.execute_batch(sql).at(path)?;
    }
    Ok(())
}

/// The first object that differs between the target and the file, said
/// for a person; `None` when they are the same.
fn first_difference(wanted: &[Object], have: &[Object]) -> Option<String> {
    differences(wanted, have).first().map(ToString::to_string)
}

/// Every object that differs between the target and the file: the
/// target's missing or different, in its order, then the file's unknown
/// to it, in the file's.
fn differences(wanted: &[Object], have: &[Object]) -> Vec<SchemaDifference> {
    let find = |list: &[Object], name: &str| list.iter().position(|o| o.1 == name);
    let difference = |object: &Object, difference| SchemaDifference {
        kind: object.0.clone(),
        name: object.1.clone(),
        difference,
    };
    let mut out = Vec::new();
    for object in wanted {
        match find(have, &object.1) {
            Some(i) if have[i] == *object => {}
            Some(_) => out.push(difference(object, Difference::Differs)),
            None => out.push(difference(object, Difference::Missing)),
        }
    }
    for object in have.iter().filter(|o| find(wanted, &o.1).is_none()) {
        out.push(difference(object, Difference::Unknown));
    }
    out
}

/// How a file's tables, indexes and triggers differ from those this build
/// creates for its role (`verify` holds the outbox to them).
pub(crate) fn schema_differences(
    conn: &Connection,
    path: &Path,
    role: Role,
) -> Result<Vec<SchemaDifference>, StoreError> {
    Ok(differences(
        &target_objects(path, role)?,
        &objects(conn, path)?,
    ))
}

/// This build's objects for the role, as SQLite stores them: its creation
/// SQL run on an in-memory database.
fn target_objects(path: &Path, role: Role) -> Result<Vec<Object>, StoreError> {
    let scratch = Connection::open_in_memory().at(path)?;
    scratch.execute_batch(role.schema).at(path)?;
    objects(&scratch, path)
}

/// The tables, indexes and triggers a database holds, in creation order
/// (SQLite's own objects, such as automatic indexes, left out).
fn objects(conn: &Connection, path: &Path) -> Result<Vec<Object>, StoreError> {
    conn.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_master
         WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
         ORDER BY rowid",
    )
    .and_then(|mut s| {
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect()
    })
    .at(path)
}

fn columns(conn: &Connection, path: &Path, table: &str) -> Result<Vec<String>, StoreError> {
    conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
        .and_then(|mut s| s.query_map([table], |r| r.get(0))?.collect())
        .at(path)
}

/// The columns a `CREATE TABLE` statement defines.
fn columns_of_sql(path: &Path, sql: &str, table: &str) -> Result<Vec<String>, StoreError> {
    let scratch = Connection::open_in_memory().at(path)?;
    scratch.execute_batch(sql).at(path)?;
    columns(&scratch, path, table)
}

/// The last entry an older schema wrote, as an upgrade recorded it in a
/// sender file's `meta` (`older_schema_through_seq`; 0 for a file created
/// at this schema): what `verify` exempts from the rules that schema did
/// not have (SPEC 12, a closed snapshot is a recorded close).
pub(crate) fn older_schema_through(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    seq_in_meta(conn, path, "older_schema_through_seq")
}

/// The last entry of the upgrade that gave every operation prepared
/// before schema 6 the registration its receiver's name held then, as it
/// recorded it (`routes_fixed_through_seq`; 0 for a file no upgrade fixed,
/// whose such operations name none): what `verify` holds their
/// registration to (SPEC 12, "Routes are fixed").
pub(crate) fn routes_fixed_through(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    seq_in_meta(conn, path, ROUTES_FIXED_THROUGH_SEQ)
}

/// The key of `meta` for [`routes_fixed_through`].
pub(crate) const ROUTES_FIXED_THROUGH_SEQ: &str = "routes_fixed_through_seq";

/// A seq a sender file's `meta` records under `key` (0 for none).
fn seq_in_meta(conn: &Connection, path: &Path, key: &str) -> Result<i64, StoreError> {
    let value: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .at(path)?;
    Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// The upgrade recorded in a sender file's `meta`, if there was one: what
/// `verify` needs to time the entries written before it.
pub(crate) fn recorded(conn: &Connection, path: &Path) -> Result<Option<Upgraded>, StoreError> {
    let value = |key: &str| -> Result<Option<String>, StoreError> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .at(path)
    };
    let (Some(at), Some(through)) = (value(UPGRADED_AT)?, value(UPGRADED_THROUGH_SEQ)?) else {
        return Ok(None);
    };
    // An edited seq that does not parse times no entry: every one written
    // before the upgrade then shows as a mismatch.
    let through_seq = through.parse().unwrap_or(0);
    Ok(Some(Upgraded { at, through_seq }))
}
