//! `recon demo`: a demo workspace made through the real code paths, and
//! its summary as a table or as JSON.
//!
//! The building is `crate::demo`'s; this module only validates the
//! arguments, opens (creating) the workspace, and renders the summary, which
//! names the directory it was built in.

use super::open::{open, Place};
use super::{Failure, Out, Render};
use crate::cli::DemoArgs;
use crate::demo::{self, DemoSummary};
use crate::domain::sanitize::escape;
use std::path::PathBuf;

pub struct Demo {
    dir: PathBuf,
    ops: u64,
}

impl Demo {
    pub fn validate(args: DemoArgs, place: Place) -> Result<Self, Failure> {
        Ok(Demo {
            dir: place.required_directory("demo")?,
            ops: args.ops,
        })
    }

    pub fn run(self) -> Result<Built, Failure> {
        let mut ws = open(&self.dir.as_path().into(), true)?;
        demo::check_buildable(&ws).map_err(Failure::Usage)?;
        let summary = demo::build(&mut ws, self.ops)?;
        Ok(Built {
            dir: self.dir,
            summary,
        })
    }
}

pub struct Built {
    dir: PathBuf,
    summary: DemoSummary,
}

impl Render for Built {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let summary = &self.summary;
        out.line(format!(
            "demo workspace {}: added {} operations and {} receiver effects",
            escape(&self.dir.display().to_string()),
            summary.operations,
            summary.effects
        ))?;
        for op in &summary.showcase {
            out.line(format!(
                "  {:<28} {:<11} v{:<2} {:<27} {}",
                op.op_id,
                op.state.as_str(),
                op.version,
                op.verdict.as_str(),
                op.story
            ))?;
        }
        if let Some(generated) = &summary.generated {
            out.line(format!(
                "  generated {} .. {}: {} unknown operations, {} effects of theirs, \
                 {} background effects of other callers",
                generated.first_op_id,
                generated.last_op_id,
                generated.operations,
                generated.own_effects,
                generated.background_effects
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.summary)
    }
}
