//! The projection: what the tables must hold if the journal is the truth,
//! rebuilt by replaying the journal, and compared field by field with what
//! they do hold.
//!
//! The store feeds a [`Projector`] one operation at a time (a merge join of
//! the journal, ordered by `(op_id, seq)`, with each table ordered by
//! `op_id`), so no more than one operation's entries and rows are ever in
//! memory. Rows arrive as [`Row`]s, each column's SQLite value as it is;
//! the replay produces the values it calls for as JSON, and a column
//! matches a value when it holds exactly that (text a string, an integer
//! an integer). A column that holds JSON (a payload, a snapshot) is compared as
//! its stored text against the entry's text for that value: the outbox
//! writes both as canonical JSON, so any other text was edited.

use super::chain::BrokenLink;
use super::entry::{link_hash, EntryKind};
use super::row::{Column, Row};
use crate::domain::{
    canonical_json, check_close_named, check_evidence, check_policy_review, check_recorded_close,
    parse_json, Decision, EvidenceSource, Policy, RecordedClose, Review, Scope, Snapshot, Verdict,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;

/// A row the replay calls for: its columns' values, in the order of its
/// [`Table`]. The rows a table holds are [`Row`]s.
pub type Expected<'a> = Vec<Want<'a>>;

/// A value the replay calls for, borrowed from the entry it comes from:
/// it is built into JSON only for a report, so an operation that agrees
/// with its rows costs no allocation per value.
#[derive(Debug, Clone, PartialEq)]
pub enum Want<'a> {
    Null,
    Int(i64),
    /// Exactly this text (an id, a state, a field holding JSON as its
    /// canonical text).
    Text(&'a str),
    /// The JSON scalar written as this text in the entry.
    Json(&'a str),
    /// A value built by the replay (receivers' routes).
    Value(Value),
}

impl Want<'_> {
    /// Whether a stored column holds exactly this value.
    pub fn matches(&self, column: Column<'_>) -> bool {
        match self {
            Want::Null => column == Column::Null,
            Want::Int(i) => column == Column::Integer(*i),
            Want::Text(text) => column == Column::Text(text),
            Want::Json(raw) => raw_matches(raw, column),
            Want::Value(value) => column.matches(value),
        }
    }

    /// The value as JSON, for a report.
    pub fn value(&self) -> Value {
        match self {
            Want::Null => Value::Null,
            Want::Int(i) => Value::from(*i),
            Want::Text(text) => Value::from(*text),
            Want::Json(raw) => scalar(raw),
            Want::Value(value) => value.clone(),
        }
    }

    /// Whether two wanted values are the same value.
    fn same(&self, other: &Want<'_>) -> bool {
        match (self, other) {
            (Want::Text(a), Want::Text(b)) | (Want::Json(a), Want::Json(b)) => a == b,
            (Want::Int(i), Want::Json(raw)) | (Want::Json(raw), Want::Int(i)) => {
                raw_matches(raw, Column::Integer(*i))
            }
            (Want::Text(text), Want::Json(raw)) | (Want::Json(raw), Want::Text(text)) => {
                raw_matches(raw, Column::Text(text))
            }
            (a, b) => a.value() == b.value(),
        }
    }

    /// The text of a string value, borrowed when it can be.
    pub fn as_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Want::Text(text) => std::borrow::Cow::Borrowed(text),
            Want::Json(raw) if raw.len() >= 2 && !raw.contains('\\') && raw.starts_with('"') => {
                std::borrow::Cow::Borrowed(&raw[1..raw.len() - 1])
            }
            other => std::borrow::Cow::Owned(other.text()),
        }
    }

    /// The value as plain text, for messages and keys.
    fn text(&self) -> String {
        cell_text(&self.value())
    }
}

/// A table of the projection: its name, the columns compared (in the
/// order the store reads them), and the column holding the key it is
/// grouped by.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    pub name: &'static str,
    pub columns: &'static [&'static str],
    pub key: usize,
}

pub const JOURNAL: Table = Table {
    name: "journal",
    columns: &["seq", "kind", "op_id", "entry", "prev_hash", "hash"],
    key: 2,
};
pub const OPERATIONS: Table = Table {
    name: "operations",
    columns: &[
        "op_id",
        "kind",
        "action_kind",
        "payload",
        "state",
        "version",
        "compensates_effect_id",
        "compensates_op_id",
        "confirmed_effect_id",
        "receiver",
        "created_at",
        "updated_at",
        "dispatch_count",
        "last_dispatched_at",
        "latest_observation",
        "latest_verdict",
        "escalation",
        "receiver_id",
        "contradiction",
        "surplus_effect_ids",
    ],
    key: 0,
};
pub const DISPATCH_LOG: Table = Table {
    name: "dispatch_log",
    columns: &["op_id", "from_version"],
    key: 0,
};
pub const EVIDENCE: Table = Table {
    name: "evidence",
    columns: &[
        "seq",
        "op_id",
        "source",
        "reviewer",
        "decision",
        "verdict",
        "snapshot",
        "from_version",
        "to_version",
        "effect_id",
        "receiver",
        "receiver_describe_sha256",
        "response_sha256",
        "journal_seq",
        "recorded_at",
        "receiver_id",
        "receiver_version",
        "policy",
        "close_seq",
    ],
    key: 1,
};
pub const APPROVALS: Table = Table {
    name: "compensation_approvals",
    columns: &[
        "original_op_id",
        "effect_id",
        "approved_version",
        "approver",
        "compensation_op_id",
        "action_kind",
        "payload",
    ],
    key: 4,
};
pub const CLOSES: Table = Table {
    name: "closes",
    columns: &[
        "op_id",
        "receiver",
        "authorized_by",
        "journal_seq",
        "closed_at",
    ],
    key: 0,
};
pub const OBSERVATIONS: Table = Table {
    name: "observations",
    columns: &[
        "seq",
        "op_id",
        "receiver",
        "observed_by",
        "observed_at",
        "verdict",
        "complete",
        "authoritative",
        "closed",
        "matches",
        "receiver_describe_sha256",
        "response_sha256",
    ],
    key: 1,
};
pub const NOTES: Table = Table {
    name: "notes",
    columns: &["seq", "op_id", "noted_by", "noted_at", "text"],
    key: 1,
};
pub const CLOSE_REQUESTS: Table = Table {
    name: "close_requests",
    columns: &["seq", "op_id", "receiver", "authorized_by", "requested_at"],
    key: 1,
};
pub const CALL_FAILURES: Table = Table {
    name: "call_failures",
    columns: &[
        "seq",
        "op_id",
        "verb",
        "receiver",
        "kind",
        "detail",
        "exit_code",
        "stderr",
        "failed_at",
    ],
    key: 1,
};
pub const ACKNOWLEDGEMENTS: Table = Table {
    name: "acknowledgements",
    columns: &[
        "seq",
        "op_id",
        "acknowledged_by",
        "acknowledged_at",
        "reason",
    ],
    key: 1,
};
pub const ESCALATIONS: Table = Table {
    name: "escalations",
    columns: &["seq", "op_id", "action", "acted_by", "acted_at", "reason"],
    key: 1,
};
pub const RECEIVERS: Table = Table {
    name: "receivers",
    columns: &[
        "name",
        "program",
        "args",
        "timeout_ms",
        "describe",
        "describe_sha256",
        "builtin",
        "env",
        "id",
        "version",
    ],
    key: 0,
};
pub const ROUTES: Table = Table {
    name: "routes",
    columns: &["action_kind", "receiver"],
    key: 0,
};
/// The compensations whose route is not their original effect's (SPEC
/// 12: routes are fixed), read with [`COMPENSATION_ROUTES_WHERE`]: an
/// original that names no registration (prepared before schema 6, routed
/// by name) is left out.
pub const COMPENSATION_ROUTES: Table = Table {
    name: "operations c JOIN operations o ON o.op_id = c.compensates_op_id",
    columns: &[
        "c.op_id",
        "c.receiver",
        "c.receiver_id",
        "o.op_id",
        "o.receiver",
        "o.receiver_id",
    ],
    key: 0,
};

