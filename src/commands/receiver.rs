//! `recon receiver apply`: the receiver side of one call, as `dispatch`
//! spawns it and as an unsafe retry calls it directly.
//!
//! Unlike the other commands, its output is a protocol, not a report: the
//! receipt line (or, under a fault, a bare exit code 23 or 24) is written
//! by `crate::receiver::serve_apply` itself, so its result renders as
//! nothing. Its refusals and failures still go through the one renderer.

use super::open::{open_options, required_workspace};
use super::render::Silent;
use super::Failure;
use crate::cli::{identifier, read_payload, ReceiverApplyArgs};
use crate::receiver::{self, ApplyArgs};
use std::path::PathBuf;

pub struct Apply(ApplyArgs);

impl Apply {
    pub fn validate(args: ReceiverApplyArgs, workspace: Option<PathBuf>) -> Result<Self, Failure> {
        let workspace = required_workspace(workspace)?;
        identifier("op id", &args.op_id)?;
        identifier("action kind", &args.action_kind)?;
        let payload = read_payload(&args.payload)?;
        if let Some(effect) = &args.compensates {
            identifier("effect id", effect)?;
        }
        Ok(Apply(ApplyArgs {
            workspace,
            op_id: args.op_id,
            action_kind: args.action_kind,
            payload,
            compensates_effect_id: args.compensates,
            fault: args.fault.map(Into::into),
            wait_permit: args.wait_permit,
        }))
    }

    pub fn run(self) -> Result<Silent, Failure> {
        receiver::serve_apply(&self.0, open_options()?)?;
        Ok(Silent)
    }
}
