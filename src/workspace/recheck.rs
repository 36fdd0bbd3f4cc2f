//! The facade's `verify --receivers` (SPEC 12): every final decision held
//! to what its receiver says now.
//!
//! The decided operations are walked in pages of the evidence table's
//! `journal_seq` (a decision is one evidence row, written by its `receipt`
//! or `decided` entry), from `--since` up to the journal's head read at
//! the start, so memory follows the page and the findings, never the
//! outbox. Each page's receivers are read exactly as `observe` reads them
//! (`Workspace::read_receivers`: sessions, batches, the rules of SPEC 8),
//! and each read is judged by the one rule of a read against a decision
//! (`domain::contradiction`). A read that agrees records nothing. A
//! contradiction is recorded as an observation, which raises the
//! contradiction marker (the store judges it again by the same rule as
//! it records it), once per marker: while an operation's marker is up, a
//! run that finds it contradicted again reports it and records nothing;
//! once a person acknowledged it, the next run that finds it records it
//! again (SPEC 9: a later contradicting read marks it again).

use super::{named, Workspace};
use crate::domain::team::Act;
use crate::domain::{
    classify, contradiction, DecidedOp, Found, NewObservation, OpState, Snapshot, Verdict,
};
use crate::error::{Error, Result, StoreError};
use std::collections::BTreeMap;

/// Decided operations read per page (and per recording transaction).
const PAGE: usize = 500;

/// What `verify --receivers` found: how many decisions it read at their
/// receivers, each contradiction, how many it could not read and why (a
/// stable code each), and the journal head it checked up to.
#[derive(Debug, Default, serde::Serialize)]
pub struct ReceiversReport {
    pub checked: u64,
    pub contradicted: Vec<Contradiction>,
    pub unchecked: BTreeMap<&'static str, u64>,
    pub through_seq: i64,
}

/// One decision its receiver contradicts now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Contradiction {
    pub op_id: String,
    /// The operation's final state: `confirmed` or `not_applied`.
    pub decision: OpState,
    pub found: Found,
    /// The journal seq of the entry that decided it.
    pub decision_seq: i64,
    /// The observation that marks it: the one this run recorded, or the
    /// one whose marker was already up; `None` when recording failed.
    pub seq: Option<i64>,
    /// Whether this run recorded the observation.
    pub recorded: bool,
}

/// A contradicting read waiting to be recorded with its page.
struct Pending {
    at: usize,
    found: Found,
    snapshot: Snapshot,
    verdict: Verdict,
    provenance: crate::domain::Provenance,
}

impl Workspace {
    /// Reads at its receiver every operation decided by an entry after seq
    /// `since` (0: every one), up to the journal's head now, and records
    /// each contradiction as `by`'s observation. Needs the right to
    /// observe (the reviewer role in team mode) even when it finds
    /// nothing, so a scheduled run's failure to record shows on its first
    /// run.
    pub fn verify_receivers(&mut self, since: i64, by: &str) -> Result<ReceiversReport> {
        let by = named(Some(by))?.unwrap_or_default();
        self.ensure_present()?;
        self.sender.may(Act::Observe)?;
        let through_seq = self.sender.journal_head()?.length;
        let mut report = ReceiversReport {
            through_seq,
            ..ReceiversReport::default()
        };
        let mut after = since;
        loop {
            let page = self.sender.decided_page(after, through_seq, PAGE)?;
            let Some(last) = page.last() else {
                return Ok(report);
            };
            after = last.decision_seq;
            self.recheck_page(&page, by, &mut report)?;
        }
    }

    /// Reads one page's receivers and records its contradictions.
    fn recheck_page(
        &mut self,
        page: &[DecidedOp],
        by: &str,
        report: &mut ReceiversReport,
    ) -> Result<()> {
        let ops: Vec<_> = page.iter().map(|d| d.op.clone()).collect();
        let reads = self.read_receivers(&ops, by, &|| false);
        let mut pending = Vec::new();
        for (at, (decided, read)) in page.iter().zip(reads).enumerate() {
            let read = match read {
                Some(Ok(read)) => read,
                Some(Err(error)) => {
                    *report
                        .unchecked
                        .entry(unchecked_reason(&error))
                        .or_default() += 1;
                    continue;
                }
                // Never asked to stop, it reads every one.
                None => {
                    *report.unchecked.entry("not_read").or_default() += 1;
                    continue;
                }
            };
            report.checked += 1;
            let op = &decided.op;
            let Some(found) = contradiction(op, decided.rested.as_ref(), &read.snapshot) else {
                continue;
            };
            match &op.triage.contradicted {
                Some(marker) => {
                    report
                        .contradicted
                        .push(finding(decided, found, Some(marker.seq), false))
                }
                None => pending.push(Pending {
                    at,
                    found,
                    verdict: classify(op.scope(), &read.snapshot),
                    snapshot: read.snapshot,
                    provenance: read.provenance,
                }),
            }
        }
        self.record_contradictions(page, &pending, by, report)
    }

    /// Records a page's contradicting reads in one transaction, each an
    /// observation that raises its operation's marker.
    fn record_contradictions(
        &mut self,
        page: &[DecidedOp],
        pending: &[Pending],
        by: &str,
        report: &mut ReceiversReport,
    ) -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let at = self.clock.now();
        let batch: Vec<NewObservation<'_>> = (pending.iter())
            .map(|p| NewObservation {
                op_id: &page[p.at].op.op_id,
                by,
                at,
                snapshot: &p.snapshot,
                verdict: p.verdict,
                provenance: &p.provenance,
            })
            .collect();
        let recorded = self.sender.record_observations(&batch, &*self.clock)?;
        for (p, result) in pending.iter().zip(recorded) {
            let seq = result.ok().map(|o| o.seq);
            let recorded = seq.is_some();
            report
                .contradicted
                .push(finding(&page[p.at], p.found, seq, recorded));
        }
        Ok(())
    }
}

fn finding(decided: &DecidedOp, found: Found, seq: Option<i64>, recorded: bool) -> Contradiction {
    Contradiction {
        op_id: decided.op.op_id.clone(),
        decision: decided.op.state,
        found,
        decision_seq: decided.decision_seq,
        seq,
        recorded,
    }
}

/// Why an operation's receiver could not be read, as a short stable code:
/// a refusal's (`receiver_gone`, `receiver_changed`, ...), a failed call's
/// (its kind, `crash`, `timeout`, ..., or its adapter's `ok: false` code,
/// `unavailable`, ...), else `storage`.
fn unchecked_reason(error: &Error) -> &'static str {
    match error.cause() {
        Error::Refused(refusal) => refusal.code(),
        Error::Store(StoreError::Call { code, .. }) => code,
        Error::Store(StoreError::Unavailable(_)) => "unavailable",
        _ => "storage",
    }
}
