//! Claim 3: notes and the escalation marker through the binary: their JSON,
//! their refusals, what a decision does to the marker, `show --json`'s
//! history, the journal (`export`, `verify`) and escaped text.

use super::time_of;
use crate::cli::{assert_fails, assert_json_error, assert_keys, assert_refused, Shell};
use crate::stores::{on_both_stores, Store};
use recon::receiver::Fault;
use serde_json::{json, Value};

/// An outbox on `store` with `ops` lost before the receiver wrote (unknown; their
/// verdict terminal_absence once closed), and one confirmed operation
/// `paid`.
fn fixture(store: Store, ops: &[&str]) -> Shell {
    let sh = Shell::on(store);
    for op in ops {
        sh.prepare(op, "pay", r#"{"n":1}"#);
        sh.faulted(&["dispatch", op], Fault::CrashBeforeCommit);
    }
    sh.prepare("paid", "pay", r#"{"n":2}"#);
    sh.ok(&["dispatch", "paid"]);
    sh
}

fn mark(action: &'static str, op: &'static str, by: &'static str) -> Vec<&'static str> {
    vec![action, op, "--by", by, "--reason", "needs finance"]
}

on_both_stores!(note_json_prints_the_note);
fn note_json_prints_the_note(store: Store) {
    let sh = fixture(store, &["a"]);
    let note = sh.json(&["note", "a", "--by", "ann", "--text", "customer called"]);
    assert_keys(&note, &["seq", "by", "at", "text"]);
    assert_eq!(note.as_object().unwrap().len(), 4, "{note}");
    assert_eq!(
        (note["by"].as_str(), note["text"].as_str()),
        (Some("ann"), Some("customer called"))
    );
    assert!(note["seq"].is_i64());
    time_of(&note, "at");
    // A note goes on any operation, in any state.
    let on_confirmed = sh.json(&["note", "paid", "--by", "ann", "--text", "refund asked"]);
    assert!(on_confirmed["seq"].as_i64() > note["seq"].as_i64());
    let text = sh.ok(&["note", "a", "--by", "ann", "--text", "again"]);
    assert!(text.stdout.starts_with("a: note #"), "{}", text.stdout);
}

on_both_stores!(escalate_and_deescalate_json_print_the_operation_with_its_marker);
fn escalate_and_deescalate_json_print_the_operation_with_its_marker(store: Store) {
    let sh = fixture(store, &["a"]);
    let before = sh.json(&["show", "a"])["operation"].clone();
    assert_eq!(before["escalated"], Value::Null);
    let raised = sh.json(&mark("escalate", "a", "ann"));
    assert_keys(&raised, crate::cli::OPERATION_FIELDS);
    assert_eq!(
        (raised["state"].as_str(), raised["version"].as_i64()),
        (Some("unknown"), Some(2))
    );
    let marker = &raised["escalated"];
    assert_keys(marker, &["by", "at", "reason"]);
    assert_eq!(
        (marker["by"].as_str(), marker["reason"].as_str()),
        (Some("ann"), Some("needs finance"))
    );
    time_of(marker, "at");
    assert_eq!(raised["updated_at"], before["updated_at"]);
    let listed = sh.json(&["ops", "--escalated", "yes"]);
    assert_eq!(listed[0]["escalated"], *marker);

    let lowered = sh.json(&mark("deescalate", "a", "bob"));
    assert_eq!(lowered["escalated"], Value::Null);
    assert_eq!(
        (lowered["state"].as_str(), lowered["version"].as_i64()),
        (Some("unknown"), Some(2))
    );
    let text = sh.ok(&mark("escalate", "a", "cy"));
    assert!(text.stdout.contains("escalated by cy"), "{}", text.stdout);
}

on_both_stores!(the_marker_is_refused_where_its_rules_say_and_nothing_changes);
fn the_marker_is_refused_where_its_rules_say_and_nothing_changes(store: Store) {
    let sh = fixture(store, &["a", "b"]);
    sh.ok(&mark("escalate", "a", "ann"));
    let before = sh.dump();
    for (args, code) in [
        (mark("escalate", "paid", "ann"), "not_unknown"),
        (mark("escalate", "a", "bob"), "already_escalated"),
        (mark("deescalate", "b", "ann"), "not_escalated"),
        (mark("deescalate", "paid", "ann"), "not_escalated"),
        (mark("escalate", "nope", "ann"), "unknown_operation"),
        (mark("deescalate", "nope", "ann"), "unknown_operation"),
        (
            vec!["note", "nope", "--by", "ann", "--text", "hi"],
            "unknown_operation",
        ),
        (mark("escalate", "b", ""), "empty_reviewer"),
        (mark("escalate", "b", "  "), "empty_reviewer"),
        (
            mark("deescalate", "a", "\u{200b}\u{200e}"),
            "empty_reviewer",
        ),
        (
            vec!["note", "a", "--by", "\u{feff} ", "--text", "hi"],
            "empty_reviewer",
        ),
        (vec!["observe", "a", "--by", " \u{2060}"], "empty_reviewer"),
        (vec!["snapshot", "a", "--by", ""], "empty_reviewer"),
    ] {
        let out = sh.run(&args);
        assert_refused(&out, code);
        let mut json = args.clone();
        json.push("--json");
        let out = sh.run(&json);
        assert_json_error(&out, 3);
        assert_eq!(out.json()["error"]["code"], code, "{args:?}");
        assert_eq!(sh.dump(), before, "recon {args:?} changed the databases");
    }
}

on_both_stores!(a_control_or_bidi_override_character_in_by_is_a_usage_error);
fn a_control_or_bidi_override_character_in_by_is_a_usage_error(store: Store) {
    let sh = fixture(store, &["a"]);
    let before = sh.dump();
    for by in ["ann\u{7}", "a\u{1b}[2Jb", "ann\u{202e}", "\u{0}x"] {
        for args in [
            vec!["note", "a", "--by", by, "--text", "hi"],
            vec!["escalate", "a", "--by", by, "--reason", "r"],
            vec!["deescalate", "a", "--by", by, "--reason", "r"],
            vec!["observe", "a", "--by", by],
            vec!["snapshot", "a", "--by", by],
        ] {
            if by.contains('\u{0}') {
                continue; // No process argument can hold a NUL.
            }
            let out = sh.run(&args);
            assert_fails(&out, 2);
            assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
        }
    }
    // An empty note or reason is a usage error too: there is nothing to keep.
    for args in [
        vec!["note", "a", "--by", "ann", "--text", " "],
        vec!["escalate", "a", "--by", "ann", "--reason", ""],
    ] {
        assert_fails(&sh.run(&args), 2);
    }
    assert_eq!(sh.dump(), before);
}

on_both_stores!(a_note_or_reason_over_4096_bytes_is_refused_and_one_of_4096_is_kept_whole);
fn a_note_or_reason_over_4096_bytes_is_refused_and_one_of_4096_is_kept_whole(store: Store) {
    let sh = fixture(store, &["a"]);
    // Two bytes a character: the bound counts bytes, not characters.
    let most = "\u{e9}".repeat(2048);
    let over = format!("{most}x");
    let said = "is 4097 bytes long; at most 4096 are kept";
    let before = sh.dump();
    for args in [
        vec!["note", "a", "--by", "ann", "--text", &over],
        vec!["escalate", "a", "--by", "ann", "--reason", &over],
    ] {
        let out = sh.run(&args);
        assert_fails(&out, 2);
        assert!(out.stderr.contains(said), "{args:?}: {}", out.stderr);
    }
    let mut ws = sh.workspace();
    for refused in [
        ws.note("a", "ann", &over).map(drop),
        ws.escalate("a", "ann", &over).map(drop),
    ] {
        let error = refused.unwrap_err().to_string();
        assert!(error.contains(said), "{error}");
    }
    assert_eq!(sh.dump(), before, "nothing of the long text was kept");
    let note = sh.json(&["note", "a", "--by", "ann", "--text", &most]);
    assert_eq!(note["text"], most.as_str());
    sh.ok(&["escalate", "a", "--by", "ann", "--reason", &most]);
    let lowered = sh.run(&["deescalate", "a", "--by", "bob", "--reason", &over]);
    assert_fails(&lowered, 2);
    let shown = sh.json(&["show", "a"]);
    assert_eq!(shown["operation"]["escalated"]["reason"], most.as_str());
}

on_both_stores!(a_decision_clears_the_marker_and_the_history_keeps_it);
fn a_decision_clears_the_marker_and_the_history_keeps_it(store: Store) {
    let sh = fixture(store, &["a"]);
    sh.ok(&mark("escalate", "a", "ann"));
    let decided = sh.json(&[
        "reconcile",
        "a",
        "--reviewer",
        "sam",
        "--decision",
        "not_applied",
        "--expected-version",
        "2",
        "--close",
        "--authorized-by",
        "sam",
    ]);
    assert_eq!(decided["state"], "not_applied");
    let shown = sh.json(&["show", "a"]);
    assert_eq!(shown["operation"]["escalated"], Value::Null);
    let history = shown["escalations"].as_array().unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0]["action"].as_str(), history[0]["by"].as_str()),
        (Some("escalate"), Some("ann"))
    );
    assert_eq!(sh.json(&["ops", "--escalated", "yes"]), json!([]));
    // And the decided operation cannot be escalated again.
    assert_refused(&sh.run(&mark("escalate", "a", "ann")), "not_unknown");
}

