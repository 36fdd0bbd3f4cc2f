//! The command-line benchmark: `cargo bench --bench cli`.
//!
//! It builds demo workspaces of 100 and 100,000 generated operations with the
//! release binary, then times whole processes, as a script calling `recon`
//! sees them: `ops --state unknown --limit 50 --json`, `snapshot ID --json`,
//! `reconcile ID … --close`, and `demo --ops N` itself. Each is run several
//! times after a warm-up; the table gives the median wall time at each size,
//! their ratio, and the peak resident memory of one more run under
//! `/usr/bin/time` (when it exists). A ratio near 1 for the paged and
//! per-operation commands is the claim: their cost follows the page or the
//! operation, never the table.
//!
//! `RECON_BENCH_SIZES=100,10000` changes the sizes (the first is the
//! baseline of the ratio).

mod support;

use recon::demo::generate::{self, Evidence};
use std::path::PathBuf;
use support::{median, peak_rss_kib, run, strings, Measured};

/// Generated ops near the middle of the workspace with the given evidence,
/// so that the benchmark reads the inside of the indexes, not an edge.
fn middle_ops(total: u64, want: impl Fn(Evidence) -> bool, count: usize) -> Vec<String> {
    (total / 2..=total)
        .chain(1..total / 2)
        .filter(|&n| want(Evidence::of(n)))
        .take(count)
        .map(generate::op_id)
        .collect()
}

fn measure_size(n: u64) -> Vec<Measured> {
    let root = tempfile::Builder::new()
        .prefix("recon-bench-")
        .tempdir()
        .expect("temp dir");
    let demo_reps = if n >= 50_000 { 3 } else { 5 };
    let mut demo_times = Vec::new();
    let mut ws = PathBuf::new();
    for rep in 0..demo_reps {
        ws = root.path().join(format!("ws-{rep}"));
        let args = strings(&[
            "demo",
            "--workspace",
            &ws.display().to_string(),
            "--ops",
            &n.to_string(),
        ]);
        demo_times.push(run(&args));
        if rep + 1 < demo_reps {
            std::fs::remove_dir_all(&ws).expect("remove workspace");
        }
    }
    let demo_rss = {
        let extra = root.path().join("ws-rss");
        peak_rss_kib(&strings(&[
            "demo",
            "--workspace",
            &extra.display().to_string(),
            "--ops",
            &n.to_string(),
        ]))
    };
    let ws_arg = ws.display().to_string();
    let with_ws = |args: &[&str]| {
        let mut all = strings(args);
        all.extend(["--workspace".to_string(), ws_arg.clone()]);
        all
    };

    let reps = 31;
    let timed = |args: &[String]| {
        run(args); // warm-up: page cache and the binary itself
        median((0..reps).map(|_| run(args)).collect())
    };

    let ops = with_ws(&["ops", "--state", "unknown", "--limit", "50", "--json"]);
    let ops_time = timed(&ops);
    let ops_rss = peak_rss_kib(&ops);

    let duplicate = middle_ops(n, |e| matches!(e, Evidence::Duplicates(_)), 1);
    let snapshot = with_ws(&["snapshot", &duplicate[0], "--json"]);
    let snapshot_time = timed(&snapshot);
    let snapshot_rss = peak_rss_kib(&snapshot);

    // Each reconcile decides a different op (a decision is recorded once).
    let reconcile_reps = 21;
    let targets = middle_ops(n, |e| e == Evidence::Exact, reconcile_reps + 2);
    let reconcile = |op: &str| {
        with_ws(&[
            "reconcile",
            op,
            "--reviewer",
            "bench",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
            "--close",
            "--authorized-by",
            "bench",
            "--json",
        ])
    };
    run(&reconcile(&targets[0]));
    let reconcile_time = median(
        targets[1..=reconcile_reps]
            .iter()
            .map(|op| run(&reconcile(op)))
            .collect(),
    );
    let reconcile_rss = peak_rss_kib(&reconcile(&targets[reconcile_reps + 1]));

    vec![
        ("ops --state unknown --limit 50 --json", ops_time, ops_rss),
        ("snapshot ID --json", snapshot_time, snapshot_rss),
        (
            "reconcile ID --decision confirmed --close",
            reconcile_time,
            reconcile_rss,
        ),
        (
            "demo --ops N (fresh workspace)",
            median(demo_times),
            demo_rss,
        ),
    ]
}

fn main() {
    support::bench_sizes(measure_size);
}
