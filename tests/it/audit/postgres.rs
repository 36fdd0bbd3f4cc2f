//! The audit twins on PostgreSQL (issue 19 item 6): there the attacker
//! has a superuser connection, not a file. On a live outbox the triggers
//! refuse an `UPDATE` or `DELETE` of the journal (and of the append-only
//! tables) even to the superuser; one who switches the triggers off for
//! the session (`session_replication_role = replica`) can edit, but then
//! `recon verify` fails naming the difference, as it does for a SQLite
//! file edited with its triggers dropped (`crate::audit`).

use crate::stores::{Site, Store};
use recon::domain::Decision;
use recon::receiver::Fault;
use recon::workspace::ReconcileRequest;
use serde_json::{json, Value};

/// A live outbox on PostgreSQL: `a` confirmed by its receipt; `b` lost
/// before the receiver wrote, then closed and decided `not_applied` by
/// ann (a review's evidence row).
fn live() -> Site {
    let mut site = Site::new(Store::Postgres);
    site.dispatched("a", "pay", &json!({"n": 1}), None);
    site.dispatched("b", "pay", &json!({"n": 2}), Some(Fault::CrashBeforeCommit));
    site.ws
        .reconcile(&ReconcileRequest {
            keep: None,
            op_id: "b",
            reviewer: "ann",
            decision: Decision::NotApplied,
            expected_version: 2,
            payload: None,
            close_authorized_by: Some("ann"),
        })
        .expect("decide b");
    site.assert_sound();
    site
}

/// The seq of the one journal entry of `kind` for `op`.
fn seq_of(site: &Site, kind: &str, op: &str) -> i64 {
    let sql = format!("SELECT seq FROM journal WHERE kind = '{kind}' AND op_id = '{op}'");
    let found = site.try_psql(&sql).expect("read the journal");
    found
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: {found:?}"))
}

/// `recon verify --json` against the site: it must fail (exit 1).
#[track_caller]
fn failed_verify(site: &Site) -> Value {
    let out = site.run(&["verify", "--json"], None);
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(report["intact"], false, "{report:#}");
    report
}

/// Runs `sql` as the superuser with every trigger off for the session.
#[track_caller]
fn behind_the_triggers(site: &Site, sql: &str) {
    let sql = format!("SET session_replication_role = replica; {sql}");
    site.try_psql(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[test]
fn on_a_live_outbox_the_triggers_refuse_the_superuser_an_update_or_delete_of_the_journal() {
    if !Store::Postgres.available(module_path!()) {
        return;
    }
    let site = live();
    let decided = seq_of(&site, "decided", "b");
    let before = site.dump();
    for (sql, says) in [
        (
            format!(
                "UPDATE journal SET entry = replace(entry, 'ann', 'eve') WHERE seq = {decided}"
            ),
            "the journal is append-only",
        ),
        (
            "DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)".to_string(),
            "the journal is append-only",
        ),
        ("TRUNCATE journal CASCADE".to_string(), "append-only"),
        (
            "UPDATE evidence SET reviewer = 'eve' WHERE op_id = 'b'".to_string(),
            "append-only",
        ),
        ("DELETE FROM evidence".to_string(), "append-only"),
        (
            "UPDATE journal_head SET seq = seq + 1".to_string(),
            "moves only by appending",
        ),
    ] {
        let refused = site.try_psql(&sql);
        assert!(
            refused.as_ref().is_err_and(|e| e.contains(says)),
            "{sql}: {refused:?}"
        );
    }
    assert_eq!(site.dump(), before, "nothing was changed");
    site.assert_sound();
}

#[test]
fn with_the_triggers_off_an_edited_operation_evidence_row_or_entry_fails_verify_naming_it() {
    if !Store::Postgres.available(module_path!()) {
        return;
    }
    for (sql, op, field) in [
        (
            r#"UPDATE operations SET payload = '{"n":9}' WHERE op_id = 'a'"#,
            "a",
            "payload",
        ),
        (
            "UPDATE operations SET state = 'confirmed' WHERE op_id = 'b'",
            "b",
            "state",
        ),
        (
            "UPDATE evidence SET reviewer = 'Mallory' WHERE op_id = 'b'",
            "b",
            "evidence[0].reviewer",
        ),
        (
            "UPDATE evidence SET decision = 'confirmed' WHERE op_id = 'b'",
            "b",
            "evidence[0].decision",
        ),
        ("DELETE FROM evidence WHERE op_id = 'a'", "a", "evidence[0]"),
    ] {
        let site = live();
        behind_the_triggers(&site, sql);
        let report = failed_verify(&site);
        assert_eq!(report["first_broken"], Value::Null, "{sql}: {report:#}");
        let mismatches = report["projection_mismatches"].as_array().unwrap();
        assert!(
            mismatches
                .iter()
                .any(|m| m["op_id"] == op && m["field"] == field),
            "{sql}: no mismatch {op} {field}: {mismatches:#?}"
        );
    }
}

#[test]
fn with_the_triggers_off_an_edited_or_deleted_journal_entry_breaks_the_chain_where_it_was() {
    if !Store::Postgres.available(module_path!()) {
        return;
    }
    // Each case: the edit of the entry at {seq}, the entry (kind, op), how
    // far after it the chain breaks, and why.
    let cases = [
        (
            "UPDATE journal SET entry = replace(entry, 'ann', 'eve') WHERE seq = {seq}",
            ("decided", "b"),
            0,
            "hash does not match the entry's content",
        ),
        (
            "UPDATE journal SET prev_hash = hash WHERE seq = {seq}",
            ("receipt", "a"),
            0,
            "prev_hash does not match",
        ),
        (
            "DELETE FROM journal WHERE seq = {seq}",
            ("dispatched", "a"),
            1,
            "where seq",
        ),
    ];
    for (sql, (kind, op), after, reason) in cases {
        let site = live();
        let seq = seq_of(&site, kind, op);
        let sql = sql.replace("{seq}", &seq.to_string());
        behind_the_triggers(&site, &sql);
        let report = failed_verify(&site);
        let broken = &report["first_broken"];
        assert_eq!(broken["seq"], seq + after, "{sql}: {report:#}");
        let found = broken["reason"].as_str().unwrap_or_default();
        assert!(found.contains(reason), "{sql}: {found}");
    }
}

/// The last act removed whole behind the triggers (its entry and the row
/// it made) leaves every table the projection of what is left: only the
/// journal's head, which the chain trigger moved, still names the entry.
#[test]
fn with_the_triggers_off_the_last_entry_removed_with_its_row_fails_verify_at_the_journal_head() {
    if !Store::Postgres.available(module_path!()) {
        return;
    }
    let mut site = live();
    site.ws.note("a", "ann", "paid twice?").expect("a note");
    let seq = seq_of(&site, "noted", "a");
    behind_the_triggers(
        &site,
        &format!("DELETE FROM notes WHERE seq = {seq}; DELETE FROM journal WHERE seq = {seq}"),
    );
    let report = failed_verify(&site);
    assert_eq!(report["first_broken"], Value::Null, "{report:#}");
    let mismatches = report["projection_mismatches"].as_array().expect("a list");
    assert_eq!(mismatches.len(), 1, "{report:#}");
    assert_eq!(mismatches[0]["field"], "journal_head", "{report:#}");
    assert_eq!(mismatches[0]["journal"]["seq"], seq - 1, "{report:#}");
    assert_eq!(mismatches[0]["table"]["seq"], seq, "{report:#}");
}
