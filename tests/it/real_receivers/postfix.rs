//! `recon-postfix` against a private Postfix, end to end through recon: a
//! receipt lost after Postfix accepted the message, the message found in the
//! Maildir once delivered, the close refused without asking the adapter,
//! `not_applied` out of reach, a confirmation on existence; a message
//! submitted twice, which no reviewer may confirm; reads scoped to one
//! workspace and one operation; messages forged by an outside sender, which
//! never count; header values that could end a header, refused before any
//! SMTP; and a recipient Postfix refuses for good, reported as such.

use super::servers::{self, Mailbox};
use super::{
    answer_of, apply_request, dispatch, finish, ok_json, poll_until, prepare, query_request,
    snapshot, PROCESS_TIMEOUT,
};
use crate::support::{run, run_with_env, Lab, Run};
use recon::workspace::NewReceiver;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const DRILL_ENV: &str = "RECON_POSTFIX_DRILL";
const DIE_AFTER_ACCEPT: &str = "die-after-accept";
const KEY_ENV: &str = "RECON_POSTFIX_KEY";
/// The MAC key every keyed call of these tests gives the adapter.
const KEY: &str = "postfix-tests-key-0123456789";
const KEYED: &[(&str, &str)] = &[(KEY_ENV, KEY)];
/// Delivery is asynchronous: how long a test waits for it.
const DELIVERY: Duration = Duration::from_secs(60);

fn adapter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/postfix/recon-postfix")
}

/// The adapter's arguments for an SMTP endpoint and a Maildir.
fn adapter_args(smtp: &str, maildir: &Path) -> Vec<String> {
    let maildir = maildir.display().to_string();
    ["--smtp", smtp, "--maildir", &maildir]
        .map(String::from)
        .to_vec()
}

/// Runs the adapter straight, with `key` as its only MAC key (none when
/// `None`, whatever this process has): its answer and its stderr.
#[track_caller]
fn call(args: &[String], verb: &str, request: &Value, key: Option<&str>) -> (Value, String) {
    let mut command = Command::new(adapter());
    command.args(args).arg(verb).env_remove(KEY_ENV);
    if let Some(key) = key {
        command.env(KEY_ENV, key);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start recon-postfix");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("write the request");
    drop(stdin);
    let output = finish(child);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let answer = answer_of(&output).unwrap_or_else(|| panic!("no answer: {stderr}"));
    (answer, stderr)
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

/// The files of messages delivered to the mailbox so far.
fn delivered_files(mailbox: &Mailbox) -> Vec<PathBuf> {
    ["new", "cur"]
        .iter()
        .filter_map(|sub| std::fs::read_dir(mailbox.maildir.join(sub)).ok())
        .flat_map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())))
        .collect()
}

fn delivered(mailbox: &Mailbox) -> usize {
    delivered_files(mailbox).len()
}

fn mail_lab(program: &Path, smtp: &str, mailbox: &Mailbox) -> Lab {
    let mut lab = Lab::new();
    lab.ws
        .register_receiver(&NewReceiver {
            env: &[
                "RECON_POSTFIX_DRILL".to_string(),
                "RECON_POSTFIX_KEY".to_string(),
            ],
            name: "mail",
            actions: &["send_email".to_string()],
            program,
            args: &adapter_args(smtp, &mailbox.maildir),
            timeout_ms: Some(60_000),
        })
        .expect("register recon-postfix");
    lab
}

