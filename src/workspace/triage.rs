//! The facade's triage: observing operations (reading each one's receiver
//! and recording what it saw), notes, the escalation marker, and the
//! queue's pages under every filter and order.
//!
//! Observations are recorded in batches, one outbox transaction per batch
//! (each observation still its own journal entry), so observing a whole
//! queue costs one fsync per batch rather than one per operation. The
//! receiver is read one operation at a time, as ever; a read that fails
//! (an adapter that gave no usable answer, a receiver no longer
//! registered) is that operation's alone: nothing is recorded for it, the
//! run goes on, and the report lists it with why. Only a failure to record
//! stops the run, and the error says how many were recorded before it.

use super::watch::{Unwatched, Watch};
use super::{named, Workspace};
use crate::domain::Provenance;
use crate::domain::{
    check_escalation, classify, free_text, EscalationAction, Marking, NewNote, NewObservation,
    Note, Observed, OpState, Operation, OpsQuery, Snapshot, Timestamp, Verdict,
};
use crate::error::{Committed, Error, Result};
use std::time::Duration;

/// Observations recorded per outbox transaction.
const OBSERVE_BATCH: usize = 500;

/// What `recon observe` asks for: the operations named, or those `state`
/// selects (default `unknown`), of them those last observed longer ago
/// than `older_than` or never, read and recorded as `by`'s.
#[derive(Debug, Clone, Default)]
pub struct ObserveRequest<'a> {
    pub op_ids: &'a [String],
    pub state: Option<OpState>,
    pub older_than: Option<Duration>,
    pub by: &'a str,
}

/// What `observe` did: every operation it read and recorded, in the order
/// it read them, every one it could not read or record, and, when it was
/// stopped ([`Watch::stop`]), how many selected operations it did
/// not attempt.
#[derive(Debug, Default)]
pub struct ObserveReport {
    pub observed: Vec<Observed>,
    pub unread: Vec<Unread>,
    /// `Some(n)` when the run was stopped: `n` selected operations were
    /// not read (nothing was recorded for them; a run again reads them).
    pub stopped: Option<usize>,
}

/// An operation `observe` could not read, or whose observation could not
/// be recorded, and why; nothing was recorded for it.
#[derive(Debug)]
pub struct Unread {
    pub op_id: String,
    /// The receiver it routes to.
    pub receiver: String,
    pub error: Error,
}

/// One read, waiting to be recorded with its batch.
struct Pending {
    op_id: String,
    snapshot: Snapshot,
    verdict: Verdict,
    provenance: Provenance,
    at: Timestamp,
}

impl Workspace {
    /// Reads each selected operation's receiver and records what it saw;
    /// an operation whose read fails is listed in the report and the rest
    /// are read all the same. Named operations that do not exist are
    /// refused (`unknown_operation`) before anything is read; one named
    /// more than once is read once.
    pub fn observe(&mut self, request: &ObserveRequest<'_>) -> Result<ObserveReport> {
        self.observe_watched(request, &mut Unwatched)
    }

    /// [`Workspace::observe`], telling `watch` of its progress and
    /// stopping when it asks (the report then counts what was not read).
    pub fn observe_watched(
        &mut self,
        request: &ObserveRequest<'_>,
        watch: &mut dyn Watch,
    ) -> Result<ObserveReport> {
        let by = named(Some(request.by))?.unwrap_or_default();
        self.ensure_present()?;
        let cutoff = request.older_than.map(|age| self.clock.now().minus(age));
        let mut report = ObserveReport::default();
        if !request.op_ids.is_empty() {
            // An operation named twice is read once, where it was first
            // named.
            let mut named = std::collections::HashSet::new();
            let mut ops = Vec::with_capacity(request.op_ids.len());
            for id in request.op_ids.iter().filter(|id| named.insert(id.as_str())) {
                ops.push(self.sender.require(id)?);
            }
            ops.retain(|op| due(op, request.state, cutoff));
            watch.selected(Some(ops.len()));
            self.observe_ops(&ops, by, watch, &mut report)?;
            return Ok(report);
        }
        let state = request.state.unwrap_or(OpState::Unknown);
        let total = match cutoff {
            Some(_) => None,
            None => {
                let n = self.counts()?.get(&state).copied().unwrap_or(0);
                Some(usize::try_from(n).unwrap_or(0))
            }
        };
        watch.selected(total);
        let mut after = String::new();
        loop {
            let page = self
                .sender
                .observation_due(Some(state), cutoff, &after, OBSERVE_BATCH)?;
            let Some(last) = page.last() else {
                return Ok(report);
            };
            // Past the page by op id, so an operation left unread (and so
            // still due) is not read again.
            after.clone_from(&last.op_id);
            if report.stopped.is_some() {
                // Stopped: the rest of the selection is only counted.
                report.stopped = report.stopped.map(|n| n + page.len());
                continue;
            }
            self.observe_ops(&page, by, watch, &mut report)?;
        }
    }

