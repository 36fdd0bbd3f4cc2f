//! The flags of triage: `observe`, `note`, `escalate`, `deescalate`, and
//! the value types `ops` filters with. A duration, a verdict or a yes/no
//! that does not parse is clap's usage error (exit 2), before anything is
//! opened.

use super::StateArg;
use crate::domain::time::parse_span;
use crate::domain::{SortOrder, Verdict, VerdictFilter};
use clap::{Args, ValueEnum};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ObserveArgs {
    /// The operations to observe; without any, those --state selects.
    /// An id that begins with `-` goes after `--`.
    //
    // Not `allow_hyphen_values`: on a list it would swallow every flag
    // after the first id (`observe ID --by NAME` would read `--by` as an
    // id).
    #[arg(value_name = "ID")]
    pub op_ids: Vec<String>,
    /// Only operations in this state [default without an ID: unknown].
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only operations whose latest observation is older than DURATION
    /// (90s, 15m, 2h, 3d), or that were never observed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Who is looking; recorded with each observation (default in team
    /// mode: the database login; required on a workspace directory).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Print an array of {op_id, receiver, verdict, observed_at,
    /// observed_by, complete, authoritative, closed, matches} as JSON; each
    /// operation not read is a JSON line on stderr: {op_id, receiver,
    /// error: {exit, kind, code, message}}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct NoteArgs {
    /// The op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    /// Who leaves the note (default in team mode: the database login;
    /// required on a workspace directory).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// The note: at most 4096 bytes, with a visible character.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub text: String,
    /// Print the note {seq, by, at, text} as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `escalate` and `deescalate`.
#[derive(Debug, Args)]
pub struct MarkArgs {
    /// The op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    /// Who raises or lowers the marker (default in team mode: the
    /// database login; required on a workspace directory).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Why: at most 4096 bytes, with a visible character.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub reason: String,
    /// Print the operation as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--verdict`: one of the seven verdicts, or `never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictArg(pub VerdictFilter);

pub fn parse_verdict_filter(text: &str) -> Result<VerdictArg, String> {
    if text == "never" {
        return Ok(VerdictArg(VerdictFilter::Never));
    }
    Verdict::parse(text)
        .map(|v| VerdictArg(VerdictFilter::Is(v)))
        .ok_or_else(|| {
            let names: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
            format!("expected one of {}, or never", names.join(", "))
        })
}

/// `--older-than`: a whole number and s, m, h or d.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_span(text)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EscalatedArg {
    Yes,
    No,
}

impl EscalatedArg {
    pub fn wanted(self) -> bool {
        self == EscalatedArg::Yes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortArg {
    #[value(name = "op_id", alias = "op-id")]
    OpId,
    Age,
}

impl From<SortArg> for SortOrder {
    fn from(arg: SortArg) -> SortOrder {
        match arg {
            SortArg::OpId => SortOrder::OpId,
            SortArg::Age => SortOrder::Age,
        }
    }
}
