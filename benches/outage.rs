//! The outage drill (issue 21): `RECON_BENCH_OUTAGE_OPS` unknown
//! operations (default 100,000; the demo's generated load, written in
//! bulk: lost receipts, each with what recon's ledger holds for it), read
//! by one `observe` each run on a fresh copy of the outage:
//!
//! - **in process**: recon's ledger registered as it is by `demo`, read in
//!   process; the floor every adapter is measured against;
//! - **session + batches**: the same ledger registered `--no-close`, so it
//!   is read through its adapter (`recon receiver adapter`), which declares
//!   `"session": true` and `"batch": 500`: one process for the command, one
//!   request per 500 operations;
//! - **one-shot** and **session, one op per request**: the adapter's
//!   transport alone, `RECON_BENCH_CALLS` (default 2,000) single-operation
//!   query calls each (a process per call; one session), added per
//!   operation to the in-process run: extrapolated, not run whole (the
//!   built-in adapter always declares its session and batch).
//!
//! Each whole phase runs `RECON_BENCH_RUNS` times (default 3); the table
//! gives medians, operations per second, the receiver processes spawned,
//! and each phase's ratio to session + batches.
//!
//! `cargo bench --bench outage`

#[allow(dead_code)]
mod support;

use recon::demo::generate;
use recon::dispatch::adapter::{AdapterProgram, PassEnv, Session};
use recon::dispatch::ReceiverProgram;
use recon::domain::{BulkEffect, BulkOperation};
use recon::receiver::protocol::Verb;
use recon::workspace::{GeneratedLoad, ObserveRequest};
use recon::{OpenOptions, Workspace};
use serde_json::json;
use std::ops::RangeInclusive;
use std::path::Path;
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

/// Generated operations `1..=count`.
struct Outage {
    count: u64,
    schedule: generate::Schedule,
}

impl GeneratedLoad for Outage {
    fn chunks(&self) -> Vec<RangeInclusive<u64>> {
        (1..=self.count)
            .step_by(CHUNK as usize)
            .map(|start| start..=self.count.min(start + CHUNK - 1))
            .collect()
    }

    fn operation(&self, n: u64, first_effect_seq: i64) -> BulkOperation {
        generate::operation(n, &self.schedule, first_effect_seq)
    }

    fn effects(&self, n: u64) -> Box<dyn Iterator<Item = BulkEffect> + '_> {
        Box::new(generate::effects(n))
    }

    fn effect_count(&self, n: u64) -> u64 {
        generate::effect_count(n)
    }
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
    ws.append_generated(&Outage {
        count: ops,
        schedule,
    })
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

/// One phase of the drill, run on a fresh copy of the outage: how many
/// operations it handled. `resolve` (issue 21, item 3) is added as the
/// next phase once it exists: the provable operations closed and decided.
type Phase = fn(&mut Workspace) -> usize;

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

fn measure(pristine: &Path, scratch: &Path, phase: Phase, runs: usize) -> Measured {
    let mut times = Vec::new();
    let (mut ops, mut spawned) = (0, 0);
    for run in 0..runs {
        let dir = scratch.join(format!("run-{run}"));
        copy(pristine, &dir);
        let mut ws = open(&dir, false);
        let start = Instant::now();
        ops = phase(&mut ws);
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
        "  {name:<34} {:>9.2} s {:>9.0} ops/s {spawned:>9} {:>7.2}x",
        time.as_secs_f64(),
        ops as f64 / time.as_secs_f64(),
        time.as_secs_f64() / against.as_secs_f64()
    );
}

fn main() {
    let ops = count("RECON_BENCH_OUTAGE_OPS", 100_000) as u64;
    let runs = count("RECON_BENCH_RUNS", 3);
    let calls = count("RECON_BENCH_CALLS", 2_000).min(ops as usize);
    let root = tempfile::tempdir().expect("temp dir");
    let (in_process, adapter) = (root.path().join("in-process"), root.path().join("adapter"));
    let generated = outage(&in_process, ops, true);
    outage(&adapter, ops, false);
    println!(
        "{ops} unknown operations generated in {:.1} s",
        generated.as_secs_f64()
    );
    let phases: [(&str, Phase); 1] = [("observe", observe)];
    for (name, phase) in phases {
        let floor = measure(&in_process, &root.path().join("runs"), phase, runs);
        let batched = measure(&adapter, &root.path().join("runs"), phase, runs);
        assert_eq!((floor.ops, batched.ops), (ops as usize, ops as usize));
        let (one_shot, in_session) = transport(&adapter, calls);
        let per_op = |call: Duration| floor.time + call * ops as u32;
        println!("{name}, median of {runs} runs ({calls} calls for the transport rows):");
        println!(
            "  {:<34} {:>11} {:>15} {:>9} {:>8}",
            "", "time", "rate", "spawns", "ratio"
        );
        let b = batched.time;
        row(
            "in process",
            floor.time,
            ops as usize,
            &floor.spawned.to_string(),
            b,
        );
        row(
            "session + batches of 500",
            b,
            ops as usize,
            &batched.spawned.to_string(),
            b,
        );
        let estimate = format!("~{ops}");
        row(
            "session, one op per request (est.)",
            per_op(in_session),
            ops as usize,
            "1",
            b,
        );
        row(
            "one-shot calls (est.)",
            per_op(one_shot),
            ops as usize,
            &estimate,
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
}
