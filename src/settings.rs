//! How a workspace is opened: whether to create it, and how long a writer
//! waits for another process's transaction. The binary reads these from its
//! flags and environment; the stores only obey them.

use std::time::Duration;

pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How to open a workspace's databases.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Create the directory and the databases when they do not exist.
    pub create: bool,
    pub busy_timeout: Duration,
    /// What a commit on these connections survives. Crate-internal on
    /// purpose: no flag, variable or file sets it, so every workspace a
    /// user names is opened [`Durability::PowerLoss`]; only the
    /// experiment's throwaway workspaces are not (see
    /// [`OpenOptions::throwaway`]).
    pub(crate) durability: Durability,
}

/// What a commit survives, as SQLite's `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// `synchronous = FULL`: a commit survives a power loss (one fsync per
    /// commit). Every workspace a user opens.
    PowerLoss,
    /// `synchronous = OFF`: a commit survives the death of any process,
    /// since the kernel holds what SQLite handed it, but not of the
    /// machine. Only for a workspace in a temporary directory that is
    /// deleted when its owner is done with it.
    ProcessCrash,
}

impl Durability {
    /// The value of SQLite's `synchronous` pragma.
    pub(crate) fn synchronous(self) -> &'static str {
        match self {
            Durability::PowerLoss => "FULL",
            Durability::ProcessCrash => "OFF",
        }
    }
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: false,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            durability: Durability::PowerLoss,
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

    /// How long a writer waits for another's lock before it reports the
    /// outbox as locked.
    pub fn waiting(self, busy_timeout: Duration) -> Self {
        OpenOptions {
            busy_timeout,
            ..self
        }
    }

    /// The options of the experiment's workspaces (`crate::experiment`):
    /// temporary directories deleted after their scenario, whose connections
    /// in this process commit without fsync. No claim of the experiment
    /// rests on surviving a power loss (its crashes kill processes, not the
    /// machine), and a receiver child opens the same files with the default
    /// options, so its own commits keep their fsync.
    pub(crate) fn throwaway(self) -> Self {
        OpenOptions {
            durability: Durability::ProcessCrash,
            ..self
        }
    }
}
