//! Deterministic generated load for `recon demo --ops N`: operations that
//! look like an agent's tool calls, and the receiver evidence each one left.
//!
//! Generated op `n` is always the same row (`op-bulk-0000042`, the same action
//! and payload), so two demo workspaces built with the same arguments are
//! equal and a benchmark measures the same data every time. The mix of
//! evidence is what a real receiver holds after a burst of lost receipts:
//! requests that never arrived, single exact effects, retries that landed
//! twice or more, effects whose payload or action differs from the request.
//! The receiver is also shared with other callers, so each generated op comes
//! with background effects of operations the sender never made (`ext-…`):
//! about ten ledger rows per generated op in all, which is what makes the
//! indexes (not table scans) matter.
//!
//! Payload text is written directly in canonical form (sorted keys, no
//! whitespace, nothing that needs escaping) instead of building a
//! `serde_json::Value` per row; a test proves it matches
//! [`crate::domain::canonical_json`].

use crate::domain::{
    classify, effect_id_for, BulkEffect, BulkObservation, BulkOperation, Effect, NumberedIds,
    Provenance, Scope, Snapshot, Timestamp, Verdict,
};
use serde_json::Value;

/// Generated ids: a prefix and a fixed width, so the text order of ids is
/// their numeric order and the last generated op is one step down the
/// primary key.
pub const IDS: NumberedIds = NumberedIds {
    prefix: "op-bulk-",
    digits: 7,
};

pub fn op_id(n: u64) -> String {
    IDS.id(n)
}

/// The number of a generated op id, if it is one.
pub fn number(op_id: &str) -> Option<u64> {
    IDS.number(op_id)
}

/// SplitMix64: a tiny, well-mixed hash, so neighbouring ops differ.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What the receiver holds for one generated operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// The request died on the way (15%).
    Absent,
    /// One effect, exactly as requested (45%).
    Exact,
    /// One effect with a different payload (8%).
    PayloadMismatch,
    /// One effect with the same payload under another action (4%).
    ActionMismatch,
    /// The same effect two to four times: retries that all landed (28%).
    Duplicates(u32),
}

impl Evidence {
    pub fn of(n: u64) -> Evidence {
        let h = mix(n);
        match h % 100 {
            0..15 => Evidence::Absent,
            15..60 => Evidence::Exact,
            60..68 => Evidence::PayloadMismatch,
            68..72 => Evidence::ActionMismatch,
            _ => Evidence::Duplicates(2 + ((h >> 32) % 3) as u32),
        }
    }

    /// How many ledger rows carry the operation's id.
    pub fn effects(self) -> u64 {
        match self {
            Evidence::Absent => 0,
            Evidence::Exact | Evidence::PayloadMismatch | Evidence::ActionMismatch => 1,
            Evidence::Duplicates(k) => u64::from(k),
        }
    }

    /// The verdict of an ordinary (not closing) read: generated ops are
    /// `unknown` and never closed.
    pub fn open_verdict(self) -> Verdict {
        match self {
            Evidence::Absent => Verdict::Inconclusive,
            Evidence::Exact => Verdict::ExactMatchExistenceOnly,
            Evidence::PayloadMismatch => Verdict::PayloadMismatch,
            Evidence::ActionMismatch => Verdict::ActionScopeMismatch,
            Evidence::Duplicates(_) => Verdict::DuplicateMatches,
        }
    }
}

/// How many effects of other callers the receiver wrote around op `n`.
pub fn background_effects(n: u64) -> u64 {
    7 + (mix(n) >> 20) % 4
}

const ACTIONS: [&str; 5] = [
    "send_email",
    "charge_card",
    "create_ticket",
    "send_sms",
    "post_slack_message",
];

/// A plausible wrong action for the same request: what a confused or
/// outdated receiver integration records instead.
const NEAR_MISSES: [&str; 5] = [
    "schedule_email",
    "authorize_card",
    "update_ticket",
    "send_mms",
    "post_slack_thread_reply",
];

