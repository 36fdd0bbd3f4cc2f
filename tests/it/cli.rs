//! The scripting command line of SPEC section 6, through the built binary:
//! flows and JSON shapes, every refusal code, usage errors, and storage
//! failures. After every refused or failed command both databases are
//! compared with a dump taken before it.

mod batch;
mod flows;
mod newcomer;
pub(crate) mod refusals;
mod storage;
mod usage;

use crate::stores::{Site, Store};
use crate::support::{copy_demo, dump, program, run_with_env, Run};
use recon::receiver::Fault;
use recon::OpenOptions;
use recon::Workspace;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// A workspace path in a fresh temp dir, and the binary pointed at it.
pub struct Shell {
    _dir: tempfile::TempDir,
    pub ws: PathBuf,
    /// The outbox in a database, on PostgreSQL (`crate::stores`): then
    /// every command is given `--database URL` and `ws` is never made.
    site: Option<Site>,
}

impl Shell {
    /// A workspace path that does not exist yet.
    pub fn empty() -> Shell {
        let dir = tempfile::tempdir().expect("temp dir");
        let ws = dir.path().join("ws");
        Shell {
            _dir: dir,
            ws,
            site: None,
        }
    }

    /// A new outbox on `store` with a receiver for every action kind: on
    /// SQLite [`Shell::with_ledger`]; on PostgreSQL a [`Site`]'s database
    /// with its adapter.
    pub fn on(store: Store) -> Shell {
        match store {
            Store::Sqlite => Shell::with_ledger(),
            Store::Postgres => Shell::at(Site::new(store)),
        }
    }

    /// The binary pointed at `site`, an outbox on either store that the
    /// test has already filled through the library. On SQLite `ws` is
    /// the site's workspace directory.
    pub fn at(site: Site) -> Shell {
        let empty = Shell::empty();
        let ws = match site.store {
            Store::Sqlite => site.path().to_path_buf(),
            Store::Postgres => empty.ws.clone(),
        };
        Shell {
            ws,
            site: Some(site),
            ..empty
        }
    }

    /// The store the outbox is on.
    pub fn store(&self) -> Store {
        match self.postgres() {
            Some(_) => Store::Postgres,
            None => Store::Sqlite,
        }
    }

    /// The site on PostgreSQL; `None` on SQLite, where the built-in
    /// ledger's own drills and `ledger` command serve.
    pub(crate) fn postgres(&self) -> Option<&Site> {
        self.site
            .as_ref()
            .filter(|site| site.store == Store::Postgres)
    }

    /// `recon ARGS` with the built-in ledger's crash drill `fault`
    /// (`--fault`), or on PostgreSQL the adapter's twin of it set for the
    /// run; it must succeed.
    #[track_caller]
    pub fn faulted(&self, args: &[&str], fault: Fault) -> Run {
        let Some(site) = self.postgres() else {
            return self.ok(&[args, &["--fault", fault.as_str()]].concat());
        };
        site.set_crash(Some(fault));
        let out = self.run(args);
        site.set_crash(None);
        assert_eq!(out.code, Some(0), "recon {args:?}: {}", out.stderr);
        out
    }

    /// The receiver's effects (for `op`), as JSON: `recon ledger --json`
    /// on SQLite, the adapter's ledger on PostgreSQL (its effects have the
    /// same fields).
    pub fn effects(&self, op: Option<&str>) -> Value {
        match (self.postgres(), op) {
            (Some(site), _) => Value::Array(site.adapter_effects(op)),
            (None, None) => self.json(&["ledger"]),
            (None, Some(op)) => self.json(&["ledger", "--op", op]),
        }
    }

    /// An effect the receiver commits for `op` behind recon's back (a
    /// retry of its own): see [`Site::effect_behind`].
    #[track_caller]
    pub fn effect_behind(&self, op: &str, action: &str, payload: &str) {
        match &self.site {
            Some(site) => {
                let payload = serde_json::from_str(payload).expect("a JSON payload");
                site.effect_behind(op, action, &payload);
            }
            None => drop(self.ok(&[
                "receiver",
                "apply",
                "--op",
                op,
                "--action",
                action,
                "--payload",
                payload,
            ])),
        }
    }

