//! Honest failure: a command that fails says so in one line (and, under
//! `--json`, in one JSON error document), and a failure that comes after a
//! commit says what was committed.

use crate::cli::assert_json_error;
use crate::stores::{on_both_stores, Site, Store};
use crate::support::{recon_bin, run, Lab};
use recon::receiver::Fault;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

on_both_stores!(under_json_a_usage_error_is_one_json_error_document);
fn under_json_a_usage_error_is_one_json_error_document(store: Store) {
    let site = Site::new(store);
    for args in [
        vec!["ops", "--bogus", "--json"],
        vec![
            "prepare",
            "--op",
            "a b",
            "--action",
            "x",
            "--payload",
            "{}",
            "--json",
        ],
        vec![
            "prepare",
            "--op",
            "a",
            "--action",
            "x",
            "--payload",
            "{",
            "--json",
        ],
    ] {
        let out = site.run(&args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_json_error(&out, 2);
    }
}

on_both_stores!(under_json_a_refusal_is_one_json_error_document_with_its_code);
fn under_json_a_refusal_is_one_json_error_document_with_its_code(store: Store) {
    let mut site = Site::new(store);
    site.dispatched("op", "pay", &json!({"n": 1}), None);
    let out = site.run(&["dispatch", "op", "--json"], None);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert_json_error(&out, 3);
    assert_eq!(out.json()["error"]["code"], "blind_retry");
}

// SQLite only: the storage error is a missing workspace directory.
#[test]
fn under_json_a_storage_error_is_one_json_error_document() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere").display().to_string();
    let out = run(&["show", "--workspace", &missing, "op", "--json"], None);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert_json_error(&out, 4);
    assert!(!dir.path().join("nowhere").exists());
}

// SQLite only: the failure is a missing workspace directory.
#[test]
fn without_json_a_failure_prints_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere").display().to_string();
    let out = run(&["show", "--workspace", &missing, "op"], None);
    assert_eq!(out.code, Some(4));
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

on_both_stores!(
    a_reconcile_refused_after_its_close_judges_the_closing_snapshot_and_says_the_op_is_closed
);
/// `reconcile --close` held (by a named hold point, through a fifo) after
/// its rules passed on the open read and before the close; a late original
/// lands meanwhile, so the closing snapshot holds it. The decision is judged
/// on the closing snapshot, never on the read before it, so `not_applied`
/// is refused; and since the close had committed, the refusal says that the
/// operation is now closed.
fn a_reconcile_refused_after_its_close_judges_the_closing_snapshot_and_says_the_op_is_closed(
    store: Store,
) {
    let mut site = Site::new(store);
    let payload = json!({"to": "ada@example.com"});
    site.dispatched("op", "send_email", &payload, Some(Fault::CrashBeforeCommit));
    let fifo = site.scratch().join("hold");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let child = Command::new(recon_bin())
        .args(["reconcile", "op", "--reviewer", "rosa"])
        .args(site.args())
        .args(["--decision", "not_applied", "--expected-version", "2"])
        .args(["--close", "--authorized-by", "rosa", "--json"])
        .env("RECON_HOLD_POINT", "reconcile.before_close")
        .env("RECON_HOLD_FIFO", &fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn reconcile");
    // Opening the fifo for writing returns once the reconcile holds there.
    let mut hold = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    site.effect_behind("op", "send_email", &payload);
    assert_eq!(site.effects(Some("op")), 1, "the late original landed");
    writeln!(hold, "go").unwrap();
    drop(hold);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let receiver = site.ws.require("op").unwrap().receiver;
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stderr.starts_with("refused: unsupported_verdict: "),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("now closed at receiver {receiver}")),
        "{stderr}"
    );
    let document: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(document["error"]["code"], "unsupported_verdict");
    assert_eq!(
        document["error"]["committed"]["closed"],
        json!({"op_id": "op", "receiver": receiver, "authorized_by": "rosa"})
    );
    let reopened = site.reopen();
    assert_eq!(reopened.require("op").unwrap().state.as_str(), "unknown");
    assert!(reopened.evidence("op").unwrap().is_empty());
    let closes = reopened.closes("op").unwrap();
    assert_eq!(closes.len(), 1, "{closes:?}");
    assert_eq!(closes[0].authorized_by, "rosa");
    let shown = site.run(&["show", "op", "--json"], None).json();
    let closing = &shown["operation"]["latest_observation"];
    assert_eq!(
        (&closing["closed"], &closing["matches"]),
        (&json!(true), &json!(1)),
        "{shown}"
    );
}

// SQLite only: `demo` builds a workspace directory.
#[test]
fn demo_refuses_a_workspace_in_use_before_writing_anything() {
    let mut lab = Lab::new();
    lab.dispatched("mine", "pay", &json!({"n": 1}), None);
    let before = crate::support::dump(lab.path());
    let out = run(&["demo", "--workspace", &lab.path_str()], None);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("is in use"), "{}", out.stderr);
    assert_eq!(crate::support::dump(lab.path()), before);
}

#[test]
fn check_reads_an_expected_file_only_up_to_its_bound() {
    let out = run(&["--check", "/dev/zero"], None);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("is larger than 16777216 bytes"),
        "{}",
        out.stderr
    );
}

on_both_stores!(a_busy_timeout_out_of_range_is_a_usage_error_not_a_panic);
fn a_busy_timeout_out_of_range_is_a_usage_error_not_a_panic(store: Store) {
    let site = Site::new(store);
    let place = site.args();
    for value in ["99999999999999999999", "600001", "-1", "soon"] {
        let mut args = vec!["ops"];
        args.extend(place.iter().map(String::as_str));
        let out = crate::support::run_with_env(&args, None, &[("RECON_BUSY_TIMEOUT_MS", value)]);
        assert_eq!(out.code, Some(2), "{value}: {}", out.stderr);
        assert!(out.stderr.contains("from 0 to 600000"), "{}", out.stderr);
    }
}

on_both_stores!(an_output_file_that_cannot_be_written_is_an_io_error_as_the_help_says);
fn an_output_file_that_cannot_be_written_is_an_io_error_as_the_help_says(store: Store) {
    let site = Site::new(store);
    let out = site.run(&["export", "--output", "/nonexistent-dir/x"], None);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot write /nonexistent-dir/x"),
        "{}",
        out.stderr
    );
    let help = run(&["export", "--help"], None);
    assert!(
        help.stdout.contains("an --output file or standard"),
        "{}",
        help.stdout
    );
}
