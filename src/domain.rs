//! The vocabulary of reconciliation: operations, receiver effects, snapshots,
//! verdicts, and the rules that say which human decision a verdict supports.
//!
//! Everything here is pure. It does no I/O, so it cannot fail on I/O; the
//! stores persist these values and the console renders them, but the rules that
//! decide what is safe live only here, where they can be tested as a table.

pub mod bounds;
mod canonical;
mod closes;
pub mod duplicates;
mod json;
pub mod metrics;
pub mod names;
pub mod origin;
pub mod policy;
mod records;
mod refusal;
pub mod resolve;
pub mod sanitize;
pub mod secrets;
pub mod team;
pub mod time;
mod triage;

pub use bounds::MAX_PAYLOAD_BYTES;
pub use canonical::{canonical_json, canonical_sha256, check_i_json, check_magnitudes, sha256_hex};
pub use closes::{
    backing_close, check_close_named, check_recorded_close, says_closed, RecordedClose,
    RECORDED_CLOSES_SINCE,
};
pub use json::{
    parse_json, parse_json_input, parse_json_slice, parse_payload, same_json, whole, BadPayload,
    JsonError, MAX_PAYLOAD_DEPTH,
};
pub use names::NumberedIds;
pub use records::{
    AdapterFailure, Appended, BulkEffect, BulkObservation, BulkOperation, CallFailure, Ceiling,
    CloseRecord, Closure, Cursor, Description, EffectRequest, FailureKind, LatestEntry, Marking,
    Moved, NewNote, NewObservation, NewOperation, OpsQuery, PageBound, QueueFilter, QueueKey,
    Recorded, Registration, ANY_ACTION, BUILTIN_NAME,
};
pub use refusal::{Refusal, RouteAdvice};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
pub use time::Timestamp;
pub use triage::{
    check_acknowledgement, check_escalation, check_lost_escalation, contradiction, contradicts,
    free_text, Acknowledgement, CloseEntry, Contradicted, DecidedOp, Escalated, EscalationAction,
    EscalationRecord, LatestObservation, LostReceiver, Note, Observation, Observed, RestedClose,
    SortOrder, Triage, VerdictFilter, MAX_TEXT_BYTES,
};

/// Whether an operation is an agent's original side effect or a compensation
/// that a reviewer approved for one exact receiver effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Original,
    Compensation,
}

/// The sender's durable belief about an operation.
///
/// `Unknown` is deliberately conservative: it is written before the receiver
/// is invoked, so it does not mean the effect happened, only that it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpState {
    Prepared,
    Unknown,
    Confirmed,
    NotApplied,
}

/// What a read found that contradicts a final decision: the `found` of
/// `verify --receivers` (SPEC 12), one stable code each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// After `confirmed`: a complete and authoritative read lacks the
    /// confirmed (kept) effect.
    EffectGone,
    /// After `confirmed`: an effect the decision did not list (another id,
    /// payload, action or target), or more than one match.
    OtherEffect,
    /// After `not_applied`: the receiver holds an effect for the operation.
    EffectHeld,
    /// The decision rested on a close, and the receiver no longer shows
    /// the operation closed.
    TombstoneGone,
    /// The decision rested on a close whose closing login the receiver
    /// named, and it names another now.
    ClosedByDiffers,
}

impl Found {
    pub fn as_str(self) -> &'static str {
        match self {
            Found::EffectGone => "effect_gone",
            Found::OtherEffect => "other_effect",
            Found::EffectHeld => "effect_held",
            Found::TombstoneGone => "tombstone_gone",
            Found::ClosedByDiffers => "closed_by_differs",
        }
    }
}

/// A decision a reviewer can record for an `unknown` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Confirmed,
    NotApplied,
}

/// Where a state change out of `unknown` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    Receipt,
    Review,
    /// A decision `recon resolve` recorded under a named [`Policy`]: a
    /// person authorized the list, the policy judged the evidence.
    Policy,
}

/// A rule that may decide an `unknown` operation without a person judging
/// its evidence (SPEC 9, "Resolution by policy"). There is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Only the two provable verdicts, under a closing snapshot:
    /// `unique_exact_match` proves `confirmed`, `terminal_absence` proves
    /// `not_applied`. Every other verdict is left for people.
    Provable,
}

impl Policy {
    /// The decision this policy takes on a snapshot with `verdict`, closed
    /// or not; `None` leaves it for people.
    pub fn decision(self, verdict: Verdict, closed: bool) -> Option<Decision> {
        match (self, verdict, closed) {
            (Policy::Provable, Verdict::UniqueExactMatch, true) => Some(Decision::Confirmed),
            (Policy::Provable, Verdict::TerminalAbsence, true) => Some(Decision::NotApplied),
            _ => None,
        }
    }
}

