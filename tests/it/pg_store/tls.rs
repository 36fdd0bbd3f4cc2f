//! TLS with libpq's `sslmode` (SPEC 10, "For production"), against a real
//! PostgreSQL with `ssl=on` that takes TCP only over TLS (`hostssl`), its
//! certificates made in the test with the openssl CLI: a CA, the server's
//! certificate for `localhost` only, and another CA
//! (`servers::Postgres::tls`). Whether a connection is encrypted is what
//! `recon db status` reads from the server (`pg_stat_ssl`).
//!
//! And `recon db status` itself (SPEC 12): the outbox's settings, its
//! logins and the grants its owner did not make.

use super::{db_init, init_ok, initialized};
use crate::real_receivers::servers::{self, Postgres};
use crate::real_receivers::{call_adapter, error_code, query_request};
use crate::support::{run_with_env, Run};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::OnceLock;

/// A password the environment offers (the cluster trusts every local
/// login, so it is never needed): no message may print it.
const PASSWORD: &str = "s3cret-tls-word";

fn tls_server(test: &str) -> Option<&'static Postgres> {
    servers::require(test, Postgres::tls())
}

fn files(pg: &Postgres) -> &servers::TlsFiles {
    pg.tls.as_ref().expect("a TLS cluster has its files")
}

/// One database of the TLS cluster holding an outbox, made once.
fn tls_outbox(pg: &Postgres) -> &'static str {
    static DATABASE: OnceLock<String> = OnceLock::new();
    DATABASE.get_or_init(|| {
        let url = pg.new_database("tls_outbox");
        let database = url.rsplit('/').next().expect("a name").to_string();
        let ca = files(pg).ca.display().to_string();
        init_ok(&pg.url_at(
            "localhost",
            &database,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ));
        database
    })
}

fn query(mode: &str, root: Option<&Path>) -> String {
    match root {
        Some(root) => format!("sslmode={mode}&sslrootcert={}", root.display()),
        None => format!("sslmode={mode}"),
    }
}

#[track_caller]
fn status(url: &str, env: &[(&str, &str)]) -> Run {
    let env = [env, &[("PGPASSWORD", PASSWORD)]].concat();
    run_with_env(&["db", "status", "--database", url, "--json"], None, &env)
}

/// `db status --json` succeeded; its document.
#[track_caller]
fn status_ok(url: &str, env: &[(&str, &str)]) -> Value {
    let out = status(url, env);
    assert_eq!(out.code, Some(0), "{url}: {}{}", out.stdout, out.stderr);
    out.json()
}

