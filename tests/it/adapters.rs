//! Receivers as adapters (SPEC 8), through the built binary and
//! `tests/fixtures/adapter.py`: a working ledger in a JSON file that
//! misbehaves on request. The misbehaviour is read from a mode file on every
//! call, so a test registers the fixture once and changes its mind between
//! calls; the fixture logs every call and the exact answer line, so a test
//! can prove that a call never happened, or hash what was said.
//!
//! The claims, by rule: a lost receipt of any kind leaves the operation
//! `unknown` with the reason in the report and no evidence (rule 1); flags
//! are held to the stored ceiling (2); a receiver that cannot close is never
//! asked to (3); evidence names the receiver, its description and the answer
//! (5); a close can be repeated (6); and the registry's own rules and routes.

use crate::real_receivers::servers;
use crate::stores::{on_both_stores, Store};
use crate::support::{adapter_fixture, dump, recon_bin, run_with_env, Run};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

mod bounds;
mod identity;
mod json;
mod lost;
mod lost_receiver;
mod readme;
mod registry;
mod rules;
mod sessions;
mod sqlite_receiver;

/// An outbox (a workspace, or on PostgreSQL a fresh database with no
/// receiver registered), and the files of fixture adapters beside it.
struct Rig {
    dir: tempfile::TempDir,
    /// The database's URL on PostgreSQL.
    database: Option<String>,
}

impl Rig {
    fn new() -> Rig {
        Rig::on(Store::Sqlite)
    }

    /// A rig on `store`; for PostgreSQL the caller has checked
    /// [`Store::available`] (`on_both_stores!` does).
    fn on(store: Store) -> Rig {
        let database = (store == Store::Postgres).then(|| {
            let pg = servers::postgres()
                .as_ref()
                .expect("the PostgreSQL cluster");
            crate::pg_store::initialized(pg, "rig")
        });
        Rig {
            dir: tempfile::tempdir().expect("temp dir"),
            database,
        }
    }

    /// [`Rig::with_mail`] on `store`.
    fn with_mail_on(store: Store) -> Rig {
        let rig = Rig::on(store);
        rig.register("mail", "post_letter", &[], FULL);
        rig
    }

    /// A rig with `mail` registered for `post_letter`: a receiver with the
    /// full contract (it can close; its reads are complete and
    /// authoritative), so whatever it is refused is refused for the rule's
    /// sake, not for a weak ceiling.
    fn with_mail() -> Rig {
        let rig = Rig::new();
        rig.register("mail", "post_letter", &[], FULL);
        rig
    }

    /// A rig whose workspace routes every action kind to recon's own
    /// ledger, as `demo` registers it.
    fn with_ledger() -> Rig {
        let rig = Rig::new();
        rig.ok(&["receivers", "add", "builtin", "--builtin", "--actions", "*"]);
        rig
    }

