//! The reads behind `verify`, `export` and `checkpoint` on a PostgreSQL
//! outbox: the journal and the tables exactly as stored, in ONE snapshot
//! (`REPEATABLE READ, READ ONLY`), so a write committing meanwhile cannot
//! look like damage.
//!
//! The chain is walked as it streams from the server. The projection's
//! per-operation streams ([`OP_STREAMS`]) are read in key order (the
//! schema's `COLLATE "C"` is the byte order `audit::replay_operations`
//! requires), each through a portal of the snapshot's transaction
//! fetched [`BATCH`] rows at a time: a `postgres` row iterator borrows the
//! connection, so twelve cannot be open at once on one, but twelve
//! portals can, and only a few batches are in memory whatever the
//! journal's length. The schema is compared with this build's first
//! (`postgres::shape`), in a transaction of its own.

use super::{db_error, DatabaseUrl, PgSender};
use crate::audit::meta::META;
use crate::audit::{
    replay_operations, Checkpoint, Projector, Row, StoredEntry, Table, VerifyReport, VerifyRequest,
    Walk, JOURNAL, OP_STREAMS, RECEIVERS, ROUTES, STATE_COUNTS,
};
use crate::audit::{
    COMPENSATED_EFFECTS, COMPENSATED_EFFECTS_WHERE, COMPENSATION_ROUTES, COMPENSATION_ROUTES_WHERE,
};
use crate::error::StoreError;
use crate::store::audit_queries::{select, Each, OP_ORDERS};
use crate::store::sql::SqlStore;
use crate::store::sql::{pg_value, Value};
use crate::store::{journal, JournalAudit};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{IsolationLevel, Portal, Transaction};
use std::cell::RefCell;
use std::collections::VecDeque;

/// How many rows of one stream a fetch brings.
const BATCH: i32 = 1000;

/// No parameters, for `query_raw`.
fn none() -> std::iter::Empty<&'static (dyn ToSql + Sync)> {
    std::iter::empty()
}

/// A row of a table as the audit reads it: each value as it is stored.
fn audit_row(url: &DatabaseUrl, row: &postgres::Row) -> Result<Row, StoreError> {
    let mut cells = Row::default();
    for index in 0..row.len() {
        match pg_value(row, index).map_err(|e| db_error(url, "reading a row", &e))? {
            Value::Null => cells.push_null(),
            Value::Integer(n) => cells.push_integer(n),
            Value::Real(x) => cells.push_real(x),
            Value::Text(text) => cells.push_text(&text),
        }
    }
    Ok(cells)
}

/// Every row `SELECT table's columns FROM table rest` returns (a small
/// table, read whole).
fn all_rows(
    tx: &RefCell<Transaction<'_>>,
    url: &DatabaseUrl,
    table: &Table,
    rest: &str,
) -> Result<Vec<Row>, StoreError> {
    tx.borrow_mut()
        .query(&select(table, rest), &[])
        .map_err(|e| db_error(url, "reading a table", &e))?
        .iter()
        .map(|row| audit_row(url, row))
        .collect()
}

