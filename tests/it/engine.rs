//! The engine of SPEC sections 1-4, through the library with real receiver
//! children, on both stores (`crate::stores`): a SQLite workspace with the
//! built-in ledger, and a PostgreSQL outbox with the fixture adapter. The
//! tests that need the built-in ledger's own drills or files stay on
//! SQLite, each saying why.

use crate::stores::{on_both_stores, Site, Store};
use recon::dispatch::{self, DispatchOptions, ReceiverCall};
use recon::domain::Recorded;
use recon::domain::{CompensationRequest, Decision, OpState, Review, Snapshot, Verdict};
use recon::receiver::Fault;
use recon::workspace::ReconcileRequest;
use recon::{Error, Refusal, StoreError};
use rusqlite::Connection;
use serde_json::{json, Value};

fn email() -> Value {
    json!({"to": "ada@example.com", "subject": "Invoice 1042", "body": "Attached."})
}

const LOST: DispatchOptions = DispatchOptions {
    fault: Some(Fault::CrashAfterCommit),
    wait_permit: false,
};
const NEVER_ARRIVED: DispatchOptions = DispatchOptions {
    fault: Some(Fault::CrashBeforeCommit),
    wait_permit: false,
};

#[track_caller]
fn refusal<T: std::fmt::Debug>(result: recon::Result<T>) -> Refusal {
    match result {
        Err(Error::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// An op dispatched once with the given fault: `unknown` at version 2.
fn dispatched(lab: &mut Site, op_id: &str, options: DispatchOptions) {
    lab.ws.prepare(op_id, "send_email", &email()).unwrap();
    lab.dispatch(op_id, options).unwrap();
}

fn review(
    lab: &mut Site,
    op_id: &str,
    reviewer: &str,
    decision: Decision,
    version: i64,
) -> recon::Result<Recorded> {
    lab.ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id,
        reviewer,
        decision,
        expected_version: version,
        payload: None,
        close_authorized_by: None,
    })
}

fn closing_review(
    lab: &mut Site,
    op_id: &str,
    decision: Decision,
    version: i64,
) -> recon::Result<Recorded> {
    lab.ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id,
        reviewer: "rosa",
        decision,
        expected_version: version,
        payload: None,
        close_authorized_by: Some("rosa"),
    })
}

fn effects(lab: &Site, op_id: &str) -> i64 {
    lab.effects(Some(op_id))
}

// SQLite only: the built-in ledger's permit drill holds the child.
#[test]
fn unknown_is_persisted_before_the_receiver_is_spawned() {
    let mut lab = Site::new(Store::Sqlite);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let mut pending = lab.held_dispatch("op-1");
    // The child is running and blocked before its write; a brand-new
    // connection already reads the durable unknown and the dispatch row.
    let other = lab.reopen();
    let seen = other.require("op-1").unwrap();
    assert_eq!((seen.state, seen.version), (OpState::Unknown, 2));
    assert_eq!(other.dispatch_count("op-1").unwrap(), 1);
    assert_eq!(effects(&lab, "op-1"), 0);
    pending.child.permit().unwrap();
    let report = lab.ws.finish_dispatch(pending).unwrap();
    assert_eq!(report.outcome, "receipt");
}

on_both_stores!(receipt_lost_after_commit_leaves_the_op_unknown_with_one_effect);
fn receipt_lost_after_commit_leaves_the_op_unknown_with_one_effect(store: Store) {
    let mut lab = Site::new(store);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let report = lab.dispatch("op-1", LOST).unwrap();
    assert_eq!(
        report.receiver_exit_code,
        Some(lab.store.lost_receipt_exit())
    );
    assert_eq!(report.outcome, "unknown");
    assert_eq!(report.effect_id, None);
    let reopened = lab.reopen().require("op-1").unwrap();
    assert_eq!((reopened.state, reopened.version), (OpState::Unknown, 2));
    assert_eq!(effects(&lab, "op-1"), 1);
    assert!(lab.ws.evidence("op-1").unwrap().is_empty());
}

