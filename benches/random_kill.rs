//! The long random-kill run: `RECON_KILLS` steps (default 3,000) of the
//! workload in tests/it/random_kill.rs against the release binary, each a
//! real `recon` process killed with SIGKILL at a random moment or left to
//! finish, with the invariants and `recon verify` checked after every
//! step. Prints the steps, kills and invariant violations (which must be
//! 0). `RECON_KILL_SEED` replays a run.
//!
//! `cargo bench --bench random_kill`

#[allow(dead_code)]
#[path = "../tests/it/invariants.rs"]
mod invariants;
#[allow(dead_code)]
#[path = "../tests/it/random_kill/harness.rs"]
mod random_kill;
#[path = "../tests/it/support.rs"]
mod support;

use std::time::{Duration, Instant};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let steps = env("RECON_KILLS", 3000);
    let seed = env("RECON_KILL_SEED", 0x5eed_cafe);
    let dir = tempfile::tempdir().expect("temp dir");
    let start = Instant::now();
    let report = random_kill::run(
        &random_kill::recon_bin(),
        dir.path(),
        steps,
        seed,
        Duration::from_millis(6),
    );
    println!(
        "random kills, seed {seed:#x}: {} steps in {:.1} s: {} killed, {} finished, {} invariant violations",
        report.steps,
        start.elapsed().as_secs_f64(),
        report.killed,
        report.finished,
        report.violations.len()
    );
    for v in report.violations.iter().take(20) {
        println!("  {v}");
    }
}
