//! The triage benchmark: `cargo bench --bench triage`.
//!
//! It builds a demo workspace per size with the release binary (`demo
//! --ops N`, timed once) and times whole processes, as a reviewer's script
//! meets them:
//!
//! - `ops --verdict duplicate_matches --limit 50`, as text and `--json`;
//! - `ops --sort age --limit 50`, from the start and from a cursor in the
//!   middle of the listing (`--after "age AT ID"`);
//! - `observe --by bench ID…` for 100 unknown operations from the middle
//!   of the workspace (every size observes the same count, so the row is a
//!   throughput: its line below the table gives operations per second);
//! - `screenshot`, the console's first frame (see benches/console.rs).
//!
//! Each paged command is run 21 times after a warm-up; the table gives the
//! medians, the ratio of the largest size to the first, and the peak
//! memory of one more run. A ratio near 1 is the claim: a page costs what
//! it holds, not what the outbox holds.
//!
//! `RECON_BENCH_SIZES=100,100000,1000000` changes the sizes (the first is
//! the baseline of the ratio).

mod support;

use recon::demo::generate::{self, Evidence};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{median, peak_rss_kib, run, strings, Measured};

/// How many operations one observe run reads.
const OBSERVED: usize = 100;

/// Unknown generated ops from the middle of the workspace outwards.
fn middle_ops(total: u64, count: usize) -> Vec<String> {
    (total / 2..=total)
        .chain(1..total / 2)
        .filter(|&n| Evidence::of(n) != Evidence::Absent)
        .take(count)
        .map(generate::op_id)
        .collect()
}

/// The `--sort age` cursor of generated op `n`, read from `ops --json`.
fn age_cursor(ws: &str, n: u64) -> String {
    let id = generate::op_id(n);
    let out = Command::new(support::recon())
        .args([
            "ops",
            "--workspace",
            ws,
            "--limit",
            "1",
            "--json",
            "--after",
        ])
        .arg(generate::op_id(n - 1))
        .stdin(Stdio::null())
        .output()
        .expect("run recon ops");
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ops --json");
    let op = &page[0];
    assert_eq!(op["op_id"], id.as_str(), "ops --after found {op}");
    let at = op["updated_at"].as_str().expect("updated_at");
    format!("age {at} {id}")
}

fn demo(ws: &Path, n: u64) -> Duration {
    let args = strings(&[
        "demo",
        "--workspace",
        &ws.display().to_string(),
        "--ops",
        &n.to_string(),
    ]);
    run(&args)
}

fn measure_size(n: u64) -> Vec<Measured> {
    let root = tempfile::Builder::new()
        .prefix("recon-bench-triage-")
        .tempdir()
        .expect("temp dir");
    let ws = root.path().join("ws");
    let build = demo(&ws, n);
    let ws_arg = ws.display().to_string();
    let with_ws = |args: &[&str]| {
        let mut all = strings(args);
        all.extend(["--workspace".to_string(), ws_arg.clone()]);
        all
    };
    let timed = |args: &[String]| {
        run(args); // warm-up: page cache and the binary itself
        let time = median((0..21).map(|_| run(args)).collect());
        (time, peak_rss_kib(args))
    };

    let mut rows = Vec::new();
    let mut page = |name, args: &[&str]| {
        let (time, rss) = timed(&with_ws(args));
        rows.push((name, time, rss));
    };
    let duplicates = ["ops", "--verdict", "duplicate_matches", "--limit", "50"];
    page("ops --verdict duplicate_matches --limit 50", &duplicates);
    let json = [&duplicates[..], &["--json"]].concat();
    page("ops --verdict duplicate_matches --limit 50 --json", &json);
    page(
        "ops --sort age --limit 50",
        &["ops", "--sort", "age", "--limit", "50"],
    );
    let cursor = age_cursor(&ws_arg, n / 2);
    page(
        "ops --sort age --limit 50 --after (middle)",
        &["ops", "--sort", "age", "--limit", "50", "--after", &cursor],
    );
    page("screenshot (the console's first frame)", &["screenshot"]);

    let ids = middle_ops(n, OBSERVED);
    let mut observe = strings(&["observe", "--by", "bench", "--workspace", &ws_arg]);
    observe.extend(ids);
    let (observe_time, observe_rss) = timed(&observe);
    println!(
        "{n} ops: observe {OBSERVED} IDs: {:.0} operations per second",
        OBSERVED as f64 / observe_time.as_secs_f64()
    );
    rows.push(("observe --by bench ID x100", observe_time, observe_rss));
    rows.push(("demo --ops N (fresh workspace, one run)", build, None));
    rows
}

fn main() {
    support::bench_sizes(measure_size);
}
