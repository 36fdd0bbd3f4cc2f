//! Evidence no login can forge (SPEC 12): the database's own rules, held
//! against a login that writes with plain SQL inside an act of its own,
//! with entries that chain to the head and name itself. Each test is a
//! reproduction of issue 29 ending in the database's refusal (`RCR01`,
//! which recon reports as `rule_violation`; `RCC01`, `unbacked_close`; or
//! 42501, `permission_denied`), and what that refusal leaves: nothing
//! written.

use super::outbox::{client, outbox, register_mail};
use super::roles::{login, open, team};
use super::{database_of, fingerprint, initialized};
use crate::real_receivers::servers::{self, Postgres};
use crate::support::run_with_env;
use serde_json::json;

/// What a plain SQL connection as `url`'s login gets for `sql`, in a
/// transaction of its own: `Ok` or the SQLSTATE and message.
fn try_sql(url: &str, sql: &str) -> Result<(), (String, String)> {
    let mut client = client(url);
    let mut tx = client.transaction().expect("begin");
    let ran = tx.batch_execute(sql).and_then(|()| tx.commit());
    ran.map_err(|e| {
        let db = e.as_db_error().expect("the server's refusal");
        (db.code().code().to_string(), db.message().to_string())
    })
}

/// `sql`, run as the login of `who` (a URL), is refused by a rule of the
/// database, whose message says `says`, and the journal did not move.
#[track_caller]
fn refused_by_a_rule(pg: &Postgres, who: &str, sql: &str, says: &str) {
    refused_with(pg, who, sql, "RCR01", says);
}

/// `sql`, run as the login of `who`, is refused with the SQLSTATE `code`
/// and a message that says `says`, and the journal did not move.
#[track_caller]
fn refused_with(pg: &Postgres, who: &str, sql: &str, code: &str, says: &str) {
    let before = journal_length(pg, who);
    match try_sql(who, sql) {
        Err((found, message)) => {
            assert_eq!(found, code, "{sql}: {message}");
            assert!(message.contains(says), "{message}");
        }
        Ok(()) => panic!("{sql}: allowed"),
    }
    assert_eq!(journal_length(pg, who), before, "nothing was written");
}

fn journal_length(pg: &Postgres, url: &str) -> String {
    pg.psql(database_of(url), "SELECT count(*) FROM journal")
        .trim()
        .to_string()
}

/// An entry of `kind` for `op` in `role`'s name, with `fields` (a JSON
/// object's members, in key order after `at`), that follows the head:
/// the INSERT, as an attacker who knows the format writes it.
fn next_entry(pg: &Postgres, url: &str, kind: &str, op: &str, role: &str, fields: &str) -> String {
    let head = pg.psql(
        database_of(url),
        "SELECT seq || '|' || hash FROM journal_head",
    );
    let (seq, hash) = head.trim().split_once('|').expect("the head");
    let next = seq.parse::<i64>().expect("a seq") + 1;
    let content = format!(
        r#"{{"at":"2026-12-04T23:00:00.000Z",{fields}"kind":"{kind}","op_id":"{op}","role":"{role}","seq":{next}}}"#
    );
    let link = recon::audit::link_hash(hash, &content);
    format!(
        "INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
         VALUES ({next}, '{kind}', '{op}', '{content}', '{hash}', '{link}');"
    )
}

/// The rows of a receipt the receiver never wrote: the operation
/// confirmed with a made-up effect, and its evidence row naming the entry
/// just appended.
fn forged_receipt_rows(op: &str) -> String {
    format!(
        "UPDATE operations SET state = 'confirmed', version = version + 1,
             confirmed_effect_id = 'fx-forged' WHERE op_id = '{op}';
         INSERT INTO evidence (seq, op_id, source, reviewer, decision, verdict, snapshot,
             from_version, to_version, effect_id, receiver, receiver_describe_sha256,
             response_sha256, journal_seq, recorded_at)
         SELECT (SELECT coalesce(max(seq), 0) + 1 FROM evidence), '{op}', 'receipt', NULL,
             'confirmed', NULL, '{{}}', version - 1, version, 'fx-forged', receiver, 'x', 'x',
             (SELECT seq FROM journal_head), 'x'
         FROM operations WHERE op_id = '{op}';"
    )
}

