//! The small executor the outbox's transaction scripts are written over, so
//! that one script serves every store that speaks SQL.
//!
//! A script sees a [`Db`]: statements with numbered parameters (`?1`,
//! `?2`, …), values of four kinds ([`Value`]), and rows read back as those
//! values ([`Row`]). What differs between stores is confined here: the
//! placeholder syntax ([`Dialect::statement`]), how a column's type is read
//! as a value, and how an error becomes a [`StoreError`] carrying the
//! store's own location (for a server, its URL with the password
//! redacted). A statement whose text must differ between stores asks
//! [`Db::dialect`] and says both; there are few.

use super::keys::{self, Key};
use super::postgres::DatabaseUrl;
use super::SqlContext;
use crate::clock::Clock;
use crate::domain::team::Act;
use crate::domain::Timestamp;
use crate::error::{Result, StoreError};
use postgres::types as pg;
use rusqlite::params_from_iter;
use rusqlite::types::{ToSqlOutput, ValueRef};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

/// A parameter or a column, as a script sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
}

/// What can be bound as a parameter.
pub(crate) trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::Integer(*self)
    }
}

impl ToValue for i32 {
    fn to_value(&self) -> Value {
        Value::Integer(i64::from(*self))
    }
}

impl ToValue for bool {
    /// Flags are stored as 0 or 1 on every store.
    fn to_value(&self) -> Value {
        Value::Integer(i64::from(*self))
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

/// What a column can be read as.
pub(crate) trait FromValue: Sized {
    /// `None` when the value is not of this type.
    fn from_value(value: &Value) -> Option<Self>;
}

impl FromValue for i64 {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Integer(n) => Some(*n),
            _ => None,
        }
    }
}

impl FromValue for i32 {
    /// An integer in `i32`'s range (an exit code).
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Integer(n) => i32::try_from(*n).ok(),
            _ => None,
        }
    }
}

impl FromValue for bool {
    /// A flag stored as 0 or 1; any other number is not a flag.
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Integer(0) => Some(false),
            Value::Integer(1) => Some(true),
            _ => None,
        }
    }
}

impl FromValue for f64 {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Real(x) => Some(*x),
            _ => None,
        }
    }
}

impl FromValue for String {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Text(text) => Some(text.clone()),
            _ => None,
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Null => Some(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One row of a result, read back column by column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    values: Vec<Value>,
}

impl Row {
    pub(crate) fn new(values: Vec<Value>) -> Self {
        Row { values }
    }

    /// Column `index` as a `T`; a missing column or a value of another
    /// type is a `Corrupt` error naming the column, never a panic.
    pub(crate) fn get<T: FromValue>(&self, index: usize) -> Result<T, StoreError> {
        self.values
            .get(index)
            .and_then(T::from_value)
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "column {index} is {}, not of the type expected",
                    self.values
                        .get(index)
                        .map_or("missing", |value| kind(value))
                ))
            })
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Integer(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
    }
}

/// How a store writes the statements that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// A script's statement in this dialect: `?N` placeholders become
    /// `$N` on PostgreSQL. Text inside quotes (`'…'`, `"…"`) is left as it
    /// is.
    pub(crate) fn statement(self, sql: &str) -> Cow<'_, str> {
        match self {
            Dialect::Sqlite => Cow::Borrowed(sql),
            Dialect::Postgres => Cow::Owned(dollar_placeholders(sql)),
        }
    }
}

fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            None => out.push(c),
        }
    }
    out
}

/// A connection or a transaction a script runs its statements on.
pub(crate) trait Db {
    fn dialect(&self) -> Dialect;

    /// Which of the schema's unique keys whose violation is a refusal
    /// ([`Key`]) a failed statement violated, if any: each store
    /// names its keys its own way (`store::conflict` maps the key to the
    /// refusal, once).
    fn violated(&self, error: &StoreError) -> Option<Key>;

    /// Told of each journal entry the act writes, as written: the last
    /// one is what settles a commit whose answer was lost, which only a
    /// store on a server keeps.
    fn journaled(&mut self, _entry: Appended) {}

