//! The sender's database: the journal, and the tables that are its
//! projection (the outbox of operations, evidence, compensation approvals,
//! the dispatch log, closes).
//!
//! Every act is one write transaction ([`SqlStore::write`]; on SQLite
//! `BEGIN IMMEDIATE`) that appends its journal entry and writes its rows;
//! a state change is a conditional update (`WHERE state = ? AND version =
//! ?`) in it, so a change, its record and its entry commit or roll back
//! together. The rules that decide whether a change is allowed are the
//! pure functions of [`crate::domain`]; this module only runs them inside
//! the right transaction against freshly read rows.
//!
//! The acts are transaction scripts over [`Db`], and [`Outbox`] is
//! implemented once for every [`SqlStore`]: SQLite's ([`SqliteSender`],
//! here, its schema in `schema.rs`) and any other store that speaks SQL.
//!
//! No argument rests on SQLite's single writer alone, so that a store whose
//! writers run side by side keeps the same rules: an update that touches no
//! row is refused as the row, read again, now is; a violated unique key is
//! the refusal it means (`store::conflict`); and the time of an act is read
//! once the write lock is held ([`SqlStore::write`]).

use super::conflict::{self, Claim};
use super::rows::{
    approval_where, evidence_row, get_op, parse_evidence, query_ops, require_op, APPROVAL_COLUMNS,
    EVIDENCE_COLUMNS, EVIDENCE_READ, OP_SELECT,
};
use super::sql::{each_alone, Db, Dialect, SqlStore, Sqlite, ToValue};
use super::{journal, open_database, triage, Outbox, ReceiptRecorded, SqlContext};
use crate::audit::{self, EntryKind};
use crate::clock::Clock;
use crate::domain::team::Act;
use crate::domain::{
    backing_close, canonical_json, check_approval, check_compensation_dispatch,
    check_policy_review, check_review, Approval, CloseRecord, CompensationRequest, Decision,
    Effect, EvidenceRecord, EvidenceSource, NewObservation, NewOperation, Observation, OpKind,
    OpState, Operation, Policy, Provenance, Recorded, RecordedClose, Review, RouteAdvice,
    Timestamp, Verdict,
};
use crate::error::{DatabaseProblem, Error, Refusal, Result, StoreError};
use crate::faults::{crash_point, hold_point, CrashPoint, HoldPoint};
use crate::settings::OpenOptions;
use rusqlite::{Connection, TransactionBehavior};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod decisions;
mod prepares;
mod schema;
pub(crate) use schema::{ROLE, STATE_COUNTS_INSERT};

pub struct SqliteSender {
    conn: Connection,
    path: PathBuf,
}

/// Who made the latest recorded change to an operation: the reviewer, or
/// "a receipt".
fn last_changed_by(db: &mut dyn Db, op_id: &str) -> Option<String> {
    db.query_opt(
        "SELECT source, reviewer FROM evidence WHERE op_id = ?1 ORDER BY seq DESC LIMIT 1",
        &[&op_id],
        |r| {
            let source: String = r.get(0)?;
            let reviewer: Option<String> = r.get(1)?;
            Ok(match reviewer {
                Some(name) => format!("reviewer {name}"),
                None => format!("a {source}"),
            })
        },
    )
    .ok()
    .flatten()
}

/// A state change out of `unknown` and the evidence it rests on.
struct Transition<'a> {
    op: &'a Operation,
    to: OpState,
    source: EvidenceSource,
    reviewer: Option<&'a str>,
    decision: Decision,
    verdict: Option<Verdict>,
    evidence: &'a Value,
    effect_id: Option<&'a str>,
    /// The matches not kept of a kept duplicate (SPEC 14).
    surplus: Vec<String>,
    provenance: &'a Provenance,
    policy: Option<Policy>,
    /// The recorded close its snapshot rests on (SPEC 12).
    close_seq: Option<i64>,
    at: Timestamp,
}

/// Applies a transition out of `unknown` at its time (which moves
/// `updated_at` and clears the escalation marker) and appends its journal
/// entry and its evidence row (the entry's projection), in the caller's
/// transaction. Returns the evidence seq, or `None` when the conditional
/// update found the operation changed.
fn transition(db: &mut dyn Db, t: Transition<'_>) -> Result<Option<i64>> {
    let changed = db.execute(
        "UPDATE operations
             SET state = ?1, version = version + 1,
                 confirmed_effect_id = COALESCE(?2, confirmed_effect_id),
                 updated_at = ?5, escalation = NULL,
                 surplus_effect_ids = COALESCE(?6, surplus_effect_ids)
             WHERE op_id = ?3 AND state = 'unknown' AND version = ?4",
        &[
            &t.to.as_str(),
            &t.effect_id,
            &t.op.op_id,
            &t.op.version,
            &t.at.to_string(),
            &(!t.surplus.is_empty()).then(|| canonical_json(&serde_json::json!(t.surplus))),
        ],
    )?;
    if changed != 1 {
        return Ok(None);
    }
    if t.source != EvidenceSource::Receipt {
        crash_point(CrashPoint::ReconcileAfterStateUpdate);
    }
    let evidence_seq: i64 =
        db.query_one("SELECT COALESCE(MAX(seq), 0) + 1 FROM evidence", &[], |r| {
            r.get(0)
        })?;
    let mut record = evidence_record(t, evidence_seq);
    let sealed = journal::append(
        db,
        EntryKind::of_evidence(record.source),
        Some(&record.op_id),
        audit::evidence(&record),
    )?;
    record.journal_seq = sealed.seq;
    record.hash = sealed.hash;
    insert_evidence(db, &record)?;
    Ok(Some(record.seq))
}

