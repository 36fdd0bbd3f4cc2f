//! A workspace directory, the one [`super::Location`] there is today: the
//! outbox `sender.sqlite` and the built-in ledger `receiver.sqlite` side by
//! side, opened as a pair that must carry one workspace id
//! (`store::identity`), and the files' identity (device and inode), which
//! tells a handle later whether the directory still holds the files it
//! opened. Nothing above the store sees a file path of a store; they see
//! a location.

use super::identity;
use super::location::{Opened, Presence};
use super::{receiver, ReceiverStore, SenderStore, SqliteSender, RECEIVER_FILE, SENDER_FILE};
use crate::domain::Timestamp;
use crate::error::StoreError;
use crate::settings::OpenOptions;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// The directory and file paths of a workspace.
#[derive(Debug, Clone)]
pub(crate) struct WorkspacePaths {
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

    /// Removes the files of a workspace that a refused command created (a
    /// new workspace holds no act, so nothing is lost), and the directory
    /// too when the command created it.
    pub fn discard(&self, created_dir: bool) {
        for file in [&self.sender, &self.receiver] {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let _ = std::fs::remove_file(with_suffix(file, suffix));
            }
        }
        if created_dir {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    /// Neither file is there (the directory may be missing too).
    pub fn is_absent(&self) -> bool {
        !self.sender.exists() && !self.receiver.exists()
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

/// The files a workspace was opened on, to tell later whether the paths
/// still name them: the directory was deleted, moved or replaced, or a
/// file swapped.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenedFiles {
    dir: PathBuf,
    sender: Option<(u64, u64)>,
    receiver: Option<(u64, u64)>,
}

impl OpenedFiles {
    fn of(paths: &WorkspacePaths) -> Self {
        OpenedFiles {
            dir: paths.dir.clone(),
            sender: file_identity(&paths.sender),
            receiver: file_identity(&paths.receiver),
        }
    }
}

impl Presence for OpenedFiles {
    fn check(&self) -> Result<(), StoreError> {
        if *self == OpenedFiles::of(&WorkspacePaths::new(&self.dir)) {
            Ok(())
        } else {
            Err(StoreError::WorkspaceGone(self.dir.clone()))
        }
    }
}

/// Which file a path names now: device and inode, or `None` when there is
/// no file there.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Opens (or, with `options.create`, creates) both databases of a
/// workspace: the outbox behind its seam, and the built-in ledger's file,
/// checking that both carry the same workspace id (see `store::identity`).
/// A file of schema 4 is upgraded at `now`, the caller's clock.
pub(super) fn open_pair(
    dir: &Path,
    options: OpenOptions,
    now: Timestamp,
) -> Result<Opened, StoreError> {
    let paths = WorkspacePaths::new(dir);
    paths.prepare_dir(options)?;
    // Creation writes the outbox first, so a ledger that holds anything
    // means the outbox existed: a missing one was lost, not yet to come.
    let sender_options = OpenOptions {
        create: options.create && holds_nothing(&paths.receiver),
        ..options
    };
    let sender = SqliteSender::open(&paths.sender, sender_options, now)?;
    let (conn, path) = (sender.conn(), sender.path());
    let complete = identity::creation_complete(conn, path)?;
    let id = match identity::workspace_id(conn, path)? {
        Some(id) => id,
        // A completed outbox whose id is gone is not given a new one: its
        // ledger would be adopted by, or made afresh for, a stranger.
        None if complete => return Err(StoreError::ForeignFile(paths.sender.clone())),
        None => {
            let id = identity::new_workspace_id()?;
            identity::set_workspace_id(conn, path, &id)?;
            id
        }
    };
    crate::faults::crash_point(crate::faults::CrashPoint::CreateAfterSender);
    // Until creation completed, any command may finish it.
    let receiver_options = OpenOptions {
        create: !complete,
        ..options
    };
    let receiver = ReceiverStore::open(&paths.receiver, receiver_options, now)?;
    match identity::workspace_id(receiver.conn(), receiver.path())? {
        Some(theirs) if theirs == id => {}
        None if !complete => identity::set_workspace_id(receiver.conn(), receiver.path(), &id)?,
        _ => return Err(StoreError::ForeignFile(paths.receiver.clone())),
    }
    if !complete {
        crate::faults::crash_point(crate::faults::CrashPoint::CreateBeforeComplete);
        identity::mark_complete(sender.conn(), sender.path())?;
    }
    Ok(Opened {
        sender: Box::new(sender),
        ledger: Some(receiver),
        workspace_id: id,
        presence: Box::new(OpenedFiles::of(&paths)),
    })
}

/// Opens only the outbox of an existing workspace: verifying and exporting
/// the journal need nothing else, and must work even when the
/// receiver's file is gone. Returns the workspace id its meta holds too
/// (`None` only for an outbox whose creation stopped before the id).
pub(super) fn open_sender(
    dir: &Path,
    options: OpenOptions,
    now: Timestamp,
) -> Result<(Box<dyn SenderStore>, Option<String>), StoreError> {
    let paths = WorkspacePaths::new(dir);
    paths.prepare_dir(options)?;
    let sender = SqliteSender::open(&paths.sender, options, now)?;
    let id = identity::workspace_id(sender.conn(), sender.path())?;
    Ok((Box::new(sender), id))
}

/// Copies the files of a workspace no connection holds open (each with
/// its WAL, should one be left) into the directory `to`, never over a file
/// there: a copy of a fresh workspace is a fresh workspace, made without
/// parsing and writing its schema again.
pub(super) fn copy_closed(from: &Path, to: &Path) -> Result<(), StoreError> {
    let (from, to) = (WorkspacePaths::new(from), WorkspacePaths::new(to));
    for (source, target) in [(&from.sender, &to.sender), (&from.receiver, &to.receiver)] {
        copy_new(source, target)?;
        let source_wal = with_suffix(source, "-wal");
        if source_wal.exists() {
            copy_new(&source_wal, &with_suffix(target, "-wal"))?;
        }
    }
    Ok(())
}

/// Copies a file to a path where there is none.
fn copy_new(source: &Path, target: &Path) -> std::io::Result<()> {
    let mut copy = std::fs::File::create_new(target)?;
    std::io::copy(&mut std::fs::File::open(source)?, &mut copy)?;
    Ok(())
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut path = path.to_path_buf().into_os_string();
    path.push(suffix);
    PathBuf::from(path)
}

/// Opens only the ledger of an existing workspace (the receiver child's
/// side of a dispatch); never creates anything.
pub(crate) fn open_receiver(
    dir: &Path,
    options: OpenOptions,
    now: Timestamp,
) -> Result<ReceiverStore, StoreError> {
    let paths = WorkspacePaths::new(dir);
    paths.prepare_dir(OpenOptions {
        create: false,
        ..options
    })?;
    ReceiverStore::open(&paths.receiver, options, now)
}

/// The workspace id the ledger's file holds, read without creating,
/// upgrading or writing it: `None` when there is no file, or not a recon
/// ledger whose id can be read (every command that uses the ledger
/// refuses such a file; `verify`, which needs only the outbox, then has
/// no id to hold the outbox's to).
pub(super) fn ledger_workspace_id(dir: &Path) -> Option<String> {
    let path = WorkspacePaths::new(dir).receiver;
    if !path.is_file() {
        return None;
    }
    let conn = Connection::open_with_flags(
        &path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    let application_id: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .ok()?;
    if application_id != receiver::ROLE.application_id {
        return None;
    }
    identity::workspace_id(&conn, &path).ok().flatten()
}

/// Absent, or an empty file (which SQLite would treat as a new database).
fn holds_nothing(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) => meta.is_file() && meta.len() == 0,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}
