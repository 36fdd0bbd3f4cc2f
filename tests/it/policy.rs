//! `domain::policy` as a table: which act one operation allows, and the
//! sentence that says why or why not. The console shows these sentences
//! beside its keys, so each row pins the exact words as well as the answer.

use recon::domain::policy::{
    availability, ceiling_in_words, close_would_help, explanation, last_changed_by, recheck, Act,
    Facts, LatestRead, Unavailable,
};
use recon::domain::{
    Approval, Ceiling, Closure, Decision, Description, EvidenceRecord, EvidenceSource, OpKind,
    OpState, Operation, Refusal, Verdict,
};
use serde_json::json;

use Decision::{Confirmed, NotApplied};
use OpKind::{Compensation, Original};
use Verdict::*;

/// The facts about `op-1` at version 2, owned, so each row can build them
/// in one expression.
struct Case {
    operation: Operation,
    verdict: Verdict,
    read_closed: bool,
    /// Whether a read of the receiver has come back.
    read_back: bool,
    receiver: Description,
    closure: Option<Closure>,
    approvals: Vec<Approval>,
}

fn case(kind: OpKind, state: OpState, verdict: Verdict) -> Case {
    Case {
        operation: Operation {
            surplus_effect_ids: Vec::new(),
            op_id: "op-1".into(),
            kind,
            action_kind: "send_email".into(),
            payload: json!({"to": "ada@example.com"}),
            state,
            version: 2,
            compensates_effect_id: (kind == Compensation).then(|| "fx-000009".into()),
            compensates_op_id: (kind == Compensation).then(|| "op-0".into()),
            confirmed_effect_id: (state == OpState::Confirmed).then(|| "fx-000001".into()),
            receiver: "builtin".into(),
            triage: Default::default(),
        },
        verdict,
        read_closed: false,
        read_back: true,
        receiver: description(true, true, true),
        closure: None,
        approvals: Vec::new(),
    }
}

/// An unknown original, read without the close barrier.
fn unknown(verdict: Verdict) -> Case {
    case(Original, OpState::Unknown, verdict)
}

fn original(state: OpState) -> Case {
    case(Original, state, UniqueExactMatch)
}

fn compensation(state: OpState) -> Case {
    case(Compensation, state, Inconclusive)
}

impl Case {
    /// The read on screen was a closing one.
    fn closed_read(mut self) -> Case {
        self.read_closed = true;
        self
    }

    /// The receiver holds a close tombstone, authorized by `who`.
    fn closed_by(mut self, who: &str) -> Case {
        self.closure = Some(Closure {
            op_id: "op-1".into(),
            authorized_by: who.into(),
            effects_at_close: 0,
        });
        self
    }

    /// The operation routes to `mailer`, a receiver registered without
    /// `can_close`.
    fn at_a_receiver_that_cannot_close(mut self) -> Case {
        self.operation.receiver = "mailer".into();
        self.receiver.can_close = false;
        self
    }

    /// The operation routes to `archive`, a receiver that can close but
    /// whose reads are never complete (an archive that may lag behind).
    fn at_a_receiver_whose_reads_are_incomplete(mut self) -> Case {
        self.operation.receiver = "archive".into();
        self.receiver.query.complete = false;
        self
    }

    /// The read of the receiver has not come back (it is running, or it
    /// failed).
    fn unread(mut self) -> Case {
        self.read_back = false;
        self
    }

    fn without_confirmed_effect(mut self) -> Case {
        self.operation.confirmed_effect_id = None;
        self
    }

    /// An approval of compensation `compensation_op_id` for `effect_id` of
    /// `original_op_id`.
    fn approved(mut self, original_op_id: &str, effect_id: &str, compensation_op_id: &str) -> Case {
        self.approvals.push(Approval {
            reason: None,
            original_op_id: original_op_id.into(),
            effect_id: effect_id.into(),
            approved_version: 2,
            approver: "ada".into(),
            compensation_op_id: compensation_op_id.into(),
            action_kind: "undo_send_email".into(),
            payload: json!({}),
        });
        self
    }

    fn facts(&self) -> Facts<'_> {
        Facts {
            operation: &self.operation,
            read: self.read_back.then_some(LatestRead {
                verdict: self.verdict,
                closed: self.read_closed,
            }),
            receiver: &self.receiver,
            closure: self.closure.as_ref(),
            approvals: &self.approvals,
        }
    }
}

