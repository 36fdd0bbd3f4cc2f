//! One conformance suite, two stores (issue 19): a store-level test is
//! written once as `fn name(store: Store)`, against a [`Site`], and
//! `on_both_stores!(name)` runs it on SQLite and on PostgreSQL as
//! `name::sqlite` and `name::postgres`.
//!
//! On SQLite a site is a fresh workspace directory with the built-in
//! ledger registered for '*', as [`crate::support::Lab`] makes it. On
//! PostgreSQL it is a fresh database copied from a template that `db init`
//! made once (the `pg_store` cluster, one per test process), with the
//! fixture adapter (`tests/fixtures/adapter.py`) registered for '*' in the
//! built-in ledger's place: there is no built-in ledger in a database.
//! The adapter is told to name its effects `fx-NNNNNN`, as the ledger
//! does, and to keep a full, authoritative, closable ledger; the ledger's
//! two crash drills (a lost receipt, a request that never arrived) are its
//! `crash-after` and `crash-before` modes, set for one dispatch through
//! its mode file.
//!
//! Under `CI` the PostgreSQL half runs or fails (a server that cannot
//! start is a broken machine); elsewhere it prints one line and passes.

use crate::invariants::{assert_invariants, none, DirectCalls};
use crate::real_receivers::servers;
use crate::support::{adapter_fixture, output_of, program, with_ledger, Run};
use recon::audit::VerifyRequest;
use recon::dispatch::{DispatchOptions, DispatchReport, PendingDispatch};
use recon::domain::{Effect, EffectRequest};
use recon::receiver::protocol::{self, Verb};
use recon::receiver::{Builtin, Fault, Receiver};
use recon::workspace::{Journal, NewReceiver};
use recon::{DatabaseUrl, Location, OpenOptions, Workspace};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a conformance test keeps the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    Sqlite,
    Postgres,
}

impl Store {
    /// The exit code of the receiver child that committed its effect and
    /// died before its receipt (the built-in ledger's drill exits 23, the
    /// adapter's `crash-after` 9).
    pub fn lost_receipt_exit(self) -> i32 {
        match self {
            Store::Sqlite => 23,
            Store::Postgres => 9,
        }
    }

    /// The exit code of the child that died before committing anything
    /// (the ledger's drill 24, the adapter's `crash-before` 3).
    pub fn never_arrived_exit(self) -> i32 {
        match self {
            Store::Sqlite => 24,
            Store::Postgres => 3,
        }
    }

    /// Whether `test` can run on this store: SQLite always; PostgreSQL
    /// when its server started, else one line (and a failure under `CI`).
    pub fn available(self, test: &str) -> bool {
        match self {
            Store::Sqlite => true,
            Store::Postgres => servers::require(test, servers::postgres()).is_some(),
        }
    }
}

/// Runs the store-level test `name`, a `fn name(store: Store)` written
/// beside it, on both stores: as `name::sqlite` and `name::postgres`. The
/// test makes its [`Site`]s itself (one, or a fresh one per repetition).
macro_rules! on_both_stores {
    ($name:ident) => {
        mod $name {
            use $crate::stores::Store;

            #[test]
            fn sqlite() {
                super::$name(Store::Sqlite)
            }

            #[test]
            fn postgres() {
                if Store::Postgres.available(module_path!()) {
                    super::$name(Store::Postgres)
                }
            }
        }
    };
}
pub(crate) use on_both_stores;

/// The file the PostgreSQL site's adapter reads its misbehaviour from.
const MODE_FILE: &str = "adapter.mode";
/// The adapter's working ledger.
const STATE_FILE: &str = "adapter.json";
/// The adapter's log of every call made to it.
const LOG_FILE: &str = "adapter.log";

/// A fresh outbox on one store with a receiver for every action kind.
pub struct Site {
    pub store: Store,
    /// The workspace on SQLite; the adapter's files on PostgreSQL.
    dir: tempfile::TempDir,
    /// The database's URL on PostgreSQL.
    url: Option<String>,
    pub ws: Workspace,
}

