//! Reading the outbox's rows back as domain values: operations (with their
//! latest observation and escalation marker joined in), evidence,
//! approvals, and the rows of triage (observations, notes, escalations,
//! closes).
//!
//! Each reader takes the columns as stored text first and parses them
//! after the statement has finished, so a malformed row (an edited table)
//! is a typed `Corrupt` error naming the row, never a panic. `verify`
//! does not read through here: it must see a malformed row as it is.
//! Written over [`Db`], for every store.

use super::sql::{Db, Dialect, Row, ToValue};
use crate::domain::{
    Acknowledgement, Approval, CallFailure, CloseEntry, Contradicted, Decision, Escalated,
    EscalationAction, EscalationRecord, EvidenceRecord, EvidenceSource, FailureKind,
    LatestObservation, Note, Observation, Observed, OpKind, OpState, Operation, Policy, Snapshot,
    Timestamp, Triage, Verdict,
};
use crate::error::{Refusal, Result, StoreError};
use serde_json::Value;

/// An operation as the listings read it: the row, its latest observation
/// and its open escalation, joined by their journal seqs. Append `WHERE`,
/// `ORDER BY` and `LIMIT` over `o.` columns.
pub(crate) const OP_SELECT: &str = "SELECT o.op_id, o.kind, o.action_kind, o.payload, o.state, \
     o.version, o.compensates_effect_id, o.compensates_op_id, o.confirmed_effect_id, o.receiver, \
     o.created_at, o.updated_at, o.dispatch_count, o.last_dispatched_at, \
     ob.verdict, ob.observed_at, ob.observed_by, ob.closed, ob.matches, \
     es.acted_by, es.acted_at, es.reason, \
     cx.seq, cx.observed_at, cx.verdict, o.surplus_effect_ids \
     FROM operations o \
     LEFT JOIN observations ob ON ob.seq = o.latest_observation \
     LEFT JOIN escalations es ON es.seq = o.escalation \
     LEFT JOIN observations cx ON cx.seq = o.contradiction";

/// An operation row with its enums, payload and times still as stored.
pub(crate) struct RawOp {
    op_id: String,
    kind: String,
    action_kind: String,
    payload: String,
    state: String,
    version: i64,
    compensates_effect_id: Option<String>,
    compensates_op_id: Option<String>,
    confirmed_effect_id: Option<String>,
    receiver: String,
    created_at: String,
    updated_at: String,
    dispatch_count: i64,
    last_dispatched_at: Option<String>,
    /// verdict, observed_at, observed_by, closed, matches
    observation: Option<(String, String, String, bool, i64)>,
    /// by, at, reason
    escalation: Option<(String, String, String)>,
    /// seq, observed_at, verdict of the contradicting read
    contradiction: Option<(i64, String, String)>,
    /// The surplus of a kept duplicate, as a JSON array (SPEC 14).
    surplus_effect_ids: Option<String>,
}

/// Reads the columns of [`OP_SELECT`].
pub(crate) fn op_row(row: &Row) -> Result<RawOp, StoreError> {
    let observation = match row.get::<Option<String>>(14)? {
        Some(verdict) => Some((
            verdict,
            row.get(15)?,
            row.get(16)?,
            row.get(17)?,
            row.get(18)?,
        )),
        None => None,
    };
    let escalation = match row.get::<Option<String>>(19)? {
        Some(by) => Some((by, row.get(20)?, row.get(21)?)),
        None => None,
    };
    Ok(RawOp {
        op_id: row.get(0)?,
        kind: row.get(1)?,
        action_kind: row.get(2)?,
        payload: row.get(3)?,
        state: row.get(4)?,
        version: row.get(5)?,
        compensates_effect_id: row.get(6)?,
        compensates_op_id: row.get(7)?,
        confirmed_effect_id: row.get(8)?,
        receiver: row.get(9)?,
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
        dispatch_count: row.get(12)?,
        last_dispatched_at: row.get(13)?,
        observation,
        escalation,
        contradiction: match row.get::<Option<i64>>(22)? {
            Some(seq) => Some((seq, row.get(23)?, row.get(24)?)),
            None => None,
        },
        surplus_effect_ids: row.get(25)?,
    })
}

