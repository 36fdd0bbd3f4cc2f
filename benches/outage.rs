//! The outage drill (issue 21), in two parts.
//!
//! **The drill on `recon-pg-ledger`** (`RECON_BENCH_DRILL_OPS`, default
//! 100,000): operations routed to the PostgreSQL ledger lost their
//! receipts; 60 % were applied, 35 % never arrived, 3 % were applied twice
//! and 2 % were applied with a changed payload (`tests/it/outage/drill.rs`,
//! shared with the drill's test: the outbox written by its bulk load, the
//! receiver's effects by the adapter's own `apply` in one session). Then
//! `recon observe` and `recon resolve --policy provable` run over all of
//! them through the release binary, as a person would run them, against a
//! throwaway cluster that flushes its commits as a production server does.
//! The adapter is registered behind a script that logs each start, so the
//! process spawns are counted on the receiver's side. The drill runs with
//! its outbox on each store in the same run (`RECON_BENCH_DRILL_STORES`,
//! default `sqlite,postgres`): a SQLite workspace written by its bulk load,
//! and a PostgreSQL outbox (which has none) whose operations are prepared
//! in batches of 500 and dispatched while the adapter's `apply` dies at
//! once, a real lost receipt each (that setup is not measured). Printed:
//! each phase's wall time, spawns and operations per second, the whole
//! drill's, the remaining queue by verdict, and PostgreSQL's time over
//! SQLite's for each phase and the whole drill.
//!
//! **The adapter's transport** against recon's own ledger
//! (`RECON_BENCH_CALLS` generated unknown operations, default 2,000, the
//! demo's load): `observe` in process and through the ledger's adapter (a
//! session in batches of 500), medians of `RECON_BENCH_RUNS` (default 3),
//! and single-operation query calls (a process per call; one session):
//! what an adapter round trip adds over an in-process read.
//!
//! **`verify --receivers`** (SPEC 12): after the drill's `resolve`, over
//! every decision it made; and beside `observe` over recon's own ledger
//! (`RECON_BENCH_RECHECK_OPS` generated operations, default 10,000,
//! observed, resolved by policy, then read again). With
//! `RECON_BENCH_RECHECK_ONLY` set, only the latter runs.
//!
//! `cargo bench --bench outage`

#[path = "../tests/it/real_receivers/servers.rs"]
mod servers;

#[allow(dead_code)]
mod support;

#[allow(dead_code)]
#[path = "../tests/it/outage/drill.rs"]
mod drill;

use recon::demo::{generate, Load};
use recon::dispatch::adapter::{AdapterProgram, PassEnv, Session};
use recon::dispatch::ReceiverProgram;
use recon::receiver::protocol::Verb;
use recon::workspace::ObserveRequest;
use recon::{DatabaseUrl, Location};
use recon::{OpenOptions, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{median, recon};

/// Generated operations per bulk transaction, as the demo writes them.
const CHUNK: u64 = 10_000;

fn count(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn program() -> ReceiverProgram {
    ReceiverProgram::new(recon(), Duration::from_secs(60))
}

fn open(dir: &Path, creating: bool) -> Workspace {
    let options = match creating {
        true => OpenOptions::default().creating(),
        false => OpenOptions::default(),
    };
    Workspace::open(dir, options)
        .expect("open the workspace")
        .with_receiver_program(program())
}

/// Writes the outage into a new workspace at `dir`, its ledger registered
/// to be read in process (`can_close`) or through its adapter.
fn outage(dir: &Path, ops: u64, can_close: bool) -> Duration {
    let mut ws = open(dir, true);
    ws.register_builtin("builtin", &["*".to_string()], can_close)
        .expect("register the ledger");
    let schedule = generate::Schedule::new(1, ops, ws.now());
    let start = Instant::now();
    ws.append_generated(&Load::new(1, ops, schedule))
        .expect("generate the outage");
    start.elapsed()
}

/// A fresh copy of the outage at `pristine`, for one run to change.
fn copy(pristine: &Path, into: &Path) {
    std::fs::create_dir_all(into).expect("a run directory");
    for entry in std::fs::read_dir(pristine).expect("read the outage") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), into.join(entry.file_name())).expect("copy");
    }
}