fn ok(why: &str) -> Result<String, Unavailable> {
    Ok(why.to_string())
}

fn no(why: &str) -> Result<String, Unavailable> {
    Err(Unavailable {
        reason: why.to_string(),
        close_first: false,
    })
}

/// Refused, and a closing snapshot is the way to suggest.
fn no_close_first(why: &str) -> Result<String, Unavailable> {
    Err(Unavailable {
        reason: why.to_string(),
        close_first: true,
    })
}

#[track_caller]
fn check(case: Case, act: Act, expected: Result<String, Unavailable>) {
    assert_eq!(availability(act, &case.facts()), expected, "{act:?}");
}

#[test]
fn each_act_starts_from_one_state() {
    assert_eq!(Act::Close.from_state(), OpState::Unknown);
    assert_eq!(Act::Decide(Confirmed).from_state(), OpState::Unknown);
    assert_eq!(Act::Decide(NotApplied).from_state(), OpState::Unknown);
    assert_eq!(Act::Compensate.from_state(), OpState::Confirmed);
    assert_eq!(Act::Dispatch.from_state(), OpState::Prepared);
}

#[test]
#[rustfmt::skip]
fn a_close_is_for_an_unknown_operation_the_receiver_has_not_closed() {
    check(unknown(Inconclusive), Act::Close, ok("a receiver mutation that bars every later write for this op"));
    check(unknown(DuplicateMatches), Act::Close, ok("a receiver mutation that bars every later write for this op"));
    check(unknown(TerminalAbsence).closed_read().closed_by("ada"), Act::Close, no("the receiver already closed it (authorized by ada); a read shows the same"));
    check(original(OpState::Prepared), Act::Close, no("only an unknown operation needs the close barrier; this one is prepared"));
    check(original(OpState::Confirmed), Act::Close, no("only an unknown operation needs the close barrier; this one is confirmed"));
    check(original(OpState::NotApplied).closed_by("ada"), Act::Close, no("only an unknown operation needs the close barrier; this one is not_applied"));
}

#[test]
#[rustfmt::skip]
fn a_decision_needs_an_unknown_operation_and_a_verdict_that_supports_it() {
    check(unknown(UniqueExactMatch).closed_read(), Act::Decide(Confirmed), ok("unique_exact_match supports it, against version 2"));
    check(unknown(ExactMatchExistenceOnly), Act::Decide(Confirmed), ok("exact_match_existence_only supports it, against version 2"));
    check(unknown(TerminalAbsence).closed_read(), Act::Decide(NotApplied), ok("terminal_absence supports it, against version 2"));
    check(unknown(TerminalAbsence).closed_read(), Act::Decide(Confirmed), no("confirmed needs one exact match; this read is terminal_absence"));
    check(unknown(UniqueExactMatch).closed_read(), Act::Decide(NotApplied), no("not_applied needs terminal_absence (no match under a closing read); this read is unique_exact_match"));
    check(unknown(DuplicateMatches).closed_read(), Act::Decide(Confirmed), no("confirmed needs one exact match; this read is duplicate_matches"));
    check(original(OpState::Confirmed), Act::Decide(Confirmed), no("only an unknown operation takes a decision; this one is confirmed"));
    check(original(OpState::Prepared), Act::Decide(NotApplied), no("only an unknown operation takes a decision; this one is prepared"));
    check(original(OpState::NotApplied), Act::Decide(NotApplied), no("only an unknown operation takes a decision; this one is not_applied"));
}

#[test]
#[rustfmt::skip]
fn a_closing_snapshot_is_suggested_after_an_open_read_without_a_duplicate_or_mismatch() {
    check(unknown(Inconclusive), Act::Decide(NotApplied), no_close_first("not_applied needs terminal_absence (no match under a closing read); this read is inconclusive"));
    check(unknown(Inconclusive), Act::Decide(Confirmed), no_close_first("confirmed needs one exact match; this read is inconclusive"));
    check(unknown(ExactMatchExistenceOnly), Act::Decide(NotApplied), no_close_first("not_applied needs terminal_absence (no match under a closing read); this read is exact_match_existence_only"));
    check(unknown(DuplicateMatches), Act::Decide(Confirmed), no("confirmed needs one exact match; this read is duplicate_matches"));
    check(unknown(PayloadMismatch), Act::Decide(NotApplied), no("not_applied needs terminal_absence (no match under a closing read); this read is payload_mismatch"));
    check(unknown(ActionScopeMismatch), Act::Decide(Confirmed), no("confirmed needs one exact match; this read is action_scope_mismatch"));
    check(unknown(Inconclusive).closed_read(), Act::Decide(NotApplied), no("not_applied needs terminal_absence (no match under a closing read); this read is inconclusive"));
}

