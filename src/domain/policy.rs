//! Which acts one operation allows right now, and why: close it at the
//! receiver, decide it, compensate it, dispatch it.
//!
//! This is the rule a reviewer sees before asking: the console shows each
//! answer beside its key, in the help and in the verdict panel, so it lives
//! here, beside [`check_review`](super::check_review),
//! [`check_approval`](super::check_approval) and
//! [`check_compensation_dispatch`](super::check_compensation_dispatch),
//! which say the same things again, inside the store's transaction, when
//! the act is carried out. [`availability`] judges what is on screen (the
//! operation, the receiver it routes to, the latest read and its verdict,
//! the receiver's close, the approvals) and gives its reasons as sentences;
//! [`recheck`] is the guard a confirmed close or dispatch passes just before
//! it runs, against the version the reviewer saw. Both are pure, so both are
//! tested as a table.
//!
//! The receiver matters because only a receiver that can close can prove an
//! absence (SPEC 8, rule 3): for any other, a close is never asked for and
//! `not_applied` is unreachable, and the reasons say so in those words.

use super::{
    Approval, Closure, Decision, Description, EvidenceRecord, OpKind, OpState, Operation, Refusal,
    Verdict,
};

/// Something a reviewer can ask to do to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A closing snapshot: the receiver mutation that bars late writes.
    Close,
    /// Record `confirmed` or `not_applied`.
    Decide(Decision),
    /// Approve a compensation for the confirmed effect.
    Compensate,
    /// Dispatch a prepared operation.
    Dispatch,
}

impl Act {
    /// The one state an operation must be in for this act; in any other
    /// state the act does not concern it.
    pub fn from_state(self) -> OpState {
        match self {
            Act::Close | Act::Decide(_) => OpState::Unknown,
            Act::Compensate => OpState::Confirmed,
            Act::Dispatch => OpState::Prepared,
        }
    }
}

/// What is known about one operation when a reviewer asks to act on it.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub operation: &'a Operation,
    /// The latest read of the receiver, once one has come back.
    pub read: Option<LatestRead>,
    /// What the operation's receiver declared at registration: whether it
    /// can close, and the ceiling on what its reads can claim.
    pub receiver: &'a Description,
    /// Who closed the operation at the receiver, if anyone has.
    pub closure: Option<&'a Closure>,
    /// The compensation approvals that name the operation.
    pub approvals: &'a [Approval],
}

/// The latest read of the receiver, as far as the policy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestRead {
    pub verdict: Verdict,
    /// Whether the read was taken under the close barrier.
    pub closed: bool,
}

/// Why an act is not available, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
    /// A closing snapshot is worth suggesting: the read was not closing, and
    /// it found neither a duplicate nor a mismatch, which no read clears.
    pub close_first: bool,
}

impl Unavailable {
    fn because(reason: impl Into<String>) -> Unavailable {
        Unavailable {
            reason: reason.into(),
            close_first: false,
        }
    }
}

/// Whether `act` is available on the operation the facts describe: what it
/// rests on when it is, and why not when it is not.
pub fn availability(act: Act, facts: &Facts<'_>) -> Result<String, Unavailable> {
    match act {
        Act::Close => close(facts),
        Act::Decide(decision) => decide(facts, decision),
        Act::Compensate => compensate(facts),
        Act::Dispatch => dispatch(facts),
    }
}

/// The close barrier is for an operation whose fate is open, and is taken
/// once: a second close would read the same.
fn close(facts: &Facts<'_>) -> Result<String, Unavailable> {
    let op = facts.operation;
    if op.state != Act::Close.from_state() {
        return Err(Unavailable::because(format!(
            "only an unknown operation needs the close barrier; this one is {}",
            op.state
        )));
    }
    if !facts.receiver.can_close {
        return Err(Unavailable::because(cannot_close(&op.receiver)));
    }
    if let Some(closure) = facts.closure {
        return Err(Unavailable::because(format!(
            "the receiver already closed it (authorized by {}); a read shows the same",
            closure.authorized_by
        )));
    }
    Ok("a receiver mutation that bars every later write for this op".to_string())
}

