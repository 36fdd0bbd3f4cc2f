//! Errors, split by what the caller can do about them.
//!
//! A [`Refusal`] (defined in the domain, re-exported here) is a safety rule
//! saying no: the request was understood and deliberately not carried out,
//! and nothing was written. A [`StoreError`] is storage or process trouble
//! that says nothing about safety. The binary maps the first to exit 3 and
//! the second to exit 4. This module sits above the domain: the domain never
//! names a storage error, because it does no I/O.

pub use crate::domain::Refusal;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error(
        "workspace {0} does not exist (create it by registering a receiver with \
         `recon receivers add`, or with `recon demo`)"
    )]
    MissingWorkspace(PathBuf),
    #[error("{0} is missing from the workspace")]
    MissingDatabase(PathBuf),
    #[error("{0} is not a recon SQLite database")]
    NotADatabase(PathBuf),
    #[error("{0} is locked by another process past the busy timeout")]
    Locked(PathBuf),
    #[error("{path} has schema version {found}; this recon reads version {expected}")]
    IncompatibleSchema {
        path: PathBuf,
        found: i64,
        expected: i64,
    },
    /// A file that says it is schema 4 but whose tables are not: left
    /// exactly as it was.
    #[error(
        "{path} has schema version {found}, but not that version's tables ({why}); it was \
         not upgraded and nothing was changed"
    )]
    NotUpgradable {
        path: PathBuf,
        found: i64,
        why: String,
    },
    #[error("{path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Receiver(String),
    /// A receiver's own store or server cannot be reached now (an adapter
    /// over a database or a mail server answers `unavailable` with it).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A conditional write found its row changed after the act read it,
    /// where no rule gives a refusal (a store whose writers run side by
    /// side): the act rolled back whole.
    #[error("{0} changed while this act was written; nothing was written (run it again)")]
    Raced(String),
    #[error(
        "{0} belongs to another workspace (its workspace id differs from its partner's); \
         refusing to use it"
    )]
    ForeignFile(PathBuf),
    #[error(
        "the workspace {0} was deleted, moved or replaced since it was opened; nothing was \
         changed (open it again)"
    )]
    WorkspaceGone(PathBuf),
    /// An optional capability (generated load, drills) that the outbox's
    /// store does not offer.
    #[error("this outbox's store offers no {0}")]
    Unsupported(&'static str),
    /// A PostgreSQL outbox's trouble; `url` is the database's URL with its
    /// password redacted (`DatabaseUrl`'s display), never the URL typed.
    #[error("{url}: {problem}")]
    Database {
        url: String,
        problem: DatabaseProblem,
    },
    /// A receiver that will not do this for this caller (a ledger login
    /// without the ledger role of the verb, SPEC 12): an adapter answers
    /// `unsupported` with it.
    #[error("unsupported: {0}")]
    ReceiverUnsupported(String),
    /// A receiver call that gave no usable answer (SPEC 8), with a stable
    /// `code` for how: the failure's kind (`crash`, `timeout`, ...) or the
    /// code of the adapter's `ok: false` answer (`unavailable`, ...).
    #[error("{message}")]
    Call { code: &'static str, message: String },
}

/// What went wrong with a PostgreSQL outbox's database.
#[derive(Debug, Error)]
pub enum DatabaseProblem {
    /// The server could not be reached, refused the login, or failed a
    /// statement: what recon was doing, and what the server or the client
    /// library said (with any password scrubbed).
    #[error("{during}: {detail}")]
    Failed {
        during: &'static str,
        detail: String,
    },
    /// A unique key refused a statement: `constraint` names it, so the
    /// store can say which refusal it means (`store::conflict`).
    #[error("{during}: {detail}")]
    Duplicate {
        during: &'static str,
        constraint: String,
        detail: String,
    },
    /// The schema's own triggers refused a write: a journal entry that
    /// does not follow the head, or a change to an append-only table.
    #[error("{during}: the database's guard refused it: {detail}")]
    Guarded {
        during: &'static str,
        detail: String,
    },
    /// The database refused a privilege (SQLSTATE 42501): `role` is the
    /// role that would allow it, when the refusal names one.
    #[error("{during}: permission denied: {detail}")]
    Denied {
        during: &'static str,
        role: Option<String>,
        detail: String,
    },
    /// Four eyes: `role` recorded the original's confirmation and is
    /// approving its compensation.
    #[error("{during}: {detail}")]
    SamePerson {
        during: &'static str,
        role: String,
        detail: String,
    },
    /// Another session held a lock past the busy timeout (`lock_timeout`).
    #[error(
        "{during}: another session held a lock past the busy timeout \
         (RECON_BUSY_TIMEOUT_MS); nothing was changed"
    )]
    Locked { during: &'static str },
    /// `synchronous_commit` lets a commit return before it is durable.
    #[error(
        "synchronous_commit is {0}: a commit could return before it is on disk, and an act \
         recorded as committed could be lost in a crash of the server; recon needs on (or \
         remote_apply): ALTER DATABASE or ALTER ROLE ... SET synchronous_commit = on"
    )]
    AsynchronousCommit(String),
    /// The connection was lost while an act was committing, and the
    /// server, asked again under the journal head's lock, holds no entry
    /// `seq` with the act's hash: the act did not commit.
    #[error(
        "the connection was lost while committing ({detail}); asked again, the server has no \
         journal entry {seq} of this act: nothing was written (run it again)"
    )]
    NotCommitted { seq: i64, detail: String },
    /// The database's encoding cannot hold every text recon writes.
    #[error(
        "the database's encoding is {0}; recon needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8')"
    )]
    Encoding(String),
    #[error("its recon outbox has schema version {found}; this recon reads version {expected}")]
    IncompatibleSchema { found: i64, expected: i64 },
    /// A database without a recon outbox.
    #[error("it holds no recon outbox; create one with `recon db init`")]
    Uninitialized,
    /// `db grant` or `db revoke` named a login the cluster does not have.
    #[error(
        "the cluster has no role named {0}; nothing was granted or revoked \
         (create the login first: CREATE ROLE {0} LOGIN)"
    )]
    NoSuchLogin(String),
    /// Tables or functions of the names recon uses, that are not a recon
    /// outbox: never taken over.
    #[error(
        "it holds {0}, named as recon's own but not a recon outbox; refusing to take them over \
         (use another database, or another schema in the URL's search_path)"
    )]
    Foreign(String),
    /// A recon outbox of this version whose schema lacks some of its
    /// objects: never recreated over what is left.
    #[error("its recon outbox lacks {0}; nothing was created over what is left")]
    Incomplete(String),
    /// An outbox an older recon made (SPEC 10): refused by every command,
    /// never upgraded halfway; its owner runs `recon db upgrade`.
    #[error(
        "its recon outbox has schema version {found}, older than this recon's {expected}; \
         nothing was read or changed: its owner upgrades it with `recon db upgrade --database URL`"
    )]
    SchemaOutdated { found: i64, expected: i64 },
    /// A rule of SPEC 12 refused a write (SQLSTATE `RCR01`): the store
    /// turns it into the refusal `rule_violation` of the act.
    #[error("{during}: the database's rules refuse it: {detail}")]
    RuleRefused {
        during: &'static str,
        detail: String,
    },
    /// SPEC 12: a decision on a closed snapshot that names no recorded close
    /// holding it (SQLSTATE `RCC01`): the refusal `unbacked_close`.
    #[error("{during}: the database's rules refuse it: {detail}")]
    UnbackedClose {
        during: &'static str,
        detail: String,
    },
}

