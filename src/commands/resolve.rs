//! `recon resolve`: the provable cases decided by a named policy (SPEC 9).
//!
//! The flags are checked before anything is opened. Then the exact list is
//! made (the IDs, the filters' operations, or a plan read within its
//! bound) and, without a plan and unless it is a dry run, printed before
//! anything is closed: on stdout in text; under `--json` on stderr, one
//! JSON line per operation, so that stdout stays one JSON document. The
//! facade runs the policy; the result is counted as SPEC 9's JSON says.
//! A dry run with `--output` writes the plan as a new file, whole or not at
//! all, and refuses to replace one: a plan is what a person authorizes, so
//! it is never changed under them.

use super::open::{open, Place};
use super::output::{cannot_write, read_regular_bounded};
use super::person::Person;
use super::watch::{interrupted_line, shows_progress, TerminalWatch, EXIT_INTERRUPTED};
use super::{Failure, Out, Render, EXIT_OK};
use crate::cli::{identifier, receiver_name, EscalatedArg, ResolveArgs, StateFilterArg};
use crate::domain::resolve::{Planned, ResolvePlan, MAX_PLAN_BYTES};
use crate::domain::sanitize::{escape, json_for_terminal};
use crate::domain::{OpState, Policy, QueueFilter, VerdictFilter};
use crate::workspace::{Location, ResolveReport, ResolveRequest, Selection};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the list is made of.
enum Source {
    Ids(Vec<String>),
    Filter(OwnedFilter),
    Plan(PathBuf),
}

/// The `ops` filters, owned until the workspace is open.
struct OwnedFilter {
    state: Option<OpState>,
    verdict: Option<VerdictFilter>,
    escalated: Option<bool>,
    contradicted: Option<bool>,
    receiver: Option<String>,
}

pub struct Resolve {
    location: Location,
    source: Source,
    policy: Policy,
    by: Person,
    authorized_by: Person,
    /// `--older-than`, or the plan's once it is read.
    older_than: Option<Duration>,
    dry_run: bool,
    output: Option<PathBuf>,
    json: bool,
}

impl Resolve {
    pub fn validate(args: ResolveArgs, place: Place) -> Result<Self, Failure> {
        let policy = match args.policy.as_deref() {
            Some(text) => Policy::parse(text).ok_or_else(|| {
                Failure::Usage(format!(
                    "--policy {} is not a policy recon knows; the one policy is provable",
                    escape(text)
                ))
            })?,
            None => return Err(Failure::Usage("--policy provable is required".into())),
        };
        let by = Person::of("--by", args.by, &place)?;
        let authorized_by = Person::of("--authorized-by", args.authorized_by, &place)?;
        let filtered = args.state.is_some()
            || args.verdict.is_some()
            || args.escalated.is_some()
            || args.contradicted.is_some()
            || args.receiver.is_some();
        let source = match (args.plan, args.op_ids.is_empty(), filtered) {
            (Some(_), false, _) | (Some(_), _, true) => {
                return Err(Failure::Usage(
                    "--plan is the whole list: it takes no IDs and no filters".into(),
                ))
            }
            (Some(_), _, _) if args.dry_run => {
                return Err(Failure::Usage(
                    "--plan closes a list a dry run made; it takes no --dry-run".into(),
                ))
            }
            (Some(plan), true, false) => Source::Plan(plan),
            (None, false, true) => {
                return Err(Failure::Usage(
                    "give IDs or filters, not both: the IDs are the whole list".into(),
                ))
            }
            (None, false, false) => {
                for id in &args.op_ids {
                    identifier("op id", id)?;
                }
                Source::Ids(args.op_ids)
            }
            (None, true, _) => Source::Filter(OwnedFilter {
                state: args
                    .state
                    .map_or(Some(OpState::Unknown), StateFilterArg::state),
                verdict: args.verdict.map(|v| v.0),
                escalated: args.escalated.map(EscalatedArg::wanted),
                contradicted: args.contradicted.map(EscalatedArg::wanted),
                receiver: (args.receiver.as_deref())
                    .map(|name| receiver_name(name).map(str::to_string))
                    .transpose()?,
            }),
        };
        if let Some(path) = &args.output {
            refuse_existing(path)?;
        }
        Ok(Resolve {
            location: place.required()?,
            source,
            policy,
            by,
            authorized_by,
            older_than: args.older_than,
            dry_run: args.dry_run,
            output: args.output,
            json: args.json,
        })
    }

