//! One call of a `recon-adapter/1` program: spawn, one request line on its
//! stdin, one answer line read from its stdout with a bound, its stderr kept
//! (the last 64 KiB), its whole process group killed past the timeout.
//!
//! This is transport only. It turns every way a process can fail to answer
//! into an [`AdapterFailure`] (`spawn_failed`, `crash`, `timeout`,
//! `garbage`, `extra_output`, `oversize`), and hands a well-formed answer on
//! as JSON (read strictly: a duplicate key at any depth is `garbage`); what the answer may mean is judged by `receiver::rules`. Values
//! travel only on stdin, never on argv, so an op id or payload that begins
//! with `-` reaches the adapter intact. The exit code is kept for the
//! report and is never evidence.

use super::ReceiverProgram;
use crate::domain::{parse_json_input, AdapterFailure, FailureKind};
use crate::receiver::protocol::{write_line, Verb, MAX_LINE};
use crate::receiver::rules::failure;
use crate::receiver::READY_LINE;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver as Channel, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Why a program could not be started, with the usual fix when the cause
/// is plain: a file without its execute bit (`chmod +x`), or a script
/// whose `#!` interpreter is missing (the system says only "not found").
fn cannot_start(program: &Path, e: &std::io::Error) -> String {
    use std::os::unix::fs::PermissionsExt;
    let shown = program.display();
    let file = std::fs::metadata(program).ok().filter(|m| m.is_file());
    match (e.kind(), file) {
        (std::io::ErrorKind::PermissionDenied, Some(m)) if m.permissions().mode() & 0o111 == 0 => {
            format!("cannot start {shown}: it is not executable (chmod +x {shown})")
        }
        (std::io::ErrorKind::NotFound, Some(_)) => format!(
            "cannot start {shown}: {e}; the file is there, so the interpreter its #! line \
             names is missing"
        ),
        _ => format!("cannot start {shown}: {e}"),
    }
}

/// How much of an adapter's stderr is kept: its last 64 KiB.
pub const STDERR_TAIL: usize = 64 * 1024;
/// How long an adapter that has written its answer line may go on
/// running before its process group is killed (its answer still counts).
pub const LINGER: Duration = Duration::from_secs(1);

/// A program that speaks the protocol, as registered.
#[derive(Debug, Clone)]
pub struct AdapterProgram {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    /// What the child's environment holds besides the allowlist.
    pub env: PassEnv,
}

/// The variables an adapter runs with, besides [`ALLOWED_ENV`]: those its
/// registration names (`--env`), and for recon's own ledger, which is this
/// program, recon's own `RECON_*` settings and drills too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassEnv {
    pub names: Vec<String>,
    pub recon_own: bool,
}

/// The variables every adapter gets from recon's environment, when set:
/// enough to find programs, a home and a locale, nothing that names a
/// credential or the caller's directory.
pub const ALLOWED_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TZ"];

impl PassEnv {
    fn passes(&self, name: &str) -> bool {
        ALLOWED_ENV.contains(&name)
            || name.starts_with("LC_")
            || self.names.iter().any(|n| n == name)
            || (self.recon_own && name.starts_with("RECON_"))
    }
}

/// What an adapter call ended with.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The one answer line as JSON, or why there is none.
    pub answer: Result<Value, AdapterFailure>,
    /// `None` when recon killed the process, or a signal did.
    pub exit_code: Option<i32>,
    /// The end of what the adapter wrote on stderr (untrusted text).
    pub stderr: String,
}

enum Event {
    Line(Vec<u8>),
    Oversize,
    Eof,
}

/// An adapter process that has been started and not yet reaped.
pub struct Call {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Channel<Event>,
    stderr: Channel<Vec<u8>>,
    deadline: Instant,
    timed_out: bool,
}

impl AdapterProgram {
    /// Starts `PROGRAM ARG... VERB` and writes `request` on its stdin. With
    /// `hold_stdin` the pipe stays open (the built-in ledger's permit drill
    /// reads one more line); otherwise it is closed after the request.
    pub fn start(
        &self,
        counter: &ReceiverProgram,
        verb: Verb,
        request: &Value,
        hold_stdin: bool,
    ) -> Result<Call, AdapterFailure> {
        let mut call = self.spawn(counter, verb.as_str())?;
        // A child that died before reading its request breaks the pipe;
        // that shows as a crash when it is reaped, so it is not an error here.
        if let Some(stdin) = call.stdin.as_mut() {
            let _ = write_line(stdin, request);
        }
        if !hold_stdin {
            call.stdin = None;
        }
        Ok(call)
    }

