//! Acting on actions: the only code that changes the [`App`], and the only
//! console code that calls the library.
//!
//! Navigation reads one keyset page (or one row) next to what is on screen;
//! a selection change reloads the selected operation's detail and a fresh,
//! non-closing snapshot. Every mutation takes the same road: availability
//! (the reason is shown when it is not), the reviewer's name (asked once),
//! a confirmation that names exactly what will happen, and only then the
//! library call, with the version the reviewer saw. Refusals come back as
//! reports in words with their code; a stale version says what the
//! operation is now and who changed it, and the console refreshes. Errors
//! never escape `update`: they become the status line or a report, so
//! nothing a database or a child process does can crash the console.
//!
//! This file routes each action by the console's mode, and the work has
//! modules of its own, layered so that each uses only those before it and
//! one can be read without the ones after: `status` (the status line, and
//! a failure becoming a report), `guard` (nothing acted on that the
//! reviewer cannot see: keys below the minimum size, a dialog that no
//! longer fits, pasted text, a terminal's late answer that would read as
//! keys), `queue` (what is on screen, how it is reloaded, and the start of
//! each read), `live` (other hosts' changes:
//! the poll, which runs no query, the screen read off the key loop and
//! applied where it still belongs, the marks and an open dialog checked
//! against what moved), `jobs` (a confirmed mutation
//! carried out, on one operation or on every mark, and its report),
//! `background` (the reads and jobs that asked an adapter off the key
//! loop, applied when they land, on the next poll), `quit` (`q` or Ctrl-C
//! while a job runs asks first, stops it between chunks and keeps its
//! report to print), `confirm` (a request
//! becoming a confirmation with exact values), `triage` (the reviewer's
//! own reads, notes and the escalation marker, which record who did them
//! but change no state), then `forms` (typed input: the search, the
//! reviewer's name, the compensation form, a note or a reason) and `normal`
//! (the queue's keys and the overlays a reviewer only reads), which need
//! nothing of each other. No module here uses this file.

mod background;
mod confirm;
mod forms;
mod guard;
mod jobs;
mod live;
mod normal;
mod queue;
mod quit;
mod status;
mod triage;

pub use forms::check_reviewer;
pub use guard::{MAX_ANSWER_KEYS, MAX_PASTE_CHARS};

use super::action::Action;
use super::app::{App, Background, Filter, Mode};
use super::view;
use crate::error::Result;
use status::fail;

/// Applies one action to the app.
pub fn update(app: &mut App, action: Action) {
    app.now = app.ws.now();
    status::expire(app);
    if guard::ignored(app, action) {
        return;
    }
    if let Err(error) = apply(app, action) {
        fail(app, &error);
    }
    background::open_held_report(app);
}

/// Applies a key press: the action the key table gives it in the current
/// mode, if any, unless it is part of a terminal's late answer to the
/// background question, which is dropped ([`guard::late_answer`]). Below
/// the minimum size a key press counts as ignored whether or not it means
/// anything here, since the reviewer cannot see which it would have been.
pub fn key(app: &mut App, event: ratatui::crossterm::event::KeyEvent) {
    app.now = app.ws.now();
    if guard::late_answer(app, event) {
        return;
    }
    match super::keys::map_key(event, app) {
        Some(action) => update(app, action),
        None if event.kind == ratatui::crossterm::event::KeyEventKind::Press
            && guard::too_small(app) =>
        {
            app.unseen.ignored += 1;
        }
        None => {}
    }
}

/// Applies a paste: never keys. In a text field it is typed there (on one
/// line, at most [`MAX_PASTE_CHARS`] characters); anywhere else it is
/// dropped and the status line says so.
pub fn paste(app: &mut App, text: &str) {
    app.now = app.ws.now();
    status::expire(app);
    if !guard::pastes_into_field(app) {
        guard::drop_paste(app, text);
        return;
    }
    let (chars, cut) = guard::pasted(text);
    for c in chars {
        // Typing never leaves the field; should it ever, the rest is not
        // read as keys either.
        if !guard::pastes_into_field(app) {
            break;
        }
        update(app, Action::Input(c));
    }
    if cut {
        status::set_status(
            app,
            super::app::Tone::Warn,
            format!("the paste was cut at {MAX_PASTE_CHARS} characters"),
        );
    }
}

