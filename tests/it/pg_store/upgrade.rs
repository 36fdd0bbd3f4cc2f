//! `recon db upgrade` on a real outbox of schema 6, made by the release
//! before the fourth wave (ce2d017) and kept as a dump
//! (`tests/fixtures/schema6_pg`, its README says how): every other command
//! refuses it `schema_outdated`; the upgrade brings it to this schema in one
//! transaction, journaled, after which `verify` passes (the schema compared
//! with a new outbox's, every old entry replayed under this build's rules)
//! and the old roles and rows go on; a login that is not the owner is
//! refused; killed before its commit, it leaves schema 6 as it was.

use super::faults::{hold, recon};
use super::roles::login;
use super::{database_of, fingerprint, initialized, INIT_LOCK};
use crate::real_receivers::finish;
use crate::real_receivers::servers::{self, Postgres};
use crate::support::{run_with_env, Run};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

/// How many entries ce2d017 journaled in the fixture (its README: `verify`
/// said so when it was made); the upgrade's is the next.
const OLD_ENTRIES: usize = 22;
const UPGRADE_SEQ: usize = OLD_ENTRIES + 1;
/// The settings the upgrade found, journaled after it (SPEC 12).
const SETTINGS_SEQ: usize = UPGRADE_SEQ + 1;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/schema6_pg")
        .join(name)
}

/// A database restored from the dump once per process (roles first),
/// copied by [`schema6`].
fn template(pg: &Postgres) -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let url = pg.new_database("schema6_template");
        let database = database_of(&url);
        pg.psql_file(database, &fixture("roles.sql"));
        pg.psql_file(database, &fixture("outbox.sql"));
        database.to_string()
    })
}

/// A fresh copy of ce2d017's outbox; its URL.
fn schema6(test: &str, prefix: &str) -> Option<(&'static Postgres, String)> {
    let pg = servers::require(test, Postgres::older())?;
    let url = pg.new_database_from(prefix, template(pg));
    Some((pg, url))
}

/// `recon ARGS --database URL --json`.
#[track_caller]
fn cli(url: &str, args: &[&str]) -> Run {
    let mut all = args.to_vec();
    all.extend(["--database", url, "--json"]);
    run_with_env(&all, None, &[])
}

/// `cli`, which must exit with `code`.
#[track_caller]
fn cli_ok(url: &str, args: &[&str], code: i32) -> Value {
    let out = cli(url, args);
    assert_eq!(out.code, Some(code), "{args:?}: {}", out.stderr);
    out.json()
}

/// Everything the upgrade could change, down to the rows: the catalog and
/// meta ([`fingerprint`]), every column of recon's tables, every trigger's
/// definition and every function's body, and each table's rows.
fn everything(pg: &Postgres, database: &str) -> String {
    format!(
        "{}\n{}",
        fingerprint(pg, database),
        shape_and_rows(pg, database)
    )
}

/// Every column, trigger, function and constraint of the schema, and each
/// table's rows.
fn shape_and_rows(pg: &Postgres, database: &str) -> String {
    let tables = pg.psql(
        database,
        "SELECT string_agg(relname::text, ' ' ORDER BY relname) FROM pg_class
         WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'",
    );
    let mut contents = String::new();
    for table in tables.split_whitespace() {
        let digest = pg.psql(
            database,
            &format!("SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t"),
        );
        contents.push_str(&format!("{table}={}\n", digest.trim()));
    }
    let shape = pg.psql(
        database,
        "SELECT (SELECT string_agg(table_name || '.' || column_name || ' ' || data_type, ','
                 ORDER BY table_name, ordinal_position)
                 FROM information_schema.columns WHERE table_schema = 'public'),
                (SELECT string_agg(pg_get_triggerdef(oid), ',' ORDER BY tgname)
                 FROM pg_trigger WHERE NOT tgisinternal),
                (SELECT string_agg(proname || md5(prosrc), ',' ORDER BY proname)
                 FROM pg_proc WHERE pronamespace = 'public'::regnamespace),
                (SELECT string_agg(conname || pg_get_constraintdef(oid), ',' ORDER BY conname)
                 FROM pg_constraint WHERE connamespace = 'public'::regnamespace)",
    );
    format!("{shape}\n{contents}")
}

fn schema_version(pg: &Postgres, database: &str) -> String {
    pg.psql(
        database,
        "SELECT value FROM meta WHERE key = 'schema_version'",
    )
    .trim()
    .to_string()
}

