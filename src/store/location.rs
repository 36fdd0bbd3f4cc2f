//! Where a workspace's stores are, and how they are opened from there.
//!
//! A [`Location`] names a workspace without saying how it is stored; the
//! functions here dispatch on it to the one module that knows that
//! location's stores, which opens them, checks that they belong together
//! (the workspace's identity) and can tell later whether the location
//! still names what it opened. There are two kinds: a workspace directory
//! of two SQLite files (`store::directory`), and a PostgreSQL database
//! (`store::postgres`), an outbox with no built-in ledger beside it
//! (docs/internals.md, "The store seam, and where a store goes").

use super::postgres::{DatabaseUrl, PgSender};
use super::{directory, ReceiverStore, SenderStore};
use crate::domain::Timestamp;
use crate::error::StoreError;
use crate::settings::OpenOptions;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a workspace is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A workspace directory: the outbox `sender.sqlite` and the built-in
    /// ledger `receiver.sqlite` side by side (`--workspace DIR`).
    Workspace(PathBuf),
    /// A PostgreSQL database holding an outbox (`recon db init`), shared
    /// by every host that names it; no built-in ledger. (Boxed: a parsed
    /// URL is ten times a path's size.)
    Database(Box<DatabaseUrl>),
}

impl Location {
    /// The directory of a workspace that is one.
    pub fn workspace(dir: impl Into<PathBuf>) -> Self {
        Location::Workspace(dir.into())
    }
}

impl fmt::Display for Location {
    /// The location as a message names it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Workspace(dir) => write!(f, "{}", dir.display()),
            Location::Database(url) => write!(f, "{url}"),
        }
    }
}

impl From<&Path> for Location {
    fn from(dir: &Path) -> Self {
        Location::workspace(dir)
    }
}

impl From<&PathBuf> for Location {
    fn from(dir: &PathBuf) -> Self {
        Location::workspace(dir)
    }
}

impl From<PathBuf> for Location {
    fn from(dir: PathBuf) -> Self {
        Location::Workspace(dir)
    }
}

impl From<DatabaseUrl> for Location {
    fn from(url: DatabaseUrl) -> Self {
        Location::Database(Box::new(url))
    }
}

impl From<&Location> for Location {
    fn from(location: &Location) -> Self {
        location.clone()
    }
}

/// Whether a location still names the stores a handle opened: asked before
/// every mutation, and by the console on its refresh tick.
pub(crate) trait Presence: Send + Sync {
    /// `Ok` while it does; `WorkspaceGone` once it names others or none.
    fn check(&self) -> Result<(), StoreError>;
}

/// A workspace's stores, opened and checked to belong together.
pub(crate) struct Opened {
    pub sender: Box<dyn SenderStore>,
    /// The built-in ledger, which lives beside the outbox in a workspace
    /// directory; none behind a database.
    pub ledger: Option<ReceiverStore>,
    /// The workspace's id, which both stores hold.
    pub workspace_id: String,
    pub presence: Box<dyn Presence>,
}

/// Opens (or, with `options.create`, creates) a workspace's stores. A
/// store of an older schema is upgraded at `now`, the caller's clock.
pub(crate) fn open(
    location: &Location,
    options: OpenOptions,
    now: Timestamp,
) -> Result<Opened, StoreError> {
    match location {
        Location::Workspace(dir) => directory::open_pair(dir, options, now),
        Location::Database(url) => {
            let sender = PgSender::open(url, options)?;
            Ok(Opened {
                workspace_id: sender.workspace_id().to_string(),
                sender: Box::new(sender),
                ledger: None,
                presence: Box::new(Served),
            })
        }
    }
}

/// A listener that the store's server wakes when the journal head moves,
/// where there is one (a database); a workspace directory has none, and
/// its head is read again on a timer instead (`workspace::HeadWatch`).
pub(crate) fn head_listener(
    location: &Location,
    options: OpenOptions,
) -> Option<Box<dyn super::HeadListener>> {
    match location {
        Location::Workspace(_) => None,
        Location::Database(url) => {
            Some(Box::new(super::postgres::PgHeadListener::new(url, options)))
        }
    }
}

/// Opens only the outbox of an existing workspace: verifying and exporting
/// the journal need nothing else, and must work when the ledger is gone.
/// Returns the workspace id the outbox holds too (`None` only for one
/// whose creation stopped before the id).
pub(crate) fn open_journal(
    location: &Location,
    options: OpenOptions,
    now: Timestamp,
) -> Result<(Box<dyn SenderStore>, Option<String>), StoreError> {
    match location {
        Location::Workspace(dir) => directory::open_sender(dir, options, now),
        Location::Database(url) => {
            let sender = PgSender::open(url, options)?;
            let id = sender.workspace_id().to_string();
            Ok((Box::new(sender), Some(id)))
        }
    }
}

/// The workspace id the built-in ledger holds, read without creating,
/// upgrading or writing anything; `None` when there is no ledger whose id
/// can be read.
pub(crate) fn ledger_workspace_id(location: &Location) -> Option<String> {
    match location {
        Location::Workspace(dir) => directory::ledger_workspace_id(dir),
        Location::Database(_) => None,
    }
}

/// Copies a workspace no connection holds open to `to`, where there is
/// none (the experiment's labs start from one fresh workspace made once).
/// Only a workspace directory is copied: a database outbox is one per
/// database, made by `recon db init`.
pub(crate) fn copy_closed(from: &Location, to: &Location) -> Result<(), StoreError> {
    match (from, to) {
        (Location::Workspace(from), Location::Workspace(to)) => directory::copy_closed(from, to),
        _ => Err(StoreError::Unsupported("copying an outbox in a database")),
    }
}

/// Whether nothing of a workspace is at the location. A database is never
/// taken for absent: only `recon db init` creates its outbox, and opening
/// one without it is refused, naming that command.
pub(crate) fn is_absent(location: &Location) -> bool {
    match location {
        Location::Workspace(dir) => directory::WorkspacePaths::new(dir).is_absent(),
        Location::Database(_) => false,
    }
}

/// How to remove a workspace that a refused command is about to create,
/// taken before it does: `None` when there is one already (it is never
/// removed).
pub(crate) fn undo_creation(location: &Location) -> Option<UndoCreation> {
    match location {
        Location::Workspace(dir) => {
            let paths = directory::WorkspacePaths::new(dir);
            paths.is_absent().then(|| UndoCreation::Directory {
                created_dir: !dir.exists(),
                paths,
            })
        }
        // A command never creates a database's outbox, so never removes it.
        Location::Database(_) => None,
    }
}

/// What [`undo_creation`] found, to remove exactly what was created.
pub(crate) enum UndoCreation {
    Directory {
        paths: directory::WorkspacePaths,
        /// The directory was not there either, so it goes too.
        created_dir: bool,
    },
}

impl UndoCreation {
    /// Removes the workspace created since (a new workspace holds no act,
    /// so nothing is lost).
    pub(crate) fn undo(self) {
        match self {
            UndoCreation::Directory { paths, created_dir } => paths.discard(created_dir),
        }
    }
}

/// A database's presence: its outbox's identity (the workspace id in
/// `meta`) is checked when it is opened, and a database dropped or
/// unreachable since fails the act's own first statement, which writes
/// nothing. There is no file whose identity could change under the handle.
struct Served;

impl Presence for Served {
    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
