//! The review console: the terminal program reviewers live in, on the
//! library API and never on SQL.
//!
//! It has the Elm shape (STYLE.md): one [`App`] holding all state, an
//! [`Action`] enum, a pure key map ([`keys::map_key`], over the one key
//! table that also generates the help and the key bar), [`update()`] as the
//! only code that changes state or calls the library, and a view that
//! renders `&App` ([`view`]). Two entry points share all of it: [`run`]
//! drives a real terminal (raw mode, alternate screen and bracketed paste,
//! its background asked once at start ([`probe`]), restored on quit, on error and on panic; a terminal that hangs up ends
//! it as SIGHUP does, [`terminal_gone`]) and is live: a watcher thread
//! tells it when the
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
pub mod probe;
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
///
/// `stopped` says whether a signal (SIGTERM, SIGHUP) asked the console to
/// end: a running job then stops between chunks and the console quits when
/// it lands, without reading keys any more and drawing only while the
/// terminal is there; its report is [`App::exit_report`], for the caller to
/// print once the terminal is restored ([`exit_text`]).
///
/// A terminal that goes away (its pane or window closed: a hangup, a read
/// or a draw that fails) ends the console as a signal does, and the
/// answer says so ([`Ending::TerminalLost`]): the report has nowhere sure
/// to go then, and the restore is attempted with its errors ignored.
///
/// Once in raw mode, before the first frame, it asks the terminal for its
/// background ([`probe::background`]) when `colours` leaves that to the
/// terminal, and draws with the theme that answer picks.
pub fn run(
    app: &mut App,
    colours: theme::Choice,
    stopped: &dyn Fn() -> bool,
) -> std::io::Result<Ending> {
    let mut terminal = match ratatui::try_init() {
        Ok(terminal) => terminal,
        Err(e) => {
            ratatui::restore();
            return Err(e);
        }
    };
    if colours.asks_terminal() {
        app.theme = colours.resolve(probe::background(probe::TIMEOUT));
    }
    let result = bracketed_paste(true).and_then(|()| event_loop(&mut terminal, app, stopped));
    leave_terminal();
    result
}

/// Turns the terminal's bracketed paste on or off: on, a paste arrives as
/// one [`Event::Paste`] instead of keys, so pasted text can never press
/// `c` then `y`. The panic hook turns it off again before ratatui's
/// restores the rest, so no exit path leaves it on.
fn bracketed_paste(on: bool) -> std::io::Result<()> {
    use ratatui::crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
    use ratatui::crossterm::execute;
    let mut out = std::io::stdout();
    if !on {
        return execute!(out, DisableBracketedPaste);
    }
    let restore = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableBracketedPaste);
        restore(info);
    }));
    execute!(out, EnableBracketedPaste)
}

/// Leaves the terminal as the console found it: bracketed paste off, then
/// raw mode and the alternate screen (`ratatui::restore`).
fn leave_terminal() {
    let _ = bracketed_paste(false);
    ratatui::restore();
}

/// How the terminal loop ended: the reviewer quit (or a signal ended it)
/// with the terminal there, or the terminal itself went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Quit, or stopped by SIGTERM or SIGHUP: the report can be printed.
    Quit,
    /// The terminal hung up or could no longer be read or drawn on: the
    /// console stopped as a signal stops it, and has nowhere sure to print.
    TerminalLost,
}

fn event_loop(
    terminal: &mut DefaultTerminal,
    app: &mut App,
    stopped: &dyn Fn() -> bool,
) -> std::io::Result<Ending> {
    let size = terminal.size()?;
    update(app, Action::Resize(size.width, size.height));
    app.go_live()?;
    let mut last_poll = Instant::now();
    let mut ending = None;
    while !app.should_quit {
        if let Some(ending) = ending {
            wind_down(terminal, app, ending);
            continue;
        }
        ending = if stopped() {
            Some(Ending::Quit)
        } else if terminal_gone() {
            Some(Ending::TerminalLost)
        } else {
            turn(terminal, app, stopped, &mut last_poll)
        };
        if ending.is_some() {
            update(app, Action::Stop);
        }
    }
    Ok(ending.unwrap_or(Ending::Quit))
}

