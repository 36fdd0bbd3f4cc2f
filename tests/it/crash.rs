//! Crash-point drills: for every named crash point, run the step in a real
//! `recon` child process that dies there (`RECON_CRASH_POINT`, exit 86, no
//! unwinding), reopen both databases, check every invariant, and then carry
//! the flow on to its end, proving the crash left nothing half-done, nothing
//! locked and nothing that a retry could double.

use crate::invariants::{assert_invariants, direct, none, DirectCalls};
use crate::support::{run, run_with_env, Lab, Run};
use recon::domain::{CompensationRequest, OpState};
use recon::faults::{CrashPoint, CRASH_EXIT_CODE, CRASH_POINT_ENV};
use recon::receiver::Fault;
use serde_json::json;

/// Every crash point has a drill below; a new point fails this until it does.
const DRILLED: [CrashPoint; 12] = [
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
];

#[test]
fn every_crash_point_has_a_drill() {
    assert_eq!(CrashPoint::ALL, DRILLED.as_slice());
    for point in CrashPoint::ALL {
        assert_eq!(CrashPoint::parse(point.name()), Some(*point));
        assert!(!point.description().is_empty());
    }
}

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
        let mut lab = Lab::new();
        prepared(&mut lab, "op");
        let step = dispatch_args(&lab, "op");
        let refs: Vec<&str> = step.iter().map(String::as_str).collect();
        let r = run_with_env(&refs, None, &[(CRASH_POINT_ENV, value)]);
        assert_eq!(r.code, Some(0), "{value:?}: {}", r.stderr);
        assert_eq!(state(&lab, "op"), (OpState::Confirmed, 3));
    }
}

// ---- setups, through the library ----

fn payload() -> serde_json::Value {
    json!({"amount": 10, "to": "acct-7"})
}

fn prepared(lab: &mut Lab, op: &str) {
    lab.ws.prepare(op, "pay", &payload()).unwrap();
}

fn dispatched(lab: &mut Lab, op: &str, fault: Option<Fault>) {
    lab.dispatched(op, "pay", &payload(), fault);
}

