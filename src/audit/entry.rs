//! Journal entries: their kinds, their content, and the hash that chains
//! them.
//!
//! An entry's content is one JSON object: `seq`, `kind` and `op_id` (null
//! for an act on no operation), plus the fields of its kind. The `entry`
//! column stores that object as canonical JSON (RFC 8785, through
//! [`canonical_json`]), and `hash = SHA-256(prev_hash || entry)` as 64
//! lowercase hex digits, where `prev_hash` is the previous entry's hash (64
//! zeros for the first). So the hash covers exactly the bytes stored, and
//! anyone holding an exported line can recompute it: drop `prev_hash` and
//! `hash`, canonicalize the rest, hash it after `prev_hash`.
//!
//! The fields of each kind are built here from domain values and nowhere
//! else, so the writer (the store) and the reader (the replay in
//! `projection`) agree on them by construction.

use crate::domain::{
    canonical_json, Approval, BulkOperation, CallFailure, CloseRecord, EvidenceRecord,
    EvidenceSource, LostReceiver, Marking, NewNote, NewObservation, Operation, Registration,
    Timestamp,
};
use serde::Serialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;

/// The fields that name the person an entry records, by kind: who left a
/// note or moved a marker (`by`), decided (`reviewer`), observed
/// (`observed_by`), authorized a close (`authorized_by`) or approved a
/// compensation (`approver`). An entry names at most one of them.
const PERSON_FIELDS: [&str; 5] = ["by", "reviewer", "observed_by", "authorized_by", "approver"];

/// The person an entry's content names, if any (a dispatch, a receipt or a
/// failed call names nobody).
pub fn person_of(fields: &Map<String, Value>) -> Option<&str> {
    PERSON_FIELDS
        .iter()
        .find_map(|name| fields.get(*name).and_then(Value::as_str))
}

/// The `prev_hash` of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What an entry records. Every entry's fields include `at`, the time of
/// the act (UTC, RFC 3339 with milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Prepared,
    Dispatched,
    Receipt,
    Observed,
    Closed,
    Decided,
    Approved,
    Noted,
    Escalated,
    Deescalated,
    ReceiverRegistered,
    ReceiverUpdated,
    ReceiverRemoved,
    Acknowledged,
    CallFailed,
    CloseRequested,
    /// `recon db upgrade` (PostgreSQL's outbox alone): the schema it
    /// found and the one it left.
    Upgraded,
    /// The outbox's settings after an act that set them (PostgreSQL's
    /// outbox alone, SPEC 12: `db init`, `db upgrade`): `four_eyes`,
    /// `workspace_id`, `owner`, `roles_prefix`.
    Settings,
}

impl EntryKind {
    pub const ALL: [EntryKind; 18] = [
        EntryKind::Prepared,
        EntryKind::Dispatched,
        EntryKind::Receipt,
        EntryKind::Observed,
        EntryKind::Closed,
        EntryKind::Decided,
        EntryKind::Approved,
        EntryKind::Noted,
        EntryKind::Escalated,
        EntryKind::Deescalated,
        EntryKind::ReceiverRegistered,
        EntryKind::ReceiverUpdated,
        EntryKind::ReceiverRemoved,
        EntryKind::Acknowledged,
        EntryKind::CallFailed,
        EntryKind::CloseRequested,
        EntryKind::Upgraded,
        EntryKind::Settings,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Prepared => "prepared",
            EntryKind::Dispatched => "dispatched",
            EntryKind::Receipt => "receipt",
            EntryKind::Observed => "observed",
            EntryKind::Closed => "closed",
            EntryKind::Decided => "decided",
            EntryKind::Approved => "approved",
            EntryKind::Noted => "noted",
            EntryKind::Escalated => "escalated",
            EntryKind::Deescalated => "deescalated",
            EntryKind::ReceiverRegistered => "receiver_registered",
            EntryKind::ReceiverUpdated => "receiver_updated",
            EntryKind::Acknowledged => "acknowledged",
            EntryKind::CallFailed => "call_failed",
            EntryKind::CloseRequested => "close_requested",
            EntryKind::ReceiverRemoved => "receiver_removed",
            EntryKind::Upgraded => "upgraded",
            EntryKind::Settings => "settings",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        EntryKind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// The kind of the entry behind an evidence row.
    pub fn of_evidence(source: EvidenceSource) -> Self {
        match source {
            EvidenceSource::Receipt => EntryKind::Receipt,
            EvidenceSource::Review | EvidenceSource::Policy => EntryKind::Decided,
        }
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An entry ready to insert: its seq, its canonical content, its link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub seq: i64,
    pub entry: String,
    pub prev_hash: String,
    pub hash: String,
}

/// The length of a journal and the hash of its last entry: what the journal
/// is after appending, and what `recon checkpoint` prints (`LEN:HASH`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    pub length: i64,
    pub head_hash: String,
}

impl Checkpoint {
    /// The empty journal.
    pub fn genesis() -> Self {
        Checkpoint {
            length: 0,
            head_hash: GENESIS_HASH.to_string(),
        }
    }