/// Prepares `op_id` for the mailbox and dispatches it with the adapter made
/// to die once Postfix accepted the message: the receipt is lost.
fn dispatch_losing_the_receipt(w: &str, op_id: &str, payload: &Value) {
    prepare(w, op_id, "send_email", payload);
    let report = dispatch(w, op_id, &[KEYED[0], (DRILL_ENV, DIE_AFTER_ACCEPT)]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    assert_eq!(report["receiver_exit_code"], json!(23), "{report}");
    assert_eq!(
        report["adapter_failure"]["kind"],
        json!("crash"),
        "{report}"
    );
}

/// Prepares `op_id` and dispatches it: its receipt's effect id.
#[track_caller]
fn dispatch_with_receipt(w: &str, op_id: &str, payload: &Value) -> String {
    prepare(w, op_id, "send_email", payload);
    let report = dispatch(w, op_id, KEYED);
    assert_eq!(report["outcome"], json!("receipt"), "{report}");
    report["effect_id"]
        .as_str()
        .expect("an effect id")
        .to_string()
}

/// A keyed ordinary read through recon: the snapshot's matches' effect ids
/// and the verdict.
#[track_caller]
fn read(w: &str, op_id: &str) -> (Vec<String>, Value) {
    let read = ok_json(&snapshot(w, op_id, None, KEYED), "snapshot");
    let matches = read["snapshot"]["matches"].as_array().expect("matches");
    let ids = matches
        .iter()
        .map(|m| {
            assert_eq!(m["op_id"], json!(op_id), "{read}");
            m["effect_id"].as_str().expect("an effect id").to_string()
        })
        .collect();
    (ids, read["verdict"].clone())
}

/// `recon reconcile --json` by reviewer `rita` against version 2, with the
/// key: a decision reads the receiver again.
fn reconcile(ws: &str, op_id: &str, decision: &str) -> Run {
    let args = ["reconcile", "--workspace", ws, op_id, "--reviewer", "rita"];
    let decision = ["--decision", decision, "--expected-version", "2", "--json"];
    run_with_env(&[&args[..], &decision[..]].concat(), None, KEYED)
}

/// The close is refused before anything is invoked: the wrapper's log of
/// calls does not change.
#[track_caller]
fn close_is_refused_without_invoking(w: &str, op_id: &str, log: &Path) {
    let before = calls(log);
    let close = snapshot(w, op_id, Some("ann"), KEYED);
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

/// Reads one SMTP reply (its continuation lines too) and checks its code.
#[track_caller]
fn smtp_reply(reader: &mut impl BufRead, code: &str) {
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("an SMTP reply");
        assert!(line.starts_with(code), "expected {code}, got {line:?}");
        if line.as_bytes().get(3) != Some(&b'-') {
            return;
        }
    }
}

/// Sends `message` (header lines, a blank line, a body; `\n` line ends) to
/// `to` by SMTP as anyone who can reach the server could: no adapter, no
/// key, whatever headers it likes.
#[track_caller]
fn send_as_outsider(smtp: &str, to: &str, message: &str) {
    let stream = TcpStream::connect(smtp).expect("connect to Postfix");
    stream
        .set_read_timeout(Some(PROCESS_TIMEOUT))
        .expect("a read timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut writer = stream;
    smtp_reply(&mut reader, "220");
    let steps = [
        ("EHLO outsider.test".to_string(), "250"),
        ("MAIL FROM:<outsider@elsewhere.test>".to_string(), "250"),
        (format!("RCPT TO:<{to}>"), "250"),
        ("DATA".to_string(), "354"),
    ];
    for (command, code) in steps {
        write!(writer, "{command}\r\n").expect("send a command");
        smtp_reply(&mut reader, code);
    }
    let data = message.replace('\n', "\r\n");
    write!(writer, "{data}\r\n.\r\n").expect("send the message");
    smtp_reply(&mut reader, "250");
    write!(writer, "QUIT\r\n").expect("quit");
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
    let read = ok_json(&snapshot(w, "mail-1", None, KEYED), "snapshot");
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
    // An unsafe retry outside recon: the same request (for the same
    // workspace), straight to the adapter.
    let mut request = apply_request("mail-2", "send_email", &payload);
    request["workspace"] = json!(lab.ws.id());
    let args = adapter_args(&smtp, &mailbox.maildir);
    let (answer, stderr) = call(&args, "apply", &request, Some(KEY));
    assert_eq!(answer["ok"], json!(true), "{answer} {stderr}");
    poll_until("both messages are delivered", DELIVERY, || {
        delivered(&mailbox) == 2
    });
    let read = ok_json(&snapshot(w, "mail-2", None, KEYED), "snapshot");
    assert_eq!(read["verdict"], json!("duplicate_matches"), "{read}");
    let matches = read["snapshot"]["matches"].as_array().expect("matches");
    assert!(
        matches.iter().all(|m| m["payload"] == payload),
        "exact copies: {read}"
    );
    let confirm = reconcile(w, "mail-2", "confirmed");
    assert_eq!(
        confirm.code,
        Some(3),
        "a duplicate is no permission to pick one: {}",
        confirm.stderr
    );
}

#[test]
fn two_workspaces_sharing_one_mailbox_never_read_each_others_mail() {
    let test = "two_workspaces_sharing_one_mailbox_never_read_each_others_mail";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let a = mail_lab(&adapter(), &postfix.smtp(), &mailbox);
    let b = mail_lab(&adapter(), &postfix.smtp(), &mailbox);
    let (wa, wb) = (a.path_str(), b.path_str());
    let payload = json!({"to": mailbox.address, "subject": "Shared", "body": "same op id"});
    let sent_a = dispatch_with_receipt(&wa, "same-op", &payload);
    prepare(&wb, "same-op", "send_email", &payload);
    poll_until("A's message is delivered", DELIVERY, || {
        delivered(&mailbox) == 1
    });
    // B's operation was never sent: A's message, with the same op id and
    // payload in the same Maildir, is not B's.
    let (b_ids, b_verdict) = read(&wb, "same-op");
    assert_eq!(b_ids, Vec::<String>::new(), "B sees none of A's mail");
    assert_eq!(b_verdict, json!("inconclusive"));
    let (a_ids, a_verdict) = read(&wa, "same-op");
    assert_eq!(a_ids, [sent_a.as_str()], "A sees its own message");
    assert_eq!(a_verdict, json!("exact_match_existence_only"));
    // Once B sends too, each still sees exactly its own message.
    let report = dispatch(&wb, "same-op", KEYED);
    assert_eq!(report["outcome"], json!("receipt"), "{report}");
    let sent_b = report["effect_id"].as_str().expect("an effect id");
    poll_until("B's message is delivered", DELIVERY, || {
        delivered(&mailbox) == 2
    });
    assert_eq!(read(&wa, "same-op").0, [sent_a.as_str()]);
    assert_eq!(read(&wb, "same-op").0, [sent_b]);
    assert_ne!(sent_a, sent_b);
}

#[test]
fn a_query_returns_only_the_messages_of_its_own_operation() {
    let test = "a_query_returns_only_the_messages_of_its_own_operation";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let lab = mail_lab(&adapter(), &postfix.smtp(), &mailbox);
    let ws = lab.path_str();
    let payload = json!({"to": mailbox.address, "subject": "Same", "body": "same payload"});
    let first = dispatch_with_receipt(&ws, "op-first", &payload);
    let second = dispatch_with_receipt(&ws, "op-second", &payload);
    poll_until("both messages are delivered", DELIVERY, || {
        delivered(&mailbox) == 2
    });
    // A read that returned every operation's messages would hand recon a
    // match of another operation, or two matches.
    for (op_id, effect_id) in [("op-first", &first), ("op-second", &second)] {
        let (ids, verdict) = read(&ws, op_id);
        assert_eq!(ids, [effect_id.as_str()], "{op_id} reads only its own");
        assert_eq!(verdict, json!("exact_match_existence_only"), "{op_id}");
    }
}

#[test]
fn mail_forged_with_recon_headers_neither_confirms_nor_duplicates_an_operation() {
    let test = "mail_forged_with_recon_headers_neither_confirms_nor_duplicates_an_operation";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let smtp = postfix.smtp();
    let lab = mail_lab(&adapter(), &smtp, &mailbox);
    let ws = lab.path_str();
    let payload = json!({"to": mailbox.address, "subject": "Invoice", "body": "Pay 10."});
    dispatch_losing_the_receipt(&ws, "mail-f", &payload);
    poll_until("the real message is delivered", DELIVERY, || {
        delivered(&mailbox) == 1
    });
    let real = std::fs::read_to_string(&delivered_files(&mailbox)[0]).expect("the real message");
    let header = |name: &str| {
        real.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("no {name} in {real}"))
            .trim()
            .to_string()
    };
    let (real_mac, real_id) = (header("X-Recon-Mac"), header("Message-ID"));
    // Three forgeries naming the same workspace, operation, action and
    // Message-ID: no MAC and a made-up MAC over the real payload, and the
    // real MAC copied onto an edited body. Bodies in base64, as the
    // adapter writes them: "Pay 10." and "Pay 10000.".
    let forged = |mac: Option<&str>, body: &str| {
        let mac = mac
            .map(|m| format!("X-Recon-Mac: {m}\n"))
            .unwrap_or_default();
        format!(
            "From: outsider@elsewhere.test\nTo: {to}\nSubject: Invoice\n\
             Message-ID: {real_id}\nX-Recon-Workspace: {ws_id}\n\
             X-Recon-Op-Id: mail-f\nX-Recon-Action-Kind: send_email\n{mac}\
             Content-Transfer-Encoding: base64\n\n{body}",
            to = mailbox.address,
            ws_id = lab.ws.id(),
        )
    };
    let made_up = "0".repeat(64);
    for (mac, body) in [
        (None, "UGF5IDEwLg=="),
        (Some(made_up.as_str()), "UGF5IDEwLg=="),
        (Some(real_mac.as_str()), "UGF5IDEwMDAwLg=="),
    ] {
        send_as_outsider(&smtp, &mailbox.address, &forged(mac, body));
    }
    poll_until("the forgeries are delivered", DELIVERY, || {
        delivered(&mailbox) == 4
    });
    let (ids, verdict) = read(&ws, "mail-f");
    assert_eq!(ids.len(), 1, "only the adapter's own message counts");
    assert_eq!(verdict, json!("exact_match_existence_only"));
    // The adapter says, one escaped line each, which messages it left out.
    let mut request = query_request("mail-f");
    request["workspace"] = json!(lab.ws.id());
    let args = adapter_args(&smtp, &mailbox.maildir);
    let (answer, stderr) = call(&args, "query", &request, Some(KEY));
    assert_eq!(answer["matches"].as_array().map(Vec::len), Some(1));
    let ignored: Vec<&str> = stderr.lines().filter(|l| l.contains("ignored")).collect();
    assert_eq!(ignored.len(), 3, "{stderr}");
    let why = ["has no X-Recon-Mac", "X-Recon-Mac is missing or wrong"];
    assert!(
        ignored
            .iter()
            .all(|line| why.iter().any(|why| line.contains(why))),
        "{stderr}"
    );
}

#[test]
fn recon_postfix_without_a_key_of_16_bytes_refuses_to_send_or_read_but_describes() {
    // Nothing listens on the port: were the key checked after the SMTP
    // connection, the answer would be `unavailable`.
    let port = servers::free_port().expect("a free port");
    let scratch = tempfile::tempdir().expect("temp dir");
    let args = adapter_args(&format!("127.0.0.1:{port}"), scratch.path());
    let payload = json!({"to": "box0@example.test", "subject": "s", "body": "b"});
    let short = "k".repeat(15);
    for key in [None, Some(""), Some(short.as_str())] {
        let (described, _) = call(&args, "describe", &json!({"recon_adapter": 1}), key);
        assert_eq!(described["name"], json!("recon-postfix"), "{described}");
        for (verb, request) in [
            ("apply", apply_request("nokey-1", "send_email", &payload)),
            ("query", query_request("nokey-1")),
        ] {
            let (answer, _) = call(&args, verb, &request, key);
            assert_eq!(
                super::error_code(&answer),
                Some("internal"),
                "{verb} with {key:?}: {answer}"
            );
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(KEY_ENV), "{verb}: {answer}");
        }
    }
}

