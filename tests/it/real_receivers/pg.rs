//! `recon-pg-ledger` against a real PostgreSQL: the close race (eight
//! writers holding the shared gate lock in their open transactions, a close
//! arriving, more writers arriving while it waits, more after it), two
//! closes at once (the second waits for the first's lock), a close whose
//! answer was lost and is repeated, the trigger that refuses a write for a
//! closed operation from outside the adapter, the whole flow through
//! `recon`, and `unavailable` when the server is down.

use super::servers::{self, Postgres};
use super::{
    answer_of, apply_request, call_adapter, close_request, dispatch, error_code, finish, ok_json,
    poll_until, prepare, query_request, reconcile, snapshot, start_adapter, TEST_WORKSPACE,
};
use crate::stress::scaled;
use crate::support::{run, Lab};
use recon::workspace::NewReceiver;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HOLD_POINT_ENV: &str = "RECON_PG_LEDGER_HOLD_POINT";
const HOLD_FIFO_ENV: &str = "RECON_PG_LEDGER_HOLD_FIFO";
const CRASH_ENV: &str = "RECON_PG_LEDGER_CRASH";
/// Writers holding their transaction open when the close arrives.
const HELD: usize = 8;
/// Writers started while the close waits for its lock.
const ARRIVING: usize = 2;
/// Writers started after the close answered.
const LATE: usize = 4;
/// Rounds of the race (times `RECON_STRESS`).
const ROUNDS: usize = 24;

/// The server and the adapter binary, or `None` (and one line) when either
/// is missing outside CI.
pub(super) fn setup(test: &str) -> Option<(&'static Postgres, PathBuf)> {
    let pg = servers::require(test, servers::postgres())?;
    let binary = servers::require(test, servers::pg_ledger_binary())?;
    Some((pg, binary.clone()))
}

pub(super) fn database_of(url: &str) -> &str {
    url.rsplit('/').next().expect("a database name")
}

/// The environment that holds the adapter at the hold point `point`
/// until a line comes through `fifo`.
fn held_at<'a>(point: &'a str, fifo: &'a Path) -> [(&'a str, &'a OsStr); 2] {
    [
        (HOLD_POINT_ENV, OsStr::new(point)),
        (HOLD_FIFO_ENV, fifo.as_os_str()),
    ]
}

fn apply(binary: &Path, url: &str, op_id: &str, n: usize, hold: Option<&Path>) -> Child {
    let env: Vec<(&str, &OsStr)> = hold
        .map(|f| held_at("apply.after_gate_lock", f).to_vec())
        .unwrap_or_default();
    let request = apply_request(op_id, "ledger_write", &json!({"writer": n}));
    start_adapter(binary, &["--database", url], "apply", &request, &env)
}

/// Opens the adapter's fifo for writing: returns once the adapter opened
/// it for reading, which it does only at its hold point (holding the gate
/// lock: shared for a writer, exclusive for a close). An adapter that ends
/// before its hold point fails the test at once, with what it printed.
#[track_caller]
fn held_gate(fifo: &Path, adapter: &mut Child) -> File {
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let path = fifo.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(File::options().write(true).open(path));
    });
    let deadline = started + Duration::from_secs(60);
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(opened) => return opened.expect("open the fifo"),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the fifo opener vanished"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(status) = adapter.try_wait().expect("wait for the adapter") {
            panic!(
                "the adapter held at {} ended ({status}) before its hold point, after {:?}: {}",
                fifo.display(),
                started.elapsed(),
                printed_by(adapter)
            );
        }
        assert!(
            Instant::now() < deadline,
            "the adapter held at {} took no gate lock in 60 s and is still running",
            fifo.display()
        );
    }
}