#[test]
fn a_sender_may_not_confirm_an_operation_whose_dispatch_failed_with_a_receipt_of_its_own() {
    // Reproduction 1: the dispatch of op-1 had its outcome, a failed apply.
    let test =
        "a_sender_may_not_confirm_an_operation_whose_dispatch_failed_with_a_receipt_of_its_own";
    let Some((pg, url, _dir)) = team(test, "forgedreceipt") else {
        return;
    };
    // The owner, who dispatched it, may not write a receipt: the dispatch
    // had its outcome (the claim itself, no other rule in the way).
    let owner_entry = next_entry(pg, &url, "receipt", "op-1", "postgres", "");
    refused_by_a_rule(
        pg,
        &url,
        &format!("SELECT * FROM recon_begin_write('receipt'); {owner_entry}"),
        "first outcome of its dispatch",
    );
    let sender = login(pg, &url, "forgedreceipt_s", &["recon_sender"]);
    let entry = next_entry(
        pg,
        &url,
        "receipt",
        "op-1",
        "forgedreceipt_s",
        r#""decision":"confirmed","effect_id":"fx-forged","#,
    );
    let sql = format!(
        "SELECT * FROM recon_begin_write('receipt'); {}",
        forged_receipt_rows("op-1").replacen(
            "INSERT INTO evidence",
            &format!("{entry} INSERT INTO evidence"),
            1
        )
    );
    // Nor the sender, with the operation's rows (refused by the same
    // rule first; it is not the dispatching login either).
    refused_by_a_rule(pg, &sender, &sql, "first outcome of its dispatch");
    let state = pg.psql(
        database_of(&url),
        "SELECT state FROM operations WHERE op_id = 'op-1'",
    );
    assert_eq!(state.trim(), "unknown");
}

/// A dispatch of `op` (prepared at version 1) as `role`, through plain
/// SQL, as recon writes it.
fn dispatch_sql(pg: &Postgres, url: &str, op: &str, role: &str) -> String {
    let entry = next_entry(
        pg,
        url,
        "dispatched",
        op,
        role,
        r#""from_version":1,"to_version":2,"#,
    );
    format!(
        "SELECT * FROM recon_begin_write('dispatch');
         UPDATE operations SET state = 'unknown', version = 2,
             dispatch_count = dispatch_count + 1 WHERE op_id = '{op}';
         INSERT INTO dispatch_log (seq, op_id, from_version)
             VALUES ((SELECT coalesce(max(seq), 0) + 1 FROM dispatch_log), '{op}', 1);
         {entry}"
    )
}

#[test]
fn a_receipt_is_written_only_by_the_login_that_dispatched_the_operation() {
    let test = "a_receipt_is_written_only_by_the_login_that_dispatched_the_operation";
    let Some((pg, url)) = outbox(test, "receiptlogin") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut owner = open(&url);
    register_mail(&mut owner, dir.path(), "");
    owner
        .prepare("op-2", "post_letter", &json!({"to": "ann"}))
        .expect("prepare");
    let first = login(pg, &url, "receiptlogin_s", &["recon_sender"]);
    let other = login(pg, &url, "receiptlogin_t", &["recon_sender"]);
    // A dispatch written by hand as recon writes it: the database takes it.
    try_sql(&first, &dispatch_sql(pg, &url, "op-2", "receiptlogin_s"))
        .expect("the dispatch, as recon writes it");
    // Another sender answers it with a receipt of its own: refused.
    let entry = next_entry(pg, &url, "receipt", "op-2", "receiptlogin_t", "");
    let sql = format!(
        "SELECT * FROM recon_begin_write('receipt'); {entry} {}",
        forged_receipt_rows("op-2")
    );
    refused_by_a_rule(pg, &other, &sql, "written by the login that dispatched it");
}

#[test]
fn a_dispatch_happens_once_and_a_second_dispatched_entry_is_refused() {
    // Reproduction 13: op-1 is unknown already (dispatched by the owner).
    let test = "a_dispatch_happens_once_and_a_second_dispatched_entry_is_refused";
    let Some((pg, url, _dir)) = team(test, "twodispatches") else {
        return;
    };
    let sender = login(pg, &url, "twodispatches_s", &["recon_sender"]);
    let entry = next_entry(
        pg,
        &url,
        "dispatched",
        "op-1",
        "twodispatches_s",
        r#""from_version":2,"to_version":3,"#,
    );
    let sql = format!(
        "SELECT * FROM recon_begin_write('dispatch');
         UPDATE operations SET version = version + 1, dispatch_count = dispatch_count + 1
             WHERE op_id = 'op-1';
         INSERT INTO dispatch_log (seq, op_id, from_version)
             VALUES ((SELECT coalesce(max(seq), 0) + 1 FROM dispatch_log), 'op-1', 2);
         {entry}"
    );
    refused_by_a_rule(pg, &sender, &sql, "a dispatch happens once");
}

