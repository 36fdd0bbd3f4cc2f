//! The console benchmark: `cargo bench --bench console`.
//!
//! It builds demo workspaces of 100 and 100,000 generated operations with the
//! release binary and measures the review console two ways:
//!
//! - as a reviewer meets it: `recon screenshot` is a whole process that
//!   opens the workspace, reads the counts and the first keyset page, takes
//!   the first operation's snapshot and renders one frame, so its wall time
//!   and peak memory are the console's first frame;
//! - inside this process, on the library API the terminal loop uses: one
//!   `update` plus one render of a 120x40 frame for a cursor move (`Down`,
//!   sweeping across page boundaries and back), a page move, a jump to
//!   the last operation, and the live refresh after another handle commits
//!   (the key loop's share: the read itself runs off it).
//!
//! A ratio near 1 is the claim: what the console costs follows the screen
//! and the selected operation, never the size of the outbox.
//!
//! Then, on a workspace of 20,000 generated operations, the keys during a
//! bulk act: every unknown operation marked (`v`) and `confirmed` asked
//! for all of them, which runs off the key loop; meanwhile one `update`
//! plus one render per cursor move, as the terminal loop does, with the
//! poll between keys. The median and the 99th percentile are the claim:
//! the screen answers while the bulk runs. (`RECON_BENCH_SIZES=100` keeps
//! the first part short.)
//!
//! `cargo bench --bench console -- never` measures only the first frame of
//! the `never` verdict filter on a workspace of 100,000 generated
//! operations (`RECON_BENCH_NEVER_OPS` changes the size): each sample
//! opens a fresh console, so the filter's first query runs on a new
//! connection, then times the key (`update(NextVerdict)`) and the frame.

mod support;

use recon::console::{self, Action, App, Options, Source};
use recon::OpenOptions;
use recon::Workspace;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{median, peak_rss_kib, run, strings, Measured};

const SIZE: (u16, u16) = (120, 40);

fn open_console(ws: &Path) -> App {
    let workspace = Workspace::open(ws, OpenOptions::default()).expect("open workspace");
    let source = Source {
        location: ws.into(),
        temporary_demo: false,
    };
    let options = Options {
        reviewer: Some("bench".to_string()),
        colours: recon::console::theme::Choice::plain(false),
    };
    App::open(workspace, source, options, SIZE).expect("open console")
}

/// The median time of `samples` calls of `action` followed by a render.
fn step_times(app: &mut App, first: Action, samples: usize) -> Duration {
    median(sweep(app, first, samples, |_| true))
}

/// The time of each of up to `samples` calls of `action` followed by a
/// render, while `going` holds. `Down` and `Up` sweep: at either end of
/// the queue the direction turns, so every sample moves the cursor.
fn sweep(
    app: &mut App,
    first: Action,
    samples: usize,
    going: impl Fn(&App) -> bool,
) -> Vec<Duration> {
    let mut action = first;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        if !going(app) {
            break;
        }
        let before = app.selected().map(|o| o.op_id.clone());
        let start = Instant::now();
        console::update(app, action);
        std::hint::black_box(console::render(app));
        times.push(start.elapsed());
        if app.selected().map(|o| o.op_id.clone()) == before {
            action = match action {
                Action::Down => Action::Up,
                Action::Up => Action::Down,
                Action::PageDown => Action::PageUp,
                Action::PageUp => Action::PageDown,
                other => other,
            };
        }
    }
    times
}

