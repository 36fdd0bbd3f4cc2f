//! Claim 2: observations. `recon observe` with and without ids, its
//! `--state` and `--older-than` selections and its JSON; `snapshot --by`;
//! the operation's `latest_observation`; a close and a decision each
//! record one; a decision still reads the receiver afresh.

use super::{time_of, Clocked};
use crate::cli::{assert_json_error, assert_keys, Shell};
use crate::stores::{on_both_stores, Store};
use recon::dispatch::DispatchOptions;
use recon::receiver::Fault;
use recon::workspace::ObserveRequest;
use serde_json::{json, Value};
use std::time::Duration;

const OBSERVED_FIELDS: &[&str] = &[
    "op_id",
    "receiver",
    "verdict",
    "observed_at",
    "observed_by",
    "complete",
    "authoritative",
    "closed",
    "matches",
];

const LATEST_FIELDS: &[&str] = &["verdict", "observed_at", "observed_by", "closed", "matches"];

/// Exactly these keys.
#[track_caller]
fn assert_exact_keys(value: &Value, keys: &[&str]) {
    assert_keys(value, keys);
    assert_eq!(value.as_object().unwrap().len(), keys.len(), "{value}");
}

/// An outbox on `store` with `ops` lost before the receiver wrote (unknown; their
/// verdict inconclusive until closed), made through the binary.
fn lost(store: Store, ops: &[&str]) -> Shell {
    let sh = Shell::on(store);
    for op in ops {
        let payload = format!(r#"{{"to":"{op}@example.com"}}"#);
        sh.prepare(op, "send_email", &payload);
        sh.faulted(&["dispatch", op], Fault::CrashBeforeCommit);
    }
    sh
}

fn observations(sh: &Shell, op: &str) -> Vec<Value> {
    sh.json(&["show", op])["observations"]
        .as_array()
        .unwrap()
        .clone()
}

/// An outbox on `store` with `unknown` operations (`lost` ones, then
/// `charge`, whose receipt was lost after the receiver committed), a
/// `confirmed` one (`welcome`) and a `prepared` one (`later`).
fn mixed(store: Store, lost_ops: &[&str]) -> Shell {
    let sh = lost(store, lost_ops);
    for op in ["charge", "welcome", "later"] {
        sh.ok(&["prepare", "--op", op, "--action", "pay", "--payload", "{}"]);
    }
    sh.faulted(&["dispatch", "charge"], Fault::CrashAfterCommit);
    sh.ok(&["dispatch", "welcome"]);
    sh
}

on_both_stores!(observe_with_ids_records_each_named_operation_in_any_state);
fn observe_with_ids_records_each_named_operation_in_any_state(store: Store) {
    let sh = mixed(store, &[]);
    let named = ["charge", "welcome"];
    let out = sh.json(&["observe", named[0], named[1], "--by", "dana"]);
    let rows = out.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{out:#}");
    for (row, op) in rows.iter().zip(named) {
        assert_exact_keys(row, OBSERVED_FIELDS);
        assert_eq!(
            (row["op_id"].as_str(), row["observed_by"].as_str()),
            (Some(op), Some("dana"))
        );
        let receiver = &sh.json(&["show", op])["operation"]["receiver"];
        assert_eq!(&row["receiver"], receiver);
        time_of(row, "observed_at");
        assert!(row["matches"].is_u64(), "matches is a count: {row}");
        let latest = &sh.json(&["show", op])["operation"]["latest_observation"];
        assert_exact_keys(latest, LATEST_FIELDS);
        for field in LATEST_FIELDS {
            assert_eq!(latest[field], row[field], "{field}");
        }
    }
    // welcome is confirmed: a named operation is observed whatever its state.
    assert_eq!(rows[1]["matches"], 1);
    assert_eq!(rows[1]["verdict"], "exact_match_existence_only");
}

on_both_stores!(observe_without_ids_takes_the_state_it_is_given_default_unknown);
fn observe_without_ids_takes_the_state_it_is_given_default_unknown(store: Store) {
    let sh = mixed(store, &["u1", "u2", "u3"]);
    let ids = |rows: &Value| -> Vec<String> {
        let mut ids: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["op_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    let unknown = sh.json(&["ops", "--state", "unknown"]);
    let observed = sh.json(&["observe", "--by", "dana"]);
    assert!(ids(&unknown).len() > 3);
    assert_eq!(ids(&observed), ids(&unknown));
    let confirmed = sh.json(&["ops", "--state", "confirmed"]);
    let observed = sh.json(&["observe", "--state", "confirmed", "--by", "dana"]);
    assert!(!ids(&confirmed).is_empty());
    assert_eq!(ids(&observed), ids(&confirmed));
    // Every one of them now has its latest observation by dana.
    for op in sh.json(&["ops"]).as_array().unwrap() {
        let latest = &op["latest_observation"];
        match op["state"].as_str().unwrap() {
            "unknown" | "confirmed" => assert_eq!(latest["observed_by"], "dana", "{op}"),
            _ => {}
        }
    }
}

/// `observe` as ann: these ids (or the unknown operations), older than
/// this or never observed.
fn by_ann(op_ids: &[String], older_than: Option<Duration>) -> ObserveRequest<'_> {
    ObserveRequest {
        op_ids,
        state: None,
        older_than,
        by: "ann",
    }
}

on_both_stores!(observe_older_than_takes_the_stale_and_the_never_observed);
fn observe_older_than_takes_the_stale_and_the_never_observed(store: Store) {
    let mut lab = Clocked::on(store);
    for op in ["stale", "fresh", "never"] {
        lab.site.ws.prepare(op, "pay", &json!({"op": op})).unwrap();
        let options = DispatchOptions {
            fault: Some(Fault::CrashBeforeCommit),
            wait_permit: false,
        };
        lab.site.dispatch(op, options).unwrap();
    }
    lab.site.ws.snapshot_by("stale", None, Some("ann")).unwrap();
    lab.tick(2 * 60 * 60);
    lab.site.ws.snapshot_by("fresh", None, Some("ann")).unwrap();
    lab.tick(60);
    let due = lab
        .site
        .ws
        .observe(&by_ann(&[], Some(Duration::from_secs(60 * 60))))
        .unwrap()
        .observed;
    let ids: Vec<&str> = due.iter().map(|o| o.op_id.as_str()).collect();
    assert_eq!(ids, ["never", "stale"]);
    // Named operations go through the same selection.
    let named = ["fresh".to_string(), "stale".to_string()];
    let due = lab
        .site
        .ws
        .observe(&by_ann(&named, Some(Duration::from_secs(30 * 60))))
        .unwrap()
        .observed;
    assert!(due.is_empty(), "both were just observed: {due:?}");
    // A minute on, fresh (observed a minute before stale) is due first.
    let due = lab
        .site
        .ws
        .observe(&by_ann(&named, Some(Duration::from_secs(30))))
        .unwrap()
        .observed;
    let ids: Vec<&str> = due.iter().map(|o| o.op_id.as_str()).collect();
    assert_eq!(ids, ["fresh"]);
}

on_both_stores!(observe_older_than_on_the_command_line_skips_what_was_just_observed);
fn observe_older_than_on_the_command_line_skips_what_was_just_observed(store: Store) {
    let sh = lost(store, &["a", "b"]);
    let first = sh.json(&["observe", "--older-than", "1h", "--by", "dana"]);
    assert_eq!(
        first.as_array().unwrap().len(),
        2,
        "never observed: {first}"
    );
    let again = sh.json(&["observe", "--older-than", "1h", "--by", "dana"]);
    assert_eq!(again, json!([]));
    let text = sh.ok(&["observe", "--older-than", "1h", "--by", "dana"]);
    assert_eq!(text.stdout.trim(), "no operation to observe");
}

on_both_stores!(observe_refuses_an_unknown_id_before_reading_any);
fn observe_refuses_an_unknown_id_before_reading_any(store: Store) {
    let sh = lost(store, &["a"]);
    let before = sh.dump();
    let out = sh.run(&["observe", "a", "nope", "--by", "dana"]);
    crate::cli::assert_refused(&out, "unknown_operation");
    assert_eq!(sh.dump(), before);
}

on_both_stores!(observe_without_by_is_a_usage_error_on_a_workspace_and_the_login_in_team_mode);
fn observe_without_by_is_a_usage_error_on_a_workspace_and_the_login_in_team_mode(store: Store) {
    let sh = lost(store, &["a"]);
    if store == Store::Postgres {
        let observed = sh.json(&["observe", "a"]);
        assert_eq!(observed[0]["observed_by"], "postgres", "{observed}");
        return;
    }
    let before = sh.dump();
    for args in [
        &["observe"][..],
        &["observe", "a"],
        &["observe", "a", "--json"],
    ] {
        let out = sh.run(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("--by"), "{}", out.stderr);
        if args.contains(&"--json") {
            assert_json_error(&out, 2);
        }
    }
    assert_eq!(sh.dump(), before);
}

on_both_stores!(observe_takes_its_flags_after_the_ids);
fn observe_takes_its_flags_after_the_ids(store: Store) {
    let sh = lost(store, &["a", "b"]);
    let out = sh.json(&["observe", "a", "b", "--by", "dana"]);
    assert_eq!(out.as_array().unwrap().len(), 2, "{out}");
    // An id that begins with `-` goes after `--`.
    sh.ok(&["prepare", "--op", "-x", "--action", "a", "--payload", "{}"]);
    let out = sh.run(&["observe", "--by", "dana", "--json", "--", "-x"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()[0]["op_id"], "-x");
}

on_both_stores!(snapshot_by_records_an_observation_and_without_it_none);
fn snapshot_by_records_an_observation_and_without_it_none(store: Store) {
    let sh = lost(store, &["a"]);
    let shown = sh.json(&["snapshot", "a"]);
    assert!(shown.get("observation").is_none(), "{shown}");
    assert!(observations(&sh, "a").is_empty());
    assert_eq!(
        sh.json(&["show", "a"])["operation"]["latest_observation"],
        Value::Null
    );

    let recorded = sh.json(&["snapshot", "a", "--by", "lee"]);
    let observation = &recorded["observation"];
    assert_exact_keys(observation, OBSERVED_FIELDS);
    assert_eq!(observation["observed_by"], "lee");
    assert_eq!(observation["verdict"], recorded["verdict"]);
    let history = observations(&sh, "a");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["observed_by"], "lee");
    assert_eq!(history[0]["snapshot"], recorded["snapshot"]);
    let latest = &sh.json(&["show", "a"])["operation"]["latest_observation"];
    assert_eq!(latest["observed_by"], "lee");
    assert_eq!(latest["matches"], 0);
    // Text output says nothing was recorded by a plain read either.
    sh.ok(&["snapshot", "a"]);
    assert_eq!(observations(&sh, "a").len(), 1);
}

on_both_stores!(a_close_and_a_decision_each_record_an_observation);
fn a_close_and_a_decision_each_record_an_observation(store: Store) {
    let sh = lost(store, &["closed", "decided"]);
    sh.ok(&["snapshot", "closed", "--close", "--authorized-by", "rosa"]);
    let seen = observations(&sh, "closed");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0]["observed_by"].as_str(), seen[0]["closed"].as_bool()),
        (Some("rosa"), Some(true))
    );
    let closes = sh.json(&["show", "closed"])["closes"].clone();
    assert_eq!(closes.as_array().unwrap().len(), 1);
    assert_keys(&closes[0], &["closed_at", "authorized_by", "receiver"]);
    assert_eq!(closes[0]["authorized_by"], "rosa");

    // A decision on the closed operation records its own read.
    let reconcile = |op| {
        vec![
            "reconcile",
            op,
            "--reviewer",
            "sam",
            "--decision",
            "not_applied",
            "--expected-version",
            "2",
        ]
    };
    sh.ok(&reconcile("closed"));
    let seen = observations(&sh, "closed");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[1]["observed_by"].as_str(), seen[1]["verdict"].as_str()),
        (Some("sam"), Some("terminal_absence"))
    );

    // A decision closing its own read records it once, as the close's.
    let mut closing = reconcile("decided");
    closing.extend(["--close", "--authorized-by", "sam"]);
    sh.ok(&closing);
    let seen = observations(&sh, "decided");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["closed"], true);
    let latest = &sh.json(&["show", "decided"])["operation"]["latest_observation"];
    assert_eq!(latest["observed_by"], "sam");
}

