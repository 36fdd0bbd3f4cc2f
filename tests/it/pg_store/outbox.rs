//! The outbox on PostgreSQL, through the public API
//! (`Workspace::open(Location::Database(..))`): the flow from prepare to
//! verify on a registered adapter (`tests/fixtures/adapter.py`), stale and
//! racing decisions from two connections, an op id taken between the read
//! and the insert, the journal head taken first by every write, and
//! verify finding a row edited behind recon's back.
//!
//! Concurrent events are ordered by the server's own locks: a test holds a
//! row or an uncommitted insert on a connection of its own, and waits
//! until the other session is seen waiting on it (`pg_stat_activity`)
//! before letting go; nothing sleeps for a guess.

use super::{database_of, initialized};
use crate::real_receivers::poll_until;
use crate::real_receivers::servers::{self, Postgres};
use crate::support::adapter_fixture;
use recon::audit::VerifyRequest;
use recon::dispatch::DispatchOptions;
use recon::domain::{Decision, OpState};
use recon::workspace::{Journal, NewReceiver, ReconcileRequest};
use recon::{DatabaseUrl, Error, Location, OpenOptions, Refusal, StoreError, Workspace};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const ACTION: &str = "post_letter";

/// A fresh outbox database, or `None` (the test said why) without a server.
pub(super) fn outbox(test: &str, prefix: &str) -> Option<(&'static Postgres, String)> {
    let pg = servers::require(test, servers::postgres())?;
    let url = initialized(pg, prefix);
    Some((pg, url))
}

pub(super) fn location(url: &str) -> Location {
    Location::from(DatabaseUrl::parse(url).expect("a database URL"))
}

pub(super) fn open_with(url: &str, options: OpenOptions) -> Workspace {
    Workspace::open(location(url), options).expect("open the outbox on PostgreSQL")
}

fn open(url: &str) -> Workspace {
    open_with(url, OpenOptions::default())
}

/// Registers the fixture adapter as `mail` for [`ACTION`], with the full
/// contract, its ledger in `dir`; `mode` makes it misbehave (`apply:crash-after`
/// commits an effect and dies before answering: a lost receipt).
pub(super) fn register_mail(ws: &mut Workspace, dir: &Path, mode: &str) {
    let args: Vec<String> = [
        "--state",
        &dir.join("mail.json").display().to_string(),
        "--mode",
        mode,
        "--can-close",
        "--complete",
        "--authoritative",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    ws.register_receiver(&NewReceiver {
        name: "mail",
        actions: &[ACTION.to_string()],
        program: &adapter_fixture(),
        args: &args,
        timeout_ms: None,
        env: &[],
    })
    .expect("register the adapter");
}

/// An outbox whose `op` was dispatched to the adapter and lost its receipt:
/// `unknown`, its effect at the receiver.
pub(super) fn unknown_op(ws: &mut Workspace, dir: &Path, op: &str) -> i64 {
    register_mail(ws, dir, "apply:crash-after");
    ws.prepare(op, ACTION, &json!({"to": "ann", "text": "hello"}))
        .expect("prepare");
    let report = ws
        .dispatch(op, DispatchOptions::default())
        .expect("dispatch");
    assert_eq!(report.outcome, "unknown", "{report:?}");
    let operation = ws.operation(op).expect("read").expect("the operation");
    assert_eq!(operation.state, OpState::Unknown);
    operation.version
}

pub(super) fn confirm(ws: &mut Workspace, op: &str, version: i64) -> recon::Result<()> {
    ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id: op,
        reviewer: "ann",
        decision: Decision::Confirmed,
        expected_version: version,
        payload: None,
        close_authorized_by: None,
    })
    .map(drop)
}

pub(super) fn verify(url: &str) -> recon::audit::VerifyReport {
    Journal::open(location(url), OpenOptions::default())
        .expect("open the journal")
        .verify(VerifyRequest::default())
        .expect("verify")
}