impl Site {
    /// A fresh site on `store`; for PostgreSQL the caller has checked
    /// [`Store::available`] (the macro does).
    pub fn new(store: Store) -> Site {
        let dir = tempfile::tempdir().expect("temp dir");
        match store {
            Store::Sqlite => {
                let ws = Workspace::open(dir.path(), OpenOptions::default().creating())
                    .expect("create workspace")
                    .with_receiver_program(program());
                Site {
                    store,
                    ws: with_ledger(ws),
                    dir,
                    url: None,
                }
            }
            Store::Postgres => {
                let pg = servers::postgres()
                    .as_ref()
                    .expect("the PostgreSQL cluster");
                let url = crate::pg_store::initialized(pg, "site");
                let mut ws = Workspace::open(database(&url), OpenOptions::default())
                    .expect("open the outbox on PostgreSQL")
                    .with_receiver_program(program());
                register_adapter(&mut ws, dir.path());
                Site {
                    store,
                    dir,
                    url: Some(url),
                    ws,
                }
            }
        }
    }

    /// Where the outbox is, to open it again.
    pub fn location(&self) -> Location {
        match &self.url {
            Some(url) => database(url),
            None => Location::workspace(self.dir.path()),
        }
    }

    /// A second, independent handle on the same outbox.
    pub fn reopen(&self) -> Workspace {
        Workspace::open(self.location(), OpenOptions::default())
            .expect("reopen the outbox")
            .with_receiver_program(program())
    }

    /// The arguments that point a command at this outbox:
    /// `--workspace DIR` or `--database URL`.
    pub fn args(&self) -> Vec<String> {
        match &self.url {
            Some(url) => vec!["--database".into(), url.clone()],
            None => vec!["--workspace".into(), self.dir.path().display().to_string()],
        }
    }

    /// `recon WORDS` against this outbox: the first word (the command,
    /// or a command and its verb for `receivers`), then [`Site::args`],
    /// then the rest.
    pub fn run(&self, words: &[&str], stdin: Option<&[u8]>) -> Run {
        self.run_with_env(words, stdin, &[])
    }

    /// [`Site::run`] with `env` set for the child (a crash point, say).
    pub fn run_with_env(&self, words: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
        let split = if words.first() == Some(&"receivers") {
            2
        } else {
            1
        };
        let (head, tail) = words.split_at(split.min(words.len()));
        let args = self.args();
        let mut all: Vec<&str> = head.to_vec();
        all.extend(args.iter().map(String::as_str));
        all.extend(tail);
        crate::support::run_with_env(&all, stdin, env)
    }

    /// Dispatches `op_id` once. A ledger crash drill in `options` is, on
    /// PostgreSQL, the adapter's matching crash for this one call; the
    /// ledger's permit drill has no such twin.
    pub fn dispatch(
        &mut self,
        op_id: &str,
        options: DispatchOptions,
    ) -> recon::Result<DispatchReport> {
        if self.store == Store::Sqlite {
            return self.ws.dispatch(op_id, options);
        }
        assert!(!options.wait_permit, "the permit drill is SQLite's only");
        let fault = options.fault;
        self.crashing(fault, |ws| ws.dispatch(op_id, DispatchOptions::default()))
    }

    /// Runs `call` with the adapter set to the twin of the ledger's crash
    /// drill `fault` for its duration (PostgreSQL only; no fault, no mode).
    pub fn crashing<T>(
        &mut self,
        fault: Option<Fault>,
        call: impl FnOnce(&mut Workspace) -> T,
    ) -> T {
        self.set_crash(fault);
        let result = call(&mut self.ws);
        self.set_crash(None);
        result
    }

    /// Sets the adapter to the twin of the ledger's crash drill `fault`
    /// for every call until set again (PostgreSQL only).
    pub fn set_crash(&self, fault: Option<Fault>) {
        assert_eq!(
            self.store,
            Store::Postgres,
            "SQLite has the ledger's own drills"
        );
        let crash = fault.map(|fault| match fault {
            Fault::CrashAfterCommit => "apply:crash-after",
            Fault::CrashBeforeCommit => "apply:crash-before",
        });
        self.set_adapter_mode(crash.unwrap_or_default());
    }

