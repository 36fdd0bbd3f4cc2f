//! The outage drill of issue 21, shared by its test (a few hundred
//! operations) and `cargo bench --bench outage` (100,000): every operation
//! routed to `recon-pg-ledger` lost its receipt; 60 % were applied, 35 %
//! never arrived, 3 % were applied twice and 2 % were applied with a
//! changed payload.
//!
//! The outbox's side is written through its bulk load
//! ([`recon::Workspace::append_lost_receipts`]): each operation `unknown`
//! at version 2 after one dispatch, journaled as its prepare and dispatch,
//! as after a real lost receipt. The receiver's side is made by the
//! adapter itself: its `apply` verb, in one session, writes each effect an
//! operation's fate says the receiver holds (the changed payload is what a
//! receiver that mangled the request would hold). Where the outbox has no
//! bulk load (PostgreSQL), each operation is prepared and dispatched, and
//! its dispatch meets a receiver that dies before it does anything
//! ([`APPLY_DIES`]): `unknown`, as after any lost answer.
//!
//! The adapter is registered behind a script ([`counting_spawns`]) that
//! logs each process recon starts, so spawns are counted on the
//! receiver's side.

use recon::domain::{BulkOperation, Timestamp};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The action every drill operation requests.
pub const ACTION: &str = "ledger_write";

/// What became of one operation at the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fate {
    /// Applied once; its receipt was lost (60 %).
    Applied,
    /// Never arrived (35 %).
    NeverApplied,
    /// Applied twice: a retry that landed (3 %).
    AppliedTwice,
    /// Applied with a changed payload (2 %).
    Changed,
}

impl Fate {
    pub fn of(n: u64) -> Fate {
        match n % 100 {
            0..60 => Fate::Applied,
            60..95 => Fate::NeverApplied,
            95..98 => Fate::AppliedTwice,
            _ => Fate::Changed,
        }
    }

    /// Whether `resolve --policy provable` may decide it: a closing
    /// snapshot of one exact effect, or of none.
    pub fn provable(self) -> bool {
        matches!(self, Fate::Applied | Fate::NeverApplied)
    }
}

pub fn op_id(n: u64) -> String {
    format!("drill-{n:06}")
}

/// Operation `n`'s payload, as canonical JSON text (sorted keys).
pub fn payload(n: u64) -> String {
    format!(r#"{{"account":"acct-{}","amount":{n}}}"#, n % 97)
}

/// Operations `1..=count`, dispatched at `at` and never answered.
pub fn operations(count: u64, at: Timestamp) -> impl Iterator<Item = BulkOperation> {
    (1..=count).map(move |n| BulkOperation {
        op_id: op_id(n),
        action_kind: ACTION.to_string(),
        canonical_payload: payload(n),
        at,
        observation: None,
    })
}

/// The `apply` requests that make the receiver hold what each operation's
/// fate says, for the workspace `workspace`.
fn applies(workspace: &str, count: u64) -> impl Iterator<Item = Value> + '_ {
    (1..=count).flat_map(move |n| {
        let requested: Value = serde_json::from_str(&payload(n)).unwrap_or(Value::Null);
        let (times, held) = match Fate::of(n) {
            Fate::Applied => (1, requested),
            Fate::NeverApplied => (0, requested),
            Fate::AppliedTwice => (2, requested),
            Fate::Changed => (1, json!({"account": "acct-changed", "amount": n})),
        };
        (0..times).map(move |_| {
            json!({"recon_adapter": 1, "verb": "apply", "workspace": workspace, "op": {
                "op_id": op_id(n),
                "action_kind": ACTION,
                "payload": held,
                "compensates_effect_id": null,
            }})
        })
    })
}

/// Makes the receiver's side of the drill through one session of
/// `recon-pg-ledger` (`binary --database url session`); returns how many
/// effects it wrote. Panics on any answer that is not a receipt.
pub fn apply_fates(binary: &Path, url: &str, workspace: &str, count: u64) -> usize {
    let mut child = Command::new(binary)
        .args(["--database", url, "session"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start a session of recon-pg-ledger");
    let mut stdin = child.stdin.take().expect("its stdin");
    let stdout = BufReader::new(child.stdout.take().expect("its stdout"));
    let written = std::thread::scope(|scope| {
        scope.spawn(move || {
            for (id, mut request) in applies(workspace, count).enumerate() {
                request["id"] = json!(id + 1);
                writeln!(stdin, "{request}").expect("write an apply");
            }
        });
        let mut written = 0;
        for line in stdout.lines() {
            let answer: Value = serde_json::from_str(&line.expect("an answer")).expect("JSON");
            assert_eq!(answer["ok"], json!(true), "{answer}");
            written += 1;
        }
        written
    });
    let status = child.wait().expect("the session ends");
    assert!(status.success(), "the session ended {status}");
    written
}

/// While this file is in the script's directory, an `apply` through the
/// script dies at once (exit 24, before it did anything).
pub const APPLY_DIES: &str = "apply-dies";

/// `binary` behind a script at `dir/pg-ledger` that appends its arguments
/// to `dir/spawns` before it runs it (see [`APPLY_DIES`]).
pub fn counting_spawns(binary: &Path, dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("pg-ledger");
    let text = format!(
        "#!/bin/sh\necho \"$*\" >> '{dir}/spawns'\n\
         case \"$*\" in *' apply') [ -e '{dir}/{APPLY_DIES}' ] && exit 24;; esac\n\
         exec '{}' \"$@\"\n",
        binary.display(),
        dir = dir.display(),
    );
    std::fs::write(&script, text).expect("write the script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

/// The verb (or `session`) of each process the script in `dir` started.
pub fn spawned(dir: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(dir.join("spawns")).unwrap_or_default();
    (log.lines())
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
        .collect()
}

/// Registers `program` (recon-pg-ledger, or a wrapper of it) as the
/// receiver `ledger` for [`ACTION`], its effects in the database `url`.
pub fn register_ledger(ws: &mut recon::Workspace, program: &Path, url: &str) {
    ws.register_receiver(&recon::workspace::NewReceiver {
        name: "ledger",
        actions: &[ACTION.to_string()],
        program,
        args: &["--database".to_string(), url.to_string()],
        timeout_ms: Some(60_000),
        env: &[],
    })
    .expect("register recon-pg-ledger");
}
