//! `recon resolve`: the provable cases decided by a named policy (SPEC 9,
//! "Resolution by policy"), never by guessing.
//!
//! A run takes an exact list (the selection, or a plan a person
//! authorized) and passes over, counting each under its reason, every
//! operation that is no longer `unknown` at the listed version, is
//! escalated, changed within `--older-than`, or routes to a receiver that
//! cannot close. Without a plan it reads the rest first (batched where the
//! receiver batches) and closes only those a closing snapshot would let
//! the policy decide, as `reconcile` closes only when the decision would
//! be recorded; a plan was made by exactly such a read (`--dry-run`), so
//! its operations are closed as listed. Each closing snapshot that is
//! `unique_exact_match` records `confirmed`, `terminal_absence`
//! `not_applied`, by the store's decision script, against the version
//! read, naming the policy; the decisions of a chunk are one transaction,
//! each still version-checked and refused alone. Every other verdict is
//! left for people. A dry run reads without recording anything. A
//! [`Watch`] may stop a run between two requests to a receiver: what was
//! closed by then is decided, and the rest is `not_attempted`.

use super::receivers::Read;
use super::watch::{Unwatched, Watch};
use super::Workspace;
use crate::domain::resolve::{Planned, Skip};
use crate::domain::{
    classify, Decision, OpState, Operation, Policy, Provenance, QueueFilter, Review, Snapshot,
    Timestamp, Verdict,
};
use crate::error::{Committed, Error, Refusal, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// How many operations are read, closed and decided together: the reads
/// of a chunk go out in the receiver's batches, its decisions are one
/// transaction.
const CHUNK: usize = 256;

/// Which operations a run takes.
#[derive(Debug, Clone, Copy)]
pub enum Selection<'a> {
    /// These operations, at the versions they have now.
    Ids(&'a [String]),
    /// Those the queue's filter shows, at the versions they have now.
    Filter(QueueFilter<'a>),
}

/// A run of `resolve` over an exact list.
#[derive(Debug, Clone, Copy)]
pub struct ResolveRequest<'a> {
    pub policy: Policy,
    /// Who records the decisions (the evidence's reviewer).
    pub by: &'a str,
    /// Who authorized the closes.
    pub authorized_by: &'a str,
    /// Operations whose `updated_at` is more recent than this are skipped.
    pub older_than: Duration,
    /// Read only: close nothing, record nothing.
    pub dry_run: bool,
    /// The list is a plan made by a dry run's read: close as listed.
    pub planned: bool,
}

/// What became of one operation of the list.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    pub op_id: String,
    /// `confirmed`, `not_applied`, `left`, `failed`, or the reason it was
    /// skipped.
    pub outcome: String,
    /// The verdict of the snapshot it was judged on (none when skipped
    /// before any read, or when the read failed).
    pub verdict: Option<Verdict>,
}

/// What a run did (or, dry, would do): SPEC 9's `resolve --json`.
#[derive(Debug, Default, Serialize)]
pub struct ResolveReport {
    pub confirmed: u64,
    pub not_applied: u64,
    pub left: BTreeMap<String, u64>,
    pub skipped: BTreeMap<String, u64>,
    pub failed: u64,
    pub operations: Vec<Resolved>,
    /// Present when the run was stopped ([`Watch::stop`]) before it asked
    /// about every operation: an addition to SPEC 9's JSON, absent on a
    /// whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
    /// Why each failed operation failed, for stderr.
    #[serde(skip)]
    pub failures: Vec<(String, Error)>,
}

/// A stopped run: how many operations of the list nothing was asked
/// about (counted under `skipped` as `not_attempted` too). What was
/// decided before the stop stays decided; a run again finishes the rest.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Interrupted {
    pub not_attempted: u64,
}

impl ResolveReport {
    fn outcome(&mut self, op_id: &str, outcome: &str, verdict: Option<Verdict>) {
        self.operations.push(Resolved {
            op_id: op_id.to_string(),
            outcome: outcome.to_string(),
            verdict,
        });
    }

    fn skip(&mut self, op_id: &str, why: Skip) {
        *self.skipped.entry(why.as_str().to_string()).or_default() += 1;
        self.outcome(op_id, why.as_str(), None);
    }

