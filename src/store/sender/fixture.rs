//! The SQLite outbox's unit-test fixture, shared by the store's tests.

use super::SqliteSender;
use crate::clock::{Clock, FixedClock};
use crate::domain::{
    CloseRecord, Description, Effect, NewObservation, NewOperation, Operation, Provenance,
    Registration, Snapshot, Timestamp,
};
use crate::store::{Outbox, ReceiverRegistry, TriageLog};
use serde_json::{json, Value};

pub(crate) struct Fixture {
    pub store: SqliteSender,
    pub clock: FixedClock,
    _dir: tempfile::TempDir,
}

pub(crate) fn payload() -> Value {
    json!({"n": 1})
}

/// A complete and authoritative read of `op_id` with no match.
pub(crate) fn absent(op_id: &str, closed: bool) -> crate::domain::Snapshot {
    crate::domain::Snapshot {
        op_id: op_id.into(),
        matches: Vec::new(),
        complete: true,
        authoritative: true,
        closed,
        closed_by: None,
    }
}

pub(crate) fn provenance() -> Provenance {
    Provenance {
        receiver: "builtin".into(),
        receiver_describe_sha256: "0".repeat(64),
        response_sha256: "0".repeat(64),
        ..Provenance::default()
    }
}

/// A registration of `name` for `actions`.
pub(crate) fn registration(name: &str, actions: &[&str]) -> Registration {
    Registration {
        id: 0,
        version: 1,
        name: name.into(),
        actions: actions.iter().map(|a| a.to_string()).collect(),
        builtin: true,
        program: String::new(),
        args: Vec::new(),
        env: Vec::new(),
        timeout_ms: 1,
        describe_sha256: "0".repeat(64),
        describe: Description::builtin(true),
    }
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let options = crate::settings::OpenOptions::default().creating();
        let path = dir.path().join("s.sqlite");
        let mut store = SqliteSender::open(&path, options, Timestamp::from_millis(0)).unwrap();
        let clock = FixedClock::at(Timestamp::from_millis(1_796_285_702_123));
        let ledger = registration("builtin", &["*"]);
        store.register_receiver(&ledger, &clock).unwrap();
        Fixture {
            store,
            clock,
            _dir: dir,
        }
    }

    /// A close of `op_id` recorded as the flows record it: its
    /// request, then its `closed` entry with `snapshot` (SPEC 12).
    pub(crate) fn recorded_close(&mut self, snapshot: &Snapshot) {
        let op_id = snapshot.op_id.as_str();
        let requested = self
            .store
            .record_close_requests(&[op_id], "builtin", "ann", &self.clock)
            .unwrap();
        assert_eq!(requested.len(), 1);
        let value = serde_json::to_value(snapshot).unwrap();
        let close = CloseRecord {
            receiver: "builtin".into(),
            authorized_by: "ann".into(),
            response_sha256: "0".repeat(64),
            matches: Vec::new(),
            snapshot_sha256: crate::domain::canonical_sha256(&value),
            snapshot: value,
            closed_by: None,
            closed_at: self.clock.now(),
        };
        let provenance = provenance();
        let observation = NewObservation {
            op_id,
            by: "ann",
            at: self.clock.now(),
            snapshot,
            verdict: crate::domain::Verdict::TerminalAbsence,
            provenance: &provenance,
        };
        let recorded = self
            .store
            .record_closes(&[(close, observation)], &self.clock);
        assert!(recorded.unwrap()[0].is_ok());
    }

    pub(crate) fn prepared(&mut self, op_id: &str) -> Operation {
        let payload = payload();
        let new = NewOperation {
            op_id,
            action_kind: "pay",
            payload: &payload,
            origin: None,
        };
        self.store.prepare(&new, &self.clock).unwrap()
    }

    /// `unknown` at version 2.
    pub(crate) fn dispatched(&mut self, op_id: &str) -> Operation {
        self.prepared(op_id);
        self.store.begin_dispatch(op_id, &self.clock).unwrap()
    }

    /// The effect `fx-OP` of a dispatched operation.
    pub(crate) fn effect(op_id: &str) -> Effect {
        Effect {
            effect_id: format!("fx-{op_id}"),
            op_id: op_id.into(),
            action_kind: "pay".into(),
            compensates_effect_id: None,
            payload: payload(),
        }
    }

    /// `confirmed` at version 3 by its receipt.
    pub(crate) fn confirmed(&mut self, op_id: &str) -> Operation {
        let op = self.dispatched(op_id);
        let receipt = Fixture::effect(op_id);
        let clock = &self.clock;
        let recorded = self
            .store
            .record_receipt(&op, &receipt, &provenance(), clock);
        recorded.unwrap().unwrap().operation
    }
}
