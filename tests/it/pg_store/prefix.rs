//! Roles belong to one outbox (SPEC 12): `db init --roles PREFIX` creates
//! that outbox's own roles and records the prefix; only they let a login
//! act on it, and only when its owner granted them; a prefix whose roles
//! already serve another database is refused `roles_in_use`; an outbox
//! keeps its prefix (another `db init --roles` and an edit of `meta` are
//! refused).

use super::outbox::{open_with, refusal, unknown_op};
use super::roles::login;
use super::{database_of, fingerprint, initialized};
use crate::real_receivers::servers::{self, Postgres};
use crate::support::{run_with_env, Run};
use recon::domain::team::TeamRole;
use recon::{OpenOptions, Refusal};
use serde_json::{json, Value};

/// `recon ARGS --database URL --json`.
#[track_caller]
fn cli(url: &str, args: &[&str]) -> Run {
    let mut all = args.to_vec();
    all.extend(["--database", url, "--json"]);
    run_with_env(&all, None, &[])
}

/// A fresh database with its outbox made by `db init --roles PREFIX` (its
/// own prefix); the URL, the prefix and what `db init` printed.
fn own_outbox(pg: &Postgres, name: &str) -> (String, String, Value) {
    let url = pg.new_database(name);
    let prefix = servers::roles_prefix_for(&url);
    let out = cli(&url, &["db", "init", "--roles", &prefix]);
    assert_eq!(out.code, Some(0), "db init: {}", out.stderr);
    (url, prefix, out.json())
}

