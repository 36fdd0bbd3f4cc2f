//! The review console: the terminal program reviewers live in, on the
//! library API and never on SQL.
//!
//! It has the Elm shape (STYLE.md): one [`App`] holding all state, an
//! [`Action`] enum, a pure key map ([`keys::map_key`], over the one key
//! table that also generates the help and the key bar), [`update()`] as the
//! only code that changes state or calls the library, and a view that
//! renders `&App` ([`view`]). Two entry points share all of it: [`run`]
//! drives a real terminal (raw mode, alternate screen, restored on quit, on
//! error and on panic) and is live: a watcher thread tells it when the
//! workspace's change marker moves (the outbox journal's head, woken by
//! the server on a database; and the built-in ledger's mark), and the
//! screen is read again off the key loop, so commits by other processes
//! and hosts appear without a key press; [`run_headless`] applies a
//! key sequence and renders into ratatui's `TestBackend`, which is what
//! `recon screenshot` and the golden tests use.
//!
//! A registered adapter is a process that may take up to its timeout to
//! answer, so reads and jobs that ask one run off the key loop and come
//! back on the poll: the terminal loop polls more often while one is out,
//! and the headless run waits for each to land after each key, as a
//! patient reviewer would.

pub mod action;
pub mod app;
pub mod bindings;
pub mod field;
pub mod keys;
pub mod screenshot;
pub mod text;
pub mod theme;
pub mod update;
pub mod view;

pub use action::Action;
pub use app::{App, Options, Source};
pub use keys::map_key;
pub use update::update;

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyEvent};
use ratatui::{DefaultTerminal, Terminal};
use std::time::{Duration, Instant};

/// How often the terminal loop applies what came back off it: the
/// watcher's news of other processes' changes, and the refresh it starts.
/// A poll runs no query, so it can be frequent: a change appears within
/// the watcher's wake, this interval, one refresh off the loop and one
/// [`LANDING_INTERVAL`].
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How often the terminal loop polls while a read or a job that asks an
/// adapter is out, so its answer shows soon after it comes back.
pub const LANDING_INTERVAL: Duration = Duration::from_millis(40);

/// How long the headless run waits for an adapter's answer before it
/// renders the screen as it is ("reading NAME…"). An adapter is killed at
/// its own timeout (30 s unless registered otherwise), and then its read
/// lands as failed, so this is only reached past an unusually long one.
pub const HEADLESS_WAIT: Duration = Duration::from_secs(90);

/// Runs the console in the real terminal until the reviewer quits.
///
/// `ratatui::try_init` enters raw mode and the alternate screen and
/// installs a panic hook that restores the terminal before the binary's own
/// hook prints its one line; every other exit path, errors included, goes
/// through `ratatui::restore` here.
pub fn run(app: &mut App) -> std::io::Result<()> {
    let mut terminal = match ratatui::try_init() {
        Ok(terminal) => terminal,
        Err(e) => {
            ratatui::restore();
            return Err(e);
        }
    };
    let result = event_loop(&mut terminal, app);
    ratatui::restore();
    result
}

fn event_loop(terminal: &mut DefaultTerminal, app: &mut App) -> std::io::Result<()> {
    let size = terminal.size()?;
    update(app, Action::Resize(size.width, size.height));
    app.go_live()?;
    let mut last_poll = Instant::now();
    while !app.should_quit {
        terminal.draw(|frame| frame.render_widget(&*app, frame.area()))?;
        let interval = if app.awaiting_receivers() {
            LANDING_INTERVAL
        } else {
            POLL_INTERVAL
        };
        let wait = interval.saturating_sub(last_poll.elapsed());
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(key) => {
                    crate::faults::console_panic_drill();
                    if let Some(action) = map_key(key, app) {
                        update(app, action);
                    }
                }
                Event::Resize(width, height) => update(app, Action::Resize(width, height)),
                _ => {}
            }
        }
        if last_poll.elapsed() >= interval {
            update(app, Action::Poll);
            last_poll = Instant::now();
        }
    }
    Ok(())
}

/// The headless entry point: the same key map and `update` as [`run`],
/// without a terminal. Before the first key and after each one, it waits
/// for the reads and jobs that ask an adapter to land. Stops early if a
/// key quits.
pub fn run_headless(app: &mut App, keys: &[KeyEvent]) {
    settle(app);
    for key in keys {
        if app.should_quit {
            break;
        }
        if let Some(action) = map_key(*key, app) {
            update(app, action);
        }
        settle(app);
    }
}

/// Applies what comes back from adapters until nothing is out, each wait
/// bounded by [`HEADLESS_WAIT`].
fn settle(app: &mut App) {
    while app.awaiting_receivers() && app.wait_for_receivers(HEADLESS_WAIT) {
        update(app, Action::Poll);
    }
}

/// Renders the app through ratatui's `TestBackend` at the app's size.
pub fn render(app: &App) -> Buffer {
    let backend = TestBackend::new(app.width, app.height);
    // TestBackend's error type is `Infallible`, so these cannot fail.
    let Ok(mut terminal) = Terminal::new(backend);
    let Ok(_) = terminal.draw(|frame| frame.render_widget(app, frame.area()));
    terminal.backend().buffer().clone()
}

/// A fresh temporary demo workspace (the one `recon demo` makes), for a
/// console started without `--workspace`. The directory is removed when
/// the returned guard is dropped.
pub fn demo_workspace(
    options: crate::settings::OpenOptions,
) -> crate::error::Result<(crate::workspace::Workspace, tempfile::TempDir)> {
    let dir = tempfile::Builder::new().prefix("recon-demo-").tempdir()?;
    let mut ws = crate::workspace::Workspace::open(dir.path(), options.creating())?;
    crate::demo::build(&mut ws, 0)?;
    Ok((ws, dir))
}