fn time(text: &str, what: &str, of: &str) -> Result<Timestamp, StoreError> {
    Timestamp::parse(text).ok_or_else(|| StoreError::Corrupt(format!("{what} of {of}")))
}

pub(crate) fn parse_op(raw: RawOp) -> Result<Operation, StoreError> {
    let of = format!("operation {}", raw.op_id);
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of {of}"));
    let latest_observation = match raw.observation {
        Some((verdict, at, by, closed, matches)) => Some(LatestObservation {
            verdict: Verdict::parse(&verdict).ok_or_else(|| corrupt("latest verdict"))?,
            observed_at: time(&at, "latest observation time", &of)?,
            observed_by: by,
            closed,
            matches,
        }),
        None => None,
    };
    let escalated = match raw.escalation {
        Some((by, at, reason)) => Some(Escalated {
            by,
            at: time(&at, "escalation time", &of)?,
            reason,
        }),
        None => None,
    };
    let triage = Triage {
        created_at: time(&raw.created_at, "created_at", &of)?,
        updated_at: time(&raw.updated_at, "updated_at", &of)?,
        dispatch_count: raw.dispatch_count,
        last_dispatched_at: match &raw.last_dispatched_at {
            Some(at) => Some(time(at, "last_dispatched_at", &of)?),
            None => None,
        },
        latest_observation,
        escalated,
        contradicted: match raw.contradiction {
            Some((seq, at, verdict)) => Some(Contradicted {
                seq,
                at: time(&at, "contradiction time", &of)?,
                verdict: Verdict::parse(&verdict)
                    .ok_or_else(|| corrupt("contradiction verdict"))?,
            }),
            None => None,
        },
    };
    Ok(Operation {
        surplus_effect_ids: match &raw.surplus_effect_ids {
            Some(text) => serde_json::from_str(text).map_err(|_| corrupt("surplus_effect_ids"))?,
            None => Vec::new(),
        },
        kind: OpKind::parse(&raw.kind).ok_or_else(|| corrupt("kind"))?,
        state: OpState::parse(&raw.state).ok_or_else(|| corrupt("state"))?,
        payload: serde_json::from_str(&raw.payload).map_err(|_| corrupt("payload"))?,
        action_kind: raw.action_kind,
        version: raw.version,
        compensates_effect_id: raw.compensates_effect_id,
        compensates_op_id: raw.compensates_op_id,
        confirmed_effect_id: raw.confirmed_effect_id,
        receiver: raw.receiver,
        op_id: raw.op_id,
        triage,
    })
}

/// Runs a query over [`OP_SELECT`] and parses its rows.
pub(crate) fn query_ops(
    db: &mut dyn Db,
    sql: &str,
    params: &[&dyn ToValue],
) -> Result<Vec<Operation>> {
    let rows = db.query(sql, params, op_row)?;
    Ok(rows
        .into_iter()
        .map(parse_op)
        .collect::<Result<Vec<_>, _>>()?)
}

pub(crate) fn get_op(db: &mut dyn Db, op_id: &str) -> Result<Option<Operation>> {
    let row = db.query_opt(
        &format!("{OP_SELECT} WHERE o.op_id = ?1"),
        &[&op_id],
        op_row,
    )?;
    Ok(row.map(parse_op).transpose()?)
}

pub(crate) fn require_op(db: &mut dyn Db, op_id: &str) -> Result<Operation> {
    get_op(db, op_id)?.ok_or_else(|| Refusal::UnknownOperation(op_id.to_string()).into())
}

