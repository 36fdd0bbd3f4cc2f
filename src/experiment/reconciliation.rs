//! The `reconciliation` claim of SPEC section 5: every refusal code of a
//! review, the stale second reviewer, the rollback when the evidence write
//! fails, and the full snapshot kept in the evidence row.
//!
//! Each refusal is the code the engine returned for a review that really was
//! attempted, and the operation is read back afterwards on a new connection
//! to show that none of them changed it. The failing evidence write is a
//! real SQLite trigger installed for the step, so the rollback is observed
//! in the stored state, not assumed. The evidence row is compared with a
//! fresh snapshot of the same receiver to show it holds the whole snapshot.

use super::{crashing, email, outcome, Lab, Origin};
use crate::domain::{Decision, EvidenceRecord, Operation, Review, Snapshot};
use crate::error::{Error, Result, StoreError};
use crate::receiver::Fault;
use crate::workspace::ReconcileRequest;
use serde_json::{json, Map, Value};

/// Each refusal of `reconcile`, the stale second reviewer, the rollback of a
/// failed evidence write, and the full snapshot in the evidence row.
pub(super) fn reconciliation(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let ops = Ops::set_up(&mut lab)?;
    let refusals = refusals(&mut lab, &ops)?;
    let untouched = lab.reopened(&ops.applied.op_id)?;
    let evidence_write_failure = evidence_write_failure(&mut lab, &ops.applied)?;

    // First reviewer wins; the stale second reviewer changes nothing.
    let applied = &ops.applied;
    let first = lab.review(&applied.op_id, "rosa", Decision::Confirmed, applied.version)?;
    let second = outcome(lab.review(&applied.op_id, "sam", Decision::Confirmed, applied.version))?;
    let second_detail =
        match lab.review(&applied.op_id, "sam", Decision::Confirmed, applied.version) {
            Err(Error::Refused(refusal)) => json!(refusal.to_string()),
            other => json!(format!("{:?}", other.map(|r| r.evidence_seq))),
        };
    let evidence = lab.ws.evidence(&applied.op_id)?;
    let final_state = lab.reopened(&applied.op_id)?;
    let snapshot_now = lab.ws.snapshot(&applied.op_id, None)?.snapshot;
    Ok(json!({
        "refusals": refusals,
        "after_refusals": {"state": untouched.state, "version": untouched.version},
        "evidence_write_failure": evidence_write_failure,
        "first_reviewer": {
            "reviewer": evidence.first().and_then(|e| e.reviewer.clone()),
            "verdict": first.verdict,
            "state": first.operation.state,
            "version": first.operation.version,
            "confirmed_effect_id": first.operation.confirmed_effect_id,
        },
        "stale_second_reviewer": {"result": second, "message": second_detail},
        "final": {
            "state": final_state.state,
            "version": final_state.version,
            "evidence_rows": evidence.len(),
        },
        "evidence_row": evidence_row(evidence.first(), &snapshot_now),
    }))
}

/// The ops under review: one whose receiver committed before its receipt
/// was lost, one whose request died before the receiver wrote anything,
/// and one never dispatched.
struct Ops {
    applied: Operation,
    absent: Operation,
    prepared: Operation,
}

impl Ops {
    fn set_up(lab: &mut Lab) -> Result<Ops> {
        let applied = lost(lab, "op-rec-applied", Fault::CrashAfterCommit)?;
        let absent = lost(lab, "op-rec-absent", Fault::CrashBeforeCommit)?;
        let prepared = lab.prepare(
            "op-rec-prepared",
            "send_email",
            email("p@example.com", "Draft"),
        )?;
        Ok(Ops {
            applied,
            absent,
            prepared,
        })
    }
}

/// Prepares an email and dispatches it to a receiver that dies at `fault`;
/// returns the op as a restarted sender reads it.
fn lost(lab: &mut Lab, id: &str, fault: Fault) -> Result<Operation> {
    lab.prepare(
        id,
        "send_email",
        email(&format!("{id}@example.com"), "Statement available"),
    )?;
    lab.ws.dispatch(id, crashing(fault))?;
    lab.reopened(id)
}

/// Every way a review is refused, each attempted for real and named after
/// what was wrong with it: first the request itself, then the decision
/// against the evidence and the stored op.
fn refusals(lab: &mut Lab, ops: &Ops) -> Result<Map<String, Value>> {
    let mut refusals = malformed_reviews(lab, &ops.applied, &ops.absent)?;
    refusals.extend(unsupported_reviews(lab, ops)?);
    Ok(refusals)
}