on_both_stores!(request_lost_before_commit_leaves_the_op_unknown_with_no_effect);
fn request_lost_before_commit_leaves_the_op_unknown_with_no_effect(store: Store) {
    let mut lab = Site::new(store);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let report = lab.dispatch("op-1", NEVER_ARRIVED).unwrap();
    assert_eq!(
        report.receiver_exit_code,
        Some(lab.store.never_arrived_exit())
    );
    assert_eq!(
        lab.reopen().require("op-1").unwrap().state,
        OpState::Unknown
    );
    assert_eq!(effects(&lab, "op-1"), 0);
}

on_both_stores!(a_receipt_confirms_the_op_with_receipt_evidence);
fn a_receipt_confirms_the_op_with_receipt_evidence(store: Store) {
    let mut lab = Site::new(store);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let report = lab.ws.dispatch("op-1", DispatchOptions::default()).unwrap();
    assert_eq!(report.outcome, "receipt");
    assert_eq!(report.effect_id.as_deref(), Some("fx-000001"));
    let op = lab.ws.require("op-1").unwrap();
    assert_eq!((op.state, op.version), (OpState::Confirmed, 3));
    assert_eq!(op.confirmed_effect_id.as_deref(), Some("fx-000001"));
    let evidence = lab.ws.evidence("op-1").unwrap();
    assert_eq!(evidence.len(), 1);
    assert_eq!(evidence[0].source.as_str(), "receipt");
    assert_eq!(evidence[0].snapshot["receipt"]["effect_id"], "fx-000001");
}

on_both_stores!(second_dispatch_is_refused_as_blind_retry_before_the_receiver_is_invoked);
fn second_dispatch_is_refused_as_blind_retry_before_the_receiver_is_invoked(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", LOST);
    let calls = lab.receiver_calls();
    let refused = refusal(lab.ws.dispatch("op-1", DispatchOptions::default()));
    assert_eq!(refused.code(), "blind_retry");
    assert_eq!(lab.receiver_calls(), calls, "no receiver was called");
    assert_eq!(lab.ws.dispatch_count("op-1").unwrap(), 1);
    assert_eq!(effects(&lab, "op-1"), 1);
    assert_eq!(lab.ws.require("op-1").unwrap().version, 2);
}

on_both_stores!(dispatch_is_refused_from_every_state_but_prepared);
fn dispatch_is_refused_from_every_state_but_prepared(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-unknown", LOST);
    lab.ws
        .prepare("op-confirmed", "send_email", &email())
        .unwrap();
    lab.ws
        .dispatch("op-confirmed", DispatchOptions::default())
        .unwrap();
    dispatched(&mut lab, "op-absent", NEVER_ARRIVED);
    closing_review(&mut lab, "op-absent", Decision::NotApplied, 2).unwrap();
    for (op, state) in [
        ("op-unknown", OpState::Unknown),
        ("op-confirmed", OpState::Confirmed),
        ("op-absent", OpState::NotApplied),
    ] {
        assert_eq!(lab.ws.require(op).unwrap().state, state);
        assert_eq!(
            refusal(lab.ws.dispatch(op, DispatchOptions::default())).code(),
            "blind_retry"
        );
        assert_eq!(lab.ws.dispatch_count(op).unwrap(), 1);
    }
    assert_eq!(
        refusal(lab.ws.dispatch("op-missing", DispatchOptions::default())).code(),
        "unknown_operation"
    );
}

// SQLite only: calls the built-in ledger directly and reads its rows.
#[test]
fn the_receiver_is_not_idempotent() {
    let mut lab = Site::new(Store::Sqlite);
    let op = lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let call = ReceiverCall::for_operation(&op);
    for _ in 0..2 {
        let outcome = dispatch::spawn(lab.ws.receiver_program(), lab.path(), &call)
            .unwrap()
            .finish()
            .unwrap();
        assert_eq!(outcome.exit_code, Some(0));
        assert!(outcome.receipt.is_some());
    }
    let ledger = lab.ws.ledger(Some("op-1")).unwrap();
    assert_eq!(ledger.len(), 2);
    assert_ne!(ledger[0].effect_id, ledger[1].effect_id);
}