    fn leave(&mut self, op_id: &str, verdict: Verdict) {
        *self.left.entry(verdict.as_str().to_string()).or_default() += 1;
        self.outcome(op_id, "left", Some(verdict));
    }

    fn decided(&mut self, op_id: &str, decision: Decision, verdict: Verdict) {
        match decision {
            Decision::Confirmed => self.confirmed += 1,
            Decision::NotApplied => self.not_applied += 1,
        }
        self.outcome(op_id, decision.as_str(), Some(verdict));
    }

    /// Counts an operation whose act failed; one that lost a race (another
    /// run or a person moved it first: `stale_version`, `not_unknown`) is
    /// not a failure but the skip a later selection would have made, so
    /// the loser of two resolves at once reports each as passed over.
    fn fail(&mut self, op_id: &str, verdict: Option<Verdict>, error: Error) {
        let raced = match error.refusal() {
            Some(Refusal::StaleVersion { .. }) => Some(Skip::VersionChanged),
            Some(Refusal::NotUnknown { .. }) => Some(Skip::NotUnknown),
            _ => None,
        };
        if let Some(why) = raced {
            return self.skip(op_id, why);
        }
        self.failed += 1;
        self.outcome(op_id, "failed", verdict);
        self.failures.push((op_id.to_string(), error));
    }

    /// The read of `op_id`, or `None` with the operation counted: not
    /// attempted (the run stopped before its turn) or failed.
    fn read_of(&mut self, op_id: &str, read: Option<Result<Read>>) -> Option<Read> {
        match read {
            None => {
                self.skip(op_id, Skip::NotAttempted);
                None
            }
            Some(Ok(read)) => Some(read),
            Some(Err(error)) => {
                self.fail(op_id, None, error);
                None
            }
        }
    }
}

/// What a run had committed when storage trouble stopped it: the
/// decisions of the chunks before, and the closes of the chunk in hand,
/// which are for good (each journaled with its authorization).
fn committed_before(report: &ResolveReport) -> Committed {
    Committed {
        sentence: format!(
            "before it, {} confirmed and {} not_applied were recorded by the policy; the \
             operations of the chunk in hand may be closed at their receivers (each close is \
             journaled) and stay unknown: run resolve again to decide them",
            report.confirmed, report.not_applied
        ),
        json: serde_json::json!({
            "confirmed": report.confirmed,
            "not_applied": report.not_applied,
        }),
    }
}

/// A closing snapshot the policy decides on, waiting for its chunk's
/// transaction.
struct Closed {
    op: Operation,
    snapshot: Snapshot,
    provenance: Provenance,
    decision: Decision,
    verdict: Verdict,
}

impl Workspace {
    /// The exact list a selection names: each operation with its version
    /// and receiver now. A named operation that does not exist is refused
    /// (`unknown_operation`) before anything is read.
    pub fn resolve_selection(&self, selection: Selection<'_>) -> Result<Vec<Planned>> {
        // Each with the registration its receiver has now, so that a run
        // of the plan after an update skips it (SPEC 12).
        let registrations: std::collections::HashMap<String, (i64, i64)> = (self.receivers()?)
            .into_iter()
            .map(|r| (r.name, (r.id, r.version)))
            .collect();
        let planned = |op_id: String, version: i64, receiver: String| {
            let at = registrations.get(&receiver).copied();
            Planned {
                op_id,
                version,
                receiver,
                receiver_id: at.map(|(id, _)| id),
                receiver_version: at.map(|(_, version)| version),
            }
        };
        match selection {
            Selection::Ids(ids) => ids
                .iter()
                .map(|id| {
                    let op = self.require(id)?;
                    Ok(planned(op.op_id, op.version, op.receiver))
                })
                .collect(),
            Selection::Filter(filter) => Ok(self
                .queue_keys(filter, usize::MAX)?
                .into_iter()
                .map(|key| planned(key.op_id, key.version, key.receiver))
                .collect()),
        }
    }

    /// Runs the policy over `list`, in chunks; an operation that cannot be
    /// read, closed or decided is reported and the others go on.
    pub fn resolve(
        &mut self,
        list: &[Planned],
        request: &ResolveRequest<'_>,
    ) -> Result<ResolveReport> {
        self.resolve_watched(list, request, &mut Unwatched)
    }

