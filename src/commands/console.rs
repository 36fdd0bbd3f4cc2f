//! The review console from the command line: `recon [--workspace DIR |
//! --database URL] [--reviewer NAME] [--theme light|dark]` in a real terminal, and `recon screenshot`, the same
//! console rendered headless after a key sequence.
//!
//! Both take the console's options from here ([`console_options`]), so a
//! reviewer's name is checked the same way for both. The interactive
//! console draws its own screen and its result renders as nothing; a
//! screenshot's result is the rendered screen, text or SVG.

use super::open::{open, open_options, Place};
use super::{Failure, Out, Render};
use crate::cli::{person, ScreenshotArgs, ScreenshotFormat};
use crate::console;
use crate::workspace::{Location, Workspace};
use ratatui::crossterm::event::KeyEvent;

/// The console's colours from the environment and `--theme`: how many
/// colours `TERM` and `COLORTERM` say the terminal shows (none under
/// `NO_COLOR` or a `TERM` without colours), the background `--theme` or
/// else `RECON_THEME` names, and `COLORFGBG`'s. A `RECON_THEME` that is
/// set, not empty, and neither `light` nor `dark` is a usage error.
fn colours(
    no_color: bool,
    theme: Option<crate::cli::ThemeArg>,
) -> Result<console::theme::Choice, Failure> {
    use crate::cli::ThemeArg;
    use console::theme::{Background, Choice, Depth};
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let named = match (theme, var("RECON_THEME").as_str()) {
        (Some(ThemeArg::Light), _) | (None, "light") => Some(Background::Light),
        (Some(ThemeArg::Dark), _) | (None, "dark") => Some(Background::Dark),
        (None, "") => None,
        (None, other) => {
            return Err(Failure::Usage(format!(
                "RECON_THEME={} is neither light nor dark",
                crate::domain::sanitize::escape(other)
            )))
        }
    };
    Ok(Choice {
        depth: match no_color {
            true => Depth::Mono,
            false => Depth::of(&var("TERM"), &var("COLORTERM")),
        },
        named,
        colorfgbg: Background::from_colorfgbg(&var("COLORFGBG")),
    })
}

/// Whether `NO_COLOR` is set and not empty.
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// The console's options from the command line and the environment
/// (`NO_COLOR`, when set and not empty, turns colours off; the rest of
/// what picks the console's colours is [`colours`]'s).
fn console_options(reviewer: Option<&str>) -> Result<console::Options, Failure> {
    let reviewer = match reviewer {
        Some(name) => {
            let name = person("--reviewer", name)?;
            Some(
                crate::domain::normalize_name(name)
                    .ok_or(crate::domain::Refusal::EmptyReviewer)?
                    .to_string(),
            )
        }
        None => None,
    };
    Ok(console::Options {
        reviewer,
        colours: console::theme::Choice::plain(no_color()),
    })
}

/// The options with, in team mode, the database login as the reviewer
/// when `--reviewer` was not given (SPEC 10): the console does not ask
/// for a name it knows. On a workspace directory it asks before the
/// first act that records one.
fn with_login(mut options: console::Options, ws: &Workspace) -> console::Options {
    if options.reviewer.is_none() {
        options.reviewer = ws.session_role().map(str::to_string);
    }
    options
}

/// `recon [--workspace DIR | --database URL] [--reviewer NAME]`: the
/// review console, on a fresh temporary demo workspace when neither (nor
/// `RECON_DATABASE_URL`) is given.
pub struct Console {
    location: Option<Location>,
    options: console::Options,
    /// The hidden `--frozen-clock`: a stopped clock instead of the system's.
    frozen: Option<crate::domain::Timestamp>,
}

