//! `recon-postfix` against a private Postfix, end to end through recon: a
//! receipt lost after Postfix accepted the message, the message found in the
//! Maildir once delivered, the close refused without asking the adapter,
//! `not_applied` out of reach, a confirmation on existence; and a message
//! submitted twice, which no reviewer may confirm.

use super::servers::{self, Mailbox};
use super::{
    apply_request, call_adapter, dispatch, ok_json, poll_until, prepare, reconcile, snapshot,
};
use crate::support::{run, Lab};
use recon::workspace::NewReceiver;
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const DRILL_ENV: &str = "RECON_POSTFIX_DRILL";
const DIE_AFTER_ACCEPT: &str = "die-after-accept";
/// Delivery is asynchronous: how long a test waits for it.
const DELIVERY: Duration = Duration::from_secs(60);

fn adapter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/postfix/recon-postfix")
}

/// A wrapper that appends the verb of every call to `calls.log` and then
/// runs the adapter: a test can see that recon never invoked it for a close.
fn logged_adapter(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("calls.log");
    let wrapper = dir.join("recon-postfix-logged");
    let script = format!(
        "#!/bin/sh\nfor verb; do :; done\nprintf '%s\\n' \"$verb\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        adapter().display()
    );
    std::fs::write(&wrapper, script).expect("write the wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (wrapper, log)
}

fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Messages delivered to the mailbox so far.
fn delivered(mailbox: &Mailbox) -> usize {
    ["new", "cur"]
        .iter()
        .filter_map(|sub| std::fs::read_dir(mailbox.maildir.join(sub)).ok())
        .map(|entries| entries.count())
        .sum()
}

fn mail_lab(program: &Path, smtp: &str, mailbox: &Mailbox) -> Lab {
    let mut lab = Lab::new();
    let args = [
        "--smtp".to_string(),
        smtp.to_string(),
        "--maildir".to_string(),
        mailbox.maildir.display().to_string(),
    ];
    lab.ws
        .register_receiver(&NewReceiver {
            name: "mail",
            actions: &["send_email".to_string()],
            program,
            args: &args,
            timeout_ms: Some(60_000),
        })
        .expect("register recon-postfix");
    lab
}

/// Prepares `op_id` for the mailbox and dispatches it with the adapter made
/// to die once Postfix accepted the message: the receipt is lost.
fn dispatch_losing_the_receipt(w: &str, op_id: &str, payload: &Value) {
    prepare(w, op_id, "send_email", payload);
    let report = dispatch(w, op_id, &[(DRILL_ENV, DIE_AFTER_ACCEPT)]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    assert_eq!(report["receiver_exit_code"], json!(23), "{report}");
    assert_eq!(
        report["adapter_failure"]["kind"],
        json!("crash"),
        "{report}"
    );
}

/// The close is refused before anything is invoked: the wrapper's log of
/// calls does not change.
#[track_caller]
fn close_is_refused_without_invoking(w: &str, op_id: &str, log: &Path) {
    let before = calls(log);
    let close = snapshot(w, op_id, Some("ann"), &[]);
    assert_eq!(close.code, Some(3), "{}", close.stderr);
    assert!(
        close.stderr.contains("close_unsupported"),
        "{}",
        close.stderr
    );
    assert_eq!(
        calls(log),
        before,
        "the adapter was not invoked for the close"
    );
    assert!(!before.iter().any(|verb| verb == "close"));
}

#[test]
fn a_mail_whose_receipt_was_lost_is_confirmed_on_existence_and_never_closed() {
    let test = "a_mail_whose_receipt_was_lost_is_confirmed_on_existence_and_never_closed";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let scratch = tempfile::tempdir().expect("temp dir");
    let (wrapper, log) = logged_adapter(scratch.path());
    let lab = mail_lab(&wrapper, &postfix.smtp(), &mailbox);
    let ws = lab.path_str();
    let w = ws.as_str();
    let body = "Hello,\nit is attached.\n";
    let payload = json!({"to": mailbox.address, "subject": "Your invoice", "body": body});
    dispatch_losing_the_receipt(w, "mail-1", &payload);
    let shown = ok_json(
        &run(&["show", "--workspace", w, "mail-1", "--json"], None),
        "show",
    );
    assert_eq!(shown["operation"]["state"], json!("unknown"), "{shown}");
    poll_until("the message is delivered", DELIVERY, || {
        delivered(&mailbox) == 1
    });
    let read = ok_json(&snapshot(w, "mail-1", None, &[]), "snapshot");
    assert_eq!(
        read["verdict"],
        json!("exact_match_existence_only"),
        "{read}"
    );
    let flags = &read["snapshot"];
    let flags = [
        &flags["complete"],
        &flags["authoritative"],
        &flags["closed"],
    ];
    assert_eq!(
        flags,
        [&json!(false), &json!(true), &json!(false)],
        "{read}"
    );
    close_is_refused_without_invoking(w, "mail-1", &log);
    let refused = reconcile(w, "mail-1", "not_applied");
    assert_eq!(
        refused.code,
        Some(3),
        "not_applied is out of reach: {}",
        refused.stderr
    );
    let confirmed = ok_json(&reconcile(w, "mail-1", "confirmed"), "confirm");
    assert_eq!(confirmed["state"], json!("confirmed"), "{confirmed}");
    assert_eq!(
        confirmed["verdict"],
        json!("exact_match_existence_only"),
        "{confirmed}"
    );
}

#[test]
fn a_mail_submitted_twice_shows_duplicate_matches() {
    let test = "a_mail_submitted_twice_shows_duplicate_matches";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let smtp = postfix.smtp();
    let lab = mail_lab(&adapter(), &smtp, &mailbox);
    let ws = lab.path_str();
    let w = ws.as_str();
    let payload =
        json!({"to": mailbox.address, "subject": "Reminder: ünïcode  spaces ", "body": "twice"});
    dispatch_losing_the_receipt(w, "mail-2", &payload);
    // An unsafe retry outside recon: the same request, straight to the adapter.
    let args = [
        "--smtp",
        smtp.as_str(),
        "--maildir",
        mailbox.maildir.to_str().expect("utf-8"),
    ];
    let request = apply_request("mail-2", "send_email", &payload);
    let (answer, _) = call_adapter(
        &adapter(),
        &args,
        "apply",
        &request,
        &[] as &[(&str, &OsStr)],
    );
    assert_eq!(answer.expect("a receipt")["ok"], json!(true));
    poll_until("both messages are delivered", DELIVERY, || {
        delivered(&mailbox) == 2
    });
    let read = ok_json(
        &run(&["snapshot", "--workspace", w, "mail-2", "--json"], None),
        "snapshot",
    );
    assert_eq!(read["verdict"], json!("duplicate_matches"), "{read}");
    let matches = read["snapshot"]["matches"].as_array().expect("matches");
    assert!(
        matches.iter().all(|m| m["payload"] == payload),
        "exact copies: {read}"
    );
    let confirm = run(
        &[
            "reconcile",
            "--workspace",
            w,
            "mail-2",
            "--reviewer",
            "rita",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
        None,
    );
    assert_eq!(
        confirm.code,
        Some(3),
        "a duplicate is no permission to pick one: {}",
        confirm.stderr
    );
}

#[test]
fn recon_postfix_cannot_close_and_answers_unavailable_when_postfix_is_down() {
    let port = servers::free_port().expect("a free port");
    let scratch = tempfile::tempdir().expect("temp dir");
    let smtp = format!("127.0.0.1:{port}");
    let maildir = scratch.path().join("no-such-maildir");
    let args = [
        "--smtp",
        smtp.as_str(),
        "--maildir",
        maildir.to_str().expect("utf-8"),
    ];
    let none: &[(&str, &OsStr)] = &[];
    let described = call_adapter(
        &adapter(),
        &args,
        "describe",
        &json!({"recon_adapter": 1}),
        none,
    );
    let described = described.0.expect("describe needs no server");
    assert_eq!(described["can_close"], json!(false), "{described}");
    assert_eq!(
        described["query"],
        json!({"complete": false, "authoritative": true})
    );
    let payload = json!({"to": "box0@example.test", "subject": "s", "body": "b"});
    let requests = [
        (
            "apply",
            apply_request("down-1", "send_email", &payload),
            "unavailable",
        ),
        (
            "query",
            json!({"recon_adapter": 1, "workspace": super::TEST_WORKSPACE, "op_id": "down-1"}),
            "unavailable",
        ),
        (
            "close",
            json!({"recon_adapter": 1, "workspace": super::TEST_WORKSPACE, "op_id": "down-1", "authorized_by": "ann"}),
            "unsupported",
        ),
    ];
    for (verb, request, code) in requests {
        let (answer, _) = call_adapter(&adapter(), &args, verb, &request, none);
        let answer = answer.expect("an answer");
        assert_eq!(super::error_code(&answer), Some(code), "{verb}: {answer}");
    }
}
