//! What the database cannot judge, `verify` does, on both stores (SPEC 10):
//! every `decided` entry is held to the rules the store applied when it
//! recorded the decision. Its snapshot, classified again against the
//! operation as the journal prepared it, must support the decision (and,
//! for a policy's, be one the policy decides on), and the verdict, effect
//! and source it records must be the rules'. The forger here rewrites one
//! entry with the chain recomputed and edits every row to agree with it,
//! so no comparison of rows can see the change: only the rule can.

use crate::cli::{assert_refused, Shell};
use crate::stores::{on_both_stores, Store};
use recon::receiver::Fault;
use serde_json::{json, Map, Value};

/// An outbox on `store` with every kind of decision recorded as the
/// flows record them:
/// - `a`: applied, its receipt lost, confirmed by ann on a closing read
///   (`unique_exact_match`);
/// - `b`: never applied, decided `not_applied` by ann on a closing read
///   (`terminal_absence`);
/// - `c`: applied, its receipt lost, confirmed by ann on an open read
///   (`exact_match_existence_only`);
/// - `p`, `q`: as `a` and `b`, decided by `resolve --policy provable`.
fn decided(store: Store) -> Shell {
    let sh = Shell::on(store);
    for (op, fault) in [
        ("a", Fault::CrashAfterCommit),
        ("b", Fault::CrashBeforeCommit),
        ("c", Fault::CrashAfterCommit),
        ("p", Fault::CrashAfterCommit),
        ("q", Fault::CrashBeforeCommit),
    ] {
        sh.prepare(op, "pay", &json!({"op": op}).to_string());
        sh.faulted(&["dispatch", op], fault);
    }
    let review = |op: &str, decision: &str, close: bool| {
        let mut args = vec![
            "reconcile",
            op,
            "--reviewer",
            "ann",
            "--decision",
            decision,
            "--expected-version",
            "2",
        ];
        if close {
            args.extend(["--close", "--authorized-by", "ann"]);
        }
        sh.ok(&args);
    };
    review("a", "confirmed", true);
    review("b", "not_applied", true);
    review("c", "confirmed", false);
    sh.ok(&[
        "resolve",
        "--policy",
        "provable",
        "--by",
        "robot",
        "--authorized-by",
        "ann",
        "--older-than",
        "0s",
        "p",
        "q",
    ]);
    sh
}

/// The one evidence row of `op`, as `show` gives it.
fn evidence(sh: &Shell, op: &str) -> Value {
    sh.json(&["show", op])["evidence"][0].clone()
}

on_both_stores!(every_legitimately_decided_entry_verifies_clean);
fn every_legitimately_decided_entry_verifies_clean(store: Store) {
    let sh = decided(store);
    let recorded: Vec<(String, Value, Value, Value)> = ["a", "b", "c", "p", "q"]
        .into_iter()
        .map(|op| {
            let row = evidence(&sh, op);
            let source = row["source"].clone();
            (
                op.to_string(),
                source,
                row["decision"].clone(),
                row["verdict"].clone(),
            )
        })
        .collect();
    let expected = [
        ("a", "review", "confirmed", "unique_exact_match"),
        ("b", "review", "not_applied", "terminal_absence"),
        ("c", "review", "confirmed", "exact_match_existence_only"),
        ("p", "policy", "confirmed", "unique_exact_match"),
        ("q", "policy", "not_applied", "terminal_absence"),
    ]
    .map(|(op, source, decision, verdict)| {
        (
            op.to_string(),
            json!(source),
            json!(decision),
            json!(verdict),
        )
    });
    assert_eq!(recorded, expected);
    let report = sh.json(&["verify"]);
    assert_eq!(report["intact"], true, "{report:#}");
    assert_eq!(report["projection_mismatches"], json!([]), "{report:#}");
}

/// One forgery: the operation, the edit of its `decided` entry, the SQL
/// that makes its rows agree with the edited entry, and the one mismatch
/// field `verify` must report.
struct Forgery {
    op: &'static str,
    entry: fn(&mut Map<String, Value>),
    rows: String,
    field: &'static str,
}

