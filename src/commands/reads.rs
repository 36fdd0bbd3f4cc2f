//! The read-only commands: `ops`, `show` and `ledger`.
//!
//! Shaped like the flow commands (validated arguments with `run`, a result
//! with its text and `--json`), but nothing here writes: each opens the
//! workspace, makes one facade read, and hands the rows to the renderer.
//! The lists are rendered as they were read, one line per row, through the
//! buffered output, so a long ledger piped into `head` ends quietly.

use super::open::{open, required_workspace};
use super::render::payload_line;
use super::{Failure, Out, Render};
use crate::cli::{LedgerArgs, OpsArgs, ShowArgs};
use crate::domain::sanitize::escape;
use crate::domain::{Effect, OpState, Operation};
use crate::workspace::OpDetail;
use std::path::PathBuf;

/// `recon ops`: one page of operations in op id order.
pub struct Ops {
    dir: PathBuf,
    state: Option<OpState>,
    after: Option<String>,
    limit: usize,
}

impl Ops {
    pub fn validate(args: OpsArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        Ok(Ops {
            dir: required_workspace(workspace)?,
            state: args.state.map(OpState::from),
            after: args.after,
            limit: args.limit.unwrap_or(usize::MAX),
        })
    }

    pub fn run(self) -> Result<OpsPage, Failure> {
        let ws = open(&self.dir, false)?;
        Ok(OpsPage(ws.ops(
            self.state,
            self.after.as_deref(),
            self.limit,
        )?))
    }
}

pub struct OpsPage(Vec<Operation>);

impl Render for OpsPage {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        for op in &self.0 {
            out.line(format!(
                "{:<24} {:<12} v{:<3} {:<12} {}",
                escape(&op.op_id),
                op.state,
                op.version,
                op.kind,
                escape(&op.action_kind)
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// `recon show`: one operation with its evidence and approvals.
pub struct Show {
    dir: PathBuf,
    op_id: String,
}

impl Show {
    pub fn validate(args: ShowArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        Ok(Show {
            dir: required_workspace(workspace)?,
            op_id: args.op_id,
        })
    }

    pub fn run(self) -> Result<Shown, Failure> {
        let ws = open(&self.dir, false)?;
        Ok(Shown(ws.show(&self.op_id)?))
    }
}

pub struct Shown(OpDetail);

impl Shown {
    fn operation_lines(&self, out: &mut Out) -> Result<(), Failure> {
        let op = &self.0.operation;
        out.line(format!(
            "{} ({} {}) {} at version {}",
            escape(&op.op_id),
            op.kind,
            escape(&op.action_kind),
            op.state,
            op.version
        ))?;
        out.line(format!("payload: {}", payload_line(&op.payload)))?;
        if let Some(effect) = &op.compensates_effect_id {
            out.line(format!("compensates: {}", escape(effect)))?;
        }
        if let Some(effect) = &op.confirmed_effect_id {
            out.line(format!("confirmed effect: {}", escape(effect)))?;
        }
        Ok(())
    }
}

impl Render for Shown {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        self.operation_lines(out)?;
        for e in &self.0.evidence {
            out.line(format!(
                "evidence #{}: {} by {} -> {} (verdict {}), v{} -> v{}",
                e.seq,
                e.source,
                escape(e.reviewer.as_deref().unwrap_or("the receiver")),
                e.decision,
                e.verdict.map_or("none", |v| v.as_str()),
                e.from_version,
                e.to_version
            ))?;
        }
        for a in &self.0.approvals {
            out.line(format!(
                "approval: {} compensates {} of {} (approved by {} at v{})",
                escape(&a.compensation_op_id),
                escape(&a.effect_id),
                escape(&a.original_op_id),
                escape(&a.approver),
                a.approved_version
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// `recon ledger`: the receiver's effects in write order.
pub struct Ledger {
    dir: PathBuf,
    op_id: Option<String>,
}

impl Ledger {
    pub fn validate(args: LedgerArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        Ok(Ledger {
            dir: required_workspace(workspace)?,
            op_id: args.op_id,
        })
    }

    pub fn run(self) -> Result<Effects, Failure> {
        let ws = open(&self.dir, false)?;
        Ok(Effects(ws.ledger(self.op_id.as_deref())?))
    }
}

pub struct Effects(Vec<Effect>);

impl Render for Effects {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        for e in &self.0 {
            let compensates = e
                .compensates_effect_id
                .as_deref()
                .map(|c| format!(" (compensates {})", escape(c)))
                .unwrap_or_default();
            out.line(format!(
                "{} {} {}{compensates} {}",
                escape(&e.effect_id),
                escape(&e.op_id),
                escape(&e.action_kind),
                payload_line(&e.payload)
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}