    /// The fixture adapter's misbehaviour from its next call on
    /// (`[VERB:]NAME`, `tests/fixtures/adapter.py`; empty for none).
    pub fn set_adapter_mode(&self, mode: &str) {
        let file = self.dir.path().join(MODE_FILE);
        std::fs::write(file, mode).expect("set the adapter's mode");
    }

    /// Prepares `op_id` and dispatches it once (see [`Site::dispatch`]).
    pub fn dispatched(&mut self, op_id: &str, action: &str, payload: &Value, fault: Option<Fault>) {
        self.ws.prepare(op_id, action, payload).expect("prepare");
        self.dispatch(
            op_id,
            DispatchOptions {
                fault,
                wait_permit: false,
            },
        )
        .expect("dispatch");
    }

    /// Starts dispatching the prepared `op_id` with the built-in ledger's
    /// permit drill (SQLite only, see [`crate::support::Lab::held_dispatch`]).
    pub fn held_dispatch(&mut self, op_id: &str) -> PendingDispatch {
        let options = DispatchOptions {
            fault: None,
            wait_permit: true,
        };
        self.ws
            .start_dispatch(op_id, options)
            .expect("start dispatch")
    }

    /// How many effects the receiver holds for `op_id` (or in all).
    pub fn effects(&self, op_id: Option<&str>) -> i64 {
        if self.store == Store::Sqlite {
            return self.ws.effect_count(op_id).expect("count effects");
        }
        let count = self.adapter_effects(op_id).len();
        i64::try_from(count).expect("a count")
    }

    /// The adapter's effects for `op_id` (or all), in the order it
    /// committed them (PostgreSQL only).
    pub fn adapter_effects(&self, op_id: Option<&str>) -> Vec<Value> {
        let ledger = self.adapter_state();
        let Some(effects) = ledger["effects"].as_array() else {
            return Vec::new();
        };
        effects
            .iter()
            .filter(|effect| op_id.is_none_or(|op| effect["op_id"] == op))
            .cloned()
            .collect()
    }

    /// The adapter's whole ledger file, `null` while it has committed
    /// nothing (PostgreSQL only).
    fn adapter_state(&self) -> Value {
        assert_eq!(self.store, Store::Postgres, "the adapter is PostgreSQL's");
        // No file, or an empty one: the adapter has committed nothing.
        let text = read_locked(&self.dir.path().join(STATE_FILE));
        if text.is_empty() {
            return Value::Null;
        }
        serde_json::from_str(&text).expect("the adapter's ledger")
    }

    /// The receiver's effects for `op_id` (or all), in the order it
    /// committed them: the built-in ledger's rows or the adapter's.
    pub fn ledger(&self, op_id: Option<&str>) -> Vec<Effect> {
        if self.store == Store::Sqlite {
            return self.ws.ledger(op_id).expect("read the ledger");
        }
        let effects = self.adapter_effects(op_id).into_iter();
        effects
            .map(|effect| serde_json::from_value(effect).expect("an effect"))
            .collect()
    }

    /// Whether the receiver has closed `op_id` for good.
    pub fn closed(&self, op_id: &str) -> bool {
        self.closed_by(op_id).is_some()
    }

    /// Who authorized the receiver's close of `op_id`, if it is closed:
    /// the built-in ledger's closure, or the adapter's record of it.
    pub fn closed_by(&self, op_id: &str) -> Option<String> {
        if self.store == Store::Sqlite {
            let closure = self.ws.closure(op_id).expect("read the closure");
            return closure.map(|c| c.authorized_by);
        }
        let closed = self.adapter_state()["closed"].get(op_id).cloned()?;
        Some(closed.as_str().expect("the authorizer's name").to_string())
    }

