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

use recon::demo::generate::{self, Evidence};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn recon() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_recon"))
}

/// Runs `recon ARGS` once; panics unless it exits 0 (a benchmark of a
/// failing command measures nothing).
fn run(args: &[String]) -> Duration {
    let start = Instant::now();
    let out = Command::new(recon())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run recon");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "recon {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

/// Peak resident set size of one run, in KiB, from `/usr/bin/time -f %M`.
fn peak_rss_kib(args: &[String]) -> Option<u64> {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    let report = tempfile::NamedTempFile::new().ok()?;
    let status = Command::new(time)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(report.path())
        .arg(recon())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    std::fs::read_to_string(report.path())
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

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

struct Row {
    name: &'static str,
    medians: Vec<Duration>,
    rss: Vec<Option<u64>>,
}

fn measure_size(n: u64) -> Vec<(&'static str, Duration, Option<u64>)> {
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

fn sizes() -> Vec<u64> {
    std::env::var("RECON_BENCH_SIZES")
        .ok()
        .map(|text| {
            text.split(',')
                .map(|s| s.trim().parse().expect("RECON_BENCH_SIZES: numbers"))
                .collect()
        })
        .unwrap_or_else(|| vec![100, 100_000])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let sizes = sizes();
    let mut rows: Vec<Row> = Vec::new();
    for &n in &sizes {
        eprintln!("benchmarking a workspace of {n} generated ops ...");
        for (i, (name, median, rss)) in measure_size(n).into_iter().enumerate() {
            if rows.len() <= i {
                rows.push(Row {
                    name,
                    medians: Vec::new(),
                    rss: Vec::new(),
                });
            }
            rows[i].medians.push(median);
            rows[i].rss.push(rss);
        }
    }
    let header: Vec<String> = sizes.iter().map(|n| format!("{n} ops")).collect();
    let last = sizes.len() - 1;
    println!(
        "| command | {} | ratio {}/{} | peak RSS {} |",
        header.join(" | "),
        sizes[last],
        sizes[0],
        header.join(" / ")
    );
    println!("|---|{}---|---|", "---|".repeat(sizes.len()));
    for row in &rows {
        let times: Vec<String> = row.medians.iter().map(|d| ms(*d)).collect();
        let ratio = row.medians[last].as_secs_f64() / row.medians[0].as_secs_f64();
        let rss: Vec<String> = row
            .rss
            .iter()
            .map(|r| {
                r.map_or("n/a".to_string(), |kib| {
                    format!("{:.1} MiB", kib as f64 / 1024.0)
                })
            })
            .collect();
        println!(
            "| `{}` | {} | {:.2} | {} |",
            row.name,
            times.join(" | "),
            ratio,
            rss.join(" / ")
        );
    }
}
