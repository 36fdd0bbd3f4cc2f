//! `recon prepare --batch` (SPEC 10) of `RECON_BENCH_BATCH` lines (default
//! 100,000) on a SQLite workspace and on a PostgreSQL outbox, in the same
//! run: the release binary reading one file of JSON lines, transactions of
//! 500, each line under its own savepoint. The cluster is the tests'
//! (`servers.rs`), started by this bench, flushing its commits as a
//! production server does; both outboxes route the action to the fixture
//! adapter (never called: prepare does not dispatch).
//!
//! `cargo bench --bench batch`

#[path = "../tests/it/real_receivers/servers.rs"]
mod servers;

#[allow(dead_code)]
mod support;

use recon::{DatabaseUrl, Location, OpenOptions, Workspace};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use support::{count, register_lossy, strings};

const ACTION: &str = "post_letter";

/// A file of `n` JSON lines, each a new operation.
fn batch_file(path: &Path, n: usize) {
    let file = std::fs::File::create(path).expect("create the batch");
    let mut out = std::io::BufWriter::new(file);
    for i in 0..n {
        let line = json!({"op": format!("batch-{i:07}"), "action": ACTION,
                          "payload": {"to": "ann", "text": format!("letter {i}")}});
        writeln!(out, "{line}").expect("write a line");
    }
    out.flush().expect("flush the batch");
}

fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

fn main() {
    let n = count("RECON_BENCH_BATCH", 100_000);
    servers::durable_postgres();
    let Some(pg) = servers::require("bench batch", servers::postgres()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("batch.jsonl");
    batch_file(&file, n);
    let file = file.display().to_string();

    let sqlite = dir.path().join("sqlite");
    let mut ws =
        Workspace::open(sqlite.as_path(), OpenOptions::default().creating()).expect("workspace");
    register_lossy(&mut ws, dir.path(), ACTION);
    drop(ws);
    let sqlite = sqlite.display().to_string();
    let on_sqlite = support::run(&strings(&[
        "prepare",
        "--workspace",
        &sqlite,
        "--batch",
        &file,
    ]));

    let url = pg.new_database("batch");
    support::run(&servers::db_init_args(&url));
    let location = Location::from(DatabaseUrl::parse(&url).expect("a database URL"));
    let mut ws = Workspace::open(location, OpenOptions::default()).expect("outbox");
    let receiver = dir.path().join("postgres");
    std::fs::create_dir(&receiver).expect("the receiver's directory");
    register_lossy(&mut ws, &receiver, ACTION);
    drop(ws);
    let on_postgres = support::run(&strings(&["prepare", "--database", &url, "--batch", &file]));

    println!("## prepare --batch of {n} lines (release binary, one process each)");
    println!(
        "SQLite      {:>8.1} s  {:>9.0} lines/s",
        on_sqlite.as_secs_f64(),
        rate(n, on_sqlite)
    );
    println!(
        "PostgreSQL  {:>8.1} s  {:>9.0} lines/s",
        on_postgres.as_secs_f64(),
        rate(n, on_postgres)
    );
    println!(
        "PostgreSQL / SQLite time: {:.2}x (goal: within 2x)",
        on_postgres.as_secs_f64() / on_sqlite.as_secs_f64()
    );
}
