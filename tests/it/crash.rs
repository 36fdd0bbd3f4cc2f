//! Crash-point drills: for every named crash point, run the step in a real
//! `recon` child process that dies there (`RECON_CRASH_POINT`, exit 86, no
//! unwinding), reopen the outbox, check it is sound, and then carry the
//! flow on to its end, proving the crash left nothing half-done, nothing
//! locked and nothing that a retry could double.
//!
//! The points inside the outbox's transaction scripts and in dispatch run
//! on both stores (`crate::stores`): on PostgreSQL the process dies with
//! its transaction open, the server rolls it back when the connection
//! drops, and the outbox must read as on SQLite. The closing snapshot's
//! points lie inside the built-in ledger's own close transaction, which
//! has no twin behind a database (the adapter closes in its own process),
//! so those drills stay on SQLite.

use crate::invariants::{direct, none, DirectCalls};
use crate::stores::{on_both_stores, Site, Store};
use crate::support::Run;
use recon::domain::{CompensationRequest, EffectRequest, OpState};
use recon::faults::{CrashPoint, CRASH_EXIT_CODE, CRASH_POINT_ENV};
use recon::receiver::Fault;
use serde_json::json;

/// Every crash point has a drill below; a new point fails this until it does.
const DRILLED: [CrashPoint; 13] = [
    CrashPoint::DispatchAfterUnknownCommit,
    CrashPoint::DispatchAfterReceiptRead,
    CrashPoint::ReceiptBeforeCommit,
    CrashPoint::ReconcileAfterStateUpdate,
    CrashPoint::ReconcileBeforeCommit,
    CrashPoint::ApprovalAfterApprovalInsert,
    CrashPoint::ApprovalBeforeCommit,
    CrashPoint::CloseBeforeCommit,
    CrashPoint::CloseAfterCommit,
    // Drilled in tests/it/creation.rs.
    CrashPoint::CreateAfterSender,
    CrashPoint::CreateBeforeComplete,
    // Drilled in tests/it/upgrade.rs.
    CrashPoint::UpgradeBeforeCommit,
    // Drilled in tests/it/metrics.rs.
    CrashPoint::MetricsMidWrite,
];

#[test]
fn every_crash_point_has_a_drill() {
    assert_eq!(CrashPoint::ALL, DRILLED.as_slice());
    for point in CrashPoint::ALL {
        assert_eq!(CrashPoint::parse(point.name()), Some(*point));
        assert!(!point.description().is_empty());
    }
}

// SQLite only: this is about reading the variable, not about a store.
#[test]
fn a_crash_point_is_off_unless_named_exactly() {
    // Near misses arm nothing: the step runs to its end and exits 0.
    for value in [
        "",
        "1",
        "DISPATCH.AFTER_UNKNOWN_COMMIT",
        "dispatch.after_unknown_commit ",
        "all",
    ] {
        let mut site = Site::new(Store::Sqlite);
        prepared(&mut site, "op");
        let r = run_step(&site, &words(&["dispatch", "op"]), Some(value));
        assert_eq!(r.code, Some(0), "{value:?}: {}", r.stderr);
        assert_eq!(state(&site, "op"), (OpState::Confirmed, 3));
    }
}

// ---- setups, through the library ----

fn payload() -> serde_json::Value {
    json!({"amount": 10, "to": "acct-7"})
}

fn prepared(site: &mut Site, op: &str) {
    site.ws.prepare(op, "pay", &payload()).unwrap();
}

fn dispatched(site: &mut Site, op: &str, fault: Option<Fault>) {
    site.dispatched(op, "pay", &payload(), fault);
}

