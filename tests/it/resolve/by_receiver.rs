//! `ops --receiver NAME`: one receiver's operations, on both stores, in
//! either order and paged; a name outside the pattern is a usage error.

use crate::cli::{assert_json_error, Shell};
use crate::stores::{on_both_stores, Store};
use crate::support::adapter_fixture;
use recon::receiver::Fault;
use serde_json::Value;

/// An outbox on `store` with a second receiver, `mail` (the fixture
/// adapter, for `post`), beside the one for every other kind: `m1`, `m2`
/// unknown at `mail`, `m3` confirmed there; `p1` unknown and `p2`
/// confirmed at the other receiver. The adapter's files live in `dir`.
pub fn two_receivers(store: Store, dir: &std::path::Path) -> Shell {
    let sh = Shell::on(store);
    let state = dir.join("mail.json").display().to_string();
    let mode = dir.join("mail.mode").display().to_string();
    let adapter = adapter_fixture().display().to_string();
    sh.ok(&[
        "receivers",
        "add",
        "mail",
        "--actions",
        "post",
        "--",
        &adapter,
        "--state",
        &state,
        "--mode-file",
        &mode,
        "--can-close",
        "--complete",
        "--authoritative",
    ]);
    for (op, action) in [("m1", "post"), ("m2", "post"), ("p1", "pay")] {
        sh.prepare(op, action, r#"{"n":1}"#);
        if action == "post" {
            std::fs::write(&mode, "apply:crash-before").unwrap();
            sh.ok(&["dispatch", op]);
            std::fs::write(&mode, "").unwrap();
        } else {
            sh.faulted(&["dispatch", op], Fault::CrashBeforeCommit);
        }
    }
    for (op, action) in [("m3", "post"), ("p2", "pay")] {
        sh.prepare(op, action, r#"{"n":2}"#);
        sh.ok(&["dispatch", op]);
    }
    sh
}

pub fn ids(rows: &Value) -> Vec<&str> {
    rows.as_array()
        .unwrap_or_else(|| panic!("not an array: {rows}"))
        .iter()
        .map(|row| row["op_id"].as_str().unwrap())
        .collect()
}

on_both_stores!(ops_receiver_selects_one_receivers_operations);
fn ops_receiver_selects_one_receivers_operations(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = two_receivers(store, dir.path());
    let all = sh.json(&["ops", "--receiver", "mail"]);
    assert_eq!(ids(&all), ["m1", "m2", "m3"]);
    assert!(all
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["receiver"] == "mail"));
    let unknown = sh.json(&["ops", "--receiver", "mail", "--state", "unknown"]);
    assert_eq!(ids(&unknown), ["m1", "m2"]);
    // Paged under either order, the pages join up to the whole list.
    for sort in ["op_id", "age"] {
        let first = sh.json(&["ops", "--receiver", "mail", "--sort", sort, "--limit", "2"]);
        assert_eq!(first.as_array().unwrap().len(), 2, "{first}");
        let cursor = first[1]["cursor"].as_str().unwrap();
        let rest = sh.json(&[
            "ops",
            "--receiver",
            "mail",
            "--sort",
            sort,
            "--after",
            cursor,
        ]);
        let mut joined = ids(&first);
        joined.extend(ids(&rest));
        joined.sort_unstable();
        assert_eq!(joined, ["m1", "m2", "m3"], "{sort}");
    }
    // A receiver with no operations lists none.
    assert_eq!(
        sh.json(&["ops", "--receiver", "nobody"]),
        serde_json::json!([])
    );
}

on_both_stores!(ops_receiver_with_a_bad_name_is_a_usage_error);
fn ops_receiver_with_a_bad_name_is_a_usage_error(store: Store) {
    let sh = Shell::on(store);
    for bad in ["Mail", "-x", "a b", ""] {
        let out = sh.run(&["ops", "--receiver", bad, "--json"]);
        assert_json_error(&out, 2);
        assert!(
            out.stderr.contains("receiver name"),
            "{bad}: {}",
            out.stderr
        );
    }
}
