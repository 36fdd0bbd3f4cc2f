//! The rules of `recon-adapter/1` that judge an answer (SPEC 8, rules 1-3),
//! in one place. Transport trouble (a crash, a timeout, garbage) is found by
//! the client (`receiver::process`); what an answer may *mean* is decided
//! here, for every receiver alike, the built-in ledger included. Adapters
//! return records; `domain::classify` stays the only judge of a verdict.

use super::protocol::{Answer, ErrorCode};
use crate::domain::{
    same_json, AdapterFailure, Effect, EffectRequest, FailureKind, Registration, Snapshot,
};
use crate::error::{Error, Refusal, StoreError};

/// Rule 1: a receipt counts only when the answer is `ok: true` and the
/// receipt is for exactly the request: its op id, action kind, payload
/// (the same JSON value, `domain::same_json`) and compensation target.
pub fn judge_receipt(
    request: &EffectRequest<'_>,
    answer: Answer,
) -> Result<Effect, AdapterFailure> {
    let effect = match answer {
        Answer::Receipt(effect) => effect,
        Answer::Failed(failed) => {
            return Err(failure(
                FailureKind::Error,
                format!("{}: {}", failed.code.as_str(), failed.message),
            ))
        }
        Answer::Described(_) | Answer::Snapshot(_) => {
            return Err(failure(FailureKind::Garbage, "the answer is not a receipt"))
        }
    };
    let differs = if effect.op_id != request.op_id {
        Some(format!("the receipt is for operation {}", effect.op_id))
    } else if effect.action_kind != request.action_kind {
        Some(format!("the receipt's action is {}", effect.action_kind))
    } else if !same_json(&effect.payload, request.payload) {
        Some("the receipt's payload differs from the request's".to_string())
    } else if effect.compensates_effect_id.as_deref() != request.compensates_effect_id {
        Some("the receipt's compensation target differs from the request's".to_string())
    } else {
        None
    };
    match differs {
        Some(detail) => Err(failure(FailureKind::Mismatch, detail)),
        None => Ok(effect),
    }
}

/// Rules 2 and 4: a read is held to the receiver's ceiling. Effective
/// `complete` and `authoritative` are the answer's AND the stored
/// description's; `closed` counts only from a receiver registered
/// `can_close`. Matches of another operation make the answer unusable
/// (a match is never re-assigned to the operation asked about).
pub fn judge_snapshot(
    registration: &Registration,
    op_id: &str,
    answer: Answer,
) -> Result<Snapshot, Error> {
    let snapshot = match answer {
        Answer::Snapshot(snapshot) => snapshot,
        Answer::Failed(failed) if failed.code == ErrorCode::OperationClosed => {
            return Err(unusable(
                registration,
                failed.code.as_str(),
                "answered operation_closed to a read",
            ))
        }
        Answer::Failed(failed) => {
            return Err(unusable(
                registration,
                failed.code.as_str(),
                &format!("{}: {}", failed.code.as_str(), failed.message),
            ))
        }
        Answer::Described(_) | Answer::Receipt(_) => {
            return Err(unusable(
                registration,
                FailureKind::Garbage.as_str(),
                "the answer is not a snapshot",
            ))
        }
    };
    if let Some(other) = snapshot.matches.iter().find(|m| m.op_id != op_id) {
        return Err(unusable(
            registration,
            FailureKind::Mismatch.as_str(),
            &format!("a match is for operation {}, not {op_id}", other.op_id),
        ));
    }
    let ceiling = registration.describe.query;
    Ok(snapshot.lowered(
        ceiling.complete,
        ceiling.authoritative,
        registration.can_close(),
    ))
}

/// Rule 3: recon never asks a receiver that cannot close to close.
pub fn check_close(registration: &Registration) -> Result<(), Refusal> {
    if registration.can_close() {
        Ok(())
    } else {
        Err(Refusal::CloseUnsupported {
            receiver: registration.name.clone(),
        })
    }
}

/// The capabilities a `mandatory` list may name. Protocol 1 knows none.
pub const KNOWN_CAPABILITIES: [&str; 0] = [];

/// Checks a `describe` answer before it is stored: a program's answer
/// that claims closing or a complete or authoritative read names its
/// instance (`instance_required`), and every mandatory capability is one
/// recon knows.
pub fn check_description(registration: &Registration) -> Result<(), Refusal> {
    if !registration.builtin {
        check_instance(&registration.name, &registration.describe)?;
    }
    match registration
        .describe
        .mandatory
        .iter()
        .find(|c| !KNOWN_CAPABILITIES.contains(&c.as_str()))
    {
        Some(unknown) => Err(Refusal::AdapterUnknownCapability(unknown.clone())),
        None => Ok(()),
    }
}

/// SPEC 12: a description that claims `can_close`, `complete` or
/// `authoritative` must declare `instance`, the store its evidence is of.
pub fn check_instance(
    receiver: &str,
    description: &crate::domain::Description,
) -> Result<(), Refusal> {
    let claims: Vec<&str> = [
        ("can_close", description.can_close),
        ("complete", description.query.complete),
        ("authoritative", description.query.authoritative),
    ]
    .into_iter()
    .filter_map(|(claim, made)| made.then_some(claim))
    .collect();
    match (&description.instance, claims.is_empty()) {
        (None, false) => Err(Refusal::InstanceRequired {
            receiver: receiver.to_string(),
            claims: claims.join(", "),
        }),
        _ => Ok(()),
    }
}

/// What makes a fresh `describe` answer another receiver than the stored
/// one, said for a person: another store (`instance`), or another claim
/// that evidence rests on (closing, the read ceiling, mandatory
/// capabilities). `None` when only the name or version moved, which is
/// recorded as a new version of the same registration.
pub fn identity_change(
    stored: &crate::domain::Description,
    current: &crate::domain::Description,
) -> Option<String> {
    let show = |value: &dyn std::fmt::Debug| format!("{value:?}");
    let changes: Vec<String> = [
        ("instance", show(&stored.instance), show(&current.instance)),
        (
            "can_close",
            show(&stored.can_close),
            show(&current.can_close),
        ),
        (
            "query.complete",
            show(&stored.query.complete),
            show(&current.query.complete),
        ),
        (
            "query.authoritative",
            show(&stored.query.authoritative),
            show(&current.query.authoritative),
        ),
        (
            "mandatory",
            show(&stored.mandatory),
            show(&current.mandatory),
        ),
    ]
    .into_iter()
    .filter(|(_, before, now)| before != now)
    .map(|(field, before, now)| {
        format!(
            "{field} was {} and is now {}",
            crate::domain::sanitize::escape(&before),
            crate::domain::sanitize::escape(&now)
        )
    })
    .collect();
    (!changes.is_empty()).then(|| changes.join(", "))
}

pub fn failure(kind: FailureKind, detail: impl Into<String>) -> AdapterFailure {
    AdapterFailure {
        kind,
        detail: detail.into(),
    }
}

/// A read the receiver answered unusably; `code` says how: the code of
/// its `ok: false` answer, or the failure kind.
fn unusable(registration: &Registration, code: &'static str, detail: &str) -> Error {
    StoreError::Call {
        code,
        message: format!(
            "receiver {} gave no usable answer: {detail}",
            registration.name
        ),
    }
    .into()
}
