//! Carries out one parsed command line: commands as data.
//!
//! A command goes through three steps, each a value handed to the next.
//! `Request::from_cli` validates clap's [`Cli`] into one typed request
//! (checks in the order they have always run, all before any database is
//! opened); `Request::execute` makes the library calls (the `Workspace`
//! facade, never a store) and returns a typed result; and
//! `render::finish` prints that result as text or `--json`, or prints the
//! [`Failure`], and returns the exit code. One module per command family
//! holds its arguments, its results and their rendering:
//!
//! - `flow`: `prepare`, `dispatch`, `snapshot`, `reconcile`,
//!   `approve-compensation`;
//! - `reads`: `ops`, `show`, `ledger`;
//! - `triage`: `observe`, `note`, `escalate`, `deescalate`;
//! - `audit`: `verify`, `export`, `checkpoint`;
//! - `experiment`: `experiment`, `--check`;
//! - `demo`; `receiver`: `receiver apply` and `receiver adapter`;
//! - `receivers`: `receivers add`, `list`, `check`, `remove`;
//! - `batch`: `prepare --batch FILE`, many operations from JSON lines;
//! - `db`: `db init`, the PostgreSQL outbox's schema, and `db status`;
//! - `metrics`: the Prometheus text exposition of SPEC 15;
//! - `console`: the review console and `screenshot`.
//!
//! The plumbing they share: `log` (`RECON_LOG`, where the log of acts
//! goes), `failure` (exit codes), `output` (stdout,
//! stderr, files), `open` (where the stores are: `--workspace`,
//! `--database` or `RECON_DATABASE_URL`; and the environment), `render`
//! (the `Render` trait and `finish`, the one place that prints results
//! and failures). [`parse`] is here too, because the help it prints joins
//! `cli` and the console, which do not import each other.

mod audit;
mod batch;
mod console;
mod db;
mod demo;
mod experiment;
mod failure;
mod flow;
mod interrupt;
mod log;
mod mcp;
mod metrics;
mod open;
mod output;
mod person;
mod reads;
mod receiver;
mod receivers;
mod render;
mod resolve;
mod triage;
mod watch;

pub use failure::{Failure, EXIT_MISMATCH, EXIT_OK, EXIT_REFUSED, EXIT_STORAGE, EXIT_USAGE};

use output::Out;
use render::{Format, Render};

use crate::cli::{Cli, Command, DbCommand, ReceiverCommand, ReceiversCommand};
use crate::domain::EscalationAction;
use clap::{CommandFactory, FromArgMatches};

/// Parses the process's arguments as `Cli::parse` does (help, version and
/// clap's usage errors exit here), with two additions: each command's
/// `--help` ends with the exit codes that command can return
/// ([`crate::cli::exit_codes_of`]), and `recon screenshot --help` with the
/// console's key syntax, attached here because `cli` and the console do
/// not import each other.
pub fn parse() -> Cli {
    let mut command = with_exit_codes(Cli::command()).mut_subcommand("screenshot", |screenshot| {
        screenshot.after_help(crate::console::keys::KEY_SYNTAX)
    });
    let parsed = command
        .clone()
        .try_get_matches()
        .and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches));
    parsed.unwrap_or_else(|e| {
        let e = e.format(&mut command);
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let hint = usage_hint(&e, &args);
        if e.use_stderr() && args.iter().any(|a| a == "--json") {
            std::process::exit(usage_error_as_json(&e, hint));
        }
        if e.use_stderr() {
            // Clap quotes the value it refused as given: escaped here, as
            // every untrusted text is before it reaches a terminal.
            let mut text = e.render().to_string();
            if let Some(hint) = hint {
                let end = text.find('\n').unwrap_or(text.len());
                text.insert_str(end, &format!("\n  tip: {hint}"));
            }
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("{}", crate::domain::sanitize::escape_with(&text, true)),
            );
            std::process::exit(e.exit_code());
        }
        e.exit()
    })
}

/// A hint for a slip clap cannot name: the program of `receivers add`
/// written without the `--` before it, which clap reports only as an
/// unexpected argument.
fn usage_hint(e: &clap::Error, args: &[std::ffi::OsString]) -> Option<&'static str> {
    let words = args.get(1..).unwrap_or_default();
    let adding = words
        .windows(2)
        .any(|w| w[0] == "receivers" && w[1] == "add");
    let separated = words.iter().any(|w| w == "--");
    (e.kind() == clap::error::ErrorKind::UnknownArgument && adding && !separated).then_some(
        "the program and its arguments go after `--`: recon receivers add NAME --actions \
         KIND -- PROGRAM [ARG...]",
    )
}