pub(crate) const EVIDENCE_COLUMNS: &str = "seq, op_id, source, reviewer, decision, verdict, \
     snapshot, from_version, to_version, effect_id, receiver, receiver_describe_sha256, \
     response_sha256, journal_seq, recorded_at, receiver_id, receiver_version, policy, close_seq";

/// The evidence columns read back, with the hash of each row's journal
/// entry (empty when the entry is missing, which `verify` reports).
pub(crate) const EVIDENCE_READ: &str = "SELECT e.seq, e.op_id, e.source, e.reviewer, \
     e.decision, e.verdict, e.snapshot, e.from_version, e.to_version, e.effect_id, e.receiver, \
     e.receiver_describe_sha256, e.response_sha256, e.journal_seq, COALESCE(j.hash, ''), \
     e.recorded_at, e.receiver_id, e.receiver_version, e.policy, e.close_seq \
     FROM evidence e LEFT JOIN journal j ON j.seq = e.journal_seq";

/// An evidence row with its enums, snapshot and time still as stored
/// text.
pub(crate) struct RawEvidence {
    record: EvidenceRecord,
    source: String,
    decision: String,
    verdict: Option<String>,
    snapshot: String,
    recorded_at: String,
    policy: Option<String>,
}

pub(crate) fn evidence_row(row: &Row) -> Result<RawEvidence, StoreError> {
    Ok(RawEvidence {
        record: EvidenceRecord {
            seq: row.get(0)?,
            op_id: row.get(1)?,
            source: EvidenceSource::Review,
            reviewer: row.get(3)?,
            decision: Decision::Confirmed,
            verdict: None,
            snapshot: Value::Null,
            from_version: row.get(7)?,
            to_version: row.get(8)?,
            effect_id: row.get(9)?,
            surplus_effect_ids: Vec::new(),
            receiver: row.get(10)?,
            receiver_describe_sha256: row.get(11)?,
            response_sha256: row.get(12)?,
            receiver_id: row.get(16)?,
            receiver_version: row.get(17)?,
            policy: None,
            close_seq: row.get(19)?,
            recorded_at: Timestamp::default(),
            journal_seq: row.get(13)?,
            hash: row.get(14)?,
        },
        source: row.get(2)?,
        decision: row.get(4)?,
        verdict: row.get(5)?,
        snapshot: row.get(6)?,
        recorded_at: row.get(15)?,
        policy: row.get(18)?,
    })
}

pub(crate) fn parse_evidence(raw: RawEvidence) -> Result<EvidenceRecord, StoreError> {
    let RawEvidence {
        mut record,
        source,
        decision,
        verdict,
        snapshot,
        recorded_at,
        policy,
    } = raw;
    let of = format!("evidence row {}", record.seq);
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of {of}"));
    record.source = EvidenceSource::parse(&source).ok_or_else(|| corrupt("source"))?;
    record.decision = Decision::parse(&decision).ok_or_else(|| corrupt("decision"))?;
    record.verdict = match verdict {
        Some(v) => Some(Verdict::parse(&v).ok_or_else(|| corrupt("verdict"))?),
        None => None,
    };
    record.snapshot = serde_json::from_str(&snapshot).map_err(|_| corrupt("snapshot"))?;
    record.recorded_at = time(&recorded_at, "recorded_at", &of)?;
    record.policy = match policy {
        Some(p) => Some(Policy::parse(&p).ok_or_else(|| corrupt("policy"))?),
        None => None,
    };
    Ok(record)
}

pub(crate) const APPROVAL_COLUMNS: &str = "original_op_id, effect_id, approved_version, \
     approver, compensation_op_id, action_kind, payload";

fn approval_row(row: &Row) -> Result<(Approval, String), StoreError> {
    Ok((
        Approval {
            reason: None,
            original_op_id: row.get(0)?,
            effect_id: row.get(1)?,
            approved_version: row.get(2)?,
            approver: row.get(3)?,
            compensation_op_id: row.get(4)?,
            action_kind: row.get(5)?,
            payload: Value::Null,
        },
        row.get(6)?,
    ))
}

