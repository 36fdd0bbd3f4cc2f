//! Triage: what a reviewer facing many unknown operations needs beside
//! their state. When each act happened, what the receiver showed the last
//! time someone looked, the notes people left, and whether someone
//! escalated the operation to people who can decide what recon cannot.
//!
//! An escalation is a marker, not a state: an escalated operation is
//! `unknown` like any other, every rule of a review and an approval
//! applies to it unchanged, and a decision (or a receipt) clears the
//! marker while the history keeps it. The rules of the marker are here
//! ([`check_escalation`]), as pure functions like every other rule, and so
//! is the one rule of a read against a final decision ([`contradiction`]),
//! which every recorded read and `verify --receivers` are judged by.

use super::time::Timestamp;
use super::{Found, OpState, Operation, Refusal, Snapshot, Verdict};
use serde::{Deserialize, Serialize};

/// What triage knows of an operation beside its state: the times of its
/// acts, its latest observation and its escalation marker. Part of the
/// operation's JSON (flattened into it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Triage {
    pub created_at: Timestamp,
    /// Moves when the state or the version does (prepare, dispatch,
    /// receipt, decision); notes, observations and escalations leave it.
    pub updated_at: Timestamp,
    pub dispatch_count: i64,
    pub last_dispatched_at: Option<Timestamp>,
    pub latest_observation: Option<LatestObservation>,
    pub escalated: Option<Escalated>,
    /// The first recorded read that contradicted the operation's final
    /// decision, until a person acknowledges it.
    pub contradicted: Option<Contradicted>,
}

/// A final decision contradicted by a recorded read (SPEC 9): the read's
/// journal entry, its time and its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contradicted {
    pub seq: i64,
    pub at: Timestamp,
    pub verdict: Verdict,
}

/// Whether a recorded read contradicts the operation's final decision
/// (SPEC 9, "Contradictions"): [`contradiction`] without a close to hold
/// the read to, as a receipt (which says nothing of tombstones) is judged.
pub fn contradicts(op: &Operation, snapshot: &Snapshot) -> bool {
    contradiction(op, None, snapshot).is_some()
}

/// The close a final decision rested on: its snapshot said `closed:
/// true`, and `closed_by` is the closing login the receiver gave then, as
/// the `closed` entry it names recorded it (SPEC 12), if it gave one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestedClose {
    pub closed_by: Option<String>,
}