pub(super) fn refusal(result: recon::Result<()>) -> Refusal {
    match result {
        Err(Error::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The fixture adapter as `mail` for [`ACTION`], to register.
fn mail_args(dir: &Path) -> Vec<String> {
    vec![
        "--state".to_string(),
        dir.join("s.json").display().to_string(),
    ]
}

fn register_plain(ws: &mut Workspace, args: &[String]) -> recon::Result<()> {
    ws.register_receiver(&NewReceiver {
        name: "mail",
        actions: &[ACTION.to_string()],
        program: &adapter_fixture(),
        args,
        timeout_ms: None,
        env: &[],
    })
    .map(drop)
}

/// A connection of the test's own, to hold locks and rows on.
pub(super) fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect")
}

/// What `act` ends with when another connection has run `taken` first,
/// uncommitted: recon's read cannot see it, so recon's insert of the same
/// key waits for it, and fails once it commits (the unique-violation arm,
/// never the read's refusal).
fn taken_meanwhile(
    pg: &Postgres,
    url: &str,
    taken: &str,
    act: impl FnOnce() -> recon::Result<()> + Send,
) -> Refusal {
    let mut other = client(url);
    let mut taking = other.transaction().expect("begin");
    taking.batch_execute(taken).expect("take the key");
    let result = std::thread::scope(|scope| {
        let acting = scope.spawn(act);
        until_waiting(pg, database_of(url), 1);
        taking.commit().expect("commit the key");
        acting.join().expect("the act")
    });
    refusal(result)
}

/// An operation's row as another writer inserts it.
/// (routed as the rules want: to the registration `mail` names).
const OP_1: &str = "INSERT INTO operations (op_id, kind, action_kind, payload, state, version,
        receiver, created_at, updated_at, receiver_id)
    VALUES ('op-1', 'original', 'post_letter', '{}', 'prepared', 1, 'mail',
        '2026-12-03T09:00:00.000Z', '2026-12-03T09:00:00.000Z',
        (SELECT id FROM receivers WHERE name = 'mail'));";

/// A registration as another writer inserts it.
const RECEIVER: &str = "INSERT INTO receivers
        (name, program, args, timeout_ms, describe, describe_sha256, id)
    VALUES ('NAME', '/bin/true', '[]', 1000, '{}', 'x', 1000);";

/// The journal head, locked as a writer locks it, until the transaction
/// ends.
fn hold_head(holder: &mut postgres::Client) -> postgres::Transaction<'_> {
    let mut held = holder.transaction().expect("begin");
    held.query_one("SELECT seq FROM journal_head WHERE id = 1 FOR UPDATE", &[])
        .expect("hold the head");
    held
}

/// Waits until `count` sessions of recon on this database wait on a lock
/// (the cluster is shared by every test of the process).
fn until_waiting(pg: &Postgres, database: &str, count: usize) {
    poll_until(
        "recon sessions waiting on a lock",
        Duration::from_secs(30),
        || {
            let waiting = pg.psql(
                database,
                "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = 'recon' AND wait_event_type = 'Lock'
               AND datname = current_database()",
            );
            waiting.trim() == count.to_string()
        },
    );
}

#[test]
fn a_decision_on_postgres_goes_from_prepare_to_a_verified_journal() {
    let test = "a_decision_on_postgres_goes_from_prepare_to_a_verified_journal";
    let Some((_pg, url)) = outbox(test, "flow") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let version = unknown_op(&mut ws, dir.path(), "op-1");
    confirm(&mut ws, "op-1", version).expect("confirm");
    let op = ws.operation("op-1").expect("read").expect("the operation");
    assert_eq!(op.state, OpState::Confirmed);
    assert_eq!(op.version, version + 1);
    let report = verify(&url);
    assert!(report.intact, "{report:?}");
    assert!(report.rows >= 4, "{report:?}");
}

#[test]
fn a_decision_at_a_stale_version_is_refused_naming_the_version_found() {
    let test = "a_decision_at_a_stale_version_is_refused_naming_the_version_found";
    let Some((_pg, url)) = outbox(test, "stale") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut first = open(&url);
    let version = unknown_op(&mut first, dir.path(), "op-1");
    let mut second = open(&url);
    confirm(&mut second, "op-1", version).expect("the first decision");
    match refusal(confirm(&mut first, "op-1", version)) {
        Refusal::StaleVersion {
            expected,
            found,
            changed_by,
            ..
        } => {
            assert_eq!((expected, found), (version, version + 1));
            assert_eq!(changed_by.as_deref(), Some("reviewer ann"));
        }
        other => panic!("expected stale_version, got {other:?}"),
    }
    assert!(verify(&url).intact);
}