#[test]
fn an_operation_leaves_prepared_only_by_its_dispatch_and_unknown_only_by_its_evidence() {
    let test = "an_operation_leaves_prepared_only_by_its_dispatch_and_unknown_only_by_its_evidence";
    let Some((pg, url, _dir)) = team(test, "moves") else {
        return;
    };
    open(&url)
        .prepare("op-2", "post_letter", &json!({"to": "ann"}))
        .expect("prepare");
    let reviewer = login(pg, &url, "moves_v", &["recon_reviewer"]);
    // A reviewer's observation moving op-2 to unknown, with no dispatch.
    let observed = next_entry(pg, &url, "observed", "op-2", "moves_v", "");
    refused_by_a_rule(
        pg,
        &reviewer,
        &format!(
            "SELECT * FROM recon_begin_write('decide');
             UPDATE operations SET state = 'unknown', version = 2 WHERE op_id = 'op-2';
             {observed}"
        ),
        "leaves prepared only by its dispatched entry",
    );
    // A decision of op-1 resting on an observation alone, no evidence row.
    let observed = next_entry(pg, &url, "observed", "op-1", "moves_v", "");
    refused_by_a_rule(
        pg,
        &reviewer,
        &format!(
            "SELECT * FROM recon_begin_write('decide');
             UPDATE operations SET state = 'not_applied', version = version + 1
                 WHERE op_id = 'op-1';
             {observed}"
        ),
        "leaves unknown only by a receipt or a decision",
    );
}

#[test]
fn recon_reports_a_rules_refusal_as_rule_violation_exit_3() {
    // The store's mapping of RCR01: a dispatch recon writes on an
    // operation whose `dispatched` entry a login wrote by hand first.
    let test = "recon_reports_a_rules_refusal_as_rule_violation_exit_3";
    let Some((pg, url)) = outbox(test, "ruleexit") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut owner = open(&url);
    register_mail(&mut owner, dir.path(), "");
    owner
        .prepare("op-3", "post_letter", &json!({"to": "ann"}))
        .expect("prepare");
    // Only the entry: op-3 stays prepared, so recon's own dispatch (which
    // reads it prepared) meets the rule that a dispatch happens once.
    let entry = next_entry(
        pg,
        &url,
        "dispatched",
        "op-3",
        "postgres",
        r#""from_version":1,"to_version":2,"#,
    );
    pg.psql(
        database_of(&url),
        &format!("ALTER TABLE journal DISABLE TRIGGER journal_rules; {entry} ALTER TABLE journal ENABLE TRIGGER journal_rules;"),
    );
    let before = journal_length(pg, &url);
    let out = run_with_env(
        &["dispatch", "op-3", "--json", "--database", &url],
        None,
        &[],
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let error = &out.json()["error"];
    assert_eq!(error["code"], json!("rule_violation"), "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("a dispatch happens once"),
        "{error}"
    );
    assert_eq!(journal_length(pg, &url), before, "nothing was written");
}

#[test]
fn an_outbox_of_schema_6_is_refused_schema_outdated_by_every_command_naming_db_upgrade() {
    let test =
        "an_outbox_of_schema_6_is_refused_schema_outdated_by_every_command_naming_db_upgrade";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "schema6");
    let database = database_of(&url);
    // What main at ce2d017 made: schema 6, without this schema's rules.
    pg.psql(
        database,
        "DROP TRIGGER journal_rules ON journal;
         DROP TRIGGER operations_moves_rules ON operations;
         DROP TRIGGER operations_route_rules ON operations;
         DROP FUNCTION recon_journal_rules(); DROP FUNCTION recon_operation_moves();
         DROP FUNCTION recon_operation_route();
         UPDATE meta SET value = '6' WHERE key = 'schema_version'",
    );
    let made = fingerprint(pg, database);
    for command in [
        &["ops", "--json"][..],
        &["verify", "--json"],
        &["db", "init", "--json"],
        &[
            "prepare",
            "--op",
            "op-9",
            "--action",
            "post_letter",
            "--payload",
            "{}",
            "--json",
        ],
    ] {
        let mut args = command.to_vec();
        args.extend(["--database", &url]);
        let out = run_with_env(&args, None, &[]);
        assert_eq!(out.code, Some(4), "{command:?}: {}", out.stderr);
        let error = &out.json()["error"];
        assert_eq!(
            error["code"],
            json!("schema_outdated"),
            "{command:?}: {error}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("schema version 6") && message.contains("recon db upgrade"),
            "{message}"
        );
    }
    assert_eq!(fingerprint(pg, database), made, "nothing was changed");
}

