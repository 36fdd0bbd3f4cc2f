//! Many hosts on one outbox, proven on the real server (SPEC 10, issue 19
//! item 7): every host is a `recon` process of its own with `--database`.
//! Eight reviewers race one decision, two hosts race one dispatch, the
//! server is stopped as a crash stops it in the middle of a decision and
//! of a dispatch, and a host takes the journal head and hangs. Afterwards
//! nothing is lost or doubled, each command said what it knew, the other
//! hosts went on, and `verify` passes.
//!
//! The processes are ordered by hold points (`RECON_HOLD_POINT`, one fifo
//! each): opening a fifo for writing returns once its process has reached
//! the point, and a line lets it go on. Nothing sleeps for a guess.

use super::outbox::{client, confirm, open_with, register_mail, unknown_op};
use crate::real_receivers::finish;
use crate::real_receivers::servers::{self, Postgres};
use crate::support::{recon_bin, run_with_env};
use recon::dispatch::DispatchOptions;
use recon::OpenOptions;
use serde_json::{json, Value};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const ACTION: &str = "post_letter";
const REVIEWERS: usize = 8;
const ROUNDS: usize = 50;

/// `recon ARGS --database URL --json`, its output piped.
pub(super) fn recon(url: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(recon_bin());
    command
        .args(args)
        .args(["--database", url, "--json"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// A host held at `point`: its process, and the fifo's write end once
/// it is there (opening it returns only then).
pub(super) struct Held {
    pub(super) child: Child,
    fifo: File,
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Starts `command` armed to hold at `point` on the fifo `path`, and
/// returns once the process is there; fails the test, with what the
/// process said, if it ends without getting there.
pub(super) fn hold(mut command: Command, point: &str, path: &Path) -> Held {
    mkfifo(path);
    let mut child = command
        .env("RECON_HOLD_POINT", point)
        .env("RECON_HOLD_FIFO", path)
        .spawn()
        .expect("start recon");
    unblock_when_it_ends(child.id(), path.to_path_buf());
    let fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the fifo: the process is at its hold point");
    if !matches!(child.try_wait(), Ok(None)) {
        let (code, json) = ended(child);
        panic!("recon ended ({code:?}) before {point}: {json}");
    }
    Held { child, fifo }
}

/// Once process `pid` (a child, not reaped here) has ended, opens the fifo
/// for reading, so that an open for writing waiting on a process that
/// ended before its hold point returns rather than waiting forever.
fn unblock_when_it_ends(pid: u32, fifo: std::path::PathBuf) {
    use std::os::unix::fs::OpenOptionsExt;
    std::thread::spawn(move || {
        // SAFETY: a zeroed siginfo_t is valid; waitid with WNOWAIT only
        // waits for our child to end and leaves it to be reaped.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            );
        }
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    });
}

impl Held {
    /// Lets the process go on.
    fn release(&mut self) {
        writeln!(self.fifo, "go").expect("release the held process");
    }

    /// Waits for it: its exit code and its JSON.
    fn outcome(self) -> (Option<i32>, Value) {
        drop(self.fifo);
        ended(self.child)
    }
}

/// A finished process's exit code and the JSON it printed.
fn ended(child: Child) -> (Option<i32>, Value) {
    let out = finish(child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), json)
}

/// The adapter's effects for `op` (its state file, in `dir`).
fn effects(dir: &Path, op: &str) -> usize {
    let text = std::fs::read_to_string(dir.join("mail.json")).unwrap_or_default();
    if text.is_empty() {
        return 0;
    }
    let state: Value = serde_json::from_str(&text).expect("the adapter's state");
    state["effects"]
        .as_array()
        .expect("effects")
        .iter()
        .filter(|e| e["op_id"] == json!(op))
        .count()
}

/// A scalar read directly, e.g. a count.
fn scalar(url: &str, sql: &str) -> i64 {
    client(url).query_one(sql, &[]).expect(sql).get(0)
}

/// How many journal entries of `kind` name `op`.
fn entries(url: &str, kind: &str, op: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM journal WHERE kind = '{kind}' AND op_id = '{op}'");
    scalar(url, &sql)
}

/// The op's state and version, as `recon show` prints them.
fn state_of(url: &str, op: &str) -> (String, i64) {
    let out = run_with_env(&["show", op, "--database", url, "--json"], None, &[]);
    assert_eq!(out.code, Some(0), "show: {}", out.stderr);
    let shown = out.json();
    let op = &shown["operation"];
    (
        op["state"].as_str().expect("a state").to_string(),
        op["version"].as_i64().expect("a version"),
    )
}

/// `recon verify` through the command line: the journal is intact and
/// the tables are its projection.
#[track_caller]
fn assert_verifies(url: &str) {
    let out = run_with_env(&["verify", "--database", url, "--json"], None, &[]);
    assert_eq!(out.code, Some(0), "verify: {}{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(report["intact"], json!(true), "{report}");
    assert_eq!(report["projection_mismatches"], json!([]), "{report}");
}

/// The outbox at `url` with the fixture adapter registered (in `mode`,
/// its state in `dir`), the ops in `lost` dispatched with their receipts
/// lost (`unknown`) and those in `prepared` prepared. Returns each lost
/// op's version.
fn outbox_with(url: &str, dir: &Path, mode: &str, lost: &[&str], prepared: &[&str]) -> Vec<i64> {
    let mut ws = open_with(url, OpenOptions::default());
    register_mail(&mut ws, dir, mode);
    for op in lost.iter().chain(prepared) {
        ws.prepare(op, ACTION, &json!({"to": "ann", "text": op}))
            .expect("prepare");
    }
    lost.iter()
        .map(|op| {
            let report = ws
                .dispatch(op, DispatchOptions::default())
                .expect("dispatch");
            assert_eq!(report.outcome, "unknown", "{report:?}");
            ws.operation(op).expect("read").expect("the op").version
        })
        .collect()
}

fn reconcile_args<'a>(op: &'a str, reviewer: &'a str, version: &'a str) -> Vec<&'a str> {
    vec![
        "reconcile",
        op,
        "--reviewer",
        reviewer,
        "--decision",
        "confirmed",
        "--expected-version",
        version,
    ]
}

#[test]
fn eight_reviewers_racing_from_separate_processes_one_wins_seven_hear_stale_version_in_each_of_50_rounds(
) {
    let test = "eight_reviewers_racing_from_separate_processes_one_wins_seven_hear_stale_version_in_each_of_50_rounds";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = super::initialized(pg, "eight_reviewers");
    let dir = tempfile::tempdir().expect("temp dir");
    let ops: Vec<String> = (0..ROUNDS).map(|i| format!("op-{i}")).collect();
    let lost: Vec<&str> = ops.iter().map(String::as_str).collect();
    let versions = outbox_with(&url, dir.path(), "apply:crash-after", &lost, &[]);
    for (round, (op, version)) in ops.iter().zip(&versions).enumerate() {
        let version = version.to_string();
        let reviewers: Vec<String> = (0..REVIEWERS).map(|k| format!("rev-{k}")).collect();
        let mut held: Vec<Held> = reviewers
            .iter()
            .enumerate()
            .map(|(k, reviewer)| {
                let args = reconcile_args(op, reviewer, &version);
                let fifo = dir.path().join(format!("hold-{round}-{k}"));
                hold(recon(&url, &args, &[]), "store.before_write_lock", &fifo)
            })
            .collect();
        // All eight are at the write lock; let them go together.
        held.iter_mut().for_each(Held::release);
        let outcomes: Vec<(Option<i32>, Value)> = held.into_iter().map(Held::outcome).collect();
        let won: Vec<&Value> = outcomes
            .iter()
            .filter(|(code, _)| *code == Some(0))
            .map(|(_, json)| json)
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        for (code, json) in outcomes.iter().filter(|(code, _)| *code != Some(0)) {
            assert_eq!(*code, Some(3), "round {round}: {json}");
            assert_eq!(json["error"]["code"], json!("stale_version"), "{json}");
        }
        assert_eq!(entries(&url, "decided", op), 1, "round {round}");
        assert_eq!(state_of(&url, op).0, "confirmed");
    }
    assert_verifies(&url);
}

#[test]
fn two_hosts_dispatching_one_operation_at_once_invoke_the_receiver_once() {
    let test = "two_hosts_dispatching_one_operation_at_once_invoke_the_receiver_once";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = super::initialized(pg, "two_dispatchers");
    let dir = tempfile::tempdir().expect("temp dir");
    outbox_with(&url, dir.path(), "", &[], &["op-1"]);
    let mut held: Vec<Held> = (0..2)
        .map(|k| {
            let fifo = dir.path().join(format!("hold-{k}"));
            let command = recon(&url, &["dispatch", "op-1"], &[]);
            hold(command, "store.before_write_lock", &fifo)
        })
        .collect();
    held.iter_mut().for_each(Held::release);
    let mut outcomes: Vec<(Option<i32>, Value)> = held.into_iter().map(Held::outcome).collect();
    outcomes.sort_by_key(|(code, _)| *code);
    let [(won, sent), (lost, refused)] = &outcomes[..] else {
        panic!("two outcomes: {outcomes:?}");
    };
    assert_eq!(*won, Some(0), "{outcomes:?}");
    assert_eq!(sent["state"], json!("confirmed"), "{sent}");
    assert_eq!(*lost, Some(3), "{refused}");
    // The loser read the op under the head lock, after the winner's
    // commit: no longer prepared, so not sent again.
    assert_eq!(refused["error"]["code"], json!("blind_retry"), "{refused}");
    assert_eq!(effects(dir.path(), "op-1"), 1);
    assert_eq!(entries(&url, "dispatched", "op-1"), 1);
    assert_eq!(state_of(&url, "op-1").0, "confirmed");
    assert_verifies(&url);
}

/// Lost `op-1` (its receipt lost: `unknown`) and prepared `op-2` at `url`,
/// the adapter's state in `dir`; `op-1`'s version.
fn one_lost_one_prepared(url: &str, dir: &Path) -> i64 {
    outbox_with(url, dir, "apply:crash-after@op-1", &["op-1"], &["op-2"])[0]
}

/// The error of a command that could not know whether its act committed:
/// exit 4, a storage error naming the act it sealed.
#[track_caller]
fn assert_unknown_commit((code, json): &(Option<i32>, Value), act: &str) {
    assert_eq!(*code, Some(4), "{json}");
    assert_eq!(json["error"]["kind"], json!("storage"), "{json}");
    let committed = &json["error"]["committed"];
    assert_eq!(committed["outcome"], json!("unknown"), "{json}");
    assert_eq!(committed["act"], json!(act), "{json}");
    let message = json["error"]["message"].as_str().expect("a message");
    assert!(message.contains("may have committed"), "{message}");
}

/// A busy timeout short enough for a test to wait out.
const SHORT_WAIT: (&str, &str) = ("RECON_BUSY_TIMEOUT_MS", "300");

#[test]
fn a_server_stopped_in_the_middle_of_a_decision_and_of_a_dispatch_loses_and_doubles_nothing() {
    let test =
        "a_server_stopped_in_the_middle_of_a_decision_and_of_a_dispatch_loses_and_doubles_nothing";
    // A server of this test's own: stopping the shared one would fail
    // the tests running beside it.
    let Some(pg) = servers::require_own(test, Postgres::dedicated()) else {
        return;
    };
    let url = pg.new_database("crashed");
    let init = run_with_env(&["db", "init", "--database", &url], None, &[]);
    assert_eq!(init.code, Some(0), "db init: {}", init.stderr);
    let dir = tempfile::tempdir().expect("temp dir");
    let version = one_lost_one_prepared(&url, dir.path());
    let version = version.to_string();
    let decide = reconcile_args("op-1", "ann", &version);

    // The decision, held with its act written and COMMIT not sent.
    let mut held = hold(
        recon(&url, &decide, &[SHORT_WAIT]),
        "store.before_commit",
        &dir.path().join("decision"),
    );
    pg.stop_immediately();
    held.release();
    assert_unknown_commit(&held.outcome(), "decided");
    pg.start_again();
    assert_eq!(
        state_of(&url, "op-1"),
        ("unknown".into(), version.parse().unwrap())
    );
    assert_eq!(entries(&url, "decided", "op-1"), 0);
    let (code, json) = ended(recon(&url, &decide, &[]).spawn().expect("start"));
    assert_eq!(code, Some(0), "the decision again: {json}");
    assert_eq!(entries(&url, "decided", "op-1"), 1);

    // The dispatch, held the same way: the receiver is not asked.
    let mut held = hold(
        recon(&url, &["dispatch", "op-2"], &[SHORT_WAIT]),
        "store.before_commit",
        &dir.path().join("dispatch"),
    );
    pg.stop_immediately();
    held.release();
    assert_unknown_commit(&held.outcome(), "dispatched");
    assert_eq!(effects(dir.path(), "op-2"), 0);
    pg.start_again();
    assert_eq!(state_of(&url, "op-2").0, "prepared");
    assert_eq!(entries(&url, "dispatched", "op-2"), 0);
    let (code, json) = ended(
        recon(&url, &["dispatch", "op-2"], &[])
            .spawn()
            .expect("start"),
    );
    assert_eq!(
        (code, &json["state"]),
        (Some(0), &json!("confirmed")),
        "{json}"
    );
    assert_eq!(effects(dir.path(), "op-2"), 1);
    assert_eq!(entries(&url, "dispatched", "op-2"), 1);
    assert_verifies(&url);
}

/// The journal head's seq, read directly.
fn head(url: &str) -> i64 {
    scalar(url, "SELECT seq FROM journal_head")
}

#[test]
fn a_host_that_takes_the_head_lock_and_hangs_holds_others_only_the_busy_timeout_and_they_go_on_once_it_dies(
) {
    let test = "a_host_that_takes_the_head_lock_and_hangs_holds_others_only_the_busy_timeout_and_they_go_on_once_it_dies";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = super::initialized(pg, "hung_host");
    let dir = tempfile::tempdir().expect("temp dir");
    let version = one_lost_one_prepared(&url, dir.path()).to_string();
    let decide = reconcile_args("op-1", "ann", &version);
    // The hung host: its decision written, the head row locked, no COMMIT.
    let hung = hold(
        recon(&url, &decide, &[]),
        "store.before_commit",
        &dir.path().join("hung"),
    );
    let before = head(&url);
    let note = ["note", "op-2", "--by", "bob", "--text", "seen"];
    for args in [&note[..], &["dispatch", "op-2"]] {
        let (code, json) = ended(recon(&url, args, &[SHORT_WAIT]).spawn().expect("start"));
        assert_eq!(code, Some(4), "{args:?}: {json}");
        assert_eq!(json["error"]["kind"], json!("storage"), "{json}");
        let message = json["error"]["message"].as_str().expect("a message");
        assert!(message.contains("busy timeout"), "{message}");
    }
    assert_eq!(head(&url), before);
    assert_eq!(effects(dir.path(), "op-2"), 0);

    // The hung host dies: its connection goes, and its transaction with it.
    let Held { mut child, fifo } = hung;
    child.kill().expect("kill the hung host");
    drop(fifo);
    child.wait().expect("reap it");
    for args in [&note[..], &["dispatch", "op-2"]] {
        let (code, json) = ended(recon(&url, args, &[]).spawn().expect("start"));
        assert_eq!(code, Some(0), "{args:?}: {json}");
    }
    assert_eq!(effects(dir.path(), "op-2"), 1);
    assert_eq!(state_of(&url, "op-2").0, "confirmed");
    // Nothing of the dead host's decision was written; the same decision
    // from another host is taken.
    assert_eq!(
        state_of(&url, "op-1"),
        ("unknown".into(), version.parse().unwrap())
    );
    assert_eq!(entries(&url, "decided", "op-1"), 0);
    let (code, json) = ended(recon(&url, &decide, &[]).spawn().expect("start"));
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(entries(&url, "decided", "op-1"), 1);
    assert_verifies(&url);
}

/// `op-1` confirmed at `url` (the adapter's state in `dir`) and the
/// compensation `undo-1` of its effect approved at its version, prepared.
fn approved_compensation(url: &str, dir: &Path) {
    let mut ws = open_with(url, OpenOptions::default());
    let version = unknown_op(&mut ws, dir, "op-1");
    confirm(&mut ws, "op-1", version).expect("confirm");
    let effect = ws
        .operation("op-1")
        .expect("read")
        .expect("the op")
        .confirmed_effect_id
        .expect("the confirmed effect");
    ws.approve_compensation(&recon::domain::CompensationRequest {
        reason: None,
        original_op_id: "op-1",
        effect_id: &effect,
        approver: "bob",
        expected_version: version + 1,
        compensation_op_id: "undo-1",
        action_kind: ACTION,
        payload: &json!({"to": "ann", "text": "sorry"}),
    })
    .expect("approve the compensation");
}

/// What no rule lets happen, written behind recon's back (and behind the
/// journal head's lock): `op_id` moves one version on, in the same state.
fn move_behind_recons_back(url: &str, op_id: &str) {
    let moved = client(url)
        .execute(
            "UPDATE operations SET version = version + 1 WHERE op_id = $1",
            &[&op_id],
        )
        .expect("move the operation");
    assert_eq!(moved, 1);
}

/// The compensation's dispatch was refused `stale_version` and nothing of
/// it happened: the receiver was not invoked, nothing was journaled.
#[track_caller]
fn assert_compensation_refused(url: &str, dir: &Path, (code, json): (Option<i32>, Value)) {
    assert_eq!(code, Some(3), "{json}");
    assert_eq!(json["error"]["code"], json!("stale_version"), "{json}");
    assert_eq!(effects(dir, "undo-1"), 0);
    assert_eq!(entries(url, "dispatched", "undo-1"), 0);
    assert_eq!(state_of(url, "undo-1").0, "prepared");
}

#[test]
fn a_compensation_whose_original_moved_past_the_approved_version_is_not_dispatched() {
    let test = "a_compensation_whose_original_moved_past_the_approved_version_is_not_dispatched";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = super::initialized(pg, "moved_original");
    let dir = tempfile::tempdir().expect("temp dir");
    approved_compensation(&url, dir.path());
    move_behind_recons_back(&url, "op-1");
    let outcome = ended(
        recon(&url, &["dispatch", "undo-1"], &[])
            .spawn()
            .expect("start"),
    );
    assert_compensation_refused(&url, dir.path(), outcome);
}

/// The approved version is held by the dispatch's UPDATE itself, not only
/// by the check before it: the original moves after the check (the
/// dispatch holds the journal head, which this writer does not take).
#[test]
fn a_compensation_whose_original_moves_between_the_check_and_the_update_is_not_dispatched() {
    let test =
        "a_compensation_whose_original_moves_between_the_check_and_the_update_is_not_dispatched";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = super::initialized(pg, "moved_in_between");
    let dir = tempfile::tempdir().expect("temp dir");
    approved_compensation(&url, dir.path());
    let mut held = hold(
        recon(&url, &["dispatch", "undo-1"], &[]),
        "store.after_check",
        &dir.path().join("dispatch"),
    );
    move_behind_recons_back(&url, "op-1");
    held.release();
    assert_compensation_refused(&url, dir.path(), held.outcome());
}

/// A decision's version is held by its conditional UPDATE itself, not
/// only by the check before it: the operation moves after the check.
#[test]
fn a_decision_whose_operation_moves_between_the_check_and_the_update_is_refused_stale() {
    let test = "a_decision_whose_operation_moves_between_the_check_and_the_update_is_refused_stale";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = super::initialized(pg, "decided_in_between");
    let dir = tempfile::tempdir().expect("temp dir");
    let version = one_lost_one_prepared(&url, dir.path());
    let expected = version.to_string();
    let mut held = hold(
        recon(&url, &reconcile_args("op-1", "ann", &expected), &[]),
        "store.after_check",
        &dir.path().join("decision"),
    );
    move_behind_recons_back(&url, "op-1");
    held.release();
    let (code, json) = held.outcome();
    assert_eq!(code, Some(3), "{json}");
    assert_eq!(json["error"]["code"], json!("stale_version"), "{json}");
    assert_eq!(entries(&url, "decided", "op-1"), 0);
    assert_eq!(state_of(&url, "op-1"), ("unknown".into(), version + 1));
}