    /// [`Workspace::resolve`], telling `watch` of its progress after each
    /// chunk and stopping when it asks: between two requests to a
    /// receiver, after the decisions of what was closed by then are
    /// recorded. Every operation not asked about is `not_attempted`, and
    /// the report says it was interrupted.
    pub fn resolve_watched(
        &mut self,
        list: &[Planned],
        request: &ResolveRequest<'_>,
        watch: &mut dyn Watch,
    ) -> Result<ResolveReport> {
        if !request.dry_run {
            // It closes at receivers before it records: asked first, so a
            // login without both roles changes nothing anywhere.
            self.sender.may(crate::domain::team::Act::Resolve)?;
        }
        let mut report = ResolveReport::default();
        let cutoff = self.now().minus(request.older_than);
        watch.selected(Some(list.len()));
        for chunk in list.chunks(CHUNK) {
            if watch.stop() {
                for planned in chunk {
                    report.skip(&planned.op_id, Skip::NotAttempted);
                }
                continue;
            }
            let eligible = self.eligible(chunk, cutoff, &mut report);
            let eligible = eligible.map_err(|e| e.after(committed_before(&report)))?;
            let stop = || watch.stop();
            let to_close = if request.planned && !request.dry_run {
                eligible
            } else {
                self.provable_now(eligible, request, &stop, &mut report)
            };
            if !request.dry_run {
                let closed = self.close_all(to_close, request, &stop, &mut report);
                let decided = self.decide_all(closed, request, &mut report);
                decided.map_err(|e| e.after(committed_before(&report)))?;
            }
            watch.progress(report.operations.len());
        }
        let not_attempted = report.skipped.get(Skip::NotAttempted.as_str()).copied();
        report.interrupted = not_attempted.map(|not_attempted| Interrupted { not_attempted });
        // Each operation where the list has it, whatever phase settled it.
        let at: std::collections::HashMap<&str, usize> = (list.iter().enumerate())
            .map(|(i, op)| (op.op_id.as_str(), i))
            .collect();
        (report.operations).sort_by_key(|r| at.get(r.op_id.as_str()).copied());
        Ok(report)
    }

    /// The operations of a chunk that may be closed, each as it is now;
    /// the others are counted under the reason they are passed over. The
    /// chunk's operations are read together, then the registrations of
    /// those that reach that check.
    fn eligible(
        &self,
        chunk: &[Planned],
        cutoff: Timestamp,
        report: &mut ResolveReport,
    ) -> Result<Vec<Operation>> {
        let ids: Vec<&str> = chunk.iter().map(|p| p.op_id.as_str()).collect();
        let found = self.sender.require_each(&ids)?;
        let mut candidates = Vec::with_capacity(chunk.len());
        for (planned, op) in chunk.iter().zip(found) {
            let op = match op {
                Ok(op) => op,
                Err(Error::Refused(refusal @ Refusal::UnknownOperation(_))) => {
                    report.fail(&planned.op_id, None, refusal.into());
                    continue;
                }
                Err(other) => return Err(other),
            };
            // The version first: a listed operation decided since it was
            // listed has moved past the version the list authorized.
            let skip = if op.version != planned.version {
                Some(Skip::VersionChanged)
            } else if op.state != OpState::Unknown {
                Some(Skip::NotUnknown)
            } else if op.receiver != planned.receiver {
                Some(Skip::ReceiverChanged)
            } else if op.triage.escalated.is_some() {
                Some(Skip::Escalated)
            } else if op.triage.updated_at > cutoff {
                Some(Skip::TooYoung)
            } else {
                None
            };
            match skip {
                Some(why) => report.skip(&op.op_id, why),
                None => candidates.push((planned, op)),
            }
        }
        let ops: Vec<&Operation> = candidates.iter().map(|(_, op)| op).collect();
        let registrations = match self.registrations_of(&ops) {
            Ok(found) => found,
            // Each looked up alone, to fail as its own lookup does.
            Err(_) => ops.iter().map(|op| self.registration_of(op)).collect(),
        };
        let mut eligible = Vec::with_capacity(candidates.len());
        for ((planned, op), registration) in candidates.into_iter().zip(registrations) {
            let skip = match registration {
                Ok(registration)
                    if planned.registration_changed(registration.id, registration.version) =>
                {
                    Some(Skip::ReceiverChanged)
                }
                Ok(registration) if !registration.can_close() => Some(Skip::CannotClose),
                Ok(_) => None,
                Err(error) => {
                    report.fail(&op.op_id, None, error);
                    continue;
                }
            };
            match skip {
                Some(why) => report.skip(&op.op_id, why),
                None => eligible.push(op),
            }
        }
        Ok(eligible)
    }

