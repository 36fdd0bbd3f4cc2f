//! What the real receivers cost, against servers this bench starts itself
//! (the tests' `servers.rs`; PostgreSQL here flushes its commits, as a
//! production server does):
//!
//! - `recon-pg-ledger`: `apply` and `close` as recon calls them, one process
//!   each (spawn, connect, one transaction, answer), median and p99 over
//!   `RECON_BENCH_CALLS` calls each (default 500), beside `describe` (spawn
//!   and answer, no server) for the process's own share;
//! - `recon dispatch` through `recon-postfix` to Postfix's acceptance, and on
//!   to the message in the Maildir, median of `RECON_BENCH_MAILS` (default 7).
//!
//! `cargo bench --bench real_receivers`

#[path = "../tests/it/real_receivers/servers.rs"]
mod servers;

use recon::workspace::NewReceiver;
use recon::{OpenOptions, Workspace};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn count(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One adapter call, timed from spawn to its answer; panics unless it
/// answered `ok` (a failing call measures nothing).
fn timed_call(program: &Path, args: &[&str], verb: &str, request: &Value) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .arg(verb)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the adapter");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("write the request");
    drop(stdin);
    let out = child.wait_with_output().expect("wait for the adapter");
    let elapsed = start.elapsed();
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    assert!(
        verb == "describe" || answer["ok"] == json!(true),
        "{verb}: {answer}"
    );
    elapsed
}

/// Median and 99th percentile, in milliseconds.
fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:7.2} ms   p99 {:7.2} ms   ({} calls)",
        ms(at(0.5)),
        ms(at(0.99)),
        samples.len()
    )
}

fn pg_ledger() {
    let Some(pg) = servers::require("bench pg", servers::postgres()) else {
        return;
    };
    let Some(binary) = servers::require("bench pg", servers::pg_ledger_binary()) else {
        return;
    };
    let url = pg.new_database("bench");
    let args = ["--database", url.as_str()];
    let calls = count("RECON_BENCH_CALLS", 500);
    let describe: Vec<Duration> = (0..calls)
        .map(|_| timed_call(binary, &args, "describe", &json!({"recon_adapter": 1})))
        .collect();
    let mut apply = Vec::new();
    let mut close = Vec::new();
    for n in 0..calls {
        let op_id = format!("bench-{n}");
        let request = json!({"recon_adapter": 1, "workspace": "bench", "op": {
            "op_id": op_id, "action_kind": "ledger_write",
            "payload": {"amount": n, "account": "acct-9"}, "compensates_effect_id": null}});
        apply.push(timed_call(binary, &args, "apply", &request));
    }
    for n in 0..calls {
        let request = json!({"recon_adapter": 1, "workspace": "bench", "op_id": format!("bench-{n}"), "authorized_by": "ann"});
        close.push(timed_call(binary, &args, "close", &request));
    }
    println!("recon-pg-ledger describe  {}", summary(describe));
    println!("recon-pg-ledger apply     {}", summary(apply));
    println!("recon-pg-ledger close     {}", summary(close));
}

fn delivered(maildir: &Path) -> usize {
    ["new", "cur"]
        .iter()
        .filter_map(|sub| std::fs::read_dir(maildir.join(sub)).ok())
        .map(|entries| entries.count())
        .sum()
}

fn postfix_dispatch() {
    let Some(postfix) = servers::require("bench postfix", servers::postfix()) else {
        return;
    };
    let mailbox = postfix.mailbox();
    let dir = tempfile::tempdir().expect("temp dir");
    let recon = PathBuf::from(env!("CARGO_BIN_EXE_recon"));
    let mut ws = Workspace::open(dir.path(), OpenOptions::default().creating()).expect("workspace");
    let adapter = Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/postfix/recon-postfix");
    let args = [
        "--smtp".to_string(),
        postfix.smtp(),
        "--maildir".to_string(),
    ];
    let args = [&args[..], &[mailbox.maildir.display().to_string()]].concat();
    let actions = ["send_email".to_string()];
    let new = NewReceiver {
        name: "mail",
        actions: &actions,
        program: &adapter,
        args: &args,
        timeout_ms: None,
        env: &["RECON_POSTFIX_KEY".to_string()],
    };
    ws.register_receiver(&new).expect("register recon-postfix");
    let (mut accepted, mut in_maildir) = (Vec::new(), Vec::new());
    for n in 0..count("RECON_BENCH_MAILS", 7) {
        let op_id = format!("mail-{n}");
        let payload =
            json!({"to": mailbox.address, "subject": format!("bench {n}"), "body": "hello"});
        ws.prepare(&op_id, "send_email", &payload).expect("prepare");
        let start = Instant::now();
        let out = Command::new(&recon)
            .env("RECON_POSTFIX_KEY", "bench-key-0123456789abcdef")
            .args([
                "dispatch",
                "--workspace",
                &dir.path().display().to_string(),
                &op_id,
                "--json",
            ])
            .output()
            .expect("recon dispatch");
        accepted.push(start.elapsed());
        let report: Value = serde_json::from_slice(&out.stdout).expect("a dispatch report");
        assert_eq!(report["outcome"], json!("receipt"), "{report}");
        while delivered(&mailbox.maildir) <= n {
            assert!(start.elapsed() < Duration::from_secs(60), "not delivered");
            std::thread::sleep(Duration::from_millis(1));
        }
        in_maildir.push(start.elapsed());
    }
    println!("recon dispatch -> Postfix accepted   {}", summary(accepted));
    println!(
        "recon dispatch -> in the Maildir     {}",
        summary(in_maildir)
    );
}

fn main() {
    servers::durable_postgres();
    pg_ledger();
    postfix_dispatch();
}
