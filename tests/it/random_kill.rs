//! The random-kill harness: a scripted workload of prepares, dispatches,
//! closing snapshots, decisions and approvals, each step a real `recon`
//! process killed with SIGKILL at a random moment (or left to finish), and
//! after every step the invariants of `invariants.rs` on both files and
//! `recon verify`. A bounded run is a test; `cargo bench --bench
//! random_kill` is the long run (`RECON_KILLS`, `RECON_KILL_SEED`).
//!
//! The kill moment is drawn at random on purpose (the harness samples
//! where a power cut can land); nothing here orders two events by time.

use super::invariants::{none, violations};
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

fn recon(bin: &Path, args: &[String]) -> std::process::Output {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recon")
}

fn json(bin: &Path, args: &[String]) -> Value {
    let out = recon(bin, args);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The next step of the workload, chosen from the workspace as it stands.
fn next_step(bin: &Path, ws: &str, rng: &mut Rng, n: u64) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let ops = json(bin, &s(&["ops", "--workspace", ws, "--json"]));
    let ops = ops.as_array().cloned().unwrap_or_default();
    let pick = |rng: &mut Rng, state: &str| -> Option<Value> {
        let of: Vec<&Value> = ops.iter().filter(|o| o["state"] == state).collect();
        (!of.is_empty()).then(|| of[rng.below(of.len() as u64) as usize].clone())
    };
    let op = |v: &Value| v["op_id"].as_str().unwrap_or_default().to_string();
    match rng.below(6) {
        0 | 1 => {
            let id = format!("op-{n:05}");
            let payload = format!("{{\"n\":{n}}}");
            s(&[
                "prepare",
                "--workspace",
                ws,
                "--op",
                &id,
                "--action",
                "pay",
                "--payload",
                &payload,
            ])
        }
        2 => match pick(rng, "prepared") {
            Some(p) => {
                let fault = ["crash-after-commit", "crash-before-commit"][rng.below(2) as usize];
                let mut args = s(&["dispatch", "--workspace", ws, &op(&p)]);
                if rng.below(2) == 0 && p["receiver"] == "builtin" {
                    args.extend(s(&["--fault", fault]));
                }
                args
            }
            None => s(&["ops", "--workspace", ws]),
        },
        3 => match pick(rng, "unknown") {
            Some(u) => s(&[
                "snapshot",
                "--workspace",
                ws,
                &op(&u),
                "--close",
                "--authorized-by",
                "kim",
            ]),
            None => s(&["ops", "--workspace", ws]),
        },
        4 => match pick(rng, "unknown") {
            Some(u) => {
                let decision = ["confirmed", "not_applied"][rng.below(2) as usize];
                let version = u["version"].to_string();
                let mut args = s(&["reconcile", "--workspace", ws, &op(&u), "--reviewer", "kim"]);
                args.extend(s(&["--decision", decision, "--expected-version", &version]));
                if rng.below(2) == 0 {
                    args.extend(s(&["--close", "--authorized-by", "kim"]));
                }
                args
            }
            None => s(&["ops", "--workspace", ws]),
        },
        _ => match pick(rng, "confirmed").filter(|c| c["kind"] == "original") {
            Some(c) => {
                let version = c["version"].to_string();
                let effect = c["confirmed_effect_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let comp = format!("{}-undo-{n}", op(&c));
                let mut args = s(&["approve-compensation", "--workspace", ws, &op(&c)]);
                args.extend(s(&[
                    "--effect",
                    &effect,
                    "--approver",
                    "lee",
                    "--expected-version",
                ]));
                args.extend(s(&[
                    &version,
                    "--compensation-op",
                    &comp,
                    "--action",
                    "refund",
                ]));
                args.extend(s(&["--payload", "{\"undo\":true}"]));
                args
            }
            None => s(&["ops", "--workspace", ws]),
        },
    }
}

/// Runs one step, killing it with SIGKILL after a random delay of up to
/// `window` unless it finished first. Returns whether it was killed.
fn run_step(bin: &Path, args: &[String], rng: &mut Rng, window: Duration) -> bool {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn recon");
    let micros = rng.below(window.as_micros() as u64 + 1);
    std::thread::sleep(Duration::from_micros(micros));
    let killed = matches!(child.try_wait(), Ok(None)) && child.kill().is_ok();
    let _ = child.wait();
    killed
}

/// `steps` steps in one fresh workspace, checking after each one.
pub fn run(bin: &Path, dir: &Path, steps: u64, seed: u64, window: Duration) -> Report {
    let ws = dir.display().to_string();
    let mut rng = Rng::new(seed);
    let mut report = Report::default();
    // The workspace, with recon's own ledger for every action kind.
    let add = [
        "receivers",
        "add",
        "--workspace",
        &ws,
        "builtin",
        "--builtin",
        "--actions",
        "*",
    ];
    let added = recon(bin, &add.map(String::from));
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let first = recon(bin, &next_step(bin, &ws, &mut Rng::new(2), 0));
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for n in 1..=steps {
        let args = next_step(bin, &ws, &mut rng, n);
        let killed = run_step(bin, &args, &mut rng, window);
        report.steps += 1;
        if killed {
            report.killed += 1;
        } else {
            report.finished += 1;
        }
        let mut found = violations(dir, &none());
        let verify = recon(bin, &["verify".into(), "--workspace".into(), ws.clone()]);
        if !verify.status.success() {
            found.push(format!(
                "verify: {}",
                String::from_utf8_lossy(&verify.stdout)
            ));
        }
        for v in found {
            report
                .violations
                .push(format!("step {n} ({args:?}, killed {killed}): {v}"));
        }
    }
    report
}

pub fn recon_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_recon"))
}

#[test]
fn processes_killed_at_random_moments_break_no_invariant_and_verify_holds() {
    let steps = crate::stress::scaled(250) as u64;
    let seed = std::env::var("RECON_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe);
    let dir = tempfile::tempdir().unwrap();
    let report = run(
        &recon_bin(),
        dir.path(),
        steps,
        seed,
        Duration::from_millis(12),
    );
    eprintln!(
        "random kills (seed {seed:#x}): {} steps, {} killed, {} finished",
        report.steps, report.killed, report.finished
    );
    assert!(
        report.killed > steps / 10,
        "too few kills to mean anything: {report:?}"
    );
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
}