impl RestedClose {
    /// The close a decision's evidence shows, if it shows one: a read's
    /// snapshot that says `closed: true`, with the `closed_by` of the
    /// `closed` entry it names (`close`, the entry's fields), or, for a
    /// decision an older schema recorded, which names none, its snapshot's.
    /// A receipt's evidence (`{"receipt": effect}`) rests on no close.
    pub fn of(
        evidence_snapshot: &serde_json::Value,
        close: Option<&serde_json::Value>,
    ) -> Option<RestedClose> {
        let closed_by = |fields: &serde_json::Value| {
            (fields.get("closed_by"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        super::says_closed(evidence_snapshot).then(|| RestedClose {
            closed_by: closed_by(close.unwrap_or(evidence_snapshot)),
        })
    }
}

/// A final decision as `verify --receivers` holds it to its receiver: the
/// operation as it is now, the journal seq of the entry that decided it
/// (a `receipt` or a `decided`), and the close its evidence rested on.
#[derive(Debug, Clone)]
pub struct DecidedOp {
    pub op: Operation,
    pub decision_seq: i64,
    pub rested: Option<RestedClose>,
}

/// The one rule of a read against a final decision. Section 9's part:
/// after `not_applied`, any match; after `confirmed`, more than one match,
/// a match that is not the confirmed effect (another id, payload, action
/// or target), or a complete and authoritative read that lacks it; after
/// one effect of a duplicate was kept, a read judged against kept plus
/// surplus (SPEC 14, [`super::duplicates::contradicts_kept`]). And SPEC
/// 12's part, for a query answer held to the close the decision `rested`
/// on: a read that no longer shows the operation closed, or that names
/// another closing login than the decision's snapshot did (when both name
/// one). An operation not decided has nothing to contradict.
pub fn contradiction(
    op: &Operation,
    rested: Option<&RestedClose>,
    read: &Snapshot,
) -> Option<Found> {
    let found = match op.state {
        OpState::NotApplied => (!read.matches.is_empty()).then_some(Found::EffectHeld),
        OpState::Confirmed if !op.surplus_effect_ids.is_empty() => {
            super::duplicates::contradicts_kept(op, read)
        }
        OpState::Confirmed => match read.matches.as_slice() {
            [] => (read.complete && read.authoritative).then_some(Found::EffectGone),
            [only] => {
                let exact = matches!(
                    super::classify(op.scope(), read),
                    Verdict::UniqueExactMatch | Verdict::ExactMatchExistenceOnly
                );
                let confirmed = op.confirmed_effect_id.as_deref() == Some(only.effect_id.as_str());
                (!exact || !confirmed).then_some(Found::OtherEffect)
            }
            _ => Some(Found::OtherEffect),
        },
        OpState::Prepared | OpState::Unknown => return None,
    };
    found.or_else(|| {
        let rested = rested?;
        if !read.closed {
            return Some(Found::TombstoneGone);
        }
        match (&rested.closed_by, &read.closed_by) {
            (Some(then), Some(now)) if then != now => Some(Found::ClosedByDiffers),
            _ => None,
        }
    })
}

/// A person's acknowledgement of a contradiction, which clears the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acknowledgement {
    pub seq: i64,
    pub by: String,
    pub at: Timestamp,
    pub reason: String,
}

/// Only a contradicted operation is acknowledged (`not_contradicted`).
pub fn check_acknowledgement(op: &Operation) -> Result<(), Refusal> {
    match op.triage.contradicted {
        Some(_) => Ok(()),
        None => Err(Refusal::NotContradicted(op.op_id.clone())),
    }
}

/// The latest recorded observation of an operation, in short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatestObservation {
    pub verdict: Verdict,
    pub observed_at: Timestamp,
    pub observed_by: String,
    pub closed: bool,
    /// How many effects the read found.
    pub matches: i64,
}

/// An operation's escalation marker: who raised it, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalated {
    pub by: String,
    pub at: Timestamp,
    pub reason: String,
}

/// One recorded read of an operation's receiver: what `observe` prints of
/// it, with the journal entry that recorded it (`seq`), the whole snapshot
/// and where the answer came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    pub seq: i64,
    #[serde(flatten)]
    pub seen: Observed,
    pub snapshot: Snapshot,
    pub receiver_describe_sha256: String,
    pub response_sha256: String,
}

/// An observation in one line: what `recon observe --json` prints per
/// operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observed {
    pub op_id: String,
    pub receiver: String,
    pub verdict: Verdict,
    pub observed_at: Timestamp,
    pub observed_by: String,
    pub complete: bool,
    pub authoritative: bool,
    pub closed: bool,
    pub matches: i64,
}

/// A note a person left on an operation; `seq` is its journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub seq: i64,
    pub by: String,
    pub at: Timestamp,
    pub text: String,
}

/// Raising or lowering an escalation marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EscalationAction {
    Escalate,
    Deescalate,
}

impl EscalationAction {
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationAction::Escalate => "escalate",
            EscalationAction::Deescalate => "deescalate",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "escalate" => Some(EscalationAction::Escalate),
            "deescalate" => Some(EscalationAction::Deescalate),
            _ => None,
        }
    }
}

/// One raising or lowering of the marker, as the history keeps it; `seq`
/// is its journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EscalationRecord {
    pub seq: i64,
    pub action: EscalationAction,
    pub by: String,
    pub at: Timestamp,
    pub reason: String,
}

/// A close of the operation at its receiver, as the outbox journaled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloseEntry {
    /// The journal entry of the close (`closed`).
    #[serde(skip)]
    pub seq: i64,
    pub closed_at: Timestamp,
    pub authorized_by: String,
    pub receiver: String,
}

