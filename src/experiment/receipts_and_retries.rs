//! The first three claims of SPEC section 5: `receipt_lost_after_commit`,
//! `blind_retry_blocked` and `receiver_not_idempotent`. Together they show
//! why a lost receipt leaves an operation `unknown` and why nobody may simply
//! send it again: the sender's state survives the receiver's crash, the
//! guard refuses a second dispatch from every state but `prepared`, and the
//! receiver really would write the effect twice.
//!
//! Every fact is read back after the step that caused it: states on a new
//! connection, exit codes of the real children, dispatch_log and ledger rows
//! counted before and after, children counted around a refused retry.

use super::{child_facts, crashing, effect_ids, email, outcome, Lab, Origin};
use crate::dispatch::{DispatchOptions, ReceiverCall};
use crate::domain::{same_json, Decision};
use crate::error::Result;
use crate::receiver::Fault;
use serde_json::{json, Value};

/// The sender persists `unknown` before it spawns the receiver; the receiver
/// commits and dies before its receipt; a restarted sender still reads
/// `unknown`, and the ledger holds the one effect.
pub(super) fn receipt_lost_after_commit(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let op = "op-email-0001";
    let prepared = lab.prepare(
        op,
        "send_email",
        email("ada@example.com", "Invoice 1042 is ready"),
    )?;
    // The child waits for a permit, so the sender's durable state can be read
    // while the receiver is running and has written nothing yet.
    let mut pending = lab.ws.start_dispatch(
        op,
        DispatchOptions {
            fault: Some(Fault::CrashAfterCommit),
            wait_permit: true,
        },
    )?;
    let during = lab.reopened(op)?;
    let dispatches_during = lab.dispatches(op)?;
    let effects_during = lab.effects(op)?;
    pending.child.permit()?;
    let report = lab.ws.finish_dispatch(pending)?;
    let after = lab.reopened(op)?;
    Ok(json!({
        "state_before_dispatch": prepared.state,
        "while_receiver_running": {
            "state": during.state,
            "version": during.version,
            "dispatch_log_rows": dispatches_during,
            "effects": effects_during,
        },
        "receiver_exit_code": report.receiver_exit_code,
        "outcome": report.outcome,
        "receipt_effect_id": report.effect_id,
        "after_reopen": {
            "state": after.state,
            "version": after.version,
            "evidence_rows": lab.ws.evidence(op)?.len(),
        },
        "dispatch_log_rows": lab.dispatches(op)?,
        "effects": lab.effects(op)?,
    }))
}

/// A second dispatch is refused as `blind_retry` before the receiver is
/// invoked, from every state other than `prepared`: here from `unknown`,
/// then from `confirmed` and `not_applied` below.
pub(super) fn blind_retry_blocked(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let op = "op-ticket-0001";
    lab.prepare(
        op,
        "create_ticket",
        json!({"queue": "billing", "title": "Card declined twice"}),
    )?;
    let first = lab.ws.dispatch(op, crashing(Fault::CrashAfterCommit))?;
    let (dispatches_before, effects_before) = (lab.dispatches(op)?, lab.effects(op)?);
    let spawned_before = lab.spawned();
    let retry = outcome(lab.ws.dispatch(op, DispatchOptions::default()))?;
    let children_for_retry = lab.spawned() - spawned_before;
    let state = lab.reopened(op)?;

    let from_confirmed = retry_from_confirmed(&mut lab)?;
    let from_not_applied = retry_from_not_applied(&mut lab)?;
    Ok(json!({
        "first_dispatch": {
            "receiver_exit_code": first.receiver_exit_code,
            "outcome": first.outcome,
            "state": first.state,
        },
        "second_dispatch": retry,
        "receiver_children_for_second_dispatch": children_for_retry,
        "dispatch_log_rows": {"before": dispatches_before, "after": lab.dispatches(op)?},
        "effects": {"before": effects_before, "after": lab.effects(op)?},
        "state_after_refusal": state.state,
        "version_after_refusal": state.version,
        "from_confirmed": from_confirmed,
        "from_not_applied": from_not_applied,
    }))
}

/// The receiver is genuinely non-idempotent: the same call made twice
/// directly writes two effects.
pub(super) fn receiver_not_idempotent(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let op = lab.prepare(
        "op-charge-0001",
        "charge_card",
        json!({"customer": "cus_4411", "amount_cents": 12900, "currency": "EUR"}),
    )?;
    let call = ReceiverCall::for_operation(&op);
    let first = lab.direct(&call)?;
    let second = lab.direct(&call)?;
    let ledger = lab.ws.ledger(Some(&op.op_id))?;
    Ok(json!({
        "first_call": child_facts(&first),
        "second_call": child_facts(&second),
        "effects": ledger.len(),
        "effect_ids": effect_ids(&ledger),
        "same_payload": ledger.windows(2).all(|w| same_json(&w[0].payload, &w[1].payload)),
    }))
}

/// The guard holds once the op is confirmed by its receipt.
fn retry_from_confirmed(lab: &mut Lab) -> Result<Value> {
    let op = "op-ticket-0002";
    lab.prepare(
        op,
        "create_ticket",
        json!({"queue": "billing", "title": "Refund request"}),
    )?;
    let delivered = lab.ws.dispatch(op, DispatchOptions::default())?;
    let retry = outcome(lab.ws.dispatch(op, DispatchOptions::default()))?;
    Ok(json!({
        "first_outcome": delivered.outcome,
        "state": delivered.state,
        "retry": retry,
        "effects": lab.effects(op)?,
        "dispatch_log_rows": lab.dispatches(op)?,
    }))
}

/// The guard holds once a reviewer recorded `not_applied` on a closing
/// snapshot that proved the request never arrived.
fn retry_from_not_applied(lab: &mut Lab) -> Result<Value> {
    let op = "op-ticket-0003";
    lab.prepare(
        op,
        "create_ticket",
        json!({"queue": "billing", "title": "Address change"}),
    )?;
    let lost_request = lab.ws.dispatch(op, crashing(Fault::CrashBeforeCommit))?;
    let closed = lab.ws.snapshot(op, Some("rosa"))?;
    let recorded = lab.review(op, "rosa", Decision::NotApplied, 2)?;
    let retry = outcome(lab.ws.dispatch(op, DispatchOptions::default()))?;
    Ok(json!({
        "first_dispatch_exit_code": lost_request.receiver_exit_code,
        "verdict": closed.verdict,
        "state": recorded.operation.state,
        "retry": retry,
        "effects": lab.effects(op)?,
        "dispatch_log_rows": lab.dispatches(op)?,
    }))
}