/// `op` confirmed by its receipt, and `comp` approved to compensate it.
fn approved_compensation(site: &mut Site) {
    dispatched(site, "op", None);
    let op = site.ws.require("op").unwrap();
    site.ws
        .approve_compensation(&CompensationRequest {
            reason: None,
            original_op_id: "op",
            effect_id: op.confirmed_effect_id.as_deref().unwrap(),
            approver: "Ann",
            expected_version: op.version,
            compensation_op_id: "comp",
            action_kind: "refund",
            payload: &json!({"amount": 10}),
        })
        .unwrap();
}

// ---- the drill itself ----

/// A step is the words of a `recon` command without the outbox's
/// location, which [`Site::run`] adds.
fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Runs the step, with the crash point `armed` when given.
fn run_step(site: &Site, step: &[String], armed: Option<&str>) -> Run {
    let refs: Vec<&str> = step.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = armed
        .map(|name| (CRASH_POINT_ENV, name))
        .into_iter()
        .collect();
    site.run_with_env(&refs, None, &env)
}

fn run_args(site: &Site, step: &[String]) -> Run {
    run_step(site, step, None)
}

fn dispatch_args(op: &str) -> Vec<String> {
    words(&["dispatch", op])
}

/// Runs the step with `point` armed, asserts the child died exactly there
/// (exit 86, nothing printed), and checks the outbox it left behind is
/// sound (every invariant of both files on SQLite, `verify` on
/// PostgreSQL).
#[track_caller]
fn crash_at(site: &Site, point: CrashPoint, step: &[String], direct: &DirectCalls) {
    let r = run_step(site, step, Some(point.name()));
    assert_eq!(
        r.code,
        Some(CRASH_EXIT_CODE),
        "{} did not die at {}: stdout {} stderr {}",
        step.join(" "),
        point.name(),
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.is_empty(), "a crashed step printed {}", r.stdout);
    site.assert_sound_after(direct);
}

/// [`crash_at`] for a step that writes only to the outbox, in one
/// transaction: every row of the outbox and the receiver is as it was.
#[track_caller]
fn crash_writes_nothing(site: &Site, point: CrashPoint, step: &[String]) {
    let before = site.dump();
    crash_at(site, point, step, &none());
    assert_eq!(
        site.dump(),
        before,
        "the crash at {} left a write",
        point.name()
    );
}

#[track_caller]
fn expect(r: Run, code: i32, needle: &str) -> Run {
    assert_eq!(
        r.code,
        Some(code),
        "stdout {} stderr {}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains(needle) || r.stderr.contains(needle),
        "expected {needle:?} in stdout {} stderr {}",
        r.stdout,
        r.stderr
    );
    r
}

fn state(site: &Site, op: &str) -> (OpState, i64) {
    let op = site.reopen().require(op).unwrap();
    (op.state, op.version)
}

fn effects(site: &Site, op: &str) -> usize {
    site.ledger(Some(op)).len()
}

fn evidence(site: &Site, op: &str) -> usize {
    site.reopen().evidence(op).unwrap().len()
}

fn reconcile_args(op: &str, decision: &str, close: bool) -> Vec<String> {
    let mut a = words(&[
        "reconcile",
        op,
        "--reviewer",
        "Ann",
        "--decision",
        decision,
        "--expected-version",
        "2",
    ]);
    if close {
        a.extend(words(&["--close", "--authorized-by", "Ann"]));
    }
    a
}

fn approve_args(comp: &str, approver: &str) -> Vec<String> {
    words(&[
        "approve-compensation",
        "op",
        "--effect",
        "fx-000001",
        "--approver",
        approver,
        "--expected-version",
        "3",
        "--compensation-op",
        comp,
        "--action",
        "refund",
        "--payload",
        r#"{"amount":10}"#,
    ])
}

/// A delayed original arriving at the receiver after the crash: its
/// effect id, or the code it was refused with.
fn late_apply(site: &Site, op: &str) -> Result<String, String> {
    site.direct_apply(&EffectRequest {
        op_id: op,
        action_kind: "pay",
        payload: &payload(),
        compensates_effect_id: None,
    })
}

// ---- dispatch ----