/// Notes, observations, a close and the marker raised, lowered and raised.
fn history(sh: &Shell) {
    sh.ok(&["note", "a", "--by", "ann", "--text", "first"]);
    sh.ok(&["observe", "a", "--by", "ann"]);
    sh.ok(&mark("escalate", "a", "ann"));
    sh.ok(&["note", "a", "--by", "bob", "--text", "second"]);
    sh.ok(&mark("deescalate", "a", "bob"));
    sh.ok(&["snapshot", "a", "--close", "--authorized-by", "cy"]);
    sh.ok(&mark("escalate", "a", "cy"));
}

/// `show --json`'s keys come in SPEC 9's order.
#[track_caller]
fn assert_top_keys_in_order(raw: &str) {
    // The document's keys, in this order.
    let at = |key: &str| {
        raw.find(&format!("\n  \"{key}\": "))
            .unwrap_or_else(|| panic!("{key}: {raw}"))
    };
    let keys = [
        "operation",
        "evidence",
        "approvals",
        "observations",
        "notes",
        "closes",
        "escalations",
    ];
    assert!(keys.windows(2).all(|w| at(w[0]) < at(w[1])), "{raw}");
}

on_both_stores!(show_json_lists_observations_notes_closes_and_escalations_in_order);
fn show_json_lists_observations_notes_closes_and_escalations_in_order(store: Store) {
    let sh = fixture(store, &["a"]);
    history(&sh);
    assert_top_keys_in_order(&sh.ok(&["show", "a", "--json"]).stdout);
    let shown = sh.json(&["show", "a"]);
    assert_keys(
        &shown,
        &[
            "operation",
            "evidence",
            "approvals",
            "observations",
            "notes",
            "closes",
            "escalations",
        ],
    );
    let notes = shown["notes"].as_array().unwrap();
    let texts: Vec<&str> = notes.iter().map(|n| n["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["first", "second"]);
    // Beside the name, the role the entry records: the login in team
    // mode, none on a workspace directory.
    let role = match store {
        Store::Sqlite => Value::Null,
        Store::Postgres => json!("postgres"),
    };
    for note in notes {
        assert_eq!(note.as_object().unwrap().len(), 5, "{note}");
        assert_eq!(note["role"], role, "{note}");
        time_of(note, "at");
    }
    let marks = shown["escalations"].as_array().unwrap();
    let acts: Vec<(&str, &str)> = marks
        .iter()
        .map(|m| (m["action"].as_str().unwrap(), m["by"].as_str().unwrap()))
        .collect();
    assert_eq!(
        acts,
        [
            ("escalate", "ann"),
            ("deescalate", "bob"),
            ("escalate", "cy")
        ]
    );
    for m in marks {
        assert_keys(m, &["seq", "action", "by", "at", "reason"]);
        time_of(m, "at");
    }
    let observed: Vec<(&str, bool)> = shown["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["observed_by"].as_str().unwrap(),
                o["closed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(observed, [("ann", false), ("cy", true)]);
    let closes = shown["closes"].as_array().unwrap();
    assert_eq!(closes.len(), 1);
    assert_eq!(closes[0]["authorized_by"], "cy");
    // Each list is in journal order.
    for list in ["observations", "notes", "escalations"] {
        let seqs: Vec<i64> = shown[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{list}: {seqs:?}");
    }
}

on_both_stores!(export_carries_the_triage_entries_and_verify_passes_after_them);
fn export_carries_the_triage_entries_and_verify_passes_after_them(store: Store) {
    let sh = fixture(store, &["a"]);
    history(&sh);
    let export = sh.ok(&["export"]);
    let kinds: Vec<String> = export
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for kind in ["noted", "observed", "escalated", "deescalated", "closed"] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "{kind} missing from {kinds:?}"
        );
    }
    assert_eq!(kinds.iter().filter(|k| *k == "noted").count(), 2);
    assert_eq!(kinds.iter().filter(|k| *k == "escalated").count(), 2);
    let report = sh.json(&["verify"]);
    assert_eq!(report["intact"], true, "{report:#}");
    assert_eq!(report["projection_mismatches"], json!([]));
}

on_both_stores!(an_edit_of_a_notes_escalations_or_observations_row_is_a_projection_mismatch);
fn an_edit_of_a_notes_escalations_or_observations_row_is_a_projection_mismatch(store: Store) {
    for (sql, table, column) in [
        (
            "UPDATE notes SET text = 'nothing happened' WHERE noted_by = 'bob'",
            "notes",
            "text",
        ),
        (
            "UPDATE notes SET noted_by = 'eve' WHERE noted_by = 'ann'",
            "notes",
            "noted_by",
        ),
        (
            "UPDATE escalations SET reason = 'never mind' WHERE acted_by = 'cy'",
            "escalations",
            "reason",
        ),
        (
            "UPDATE escalations SET action = 'escalate' WHERE acted_by = 'bob'",
            "escalations",
            "action",
        ),
        (
            "UPDATE observations SET verdict = 'unique_exact_match' WHERE observed_by = 'ann'",
            "observations",
            "verdict",
        ),
        (
            "UPDATE observations SET observed_by = 'eve' WHERE observed_by = 'cy'",
            "observations",
            "observed_by",
        ),
        ("DELETE FROM notes WHERE noted_by = 'ann'", "notes", ""),
    ] {
        let sh = fixture(store, &["a"]);
        history(&sh);
        sh.tamper(sql);
        let out = sh.run(&["verify", "--json"]);
        assert_eq!(out.code, Some(1), "{sql}: {}", out.stdout);
        let report = out.json();
        assert_eq!(
            report["first_broken"],
            Value::Null,
            "{sql}: the chain is intact"
        );
        let found = report["projection_mismatches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| {
                let field = m["field"].as_str().unwrap_or_default();
                m["op_id"] == "a" && field.starts_with(table) && field.ends_with(column)
            });
        assert!(found, "{sql}: {report:#}");
    }
}

on_both_stores!(untrusted_note_text_and_reasons_are_escaped_in_text_output);
fn untrusted_note_text_and_reasons_are_escaped_in_text_output(store: Store) {
    let sh = fixture(store, &["a"]);
    let hostile = "ok \u{1b}[2J\u{1b}]0;pwned\u{7} \u{202e}txt.exe\u{2066}";
    sh.ok(&["note", "a", "--by", "ann", "--text", hostile]);
    let escalated = sh.ok(&["escalate", "a", "--by", "ann", "--reason", hostile]);
    let shown = sh.ok(&["show", "a"]);
    for out in [&escalated.stdout, &shown.stdout] {
        for raw in ['\u{1b}', '\u{7}', '\u{202e}', '\u{2066}'] {
            assert!(!out.contains(raw), "{raw:?} reached the terminal: {out:?}");
        }
        assert!(
            out.contains("\\x1b[2J") && out.contains("\\u{202e}txt.exe"),
            "{out}"
        );
    }
    // The marker, the note and the history's escalation.
    assert_eq!(
        shown.stdout.matches("\\u{202e}").count(),
        3,
        "{}",
        shown.stdout
    );
    // The JSON keeps the text exactly (a JSON string escapes it itself).
    let note = &sh.json(&["show", "a"])["notes"][0];
    assert_eq!(note["text"], hostile);
}

/// An escalated operation whose late receipt lands: the receipt decides it,
/// so the marker goes as it does with a decision, and the journal's replay
/// agrees.
// SQLite only: it holds the receipt with the built-in ledger's permit drill.
#[test]
fn a_receipt_clears_the_marker_and_the_history_keeps_it() {
    let mut lab = crate::support::Lab::new();
    lab.ws.prepare("slow", "pay", &json!({"n": 1})).unwrap();
    let mut pending = lab.held_dispatch("slow");
    let escalated = lab.ws.escalate("slow", "ann", "no answer yet").unwrap();
    assert!(escalated.triage.escalated.is_some());
    pending.child.permit().unwrap();
    let report = lab.ws.finish_dispatch(pending).unwrap();
    assert_eq!(report.outcome, "receipt");
    let shown = lab.ws.show("slow").unwrap();
    assert_eq!(shown.operation.state.as_str(), "confirmed");
    assert_eq!(shown.operation.triage.escalated, None);
    assert_eq!(shown.escalations.len(), 1);
    let verified = crate::support::run(&["verify", "--workspace", &lab.path_str()], None);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);
}
