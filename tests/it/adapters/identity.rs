//! Receivers have an identity that a name cannot take over (SPEC 8,
//! "Identity" and "Re-checked"): an operation goes to the registration it
//! was routed to, a registration changes only as journaled versions of
//! itself, and a `describe` that answers for another store or makes other
//! claims is refused before anything is committed.

use super::{Rig, FULL};
use crate::cli::assert_refused;
use crate::stores::{on_both_stores, Store};
use serde_json::json;

/// The full contract, for one store.
const STORE_A: &[&str] = &[
    "--can-close",
    "--complete",
    "--authoritative",
    "--instance",
    "a",
];

fn verify_intact(rig: &Rig) {
    let out = rig.recon(&["verify", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stdout);
}

on_both_stores!(a_compensation_of_a_removed_registrations_effect_is_refused_receiver_gone);
/// Ledger A's effect, confirmed; A removed and another receiver added
/// under its name: a compensation of A's effect is refused, never sent to
/// the receiver that now holds the name.
fn a_compensation_of_a_removed_registrations_effect_is_refused_receiver_gone(store: Store) {
    let rig = Rig::on(store);
    rig.register("ledger", "refund", &[], STORE_A);
    rig.prepare("op-1", "refund", r#"{"amount":10}"#);
    let receipt = rig.dispatch("op-1");
    assert_eq!(receipt["state"], "confirmed", "{receipt}");
    let effect = receipt["effect_id"].as_str().unwrap().to_string();
    rig.ok(&["receivers", "remove", "ledger"]);
    rig.register("ledger", "refund", &[], FULL);
    let dump = rig.dump();
    let approve = [
        "approve-compensation",
        "op-1",
        "--effect",
        &effect,
        "--approver",
        "bob",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-1-refund",
        "--action",
        "refund",
        "--payload",
        r#"{"amount":-10}"#,
    ];
    let out = rig.recon(&approve);
    assert_refused(&out, "receiver_gone");
    assert!(
        out.stderr.contains("registered again under its name"),
        "{}",
        out.stderr
    );
    assert_eq!(rig.dump(), dump, "a refused approval wrote something");
    assert!(
        rig.calls("ledger", "apply").len() == 1,
        "nothing more was applied"
    );
    verify_intact(&rig);
}

on_both_stores!(receivers_update_keeps_the_registration_and_refuses_another_store);
/// `receivers update` changes a receiver in place, keeping its identity:
/// the same id, one more version, journaled; open operations keep going
/// to it. A program that answers for another store is another receiver.
fn receivers_update_keeps_the_registration_and_refuses_another_store(store: Store) {
    let rig = Rig::on(store);
    rig.register("ledger", "refund", &[], STORE_A);
    rig.prepare("op-1", "refund", r#"{"amount":10}"#);
    let out = rig.ok(&["receivers", "update", "ledger", "--timeout-ms", "5000"]);
    assert!(out.stdout.contains("version 2)"), "{}", out.stdout);
    assert_eq!(rig.list()[0]["timeout_ms"], 5000);
    let mut args = vec![
        "receivers".to_string(),
        "update".into(),
        "ledger".into(),
        "--".into(),
    ];
    args.extend(rig.fixture_args("ledger", STORE_A));
    args.push("--complete".into());
    let same_store: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = rig.ok(&same_store);
    assert!(out.stdout.contains("version 3)"), "{}", out.stdout);
    let dump = rig.dump();
    let mut other = args[..4].to_vec();
    other.extend(rig.fixture_args(
        "ledger",
        &[
            "--can-close",
            "--complete",
            "--authoritative",
            "--instance",
            "b",
        ],
    ));
    let other: Vec<&str> = other.iter().map(String::as_str).collect();
    let out = rig.recon(&other);
    assert_refused(&out, "receiver_changed");
    assert!(out.stderr.contains("instance"), "{}", out.stderr);
    assert_eq!(rig.dump(), dump);
    let sent = rig.dispatch("op-1");
    assert_eq!(sent["state"], "confirmed", "{sent}");
    verify_intact(&rig);
}

on_both_stores!(
    a_describe_for_another_store_is_refused_before_the_act_and_a_new_version_is_recorded
);
/// Before a receiver's first use in a process its `describe` runs again:
/// a new version alone is recorded and the act goes on; another store is
/// refused `receiver_changed` before anything is committed, and
/// `check --accept` will not store it either.
fn a_describe_for_another_store_is_refused_before_the_act_and_a_new_version_is_recorded(
    store: Store,
) {
    let rig = Rig::on(store);
    rig.register("ledger", "refund", &[], STORE_A);
    rig.prepare("op-1", "refund", r#"{"amount":10}"#);
    rig.set_mode("ledger", "other-instance");
    let dump = rig.dump();
    assert_refused(&rig.recon(&["dispatch", "op-1"]), "receiver_changed");
    assert_eq!(rig.dump(), dump, "the operation stays prepared");
    assert!(rig.calls("ledger", "apply").is_empty());
    assert_refused(
        &rig.recon(&["receivers", "check", "ledger", "--accept"]),
        "receiver_changed",
    );
    rig.set_mode("ledger", "changed");
    let sent = rig.dispatch("op-1");
    assert_eq!(sent["state"], "confirmed", "{sent}");
    // The receipt names the registration and the version it came through.
    let evidence = &rig.show("op-1")["evidence"][0];
    assert_eq!(evidence["receiver_version"], 2, "{evidence}");
    assert!(evidence["receiver_id"].as_i64().is_some(), "{evidence}");
    // The new version was stored: the stored answer now is version 2.0.
    let check = rig.json(&["receivers", "check", "ledger", "--json"]);
    assert_eq!(check["unchanged"], true, "{check}");
    assert_eq!(check["stored"]["version"], "2.0");
    verify_intact(&rig);
}

on_both_stores!(a_changed_claim_is_refused_until_check_accept_stores_it);
/// A changed claim (here: it can no longer close) is refused until a
/// person accepts it with `check --accept`; afterwards the receiver is
/// held to what it now says.
fn a_changed_claim_is_refused_until_check_accept_stores_it(store: Store) {
    let rig = Rig::on(store);
    rig.register("ledger", "refund", &[], STORE_A);
    rig.prepare("op-1", "refund", r#"{"amount":10}"#);
    rig.set_mode("ledger", "cannot-close");
    assert_refused(&rig.recon(&["snapshot", "op-1"]), "receiver_changed");
    let accepted = rig.recon(&["receivers", "check", "ledger", "--accept", "--json"]);
    assert_eq!(accepted.code, Some(0), "{}", accepted.stderr);
    assert_eq!(accepted.json()["accepted_version"], json!(2));
    assert_eq!(rig.list()[0]["can_close"], false);
    assert_refused(
        &rig.recon(&["snapshot", "op-1", "--close", "--authorized-by", "dana"]),
        "close_unsupported",
    );
    verify_intact(&rig);
}

on_both_stores!(a_receiver_whose_evidence_can_settle_a_decision_must_declare_its_instance);
/// Issue 29, reproduction 9 (SPEC 12): an adapter that declared no
/// `instance` could be pointed at another store by `receivers update`, and
/// recon then recorded `not_applied` while the first store held the
/// effect. A receiver claiming `can_close`, `complete` or `authoritative`
/// must now declare one: `add` is refused `instance_required` for each
/// claim, nothing stored, and a receiver claiming none may go without.
fn a_receiver_whose_evidence_can_settle_a_decision_must_declare_its_instance(store: Store) {
    let rig = Rig::on(store);
    for name in ["ledger", "weak"] {
        rig.set_mode(name, "no-instance");
    }
    let before = rig.dump();
    for claims in [
        FULL,
        &["--can-close"][..],
        &["--no-close", "--complete"],
        &["--no-close", "--authoritative"],
    ] {
        let out = rig.add("ledger", "refund", &[], claims);
        assert_refused(&out, "instance_required");
        assert!(out.stderr.contains("instance"), "{}", out.stderr);
        assert_eq!(
            rig.dump(),
            before,
            "{claims:?}: a refused registration wrote"
        );
    }
    let weak = rig.register("weak", "note", &[], &["--no-close"]);
    assert_eq!(weak["instance"], json!(null), "{weak}");
}

on_both_stores!(
    an_update_or_accept_without_an_instance_is_refused_and_another_one_is_another_store
);
/// At `update` and `check --accept` a describe that drops its instance is
/// `instance_required`, and one naming another instance stays
/// `receiver_changed`; the open operation keeps its store.
fn an_update_or_accept_without_an_instance_is_refused_and_another_one_is_another_store(
    store: Store,
) {
    let rig = Rig::on(store);
    rig.register("ledger", "refund", &[], FULL);
    rig.prepare("op-1", "refund", r#"{"amount":10}"#);
    let dump = rig.dump();
    let update_to = |flags: &[&str]| {
        let mut args = vec![
            "receivers".to_string(),
            "update".into(),
            "ledger".into(),
            "--".into(),
        ];
        args.extend(rig.fixture_args("elsewhere", flags));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        rig.recon(&args)
    };
    rig.set_mode("elsewhere", "no-instance");
    assert_refused(&update_to(FULL), "instance_required");
    rig.set_mode("elsewhere", "");
    assert_refused(&update_to(FULL), "receiver_changed");
    rig.set_mode("ledger", "no-instance");
    assert_refused(
        &rig.recon(&["receivers", "check", "ledger", "--accept"]),
        "instance_required",
    );
    assert_eq!(rig.dump(), dump, "a refused update or accept wrote");
    rig.set_mode("ledger", "");
    let sent = rig.dispatch("op-1");
    assert_eq!(sent["state"], "confirmed", "{sent}");
    assert_eq!(rig.calls("elsewhere", "apply").len(), 0);
}
