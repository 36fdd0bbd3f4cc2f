//! Sessions and batches (SPEC 8, "Sessions and batches"): a receiver that
//! declares `"session": true` is started once per command and answers
//! request after request; one that declares `"batch": N` is asked about up
//! to N operations in one query. Each failure of a request in flight fails
//! it exactly as a one-shot call fails (the same kind, the same failed-call
//! record), and the next request starts a fresh process and succeeds.

use super::{Rig, FULL};
use crate::stores::{on_both_stores, Store};
use serde_json::{json, Value};

const OPS: [&str; 3] = ["op-1", "op-2", "op-3"];

/// A rig with `mail` registered with `flags` besides the full contract,
/// and three letters dispatched through it (each apply a process of its
/// own, sessions or not).
fn rig_with(store: Store, flags: &[&str]) -> Rig {
    let rig = Rig::on(store);
    let mut all = FULL.to_vec();
    all.extend(flags);
    rig.register("mail", "post_letter", &[], &all);
    for op in OPS {
        rig.prepare(op, "post_letter", r#"{"to":"ada"}"#);
        assert_eq!(rig.dispatch(op)["outcome"], json!("receipt"));
    }
    rig
}

/// The processes the fixture started as sessions.
fn sessions(rig: &Rig) -> usize {
    rig.log("mail")
        .iter()
        .filter(|e| e["event"] == json!("session"))
        .count()
}

/// `recon observe` of the three operations: which were observed (the
/// report on stdout; the unread are told on stderr), and the failed calls
/// kept with op-2.
fn observe_all(rig: &Rig) -> (Vec<String>, Value) {
    let mut args = vec!["observe"];
    args.extend(OPS);
    args.extend(["--by", "dana", "--json"]);
    let out = rig.recon(&args);
    let report: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    let observed = report
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["op_id"].as_str().map(str::to_string))
        .collect();
    (observed, rig.show("op-2")["failures"].clone())
}

/// The failed call kept with op-2 when its query misbehaves as `mode`,
/// one-shot or in a session; with the session, op-1 and op-3 are observed
/// all the same, op-3 by a second process.
fn failure_in_session(store: Store, mode: &str) -> (Value, Value) {
    let one_shot = rig_with(store, &[]);
    one_shot.set_mode("mail", &format!("query:{mode}@op-2"));
    let (observed, alone) = observe_all(&one_shot);
    assert_eq!(observed, ["op-1", "op-3"], "one-shot {mode}");
    let rig = rig_with(store, &["--session"]);
    rig.set_mode("mail", &format!("query:{mode}@op-2"));
    let (observed, in_session) = observe_all(&rig);
    assert_eq!(
        observed,
        ["op-1", "op-3"],
        "{mode}: the next request succeeds"
    );
    assert_eq!(
        sessions(&rig),
        2,
        "{mode}: the next request starts a fresh process"
    );
    (alone, in_session)
}

/// The parts of a failed-call record a one-shot call and a session share.
fn kept(failures: &Value) -> Value {
    let failure = &failures[0];
    assert_eq!(failures.as_array().map(Vec::len), Some(1), "{failures}");
    json!([failure["verb"], failure["kind"], failure["receiver"]])
}

on_both_stores!(
    a_crash_in_a_session_fails_the_request_in_flight_as_a_one_shot_crash_and_the_next_succeeds
);
fn a_crash_in_a_session_fails_the_request_in_flight_as_a_one_shot_crash_and_the_next_succeeds(
    store: Store,
) {
    let (alone, in_session) = failure_in_session(store, "crash-now");
    assert_eq!(kept(&in_session), kept(&alone));
    assert_eq!(in_session[0]["kind"], json!("crash"));
    assert_eq!(in_session[0]["exit_code"], alone[0]["exit_code"]);
    assert_eq!(in_session[0]["detail"], alone[0]["detail"]);
}

on_both_stores!(
    garbage_in_a_session_fails_the_request_in_flight_as_one_shot_garbage_and_the_next_succeeds
);
fn garbage_in_a_session_fails_the_request_in_flight_as_one_shot_garbage_and_the_next_succeeds(
    store: Store,
) {
    let (alone, in_session) = failure_in_session(store, "garbage");
    assert_eq!(kept(&in_session), kept(&alone));
    assert_eq!(in_session[0]["kind"], json!("garbage"));
}

