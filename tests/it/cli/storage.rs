//! Storage errors (exit 4): a missing workspace, a file that is not a recon
//! database, a workspace of an incompatible schema version, a database
//! locked by another process past the busy timeout. Each is one line on
//! stderr naming the file, and nothing is created or written.

use super::{assert_fails, assert_refused, Shell};
use crate::support::dump;
use rusqlite::Connection;

/// One invocation of every command that opens an existing workspace.
fn every_opening_command() -> Vec<Vec<&'static str>> {
    vec![
        vec!["dispatch", "op-1012-onboarding-call"],
        vec!["ops"],
        vec!["ops", "--state", "unknown", "--limit", "50", "--json"],
        vec!["show", "op-1003-charge-order"],
        vec!["ledger"],
        vec!["snapshot", "op-1003-charge-order", "--json"],
        vec![
            "snapshot",
            "op-1004-support-ticket",
            "--close",
            "--authorized-by",
            "dana",
        ],
        vec![
            "reconcile",
            "op-1003-charge-order",
            "--reviewer",
            "dana",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
        vec![
            "approve-compensation",
            "op-1001-welcome-email",
            "--effect",
            "fx-000001",
            "--approver",
            "lee",
            "--expected-version",
            "3",
            "--compensation-op",
            "op-x",
            "--action",
            "send_apology_email",
            "--payload",
            "{}",
        ],
    ]
}

fn receiver_apply() -> Vec<&'static str> {
    vec![
        "receiver",
        "apply",
        "--op",
        "op-z",
        "--action",
        "a",
        "--payload",
        "{}",
    ]
}

#[test]
fn commands_on_a_missing_workspace_exit_4_and_create_nothing() {
    let sh = Shell::empty();
    let mut commands = every_opening_command();
    commands.push(receiver_apply());
    for args in commands {
        let out = sh.run(&args);
        assert_fails(&out, 4);
        assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
        assert!(out.stderr.contains(&sh.ws_arg()), "{}", out.stderr);
        assert!(sh.files().is_none(), "recon {args:?} created the workspace");
    }
}

#[test]
fn commands_on_a_directory_without_databases_exit_4_and_create_none() {
    let sh = Shell::empty();
    std::fs::create_dir(&sh.ws).unwrap();
    let mut commands = every_opening_command();
    commands.push(receiver_apply());
    for args in commands {
        let out = sh.run(&args);
        assert_fails(&out, 4);
        assert!(out.stderr.contains("is missing"), "{}", out.stderr);
        assert_eq!(sh.files(), Some(vec![]), "recon {args:?} created a file");
    }
}

#[test]
fn receivers_add_and_demo_create_the_workspace_directory() {
    for command in [
        vec!["receivers", "add", "builtin", "--builtin", "--actions", "*"],
        vec!["demo"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("a").join("b");
        let mut args = command.clone();
        let ws_arg = ws.display().to_string();
        args.extend(["--workspace", &ws_arg]);
        let out = crate::support::run(&args, None);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert!(ws.join("sender.sqlite").is_file() && ws.join("receiver.sqlite").is_file());
    }
}

/// No receiver is implicit: a prepare whose action routes nowhere is
/// refused `no_receiver` naming the command that registers one, in a new
/// directory (which it does not create) as in a workspace without a route
/// (where it writes nothing).
#[test]
fn a_prepare_routed_nowhere_is_refused_no_receiver_and_creates_nothing() {
    let prepare = [
        "prepare",
        "--op",
        "op-1",
        "--action",
        "send_emial",
        "--payload",
        "{}",
    ];
    let sh = Shell::empty();
    let out = sh.run(&prepare);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("refused: no_receiver: no receiver takes action kind send_emial")
            && out
                .stderr
                .contains("recon receivers add --workspace DIR NAME --actions send_emial"),
        "{}",
        out.stderr
    );
    assert!(!sh.ws.exists(), "a refused prepare created the workspace");
    // A workspace whose one receiver takes another kind only.
    sh.ok(&[
        "receivers",
        "add",
        "ledger",
        "--builtin",
        "--actions",
        "send_email",
    ]);
    let before = dump(&sh.ws);
    let out = sh.run(&prepare);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains("no_receiver"), "{}", out.stderr);
    assert_eq!(dump(&sh.ws), before, "a refused prepare wrote something");
    // `*` takes every kind routed nowhere else; a named route still wins.
    sh.ok(&[
        "receivers",
        "add",
        "catchall",
        "--builtin",
        "--actions",
        "*",
    ]);
    let typo = sh.ok(&prepare);
    assert!(
        typo.stdout.contains("routed to receiver catchall"),
        "{}",
        typo.stdout
    );
    let named = [
        "prepare",
        "--op",
        "op-2",
        "--action",
        "send_email",
        "--payload",
        "{}",
    ];
    let routed = sh.ok(&named);
    assert!(
        routed.stdout.contains("routed to receiver ledger"),
        "{}",
        routed.stdout
    );
}

