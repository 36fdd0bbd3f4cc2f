//! The showcase of `recon demo`: fourteen operations, one story each, that
//! between them show every verdict of SPEC section 2, every operation
//! state, and a duplicate's way out (SPEC 14: one effect kept, the surplus
//! refunded).
//!
//! Each story is told through the real code paths (dispatches with real
//! receiver children and their faults, direct receiver calls for unsafe
//! retries, closing snapshots, reviews, a compensation) by a function named
//! after it, in the order of [`STORIES`]; the order matters, because the
//! receiver numbers its effects as they are written. [`build`] then reads
//! every op back and fails if one did not end as its story says.

use super::ShowcaseOp;
use crate::dispatch::{self, DispatchOptions, ReceiverCall};
use crate::domain::{CompensationRequest, Decision, OpState, Verdict};
use crate::error::{Result, StoreError};
use crate::receiver::Fault;
use crate::workspace::{ReconcileRequest, Workspace};
use serde_json::{json, Value};

/// The first showcase op; its presence means the showcase is already there.
pub(super) const FIRST_OP: &str = "op-1001-welcome-email";

const DANA: &str = "dana.ops";
const PRIYA: &str = "priya.sre";
const LEE: &str = "lee.finance";

/// Tells every story in order, then reads the showcase back.
pub(super) fn build(ws: &mut Workspace) -> Result<Vec<ShowcaseOp>> {
    confirmed_by_receipt(ws, STORIES[0].op_id)?;
    receipt_lost_open_read(ws, STORIES[1].op_id)?;
    receipt_lost_then_closed(ws, STORIES[2].op_id)?;
    request_died(ws, STORIES[3].op_id)?;
    request_died_then_closed(ws, STORIES[4].op_id)?;
    unsafe_direct_retry(ws, STORIES[5].op_id)?;
    retry_with_another_amount(ws, STORIES[6].op_id)?;
    retry_under_another_action(ws, STORIES[7].op_id)?;
    late_original_refused(ws, STORIES[8].op_id)?;
    confirmed_then_refunded(ws, STORIES[9].op_id, STORIES[10].op_id)?;
    prepared_only(ws, STORIES[11].op_id)?;
    duplicate_kept_and_refunded(ws, STORIES[12].op_id, STORIES[13].op_id)?;
    read_showcase(ws)
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
        op_id: FIRST_OP,
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
    Story {
        op_id: "op-1013-setup-fee",
        story: "receipt lost, an unsafe retry charged again; dana.ops closed it, kept the first \
                charge and lee.finance approved refunding the duplicate",
        state: OpState::Confirmed,
        verdict: Verdict::DuplicateMatches,
    },
    Story {
        op_id: "op-1014-setup-fee-refund",
        story: "the duplicate charge's refund (reason duplicate), dispatched: confirmed by its \
                receipt",
        state: OpState::Confirmed,
        verdict: Verdict::ExactMatchExistenceOnly,
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
    let outcome = dispatch::spawn(ws.receiver_program(), ws.ledger_dir()?, call)?.finish()?;
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

/// Dispatched, and the receipt came back.
fn confirmed_by_receipt(ws: &mut Workspace, op: &str) -> Result<()> {
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
    Ok(())
}

/// Receipt lost after the commit; left for review on an open read.
fn receipt_lost_open_read(ws: &mut Workspace, op: &str) -> Result<()> {
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
    Ok(())
}

/// Receipt lost after the commit, then closed: unique exact match.
fn receipt_lost_then_closed(ws: &mut Workspace, op: &str) -> Result<()> {
    ws.prepare(
        op,
        "charge_card",
        &charge("cus_48213", 4999, "EUR", "Order A-20931"),
    )?;
    ws.dispatch(op, lost_after_commit())?;
    ws.snapshot(op, Some(DANA))?;
    Ok(())
}

/// The request died before the receiver: inconclusive.
fn request_died(ws: &mut Workspace, op: &str) -> Result<()> {
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
    Ok(())
}

/// The request died, then closed: terminal absence.
fn request_died_then_closed(ws: &mut Workspace, op: &str) -> Result<()> {
    ws.prepare(
        op,
        "send_sms",
        &json!({ "to": "+15550142", "text": "Your parcel arrives today between 2 and 4 pm." }),
    )?;
    ws.dispatch(op, lost_before_commit())?;
    ws.snapshot(op, Some(DANA))?;
    Ok(())
}

/// Receipt lost, then an unsafe direct retry: duplicate matches.
fn unsafe_direct_retry(ws: &mut Workspace, op: &str) -> Result<()> {
    let payload = json!({ "channel": "#deploys", "text": "Deploying api v2.14.0 to production" });
    let original = ws.prepare(op, "post_slack_message", &payload)?;
    ws.dispatch(op, lost_after_commit())?;
    direct_call(ws, &ReceiverCall::for_operation(&original))
}

/// The request died; a retry with a different amount: payload mismatch.
fn retry_with_another_amount(ws: &mut Workspace, op: &str) -> Result<()> {
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
    )
}

/// The request died; the same payload under another action.
fn retry_under_another_action(ws: &mut Workspace, op: &str) -> Result<()> {
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
    )
}