/// The condition and order of [`COMPENSATION_ROUTES`].
pub const COMPENSATION_ROUTES_WHERE: &str = "WHERE o.receiver_id IS NOT NULL
    AND (c.receiver_id IS NULL OR c.receiver_id <> o.receiver_id OR c.receiver <> o.receiver)
    ORDER BY c.op_id";

/// Each compensation [`COMPENSATION_ROUTES`] found, as a mismatch of the
/// field `route` naming it.
pub fn compensation_routes(rows: &[Row], out: &mut Vec<Mismatch>) {
    for row in rows {
        let cell = |i: usize| cell_text(&row.get(i).value());
        out.push(Mismatch {
            op_id: Some(cell(0)),
            field: "route".into(),
            journal: Value::from(format!(
                "a compensation goes to its original effect's registration: {} {} of {}",
                cell(4),
                cell(5),
                cell(3)
            )),
            table: Value::from(format!("{} {}", cell(1), cell(2))),
        });
    }
}

/// The approvals that compensate an effect other than their original's
/// confirmed one, read with [`COMPENSATED_EFFECTS_WHERE`]: each must name a
/// surplus effect of a kept duplicate (SPEC 14).
pub const COMPENSATED_EFFECTS: Table = Table {
    name: "compensation_approvals a JOIN operations o ON o.op_id = a.original_op_id",
    columns: &[
        "a.compensation_op_id",
        "a.effect_id",
        "o.op_id",
        "o.confirmed_effect_id",
        "o.surplus_effect_ids",
    ],
    key: 0,
};

/// The condition and order of [`COMPENSATED_EFFECTS`].
pub const COMPENSATED_EFFECTS_WHERE: &str = "WHERE o.confirmed_effect_id IS NULL
    OR a.effect_id <> o.confirmed_effect_id ORDER BY a.compensation_op_id";

/// Each approval [`COMPENSATED_EFFECTS`] found that compensates neither
/// its original's confirmed effect nor one of its surplus, as a mismatch
/// of the field `effect_id` naming the compensation.
pub fn compensated_effects(rows: &[Row], out: &mut Vec<Mismatch>) {
    for row in rows {
        let cell = |i: usize| cell_text(&row.get(i).value());
        let surplus = cell(4);
        if !in_surplus(&Want::Text(&surplus), &cell(1)) {
            out.push(Mismatch {
                op_id: Some(cell(0)),
                field: "effect_id".into(),
                journal: Value::from(format!(
                    "a compensation approves the confirmed effect {} of {} or one of its \
                     surplus ({})",
                    cell(3),
                    cell(2),
                    cell(4)
                )),
                table: Value::from(cell(1)),
            });
        }
    }
}

pub const STATE_COUNTS: Table = Table {
    name: "state_counts",
    columns: &["state", "n"],
    key: 0,
};

// Column positions the replay writes to.
pub(super) const OP_STATE: usize = 4;
const OP_ACTION_KIND: usize = 2;
const OP_PAYLOAD: usize = 3;
const OP_COMPENSATES: usize = 6;
const OP_VERSION: usize = 5;
const OP_CONFIRMED: usize = 8;
const OP_UPDATED_AT: usize = 11;
const OP_DISPATCH_COUNT: usize = 12;
const OP_LAST_DISPATCHED_AT: usize = 13;
const OP_LATEST_OBSERVATION: usize = 14;
const OP_LATEST_VERDICT: usize = 15;
const OP_ESCALATION: usize = 16;
const OP_CONTRADICTION: usize = 18;
const OP_SURPLUS: usize = 19;
const EVIDENCE_SEQ: usize = 0;
const EVIDENCE_DECISION: usize = 4;
const EVIDENCE_TO_VERSION: usize = 8;

/// One place where a table disagrees with the journal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    /// The operation, or `None` for receivers, routes and state counts.
    pub op_id: Option<String>,
    /// The column (`state`, `evidence[0].effect_id`), or the row when one
    /// side has no such row (`operation`, `closes[1]`), or `journal` when
    /// the journal itself describes something impossible.
    pub field: String,
    /// What the journal says: a value, a whole row, or null.
    pub journal: Value,
    /// What the table holds: a value, a whole row, or null.
    pub table: Value,
}

/// An entry read for replay: its fields as slices of the stored text.
#[derive(Debug, Clone)]
pub struct ParsedEntry<'a> {
    pub seq: i64,
    pub kind: EntryKind,
    pub fields: Members<'a>,
    /// The time of an entry written before an upgrade from schema 4,
    /// which has no `at` (`crate::audit::Upgraded`).
    pub time_if_untimed: Option<String>,
}

