//! The PostgreSQL outbox's foundation against a real server (SPEC 10):
//! `recon db init` and what it creates (the journal's chain trigger and
//! the append-only triggers, tried through `psql`), the checks every
//! connection makes, and URLs printed with their passwords redacted.
//!
//! The cluster is the real-receiver tests' (`real_receivers::servers`),
//! one per test process; a database with the schema already made is a
//! copy of a template database initialized once. Under `CI` a server that
//! cannot start fails each test; elsewhere the test says so in one line.

mod commands;
mod duplicates;
mod faults;
mod identity;
mod lost_commit;
mod outbox;
mod page_plans;
pub(crate) mod plan;
mod prefix;
mod proxy;
pub(crate) mod roles;
mod rules;
mod tls;
mod upgrade;

use crate::real_receivers::servers::{self, Postgres};
use crate::real_receivers::{finish, poll_until};
use crate::support::{recon_bin, run_with_env, Run};
use recon::audit::{Checkpoint, EntryKind, Sealed};
use serde_json::{json, Map, Value};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The key of the advisory lock `db init` serializes on: the outbox's
/// application id ("rcns"), as SQLite's `application_id` holds it.
const INIT_LOCK: i64 = 0x7263_6e73;

fn database_of(url: &str) -> &str {
    url.rsplit('/').next().expect("a database name")
}

#[track_caller]
fn db_init(url: &str, json: bool, env: &[(&str, &str)]) -> Run {
    let roles = servers::roles_args_for(url);
    let mut args = vec!["db", "init", "--database", url];
    args.extend(roles.iter().map(String::as_str));
    if json {
        args.push("--json");
    }
    run_with_env(&args, None, env)
}

#[track_caller]
fn init_ok(url: &str) -> Value {
    let out = db_init(url, true, &[]);
    assert_eq!(out.code, Some(0), "db init: {}", out.stderr);
    out.json()
}

/// A database initialized once per process, copied by [`initialized`].
fn template(pg: &Postgres) -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        // The one outbox of the cluster with the default prefix's roles;
        // its copies share them (a copy is no outbox of its own).
        let url = pg.new_database("outbox_template");
        let out = run_with_env(&["db", "init", "--database", &url], None, &[]);
        assert_eq!(out.code, Some(0), "db init: {}", out.stderr);
        database_of(&url).to_string()
    })
}

/// A fresh database holding the outbox's schema; its URL.
pub(crate) fn initialized(pg: &Postgres, prefix: &str) -> String {
    pg.new_database_from(prefix, template(pg))
}

/// What `db init` made, down to the row versions (`xmin`) of `meta` and
/// the head: equal before and after a run that changed nothing.
fn fingerprint(pg: &Postgres, database: &str) -> String {
    pg.psql(
        database,
        "SELECT (SELECT string_agg(relname || ':' || relkind::text, ',' ORDER BY relname)
                 FROM pg_class WHERE relnamespace = 'public'::regnamespace),
                (SELECT string_agg(tgname::text, ',' ORDER BY tgname)
                 FROM pg_trigger WHERE NOT tgisinternal),
                (SELECT string_agg(key || '=' || value || '@' || xmin::text, ',' ORDER BY key)
                 FROM meta),
                (SELECT seq || ':' || hash || '@' || xmin::text FROM journal_head)",
    )
}