    pub fn run(mut self) -> Result<Resolution, Failure> {
        let mut ws = open(&self.location, false)?;
        let by = self.by.name(&ws)?;
        let authorized_by = self.authorized_by.name(&ws)?;
        let list = match &self.source {
            Source::Ids(ids) => ws.resolve_selection(Selection::Ids(ids))?,
            Source::Filter(f) => ws.resolve_selection(Selection::Filter(QueueFilter {
                state: f.state,
                verdict: f.verdict,
                escalated: f.escalated,
                contradicted: f.contradicted,
                receiver: f.receiver.as_deref(),
                ..QueueFilter::default()
            }))?,
            Source::Plan(path) => {
                let plan = read_plan(path, self.policy, ws.id())?;
                // Without --older-than of its own, a run keeps the limit its
                // dry run selected with: what it said it would close.
                let recorded = plan.older_than_ms.map(Duration::from_millis);
                self.older_than = self.older_than.or(recorded);
                plan.operations
            }
        };
        let planned = matches!(self.source, Source::Plan(_));
        if !planned && !self.dry_run {
            self.announce(&list, &authorized_by)?;
        }
        let request = ResolveRequest {
            policy: self.policy,
            by: &by,
            authorized_by: &authorized_by,
            older_than: self.older_than(),
            dry_run: self.dry_run,
            planned,
        };
        let mut watch = TerminalWatch::install(shows_progress(self.json), "resolved");
        let report = ws.resolve_watched(&list, &request, &mut watch);
        watch.clear();
        let report = report?;
        // A stopped dry run read only part of the list: its plan would
        // look whole, so none is written.
        let older_than = self.older_than();
        let output = self.output.filter(|_| report.interrupted.is_none());
        if let Some(path) = &output {
            let plan = ResolvePlan {
                policy: self.policy,
                workspace: ws.id().to_string(),
                older_than_ms: Some(u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX)),
                operations: would_close(&list, &report),
            };
            write_new_file(path, &format!("{}\n", plan.to_json()))?;
        }
        Ok(Resolution {
            report,
            dry_run: self.dry_run,
            plan: output,
        })
    }

    /// The age limit: `--older-than`, else a plan's, else the default.
    fn older_than(&self) -> Duration {
        self.older_than.unwrap_or(DEFAULT_OLDER_THAN)
    }

    /// The list about to be closed, before anything is: on stdout in
    /// text, on stderr (one JSON line each) under `--json`.
    fn announce(&self, list: &[Planned], authorized_by: &str) -> Result<(), Failure> {
        if self.json {
            let mut err = std::io::stderr().lock();
            for op in list {
                let line = serde_json::to_string(op).unwrap_or_default();
                writeln!(err, "{}", json_for_terminal(line)).map_err(Failure::io)?;
            }
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "resolving {} listed operation{}, authorized by {}:",
            list.len(),
            if list.len() == 1 { "" } else { "s" },
            escape(authorized_by)
        )
        .map_err(Failure::io)?;
        for op in list {
            writeln!(
                out,
                "  {} version {} at {}",
                escape(&op.op_id),
                op.version,
                escape(&op.receiver)
            )
            .map_err(Failure::io)?;
        }
        out.flush().map_err(Failure::io)
    }
}

/// The operations of the list a dry run found the policy would decide.
fn would_close(list: &[Planned], report: &ResolveReport) -> Vec<Planned> {
    let decided: std::collections::BTreeSet<&str> = (report.operations.iter())
        .filter(|r| r.outcome == "confirmed" || r.outcome == "not_applied")
        .map(|r| r.op_id.as_str())
        .collect();
    (list.iter())
        .filter(|op| decided.contains(op.op_id.as_str()))
        .cloned()
        .collect()
}

