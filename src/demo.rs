//! Demo workspaces: a showcase in which every verdict of SPEC section 2 and
//! every operation state appears, and optionally many generated operations.
//!
//! The showcase is made only through the real code paths: real dispatches
//! with real receiver child processes and their faults, direct receiver
//! calls for the unsafe retries that bypass the sender's guard, real closing
//! snapshots with a named authorizer, real reviews and a real compensation
//! whose receipt is lost. Nothing is written behind the engine's back, so
//! the demo is also an end-to-end check: [`build`] reads every showcase op
//! back, classifies it, and fails if any story did not end as told.
//!
//! The generated part (`--ops N`, see [`generate`]) is different on purpose:
//! it is load, not a story, so it goes in by bulk inserts in large
//! transactions (10,000 ops each), the two stores written in parallel.

pub mod generate;

use crate::dispatch::{self, DispatchOptions, ReceiverCall};
use crate::domain::{CompensationRequest, Decision, OpKind, OpState, Verdict};
use crate::error::{Result, StoreError};
use crate::receiver::Fault;
use crate::workspace::{ReconcileRequest, Workspace};
use serde::Serialize;
use serde_json::{json, Value};

/// What one call of [`build`] added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemoSummary {
    /// Operations added to the outbox (showcase and generated).
    pub operations: u64,
    /// Effects added to the receiver ledger.
    pub effects: u64,
    /// The showcase ops as they stand now; empty when the workspace already
    /// had the showcase and only generated ops were added.
    pub showcase: Vec<ShowcaseOp>,
    pub generated: Option<Generated>,
}

/// One showcase operation: where it ended and the verdict an ordinary read
/// of its evidence gives now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShowcaseOp {
    pub op_id: String,
    pub kind: OpKind,
    pub action_kind: String,
    pub state: OpState,
    pub version: i64,
    pub verdict: Verdict,
    pub story: &'static str,
}

/// The generated operations one call added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generated {
    pub first_op_id: String,
    pub last_op_id: String,
    pub operations: u64,
    /// Ledger rows carrying a generated op's id.
    pub own_effects: u64,
    /// Ledger rows of other callers written around them.
    pub background_effects: u64,
}

/// The first showcase op; its presence means the showcase is already there.
const FIRST_SHOWCASE_OP: &str = "op-1001-welcome-email";

const DANA: &str = "dana.ops";
const PRIYA: &str = "priya.sre";
const LEE: &str = "lee.finance";

/// Builds the showcase (unless the workspace has it already) and then adds
/// `extra_ops` generated operations, numbered after any generated before.
pub fn build(ws: &mut Workspace, extra_ops: u64) -> Result<DemoSummary> {
    let ops_before = total_ops(ws)?;
    let effects_before = ws.effect_count(None)?;
    let showcase = if ws.operation(FIRST_SHOWCASE_OP)?.is_some() {
        Vec::new()
    } else {
        build_showcase(ws)?
    };
    let generated = match extra_ops {
        0 => None,
        n => Some(add_generated(ws, n)?),
    };
    Ok(DemoSummary {
        operations: u64::try_from(total_ops(ws)? - ops_before).unwrap_or(0),
        effects: u64::try_from(ws.effect_count(None)? - effects_before).unwrap_or(0),
        showcase,
        generated,
    })
}

fn total_ops(ws: &Workspace) -> Result<i64> {
    Ok(ws.counts()?.values().sum())
}

/// One showcase story: the op it is about, what it shows, and where it
/// must end.
struct Story {
    op_id: &'static str,
    story: &'static str,
    state: OpState,
    verdict: Verdict,
}

