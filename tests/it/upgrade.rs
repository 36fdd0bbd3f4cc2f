//! Upgrading a wave-1 (schema 4) workspace: a real one, made by recon at
//! 4c7ba8b (tests/fixtures/schema4/README.md), always copied to a temporary
//! directory first. Opening it upgrades both files in one transaction each,
//! times every old operation at the upgrade (SPEC 9), and `verify` accepts
//! the journal written before the upgrade and still catches any edit.

use crate::audit::tamper;
use crate::support::{dump, program, run, run_with_env, Run};
use recon::clock::FixedClock;
use recon::domain::{Decision, Timestamp};
use recon::faults::{CRASH_EXIT_CODE, CRASH_POINT_ENV};
use recon::settings::OpenOptions;
use recon::workspace::{ObserveRequest, ReconcileRequest, Workspace};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const FILES: [&str; 2] = ["sender.sqlite", "receiver.sqlite"];

/// The journal the fixture holds, and its operations.
const ENTRIES_BEFORE: i64 = 34;
/// The journal once upgraded: the fixture's, and the registration of the
/// built-in ledger its operations were routed to implicitly.
const ENTRIES: i64 = ENTRIES_BEFORE + 1;
const OPERATIONS: usize = 14;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema4")
}

/// The fixture's files, copied to a fresh temporary directory.
fn copy_of_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in FILES {
        std::fs::copy(fixture().join(file), dir.path().join(file)).unwrap();
    }
    dir
}

