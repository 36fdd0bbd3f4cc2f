//! The receiver client: the only code that spawns a receiver process and
//! reads what it printed.
//!
//! The facade commits `unknown` (with its dispatch record) first and only
//! then starts the apply (`Workspace::start_apply`): the built-in ledger's
//! through [`spawn`], which starts `recon receiver apply` as a child
//! process of the same binary, an adapter's through [`adapter`]. A receipt
//! is a JSON line on the child's stdout; nothing else is evidence
//! (`workspace::receivers::judge_apply` judges it). The child's
//! exit code is reported as a test-harness signal and never read as a
//! receipt. Ordering between processes comes from pipes: the `ready` line
//! and the permit line. Timeouts only bound hung children.
//!
//! The child's own side lives with the receivers (`receiver::serve_apply`).
//!
//! One receiver's `apply` may be answered without a child: a running
//! `recon mcp --gateway` lends its downstream through [`InProcessApply`],
//! asked at the same point, after `unknown` is committed, and judged by
//! the same rules.

pub mod adapter;

use crate::domain::{canonical_json, AdapterFailure, Effect, OpState, Operation, Registration};
use crate::error::{Error, Refusal, StoreError};
use crate::receiver::{Fault, ReceiptLine, READY_LINE};
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver as Channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Payloads up to this size travel as a command-line argument; larger ones
/// through a temporary file, since one argument is limited to 128 KiB.
const INLINE_PAYLOAD_LIMIT: usize = 32 * 1024;

/// How to run the receiver child: which program, and how long a child may
/// run before it counts as hung and is killed. Clones share one count of
/// the children spawned, so a caller can observe that a refused dispatch
/// spawned none.
#[derive(Debug, Clone)]
pub struct ReceiverProgram {
    pub program: PathBuf,
    pub timeout: Duration,
    spawned: Arc<AtomicUsize>,
    /// The count of the program this one was scoped from, if any.
    parent: Option<Arc<AtomicUsize>>,
}

impl ReceiverProgram {
    pub fn new(program: PathBuf, timeout: Duration) -> Self {
        ReceiverProgram {
            program,
            timeout,
            spawned: Arc::default(),
            parent: None,
        }
    }

    /// The running binary, which is `recon` itself outside tests.
    pub fn current() -> Result<Self, StoreError> {
        Ok(Self::new(std::env::current_exe()?, Duration::from_secs(30)))
    }

    /// The same program with its own count of children, which also adds to
    /// this one's: scenarios running side by side each see only their own.
    pub fn scoped(&self) -> Self {
        ReceiverProgram {
            parent: Some(Arc::clone(&self.spawned)),
            ..Self::new(self.program.clone(), self.timeout)
        }
    }

    /// Counts one child started through this program.
    pub(crate) fn count_spawn(&self) {
        self.spawned.fetch_add(1, Ordering::SeqCst);
        if let Some(parent) = &self.parent {
            parent.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How many receiver children were spawned through this program and its
    /// clones.
    pub fn spawned(&self) -> usize {
        self.spawned.load(Ordering::SeqCst)
    }
}

/// One call of the receiver.
#[derive(Debug, Clone)]
pub struct ReceiverCall<'a> {
    pub op_id: &'a str,
    pub action_kind: &'a str,
    pub payload: &'a Value,
    pub compensates_effect_id: Option<&'a str>,
    pub fault: Option<Fault>,
    pub wait_permit: bool,
}

impl<'a> ReceiverCall<'a> {
    pub fn for_operation(op: &'a Operation) -> Self {
        ReceiverCall {
            op_id: &op.op_id,
            action_kind: &op.action_kind,
            payload: &op.payload,
            compensates_effect_id: op.compensates_effect_id.as_deref(),
            fault: None,
            wait_permit: false,
        }
    }
}

/// What came back from a receiver child.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildOutcome {
    /// `None` when the child was killed by a signal.
    pub exit_code: Option<i32>,
    pub receipt: Option<Effect>,
    /// Bytes the child wrote on stdout besides the `ready` line.
    pub stdout_bytes: usize,
    pub stderr: String,
}

/// A receiver child that has been spawned and not yet reaped.
pub struct InFlight {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Channel<String>,
    stderr: std::thread::JoinHandle<String>,
    deadline: Instant,
    _payload_file: Option<tempfile::NamedTempFile>,
}

