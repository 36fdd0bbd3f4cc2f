//! Where the time of an act comes from.
//!
//! The facade holds one [`Clock`] and stamps every act with it; nothing
//! deeper reads the time. The binary uses the system clock; a test hands
//! the library a [`FixedClock`] (`Workspace::with_clock`) and moves it
//! forward by hand, so ages and orders in time are tested exactly, never
//! by waiting and never through an environment variable read deep in the
//! code.

use crate::domain::time::Timestamp;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The operating system's clock, in UTC.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        // A system clock set before 1970 reads as the epoch.
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp::from_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that says what it was set to, and moves only when told; clones
/// share one time.
#[derive(Debug, Clone)]
pub struct FixedClock(Arc<AtomicI64>);

impl FixedClock {
    pub fn at(time: Timestamp) -> Self {
        FixedClock(Arc::new(AtomicI64::new(time.millis())))
    }

    pub fn set(&self, time: Timestamp) {
        self.0.store(time.millis(), Ordering::SeqCst);
    }

    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
}