impl Console {
    pub fn validate(
        place: Place,
        reviewer: Option<&str>,
        theme: Option<crate::cli::ThemeArg>,
    ) -> Result<Self, Failure> {
        use std::io::IsTerminal;
        // Checked before anything is opened or built: without a terminal the
        // console could only write escape sequences into a pipe or a file.
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Err(Failure::Usage(
                "the review console needs a terminal on standard input and output; \
                 `recon screenshot` renders it without one, and the other commands script it"
                    .to_string(),
            ));
        }
        let mut options = console_options(reviewer)?;
        // The terminal it draws on: its colours, its background. (A
        // screenshot draws on no terminal, so only `NO_COLOR` applies there.)
        options.colours = colours(no_color(), theme)?;
        Ok(Console {
            location: place.location()?,
            options,
            frozen: None,
        })
    }

    /// The hidden `--frozen-clock TIME`: the console measures ages and
    /// stamps acts at TIME, a boundary hook for the real-terminal tests
    /// (the library takes a clock; nothing deeper reads one).
    pub fn frozen_at(mut self, time: Option<&str>) -> Result<Self, Failure> {
        if let Some(text) = time {
            let at = crate::domain::Timestamp::parse(text).ok_or_else(|| {
                Failure::Usage(format!(
                    "--frozen-clock {} is not a UTC time like 2026-12-03T08:15:02.123Z",
                    crate::domain::sanitize::escape(text)
                ))
            })?;
            self.frozen = Some(at);
        }
        Ok(self)
    }

    /// The workspace with the frozen clock, when one was given.
    fn clocked(&self, ws: Workspace) -> Workspace {
        match self.frozen {
            Some(at) => ws.with_clock(std::sync::Arc::new(crate::clock::FixedClock::at(at))),
            None => ws,
        }
    }

    pub fn run(self) -> Result<Exited, Failure> {
        let colours = self.options.colours;
        let size = ratatui::crossterm::terminal::size().unwrap_or((120, 40));
        let mut app = match self.location.clone() {
            Some(location) => {
                let ws = self.clocked(open(&location, false)?);
                let source = console::Source {
                    location,
                    temporary_demo: false,
                };
                let options = with_login(self.options, &ws);
                console::App::open(ws, source, options, size)?
            }
            None => {
                let (ws, dir) = console::demo_workspace(open_options()?)?;
                let ws = self.clocked(ws);
                let source = console::Source {
                    location: Location::workspace(dir.path()),
                    temporary_demo: true,
                };
                console::App::open(ws, source, self.options, size)?.keep_dir(dir)
            }
        };
        let ended = super::interrupt::Ended::install();
        let ending = console::run(&mut app, colours, &|| ended.received()).map_err(Failure::io)?;
        Ok(Exited {
            report: console::exit_text(&app),
            terminal_lost: ending == console::Ending::TerminalLost,
        })
    }
}

/// What the console leaves on the normal screen once it has quit: nothing,
/// or the report of the job a quit, a signal or the terminal's loss
/// stopped. After the loss the report is still offered to standard output
/// (which may be another terminal than the one that went), and a failure
/// to write it there is no error: the terminal that would show one is
/// gone.
pub struct Exited {
    report: Option<String>,
    terminal_lost: bool,
}

impl Render for Exited {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        match &self.report {
            Some(text) => match out.direct(text) {
                Err(_) if self.terminal_lost => Ok(()),
                printed => printed,
            },
            None => Ok(()),
        }
    }
}

/// `recon screenshot`: the console rendered headless after a key sequence.
pub struct Screenshot {
    location: Location,
    size: (u16, u16),
    keys: Vec<KeyEvent>,
    format: ScreenshotFormat,
    options: console::Options,
}

impl Screenshot {
    pub fn validate(args: ScreenshotArgs, place: Place) -> Result<Self, Failure> {
        let location = place.required()?;
        let keys = console::keys::parse_keys(&args.keys).map_err(Failure::Usage)?;
        let options = console_options(args.reviewer.as_deref())?;
        Ok(Screenshot {
            location,
            size: args.size,
            keys,
            format: args.format,
            options,
        })
    }

    pub fn run(self) -> Result<Screen, Failure> {
        let source = console::Source {
            location: self.location.clone(),
            temporary_demo: false,
        };
        let ws = open(&self.location, false)?;
        // Rendered as the workspace was left: ages are measured from its
        // newest change, so the same workspace renders the same screen.
        let at = ws.newest_update()?.unwrap_or_else(|| ws.now());
        let ws = ws.with_clock(std::sync::Arc::new(crate::clock::FixedClock::at(at)));
        let options = with_login(self.options, &ws);
        let mut app = console::App::open(ws, source, options, self.size)?;
        console::run_headless(&mut app, &self.keys);
        let buffer = console::render(&app);
        Ok(Screen(match self.format {
            ScreenshotFormat::Txt => console::screenshot::to_text(&buffer),
            ScreenshotFormat::Svg => console::screenshot::to_svg(&buffer),
        }))
    }
}

/// A rendered screen, as text or SVG.
pub struct Screen(String);

impl Render for Screen {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        out.direct(&self.0)
    }
}