fn parse_approval((mut approval, payload): (Approval, String)) -> Result<Approval, StoreError> {
    approval.payload = serde_json::from_str(&payload).map_err(|_| {
        StoreError::Corrupt(format!(
            "payload of the approval for {}",
            approval.compensation_op_id
        ))
    })?;
    Ok(approval)
}

/// The approvals whose `column` is `value`, in the order they were
/// recorded.
pub(crate) fn approval_where(db: &mut dyn Db, column: &str, value: &str) -> Result<Vec<Approval>> {
    // The order of recording: SQLite's rowid. PostgreSQL has none; there
    // it is the order of each approval's `approved` entry, which its act
    // appended with it (one per approval, on its compensation's op id).
    let order = match db.dialect() {
        Dialect::Sqlite => "rowid",
        Dialect::Postgres => {
            "(SELECT j.seq FROM journal j \
              WHERE j.op_id = compensation_op_id AND j.kind = 'approved')"
        }
    };
    let rows = db.query(
        &format!(
            "SELECT {APPROVAL_COLUMNS} FROM compensation_approvals WHERE {column} = ?1 \
             ORDER BY {order}"
        ),
        &[&value],
        approval_row,
    )?;
    Ok(rows
        .into_iter()
        .map(parse_approval)
        .collect::<Result<Vec<_>, _>>()?)
}

/// Every row of one operation, oldest first, each read by `read` into
/// stored text and then parsed by `parse`.
fn rows_of<R, T>(
    db: &mut dyn Db,
    sql: &str,
    op_id: &str,
    read: impl FnMut(&Row) -> Result<R, StoreError>,
    parse: impl Fn(R) -> Result<T, StoreError>,
) -> Result<Vec<T>> {
    let raw = db.query(sql, &[&op_id], read)?;
    Ok(raw.into_iter().map(parse).collect::<Result<Vec<T>, _>>()?)
}

/// The part of an `observed` entry that holds its snapshot.
#[derive(serde::Deserialize)]
struct SnapshotOf {
    snapshot: Snapshot,
}

/// An observation row: seq, receiver, verdict, observed_at, observed_by,
/// complete, authoritative, closed, matches, snapshot, and the two hashes.
type RawObservation = (
    (i64, String, String, String, String),
    (bool, bool, bool, i64),
    (String, String, String),
);

pub(crate) fn observations(db: &mut dyn Db, op_id: &str) -> Result<Vec<Observation>> {
    // The snapshot is read from the observation's journal entry.
    let sql = "SELECT o.seq, o.receiver, o.verdict, o.observed_at, o.observed_by, o.complete, \
               o.authoritative, o.closed, o.matches, COALESCE(j.entry, ''), \
               o.receiver_describe_sha256, o.response_sha256 \
               FROM observations o LEFT JOIN journal j ON j.seq = o.seq \
               WHERE o.op_id = ?1 ORDER BY o.seq";
    let read = |r: &Row| -> Result<RawObservation, StoreError> {
        Ok((
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?),
            (r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?),
            (r.get(9)?, r.get(10)?, r.get(11)?),
        ))
    };
    let parse = |((seq, receiver, verdict, at, by), flags, (snapshot, describe, response)): RawObservation| {
        let of = format!("observation {seq}");
        let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of {of}"));
        let (complete, authoritative, closed, matches) = flags;
        Ok(Observation {
            seq,
            seen: Observed {
                op_id: op_id.to_string(),
                receiver,
                verdict: Verdict::parse(&verdict).ok_or_else(|| corrupt("verdict"))?,
                observed_at: time(&at, "observed_at", &of)?,
                observed_by: by,
                complete,
                authoritative,
                closed,
                matches,
            },
            snapshot: serde_json::from_str::<SnapshotOf>(&snapshot)
                .map_err(|_| corrupt("snapshot"))?
                .snapshot,
            receiver_describe_sha256: describe,
            response_sha256: response,
        })
    };
    rows_of(db, sql, op_id, read, parse)
}

