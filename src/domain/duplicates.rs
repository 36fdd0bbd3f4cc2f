//! Duplicates: keep one effect, compensate the rest (SPEC 14), the rules
//! in one place. A reviewer may keep one of several matches only when the
//! read is closed, complete and authoritative and every match is an exact
//! copy of the operation's scope; the other matches are its surplus, each
//! compensable once with the reason `duplicate`. No I/O.
//!
//! The console asks the same rule before it offers "keep one"
//! ([`why_not_keep`]), shows each match by the hash of its payload
//! ([`payload_hash`]), and offers the compensation of each surplus effect
//! no approval names yet ([`awaiting`]).

use super::{
    canonical_json, same_json, Approval, Decision, Found, OpState, Operation, Refusal, Review,
    Scope, Snapshot, Verdict,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The reason a surplus effect's compensation must carry.
pub const SURPLUS_REASON: &str = "duplicate";

/// Whether `--keep` is allowed on this review's snapshot, and whether
/// `keep` is one of its matches: `keep_not_allowed` on any verdict but a
/// duplicate, on a decision other than `confirmed`, on a read without the
/// full contract, or on matches that differ from the operation's scope;
/// `keep_not_a_match` on an effect the snapshot does not hold.
pub fn check_keep(
    scope: Scope<'_>,
    review: &Review<'_>,
    verdict: Verdict,
    keep: &str,
) -> Result<(), Refusal> {
    let refuse = |why: String| Err(Refusal::KeepNotAllowed(why));
    if review.decision != Decision::Confirmed {
        return refuse(format!("--keep records confirmed, not {}", review.decision));
    }
    if verdict != Verdict::DuplicateMatches {
        return refuse(format!(
            "the verdict is {verdict}; one effect is kept only of duplicate_matches"
        ));
    }
    if !review.snapshot.is_terminal() {
        return refuse(
            "the read is not closed, complete and authoritative, so another effect may still \
             land; close it first"
                .to_string(),
        );
    }
    if let Some(differs) = review.snapshot.matches.iter().find(|m| {
        !same_json(&m.payload, scope.payload)
            || m.action_kind != scope.action_kind
            || m.compensates_effect_id.as_deref() != scope.compensates_effect_id
    }) {
        return refuse(format!(
            "effect {} differs from the operation's payload or action: duplicates that differ \
             are a mismatch, and no decision is allowed",
            differs.effect_id
        ));
    }
    if !review.snapshot.matches.iter().any(|m| m.effect_id == keep) {
        return Err(Refusal::KeepNotAMatch(keep.to_string()));
    }
    Ok(())
}

/// Why no effect of `snapshot` may be kept, in words, or `None` when one
/// may: [`check_keep`] asked of its first match (whether an effect is among
/// the matches is the picker's to settle, so any match serves).
pub fn why_not_keep(scope: Scope<'_>, snapshot: &Snapshot, verdict: Verdict) -> Option<String> {
    let Some(first) = snapshot.matches.first() else {
        return Some(format!(
            "the verdict is {verdict}; one effect is kept only of duplicate_matches"
        ));
    };
    let review = Review {
        op_id: &snapshot.op_id,
        payload: scope.payload,
        reviewer: "",
        decision: Decision::Confirmed,
        snapshot,
        expected_version: 0,
        keep: Some(&first.effect_id),
    };
    match check_keep(scope, &review, verdict, &first.effect_id) {
        Ok(()) => None,
        Err(Refusal::KeepNotAllowed(why)) => Some(why),
        Err(other) => Some(other.to_string()),
    }
}

/// A short, stable name of a payload: the first 16 hex digits of the
/// SHA-256 of its canonical JSON text (RFC 8785), so two matches with the
/// same payload read alike however their fields were ordered.
pub fn payload_hash(payload: &serde_json::Value) -> String {
    let digest = Sha256::digest(canonical_json(payload).as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The surplus effects of `op` that no approval in `approvals` (the
/// original's) compensates yet, in the surplus list's order: what `ops
/// --surplus yes` and the console count as awaiting compensation.
pub fn awaiting(op: &Operation, approvals: &[Approval]) -> Vec<String> {
    (surplus_of(op, approvals, |_| None).into_iter())
        .filter(|s| s.compensation_op_id.is_none())
        .map(|s| s.effect_id)
        .collect()
}

/// The matches of `snapshot` other than `keep` (none without one).
pub fn surplus(snapshot: &Snapshot, keep: Option<&str>) -> Vec<String> {
    match keep {
        Some(keep) => snapshot
            .matches
            .iter()
            .filter(|m| m.effect_id != keep)
            .map(|m| m.effect_id.clone())
            .collect(),
        None => Vec::new(),
    }
}

/// Whether `effect_id` is an effect of the confirmed `original` that may be
/// compensated: the confirmed one or one of its surplus.
pub fn compensable(original: &Operation, effect_id: &str) -> bool {
    original.state == OpState::Confirmed
        && (original.confirmed_effect_id.as_deref() == Some(effect_id)
            || original.surplus_effect_ids.iter().any(|s| s == effect_id))
}

/// The effect an approval names and the reason it gives: the confirmed
/// effect with any reason, a surplus one only with `duplicate`
/// (`reason_required`), any other `compensation_effect_mismatch`.
pub fn check_approved_effect(
    original: &Operation,
    effect_id: &str,
    reason: Option<&str>,
) -> Result<(), Refusal> {
    if original.confirmed_effect_id.as_deref() == Some(effect_id) {
        return Ok(());
    }
    if original.surplus_effect_ids.iter().any(|s| s == effect_id) {
        return match reason {
            Some(SURPLUS_REASON) => Ok(()),
            _ => Err(Refusal::ReasonRequired(effect_id.to_string())),
        };
    }
    Err(Refusal::CompensationEffectMismatch {
        requested: effect_id.to_string(),
        confirmed: original.confirmed_effect_id.clone(),
    })
}

/// One surplus effect of a kept duplicate and its compensation, if one
/// was approved: the compensation's op id and state (`show`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SurplusEffect {
    pub effect_id: String,
    pub compensation_op_id: Option<String>,
    pub compensation_state: Option<OpState>,
}

/// Each surplus effect of `op` with the compensation `approvals` (the
/// original's) approved for it, and that compensation's state as
/// `state_of` reads it.
pub fn surplus_of(
    op: &Operation,
    approvals: &[Approval],
    state_of: impl Fn(&str) -> Option<OpState>,
) -> Vec<SurplusEffect> {
    (op.surplus_effect_ids.iter())
        .map(|effect_id| {
            let approval = approvals.iter().find(|a| &a.effect_id == effect_id);
            let compensation_op_id = approval.map(|a| a.compensation_op_id.clone());
            SurplusEffect {
                effect_id: effect_id.clone(),
                compensation_state: compensation_op_id.as_deref().and_then(&state_of),
                compensation_op_id,
            }
        })
        .collect()
}

/// Section 9's rule for an operation that kept one effect of a duplicate:
/// a read contradicts it when it shows an effect that is neither the kept
/// one, nor a surplus one (each an exact copy of the operation's scope),
/// nor a compensation of one of them, or when a complete and authoritative
/// read lacks the kept effect. Kept, surplus and their compensations are
/// no contradiction.
pub fn contradicts_kept(op: &Operation, snapshot: &Snapshot) -> Option<Found> {
    let known = |id: &str| {
        op.confirmed_effect_id.as_deref() == Some(id)
            || op.surplus_effect_ids.iter().any(|s| s == id)
    };
    let scope = op.scope();
    let stray = snapshot.matches.iter().any(|m| {
        let compensation = m.compensates_effect_id.as_deref().is_some_and(known);
        let exact = same_json(&m.payload, scope.payload)
            && m.action_kind == scope.action_kind
            && m.compensates_effect_id.as_deref() == scope.compensates_effect_id;
        !(compensation || (exact && known(&m.effect_id)))
    });
    let kept = op.confirmed_effect_id.as_deref();
    let lacks_kept = snapshot.complete
        && snapshot.authoritative
        && !snapshot
            .matches
            .iter()
            .any(|m| Some(m.effect_id.as_str()) == kept);
    if stray {
        Some(Found::OtherEffect)
    } else {
        lacks_kept.then_some(Found::EffectGone)
    }
}