/// Each command with its own exit codes in its help, nested commands
/// included.
pub fn with_exit_codes(mut command: clap::Command) -> clap::Command {
    for path in crate::cli::COMMAND_PATHS {
        let Some(text) = crate::cli::exit_codes_of(path) else {
            continue;
        };
        command = match path {
            [name] => command.mut_subcommand(*name, |c| c.after_help(text)),
            [group, name] => {
                command.mut_subcommand(*group, |g| g.mut_subcommand(*name, |c| c.after_help(text)))
            }
            _ => command,
        };
    }
    for group in ["receiver", "receivers", "db"] {
        command = command.mut_subcommand(group, |g| {
            g.after_help("Each command's --help lists the exit codes it can return.")
        });
    }
    command
}

/// A usage error found by clap, under `--json`: as every failure under
/// `--json` (SPEC 6), one JSON error document on stdout and one line on
/// stderr, rather than clap's message of several lines. Returns the exit
/// code (2).
fn usage_error_as_json(e: &clap::Error, hint: Option<&str>) -> i32 {
    let mut message = clap_message(&e.render().to_string());
    if let Some(hint) = hint {
        message = format!("{message}; {hint}");
    }
    let failure = Failure::Usage(message);
    render::finish(Err(failure), Format::Json, Out::default())
}

/// Clap's message in one line: its lines up to the usage and the pointer
/// to `--help`, without tips, joined (`the following required arguments
/// were not provided: --by <NAME>`).
fn clap_message(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    lines.join(" ").trim_start_matches("error: ").to_string()
}

/// Runs one command line and returns the process's exit code; everything
/// it prints, results and failures alike, goes through `render::finish`.
pub fn run(cli: Cli) -> i32 {
    let format = Format::of(&cli);
    let result = Request::from_cli(cli).and_then(|request| {
        log::configure(matches!(request, Request::Console(_)))?;
        request.execute()
    });
    render::finish(result, format, Out::default())
}

/// One command line, validated: what to do, with typed arguments.
enum Request {
    Console(console::Console),
    Check(experiment::Check),
    Experiment(experiment::Experiment),
    Demo(demo::Demo),
    Prepare(flow::Prepare),
    Dispatch(flow::Dispatch),
    Ops(reads::Ops),
    Show(reads::Show),
    Ledger(reads::Ledger),
    Snapshot(flow::Snapshot),
    Reconcile(flow::Reconcile),
    ApproveCompensation(flow::ApproveCompensation),
    Observe(triage::Observe),
    Resolve(resolve::Resolve),
    Note(triage::Note),
    Mark(triage::Mark),
    Screenshot(console::Screenshot),
    Verify(audit::Verify),
    VerifyReceivers(audit::VerifyReceivers),
    Export(audit::Export),
    Checkpoint(audit::Checkpoint),
    ReceiverApply(receiver::Apply),
    ReceiverAdapter(receiver::Adapter),
    ReceiversAdd(receivers::Add),
    ReceiversList(receivers::List),
    ReceiversCheck(receivers::Check),
    ReceiversUpdate(receivers::Update),
    ReceiversRemove(receivers::Remove),
    DbInit(db::Init),
    Metrics(metrics::Metrics),
    DbStatus(db::Status),
    DbGrant(db::Grant),
    PrepareBatch(batch::PrepareBatch),
    Mcp(mcp::Mcp),
    GatewayAdapter(mcp::GatewayAdapter),
    DbUpgrade(db::Upgrade),
}

