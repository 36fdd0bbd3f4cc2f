//! The command line as clap sees it, and the checks on typed input.
//!
//! The low level is [`Cli`]: exactly the flags of SPEC section 6, one
//! `Args` struct per command so that each command's flags travel as one
//! value. The high level is [`crate::commands`], which validates such a
//! struct into the command's typed arguments, runs it, and renders the
//! result. The checks it validates with live here ([`read_payload`],
//! [`identifier`], [`person`]): anything wrong with the input itself (a
//! payload that is not JSON, an id with control characters, `--close`
//! without `--authorized-by` on a workspace directory) is a usage error,
//! exit 2, before any database is opened. In team mode the names of
//! `--reviewer`, `--by`, `--approver` and `--authorized-by` default to the
//! database login (SPEC 10), which `commands` reads once it is open.
//!
//! Every flag whose value is data (an op id, an action kind, an effect id,
//! a payload) takes a value that begins with `-` as well: `--op -x` and
//! `--op=-x` are the same op id, and `--payload -5` is a negative number.
//! Such values are data a receiver must get intact, never flags.

use crate::domain::names;
use crate::domain::{Decision, OpState};
use crate::receiver::Fault;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod exits;
mod payload;
mod resolve;
mod triage;

pub use exits::{exit_codes_of, COMMAND_PATHS};
pub use payload::{read_payload, PayloadError, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH};
pub use resolve::ResolveArgs;
pub use triage::{EscalatedArg, MarkArgs, NoteArgs, ObserveArgs, SortArg, VerdictArg};

pub const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  `--check`: the reproduced results differ from the expected ones;
     `verify`, `export`: the journal is broken (its chain, or a table
     that is not its projection), or it disagrees with `verify
     --against`'s copy or `--checkpoint`;
     `receivers check`: the receiver's describe answer changed
  2  usage error (bad flags, a payload that is not JSON or not I-JSON, JSON
     input with a duplicate key, a malformed id, name or --checkpoint, an
     input file that cannot be read or is larger than its bound, the review
     console started without a terminal)
  3  refused by a safety rule; stderr says `refused: <code>: <detail>`
  4  storage or I/O error (missing workspace, not a recon database, a file
     of another workspace, database locked past the busy timeout, a
     receiver that gave no usable answer, an --output file or standard
     output that cannot be written); `observe`: also an operation it could
     not read, after reading and recording every other one (stdout as on
     0, stderr one line per operation not read)
  130  `observe` or `resolve` stopped by Ctrl-C: what it read or decided is
     recorded and printed as on 0; stderr says how many operations were
     not attempted
  Under --json, a failure with 2, 3 or 4 also prints one JSON document:
  {\"error\": {\"exit\", \"kind\", \"code\", \"message\"}} (and \"committed\"
  when something was committed before it failed).

Environment:
  RECON_BUSY_TIMEOUT_MS  how long to wait for another process's write lock,
                         in milliseconds (default 5000, at most 600000)
  RECON_DATABASE_URL     the database when neither --workspace nor --database
                         is given (not for demo, ledger, receiver, experiment,
                         --check, which work on a workspace directory only)
  RECON_WORKSPACE        the workspace directory when neither --workspace nor
                         --database is given and RECON_DATABASE_URL is unset
  NO_COLOR               when set and not empty, the review console and
                         `recon screenshot` use no colours (and the console
                         none under a TERM without them: vt100, xterm-mono)
  RECON_THEME            light or dark: the console's palette for that
                         background, as --theme (which wins) picks it; else
                         the terminal is asked (OSC 11), then COLORFGBG read";

/// The most generated operations one `recon demo --ops` adds.
pub const MAX_DEMO_OPS: u64 = 1_000_000;