/// The members of a JSON object as slices of its text, in their order: an
/// entry has a dozen at most, so a list is faster than any map. A name
/// given twice makes the entry unreadable.
#[derive(Debug, Clone, Default)]
pub struct Members<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'a> Members<'a> {
    pub(super) fn find(&self, name: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                let mut members: Vec<(&str, &RawValue)> = Vec::with_capacity(16);
                while let Some(member) = map.next_entry::<&'de str, &'de RawValue>()? {
                    // A name given twice means what its reader decides (SPEC
                    // 8 rule 7); the outbox never writes one.
                    if members.iter().any(|(name, _)| *name == member.0) {
                        return Err(serde::de::Error::custom("a duplicate member"));
                    }
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl<'a> ParsedEntry<'a> {
    /// Whether the entry carries no `at`: one written before an upgrade
    /// from schema 4.
    pub fn is_untimed(&self) -> bool {
        self.fields.find("at").is_none()
    }

    /// A field's value (null when it is absent).
    fn get(&self, field: &str) -> Want<'a> {
        self.fields
            .find(field)
            .map_or(Want::Null, |raw| Want::Json(raw.get()))
    }

    /// The time of the act: its `at`, or for an entry written before an
    /// upgrade, the upgrade's time.
    fn at(&self) -> Want<'a> {
        match (self.fields.find("at"), &self.time_if_untimed) {
            (Some(raw), _) => Want::Json(raw.get()),
            (None, Some(time)) => Want::Value(Value::from(time.as_str())),
            (None, None) => Want::Null,
        }
    }

    /// A boolean field as its column holds it: 1 or 0 (anything else, as
    /// it is, so that it matches nothing a column holds).
    fn flag(&self, field: &str) -> Want<'a> {
        match self.get(field) {
            Want::Json("true") => Want::Int(1),
            Want::Json("false") => Want::Int(0),
            other => other,
        }
    }

    /// A field that holds JSON, as the text its column holds: the slice of
    /// the entry, which the outbox wrote as canonical JSON, so it is the
    /// canonical text of the value.
    fn text_of(&self, field: &str) -> Want<'a> {
        self.fields
            .find(field)
            .map_or(Want::Null, |raw| Want::Text(raw.get()))
    }
}

/// A JSON value from its text, which the entry's parse already checked:
/// the common scalars without a second parse.
fn scalar(raw: &str) -> Value {
    match raw.as_bytes() {
        b"null" => Value::Null,
        [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => Value::from(&raw[1..raw.len() - 1]),
        _ => serde_json::from_str(raw).unwrap_or(Value::Null),
    }
}

/// Whether a column holds the value of this JSON text; the common cases
/// (a plain string, an integer, null) without building the value.
fn raw_matches(raw: &str, column: Column<'_>) -> bool {
    match (raw.as_bytes(), column) {
        (b"null", column) => column == Column::Null,
        ([b'"', inner @ .., b'"'], Column::Text(text)) if !inner.contains(&b'\\') => {
            inner == text.as_bytes()
        }
        (_, Column::Integer(i)) if raw.bytes().all(|b| b.is_ascii_digit() || b == b'-') => {
            raw.parse() == Ok(i)
        }
        _ => column.matches(&scalar(raw)),
    }
}

/// Reads a journal row (the [`JOURNAL`] columns) for replay. Its hash must
/// be that of its `prev_hash` and its entry (the other half of a link; the
/// walk checks that entries follow each other), and its entry a JSON
/// object whose `seq`, `kind` and `op_id` are the row's: the columns only
/// index the entry, which the hash covers, so a column edited on its own
/// is a broken link like an edited entry. (Member names with escapes,
/// which the outbox never writes, make an entry unreadable.)
pub fn parse_entry(row: &Row) -> Result<ParsedEntry<'_>, BrokenLink> {
    let seq = match row.get(0) {
        Column::Integer(seq) => seq,
        _ => 0,
    };
    let broken = |reason: String| BrokenLink {
        index: u64::try_from(seq - 1).unwrap_or(0),
        seq,
        reason,
    };
    let (Column::Text(text), Column::Text(prev), Column::Text(hash)) =
        (row.get(3), row.get(4), row.get(5))
    else {
        return Err(broken(
            "the entry or its hashes are not text: it was edited".into(),
        ));
    };
    if link_hash(prev, text) != hash {
        return Err(broken(
            "hash does not match the entry's content: the entry was edited".into(),
        ));
    }
    let fields: Members<'_> = serde_json::from_str(text).map_err(|_| {
        broken("the entry is not a JSON object with distinct members: it was edited".into())
    })?;
    for (i, column) in ["seq", "kind", "op_id"].into_iter().enumerate() {
        let stored = fields.find(column).map_or("null", |raw| raw.get());
        if !raw_matches(stored, row.get(i)) {
            return Err(broken(format!(
                "the {column} column disagrees with the entry: it was edited"
            )));
        }
    }
    let kind = match row.get(1) {
        Column::Text(kind) => EntryKind::parse(kind),
        _ => None,
    }
    .ok_or_else(|| broken("the entry's kind is not a kind of entry".into()))?;
    Ok(ParsedEntry {
        seq,
        kind,
        fields,
        time_if_untimed: None,
    })
}

/// What one operation's entries say its rows must be.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Projected<'a> {
    pub operation: Vec<Expected<'a>>,
    pub dispatches: Vec<Expected<'a>>,
    pub evidence: Vec<Expected<'a>>,
    pub approvals: Vec<Expected<'a>>,
    pub closes: Vec<Expected<'a>>,
    pub observations: Vec<Expected<'a>>,
    pub notes: Vec<Expected<'a>>,
    pub acknowledgements: Vec<Expected<'a>>,
    pub call_failures: Vec<Expected<'a>>,
    pub close_requests: Vec<Expected<'a>>,
    pub escalations: Vec<Expected<'a>>,
}

/// What the tables hold for one operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpTables {
    pub operation: Vec<Row>,
    pub dispatches: Vec<Row>,
    pub evidence: Vec<Row>,
    pub approvals: Vec<Row>,
    pub closes: Vec<Row>,
    pub observations: Vec<Row>,
    pub notes: Vec<Row>,
    pub acknowledgements: Vec<Row>,
    pub call_failures: Vec<Row>,
    pub close_requests: Vec<Row>,
    pub escalations: Vec<Row>,
}

/// Replays one operation's entries, in `seq` order.
struct Replay<'a, 'r> {
    op_id: &'a str,
    projected: Projected<'a>,
    problems: Vec<Mismatch>,
    /// The role that wrote the operation's `dispatched` entry (null on a
    /// workspace directory), once it has one.
    dispatched_by: Option<Want<'a>>,
    /// Whether its dispatch has had its outcome: a receipt or a failed
    /// `apply`.
    answered: bool,
    /// Whether a close of it was requested, and the closes recorded (SPEC
    /// 12: a closed snapshot is a recorded close).
    close_requested: bool,
    closes: Vec<RecordedClose>,
    /// The last entry an older schema wrote (0 for none): its closes and
    /// decisions predate that rule.
    older_through: i64,
    /// The registration each receiver's name held when an upgrade fixed
    /// the routes of operations prepared before schema 6 ([`FixedRoutes`]).
    fixed_routes: &'r FixedRoutes,
}