fn apply(app: &mut App, action: Action) -> Result<()> {
    match action {
        Action::Quit => {
            quit::quit(app);
            Ok(())
        }
        Action::Stop => {
            quit::stop(app);
            Ok(())
        }
        Action::Resize(width, height) => {
            let before = (app.width, app.height);
            let loaded = queue::resize(app, width, height);
            guard::resized(app, before);
            loaded
        }
        Action::Poll => {
            let landed = background::land(app);
            live::poll(app)?;
            landed
        }
        other => match app.mode.clone() {
            Mode::Normal => normal::normal(app, other),
            Mode::Help { scroll } => {
                normal::help(app, scroll, other);
                Ok(())
            }
            Mode::Report(report) => {
                normal::report(app, report, other);
                Ok(())
            }
            Mode::Search { input, previous } => forms::search_input(app, input, previous, other),
            Mode::Reviewer {
                input,
                error,
                resume,
            } => forms::reviewer_input(app, input, error, resume, other),
            Mode::Compensate(form) => forms::form_input(app, form, other),
            Mode::Keep(picker) => confirm::keep_input(app, picker, other),
            Mode::Annotate(form) => forms::annotate_input(app, form, other),
            Mode::Confirm(pending) => confirm::confirm_input(app, pending, other),
        },
    }
}

impl App {
    /// Opens the console on a workspace: reads the counts and the first
    /// page for a screen of `width` x `height`, and selects the first row.
    pub fn open(
        ws: crate::workspace::Workspace,
        source: super::app::Source,
        options: super::app::Options,
        (width, height): (u16, u16),
    ) -> Result<App> {
        // Roles not known (the database did not say) offer every act, the
        // database judging each when it runs.
        let roles = ws.roles_held().unwrap_or(None);
        let mut app = App {
            seen: ws.change_marker()?,
            held_report: None,
            dialog_seen: None,
            dialog_since: 0,
            unseen: Default::default(),
            late_answer: None,
            counts: ws.counts()?,
            surplus: ws.surplus_awaiting()?,
            background: Background::new(&ws),
            working: None,
            now: ws.now(),
            ws,
            source,
            reviewer: options.reviewer,
            theme: options.colours.resolve(None),
            width,
            height,
            filter: Filter::ORDER[0],
            verdict_filter: None,
            escalated_filter: None,
            filter_count: None,
            search: None,
            searching: None,
            queue: super::app::Queue {
                rows: Vec::new(),
                cursor: 0,
                height: view::queue_rows(width, height),
                offset: None,
            },
            marks: Default::default(),
            detail: None,
            snapshot_scroll: 0,
            mode: Mode::Normal,
            status: None,
            should_quit: false,
            quitting: false,
            exit_report: None,
            roles,
            _demo_dir: None,
        };
        queue::load_queue(&mut app, super::app::Anchor::Start)?;
        Ok(app)
    }

    /// Whether a read or a job that asks an adapter is still running off
    /// the key loop.
    pub fn awaiting_receivers(&self) -> bool {
        self.background.busy()
    }

    /// Blocks until a read or a job running off the key loop comes back,
    /// or `timeout` passes; true when one came back. What came back is
    /// applied by the next [`Action::Poll`], like everything else, in
    /// `update`.
    pub fn wait_for_receivers(&mut self, timeout: std::time::Duration) -> bool {
        self.background.wait(timeout)
    }

    /// Makes the console live: a watcher on a thread of its own tells it
    /// when the workspace changes, and the next polls refresh the screen
    /// off the key loop (`live`). The terminal console is always live; a
    /// headless run is not, so that what it renders follows only its keys.
    pub fn go_live(&mut self) -> std::io::Result<()> {
        let watch = self.ws.watch_head();
        self.background.watch(watch)
    }

    /// How far into the journal the console has looked: the length of the
    /// journal the screen was read at, or, while a dialog is open, that the
    /// dialog was checked against, whichever is further.
    pub fn live_through(&self) -> i64 {
        let dialog = match self.mode {
            Mode::Confirm(_) => self.dialog_seen.as_ref().map(|m| m.journal.length),
            _ => None,
        };
        dialog.unwrap_or(0).max(self.seen.journal.length)
    }

    /// Keeps a temporary workspace directory until the console is dropped.
    pub fn keep_dir(mut self, dir: tempfile::TempDir) -> App {
        self._demo_dir = Some(dir);
        self
    }
}
