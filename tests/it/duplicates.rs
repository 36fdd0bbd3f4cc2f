//! Duplicates: keep one effect, compensate the rest (SPEC 14), through the
//! binary on both stores. A duplicate here is what a lost receipt and a
//! receiver's own retry leave: `op-1` dispatched with its receipt lost,
//! then a second, identical effect written behind recon's back.

mod console;

use crate::cli::{assert_refused, Shell};
use crate::races::{race, strings};
use crate::stores::{on_both_stores, Site, Store};
use crate::stress::scaled;
use recon::domain::{contradicts, Effect, OpKind, OpState, Operation, Snapshot, Triage};
use recon::receiver::Fault;
use serde_json::{json, Value};

const PAYLOAD: &str = r#"{"amount":10,"to":"acct-7"}"#;

/// `op-1` unknown at version 2 with two effects at the receiver, the
/// second carrying `second` as its payload; the effect ids in write order.
fn duplicated_with(store: Store, second: &str) -> (Shell, Vec<String>) {
    let sh = Shell::on(store);
    sh.prepare("op-1", "pay", PAYLOAD);
    sh.faulted(&["dispatch", "op-1"], Fault::CrashAfterCommit);
    sh.effect_behind("op-1", "pay", second);
    let ids = effect_ids(&sh);
    assert_eq!(ids.len(), 2, "two effects: {ids:?}");
    (sh, ids)
}

/// An exact duplicate: both effects carry the operation's payload.
fn duplicated(store: Store) -> (Shell, Vec<String>) {
    duplicated_with(store, PAYLOAD)
}

fn effect_ids(sh: &Shell) -> Vec<String> {
    let effects = sh.effects(Some("op-1"));
    (effects.as_array().expect("effects").iter())
        .map(|e| e["effect_id"].as_str().expect("an effect id").to_string())
        .collect()
}

/// `reconcile op-1 --decision confirmed --keep EFFECT` at `version`,
/// closing first when `close`.
fn keep(sh: &Shell, effect: &str, version: &str, close: bool) -> crate::support::Run {
    let mut args = vec![
        "reconcile",
        "op-1",
        "--reviewer",
        "ann",
        "--decision",
        "confirmed",
        "--keep",
        effect,
        "--expected-version",
        version,
    ];
    if close {
        args.extend(["--close", "--authorized-by", "ann"]);
    }
    sh.run(&args)
}

/// `approve-compensation` of `effect` of `op-1` at version 3 as `undo`,
/// with `reason` when given.
fn approve(sh: &Shell, effect: &str, undo: &str, reason: Option<&str>) -> crate::support::Run {
    let mut args = vec![
        "approve-compensation",
        "op-1",
        "--effect",
        effect,
        "--approver",
        "bob",
        "--expected-version",
        "3",
        "--compensation-op",
        undo,
        "--action",
        "refund",
        "--payload",
        PAYLOAD,
    ];
    if let Some(reason) = reason {
        args.extend(["--reason", reason]);
    }
    sh.run(&args)
}

/// The journal entry of `kind` for `op`, as `export` prints it.
fn entry(sh: &Shell, kind: &str, op: &str) -> Value {
    let lines = sh.ok(&["export"]).stdout;
    (lines.lines())
        .map(|line| serde_json::from_str::<Value>(line).expect("an entry"))
        .find(|e| e["kind"] == kind && e["op_id"] == op)
        .unwrap_or_else(|| panic!("no {kind} entry for {op}: {lines}"))
}

fn operation(sh: &Shell) -> Value {
    sh.json(&["show", "op-1"])["operation"].clone()
}

fn surplus_listed(sh: &Shell, wanted: &str) -> Vec<String> {
    let page = sh.json(&["ops", "--surplus", wanted]);
    (page.as_array().expect("a page").iter())
        .map(|op| op["op_id"].as_str().expect("an op id").to_string())
        .collect()
}

