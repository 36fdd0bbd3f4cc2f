//! Demo workspaces: a showcase in which every verdict of SPEC section 2 and
//! every operation state appears, and optionally many generated operations.
//!
//! The showcase is made only through the real code paths: real dispatches
//! with real receiver child processes and their faults, direct receiver
//! calls for the unsafe retries that bypass the sender's guard, real closing
//! snapshots with a named authorizer, real reviews and a real compensation
//! whose receipt is lost. Nothing is written behind the engine's back, so
//! the demo is also an end-to-end check: [`build`] reads every showcase op
//! back, classifies it, and fails if any story did not end as told. The
//! stories, one function each, are in `showcase`.
//!
//! The generated part (`--ops N`, see [`generate`]) is different on purpose:
//! it is load, not a story, so it goes in by bulk inserts in large
//! transactions (10,000 ops each), the two stores written in parallel.

pub mod generate;
mod showcase;

use crate::domain::{
    BulkEffect, BulkOperation, OpKind, OpState, Verdict, ANY_ACTION, BUILTIN_NAME,
};
use crate::error::{Result, StoreError};
use crate::workspace::{GeneratedLoad, Workspace};
use serde::Serialize;
use std::ops::RangeInclusive;

/// What one call of [`build`] added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemoSummary {
    /// Operations added to the outbox (showcase and generated).
    pub operations: u64,
    /// Effects added to the receiver ledger.
    pub effects: u64,
    /// The showcase ops as they stand now; empty when the workspace already
    /// had the showcase and only generated ops were added.
    pub showcase: Vec<ShowcaseOp>,
    pub generated: Option<Generated>,
}

/// One showcase operation: where it ended and the verdict an ordinary read
/// of its evidence gives now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShowcaseOp {
    pub op_id: String,
    pub kind: OpKind,
    pub action_kind: String,
    pub state: OpState,
    pub version: i64,
    pub verdict: Verdict,
    pub story: &'static str,
}

/// The generated operations one call added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generated {
    pub first_op_id: String,
    pub last_op_id: String,
    pub operations: u64,
    /// Ledger rows carrying a generated op's id.
    pub own_effects: u64,
    /// Ledger rows of other callers written around them.
    pub background_effects: u64,
}

/// Builds the showcase (unless the workspace has it already) and then adds
/// `extra_ops` generated operations, numbered after any generated before.
pub fn build(ws: &mut Workspace, extra_ops: u64) -> Result<DemoSummary> {
    let ops_before = total_ops(ws)?;
    let effects_before = ws.effect_count(None)?;
    let has_showcase = ws.operation(showcase::FIRST_OP)?.is_some();
    if let Err(why) = check_buildable(ws) {
        return Err(crate::error::StoreError::Corrupt(why).into());
    }
    // No receiver is implicit: the demo's ledger is registered like any
    // other, for every action kind, once.
    if !ws.receivers()?.iter().any(|r| r.name == BUILTIN_NAME) {
        ws.register_builtin(BUILTIN_NAME, &[ANY_ACTION.to_string()], true)?;
    }
    let showcase = if has_showcase {
        Vec::new()
    } else {
        showcase::build(ws)?
    };
    let generated = match extra_ops {
        0 => None,
        n => Some(add_generated(ws, n)?),
    };
    Ok(DemoSummary {
        operations: u64::try_from(total_ops(ws)? - ops_before).unwrap_or(0),
        effects: u64::try_from(ws.effect_count(None)? - effects_before).unwrap_or(0),
        showcase,
        generated,
    })
}

/// A demo is built only in a new workspace or added to a demo workspace:
/// in a workspace in use its stories would meet other operations and
/// effects (and be refused halfway, after some were written). Checked
/// before anything is written; `Err` says why, in words.
pub fn check_buildable(ws: &Workspace) -> Result<(), String> {
    let ops = total_ops(ws).map_err(|e| e.to_string())?;
    let effects = ws.effect_count(None).map_err(|e| e.to_string())?;
    let has_showcase = ws
        .operation(showcase::FIRST_OP)
        .map_err(|e| e.to_string())?
        .is_some();
    if has_showcase || (ops == 0 && effects == 0) {
        Ok(())
    } else {
        Err(format!(
            "{} is in use ({ops} operations, {effects} receiver effects) and is not a demo \
             workspace; recon demo builds in a new directory or adds to a demo workspace",
            ws.location()
        ))
    }
}

fn total_ops(ws: &Workspace) -> Result<i64> {
    Ok(ws.counts()?.values().sum())
}

/// Adds `n` generated operations after the last one already there.
fn add_generated(ws: &mut Workspace, n: u64) -> Result<Generated> {
    let last = ws.last_numbered_op(generate::IDS)?.unwrap_or(0);
    let first = last + 1;
    let end = first
        .checked_add(n - 1)
        .filter(|&end| end <= generate::IDS.max_number())
        .ok_or_else(|| {
            // Ten million generated ops in one workspace: the fixed-width
            // numbering is exhausted, which is a capacity limit of the store.
            StoreError::Io(std::io::Error::other(format!(
                "cannot add {n} generated operations after {}: numbering ends at {}",
                generate::op_id(last),
                generate::op_id(generate::IDS.max_number())
            )))
        })?;
    let own_effects: u64 = (first..=end)
        .map(|i| generate::Evidence::of(i).effects())
        .sum();
    let (operations, appended) = write_generated(ws, first, end)?;
    Ok(Generated {
        first_op_id: generate::op_id(first),
        last_op_id: generate::op_id(end),
        operations,
        own_effects,
        background_effects: appended.saturating_sub(own_effects),
    })
}

/// Generated operations per transaction: about 100,000 ledger rows, whose
/// dirty pages fit in the bulk page cache. One transaction for a whole
/// 100,000-op run would overflow it, and SQLite would then spill and
/// rewrite the same pages to the WAL over and over.
const CHUNK_OPS: u64 = 10_000;

/// Writes generated ops `first..=end` in chunks of [`CHUNK_OPS`].
/// Returns the operations and ledger rows written.
fn write_generated(ws: &mut Workspace, first: u64, end: u64) -> Result<(u64, u64)> {
    let load = Load::new(first, end, generate::Schedule::new(first, end, ws.now()));
    ws.append_generated(&load)
}

/// Generated ops `first..=end`, sent on `schedule`, written in chunks of
/// [`CHUNK_OPS`]: the demo's load, and the outage tests' and bench's.
pub struct Load {
    first: u64,
    end: u64,
    schedule: generate::Schedule,
}

impl Load {
    pub fn new(first: u64, end: u64, schedule: generate::Schedule) -> Load {
        Load {
            first,
            end,
            schedule,
        }
    }
}

impl GeneratedLoad for Load {
    fn chunks(&self) -> Vec<RangeInclusive<u64>> {
        (self.first..=self.end)
            .step_by(CHUNK_OPS as usize)
            .map(|start| start..=self.end.min(start + CHUNK_OPS - 1))
            .collect()
    }

    fn operation(&self, n: u64, first_effect_seq: i64) -> BulkOperation {
        generate::operation(n, &self.schedule, first_effect_seq)
    }

    fn effects(&self, n: u64) -> Box<dyn Iterator<Item = BulkEffect> + '_> {
        Box::new(generate::effects(n))
    }

    fn effect_count(&self, n: u64) -> u64 {
        generate::effect_count(n)
    }
}