on_both_stores!(
    a_crash_after_the_unknown_commit_leaves_the_op_unknown_and_never_invokes_the_receiver
);
fn a_crash_after_the_unknown_commit_leaves_the_op_unknown_and_never_invokes_the_receiver(
    store: Store,
) {
    let point = CrashPoint::DispatchAfterUnknownCommit;
    let mut site = Site::new(store);
    prepared(&mut site, "op");
    crash_at(&site, point, &dispatch_args("op"), &none());
    assert_eq!(state(&site, "op"), (OpState::Unknown, 2));
    assert_eq!(site.reopen().dispatch_count("op").unwrap(), 1);
    assert_eq!(effects(&site, "op"), 0, "no child may run after this crash");
    expect(
        run_args(&site, &dispatch_args("op")),
        3,
        "refused: blind_retry",
    );
    expect(
        run_args(&site, &reconcile_args("op", "not_applied", true)),
        0,
        "terminal_absence",
    );
    assert_eq!(state(&site, "op"), (OpState::NotApplied, 3));
    site.assert_sound();

    // The same crash in a compensation's dispatch.
    let mut site = Site::new(store);
    approved_compensation(&mut site);
    crash_at(&site, point, &dispatch_args("comp"), &none());
    assert_eq!(state(&site, "comp"), (OpState::Unknown, 2));
    assert_eq!(effects(&site, "comp"), 0);
    expect(
        run_args(&site, &dispatch_args("comp")),
        3,
        "refused: blind_retry",
    );
    expect(
        run_args(&site, &reconcile_args("comp", "not_applied", true)),
        0,
        "terminal_absence",
    );
    site.assert_sound();
}

/// The two crash points between reading a receipt and committing
/// `confirmed` lose the receipt but not the effect: the op stays `unknown`
/// with one effect, and a reviewer confirms it from the receiver's evidence.
fn receipt_lost_by_the_sender(store: Store, point: CrashPoint) {
    let mut site = Site::new(store);
    prepared(&mut site, "op");
    crash_at(&site, point, &dispatch_args("op"), &none());
    assert_eq!(state(&site, "op"), (OpState::Unknown, 2));
    assert_eq!((effects(&site, "op"), evidence(&site, "op")), (1, 0));
    expect(
        run_args(&site, &dispatch_args("op")),
        3,
        "refused: blind_retry",
    );
    assert_eq!(effects(&site, "op"), 1, "the refused retry wrote nothing");
    expect(
        run_args(&site, &reconcile_args("op", "confirmed", false)),
        0,
        "exact_match_existence_only",
    );
    let op = site.reopen().require("op").unwrap();
    assert_eq!(op.confirmed_effect_id.as_deref(), Some("fx-000001"));
    site.assert_sound();

    let mut site = Site::new(store);
    approved_compensation(&mut site);
    crash_at(&site, point, &dispatch_args("comp"), &none());
    assert_eq!(state(&site, "comp"), (OpState::Unknown, 2));
    let ledger = site.ledger(Some("comp"));
    assert_eq!(ledger.len(), 1);
    assert_eq!(
        ledger[0].compensates_effect_id.as_deref(),
        Some("fx-000001")
    );
    expect(
        run_args(&site, &reconcile_args("comp", "confirmed", true)),
        0,
        "unique_exact_match",
    );
    assert_eq!(effects(&site, "op"), 1, "the original effect row stays");
    site.assert_sound();
}

on_both_stores!(a_crash_after_reading_the_receipt_keeps_the_op_unknown_with_its_one_effect);
fn a_crash_after_reading_the_receipt_keeps_the_op_unknown_with_its_one_effect(store: Store) {
    receipt_lost_by_the_sender(store, CrashPoint::DispatchAfterReceiptRead);
}

