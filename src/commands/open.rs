//! What a command needs from around it before it can act: where its
//! stores are ([`Place`]: `--workspace DIR`, `--database URL`,
//! `RECON_DATABASE_URL` or `RECON_WORKSPACE`, resolved here into a
//! [`Location`]), and the
//! library handles opened there with the storage options of the
//! environment.
//!
//! The location is resolved while arguments are validated (a missing or
//! doubled one, or a malformed URL, is a usage error like any other); the
//! busy timeout is read only when a store is opened, so a malformed
//! `RECON_BUSY_TIMEOUT_MS` is reported where it always was: after the
//! arguments, before the database.

use super::Failure;
use crate::settings::OpenOptions;
use crate::workspace::{DatabaseUrl, Journal, Location, Workspace};
use std::path::PathBuf;
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

/// The variable that names the database when neither `--workspace` nor
/// `--database` is given (SPEC 10).
pub const DATABASE_VARIABLE: &str = "RECON_DATABASE_URL";

/// The variable that names the workspace directory when neither
/// `--workspace` nor `--database` is given and `RECON_DATABASE_URL` is
/// unset (SPEC 12): a newcomer sets it once instead of typing
/// `--workspace` on every command.
pub const WORKSPACE_VARIABLE: &str = "RECON_WORKSPACE";

/// A variable's value when it is set and not empty.
fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|text| !text.is_empty())
}

/// Where the command line puts the stores: the global `--workspace DIR`
/// and `--database URL` as given, not yet resolved.
#[derive(Debug, Default)]
pub struct Place {
    pub workspace: Option<PathBuf>,
    pub database: Option<String>,
}

impl Place {
    /// `--database URL`, else `RECON_DATABASE_URL` when it is set and not
    /// empty; an error when `--workspace` is given too.
    fn database(&self) -> Result<Option<String>, Failure> {
        if self.workspace.is_some() && self.database.is_some() {
            return Err(Failure::Usage(
                "--workspace DIR and --database URL name two places: give one".into(),
            ));
        }
        if self.workspace.is_some() {
            return Ok(None);
        }
        Ok(self
            .database
            .clone()
            .or_else(|| variable(DATABASE_VARIABLE)))
    }

    /// `--workspace DIR`, else `RECON_WORKSPACE` when it is set and not
    /// empty. Asked only where no database was named, so a database (by
    /// flag or by `RECON_DATABASE_URL`) always wins over the variable.
    fn workspace(self) -> Option<PathBuf> {
        self.workspace
            .or_else(|| variable(WORKSPACE_VARIABLE).map(PathBuf::from))
    }

    /// The database this place names, if it names one.
    pub fn database_url(&self) -> Result<Option<DatabaseUrl>, Failure> {
        self.database()?.map(|text| parse_url(&text)).transpose()
    }

    /// The location of a command that works on a workspace directory or a
    /// database alike: `--workspace DIR`, `--database URL`, else
    /// `RECON_DATABASE_URL`, else `RECON_WORKSPACE`.
    pub fn location(self) -> Result<Option<Location>, Failure> {
        Ok(match self.database_url()? {
            Some(url) => Some(url.into()),
            None => self.workspace().map(Location::Workspace),
        })
    }

    /// [`Place::location`], required.
    pub fn required(self) -> Result<Location, Failure> {
        self.location()?.ok_or_else(|| {
            Failure::Usage(format!(
                "--workspace DIR or --database URL (or {WORKSPACE_VARIABLE} or \
                 {DATABASE_VARIABLE}) is required for this command"
            ))
        })
    }

    /// The workspace directory of a command that exists only for one
    /// (`demo`, `ledger`, `receiver apply|adapter`, `experiment`):
    /// `--database` is a usage error, `RECON_DATABASE_URL` is ignored, and
    /// `RECON_WORKSPACE` stands in for `--workspace`.
    pub fn directory_only(self, command: &str) -> Result<Option<PathBuf>, Failure> {
        if self.database.is_some() {
            return Err(Failure::Usage(format!(
                "{command} works on a workspace directory only: it takes --workspace DIR, \
                 not --database URL"
            )));
        }
        Ok(self.workspace())
    }

    /// [`Place::directory_only`], required.
    pub fn required_directory(self, command: &str) -> Result<PathBuf, Failure> {
        self.directory_only(command)?.ok_or_else(|| {
            Failure::Usage(format!(
                "{command} needs --workspace DIR (or {WORKSPACE_VARIABLE})"
            ))
        })
    }
}

/// A database URL from the command line or the environment; a malformed
/// one is a usage error that never repeats it (it may hold a password).
pub fn parse_url(text: &str) -> Result<DatabaseUrl, Failure> {
    DatabaseUrl::parse(text).map_err(|e| Failure::Usage(format!("--database: {e}")))
}

/// Opens the workspace at `location`, creating a workspace directory when
/// `create` is set.
pub fn open(location: &Location, create: bool) -> Result<Workspace, Failure> {
    let mut options = open_options()?;
    options.create = create;
    Ok(Workspace::open(location, options)?)
}

/// Opens only the journal: verifying, exporting and checkpointing need
/// nothing else, and must work even when the receiver file is gone.
pub fn open_journal(location: &Location) -> Result<Journal, Failure> {
    Ok(Journal::open(location, open_options()?)?)
}
