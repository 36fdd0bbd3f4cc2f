//! What `recon metrics` reads (SPEC 15): every family's numbers in one
//! statement, so they come from one snapshot on every store (a single
//! statement sees one snapshot on SQLite and on PostgreSQL alike) and cost
//! one round trip to a server. It only reads, and only tables a reader may
//! read (`recon_reader` in team mode).
//!
//! Each branch of the `UNION ALL` is one family, tagged in its first
//! column; the rest are its labels, its count and, for the unknown
//! operations, the oldest `updated_at` of the group. What each costs, on
//! the schema as it is (no index was added for it):
//! - operations by receiver and state: one walk of the covering index
//!   `operations_by_receiver (receiver, state)`;
//! - unknown operations: the `unknown` range of `operations_by_state`,
//!   each row read for its verdict, escalation and age;
//! - contradicted: the partial index `operations_contradicted`;
//! - surplus effects (SPEC 14): the partial index
//!   `operations_with_surplus`, one row per kept duplicate with its
//!   surplus list and the count of its approvals of a surplus effect
//!   (each surplus effect is approved at most once, a `UNIQUE` rule);
//! - failed calls: a scan of `call_failures` (one row per failed call);
//! - decisions: a scan of `evidence`, which holds exactly one row per
//!   state change out of `unknown` (an invariant `verify` holds), and an
//!   operation leaves `unknown` once: so its rows are the decided
//!   operations, each with the source of its decision;
//! - the journal's length: its last `seq` (seqs run from 1 without a gap,
//!   which the chain walk checks), one step down the primary key.
//!
//! Written over [`Db`]: [`OutboxMetrics`] is implemented once, for every
//! [`SqlStore`].

use super::sql::{Db, Row, SqlStore};
use super::OutboxMetrics;
use crate::domain::metrics::{DecisionCount, FailedCalls, OutboxTally, StateCount, UnknownGroup};
use crate::domain::{Decision, EvidenceSource, OpState, Timestamp, Verdict};
use crate::error::{Result, StoreError};
use std::collections::BTreeMap;

const TALLY: &str = "
SELECT 'receiver', name, '', '', 0, '' FROM receivers
UNION ALL
SELECT 'operations', receiver, state, '', COUNT(*), '' FROM operations GROUP BY receiver, state
UNION ALL
SELECT 'unknown', receiver, verdict, escalated, COUNT(*), MIN(updated_at)
FROM (SELECT receiver, COALESCE(latest_verdict, 'never') AS verdict,
             CASE WHEN escalation IS NULL THEN 'false' ELSE 'true' END AS escalated,
             updated_at
      FROM operations WHERE state = 'unknown') AS u
GROUP BY receiver, verdict, escalated
UNION ALL
SELECT 'contradicted', '', '', '', COUNT(*), '' FROM operations WHERE contradiction IS NOT NULL
UNION ALL
SELECT 'surplus', o.op_id, o.surplus_effect_ids, '',
    (SELECT COUNT(*) FROM compensation_approvals a
     WHERE a.original_op_id = o.op_id AND a.effect_id <> o.confirmed_effect_id), ''
FROM operations o WHERE o.surplus_effect_ids IS NOT NULL
UNION ALL
SELECT 'failed_calls', receiver, verb, kind, COUNT(*), '' FROM call_failures
GROUP BY receiver, verb, kind
UNION ALL
SELECT 'decisions', decision, source, '', COUNT(*), '' FROM evidence GROUP BY decision, source
UNION ALL
SELECT 'journal', '', '', '', COALESCE(MAX(seq), 0), '' FROM journal";

/// The kept duplicates alone (the console's header and queue marks): the
/// `surplus` branch of [`TALLY`], on the same partial index.
const SURPLUS: &str = "
SELECT 'surplus', o.op_id, o.surplus_effect_ids, '',
    (SELECT COUNT(*) FROM compensation_approvals a
     WHERE a.original_op_id = o.op_id AND a.effect_id <> o.confirmed_effect_id), ''
