//! Set-based writes, for a store on which every statement is a round trip
//! to a server (PostgreSQL): the acts of a batch written in a few
//! statements of many rows each, instead of several statements per act.
//!
//! Nothing is decided here that the per-act scripts do not decide the same
//! way. Each act of a batch is checked alone, in Rust, against its row as
//! one read of the whole batch found it, inside the write transaction
//! (whose turn at the journal every writer takes first); an act whose
//! per-act script would read more than that (an observation of a decided
//! operation, which may contradict its decision) is written by that
//! script, in its place in the batch. The acts between two such are a
//! run: their entries are sealed one after another from the head read
//! once, and their rows go in as JSON sets (`json_populate_recordset`), in
//! seq order, so the database's row triggers check each row as they check
//! one written alone. A run the database refuses rolls back to its
//! savepoint and is written again act by act, so that each act is refused
//! alone, as the per-act scripts refuse it.

use super::journal;
use super::rows::{query_ops, OP_SELECT};
use super::sql::{each_alone, Db};
use super::triage::observation_of;
use crate::audit::{self, Checkpoint, EntryKind, Sealed};
use crate::domain::{CloseRecord, NewObservation, Observation, Operation, Timestamp};
use crate::error::{Result, StoreError};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// One act's per-act script, for an act a set cannot write.
type Alone<'s, T, R> = &'s dyn Fn(&mut dyn Db, &T) -> Result<R>;

/// How an item a set cannot write is written: its per-act script, and
/// its result as the batch keeps it (the outer error fails the batch).
pub(crate) type Single<'s, T, R> = &'s dyn Fn(&mut dyn Db, &T) -> Result<Result<R>>;

/// How a run of plain items is written: in a few statements, one result
/// per item, or an error that rolls the run back.
pub(crate) type Run<'s, T, R> = &'s dyn Fn(&mut dyn Db, &[T]) -> Result<Vec<R>>;

/// Writes `items` in order: each run of plain ones (`plain`) by `run`, in
/// a savepoint of its own; every other item, and each item of a run the
/// database refused, by `single`. One result per item.
pub(crate) fn in_runs<T, R>(
    db: &mut dyn Db,
    items: &[T],
    plain: &dyn Fn(&T) -> bool,
    run: Run<'_, T, R>,
    single: Single<'_, T, R>,
) -> Result<Vec<Result<R>>> {
    let mut done = Vec::with_capacity(items.len());
    let mut start = 0;
    while let Some(first) = items.get(start) {
        if !plain(first) {
            done.push(single(db, first)?);
            start += 1;
            continue;
        }
        let end = (start..items.len())
            .find(|&i| !plain(&items[i]))
            .unwrap_or(items.len());
        let items = &items[start..end];
        let whole = |db: &mut dyn Db| match run(db, items)? {
            written if written.len() == items.len() => Ok(written),
            written => Err(StoreError::Corrupt(format!(
                "a run of {} wrote {}",
                items.len(),
                written.len()
            ))
            .into()),
        };
        match each_alone(db, whole)? {
            Ok(written) => done.extend(written.into_iter().map(Ok)),
            Err(_) => {
                for item in items {
                    done.push(single(db, item)?);
                }
            }
        }
        start = end;
    }
    Ok(done)
}

/// `alone` under a savepoint of its own (`sql::each_alone`): refused or
/// failed, it rolls back alone.
fn savepointed<'s, T, R>(
    alone: Alone<'s, T, R>,
) -> impl Fn(&mut dyn Db, &T) -> Result<Result<R>> + 's {
    move |db: &mut dyn Db, item: &T| each_alone(db, |db| alone(db, item))
}

/// Records `batch` in order (each at its own `at`), a run of plain reads
/// at a time ([`plain_reads`]); every other observation by `alone`.
pub(crate) fn record_observations<'a>(
    db: &mut dyn Db,
    batch: &[NewObservation<'a>],
    alone: Alone<'_, NewObservation<'a>, Observation>,
) -> Result<Vec<Result<Observation>>> {
    in_read_runs(
        db,
        batch,
        &|o| o.op_id,
        &|db, run| observation_run(db, run),
        alone,
    )
}

/// Writes `items`, each carrying a read of the operation `op_id` names,
/// in order: runs of those whose read is plain ([`plain_reads`]) by `run`,
/// every other one by `alone` in a savepoint of its own.
fn in_read_runs<T>(
    db: &mut dyn Db,
    items: &[T],
    op_id: &dyn Fn(&T) -> &str,
    run: Run<'_, T, Observation>,
    alone: Alone<'_, T, Observation>,
) -> Result<Vec<Result<Observation>>> {
    let ids: Vec<&str> = items.iter().map(op_id).collect();
    let plain = plain_reads(db, &ids)?;
    let is_plain = |item: &T| plain.contains(op_id(item));
    in_runs(db, items, &is_plain, run, &savepointed(alone))
}