    /// Registers a receiver for every action kind (`*`) and returns its
    /// name: recon's own ledger on SQLite; on PostgreSQL, which has none,
    /// the fixture as `any`, with the full contract.
    fn catch_all(&self) -> &'static str {
        match self.database {
            None => {
                self.ok(&["receivers", "add", "builtin", "--builtin", "--actions", "*"]);
                "builtin"
            }
            Some(_) => {
                self.register("any", "*", &[], FULL);
                "any"
            }
        }
    }

    /// How many effects receiver `name` committed for `op`: the built-in
    /// ledger's rows, or the fixture's effects in its state file.
    fn effects_at(&self, name: &str, op: &str) -> usize {
        if name == "builtin" {
            let rows = self.json(&["ledger", "--op", op, "--json"]);
            return rows.as_array().map_or(0, Vec::len);
        }
        let text = std::fs::read_to_string(self.file(&format!("{name}.state"))).unwrap_or_default();
        if text.is_empty() {
            return 0;
        }
        let state: Value = serde_json::from_str(&text).expect("the fixture's ledger");
        let effects = state["effects"].as_array().expect("its effects");
        effects.iter().filter(|e| e["op_id"] == op).count()
    }

    fn ws(&self) -> String {
        self.file("ws")
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The arguments that point a command at the outbox: `--workspace WS`
    /// or `--database URL`.
    fn place(&self) -> Vec<String> {
        match &self.database {
            Some(url) => vec!["--database".into(), url.clone()],
            None => vec!["--workspace".into(), self.ws()],
        }
    }

    /// `recon --workspace WS ARGS`, or `recon --database URL ARGS`.
    fn recon(&self, args: &[&str]) -> Run {
        self.recon_env(args, &[])
    }

    /// [`Rig::recon`] with these environment variables set as well.
    fn recon_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let place = self.place();
        let mut all: Vec<&str> = place.iter().map(String::as_str).collect();
        all.extend(args);
        run_with_env(&all, None, env)
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> Run {
        let out = self.recon(args);
        assert_eq!(out.code, Some(0), "recon {args:?}: {}", out.stderr);
        out
    }

    /// Runs a command that must succeed; `args` carry their own `--json`.
    #[track_caller]
    fn json(&self, args: &[&str]) -> Value {
        self.ok(args).json()
    }

    /// The fixture's command line for receiver `name`: its state, log and
    /// mode files in the rig, its name, then `flags`.
    fn fixture_args(&self, name: &str, flags: &[&str]) -> Vec<String> {
        let mut args = vec![adapter_fixture().display().to_string()];
        for (flag, file) in [
            ("--state", "state"),
            ("--log", "log"),
            ("--mode-file", "mode"),
        ] {
            args.extend([flag.to_string(), self.file(&format!("{name}.{file}"))]);
        }
        // Its effect ids begin with its name: `mail-000001`.
        args.extend(["--name".to_string(), name.to_string()]);
        args.extend(flags.iter().map(|f| f.to_string()));
        args
    }

    /// `recon receivers add NAME --actions ACTIONS OPTIONS -- FIXTURE...`.
    fn add(&self, name: &str, actions: &str, options: &[&str], flags: &[&str]) -> Run {
        let command = self.fixture_args(name, flags);
        let mut args = vec!["receivers", "add", name, "--actions", actions];
        args.extend(options);
        args.push("--");
        args.extend(command.iter().map(String::as_str));
        self.recon(&args)
    }

    #[track_caller]
    fn register(&self, name: &str, actions: &str, options: &[&str], flags: &[&str]) -> Value {
        let mut options = options.to_vec();
        options.push("--json");
        let out = self.add(name, actions, &options, flags);
        assert_eq!(out.code, Some(0), "receivers add {name}: {}", out.stderr);
        out.json()
    }

    /// What the fixture registered as `name` does on its next calls.
    fn set_mode(&self, name: &str, mode: &str) {
        std::fs::write(self.file(&format!("{name}.mode")), mode).expect("write mode");
    }

    /// The fixture's log: one JSON object per call and per answer.
    fn log(&self, name: &str) -> Vec<Value> {
        std::fs::read_to_string(self.file(&format!("{name}.log")))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("log line"))
            .collect()
    }

    /// The requests of every call of `verb`.
    fn calls(&self, name: &str, verb: &str) -> Vec<Value> {
        self.log(name)
            .into_iter()
            .filter(|e| e["event"] == "call" && e["verb"] == verb)
            .map(|e| e["request"].clone())
            .collect()
    }

    /// The exact answer lines written for `verb`.
    fn answers(&self, name: &str, verb: &str) -> Vec<String> {
        self.log(name)
            .into_iter()
            .filter(|e| e["event"] == "answer" && e["verb"] == verb)
            .map(|e| e["line"].as_str().expect("line").to_string())
            .collect()
    }

    #[track_caller]
    fn prepare(&self, op: &str, action: &str, payload: &str) -> Value {
        self.json(&[
            "prepare",
            &format!("--op={op}"),
            &format!("--action={action}"),
            &format!("--payload={payload}"),
            "--json",
        ])
    }

    /// `dispatch --json`, which exits 0 whatever the receiver did.
    #[track_caller]
    fn dispatch(&self, op: &str) -> Value {
        self.json(&["dispatch", "--json", "--", op])
    }

    #[track_caller]
    fn show(&self, op: &str) -> Value {
        self.json(&["show", "--json", "--", op])
    }

    #[track_caller]
    fn snapshot(&self, op: &str, close: bool) -> Value {
        let mut args = vec!["snapshot", op, "--json"];
        if close {
            args.extend(["--close", "--authorized-by", "dana"]);
        }
        self.json(&args)
    }

    fn reconcile(&self, op: &str, decision: &str, version: &str, close: bool) -> Run {
        let mut args = vec![
            "reconcile",
            op,
            "--reviewer",
            "dana",
            "--decision",
            decision,
            "--expected-version",
            version,
            "--json",
        ];
        if close {
            args.extend(["--close", "--authorized-by", "dana"]);
        }
        self.recon(&args)
    }

    fn dump(&self) -> String {
        match &self.database {
            Some(url) => crate::stores::database_dump(url),
            None => dump(&PathBuf::from(self.ws())),
        }
    }

    fn list(&self) -> Value {
        self.json(&["receivers", "list", "--json"])
    }
}