/// The evidence row `seq` of a transition, before its entry is written
/// (no `journal_seq` and `hash` yet).
fn evidence_record(t: Transition<'_>, seq: i64) -> EvidenceRecord {
    EvidenceRecord {
        seq,
        op_id: t.op.op_id.clone(),
        source: t.source,
        reviewer: t.reviewer.map(str::to_string),
        decision: t.decision,
        verdict: t.verdict,
        snapshot: t.evidence.clone(),
        from_version: t.op.version,
        to_version: t.op.version + 1,
        effect_id: t.effect_id.map(str::to_string),
        surplus_effect_ids: t.surplus,
        receiver: t.provenance.receiver.clone(),
        receiver_describe_sha256: t.provenance.receiver_describe_sha256.clone(),
        response_sha256: t.provenance.response_sha256.clone(),
        receiver_id: t.provenance.receiver_id,
        receiver_version: t.provenance.receiver_version,
        policy: t.policy,
        close_seq: t.close_seq,
        recorded_at: t.at,
        journal_seq: 0,
        hash: String::new(),
    }
}

/// Applies a reviewer's transition, built from the row as the caller read
/// and checked it; returns the evidence seq. When another writer changed
/// the row after that read (a store whose writers run side by side), the
/// row is read again and the decision refused `stale_version` as it now
/// is: the version found and who changed it.
fn decide(db: &mut dyn Db, t: Transition<'_>) -> Result<i64> {
    let (op_id, expected) = (t.op.op_id.clone(), t.op.version);
    match transition(db, t)? {
        Some(seq) => Ok(seq),
        None => {
            let fresh = require_op(db, &op_id)?;
            Err(stale(db, expected, &fresh).into())
        }
    }
}

/// The state change a review records; a decision taken by `policy` is
/// evidence of the source `policy`, naming it.
fn review_transition<'a>(
    review: &'a Review<'a>,
    op: &'a Operation,
    (verdict, policy, close_seq): (Verdict, Option<Policy>, Option<i64>),
    snapshot: &'a Value,
    provenance: &'a Provenance,
    at: Timestamp,
) -> Transition<'a> {
    let to = match review.decision {
        Decision::Confirmed => OpState::Confirmed,
        Decision::NotApplied => OpState::NotApplied,
    };
    Transition {
        op,
        to,
        source: match policy {
            Some(_) => EvidenceSource::Policy,
            None => EvidenceSource::Review,
        },
        reviewer: crate::domain::normalize_name(review.reviewer),
        decision: review.decision,
        verdict: Some(verdict),
        evidence: snapshot,
        effect_id: review.confirmed_effect(),
        surplus: review.surplus_effects(),
        provenance,
        policy,
        close_seq,
        at,
    }
}

/// How a decision is recorded: by a person (with the read it rests on
/// recorded as their observation when `observe`), or by a policy.
#[derive(Clone, Copy)]
enum Decider {
    Person { observe: bool },
    Policy(Policy),
}

/// The decision script, written once: the rules of [`check_review`] (and
/// of the policy, for a policy's decision) against the row as it is inside
/// the caller's transaction, then (for a person, with `observe`) the
/// snapshot as their observation, with the verdict the rules found, the
/// conditional update and the evidence append with the full snapshot. A
/// refusal writes nothing.
fn review_in(
    db: &mut dyn Db,
    review: &Review<'_>,
    provenance: &Provenance,
    at: Timestamp,
    decider: Decider,
) -> Result<Recorded> {
    let Some(reviewer) = crate::domain::normalize_name(review.reviewer) else {
        return Err(Refusal::EmptyReviewer.into());
    };
    let op = require_op(db, review.op_id)?;
    let verdict = check_review(&op, review, || last_changed_by(db, &op.op_id))?;
    hold_point(HoldPoint::AfterCheck);
    let policy = match decider {
        Decider::Policy(policy) => {
            check_policy_review(policy, review, verdict)?;
            Some(policy)
        }
        Decider::Person { observe: true } => {
            let observation = NewObservation {
                op_id: review.op_id,
                by: reviewer,
                at,
                snapshot: review.snapshot,
                verdict,
                provenance,
            };
            triage::insert_observation(db, &observation)?;
            None
        }
        Decider::Person { observe: false } => None,
    };
    let snapshot = serde_json::to_value(review.snapshot)
        .map_err(|e| StoreError::Corrupt(format!("snapshot: {e}")))?;
    let close_seq = backing_close(&op.op_id, &snapshot, &recorded_closes(db, &op.op_id)?)?;
    let judged = (verdict, policy, close_seq);
    let transition_of = review_transition(review, &op, judged, &snapshot, provenance, at);
    let seq = decide(db, transition_of)?;
    let operation = require_op(db, &op.op_id)?;
    crash_point(CrashPoint::ReconcileBeforeCommit);
    Ok(Recorded {
        operation,
        verdict,
        evidence_seq: seq,
    })
}

