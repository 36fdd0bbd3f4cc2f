//! The reconciliation flow: `prepare`, `dispatch`, `snapshot`, `reconcile`
//! and `approve-compensation`, the commands that change a workspace.
//!
//! Each is a pair of types: the validated arguments, whose `validate`
//! checks the clap struct in the order the checks have always run (so the
//! first problem reported stays the same one) and whose `run` makes one
//! facade call, and the result, which knows its text and its `--json`
//! document. Nothing here prints directly or picks an exit code.

use super::open::{open, Place};
use super::person::Person;
use super::render::payload_line;
use super::{Failure, Out, Render};
use crate::cli::{
    identifier, person, read_payload, ApproveCompensationArgs, CloseArgs, DispatchArgs,
    PrepareArgs, ReconcileArgs, SnapshotArgs,
};
use crate::dispatch::{DispatchOptions, DispatchReport};
use crate::domain::policy::{self, LatestRead};
use crate::domain::sanitize::escape;
use crate::domain::{
    Approval, CompensationRequest, Decision, Description, Operation, Recorded, RouteAdvice,
};
use crate::error::Refusal;
use crate::receiver::Fault;
use crate::workspace::{Classified, Location, ReconcileRequest, Workspace};
use serde_json::{json, Value};

/// `recon prepare`: a new original operation in the outbox.
pub struct Prepare {
    location: Location,
    op_id: String,
    action_kind: String,
    payload: Value,
}

impl Prepare {
    pub fn validate(args: PrepareArgs, place: Place) -> Result<Self, Failure> {
        let given = |flag: &str, value: Option<String>| {
            value.ok_or_else(|| Failure::Usage(format!("prepare needs {flag} (or --batch FILE)")))
        };
        let op_id = given("--op", args.op_id)?;
        let action_kind = given("--action", args.action_kind)?;
        let payload = given("--payload", args.payload)?;
        identifier("op id", &op_id)?;
        identifier("action kind", &action_kind)?;
        let payload = read_payload(&payload)?;
        Ok(Prepare {
            location: place.required()?,
            op_id,
            action_kind,
            payload,
        })
    }

    pub fn run(self) -> Result<Prepared, Failure> {
        // Where there is no workspace there is no receiver, so nothing could
        // route there: the refusal is the one a workspace without a route
        // gives (SPEC 8), naming the path, which is more often mistyped than
        // new, and no workspace is created for it. (A workspace that lost
        // one of its files is damage, and opening it says so.)
        if Workspace::is_absent(&self.location) {
            let advice = match &self.location {
                Location::Workspace(dir) => RouteAdvice::NoWorkspace(dir.display().to_string()),
                Location::Database(_) => RouteAdvice::Register,
            };
            return Err(Refusal::NoReceiver {
                kind: self.action_kind,
                advice,
            }
            .into());
        }
        let mut ws = open(&self.location, false)?;
        Ok(Prepared(ws.prepare(
            &self.op_id,
            &self.action_kind,
            &self.payload,
        )?))
    }
}

pub struct Prepared(Operation);