impl Request {
    /// Validates a command line: the flags that belong to no command
    /// first, then the command's own arguments.
    fn from_cli(cli: Cli) -> Result<Request, Failure> {
        reject_stray_flags(&cli)?;
        if let Some(expected) = cli.check {
            return Ok(Request::Check(experiment::Check::validate(
                expected.as_deref(),
                cli.output,
            )?));
        }
        let place = open::Place {
            workspace: cli.workspace,
            database: cli.database,
        };
        let Some(command) = cli.command else {
            return console_request(place, cli.reviewer, cli.frozen_clock, cli.theme);
        };
        let ws = place;
        Ok(match command {
            Command::Experiment(args) => {
                ws.directory_only("experiment")?;
                Request::Experiment(experiment::Experiment::validate(args))
            }
            Command::Demo(args) => Request::Demo(demo::Demo::validate(args, ws)?),
            Command::Prepare(args) if args.batch.is_some() => {
                Request::PrepareBatch(batch::PrepareBatch::validate(args, ws)?)
            }
            Command::Prepare(args) => Request::Prepare(flow::Prepare::validate(args, ws)?),
            Command::Dispatch(args) => Request::Dispatch(flow::Dispatch::validate(args, ws)?),
            Command::Ops(args) => Request::Ops(reads::Ops::validate(args, ws)?),
            Command::Show(args) => Request::Show(reads::Show::validate(args, ws)?),
            Command::Ledger(args) => Request::Ledger(reads::Ledger::validate(args, ws)?),
            Command::Snapshot(args) => Request::Snapshot(flow::Snapshot::validate(args, ws)?),
            Command::Reconcile(args) => Request::Reconcile(flow::Reconcile::validate(args, ws)?),
            Command::ApproveCompensation(args) => {
                Request::ApproveCompensation(flow::ApproveCompensation::validate(args, ws)?)
            }
            Command::Observe(args) => Request::Observe(triage::Observe::validate(args, ws)?),
            Command::Resolve(args) => Request::Resolve(resolve::Resolve::validate(args, ws)?),
            Command::Note(args) => Request::Note(triage::Note::validate(args, ws)?),
            Command::Escalate(args) => Request::Mark(triage::Mark::validate(
                args,
                triage::MarkAct::Escalation(EscalationAction::Escalate),
                ws,
            )?),
            Command::Deescalate(args) => Request::Mark(triage::Mark::validate(
                args,
                triage::MarkAct::Escalation(EscalationAction::Deescalate),
                ws,
            )?),
            Command::Acknowledge(args) => Request::Mark(triage::Mark::validate(
                args,
                triage::MarkAct::Acknowledge,
                ws,
            )?),
            Command::Screenshot(args) => {
                Request::Screenshot(console::Screenshot::validate(args, ws)?)
            }
            Command::Verify(args) => Self::verify(args, ws)?,
            Command::Export(args) => Request::Export(audit::Export::validate(args, ws)?),
            Command::Checkpoint(args) => {
                Request::Checkpoint(audit::Checkpoint::validate(args, ws)?)
            }
            Command::Receiver(command) => Self::receiver(command, ws)?,
            Command::Receivers(command) => Self::receivers(command, ws)?,
            Command::Db(command) => Self::db(command, ws)?,
            // `recon console` is the bare `recon`, its flags after the word.
            Command::Console(args) => {
                console_request(ws, args.reviewer, args.frozen_clock, args.theme)?
            }
            Command::Metrics(args) => Request::Metrics(metrics::Metrics::validate(args, ws)?),
            Command::Mcp(args) => Request::Mcp(mcp::Mcp::validate(args, ws)?),
            Command::GatewayAdapter(args) => {
                Request::GatewayAdapter(mcp::GatewayAdapter::validate(args, ws)?)
            }
        })
    }

    /// `recon verify`: the journal, or with `--receivers` the receivers.
    fn verify(args: crate::cli::VerifyArgs, ws: open::Place) -> Result<Request, Failure> {
        Ok(match args.receivers {
            true => Request::VerifyReceivers(audit::VerifyReceivers::validate(args, ws)?),
            false => Request::Verify(audit::Verify::validate(args, ws)?),
        })
    }

    /// `recon receiver`: the built-in ledger's own side of a call.
    fn receiver(command: ReceiverCommand, ws: open::Place) -> Result<Request, Failure> {
        Ok(match command {
            ReceiverCommand::Adapter(args) => {
                Request::ReceiverAdapter(receiver::Adapter::validate(args, ws)?)
            }
            ReceiverCommand::Apply(args) => {
                Request::ReceiverApply(receiver::Apply::validate(args, ws)?)
            }
        })
    }

    /// `recon db`: the PostgreSQL outbox's own commands.
    fn db(command: DbCommand, ws: open::Place) -> Result<Request, Failure> {
        Ok(match command {
            DbCommand::Init(args) => Request::DbInit(db::Init::validate(args, ws)?),
            DbCommand::Status(args) => Request::DbStatus(db::Status::validate(args, ws)?),
            DbCommand::Grant(args) => Request::DbGrant(db::Grant::validate(args, true, ws)?),
            DbCommand::Revoke(args) => Request::DbGrant(db::Grant::validate(args, false, ws)?),
            DbCommand::Upgrade(args) => Request::DbUpgrade(db::Upgrade::validate(args, ws)?),
        })
    }

    fn receivers(command: ReceiversCommand, ws: open::Place) -> Result<Request, Failure> {
        Ok(match command {
            ReceiversCommand::Add(args) => {
                Request::ReceiversAdd(receivers::Add::validate(args, ws)?)
            }
            ReceiversCommand::Update(args) => {
                Request::ReceiversUpdate(receivers::Update::validate(args, ws)?)
            }
            ReceiversCommand::List(args) => {
                Request::ReceiversList(receivers::List::validate(args, ws)?)
            }
            ReceiversCommand::Check(args) => {
                Request::ReceiversCheck(receivers::Check::validate(args, ws)?)
            }
            ReceiversCommand::Remove(args) => {
                Request::ReceiversRemove(receivers::Remove::validate(args, ws)?)
            }
        })
    }