/// Walks the chain in `seq` order as it streams, handing each entry to
/// `each` too (its content only when `with_entry`).
fn walk_chain(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
    walk: &mut Walk<'_>,
    with_entry: bool,
    mut each: impl FnMut(&StoredEntry<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let entry = if with_entry { "entry" } else { "''" };
    let sql = format!("SELECT seq, prev_hash, hash, {entry} FROM journal ORDER BY seq");
    let failed = |e: postgres::Error| db_error(url, "reading the journal", &e);
    let mut rows = tx.query_raw(&sql, none()).map_err(failed)?;
    while let Some(row) = rows.next().map_err(failed)? {
        let text = |i| row.try_get::<_, Option<String>>(i).map_err(failed);
        let (prev_hash, hash, entry) = (text(1)?, text(2)?, text(3)?);
        let missing: Vec<&str> = [
            ("prev_hash", &prev_hash),
            ("hash", &hash),
            ("entry", &entry),
        ]
        .iter()
        .filter(|(_, value)| value.is_none())
        .map(|(name, _)| *name)
        .collect();
        let stored = StoredEntry {
            seq: row.try_get(0).map_err(failed)?,
            entry: entry.as_deref().unwrap_or_default(),
            prev_hash: prev_hash.as_deref().unwrap_or_default(),
            hash: hash.as_deref().unwrap_or_default(),
            malformed: (!missing.is_empty()).then(|| format!("{} is null", missing.join(", "))),
        };
        walk.push(&stored);
        each(&stored)?;
    }
    Ok(())
}

/// One stream's rows, fetched through its portal a batch at a time.
struct PortalRows<'t, 'c> {
    tx: &'t RefCell<Transaction<'c>>,
    url: &'t DatabaseUrl,
    portal: Portal,
    batch: VecDeque<postgres::Row>,
    /// The last fetch came back short: the portal is exhausted.
    done: bool,
}

impl<'t, 'c> PortalRows<'t, 'c> {
    fn bind(
        tx: &'t RefCell<Transaction<'c>>,
        url: &'t DatabaseUrl,
        sql: &str,
    ) -> Result<Self, StoreError> {
        let portal = tx
            .borrow_mut()
            .bind(sql, &[])
            .map_err(|e| db_error(url, "reading a table", &e))?;
        Ok(PortalRows {
            tx,
            url,
            portal,
            batch: VecDeque::new(),
            done: false,
        })
    }

    fn fetch(&mut self) -> Result<(), StoreError> {
        let rows = self
            .tx
            .borrow_mut()
            .query_portal(&self.portal, BATCH)
            .map_err(|e| db_error(self.url, "reading a table", &e))?;
        self.done = rows.len() < usize::try_from(BATCH).unwrap_or(usize::MAX);
        self.batch.extend(rows);
        Ok(())
    }
}

impl Iterator for PortalRows<'_, '_> {
    type Item = Result<Row, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.batch.is_empty() && !self.done {
            if let Err(e) = self.fetch() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.batch.pop_front().map(|row| audit_row(self.url, &row))
    }
}

/// Replays the journal against the tables, in the caller's snapshot.
fn project(
    tx: &RefCell<Transaction<'_>>,
    url: &DatabaseUrl,
    ledger_id: Option<&str>,
) -> Result<crate::audit::Projection, StoreError> {
    // A PostgreSQL outbox has no entries without a time to give one (the
    // schema-4 upgrade's concern, `Upgraded`): it was created at schema 6
    // or later, and `db upgrade` journals its own entry. Entries written
    // before that upgrade meet this build's rules as they stand.
    let mut projector = Projector::after_upgrade(None).settings_journaled();
    projector.receivers(
        &all_rows(tx, url, &JOURNAL, "WHERE op_id IS NULL ORDER BY seq")?,
        &all_rows(tx, url, &RECEIVERS, "ORDER BY name")?,
        &all_rows(tx, url, &ROUTES, "ORDER BY action_kind")?,
    );
    let mut streams = Vec::with_capacity(OP_STREAMS.len());
    for (table, order) in OP_STREAMS.iter().zip(OP_ORDERS) {
        // Approvals are ordered by their compensation's id, which is
        // unique: SQLite's `rowid` tie-break has nothing to break here.
        let order = order.replace(", rowid", "");
        streams.push(PortalRows::bind(tx, url, &select(table, &order))?);
    }
    let mut projector = replay_operations::<_, StoreError>(projector, streams)?;
    projector.compensation_routes(&all_rows(
        tx,
        url,
        &COMPENSATION_ROUTES,
        COMPENSATION_ROUTES_WHERE,
    )?);
    projector.compensated_effects(&all_rows(
        tx,
        url,
        &COMPENSATED_EFFECTS,
        COMPENSATED_EFFECTS_WHERE,
    )?);
    projector.state_counts(&all_rows(tx, url, &STATE_COUNTS, "ORDER BY state")?);
    projector.meta(&all_rows(tx, url, &META, "ORDER BY key")?, ledger_id);
    Ok(projector.finish())
}

impl PgSender {
    /// Walks the chain (handing each entry to `each`) and replays the
    /// projection, both in one REPEATABLE READ, READ ONLY transaction.
    fn audit(
        &self,
        request: VerifyRequest<'_>,
        ledger_id: Option<&str>,
        each: Option<Each<'_>>,
    ) -> Result<VerifyReport, StoreError> {
        let url = &self.url;
        let mut conn = self.connection()?;
        let schema = super::schema::schema_differences(&mut conn.client, url)?;
        let mut tx = conn
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| db_error(url, "beginning the audit's snapshot", &e))?;
        let mut walk = Walk::new(request.checkpoint, request.against);
        let with_entry = each.is_some();
        let mut each = each;
        walk_chain(
            &mut tx,
            url,
            &mut walk,
            with_entry,
            |entry| match &mut each {
                Some(each) => each(entry),
                None => Ok(()),
            },
        )?;
        let head = tx
            .query_one("SELECT seq, hash FROM journal_head WHERE id = 1", &[])
            .map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1)))
            .map_err(|e| db_error(url, "reading the journal's head", &e))?;
        let tx = RefCell::new(tx);
        let mut projection = project(&tx, url, ledger_id)?;
        tx.into_inner()
            .commit()
            .map_err(|e| db_error(url, "ending the audit's snapshot", &e))?;
        let walked = walk.finish();
        projection
            .mismatches
            .extend(walked.head_mismatch(head.0, &head.1));
        Ok(VerifyReport::new(walked, projection, schema))
    }
}

impl JournalAudit for PgSender {
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
        self.read(|db| journal::head(db))
    }
}
