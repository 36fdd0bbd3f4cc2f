//! Issue 21 item 4: a long `recon resolve` stopped with Ctrl-C keeps what
//! it decided, counts the rest `not_attempted`, exits 130, and a run
//! again finishes the rest. The adapter holds a close (fifos, no sleeps)
//! while the test sends SIGINT.

use crate::stores::{Site, Store};
use crate::support::{adapter_fixture, interrupt, mkfifo, read_fifo, recon_bin};
use recon::workspace::NewReceiver;
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// An outbox whose `fax` operations route to the fixture adapter in a
/// session, closing in batches of 5 and holding its third close until
/// released through the fifos `held` and `release` in the site's scratch
/// directory; `count` operations are unknown, each applied at the
/// receiver (the receipt lost).
fn held_fax(count: usize) -> (Site, Vec<String>) {
    let mut site = Site::new(Store::Sqlite);
    let dir = site.scratch().to_path_buf();
    let file = |name: &str| dir.join(name).display().to_string();
    let args: Vec<String> = [
        "--state",
        &file("fax.json"),
        "--mode-file",
        &file("fax.mode"),
        "--complete",
        "--authoritative",
        "--can-close",
        "--session",
        "--batch",
        "5",
        "--hold",
        &file(""),
        "--hold-after",
        "2",
        "--hold-verb",
        "close",
    ]
    .map(String::from)
    .to_vec();
    mkfifo(&dir.join("held"));
    mkfifo(&dir.join("release"));
    site.ws
        .register_receiver(&NewReceiver {
            name: "fax",
            actions: &["fax".to_string()],
            program: &adapter_fixture(),
            args: &args,
            timeout_ms: None,
            env: &[],
        })
        .expect("register the fax adapter");
    std::fs::write(dir.join("fax.mode"), "apply:crash-after").unwrap();
    let ops: Vec<String> = (1..=count).map(|n| format!("op-{n:03}")).collect();
    for op in &ops {
        site.ws.prepare(op, "fax", &json!({ "page": op })).unwrap();
        site.ws.dispatch(op, Default::default()).unwrap();
    }
    std::fs::write(dir.join("fax.mode"), "").unwrap();
    (site, ops)
}

/// `recon resolve` by the policy, as ann, with `extra`.
fn resolve_words<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut words = vec!["resolve", "--policy", "provable", "--by", "ann"];
    words.extend(["--authorized-by", "ann", "--older-than", "0s"]);
    words.extend(extra);
    words
}

/// The operations the journal holds a close authorization for, in order.
fn close_requests(site: &Site) -> Vec<String> {
    let db = rusqlite::Connection::open(site.path().join("sender.sqlite")).unwrap();
    let mut query = db
        .prepare("SELECT op_id FROM journal WHERE kind = 'close_requested' ORDER BY seq")
        .unwrap();
    let ids = query.query_map([], |row| row.get(0)).unwrap();
    ids.collect::<Result<_, _>>().unwrap()
}

/// `recon verify` passes: the journal, the chain and every decision's
/// snapshot hold (the effects are the adapter's, which the SQLite
/// invariants do not read).
#[track_caller]
fn verified(site: &Site) {
    let verify = site.run(&["verify"], None);
    assert_eq!(verify.code, Some(0), "{}{}", verify.stdout, verify.stderr);
}

/// Each operation's outcome in a report, in order.
fn outcomes(report: &Value) -> Vec<(String, String)> {
    (report["operations"].as_array().unwrap().iter())
        .map(|r| {
            let field = |k: &str| r[k].as_str().unwrap().to_string();
            (field("op_id"), field("outcome"))
        })
        .collect()
}

#[test]
fn ctrl_c_stops_resolve_after_the_close_in_hand_and_keeps_what_it_decided() {
    // 30 operations, closes in batches of 5: the third close is held.
    let (site, ops) = held_fax(30);
    let dir = site.scratch().to_path_buf();
    let plan = dir.join("plan.json").display().to_string();
    let dry = site.run(&resolve_words(&["--dry-run", "--output", &plan]), None);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert!(close_requests(&site).is_empty(), "a dry run closes nothing");

    let words = resolve_words(&["--plan", &plan, "--json"]);
    let mut args: Vec<String> = vec![words[0].to_string()];
    args.extend(site.args());
    args.extend(words[1..].iter().map(|w| w.to_string()));
    let child = Command::new(recon_bin())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start resolve");
    assert_eq!(read_fifo(&dir.join("held")), "held\n");
    interrupt(child.id());
    std::fs::write(dir.join("release"), "go\n").expect("release the adapter");
    let out = child.wait_with_output().expect("resolve ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("the report");
    // The held close (the third batch) was answered and decided; nothing
    // was asked about the rest.
    let expected: Vec<(String, String)> = (ops.iter().enumerate())
        .map(|(i, op)| {
            let outcome = if i < 15 { "confirmed" } else { "not_attempted" };
            (op.clone(), outcome.to_string())
        })
        .collect();
    assert_eq!(outcomes(&report), expected);
    assert_eq!(report["confirmed"], 15);
    assert_eq!(report["skipped"], json!({"not_attempted": 15}));
    assert_eq!(report["interrupted"], json!({"not_attempted": 15}));
    // No progress on a stderr that is not a terminal: one line, the stop.
    assert_eq!(
        stderr.trim_end(),
        "interrupted: 15 not attempted (what was recorded stays recorded; run resolve again \
         to finish the rest)"
    );
    // Only the closes asked were authorized, and what was decided is sound.
    assert_eq!(close_requests(&site), ops[..15]);
    for (i, op) in ops.iter().enumerate() {
        let op = site.ws.require(op).expect("the operation");
        let state = if i < 15 { "confirmed" } else { "unknown" };
        assert_eq!(op.state.to_string(), state, "{}", op.op_id);
    }
    verified(&site);

    // The same plan again finishes the rest (a new session holds its
    // third close again: released at once).
    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert_eq!(read_fifo(&dir.join("held")), "held\n");
            std::fs::write(dir.join("release"), "go\n").unwrap();
        });
        let again = site.run(&resolve_words(&["--plan", &plan, "--json"]), None);
        assert_eq!(again.code, Some(0), "{}", again.stderr);
        let report = again.json();
        assert_eq!(report["confirmed"], 15);
        assert_eq!(report["skipped"], json!({"version_changed": 15}));
        assert_eq!(report.get("interrupted"), None);
    });
    for op in &ops {
        let op = site.ws.require(op).expect("the operation");
        assert_eq!(op.state.to_string(), "confirmed", "{}", op.op_id);
    }
    verified(&site);
}