    /// The last journal entry [`Db::journaled`] was told of, if the store
    /// keeps it: what a savepoint restores when its item rolls back.
    fn last_journaled(&self) -> Option<Appended> {
        None
    }

    /// Forgets the entries journaled since `last` was the last one: their
    /// savepoint rolled back, so the commit will not hold them.
    fn rewind_journaled(&mut self, _last: Option<Appended>) {}

    /// The authenticated role the act runs as, on a store whose server
    /// knows one (PostgreSQL's `session_user`): each journal entry records
    /// it beside the name typed.
    fn role(&self) -> Option<&str> {
        None
    }

    /// Runs a statement; the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[&dyn ToValue]) -> Result<usize, StoreError>;

    /// Runs a query and hands each row to `each`, in order; stops at the
    /// first error `each` returns.
    fn for_each(
        &mut self,
        sql: &str,
        params: &[&dyn ToValue],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
}

impl dyn Db + '_ {
    /// Every row of a query, each read by `read`.
    pub(crate) fn query<T>(
        &mut self,
        sql: &str,
        params: &[&dyn ToValue],
        mut read: impl FnMut(&Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        self.for_each(sql, params, &mut |row| {
            out.push(read(&row)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row of a query, if any, read by `read`.
    pub(crate) fn query_opt<T>(
        &mut self,
        sql: &str,
        params: &[&dyn ToValue],
        read: impl FnOnce(&Row) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let mut first = None;
        self.for_each(sql, params, &mut |row| {
            if first.is_none() {
                first = Some(row);
            }
            Ok(())
        })?;
        first.as_ref().map(read).transpose()
    }

    /// The one row a query must return, read by `read`.
    pub(crate) fn query_one<T>(
        &mut self,
        sql: &str,
        params: &[&dyn ToValue],
        read: impl FnOnce(&Row) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.query_opt(sql, params, read)?
            .ok_or_else(|| StoreError::Corrupt(format!("no row for: {}", first_line(sql))))
    }
}

/// A SQLite connection (or a transaction, through `Deref`) as a [`Db`];
/// errors carry the file's path.
pub(crate) struct Sqlite<'c> {
    pub(crate) conn: &'c rusqlite::Connection,
    pub(crate) path: &'c Path,
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Integer(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            Value::Real(x) => ToSqlOutput::Borrowed(ValueRef::Real(*x)),
            Value::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
        })
    }
}

fn sqlite_value(value: ValueRef<'_>) -> Result<Value, String> {
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Integer(n),
        ValueRef::Real(x) => Value::Real(x),
        ValueRef::Text(bytes) => Value::Text(
            String::from_utf8(bytes.to_vec()).map_err(|_| "text that is not UTF-8".to_string())?,
        ),
        ValueRef::Blob(_) => return Err("a blob".to_string()),
    })
}

fn bound(params: &[&dyn ToValue]) -> Vec<Value> {
    params.iter().map(|p| p.to_value()).collect()
}

impl Db for Sqlite<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn violated(&self, error: &StoreError) -> Option<Key> {
        match error {
            StoreError::Sqlite { source, .. } => keys::violated(source),
            _ => None,
        }
    }

    fn execute(&mut self, sql: &str, params: &[&dyn ToValue]) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params_from_iter(bound(params))))
            .at(self.path)
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[&dyn ToValue],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut statement = self.conn.prepare_cached(sql).at(self.path)?;
        let columns = statement.column_count();
        let mut rows = statement
            .query(params_from_iter(bound(params)))
            .at(self.path)?;
        while let Some(row) = rows.next().at(self.path)? {
            let mut values = Vec::with_capacity(columns);
            for index in 0..columns {
                let value = row.get_ref(index).at(self.path)?;
                values.push(sqlite_value(value).map_err(|what| {
                    StoreError::Corrupt(format!("column {index} holds {what}: {}", first_line(sql)))
                })?);
            }
            each(Row::new(values))?;
        }
        Ok(())
    }
}

