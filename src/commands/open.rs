//! What a command needs from around it before it can act: the workspace
//! directory it was given, and the library handles opened on it with the
//! storage options of the environment.
//!
//! The directory is checked while arguments are validated (a missing
//! `--workspace` is a usage error like any other); the environment is read
//! only when a store is opened, so a malformed `RECON_BUSY_TIMEOUT_MS` is
//! reported where it always was: after the arguments, before the database.

use super::Failure;
use crate::settings::OpenOptions;
use crate::workspace::{Journal, Location, Workspace};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest busy timeout accepted: ten minutes.
pub const MAX_BUSY_TIMEOUT_MS: u64 = 600_000;

/// The storage options from the environment: the busy timeout.
pub fn open_options() -> Result<OpenOptions, Failure> {
    let mut options = OpenOptions::default();
    if let Ok(text) = std::env::var("RECON_BUSY_TIMEOUT_MS") {
        let ms: u64 = text
            .trim()
            .parse()
            .ok()
            .filter(|ms| *ms <= MAX_BUSY_TIMEOUT_MS)
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "RECON_BUSY_TIMEOUT_MS must be a whole number of milliseconds from 0 to \
                     {MAX_BUSY_TIMEOUT_MS}, not {}",
                    crate::domain::sanitize::escape(&text)
                ))
            })?;
        options.busy_timeout = Duration::from_millis(ms);
    }
    Ok(options)
}

/// `--workspace DIR`, for the commands that cannot do without it.
pub fn required_workspace(workspace: Option<PathBuf>) -> Result<PathBuf, Failure> {
    workspace.ok_or_else(|| Failure::Usage("--workspace DIR is required for this command".into()))
}

/// Opens the workspace in `dir` (`--workspace DIR` names a workspace
/// directory's [`Location`]), creating it when `create` is set.
pub fn open(dir: &Path, create: bool) -> Result<Workspace, Failure> {
    let mut options = open_options()?;
    options.create = create;
    Ok(Workspace::open(Location::workspace(dir), options)?)
}

/// Opens only the journal: verifying, exporting and checkpointing need
/// nothing else, and must work even when the receiver file is gone.
pub fn open_journal(dir: &Path) -> Result<Journal, Failure> {
    Ok(Journal::open(Location::workspace(dir), open_options()?)?)
}
