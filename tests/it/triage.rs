//! SPEC 9 through the built binary and the library: every act stamped in
//! UTC, observations, notes and the escalation marker, the queue's filters,
//! orders and cursors, and (SPEC 6) the JSON error document of every
//! command that takes `--json`.
//!
//! Times are tested exactly through the library with a `FixedClock`
//! (`Workspace::with_clock`); the binary runs on the system clock, so its
//! tests check the shape of a time and the order of acts, never a value.

mod contradictions;
mod help;
mod json_errors;
mod marks;
mod observe;
mod queue;
mod time;

use crate::stores::{Site, Store};
use crate::support::demo_clock;
use recon::clock::FixedClock;
use serde_json::Value;
use std::sync::Arc;

/// Whether `text` is a UTC time as SPEC 9 writes it:
/// `2026-12-03T08:15:02.123Z` (RFC 3339, milliseconds, `Z`).
pub fn is_utc_millis(text: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    text.len() == shape.len()
        && text.bytes().zip(shape.bytes()).all(|(c, s)| match s {
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        })
}

/// A time field of a JSON object, checked for its shape.
#[track_caller]
pub fn time_of(object: &Value, field: &str) -> String {
    let text = object[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string in {object}"));
    assert!(is_utc_millis(text), "{field} = {text:?} in {object}");
    text.to_string()
}

/// A fresh outbox on a clock stopped at the demo's time, which only the
/// test moves.
pub struct Clocked {
    pub site: Site,
    pub clock: Arc<FixedClock>,
}

impl Clocked {
    /// On SQLite.
    pub fn new() -> Clocked {
        Clocked::on(Store::Sqlite)
    }

    /// On `store`.
    pub fn on(store: Store) -> Clocked {
        let clock = demo_clock();
        let mut site = Site::new(store);
        site.ws = site.ws.with_clock(clock.clone());
        Clocked { site, clock }
    }

    /// Moves the clock on by `seconds` and returns the new time as text.
    pub fn tick(&self, seconds: u64) -> String {
        self.clock.advance(std::time::Duration::from_secs(seconds));
        self.site.ws.now().to_string()
    }
}

#[test]
fn the_time_shape_is_checked_strictly() {
    assert!(is_utc_millis("2026-12-03T08:15:02.123Z"));
    for bad in [
        "2026-12-03T08:15:02Z",
        "2026-12-03T08:15:02.123+00:00",
        "2026-12-03 08:15:02.123Z",
        "2026-12-03T08:15:02.1234Z",
    ] {
        assert!(!is_utc_millis(bad), "{bad}");
    }
}