// SQLite only: the built-in ledger's permit drill and a direct call to it.
#[test]
fn an_empty_read_while_the_original_is_in_flight_is_inconclusive_and_an_unsafe_retry_doubles_the_effect(
) {
    let mut lab = Site::new(Store::Sqlite);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let mut pending = lab.held_dispatch("op-1");
    let early = lab.ws.snapshot("op-1", None).unwrap();
    assert_eq!(
        (early.snapshot.matches.len(), early.verdict),
        (0, Verdict::Inconclusive)
    );
    assert_eq!(
        refusal(lab.ws.dispatch("op-1", DispatchOptions::default())).code(),
        "blind_retry"
    );
    let unsafe_retry = dispatch::spawn(
        lab.ws.receiver_program(),
        lab.path(),
        &ReceiverCall::for_operation(&pending.operation),
    )
    .unwrap()
    .finish()
    .unwrap();
    assert_eq!(unsafe_retry.exit_code, Some(0));
    pending.child.permit().unwrap();
    lab.ws.finish_dispatch(pending).unwrap();
    let later = lab.ws.snapshot("op-1", None).unwrap();
    assert_eq!(
        (later.snapshot.matches.len(), later.verdict),
        (2, Verdict::DuplicateMatches)
    );
}

// SQLite only: the built-in ledger's permit drill holds the original.
#[test]
fn a_closing_snapshot_refuses_the_late_original() {
    let mut lab = Site::new(Store::Sqlite);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    let mut pending = lab.held_dispatch("op-1");
    let closing = lab.ws.snapshot("op-1", Some("rosa")).unwrap();
    assert!(closing.snapshot.closed);
    assert_eq!(closing.verdict, Verdict::TerminalAbsence);
    pending.child.permit().unwrap();
    let late = lab.ws.finish_dispatch(pending).unwrap();
    assert_eq!(late.receiver_exit_code, Some(3));
    assert!(
        late.receiver_stderr.contains("refused: operation_closed"),
        "{}",
        late.receiver_stderr
    );
    assert_eq!(effects(&lab, "op-1"), 0);
    let recorded = review(&mut lab, "op-1", "rosa", Decision::NotApplied, 2).unwrap();
    assert_eq!(recorded.operation.state, OpState::NotApplied);
    assert_eq!(
        lab.ws.closure("op-1").unwrap().unwrap().authorized_by,
        "rosa"
    );
}

// SQLite only: writes to the built-in ledger's file.
#[test]
fn the_insert_trigger_refuses_an_effect_for_a_closed_op_on_any_write_path() {
    let mut lab = Site::new(Store::Sqlite);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    lab.ws.snapshot("op-1", Some("rosa")).unwrap();
    // A writer that skips the explicit check still hits the trigger.
    let conn = Connection::open(lab.path().join("receiver.sqlite")).unwrap();
    let err = conn
        .execute(
            "INSERT INTO effects (seq, effect_id, op_id, action_kind, payload) VALUES (99, 'fx-000099', 'op-1', 'send_email', '{}')",
            [],
        )
        .unwrap_err();
    assert!(err.to_string().contains("operation_closed"), "{err}");
    assert_eq!(effects(&lab, "op-1"), 0);
}

// SQLite only: writes to the built-in ledger's file.
#[test]
fn close_tombstones_are_durable() {
    let mut lab = Site::new(Store::Sqlite);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    lab.ws.snapshot("op-1", Some("rosa")).unwrap();
    let conn = Connection::open(lab.path().join("receiver.sqlite")).unwrap();
    assert!(conn.execute("DELETE FROM closed_ops", []).is_err());
    assert!(conn
        .execute("UPDATE closed_ops SET op_id = 'other'", [])
        .is_err());
    // A second close keeps the first authorizer.
    lab.ws.snapshot("op-1", Some("sam")).unwrap();
    assert_eq!(
        lab.reopen().closure("op-1").unwrap().unwrap().authorized_by,
        "rosa"
    );
}