/// The fixture's flags for the full contract.
const FULL: &[&str] = &["--can-close", "--complete", "--authoritative"];
/// Complete and authoritative reads, but no close.
const NO_CLOSE: &[&str] = &["--no-close", "--complete", "--authoritative"];

/// SHA-256 over canonical JSON: serde_json's compact form with sorted keys
/// (its maps are ordered by key), computed here independently of recon.
fn sha256_of_answer(line: &str) -> String {
    let value: Value = serde_json::from_str(line).expect("answer is JSON");
    Sha256::digest(value.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Exit 3 with `refused: <code>` and nothing on stdout, even under `--json`
/// (whose error document is not printed yet).
#[track_caller]
fn assert_refused_json(out: &Run, code: &str) {
    assert_eq!(out.code, Some(3), "expected {code}: {}", out.stderr);
    assert!(
        out.stderr.starts_with(&format!("refused: {code}: ")),
        "{}",
        out.stderr
    );
}

on_both_stores!(a_drill_on_an_operation_routed_to_an_adapter_is_a_usage_error_and_writes_nothing);
fn a_drill_on_an_operation_routed_to_an_adapter_is_a_usage_error_and_writes_nothing(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", "{}");
    let before = rig.dump();
    for fault in ["crash-after-commit", "crash-before-commit"] {
        let out = rig.recon(&["dispatch", "op-1", "--fault", fault]);
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert!(out.stderr.contains("built-in ledger"), "{}", out.stderr);
    }
    assert_eq!(rig.dump(), before);
    assert!(rig.log("mail").iter().all(|e| e["verb"] == "describe"));
}

// SQLite only: it reads the built-in ledger (`ledger`, `receiver apply`).
#[test]
fn values_beginning_with_a_dash_reach_the_receiver_intact() {
    let rig = Rig::with_ledger();
    // Both spellings, `--op -x` and `--op=-x`.
    rig.ok(&[
        "prepare",
        "--op",
        "-op-1",
        "--action",
        "-send",
        "--payload",
        "-5",
    ]);
    rig.ok(&["prepare", "--op=-op-2", "--action=-send", "--payload=-6"]);
    for (op, payload) in [("-op-1", -5), ("-op-2", -6)] {
        let report = rig.json(&["dispatch", op, "--json"]);
        assert_eq!(report["outcome"], "receipt", "{report}");
        let ledger = rig.json(&["ledger", "--op", op, "--json"]);
        assert_eq!(ledger[0]["op_id"], op);
        assert_eq!(ledger[0]["action_kind"], "-send");
        assert_eq!(ledger[0]["payload"], payload);
    }
    let original = rig.show("-op-1")["operation"].clone();
    let effect = original["confirmed_effect_id"]
        .as_str()
        .unwrap()
        .to_string();
    rig.ok(&[
        "approve-compensation",
        "-op-1",
        "--effect",
        &effect,
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "-comp-1",
        "--action",
        "-refund",
        "--payload",
        "-7",
    ]);
    let report = rig.json(&["dispatch", "-comp-1", "--json"]);
    assert_eq!(report["outcome"], "receipt", "{report}");
    let applied = rig.json(&["ledger", "--op", "-comp-1", "--json"]);
    assert_eq!(applied[0]["payload"], -7);
    assert_eq!(applied[0]["compensates_effect_id"], effect.as_str());
    // The command-line form of the receiver, called directly.
    let out = rig.ok(&[
        "receiver",
        "apply",
        "--op",
        "-op-3",
        "--action",
        "-send",
        "--payload",
        "-8",
        "--compensates",
        "-fx",
    ]);
    let receipt: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (&receipt["receipt"]["op_id"], &receipt["receipt"]["payload"]),
        (&json!("-op-3"), &json!(-8))
    );
    assert_eq!(receipt["receipt"]["compensates_effect_id"], "-fx");
}

// SQLite only: it calls the built-in ledger's child directly.
#[test]
fn a_direct_receiver_call_passes_values_beginning_with_a_dash_intact() {
    let rig = Rig::with_ledger();
    rig.ok(&["prepare", "--op=seed", "--action=a", "--payload={}"]);
    let program =
        recon::dispatch::ReceiverProgram::new(recon_bin(), std::time::Duration::from_secs(60));
    let payload = json!(-9);
    let call = recon::dispatch::ReceiverCall {
        op_id: "-op",
        action_kind: "-act",
        payload: &payload,
        compensates_effect_id: Some("-fx"),
        fault: None,
        wait_permit: false,
    };
    let outcome = recon::dispatch::spawn(&program, std::path::Path::new(&rig.ws()), &call)
        .expect("spawn")
        .finish()
        .expect("finish");
    let receipt = outcome
        .receipt
        .unwrap_or_else(|| panic!("{}", outcome.stderr));
    assert_eq!(
        (receipt.op_id.as_str(), receipt.action_kind.as_str()),
        ("-op", "-act")
    );
    assert_eq!(receipt.payload, payload);
    assert_eq!(receipt.compensates_effect_id.as_deref(), Some("-fx"));
}

on_both_stores!(an_operation_id_beginning_with_a_dash_reaches_an_adapter_on_stdin);
fn an_operation_id_beginning_with_a_dash_reaches_an_adapter_on_stdin(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.ok(&[
        "prepare",
        "--op",
        "-letter",
        "--action",
        "post_letter",
        "--payload",
        "-1",
    ]);
    let report = rig.dispatch("-letter");
    assert_eq!(report["outcome"], "receipt", "{report}");
    let applied = rig.calls("mail", "apply");
    assert_eq!(applied[0]["op"]["op_id"], "-letter");
    assert_eq!(applied[0]["op"]["payload"], -1);
}

on_both_stores!(adapter_stderr_is_shown_escaped);
fn adapter_stderr_is_shown_escaped(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", "{}");
    rig.set_mode("mail", "stderr-escape");
    let dispatched = rig.ok(&["dispatch", "op-1"]);
    let snapshot = rig.recon(&["snapshot", "op-1"]);
    assert_eq!(snapshot.code, Some(4), "{}", snapshot.stderr);
    for (what, text) in [
        ("dispatch", &dispatched.stdout),
        ("snapshot", &snapshot.stderr),
    ] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{what} let a control byte through: {text:?}"
        );
        assert!(
            text.contains(r"\x1b[2J\x1b]0;owned\x07 the adapter's last words"),
            "{what}: {text}"
        );
    }
}