    /// The name the site's receiver is registered under.
    pub fn receiver(&self) -> &'static str {
        match self.store {
            Store::Sqlite => "builtin",
            Store::Postgres => "adapter",
        }
    }

    /// Writes an effect straight to the receiver, past every guard of the
    /// sender (a delayed original, another tool's write): the new effect's
    /// id, or the code the receiver refused it with.
    pub fn direct_apply(&self, request: &EffectRequest<'_>) -> Result<String, String> {
        if self.store == Store::Sqlite {
            let mut ledger = Builtin::open(self.dir.path(), OpenOptions::default())
                .expect("open the built-in ledger");
            return match ledger.apply(self.ws.id(), request) {
                Ok(effect) => Ok(effect.effect_id),
                Err(e) => Err(e.refusal().expect("a refusal").code().to_string()),
            };
        }
        let line = protocol::request(Verb::Apply, self.ws.id(), request, None);
        let mut command = Command::new(adapter_fixture());
        command.args(adapter_args(self.dir.path())).arg("apply");
        let out = output_of(command, Some(format!("{line}\n").as_bytes()));
        let answer: Value = serde_json::from_slice(&out.stdout).expect("the adapter's answer");
        match answer["receipt"]["effect_id"].as_str() {
            Some(effect_id) => Ok(effect_id.to_string()),
            None => Err(answer["error"]["code"]
                .as_str()
                .expect("a code")
                .to_string()),
        }
    }

    /// How many times the receiver has been called: the built-in
    /// ledger's children spawned through this handle, or every call the
    /// adapter logged.
    pub fn receiver_calls(&self) -> usize {
        if self.store == Store::Sqlite {
            return self.ws.receiver_program().spawned();
        }
        let log = std::fs::read_to_string(self.dir.path().join(LOG_FILE)).unwrap_or_default();
        log.lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("a log line"))
            .filter(|entry| entry["event"] == "call")
            .count()
    }

    /// The whole outbox is sound: on SQLite every invariant of
    /// [`crate::invariants`] over both files (no direct receiver calls);
    /// on PostgreSQL, where those read SQLite files, the journal verifies.
    #[track_caller]
    pub fn assert_sound(&self) {
        self.assert_sound_after(&none())
    }

    /// [`Site::assert_sound`] after `direct` calls made to the receiver
    /// past the sender ([`Site::direct_apply`]), which SQLite's
    /// invariants count.
    #[track_caller]
    pub fn assert_sound_after(&self, direct: &DirectCalls) {
        match &self.url {
            None => assert_invariants(self.dir.path(), direct),
            Some(url) => {
                let report = Journal::open(database(url), OpenOptions::default())
                    .expect("open the journal")
                    .verify(VerifyRequest::default())
                    .expect("verify");
                assert!(report.intact, "{report:?}");
            }
        }
    }

    /// Every row of every table of the outbox and everything the receiver
    /// holds, in a stable order: equal dumps mean nothing was written. On
    /// SQLite [`crate::support::dump`] of both files; on PostgreSQL each
    /// table's rows as text, and the adapter's ledger.
    pub fn dump(&self) -> String {
        let Some(url) = &self.url else {
            return crate::support::dump(self.dir.path());
        };
        let mut out = database_dump(url);
        let state = std::fs::read_to_string(self.dir.path().join(STATE_FILE)).unwrap_or_default();
        out.push_str(&format!("adapter: {state}\n"));
        out
    }

    /// Runs `sql` in the site's database as the cluster's superuser, behind
    /// recon's back (PostgreSQL only): psql's rows, or `Err` with the
    /// server's message.
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        let url = self.url.as_ref().expect("a database (PostgreSQL only)");
        let (pg, database) = cluster_and_database(url);
        pg.try_psql(database, sql)
    }

    /// Has the receiver commit an effect for `op_id` without recon asking
    /// (a receiver that applied a retry of its own): `recon receiver apply`
    /// into the built-in ledger on SQLite; on PostgreSQL the adapter's
    /// ledger written as its `apply` would.
    pub fn effect_behind(&self, op_id: &str, action: &str, payload: &Value) {
        if self.store == Store::Sqlite {
            let payload = payload.to_string();
            let dir = self.dir.path().display().to_string();
            let out = crate::support::run(
                &[
                    "receiver",
                    "apply",
                    "--op",
                    op_id,
                    "--action",
                    action,
                    "--payload",
                    &payload,
                    "--workspace",
                    &dir,
                ],
                None,
            );
            assert_eq!(out.code, Some(0), "receiver apply: {}", out.stderr);
            return;
        }
        let path = self.dir.path().join(STATE_FILE);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut ledger: Value = match text.is_empty() {
            true => serde_json::json!({"effects": [], "closed": {}}),
            false => serde_json::from_str(&text).expect("the adapter's ledger"),
        };
        let effects = ledger["effects"].as_array_mut().expect("its effects");
        effects.push(serde_json::json!({
            "effect_id": format!("fx-{:06}", effects.len() + 1),
            "op_id": op_id,
            "action_kind": action,
            "payload": payload,
            "compensates_effect_id": null,
        }));
        std::fs::write(path, ledger.to_string()).expect("write the adapter's ledger");
    }

    /// A directory of the test's own beside the outbox (for fifos and the
    /// like): the workspace directory on SQLite, the adapter's on PostgreSQL.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// The workspace directory (SQLite only).
    pub fn path(&self) -> &Path {
        assert_eq!(self.store, Store::Sqlite, "a database has no directory");
        self.dir.path()
    }
}