    /// Reads `LEN:HASH`: a decimal length and 64 lowercase hex digits.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (length, hash) = text
            .split_once(':')
            .ok_or("expected LEN:HASH, with a colon")?;
        let length = (!length.is_empty() && length.bytes().all(|b| b.is_ascii_digit()))
            .then(|| length.parse::<i64>().ok())
            .flatten()
            .ok_or("LEN must be a whole number of entries")?;
        if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err("HASH must be 64 lowercase hex digits".into());
        }
        Ok(Checkpoint {
            length,
            head_hash: hash.to_string(),
        })
    }

    /// Seals the next entry after this head.
    pub fn seal(&self, kind: EntryKind, op_id: Option<&str>, fields: Map<String, Value>) -> Sealed {
        let seq = self.length + 1;
        let entry = canonical_json(&content(seq, kind, op_id, fields));
        Sealed {
            seq,
            hash: link_hash(&self.head_hash, &entry),
            prev_hash: self.head_hash.clone(),
            entry,
        }
    }

    /// The head after `sealed` was appended to this one.
    pub fn after(&mut self, sealed: &Sealed) {
        self.length = sealed.seq;
        self.head_hash.clone_from(&sealed.hash);
    }
}

impl fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.length, self.head_hash)
    }
}

/// An entry's content: its fields with `seq`, `kind` and `op_id`.
pub fn content(
    seq: i64,
    kind: EntryKind,
    op_id: Option<&str>,
    mut fields: Map<String, Value>,
) -> Value {
    fields.insert("seq".into(), Value::from(seq));
    fields.insert("kind".into(), Value::from(kind.as_str()));
    fields.insert("op_id".into(), op_id.map_or(Value::Null, Value::from));
    Value::Object(fields)
}

/// `SHA-256(prev_hash || entry)`, as 64 lowercase hex digits.
pub fn link_hash(prev_hash: &str, entry: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(entry.as_bytes());
    hex(&hasher.finalize())
}

/// SHA-256 of some bytes, as 64 lowercase hex digits (the domain's).
pub use crate::domain::sha256_hex;

fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `prepared`: the new operation as the outbox stored it (`op_kind` is the
/// operation's kind; `kind` is the entry's), at its `created_at`.
pub fn prepared(op: &Operation) -> Map<String, Value> {
    object(json!({
        "op_kind": op.kind,
        "action_kind": op.action_kind,
        "payload": op.payload,
        "compensates_effect_id": op.compensates_effect_id,
        "compensates_op_id": op.compensates_op_id,
        "receiver": op.receiver,
        "at": op.triage.created_at,
    }))
}

/// `dispatched`: `prepared -> unknown`, with the versions.
pub fn dispatched(from_version: i64, to_version: i64, at: Timestamp) -> Map<String, Value> {
    object(json!({ "from_version": from_version, "to_version": to_version, "at": at }))
}

/// `receipt` or `decided`: what the evidence row holds, its own seq
/// included (as `evidence_seq`).
pub fn evidence(record: &EvidenceRecord) -> Map<String, Value> {
    let mut fields = object(json!({
        "evidence_seq": record.seq,
        "source": record.source,
        "reviewer": record.reviewer,
        "decision": record.decision,
        "verdict": record.verdict,
        "snapshot": record.snapshot,
        "from_version": record.from_version,
        "to_version": record.to_version,
        "effect_id": record.effect_id,
        "receiver": record.receiver,
        "receiver_describe_sha256": record.receiver_describe_sha256,
        "response_sha256": record.response_sha256,
        "receiver_id": record.receiver_id,
        "receiver_version": record.receiver_version,
        "at": record.recorded_at,
    }));
    // A decision on a closed snapshot names the close it rests on (SPEC 12).
    if let Some(close_seq) = record.close_seq {
        fields.insert("close_seq".into(), Value::from(close_seq));
    }
    // A policy's decision names its policy; no other evidence has one.
    if let Some(policy) = record.policy {
        fields.insert("policy".into(), Value::from(policy.as_str()));
    }
    // A kept duplicate names its surplus (SPEC 14); no other evidence has one.
    if !record.surplus_effect_ids.is_empty() {
        fields.insert(
            "surplus_effect_ids".into(),
            Value::from(record.surplus_effect_ids.clone()),
        );
    }
    fields
}

/// `observed`: a read of the receiver someone recorded: who, when, what
/// it found (the flags, the match count, the verdict, the whole snapshot)
/// and where it came from.
pub fn observed(observation: &NewObservation<'_>) -> Map<String, Value> {
    let snapshot = observation.snapshot;
    let mut fields = object(json!({
        "receiver": observation.provenance.receiver,
        "receiver_describe_sha256": observation.provenance.receiver_describe_sha256,
        "response_sha256": observation.provenance.response_sha256,
        "observed_by": observation.by,
        "at": observation.at,
        "verdict": observation.verdict,
        "complete": snapshot.complete,
        "authoritative": snapshot.authoritative,
        "closed": snapshot.closed,
        "matches": snapshot.matches.len(),
        "snapshot": snapshot,
    }));
    // The registration the read came through, and its version.
    let provenance = observation.provenance;
    if let (Some(id), Some(version)) = (provenance.receiver_id, provenance.receiver_version) {
        fields.insert("receiver_id".into(), id.into());
        fields.insert("receiver_version".into(), version.into());
    }
    fields
}

/// `noted`: a note left on an operation.
pub fn noted(note: &NewNote<'_>) -> Map<String, Value> {
    object(json!({ "by": note.by, "at": note.at, "text": note.text }))
}

/// `close_requested`: a close authorized, journaled before the receiver is
/// asked, so that a close whose answer is lost still has its authorization.
pub fn close_requested(receiver: &str, authorized_by: &str, at: Timestamp) -> Map<String, Value> {
    object(json!({ "receiver": receiver, "authorized_by": authorized_by, "at": at }))
}

/// `call_failed`: a receiver call that gave no usable answer.
pub fn call_failed(failure: &CallFailure) -> Map<String, Value> {
    object(json!({
        "verb": failure.verb,
        "receiver": failure.receiver,
        // `kind` names the entry's own kind.
        "failure": failure.kind,
        "detail": failure.detail,
        "exit_code": failure.exit_code,
        "stderr": failure.stderr,
        "at": failure.at,
    }))
}

/// `acknowledged`: a contradiction marker cleared, by whom and why.
pub fn acknowledged(acknowledgement: &NewNote<'_>) -> Map<String, Value> {
    object(json!({
        "by": acknowledgement.by,
        "at": acknowledgement.at,
        "reason": acknowledgement.text,
    }))
}

/// `escalated` or `deescalated`: the marker raised or lowered, by whom and
/// why (the entry's kind says which).
pub fn marked(marking: &Marking<'_>) -> Map<String, Value> {
    object(json!({ "by": marking.by, "at": marking.at, "reason": marking.reason }))
}

/// `approved`: the approval and the compensation operation it prepared
/// (whose op id is the entry's). The approval's action kind and payload
/// are the operation's, so they are recorded once.
pub fn approved(approval: &Approval, compensation: &Operation) -> Map<String, Value> {
    let mut fields = prepared(compensation);
    fields.insert(
        "original_op_id".into(),
        approval.original_op_id.clone().into(),
    );
    fields.insert("effect_id".into(), approval.effect_id.clone().into());
    fields.insert("approved_version".into(), approval.approved_version.into());
    fields.insert("approver".into(), approval.approver.clone().into());
    // Why, as the approver said (`duplicate` for a surplus effect, SPEC 14).
    if let Some(reason) = &approval.reason {
        fields.insert("reason".into(), reason.clone().into());
    }
    fields
}

/// `closed`: a close the receiver committed, with the snapshot it
/// recorded and that snapshot's canonical SHA-256 (what a decision resting
/// on it must carry, SPEC 12), and the closing login when the receiver
/// gave one.
pub fn closed(close: &CloseRecord) -> Map<String, Value> {
    let mut fields = object(json!({
        "receiver": close.receiver,
        "authorized_by": close.authorized_by,
        "response_sha256": close.response_sha256,
        "matches": close.matches,
        "snapshot": close.snapshot,
        "snapshot_sha256": close.snapshot_sha256,
        "at": close.closed_at,
    }));
    if let Some(closed_by) = &close.closed_by {
        fields.insert("closed_by".into(), Value::from(closed_by.as_str()));
    }
    fields
}

/// `receiver_registered`: the whole registration, routes included.
pub fn receiver_registered(registration: &Registration, at: Timestamp) -> Map<String, Value> {
    object(json!({
        "at": at,
        "name": registration.name,
        "program": registration.program,
        "args": registration.args,
        "timeout_ms": registration.timeout_ms,
        "describe": registration.describe,
        "describe_sha256": registration.describe_sha256,
        "actions": registration.actions,
        "builtin": registration.builtin,
        "env": registration.env,
    }))
}

/// `receiver_updated`: the registration's new version, whole (its routes
/// stay as they were).
pub fn receiver_updated(registration: &Registration, at: Timestamp) -> Map<String, Value> {
    object(json!({
        "at": at,
        "id": registration.id,
        "version": registration.version,
        "name": registration.name,
        "program": registration.program,
        "args": registration.args,
        "timeout_ms": registration.timeout_ms,
        "describe": registration.describe,
        "describe_sha256": registration.describe_sha256,
        "env": registration.env,
    }))
}

/// `receiver_removed`: the registration's name; for one removed as lost
/// (its store gone while operations route to it), `"lost": true` with who
/// removed it and why (the reason each `escalated` entry after it repeats,
/// saying `"lost": true` too).
pub fn receiver_removed(
    name: &str,
    lost: Option<&LostReceiver<'_>>,
    at: Timestamp,
) -> Map<String, Value> {
    match lost {
        None => object(json!({ "name": name, "at": at })),
        Some(lost) => object(json!({
            "name": name,
            "at": at,
            "lost": true,
            "by": lost.by,
            "reason": lost.reason,
        })),
    }
}

/// The fields of an `upgraded` entry: the schema version the outbox had
/// and the one it has now.
pub fn upgraded(from: i64, to: i64, at: Timestamp) -> Map<String, Value> {
    object(json!({ "from": from, "to": to, "at": at }))
}

/// The outbox's settings as a `settings` entry holds them (SPEC 12): the
/// whole set after the act, so the newest entry says what `meta` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub four_eyes: bool,
    pub workspace_id: String,
    pub owner: String,
    pub roles_prefix: String,
}