    /// Carries the request out and returns its result, ready to render.
    fn execute(self) -> Result<Box<dyn Render>, Failure> {
        Ok(match self {
            Request::Console(request) => Box::new(request.run()?),
            Request::Check(request) => Box::new(request.run()?),
            Request::Experiment(request) => Box::new(request.run()?),
            Request::Demo(request) => Box::new(request.run()?),
            Request::Prepare(request) => Box::new(request.run()?),
            Request::Dispatch(request) => Box::new(request.run()?),
            Request::Ops(request) => Box::new(request.run()?),
            Request::Show(request) => Box::new(request.run()?),
            Request::Ledger(request) => Box::new(request.run()?),
            Request::Snapshot(request) => Box::new(request.run()?),
            Request::Reconcile(request) => Box::new(request.run()?),
            Request::ApproveCompensation(request) => Box::new(request.run()?),
            Request::Observe(request) => Box::new(request.run()?),
            Request::Resolve(request) => Box::new(request.run()?),
            Request::Note(request) => Box::new(request.run()?),
            Request::Mark(request) => Box::new(request.run()?),
            Request::Screenshot(request) => Box::new(request.run()?),
            Request::Verify(request) => Box::new(request.run()?),
            Request::VerifyReceivers(request) => Box::new(request.run()?),
            Request::Export(request) => Box::new(request.run()?),
            Request::Checkpoint(request) => Box::new(request.run()?),
            Request::ReceiverApply(request) => Box::new(request.run()?),
            Request::ReceiverAdapter(request) => Box::new(request.run()?),
            Request::ReceiversAdd(request) => Box::new(request.run()?),
            Request::ReceiversList(request) => Box::new(request.run()?),
            Request::ReceiversCheck(request) => Box::new(request.run()?),
            Request::ReceiversUpdate(request) => Box::new(request.run()?),
            Request::ReceiversRemove(request) => Box::new(request.run()?),
            Request::DbInit(request) => Box::new(request.run()?),
            Request::Metrics(request) => Box::new(request.run()?),
            Request::DbStatus(request) => Box::new(request.run()?),
            Request::DbGrant(request) => Box::new(request.run()?),
            Request::PrepareBatch(request) => Box::new(request.run()?),
            Request::Mcp(request) => Box::new(request.run()?),
            Request::GatewayAdapter(request) => Box::new(request.run()?),
            Request::DbUpgrade(request) => Box::new(request.run()?),
        })
    }
}

/// The console, from the bare `recon` or `recon console`.
fn console_request(
    place: open::Place,
    reviewer: Option<String>,
    frozen: Option<String>,
    theme: Option<crate::cli::ThemeArg>,
) -> Result<Request, Failure> {
    Ok(Request::Console(
        console::Console::validate(place, reviewer.as_deref(), theme)?
            .frozen_at(frozen.as_deref())?,
    ))
}

/// `--workspace` may stand before or after the command, but `--check`,
/// `--output` and the console's `--reviewer` make no sense with one; nor
/// does `--check`, which makes workspace directories of its own, with
/// `--database`.
fn reject_stray_flags(cli: &Cli) -> Result<(), Failure> {
    if cli.check.is_some() && cli.database.is_some() {
        return Err(Failure::Usage(
            "--check runs its experiment in workspace directories of its own: it takes no \
             --database URL"
                .into(),
        ));
    }
    let Some(command) = &cli.command else {
        return Ok(());
    };
    if cli.check.is_some() || cli.output.is_some() {
        return Err(Failure::Usage(format!(
            "--check runs on its own, not with the {} command",
            command.name()
        )));
    }
    if cli.reviewer.is_some() && matches!(command, Command::Console(_)) {
        return Err(Failure::Usage(
            "give --reviewer after the word: recon console --reviewer NAME".into(),
        ));
    }
    if cli.reviewer.is_some() {
        return Err(Failure::Usage(format!(
            "--reviewer before the command is the console's; \
             the {} command does not take it there",
            command.name()
        )));
    }
    if cli.theme.is_some() {
        return Err(Failure::Usage(match command {
            Command::Console(_) => {
                "give --theme after the word: recon console --theme light|dark".into()
            }
            _ => format!(
                "--theme is the console's; the {} command does not take it",
                command.name()
            ),
        }));
    }
    Ok(())
}
