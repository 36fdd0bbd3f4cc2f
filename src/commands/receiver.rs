//! The receiver side of one call on the built-in ledger: `recon receiver
//! apply` (the command-line form, as an unsafe retry calls it directly) and
//! `recon receiver adapter VERB` (the same ledger speaking
//! `recon-adapter/1`, as `dispatch` invokes it).
//!
//! Unlike the other commands, their output is a protocol, not a report: the
//! receipt or answer line (or, under a fault, a bare exit code 23 or 24) is
//! written by `crate::receiver` itself, so their results render as nothing
//! but an exit code. Their refusals and failures still go through the one
//! renderer.

use super::open::{open_options, Place};
use super::render::Render;
use super::render::Silent;
use super::Failure;
use super::Out;
use crate::cli::UsageError;
use crate::cli::{identifier, read_payload, ReceiverAdapterArgs, ReceiverApplyArgs};
use crate::receiver::protocol::Invocation;
use crate::receiver::{self, AdapterArgs, ApplyArgs};

pub struct Apply(ApplyArgs);

impl Apply {
    pub fn validate(args: ReceiverApplyArgs, place: Place) -> Result<Self, Failure> {
        let workspace = place.required_directory("receiver apply")?;
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

pub struct Adapter(AdapterArgs);

/// What the built-in adapter answered, as its diagnostic exit code.
pub struct Answered(i32);

impl Render for Answered {
    fn text(&self, _out: &mut Out) -> Result<(), Failure> {
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        self.0
    }
}

impl Adapter {
    pub fn validate(args: ReceiverAdapterArgs, place: Place) -> Result<Self, Failure> {
        let invocation = Invocation::parse(&args.verb)
            .ok_or_else(|| UsageError(format!("unknown verb {}", args.verb)))?;
        Ok(Adapter(AdapterArgs {
            workspace: place.required_directory("receiver adapter")?,
            no_close: args.no_close,
            invocation,
        }))
    }

    pub fn run(self) -> Result<Answered, Failure> {
        Ok(Answered(receiver::serve_adapter(&self.0, open_options()?)?))
    }
}
