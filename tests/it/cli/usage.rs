//! Usage errors (exit 2): bad flags, payloads that are not JSON, malformed
//! ids and versions, `--close` without `--authorized-by`. They are caught
//! before any database is opened, so nothing is created or written.

use super::Shell;
use crate::stores::{on_both_stores, Store};
use crate::support::run;
use recon::receiver::Fault;

/// Invocations that are wrong in themselves, whatever the workspace holds.
fn bad_invocations() -> Vec<Vec<&'static str>> {
    [
        payload_invocations(),
        name_invocations(),
        number_invocations(),
        receivers_invocations(),
    ]
    .concat()
}

fn reconcile(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = vec![
        "reconcile",
        "op-1003-charge-order",
        "--reviewer",
        "dana",
        "--decision",
        "confirmed",
    ];
    args.extend(extra);
    args
}

fn approve(version: &'static str, payload: &'static str) -> Vec<&'static str> {
    vec![
        "approve-compensation",
        "op-1010-annual-plan",
        "--effect",
        "fx-000011",
        "--approver",
        "lee",
        "--expected-version",
        version,
        "--compensation-op",
        "op-x",
        "--action",
        "refund_card",
        "--payload",
        payload,
    ]
}

fn payload_invocations() -> Vec<Vec<&'static str>> {
    vec![
        // Payloads that are not JSON, or cannot be read.
        vec![
            "prepare",
            "--op",
            "op-a",
            "--action",
            "a",
            "--payload",
            "not json",
        ],
        vec![
            "prepare",
            "--op",
            "op-a",
            "--action",
            "a",
            "--payload",
            r#"{"a":"#,
        ],
        vec!["prepare", "--op", "op-a", "--action", "a", "--payload", ""],
        vec![
            "prepare",
            "--op",
            "op-a",
            "--action",
            "a",
            "--payload",
            r#"{"a":{"b":1,"b":1}}"#,
        ],
        vec![
            "prepare",
            "--op",
            "op-a",
            "--action",
            "a",
            "--payload",
            "@/nonexistent/recon/payload.json",
        ],
        vec!["prepare", "--op", "op-a", "--action", "a"],
        reconcile(&["--expected-version", "2", "--payload", "nope"]),
        approve("3", "nope"),
        vec![
            "receiver",
            "apply",
            "--op",
            "op-a",
            "--action",
            "a",
            "--payload",
            "{oops}",
        ],
    ]
}

fn name_invocations() -> Vec<Vec<&'static str>> {
    vec![
        // Malformed ids and names.
        vec![
            "prepare",
            "--op",
            "op a",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
        vec!["prepare", "--op", "", "--action", "a", "--payload", "{}"],
        vec![
            "prepare",
            "--op",
            "op-\u{1b}[2J",
            "--action",
            "a",
            "--payload",
            "{}",
        ],
        vec![
            "prepare",
            "--op",
            "op-a",
            "--action",
            "send email",
            "--payload",
            "{}",
        ],
        vec![
            "reconcile",
            "op-1003-charge-order",
            "--reviewer",
            "rosa\u{7}",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
    ]
}

/// Versions, closes, enumerations and counts.
fn number_invocations() -> Vec<Vec<&'static str>> {
    vec![
        // Versions: negative, zero, not a number.
        reconcile(&["--expected-version", "-1"]),
        reconcile(&["--expected-version", "0"]),
        reconcile(&["--expected-version", "abc"]),
        reconcile(&["--expected-version", "2.5"]),
        reconcile(&[]),
        approve("-3", "{}"),
        approve("three", "{}"),
        // An authorizer needs a close (a close needs its authorizer on a
        // workspace directory: `nameless_invocations`).
        vec![
            "snapshot",
            "op-1004-support-ticket",
            "--authorized-by",
            "dana",
        ],
        // Enumerations and counts.
        reconcile(&["--expected-version", "2", "--decision", "maybe"]),
        vec!["dispatch", "op-1012-onboarding-call", "--fault", "explode"],
        vec!["ops", "--state", "lost"],
        vec!["ops", "--limit", "-5"],
        vec!["ops", "--limit", "many"],
        vec!["demo", "--ops", "-1"],
        vec!["demo", "--ops", "lots"],
        vec!["demo", "--ops", "1000001"],
        vec!["frobnicate"],
    ]
}

