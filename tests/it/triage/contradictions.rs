//! Contradictions reach people (SPEC 9): a recorded read that contradicts a
//! final decision marks the operation, in its JSON, `ops` and `show`, open
//! to escalation, until a person acknowledges it with a reason.

use crate::cli::{assert_refused, Shell};
use crate::stores::{on_both_stores, Store};
use recon::domain::{contradicts, Effect, OpKind, OpState, Operation, Snapshot, Triage};
use recon::receiver::Fault;
use serde_json::{json, Value};

/// An outbox on `store` with `op-1` confirmed on existence, then a second
/// effect written at the receiver behind recon's back (a receiver that
/// applied a retry of its own).
fn confirmed_then_duplicated(store: Store) -> Shell {
    let sh = Shell::on(store);
    let payload = r#"{"to":"ada@example.com"}"#;
    sh.prepare("op-1", "send_email", payload);
    sh.faulted(&["dispatch", "op-1"], Fault::CrashAfterCommit);
    let decide = [
        "reconcile",
        "op-1",
        "--reviewer",
        "rita",
        "--decision",
        "confirmed",
    ];
    sh.ok(&[&decide[..], &["--expected-version", "2"]].concat());
    sh.effect_behind("op-1", "send_email", payload);
    sh
}

fn operation(sh: &Shell) -> Value {
    sh.ok(&["show", "op-1", "--json"]).json()["operation"].clone()
}

fn contradicted_ids(sh: &Shell) -> Vec<String> {
    let page = sh.ok(&[
        "ops",
        "--state",
        "confirmed",
        "--contradicted",
        "yes",
        "--json",
    ]);
    page.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["op_id"].as_str().unwrap().to_string())
        .collect()
}

on_both_stores!(a_read_that_contradicts_a_confirmation_marks_it_until_acknowledged);
fn a_read_that_contradicts_a_confirmation_marks_it_until_acknowledged(store: Store) {
    let sh = confirmed_then_duplicated(store);
    assert_eq!(operation(&sh)["contradicted"], Value::Null);
    let observed = sh.ok(&["observe", "op-1", "--by", "ann", "--json"]).json();
    assert_eq!(observed[0]["verdict"], "duplicate_matches", "{observed}");
    let marked = &operation(&sh)["contradicted"];
    assert_eq!(marked["verdict"], "duplicate_matches", "{marked}");
    let seq = marked["seq"].clone();
    assert_eq!(contradicted_ids(&sh), ["op-1"]);
    // Said in words wherever the operation is shown.
    let listed = sh.ok(&["ops", "--state", "confirmed"]).stdout;
    assert!(listed.contains("CONTRADICTED"), "{listed}");
    let screen = sh
        .ok(&["screenshot", "--size", "160x40", "--keys", "5"])
        .stdout;
    assert!(
        screen.contains("> ?") && screen.contains("contradicts the decision"),
        "{screen}"
    );
    // Open to escalation although it is not unknown.
    sh.ok(&[
        "escalate",
        "op-1",
        "--by",
        "ann",
        "--reason",
        "a second mail went out",
    ]);
    // A later read keeps the first one as the marker.
    sh.ok(&["observe", "op-1", "--by", "bo"]);
    assert_eq!(operation(&sh)["contradicted"]["seq"], seq);
    let ack = ["acknowledge", "op-1", "--by", "rita"];
    let cleared = sh.ok(&[&ack[..], &["--reason", "the customer was told", "--json"]].concat());
    assert_eq!(cleared.json()["contradicted"], Value::Null);
    assert!(contradicted_ids(&sh).is_empty());
    let shown = sh.ok(&["show", "op-1", "--json"]).json();
    assert_eq!(shown["acknowledgements"][0]["by"], "rita", "{shown}");
    assert_refused(
        &sh.run(&[&ack[..], &["--reason", "again"]].concat()),
        "not_contradicted",
    );
    // A later contradicting read marks it again; the journal proves all.
    sh.ok(&["observe", "op-1", "--by", "cy"]);
    assert_ne!(operation(&sh)["contradicted"], Value::Null);
    assert_eq!(contradicted_ids(&sh), ["op-1"]);
    let verified = sh.run(&["verify", "--json"]);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);
}

on_both_stores!(an_acknowledgement_or_a_marker_edited_behind_the_journal_is_a_mismatch);
fn an_acknowledgement_or_a_marker_edited_behind_the_journal_is_a_mismatch(store: Store) {
    let sh = confirmed_then_duplicated(store);
    sh.ok(&["observe", "op-1", "--by", "ann"]);
    sh.tamper("UPDATE operations SET contradiction = NULL WHERE op_id = 'op-1'");
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(out.stdout.contains("contradiction"), "{}", out.stdout);
}

fn decided(state: OpState) -> Operation {
    Operation {
        surplus_effect_ids: Vec::new(),
        op_id: "op".into(),
        kind: OpKind::Original,
        action_kind: "pay".into(),
        payload: json!({"amount": 10}),
        state,
        version: 3,
        compensates_effect_id: None,
        compensates_op_id: None,
        confirmed_effect_id: (state == OpState::Confirmed).then(|| "fx-1".into()),
        receiver: "builtin".into(),
        triage: Triage::default(),
    }
}

fn effect(id: &str, payload: Value) -> Effect {
    Effect {
        effect_id: id.into(),
        op_id: "op".into(),
        action_kind: "pay".into(),
        compensates_effect_id: None,
        payload,
    }
}

#[track_caller]
fn check(state: OpState, matches: Vec<Effect>, complete: bool, expected: bool) {
    let snapshot = Snapshot {
        op_id: "op".into(),
        matches,
        complete,
        authoritative: complete,
        closed: false,
        closed_by: None,
    };
    assert_eq!(contradicts(&decided(state), &snapshot), expected);
}

/// SPEC 9's rule, case by case.
#[test]
fn what_contradicts_a_final_decision() {
    let same = || effect("fx-1", json!({"amount": 10.0}));
    use OpState::*;
    check(NotApplied, vec![], true, false);
    check(NotApplied, vec![same()], false, true);
    check(Confirmed, vec![same()], true, false);
    check(
        Confirmed,
        vec![same(), effect("fx-2", json!({"amount": 10}))],
        false,
        true,
    );
    check(
        Confirmed,
        vec![effect("fx-2", json!({"amount": 10}))],
        false,
        true,
    );
    check(
        Confirmed,
        vec![effect("fx-1", json!({"amount": 11}))],
        false,
        true,
    );
    check(Confirmed, vec![], true, true);
    check(Confirmed, vec![], false, false);
    check(Unknown, vec![same(), same()], true, false);
}
