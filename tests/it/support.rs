//! Shared helpers: fresh workspaces in temp dirs, the built `recon` binary,
//! and a deterministic dump of both databases to prove "nothing changed".
//!
//! Expensive fixtures are made once per test process and shared: the runs
//! of the scripted experiment that tests only read, and each demo workspace
//! (by its number of generated ops), which every test gets as its own copy.

#![allow(dead_code)]

use recon::dispatch::{DispatchOptions, PendingDispatch, ReceiverProgram};
use recon::receiver::Fault;
use recon::OpenOptions;
use recon::Workspace;
use rusqlite::Connection;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Every refusal code of SPEC.md, written out here independently of
/// `Refusal::code()` so the tests check the library against the contract.
pub const REFUSAL_CODES: [&str; 22] = [
    "empty_reviewer",
    "scope_mismatch",
    "unsupported_verdict",
    "stale_version",
    "not_unknown",
    "blind_retry",
    "operation_closed",
    "unknown_operation",
    "duplicate_operation",
    "original_not_confirmed",
    "compensation_effect_mismatch",
    "already_approved",
    "compensation_not_approved",
    "compensation_action_mismatch",
    // SPEC 8: receivers.
    "close_unsupported",
    "reserved_name",
    "adapter_malformed",
    "adapter_unknown_capability",
    "receiver_exists",
    "action_routed",
    "receiver_in_use",
    "unknown_receiver",
];

/// The misbehaving `recon-adapter/1` receiver the adapter tests drive.
pub fn adapter_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/adapter.py")
}

pub fn recon_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_recon"))
}

/// The built binary as the receiver child (the test binary is not recon).
pub fn program() -> ReceiverProgram {
    ReceiverProgram::new(recon_bin(), Duration::from_secs(60))
}

/// Registers recon's own ledger for every action kind, as `demo` does: no
/// receiver is implicit, so a new workspace routes nothing until then.
pub fn with_ledger(mut ws: Workspace) -> Workspace {
    ws.register_builtin("builtin", &["*".to_string()], true)
        .expect("register the built-in ledger");
    ws
}

/// A fresh workspace in its own temp dir, removed on drop.
pub struct Lab {
    pub dir: tempfile::TempDir,
    pub ws: Workspace,
}

impl Lab {
    pub fn new() -> Lab {
        let dir = tempfile::tempdir().expect("temp dir");
        let ws = Workspace::open(dir.path(), OpenOptions::default().creating())
            .expect("create workspace")
            .with_receiver_program(program());
        Lab {
            ws: with_ledger(ws),
            dir,
        }
    }

    /// A fresh copy of the demo workspace with `extra_ops` generated ops
    /// (see [`copy_demo`]), in its own temp dir.
    pub fn demo(extra_ops: u64) -> Lab {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_demo(extra_ops, dir.path());
        let ws = Workspace::open(dir.path(), OpenOptions::default())
            .expect("open demo workspace")
            .with_receiver_program(program());
        Lab { dir, ws }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A second, independent handle on the same workspace.
    pub fn reopen(&self) -> Workspace {
        Workspace::open(self.path(), OpenOptions::default())
            .expect("reopen workspace")
            .with_receiver_program(program())
    }

    pub fn path_str(&self) -> String {
        self.path().display().to_string()
    }

    /// Prepares `op_id` and dispatches it once, with an optional receiver
    /// fault: confirmed by its receipt, or `unknown` at version 2.
    pub fn dispatched(&mut self, op_id: &str, action: &str, payload: &Value, fault: Option<Fault>) {
        self.ws.prepare(op_id, action, payload).expect("prepare");
        self.ws
            .dispatch(
                op_id,
                DispatchOptions {
                    fault,
                    wait_permit: false,
                },
            )
            .expect("dispatch");
    }

    /// Starts dispatching the prepared `op_id`: `unknown` is committed and
    /// the receiver child is running, held before its write until the
    /// returned dispatch's child is given its permit.
    pub fn held_dispatch(&mut self, op_id: &str) -> PendingDispatch {
        self.ws
            .start_dispatch(
                op_id,
                DispatchOptions {
                    fault: None,
                    wait_permit: true,
                },
            )
            .expect("start dispatch")
    }
}

/// The time the shared demo workspaces are built at, still: a demo built
/// at one clock time is the same demo, byte for byte.
pub const DEMO_TIME: &str = "2026-12-03T08:00:00.000Z";

/// A clock stopped at [`DEMO_TIME`].
pub fn demo_clock() -> std::sync::Arc<recon::clock::FixedClock> {
    let at = recon::domain::Timestamp::parse(DEMO_TIME).expect("DEMO_TIME is a time");
    std::sync::Arc::new(recon::clock::FixedClock::at(at))
}

/// Every file of a closed demo workspace, by name: what
/// `recon::demo::build(ws, extra_ops)` leaves in a fresh workspace.
struct DemoTemplate {
    files: Vec<(OsString, Vec<u8>)>,
}

impl DemoTemplate {
    /// Builds the demo for real (showcase with its receiver children, then
    /// `extra_ops` generated ops), closes the workspace so that every
    /// connection has checkpointed and let go of its WAL, and keeps every
    /// file the directory then holds. The directory itself is removed.
    fn build(extra_ops: u64) -> DemoTemplate {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut ws = Workspace::open(dir.path(), OpenOptions::default().creating())
            .expect("create workspace")
            .with_receiver_program(program())
            .with_clock(demo_clock());
        recon::demo::build(&mut ws, extra_ops).expect("demo");
        drop(ws);
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir.path()).expect("read demo dir") {
            let entry = entry.expect("demo dir entry");
            assert!(
                entry.file_type().expect("file type").is_file(),
                "{:?} is not a file",
                entry.path()
            );
            let bytes = std::fs::read(entry.path()).expect("read demo file");
            files.push((entry.file_name(), bytes));
        }
        assert!(
            files.iter().any(|(name, _)| name == "sender.sqlite")
                && files.iter().any(|(name, _)| name == "receiver.sqlite"),
            "the demo left both databases"
        );
        DemoTemplate { files }
    }
}