#[derive(Debug, Parser)]
#[command(
    name = "recon",
    version,
    about = "Keep lost-receipt side effects durably unknown, gather receiver evidence, \
             and let a named human reviewer decide.",
    long_about = "Keep lost-receipt side effects durably unknown, refuse every blind retry, \
                  query the receiver for evidence, classify it conservatively, and let a \
                  named human reviewer record confirmed or not_applied against the version \
                  they saw.\n\nWith no command, opens the review console (on a fresh \
                  temporary demo workspace when no workspace or database is given, \
                  by flag or by RECON_WORKSPACE or RECON_DATABASE_URL).",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// The workspace directory (holding sender.sqlite and receiver.sqlite;
    /// default: RECON_WORKSPACE, when no database is named).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Team mode (SPEC 10): the outbox in a PostgreSQL database,
    /// postgres://USER@HOST:PORT/DATABASE, in place of --workspace
    /// (default: RECON_DATABASE_URL, when --workspace is not given). Leave
    /// the password out: it is read from PGPASSWORD, ~/.pgpass (or
    /// PGPASSFILE) or a PGSERVICE, as libpq does; one in the URL is used,
    /// and never printed.
    #[arg(long, global = true, value_name = "URL")]
    pub database: Option<String>,

    /// Console: the reviewer's name (default in team mode: the database
    /// login; on a workspace directory asked before the first mutation if
    /// absent).
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,

    /// Console, hidden: a clock stopped at this UTC time (RFC 3339 with
    /// milliseconds and Z) for every age shown and act stamped, so that
    /// the real-terminal tests see the golden screens.
    #[arg(long, value_name = "TIME", hide = true)]
    pub frozen_clock: Option<String>,

    /// Console: the terminal's background, light or dark, for a palette
    /// whose colours read at 7:1 on it (default: RECON_THEME, else what
    /// the terminal answers to OSC 11, else COLORFGBG, else a palette that
    /// reads at 4.5:1 on either).
    #[arg(long, value_enum, value_name = "BACKGROUND")]
    pub theme: Option<ThemeArg>,

    /// Rerun the whole experiment and compare it with EXPECTED (default: the
    /// checked-in results.json compiled into this binary).
    #[arg(long, value_name = "EXPECTED", num_args = 0..=1)]
    pub check: Option<Option<PathBuf>>,

    /// With --check: also write the reproduced JSON to PATH.
    #[arg(long, value_name = "PATH", requires = "check")]
    pub output: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scripted experiment (SPEC section 5) in fresh temporary
    /// workspaces and print its JSON, or write it to PATH. Unlike --check it
    /// compares nothing.
    Experiment(ExperimentArgs),
    /// Build a demo workspace, creating DIR if needed: every verdict and
    /// every state, made through the real code paths with real receiver
    /// child processes, faults and closing snapshots.
    ///
    /// Run again on the same workspace, it keeps the showcase and only adds
    /// the generated operations, numbered after the last ones.
    Demo(DemoArgs),
    /// Put a new original operation in the outbox, state prepared at
    /// version 1, routed to the receiver registered for its action kind.
    /// It creates no workspace: in a directory without one it is refused
    /// no_receiver, naming the path. An existing op id is refused
    /// (duplicate_operation).
    Prepare(PrepareArgs),
    /// Dispatch a prepared operation: commit unknown (version +1, one
    /// dispatch_log row), then invoke the receiver as a child process.
    ///
    /// Exits 0 whenever the receiver was invoked and reports the outcome: a
    /// receipt (the op is confirmed), or unknown with the child's exit code
    /// and why no receipt counts (adapter_failure: spawn_failed, crash,
    /// timeout, garbage, extra_output, oversize, mismatch or error). A lost
    /// receipt is an outcome, not an error. An op that is not prepared is
    /// refused as blind_retry before the receiver is invoked.
    Dispatch(DispatchArgs),
    /// List operations one page at a time, by op id or by age, filtered by
    /// state, latest verdict, escalation and age.
    ///
    /// Each operation under --json carries `cursor`; pass the last one
    /// printed to --after to continue the same listing.
    Ops(OpsArgs),
    /// Show one operation, its evidence history (with the full snapshot
    /// each decision rests on) and its compensation approvals.
    Show(ShowArgs),
    /// Print the effects of recon's own ledger in write order: the whole
    /// ledger, or one operation's.
    ///
    /// An adapter keeps its effects in its own store, which this does not
    /// list: for an operation routed to one (or a workspace with adapters)
    /// a note on stderr says so and names `recon snapshot ID`, which reads
    /// an operation's effects from its receiver.
    Ledger(LedgerArgs),
    /// Read the receiver's effects for an operation and classify them.
    ///
    /// An ordinary read changes nothing. With --close it is a receiver
    /// mutation: it closes the operation for good, so no effect can be
    /// written for it afterwards, which can cancel an original still in
    /// flight; it needs --authorized-by.
    Snapshot(SnapshotArgs),
    /// Take a fresh snapshot (closing it only with --close), classify it,
    /// and record the reviewer's decision only when the verdict supports it:
    /// confirmed needs unique_exact_match or exact_match_existence_only,
    /// not_applied needs terminal_absence.
    ///
    /// A decision that is refused writes nothing, and then no closing
    /// snapshot is taken either.
    Reconcile(ReconcileArgs),
    /// Approve a compensation for the one confirmed effect of an original
    /// and prepare the compensation operation, in one transaction. Dispatch
    /// it afterwards with `recon dispatch CID`.
    #[command(name = "approve-compensation")]
    ApproveCompensation(ApproveCompensationArgs),
    /// Read each operation's receiver and record what it saw as an
    /// observation (who, when, the flags, the match count, the verdict, the
    /// snapshot).
    ///
    /// With no ID, the operations --state selects (default unknown); with
    /// --older-than, only those whose latest observation is older than
    /// DURATION, or that were never observed. An operation whose receiver
    /// gives no usable answer (or whose read is refused) is skipped and
    /// reported on stderr, one line each; every other one is still read
    /// and recorded, and the exit code is then 4. A decision never rests on
    /// a recorded observation: `reconcile` takes its own fresh snapshot.
    Observe(ObserveArgs),
    /// Resolve the provable cases by a named policy: close each listed
    /// unknown operation and record confirmed on unique_exact_match or
    /// not_applied on terminal_absence, against the version read, with the
    /// closing snapshot as evidence naming the policy.
    ///
    /// A close can cancel an original still in flight, so only an exact,
    /// authorized list is closed: the IDs, the operations the filters
    /// select (printed before anything is closed), or a --plan written by
    /// --dry-run --output, closed only where still at its planned
    /// version. Operations younger than --older-than, escalated ones, and
    /// those whose receiver cannot close are skipped; every other verdict
    /// is left for people. Without a plan, each is read first and closed
    /// only when the closed snapshot would be decided. Skips and verdicts
    /// left are counted; an operation that cannot be read, closed or
    /// decided is counted as failed and named on stderr, and the others go
    /// on.
    Resolve(ResolveArgs),
    /// Leave a note on an operation, in any state. The note is a journal
    /// entry; `show` lists the notes.
    Note(NoteArgs),
    /// Escalate an unknown operation recon cannot decide (duplicates,
    /// mismatches, a receiver that cannot close) to people who can.
    ///
    /// A marker, not a state: the operation stays unknown, and every rule
    /// of a decision still applies to it. A decision clears the marker;
    /// the history keeps it.
    Escalate(MarkArgs),
    /// Lower an operation's escalation marker.
    Deescalate(MarkArgs),
    /// Clear an operation's contradiction marker with a reason, once a
    /// person has looked at the read that contradicted its decision.
    ///
    /// The marker is raised by the first recorded read (an observation or
    /// a close) that contradicts a final decision; the history keeps both,
    /// and a later contradicting read raises it again.
    Acknowledge(MarkArgs),
    /// Render the review console without a terminal after a key sequence,
    /// and print the screen as text or SVG. The keys go through the same key
    /// table and update as in the console, so mutations among them (a
    /// confirmed `y`) really happen: point it at a copy to look only.
    //
    // Its help ends with the console's key syntax, which `commands::parse`
    // attaches: this module does not know the console.
    Screenshot(ScreenshotArgs),
    /// Recompute the journal's hash chain, replay the journal and compare
    /// every table it projects (operations, approvals, evidence,
    /// dispatches, closes, observations, notes, escalations, receivers,
    /// routes) field by field, hold the outbox's metadata (workspace id,
    /// completion mark, upgrade) to the journal and the ledger and its
    /// tables, indexes and triggers to this build's, and report the first
    /// broken link and every mismatch. Exits 0 when intact, 1 when broken
    /// (or when an --against copy or a --checkpoint disagrees).
    ///
    /// With --receivers it asks the receivers instead: it reads again every
    /// confirmed and not_applied operation (compensations included) at its
    /// receiver and holds the decision to what the receiver says now (an
    /// effect gone or added, a close tombstone gone or closed by another
    /// login). Each contradiction is recorded as an observation that raises
    /// the contradiction marker, once while the marker is up. Exits 0 when
    /// none, 1 when any, 4 when some receiver could not be read and none
    /// contradicted. In team mode it needs the reviewer role.
    Verify(VerifyArgs),
    /// Write the journal as JSON lines (each entry's content with its
    /// prev_hash and hash), to keep a copy outside the database. Writes
    /// every entry as stored, then exits 1 if the journal is broken.
    Export(ExportArgs),
    /// Print the journal's length and head hash as LEN:HASH (under --json,
    /// {"length", "head_hash"}), to keep outside the workspace: `recon
    /// verify --checkpoint LEN:HASH` later proves the journal still extends
    /// it, which catches a journal rewritten whole or cut short.
    Checkpoint(CheckpointArgs),
    /// The receiver side: what `dispatch` spawns, and what an unsafe retry
    /// that bypasses the sender calls directly.
    #[command(subcommand)]
    Receiver(ReceiverCommand),
    /// Register, list, check and remove receivers: programs speaking
    /// recon-adapter/1 (or recon's own ledger, --builtin) that perform the
    /// action kinds routed to them. No receiver is implicit: prepare refuses
    /// an action kind routed nowhere (no_receiver).
    #[command(subcommand)]
    Receivers(ReceiversCommand),
    /// Team mode (SPEC 10): an outbox in a PostgreSQL database. `db init`
    /// creates it; then every command takes --database URL (or
    /// RECON_DATABASE_URL) in place of --workspace.
    #[command(subcommand)]
    Db(DbCommand),
    /// Open the review console: the same as `recon` with no command, with
    /// the same flags (--workspace, --database, --reviewer; on a fresh
    /// temporary demo workspace when neither place is given). It needs a
    /// terminal; `recon screenshot` renders it without one.
    Console(ConsoleArgs),
    /// Print the outbox's metrics in the Prometheus text exposition
    /// format (SPEC 15): operations by state and receiver, unknown ones by
    /// verdict and escalation, the oldest unknown one's age, contradicted
    /// operations, failed receiver calls, decisions by source, the
    /// journal's length. It only reads (in team mode the reader role is
    /// enough). With --output, the file is replaced whole (written beside
    /// it, synced, renamed), for a node exporter's textfile collector.
    Metrics(MetricsArgs),
    /// The agent's door (SPEC 13): an MCP server on stdin and stdout with
    /// the tools recon_do, recon_status and recon_unknown. An agent sends
    /// each action at most once per key; an unknown outcome is left to a
    /// person. No reviewer act is reachable through it.
    Mcp(McpArgs),
    /// The MCP gateway's receiver (SPEC 13): a recon-adapter/1 program
    /// answering by calling the downstream MCP server a gateway file
    /// names (apply: its effect tool; query and close: its evidence and
    /// close tools). Registered by `recon mcp --gateway`.
    GatewayAdapter(GatewayAdapterArgs),
}

