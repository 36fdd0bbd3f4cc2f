//! `recon resolve --policy provable` on both stores: the provable verdicts
//! decided under a closing snapshot, every other verdict left and counted,
//! the guards (age, escalation, a receiver that cannot close, a plan's
//! versions), a dry run that writes nothing, the JSON, the usage errors,
//! and the policy named by `show`, `export` and `verify`.

use crate::cli::{assert_json_error, Shell};
use crate::stores::{on_both_stores, Store};
use crate::support::adapter_fixture;
use recon::receiver::Fault;
use serde_json::{json, Value};
use std::path::Path;

/// Registers the fixture adapter as `name` for `action`, keeping its files
/// in `dir`, with `flags` (`--can-close`, `--complete`, ...).
fn adapter(sh: &Shell, dir: &Path, name: &str, action: &str, flags: &[&str]) {
    let state = dir.join(format!("{name}.json")).display().to_string();
    let mode = dir.join(format!("{name}.mode")).display().to_string();
    let program = adapter_fixture().display().to_string();
    let mut args = vec![
        "receivers",
        "add",
        name,
        "--actions",
        action,
        "--",
        &program,
        "--state",
        &state,
        "--mode-file",
        &mode,
    ];
    args.extend(flags);
    sh.ok(&args);
}

/// Prepares `op` and dispatches it to the adapter `name`, whose receipt is
/// lost before it writes anything.
fn lost_at_adapter(sh: &Shell, dir: &Path, name: &str, op: &str, action: &str) {
    sh.prepare(op, action, r#"{"n":1}"#);
    let mode = dir.join(format!("{name}.mode"));
    std::fs::write(&mode, "apply:crash-before").unwrap();
    sh.ok(&["dispatch", op]);
    std::fs::write(&mode, "").unwrap();
}

/// An outbox after an outage, on `store`:
/// - `a`: applied, its receipt lost (the close will show unique_exact_match);
/// - `b`: never applied (terminal_absence once closed);
/// - `e`: never applied, but escalated;
/// - `n`: at `noclose`, a receiver that cannot close;
/// - `w`: at `weak`, which can close but is neither complete nor
///   authoritative (inconclusive even closed).
fn outage(store: Store, dir: &Path) -> Shell {
    let sh = Shell::on(store);
    adapter(&sh, dir, "weak", "post", &["--can-close"]);
    adapter(
        &sh,
        dir,
        "noclose",
        "fax",
        &["--no-close", "--complete", "--authoritative"],
    );
    for (op, fault) in [
        ("a", Fault::CrashAfterCommit),
        ("b", Fault::CrashBeforeCommit),
        ("e", Fault::CrashBeforeCommit),
    ] {
        sh.prepare(op, "pay", r#"{"n":1}"#);
        sh.faulted(&["dispatch", op], fault);
    }
    sh.ok(&[
        "escalate",
        "e",
        "--by",
        "ann",
        "--reason",
        "customer called",
    ]);
    lost_at_adapter(&sh, dir, "noclose", "n", "fax");
    lost_at_adapter(&sh, dir, "weak", "w", "post");
    sh
}

fn resolve<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "resolve",
        "--policy",
        "provable",
        "--by",
        "robot",
        "--authorized-by",
        "ann",
    ];
    args.extend(extra);
    args
}

on_both_stores!(provable_verdicts_are_resolved_and_every_other_is_left_or_skipped_and_counted);
fn provable_verdicts_are_resolved_and_every_other_is_left_or_skipped_and_counted(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let report = sh.json(&resolve(&["--older-than", "0s"]));
    assert_eq!(
        report,
        json!({
            "confirmed": 1,
            "not_applied": 1,
            "left": {"inconclusive": 1},
            "skipped": {"escalated": 1, "cannot_close": 1},
            "failed": 0,
            "operations": [
                {"op_id": "a", "outcome": "confirmed", "verdict": "unique_exact_match"},
                {"op_id": "b", "outcome": "not_applied", "verdict": "terminal_absence"},
                {"op_id": "e", "outcome": "escalated", "verdict": null},
                {"op_id": "n", "outcome": "cannot_close", "verdict": null},
                {"op_id": "w", "outcome": "left", "verdict": "inconclusive"},
            ],
        })
    );
    let state = |op| sh.json(&["show", op])["operation"]["state"].clone();
    assert_eq!(
        (state("a"), state("b")),
        (json!("confirmed"), json!("not_applied"))
    );
    for op in ["e", "n", "w"] {
        assert_eq!(state(op), json!("unknown"), "{op}");
    }
    // Only what was decided was closed: the inconclusive read was not.
    assert_eq!(sh.json(&["show", "w"])["closes"], json!([]));
    let verify = sh.json(&["verify"]);
    assert_eq!(verify["intact"], true, "{verify}");
}

