//! The tamper-evident evidence log: `recon verify` and `recon export`.
//!
//! The attacker here has the file: they drop the append-only triggers and
//! edit, delete, reorder or forge rows with plain SQL. Every such change is
//! detected, by the chain, by the cross-check with the operations, or (for a
//! chain rewritten with fresh hashes) by an earlier export. The exported
//! lines are rehashed here with plain `sha2`, so the format is reproducible
//! without recon.

use crate::support::{run, Lab, Run};
use recon::dispatch::DispatchOptions;
use recon::domain::{CompensationRequest, Decision};
use recon::receiver::Fault;
use recon::workspace::ReconcileRequest;
use rusqlite::Connection;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A log of four rows: `a` confirmed by its receipt, `b` not_applied by a
/// reviewer behind a close, `c` confirmed by a reviewer from an open read,
/// and `comp`, a compensation of `a`, confirmed by its receipt.
fn four_row_lab() -> Lab {
    let mut lab = Lab::new();
    let payload = json!({"amount": 0.1, "to": "acct-7"});
    for (op, fault) in [
        ("a", None),
        ("b", Some(Fault::CrashBeforeCommit)),
        ("c", Some(Fault::CrashAfterCommit)),
    ] {
        lab.dispatched(op, "pay", &payload, fault);
    }
    let ws = &mut lab.ws;
    let review = |op_id, decision, close| ReconcileRequest {
        op_id,
        reviewer: "Ann",
        decision,
        expected_version: 2,
        payload: None,
        close_authorized_by: close,
    };
    ws.reconcile(&review("b", Decision::NotApplied, Some("Ann")))
        .unwrap();
    ws.reconcile(&review("c", Decision::Confirmed, None))
        .unwrap();
    ws.approve_compensation(&CompensationRequest {
        original_op_id: "a",
        effect_id: "fx-000001",
        approver: "Bob",
        expected_version: 3,
        compensation_op_id: "comp",
        action_kind: "refund",
        payload: &json!({"amount": 0.1}),
    })
    .unwrap();
    ws.dispatch("comp", DispatchOptions::default()).unwrap();
    assert_eq!(ws.evidence_log().unwrap().len(), 4);
    lab
}

fn verify(dir: &Path, extra: &[&str]) -> (Run, Value) {
    let ws = dir.display().to_string();
    let mut args = vec!["verify", "--workspace", &ws, "--json"];
    args.extend(extra);
    let r = run(&args, None);
    let report = r.json();
    (r, report)
}

fn export(dir: &Path) -> Run {
    run(&["export", "--workspace", &dir.display().to_string()], None)
}

/// The attacker's access: the file, with the append-only triggers dropped.
fn tamper(dir: &Path, sql: &str) {
    let conn = Connection::open(dir.join("sender.sqlite")).unwrap();
    conn.execute_batch(
        "DROP TRIGGER IF EXISTS evidence_append_only_update;
         DROP TRIGGER IF EXISTS evidence_append_only_delete;",
    )
    .unwrap();
    conn.execute_batch(sql).unwrap();
}