on_both_stores!(a_decision_follows_a_fresh_read_not_the_stored_observation);
fn a_decision_follows_a_fresh_read_not_the_stored_observation(store: Store) {
    let sh = lost(store, &["late"]);
    let stored = sh.json(&["observe", "late", "--by", "dana"]);
    assert_eq!(stored[0]["verdict"], "inconclusive");
    // The original lands late: the receiver changed after the observation.
    let apply = |op| {
        let payload = format!(r#"{{"to":"{op}@example.com"}}"#);
        sh.effect_behind(op, "send_email", &payload);
    };
    apply("late");
    let latest = |op| sh.json(&["show", op])["operation"]["latest_observation"].clone();
    assert_eq!(latest("late")["verdict"], "inconclusive");
    let args = |op, decision| {
        vec![
            "reconcile",
            op,
            "--reviewer",
            "sam",
            "--decision",
            decision,
            "--expected-version",
            "2",
        ]
    };
    // The stored read would not support confirmed; the fresh one does.
    let decided = sh.json(&args("late", "confirmed"));
    assert_eq!(
        (decided["verdict"].as_str(), decided["state"].as_str()),
        (Some("exact_match_existence_only"), Some("confirmed"))
    );
    assert_eq!(
        (
            latest("late")["verdict"].as_str(),
            latest("late")["matches"].as_i64()
        ),
        (Some("exact_match_existence_only"), Some(1))
    );

    // The other way round: one match observed, a duplicate lands after.
    sh.prepare("twice", "send_email", r#"{"to":"twice@example.com"}"#);
    sh.faulted(&["dispatch", "twice"], Fault::CrashAfterCommit);
    let stored = sh.json(&["observe", "twice", "--by", "dana"]);
    assert_eq!(stored[0]["verdict"], "exact_match_existence_only");
    apply("twice");
    let out = sh.run(&args("twice", "confirmed"));
    crate::cli::assert_refused(&out, "unsupported_verdict");
    assert!(out.stderr.contains("duplicate_matches"), "{}", out.stderr);
    assert_eq!(sh.json(&["show", "twice"])["operation"]["state"], "unknown");
}

on_both_stores!(observe_goes_on_past_an_operation_it_cannot_read_and_reports_each);
fn observe_goes_on_past_an_operation_it_cannot_read_and_reports_each(store: Store) {
    let sh = lost(store, &["a1", "z9"]);
    let mode = sh.ws.with_file_name("flaky.mode");
    let state = sh.ws.with_file_name("flaky.state");
    std::fs::write(&mode, "apply:crash-before").unwrap();
    let adapter = crate::support::adapter_fixture();
    let (adapter, mode_arg, state_arg) = (
        adapter.to_str().unwrap(),
        mode.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    sh.ok(&[
        "receivers",
        "add",
        "flaky",
        "--actions",
        "fax",
        "--",
        adapter,
        "--state",
        state_arg,
        "--mode-file",
        mode_arg,
    ]);
    sh.prepare("m5", "fax", "{}");
    assert_eq!(sh.json(&["dispatch", "m5"])["outcome"], "unknown");
    // Its receiver now dies on a query, shouting escapes on stderr: m5
    // (between a1 and z9 by op id) is not read, the two others are.
    std::fs::write(&mode, "query:stderr-escape").unwrap();
    let out = sh.run(&["observe", "--by", "dana", "--json"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    let rows = out.json();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["op_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a1", "z9"], "{rows}");
    for row in rows.as_array().unwrap() {
        assert_exact_keys(row, OBSERVED_FIELDS);
    }
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
    let unread: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        (&unread["op_id"], &unread["receiver"]),
        (&json!("m5"), &json!("flaky"))
    );
    assert_eq!(
        (&unread["error"]["exit"], &unread["error"]["kind"]),
        (&json!(4), &json!("storage"))
    );
    let message = unread["error"]["message"].as_str().unwrap();
    assert!(message.contains("receiver flaky: crash"), "{message}");
    assert!(message.contains(r"\x1b[2J"), "{message}");
    for (op, seen) in [("a1", 1), ("m5", 0), ("z9", 1)] {
        assert_eq!(observations(&sh, op).len(), seen, "{op}");
    }

    // In words: each observation, the count, and a line on stderr.
    let out = sh.run(&["observe", "--by", "dana"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stdout.starts_with("a1: ") && out.stdout.contains("\nz9: "));
    let summary = out.stdout.lines().last().unwrap();
    assert!(
        summary.starts_with("observed 2 operations as dana at ")
            && summary.ends_with("; 1 operation could not be read (stderr says why)"),
        "{summary}"
    );
    let line = out.stderr.trim_end();
    assert!(
        line.starts_with("error: m5 (receiver flaky) was not observed: receiver flaky: crash"),
        "{line}"
    );
    assert!(
        line.contains(r"\x1b[2J") && !line.contains('\u{1b}'),
        "{line}"
    );
    assert_eq!(observations(&sh, "m5").len(), 0);
    assert_eq!(observations(&sh, "z9").len(), 2);
}

on_both_stores!(observe_reads_an_operation_named_twice_once_in_first_named_order);
fn observe_reads_an_operation_named_twice_once_in_first_named_order(store: Store) {
    let sh = lost(store, &["op-a", "op-b"]);
    let out = sh.json(&["observe", "op-b", "op-a", "op-b", "op-b", "--by", "dana"]);
    let ids: Vec<&str> = (out.as_array().unwrap().iter())
        .map(|row| row["op_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["op-b", "op-a"], "{out:#}");
    assert_eq!(observations(&sh, "op-b").len(), 1);
    assert_eq!(observations(&sh, "op-a").len(), 1);
}

on_both_stores!(an_observe_batch_mixing_plain_and_decided_reads_keeps_its_order_and_verifies);
/// On PostgreSQL a batch's plain reads are written as sets between the
/// reads written one by one (a decided operation's): the batch is
/// recorded in its order on both stores, an operation read before keeps
/// the batch's read as its latest, and `verify` finds the journal's chain
/// and every projection sound.
fn an_observe_batch_mixing_plain_and_decided_reads_keeps_its_order_and_verifies(store: Store) {
    let sh = mixed(store, &["u1", "u2"]);
    sh.ok(&["observe", "u1", "--by", "ann"]);
    let named = ["u1", "welcome", "u2", "charge"];
    let rows = sh.json(&["observe", "u1", "welcome", "u2", "charge", "--by", "dana"]);
    let observed: Vec<&str> = (rows.as_array().unwrap().iter())
        .map(|row| row["op_id"].as_str().unwrap())
        .collect();
    assert_eq!(observed, named, "{rows:#}");
    assert_eq!(observations(&sh, "u1").len(), 2, "u1 was read twice");
    for (row, op) in rows.as_array().unwrap().iter().zip(named) {
        let latest = &sh.json(&["show", op])["operation"]["latest_observation"];
        assert_eq!(latest["observed_by"], "dana", "{op}: {latest}");
        assert_eq!(latest["observed_at"], row["observed_at"], "{op}");
    }
    let report = sh.json(&["verify"]);
    assert_eq!(report["intact"], true, "{report:#}");
    assert_eq!(report["projection_mismatches"], json!([]), "{report:#}");
    assert_eq!(report["state_mismatches"], json!([]), "{report:#}");
}