/// The classification of one snapshot against the operation it was taken for.
/// The variants are listed in the order `classify` tests them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    DuplicateMatches,
    PayloadMismatch,
    ActionScopeMismatch,
    UniqueExactMatch,
    ExactMatchExistenceOnly,
    TerminalAbsence,
    Inconclusive,
}

macro_rules! string_names {
    ($ty:ty { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$(<$ty>::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $(<$ty>::$variant => $name),+ }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text { $($name => Some(<$ty>::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_names!(OpKind { Original => "original", Compensation => "compensation" });
string_names!(OpState {
    Prepared => "prepared",
    Unknown => "unknown",
    Confirmed => "confirmed",
    NotApplied => "not_applied",
});
string_names!(Decision { Confirmed => "confirmed", NotApplied => "not_applied" });
string_names!(EvidenceSource { Receipt => "receipt", Review => "review", Policy => "policy" });
string_names!(Policy { Provable => "provable" });
string_names!(Verdict {
    DuplicateMatches => "duplicate_matches",
    PayloadMismatch => "payload_mismatch",
    ActionScopeMismatch => "action_scope_mismatch",
    UniqueExactMatch => "unique_exact_match",
    ExactMatchExistenceOnly => "exact_match_existence_only",
    TerminalAbsence => "terminal_absence",
    Inconclusive => "inconclusive",
});

/// One row of the sender's outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    pub op_id: String,
    pub kind: OpKind,
    pub action_kind: String,
    pub payload: Value,
    pub state: OpState,
    pub version: i64,
    pub compensates_effect_id: Option<String>,
    pub compensates_op_id: Option<String>,
    pub confirmed_effect_id: Option<String>,
    /// The other matches of a duplicate whose one effect was kept (SPEC
    /// 14), each to be compensated; empty otherwise.
    #[serde(default)]
    pub surplus_effect_ids: Vec<String>,
    /// The receiver this operation routes to, fixed when it was prepared.
    pub receiver: String,
    /// Its times, latest observation and escalation marker.
    #[serde(flatten)]
    pub triage: Triage,
}

/// One row of the receiver's ledger. The receiver is not idempotent, so
/// several effects can carry the same `op_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    pub effect_id: String,
    pub op_id: String,
    pub action_kind: String,
    pub compensates_effect_id: Option<String>,
    pub payload: Value,
}

/// What the receiver could see for one operation, with the strength of the
/// observation. The local receiver reads every row in one transaction, so its
/// snapshots are complete and authoritative; `closed` says whether the close
/// barrier was in place within that transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub op_id: String,
    pub matches: Vec<Effect>,
    pub complete: bool,
    pub authoritative: bool,
    pub closed: bool,
    /// The login that closed the operation at the receiver, as its
    /// tombstone records it, when the receiver gives one (SPEC 12); only
    /// beside `closed: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
}

impl Snapshot {
    /// Models a weaker evidence source. Flags can only be lowered: a snapshot
    /// never claims more than the read that produced it.
    pub fn lowered(mut self, complete: bool, authoritative: bool, closed: bool) -> Self {
        self.complete &= complete;
        self.authoritative &= authoritative;
        self.closed &= closed;
        if !self.closed {
            self.closed_by = None;
        }
        self
    }

    /// True when the snapshot carries the full contract: every row read, from
    /// the authority, with no late write possible.
    pub fn is_terminal(&self) -> bool {
        self.complete && self.authoritative && self.closed
    }
}

/// The part of an operation that a receiver effect must match exactly (its
/// payload as the same JSON value, [`same_json`]: `10.0` matches `10`).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub action_kind: &'a str,
    pub payload: &'a Value,
    pub compensates_effect_id: Option<&'a str>,
}

impl Operation {
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            action_kind: &self.action_kind,
            payload: &self.payload,
            compensates_effect_id: self.compensates_effect_id.as_deref(),
        }
    }
}

