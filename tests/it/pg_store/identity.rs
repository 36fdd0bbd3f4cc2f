//! Identity from the database, from the command line (SPEC 10): in team
//! mode `--reviewer`, `--by`, `--approver` and `--authorized-by` default
//! to the login (`session_user`), every act records that role beside the
//! name typed, and `show` and `export` print both.
//!
//! Each test logs in as roles of its own (login roles are the cluster's),
//! named after the test, over an outbox where `op-1` is unknown at its
//! receiver (`roles::team`).

use super::database_of;
use super::roles::{login, open, team};
use crate::support::{run_with_env, Run};
use serde_json::{json, Value};

/// `recon ARGS --database URL`, expecting `code`.
#[track_caller]
fn recon(url: &str, args: &[&str], code: i32) -> Run {
    let mut words = args.to_vec();
    words.extend(["--database", url]);
    let out = run_with_env(&words, None, &[]);
    assert_eq!(
        out.code,
        Some(code),
        "{args:?}: {}{}",
        out.stdout,
        out.stderr
    );
    out
}

/// `op-1`'s version as the outbox holds it.
fn version(url: &str) -> String {
    let op = open(url).operation("op-1").expect("read").expect("op-1");
    op.version.to_string()
}

/// The decision `recon reconcile` records for `op-1` as the login at
/// `url`, with `extra` flags.
fn confirm(url: &str, extra: &[&str]) -> Value {
    let version = version(url);
    let mut args = vec![
        "reconcile",
        "op-1",
        "--decision",
        "confirmed",
        "--expected-version",
        &version,
        "--json",
    ];
    args.extend(extra);
    recon(url, &args, 0).json()
}

/// The field `field` of each journal entry of `kind`, in order.
fn entry_fields(pg: &crate::real_receivers::servers::Postgres, url: &str, kind: &str) -> String {
    pg.psql(
        database_of(url),
        &format!(
            "SELECT string_agg(coalesce(entry::jsonb ->> 'reviewer', entry::jsonb ->> 'by', \
             entry::jsonb ->> 'approver', '-') || '/' || (entry::jsonb ->> 'role'), ',' \
             ORDER BY seq) FROM journal WHERE kind = '{kind}'"
        ),
    )
    .trim()
    .to_string()
}

#[test]
fn in_team_mode_the_reviewer_defaults_to_the_database_login() {
    let test = "in_team_mode_the_reviewer_defaults_to_the_database_login";
    let Some((pg, url, _dir)) = team(test, "iddefault") else {
        return;
    };
    let rita = login(pg, &url, "iddefault_rita", &["recon_reviewer"]);
    let decided = confirm(&rita, &[]);
    assert_eq!(decided["state"], json!("confirmed"), "{decided}");
    let shown = recon(&rita, &["show", "op-1", "--json"], 0).json();
    let evidence = shown["evidence"]
        .as_array()
        .and_then(|e| e.last())
        .expect("the decision");
    assert_eq!(evidence["reviewer"], json!("iddefault_rita"), "{shown}");
    assert_eq!(evidence["role"], json!("iddefault_rita"), "{shown}");
    assert_eq!(
        entry_fields(pg, &url, "decided"),
        "iddefault_rita/iddefault_rita"
    );
    // `--by` too: a note and an escalation without one are the login's.
    recon(&rita, &["note", "op-1", "--text", "seen"], 0);
    assert_eq!(
        entry_fields(pg, &url, "noted"),
        "iddefault_rita/iddefault_rita"
    );
    // A name typed is recorded as typed, beside the login's role.
    recon(
        &rita,
        &["note", "op-1", "--by", "Rita Q", "--text", "again"],
        0,
    );
    assert_eq!(
        entry_fields(pg, &url, "noted"),
        "iddefault_rita/iddefault_rita,Rita Q/iddefault_rita"
    );
}

#[test]
fn in_team_mode_the_approver_defaults_to_the_database_login() {
    let test = "in_team_mode_the_approver_defaults_to_the_database_login";
    let Some((pg, url, _dir)) = team(test, "idapprove") else {
        return;
    };
    let rita = login(pg, &url, "idapprove_rita", &["recon_reviewer"]);
    confirm(&rita, &["--reviewer", "Rita Q"]);
    let shown = recon(&rita, &["show", "op-1", "--json"], 0).json();
    let effect = shown["operation"]["confirmed_effect_id"]
        .as_str()
        .expect("the confirmed effect")
        .to_string();
    let amy = login(pg, &url, "idapprove_amy", &["recon_approver"]);
    let version = version(&url);
    let approved = recon(
        &amy,
        &[
            "approve-compensation",
            "op-1",
            "--effect",
            &effect,
            "--expected-version",
            &version,
            "--compensation-op",
            "undo-1",
            "--action",
            "post_letter",
            "--payload",
            r#"{"to": "ann", "text": "sorry"}"#,
            "--json",
        ],
        0,
    )
    .json();
    assert_eq!(approved["approver"], json!("idapprove_amy"), "{approved}");
    let shown = recon(&amy, &["show", "op-1", "--json"], 0).json();
    let approval = &shown["approvals"][0];
    assert_eq!(approval["approver"], json!("idapprove_amy"), "{shown}");
    assert_eq!(approval["role"], json!("idapprove_amy"), "{shown}");
    let text = recon(&amy, &["show", "op-1"], 0).stdout;
    assert!(
        text.contains("approved by idapprove_amy (role idapprove_amy)"),
        "{text}"
    );
}

