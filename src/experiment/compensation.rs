//! The `compensation` claim of SPEC section 5 (the rules of section 4): an
//! approval is scoped to one exact confirmed effect, refused for the wrong
//! effect, a blank approver, a stale version or an original still unknown,
//! and given once per effect; a compensation without an approval, or whose
//! action was changed after it, is refused at dispatch before any child is
//! spawned; the approved one is dispatched, loses its receipt like any op,
//! and is then guarded against a blind retry.
//!
//! Every refusal is the code of a request really made. The compensation's
//! state, the receiver children counted around the refused dispatches and
//! the ledger rows are read back after the steps, so the ledger shows the
//! original and its compensation as two rows written by real children.

use super::{crashing, outcome, Lab, Origin};
use crate::dispatch::DispatchOptions;
use crate::domain::{CompensationRequest, Operation};
use crate::error::Result;
use crate::receiver::Fault;
use serde_json::{json, Map, Value};

/// Compensation is scoped to one exact confirmed effect, rechecked at
/// dispatch, written as a new ledger row, and reconciled like any op when its
/// own receipt is lost.
pub(super) fn compensation(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let charges = Charges::set_up(&mut lab)?;
    let original = &charges.original;
    let payload = refund_payload();
    let effect = original.confirmed_effect_id.clone().unwrap_or_default();
    let mut refusals = refused_approvals(&mut lab, &charges, &effect, &payload)?;
    let approval =
        lab.ws
            .approve_compensation(&refund(original, &effect, "op-refund-0001", &payload))?;
    refusals.insert(
        "second_approval_same_effect".into(),
        outcome(lab.ws.approve_compensation(&refund(
            original,
            &effect,
            "op-refund-0002",
            &payload,
        )))?,
    );
    let comp_prepared = lab.reopened("op-refund-0001")?;
    let dispatch_refusals = refused_dispatches(&mut lab, &charges.tampered, &payload)?;

    // The approved compensation goes out and loses its receipt too.
    let sent = lab
        .ws
        .dispatch("op-refund-0001", crashing(Fault::CrashAfterCommit))?;
    let retry = outcome(
        lab.ws
            .dispatch("op-refund-0001", DispatchOptions::default()),
    )?;
    let comp_after = lab.reopened("op-refund-0001")?;
    let original_after = lab.reopened(&original.op_id)?;
    let ledger = ledger_rows(&lab, &original.op_id, "op-refund-0001")?;
    Ok(json!({
        "original": {"state": original.state, "version": original.version, "confirmed_effect_id": original.confirmed_effect_id},
        "refusals": refusals,
        "approval": {
            "effect_id": approval.effect_id,
            "approved_version": approval.approved_version,
            "approver": approval.approver,
            "compensation_state": comp_prepared.state,
            "compensation_kind": comp_prepared.kind,
            "compensates_effect_id": comp_prepared.compensates_effect_id,
        },
        "dispatch_refusals": dispatch_refusals,
        "compensation_dispatch": {
            "receiver_exit_code": sent.receiver_exit_code,
            "outcome": sent.outcome,
            "state": comp_after.state,
            "version": comp_after.version,
        },
        "blind_retry": retry,
        "original_after": {"state": original_after.state, "version": original_after.version},
        "ledger": ledger,
    }))
}

/// Three charges of the same card: the original to refund and one whose
/// compensation will be tampered with, both confirmed by their receipts, and
/// one left `unknown` by a lost receipt.
struct Charges {
    original: Operation,
    tampered: Operation,
    unknown: Operation,
}

impl Charges {
    fn set_up(lab: &mut Lab) -> Result<Charges> {
        let charge = json!({"customer": "cus_7001", "amount_cents": 12900, "currency": "EUR"});
        let confirm = |lab: &mut Lab, id: &str| -> Result<Operation> {
            lab.prepare(id, "charge_card", charge.clone())?;
            lab.ws.dispatch(id, DispatchOptions::default())?;
            lab.reopened(id)
        };
        let original = confirm(lab, "op-charge-0001")?;
        let tampered = confirm(lab, "op-charge-0002")?;
        let unknown = lab.prepare("op-charge-0003", "charge_card", charge)?;
        lab.ws
            .dispatch(&unknown.op_id, crashing(Fault::CrashAfterCommit))?;
        Ok(Charges {
            original,
            tampered,
            unknown,
        })
    }
}