on_both_stores!(closing_needs_a_named_authorizer);
fn closing_needs_a_named_authorizer(store: Store) {
    let mut lab = Site::new(store);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    assert_eq!(
        refusal(lab.ws.snapshot("op-1", Some("  "))).code(),
        "empty_reviewer"
    );
    assert!(lab.ws.closure("op-1").unwrap().is_none());
}

// SQLite only: a direct call to the built-in ledger, held by its permit drill.
#[test]
fn an_early_single_match_is_not_uniqueness_until_closed() {
    let mut lab = Site::new(Store::Sqlite);
    dispatched(&mut lab, "op-1", LOST);
    let op = lab.ws.require("op-1").unwrap();
    let open = lab.ws.snapshot("op-1", None).unwrap();
    assert_eq!(open.verdict, Verdict::ExactMatchExistenceOnly);
    let mut duplicate = dispatch::spawn(
        lab.ws.receiver_program(),
        lab.path(),
        &ReceiverCall {
            wait_permit: true,
            ..ReceiverCall::for_operation(&op)
        },
    )
    .unwrap();
    let closed = lab.ws.snapshot("op-1", Some("rosa")).unwrap();
    assert_eq!(closed.verdict, Verdict::UniqueExactMatch);
    duplicate.permit().unwrap();
    assert_eq!(duplicate.finish().unwrap().exit_code, Some(3));
    assert_eq!(
        lab.ws.snapshot("op-1", None).unwrap().verdict,
        Verdict::UniqueExactMatch
    );
}

on_both_stores!(reconcile_refuses_a_blank_reviewer);
fn reconcile_refuses_a_blank_reviewer(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", LOST);
    assert_eq!(
        refusal(review(&mut lab, "op-1", " \t ", Decision::Confirmed, 2)).code(),
        "empty_reviewer"
    );
}

on_both_stores!(reconcile_refuses_a_snapshot_taken_for_another_op);
fn reconcile_refuses_a_snapshot_taken_for_another_op(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", LOST);
    dispatched(&mut lab, "op-2", LOST);
    let op = lab.ws.require("op-1").unwrap();
    let other = lab.ws.snapshot("op-2", None).unwrap();
    let refused = refusal(lab.ws.record_review(
        &Review {
            keep: None,
            op_id: "op-1",
            payload: &op.payload,
            reviewer: "rosa",
            decision: Decision::Confirmed,
            snapshot: &other.snapshot,
            expected_version: 2,
        },
        &other.provenance,
    ));
    assert_eq!(refused.code(), "scope_mismatch");
}

on_both_stores!(reconcile_refuses_a_decision_on_another_payload_scope);
fn reconcile_refuses_a_decision_on_another_payload_scope(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", LOST);
    let wider = json!({"to": "everyone@example.com"});
    let refused = refusal(lab.ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id: "op-1",
        reviewer: "rosa",
        decision: Decision::Confirmed,
        expected_version: 2,
        payload: Some(&wider),
        close_authorized_by: None,
    }));
    assert_eq!(refused.code(), "scope_mismatch");
}

on_both_stores!(reconcile_refuses_a_decision_the_verdict_does_not_support);
fn reconcile_refuses_a_decision_the_verdict_does_not_support(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-applied", LOST);
    dispatched(&mut lab, "op-absent", NEVER_ARRIVED);
    // An empty open read supports neither decision; one match never supports not_applied.
    assert_eq!(
        refusal(review(
            &mut lab,
            "op-absent",
            "rosa",
            Decision::NotApplied,
            2
        ))
        .code(),
        "unsupported_verdict"
    );
    assert_eq!(
        refusal(review(
            &mut lab,
            "op-absent",
            "rosa",
            Decision::Confirmed,
            2
        ))
        .code(),
        "unsupported_verdict"
    );
    assert_eq!(
        refusal(closing_review(
            &mut lab,
            "op-applied",
            Decision::NotApplied,
            2
        ))
        .code(),
        "unsupported_verdict"
    );
    assert_eq!(lab.ws.require("op-absent").unwrap().state, OpState::Unknown);
}