#[test]
fn a_header_value_that_could_end_or_add_a_header_is_refused_before_any_smtp() {
    // A listener that never answers: any SMTP attempt would wait on it, and
    // would stay queued for accept() after the adapter is gone.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let smtp = listener.local_addr().expect("address").to_string();
    let scratch = tempfile::tempdir().expect("temp dir");
    let args = adapter_args(&smtp, scratch.path());
    #[track_caller]
    fn check(args: &[String], field: &[&str], value: &str) {
        let payload = json!({"to": "box0@example.test", "subject": "s", "body": "b"});
        let mut request = apply_request("hdr-1", "send_email", &payload);
        let mut slot = &mut request;
        for name in field {
            slot = &mut slot[*name];
        }
        *slot = json!(value);
        let (answer, stderr) = call(args, "apply", &request, Some(KEY));
        assert_eq!(
            super::error_code(&answer),
            Some("bad_request"),
            "{field:?} = {value:?}: {answer} {stderr}"
        );
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("nothing was sent"), "{answer}");
    }
    check(&args, &["op", "payload", "to"], "box0@example.test\n");
    check(
        &args,
        &["op", "payload", "to"],
        "box0@example.test\r\nBcc: box1@example.test",
    );
    check(&args, &["op", "payload", "to"], "a@example.test, b@x");
    check(
        &args,
        &["op", "payload", "subject"],
        "Hello\r\nBcc: box1@example.test",
    );
    check(&args, &["op", "payload", "subject"], "nul\0byte");
    check(
        &args,
        &["op", "payload", "subject"],
        "line\u{2028}separator",
    );
    check(&args, &["op", "op_id"], "hdr-1\nBcc: x@example.test");
    check(&args, &["op", "action_kind"], "send_email\r");
    check(&args, &["op", "compensates_effect_id"], "mail-1\n");
    check(&args, &["workspace"], "ws\u{85}");
    let from = [&args[..], &["--from".into(), "me@example.test\n".into()]].concat();
    let (answer, _) = call(&from, "describe", &json!({"recon_adapter": 1}), Some(KEY));
    assert_eq!(super::error_code(&answer), Some("bad_request"), "{answer}");
    listener.set_nonblocking(true).expect("nonblocking");
    let attempt = listener.accept();
    assert!(
        matches!(&attempt, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "no SMTP connection was made: {attempt:?}"
    );
}