/// `recon console`: the console's own flags, as the bare `recon` takes
/// them before any command.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The reviewer's name (default in team mode: the database login; on a
    /// workspace directory asked before the first mutation if absent).
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,
    /// Hidden: a clock stopped at this UTC time, as the bare `recon` takes it.
    #[arg(long, value_name = "TIME", hide = true)]
    pub frozen_clock: Option<String>,
    /// The terminal's background, light or dark, for a palette whose
    /// colours read at 7:1 on it (default: RECON_THEME, else what the
    /// terminal answers to OSC 11, else COLORFGBG, else a palette that
    /// reads at 4.5:1 on either).
    #[arg(long, value_enum, value_name = "BACKGROUND")]
    pub theme: Option<ThemeArg>,
}

/// `--theme`: the terminal's background.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThemeArg {
    Light,
    Dark,
}

impl Command {
    /// The command's name as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Experiment(_) => "experiment",
            Command::Demo(_) => "demo",
            Command::Prepare(_) => "prepare",
            Command::Dispatch(_) => "dispatch",
            Command::Ops(_) => "ops",
            Command::Show(_) => "show",
            Command::Ledger(_) => "ledger",
            Command::Snapshot(_) => "snapshot",
            Command::Reconcile(_) => "reconcile",
            Command::ApproveCompensation(_) => "approve-compensation",
            Command::Observe(_) => "observe",
            Command::Resolve(_) => "resolve",
            Command::Note(_) => "note",
            Command::Escalate(_) => "escalate",
            Command::Acknowledge(_) => "acknowledge",
            Command::Deescalate(_) => "deescalate",
            Command::Screenshot(_) => "screenshot",
            Command::Verify(_) => "verify",
            Command::Export(_) => "export",
            Command::Checkpoint(_) => "checkpoint",
            Command::Receiver(_) => "receiver",
            Command::Receivers(_) => "receivers",
            Command::Db(_) => "db",
            Command::Console(_) => "console",
            Command::Metrics(_) => "metrics",
            Command::Mcp(_) => "mcp",
            Command::GatewayAdapter(_) => "gateway-adapter",
        }
    }

    /// Whether `--json` was given; the commands without the flag print one
    /// form only.
    pub fn json(&self) -> bool {
        match self {
            Command::Demo(DemoArgs { json, .. })
            | Command::Prepare(PrepareArgs { json, .. })
            | Command::Dispatch(DispatchArgs { json, .. })
            | Command::Ops(OpsArgs { json, .. })
            | Command::Show(ShowArgs { json, .. })
            | Command::Ledger(LedgerArgs { json, .. })
            | Command::Snapshot(SnapshotArgs { json, .. })
            | Command::Reconcile(ReconcileArgs { json, .. })
            | Command::ApproveCompensation(ApproveCompensationArgs { json, .. })
            | Command::Observe(ObserveArgs { json, .. })
            | Command::Resolve(ResolveArgs { json, .. })
            | Command::Note(NoteArgs { json, .. })
            | Command::Escalate(MarkArgs { json, .. })
            | Command::Deescalate(MarkArgs { json, .. })
            | Command::Acknowledge(MarkArgs { json, .. })
            | Command::Export(ExportArgs { json, .. })
            | Command::Verify(VerifyArgs { json, .. })
            | Command::Checkpoint(CheckpointArgs { json })
            | Command::Receivers(
                ReceiversCommand::Add(ReceiversAddArgs { json, .. })
                | ReceiversCommand::Update(ReceiversUpdateArgs { json, .. })
                | ReceiversCommand::List(ReceiversListArgs { json })
                | ReceiversCommand::Check(ReceiversCheckArgs { json, .. }),
            )
            | Command::Db(DbCommand::Init(DbInitArgs { json, .. }))
            | Command::Metrics(MetricsArgs { json, .. })
            | Command::Db(DbCommand::Status(DbStatusArgs { json }))
            | Command::Db(DbCommand::Grant(DbGrantArgs { json, .. }))
            | Command::Db(DbCommand::Revoke(DbGrantArgs { json, .. }))
            | Command::Db(DbCommand::Upgrade(DbUpgradeArgs { json })) => *json,
            Command::Receivers(ReceiversCommand::Remove(_))
            | Command::Experiment(_)
            | Command::Screenshot(_)
            | Command::Receiver(_)
            | Command::Mcp(_)
            | Command::Console(_)
            | Command::GatewayAdapter(_) => false,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ReceiverCommand {
    /// Write one effect in one transaction and print its receipt JSON
    /// ({"receipt": effect}). The receiver is not idempotent: every call
    /// writes a new effect, unless the operation is closed.
    ///
    /// Exits 0 with the receipt; 3 with `refused: operation_closed` on a
    /// closed operation; 23 under crash-after-commit (committed, no
    /// receipt); 24 under crash-before-commit (nothing written).
    Apply(ReceiverApplyArgs),
    /// Serve one `recon-adapter/1` call on the built-in ledger: one JSON
    /// request line on stdin, one JSON answer line on stdout.
    ///
    /// Its drills are request fields only it reads: "fault"
    /// ("crash-after-commit" exits 23 after the commit, "crash-before-commit"
    /// exits 24 before writing) and "wait_permit": true (print `ready`, then
    /// wait for one more line before applying). The exit code is diagnostic
    /// only: 0 answered, 3 refused, 4 the ledger could not be used.
    Adapter(ReceiverAdapterArgs),
}

#[derive(Debug, Subcommand)]
pub enum ReceiversCommand {
    /// Register a receiver: run `PROGRAM ARG... describe`, check the
    /// answer, and store it with the routes of the action kinds.
    ///
    /// PROGRAM is stored as an absolute path (a bare name is looked up on
    /// PATH now, never at run time). The describe answer must hold name,
    /// version, can_close and query {complete, authoritative}; mandatory may
    /// be left out (the same as []): it lists the capabilities a host must
    /// understand to use the adapter at all, and recon knows none in
    /// protocol 1. Refused, with nothing stored: reserved_name (builtin),
    /// adapter_malformed (describe did not answer one recon-adapter/1 object
    /// holding those fields), adapter_unknown_capability (mandatory lists a
    /// capability), receiver_exists, action_routed (a kind already routed
    /// elsewhere). Operations already prepared keep the receiver they were
    /// routed to.
    Add(ReceiversAddArgs),
    /// List the registered receivers by name: routes, program, timeout,
    /// and the ceiling of their stored describe answer.
    List(ReceiversListArgs),
    /// Change a registered receiver while operations are open: its program
    /// and arguments (after --), the variables it is passed, its timeout.
    ///
    /// The registration keeps its id and gains a journaled version; the new
    /// program's describe is run first, and an answer for another store
    /// (another instance) or with other claims is refused receiver_changed:
    /// another store is another receiver (remove and add).
    Update(ReceiversUpdateArgs),
    /// Run a registered receiver's describe again and compare the answer
    /// with the stored one.
    ///
    /// Stores nothing, unless --accept. Exits 0 when the answer is
    /// unchanged (or accepted), 1 when it differs (printing both).
    Check(ReceiversCheckArgs),
    /// Remove a registration and its routes.
    ///
    /// Refused receiver_in_use while a prepared or unknown operation routes
    /// to it; decided operations keep its name in their history. With
    /// --lost --reason TEXT (its store is gone) it is removed all the same:
    /// each such operation is escalated with the reason, in the same
    /// transaction, and its acts are then refused receiver_gone.
    Remove(ReceiversRemoveArgs),
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Create the outbox's schema in a PostgreSQL database, idempotently:
    /// its tables at this recon's schema version, the journal's head row
    /// and the triggers that keep the journal a chain and the history
    /// append-only, and a new workspace id. Run again, it changes nothing
    /// and reports the version found.
    ///
    /// Refused, with nothing written: a server whose synchronous_commit is
    /// not on (or remote_apply), a database whose encoding is not UTF8, a
    /// recon outbox of another schema version or missing some of its
    /// objects, and tables or functions of recon's names that are not a
    /// recon outbox. Two runs at once both succeed, and create it once.
    /// Then every command (but those for a workspace directory only) takes
    /// --database URL, or RECON_DATABASE_URL, in place of --workspace.
    Init(DbInitArgs),
    /// What the outbox is and who may act on it: its schema version, the
    /// roles' prefix, four eyes, whether this connection uses TLS, each
    /// login holding the outbox's roles (granted by its owner), and every
    /// grant of them by another role (which counts for nothing). Any login
    /// that can read the outbox may run it.
    Status(DbStatusArgs),
    /// Grant a login exactly the named roles of the outbox, as its owner
    /// (the grantor PostgreSQL records, so they count); prints the roles
    /// the login then holds. Owner only (permission_denied otherwise).
    Grant(DbGrantArgs),
    /// Revoke the named roles of the outbox from a login (a grant by
    /// another role too); prints the roles the login still holds. Owner
    /// only.
    Revoke(DbGrantArgs),
    /// Upgrade an outbox an older recon made (schema 6, the release before
    /// the fourth wave) to this recon's schema, in one transaction,
    /// journaled as `upgraded` {from, to}; killed at any point, it leaves
    /// the old schema as it was. Only the outbox's owner may run it
    /// (permission_denied, exit 3, for anyone else). An outbox already at
    /// this version is left as it is (exit 0). Every other command refuses
    /// an outbox of an older schema with schema_outdated (exit 4).
    Upgrade(DbUpgradeArgs),
}

#[derive(Debug, Args)]
pub struct DbGrantArgs {
    /// The login role (it must exist: CREATE ROLE NAME LOGIN).
    pub login: String,
    /// One or more of reader, sender, reviewer, closer, approver, by
    /// commas (`reviewer,closer`).
    #[arg(value_delimiter = ',', required = true)]
    pub roles: Vec<String>,
    /// Print {login, roles}: the short names the login holds afterwards.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DbUpgradeArgs {
    /// Print {database, from, to, upgraded, seq}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DbStatusArgs {
    /// Print {database, schema, roles_prefix, four_eyes, tls, owner,
    /// logins: [{login, roles}], foreign_grants: [{login, role, grantor}]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DbInitArgs {
    /// Refuse the approval of a compensation by the role that recorded the
    /// original's confirmation (four eyes); once set, it stays set.
    #[arg(long)]
    pub four_eyes: bool,
    /// The prefix of the outbox's roles (PREFIX_reader, PREFIX_sender,
    /// PREFIX_reviewer, PREFIX_closer, PREFIX_approver): a lower-case
    /// letter, then lower-case letters, digits and _, at most 40. Roles
    /// belong to one outbox: a prefix whose roles serve another database is
    /// refused roles_in_use. An existing outbox keeps its own.
    #[arg(long, value_name = "PREFIX")]
    pub roles: Option<String>,
    /// Print {database, schema_version, created, workspace_id, owner,
    /// four_eyes, roles_prefix, roles} as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The longest timeout a receiver may be given: one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Args)]
pub struct ReceiversAddArgs {
    /// The receiver's name: [a-z0-9][a-z0-9_-]{0,39}; builtin names only
    /// recon's own ledger.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The action kinds routed to it, comma-separated; '*' takes every kind
    /// routed nowhere else (a named route always wins, and one receiver at
    /// most holds '*'). A kind routes to one receiver at most, and an
    /// operation whose kind routes nowhere is refused no_receiver.
    #[arg(
        long,
        value_name = "KIND[,KIND...]|'*'",
        value_delimiter = ',',
        required = true,
        allow_hyphen_values = true
    )]
    pub actions: Vec<String>,
    /// Register recon's own ledger (receiver.sqlite in the workspace)
    /// instead of a program: a single-host fixture, complete and
    /// authoritative, that can close.
    #[arg(long, conflicts_with_all = ["command", "env", "timeout_ms"])]
    pub builtin: bool,
    /// With --builtin: the ledger declares that it cannot close, so an
    /// empty read never proves absence.
    #[arg(long, requires = "builtin")]
    pub no_close: bool,
    /// How long one call may run before recon kills its process group
    /// [default: 30000].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// A variable passed from recon's environment to the adapter (its
    /// value is read at each call and never stored); repeatable. Besides
    /// these, an adapter gets only PATH, HOME, LANG, LC_* and TZ, and runs
    /// in `/`. Credentials travel this way (PGPASSWORD, a key), never in
    /// the arguments, which are stored and printed.
    #[arg(long, value_name = "VAR")]
    pub env: Vec<String>,
    /// Print the registration as `receivers list --json` prints a row.
    #[arg(long)]
    pub json: bool,
    /// The program and its arguments, after `--`; recon appends the verb
    /// (describe, apply, query or close) and writes the request on stdin.
    /// A program named without a slash is looked up on PATH now, once.
    #[arg(
        last = true,
        required_unless_present = "builtin",
        value_name = "PROGRAM [ARG]"
    )]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReceiversUpdateArgs {
    /// The receiver's name.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// How long one call may run before recon kills its process group.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// The variables passed from recon's environment, replacing the stored
    /// list (repeatable; names only, values read at each call).
    #[arg(long, value_name = "VAR")]
    pub env: Vec<String>,
    /// Print the registration as `receivers list --json` prints a row.
    #[arg(long)]
    pub json: bool,
    /// The new program and its arguments, after `--`.
    #[arg(last = true, value_name = "PROGRAM [ARG]")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReceiversListArgs {
    /// Print an array of {name, actions, program, args, timeout_ms,
    /// can_close, complete, authoritative, describe_sha256, env, version,
    /// instance, registration_version}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReceiversCheckArgs {
    /// The receiver's name.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Store the current answer as a new version of the registration (a
    /// changed claim is accepted as your decision; another instance never
    /// is: another store is another receiver).
    #[arg(long)]
    pub accept: bool,
    /// Print {name, unchanged, stored, stored_sha256, current,
    /// current_sha256}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReceiversRemoveArgs {
    /// The receiver's name.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Its store is gone: end the registration even while operations route
    /// to it, escalating each open one with --reason (journaled); their
    /// acts are then refused receiver_gone. Needs --reason.
    #[arg(long, requires = "reason")]
    pub lost: bool,
    /// Why the receiver is lost: each escalation's reason (with --lost).
    #[arg(long, value_name = "TEXT", requires = "lost")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReceiverAdapterArgs {
    /// Declare `can_close: false` and answer `close` with `unsupported`.
    #[arg(long)]
    pub no_close: bool,
    /// describe, apply, query or close; or session, for request after
    /// request (each with its `verb` and `id`) until stdin ends.
    #[arg(value_parser = ["describe", "apply", "query", "close", "session"])]
    pub verb: String,
}

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Write the JSON to PATH instead of standard output.
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Also add N generated unknown operations (op-bulk-0000001, ...)
    /// with a realistic mix of receiver evidence (none, one, duplicates,
    /// mismatches) and other callers' traffic, by bulk inserts.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=MAX_DEMO_OPS))]
    pub ops: u64,
    /// Print {operations, effects, showcase: [...], generated} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// The new op id: 1 to 200 characters, no whitespace or control
    /// characters.
    #[arg(
        long = "op",
        value_name = "ID",
        allow_hyphen_values = true,
        required_unless_present = "batch"
    )]
    pub op_id: Option<String>,
    /// The action the receiver performs (send_email, charge_card, ...).
    #[arg(
        long = "action",
        value_name = "KIND",
        allow_hyphen_values = true,
        required_unless_present = "batch"
    )]
    pub action_kind: Option<String>,
    /// JSON text, or @PATH to read it from a file (@- for stdin). It is
    /// stored as canonical JSON (sorted keys).
    #[arg(
        long,
        value_name = "JSON",
        allow_hyphen_values = true,
        required_unless_present = "batch"
    )]
    pub payload: Option<String>,
    /// Prepare many: FILE (- for stdin) holds JSON lines {"op", "action",
    /// "payload"}, each bounded as a payload, prepared in transactions of
    /// up to 500, each line refused alone. Prints {prepared, refused:
    /// [{line, code, message}]} (lines counted from 1); exit 3 when any
    /// line was refused.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["op_id", "action_kind", "payload"]
    )]
    pub batch: Option<std::path::PathBuf>,
    /// Print the new operation as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DispatchArgs {
    /// The op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    /// Make the receiver child fail: crash-after-commit writes the effect
    /// and dies before its receipt (exit 23); crash-before-commit dies
    /// before writing anything (exit 24). A drill of the built-in ledger:
    /// on an operation routed to an adapter it is a usage error.
    #[arg(long, value_enum)]
    pub fault: Option<FaultArg>,
    /// Print {op_id, receiver, outcome, receiver_exit_code, effect_id,
    /// state, version, adapter_failure} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct OpsArgs {
    /// Only operations in this state; all (the default) lists every state.
    #[arg(long, value_enum)]
    pub state: Option<StateFilterArg>,
    /// Only operations whose latest observation has this verdict, or
    /// `never`: those never observed.
    #[arg(long, value_name = "V|never", value_parser = triage::parse_verdict_filter)]
    pub verdict: Option<VerdictArg>,
    /// Only escalated operations (yes), or only the others (no).
    #[arg(long, value_enum, value_name = "yes|no")]
    pub escalated: Option<EscalatedArg>,
    /// Only operations whose final decision a recorded read contradicts
    /// (yes), or only the others (no).
    #[arg(long, value_enum, value_name = "yes|no")]
    pub contradicted: Option<EscalatedArg>,
    /// Only operations with a surplus effect of a kept duplicate that no
    /// approved compensation covers yet (yes), or only the others (no).
    #[arg(long, value_enum, value_name = "yes|no")]
    pub surplus: Option<EscalatedArg>,
    /// Only operations routed to the receiver NAME.
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    pub receiver: Option<String>,
    /// Only operations whose updated_at is older than DURATION (90s, 15m,
    /// 2h, 3d).
    #[arg(long, value_name = "DURATION", value_parser = triage::parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// The order: op_id (the default), or age (updated_at, oldest first,
    /// then op_id).
    #[arg(long, value_enum, default_value_t = SortArg::OpId)]
    pub sort: SortArg,
    /// At most N operations.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Continue after this row: the `cursor` of the last operation `ops
    /// --json` printed under the same --sort (an op id is a cursor of
    /// --sort op_id).
    #[arg(long, value_name = "CURSOR", allow_hyphen_values = true)]
    pub after: Option<String>,
    /// Print an array of operations {op_id, kind, action_kind, payload,
    /// state, version, compensates_effect_id, compensates_op_id,
    /// confirmed_effect_id, receiver, created_at, updated_at,
    /// dispatch_count, last_dispatched_at, latest_observation, escalated,
    /// cursor} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    /// Print {operation, evidence, approvals, observations, notes,
    /// closes, escalations} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LedgerArgs {
    /// Only effects carrying this op id.
    #[arg(long = "op", value_name = "ID", allow_hyphen_values = true)]
    pub op_id: Option<String>,
    /// Print an array of effects {effect_id, op_id, action_kind,
    /// compensates_effect_id, payload} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    #[command(flatten)]
    pub close: CloseArgs,
    /// Record the read as NAME's observation (without it the read is only
    /// shown; a closing read is always recorded, as the authorizer's
    /// unless --by names another).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Print {snapshot: {op_id, matches, complete, authoritative,
    /// closed}, verdict, provenance} as JSON, and `observation` when the
    /// read was recorded.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    /// Who decides; recorded in the evidence log (default in team mode:
    /// the database login; required on a workspace directory).
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,
    #[arg(long, value_enum)]
    pub decision: DecisionArg,
    /// The version the reviewer saw; a different current version is
    /// refused as stale_version.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub expected_version: i64,
    /// The payload scope the reviewer decided on (default: the stored
    /// one); a different one is refused as scope_mismatch. JSON text,
    /// @PATH or @-.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    pub payload: Option<String>,
    #[command(flatten)]
    pub close: CloseArgs,
    /// Keep this effect of a duplicate and record the other matches as
    /// surplus, each to be compensated (`--decision confirmed` on a
    /// closed read whose matches are exact copies only).
    #[arg(long, value_name = "EFFECT_ID", allow_hyphen_values = true)]
    pub keep: Option<String>,
    /// Print {op_id, decision, verdict, state, version, evidence_seq}
    /// as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveCompensationArgs {
    /// The confirmed original's op id.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    /// The original's confirmed effect id, as its receiver named it:
    /// `recon show ID` prints it as the confirmed effect.
    #[arg(long, value_name = "EFFECT", allow_hyphen_values = true)]
    pub effect: String,
    /// Who approves; recorded with the approval (default in team mode:
    /// the database login; required on a workspace directory).
    #[arg(long, value_name = "NAME")]
    pub approver: Option<String>,
    /// The original's version the approver saw.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub expected_version: i64,
    /// The new compensation op id.
    #[arg(
        long = "compensation-op",
        value_name = "CID",
        allow_hyphen_values = true
    )]
    pub compensation_op: String,
    /// The compensating action (refund_card, ...).
    #[arg(long = "action", value_name = "KIND", allow_hyphen_values = true)]
    pub action_kind: String,
    /// The compensation's payload: JSON text, @PATH or @-.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    pub payload: String,
    /// Why: optional for the confirmed effect, `duplicate` for a surplus
    /// effect of a kept duplicate; recorded with the approval.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Print {original_op_id, effect_id, approved_version,
    /// compensation_op_id, approver} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ScreenshotArgs {
    /// The screen size, columns x rows.
    #[arg(long, value_name = "WxH", default_value = "120x40", value_parser = parse_size)]
    pub size: (u16, u16),
    /// Keys to press first (see below).
    #[arg(long, value_name = "KEYS", default_value = "")]
    pub keys: String,
    #[arg(long, value_enum, default_value_t = ScreenshotFormat::Txt)]
    pub format: ScreenshotFormat,
    /// The reviewer's name (default in team mode: the database login;
    /// otherwise the keys can type it at the prompt).
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Also check that this earlier `recon export` is still a prefix of
    /// the journal (catches a rewritten chain or removed last entries).
    /// Read one line at a time, each at most 64 MiB, the whole at most
    /// 16 GiB.
    #[arg(long, value_name = "FILE")]
    pub against: Option<PathBuf>,
    /// Also check that the journal extends this `recon checkpoint` (its
    /// first LEN entries end in HASH).
    #[arg(long, value_name = "LEN:HASH")]
    pub checkpoint: Option<String>,
    /// Read every final decision again at its receiver (SPEC 12) instead of
    /// checking the journal.
    #[arg(long, conflicts_with_all = ["against", "checkpoint"])]
    pub receivers: bool,
    /// With --receivers: only the decisions journaled after entry SEQ (a
    /// frequent scheduled run; the report prints the head it checked up
    /// to, the SEQ of the next run).
    #[arg(long, value_name = "SEQ", requires = "receivers")]
    pub since: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    #[arg(long)]
    pub json: bool,
}