/// Why a receiver that cannot close never proves an absence.
fn cannot_close(receiver: &str) -> String {
    format!("receiver {receiver} cannot close, so absence is never proof")
}

/// A decision needs an unknown operation and a verdict that supports it;
/// `not_applied` also needs a receiver that can close, since only a closing
/// read can find a terminal absence.
fn decide(facts: &Facts<'_>, decision: Decision) -> Result<String, Unavailable> {
    let op = facts.operation;
    if op.state != Act::Decide(decision).from_state() {
        return Err(Unavailable::because(format!(
            "only an unknown operation takes a decision; this one is {}",
            op.state
        )));
    }
    if decision == Decision::NotApplied && !facts.receiver.can_close {
        return Err(Unavailable::because(format!(
            "not_applied is unreachable for this receiver: {}",
            cannot_close(&op.receiver)
        )));
    }
    let Some(read) = facts.read else {
        return Err(Unavailable::because(format!(
            "{decision} needs a verdict, and no read of receiver {} has come back",
            op.receiver
        )));
    };
    let verdict = read.verdict;
    if verdict.supports(decision) {
        return Ok(format!(
            "{verdict} supports it, against version {}",
            op.version
        ));
    }
    let needs = match decision {
        Decision::Confirmed => "one exact match",
        Decision::NotApplied => "terminal_absence (no match under a closing read)",
    };
    Err(Unavailable {
        reason: format!("{decision} needs {needs}; this read is {verdict}"),
        close_first: close_would_help(read, facts.receiver),
    })
}

/// Whether a closing snapshot is worth suggesting after this read: only
/// when the receiver can close and its reads can be complete and
/// authoritative (otherwise a close is refused, or its read proves no more
/// than this one), only when this read was not a closing one already (a
/// second close reads the same), and only when it found neither a
/// duplicate nor a mismatch, which no read clears.
pub fn close_would_help(read: LatestRead, receiver: &Description) -> bool {
    proves_absence(receiver) && !read.closed && !blocks_every_decision(read.verdict)
}

/// A receiver's ceiling in words: what its reads can claim at most, and
/// whether it can close; when it falls short of any of the three, an empty
/// read from it never proves that nothing happened.
pub fn ceiling_in_words(receiver: &str, description: &Description) -> String {
    let query = description.query;
    let proves_absence = proves_absence(description);
    let words = [
        if query.complete {
            "complete"
        } else {
            "incomplete"
        },
        if query.authoritative {
            "authoritative"
        } else {
            "not authoritative"
        },
        if description.can_close {
            "can close"
        } else {
            "cannot close"
        },
    ];
    format!(
        "receiver {receiver}: {}{}",
        words.join(", "),
        if proves_absence {
            ""
        } else {
            ", so absence is never proof"
        }
    )
}

/// What a read's verdict means for its operation, given what the
/// receiver declared: the verdict's own explanation, except that an empty
/// read says what could still settle it. A closing snapshot is suggested
/// only where [`close_would_help`]; otherwise the sentence says why none
/// would (the receiver cannot close, its reads are never complete and
/// authoritative, or this read was closing already).
pub fn explanation(read: LatestRead, receiver: &Description) -> &'static str {
    if read.verdict != Verdict::Inconclusive {
        return read.verdict.explanation();
    }
    if close_would_help(read, receiver) {
        "an empty read without the close barrier cannot justify retry or not_applied: take \
         a closing snapshot"
    } else if !receiver.can_close {
        "an empty read from a receiver that cannot close never justifies retry or \
         not_applied, and no closing snapshot can be taken: only an exact match can be \
         decided"
    } else if read.closed {
        "an empty read that is closed but not complete and authoritative proves nothing: \
         neither retry nor not_applied is justified, and the operation is closed already, \
         so another closing snapshot adds nothing; only an exact match can be decided"
    } else {
        "an empty read from a receiver whose reads are never both complete and \
         authoritative never justifies retry or not_applied, closed or not: a closing \
         snapshot would prove nothing more; only an exact match can be decided"
    }
}