/// The evidence row of `op` edited as [`reopened`] edits its entry, its
/// verdict recorded as `verdict`.
fn reopened_row(op: &str, verdict: &str) -> String {
    format!(
        "UPDATE evidence SET verdict = '{verdict}', close_seq = NULL,
             snapshot = replace(snapshot, '\"closed\":true', '\"closed\":false')
         WHERE op_id = '{op}'"
    )
}

/// Makes an entry's closing snapshot look like an open read, which names
/// no close (SPEC 12).
fn reopened(entry: &mut Map<String, Value>) {
    entry["snapshot"]["closed"] = json!(false);
    entry.remove("close_seq");
}

/// Applies `forgery` to a fresh outbox on `store` and checks that
/// `verify` reports exactly its one mismatch: the chain is intact and
/// every row agrees with the journal.
#[track_caller]
fn check(store: Store, forgery: &Forgery) {
    let sh = decided(store);
    assert_eq!(sh.json(&["verify"])["intact"], true);
    let Forgery {
        op,
        entry,
        rows,
        field,
    } = forgery;
    let seq = evidence(&sh, op)["journal_seq"].as_i64().unwrap();
    sh.rewrite_entry(seq, entry);
    sh.tamper(rows);
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{op} {field}: {}", out.stdout);
    let report = out.json();
    assert_eq!(report["first_broken"], Value::Null, "{report:#}");
    assert_eq!(report["state_mismatches"], json!([]), "{report:#}");
    let mismatches = report["projection_mismatches"].as_array().unwrap();
    let found: Vec<(&Value, &Value)> = mismatches
        .iter()
        .map(|m| (&m["op_id"], &m["field"]))
        .collect();
    assert_eq!(found, [(&json!(op), &json!(field))], "{report:#}");
    let why = mismatches[0]["journal"].as_str().unwrap();
    assert!(
        why.starts_with(&format!("entry {seq} (decided): ")),
        "{why}"
    );
}

on_both_stores!(a_decided_entry_whose_snapshot_does_not_support_its_decision_is_a_mismatch);
fn a_decided_entry_whose_snapshot_does_not_support_its_decision_is_a_mismatch(store: Store) {
    // SQLite's trigger moves the count with the state; on PostgreSQL the
    // forger's session has every trigger off and moves it by hand.
    let counts = match store {
        Store::Sqlite => "",
        Store::Postgres => {
            "UPDATE state_counts SET n = n - 1 WHERE state = 'not_applied';
             UPDATE state_counts SET n = n + 1 WHERE state = 'confirmed';"
        }
    };
    let forgeries = [
        // A terminal absence recorded as proving `confirmed`.
        Forgery {
            op: "b",
            entry: |e| e["decision"] = json!("confirmed"),
            rows: format!(
                "UPDATE operations SET state = 'confirmed' WHERE op_id = 'b';
                 UPDATE evidence SET decision = 'confirmed' WHERE op_id = 'b'; {counts}"
            ),
            field: "decision",
        },
        // `not_applied` on a read that was not closed, its verdict
        // recorded as the one that read gives.
        Forgery {
            op: "b",
            entry: |e| {
                reopened(e);
                e["verdict"] = json!("inconclusive");
            },
            rows: reopened_row("b", "inconclusive"),
            field: "decision",
        },
        // A policy's `confirmed` on an open read: it supports a person's
        // confirmation, not the policy's.
        Forgery {
            op: "p",
            entry: |e| {
                reopened(e);
                e["verdict"] = json!("exact_match_existence_only");
            },
            rows: reopened_row("p", "exact_match_existence_only"),
            field: "policy",
        },
    ];
    for forgery in &forgeries {
        check(store, forgery);
    }
}

