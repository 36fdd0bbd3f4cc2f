//! Rule 1: a receipt counts only when it is `ok: true` and for exactly the
//! request. Every other way an adapter can answer (or fail to) leaves the
//! operation `unknown`, exits 0, says why in `adapter_failure`, writes no
//! evidence, and gives a later decision nothing to stand on: only a fresh
//! read of the receiver can.

use super::{assert_refused_json, Rig, FULL};
use crate::stores::{on_both_stores, Store};
use crate::support::{output_of, recon_bin};
use serde_json::{json, Value};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

/// Checks what every lost receipt leaves behind, and returns the report.
#[track_caller]
pub(super) fn assert_lost(rig: &Rig, op: &str, report: &Value, kind: &str, exit: Value) {
    assert_eq!(report["outcome"], "unknown", "{report}");
    assert_eq!(report["adapter_failure"]["kind"], kind, "{report}");
    assert!(
        !report["adapter_failure"]["detail"]
            .as_str()
            .unwrap()
            .is_empty(),
        "{report}"
    );
    assert_eq!(report["receiver_exit_code"], exit, "{report}");
    assert_eq!(report["effect_id"], Value::Null);
    assert_eq!(
        (&report["state"], &report["version"]),
        (&json!("unknown"), &json!(2))
    );
    let shown = rig.show(op);
    assert_eq!(shown["operation"]["state"], "unknown");
    assert_eq!(shown["operation"]["version"], 2);
    assert_eq!(shown["evidence"], json!([]), "no evidence row");
}

/// Nothing the failed call said can be decided on: the fixture wrote no
/// effect, so a fresh read finds none and neither decision is supported.
#[track_caller]
fn assert_no_basis(rig: &Rig, op: &str) {
    rig.set_mode("mail", "");
    for decision in ["confirmed", "not_applied"] {
        assert_refused_json(
            &rig.reconcile(op, decision, "2", false),
            "unsupported_verdict",
        );
    }
    assert_eq!(rig.show(op)["evidence"], json!([]));
}