#[test]
fn a_recipient_refused_for_good_is_reported_as_permanent_and_unsent() {
    let test = "a_recipient_refused_for_good_is_reported_as_permanent_and_unsent";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let lab = mail_lab(&adapter(), &postfix.smtp(), &mailbox);
    let ws = lab.path_str();
    // Postfix refuses at RCPT an address its virtual mailbox map lacks; the
    // adapter refuses one that is no plain address before any SMTP.
    for (op_id, to, says) in [
        (
            "unknown-box",
            "nobody@example.test",
            "Postfix refused the recipient nobody@example.test permanently at RCPT TO (550",
        ),
        (
            "no-address",
            "billing department",
            "the recipient \"billing department\" is not one plain address",
        ),
    ] {
        let payload = json!({"to": to, "subject": "s", "body": "b"});
        prepare(&ws, op_id, "send_email", &payload);
        let report = dispatch(&ws, op_id, KEYED);
        assert_eq!(report["outcome"], json!("unknown"), "{report}");
        let failure = &report["adapter_failure"];
        assert_eq!(failure["kind"], json!("error"), "{report}");
        let detail = failure["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with("bad_request: "), "{report}");
        assert!(detail.contains(says), "{report}");
        assert!(detail.contains("nothing was sent"), "{report}");
    }
}

#[test]
fn recon_postfix_names_its_store_by_maildir_and_smtp_endpoint() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let (one, other) = (scratch.path().join("one"), scratch.path().join("other"));
    let instance = |smtp: &str, maildir: &Path| {
        let args = adapter_args(smtp, maildir);
        let (answer, _) = call(&args, "describe", &json!({"recon_adapter": 1}), None);
        assert_eq!(answer["version"], json!("2"), "{answer}");
        let instance = answer["instance"].as_str().expect("an instance");
        assert!(instance.starts_with("recon-postfix:"), "{answer}");
        instance.to_string()
    };
    let first = instance("127.0.0.1:2525", &one);
    assert_eq!(instance("127.0.0.1:2525", &one), first, "stable");
    assert_ne!(instance("127.0.0.1:2526", &one), first, "another endpoint");
    assert_ne!(instance("127.0.0.1:2525", &other), first, "another Maildir");
}

