//! The receiver seam: what recon asks of any tool that performs a side
//! effect, in domain terms.
//!
//! The shape follows Cargo's credential providers: a small trait that a
//! provider implements ([`Receiver`]: `describe`, `apply`, `query`, `close`)
//! and a function that serves it to the host. The built-in ledger
//! ([`Builtin`], over `receiver.sqlite`) is the first implementation; a
//! process speaking `recon-adapter/1` is the next, and the facade will hold
//! either without knowing which. A receiver returns records (effects and
//! snapshots with their flags), never verdicts: `domain::classify` is the
//! only judge.
//!
//! [`serve_apply`] is the child side of a dispatch: what `recon receiver
//! apply` runs, with the two drills that model a lost receipt (exit 23 after
//! the commit) and a lost request (exit 24 before it).

mod builtin;
pub mod protocol;
pub mod rules;

pub use builtin::{Builtin, BUILTIN_NAME};

use crate::domain::{Description, Effect, EffectRequest, Snapshot};
use crate::error::Result;
use crate::settings::OpenOptions;
use protocol::{ErrorCode, Invocation, Request, Verb};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// A tool that performs side effects and can be asked what it holds.
///
/// Every call but `describe` names the workspace (or team database) it
/// comes from: op ids are unique within a workspace only, so a receiver
/// that serves several keeps each one's effects, closes and reads apart.
pub trait Receiver {
    /// What the receiver says of itself: name, version, and its ceiling.
    fn describe(&mut self) -> Result<Description>;
    /// Performs the effect once and returns its receipt; refused
    /// `operation_closed` once the operation is closed.
    fn apply(&mut self, workspace: &str, request: &EffectRequest<'_>) -> Result<Effect>;
    /// Every effect the receiver holds for the operation, read without
    /// changing anything.
    fn query(&mut self, workspace: &str, op_id: &str) -> Result<Snapshot>;
    /// Closes the operation for good (no effect can be written for it
    /// afterwards) and returns what it held at that moment, in one step.
    fn close(&mut self, workspace: &str, op_id: &str, authorized_by: &str) -> Result<Snapshot>;
    /// [`Receiver::query`] for each of `op_ids`, in order (a batch): a
    /// receiver that can read them together does so.
    fn query_batch(&mut self, workspace: &str, op_ids: &[String]) -> Vec<Result<Snapshot>> {
        op_ids.iter().map(|id| self.query(workspace, id)).collect()
    }
    /// [`Receiver::close`] for each of `op_ids`, in order, each on its own.
    fn close_batch(
        &mut self,
        workspace: &str,
        op_ids: &[String],
        authorized_by: &str,
    ) -> Vec<Result<Snapshot>> {
        op_ids
            .iter()
            .map(|id| self.close(workspace, id, authorized_by))
            .collect()
    }
}

/// Exit code of a receiver that committed and then died before its receipt.
pub const EXIT_CRASH_AFTER_COMMIT: i32 = 23;
/// Exit code of a receiver that died before writing anything.
pub const EXIT_CRASH_BEFORE_COMMIT: i32 = 24;
/// The line a `--wait-permit` receiver prints once its database is open.
pub const READY_LINE: &str = "ready";

/// A receiver fault, for the experiment and for drills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    CrashAfterCommit,
    CrashBeforeCommit,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::CrashAfterCommit => "crash-after-commit",
            Fault::CrashBeforeCommit => "crash-before-commit",
        }
    }
}

/// The JSON line a receiver prints after its commit.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReceiptLine {
    pub receipt: Effect,
}

/// The arguments of `recon receiver apply`.
#[derive(Debug, Clone)]
pub struct ApplyArgs {
    pub workspace: PathBuf,
    pub op_id: String,
    pub action_kind: String,
    pub payload: Value,
    pub compensates_effect_id: Option<String>,
    pub fault: Option<Fault>,
    pub wait_permit: bool,
}

/// The arguments of `recon receiver adapter`.
#[derive(Debug, Clone)]
pub struct AdapterArgs {
    pub workspace: PathBuf,
    pub no_close: bool,
    /// One call of a verb, or a session.
    pub invocation: Invocation,
}

/// The built-in ledger's drills, read from request fields only it knows.
struct Drills {
    fault: Option<Fault>,
    wait_permit: bool,
}

impl Drills {
    fn of(request: &Value) -> Drills {
        Drills {
            fault: request
                .get("fault")
                .and_then(|f| serde_json::from_value(f.clone()).ok()),
            wait_permit: request.get("wait_permit") == Some(&Value::Bool(true)),
        }
    }
}

/// Serves the built-in ledger over `recon-adapter/1`: one call (the
/// request on stdin, the answer on stdout), or a session (request after
/// request, each answer echoing its request's `id`, until stdin ends; the
/// ledger is opened once, on the first request that needs it). Its drills
/// are request fields: with `"wait_permit": true` it prints `ready` and
/// waits for one more line before applying; `"fault"` makes it exit 24
/// before writing or 23 right after the commit, with no answer. An answer
/// refused at the ledger is also logged on stderr as `refused: <code>:
/// <detail>`. Returns the exit code, which is diagnostic only: 0 answered,
/// 3 refused, 4 the ledger could not be used (the codes of `recon receiver
/// apply`); a session ends with the code of its last answer.
pub fn serve_adapter(args: &AdapterArgs, options: OpenOptions) -> Result<i32> {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut serving = Serving {
        args,
        options,
        ledger: None,
    };
    let Invocation::Call(verb) = args.invocation else {
        let mut code = 0;
        while let Some(protocol::SessionRequest { id, request }) =
            protocol::next_session_request(&mut input)?
        {
            let answer = serving.reply(request, &mut input, &mut output)?;
            code = exit_code_of(&answer);
            protocol::write_line(&mut output, &protocol::with_id(answer, id))?;
        }
        return Ok(code);
    };
    let request = protocol::read_line(&mut input).map(|raw| (verb, raw));
    let answer = serving.reply(request, &mut input, &mut output)?;
    protocol::write_line(&mut output, &answer)?;
    Ok(exit_code_of(&answer))
}

