//! Carries out one parsed command line: validates it, calls the library,
//! prints the result, and returns the exit code.
//!
//! Human output escapes untrusted text for the terminal; `--json` prints one
//! JSON document whose field names are the contract of SPEC section 6.

use crate::audit::StoredRow;
use crate::cli::{
    identifier, person, read_payload, Cli, Command, ReceiverCommand, ScreenshotFormat, UsageError,
};
use crate::console;
use crate::demo::{self, DemoSummary};
use crate::dispatch::{DispatchOptions, ReceiverProgram};
use crate::domain::{CompensationRequest, OpState};
use crate::error::{Error, StoreError};
use crate::experiment;
use crate::receiver::{self, ApplyArgs};
use crate::sanitize::{escape, json_for_terminal};
use crate::settings::OpenOptions;
use crate::workspace::{EvidenceLog, ReconcileRequest, Workspace};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::{BufWriter, Stdout, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const EXIT_OK: i32 = 0;
pub const EXIT_MISMATCH: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_REFUSED: i32 = 3;
pub const EXIT_STORAGE: i32 = 4;

/// Why a command did not finish with exit 0.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Engine(Error),
    /// Standard output was closed by its reader; nothing more to say.
    ClosedPipe,
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Engine(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Engine(e.into())
    }
}

impl From<crate::Refusal> for Failure {
    fn from(e: crate::Refusal) -> Self {
        Failure::Engine(e.into())
    }
}

impl Failure {
    /// Prints the one-line message and returns the exit code.
    pub fn report(&self) -> i32 {
        match self {
            Failure::Usage(message) => {
                eprintln!("error: {}", escape(message));
                EXIT_USAGE
            }
            Failure::Engine(Error::Refused(refusal)) => {
                eprintln!(
                    "refused: {}: {}",
                    refusal.code(),
                    escape(&refusal.to_string())
                );
                EXIT_REFUSED
            }
            Failure::Engine(Error::Store(error)) => {
                eprintln!("error: {}", escape(&error.to_string()));
                EXIT_STORAGE
            }
            Failure::ClosedPipe => EXIT_OK,
        }
    }
}

type Outcome = Result<i32, Failure>;

/// The storage options from the environment: the busy timeout.
pub fn open_options() -> Result<OpenOptions, Failure> {
    let mut options = OpenOptions::default();
    if let Ok(text) = std::env::var("RECON_BUSY_TIMEOUT_MS") {
        let ms: u64 = text.trim().parse().map_err(|_| {
            Failure::Usage(format!(
                "RECON_BUSY_TIMEOUT_MS is not a number of milliseconds: {text}"
            ))
        })?;
        options.busy_timeout = Duration::from_millis(ms);
    }
    Ok(options)
}

fn workspace_dir(cli_workspace: &Option<PathBuf>) -> Result<&Path, Failure> {
    cli_workspace
        .as_deref()
        .ok_or_else(|| Failure::Usage("--workspace DIR is required for this command".into()))
}

fn open(dir: &Path, create: bool) -> Result<Workspace, Failure> {
    let mut options = open_options()?;
    options.create = create;
    Ok(Workspace::open(dir, options)?)
}

/// Standard output for one command, buffered so that a long ledger is a
/// few large writes rather than one per line. A reader that goes away
/// (`recon ledger | head`) ends the command quietly instead of as an error.
pub struct Out(BufWriter<Stdout>);

impl Default for Out {
    fn default() -> Self {
        Out(BufWriter::new(std::io::stdout()))
    }
}

impl Out {
    pub fn line(&mut self, line: impl AsRef<str>) -> Result<(), Failure> {
        writeln!(self.0, "{}", line.as_ref()).map_err(output_error)
    }

    /// Prints a value as one JSON document.
    pub fn json(&mut self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Failure::Engine(StoreError::Corrupt(e.to_string()).into()))?;
        self.line(json_for_terminal(text))
    }

    pub fn text(&mut self, text: &str) -> Result<(), Failure> {
        self.0.write_all(text.as_bytes()).map_err(output_error)
    }

    pub fn flush(&mut self) -> Result<(), Failure> {
        self.0.flush().map_err(output_error)
    }
}

fn output_error(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::ClosedPipe
    } else {
        Failure::Engine(StoreError::Io(e).into())
    }
}

fn payload_line(value: &Value) -> String {
    escape(&crate::domain::canonical_json(value)).into_owned()
}

pub fn run(cli: Cli) -> Outcome {
    let mut out = Out::default();
    let code = run_to(cli, &mut out)?;
    out.flush()?;
    Ok(code)
}

