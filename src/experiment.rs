//! The scripted experiment behind `recon --check`: every claim of the seed,
//! rerun in fresh temporary workspaces with real receiver child processes.
//!
//! Each scenario records what it observed (states read back on new
//! connections, exit codes of real children, rows counted in the ledgers,
//! refusal codes returned by the engine) and never a constant it expects.
//! The JSON is deterministic: no times, paths or process ids, so two runs are
//! byte-identical and [`compare`] can diff a run against the checked-in
//! `results.json` path by path.

mod compare;

pub use compare::{compare, Difference};

use crate::dispatch::{self, ChildOutcome, DispatchOptions, ReceiverCall, ReceiverProgram};
use crate::domain::{classify, CompensationRequest, Decision, Effect, Operation, Scope, Snapshot};
use crate::error::{Error, Result, StoreError};
use crate::receiver::Fault;
use crate::settings::OpenOptions;
use crate::workspace::{ReconcileRequest, Workspace};
use serde_json::{json, Map, Value};

/// The checked-in results, compiled into the binary.
pub const EXPECTED_RESULTS: &str = include_str!("../results.json");

/// A fresh workspace in a temporary directory that is removed on drop.
struct Lab {
    ws: Workspace,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn new(program: &ReceiverProgram) -> Result<Lab> {
        let dir = tempfile::Builder::new()
            .prefix("recon-experiment-")
            .tempdir()?;
        let ws = Workspace::open(dir.path(), OpenOptions::default().creating())?
            .with_receiver_program(program.scoped());
        Ok(Lab { ws, _dir: dir })
    }

    /// Reads an operation back on a brand-new connection, as a sender that
    /// restarted would.
    fn reopened(&self, op_id: &str) -> Result<Operation> {
        Workspace::open(self.ws.dir(), OpenOptions::default())?.require(op_id)
    }

    fn spawned(&self) -> usize {
        self.ws.receiver_program().spawned()
    }

    fn effects(&self, op_id: &str) -> Result<i64> {
        Ok(self.ws.effect_count(Some(op_id))?)
    }

    fn dispatches(&self, op_id: &str) -> Result<i64> {
        Ok(self.ws.dispatch_count(op_id)?)
    }

    fn prepare(&mut self, op_id: &str, action: &str, payload: Value) -> Result<Operation> {
        self.ws.prepare(op_id, action, &payload)
    }

    /// Calls the receiver directly, bypassing the sender's guard, the way an
    /// unsafe retry would.
    fn direct(&self, call: &ReceiverCall<'_>) -> Result<ChildOutcome> {
        Ok(dispatch::spawn(self.ws.receiver_program(), self.ws.dir(), call)?.finish()?)
    }

    fn review(
        &mut self,
        op_id: &str,
        reviewer: &str,
        decision: Decision,
        expected_version: i64,
    ) -> Result<crate::domain::Recorded> {
        self.ws.reconcile(&ReconcileRequest {
            op_id,
            reviewer,
            decision,
            expected_version,
            payload: None,
            close_authorized_by: None,
        })
    }
}

/// The outcome of a step as a fact: `"ok"`, or the refusal code.
fn outcome<T>(result: Result<T>) -> Result<Value> {
    match result {
        Ok(_) => Ok(json!("ok")),
        Err(Error::Refused(refusal)) => Ok(json!(refusal.code())),
        Err(other) => Err(other),
    }
}

fn child_facts(outcome: &ChildOutcome) -> Value {
    json!({
        "exit_code": outcome.exit_code,
        "receipt": outcome.receipt.is_some(),
        "stdout_bytes": outcome.stdout_bytes,
        "refusal": refusal_code_in(&outcome.stderr),
    })
}

/// The refusal code a child printed as `refused: <code>: …`, if any.
fn refusal_code_in(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("refused: "))
        .and_then(|rest| rest.split(':').next())
        .map(str::to_string)
}

fn effect_ids(effects: &[Effect]) -> Value {
    json!(effects
        .iter()
        .map(|e| e.effect_id.as_str())
        .collect::<Vec<_>>())
}

