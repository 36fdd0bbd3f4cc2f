//! The acts of triage on the outbox: recording observations, leaving
//! notes, raising and lowering the escalation marker, and the reads that
//! show them; and the pages of decided operations `verify --receivers`
//! reads again (`decided_page`).
//!
//! Each act appends its journal entry (`observed`, `noted`, `escalated`,
//! `deescalated`) and writes the rows that are its projection in the same
//! transaction: its own table's row, and for an observation or a marker
//! the operation's denormalized columns (`latest_observation` and
//! `latest_verdict`, `escalation`) that let the queue filter on them with
//! one index range. None of them moves `updated_at` or the version: triage
//! changes what people know about an operation, never its state.
//!
//! Written over [`Db`]: [`TriageLog`] is implemented once, for every
//! [`SqlStore`].

use super::rows::{self, query_ops, require_op, OP_SELECT};
use super::sql::{each_alone, Db, Dialect, SqlStore, ToValue};
use super::{journal, sets, TriageLog};
use crate::audit::{self, EntryKind};
use crate::clock::Clock;
use crate::domain::team::Act;
use crate::domain::{
    check_acknowledgement, check_escalation, check_lost_escalation, contradiction, Acknowledgement,
    CallFailure, CloseEntry, DecidedOp, EscalationAction, EscalationRecord, LostReceiver, Marking,
    NewNote, NewObservation, Note, Observation, Observed, OpState, Operation, RestedClose,
    Timestamp, Verdict,
};
use crate::error::{Result, StoreError};
use serde_json::{Map, Value};

/// Records one observation in the caller's transaction: its entry, its
/// row, and the operation's latest observation and verdict.
pub(crate) fn insert_observation(
    db: &mut dyn Db,
    observation: &NewObservation<'_>,
) -> Result<Observation> {
    let (seq, _) = insert_read(db, observation, EntryKind::Observed, Map::new())?;
    Ok(observation_of(observation, seq))
}

/// An observation as recorded by the entry `seq`.
pub(crate) fn observation_of(observation: &NewObservation<'_>, seq: i64) -> Observation {
    let snapshot = observation.snapshot;
    let provenance = observation.provenance;
    let matches = i64::try_from(snapshot.matches.len()).unwrap_or(i64::MAX);
    Observation {
        seq,
        seen: Observed {
            op_id: observation.op_id.to_string(),
            receiver: provenance.receiver.clone(),
            verdict: observation.verdict,
            observed_at: observation.at,
            observed_by: observation.by.to_string(),
            complete: snapshot.complete,
            authoritative: snapshot.authoritative,
            closed: snapshot.closed,
            matches,
        },
        snapshot: snapshot.clone(),
        receiver_describe_sha256: provenance.receiver_describe_sha256.clone(),
        response_sha256: provenance.response_sha256.clone(),
    }
}

/// A late receipt (SPEC 12) in the caller's transaction: a `receipt`
/// entry with `late: true`, the receipt's effect and the read it makes
/// (one match), recorded like an observation; returns its seq and whether
/// it contradicts the decision.
pub(crate) fn insert_late_receipt(
    db: &mut dyn Db,
    read: &NewObservation<'_>,
    effect_id: &str,
) -> Result<(i64, bool)> {
    let mut late = Map::new();
    late.insert("late".into(), true.into());
    late.insert("source".into(), "receipt".into());
    late.insert("effect_id".into(), effect_id.into());
    insert_read(db, read, EntryKind::Receipt, late)
}

/// A recorded read: its entry of `kind` (with `extra` fields), its
/// observation row, the operation's latest observation and verdict, and
/// the contradiction marker when it contradicts the final decision.
fn insert_read(
    db: &mut dyn Db,
    observation: &NewObservation<'_>,
    kind: EntryKind,
    extra: Map<String, Value>,
) -> Result<(i64, bool)> {
    let contradicts = contradicts_decision(db, observation, kind)?;
    let mut fields = audit::observed(observation);
    fields.extend(extra);
    if contradicts {
        fields.insert("contradicts".into(), true.into());
    }
    let sealed = journal::append(db, kind, Some(observation.op_id), fields)?;
    insert_observation_row(db, sealed.seq, observation)?;
    if contradicts {
        mark_contradiction(db, observation.op_id, sealed.seq)?;
    }
    note_latest(db, observation.op_id, sealed.seq, observation.verdict)?;
    Ok((sealed.seq, contradicts))
}

