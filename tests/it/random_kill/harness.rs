//! The random-kill workload, on any outbox: prepares, dispatches (some
//! with a receiver crash drill armed), closing snapshots, decisions and
//! approvals, each step a real `recon` process killed with SIGKILL at a
//! random moment (or left to finish), and after every step the outbox's
//! own invariants and `recon verify`. Shared by the tests in
//! `tests/it/random_kill.rs` and by `cargo bench --bench random_kill`.
//!
//! The kill moment is drawn at random on purpose (the harness samples
//! where a power cut can land); nothing here orders two events by time.

use crate::invariants::{none, violations};
use recon::receiver::Fault;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A small, seeded xorshift: the run can be replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Report {
    pub steps: u64,
    pub killed: u64,
    pub finished: u64,
    pub violations: Vec<String>,
}

/// The outbox a run works on, with a receiver registered for '*'.
pub trait Outbox {
    /// The arguments that point a command at it (`--workspace DIR` or
    /// `--database URL`).
    fn location(&self) -> Vec<String>;
    /// Arms the receiver's crash drill `fault` for the next step; returns
    /// what to add to its command line (the built-in ledger's `--fault`).
    fn arm(&self, fault: Fault) -> Vec<String>;
    /// Disarms whatever [`Outbox::arm`] armed, after the step.
    fn disarm(&self);
    /// Every invariant of the outbox and its receiver that does not hold,
    /// in words (`recon verify` is run besides, by the harness).
    fn violations(&self) -> Vec<String>;
}

/// A SQLite workspace directory with the built-in ledger.
pub struct WorkspaceDir<'a>(pub &'a Path);

impl Outbox for WorkspaceDir<'_> {
    fn location(&self) -> Vec<String> {
        vec!["--workspace".into(), self.0.display().to_string()]
    }

    fn arm(&self, fault: Fault) -> Vec<String> {
        vec!["--fault".into(), fault.as_str().into()]
    }

    fn disarm(&self) {}

    fn violations(&self) -> Vec<String> {
        violations(self.0, &none())
    }
}

fn recon(bin: &Path, args: &[String]) -> std::process::Output {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recon")
}

/// `VERB` (one word, or `receivers add`), the outbox's location, then `rest`.
fn command(outbox: &dyn Outbox, verb: &[&str], rest: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
    args.extend(outbox.location());
    args.extend(rest.iter().map(|s| s.to_string()));
    args
}

/// A step of the workload: its command line, and the receiver fault to
/// arm for it.
struct Step {
    args: Vec<String>,
    fault: Option<Fault>,
}

/// The next step of the workload, chosen from the outbox as it stands.
fn next_step(bin: &Path, outbox: &dyn Outbox, rng: &mut Rng, n: u64) -> Step {
    let listed = recon(bin, &command(outbox, &["ops"], &["--json"]));
    let ops: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
    let ops = ops.as_array().cloned().unwrap_or_default();
    let pick = |rng: &mut Rng, state: &str| -> Option<Value> {
        let of: Vec<&Value> = ops.iter().filter(|o| o["state"] == state).collect();
        (!of.is_empty()).then(|| of[rng.below(of.len() as u64) as usize].clone())
    };
    let op = |v: &Value| v["op_id"].as_str().unwrap_or_default().to_string();
    let plain = |args| Step { args, fault: None };
    let idle = || plain(command(outbox, &["ops"], &[]));
    match rng.below(6) {
        0 | 1 => {
            let id = format!("op-{n:05}");
            let payload = format!("{{\"n\":{n}}}");
            let rest = ["--op", &id, "--action", "pay", "--payload", &payload];
            plain(command(outbox, &["prepare"], &rest))
        }
        2 => match pick(rng, "prepared") {
            Some(p) => {
                let fault =
                    [Fault::CrashAfterCommit, Fault::CrashBeforeCommit][rng.below(2) as usize];
                Step {
                    args: command(outbox, &["dispatch"], &[&op(&p)]),
                    fault: (rng.below(2) == 0).then_some(fault),
                }
            }
            None => idle(),
        },
        3 => match pick(rng, "unknown") {
            Some(u) => {
                let rest = [
                    op(&u),
                    "--close".into(),
                    "--authorized-by".into(),
                    "kim".into(),
                ];
                let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                plain(command(outbox, &["snapshot"], &rest))
            }
            None => idle(),
        },
        4 => match pick(rng, "unknown") {
            Some(u) => {
                let decision = ["confirmed", "not_applied"][rng.below(2) as usize];
                let version = u["version"].to_string();
                let id = op(&u);
                let mut rest = vec![id.as_str(), "--reviewer", "kim", "--decision", decision];
                rest.extend(["--expected-version", &version]);
                if rng.below(2) == 0 {
                    rest.extend(["--close", "--authorized-by", "kim"]);
                }
                plain(command(outbox, &["reconcile"], &rest))
            }
            None => idle(),
        },
        _ => match pick(rng, "confirmed").filter(|c| c["kind"] == "original") {
            Some(c) => {
                let version = c["version"].to_string();
                let effect = c["confirmed_effect_id"].as_str().unwrap_or_default();
                let (id, comp) = (op(&c), format!("{}-undo-{n}", op(&c)));
                let rest = [
                    id.as_str(),
                    "--effect",
                    effect,
                    "--approver",
                    "lee",
                    "--expected-version",
                    &version,
                    "--compensation-op",
                    &comp,
                    "--action",
                    "refund",
                    "--payload",
                    "{\"undo\":true}",
                ];
                plain(command(outbox, &["approve-compensation"], &rest))
            }
            None => idle(),
        },
    }
}

