//! Claim 1: every act is stamped in UTC with milliseconds; `updated_at`
//! moves with the state or version only; the experiment holds no time.

use super::{is_utc_millis, time_of, Clocked};
use crate::cli::Shell;
use crate::stores::{on_both_stores, Store};
use crate::support::experiment_run;
use recon::dispatch::DispatchOptions;
use recon::domain::Decision;
use recon::receiver::Fault;
use recon::workspace::ReconcileRequest;
use recon::Workspace;
use serde_json::{json, Value};

/// An outbox on `store` with an operation in each state a person meets:
/// prepared, confirmed by its receipt, unknown, and one decided
/// not applied with a close, so that every kind of stamp is there.
fn every_kind_of_act(store: Store) -> Shell {
    let sh = Shell::on(store);
    for op in ["prepared", "paid", "lost", "decided"] {
        let payload = format!(r#"{{"op":"{op}"}}"#);
        sh.prepare(op, "pay", &payload);
    }
    sh.ok(&["dispatch", "paid"]);
    for op in ["lost", "decided"] {
        sh.faulted(&["dispatch", op], Fault::CrashBeforeCommit);
    }
    sh.ok(&["note", "lost", "--by", "ann", "--text", "customer called"]);
    sh.closed_not_applied("decided", "2", "rosa");
    sh
}

on_both_stores!(ops_and_show_json_stamp_every_act_in_utc_with_milliseconds);
fn ops_and_show_json_stamp_every_act_in_utc_with_milliseconds(store: Store) {
    let sh = every_kind_of_act(store);
    let ops = sh.json(&["ops"]);
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 4);
    for op in ops {
        time_of(op, "created_at");
        time_of(op, "updated_at");
        let count = op["dispatch_count"].as_i64().unwrap();
        match count {
            0 => assert_eq!(op["last_dispatched_at"], Value::Null, "{op}"),
            _ => drop(time_of(op, "last_dispatched_at")),
        }
        assert_eq!(count == 0, op["state"] == "prepared", "{op}");
        let shown = sh.json(&["show", op["op_id"].as_str().unwrap()]);
        assert_eq!(&shown["operation"]["updated_at"], &op["updated_at"]);
        for evidence in shown["evidence"].as_array().unwrap() {
            time_of(evidence, "recorded_at");
        }
        for close in shown["closes"].as_array().unwrap() {
            time_of(close, "closed_at");
        }
        for note in shown["notes"].as_array().unwrap() {
            time_of(note, "at");
        }
    }
    // A decision and a close are among them: the loops above ran.
    let decided = sh.json(&["show", "decided"]);
    assert_eq!(decided["evidence"].as_array().unwrap().len(), 1);
    assert_eq!(decided["closes"].as_array().unwrap().len(), 1);
    let lost = sh.json(&["show", "lost"]);
    assert_eq!(lost["notes"].as_array().unwrap().len(), 1, "{lost}");
}

/// The operation's `updated_at`, as text.
fn updated(ws: &Workspace, op_id: &str) -> String {
    ws.require(op_id).unwrap().triage.updated_at.to_string()
}

on_both_stores!(updated_at_moves_on_prepare_dispatch_receipt_and_decision_only);
fn updated_at_moves_on_prepare_dispatch_receipt_and_decision_only(store: Store) {
    let mut lab = Clocked::on(store);
    let payload = json!({"to": "ada@example.com"});

    let prepared_at = lab.site.ws.now().to_string();
    lab.site.ws.prepare("lost", "send_email", &payload).unwrap();
    let op = lab.site.ws.require("lost").unwrap();
    assert_eq!(op.triage.created_at.to_string(), prepared_at);
    assert_eq!(op.triage.updated_at.to_string(), prepared_at);
    assert_eq!(
        (op.triage.dispatch_count, op.triage.last_dispatched_at),
        (0, None)
    );

    let dispatched_at = lab.tick(10);
    let options = DispatchOptions {
        fault: Some(Fault::CrashBeforeCommit),
        wait_permit: false,
    };
    lab.site.dispatch("lost", options).unwrap();
    let op = lab.site.ws.require("lost").unwrap();
    assert_eq!(op.triage.updated_at.to_string(), dispatched_at);
    assert_eq!(op.triage.dispatch_count, 1);
    assert_eq!(
        op.triage.last_dispatched_at.map(|t| t.to_string()),
        Some(dispatched_at.clone())
    );
    assert_eq!(op.triage.created_at.to_string(), prepared_at);

    // Triage leaves it alone: a note, an observation, an escalation.
    lab.tick(10);
    lab.site.ws.note("lost", "ann", "customer called").unwrap();
    lab.tick(10);
    lab.site.ws.snapshot_by("lost", None, Some("ann")).unwrap();
    lab.tick(10);
    lab.site
        .ws
        .escalate("lost", "ann", "needs finance")
        .unwrap();
    lab.tick(10);
    lab.site
        .ws
        .deescalate("lost", "ann", "finance is away")
        .unwrap();
    lab.tick(10);
    lab.site.ws.escalate("lost", "ann", "back again").unwrap();
    assert_eq!(updated(&lab.site.ws, "lost"), dispatched_at);

    let decided_at = lab.tick(10);
    lab.site
        .ws
        .reconcile(&ReconcileRequest {
            keep: None,
            op_id: "lost",
            reviewer: "ann",
            decision: Decision::NotApplied,
            expected_version: 2,
            payload: None,
            close_authorized_by: Some("ann"),
        })
        .unwrap();
    assert_eq!(updated(&lab.site.ws, "lost"), decided_at);
    let evidence = lab.site.ws.evidence("lost").unwrap();
    assert_eq!(evidence[0].recorded_at.to_string(), decided_at);
    // The dispatch's own stamps stay as they were.
    let op = lab.site.ws.require("lost").unwrap();
    assert_eq!(op.triage.dispatch_count, 1);
    assert_eq!(
        op.triage.last_dispatched_at.map(|t| t.to_string()),
        Some(dispatched_at)
    );
}