/// A PostgreSQL transaction as a [`Db`]: statements are prepared once per
/// connection (`statements`), and errors name the database by its URL with
/// the password redacted (`store::postgres::db_error`).
pub(crate) struct Postgres<'a, 'c> {
    pub(crate) tx: &'a mut postgres::Transaction<'c>,
    pub(crate) statements: &'a mut HashMap<String, postgres::Statement>,
    pub(crate) url: &'a DatabaseUrl,
    /// The last journal entry written in this transaction.
    pub(crate) appended: Option<Appended>,
    /// The session's authenticated role (`session_user`).
    pub(crate) role: &'a str,
}

impl Postgres<'_, '_> {
    pub(crate) fn prepared(&mut self, sql: &str) -> Result<postgres::Statement, StoreError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self
            .tx
            .prepare(&Dialect::Postgres.statement(sql))
            .map_err(|e| pg_error(self.url, &e))?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

/// A PostgreSQL error met running a script's statement.
fn pg_error(url: &DatabaseUrl, source: &postgres::Error) -> StoreError {
    super::postgres::db_error(url, "a statement", source)
}

impl pg::ToSql for Value {
    fn to_sql(
        &self,
        ty: &pg::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<pg::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(pg::IsNull::Yes),
            Value::Integer(n) => match *ty {
                pg::Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                pg::Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                pg::Type::BOOL => (*n != 0).to_sql(ty, out),
                _ => n.to_sql(ty, out),
            },
            Value::Real(x) => x.to_sql(ty, out),
            Value::Text(text) => text.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &pg::Type) -> bool {
        true
    }

    pg::to_sql_checked!();
}

pub(crate) fn pg_value(row: &postgres::Row, index: usize) -> Result<Value, postgres::Error> {
    let ty = row.columns()[index].type_().clone();
    Ok(match ty {
        pg::Type::INT2 => row
            .try_get::<_, Option<i16>>(index)?
            .map(|n| Value::Integer(n.into())),
        pg::Type::INT4 => row
            .try_get::<_, Option<i32>>(index)?
            .map(|n| Value::Integer(n.into())),
        pg::Type::BOOL => row
            .try_get::<_, Option<bool>>(index)?
            .map(|b| Value::Integer(b.into())),
        pg::Type::FLOAT8 => row.try_get::<_, Option<f64>>(index)?.map(Value::Real),
        pg::Type::TEXT | pg::Type::VARCHAR | pg::Type::BPCHAR | pg::Type::NAME => {
            row.try_get::<_, Option<String>>(index)?.map(Value::Text)
        }
        _ => row.try_get::<_, Option<i64>>(index)?.map(Value::Integer),
    }
    .unwrap_or(Value::Null))
}

impl Db for Postgres<'_, '_> {
    fn journaled(&mut self, entry: Appended) {
        self.appended = Some(entry);
    }

    fn last_journaled(&self) -> Option<Appended> {
        self.appended.clone()
    }

    fn rewind_journaled(&mut self, last: Option<Appended>) {
        self.appended = last;
    }

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn role(&self) -> Option<&str> {
        Some(self.role)
    }

    /// SQLSTATE 23505 (`unique_violation`) with the name of the constraint
    /// the schema gives each key (`keys::pg_violated`). A failed
    /// statement aborts a PostgreSQL transaction, so the one lookup a
    /// refusal needs (`action_routed` names the route's holder) runs after
    /// a rollback to the savepoint `conflict::insert` takes.
    fn violated(&self, error: &StoreError) -> Option<Key> {
        keys::pg_violated(error)
    }

    fn execute(&mut self, sql: &str, params: &[&dyn ToValue]) -> Result<usize, StoreError> {
        let statement = self.prepared(sql)?;
        let values = bound(params);
        let refs: Vec<&(dyn pg::ToSql + Sync)> = values
            .iter()
            .map(|v| v as &(dyn pg::ToSql + Sync))
            .collect();
        let changed = self
            .tx
            .execute(&statement, &refs)
            .map_err(|e| pg_error(self.url, &e))?;
        usize::try_from(changed).map_err(|_| StoreError::Corrupt(format!("{changed} rows")))
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[&dyn ToValue],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let statement = self.prepared(sql)?;
        let values = bound(params);
        let refs: Vec<&(dyn pg::ToSql + Sync)> = values
            .iter()
            .map(|v| v as &(dyn pg::ToSql + Sync))
            .collect();
        let rows = self
            .tx
            .query(&statement, &refs)
            .map_err(|e| pg_error(self.url, &e))?;
        for row in &rows {
            let values = (0..row.len())
                .map(|index| pg_value(row, index))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| pg_error(self.url, &e))?;
            each(Row::new(values))?;
        }
        Ok(())
    }
}