/// `recon mcp`: where the outbox is comes from --workspace or --database.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// A gateway file (TOML, SPEC 13; see examples/gateway.toml): also
    /// start the downstream MCP server it names and re-expose its tools.
    #[arg(long, value_name = "FILE")]
    pub gateway: Option<std::path::PathBuf>,
}

/// `recon gateway-adapter --gateway FILE VERB`.
#[derive(Debug, Args)]
pub struct GatewayAdapterArgs {
    /// The gateway file (TOML).
    #[arg(long, value_name = "FILE")]
    pub gateway: std::path::PathBuf,
    /// describe, apply, query or close.
    #[arg(value_parser = ["describe", "apply", "query", "close"])]
    pub verb: String,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Write to FILE (replaced whole, never left half written) instead of
    /// stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The same families as one JSON document (and a failure as a JSON
    /// error document).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write to PATH (atomically) instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Accepted for symmetry: the export is JSON already (one JSON object
    /// per line), and prints the same with or without it.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReceiverApplyArgs {
    /// The op id the effect carries.
    #[arg(long = "op", value_name = "ID", allow_hyphen_values = true)]
    pub op_id: String,
    #[arg(long = "action", value_name = "KIND", allow_hyphen_values = true)]
    pub action_kind: String,
    /// JSON text, @PATH or @-.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    pub payload: String,
    /// The effect this one compensates.
    #[arg(long, value_name = "EFFECT", allow_hyphen_values = true)]
    pub compensates: Option<String>,
    /// Die on purpose: after the commit (exit 23) or before it (exit 24).
    #[arg(long, value_enum)]
    pub fault: Option<FaultArg>,
    /// Print `ready` once the database is open, then wait for one line on
    /// stdin before writing.
    #[arg(long)]
    pub wait_permit: bool,
}