#[test]
fn recon_postfix_cannot_close_and_answers_unavailable_when_postfix_is_down() {
    let port = servers::free_port().expect("a free port");
    let scratch = tempfile::tempdir().expect("temp dir");
    let args = adapter_args(
        &format!("127.0.0.1:{port}"),
        &scratch.path().join("no-such-maildir"),
    );
    let (described, _) = call(&args, "describe", &json!({"recon_adapter": 1}), Some(KEY));
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
        ("query", query_request("down-1"), "unavailable"),
        (
            "close",
            super::close_request("down-1", "ann"),
            "unsupported",
        ),
    ];
    for (verb, request, code) in requests {
        let (answer, _) = call(&args, verb, &request, Some(KEY));
        assert_eq!(super::error_code(&answer), Some(code), "{verb}: {answer}");
    }
}

#[test]
fn recon_postfix_refuses_a_request_without_its_workspace() {
    let port = servers::free_port().expect("a free port");
    let scratch = tempfile::tempdir().expect("temp dir");
    let args = adapter_args(&format!("127.0.0.1:{port}"), scratch.path());
    let payload = json!({"to": "box0@example.test", "subject": "s", "body": "b"});
    for (verb, mut request) in [
        ("apply", apply_request("ws-1", "send_email", &payload)),
        ("query", query_request("ws-1")),
        ("close", super::close_request("ws-1", "ann")),
    ] {
        for workspace in [None, Some(json!("")), Some(json!(7))] {
            match &workspace {
                None => {
                    if let Some(fields) = request.as_object_mut() {
                        fields.remove("workspace");
                    }
                }
                Some(value) => request["workspace"] = value.clone(),
            }
            let (answer, _) = call(&args, verb, &request, Some(KEY));
            assert_eq!(
                super::error_code(&answer),
                Some("bad_request"),
                "{verb} with workspace {workspace:?}: {answer}"
            );
        }
    }
}

