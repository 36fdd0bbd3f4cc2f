//! Watching a workspace for other hosts' acts: what keeps a console live
//! without a query on its key loop.
//!
//! A [`HeadWatch`] runs on a thread of its own, on connections of its own,
//! and tells its caller the workspace's change marker each time it moves
//! (the journal head; and the built-in ledger's mark, where there is one).
//! On a database, the server wakes it (`store::HeadListener`: `LISTEN` on
//! the journal's notifications), and it reads the head anyway every
//! [`FALLBACK`], so a lost notification is only late. On a workspace
//! directory, it reads the marker every [`POLL_EVERY`] on a handle of its
//! own (two index lookups). A failure (the server restarted, the network
//! went) is told too, and the watch tries again after a pause that doubles
//! from [`RETRY_FIRST`] to [`RETRY_MOST`]; once it reads again, it tells the
//! marker it finds, so whatever was committed meanwhile shows.

use super::{ChangeMarker, Workspace};
use crate::error::StoreError;
use crate::settings::OpenOptions;
use crate::store::{self, HeadListener, Location};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a database's head is read with no notification.
pub const FALLBACK: Duration = Duration::from_secs(2);

/// How often a workspace directory's marker is read.
pub const POLL_EVERY: Duration = Duration::from_millis(100);

/// The first pause after a failure, and the longest.
pub const RETRY_FIRST: Duration = Duration::from_millis(100);
pub const RETRY_MOST: Duration = Duration::from_secs(2);

/// A watcher of one workspace's change marker, not started yet.
pub struct HeadWatch {
    location: Location,
}

/// Where the markers come from.
enum Source {
    /// A database: its server wakes the listener.
    Listen(Box<dyn HeadListener>),
    /// A workspace directory: a handle of the watch's own, opened on first
    /// use and again after a failure.
    Poll(Option<Box<Workspace>>),
}

impl HeadWatch {
    pub(super) fn new(location: Location) -> HeadWatch {
        HeadWatch { location }
    }

    /// Watches until `stop` is set or `tell` returns false: tells the first
    /// marker, then each one that differs from the last told, and every
    /// failure (after which the next marker read is told even if it is the
    /// same, so the caller knows the watch is back). Blocks the calling
    /// thread; `stop` is looked at between waits, at least every
    /// [`FALLBACK`].
    pub fn run(
        self,
        stop: &AtomicBool,
        mut tell: impl FnMut(Result<ChangeMarker, StoreError>) -> bool,
    ) {
        let options = OpenOptions::default();
        let mut source = match store::head_listener(&self.location, options) {
            Some(listener) => Source::Listen(listener),
            None => Source::Poll(None),
        };
        let mut last: Option<ChangeMarker> = None;
        let mut pause = RETRY_FIRST;
        while !stop.load(Ordering::Relaxed) {
            match source.next(&self.location, options) {
                Ok(marker) => {
                    pause = RETRY_FIRST;
                    if last.as_ref() != Some(&marker) {
                        last = Some(marker.clone());
                        if !tell(Ok(marker)) {
                            return;
                        }
                    }
                }
                Err(error) => {
                    last = None;
                    if !tell(Err(error)) {
                        return;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(RETRY_MOST);
                }
            }
        }
    }
}

impl Source {
    /// The marker after the next wait: at once on a fresh connection or
    /// handle, else after a wake or a fallback.
    fn next(
        &mut self,
        location: &Location,
        options: OpenOptions,
    ) -> Result<ChangeMarker, StoreError> {
        match self {
            Source::Listen(listener) => Ok(ChangeMarker {
                journal: listener.next(FALLBACK)?,
                ledger: None,
            }),
            Source::Poll(handle) => {
                let ws = match handle {
                    Some(ws) => {
                        std::thread::sleep(POLL_EVERY);
                        ws
                    }
                    None => handle.insert(Box::new(Workspace::open(location.clone(), options)?)),
                };
                let read = ws.change_marker();
                if read.is_err() {
                    *handle = None;
                }
                read
            }
        }
    }
}