/// `observe` over every unknown operation, as one command would.
fn observe(ws: &mut Workspace) -> usize {
    let report = ws
        .observe(&ObserveRequest {
            by: "bench",
            ..ObserveRequest::default()
        })
        .expect("observe");
    assert!(report.unread.is_empty(), "{:?}", report.unread.first());
    report.observed.len()
}

/// One whole phase measured: the median time, the operations it
/// handled, and the receiver processes it spawned.
struct Measured {
    time: Duration,
    ops: usize,
    spawned: usize,
}

fn measure(pristine: &Path, scratch: &Path, runs: usize) -> Measured {
    let mut times = Vec::new();
    let (mut ops, mut spawned) = (0, 0);
    for run in 0..runs {
        let dir = scratch.join(format!("run-{run}"));
        copy(pristine, &dir);
        let mut ws = open(&dir, false);
        let start = Instant::now();
        ops = observe(&mut ws);
        times.push(start.elapsed());
        spawned = ws.receiver_program().spawned();
        drop(ws);
        std::fs::remove_dir_all(&dir).expect("remove the run");
    }
    Measured {
        time: median(times),
        ops,
        spawned,
    }
}

/// The adapter's transport per operation: one-shot calls and session
/// requests, each about one operation, medians of `calls`.
fn transport(dir: &Path, calls: usize) -> (Duration, Duration) {
    let ws = open(dir, false);
    let counter = program();
    let adapter = AdapterProgram {
        program: recon(),
        args: ["receiver", "adapter", "--workspace"]
            .iter()
            .map(|s| s.to_string())
            .chain([dir.display().to_string(), "--no-close".to_string()])
            .collect(),
        timeout: Duration::from_secs(30),
        env: PassEnv::default(),
    };
    let mut session = Session::new(adapter.clone());
    let (mut one_shot, mut in_session) = (Vec::new(), Vec::new());
    for n in 1..=calls as u64 {
        let request =
            json!({"recon_adapter": 1, "workspace": ws.id(), "op_id": generate::op_id(n)});
        let start = Instant::now();
        session
            .request(&counter, Verb::Query, &request)
            .answer
            .unwrap();
        in_session.push(start.elapsed());
        let start = Instant::now();
        adapter
            .call(&counter, Verb::Query, &request)
            .answer
            .unwrap();
        one_shot.push(start.elapsed());
    }
    (median(one_shot), median(in_session))
}

fn row(name: &str, time: Duration, ops: usize, spawned: &str, against: Duration) {
    println!(
        "  {name:<34} {:>9.3} s {:>9.0} ops/s {spawned:>9} {:>7.2}x",
        time.as_secs_f64(),
        ops as f64 / time.as_secs_f64(),
        time.as_secs_f64() / against.as_secs_f64()
    );
}

/// The adapter's transport against recon's own ledger, over `ops`
/// generated operations: whole `observe` runs in process and through one
/// session in batches, and single-operation calls.
fn transport_rows(root: &Path, ops: u64, runs: usize) {
    let (in_process, adapter) = (root.join("in-process"), root.join("adapter"));
    outage(&in_process, ops, true);
    outage(&adapter, ops, false);
    let floor = measure(&in_process, &root.join("runs"), runs);
    let batched = measure(&adapter, &root.join("runs"), runs);
    assert_eq!((floor.ops, batched.ops), (ops as usize, ops as usize));
    let (one_shot, in_session) = transport(&adapter, ops as usize);
    let per_op = |call: Duration| floor.time + call * ops as u32;
    println!("transport: observe of {ops} operations behind recon's ledger, median of {runs}:");
    println!(
        "  {:<34} {:>11} {:>15} {:>9} {:>8}",
        "", "time", "rate", "spawns", "ratio"
    );
    let b = batched.time;
    let n = ops as usize;
    row("in process", floor.time, n, &floor.spawned.to_string(), b);
    let spawned = batched.spawned.to_string();
    row("session + batches of 500", b, n, &spawned, b);
    row(
        "session, one op per request (est.)",
        per_op(in_session),
        n,
        "1",
        b,
    );
    row(
        "one-shot calls (est.)",
        per_op(one_shot),
        n,
        &format!("~{ops}"),
        b,
    );
    println!(
        "  adapter round trip per op: session + batches {:.3} ms over in process; \
         one op per session request {:.3} ms; one-shot {:.3} ms",
        (b.saturating_sub(floor.time)).as_secs_f64() * 1000.0 / ops as f64,
        in_session.as_secs_f64() * 1000.0,
        one_shot.as_secs_f64() * 1000.0
    );
}

