//! `classify` as a table: each row is one claim of SPEC section 2.

use recon::domain::{classify, differing_paths, Decision, Effect, Scope, Snapshot, Verdict};
use serde_json::{json, Value};

fn effect(n: u32, action: &str, payload: Value, target: Option<&str>) -> Effect {
    Effect {
        effect_id: format!("fx-{n:06}"),
        op_id: "op-1".into(),
        action_kind: action.into(),
        compensates_effect_id: target.map(str::to_string),
        payload,
    }
}

fn snapshot(matches: Vec<Effect>, complete: bool, authoritative: bool, closed: bool) -> Snapshot {
    Snapshot {
        op_id: "op-1".into(),
        matches,
        complete,
        authoritative,
        closed,
        closed_by: None,
    }
}

fn payload() -> Value {
    json!({"to": "ada@example.com", "subject": "Invoice"})
}

fn other_payload() -> Value {
    json!({"to": "ada@example.com", "subject": "Invoice (copy)"})
}

/// One row of the table: the scope is always send_email with `payload()`
/// and no compensation target.
#[track_caller]
fn check(matches: Vec<Effect>, flags: (bool, bool, bool), expected: Verdict) {
    let p = payload();
    let scope = Scope {
        action_kind: "send_email",
        payload: &p,
        compensates_effect_id: None,
    };
    let (complete, authoritative, closed) = flags;
    let snap = snapshot(matches, complete, authoritative, closed);
    assert_eq!(classify(scope, &snap), expected, "snapshot {snap:?}");
}

const TERMINAL: (bool, bool, bool) = (true, true, true);
const OPEN: (bool, bool, bool) = (true, true, false);

fn exact(n: u32) -> Effect {
    effect(n, "send_email", payload(), None)
}

#[test]
fn two_matches_are_duplicate_matches_open_or_closed() {
    check(vec![exact(1), exact(2)], OPEN, Verdict::DuplicateMatches);
    check(
        vec![exact(1), exact(2)],
        TERMINAL,
        Verdict::DuplicateMatches,
    );
    check(
        vec![exact(1), exact(2), exact(3)],
        (false, false, false),
        Verdict::DuplicateMatches,
    );
}

#[test]
fn duplicates_are_reported_before_any_mismatch() {
    let odd = effect(2, "refund_charge", other_payload(), Some("fx-000009"));
    check(vec![exact(1), odd], TERMINAL, Verdict::DuplicateMatches);
}

#[test]
fn one_match_with_another_payload_is_payload_mismatch() {
    check(
        vec![effect(1, "send_email", other_payload(), None)],
        TERMINAL,
        Verdict::PayloadMismatch,
    );
    check(
        vec![effect(1, "send_email", other_payload(), None)],
        OPEN,
        Verdict::PayloadMismatch,
    );
}

#[test]
fn one_match_whose_payload_and_action_both_differ_is_payload_mismatch() {
    check(
        vec![effect(1, "send_sms", other_payload(), None)],
        TERMINAL,
        Verdict::PayloadMismatch,
    );
}

#[test]
fn one_match_with_another_action_kind_is_action_scope_mismatch() {
    check(
        vec![effect(1, "send_sms", payload(), None)],
        TERMINAL,
        Verdict::ActionScopeMismatch,
    );
}

#[test]
fn one_match_with_another_compensation_target_is_action_scope_mismatch() {
    check(
        vec![effect(1, "send_email", payload(), Some("fx-000001"))],
        TERMINAL,
        Verdict::ActionScopeMismatch,
    );
}

#[test]
fn exact_match_under_the_full_contract_is_unique_exact_match() {
    check(vec![exact(1)], TERMINAL, Verdict::UniqueExactMatch);
}

#[test]
fn early_single_match_without_the_close_barrier_is_existence_only() {
    check(vec![exact(1)], OPEN, Verdict::ExactMatchExistenceOnly);
}

#[test]
fn exact_match_from_incomplete_or_non_authoritative_source_is_existence_only() {
    check(
        vec![exact(1)],
        (false, true, true),
        Verdict::ExactMatchExistenceOnly,
    );
    check(
        vec![exact(1)],
        (true, false, true),
        Verdict::ExactMatchExistenceOnly,
    );
}

#[test]
fn empty_read_under_the_full_contract_is_terminal_absence() {
    check(vec![], TERMINAL, Verdict::TerminalAbsence);
}

#[test]
fn empty_read_without_the_close_barrier_is_inconclusive() {
    check(vec![], OPEN, Verdict::Inconclusive);
}

#[test]
fn empty_read_from_incomplete_or_non_authoritative_source_is_inconclusive() {
    check(vec![], (false, true, true), Verdict::Inconclusive);
    check(vec![], (true, false, true), Verdict::Inconclusive);
    check(vec![], (false, false, false), Verdict::Inconclusive);
}

#[test]
fn snapshot_flags_can_be_lowered_but_never_raised() {
    let lowered = snapshot(vec![], false, true, false).lowered(true, true, true);
    assert!(!lowered.complete && lowered.authoritative && !lowered.closed);
    let lowered = snapshot(vec![], true, true, true).lowered(true, false, true);
    assert!(lowered.complete && !lowered.authoritative && lowered.closed);
}

#[test]
fn only_exact_matches_support_confirmed_and_only_terminal_absence_supports_not_applied() {
    for &verdict in Verdict::ALL {
        let confirmed = matches!(
            verdict,
            Verdict::UniqueExactMatch | Verdict::ExactMatchExistenceOnly
        );
        assert_eq!(
            verdict.supports(Decision::Confirmed),
            confirmed,
            "{verdict}"
        );
        assert_eq!(
            verdict.supports(Decision::NotApplied),
            verdict == Verdict::TerminalAbsence,
            "{verdict}"
        );
    }
}

#[test]
fn differing_paths_name_each_changed_field() {
    let expected = json!({"to": "a", "cc": ["x", "y"], "meta": {"n": 1}});
    let actual = json!({"to": "b", "cc": ["x", "z"], "meta": {"n": 1}, "extra": true});
    assert_eq!(
        differing_paths(&expected, &actual),
        vec!["/cc/1", "/extra", "/to"]
    );
    assert!(differing_paths(&expected, &expected).is_empty());
}

#[test]
fn a_payload_written_with_other_number_spellings_is_the_same_payload() {
    // `10.0`, `1e1` and `10` are one number in RFC 8785 form (SPEC 8 rule
    // 7): an adapter that echoes a payload in another spelling echoed it.
    let read = |text: &str| -> Value { serde_json::from_str(text).expect("JSON") };
    let sent = read(r#"{"amount": 10, "rate": 0.5, "items": [1, 2]}"#);
    let echoed = read(r#"{"amount": 10.0, "rate": 5e-1, "items": [1e0, 2.00]}"#);
    let scope = Scope {
        action_kind: "pay",
        payload: &sent,
        compensates_effect_id: None,
    };
    let one = |payload: Value| snapshot(vec![effect(1, "pay", payload, None)], true, true, true);
    assert_eq!(
        classify(scope, &one(echoed.clone())),
        Verdict::UniqueExactMatch
    );
    assert!(differing_paths(&sent, &echoed).is_empty());
    let changed = read(r#"{"amount": 10.5, "rate": 0.5, "items": [1, 2]}"#);
    assert_eq!(
        classify(scope, &one(changed.clone())),
        Verdict::PayloadMismatch
    );
    assert_eq!(differing_paths(&sent, &changed), vec!["/amount"]);
}