on_both_stores!(
    a_timeout_in_a_session_fails_the_request_in_flight_as_a_one_shot_timeout_and_the_next_succeeds
);
fn a_timeout_in_a_session_fails_the_request_in_flight_as_a_one_shot_timeout_and_the_next_succeeds(
    store: Store,
) {
    let one_shot = rig_with(store, &[]);
    let rig = rig_with(store, &["--session"]);
    for rig in [&one_shot, &rig] {
        rig.ok(&["receivers", "update", "mail", "--timeout-ms", "1500"]);
    }
    let (alone, in_session) = failure_in_session_of(&one_shot, &rig, "hang");
    assert_eq!(kept(&in_session), kept(&alone));
    assert_eq!(in_session[0]["kind"], json!("timeout"));
    assert_eq!(in_session[0]["exit_code"], Value::Null);
}

/// [`failure_in_session`] on rigs already made.
fn failure_in_session_of(one_shot: &Rig, rig: &Rig, mode: &str) -> (Value, Value) {
    one_shot.set_mode("mail", &format!("query:{mode}@op-2"));
    let (observed, alone) = observe_all(one_shot);
    assert_eq!(observed, ["op-1", "op-3"], "one-shot {mode}");
    rig.set_mode("mail", &format!("query:{mode}@op-2"));
    let (observed, in_session) = observe_all(rig);
    assert_eq!(
        observed,
        ["op-1", "op-3"],
        "{mode}: the next request succeeds"
    );
    assert_eq!(sessions(rig), 2, "{mode}: a fresh process");
    (alone, in_session)
}

on_both_stores!(
    two_lines_in_a_session_fail_the_request_in_flight_as_extra_output_and_the_next_succeeds
);
/// Two lines for op-1's request: in a session the second is read as the
/// answer to the request after it, op-2's, whose id it does not carry, so
/// op-2 fails as `extra_output` (as a one-shot call that wrote two lines
/// does) and op-3 succeeds through a fresh process.
fn two_lines_in_a_session_fail_the_request_in_flight_as_extra_output_and_the_next_succeeds(
    store: Store,
) {
    let rig = rig_with(store, &["--session"]);
    rig.set_mode("mail", "query:two-lines@op-1");
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, ["op-1", "op-3"]);
    assert_eq!(failures[0]["kind"], json!("extra_output"), "{failures}");
    assert_eq!(sessions(&rig), 2);
}

on_both_stores!(
    an_answer_with_an_earlier_id_fails_the_request_in_flight_as_extra_output_and_the_next_succeeds
);
fn an_answer_with_an_earlier_id_fails_the_request_in_flight_as_extra_output_and_the_next_succeeds(
    store: Store,
) {
    let rig = rig_with(store, &["--session"]);
    rig.set_mode("mail", "query:earlier-id@op-2");
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, ["op-1", "op-3"]);
    assert_eq!(failures[0]["kind"], json!("extra_output"), "{failures}");
    assert_eq!(sessions(&rig), 2);
}

on_both_stores!(
    an_answer_with_another_id_fails_the_request_in_flight_as_extra_output_and_the_next_succeeds
);
fn an_answer_with_another_id_fails_the_request_in_flight_as_extra_output_and_the_next_succeeds(
    store: Store,
) {
    let rig = rig_with(store, &["--session"]);
    rig.set_mode("mail", "query:wrong-id@op-2");
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, ["op-1", "op-3"]);
    assert_eq!(failures[0]["kind"], json!("extra_output"), "{failures}");
    assert_eq!(sessions(&rig), 2);
}

