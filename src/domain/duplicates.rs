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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OpKind;
    use serde_json::json;

    fn effect(id: &str, payload: serde_json::Value) -> crate::domain::Effect {
        crate::domain::Effect {
            effect_id: id.into(),
            op_id: "op-1".into(),
            action_kind: "charge".into(),
            compensates_effect_id: None,
            payload,
        }
    }

    fn read(matches: Vec<crate::domain::Effect>) -> Snapshot {
        Snapshot {
            op_id: "op-1".into(),
            matches,
            complete: true,
            authoritative: true,
            closed: true,
            closed_by: None,
        }
    }

    fn two_copies() -> Snapshot {
        read(vec![
            effect("e-1", json!({"n": 1})),
            effect("e-2", json!({"n": 1})),
        ])
    }

    fn original(state: OpState, surplus: &[&str]) -> Operation {
        Operation {
            op_id: "op-1".into(),
            kind: OpKind::Original,
            action_kind: "charge".into(),
            payload: json!({"n": 1}),
            state,
            version: 3,
            compensates_effect_id: None,
            compensates_op_id: None,
            confirmed_effect_id: Some("e-1".into()),
            surplus_effect_ids: surplus.iter().map(|s| s.to_string()).collect(),
            receiver: "pay".into(),
            triage: Default::default(),
        }
    }

    fn approval(effect_id: &str, compensation: &str) -> Approval {
        Approval {
            original_op_id: "op-1".into(),
            effect_id: effect_id.into(),
            approved_version: 3,
            approver: "ann".into(),
            compensation_op_id: compensation.into(),
            action_kind: "refund".into(),
            payload: json!({}),
            reason: Some(SURPLUS_REASON.into()),
        }
    }

    fn keep(
        snapshot: &Snapshot,
        decision: Decision,
        verdict: Verdict,
        id: &str,
    ) -> Result<(), &'static str> {
        let op = original(OpState::Unknown, &[]);
        let review = Review {
            op_id: "op-1",
            payload: &op.payload,
            reviewer: "rita",
            decision,
            snapshot,
            expected_version: 3,
            keep: Some(id),
        };
        check_keep(op.scope(), &review, verdict, id).map_err(|r| r.code())
    }

    #[test]
    fn one_effect_of_a_closed_duplicate_of_exact_copies_may_be_kept() {
        let dup = Verdict::DuplicateMatches;
        assert_eq!(keep(&two_copies(), Decision::Confirmed, dup, "e-2"), Ok(()));
        let op = original(OpState::Unknown, &[]);
        assert_eq!(why_not_keep(op.scope(), &two_copies(), dup), None);
    }

    #[test]
    fn keep_is_refused_on_another_decision_or_verdict() {
        let snapshot = two_copies();
        let not = Err("keep_not_allowed");
        let dup = Verdict::DuplicateMatches;
        assert_eq!(keep(&snapshot, Decision::NotApplied, dup, "e-1"), not);
        assert_eq!(
            keep(
                &snapshot,
                Decision::Confirmed,
                Verdict::PayloadMismatch,
                "e-1"
            ),
            not
        );
        let op = original(OpState::Unknown, &[]);
        let why = why_not_keep(op.scope(), &snapshot, Verdict::PayloadMismatch).expect("refused");
        assert!(why.contains("payload_mismatch"), "{why}");
        let none =
            why_not_keep(op.scope(), &read(vec![]), Verdict::TerminalAbsence).expect("refused");
        assert!(none.contains("duplicate_matches"), "{none}");
    }

    #[test]
    fn keep_is_refused_on_a_read_that_is_not_closed_complete_and_authoritative() {
        let dup = Verdict::DuplicateMatches;
        for lower in [
            |s: &mut Snapshot| s.closed = false,
            |s: &mut Snapshot| s.complete = false,
            |s: &mut Snapshot| s.authoritative = false,
        ] {
            let mut snapshot = two_copies();
            lower(&mut snapshot);
            assert_eq!(
                keep(&snapshot, Decision::Confirmed, dup, "e-1"),
                Err("keep_not_allowed")
            );
            let op = original(OpState::Unknown, &[]);
            let why = why_not_keep(op.scope(), &snapshot, dup).expect("refused");
            assert!(why.contains("close it first"), "{why}");
        }
    }

    #[test]
    fn keep_is_refused_when_a_match_differs_from_the_scope_in_payload_action_or_target() {
        let dup = Verdict::DuplicateMatches;
        for differ in [
            |e: &mut crate::domain::Effect| e.payload = json!({"n": 2}),
            |e: &mut crate::domain::Effect| e.action_kind = "refund".into(),
            |e: &mut crate::domain::Effect| e.compensates_effect_id = Some("e-0".into()),
        ] {
            let mut snapshot = two_copies();
            differ(&mut snapshot.matches[1]);
            assert_eq!(
                keep(&snapshot, Decision::Confirmed, dup, "e-1"),
                Err("keep_not_allowed")
            );
            let op = original(OpState::Unknown, &[]);
            let why = why_not_keep(op.scope(), &snapshot, dup).expect("refused");
            assert!(why.contains("e-2 differs"), "{why}");
        }
    }

    #[test]
    fn keep_names_an_effect_among_the_matches() {
        let dup = Verdict::DuplicateMatches;
        assert_eq!(
            keep(&two_copies(), Decision::Confirmed, dup, "e-9"),
            Err("keep_not_a_match")
        );
    }

    #[test]
    fn a_payload_hash_is_sixteen_hex_digits_of_the_canonical_text() {
        let a = payload_hash(&json!({"a": 1, "b": [2, 3]}));
        let b = payload_hash(&serde_json::from_str(r#"{"b":[2,3],"a":1}"#).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, payload_hash(&json!({"a": 2, "b": [2, 3]})));
        // The first eight bytes of SHA-256("{}").
        assert_eq!(payload_hash(&json!({})), "44136fa355b3678a");
    }

    #[test]
    fn the_surplus_is_every_match_but_the_kept_one_and_nothing_without_one() {
        let three = read(vec![
            effect("e-1", json!({"n": 1})),
            effect("e-2", json!({"n": 1})),
            effect("e-3", json!({"n": 1})),
        ]);
        assert_eq!(surplus(&three, Some("e-2")), ["e-1", "e-3"]);
        assert!(surplus(&three, None).is_empty());
    }

    #[test]
    fn a_surplus_effect_awaits_compensation_until_an_approval_names_it() {
        let op = original(OpState::Confirmed, &["e-2", "e-3"]);
        assert_eq!(awaiting(&op, &[]), ["e-2", "e-3"]);
        let approvals = [approval("e-3", "op-c3")];
        assert_eq!(awaiting(&op, &approvals), ["e-2"]);
        let states = surplus_of(&op, &approvals, |id| {
            (id == "op-c3").then_some(OpState::Prepared)
        });
        assert_eq!(
            states,
            [
                SurplusEffect {
                    effect_id: "e-2".into(),
                    compensation_op_id: None,
                    compensation_state: None,
                },
                SurplusEffect {
                    effect_id: "e-3".into(),
                    compensation_op_id: Some("op-c3".into()),
                    compensation_state: Some(OpState::Prepared),
                },
            ]
        );
    }

    #[test]
    fn the_kept_and_surplus_effects_of_a_confirmed_operation_are_compensable_and_no_other() {
        let op = original(OpState::Confirmed, &["e-2"]);
        assert!(compensable(&op, "e-1"));
        assert!(compensable(&op, "e-2"));
        assert!(!compensable(&op, "e-3"));
        let unknown = original(OpState::Unknown, &["e-2"]);
        assert!(!compensable(&unknown, "e-1"));
        assert!(!compensable(&unknown, "e-2"));
    }

    #[test]
    fn a_surplus_compensation_needs_the_reason_duplicate_and_the_kept_one_any() {
        let op = original(OpState::Confirmed, &["e-2"]);
        let code = |effect: &str, reason: Option<&str>| {
            check_approved_effect(&op, effect, reason).map_err(|r| r.code())
        };
        assert_eq!(code("e-1", None), Ok(()));
        assert_eq!(code("e-1", Some("typo")), Ok(()));
        assert_eq!(code("e-2", Some(SURPLUS_REASON)), Ok(()));
        assert_eq!(code("e-2", None), Err("reason_required"));
        assert_eq!(code("e-2", Some("typo")), Err("reason_required"));
        assert_eq!(
            code("e-3", Some(SURPLUS_REASON)),
            Err("compensation_effect_mismatch")
        );
    }

    #[test]
    fn a_read_of_the_kept_surplus_and_their_compensations_contradicts_nothing() {
        let op = original(OpState::Confirmed, &["e-2"]);
        let mut refund = effect("e-r", json!({"back": 1}));
        refund.action_kind = "refund".into();
        refund.compensates_effect_id = Some("e-2".into());
        let mut snapshot = two_copies();
        snapshot.matches.push(refund);
        assert_eq!(contradicts_kept(&op, &snapshot), None);
        // An incomplete read that lacks the kept effect proves nothing.
        let mut partial = read(vec![effect("e-2", json!({"n": 1}))]);
        partial.complete = false;
        assert_eq!(contradicts_kept(&op, &partial), None);
        partial.complete = true;
        partial.authoritative = false;
        assert_eq!(contradicts_kept(&op, &partial), None);
    }

    #[test]
    fn a_read_with_a_stray_or_altered_effect_or_without_the_kept_one_contradicts() {
        let op = original(OpState::Confirmed, &["e-2"]);
        let mut stray = two_copies();
        stray.matches.push(effect("e-3", json!({"n": 1})));
        assert_eq!(contradicts_kept(&op, &stray), Some(Found::OtherEffect));
        for alter in [
            |e: &mut crate::domain::Effect| e.payload = json!({"n": 2}),
            |e: &mut crate::domain::Effect| e.action_kind = "refund".into(),
            |e: &mut crate::domain::Effect| e.compensates_effect_id = Some("e-0".into()),
        ] {
            let mut altered = two_copies();
            alter(&mut altered.matches[1]);
            assert_eq!(contradicts_kept(&op, &altered), Some(Found::OtherEffect));
        }
        let gone = read(vec![effect("e-2", json!({"n": 1}))]);
        assert_eq!(contradicts_kept(&op, &gone), Some(Found::EffectGone));
    }
}