/// The demo with `extra_ops` generated ops, built once per test process.
fn demo_template(extra_ops: u64) -> &'static DemoTemplate {
    static TEMPLATES: Mutex<BTreeMap<u64, &'static OnceLock<DemoTemplate>>> =
        Mutex::new(BTreeMap::new());
    // Only the lookup holds the map's lock: different demos build at once,
    // and a second test wanting the same demo waits for the first build.
    let cell: &'static OnceLock<DemoTemplate> = TEMPLATES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(extra_ops)
        .or_insert_with(|| Box::leak(Box::default()));
    cell.get_or_init(|| DemoTemplate::build(extra_ops))
}

/// Writes a fresh copy of the demo workspace with `extra_ops` generated ops
/// into `dir` (created if missing): the same files, byte for byte, that
/// `recon::demo::build` left in its own workspace once closed. The demo is
/// built once per test process; every caller gets its own copy.
pub fn copy_demo(extra_ops: u64, dir: &Path) {
    std::fs::create_dir_all(dir).expect("create workspace dir");
    for (name, bytes) in &demo_template(extra_ops).files {
        std::fs::write(dir.join(name), bytes).expect("copy demo file");
    }
}

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Runs `recon ARGS` with optional stdin and returns exit code and output.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Run {
    run_with_env(args, stdin, &[])
}

pub fn run_with_env(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(recon_bin());
    command.args(args).envs(env.iter().copied());
    let out = output_of(command, stdin);
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a prepared command to its end with `stdin` (or none) and its
/// output captured. Standard input is fed from a thread, so an input larger
/// than a pipe cannot deadlock against the child's output; a child that
/// exits before reading everything has given its answer.
/// `recon export` of the workspace to a file, then `recon verify --against`
/// that file with `extra` flags: the export and the verify runs.
#[track_caller]
pub fn export_then_verify_against(dir: &Path, extra: &[&str]) -> (Run, Run) {
    let ws = dir.display().to_string();
    let export = run(&["export", "--workspace", &ws], None);
    assert_eq!(export.code, Some(0), "{}", export.stderr);
    let kept = dir.join("kept.jsonl");
    std::fs::write(&kept, &export.stdout).expect("write the export");
    let kept = kept.display().to_string();
    let args = [
        &["verify", "--workspace", &ws, "--against", &kept][..],
        extra,
    ]
    .concat();
    let verified = run(&args, None);
    (export, verified)
}

pub fn output_of(mut command: Command, stdin: Option<&[u8]>) -> std::process::Output {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn recon");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        let input = input.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    child.wait_with_output().expect("wait for recon")
}

/// `recon experiment`, run once per test process and shared by the tests
/// that read its output.
pub fn experiment_run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| run(&["experiment"], None))
}

/// One run of `recon --check --output PATH` against the compiled-in
/// results: what it printed and the file it wrote.
pub struct CheckRun {
    pub run: Run,
    pub written: String,
}

/// `recon --check --output PATH`, run once per test process and shared by
/// the tests that read its exit, its report or the file it wrote.
pub fn check_run() -> &'static CheckRun {
    static RUN: OnceLock<CheckRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("reproduced.json");
        let run = run(&["--check", "--output", path.to_str().unwrap()], None);
        let written = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "--check --output wrote nothing ({e}): {}{}",
                run.stdout, run.stderr
            )
        });
        CheckRun { run, written }
    })
}

/// The expected results with two facts changed: the effects of
/// `receipt_lost_after_commit` (actually 1) are 7, and the receiver child
/// processes (actually 23) are 1.
pub fn tampered_results() -> Value {
    let mut expected: Value =
        serde_json::from_str(recon::experiment::EXPECTED_RESULTS).expect("results.json");
    expected["scenarios"]["receipt_lost_after_commit"]["effects"] = Value::from(7);
    expected["receiver_child_processes"] = Value::from(1);
    expected
}