on_both_stores!(
    a_wrong_op_in_a_session_answer_fails_the_request_in_flight_as_one_shot_and_the_next_succeeds
);
/// An answer naming another operation's effects is unusable for the
/// request in flight alone, as it is one-shot; the process answered in
/// step, so it goes on serving the next request.
fn a_wrong_op_in_a_session_answer_fails_the_request_in_flight_as_one_shot_and_the_next_succeeds(
    store: Store,
) {
    let unread = |rig: &Rig| {
        rig.set_mode("mail", "query:other-ops@op-2");
        let mut args = vec!["observe"];
        args.extend(OPS);
        args.extend(["--by", "dana", "--json"]);
        let out = rig.recon(&args);
        let report: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
        (report.as_array().map(Vec::len), out.stderr)
    };
    let (alone, in_session) = (
        unread(&rig_with(store, &[])),
        unread(&rig_with(store, &["--session"])),
    );
    assert_eq!(in_session, alone);
    assert_eq!(in_session.0, Some(2), "{:?}", in_session.1);
    let rig = rig_with(store, &["--session"]);
    unread(&rig);
    assert_eq!(sessions(&rig), 1);
}

on_both_stores!(one_session_process_serves_every_read_of_a_command_and_ends_with_it);
fn one_session_process_serves_every_read_of_a_command_and_ends_with_it(store: Store) {
    let rig = rig_with(store, &["--session"]);
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, OPS);
    assert_eq!(failures, json!([]));
    assert_eq!(sessions(&rig), 1);
    assert_eq!(rig.calls("mail", "query").len(), OPS.len());
    // The command closed its stdin and waited for it before exiting.
    let ends = rig
        .log("mail")
        .iter()
        .filter(|e| e["event"] == json!("session-end"))
        .count();
    assert_eq!(ends, 1);
    // Each request named its verb and an id of its own.
    let ids: Vec<Value> = rig
        .calls("mail", "query")
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(2), json!(3)]);
}

on_both_stores!(without_session_each_read_is_a_process_of_its_own);
fn without_session_each_read_is_a_process_of_its_own(store: Store) {
    let rig = rig_with(store, &[]);
    let (observed, _) = observe_all(&rig);
    assert_eq!(observed, OPS);
    assert_eq!(sessions(&rig), 0);
    assert_eq!(rig.calls("mail", "query").len(), OPS.len());
}

/// The query requests the fixture received: how many, and the op ids of
/// each batch among them.
fn batches(rig: &Rig) -> Vec<Value> {
    rig.calls("mail", "query")
        .iter()
        .map(|c| {
            c.get("op_ids")
                .cloned()
                .unwrap_or_else(|| json!([c["op_id"]]))
        })
        .collect()
}

on_both_stores!(a_receiver_declaring_batch_is_read_up_to_n_operations_per_query_each_judged_alone);
fn a_receiver_declaring_batch_is_read_up_to_n_operations_per_query_each_judged_alone(store: Store) {
    let rig = rig_with(store, &["--session", "--batch", "2"]);
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, OPS);
    assert_eq!(failures, json!([]));
    assert_eq!(batches(&rig), [json!(["op-1", "op-2"]), json!(["op-3"])]);
    // Each observation rests on its own result, hashed as a single answer.
    let single = rig_with(store, &[]);
    observe_all(&single);
    let shas = |rig: &Rig| rig.show("op-2")["observations"][0]["response_sha256"].clone();
    assert_eq!(shas(&rig), shas(&single));
}

on_both_stores!(a_batch_without_sessions_is_one_process_per_batch);
fn a_batch_without_sessions_is_one_process_per_batch(store: Store) {
    let rig = rig_with(store, &["--batch", "3"]);
    let (observed, _) = observe_all(&rig);
    assert_eq!(observed, OPS);
    assert_eq!(batches(&rig), [json!(OPS)]);
}

on_both_stores!(a_batch_answer_with_a_wrong_count_fails_every_operation_of_it_as_mismatch);
fn a_batch_answer_with_a_wrong_count_fails_every_operation_of_it_as_mismatch(store: Store) {
    let rig = rig_with(store, &["--session", "--batch", "3"]);
    rig.set_mode("mail", "query:batch-short");
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, Vec::<String>::new());
    assert_eq!(failures[0]["kind"], json!("mismatch"), "{failures}");
}