pub(crate) fn notes(db: &mut dyn Db, op_id: &str) -> Result<Vec<Note>> {
    let sql = "SELECT seq, noted_by, noted_at, text FROM notes WHERE op_id = ?1 ORDER BY seq";
    let read = |r: &Row| -> Result<(i64, String, String, String), StoreError> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    };
    let parse = |(seq, by, at, text): (i64, String, String, String)| {
        Ok(Note {
            seq,
            by,
            at: time(&at, "noted_at", &format!("note {seq}"))?,
            text,
        })
    };
    rows_of(db, sql, op_id, read, parse)
}

pub(crate) fn call_failures(db: &mut dyn Db, op_id: &str) -> Result<Vec<CallFailure>> {
    type Raw = (
        i64,
        String,
        String,
        String,
        String,
        Option<i32>,
        String,
        String,
    );
    let sql = "SELECT seq, verb, receiver, kind, detail, exit_code, stderr, failed_at \
               FROM call_failures WHERE op_id = ?1 ORDER BY seq";
    let read = |r: &Row| -> Result<Raw, StoreError> {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ))
    };
    let parse = |(seq, verb, receiver, kind, detail, exit_code, stderr, at): Raw| {
        let of = format!("call failure {seq}");
        Ok(CallFailure {
            seq,
            op_id: op_id.to_string(),
            verb,
            receiver,
            kind: FailureKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("kind of {of}")))?,
            detail,
            exit_code,
            stderr,
            at: time(&at, "failed_at", &of)?,
        })
    };
    rows_of(db, sql, op_id, read, parse)
}

pub(crate) fn acknowledgements(db: &mut dyn Db, op_id: &str) -> Result<Vec<Acknowledgement>> {
    let sql = "SELECT seq, acknowledged_by, acknowledged_at, reason FROM acknowledgements \
               WHERE op_id = ?1 ORDER BY seq";
    let read = |r: &Row| -> Result<(i64, String, String, String), StoreError> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    };
    let parse = |(seq, by, at, reason): (i64, String, String, String)| {
        Ok(Acknowledgement {
            seq,
            by,
            at: time(&at, "acknowledged_at", &format!("acknowledgement {seq}"))?,
            reason,
        })
    };
    rows_of(db, sql, op_id, read, parse)
}

pub(crate) fn escalations(db: &mut dyn Db, op_id: &str) -> Result<Vec<EscalationRecord>> {
    let sql = "SELECT seq, action, acted_by, acted_at, reason FROM escalations \
               WHERE op_id = ?1 ORDER BY seq";
    let read = |r: &Row| -> Result<(i64, String, String, String, String), StoreError> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    };
    let parse = |(seq, action, by, at, reason): (i64, String, String, String, String)| {
        let of = format!("escalation {seq}");
        Ok(EscalationRecord {
            seq,
            action: EscalationAction::parse(&action)
                .ok_or_else(|| StoreError::Corrupt(format!("action of {of}")))?,
            by,
            at: time(&at, "acted_at", &of)?,
            reason,
        })
    };
    rows_of(db, sql, op_id, read, parse)
}

pub(crate) fn closes(db: &mut dyn Db, op_id: &str) -> Result<Vec<CloseEntry>> {
    let sql = "SELECT journal_seq, closed_at, authorized_by, receiver FROM closes \
               WHERE op_id = ?1 ORDER BY journal_seq";
    let read = |r: &Row| -> Result<(i64, String, String, String), StoreError> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    };
    let parse = |(seq, at, authorized_by, receiver): (i64, String, String, String)| {
        Ok(CloseEntry {
            seq,
            closed_at: time(&at, "closed_at", &format!("close {seq}"))?,
            authorized_by,
            receiver,
        })
    };
    rows_of(db, sql, op_id, read, parse)
}