/// Spawns `recon receiver apply` for one call. With `wait_permit`, returns
/// once the child has printed `ready`: its database is open and it is
/// blocked until [`InFlight::permit`].
pub fn spawn(
    program: &ReceiverProgram,
    workspace: &Path,
    call: &ReceiverCall<'_>,
) -> Result<InFlight, StoreError> {
    let (command, payload_file) = apply_command(program, workspace, call)?;
    let mut in_flight = start(program, command, call.wait_permit)?;
    in_flight._payload_file = payload_file;
    if call.wait_permit {
        in_flight = in_flight.await_ready()?;
    }
    Ok(in_flight)
}

/// The command line of one `recon receiver apply`. Every value travels
/// joined to its flag (`--op=VALUE`), so one that begins with `-` is read
/// as the value it is, never as a flag. A payload too large for one
/// argument travels in a temporary file that must outlive the child.
fn apply_command(
    program: &ReceiverProgram,
    workspace: &Path,
    call: &ReceiverCall<'_>,
) -> Result<(Command, Option<tempfile::NamedTempFile>), StoreError> {
    let payload = canonical_json(call.payload);
    let mut command = Command::new(&program.program);
    command
        .args(["receiver", "apply"])
        .arg(joined("--workspace=", workspace.as_os_str()))
        .arg(format!("--op={}", call.op_id))
        .arg(format!("--action={}", call.action_kind));
    let payload_file = if payload.len() <= INLINE_PAYLOAD_LIMIT {
        command.arg(format!("--payload={payload}"));
        None
    } else {
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(payload.as_bytes())?;
        file.flush()?;
        command.arg(joined("--payload=@", file.path().as_os_str()));
        Some(file)
    };
    if let Some(effect) = call.compensates_effect_id {
        command.arg(format!("--compensates={effect}"));
    }
    if let Some(fault) = call.fault {
        command.arg(format!("--fault={}", fault.as_str()));
    }
    if call.wait_permit {
        command.arg("--wait-permit");
    }
    Ok((command, payload_file))
}

/// A flag and its value as one argument, the value any bytes at all.
fn joined(flag: &str, value: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut arg = std::ffi::OsString::from(flag);
    arg.push(value);
    arg
}

/// Starts the child with its three pipes (stdin only when it waits for a
/// permit), counts it, and reads its stdout lines and stderr on threads so
/// that a child writing a lot can never block on a full pipe.
fn start(
    program: &ReceiverProgram,
    mut command: Command,
    wait_permit: bool,
) -> Result<InFlight, StoreError> {
    let mut child = command
        .stdin(if wait_permit {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            StoreError::Receiver(format!("cannot start {}: {e}", program.program.display()))
        })?;
    program.count_spawn();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| StoreError::Receiver("no stdout pipe".into()))?;
    let mut stderr_pipe = child
        .stderr
        .take()
        .ok_or_else(|| StoreError::Receiver("no stderr pipe".into()))?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    Ok(InFlight {
        stdin: child.stdin.take(),
        child,
        lines,
        stderr,
        deadline: Instant::now() + program.timeout,
        _payload_file: None,
    })
}

impl InFlight {
    /// Waits for the `ready` line of a child that waits for a permit.
    fn await_ready(mut self) -> Result<Self, StoreError> {
        match self.next_line()? {
            Some(line) if line == READY_LINE => Ok(self),
            other => {
                let outcome = self.finish()?;
                Err(StoreError::Receiver(format!(
                    "expected `{READY_LINE}`, got {other:?} (exit {:?}): {}",
                    outcome.exit_code,
                    outcome.stderr.trim()
                )))
            }
        }
    }

    fn next_line(&mut self) -> Result<Option<String>, StoreError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Err(StoreError::Receiver(
                    "the receiver child hung past its timeout and was killed".into(),
                ))
            }
        }
    }

    /// Lets a `--wait-permit` child go on with its write.
    pub fn permit(&mut self) -> Result<(), StoreError> {
        let mut stdin = self
            .stdin
            .take()
            .ok_or_else(|| StoreError::Receiver("this child does not wait for a permit".into()))?;
        // A child that already died cannot read the permit; that shows in
        // its exit code, so a broken pipe here is not an error.
        let _ = stdin.write_all(b"go\n").and_then(|()| stdin.flush());
        Ok(())
    }

    /// Reads the rest of the child's stdout, reaps it, and parses a receipt
    /// if one was printed.
    pub fn finish(mut self) -> Result<ChildOutcome, StoreError> {
        drop(self.stdin.take());
        let mut stdout = String::new();
        while let Some(line) = self.next_line()? {
            stdout.push_str(&line);
            stdout.push('\n');
        }
        let status = self.child.wait()?;
        let stderr = self.stderr.join().unwrap_or_default();
        let receipt = stdout
            .lines()
            .filter_map(|line| crate::domain::parse_json(line).ok())
            .find_map(|value| serde_json::from_value::<ReceiptLine>(value).ok())
            .map(|line| line.receipt);
        Ok(ChildOutcome {
            exit_code: status.code(),
            receipt,
            stdout_bytes: stdout.len(),
            stderr,
        })
    }
}