on_both_stores!(a_batch_answer_out_of_order_fails_every_operation_of_it_as_mismatch);
fn a_batch_answer_out_of_order_fails_every_operation_of_it_as_mismatch(store: Store) {
    let rig = rig_with(store, &["--batch", "3"]);
    rig.set_mode("mail", "query:batch-reversed");
    let (observed, failures) = observe_all(&rig);
    assert_eq!(observed, Vec::<String>::new());
    assert_eq!(failures[0]["kind"], json!("mismatch"), "{failures}");
}

/// `recon receiver adapter --workspace WS session` answering `requests`
/// (each given its verb and id) until stdin ends.
fn builtin_session(rig: &Rig, requests: &[(&str, Value)]) -> Vec<Value> {
    let mut lines = String::new();
    for (id, (verb, request)) in requests.iter().enumerate() {
        let mut line = request.clone();
        line["verb"] = json!(verb);
        line["id"] = json!(id + 1);
        lines.push_str(&format!("{line}\n"));
    }
    let ws = rig.ws();
    let args = ["receiver", "adapter", "--workspace", ws.as_str(), "session"];
    let out = crate::support::run_with_env(&args, Some(lines.as_bytes()), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON answer a line"))
        .collect()
}

// SQLite only: it drives the built-in ledger's own adapter.
#[test]
fn the_builtin_adapter_serves_a_session_and_answers_a_batch_one_result_per_op_in_order() {
    let rig = Rig::with_ledger();
    for op in ["op-1", "op-2"] {
        rig.prepare(op, "post_letter", r#"{"to":"ada"}"#);
        assert_eq!(rig.dispatch(op)["outcome"], json!("receipt"));
    }
    let workspace = rig.json(&["verify", "--json"])["workspace"].clone();
    let one = |fields: Value| {
        let mut request = json!({"recon_adapter": 1, "workspace": workspace});
        if let (Some(request), Some(fields)) = (request.as_object_mut(), fields.as_object()) {
            request.extend(fields.clone());
        }
        request
    };
    let answers = builtin_session(
        &rig,
        &[
            ("describe", json!({"recon_adapter": 1})),
            ("query", one(json!({"op_ids": ["op-2", "op-9", "op-1"]}))),
            (
                "close",
                one(json!({"op_id": "op-1", "authorized_by": "ann"})),
            ),
            ("query", one(json!({"op_id": "op-1"}))),
        ],
    );
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3), &json!(4)]);
    assert_eq!(
        (&answers[0]["session"], answers[0]["batch"].is_u64()),
        (&json!(true), true)
    );
    let results = answers[1]["results"].as_array().expect("results");
    let matched: Vec<Value> = results
        .iter()
        .map(|r| r["matches"][0]["op_id"].clone())
        .collect();
    assert_eq!(matched, [json!("op-2"), Value::Null, json!("op-1")]);
    assert_eq!(
        (&answers[2]["closed"], &answers[3]["closed"]),
        (&json!(true), &json!(true))
    );
}

on_both_stores!(a_session_process_runs_in_the_root_directory_without_recon_s_environment);
fn a_session_process_runs_in_the_root_directory_without_recon_s_environment(store: Store) {
    let rig = rig_with(store, &["--session"]);
    let observe = ["observe", "op-1", "--by", "dana"];
    let out = rig.recon_env(&observe, &[("RECON_SECRET_TOKEN", "s3cret")]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let started: Vec<Value> = rig
        .log("mail")
        .into_iter()
        .filter(|e| e["event"] == json!("session"))
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["cwd"], json!("/"));
    let names: Vec<&str> = started[0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    // (The fixture's `python3` may be a shim that sets variables of its
    // own; none of recon's environment beyond the allowlist gets through.)
    assert!(!names.contains(&"RECON_SECRET_TOKEN"), "{names:?}");
    assert!(names.contains(&"PATH"), "{names:?}");
}

on_both_stores!(verify_receivers_reads_every_decision_through_one_session_in_batches);
fn verify_receivers_reads_every_decision_through_one_session_in_batches(store: Store) {
    let rig = rig_with(store, &["--session", "--batch", "2"]);
    let out = rig.recon(&["verify", "--receivers", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["checked"], json!(3), "{}", out.stdout);
    assert_eq!(batches(&rig), [json!(["op-1", "op-2"]), json!(["op-3"])]);
    assert_eq!(sessions(&rig), 1);
}