    /// Runs `sql` on the outbox behind recon's back, as an attacker with
    /// its storage would, the append-only triggers out of the way: on the
    /// SQLite file ([`crate::audit::tamper`]), or in the database as
    /// PostgreSQL's superuser with triggers off for the session.
    #[track_caller]
    pub fn tamper(&self, sql: &str) {
        match self.postgres() {
            Some(site) => {
                let sql = format!("SET session_replication_role = replica; {sql}");
                drop(site.try_psql(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")))
            }
            None => crate::audit::tamper(&self.ws, sql),
        }
    }

    /// The attacker who knows the format, on either store: edits the
    /// content of the journal entry `seq` (written back as canonical JSON)
    /// and recomputes every link from it on, so the chain is intact again:
    /// [`crate::audit::rewrite_entry`] on the SQLite file; on PostgreSQL
    /// as the superuser with triggers off, the links (and the journal
    /// head) recomputed by the server's own `sha256`.
    #[track_caller]
    pub fn rewrite_entry(&self, seq: i64, edit: impl FnOnce(&mut Map<String, Value>)) {
        let Some(site) = self.postgres() else {
            return crate::audit::rewrite_entry(&self.ws, seq, edit);
        };
        let read = format!("SELECT entry FROM journal WHERE seq = {seq}");
        let text = site
            .try_psql(&read)
            .unwrap_or_else(|e| panic!("{read}: {e}"));
        let mut content: Map<String, Value> = serde_json::from_str(text.trim_end()).unwrap();
        edit(&mut content);
        let entry = Value::Object(content).to_string();
        assert!(!entry.contains("$forged$"), "{entry}");
        self.tamper(&format!(
            "UPDATE journal SET entry = $forged${entry}$forged$ WHERE seq = {seq};
             DO $$
             DECLARE
                 r record;
                 prev text;
             BEGIN
                 SELECT prev_hash INTO prev FROM journal WHERE seq = {seq};
                 FOR r IN SELECT seq, entry FROM journal WHERE seq >= {seq} ORDER BY seq LOOP
                     UPDATE journal
                     SET prev_hash = prev,
                         hash = encode(sha256(convert_to(prev || r.entry, 'UTF8')), 'hex')
                     WHERE seq = r.seq
                     RETURNING hash INTO prev;
                 END LOOP;
                 UPDATE journal_head SET hash = prev WHERE id = 1;
             END $$;"
        ));
    }

    /// A new workspace with recon's own ledger registered for every action
    /// kind (no receiver is implicit), through the command line a person
    /// would use.
    pub fn with_ledger() -> Shell {
        let shell = Shell::empty();
        shell.ok(&["receivers", "add", "builtin", "--builtin", "--actions", "*"]);
        shell
    }

    /// A demo workspace (showcase, plus `extra` generated ops), built
    /// through the library and closed again before any command runs: this
    /// shell's own copy of the one such demo built per test process.
    pub fn demo(extra: u64) -> Shell {
        let shell = Shell::empty();
        copy_demo(extra, &shell.ws);
        shell
    }

    /// A library handle on the workspace, created with recon's own ledger
    /// registered for every action kind when it is new.
    pub fn workspace_creating(&self) -> Workspace {
        let mut ws = Workspace::open(&self.ws, OpenOptions::default().creating())
            .expect("open workspace")
            .with_receiver_program(program());
        if ws.receivers().expect("receivers").is_empty() {
            ws.register_builtin("builtin", &["*".to_string()], true)
                .expect("register the built-in ledger");
        }
        ws
    }

    /// A library handle on the (existing) outbox, on either store.
    pub fn workspace(&self) -> Workspace {
        if let Some(site) = &self.site {
            return site.reopen();
        }
        Workspace::open(&self.ws, OpenOptions::default())
            .expect("open workspace")
            .with_receiver_program(program())
    }

    /// Who authorized the receiver's close of `op`, if it is closed.
    pub fn closed_by(&self, op: &str) -> Option<String> {
        match &self.site {
            Some(site) => site.closed_by(op),
            None => {
                (self.workspace().closure(op).expect("read the closure")).map(|c| c.authorized_by)
            }
        }
    }

    pub fn ws_arg(&self) -> String {
        self.ws.display().to_string()
    }

    /// The arguments that point a command at the outbox: `--workspace WS`
    /// or `--database URL`.
    pub fn place(&self) -> Vec<String> {
        match &self.site {
            Some(site) => site.args(),
            None => vec!["--workspace".to_string(), self.ws_arg()],
        }
    }

    /// `recon ARGS --workspace WS` (or `--database URL`).
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_full(args, None, &[])
    }

    /// `--workspace WS` goes last, or just before a `--` (after which
    /// every word belongs to the receiver's command line).
    pub fn run_full(&self, args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
        let place = self.place();
        let mut all: Vec<&str> = args.to_vec();
        let at = all.iter().position(|a| *a == "--").unwrap_or(all.len());
        all.splice(at..at, place.iter().map(String::as_str));
        run_with_env(&all, stdin, env)
    }

    /// Runs a command that must succeed and returns its output.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> Run {
        let out = self.run(args);
        assert_eq!(out.code, Some(0), "recon {args:?}: {}", out.stderr);
        out
    }

