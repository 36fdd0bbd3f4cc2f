//! The cost of `recon-adapter/1`: one read of the built-in ledger through
//! its adapter (`recon receiver adapter --workspace DIR`, which declares
//! `session`, so the workspace reads it through one session process)
//! against the same read made in process; and the transport alone, one
//! query request through a session against one process per call (spawn,
//! request on stdin, answer on stdout). Medians over `RECON_BENCH_CALLS`
//! calls each (default 1,000), alternating so a drift of the machine hits
//! all alike; and one whole `recon --check`, the experiment through the
//! protocol.
//!
//! `cargo bench --bench adapter`

#[allow(dead_code)]
mod support;

use recon::dispatch::adapter::{AdapterProgram, PassEnv, Session};
use recon::dispatch::ReceiverProgram;
use recon::receiver::protocol::Verb;
use recon::workspace::NewReceiver;
use recon::{OpenOptions, Workspace};
use serde_json::json;

use std::time::{Duration, Instant};
use support::{median, recon};

fn calls() -> usize {
    std::env::var("RECON_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = Workspace::open(dir.path(), OpenOptions::default().creating())
        .expect("workspace")
        .with_receiver_program(recon::dispatch::ReceiverProgram::new(
            recon(),
            Duration::from_secs(30),
        ));
    let args: Vec<String> = ["receiver", "adapter", "--workspace"]
        .iter()
        .map(|s| s.to_string())
        .chain([dir.path().display().to_string()])
        .collect();
    ws.register_builtin("builtin", &["*".to_string()], true)
        .expect("register the built-in ledger");
    ws.register_receiver(&NewReceiver {
        name: "ledger",
        actions: &["send_email".to_string()],
        program: &recon(),
        args: &args.clone(),
        timeout_ms: None,
        env: &[],
    })
    .expect("register the built-in ledger as an adapter");
    let payload = json!({"to": "ada@example.com", "subject": "hello"});
    ws.prepare("op-in-process", "send_sms", &payload).unwrap();
    ws.prepare("op-adapter", "send_email", &payload).unwrap();
    for op in ["op-in-process", "op-adapter"] {
        ws.dispatch(op, Default::default()).unwrap();
    }
    let program = AdapterProgram {
        program: recon(),
        args,
        timeout: Duration::from_secs(30),
        env: PassEnv::default(),
    };
    let workspace = ws.id().to_string();
    let request = json!({"recon_adapter": 1, "workspace": workspace, "op_id": "op-adapter"});
    let counter = ReceiverProgram::new(recon(), Duration::from_secs(30));
    let mut session = Session::new(program.clone());
    let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..calls() {
        let start = Instant::now();
        ws.snapshot("op-in-process", None).unwrap();
        times[0].push(start.elapsed());
        let start = Instant::now();
        ws.snapshot("op-adapter", None).unwrap();
        times[1].push(start.elapsed());
        let start = Instant::now();
        session
            .request(&counter, Verb::Query, &request)
            .answer
            .unwrap();
        times[2].push(start.elapsed());
        let start = Instant::now();
        program
            .call(&counter, Verb::Query, &request)
            .answer
            .unwrap();
        times[3].push(start.elapsed());
    }
    let [a, b, c, d] = times.map(median);
    println!("reads of one operation, median of {} calls each:", calls());
    println!("  in process (built-in ledger)         {:>9.3} ms", ms(a));
    println!("  through the adapter's session        {:>9.3} ms", ms(b));
    println!(
        "  added by the session                 {:>9.3} ms",
        ms(b.saturating_sub(a))
    );
    println!("the transport alone, one query request:");
    println!("  through a session                    {:>9.3} ms", ms(c));
    println!("  one process per call (spawn + query) {:>9.3} ms", ms(d));
    let checks: Vec<Duration> = (0..11).map(|_| support::run(&["--check".into()])).collect();
    println!(
        "recon --check, median of 11 runs: {:.3} s",
        median(checks).as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