#[test]
fn db_init_twice_is_idempotent_and_reports_the_version() {
    let test = "db_init_twice_is_idempotent_and_reports_the_version";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = pg.new_database("init_twice");
    let first = init_ok(&url);
    assert_eq!(first["created"], json!(true), "{first}");
    assert_eq!(first["schema_version"], json!(7), "{first}");
    assert_eq!(first["database"], json!(url), "{first}");
    let id = first["workspace_id"].as_str().expect("a workspace id");
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    let made = fingerprint(pg, database_of(&url));
    assert!(made.contains("journal_follows_head"), "{made}");

    let second = init_ok(&url);
    assert_eq!(second["created"], json!(false), "{second}");
    assert_eq!(second["schema_version"], json!(7));
    assert_eq!(second["workspace_id"], json!(id));
    // The same in text, the database named by RECON_DATABASE_URL.
    let out = run_with_env(&["db", "init"], None, &[("RECON_DATABASE_URL", &url)]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("there already, nothing changed")
            && out.stdout.contains("schema version 7")
            && out.stdout.contains(id),
        "{}",
        out.stdout
    );
    assert_eq!(fingerprint(pg, database_of(&url)), made);
}

/// How many `recon` sessions wait on a lock in `database`.
fn inits_waiting(pg: &Postgres, database: &str) -> usize {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
               AND application_name = 'recon' AND wait_event_type = 'Lock'";
    pg.psql(database, sql).trim().parse().expect("a count")
}

#[test]
fn two_db_init_at_once_both_succeed_with_one_schema_and_a_third_is_a_no_op() {
    let test = "two_db_init_at_once_both_succeed_with_one_schema_and_a_third_is_a_no_op";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = pg.new_database("init_race");
    let database = database_of(&url);
    // Hold the lock `db init` takes, start both, and let them go only
    // once the server shows both waiting for it.
    let mut blocker = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let mut hold = blocker.transaction().expect("begin");
    hold.execute("SELECT pg_advisory_xact_lock($1)", &[&INIT_LOCK])
        .expect("take the lock");
    let roles = servers::roles_args_for(&url);
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(recon_bin())
                .args(["db", "init", "--database", &url, "--json"])
                .args(&roles)
                .env("RECON_BUSY_TIMEOUT_MS", "60000")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start db init")
        })
        .collect();
    poll_until("both db init wait", Duration::from_secs(60), || {
        inits_waiting(pg, database) == 2
    });
    hold.commit().expect("release the lock");
    let answers: Vec<Value> = children
        .into_iter()
        .map(|child| {
            let out = finish(child);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            serde_json::from_slice(&out.stdout).expect("JSON")
        })
        .collect();
    let created = answers
        .iter()
        .filter(|a| a["created"] == json!(true))
        .count();
    assert_eq!(created, 1, "{answers:?}");
    assert_eq!(answers[0]["workspace_id"], answers[1]["workspace_id"]);
    let counts = pg.psql(
        database,
        "SELECT (SELECT count(*) FROM meta), (SELECT count(*) FROM journal_head),
                (SELECT count(*) FROM pg_trigger WHERE tgname = 'journal_follows_head')",
    );
    // meta: application id, schema version, workspace id, roles' prefix,
    // creation complete, owner.
    assert_eq!(counts.trim(), "6|1|1");
    // A third run after the race is a no-op: nothing created, no row
    // version moved.
    let made = fingerprint(pg, database);
    let third = init_ok(&url);
    assert_eq!(third["created"], json!(false), "{third}");
    assert_eq!(third["workspace_id"], answers[0]["workspace_id"]);
    assert_eq!(fingerprint(pg, database), made);
}

/// An entry of `kind` sealed after `head`.
fn sealed_after(head: &Checkpoint, at: &str) -> Sealed {
    let mut fields = Map::new();
    fields.insert("at".into(), json!(at));
    head.seal(EntryKind::ReceiverRemoved, None, fields)
}

/// Inserts `entry` through psql; a refusal's text carries its SQLSTATE.
fn insert(pg: &Postgres, database: &str, entry: &Sealed) -> Result<String, String> {
    insert_all(pg, database, std::slice::from_ref(entry))
}