/// Prepares an operation for `mail`, dispatches it with the fixture in
/// `mode`, and checks the lost receipt of `kind`.
#[track_caller]
fn lost(store: Store, mode: &str, kind: &str, exit: Value) {
    let rig = Rig::with_mail_on(store);
    let op = format!("op-{mode}");
    rig.prepare(&op, "post_letter", r#"{"to":"ada"}"#);
    rig.set_mode("mail", mode);
    let report = rig.dispatch(&op);
    assert_eq!(report["receiver"], "mail");
    assert_lost(&rig, &op, &report, kind, exit);
    assert_no_basis(&rig, &op);
}

on_both_stores!(a_crash_before_apply_leaves_the_operation_unknown);
fn a_crash_before_apply_leaves_the_operation_unknown(store: Store) {
    lost(store, "apply:crash-before", "crash", json!(3));
}

on_both_stores!(garbage_leaves_the_operation_unknown);
fn garbage_leaves_the_operation_unknown(store: Store) {
    lost(store, "apply:garbage", "garbage", json!(0));
}

on_both_stores!(two_answer_lines_leave_the_operation_unknown);
fn two_answer_lines_leave_the_operation_unknown(store: Store) {
    lost(store, "apply:two-lines", "extra_output", json!(0));
}

on_both_stores!(an_answer_longer_than_8_mib_leaves_the_operation_unknown);
fn an_answer_longer_than_8_mib_leaves_the_operation_unknown(store: Store) {
    lost(store, "apply:oversize", "oversize", json!(0));
}

on_both_stores!(a_receipt_for_another_operation_leaves_it_unknown);
fn a_receipt_for_another_operation_leaves_it_unknown(store: Store) {
    lost(store, "apply:other-op", "mismatch", json!(0));
}

on_both_stores!(a_receipt_with_a_changed_payload_leaves_it_unknown);
fn a_receipt_with_a_changed_payload_leaves_it_unknown(store: Store) {
    lost(store, "apply:changed-payload", "mismatch", json!(0));
}

on_both_stores!(a_receipt_with_a_changed_action_leaves_it_unknown);
fn a_receipt_with_a_changed_action_leaves_it_unknown(store: Store) {
    lost(store, "apply:changed-action", "mismatch", json!(0));
}

on_both_stores!(every_error_code_leaves_the_operation_unknown);
fn every_error_code_leaves_the_operation_unknown(store: Store) {
    for code in [
        "operation_closed",
        "unsupported",
        "bad_request",
        "unavailable",
        "internal",
    ] {
        lost(store, &format!("apply:error-{code}"), "error", json!(0));
    }
}

on_both_stores!(a_program_that_cannot_start_fails_the_dispatch_and_leaves_the_operation_prepared);
/// Its `describe` runs before anything is committed for the dispatch, so a
/// program that cannot start fails the act with the operation still
/// `prepared`: nothing was sent, and it may be dispatched once it is back.
fn a_program_that_cannot_start_fails_the_dispatch_and_leaves_the_operation_prepared(store: Store) {
    let rig = Rig::on(store);
    let copy = rig.file("gone.py");
    std::fs::copy(super::adapter_fixture(), &copy).unwrap();
    let mut args = vec!["receivers", "add", "gone", "--actions", "post_letter", "--"];
    args.push(&copy);
    let state = rig.file("gone.state");
    args.extend(["--state", &state]);
    rig.ok(&args);
    std::fs::remove_file(&copy).unwrap();
    rig.prepare("op-1", "post_letter", "{}");
    let dump = rig.dump();
    let out = rig.recon(&["dispatch", "op-1"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("cannot start"), "{}", out.stderr);
    assert_eq!(rig.dump(), dump, "nothing was committed");
    let op = &rig.show("op-1")["operation"];
    assert_eq!(
        (&op["state"], &op["receiver"]),
        (&json!("prepared"), &json!("gone"))
    );
}

on_both_stores!(a_crash_after_apply_leaves_it_unknown_until_a_fresh_read_finds_the_effect);
fn a_crash_after_apply_leaves_it_unknown_until_a_fresh_read_finds_the_effect(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    rig.set_mode("mail", "apply:crash-after");
    let report = rig.dispatch("op-1");
    assert_lost(&rig, "op-1", &report, "crash", json!(9));
    rig.set_mode("mail", "");
    // The effect is there; only a read of the receiver shows it.
    assert_refused_json(
        &rig.reconcile("op-1", "not_applied", "2", false),
        "unsupported_verdict",
    );
    let out = rig.reconcile("op-1", "confirmed", "2", false);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["verdict"], "exact_match_existence_only");
    let evidence = &rig.show("op-1")["evidence"];
    assert_eq!(evidence.as_array().unwrap().len(), 1);
    assert_eq!(evidence[0]["source"], "review");
    assert_eq!(evidence[0]["effect_id"], "mail-000001");
}

on_both_stores!(a_receipt_with_a_changed_compensation_target_leaves_it_unknown);
fn a_receipt_with_a_changed_compensation_target_leaves_it_unknown(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    assert_eq!(rig.dispatch("op-1")["outcome"], "receipt");
    rig.ok(&[
        "approve-compensation",
        "op-1",
        "--effect",
        "mail-000001",
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-1-sorry",
        "--action",
        "post_apology",
        "--payload",
        r#"{"to":"ada"}"#,
    ]);
    rig.set_mode("mail", "apply:changed-target");
    let report = rig.dispatch("op-1-sorry");
    assert_lost(&rig, "op-1-sorry", &report, "mismatch", json!(0));
    assert_no_basis(&rig, "op-1-sorry");
}

/// A pipe whose write end only the `recon` child inherits (both ends are
/// close-on-exec here, so no other test's child gets a copy).
fn inherited_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into the array, which we
    // own from here on.
    let made = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(made, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just created and are owned by no one else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

on_both_stores!(a_hung_adapter_is_killed_with_its_whole_process_group);
fn a_hung_adapter_is_killed_with_its_whole_process_group(store: Store) {
    let rig = Rig::on(store);
    rig.register("mail", "post_letter", &["--timeout-ms", "2000"], FULL);
    rig.prepare("op-1", "post_letter", "{}");
    rig.set_mode("mail", "apply:hang");
    // The write end of a pipe goes to `recon dispatch`, and from it to the
    // adapter and the grandchild it forks. Its reader sees the end of the
    // pipe only when every holder has exited: proof that the grandchild,
    // which recon never knew of, was killed with its group.
    let (read, write) = inherited_pipe();
    let write_fd = write.as_raw_fd();
    let mut command = Command::new(recon_bin());
    command
        .args(rig.place())
        .args(["dispatch", "op-1", "--json"]);
    // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec on
    // the child's copy of the descriptor.
    unsafe {
        command.pre_exec(move || match libc::fcntl(write_fd, libc::F_SETFD, 0) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    let out = output_of(command, None);
    drop(write);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_lost(&rig, "op-1", &report, "timeout", Value::Null);
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = std::fs::File::from(read).read_to_end(&mut rest);
        let _ = done.send(());
    });
    assert!(
        ended.recv_timeout(Duration::from_secs(60)).is_ok(),
        "a process of the adapter's group outlived the timeout"
    );
    let events: Vec<Value> = rig
        .log("mail")
        .into_iter()
        .map(|e| e["event"].clone())
        .collect();
    assert!(events.contains(&json!("grandchild")), "{events:?}");
    assert!(events.contains(&json!("hanging")), "{events:?}");
}

on_both_stores!(a_complete_answer_counts_when_the_adapter_lingers_after_it);
/// A complete answer line counts even when the adapter lingers after
/// writing it: recon gives it a moment to exit, then kills its process
/// group and keeps the answer (well inside the receiver's timeout).
fn a_complete_answer_counts_when_the_adapter_lingers_after_it(store: Store) {
    let rig = Rig::on(store);
    rig.register("mail", "post_letter", &["--timeout-ms", "20000"], FULL);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    rig.set_mode("mail", "apply:linger");
    let report = rig.dispatch("op-1");
    assert_eq!(
        (&report["outcome"], &report["state"]),
        (&json!("receipt"), &json!("confirmed")),
        "{report}"
    );
    assert_eq!(report["receiver_exit_code"], Value::Null, "it was killed");
}

on_both_stores!(a_failed_dispatch_is_kept_with_its_operation_and_shown);
/// Nothing an adapter did is forgotten: a dispatch whose call gave no
/// usable answer keeps the failure (kind, detail, exit code, the stderr
/// tail) with its operation, journaled, and `show` says why it is unknown.
fn a_failed_dispatch_is_kept_with_its_operation_and_shown(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    rig.set_mode("mail", "apply:stderr-escape");
    let report = rig.dispatch("op-1");
    assert_eq!(report["state"], "unknown", "{report}");
    let shown = rig.show("op-1");
    let failure = &shown["failures"][0];
    assert_eq!(
        (
            &failure["verb"],
            &failure["receiver"],
            &failure["kind"],
            &failure["exit_code"]
        ),
        (&json!("apply"), &json!("mail"), &json!("crash"), &json!(5)),
        "{shown}"
    );
    assert!(
        failure["stderr"]
            .as_str()
            .unwrap()
            .contains("the adapter's last words"),
        "{failure}"
    );
    let text = rig.ok(&["show", "op-1"]).stdout;
    assert!(text.contains("failed apply #"), "{text}");
    assert!(text.contains("stderr: \\x1b[2J"), "escaped: {text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    let verified = rig.recon(&["verify", "--json"]);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);
}

on_both_stores!(a_failed_recorded_read_is_kept_and_a_shown_one_is_not);
/// A read someone records (`observe`, `snapshot --by`) is an act: its
/// failed call is kept with the operation. A read only shown keeps nothing.
fn a_failed_recorded_read_is_kept_and_a_shown_one_is_not(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    rig.dispatch("op-1");
    rig.set_mode("mail", "query:crash-now");
    let dump = rig.dump();
    assert_eq!(rig.recon(&["snapshot", "op-1"]).code, Some(4));
    assert_eq!(rig.dump(), dump, "a shown read keeps nothing");
    let observed = rig.recon(&["observe", "op-1", "--by", "dana", "--json"]);
    assert_eq!(observed.code, Some(4), "{}", observed.stderr);
    let failures = rig.show("op-1")["failures"].clone();
    assert_eq!(failures.as_array().map(Vec::len), Some(1), "{failures}");
    assert_eq!(
        (
            &failures[0]["verb"],
            &failures[0]["kind"],
            &failures[0]["exit_code"]
        ),
        (&json!("query"), &json!("crash"), &json!(7))
    );
    let verified = rig.recon(&["verify", "--json"]);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);
}
