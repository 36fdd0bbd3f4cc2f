//! The commands of triage: `observe`, `note`, `escalate` and
//! `deescalate`. Each validates its flags (names under SPEC 6's rule, texts
//! within their bound) before the workspace is opened, makes one facade
//! call, and renders what it recorded.

use super::open::{open, required_workspace};
use super::render::observation_line;
use super::{Failure, Out, Render};
use crate::cli::{identifier, person, MarkArgs, NoteArgs, ObserveArgs};
use crate::domain::sanitize::escape;
use crate::domain::{
    free_text, EscalationAction, Note as NoteRecord, Observed, OpState, Operation,
};
use crate::workspace::ObserveRequest;
use std::path::PathBuf;
use std::time::Duration;

/// `recon observe`: read the selected operations' receivers and record
/// what they showed.
pub struct Observe {
    dir: PathBuf,
    op_ids: Vec<String>,
    state: Option<OpState>,
    older_than: Option<Duration>,
    by: String,
}

impl Observe {
    pub fn validate(args: ObserveArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        for id in &args.op_ids {
            identifier("op id", id)?;
        }
        person("--by", &args.by)?;
        Ok(Observe {
            dir: required_workspace(workspace)?,
            op_ids: args.op_ids,
            state: args.state.map(OpState::from),
            older_than: args.older_than,
            by: args.by,
        })
    }

    pub fn run(self) -> Result<ObservedAll, Failure> {
        let mut ws = open(&self.dir, false)?;
        Ok(ObservedAll(ws.observe(&ObserveRequest {
            op_ids: &self.op_ids,
            state: self.state,
            older_than: self.older_than,
            by: &self.by,
        })?))
    }
}

pub struct ObservedAll(Vec<Observed>);

impl Render for ObservedAll {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        for o in &self.0 {
            out.line(format!("{}: {}", escape(&o.op_id), observation_line(o)))?;
        }
        let by = self
            .0
            .first()
            .map(|o| (o.observed_by.as_str(), o.observed_at));
        match by {
            Some((who, at)) => out.line(format!(
                "observed {} as {} at {at}",
                match self.0.len() {
                    1 => "1 operation".to_string(),
                    n => format!("{n} operations"),
                },
                escape(who)
            )),
            None => out.line("no operation to observe"),
        }
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// A note's text or an escalation's reason, within its bound.
fn text_arg(what: &str, text: &str) -> Result<(), Failure> {
    free_text(what, text).map(drop).map_err(Failure::Usage)
}

/// `recon note`: a note on an operation.
pub struct Note {
    dir: PathBuf,
    op_id: String,
    by: String,
    text: String,
}

impl Note {
    pub fn validate(args: NoteArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        person("--by", &args.by)?;
        text_arg("--text", &args.text)?;
        Ok(Note {
            dir: required_workspace(workspace)?,
            op_id: args.op_id,
            by: args.by,
            text: args.text,
        })
    }

    pub fn run(self) -> Result<Noted, Failure> {
        let mut ws = open(&self.dir, false)?;
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
pub struct Mark {
    dir: PathBuf,
    action: EscalationAction,
    op_id: String,
    by: String,
    reason: String,
}

impl Mark {
    pub fn validate(
        args: MarkArgs,
        action: EscalationAction,
        workspace: Option<PathBuf>,
    ) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        person("--by", &args.by)?;
        text_arg("--reason", &args.reason)?;
        Ok(Mark {
            dir: required_workspace(workspace)?,
            action,
            op_id: args.op_id,
            by: args.by,
            reason: args.reason,
        })
    }

    pub fn run(self) -> Result<Marked, Failure> {
        let mut ws = open(&self.dir, false)?;
        let op = match self.action {
            EscalationAction::Escalate => ws.escalate(&self.op_id, &self.by, &self.reason)?,
            EscalationAction::Deescalate => ws.deescalate(&self.op_id, &self.by, &self.reason)?,
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