    /// `recon reconcile OP` by `who`, `not_applied` at `version`, with a
    /// closing snapshot `who` authorizes; it must succeed.
    #[track_caller]
    pub fn closed_not_applied(&self, op: &str, version: &str, who: &str) -> Run {
        self.ok(&[
            "reconcile",
            op,
            "--reviewer",
            who,
            "--decision",
            "not_applied",
            "--expected-version",
            version,
            "--close",
            "--authorized-by",
            who,
        ])
    }

    /// `recon prepare --op OP --action ACTION --payload PAYLOAD`, which must
    /// succeed.
    #[track_caller]
    pub fn prepare(&self, op: &str, action: &str, payload: &str) -> Run {
        self.ok(&[
            "prepare",
            "--op",
            op,
            "--action",
            action,
            "--payload",
            payload,
        ])
    }

    /// Runs a `--json` command that must succeed and parses its output.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        self.ok(&all).json()
    }

    /// What [`crate::support::dump`] reads, or on PostgreSQL
    /// [`Site::dump`].
    pub fn dump(&self) -> String {
        match &self.site {
            Some(site) => site.dump(),
            None => dump(&self.ws),
        }
    }

    /// The file names in the workspace directory, or `None` without one.
    pub fn files(&self) -> Option<Vec<String>> {
        let entries = std::fs::read_dir(&self.ws).ok()?;
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Some(names)
    }
}

/// Exit 3 and exactly one stderr line `refused: <code>: <detail>`.
#[track_caller]
pub fn assert_refused(out: &Run, code: &str) {
    assert_eq!(
        out.code,
        Some(3),
        "expected refusal {code}; stdout {} stderr {}",
        out.stdout,
        out.stderr
    );
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one stderr line: {}", out.stderr);
    let prefix = format!("refused: {code}: ");
    assert!(
        lines[0].starts_with(&prefix) && lines[0].len() > prefix.len(),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", out.stdout);
}

/// A failure with this exit code and one line on stderr, nothing on stdout.
#[track_caller]
pub fn assert_fails(out: &Run, code: i32) {
    assert_eq!(out.code, Some(code), "stderr: {}", out.stderr);
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
    if !out.stdout.is_empty() {
        // Under --json a failure is one JSON error document (SPEC 6).
        assert_json_error(out, code);
    }
}

/// Stdout is exactly one `{"error": {exit, kind, code, message}}` document
/// agreeing with the exit code and the stderr line.
#[track_caller]
pub fn assert_json_error(out: &Run, code: i32) {
    let document: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", out.stdout));
    let error = &document["error"];
    assert_eq!(document.as_object().map(|o| o.len()), Some(1), "{document}");
    assert_eq!(error["exit"], code, "{document}");
    let kind = match code {
        2 => "usage",
        3 => "refused",
        _ => "storage",
    };
    assert_eq!(error["kind"], kind, "{document}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{document}"
    );
    match code {
        3 => assert!(
            out.stderr
                .starts_with(&format!("refused: {}: ", error["code"].as_str().unwrap())),
            "{document} vs {}",
            out.stderr
        ),
        _ => assert_eq!(error["code"], Value::Null, "{document}"),
    }
}

/// Exact set of keys of a JSON object.
#[track_caller]
pub fn assert_keys(value: &Value, keys: &[&str]) {
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"));
    for key in keys {
        assert!(object.contains_key(*key), "{key} missing from {value}");
    }
}

pub const OPERATION_FIELDS: &[&str] = &[
    "op_id",
    "kind",
    "action_kind",
    "payload",
    "state",
    "version",
    "compensates_effect_id",
    "compensates_op_id",
    "confirmed_effect_id",
];

pub const EFFECT_FIELDS: &[&str] = &[
    "effect_id",
    "op_id",
    "action_kind",
    "compensates_effect_id",
    "payload",
];