/// Whether the marker may be raised or lowered on this operation: only an
/// `unknown` operation is escalated (`not_unknown`), once
/// (`already_escalated`); only an escalated one is deescalated
/// (`not_escalated`).
pub fn check_escalation(op: &Operation, action: EscalationAction) -> Result<(), Refusal> {
    match (action, &op.triage.escalated) {
        // A contradicted decision may be escalated although it is final.
        (EscalationAction::Escalate, _)
            if op.state != OpState::Unknown && op.triage.contradicted.is_none() =>
        {
            Err(Refusal::NotUnknown {
                op_id: op.op_id.clone(),
                state: op.state,
            })
        }
        (EscalationAction::Escalate, Some(marker)) => Err(Refusal::AlreadyEscalated {
            op_id: op.op_id.clone(),
            by: marker.by.clone(),
        }),
        (EscalationAction::Deescalate, None) => Err(Refusal::NotEscalated(op.op_id.clone())),
        _ => Ok(()),
    }
}

/// A registration ended although operations route to it, because its
/// store is gone (`receivers remove --lost`, SPEC 8, fourth wave): who
/// ended it and why. The reason is each escalation's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostReceiver<'a> {
    pub by: &'a str,
    pub reason: &'a str,
}

/// Whether removing its receiver as lost escalates this operation routed
/// to it: every open one, `prepared` as well as `unknown`. This is the
/// only path on which a `prepared` operation is escalated: it will never
/// be dispatched (each of its acts is refused `receiver_gone` from now
/// on), so it needs people as an `unknown` one does. One already
/// escalated is escalated again, so that its marker names the loss (the
/// history keeps the earlier one). A decided operation is not open
/// (`not_unknown`): it keeps its decision and its history.
pub fn check_lost_escalation(op: &Operation) -> Result<(), Refusal> {
    match op.state {
        OpState::Prepared | OpState::Unknown => Ok(()),
        state => Err(Refusal::NotUnknown {
            op_id: op.op_id.clone(),
            state,
        }),
    }
}

/// The most bytes a note's text or an escalation's reason may hold.
pub const MAX_TEXT_BYTES: usize = 4096;

/// Checks a note's text or an escalation's reason: at most
/// [`MAX_TEXT_BYTES`] bytes, with a visible character. Control characters
/// are kept (a note can span lines) and shown escaped wherever it is
/// displayed.
pub fn free_text<'a>(what: &str, text: &'a str) -> Result<&'a str, String> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!(
            "{what} is {} bytes long; at most {MAX_TEXT_BYTES} are kept",
            text.len()
        ));
    }
    if !super::names::has_visible(text) {
        return Err(format!("{what} is empty"));
    }
    Ok(text)
}

/// Which latest verdict the queue shows: one verdict, or never observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictFilter {
    Is(Verdict),
    Never,
}

/// The order of a listing: by op id, or by `updated_at` (oldest first,
/// then op id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortOrder {
    #[default]
    OpId,
    Age,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OpKind;

    fn op(state: OpState, escalated: bool) -> Operation {
        Operation {
            op_id: "op-1".into(),
            kind: OpKind::Original,
            action_kind: "post_letter".into(),
            payload: serde_json::json!({}),
            state,
            version: 1,
            compensates_effect_id: None,
            compensates_op_id: None,
            confirmed_effect_id: None,
            surplus_effect_ids: Vec::new(),
            receiver: "mail".into(),
            triage: Triage {
                escalated: escalated.then(|| Escalated {
                    by: "rita".into(),
                    at: Timestamp::default(),
                    reason: "odd".into(),
                }),
                ..Triage::default()
            },
        }
    }

    #[test]
    fn a_lost_receiver_escalates_every_open_operation_and_no_decided_one() {
        for state in [OpState::Prepared, OpState::Unknown] {
            for escalated in [false, true] {
                assert_eq!(check_lost_escalation(&op(state, escalated)), Ok(()));
            }
        }
        for state in [OpState::Confirmed, OpState::NotApplied] {
            assert_eq!(
                check_lost_escalation(&op(state, false)).map_err(|r| r.code()),
                Err("not_unknown")
            );
        }
        // A reviewer's escalation still refuses a prepared operation.
        assert_eq!(
            check_escalation(&op(OpState::Prepared, false), EscalationAction::Escalate)
                .map_err(|r| r.code()),
            Err("not_unknown")
        );
    }
}