on_both_stores!(stale_second_reviewer_cannot_overwrite_or_append);
fn stale_second_reviewer_cannot_overwrite_or_append(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", LOST);
    review(&mut lab, "op-1", "rosa", Decision::Confirmed, 2).unwrap();
    let stale = refusal(review(&mut lab, "op-1", "sam", Decision::Confirmed, 2));
    assert_eq!(stale.code(), "stale_version");
    let message = stale.to_string();
    assert!(message.contains("expected version 2, found 3"), "{message}");
    assert!(
        message.contains("confirmed") && message.contains("rosa"),
        "{message}"
    );
    let evidence = lab.ws.evidence("op-1").unwrap();
    assert_eq!(evidence.len(), 1);
    assert_eq!(evidence[0].reviewer.as_deref(), Some("rosa"));
    assert_eq!(lab.ws.require("op-1").unwrap().version, 3);
}

on_both_stores!(reconcile_refuses_an_op_that_is_not_unknown);
fn reconcile_refuses_an_op_that_is_not_unknown(store: Store) {
    let mut lab = Site::new(store);
    lab.ws
        .prepare("op-prepared", "send_email", &email())
        .unwrap();
    assert_eq!(
        refusal(review(
            &mut lab,
            "op-prepared",
            "rosa",
            Decision::Confirmed,
            1
        ))
        .code(),
        "not_unknown"
    );
    lab.ws
        .prepare("op-confirmed", "send_email", &email())
        .unwrap();
    lab.ws
        .dispatch("op-confirmed", DispatchOptions::default())
        .unwrap();
    assert_eq!(
        refusal(review(
            &mut lab,
            "op-confirmed",
            "rosa",
            Decision::Confirmed,
            3
        ))
        .code(),
        "not_unknown"
    );
}

on_both_stores!(reconcile_refuses_an_unknown_operation);
fn reconcile_refuses_an_unknown_operation(store: Store) {
    let mut lab = Site::new(store);
    assert_eq!(
        refusal(review(&mut lab, "op-nope", "rosa", Decision::Confirmed, 1)).code(),
        "unknown_operation"
    );
}

// SQLite only: the SQLite outbox's evidence-fault drill.
#[test]
fn a_failed_evidence_write_rolls_the_state_change_back() {
    let mut lab = Site::new(Store::Sqlite);
    dispatched(&mut lab, "op-1", LOST);
    lab.ws.drills().unwrap().install_evidence_fault().unwrap();
    let failed = review(&mut lab, "op-1", "rosa", Decision::Confirmed, 2);
    assert!(
        matches!(failed, Err(Error::Store(StoreError::Sqlite { .. }))),
        "{failed:?}"
    );
    lab.ws.drills().unwrap().remove_evidence_fault().unwrap();
    let op = lab.reopen().require("op-1").unwrap();
    assert_eq!((op.state, op.version), (OpState::Unknown, 2));
    assert!(lab.ws.evidence("op-1").unwrap().is_empty());
    // And the decision can still be made afterwards.
    review(&mut lab, "op-1", "rosa", Decision::Confirmed, 2).unwrap();
}

on_both_stores!(the_evidence_row_holds_the_full_snapshot);
fn the_evidence_row_holds_the_full_snapshot(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", LOST);
    let recorded = closing_review(&mut lab, "op-1", Decision::Confirmed, 2).unwrap();
    assert_eq!(recorded.verdict, Verdict::UniqueExactMatch);
    let evidence = lab.ws.evidence("op-1").unwrap();
    let stored: Snapshot = serde_json::from_value(evidence[0].snapshot.clone()).unwrap();
    assert_eq!(stored, lab.ws.snapshot("op-1", None).unwrap().snapshot);
    assert_eq!(stored.matches[0].payload, email());
    assert_eq!((evidence[0].from_version, evidence[0].to_version), (2, 3));
    assert_eq!(evidence[0].verdict, Some(Verdict::UniqueExactMatch));
    assert_eq!(evidence[0].effect_id.as_deref(), Some("fx-000001"));
}

