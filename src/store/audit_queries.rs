//! The reads behind `recon verify` and `recon export`: the evidence log and
//! the operations' states exactly as SQLite holds them.
//!
//! These deliberately do not go through the typed readers of
//! [`super::sender`], which refuse a row that does not parse: a row an
//! attacker edited is exactly the row verification must report, so every
//! column is read as whatever SQLite value it holds and converted to JSON,
//! and anything unreadable is noted on the row instead of failing the read.

use super::SqlContext;
use crate::audit::{self, OpStateRow, StoredRow, VerifyReport, CONTENT_COLUMNS};
use crate::error::StoreError;
use crate::store::{EvidenceAudit, SqliteSender};
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde_json::{Map, Value};
use std::path::Path;

/// One SQLite value as JSON; `Err` says why it cannot be evidence.
fn to_json(column: &str, value: Sql) -> Result<Value, (Value, String)> {
    match value {
        Sql::Null => Ok(Value::Null),
        Sql::Integer(i) => Ok(Value::from(i)),
        Sql::Real(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| (Value::Null, format!("{column} is not a finite number"))),
        Sql::Text(text) if column == "snapshot" => serde_json::from_str(&text)
            .map_err(|_| (Value::String(text), "the snapshot is not JSON".to_string())),
        Sql::Text(text) => Ok(Value::String(text)),
        Sql::Blob(bytes) => Err((
            Value::String(bytes.iter().map(|b| format!("{b:02x}")).collect()),
            format!("{column} holds a blob"),
        )),
    }
}

fn stored_rows(conn: &Connection, path: &Path) -> Result<Vec<StoredRow>, StoreError> {
    let sql = format!(
        "SELECT {}, prev_hash, hash FROM evidence ORDER BY seq",
        CONTENT_COLUMNS.join(", ")
    );
    let raw = conn
        .prepare(&sql)
        .and_then(|mut s| {
            s.query_map([], |r| {
                (0..CONTENT_COLUMNS.len() + 2)
                    .map(|i| r.get::<_, Sql>(i))
                    .collect::<rusqlite::Result<Vec<Sql>>>()
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .at(path)?;
    Ok(raw.into_iter().map(stored_row).collect())
}

fn stored_row(mut columns: Vec<Sql>) -> StoredRow {
    let mut problems = Vec::new();
    let mut text_of = |value: Option<Sql>, name: &str| match value {
        Some(Sql::Text(text)) => text,
        _ => {
            problems.push(format!("{name} is not text"));
            String::new()
        }
    };
    let hash = text_of(columns.pop(), "hash");
    let prev_hash = text_of(columns.pop(), "prev_hash");
    let mut content = Map::new();
    for (name, value) in CONTENT_COLUMNS.iter().zip(columns) {
        let json = to_json(name, value).unwrap_or_else(|(json, why)| {
            problems.push(why);
            json
        });
        content.insert((*name).to_string(), json);
    }
    // `seq` is the table's INTEGER PRIMARY KEY, so SQLite guarantees an
    // integer; 0 only stands in for a value that cannot occur.
    let seq = content.get("seq").and_then(Value::as_i64).unwrap_or(0);
    StoredRow {
        seq,
        content: Value::Object(content),
        prev_hash,
        hash,
        malformed: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

fn op_states(conn: &Connection, path: &Path) -> Result<Vec<OpStateRow>, StoreError> {
    conn.prepare("SELECT op_id, state, version FROM operations ORDER BY op_id")
        .and_then(|mut s| {
            s.query_map([], |r| {
                let text = |value: Sql| match value {
                    Sql::Text(text) => text,
                    other => format!("{other:?}"),
                };
                Ok(OpStateRow {
                    op_id: text(r.get(0)?),
                    state: text(r.get(1)?),
                    version: match r.get::<_, Sql>(2)? {
                        Sql::Integer(v) => v,
                        _ => -1,
                    },
                })
            })?
            .collect()
        })
        .at(path)
}

impl SqliteSender {
    /// The evidence log in `seq` order and every operation's state, read in
    /// one transaction so that a decision committing meanwhile cannot look
    /// like a mismatch between the two.
    fn read_log_and_states(&self) -> Result<(Vec<StoredRow>, Vec<OpStateRow>), StoreError> {
        let path = self.path();
        let tx = self.conn().unchecked_transaction().at(path)?;
        let rows = stored_rows(&tx, path)?;
        let ops = op_states(&tx, path)?;
        tx.finish().at(path)?;
        Ok((rows, ops))
    }
}

impl EvidenceAudit for SqliteSender {
    /// Verifies the log, cross-checks it with the operations, and compares
    /// it with an exported copy when one is given.
    fn verify_evidence(&self, export: Option<&[StoredRow]>) -> Result<VerifyReport, StoreError> {
        let (rows, ops) = self.read_log_and_states()?;
        Ok(audit::verify(&rows, &ops, export))
    }

    /// The whole log as stored, for `recon export`, with the verification
    /// of exactly those rows.
    fn export_evidence(&self) -> Result<(Vec<StoredRow>, VerifyReport), StoreError> {
        let (rows, ops) = self.read_log_and_states()?;
        let report = audit::verify(&rows, &ops, None);
        Ok((rows, report))
    }
}
