//! Claim 1: every act is stamped in UTC with milliseconds; `updated_at`
//! moves with the state or version only; the experiment holds no time.

use super::{is_utc_millis, time_of, Clocked};
use crate::cli::Shell;
use crate::support::experiment_run;
use recon::dispatch::DispatchOptions;
use recon::domain::Decision;
use recon::receiver::Fault;
use recon::workspace::ReconcileRequest;
use recon::Workspace;
use serde_json::{json, Value};

#[test]
fn ops_and_show_json_stamp_every_act_in_utc_with_milliseconds() {
    let sh = Shell::demo(0);
    let ops = sh.json(&["ops"]);
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 12);
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
    }
    // The demo's stories include decisions and closes: the loops above ran.
    let decided = sh.json(&["show", "op-1009-password-reset"]);
    assert_eq!(decided["evidence"].as_array().unwrap().len(), 1);
    assert_eq!(decided["closes"].as_array().unwrap().len(), 1);
}

/// The operation's `updated_at`, as text.
fn updated(ws: &Workspace, op_id: &str) -> String {
    ws.require(op_id).unwrap().triage.updated_at.to_string()
}

#[test]
fn updated_at_moves_on_prepare_dispatch_receipt_and_decision_only() {
    let mut lab = Clocked::new();
    let payload = json!({"to": "ada@example.com"});

    let prepared_at = lab.ws.now().to_string();
    lab.ws.prepare("lost", "send_email", &payload).unwrap();
    let op = lab.ws.require("lost").unwrap();
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
    lab.ws.dispatch("lost", options).unwrap();
    let op = lab.ws.require("lost").unwrap();
    assert_eq!(op.triage.updated_at.to_string(), dispatched_at);
    assert_eq!(op.triage.dispatch_count, 1);
    assert_eq!(
        op.triage.last_dispatched_at.map(|t| t.to_string()),
        Some(dispatched_at.clone())
    );
    assert_eq!(op.triage.created_at.to_string(), prepared_at);

    // Triage leaves it alone: a note, an observation, an escalation.
    lab.tick(10);
    lab.ws.note("lost", "ann", "customer called").unwrap();
    lab.tick(10);
    lab.ws.snapshot_by("lost", None, Some("ann")).unwrap();
    lab.tick(10);
    lab.ws.escalate("lost", "ann", "needs finance").unwrap();
    lab.tick(10);
    lab.ws.deescalate("lost", "ann", "finance is away").unwrap();
    lab.tick(10);
    lab.ws.escalate("lost", "ann", "back again").unwrap();
    assert_eq!(updated(&lab.ws, "lost"), dispatched_at);

    let decided_at = lab.tick(10);
    lab.ws
        .reconcile(&ReconcileRequest {
            op_id: "lost",
            reviewer: "ann",
            decision: Decision::NotApplied,
            expected_version: 2,
            payload: None,
            close_authorized_by: Some("ann"),
        })
        .unwrap();
    assert_eq!(updated(&lab.ws, "lost"), decided_at);
    let evidence = lab.ws.evidence("lost").unwrap();
    assert_eq!(evidence[0].recorded_at.to_string(), decided_at);
    // The dispatch's own stamps stay as they were.
    let op = lab.ws.require("lost").unwrap();
    assert_eq!(op.triage.dispatch_count, 1);
    assert_eq!(
        op.triage.last_dispatched_at.map(|t| t.to_string()),
        Some(dispatched_at)
    );
}

#[test]
fn updated_at_moves_on_the_receipt_after_the_dispatch() {
    let mut lab = Clocked::new();
    lab.ws
        .prepare("paid", "pay", &json!({"amount": 10}))
        .unwrap();
    let dispatched_at = lab.tick(5);
    let mut pending = lab
        .ws
        .start_dispatch(
            "paid",
            DispatchOptions {
                fault: None,
                wait_permit: true,
            },
        )
        .unwrap();
    assert_eq!(updated(&lab.ws, "paid"), dispatched_at);
    let receipt_at = lab.tick(5);
    pending.child.permit().unwrap();
    let report = lab.ws.finish_dispatch(pending).unwrap();
    assert_eq!(report.outcome, "receipt");
    let op = lab.ws.require("paid").unwrap();
    assert_eq!(op.state.as_str(), "confirmed");
    assert_eq!(op.triage.updated_at.to_string(), receipt_at);
    assert_eq!(
        op.triage.last_dispatched_at.map(|t| t.to_string()),
        Some(dispatched_at)
    );
    assert_eq!(op.triage.dispatch_count, 1);
}

#[test]
fn dispatch_count_counts_the_dispatches_of_each_operation() {
    let mut lab = Clocked::new();
    for op in ["one", "two"] {
        lab.ws.prepare(op, "pay", &json!({"op": op})).unwrap();
    }
    lab.ws.dispatch("one", DispatchOptions::default()).unwrap();
    let refused = lab.ws.dispatch("one", DispatchOptions::default());
    assert!(refused.is_err(), "a second dispatch is a blind retry");
    let count = |op: &str| lab.ws.require(op).unwrap().triage.dispatch_count;
    assert_eq!((count("one"), count("two")), (1, 0));
    assert_eq!(lab.ws.dispatch_count("one").unwrap(), 1);
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