    /// Reads each operation (batched where its receiver batches; a dry
    /// run's reads keep nothing) and keeps those whose snapshot, closed,
    /// the policy would decide; the others are left with that verdict. A
    /// dry run counts the decisions a run would record.
    fn provable_now(
        &mut self,
        ops: Vec<Operation>,
        request: &ResolveRequest<'_>,
        stop: &dyn Fn() -> bool,
        report: &mut ResolveReport,
    ) -> Vec<Operation> {
        let reads = if request.dry_run {
            (ops.iter())
                .map(|op| (!stop()).then(|| self.read_receiver(op, None, None)))
                .collect()
        } else {
            self.read_receivers(&ops, request.by, stop)
        };
        let mut provable = Vec::with_capacity(ops.len());
        for (op, read) in ops.into_iter().zip(reads) {
            let Some(read) = report.read_of(&op.op_id, read) else {
                continue;
            };
            let as_closed = Snapshot {
                closed: true,
                ..read.snapshot
            };
            let verdict = classify(op.scope(), &as_closed);
            match request.policy.decision(verdict, true) {
                None => report.leave(&op.op_id, verdict),
                Some(decision) if request.dry_run => report.decided(&op.op_id, decision, verdict),
                Some(_) => provable.push(op),
            }
        }
        provable
    }

    /// Closes each operation at its receiver (batched where it batches;
    /// each close journaled with its authorization, as `snapshot --close`
    /// journals it) and keeps those
    /// whose closing snapshot the policy decides; the others are left.
    fn close_all(
        &mut self,
        ops: Vec<Operation>,
        request: &ResolveRequest<'_>,
        stop: &dyn Fn() -> bool,
        report: &mut ResolveReport,
    ) -> Vec<Closed> {
        let reads = self.close_receivers(&ops, request.authorized_by, stop);
        let mut closed = Vec::with_capacity(ops.len());
        for (op, read) in ops.into_iter().zip(reads) {
            let Some(read) = report.read_of(&op.op_id, read) else {
                continue;
            };
            let verdict = classify(op.scope(), &read.snapshot);
            match request.policy.decision(verdict, read.snapshot.closed) {
                None => report.leave(&op.op_id, verdict),
                Some(decision) => closed.push(Closed {
                    op,
                    snapshot: read.snapshot,
                    provenance: read.provenance,
                    decision,
                    verdict,
                }),
            }
        }
        closed
    }

    /// Records the chunk's decisions in one transaction of the store's
    /// decision script; one refused (a version that moved since the read)
    /// fails alone.
    fn decide_all(
        &mut self,
        closed: Vec<Closed>,
        request: &ResolveRequest<'_>,
        report: &mut ResolveReport,
    ) -> Result<()> {
        if closed.is_empty() {
            return Ok(());
        }
        let reviews: Vec<(Review<'_>, Provenance)> = closed
            .iter()
            .map(|c| {
                let review = Review {
                    keep: None,
                    op_id: &c.op.op_id,
                    payload: &c.op.payload,
                    reviewer: request.by,
                    decision: c.decision,
                    snapshot: &c.snapshot,
                    expected_version: c.op.version,
                };
                (review, c.provenance.clone())
            })
            .collect();
        let recorded = self
            .sender
            .record_policy_reviews(request.policy, &reviews, &*self.clock)?;
        for (c, result) in closed.iter().zip(recorded) {
            match result {
                Ok(_) => report.decided(&c.op.op_id, c.decision, c.verdict),
                Err(error) => report.fail(&c.op.op_id, Some(c.verdict), error),
            }
        }
        Ok(())
    }
}
