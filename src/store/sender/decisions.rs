//! A policy's decisions as sets, on PostgreSQL (`store::sets`): the
//! operations of the batch and their recorded closes read in two
//! statements; each decision checked alone in Rust by the rules of the
//! decision script (`review_in`: [`check_review`], the policy's,
//! [`backing_close`]) against those rows; the decisions that pass, a run
//! at a time, as one conditional update of their operations, their
//! entries and their evidence rows in a statement each. A decision that
//! does not pass, a second one of an operation in the batch, or each of a
//! run the database refused, goes through `review_in` alone, which
//! refuses it as it refuses one decision.

use super::{evidence_record, review_in, review_transition, Decider, Transition};
use crate::audit::{self, EntryKind};
use crate::domain::Timestamp;
use crate::domain::{
    backing_close, canonical_json, check_policy_review, check_review, normalize_name, Operation,
    Policy, Provenance, Recorded, RecordedClose, Review, Verdict,
};
use crate::error::{Error, Result, StoreError};
use crate::faults::{crash_point, hold_point, CrashPoint, HoldPoint};
use crate::store::journal;
use crate::store::sets::{in_runs, insert_entries, insert_rows, ops_by_id};
use crate::store::sql::Db;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// A decision that passed its checks on the rows as read: the operation,
/// the verdict, the close it rests on, and its snapshot as JSON.
struct Checked {
    op: Operation,
    verdict: Verdict,
    close_seq: Option<i64>,
    snapshot: Value,
}