on_both_stores!(a_decided_entry_whose_verdict_effect_or_source_is_not_its_snapshots_is_a_mismatch);
fn a_decided_entry_whose_verdict_effect_or_source_is_not_its_snapshots_is_a_mismatch(store: Store) {
    let forgeries = [
        // The decision stands, but not on the verdict recorded for it.
        Forgery {
            op: "c",
            entry: |e| e["verdict"] = json!("unique_exact_match"),
            rows: "UPDATE evidence SET verdict = 'unique_exact_match' WHERE op_id = 'c'".into(),
            field: "verdict",
        },
        // A confirmation naming an effect its snapshot does not hold.
        Forgery {
            op: "a",
            entry: |e| e["effect_id"] = json!("fx-999999"),
            rows: "UPDATE operations SET confirmed_effect_id = 'fx-999999' WHERE op_id = 'a';
                   UPDATE evidence SET effect_id = 'fx-999999' WHERE op_id = 'a'"
                .into(),
            field: "effect_id",
        },
        // A person's decision passed off as a receipt, which is not a
        // classified snapshot.
        Forgery {
            op: "b",
            entry: |e| e["source"] = json!("receipt"),
            rows: "UPDATE evidence SET source = 'receipt' WHERE op_id = 'b'".into(),
            field: "source",
        },
    ];
    for forgery in &forgeries {
        check(store, forgery);
    }
}

on_both_stores!(a_receipt_after_its_dispatch_had_its_outcome_is_a_mismatch_naming_the_operation);
fn a_receipt_after_its_dispatch_had_its_outcome_is_a_mismatch_naming_the_operation(store: Store) {
    // Reproduction 1 of issue 29, found after the fact (SPEC 12: a receipt
    // is the first outcome of its dispatch): `c`'s apply crashed, kept as
    // a failed call, and its confirmation is passed off as a receipt the
    // receiver never gave, with every row agreeing. Receipts are not
    // judged as snapshots, so only the rule can see it.
    let sh = decided(store);
    let seq = evidence(&sh, "c")["journal_seq"].as_i64().unwrap();
    sh.rewrite_entry(seq, |e| {
        e["kind"] = json!("receipt");
        e["source"] = json!("receipt");
        e.remove("reviewer");
        e.remove("verdict");
    });
    sh.tamper(&format!(
        "UPDATE journal SET kind = 'receipt' WHERE seq = {seq};
         UPDATE evidence SET source = 'receipt', reviewer = NULL, verdict = NULL
         WHERE op_id = 'c'"
    ));
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let report = out.json();
    assert_eq!(report["first_broken"], Value::Null, "{report:#}");
    let mismatches = report["projection_mismatches"].as_array().unwrap();
    let found: Vec<(&Value, &Value)> = mismatches
        .iter()
        .map(|m| (&m["op_id"], &m["field"]))
        .collect();
    assert_eq!(found, [(&json!("c"), &json!("receipt"))], "{report:#}");
    let why = mismatches[0]["journal"].as_str().unwrap();
    assert!(why.contains("had its outcome already"), "{why}");
}

on_both_stores!(decisions_on_closing_reads_name_their_close_in_show_json_and_others_none);
fn decisions_on_closing_reads_name_their_close_in_show_json_and_others_none(store: Store) {
    // SPEC 12: a person's (`a`, `b`) and a policy's (`p`, `q`) decision on
    // a closing read name the `closed` entry they rest on, journaled
    // before them; `c`, decided on an open read, names none.
    let sh = decided(store);
    for op in ["a", "b", "p", "q"] {
        let row = evidence(&sh, op);
        let close = row["close_seq"].as_i64();
        let decided = row["journal_seq"].as_i64().unwrap();
        assert!(close.is_some_and(|seq| seq < decided), "{op}: {row:#}");
    }
    assert_eq!(evidence(&sh, "c").get("close_seq"), None);
    assert_eq!(sh.json(&["verify"])["intact"], true);
}