/// The key loop's share of a live refresh after another handle commits
/// (outside the timing): the watcher sees the new journal head, the
/// refresher reads the counts, the page and the detail off the key loop,
/// and the polls apply them; what is timed is the polls and their renders
/// until it shows. The median of 31.
fn live_refresh(app: &mut App, ws: &Path) -> Duration {
    let mut other = Workspace::open(ws, OpenOptions::default()).expect("second handle");
    app.go_live().expect("start the watcher");
    median(
        (0..31)
            .map(|i| {
                other
                    .prepare(&format!("op-bench-live-{i:03}"), "notify", &json!({"n": i}))
                    .expect("prepare from another handle");
                let head = other.change_marker().expect("head").journal.length;
                let mut on_loop = Duration::ZERO;
                while app.live_through() < head {
                    app.wait_for_receivers(Duration::from_secs(60));
                    let start = Instant::now();
                    console::update(app, Action::Poll);
                    std::hint::black_box(console::render(app));
                    on_loop += start.elapsed();
                }
                on_loop
            })
            .collect(),
    )
}

fn measure_size(n: u64) -> Vec<Measured> {
    let root = tempfile::Builder::new()
        .prefix("recon-bench-console-")
        .tempdir()
        .expect("temp dir");
    let ws = root.path().join("ws");
    let ws_arg = ws.display().to_string();
    run(&strings(&[
        "demo",
        "--workspace",
        &ws_arg,
        "--ops",
        &n.to_string(),
    ]));

    let screenshot = strings(&["screenshot", "--workspace", &ws_arg]);
    run(&screenshot); // warm-up: page cache and the binary itself
    let first_frame = median((0..31).map(|_| run(&screenshot)).collect());
    let first_frame_rss = peak_rss_kib(&screenshot);

    let open_render = median(
        (0..31)
            .map(|_| {
                let start = Instant::now();
                let app = open_console(&ws);
                std::hint::black_box(console::render(&app));
                start.elapsed()
            })
            .collect(),
    );

    let mut app = open_console(&ws);
    step_times(&mut app, Action::Down, 50); // warm-up
    let cursor = step_times(&mut app, Action::Down, 1001);
    console::update(&mut app, Action::Filter(4)); // all operations
    let page = step_times(&mut app, Action::PageDown, 201);
    let last = median(
        (0..21)
            .map(|i| {
                let action = if i % 2 == 0 {
                    Action::Last
                } else {
                    Action::First
                };
                let start = Instant::now();
                console::update(&mut app, action);
                std::hint::black_box(console::render(&app));
                start.elapsed()
            })
            .collect(),
    );

    // Another handle commits (outside the timing); the watcher sees the
    // new journal head, the refresher reads the counts, the page and the
    // detail off the key loop, and the polls apply them: what is timed is
    // the key loop's share, the polls and their renders until it shows.
    let refresh = live_refresh(&mut app, &ws);

    vec![
        (
            "first frame: recon screenshot (process)",
            first_frame,
            first_frame_rss,
        ),
        ("open + first render (in-process)", open_render, None),
        ("cursor move: update(Down) + render", cursor, None),
        ("page move: update(PageDown) + render", page, None),
        ("jump: update(Last/First) + render", last, None),
        (
            "live refresh: the key loop's polls + renders until an outside commit shows",
            refresh,
            None,
        ),
    ]
}

/// Applies what the threads off the key loop send back until none runs.
fn settle(app: &mut App) {
    while app.awaiting_receivers() {
        app.wait_for_receivers(Duration::from_secs(60));
        console::update(app, Action::Poll);
    }
}