on_both_stores!(a_crash_inside_the_receipt_transaction_commits_neither_state_nor_evidence);
fn a_crash_inside_the_receipt_transaction_commits_neither_state_nor_evidence(store: Store) {
    receipt_lost_by_the_sender(store, CrashPoint::ReceiptBeforeCommit);
}

// ---- reconcile ----

/// A crash inside the review transaction records nothing; a closing
/// snapshot taken before it stays closed (it is the receiver's own commit),
/// so a late original is refused and the next reviewer can decide.
fn review_lost(store: Store, point: CrashPoint) {
    let mut site = Site::new(store);
    dispatched(&mut site, "op", Some(Fault::CrashAfterCommit));
    let step = reconcile_args("op", "confirmed", false);
    crash_writes_nothing(&site, point, &step);
    assert_eq!(state(&site, "op"), (OpState::Unknown, 2));
    assert_eq!(evidence(&site, "op"), 0);
    expect(run_args(&site, &step), 0, "exact_match_existence_only");
    assert_eq!(state(&site, "op"), (OpState::Confirmed, 3));
    assert_eq!(evidence(&site, "op"), 1);
    site.assert_sound();

    let mut site = Site::new(store);
    dispatched(&mut site, "op", Some(Fault::CrashBeforeCommit));
    crash_at(
        &site,
        point,
        &reconcile_args("op", "not_applied", true),
        &none(),
    );
    assert_eq!(state(&site, "op"), (OpState::Unknown, 2));
    assert!(
        site.closed("op"),
        "the closing snapshot committed before the crash"
    );
    assert_eq!(late_apply(&site, "op"), Err("operation_closed".into()));
    site.assert_sound_after(&direct("op", 1));
    expect(
        run_args(&site, &reconcile_args("op", "not_applied", false)),
        0,
        "terminal_absence",
    );
    assert_eq!(state(&site, "op"), (OpState::NotApplied, 3));
    site.assert_sound_after(&direct("op", 1));
}

on_both_stores!(a_crash_after_the_state_update_rolls_the_decision_back_with_its_missing_evidence);
fn a_crash_after_the_state_update_rolls_the_decision_back_with_its_missing_evidence(store: Store) {
    review_lost(store, CrashPoint::ReconcileAfterStateUpdate);
}

on_both_stores!(a_crash_before_the_review_commits_records_no_decision);
fn a_crash_before_the_review_commits_records_no_decision(store: Store) {
    review_lost(store, CrashPoint::ReconcileBeforeCommit);
}

// ---- approval ----

/// A crash inside the approval transaction leaves neither the approval nor
/// the compensation op; approving again (with the same or another id)
/// works, and the compensation dispatches.
fn approval_lost(store: Store, point: CrashPoint) {
    for retry_id in ["comp", "comp-2"] {
        let mut site = Site::new(store);
        dispatched(&mut site, "op", None);
        crash_writes_nothing(&site, point, &approve_args("comp", "Ann"));
        let ws = site.reopen();
        assert!(ws.approvals("op").unwrap().is_empty());
        assert!(ws.operation("comp").unwrap().is_none());
        expect(
            run_args(&site, &approve_args(retry_id, "Bob")),
            0,
            "approved",
        );
        site.assert_sound();
        expect(run_args(&site, &dispatch_args(retry_id)), 0, "receipt");
        assert_eq!(state(&site, retry_id), (OpState::Confirmed, 3));
        site.assert_sound();
    }
}

on_both_stores!(a_crash_after_the_approval_insert_leaves_neither_approval_nor_compensation);
fn a_crash_after_the_approval_insert_leaves_neither_approval_nor_compensation(store: Store) {
    approval_lost(store, CrashPoint::ApprovalAfterApprovalInsert);
}

on_both_stores!(a_crash_before_the_approval_commits_leaves_neither_approval_nor_compensation);
fn a_crash_before_the_approval_commits_leaves_neither_approval_nor_compensation(store: Store) {
    approval_lost(store, CrashPoint::ApprovalBeforeCommit);
}