#[derive(Debug, Args)]
pub struct CloseArgs {
    /// Take a closing snapshot (a receiver mutation); it needs
    /// --authorized-by on a workspace directory.
    #[arg(long)]
    pub close: bool,
    /// Who authorized the close; recorded in the receiver's tombstone
    /// (default in team mode: the database login).
    #[arg(long, value_name = "NAME", requires = "close")]
    pub authorized_by: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScreenshotFormat {
    Txt,
    Svg,
}

/// Parses `--size WxH` (at most 1000x1000).
fn parse_size(text: &str) -> Result<(u16, u16), String> {
    let (w, h) = text
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{text}` is not WxH, for example 120x40"))?;
    let dim = |v: &str| -> Result<u16, String> {
        v.trim()
            .parse::<u16>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| format!("`{v}` is not a size from 1 to 1000"))
    };
    Ok((dim(w)?, dim(h)?))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FaultArg {
    CrashAfterCommit,
    CrashBeforeCommit,
}

impl From<FaultArg> for Fault {
    fn from(arg: FaultArg) -> Fault {
        match arg {
            FaultArg::CrashAfterCommit => Fault::CrashAfterCommit,
            FaultArg::CrashBeforeCommit => Fault::CrashBeforeCommit,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StateArg {
    Prepared,
    Unknown,
    Confirmed,
    #[value(name = "not_applied", alias = "not-applied")]
    NotApplied,
}

impl From<StateArg> for OpState {
    fn from(arg: StateArg) -> OpState {
        match arg {
            StateArg::Prepared => OpState::Prepared,
            StateArg::Unknown => OpState::Unknown,
            StateArg::Confirmed => OpState::Confirmed,
            StateArg::NotApplied => OpState::NotApplied,
        }
    }
}

/// `ops --state`: one state, or `all`, the same as no `--state`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StateFilterArg {
    Prepared,
    Unknown,
    Confirmed,
    #[value(name = "not_applied", alias = "not-applied")]
    NotApplied,
    All,
}

impl StateFilterArg {
    /// The one state asked for; `None` for every state.
    pub fn state(self) -> Option<OpState> {
        match self {
            StateFilterArg::Prepared => Some(OpState::Prepared),
            StateFilterArg::Unknown => Some(OpState::Unknown),
            StateFilterArg::Confirmed => Some(OpState::Confirmed),
            StateFilterArg::NotApplied => Some(OpState::NotApplied),
            StateFilterArg::All => None,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DecisionArg {
    Confirmed,
    #[value(name = "not_applied", alias = "not-applied")]
    NotApplied,
}

impl From<DecisionArg> for Decision {
    fn from(arg: DecisionArg) -> Decision {
        match arg {
            DecisionArg::Confirmed => Decision::Confirmed,
            DecisionArg::NotApplied => Decision::NotApplied,
        }
    }
}

/// A usage error found after clap: exit 2, one line.
#[derive(Debug)]
pub struct UsageError(pub String);

/// Checks an identifier (op id, action kind, effect id); the rule lives in
/// `domain::names`.
pub fn identifier<'a>(what: &str, text: &'a str) -> Result<&'a str, UsageError> {
    names::identifier(what, text).map_err(UsageError)
}

/// Checks a receiver's name; the rule lives in `domain::names`.
pub fn receiver_name(text: &str) -> Result<&str, UsageError> {
    names::receiver(text).map_err(UsageError)
}

/// Checks a person's name; the rule lives in `domain::names`.
pub fn person<'a>(what: &str, text: &'a str) -> Result<&'a str, UsageError> {
    names::person(what, text).map_err(UsageError)
}
