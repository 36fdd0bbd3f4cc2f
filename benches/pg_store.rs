//! The PostgreSQL outbox's speed (SPEC 10), against a throwaway cluster
//! this bench starts itself and stops at the end (the tests' `servers.rs`,
//! flushing its commits as a production server does), beside SQLite:
//!
//! - a decision's round trip through the library: `reconcile` (the
//!   receiver's read, a spawn of `tests/fixtures/adapter.py`, and the
//!   decision's transaction) and `record_review` (the decision's
//!   transaction alone, on a snapshot already held), median and p99 over
//!   `RECON_BENCH_DECISIONS` operations each (default 100) whose receipts
//!   were lost;
//! - the queue's pages at 100 and at `RECON_BENCH_PG_OPS` operations
//!   (default 100,000) on PostgreSQL: the first page, a page after a
//!   cursor, and unknown + never observed; the median of each shape, the
//!   ratio, and each plan's nodes (`EXPLAIN (FORMAT JSON)`). Two outboxes,
//!   one of 100 and one of the whole count, vacuumed and analyzed (a
//!   server in its steady state), their samples taken in turn so that
//!   the machine's drift falls on both. PostgreSQL has no bulk load: the
//!   operations are prepared through the library one by one (the journal
//!   stays whole), on 4 connections at once, and how long that took is
//!   printed;
//! - writers per second from 8 processes: `recon note` through the binary,
//!   8 at once, `RECON_BENCH_NOTES` (default 25) each; on both stores.
//!
//! `cargo bench --bench pg_store [-- decisions|pages|writers ...]`

#[path = "../tests/it/real_receivers/servers.rs"]
mod servers;

#[allow(dead_code)]
mod support;

use support::{count, millis as ms, register_lossy, summary};

#[path = "../tests/it/pg_store/plan.rs"]
mod plan;

