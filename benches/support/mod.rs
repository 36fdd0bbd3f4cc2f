//! What the benchmarks share: running the release binary as a script would,
//! its peak memory, medians, the table that compares workspace sizes, and
//! the fixture adapter registered as a receiver that loses its receipts.
//!
//! `RECON_BENCH_SIZES=100,10000` changes the sizes every benchmark measures
//! (the first is the baseline of the ratio).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One measured row at one size: its name, the median time, and the peak
/// resident memory of one run when that row is a whole process.
pub type Measured = (&'static str, Duration, Option<u64>);

pub fn recon() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_recon"))
}

/// Runs `recon ARGS` once; panics unless it exits 0 (a benchmark of a
/// failing command measures nothing).
pub fn run(args: &[String]) -> Duration {
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
pub fn peak_rss_kib(args: &[String]) -> Option<u64> {
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

pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
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
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A count from the environment variable `variable`, else `default`.
#[allow(dead_code)] // the benches against a server use it; the others do not
pub fn count(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Milliseconds, as a number.
#[allow(dead_code)] // the benches against a server use it; the others do not
pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and 99th percentile of `samples`, in milliseconds.
#[allow(dead_code)] // the benches against a server use it; the others do not
pub fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {:7.2} ms   p99 {:7.2} ms   ({} samples)",
        millis(at(0.5)),
        millis(at(0.99)),
        samples.len()
    )
}

struct Row {
    name: &'static str,
    medians: Vec<Duration>,
    rss: Vec<Option<u64>>,
}

/// Measures every size in turn and prints one Markdown table: the median
/// of each row at each size, the ratio of the largest to the first, and
/// the peak memory (`—` for rows timed inside this process).
pub fn bench_sizes(measure: impl Fn(u64) -> Vec<Measured>) {
    let sizes = sizes();
    let mut rows: Vec<Row> = Vec::new();
    for &n in &sizes {
        eprintln!("benchmarking a workspace of {n} generated ops ...");
        for (i, (name, median, rss)) in measure(n).into_iter().enumerate() {
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
        "| measured | {} | ratio {}/{} | peak RSS {} |",
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
                r.map_or("—".to_string(), |kib| {
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

/// Registers the fixture adapter as `mail` for `action`, its ledger in
/// `dir`, committing each effect and dying before it answers.
#[allow(dead_code)] // the benches against a server use it; the others do not
pub fn register_lossy(ws: &mut recon::Workspace, dir: &Path, action: &str) {
    let adapter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/adapter.py");
    let state = dir.join("mail.json").display().to_string();
    let args = strings(&[
        "--state",
        &state,
        "--mode",
        "apply:crash-after",
        "--can-close",
        "--complete",
        "--authoritative",
    ]);
    ws.register_receiver(&recon::workspace::NewReceiver {
        name: "mail",
        actions: &[action.to_string()],
        program: &adapter,
        args: &args,
        timeout_ms: None,
        env: &[],
    })
    .expect("register the adapter");
}

/// Whether a part of a benchmark is wanted: every part when the command
/// line names none (`cargo bench --bench pg_store`), else only those named
/// (`cargo bench --bench pg_store -- pages writers`).
#[allow(dead_code)] // the benches in parts use it; the others do not
pub fn parts_wanted() -> impl Fn(&str) -> bool {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    move |part| only.is_empty() || only.iter().any(|o| o == part)
}