on_both_stores!(young_and_escalated_operations_are_skipped);
fn young_and_escalated_operations_are_skipped(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let before = sh.dump();
    // The default --older-than is 15m: everything here changed just now.
    let report = sh.json(&resolve(&[]));
    assert_eq!(report["skipped"], json!({"too_young": 4, "escalated": 1}));
    assert_eq!(
        (report["confirmed"].clone(), report["not_applied"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(
        before,
        sh.dump(),
        "a run that skips everything writes nothing"
    );
}

on_both_stores!(a_dry_run_closes_nothing_records_nothing_and_writes_its_plan);
fn a_dry_run_closes_nothing_records_nothing_and_writes_its_plan(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let plan = dir.path().join("plan.json");
    let plan_arg = plan.display().to_string();
    let before = sh.dump();
    let report = sh.json(&resolve(&[
        "--older-than",
        "0s",
        "--dry-run",
        "--output",
        &plan_arg,
    ]));
    assert_eq!(
        before,
        sh.dump(),
        "a dry run writes nothing, to the outbox or the receivers"
    );
    assert_eq!(
        (report["confirmed"].clone(), report["not_applied"].clone()),
        (json!(1), json!(1))
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(written["policy"], "provable");
    let listed: Vec<(&str, i64)> = written["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            (
                op["op_id"].as_str().unwrap(),
                op["version"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, [("a", 2), ("b", 2)]);
    // A plan is never replaced: the same output again is a usage error.
    let again = sh.run(&resolve(&["--dry-run", "--output", &plan_arg, "--json"]));
    assert_json_error(&again, 2);
    assert!(again.stderr.contains("exists"), "{}", again.stderr);
}

on_both_stores!(a_plan_closes_only_the_operations_still_at_their_planned_version);
fn a_plan_closes_only_the_operations_still_at_their_planned_version(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let plan = dir.path().join("plan.json").display().to_string();
    sh.ok(&resolve(&[
        "--older-than",
        "0s",
        "--dry-run",
        "--output",
        &plan,
    ]));
    // A person decides `b` meanwhile: its version moves past the plan's.
    sh.closed_not_applied("b", "2", "cy");
    let report = sh.json(&resolve(&["--older-than", "0s", "--plan", &plan]));
    assert_eq!(report["confirmed"], 1, "{report}");
    assert_eq!(report["skipped"], json!({"version_changed": 1}), "{report}");
    assert_eq!(
        report["operations"],
        json!([
            {"op_id": "a", "outcome": "confirmed", "verdict": "unique_exact_match"},
            {"op_id": "b", "outcome": "version_changed", "verdict": null},
        ])
    );
    // Nothing outside the plan was closed.
    for op in ["e", "n", "w"] {
        assert_eq!(sh.json(&["show", op])["closes"], json!([]), "{op}");
    }
}

on_both_stores!(a_plan_made_before_its_receivers_update_skips_its_operations_as_receiver_changed);
/// Issue 29, reproduction 8 (SPEC 12): a plan names the registration (id
/// and version) each operation's receiver had when it was made; after a
/// `receivers update` the run passes those operations over as
/// `receiver_changed` and asks the receiver nothing.
fn a_plan_made_before_its_receivers_update_skips_its_operations_as_receiver_changed(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = Shell::on(store);
    adapter(
        &sh,
        dir.path(),
        "mail",
        "post",
        &["--can-close", "--complete", "--authoritative"],
    );
    for op in ["m1", "m2"] {
        lost_at_adapter(&sh, dir.path(), "mail", op, "post");
    }
    let plan = dir.path().join("plan.json").display().to_string();
    sh.ok(&resolve(&[
        "--older-than",
        "0s",
        "--dry-run",
        "--output",
        &plan,
    ]));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(written["operations"][0]["receiver_version"], 1, "{written}");
    sh.ok(&["receivers", "update", "mail", "--timeout-ms", "9000"]);
    let report = sh.json(&resolve(&["--older-than", "0s", "--plan", &plan]));
    assert_eq!(
        report["skipped"],
        json!({"receiver_changed": 2}),
        "{report}"
    );
    for op in ["m1", "m2"] {
        let shown = sh.json(&["show", op]);
        assert_eq!(shown["closes"], json!([]), "{op}: {shown}");
        assert_eq!(shown["operation"]["state"], "unknown", "{op}");
    }
}

on_both_stores!(show_and_export_name_the_policy_and_its_runner);
fn show_and_export_name_the_policy_and_its_runner(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    sh.ok(&resolve(&["--older-than", "0s", "a"]));
    let shown = sh.json(&["show", "a"]);
    let evidence = &shown["evidence"][0];
    assert_eq!(
        (
            &evidence["source"],
            &evidence["policy"],
            &evidence["reviewer"]
        ),
        (&json!("policy"), &json!("provable"), &json!("robot"))
    );
    assert_eq!(evidence["snapshot"]["closed"], true);
    let text = sh.ok(&["show", "a"]).stdout;
    // In team mode the role the entry records stands beside the name.
    let by = match store {
        Store::Sqlite => "robot",
        Store::Postgres => "robot (role postgres)",
    };
    assert!(
        text.contains(&format!("policy provable by {by} -> confirmed")),
        "{text}"
    );
    let export = sh.ok(&["export"]).stdout;
    let decided: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "decided")
        .collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(
        (&decided[0]["source"], &decided[0]["policy"]),
        (&json!("policy"), &json!("provable"))
    );
}

on_both_stores!(resolve_usage_errors_exit_2_with_a_json_error);
fn resolve_usage_errors_exit_2_with_a_json_error(store: Store) {
    let sh = Shell::on(store);
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "resolve",
                "--policy",
                "other",
                "--by",
                "r",
                "--authorized-by",
                "a",
            ],
            "provable",
        ),
        (
            &["resolve", "--by", "r", "--authorized-by", "a"],
            "--policy",
        ),
        (
            &["resolve", "--policy", "provable", "--by", "r"],
            "--authorized-by",
        ),
        (
            &["resolve", "--policy", "provable", "--authorized-by", "a"],
            "--by",
        ),
        (
            &[
                "resolve",
                "--policy",
                "provable",
                "--by",
                "r",
                "--authorized-by",
                "a",
                "x",
                "--receiver",
                "m",
            ],
            "not both",
        ),
    ];
    let before = sh.dump();
    for (args, says) in cases {
        // In team mode a name left out is the database login's.
        if store == Store::Postgres && ["--by", "--authorized-by"].contains(&says) {
            continue;
        }
        let out = sh.run(&[args, &["--json"]].concat());
        assert_json_error(&out, 2);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    assert_eq!(before, sh.dump());
}

/// A policy decision whose closing snapshot is made to look not closed
/// (its entry rewritten and the chain recomputed, its evidence row to
/// match, as an attacker who knows the format would) is found by
/// `verify`: the policy would not have decided on that snapshot. SQLite
/// only: the attacker's tools edit the file.
#[test]
fn verify_fails_on_a_policy_decision_that_rests_on_no_closed_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(Store::Sqlite, dir.path());
    sh.ok(&resolve(&["--older-than", "0s", "a"]));
    assert_eq!(sh.json(&["verify"])["intact"], true);
    let seq = sh.json(&["show", "a"])["evidence"][0]["journal_seq"]
        .as_i64()
        .unwrap();
    crate::audit::rewrite_entry(&sh.ws, seq, |entry| {
        entry["snapshot"]["closed"] = json!(false);
    });
    crate::audit::tamper(
        &sh.ws,
        "UPDATE evidence SET snapshot = replace(snapshot, '\"closed\":true', '\"closed\":false')",
    );
    let out = sh.run(&["verify", "--json"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let report = out.json();
    let mismatches = report["projection_mismatches"].as_array().unwrap();
    assert!(
        mismatches
            .iter()
            .any(|m| m["op_id"] == "a" && m["field"] == "policy"),
        "{report:#}"
    );
}

on_both_stores!(a_receiver_that_batches_and_keeps_a_session_is_read_and_closed_in_batches);
fn a_receiver_that_batches_and_keeps_a_session_is_read_and_closed_in_batches(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = Shell::on(store);
    let log = dir.path().join("ship.log").display().to_string();
    let flags = [
        "--can-close",
        "--complete",
        "--authoritative",
        "--batch",
        "10",
        "--session",
        "--log",
        &log,
    ];
    adapter(&sh, dir.path(), "ship", "ship", &flags);
    let ops: Vec<String> = (1..=12).map(|n| format!("s{n:02}")).collect();
    for op in &ops {
        lost_at_adapter(&sh, dir.path(), "ship", op, "ship");
    }
    std::fs::write(&log, "").unwrap();
    let report = sh.json(&resolve(&["--older-than", "0s", "--receiver", "ship"]));
    assert_eq!(report["not_applied"], 12, "{report}");
    let calls: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "call")
        .collect();
    let sizes = |verb: &str| -> Vec<usize> {
        calls
            .iter()
            .filter(|c| c["verb"] == verb)
            .map(|c| c["request"]["op_ids"].as_array().map_or(1, Vec::len))
            .collect()
    };
    // Twelve operations: a read of ten and of two, then a close of ten and
    // of two, all through one session.
    assert_eq!(sizes("query"), [10, 2]);
    assert_eq!(sizes("close"), [10, 2]);
    let sessions = std::fs::read_to_string(&log)
        .unwrap()
        .matches("\"event\": \"session\"")
        .count();
    assert_eq!(sessions, 1);
    assert_eq!(sh.json(&["verify"])["intact"], true);
}

on_both_stores!(the_list_is_printed_before_anything_is_closed_and_json_keeps_stdout_one_document);
fn the_list_is_printed_before_anything_is_closed_and_json_keeps_stdout_one_document(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let out = sh.ok(&resolve(&["--older-than", "0s", "--json", "a", "b"]));
    let listed: Vec<Value> = out
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let receiver = sh.json(&["show", "a"])["operation"]["receiver"].clone();
    // Each line names the registration the plan was read through: the
    // outage's one receiver, registered once (its id is the seq of its
    // entry: 1, or 2 after a PostgreSQL outbox's settings; version 1).
    let id = match store {
        Store::Sqlite => 1,
        Store::Postgres => 2,
    };
    assert_eq!(
        listed,
        [
            json!({"op_id": "a", "version": 2, "receiver": receiver,
                   "receiver_id": id, "receiver_version": 1}),
            json!({"op_id": "b", "version": 2, "receiver": receiver,
                   "receiver_id": id, "receiver_version": 1}),
        ]
    );
    let report = out.json();
    assert_eq!(
        (report["confirmed"].clone(), report["not_applied"].clone()),
        (json!(1), json!(1))
    );
    // In text the list heads stdout, before the outcomes.
    let text = sh.ok(&resolve(&["--older-than", "0s", "w"])).stdout;
    assert!(
        text.starts_with(
            "resolving 1 listed operation, authorized by ann:\n  w version 2 at weak\n"
        ),
        "{text}"
    );
    assert!(text.contains("w: left (inconclusive)"), "{text}");
}

on_both_stores!(an_unknown_id_is_refused_before_anything_is_read_or_closed);
fn an_unknown_id_is_refused_before_anything_is_read_or_closed(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let before = sh.dump();
    let out = sh.run(&resolve(&["--older-than", "0s", "--json", "a", "nope"]));
    assert_json_error(&out, 3);
    assert!(
        out.stderr.starts_with("refused: unknown_operation: "),
        "{}",
        out.stderr
    );
    assert_eq!(before, sh.dump());
}

on_both_stores!(a_batched_close_whose_answer_is_garbage_fails_each_of_it_and_a_second_run_finishes);
fn a_batched_close_whose_answer_is_garbage_fails_each_of_it_and_a_second_run_finishes(
    store: Store,
) {
    let dir = tempfile::tempdir().unwrap();
    let sh = Shell::on(store);
    let flags = [
        "--can-close",
        "--complete",
        "--authoritative",
        "--batch",
        "10",
        "--session",
    ];
    adapter(&sh, dir.path(), "ship", "ship", &flags);
    for op in ["s1", "s2", "s3"] {
        lost_at_adapter(&sh, dir.path(), "ship", op, "ship");
    }
    std::fs::write(dir.path().join("ship.mode"), "close:garbage").unwrap();
    let out = sh.ok(&resolve(&[
        "--older-than",
        "0s",
        "--receiver",
        "ship",
        "--json",
    ]));
    let report = out.json();
    assert_eq!(
        (report["failed"].clone(), report["not_applied"].clone()),
        (json!(3), json!(0))
    );
    let failures: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(failures.len(), 3, "{}", out.stderr);
    assert!(
        failures.iter().all(|l| l.contains("may now be closed")),
        "{}",
        out.stderr
    );
    // Each failed close is kept with its operation (after its dispatch's
    // lost receipt).
    let shown = sh.json(&["show", "s1"]);
    let verbs: Vec<&str> = (shown["failures"].as_array().unwrap().iter())
        .map(|f| f["verb"].as_str().unwrap())
        .collect();
    assert_eq!(verbs, ["apply", "close"], "{shown}");
    std::fs::write(dir.path().join("ship.mode"), "").unwrap();
    let again = sh.json(&resolve(&["--older-than", "0s", "--receiver", "ship"]));
    assert_eq!(
        (again["failed"].clone(), again["not_applied"].clone()),
        (json!(0), json!(3))
    );
    assert_eq!(sh.json(&["verify"])["intact"], true);
}

/// `resolve` closes at receivers before it records its decisions, so the
/// database is asked first: a login without both `recon_closer` and
/// `recon_reviewer` changes nothing, at the receiver or in the outbox.
#[test]
fn resolve_needs_the_closer_and_the_reviewer_and_without_both_changes_nothing() {
    let test = "resolve_needs_the_closer_and_the_reviewer_and_without_both_changes_nothing";
    if !Store::Postgres.available(test) {
        return;
    }
    let pg = crate::real_receivers::servers::postgres()
        .as_ref()
        .expect("the cluster");
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(Store::Postgres, dir.path());
    let url = sh.place()[1].clone();
    let before = sh.dump();
    let adapter_before = std::fs::read(dir.path().join("weak.json")).ok();
    for (login, roles, missing) in [
        ("resolve_v", &["recon_reviewer"][..], "recon_closer"),
        ("resolve_c", &["recon_closer"][..], "recon_reviewer"),
    ] {
        let as_login = crate::pg_store::roles::login(pg, &url, login, roles);
        let mut args = resolve(&["--older-than", "0s", "--json", "--database"]);
        args.push(&as_login);
        let out = crate::support::run_with_env(&args, None, &[]);
        assert_eq!(out.code, Some(3), "{}", out.stderr);
        let error = out.json()["error"].clone();
        assert_eq!(error["code"], json!("permission_denied"), "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(missing),
            "{error}"
        );
        assert_eq!(sh.dump(), before, "nothing was written");
        let adapter = std::fs::read(dir.path().join("weak.json")).ok();
        assert_eq!(adapter, adapter_before, "nothing was closed");
    }
    let both =
        crate::pg_store::roles::login(pg, &url, "resolve_cv", &["recon_closer", "recon_reviewer"]);
    let mut args = resolve(&["--older-than", "0s", "--json", "--database"]);
    args.push(&both);
    let out = crate::support::run_with_env(&args, None, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["confirmed"], json!(1));
}

on_both_stores!(a_plan_run_keeps_the_age_limit_its_dry_run_selected_with);
/// A dry run made with `--older-than 0s` said it would close `a` and `b`;
/// the run of its plan, given no `--older-than`, closes them too (it once
/// applied the default 15 minutes again and skipped all as too young).
/// The plan file records the limit.
fn a_plan_run_keeps_the_age_limit_its_dry_run_selected_with(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(store, dir.path());
    let plan = dir.path().join("plan.json");
    let plan_arg = plan.display().to_string();
    sh.ok(&resolve(&[
        "--older-than",
        "0s",
        "--dry-run",
        "--output",
        &plan_arg,
    ]));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(written["older_than_ms"], 0, "{written}");
    let report = sh.json(&resolve(&["--plan", &plan_arg]));
    assert_eq!(
        (report["confirmed"].clone(), report["not_applied"].clone()),
        (json!(1), json!(1)),
        "{report}"
    );
    assert_eq!(report["skipped"], json!({}), "{report}");
}

/// A plan is a file a person authorized: a FIFO (which would block with
/// no writer) or a directory is refused at once as a usage error,
/// nothing read or written.
#[test]
fn a_plan_that_is_not_a_regular_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let sh = outage(Store::Sqlite, dir.path());
    let fifo = dir.path().join("plan.fifo");
    crate::support::mkfifo(&fifo);
    let before = sh.dump();
    for path in [fifo.as_path(), dir.path()] {
        let shown = path.display().to_string();
        let out = sh.run(&resolve(&["--plan", &shown, "--json"]));
        assert_json_error(&out, 2);
        assert!(
            out.stderr.contains("is not a regular file"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(before, sh.dump());
}