/// The registration (its id) each receiver's name held when a workspace's
/// upgrade gave every operation prepared before schema 6, whose `prepared`
/// entry names no registration, the one its name held then (SPEC 12,
/// "Routes are fixed"); empty where no upgrade did (such an operation
/// then names none).
pub type FixedRoutes = BTreeMap<String, i64>;

/// [`FixedRoutes`] from the entries that name no operation, replayed
/// through `through` (the last entry the upgrade that fixed them wrote).
pub fn fixed_routes(entries: &[ParsedEntry<'_>], through: i64) -> FixedRoutes {
    let mut held = FixedRoutes::new();
    for e in entries.iter().filter(|e| e.seq <= through) {
        let name = e.get("name").text();
        match e.kind {
            // A registration's identity is the seq of its entry.
            EntryKind::ReceiverRegistered => {
                held.insert(name, e.seq);
            }
            EntryKind::ReceiverRemoved => {
                held.remove(&name);
            }
            _ => {}
        }
    }
    held
}

impl<'a, 'r> Replay<'a, 'r> {
    /// The registration a `prepared` or `approved` entry routed its
    /// operation to: the one it names, else (prepared before schema 6)
    /// the one its receiver's name held when the routes were fixed.
    fn route_of(&self, e: &ParsedEntry<'a>) -> Want<'a> {
        if e.fields.find("receiver_id").is_some() {
            return e.get("receiver_id");
        }
        match self.fixed_routes.get(&e.get("receiver").text()) {
            Some(id) => Want::Int(*id),
            None => Want::Null,
        }
    }

    fn apply(&mut self, e: &ParsedEntry<'a>) {
        let op_id = Want::Text(self.op_id);
        match e.kind {
            EntryKind::Prepared => self.create(e),
            EntryKind::Approved => {
                self.create(e);
                self.projected.approvals.push(vec![
                    e.get("original_op_id"),
                    e.get("effect_id"),
                    e.get("approved_version"),
                    e.get("approver"),
                    op_id,
                    e.get("action_kind"),
                    e.text_of("payload"),
                ]);
            }
            EntryKind::Dispatched => self.dispatched(e),
            EntryKind::Receipt if e.get("late").value() == Value::Bool(true) => {
                self.check_receipt(e);
                self.check_late(e);
                self.triage(e);
            }
            EntryKind::Receipt | EntryKind::Decided => self.decided(e),
            EntryKind::Closed => {
                self.check_close(e);
                self.projected.closes.push(vec![
                    op_id,
                    e.get("receiver"),
                    e.get("authorized_by"),
                    Want::Int(e.seq),
                    e.at(),
                ])
            }
            EntryKind::CloseRequested => {
                self.close_requested = true;
                self.projected.close_requests.push(vec![
                    Want::Int(e.seq),
                    op_id,
                    e.get("receiver"),
                    e.get("authorized_by"),
                    e.at(),
                ])
            }
            EntryKind::CallFailed => {
                if e.get("verb").as_text() == "apply" && self.dispatched_by.is_some() {
                    self.answered = true;
                }
                self.call_failed(e);
            }
            EntryKind::Observed
            | EntryKind::Acknowledged
            | EntryKind::Noted
            | EntryKind::Escalated
            | EntryKind::Deescalated => {
                self.triage(e);
            }
            EntryKind::ReceiverRegistered
            | EntryKind::ReceiverUpdated
            | EntryKind::ReceiverRemoved => {
                self.problem(e, "an act on a receiver names an operation".into());
            }
            EntryKind::Upgraded | EntryKind::Settings => self.problem(
                e,
                "an act on the outbox's schema or settings names an operation".into(),
            ),
        }
    }

    /// A receipt or a decision: checked, the move out of `unknown` (which
    /// clears the escalation marker and sets a kept duplicate's surplus,
    /// SPEC 14, once), and its evidence row.
    fn decided(&mut self, e: &ParsedEntry<'a>) {
        if e.kind == EntryKind::Receipt {
            self.check_receipt(e);
        }
        self.check_decision(e);
        self.check_backed(e);
        if let Some(op) = self.transition(e, "unknown", e.get("decision"), e.get("effect_id")) {
            op[OP_ESCALATION] = Want::Null;
            op[OP_SURPLUS] = e.text_of("surplus_effect_ids");
        }
        self.projected.evidence.push(evidence_row(self.op_id, e));
    }

    /// The dispatch: `prepared` to `unknown`, counted, its log row, and
    /// the role that wrote it (the one its receipt must name).
    fn dispatched(&mut self, e: &ParsedEntry<'a>) {
        if let Some(op) = self.transition(e, "prepared", Want::Text("unknown"), Want::Null) {
            let count = match op[OP_DISPATCH_COUNT] {
                Want::Int(n) => n,
                _ => 0,
            };
            op[OP_DISPATCH_COUNT] = Want::Int(count + 1);
            op[OP_LAST_DISPATCHED_AT] = e.at();
        }
        let dispatch = vec![Want::Text(self.op_id), e.get("from_version")];
        self.projected.dispatches.push(dispatch);
        self.dispatched_by.get_or_insert(e.get("role"));
    }

    /// A receiver call that gave no usable answer: its row.
    fn call_failed(&mut self, e: &ParsedEntry<'a>) {
        self.projected.call_failures.push(vec![
            Want::Int(e.seq),
            Want::Text(self.op_id),
            e.get("verb"),
            e.get("receiver"),
            e.get("failure"),
            e.get("detail"),
            e.get("exit_code"),
            e.get("stderr"),
            e.at(),
        ]);
    }

    /// SPEC 12: a receipt answers the operation's one dispatch, as its
    /// first outcome (no receipt and no failed `apply` before it), written
    /// by the role that dispatched it; anything else is a mismatch of the
    /// field `receipt`.
    fn check_receipt(&mut self, e: &ParsedEntry<'a>) {
        let why = match &self.dispatched_by {
            None => Some("it answers no dispatch".to_string()),
            Some(_) if self.answered => {
                Some("its dispatch had its outcome already (a receipt or a failed apply)".into())
            }
            Some(by) if !by.same(&e.get("role")) => Some(format!(
                "it is written by {}, and the dispatch by {}",
                e.get("role").text(),
                by.text()
            )),
            Some(_) => None,
        };
        self.answered = true;
        if let Some(why) = why {
            self.rule(e, "receipt", why);
        }
    }

    /// SPEC 12: a late receipt reaches an operation already decided and
    /// changes no state; it says `contradicts: true` exactly when it
    /// contradicts the decision while no marker is up (section 9's rule
    /// for a read of one match: after `not_applied` always, after
    /// `confirmed` when its effect is not the confirmed one).
    fn check_late(&mut self, e: &ParsedEntry<'a>) {
        let Some(op) = self.projected.operation.first() else {
            return;
        };
        let state = op[OP_STATE].as_text().into_owned();
        let expected = match state.as_str() {
            "not_applied" => true,
            // A kept duplicate's surplus effect is no contradiction (SPEC 14).
            "confirmed" => {
                !op[OP_CONFIRMED].same(&e.get("effect_id"))
                    && !in_surplus(&op[OP_SURPLUS], &e.get("effect_id").as_text())
            }
            _ => {
                return self.rule(
                    e,
                    "receipt",
                    format!("it is late, and the operation is {state}"),
                )
            }
        } && op[OP_CONTRADICTION] == Want::Null;
        let says = e.get("contradicts").value() == Value::Bool(true);
        if says != expected {
            let why = format!(
                "it says contradicts: {says}, and on the {state} operation it {}",
                if expected { "contradicts" } else { "does not" }
            );
            self.rule(e, "contradicts", why);
        }
    }

    /// An act of triage: a row of its own table, and for an observation or
    /// an escalation the operation's denormalized columns.
    fn triage(&mut self, e: &ParsedEntry<'a>) {
        let Some(op) = self.projected.operation.first_mut() else {
            return self.problem(e, "it comes before the operation was prepared".into());
        };
        let (id, seq) = (Want::Text(self.op_id), Want::Int(e.seq));
        let mut why: Option<&str> = None;
        match e.kind {
            EntryKind::Observed | EntryKind::Receipt => {
                // The read that contradicts the final decision raises the
                // marker, when none is up (its entry says so).
                if e.get("contradicts").value() == Value::Bool(true) {
                    if op[OP_CONTRADICTION] != Want::Null {
                        why = Some("it marks a contradiction while one is marked");
                    }
                    op[OP_CONTRADICTION] = seq.clone();
                }
                op[OP_LATEST_OBSERVATION] = seq.clone();
                op[OP_LATEST_VERDICT] = e.get("verdict");
                self.projected.observations.push(vec![
                    seq,
                    id,
                    e.get("receiver"),
                    e.get("observed_by"),
                    e.at(),
                    e.get("verdict"),
                    e.flag("complete"),
                    e.flag("authoritative"),
                    e.flag("closed"),
                    e.get("matches"),
                    e.get("receiver_describe_sha256"),
                    e.get("response_sha256"),
                ]);
            }
            EntryKind::Acknowledged => {
                if op[OP_CONTRADICTION] == Want::Null {
                    why = Some("it acknowledges a contradiction that is not marked");
                }
                op[OP_CONTRADICTION] = Want::Null;
                self.projected.acknowledgements.push(vec![
                    seq,
                    id,
                    e.get("by"),
                    e.at(),
                    e.get("reason"),
                ])
            }
            EntryKind::Noted => {
                self.projected
                    .notes
                    .push(vec![seq, id, e.get("by"), e.at(), e.get("text")])
            }
            _ => {
                let escalate = e.kind == EntryKind::Escalated;
                // `check_lost_escalation`: only removing its receiver as
                // lost escalates a prepared operation.
                if escalate
                    && op[OP_STATE].same(&Want::Text("prepared"))
                    && e.get("lost").value() != Value::Bool(true)
                {
                    why = Some(
                        "it escalates a prepared operation, which only removing its \
                         receiver as lost does",
                    );
                }
                op[OP_ESCALATION] = if escalate { seq.clone() } else { Want::Null };
                let action = if escalate { "escalate" } else { "deescalate" };
                self.projected.escalations.push(vec![
                    seq,
                    id,
                    Want::Text(action),
                    e.get("by"),
                    e.at(),
                    e.get("reason"),
                ]);
            }
        }
        if let Some(why) = why {
            self.problem(e, why.into());
        }
    }

    fn create(&mut self, e: &ParsedEntry<'a>) {
        if !self.projected.operation.is_empty() {
            return self.problem(e, "it prepares an operation that exists".into());
        }
        self.projected.operation.push(vec![
            Want::Text(self.op_id),
            e.get("op_kind"),
            e.get("action_kind"),
            e.text_of("payload"),
            Want::Text("prepared"),
            Want::Int(1),
            e.get("compensates_effect_id"),
            e.get("compensates_op_id"),
            Want::Null,
            e.get("receiver"),
            e.at(),
            e.at(),
            Want::Int(0),
            Want::Null,
            Want::Null,
            Want::Null,
            Want::Null,
            // The registration it was routed to (before schema 6, the
            // one its name held when an upgrade fixed the routes).
            self.route_of(e),
            Want::Null,
            Want::Null,
        ]);
    }

    /// A state change from `from` at the entry's `from_version` to `to` at
    /// its `to_version`, at the entry's time, naming the confirmed effect
    /// when there is one. Returns the operation's row when it applied.
    fn transition(
        &mut self,
        e: &ParsedEntry<'a>,
        from: &str,
        to: Want<'a>,
        effect_id: Want<'a>,
    ) -> Option<&mut Expected<'a>> {
        let Some(op) = self.projected.operation.first() else {
            self.problem(e, "it comes before the operation was prepared".into());
            return None;
        };
        let from_version = e.get("from_version");
        if !op[OP_STATE].same(&Want::Text(from)) || !op[OP_VERSION].same(&from_version) {
            let at = format!(
                "{} at version {}",
                op[OP_STATE].text(),
                op[OP_VERSION].text()
            );
            self.problem(
                e,
                format!(
                    "it changes the operation from {from} at version {}, but the journal has \
                     it {at}",
                    from_version.text()
                ),
            );
            return None;
        }
        let op = &mut self.projected.operation[0];
        op[OP_STATE] = to;
        op[OP_VERSION] = e.get("to_version");
        op[OP_UPDATED_AT] = e.at();
        if !effect_id.same(&Want::Null) {
            op[OP_CONFIRMED] = effect_id;
        }
        Some(op)
    }

    /// A decision must rest on evidence that supports it, which no row can
    /// show. A `decided` entry (a person's or a policy's; a receipt is the
    /// receiver's word, not a classified snapshot) is held to the rules the
    /// store applied when it recorded it: its snapshot, classified again
    /// against the operation as the journal prepared it, must support its
    /// decision ([`check_evidence`]), and a policy's decision must be the
    /// one that policy takes on it ([`check_policy_review`]); the verdict
    /// and the effect it records must be the ones the rules give. So
    /// `verify` finds a decision its snapshot does not support even when
    /// every row agrees with its entry.
    fn check_decision(&mut self, e: &ParsedEntry<'a>) {
        let source = EvidenceSource::parse(&e.get("source").as_text());
        if source.map(EntryKind::of_evidence) != Some(e.kind) {
            let why = format!(
                "its source {} is not a {} entry's",
                e.get("source").text(),
                e.kind
            );
            return self.rule(e, "source", why);
        }
        let policy = match source {
            Some(EvidenceSource::Policy) => match Policy::parse(&e.get("policy").as_text()) {
                Some(policy) => Some(policy),
                None => {
                    let why = format!(
                        "it names no policy recon knows ({})",
                        e.get("policy").text()
                    );
                    return self.rule(e, "policy", why);
                }
            },
            Some(EvidenceSource::Review) => None,
            // A receipt (the only source left: an unreadable one is not
            // the entry's kind's) is not judged.
            Some(EvidenceSource::Receipt) | None => return,
        };
        let refused = if policy.is_some() {
            "policy"
        } else {
            "decision"
        };
        let (verdict, effect) = match self.judge(e, policy) {
            Ok(judged) => judged,
            Err(why) => return self.rule(e, refused, why),
        };
        let recorded = e.get("verdict");
        if !recorded.same(&Want::Null) && recorded.as_text() != verdict.as_str() {
            let why = format!(
                "it records the verdict {}, but its snapshot's verdict is {verdict}",
                recorded.text()
            );
            self.rule(e, "verdict", why);
        }
        let named = e.get("effect_id");
        if !named.same(&effect.as_deref().map_or(Want::Null, Want::Text)) {
            let why = format!(
                "it names the effect {}, but its decision on its snapshot confirms {}",
                named.text(),
                effect.as_deref().unwrap_or("none")
            );
            self.rule(e, "effect_id", why);
        }
    }

    /// The verdict the rules give the entry's snapshot and the effect its
    /// decision confirms, or why the rules refuse its decision.
    fn judge(
        &self,
        e: &ParsedEntry<'a>,
        policy: Option<Policy>,
    ) -> Result<(Verdict, Option<String>), String> {
        let decision = Decision::parse(&e.get("decision").as_text())
            .ok_or_else(|| "its decision is unreadable".to_string())?;
        let snapshot: Snapshot = parse_json(&e.text_of("snapshot").as_text())
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| "its snapshot is unreadable".to_string())?;
        let op = self
            .projected
            .operation
            .first()
            .ok_or_else(|| "it comes before the operation was prepared".to_string())?;
        let payload = parse_json(&op[OP_PAYLOAD].as_text())
            .map_err(|_| "the operation's payload is unreadable".to_string())?;
        let compensates = match op[OP_COMPENSATES].value() {
            Value::Null => None,
            other => Some(cell_text(&other)),
        };
        let action_kind = op[OP_ACTION_KIND].as_text();
        let scope = Scope {
            action_kind: &action_kind,
            payload: &payload,
            compensates_effect_id: compensates.as_deref(),
        };
        let reviewer = e.get("reviewer").as_text().into_owned();
        let kept = e.get("effect_id").as_text().into_owned();
        let review = Review {
            // An effect named on a read of several matches is a kept one.
            keep: (snapshot.matches.len() > 1 && decision == Decision::Confirmed)
                .then_some(kept.as_str()),
            op_id: self.op_id,
            payload: &payload,
            reviewer: &reviewer,
            decision,
            snapshot: &snapshot,
            // Not judged here: the transition holds the entry to the
            // operation's version.
            expected_version: e.get("from_version").value().as_i64().unwrap_or(0),
        };
        let verdict = check_evidence(self.op_id, scope, &review).map_err(|r| r.to_string())?;
        if let Some(policy) = policy {
            check_policy_review(policy, &review, verdict).map_err(|_| {
                let closed = if snapshot.closed {
                    "closed"
                } else {
                    "not closed"
                };
                format!(
                    "policy {policy} does not decide {decision} on a snapshot that is {closed} \
                     with the verdict {verdict}"
                )
            })?;
        }
        let surplus = review.surplus_effects();
        let recorded = e.text_of("surplus_effect_ids");
        let want = (!surplus.is_empty()).then(|| canonical_json(&Value::from(surplus)));
        if !recorded.same(&want.as_deref().map_or(Want::Null, Want::Text)) {
            return Err(format!(
                "it records the surplus {}, but kept plus surplus must be its snapshot's \
                 matches: {}",
                recorded.text(),
                want.as_deref().unwrap_or("none")
            ));
        }
        Ok((verdict, review.confirmed_effect().map(str::to_string)))
    }

    /// SPEC 12: a `closed` entry follows a `close_requested` of its
    /// operation and names the canonical SHA-256 of the snapshot it
    /// recorded ([`check_recorded_close`]); kept, with that hash when it
    /// holds, for the decisions that rest on it. One an older schema wrote
    /// named no snapshot.
    fn check_close(&mut self, e: &ParsedEntry<'a>) {
        let mut close = RecordedClose {
            seq: e.seq,
            snapshot_sha256: None,
        };
        if e.seq <= self.older_through {
            if e.fields.find("snapshot_sha256").is_some() {
                self.written_since(e, "snapshot_sha256");
            }
        } else {
            let snapshot = e
                .fields
                .find("snapshot")
                .and_then(|raw| parse_json(raw.get()).ok());
            let hash = e.get("snapshot_sha256").as_text().into_owned();
            match check_recorded_close(self.close_requested, snapshot.as_ref(), Some(&hash)) {
                Ok(()) => close.snapshot_sha256 = Some(hash),
                Err(why) => self.rule(e, "closed", why),
            }
        }
        self.closes.push(close);
    }

    /// SPEC 12: evidence whose snapshot says `closed: true` names the
    /// recorded close whose snapshot it carries exactly (`close_seq`,
    /// [`check_close_named`]); other evidence names none. Evidence an
    /// older schema wrote named none.
    fn check_backed(&mut self, e: &ParsedEntry<'a>) {
        if e.seq <= self.older_through {
            if e.fields.find("close_seq").is_some() {
                self.written_since(e, "close_seq");
            }
            return;
        }
        let Ok(snapshot) = parse_json(&e.text_of("snapshot").as_text()) else {
            return self.rule(e, "close_seq", "its snapshot is unreadable".into());
        };
        let named = match e.get("close_seq") {
            Want::Null => None,
            other => match other.value().as_i64() {
                Some(seq) => Some(seq),
                None => return self.rule(e, "close_seq", "it is not an entry's seq".into()),
            },
        };
        if let Err(refused) = check_close_named(self.op_id, &snapshot, named, &self.closes) {
            self.rule(e, "close_seq", refused.to_string());
        }
    }

    /// An entry the outbox says an older schema wrote that carries what
    /// only schema 7 writes (`field`): the mark of where the older entries
    /// end (a workspace file's `older_schema_through_seq`) was moved past
    /// it.
    fn written_since(&mut self, e: &ParsedEntry<'_>, field: &str) {
        let why = format!(
            "it names {field}, which only schema 7 writes, and it is counted among the entries \
             an older schema wrote (through {})",
            self.older_through
        );
        self.rule(e, "older_schema_through_seq", why);
    }

    fn problem(&mut self, e: &ParsedEntry<'_>, why: String) {
        self.rule(e, "journal", why);
    }

    /// An entry the rules refuse, as a mismatch of `field` that names it.
    fn rule(&mut self, e: &ParsedEntry<'_>, field: &str, why: String) {
        self.problems.push(Mismatch {
            op_id: Some(self.op_id.to_string()),
            field: field.into(),
            journal: Value::from(format!("entry {} ({}): {why}", e.seq, e.kind)),
            table: Value::Null,
        });
    }
}