/// When a run kills its steps.
#[derive(Debug, Clone, Copy)]
pub struct Kills {
    /// A step is killed after a random delay of up to this...
    pub window: Duration,
    /// ...except this percentage of steps, drawn at random and left to
    /// finish, so that flows whose steps take longer than a prepare
    /// (a receiver spawned twice) still reach their later states.
    pub spared_percent: u64,
}

impl Kills {
    /// Every step, within `window`.
    pub fn within(window: Duration) -> Kills {
        Kills {
            window,
            spared_percent: 0,
        }
    }
}

/// Runs one step, killing it with SIGKILL after a random delay (see
/// [`Kills`]) unless it finished first. Returns whether it was killed.
fn run_step(bin: &Path, outbox: &dyn Outbox, step: &Step, rng: &mut Rng, kills: Kills) -> bool {
    let mut args = step.args.clone();
    if let Some(fault) = step.fault {
        args.extend(outbox.arm(fault));
    }
    let mut child = Command::new(bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn recon");
    let spared = kills.spared_percent > 0 && rng.below(100) < kills.spared_percent;
    let killed = if spared {
        false
    } else {
        let micros = rng.below(kills.window.as_micros() as u64 + 1);
        std::thread::sleep(Duration::from_micros(micros));
        matches!(child.try_wait(), Ok(None)) && child.kill().is_ok()
    };
    let _ = child.wait();
    outbox.disarm();
    killed
}

/// `steps` steps on `outbox`, whose receiver is registered, checking
/// after each one.
pub fn run_on(bin: &Path, outbox: &dyn Outbox, steps: u64, seed: u64, kills: Kills) -> Report {
    let mut rng = Rng::new(seed);
    let mut report = Report::default();
    let first = recon(bin, &next_step(bin, outbox, &mut Rng::new(2), 0).args);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for n in 1..=steps {
        let step = next_step(bin, outbox, &mut rng, n);
        let killed = run_step(bin, outbox, &step, &mut rng, kills);
        report.steps += 1;
        if killed {
            report.killed += 1;
        } else {
            report.finished += 1;
        }
        let mut found = outbox.violations();
        let verify = recon(bin, &command(outbox, &["verify"], &[]));
        if !verify.status.success() {
            found.push(format!(
                "verify: {}",
                String::from_utf8_lossy(&verify.stdout)
            ));
        }
        for v in found {
            let (args, fault) = (&step.args, step.fault);
            report.violations.push(format!(
                "step {n} ({args:?}, {fault:?}, killed {killed}): {v}"
            ));
        }
    }
    report
}

/// `steps` steps in the fresh workspace `dir`, with recon's own ledger
/// for every action kind.
pub fn run(bin: &Path, dir: &Path, steps: u64, seed: u64, window: Duration) -> Report {
    let outbox = WorkspaceDir(dir);
    let add = command(
        &outbox,
        &["receivers", "add"],
        &["builtin", "--builtin", "--actions", "*"],
    );
    let added = recon(bin, &add);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    run_on(bin, &outbox, steps, seed, Kills::within(window))
}

pub fn recon_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_recon"))
}