    /// Starts `PROGRAM ARG... LAST` with its three pipes, counted.
    fn spawn(&self, counter: &ReceiverProgram, last: &str) -> Result<Call, AdapterFailure> {
        // A fixed, small world: `/` as the working directory, so a relative
        // path in the registration fails loudly instead of naming wherever
        // recon was started, and only the variables the allowlist and the
        // registration name, read now (values are never stored).
        let env = std::env::vars_os()
            .filter(|(name, _)| name.to_str().is_some_and(|name| self.env.passes(name)));
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .arg(last)
            .current_dir("/")
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| failure(FailureKind::SpawnFailed, cannot_start(&self.program, &e)))?;
        counter.count_spawn();
        let (events, stderr) = read_pipes(&mut child);
        Ok(Call {
            stdin: child.stdin.take(),
            child,
            events,
            stderr,
            deadline: Instant::now() + self.timeout,
            timed_out: false,
        })
    }

    /// One whole call: start, then wait for the answer.
    pub fn call(&self, counter: &ReceiverProgram, verb: Verb, request: &Value) -> Reply {
        match self.start(counter, verb, request, false) {
            Ok(call) => call.finish(),
            Err(failure) => Reply {
                answer: Err(failure),
                exit_code: None,
                stderr: String::new(),
            },
        }
    }
}

/// Reads stdout as bounded lines and stderr as a bounded tail, each on its
/// own thread, so a chatty child never blocks on a full pipe.
fn read_pipes(child: &mut Child) -> (Channel<Event>, Channel<Vec<u8>>) {
    let (line_tx, events) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                let read = (&mut reader)
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut line);
                let event = match read {
                    Ok(0) | Err(_) => Event::Eof,
                    Ok(_) if line.len() > MAX_LINE => Event::Oversize,
                    Ok(_) => Event::Line(line),
                };
                let end = matches!(event, Event::Eof);
                if line_tx.send(event).is_err() || end {
                    break;
                }
            }
        });
    }
    let (tail_tx, stderr) = mpsc::channel();
    if let Some(mut pipe) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut tail = Vec::new();
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > 2 * STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
            let start = tail.len().saturating_sub(STDERR_TAIL);
            let _ = tail_tx.send(tail.split_off(start));
        });
    }
    (events, stderr)
}

impl Call {
    /// The next stdout event, or the end when the deadline passes (the
    /// process group is then killed).
    fn next(&mut self) -> Event {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(left) {
            Ok(event) => event,
            Err(RecvTimeoutError::Disconnected) => Event::Eof,
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Event::Eof
            }
        }
    }

    fn kill(&mut self) {
        self.timed_out = true;
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group
            // this child leads (it was started with process_group(0)); it
            // touches no memory of ours.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
    }

    /// Waits for the `ready` line of the built-in ledger's permit drill.
    pub fn await_ready(&mut self) -> Result<(), String> {
        match self.next() {
            Event::Line(line) if line.trim_ascii() == READY_LINE.as_bytes() => Ok(()),
            Event::Line(line) => Err(format!(
                "expected `{READY_LINE}`, got {:?}",
                String::from_utf8_lossy(&line)
            )),
            Event::Oversize | Event::Eof => Err(format!("no `{READY_LINE}` line came")),
        }
    }

    /// Sends the permit line of the drill; a child that already died
    /// cannot read it, which shows when it is reaped.
    pub fn permit(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"go\n").and_then(|()| stdin.flush());
        }
    }

    /// Reads the answer, drains the rest, and reaps the process. A complete
    /// answer line counts even when the adapter lingers after it: it then
    /// has [`LINGER`] (within its timeout) to exit before its process
    /// group is killed, and only what it writes meanwhile can spoil it.
    pub fn finish(mut self) -> Reply {
        self.stdin = None;
        let first = self.next();
        let answered = matches!(first, Event::Line(_)) && !self.timed_out;
        if answered {
            self.deadline = self.deadline.min(Instant::now() + LINGER);
        }
        let mut extra = false;
        loop {
            match self.next() {
                Event::Eof => break,
                Event::Oversize => extra = true,
                Event::Line(line) => extra |= !line.trim_ascii().is_empty(),
            }
        }
        let status = self.reap();
        let answer = match first {
            _ if self.timed_out && !answered => Err(timed_out()),
            Event::Oversize => Err(oversize()),
            Event::Eof => Err(crashed(status)),
            Event::Line(_) if extra => Err(failure(
                FailureKind::ExtraOutput,
                "the adapter wrote more than one line",
            )),
            Event::Line(line) => parse_json_input(&line)
                .map_err(|e| failure(FailureKind::Garbage, format!("the answer {e}"))),
        };
        let stderr = self.stderr_tail();
        Reply {
            answer,
            exit_code: if self.timed_out { None } else { status },
            stderr,
        }
    }

    /// What the adapter wrote on stderr, its last 64 KiB, once the pipe
    /// has closed (waited for a second at most).
    fn stderr_tail(&self) -> String {
        let tail = self
            .stderr
            .recv_timeout(Duration::from_secs(1))
            .unwrap_or_default();
        String::from_utf8_lossy(&tail).into_owned()
    }

    fn reap(&mut self) -> Option<i32> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.code(),
                Ok(None) if Instant::now() >= self.deadline => self.kill(),
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Call {
    /// A call dropped before it finished must not leave its process behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
            let _ = self.child.wait();
        }
    }
}

/// The word that starts an adapter as a session.
pub const SESSION_VERB: &str = "session";