// SQLite only: it holds the receipt with the built-in ledger's permit drill.
#[test]
fn updated_at_moves_on_the_receipt_after_the_dispatch() {
    let mut lab = Clocked::new();
    lab.site
        .ws
        .prepare("paid", "pay", &json!({"amount": 10}))
        .unwrap();
    let dispatched_at = lab.tick(5);
    let mut pending = lab
        .site
        .ws
        .start_dispatch(
            "paid",
            DispatchOptions {
                fault: None,
                wait_permit: true,
            },
        )
        .unwrap();
    assert_eq!(updated(&lab.site.ws, "paid"), dispatched_at);
    let receipt_at = lab.tick(5);
    pending.child.permit().unwrap();
    let report = lab.site.ws.finish_dispatch(pending).unwrap();
    assert_eq!(report.outcome, "receipt");
    let op = lab.site.ws.require("paid").unwrap();
    assert_eq!(op.state.as_str(), "confirmed");
    assert_eq!(op.triage.updated_at.to_string(), receipt_at);
    assert_eq!(
        op.triage.last_dispatched_at.map(|t| t.to_string()),
        Some(dispatched_at)
    );
    assert_eq!(op.triage.dispatch_count, 1);
}

on_both_stores!(dispatch_count_counts_the_dispatches_of_each_operation);
fn dispatch_count_counts_the_dispatches_of_each_operation(store: Store) {
    let mut lab = Clocked::on(store);
    for op in ["one", "two"] {
        lab.site.ws.prepare(op, "pay", &json!({"op": op})).unwrap();
    }
    lab.site
        .dispatch("one", DispatchOptions::default())
        .unwrap();
    let refused = lab.site.dispatch("one", DispatchOptions::default());
    assert!(refused.is_err(), "a second dispatch is a blind retry");
    let count = |op: &str| lab.site.ws.require(op).unwrap().triage.dispatch_count;
    assert_eq!((count("one"), count("two")), (1, 0));
    assert_eq!(lab.site.ws.dispatch_count("one").unwrap(), 1);
}

/// Every key and string of a JSON document, depth first.
fn walk<'a>(value: &'a Value, keys: &mut Vec<&'a str>, strings: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                keys.push(key);
                walk(inner, keys, strings);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| walk(v, keys, strings)),
        Value::String(text) => strings.push(text),
        _ => {}
    }
}

/// Whether a text holds something shaped like a date and a time.
fn looks_like_a_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd";
    bytes.windows(shape.len()).any(|w| {
        w.iter().zip(shape).all(|(c, s)| match s {
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        })
    }) || is_utc_millis(text)
}

#[test]
fn the_experiments_json_holds_no_time() {
    let run = experiment_run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let document = run.json();
    let (mut keys, mut strings) = (Vec::new(), Vec::new());
    walk(&document, &mut keys, &mut strings);
    assert!(keys.len() > 10 && !strings.is_empty(), "{document}");
    let timed: Vec<&&str> = keys.iter().filter(|k| k.ends_with("_at")).collect();
    assert!(timed.is_empty(), "time keys in the experiment: {timed:?}");
    let stamps: Vec<&&str> = strings.iter().filter(|s| looks_like_a_time(s)).collect();
    assert!(stamps.is_empty(), "times in the experiment: {stamps:?}");
    assert!(looks_like_a_time("at 2026-12-03T08:15 or so"));
}
