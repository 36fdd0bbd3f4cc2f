//! The two SQLite databases of a workspace, and the only code that writes SQL.
//!
//! A workspace is a directory holding `sender.sqlite` (the outbox) and
//! `receiver.sqlite` (the tool's ledger). They are opened on separate
//! connections with independent transactions; nothing ever opens both in one
//! transaction or attaches one to the other, because the whole point is to
//! model two parties that cannot commit together.
//!
//! Storage settings, chosen on purpose:
//! - `journal_mode = WAL`: the console and other readers keep reading while a
//!   reviewer or a receiver child writes; writers are still serialized.
//! - `synchronous = FULL`: a recorded decision or a committed effect survives
//!   power loss, not only a process crash. The cost is one extra fsync per
//!   commit, which is small next to a human decision.
//! - `busy_timeout` (default 5 s, `RECON_BUSY_TIMEOUT_MS` at the binary edge):
//!   a writer waits for another process's transaction instead of failing at
//!   once; past it the command reports the database as locked.
//! - `foreign_keys = ON`: evidence and dispatch rows must name a real
//!   operation.
//! - `application_id` tells a sender file from a receiver file, and
//!   `user_version` is the schema version: a file from an incompatible recon
//!   is refused with a clear error instead of being misread.

mod audit_queries;
pub mod bulk;
mod console_queries;
mod drill;
pub mod receiver;
pub mod sender;

use crate::error::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use console_queries::{PageBound, QueueFilter};
pub use receiver::ReceiverStore;
pub use sender::SenderStore;

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 1;

pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How to open a workspace's databases.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Create the directory and the databases when they do not exist.
    pub create: bool,
    pub busy_timeout: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: false,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }
}

impl OpenOptions {
    pub fn creating(self) -> Self {
        OpenOptions {
            create: true,
            ..self
        }
    }
}

pub const SENDER_FILE: &str = "sender.sqlite";
pub const RECEIVER_FILE: &str = "receiver.sqlite";

/// Which of the two databases a file is meant to be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Role {
    pub application_id: i64,
    pub schema: &'static str,
}

/// Maps a rusqlite error to a storage error that names the file.
pub(crate) fn sql_error(path: &Path, source: rusqlite::Error) -> StoreError {
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabase(path.to_path_buf()),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::Locked(path.to_path_buf())
        }
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Attaches the file path to rusqlite results.
pub(crate) trait SqlContext<T> {
    fn at(self, path: &Path) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn at(self, path: &Path) -> Result<T, StoreError> {
        self.map_err(|e| sql_error(path, e))
    }
}

/// Opens one database of a workspace, creating and initializing it when
/// asked, and checks that it is the recon file of the expected role and
/// schema version.
pub(crate) fn open_database(
    path: &Path,
    role: Role,
    options: OpenOptions,
) -> Result<Connection, StoreError> {
    let exists = path.exists();
    if !exists && !options.create {
        return Err(StoreError::MissingDatabase(path.to_path_buf()));
    }
    if exists && !path.is_file() {
        return Err(StoreError::NotADatabase(path.to_path_buf()));
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if options.create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).at(path)?;
    conn.busy_timeout(options.busy_timeout).at(path)?;
    // Reading the header is the first thing that fails on a file that is not
    // a database, so do it before anything else.
    let (application_id, user_version, tables): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id),
                    (SELECT user_version FROM pragma_user_version),
                    (SELECT COUNT(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .at(path)?;
    let fresh = application_id == 0 && user_version == 0 && tables == 0;
    if fresh && options.create {
        initialize(&conn, path, role)?;
    } else if application_id != role.application_id {
        return Err(StoreError::NotADatabase(path.to_path_buf()));
    } else if user_version != SCHEMA_VERSION {
        return Err(StoreError::IncompatibleSchema {
            path: path.to_path_buf(),
            found: user_version,
            expected: SCHEMA_VERSION,
        });
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .at(path)?;
    Ok(conn)
}

fn initialize(conn: &Connection, path: &Path, role: Role) -> Result<(), StoreError> {
    // Creation costs one fsync instead of the seven a creation fully
    // synchronous at each step costs (a rollback journal and the database
    // for the first page, then the WAL header, the directory and the commit
    // of the schema), and every act stays as durable as before, because no
    // act can be durable without the workspace it is written in:
    //
    // 1. `journal_mode = WAL` (persistent, and impossible inside a
    //    transaction) writes the first page with the WAL flag and nothing
    //    else, without a rollback journal (a fresh file holds nothing to
    //    roll back to) and with one fsync of the file. That page
    //    must be on disk before anything is in the WAL: SQLite deletes the
    //    WAL of an empty database file. No act can be recorded in this
    //    file yet: no tables, application id and user version 0, a fresh
    //    file to every opener.
    // 2. The schema is committed to the WAL with `synchronous = OFF`. The
    //    first act is a later commit to the same WAL with `synchronous =
    //    FULL`, by this connection or any other: its fsync covers the
    //    schema's frames too, and WAL recovery keeps a commit only when
    //    every frame before it is intact (the checksums are chained), so an
    //    act that survives a power loss has its schema. Should a checkpoint
    //    come first, it runs with `synchronous = FULL` (set below and on
    //    every connection) and fsyncs the database before the WAL restarts.
    //    The first sync of the WAL on a connection also fsyncs the
    //    directory (SQLite does so for a WAL it opened with create), so the
    //    entries of both files are durable before the act counts.
    //
    // What a power loss before the first act can now lose is the schema,
    // leaving the fresh file of step 1 (or, torn in step 1, a file that is
    // not a database). Nothing was recorded in it, and recon treats it as
    // any file without its schema: a state that creation in two synchronous
    // commits could leave too, between them, only for a shorter while.
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .at(path)?;
    // A fresh file already in WAL (step 1 done, the schema lost) stays so:
    // MEMORY would take it out of WAL first.
    if !mode.eq_ignore_ascii_case("wal") {
        conn.execute_batch("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = FULL;")
            .at(path)?;
        // journal_mode cannot change inside a transaction, and it is
        // persistent, so set it once here.
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .at(path)?;
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = OFF;
         BEGIN IMMEDIATE;
         {schema}
         PRAGMA application_id = {app};
         PRAGMA user_version = {version};
         COMMIT;
         PRAGMA synchronous = FULL;",
        schema = role.schema,
        app = role.application_id,
        version = SCHEMA_VERSION,
    ))
    .at(path)
}

/// The directory and file paths of a workspace.
#[derive(Debug, Clone)]
pub struct WorkspacePaths {
    pub dir: PathBuf,
    pub sender: PathBuf,
    pub receiver: PathBuf,
}

impl WorkspacePaths {
    pub fn new(dir: &Path) -> Self {
        WorkspacePaths {
            dir: dir.to_path_buf(),
            sender: dir.join(SENDER_FILE),
            receiver: dir.join(RECEIVER_FILE),
        }
    }

    /// Checks that the directory exists (or creates it when asked).
    pub fn prepare_dir(&self, options: OpenOptions) -> Result<(), StoreError> {
        if self.dir.is_dir() {
            return Ok(());
        }
        if self.dir.exists() || !options.create {
            return Err(StoreError::MissingWorkspace(self.dir.clone()));
        }
        std::fs::create_dir_all(&self.dir)?;
        Ok(())
    }
}