fn time(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

const UPGRADE_AT: &str = "2026-12-03T09:00:00.000Z";

/// Opens the workspace through the library with a clock fixed at `at`.
fn open_at(dir: &Path, at: &str) -> Workspace {
    Workspace::open_with_clock(
        dir,
        OpenOptions::default(),
        Arc::new(FixedClock::at(time(at))),
    )
    .unwrap()
    .with_receiver_program(program())
}

fn user_version(path: &Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn meta(dir: &Path, key: &str) -> Option<String> {
    Connection::open(dir.join("sender.sqlite"))
        .unwrap()
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

fn schema(path: &Path) -> Vec<(String, String, Option<String>)> {
    Connection::open(path)
        .unwrap()
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn verify(dir: &Path) -> (Run, Value) {
    let r = run(
        &["verify", "--workspace", dir.to_str().unwrap(), "--json"],
        None,
    );
    let report = r.json();
    (r, report)
}

#[track_caller]
fn assert_intact(dir: &Path, entries: i64) {
    let (r, report) = verify(dir);
    assert_eq!(r.code, Some(0), "{:#}", report);
    assert_eq!(report["journal_entries"], json!(entries), "{report:#}");
    assert_eq!(report["projection_mismatches"], json!([]));
    assert_eq!(report["state_mismatches"], json!([]));
}

#[test]
fn a_schema4_workspace_opens_with_every_operation_timed_at_the_upgrade() {
    let pristine: Vec<Vec<u8>> = FILES
        .iter()
        .map(|f| std::fs::read(fixture().join(f)).unwrap())
        .collect();
    let dir = copy_of_fixture();
    let ws = open_at(dir.path(), UPGRADE_AT);
    let at = time(UPGRADE_AT);
    let ops = ws.ops(None, None, 100).unwrap();
    assert_eq!(ops.len(), OPERATIONS);
    for op in &ops {
        let triage = &op.triage;
        assert_eq!(
            (triage.created_at, triage.updated_at),
            (at, at),
            "{}",
            op.op_id
        );
        let dispatches = ws.dispatch_count(&op.op_id).unwrap();
        assert_eq!(triage.dispatch_count, dispatches, "{}", op.op_id);
        let last = (dispatches > 0).then_some(at);
        assert_eq!(triage.last_dispatched_at, last, "{}", op.op_id);
        assert_eq!(triage.latest_observation, None);
        assert_eq!(triage.escalated, None);
        let detail = ws.show(&op.op_id).unwrap();
        assert!(detail.evidence.iter().all(|e| e.recorded_at == at));
        assert!(detail.closes.iter().all(|c| c.closed_at == at));
    }
    // The fixture has dispatched, decided and closed operations.
    let dispatched = ops.iter().filter(|o| o.triage.dispatch_count > 0).count();
    assert_eq!(dispatched, 12);
    let evidence = ws.evidence_log().unwrap();
    assert_eq!(evidence.len(), 4);
    for file in FILES {
        assert_eq!(user_version(&dir.path().join(file)), 7, "{file}");
    }
    assert_eq!(meta(dir.path(), "upgraded_at").as_deref(), Some(UPGRADE_AT));
    assert_eq!(
        meta(dir.path(), "upgraded_through_seq").as_deref(),
        Some(ENTRIES_BEFORE.to_string().as_str())
    );
    // Only the copy changed.
    for (file, bytes) in FILES.iter().zip(pristine) {
        assert_eq!(std::fs::read(fixture().join(file)).unwrap(), bytes);
    }
}

/// No receiver is implicit from schema 6 on: the upgrade registers the
/// built-in ledger as `builtin`, journaled after the old entries, for
/// exactly the action kinds the old operations were routed to that way
/// (never `*`), so each still reads its receiver and a new kind is refused.
#[test]
fn the_upgrade_registers_the_builtin_ledger_for_exactly_the_kinds_routed_to_it() {
    let dir = copy_of_fixture();
    let mut ws = open_at(dir.path(), UPGRADE_AT);
    let ops = ws.ops(None, None, 100).unwrap();
    let mut kinds: Vec<String> = ops
        .iter()
        .filter(|op| op.compensates_effect_id.is_none())
        .map(|op| op.action_kind.clone())
        .collect();
    kinds.sort();
    kinds.dedup();
    let receivers = ws.receivers().unwrap();
    assert_eq!(receivers.len(), 1, "{receivers:?}");
    let ledger = &receivers[0];
    assert_eq!((ledger.name.as_str(), ledger.builtin), ("builtin", true));
    assert_eq!(ledger.actions, kinds);
    assert!(ops.iter().all(|op| op.receiver == "builtin"));
    let last = Connection::open(dir.path().join("sender.sqlite"))
        .unwrap()
        .query_row(
            "SELECT kind, seq FROM journal ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
        )
        .unwrap();
    assert_eq!(last, ("receiver_registered".to_string(), ENTRIES));
    let refused = ws
        .prepare("op-new", "never_routed", &json!({}))
        .unwrap_err();
    assert_eq!(refused.refusal().map(|r| r.code()), Some("no_receiver"));
    let read = ws.snapshot(&ops[0].op_id, None);
    assert!(read.is_ok(), "{read:?}");
}

#[test]
fn an_upgraded_workspace_has_the_schema_of_a_fresh_one() {
    let dir = copy_of_fixture();
    drop(open_at(dir.path(), UPGRADE_AT));
    let fresh = tempfile::tempdir().unwrap();
    drop(Workspace::open(fresh.path(), OpenOptions::default().creating()).unwrap());
    for file in FILES {
        let upgraded = schema(&dir.path().join(file));
        assert_eq!(upgraded, schema(&fresh.path().join(file)), "{file}");
    }
    let names = schema(&dir.path().join("sender.sqlite"));
    assert!(names.iter().any(|(_, name, _)| name == "observations"));
}

#[test]
fn verify_passes_after_the_upgrade_and_after_new_acts() {
    let dir = copy_of_fixture();
    // The command line upgrades at the system clock's time.
    let before = run(&["ops", "--workspace", dir.path().to_str().unwrap()], None);
    assert_eq!(before.code, Some(0), "{}", before.stderr);
    assert_intact(dir.path(), ENTRIES);

    let mut ws = open_at(dir.path(), "2026-12-04T10:00:00.000Z");
    ws.note("op-1003-charge-order", "ana", "asked the PSP")
        .unwrap();
    ws.escalate("op-1003-charge-order", "ana", "two charges")
        .unwrap();
    let ids = ["op-1002-invoice-email".to_string()];
    let observed = ws
        .observe(&ObserveRequest {
            op_ids: &ids,
            state: None,
            older_than: None,
            by: "ana",
        })
        .unwrap()
        .observed;
    assert_eq!(observed.len(), 1);
    let recorded = ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id: "op-1002-invoice-email",
        reviewer: "ana",
        decision: Decision::Confirmed,
        expected_version: 2,
        payload: None,
        close_authorized_by: None,
    });
    recorded.unwrap();
    ws.dispatch("op-upgrade-prepared", Default::default())
        .unwrap();
    ws.prepare(
        "op-after-upgrade",
        "send_email",
        &json!({"to": "c@example.com"}),
    )
    .unwrap();
    // note, escalated, observed, decided (with its observation), dispatched
    // and its receipt, prepared.
    assert_intact(dir.path(), ENTRIES + 8);
    let op = ws.require("op-1002-invoice-email").unwrap();
    let upgraded_at = time(&meta(dir.path(), "upgraded_at").unwrap());
    assert_eq!(op.triage.created_at, upgraded_at);
    assert_eq!(op.triage.updated_at, time("2026-12-04T10:00:00.000Z"));
}

#[test]
fn an_edit_after_the_upgrade_is_still_caught() {
    let cases: [(&str, Option<&str>, &str); 6] = [
        (
            "UPDATE operations SET created_at = '2026-01-01T00:00:00.000Z'
             WHERE op_id = 'op-1001-welcome-email'",
            Some("op-1001-welcome-email"),
            "created_at",
        ),
        (
            "UPDATE operations SET dispatch_count = 2 WHERE op_id = 'op-1001-welcome-email'",
            Some("op-1001-welcome-email"),
            "dispatch_count",
        ),
        (
            "UPDATE evidence SET recorded_at = '2026-01-01T00:00:00.000Z' WHERE seq = 1",
            None,
            "evidence[0].recorded_at",
        ),
        (
            "UPDATE closes SET closed_at = '2026-01-01T00:00:00.000Z'",
            None,
            "closes[0].closed_at",
        ),
        // The recorded upgrade time moved: every old row disagrees.
        (
            "UPDATE meta SET value = '2026-01-01T00:00:00.000Z' WHERE key = 'upgraded_at'",
            Some("op-upgrade-prepared"),
            "created_at",
        ),
        // Fewer entries said to predate the upgrade: the others have no time.
        (
            "UPDATE meta SET value = '10' WHERE key = 'upgraded_through_seq'",
            Some("op-upgrade-prepared"),
            "created_at",
        ),
    ];
    for (sql, op_id, field) in cases {
        let dir = copy_of_fixture();
        drop(open_at(dir.path(), UPGRADE_AT));
        tamper(dir.path(), sql);
        let (r, report) = verify(dir.path());
        assert_eq!(r.code, Some(1), "{sql}: {report:#}");
        let mismatches = report["projection_mismatches"].as_array().unwrap();
        let found = mismatches.iter().any(|m| {
            (op_id.is_none() || m["op_id"] == json!(op_id))
                && m["field"].as_str().unwrap().ends_with(field)
        });
        assert!(found, "{sql}: {mismatches:#?}");
    }
}

#[test]
fn the_upgrade_happens_once_and_a_second_open_changes_nothing() {
    let dir = copy_of_fixture();
    drop(open_at(dir.path(), UPGRADE_AT));
    let upgraded = dump(dir.path());
    drop(open_at(dir.path(), "2027-01-01T00:00:00.000Z"));
    let r = run(&["ops", "--workspace", dir.path().to_str().unwrap()], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(dump(dir.path()), upgraded);
    assert_eq!(meta(dir.path(), "upgraded_at").as_deref(), Some(UPGRADE_AT));
}

#[test]
fn a_crash_inside_the_upgrade_leaves_schema_4_for_the_next_open() {
    let dir = copy_of_fixture();
    let pristine = dump(dir.path());
    let ws = dir.path().to_str().unwrap();
    let env = [(CRASH_POINT_ENV, "upgrade.before_commit")];
    let r = run_with_env(&["ops", "--workspace", ws], None, &env);
    assert_eq!(r.code, Some(CRASH_EXIT_CODE), "{}", r.stderr);
    assert_eq!(user_version(&dir.path().join("sender.sqlite")), 4);
    assert_eq!(dump(dir.path()), pristine);
    // The next open upgrades it, whole.
    let r = run(&["ops", "--workspace", ws], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(user_version(&dir.path().join("sender.sqlite")), 7);
    assert_intact(dir.path(), ENTRIES);
}

#[test]
fn a_death_between_the_two_files_leaves_the_ledger_for_the_next_open() {
    let dir = copy_of_fixture();
    let ws = dir.path().to_str().unwrap();
    // The outbox is upgraded and committed before the ledger is opened.
    let env = [(CRASH_POINT_ENV, "create.after_sender")];
    let r = run_with_env(&["ops", "--workspace", ws], None, &env);
    assert_eq!(r.code, Some(CRASH_EXIT_CODE), "{}", r.stderr);
    let versions = |dir: &Path| FILES.map(|f| user_version(&dir.join(f)));
    assert_eq!(versions(dir.path()), [7, 4]);
    let r = run(&["ledger", "--workspace", ws], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(versions(dir.path()), [7, 7]);
    assert_intact(dir.path(), ENTRIES);
}

#[test]
fn a_failure_midway_through_the_upgrade_changes_nothing() {
    // A dispatch row naming no operation: every table is rebuilt before
    // the last check finds it, and the whole transaction rolls back.
    let dir = copy_of_fixture();
    Connection::open(dir.path().join("sender.sqlite"))
        .unwrap()
        .execute_batch(
            "PRAGMA foreign_keys = OFF;
             INSERT INTO dispatch_log (op_id, from_version) VALUES ('ghost', 1);",
        )
        .unwrap();
    let before = dump(dir.path());
    let r = run(
        &["ops", "--workspace", dir.path().to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(r.code, Some(4), "{}", r.stderr);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("has schema version 4, but not that version's tables"));
    assert!(message.contains("a row of dispatch_log names a row that does not exist"));
    assert_eq!(dump(dir.path()), before);
    assert_eq!(user_version(&dir.path().join("sender.sqlite")), 4);
}

#[test]
fn a_newer_file_or_one_only_labelled_schema_4_is_refused_untouched() {
    let fresh = tempfile::tempdir().unwrap();
    drop(Workspace::open(fresh.path(), OpenOptions::default().creating()).unwrap());
    let ws = fresh.path().to_str().unwrap();
    let sender = fresh.path().join("sender.sqlite");
    for (version, says) in [
        (8, "has schema version 8; this recon reads version 7"),
        (
            5,
            "has schema version 5, but not that version's tables (its table operations",
        ),
        (99, "has schema version 99; this recon reads version 7"),
        (
            4,
            "has schema version 4, but not that version's tables (its table operations",
        ),
    ] {
        Connection::open(&sender)
            .unwrap()
            .execute_batch(&format!("PRAGMA user_version = {version}"))
            .unwrap();
        let before = dump(fresh.path());
        let r = run(&["ops", "--workspace", ws, "--json"], None);
        assert_eq!(r.code, Some(4), "{}", r.stderr);
        let error = &r.json()["error"];
        assert_eq!(error["kind"], json!("storage"));
        assert!(error["message"].as_str().unwrap().contains(says), "{error}");
        assert_eq!(dump(fresh.path()), before);
        assert_eq!(user_version(&sender), version);
    }
}

#[test]
fn two_openers_at_once_upgrade_the_workspace_once() {
    let dir = copy_of_fixture();
    let times = ["2026-12-03T09:00:00.000Z", "2026-12-03T09:00:00.001Z"];
    let start = std::sync::Barrier::new(times.len());
    std::thread::scope(|scope| {
        for at in times {
            let (dir, start) = (dir.path(), &start);
            scope.spawn(move || {
                start.wait();
                drop(open_at(dir, at));
            });
        }
    });
    let upgraded_at = meta(dir.path(), "upgraded_at").unwrap();
    assert!(times.contains(&upgraded_at.as_str()), "{upgraded_at}");
    let ws = open_at(dir.path(), "2027-01-01T00:00:00.000Z");
    for op in ws.ops(None, None, 100).unwrap() {
        assert_eq!(op.triage.created_at, time(&upgraded_at), "{}", op.op_id);
    }
    assert_intact(dir.path(), ENTRIES);
}

/// Runs `sql` on a copy of the schema-4 fixture's outbox and opens it: the
/// open is refused (exit 4) saying the file is not schema 4's, with
/// `says`, and leaves both files as they were, at schema 4.
#[track_caller]
fn assert_refused_untouched(sql: &str, says: &str) {
    let dir = copy_of_fixture();
    Connection::open(dir.path().join("sender.sqlite"))
        .unwrap()
        .execute_batch(sql)
        .unwrap();
    let before = dump(dir.path());
    let r = run(
        &["ops", "--workspace", dir.path().to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(r.code, Some(4), "{says}: {}{}", r.stdout, r.stderr);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("has schema version 4, but not that version's tables")
            && message.contains(says),
        "{message}"
    );
    assert_eq!(dump(dir.path()), before, "{says}: the file was upgraded");
    assert_eq!(user_version(&dir.path().join("sender.sqlite")), 4);
}

#[test]
fn a_schema4_file_whose_journal_trigger_was_made_a_no_op_is_refused_untouched() {
    // Same name, same table, same event: only what it does differs. The
    // journal is rebuilt, and the rebuild holds the triggers it drops to a
    // fresh file's text.
    assert_refused_untouched(
        "DROP TRIGGER journal_append_only_update;
         CREATE TRIGGER journal_append_only_update BEFORE UPDATE ON journal
         BEGIN
             SELECT 1;
         END;",
        "its trigger journal_append_only_update differs",
    );
}

#[test]
fn a_schema4_file_with_an_index_or_trigger_changed_on_a_table_the_upgrade_keeps_is_refused_untouched(
) {
    // dispatch_log is not rebuilt from schema 4: only the comparison of the
    // whole file with a fresh one's schema, before the commit, sees an
    // index of it changed or a trigger added to it (here, one that would
    // erase the record of every dispatch).
    assert_refused_untouched(
        "DROP INDEX dispatch_log_by_op;
         CREATE INDEX dispatch_log_by_op ON dispatch_log(op_id);",
        "its index dispatch_log_by_op differs",
    );
    assert_refused_untouched(
        "CREATE TRIGGER dispatch_log_forgets AFTER INSERT ON dispatch_log
         BEGIN
             DELETE FROM dispatch_log WHERE op_id = NEW.op_id;
         END;",
        "it has an unknown trigger dispatch_log_forgets",
    );
}

/// A real schema-5 workspace (`tests/fixtures/schema5/`), copied.
fn copy_of_schema5() -> tempfile::TempDir {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema5");
    let dir = tempfile::tempdir().unwrap();
    for file in FILES {
        std::fs::copy(fixture.join(file), dir.path().join(file)).unwrap();
    }
    dir
}

/// Schema 5 routed an unrouted action kind to the built-in ledger without
/// registering it. Opening such a workspace registers the ledger, in one
/// journaled entry, for exactly the kinds its operations went to that way
/// and that route nowhere else now (`send_fax`, routed to `letters` after
/// one operation went to the ledger, is not among them; nor is `*`); every
/// operation keeps its receiver; and the journal still proves the tables.
#[test]
fn a_schema5_workspace_registers_the_ledger_it_routed_to_implicitly() {
    let dir = copy_of_schema5();
    let before = run(
        &["verify", "--workspace", dir.path().to_str().unwrap()],
        None,
    );
    assert_eq!(before.code, Some(0), "{}", before.stderr);
    let mut ws = open_at(dir.path(), UPGRADE_AT);
    for file in FILES {
        assert_eq!(user_version(&dir.path().join(file)), 7, "{file}");
    }
    let ops = ws.ops(None, None, 100).unwrap();
    let receivers = ws.receivers().unwrap();
    let names: Vec<&str> = receivers.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["builtin", "letters"]);
    let (ledger, letters) = (&receivers[0], &receivers[1]);
    assert!(ledger.builtin && !letters.builtin);
    assert_eq!(letters.actions, ["post_letter", "send_fax"]);
    let mut implicit: Vec<String> = ops
        .iter()
        .filter(|op| op.receiver == "builtin" && op.compensates_effect_id.is_none())
        .map(|op| op.action_kind.clone())
        .filter(|kind| !letters.actions.contains(kind))
        .collect();
    implicit.sort();
    implicit.dedup();
    assert!(!implicit.is_empty());
    assert_eq!(ledger.actions, implicit);
    let fax = ws.require("op-upgrade-fax").unwrap();
    assert_eq!(fax.receiver, "builtin", "the route is never changed");
    assert!(ws.snapshot("op-upgrade-fax", None).is_ok());
    assert_eq!(ws.require("op-upgrade-letter").unwrap().receiver, "letters");
    let refused = ws
        .prepare("op-new", "never_routed", &json!({}))
        .unwrap_err();
    assert_eq!(refused.refusal().map(|r| r.code()), Some("no_receiver"));
    // 38 entries written by recon at schema 5, then the registration.
    assert_intact(dir.path(), 39);
}

/// The upgrade's `upgraded_through_seq` is the last entry it found, the
/// last without a time: raised, lowered or garbled, it is a mismatch of
/// `meta.upgraded_through_seq` (raised, nothing else would show it).
#[test]
fn an_edited_upgraded_through_seq_is_found() {
    for value in ["35", "33", "x"] {
        let dir = copy_of_fixture();
        drop(open_at(dir.path(), UPGRADE_AT));
        tamper(
            dir.path(),
            &format!("UPDATE meta SET value = '{value}' WHERE key = 'upgraded_through_seq'"),
        );
        let (r, report) = verify(dir.path());
        assert_eq!(r.code, Some(1), "{value}: {report:#}");
        let expected = json!({
            "op_id": null,
            "field": "meta.upgraded_through_seq",
            "journal": ENTRIES_BEFORE.to_string(),
            "table": value,
        });
        let mismatches = report["projection_mismatches"].as_array().unwrap();
        assert!(mismatches.contains(&expected), "{value}: {mismatches:#?}");
    }
}

/// Schema 7 changed the rules the acts are held to (SPEC 12) and gave an
/// operation its surplus (SPEC 14, none before): a schema-6 workspace
/// (main at ce2d017 writes the same objects but that column; here this
/// build's file without it, labelled 6) opens at schema 7 in place,
/// through the same upgrade, with every row as it was, and verifies.
#[test]
fn a_schema6_workspace_opens_at_schema_7_with_every_row_unchanged() {
    let dir = copy_of_fixture();
    drop(open_at(dir.path(), UPGRADE_AT));
    let before = dump(dir.path());
    for file in FILES {
        let schema6 = match file.starts_with("sender") {
            true => {
                "DROP INDEX operations_with_surplus;
                 ALTER TABLE operations DROP COLUMN surplus_effect_ids;
                 ALTER TABLE evidence DROP COLUMN close_seq; PRAGMA user_version = 6"
            }
            false => "PRAGMA user_version = 6",
        };
        Connection::open(dir.path().join(file))
            .unwrap()
            .execute_batch(schema6)
            .unwrap();
    }
    let r = run(&["ops", "--workspace", dir.path().to_str().unwrap()], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for file in FILES {
        assert_eq!(user_version(&dir.path().join(file)), 7, "{file}");
    }
    assert_eq!(dump(dir.path()), before);
    assert_intact(dir.path(), ENTRIES);
}

/// How many evidence rows rest on a closed snapshot, and how many of those
/// name the close they rest on.
fn closed_decisions(dir: &Path) -> (i64, i64) {
    Connection::open(dir.join("sender.sqlite"))
        .unwrap()
        .query_row(
            "SELECT count(*), count(close_seq) FROM evidence
             WHERE json_extract(snapshot, '$.closed') = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

#[test]
fn old_decisions_on_closed_snapshots_verify_after_an_upgrade_and_the_older_schema_mark_is_held() {
    // SPEC 12's recorded closes are schema 7's: the fixture's two
    // decisions on closing reads (op-1009, op-1010) name no close, and the
    // upgrade records the last entry the old schema wrote, which `verify`
    // exempts. A decision after the upgrade names its close.
    let dir = copy_of_fixture();
    let mut ws = open_at(dir.path(), UPGRADE_AT);
    assert_eq!(
        meta(dir.path(), "older_schema_through_seq"),
        Some(ENTRIES_BEFORE.to_string())
    );
    assert_eq!(closed_decisions(dir.path()), (2, 0));
    ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id: "op-1002-invoice-email",
        reviewer: "ana",
        decision: Decision::Confirmed,
        expected_version: 2,
        payload: None,
        close_authorized_by: Some("ana"),
    })
    .unwrap();
    drop(ws);
    assert_eq!(closed_decisions(dir.path()), (3, 1));
    let (r, report) = verify(dir.path());
    assert_eq!(r.code, Some(0), "{report:#}");
    // The mark moved past the new decision, to exempt it: a mismatch
    // naming the entries that only schema 7 writes.
    tamper(
        dir.path(),
        "UPDATE meta SET value = '1000' WHERE key = 'older_schema_through_seq'",
    );
    let (r, report) = verify(dir.path());
    assert_eq!(r.code, Some(1), "{report:#}");
    let found: Vec<(&Value, &Value)> = (report["projection_mismatches"].as_array().unwrap())
        .iter()
        .map(|m| (&m["op_id"], &m["field"]))
        .collect();
    let op = json!("op-1002-invoice-email");
    let field = json!("older_schema_through_seq");
    assert_eq!(found, [(&op, &field), (&op, &field)], "{report:#}");
}

/// The store behind `name` (registration `id`) is gone: the receiver is
/// removed as lost, and another store is registered under the name (a new
/// registration); the new store's state file, which exists once called.
fn another_store_takes_the_name(dir: &Path, name: &str, id: i64) -> PathBuf {
    let w = dir.to_str().unwrap();
    let removed = run(
        &[
            "receivers",
            "remove",
            name,
            "--lost",
            "--reason",
            "the store is gone",
            "--workspace",
            w,
        ],
        None,
    );
    assert_eq!(removed.code, Some(0), "{}", removed.stderr);
    let state = dir.join(format!("other-{name}.json"));
    let fixture = crate::support::adapter_fixture();
    let added = run(
        &[
            "receivers",
            "add",
            name,
            "--actions",
            "post_letter",
            "--workspace",
            w,
            "--json",
            "--",
            fixture.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(added.code, Some(0), "{}", added.stderr);
    assert_ne!(added.json()["id"], json!(id), "another registration");
    state
}

/// Reproduction 14 (SPEC 12, "Routes are fixed"): an operation prepared
/// before schema 6 named its receiver by name alone. The upgrade gives it
/// the registration its name held then, so removing that receiver and
/// registering another store under the same name leaves it routed to the
/// one it was sent to (`receiver_gone`), never to the new store; `verify`
/// holds the registration to the journal.
#[test]
fn an_operation_prepared_before_schema_6_keeps_the_registration_its_name_held_at_the_upgrade() {
    let dir = copy_of_schema5();
    let w = dir.path().to_str().unwrap();
    drop(open_at(dir.path(), UPGRADE_AT));
    let sender = Connection::open(dir.path().join("sender.sqlite")).unwrap();
    let routed = |op: &str| -> (Option<i64>, i64) {
        sender
            .query_row(
                "SELECT o.receiver_id, r.id FROM operations o
                 JOIN receivers r ON r.name = o.receiver WHERE o.op_id = ?1",
                [op],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    for op in ["op-upgrade-letter", "op-upgrade-fax"] {
        let (named, held) = routed(op);
        assert_eq!(named, Some(held), "{op}");
    }
    let unrouted: i64 = sender
        .query_row(
            "SELECT count(*) FROM operations WHERE receiver_id IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(unrouted, 0);
    assert_intact(dir.path(), 39);
    let letters = routed("op-upgrade-letter").1;
    let state = another_store_takes_the_name(dir.path(), "letters", letters);
    let dispatched = run(
        &["dispatch", "op-upgrade-letter", "--workspace", w, "--json"],
        None,
    );
    assert_eq!(
        dispatched.code,
        Some(3),
        "{}{}",
        dispatched.stdout,
        dispatched.stderr
    );
    assert_eq!(dispatched.json()["error"]["code"], json!("receiver_gone"));
    assert!(!state.exists(), "the new store was never called");
    // The registration, changed behind the journal's back, is found.
    let (r, report) = verify(dir.path());
    assert_eq!(r.code, Some(0), "{report:#}");
    tamper(
        dir.path(),
        "UPDATE operations SET receiver_id = NULL WHERE op_id = 'op-upgrade-fax'",
    );
    let (r, report) = verify(dir.path());
    assert_eq!(r.code, Some(1), "{report:#}");
    let fields: Vec<&Value> = report["projection_mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["field"])
        .collect();
    assert!(fields.contains(&&json!("receiver_id")), "{report:#}");
}
