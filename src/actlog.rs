//! The log of acts (`RECON_LOG=json`, SPEC 15): one line per journal
//! entry a command commits, `{ts, act, op_id, seq, login, outcome}`.
//!
//! Every act is one journal entry written in the act's own transaction
//! (`store::journal::insert`, the one place an entry is written on every
//! store), so that is where an act is noted, and the store's write
//! transaction (`SqlStore::write`, on SQLite and on PostgreSQL) hands the
//! noted acts on only once its COMMIT succeeded: an act refused or rolled
//! back (an item of a batch under its savepoint included) is never logged,
//! and a commit whose answer was lost (PostgreSQL) is logged with the
//! outcome `unknown`. Noted acts wait in a list of the thread that runs
//! the transaction, since a transaction never leaves its thread.
//!
//! Where a line goes is the binary's choice: a [`Sink`] installed once per
//! process (`commands::log`: stderr, around a terminal's progress line,
//! or for the console only a file). Without one nothing is noted and this
//! costs one check per entry. The fields hold no secret by construction:
//! the entry's kind, operation, seq and time, who did it, and the outcome.
//! The generated load of `recon demo --ops` is written by the bulk load,
//! not by acts, and is not logged.

use serde::Serialize;
use std::cell::RefCell;
use std::sync::OnceLock;

/// One logged act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActLine {
    /// When the act happened: its journal entry's `at`.
    pub ts: Option<String>,
    /// The journal entry's kind (`prepared`, `decided`, ...).
    pub act: String,
    pub op_id: Option<String>,
    pub seq: i64,
    /// Who did it: in team mode the database login (`session_user`); on a
    /// workspace directory the name typed for the act (`--by`,
    /// `--reviewer`, `--authorized-by`, `--approver`), null for an act
    /// that names nobody (prepare, dispatch, a receipt, a registration).
    pub login: Option<String>,
    /// `committed`, or `unknown` for a commit whose answer was lost.
    pub outcome: &'static str,
}

/// Where logged acts go.
pub trait Sink: Send + Sync {
    fn write(&self, line: &ActLine);
}

static SINK: OnceLock<Box<dyn Sink>> = OnceLock::new();

thread_local! {
    static NOTED: RefCell<Vec<ActLine>> = const { RefCell::new(Vec::new()) };
}

/// Installs the process's sink; a second one is ignored.
pub fn install(sink: Box<dyn Sink>) {
    let _ = SINK.set(sink);
}

/// Whether acts are logged at all.
pub fn enabled() -> bool {
    SINK.get().is_some()
}

/// A write transaction begins: nothing is noted for it yet.
pub(crate) fn begin() {
    if enabled() {
        NOTED.with(|noted| noted.borrow_mut().clear());
    }
}

/// An entry written in the transaction of this thread.
pub(crate) fn note(line: ActLine) {
    NOTED.with(|noted| noted.borrow_mut().push(line));
}

/// How many entries are noted: where a savepoint starts.
pub(crate) fn mark() -> usize {
    NOTED.with(|noted| noted.borrow().len())
}

/// A savepoint rolled back: its entries will not commit.
pub(crate) fn rewind(mark: usize) {
    NOTED.with(|noted| noted.borrow_mut().truncate(mark));
}

/// The transaction ended with `outcome`: its noted entries are written.
pub(crate) fn ended(outcome: &'static str) {
    let Some(sink) = SINK.get() else {
        return;
    };
    let lines = NOTED.with(|noted| std::mem::take(&mut *noted.borrow_mut()));
    for mut line in lines {
        line.outcome = outcome;
        sink.write(&line);
    }
}
