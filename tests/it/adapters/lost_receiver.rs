//! `receivers remove NAME --lost --reason TEXT` (SPEC 8, "Messages a
//! newcomer meets (fourth wave)"): a registration whose store is gone ends
//! even while operations route to it. Each open one (prepared or unknown)
//! is escalated with the reason in the removal's transaction, journaled;
//! `verify` still passes; and every act on it that needs its receiver is
//! refused `receiver_gone` (exit 3) while reading it still works.

use super::{Rig, FULL};
use crate::cli::assert_refused;
use crate::stores::{on_both_stores, Store};
use serde_json::{json, Value};

const REASON: &str = "the mailbox was deleted";

/// A rig with `mail` holding `op-p` prepared, `op-u` unknown (its receipt
/// lost) and already escalated by a reviewer, and `op-d` confirmed.
fn rig_with_open_operations(store: Store) -> Rig {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-d", "post_letter", r#"{"to":"ada"}"#);
    assert_eq!(rig.dispatch("op-d")["outcome"], "receipt");
    rig.prepare("op-u", "post_letter", r#"{"to":"bob"}"#);
    rig.set_mode("mail", "apply:crash-after");
    assert_eq!(rig.dispatch("op-u")["outcome"], "unknown");
    rig.set_mode("mail", "");
    rig.ok(&[
        "escalate",
        "op-u",
        "--by",
        "rita",
        "--reason",
        "two letters?",
    ]);
    rig.prepare("op-p", "post_letter", r#"{"to":"cy"}"#);
    rig
}

/// Who the lost removal's escalations are by: the owner on a workspace
/// directory (nobody is authenticated there), the login in team mode.
fn remover(store: Store) -> &'static str {
    match store {
        Store::Sqlite => "owner",
        Store::Postgres => "postgres",
    }
}

fn remove_lost(rig: &Rig) {
    let out = rig.ok(&["receivers", "remove", "mail", "--lost", "--reason", REASON]);
    assert_eq!(
        out.stdout,
        "removed receiver mail\nlost: escalated 2 open operation(s): op-p, op-u\n"
    );
}

/// The journal's entries as `export` prints them.
fn journal(rig: &Rig) -> Vec<Value> {
    rig.ok(&["export"])
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("an exported entry"))
        .collect()
}

on_both_stores!(
    removing_a_lost_receiver_escalates_each_open_operation_with_the_reason_and_verify_passes
);
fn removing_a_lost_receiver_escalates_each_open_operation_with_the_reason_and_verify_passes(
    store: Store,
) {
    let rig = rig_with_open_operations(store);
    let before = journal(&rig).len();
    remove_lost(&rig);
    assert_eq!(rig.list(), json!([]), "the registration is gone");
    let ops = rig.json(&["ops", "--state", "all", "--json"]);
    let escalated: Vec<(Value, Value)> = ops
        .as_array()
        .expect("ops")
        .iter()
        .map(|op| (op["op_id"].clone(), op["escalated"].clone()))
        .collect();
    let by = remover(store);
    let lost = |op: &str| {
        let (_, marker) = escalated.iter().find(|(id, _)| id == op).expect(op);
        assert_eq!(
            (&marker["by"], &marker["reason"]),
            (&json!(by), &json!(REASON)),
            "{op}: {marker}"
        );
    };
    lost("op-p");
    lost("op-u");
    let decided = escalated.iter().find(|(id, _)| id == "op-d").expect("op-d");
    assert_eq!(decided.1, Value::Null, "a decided operation is not open");
    // The history keeps the reviewer's escalation before the loss.
    let history = rig.show("op-u")["escalations"].clone();
    let reasons: Vec<&Value> = history
        .as_array()
        .expect("escalations")
        .iter()
        .map(|e| &e["reason"])
        .collect();
    assert_eq!(reasons, [&json!("two letters?"), &json!(REASON)]);
    // One removal entry, then one escalation per open operation.
    let entries = journal(&rig);
    let added: Vec<(Value, Value)> = entries[before..]
        .iter()
        .map(|e| (e["kind"].clone(), e["op_id"].clone()))
        .collect();
    assert_eq!(
        added,
        [
            (json!("receiver_removed"), Value::Null),
            (json!("escalated"), json!("op-p")),
            (json!("escalated"), json!("op-u")),
        ],
        "{entries:?}"
    );
    let removal = &entries[before];
    assert_eq!(
        (&removal["lost"], &removal["reason"], &removal["by"]),
        (&json!(true), &json!(REASON), &json!(by)),
        "{removal}"
    );
    let verified = rig.recon(&["verify", "--json"]);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);
    assert_eq!(verified.json()["projection_mismatches"], json!([]));
}

