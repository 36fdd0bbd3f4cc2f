//! The messages a newcomer meets first (SPEC 12, "Messages a newcomer
//! meets"): the workspace named once in `RECON_WORKSPACE`, a mistyped
//! workspace path or action kind named for what it probably is, and help
//! that says what a command does.

use super::Shell;
use crate::support::{dump, run_with_env};

const PREPARE: [&str; 7] = [
    "prepare",
    "--op",
    "op-1",
    "--action",
    "send_email",
    "--payload",
    "{}",
];

/// `RECON_WORKSPACE` stands in for `--workspace` (the console's bare
/// `recon` too); a `--workspace` flag or a database URL wins over it.
#[test]
fn recon_workspace_is_the_default_workspace_and_a_flag_or_a_database_url_wins_over_it() {
    let sh = Shell::with_ledger();
    let ws = sh.ws.to_str().expect("a UTF-8 path");
    let by_variable = [("RECON_WORKSPACE", ws)];
    let out = run_with_env(&PREPARE, None, &by_variable);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let ops = run_with_env(&["ops", "--json"], None, &by_variable);
    assert_eq!(ops.code, Some(0), "{}", ops.stderr);
    assert!(ops.stdout.contains("\"op-1\""), "{}", ops.stdout);

    // The flag wins: an empty workspace of its own lists nothing.
    let other = Shell::with_ledger();
    let flagged = run_with_env(
        &[
            "ops",
            "--json",
            "--workspace",
            other.ws.to_str().expect("UTF-8"),
        ],
        None,
        &by_variable,
    );
    assert_eq!(flagged.code, Some(0), "{}", flagged.stderr);
    assert!(!flagged.stdout.contains("op-1"), "{}", flagged.stdout);

    // A database named by RECON_DATABASE_URL wins too: this one cannot be
    // reached, so the command fails on it (exit 4) rather than reading the
    // workspace.
    let database = run_with_env(
        &["ops", "--json"],
        None,
        &[
            ("RECON_WORKSPACE", ws),
            ("RECON_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none"),
        ],
    );
    assert_eq!(database.code, Some(4), "{}", database.stderr);
    assert!(!database.stdout.contains("op-1"), "{}", database.stdout);

    // Unset, a command that needs a place says which ways there are.
    let none = run_with_env(&["ops"], None, &[]);
    assert_eq!(none.code, Some(2), "{}", none.stderr);
    assert!(none.stderr.contains("RECON_WORKSPACE"), "{}", none.stderr);
}

/// A prepare in a directory that holds no workspace is still refused
/// `no_receiver` (SPEC 8: nothing routes there, and nothing is created),
/// but the message names the path and says to check it, since a mistyped
/// path is likelier than a new workspace.
#[test]
fn a_prepare_in_a_mistyped_workspace_path_is_refused_naming_the_path_and_creates_nothing() {
    let sh = Shell::empty();
    let out = sh.run(&PREPARE);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let path = sh.ws.display().to_string();
    assert!(
        out.stderr
            .contains(&format!("there is no workspace at {path}: check the path")),
        "{}",
        out.stderr
    );
    assert!(!sh.ws.exists(), "a refused prepare created the workspace");
    let json = sh.run(&[&PREPARE[..], &["--json"]].concat()).json();
    assert_eq!(json["error"]["code"], "no_receiver", "{json}");
}

/// A kind one typo away from a routed kind is refused with that kind
/// offered, never with advice to register a receiver for the typo; a kind
/// far from every route still gets the registration hint.
#[test]
fn a_misspelled_action_kind_is_offered_the_nearest_routed_kind_not_a_registration() {
    let sh = Shell::empty();
    sh.ok(&[
        "receivers",
        "add",
        "ledger",
        "--builtin",
        "--actions",
        "send_email,charge_card",
    ]);
    let before = dump(&sh.ws);
    let typo = sh.run(&[
        "prepare",
        "--op",
        "op-1",
        "--action",
        "send_emial",
        "--payload",
        "{}",
    ]);
    assert_eq!(typo.code, Some(3), "{}", typo.stderr);
    assert!(
        typo.stderr.contains("did you mean send_email?"),
        "{}",
        typo.stderr
    );
    assert!(
        !typo.stderr.contains("receivers add"),
        "advised registering a typo: {}",
        typo.stderr
    );
    let far = sh.run(&[
        "prepare",
        "--op",
        "op-1",
        "--action",
        "refund",
        "--payload",
        "{}",
    ]);
    assert_eq!(far.code, Some(3), "{}", far.stderr);
    assert!(
        far.stderr
            .contains("recon receivers add --workspace DIR NAME --actions refund"),
        "{}",
        far.stderr
    );
    assert_eq!(dump(&sh.ws), before, "a refused prepare wrote something");
}

/// `prepare --help` says what prepare does: it routes, and it creates no
/// workspace (it once claimed to create one, and never did).
#[test]
fn prepare_help_says_it_creates_no_workspace() {
    let help = run_with_env(&["prepare", "--help"], None, &[]);
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    assert!(
        !help.stdout.contains("Creates the workspace"),
        "{}",
        help.stdout
    );
    assert!(
        help.stdout.contains("creates no workspace"),
        "{}",
        help.stdout
    );
    assert!(help.stdout.contains("RECON_WORKSPACE"), "{}", help.stdout);
}