    /// Reads and records `ops` in batches, adding to `report`; once
    /// `watch` asks to stop, the operations not read are counted in
    /// `report.stopped` instead.
    fn observe_ops(
        &mut self,
        ops: &[Operation],
        by: &str,
        watch: &mut dyn Watch,
        report: &mut ObserveReport,
    ) -> Result<()> {
        for chunk in ops.chunks(OBSERVE_BATCH) {
            let mut pending = Vec::with_capacity(chunk.len());
            let reads = self.read_receivers(chunk, by, &|| watch.stop());
            for (op, read) in chunk.iter().zip(reads) {
                match read {
                    Some(Ok(read)) => pending.push(Pending {
                        op_id: op.op_id.clone(),
                        verdict: classify(op.scope(), &read.snapshot),
                        snapshot: read.snapshot,
                        provenance: read.provenance,
                        at: self.clock.now(),
                    }),
                    Some(Err(error)) => report.unread.push(Unread {
                        op_id: op.op_id.clone(),
                        receiver: op.receiver.clone(),
                        error,
                    }),
                    None => report.stopped = Some(report.stopped.unwrap_or(0) + 1),
                }
            }
            self.record_pending(&pending, by, report)
                .map_err(|e| stopped(e, report.observed.len()))?;
            watch.progress(report.observed.len() + report.unread.len());
        }
        Ok(())
    }

    /// Records a batch's reads in one transaction; an observation the
    /// store refused or failed alone is listed as not observed.
    fn record_pending(
        &mut self,
        pending: &[Pending],
        by: &str,
        report: &mut ObserveReport,
    ) -> Result<()> {
        let batch: Vec<NewObservation<'_>> = pending
            .iter()
            .map(|p| NewObservation {
                op_id: &p.op_id,
                by,
                at: p.at,
                snapshot: &p.snapshot,
                verdict: p.verdict,
                provenance: &p.provenance,
            })
            .collect();
        if batch.is_empty() {
            return Ok(());
        }
        let recorded = self.sender.record_observations(&batch, &*self.clock)?;
        for (p, result) in pending.iter().zip(recorded) {
            match result {
                Ok(o) => report.observed.push(o.seen),
                Err(error) => report.unread.push(Unread {
                    op_id: p.op_id.clone(),
                    receiver: p.provenance.receiver.clone(),
                    error,
                }),
            }
        }
        Ok(())
    }

    /// Leaves a note on an operation, in any state.
    pub fn note(&mut self, op_id: &str, by: &str, text: &str) -> Result<Note> {
        let by = named(Some(by))?.unwrap_or_default();
        let text = free_text("the note's text", text).map_err(Error::Invalid)?;
        self.ensure_present()?;
        let note = NewNote {
            op_id,
            by,
            at: self.clock.now(),
            text,
        };
        self.sender.note(&note, &*self.clock)
    }

    /// Escalates an `unknown` operation recon cannot decide, or refuses
    /// `not_unknown` / `already_escalated`. The operation stays `unknown`.
    pub fn escalate(&mut self, op_id: &str, by: &str, reason: &str) -> Result<Operation> {
        self.mark(op_id, EscalationAction::Escalate, by, reason)
    }

    /// Lowers an operation's escalation marker, or refuses `not_escalated`.
    pub fn deescalate(&mut self, op_id: &str, by: &str, reason: &str) -> Result<Operation> {
        self.mark(op_id, EscalationAction::Deescalate, by, reason)
    }

    /// Clears the operation's contradiction marker, with a person's reason
    /// (journaled; the history keeps both), or refuses `not_contradicted`.
    pub fn acknowledge(&mut self, op_id: &str, by: &str, reason: &str) -> Result<Operation> {
        let by = named(Some(by))?.unwrap_or_default();
        let reason = free_text("the reason", reason).map_err(Error::Invalid)?;
        self.ensure_present()?;
        let acknowledgement = crate::domain::NewNote {
            op_id,
            by,
            at: self.clock.now(),
            text: reason,
        };
        self.sender.acknowledge(&acknowledgement, &*self.clock)
    }

    /// Whether the marker may be raised or lowered now, without writing:
    /// what a console asks before it offers the key.
    pub fn check_escalation(&self, op_id: &str, action: EscalationAction) -> Result<()> {
        let op = self.sender.require(op_id)?;
        Ok(check_escalation(&op, action)?)
    }

    fn mark(
        &mut self,
        op_id: &str,
        action: EscalationAction,
        by: &str,
        reason: &str,
    ) -> Result<Operation> {
        let by = named(Some(by))?.unwrap_or_default();
        let reason = free_text("the reason", reason).map_err(Error::Invalid)?;
        self.ensure_present()?;
        let marking = Marking {
            op_id,
            action,
            by,
            at: self.clock.now(),
            reason,
        };
        self.sender.mark(&marking, &*self.clock)
    }

    /// One page of operations under a filter and an order, after a cursor:
    /// `recon ops`, and the console's queue by age.
    pub fn ops_page(&self, query: &OpsQuery<'_>) -> Result<Vec<Operation>> {
        self.sender.ops_page(query)
    }
}

/// Whether a named operation is selected by the state and the cutoff.
fn due(op: &Operation, state: Option<OpState>, cutoff: Option<Timestamp>) -> bool {
    let in_state = state.is_none_or(|s| op.state == s);
    let stale = match (cutoff, &op.triage.latest_observation) {
        (Some(cutoff), Some(latest)) => latest.observed_at < cutoff,
        _ => true,
    };
    in_state && stale
}

/// A failure to record, saying how many observations were recorded
/// before it.
fn stopped(error: Error, recorded: usize) -> Error {
    if recorded == 0 {
        return error;
    }
    error.after(Committed {
        sentence: format!("{recorded} observations were recorded before it"),
        json: serde_json::json!({ "observations": recorded }),
    })
}