// SQLite only: writes to the SQLite file (pg_store tries the triggers on PostgreSQL).
#[test]
fn evidence_is_append_only() {
    let mut lab = Site::new(Store::Sqlite);
    dispatched(&mut lab, "op-1", LOST);
    review(&mut lab, "op-1", "rosa", Decision::Confirmed, 2).unwrap();
    let conn = Connection::open(lab.path().join("sender.sqlite")).unwrap();
    let update = conn
        .execute("UPDATE evidence SET reviewer = 'mallory'", [])
        .unwrap_err();
    assert!(update.to_string().contains("append-only"), "{update}");
    assert!(conn.execute("DELETE FROM evidence", []).is_err());
    assert_eq!(
        lab.ws.evidence("op-1").unwrap()[0].reviewer.as_deref(),
        Some("rosa")
    );
}

on_both_stores!(evidence_rows_name_their_journal_entries);
fn evidence_rows_name_their_journal_entries(store: Store) {
    let mut lab = Site::new(store);
    let head = |lab: &Site| {
        let journal =
            recon::workspace::Journal::open(lab.location(), recon::OpenOptions::default());
        journal.unwrap().checkpoint().unwrap()
    };
    // The ledger's registration (after the outbox's settings on
    // PostgreSQL, SPEC 12).
    let start = head(&lab).length;
    dispatched(&mut lab, "op-1", LOST);
    lab.ws.prepare("op-2", "send_email", &email()).unwrap();
    lab.ws.dispatch("op-2", DispatchOptions::default()).unwrap();
    review(&mut lab, "op-1", "rosa", Decision::Confirmed, 2).unwrap();
    let log = lab.ws.evidence_log().unwrap();
    assert_eq!(log.len(), 2);
    // After `start`, op-1: prepared 1, dispatched 2, its lost call 3;
    // op-2: prepared 4, dispatched 5, receipt 6; the decision on op-1: the
    // read it rests on observed 7, decided 8.
    assert_eq!(
        (log[0].op_id.as_str(), log[0].journal_seq),
        ("op-2", start + 6)
    );
    assert_eq!(
        (log[1].op_id.as_str(), log[1].journal_seq),
        ("op-1", start + 8)
    );
    assert!(log.iter().all(|e| e.hash.len() == 64));
    let head = head(&lab);
    assert_eq!(
        (head.length, head.head_hash.as_str()),
        (start + 8, log[1].hash.as_str())
    );
}

on_both_stores!(not_applied_ends_the_flow);
fn not_applied_ends_the_flow(store: Store) {
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op-1", NEVER_ARRIVED);
    closing_review(&mut lab, "op-1", Decision::NotApplied, 2).unwrap();
    assert_eq!(
        refusal(lab.ws.dispatch("op-1", DispatchOptions::default())).code(),
        "blind_retry"
    );
    assert_eq!(
        refusal(review(&mut lab, "op-1", "rosa", Decision::Confirmed, 3)).code(),
        "not_unknown"
    );
    assert_eq!(
        refusal(lab.ws.prepare("op-1", "send_email", &email())).code(),
        "duplicate_operation"
    );
    assert_eq!(lab.ws.require("op-1").unwrap().state, OpState::NotApplied);
}

/// A confirmed original `op-1` (version 3, effect fx-000001).
fn confirmed(lab: &mut Site) {
    lab.ws
        .prepare("op-1", "charge_card", &json!({"amount_cents": 1200}))
        .unwrap();
    lab.ws.dispatch("op-1", DispatchOptions::default()).unwrap();
}

