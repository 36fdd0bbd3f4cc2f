//! The delayed-original claims of SPEC section 5:
//! `delayed_original_unsafe_retry`, `delayed_original_closed` and
//! `early_single_match`. An original held in flight (its child waits for a
//! permit) is what makes an open read unsafe: an empty read is only
//! `inconclusive`, and a single match only proves existence, because the
//! request or a duplicate can still land. The closing snapshot is the
//! barrier that turns those reads into proof, and the late original is then
//! refused by the receiver itself.
//!
//! The facts are observed in the order they happen: the read taken while the
//! child is held, the child's exit code and refusal once it is permitted,
//! the effects counted in the ledger, and the state read back afterwards.

use super::{child_facts, crashing, effect_ids, email, outcome, refusal_code_in, Lab, Origin};
use crate::dispatch::{self, DispatchOptions, ReceiverCall};
use crate::domain::Decision;
use crate::error::Result;
use crate::receiver::Fault;
use serde_json::{json, Value};

/// An empty read while the original is still in flight is not evidence of
/// absence: a retry that bypasses the guard doubles the effect.
pub(super) fn delayed_original_unsafe_retry(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let op = "op-email-0002";
    lab.prepare(
        op,
        "send_email",
        email("grace@example.com", "Your order shipped"),
    )?;
    let mut pending = lab.ws.start_dispatch(
        op,
        DispatchOptions {
            fault: Some(Fault::CrashAfterCommit),
            wait_permit: true,
        },
    )?;
    let early = lab.ws.snapshot(op, None)?;
    let guarded_retry = outcome(lab.ws.dispatch(op, DispatchOptions::default()))?;
    let operation = pending.operation.clone();
    let unsafe_retry = lab.direct(&ReceiverCall::for_operation(&operation))?;
    pending.child.permit()?;
    let late = lab.ws.finish_dispatch(pending)?;
    let later = lab.ws.snapshot(op, None)?;
    let confirm = outcome(lab.review(op, "rosa", Decision::Confirmed, operation.version))?;
    Ok(json!({
        "empty_read": {
            "matches": early.snapshot.matches.len(),
            "closed": early.snapshot.closed,
            "verdict": early.verdict,
        },
        "guarded_retry": guarded_retry,
        "unsafe_direct_retry": child_facts(&unsafe_retry),
        "late_original": {
            "receiver_exit_code": late.receiver_exit_code,
            "outcome": late.outcome,
        },
        "effects": lab.effects(op)?,
        "effect_ids": effect_ids(&later.snapshot.matches),
        "verdict_after": later.verdict,
        "confirm_attempt": confirm,
        "state": lab.reopened(op)?.state,
    }))
}

/// The closing snapshot is a barrier: taken while the original is in flight,
/// it proves absence, and the late original is refused afterwards.
pub(super) fn delayed_original_closed(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let op = "op-email-0003";
    lab.prepare(
        op,
        "send_email",
        email("alan@example.com", "Password reset"),
    )?;
    let mut pending = lab.ws.start_dispatch(
        op,
        DispatchOptions {
            fault: None,
            wait_permit: true,
        },
    )?;
    let closing = lab.ws.snapshot(op, Some("rosa"))?;
    let version = pending.operation.version;
    pending.child.permit()?;
    let late = lab.ws.finish_dispatch(pending)?;
    let recorded = lab.review(op, "rosa", Decision::NotApplied, version)?;
    let evidence = lab.ws.evidence(op)?;
    let closure = lab.ws.closure(op)?;
    let stored = lab.reopened(op)?;
    Ok(json!({
        "closing_snapshot": {
            "matches": closing.snapshot.matches.len(),
            "complete": closing.snapshot.complete,
            "authoritative": closing.snapshot.authoritative,
            "closed": closing.snapshot.closed,
            "verdict": closing.verdict,
        },
        "close_authorized_by": closure.map(|c| c.authorized_by),
        "late_original": {
            "receiver_exit_code": late.receiver_exit_code,
            "outcome": late.outcome,
            "refusal": refusal_code_in(&late.receiver_stderr),
        },
        "effects": lab.effects(op)?,
        "decision": recorded.operation.state,
        "state": stored.state,
        "version": stored.version,
        "evidence_rows": evidence.len(),
        "evidence_snapshot_closed": evidence.first().map(|e| e.snapshot["closed"].clone()),
    }))
}

/// One match on an open read is existence only: a delayed duplicate can
/// still land. Under the close barrier the single match is unique and the
/// duplicate is refused.
pub(super) fn early_single_match(origin: &Origin) -> Result<Value> {
    let open = early_single_match_run(origin, false)?;
    let closed = early_single_match_run(origin, true)?;
    Ok(json!({ "open_read": open, "closing_read": closed }))
}

fn early_single_match_run(origin: &Origin, close: bool) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let op = "op-sms-0001";
    lab.prepare(
        op,
        "send_sms",
        json!({"to": "+15550100", "text": "Your code is 481516"}),
    )?;
    let first = lab.ws.dispatch(op, crashing(Fault::CrashAfterCommit))?;
    let operation = lab.reopened(op)?;
    // A delayed duplicate of the same request, already at the receiver.
    let mut duplicate = dispatch::spawn(
        lab.ws.receiver_program(),
        lab.ws.ledger_dir()?,
        &ReceiverCall {
            wait_permit: true,
            ..ReceiverCall::for_operation(&operation)
        },
    )?;
    let first_read = lab.ws.snapshot(op, close.then_some("rosa"))?;
    duplicate.permit()?;
    let duplicate = duplicate.finish()?;
    let second_read = lab.ws.snapshot(op, None)?;
    let decision = outcome(lab.review(op, "rosa", Decision::Confirmed, operation.version))?;
    let stored = lab.reopened(op)?;
    Ok(json!({
        "first_dispatch_exit_code": first.receiver_exit_code,
        "first_read": {
            "matches": first_read.snapshot.matches.len(),
            "closed": first_read.snapshot.closed,
            "verdict": first_read.verdict,
        },
        "delayed_duplicate": child_facts(&duplicate),
        "second_read": {
            "matches": second_read.snapshot.matches.len(),
            "closed": second_read.snapshot.closed,
            "verdict": second_read.verdict,
        },
        "effects": lab.effects(op)?,
        "confirm_attempt": decision,
        "state": stored.state,
        "confirmed_effect_id": stored.confirmed_effect_id,
    }))
}