/// Key-to-frame times (a cursor move's `update` and render, the poll in
/// between as the terminal loop runs it) while a bulk `confirmed` over
/// every unknown operation of a 20,000-operation demo runs off the key
/// loop; then the bulk is cancelled and its report read.
fn during_bulk() {
    let root = tempfile::Builder::new()
        .prefix("recon-bench-console-bulk-")
        .tempdir()
        .expect("temp dir");
    let ws = root.path().join("ws");
    let ws_arg = ws.display().to_string();
    run(&strings(&[
        "demo",
        "--workspace",
        &ws_arg,
        "--ops",
        "20000",
    ]));
    let mut app = open_console(&ws);
    console::update(&mut app, Action::MarkAll);
    settle(&mut app);
    let marked = app.marks.len();
    let request = console::action::Request::Decide(recon::domain::Decision::Confirmed);
    console::update(&mut app, Action::Request(request));
    let start = Instant::now();
    console::update(&mut app, Action::Confirm);
    assert!(app.working.is_some(), "the bulk runs off the key loop");
    let mut times = Vec::new();
    while app.working.is_some() && times.len() < 5000 {
        console::update(&mut app, Action::Poll);
        times.extend(sweep(&mut app, Action::Down, 20, |app| {
            app.working.is_some()
        }));
    }
    let done = app
        .working
        .as_ref()
        .map(|w| w.progress.counts().0)
        .unwrap_or(marked);
    console::update(&mut app, Action::Cancel);
    settle(&mut app);
    let title = match &app.mode {
        console::app::Mode::Report(report) => report.title.clone(),
        _ => app
            .status
            .as_ref()
            .map(|s| s.text.clone())
            .unwrap_or_default(),
    };
    times.sort();
    let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
    println!();
    println!(
        "| during a bulk of {marked} (20,000-op demo) | key-to-frame median | p99 | max | \
         samples |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| `update(Down/Up) + render` while the bulk runs | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
        median(times.clone()).as_secs_f64() * 1000.0,
        p99.as_secs_f64() * 1000.0,
        times.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
        times.len()
    );
    println!(
        "bulk: {done} of {marked} done in {:.1} s when cancelled; report: {title}",
        start.elapsed().as_secs_f64()
    );
}

/// A demo workspace of `n` generated operations in a temporary directory.
fn demo_workspace(n: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::Builder::new()
        .prefix("recon-bench-console-")
        .tempdir()
        .expect("temp dir");
    let ws = root.path().join("ws");
    let ws_arg = ws.display().to_string();
    run(&strings(&[
        "demo",
        "--workspace",
        &ws_arg,
        "--ops",
        &n.to_string(),
    ]));
    (root, ws)
}

/// The first frame of the `never` filter: a fresh console (not timed),
/// then one `f` (`update(NextVerdict)`: the count, the first page and the
/// selected operation's read) and one 120x40 render, timed together.
/// Prints the median, the slowest and how many operations it shows.
fn never_filter_first_frame() {
    let n: u64 = std::env::var("RECON_BENCH_NEVER_OPS")
        .ok()
        .map(|t| t.trim().parse().expect("RECON_BENCH_NEVER_OPS: a number"))
        .unwrap_or(100_000);
    eprintln!("benchmarking the never filter on {n} generated ops ...");
    let (_root, ws) = demo_workspace(n);
    let mut times = Vec::new();
    let mut marks = Vec::new();
    let mut shown = None;
    for i in 0..21 {
        let mut app = open_console(&ws);
        let start = Instant::now();
        console::update(&mut app, Action::NextVerdict);
        std::hint::black_box(console::render(&app));
        times.push(start.elapsed());
        shown = app.shown_count();
        // `v` over what the filter shows, on every fourth console.
        if i % 4 == 0 {
            let start = Instant::now();
            console::update(&mut app, Action::MarkAll);
            settle(&mut app);
            std::hint::black_box(console::render(&app));
            marks.push(start.elapsed());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let slowest = |t: &[Duration]| t.iter().max().copied().unwrap_or_default();
    let shown = shown.unwrap_or(0);
    println!(
        "| never filter, first frame (update(NextVerdict) + render), {n} ops, {shown} shown | \
         median {:.2} ms | slowest {:.2} ms |",
        ms(median(times.clone())),
        ms(slowest(&times))
    );
    println!(
        "| v over the never filter (update(MarkAll) + render), {shown} marked | \
         median {:.2} ms | slowest {:.2} ms |",
        ms(median(marks.clone())),
        ms(slowest(&marks))
    );
}

fn main() {
    if std::env::args().skip(1).any(|a| a == "never") {
        never_filter_first_frame();
        return;
    }
    support::bench_sizes(measure_size);
    during_bulk();
}