#[test]
fn db_init_roles_prefix_creates_the_outboxs_own_five_roles_and_records_the_prefix() {
    let test = "db_init_roles_prefix_creates_the_outboxs_own_five_roles_and_records_the_prefix";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let (url, prefix, init) = own_outbox(pg, "prefix_made");
    assert_eq!(init["roles_prefix"], json!(prefix), "{init}");
    let names: Vec<String> = ["reader", "sender", "reviewer", "closer", "approver"]
        .iter()
        .map(|short| format!("{prefix}_{short}"))
        .collect();
    assert_eq!(init["roles"], json!(names), "{init}");
    let database = database_of(&url);
    let made = pg.psql(
        database,
        &format!(
            "SELECT string_agg(rolname || ':' || rolcanlogin, ',' ORDER BY rolname)
               FROM pg_roles WHERE rolname LIKE '{prefix}\\_%'"
        ),
    );
    let mut expected: Vec<String> = names.iter().map(|n| format!("{n}:false")).collect();
    expected.sort();
    assert_eq!(made.trim(), expected.join(","));
    assert_eq!(
        pg.psql(
            database,
            "SELECT value FROM meta WHERE key = 'roles_prefix'"
        )
        .trim(),
        prefix
    );
    let status = cli(&url, &["db", "status"]);
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    assert_eq!(status.json()["roles_prefix"], json!(prefix));
    // The text names the roles as they are.
    let again = run_with_env(&["db", "init", "--database", &url], None, &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert!(
        again.stdout.contains(&format!("{prefix}_reviewer")),
        "{}",
        again.stdout
    );
}

#[test]
fn only_the_outboxs_own_roles_granted_by_its_owner_let_a_login_act_and_a_refusal_names_them() {
    let test =
        "only_the_outboxs_own_roles_granted_by_its_owner_let_a_login_act_and_a_refusal_names_them";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    // Another outbox's roles exist (the default prefix's, of the
    // cluster's template), granted by the same owner.
    let _other = initialized(pg, "prefix_neighbour");
    let (url, prefix, _) = own_outbox(pg, "prefix_acts");
    let dir = tempfile::tempdir().expect("temp dir");
    unknown_op(
        &mut open_with(&url, OpenOptions::default()),
        dir.path(),
        "op-1",
    );
    let database = database_of(&url);
    let stranger = format!("{database}_rv");
    pg.psql(database, &format!("CREATE ROLE {stranger} LOGIN"));
    pg.psql(
        database,
        &format!("GRANT recon_reader, recon_reviewer TO {stranger}"),
    );
    let as_stranger = url.replacen("postgres@", &format!("{stranger}@"), 1);
    // Not even a read: the outbox's reader is its own.
    let read = cli(&as_stranger, &["ops"]);
    assert_eq!(read.code, Some(3), "{}{}", read.stdout, read.stderr);
    let granted = cli(&url, &["db", "grant", &stranger, "reader"]);
    assert_eq!(granted.code, Some(0), "{}", granted.stderr);
    let mut ws = open_with(&as_stranger, OpenOptions::default());
    // The database's own act check, as the console asks it: the default
    // prefix's reviewer, granted by the same owner, is not this outbox's.
    assert_eq!(ws.roles_held().unwrap(), Some(vec![TeamRole::Reader]));
    match refusal(
        ws.note("op-1", "rv", "the default prefix's reviewer")
            .map(drop),
    ) {
        Refusal::PermissionDenied { role, .. } => {
            assert_eq!(role, format!("{prefix}_reviewer"))
        }
        other => panic!("expected permission_denied, got {other:?}"),
    }
    let noted = cli(&as_stranger, &["note", "op-1", "--by", "rv", "--text", "x"]);
    assert_eq!(noted.code, Some(3), "{}", noted.stderr);
    assert!(
        noted.stderr.contains(&format!("{prefix}_reviewer")),
        "{}",
        noted.stderr
    );
    let granted = cli(&url, &["db", "grant", &stranger, "reviewer"]);
    assert_eq!(granted.code, Some(0), "{}", granted.stderr);
    ws.note("op-1", "rv", "the outbox's own reviewer")
        .expect("the outbox's own role, granted by its owner, counts");
    assert_eq!(
        ws.roles_held().unwrap(),
        Some(vec![TeamRole::Reader, TeamRole::Reviewer])
    );
    // `db status` lists the outbox's own roles only, by short name.
    let closer = format!("{database}_cl");
    login(pg, &url, &closer, &["recon_closer"]);
    let status = cli(&url, &["db", "status"]).json();
    assert_eq!(status["foreign_grants"], json!([]), "{status}");
    assert_eq!(
        status["logins"],
        json!([
            {"login": closer, "roles": ["closer"]},
            {"login": stranger, "roles": ["reader", "reviewer"]},
        ]),
        "{status}"
    );
}

#[test]
fn db_init_with_a_prefix_whose_roles_serve_another_database_is_refused_roles_in_use_creating_nothing(
) {
    let test = "db_init_with_a_prefix_whose_roles_serve_another_database_is_refused_roles_in_use_creating_nothing";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let (first, prefix, _) = own_outbox(pg, "prefix_taken");
    let second = pg.new_database("prefix_taker");
    let relations = "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace";
    let out = cli(&second, &["db", "init", "--roles", &prefix]);
    assert_eq!(out.code, Some(3), "{}{}", out.stdout, out.stderr);
    let error = out.json();
    assert_eq!(error["error"]["code"], json!("roles_in_use"), "{error}");
    assert!(
        out.stderr.contains(database_of(&first)) && out.stderr.contains("--roles"),
        "{}",
        out.stderr
    );
    assert_eq!(
        pg.psql(database_of(&second), relations).trim(),
        "0",
        "nothing created"
    );
    // The default prefix's roles serve the cluster's template outbox.
    let _template = initialized(pg, "prefix_default");
    let third = pg.new_database("prefix_default_taker");
    let out = cli(&third, &["db", "init"]);
    assert_eq!(out.code, Some(3), "{}{}", out.stdout, out.stderr);
    assert_eq!(out.json()["error"]["code"], json!("roles_in_use"));
    // A prefix of its own is free.
    let own = servers::roles_prefix_for(&third);
    assert_eq!(cli(&third, &["db", "init", "--roles", &own]).code, Some(0));
}

#[test]
fn an_outbox_keeps_its_roles_prefix_against_db_init_and_an_edit_of_meta() {
    let test = "an_outbox_keeps_its_roles_prefix_against_db_init_and_an_edit_of_meta";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let (url, prefix, _) = own_outbox(pg, "prefix_kept");
    let database = database_of(&url);
    let made = fingerprint(pg, database);
    let out = cli(&url, &["db", "init", "--roles", "someone_else"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert_eq!(out.json()["error"]["code"], json!("rule_violation"));
    assert!(out.stderr.contains(&prefix), "{}", out.stderr);
    let same = cli(&url, &["db", "init", "--roles", &prefix]);
    assert_eq!(same.code, Some(0), "{}", same.stderr);
    assert_eq!(same.json()["created"], json!(false));
    for sql in [
        "UPDATE meta SET value = 'recon' WHERE key = 'roles_prefix'",
        "DELETE FROM meta WHERE key = 'roles_prefix'",
    ] {
        let failed = pg.try_psql(database, sql).expect_err(sql);
        assert!(failed.contains("keep the prefix"), "{sql}: {failed}");
    }
    assert_eq!(fingerprint(pg, database), made, "nothing changed");
}

#[test]
fn a_roles_prefix_that_is_no_plain_lower_case_identifier_is_a_usage_error() {
    for bad in ["Team", "team-a", "2team", "", &"a".repeat(41)] {
        let out = run_with_env(
            &[
                "db",
                "init",
                "--roles",
                bad,
                "--database",
                "postgres://x@127.0.0.1:1/y",
                "--json",
            ],
            None,
            &[],
        );
        assert_eq!(out.code, Some(2), "{bad}: {}", out.stderr);
        assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains("--roles"), "{}", out.stderr);
    }
}
