//! The SQLite outbox's unit tests: the flow's scripts, one claim each.

use super::fixture::{payload, provenance, Fixture};
use crate::audit::EntryKind;
use crate::clock::Clock;
use crate::domain::{CompensationRequest, OpState, Operation, Refusal};
use crate::error::Error;
use crate::store::sql::Sqlite;
use crate::store::Outbox;

/// A transaction the test holds, as the scripts see it.
fn on<'a>(tx: &'a rusqlite::Transaction<'_>, path: &'a std::path::Path) -> Sqlite<'a> {
    Sqlite { conn: tx, path }
}

#[track_caller]
fn refusal<T: std::fmt::Debug>(result: crate::error::Result<T>) -> Refusal {
    match result {
        Err(Error::Refused(refused)) => refused,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The conditional update out of `unknown` holds only at the version the
/// caller saw: a writer whose view is stale (reachable when a store runs
/// transactions side by side under READ COMMITTED) changes nothing, even
/// while the operation is still `unknown`.
#[test]
fn a_transition_at_a_stale_version_changes_nothing_even_while_unknown() {
    let mut fx = Fixture::new();
    let prepared = fx.prepared("op");
    let dispatched = fx.store.begin_dispatch("op", &fx.clock).unwrap();
    assert_eq!(dispatched.version, prepared.version + 1);
    // The operation as it was before the dispatch: unknown now, but at
    // another version than the one this writer holds.
    let stale = Operation {
        surplus_effect_ids: Vec::new(),
        state: OpState::Unknown,
        ..prepared
    };
    let receipt = Fixture::effect("op");
    let recorded = fx
        .store
        .record_receipt(&stale, &receipt, &provenance(), &fx.clock);
    assert_eq!(recorded.unwrap(), None);
    assert_eq!(fx.store.require("op").unwrap(), dispatched);
    assert!(fx.store.evidence("op").unwrap().is_empty());
}

/// SPEC 12 in SQLite's script: a receipt is the first outcome of its
/// dispatch, so one that comes after the dispatch's failed apply is
/// refused `rule_violation` and writes nothing.
#[test]
fn a_receipt_after_its_dispatch_failed_is_refused_rule_violation() {
    let mut fx = Fixture::new();
    let op = fx.dispatched("op");
    let failure = crate::domain::CallFailure {
        seq: 0,
        op_id: "op".into(),
        verb: "apply".into(),
        receiver: "builtin".into(),
        kind: crate::domain::FailureKind::Crash,
        detail: "no answer".into(),
        exit_code: Some(23),
        stderr: String::new(),
        at: fx.clock.now(),
    };
    use crate::store::sql::SqlStore;
    use crate::store::{journal, TriageLog};
    fx.store.record_call_failure(&failure, &fx.clock).unwrap();
    let head = fx.store.read(|db| journal::head(db)).unwrap();
    let receipt = Fixture::effect("op");
    let refused = refusal(
        fx.store
            .record_receipt(&op, &receipt, &provenance(), &fx.clock),
    );
    assert_eq!(refused.code(), "rule_violation", "{refused}");
    assert!(refused.to_string().contains("first outcome"), "{refused}");
    let after = fx.store.read(|db| journal::head(db)).unwrap();
    assert_eq!(after, head, "nothing was written");
    assert_eq!(fx.store.require("op").unwrap(), op);
}

/// A second dispatcher that read `prepared` before the first committed
/// (side by side under READ COMMITTED) finds its update touching no row:
/// it is refused as the row now is, `blind_retry`, in every build, and
/// logs no second dispatch, so the receiver is never started twice.
#[test]
fn a_dispatch_whose_update_touched_no_row_is_refused_and_logs_nothing() {
    let mut fx = Fixture::new();
    let read = fx.prepared("op");
    fx.store.begin_dispatch("op", &fx.clock).unwrap();
    let tx = fx.store.conn.transaction().unwrap();
    let at = fx.clock.now();
    let refused = refusal(super::mark_dispatched(
        &mut on(&tx, &fx.store.path),
        &read,
        at,
    ));
    assert_eq!(refused.code(), "blind_retry");
    assert!(
        matches!(
            refused,
            Refusal::BlindRetry {
                state: OpState::Unknown,
                ..
            }
        ),
        "{refused:?}"
    );
    drop(tx);
    assert_eq!(fx.store.dispatch_count("op").unwrap(), 1);
    assert_eq!(fx.store.require("op").unwrap().version, 2);
}

/// A compensation's dispatch holds its approval in the update's own
/// predicate: when the original is no longer at the approved version
/// after the rules read it, the update changes nothing and the dispatch
/// is refused `stale_version`, naming the version found.
#[test]
fn a_compensation_dispatch_whose_original_moved_after_the_read_changes_nothing() {
    let mut fx = Fixture::new();
    fx.confirmed("op");
    let payload = payload();
    let request = CompensationRequest {
        reason: None,
        original_op_id: "op",
        effect_id: "fx-op",
        approver: "ann",
        expected_version: 3,
        compensation_op_id: "comp",
        action_kind: "refund",
        payload: &payload,
    };
    fx.store.approve_compensation(&request, &fx.clock).unwrap();
    let read = fx.store.require("comp").unwrap();
    // What no rule lets happen, written behind the rules' back.
    fx.store
        .conn
        .execute("UPDATE operations SET version = 4 WHERE op_id = 'op'", [])
        .unwrap();
    let tx = fx.store.conn.transaction().unwrap();
    let at = fx.clock.now();
    let refused = refusal(super::mark_dispatched(
        &mut on(&tx, &fx.store.path),
        &read,
        at,
    ));
    assert!(
        matches!(
            &refused,
            Refusal::StaleVersion { expected: 3, found: 4, changed_by: Some(who), .. }
                if who == "a receipt"
        ),
        "{refused:?}"
    );
    drop(tx);
    assert_eq!(fx.store.dispatch_count("comp").unwrap(), 0);
    assert_eq!(fx.store.require("comp").unwrap().state, OpState::Prepared);
}

/// A decision whose conditional update touched no row (another writer
/// decided after this one read the row) is refused `stale_version`
/// from the row read again: the version found and who changed it, not
/// the version this writer had read.
#[test]
fn a_stale_decision_names_the_version_found_and_who_changed_it() {
    use crate::domain::{Decision, Review, Verdict};
    let mut fx = Fixture::new();
    let read = fx.dispatched("op");
    let payload = payload();
    let absent = super::fixture::absent("op", true);
    let review = |reviewer| Review {
        keep: None,
        op_id: "op",
        payload: &payload,
        reviewer,
        decision: Decision::NotApplied,
        snapshot: &absent,
        expected_version: 2,
    };
    let provenance = provenance();
    fx.recorded_close(&absent);
    let won = fx
        .store
        .record_review(&review("rosa"), &provenance, &fx.clock, false)
        .unwrap();
    assert_eq!(won.operation.version, 3);
    let snapshot = serde_json::to_value(&absent).unwrap();
    let late = review("sam");
    let at = fx.clock.now();
    let verdict = Verdict::TerminalAbsence;
    let judged = (verdict, None, None);
    let t = super::review_transition(&late, &read, judged, &snapshot, &provenance, at);
    let tx = fx.store.conn.transaction().unwrap();
    let refused = refusal(super::decide(&mut on(&tx, &fx.store.path), t));
    assert_eq!(
        refused.to_string(),
        "expected version 2, found 3; the operation is now not_applied (last changed by reviewer rosa)",
    );
    assert_eq!(refused.code(), "stale_version");
    drop(tx);
    assert_eq!(fx.store.evidence("op").unwrap().len(), 1);
}

/// SPEC 12: a decision on a closed snapshot rests on a recorded close
/// holding exactly that snapshot, and names it (`close_seq`); one with
/// no close recorded, or whose snapshot is not the close's, is refused
/// `unbacked_close` and writes nothing.
#[test]
fn a_decision_on_a_closed_snapshot_names_its_recorded_close_or_is_refused_unbacked_close() {
    use crate::domain::{Decision, Review, Snapshot};
    let mut fx = Fixture::new();
    fx.dispatched("op");
    let payload = payload();
    let absent = super::fixture::absent("op", true);
    let review = |snapshot| Review {
        keep: None,
        op_id: "op",
        payload: &payload,
        reviewer: "rosa",
        decision: Decision::NotApplied,
        snapshot,
        expected_version: 2,
    };
    let provenance = provenance();
    let head = |fx: &Fixture| {
        use crate::store::sql::SqlStore;
        (fx.store.read(|db| crate::store::journal::head(db)))
            .unwrap()
            .length
    };
    let before = head(&fx);
    let refused = fx
        .store
        .record_review(&review(&absent), &provenance, &fx.clock, true)
        .unwrap_err();
    assert_eq!(refused.code(), Some("unbacked_close"), "{refused}");
    assert_eq!(head(&fx), before, "nothing was written");
    let other = Snapshot {
        closed_by: Some("someone".into()),
        ..absent.clone()
    };
    fx.recorded_close(&other);
    let before = head(&fx);
    let refused = fx
        .store
        .record_review(&review(&absent), &provenance, &fx.clock, true)
        .unwrap_err();
    assert_eq!(refused.code(), Some("unbacked_close"), "{refused}");
    assert_eq!(head(&fx), before, "nothing was written");
    fx.recorded_close(&absent);
    let close_seq = head(&fx) - 1;
    fx.store
        .record_review(&review(&absent), &provenance, &fx.clock, true)
        .unwrap();
    let evidence = fx.store.evidence("op").unwrap();
    assert_eq!(evidence[0].close_seq, Some(close_seq));
}

/// A policy's decisions of one chunk are one transaction, each checked
/// on its own: one whose version moved since its read is refused
/// `stale_version` alone, one whose snapshot is not closed is refused
/// `unsupported_verdict` alone, and the other is recorded as the
/// policy's (`source: "policy"`, naming it).
#[test]
fn a_policy_decision_refused_alone_leaves_the_others_of_its_chunk_recorded() {
    use crate::domain::{Decision, EvidenceSource, Policy, Provenance, Review};
    let mut fx = Fixture::new();
    for op in ["ok", "stale", "open"] {
        fx.dispatched(op);
    }
    let payload = payload();
    let absent = super::fixture::absent;
    let snapshots = [
        absent("ok", true),
        absent("stale", true),
        absent("open", false),
    ];
    let versions = [2, 1, 2];
    let provenance = provenance();
    fx.recorded_close(&snapshots[0]);
    let reviews: Vec<(Review<'_>, Provenance)> = (snapshots.iter().zip(versions))
        .map(|(snapshot, expected_version)| {
            let review = Review {
                keep: None,
                op_id: &snapshot.op_id,
                payload: &payload,
                reviewer: "robot",
                decision: Decision::NotApplied,
                snapshot,
                expected_version,
            };
            (review, provenance.clone())
        })
        .collect();
    let results = fx
        .store
        .record_policy_reviews(Policy::Provable, &reviews, &fx.clock)
        .unwrap();
    let codes: Vec<Option<&str>> = results
        .iter()
        .map(|r| {
            r.as_ref()
                .err()
                .and_then(|e| e.refusal())
                .map(Refusal::code)
        })
        .collect();
    assert_eq!(
        codes,
        [None, Some("stale_version"), Some("unsupported_verdict")]
    );
    let evidence = fx.store.evidence("ok").unwrap();
    assert_eq!(
        (
            evidence[0].source,
            evidence[0].policy,
            evidence[0].reviewer.as_deref()
        ),
        (
            EvidenceSource::Policy,
            Some(Policy::Provable),
            Some("robot")
        )
    );
    for op in ["stale", "open"] {
        assert!(fx.store.evidence(op).unwrap().is_empty(), "{op}");
        assert_eq!(fx.store.require(op).unwrap().state, OpState::Unknown);
    }
}

/// Two writers that both read an op id as free (side by side under READ
/// COMMITTED) race to insert it: the loser's key violation is
/// `duplicate_operation` (exit 3), not a storage failure (exit 4).
#[test]
fn an_op_id_taken_after_the_read_is_refused_duplicate_operation() {
    use crate::domain::{NewOperation, OpKind};
    let mut fx = Fixture::new();
    fx.prepared("op");
    let payload = payload();
    let new = NewOperation {
        op_id: "op",
        action_kind: "pay",
        payload: &payload,
        origin: None,
    };
    let tx = fx.store.conn.transaction().unwrap();
    let at = fx.clock.now();
    let db = &mut on(&tx, &fx.store.path);
    let inserted = super::insert_op(db, &new, OpKind::Original, None, None, at);
    let refused = refusal(inserted);
    assert_eq!(refused, Refusal::DuplicateOperation("op".into()));
}

/// The same for approvals: a second approval of one effect that passed
/// the read is `already_approved`; one whose compensation id is taken,
/// `duplicate_operation`.
#[test]
fn an_approval_taken_after_the_read_is_refused_already_approved() {
    let mut fx = Fixture::new();
    fx.confirmed("op");
    fx.confirmed("other");
    let payload = payload();
    let request = |original_op_id, effect_id, compensation_op_id| CompensationRequest {
        reason: None,
        original_op_id,
        effect_id,
        approver: "ann",
        expected_version: 3,
        compensation_op_id,
        action_kind: "refund",
        payload: &payload,
    };
    fx.store
        .approve_compensation(&request("op", "fx-op", "comp"), &fx.clock)
        .unwrap();
    let tx = fx.store.conn.transaction().unwrap();
    let path = fx.store.path.clone();
    let db = &mut on(&tx, &path);
    let again = super::insert_approval(db, &request("op", "fx-op", "comp-2"), "bob");
    assert_eq!(
        refusal(again),
        Refusal::AlreadyApproved {
            op_id: "op".into(),
            effect_id: "fx-op".into()
        }
    );
    let taken = request("other", "fx-other", "comp");
    let taken = super::insert_approval(db, &taken, "bob");
    assert_eq!(refusal(taken), Refusal::DuplicateOperation("comp".into()));
}

/// A key that is not a claim (here the journal's seq) stays a storage
/// error: only the keys that mean a refusal are mapped.
#[test]
fn a_violation_of_another_key_stays_a_storage_error() {
    let fx = Fixture::new();
    let error = fx
        .store
        .conn
        .execute(
            "INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
             VALUES (1, 'noted', NULL, '{}', '', '')",
            [],
        )
        .unwrap_err();
    assert_eq!(super::super::keys::violated(&error), None);
    let claim = super::Claim {
        op_id: Some("op"),
        ..super::Claim::default()
    };
    let error = crate::store::sql_error(&fx.store.path, error);
    let mapped =
        super::conflict::Claimed::claiming(Err::<(), _>(error), &mut fx.store.db(), &claim);
    assert!(matches!(mapped, Err(Error::Store(_))), "{mapped:?}");
}

/// `SqlStore::write` commits what an act wrote when it returns `Ok`,
/// and rolls all of it back when it returns an error, after writing.
#[test]
fn a_write_commits_an_act_that_succeeds_and_rolls_back_one_that_fails() {
    use crate::store::journal;
    use crate::store::sql::SqlStore;
    let mut fx = Fixture::new();
    let before = fx.store.read(|db| journal::head(db)).unwrap();
    let append = |db: &mut dyn crate::store::sql::Db| {
        let fields = serde_json::Map::new();
        journal::append(db, EntryKind::Noted, None, fields)
    };
    let failed: crate::error::Result<()> =
        fx.store
            .write(&fx.clock, crate::domain::team::Act::Note, |db, _| {
                append(db)?;
                Err(Refusal::EmptyReviewer.into())
            });
    assert_eq!(refusal(failed), Refusal::EmptyReviewer);
    let head = fx.store.read(|db| journal::head(db)).unwrap();
    assert_eq!(head, before);
    let sealed = fx
        .store
        .write(&fx.clock, crate::domain::team::Act::Note, |db, _| {
            Ok(append(db)?)
        })
        .unwrap();
    let head = fx.store.read(|db| journal::head(db)).unwrap();
    assert_eq!((head.length, head.head_hash), (sealed.seq, sealed.hash));
    assert_eq!(sealed.seq, before.length + 1);
}

/// The schema's CHECK on `journal.kind` names exactly the entry kinds.
#[test]
fn the_journal_accepts_exactly_the_kinds_of_entry() {
    let check = super::schema::SCHEMA
        .split("CREATE TABLE journal (")
        .nth(1)
        .and_then(|table| table.split("kind TEXT NOT NULL CHECK (kind IN (").nth(1))
        .and_then(|rest| rest.split("))").next())
        .unwrap();
    let listed: Vec<String> = check
        .split(',')
        .map(|k| k.trim().trim_matches('\'').to_string())
        .collect();
    // `upgraded` and `settings` are PostgreSQL's alone (`recon db
    // upgrade`, `db init`): a file is upgraded on opening, with no entry,
    // and has no settings but its workspace id, which its ledger holds.
    let kinds: Vec<&str> = EntryKind::ALL
        .iter()
        .filter(|k| !matches!(k, EntryKind::Upgraded | EntryKind::Settings))
        .map(|k| k.as_str())
        .collect();
    assert_eq!(listed, kinds);
}