/// The `recon_surplus_effects` sample `metrics` prints.
fn surplus_metric(sh: &Shell) -> String {
    let text = sh.ok(&["metrics"]).stdout;
    (text.lines())
        .find(|l| l.starts_with("recon_surplus_effects "))
        .unwrap_or_else(|| panic!("no surplus sample: {text}"))
        .to_string()
}

/// Kept: the first effect of an exact duplicate, on a closing read.
fn kept(store: Store) -> (Shell, String, String) {
    let (sh, ids) = duplicated(store);
    let out = keep(&sh, &ids[0], "2", true);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    (sh, ids[0].clone(), ids[1].clone())
}

on_both_stores!(
    keeping_one_effect_of_a_closed_exact_duplicate_confirms_it_with_the_rest_as_surplus
);
fn keeping_one_effect_of_a_closed_exact_duplicate_confirms_it_with_the_rest_as_surplus(
    store: Store,
) {
    let (sh, kept, surplus) = kept(store);
    let op = operation(&sh);
    assert_eq!(op["state"], "confirmed", "{op}");
    assert_eq!(op["version"], 3, "{op}");
    assert_eq!(op["confirmed_effect_id"], json!(kept), "{op}");
    assert_eq!(op["surplus_effect_ids"], json!([surplus]), "{op}");
    let decided = entry(&sh, "decided", "op-1");
    assert_eq!(decided["effect_id"], json!(kept), "{decided}");
    assert_eq!(decided["surplus_effect_ids"], json!([surplus]), "{decided}");
    let shown = sh.json(&["show", "op-1"]);
    assert_eq!(shown["evidence"][0]["verdict"], "duplicate_matches");
    assert_eq!(
        shown["surplus"],
        json!([{"effect_id": surplus, "compensation_op_id": null, "compensation_state": null}])
    );
    let text = sh.ok(&["show", "op-1"]).stdout;
    assert!(
        text.contains(&format!("surplus effect: {surplus} awaiting compensation")),
        "{text}"
    );
    let report = sh.json(&["verify"]);
    assert_eq!(report["projection_mismatches"], json!([]), "{report:#}");
}