/// Classifies a snapshot against the scope of the operation it is for.
///
/// The order matters and is part of the contract: duplicates are reported
/// before mismatches, and mismatches before any positive, so that a finding
/// which blocks automatic resolution can never be hidden by a later rule.
pub fn classify(scope: Scope<'_>, snapshot: &Snapshot) -> Verdict {
    match snapshot.matches.as_slice() {
        [_, _, ..] => Verdict::DuplicateMatches,
        [only] if !same_json(&only.payload, scope.payload) => Verdict::PayloadMismatch,
        [only]
            if only.action_kind != scope.action_kind
                || only.compensates_effect_id.as_deref() != scope.compensates_effect_id =>
        {
            Verdict::ActionScopeMismatch
        }
        [_] if snapshot.is_terminal() => Verdict::UniqueExactMatch,
        [_] => Verdict::ExactMatchExistenceOnly,
        [] if snapshot.is_terminal() => Verdict::TerminalAbsence,
        [] => Verdict::Inconclusive,
    }
}

impl Verdict {
    /// The decision this verdict can support, if any.
    pub fn supported_decision(self) -> Option<Decision> {
        match self {
            Verdict::UniqueExactMatch | Verdict::ExactMatchExistenceOnly => {
                Some(Decision::Confirmed)
            }
            Verdict::TerminalAbsence => Some(Decision::NotApplied),
            Verdict::DuplicateMatches
            | Verdict::PayloadMismatch
            | Verdict::ActionScopeMismatch
            | Verdict::Inconclusive => None,
        }
    }

    pub fn supports(self, decision: Decision) -> bool {
        self.supported_decision() == Some(decision)
    }

    /// One sentence a reviewer can act on: what this verdict permits, and
    /// what it forbids.
    pub fn explanation(self) -> &'static str {
        match self {
            Verdict::DuplicateMatches => {
                "more than one receiver effect carries this operation: neither decision is \
                 allowed, and recon picks no row; on a closed read of exact copies a person \
                 may keep one (--keep) and compensate the rest"
            }
            Verdict::PayloadMismatch => {
                "the one receiver effect has a different payload: it is not evidence that \
                 this operation applied, so neither decision is allowed"
            }
            Verdict::ActionScopeMismatch => {
                "the one receiver effect has another action kind or compensation target: \
                 neither decision is allowed"
            }
            Verdict::UniqueExactMatch => {
                "exactly one exact effect under a closed, complete, authoritative read: \
                 confirmed is allowed; not_applied is not"
            }
            Verdict::ExactMatchExistenceOnly => {
                "one exact effect exists, but without the close barrier a late duplicate \
                 can still land: confirmed is allowed, uniqueness is not established; \
                 not_applied is not allowed"
            }
            Verdict::TerminalAbsence => {
                "no effect under a closed, complete, authoritative read, and no late write \
                 can land: not_applied is allowed; confirmed is not"
            }
            // What could still settle it depends on the receiver:
            // `policy::explanation` says so.
            Verdict::Inconclusive => {
                "an empty read that is not closed, complete and authoritative cannot \
                 justify retry or not_applied"
            }
        }
    }
}

/// Trims a reviewer or approver name; `None` when nothing visible is left
/// (white space, zero-width characters and bidi marks alone are empty).
pub fn normalize_name(name: &str) -> Option<&str> {
    let trimmed = name.trim();
    names::has_visible(trimmed).then_some(trimmed)
}

/// The receiver's deterministic effect id for a ledger row number.
pub fn effect_id_for(row: i64) -> String {
    format!("fx-{row:06}")
}

/// The fields of `actual` that differ from `expected`, as JSON pointer-like
/// paths (`/to`, `/items/2`), by the same equality [`classify`] uses. Used
/// to highlight a mismatching payload.
pub fn differing_paths(expected: &Value, actual: &Value) -> Vec<String> {
    fn walk(path: &mut String, expected: &Value, actual: &Value, out: &mut Vec<String>) {
        match (expected, actual) {
            (Value::Object(e), Value::Object(a)) => {
                let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
                for key in keys {
                    let len = path.len();
                    path.push('/');
                    path.push_str(key);
                    match (e.get(key), a.get(key)) {
                        (Some(ev), Some(av)) => walk(path, ev, av, out),
                        _ => out.push(path.clone()),
                    }
                    path.truncate(len);
                }
            }
            (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
                for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    walk(path, ev, av, out);
                    path.truncate(len);
                }
            }
            _ if same_json(expected, actual) => {}
            _ => out.push(if path.is_empty() {
                "/".to_string()
            } else {
                path.clone()
            }),
        }
    }
    let mut out = Vec::new();
    walk(&mut String::new(), expected, actual, &mut out);
    out
}

/// A stored compensation approval: one confirmed original, one exact
/// receiver effect, the version the approver saw, and the compensation op it
/// prepared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub original_op_id: String,
    pub effect_id: String,
    pub approved_version: i64,
    pub approver: String,
    pub compensation_op_id: String,
    pub action_kind: String,
    pub payload: Value,
    /// Why, as the approver said (`duplicate` for a surplus effect, SPEC
    /// 14); recorded in the `approved` entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a reviewer decided, on which scope, and what they looked at.