impl StoreError {
    /// The stable code of a storage failure that has one (the JSON
    /// error's `code`): `schema_outdated`.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            StoreError::Database {
                problem: DatabaseProblem::SchemaOutdated { .. },
                ..
            } => Some("schema_outdated"),
            _ => None,
        }
    }
}

/// What a command had committed before it failed: one sentence for a
/// person, and the same as JSON for a script (`"committed"` in a JSON
/// error).
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub sentence: String,
    pub json: serde_json::Value,
}

impl Committed {
    /// An act whose COMMIT lost its connection, with a server that could
    /// not be asked again: it may have committed. `act` is the kind of its
    /// last journal entry, sealed as `(seq, hash)`; that entry settles it
    /// (SPEC 10).
    pub fn unknown(act: &str, seq: i64, hash: &str) -> Committed {
        Committed {
            sentence: format!(
                "the act ({act}, journal entry {seq}, hash {hash}) may have committed: the \
                 server could not be asked again; once it answers, `recon verify` or `recon \
                 show` says whether entry {seq} with that hash is in the journal"
            ),
            json: serde_json::json!({
                "outcome": "unknown",
                "act": act,
                "seq": seq,
                "hash": hash,
            }),
        }
    }
}

/// Any failure of a library call.
#[derive(Debug, Error)]
pub enum Error {
    #[error("refused: {code}: {refusal}", code = .0.code(), refusal = .0)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A request the library will not carry out as given (a note longer
    /// than its bound): a usage error, exit 2 at the command line.
    #[error("{0}")]
    Invalid(String),
    /// A failure that came after a commit: the failure itself, and what had
    /// already been committed and stays so (honest failure).
    #[error("{error}; {}", committed.sentence)]
    AfterCommit {
        error: Box<Error>,
        committed: Committed,
    },
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Store(StoreError::Io(e))
    }
}

impl Error {
    /// The code of the failure for a script: a refusal's, or a storage
    /// failure's that has one ([`StoreError::code`]).
    pub fn code(&self) -> Option<&'static str> {
        match self.cause() {
            Error::Refused(refusal) => Some(refusal.code()),
            Error::Store(e) => e.code(),
            _ => None,
        }
    }

    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Refused(refusal) => Some(refusal),
            Error::Store(_) | Error::Invalid(_) => None,
            Error::AfterCommit { error, .. } => error.refusal(),
        }
    }

    /// The failure without what had been committed before it.
    pub fn cause(&self) -> &Error {
        match self {
            Error::AfterCommit { error, .. } => error.cause(),
            other => other,
        }
    }

    /// What had been committed before the failure, if anything.
    pub fn committed(&self) -> Option<&Committed> {
        match self {
            Error::AfterCommit { committed, .. } => Some(committed),
            _ => None,
        }
    }

    /// This failure, saying that `committed` had been committed before it.
    pub fn after(self, committed: Committed) -> Error {
        Error::AfterCommit {
            error: Box::new(self),
            committed,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
