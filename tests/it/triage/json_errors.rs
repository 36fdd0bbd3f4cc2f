//! Claim 5 (SPEC 6, errors under `--json`): every command that takes
//! `--json` answers each failing exit it can produce (2 usage, 3 refused,
//! 4 storage) with exactly one `{"error": {exit, kind, code, message}}`
//! document on stdout and one line on stderr, and changes nothing.
//!
//! `honest.rs` and `cli/storage.rs` hold a few such cases; this table holds
//! one per command and exit.

use crate::cli::refusals::stories;
use crate::cli::{assert_json_error, Shell};
use crate::real_receivers::servers;
use crate::stores::{on_both_stores, Store};
use crate::support::{dump, run};
use std::collections::BTreeSet;
use std::path::Path;

/// The commands that take `--json`, by their words.
const JSON_COMMANDS: &[&str] = &[
    "demo",
    "prepare",
    "dispatch",
    "ops",
    "show",
    "ledger",
    "snapshot",
    "reconcile",
    "approve-compensation",
    "observe",
    "note",
    "escalate",
    "deescalate",
    "verify",
    "export",
    "checkpoint",
    "receivers add",
    "receivers list",
    "receivers check",
];

/// `approve-compensation` of `fx-000011` as lee at version 3, with
/// `payload`.
fn approve(op_id: &'static str, payload: &'static str) -> Vec<&'static str> {
    vec![
        "approve-compensation",
        op_id,
        "--effect",
        "fx-000011",
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-x",
        "--action",
        "refund_card",
        "--payload",
        payload,
    ]
}

/// A failing invocation (without `--workspace` and `--json`) and its exit.
type Case = (Vec<&'static str>, i32);

fn usage_cases() -> Vec<Case> {
    let cases: Vec<Vec<&str>> = vec![
        vec!["demo", "--ops", "many"],
        vec!["prepare", "--op", "a b", "--action", "x", "--payload", "{}"],
        vec![
            "prepare",
            "--op",
            "n",
            "--action",
            "x",
            "--payload",
            r#"{"n":1e400}"#,
        ],
        vec![
            "dispatch",
            "op-1012-onboarding-call",
            "--fault",
            "sometimes",
        ],
        vec!["ops", "--sort", "age", "--after", "op_id x"],
        vec!["ops", "--verdict", "maybe"],
        vec!["show", "op-1003-charge-order", "extra"],
        vec!["ledger", "--bogus"],
        // (`--close` without `--authorized-by` is one only on a workspace
        // directory: `cli::usage`.)
        vec![
            "snapshot",
            "op-1003-charge-order",
            "--close",
            "--authorized-by",
            "a\u{7}",
        ],
        vec!["snapshot", "op-1003-charge-order", "--by", "a\u{7}"],
        vec![
            "reconcile",
            "op-1003-charge-order",
            "--reviewer",
            "dana",
            "--decision",
            "confirmed",
            "--expected-version",
            "0",
        ],
        approve("op-1010-annual-plan", "nope"),
    ];
    let cases = [cases, triage_usage_cases()].concat();
    cases.into_iter().map(|args| (args, 2)).collect()
}

/// Usage errors of the triage, audit and receivers commands.
fn triage_usage_cases() -> Vec<Vec<&'static str>> {
    vec![
        vec!["observe", "op-1003-charge-order", "--state", "lost"],
        vec!["observe", "--by", "dana", "--older-than", "soon"],
        vec!["note", "op-1003-charge-order", "--by", "dana", "--text", ""],
        vec!["note", "op-1003-charge-order", "--by", "dana"],
        vec![
            "escalate",
            "op-1003-charge-order",
            "--by",
            "da\u{202e}na",
            "--reason",
            "r",
        ],
        vec!["deescalate", "op-1003-charge-order", "--by", "dana"],
        vec!["verify", "--checkpoint", "12"],
        vec!["export", "--bogus"],
        vec!["checkpoint", "extra"],
        vec![
            "receivers",
            "add",
            "Bad Name",
            "--actions",
            "x",
            "--",
            "/bin/true",
        ],
        vec!["receivers", "list", "extra"],
        vec!["receivers", "check"],
    ]
}