#[derive(Debug, Clone)]
pub struct Review<'a> {
    pub op_id: &'a str,
    pub payload: &'a Value,
    pub reviewer: &'a str,
    pub decision: Decision,
    pub snapshot: &'a Snapshot,
    pub expected_version: i64,
    /// The effect kept of a duplicate (`--keep`, SPEC 14), if any.
    pub keep: Option<&'a str>,
}

impl Review<'_> {
    /// The receiver effect the decision confirms: the kept one, else the
    /// snapshot's one match for `confirmed`; none for `not_applied`.
    pub fn confirmed_effect(&self) -> Option<&str> {
        match self.decision {
            Decision::Confirmed => self
                .keep
                .or_else(|| self.snapshot.matches.first().map(|m| m.effect_id.as_str())),
            Decision::NotApplied => None,
        }
    }

    /// The matches not kept, when one effect of a duplicate is kept.
    pub fn surplus_effects(&self) -> Vec<String> {
        duplicates::surplus(self.snapshot, self.keep)
    }
}

/// The rules for recording a review against the stored operation. The
/// stored row is checked first: its version (so a stale second reviewer
/// always hears `stale_version` and what changed), then its state; then the
/// scope the reviewer decided on, then whether the verdict supports the
/// decision. `last_changed_by` names who made the
/// latest recorded change, for that message. Returns the verdict the
/// decision rests on.
pub fn check_review(
    op: &Operation,
    review: &Review<'_>,
    last_changed_by: impl FnOnce() -> Option<String>,
) -> Result<Verdict, Refusal> {
    if normalize_name(review.reviewer).is_none() {
        return Err(Refusal::EmptyReviewer);
    }
    if op.version != review.expected_version {
        return Err(Refusal::StaleVersion {
            expected: review.expected_version,
            found: op.version,
            state: op.state,
            changed_by: last_changed_by(),
        });
    }
    if op.state != OpState::Unknown {
        return Err(Refusal::NotUnknown {
            op_id: op.op_id.clone(),
            state: op.state,
        });
    }
    check_evidence(&op.op_id, op.scope(), review)
}

/// The half of [`check_review`] that judges the evidence, not the row: the
/// snapshot and the decided scope are the operation's (`op_id`, `scope`),
/// and the snapshot's verdict supports the decision. Returns that verdict.
/// `verify` holds every recorded decision to it, against the operation as
/// the journal prepared it, since the database cannot judge a snapshot.
pub fn check_evidence(
    op_id: &str,
    scope: Scope<'_>,
    review: &Review<'_>,
) -> Result<Verdict, Refusal> {
    if review.snapshot.op_id != op_id {
        return Err(Refusal::ScopeMismatch(format!(
            "the snapshot is for {}, not {op_id}",
            review.snapshot.op_id
        )));
    }
    if review.op_id != op_id || !same_json(review.payload, scope.payload) {
        return Err(Refusal::ScopeMismatch(format!(
            "the decision's payload scope differs from the stored payload of {op_id}"
        )));
    }
    let verdict = classify(scope, review.snapshot);
    if let Some(keep) = review.keep {
        duplicates::check_keep(scope, review, verdict, keep)?;
        return Ok(verdict);
    }
    if !verdict.supports(review.decision) {
        return Err(Refusal::UnsupportedVerdict {
            decision: review.decision,
            verdict,
        });
    }
    Ok(verdict)
}

/// The rule of a decision taken by `policy` on top of a review's
/// ([`check_review`]): the snapshot must be closed and its verdict the one
/// the policy takes that decision on, or the decision is refused as a
/// verdict that does not support it.
pub fn check_policy_review(
    policy: Policy,
    review: &Review<'_>,
    verdict: Verdict,
) -> Result<(), Refusal> {
    if policy.decision(verdict, review.snapshot.closed) == Some(review.decision) {
        return Ok(());
    }
    Err(Refusal::UnsupportedVerdict {
        decision: review.decision,
        verdict,
    })
}

/// A request to approve a compensation for one confirmed effect.
#[derive(Debug, Clone)]
pub struct CompensationRequest<'a> {
    pub original_op_id: &'a str,
    pub effect_id: &'a str,
    pub approver: &'a str,
    pub expected_version: i64,
    pub compensation_op_id: &'a str,
    pub action_kind: &'a str,
    pub payload: &'a Value,
    /// `--reason`: optional for the kept effect, `duplicate` for a surplus
    /// one (SPEC 14).
    pub reason: Option<&'a str>,
}