/// Registers a second receiver, `other`, for `other_action`, as the
/// owner; returns its registration id.
fn register_other(pg: &Postgres, url: &str, dir: &std::path::Path) -> i64 {
    let state = dir.join("other.json").display().to_string();
    let args = ["--state".to_string(), state];
    open(url)
        .register_receiver(&recon::workspace::NewReceiver {
            name: "other",
            actions: &["other_action".to_string()],
            program: &crate::support::adapter_fixture(),
            args: &args,
            timeout_ms: None,
            env: &[],
        })
        .expect("register other");
    pg.psql(
        database_of(url),
        "SELECT id FROM receivers WHERE name = 'other'",
    )
    .trim()
    .parse()
    .expect("an id")
}

#[test]
fn a_reviewer_may_not_reroute_an_operation_to_another_receiver() {
    // Reproduction 3: op-1, unknown, routed to `mail`.
    let test = "a_reviewer_may_not_reroute_an_operation_to_another_receiver";
    let Some((pg, url, dir)) = team(test, "reroute") else {
        return;
    };
    let other = register_other(pg, &url, dir.path());
    let reviewer = login(pg, &url, "reroute_v", &["recon_reviewer"]);
    let observed = next_entry(pg, &url, "observed", "op-1", "reroute_v", "");
    refused_by_a_rule(
        pg,
        &reviewer,
        &format!(
            "SELECT * FROM recon_begin_write('observe');
             UPDATE operations SET receiver = 'other', receiver_id = {other}
                 WHERE op_id = 'op-1';
             {observed}"
        ),
        "routes are fixed",
    );
    let route = pg.psql(
        database_of(&url),
        "SELECT receiver FROM operations WHERE op_id = 'op-1'",
    );
    assert_eq!(route.trim(), "mail");
}

/// An approver's compensation `undo-1` of op-1's confirmed effect, routed
/// to `receiver` (registration `id`), written by hand as recon writes it.
fn compensation_sql(pg: &Postgres, url: &str, who: &str, receiver: &str, id: i64) -> String {
    let row = pg.psql(
        database_of(url),
        "SELECT confirmed_effect_id || '|' || version FROM operations WHERE op_id = 'op-1'",
    );
    let (effect, version) = row.trim().split_once('|').expect("confirmed");
    let entry = next_entry(pg, url, "approved", "undo-1", who, "");
    format!(
        "SELECT * FROM recon_begin_write('approve');
         INSERT INTO operations (op_id, kind, action_kind, payload, state, version,
             compensates_effect_id, compensates_op_id, receiver, created_at, updated_at,
             receiver_id)
         VALUES ('undo-1', 'compensation', 'post_letter', '{{}}', 'prepared', 1, '{effect}',
             'op-1', '{receiver}', 'x', 'x', {id});
         INSERT INTO compensation_approvals (original_op_id, effect_id, approved_version,
             approver, compensation_op_id, action_kind, payload)
         VALUES ('op-1', '{effect}', {version}, 'amy', 'undo-1', 'post_letter', '{{}}');
         {entry}"
    )
}