const STORIES: &[Story] = &[
    Story {
        op_id: FIRST_SHOWCASE_OP,
        story: "dispatched, the receipt came back: confirmed by the receipt",
        state: OpState::Confirmed,
        verdict: Verdict::ExactMatchExistenceOnly,
    },
    Story {
        op_id: "op-1002-invoice-email",
        story: "receiver committed, then crashed before its receipt; one exact effect on an \
                open read",
        state: OpState::Unknown,
        verdict: Verdict::ExactMatchExistenceOnly,
    },
    Story {
        op_id: "op-1003-charge-order",
        story: "receipt lost after the commit; dana.ops took a closing snapshot: unique exact \
                match, ready to confirm",
        state: OpState::Unknown,
        verdict: Verdict::UniqueExactMatch,
    },
    Story {
        op_id: "op-1004-support-ticket",
        story: "the request died before the receiver wrote anything; an empty open read proves \
                nothing",
        state: OpState::Unknown,
        verdict: Verdict::Inconclusive,
    },
    Story {
        op_id: "op-1005-delivery-sms",
        story: "the request died on the way; dana.ops closed it: terminal absence, ready for \
                not_applied",
        state: OpState::Unknown,
        verdict: Verdict::TerminalAbsence,
    },
    Story {
        op_id: "op-1006-deploy-notice",
        story: "receipt lost, then an unsafe retry called the receiver directly: two effects",
        state: OpState::Unknown,
        verdict: Verdict::DuplicateMatches,
    },
    Story {
        op_id: "op-1007-renewal-charge",
        story: "the request died; a buggy retry charged ten times the amount: payload mismatch",
        state: OpState::Unknown,
        verdict: Verdict::PayloadMismatch,
    },
    Story {
        op_id: "op-1008-deposit-capture",
        story: "the request died; an outdated integration authorized instead of charging: \
                action mismatch",
        state: OpState::Unknown,
        verdict: Verdict::ActionScopeMismatch,
    },
    Story {
        op_id: "op-1009-password-reset",
        story: "original held in flight; priya.sre closed it first, the late original was \
                refused (operation_closed), then recorded not_applied",
        state: OpState::NotApplied,
        verdict: Verdict::TerminalAbsence,
    },
    Story {
        op_id: "op-1010-annual-plan",
        story: "receipt lost; dana.ops confirmed it on a closing snapshot; lee.finance approved \
                a refund",
        state: OpState::Confirmed,
        verdict: Verdict::UniqueExactMatch,
    },
    Story {
        op_id: "op-1011-annual-plan-refund",
        story: "the approved refund was dispatched and its receipt was lost: the compensation \
                is unknown",
        state: OpState::Unknown,
        verdict: Verdict::ExactMatchExistenceOnly,
    },
    Story {
        op_id: "op-1012-onboarding-call",
        story: "prepared, not dispatched yet",
        state: OpState::Prepared,
        verdict: Verdict::Inconclusive,
    },
];

fn email(to: &str, subject: &str, body: &str) -> Value {
    json!({ "to": to, "subject": subject, "body": body })
}

fn charge(customer: &str, amount_cents: u64, currency: &str, description: &str) -> Value {
    json!({
        "customer": customer,
        "amount_cents": amount_cents,
        "currency": currency,
        "description": description,
    })
}

fn lost_after_commit() -> DispatchOptions {
    DispatchOptions {
        fault: Some(Fault::CrashAfterCommit),
        wait_permit: false,
    }
}

fn lost_before_commit() -> DispatchOptions {
    DispatchOptions {
        fault: Some(Fault::CrashBeforeCommit),
        wait_permit: false,
    }
}

/// Calls the receiver directly, bypassing the sender's guard, as an unsafe
/// retry does, and checks that it wrote an effect.
fn direct_call(ws: &Workspace, call: &ReceiverCall<'_>) -> Result<()> {
    let outcome = dispatch::spawn(ws.receiver_program(), ws.dir(), call)?.finish()?;
    match outcome.receipt {
        Some(_) => Ok(()),
        None => Err(StoreError::Receiver(format!(
            "demo: the direct receiver call for {} wrote nothing (exit {:?}): {}",
            call.op_id,
            outcome.exit_code,
            outcome.stderr.trim()
        ))
        .into()),
    }
}