/// The operation's recorded closes, in seq order, each with the canonical
/// SHA-256 of the snapshot its `closed` entry recorded (none for one an
/// older schema wrote): what a decision on a closed snapshot must name
/// (SPEC 12, [`backing_close`]).
fn recorded_closes(db: &mut dyn Db, op_id: &str) -> Result<Vec<RecordedClose>> {
    let entries = db.query(
        "SELECT seq, entry FROM journal WHERE op_id = ?1 AND kind = 'closed' ORDER BY seq",
        &[&op_id],
        |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?)),
    )?;
    Ok(entries
        .into_iter()
        .map(|(seq, entry)| RecordedClose {
            seq,
            snapshot_sha256: serde_json::from_str::<Value>(&entry).ok().and_then(|v| {
                v.get("snapshot_sha256")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
        })
        .collect())
}

fn insert_evidence(db: &mut dyn Db, record: &EvidenceRecord) -> Result<()> {
    db.execute(
        &format!(
            "INSERT INTO evidence ({EVIDENCE_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
                 ?18, ?19)"
        ),
        &[
            &record.seq,
            &record.op_id,
            &record.source.as_str(),
            &record.reviewer,
            &record.decision.as_str(),
            &record.verdict.map(Verdict::as_str),
            &canonical_json(&record.snapshot),
            &record.from_version,
            &record.to_version,
            &record.effect_id,
            &record.receiver,
            &record.receiver_describe_sha256,
            &record.response_sha256,
            &record.journal_seq,
            &record.recorded_at.to_string(),
            &record.receiver_id,
            &record.receiver_version,
            &record.policy.map(Policy::as_str),
            &record.close_seq,
        ],
    )?;
    Ok(())
}