fn run_to(cli: Cli, out: &mut Out) -> Outcome {
    // --workspace may stand before or after the command; the console's and
    // --check's own flags make no sense with a command.
    if let Some(command) = &cli.command {
        if cli.check.is_some() || cli.output.is_some() {
            return Err(Failure::Usage(format!(
                "--check runs on its own, not with the {} command",
                command.name()
            )));
        }
        if cli.reviewer.is_some() {
            return Err(Failure::Usage(format!(
                "--reviewer before the command is the console's; \
                 the {} command does not take it there",
                command.name()
            )));
        }
    }
    if let Some(expected) = &cli.check {
        return check(expected.as_deref(), cli.output.as_deref(), out);
    }
    let Some(command) = cli.command else {
        return open_console(cli.workspace.as_deref(), cli.reviewer.as_deref());
    };
    let ws_arg = &cli.workspace;
    match command {
        Command::Experiment { output } => {
            let results = experiment::run(&ReceiverProgram::current()?)?;
            let text = experiment::to_text(&results);
            match output {
                Some(path) => write_file(&path, &text)?,
                None => out.text(&text)?,
            }
            Ok(EXIT_OK)
        }
        Command::Demo { ops, json } => {
            let dir = workspace_dir(ws_arg)?;
            let mut ws = open(dir, true)?;
            let summary = demo::build(&mut ws, ops)?;
            if json {
                out.json(&summary)?;
            } else {
                print_demo(out, dir, &summary)?;
            }
            Ok(EXIT_OK)
        }
        Command::Prepare {
            op_id,
            action_kind,
            payload,
            json,
        } => {
            let op_id = identifier("op id", &op_id)?;
            let action = identifier("action kind", &action_kind)?;
            let payload = read_payload(&payload)?;
            let mut ws = open(workspace_dir(ws_arg)?, true)?;
            let op = ws.prepare(op_id, action, &payload)?;
            if json {
                out.json(&op)?;
                return Ok(EXIT_OK);
            }
            out.line(format!(
                "prepared {} ({}) at version {}",
                escape(&op.op_id),
                escape(&op.action_kind),
                op.version
            ))?;
            Ok(EXIT_OK)
        }
        Command::Dispatch { op_id, fault, json } => {
            let op_id = identifier("op id", &op_id)?;
            let mut ws = open(workspace_dir(ws_arg)?, false)?;
            let report = ws.dispatch(
                op_id,
                DispatchOptions {
                    fault: fault.map(Into::into),
                    wait_permit: false,
                },
            )?;
            if json {
                out.json(&report)?;
            } else {
                match &report.effect_id {
                    Some(effect) => out.line(format!(
                        "{}: receipt for {}; now {} at version {}",
                        escape(&report.op_id),
                        escape(effect),
                        report.state,
                        report.version
                    ))?,
                    None => out.line(format!(
                        "{}: no receipt (receiver exit {}); now {} at version {}",
                        escape(&report.op_id),
                        report
                            .receiver_exit_code
                            .map_or("by signal".to_string(), |c| c.to_string()),
                        report.state,
                        report.version
                    ))?,
                }
            }
            Ok(EXIT_OK)
        }
        Command::Ops {
            state,
            limit,
            after,
            json,
        } => {
            let ws = open(workspace_dir(ws_arg)?, false)?;
            let ops = ws.ops(
                state.map(OpState::from),
                after.as_deref(),
                limit.unwrap_or(usize::MAX),
            )?;
            if json {
                out.json(&ops)?;
            } else {
                for op in &ops {
                    out.line(format!(
                        "{:<24} {:<12} v{:<3} {:<12} {}",
                        escape(&op.op_id),
                        op.state,
                        op.version,
                        op.kind,
                        escape(&op.action_kind)
                    ))?;
                }
            }
            Ok(EXIT_OK)
        }
        Command::Show { op_id, json } => {
            let ws = open(workspace_dir(ws_arg)?, false)?;
            let detail = ws.show(&op_id)?;
            if json {
                out.json(&detail)?;
                return Ok(EXIT_OK);
            }
            let op = &detail.operation;
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
            for e in &detail.evidence {
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
            for a in &detail.approvals {
                out.line(format!(
                    "approval: {} compensates {} of {} (approved by {} at v{})",
                    escape(&a.compensation_op_id),
                    escape(&a.effect_id),
                    escape(&a.original_op_id),
                    escape(&a.approver),
                    a.approved_version
                ))?;
            }
            Ok(EXIT_OK)
        }
        Command::Ledger { op_id, json } => {
            let ws = open(workspace_dir(ws_arg)?, false)?;
            let effects = ws.ledger(op_id.as_deref())?;
            if json {
                out.json(&effects)?;
            } else {
                for e in &effects {
                    out.line(format!(
                        "{} {} {}{} {}",
                        escape(&e.effect_id),
                        escape(&e.op_id),
                        escape(&e.action_kind),
                        e.compensates_effect_id
                            .as_deref()
                            .map(|c| format!(" (compensates {})", escape(c)))
                            .unwrap_or_default(),
                        payload_line(&e.payload)
                    ))?;
                }
            }
            Ok(EXIT_OK)
        }
        Command::Snapshot { op_id, close, json } => {
            let authorized_by = close
                .authorized_by
                .as_deref()
                .map(|n| person("--authorized-by", n))
                .transpose()?;
            let mut ws = open(workspace_dir(ws_arg)?, false)?;
            let classified = ws.snapshot(&op_id, authorized_by)?;
            if json {
                out.json(&classified)?;
            } else {
                let s = &classified.snapshot;
                out.line(format!(
                    "{}: {} (complete {}, authoritative {}, closed {}, {} matches)",
                    escape(&s.op_id),
                    classified.verdict,
                    s.complete,
                    s.authoritative,
                    s.closed,
                    s.matches.len()
                ))?;
                for m in &s.matches {
                    out.line(format!(
                        "  {} {} {}",
                        escape(&m.effect_id),
                        escape(&m.action_kind),
                        payload_line(&m.payload)
                    ))?;
                }
                out.line(format!("  {}", classified.verdict.explanation()))?;
            }
            Ok(EXIT_OK)
        }
        Command::Reconcile {
            op_id,
            reviewer,
            decision,
            expected_version,
            payload,
            close,
            json,
        } => {
            let reviewer = person("--reviewer", &reviewer)?;
            let authorized_by = close
                .authorized_by
                .as_deref()
                .map(|n| person("--authorized-by", n))
                .transpose()?;
            let payload = payload.as_deref().map(read_payload).transpose()?;
            let mut ws = open(workspace_dir(ws_arg)?, false)?;
            let recorded = ws.reconcile(&ReconcileRequest {
                op_id: &op_id,
                reviewer,
                decision: decision.into(),
                expected_version,
                payload: payload.as_ref(),
                close_authorized_by: authorized_by,
            })?;
            if json {
                out.json(&json!({
                    "op_id": recorded.operation.op_id,
                    "decision": crate::domain::Decision::from(decision),
                    "verdict": recorded.verdict,
                    "state": recorded.operation.state,
                    "version": recorded.operation.version,
                    "evidence_seq": recorded.evidence_seq,
                }))?;
            } else {
                out.line(format!(
                    "{}: recorded {} on {} (evidence #{}); now {} at version {}",
                    escape(&recorded.operation.op_id),
                    crate::domain::Decision::from(decision),
                    recorded.verdict,
                    recorded.evidence_seq,
                    recorded.operation.state,
                    recorded.operation.version
                ))?;
            }
            Ok(EXIT_OK)
        }
        Command::ApproveCompensation {
            op_id,
            effect,
            approver,
            expected_version,
            compensation_op,
            action_kind,
            payload,
            json,
        } => {
            let approver = person("--approver", &approver)?;
            let compensation_op = identifier("compensation op id", &compensation_op)?;
            let action = identifier("action kind", &action_kind)?;
            let payload = read_payload(&payload)?;
            let mut ws = open(workspace_dir(ws_arg)?, false)?;
            let approval = ws.approve_compensation(&CompensationRequest {
                original_op_id: &op_id,
                effect_id: &effect,
                approver,
                expected_version,
                compensation_op_id: compensation_op,
                action_kind: action,
                payload: &payload,
            })?;
            if json {
                out.json(&json!({
                    "original_op_id": approval.original_op_id,
                    "effect_id": approval.effect_id,
                    "approved_version": approval.approved_version,
                    "compensation_op_id": approval.compensation_op_id,
                    "approver": approval.approver,
                }))?;
            } else {
                out.line(format!(
                    "approved {} to compensate {} of {} (version {}); it is prepared",
                    escape(&approval.compensation_op_id),
                    escape(&approval.effect_id),
                    escape(&approval.original_op_id),
                    approval.approved_version
                ))?;
            }
            Ok(EXIT_OK)
        }
        Command::Screenshot {
            size,
            keys,
            format,
            reviewer,
        } => screenshot(
            workspace_dir(ws_arg)?,
            size,
            &keys,
            format,
            reviewer.as_deref(),
        ),
        Command::Verify { against, json } => verify(workspace_dir(ws_arg)?, against, json, out),
        Command::Export { output } => export(workspace_dir(ws_arg)?, output),
        Command::Receiver(ReceiverCommand::Apply {
            op_id,
            action_kind,
            payload,
            compensates,
            fault,
            wait_permit,
        }) => {
            let args = ApplyArgs {
                workspace: workspace_dir(ws_arg)?.to_path_buf(),
                op_id: identifier("op id", &op_id)?.to_string(),
                action_kind: identifier("action kind", &action_kind)?.to_string(),
                payload: read_payload(&payload)?,
                compensates_effect_id: compensates
                    .as_deref()
                    .map(|c| identifier("effect id", c).map(str::to_string))
                    .transpose()?,
                fault: fault.map(Into::into),
                wait_permit,
            };
            receiver::serve_apply(&args, open_options()?)?;
            Ok(EXIT_OK)
        }
        Command::Receiver(ReceiverCommand::Adapter { no_close, verb }) => {
            let args = receiver::AdapterArgs {
                workspace: workspace_dir(ws_arg)?.to_path_buf(),
                no_close,
                verb: receiver::protocol::Verb::parse(&verb)
                    .ok_or_else(|| UsageError(format!("unknown verb {verb}")))?,
            };
            Ok(receiver::serve_adapter(&args, open_options()?)?)
        }
    }
}

fn print_demo(out: &mut Out, dir: &Path, summary: &DemoSummary) -> Result<(), Failure> {
    out.line(format!(
        "demo workspace {}: added {} operations and {} receiver effects",
        escape(&dir.display().to_string()),
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

/// The console's options from the command line and the environment
/// (`NO_COLOR`, when set and not empty, turns colours off).
fn console_options(reviewer: Option<&str>) -> Result<console::Options, Failure> {
    let reviewer = match reviewer {
        Some(name) => {
            let name = person("--reviewer", name)?;
            Some(
                crate::domain::normalize_name(name)
                    .ok_or(crate::Refusal::EmptyReviewer)?
                    .to_string(),
            )
        }
        None => None,
    };
    Ok(console::Options {
        reviewer,
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
    })
}

/// `recon [--workspace DIR] [--reviewer NAME]`: the review console, on a
/// fresh temporary demo workspace when no workspace is given.
fn open_console(workspace: Option<&Path>, reviewer: Option<&str>) -> Outcome {
    use std::io::IsTerminal;
    // Checked before anything is opened or built: without a terminal the
    // console could only write escape sequences into a pipe or a file.
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(Failure::Usage(
            "the review console needs a terminal on standard input and output; \
             `recon screenshot` renders it without one, and the other commands script it"
                .to_string(),
        ));
    }
    let options = console_options(reviewer)?;
    let size = ratatui::crossterm::terminal::size().unwrap_or((120, 40));
    let mut app = match workspace {
        Some(dir) => {
            let source = console::Source {
                path: dir.to_path_buf(),
                temporary_demo: false,
            };
            console::App::open(open(dir, false)?, source, options, size)?
        }
        None => {
            let (ws, dir) = console::demo_workspace(open_options()?)?;
            let source = console::Source {
                path: dir.path().to_path_buf(),
                temporary_demo: true,
            };
            console::App::open(ws, source, options, size)?.keep_dir(dir)
        }
    };
    console::run(&mut app).map_err(|e| Failure::Engine(StoreError::Io(e).into()))?;
    Ok(EXIT_OK)
}

/// `recon screenshot`: the console rendered headless after a key sequence.
fn screenshot(
    dir: &Path,
    size: (u16, u16),
    keys: &str,
    format: ScreenshotFormat,
    reviewer: Option<&str>,
) -> Outcome {
    let keys = console::keys::parse_keys(keys).map_err(Failure::Usage)?;
    let options = console_options(reviewer)?;
    let source = console::Source {
        path: dir.to_path_buf(),
        temporary_demo: false,
    };
    let mut app = console::App::open(open(dir, false)?, source, options, size)?;
    console::run_headless(&mut app, &keys);
    let buffer = console::render(&app);
    let text = match format {
        ScreenshotFormat::Txt => console::screenshot::to_text(&buffer),
        ScreenshotFormat::Svg => console::screenshot::to_svg(&buffer),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .map_err(|e| Failure::Engine(StoreError::Io(e).into()))?;
    Ok(EXIT_OK)
}

fn write_file(path: &Path, text: &str) -> Result<(), Failure> {
    // Write beside the target and rename, so a failure leaves no half file.
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.flush())
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    tmp.persist(path)
        .map_err(|e| Failure::Usage(format!("cannot write {}: {}", path.display(), e.error)))?;
    Ok(())
}

/// Opens only the evidence log: verifying and exporting need nothing else,
/// and must work even when the receiver file is gone.
fn open_log(dir: &Path) -> Result<EvidenceLog, Failure> {
    Ok(EvidenceLog::open(dir, open_options()?)?)
}

/// `recon verify`: exit 0 intact, 1 broken.
fn verify(dir: &Path, against: Option<PathBuf>, json: bool, out: &mut Out) -> Outcome {
    let export = against
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(n, line)| {
                    StoredRow::from_export_line(line).map_err(|e| {
                        Failure::Usage(format!(
                            "{} line {} is not an exported evidence row: {e}",
                            path.display(),
                            n + 1
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let report = open_log(dir)?.verify(export.as_deref())?;
    if json {
        out.json(&report)?;
    } else if report.intact {
        out.line(format!(
            "evidence log intact: {} rows, head {}{}",
            report.rows,
            report.head_hash,
            report
                .export
                .as_ref()
                .map(|e| format!("; the exported copy's {} rows are a prefix of it", e.rows))
                .unwrap_or_default()
        ))?;
    } else {
        out.line(format!("evidence log BROKEN ({} rows)", report.rows))?;
        if let Some(broken) = &report.first_broken {
            out.line(format!(
                "  first broken link: row {} (seq {}): {}",
                broken.index, broken.seq, broken.reason
            ))?;
        }
        for mismatch in &report.state_mismatches {
            out.line(format!("  {}", escape(mismatch)))?;
        }
        if let Some(difference) = report
            .export
            .as_ref()
            .and_then(|e| e.first_difference.as_ref())
        {
            out.line(format!(
                "  exported copy: row {} (seq {}): {}",
                difference.index, difference.seq, difference.reason
            ))?;
        }
    }
    Ok(if report.intact {
        EXIT_OK
    } else {
        EXIT_MISMATCH
    })
}

/// `recon export`: every row as stored, one JSON line each; exit 1 after
/// writing when the log is broken, so an archiving script notices.
fn export(dir: &Path, output: Option<PathBuf>) -> Outcome {
    let (rows, report) = open_log(dir)?.export()?;
    let mut text = String::new();
    for row in &rows {
        text.push_str(&row.export_line());
        text.push('\n');
    }
    match output {
        Some(path) => write_file(&path, &text)?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(json_for_terminal(text).as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| Failure::Engine(StoreError::Io(e).into()))?;
        }
    }
    if report.intact {
        Ok(EXIT_OK)
    } else {
        eprintln!(
            "error: exported {} rows, but the evidence log is broken; run `recon verify`",
            rows.len()
        );
        Ok(EXIT_MISMATCH)
    }
}

/// `recon --check [EXPECTED] [--output PATH]`.
fn check(expected_path: Option<&Path>, output: Option<&Path>, out: &mut Out) -> Outcome {
    let (expected_text, source) = match expected_path {
        None => (
            experiment::EXPECTED_RESULTS.to_string(),
            "the compiled-in results.json".to_string(),
        ),
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?,
            path.display().to_string(),
        ),
    };
    let expected: Value = serde_json::from_str(&expected_text)
        .map_err(|e| Failure::Usage(format!("{source} is not JSON: {e}")))?;
    let program = ReceiverProgram::current()
        .map_err(|e| Failure::Usage(format!("cannot find the recon binary: {e}")))?;
    let actual = match experiment::run(&program) {
        Ok(actual) => actual,
        Err(e) => {
            // An experiment that cannot run is an I/O problem, exit 2.
            return Err(Failure::Usage(format!("the experiment could not run: {e}")));
        }
    };
    if let Some(path) = output {
        write_file(path, &experiment::to_text(&actual))?;
    }
    let differences = experiment::compare(&expected, &actual);
    if differences.is_empty() {
        let scenarios = actual["scenarios"].as_object().map_or(0, |s| s.len());
        out.line(format!(
            "check passed: {scenarios} scenarios, {} receiver child processes, results equal",
            actual["receiver_child_processes"]
        ))?;
        Ok(EXIT_OK)
    } else {
        for d in &differences {
            out.line(escape(&d.to_string()))?;
        }
        out.line(format!(
            "check FAILED: {} differing paths",
            differences.len()
        ))?;
        Ok(EXIT_MISMATCH)
    }
}