/// Reviews refused for what they carry: a blank reviewer, another op's
/// snapshot, a payload wider than the op's.
fn malformed_reviews(
    lab: &mut Lab,
    applied: &Operation,
    absent: &Operation,
) -> Result<Map<String, Value>> {
    let mut refusals = Map::new();
    refusals.insert(
        "blank_reviewer".into(),
        outcome(lab.review(&applied.op_id, "   ", Decision::Confirmed, applied.version))?,
    );
    let other = lab.ws.snapshot(&absent.op_id, None)?;
    refusals.insert(
        "snapshot_for_another_op".into(),
        outcome(lab.ws.record_review(
            &Review {
                keep: None,
                op_id: &applied.op_id,
                payload: &applied.payload,
                reviewer: "rosa",
                decision: Decision::Confirmed,
                snapshot: &other.snapshot,
                expected_version: applied.version,
            },
            &other.provenance,
        ))?,
    );
    let wider = json!({"to": "everyone@example.com"});
    refusals.insert(
        "payload_scope_differs".into(),
        outcome(lab.ws.reconcile(&ReconcileRequest {
            keep: None,
            op_id: &applied.op_id,
            reviewer: "rosa",
            decision: Decision::Confirmed,
            expected_version: applied.version,
            payload: Some(&wider),
            close_authorized_by: None,
        }))?,
    );
    Ok(refusals)
}

/// Well-formed reviews refused because the verdict does not support the
/// decision, the version is not the one stored, or the op is not `unknown`.
fn unsupported_reviews(lab: &mut Lab, ops: &Ops) -> Result<Map<String, Value>> {
    let Ops {
        applied,
        absent,
        prepared,
    } = ops;
    let cases = [
        (
            "not_applied_on_existence_only",
            applied.op_id.as_str(),
            Decision::NotApplied,
            applied.version,
        ),
        (
            "not_applied_on_inconclusive",
            &absent.op_id,
            Decision::NotApplied,
            absent.version,
        ),
        (
            "confirmed_on_inconclusive",
            &absent.op_id,
            Decision::Confirmed,
            absent.version,
        ),
        (
            "wrong_expected_version",
            &applied.op_id,
            Decision::Confirmed,
            applied.version - 1,
        ),
        (
            "prepared_op",
            &prepared.op_id,
            Decision::Confirmed,
            prepared.version,
        ),
        ("unknown_op", "op-does-not-exist", Decision::Confirmed, 1),
    ];
    let mut refusals = Map::new();
    for (name, op_id, decision, version) in cases {
        let refused = outcome(lab.review(op_id, "rosa", decision, version))?;
        refusals.insert(name.to_string(), refused);
    }
    Ok(refusals)
}

/// A failing evidence write rolls the state change back with it: the review
/// fails with a storage error and the op is read back unchanged.
fn evidence_write_failure(lab: &mut Lab, applied: &Operation) -> Result<Value> {
    lab.ws.drills()?.install_evidence_fault()?;
    let failed = lab.review(&applied.op_id, "rosa", Decision::Confirmed, applied.version);
    let failure = match failed {
        Ok(_) => json!("recorded"),
        Err(Error::Store(StoreError::Sqlite { .. })) => json!("storage_error"),
        Err(other) => return Err(other),
    };
    lab.ws.drills()?.remove_evidence_fault()?;
    let after = lab.reopened(&applied.op_id)?;
    Ok(json!({
        "result": failure,
        "state": after.state,
        "version": after.version,
        "evidence_rows": lab.ws.evidence(&applied.op_id)?.len(),
    }))
}

/// The first evidence row as stored, and whether its snapshot is the whole
/// snapshot a fresh read of the same receiver gives.
fn evidence_row(row: Option<&EvidenceRecord>, snapshot_now: &Snapshot) -> Value {
    let stored_snapshot: Option<Snapshot> =
        row.and_then(|e| serde_json::from_value(e.snapshot.clone()).ok());
    json!({
        "source": row.map(|e| e.source),
        "decision": row.map(|e| e.decision),
        "from_version": row.map(|e| e.from_version),
        "to_version": row.map(|e| e.to_version),
        "snapshot_is_full": stored_snapshot.as_ref() == Some(snapshot_now),
        "snapshot_fields": row.and_then(|e| e.snapshot.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())),
    })
}
