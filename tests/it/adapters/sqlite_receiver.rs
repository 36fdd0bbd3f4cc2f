//! A receiver of our own design (tests/fixtures/sqlite_receiver.py: SQLite
//! rows keyed by workspace, a real close, an instance, a receipt it can
//! lose) through the whole flow, as a person would drive it: registered,
//! dispatched, its lost receipt confirmed through a close, compensated,
//! and an operation closed before its original arrived recorded
//! `not_applied`; then the journal proves it all.

use super::Rig;
use serde_json::{json, Value};
use std::path::Path;

fn receiver() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sqlite_receiver.py")
        .display()
        .to_string()
}

#[test]
fn a_receiver_of_our_own_runs_the_whole_flow() {
    let rig = Rig::new();
    let db = rig.file("effects.sqlite");
    let program = receiver();
    let add = [
        "receivers",
        "add",
        "payments",
        "--actions",
        "charge,refund",
        "--",
    ];
    rig.ok(&[&add[..], &[program.as_str(), db.as_str()]].concat());

    // Delivered: the receipt confirms it.
    rig.prepare("op-1", "charge", r#"{"amount":10}"#);
    assert_eq!(rig.dispatch("op-1")["state"], "confirmed");

    // Applied, receipt lost: unknown; a close proves it unique.
    rig.prepare("op-2", "charge", r#"{"amount":20}"#);
    std::fs::write(format!("{db}.lose"), "").unwrap();
    let lost = rig.dispatch("op-2");
    assert_eq!(
        (&lost["state"], &lost["outcome"]),
        (&json!("unknown"), &json!("unknown"))
    );
    assert_eq!(rig.show("op-2")["failures"][0]["kind"], "crash");
    assert_eq!(
        rig.snapshot("op-2", false)["verdict"],
        "exact_match_existence_only"
    );
    assert_eq!(rig.snapshot("op-2", true)["verdict"], "unique_exact_match");
    let decided = rig.reconcile("op-2", "confirmed", "2", false);
    assert_eq!(decided.code, Some(0), "{}", decided.stderr);
    let effect = rig.show("op-2")["operation"]["confirmed_effect_id"].clone();

    // Compensated, at the registration of the effect.
    let approve = [
        "approve-compensation",
        "op-2",
        "--effect",
        effect.as_str().unwrap(),
        "--approver",
        "bo",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-2-refund",
        "--action",
        "refund",
        "--payload",
        r#"{"amount":-20}"#,
    ];
    rig.ok(&approve);
    let refunded = rig.dispatch("op-2-refund");
    assert_eq!(refunded["state"], "confirmed", "{refunded}");

    // Closed before its original arrived: the late original is refused by
    // the receiver, and the closing read proves absence.
    rig.prepare("op-3", "charge", r#"{"amount":30}"#);
    let sql = "INSERT INTO closed VALUES (?, 'op-3', 'ops-team')";
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ws_id = rig.json(&["verify", "--json"])["workspace"].clone();
    conn.execute(sql, [ws_id.as_str().unwrap()]).unwrap();
    drop(conn);
    let refused = rig.dispatch("op-3");
    assert_eq!(refused["adapter_failure"]["kind"], "error", "{refused}");
    assert_eq!(rig.snapshot("op-3", true)["verdict"], "terminal_absence");
    let not_applied = rig.reconcile("op-3", "not_applied", "2", false);
    assert_eq!(not_applied.code, Some(0), "{}", not_applied.stderr);

    let states: Vec<Value> = ["op-1", "op-2", "op-2-refund", "op-3"]
        .iter()
        .map(|op| rig.show(op)["operation"]["state"].clone())
        .collect();
    assert_eq!(
        states,
        [
            json!("confirmed"),
            json!("confirmed"),
            json!("confirmed"),
            json!("not_applied")
        ]
    );
    let verified = rig.recon(&["verify", "--json"]);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);
}