/// Whether `effect_id` is in a projected `surplus_effect_ids` cell.
fn in_surplus(cell: &Want<'_>, effect_id: &str) -> bool {
    match cell {
        Want::Null => false,
        cell => parse_json(&cell.as_text())
            .ok()
            .and_then(|v| v.as_array().cloned())
            .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(effect_id))),
    }
}

fn evidence_row<'a>(op_id: &'a str, e: &ParsedEntry<'a>) -> Expected<'a> {
    vec![
        e.get("evidence_seq"),
        Want::Text(op_id),
        e.get("source"),
        e.get("reviewer"),
        e.get("decision"),
        e.get("verdict"),
        e.text_of("snapshot"),
        e.get("from_version"),
        e.get("to_version"),
        e.get("effect_id"),
        e.get("receiver"),
        e.get("receiver_describe_sha256"),
        e.get("response_sha256"),
        Want::Int(e.seq),
        e.at(),
        e.get("receiver_id"),
        e.get("receiver_version"),
        e.get("policy"),
        e.get("close_seq"),
    ]
}

/// Replays one operation's entries: the rows they call for, and anything
/// impossible in them.
/// `older_through` is the last entry an older schema wrote (0 for none).
pub fn replay_op<'a>(
    op_id: &'a str,
    entries: &[ParsedEntry<'a>],
    older_through: i64,
    fixed_routes: &FixedRoutes,
) -> (Projected<'a>, Vec<Mismatch>) {
    let mut replay = Replay {
        op_id,
        projected: Projected::default(),
        problems: Vec::new(),
        dispatched_by: None,
        answered: false,
        close_requested: false,
        closes: Vec::new(),
        older_through,
        fixed_routes,
    };
    for entry in entries {
        replay.apply(entry);
    }
    (replay.projected, replay.problems)
}

