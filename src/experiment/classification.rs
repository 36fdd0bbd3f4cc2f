//! The `classification` claim of SPEC section 5: every verdict of section 2
//! appears, including `inconclusive` from an incomplete and from a
//! non-authoritative source.
//!
//! The snapshots are real: four ops whose effects were written by real
//! receiver children (none, one exact, two exact, one with another payload),
//! read open and then closed. Only the flags of two reads are lowered, to
//! model weaker sources, and a few cases classify a snapshot against a
//! changed scope. Each case records the snapshot it classified (matches and
//! flags) next to the verdict `classify` returned, so the table shows both
//! the evidence and the judgement, not a verdict written down by hand.

use super::{Lab, Origin};
use crate::dispatch::ReceiverCall;
use crate::domain::{classify, Operation, Scope, Snapshot};
use crate::error::Result;
use serde_json::{json, Map, Value};

/// Every verdict, from real receiver snapshots, some with their flags
/// lowered to model incomplete or non-authoritative sources.
pub(super) fn classification(origin: &Origin) -> Result<Value> {
    let mut lab = Lab::new(origin)?;
    let base = seed_ledger(&mut lab)?;
    let reads = Reads::take(&mut lab)?;
    let other_payload = json!({"customer": "cus_9001", "amount_cents": 1, "currency": "USD"});
    let table = verdict_table(cases(base.scope(), &other_payload, reads));
    let mut verdicts: Vec<String> = table
        .values()
        .filter_map(|case| case["verdict"].as_str().map(str::to_string))
        .collect();
    verdicts.sort();
    verdicts.dedup();
    Ok(json!({ "cases": table, "distinct_verdicts": verdicts }))
}

/// Prepares four charges with the same payload and has the receiver write,
/// directly, no effect, one exact effect, two exact effects, and one effect
/// with another amount. Returns the op with no effect, whose scope every
/// case is classified against.
fn seed_ledger(lab: &mut Lab) -> Result<Operation> {
    let payload = json!({"customer": "cus_9001", "amount_cents": 4500, "currency": "USD"});
    let mut ops = Vec::new();
    for (id, effects) in [
        ("op-none", vec![]),
        ("op-one", vec![payload.clone()]),
        ("op-two", vec![payload.clone(), payload.clone()]),
        (
            "op-other-payload",
            vec![json!({"customer": "cus_9001", "amount_cents": 5400, "currency": "USD"})],
        ),
    ] {
        let op = lab.prepare(id, "charge_card", payload.clone())?;
        for effect_payload in effects {
            lab.direct(&ReceiverCall {
                payload: &effect_payload,
                ..ReceiverCall::for_operation(&op)
            })?;
        }
        ops.push(op);
    }
    Ok(ops.swap_remove(0))
}

/// The receiver's snapshots of the seeded ops: every open read, then the
/// closing ones.
struct Reads {
    one_open: Snapshot,
    two_open: Snapshot,
    none_open: Snapshot,
    other_payload_open: Snapshot,
    one_closed: Snapshot,
    none_closed: Snapshot,
    two_closed: Snapshot,
}

impl Reads {
    fn take(lab: &mut Lab) -> Result<Reads> {
        let open = |lab: &mut Lab, id: &str| lab.ws.snapshot(id, None).map(|c| c.snapshot);
        let closed =
            |lab: &mut Lab, id: &str| lab.ws.snapshot(id, Some("rosa")).map(|c| c.snapshot);
        let one_open = open(lab, "op-one")?;
        let two_open = open(lab, "op-two")?;
        let none_open = open(lab, "op-none")?;
        let other_payload_open = open(lab, "op-other-payload")?;
        let one_closed = closed(lab, "op-one")?;
        let none_closed = closed(lab, "op-none")?;
        let two_closed = closed(lab, "op-two")?;
        Ok(Reads {
            one_open,
            two_open,
            none_open,
            other_payload_open,
            one_closed,
            none_closed,
            two_closed,
        })
    }
}

/// Each named case: the scope classified and the snapshot it is classified
/// against. `original` is the scope of every seeded op; the other scopes
/// change its action, its compensation target, or its action and payload.
fn cases<'a>(
    original: Scope<'a>,
    other_payload: &'a Value,
    reads: Reads,
) -> Vec<(&'static str, Scope<'a>, Snapshot)> {
    let other_action = Scope {
        action_kind: "refund_charge",
        ..original
    };
    let other_target = Scope {
        compensates_effect_id: Some("fx-000001"),
        ..original
    };
    let other_both = Scope {
        action_kind: "refund_charge",
        payload: other_payload,
        compensates_effect_id: None,
    };
    let Reads {
        one_open,
        two_open,
        none_open,
        other_payload_open,
        one_closed,
        none_closed,
        two_closed,
    } = reads;
    vec![
        ("two_matches_open", original, two_open.clone()),
        ("two_matches_closed", original, two_closed),
        ("two_matches_other_action", other_action, two_open),
        ("one_match_other_payload", original, other_payload_open),
        (
            "one_match_payload_and_action_differ",
            other_both,
            one_open.clone(),
        ),
        ("one_match_other_action", other_action, one_closed.clone()),
        (
            "one_match_other_compensation_target",
            other_target,
            one_closed.clone(),
        ),
        ("one_exact_match_closed", original, one_closed.clone()),
        ("one_exact_match_open", original, one_open),
        (
            "one_exact_match_closed_incomplete",
            original,
            one_closed.clone().lowered(false, true, true),
        ),
        (
            "one_exact_match_closed_non_authoritative",
            original,
            one_closed.lowered(true, false, true),
        ),
        ("no_match_closed", original, none_closed.clone()),
        ("no_match_open", original, none_open),
        (
            "no_match_closed_incomplete",
            original,
            none_closed.clone().lowered(false, true, true),
        ),
        (
            "no_match_closed_non_authoritative",
            original,
            none_closed.lowered(true, false, true),
        ),
    ]
}

/// Classifies each case and records the snapshot's matches and flags next
/// to the verdict.
fn verdict_table(cases: Vec<(&str, Scope<'_>, Snapshot)>) -> Map<String, Value> {
    let mut table = Map::new();
    for (name, scope, snapshot) in cases {
        table.insert(
            name.to_string(),
            json!({
                "matches": snapshot.matches.len(),
                "complete": snapshot.complete,
                "authoritative": snapshot.authoritative,
                "closed": snapshot.closed,
                "verdict": classify(scope, &snapshot),
            }),
        );
    }
    table
}