/// One adapter process answering request after request, for one command
/// (SPEC 8, "Sessions and batches"): `PROGRAM ARG... session`, started on
/// the first request. Each request line carries `"verb"` and an `"id"`
/// recon chooses, one in flight; its answer must echo the id. The timeout
/// is per request. A request whose answer does not come as one JSON line
/// echoing its id fails exactly as a one-shot call would (`crash`,
/// `timeout`, `garbage`, `oversize`; an answer with another request's id is
/// `extra_output`), the process is ended there, and the next request starts
/// a fresh one. Dropping the session closes the child's stdin and gives it
/// [`LINGER`] to exit before its process group is killed; it is reaped.
pub struct Session {
    program: AdapterProgram,
    live: Option<Call>,
    next_id: u64,
}

impl Session {
    pub fn new(program: AdapterProgram) -> Self {
        Session {
            program,
            live: None,
            next_id: 1,
        }
    }

    /// Whether a process is running for this session now.
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// One request of `verb` through the session. The answer is handed on
    /// without its `id`, so it is the answer a one-shot call would have
    /// given, and hashes as one.
    pub fn request(&mut self, counter: &ReceiverProgram, verb: Verb, request: &Value) -> Reply {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = request.clone();
        if let Value::Object(fields) = &mut line {
            fields.insert("verb".into(), Value::from(verb.as_str()));
            fields.insert("id".into(), Value::from(id));
        }
        let call = match self.live.take() {
            Some(call) => call,
            None => match self.program.spawn(counter, SESSION_VERB) {
                Ok(call) => call,
                Err(failure) => {
                    return Reply {
                        answer: Err(failure),
                        exit_code: None,
                        stderr: String::new(),
                    }
                }
            },
        };
        let mut call = call;
        call.deadline = Instant::now() + self.program.timeout;
        if let Some(stdin) = call.stdin.as_mut() {
            // A child that died cannot read it: that shows as a crash.
            let _ = write_line(stdin, &line);
        }
        let event = loop {
            match call.next() {
                Event::Line(line) if line.trim_ascii().is_empty() => {}
                event => break event,
            }
        };
        let answer = match event {
            _ if call.timed_out => Err(timed_out()),
            Event::Line(line) => match echoed(&line, id) {
                Ok(answer) => {
                    self.live = Some(call);
                    return Reply {
                        answer: Ok(answer),
                        exit_code: None,
                        stderr: String::new(),
                    };
                }
                Err(failure) => Err(failure),
            },
            Event::Oversize => Err(oversize()),
            // The pipe closed: the exit code tells a crash, when it comes.
            Event::Eof => Ok(()),
        };
        call.stdin = None;
        call.deadline = call.deadline.min(Instant::now() + LINGER);
        if answer.is_err() {
            // It answered wrongly: nothing it says now can help.
            call.deadline = Instant::now();
        }
        let status = call.reap();
        let failure = answer.err().unwrap_or_else(|| crashed(status));
        Reply {
            answer: Err(failure),
            exit_code: if call.timed_out { None } else { status },
            stderr: call.stderr_tail(),
        }
    }
}

/// The answer line of request `id`, parsed strictly, without its `id`.
fn echoed(line: &[u8], id: u64) -> Result<Value, AdapterFailure> {
    let mut answer = parse_json_input(line)
        .map_err(|e| failure(FailureKind::Garbage, format!("the answer {e}")))?;
    let echoed = answer
        .as_object_mut()
        .and_then(|fields| fields.remove("id"));
    match echoed.as_ref().and_then(Value::as_u64) {
        Some(n) if n == id => Ok(answer),
        Some(n) if n < id => Err(failure(
            FailureKind::ExtraOutput,
            format!("the adapter wrote a line for an earlier request (id {n}) when request {id} was in flight"),
        )),
        Some(n) => Err(failure(
            FailureKind::ExtraOutput,
            format!("the answer names request {n}, not request {id}, the one in flight"),
        )),
        None => Err(failure(
            FailureKind::Garbage,
            format!("the answer does not echo the id of its request ({id})"),
        )),
    }
}

fn timed_out() -> AdapterFailure {
    failure(
        FailureKind::Timeout,
        "the adapter ran past its timeout; its process group was killed",
    )
}

fn oversize() -> AdapterFailure {
    failure(
        FailureKind::Oversize,
        format!("the answer is longer than {MAX_LINE} bytes"),
    )
}

fn crashed(status: Option<i32>) -> AdapterFailure {
    failure(
        FailureKind::Crash,
        match status {
            Some(code) => format!("the adapter exited with code {code} and no answer"),
            None => "the adapter was killed by a signal before answering".to_string(),
        },
    )
}

impl Drop for Session {
    /// The end of the command: stdin closed, [`LINGER`] to exit, then the
    /// process group killed; the child is reaped either way.
    fn drop(&mut self) {
        if let Some(mut call) = self.live.take() {
            call.stdin = None;
            call.deadline = Instant::now() + LINGER;
            call.reap();
        }
    }
}