/// Records `reviews` as `policy`'s decisions at `at`, in order; one
/// result per review, refused alone as `record_policy_reviews` refuses.
pub(super) fn record_policy_sets(
    db: &mut dyn Db,
    policy: Policy,
    reviews: &[(Review<'_>, Provenance)],
    at: Timestamp,
) -> Result<Vec<Result<Recorded>>> {
    let ids: Vec<&str> = reviews.iter().map(|(r, _)| r.op_id).collect();
    let ops = ops_by_id(db, &ids)?;
    let closes = closes_of(db, &ids)?;
    let mut seen = HashSet::new();
    let checked: Vec<Option<Checked>> = (reviews.iter())
        .map(|(review, _)| {
            let first = seen.insert(review.op_id);
            let closes = closes.get(review.op_id).map_or(&[][..], Vec::as_slice);
            let op = ops.get(review.op_id).filter(|_| first)?;
            check(policy, review, op, closes)
        })
        .collect();
    hold_point(HoldPoint::AfterCheck);
    let items: Vec<usize> = (0..reviews.len()).collect();
    let plain = |i: &usize| checked[*i].is_some();
    let run = |db: &mut dyn Db, run: &[usize]| {
        let decided: Vec<(&Review<'_>, &Provenance, &Checked)> = (run.iter())
            .filter_map(|&i| Some((&reviews[i].0, &reviews[i].1, checked[i].as_ref()?)))
            .collect();
        decision_run(db, policy, &decided, at)
    };
    let single = |db: &mut dyn Db, i: &usize| {
        let (review, provenance) = &reviews[*i];
        match review_in(db, review, provenance, at, Decider::Policy(policy)) {
            Err(Error::Refused(refusal)) => Ok(Err(refusal.into())),
            Err(other) => Err(other),
            Ok(done) => Ok(Ok(done)),
        }
    };
    in_runs(db, &items, &plain, &run, &single)
}

/// The rules of `review_in` for a policy's decision on `op` as read;
/// `None` when any refuses (the decision script then refuses it alone,
/// naming what it names).
fn check(
    policy: Policy,
    review: &Review<'_>,
    op: &Operation,
    closes: &[RecordedClose],
) -> Option<Checked> {
    normalize_name(review.reviewer)?;
    let verdict = check_review(op, review, || None).ok()?;
    check_policy_review(policy, review, verdict).ok()?;
    let snapshot = serde_json::to_value(review.snapshot).ok()?;
    let close_seq = backing_close(&op.op_id, &snapshot, closes).ok()?;
    Some(Checked {
        op: op.clone(),
        verdict,
        close_seq,
        snapshot,
    })
}

/// The recorded closes of `ids`' operations, in seq order, as
/// `sender::recorded_closes` reads one operation's, in one statement.
fn closes_of(db: &mut dyn Db, ids: &[&str]) -> Result<HashMap<String, Vec<RecordedClose>>> {
    let entries = db.query(
        "SELECT j.op_id, j.seq, j.entry FROM journal j
             WHERE j.kind = 'closed' AND j.op_id IN (SELECT i.op_id COLLATE \"C\"
                 FROM json_array_elements_text(?1::json) AS i(op_id))
             ORDER BY j.seq",
        &[&json!(ids).to_string()],
        |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?, r.get::<String>(2)?)),
    )?;
    let mut closes: HashMap<String, Vec<RecordedClose>> = HashMap::new();
    for (op_id, seq, entry) in entries {
        let snapshot_sha256 = serde_json::from_str::<Value>(&entry).ok().and_then(|v| {
            v.get("snapshot_sha256")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        (closes.entry(op_id).or_default()).push(RecordedClose {
            seq,
            snapshot_sha256,
        });
    }
    Ok(closes)
}

/// A run of checked decisions: the conditional update of their operations
/// (every one must still be `unknown` at the version checked, else the run
/// fails and each is decided alone), their entries and evidence rows, and
/// the operations read back.
fn decision_run(
    db: &mut dyn Db,
    policy: Policy,
    run: &[(&Review<'_>, &Provenance, &Checked)],
    at: Timestamp,
) -> Result<Vec<Recorded>> {
    let transitions: Vec<Transition<'_>> = (run.iter())
        .map(|(review, provenance, c)| {
            let judged = (c.verdict, Some(policy), c.close_seq);
            review_transition(review, &c.op, judged, &c.snapshot, provenance, at)
        })
        .collect();
    move_operations(db, &transitions)?;
    crash_point(CrashPoint::ReconcileAfterStateUpdate);
    let last: i64 = db.query_one("SELECT COALESCE(MAX(seq), 0) FROM evidence", &[], |r| {
        r.get(0)
    })?;
    let mut head = journal::head(db)?;
    let (mut entries, mut rows, mut seqs) = (Vec::new(), Vec::new(), Vec::new());
    for (seq, t) in (last + 1..).zip(transitions) {
        let mut record = evidence_record(t, seq);
        let (kind, op_id) = (EntryKind::of_evidence(record.source), record.op_id.clone());
        let fields = audit::evidence(&record);
        let sealed = journal::seal_after(db, &mut head, kind, Some(&op_id), fields);
        record.journal_seq = sealed.seq;
        rows.push(evidence_row(&record));
        seqs.push(seq);
        entries.push((kind, op_id, sealed));
    }
    let entries: Vec<_> = (entries.iter())
        .map(|(kind, op_id, sealed)| (*kind, Some(op_id.as_str()), sealed.clone()))
        .collect();
    insert_entries(db, &entries)?;
    insert_rows(db, "evidence", crate::store::rows::EVIDENCE_COLUMNS, &rows)?;
    let ids: Vec<&str> = run.iter().map(|(r, _, _)| r.op_id).collect();
    let mut fresh = ops_by_id(db, &ids)?;
    let recorded = (run.iter().zip(seqs))
        .map(|((review, _, c), evidence_seq)| {
            let operation = fresh.remove(review.op_id).ok_or_else(|| {
                StoreError::Corrupt(format!("operation {} went missing", review.op_id))
            })?;
            Ok(Recorded {
                operation,
                verdict: c.verdict,
                evidence_seq,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    crash_point(CrashPoint::ReconcileBeforeCommit);
    Ok(recorded)
}

/// The conditional update of `transition`'s operations, as `transition`
/// makes one: every one `unknown` at the version read, or nothing.
fn move_operations(db: &mut dyn Db, transitions: &[Transition<'_>]) -> Result<()> {
    let moves: Vec<Value> = (transitions.iter())
        .map(|t| {
            json!({
                "op_id": t.op.op_id, "version": t.op.version, "state": t.to.as_str(),
                "effect_id": t.effect_id, "at": t.at.to_string(),
                "surplus": (!t.surplus.is_empty()).then(|| canonical_json(&json!(t.surplus))),
            })
        })
        .collect();
    let changed = db.execute(
        "UPDATE operations o
             SET state = x.state, version = o.version + 1,
                 confirmed_effect_id = COALESCE(x.effect_id, o.confirmed_effect_id),
                 updated_at = x.at, escalation = NULL,
                 surplus_effect_ids = COALESCE(x.surplus, o.surplus_effect_ids)
             FROM json_to_recordset(?1::json) AS x(op_id text, version bigint, state text,
                 effect_id text, at text, surplus text)
             WHERE o.op_id = x.op_id COLLATE \"C\" AND o.state = 'unknown'
               AND o.version = x.version",
        &[&json!(moves).to_string()],
    )?;
    if changed != transitions.len() {
        return Err(StoreError::Raced(format!(
            "{changed} of {} decisions found their operation as read",
            transitions.len()
        ))
        .into());
    }
    Ok(())
}

/// An evidence row as `sender::insert_evidence` binds it.
fn evidence_row(record: &crate::domain::EvidenceRecord) -> Value {
    json!({
        "seq": record.seq,
        "op_id": record.op_id,
        "source": record.source.as_str(),
        "reviewer": record.reviewer,
        "decision": record.decision.as_str(),
        "verdict": record.verdict.map(Verdict::as_str),
        "snapshot": canonical_json(&record.snapshot),
        "from_version": record.from_version,
        "to_version": record.to_version,
        "effect_id": record.effect_id,
        "receiver": record.receiver,
        "receiver_describe_sha256": record.receiver_describe_sha256,
        "response_sha256": record.response_sha256,
        "journal_seq": record.journal_seq,
        "recorded_at": record.recorded_at.to_string(),
        "receiver_id": record.receiver_id,
        "receiver_version": record.receiver_version,
        "policy": record.policy.map(Policy::as_str),
        "close_seq": record.close_seq,
    })
}