/// `recon --check FILE` with [`tampered_results`] in FILE, run once per
/// test process and shared by the tests that read how it reports the
/// mismatch.
pub fn tampered_check_run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tampered.json");
        let text = serde_json::to_string_pretty(&tampered_results()).unwrap();
        std::fs::write(&path, text).expect("write tampered results");
        run(&["--check", path.to_str().unwrap()], None)
    })
}

/// Every row of every table of both databases, in a stable order: equal
/// dumps mean nothing was written.
pub fn dump(dir: &Path) -> String {
    let mut out = String::new();
    for file in ["sender.sqlite", "receiver.sqlite"] {
        let path = dir.join(file);
        if !path.exists() {
            out.push_str(&format!("{file}: absent\n"));
            continue;
        }
        let conn = Connection::open(&path).expect("open for dump");
        let mut tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type IN ('table','trigger','index') ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        tables.sort();
        for table in tables {
            out.push_str(&format!("{file}/{table}\n"));
            let is_table: bool = conn
                .query_row(
                    "SELECT type = 'table' FROM sqlite_master WHERE name = ?1",
                    [&table],
                    |r| r.get(0),
                )
                .unwrap();
            if !is_table {
                continue;
            }
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM \"{table}\" ORDER BY 1"))
                .unwrap();
            let n = stmt.column_count();
            let rows = stmt
                .query_map([], |r| {
                    let mut line = Vec::new();
                    for i in 0..n {
                        let v: rusqlite::types::Value = r.get(i)?;
                        line.push(format!("{v:?}"));
                    }
                    Ok(line.join("|"))
                })
                .unwrap();
            for row in rows {
                out.push_str(&row.unwrap());
                out.push('\n');
            }
        }
    }
    out
}

/// The provenance of a snapshot made up by a test rather than read from a
/// receiver.
pub fn unknown_provenance() -> recon::domain::Provenance {
    recon::domain::Provenance {
        receiver: "builtin".into(),
        receiver_describe_sha256: "0".repeat(64),
        response_sha256: "0".repeat(64),
        ..Default::default()
    }
}

/// A fifo at `path` (how a test and a held adapter meet without sleeps).
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The line a held adapter writes to the fifo at `path`, read whole.
pub fn read_fifo(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read the fifo")
}

/// Whether the process `pid` still catches SIGINT: recon installs its
/// handler with `SA_RESETHAND`, so the kernel drops it as it delivers the
/// first one.
pub fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let caught = (status.lines())
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .expect("SigCgt");
    let mask = u64::from_str_radix(caught.trim(), 16).expect("a mask");
    mask & (1 << (libc::SIGINT - 1)) != 0
}

/// Sends SIGINT to `pid` and waits until it was delivered (the handler is
/// gone), so nothing the test does next can race it.
pub fn interrupt(pid: u32) {
    // SAFETY: kill with a live child's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    while catches_sigint(pid) {
        std::thread::yield_now();
    }
}

/// A Python virtual environment with `packages` installed from PyPI, made
/// once under the target directory and reused by every later test run:
/// its `python`. Its directory is named after the packages, so each list
/// has one of its own. Parallel tests (threads of this process, or other
/// test processes) wait for the one that makes it, behind a lock file;
/// a venv is ready only once its `.ready` mark is written, so one left
/// half made by a killed run is made again.
pub fn python_venv(packages: &[&str]) -> Result<PathBuf, String> {
    static MAKING: Mutex<()> = Mutex::new(());
    let name: String = (packages.join("+").chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = root.join(format!("venv-{name}"));
    let python = dir.join("bin").join("python");
    let ready = dir.join(".ready");
    if ready.exists() {
        return Ok(python);
    }
    let _in_process = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let lock_path = root.join(format!("venv-{name}.lock"));
    let lock = std::fs::File::create(&lock_path).map_err(|e| format!("the venv lock: {e}"))?;
    // SAFETY: flock on a file this function holds open; the lock is
    // released when `lock` is closed at the end of the function.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "the venv lock: {}",
            std::io::Error::last_os_error()
        ));
    }
    if ready.exists() {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let made = |mut command: Command, what: &str| -> Result<(), String> {
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&out.stderr);
        let last = said.lines().last().unwrap_or_default().to_string();
        Err(format!("{what} failed ({}): {last}", out.status))
    };
    let mut venv = Command::new("python3");
    venv.args(["-m", "venv"]).arg(&dir);
    made(venv, "python3 -m venv")?;
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .args(packages);
    made(pip, &format!("pip install {}", packages.join(" ")))?;
    std::fs::write(&ready, packages.join("\n")).map_err(|e| format!("the venv mark: {e}"))?;
    drop(lock);
    Ok(python)
}

/// [`python_venv`] for `test`: `None` after one line saying the test did
/// not run when it cannot be made; under `CI` that fails the test instead.
pub fn require_python_venv(test: &str, packages: &[&str]) -> Option<PathBuf> {
    match python_venv(packages) {
        Ok(python) => Some(python),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: no Python virtual environment under CI: {why}")
        }
        Err(why) => {
            println!("{test}: did not run: no Python virtual environment: {why}");
            None
        }
    }
}
