//! Why a command did not finish with exit 0, and the exit codes of SPEC 6.
//!
//! A [`Failure`] is data, like a command's result: it knows its exit code
//! and its one line for stderr, and [`super::render::finish`] is what prints
//! it. Keeping the printing out of here is what lets a second form (the
//! JSON error document of SPEC 6) be added in that one place.

use crate::cli::UsageError;
use crate::error::{Error, StoreError};
use crate::sanitize::escape;

pub const EXIT_OK: i32 = 0;
pub const EXIT_MISMATCH: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_REFUSED: i32 = 3;
pub const EXIT_STORAGE: i32 = 4;

/// Why a command did not finish with exit 0.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Engine(Error),
    /// Standard output was closed by its reader; nothing more to say.
    ClosedPipe,
}

impl Failure {
    /// An I/O error outside the stores (a terminal, standard output): a
    /// storage-class failure, exit 4.
    pub fn io(e: std::io::Error) -> Self {
        Failure::Engine(StoreError::Io(e).into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Usage(_) => EXIT_USAGE,
            Failure::Engine(Error::Refused(_)) => EXIT_REFUSED,
            Failure::Engine(Error::Store(_)) => EXIT_STORAGE,
            Failure::ClosedPipe => EXIT_OK,
        }
    }

    /// The one line for stderr, escaped for the terminal; none for a closed
    /// pipe, whose reader has gone.
    pub fn message(&self) -> Option<String> {
        match self {
            Failure::Usage(message) => Some(format!("error: {}", escape(message))),
            Failure::Engine(Error::Refused(refusal)) => Some(format!(
                "refused: {}: {}",
                refusal.code(),
                escape(&refusal.to_string())
            )),
            Failure::Engine(Error::Store(error)) => {
                Some(format!("error: {}", escape(&error.to_string())))
            }
            Failure::ClosedPipe => None,
        }
    }
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Engine(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Engine(e.into())
    }
}

impl From<crate::Refusal> for Failure {
    fn from(e: crate::Refusal) -> Self {
        Failure::Engine(e.into())
    }
}