#[test]
#[rustfmt::skip]
fn a_receiver_that_cannot_close_is_never_closed_and_never_proves_an_absence() {
    let mailer = |verdict| unknown(verdict).at_a_receiver_that_cannot_close();
    check(mailer(Inconclusive), Act::Close, no("receiver mailer cannot close, so absence is never proof"));
    check(mailer(ExactMatchExistenceOnly), Act::Close, no("receiver mailer cannot close, so absence is never proof"));
    check(original(OpState::Confirmed).at_a_receiver_that_cannot_close(), Act::Close, no("only an unknown operation needs the close barrier; this one is confirmed"));
    check(mailer(Inconclusive), Act::Decide(NotApplied), no("not_applied is unreachable for this receiver: receiver mailer cannot close, so absence is never proof"));
    check(mailer(ExactMatchExistenceOnly), Act::Decide(NotApplied), no("not_applied is unreachable for this receiver: receiver mailer cannot close, so absence is never proof"));
    check(mailer(Inconclusive).unread(), Act::Decide(NotApplied), no("not_applied is unreachable for this receiver: receiver mailer cannot close, so absence is never proof"));
    check(original(OpState::NotApplied).at_a_receiver_that_cannot_close(), Act::Decide(NotApplied), no("only an unknown operation takes a decision; this one is not_applied"));
    // An exact match is proof of existence from any receiver.
    check(mailer(ExactMatchExistenceOnly), Act::Decide(Confirmed), ok("exact_match_existence_only supports it, against version 2"));
    // No closing snapshot is suggested where none can be taken.
    check(mailer(Inconclusive), Act::Decide(Confirmed), no("confirmed needs one exact match; this read is inconclusive"));
}

#[test]
#[rustfmt::skip]
fn no_decision_is_available_before_a_read_comes_back() {
    check(unknown(UniqueExactMatch).unread(), Act::Decide(Confirmed), no("confirmed needs a verdict, and no read of receiver builtin has come back"));
    check(unknown(TerminalAbsence).unread(), Act::Decide(NotApplied), no("not_applied needs a verdict, and no read of receiver builtin has come back"));
    // The other acts do not rest on a read.
    check(unknown(Inconclusive).unread(), Act::Close, ok("a receiver mutation that bars every later write for this op"));
    check(original(OpState::Prepared).unread(), Act::Dispatch, ok("runs the receiver once"));
    check(original(OpState::Confirmed).unread(), Act::Compensate, ok("for the confirmed effect fx-000001"));
}

#[test]
#[rustfmt::skip]
fn no_closing_snapshot_is_suggested_where_its_read_could_prove_no_more() {
    // A receiver that can close, but whose reads are never complete: a
    // closing read would be as empty and as inconclusive.
    let archive = |verdict| unknown(verdict).at_a_receiver_whose_reads_are_incomplete();
    check(archive(Inconclusive), Act::Decide(NotApplied), no("not_applied needs terminal_absence (no match under a closing read); this read is inconclusive"));
    check(archive(Inconclusive), Act::Decide(Confirmed), no("confirmed needs one exact match; this read is inconclusive"));
    check(archive(ExactMatchExistenceOnly), Act::Decide(NotApplied), no("not_applied needs terminal_absence (no match under a closing read); this read is exact_match_existence_only"));
    // The close itself is not refused: it bars late writes all the same.
    check(archive(Inconclusive), Act::Close, ok("a receiver mutation that bars every later write for this op"));
}

fn read(verdict: Verdict, closed: bool) -> LatestRead {
    LatestRead { verdict, closed }
}

fn description(can_close: bool, complete: bool, authoritative: bool) -> Description {
    Description {
        name: "mailer".into(),
        version: "1".into(),
        can_close,
        query: Ceiling {
            complete,
            authoritative,
        },
        mandatory: Vec::new(),
        instance: None,
        session: false,
        batch: None,
    }
}