/// The rules for approving a compensation, in the order of SPEC section 4;
/// a surplus effect of a kept duplicate may be compensated as the kept one
/// is, with the reason `duplicate` (SPEC 14).
pub fn check_approval(
    original: &Operation,
    request: &CompensationRequest<'_>,
    existing: Option<&Approval>,
) -> Result<(), Refusal> {
    if normalize_name(request.approver).is_none() {
        return Err(Refusal::EmptyReviewer);
    }
    if original.state != OpState::Confirmed {
        return Err(Refusal::OriginalNotConfirmed {
            op_id: original.op_id.clone(),
            state: original.state,
        });
    }
    if original.version != request.expected_version {
        return Err(Refusal::StaleVersion {
            expected: request.expected_version,
            found: original.version,
            state: original.state,
            changed_by: None,
        });
    }
    duplicates::check_approved_effect(original, request.effect_id, request.reason)?;
    if existing.is_some() {
        return Err(Refusal::AlreadyApproved {
            op_id: original.op_id.clone(),
            effect_id: request.effect_id.to_string(),
        });
    }
    Ok(())
}

/// The rechecks before a compensation is dispatched: its approval still
/// exists, the original is still confirmed at the approved version, and the
/// op still does exactly what was approved.
pub fn check_compensation_dispatch(
    op: &Operation,
    approval: Option<&Approval>,
    original: Option<&Operation>,
) -> Result<(), Refusal> {
    let approval = approval.ok_or_else(|| Refusal::CompensationNotApproved(op.op_id.clone()))?;
    let original =
        original.ok_or_else(|| Refusal::UnknownOperation(approval.original_op_id.clone()))?;
    if original.state != OpState::Confirmed {
        return Err(Refusal::OriginalNotConfirmed {
            op_id: original.op_id.clone(),
            state: original.state,
        });
    }
    if original.version != approval.approved_version {
        return Err(Refusal::StaleVersion {
            expected: approval.approved_version,
            found: original.version,
            state: original.state,
            changed_by: None,
        });
    }
    if op.action_kind != approval.action_kind {
        return Err(Refusal::CompensationActionMismatch {
            approved: approval.action_kind.clone(),
            actual: op.action_kind.clone(),
        });
    }
    if op.compensates_effect_id.as_deref() != Some(approval.effect_id.as_str())
        || !duplicates::compensable(original, &approval.effect_id)
    {
        return Err(Refusal::CompensationEffectMismatch {
            requested: op.compensates_effect_id.clone().unwrap_or_default(),
            confirmed: Some(approval.effect_id.clone()),
        });
    }
    Ok(())
}

/// One row of the evidence table: a state change out of `unknown`, with the
/// full evidence it rests on (the snapshot a reviewer saw, or the receipt
/// the receiver printed). The row is the projection of one journal entry
/// (`receipt` or `decided`), named by `journal_seq`; `hash` is that entry's
/// link in the journal's hash chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRecord {
    pub seq: i64,
    pub op_id: String,
    pub source: EvidenceSource,
    pub reviewer: Option<String>,
    pub decision: Decision,
    pub verdict: Option<Verdict>,
    pub snapshot: Value,
    pub from_version: i64,
    pub to_version: i64,
    pub effect_id: Option<String>,
    /// The matches not kept, when one effect of a duplicate was kept (SPEC
    /// 14): in the `decided` entry and the operation's row, not this table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub surplus_effect_ids: Vec<String>,
    /// The receiver the evidence came from, the SHA-256 of its stored
    /// `describe` answer, and the SHA-256 of the answer this row rests on.
    pub receiver: String,
    pub receiver_describe_sha256: String,
    pub response_sha256: String,
    /// The registration it came from and its version (none for evidence
    /// recorded before schema 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_version: Option<i64>,
    /// The policy that took the decision (`source: "policy"` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// The `closed` entry whose snapshot this decision carries, when its
    /// snapshot says `closed: true` (SPEC 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_seq: Option<i64>,
    pub recorded_at: Timestamp,
    pub journal_seq: i64,
    pub hash: String,
}

/// Where a piece of evidence came from: which receiver, held to which
/// description, and which exact answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub receiver: String,
    pub receiver_describe_sha256: String,
    pub response_sha256: String,
    /// The registration the answer came through, and its version: a name
    /// can be taken again, an identity cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_version: Option<i64>,
}
