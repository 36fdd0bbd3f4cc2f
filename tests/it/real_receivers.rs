//! Real receivers against real servers: `recon-pg-ledger` on a throwaway
//! PostgreSQL, and `recon-postfix` on a private Postfix, both started by
//! this test process (`servers`) and stopped when it exits.
//!
//! Receivers are registered through the library (`Workspace` and
//! `NewReceiver`); everything after that goes through the `recon` binary, or
//! straight to the adapter where the adapter itself is under test (the
//! close race, a lost close answer, an unsafe retry outside recon).
//! Orderings come from fifos and from what the server shows (a close
//! waiting on its lock); waits for asynchronous delivery are bounded polls.

mod pg;
mod pg_roles;
mod postfix;
pub mod servers;

use crate::support::{run, run_with_env, Run};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one adapter or recon process may take in these tests.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts `PROGRAM ARGS VERB` with `env` and writes `request` as its one
/// line on stdin.
pub fn start_adapter(
    program: &Path,
    args: &[&str],
    verb: &str,
    request: &Value,
    env: &[(&str, &OsStr)],
) -> Child {
    let mut child = Command::new(program)
        .args(args)
        .arg(verb)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("write the request");
    child
}

/// Waits for a started process, at most [`PROCESS_TIMEOUT`]; kills it and
/// fails the test past that.
#[track_caller]
pub fn finish(child: Child) -> Output {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(PROCESS_TIMEOUT) {
        Ok(output) => output.expect("wait for the process"),
        Err(_) => {
            // SAFETY: kill has no memory preconditions; the pid is our
            // child's, not yet reaped (its waiter is still blocked).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("process {pid} ran past {PROCESS_TIMEOUT:?}");
        }
    }
}

/// The one answer line of an adapter run, or `None` when it printed none.
#[track_caller]
pub fn answer_of(output: &Output) -> Option<Value> {
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines = text.lines();
    let answer = lines.next().map(|line| {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    });
    assert_eq!(lines.next(), None, "one answer line: {text}");
    answer
}

/// Runs one adapter call to its end: its answer (if any) and exit code.
#[track_caller]
pub fn call_adapter(
    program: &Path,
    args: &[&str],
    verb: &str,
    request: &Value,
    env: &[(&str, &OsStr)],
) -> (Option<Value>, Option<i32>) {
    let output = finish(start_adapter(program, args, verb, request, env));
    (answer_of(&output), output.status.code())
}

/// The workspace id the direct adapter calls of these tests name.
pub const TEST_WORKSPACE: &str = "ws-real-receivers";

pub fn apply_request(op_id: &str, action_kind: &str, payload: &Value) -> Value {
    json!({"recon_adapter": 1, "workspace": TEST_WORKSPACE, "op": {
        "op_id": op_id,
        "action_kind": action_kind,
        "payload": payload,
        "compensates_effect_id": null,
    }})
}

pub fn query_request(op_id: &str) -> Value {
    json!({"recon_adapter": 1, "workspace": TEST_WORKSPACE, "op_id": op_id})
}

pub fn close_request(op_id: &str, authorized_by: &str) -> Value {
    json!({"recon_adapter": 1, "workspace": TEST_WORKSPACE, "op_id": op_id, "authorized_by": authorized_by})
}

/// The error code of an `ok: false` answer.
pub fn error_code(answer: &Value) -> Option<&str> {
    (answer["ok"] == json!(false))
        .then(|| answer["error"]["code"].as_str())
        .flatten()
}

/// Polls `ready` until it holds, for at most `limit`: for what happens
/// asynchronously (a mail delivered, a close reaching its lock).
#[track_caller]
pub fn poll_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The JSON a successful `recon` run printed.
#[track_caller]
pub fn ok_json(out: &Run, what: &str) -> Value {
    assert_eq!(out.code, Some(0), "{what}: {}", out.stderr);
    out.json()
}

/// `recon prepare` of an original for `action`.
#[track_caller]
pub fn prepare(ws: &str, op_id: &str, action: &str, payload: &Value) {
    let payload = payload.to_string();
    let args = [
        "prepare",
        "--workspace",
        ws,
        "--op",
        op_id,
        "--action",
        action,
    ];
    ok_json(
        &run(
            &[&args[..], &["--payload", &payload, "--json"]].concat(),
            None,
        ),
        "prepare",
    );
}

/// `recon dispatch --json` with `env`: the dispatch report.
#[track_caller]
pub fn dispatch(ws: &str, op_id: &str, env: &[(&str, &str)]) -> Value {
    let out = run_with_env(&["dispatch", "--workspace", ws, op_id, "--json"], None, env);
    ok_json(&out, "dispatch")
}

/// `recon snapshot --json`, closing it when `authorized_by` is given.
pub fn snapshot(ws: &str, op_id: &str, authorized_by: Option<&str>, env: &[(&str, &str)]) -> Run {
    let mut args = vec!["snapshot", "--workspace", ws, op_id, "--json"];
    if let Some(who) = authorized_by {
        args.extend(["--close", "--authorized-by", who]);
    }
    run_with_env(&args, None, env)
}

/// `recon reconcile --json` by reviewer `rita` against version 2 (the
/// version of an operation dispatched once).
pub fn reconcile(ws: &str, op_id: &str, decision: &str) -> Run {
    let args = ["reconcile", "--workspace", ws, op_id, "--reviewer", "rita"];
    let decision = ["--decision", decision, "--expected-version", "2", "--json"];
    run(&[&args[..], &decision[..]].concat(), None)
}