fn build_showcase(ws: &mut Workspace) -> Result<Vec<ShowcaseOp>> {
    // Confirmed by its receipt.
    let op = STORIES[0].op_id;
    ws.prepare(
        op,
        "send_email",
        &email(
            "maya.lopez@example.com",
            "Welcome to Northwind",
            "Hi Maya, your workspace is ready.",
        ),
    )?;
    ws.dispatch(op, DispatchOptions::default())?;

    // Receipt lost after the commit; left for review on an open read.
    let op = STORIES[1].op_id;
    ws.prepare(
        op,
        "send_email",
        &email(
            "omar.haddad@example.com",
            "Your invoice INV-20931 is ready",
            "Hi Omar, your invoice for March is attached.",
        ),
    )?;
    ws.dispatch(op, lost_after_commit())?;

    // Receipt lost after the commit, then closed: unique exact match.
    let op = STORIES[2].op_id;
    ws.prepare(
        op,
        "charge_card",
        &charge("cus_48213", 4999, "EUR", "Order A-20931"),
    )?;
    ws.dispatch(op, lost_after_commit())?;
    ws.snapshot(op, Some(DANA))?;

    // The request died before the receiver: inconclusive.
    let op = STORIES[3].op_id;
    ws.prepare(
        op,
        "create_ticket",
        &json!({
            "project": "SUP",
            "priority": "P2",
            "summary": "Customer cannot reset password",
        }),
    )?;
    ws.dispatch(op, lost_before_commit())?;

    // The request died, then closed: terminal absence.
    let op = STORIES[4].op_id;
    ws.prepare(
        op,
        "send_sms",
        &json!({ "to": "+15550142", "text": "Your parcel arrives today between 2 and 4 pm." }),
    )?;
    ws.dispatch(op, lost_before_commit())?;
    ws.snapshot(op, Some(DANA))?;

    // Receipt lost, then an unsafe direct retry: duplicate matches.
    let op = STORIES[5].op_id;
    let payload = json!({ "channel": "#deploys", "text": "Deploying api v2.14.0 to production" });
    let original = ws.prepare(op, "post_slack_message", &payload)?;
    ws.dispatch(op, lost_after_commit())?;
    direct_call(ws, &ReceiverCall::for_operation(&original))?;

    // The request died; a retry with a different amount: payload mismatch.
    let op = STORIES[6].op_id;
    let original = ws.prepare(
        op,
        "charge_card",
        &charge("cus_51877", 1200, "USD", "Monthly subscription renewal"),
    )?;
    ws.dispatch(op, lost_before_commit())?;
    let wrong_amount = charge("cus_51877", 12000, "USD", "Monthly subscription renewal");
    direct_call(
        ws,
        &ReceiverCall {
            payload: &wrong_amount,
            ..ReceiverCall::for_operation(&original)
        },
    )?;

    // The request died; the same payload under another action.
    let op = STORIES[7].op_id;
    let original = ws.prepare(
        op,
        "charge_card",
        &charge(
            "cus_60321",
            25000,
            "EUR",
            "Security deposit, booking B-7730",
        ),
    )?;
    ws.dispatch(op, lost_before_commit())?;
    direct_call(
        ws,
        &ReceiverCall {
            action_kind: "authorize_card",
            ..ReceiverCall::for_operation(&original)
        },
    )?;

    // The close barrier cancels an original still in flight.
    let op = STORIES[8].op_id;
    ws.prepare(
        op,
        "send_email",
        &email(
            "lena.fischer@example.com",
            "Password reset requested",
            "Hi Lena, use the link below to choose a new password.",
        ),
    )?;
    let mut pending = ws.start_dispatch(
        op,
        DispatchOptions {
            fault: None,
            wait_permit: true,
        },
    )?;
    ws.snapshot(op, Some(PRIYA))?;
    pending.child.permit()?;
    let late = ws.finish_dispatch(pending)?;
    if late.effect_id.is_some() {
        return Err(StoreError::Receiver(format!(
            "demo: the late original of {op} was written after the close"
        ))
        .into());
    }
    ws.reconcile(&ReconcileRequest {
        op_id: op,
        reviewer: PRIYA,
        decision: Decision::NotApplied,
        expected_version: late.version,
        payload: None,
        close_authorized_by: None,
    })?;

    // Confirmed on review, then a compensation whose receipt is lost.
    let op = STORIES[9].op_id;
    let plan = charge("cus_30412", 29900, "EUR", "Annual plan, Northwind Team");
    ws.prepare(op, "charge_card", &plan)?;
    let lost = ws.dispatch(op, lost_after_commit())?;
    let confirmed = ws.reconcile(&ReconcileRequest {
        op_id: op,
        reviewer: DANA,
        decision: Decision::Confirmed,
        expected_version: lost.version,
        payload: None,
        close_authorized_by: Some(DANA),
    })?;
    let effect = confirmed
        .operation
        .confirmed_effect_id
        .clone()
        .unwrap_or_default();
    let refund = STORIES[10].op_id;
    ws.approve_compensation(&CompensationRequest {
        original_op_id: op,
        effect_id: &effect,
        approver: LEE,
        expected_version: confirmed.operation.version,
        compensation_op_id: refund,
        action_kind: "refund_card",
        payload: &json!({
            "customer": "cus_30412",
            "amount_cents": 29900,
            "currency": "EUR",
            "reason": "cancelled within the 14-day window",
        }),
    })?;
    ws.dispatch(refund, lost_after_commit())?;

    // Prepared only.
    ws.prepare(
        STORIES[11].op_id,
        "create_ticket",
        &json!({
            "project": "OPS",
            "priority": "P3",
            "summary": "Schedule onboarding call with Northwind Team",
        }),
    )?;

    read_showcase(ws)
}