/// What one dispatch did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatchReport {
    pub op_id: String,
    /// The receiver the operation routes to.
    pub receiver: String,
    /// `receipt` when a receipt came back, `unknown` when it did not.
    pub outcome: &'static str,
    /// Diagnostic only; `None` when recon killed the child or it never ran.
    pub receiver_exit_code: Option<i32>,
    pub effect_id: Option<String>,
    pub state: OpState,
    pub version: i64,
    /// Why no receipt counts, when none does.
    pub adapter_failure: Option<AdapterFailure>,
    #[serde(skip)]
    pub receiver_stderr: String,
    /// A receipt that reached an operation already decided (SPEC 12):
    /// journaled, changing no state; present only then.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub late: bool,
    /// For a late receipt: whether it contradicts the decision and raised
    /// the contradiction marker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contradicts: Option<bool>,
}

/// A dispatch whose `unknown` state is committed and whose receiver call is
/// under way (or failed to start, which is reported, not raised).
pub struct PendingDispatch {
    pub operation: Operation,
    pub child: AdapterCall,
    pub(crate) registration: Registration,
}

/// The adapter call of a dispatch.
pub struct AdapterCall(pub(crate) Applying);

/// How a dispatch's `apply` goes: a child of the receiver's program, or
/// already answered in this process ([`InProcessApply`]).
pub(crate) enum Applying {
    Child(Result<adapter::Call, AdapterFailure>),
    Answered(adapter::Reply),
}

impl AdapterCall {
    /// Lets the built-in ledger's permit drill go on with its write.
    pub fn permit(&mut self) -> Result<(), StoreError> {
        if let Applying::Child(Ok(call)) = &mut self.0 {
            call.permit();
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> adapter::Reply {
        match self.0 {
            Applying::Child(Ok(call)) => call.finish(),
            Applying::Child(Err(failure)) => adapter::Reply {
                answer: Err(failure),
                exit_code: None,
                stderr: String::new(),
            },
            Applying::Answered(reply) => reply,
        }
    }
}

/// A receiver's `apply` answered in this process instead of by a child
/// of its program: a running `recon mcp --gateway` applies its effect
/// calls through its own downstream. It is given the request line the
/// program would have read, after `unknown` is committed, and answers
/// the line the program would have written (judged by the same rules), or
/// why none came; it never sends a request twice.
pub trait InProcessApply: Send {
    /// Whether it answers for `registration` (as registered now).
    fn serves(&self, registration: &Registration) -> bool;
    /// One `apply` request, answered within `timeout` (the registration's,
    /// as a child's would be): the reply has no exit code and no stderr.
    fn apply(&self, request: &Value, timeout: Duration) -> adapter::Reply;
}

/// Options for one dispatch: the built-in ledger's drills.
#[derive(Debug, Clone, Copy, Default)]
pub struct DispatchOptions {
    pub fault: Option<Fault>,
    pub wait_permit: bool,
}

impl DispatchOptions {
    pub fn has_drills(&self) -> bool {
        self.fault.is_some() || self.wait_permit
    }

    /// Adds the drills to an apply request, as fields only the built-in
    /// ledger reads.
    pub fn add_to(&self, request: &mut Value) {
        if let Value::Object(fields) = request {
            if let Some(fault) = self.fault {
                fields.insert("fault".into(), Value::from(fault.as_str()));
            }
            if self.wait_permit {
                fields.insert("wait_permit".into(), Value::Bool(true));
            }
        }
    }
}

/// Is this error the receiver's close barrier?
pub fn is_operation_closed(error: &Error) -> bool {
    matches!(error.refusal(), Some(Refusal::OperationClosed(_)))
}
