//! The scripted experiment behind `recon --check`: every claim of the seed,
//! rerun in fresh temporary workspaces with real receiver child processes.
//!
//! Each scenario records what it observed (states read back on new
//! connections, exit codes of real children, rows counted in the ledgers,
//! refusal codes returned by the engine) and never a constant it expects.
//! The JSON is deterministic: no times, paths or process ids, so two runs are
//! byte-identical and [`compare`] can diff a run against the checked-in
//! `results.json` path by path.
//!
//! This file is the runner: the `Lab` each scenario works in, the helpers
//! that turn what a step returned into a fact, and [`run`], which collects
//! every scenario's facts into the document. The scenarios themselves live
//! in one module per group of SPEC section 5, and [`compare`] is the
//! whole-document diff that `--check` prints.

mod classification;
mod compare;
mod compensation;
mod delayed_originals;
mod receipts_and_retries;
mod receiver_cannot_close;
mod reconciliation;

pub use compare::{compare, Difference};

use crate::dispatch::{self, ChildOutcome, DispatchOptions, ReceiverCall, ReceiverProgram};
use crate::domain::{Decision, Effect, Operation};
use crate::error::{Error, Result, StoreError};
use crate::receiver::Fault;
use crate::settings::OpenOptions;
use crate::workspace::{ReconcileRequest, Workspace};
use serde_json::{json, Map, Value};

/// The checked-in results, compiled into the binary.
pub const EXPECTED_RESULTS: &str = include_str!("../results.json");

/// What every scenario starts from: the receiver program, and one fresh
/// workspace, made once and closed, that each [`Lab`] copies.
pub(super) struct Origin {
    program: ReceiverProgram,
    fresh: tempfile::TempDir,
}

impl Origin {
    fn new(program: &ReceiverProgram) -> Result<Origin> {
        let fresh = temporary_dir()?;
        let mut ws = Workspace::open(fresh.path(), OpenOptions::default().creating().throwaway())?;
        // No receiver is implicit: the scenarios' ledger is registered like
        // any other, for every action kind.
        ws.register_builtin(
            crate::domain::BUILTIN_NAME,
            &[crate::domain::ANY_ACTION.to_string()],
            true,
        )?;
        Ok(Origin {
            program: program.scoped(),
            fresh,
        })
    }
}

fn temporary_dir() -> Result<tempfile::TempDir> {
    Ok(tempfile::Builder::new()
        .prefix("recon-experiment-")
        .tempdir()?)
}

/// A fresh workspace (a copy of the [`Origin`]'s) in a temporary directory
/// that is removed on drop, opened [`OpenOptions::throwaway`]: this process
/// commits to it without fsync (no claim here rests on surviving a power
/// loss), while the receiver children open it with the default options.
struct Lab {
    ws: Workspace,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn new(origin: &Origin) -> Result<Lab> {
        let dir = temporary_dir()?;
        Workspace::copy_closed(origin.fresh.path(), dir.path())?;
        let ws = Workspace::open(dir.path(), OpenOptions::default().throwaway())?
            .with_receiver_program(origin.program.scoped());
        Ok(Lab { ws, _dir: dir })
    }

    /// Reads an operation back on a brand-new connection, as a sender that
    /// restarted would.
    fn reopened(&self, op_id: &str) -> Result<Operation> {
        Workspace::open(self.ws.location(), OpenOptions::default().throwaway())?.require(op_id)
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
        Ok(dispatch::spawn(self.ws.receiver_program(), self.ws.ledger_dir()?, call)?.finish()?)
    }

    fn review(
        &mut self,
        op_id: &str,
        reviewer: &str,
        decision: Decision,
        expected_version: i64,
    ) -> Result<crate::domain::Recorded> {
        self.ws.reconcile(&ReconcileRequest {
            keep: None,
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

/// Dispatch options for a receiver child that dies at `fault`, without
/// waiting for a permit.
fn crashing(fault: Fault) -> DispatchOptions {
    DispatchOptions {
        fault: Some(fault),
        wait_permit: false,
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

/// One scenario: it gets the origin of its labs and returns its facts.
type Scenario = fn(&Origin) -> Result<Value>;

const SCENARIOS: [(&str, Scenario); 10] = [
    (
        "receipt_lost_after_commit",
        receipts_and_retries::receipt_lost_after_commit,
    ),
    (
        "blind_retry_blocked",
        receipts_and_retries::blind_retry_blocked,
    ),
    (
        "receiver_not_idempotent",
        receipts_and_retries::receiver_not_idempotent,
    ),
    (
        "delayed_original_unsafe_retry",
        delayed_originals::delayed_original_unsafe_retry,
    ),
    (
        "delayed_original_closed",
        delayed_originals::delayed_original_closed,
    ),
    ("early_single_match", delayed_originals::early_single_match),
    ("classification", classification::classification),
    ("reconciliation", reconciliation::reconciliation),
    ("compensation", compensation::compensation),
    (
        "receiver_cannot_close",
        receiver_cannot_close::receiver_cannot_close,
    ),
];

/// Runs every scenario and returns the results document.
///
/// Scenarios are independent (each has its own workspace in its own
/// temporary directory and its own count of children), so each runs on a
/// thread of its own: much of a scenario's time is spent waiting for its
/// receiver children, and the waits overlap. The document does not depend
/// on the order they finish in (its keys are sorted).
pub fn run(program: &ReceiverProgram) -> Result<Value> {
    let origin = Origin::new(program)?;
    let results: Vec<(usize, Result<Value>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = SCENARIOS
            .iter()
            .enumerate()
            .map(|(i, (_, scenario))| {
                let origin = &origin;
                scope.spawn(move || (i, scenario(origin)))
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
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
        "receiver_child_processes": origin.program.spawned(),
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