/// A cell as plain text, for messages.
pub fn cell_text(cell: &Value) -> String {
    match cell {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn row_object(table: &Table, values: impl Iterator<Item = Value>) -> Value {
    Value::Object(
        table
            .columns
            .iter()
            .zip(values)
            .map(|(c, v)| ((*c).to_string(), v))
            .collect(),
    )
}

/// Compares rows position by position: a missing row is one mismatch
/// (the whole row against null), a differing column one each.
fn compare_rows(
    table: &Table,
    op_id: Option<&str>,
    label: &dyn Fn(usize) -> String,
    expected: &[Expected<'_>],
    actual: &[Row],
    out: &mut Vec<Mismatch>,
) {
    let mismatch = |field: String, journal: Value, table: Value| Mismatch {
        op_id: op_id.map(str::to_string),
        field,
        journal,
        table,
    };
    for i in 0..expected.len().max(actual.len()) {
        match (expected.get(i), actual.get(i)) {
            (Some(e), Some(a)) => {
                for (c, (column, want)) in table.columns.iter().zip(e).enumerate() {
                    if !want.matches(a.get(c)) {
                        let field = match label(i) {
                            row if row.is_empty() => (*column).to_string(),
                            row => format!("{row}.{column}"),
                        };
                        out.push(mismatch(field, want.value(), a.get(c).value()));
                    }
                }
            }
            (e, a) => {
                let field = match label(i) {
                    row if row.is_empty() => "operation".to_string(),
                    row => row,
                };
                let journal = e.map_or(Value::Null, |e| {
                    row_object(table, e.iter().map(Want::value))
                });
                let stored = a.map_or(Value::Null, |a| {
                    row_object(table, (0..a.len()).map(|c| a.get(c).value()))
                });
                out.push(mismatch(field, journal, stored));
            }
        }
    }
}

/// Compares one operation's projection with its rows.
pub fn compare_op(
    op_id: &str,
    projected: &Projected<'_>,
    tables: &OpTables,
    out: &mut Vec<Mismatch>,
) {
    let id = Some(op_id);
    let indexed = |name: &'static str| move |i: usize| format!("{name}[{i}]");
    compare_rows(
        &OPERATIONS,
        id,
        &|_| String::new(),
        &projected.operation,
        &tables.operation,
        out,
    );
    let (dispatched, logged) = (projected.dispatches.len(), tables.dispatches.len());
    if dispatched != logged {
        out.push(Mismatch {
            op_id: id.map(str::to_string),
            field: "dispatch_count".into(),
            journal: Value::from(dispatched),
            table: Value::from(logged),
        });
    }
    let common = dispatched.min(logged);
    compare_rows(
        &DISPATCH_LOG,
        id,
        &indexed("dispatch_log"),
        &projected.dispatches[..common],
        &tables.dispatches[..common],
        out,
    );
    let tables_and_rows = [
        (&EVIDENCE, "evidence", &projected.evidence, &tables.evidence),
        (
            &APPROVALS,
            "approval",
            &projected.approvals,
            &tables.approvals,
        ),
        (&CLOSES, "closes", &projected.closes, &tables.closes),
        (
            &OBSERVATIONS,
            "observations",
            &projected.observations,
            &tables.observations,
        ),
        (&NOTES, "notes", &projected.notes, &tables.notes),
        (
            &ACKNOWLEDGEMENTS,
            "acknowledgements",
            &projected.acknowledgements,
            &tables.acknowledgements,
        ),
        (
            &CALL_FAILURES,
            "call_failures",
            &projected.call_failures,
            &tables.call_failures,
        ),
        (
            &CLOSE_REQUESTS,
            "close_requests",
            &projected.close_requests,
            &tables.close_requests,
        ),
        (
            &ESCALATIONS,
            "escalations",
            &projected.escalations,
            &tables.escalations,
        ),
    ];
    for (table, name, expected, actual) in tables_and_rows {
        compare_rows(table, id, &indexed(name), expected, actual, out);
    }
}

/// The wave-1 cross-check of the tables alone: an operation that left
/// `unknown` has exactly one evidence row, agreeing with its state and
/// version, and every evidence row belongs to such an operation.
pub fn state_mismatches(op_id: &str, tables: &OpTables, out: &mut Vec<String>) {
    let Some(op) = tables.operation.first() else {
        for row in &tables.evidence {
            out.push(format!(
                "evidence row {} belongs to {op_id}, which is not an operation",
                row.get(EVIDENCE_SEQ).text()
            ));
        }
        return;
    };
    let decided = matches!(op.get(OP_STATE), Column::Text("confirmed" | "not_applied"));
    let agrees = |row: &Row| {
        row.get(EVIDENCE_DECISION) == op.get(OP_STATE)
            && row.get(EVIDENCE_TO_VERSION) == op.get(OP_VERSION)
    };
    let problem = match (decided, tables.evidence.as_slice()) {
        (false, []) => return,
        (true, [row]) if agrees(row) => return,
        (true, [row]) => format!(
            ", but its evidence row {} records otherwise",
            row.get(EVIDENCE_SEQ).text()
        ),
        (true, []) => " but has no evidence row".to_string(),
        (_, rows) => format!(" but has {} evidence rows", rows.len()),
    };
    let (state, version) = (op.get(OP_STATE).text(), op.get(OP_VERSION).text());
    out.push(format!(
        "operation {op_id} is {state} at version {version}{problem}"
    ));
}

/// The columns of a receiver's identity in [`RECEIVERS`].
const RECEIVER_ID: usize = 8;
const RECEIVER_VERSION: usize = 9;

/// Replays the entries that name no operation (receivers registered and
/// removed), in `seq` order: the receivers and routes rows they call for,
/// keyed by name and by action kind.
pub fn replay_receivers<'a>(
    entries: &[ParsedEntry<'a>],
) -> (
    BTreeMap<String, Expected<'a>>,
    BTreeMap<String, Expected<'a>>,
    Vec<Mismatch>,
) {
    let mut receivers = BTreeMap::new();
    let mut routes: BTreeMap<String, Expected<'a>> = BTreeMap::new();
    let mut problems = Vec::new();
    for e in entries {
        let name = e.get("name").text();
        let problem = |why: &str| Mismatch {
            op_id: None,
            field: "journal".into(),
            journal: Value::from(format!("entry {} ({}): {why}", e.seq, e.kind)),
            table: Value::Null,
        };
        match e.kind {
            EntryKind::ReceiverRegistered => {
                let row = vec![
                    e.get("name"),
                    e.get("program"),
                    e.text_of("args"),
                    e.get("timeout_ms"),
                    e.text_of("describe"),
                    e.get("describe_sha256"),
                    // A registration journaled before these fields existed
                    // was an adapter's, with no variables passed.
                    Want::Int(i64::from(e.get("builtin").value() == Value::Bool(true))),
                    match e.text_of("env") {
                        Want::Null => Want::Text("[]"),
                        env => env,
                    },
                    // Its identity is the seq of the entry that registered it.
                    Want::Int(e.seq),
                    Want::Int(1),
                ];
                if receivers.insert(name.clone(), row).is_some() {
                    problems.push(problem("it registers a receiver that is registered"));
                }
                let actions = e.get("actions").value();
                for action in actions.as_array().into_iter().flatten() {
                    let route = vec![
                        Want::Value(action.clone()),
                        Want::Value(name.clone().into()),
                    ];
                    routes.insert(cell_text(action), route);
                }
            }
            EntryKind::ReceiverUpdated => match receivers.get_mut(&name) {
                Some(row) if row[RECEIVER_ID].same(&e.get("id")) => {
                    row[1] = e.get("program");
                    row[2] = e.text_of("args");
                    row[3] = e.get("timeout_ms");
                    row[4] = e.text_of("describe");
                    row[5] = e.get("describe_sha256");
                    row[7] = e.text_of("env");
                    row[RECEIVER_VERSION] = e.get("version");
                }
                Some(_) => problems.push(problem("it updates another registration of the name")),
                None => problems.push(problem("it updates a receiver that is not registered")),
            },
            EntryKind::ReceiverRemoved => {
                if receivers.remove(&name).is_none() {
                    problems.push(problem("it removes a receiver that is not registered"));
                }
                routes.retain(|_, route| !route[1].same(&Want::Text(&name)));
            }
            // The schema's upgrade and the settings (PostgreSQL): no row
            // of their own (`meta` is held to the newest settings by
            // `meta::mismatches`); the chain holds them like every entry.
            EntryKind::Upgraded | EntryKind::Settings => {}
            _ => problems.push(problem("an act on an operation names none")),
        }
    }
    (receivers, routes, problems)
}

/// Compares rows keyed by their first column (receivers by name, routes by
/// action kind), whatever order they come in.
pub fn compare_keyed(
    table: &Table,
    expected: &BTreeMap<String, Expected<'_>>,
    actual: &[Row],
    out: &mut Vec<Mismatch>,
) {
    let actual: BTreeMap<String, &Row> = actual
        .iter()
        .map(|row| (row.get(table.key).text(), row))
        .collect();
    let keys: std::collections::BTreeSet<&String> = expected.keys().chain(actual.keys()).collect();
    for key in keys {
        let e = expected.get(key).map(std::slice::from_ref).unwrap_or(&[]);
        let a = actual
            .get(key)
            .map(|r| vec![(*r).clone()])
            .unwrap_or_default();
        let label = |_: usize| format!("{}[{key}]", table.name);
        compare_rows(table, None, &label, e, &a, out);
    }
}

/// Compares the replayed count of operations per state with the
/// trigger-maintained `state_counts` table.
pub fn compare_counts(expected: &BTreeMap<String, i64>, actual: &[Row], out: &mut Vec<Mismatch>) {
    let expected: BTreeMap<String, Expected<'_>> =
        ["prepared", "unknown", "confirmed", "not_applied"]
            .into_iter()
            .map(|state| {
                let n = expected.get(state).copied().unwrap_or(0);
                (state.to_string(), vec![Want::Text(state), Want::Int(n)])
            })
            .collect();
    compare_keyed(&STATE_COUNTS, &expected, actual, out);
}

/// The settings a `settings` entry names (`None` when one of them is
/// missing or not of its type).
pub(super) fn settings_of(e: &ParsedEntry<'_>) -> Option<crate::audit::Settings> {
    let text = |name: &str| -> Option<String> {
        serde_json::from_str::<String>(e.fields.find(name)?.get()).ok()
    };
    Some(crate::audit::Settings {
        four_eyes: serde_json::from_str::<bool>(e.fields.find("four_eyes")?.get()).ok()?,
        workspace_id: text("workspace_id")?,
        owner: text("owner")?,
        roles_prefix: text("roles_prefix")?,
    })
}
