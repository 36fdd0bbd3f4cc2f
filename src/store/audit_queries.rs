//! The reads behind `recon verify`, `recon export` and `recon checkpoint`:
//! the journal and the tables exactly as SQLite holds them, streamed.
//!
//! These deliberately do not go through the typed readers of
//! [`super::sender`], which refuse a row that does not parse: a row an
//! attacker edited is exactly the row verification must report, so every
//! column is read as whatever SQLite value it holds and handed to
//! [`crate::audit`] as such. Two passes run side by side, each in one read
//! transaction of its own connection, so a write committing meanwhile
//! cannot look like damage: the chain in `seq` order, and the projection
//! as a merge join of the journal in `(op_id, seq)` order with every table
//! in `op_id` order, each an index walk handed to the audit layer as an
//! iterator of rows ([`crate::audit::replay_operations`], which merges and
//! replays them on two threads; its module states the key order every
//! store must keep, byte order, which SQLite's `BINARY` collation is).
//! Only a few batches of operations' rows are in memory at a time,
//! whatever the journal's length.

use super::{journal, sender, upgrade, SqlContext};
use crate::audit::meta::META;
use crate::audit::{
    replay_operations, Checkpoint, Projection, Projector, Row, StoredEntry, Table, VerifyReport,
    VerifyRequest, Walk, Walked, JOURNAL, OP_STREAMS, RECEIVERS, ROUTES, STATE_COUNTS,
};
use crate::audit::{
    COMPENSATED_EFFECTS, COMPENSATED_EFFECTS_WHERE, COMPENSATION_ROUTES, COMPENSATION_ROUTES_WHERE,
};
use crate::error::StoreError;
use crate::store::{JournalAudit, SqliteSender};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Rows, Statement};
use std::path::Path;
use std::time::Duration;

/// Appends one SQLite value to a row, as it is.
fn push(row: &mut Row, value: ValueRef<'_>) {
    match value {
        ValueRef::Null => row.push_null(),
        ValueRef::Integer(i) => row.push_integer(i),
        ValueRef::Real(x) => row.push_real(x),
        ValueRef::Text(text) => match std::str::from_utf8(text) {
            Ok(text) => row.push_text(text),
            Err(_) => row.push_text(&String::from_utf8_lossy(text)),
        },
        ValueRef::Blob(bytes) => row.push_blob(bytes),
    }
}

/// The text of a column, or why it is not text.
fn text_of<'r>(
    row: &'r rusqlite::Row<'_>,
    i: usize,
    name: &str,
) -> rusqlite::Result<Result<&'r str, String>> {
    Ok(match row.get_ref(i)? {
        ValueRef::Text(bytes) => {
            std::str::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8"))
        }
        _ => Err(format!("{name} is not text")),
    })
}

/// Walks the chain in `seq` order, handing each entry to `each` as well
/// (with its content only when `with_entry`: the walk needs only the
/// links).
fn walk_chain(
    conn: &Connection,
    path: &Path,
    walk: &mut Walk<'_>,
    with_entry: bool,
    mut each: impl FnMut(&StoredEntry<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let entry = if with_entry { "entry" } else { "''" };
    let mut statement = conn
        .prepare(&format!(
            "SELECT seq, prev_hash, hash, {entry} FROM journal ORDER BY seq"
        ))
        .at(path)?;
    let mut rows = statement.query([]).at(path)?;
    while let Some(row) = rows.next().at(path)? {
        let mut problems = Vec::new();
        let mut text = |i, name| -> Result<&str, StoreError> {
            Ok(text_of(row, i, name).at(path)?.unwrap_or_else(|why| {
                problems.push(why);
                ""
            }))
        };
        let prev_hash = text(1, "prev_hash")?;
        let hash = text(2, "hash")?;
        let entry = text(3, "entry")?;
        let stored = StoredEntry {
            // The table's INTEGER PRIMARY KEY: SQLite guarantees an integer.
            seq: row.get(0).at(path)?,
            entry,
            prev_hash,
            hash,
            malformed: (!problems.is_empty()).then(|| problems.join("; ")),
        };
        walk.push(&stored);
        each(&stored)?;
    }
    Ok(())
}

/// The most columns a table of the projection has (`operations`: 17).
const MAX_COLUMNS: usize = 20;

/// One ordered statement's rows, as the audit layer reads them: each
/// SQLite value as it is, its text sized first, so a row is two
/// allocations.
struct SqliteRows<'s> {
    rows: Rows<'s>,
    width: usize,
    path: &'s Path,
}