/// Reads a plan within its bound; one for another policy or another
/// workspace is a usage error.
fn read_plan(path: &Path, policy: Policy, workspace: &str) -> Result<ResolvePlan, Failure> {
    let text = read_regular_bounded(path, MAX_PLAN_BYTES as u64)?;
    let shown = escape(&path.display().to_string()).into_owned();
    let plan = ResolvePlan::parse(text.as_bytes())
        .map_err(|why| Failure::Usage(format!("--plan {shown}: {}", escape(&why))))?;
    if plan.policy != policy {
        return Err(Failure::Usage(format!(
            "--plan {shown} was made for policy {}, not {policy}",
            plan.policy
        )));
    }
    if plan.workspace != workspace {
        return Err(Failure::Usage(format!(
            "--plan {shown} was made for another workspace ({})",
            escape(&plan.workspace)
        )));
    }
    Ok(plan)
}

/// The age limit of a resolve that names none, and of a plan made before
/// plans recorded theirs.
const DEFAULT_OLDER_THAN: Duration = Duration::from_secs(15 * 60);

/// A plan never replaces a file: a usage error before anything is read.
fn refuse_existing(path: &Path) -> Result<(), Failure> {
    if path.symlink_metadata().is_ok() {
        return Err(Failure::Usage(format!(
            "--output {} exists; a plan is written as a new file only",
            escape(&path.display().to_string())
        )));
    }
    Ok(())
}

/// Writes a new file whole (beside its target, then linked into place
/// only if no file took the name meanwhile).
fn write_new_file(path: &Path, text: &str) -> Result<(), Failure> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| cannot_write(path, &e))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| cannot_write(path, &e))?;
    tmp.persist_noclobber(path)
        .map_err(|e| cannot_write(path, &e.error))?;
    Ok(())
}

/// What a run did, counted (SPEC 9's JSON), and whether it was dry.
pub struct Resolution {
    report: ResolveReport,
    dry_run: bool,
    plan: Option<PathBuf>,
}

impl Resolution {
    fn counts(map: &std::collections::BTreeMap<String, u64>) -> String {
        let parts: Vec<String> = map.iter().map(|(k, n)| format!("{k} {n}")).collect();
        match parts.is_empty() {
            true => "none".into(),
            false => parts.join(", "),
        }
    }

    /// Each failure on stderr, then, when Ctrl-C stopped the run, what it
    /// did not do.
    fn failures(&self, out: &mut Out) {
        for (op_id, error) in &self.report.failures {
            out.stderr_line(&format!(
                "error: {} was not resolved: {}",
                escape(op_id),
                escape(&error.to_string())
            ));
        }
        if let Some(stop) = self.report.interrupted {
            out.stderr_line(&interrupted_line("resolve", stop.not_attempted));
        }
    }
}

impl Render for Resolution {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let r = &self.report;
        for op in &r.operations {
            let verdict = op.verdict.map(|v| format!(" ({v})")).unwrap_or_default();
            out.line(format!("{}: {}{verdict}", escape(&op.op_id), op.outcome))?;
        }
        let would = if self.dry_run { "would be " } else { "" };
        out.line(format!(
            "{would}confirmed {}, {would}not_applied {}; left for people: {}; skipped: {}; \
             failed {}",
            r.confirmed,
            r.not_applied,
            Self::counts(&r.left),
            Self::counts(&r.skipped),
            r.failed
        ))?;
        if self.dry_run {
            out.line("dry run: nothing was closed or recorded")?;
        }
        if let Some(plan) = &self.plan {
            out.line(format!(
                "plan written to {}",
                escape(&plan.display().to_string())
            ))?;
        }
        out.flush()?;
        self.failures(out);
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.report)?;
        out.flush()?;
        self.failures(out);
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        match self.report.interrupted {
            Some(_) => EXIT_INTERRUPTED,
            None => EXIT_OK,
        }
    }
}