/// Inserts `entries` through psql in one statement.
fn insert_all(pg: &Postgres, database: &str, entries: &[Sealed]) -> Result<String, String> {
    let rows: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "({}, 'receiver_removed', NULL, $e${}$e$, '{}', '{}')",
                e.seq, e.entry, e.prev_hash, e.hash
            )
        })
        .collect();
    pg.try_psql(
        database,
        &format!(
            "DO $do$ BEGIN
                INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
                VALUES {};
             EXCEPTION WHEN OTHERS THEN
                RAISE EXCEPTION 'sqlstate %: %', SQLSTATE, SQLERRM;
             END $do$",
            rows.join(", ")
        ),
    )
}

#[track_caller]
fn assert_refused(result: Result<String, String>, sqlstate: &str, why: &str) {
    let e = result.expect_err("refused");
    assert!(
        e.contains(&format!("sqlstate {sqlstate}")) && e.contains(why),
        "{e}"
    );
}

fn head(pg: &Postgres, database: &str) -> String {
    pg.psql(database, "SELECT seq || ':' || hash FROM journal_head")
        .trim()
        .to_string()
}

/// The journal's head as a checkpoint: a new outbox's journal begins
/// with its `settings` entry.
fn head_checkpoint(pg: &Postgres, database: &str) -> Checkpoint {
    let head = head(pg, database);
    let (length, hash) = head.split_once(':').expect("seq:hash");
    Checkpoint {
        length: length.parse().expect("a seq"),
        head_hash: hash.to_string(),
    }
}

#[test]
fn the_journal_trigger_refuses_through_psql_an_entry_that_does_not_follow_the_head() {
    let test = "the_journal_trigger_refuses_through_psql_an_entry_that_does_not_follow_the_head";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "chain");
    let database = database_of(&url);
    let start = head_checkpoint(pg, database);
    let at = "2026-12-03T20:00:00.000Z";
    let skipped = Checkpoint {
        length: start.length + 1,
        head_hash: start.head_hash.clone(),
    };
    assert_refused(
        insert(pg, database, &sealed_after(&skipped, at)),
        "RCJ01",
        "does not follow the head",
    );
    let forked = Checkpoint {
        length: start.length,
        head_hash: "f".repeat(64),
    };
    assert_refused(
        insert(pg, database, &sealed_after(&forked, at)),
        "RCJ01",
        "does not chain to the head",
    );
    let mut forged = sealed_after(&start, at);
    forged.hash = sealed_after(&start, "2026-12-03T20:00:00.001Z").hash;
    assert_refused(
        insert(pg, database, &forged),
        "RCJ01",
        "its hash is not SHA-256(prev_hash || entry)",
    );
    assert_eq!(head(pg, database), start.to_string());

    // The entries recon seals are accepted, and each moves the head.
    let mut chain = start;
    for _ in 0..2 {
        let entry = sealed_after(&chain, at);
        insert(pg, database, &entry).expect("a sealed entry is accepted");
        chain.after(&entry);
        assert_eq!(head(pg, database), chain.to_string());
    }
    // Several in one statement: each row's check sees the head the
    // previous row moved.
    let mut batch = Vec::new();
    for _ in 0..3 {
        let entry = sealed_after(&chain, at);
        chain.after(&entry);
        batch.push(entry);
    }
    insert_all(pg, database, &batch).expect("a sealed batch is accepted");
    assert_eq!(head(pg, database), chain.to_string());
}