fn approve(
    lab: &mut Site,
    effect: &str,
    approver: &str,
    version: i64,
    comp: &str,
) -> recon::Result<recon::domain::Approval> {
    lab.ws.approve_compensation(&CompensationRequest {
        reason: None,
        original_op_id: "op-1",
        effect_id: effect,
        approver,
        expected_version: version,
        compensation_op_id: comp,
        action_kind: "refund_charge",
        payload: &json!({"amount_cents": 1200}),
    })
}

on_both_stores!(approval_refuses_an_effect_that_is_not_the_confirmed_one);
fn approval_refuses_an_effect_that_is_not_the_confirmed_one(store: Store) {
    let mut lab = Site::new(store);
    confirmed(&mut lab);
    assert_eq!(
        refusal(approve(&mut lab, "fx-000002", "ines", 3, "op-c")).code(),
        "compensation_effect_mismatch"
    );
    assert!(lab.ws.operation("op-c").unwrap().is_none());
}

on_both_stores!(approval_refuses_an_original_that_is_not_confirmed);
fn approval_refuses_an_original_that_is_not_confirmed(store: Store) {
    let mut lab = Site::new(store);
    lab.ws
        .prepare("op-1", "charge_card", &json!({"amount_cents": 1200}))
        .unwrap();
    lab.dispatch("op-1", LOST).unwrap();
    assert_eq!(
        refusal(approve(&mut lab, "fx-000001", "ines", 2, "op-c")).code(),
        "original_not_confirmed"
    );
}

on_both_stores!(approval_refuses_a_stale_version_and_a_blank_approver);
fn approval_refuses_a_stale_version_and_a_blank_approver(store: Store) {
    let mut lab = Site::new(store);
    confirmed(&mut lab);
    assert_eq!(
        refusal(approve(&mut lab, "fx-000001", "ines", 2, "op-c")).code(),
        "stale_version"
    );
    assert_eq!(
        refusal(approve(&mut lab, "fx-000001", "  ", 3, "op-c")).code(),
        "empty_reviewer"
    );
}

on_both_stores!(approval_refuses_a_second_approval_of_the_same_effect);
fn approval_refuses_a_second_approval_of_the_same_effect(store: Store) {
    let mut lab = Site::new(store);
    confirmed(&mut lab);
    approve(&mut lab, "fx-000001", "ines", 3, "op-c1").unwrap();
    assert_eq!(
        refusal(approve(&mut lab, "fx-000001", "ines", 3, "op-c2")).code(),
        "already_approved"
    );
    assert!(lab.ws.operation("op-c2").unwrap().is_none());
}

on_both_stores!(approval_and_the_compensation_op_commit_together);
fn approval_and_the_compensation_op_commit_together(store: Store) {
    let mut lab = Site::new(store);
    confirmed(&mut lab);
    let approval = approve(&mut lab, "fx-000001", "ines", 3, "op-c").unwrap();
    assert_eq!(approval.approved_version, 3);
    let comp = lab.reopen().require("op-c").unwrap();
    assert_eq!(comp.state, OpState::Prepared);
    assert_eq!(comp.compensates_effect_id.as_deref(), Some("fx-000001"));
    assert_eq!(comp.compensates_op_id.as_deref(), Some("op-1"));
    assert_eq!(lab.ws.approvals("op-c").unwrap(), vec![approval]);
}

// SQLite only: the SQLite outbox's drill writes the unapproved row.
#[test]
fn compensation_dispatch_refuses_a_missing_approval() {
    let mut lab = Site::new(Store::Sqlite);
    confirmed(&mut lab);
    lab.ws
        .drills()
        .unwrap()
        .insert_unapproved_compensation("op-c", "refund_charge", &json!({}), "op-1", "fx-000001")
        .unwrap();
    assert_eq!(
        refusal(lab.ws.dispatch("op-c", DispatchOptions::default())).code(),
        "compensation_not_approved"
    );
    assert_eq!(lab.ws.dispatch_count("op-c").unwrap(), 0);
}