/// `receivers add` and `update` warn, on stderr and beside the result, of
/// each `--env` variable not set where recon runs (the adapter would be
/// started without it); a variable that is set draws no warning.
#[test]
fn registering_with_an_unset_env_variable_warns_and_a_set_one_does_not() {
    let sh = Shell::empty();
    let state = sh.ws.with_file_name("mail.json").display().to_string();
    let program = crate::support::adapter_fixture().display().to_string();
    let unset = "RECON_TEST_SURELY_UNSET_VARIABLE";
    let add = sh.run_full(
        &[
            "receivers",
            "add",
            "mail",
            "--actions",
            "post",
            "--env",
            unset,
            "--env",
            "HOME",
            "--",
            &program,
            "--state",
            &state,
        ],
        None,
        &[],
    );
    assert_eq!(add.code, Some(0), "{}", add.stderr);
    let warnings: Vec<&str> = add.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{}", add.stderr);
    assert!(
        warnings[0].starts_with(&format!("warning: --env {unset} is not set here")),
        "{}",
        add.stderr
    );
    let update = sh.run_full(
        &["receivers", "update", "mail", "--env", unset, "--json"],
        None,
        &[(unset, "set now")],
    );
    assert_eq!(update.code, Some(0), "{}", update.stderr);
    assert_eq!(update.stderr, "", "a set variable draws no warning");
    let again = sh.run(&[
        "receivers",
        "update",
        "mail",
        "--timeout-ms",
        "5000",
        "--json",
    ]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert!(again.stderr.contains(unset), "{}", again.stderr);
    assert!(again.json()["name"] == "mail", "{}", again.stdout);
}

/// Text `show` prints every kept line of a failed call's stderr (a
/// traceback's cause is rarely its last line), each escaped; it once
/// printed only the last.
#[test]
fn show_prints_every_kept_stderr_line_of_a_failed_call() {
    let sh = Shell::empty();
    let program = sh.ws.with_file_name("traceback.sh");
    std::fs::write(
        &program,
        "#!/bin/sh\n\
         if [ \"$1\" = describe ]; then\n\
         echo '{\"recon_adapter\":1,\"name\":\"tb\",\"version\":\"1\",\"can_close\":false,\
         \"query\":{\"complete\":false,\"authoritative\":false}}'\n\
         exit 0\nfi\n\
         echo 'Traceback (most recent call last):' >&2\n\
         printf '  File \"ledger.py\", line 3, in apply \\033[31m\\n' >&2\n\
         echo 'PermissionError: the ledger is read-only' >&2\n\
         exit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = program.display().to_string();
    sh.ok(&[
        "receivers",
        "add",
        "tb",
        "--actions",
        "post",
        "--",
        &program,
    ]);
    sh.ok(&[
        "prepare",
        "--op",
        "op-1",
        "--action",
        "post",
        "--payload",
        "{}",
    ]);
    sh.ok(&["dispatch", "op-1"]);
    let text = sh.ok(&["show", "op-1"]).stdout;
    let at = text
        .find("  stderr: Traceback (most recent call last):")
        .expect(&text);
    let lines: Vec<&str> = text[at..].lines().take(3).collect();
    assert_eq!(
        lines,
        [
            "  stderr: Traceback (most recent call last):",
            r#"            File "ledger.py", line 3, in apply \x1b[31m"#,
            "          PermissionError: the ledger is read-only",
        ],
        "{text}"
    );
}

/// `docs/drills.md` names every crash point recon has, and its two main
/// drills do what it says behind a registered adapter (not only the
/// built-in ledger): after `dispatch.after_receipt_read` the operation is
/// unknown and the receiver holds the effect; after
/// `dispatch.after_unknown_commit` it is unknown and holds none.
#[test]
fn the_drills_doc_names_every_crash_point_and_its_drills_work_behind_an_adapter() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/drills.md"),
    )
    .expect("docs/drills.md");
    for point in recon::faults::CrashPoint::ALL {
        assert!(
            doc.contains(&format!("`{}`", point.name())),
            "docs/drills.md does not name {}",
            point.name()
        );
    }
    let sh = Shell::empty();
    let state = sh.ws.with_file_name("mail.json").display().to_string();
    let program = crate::support::adapter_fixture().display().to_string();
    sh.ok(&[
        "receivers",
        "add",
        "mail",
        "--actions",
        "post",
        "--",
        &program,
        "--state",
        &state,
    ]);
    for (op, point, matches) in [
        ("op-1", "dispatch.after_receipt_read", 1),
        ("op-2", "dispatch.after_unknown_commit", 0),
    ] {
        sh.ok(&[
            "prepare",
            "--op",
            op,
            "--action",
            "post",
            "--payload",
            "{\"n\":1}",
        ]);
        let out = sh.run_full(&["dispatch", op], None, &[("RECON_CRASH_POINT", point)]);
        assert_eq!(out.code, Some(86), "{point}: {}", out.stderr);
        let shown = sh.json(&["show", op]);
        assert_eq!(shown["operation"]["state"], "unknown", "{point}: {shown}");
        let read = sh.json(&["snapshot", op]);
        assert_eq!(
            read["snapshot"]["matches"].as_array().map(Vec::len),
            Some(matches),
            "{point}: {read}"
        );
        let again = sh.run(&["dispatch", op]);
        assert_eq!(again.code, Some(3), "{point}: {}", again.stderr);
        assert!(again.stderr.contains("blind_retry"), "{}", again.stderr);
    }
}
