//! The commands of triage: `observe`, `note`, `escalate` and
//! `deescalate`. Each validates its flags (names under SPEC 6's rule, texts
//! within their bound) before the workspace is opened, makes one facade
//! call, and renders what it recorded.

use super::interrupt::Interrupt;
use super::open::{open, Place};
use super::render::observation_line;
use super::{Failure, Out, Render, EXIT_OK, EXIT_STORAGE};
use crate::cli::{identifier, person, MarkArgs, NoteArgs, ObserveArgs};
use crate::domain::sanitize::{escape, json_for_terminal};
use crate::domain::{
    free_text, EscalationAction, Note as NoteRecord, Observed, OpState, Operation,
};
use crate::workspace::{Location, ObserveRequest, ObserveWatch};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The exit code of a run stopped by Ctrl-C (128 + SIGINT, as a shell
/// reports a process SIGINT ended).
pub const EXIT_INTERRUPTED: i32 = 130;

/// `recon observe`: read the selected operations' receivers and record
/// what they showed.
pub struct Observe {
    location: Location,
    op_ids: Vec<String>,
    state: Option<OpState>,
    older_than: Option<Duration>,
    by: String,
    /// Whether to show progress: stderr is a terminal and stdout is not
    /// JSON for a script.
    progress: bool,
}

impl Observe {
    pub fn validate(args: ObserveArgs, place: Place) -> Result<Self, Failure> {
        for id in &args.op_ids {
            identifier("op id", id)?;
        }
        person("--by", &args.by)?;
        Ok(Observe {
            location: place.required()?,
            op_ids: args.op_ids,
            state: args.state.map(OpState::from),
            older_than: args.older_than,
            by: args.by,
            progress: !args.json && std::io::stderr().is_terminal(),
        })
    }

    pub fn run(self) -> Result<ObservedAll, Failure> {
        let mut ws = open(&self.location, false)?;
        let mut watch = Watch {
            interrupt: Interrupt::install(),
            progress: self.progress.then(Progress::new),
        };
        let request = ObserveRequest {
            op_ids: &self.op_ids,
            state: self.state,
            older_than: self.older_than,
            by: &self.by,
        };
        let report = ws.observe_watched(&request, &mut watch);
        watch.clear();
        let report = report?;
        Ok(ObservedAll {
            stopped: report.stopped,
            observed: report.observed,
            unread: report
                .unread
                .into_iter()
                .map(|u| (u.op_id, u.receiver, Failure::Engine(u.error)))
                .collect(),
        })
    }
}

/// What `observe` recorded, and each operation it could not read: its id,
/// its receiver, and why. Stdout keeps the shape SPEC 9 fixes (under
/// `--json`, the array of observations); the operations not read are one
/// line each on stderr, and make the exit code 4.
pub struct ObservedAll {
    observed: Vec<Observed>,
    unread: Vec<(String, String, Failure)>,
    /// How many selected operations were not attempted, when Ctrl-C
    /// stopped the run.
    stopped: Option<usize>,
}

/// What a long `observe` is watched by: Ctrl-C, and progress on a
/// terminal.
struct Watch {
    interrupt: Interrupt,
    progress: Option<Progress>,
}

impl Watch {
    /// Clears the progress line, if one was shown.
    fn clear(&self) {
        if self.progress.as_ref().is_some_and(|p| p.shown.is_some()) {
            eprint!("\r\x1b[K");
        }
    }
}

impl ObserveWatch for Watch {
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
    started: Instant,
    shown: Option<Instant>,
    total: Option<usize>,
}

impl Progress {
    fn new() -> Progress {
        Progress {
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
        let line = progress_line(done, self.total, now.duration_since(self.started));
        eprint!("\r\x1b[K{line}");
    }
}

/// One progress line: done (of the total when known), the rate, and the
/// time left at that rate.
pub fn progress_line(done: usize, total: Option<usize>, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 {
        done as f64 / seconds
    } else {
        0.0
    };
    let mut line = match total {
        Some(total) => format!("observed {done} of {total}"),
        None => format!("observed {done}"),
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

impl ObservedAll {
    /// One operation not read, for a person: the op, its receiver, why.
    fn unread_line(op_id: &str, receiver: &str, failure: &Failure) -> String {
        let prefix = match failure {
            Failure::Engine(error) => match error.refusal() {
                Some(refusal) => format!("refused: {}: ", refusal.code()),
                None => "error: ".to_string(),
            },
            _ => "error: ".to_string(),
        };
        format!(
            "{prefix}{} (receiver {}) was not observed: {}",
            escape(op_id),
            escape(receiver),
            escape(&failure.text())
        )
    }

    /// One operation not read, for a script: `{op_id, receiver, error}`,
    /// the error as the JSON error document of a command that read only
    /// that operation would hold it.
    fn unread_json(op_id: &str, receiver: &str, failure: &Failure) -> String {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            op_id: &'a str,
            receiver: &'a str,
            error: Option<serde_json::Value>,
        }
        let line = Line {
            op_id,
            receiver,
            error: failure.json().map(|mut d| d["error"].take()),
        };
        // Serializing strings and a JSON value cannot fail.
        json_for_terminal(serde_json::to_string(&line).unwrap_or_default())
    }

    fn summary(&self) -> String {
        let count = |n: usize| match n {
            1 => "1 operation".to_string(),
            n => format!("{n} operations"),
        };
        let observed = match self.observed.first() {
            Some(o) => format!(
                "observed {} as {} at {}",
                count(self.observed.len()),
                escape(&o.observed_by),
                o.observed_at
            ),
            None if self.unread.is_empty() => return "no operation to observe".to_string(),
            None => "observed no operation".to_string(),
        };
        let observed = match self.unread.len() {
            0 => observed,
            n => format!(
                "{observed}; {} could not be read (stderr says why)",
                count(n)
            ),
        };
        match self.stopped {
            None => observed,
            Some(n) => format!("{observed}; {}", Self::interrupted(n)),
        }
    }

    /// What a stopped run did not do, for a person.
    fn interrupted(not_attempted: usize) -> String {
        format!(
            "interrupted: {not_attempted} not attempted (what was recorded stays \
             recorded; run observe again to read the rest)"
        )
    }
}

impl Render for ObservedAll {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        for o in &self.observed {
            out.line(format!("{}: {}", escape(&o.op_id), observation_line(o)))?;
        }
        out.line(self.summary())?;
        out.flush()?;
        for (op_id, receiver, failure) in &self.unread {
            out.stderr_line(&Self::unread_line(op_id, receiver, failure));
        }
        if let Some(n) = self.stopped {
            out.stderr_line(&Self::interrupted(n));
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.observed)?;
        out.flush()?;
        for (op_id, receiver, failure) in &self.unread {
            out.stderr_line(&Self::unread_json(op_id, receiver, failure));
        }
        if let Some(n) = self.stopped {
            let line = serde_json::json!({"interrupted": {
                "observed": self.observed.len(),
                "unread": self.unread.len(),
                "not_attempted": n,
            }});
            out.stderr_line(&line.to_string());
        }
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        if self.stopped.is_some() {
            EXIT_INTERRUPTED
        } else if self.unread.is_empty() {
            EXIT_OK
        } else {
            EXIT_STORAGE
        }
    }
}

/// A note's text or an escalation's reason, within its bound.
fn text_arg(what: &str, text: &str) -> Result<(), Failure> {
    free_text(what, text).map(drop).map_err(Failure::Usage)
}

/// `recon note`: a note on an operation.
pub struct Note {
    location: Location,
    op_id: String,
    by: String,
    text: String,
}

impl Note {
    pub fn validate(args: NoteArgs, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        person("--by", &args.by)?;
        text_arg("--text", &args.text)?;
        Ok(Note {
            location: place.required()?,
            op_id: args.op_id,
            by: args.by,
            text: args.text,
        })
    }

    pub fn run(self) -> Result<Noted, Failure> {
        let mut ws = open(&self.location, false)?;
        let note = ws.note(&self.op_id, &self.by, &self.text)?;
        Ok(Noted {
            op_id: self.op_id,
            note,
        })
    }
}

pub struct Noted {
    op_id: String,
    note: NoteRecord,
}

impl Render for Noted {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        out.line(format!(
            "{}: note #{} by {} at {}",
            escape(&self.op_id),
            self.note.seq,
            escape(&self.note.by),
            self.note.at
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.note)
    }
}

/// `recon escalate` and `recon deescalate`.
/// What `escalate`, `deescalate` and `acknowledge` do to an operation's
/// markers.
#[derive(Debug, Clone, Copy)]
pub enum MarkAct {
    Escalation(EscalationAction),
    /// Clears the contradiction marker.
    Acknowledge,
}

pub struct Mark {
    location: Location,
    action: MarkAct,
    op_id: String,
    by: String,
    reason: String,
}

impl Mark {
    pub fn validate(args: MarkArgs, action: MarkAct, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        person("--by", &args.by)?;
        text_arg("--reason", &args.reason)?;
        Ok(Mark {
            location: place.required()?,
            action,
            op_id: args.op_id,
            by: args.by,
            reason: args.reason,
        })
    }

    pub fn run(self) -> Result<Marked, Failure> {
        let mut ws = open(&self.location, false)?;
        let (op_id, by, reason) = (&self.op_id, &self.by, &self.reason);
        let op = match self.action {
            MarkAct::Escalation(EscalationAction::Escalate) => ws.escalate(op_id, by, reason)?,
            MarkAct::Escalation(EscalationAction::Deescalate) => {
                ws.deescalate(op_id, by, reason)?
            }
            MarkAct::Acknowledge => ws.acknowledge(op_id, by, reason)?,
        };
        Ok(Marked(op))
    }
}

pub struct Marked(Operation);

impl Render for Marked {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let op = &self.0;
        let marker = match &op.triage.escalated {
            Some(e) => format!(
                "escalated by {} at {}: {}",
                escape(&e.by),
                e.at,
                escape(&e.reason)
            ),
            None => "not escalated".to_string(),
        };
        let marker = match &op.triage.contradicted {
            Some(c) => format!(
                "{marker}; contradicted by read {} ({}) at {}",
                c.seq, c.verdict, c.at
            ),
            None => marker,
        };
        out.line(format!(
            "{}: {marker}; still {} at version {}",
            escape(&op.op_id),
            op.state,
            op.version
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::progress_line;
    use std::time::Duration;

    #[test]
    fn progress_says_done_of_total_the_rate_and_the_time_left() {
        let line = progress_line(3000, Some(10000), Duration::from_secs(2));
        assert_eq!(
            line,
            "observed 3000 of 10000, 1500/s, about 5 s left (Ctrl-C stops after the request in hand)"
        );
        let unknown_total = progress_line(500, None, Duration::from_secs(1));
        assert_eq!(
            unknown_total,
            "observed 500, 500/s (Ctrl-C stops after the request in hand)"
        );
        let at_once = progress_line(0, Some(10), Duration::ZERO);
        assert_eq!(
            at_once,
            "observed 0 of 10 (Ctrl-C stops after the request in hand)"
        );
    }
}