/// One turn with the terminal there: draw, apply what the terminal sent
/// within the interval, and poll when the interval is up. A draw or a read
/// that fails means the terminal has gone: the answer says so.
fn turn(
    terminal: &mut DefaultTerminal,
    app: &mut App,
    stopped: &dyn Fn() -> bool,
    last_poll: &mut Instant,
) -> Option<Ending> {
    if terminal
        .draw(|frame| frame.render_widget(&*app, frame.area()))
        .is_err()
    {
        return Some(Ending::TerminalLost);
    }
    let interval = if app.awaiting_receivers() {
        LANDING_INTERVAL
    } else {
        POLL_INTERVAL
    };
    let wait = interval.saturating_sub(last_poll.elapsed());
    match next_event(wait, stopped) {
        Ok(Some(event)) => handle(app, event),
        Ok(None) => {}
        Err(_) => return Some(Ending::TerminalLost),
    }
    if last_poll.elapsed() >= interval {
        update(app, Action::Poll);
        *last_poll = Instant::now();
    }
    None
}

/// A turn once the console is ending: only the job's landing matters now.
/// The terminal is drawn on (best effort) only while it is there: after a
/// signal, not once it has gone (a draw asks crossterm for the size, which
/// runs `tput` when the ioctl fails, as it does on a hung-up terminal).
fn wind_down(terminal: &mut DefaultTerminal, app: &mut App, ending: Ending) {
    if ending == Ending::Quit && !terminal_gone() {
        let _ = terminal.draw(|frame| frame.render_widget(&*app, frame.area()));
    }
    app.wait_for_receivers(POLL_INTERVAL);
    update(app, Action::Poll);
}

/// The terminal's next event within `wait`, if any. A signal interrupts
/// the wait: that is no error, and the loop's next turn obeys it.
///
/// crossterm reads through its poll(2) source (the `use-dev-tty` feature,
/// Cargo.toml): on a hung-up terminal it returns at `wait`'s end, or fails
/// with `EIO`, where its default source would read 0 bytes for ever
/// without returning.
fn next_event(wait: Duration, stopped: &dyn Fn() -> bool) -> std::io::Result<Option<Event>> {
    let ready = match event::poll(wait) {
        Err(_) if stopped() => false,
        other => other?,
    };
    if !ready {
        return Ok(None);
    }
    match event::read() {
        Err(_) if stopped() => Ok(None),
        other => other.map(Some),
    }
}

/// Whether the console's terminal has gone: its standard input or output
/// has hung up (its pane, window or connection was closed) or is no longer
/// open. poll(2) is asked for no event at all, so it reads nothing and
/// returns at once; a hangup and an error are told regardless.
pub fn terminal_gone() -> bool {
    [libc::STDIN_FILENO, libc::STDOUT_FILENO].iter().any(|&fd| {
        let mut poll = libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid `pollfd` for the length given.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        ready > 0 && poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
    })
}

/// A terminal event applied: a key through the key table, a resize, and a
/// paste as text (never keys: [`update::paste`]).
fn handle(app: &mut App, event: Event) {
    match event {
        Event::Key(key) => {
            crate::faults::console_panic_drill();
            update::key(app, key);
        }
        Event::Resize(width, height) => update(app, Action::Resize(width, height)),
        Event::Paste(text) => update::paste(app, &text),
        _ => {}
    }
}

/// What the console says on the normal screen after it has quit, if
/// anything: the report of the job a quit or a signal stopped, its title
/// then its lines, each made safe for the terminal.
pub fn exit_text(app: &App) -> Option<String> {
    let report = app.exit_report.as_ref()?;
    let mut text = format!("recon console: {}\n", text::clean(&report.title));
    for (_, line) in &report.lines {
        text.push_str(&text::clean(line));
        text.push('\n');
    }
    Some(text)
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
        update::key(app, *key);
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