#[test]
fn an_approver_may_not_route_a_compensation_away_from_its_original_effects_registration() {
    // Reproduction 4: op-1 confirmed on `mail`; `other` registered too.
    let test =
        "an_approver_may_not_route_a_compensation_away_from_its_original_effects_registration";
    let Some((pg, url, dir)) = team(test, "comproute") else {
        return;
    };
    let other = register_other(pg, &url, dir.path());
    let mut reviewer = open(&login(pg, &url, "comproute_v", &["recon_reviewer"]));
    let version = reviewer
        .operation("op-1")
        .expect("read")
        .expect("op-1")
        .version;
    super::outbox::confirm(&mut reviewer, "op-1", version).expect("confirm");
    let approver = login(pg, &url, "comproute_a", &["recon_approver"]);
    let elsewhere = compensation_sql(pg, &url, "comproute_a", "other", other);
    refused_by_a_rule(pg, &approver, &elsewhere, "routes are fixed");
    // The same approval routed to the original's registration is taken.
    let mail: i64 = pg
        .psql(
            database_of(&url),
            "SELECT receiver_id FROM operations WHERE op_id = 'op-1'",
        )
        .trim()
        .parse()
        .expect("an id");
    let routed = compensation_sql(pg, &url, "comproute_a", "mail", mail);
    try_sql(&approver, &routed).expect("the approval, routed as its original");
}

/// Reproduction 10 on `ws` (either store), the fixture adapter as `mail`
/// in `dir`, its close barrier failed: op-1's apply is held, op-1 is
/// closed and decided `not_applied`, then the apply goes through and its
/// receipt arrives. It is journaled as a late receipt that contradicts
/// the decision and raises the marker; the decision stands, and
/// `dispatch` reports it as late.
fn a_late_receipt_is_journaled_and_contradicts(ws: &mut recon::Workspace, dir: &std::path::Path) {
    let fifo = dir.join("mail.json.release");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.expect("mkfifo").success());
    register_mail(ws, dir, "apply:late-apply");
    ws.prepare("op-1", "post_letter", &json!({"to": "ann"}))
        .expect("prepare");
    let pending = ws
        .start_dispatch("op-1", recon::dispatch::DispatchOptions::default())
        .expect("the dispatch starts, its apply held");
    ws.reconcile(&recon::workspace::ReconcileRequest {
        keep: None,
        op_id: "op-1",
        reviewer: "ann",
        decision: recon::domain::Decision::NotApplied,
        expected_version: 2,
        payload: None,
        close_authorized_by: Some("ann"),
    })
    .expect("closed and decided not_applied");
    let mut release = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open the fifo");
    std::io::Write::write_all(&mut release, b"go\n").expect("release the apply");
    drop(release);
    let report = ws.finish_dispatch(pending).expect("the late receipt");
    let reported = serde_json::to_value(&report).expect("json");
    assert_eq!(reported["outcome"], json!("receipt"), "{reported}");
    assert_eq!(reported["state"], json!("not_applied"), "{reported}");
    assert_eq!(reported["late"], json!(true), "{reported}");
    assert_eq!(reported["contradicts"], json!(true), "{reported}");
    let op = ws.operation("op-1").expect("read").expect("op-1");
    assert_eq!(op.state, recon::domain::OpState::NotApplied);
    let contradicted = op.triage.contradicted.expect("the marker is up");
    let history = ws.show("op-1").expect("show");
    let last = history.observations.last().expect("the receipt's read");
    assert_eq!(last.seq, contradicted.seq);
}

#[test]
fn a_late_receipt_after_not_applied_is_journaled_and_contradicts_on_postgres() {
    let test = "a_late_receipt_after_not_applied_is_journaled_and_contradicts_on_postgres";
    let Some((_pg, url)) = outbox(test, "latereceipt") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    a_late_receipt_is_journaled_and_contradicts(&mut open(&url), dir.path());
    let report = super::outbox::verify(&url);
    assert!(report.intact, "{report:?}");
}

#[test]
fn a_late_receipt_after_not_applied_is_journaled_and_contradicts_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = recon::Workspace::open(dir.path(), recon::OpenOptions::default().creating())
        .expect("a workspace");
    a_late_receipt_is_journaled_and_contradicts(&mut ws, dir.path());
    drop(ws);
    let workspace = dir.path().display().to_string();
    let out = run_with_env(&["verify", "--json", "--workspace", &workspace], None, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stdout);
}