/// What an ended adapter wrote on stdout and stderr.
fn printed_by(adapter: &mut Child) -> String {
    use std::io::Read;
    let mut text = String::new();
    for stream in [
        adapter.stdout.take().map(|s| Box::new(s) as Box<dyn Read>),
        adapter.stderr.take().map(|s| Box::new(s) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let _ = stream.take(8192).read_to_string(&mut text);
        text.push_str(" | ");
    }
    text
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// How a round releases its held writers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Release {
    /// One at a time, each answered before the next is released.
    OneByOne,
    /// All lines written in the order, answers collected afterwards.
    AllAtOnce,
    /// One by one, but the first in the order is killed while it holds the
    /// lock (its transaction rolls back; it wrote nothing).
    KillFirst,
}

fn release_mode(round: usize) -> Release {
    [Release::OneByOne, Release::AllAtOnce, Release::KillFirst][round % 3]
}

/// A different order each round: identity, reversed, then shuffled by a
/// small deterministic generator.
fn release_order(round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..HELD).collect();
    match round {
        0 => {}
        1 => order.reverse(),
        _ => {
            let mut state = (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for i in (1..order.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                order.swap(i, (state % (i as u64 + 1)) as usize);
            }
        }
    }
    order
}

/// The effect id of a receipt, `Err(code)` for a refusal, `Ok(None)` for no
/// answer at all (a killed writer).
fn outcome(output: &Output) -> Result<Option<String>, String> {
    match answer_of(output) {
        None => Ok(None),
        Some(answer) if answer["ok"] == json!(true) => Ok(Some(
            answer["receipt"]["effect_id"]
                .as_str()
                .expect("effect_id")
                .to_string(),
        )),
        Some(answer) => Err(error_code(&answer).unwrap_or("?").to_string()),
    }
}

/// Releases the held writers as the round says; their outputs by index.
fn release(mode: Release, order: &[usize], held: Vec<Child>, gates: Vec<File>) -> Vec<Output> {
    let mut held: Vec<Option<Child>> = held.into_iter().map(Some).collect();
    let mut gates: Vec<Option<File>> = gates.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<Output>> = (0..HELD).map(|_| None).collect();
    for (position, &i) in order.iter().enumerate() {
        let mut child = held[i].take().expect("a held writer");
        if mode == Release::KillFirst && position == 0 {
            child.kill().expect("kill a held writer");
        } else {
            use std::io::Write;
            let mut gate = gates[i].take().expect("its fifo");
            writeln!(gate, "go").expect("release the writer");
        }
        if mode == Release::AllAtOnce {
            held[i] = Some(child);
        } else {
            outputs[i] = Some(finish(child));
        }
    }
    for (i, child) in held.into_iter().enumerate() {
        if let Some(child) = child {
            outputs[i] = Some(finish(child));
        }
    }
    outputs
        .into_iter()
        .map(|o| o.expect("every writer answered"))
        .collect()
}

/// What one round saw.
struct Round {
    in_snapshot: usize,
    held_written: usize,
    arriving_written: usize,
    arriving_refused: usize,
    late_refused: usize,
    killed: usize,
}

/// How many closes are blocked on a lock, as the server shows them.
fn closes_waiting(pg: &Postgres, database: &str) -> usize {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
               AND application_name = 'recon-pg-ledger close' AND wait_event_type = 'Lock'";
    pg.psql(database, sql).trim().parse().expect("a count")
}

/// Polls until the close is blocked on its row lock (the held writers'
/// share locks): only then are the arriving writers started.
fn until_close_waits(pg: &Postgres, database: &str) {
    poll_until(
        "the close waits for the gate lock",
        Duration::from_secs(60),
        || closes_waiting(pg, database) == 1,
    );
}

/// Every effect id the table holds for the operation, read afterwards.
fn table_effects(pg: &Postgres, database: &str, op_id: &str) -> BTreeSet<String> {
    let sql = format!("SELECT seq FROM recon_effects WHERE op_id = '{op_id}' ORDER BY seq");
    pg.psql(database, &sql)
        .lines()
        .map(|seq| format!("pgfx-{:06}", seq.trim().parse::<i64>().expect("a seq")))
        .collect()
}

fn race_round(pg: &Postgres, binary: &Path, url: &str, round: usize) -> Round {
    let database = database_of(url);
    let op_id = format!("race-{round}");
    let fifos = tempfile::tempdir().expect("fifo dir");
    let paths: Vec<PathBuf> = (0..HELD)
        .map(|i| fifos.path().join(format!("w{i}")))
        .collect();
    paths.iter().for_each(|p| mkfifo(p));
    let mut held: Vec<Child> = (0..HELD)
        .map(|i| apply(binary, url, &op_id, i, Some(&paths[i])))
        .collect();
    let gates: Vec<File> = paths
        .iter()
        .zip(held.iter_mut())
        .map(|(p, writer)| held_gate(p, writer))
        .collect();
    let close = start_adapter(
        binary,
        &["--database", url],
        "close",
        &close_request(&op_id, "race"),
        &[],
    );
    until_close_waits(pg, database);
    let arriving: Vec<Child> = (0..ARRIVING)
        .map(|i| apply(binary, url, &op_id, HELD + i, None))
        .collect();
    let mode = release_mode(round);
    let held = release(mode, &release_order(round), held, gates);
    let arriving: Vec<Output> = arriving.into_iter().map(finish).collect();
    let snapshot = answer_of(&finish(close)).expect("the close answered");
    assert_eq!(snapshot["closed"], json!(true), "{snapshot}");
    let seen: BTreeSet<String> = snapshot["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| m["effect_id"].as_str().expect("effect_id").to_string())
        .collect();
    let late: Vec<Output> = (0..LATE)
        .map(|i| finish(apply(binary, url, &op_id, HELD + ARRIVING + i, None)))
        .collect();
    judge_round(&op_id, mode, &held, &arriving, &late, &seen);
    assert_eq!(
        table_effects(pg, database, &op_id),
        seen,
        "{op_id}: the table holds exactly the close's snapshot: nothing was written after it"
    );
    let written = |outputs: &[Output]| {
        outputs
            .iter()
            .filter(|o| matches!(outcome(o), Ok(Some(_))))
            .count()
    };
    Round {
        in_snapshot: seen.len(),
        held_written: written(&held),
        arriving_written: written(&arriving),
        arriving_refused: arriving.len() - written(&arriving),
        late_refused: late.len(),
        killed: usize::from(mode == Release::KillFirst),
    }
}

/// Every writer's effect is in the close's snapshot, or it was refused
/// `operation_closed`, or (killed while holding) it has no answer; the
/// snapshot holds nothing else.
#[track_caller]
fn judge_round(
    op_id: &str,
    mode: Release,
    held: &[Output],
    arriving: &[Output],
    late: &[Output],
    seen: &BTreeSet<String>,
) {
    let mut receipts = BTreeSet::new();
    for (n, output) in held.iter().chain(arriving).chain(late).enumerate() {
        let is_held = n < HELD;
        let is_late = n >= HELD + arriving.len();
        match outcome(output) {
            Ok(Some(effect_id)) => {
                assert!(!is_late, "{op_id}: writer {n} wrote after the close");
                assert!(
                    seen.contains(&effect_id),
                    "{op_id}: writer {n}'s {effect_id} is not in the close's snapshot"
                );
                receipts.insert(effect_id);
            }
            Ok(None) => assert!(
                is_held && mode == Release::KillFirst,
                "{op_id}: writer {n} gave no answer"
            ),
            Err(code) => {
                assert!(!is_held, "{op_id}: held writer {n} was refused {code}");
                assert_eq!(code, "operation_closed", "{op_id}: writer {n}");
            }
        }
    }
    assert_eq!(
        &receipts, seen,
        "{op_id}: every effect in the snapshot has its writer's receipt"
    );
}

#[test]
fn a_close_racing_eight_held_writers_sees_every_effect_or_refuses_it() {
    let test = "a_close_racing_eight_held_writers_sees_every_effect_or_refuses_it";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("race");
    let rounds = scaled(ROUNDS);
    assert!(rounds >= 20);
    for round in 0..rounds {
        let r = race_round(pg, &binary, &url, round);
        println!(
            "race round {round:2} ({:?}, order {:?}): {} effects in the close's snapshot \
             ({} held + {} of {ARRIVING} arriving while it waited, {} held writer killed); \
             refused operation_closed: {} arriving + {} after the close; none written after it",
            release_mode(round),
            release_order(round),
            r.in_snapshot,
            r.held_written,
            r.arriving_written,
            r.killed,
            r.arriving_refused,
            r.late_refused,
        );
        assert_eq!(
            r.held_written,
            HELD - r.killed,
            "every held writer that lived was written"
        );
        assert_eq!(r.late_refused, LATE);
    }
}

#[test]
fn a_close_whose_answer_was_lost_returns_the_same_snapshot_when_repeated() {
    let test = "a_close_whose_answer_was_lost_returns_the_same_snapshot_when_repeated";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("lost_close");
    let args = ["--database", url.as_str()];
    for n in 0..2 {
        let request = apply_request("lost", "ledger_write", &json!({"n": n}));
        let (answer, _) = call_adapter(&binary, &args, "apply", &request, &[]);
        assert_eq!(answer.expect("a receipt")["ok"], json!(true));
    }
    let crash = [(CRASH_ENV, OsStr::new("after-close-commit"))];
    let (answer, code) = call_adapter(
        &binary,
        &args,
        "close",
        &close_request("lost", "ann"),
        &crash,
    );
    assert_eq!(
        (answer, code),
        (None, Some(23)),
        "killed after the commit, before answering"
    );
    let (read, _) = call_adapter(&binary, &args, "query", &query_request("lost"), &[]);
    let read = read.expect("a query answer");
    assert_eq!(read["closed"], json!(true), "the close committed: {read}");
    let (first, _) = call_adapter(&binary, &args, "close", &close_request("lost", "ann"), &[]);
    let (second, _) = call_adapter(&binary, &args, "close", &close_request("lost", "bob"), &[]);
    let first = first.expect("the repeated close answers");
    assert_eq!(first["ok"], json!(true), "{first}");
    assert_eq!(first["matches"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["matches"], read["matches"]);
    assert_eq!(
        Some(&first),
        second.as_ref(),
        "closing a closed op returns its snapshot again"
    );
    let by = pg.psql(
        database_of(&url),
        "SELECT closed_by FROM recon_gate WHERE op_id = 'lost'",
    );
    assert_eq!(by.trim(), "ann", "the first close's tombstone stands");
    let request = apply_request("lost", "ledger_write", &json!({"n": 9}));
    let (late, _) = call_adapter(&binary, &args, "apply", &request, &[]);
    assert_eq!(
        error_code(&late.expect("an answer")),
        Some("operation_closed")
    );
}

/// The operation's tombstone as the table holds it: who closed it, when.
fn tombstone(pg: &Postgres, database: &str, op_id: &str) -> String {
    let sql =
        format!("SELECT closed_by || ' ' || closed_at FROM recon_gate WHERE op_id = '{op_id}'");
    pg.psql(database, &sql).trim().to_string()
}

#[test]
fn a_second_close_at_once_waits_for_the_first_and_never_overwrites_its_closer() {
    let test = "a_second_close_at_once_waits_for_the_first_and_never_overwrites_its_closer";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("two_closes");
    let database = database_of(&url);
    let args = ["--database", url.as_str()];
    let fifos = tempfile::tempdir().expect("fifo dir");
    let fifo = fifos.path().join("ann");
    mkfifo(&fifo);
    let env = held_at("close.after_gate_lock", &fifo);
    let mut ann = start_adapter(
        &binary,
        &args,
        "close",
        &close_request("twice", "ann"),
        &env,
    );
    // Ann holds the gate row and has read it open; she has not closed yet.
    let mut gate = held_gate(&fifo, &mut ann);
    let mut bob = start_adapter(&binary, &args, "close", &close_request("twice", "bob"), &[]);
    // Bob must wait for Ann's lock; had he not, he would have ended.
    let mut bob_ended = false;
    poll_until(
        "the second close waits for the gate lock, or has ended",
        Duration::from_secs(60),
        || {
            bob_ended = bob.try_wait().expect("wait for bob").is_some();
            bob_ended || closes_waiting(pg, database) == 1
        },
    );
    let committed_first = bob_ended.then(|| tombstone(pg, database, "twice"));
    {
        use std::io::Write;
        writeln!(gate, "go").expect("release ann");
    }
    let ann = answer_of(&finish(ann)).expect("ann's close answered");
    let committed_first = committed_first.unwrap_or_else(|| tombstone(pg, database, "twice"));
    let bob = answer_of(&finish(bob)).expect("bob's close answered");
    let after_both = tombstone(pg, database, "twice");
    assert_eq!(
        after_both, committed_first,
        "the second close overwrote the tombstone of the first to commit"
    );
    assert!(!bob_ended, "bob closed while ann held the gate row: {bob}");
    assert!(after_both.starts_with("ann "), "{after_both}");
    for answer in [&ann, &bob] {
        assert_eq!(answer["closed"], json!(true), "{answer}");
    }
    assert_eq!(ann, bob, "closing a closed op answers its snapshot again");
}

#[test]
fn an_effect_written_outside_the_adapter_for_a_closed_operation_is_refused_by_the_trigger() {
    let test =
        "an_effect_written_outside_the_adapter_for_a_closed_operation_is_refused_by_the_trigger";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("trigger");
    let database = database_of(&url);
    let args = ["--database", url.as_str()];
    let request = apply_request("open", "ledger_write", &json!({"n": 1}));
    let (applied, _) = call_adapter(&binary, &args, "apply", &request, &[]);
    assert_eq!(applied.expect("a receipt")["ok"], json!(true));
    let (closed, _) = call_adapter(&binary, &args, "close", &close_request("shut", "ann"), &[]);
    assert_eq!(closed.expect("a close answer")["matches"], json!([]));
    // A person with psql, past the adapter and its check.
    let insert = |op_id: &str| {
        pg.try_psql(
            database,
            &format!(
                "INSERT INTO recon_effects (workspace, op_id, action_kind, payload) \
                 VALUES ('{TEST_WORKSPACE}', '{op_id}', 'ledger_write', '{{}}')"
            ),
        )
    };
    let refused = insert("shut").expect_err("an effect written for a closed operation");
    assert!(refused.contains("operation shut is closed"), "{refused}");
    insert("open").expect("the trigger lets an open operation's write through");
    let count = |op_id: &str| {
        let sql = format!("SELECT count(*) FROM recon_effects WHERE op_id = '{op_id}'");
        pg.psql(database, &sql).trim().to_string()
    };
    assert_eq!((count("shut"), count("open")), ("0".into(), "2".into()));
    let (read, _) = call_adapter(&binary, &args, "query", &query_request("shut"), &[]);
    assert_eq!(read.expect("a read")["matches"], json!([]));
}

/// Registers `recon-pg-ledger` in a fresh workspace under `name`, for the
/// action kind `action`.
fn pg_lab(binary: &Path, url: &str, name: &str, action: &str) -> Lab {
    let mut lab = Lab::new();
    lab.ws
        .register_receiver(&NewReceiver {
            env: &[
                "RECON_PG_LEDGER_CRASH".to_string(),
                "RECON_PG_LEDGER_HOLD_FIFO".to_string(),
                "RECON_PG_LEDGER_HOLD_POINT".to_string(),
            ],
            name,
            actions: &[action.to_string()],
            program: binary,
            args: &["--database".to_string(), url.to_string()],
            timeout_ms: Some(60_000),
        })
        .expect("register recon-pg-ledger");
    lab
}

#[test]
fn a_lost_receipt_and_a_lost_close_answer_on_postgres_end_confirmed_through_recon() {
    let test = "a_lost_receipt_and_a_lost_close_answer_on_postgres_end_confirmed_through_recon";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("through_recon");
    let lab = pg_lab(&binary, &url, "ledger", "ledger_write");
    let ws = lab.path_str();
    let w = ws.as_str();
    prepare(
        w,
        "pg-1",
        "ledger_write",
        &json!({"account": "acct-9", "amount": 12.5}),
    );
    let report = dispatch(w, "pg-1", &[(CRASH_ENV, "after-apply-commit")]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    assert_eq!(report["receiver_exit_code"], json!(23), "{report}");
    let read = ok_json(&snapshot(w, "pg-1", None, &[]), "snapshot");
    assert_eq!(
        read["verdict"],
        json!("exact_match_existence_only"),
        "not closed yet: {read}"
    );
    let lost = snapshot(w, "pg-1", Some("ann"), &[(CRASH_ENV, "after-close-commit")]);
    assert_eq!(
        lost.code,
        Some(4),
        "the close's answer was lost: {}",
        lost.stderr
    );
    // Not a plain failure: the close may have been committed.
    let error = &lost.json()["error"];
    assert_eq!(
        error["committed"],
        json!({"close": "unknown", "receiver": "ledger"}),
        "{error}"
    );
    assert!(lost.stderr.contains("may now be closed"), "{}", lost.stderr);
    let closed = ok_json(&snapshot(w, "pg-1", Some("ann"), &[]), "the close again");
    assert_eq!(closed["verdict"], json!("unique_exact_match"), "{closed}");
    assert_eq!(closed["snapshot"]["closed"], json!(true));
    let decided = ok_json(&reconcile(w, "pg-1", "confirmed"), "reconcile");
    assert_eq!(decided["state"], json!("confirmed"), "{decided}");
    let shown = ok_json(
        &run(&["show", "--workspace", w, "pg-1", "--json"], None),
        "show",
    );
    assert_eq!(shown["evidence"][0]["receiver"], json!("ledger"), "{shown}");
}

#[test]
fn an_original_that_arrives_after_the_close_is_refused_and_the_op_is_not_applied() {
    let test = "an_original_that_arrives_after_the_close_is_refused_and_the_op_is_not_applied";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("not_applied");
    let lab = pg_lab(&binary, &url, "ledger", "ledger_write");
    let ws = lab.path_str();
    let w = ws.as_str();
    prepare(w, "pg-2", "ledger_write", &json!({"n": 2}));
    let args = ["--database", url.as_str()];
    let mut close = close_request("pg-2", "ann");
    close["workspace"] = json!(lab.ws.id());
    let (early, _) = call_adapter(&binary, &args, "close", &close, &[]);
    assert_eq!(early.expect("a close answer")["matches"], json!([]));
    let report = dispatch(w, "pg-2", &[]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    assert_eq!(
        report["adapter_failure"]["kind"],
        json!("error"),
        "{report}"
    );
    let closed = ok_json(&snapshot(w, "pg-2", Some("ann"), &[]), "closing snapshot");
    assert_eq!(closed["verdict"], json!("terminal_absence"), "{closed}");
    let decided = ok_json(&reconcile(w, "pg-2", "not_applied"), "reconcile");
    assert_eq!(decided["state"], json!("not_applied"), "{decided}");
}

#[test]
fn pg_ledger_answers_unavailable_when_the_server_is_down() {
    let test = "pg_ledger_answers_unavailable_when_the_server_is_down";
    let Some(binary) = servers::require(test, servers::pg_ledger_binary()) else {
        return;
    };
    let port = servers::free_port().expect("a free port");
    let url = format!("postgres://postgres@127.0.0.1:{port}/nothing");
    let args = ["--database", url.as_str()];
    // `describe` too: the instance it declares is read from the ledger.
    let requests = [
        ("describe", json!({"recon_adapter": 1})),
        ("apply", apply_request("down-1", "ledger_write", &json!({}))),
        ("query", query_request("down-1")),
        ("close", close_request("down-1", "ann")),
    ];
    for (verb, request) in requests {
        let (answer, _) = call_adapter(binary, &args, verb, &request, &[]);
        let answer = answer.expect("an answer");
        assert_eq!(error_code(&answer), Some("unavailable"), "{verb}: {answer}");
    }
    // Nothing is registered without the instance: the registration fails
    // naming the reason, and stores nothing.
    let added = register_while_down(binary, &url);
    assert_ne!(added.0.code, Some(0), "{}", added.0.stderr);
    assert!(added.0.stderr.contains("unavailable"), "{}", added.0.stderr);
    assert!(
        !std::path::Path::new(&added.1).exists(),
        "a workspace was made"
    );
}

/// `recon receivers add` of `recon-pg-ledger` at `url` in a new workspace
/// path: the run, and the workspace's path.
fn register_while_down(binary: &Path, url: &str) -> (crate::support::Run, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws").display().to_string();
    let program = binary.display().to_string();
    let args = [
        "receivers",
        "add",
        "--workspace",
        &ws,
        "ledger",
        "--actions",
        "ledger_write",
        "--",
        &program,
        "--database",
        url,
    ];
    (run(&args, None), ws)
}

#[test]
fn pg_ledger_errors_say_their_code_once() {
    let test = "pg_ledger_errors_say_their_code_once";
    let Some(binary) = servers::require(test, servers::pg_ledger_binary()) else {
        return;
    };
    let port = servers::free_port().expect("a free port");
    let url = format!("postgres://postgres@127.0.0.1:{port}/nothing");
    let args = ["--database", url.as_str()];
    let (answer, _) = call_adapter(binary, &args, "query", &query_request("down-1"), &[]);
    let answer = answer.expect("an answer");
    assert_eq!(error_code(&answer), Some("unavailable"), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("PostgreSQL, connecting: "),
        "the message does not say its code again: {answer}"
    );
    // recon prints the two as `code: message`: the code once.
    let (refused, _) = register_while_down(binary, &url);
    assert_ne!(refused.code, Some(0), "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("unavailable: PostgreSQL, connecting: "),
        "{}",
        refused.stderr
    );
    assert_eq!(
        refused.stderr.matches("unavailable").count(),
        1,
        "{}",
        refused.stderr
    );
}

#[test]
fn two_workspaces_sharing_one_pg_ledger_never_read_each_others_effects() {
    let test = "two_workspaces_sharing_one_pg_ledger_never_read_each_others_effects";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("shared_ledger");
    let a = pg_lab(&binary, &url, "ledger", "ledger_write");
    let b = pg_lab(&binary, &url, "ledger", "ledger_write");
    let (wa, wb) = (a.path_str(), b.path_str());
    let payload = json!({"account": "acct-1", "amount": 5});
    prepare(&wa, "same-op", "ledger_write", &payload);
    prepare(&wb, "same-op", "ledger_write", &payload);
    let sent = dispatch(&wa, "same-op", &[]);
    assert_eq!(sent["outcome"], json!("receipt"), "{sent}");
    // B's operation was never sent: its read must not see A's effect, and
    // its closing snapshot proves absence in B's scope only.
    let read = ok_json(&snapshot(&wb, "same-op", None, &[]), "B's read");
    assert_eq!(read["snapshot"]["matches"], json!([]), "{read}");
    assert_eq!(read["verdict"], json!("inconclusive"), "{read}");
    let closed = ok_json(&snapshot(&wb, "same-op", Some("ann"), &[]), "B's close");
    assert_eq!(closed["verdict"], json!("terminal_absence"), "{closed}");
    // A's operation is still open at the ledger: B's close did not close it.
    let again = ok_json(&snapshot(&wa, "same-op", None, &[]), "A's read");
    assert_eq!(again["snapshot"]["closed"], json!(false), "{again}");
    assert_eq!(
        again["snapshot"]["matches"].as_array().map(Vec::len),
        Some(1),
        "{again}"
    );
}

/// `recon-pg-ledger ... session` answering `requests` (each given its
/// verb and id), one line each, in order, until stdin ends.
fn session_answers(binary: &Path, url: &str, requests: &[(&str, Value)]) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new(binary)
        .args(["--database", url, "session"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start a session");
    let mut stdin = child.stdin.take().expect("stdin");
    for (id, (verb, request)) in requests.iter().enumerate() {
        let mut line = request.clone();
        line["verb"] = json!(verb);
        line["id"] = json!(id + 1);
        writeln!(stdin, "{line}").expect("write a request");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("the session ends");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON answer a line"))
        .collect()
}

#[test]
fn a_session_of_recon_pg_ledger_answers_each_request_and_a_batch_one_result_per_op_in_order() {
    let test =
        "a_session_of_recon_pg_ledger_answers_each_request_and_a_batch_one_result_per_op_in_order";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("sessions");
    let batch = |verb: &str, ids: &[&str]| {
        let mut request = query_request("unused");
        if let Some(fields) = request.as_object_mut() {
            fields.remove("op_id");
        }
        request["op_ids"] = json!(ids);
        if verb == "close" {
            request["authorized_by"] = json!("ann");
        }
        (verb.to_string(), request)
    };
    let (read, closing) = (
        batch("query", &["b-2", "b-1", "b-3"]),
        batch("close", &["b-3"]),
    );
    let answers = session_answers(
        &binary,
        &url,
        &[
            (
                "apply",
                apply_request("b-1", "ledger_write", &json!({"n": 1})),
            ),
            (
                "apply",
                apply_request("b-2", "ledger_write", &json!({"n": 2})),
            ),
            (
                "apply",
                apply_request("b-2", "ledger_write", &json!({"n": 2})),
            ),
            (closing.0.as_str(), closing.1),
            (read.0.as_str(), read.1),
        ],
    );
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3), &json!(4), &json!(5)]);
    let results = answers[4]["results"].as_array().expect("results");
    let counts: Vec<(usize, &Value)> = results
        .iter()
        .map(|r| (r["matches"].as_array().map_or(0, Vec::len), &r["closed"]))
        .collect();
    assert_eq!(
        counts,
        [(2, &json!(false)), (1, &json!(false)), (0, &json!(true))],
        "{results:?}"
    );
    assert_eq!(results[0]["matches"][0]["op_id"], json!("b-2"));
}

#[test]
fn a_batched_close_of_recon_pg_ledger_closes_each_with_its_effects_and_keeps_an_earlier_closer() {
    let test =
        "a_batched_close_of_recon_pg_ledger_closes_each_with_its_effects_and_keeps_an_earlier_closer";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("batch_close");
    let apply = |op: &str| {
        let request = apply_request(op, "ledger_write", &json!({"op": op}));
        ("apply", request)
    };
    let close = |ids: &[&str], who: &str| {
        let mut request = close_request("unused", who);
        if let Some(fields) = request.as_object_mut() {
            fields.remove("op_id");
        }
        request["op_ids"] = json!(ids);
        ("close", request)
    };
    let requests = [
        apply("c-1"),
        apply("c-2"),
        apply("c-2"),
        close(&["c-3"], "ann"),
        close(&["c-2", "c-1", "c-3", "c-4"], "bob"),
        apply("c-1"),
    ];
    let answers = session_answers(&binary, &url, &requests);
    let results = answers[4]["results"].as_array().expect("results");
    // In the order asked, each closed with exactly its own effects.
    let seen: Vec<(Vec<&str>, &Value)> = (results.iter())
        .map(|r| {
            let matches = r["matches"].as_array().expect("matches");
            let ops = matches.iter().map(|m| m["op_id"].as_str().unwrap_or("?"));
            (ops.collect(), &r["closed"])
        })
        .collect();
    let closed = json!(true);
    let expected: [(Vec<&str>, &Value); 4] = [
        (vec!["c-2", "c-2"], &closed),
        (vec!["c-1"], &closed),
        (vec![], &closed),
        (vec![], &closed),
    ];
    assert_eq!(seen, expected, "{results:?}");
    // The earlier close keeps its closer; the batch closed the others.
    let database = database_of(&url);
    let closers = pg.psql(
        database,
        "SELECT op_id || ' ' || closed_by FROM recon_gate ORDER BY op_id",
    );
    let closers: Vec<&str> = closers.lines().map(str::trim).collect();
    assert_eq!(closers, ["c-1 bob", "c-2 bob", "c-3 ann", "c-4 bob"]);
    // Nothing is written for an operation the batch closed.
    assert_eq!(error_code(&answers[5]), Some("operation_closed"));
}

/// The instance `recon-pg-ledger` declares for `url`.
fn instance_at(binary: &Path, url: &str) -> String {
    let args = ["--database", url];
    let (described, _) = call_adapter(binary, &args, "describe", &json!({"recon_adapter": 1}), &[]);
    let described = described.expect("a describe answer");
    let instance = described["instance"].as_str().unwrap_or_default();
    assert!(instance.starts_with("recon-pg-ledger:"), "{described}");
    instance.to_string()
}

#[test]
fn a_pg_ledger_in_another_schema_database_or_restored_copy_is_another_instance() {
    let test = "a_pg_ledger_in_another_schema_database_or_restored_copy_is_another_instance";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("instance");
    let database = database_of(&url);
    let first = instance_at(&binary, &url);
    assert_eq!(instance_at(&binary, &url), first, "stable");
    let id = pg.psql(database, "SELECT id FROM recon_ledger");
    // Another schema behind the same URL (the database's search_path).
    pg.psql(
        database,
        &format!("CREATE SCHEMA other; ALTER DATABASE {database} SET search_path = other"),
    );
    let other_schema = instance_at(&binary, &url);
    assert_ne!(other_schema, first, "another schema");
    pg.psql(
        database,
        &format!("ALTER DATABASE {database} RESET search_path"),
    );
    assert_eq!(instance_at(&binary, &url), first, "the first schema again");
    // A copy holds the same id row, in a database with another OID.
    let copy = pg.new_database_from("restored", database);
    assert_eq!(
        pg.psql(database_of(&copy), "SELECT id FROM public.recon_ledger"),
        id
    );
    assert_ne!(instance_at(&binary, &copy), first, "a restored copy");
    let fresh = pg.new_database("fresh");
    assert_ne!(instance_at(&binary, &fresh), first, "another database");
}

#[test]
fn a_pg_ledger_pointed_at_another_schema_is_refused_before_any_close_or_decision() {
    let test = "a_pg_ledger_pointed_at_another_schema_is_refused_before_any_close_or_decision";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("schema_moved");
    let database = database_of(&url).to_string();
    let lab = pg_lab(&binary, &url, "ledger", "ledger_write");
    let ws = lab.path_str();
    let w = ws.as_str();
    prepare(w, "pg-8", "ledger_write", &json!({"n": 8}));
    let report = dispatch(w, "pg-8", &[(CRASH_ENV, "after-apply-commit")]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    // The same URL now reaches an empty schema: another store.
    pg.psql(
        &database,
        &format!("CREATE SCHEMA elsewhere; ALTER DATABASE {database} SET search_path = elsewhere"),
    );
    let refused = snapshot(w, "pg-8", Some("ann"), &[]);
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("receiver_changed"),
        "{}",
        refused.stderr
    );
    let accept = run(
        &["receivers", "check", "--workspace", w, "ledger", "--accept"],
        None,
    );
    assert!(
        accept.stderr.contains("receiver_changed"),
        "{}",
        accept.stderr
    );
    let closes = pg.psql(
        &database,
        "SELECT count(*) FROM elsewhere.recon_gate WHERE closed_at IS NOT NULL",
    );
    assert_eq!(closes.trim(), "0", "nothing was closed in the other schema");
    let shown = ok_json(
        &run(&["show", "--workspace", w, "pg-8", "--json"], None),
        "show",
    );
    assert_eq!(shown["operation"]["state"], json!("unknown"), "{shown}");
    assert_eq!(shown["closes"], json!([]), "{shown}");
}

#[test]
fn every_tombstone_names_the_closing_login_in_close_and_query_answers_and_recon_keeps_it() {
    let test =
        "every_tombstone_names_the_closing_login_in_close_and_query_answers_and_recon_keeps_it";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("closed_by");
    let lab = pg_lab(&binary, &url, "ledger", "ledger_write");
    let ws = lab.path_str();
    let w = ws.as_str();
    prepare(w, "pg-7", "ledger_write", &json!({"n": 7}));
    let report = dispatch(w, "pg-7", &[(CRASH_ENV, "after-apply-commit")]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    let closed = ok_json(&snapshot(w, "pg-7", Some("ann"), &[]), "closing snapshot");
    // The login the test cluster is reached with closed it (ann only
    // authorized the close).
    assert_eq!(
        closed["snapshot"]["closed_by"],
        json!("postgres"),
        "{closed}"
    );
    let args = ["--database", url.as_str()];
    let mut query = query_request("pg-7");
    query["workspace"] = json!(lab.ws.id());
    let (read, _) = call_adapter(&binary, &args, "query", &query, &[]);
    assert_eq!(read.expect("a read")["closed_by"], json!("postgres"));
    let mut open = query_request("pg-open");
    open["workspace"] = json!(lab.ws.id());
    let (read, _) = call_adapter(&binary, &args, "query", &open, &[]);
    let read = read.expect("a read");
    assert!(read.get("closed_by").is_none(), "an open operation: {read}");
    let shown = ok_json(
        &run(&["show", "--workspace", w, "pg-7", "--json"], None),
        "show",
    );
    // The closing read is kept as the operation's observation.
    let kept = shown["observations"]
        .as_array()
        .and_then(|rows| {
            rows.iter()
                .find(|row| row["snapshot"]["closed"] == json!(true))
        })
        .map(|row| row["snapshot"]["closed_by"].clone());
    assert_eq!(kept, Some(json!("postgres")), "{shown}");
}

#[test]
fn a_duplicate_made_by_a_lost_receipt_and_a_blind_retry_is_kept_and_its_surplus_refunded_end_to_end(
) {
    let test = "a_duplicate_made_by_a_lost_receipt_and_a_blind_retry_is_kept_and_its_surplus_refunded_end_to_end";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("dup_kept");
    let lab = pg_lab(&binary, &url, "ledger", "charge");
    let ws = lab.path_str();
    let w = ws.as_str();
    let payload = json!({"account": "acct-3", "amount": 40});
    prepare(w, "pg-d", "charge", &payload);
    let report = dispatch(w, "pg-d", &[(CRASH_ENV, "after-apply-commit")]);
    assert_eq!(report["outcome"], json!("unknown"), "{report}");
    // A blind retry, outside recon, by whoever sent it first: the same
    // request for the same workspace's op.
    let mut retry = apply_request("pg-d", "charge", &payload);
    retry["workspace"] = json!(lab.ws.id());
    let args = ["--database", url.as_str()];
    let (answer, _) = call_adapter(&binary, &args, "apply", &retry, &[]);
    assert_eq!(answer.as_ref().map(|a| a["ok"].clone()), Some(json!(true)));
    assert_eq!(table_effects(pg, database_of(&url), "pg-d").len(), 2);
    let closed = ok_json(&snapshot(w, "pg-d", Some("ann"), &[]), "the close");
    assert_eq!(closed["verdict"], json!("duplicate_matches"), "{closed}");
    let ids: Vec<String> = (closed["snapshot"]["matches"].as_array().expect("matches"))
        .iter()
        .map(|m| m["effect_id"].as_str().expect("an id").to_string())
        .collect();
    let keep = [
        "reconcile",
        "--workspace",
        w,
        "pg-d",
        "--reviewer",
        "rita",
        "--decision",
        "confirmed",
        "--keep",
        &ids[0],
        "--expected-version",
        "2",
        "--json",
    ];
    let kept = ok_json(&run(&keep, None), "keep one");
    assert_eq!(kept["state"], json!("confirmed"), "{kept}");
    let shown = ok_json(
        &run(&["show", "--workspace", w, "pg-d", "--json"], None),
        "show",
    );
    let operation = &shown["operation"];
    assert_eq!(operation["confirmed_effect_id"], json!(ids[0]), "{shown}");
    assert_eq!(operation["surplus_effect_ids"], json!([ids[1]]), "{shown}");
    let refund = json!({"account": "acct-3", "amount": -40});
    let refund = refund.to_string();
    let approve = [
        "approve-compensation",
        "--workspace",
        w,
        "pg-d",
        "--effect",
        &ids[1],
        "--reason",
        "duplicate",
        "--approver",
        "bob",
        "--expected-version",
        "3",
        "--compensation-op",
        "undo-d",
        "--action",
        "charge",
        "--payload",
        &refund,
        "--json",
    ];
    ok_json(&run(&approve, None), "approve the surplus's refund");
    let refunded = dispatch(w, "undo-d", &[]);
    assert_eq!(refunded["state"], json!("confirmed"), "{refunded}");
    assert_eq!(table_effects(pg, database_of(&url), "undo-d").len(), 1);
    // Asked again, the ledger holds the kept effect, the surplus and its
    // refund: what the decision listed, so no contradiction.
    let check = run(&["verify", "--workspace", w, "--receivers", "--json"], None);
    let report = ok_json(&check, "verify --receivers");
    assert_eq!(report["contradicted"], json!([]), "{report}");
    assert!(report["checked"].as_u64() >= Some(2), "{report}");
    let listed = ok_json(
        &run(
            &["ops", "--workspace", w, "--surplus", "yes", "--json"],
            None,
        ),
        "ops --surplus yes",
    );
    assert_eq!(listed, json!([]), "the surplus is compensated");
}