/// The journal as the old build wrote it: seq, kind, op and hash.
fn journal(pg: &Postgres, database: &str) -> Vec<String> {
    pg.psql(
        database,
        "SELECT seq || ' ' || kind || ' ' || coalesce(op_id, '-') || ' ' || hash
         FROM journal ORDER BY seq",
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// The operations as the old build left them.
fn operations(pg: &Postgres, database: &str) -> String {
    pg.psql(
        database,
        "SELECT op_id, state, version, payload, coalesce(confirmed_effect_id, '-'), receiver,
                receiver_id, dispatch_count
         FROM operations ORDER BY op_id",
    )
}

#[test]
fn a_schema_6_outbox_made_by_ce2d017_is_refused_schema_outdated_naming_db_upgrade() {
    let test = "a_schema_6_outbox_made_by_ce2d017_is_refused_schema_outdated_naming_db_upgrade";
    let Some((pg, url)) = schema6(test, "outdated") else {
        return;
    };
    let database = database_of(&url);
    let before = everything(pg, database);
    for args in [
        &["ops"][..],
        &["show", "pay-1"],
        &["verify"],
        &["db", "status"],
    ] {
        if args == ["db", "status"] {
            // A read of what the outbox is, for its owner to decide: it
            // says schema 6 rather than refusing.
            assert_eq!(cli_ok(&url, args, 0)["schema"], json!(6));
            continue;
        }
        let out = cli(&url, args);
        assert_eq!(out.code, Some(4), "{args:?}: {}", out.stderr);
        let error = &out.json()["error"];
        assert_eq!(error["code"], json!("schema_outdated"), "{args:?}: {error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains("recon db upgrade"), "{message}");
        assert!(message.contains("schema version 6"), "{message}");
    }
    assert_eq!(everything(pg, database), before);
}

#[test]
fn db_upgrade_brings_ce2d017s_outbox_to_7_journals_upgraded_and_verify_passes() {
    let test = "db_upgrade_brings_ce2d017s_outbox_to_7_journals_upgraded_and_verify_passes";
    let Some((pg, url)) = schema6(test, "upgrade") else {
        return;
    };
    let database = database_of(&url);
    let (old_journal, old_ops) = (journal(pg, database), operations(pg, database));
    assert_eq!(old_journal.len(), OLD_ENTRIES, "{old_journal:?}");
    let done = cli_ok(&url, &["db", "upgrade"], 0);
    assert_eq!(
        (&done["from"], &done["to"], &done["upgraded"], &done["seq"]),
        (&json!(6), &json!(7), &json!(true), &json!(UPGRADE_SEQ)),
        "{done}"
    );
    assert_eq!(schema_version(pg, database), "7");
    // The old entries and rows, untouched; the upgrade's entry after them.
    let new_journal = journal(pg, database);
    assert_eq!(new_journal[..OLD_ENTRIES], old_journal[..]);
    assert_eq!(new_journal.len(), SETTINGS_SEQ);
    assert!(
        new_journal[OLD_ENTRIES].starts_with(&format!("{UPGRADE_SEQ} upgraded - ")),
        "{new_journal:?}"
    );
    assert!(
        new_journal[UPGRADE_SEQ].starts_with(&format!("{SETTINGS_SEQ} settings - ")),
        "{new_journal:?}"
    );
    let settings: Value = serde_json::from_str(&pg.psql(
        database,
        &format!("SELECT entry FROM journal WHERE seq = {SETTINGS_SEQ}"),
    ))
    .expect("the entry is JSON");
    assert_eq!(
        (
            &settings["roles_prefix"],
            &settings["owner"],
            &settings["four_eyes"]
        ),
        (&json!("recon"), &json!("postgres"), &json!(false)),
        "{settings}"
    );
    let entry: Value = serde_json::from_str(&pg.psql(
        database,
        &format!("SELECT entry FROM journal WHERE seq = {UPGRADE_SEQ}"),
    ))
    .expect("the entry is JSON");
    assert_eq!(
        (&entry["from"], &entry["to"], &entry["role"]),
        (&json!(6), &json!(7), &json!("postgres")),
        "{entry}"
    );
    assert_eq!(operations(pg, database), old_ops);
    // verify: the chain, every entry replayed, and the schema compared
    // with a new outbox's.
    let verified = cli_ok(&url, &["verify"], 0);
    assert_eq!(verified["intact"], json!(true), "{verified}");
    assert_eq!(
        verified["journal_entries"],
        json!(SETTINGS_SEQ),
        "{verified}"
    );
    the_reads_say_what_the_old_build_recorded(&url);
    // And the next act follows the upgrade's entry on the chain.
    cli_ok(
        &url,
        &[
            "note",
            "pay-3",
            "--by",
            "ann",
            "--text",
            "after the upgrade",
        ],
        0,
    );
    assert_eq!(
        cli_ok(&url, &["verify"], 0)["journal_entries"],
        json!(SETTINGS_SEQ + 1)
    );
}

#[test]
fn an_upgraded_schema_6_outboxs_old_decision_on_a_closed_snapshot_names_no_close_and_verifies() {
    // SPEC 12's recorded closes are schema 7's: pay-2's `not_applied`
    // rests on a closing read ce2d017 recorded without `close_seq`, and its
    // `closed` entry without the snapshot. Both were journaled before the
    // `upgraded` entry, so `verify` holds neither to that rule.
    let test = "an_upgraded_schema_6_outboxs_old_decision_on_a_closed_snapshot_names_no_close_and_verifies";
    let Some((_pg, url)) = schema6(test, "oldclose") else {
        return;
    };
    cli_ok(&url, &["db", "upgrade"], 0);
    let shown = cli_ok(&url, &["show", "pay-2"], 0);
    let evidence = &shown["evidence"][0];
    assert_eq!(
        (&evidence["decision"], &evidence["snapshot"]["closed"]),
        (&json!("not_applied"), &json!(true)),
        "{shown:#}"
    );
    assert_eq!(evidence.get("close_seq"), None, "{shown:#}");
    let verified = cli_ok(&url, &["verify"], 0);
    assert_eq!(verified["intact"], json!(true), "{verified}");
    assert_eq!(verified["projection_mismatches"], json!([]), "{verified}");
}

/// `ops` and `show` on the upgraded outbox, saying what ce2d017 recorded.
fn the_reads_say_what_the_old_build_recorded(url: &str) {
    let ops = cli_ok(url, &["ops", "--state", "all"], 0);
    let states: Vec<(String, String)> = ops
        .as_array()
        .expect("a list")
        .iter()
        .map(|op| {
            (
                op["op_id"].as_str().unwrap().into(),
                op["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected = [
        ("pay-1", "confirmed"),
        ("pay-1-refund", "confirmed"),
        ("pay-2", "not_applied"),
        ("pay-3", "unknown"),
        ("pay-4", "confirmed"),
    ]
    .map(|(op, state)| (op.to_string(), state.to_string()));
    assert_eq!(states, expected);
    let shown = cli_ok(url, &["show", "pay-2"], 0);
    assert_eq!(
        shown["evidence"][0]["decision"],
        json!("not_applied"),
        "{shown}"
    );
    let noted = cli_ok(url, &["show", "pay-3"], 0);
    assert!(
        noted.to_string().contains("waiting for the bank"),
        "{noted}"
    );
}

#[test]
fn the_old_recon_roles_keep_working_after_the_upgrade_and_db_status_says_prefix_recon() {
    let test = "the_old_recon_roles_keep_working_after_the_upgrade_and_db_status_says_prefix_recon";
    let Some((pg, url)) = schema6(test, "oldroles") else {
        return;
    };
    // Granted on schema 6, as the old release's operator did.
    let reviewer = login(pg, &url, "upgrade_rev", &["recon_reviewer"]);
    cli_ok(&url, &["db", "upgrade"], 0);
    cli_ok(
        &reviewer,
        &[
            "escalate",
            "pay-3",
            "--by",
            "rita",
            "--reason",
            "the bank is slow",
        ],
        0,
    );
    cli_ok(
        &reviewer,
        &["note", "pay-3", "--by", "rita", "--text", "asked the bank"],
        0,
    );
    let roles = pg.psql(
        database_of(&url),
        &format!(
            "SELECT string_agg(kind || ':' || (entry::jsonb ->> 'role'), ',' ORDER BY seq)
             FROM journal WHERE seq > {SETTINGS_SEQ}"
        ),
    );
    assert_eq!(roles.trim(), "escalated:upgrade_rev,noted:upgrade_rev");
    // A reader of the old release may read, not write.
    let reader = login(pg, &url, "upgrade_read", &["recon_reader"]);
    cli_ok(&reader, &["ops"], 0);
    let refused = cli(&reader, &["note", "pay-3", "--by", "rex", "--text", "no"]);
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    let status = cli_ok(&url, &["db", "status"], 0);
    assert_eq!(status["schema"], json!(7), "{status}");
    assert_eq!(status["roles_prefix"], json!("recon"), "{status}");
    let logins = status["logins"].as_array().expect("logins");
    assert!(
        logins.contains(&json!({"login": "upgrade_rev", "roles": ["reviewer"]})),
        "{status}"
    );
    assert_eq!(cli_ok(&url, &["verify"], 0)["intact"], json!(true));
}

#[test]
fn db_upgrade_by_a_login_that_is_not_the_owner_is_permission_denied_exit_3_and_changes_nothing() {
    let test = "db_upgrade_by_a_login_that_is_not_the_owner_is_permission_denied_exit_3_and_changes_nothing";
    let Some((pg, url)) = schema6(test, "notowner") else {
        return;
    };
    let database = database_of(&url);
    let before = everything(pg, database);
    let reviewer = login(
        pg,
        &url,
        "upgrade_notowner",
        &["recon_reviewer", "recon_closer"],
    );
    let nobody = login(pg, &url, "upgrade_nobody", &[]);
    for (who, name) in [(&reviewer, "upgrade_notowner"), (&nobody, "upgrade_nobody")] {
        let out = cli(who, &["db", "upgrade"]);
        assert_eq!(out.code, Some(3), "{name}: {}", out.stderr);
        let error = &out.json()["error"];
        assert_eq!(error["code"], json!("permission_denied"), "{name}: {error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(name) && message.contains("owner"),
            "{message}"
        );
    }
    assert_eq!(everything(pg, database), before);
    assert_eq!(schema_version(pg, database), "6");
}

#[test]
fn an_upgrade_killed_before_its_commit_leaves_schema_6_intact_and_the_next_one_completes() {
    let test =
        "an_upgrade_killed_before_its_commit_leaves_schema_6_intact_and_the_next_one_completes";
    let Some((pg, url)) = schema6(test, "killed") else {
        return;
    };
    let database = database_of(&url);
    let before = everything(pg, database);
    let dir = tempfile::tempdir().expect("a directory for the fifo");
    // Every step done, the entry journaled, COMMIT not sent: killed there.
    let mut held = hold(
        recon(&url, &["db", "upgrade"], &[]),
        "store.before_commit",
        &dir.path().join("upgrade"),
    );
    held.child.kill().expect("SIGKILL the upgrade");
    let out = finish(held.child);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9)
    );
    // The killed session's transaction ends when the server reads the
    // closed connection; its advisory lock is free only then.
    pg.psql(
        database,
        &format!("SELECT pg_advisory_xact_lock({INIT_LOCK})"),
    );
    assert_eq!(everything(pg, database), before);
    assert_eq!(schema_version(pg, database), "6");
    assert_eq!(cli(&url, &["ops"]).code, Some(4));
    let done = cli_ok(&url, &["db", "upgrade"], 0);
    assert_eq!(
        (&done["upgraded"], &done["seq"]),
        (&json!(true), &json!(UPGRADE_SEQ))
    );
    assert_eq!(cli_ok(&url, &["verify"], 0)["intact"], json!(true));
}

#[test]
fn db_upgrade_of_an_outbox_already_at_this_version_says_so_and_writes_nothing() {
    let test = "db_upgrade_of_an_outbox_already_at_this_version_says_so_and_writes_nothing";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "current");
    let database = database_of(&url);
    let before = everything(pg, database);
    let done = cli_ok(&url, &["db", "upgrade"], 0);
    assert_eq!(
        (&done["from"], &done["to"], &done["upgraded"], &done["seq"]),
        (&json!(7), &json!(7), &json!(false), &Value::Null),
        "{done}"
    );
    let text = run_with_env(&["db", "upgrade", "--database", &url], None, &[]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(text.stdout.contains("already"), "{}", text.stdout);
    assert_eq!(everything(pg, database), before);
}

#[test]
fn db_upgrade_refuses_a_newer_outbox_an_empty_database_and_one_not_recons_changing_nothing() {
    let test =
        "db_upgrade_refuses_a_newer_outbox_an_empty_database_and_one_not_recons_changing_nothing";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let newer = initialized(pg, "upnewer");
    pg.psql(
        database_of(&newer),
        "UPDATE meta SET value = '8' WHERE key = 'schema_version'",
    );
    let empty = pg.new_database("upempty");
    let foreign = pg.new_database("upforeign");
    pg.psql(
        database_of(&foreign),
        "CREATE TABLE meta (key text PRIMARY KEY, value text); \
         INSERT INTO meta VALUES ('schema_version', '6')",
    );
    for (url, says) in [
        (&newer, "schema version 8; this recon reads version 7"),
        (&empty, "recon db init"),
        (&foreign, "not a recon outbox"),
    ] {
        let database = database_of(url);
        let before = shape_and_rows(pg, database);
        let out = cli(url, &["db", "upgrade"]);
        assert_eq!(out.code, Some(4), "{database}: {}", out.stderr);
        let message = out.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains(says), "{database}: {message}");
        assert_eq!(shape_and_rows(pg, database), before, "{database}");
    }
}