on_both_stores!(the_consoles_surplus_count_names_each_kept_duplicate_until_its_surplus_is_approved);
fn the_consoles_surplus_count_names_each_kept_duplicate_until_its_surplus_is_approved(
    store: Store,
) {
    let (sh, _, surplus) = kept(store);
    let counted = || {
        sh.workspace()
            .surplus_awaiting()
            .expect("the surplus count")
    };
    assert_eq!(counted(), [("op-1".to_string(), 1)].into());
    let out = approve(&sh, &surplus, "undo-1", Some("duplicate"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(counted(), [("op-1".to_string(), 0)].into());
}

on_both_stores!(keep_is_refused_keep_not_allowed_on_a_duplicate_read_that_is_not_closed);
fn keep_is_refused_keep_not_allowed_on_a_duplicate_read_that_is_not_closed(store: Store) {
    let (sh, ids) = duplicated(store);
    assert_refused(&keep(&sh, &ids[0], "2", false), "keep_not_allowed");
    assert_eq!(operation(&sh)["state"], "unknown");
}

on_both_stores!(keep_is_refused_keep_not_allowed_when_the_duplicates_differ);
fn keep_is_refused_keep_not_allowed_when_the_duplicates_differ(store: Store) {
    let (sh, ids) = duplicated_with(store, r#"{"amount":11,"to":"acct-7"}"#);
    let out = keep(&sh, &ids[0], "2", true);
    assert_refused(&out, "keep_not_allowed");
    assert!(out.stderr.contains("differs"), "{}", out.stderr);
    assert_eq!(operation(&sh)["state"], "unknown");
}

on_both_stores!(keep_of_an_effect_not_among_the_matches_is_refused_keep_not_a_match);
fn keep_of_an_effect_not_among_the_matches_is_refused_keep_not_a_match(store: Store) {
    let (sh, _) = duplicated(store);
    assert_refused(&keep(&sh, "fx-999999", "2", true), "keep_not_a_match");
    assert_eq!(operation(&sh)["state"], "unknown");
}

on_both_stores!(keep_at_a_stale_version_is_refused_stale_version);
fn keep_at_a_stale_version_is_refused_stale_version(store: Store) {
    let (sh, ids) = duplicated(store);
    assert_refused(&keep(&sh, &ids[0], "1", true), "stale_version");
    assert_eq!(operation(&sh)["version"], 2);
}

on_both_stores!(keep_on_a_single_exact_match_is_refused_keep_not_allowed);
fn keep_on_a_single_exact_match_is_refused_keep_not_allowed(store: Store) {
    let sh = Shell::on(store);
    sh.prepare("op-1", "pay", PAYLOAD);
    sh.faulted(&["dispatch", "op-1"], Fault::CrashAfterCommit);
    let only = effect_ids(&sh).remove(0);
    let out = keep(&sh, &only, "2", true);
    assert_refused(&out, "keep_not_allowed");
    assert!(out.stderr.contains("unique_exact_match"), "{}", out.stderr);
}

on_both_stores!(each_surplus_effect_is_compensated_once_and_only_with_the_reason_duplicate);
fn each_surplus_effect_is_compensated_once_and_only_with_the_reason_duplicate(store: Store) {
    let (sh, kept, surplus) = kept(store);
    assert_eq!(surplus_listed(&sh, "yes"), ["op-1"]);
    assert!(surplus_listed(&sh, "no").is_empty());
    assert!(
        surplus_metric(&sh).ends_with(" 1"),
        "{}",
        surplus_metric(&sh)
    );
    assert_refused(&approve(&sh, &surplus, "undo-1", None), "reason_required");
    // The kept effect's rules hold: the version seen, and an effect of
    // this operation's decision.
    let stale = sh.run(&[
        "approve-compensation",
        "op-1",
        "--effect",
        &surplus,
        "--reason",
        "duplicate",
        "--approver",
        "bob",
        "--expected-version",
        "2",
        "--compensation-op",
        "undo-0",
        "--action",
        "refund",
        "--payload",
        PAYLOAD,
    ]);
    assert_refused(&stale, "stale_version");
    assert_refused(
        &approve(&sh, "fx-999999", "undo-0", Some("duplicate")),
        "compensation_effect_mismatch",
    );
    assert_refused(
        &approve(&sh, &surplus, "undo-1", Some("mistake")),
        "reason_required",
    );
    let out = approve(&sh, &surplus, "undo-1", Some("duplicate"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(entry(&sh, "approved", "undo-1")["reason"], "duplicate");
    assert_refused(
        &approve(&sh, &surplus, "undo-2", Some("duplicate")),
        "already_approved",
    );
    assert!(surplus_listed(&sh, "yes").is_empty());
    assert!(surplus_listed(&sh, "no").contains(&"op-1".to_string()));
    assert!(
        surplus_metric(&sh).ends_with(" 0"),
        "{}",
        surplus_metric(&sh)
    );
    // The kept effect is compensated as before, its reason optional.
    let out = approve(&sh, &kept, "undo-kept", None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    sh.ok(&["dispatch", "undo-1"]);
    let shown = sh.json(&["show", "op-1"]);
    assert_eq!(
        shown["surplus"],
        json!([{"effect_id": surplus, "compensation_op_id": "undo-1",
                "compensation_state": "confirmed"}])
    );
    let undo = sh.json(&["show", "undo-1"])["operation"].clone();
    assert_eq!(undo["compensates_effect_id"], json!(surplus), "{undo}");
    let report = sh.json(&["verify"]);
    assert_eq!(report["projection_mismatches"], json!([]), "{report:#}");
}

on_both_stores!(verify_finds_an_edited_surplus_list_as_a_mismatch_naming_the_op);
fn verify_finds_an_edited_surplus_list_as_a_mismatch_naming_the_op(store: Store) {
    let (sh, kept, _) = kept(store);
    sh.tamper(&format!(
        "UPDATE operations SET surplus_effect_ids = '[\"{kept}\"]' WHERE op_id = 'op-1'"
    ));
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let report = out.json();
    let found: Vec<(Value, Value)> = (report["projection_mismatches"].as_array().unwrap())
        .iter()
        .map(|m| (m["op_id"].clone(), m["field"].clone()))
        .collect();
    assert_eq!(
        found,
        [(json!("op-1"), json!("surplus_effect_ids"))],
        "{report:#}"
    );
}

on_both_stores!(verify_finds_a_decided_entry_whose_kept_plus_surplus_is_not_its_matches);
fn verify_finds_a_decided_entry_whose_kept_plus_surplus_is_not_its_matches(store: Store) {
    let (sh, kept, _) = kept(store);
    let seq = sh.json(&["show", "op-1"])["evidence"][0]["journal_seq"]
        .as_i64()
        .unwrap();
    // The forger drops the surplus from the entry and the row alike.
    sh.rewrite_entry(seq, |e| {
        e.remove("surplus_effect_ids");
    });
    sh.tamper("UPDATE operations SET surplus_effect_ids = NULL WHERE op_id = 'op-1'");
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let report = out.json();
    let mismatches = report["projection_mismatches"].as_array().unwrap();
    assert_eq!(mismatches.len(), 1, "{report:#}");
    assert_eq!(mismatches[0]["op_id"], "op-1", "{report:#}");
    let why = mismatches[0]["journal"].as_str().unwrap();
    assert!(why.contains("kept plus surplus"), "{why} ({kept})");
}

on_both_stores!(verify_finds_an_approval_of_an_effect_neither_kept_nor_surplus);
fn verify_finds_an_approval_of_an_effect_neither_kept_nor_surplus(store: Store) {
    let (sh, _, surplus) = kept(store);
    let out = approve(&sh, &surplus, "undo-1", Some("duplicate"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The row and the entry both say the approval compensates another
    // effect; only the rule of SPEC 14 can see it.
    sh.tamper(r#"UPDATE operations SET surplus_effect_ids = '["fx-999999"]' WHERE op_id = 'op-1'"#);
    let seq = sh.json(&["show", "op-1"])["evidence"][0]["journal_seq"]
        .as_i64()
        .unwrap();
    sh.rewrite_entry(seq, |e| {
        e["surplus_effect_ids"] = json!(["fx-999999"]);
    });
    let report = sh.run(&["verify", "--json"]).json();
    let fields: Vec<(Value, Value)> = (report["projection_mismatches"].as_array().unwrap())
        .iter()
        .map(|m| (m["op_id"].clone(), m["field"].clone()))
        .collect();
    assert!(
        fields.contains(&(json!("undo-1"), json!("effect_id"))),
        "{report:#}"
    );
}

on_both_stores!(a_later_read_of_kept_surplus_and_compensations_is_no_contradiction);
fn a_later_read_of_kept_surplus_and_compensations_is_no_contradiction(store: Store) {
    let (sh, _, surplus) = kept(store);
    let out = approve(&sh, &surplus, "undo-1", Some("duplicate"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    sh.ok(&["dispatch", "undo-1"]);
    let observed = sh.json(&["observe", "op-1", "--by", "ann"]);
    assert_eq!(observed[0]["verdict"], "duplicate_matches", "{observed}");
    assert_eq!(operation(&sh)["contradicted"], Value::Null);
    // A stray effect is a contradiction still: the receiver is closed
    // here, so the rule's table below shows that case.
}

on_both_stores!(resolve_provable_never_keeps_one_of_a_duplicate);
fn resolve_provable_never_keeps_one_of_a_duplicate(store: Store) {
    let (sh, _) = duplicated(store);
    sh.run(&[
        "resolve",
        "--policy",
        "provable",
        "--by",
        "robot",
        "--authorized-by",
        "ann",
        "--older-than",
        "0s",
        "op-1",
    ]);
    let op = operation(&sh);
    assert_eq!(op["state"], "unknown", "{op}");
    assert_eq!(op["surplus_effect_ids"], json!([]), "{op}");
}

on_both_stores!(two_reviewers_keeping_different_effects_at_once_one_wins_one_hears_stale_version);
fn two_reviewers_keeping_different_effects_at_once_one_wins_one_hears_stale_version(store: Store) {
    for rep in 0..scaled(6) {
        let mut site = Site::new(store);
        let payload: Value = serde_json::from_str(PAYLOAD).unwrap();
        site.dispatched("op-1", "pay", &payload, Some(Fault::CrashAfterCommit));
        site.effect_behind("op-1", "pay", &payload);
        let at = site.args();
        let closed = site.run(
            &["snapshot", "op-1", "--close", "--authorized-by", "ann"],
            None,
        );
        assert_eq!(closed.code, Some(0), "{}", closed.stderr);
        let ids: Vec<String> = site
            .ledger(Some("op-1"))
            .into_iter()
            .map(|e| e.effect_id)
            .collect();
        let commands = (0..2)
            .map(|i| {
                let mut a = strings(&["reconcile"]);
                a.extend(at.iter().cloned());
                a.extend(strings(&[
                    "op-1",
                    "--reviewer",
                    &format!("reviewer-{i}"),
                    "--decision",
                    "confirmed",
                    "--keep",
                    &ids[i],
                    "--expected-version",
                    "2",
                ]));
                a
            })
            .collect();
        let runs = race(commands);
        let winners: Vec<usize> = (0..2).filter(|&i| runs[i].code == Some(0)).collect();
        assert_eq!(winners.len(), 1, "rep {rep}: one wins: {runs:#?}");
        let loser = &runs[1 - winners[0]];
        assert_refused(loser, "stale_version");
        let op = site.ws.require("op-1").unwrap();
        assert_eq!(
            op.confirmed_effect_id.as_deref(),
            Some(ids[winners[0]].as_str())
        );
        assert_eq!(op.surplus_effect_ids, [ids[1 - winners[0]].clone()]);
        assert_eq!(site.ws.evidence_log().unwrap().len(), 1, "rep {rep}");
    }
}

/// Section 9's rule, as a table: after a kept duplicate, kept, surplus and
/// a compensation of either are no contradiction; another effect, a
/// surplus that differs, or a full read without the kept one is.
#[test]
fn the_contradiction_rule_judges_a_kept_duplicate_against_kept_plus_surplus() {
    let payload = json!({"amount": 10});
    let effect = |id: &str, action: &str, compensates: Option<&str>, payload: &Value| Effect {
        effect_id: id.into(),
        op_id: "op-1".into(),
        action_kind: action.into(),
        compensates_effect_id: compensates.map(str::to_string),
        payload: payload.clone(),
    };
    let op = Operation {
        op_id: "op-1".into(),
        kind: OpKind::Original,
        action_kind: "pay".into(),
        payload: payload.clone(),
        state: OpState::Confirmed,
        version: 3,
        compensates_effect_id: None,
        compensates_op_id: None,
        confirmed_effect_id: Some("fx-1".into()),
        surplus_effect_ids: vec!["fx-2".into()],
        receiver: "builtin".into(),
        triage: Triage::default(),
    };
    let read = |matches: Vec<Effect>, full: bool| Snapshot {
        op_id: "op-1".into(),
        matches,
        complete: full,
        authoritative: full,
        closed: full,
        closed_by: None,
    };
    let kept = effect("fx-1", "pay", None, &payload);
    let spare = effect("fx-2", "pay", None, &payload);
    let refund = effect("fx-3", "refund", Some("fx-2"), &payload);
    let stray = effect("fx-4", "pay", None, &payload);
    let differs = effect("fx-2", "pay", None, &json!({"amount": 11}));
    let cases = [
        (vec![kept.clone(), spare.clone()], true, false),
        (vec![kept.clone(), spare.clone(), refund], true, false),
        (vec![spare.clone()], false, false),
        (vec![kept.clone(), spare.clone(), stray], true, true),
        (vec![kept.clone(), differs], true, true),
        (vec![spare], true, true),
    ];
    for (i, (matches, full, expected)) in cases.into_iter().enumerate() {
        assert_eq!(contradicts(&op, &read(matches, full)), expected, "case {i}");
    }
}