use recon::dispatch::DispatchOptions;
use recon::domain::{Decision, OpState, PageBound, QueueFilter, Review, VerdictFilter};
use recon::workspace::ReconcileRequest;
use recon::{DatabaseUrl, Location, OpenOptions, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const ACTION: &str = "post_letter";
const PAGE: usize = 50;
/// How many connections prepare the large outbox at once.
const LOADERS: usize = 4;

fn database(url: &str) -> Location {
    Location::from(DatabaseUrl::parse(url).expect("a database URL"))
}

/// A database holding the outbox's schema (`recon db init`); its URL.
fn outbox(pg: &servers::Postgres, prefix: &str) -> String {
    let url = pg.new_database(prefix);
    support::run(&servers::db_init_args(&url));
    url
}

/// Prepares and dispatches `op`, its receipt lost: `unknown`.
fn lost_receipt(ws: &mut Workspace, op: &str) {
    ws.prepare(op, ACTION, &json!({"to": "ann", "text": op}))
        .expect("prepare");
    let report = ws
        .dispatch(op, DispatchOptions::default())
        .expect("dispatch");
    assert_eq!(report.outcome, "unknown", "{report:?}");
}

fn version(ws: &Workspace, op: &str) -> i64 {
    ws.require(op).expect("the operation").version
}

/// `reconcile` and `record_review` timed on `n` unknown operations each.
fn decisions(ws: &mut Workspace, dir: &Path, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    register_lossy(ws, dir, ACTION);
    let ops: Vec<String> = (0..2 * n).map(|i| format!("d-{i:05}")).collect();
    for op in &ops {
        lost_receipt(ws, op);
    }
    let mut reconciled = Vec::new();
    for op in &ops[..n] {
        let request = ReconcileRequest {
            keep: None,
            op_id: op,
            reviewer: "ann",
            decision: Decision::Confirmed,
            expected_version: version(ws, op),
            payload: None,
            close_authorized_by: None,
        };
        let start = Instant::now();
        ws.reconcile(&request).expect("reconcile");
        reconciled.push(start.elapsed());
    }
    let mut recorded = Vec::new();
    for op in &ops[n..] {
        let seen = ws.snapshot(op, None).expect("snapshot");
        let review = Review {
            keep: None,
            op_id: op,
            payload: &seen.operation.payload,
            reviewer: "ann",
            decision: Decision::Confirmed,
            snapshot: &seen.snapshot,
            expected_version: seen.operation.version,
        };
        let start = Instant::now();
        ws.record_review(&review, &seen.provenance)
            .expect("record the decision");
        recorded.push(start.elapsed());
    }
    (reconciled, recorded)
}

fn round_trips(pg: &servers::Postgres) {
    let n = count("RECON_BENCH_DECISIONS", 100);
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = dir.path().join("sqlite");
    let mut ws =
        Workspace::open(sqlite.as_path(), OpenOptions::default().creating()).expect("workspace");
    let (sqlite_reconcile, sqlite_record) = decisions(&mut ws, dir.path(), n);
    let url = outbox(pg, "decisions");
    let mut ws = Workspace::open(database(&url), OpenOptions::default()).expect("outbox");
    let receiver = dir.path().join("postgres");
    std::fs::create_dir(&receiver).expect("the receiver's directory");
    let (pg_reconcile, pg_record) = decisions(&mut ws, &receiver, n);
    println!("## A decision's round trip (library)");
    println!("reconcile      SQLite      {}", summary(sqlite_reconcile));
    println!("reconcile      PostgreSQL  {}", summary(pg_reconcile));
    println!("record_review  SQLite      {}", summary(sqlite_record));
    println!("record_review  PostgreSQL  {}", summary(pg_record));
}

/// The page shapes measured: a name, a filter, where the page starts.
fn shapes(middle: &str) -> [(&'static str, QueueFilter<'static>, PageBound<'_>); 3] {
    let unknown_never = QueueFilter {
        state: Some(OpState::Unknown),
        verdict: Some(VerdictFilter::Never),
        ..QueueFilter::default()
    };
    [
        ("first page", QueueFilter::default(), PageBound::Start),
        (
            "after a cursor",
            QueueFilter::default(),
            PageBound::After(middle),
        ),
        ("unknown + never", unknown_never, PageBound::Start),
    ]
}

/// One outbox whose pages are timed: its handle, URL and the op id the
/// "after a cursor" page starts after.
struct Paged<'a> {
    ws: &'a Workspace,
    url: &'a str,
    middle: &'a str,
}

impl Paged<'_> {
    /// One page of `shape`, timed.
    fn time(&self, shape: usize) -> Duration {
        let (_, filter, bound) = shapes(self.middle)[shape];
        let start = Instant::now();
        let page = self.ws.queue_page(filter, bound, PAGE).expect("a page");
        let elapsed = start.elapsed();
        assert!(!page.is_empty(), "an empty page measures nothing");
        elapsed
    }

    /// The plan of `shape`'s page, its nodes, and whether it follows the
    /// outbox.
    fn plan(&self, shape: usize) -> String {
        let (_, filter, bound) = shapes(self.middle)[shape];
        let mut client = postgres::Client::connect(self.url, postgres::NoTls).expect("connect");
        let plan = plan::page_plan(&mut client, &filter, bound, PAGE);
        let nodes = plan::nodes(&plan).join(" < ");
        match plan::outbox_sized(&plan) {
            found if found.is_empty() => format!("an index range, no sort: {nodes}"),
            found => format!("FOLLOWS THE OUTBOX: {}: {nodes}", found.join(", ")),
        }
    }
}

/// The median of each shape on the small and on the large outbox, their
/// samples taken in turn (small, large, small, ...) so that the machine's
/// drift falls on both alike.
fn measure_pages(small: &Paged<'_>, large: &Paged<'_>) -> Vec<(Duration, Duration)> {
    let samples = count("RECON_BENCH_PAGES", 200);
    (0..shapes("").len())
        .map(|shape| {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..samples {
                a.push(small.time(shape));
                b.push(large.time(shape));
            }
            (support::median(a), support::median(b))
        })
        .collect()
}

/// Prepares `p-000100` up to `total` operations through the library, on
/// [`LOADERS`] connections at once (their commits flush together); how
/// long it took.
fn prepare_up_to(url: &str, total: usize) -> Duration {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for loader in 0..LOADERS {
            scope.spawn(move || {
                let mut ws =
                    Workspace::open(database(url), OpenOptions::default()).expect("outbox");
                for i in (100 + loader..total).step_by(LOADERS) {
                    let op = format!("p-{i:06}");
                    ws.prepare(&op, ACTION, &json!({"to": "bob", "n": i}))
                        .expect("prepare");
                }
            });
        }
    });
    start.elapsed()
}