/// `op` confirmed by its receipt, and `comp` approved to compensate it.
fn approved_compensation(lab: &mut Lab) {
    dispatched(lab, "op", None);
    let op = lab.ws.require("op").unwrap();
    lab.ws
        .approve_compensation(&CompensationRequest {
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

fn dispatch_args(lab: &Lab, op: &str) -> Vec<String> {
    args(&["dispatch", "--workspace", &lab.path_str(), op])
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn run_args(list: &[String]) -> Run {
    let refs: Vec<&str> = list.iter().map(String::as_str).collect();
    run(&refs, None)
}

/// Runs the step with `point` armed, asserts the child died exactly there
/// (exit 86, nothing printed), and checks every invariant on the files it
/// left behind.
#[track_caller]
fn crash_at(lab: &Lab, point: CrashPoint, step: &[String], direct: &DirectCalls) {
    let refs: Vec<&str> = step.iter().map(String::as_str).collect();
    let r = run_with_env(&refs, None, &[(CRASH_POINT_ENV, point.name())]);
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
    assert_invariants(lab.path(), direct);
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

fn state(lab: &Lab, op: &str) -> (OpState, i64) {
    let op = lab.reopen().require(op).unwrap();
    (op.state, op.version)
}

fn effects(lab: &Lab, op: &str) -> usize {
    lab.reopen().ledger(Some(op)).unwrap().len()
}

fn evidence(lab: &Lab, op: &str) -> usize {
    lab.reopen().evidence(op).unwrap().len()
}

fn closed(lab: &Lab, op: &str) -> bool {
    lab.reopen().closure(op).unwrap().is_some()
}

fn reconcile_args(lab: &Lab, op: &str, decision: &str, close: bool) -> Vec<String> {
    let mut a = args(&[
        "reconcile",
        "--workspace",
        &lab.path_str(),
        op,
        "--reviewer",
        "Ann",
        "--decision",
        decision,
        "--expected-version",
        "2",
    ]);
    if close {
        a.extend(args(&["--close", "--authorized-by", "Ann"]));
    }
    a
}

fn approve_args(lab: &Lab, comp: &str, approver: &str) -> Vec<String> {
    args(&[
        "approve-compensation",
        "--workspace",
        &lab.path_str(),
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

/// A delayed original arriving at the receiver after the crash.
fn late_apply(lab: &Lab, op: &str) -> Run {
    run(
        &[
            "receiver",
            "apply",
            "--workspace",
            &lab.path_str(),
            "--op",
            op,
            "--action",
            "pay",
            "--payload",
            &payload().to_string(),
        ],
        None,
    )
}

// ---- dispatch ----

#[test]
fn a_crash_after_the_unknown_commit_leaves_the_op_unknown_and_never_invokes_the_receiver() {
    let point = CrashPoint::DispatchAfterUnknownCommit;
    let mut lab = Lab::new();
    prepared(&mut lab, "op");
    crash_at(&lab, point, &dispatch_args(&lab, "op"), &none());
    assert_eq!(state(&lab, "op"), (OpState::Unknown, 2));
    assert_eq!(lab.reopen().dispatch_count("op").unwrap(), 1);
    assert_eq!(effects(&lab, "op"), 0, "no child may run after this crash");
    expect(
        run_args(&dispatch_args(&lab, "op")),
        3,
        "refused: blind_retry",
    );
    expect(
        run_args(&reconcile_args(&lab, "op", "not_applied", true)),
        0,
        "terminal_absence",
    );
    assert_eq!(state(&lab, "op"), (OpState::NotApplied, 3));
    assert_invariants(lab.path(), &none());

    // The same crash in a compensation's dispatch.
    let mut lab = Lab::new();
    approved_compensation(&mut lab);
    crash_at(&lab, point, &dispatch_args(&lab, "comp"), &none());
    assert_eq!(state(&lab, "comp"), (OpState::Unknown, 2));
    assert_eq!(effects(&lab, "comp"), 0);
    expect(
        run_args(&dispatch_args(&lab, "comp")),
        3,
        "refused: blind_retry",
    );
    expect(
        run_args(&reconcile_args(&lab, "comp", "not_applied", true)),
        0,
        "terminal_absence",
    );
    assert_invariants(lab.path(), &none());
}

/// The two crash points between reading a receipt and committing
/// `confirmed` lose the receipt but not the effect: the op stays `unknown`
/// with one effect, and a reviewer confirms it from the receiver's evidence.
fn receipt_lost_by_the_sender(point: CrashPoint) {
    let mut lab = Lab::new();
    prepared(&mut lab, "op");
    crash_at(&lab, point, &dispatch_args(&lab, "op"), &none());
    assert_eq!(state(&lab, "op"), (OpState::Unknown, 2));
    assert_eq!((effects(&lab, "op"), evidence(&lab, "op")), (1, 0));
    expect(
        run_args(&dispatch_args(&lab, "op")),
        3,
        "refused: blind_retry",
    );
    assert_eq!(effects(&lab, "op"), 1, "the refused retry wrote nothing");
    expect(
        run_args(&reconcile_args(&lab, "op", "confirmed", false)),
        0,
        "exact_match_existence_only",
    );
    let op = lab.reopen().require("op").unwrap();
    assert_eq!(op.confirmed_effect_id.as_deref(), Some("fx-000001"));
    assert_invariants(lab.path(), &none());

    let mut lab = Lab::new();
    approved_compensation(&mut lab);
    crash_at(&lab, point, &dispatch_args(&lab, "comp"), &none());
    assert_eq!(state(&lab, "comp"), (OpState::Unknown, 2));
    let ledger = lab.reopen().ledger(Some("comp")).unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(
        ledger[0].compensates_effect_id.as_deref(),
        Some("fx-000001")
    );
    expect(
        run_args(&reconcile_args(&lab, "comp", "confirmed", true)),
        0,
        "unique_exact_match",
    );
    assert_eq!(effects(&lab, "op"), 1, "the original effect row stays");
    assert_invariants(lab.path(), &none());
}

#[test]
fn a_crash_after_reading_the_receipt_keeps_the_op_unknown_with_its_one_effect() {
    receipt_lost_by_the_sender(CrashPoint::DispatchAfterReceiptRead);
}

#[test]
fn a_crash_inside_the_receipt_transaction_commits_neither_state_nor_evidence() {
    receipt_lost_by_the_sender(CrashPoint::ReceiptBeforeCommit);
}

// ---- reconcile ----

/// A crash inside the review transaction records nothing; a closing
/// snapshot taken before it stays closed (it is the receiver's own commit),
/// so a late original is refused and the next reviewer can decide.
fn review_lost(point: CrashPoint) {
    let mut lab = Lab::new();
    dispatched(&mut lab, "op", Some(Fault::CrashAfterCommit));
    let step = reconcile_args(&lab, "op", "confirmed", false);
    crash_at(&lab, point, &step, &none());
    assert_eq!(state(&lab, "op"), (OpState::Unknown, 2));
    assert_eq!(evidence(&lab, "op"), 0);
    expect(run_args(&step), 0, "exact_match_existence_only");
    assert_eq!(state(&lab, "op"), (OpState::Confirmed, 3));
    assert_eq!(evidence(&lab, "op"), 1);
    assert_invariants(lab.path(), &none());

    let mut lab = Lab::new();
    dispatched(&mut lab, "op", Some(Fault::CrashBeforeCommit));
    crash_at(
        &lab,
        point,
        &reconcile_args(&lab, "op", "not_applied", true),
        &none(),
    );
    assert_eq!(state(&lab, "op"), (OpState::Unknown, 2));
    assert!(
        closed(&lab, "op"),
        "the closing snapshot committed before the crash"
    );
    expect(late_apply(&lab, "op"), 3, "refused: operation_closed");
    assert_invariants(lab.path(), &direct("op", 1));
    expect(
        run_args(&reconcile_args(&lab, "op", "not_applied", false)),
        0,
        "terminal_absence",
    );
    assert_eq!(state(&lab, "op"), (OpState::NotApplied, 3));
    assert_invariants(lab.path(), &direct("op", 1));
}

#[test]
fn a_crash_after_the_state_update_rolls_the_decision_back_with_its_missing_evidence() {
    review_lost(CrashPoint::ReconcileAfterStateUpdate);
}

#[test]
fn a_crash_before_the_review_commits_records_no_decision() {
    review_lost(CrashPoint::ReconcileBeforeCommit);
}

// ---- approval ----

/// A crash inside the approval transaction leaves neither the approval nor
/// the compensation op; approving again (with the same or another id)
/// works, and the compensation dispatches.
fn approval_lost(point: CrashPoint) {
    for retry_id in ["comp", "comp-2"] {
        let mut lab = Lab::new();
        dispatched(&mut lab, "op", None);
        crash_at(&lab, point, &approve_args(&lab, "comp", "Ann"), &none());
        let ws = lab.reopen();
        assert!(ws.approvals("op").unwrap().is_empty());
        assert!(ws.operation("comp").unwrap().is_none());
        expect(
            run_args(&approve_args(&lab, retry_id, "Bob")),
            0,
            "approved",
        );
        assert_invariants(lab.path(), &none());
        expect(run_args(&dispatch_args(&lab, retry_id)), 0, "receipt");
        assert_eq!(state(&lab, retry_id), (OpState::Confirmed, 3));
        assert_invariants(lab.path(), &none());
    }
}

#[test]
fn a_crash_after_the_approval_insert_leaves_neither_approval_nor_compensation() {
    approval_lost(CrashPoint::ApprovalAfterApprovalInsert);
}

#[test]
fn a_crash_before_the_approval_commits_leaves_neither_approval_nor_compensation() {
    approval_lost(CrashPoint::ApprovalBeforeCommit);
}

// ---- the closing snapshot ----

fn snapshot_close_args(lab: &Lab, op: &str) -> Vec<String> {
    args(&[
        "snapshot",
        "--workspace",
        &lab.path_str(),
        op,
        "--close",
        "--authorized-by",
        "Ann",
        "--json",
    ])
}

#[test]
fn a_crash_before_the_close_commits_leaves_the_op_open() {
    let point = CrashPoint::CloseBeforeCommit;
    let mut lab = Lab::new();
    dispatched(&mut lab, "op", Some(Fault::CrashBeforeCommit));
    crash_at(&lab, point, &snapshot_close_args(&lab, "op"), &none());
    assert!(!closed(&lab, "op"), "the tombstone rolled back");
    // Still open, so a delayed original lands, and the next close sees it.
    expect(late_apply(&lab, "op"), 0, "receipt");
    let snap = expect(
        run_args(&snapshot_close_args(&lab, "op")),
        0,
        "unique_exact_match",
    );
    assert_eq!(
        snap.json()["snapshot"]["matches"].as_array().map(Vec::len),
        Some(1)
    );
    assert_invariants(lab.path(), &direct("op", 1));

    // The same crash inside `reconcile --close`: nothing closed, nothing
    // recorded, and the reviewer's retry completes.
    let mut lab = Lab::new();
    dispatched(&mut lab, "op", Some(Fault::CrashBeforeCommit));
    let step = reconcile_args(&lab, "op", "not_applied", true);
    crash_at(&lab, point, &step, &none());
    assert!(!closed(&lab, "op"));
    assert_eq!(
        (state(&lab, "op"), evidence(&lab, "op")),
        ((OpState::Unknown, 2), 0)
    );
    expect(run_args(&step), 0, "terminal_absence");
    assert_invariants(lab.path(), &none());
}

#[test]
fn a_crash_after_the_close_commits_keeps_the_op_closed_for_good() {
    let point = CrashPoint::CloseAfterCommit;
    let mut lab = Lab::new();
    dispatched(&mut lab, "op", Some(Fault::CrashBeforeCommit));
    crash_at(&lab, point, &snapshot_close_args(&lab, "op"), &none());
    let closure = lab.reopen().closure("op").unwrap().expect("closed");
    assert_eq!(
        (closure.authorized_by.as_str(), closure.effects_at_close),
        ("Ann", 0)
    );
    expect(late_apply(&lab, "op"), 3, "refused: operation_closed");
    let read = run(
        &["snapshot", "--workspace", &lab.path_str(), "op", "--json"],
        None,
    );
    assert_eq!(read.json()["verdict"], "terminal_absence");
    assert_invariants(lab.path(), &direct("op", 1));

    // Inside `reconcile --close`: the close stands, the decision was not
    // recorded, and a reviewer records it without closing again.
    let mut lab = Lab::new();
    dispatched(&mut lab, "op", Some(Fault::CrashBeforeCommit));
    crash_at(
        &lab,
        point,
        &reconcile_args(&lab, "op", "not_applied", true),
        &none(),
    );
    assert!(closed(&lab, "op"));
    assert_eq!(
        (state(&lab, "op"), evidence(&lab, "op")),
        ((OpState::Unknown, 2), 0)
    );
    expect(late_apply(&lab, "op"), 3, "refused: operation_closed");
    expect(
        run_args(&reconcile_args(&lab, "op", "not_applied", false)),
        0,
        "terminal_absence",
    );
    assert_invariants(lab.path(), &direct("op", 1));
}