impl SqliteSender {
    /// Opens the file, upgrading a schema-4 one at `now` first.
    pub fn open(path: &Path, options: OpenOptions, now: Timestamp) -> Result<Self, StoreError> {
        let conn = open_database(path, ROLE, options, now)?;
        Ok(SqliteSender {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The connection as a [`Db`], outside any transaction.
    pub(crate) fn db(&self) -> Sqlite<'_> {
        Sqlite {
            conn: &self.conn,
            path: &self.path,
        }
    }
}

impl SqlStore for SqliteSender {
    /// Takes the write lock (`BEGIN IMMEDIATE`), then reads the time of
    /// the act from `clock`, runs it and commits it (dropped on an error,
    /// the transaction rolls back).
    fn write<T>(
        &mut self,
        clock: &dyn Clock,
        _what: Act,
        act: impl FnOnce(&mut dyn Db, Timestamp) -> Result<T>,
    ) -> Result<T> {
        hold_point(HoldPoint::BeforeWriteLock);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(&self.path)?;
        crate::actlog::begin();
        let at = clock.now();
        let done = act(
            &mut Sqlite {
                conn: &tx,
                path: &self.path,
            },
            at,
        )?;
        tx.commit().at(&self.path)?;
        crate::actlog::ended("committed");
        Ok(done)
    }

    /// Reads on the connection, each statement in its own snapshot, as
    /// before scripts had a store to run on.
    fn read<T, E: From<StoreError>>(
        &self,
        act: impl FnOnce(&mut dyn Db) -> Result<T, E>,
    ) -> Result<T, E> {
        act(&mut self.db())
    }
}

/// The evidence rows `sql` (over [`EVIDENCE_READ`]) selects.
fn evidence_query(
    db: &mut dyn Db,
    sql: &str,
    params: &[&dyn ToValue],
) -> Result<Vec<EvidenceRecord>> {
    let rows = db.query(sql, params, evidence_row)?;
    Ok(rows
        .into_iter()
        .map(parse_evidence)
        .collect::<Result<Vec<_>, _>>()?)
}

/// A new original operation, `prepared` at version 1, and its journal
/// entry; refused when its id is taken or its action kind routes nowhere.
fn prepare_one(db: &mut dyn Db, new: &NewOperation<'_>, at: Timestamp) -> Result<Operation> {
    if get_op(db, new.op_id)?.is_some() {
        return Err(Refusal::DuplicateOperation(new.op_id.to_string()).into());
    }
    require_route(db, new.action_kind)?;
    insert_op(db, new, OpKind::Original, None, None, at)?;
    let op = require_op(db, new.op_id)?;
    let mut fields = with_registration(db, &op.op_id, audit::prepared(&op))?;
    if let Some(origin) = new.origin {
        fields.insert(journal::ORIGIN.into(), serde_json::json!(origin));
    }
    journal::append(db, EntryKind::Prepared, Some(&op.op_id), fields)?;
    Ok(op)
}

/// The outbox's flow, written once for every store whose outbox is SQL.
impl<S: SqlStore> Outbox for S {
    /// Puts a new original operation in the outbox, `prepared` at version 1.
    fn prepare(&mut self, new: &NewOperation<'_>, clock: &dyn Clock) -> Result<Operation> {
        self.write(clock, Act::Prepare, |db, at| prepare_one(db, new, at))
    }

    fn prepare_each(
        &mut self,
        news: &[NewOperation<'_>],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Operation>>> {
        self.write(clock, Act::Prepare, |db, at| {
            let single = |db: &mut dyn Db, new: &NewOperation<'_>| {
                each_alone(db, |db| prepare_one(db, new, at))
            };
            match db.dialect() {
                Dialect::Postgres => prepares::prepare_sets(db, news, at, &single),
                Dialect::Sqlite => news.iter().map(|new| single(db, new)).collect(),
            }
        })
    }

    fn get(&self, op_id: &str) -> Result<Option<Operation>> {
        self.read(|db| get_op(db, op_id))
    }

    /// The operation, or the `unknown_operation` refusal.
    fn require(&self, op_id: &str) -> Result<Operation> {
        self.read(|db| require_op(db, op_id))
    }

    fn require_each(&self, op_ids: &[&str]) -> Result<Vec<Result<Operation>>> {
        self.read(|db| {
            if db.dialect() == Dialect::Postgres {
                let found = super::sets::ops_by_id(db, op_ids)?;
                return Ok((op_ids.iter())
                    .map(|op_id| {
                        let op = found.get(*op_id).cloned();
                        op.ok_or_else(|| Refusal::UnknownOperation(op_id.to_string()).into())
                    })
                    .collect());
            }
            let mut found = Vec::with_capacity(op_ids.len());
            for op_id in op_ids {
                found.push(match require_op(db, op_id) {
                    Err(Error::Refused(refusal)) => Err(refusal.into()),
                    other => Ok(other?),
                });
            }
            Ok(found)
        })
    }

    /// One page of the outbox in `op_id` order, starting after `after`
    /// (keyset paging: the cost depends on the page, not the table).
    fn list(
        &self,
        state: Option<OpState>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        let after = after.unwrap_or("");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|db| match state {
            Some(state) => query_ops(
                db,
                &format!(
                    "{OP_SELECT} WHERE o.state = ?1 AND o.op_id > ?2 ORDER BY o.op_id LIMIT ?3"
                ),
                &[&state.as_str(), &after, &limit],
            ),
            None => query_ops(
                db,
                &format!("{OP_SELECT} WHERE o.op_id > ?1 ORDER BY o.op_id LIMIT ?2"),
                &[&after, &limit],
            ),
        })
    }

    /// Operations per state, from the trigger-maintained counts table, so it
    /// costs the same at 100 ops as at 100,000.
    fn count_by_state(&self) -> Result<BTreeMap<OpState, i64>> {
        let rows = self.read(|db| {
            db.query("SELECT state, n FROM state_counts", &[], |r| {
                Ok((r.get::<String>(0)?, r.get::<i64>(1)?))
            })
        })?;
        rows.into_iter()
            .map(|(state, n)| {
                OpState::parse(&state)
                    .map(|s| (s, n))
                    .ok_or_else(|| StoreError::Corrupt(format!("state count {state}")).into())
            })
            .collect()
    }

    /// Moves a `prepared` operation to `unknown` and logs the dispatch, in
    /// one transaction that commits before the receiver is invoked. Anything
    /// not `prepared` is refused as a blind retry; a compensation is refused
    /// unless its approval still holds.
    fn begin_dispatch(&mut self, op_id: &str, clock: &dyn Clock) -> Result<Operation> {
        self.write(clock, Act::Dispatch, |db, at| {
            let op = require_op(db, op_id)?;
            check_dispatch(db, &op)?;
            hold_point(HoldPoint::AfterCheck);
            mark_dispatched(db, &op, at)?;
            db.execute(
                "INSERT INTO dispatch_log (seq, op_id, from_version)
             VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_log), ?1, ?2)",
                &[&op_id, &op.version],
            )?;
            let fields = audit::dispatched(op.version, op.version + 1, at);
            journal::append(db, EntryKind::Dispatched, Some(op_id), fields)?;
            require_op(db, op_id)
        })
    }

    /// Records a receipt the receiver printed for a dispatch: `unknown` at
    /// the dispatched version becomes `confirmed`, with the receipt as its
    /// evidence. Returns `None` when the operation changed meanwhile (a
    /// reviewer decided first); the receipt is then not recorded (the
    /// transaction commits having written nothing).
    fn record_receipt(
        &mut self,
        op: &Operation,
        receipt: &Effect,
        provenance: &Provenance,
        clock: &dyn Clock,
    ) -> Result<Option<ReceiptRecorded>> {
        self.write(clock, Act::Receipt, |db, at| {
            check_receipt(db, &op.op_id)?;
            let evidence = serde_json::json!({ "receipt": receipt });
            let seq = transition(
                db,
                Transition {
                    op,
                    to: OpState::Confirmed,
                    source: EvidenceSource::Receipt,
                    reviewer: None,
                    decision: Decision::Confirmed,
                    verdict: None,
                    evidence: &evidence,
                    effect_id: Some(&receipt.effect_id),
                    surplus: Vec::new(),
                    provenance,
                    policy: None,
                    close_seq: None,
                    at,
                },
            )?;
            let Some(seq) = seq else {
                return late_receipt(db, &op.op_id, receipt, provenance, at);
            };
            let op = require_op(db, &op.op_id)?;
            crash_point(CrashPoint::ReceiptBeforeCommit);
            Ok(Some(ReceiptRecorded {
                operation: op,
                seq,
                late: false,
                contradicts: false,
            }))
        })
    }

    /// Runs the rules of [`check_review`] against the stored row without
    /// writing anything: what [`Outbox::record_review`] would refuse.
    /// A caller about to take a closing snapshot (a receiver mutation) asks
    /// first, so a decision that is going to be refused closes nothing.
    fn precheck_review(&self, review: &Review<'_>) -> Result<Verdict> {
        self.read(|db| {
            let op = require_op(db, review.op_id)?;
            Ok(check_review(&op, review, || {
                last_changed_by(db, &op.op_id)
            })?)
        })
    }

    /// Records a reviewer's decision: the rules of [`check_review`] against
    /// the row as it is inside this transaction, then (with `observe`) the
    /// snapshot it rests on as the reviewer's observation, with the verdict
    /// the rules found, the conditional update and the evidence append with
    /// the full snapshot. If the append fails, the state change rolls back
    /// with it.
    fn record_review(
        &mut self,
        review: &Review<'_>,
        provenance: &Provenance,
        clock: &dyn Clock,
        observe: bool,
    ) -> Result<Recorded> {
        if crate::domain::normalize_name(review.reviewer).is_none() {
            return Err(Refusal::EmptyReviewer.into());
        }
        self.write(clock, Act::Decide, |db, at| {
            review_in(db, review, provenance, at, Decider::Person { observe })
        })
    }

    /// Records the decisions `policy` took, each on its own snapshot, in
    /// one transaction: each is checked as a review is (its own version,
    /// its state, its verdict under the policy) and refused alone, while
    /// the others are recorded. A storage failure fails them all.
    fn record_policy_reviews(
        &mut self,
        policy: Policy,
        reviews: &[(Review<'_>, Provenance)],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Recorded>>> {
        self.write(clock, Act::Resolve, |db, at| {
            if db.dialect() == Dialect::Postgres {
                return decisions::record_policy_sets(db, policy, reviews, at);
            }
            let mut recorded = Vec::with_capacity(reviews.len());
            for (review, provenance) in reviews {
                match review_in(db, review, provenance, at, Decider::Policy(policy)) {
                    Err(crate::error::Error::Refused(refusal)) => {
                        recorded.push(Err(refusal.into()))
                    }
                    Err(other) => return Err(other),
                    Ok(done) => recorded.push(Ok(done)),
                }
            }
            Ok(recorded)
        })
    }

    /// Approves a compensation for one confirmed effect and prepares the
    /// compensation operation, in one transaction.
    fn approve_compensation(
        &mut self,
        request: &CompensationRequest<'_>,
        clock: &dyn Clock,
    ) -> Result<Approval> {
        let Some(approver) = crate::domain::normalize_name(request.approver) else {
            return Err(Refusal::EmptyReviewer.into());
        };
        self.write(clock, Act::Approve, |db, at| {
            approve(db, request, approver, at)
        })
    }

    /// Records closes the receivers have committed: for each, a `closed`
    /// entry and its `closes` row, then the observation of the closing
    /// read, each under its own savepoint, in one transaction of the
    /// outbox (the receivers' were others, already committed).
    fn record_closes(
        &mut self,
        closes: &[(CloseRecord, NewObservation<'_>)],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Observation>>> {
        self.write(clock, Act::Close, |db, at| {
            let closes: Vec<(CloseRecord, NewObservation<'_>)> = (closes.iter())
                .map(|(close, observation)| {
                    let closed_at = at;
                    let close = CloseRecord {
                        closed_at,
                        ..close.clone()
                    };
                    (close, NewObservation { at, ..*observation })
                })
                .collect();
            let alone =
                |db: &mut dyn Db, (close, observation): &(CloseRecord, NewObservation<'_>)| {
                    record_close(db, close, observation)
                };
            match db.dialect() {
                Dialect::Postgres => super::sets::record_closes(db, &closes, &alone),
                Dialect::Sqlite => (closes.iter())
                    .map(|close| each_alone(db, |db| alone(db, close)))
                    .collect(),
            }
        })
    }

    /// The evidence of one operation, oldest first.
    fn evidence(&self, op_id: &str) -> Result<Vec<EvidenceRecord>> {
        let sql = format!("{EVIDENCE_READ} WHERE e.op_id = ?1 ORDER BY e.seq");
        self.read(|db| evidence_query(db, &sql, &[&op_id]))
    }

    /// Every evidence row in `seq` order.
    fn evidence_log(&self) -> Result<Vec<EvidenceRecord>> {
        let sql = format!("{EVIDENCE_READ} ORDER BY e.seq");
        self.read(|db| evidence_query(db, &sql, &[]))
    }

    /// Approvals where the operation is the original or the compensation.
    fn approvals(&self, op_id: &str) -> Result<Vec<Approval>> {
        self.read(|db| {
            let mut all = approval_where(db, "original_op_id", op_id)?;
            all.extend(approval_where(db, "compensation_op_id", op_id)?);
            Ok(all)
        })
    }

    /// How many times the sender invoked the receiver for an operation.
    fn dispatch_count(&self, op_id: &str) -> Result<i64, StoreError> {
        self.read(|db| {
            db.query_one(
                "SELECT COUNT(*) FROM dispatch_log WHERE op_id = ?1",
                &[&op_id],
                |r| r.get(0),
            )
        })
    }
}

/// The database's four-eyes refusal of an approval (team mode) as the
/// refusal `same_person`, naming the original and the role.
fn four_eyes(error: Error, original_op_id: &str) -> Error {
    match error {
        Error::Store(StoreError::Database {
            problem: DatabaseProblem::SamePerson { role, .. },
            ..
        }) => Refusal::SamePerson {
            op_id: original_op_id.to_string(),
            role,
        }
        .into(),
        other => other,
    }
}

/// The approval of a compensation and its operation, in the caller's
/// transaction: the rules of [`check_approval`] against the rows as read,
/// then the approval's row, the compensation's, and the `approved` entry.
fn approve(
    db: &mut dyn Db,
    request: &CompensationRequest<'_>,
    approver: &str,
    at: Timestamp,
) -> Result<Approval> {
    let original = require_op(db, request.original_op_id)?;
    let existing: Vec<Approval> = approval_where(db, "original_op_id", request.original_op_id)?
        .into_iter()
        .filter(|a| a.effect_id == request.effect_id)
        .collect();
    check_approval(&original, request, existing.first())
        .map_err(|refused| naming_who(db, refused, Some(&original)))?;
    if get_op(db, request.compensation_op_id)?.is_some() {
        return Err(Refusal::DuplicateOperation(request.compensation_op_id.to_string()).into());
    }
    insert_approval(db, request, approver).map_err(|e| four_eyes(e, request.original_op_id))?;
    crash_point(CrashPoint::ApprovalAfterApprovalInsert);
    insert_op(
        db,
        &NewOperation {
            op_id: request.compensation_op_id,
            action_kind: request.action_kind,
            payload: request.payload,
            origin: None,
        },
        OpKind::Compensation,
        Some(request.effect_id),
        Some(request.original_op_id),
        at,
    )?;
    let approval = Approval {
        reason: request.reason.map(str::to_string),
        original_op_id: request.original_op_id.to_string(),
        effect_id: request.effect_id.to_string(),
        approved_version: request.expected_version,
        approver: approver.to_string(),
        compensation_op_id: request.compensation_op_id.to_string(),
        action_kind: request.action_kind.to_string(),
        payload: request.payload.clone(),
    };
    let compensation = require_op(db, request.compensation_op_id)?;
    let fields = with_registration(
        db,
        &compensation.op_id,
        audit::approved(&approval, &compensation),
    )?;
    let op_id = Some(request.compensation_op_id);
    journal::append(db, EntryKind::Approved, op_id, fields)?;
    crash_point(CrashPoint::ApprovalBeforeCommit);
    Ok(approval)
}

/// The rules of a dispatch against `op` as read: anything not `prepared`
/// is a blind retry; a compensation needs its approval to still hold
/// ([`check_compensation_dispatch`]).
fn check_dispatch(db: &mut dyn Db, op: &Operation) -> Result<()> {
    if op.state != OpState::Prepared {
        return Err(Refusal::BlindRetry {
            op_id: op.op_id.clone(),
            state: op.state,
        }
        .into());
    }
    if op.kind == OpKind::Compensation {
        let approval = approval_where(db, "compensation_op_id", &op.op_id)?;
        let original = match approval.first() {
            Some(a) => get_op(db, &a.original_op_id)?,
            None => None,
        };
        check_compensation_dispatch(op, approval.first(), original.as_ref())
            .map_err(|refused| naming_who(db, refused, original.as_ref()))?;
    }
    Ok(())
}

/// SPEC 12: a receipt answers the operation's one dispatch, as its first
/// outcome (no receipt and no failed `apply` of it before), in the name of
/// the role that dispatched it. The journal of one operation is short, so
/// its entries of those kinds are read whole; the database of team mode
/// holds the same rule for a login that writes without recon.
fn check_receipt(db: &mut dyn Db, op_id: &str) -> Result<()> {
    let entries = db.query(
        "SELECT kind, entry FROM journal WHERE op_id = ?1
             AND kind IN ('dispatched', 'receipt', 'call_failed') ORDER BY seq",
        &[&op_id],
        |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)),
    )?;
    let field = |entry: &str, name: &str| {
        serde_json::from_str::<Value>(entry)
            .ok()
            .and_then(|v| v.get(name).and_then(Value::as_str).map(str::to_string))
    };
    let mut dispatcher: Option<Option<String>> = None;
    for (kind, entry) in &entries {
        let answered = kind == "receipt"
            || (kind == "call_failed" && field(entry, "verb").as_deref() == Some("apply"));
        if kind == "dispatched" && dispatcher.is_none() {
            dispatcher = Some(field(entry, journal::ROLE));
        } else if answered && dispatcher.is_some() {
            return Err(rule(format!(
                "operation {op_id}: a receipt is the first outcome of its dispatch, and it has \
                 had one"
            )));
        }
    }
    match dispatcher {
        None => Err(rule(format!(
            "operation {op_id}: a receipt answers a dispatch, and it has none"
        ))),
        Some(role) if role.as_deref() != db.role() => Err(rule(format!(
            "operation {op_id}: its receipt is written by the login that dispatched it ({}), \
             not {}",
            role.unwrap_or_default(),
            db.role().unwrap_or_default()
        ))),
        Some(_) => Ok(()),
    }
}

/// A receipt that reached its operation after a decision (SPEC 12): never
/// dropped, journaled as a `receipt` entry with `late: true` that changes
/// no state; recorded as a read of one match (its observation row), which
/// raises the contradiction marker when it contradicts the decision
/// (section 9's rule; the entry says `contradicts: true`). `None` when the
/// operation is not decided (still `unknown`, at another version).
fn late_receipt(
    db: &mut dyn Db,
    op_id: &str,
    receipt: &Effect,
    provenance: &Provenance,
    at: Timestamp,
) -> Result<Option<ReceiptRecorded>> {
    let op = require_op(db, op_id)?;
    if !matches!(op.state, OpState::Confirmed | OpState::NotApplied) {
        return Ok(None);
    }
    let snapshot = crate::domain::Snapshot {
        op_id: op_id.to_string(),
        matches: vec![receipt.clone()],
        complete: false,
        authoritative: false,
        closed: false,
        closed_by: None,
    };
    let read = NewObservation {
        op_id,
        by: LATE_RECEIPT_BY,
        at,
        snapshot: &snapshot,
        verdict: crate::domain::classify(op.scope(), &snapshot),
        provenance,
    };
    let (seq, contradicts) = triage::insert_late_receipt(db, &read, &receipt.effect_id)?;
    Ok(Some(ReceiptRecorded {
        operation: require_op(db, op_id)?,
        seq,
        late: true,
        contradicts,
    }))
}

/// Who a late receipt's read is recorded as: the receiver's receipt, not
/// a person.
pub(crate) const LATE_RECEIPT_BY: &str = "receipt";

/// A refusal by a rule of SPEC 12.
fn rule(rule: String) -> Error {
    Refusal::RuleViolation { rule }.into()
}

/// Moves `op`, as the caller read it, from `prepared` to `unknown`. The
/// update holds under its own predicate what [`check_dispatch`] checked:
/// the state and version read, and for a compensation an approval whose
/// original is still confirmed, at the approved version, with the
/// approved effect and action. When it changes no row (a writer changed
/// the operation or its original after the read), the row is read again
/// and refused as what it now is; nothing is logged, so the receiver is
/// never invoked twice.
fn mark_dispatched(db: &mut dyn Db, op: &Operation, at: Timestamp) -> Result<()> {
    let changed = db.execute(
        "UPDATE operations SET state = 'unknown', version = version + 1,
                 updated_at = ?3, last_dispatched_at = ?3,
                 dispatch_count = dispatch_count + 1
             WHERE op_id = ?1 AND state = 'prepared' AND version = ?2
               AND (kind = 'original' OR EXISTS (
                   SELECT 1 FROM compensation_approvals a
                   JOIN operations o ON o.op_id = a.original_op_id
                   WHERE a.compensation_op_id = operations.op_id
                     AND a.effect_id = operations.compensates_effect_id
                     AND a.action_kind = operations.action_kind
                     AND o.state = 'confirmed' AND o.version = a.approved_version
                     -- a surplus effect's approval was held to the surplus,
                     -- which is set once, with the confirmation (SPEC 14)
                     AND (o.confirmed_effect_id = a.effect_id
                         OR o.surplus_effect_ids IS NOT NULL)))",
        &[&op.op_id, &op.version, &at.to_string()],
    )?;
    if changed == 1 {
        return Ok(());
    }
    let fresh = require_op(db, &op.op_id)?;
    check_dispatch(db, &fresh)?;
    if fresh.version != op.version {
        return Err(stale(db, op.version, &fresh).into());
    }
    Err(StoreError::Corrupt(format!(
        "the dispatch of {} matched no row, though every rule holds on it",
        op.op_id
    ))
    .into())
}

/// The `stale_version` refusal of a writer that expected `expected`,
/// naming the version found in `fresh` (the row as it is now) and who
/// changed it last.
fn stale(db: &mut dyn Db, expected: i64, fresh: &Operation) -> Refusal {
    Refusal::StaleVersion {
        expected,
        found: fresh.version,
        state: fresh.state,
        changed_by: last_changed_by(db, &fresh.op_id),
    }
}

/// A `stale_version` refusal about `op` that names nobody, naming who
/// changed it last; any other refusal as it is.
fn naming_who(db: &mut dyn Db, refused: Refusal, op: Option<&Operation>) -> Refusal {
    match (refused, op) {
        (
            Refusal::StaleVersion {
                expected,
                changed_by: None,
                ..
            },
            Some(op),
        ) => stale(db, expected, op),
        (refused, _) => refused,
    }
}

/// The route of a new operation, as SQL over `?action` and `?original`: a
/// compensation goes to the receiver of the operation it compensates; an
/// original to the receiver its action kind is routed to, or else to the
/// one that takes every kind (`*`), or nowhere (NULL: there is no implicit
/// receiver). Computed in the inserting transaction, so it cannot race a
/// registration.
pub(crate) fn route_sql(action: &str, original: &str) -> String {
    format!(
        "COALESCE((SELECT receiver FROM operations WHERE op_id = {original}),
                  (SELECT receiver FROM routes WHERE action_kind = {action}),
                  (SELECT receiver FROM routes WHERE action_kind = '*'))"
    )
}

/// An operation's creating entry with the id of the registration it was
/// routed to, so that the journal proves the route to one identity.
fn with_registration(
    db: &mut dyn Db,
    op_id: &str,
    mut fields: serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>> {
    if let Some(id) = super::receivers::receiver_id_of(db, op_id)? {
        fields.insert("receiver_id".into(), id.into());
    }
    Ok(fields)
}

/// Refuses `no_receiver`, before anything is written, an original whose
/// action kind routes nowhere.
fn require_route(db: &mut dyn Db, action_kind: &str) -> Result<()> {
    let routed: Option<String> = db.query_one(
        &format!("SELECT {}", route_sql("?1", "NULL")),
        &[&action_kind],
        |r| r.get(0),
    )?;
    if routed.is_some() {
        return Ok(());
    }
    let kinds = db.query("SELECT action_kind FROM routes", &[], |r| r.get(0))?;
    let advice = match crate::domain::names::nearest_kind(action_kind, &kinds) {
        Some(near) => RouteAdvice::Nearest(near.to_string()),
        None => RouteAdvice::Register,
    };
    Err(Refusal::NoReceiver {
        kind: action_kind.to_string(),
        advice,
    }
    .into())
}

/// Writes an approval's row: refused `already_approved` when the effect
/// has one, `duplicate_operation` when its compensation id is taken.
fn insert_approval(
    db: &mut dyn Db,
    request: &CompensationRequest<'_>,
    approver: &str,
) -> Result<()> {
    let claim = Claim {
        op_id: Some(request.compensation_op_id),
        approval: Some((request.original_op_id, request.effect_id)),
        ..Claim::default()
    };
    conflict::insert(
        db,
        &format!(
            "INSERT INTO compensation_approvals ({APPROVAL_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ),
        &[
            &request.original_op_id,
            &request.effect_id,
            &request.expected_version,
            &approver,
            &request.compensation_op_id,
            &request.action_kind,
            &canonical_json(request.payload),
        ],
        &claim,
    )?;
    Ok(())
}

fn insert_op(
    db: &mut dyn Db,
    new: &NewOperation<'_>,
    kind: OpKind,
    compensates_effect_id: Option<&str>,
    compensates_op_id: Option<&str>,
    at: Timestamp,
) -> Result<()> {
    let claim = Claim {
        op_id: Some(new.op_id),
        ..Claim::default()
    };
    conflict::insert(
        db,
        &format!(
            "INSERT INTO operations
             (op_id, kind, action_kind, payload, state, version,
              compensates_effect_id, compensates_op_id, receiver, created_at, updated_at,
              receiver_id)
         VALUES (?1, ?2, ?3, ?4, 'prepared', 1, ?5, ?6, {route}, ?7, ?7,
              COALESCE((SELECT receiver_id FROM operations WHERE op_id = ?6),
                       (SELECT id FROM receivers WHERE name = {route})))",
            route = route_sql("?3", "?6")
        ),
        &[
            &new.op_id,
            &kind.as_str(),
            &new.action_kind,
            &canonical_json(new.payload),
            &compensates_effect_id,
            &compensates_op_id,
            &at.to_string(),
        ],
        &claim,
    )?;
    Ok(())
}

/// An outbox in a temporary directory with recon's own ledger registered
/// for every action kind, on a stopped clock: what the store's own tests
/// start from.
#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests;

/// One close the receiver committed: its `closed` entry and `closes` row,
/// and the observation of its closing read.
fn record_close(
    db: &mut dyn Db,
    close: &CloseRecord,
    observation: &NewObservation<'_>,
) -> Result<Observation> {
    let op_id = observation.op_id;
    require_op(db, op_id)?;
    let fields = audit::closed(close);
    let sealed = journal::append(db, EntryKind::Closed, Some(op_id), fields)?;
    db.execute(
        "INSERT INTO closes (op_id, receiver, authorized_by, journal_seq, closed_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        &[
            &op_id,
            &close.receiver,
            &close.authorized_by,
            &sealed.seq,
            &close.closed_at.to_string(),
        ],
    )?;
    triage::insert_observation(db, observation)
}
