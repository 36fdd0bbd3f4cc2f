//! Whole flows typed at a shell, and the JSON shapes of SPEC section 6.
//! The flows of the outbox run on both stores (`crate::stores`); those
//! that call the built-in ledger as `recon receiver` or read its file stay
//! on SQLite.

use super::{assert_keys, assert_refused, Shell, EFFECT_FIELDS, OPERATION_FIELDS};
use crate::stores::{on_both_stores, Site, Store};
use crate::support::{check_run, experiment_run, run, tampered_check_run};
use recon::domain::EffectRequest;
use recon::receiver::Fault;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

const CHARGE: &str = r#"{"customer":"cus_1","amount_cents":4999,"currency":"EUR"}"#;

on_both_stores!(lost_receipt_is_confirmed_and_compensated_from_the_shell);
fn lost_receipt_is_confirmed_and_compensated_from_the_shell(store: Store) {
    let sh = Shell::on(store);
    // The payload comes from stdin.
    let out = sh.run_full(
        &[
            "prepare",
            "--op",
            "op-1",
            "--action",
            "charge_card",
            "--payload",
            "@-",
            "--json",
        ],
        Some(CHARGE.as_bytes()),
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let prepared = out.json();
    assert_keys(&prepared, OPERATION_FIELDS);
    assert_eq!(prepared["state"], "prepared");
    assert_eq!(prepared["version"], 1);
    assert_eq!(
        prepared["payload"],
        json!({"amount_cents": 4999, "currency": "EUR", "customer": "cus_1"})
    );

    let lost = sh
        .faulted(&["dispatch", "op-1", "--json"], Fault::CrashAfterCommit)
        .json();
    assert_keys(
        &lost,
        &[
            "op_id",
            "outcome",
            "receiver_exit_code",
            "effect_id",
            "state",
            "version",
        ],
    );
    assert_eq!(lost["outcome"], "unknown");
    assert_eq!(lost["receiver_exit_code"], store.lost_receipt_exit());
    assert_eq!(lost["effect_id"], Value::Null);
    assert_eq!(
        (lost["state"].clone(), lost["version"].clone()),
        (json!("unknown"), json!(2))
    );

    assert_refused(&sh.run(&["dispatch", "op-1"]), "blind_retry");

    let open = sh.json(&["snapshot", "op-1"]);
    assert_keys(&open, &["snapshot", "verdict"]);
    assert_keys(
        &open["snapshot"],
        &["op_id", "matches", "complete", "authoritative", "closed"],
    );
    assert_keys(&open["snapshot"]["matches"][0], EFFECT_FIELDS);
    assert_eq!(open["verdict"], "exact_match_existence_only");
    assert_eq!(open["snapshot"]["closed"], false);

    let recorded = sh.json(&[
        "reconcile",
        "op-1",
        "--reviewer",
        "rosa",
        "--decision",
        "confirmed",
        "--expected-version",
        "2",
        "--close",
        "--authorized-by",
        "rosa",
    ]);
    assert_keys(
        &recorded,
        &[
            "op_id",
            "decision",
            "verdict",
            "state",
            "version",
            "evidence_seq",
        ],
    );
    assert_eq!(recorded["verdict"], "unique_exact_match");
    assert_eq!(recorded["state"], "confirmed");
    assert_eq!(recorded["version"], 3);

    let shown = sh.json(&["show", "op-1"]);
    assert_keys(&shown, &["operation", "evidence", "approvals"]);
    assert_keys(&shown["operation"], OPERATION_FIELDS);
    let evidence = &shown["evidence"][0];
    assert_keys(
        evidence,
        &[
            "seq",
            "source",
            "reviewer",
            "decision",
            "verdict",
            "snapshot",
            "from_version",
            "to_version",
            "effect_id",
        ],
    );
    assert_eq!(evidence["seq"], recorded["evidence_seq"]);
    assert_eq!(evidence["snapshot"]["closed"], true);
    assert_eq!(evidence["snapshot"]["matches"].as_array().unwrap().len(), 1);
    let effect = shown["operation"]["confirmed_effect_id"]
        .as_str()
        .unwrap()
        .to_string();

    let approval = sh.json(&[
        "approve-compensation",
        "op-1",
        "--effect",
        &effect,
        "--approver",
        "ines",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-1-refund",
        "--action",
        "refund_card",
        "--payload",
        r#"{"customer":"cus_1","amount_cents":4999}"#,
    ]);
    assert_keys(
        &approval,
        &[
            "original_op_id",
            "effect_id",
            "approved_version",
            "compensation_op_id",
        ],
    );
    assert_eq!(approval["approved_version"], 3);

    let refund = sh.json(&["dispatch", "op-1-refund"]);
    assert_eq!(refund["outcome"], "receipt");
    assert_eq!(refund["state"], "confirmed");
    assert_eq!(refund["receiver_exit_code"], 0);

    let ledger = sh.effects(None);
    let rows = ledger.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_keys(&rows[1], EFFECT_FIELDS);
    assert_eq!(rows[0]["effect_id"], effect.as_str());
    assert_eq!(rows[1]["compensates_effect_id"], effect.as_str());
    assert_eq!(sh.effects(Some("op-1-refund")).as_array().unwrap().len(), 1);
    assert_eq!(
        sh.json(&["show", "op-1"])["approvals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

// SQLite only: calls the built-in ledger as `recon receiver apply`.
on_both_stores!(request_lost_before_the_receiver_is_recorded_not_applied_only_after_a_close);
fn request_lost_before_the_receiver_is_recorded_not_applied_only_after_a_close(store: Store) {
    let sh = Shell::on(store);
    let payload = r#"{"to":"+15550100","text":"hi"}"#;
    sh.ok(&[
        "prepare",
        "--op",
        "op-2",
        "--action",
        "send_sms",
        "--payload",
        payload,
    ]);
    let lost = sh.faulted(&["dispatch", "op-2", "--json"], Fault::CrashBeforeCommit);
    let lost = lost.json();
    assert_eq!(lost["receiver_exit_code"], store.never_arrived_exit());
    assert_eq!(lost["outcome"], "unknown");
    assert_eq!(sh.json(&["snapshot", "op-2"])["verdict"], "inconclusive");
    let args = [
        "reconcile",
        "op-2",
        "--reviewer",
        "rosa",
        "--decision",
        "not_applied",
        "--expected-version",
        "2",
    ];
    assert_refused(&sh.run(&args), "unsupported_verdict");
    let mut closing = args.to_vec();
    closing.extend(["--close", "--authorized-by", "rosa"]);
    let recorded = sh.json(&closing);
    assert_eq!(recorded["verdict"], "terminal_absence");
    assert_eq!(recorded["state"], "not_applied");
    // The close is durable: the receiver refuses the op from now on.
    match sh.postgres() {
        None => assert_refused(
            &sh.run(&[
                "receiver",
                "apply",
                "--op",
                "op-2",
                "--action",
                "send_sms",
                "--payload",
                payload,
            ]),
            "operation_closed",
        ),
        Some(site) => {
            let late = site.direct_apply(&EffectRequest {
                op_id: "op-2",
                action_kind: "send_sms",
                payload: &serde_json::from_str(payload).unwrap(),
                compensates_effect_id: None,
            });
            assert_eq!(late, Err("operation_closed".to_string()));
        }
    }
    assert_eq!(sh.effects(None), json!([]));
}

on_both_stores!(snapshot_close_is_recorded_with_its_authorizer);
fn snapshot_close_is_recorded_with_its_authorizer(store: Store) {
    let sh = Shell::on(store);
    sh.ok(&[
        "prepare",
        "--op",
        "op-3",
        "--action",
        "a",
        "--payload",
        "{}",
    ]);
    sh.faulted(&["dispatch", "op-3"], Fault::CrashBeforeCommit);
    let closed = sh.json(&["snapshot", "op-3", "--close", "--authorized-by", " dana "]);
    assert_eq!(closed["verdict"], "terminal_absence");
    assert_eq!(closed["snapshot"]["closed"], true);
    assert_eq!(sh.closed_by("op-3").as_deref(), Some("dana"));
    // An ordinary read afterwards sees the close too.
    assert_eq!(
        sh.json(&["snapshot", "op-3"])["verdict"],
        "terminal_absence"
    );
}

#[test]
fn receiver_apply_prints_a_receipt_or_dies_by_its_fault() {
    let sh = Shell::empty();
    sh.workspace_creating();
    let apply = |extra: &[&str]| {
        let mut args = vec![
            "receiver",
            "apply",
            "--op",
            "op-4",
            "--action",
            "send_email",
            "--payload",
            r#"{"to":"a@example.com"}"#,
        ];
        args.extend(extra);
        sh.run(&args)
    };
    let ok = apply(&[]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    assert_eq!(ok.json()["receipt"]["effect_id"], "fx-000001");
    assert_keys(&ok.json()["receipt"], EFFECT_FIELDS);

    let after = apply(&["--fault", "crash-after-commit"]);
    assert_eq!(after.code, Some(23));
    assert!(after.stdout.is_empty());
    let before = apply(&["--fault", "crash-before-commit"]);
    assert_eq!(before.code, Some(24));
    assert!(before.stdout.is_empty());
    let ledger = sh.json(&["ledger", "--op", "op-4"]);
    assert_eq!(ledger.as_array().unwrap().len(), 2, "{ledger}");

    let compensating = apply(&["--compensates", "fx-000001"]);
    assert_eq!(
        compensating.json()["receipt"]["compensates_effect_id"],
        "fx-000001"
    );
}

#[test]
fn receiver_apply_waits_for_its_permit_after_ready() {
    let sh = Shell::empty();
    sh.workspace_creating();
    let ws = sh.ws_arg();
    let mut child = Command::new(crate::support::recon_bin())
        .args([
            "receiver",
            "apply",
            "--workspace",
            &ws,
            "--op",
            "op-5",
            "--action",
            "a",
            "--payload",
            "{}",
            "--wait-permit",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // Ready, and blocked: nothing written yet.
    assert_eq!(sh.json(&["ledger"]), json!([]));
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let receipt: Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(receipt["receipt"]["op_id"], "op-5");
    assert_eq!(sh.json(&["ledger"]).as_array().unwrap().len(), 1);
}

on_both_stores!(ops_filters_by_state_and_pages_by_op_id);
fn ops_filters_by_state_and_pages_by_op_id(store: Store) {
    // 12 unknown, 2 prepared, 1 confirmed, then 1 not_applied below.
    let mut site = Site::new(store);
    for n in 1..=12 {
        let payload = json!({ "n": n });
        let fault = Some(Fault::CrashAfterCommit);
        site.dispatched(&format!("op-u{n:02}"), "send_email", &payload, fault);
    }
    for op in ["op-p1", "op-p2"] {
        site.ws.prepare(op, "send_email", &json!({})).unwrap();
    }
    site.dispatched("op-c1", "send_email", &json!({}), None);
    let fault = Some(Fault::CrashBeforeCommit);
    site.dispatched("op-n1", "send_email", &json!({}), fault);
    let sh = Shell::at(site);
    sh.closed_not_applied("op-n1", "2", "rosa");
    let page = sh.json(&["ops", "--state", "unknown", "--limit", "5"]);
    let page = page.as_array().unwrap();
    assert_eq!(page.len(), 5);
    for op in page {
        assert_keys(op, OPERATION_FIELDS);
        assert_eq!(op["state"], "unknown");
        assert!(op["payload"].is_object(), "payload is a JSON value");
    }
    let ids: Vec<&str> = page
        .iter()
        .map(|op| op["op_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["op-u01", "op-u02", "op-u03", "op-u04", "op-u05"]);
    let next = sh.json(&[
        "ops", "--state", "unknown", "--limit", "5", "--after", ids[4],
    ]);
    assert_eq!(next[0]["op_id"], "op-u06");
    let all_unknown = sh.json(&["ops", "--state", "unknown"]);
    assert_eq!(all_unknown.as_array().unwrap().len(), 12);
    let prepared = sh.json(&["ops", "--state", "prepared"]);
    assert_eq!(prepared[0]["op_id"], "op-p1");
    let not_applied = sh.json(&["ops", "--state", "not_applied"]);
    assert_eq!(not_applied, json!([not_applied[0].clone()]));
    assert_eq!(not_applied[0]["op_id"], "op-n1");
    assert_eq!(sh.json(&["ops"]).as_array().unwrap().len(), 16);
    let text = sh.ok(&["ops", "--limit", "3"]);
    assert_eq!(text.stdout.lines().count(), 3);
}

on_both_stores!(payload_is_read_from_a_file_with_at_path);
fn payload_is_read_from_a_file_with_at_path(store: Store) {
    let sh = Shell::on(store);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), r#"{"to":"b@example.com","subject":"Hi"}"#).unwrap();
    let arg = format!("@{}", file.path().display());
    let op = sh.json(&[
        "prepare",
        "--op",
        "op-6",
        "--action",
        "send_email",
        "--payload",
        &arg,
    ]);
    assert_eq!(
        op["payload"],
        json!({"subject": "Hi", "to": "b@example.com"})
    );
}

#[test]
fn workspace_may_come_before_the_command() {
    let sh = Shell::demo(0);
    let ws = sh.ws_arg();
    let out = run(
        &["--workspace", &ws, "ops", "--state", "confirmed", "--json"],
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json().as_array().unwrap().len(), 4);
}

on_both_stores!(human_output_escapes_control_characters);
fn human_output_escapes_control_characters(store: Store) {
    let sh = Shell::on(store);
    sh.ok(&[
        "prepare",
        "--op",
        "op-7",
        "--action",
        "a",
        "--payload",
        "{\"text\":\"\\u001b[2J\\u202e gotcha\"}",
    ]);
    let shown = sh.ok(&["show", "op-7"]);
    assert!(!shown.stdout.contains('\u{1b}') && !shown.stdout.contains('\u{202e}'));
    assert!(shown.stdout.contains("\\u001b"), "{}", shown.stdout);
    let json = sh.ok(&["show", "op-7", "--json"]);
    assert!(!json.stdout.contains('\u{202e}'));
    assert_eq!(
        json.json()["operation"]["payload"]["text"],
        "\u{1b}[2J\u{202e} gotcha"
    );
}

on_both_stores!(a_closed_pipe_ends_a_long_listing_quietly);
fn a_closed_pipe_ends_a_long_listing_quietly(store: Store) {
    let mut site = Site::new(store);
    for n in 1..=1_500 {
        let op = format!("op-a-long-listing-{n:06}");
        site.ws.prepare(&op, "send_email", &json!({})).unwrap();
    }
    let sh = Shell::at(site);
    let mut child = Command::new(crate::support::recon_bin())
        .arg("ops")
        .args(sh.place())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("op-a-long-listing-000001 "), "{first}");
    // 1,500 lines of about 100 bytes do not fit the pipe: the writer is
    // blocked on it when the reader goes away, so its next write fails.
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn help_of_every_command_explains_it_and_the_exit_codes() {
    // The whole table once, at the top.
    let top = run(&["--help"], None);
    for needle in [
        "Usage:",
        "Exit codes:",
        "refused: <code>: <detail>",
        "busy timeout",
    ] {
        assert!(top.stdout.contains(needle), "recon --help lacks {needle}");
    }
    // Each command: its own exit codes, and the refusals it can raise.
    for (command, exits, refusals) in [
        (&["experiment"][..], &["0", "2", "4"][..], &[][..]),
        (&["demo"], &["0", "2", "4"], &[]),
        (
            &["prepare"],
            &["0", "2", "3", "4"],
            &["duplicate_operation"],
        ),
        (&["dispatch"], &["0", "2", "3", "4"], &["blind_retry"]),
        (&["ops"], &["0", "2", "3", "4"], &[]),
        (&["show"], &["0", "2", "3", "4"], &["unknown_operation"]),
        (&["ledger"], &["0", "2", "4"], &[]),
        (&["snapshot"], &["0", "2", "3", "4"], &["close_unsupported"]),
        (
            &["reconcile"],
            &["0", "2", "3", "4"],
            &["stale_version", "unsupported_verdict"],
        ),
        (
            &["approve-compensation"],
            &["0", "2", "3", "4"],
            &["already_approved"],
        ),
        (
            &["observe"],
            &["0", "2", "3", "4", "130"],
            &["unknown_operation"],
        ),
        (&["note"], &["0", "2", "3", "4"], &["empty_reviewer"]),
        (
            &["escalate"],
            &["0", "2", "3", "4"],
            &["not_unknown", "already_escalated"],
        ),
        (&["deescalate"], &["0", "2", "3", "4"], &["not_escalated"]),
        (&["verify"], &["0", "1", "2", "3", "4"], &[]),
        (&["export"], &["0", "1", "2", "3", "4"], &[]),
        (
            &["receiver", "apply"],
            &["0", "2", "3", "4", "23", "24"],
            &["operation_closed"],
        ),
        (
            &["receivers", "check"],
            &["0", "1", "2", "3", "4"],
            &["unknown_receiver"],
        ),
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let out = run(&args, None);
        assert_eq!(out.code, Some(0), "{args:?}");
        let listed: Vec<&str> = out
            .stdout
            .split("Exit codes:")
            .nth(1)
            .unwrap_or_else(|| panic!("{args:?} has no exit codes"))
            .lines()
            .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next())
            .filter(|code| code.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        assert_eq!(listed, exits, "{args:?}: {}", out.stdout);
        assert!(out.stdout.contains("Usage:"), "{args:?}");
        for code in refusals {
            assert!(out.stdout.contains(code), "{args:?} lacks {code}");
        }
        assert_eq!(
            out.stdout.contains("refused: <code>: <detail>"),
            !refusals.is_empty(),
            "{args:?}"
        );
        assert!(
            !out.stdout.contains("NO_COLOR"),
            "{args:?} repeats the whole table"
        );
    }
}

#[test]
fn experiment_prints_the_checked_in_results_and_check_passes() {
    let out = experiment_run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let expected: Value = serde_json::from_str(recon::experiment::EXPECTED_RESULTS).unwrap();
    assert_eq!(out.json(), expected);

    let check = check_run();
    assert_eq!(
        check.run.code,
        Some(0),
        "{}{}",
        check.run.stdout,
        check.run.stderr
    );
    assert!(check.run.stdout.contains("check passed"));
    let reproduced: Value = serde_json::from_str(&check.written).unwrap();
    assert_eq!(reproduced, expected);
}

#[test]
fn check_mismatch_exits_1_and_names_each_differing_path() {
    // The shared tampered results: these effects set to 7, the receiver
    // child processes to 1.
    let out = tampered_check_run();
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    let children = serde_json::from_str::<Value>(recon::experiment::EXPECTED_RESULTS).unwrap()
        ["receiver_child_processes"]
        .clone();
    for line in [
        "$.scenarios.receipt_lost_after_commit.effects: expected 7, actual 1".to_string(),
        format!("$.receiver_child_processes: expected 1, actual {children}"),
    ] {
        assert!(out.stdout.contains(&line), "{line}: {}", out.stdout);
    }
    assert!(
        out.stdout.contains("check FAILED: 2 differing paths"),
        "{}",
        out.stdout
    );
}

#[test]
fn dispatch_with_a_locked_receiver_is_a_lost_receipt_not_an_error() {
    let sh = Shell::with_ledger();
    sh.ok(&[
        "prepare",
        "--op",
        "op-8",
        "--action",
        "a",
        "--payload",
        "{}",
    ]);
    let lock = rusqlite::Connection::open(sh.ws.join("receiver.sqlite")).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let out = sh.run_full(
        &["dispatch", "op-8", "--json"],
        None,
        &[("RECON_BUSY_TIMEOUT_MS", "50")],
    );
    lock.execute_batch("ROLLBACK").unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.json();
    assert_eq!(report["outcome"], "unknown");
    assert_eq!(report["receiver_exit_code"], 4);
    assert_eq!(report["state"], "unknown");
    // And the sender guards it like any lost receipt.
    assert_refused(&sh.run(&["dispatch", "op-8"]), "blind_retry");
}

/// The built-in ledger's child runs in `/` like every adapter, yet a
/// workspace named relative to where recon was started still reaches its
/// own ledger: the child is given the workspace's absolute path.
#[test]
fn a_relative_workspace_reaches_its_own_ledger_from_the_adapter_in_root() {
    let dir = tempfile::tempdir().unwrap();
    let recon = |args: &[&str]| {
        let mut command = Command::new(crate::support::recon_bin());
        command.current_dir(dir.path()).args(args);
        crate::support::output_of(command, None)
    };
    let add = [
        "receivers",
        "add",
        "--workspace",
        "ws",
        "builtin",
        "--builtin",
    ];
    assert!(recon(&[&add[..], &["--actions", "*"]].concat())
        .status
        .success());
    let prepare = [
        "prepare",
        "--workspace",
        "ws",
        "--op",
        "op-1",
        "--action",
        "a",
    ];
    assert!(recon(&[&prepare[..], &["--payload", "{}"]].concat())
        .status
        .success());
    let out = recon(&["dispatch", "--workspace", "ws", "op-1", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "receipt", "{report}");
    assert_eq!(report["state"], "confirmed", "{report}");
}