#[test]
fn update_and_delete_on_the_journal_are_refused_through_psql() {
    let test = "update_and_delete_on_the_journal_are_refused_through_psql";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "append_only");
    let database = database_of(&url);
    let start = head_checkpoint(pg, database);
    let entry = sealed_after(&start, "2026-12-03T20:00:00.000Z");
    insert(pg, database, &entry).expect("accepted");
    let before = pg.psql(database, "SELECT seq, entry, hash FROM journal");
    let refused = |sql: &str| {
        pg.try_psql(
            database,
            &format!(
                "DO $do$ BEGIN {sql}; EXCEPTION WHEN OTHERS THEN \
                 RAISE EXCEPTION 'sqlstate %: %', SQLSTATE, SQLERRM; END $do$"
            ),
        )
    };
    for sql in ["UPDATE journal SET entry = '{}'", "DELETE FROM journal"] {
        assert_refused(refused(sql), "RCA01", "the journal is append-only");
    }
    // TRUNCATE skips row triggers; a statement trigger refuses it (with
    // CASCADE, whichever of the truncated tables' triggers runs first).
    assert_refused(refused("TRUNCATE journal CASCADE"), "RCA01", "append-only");
    // Nor can the head be moved or removed by hand.
    assert_refused(
        refused("UPDATE journal_head SET seq = seq + 1"),
        "RCJ01",
        "moves only by appending",
    );
    assert_refused(
        refused("DELETE FROM journal_head"),
        "RCA01",
        "the journal head is kept",
    );
    assert_eq!(
        pg.psql(database, "SELECT seq, entry, hash FROM journal"),
        before
    );
    assert_eq!(
        head(pg, database),
        format!("{}:{}", start.length + 1, entry.hash)
    );
}

#[test]
fn a_urls_password_is_never_printed_when_the_connection_is_refused() {
    let port = servers::free_port().expect("a free port");
    let secret = "s3cret-pw";
    let url = format!("postgres://ann:{secret}@127.0.0.1:{port}/payments");
    let shown = format!("postgres://ann:***@127.0.0.1:{port}/payments");
    let runs = [
        db_init(&url, false, &[]),
        db_init(&url, true, &[]),
        run_with_env(
            &["db", "init", "--json"],
            None,
            &[("RECON_DATABASE_URL", &url)],
        ),
    ];
    for out in runs {
        assert_eq!(out.code, Some(4), "{}", out.stderr);
        assert!(out.stderr.contains(&shown), "{}", out.stderr);
        assert!(out.stderr.contains("connecting"), "{}", out.stderr);
        assert!(!out.stderr.contains(secret) && !out.stdout.contains(secret));
    }
    // A URL that does not parse is a usage error, named redacted too.
    let bad = format!("postgres://ann:{secret}@127.0.0.1:port/payments");
    let out = db_init(&bad, true, &[]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(out.json()["error"]["kind"], json!("usage"));
    assert!(out
        .stderr
        .contains("postgres://ann:***@127.0.0.1:port/payments"));
    assert!(!out.stderr.contains(secret) && !out.stdout.contains(secret));
}

#[test]
fn a_server_with_synchronous_commit_off_is_refused() {
    let test = "a_server_with_synchronous_commit_off_is_refused";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = pg.new_database("async_commit");
    let database = database_of(&url);
    pg.psql(
        "postgres",
        &format!("ALTER DATABASE {database} SET synchronous_commit = off"),
    );
    let out = db_init(&url, true, &[]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    let message = out.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("synchronous_commit is off"), "{message}");
    assert_eq!(
        pg.psql(database, "SELECT to_regclass('meta') IS NULL")
            .trim(),
        "t"
    );
}

#[test]
fn a_database_with_a_newer_schema_is_refused() {
    let test = "a_database_with_a_newer_schema_is_refused";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "newer");
    let database = database_of(&url);
    pg.psql(
        database,
        "UPDATE meta SET value = '8' WHERE key = 'schema_version'",
    );
    let made = fingerprint(pg, database);
    let out = db_init(&url, true, &[]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    let error = &out.json()["error"];
    assert_eq!(error["kind"], json!("storage"));
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("schema version 8; this recon reads version 7"),
        "{message}"
    );
    assert_eq!(fingerprint(pg, database), made);
}