impl Settings {
    /// The keys of `meta` that hold the settings.
    pub const KEYS: [&'static str; 4] = ["four_eyes", "workspace_id", "owner", "roles_prefix"];

    /// What `meta` holds under `key` for these settings: four eyes is
    /// the row `1` when on and no row when off.
    pub fn meta_value(&self, key: &str) -> Option<&str> {
        match key {
            "four_eyes" => self.four_eyes.then_some("1"),
            "workspace_id" => Some(&self.workspace_id),
            "owner" => Some(&self.owner),
            "roles_prefix" => Some(&self.roles_prefix),
            _ => None,
        }
    }
}

/// The fields of a `settings` entry.
pub fn settings(settings: &Settings, at: Timestamp) -> Map<String, Value> {
    object(json!({
        "four_eyes": settings.four_eyes,
        "workspace_id": settings.workspace_id,
        "owner": settings.owner,
        "roles_prefix": settings.roles_prefix,
        "at": at,
    }))
}

/// The canonical text of an object whose member values are already
/// canonical JSON text, sorted as RFC 8785 sorts names (UTF-16 code units).
fn canonical_members(mut members: Vec<(&str, String)>) -> String {
    members.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    let mut out = String::from("{");
    for (i, (name, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&canonical_json(&Value::from(name)));
        out.push(':');
        out.push_str(&value);
    }
    out.push('}');
    out
}

fn text(value: &str) -> String {
    canonical_json(&Value::from(value))
}

/// The `prepared` and `dispatched` entries of a generated operation
/// (`recon demo --ops`) routed to `receiver`, sealed after `head`, which
/// moves past both. The payload arrives as canonical text, so the content
/// is written without parsing it; a test holds this to [`Checkpoint::seal`].
pub fn seal_generated(head: &mut Checkpoint, op: &BulkOperation, receiver: &str) -> [Sealed; 2] {
    let op_id = text(&op.op_id);
    let at = text(&op.at.to_string());
    let seq = head.length + 1;
    let prepared = canonical_members(vec![
        ("at", at.clone()),
        ("seq", seq.to_string()),
        ("kind", text(EntryKind::Prepared.as_str())),
        ("op_id", op_id.clone()),
        ("op_kind", text("original")),
        ("action_kind", text(&op.action_kind)),
        ("payload", op.canonical_payload.clone()),
        ("compensates_effect_id", "null".into()),
        ("compensates_op_id", "null".into()),
        ("receiver", text(receiver)),
    ]);
    let dispatched = canonical_members(vec![
        ("at", at),
        ("seq", (seq + 1).to_string()),
        ("kind", text(EntryKind::Dispatched.as_str())),
        ("op_id", op_id),
        ("from_version", "1".into()),
        ("to_version", "2".into()),
    ]);
    [prepared, dispatched].map(|entry| {
        let sealed = Sealed {
            seq: head.length + 1,
            hash: link_hash(&head.head_hash, &entry),
            prev_hash: head.head_hash.clone(),
            entry,
        };
        head.after(&sealed);
        sealed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_operation_is_sealed_as_its_prepare_and_dispatch_would_be() {
        let op = BulkOperation {
            op_id: "op-bulk-0000001".into(),
            action_kind: "send_email".into(),
            canonical_payload: canonical_json(&json!({"to": "a\u{1f}b@example.com", "n": 0.5})),
            at: Timestamp::from_millis(1_796_285_702_123),
            observation: None,
        };
        let mut fast = Checkpoint::genesis();
        let generated = seal_generated(&mut fast, &op, "builtin");
        let mut slow = Checkpoint::genesis();
        let operation = Operation {
            surplus_effect_ids: Vec::new(),
            op_id: op.op_id.clone(),
            kind: crate::domain::OpKind::Original,
            action_kind: op.action_kind.clone(),
            payload: serde_json::from_str(&op.canonical_payload).unwrap(),
            state: crate::domain::OpState::Prepared,
            version: 1,
            compensates_effect_id: None,
            compensates_op_id: None,
            confirmed_effect_id: None,
            receiver: "builtin".into(),
            triage: crate::domain::Triage {
                created_at: op.at,
                ..Default::default()
            },
        };
        let prepared = slow.seal(EntryKind::Prepared, Some(&op.op_id), prepared(&operation));
        slow.after(&prepared);
        let fields = dispatched(1, 2, op.at);
        let dispatched = slow.seal(EntryKind::Dispatched, Some(&op.op_id), fields);
        slow.after(&dispatched);
        assert_eq!(generated, [prepared, dispatched]);
        assert_eq!(fast, slow);
    }

    #[test]
    fn a_checkpoint_reads_back_what_it_prints_and_nothing_else() {
        let hash = "0123456789abcdef".repeat(4);
        let kept = Checkpoint::parse(&format!("42:{hash}")).unwrap();
        assert_eq!((kept.length, kept.to_string()), (42, format!("42:{hash}")));
        for bad in [
            String::new(),
            "42".into(),
            format!("42:{}", &hash[1..]),
            format!("42:{}", hash.to_uppercase()),
            format!("+42:{hash}"),
            format!("-1:{hash}"),
            format!(" 42:{hash}"),
            format!("99999999999999999999:{hash}"),
        ] {
            assert!(Checkpoint::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_kind_has_its_name() {
        for kind in EntryKind::ALL {
            assert_eq!(EntryKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        assert_eq!(EntryKind::parse("evidence"), None);
    }
}
