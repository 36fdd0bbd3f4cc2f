//! How a long command (`observe`, `resolve`) is watched from a terminal:
//! Ctrl-C ([`Interrupt`]) asks it to stop after the request in hand, and
//! a progress line on stderr (only when stderr is a terminal and stdout
//! is not JSON for a script) says how far it is, at what rate, and how
//! long is left. A line of the log of acts (`RECON_LOG=json`) is written
//! above it ([`log_line`]), never inside it.

use super::interrupt::Interrupt;
use crate::workspace::Watch;
use std::io::IsTerminal;
use std::io::Write;
use std::time::{Duration, Instant};

/// The exit code of a run stopped by Ctrl-C (128 + SIGINT, as a shell
/// reports a process SIGINT ended).
pub const EXIT_INTERRUPTED: i32 = 130;

/// Whether a command shows progress: stderr is a terminal and stdout is
/// not JSON for a script.
pub fn shows_progress(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

/// The watch of one command's run: Ctrl-C, and progress if shown.
pub struct TerminalWatch {
    interrupt: Interrupt,
    progress: Option<Progress>,
}

impl TerminalWatch {
    /// Installs the Ctrl-C handler; with `progress`, the line counts what
    /// is done as `done` (a past participle: "observed", "resolved").
    pub fn install(progress: bool, done: &'static str) -> TerminalWatch {
        TerminalWatch {
            interrupt: Interrupt::install(),
            progress: progress.then(|| Progress::new(done)),
        }
    }

    /// Clears the progress line, if one was shown.
    pub fn clear(&self) {
        if self.progress.as_ref().is_some_and(|p| p.shown.is_some()) {
            let mut shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner());
            *shown = None;
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

impl Watch for TerminalWatch {
    fn selected(&mut self, total: Option<usize>) {
        if let Some(progress) = self.progress.as_mut() {
            progress.total = total;
        }
    }

    fn stop(&self) -> bool {
        self.interrupt.pressed()
    }

    fn progress(&mut self, done: usize) {
        if let Some(progress) = self.progress.as_mut() {
            progress.show(done);
        }
    }
}

/// The progress line on a terminal's stderr, redrawn at most four times
/// a second.
struct Progress {
    done: &'static str,
    started: Instant,
    shown: Option<Instant>,
    total: Option<usize>,
}

impl Progress {
    fn new(done: &'static str) -> Progress {
        Progress {
            done,
            started: Instant::now(),
            shown: None,
            total: None,
        }
    }

    fn show(&mut self, done: usize) {
        let now = Instant::now();
        if self
            .shown
            .is_some_and(|at| now.duration_since(at) < Duration::from_millis(250))
        {
            return;
        }
        self.shown = Some(now);
        let elapsed = now.duration_since(self.started);
        let line = progress_line(self.done, done, self.total, elapsed);
        let mut shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner());
        let _ = write!(std::io::stderr(), "\r\x1b[K{line}");
        *shown = Some(line);
    }
}

/// The progress line on the terminal now, if one is: a line logged
/// meanwhile ([`log_line`]) clears it and draws it again below itself.
static SHOWN: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// One line on stderr that never lands inside the progress line.
pub fn log_line(line: &str) {
    let shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner());
    // A stderr that is gone (a closed pipe, a hung-up terminal) is no
    // reason to fail: the line is lost, never a panic.
    let _ = match shown.as_deref() {
        Some(progress) => write!(std::io::stderr(), "\r\x1b[K{line}\n{progress}"),
        None => writeln!(std::io::stderr(), "{line}"),
    };
}

/// One progress line: done (of the total when known), the rate, and the
/// time left at that rate.
fn progress_line(what: &str, done: usize, total: Option<usize>, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 {
        done as f64 / seconds
    } else {
        0.0
    };
    let mut line = match total {
        Some(total) => format!("{what} {done} of {total}"),
        None => format!("{what} {done}"),
    };
    if rate > 0.0 {
        line.push_str(&format!(", {rate:.0}/s"));
        if let Some(left) = total.map(|t| t.saturating_sub(done)) {
            line.push_str(&format!(", about {:.0} s left", left as f64 / rate));
        }
    }
    line.push_str(" (Ctrl-C stops after the request in hand)");
    line
}

/// What a stopped run did not do, for a person: `command` is the one to
/// run again.
pub fn interrupted_line(command: &str, not_attempted: u64) -> String {
    format!(
        "interrupted: {not_attempted} not attempted (what was recorded stays recorded; run \
         {command} again to finish the rest)"
    )
}

#[cfg(test)]
mod tests {
    use super::progress_line;
    use std::time::Duration;

    #[test]
    fn progress_says_done_of_total_the_rate_and_the_time_left() {
        let line = progress_line("observed", 3000, Some(10000), Duration::from_secs(2));
        assert_eq!(
            line,
            "observed 3000 of 10000, 1500/s, about 5 s left (Ctrl-C stops after the request in hand)"
        );
        let unknown_total = progress_line("observed", 500, None, Duration::from_secs(1));
        assert_eq!(
            unknown_total,
            "observed 500, 500/s (Ctrl-C stops after the request in hand)"
        );
        let at_once = progress_line("resolved", 0, Some(10), Duration::ZERO);
        assert_eq!(
            at_once,
            "resolved 0 of 10 (Ctrl-C stops after the request in hand)"
        );
    }
}