/// The operations of `ids` a read of is plain, in one statement: those
/// that exist and are not decided with no contradiction marker up (a read
/// of one that is may contradict its decision:
/// `triage::contradicts_decision`). A missing operation is left to its
/// per-act script, which refuses it alone.
fn plain_reads(db: &mut dyn Db, ids: &[&str]) -> Result<HashSet<String>> {
    let plain = db.query(
        "SELECT o.op_id FROM json_array_elements_text(?1::json) AS i(op_id)
             JOIN operations o ON o.op_id = i.op_id COLLATE \"C\"
             WHERE o.state NOT IN ('confirmed', 'not_applied') OR o.contradiction IS NOT NULL",
        &[&json!(ids).to_string()],
        |r| r.get::<String>(0),
    )?;
    Ok(plain.into_iter().collect())
}

/// The operations of `ids` that exist, read in one statement, by id.
pub(crate) fn ops_by_id(db: &mut dyn Db, ids: &[&str]) -> Result<HashMap<String, Operation>> {
    let sql = format!(
        "{OP_SELECT} WHERE o.op_id IN (SELECT i.op_id COLLATE \"C\" \
         FROM json_array_elements_text(?1::json) AS i(op_id))"
    );
    let ops = query_ops(db, &sql, &[&json!(ids).to_string()])?;
    Ok(ops.into_iter().map(|op| (op.op_id.clone(), op)).collect())
}

/// Records the authorizations of closes of `op_ids` at `receiver` by
/// `authorized_by`, each a `close_requested` entry and its row, as
/// `TriageLog::record_close_requests` records one; a run the database
/// refused, each by `alone`.
pub(crate) fn record_close_requests<'a>(
    db: &mut dyn Db,
    op_ids: &[&'a str],
    (receiver, authorized_by, at): (&str, &str, Timestamp),
    alone: Alone<'_, &'a str, ()>,
) -> Result<Vec<Result<()>>> {
    let run = |db: &mut dyn Db, run: &[&'a str]| -> Result<Vec<()>> {
        let mut head = journal::head(db)?;
        let kind = EntryKind::CloseRequested;
        let mut entries = Vec::with_capacity(run.len());
        let mut rows = Vec::with_capacity(run.len());
        for op_id in run {
            let fields = audit::close_requested(receiver, authorized_by, at);
            let sealed = journal::seal_after(db, &mut head, kind, Some(op_id), fields);
            rows.push(json!({
                "seq": sealed.seq, "op_id": op_id, "receiver": receiver,
                "authorized_by": authorized_by, "requested_at": at.to_string(),
            }));
            entries.push((kind, Some(*op_id), sealed));
        }
        insert_entries(db, &entries)?;
        insert_rows(db, "close_requests", CLOSE_REQUEST_COLUMNS, &rows)?;
        Ok(vec![(); run.len()])
    };
    in_runs(db, op_ids, &|_| true, &run, &savepointed(alone))
}

const CLOSE_REQUEST_COLUMNS: &str = "seq, op_id, receiver, authorized_by, requested_at";

/// A run of plain reads, each as `triage::insert_observation` records
/// one: its `observed` entry, its `observations` row, and its operation's
/// latest observation and verdict (the run's latest of each operation,
/// unless a later one is recorded already).
fn observation_run(db: &mut dyn Db, run: &[NewObservation<'_>]) -> Result<Vec<Observation>> {
    let mut head = journal::head(db)?;
    let entries: Vec<_> = (run.iter())
        .map(|o| observed_entry(db, &mut head, o))
        .collect();
    insert_entries(db, &entries)?;
    let seqs: Vec<i64> = entries.iter().map(|(_, _, sealed)| sealed.seq).collect();
    write_reads(db, run, &seqs)
}

/// The `observed` entry of a plain read, sealed after `head`.
fn observed_entry<'a>(
    db: &dyn Db,
    head: &mut Checkpoint,
    observation: &NewObservation<'a>,
) -> (EntryKind, Option<&'a str>, Sealed) {
    let (kind, op_id) = (EntryKind::Observed, Some(observation.op_id));
    let sealed = journal::seal_after(db, head, kind, op_id, audit::observed(observation));
    (kind, op_id, sealed)
}