#[test]
fn a_closing_snapshot_helps_only_an_open_read_of_a_receiver_that_can_prove_absence() {
    let full = description(true, true, true);
    assert!(close_would_help(read(Inconclusive, false), &full));
    assert!(close_would_help(
        read(ExactMatchExistenceOnly, false),
        &full
    ));
    assert!(!close_would_help(read(Inconclusive, true), &full));
    assert!(!close_would_help(read(DuplicateMatches, false), &full));
    assert!(!close_would_help(read(PayloadMismatch, false), &full));
    for weaker in [
        description(false, true, true),
        description(true, false, true),
        description(true, true, false),
    ] {
        assert!(!close_would_help(read(Inconclusive, false), &weaker));
    }
}

#[test]
fn an_empty_read_is_told_to_close_only_when_a_close_could_settle_it() {
    let take_a_close = "an empty read without the close barrier cannot justify retry or \
                        not_applied: take a closing snapshot";
    let cases = [
        (description(true, true, true), false, take_a_close),
        (
            description(false, true, true),
            false,
            "an empty read from a receiver that cannot close never justifies retry or \
             not_applied, and no closing snapshot can be taken: only an exact match can be \
             decided",
        ),
        (
            description(true, true, true),
            true,
            "an empty read that is closed but not complete and authoritative proves nothing: \
             neither retry nor not_applied is justified, and the operation is closed \
             already, so another closing snapshot adds nothing; only an exact match can be \
             decided",
        ),
        (
            description(true, false, true),
            false,
            "an empty read from a receiver whose reads are never both complete and \
             authoritative never justifies retry or not_applied, closed or not: a closing \
             snapshot would prove nothing more; only an exact match can be decided",
        ),
    ];
    for (receiver, closed, expected) in cases {
        let said = explanation(read(Inconclusive, closed), &receiver);
        assert_eq!(said, expected, "{receiver:?}, closed {closed}");
    }
    // Without the receiver, the verdict alone suggests nothing.
    assert!(!Inconclusive.explanation().contains("closing snapshot"));
    for verdict in [DuplicateMatches, PayloadMismatch, ExactMatchExistenceOnly] {
        let receiver = description(false, false, false);
        assert_eq!(
            explanation(read(verdict, false), &receiver),
            verdict.explanation()
        );
    }
}

#[track_caller]
fn check_ceiling(can_close: bool, complete: bool, authoritative: bool, expected: &str) {
    let description = description(can_close, complete, authoritative);
    assert_eq!(ceiling_in_words("mailer", &description), expected);
}

#[test]
#[rustfmt::skip]
fn a_receivers_ceiling_is_said_in_words() {
    check_ceiling(true, true, true, "receiver mailer: complete, authoritative, can close");
    check_ceiling(false, true, true, "receiver mailer: complete, authoritative, cannot close, so absence is never proof");
    check_ceiling(true, false, true, "receiver mailer: incomplete, authoritative, can close, so absence is never proof");
    check_ceiling(true, true, false, "receiver mailer: complete, not authoritative, can close, so absence is never proof");
}

#[test]
#[rustfmt::skip]
fn only_a_confirmed_original_without_an_approval_for_its_effect_is_compensated() {
    check(original(OpState::Confirmed), Act::Compensate, ok("for the confirmed effect fx-000001"));
    check(original(OpState::Confirmed).approved("op-1", "fx-000002", "op-1-undo"), Act::Compensate, ok("for the confirmed effect fx-000001"));
    check(original(OpState::Confirmed).approved("op-7", "fx-000001", "op-7-undo"), Act::Compensate, ok("for the confirmed effect fx-000001"));
    check(original(OpState::Confirmed).approved("op-1", "fx-000001", "op-1-undo"), Act::Compensate, no("fx-000001 already has an approved compensation, op-1-undo"));
    check(original(OpState::Confirmed).without_confirmed_effect(), Act::Compensate, no("no confirmed effect is recorded"));
    check(original(OpState::Unknown), Act::Compensate, no("only a confirmed original can be compensated; this one is unknown"));
    check(original(OpState::NotApplied), Act::Compensate, no("only a confirmed original can be compensated; this one is not_applied"));
    check(compensation(OpState::Confirmed), Act::Compensate, no("a compensation is not itself compensated"));
    check(compensation(OpState::Prepared), Act::Compensate, no("a compensation is not itself compensated"));
}