/// Reads every showcase op back with an ordinary snapshot and checks it
/// ended as its story says.
fn read_showcase(ws: &mut Workspace) -> Result<Vec<ShowcaseOp>> {
    let mut out = Vec::with_capacity(STORIES.len());
    for story in STORIES {
        let classified = ws.snapshot(story.op_id, None)?;
        let op = classified.operation;
        if op.state != story.state || classified.verdict != story.verdict {
            return Err(StoreError::Receiver(format!(
                "demo: {} ended {} with {}, expected {} with {}",
                story.op_id, op.state, classified.verdict, story.state, story.verdict
            ))
            .into());
        }
        out.push(ShowcaseOp {
            op_id: op.op_id,
            kind: op.kind,
            action_kind: op.action_kind,
            state: op.state,
            version: op.version,
            verdict: classified.verdict,
            story: story.story,
        });
    }
    Ok(out)
}

/// Adds `n` generated operations after the last one already there.
fn add_generated(ws: &mut Workspace, n: u64) -> Result<Generated> {
    let last = ws
        .last_op_id_between(generate::LOW, generate::HIGH, generate::GLOB)?
        .and_then(|id| generate::number(&id))
        .unwrap_or(0);
    let first = last + 1;
    let end = first
        .checked_add(n - 1)
        .filter(|&end| end <= generate::MAX_NUMBER)
        .ok_or_else(|| {
            // Ten million generated ops in one workspace: the fixed-width
            // numbering is exhausted, which is a capacity limit of the store.
            StoreError::Io(std::io::Error::other(format!(
                "cannot add {n} generated operations after {}: numbering ends at {}",
                generate::op_id(last),
                generate::HIGH
            )))
        })?;
    let own_effects: u64 = (first..=end)
        .map(|i| generate::Evidence::of(i).effects())
        .sum();
    let (operations, appended) = write_generated(ws, first, end)?;
    Ok(Generated {
        first_op_id: generate::op_id(first),
        last_op_id: generate::op_id(end),
        operations,
        own_effects,
        background_effects: appended.saturating_sub(own_effects),
    })
}

/// Generated operations per transaction: about 100,000 ledger rows, whose
/// dirty pages fit in the bulk page cache. One transaction for a whole
/// 100,000-op run would overflow it, and SQLite would then spill and
/// rewrite the same pages to the WAL over and over.
const CHUNK_OPS: u64 = 10_000;

/// Writes generated ops `first..=end` in chunks of [`CHUNK_OPS`].
/// Returns the operations and ledger rows written.
fn write_generated(ws: &mut Workspace, first: u64, end: u64) -> Result<(u64, u64)> {
    let chunks = move || -> Box<dyn Iterator<Item = std::ops::RangeInclusive<u64>>> {
        Box::new(
            (first..=end)
                .step_by(CHUNK_OPS as usize)
                .map(move |start| start..=end.min(start + CHUNK_OPS - 1)),
        )
    };
    ws.append_generated(chunks, generate::operation, generate::effects)
}