fn email(to: &str, subject: &str) -> Value {
    json!({
        "to": to,
        "subject": subject,
        "body": format!("Hello,\n\n{subject}.\n\n— the billing agent"),
    })
}

/// One scenario: it gets the receiver program and returns its facts.
type Scenario = fn(&ReceiverProgram) -> Result<Value>;

const SCENARIOS: [(&str, Scenario); 9] = [
    ("receipt_lost_after_commit", receipt_lost_after_commit),
    ("blind_retry_blocked", blind_retry_blocked),
    ("receiver_not_idempotent", receiver_not_idempotent),
    (
        "delayed_original_unsafe_retry",
        delayed_original_unsafe_retry,
    ),
    ("delayed_original_closed", delayed_original_closed),
    ("early_single_match", early_single_match),
    ("classification", classification),
    ("reconciliation", reconciliation),
    ("compensation", compensation),
];

/// Runs every scenario and returns the results document.
///
/// Scenarios are independent (each has its own workspace and its own count
/// of children), so they run on two threads; the document does not depend
/// on the order they finish in.
pub fn run(program: &ReceiverProgram) -> Result<Value> {
    let program = program.scoped();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, Result<Value>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some((_, scenario)) = SCENARIOS.get(i) else {
                            return done;
                        };
                        done.push((i, scenario(&program)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let mut scenarios = Map::new();
    for (i, result) in results {
        scenarios.insert(SCENARIOS[i].0.to_string(), result?);
    }
    if scenarios.len() != SCENARIOS.len() {
        return Err(StoreError::Corrupt("a scenario thread panicked".into()).into());
    }
    Ok(json!({
        "experiment": "recon: unknown outcomes and human reconciliation",
        "format": 1,
        "receiver_child_processes": program.spawned(),
        "scenarios": scenarios,
    }))
}

/// Pretty, stable JSON text with a trailing newline, as `results.json` is
/// stored.
pub fn to_text(results: &Value) -> String {
    let mut text = serde_json::to_string_pretty(results).unwrap_or_default();
    text.push('\n');
    text
}

/// The sender persists `unknown` before it spawns the receiver; the receiver
/// commits and dies before its receipt; a restarted sender still reads
/// `unknown`, and the ledger holds the one effect.
fn receipt_lost_after_commit(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
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
/// invoked, from every state other than `prepared`.
fn blind_retry_blocked(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
    let op = "op-ticket-0001";
    lab.prepare(
        op,
        "create_ticket",
        json!({"queue": "billing", "title": "Card declined twice"}),
    )?;
    let first = lab.ws.dispatch(
        op,
        DispatchOptions {
            fault: Some(Fault::CrashAfterCommit),
            wait_permit: false,
        },
    )?;
    let (dispatches_before, effects_before) = (lab.dispatches(op)?, lab.effects(op)?);
    let spawned_before = lab.spawned();
    let retry = outcome(lab.ws.dispatch(op, DispatchOptions::default()))?;
    let children_for_retry = lab.spawned() - spawned_before;
    let state = lab.reopened(op)?;

    // The same guard holds once the op is confirmed by a receipt, and once a
    // reviewer recorded not_applied.
    let confirmed = "op-ticket-0002";
    lab.prepare(
        confirmed,
        "create_ticket",
        json!({"queue": "billing", "title": "Refund request"}),
    )?;
    let delivered = lab.ws.dispatch(confirmed, DispatchOptions::default())?;
    let retry_confirmed = outcome(lab.ws.dispatch(confirmed, DispatchOptions::default()))?;
    let absent = "op-ticket-0003";
    lab.prepare(
        absent,
        "create_ticket",
        json!({"queue": "billing", "title": "Address change"}),
    )?;
    let lost_request = lab.ws.dispatch(
        absent,
        DispatchOptions {
            fault: Some(Fault::CrashBeforeCommit),
            wait_permit: false,
        },
    )?;
    let closed = lab.ws.snapshot(absent, Some("rosa"))?;
    let recorded = lab.review(absent, "rosa", Decision::NotApplied, 2)?;
    let retry_not_applied = outcome(lab.ws.dispatch(absent, DispatchOptions::default()))?;
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
        "from_confirmed": {
            "first_outcome": delivered.outcome,
            "state": delivered.state,
            "retry": retry_confirmed,
            "effects": lab.effects(confirmed)?,
            "dispatch_log_rows": lab.dispatches(confirmed)?,
        },
        "from_not_applied": {
            "first_dispatch_exit_code": lost_request.receiver_exit_code,
            "verdict": closed.verdict,
            "state": recorded.operation.state,
            "retry": retry_not_applied,
            "effects": lab.effects(absent)?,
            "dispatch_log_rows": lab.dispatches(absent)?,
        },
    }))
}