/// Whether an empty read from this receiver can ever be a terminal
/// absence: only one that is complete, authoritative and can close.
pub fn proves_absence(description: &Description) -> bool {
    description.query.complete && description.query.authoritative && description.can_close
}

/// The findings no later read clears: more than one effect, or the one
/// effect is for something else. A closing snapshot would not help.
fn blocks_every_decision(verdict: Verdict) -> bool {
    matches!(
        verdict,
        Verdict::DuplicateMatches | Verdict::PayloadMismatch | Verdict::ActionScopeMismatch
    )
}

/// A compensation undoes one confirmed effect of an original, once.
fn compensate(facts: &Facts<'_>) -> Result<String, Unavailable> {
    let op = facts.operation;
    if op.kind != OpKind::Original {
        return Err(Unavailable::because(
            "a compensation is not itself compensated",
        ));
    }
    if op.state != Act::Compensate.from_state() {
        return Err(Unavailable::because(format!(
            "only a confirmed original can be compensated; this one is {}",
            op.state
        )));
    }
    let Some(effect) = &op.confirmed_effect_id else {
        return Err(Unavailable::because("no confirmed effect is recorded"));
    };
    // A kept duplicate's surplus effects come first (SPEC 14), each once.
    let owned: Vec<_> = (facts.approvals.iter())
        .filter(|a| a.original_op_id == op.op_id)
        .cloned()
        .collect();
    if let [next, rest @ ..] = super::duplicates::awaiting(op, &owned).as_slice() {
        return Ok(format!(
            "for the surplus effect {next}, reason {}{}",
            super::duplicates::SURPLUS_REASON,
            match rest.len() {
                0 => String::new(),
                n => format!(" ({n} more surplus after it)"),
            }
        ));
    }
    if let Some(a) = facts
        .approvals
        .iter()
        .find(|a| a.original_op_id == op.op_id && &a.effect_id == effect)
    {
        return Err(Unavailable::because(format!(
            "{effect} already has an approved compensation, {}",
            a.compensation_op_id
        )));
    }
    Ok(format!("for the confirmed effect {effect}"))
}

/// A dispatch happens once, from prepared; a compensation also needs its
/// approval.
fn dispatch(facts: &Facts<'_>) -> Result<String, Unavailable> {
    let op = facts.operation;
    if op.state != Act::Dispatch.from_state() {
        return Err(Unavailable::because(format!(
            "dispatched only once, from prepared; this one is {}, so a dispatch \
             would be a blind retry",
            op.state
        )));
    }
    if op.kind == OpKind::Compensation
        && !facts
            .approvals
            .iter()
            .any(|a| a.compensation_op_id == op.op_id)
    {
        return Err(Unavailable::because("this compensation has no approval"));
    }
    Ok("runs the receiver once".to_string())
}

/// The guard a confirmed act passes just before it runs: the operation is
/// still at the version the reviewer saw (checked first, as in
/// [`check_review`](super::check_review), so a reviewer who fell behind
/// hears `stale_version`), and a close still finds it unknown. The rest is
/// checked again where the act is carried out: a decision under every rule
/// of a review, an approval under [`check_approval`](super::check_approval),
/// a dispatch as a blind retry unless prepared.
///
/// A stale version names nobody here; [`last_changed_by`] names who moved
/// the operation on, from its evidence.
pub fn recheck(act: Act, op: &Operation, seen_version: i64) -> Result<(), Refusal> {
    if op.version != seen_version {
        return Err(Refusal::StaleVersion {
            expected: seen_version,
            found: op.version,
            state: op.state,
            changed_by: None,
        });
    }
    if act == Act::Close && op.state != OpState::Unknown {
        return Err(Refusal::NotUnknown {
            op_id: op.op_id.clone(),
            state: op.state,
        });
    }
    Ok(())
}

/// Who made the latest recorded change, from an operation's evidence
/// (oldest first): the reviewer by name, or the source ("a receipt").
pub fn last_changed_by(evidence: &[EvidenceRecord]) -> Option<String> {
    evidence.last().map(|e| match &e.reviewer {
        Some(name) => format!("reviewer {name}"),
        None => format!("a {}", e.source),
    })
}
