//! Issue 21 item 4: a long `recon resolve` stopped with Ctrl-C keeps what
//! it decided, counts the rest `not_attempted`, exits 130, and a run
//! again finishes the rest. The adapter holds a close or a read (fifos,
//! no sleeps) while the test sends SIGINT; the library's run is stopped
//! by a [`Watch`] of the test's own.

use crate::stores::{on_both_stores, Site, Store};
use crate::support::{interrupt, read_fifo, recon_bin};
use recon::domain::{OpState, Policy};
use recon::receiver::Fault;
use recon::workspace::{ResolveRequest, Selection, Watch};
use serde_json::{json, Value};
use std::cell::Cell;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A watch that lets `allowed` requests through, then stops, and keeps
/// what it was told.
struct StopAfter {
    allowed: usize,
    asked: Cell<usize>,
    selected: Option<usize>,
    done: Vec<usize>,
}

impl Watch for StopAfter {
    fn selected(&mut self, total: Option<usize>) {
        self.selected = total;
    }

    fn stop(&self) -> bool {
        self.asked.set(self.asked.get() + 1);
        self.asked.get() > self.allowed
    }

    fn progress(&mut self, done: usize) {
        self.done.push(done);
    }
}

on_both_stores!(a_stopped_resolve_decides_what_it_closed_and_asks_nothing_more);
fn a_stopped_resolve_decides_what_it_closed_and_asks_nothing_more(store: Store) {
    let mut site = Site::new(store);
    let ops: Vec<String> = (1..=6).map(|n| format!("op-{n}")).collect();
    for op in &ops {
        let fault = Some(Fault::CrashAfterCommit);
        site.dispatched(op, "send_email", &json!({ "to": op }), fault);
    }
    let request = ResolveRequest {
        policy: Policy::Provable,
        by: "ann",
        authorized_by: "ann",
        older_than: Duration::ZERO,
        dry_run: false,
        planned: false,
    };
    let list = site.ws.resolve_selection(Selection::Ids(&ops)).unwrap();
    // The receiver answers one operation a request: the stop is asked
    // once before the chunk, before each of the six reads, and before
    // each close; the fourth close is not asked.
    let mut watch = StopAfter {
        allowed: 1 + 6 + 3,
        asked: Cell::new(0),
        selected: None,
        done: Vec::new(),
    };
    let report = site
        .ws
        .resolve_watched(&list, &request, &mut watch)
        .unwrap();
    assert_eq!((watch.selected, &watch.done[..]), (Some(6), &[6][..]));
    let outcomes: Vec<&str> = (report.operations.iter())
        .map(|r| r.outcome.as_str())
        .collect();
    assert_eq!(
        outcomes,
        [
            "confirmed",
            "confirmed",
            "confirmed",
            "not_attempted",
            "not_attempted",
            "not_attempted"
        ]
    );
    assert_eq!(report.confirmed, 3);
    assert_eq!(report.interrupted.map(|i| i.not_attempted), Some(3));
    for (i, op) in ops.iter().enumerate() {
        assert_eq!(site.closed(op), i < 3, "{op}: closed only when asked");
        let state = site.ws.require(op).unwrap().state;
        let expected = if i < 3 {
            OpState::Confirmed
        } else {
            OpState::Unknown
        };
        assert_eq!(state, expected, "{op}");
    }
    site.assert_sound();
    // A run again, unwatched, finishes the rest.
    let list = site.ws.resolve_selection(Selection::Ids(&ops)).unwrap();
    let again = site.ws.resolve(&list, &request).unwrap();
    assert_eq!((again.confirmed, again.interrupted.is_none()), (3, true));
    site.assert_sound();
}

/// An outbox whose `fax` operations route to the fixture adapter in a
/// session, closing in batches of 5 and holding its third `hold_verb`
/// request until released through the fifos `held` and `release` in the
/// site's scratch directory; `count` operations are unknown, each applied
/// at the receiver (the receipt lost).
fn held_fax(count: usize, hold_verb: &str) -> (Site, Vec<String>) {
    crate::outage::fax_outage(Store::Sqlite, count, 5, Some((2, hold_verb)))
}

/// Starts `recon resolve` on `site` (see [`resolve_words`]), its output
/// piped.
fn spawn_resolve(site: &Site, extra: &[&str]) -> std::process::Child {
    let words = resolve_words(extra);
    let mut args: Vec<String> = vec![words[0].to_string()];
    args.extend(site.args());
    args.extend(words[1..].iter().map(|w| w.to_string()));
    Command::new(recon_bin())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start resolve")
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
    let (site, ops) = held_fax(30, "close");
    let dir = site.scratch().to_path_buf();
    let plan = dir.join("plan.json").display().to_string();
    let dry = site.run(&resolve_words(&["--dry-run", "--output", &plan]), None);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert!(close_requests(&site).is_empty(), "a dry run closes nothing");

    let child = spawn_resolve(&site, &["--plan", &plan, "--json"]);
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

#[test]
fn ctrl_c_stops_a_dry_run_which_then_writes_no_plan() {
    // The dry run reads one operation a request: its third read is held.
    let (site, ops) = held_fax(10, "query");
    let dir = site.scratch().to_path_buf();
    let plan = dir.join("plan.json");
    let plan_arg = plan.display().to_string();
    let child = spawn_resolve(&site, &["--dry-run", "--output", &plan_arg]);
    assert_eq!(read_fifo(&dir.join("held")), "held\n");
    interrupt(child.id());
    std::fs::write(dir.join("release"), "go\n").expect("release the adapter");
    let out = child.wait_with_output().expect("resolve ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    // The held read was answered; nothing was asked about the rest.
    for (i, op) in ops.iter().enumerate() {
        let outcome = if i < 3 { "confirmed" } else { "not_attempted" };
        assert!(stdout.contains(&format!("{op}: {outcome}")), "{stdout}");
    }
    assert!(!stdout.contains("plan written"), "{stdout}");
    assert!(!plan.exists(), "a stopped dry run writes no plan");
    assert!(
        stderr.starts_with("interrupted: 7 not attempted"),
        "{stderr}"
    );
    assert!(close_requests(&site).is_empty(), "a dry run closes nothing");
    verified(&site);
}