/// The rows of plain reads whose entries (`seqs`, in order) are written:
/// their `observations` rows, and each operation's latest observation and
/// verdict (the latest of the run, unless a later one is recorded
/// already, as `triage::note_latest` moves it).
fn write_reads(
    db: &mut dyn Db,
    reads: &[NewObservation<'_>],
    seqs: &[i64],
) -> Result<Vec<Observation>> {
    let rows: Vec<Value> = (reads.iter().zip(seqs))
        .map(|(o, seq)| observation_row(*seq, o))
        .collect();
    insert_rows(db, "observations", OBSERVATION_COLUMNS, &rows)?;
    db.execute(
        "UPDATE operations o SET latest_observation = u.seq, latest_verdict = u.verdict
             FROM (SELECT DISTINCT ON (x.op_id) x.op_id, x.seq, x.verdict
                   FROM json_to_recordset(?1::json) AS x(op_id text, seq bigint, verdict text)
                   ORDER BY x.op_id, x.seq DESC) u
             WHERE o.op_id = u.op_id COLLATE \"C\"
               AND (o.latest_observation IS NULL OR o.latest_observation < u.seq)",
        &[&json!(rows).to_string()],
    )?;
    Ok((reads.iter().zip(seqs))
        .map(|(o, seq)| observation_of(o, *seq))
        .collect())
}

/// Records closes the receivers committed, in order: each whose closing
/// read is plain ([`plain_reads`]) as `sender::record_close` records one
/// (its `closed` entry and `closes` row, then its read as an observation),
/// in runs; every other one by `alone`.
pub(crate) fn record_closes<'a>(
    db: &mut dyn Db,
    closes: &[(CloseRecord, NewObservation<'a>)],
    alone: Alone<'_, (CloseRecord, NewObservation<'a>), Observation>,
) -> Result<Vec<Result<Observation>>> {
    in_read_runs(
        db,
        closes,
        &|(_, o)| o.op_id,
        &|db, run| close_run(db, run),
        alone,
    )
}

/// A run of closes whose reads are plain.
fn close_run(
    db: &mut dyn Db,
    run: &[(CloseRecord, NewObservation<'_>)],
) -> Result<Vec<Observation>> {
    let mut head = journal::head(db)?;
    let mut entries = Vec::with_capacity(run.len() * 2);
    let mut rows = Vec::with_capacity(run.len());
    let mut seqs = Vec::with_capacity(run.len());
    for (close, observation) in run {
        let op_id = Some(observation.op_id);
        let closed = audit::closed(close);
        let sealed = journal::seal_after(db, &mut head, EntryKind::Closed, op_id, closed);
        rows.push(json!({
            "op_id": observation.op_id, "receiver": close.receiver,
            "authorized_by": close.authorized_by, "journal_seq": sealed.seq,
            "closed_at": close.closed_at.to_string(),
        }));
        entries.push((EntryKind::Closed, op_id, sealed));
        let read = observed_entry(db, &mut head, observation);
        seqs.push(read.2.seq);
        entries.push(read);
    }
    insert_entries(db, &entries)?;
    let columns = "op_id, receiver, authorized_by, journal_seq, closed_at";
    insert_rows(db, "closes", columns, &rows)?;
    let reads: Vec<NewObservation<'_>> = run.iter().map(|(_, o)| *o).collect();
    write_reads(db, &reads, &seqs)
}

/// The `observations` row of the entry `seq`, as
/// `triage::insert_observation_row` writes it.
fn observation_row(seq: i64, observation: &NewObservation<'_>) -> Value {
    let (snapshot, provenance) = (observation.snapshot, observation.provenance);
    json!({
        "seq": seq,
        "op_id": observation.op_id,
        "receiver": provenance.receiver,
        "observed_by": observation.by,
        "observed_at": observation.at.to_string(),
        "verdict": observation.verdict.as_str(),
        "complete": i64::from(snapshot.complete),
        "authoritative": i64::from(snapshot.authoritative),
        "closed": i64::from(snapshot.closed),
        "matches": snapshot.matches.len(),
        "receiver_describe_sha256": provenance.receiver_describe_sha256,
        "response_sha256": provenance.response_sha256,
    })
}

const OBSERVATION_COLUMNS: &str = "seq, op_id, receiver, observed_by, observed_at, verdict, \
     complete, authoritative, closed, matches, receiver_describe_sha256, response_sha256";

/// Writes sealed entries, in seq order, in one statement; the journal's
/// trigger chains each to the head as it chains one written alone.
pub(crate) fn insert_entries(
    db: &mut dyn Db,
    entries: &[(EntryKind, Option<&str>, Sealed)],
) -> Result<(), StoreError> {
    let rows: Vec<Value> = (entries.iter())
        .map(|(kind, op_id, sealed)| {
            json!({
                "seq": sealed.seq,
                "kind": kind.as_str(),
                "op_id": op_id,
                "entry": sealed.entry,
                "prev_hash": sealed.prev_hash,
                "hash": sealed.hash,
            })
        })
        .collect();
    insert_rows(
        db,
        "journal",
        "seq, kind, op_id, entry, prev_hash, hash",
        &rows,
    )?;
    for (kind, op_id, sealed) in entries {
        journal::inserted(db, *kind, *op_id, sealed);
    }
    Ok(())
}

/// Inserts `rows` (objects named by `table`'s columns) into `table`'s
/// `columns` in one statement, in the order given; fails unless every one
/// went in.
pub(crate) fn insert_rows(
    db: &mut dyn Db,
    table: &str,
    columns: &str,
    rows: &[Value],
) -> Result<(), StoreError> {
    let text = serde_json::to_string(rows)
        .map_err(|e| StoreError::Corrupt(format!("rows of {table}: {e}")))?;
    let changed = db.execute(
        &format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} \
             FROM json_populate_recordset(NULL::{table}, ?1::json)"
        ),
        &[&text],
    )?;
    if changed != rows.len() {
        return Err(StoreError::Corrupt(format!(
            "{changed} of {} rows went into {table}",
            rows.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::in_runs;
    use crate::audit::EntryKind;
    use crate::domain::team::Act;
    use crate::error::{Error, Result, StoreError};
    use crate::store::journal;
    use crate::store::sender::fixture::Fixture;
    use crate::store::sql::{each_alone, Db, SqlStore};
    use std::cell::RefCell;

    /// A `noted` entry for `item`, as an act of the batch writes one.
    fn note(db: &mut dyn Db, item: &str) -> Result<i64> {
        let fields = serde_json::Map::new();
        Ok(journal::append(db, EntryKind::Noted, Some(item), fields)?.seq)
    }

    /// The items of the journal's entries, in seq order.
    fn journaled(fx: &Fixture) -> Vec<String> {
        let mut db = fx.store.db();
        let db: &mut dyn Db = &mut db;
        db.query(
            "SELECT op_id FROM journal WHERE kind = 'noted' ORDER BY seq",
            &[],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// Plain items go in runs between the others, which are written alone
    /// in their place: the entries keep the batch's order.
    #[test]
    fn runs_of_plain_items_are_written_between_the_others_in_the_batch_order() {
        let mut fx = Fixture::new();
        let items = ["a", "b", "odd", "c", "d"];
        let runs: RefCell<Vec<Vec<String>>> = RefCell::new(Vec::new());
        let results = fx.store.write(&fx.clock, Act::Note, |db, _| {
            let run = |db: &mut dyn Db, run: &[&str]| {
                let names: Vec<String> = run.iter().map(|item| item.to_string()).collect();
                runs.borrow_mut().push(names);
                run.iter().map(|item| note(db, item)).collect()
            };
            let single = |db: &mut dyn Db, item: &&str| each_alone(db, |db| note(db, item));
            in_runs(db, &items, &|item| *item != "odd", &run, &single)
        });
        assert!(results.unwrap().iter().all(|r| r.is_ok()));
        assert_eq!(*runs.borrow(), [vec!["a", "b"], vec!["c", "d"]]);
        assert_eq!(journaled(&fx), ["a", "b", "odd", "c", "d"]);
    }

    /// A run that fails after writing rolls back whole, and each of its
    /// items is written again alone: the one refused alone is refused,
    /// the others are recorded, and nothing of the failed run is left.
    #[test]
    fn a_run_refused_whole_is_written_again_item_by_item_each_refused_alone() {
        let mut fx = Fixture::new();
        let items = ["a", "bad", "c"];
        let results = fx.store.write(&fx.clock, Act::Note, |db, _| {
            let run = |db: &mut dyn Db, run: &[&str]| -> Result<Vec<i64>> {
                for item in run {
                    note(db, item)?;
                }
                Err(StoreError::Corrupt("the database refused the run".into()).into())
            };
            let single = |db: &mut dyn Db, item: &&str| {
                each_alone(db, |db| match *item {
                    "bad" => Err(StoreError::Corrupt("refused alone".into()).into()),
                    item => note(db, item),
                })
            };
            in_runs(db, &items, &|_| true, &run, &single)
        });
        let results = results.unwrap();
        assert!(results[0].is_ok() && results[2].is_ok());
        assert!(
            matches!(&results[1], Err(Error::Store(StoreError::Corrupt(m))) if m == "refused alone")
        );
        assert_eq!(journaled(&fx), ["a", "c"]);
    }
}