fn receivers_invocations() -> Vec<Vec<&'static str>> {
    vec![
        // Receivers: names, action kinds, timeouts and the program.
        vec![
            "receivers",
            "add",
            "Mail",
            "--actions",
            "x",
            "--",
            "/bin/true",
        ],
        vec![
            "receivers",
            "add",
            "-mail",
            "--actions",
            "x",
            "--",
            "/bin/true",
        ],
        vec!["receivers", "add", "mail", "--", "/bin/true"],
        vec!["receivers", "add", "mail", "--actions", "x"],
        vec!["receivers", "add", "mail", "--actions", "x", "--", ""],
        vec![
            "receivers",
            "add",
            "mail",
            "--actions",
            "send email",
            "--",
            "/bin/true",
        ],
        vec![
            "receivers",
            "add",
            "mail",
            "--actions",
            "x,,y",
            "--",
            "/bin/true",
        ],
        vec![
            "receivers",
            "add",
            "mail",
            "--actions",
            "x,x",
            "--",
            "/bin/true",
        ],
        vec![
            "receivers",
            "add",
            "mail",
            "--actions",
            "x",
            "--timeout-ms",
            "0",
            "--",
            "/bin/true",
        ],
        vec![
            "receivers",
            "add",
            "mail",
            "--actions",
            "x",
            "--timeout-ms",
            "soon",
            "--",
            "/bin/true",
        ],
        vec!["receivers", "check", "Mail"],
        vec!["receivers", "remove", "a b"],
        vec!["receivers", "list", "extra"],
        vec!["receivers", "frobnicate"],
    ]
}

/// An outbox on `store` in use: an operation confirmed, one lost before
/// the receiver wrote, one prepared.
fn in_use(store: Store) -> Shell {
    let sh = Shell::on(store);
    for op in ["op-1", "op-2", "op-3"] {
        sh.ok(&["prepare", "--op", op, "--action", "pay", "--payload", "{}"]);
    }
    sh.ok(&["dispatch", "op-1"]);
    sh.faulted(&["dispatch", "op-2"], Fault::CrashBeforeCommit);
    sh
}

/// Invocations that leave out a person's name, each with the flag left
/// out: usage errors on a workspace directory, where no database login
/// stands in for the name (in team mode one does: `pg_store::identity`).
fn nameless_invocations() -> Vec<(&'static str, Vec<&'static str>)> {
    let op = "op-1003-charge-order";
    let mut approve_unnamed = approve("3", "{}");
    let at = approve_unnamed
        .iter()
        .position(|a| *a == "--approver")
        .expect("--approver");
    approve_unnamed.drain(at..at + 2);
    vec![
        (
            "--reviewer",
            vec![
                "reconcile",
                op,
                "--decision",
                "confirmed",
                "--expected-version",
                "2",
            ],
        ),
        ("--approver", approve_unnamed),
        ("--by", vec!["note", op, "--text", "a note"]),
        ("--by", vec!["escalate", op, "--reason", "why"]),
        ("--by", vec!["deescalate", op, "--reason", "why"]),
        ("--by", vec!["acknowledge", op, "--reason", "why"]),
        ("--by", vec!["observe", op]),
        (
            "--by",
            vec!["resolve", "--policy", "provable", "--authorized-by", "dana"],
        ),
        (
            "--authorized-by",
            vec!["resolve", "--policy", "provable", "--by", "dana"],
        ),
        ("--authorized-by", vec!["snapshot", op, "--close"]),
        (
            "--authorized-by",
            reconcile(&["--expected-version", "2", "--close"]),
        ),
    ]
}

#[test]
fn on_a_workspace_the_reviewer_is_still_required() {
    let missing = Shell::empty();
    let existing = in_use(Store::Sqlite);
    let before = existing.dump();
    for (flag, args) in nameless_invocations() {
        let out = missing.run(&args);
        assert_eq!(out.code, Some(2), "recon {args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("{flag} NAME is required")),
            "recon {args:?}: {}",
            out.stderr
        );
        assert!(
            missing.files().is_none(),
            "recon {args:?} created the workspace"
        );
        let mut json = args.clone();
        json.push("--json");
        let out = existing.run(&json);
        crate::cli::assert_fails(&out, 2);
        assert_eq!(
            existing.dump(),
            before,
            "recon {args:?} changed the databases"
        );
    }
}