#[test]
fn the_owner_may_not_turn_four_eyes_off_or_change_the_workspace_id() {
    // Reproduction 5, its two refusals by the database: the owner (here
    // the superuser who ran db init) through plain SQL.
    let test = "the_owner_may_not_turn_four_eyes_off_or_change_the_workspace_id";
    let Some((pg, url)) = outbox(test, "settings") else {
        return;
    };
    let mut args = vec!["db", "init", "--four-eyes", "--database"];
    args.push(&url);
    assert_eq!(run_with_env(&args, None, &[]).code, Some(0));
    let made = fingerprint(pg, database_of(&url));
    for (sql, says) in [
        (
            "UPDATE meta SET value = '0' WHERE key = 'four_eyes'",
            "four eyes, once set, stays set",
        ),
        (
            "DELETE FROM meta WHERE key = 'four_eyes'",
            "four eyes, once set, stays set",
        ),
        (
            "UPDATE meta SET value = '00112233445566778899aabbccddeeff'
             WHERE key = 'workspace_id'",
            "workspace id never changes",
        ),
        (
            "DELETE FROM meta WHERE key = 'workspace_id'",
            "workspace id never changes",
        ),
        ("TRUNCATE meta", "never emptied"),
    ] {
        refused_by_a_rule(pg, &url, sql, says);
    }
    assert_eq!(fingerprint(pg, database_of(&url)), made);
}

/// The `settings` entries of the outbox at `url`, oldest first, as JSON.
fn settings_entries(pg: &Postgres, url: &str) -> Vec<serde_json::Value> {
    pg.psql(
        database_of(url),
        "SELECT entry FROM journal WHERE kind = 'settings' ORDER BY seq",
    )
    .lines()
    .map(|line| serde_json::from_str(line).expect("a settings entry"))
    .collect()
}

#[test]
fn db_init_journals_the_outboxs_settings_and_again_only_when_a_run_changes_them() {
    let test = "db_init_journals_the_outboxs_settings_and_again_only_when_a_run_changes_them";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = pg.new_database("settings_made");
    let prefix = servers::roles_prefix_for(&url);
    let init = |four_eyes: bool| {
        let mut args = vec![
            "db",
            "init",
            "--json",
            "--database",
            &url,
            "--roles",
            &prefix,
        ];
        if four_eyes {
            args.push("--four-eyes");
        }
        let out = run_with_env(&args, None, &[]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        out.json()
    };
    let made = init(false);
    let entries = settings_entries(pg, &url);
    assert_eq!(entries.len(), 1, "{entries:?}");
    for (key, value) in [
        ("four_eyes", json!(false)),
        ("workspace_id", made["workspace_id"].clone()),
        ("owner", json!("postgres")),
        ("roles_prefix", json!(prefix)),
        ("role", json!("postgres")),
    ] {
        assert_eq!(entries[0][key], value, "{key}: {}", entries[0]);
    }
    init(false);
    assert_eq!(settings_entries(pg, &url).len(), 1, "nothing changed");
    init(true);
    let entries = settings_entries(pg, &url);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[1]["four_eyes"], json!(true));
    init(true);
    assert_eq!(settings_entries(pg, &url).len(), 2, "nothing changed");
    let out = run_with_env(&["verify", "--json", "--database", &url], None, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stdout);
}

#[test]
fn a_setting_changes_only_with_a_settings_entry_saying_so_whoever_writes_meta() {
    // Reproduction 5's rest: the owner (here the superuser who ran db
    // init) through plain SQL may not turn four eyes on behind the
    // journal, hand the outbox to another owner, or remove the owner.
    let test = "a_setting_changes_only_with_a_settings_entry_saying_so_whoever_writes_meta";
    let Some((pg, url)) = outbox(test, "settings_sql") else {
        return;
    };
    let made = fingerprint(pg, database_of(&url));
    for (sql, says) in [
        (
            "INSERT INTO meta (key, value) VALUES ('four_eyes', '1')",
            "set only by a journaled act",
        ),
        (
            "UPDATE meta SET value = 'mallory' WHERE key = 'owner'",
            "set only by a journaled act",
        ),
        (
            "DELETE FROM meta WHERE key = 'owner'",
            "owner is never removed",
        ),
    ] {
        refused_by_a_rule(pg, &url, sql, says);
    }
    assert_eq!(fingerprint(pg, database_of(&url)), made);
}