// ---- the closing snapshot (SQLite only: see the module's note) ----

fn snapshot_close_args(op: &str) -> Vec<String> {
    words(&[
        "snapshot",
        op,
        "--close",
        "--authorized-by",
        "Ann",
        "--json",
    ])
}

// SQLite only: the point lies inside the built-in ledger's close.
#[test]
fn a_crash_before_the_close_commits_leaves_the_op_open() {
    let point = CrashPoint::CloseBeforeCommit;
    let mut site = Site::new(Store::Sqlite);
    dispatched(&mut site, "op", Some(Fault::CrashBeforeCommit));
    crash_at(&site, point, &snapshot_close_args("op"), &none());
    assert!(!site.closed("op"), "the tombstone rolled back");
    // Still open, so a delayed original lands, and the next close sees it.
    assert_eq!(late_apply(&site, "op"), Ok("fx-000001".into()));
    let snap = expect(
        run_args(&site, &snapshot_close_args("op")),
        0,
        "unique_exact_match",
    );
    assert_eq!(
        snap.json()["snapshot"]["matches"].as_array().map(Vec::len),
        Some(1)
    );
    site.assert_sound_after(&direct("op", 1));

    // The same crash inside `reconcile --close`: nothing closed, nothing
    // recorded, and the reviewer's retry completes.
    let mut site = Site::new(Store::Sqlite);
    dispatched(&mut site, "op", Some(Fault::CrashBeforeCommit));
    let step = reconcile_args("op", "not_applied", true);
    crash_at(&site, point, &step, &none());
    assert!(!site.closed("op"));
    assert_eq!(
        (state(&site, "op"), evidence(&site, "op")),
        ((OpState::Unknown, 2), 0)
    );
    expect(run_args(&site, &step), 0, "terminal_absence");
    site.assert_sound();
}

// SQLite only: the point lies inside the built-in ledger's close.
#[test]
fn a_crash_after_the_close_commits_keeps_the_op_closed_for_good() {
    let point = CrashPoint::CloseAfterCommit;
    let mut site = Site::new(Store::Sqlite);
    dispatched(&mut site, "op", Some(Fault::CrashBeforeCommit));
    crash_at(&site, point, &snapshot_close_args("op"), &none());
    let closure = site.reopen().closure("op").unwrap().expect("closed");
    assert_eq!(
        (closure.authorized_by.as_str(), closure.effects_at_close),
        ("Ann", 0)
    );
    assert_eq!(late_apply(&site, "op"), Err("operation_closed".into()));
    let read = run_args(&site, &words(&["snapshot", "op", "--json"]));
    assert_eq!(read.json()["verdict"], "terminal_absence");
    site.assert_sound_after(&direct("op", 1));

    // Inside `reconcile --close`: the close stands at the receiver, the
    // outbox recorded neither it nor the decision. The receiver's answer
    // says closed, but no close is recorded (SPEC 12): a decision on it is
    // refused `unbacked_close`, and the close repeated (SPEC 8 rule 6)
    // records it, and the decision with it.
    let mut site = Site::new(Store::Sqlite);
    dispatched(&mut site, "op", Some(Fault::CrashBeforeCommit));
    crash_at(
        &site,
        point,
        &reconcile_args("op", "not_applied", true),
        &none(),
    );
    assert!(site.closed("op"));
    assert_eq!(
        (state(&site, "op"), evidence(&site, "op")),
        ((OpState::Unknown, 2), 0)
    );
    assert_eq!(late_apply(&site, "op"), Err("operation_closed".into()));
    expect(
        run_args(&site, &reconcile_args("op", "not_applied", false)),
        3,
        "unbacked_close",
    );
    expect(
        run_args(&site, &reconcile_args("op", "not_applied", true)),
        0,
        "terminal_absence",
    );
    site.assert_sound_after(&direct("op", 1));
}