/// The close barrier cancels an original still in flight, and the op is
/// then recorded not_applied.
fn late_original_refused(ws: &mut Workspace, op: &str) -> Result<()> {
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
        keep: None,
        op_id: op,
        reviewer: PRIYA,
        decision: Decision::NotApplied,
        expected_version: late.version,
        payload: None,
        close_authorized_by: None,
    })?;
    Ok(())
}

/// Confirmed on review, then a compensation `refund` whose receipt is lost.
fn confirmed_then_refunded(ws: &mut Workspace, op: &str, refund: &str) -> Result<()> {
    let plan = charge("cus_30412", 29900, "EUR", "Annual plan, Northwind Team");
    ws.prepare(op, "charge_card", &plan)?;
    let lost = ws.dispatch(op, lost_after_commit())?;
    let confirmed = ws.reconcile(&ReconcileRequest {
        keep: None,
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
    ws.approve_compensation(&CompensationRequest {
        reason: None,
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
    Ok(())
}

/// Receipt lost, then an unsafe direct retry: two charges. Closed, the
/// first is kept and the surplus refunded with the reason `duplicate`
/// (SPEC 14), its refund dispatched with its receipt.
fn duplicate_kept_and_refunded(ws: &mut Workspace, op: &str, refund: &str) -> Result<()> {
    let fee = charge("cus_77120", 4900, "USD", "Setup fee, Contoso Ltd");
    let original = ws.prepare(op, "charge_card", &fee)?;
    let lost = ws.dispatch(op, lost_after_commit())?;
    direct_call(ws, &ReceiverCall::for_operation(&original))?;
    let closed = ws.snapshot(op, Some(DANA))?;
    let mut matches = (closed.snapshot.matches.iter()).map(|m| m.effect_id.clone());
    let (kept, surplus) = (matches.next(), matches.next());
    let (Some(kept), Some(surplus)) = (kept, surplus) else {
        return Err(StoreError::Receiver(format!("demo: {op} holds no duplicate")).into());
    };
    let confirmed = ws.reconcile(&ReconcileRequest {
        keep: Some(&kept),
        op_id: op,
        reviewer: DANA,
        decision: Decision::Confirmed,
        expected_version: lost.version,
        payload: None,
        close_authorized_by: None,
    })?;
    ws.approve_compensation(&CompensationRequest {
        reason: Some(crate::domain::duplicates::SURPLUS_REASON),
        original_op_id: op,
        effect_id: &surplus,
        approver: LEE,
        expected_version: confirmed.operation.version,
        compensation_op_id: refund,
        action_kind: "refund_card",
        payload: &json!({
            "customer": "cus_77120",
            "amount_cents": 4900,
            "currency": "USD",
            "reason": "duplicate",
        }),
    })?;
    ws.dispatch(refund, DispatchOptions::default())?;
    Ok(())
}

/// Prepared, not dispatched yet.
fn prepared_only(ws: &mut Workspace, op: &str) -> Result<()> {
    ws.prepare(
        op,
        "create_ticket",
        &json!({
            "project": "OPS",
            "priority": "P3",
            "summary": "Schedule onboarding call with Northwind Team",
        }),
    )?;
    Ok(())
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