#[test]
fn show_prints_the_role_beside_the_reviewer_in_team_mode() {
    let test = "show_prints_the_role_beside_the_reviewer_in_team_mode";
    let Some((pg, url, _dir)) = team(test, "idshow") else {
        return;
    };
    let rita = login(pg, &url, "idshow_rita", &["recon_reviewer"]);
    recon(
        &rita,
        &["note", "op-1", "--by", "Rita N", "--text", "seen"],
        0,
    );
    confirm(&rita, &["--reviewer", "Rita Q"]);
    let text = recon(&rita, &["show", "op-1"], 0).stdout;
    assert!(
        text.contains("review by Rita Q (role idshow_rita) -> confirmed"),
        "{text}"
    );
    assert!(
        text.contains("by Rita N (role idshow_rita): seen"),
        "{text}"
    );
    let shown = recon(&rita, &["show", "op-1", "--json"], 0).json();
    // The receipt was lost: the owner's dispatch recorded no evidence, so
    // the decision is the one evidence row.
    let evidence = shown["evidence"].as_array().expect("evidence");
    let decision = evidence.last().expect("the decision");
    assert_eq!(decision["reviewer"], json!("Rita Q"), "{shown}");
    assert_eq!(decision["role"], json!("idshow_rita"), "{shown}");
    assert_eq!(shown["notes"][0]["by"], json!("Rita N"), "{shown}");
    assert_eq!(shown["notes"][0]["role"], json!("idshow_rita"), "{shown}");
}

#[test]
fn export_lines_carry_the_role_of_each_entry_in_team_mode() {
    let test = "export_lines_carry_the_role_of_each_entry_in_team_mode";
    let Some((pg, url, _dir)) = team(test, "idexport") else {
        return;
    };
    let rita = login(pg, &url, "idexport_rita", &["recon_reviewer"]);
    let setup: usize = pg
        .psql(database_of(&url), "SELECT count(*) FROM journal")
        .trim()
        .parse()
        .expect("a count");
    confirm(&rita, &["--reviewer", "Rita Q"]);
    let export = recon(&rita, &["export"], 0).stdout;
    let lines: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    // The owner registered, prepared and dispatched; the reviewer's
    // decision recorded what it read and what it decided.
    let (owners, reviewers) = lines.split_at(setup);
    assert!(!owners.is_empty(), "{export}");
    for line in owners {
        assert_eq!(line["role"], json!("postgres"), "{line}");
    }
    let kinds: Vec<&Value> = reviewers.iter().map(|l| &l["kind"]).collect();
    assert_eq!(kinds, [&json!("observed"), &json!("decided")], "{export}");
    for line in reviewers {
        assert_eq!(line["role"], json!("idexport_rita"), "{line}");
    }
    assert_eq!(reviewers[1]["reviewer"], json!("Rita Q"), "{export}");
    // The exported role is part of what the hash chain covers: the copy
    // verifies against the journal it came from.
    let copy = tempfile::NamedTempFile::new().expect("a file");
    std::fs::write(copy.path(), &export).expect("write the copy");
    let path = copy.path().display().to_string();
    recon(&rita, &["verify", "--against", &path], 0);
}

#[test]
fn in_team_mode_the_close_authorizer_defaults_to_the_database_login() {
    let test = "in_team_mode_the_close_authorizer_defaults_to_the_database_login";
    let Some((pg, url, _dir)) = team(test, "idclose") else {
        return;
    };
    let cleo = login(pg, &url, "idclose_cleo", &["recon_closer"]);
    let closed = recon(&cleo, &["snapshot", "op-1", "--close", "--json"], 0).json();
    assert_eq!(closed["snapshot"]["closed"], json!(true), "{closed}");
    let shown = recon(&cleo, &["show", "op-1", "--json"], 0).json();
    assert_eq!(
        shown["closes"][0]["authorized_by"],
        json!("idclose_cleo"),
        "{shown}"
    );
    assert_eq!(shown["closes"][0]["role"], json!("idclose_cleo"), "{shown}");
    let text = recon(&cleo, &["show", "op-1"], 0).stdout;
    assert!(
        text.contains("authorized by idclose_cleo (role idclose_cleo)"),
        "{text}"
    );
    assert_eq!(
        shown["observations"][0]["observed_by"],
        json!("idclose_cleo"),
        "{shown}"
    );
    assert_eq!(
        shown["observations"][0]["role"],
        json!("idclose_cleo"),
        "{shown}"
    );
}