/// Makes the observation `seq` its operation's latest, unless a later one
/// is recorded already: a store whose writers commit in another order than
/// their seqs never points the queue at an older read.
pub(crate) fn note_latest(
    db: &mut dyn Db,
    op_id: &str,
    seq: i64,
    verdict: Verdict,
) -> Result<(), StoreError> {
    db.execute(
        "UPDATE operations SET latest_observation = ?1, latest_verdict = ?2
         WHERE op_id = ?3 AND (latest_observation IS NULL OR latest_observation < ?1)",
        &[&seq, &verdict.as_str(), &op_id],
    )
    .map(drop)
}

/// Raises the contradiction marker as the observation `seq`, whose entry
/// says it does, under the predicate [`contradicts_decision`] read: a final
/// decision and no marker up. When another writer changed that after the
/// read, the entry would claim a marker it cannot raise, so the act fails
/// whole ([`StoreError::Raced`]); recorded again, the read is judged on the
/// row as it then is.
fn mark_contradiction(db: &mut dyn Db, op_id: &str, seq: i64) -> Result<()> {
    let changed = db.execute(
        "UPDATE operations SET contradiction = ?2
             WHERE op_id = ?1 AND contradiction IS NULL
               AND state IN ('confirmed', 'not_applied')",
        &[&op_id, &seq],
    )?;
    if changed == 1 {
        return Ok(());
    }
    Err(StoreError::Raced(format!("the decision or contradiction of {op_id}")).into())
}

/// Clears the contradiction marker `seen`, the one the acknowledgement's
/// check read. When another writer changed it after that read, nothing is
/// cleared: refused `not_contradicted` when no marker is up now; when
/// another one is, the acknowledgement (of a marker now gone) fails whole
/// ([`StoreError::Raced`]) rather than clear a marker unseen.
fn clear_contradiction(db: &mut dyn Db, op_id: &str, seen: Option<i64>) -> Result<()> {
    let changed = db.execute(
        "UPDATE operations SET contradiction = NULL WHERE op_id = ?1 AND contradiction = ?2",
        &[&op_id, &seen],
    )?;
    if changed == 1 {
        return Ok(());
    }
    check_acknowledgement(&require_op(db, op_id)?)?;
    Err(StoreError::Raced(format!("the contradiction of {op_id}")).into())
}