#[test]
fn two_writers_racing_a_decision_from_two_connections_exactly_one_wins() {
    let test = "two_writers_racing_a_decision_from_two_connections_exactly_one_wins";
    let Some((pg, url)) = outbox(test, "race") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut first = open(&url);
    let version = unknown_op(&mut first, dir.path(), "op-1");
    let mut second = open(&url);
    // Both read the operation at `version`; the head held here makes both
    // wait at their write's first statement, then race for it.
    let mut holder = client(&url);
    let held = hold_head(&mut holder);
    let results = std::thread::scope(|scope| {
        let racers: Vec<_> = [&mut first, &mut second]
            .into_iter()
            .map(|ws| scope.spawn(move || confirm(ws, "op-1", version)))
            .collect();
        until_waiting(pg, database_of(&url), 2);
        held.commit().expect("let go of the head");
        racers
            .into_iter()
            .map(|racer| racer.join().expect("a racer"))
            .collect::<Vec<_>>()
    });
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    let lost = results.into_iter().find(|r| r.is_err()).expect("a loser");
    assert!(matches!(refusal(lost), Refusal::StaleVersion { found, .. } if found == version + 1));
    let op = first
        .operation("op-1")
        .expect("read")
        .expect("the operation");
    assert_eq!((op.state, op.version), (OpState::Confirmed, version + 1));
    assert!(verify(&url).intact);
}

#[test]
fn a_write_waiting_on_the_journal_head_fails_after_the_busy_timeout_writing_nothing() {
    let test = "a_write_waiting_on_the_journal_head_fails_after_the_busy_timeout_writing_nothing";
    let Some((pg, url)) = outbox(test, "head") else {
        return;
    };
    let options = OpenOptions::default().waiting(Duration::from_millis(200));
    let mut ws = open_with(&url, options);
    let mut holder = client(&url);
    let held = hold_head(&mut holder);
    let dir = tempfile::tempdir().expect("temp dir");
    let error = register_plain(&mut ws, &mail_args(dir.path())).expect_err("the head is held");
    assert!(
        matches!(
            &error,
            Error::Store(StoreError::Database {
                problem: recon::error::DatabaseProblem::Locked { .. },
                ..
            })
        ),
        "{error:?}"
    );
    held.rollback().expect("let go");
    let written = pg.psql(
        database_of(&url),
        "SELECT (SELECT count(*) FROM journal WHERE kind <> 'settings') || ':' ||
                (SELECT count(*) FROM receivers)",
    );
    assert_eq!(written.trim(), "0:0");
}

#[test]
fn verify_on_postgres_finds_an_operations_column_edited_behind_recon() {
    let test = "verify_on_postgres_finds_an_operations_column_edited_behind_recon";
    let Some((pg, url)) = outbox(test, "tamper") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let version = unknown_op(&mut ws, dir.path(), "op-1");
    confirm(&mut ws, "op-1", version).expect("confirm");
    assert!(verify(&url).intact);
    pg.psql(
        database_of(&url),
        &format!("{BEHIND_THE_RULES} UPDATE operations SET payload = '{{\"to\":\"eve\",\"text\":\"hello\"}}' WHERE op_id = 'op-1'"),
    );
    let report = verify(&url);
    assert!(!report.intact, "{report:?}");
    assert!(
        report
            .projection_mismatches
            .iter()
            .any(|m| m.op_id.as_deref() == Some("op-1")),
        "{report:?}"
    );
}

/// The schema differences `verify` reported, as `(type, name, difference)`.
fn schema_differences(report: &recon::audit::VerifyReport) -> Vec<(String, String, String)> {
    report
        .schema_differences
        .iter()
        .map(|d| {
            let difference = serde_json::to_value(d.difference).expect("a difference");
            let difference = difference.as_str().expect("a name").to_string();
            (d.kind.clone(), d.name.clone(), difference)
        })
        .collect()
}