/// A store whose outbox is SQL: all a store supplies for the outbox's
/// transaction scripts (`store::sender`, `triage`, `receivers`,
/// `console_queries`), which are written once over [`Db`] and implement
/// the core traits for every `SqlStore`.
pub(crate) trait SqlStore {
    /// Runs one act as one write transaction: takes the write lock first
    /// (SQLite: `BEGIN IMMEDIATE`), then reads the act's time from `clock`
    /// (so `at` never goes backwards in journal order, whichever writer
    /// looked at its clock first), runs `act`, and commits when it returns
    /// `Ok`; an `Err`, or a panic, rolls everything back.
    /// `act` says what the transaction is, for a store whose server
    /// authorizes acts (team mode); SQLite's outbox ignores it.
    fn write<T>(
        &mut self,
        clock: &dyn Clock,
        what: Act,
        act: impl FnOnce(&mut dyn Db, Timestamp) -> Result<T>,
    ) -> Result<T>;

    /// Runs reads outside any write transaction; `act`'s error is
    /// returned as it is, and the store's own (a connection lost) as `E`.
    /// It takes `&self`, as the core traits' reads do: a store whose reads
    /// need its connection mutably keeps it in a `RefCell` (a store is
    /// `Send`, never shared between threads).
    fn read<T, E: From<StoreError>>(
        &self,
        act: impl FnOnce(&mut dyn Db) -> Result<T, E>,
    ) -> Result<T, E>;
}

/// Runs one item of a batch act under a savepoint, so that an item that
/// is refused or fails rolls back alone (its journal entry too) and the
/// others go on in the same transaction: the outer error is the store's
/// own (the savepoint could not be taken or rolled back to, the
/// transaction is lost), the inner one the item's.
pub(crate) fn each_alone<T>(
    db: &mut dyn Db,
    item: impl FnOnce(&mut dyn Db) -> Result<T>,
) -> Result<Result<T>> {
    let last = db.last_journaled();
    let logged = crate::actlog::mark();
    db.execute("SAVEPOINT item", &[])?;
    match item(db) {
        Ok(done) => {
            db.execute("RELEASE SAVEPOINT item", &[])?;
            Ok(Ok(done))
        }
        Err(error) => {
            db.execute("ROLLBACK TO SAVEPOINT item", &[])?;
            db.execute("RELEASE SAVEPOINT item", &[])?;
            db.rewind_journaled(last);
            crate::actlog::rewind(logged);
            Ok(Err(error))
        }
    }
}

fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or_default()
}

