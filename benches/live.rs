//! A console live across hosts (SPEC 10, issue 22), against a throwaway
//! PostgreSQL cluster this bench starts itself (the tests' `servers.rs`,
//! flushing its commits as a production server does):
//!
//! - **another host's decision to this console's screen**: a console in a
//!   real terminal (tmux, `recon --database URL`), and `recon reconcile
//!   --database URL` from the command line, as another host, on each of
//!   `RECON_BENCH_LIVE_DECISIONS` operations whose receipts were lost
//!   (default 50); timed from the command's exit (its commit is done) to
//!   the first `capture-pane` whose filter tabs count the new decision;
//!   median and p99. The command's own time is printed beside it;
//! - **key to frame with 50,000 marks while another host writes**: a
//!   console in this process on the library API the terminal loop uses,
//!   live (its watcher and refresher on threads of their own), with every
//!   one of `RECON_BENCH_LIVE_MARKS` prepared operations marked (default
//!   50,000), while another host leaves notes on marked operations
//!   through the binary in a loop; one `update(Down)` plus one render per
//!   key, and between keys the poll that applies what the refresher read,
//!   as the terminal loop runs it; median and p99 of each, and how many
//!   refreshes landed meanwhile.
//!
//! `cargo bench --bench live [-- decisions|keys]`

#[path = "../tests/it/real_receivers/servers.rs"]
mod servers;

#[allow(dead_code)]
mod support;

use support::{count, register_lossy, summary};