#[test]
fn verify_on_postgres_names_a_setting_changed_behind_the_journal() {
    let test = "verify_on_postgres_names_a_setting_changed_behind_the_journal";
    let Some((pg, url)) = outbox(test, "settings_verify") else {
        return;
    };
    // A superuser may switch the triggers off for its session; `verify`
    // still holds each setting to the newest settings entry.
    pg.psql(
        database_of(&url),
        "SET session_replication_role = replica;
         UPDATE meta SET value = 'mallory' WHERE key = 'owner';
         INSERT INTO meta (key, value) VALUES ('four_eyes', '1')",
    );
    let out = run_with_env(&["verify", "--json", "--database", &url], None, &[]);
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    let report = out.json();
    let fields: Vec<&str> = report["projection_mismatches"]
        .as_array()
        .expect("mismatches")
        .iter()
        .filter_map(|m| m["field"].as_str())
        .collect();
    assert_eq!(fields, ["meta.four_eyes", "meta.owner"], "{report}");
}

#[test]
fn a_reviewer_may_not_list_a_surplus_on_an_operation_it_did_not_keep_one_effect_of() {
    // SPEC 14: the surplus is set once, with the confirmation that keeps
    // one effect; op-1 here is unknown, and an observation sets it.
    let test = "a_reviewer_may_not_list_a_surplus_on_an_operation_it_did_not_keep_one_effect_of";
    let Some((pg, url, _dir)) = team(test, "surplus") else {
        return;
    };
    let reviewer = login(pg, &url, "surplus_v", &["recon_reviewer"]);
    let observed = next_entry(pg, &url, "observed", "op-1", "surplus_v", "");
    refused_by_a_rule(
        pg,
        &reviewer,
        &format!(
            "SELECT * FROM recon_begin_write('observe');
             UPDATE operations SET surplus_effect_ids = '[\"fx-000009\"]'
                 WHERE op_id = 'op-1';
             {observed}"
        ),
        "only go forward",
    );
    let surplus = pg.psql(
        database_of(&url),
        "SELECT coalesce(surplus_effect_ids, 'none') FROM operations WHERE op_id = 'op-1'",
    );
    assert_eq!(surplus.trim(), "none");
}

/// A decided entry of op-1 by `role`, `not_applied` on `snapshot` (JSON
/// text), naming `close` (members in key order, after `at`), followed by
/// the rows a decision writes: the SQL a reviewer who knows the format
/// runs in an act of its own.
fn forged_decision(pg: &Postgres, url: &str, role: &str, snapshot: &str, close: &str) -> String {
    let fields = format!(
        r#"{close}"decision":"not_applied","effect_id":null,"from_version":2,"reviewer":"{role}","snapshot":{snapshot},"source":"review","to_version":3,"verdict":"terminal_absence","#
    );
    let entry = next_entry(pg, url, "decided", "op-1", role, &fields);
    format!(
        "SELECT * FROM recon_begin_write('decide'); {entry}
         UPDATE operations SET state = 'not_applied', version = 3 WHERE op_id = 'op-1';
         INSERT INTO evidence (seq, op_id, source, reviewer, decision, verdict, snapshot,
             from_version, to_version, effect_id, receiver, receiver_describe_sha256,
             response_sha256, journal_seq, recorded_at)
         VALUES ((SELECT coalesce(max(seq), 0) + 1 FROM evidence), 'op-1', 'review', '{role}',
             'not_applied', 'terminal_absence', '{snapshot}', 2, 3, NULL, 'mail', 'x', 'x',
             (SELECT seq FROM journal_head), 'x');"
    )
}

/// Reproduction 2 of issue 29's closed snapshot, for op-1, which no one
/// closed.
const MADE_UP_CLOSED: &str =
    r#"{"authoritative":true,"closed":true,"complete":true,"matches":[],"op_id":"op-1"}"#;

fn op_state(pg: &Postgres, url: &str) -> String {
    let state = pg.psql(
        database_of(url),
        "SELECT state FROM operations WHERE op_id = 'op-1'",
    );
    state.trim().to_string()
}

#[test]
fn a_reviewer_may_not_record_not_applied_on_a_made_up_closed_snapshot_unbacked_close() {
    // Reproduction 2: a reviewer without the closer role records
    // `not_applied` on a closed snapshot no close recorded, through plain
    // SQL; naming no close, or an entry that is no close of it, alike.
    let test = "a_reviewer_may_not_record_not_applied_on_a_made_up_closed_snapshot_unbacked_close";
    let Some((pg, url, _dir)) = team(test, "madeupclose") else {
        return;
    };
    let reviewer = login(pg, &url, "madeupclose_v", &["recon_reviewer"]);
    for close in ["", r#""close_seq":1,"#] {
        let sql = forged_decision(pg, &url, "madeupclose_v", MADE_UP_CLOSED, close);
        refused_with(pg, &reviewer, &sql, "RCC01", "rests on a recorded close");
    }
    assert_eq!(op_state(pg, &url), "unknown");
}