/// A journal entry an act appended, sealed: what settles whether the act
/// committed when its COMMIT lost its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Appended {
    pub(crate) seq: i64,
    pub(crate) hash: String,
    pub(crate) kind: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The acts logged in this process whose op id starts `actlog-`.
    static LOGGED: std::sync::Mutex<Vec<(String, &'static str)>> =
        std::sync::Mutex::new(Vec::new());

    struct Collect;

    impl crate::actlog::Sink for Collect {
        fn write(&self, line: &crate::actlog::ActLine) {
            let Some(op_id) = line.op_id.clone().filter(|id| id.starts_with("actlog-")) else {
                return;
            };
            LOGGED.lock().expect("the log").push((op_id, line.outcome));
        }
    }

    /// `RECON_LOG=json`'s lines are those of the entries that commit: an
    /// item of a batch rolled back to its savepoint took its entry with it,
    /// and its line goes too; the items before and after it are logged.
    #[test]
    fn an_item_or_an_act_rolled_back_logs_no_line_and_the_others_log_theirs() {
        use crate::audit::EntryKind;
        use crate::store::sender::fixture::Fixture;
        crate::actlog::install(Box::new(Collect));
        let mut fx = Fixture::new();
        let entry = |db: &mut dyn Db, op_id: &str| {
            let fields = serde_json::Map::new();
            super::super::journal::append(db, EntryKind::Noted, Some(op_id), fields)
                .map(|_| ())
                .map_err(crate::error::Error::from)
        };
        let items: Result<Vec<Result<()>>> = fx.store.write(&fx.clock, Act::Prepare, |db, _| {
            Ok(vec![
                each_alone(db, |db| {
                    entry(db, "actlog-1")?;
                    entry(db, "actlog-1")
                })?,
                each_alone(db, |db| {
                    entry(db, "actlog-2")?;
                    entry(db, "actlog-2")?;
                    Err(StoreError::Corrupt("refused after its entries".into()).into())
                })?,
                each_alone(db, |db| entry(db, "actlog-3"))?,
            ])
        });
        let items = items.expect("the write");
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
        // A whole act refused after its entry rolls back: its line is not
        // carried into the next act's.
        let refused: Result<()> = fx.store.write(&fx.clock, Act::Prepare, |db, _| {
            entry(db, "actlog-4")?;
            Err(StoreError::Corrupt("refused after its entry".into()).into())
        });
        assert!(refused.is_err());
        let next: Result<()> = fx
            .store
            .write(&fx.clock, Act::Prepare, |db, _| entry(db, "actlog-5"));
        next.expect("the next act");
        assert_eq!(
            *LOGGED.lock().expect("the log"),
            [
                ("actlog-1".to_string(), "committed"),
                ("actlog-1".to_string(), "committed"),
                ("actlog-3".to_string(), "committed"),
                ("actlog-5".to_string(), "committed"),
            ]
        );
    }

    #[test]
    fn placeholders_become_dollars_on_postgres_and_nothing_in_quotes_changes() {
        let sql = "SELECT '?1', \"a?2\" FROM t\nWHERE a = ?1 AND b = ?12 AND c = '?'";
        assert_eq!(Dialect::Sqlite.statement(sql), sql);
        assert_eq!(
            Dialect::Postgres.statement(sql),
            "SELECT '?1', \"a?2\" FROM t\nWHERE a = $1 AND b = $12 AND c = '?'"
        );
    }

    #[test]
    fn a_column_of_another_type_is_a_corrupt_error_naming_the_column() {
        let row = Row::new(vec![Value::Text("x".into()), Value::Integer(2)]);
        assert_eq!(row.get::<String>(0).unwrap(), "x");
        assert_eq!(row.get::<Option<i64>>(1).unwrap(), Some(2));
        assert!(row.get::<bool>(1).is_err());
        assert_eq!(row.get::<i32>(1).unwrap(), 2);
        let wide = Row::new(vec![Value::Integer(i64::from(i32::MAX) + 1)]);
        assert!(wide.get::<i32>(0).is_err());
        let error = row.get::<i64>(0).unwrap_err().to_string();
        assert!(error.contains("column 0 is text"), "{error}");
        assert!(row
            .get::<i64>(5)
            .unwrap_err()
            .to_string()
            .contains("missing"));
    }

    #[test]
    fn a_script_reads_back_what_it_wrote_through_the_sqlite_executor() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        let mut sqlite = Sqlite { conn: &conn, path };
        let db: &mut dyn Db = &mut sqlite;
        db.execute(
            "CREATE TABLE t (a TEXT PRIMARY KEY, n INTEGER, f INTEGER)",
            &[],
        )
        .unwrap();
        let none: Option<i64> = None;
        assert_eq!(
            db.execute("INSERT INTO t VALUES (?1, ?2, ?3)", &[&"x", &none, &true])
                .unwrap(),
            1
        );
        let rows = db
            .query("SELECT a, n, f FROM t WHERE a = ?1", &[&"x"], |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<Option<i64>>(1)?,
                    r.get::<bool>(2)?,
                ))
            })
            .unwrap();
        assert_eq!(rows, vec![("x".to_string(), None, true)]);
        let missing = db
            .query_opt("SELECT a FROM t WHERE a = ?1", &[&"y"], |r| {
                r.get::<String>(0)
            })
            .unwrap();
        assert_eq!(missing, None);
    }
}