#[test]
fn verify_on_postgres_names_a_disabled_trigger_a_replaced_function_and_a_changed_or_unknown_index()
{
    let test = "verify_on_postgres_names_a_disabled_trigger_a_replaced_function_and_a_changed_or_unknown_index";
    let Some((pg, url)) = outbox(test, "schema_tamper") else {
        return;
    };
    assert_eq!(schema_differences(&verify(&url)), []);
    pg.psql(
        database_of(&url),
        "ALTER TABLE journal DISABLE TRIGGER journal_follows_head; \
         CREATE OR REPLACE FUNCTION recon_refuse_change() RETURNS trigger \
             LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$; \
         DROP INDEX operations_by_age; CREATE INDEX operations_by_age ON operations(updated_at); \
         CREATE INDEX notes_by_text ON notes(text)",
    );
    let report = verify(&url);
    assert!(!report.intact, "{report:?}");
    let named = |kind: &str, name: &str, difference: &str| {
        (kind.to_string(), name.to_string(), difference.to_string())
    };
    assert_eq!(
        schema_differences(&report),
        [
            named("function", "recon_refuse_change", "differs"),
            named("index", "operations_by_age", "differs"),
            named("trigger", "journal.journal_follows_head", "differs"),
            named("index", "notes_by_text", "unknown"),
        ]
    );
}

#[test]
fn verify_on_postgres_names_a_grant_to_public_a_changed_privilege_a_rule_and_a_policy() {
    let test = "verify_on_postgres_names_a_grant_to_public_a_changed_privilege_a_rule_and_a_policy";
    let Some((pg, url)) = outbox(test, "privilege_tamper") else {
        return;
    };
    let named = |kind: &str, name: &str, difference: &str| {
        (kind.to_string(), name.to_string(), difference.to_string())
    };
    let database = database_of(&url);
    let tampered = |sql: &str| {
        pg.psql(database, &format!("BEGIN; {sql}; COMMIT"));
        let report = verify(&url);
        let differences = schema_differences(&report);
        assert!(!report.intact, "{sql}: {report:?}");
        differences
    };
    assert_eq!(schema_differences(&verify(&url)), []);
    assert_eq!(
        tampered("GRANT INSERT ON journal TO PUBLIC"),
        [named("privileges", "journal to PUBLIC", "unknown")]
    );
    pg.psql(database, "REVOKE INSERT ON journal FROM PUBLIC");
    assert_eq!(
        tampered("GRANT UPDATE ON journal TO recon_reviewer"),
        [named("privileges", "journal to recon_reviewer", "differs")]
    );
    pg.psql(database, "REVOKE UPDATE ON journal FROM recon_reviewer");
    assert_eq!(
        tampered("GRANT UPDATE (text) ON notes TO recon_sender"),
        [named(
            "column privileges",
            "notes.text to recon_sender",
            "unknown"
        )]
    );
    pg.psql(database, "REVOKE UPDATE (text) ON notes FROM recon_sender");
    assert_eq!(
        tampered("GRANT EXECUTE ON FUNCTION recon_head_locked() TO PUBLIC"),
        [named(
            "function privileges",
            "recon_head_locked to PUBLIC",
            "unknown"
        )]
    );
    pg.psql(
        database,
        "REVOKE EXECUTE ON FUNCTION recon_head_locked() FROM PUBLIC",
    );
    assert_eq!(
        tampered("CREATE RULE notes_vanish AS ON INSERT TO notes DO INSTEAD NOTHING"),
        [named("rule", "notes.notes_vanish", "unknown")]
    );
    pg.psql(database, "DROP RULE notes_vanish ON notes");
    assert_eq!(
        tampered(
            "ALTER TABLE operations ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY nothing_unknown ON operations USING (state <> 'unknown')"
        ),
        [
            named("row security", "operations", "differs"),
            named("policy", "operations.nothing_unknown", "unknown"),
        ]
    );
    pg.psql(
        database,
        "DROP POLICY nothing_unknown ON operations; \
         ALTER TABLE operations DISABLE ROW LEVEL SECURITY",
    );
    assert_eq!(schema_differences(&verify(&url)), []);
}

#[test]
fn another_applications_tables_beside_the_outbox_are_not_schema_differences() {
    let test = "another_applications_tables_beside_the_outbox_are_not_schema_differences";
    let Some((pg, url)) = outbox(test, "neighbours") else {
        return;
    };
    pg.psql(
        database_of(&url),
        "CREATE TABLE invoices (id bigint PRIMARY KEY); \
         CREATE FUNCTION invoices_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$; \
         CREATE TRIGGER invoices_touch BEFORE INSERT ON invoices \
             FOR EACH ROW EXECUTE FUNCTION invoices_touch()",
    );
    let report = verify(&url);
    assert!(report.intact, "{report:?}");
    assert_eq!(schema_differences(&report), []);
}