#[test]
fn tables_of_recons_names_that_are_not_recons_are_refused_not_taken_over() {
    let test = "tables_of_recons_names_that_are_not_recons_are_refused_not_taken_over";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = pg.new_database("foreign");
    let database = database_of(&url);
    pg.psql(database, "CREATE TABLE operations (x int)");
    let out = db_init(&url, false, &[]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("it holds operations") && out.stderr.contains("refusing to take"),
        "{}",
        out.stderr
    );
    let left = pg.psql(
        database,
        "SELECT to_regclass('meta') IS NULL, (SELECT string_agg(attname, ',') FROM pg_attribute
         WHERE attrelid = 'operations'::regclass AND attnum > 0)",
    );
    assert_eq!(left.trim(), "t|x");
    // A `meta` that is not recon's is not taken for one either.
    let url = pg.new_database("foreign_meta");
    pg.psql(
        database_of(&url),
        "CREATE TABLE meta (key text, value text)",
    );
    let out = db_init(&url, false, &[]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("it holds meta"), "{}", out.stderr);
}

#[test]
fn db_init_takes_a_database_not_a_workspace_and_its_help_lists_its_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let out = run_with_env(
        &[
            "db",
            "init",
            "--workspace",
            ws,
            "--database",
            "postgres://x/y",
        ],
        None,
        &[],
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("not --workspace"), "{}", out.stderr);
    let out = run_with_env(&["db", "init"], None, &[("RECON_DATABASE_URL", "")]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("RECON_DATABASE_URL"), "{}", out.stderr);
    let help = run_with_env(&["db", "init", "--help"], None, &[]).stdout;
    let codes: Vec<&str> = help
        .split("Exit codes:")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next())
        .filter(|code| code.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(codes, ["0", "2", "4"], "{help}");
    for needle in [
        "--database <URL>",
        "RECON_DATABASE_URL",
        "PGPASSWORD",
        "synchronous_commit",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

/// One store's schema in comparable terms: each table's columns in order
/// and its CHECK count, the named indexes with their table, the triggers.
#[derive(Debug, Default, PartialEq)]
struct Shape {
    columns: std::collections::BTreeMap<String, Vec<String>>,
    checks: std::collections::BTreeMap<String, usize>,
    indexes: std::collections::BTreeSet<String>,
    triggers: std::collections::BTreeSet<String>,
}

/// The SQLite outbox's shape, from a workspace this build created.
fn sqlite_shape() -> Shape {
    let lab = crate::support::Lab::new();
    let conn = rusqlite::Connection::open(lab.path().join("sender.sqlite")).unwrap();
    let mut shape = Shape::default();
    let objects: Vec<(String, String, String, String)> = conn
        .prepare("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (kind, name, table, sql) in objects {
        match kind.as_str() {
            "table" => {
                let columns: Vec<String> = conn
                    .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
                    .unwrap()
                    .query_map([&name], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                shape
                    .checks
                    .insert(name.clone(), sql.matches("CHECK (").count());
                shape.columns.insert(name, columns);
            }
            "index" if !name.starts_with("sqlite_autoindex") => {
                shape.indexes.insert(format!("{table}.{name}"));
            }
            "trigger" => drop(shape.triggers.insert(name)),
            _ => {}
        }
    }
    shape
}

/// The PostgreSQL outbox's shape, read from the catalog.
fn postgres_shape(pg: &Postgres, database: &str) -> Shape {
    let rows = |sql: &str| -> Vec<Vec<String>> {
        pg.psql(database, sql)
            .lines()
            .map(|line| line.split('|').map(str::to_string).collect())
            .collect()
    };
    let mut shape = Shape::default();
    for row in rows(
        "SELECT table_name, column_name FROM information_schema.columns
         WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    ) {
        shape
            .columns
            .entry(row[0].clone())
            .or_default()
            .push(row[1].clone());
    }
    for row in rows(
        "SELECT c.relname, count(k.oid) FROM pg_class c
         LEFT JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype = 'c'
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' GROUP BY c.relname",
    ) {
        shape.checks.insert(row[0].clone(), row[1].parse().unwrap());
    }
    for row in rows(
        "SELECT i.tablename, i.indexname FROM pg_indexes i WHERE i.schemaname = 'public'
         AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conname = i.indexname)",
    ) {
        shape.indexes.insert(format!("{}.{}", row[0], row[1]));
    }
    for row in rows("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal") {
        shape.triggers.insert(row[0].clone());
    }
    shape
}

#[test]
fn the_postgres_schema_mirrors_the_sqlite_outbox_table_by_table() {
    let test = "the_postgres_schema_mirrors_the_sqlite_outbox_table_by_table";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "mirror");
    let database = database_of(&url);
    let sqlite = sqlite_shape();
    assert!(
        sqlite.columns.len() > 15 && sqlite.indexes.len() > 15,
        "{sqlite:?}"
    );
    assert!(sqlite.triggers.contains("notes_append_only_delete"));
    assert!(sqlite.checks["observations"] == 4, "{sqlite:?}");
    let mut postgres = postgres_shape(pg, database);
    // What PostgreSQL has besides: the head, its triggers, the refusals
    // of TRUNCATE (SQLite has no TRUNCATE) and the notification that
    // wakes live consoles on other hosts.
    assert_eq!(
        postgres.columns.remove("journal_head"),
        Some(vec!["id".into(), "seq".into(), "hash".into()])
    );
    postgres.checks.remove("journal_head");
    // And the acts under way, which authorization reads (`roles`).
    assert!(postgres.columns.remove("recon_writers").is_some());
    postgres.checks.remove("recon_writers");
    let extra: Vec<String> = postgres
        .triggers
        .iter()
        .filter(|t| !sqlite.triggers.contains(*t))
        .cloned()
        .collect();
    for trigger in &extra {
        assert!(
            trigger.ends_with("_append_only_truncate")
                || trigger.starts_with("journal_head")
                || trigger == "journal_follows_head"
                || trigger.ends_with("_guard")
                || trigger.contains("_act_")
                || trigger.ends_with("_rules")
                || trigger == "journal_notify",
            "{trigger}"
        );
    }
    postgres.triggers.retain(|t| !extra.contains(t));
    assert_eq!(postgres, sqlite);
    // Every text compares by its bytes.
    let collations = pg.psql(
        database,
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public'
         AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C'",
    );
    assert_eq!(collations.trim(), "0");
}

#[test]
fn a_partial_outbox_is_refused_not_recreated() {
    let test = "a_partial_outbox_is_refused_not_recreated";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "partial");
    let database = database_of(&url);
    pg.psql(database, "DROP TABLE routes");
    let out = db_init(&url, false, &[]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("lacks routes"), "{}", out.stderr);
    assert_eq!(
        pg.psql(database, "SELECT to_regclass('routes') IS NULL")
            .trim(),
        "t"
    );
}

#[test]
fn a_database_not_in_utf8_is_refused() {
    let test = "a_database_not_in_utf8_is_refused";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let name = "latin1_outbox";
    pg.psql(
        "postgres",
        &format!(
            "CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' \
             TEMPLATE template0"
        ),
    );
    let out = db_init(&pg.url(name), true, &[]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("encoding is SQL_ASCII"),
        "{}",
        out.stderr
    );
    assert_eq!(
        pg.psql(name, "SELECT to_regclass('meta') IS NULL").trim(),
        "t"
    );
}

#[test]
fn db_init_waits_for_a_held_lock_only_the_busy_timeout() {
    let test = "db_init_waits_for_a_held_lock_only_the_busy_timeout";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = pg.new_database("lock_timeout");
    let mut blocker = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let mut hold = blocker.transaction().expect("begin");
    hold.execute("SELECT pg_advisory_xact_lock($1)", &[&INIT_LOCK])
        .expect("take the lock");
    let out = db_init(&url, true, &[("RECON_BUSY_TIMEOUT_MS", "50")]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("held a lock past the busy timeout"),
        "{}",
        out.stderr
    );
    hold.rollback().expect("release");
    assert_eq!(init_ok(&url)["created"], json!(true));
}