/// Overwrites one database of a demo workspace with text.
fn garbage(file: &str) -> (Shell, std::path::PathBuf) {
    let sh = Shell::demo(0);
    let path = sh.ws.join(file);
    std::fs::write(
        &path,
        "this is a shopping list, not a database\n".repeat(40),
    )
    .unwrap();
    (sh, path)
}

#[test]
fn a_sender_file_that_is_not_a_database_exits_4_naming_it() {
    let (sh, path) = garbage("sender.sqlite");
    let bytes = std::fs::read(&path).unwrap();
    let files = sh.files();
    let receiver_bytes = std::fs::read(sh.ws.join("receiver.sqlite")).unwrap();
    let mut commands = every_opening_command();
    commands.push(vec![
        "prepare",
        "--op",
        "op-new",
        "--action",
        "a",
        "--payload",
        "{}",
    ]);
    commands.push(vec!["demo", "--ops", "5"]);
    for args in commands {
        let out = sh.run(&args);
        assert_fails(&out, 4);
        assert!(
            out.stderr.contains(&path.display().to_string()) && out.stderr.contains("not a"),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{args:?} wrote to it");
        assert_eq!(sh.files(), files, "{args:?} created a file");
    }
    // The receiver next to it is untouched.
    assert_eq!(
        std::fs::read(sh.ws.join("receiver.sqlite")).unwrap(),
        receiver_bytes
    );
}

#[test]
fn a_receiver_file_that_is_not_a_database_exits_4_naming_it() {
    let (sh, path) = garbage("receiver.sqlite");
    let bytes = std::fs::read(&path).unwrap();
    let files = sh.files();
    let mut commands = every_opening_command();
    commands.push(receiver_apply());
    commands.push(vec![
        "prepare",
        "--op",
        "op-new",
        "--action",
        "a",
        "--payload",
        "{}",
    ]);
    for args in commands {
        let out = sh.run(&args);
        assert_fails(&out, 4);
        assert!(
            out.stderr.contains(&path.display().to_string()),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert_eq!(sh.files(), files, "{args:?} created a file");
    }
}

#[test]
fn a_bad_receiver_file_stops_prepare_before_it_creates_the_sender() {
    let sh = Shell::empty();
    std::fs::create_dir(&sh.ws).unwrap();
    std::fs::write(
        sh.ws.join("receiver.sqlite"),
        "not a database at all\n".repeat(40),
    )
    .unwrap();
    let out = sh.run(&[
        "prepare",
        "--op",
        "op-1",
        "--action",
        "a",
        "--payload",
        "{}",
    ]);
    assert_fails(&out, 4);
    assert_eq!(sh.files(), Some(vec!["receiver.sqlite".to_string()]));
}

#[test]
fn the_databases_are_not_mistaken_for_each_other() {
    let sh = Shell::demo(0);
    std::fs::copy(sh.ws.join("receiver.sqlite"), sh.ws.join("sender.sqlite")).unwrap();
    let out = sh.run(&["ops"]);
    assert_fails(&out, 4);
    assert!(
        out.stderr
            .contains("sender.sqlite is not a recon SQLite database"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_workspace_of_an_incompatible_schema_version_is_refused_clearly() {
    let sh = Shell::demo(0);
    let conn = Connection::open(sh.ws.join("sender.sqlite")).unwrap();
    conn.execute_batch("PRAGMA user_version = 99").unwrap();
    drop(conn);
    let before = sh.dump();
    for args in every_opening_command() {
        let out = sh.run(&args);
        assert_fails(&out, 4);
        assert!(
            out.stderr.contains("schema version 99") && out.stderr.contains("reads version 7"),
            "{}",
            out.stderr
        );
        assert_eq!(sh.dump(), before);
    }
}

/// Holds the write lock of one database, as another process would.
fn lock(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    conn
}

const SHORT_TIMEOUT: &[(&str, &str)] = &[("RECON_BUSY_TIMEOUT_MS", "50")];

#[test]
fn a_locked_sender_exits_4_after_the_busy_timeout_and_says_so() {
    let sh = Shell::demo(0);
    let before = sh.dump();
    let holder = lock(&sh.ws.join("sender.sqlite"));
    for args in [
        vec![
            "prepare",
            "--op",
            "op-new",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
        vec!["dispatch", "op-1012-onboarding-call"],
        vec![
            "reconcile",
            "op-1003-charge-order",
            "--reviewer",
            "dana",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
        vec![
            "approve-compensation",
            "op-1001-welcome-email",
            "--effect",
            "fx-000001",
            "--approver",
            "lee",
            "--expected-version",
            "3",
            "--compensation-op",
            "op-x",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
        vec!["demo", "--ops", "5"],
    ] {
        let out = sh.run_full(&args, None, SHORT_TIMEOUT);
        assert_fails(&out, 4);
        assert!(
            out.stderr
                .contains("sender.sqlite is locked by another process past the busy timeout"),
            "{args:?}: {}",
            out.stderr
        );
    }
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(sh.dump(), before);
}

/// A dump without the journal's and `close_requests`' rows.
fn without_close_requests(dump: &str) -> String {
    let mut skipping = false;
    dump.lines()
        .filter(|line| {
            if line.starts_with("sender.sqlite/") || line.starts_with("receiver.sqlite/") {
                skipping = ["sender.sqlite/journal", "sender.sqlite/close_requests"].contains(line);
                return true;
            }
            !skipping
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_locked_receiver_exits_4_after_the_busy_timeout_and_says_so() {
    let sh = Shell::demo(0);
    let before = sh.dump();
    let holder = lock(&sh.ws.join("receiver.sqlite"));
    for args in [
        vec![
            "snapshot",
            "op-1004-support-ticket",
            "--close",
            "--authorized-by",
            "dana",
        ],
        // The decision would be recorded, but its closing snapshot cannot
        // be taken, so nothing is recorded on the sender either.
        vec![
            "reconcile",
            "op-1005-delivery-sms",
            "--reviewer",
            "dana",
            "--decision",
            "not_applied",
            "--expected-version",
            "2",
            "--close",
            "--authorized-by",
            "dana",
        ],
        receiver_apply(),
    ] {
        let out = sh.run_full(&args, None, SHORT_TIMEOUT);
        assert_fails(&out, 4);
        assert!(
            out.stderr
                .contains("receiver.sqlite is locked by another process"),
            "{args:?}: {}",
            out.stderr
        );
    }
    holder.execute_batch("ROLLBACK").unwrap();
    // The two closes' authorizations were journaled before the ledger was
    // asked (and found locked); nothing else changed.
    let after = sh.dump();
    assert_eq!(
        without_close_requests(&after),
        without_close_requests(&before)
    );
    let requests = |dump: &str| dump.matches("Text(\"close_requested\")").count();
    assert_eq!(requests(&after), requests(&before) + 2);
}

#[test]
fn readers_keep_reading_while_another_process_holds_the_write_locks() {
    let sh = Shell::demo(0);
    let sender = lock(&sh.ws.join("sender.sqlite"));
    let receiver = lock(&sh.ws.join("receiver.sqlite"));
    for args in [
        vec!["ops", "--state", "unknown", "--limit", "50", "--json"],
        vec!["show", "op-1010-annual-plan", "--json"],
        vec!["ledger", "--json"],
        vec!["snapshot", "op-1006-deploy-notice", "--json"],
    ] {
        let out = sh.run_full(&args, None, SHORT_TIMEOUT);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    }
    // A refusal is still a refusal, not a lock error, when it needs no write.
    let out = sh.run_full(&["show", "op-nope"], None, SHORT_TIMEOUT);
    assert_refused(&out, "unknown_operation");
    drop((sender, receiver));
}