/// A hash as a third party computes it: SHA-256 over the previous hash and
/// the canonical JSON (sorted keys, no whitespace) of the hashed columns.
fn sha(prev: &str, content: &Value) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(content.to_string().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The attacker who knows the format: recomputes every hash in seq order,
/// so the chain is intact again after their edits.
fn rechain(dir: &Path) {
    let conn = Connection::open(dir.join("sender.sqlite")).unwrap();
    let rows: Vec<(i64, Value)> = conn
        .prepare(
            "SELECT seq, op_id, source, reviewer, decision, verdict, snapshot, from_version,
                    to_version, effect_id, receiver, receiver_describe_sha256,
                    response_sha256 FROM evidence ORDER BY seq",
        )
        .unwrap()
        .query_map([], |r| {
            let snapshot: String = r.get(6)?;
            Ok((
                r.get(0)?,
                json!({
                    "seq": r.get::<_, i64>(0)?,
                    "op_id": r.get::<_, String>(1)?,
                    "source": r.get::<_, String>(2)?,
                    "reviewer": r.get::<_, Option<String>>(3)?,
                    "decision": r.get::<_, String>(4)?,
                    "verdict": r.get::<_, Option<String>>(5)?,
                    "snapshot": serde_json::from_str::<Value>(&snapshot).unwrap(),
                    "from_version": r.get::<_, i64>(7)?,
                    "to_version": r.get::<_, i64>(8)?,
                    "effect_id": r.get::<_, Option<String>>(9)?,
                    "receiver": r.get::<_, String>(10)?,
                    "receiver_describe_sha256": r.get::<_, String>(11)?,
                    "response_sha256": r.get::<_, String>(12)?,
                }),
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut prev = GENESIS.to_string();
    for (seq, content) in rows {
        let hash = sha(&prev, &content);
        conn.execute(
            "UPDATE evidence SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
            rusqlite::params![prev, hash, seq],
        )
        .unwrap();
        prev = hash;
    }
}

#[track_caller]
fn assert_broken_at(dir: &Path, seq: i64, reason: &str) {
    let (r, report) = verify(dir, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert_eq!(report["intact"], false);
    assert_eq!(report["first_broken"]["seq"], seq, "{report:#}");
    let found = report["first_broken"]["reason"].as_str().unwrap();
    assert!(found.contains(reason), "expected {reason:?}, got {found:?}");
    assert_eq!(export(dir).code, Some(1), "export must flag a broken log");
}

#[test]
fn an_untouched_log_verifies_and_its_export_rehashes_with_plain_sha256() {
    let lab = four_row_lab();
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    assert_eq!(report["rows"], 4);
    assert_eq!(report["state_mismatches"], json!([]));
    let human = run(&["verify", "--workspace", &lab.path_str()], None);
    assert!(
        human.stdout.starts_with("evidence log intact: 4 rows"),
        "{}",
        human.stdout
    );

    let exported = export(lab.path());
    assert_eq!(exported.code, Some(0), "{}", exported.stderr);
    let mut prev = GENESIS.to_string();
    let mut seqs = Vec::new();
    for line in exported.stdout.lines() {
        let mut row: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
        let hash = row.remove("hash").unwrap();
        assert_eq!(row.remove("prev_hash").unwrap(), prev.as_str());
        assert_eq!(
            hash,
            sha(&prev, &Value::Object(row.clone())).as_str(),
            "{line}"
        );
        assert_eq!(
            line,
            serde_json::to_string(&serde_json::from_str::<Value>(line).unwrap()).unwrap(),
            "canonical"
        );
        seqs.push(row["seq"].as_i64().unwrap());
        prev = hash.as_str().unwrap().to_string();
    }
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(report["head_hash"], prev.as_str());
    // The snapshot a reviewer saw is in the export in full.
    let second: Value = serde_json::from_str(exported.stdout.lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["snapshot"]["closed"], true);
    assert_eq!(second["verdict"], "terminal_absence");
}

#[test]
fn an_empty_log_is_intact() {
    let lab = Lab::new();
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0));
    assert_eq!(
        (report["rows"].clone(), report["head_hash"].clone()),
        (json!(0), json!(GENESIS))
    );
    let exported = export(lab.path());
    assert_eq!((exported.code, exported.stdout.as_str()), (Some(0), ""));
}

#[test]
fn editing_any_column_of_a_row_is_detected_at_that_row() {
    let edits: [(&str, i64, &str); 10] = [
        (
            "UPDATE evidence SET reviewer = 'Mallory' WHERE seq = 2",
            2,
            "the row was edited",
        ),
        (
            "UPDATE evidence SET decision = 'confirmed', to_version = 3 WHERE seq = 2",
            2,
            "the row was edited",
        ),
        (
            "UPDATE evidence SET verdict = 'unique_exact_match' WHERE seq = 3",
            3,
            "the row was edited",
        ),
        (
            "UPDATE evidence SET effect_id = 'fx-000099' WHERE seq = 1",
            1,
            "the row was edited",
        ),
        (
            r#"UPDATE evidence SET snapshot = '{"authoritative":true,"closed":true,"complete":true,"matches":[],"op_id":"c"}' WHERE seq = 3"#,
            3,
            "the row was edited",
        ),
        (
            "UPDATE evidence SET snapshot = 'not json at all' WHERE seq = 4",
            4,
            "the snapshot is not JSON",
        ),
        // A version that is now text (SQLite would keep '2' an integer, but
        // not 'two'), and one that is now a float.
        (
            "UPDATE evidence SET from_version = 'two' WHERE seq = 2",
            2,
            "the row was edited",
        ),
        (
            "UPDATE evidence SET to_version = 3.5 WHERE seq = 1",
            1,
            "the row was edited",
        ),
        (
            "UPDATE evidence SET hash = X'00' WHERE seq = 3",
            3,
            "hash is not text",
        ),
        // A forger who recomputes the edited row's hash breaks the next link.
        (
            "UPDATE evidence SET reviewer = 'Mallory' WHERE seq = 2",
            3,
            "prev_hash does not match",
        ),
    ];
    for (i, (sql, seq, reason)) in edits.into_iter().enumerate() {
        let lab = four_row_lab();
        tamper(lab.path(), sql);
        if i == edits.len() - 1 {
            let conn = Connection::open(lab.path().join("sender.sqlite")).unwrap();
            let content: Value = lab
                .ws
                .evidence_log()
                .unwrap()
                .into_iter()
                .find(|r| r.seq == 2)
                .map(|r| recon::audit::chained_content(&r))
                .unwrap();
            let prev: String = conn
                .query_row("SELECT hash FROM evidence WHERE seq = 1", [], |r| r.get(0))
                .unwrap();
            conn.execute(
                "UPDATE evidence SET hash = ?1 WHERE seq = 2",
                [sha(&prev, &content)],
            )
            .unwrap();
        }
        eprintln!("edit {i}: {sql}");
        assert_broken_at(lab.path(), seq, reason);
    }
}

#[test]
fn deleting_a_row_is_detected_wherever_it_was() {
    // First and middle rows break the next link; the last row is invisible
    // to the chain, but its operation's state change now has no record.
    for (seq, broken_at) in [(1, Some(2)), (2, Some(3)), (3, Some(4))] {
        let lab = four_row_lab();
        tamper(
            lab.path(),
            &format!("DELETE FROM evidence WHERE seq = {seq}"),
        );
        assert_broken_at(lab.path(), broken_at.unwrap(), "prev_hash does not match");
    }
    let lab = four_row_lab();
    tamper(lab.path(), "DELETE FROM evidence WHERE seq = 4");
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(1));
    assert_eq!(
        report["first_broken"],
        Value::Null,
        "the chain itself is intact"
    );
    assert_eq!(
        report["state_mismatches"],
        json!(["operation comp is confirmed at version 3 but has no evidence row"])
    );
    let human = run(&["verify", "--workspace", &lab.path_str()], None);
    assert!(
        human.stdout.contains("BROKEN") && human.stdout.contains("comp is confirmed"),
        "{}",
        human.stdout
    );
}

#[test]
fn reordering_rows_is_detected() {
    // Swap every column but seq between rows 2 and 3.
    let lab = four_row_lab();
    tamper(
        lab.path(),
        "CREATE TEMP TABLE t AS SELECT * FROM evidence WHERE seq IN (2, 3);
         UPDATE evidence SET (op_id, source, reviewer, decision, verdict, snapshot, from_version,
                              to_version, effect_id, prev_hash, hash) =
             (SELECT op_id, source, reviewer, decision, verdict, snapshot, from_version,
                     to_version, effect_id, prev_hash, hash FROM t WHERE t.seq = 5 - evidence.seq)
         WHERE seq IN (2, 3);",
    );
    assert_broken_at(lab.path(), 2, "");
    // Renumber: row 2 moves to the end.
    let lab = four_row_lab();
    tamper(lab.path(), "UPDATE evidence SET seq = 10 WHERE seq = 2");
    assert_broken_at(lab.path(), 3, "prev_hash does not match");
}

#[test]
fn a_forged_row_with_recomputed_hashes_is_caught_by_the_cross_check() {
    // An extra "decision" for an op that is still unknown, properly chained.
    let mut lab = Lab::new();
    lab.dispatched("x", "pay", &json!({}), Some(Fault::CrashAfterCommit));
    tamper(
        lab.path(),
        r#"INSERT INTO evidence (seq, op_id, source, reviewer, decision, verdict, snapshot,
                                 from_version, to_version, effect_id, receiver,
                                 receiver_describe_sha256, response_sha256, prev_hash, hash)
           VALUES (1, 'x', 'review', 'Mallory', 'not_applied', 'terminal_absence', '{}', 2, 3,
                   NULL, 'builtin', '', '', '', '')"#,
    );
    rechain(lab.path());
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(1));
    assert_eq!(
        report["first_broken"],
        Value::Null,
        "the forger rechained it"
    );
    assert_eq!(
        report["state_mismatches"],
        json!(["operation x is unknown at version 2 but has 1 evidence rows"])
    );
}

#[test]
fn a_consistent_rewrite_passes_the_database_alone_but_not_an_earlier_export() {
    let lab = four_row_lab();
    let kept = lab.path().join("kept.jsonl");
    std::fs::write(&kept, export(lab.path()).stdout).unwrap();
    let kept = kept.display().to_string();
    let (r, report) = verify(lab.path(), &["--against", &kept]);
    assert_eq!(r.code, Some(0), "{report:#}");
    assert_eq!(report["export"]["rows"], 4);

    // Rewrite history: another reviewer, every hash recomputed. The
    // database alone cannot tell; the copy kept outside it can.
    tamper(
        lab.path(),
        "UPDATE evidence SET reviewer = 'Mallory' WHERE seq = 2",
    );
    rechain(lab.path());
    let (r, _) = verify(lab.path(), &[]);
    assert_eq!(
        r.code,
        Some(0),
        "documented limit: a full rewrite keeps the chain intact"
    );
    let (r, report) = verify(lab.path(), &["--against", &kept]);
    assert_eq!(r.code, Some(1));
    assert_eq!(report["export"]["first_difference"]["seq"], 2);
    assert!(report["export"]["first_difference"]["reason"]
        .as_str()
        .unwrap()
        .contains("rewritten"));

    // Cutting the last rows and rolling their op back is consistent too;
    // the export still has them.
    let lab = four_row_lab();
    let kept = lab.path().join("kept.jsonl");
    std::fs::write(&kept, export(lab.path()).stdout).unwrap();
    tamper(
        lab.path(),
        "DELETE FROM evidence WHERE seq = 4;
         UPDATE operations SET state = 'unknown', version = 2, confirmed_effect_id = NULL
         WHERE op_id = 'comp';",
    );
    let (r, _) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0));
    let (r, report) = verify(lab.path(), &["--against", &kept.display().to_string()]);
    assert_eq!(r.code, Some(1));
    assert!(report["export"]["first_difference"]["reason"]
        .as_str()
        .unwrap()
        .contains("fewer rows"));
}

