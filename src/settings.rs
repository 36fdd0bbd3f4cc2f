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