FROM operations o WHERE o.surplus_effect_ids IS NOT NULL";

impl<S: SqlStore> OutboxMetrics for S {
    fn tally(&self) -> Result<OutboxTally> {
        self.read(|db| Ok(tally(db)?))
    }

    fn surplus_awaiting(&self) -> Result<BTreeMap<String, usize>> {
        self.read(|db| {
            let mut kept = BTreeMap::new();
            db.for_each(SURPLUS, &[], &mut |row| {
                let (op_id, listed) = (row.get::<String>(1)?, row.get::<String>(2)?);
                let awaiting = surplus_left(&op_id, &listed, row.get(4)?)?;
                kept.insert(op_id, usize::try_from(awaiting).unwrap_or(0));
                Ok(())
            })?;
            Ok(kept)
        })
    }
}

/// How many of a kept duplicate's surplus effects (`listed`, its JSON
/// list) are left once `approved` of them have an approval.
fn surplus_left(op_id: &str, listed: &str, approved: i64) -> Result<i64, StoreError> {
    let listed: Vec<String> = serde_json::from_str(listed)
        .map_err(|_| StoreError::Corrupt(format!("surplus_effect_ids of {op_id}")))?;
    let listed = i64::try_from(listed.len()).unwrap_or(i64::MAX);
    Ok((listed - approved).max(0))
}

/// Every family's numbers, from one statement.
fn tally(db: &mut dyn Db) -> Result<OutboxTally, StoreError> {
    let mut tally = OutboxTally::default();
    db.for_each(TALLY, &[], &mut |row| add(&mut tally, &row))?;
    Ok(tally)
}

/// Adds one row of [`TALLY`] to the family its first column names.
fn add(tally: &mut OutboxTally, row: &Row) -> Result<(), StoreError> {
    let family: String = row.get(0)?;
    let (a, b, c): (String, String, String) = (row.get(1)?, row.get(2)?, row.get(3)?);
    let count: i64 = row.get(4)?;
    match family.as_str() {
        "receiver" => tally.receivers.push(a),
        "operations" => tally.operations.push(StateCount {
            receiver: a,
            state: named(OpState::parse(&b), "state", &b)?,
            count,
        }),
        "unknown" => {
            let verdict = match b.as_str() {
                "never" => None,
                _ => Some(named(Verdict::parse(&b), "verdict", &b)?),
            };
            let oldest: String = row.get(5)?;
            tally.unknown.push(UnknownGroup {
                receiver: a,
                verdict,
                escalated: c == "true",
                count,
                oldest: named(Timestamp::parse(&oldest), "updated_at", &oldest)?,
            });
        }
        "contradicted" => tally.contradicted = count,
        "surplus" => tally.surplus_effects += surplus_left(&a, &b, count)?,
        "failed_calls" => tally.failed_calls.push(FailedCalls {
            receiver: a,
            verb: b,
            kind: c,
            count,
        }),
        "decisions" => tally.decisions.push(DecisionCount {
            decision: named(Decision::parse(&a), "decision", &a)?,
            source: named(EvidenceSource::parse(&b), "source", &b)?,
            count,
        }),
        "journal" => tally.journal_entries = count,
        other => return Err(StoreError::Corrupt(format!("a metrics row of {other}"))),
    }
    Ok(())
}