fn refund_payload() -> Value {
    json!({"customer": "cus_7001", "amount_cents": 12900, "currency": "EUR", "reason": "duplicate charge"})
}

/// A refund of `effect_id` of `original` as the new op `compensation_op_id`,
/// approved by ines against the version of `original` given.
fn refund<'a>(
    original: &'a Operation,
    effect_id: &'a str,
    compensation_op_id: &'a str,
    payload: &'a Value,
) -> CompensationRequest<'a> {
    CompensationRequest {
        reason: None,
        original_op_id: &original.op_id,
        effect_id,
        approver: "ines",
        expected_version: original.version,
        compensation_op_id,
        action_kind: "refund_charge",
        payload,
    }
}

/// Approvals refused for the wrong effect, a blank approver, a stale
/// version, and an original whose outcome is still unknown.
fn refused_approvals(
    lab: &mut Lab,
    charges: &Charges,
    effect: &str,
    payload: &Value,
) -> Result<Map<String, Value>> {
    let original = &charges.original;
    let mut refusals = Map::new();
    refusals.insert(
        "wrong_effect".into(),
        outcome(lab.ws.approve_compensation(&refund(
            original,
            "fx-999999",
            "op-refund-x1",
            payload,
        )))?,
    );
    refusals.insert(
        "blank_approver".into(),
        outcome(lab.ws.approve_compensation(&CompensationRequest {
            reason: None,
            approver: " ",
            ..refund(original, effect, "op-refund-x2", payload)
        }))?,
    );
    refusals.insert(
        "stale_version".into(),
        outcome(lab.ws.approve_compensation(&CompensationRequest {
            reason: None,
            expected_version: original.version - 1,
            ..refund(original, effect, "op-refund-x3", payload)
        }))?,
    );
    let unknown_now = lab.reopened(&charges.unknown.op_id)?;
    refusals.insert(
        "original_unknown".into(),
        outcome(lab.ws.approve_compensation(&refund(
            &unknown_now,
            "fx-000003",
            "op-refund-x4",
            payload,
        )))?,
    );
    Ok(refusals)
}

/// A compensation with no approval, and one whose action was changed after
/// approval, are refused before the receiver is invoked: no child is
/// spawned for either.
fn refused_dispatches(lab: &mut Lab, tampered: &Operation, payload: &Value) -> Result<Value> {
    let tampered_effect = tampered.confirmed_effect_id.clone().unwrap_or_default();
    lab.ws.drills()?.insert_unapproved_compensation(
        "op-refund-unapproved",
        "refund_charge",
        payload,
        &tampered.op_id,
        &tampered_effect,
    )?;
    let spawned_before = lab.spawned();
    let missing = outcome(
        lab.ws
            .dispatch("op-refund-unapproved", DispatchOptions::default()),
    )?;
    lab.ws.approve_compensation(&refund(
        tampered,
        &tampered_effect,
        "op-refund-0003",
        payload,
    ))?;
    lab.ws
        .drills()?
        .change_action_kind("op-refund-0003", "charge_card")?;
    let changed = outcome(
        lab.ws
            .dispatch("op-refund-0003", DispatchOptions::default()),
    )?;
    Ok(json!({
        "missing_approval": missing,
        "changed_action_kind": changed,
        "receiver_children": lab.spawned() - spawned_before,
    }))
}

/// The ledger rows of the original and of its compensation, in write order.
fn ledger_rows(lab: &Lab, original: &str, compensation: &str) -> Result<Vec<Value>> {
    Ok(lab
        .ws
        .ledger(None)?
        .into_iter()
        .filter(|e| e.op_id == original || e.op_id == compensation)
        .map(|e| json!({"effect_id": e.effect_id, "op_id": e.op_id, "action_kind": e.action_kind, "compensates_effect_id": e.compensates_effect_id}))
        .collect())
}
