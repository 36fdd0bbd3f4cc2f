//! What `recon metrics` counts (SPEC 15), as the outbox holds it at one
//! instant: plain numbers grouped by the labels the exposition gives them.
//! The store reads them in one statement (`store::metrics`); turning them
//! into Prometheus families is the command's (`commands::metrics`).

use super::{Decision, EvidenceSource, OpState, Timestamp, Verdict};

/// The outbox's counts, read in one snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutboxTally {
    /// The registered receivers' names: each has a series of every state
    /// even with no operation.
    pub receivers: Vec<String>,
    /// Operations by the receiver they route to and their state.
    pub operations: Vec<StateCount>,
    /// `unknown` operations by receiver, latest verdict and escalation,
    /// each group with its oldest `updated_at` (when it became unknown).
    pub unknown: Vec<UnknownGroup>,
    /// Operations carrying the contradiction marker.
    pub contradicted: i64,
    /// Surplus effects of kept duplicates (SPEC 14) with no approved
    /// compensation.
    pub surplus_effects: i64,
    /// Failed receiver calls the journal kept (`call_failed`).
    pub failed_calls: Vec<FailedCalls>,
    /// Decided operations by decision and the source of the decision.
    pub decisions: Vec<DecisionCount>,
    /// The journal's length.
    pub journal_entries: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCount {
    pub receiver: String,
    pub state: OpState,
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGroup {
    pub receiver: String,
    /// `None`: no observation recorded (`never`).
    pub verdict: Option<Verdict>,
    pub escalated: bool,
    pub count: i64,
    pub oldest: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCalls {
    pub receiver: String,
    pub verb: String,
    pub kind: String,
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionCount {
    pub decision: Decision,
    pub source: EvidenceSource,
    pub count: i64,
}