const FIRST: [&str; 16] = [
    "Maya", "Omar", "Lena", "Kofi", "Ines", "Yuki", "Arjun", "Sofia", "Liam", "Zara", "Noah",
    "Amara", "Felix", "Rosa", "Tariq", "Hana",
];
const LAST: [&str; 16] = [
    "lopez", "haddad", "fischer", "mensah", "costa", "tanaka", "patel", "rossi", "walsh", "okafor",
    "berg", "silva", "novak", "kim", "dubois", "ali",
];
const CURRENCIES: [&str; 3] = ["EUR", "USD", "GBP"];
const PROJECTS: [&str; 4] = ["SUP", "OPS", "BILL", "WEB"];
const TICKETS: [&str; 6] = [
    "Customer cannot reset password",
    "Refund request for a duplicate charge",
    "Checkout fails with card declined",
    "Export to CSV times out",
    "Invoice shows the wrong VAT rate",
    "Shipping address not saved",
];
const CHANNELS: [&str; 4] = ["#deploys", "#support", "#billing-alerts", "#incidents"];

fn pick<T: Copy>(items: &[T], seed: u64) -> T {
    items[(seed % items.len() as u64) as usize]
}

/// The canonical payload of a tool call. `variant` changes one field, the
/// way a receiver that recomputed or mangled the request would.
fn payload(action: usize, seed: u64, variant: bool) -> String {
    let a = seed & 0xffff;
    let b = (seed >> 16) & 0xffff;
    let c = (seed >> 32) & 0xffff;
    let v = u64::from(variant);
    match action {
        0 => {
            let first = pick(&FIRST, a + v);
            let last = pick(&LAST, b);
            let to = format!("{}.{last}@example.com", first.to_ascii_lowercase());
            let (subject, line) = match c % 5 {
                0 => (
                    format!("Your invoice INV-{:05} is ready", b),
                    "your invoice is attached",
                ),
                1 => (
                    "Password reset requested".to_string(),
                    "use the link below to choose a new password",
                ),
                2 => (
                    format!("Order A-{:05} has shipped", a),
                    "your parcel is on its way",
                ),
                3 => (
                    "Your trial ends in 3 days".to_string(),
                    "pick a plan to keep your data",
                ),
                _ => (
                    "Receipt for your payment".to_string(),
                    "thank you for your payment",
                ),
            };
            let name = pick(&FIRST, a);
            format!(r#"{{"body":"Hi {name}, {line}.","subject":"{subject}","to":"{to}"}}"#)
        }
        1 => {
            let amount = (500 + (a % 400) * 25) * if variant { 10 } else { 1 };
            let currency = pick(&CURRENCIES, b);
            let description = if c.is_multiple_of(2) {
                format!("Order A-{:05}", c)
            } else {
                "Monthly subscription renewal".to_string()
            };
            format!(
                r#"{{"amount_cents":{amount},"currency":"{currency}","customer":"cus_{b:05}","description":"{description}"}}"#
            )
        }
        2 => {
            let priority = (a + v) % 4 + 1;
            let project = pick(&PROJECTS, b);
            let summary = pick(&TICKETS, c);
            format!(r#"{{"priority":"P{priority}","project":"{project}","summary":"{summary}"}}"#)
        }
        3 => {
            let to = 5_550_000 + (a + v) % 10_000;
            let text = match c % 4 {
                0 => format!("Your verification code is {:06}", b * 13 % 1_000_000),
                1 => "Your parcel arrives today between 2 and 4 pm".to_string(),
                2 => "Reminder: your appointment is tomorrow at 10:30".to_string(),
                _ => "Your table for 2 is confirmed".to_string(),
            };
            format!(r#"{{"text":"{text}","to":"+1{to:07}"}}"#)
        }
        _ => {
            let channel = pick(&CHANNELS, a + v);
            let text = match c % 4 {
                0 => format!("Deploying api v2.{} to production", b % 40),
                1 => format!("New P1 ticket SUP-{b} assigned to on-call"),
                2 => format!("Nightly billing run finished: {} invoices", a),
                _ => "Latency alert cleared for checkout".to_string(),
            };
            format!(r#"{{"channel":"{channel}","text":"{text}"}}"#)
        }
    }
}

fn action_of(n: u64) -> usize {
    ((mix(n) >> 8) % ACTIONS.len() as u64) as usize
}

/// How far back generated operations were sent: over the last three
/// days, so the queue shows ages from minutes to days.
const SPREAD_MILLIS: i64 = 3 * 86_400_000;

/// When the generated ops of one run were sent: evenly over the last three
/// days up to `now`, in op order. Times that grow with the op id are what
/// keeps the bulk load fast: every index on `updated_at` grows at its end,
/// as it does in real life, instead of being written all over.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    now: Timestamp,
    last: u64,
    step_millis: i64,
}

impl Schedule {
    /// The schedule of generated ops `first..=last`, the last sent at `now`.
    pub fn new(first: u64, last: u64, now: Timestamp) -> Self {
        let count = i64::try_from(last.saturating_sub(first) + 1).unwrap_or(i64::MAX);
        Schedule {
            now,
            last,
            step_millis: (SPREAD_MILLIS / count).max(1),
        }
    }

    /// When op `n` was prepared and dispatched.
    pub fn sent_at(&self, n: u64) -> Timestamp {
        let steps = i64::try_from(self.last.saturating_sub(n)).unwrap_or(i64::MAX);
        Timestamp::from_millis(self.now.millis() - steps.saturating_mul(self.step_millis))
    }
}

/// Generated operation `n`, prepared and dispatched at its time in
/// `schedule`; observed (see [`observation`]) when its first ledger row has
/// `first_effect_seq`.
pub fn operation(n: u64, schedule: &Schedule, first_effect_seq: i64) -> BulkOperation {
    let action = action_of(n);
    let mut op = BulkOperation {
        op_id: op_id(n),
        action_kind: ACTIONS[action].to_string(),
        canonical_payload: payload(action, mix(n ^ 0x5eed), false),
        at: schedule.sent_at(n),
        observation: None,
    };
    op.observation = observation(n, &op, schedule, first_effect_seq);
    op
}

/// Who records the observations of generated operations.
pub const OBSERVER: &str = "recon demo";

/// Whether generated op `n` was observed since it was sent: half of them.
pub fn observed(n: u64) -> bool {
    mix(n ^ 0x0b5e).is_multiple_of(2)
}

/// What an ordinary read of the ledger shows for generated op `n` once its
/// effects are in (the first with `first_effect_seq`), recorded as
/// [`OBSERVER`]'s observation some time between its sending and the
/// schedule's end; `None` for an op never observed.
pub fn observation(
    n: u64,
    op: &BulkOperation,
    schedule: &Schedule,
    first_effect_seq: i64,
) -> Option<BulkObservation> {
    if !observed(n) {
        return None;
    }
    let payload = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
    let mut parsed: Option<(String, Value)> = None;
    let matches: Vec<Effect> = own_effects(n)
        .map(|(offset, e)| {
            // Retries carry the same payload: parsed once.
            let value = match &parsed {
                Some((text, value)) if *text == e.canonical_payload => value.clone(),
                _ => {
                    let value = payload(&e.canonical_payload);
                    parsed = Some((e.canonical_payload.clone(), value.clone()));
                    value
                }
            };
            Effect {
                effect_id: effect_id_for(first_effect_seq + offset),
                op_id: e.op_id,
                action_kind: e.action_kind,
                compensates_effect_id: None,
                payload: value,
            }
        })
        .collect();
    let snapshot = Snapshot {
        op_id: op.op_id.clone(),
        matches,
        complete: true,
        authoritative: true,
        closed: false,
        closed_by: None,
    };
    let requested = payload(&op.canonical_payload);
    let scope = Scope {
        action_kind: &op.action_kind,
        payload: &requested,
        compensates_effect_id: None,
    };
    let since = schedule.now.millis() - op.at.millis();
    let after = i64::try_from(mix(n ^ 0x0b5f) % 1000).unwrap_or(0) * since / 1000;
    Some(BulkObservation {
        at: Timestamp::from_millis(op.at.millis() + after),
        by: OBSERVER.to_string(),
        verdict: classify(scope, &snapshot),
        snapshot,
        provenance: Provenance::default(),
    })
}

/// How many ledger rows [`effects`] writes around op `n`.
pub fn effect_count(n: u64) -> u64 {
    Evidence::of(n).effects() + background_effects(n)
}

/// The receiver rows written around generated operation `n`: its own
/// evidence interleaved with other callers' effects, as traffic arrives.
pub fn effects(n: u64) -> impl Iterator<Item = BulkEffect> {
    let own_count = Evidence::of(n).effects();
    let background = background_effects(n);
    (0..own_count.max(background)).flat_map(move |i| {
        let other = (i < background).then(|| {
            let h = mix(n.wrapping_mul(16).wrapping_add(i) ^ 0xb4c6);
            let kind = (h % ACTIONS.len() as u64) as usize;
            BulkEffect {
                op_id: format!("ext-{}-{n:07}-{i}", pick(&CALLERS, h >> 40)),
                action_kind: ACTIONS[kind].to_string(),
                canonical_payload: payload(kind, mix(h), false),
            }
        });
        let mine = (i < own_count).then(|| own_effect(n));
        other.into_iter().chain(mine)
    })
}

/// One of generated op `n`'s own ledger rows (they are all alike).
fn own_effect(n: u64) -> BulkEffect {
    let action = action_of(n);
    let own = Evidence::of(n);
    BulkEffect {
        op_id: op_id(n),
        action_kind: match own {
            Evidence::ActionMismatch => NEAR_MISSES[action],
            _ => ACTIONS[action],
        }
        .to_string(),
        canonical_payload: payload(action, mix(n ^ 0x5eed), own == Evidence::PayloadMismatch),
    }
}

/// Generated op `n`'s own rows among [`effects`], each with its offset
/// there: the `i`th follows `min(i + 1, background)` rows of other callers
/// and `i` of its own.
fn own_effects(n: u64) -> impl Iterator<Item = (i64, BulkEffect)> {
    let background = background_effects(n);
    (0..Evidence::of(n).effects()).map(move |i| {
        let offset = (i + 1).min(background) + i;
        (i64::try_from(offset).unwrap_or(i64::MAX), own_effect(n))
    })
}

/// Other callers of the shared receiver.
const CALLERS: [&str; 4] = ["crm-sync", "billing-batch", "support-bot", "ops-notifier"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::canonical_json;

    #[test]
    fn generated_payloads_are_canonical_json() {
        for n in 0..3_000u64 {
            for action in 0..ACTIONS.len() {
                for variant in [false, true] {
                    let text = payload(action, mix(n), variant);
                    let value: serde_json::Value = serde_json::from_str(&text)
                        .unwrap_or_else(|e| panic!("{text} is not JSON: {e}"));
                    assert_eq!(canonical_json(&value), text);
                }
            }
        }
    }

    #[test]
    fn a_payload_variant_differs_from_the_request() {
        for n in 0..3_000u64 {
            for action in 0..ACTIONS.len() {
                assert_ne!(
                    payload(action, mix(n), false),
                    payload(action, mix(n), true)
                );
            }
        }
    }

    #[test]
    fn the_mix_has_every_kind_of_evidence_and_about_ten_effects_per_op() {
        let n = 10_000u64;
        let mut kinds = std::collections::BTreeMap::new();
        let mut rows = 0u64;
        for i in 1..=n {
            *kinds
                .entry(Evidence::of(i).open_verdict().as_str())
                .or_insert(0u64) += 1;
            rows += effects(i).count() as u64;
        }
        assert_eq!(kinds.len(), 5, "{kinds:?}");
        let per_op = rows as f64 / n as f64;
        assert!((9.0..=11.0).contains(&per_op), "{per_op} effects per op");
    }

    #[test]
    fn own_effects_match_the_evidence_kind() {
        for n in 1..500u64 {
            let own: Vec<BulkEffect> = effects(n).filter(|e| e.op_id == op_id(n)).collect();
            assert_eq!(own.len() as u64, Evidence::of(n).effects());
            let op = operation(n, &Schedule::new(1, 500, Timestamp::default()), 1);
            for e in &own {
                let same_payload = e.canonical_payload == op.canonical_payload;
                let same_action = e.action_kind == op.action_kind;
                match Evidence::of(n) {
                    Evidence::PayloadMismatch => assert!(!same_payload && same_action),
                    Evidence::ActionMismatch => assert!(same_payload && !same_action),
                    _ => assert!(same_payload && same_action),
                }
            }
        }
    }

    #[test]
    fn own_effects_are_where_effects_writes_them() {
        for n in 1..2_000u64 {
            let all: Vec<(i64, BulkEffect)> = (0..).zip(effects(n)).collect();
            let mine: Vec<(i64, BulkEffect)> = all
                .into_iter()
                .filter(|(_, e)| e.op_id == op_id(n))
                .collect();
            assert_eq!(own_effects(n).collect::<Vec<_>>(), mine, "op {n}");
        }
    }

    #[test]
    fn generated_ids_round_trip_and_sort_numerically() {
        assert_eq!(op_id(42), "op-bulk-0000042");
        assert_eq!(number(&op_id(42)), Some(42));
        assert_eq!(number("op-bulk-42"), None);
        assert_eq!(number("op-bulk-00000x2"), None);
        let (low, high) = IDS.bounds();
        assert!(op_id(9) < op_id(10) && op_id(IDS.max_number()) == high);
        assert!(low == op_id(0));
    }
}