impl Render for Prepared {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let op = &self.0;
        out.line(format!(
            "prepared {} ({}) at version {}, routed to receiver {}",
            escape(&op.op_id),
            escape(&op.action_kind),
            op.version,
            escape(&op.receiver)
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// `recon dispatch`: commit unknown, then invoke the receiver.
pub struct Dispatch {
    location: Location,
    op_id: String,
    fault: Option<Fault>,
}

impl Dispatch {
    pub fn validate(args: DispatchArgs, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        Ok(Dispatch {
            location: place.required()?,
            op_id: args.op_id,
            fault: args.fault.map(Into::into),
        })
    }

    pub fn run(self) -> Result<Dispatched, Failure> {
        let mut ws = open(&self.location, false)?;
        // Drills belong to the built-in ledger (SPEC 8 rule 1): asking for
        // one on an operation routed to an adapter is a mistake in the
        // command, found before anything is written.
        if let (Some(fault), Some(op)) = (self.fault, ws.operation(&self.op_id)?) {
            if !ws.accepts_drills(&op.op_id)? {
                return Err(Failure::Usage(format!(
                    "--fault {} is a drill of the built-in ledger; {} routes to receiver {}",
                    fault.as_str(),
                    op.op_id,
                    op.receiver
                )));
            }
        }
        let options = DispatchOptions {
            fault: self.fault,
            wait_permit: false,
        };
        Ok(Dispatched(ws.dispatch(&self.op_id, options)?))
    }
}

/// What one dispatch did: a lost receipt is an outcome, not a failure.
pub struct Dispatched(DispatchReport);

impl Render for Dispatched {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let report = &self.0;
        let exit = report
            .receiver_exit_code
            .map_or("none: killed or never started".to_string(), |c| {
                c.to_string()
            });
        let outcome = match (&report.effect_id, &report.adapter_failure) {
            (Some(effect), _) => format!("receipt for {}", escape(effect)),
            (None, Some(failure)) => format!(
                "no receipt ({}: {}; receiver exit {exit})",
                failure.kind.as_str(),
                escape(&failure.detail)
            ),
            (None, None) => format!("no receipt (receiver exit {exit})"),
        };
        out.line(format!(
            "{}: sent to receiver {}: {outcome}; now {} at version {}",
            escape(&report.op_id),
            escape(&report.receiver),
            report.state,
            report.version
        ))?;
        if report.adapter_failure.is_some() {
            for line in stderr_tail(&report.receiver_stderr) {
                out.line(format!("  stderr: {}", escape(line)))?;
            }
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// The last lines an adapter wrote on stderr, for a person to read beside
/// a lost receipt (the whole tail is kept in the report).
fn stderr_tail(stderr: &str) -> impl Iterator<Item = &str> {
    const SHOWN: usize = 5;
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let skip = lines.len().saturating_sub(SHOWN);
    lines.into_iter().skip(skip)
}

/// Who authorized a `--close`: `--authorized-by`, checked as a person's
/// name, or in team mode the database login; none without `--close`
/// (clap refuses `--authorized-by` without it).
fn authorized_by(close: CloseArgs, place: &Place) -> Result<Option<Person>, Failure> {
    if !close.close {
        return Ok(None);
    }
    Person::of("--authorized-by", close.authorized_by, place).map(Some)
}

/// The name each optional person stands for, once the workspace is open.
fn names_of(person: Option<&Person>, ws: &Workspace) -> Result<Option<String>, Failure> {
    person.map(|p| p.name(ws)).transpose()
}

/// `recon snapshot`: read (or, with `--close`, close) and classify; with
/// `--by`, record the read as an observation.
pub struct Snapshot {
    location: Location,
    op_id: String,
    authorized_by: Option<Person>,
    by: Option<String>,
}

impl Snapshot {
    pub fn validate(args: SnapshotArgs, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        let authorized_by = authorized_by(args.close, &place)?;
        if let Some(by) = &args.by {
            person("--by", by)?;
        }
        Ok(Snapshot {
            location: place.required()?,
            op_id: args.op_id,
            authorized_by,
            by: args.by,
        })
    }

    /// The read, and what its receiver declared: the explanation printed
    /// under it depends on both. The registration is read after the
    /// snapshot, so a close the receiver committed is reported even if
    /// that read fails (the explanation is then left out).
    pub fn run(self) -> Result<Snapshotted, Failure> {
        let mut ws = open(&self.location, false)?;
        let authorized_by = names_of(self.authorized_by.as_ref(), &ws)?;
        let classified =
            ws.snapshot_by(&self.op_id, authorized_by.as_deref(), self.by.as_deref())?;
        let receiver = ws
            .registration_of(&classified.operation)
            .ok()
            .map(|r| r.describe);
        Ok(Snapshotted {
            classified,
            receiver,
        })
    }
}

pub struct Snapshotted {
    classified: Classified,
    receiver: Option<Description>,
}

impl Render for Snapshotted {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let Classified {
            snapshot, verdict, ..
        } = &self.classified;
        out.line(format!(
            "{}: {} (complete {}, authoritative {}, closed {}, {} matches)",
            escape(&snapshot.op_id),
            verdict,
            snapshot.complete,
            snapshot.authoritative,
            snapshot.closed,
            snapshot.matches.len()
        ))?;
        for m in &snapshot.matches {
            out.line(format!(
                "  {} {} {}",
                escape(&m.effect_id),
                escape(&m.action_kind),
                payload_line(&m.payload)
            ))?;
        }
        if let Some(receiver) = &self.receiver {
            let read = LatestRead {
                verdict: *verdict,
                closed: snapshot.closed,
            };
            out.line(format!("  {}", policy::explanation(read, receiver)))?;
        }
        if let Some(o) = &self.classified.observation {
            out.line(format!(
                "  recorded as {}'s observation at {}",
                escape(&o.observed_by),
                o.observed_at
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.classified)
    }
}

/// `recon reconcile`: a fresh snapshot, then the reviewer's decision.
pub struct Reconcile {
    location: Location,
    op_id: String,
    reviewer: Person,
    decision: Decision,
    expected_version: i64,
    payload: Option<Value>,
    authorized_by: Option<Person>,
    keep: Option<String>,
}

impl Reconcile {
    pub fn validate(args: ReconcileArgs, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        let reviewer = Person::of("--reviewer", args.reviewer, &place)?;
        let authorized_by = authorized_by(args.close, &place)?;
        let payload = args.payload.as_deref().map(read_payload).transpose()?;
        if let Some(keep) = &args.keep {
            identifier("effect id", keep)?;
        }
        Ok(Reconcile {
            keep: args.keep,
            location: place.required()?,
            op_id: args.op_id,
            reviewer,
            decision: args.decision.into(),
            expected_version: args.expected_version,
            payload,
            authorized_by,
        })
    }

    pub fn run(self) -> Result<Reconciled, Failure> {
        let mut ws = open(&self.location, false)?;
        let reviewer = self.reviewer.name(&ws)?;
        let authorized_by = names_of(self.authorized_by.as_ref(), &ws)?;
        let recorded = ws.reconcile(&ReconcileRequest {
            keep: self.keep.as_deref(),
            op_id: &self.op_id,
            reviewer: &reviewer,
            decision: self.decision,
            expected_version: self.expected_version,
            payload: self.payload.as_ref(),
            close_authorized_by: authorized_by.as_deref(),
        })?;
        Ok(Reconciled {
            recorded,
            decision: self.decision,
        })
    }
}

pub struct Reconciled {
    recorded: Recorded,
    decision: Decision,
}

impl Render for Reconciled {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let Recorded {
            operation,
            verdict,
            evidence_seq,
        } = &self.recorded;
        out.line(format!(
            "{}: recorded {} on {} (evidence #{}); now {} at version {}",
            escape(&operation.op_id),
            self.decision,
            verdict,
            evidence_seq,
            operation.state,
            operation.version
        ))?;
        if !operation.surplus_effect_ids.is_empty() {
            let surplus: Vec<_> = operation
                .surplus_effect_ids
                .iter()
                .map(|e| escape(e))
                .collect();
            out.line(format!(
                "kept {}; surplus to compensate (approve-compensation --reason duplicate): {}",
                escape(operation.confirmed_effect_id.as_deref().unwrap_or("")),
                surplus.join(", ")
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        let Recorded {
            operation,
            verdict,
            evidence_seq,
        } = &self.recorded;
        out.json(&json!({
            "op_id": operation.op_id,
            "decision": self.decision,
            "verdict": verdict,
            "state": operation.state,
            "version": operation.version,
            "evidence_seq": evidence_seq,
        }))
    }
}

/// `recon approve-compensation`: the approval and the prepared
/// compensation, in one transaction.
pub struct ApproveCompensation {
    location: Location,
    original_op_id: String,
    effect_id: String,
    approver: Person,
    expected_version: i64,
    compensation_op_id: String,
    action_kind: String,
    payload: Value,
    reason: Option<String>,
}

impl ApproveCompensation {
    pub fn validate(args: ApproveCompensationArgs, place: Place) -> Result<Self, Failure> {
        let approver = Person::of("--approver", args.approver, &place)?;
        identifier("op id", &args.op_id)?;
        identifier("effect id", &args.effect)?;
        identifier("compensation op id", &args.compensation_op)?;
        identifier("action kind", &args.action_kind)?;
        let payload = read_payload(&args.payload)?;
        Ok(ApproveCompensation {
            location: place.required()?,
            original_op_id: args.op_id,
            effect_id: args.effect,
            approver,
            expected_version: args.expected_version,
            compensation_op_id: args.compensation_op,
            action_kind: args.action_kind,
            payload,
            reason: args.reason,
        })
    }

    pub fn run(self) -> Result<Approved, Failure> {
        let mut ws = open(&self.location, false)?;
        let approver = self.approver.name(&ws)?;
        Ok(Approved(ws.approve_compensation(&CompensationRequest {
            reason: self.reason.as_deref(),
            original_op_id: &self.original_op_id,
            effect_id: &self.effect_id,
            approver: &approver,
            expected_version: self.expected_version,
            compensation_op_id: &self.compensation_op_id,
            action_kind: &self.action_kind,
            payload: &self.payload,
        })?))
    }
}

pub struct Approved(Approval);

impl Render for Approved {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let approval = &self.0;
        out.line(format!(
            "approved {} to compensate {} of {} (version {}); it is prepared",
            escape(&approval.compensation_op_id),
            escape(&approval.effect_id),
            escape(&approval.original_op_id),
            approval.approved_version
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        let approval = &self.0;
        out.json(&json!({
            "original_op_id": approval.original_op_id,
            "effect_id": approval.effect_id,
            "approved_version": approval.approved_version,
            "compensation_op_id": approval.compensation_op_id,
            "approver": approval.approver,
        }))
    }
}