/// Three mails whose receipts were lost, then one `observe` of them and of
/// an operation never applied: recon starts recon-postfix once as a
/// session (after the one-shot describe of its re-check), and asks about all four in one batch, which reads the Maildir
/// once; each gets the verdict a single query would give.
#[test]
fn observe_reads_recon_postfix_through_one_session_and_one_batch() {
    let test = "observe_reads_recon_postfix_through_one_session_and_one_batch";
    let Some(postfix) = servers::require(test, servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let scratch = tempfile::tempdir().expect("temp dir");
    let (wrapper, log) = logged_adapter(scratch.path());
    let lab = mail_lab(&wrapper, &postfix.smtp(), &mailbox);
    let ws = lab.path_str();
    let w = ws.as_str();
    let ops = ["mail-1", "mail-2", "mail-3"];
    for op in ops {
        let payload = json!({"to": mailbox.address, "subject": op, "body": "batched\n"});
        dispatch_losing_the_receipt(w, op, &payload);
    }
    let payload = json!({"to": mailbox.address, "subject": "never", "body": "sent\n"});
    prepare(w, "mail-4", "send_email", &payload);
    poll_until("the messages are delivered", DELIVERY, || {
        delivered(&mailbox) == ops.len()
    });
    let before = calls(&log).len();
    let args = [
        "observe",
        "--workspace",
        w,
        "mail-1",
        "mail-2",
        "mail-3",
        "mail-4",
    ];
    let out = run_with_env(
        &[&args[..], &["--by", "dana", "--json"]].concat(),
        None,
        KEYED,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // Its describe, re-run before its first use in the command, then the
    // one session.
    assert_eq!(calls(&log)[before..], ["describe", "session"]);
    let verdicts: Vec<(String, String)> = (out.json().as_array().expect("observed").iter())
        .map(|o| {
            (
                o["op_id"].as_str().unwrap_or_default().to_string(),
                o["verdict"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let existence = "exact_match_existence_only".to_string();
    assert_eq!(
        verdicts,
        [
            ("mail-1".to_string(), existence.clone()),
            ("mail-2".to_string(), existence.clone()),
            ("mail-3".to_string(), existence),
            ("mail-4".to_string(), "inconclusive".to_string()),
        ]
    );
}
