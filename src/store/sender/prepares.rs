//! `prepare --batch`'s operations as sets, on PostgreSQL
//! (`store::sets`): the ids taken and the routes read in two statements;
//! each new operation checked alone in Rust as `prepare_one` checks it
//! (its id free, in the outbox and earlier in the batch; its action kind
//! routed somewhere); those that pass, a run at a time, inserted in one
//! statement that routes each as `insert_op` does (in SQL, in this
//! transaction), read back in one, and their `prepared` entries written in
//! one. Any other, or each of a run the database refused, goes through
//! `prepare_one` alone, which refuses it as it refuses one line.

use super::{journal, route_sql};
use crate::audit::{self, EntryKind};
use crate::domain::{canonical_json, NewOperation, Operation, Timestamp};
use crate::error::{Result, StoreError};
use crate::store::sets::{in_runs, insert_entries, ops_by_id, Single};
use crate::store::sql::Db;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// Prepares `news` at `at`, in order; one result per operation.
pub(super) fn prepare_sets<'a>(
    db: &mut dyn Db,
    news: &[NewOperation<'a>],
    at: Timestamp,
    single: Single<'_, NewOperation<'a>, Operation>,
) -> Result<Vec<Result<Operation>>> {
    let ids: Vec<&str> = news.iter().map(|n| n.op_id).collect();
    let taken: HashSet<String> = ops_by_id(db, &ids)?.into_keys().collect();
    let kinds: HashSet<String> = (db.query("SELECT action_kind FROM routes", &[], |r| {
        r.get::<String>(0)
    })?)
    .into_iter()
    .collect();
    let mut seen = HashSet::new();
    let plain: Vec<bool> = (news.iter())
        .map(|new| {
            let routed = kinds.contains(new.action_kind) || kinds.contains("*");
            seen.insert(new.op_id) && !taken.contains(new.op_id) && routed
        })
        .collect();
    let items: Vec<usize> = (0..news.len()).collect();
    let is_plain = |i: &usize| plain[*i];
    let run = |db: &mut dyn Db, run: &[usize]| {
        let run: Vec<&NewOperation<'_>> = run.iter().map(|&i| &news[i]).collect();
        prepare_run(db, &run, at)
    };
    let single = |db: &mut dyn Db, i: &usize| single(db, &news[*i]);
    in_runs(db, &items, &is_plain, &run, &single)
}

/// A run of new operations whose ids are free and whose kinds are
/// routed: inserted `prepared` at version 1, each routed in SQL, read
/// back, and their `prepared` entries (with the registration each was
/// routed to, and its origin) written.
fn prepare_run(
    db: &mut dyn Db,
    run: &[&NewOperation<'_>],
    at: Timestamp,
) -> Result<Vec<Operation>> {
    let rows: Vec<Value> = (run.iter())
        .map(|new| {
            json!({
                "op_id": new.op_id, "action_kind": new.action_kind,
                "payload": canonical_json(new.payload),
            })
        })
        .collect();
    let route = route_sql("x.action_kind", "NULL");
    let registrations: HashMap<String, Option<i64>> = (db.query(
        &format!(
            "INSERT INTO operations
                 (op_id, kind, action_kind, payload, state, version, receiver, created_at,
                  updated_at, receiver_id)
             SELECT x.op_id, 'original', x.action_kind, x.payload, 'prepared', 1, {route}, ?2, ?2,
                 (SELECT id FROM receivers WHERE name = {route})
             FROM json_to_recordset(?1::json) AS x(op_id text, action_kind text, payload text)
             RETURNING op_id, receiver_id"
        ),
        &[&json!(rows).to_string(), &at.to_string()],
        |r| Ok((r.get::<String>(0)?, r.get::<Option<i64>>(1)?)),
    )?)
    .into_iter()
    .collect();
    let ids: Vec<&str> = run.iter().map(|new| new.op_id).collect();
    let mut ops = ops_by_id(db, &ids)?;
    let mut head = journal::head(db)?;
    let mut prepared = Vec::with_capacity(run.len());
    let mut entries = Vec::with_capacity(run.len());
    for new in run {
        let op = ops.remove(new.op_id).ok_or_else(|| {
            StoreError::Corrupt(format!("operation {} was not inserted", new.op_id))
        })?;
        let mut fields = audit::prepared(&op);
        if let Some(Some(id)) = registrations.get(new.op_id) {
            fields.insert("receiver_id".into(), (*id).into());
        }
        if let Some(origin) = new.origin {
            fields.insert(journal::ORIGIN.into(), json!(origin));
        }
        let kind = EntryKind::Prepared;
        let sealed = journal::seal_after(db, &mut head, kind, Some(new.op_id), fields);
        entries.push((kind, Some(new.op_id), sealed));
        prepared.push(op);
    }
    insert_entries(db, &entries)?;
    Ok(prepared)
}