/// The receiver is genuinely non-idempotent: the same call made twice
/// directly writes two effects.
fn receiver_not_idempotent(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
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
        "same_payload": ledger.windows(2).all(|w| w[0].payload == w[1].payload),
    }))
}

/// An empty read while the original is still in flight is not evidence of
/// absence: a retry that bypasses the guard doubles the effect.
fn delayed_original_unsafe_retry(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
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
fn delayed_original_closed(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
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
fn early_single_match(program: &ReceiverProgram) -> Result<Value> {
    let open = early_single_match_run(program, false)?;
    let closed = early_single_match_run(program, true)?;
    Ok(json!({ "open_read": open, "closing_read": closed }))
}

fn early_single_match_run(program: &ReceiverProgram, close: bool) -> Result<Value> {
    let mut lab = Lab::new(program)?;
    let op = "op-sms-0001";
    lab.prepare(
        op,
        "send_sms",
        json!({"to": "+15550100", "text": "Your code is 481516"}),
    )?;
    let first = lab.ws.dispatch(
        op,
        DispatchOptions {
            fault: Some(Fault::CrashAfterCommit),
            wait_permit: false,
        },
    )?;
    let operation = lab.reopened(op)?;
    // A delayed duplicate of the same request, already at the receiver.
    let mut duplicate = dispatch::spawn(
        lab.ws.receiver_program(),
        lab.ws.dir(),
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

/// Every verdict, from real receiver snapshots, some with their flags
/// lowered to model incomplete or non-authoritative sources.
fn classification(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
    let payload = json!({"customer": "cus_9001", "amount_cents": 4500, "currency": "USD"});
    let mut ops = Vec::new();
    for (id, effects) in [
        ("op-none", vec![]),
        ("op-one", vec![payload.clone()]),
        ("op-two", vec![payload.clone(), payload.clone()]),
        (
            "op-other-payload",
            vec![json!({"customer": "cus_9001", "amount_cents": 5400, "currency": "USD"})],
        ),
    ] {
        let op = lab.prepare(id, "charge_card", payload.clone())?;
        for effect_payload in effects {
            lab.direct(&ReceiverCall {
                payload: &effect_payload,
                ..ReceiverCall::for_operation(&op)
            })?;
        }
        ops.push(op);
    }
    let open = |lab: &mut Lab, id: &str| lab.ws.snapshot(id, None).map(|c| c.snapshot);
    let closed = |lab: &mut Lab, id: &str| lab.ws.snapshot(id, Some("rosa")).map(|c| c.snapshot);
    let base = ops.swap_remove(0);
    let original = base.scope();
    let other_action = Scope {
        action_kind: "refund_charge",
        ..original
    };
    let other_target = Scope {
        compensates_effect_id: Some("fx-000001"),
        ..original
    };
    let other_payload = json!({"customer": "cus_9001", "amount_cents": 1, "currency": "USD"});
    let other_both = Scope {
        action_kind: "refund_charge",
        payload: &other_payload,
        compensates_effect_id: None,
    };
    let one_open = open(&mut lab, "op-one")?;
    let two_open = open(&mut lab, "op-two")?;
    let none_open = open(&mut lab, "op-none")?;
    let mismatch_open = open(&mut lab, "op-other-payload")?;
    let one_closed = closed(&mut lab, "op-one")?;
    let none_closed = closed(&mut lab, "op-none")?;
    let two_closed = closed(&mut lab, "op-two")?;
    let cases: Vec<(&str, Scope<'_>, Snapshot)> = vec![
        ("two_matches_open", original, two_open.clone()),
        ("two_matches_closed", original, two_closed),
        ("two_matches_other_action", other_action, two_open),
        ("one_match_other_payload", original, mismatch_open),
        (
            "one_match_payload_and_action_differ",
            other_both,
            one_open.clone(),
        ),
        ("one_match_other_action", other_action, one_closed.clone()),
        (
            "one_match_other_compensation_target",
            other_target,
            one_closed.clone(),
        ),
        ("one_exact_match_closed", original, one_closed.clone()),
        ("one_exact_match_open", original, one_open.clone()),
        (
            "one_exact_match_closed_incomplete",
            original,
            one_closed.clone().lowered(false, true, true),
        ),
        (
            "one_exact_match_closed_non_authoritative",
            original,
            one_closed.lowered(true, false, true),
        ),
        ("no_match_closed", original, none_closed.clone()),
        ("no_match_open", original, none_open),
        (
            "no_match_closed_incomplete",
            original,
            none_closed.clone().lowered(false, true, true),
        ),
        (
            "no_match_closed_non_authoritative",
            original,
            none_closed.lowered(true, false, true),
        ),
    ];
    let mut table = Map::new();
    for (name, scope, snapshot) in cases {
        table.insert(
            name.to_string(),
            json!({
                "matches": snapshot.matches.len(),
                "complete": snapshot.complete,
                "authoritative": snapshot.authoritative,
                "closed": snapshot.closed,
                "verdict": classify(scope, &snapshot),
            }),
        );
    }
    let mut verdicts: Vec<String> = table
        .values()
        .filter_map(|case| case["verdict"].as_str().map(str::to_string))
        .collect();
    verdicts.sort();
    verdicts.dedup();
    Ok(json!({ "cases": table, "distinct_verdicts": verdicts }))
}

/// Each refusal of `reconcile`, the stale second reviewer, the rollback of a
/// failed evidence write, and the full snapshot in the evidence row.
fn reconciliation(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
    let lost = |lab: &mut Lab, id: &str, fault: Fault| -> Result<Operation> {
        lab.prepare(
            id,
            "send_email",
            email(&format!("{id}@example.com"), "Statement available"),
        )?;
        lab.ws.dispatch(
            id,
            DispatchOptions {
                fault: Some(fault),
                wait_permit: false,
            },
        )?;
        lab.reopened(id)
    };
    let applied = lost(&mut lab, "op-rec-applied", Fault::CrashAfterCommit)?;
    let absent = lost(&mut lab, "op-rec-absent", Fault::CrashBeforeCommit)?;
    let prepared = lab.prepare(
        "op-rec-prepared",
        "send_email",
        email("p@example.com", "Draft"),
    )?;

    let mut refusals = Map::new();
    let mut record = |name: &str, value: Value| {
        refusals.insert(name.to_string(), value);
    };
    record(
        "blank_reviewer",
        outcome(lab.review(&applied.op_id, "   ", Decision::Confirmed, applied.version))?,
    );
    let other_snapshot = lab.ws.snapshot(&absent.op_id, None)?.snapshot;
    record(
        "snapshot_for_another_op",
        outcome(lab.ws.record_review(&crate::domain::Review {
            op_id: &applied.op_id,
            payload: &applied.payload,
            reviewer: "rosa",
            decision: Decision::Confirmed,
            snapshot: &other_snapshot,
            expected_version: applied.version,
        }))?,
    );
    let wider = json!({"to": "everyone@example.com"});
    record(
        "payload_scope_differs",
        outcome(lab.ws.reconcile(&ReconcileRequest {
            op_id: &applied.op_id,
            reviewer: "rosa",
            decision: Decision::Confirmed,
            expected_version: applied.version,
            payload: Some(&wider),
            close_authorized_by: None,
        }))?,
    );
    record(
        "not_applied_on_existence_only",
        outcome(lab.review(
            &applied.op_id,
            "rosa",
            Decision::NotApplied,
            applied.version,
        ))?,
    );
    record(
        "not_applied_on_inconclusive",
        outcome(lab.review(&absent.op_id, "rosa", Decision::NotApplied, absent.version))?,
    );
    record(
        "confirmed_on_inconclusive",
        outcome(lab.review(&absent.op_id, "rosa", Decision::Confirmed, absent.version))?,
    );
    record(
        "wrong_expected_version",
        outcome(lab.review(
            &applied.op_id,
            "rosa",
            Decision::Confirmed,
            applied.version - 1,
        ))?,
    );
    record(
        "prepared_op",
        outcome(lab.review(
            &prepared.op_id,
            "rosa",
            Decision::Confirmed,
            prepared.version,
        ))?,
    );
    record(
        "unknown_op",
        outcome(lab.review("op-does-not-exist", "rosa", Decision::Confirmed, 1))?,
    );
    let untouched = lab.reopened(&applied.op_id)?;

    // A failing evidence write rolls the state change back with it.
    lab.ws.drill_install_evidence_fault()?;
    let failed = lab.review(&applied.op_id, "rosa", Decision::Confirmed, applied.version);
    let failure = match failed {
        Ok(_) => json!("recorded"),
        Err(Error::Store(StoreError::Sqlite { .. })) => json!("storage_error"),
        Err(other) => return Err(other),
    };
    lab.ws.drill_remove_evidence_fault()?;
    let after_failure = lab.reopened(&applied.op_id)?;
    let evidence_after_failure = lab.ws.evidence(&applied.op_id)?.len();

    // First reviewer wins; the stale second reviewer changes nothing.
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
    let stored_snapshot: Option<Snapshot> = evidence
        .first()
        .and_then(|e| serde_json::from_value(e.snapshot.clone()).ok());
    Ok(json!({
        "refusals": refusals,
        "after_refusals": {"state": untouched.state, "version": untouched.version},
        "evidence_write_failure": {
            "result": failure,
            "state": after_failure.state,
            "version": after_failure.version,
            "evidence_rows": evidence_after_failure,
        },
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
        "evidence_row": {
            "source": evidence.first().map(|e| e.source),
            "decision": evidence.first().map(|e| e.decision),
            "from_version": evidence.first().map(|e| e.from_version),
            "to_version": evidence.first().map(|e| e.to_version),
            "snapshot_is_full": stored_snapshot.as_ref() == Some(&snapshot_now),
            "snapshot_fields": evidence.first().and_then(|e| e.snapshot.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())),
        },
    }))
}

/// Compensation is scoped to one exact confirmed effect, rechecked at
/// dispatch, written as a new ledger row, and reconciled like any op when its
/// own receipt is lost.
fn compensation(program: &ReceiverProgram) -> Result<Value> {
    let mut lab = Lab::new(program)?;
    let charge = json!({"customer": "cus_7001", "amount_cents": 12900, "currency": "EUR"});
    let refund = json!({"customer": "cus_7001", "amount_cents": 12900, "currency": "EUR", "reason": "duplicate charge"});
    let confirm = |lab: &mut Lab, id: &str| -> Result<Operation> {
        lab.prepare(id, "charge_card", charge.clone())?;
        lab.ws.dispatch(id, DispatchOptions::default())?;
        lab.reopened(id)
    };
    let original = confirm(&mut lab, "op-charge-0001")?;
    let tampered = confirm(&mut lab, "op-charge-0002")?;
    let unknown = lab.prepare("op-charge-0003", "charge_card", charge.clone())?;
    lab.ws.dispatch(
        &unknown.op_id,
        DispatchOptions {
            fault: Some(Fault::CrashAfterCommit),
            wait_permit: false,
        },
    )?;
    let effect = original.confirmed_effect_id.clone().unwrap_or_default();
    let request = |op: &Operation, effect: &str, comp: &'static str, version: i64| {
        (op.op_id.clone(), effect.to_string(), comp, version)
    };
    let approve = |lab: &mut Lab,
                   (op_id, effect_id, comp, version): (String, String, &str, i64),
                   approver: &str| {
        lab.ws.approve_compensation(&CompensationRequest {
            original_op_id: &op_id,
            effect_id: &effect_id,
            approver,
            expected_version: version,
            compensation_op_id: comp,
            action_kind: "refund_charge",
            payload: &refund,
        })
    };
    let mut refusals = Map::new();
    refusals.insert(
        "wrong_effect".into(),
        outcome(approve(
            &mut lab,
            request(&original, "fx-999999", "op-refund-x1", original.version),
            "ines",
        ))?,
    );
    refusals.insert(
        "blank_approver".into(),
        outcome(approve(
            &mut lab,
            request(&original, &effect, "op-refund-x2", original.version),
            " ",
        ))?,
    );
    refusals.insert(
        "stale_version".into(),
        outcome(approve(
            &mut lab,
            request(&original, &effect, "op-refund-x3", original.version - 1),
            "ines",
        ))?,
    );
    refusals.insert("original_unknown".into(), {
        let unknown_now = lab.reopened(&unknown.op_id)?;
        outcome(approve(
            &mut lab,
            request(
                &unknown_now,
                "fx-000003",
                "op-refund-x4",
                unknown_now.version,
            ),
            "ines",
        ))?
    });
    let approval = approve(
        &mut lab,
        request(&original, &effect, "op-refund-0001", original.version),
        "ines",
    )?;
    refusals.insert(
        "second_approval_same_effect".into(),
        outcome(approve(
            &mut lab,
            request(&original, &effect, "op-refund-0002", original.version),
            "ines",
        ))?,
    );
    let comp_prepared = lab.reopened("op-refund-0001")?;

    // A compensation with no approval, and one whose action was changed
    // after approval, are refused before the receiver is invoked.
    let tampered_effect = tampered.confirmed_effect_id.clone().unwrap_or_default();
    lab.ws.drill_insert_unapproved_compensation(
        "op-refund-unapproved",
        "refund_charge",
        &refund,
        &tampered.op_id,
        &tampered_effect,
    )?;
    let spawned_before = lab.spawned();
    let missing = outcome(
        lab.ws
            .dispatch("op-refund-unapproved", DispatchOptions::default()),
    )?;
    approve(
        &mut lab,
        request(
            &tampered,
            &tampered_effect,
            "op-refund-0003",
            tampered.version,
        ),
        "ines",
    )?;
    lab.ws
        .drill_change_action_kind("op-refund-0003", "charge_card")?;
    let changed = outcome(
        lab.ws
            .dispatch("op-refund-0003", DispatchOptions::default()),
    )?;
    let children_for_refused = lab.spawned() - spawned_before;

    // The approved compensation goes out and loses its receipt too.
    let sent = lab.ws.dispatch(
        "op-refund-0001",
        DispatchOptions {
            fault: Some(Fault::CrashAfterCommit),
            wait_permit: false,
        },
    )?;
    let retry = outcome(
        lab.ws
            .dispatch("op-refund-0001", DispatchOptions::default()),
    )?;
    let comp_after = lab.reopened("op-refund-0001")?;
    let original_after = lab.reopened(&original.op_id)?;
    let ledger: Vec<Value> = lab
        .ws
        .ledger(None)?
        .into_iter()
        .filter(|e| e.op_id == original.op_id || e.op_id == "op-refund-0001")
        .map(|e| json!({"effect_id": e.effect_id, "op_id": e.op_id, "action_kind": e.action_kind, "compensates_effect_id": e.compensates_effect_id}))
        .collect();
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
        "dispatch_refusals": {
            "missing_approval": missing,
            "changed_action_kind": changed,
            "receiver_children": children_for_refused,
        },
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