#[test]
fn a_write_transaction_takes_the_journal_head_as_its_first_statement() {
    let test = "a_write_transaction_takes_the_journal_head_as_its_first_statement";
    let Some((pg, url)) = outbox(test, "first") else {
        return;
    };
    let database = database_of(&url);
    let mut ws = open(&url);
    let mut holder = client(&url);
    let held = hold_head(&mut holder);
    let dir = tempfile::tempdir().expect("temp dir");
    let args = mail_args(dir.path());
    std::thread::scope(|scope| {
        let writing = scope.spawn(|| register_plain(&mut ws, &args));
        until_waiting(pg, database, 1);
        // What the waiting write runs, and the tables it has written to
        // so far (an insert takes ROW EXCLUSIVE on its table): none.
        let waiting = pg.psql(
            database,
            "SELECT a.query || '|' || (SELECT count(*) FROM pg_locks l
                 WHERE l.pid = a.pid AND l.mode = 'RowExclusiveLock')
             FROM pg_stat_activity a
             WHERE a.application_name = 'recon' AND a.wait_event_type = 'Lock'
               AND a.datname = current_database()",
        );
        assert_eq!(
            waiting.trim(),
            "SELECT seq, hash FROM recon_begin_write($1)|0"
        );
        held.commit().expect("let go of the head");
        writing
            .join()
            .expect("the write")
            .expect("registered once the head is free");
    });
    assert!(verify(&url).intact);
}

#[test]
fn an_outbox_in_a_database_has_no_built_in_ledger_and_refuses_one_builtin_single_host() {
    let test = "an_outbox_in_a_database_has_no_built_in_ledger_and_refuses_one_builtin_single_host";
    let Some((pg, url)) = outbox(test, "nobuiltin") else {
        return;
    };
    let mut ws = open(&url);
    assert_eq!(ws.dir(), None);
    let refused = ws
        .register_builtin("builtin", &["*".to_string()], true)
        .map(drop);
    assert_eq!(refusal(refused), Refusal::BuiltinSingleHost);
    assert_eq!(
        refusal(ws.ledger(None).map(drop)),
        Refusal::BuiltinSingleHost
    );
    let written = pg.psql(
        database_of(&url),
        "SELECT count(*) FROM journal WHERE kind <> 'settings'",
    );
    assert_eq!(written.trim(), "0");
}

#[test]
fn the_change_marker_of_an_outbox_in_a_database_moves_with_another_hosts_commit() {
    let test = "the_change_marker_of_an_outbox_in_a_database_moves_with_another_hosts_commit";
    let Some((_pg, url)) = outbox(test, "marker") else {
        return;
    };
    let watching = open(&url);
    let before = watching.change_marker().expect("marker");
    assert_eq!(before.ledger, None);
    let mut other = open(&url);
    let dir = tempfile::tempdir().expect("temp dir");
    register_plain(&mut other, &mail_args(dir.path())).expect("register");
    let after = watching.change_marker().expect("marker");
    assert_ne!(before, after);
    assert_eq!(after.journal.length, before.journal.length + 1);
}