on_both_stores!(
    after_a_lost_removal_every_act_on_its_operations_is_refused_receiver_gone_and_reads_work
);
fn after_a_lost_removal_every_act_on_its_operations_is_refused_receiver_gone_and_reads_work(
    store: Store,
) {
    let rig = rig_with_open_operations(store);
    remove_lost(&rig);
    // Another receiver under the freed name does not take them back.
    rig.register("mail", "post_letter", &[], FULL);
    let applies = rig.calls("mail", "apply").len();
    let dump = rig.dump();
    let acts: [&[&str]; 4] = [
        &["dispatch", "--", "op-p"],
        &["snapshot", "op-u"],
        &["snapshot", "op-u", "--close", "--authorized-by", "dana"],
        &[
            "reconcile",
            "op-u",
            "--reviewer",
            "dana",
            "--decision",
            "not_applied",
            "--expected-version",
            "2",
        ],
    ];
    for act in acts {
        let out = rig.recon(act);
        assert_refused(&out, "receiver_gone");
        assert_eq!(out.code, Some(3), "{act:?}: {}", out.stderr);
    }
    // A batch read reports each operation it could not read (exit 4, as
    // for any), naming the refusal.
    let out = rig.recon(&["observe", "op-u", "--by", "dana"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.starts_with("refused: receiver_gone: op-u"),
        "{}",
        out.stderr
    );
    assert_eq!(rig.dump(), dump, "nothing written");
    assert_eq!(rig.calls("mail", "apply").len(), applies, "nothing sent");
    // Reading them still works, and shows why.
    let shown = rig.show("op-p");
    assert_eq!(shown["operation"]["state"], "prepared", "{shown}");
    assert_eq!(shown["operation"]["escalated"]["reason"], REASON);
    let text = rig.ok(&["show", "op-u"]).stdout;
    assert!(text.contains(REASON), "{text}");
    let escalated = rig.json(&["ops", "--escalated", "yes", "--state", "all", "--json"]);
    assert_eq!(escalated.as_array().map(Vec::len), Some(2), "{escalated}");
}

on_both_stores!(without_lost_a_receiver_with_open_operations_is_still_refused_receiver_in_use);
fn without_lost_a_receiver_with_open_operations_is_still_refused_receiver_in_use(store: Store) {
    let rig = rig_with_open_operations(store);
    let dump = rig.dump();
    let out = rig.recon(&["receivers", "remove", "mail"]);
    assert_refused(&out, "receiver_in_use");
    assert_eq!(out.code, Some(3));
    assert_eq!(rig.dump(), dump, "nothing written");
}

#[test]
fn lost_without_reason_or_reason_without_lost_is_a_usage_error_and_writes_nothing() {
    let rig = rig_with_open_operations(Store::Sqlite);
    let dump = rig.dump();
    for args in [
        &["receivers", "remove", "mail", "--lost"][..],
        &["receivers", "remove", "mail", "--reason", REASON],
        &["receivers", "remove", "mail", "--lost", "--reason", " "],
    ] {
        let out = rig.recon(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    }
    assert_eq!(rig.dump(), dump, "nothing written");
}

/// On a workspace directory no database refuses an edit, and `verify`
/// holds the journal to the same rule: an escalation of a prepared
/// operation that is not a lost removal's is a mismatch naming it.
#[test]
fn verify_finds_an_escalation_of_a_prepared_operation_that_no_lost_removal_made() {
    let rig = rig_with_open_operations(Store::Sqlite);
    remove_lost(&rig);
    let seq = journal(&rig)
        .iter()
        .find(|e| e["kind"] == "escalated" && e["op_id"] == "op-p")
        .and_then(|e| e["seq"].as_i64())
        .expect("op-p's escalation");
    let dir = std::path::PathBuf::from(rig.ws());
    crate::audit::rewrite_entry(&dir, seq, |entry| {
        entry.remove("lost");
    });
    let verified = rig.recon(&["verify", "--json"]);
    assert_eq!(verified.code, Some(1), "{}", verified.stdout);
    let mismatches = verified.json()["projection_mismatches"].clone();
    let found = mismatches.as_array().expect("mismatches").iter().any(|m| {
        m["op_id"] == "op-p"
            && m["journal"]
                .as_str()
                .is_some_and(|why| why.contains("escalates a prepared operation"))
    });
    assert!(found, "{mismatches:#}");
}
