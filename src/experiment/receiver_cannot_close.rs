//! SPEC section 5, `receiver_cannot_close` (second wave): the built-in
//! ledger registered as an adapter that declares `can_close: false`
//! (`recon receiver adapter --no-close`), so every step goes through the
//! `recon-adapter/1` protocol and its ceiling.
//!
//! The facts are what recon observed at each step: the verdict of each read
//! through the registered receiver, the refusal code of each close and
//! decision, how many receiver processes a refused close started (none: the
//! refusal comes before anything is invoked), what the adapter claimed when
//! asked directly, and the state a decision left. A receiver that cannot
//! close never lets an empty read mean "not applied", and never lets a
//! `closed` claim through.

use super::{crashing, email, outcome, Lab, Origin};
use crate::dispatch::adapter::AdapterProgram;
use crate::domain::{Decision, EffectRequest, Operation};
use crate::error::{Result, StoreError};
use crate::receiver::protocol::{self, Verb};
use crate::receiver::Fault;
use crate::workspace::ReconcileRequest;
use serde_json::{json, Value};

const RECEIVER: &str = "ledger-no-close";

/// The built-in ledger of the lab's workspace as a program, with or
/// without the ability to close.
fn ledger_program(lab: &Lab, can_close: bool) -> Result<AdapterProgram> {
    let mut args = vec![
        "receiver".to_string(),
        "adapter".to_string(),
        "--workspace".to_string(),
        lab.ws.ledger_dir()?.display().to_string(),
    ];
    if !can_close {
        args.push("--no-close".to_string());
    }
    Ok(AdapterProgram {
        program: lab.ws.receiver_program().program.clone(),
        args,
        timeout: lab.ws.receiver_program().timeout,
        env: crate::dispatch::adapter::PassEnv {
            names: Vec::new(),
            recon_own: true,
        },
    })
}

/// Asks a ledger program directly (not through recon's routing) and returns
/// its raw answer.
fn ask(lab: &Lab, program: &AdapterProgram, verb: Verb, op: &Operation) -> Result<Value> {
    let request = protocol::request(
        verb,
        lab.ws.id(),
        &EffectRequest {
            op_id: &op.op_id,
            action_kind: &op.action_kind,
            payload: &op.payload,
            compensates_effect_id: None,
        },
        Some("rosa"),
    );
    program
        .call(lab.ws.receiver_program(), verb, &request)
        .answer
        .map_err(|f| StoreError::Receiver(f.detail).into())
}

fn decide(lab: &mut Lab, op: &str, decision: Decision, close: bool) -> Result<Value> {
    let version = lab.ws.require(op)?.version;
    outcome(lab.ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id: op,
        reviewer: "rosa",
        decision,
        expected_version: version,
        payload: None,
        close_authorized_by: close.then_some("rosa"),
    }))
}

fn register(lab: &mut Lab) -> Result<Value> {
    let registration = lab
        .ws
        .register_builtin(RECEIVER, &["send_email".to_string()], false)?;
    Ok(json!({
        "can_close": registration.can_close(),
        "complete": registration.describe.query.complete,
        "authoritative": registration.describe.query.authoritative,
    }))
}

/// An empty read, and a close refused before the adapter is invoked.
fn empty_read(lab: &mut Lab) -> Result<Value> {
    let op = "op-nc-absent";
    let prepared = lab.prepare(op, "send_email", email("bo@example.com", "Welcome"))?;
    let report = lab.ws.dispatch(op, crashing(Fault::CrashBeforeCommit))?;
    let read = lab.ws.snapshot(op, None)?;
    let spawned_before = lab.spawned();
    let close = outcome(lab.ws.snapshot(op, Some("rosa")))?;
    let spawned_for_close = lab.spawned() - spawned_before;
    Ok(json!({
        "routed_to": prepared.receiver,
        "dispatch_exit_code": report.receiver_exit_code,
        "state": lab.ws.require(op)?.state,
        "read_verdict": read.verdict,
        "read_closed": read.snapshot.closed,
        "close": close,
        "processes_started_by_refused_close": spawned_for_close,
        "not_applied": decide(lab, op, Decision::NotApplied, false)?,
        "not_applied_with_close": decide(lab, op, Decision::NotApplied, true)?,
        "effects": lab.effects(op)?,
    }))
}

/// One match: existence only, a `closed` claim lowered, `not_applied`
/// refused, `confirmed` on existence recorded.
fn one_match(lab: &mut Lab) -> Result<Value> {
    let op = "op-nc-applied";
    lab.prepare(op, "send_email", email("cy@example.com", "Receipt 7"))?;
    lab.ws.dispatch(op, crashing(Fault::CrashAfterCommit))?;
    let open = lab.ws.snapshot(op, None)?;
    // Someone closes the operation at the ledger itself, bypassing recon:
    // the ledger that cannot close now reports `closed: true` when asked.
    let operation = lab.ws.require(op)?;
    ask(lab, &ledger_program(lab, true)?, Verb::Close, &operation)?;
    let claim = ask(lab, &ledger_program(lab, false)?, Verb::Query, &operation)?;
    let lowered = lab.ws.snapshot(op, None)?;
    let not_applied = decide(lab, op, Decision::NotApplied, false)?;
    let confirmed = decide(lab, op, Decision::Confirmed, false)?;
    let after = lab.reopened(op)?;
    let evidence = lab.ws.evidence(op)?;
    Ok(json!({
        "open_read_verdict": open.verdict,
        "adapter_claims_closed": claim["closed"],
        "read_after_claim": {
            "closed": lowered.snapshot.closed,
            "verdict": lowered.verdict,
        },
        "not_applied": not_applied,
        "confirmed": confirmed,
        "state": after.state,
        "version": after.version,
        "evidence_receiver": evidence.first().map(|e| e.receiver.clone()),
        "effects": lab.effects(op)?,
    }))
}

pub(super) fn receiver_cannot_close(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let registered = register(&mut lab)?;
    let empty = empty_read(&mut lab)?;
    let single = one_match(&mut lab)?;
    Ok(json!({
        "registered": registered,
        "empty_read": empty,
        "one_match": single,
    }))
}