fn refusal_cases() -> Vec<Case> {
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "prepare",
            "--op",
            "op-1001-welcome-email",
            "--action",
            "x",
            "--payload",
            "{}",
        ],
        vec!["dispatch", "op-1003-charge-order"],
        vec!["show", "op-nope"],
        vec!["snapshot", "op-nope"],
        vec![
            "reconcile",
            "op-1003-charge-order",
            "--reviewer",
            "dana",
            "--decision",
            "confirmed",
            "--expected-version",
            "1",
        ],
        approve("op-nope", "{}"),
        vec!["observe", "op-nope", "--by", "dana"],
        vec!["note", "op-nope", "--by", "dana", "--text", "hi"],
        vec![
            "escalate",
            "op-1001-welcome-email",
            "--by",
            "dana",
            "--reason",
            "r",
        ],
        vec![
            "deescalate",
            "op-1003-charge-order",
            "--by",
            "dana",
            "--reason",
            "r",
        ],
        vec![
            "receivers",
            "add",
            "builtin",
            "--actions",
            "x",
            "--",
            "/bin/true",
        ],
        vec!["receivers", "check", "nobody"],
    ];
    cases.into_iter().map(|args| (args, 3)).collect()
}

/// One opening invocation of every command that takes `--json`.
fn storage_cases() -> Vec<Case> {
    let cases: Vec<Vec<&str>> = vec![
        vec!["demo"],
        vec![
            "prepare",
            "--op",
            "op-new",
            "--action",
            "x",
            "--payload",
            "{}",
        ],
        vec!["dispatch", "op-1012-onboarding-call"],
        vec!["ops"],
        vec!["show", "op-1003-charge-order"],
        vec!["ledger"],
        vec!["snapshot", "op-1003-charge-order"],
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
        approve("op-1010-annual-plan", "{}"),
    ];
    let cases = [cases, triage_storage_cases()].concat();
    cases.into_iter().map(|args| (args, 4)).collect()
}

/// One opening invocation of the triage, audit and receivers commands.
fn triage_storage_cases() -> Vec<Vec<&'static str>> {
    vec![
        vec!["observe", "--by", "dana"],
        vec![
            "note",
            "op-1003-charge-order",
            "--by",
            "dana",
            "--text",
            "hi",
        ],
        vec![
            "escalate",
            "op-1003-charge-order",
            "--by",
            "dana",
            "--reason",
            "r",
        ],
        vec![
            "deescalate",
            "op-1003-charge-order",
            "--by",
            "dana",
            "--reason",
            "r",
        ],
        vec!["verify"],
        vec!["export"],
        vec!["checkpoint"],
        vec![
            "receivers",
            "add",
            "mine",
            "--actions",
            "x",
            "--",
            "/bin/true",
        ],
        vec!["receivers", "list"],
        vec!["receivers", "check", "mine"],
    ]
}

/// The command's words: `receivers add`, or `note`.
fn command_of(args: &[&str]) -> String {
    match args {
        ["receivers", verb, ..] => format!("receivers {verb}"),
        [name, ..] => name.to_string(),
        [] => String::new(),
    }
}

/// What the outbox holds: [`contents`] of a workspace, or a database's
/// rows and its adapter's ledger.
fn held(sh: &Shell) -> String {
    match sh.store() {
        Store::Sqlite => contents(&sh.ws),
        Store::Postgres => sh.dump(),
    }
}