/// Where a drill's outbox is: a workspace directory, or a PostgreSQL
/// database (its URL) with a scratch directory for the counting script.
enum Outbox {
    Sqlite(PathBuf),
    Postgres { url: String, scratch: PathBuf },
}

impl Outbox {
    fn name(&self) -> &'static str {
        match self {
            Outbox::Sqlite(_) => "SQLite",
            Outbox::Postgres { .. } => "PostgreSQL",
        }
    }

    /// The option that names this outbox on recon's command line.
    fn place(&self) -> [String; 2] {
        match self {
            Outbox::Sqlite(dir) => ["--workspace".into(), dir.display().to_string()],
            Outbox::Postgres { url, .. } => ["--database".into(), url.clone()],
        }
    }

    /// Where the counting script and its log live.
    fn scratch(&self) -> &Path {
        match self {
            Outbox::Sqlite(dir) => dir,
            Outbox::Postgres { scratch, .. } => scratch,
        }
    }
}

/// `recon WORDS` on `outbox` through the release binary: its wall time
/// and what it printed on stdout; panics unless it exits 0.
fn recon_in(outbox: &Outbox, words: &[&str]) -> (Duration, String) {
    let start = Instant::now();
    let out = std::process::Command::new(recon())
        .args(&words[..1])
        .args(outbox.place())
        .args(&words[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run recon");
    let elapsed = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "recon {words:?}: {stderr}");
    (elapsed, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A SQLite workspace at `dir` whose `ops` unknown operations route to
/// `recon-pg-ledger` (behind the counting script, effects in `ledger`),
/// written by the outbox's bulk load.
fn sqlite_outage(binary: &Path, dir: &Path, ledger: &str, ops: u64) -> Outbox {
    let mut ws = open(dir, true);
    let program = drill::counting_spawns(binary, dir);
    drill::register_ledger(&mut ws, &program, ledger);
    let at = ws.now();
    let mut operations = drill::operations(ops, at);
    while ws
        .append_lost_receipts("ledger", &mut operations.by_ref().take(CHUNK as usize))
        .expect("the outage")
        > 0
    {}
    Outbox::Sqlite(dir.to_path_buf())
}

/// A PostgreSQL outbox (a new database) whose `ops` unknown operations
/// route to `recon-pg-ledger` as [`sqlite_outage`]'s do. It has no bulk
/// load: they are prepared in batches of 500, then each is dispatched to
/// the script while its `apply` dies at once, as a real lost receipt is
/// made, by [`DISPATCHERS`] sessions side by side (one spawns while
/// another commits).
fn postgres_outage(
    pg: &servers::Postgres,
    binary: &Path,
    scratch: &Path,
    ledger: &str,
    ops: u64,
) -> Outbox {
    let url = pg.new_database("outbox");
    support::run(&servers::db_init_args(&url));
    std::fs::create_dir_all(scratch).expect("the scratch directory");
    let mut ws = open_postgres(&url);
    let script = drill::counting_spawns(binary, scratch);
    drill::register_ledger(&mut ws, &script, ledger);
    let at = ws.now();
    let operations: Vec<_> = drill::operations(ops, at).collect();
    for chunk in operations.chunks(500) {
        let payloads: Vec<serde_json::Value> = (chunk.iter())
            .map(|op| serde_json::from_str(&op.canonical_payload).expect("JSON"))
            .collect();
        let news: Vec<_> = (chunk.iter().zip(&payloads))
            .map(|(op, payload)| recon::domain::NewOperation {
                op_id: &op.op_id,
                action_kind: &op.action_kind,
                payload,
                origin: None,
            })
            .collect();
        for prepared in ws.prepare_each(&news).expect("prepare a batch") {
            prepared.expect("prepare");
        }
    }
    let dies = scratch.join(drill::APPLY_DIES);
    std::fs::write(&dies, "").expect("the apply dies");
    std::thread::scope(|scope| {
        for k in 0..DISPATCHERS {
            let (url, operations) = (&url, &operations);
            scope.spawn(move || {
                let mut ws = open_postgres(url);
                for op in operations.iter().skip(k).step_by(DISPATCHERS) {
                    let report = ws.dispatch(&op.op_id, Default::default());
                    let report = report.expect("dispatch");
                    assert_eq!(report.outcome, "unknown", "{report:?}");
                }
            });
        }
    });
    std::fs::remove_file(&dies).expect("the apply lives");
    Outbox::Postgres {
        url,
        scratch: scratch.to_path_buf(),
    }
}

/// Sessions that dispatch a PostgreSQL drill's operations side by side.
const DISPATCHERS: usize = 4;

/// The PostgreSQL outbox at `url`, its built-in receiver this build's.
fn open_postgres(url: &str) -> Workspace {
    let location = Location::from(DatabaseUrl::parse(url).expect("a database URL"));
    Workspace::open(location, OpenOptions::default())
        .expect("the outbox")
        .with_receiver_program(program())
}

/// The drill on `recon-pg-ledger` with its outbox on each store: the
/// outage made (not measured against anything), then `observe` and
/// `resolve` through the binary; each phase's figures, the whole drill's
/// and the queue left.
fn pg_drill(root: &Path, ops: u64) {
    servers::durable_postgres();
    let Some(pg) = servers::require("bench outage", servers::postgres()) else {
        return;
    };
    let Some(binary) = servers::require("bench outage", servers::pg_ledger_binary()) else {
        return;
    };
    let mut wholes = Vec::new();
    for store in drill_stores() {
        let start = Instant::now();
        let ledger = pg.new_database("drill");
        let outbox = match store {
            "sqlite" => sqlite_outage(binary, &root.join("drill"), &ledger, ops),
            _ => postgres_outage(pg, binary, &root.join("drill-pg"), &ledger, ops),
        };
        // Setup is not measured: its applies skip the wait for the flush.
        let unflushed = format!("{ledger}?options=-c%20synchronous_commit%3Doff");
        let workspace = open_id(&outbox);
        drill::apply_fates(binary, &unflushed, &workspace, ops);
        println!(
            "drill ({} outbox): {ops} unknown operations behind recon-pg-ledger made in {:.1} s",
            outbox.name(),
            start.elapsed().as_secs_f64()
        );
        wholes.push((outbox.name(), drill_phases(&outbox, ops)));
    }
    if let [(a, [ao, ar]), (b, [bo, br])] = &wholes[..] {
        let ratio = |x: Duration, y: Duration| y.as_secs_f64() / x.as_secs_f64();
        println!(
            "  {b} / {a} time: observe {:.2}x, resolve {:.2}x, whole drill {:.2}x (goal: within 2x)",
            ratio(*ao, *bo),
            ratio(*ar, *br),
            ratio(*ao + *ar, *bo + *br)
        );
    }
}

/// Which outboxes the drill runs on (`RECON_BENCH_DRILL_STORES`, a comma
/// list of `sqlite` and `postgres`; default both, SQLite first).
fn drill_stores() -> Vec<&'static str> {
    let wanted = std::env::var("RECON_BENCH_DRILL_STORES").unwrap_or("sqlite,postgres".into());
    ["sqlite", "postgres"]
        .into_iter()
        .filter(|s| wanted.split(',').any(|w| w.trim() == *s))
        .collect()
}

/// The workspace id of `outbox` (the ledger keys its effects by it).
fn open_id(outbox: &Outbox) -> String {
    let ws = match outbox {
        Outbox::Sqlite(dir) => open(dir, false),
        Outbox::Postgres { url, .. } => open_postgres(url),
    };
    ws.id().to_string()
}

/// The drill's and the recheck's `resolve`: every provable verdict, of
/// any age, by one name.
const RESOLVE: [&str; 10] = [
    "resolve",
    "--policy",
    "provable",
    "--by",
    "bench",
    "--authorized-by",
    "bench",
    "--older-than",
    "0s",
    "--json",
];

/// `observe` then `resolve` over the drill's outbox through the binary:
/// each phase's row, the whole drill's, the queue left and the recheck;
/// the two phases' wall times.
fn drill_phases(outbox: &Outbox, ops: u64) -> [Duration; 2] {
    let phases: [(&str, &[&str]); 2] = [
        ("observe", &["observe", "--by", "bench", "--json"]),
        ("resolve --policy provable", &RESOLVE),
    ];
    println!(
        "  {:<26} {:>11} {:>15} {:>9}",
        "", "wall time", "rate", "spawns"
    );
    let (mut times, mut total_spawns, mut report) = ([Duration::ZERO; 2], 0, String::new());
    for (i, (name, words)) in phases.into_iter().enumerate() {
        let before = drill::spawned(outbox.scratch()).len();
        let (time, stdout) = recon_in(outbox, words);
        let spawned = drill::spawned(outbox.scratch()).len() - before;
        println!(
            "  {name:<26} {:>9.2} s {:>9.0} ops/s {spawned:>9}",
            time.as_secs_f64(),
            ops as f64 / time.as_secs_f64()
        );
        (times[i], total_spawns, report) = (time, total_spawns + spawned, stdout);
    }
    let total = times[0] + times[1];
    println!(
        "  {:<26} {:>9.2} s {:>9.0} ops/s {total_spawns:>9} ({:.3} spawns per 1,000 ops)",
        "whole drill",
        total.as_secs_f64(),
        ops as f64 / total.as_secs_f64(),
        total_spawns as f64 * 1000.0 / ops as f64
    );
    remaining_queue(outbox, &report);
    recheck_row(outbox, "decided by resolve");
    times
}

/// `verify --receivers` over every decided operation of the workspace at
/// `dir`, through the binary: its wall time and rate over the decisions
/// it checked (`what` says which they are); panics unless it found every
/// decision consistent.
fn recheck_row(outbox: &Outbox, what: &str) {
    let (time, stdout) = recon_in(outbox, &["verify", "--receivers", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("verify --json");
    let checked = report["checked"].as_u64().expect("checked");
    println!(
        "  verify --receivers: {checked} decisions ({what}) in {:.2} s, {:.0} ops/s; \
         contradicted {}, unchecked {}",
        time.as_secs_f64(),
        checked as f64 / time.as_secs_f64(),
        report["contradicted"],
        report["unchecked"]
    );
}

/// `verify --receivers` beside `observe` over recon's own ledger (SQLite,
/// read in process): the generated outage observed, then resolved by
/// policy, then its decisions read again; the rate of each, through the
/// binary.
fn recheck_rows(root: &Path, ops: u64) {
    let dir = root.join("recheck");
    outage(&dir, ops, true);
    println!("recheck: {ops} generated operations behind recon's ledger (SQLite):");
    let dir = Outbox::Sqlite(dir);
    let (time, _) = recon_in(&dir, &["observe", "--by", "bench", "--json"]);
    println!(
        "  observe: {ops} unknown operations in {:.2} s, {:.0} ops/s",
        time.as_secs_f64(),
        ops as f64 / time.as_secs_f64()
    );
    recon_in(&dir, &RESOLVE);
    recheck_row(&dir, "decided by resolve");
}

/// The resolve report's counts, and the `unknown` queue left, by the
/// verdict of each operation's latest read.
fn remaining_queue(outbox: &Outbox, report: &str) {
    let report: serde_json::Value = serde_json::from_str(report).expect("resolve --json");
    println!(
        "  resolve: confirmed {}, not_applied {}, left {}, skipped {}, failed {}",
        report["confirmed"],
        report["not_applied"],
        report["left"],
        report["skipped"],
        report["failed"]
    );
    let (_, queue) = recon_in(
        outbox,
        &["ops", "--state", "unknown", "--json", "--limit", "1000000"],
    );
    let queue: serde_json::Value = serde_json::from_str(&queue).expect("ops --json");
    let mut by_verdict = std::collections::BTreeMap::<String, usize>::new();
    for op in queue.as_array().expect("the queue") {
        let verdict = op["latest_observation"]["verdict"]
            .as_str()
            .unwrap_or("never read");
        *by_verdict.entry(verdict.to_string()).or_default() += 1;
    }
    println!("  remaining unknown queue by verdict: {by_verdict:?}");
}

fn main() {
    let ops = count("RECON_BENCH_DRILL_OPS", 100_000) as u64;
    let runs = count("RECON_BENCH_RUNS", 3);
    let calls = count("RECON_BENCH_CALLS", 2_000) as u64;
    let recheck = count("RECON_BENCH_RECHECK_OPS", 10_000) as u64;
    let root = tempfile::tempdir().expect("temp dir");
    if std::env::var_os("RECON_BENCH_RECHECK_ONLY").is_none() {
        pg_drill(root.path(), ops);
        transport_rows(root.path(), calls, runs);
    }
    recheck_rows(root.path(), recheck);
}