#[test]
#[rustfmt::skip]
fn a_dispatch_happens_once_from_prepared_and_a_compensation_needs_its_approval() {
    check(original(OpState::Prepared), Act::Dispatch, ok("runs the receiver once"));
    check(compensation(OpState::Prepared).approved("op-0", "fx-000009", "op-1"), Act::Dispatch, ok("runs the receiver once"));
    check(compensation(OpState::Prepared), Act::Dispatch, no("this compensation has no approval"));
    check(compensation(OpState::Prepared).approved("op-0", "fx-000009", "op-2"), Act::Dispatch, no("this compensation has no approval"));
    check(original(OpState::Unknown), Act::Dispatch, no("dispatched only once, from prepared; this one is unknown, so a dispatch would be a blind retry"));
    check(original(OpState::Confirmed), Act::Dispatch, no("dispatched only once, from prepared; this one is confirmed, so a dispatch would be a blind retry"));
    check(compensation(OpState::NotApplied), Act::Dispatch, no("dispatched only once, from prepared; this one is not_applied, so a dispatch would be a blind retry"));
}

#[track_caller]
fn check_recheck(act: Act, state: OpState, seen_version: i64, expected: Result<(), Refusal>) {
    let op = case(Original, state, Inconclusive).operation;
    assert_eq!(recheck(act, &op, seen_version), expected, "{act:?}");
}

fn stale(state: OpState) -> Result<(), Refusal> {
    Err(Refusal::StaleVersion {
        expected: 1,
        found: 2,
        state,
        changed_by: None,
    })
}

fn not_unknown(state: OpState) -> Result<(), Refusal> {
    Err(Refusal::NotUnknown {
        op_id: "op-1".into(),
        state,
    })
}

#[test]
fn a_confirmed_act_is_refused_stale_once_the_version_moved_on() {
    check_recheck(Act::Close, OpState::Unknown, 2, Ok(()));
    check_recheck(Act::Dispatch, OpState::Prepared, 2, Ok(()));
    check_recheck(Act::Close, OpState::Unknown, 1, stale(OpState::Unknown));
    check_recheck(Act::Close, OpState::Confirmed, 1, stale(OpState::Confirmed));
    check_recheck(Act::Dispatch, OpState::Unknown, 1, stale(OpState::Unknown));
}

#[test]
#[rustfmt::skip]
fn a_close_is_refused_when_the_operation_seen_is_not_unknown() {
    check_recheck(Act::Close, OpState::Prepared, 2, not_unknown(OpState::Prepared));
    check_recheck(Act::Close, OpState::NotApplied, 2, not_unknown(OpState::NotApplied));
    // A dispatch's state is the receiver client's to refuse, as blind_retry.
    check_recheck(Act::Dispatch, OpState::Unknown, 2, Ok(()));
}

fn evidence(source: EvidenceSource, reviewer: Option<&str>) -> EvidenceRecord {
    EvidenceRecord {
        surplus_effect_ids: Vec::new(),
        seq: 1,
        op_id: "op-1".into(),
        source,
        reviewer: reviewer.map(str::to_string),
        decision: Confirmed,
        verdict: None,
        snapshot: json!({}),
        from_version: 2,
        to_version: 3,
        effect_id: None,
        receiver: "builtin".into(),
        receiver_describe_sha256: String::new(),
        response_sha256: String::new(),
        receiver_id: None,
        receiver_version: None,
        policy: None,
        close_seq: None,
        recorded_at: Default::default(),
        journal_seq: 1,
        hash: String::new(),
    }
}

#[test]
#[rustfmt::skip]
fn the_latest_change_is_named_by_its_reviewer_or_its_source() {
    let receipt = || evidence(EvidenceSource::Receipt, None);
    let review = |name| evidence(EvidenceSource::Review, Some(name));
    assert_eq!(last_changed_by(&[]), None);
    assert_eq!(last_changed_by(&[receipt()]).as_deref(), Some("a receipt"));
    assert_eq!(last_changed_by(&[receipt(), review("bob")]).as_deref(), Some("reviewer bob"));
    assert_eq!(last_changed_by(&[review("bob"), receipt()]).as_deref(), Some("a receipt"));
}