#[test]
fn a_database_without_a_recon_outbox_is_refused_naming_recon_db_init_and_never_the_password() {
    let test =
        "a_database_without_a_recon_outbox_is_refused_naming_recon_db_init_and_never_the_password";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    // The test cluster trusts local logins: the password is carried, and
    // must not be shown.
    let url = pg
        .new_database("empty")
        .replace("postgres@", "postgres:hunter2@");
    let error = Workspace::open(location(&url), OpenOptions::default())
        .err()
        .expect("no outbox there")
        .to_string();
    assert!(error.contains("recon db init"), "{error}");
    assert!(error.contains("postgres:***@"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
}

#[test]
fn an_op_id_taken_by_another_connection_after_the_read_is_refused_duplicate_operation() {
    let test = "an_op_id_taken_by_another_connection_after_the_read_is_refused_duplicate_operation";
    let Some((pg, url)) = outbox(test, "dup") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    register_plain(&mut ws, &mail_args(dir.path())).expect("register");
    let refused = taken_meanwhile(pg, &url, OP_1, || {
        ws.prepare("op-1", ACTION, &json!({"n": 1})).map(drop)
    });
    assert_eq!(refused, Refusal::DuplicateOperation("op-1".into()));
    let stored = pg.psql(database_of(&url), "SELECT payload FROM operations");
    assert_eq!(stored.trim(), "{}", "recon's row was not written");
}

#[test]
fn a_receiver_name_taken_by_another_connection_after_the_read_is_refused_receiver_exists() {
    let test =
        "a_receiver_name_taken_by_another_connection_after_the_read_is_refused_receiver_exists";
    let Some((pg, url)) = outbox(test, "name") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let args = mail_args(dir.path());
    let taken = RECEIVER.replace("NAME", "mail");
    let refused = taken_meanwhile(pg, &url, &taken, || register_plain(&mut ws, &args));
    assert_eq!(refused, Refusal::ReceiverExists("mail".into()));
}

#[test]
fn a_route_taken_by_another_connection_after_the_read_is_refused_action_routed_naming_its_holder() {
    let test =
        "a_route_taken_by_another_connection_after_the_read_is_refused_action_routed_naming_its_holder";
    let Some((pg, url)) = outbox(test, "route") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let args = mail_args(dir.path());
    // The holder is read after recon's insert failed, in the same
    // transaction: on PostgreSQL only past a rollback to a savepoint.
    let taken = format!(
        "{} INSERT INTO routes (action_kind, receiver) VALUES ('{ACTION}', 'other');",
        RECEIVER.replace("NAME", "other")
    );
    let refused = taken_meanwhile(pg, &url, &taken, || register_plain(&mut ws, &args));
    assert_eq!(
        refused,
        Refusal::ActionRouted {
            action: ACTION.into(),
            receiver: "other".into(),
        }
    );
    let mail = pg.psql(
        database_of(&url),
        "SELECT count(*) FROM receivers WHERE name = 'mail'",
    );
    assert_eq!(mail.trim(), "0", "the registration rolled back whole");
}

#[test]
fn verify_on_postgres_reads_every_row_of_a_table_longer_than_one_fetch() {
    let test = "verify_on_postgres_reads_every_row_of_a_table_longer_than_one_fetch";
    let Some((pg, url)) = outbox(test, "long") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    register_plain(&mut ws, &mail_args(dir.path())).expect("register");
    // The audit fetches 1,000 rows of a stream at a time.
    let ops = 1_001;
    for n in 0..ops {
        ws.prepare(&format!("op-{n:04}"), ACTION, &json!({"n": n}))
            .expect("prepare");
    }
    let report = verify(&url);
    assert!(report.intact, "{report:?}");
    // The outbox's settings, the registration, the operations.
    assert_eq!(report.journal_entries, ops + 2);
    // The last operation's row, in the second fetch, edited.
    pg.psql(
        database_of(&url),
        &format!("{BEHIND_THE_RULES} UPDATE operations SET payload = '{{\"n\":0}}' WHERE op_id = 'op-1000'"),
    );
    let report = verify(&url);
    let edited: Vec<_> = report
        .projection_mismatches
        .iter()
        .filter_map(|m| m.op_id.as_deref())
        .collect();
    assert_eq!(edited, ["op-1000"], "{report:?}");
}

/// What approving the compensation `undo-1` of `op-1`'s confirmed effect
/// ends with when another connection has inserted `approval` meanwhile
/// (`EFFECT` standing for that effect's id).
fn approval_taken_meanwhile(test: &str, prefix: &str, approval: &str) -> Option<(Refusal, String)> {
    let (pg, url) = outbox(test, prefix)?;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let version = unknown_op(&mut ws, dir.path(), "op-1");
    confirm(&mut ws, "op-1", version).expect("confirm");
    let op = ws.operation("op-1").expect("read").expect("the operation");
    let effect = op
        .confirmed_effect_id
        .clone()
        .expect("the confirmed effect");
    let taken = format!(
        "SET LOCAL session_replication_role = replica;
         INSERT INTO compensation_approvals (original_op_id, effect_id, approved_version,
             approver, compensation_op_id, action_kind, payload)
         VALUES {};",
        approval.replace("EFFECT", &effect)
    );
    let payload = json!({"to": "ann", "text": "sorry"});
    let refused = taken_meanwhile(pg, &url, &taken, || {
        ws.approve_compensation(&recon::domain::CompensationRequest {
            reason: None,
            original_op_id: "op-1",
            effect_id: &effect,
            approver: "bob",
            expected_version: op.version,
            compensation_op_id: "undo-1",
            action_kind: ACTION,
            payload: &payload,
        })
        .map(drop)
    });
    Some((refused, effect))
}

#[test]
fn an_approval_taken_by_another_connection_after_the_read_is_refused_already_approved() {
    let test = "an_approval_taken_by_another_connection_after_the_read_is_refused_already_approved";
    let approval = "('op-1', 'EFFECT', 2, 'eve', 'undo-other', 'post_letter', '{}')";
    let Some((refused, effect)) = approval_taken_meanwhile(test, "approved", approval) else {
        return;
    };
    assert_eq!(
        refused,
        Refusal::AlreadyApproved {
            op_id: "op-1".into(),
            effect_id: effect,
        }
    );
}

#[test]
fn a_compensation_id_taken_by_another_connection_after_the_read_is_refused_duplicate_operation() {
    let test =
        "a_compensation_id_taken_by_another_connection_after_the_read_is_refused_duplicate_operation";
    let approval = "('op-1', 'another-effect', 2, 'eve', 'undo-1', 'post_letter', '{}')";
    let Some((refused, _)) = approval_taken_meanwhile(test, "undoid", approval) else {
        return;
    };
    assert_eq!(refused, Refusal::DuplicateOperation("undo-1".into()));
}

#[test]
fn export_on_postgres_writes_every_entry_in_order_and_checkpoint_names_the_head() {
    let test = "export_on_postgres_writes_every_entry_in_order_and_checkpoint_names_the_head";
    let Some((_pg, url)) = outbox(test, "export") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let version = unknown_op(&mut ws, dir.path(), "op-1");
    confirm(&mut ws, "op-1", version).expect("confirm");
    let journal = Journal::open(location(&url), OpenOptions::default()).expect("journal");
    let mut lines = Vec::new();
    let report = journal
        .export(&mut |line: &str| {
            lines.push(serde_json::from_str::<serde_json::Value>(line).expect("a JSON line"));
            Ok(())
        })
        .expect("export");
    assert!(report.intact, "{report:?}");
    let seqs: Vec<u64> = lines
        .iter()
        .map(|l| l["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=report.rows).collect::<Vec<_>>());
    let head = journal.checkpoint().expect("checkpoint");
    assert_eq!(
        (head.length, head.head_hash.as_str()),
        (
            i64::try_from(report.rows).expect("rows"),
            report.head_hash.as_str()
        )
    );
    assert_eq!(lines.last().expect("an entry")["hash"], head.head_hash);
}

/// The decision's conditional update holds its own `version` predicate:
/// another writer that moves the operation's version without the journal
/// head (behind recon's back, the op still `unknown`) and commits while
/// the decision's update waits on the row makes the update touch no row
/// (READ COMMITTED re-reads it), and the decision is refused
/// `stale_version` naming the version found, nothing recorded.
#[test]
fn a_decision_whose_row_moved_while_its_update_waited_is_refused_stale_version() {
    let test = "a_decision_whose_row_moved_while_its_update_waited_is_refused_stale_version";
    let Some((pg, url)) = outbox(test, "moved_row") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open(&url);
    let version = unknown_op(&mut ws, dir.path(), "op-1");
    let moved = "UPDATE operations SET version = version + 1 WHERE op_id = 'op-1';";
    match taken_meanwhile(pg, &url, moved, || confirm(&mut ws, "op-1", version)) {
        Refusal::StaleVersion {
            expected, found, ..
        } => assert_eq!((expected, found), (version, version + 1)),
        other => panic!("expected stale_version, got {other:?}"),
    }
    let decided: i64 = client(&url)
        .query_one("SELECT count(*) FROM journal WHERE kind = 'decided'", &[])
        .expect("count")
        .get(0);
    assert_eq!(decided, 0);
    let op = open(&url).operation("op-1").expect("read").expect("the op");
    assert_eq!((op.state, op.version), (OpState::Unknown, version + 1));
}

/// What a superuser runs first to write what the rules forbid (as an
/// administrator could, on any table): its triggers do not fire.
const BEHIND_THE_RULES: &str = "SET session_replication_role = replica;";