/// What a workspace holds: both databases' rows, or, when they cannot be
/// read as databases, every file's bytes.
fn contents(dir: &Path) -> String {
    let readable = rusqlite::Connection::open(dir.join("sender.sqlite"))
        .and_then(|c| {
            c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .is_ok();
    if readable {
        return dump(dir);
    }
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    format!("{files:?}")
}

/// Runs `args --json` (with `--workspace` before any `--`) and checks the
/// one JSON error document, the one stderr line, and that the workspace
/// directory is as it was.
#[track_caller]
fn check(sh: &Shell, args: &[&str], exit: i32) {
    let mut all = args.to_vec();
    let at = all.iter().position(|a| *a == "--").unwrap_or(all.len());
    all.insert(at, "--json");
    let before = held(sh);
    let out = sh.run(&all);
    assert_eq!(
        out.code,
        Some(exit),
        "recon {all:?}: {}{}",
        out.stdout,
        out.stderr
    );
    assert_json_error(&out, exit);
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "recon {all:?}: one stderr line: {}",
        out.stderr
    );
    assert!(out.stderr.ends_with('\n') && !out.stderr.contains('\u{1b}'));
    assert_eq!(held(sh), before, "recon {all:?} changed the outbox");
}

/// Which exits each command was seen failing with.
fn seen(cases: &[Case]) -> BTreeSet<(String, i32)> {
    cases
        .iter()
        .map(|(args, exit)| (command_of(args), *exit))
        .collect()
}

on_both_stores!(under_json_every_failure_of_every_command_is_one_json_error_document);
fn under_json_every_failure_of_every_command_is_one_json_error_document(store: Store) {
    // The demo's stories; on PostgreSQL made through the binary, as the
    // demo builds only a directory.
    let sh = match store {
        Store::Sqlite => Shell::demo(0),
        Store::Postgres => stories(store),
    };
    for (args, exit) in usage_cases().into_iter().chain(refusal_cases()) {
        check(&sh, &args, exit);
    }
    let storage = match store {
        Store::Sqlite => sqlite_storage_failures(),
        Store::Postgres => postgres_storage_failures(),
    };
    // Every command, every exit it can produce.
    let all = [usage_cases(), refusal_cases(), storage].concat();
    let covered = seen(&all);
    for command in JSON_COMMANDS {
        for exit in [2, 4] {
            if exit == 4 && store == Store::Postgres && DIRECTORY_ONLY.contains(command) {
                continue;
            }
            assert!(
                covered.contains(&(command.to_string(), exit)),
                "{command} exit {exit}"
            );
        }
    }
    let refusing = covered.iter().filter(|(_, exit)| *exit == 3).count();
    // All but the commands that refuse nothing: demo, ops, ledger,
    // verify, export, checkpoint, receivers list.
    assert_eq!(refusing, JSON_COMMANDS.len() - 7);
}

/// Storage: a workspace whose sender database is not a database; every
/// opening command against it. The cases it ran.
fn sqlite_storage_failures() -> Vec<Case> {
    let broken = Shell::empty();
    std::fs::create_dir(&broken.ws).unwrap();
    std::fs::write(
        broken.ws.join("sender.sqlite"),
        b"not a database, just text\n",
    )
    .unwrap();
    for (args, exit) in storage_cases() {
        check(&broken, &args, exit);
    }
    storage_cases()
}

/// The commands that work on a workspace directory only: on a database
/// they are usage errors, so they have no storage failure there.
const DIRECTORY_ONLY: [&str; 2] = ["demo", "ledger"];

/// Storage on PostgreSQL: a database the server does not have; every
/// opening command but [`DIRECTORY_ONLY`] against it. The cases it ran.
fn postgres_storage_failures() -> Vec<Case> {
    let pg = servers::postgres()
        .as_ref()
        .expect("the PostgreSQL cluster");
    let url = pg.url("no_such_outbox");
    let cases: Vec<Case> = storage_cases()
        .into_iter()
        .filter(|(args, _)| !DIRECTORY_ONLY.contains(&args[0]))
        .collect();
    for (args, exit) in &cases {
        let mut all = args.clone();
        let at = all.iter().position(|a| *a == "--").unwrap_or(all.len());
        all.splice(at..at, ["--database", url.as_str(), "--json"]);
        let out = run(&all, None);
        assert_eq!(out.code, Some(*exit), "recon {all:?}: {}", out.stderr);
        assert_json_error(&out, *exit);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
    }
    cases
}

// SQLite only: it is about a missing workspace directory (a missing
// database is in the PostgreSQL half of the test above).
#[test]
fn under_json_a_missing_workspace_is_one_json_error_document_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let ws = missing.display().to_string();
    for (args, _) in storage_cases() {
        // demo, prepare and receivers add create a missing workspace; the
        // broken one above covers them.
        if matches!(
            args.as_slice(),
            ["demo", ..] | ["prepare", ..] | ["receivers", "add", ..]
        ) {
            continue;
        }
        let mut all = args.clone();
        let at = all.iter().position(|a| *a == "--").unwrap_or(all.len());
        all.splice(at..at, ["--workspace", ws.as_str(), "--json"]);
        let out = run(&all, None);
        assert_eq!(out.code, Some(4), "recon {all:?}: {}", out.stderr);
        assert_json_error(&out, 4);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nowhere"));
        assert!(!Path::new(&missing).exists(), "recon {all:?} created it");
    }
}

on_both_stores!(under_json_clap_usage_errors_are_one_line_naming_what_is_wrong);
fn under_json_clap_usage_errors_are_one_line_naming_what_is_wrong(store: Store) {
    let sh = Shell::on(store);
    let out = sh.run(&["note", "op-1003-charge-order", "--by", "dana", "--json"]);
    assert_json_error(&out, 2);
    let message = out.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("--text <TEXT>"), "{message}");
    assert_eq!(out.stderr.trim_end(), format!("error: {message}"));
    // Without --json clap keeps its own message, usage and all.
    let out = sh.run(&["note", "op-1003-charge-order", "--by", "dana"]);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stdout.is_empty() && out.stderr.contains("Usage:"),
        "{}",
        out.stderr
    );
}
