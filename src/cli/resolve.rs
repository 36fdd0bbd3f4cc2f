//! The flags of `recon resolve` (SPEC 9, "Resolution by policy"). What
//! they may be together (IDs, the `ops` filters or a plan; `--output`
//! only with `--dry-run`) is checked by the command's `validate`, so each
//! mistake is one usage error (exit 2, a JSON error under `--json`).

use super::triage::{parse_duration, parse_verdict_filter, EscalatedArg, VerdictArg};
use super::StateFilterArg;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The operations to resolve; without any (and without --plan), those
    /// the filters select. An id that begins with `-` goes after `--`.
    #[arg(value_name = "ID")]
    pub op_ids: Vec<String>,
    /// Only operations in this state [default: unknown].
    #[arg(long, value_enum)]
    pub state: Option<StateFilterArg>,
    /// Only operations whose latest observation has this verdict, or
    /// `never`.
    #[arg(long, value_name = "V|never", value_parser = parse_verdict_filter)]
    pub verdict: Option<VerdictArg>,
    /// Only escalated operations (yes), or only the others (no); an
    /// escalated one is skipped all the same.
    #[arg(long, value_enum, value_name = "yes|no")]
    pub escalated: Option<EscalatedArg>,
    /// Only contradicted operations (yes), or only the others (no).
    #[arg(long, value_enum, value_name = "yes|no")]
    pub contradicted: Option<EscalatedArg>,
    /// Only operations routed to the receiver NAME.
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    pub receiver: Option<String>,
    /// Close exactly the operations of PLAN (written by --dry-run
    /// --output) that are still at their planned version.
    #[arg(long, value_name = "PLAN")]
    pub plan: Option<PathBuf>,
    /// The policy: `provable`, the only one (unique_exact_match under a
    /// closing snapshot is confirmed, terminal_absence not_applied).
    #[arg(long, value_name = "POLICY", allow_hyphen_values = true)]
    pub policy: Option<String>,
    /// Who records the decisions (each evidence row's reviewer; default
    /// in team mode: the database login).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Who authorized closing the listed operations at their receivers
    /// (default in team mode: the database login).
    #[arg(long, value_name = "NAME")]
    pub authorized_by: Option<String>,
    /// Skip operations whose updated_at is more recent than DURATION (90s,
    /// 15m, 2h, 3d; default 15m). A dry run's plan records it, and a run
    /// with --plan keeps the plan's (so it takes no --older-than).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Read only (a plain read, no close, nothing recorded) and report
    /// what a run would do.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: also write the plan (the policy, and each operation
    /// a run would close with its version and receiver) to PLAN, a new
    /// file (an existing one is refused), written whole or not at all.
    #[arg(long, value_name = "PLAN", requires = "dry_run")]
    pub output: Option<PathBuf>,
    /// Print {confirmed, not_applied, left: {VERDICT: N}, skipped: {REASON:
    /// N}, failed, operations: [{op_id, outcome, verdict}]} as JSON; the
    /// list to be closed goes to stderr first, one JSON line per operation.
    #[arg(long)]
    pub json: bool,
}
