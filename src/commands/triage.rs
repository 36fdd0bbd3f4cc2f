//! The commands of triage: `observe`, `note`, `escalate` and
//! `deescalate`. Each validates its flags (names under SPEC 6's rule, texts
//! within their bound) before the workspace is opened, makes one facade
//! call, and renders what it recorded.

use super::open::{open, Place};
use super::person::Person;
use super::render::observation_line;
use super::watch::{interrupted_line, shows_progress, TerminalWatch, EXIT_INTERRUPTED};
use super::{Failure, Out, Render, EXIT_OK, EXIT_STORAGE};
use crate::cli::{identifier, MarkArgs, NoteArgs, ObserveArgs};
use crate::domain::sanitize::{escape, json_for_terminal};
use crate::domain::{
    free_text, EscalationAction, Note as NoteRecord, Observed, OpState, Operation,
};
use crate::workspace::{Location, ObserveRequest};
use std::time::Duration;

/// `recon observe`: read the selected operations' receivers and record
/// what they showed.
pub struct Observe {
    location: Location,
    op_ids: Vec<String>,
    state: Option<OpState>,
    older_than: Option<Duration>,
    by: Person,
    /// Whether to show progress: stderr is a terminal and stdout is not
    /// JSON for a script.
    progress: bool,
}

impl Observe {
    pub fn validate(args: ObserveArgs, place: Place) -> Result<Self, Failure> {
        for id in &args.op_ids {
            identifier("op id", id)?;
        }
        let by = Person::of("--by", args.by, &place)?;
        Ok(Observe {
            location: place.required()?,
            op_ids: args.op_ids,
            state: args.state.map(OpState::from),
            older_than: args.older_than,
            by,
            progress: shows_progress(args.json),
        })
    }

    pub fn run(self) -> Result<ObservedAll, Failure> {
        let mut ws = open(&self.location, false)?;
        let by = self.by.name(&ws)?;
        let mut watch = TerminalWatch::install(self.progress, "observed");
        let request = ObserveRequest {
            op_ids: &self.op_ids,
            state: self.state,
            older_than: self.older_than,
            by: &by,
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
        interrupted_line("observe", not_attempted as u64)
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
    by: Person,
    text: String,
}

impl Note {
    pub fn validate(args: NoteArgs, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        let by = Person::of("--by", args.by, &place)?;
        text_arg("--text", &args.text)?;
        Ok(Note {
            location: place.required()?,
            op_id: args.op_id,
            by,
            text: args.text,
        })
    }

    pub fn run(self) -> Result<Noted, Failure> {
        let mut ws = open(&self.location, false)?;
        let by = self.by.name(&ws)?;
        let note = ws.note(&self.op_id, &by, &self.text)?;
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
    by: Person,
    reason: String,
}

impl Mark {
    pub fn validate(args: MarkArgs, action: MarkAct, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        let by = Person::of("--by", args.by, &place)?;
        text_arg("--reason", &args.reason)?;
        Ok(Mark {
            location: place.required()?,
            action,
            op_id: args.op_id,
            by,
            reason: args.reason,
        })
    }

    pub fn run(self) -> Result<Marked, Failure> {
        let mut ws = open(&self.location, false)?;
        let by = &self.by.name(&ws)?;
        let (op_id, reason) = (&self.op_id, &self.reason);
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