/// The built-in adapter answering: its arguments, and its ledger once open.
struct Serving<'a> {
    args: &'a AdapterArgs,
    options: OpenOptions,
    ledger: Option<Builtin>,
}

impl Serving<'_> {
    /// The answer to one request as read (or to why it could not be
    /// read), a refusal logged on stderr as well.
    fn reply(
        &mut self,
        request: std::result::Result<(Verb, Value), protocol::Failed>,
        input: &mut dyn BufRead,
        output: &mut dyn Write,
    ) -> Result<Value> {
        let answer = match request {
            Ok((verb, raw)) => self.answer(verb, &raw, input, output)?,
            Err(failed) => protocol::failure_answer(&failed),
        };
        log_refusal(&answer);
        Ok(answer)
    }

    /// The answer to one request of `verb` (the raw request, for the
    /// drills it may carry).
    fn answer(
        &mut self,
        verb: Verb,
        raw: &Value,
        input: &mut dyn BufRead,
        output: &mut dyn Write,
    ) -> Result<Value> {
        let request = match protocol::parse_request(verb, raw) {
            Ok(request) => request,
            Err(failed) => return Ok(protocol::failure_answer(&failed)),
        };
        let ledger = match self.open_ledger() {
            Ok(ledger) => ledger,
            Err(error) => return Ok(failure_of(error)),
        };
        if let Request::Describe = request {
            return Ok(match ledger.served_description() {
                Ok(description) => protocol::describe_answer(&description),
                Err(error) => failure_of(error.into()),
            });
        }
        let drills = Drills::of(raw);
        if verb == Verb::Apply {
            drills.before_apply(input, output)?;
        }
        let answer = protocol::answer(ledger, &request);
        if verb == Verb::Apply && drills.fault == Some(Fault::CrashAfterCommit) {
            std::process::exit(EXIT_CRASH_AFTER_COMMIT);
        }
        Ok(answer)
    }
}

impl Serving<'_> {
    /// The ledger, opened at the first request that needs it and kept
    /// for the rest of a session.
    fn open_ledger(&mut self) -> Result<&mut Builtin> {
        let ledger = match self.ledger.take() {
            Some(ledger) => ledger,
            None if self.args.no_close => {
                Builtin::open(&self.args.workspace, self.options)?.without_close()
            }
            None => Builtin::open(&self.args.workspace, self.options)?,
        };
        Ok(self.ledger.insert(ledger))
    }
}

/// The failure answer for an error of the ledger itself.
fn failure_of(error: crate::error::Error) -> Value {
    protocol::failure_answer(&protocol::Failed {
        code: protocol::ErrorCode::of(&error),
        message: error.to_string(),
    })
}

/// The diagnostic exit code of an answer.
fn exit_code_of(answer: &Value) -> i32 {
    let code = answer["error"]["code"].as_str().and_then(ErrorCode::parse);
    match code {
        None => 0,
        Some(ErrorCode::Unavailable | ErrorCode::Internal) => 4,
        Some(_) => 3,
    }
}

impl Drills {
    fn before_apply(&self, input: &mut dyn BufRead, output: &mut dyn Write) -> Result<()> {
        if self.wait_permit {
            writeln!(output, "{READY_LINE}").and_then(|()| output.flush())?;
            let mut permit = String::new();
            input.read_line(&mut permit)?;
        }
        if self.fault == Some(Fault::CrashBeforeCommit) {
            std::process::exit(EXIT_CRASH_BEFORE_COMMIT);
        }
        Ok(())
    }
}

/// Writes a refusal answer to stderr too, the way `recon receiver apply`
/// reports one, so a person reading the log sees it.
fn log_refusal(answer: &Value) {
    if let Some(error) = answer.get("error") {
        let _ = writeln!(
            std::io::stderr(),
            "refused: {}: {}",
            error["code"].as_str().unwrap_or_default(),
            crate::domain::sanitize::escape(error["message"].as_str().unwrap_or_default())
        );
    }
}

/// Runs the receiver side of one call on the built-in ledger.
///
/// Under `crash-after-commit` the process exits with code 23 right after the
/// commit, through `std::process::exit`: no unwinding, no receipt, nothing on
/// stdout. Under `crash-before-commit` it exits with code 24 before writing
/// anything.
pub fn serve_apply(args: &ApplyArgs, options: OpenOptions) -> Result<()> {
    let mut ledger = Builtin::open(&args.workspace, options)?;
    if args.wait_permit {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{READY_LINE}").and_then(|()| out.flush())?;
        let mut permit = String::new();
        std::io::stdin().lock().read_line(&mut permit)?;
    }
    if args.fault == Some(Fault::CrashBeforeCommit) {
        std::process::exit(EXIT_CRASH_BEFORE_COMMIT);
    }
    let own = ledger.workspace_id()?;
    let effect = ledger.apply(
        &own,
        &EffectRequest {
            op_id: &args.op_id,
            action_kind: &args.action_kind,
            payload: &args.payload,
            compensates_effect_id: args.compensates_effect_id.as_deref(),
        },
    )?;
    if args.fault == Some(Fault::CrashAfterCommit) {
        std::process::exit(EXIT_CRASH_AFTER_COMMIT);
    }
    let line = serde_json::to_string(&ReceiptLine { receipt: effect })
        .map_err(|e| crate::error::StoreError::Corrupt(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())?;
    Ok(())
}