/// Whether the read marks its operation contradicted: the first read that
/// contradicts the final decision ([`contradiction`]) while no marker is
/// up. A read of the receiver (`observed`) is also held to the close the
/// decision rested on, as its evidence row's snapshot shows it; a late
/// receipt says nothing of tombstones. The entry says so (`contradicts`),
/// so the journal proves the marker.
fn contradicts_decision(
    db: &mut dyn Db,
    observation: &NewObservation<'_>,
    kind: EntryKind,
) -> Result<bool> {
    let open: Option<(String, Option<i64>)> = db.query_opt(
        "SELECT state, contradiction FROM operations WHERE op_id = ?1",
        &[&observation.op_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    match open {
        Some((state, None)) if state == "confirmed" || state == "not_applied" => {
            let op = require_op(db, observation.op_id)?;
            let rested = match kind {
                EntryKind::Observed => rested_close(db, observation.op_id)?,
                _ => None,
            };
            Ok(contradiction(&op, rested.as_ref(), observation.snapshot).is_some())
        }
        _ => Ok(false),
    }
}

/// The close a decided operation's decision rested on: its evidence row's
/// snapshot, when that says `closed: true`, with the `closed_by` of the
/// `closed` entry it names (one evidence row per decision; the latest is
/// the final one).
fn rested_close(db: &mut dyn Db, op_id: &str) -> Result<Option<RestedClose>> {
    let row: Option<(String, Option<String>)> = db.query_opt(
        "SELECT e.snapshot, c.entry FROM evidence e
             LEFT JOIN journal c ON c.seq = e.close_seq
             WHERE e.op_id = ?1 ORDER BY e.seq DESC LIMIT 1",
        &[&op_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    match row {
        Some((snapshot, close)) => Ok(rested(op_id, &snapshot, close.as_deref())?),
        None => Ok(None),
    }
}

/// The close a decision's evidence snapshot (a read's, or a receipt's)
/// shows, with the text of the `closed` entry it names; either not JSON is
/// corrupt.
fn rested(op_id: &str, snapshot: &str, close: Option<&str>) -> Result<Option<RestedClose>> {
    let parse = |text: &str| {
        serde_json::from_str::<Value>(text)
            .map_err(|_| StoreError::Corrupt(format!("the evidence of operation {op_id}")))
    };
    let close = close.map(parse).transpose()?;
    Ok(RestedClose::of(&parse(snapshot)?, close.as_ref()))
}

/// The decided operations whose deciding entry lies in `(after, through]`,
/// in journal order, at most `limit`: one range of the evidence table's
/// unique `journal_seq`, each row joined to its operation by key.
pub(crate) fn decided_page(
    db: &mut dyn Db,
    after: i64,
    through: i64,
    limit: usize,
) -> Result<Vec<DecidedOp>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let sql = decided_sql()?;
    // The three columns after OP_SELECT's 26.
    let rows = db.query(&sql, &[&after, &through, &limit], |row| {
        Ok((
            rows::op_row(row)?,
            row.get::<i64>(26)?,
            row.get::<String>(27)?,
            row.get::<Option<String>>(28)?,
        ))
    })?;
    let mut page = Vec::with_capacity(rows.len());
    for (raw, decision_seq, snapshot, close) in rows {
        let op = rows::parse_op(raw)?;
        let rested = rested(&op.op_id, &snapshot, close.as_deref())?;
        page.push(DecidedOp {
            op,
            decision_seq,
            rested,
        });
    }
    Ok(page)
}

/// [`decided_page`]'s statement. The evidence is the outer loop, walked by
/// its `journal_seq` index from `after` (so a page costs its own rows, and
/// needs no sort): `CROSS JOIN` holds SQLite to that order, where a planner
/// without statistics would otherwise walk every decided operation by
/// state, for every page. PostgreSQL reads it as the inner join it is.
fn decided_sql() -> Result<String> {
    let (columns, from) = OP_SELECT
        .split_once(" FROM ")
        .ok_or_else(|| StoreError::Corrupt("the operation query has no FROM".into()))?;
    Ok(format!(
        "{columns}, e.journal_seq, e.snapshot, c.entry \
         FROM evidence e CROSS JOIN {from} \
         LEFT JOIN journal c ON c.seq = e.close_seq \
         WHERE e.op_id = o.op_id AND e.journal_seq > ?1 AND e.journal_seq <= ?2 \
           AND o.state IN ('confirmed', 'not_applied') \
         ORDER BY e.journal_seq LIMIT ?3"
    ))
}

/// The `observations` row of the entry `seq` (the snapshot stays in the
/// entry).
pub(crate) fn insert_observation_row(
    db: &mut dyn Db,
    seq: i64,
    observation: &NewObservation<'_>,
) -> Result<(), StoreError> {
    let snapshot = observation.snapshot;
    let provenance = observation.provenance;
    db.execute(
        "INSERT INTO observations (seq, op_id, receiver, observed_by, observed_at, verdict,
             complete, authoritative, closed, matches, receiver_describe_sha256,
             response_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        &[
            &seq,
            &observation.op_id,
            &provenance.receiver,
            &observation.by,
            &observation.at.to_string(),
            &observation.verdict.as_str(),
            &snapshot.complete,
            &snapshot.authoritative,
            &snapshot.closed,
            &i64::try_from(snapshot.matches.len()).unwrap_or(i64::MAX),
            &provenance.receiver_describe_sha256,
            &provenance.response_sha256,
        ],
    )
    .map(drop)
}

/// Raises the escalation marker (as the entry `seq`) or lowers it, under
/// the predicate [`check_escalation`] checked on the row as read: a
/// raise needs no marker and an `unknown` or contradicted operation, a
/// lowering a marker. When another writer changed the row after the read,
/// nothing changes and the act is refused as the row now is.
fn set_marker(db: &mut dyn Db, marking: &Marking<'_>, seq: i64) -> Result<()> {
    let changed = match marking.action {
        EscalationAction::Escalate => db.execute(
            "UPDATE operations SET escalation = ?2
                 WHERE op_id = ?1 AND escalation IS NULL
                   AND (state = 'unknown' OR contradiction IS NOT NULL)",
            &[&marking.op_id, &seq],
        ),
        EscalationAction::Deescalate => db.execute(
            "UPDATE operations SET escalation = NULL
                 WHERE op_id = ?1 AND escalation IS NOT NULL",
            &[&marking.op_id],
        ),
    }?;
    if changed == 1 {
        return Ok(());
    }
    let fresh = require_op(db, marking.op_id)?;
    check_escalation(&fresh, marking.action)?;
    Err(StoreError::Corrupt(format!(
        "the {} of {} matched no row, though every rule holds on it",
        marking.action.as_str(),
        marking.op_id
    ))
    .into())
}

/// Appends a marking's entry (`escalated` or `deescalated`; with
/// `"lost": true` for one of a receiver removed as lost) and its
/// `escalations` row in the caller's transaction; returns the entry's seq.
fn journal_marking(
    db: &mut dyn Db,
    kind: EntryKind,
    marking: &Marking<'_>,
    lost: bool,
) -> Result<i64> {
    let mut fields = audit::marked(marking);
    if lost {
        fields.insert("lost".into(), Value::Bool(true));
    }
    let sealed = journal::append(db, kind, Some(marking.op_id), fields)?;
    db.execute(
        "INSERT INTO escalations (seq, op_id, action, acted_by, acted_at, reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[
            &sealed.seq,
            &marking.op_id,
            &marking.action.as_str(),
            &marking.by,
            &marking.at.to_string(),
            &marking.reason,
        ],
    )?;
    Ok(sealed.seq)
}

/// Escalates an open operation whose receiver the caller's transaction
/// removed as lost, after its `receiver_removed` entry: an `escalated`
/// entry with the removal's reason, its row and the marker, under
/// [`check_lost_escalation`] on the row as it is in this transaction.
pub(crate) fn escalate_lost(
    db: &mut dyn Db,
    op_id: &str,
    lost: &LostReceiver<'_>,
    at: Timestamp,
) -> Result<()> {
    check_lost_escalation(&require_op(db, op_id)?)?;
    let marking = Marking {
        op_id,
        action: EscalationAction::Escalate,
        by: lost.by,
        at,
        reason: lost.reason,
    };
    let seq = journal_marking(db, EntryKind::Escalated, &marking, true)?;
    let changed = db.execute(
        "UPDATE operations SET escalation = ?2
             WHERE op_id = ?1 AND state IN ('prepared', 'unknown')",
        &[&op_id, &seq],
    )?;
    if changed != 1 {
        return Err(StoreError::Corrupt(format!(
            "the escalation of {op_id} matched no row, though it is open"
        ))
        .into());
    }
    Ok(())
}

/// Triage, written once for every store whose outbox is SQL.
impl<S: SqlStore> TriageLog for S {
    /// Records a batch of observations in one transaction: each is one act
    /// with its own entry, and they commit together (one fsync for the
    /// batch, which is what makes observing thousands of operations fast).
    /// On PostgreSQL, where each statement is a round trip, they are
    /// written as sets (`store::sets`), each still checked alone.
    fn record_observations(
        &mut self,
        batch: &[NewObservation<'_>],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Observation>>> {
        self.write(clock, Act::Observe, |db, at| {
            let batch: Vec<NewObservation<'_>> = (batch.iter())
                .map(|observation| NewObservation { at, ..*observation })
                .collect();
            let alone = |db: &mut dyn Db, observation: &NewObservation<'_>| {
                require_op(db, observation.op_id)?;
                insert_observation(db, observation)
            };
            match db.dialect() {
                Dialect::Postgres => sets::record_observations(db, &batch, &alone),
                Dialect::Sqlite => (batch.iter())
                    .map(|observation| each_alone(db, |db| alone(db, observation)))
                    .collect(),
            }
        })
    }

    fn note(&mut self, note: &NewNote<'_>, clock: &dyn Clock) -> Result<Note> {
        self.write(clock, Act::Note, |db, at| {
            let note = &NewNote { at, ..*note };
            require_op(db, note.op_id)?;
            let fields = audit::noted(note);
            let sealed = journal::append(db, EntryKind::Noted, Some(note.op_id), fields)?;
            db.execute(
                "INSERT INTO notes (seq, op_id, noted_by, noted_at, text) VALUES (?1, ?2, ?3, ?4, ?5)",
                &[
                    &sealed.seq,
                    &note.op_id,
                    &note.by,
                    &note.at.to_string(),
                    &note.text,
                ],
            )?;
            Ok(Note {
                seq: sealed.seq,
                by: note.by.to_string(),
                at: note.at,
                text: note.text.to_string(),
            })
        })
    }

    /// Raises or lowers the marker under [`check_escalation`], against the
    /// row as it is in this transaction.
    fn mark(&mut self, marking: &Marking<'_>, clock: &dyn Clock) -> Result<Operation> {
        self.write(clock, Act::Escalate, |db, at| {
            let marking = &Marking { at, ..*marking };
            let op = require_op(db, marking.op_id)?;
            check_escalation(&op, marking.action)?;
            let kind = match marking.action {
                EscalationAction::Escalate => EntryKind::Escalated,
                EscalationAction::Deescalate => EntryKind::Deescalated,
            };
            let seq = journal_marking(db, kind, marking, false)?;
            set_marker(db, marking, seq)?;
            require_op(db, marking.op_id)
        })
    }

    fn acknowledge(
        &mut self,
        acknowledgement: &NewNote<'_>,
        clock: &dyn Clock,
    ) -> Result<Operation> {
        self.write(clock, Act::Acknowledge, |db, at| {
            let acknowledgement = &NewNote {
                at,
                ..*acknowledgement
            };
            let op = require_op(db, acknowledgement.op_id)?;
            check_acknowledgement(&op)?;
            let fields = audit::acknowledged(acknowledgement);
            let kind = EntryKind::Acknowledged;
            let sealed = journal::append(db, kind, Some(acknowledgement.op_id), fields)?;
            db.execute(
                "INSERT INTO acknowledgements (seq, op_id, acknowledged_by, acknowledged_at, reason)
             VALUES (?1, ?2, ?3, ?4, ?5)",
                &[
                    &sealed.seq,
                    &acknowledgement.op_id,
                    &acknowledgement.by,
                    &acknowledgement.at.to_string(),
                    &acknowledgement.text,
                ],
            )?;
            let seen = op.triage.contradicted.as_ref().map(|c| c.seq);
            clear_contradiction(db, acknowledgement.op_id, seen)?;
            require_op(db, acknowledgement.op_id)
        })
    }

    fn record_call_failure(
        &mut self,
        failure: &CallFailure,
        clock: &dyn Clock,
    ) -> Result<CallFailure> {
        self.write(clock, Act::of_failed_call(&failure.verb), |db, at| {
            let failure = &CallFailure {
                at,
                ..failure.clone()
            };
            let fields = audit::call_failed(failure);
            let kind = EntryKind::CallFailed;
            let sealed = journal::append(db, kind, Some(&failure.op_id), fields)?;
            db.execute(
                "INSERT INTO call_failures (seq, op_id, verb, receiver, kind, detail, exit_code,
                 stderr, failed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                &[
                    &sealed.seq,
                    &failure.op_id,
                    &failure.verb,
                    &failure.receiver,
                    &failure.kind.as_str(),
                    &failure.detail,
                    &failure.exit_code,
                    &failure.stderr,
                    &failure.at.to_string(),
                ],
            )?;
            Ok(CallFailure {
                seq: sealed.seq,
                ..failure.clone()
            })
        })
    }

    fn record_close_requests(
        &mut self,
        op_ids: &[&str],
        receiver: &str,
        authorized_by: &str,
        clock: &dyn Clock,
    ) -> Result<Vec<Result<()>>> {
        self.write(clock, Act::Close, |db, at| {
            let alone = |db: &mut dyn Db, op_id: &&str| {
                let fields = audit::close_requested(receiver, authorized_by, at);
                let kind = EntryKind::CloseRequested;
                let sealed = journal::append(db, kind, Some(op_id), fields)?;
                db.execute(
                    "INSERT INTO close_requests
                         (seq, op_id, receiver, authorized_by, requested_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    &[
                        &sealed.seq,
                        op_id,
                        &receiver,
                        &authorized_by,
                        &at.to_string(),
                    ],
                )?;
                Ok(())
            };
            match db.dialect() {
                Dialect::Postgres => {
                    let close = (receiver, authorized_by, at);
                    sets::record_close_requests(db, op_ids, close, &alone)
                }
                Dialect::Sqlite => (op_ids.iter())
                    .map(|op_id| each_alone(db, |db| alone(db, op_id)))
                    .collect(),
            }
        })
    }

    fn call_failures(&self, op_id: &str) -> Result<Vec<CallFailure>> {
        self.read(|db| rows::call_failures(db, op_id))
    }

    fn acknowledgements(&self, op_id: &str) -> Result<Vec<Acknowledgement>> {
        self.read(|db| rows::acknowledgements(db, op_id))
    }

    fn observations(&self, op_id: &str) -> Result<Vec<Observation>> {
        self.read(|db| rows::observations(db, op_id))
    }

    fn notes(&self, op_id: &str) -> Result<Vec<Note>> {
        self.read(|db| rows::notes(db, op_id))
    }

    fn escalations(&self, op_id: &str) -> Result<Vec<EscalationRecord>> {
        self.read(|db| rows::escalations(db, op_id))
    }

    fn closes(&self, op_id: &str) -> Result<Vec<CloseEntry>> {
        self.read(|db| rows::closes(db, op_id))
    }

    fn entry_roles(&self, op_id: &str) -> Result<std::collections::BTreeMap<i64, String>> {
        self.read(|db| Ok(journal::roles_of(db, op_id)?))
    }

    fn origin(&self, op_id: &str) -> Result<Option<crate::domain::origin::Origin>> {
        self.read(|db| Ok(journal::origin_of(db, op_id)?))
    }

    fn latest_entry(&self, op_id: &str) -> Result<Option<crate::domain::LatestEntry>> {
        self.read(|db| Ok(journal::latest_of(db, op_id)?))
    }

    fn decided_page(&self, after: i64, through: i64, limit: usize) -> Result<Vec<DecidedOp>> {
        self.read(|db| decided_page(db, after, through, limit))
    }

    /// Operations in `op_id` order after `after`, optionally of one state,
    /// whose latest observation is older than `observed_before` or absent
    /// (all of them without `observed_before`).
    fn observation_due(
        &self,
        state: Option<OpState>,
        observed_before: Option<Timestamp>,
        after: &str,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let state = state.map(OpState::as_str);
        let before = observed_before.map(|t| t.to_string());
        // Parameters are numbered in the order their terms are added, so
        // each statement binds exactly the ones it names.
        let mut sql = format!("{OP_SELECT} WHERE o.op_id > ?1");
        let mut params: Vec<&dyn ToValue> = vec![&after];
        if let Some(state) = &state {
            params.push(state);
            sql.push_str(&format!(" AND o.state = ?{}", params.len()));
        }
        if let Some(before) = &before {
            params.push(before);
            let n = params.len();
            sql.push_str(&format!(
                " AND (o.latest_observation IS NULL OR ob.observed_at < ?{n})"
            ));
        }
        params.push(&limit);
        sql.push_str(&format!(" ORDER BY o.op_id LIMIT ?{}", params.len()));
        self.read(|db| query_ops(db, &sql, &params))
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::Clock;
    use crate::domain::{
        EscalationAction, Marking, NewObservation, OpState, Refusal, Snapshot, Verdict,
    };
    use crate::error::Error;
    use crate::store::sender::fixture::{provenance, Fixture};
    use crate::store::{Outbox, TriageLog};

    fn marking(action: EscalationAction, fx: &Fixture) -> Marking<'static> {
        Marking {
            op_id: "op",
            action,
            by: "ann",
            at: fx.clock.now(),
            reason: "two matches",
        }
    }

    #[track_caller]
    fn refusal(result: crate::error::Result<()>) -> Refusal {
        match result {
            Err(Error::Refused(refused)) => refused,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// The marker moves only under the predicate the rules checked: an
    /// escalation whose row changed after the read (escalated meanwhile, or
    /// decided) changes nothing and is refused as the row now is; a
    /// deescalation of a marker lowered meanwhile, `not_escalated`.
    #[test]
    fn the_escalation_marker_changes_only_under_its_predicate() {
        let mut fx = Fixture::new();
        fx.dispatched("op");
        let raise = marking(EscalationAction::Escalate, &fx);
        let lower = marking(EscalationAction::Deescalate, &fx);
        fx.store.mark(&raise, &fx.clock).unwrap();
        let marker = fx.store.require("op").unwrap().triage.escalated;
        let refused = refusal(super::set_marker(&mut fx.store.db(), &raise, 99));
        assert_eq!(refused.code(), "already_escalated");
        assert_eq!(fx.store.require("op").unwrap().triage.escalated, marker);
        fx.store.mark(&lower, &fx.clock).unwrap();
        let refused = refusal(super::set_marker(&mut fx.store.db(), &lower, 99));
        assert_eq!(refused, Refusal::NotEscalated("op".into()));
        let op = fx.store.require("op").unwrap();
        let receipt = Fixture::effect("op");
        let clock = &fx.clock;
        fx.store
            .record_receipt(&op, &receipt, &provenance(), clock)
            .unwrap();
        let refused = refusal(super::set_marker(&mut fx.store.db(), &raise, 99));
        assert_eq!(
            refused,
            Refusal::NotUnknown {
                op_id: "op".into(),
                state: OpState::Confirmed
            }
        );
        assert_eq!(fx.store.require("op").unwrap().triage.escalated, None);
    }

    /// An observation recorded after a later one (writers that commit in
    /// another order than their seqs) leaves the later one the latest.
    #[test]
    fn the_latest_observation_moves_only_to_a_later_one() {
        let mut fx = Fixture::new();
        fx.dispatched("op");
        let empty = Snapshot {
            op_id: "op".into(),
            matches: Vec::new(),
            complete: false,
            authoritative: true,
            closed: false,
            closed_by: None,
        };
        let provenance = provenance();
        let seen = |verdict| NewObservation {
            op_id: "op",
            by: "ann",
            at: fx.clock.now(),
            snapshot: &empty,
            verdict,
            provenance: &provenance,
        };
        let batch = [seen(Verdict::Inconclusive), seen(Verdict::TerminalAbsence)];
        let recorded = fx.store.record_observations(&batch, &fx.clock).unwrap();
        let seq = |i: usize| recorded[i].as_ref().unwrap().seq;
        let (older, later) = (seq(0), seq(1));
        super::note_latest(&mut fx.store.db(), "op", older, Verdict::Inconclusive).unwrap();
        let op = fx.store.require("op").unwrap();
        let latest = op.triage.latest_observation.unwrap();
        assert_eq!(latest.verdict, Verdict::TerminalAbsence, "seq {later}");
    }

    /// A confirmed operation, then a read that contradicts it; returns the
    /// marker's seq.
    fn contradicted(fx: &mut Fixture) -> i64 {
        fx.confirmed("op");
        contradict(fx)
    }

    /// Records a read that contradicts the confirmed `op` (an effect that
    /// is not the confirmed one); returns the marker's seq.
    fn contradict(fx: &mut Fixture) -> i64 {
        let mut other = Fixture::effect("op");
        other.effect_id = "fx-other".into();
        let seen = Snapshot {
            op_id: "op".into(),
            matches: vec![other],
            complete: false,
            authoritative: true,
            closed: false,
            closed_by: None,
        };
        let provenance = provenance();
        let observation = NewObservation {
            op_id: "op",
            by: "ann",
            at: fx.clock.now(),
            snapshot: &seen,
            verdict: Verdict::PayloadMismatch,
            provenance: &provenance,
        };
        let clock = &fx.clock;
        fx.store.record_observations(&[observation], clock).unwrap()[0]
            .as_ref()
            .unwrap();
        let marker = fx.store.require("op").unwrap().triage.contradicted;
        marker.expect("the read contradicts the receipt").seq
    }

    fn marker(fx: &Fixture) -> Option<i64> {
        let op = fx.store.require("op").unwrap();
        op.triage.contradicted.map(|c| c.seq)
    }

    /// A read that would mark a contradiction raised by another writer
    /// after it looked fails whole (its entry would claim a marker it
    /// cannot raise), and the marker stays the first one.
    #[test]
    fn a_contradiction_marked_after_the_read_fails_the_act_whole() {
        let mut fx = Fixture::new();
        let first = contradicted(&mut fx);
        let raced = super::mark_contradiction(&mut fx.store.db(), "op", first + 1);
        assert!(
            matches!(raced, Err(Error::Store(crate::error::StoreError::Raced(_)))),
            "{raced:?}"
        );
        assert_eq!(marker(&fx), Some(first));
    }

    /// An acknowledgement whose marker changed after its check read it
    /// clears nothing: `not_contradicted` when it was cleared meanwhile, a
    /// whole failure when another marker is up now.
    #[test]
    fn an_acknowledgement_clears_only_the_marker_it_read() {
        let mut fx = Fixture::new();
        let first = contradicted(&mut fx);
        let ack = crate::domain::NewNote {
            op_id: "op",
            by: "ann",
            at: fx.clock.now(),
            text: "seen",
        };
        fx.store.acknowledge(&ack, &fx.clock).unwrap();
        let cleared = super::clear_contradiction(&mut fx.store.db(), "op", Some(first));
        assert_eq!(refusal(cleared), Refusal::NotContradicted("op".into()));
        let again = contradict(&mut fx);
        let raced = super::clear_contradiction(&mut fx.store.db(), "op", Some(first));
        assert!(
            matches!(raced, Err(Error::Store(crate::error::StoreError::Raced(_)))),
            "{raced:?}"
        );
        assert_eq!(marker(&fx), Some(again));
    }

    /// A page of decided operations is one range of the evidence's
    /// `journal_seq` index, each row joined to its operation by key: not a
    /// walk of every decided operation by state and a sort, for each page,
    /// which made a whole `verify --receivers` cost the square of the
    /// outbox's decisions (on a workspace SQLite has no statistics of).
    #[test]
    fn a_decided_page_walks_the_evidence_by_its_journal_seq_and_sorts_nothing() {
        let fx = Fixture::new();
        let sql = format!("EXPLAIN QUERY PLAN {}", super::decided_sql().unwrap());
        let mut statement = fx.store.conn().prepare(&sql).unwrap();
        let plan: Vec<String> = (statement.query_map([0i64, 10, 500], |r| r.get(3)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(
            plan[0].starts_with("SEARCH e USING INDEX sqlite_autoindex_evidence_1 (journal_seq>?"),
            "{plan:?}"
        );
        assert_eq!(plan[1], "SEARCH o USING PRIMARY KEY (op_id=?)", "{plan:?}");
        assert!(!plan.iter().any(|step| step.contains("B-TREE")), "{plan:?}");
    }
}