use recon::console::{self, Action, App, Options, Source};
use recon::{DatabaseUrl, Location, OpenOptions, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const ACTION: &str = "post_letter";
const LOADERS: usize = 4;

fn location(url: &str) -> Location {
    Location::from(DatabaseUrl::parse(url).expect("a database URL"))
}

/// A fresh database with recon's outbox; its URL.
fn outbox(pg: &servers::Postgres, prefix: &str) -> String {
    let url = pg.new_database(prefix);
    recon::Workspace::init_database(
        &DatabaseUrl::parse(&url).expect("a database URL"),
        OpenOptions::default(),
        false,
        Some(&servers::roles_prefix_for(&url)),
    )
    .expect("db init");
    url
}

/// One tmux server on a private socket running one console.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(args: &[&str]) -> Tmux {
        let dir = tempfile::tempdir().expect("temp dir");
        let tmux = Tmux {
            socket: dir.path().join("sock"),
            _dir: dir,
        };
        let recon = support::recon().display().to_string();
        let mut command = vec![
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "recon",
            "-x",
            "120",
            "-y",
            "40",
            &recon,
        ];
        command.extend_from_slice(args);
        tmux.ok(&command);
        tmux
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tmux");
        assert!(out.status.success(), "tmux {args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "recon"])
    }

    /// Reads the pane until `accept` holds; how long that took.
    fn until(&self, accept: impl Fn(&str) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if accept(&screen) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the console never showed it:\n{screen}"
            );
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

/// How many operations the filter tabs (the screen's second line) count
/// as confirmed.
fn confirmed(screen: &str) -> Option<usize> {
    let tabs = screen.lines().nth(1)?;
    let after = &tabs[tabs.find("confirmed ")? + "confirmed ".len()..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Runs `recon ARGS`; how long it took (it must succeed).
fn recon(args: &[&str]) -> Duration {
    support::run(&support::strings(args))
}

fn decisions(pg: &servers::Postgres) {
    let n = count("RECON_BENCH_LIVE_DECISIONS", 50);
    let url = outbox(pg, "live_decisions");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = Workspace::open(location(&url), OpenOptions::default()).expect("outbox");
    register_lossy(&mut ws, dir.path(), ACTION);
    let ops: Vec<String> = (1..=n).map(|i| format!("op-live-{i:03}")).collect();
    for op in &ops {
        ws.prepare(op, ACTION, &json!({"to": "ann", "text": op}))
            .expect("prepare");
        let report = ws
            .dispatch(op, recon::dispatch::DispatchOptions::default())
            .expect("dispatch");
        assert_eq!(report.outcome, "unknown", "{report:?}");
    }
    let console = Tmux::start(&["--database", &url, "--reviewer", "bob"]);
    console.until(|s| confirmed(s) == Some(0));
    let (mut shown, mut commands) = (Vec::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        commands.push(recon(&[
            "reconcile",
            "--database",
            &url,
            op,
            "--reviewer",
            "carol",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ]));
        shown.push(console.until(|s| confirmed(s) == Some(i + 1)));
    }
    println!("## Another host's decision to this console's screen (PostgreSQL, tmux)");
    println!("from the command's exit to the screen: {}", summary(shown));
    println!(
        "the command itself (`recon reconcile`): {}",
        summary(commands)
    );
}

/// Prepares `p-000000` up to `total` operations through the library, on
/// [`LOADERS`] connections at once.
fn prepare_all(url: &str, total: usize) -> Duration {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for loader in 0..LOADERS {
            scope.spawn(move || {
                let mut ws =
                    Workspace::open(location(url), OpenOptions::default()).expect("outbox");
                for i in (loader..total).step_by(LOADERS) {
                    ws.prepare(&format!("p-{i:06}"), ACTION, &json!({"n": i}))
                        .expect("prepare");
                }
            });
        }
    });
    start.elapsed()
}

/// Applies what the threads off the key loop send back until none runs.
fn settle(app: &mut App) {
    while app.awaiting_receivers() {
        app.wait_for_receivers(Duration::from_secs(120));
        console::update(app, Action::Poll);
    }
}

/// A live console on an outbox of `total` prepared operations (their
/// adapter's state in `dir`), every one of them marked; how long preparing
/// them took.
fn marked_console(url: &str, dir: &Path, total: usize) -> (App, Duration) {
    let mut ws = Workspace::open(location(url), OpenOptions::default()).expect("outbox");
    register_lossy(&mut ws, dir, ACTION);
    let loaded = prepare_all(url, total);
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    client.batch_execute("VACUUM ANALYZE").expect("vacuum");
    let source = Source {
        location: location(url),
        temporary_demo: false,
    };
    let options = Options {
        reviewer: Some("bench".to_string()),
        colours: recon::console::theme::Choice::plain(false),
    };
    let mut app = App::open(ws, source, options, (120, 40)).expect("open console");
    console::update(&mut app, Action::Filter(1));
    console::update(&mut app, Action::MarkAll);
    settle(&mut app);
    assert_eq!(app.marks.len(), total, "every prepared operation marked");
    app.go_live().expect("start the watcher");
    (app, loaded)
}

fn keys(pg: &servers::Postgres) {
    let total = count("RECON_BENCH_LIVE_MARKS", 50_000);
    let url = outbox(pg, "live_keys");
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut app, loaded) = marked_console(&url, dir.path(), total);
    // Another host writes: notes on marked operations, one command after
    // another, until the keys are done.
    let done = AtomicBool::new(false);
    let notes = AtomicUsize::new(0);
    let (mut key_times, mut poll_times, mut refreshes) = (Vec::new(), Vec::new(), 0);
    let mut catch_ups = Vec::new();
    let watching = Workspace::open(location(&url), OpenOptions::default()).expect("outbox");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                let op = format!("p-{:06}", (i * 7919) % total);
                let text = format!("note {i}");
                recon(&[
                    "note",
                    "--database",
                    &url,
                    &op,
                    "--by",
                    "writer",
                    "--text",
                    &text,
                ]);
                notes.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        });
        let mut action = Action::Down;
        for key in 0..2000 {
            let seen = app.live_through();
            let start = Instant::now();
            console::update(&mut app, Action::Poll);
            std::hint::black_box(console::render(&app));
            poll_times.push(start.elapsed());
            if app.live_through() > seen {
                refreshes += 1;
            }
            // Every 100 keys the reviewer stops: how long until the screen
            // has caught up with the other host's newest note.
            if key % 100 == 99 {
                catch_ups.push(catch_up(&mut app, &watching));
            }
            // Down to the bottom of a few pages and back, as a reviewer.
            if key % 200 == 199 {
                action = if action == Action::Down {
                    Action::Up
                } else {
                    Action::Down
                };
            }
            let start = Instant::now();
            console::update(&mut app, action);
            std::hint::black_box(console::render(&app));
            key_times.push(start.elapsed());
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(app.marks.len(), total, "notes change no version");
    println!("## Key to frame with {total} marks while another host writes (PostgreSQL)");
    println!(
        "loaded {total} operations by prepare through the library in {:.1} s",
        loaded.as_secs_f64()
    );
    println!("key (update(Down/Up) + render): {}", summary(key_times));
    println!("poll between keys (+ render):   {}", summary(poll_times));
    println!(
        "meanwhile the other host left {} notes; {refreshes} refreshes landed between keys",
        notes.load(Ordering::Relaxed)
    );
    println!(
        "keys stopped, until the screen shows the newest note: {}",
        summary(catch_ups)
    );
}

/// Polls as the terminal loop does (applying what lands) until the console
/// has looked at the journal as `watching` reads it now; how long it took.
fn catch_up(app: &mut App, watching: &Workspace) -> Duration {
    let head = watching.change_marker().expect("head").journal.length;
    let start = Instant::now();
    while app.live_through() < head {
        app.wait_for_receivers(console::LANDING_INTERVAL);
        console::update(app, Action::Poll);
    }
    start.elapsed()
}

fn main() {
    let wanted = support::parts_wanted();
    servers::durable_postgres();
    let Some(pg) = servers::require("bench live", servers::postgres()) else {
        return;
    };
    if wanted("decisions") {
        decisions(pg);
    }
    if wanted("keys") {
        keys(pg);
    }
}