/// A stored name read back as its value, or a `Corrupt` error naming it.
fn named<T>(value: Option<T>, what: &str, text: &str) -> Result<T, StoreError> {
    value.ok_or_else(|| StoreError::Corrupt(format!("{what} {text:?} in the metrics' read")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::Value;

    /// A row of [`TALLY`] as the store hands it over.
    fn row(family: &str, labels: [&str; 3], count: i64, oldest: &str) -> Row {
        let text = |s: &str| Value::Text(s.to_string());
        Row::new(vec![
            text(family),
            text(labels[0]),
            text(labels[1]),
            text(labels[2]),
            Value::Integer(count),
            text(oldest),
        ])
    }

    fn tally_of(rows: &[Row]) -> Result<OutboxTally, StoreError> {
        let mut tally = OutboxTally::default();
        for row in rows {
            add(&mut tally, row)?;
        }
        Ok(tally)
    }

    #[test]
    fn each_row_of_the_statement_counts_in_the_family_it_names() {
        let at = "2026-12-01T10:00:00.000Z";
        let tally = tally_of(&[
            row("receiver", ["mail", "", ""], 0, ""),
            row("operations", ["mail", "unknown", ""], 7, ""),
            row("unknown", ["mail", "never", "false"], 4, at),
            row("unknown", ["mail", "duplicate_matches", "true"], 3, at),
            row("contradicted", ["", "", ""], 2, ""),
            row("failed_calls", ["mail", "query", "timeout"], 5, ""),
            row("decisions", ["confirmed", "review", ""], 6, ""),
            row("journal", ["", "", ""], 61, ""),
        ])
        .expect("a tally");
        let oldest = Timestamp::parse(at).expect("a time");
        assert_eq!(tally.receivers, ["mail"]);
        assert_eq!(
            tally.operations,
            [StateCount {
                receiver: "mail".into(),
                state: OpState::Unknown,
                count: 7
            }]
        );
        assert_eq!(
            tally.unknown,
            [
                UnknownGroup {
                    receiver: "mail".into(),
                    verdict: None,
                    escalated: false,
                    count: 4,
                    oldest,
                },
                UnknownGroup {
                    receiver: "mail".into(),
                    verdict: Some(Verdict::DuplicateMatches),
                    escalated: true,
                    count: 3,
                    oldest,
                },
            ]
        );
        assert_eq!(tally.contradicted, 2);
        assert_eq!(
            tally.failed_calls,
            [FailedCalls {
                receiver: "mail".into(),
                verb: "query".into(),
                kind: "timeout".into(),
                count: 5,
            }]
        );
        assert_eq!(
            tally.decisions,
            [DecisionCount {
                decision: Decision::Confirmed,
                source: EvidenceSource::Review,
                count: 6,
            }]
        );
        assert_eq!(tally.journal_entries, 61);
    }

    #[test]
    fn surplus_effects_sum_what_each_kept_duplicate_has_left_to_compensate() {
        let tally = tally_of(&[
            row("surplus", ["op-1", r#"["e-2","e-3"]"#, ""], 1, ""),
            row("surplus", ["op-2", r#"["e-5","e-6","e-7"]"#, ""], 0, ""),
            row("surplus", ["op-3", r#"["e-9"]"#, ""], 1, ""),
        ])
        .expect("a tally");
        assert_eq!(tally.surplus_effects, 4);
        assert_eq!(surplus_left("op-1", r#"["e-2","e-3"]"#, 2).ok(), Some(0));
        // More approvals than listed effects never count below nothing.
        assert_eq!(surplus_left("op-1", r#"["e-2"]"#, 3).ok(), Some(0));
        assert!(surplus_left("op-1", "not json", 0).is_err());
    }

    #[test]
    fn a_row_with_a_name_recon_does_not_know_is_corrupt_never_a_default() {
        let at = "2026-12-01T10:00:00.000Z";
        for bad in [
            row("operations", ["mail", "lost", ""], 1, ""),
            row("unknown", ["mail", "maybe", "false"], 1, at),
            row("unknown", ["mail", "never", "false"], 1, "yesterday"),
            row("decisions", ["perhaps", "review", ""], 1, ""),
            row("decisions", ["confirmed", "rumour", ""], 1, ""),
            row("rows", ["", "", ""], 1, ""),
        ] {
            assert!(
                matches!(
                    tally_of(std::slice::from_ref(&bad)),
                    Err(StoreError::Corrupt(_))
                ),
                "{bad:?}"
            );
        }
    }
}