// SQLite only: it is about not creating a workspace directory.
#[test]
fn usage_errors_exit_2_and_create_no_workspace() {
    let sh = Shell::empty();
    for args in bad_invocations() {
        let out = sh.run(&args);
        assert_eq!(out.code, Some(2), "recon {args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "recon {args:?}: {}", out.stdout);
        assert!(!out.stderr.is_empty());
        assert!(sh.files().is_none(), "recon {args:?} created the workspace");
    }
}

on_both_stores!(usage_errors_leave_an_existing_workspace_unchanged);
fn usage_errors_leave_an_existing_workspace_unchanged(store: Store) {
    let sh = in_use(store);
    let before = sh.dump();
    for args in bad_invocations() {
        let out = sh.run(&args);
        assert_eq!(out.code, Some(2), "recon {args:?}: {}", out.stderr);
        assert_eq!(sh.dump(), before, "recon {args:?} changed the databases");
    }
}

on_both_stores!(our_own_usage_errors_are_one_escaped_line);
fn our_own_usage_errors_are_one_escaped_line(store: Store) {
    let sh = Shell::on(store);
    let out = sh.run(&[
        "prepare",
        "--op",
        "op-\u{1b}x",
        "--action",
        "a",
        "--payload",
        "{}",
    ]);
    assert_eq!(out.code, Some(2));
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        !out.stderr.contains('\u{1b}') && out.stderr.contains("\\x1b"),
        "{}",
        out.stderr
    );
    let out = sh.run(&[
        "prepare",
        "--op",
        "op-a",
        "--action",
        "a",
        "--payload",
        "nope",
    ]);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("error: --payload is not JSON"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_command_without_a_workspace_is_a_usage_error() {
    for args in [
        &["ops"][..],
        &["show", "op-1"],
        &["demo"],
        &["prepare", "--op", "a", "--action", "a", "--payload", "{}"],
    ] {
        let out = run(args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("--workspace"), "{}", out.stderr);
    }
}

on_both_stores!(a_malformed_busy_timeout_is_a_usage_error);
fn a_malformed_busy_timeout_is_a_usage_error(store: Store) {
    let sh = in_use(store);
    let out = sh.run_full(&["ops"], None, &[("RECON_BUSY_TIMEOUT_MS", "soon")]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("RECON_BUSY_TIMEOUT_MS"),
        "{}",
        out.stderr
    );
}

on_both_stores!(console_flags_with_a_command_are_usage_errors);
fn console_flags_with_a_command_are_usage_errors(store: Store) {
    let sh = in_use(store);
    let before = sh.dump();
    let place = sh.place();
    // `--check` makes its own workspace directories, so on a database
    // the first thing wrong with it is that it takes no URL.
    let check = match store {
        Store::Sqlite => "--check runs on its own",
        Store::Postgres => "--check runs its experiment in workspace directories of its own",
    };
    for (flags, says) in [
        (&["--reviewer", "dana"][..], "console"),
        (&["--check"], check),
    ] {
        let mut args = flags.to_vec();
        args.extend(place.iter().map(String::as_str));
        args.push("ops");
        let out = run(&args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    assert_eq!(sh.dump(), before);
}

#[test]
fn a_payload_written_as_a_path_without_at_is_told_to_write_at_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("p.json"), "{}").expect("write p.json");
    let ws = dir.path().join("ws").display().to_string();
    let prepare = |payload: &str| {
        let mut command = std::process::Command::new(crate::support::recon_bin());
        command.current_dir(dir.path()).args([
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "op-1",
            "--action",
            "send_email",
            "--payload",
            payload,
        ]);
        let out = crate::support::output_of(command, None);
        assert_eq!(out.status.code(), Some(2), "{payload}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for (payload, hinted) in [
        ("p.json", true),
        ("./letters/p.json", true),
        ("/var/lib/none.json", true),
        ("~/p.json", true),
        ("{\"to\": ", false),
        ("not json", false),
    ] {
        let stderr = prepare(payload);
        assert_eq!(
            stderr.contains(&format!(
                "; to read a file, write @PATH (--payload @{payload})"
            )),
            hinted,
            "{payload}: {stderr}"
        );
    }
}

#[test]
fn receivers_add_without_the_separator_is_told_where_the_program_goes() {
    let sh = Shell::empty();
    let tip = "the program and its arguments go after `--`: recon receivers add NAME --actions \
               KIND -- PROGRAM [ARG...]";
    let args = ["receivers", "add", "mail", "--actions", "x", "/bin/adapter"];
    let out = sh.run(&args);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("tip: {tip}")),
        "{}",
        out.stderr
    );
    let out = sh.run(&[&args[..], &["--json"]].concat());
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let message = out.json()["error"]["message"].as_str().map(str::to_string);
    assert!(message.is_some_and(|m| m.ends_with(tip)), "{}", out.stdout);
    // With the separator, an unknown flag is not this slip.
    let out = sh.run(&[
        "receivers",
        "add",
        "mail",
        "--actions",
        "x",
        "--nope",
        "--",
        "/bin/a",
    ]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(!out.stderr.contains(tip), "{}", out.stderr);
    assert_eq!(sh.files(), None, "nothing created");
}

on_both_stores!(a_program_that_is_not_executable_is_named_so_with_chmod);
fn a_program_that_is_not_executable_is_named_so_with_chmod(store: Store) {
    use std::os::unix::fs::PermissionsExt;
    let sh = Shell::on(store);
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("adapter.sh");
    std::fs::write(&script, "#!/bin/sh\n").expect("write the script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let program = script.display().to_string();
    let out = sh.run(&["receivers", "add", "mail", "--actions", "x", "--", &program]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "cannot start {program}: it is not executable (chmod +x {program})"
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn approve_compensation_help_for_effect_assumes_no_receivers_id_scheme() {
    let help = run(&["approve-compensation", "--help"], None).stdout;
    let effect = help
        .lines()
        .find(|l| l.trim_start().starts_with("--effect <EFFECT>"))
        .unwrap_or_else(|| panic!("--effect in {help}"));
    assert!(!effect.contains("fx-"), "{effect}");
    assert!(effect.contains("recon show ID"), "{effect}");
}

/// Every command that takes an op id, with `ID` where it goes.
const TAKES_AN_OP_ID: &[&[&str]] = &[
    &[
        "prepare",
        "--op",
        "ID",
        "--action",
        "pay",
        "--payload",
        "{}",
    ],
    &["dispatch", "ID"],
    &["show", "ID"],
    &["ledger", "--op", "ID"],
    &["snapshot", "ID"],
    &["snapshot", "ID", "--close", "--authorized-by", "dana"],
    &[
        "reconcile",
        "ID",
        "--reviewer",
        "dana",
        "--decision",
        "confirmed",
        "--expected-version",
        "2",
    ],
    &[
        "approve-compensation",
        "ID",
        "--effect",
        "fx-000001",
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "undo-1",
        "--action",
        "refund",
        "--payload",
        "{}",
    ],
    &[
        "approve-compensation",
        "op-1",
        "--effect",
        "fx-000001",
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "ID",
        "--action",
        "refund",
        "--payload",
        "{}",
    ],
    &["observe", "ID", "--by", "dana"],
    &["observe", "op-1", "ID", "--by", "dana"],
    &["note", "ID", "--by", "dana", "--text", "a note"],
    &["escalate", "ID", "--by", "dana", "--reason", "why"],
    &["deescalate", "ID", "--by", "dana", "--reason", "why"],
    &[
        "receiver",
        "apply",
        "--op",
        "ID",
        "--action",
        "pay",
        "--payload",
        "{}",
    ],
];

on_both_stores!(a_malformed_op_id_is_a_usage_error_in_every_command_that_takes_one);
fn a_malformed_op_id_is_a_usage_error_in_every_command_that_takes_one(store: Store) {
    let sh = Shell::on(store);
    sh.prepare("op-1", "pay", "{}");
    let before = sh.dump();
    let long = "o".repeat(201);
    for bad in ["", "op 1", "op-\u{1b}[2J", "op-\u{202e}1", long.as_str()] {
        // The built-in ledger's own commands work on a directory only: on
        // a database they are refused for that first.
        let commands = TAKES_AN_OP_ID
            .iter()
            .filter(|command| store == Store::Sqlite || command[0] != "receiver");
        for command in commands {
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "ID" { bad } else { a })
                .collect();
            let out = sh.run(&args);
            assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
            assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
            assert!(out.stderr.contains("op id"), "{args:?}: {}", out.stderr);
            assert!(
                !out.stderr.contains('\u{1b}'),
                "{args:?}: escaped: {}",
                out.stderr
            );
        }
    }
    assert_eq!(sh.dump(), before, "nothing written");
}
