//! The adapter printed in README.md's quickstart ("Plug in your tool") is
//! run here, the exact ```python block, through a whole flow, so the README
//! cannot rot.

use super::Rig;
use crate::stores::{on_both_stores, Store};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// The first ```python block of the README's "Plug in your tool" section.
fn readme_adapter() -> String {
    let readme = crate::readme::readme();
    let section = readme
        .split_once("\n## Plug in your tool\n")
        .expect("the README has the section")
        .1;
    let section = section.split("\n## ").next().unwrap();
    let code = section
        .split_once("```python\n")
        .expect("a python block")
        .1
        .split_once("\n```")
        .expect("the block ends")
        .0;
    format!("{code}\n")
}

on_both_stores!(the_readme_adapter_runs_the_whole_flow);
fn the_readme_adapter_runs_the_whole_flow(store: Store) {
    let code = readme_adapter();
    assert!(
        code.lines().count() <= 40,
        "the README's quickstart and docs/adapters.md promise under forty lines"
    );
    let rig = Rig::on(store);
    let program = rig.file("letters.py");
    std::fs::write(&program, code).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ledger = rig.file("letters.json");
    let added = rig.json(&[
        "receivers",
        "add",
        "letters",
        "--actions",
        "send_letter",
        "--json",
        "--",
        &program,
        &ledger,
    ]);
    assert_eq!(
        (
            &added["can_close"],
            &added["complete"],
            &added["authoritative"]
        ),
        (&json!(true), &json!(true), &json!(true))
    );
    // It declares the store it keeps, as every adapter that can prove must.
    assert!(
        added["instance"]
            .as_str()
            .is_some_and(|id| id.starts_with("letters-")),
        "{added}"
    );

    // A receipt confirms the first letter; an open read sees it exist.
    rig.prepare("op-1", "send_letter", r#"{"to":"ada","text":"hello"}"#);
    let sent = rig.dispatch("op-1");
    assert_eq!(
        (&sent["outcome"], &sent["effect_id"]),
        (&json!("receipt"), &json!("letter-1"))
    );
    assert_eq!(
        rig.snapshot("op-1", false)["verdict"],
        "exact_match_existence_only"
    );

    // The second is closed before it is sent: the adapter refuses it, and
    // the closed, empty, complete read lets a reviewer record not_applied.
    rig.prepare("op-2", "send_letter", r#"{"to":"bob"}"#);
    assert_eq!(rig.snapshot("op-2", true)["verdict"], "terminal_absence");
    let refused = rig.dispatch("op-2");
    assert_eq!(refused["outcome"], "unknown");
    assert_eq!(refused["adapter_failure"]["kind"], "error");
    assert!(refused["adapter_failure"]["detail"]
        .as_str()
        .unwrap()
        .starts_with("operation_closed"));
    let out = rig.reconcile("op-2", "not_applied", "2", false);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["verdict"], "terminal_absence");
    let shown = rig.show("op-2");
    assert_eq!(shown["operation"]["state"], "not_applied");
    assert_eq!(shown["evidence"][0]["receiver"], "letters");
    assert_eq!(
        shown["evidence"][0]["receiver_describe_sha256"],
        added["describe_sha256"]
    );
}