#[test]
fn an_edited_export_is_not_trusted_as_a_reference() {
    let lab = four_row_lab();
    let text = export(lab.path()).stdout.replace("\"Ann\"", "\"Eve\"");
    let kept = lab.path().join("kept.jsonl");
    std::fs::write(&kept, text).unwrap();
    let (r, report) = verify(lab.path(), &["--against", &kept.display().to_string()]);
    assert_eq!(r.code, Some(1));
    assert!(report["export"]["first_difference"]["reason"]
        .as_str()
        .unwrap()
        .contains("exported copy itself is broken"));
}

#[test]
fn export_writes_a_file_atomically_and_verify_needs_only_the_sender() {
    let lab = four_row_lab();
    let out = lab.path().join("log.jsonl");
    let r = run(
        &[
            "export",
            "--workspace",
            &lab.path_str(),
            "--output",
            &out.display().to_string(),
        ],
        None,
    );
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        export(lab.path()).stdout
    );
    let dir = lab.path().to_path_buf();
    drop(lab.ws);
    std::fs::remove_file(dir.join("receiver.sqlite")).unwrap();
    let (r, _) = verify(&dir, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

#[test]
fn verify_reports_storage_errors_with_exit_4() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("nope").display().to_string();
    let r = run(&["verify", "--workspace", &missing], None);
    assert_eq!(r.code, Some(4), "{}", r.stderr);
    std::fs::write(scratch.path().join("sender.sqlite"), "garbage").unwrap();
    let r = run(
        &[
            "verify",
            "--workspace",
            &scratch.path().display().to_string(),
        ],
        None,
    );
    assert_eq!(r.code, Some(4));
    assert!(
        r.stderr.contains("is not a recon SQLite database"),
        "{}",
        r.stderr
    );
}