// SQLite only: the SQLite outbox's drill changes the action.
#[test]
fn compensation_dispatch_refuses_a_changed_action_kind() {
    let mut lab = Site::new(Store::Sqlite);
    confirmed(&mut lab);
    approve(&mut lab, "fx-000001", "ines", 3, "op-c").unwrap();
    lab.ws
        .drills()
        .unwrap()
        .change_action_kind("op-c", "charge_card")
        .unwrap();
    assert_eq!(
        refusal(lab.ws.dispatch("op-c", DispatchOptions::default())).code(),
        "compensation_action_mismatch"
    );
    assert_eq!(lab.ws.effect_count(None).unwrap(), 1);
}

// SQLite only: reads the built-in ledger's rows.
#[test]
fn a_compensation_is_a_new_ledger_row_and_the_original_stays() {
    let mut lab = Site::new(Store::Sqlite);
    confirmed(&mut lab);
    approve(&mut lab, "fx-000001", "ines", 3, "op-c").unwrap();
    let report = lab.ws.dispatch("op-c", DispatchOptions::default()).unwrap();
    assert_eq!(report.outcome, "receipt");
    let ledger = lab.ws.ledger(None).unwrap();
    assert_eq!(ledger.len(), 2);
    assert_eq!(
        (
            ledger[0].op_id.as_str(),
            ledger[0].compensates_effect_id.as_deref()
        ),
        ("op-1", None)
    );
    assert_eq!(
        (
            ledger[1].op_id.as_str(),
            ledger[1].compensates_effect_id.as_deref()
        ),
        ("op-c", Some("fx-000001"))
    );
    assert_eq!(lab.ws.require("op-1").unwrap().state, OpState::Confirmed);
}

on_both_stores!(a_compensation_whose_receipt_is_lost_stays_unknown_and_blocks_blind_retry);
fn a_compensation_whose_receipt_is_lost_stays_unknown_and_blocks_blind_retry(store: Store) {
    let mut lab = Site::new(store);
    confirmed(&mut lab);
    approve(&mut lab, "fx-000001", "ines", 3, "op-c").unwrap();
    let report = lab.dispatch("op-c", LOST).unwrap();
    assert_eq!(
        (report.receiver_exit_code, report.state),
        (Some(lab.store.lost_receipt_exit()), OpState::Unknown)
    );
    assert_eq!(
        refusal(lab.ws.dispatch("op-c", DispatchOptions::default())).code(),
        "blind_retry"
    );
    assert_eq!(lab.effects(None), 2);
    // It is reconciled like any op: its one effect targets the original's.
    let classified = lab.ws.snapshot("op-c", Some("rosa")).unwrap();
    assert_eq!(classified.verdict, Verdict::UniqueExactMatch);
}

on_both_stores!(preparing_an_existing_op_id_is_refused);
fn preparing_an_existing_op_id_is_refused(store: Store) {
    let mut lab = Site::new(store);
    lab.ws.prepare("op-1", "send_email", &email()).unwrap();
    assert_eq!(
        refusal(lab.ws.prepare("op-1", "send_sms", &json!({}))).code(),
        "duplicate_operation"
    );
    assert_eq!(lab.ws.require("op-1").unwrap().action_kind, "send_email");
}

// SQLite only: the two SQLite files.
#[test]
fn sender_and_receiver_are_separate_databases() {
    let lab = Site::new(Store::Sqlite);
    let sender = Connection::open(lab.path().join("sender.sqlite")).unwrap();
    let receiver = Connection::open(lab.path().join("receiver.sqlite")).unwrap();
    let tables = |c: &Connection| -> Vec<String> {
        c.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(tables(&sender).contains(&"operations".to_string()));
    assert!(!tables(&sender).contains(&"effects".to_string()));
    assert!(tables(&receiver).contains(&"effects".to_string()));
    assert!(!tables(&receiver).contains(&"operations".to_string()));
}