fn pages(pg: &servers::Postgres) {
    let total = count("RECON_BENCH_PG_OPS", 100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let (small_url, large_url) = (outbox(pg, "pages_small"), outbox(pg, "pages_large"));
    let open = |url: &str| Workspace::open(database(url), OpenOptions::default()).expect("outbox");
    let (mut small_ws, mut large_ws) = (open(&small_url), open(&large_url));
    for (ws, sub) in [(&mut small_ws, "small"), (&mut large_ws, "large")] {
        let dir = dir.path().join(sub);
        std::fs::create_dir_all(&dir).expect("the adapter's directory");
        register_lossy(ws, &dir, ACTION);
        for i in 0..100 {
            lost_receipt(ws, &format!("a-{i:06}"));
        }
    }
    let loaded = prepare_up_to(&large_url, total);
    // A server in its steady state: what autovacuum would have done.
    for url in [&small_url, &large_url] {
        let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
        client.batch_execute("VACUUM ANALYZE").expect("vacuum");
    }
    println!("## Queue pages on PostgreSQL ({PAGE} a page)");
    println!(
        "loaded {} operations by prepare through the library, {LOADERS} connections at once, \
         in {:.1} s ({:.2} ms each); samples taken in turn, 100 then {total}",
        total - 100,
        loaded.as_secs_f64(),
        ms(loaded) / (total - 100).max(1) as f64
    );
    let large_middle = format!("p-{:06}", total / 2);
    let small = Paged {
        ws: &small_ws,
        url: &small_url,
        middle: "a-000049",
    };
    let large = Paged {
        ws: &large_ws,
        url: &large_url,
        middle: &large_middle,
    };
    let medians = measure_pages(&small, &large);
    for (shape, ((name, _, _), (a, b))) in shapes("").into_iter().zip(medians).enumerate() {
        println!(
            "{name:16} 100 ops {:6.3} ms   {total} ops {:6.3} ms   ratio {:.2}",
            ms(a),
            ms(b),
            b.as_secs_f64() / a.as_secs_f64()
        );
        println!("    plan at 100:    {}", small.plan(shape));
        println!("    plan at {total}: {}", large.plan(shape));
    }
}

/// `recon note` from 8 processes at once, `notes` each; notes a second.
fn writers(location: &[&str], op: &str, notes: usize) -> f64 {
    let barrier = Arc::new(Barrier::new(8));
    let location: Vec<String> = support::strings(location);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for w in 0..8 {
            let barrier = Arc::clone(&barrier);
            let location = &location;
            scope.spawn(move || {
                barrier.wait();
                for i in 0..notes {
                    let by = format!("writer-{w}");
                    let text = format!("note {i}");
                    let mut args = support::strings(&["note", op, "--by", &by, "--text", &text]);
                    args.extend(location.iter().cloned());
                    support::run(&args);
                }
            });
        }
    });
    (8 * notes) as f64 / start.elapsed().as_secs_f64()
}

/// A workspace at `location` with the operation `w-1` to note on.
fn noted_on(location: Location, options: OpenOptions, dir: &Path) {
    let mut ws = Workspace::open(location, options).expect("a workspace");
    register_lossy(&mut ws, dir, ACTION);
    ws.prepare("w-1", ACTION, &json!({})).expect("prepare");
}

fn writers_per_second(pg: &servers::Postgres) {
    let notes = count("RECON_BENCH_NOTES", 25);
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = dir.path().join("sqlite");
    noted_on(
        Location::from(sqlite.as_path()),
        OpenOptions::default().creating(),
        dir.path(),
    );
    let url = outbox(pg, "writers");
    let receiver = dir.path().join("postgres");
    std::fs::create_dir(&receiver).expect("the receiver's directory");
    noted_on(database(&url), OpenOptions::default(), &receiver);
    let sqlite = sqlite.display().to_string();
    let on_sqlite = writers(&["--workspace", &sqlite], "w-1", notes);
    let on_pg = writers(&["--database", &url], "w-1", notes);
    println!("## Writers: `recon note` from 8 processes, {notes} each");
    println!("SQLite      {on_sqlite:7.1} notes/s");
    println!("PostgreSQL  {on_pg:7.1} notes/s");
}

fn main() {
    let wanted = support::parts_wanted();
    servers::durable_postgres();
    let Some(pg) = servers::require("bench pg_store", servers::postgres()) else {
        return;
    };
    if wanted("decisions") {
        round_trips(pg);
    }
    if wanted("pages") {
        pages(pg);
    }
    if wanted("writers") {
        writers_per_second(pg);
    }
}