#[test]
fn a_decision_whose_snapshot_is_not_its_closes_is_refused_unbacked_close() {
    // op-1 is closed by recon (its effect applied: the closing snapshot
    // holds it); a reviewer names that close beside an empty snapshot.
    let test = "a_decision_whose_snapshot_is_not_its_closes_is_refused_unbacked_close";
    let Some((pg, url, _dir)) = team(test, "otherclose") else {
        return;
    };
    open(&url).snapshot("op-1", Some("ann")).expect("a close");
    let seq = pg.psql(
        database_of(&url),
        "SELECT max(seq) FROM journal WHERE kind = 'closed' AND op_id = 'op-1'",
    );
    let reviewer = login(pg, &url, "otherclose_v", &["recon_reviewer"]);
    let close = format!(r#""close_seq":{},"#, seq.trim());
    let sql = forged_decision(pg, &url, "otherclose_v", MADE_UP_CLOSED, &close);
    refused_with(
        pg,
        &reviewer,
        &sql,
        "RCC01",
        "holding exactly this snapshot",
    );
    assert_eq!(op_state(pg, &url), "unknown");
}

/// A `closed` entry of op-1 by `role` carrying `snapshot` and its hash.
fn closed_entry(pg: &Postgres, url: &str, role: &str, snapshot: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(snapshot).expect("a snapshot");
    let hash = recon::domain::canonical_sha256(&value);
    let fields = format!(
        r#""authorized_by":"{role}","matches":[],"receiver":"mail","response_sha256":"x","snapshot":{snapshot},"snapshot_sha256":"{hash}","#
    );
    next_entry(pg, url, "closed", "op-1", role, &fields)
}

#[test]
fn a_closed_entry_is_written_only_by_a_closer_and_only_after_a_close_requested_of_its_operation() {
    let test =
        "a_closed_entry_is_written_only_by_a_closer_and_only_after_a_close_requested_of_its_operation";
    let Some((pg, url, _dir)) = team(test, "closedentry") else {
        return;
    };
    // A reviewer: no act of its own writes `closed`, and it may not begin
    // a close.
    let reviewer = login(pg, &url, "closedentry_v", &["recon_reviewer"]);
    let entry = closed_entry(pg, &url, "closedentry_v", MADE_UP_CLOSED);
    for act in ["decide", "close"] {
        let sql = format!("SELECT * FROM recon_begin_write('{act}'); {entry}");
        refused_with(pg, &reviewer, &sql, "42501", "permission denied");
    }
    // A closer, before any close of op-1 was requested.
    let closer = login(pg, &url, "closedentry_c", &["recon_closer"]);
    let entry = closed_entry(pg, &url, "closedentry_c", MADE_UP_CLOSED);
    let sql = format!("SELECT * FROM recon_begin_write('close'); {entry}");
    refused_by_a_rule(pg, &closer, &sql, "follows a close_requested");
    // After its request, a `closed` entry without the snapshot it recorded.
    let requested = next_entry(
        pg,
        &url,
        "close_requested",
        "op-1",
        "closedentry_c",
        r#""authorized_by":"closedentry_c","receiver":"mail","#,
    );
    try_sql(
        &closer,
        &format!("SELECT * FROM recon_begin_write('close'); {requested}"),
    )
    .expect("a close request, as recon writes it");
    let bare = next_entry(pg, &url, "closed", "op-1", "closedentry_c", "");
    let sql = format!("SELECT * FROM recon_begin_write('close'); {bare}");
    refused_by_a_rule(pg, &closer, &sql, "carries the snapshot it recorded");
    // And whole, it is the closer's to relay: taken.
    let entry = closed_entry(pg, &url, "closedentry_c", MADE_UP_CLOSED);
    try_sql(
        &closer,
        &format!("SELECT * FROM recon_begin_write('close'); {entry}"),
    )
    .expect("a close after its request, carrying its snapshot");
}