/// The run failed with exit 4 and one line on stderr holding `says`,
/// the JSON error a storage failure; no password anywhere.
#[track_caller]
fn fails_storage(out: &Run, says: &str) {
    assert_eq!(out.code, Some(4), "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains(says), "{}", out.stderr);
    assert!(!out.stderr.contains(PASSWORD) && !out.stdout.contains(PASSWORD));
    let error = out.json();
    assert_eq!(error["error"]["kind"], json!("storage"), "{error}");
}

#[test]
fn verify_full_connects_when_the_certificate_names_the_host_and_db_status_says_tls() {
    let test = "verify_full_connects_when_the_certificate_names_the_host_and_db_status_says_tls";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let ca = &files(pg).ca;
    let url = pg.url_at("localhost", database, &query("verify-full", Some(ca)));
    let status = status_ok(&url, &[]);
    assert_eq!(status["tls"], json!(true), "{status}");
    assert_eq!(status["roles_prefix"], json!("recon"), "{status}");
    assert_eq!(status["four_eyes"], json!(false), "{status}");
    assert!(status["schema"].as_i64().is_some(), "{status}");
}

#[test]
fn a_server_certificate_from_another_ca_fails_verify_full_with_exit_4_and_one_line() {
    let test = "a_server_certificate_from_another_ca_fails_verify_full_with_exit_4_and_one_line";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let other = &files(pg).other_ca;
    for mode in ["verify-full", "verify-ca"] {
        let url = pg.url_at("localhost", database, &query(mode, Some(other)));
        let out = status(&url, &[]);
        fails_storage(&out, "certificate was refused");
        assert!(out.stderr.contains("UnknownIssuer"), "{}", out.stderr);
        assert!(
            out.stderr.contains(&other.display().to_string()),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn verify_full_refuses_a_certificate_for_another_host_name_and_verify_ca_does_not_check_it() {
    let test =
        "verify_full_refuses_a_certificate_for_another_host_name_and_verify_ca_does_not_check_it";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let ca = &files(pg).ca;
    // The certificate names `localhost` only.
    let by_address = pg.url_at("127.0.0.1", database, &query("verify-full", Some(ca)));
    let out = status(&by_address, &[]);
    fails_storage(&out, "certificate was refused");
    assert!(out.stderr.contains("not valid for name"), "{}", out.stderr);
    let chain_only = pg.url_at("127.0.0.1", database, &query("verify-ca", Some(ca)));
    assert_eq!(status_ok(&chain_only, &[])["tls"], json!(true));
}

#[test]
fn require_encrypts_without_verifying_unless_a_root_certificate_is_given() {
    let test = "require_encrypts_without_verifying_unless_a_root_certificate_is_given";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let unverified = pg.url_at("127.0.0.1", database, &query("require", None));
    assert_eq!(status_ok(&unverified, &[])["tls"], json!(true));
    let other = &files(pg).other_ca;
    let held = pg.url_at("127.0.0.1", database, &query("require", Some(other)));
    fails_storage(&status(&held, &[]), "certificate was refused");
}

#[test]
fn sslmode_disable_is_refused_by_a_server_that_takes_tcp_only_over_tls() {
    let test = "sslmode_disable_is_refused_by_a_server_that_takes_tcp_only_over_tls";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let url = pg.url_at("localhost", database, &query("disable", None));
    fails_storage(&status(&url, &[]), "no encryption");
}

#[test]
fn prefer_is_the_default_and_uses_tls_when_the_server_offers_it() {
    let test = "prefer_is_the_default_and_uses_tls_when_the_server_offers_it";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let default = pg.url_at("127.0.0.1", database, "application_name=recon");
    assert_eq!(status_ok(&default, &[])["tls"], json!(true));
    let allow = pg.url_at("127.0.0.1", database, &query("allow", None));
    assert_eq!(
        status_ok(&allow, &[])["tls"],
        json!(true),
        "allow: plaintext refused, then TLS"
    );
    let Some(plain) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(plain, "tls_plain");
    assert_eq!(
        status_ok(&url, &[])["tls"],
        json!(false),
        "a server without TLS"
    );
}

#[test]
fn pgsslmode_and_pgsslrootcert_apply_when_the_url_names_neither() {
    let test = "pgsslmode_and_pgsslrootcert_apply_when_the_url_names_neither";
    let Some(pg) = tls_server(test) else { return };
    let database = tls_outbox(pg);
    let url = pg.url_at("localhost", database, "application_name=recon");
    let (ca, other) = (
        files(pg).ca.display().to_string(),
        files(pg).other_ca.display().to_string(),
    );
    let env = |root: &str| {
        [("PGSSLMODE", "verify-full"), ("PGSSLROOTCERT", root)].map(|(k, v)| (k, v.to_string()))
    };
    let wrong = env(&other);
    let wrong: Vec<(&str, &str)> = wrong.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fails_storage(&status(&url, &wrong), "certificate was refused");
    let right = env(&ca);
    let right: Vec<(&str, &str)> = right.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(status_ok(&url, &right)["tls"], json!(true));
    // The URL's own settings win over the environment's.
    let by_url = pg.url_at(
        "localhost",
        database,
        &query("verify-full", Some(&files(pg).ca)),
    );
    assert_eq!(status_ok(&by_url, &wrong)["tls"], json!(true));
}

#[test]
fn an_unknown_sslmode_is_a_usage_error_naming_the_six() {
    let out = status("postgres://postgres@localhost/x?sslmode=verify_full", &[]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("verify-full"), "{}", out.stderr);
}

#[test]
fn recon_pg_ledger_reads_under_verify_full_and_answers_unavailable_for_another_ca() {
    let test = "recon_pg_ledger_reads_under_verify_full_and_answers_unavailable_for_another_ca";
    let Some(pg) = tls_server(test) else { return };
    let Some(binary) = servers::require(test, servers::pg_ledger_binary()) else {
        return;
    };
    let url = pg.new_database("tls_ledger");
    let database = url.rsplit('/').next().expect("a name");
    let files = files(pg);
    let good = pg.url_at(
        "localhost",
        database,
        &query("verify-full", Some(&files.ca)),
    );
    let (answer, _) = call_adapter(
        binary,
        &["--database", &good],
        "query",
        &query_request("tls-1"),
        &[],
    );
    let answer = answer.expect("an answer");
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert_eq!(answer["matches"], json!([]), "{answer}");
    let bad = pg.url_at(
        "localhost",
        database,
        &query("verify-full", Some(&files.other_ca)),
    );
    let (answer, _) = call_adapter(
        binary,
        &["--database", &bad],
        "query",
        &query_request("tls-1"),
        &[],
    );
    let answer = answer.expect("an answer");
    assert_eq!(error_code(&answer), Some("unavailable"), "{answer}");
    assert!(
        answer.to_string().contains("certificate was refused"),
        "{answer}"
    );
    let by_address = pg.url_at(
        "127.0.0.1",
        database,
        &query("verify-full", Some(&files.ca)),
    );
    let (answer, _) = call_adapter(
        binary,
        &["--database", &by_address],
        "query",
        &query_request("tls-1"),
        &[],
    );
    assert_eq!(error_code(&answer.expect("an answer")), Some("unavailable"));
}

// ------------------------------------------------------------- db status

#[test]
fn db_status_lists_each_login_with_its_roles_and_grants_by_another_role_as_foreign() {
    let test = "db_status_lists_each_login_with_its_roles_and_grants_by_another_role_as_foreign";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "status_logins");
    let database = url.rsplit('/').next().expect("a name").to_string();
    let (ann, bob, eve) = (
        format!("{database}_ann"),
        format!("{database}_bob"),
        format!("{database}_eve"),
    );
    let ann_url = super::roles::login(pg, &url, &ann, &["recon_reviewer", "recon_reader"]);
    super::roles::login(pg, &url, &bob, &[]);
    pg.psql(&database, &format!("CREATE ROLE {eve} LOGIN CREATEROLE"));
    pg.psql(
        &database,
        &format!("SET ROLE {eve}; GRANT recon_closer TO {bob}"),
    );
    // Any login that can read the outbox may ask.
    let status = status_ok(&ann_url, &[]);
    let logins = status["logins"].as_array().expect("logins");
    let of = |name: &str| logins.iter().find(|l| l["login"] == json!(name)).cloned();
    assert_eq!(
        of(&ann),
        Some(json!({"login": ann, "roles": ["reader", "reviewer"]})),
        "{status}"
    );
    assert_eq!(
        of(&bob),
        None,
        "bob's only role was granted by {eve}: {status}"
    );
    let foreign: Vec<&Value> = status["foreign_grants"]
        .as_array()
        .expect("foreign_grants")
        .iter()
        .filter(|g| g["login"] == json!(bob))
        .collect();
    assert_eq!(
        foreign,
        [&json!({"login": bob, "role": "recon_closer", "grantor": eve})],
        "{status}"
    );
    let text = run_with_env(&["db", "status", "--database", &ann_url], None, &[]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(
        text.stdout.contains(&format!("{ann}: reader, reviewer")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains(&format!("{bob}: recon_closer, granted by {eve}")),
        "{}",
        text.stdout
    );
}

#[test]
fn db_status_lists_no_role_of_the_outbox_as_a_login_of_another() {
    let test = "db_status_lists_no_role_of_the_outbox_as_a_login_of_another";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "status_own_roles");
    let status = status_ok(&url, &[]);
    let members: Vec<&Value> = (status["logins"].as_array().expect("logins").iter())
        .chain(status["foreign_grants"].as_array().expect("grants").iter())
        .filter(|l| l["login"].as_str().is_some_and(|n| n.starts_with("recon_")))
        .collect();
    assert!(members.is_empty(), "{status}");
    let text = run_with_env(&["db", "status", "--database", &url], None, &[]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(!text.stdout.contains("recon_approver:"), "{}", text.stdout);
}

#[test]
fn db_status_says_four_eyes_and_a_database_without_an_outbox_is_told_to_run_db_init() {
    let test = "db_status_says_four_eyes_and_a_database_without_an_outbox_is_told_to_run_db_init";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let empty = pg.new_database("status_empty");
    fails_storage(&status(&empty, &[]), "recon db init");
    let out = db_init(&empty, true, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let status = status_ok(&empty, &[]);
    assert_eq!(status["four_eyes"], json!(false), "{status}");
    let four = run_with_env(
        &["db", "init", "--database", &empty, "--four-eyes"],
        None,
        &[],
    );
    assert_eq!(four.code, Some(0), "{}", four.stderr);
    assert_eq!(status_ok(&empty, &[])["four_eyes"], json!(true));
}

fn grant(verb: &str, url: &str, login: &str, roles: &str) -> Run {
    run_with_env(
        &["db", verb, "--database", url, login, roles, "--json"],
        None,
        &[],
    )
}

#[test]
fn db_grant_grants_exactly_the_named_roles_as_the_owner_and_db_revoke_takes_them_back() {
    let test = "db_grant_grants_exactly_the_named_roles_as_the_owner_and_db_revoke_takes_them_back";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "grant_roles");
    let database = url.rsplit('/').next().expect("a name").to_string();
    let (ann, eve) = (format!("{database}_ann"), format!("{database}_eve"));
    super::roles::login(pg, &url, &ann, &[]);
    let eve_url = super::roles::login(pg, &url, &eve, &["recon_reviewer"]);
    let out = grant("grant", &url, &ann, "reviewer,closer");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.json(),
        json!({"login": ann, "roles": ["reviewer", "closer"]})
    );
    let status = status_ok(&url, &[]);
    let held = (status["logins"].as_array().expect("logins").iter())
        .find(|l| l["login"] == json!(ann))
        .cloned();
    assert_eq!(
        held,
        Some(json!({"login": ann, "roles": ["reviewer", "closer"]})),
        "granted by the owner, so they count: {status}"
    );
    let out = grant("revoke", &url, &ann, "closer");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json(), json!({"login": ann, "roles": ["reviewer"]}));
    let text = run_with_env(
        &["db", "revoke", "--database", &url, &ann, "reviewer"],
        None,
        &[],
    );
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert_eq!(
        text.stdout,
        format!("{ann} now holds no role of the outbox\n")
    );
    // Another login, even one holding a role, grants nothing.
    let refused = grant("grant", &eve_url, &ann, "approver");
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert_eq!(refused.json()["error"]["code"], "permission_denied");
    let status = status_ok(&url, &[]);
    let logins = status["logins"].as_array().expect("logins");
    assert!(
        !logins.iter().any(|l| l["login"] == json!(ann)),
        "nothing was granted: {status}"
    );
}

#[test]
fn db_grant_refuses_an_unknown_role_before_connecting_and_names_a_missing_login() {
    let test = "db_grant_refuses_an_unknown_role_before_connecting_and_names_a_missing_login";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "grant_bad");
    let out = grant("grant", &url, "nobody", "reviewer,superuser");
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("superuser is no role"),
        "{}",
        out.stderr
    );
    let out = grant("grant", &url, "grant_bad_nobody", "reviewer");
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("no role named grant_bad_nobody"),
        "{}",
        out.stderr
    );
}