on_both_stores!(
    a_decision_on_a_closed_snapshot_without_its_recorded_close_is_a_mismatch_naming_the_op
);
fn a_decision_on_a_closed_snapshot_without_its_recorded_close_is_a_mismatch_naming_the_op(
    store: Store,
) {
    // Each forgery keeps the decision the rules give its snapshot, so the
    // only rule it breaks is SPEC 12's: a closed snapshot is a recorded
    // close. On PostgreSQL the forger is the superuser with the rules off.
    let forgeries = [
        // Reproduction 2 after the fact: `c`'s open read passed off as a
        // closed one, which no close of `c` recorded.
        Forgery {
            op: "c",
            entry: |e| {
                e["snapshot"]["closed"] = json!(true);
                e["verdict"] = json!("unique_exact_match");
            },
            rows: "UPDATE evidence SET verdict = 'unique_exact_match',
                       snapshot = replace(snapshot, '\"closed\":false', '\"closed\":true')
                   WHERE op_id = 'c'"
                .into(),
            field: "close_seq",
        },
        // `b`'s decision naming no close.
        Forgery {
            op: "b",
            entry: |e| {
                e.remove("close_seq");
            },
            rows: "UPDATE evidence SET close_seq = NULL WHERE op_id = 'b'".into(),
            field: "close_seq",
        },
        // `q`'s policy decision on a snapshot its close did not record.
        Forgery {
            op: "q",
            entry: |e| e["snapshot"]["closed_by"] = json!("mallory"),
            rows: "UPDATE evidence
                   SET snapshot = replace(snapshot, '\"closed\":true',
                       '\"closed\":true,\"closed_by\":\"mallory\"')
                   WHERE op_id = 'q'"
                .into(),
            field: "close_seq",
        },
    ];
    for forgery in &forgeries {
        check(store, forgery);
    }
}

on_both_stores!(
    a_closed_entry_whose_snapshot_hash_is_not_its_snapshots_is_a_mismatch_with_its_decision
);
fn a_closed_entry_whose_snapshot_hash_is_not_its_snapshots_is_a_mismatch_with_its_decision(
    store: Store,
) {
    let sh = decided(store);
    let close = evidence(&sh, "b")["close_seq"].as_i64().unwrap();
    sh.rewrite_entry(close, |e| e["snapshot_sha256"] = json!("0".repeat(64)));
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let report = out.json();
    assert_eq!(report["first_broken"], Value::Null, "{report:#}");
    let found: Vec<(Value, Value)> = (report["projection_mismatches"].as_array().unwrap())
        .iter()
        .map(|m| (m["op_id"].clone(), m["field"].clone()))
        .collect();
    assert_eq!(
        found,
        [
            (json!("b"), json!("closed")),
            (json!("b"), json!("close_seq"))
        ],
        "{report:#}"
    );
}

on_both_stores!(a_close_the_outbox_never_recorded_backs_no_decision_until_it_is_repeated);
fn a_close_the_outbox_never_recorded_backs_no_decision_until_it_is_repeated(store: Store) {
    // The receiver commits the close and its answer is lost before the
    // outbox records it (on SQLite the built-in ledger's crash point, on
    // PostgreSQL the adapter dying after its commit). Its reads now say
    // closed, but no close is recorded: `not_applied` on them is refused
    // `unbacked_close`, nothing written, until the close is repeated
    // (SPEC 8 rule 6), which records it for the decision to name.
    let sh = Shell::on(store);
    sh.prepare("z", "pay", &json!({"op": "z"}).to_string());
    sh.faulted(&["dispatch", "z"], Fault::CrashBeforeCommit);
    let close = ["snapshot", "z", "--close", "--authorized-by", "ann"];
    let lost = match sh.postgres() {
        None => sh.run_full(
            &close,
            None,
            &[(
                recon::faults::CRASH_POINT_ENV,
                "snapshot.close_after_commit",
            )],
        ),
        Some(site) => {
            site.set_adapter_mode("close:crash-after");
            let lost = sh.run(&close);
            site.set_adapter_mode("");
            lost
        }
    };
    assert_ne!(lost.code, Some(0), "{}", lost.stderr);
    let entries = |sh: &Shell| sh.json(&["verify"])["journal_entries"].clone();
    let before = entries(&sh);
    let decide = [
        "reconcile",
        "z",
        "--reviewer",
        "ann",
        "--decision",
        "not_applied",
        "--expected-version",
        "2",
    ];
    assert_refused(&sh.run(&decide), "unbacked_close");
    assert_eq!(entries(&sh), before, "nothing was written");
    sh.ok(&[&decide[..], &["--close", "--authorized-by", "ann"]].concat());
    assert!(evidence(&sh, "z")["close_seq"].is_i64());
    assert_eq!(sh.json(&["verify"])["intact"], true);
}
