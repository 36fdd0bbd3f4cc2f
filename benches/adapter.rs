//! The cost of `recon-adapter/1`: one read of the built-in ledger through a
//! spawned adapter process (`recon receiver adapter --workspace DIR query`,
//! request on stdin, answer on stdout) against the same read made in
//! process, median over `RECON_BENCH_CALLS` calls each (default 1,000),
//! alternating the two so a drift of the machine hits both alike; and one
//! whole `recon --check`, the experiment through the protocol.
//!
//! `cargo bench --bench adapter`

#[allow(dead_code)]
mod support;

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
        args: &args,
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
    let (mut in_process, mut adapter) = (Vec::new(), Vec::new());
    for _ in 0..calls() {
        let start = Instant::now();
        ws.snapshot("op-in-process", None).unwrap();
        in_process.push(start.elapsed());
        let start = Instant::now();
        ws.snapshot("op-adapter", None).unwrap();
        adapter.push(start.elapsed());
    }
    let (a, b) = (median(in_process), median(adapter));
    println!("reads of one operation, median of {} calls each:", calls());
    println!("  in process (built-in ledger)        {:>9.3} ms", ms(a));
    println!("  through the adapter (spawn + query) {:>9.3} ms", ms(b));
    println!(
        "  added by the protocol               {:>9.3} ms",
        ms(b.saturating_sub(a))
    );
    let checks: Vec<Duration> = (0..11).map(|_| support::run(&["--check".into()])).collect();
    println!(
        "recon --check, median of 11 runs: {:.3} s",
        median(checks).as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