/// Every row of every table of the database at `url` (of this process's
/// cluster), each table's rows as text in a stable order: equal dumps
/// mean nothing was written.
pub fn database_dump(url: &str) -> String {
    let (pg, database) = cluster_and_database(url);
    let tables = pg.psql(
        database,
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
    );
    let mut out = String::new();
    for table in tables.lines() {
        out.push_str(&format!("{table}\n"));
        let sql = format!("SELECT row_to_json(x)::text FROM \"{table}\" x ORDER BY 1");
        out.push_str(&pg.psql(database, &sql));
    }
    out
}

/// The cluster of this process and the name of the database at `url`.
fn cluster_and_database(url: &str) -> (&'static servers::Postgres, &str) {
    let pg = servers::postgres()
        .as_ref()
        .expect("the PostgreSQL cluster");
    (pg, url.rsplit('/').next().expect("a database name"))
}

fn database(url: &str) -> Location {
    Location::from(DatabaseUrl::parse(url).expect("a database URL"))
}

/// Registers the fixture adapter as `adapter` for '*', keeping its ledger
/// and reading its mode in `dir`.
fn register_adapter(ws: &mut Workspace, dir: &Path) {
    let program: PathBuf = adapter_fixture();
    ws.register_receiver(&NewReceiver {
        name: "adapter",
        actions: &["*".to_string()],
        program: &program,
        args: &adapter_args(dir),
        timeout_ms: None,
        env: &[],
    })
    .expect("register the adapter for '*'");
}

/// The adapter's arguments before its verb: its files in `dir`, its
/// effects named `fx-NNNNNN`, and the strongest ceiling.
fn adapter_args(dir: &Path) -> Vec<String> {
    let file = |name: &str| -> String { dir.join(name).display().to_string() };
    [
        "--state",
        &file(STATE_FILE),
        "--mode-file",
        &file(MODE_FILE),
        "--log",
        &file(LOG_FILE),
        "--name",
        "fx",
        "--can-close",
        "--complete",
        "--authoritative",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The adapter's state file, read under a shared `flock`: the adapter
/// holds an exclusive one for a whole call and rewrites the file in place,
/// and one whose `recon` was killed may still be running, so an unlocked
/// read could see it half written. Empty when there is no file.
fn read_locked(path: &Path) -> String {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    // SAFETY: flock on the descriptor of a file this function holds open;
    // the lock goes with the descriptor when `file` is dropped.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) };
    assert_eq!(locked, 0, "flock {}", path.display());
    let mut text = String::new();
    file.read_to_string(&mut text)
        .expect("read the adapter's ledger");
    text
}