impl<'s> SqliteRows<'s> {
    fn new(
        statement: &'s mut Statement<'_>,
        table: &Table,
        path: &'s Path,
    ) -> Result<Self, StoreError> {
        Ok(SqliteRows {
            rows: statement.query([]).at(path)?,
            width: table.columns.len(),
            path,
        })
    }

    fn read(row: &rusqlite::Row<'_>, width: usize) -> rusqlite::Result<Row> {
        let mut values = [ValueRef::Null; MAX_COLUMNS];
        let mut text = 0;
        for (i, value) in values.iter_mut().enumerate().take(width) {
            *value = row.get_ref(i)?;
            match value {
                ValueRef::Text(t) => text += t.len(),
                ValueRef::Blob(b) => text += b.len() * 2,
                _ => {}
            }
        }
        let mut cells = Row::with_capacity(width, text);
        for value in &values[..width] {
            push(&mut cells, *value);
        }
        Ok(cells)
    }
}

impl Iterator for SqliteRows<'_> {
    type Item = Result<Row, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (width, path) = (self.width, self.path);
        match self.rows.next().at(path) {
            Ok(Some(row)) => Some(SqliteRows::read(row, width).at(path)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

pub(super) fn select(table: &Table, rest: &str) -> String {
    format!(
        "SELECT {} FROM {} {rest}",
        table.columns.join(", "),
        table.name
    )
}

/// A small table read whole (receivers, routes, state counts, and the
/// entries about receivers).
fn all_rows(
    conn: &Connection,
    path: &Path,
    table: Table,
    rest: &str,
) -> Result<Vec<Row>, StoreError> {
    let mut statement = conn.prepare(&select(&table, rest)).at(path)?;
    let rows = SqliteRows::new(&mut statement, &table, path)?;
    rows.collect()
}

/// How each of [`OP_STREAMS`] is read, in its order: by key, in byte
/// order (the columns' `BINARY` collation), then in the order of appending.
pub(super) const OP_ORDERS: [&str; 12] = [
    "WHERE op_id IS NOT NULL ORDER BY op_id, seq",
    "ORDER BY op_id",
    "ORDER BY op_id, from_version, seq",
    "ORDER BY op_id, seq",
    "ORDER BY compensation_op_id, rowid",
    "ORDER BY op_id, journal_seq",
    "ORDER BY op_id, seq",
    "ORDER BY op_id, seq",
    "ORDER BY op_id, seq",
    "ORDER BY op_id, seq",
    "ORDER BY op_id, seq",
    "ORDER BY op_id, seq",
];

/// Replays the journal against the tables: the receivers first, then the
/// operations, merged from one index walk per table
/// ([`replay_operations`]), then the state counts and the meta.
fn project(
    conn: &Connection,
    path: &Path,
    ledger_id: Option<&str>,
) -> Result<Projection, StoreError> {
    let mut projector = Projector::after_upgrade(super::upgrade::recorded(conn, path)?)
        .older_schema_through(super::upgrade::older_schema_through(conn, path)?)
        .routes_fixed_through(super::upgrade::routes_fixed_through(conn, path)?);
    projector.receivers(
        &all_rows(conn, path, JOURNAL, "WHERE op_id IS NULL ORDER BY seq")?,
        &all_rows(conn, path, RECEIVERS, "ORDER BY name")?,
        &all_rows(conn, path, ROUTES, "ORDER BY action_kind")?,
    );
    let mut statements = OP_STREAMS
        .iter()
        .zip(OP_ORDERS)
        .map(|(table, order)| conn.prepare(&select(table, order)).at(path))
        .collect::<Result<Vec<_>, _>>()?;
    let streams = statements
        .iter_mut()
        .zip(&OP_STREAMS)
        .map(|(statement, table)| SqliteRows::new(statement, table, path))
        .collect::<Result<Vec<_>, _>>()?;
    let mut projector = replay_operations(projector, streams)?;
    projector.compensation_routes(&all_rows(
        conn,
        path,
        COMPENSATION_ROUTES,
        COMPENSATION_ROUTES_WHERE,
    )?);
    projector.compensated_effects(&all_rows(
        conn,
        path,
        COMPENSATED_EFFECTS,
        COMPENSATED_EFFECTS_WHERE,
    )?);
    projector.state_counts(&all_rows(conn, path, STATE_COUNTS, "ORDER BY state")?);
    projector.meta(&all_rows(conn, path, META, "ORDER BY key")?, ledger_id);
    Ok(projector.finish())
}

/// What `export` does with each entry as the walk passes it.
pub(super) type Each<'e> = &'e mut (dyn FnMut(&StoredEntry<'_>) -> Result<(), StoreError> + Send);

impl SqliteSender {
    /// A second, read-only connection to the outbox with the first one's
    /// busy timeout: the chain walk's own, so it reads beside the replay.
    fn second_reader(&self) -> Result<Connection, StoreError> {
        let path = self.path();
        let timeout: i64 = self
            .conn()
            .query_row("PRAGMA busy_timeout", [], |r| r.get(0))
            .at(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .at(path)?;
        conn.busy_timeout(Duration::from_millis(u64::try_from(timeout).unwrap_or(0)))
            .at(path)?;
        Ok(conn)
    }

    /// Walks the chain (handing each entry to `each`) and replays the
    /// projection, each pass in one read transaction of its own connection,
    /// side by side. Each pass is consistent in itself, which is all either
    /// needs: the walk judges the journal alone, the replay the journal and
    /// the tables together. (An act committing between their starts only
    /// makes `rows` and `journal_entries` differ.)
    fn audit(
        &self,
        request: VerifyRequest<'_>,
        ledger_id: Option<&str>,
        each: Option<Each<'_>>,
    ) -> Result<VerifyReport, StoreError> {
        let path = self.path();
        let walker = self.second_reader()?;
        let tx = self.conn().unchecked_transaction().at(path)?;
        let (walked, projection) = std::thread::scope(|scope| {
            let walked = scope.spawn(move || -> Result<Walked, StoreError> {
                let tx = walker.unchecked_transaction().at(path)?;
                let mut walk = Walk::new(request.checkpoint, request.against);
                let with_entry = each.is_some();
                let mut each = each;
                walk_chain(&tx, path, &mut walk, with_entry, |entry| match &mut each {
                    Some(each) => each(entry),
                    None => Ok(()),
                })?;
                tx.finish().at(path)?;
                Ok(walk.finish())
            });
            let projection = project(&tx, path, ledger_id);
            let walked = walked
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (walked, projection)
        });
        let (walked, projection) = (walked?, projection?);
        let schema = upgrade::schema_differences(&tx, path, sender::ROLE)?;
        tx.finish().at(path)?;
        Ok(VerifyReport::new(walked, projection, schema))
    }
}

impl JournalAudit for SqliteSender {
    fn verify_journal(
        &self,
        request: VerifyRequest<'_>,
        ledger_id: Option<&str>,
    ) -> Result<VerifyReport, StoreError> {
        self.audit(request, ledger_id, None)
    }

    fn export_journal(
        &self,
        ledger_id: Option<&str>,
        sink: &mut (dyn FnMut(&str) -> std::io::Result<()> + Send),
    ) -> Result<VerifyReport, StoreError> {
        self.audit(
            VerifyRequest::default(),
            ledger_id,
            Some(&mut |entry| Ok(sink(&entry.export_line())?)),
        )
    }

    fn journal_head(&self) -> Result<Checkpoint, StoreError> {
        journal::head(&mut self.db())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_verify_reads_fits_the_row_reader() {
        let tables = OP_STREAMS
            .iter()
            .chain([&RECEIVERS, &ROUTES, &STATE_COUNTS, &META]);
        for table in tables {
            assert!(table.columns.len() <= MAX_COLUMNS, "{}", table.name);
        }
    }
}
