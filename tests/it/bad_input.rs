//! Malformed input at the command line and at the library: each case has its
//! expected exit code (or refusal) and message, and leaves both databases
//! exactly as they were. Error output must stay one clean line: no raw
//! control characters, no panic, nothing on stdout.

use crate::invariants::{assert_invariants, none};
use crate::support::{dump, export_then_verify_against, output_of, recon_bin, run, Lab};
use recon::dispatch::DispatchOptions;
use recon::domain::EffectRequest;
use recon::domain::{CompensationRequest, Decision, Review, Snapshot};
use recon::receiver::Fault;
use recon::receiver::{Builtin, Receiver};
use recon::workspace::ReconcileRequest;
use recon::OpenOptions;
use recon::{Error, Workspace};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn a_payload_at_the_nesting_limit_goes_all_the_way_and_one_level_more_is_a_usage_error() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let limit = recon::cli::MAX_PAYLOAD_DEPTH;
    let deep = nested(limit);
    let prepared = run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "deep",
            "--action",
            "pay",
            "--payload",
            &deep,
        ],
        None,
    );
    assert_eq!(prepared.code, Some(0), "{}", prepared.stderr);
    let dispatched = run(&["dispatch", "--workspace", &ws, "deep", "--json"], None);
    assert_eq!(
        dispatched.json()["outcome"],
        "receipt",
        "{}",
        dispatched.stderr
    );
    let shown = run(&["show", "--workspace", &ws, "deep", "--json"], None);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert_eq!(shown.json()["evidence"].as_array().map(Vec::len), Some(1));
    let (_, verified) = export_then_verify_against(lab.path(), &[]);
    assert_eq!(verified.code, Some(0), "{}", verified.stdout);

    let before = dump(lab.path());
    let deeper = nested(limit + 1);
    let refused = run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "deeper",
            "--action",
            "pay",
            "--payload",
            &deeper,
        ],
        None,
    );
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("nested deeper than"),
        "{}",
        refused.stderr
    );
    assert_eq!(dump(lab.path()), before);
}

// ---------------------------------------------------------------------------
// The command-line table.

/// One malformed command line and what it must produce.
struct Case {
    name: &'static str,
    args: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    env: Vec<(&'static str, String)>,
    code: i32,
    message: String,
}

fn case(name: &'static str, args: &[&str], code: i32, message: &str) -> Case {
    Case {
        name,
        args: args.iter().map(OsString::from).collect(),
        stdin: None,
        env: Vec::new(),
        code,
        message: message.to_string(),
    }
}

impl Case {
    fn stdin(mut self, bytes: Vec<u8>) -> Case {
        self.stdin = Some(bytes);
        self
    }

    fn env(mut self, key: &'static str, value: &str) -> Case {
        self.env.push((key, value.to_string()));
        self
    }

    /// Replaces the argument equal to `marker` with raw bytes.
    fn raw(mut self, marker: &str, bytes: &[u8]) -> Case {
        for arg in &mut self.args {
            if arg == marker {
                *arg = OsString::from_vec(bytes.to_vec());
            }
        }
        self
    }
}

struct Output {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

fn run_os(
    args: &[OsString],
    stdin: Option<&[u8]>,
    env: &[(&str, String)],
    as_nobody: bool,
) -> Output {
    let mut command = Command::new(recon_bin());
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    if as_nobody {
        command.uid(65534).gid(65534);
    }
    // A 3 MB payload on stdin is larger than a pipe; output_of copes.
    let out = output_of(command, stdin);
    Output {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[track_caller]
fn check(case: &Case, out: &Output) {
    let name = case.name;
    assert_eq!(
        out.code,
        Some(case.code),
        "{name}: exit code; stderr {}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&case.message),
        "{name}: expected {:?} in {:?}",
        case.message,
        out.stderr
    );
    assert!(
        out.stdout.is_empty(),
        "{name}: printed {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("RUST_BACKTRACE"),
        "{name}: {}",
        out.stderr
    );
    let raw_control = out
        .stderr
        .trim_end_matches('\n')
        .chars()
        .any(|c| c.is_control() && c != '\n');
    assert!(
        !raw_control,
        "{name}: raw control characters reach the terminal: {:?}",
        out.stderr
    );
}

/// A workspace with one op in each interesting state: `paid` confirmed by
/// its receipt, `lost` unknown with one effect, `gone` unknown with none,
/// and `closed` not_applied behind the close barrier.
fn table_lab() -> Lab {
    let mut lab = Lab::new();
    let p = json!({"amount": 10});
    for (op, fault) in [
        ("paid", None),
        ("lost", Some(Fault::CrashAfterCommit)),
        ("gone", Some(Fault::CrashBeforeCommit)),
        ("closed", Some(Fault::CrashBeforeCommit)),
    ] {
        lab.dispatched(op, "pay", &p, fault);
    }
    lab.ws
        .reconcile(&ReconcileRequest {
            keep: None,
            op_id: "closed",
            reviewer: "Ann",
            decision: Decision::NotApplied,
            expected_version: 2,
            payload: None,
            close_authorized_by: Some("Ann"),
        })
        .unwrap();
    lab
}

fn cli_cases(ws: &str, scratch: &Path) -> Vec<Case> {
    let limit = recon::cli::MAX_PAYLOAD_BYTES;
    let big_json = format!("{{\"blob\":\"{}\"}}", "x".repeat(limit - 11));
    assert_eq!(big_json.len(), limit);
    let too_big = scratch.join("too-big.json");
    std::fs::write(&too_big, format!("\"{}\"", "y".repeat(limit))).unwrap();
    let too_big = format!("@{}", too_big.display());
    let not_utf8 = scratch.join("latin1.json");
    std::fs::write(&not_utf8, b"{\"name\": \"caf\xe9\"}").unwrap();
    let not_utf8 = format!("@{}", not_utf8.display());
    let missing = format!("@{}", scratch.join("no-such-file").display());
    let a_dir = format!("@{}", scratch.display());
    let long_id = "x".repeat(201);
    let very_deep = nested(50_000);
    let just_too_deep = nested(65);
    let prepare = |op: &str, payload: &str| -> Vec<String> {
        [
            "prepare",
            "--workspace",
            ws,
            "--op",
            op,
            "--action",
            "pay",
            "--payload",
            payload,
        ]
        .map(String::from)
        .to_vec()
    };
    let reconcile = |op: &str, reviewer: &str, version: &str| -> Vec<String> {
        [
            "reconcile",
            "--workspace",
            ws,
            op,
            "--reviewer",
            reviewer,
            "--decision",
            "confirmed",
        ]
        .into_iter()
        .chain(["--expected-version", version])
        .map(String::from)
        .collect()
    };
    let approve = |effect: &str, approver: &str, version: &str| -> Vec<String> {
        [
            "approve-compensation",
            "--workspace",
            ws,
            "paid",
            "--effect",
            effect,
        ]
        .into_iter()
        .chain(["--approver", approver, "--expected-version", version])
        .chain([
            "--compensation-op",
            "refund-1",
            "--action",
            "refund",
            "--payload",
            "{}",
        ])
        .map(String::from)
        .collect()
    };
    let c = |name, args: Vec<String>, code, message: &str| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        case(name, &refs, code, message)
    };
    let with = |mut args: Vec<String>, extra: &[&str]| {
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    vec![
        // Identifiers: control characters, whitespace, emptiness, length, bytes.
        c(
            "escape sequence in an op id",
            prepare("op\x1b[31m", "{}"),
            2,
            "contains \\x1b",
        ),
        c(
            "newline in an op id",
            prepare("op\nid", "{}"),
            2,
            "contains \\n",
        ),
        c("space in an op id", prepare("op id", "{}"), 2, "contains"),
        c("empty op id", prepare("", "{}"), 2, "op id is empty"),
        c(
            "201-character op id",
            prepare(&long_id, "{}"),
            2,
            "longer than 200",
        ),
        c(
            "bidi override in an op id",
            prepare("pay\u{202e}lapyap", "{}"),
            2,
            "contains \\u{202e}",
        ),
        c(
            "DEL character in an action kind",
            with(
                ["prepare", "--workspace", ws, "--op", "x", "--payload", "{}"]
                    .map(String::from)
                    .to_vec(),
                &["--action", "pa\u{7f}y"],
            ),
            2,
            "contains \\x7f",
        ),
        c("non-UTF-8 op id", prepare("RAW", "{}"), 2, "invalid UTF-8").raw("RAW", b"op-\xff\xfe"),
        c(
            "non-UTF-8 reviewer",
            reconcile("lost", "RAW", "2"),
            2,
            "invalid UTF-8",
        )
        .raw("RAW", b"Ann\xc3"),
        c(
            "escape sequence in a reviewer",
            reconcile("lost", "Ann\x1b]0;pwned\x07", "2"),
            2,
            "contains control characters",
        ),
        c(
            "blank reviewer",
            reconcile("lost", "   ", "2"),
            3,
            "refused: empty_reviewer",
        ),
        c(
            "empty reviewer",
            reconcile("lost", "", "2"),
            3,
            "refused: empty_reviewer",
        ),
        c(
            "ideographic-space approver",
            approve("fx-000001", "\u{3000}", "3"),
            3,
            "refused: empty_reviewer",
        ),
        c(
            "blank close authorizer",
            with(
                ["snapshot", "--workspace", ws, "gone", "--close"]
                    .map(String::from)
                    .to_vec(),
                &["--authorized-by", " "],
            ),
            3,
            "refused: empty_reviewer",
        ),
        c(
            "--close without --authorized-by",
            ["snapshot", "--workspace", ws, "gone", "--close"]
                .map(String::from)
                .to_vec(),
            2,
            "--authorized-by",
        ),
        c(
            "a value clap refuses, with control and bidi characters",
            ["ops", "--workspace", ws, "--verdict", "dup\r\u{202e}X"]
                .map(String::from)
                .to_vec(),
            2,
            "dup\\r\\u{202e}X",
        ),
        c(
            "op id with an escape sequence",
            ["show", "--workspace", ws, "ghost\x1b[2J"]
                .map(String::from)
                .to_vec(),
            2,
            "op id ghost\\x1b[2J contains \\x1b",
        ),
        c(
            "effect id with control characters",
            approve("fx-\x1b[1m01", "Ann", "3"),
            2,
            "effect id fx-\\x1b[1m01 contains \\x1b",
        ),
        // Payloads.
        c(
            "payload that is not JSON",
            prepare("new", "{amount: 10}"),
            2,
            "--payload is not JSON",
        ),
        c(
            "payload with a lone surrogate",
            prepare("new", r#""\ud800""#),
            2,
            "--payload is not JSON",
        ),
        c(
            "payload NaN",
            prepare("new", "NaN"),
            2,
            "--payload is not JSON",
        ),
        c(
            "empty payload",
            prepare("new", ""),
            2,
            "--payload is not JSON",
        ),
        c(
            "payload nested 50000 deep",
            prepare("new", &very_deep),
            2,
            "--payload is not JSON",
        ),
        c(
            "payload with a duplicate key",
            prepare("new", r#"{"to":"a","to":"b"}"#),
            2,
            "--payload has the key \"to\" twice in the top-level object",
        ),
        c(
            "payload nested 65 deep",
            prepare("new", &just_too_deep),
            2,
            "nested deeper than 64",
        ),
        c(
            "payload file over the limit",
            prepare("new", &too_big),
            2,
            &format!("larger than {limit} bytes"),
        ),
        c(
            "payload at the limit on stdin for an existing op",
            prepare("paid", "@-"),
            3,
            "refused: duplicate_operation",
        )
        .stdin(big_json.clone().into_bytes()),
        c(
            "payload scope at the limit on stdin",
            with(reconcile("lost", "Ann", "2"), &["--payload", "@-"]),
            3,
            "refused: scope_mismatch",
        )
        .stdin(big_json.into_bytes()),
        c(
            "payload file missing",
            prepare("new", &missing),
            2,
            "cannot read payload file",
        ),
        c(
            "payload file is a directory",
            prepare("new", &a_dir),
            2,
            "cannot read payload",
        ),
        c(
            "payload file not UTF-8",
            prepare("new", &not_utf8),
            2,
            "cannot read payload",
        ),
        // SQL-looking text is data, never SQL.
        c(
            "SQL in an op id",
            [
                "dispatch",
                "--workspace",
                ws,
                "x');DROP/**/TABLE/**/operations;--",
            ]
            .map(String::from)
            .to_vec(),
            3,
            "refused: unknown_operation",
        ),
        c(
            "SQL in a reviewer name",
            reconcile("lost", "Robert'); DROP TABLE evidence;--", "1"),
            3,
            "refused: stale_version",
        ),
        c(
            "SQL in a payload scope",
            with(
                reconcile("lost", "Ann", "2"),
                &["--payload", r#"{"amount":"10'); DELETE FROM effects;--"}"#],
            ),
            3,
            "refused: scope_mismatch",
        ),
        c(
            "SQL in a state filter",
            ["ops", "--workspace", ws, "--state", "unknown' OR '1'='1"]
                .map(String::from)
                .to_vec(),
            2,
            "invalid value",
        ),
        // Versions.
        c(
            "version 0",
            reconcile("lost", "Ann", "0"),
            2,
            "invalid value",
        ),
        c(
            "negative version",
            reconcile("lost", "Ann", "-1"),
            2,
            "unexpected argument",
        ),
        c(
            "version past i64",
            reconcile("lost", "Ann", "99999999999999999999"),
            2,
            "invalid value",
        ),
        c(
            "version i64::MAX",
            reconcile("lost", "Ann", "9223372036854775807"),
            3,
            "refused: stale_version: expected version 9223372036854775807, found 2",
        ),
        c(
            "version in words",
            reconcile("lost", "Ann", "two"),
            2,
            "invalid value",
        ),
        c(
            "approval at i64::MAX",
            approve("fx-000001", "Ann", "9223372036854775807"),
            3,
            "refused: stale_version",
        ),
        // Other flags.
        c(
            "unknown decision",
            [
                "reconcile",
                "--workspace",
                ws,
                "lost",
                "--reviewer",
                "Ann",
                "--decision",
                "maybe",
                "--expected-version",
                "2",
            ]
            .map(String::from)
            .to_vec(),
            2,
            "invalid value",
        ),
        c(
            "unknown fault",
            ["dispatch", "--workspace", ws, "gone", "--fault", "explode"]
                .map(String::from)
                .to_vec(),
            2,
            "invalid value",
        ),
        c(
            "negative limit",
            ["ops", "--workspace", ws, "--limit", "-1"]
                .map(String::from)
                .to_vec(),
            2,
            "unexpected argument",
        ),
        c(
            "busy timeout in words",
            ["ops", "--workspace", ws].map(String::from).to_vec(),
            2,
            "RECON_BUSY_TIMEOUT_MS must be a whole number of milliseconds",
        )
        .env("RECON_BUSY_TIMEOUT_MS", "soon"),
        c(
            "no --workspace",
            ["prepare", "--op", "x", "--action", "pay", "--payload", "{}"]
                .map(String::from)
                .to_vec(),
            2,
            "--workspace DIR or --database URL (or RECON_WORKSPACE or RECON_DATABASE_URL) is required",
        ),
        c(
            "verify against a file that is not an export",
            ["verify", "--workspace", ws, "--against", &too_big[1..]]
                .map(String::from)
                .to_vec(),
            2,
            "is not an exported journal entry",
        ),
        // Absurd but well-formed requests.
        c(
            "dispatch of a confirmed op",
            ["dispatch", "--workspace", ws, "paid"]
                .map(String::from)
                .to_vec(),
            3,
            "refused: blind_retry",
        ),
        c(
            "receiver write for a closed op",
            [
                "receiver",
                "apply",
                "--workspace",
                ws,
                "--op",
                "closed",
                "--action",
                "pay",
                "--payload",
                r#"{"amount":10}"#,
            ]
            .map(String::from)
            .to_vec(),
            3,
            "refused: operation_closed",
        ),
        c(
            "not_applied on an open empty read",
            [
                "reconcile",
                "--workspace",
                ws,
                "gone",
                "--reviewer",
                "Ann",
                "--decision",
                "not_applied",
                "--expected-version",
                "2",
            ]
            .map(String::from)
            .to_vec(),
            3,
            "refused: unsupported_verdict",
        ),
    ]
}

#[test]
fn malformed_command_lines_are_refused_with_their_exit_code_and_change_nothing() {
    let lab = table_lab();
    let scratch = tempfile::tempdir().unwrap();
    let cases = cli_cases(&lab.path_str(), scratch.path());
    assert!(cases.len() >= 25);
    let before = dump(lab.path());
    for case in &cases {
        let out = run_os(&case.args, case.stdin.as_deref(), &case.env, false);
        check(case, &out);
        assert_eq!(
            dump(lab.path()),
            before,
            "{}: the databases changed",
            case.name
        );
    }
    assert_invariants(lab.path(), &none());
    eprintln!("bad input: {} command lines", cases.len());
}

// ---------------------------------------------------------------------------
// The library.

type LibraryCase = (
    &'static str,
    fn(&mut Workspace) -> Result<(), Error>,
    &'static str,
);

fn library_cases() -> Vec<LibraryCase> {
    fn reconcile(
        ws: &mut Workspace,
        reviewer: &str,
        version: i64,
        close: Option<&str>,
        payload: Option<&Value>,
    ) -> Result<(), Error> {
        ws.reconcile(&ReconcileRequest {
            keep: None,
            op_id: "gone",
            reviewer,
            decision: Decision::NotApplied,
            expected_version: version,
            payload,
            close_authorized_by: close,
        })
        .map(drop)
    }
    fn approve(ws: &mut Workspace, approver: &str, effect: &str, comp: &str) -> Result<(), Error> {
        ws.approve_compensation(&CompensationRequest {
            reason: None,
            original_op_id: "paid",
            effect_id: effect,
            approver,
            expected_version: 3,
            compensation_op_id: comp,
            action_kind: "refund",
            payload: &json!({}),
        })
        .map(drop)
    }
    vec![
        (
            "tab-and-newline reviewer",
            |ws| reconcile(ws, "\t\n", 2, None, None),
            "empty_reviewer",
        ),
        // The close is refused too: nothing may close without a named authorizer.
        (
            "blank close authorizer in reconcile",
            |ws| reconcile(ws, "Ann", 2, Some(" "), None),
            "empty_reviewer",
        ),
        (
            "empty close authorizer in snapshot",
            |ws| ws.snapshot("gone", Some("")).map(drop),
            "empty_reviewer",
        ),
        (
            "empty approver",
            |ws| approve(ws, "", "fx-000001", "refund-1"),
            "empty_reviewer",
        ),
        (
            "version i64::MIN",
            |ws| reconcile(ws, "Ann", i64::MIN, Some("Ann"), None),
            "stale_version",
        ),
        (
            "version 0",
            |ws| reconcile(ws, "Ann", 0, None, None),
            "stale_version",
        ),
        (
            "null payload scope",
            |ws| reconcile(ws, "Ann", 2, None, Some(&Value::Null)),
            "scope_mismatch",
        ),
        (
            "a snapshot of another op",
            |ws| {
                let snapshot = Snapshot {
                    op_id: "paid".into(),
                    matches: vec![],
                    complete: true,
                    authoritative: true,
                    closed: true,
                    closed_by: None,
                };
                let payload = json!({"amount": 10});
                ws.record_review(
                    &Review {
                        keep: None,
                        op_id: "gone",
                        payload: &payload,
                        reviewer: "Ann",
                        decision: Decision::NotApplied,
                        snapshot: &snapshot,
                        expected_version: 2,
                    },
                    &crate::support::unknown_provenance(),
                )
                .map(drop)
            },
            "scope_mismatch",
        ),
        (
            "compensation id of an existing op",
            |ws| approve(ws, "Ann", "fx-000001", "lost"),
            "duplicate_operation",
        ),
        (
            "empty effect id",
            |ws| approve(ws, "Ann", "", "refund-1"),
            "compensation_effect_mismatch",
        ),
        (
            "prepare over an existing op",
            |ws| ws.prepare("paid", "pay", &json!({"amount": 11})).map(drop),
            "duplicate_operation",
        ),
        (
            "dispatch of an empty op id",
            |ws| ws.dispatch("", DispatchOptions::default()).map(drop),
            "unknown_operation",
        ),
        (
            "snapshot of an id with a NUL",
            |ws| ws.snapshot("go\0ne", Some("Ann")).map(drop),
            "unknown_operation",
        ),
        (
            "receiver write for a closed op",
            |ws| {
                Builtin::open(ws.dir().unwrap(), OpenOptions::default())?
                    .apply(
                        ws.id(),
                        &EffectRequest {
                            op_id: "closed",
                            action_kind: "pay",
                            payload: &json!({"amount": 10}),
                            compensates_effect_id: None,
                        },
                    )
                    .map(drop)
            },
            "operation_closed",
        ),
    ]
}

#[test]
fn malformed_library_calls_are_refused_and_change_nothing() {
    let mut lab = table_lab();
    let before = dump(lab.path());
    let cases = library_cases();
    for (name, call, code) in &cases {
        match call(&mut lab.ws) {
            Err(Error::Refused(refusal)) => assert_eq!(refusal.code(), *code, "{name}: {refusal}"),
            other => panic!("{name}: expected refusal {code}, got {other:?}"),
        }
        assert_eq!(dump(lab.path()), before, "{name}: the databases changed");
    }
    assert!(
        Workspace::open(lab.path().join("sender.sqlite"), OpenOptions::default()).is_err(),
        "a file is not a workspace"
    );
    eprintln!("bad input: {} library calls", cases.len());
}

// ---------------------------------------------------------------------------
// Wrong kinds of file in the workspace.

#[test]
fn wrong_kinds_of_file_in_the_workspace_are_storage_errors_and_change_nothing() {
    let damage: [Damage; 8] = [
        (
            "sender file is a directory",
            |d| replace_with_dir(&d.join("sender.sqlite")),
            "is not a recon SQLite database",
        ),
        (
            "sender file is text",
            |d| std::fs::write(d.join("sender.sqlite"), "hello\n").unwrap(),
            "is not a recon SQLite database",
        ),
        (
            "sender file is empty",
            |d| std::fs::write(d.join("sender.sqlite"), "").unwrap(),
            "is not a recon SQLite database",
        ),
        (
            "the two files swapped",
            swap_files,
            "is not a recon SQLite database",
        ),
        (
            "another application's database",
            |d| {
                std::fs::remove_file(d.join("receiver.sqlite")).unwrap();
                let c = rusqlite::Connection::open(d.join("receiver.sqlite")).unwrap();
                c.execute_batch("CREATE TABLE effects (x); INSERT INTO effects VALUES (1);")
                    .unwrap();
            },
            "is not a recon SQLite database",
        ),
        (
            "a newer schema version",
            |d| {
                let c = rusqlite::Connection::open(d.join("sender.sqlite")).unwrap();
                c.execute_batch("PRAGMA user_version = 99").unwrap();
            },
            "has schema version 99; this recon reads version 7",
        ),
        (
            "receiver file missing",
            |d| std::fs::remove_file(d.join("receiver.sqlite")).unwrap(),
            "is missing from the workspace",
        ),
        (
            "sender file is a dangling symlink",
            |d| {
                std::fs::remove_file(d.join("sender.sqlite")).unwrap();
                std::os::unix::fs::symlink(d.join("nowhere"), d.join("sender.sqlite")).unwrap();
            },
            "is missing from the workspace",
        ),
    ];
    for (name, spoil, message) in damage {
        let lab = table_lab();
        let dir = lab.path().to_path_buf();
        drop(lab.ws);
        spoil(&dir);
        let before = listing(&dir);
        for args in [
            vec!["ops", "--workspace"],
            vec![
                "prepare",
                "--op",
                "new",
                "--action",
                "pay",
                "--payload",
                "{}",
                "--workspace",
            ],
            vec![
                "reconcile",
                "gone",
                "--reviewer",
                "Ann",
                "--decision",
                "not_applied",
                "--expected-version",
                "2",
                "--close",
                "--authorized-by",
                "Ann",
                "--workspace",
            ],
        ] {
            let mut args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
            args.push(dir.clone().into_os_string());
            let out = run_os(&args, None, &[], false);
            let case = case(name, &[], 4, message);
            check(&case, &out);
            assert_eq!(listing(&dir), before, "{name}: the workspace changed");
        }
    }
    for (name, path, message) in [
        ("workspace missing", "no-such-dir", "does not exist"),
        ("workspace is a file", "a-file", "does not exist"),
    ] {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(scratch.path().join("a-file"), "x").unwrap();
        let ws = scratch.path().join(path).display().to_string();
        for args in [
            vec!["ops", "--workspace", &ws],
            vec!["verify", "--workspace", &ws],
            vec!["export", "--workspace", &ws],
        ] {
            let out = run_os(
                &args.iter().map(OsString::from).collect::<Vec<_>>(),
                None,
                &[],
                false,
            );
            check(&case(name, &[], 4, message), &out);
        }
    }
}

/// A name, what it does to a workspace, and the message it must produce.
type Damage = (&'static str, fn(&Path), &'static str);

fn replace_with_dir(path: &Path) {
    std::fs::remove_file(path).unwrap();
    std::fs::create_dir(path).unwrap();
}

fn swap_files(dir: &Path) {
    let (s, r, t) = (
        dir.join("sender.sqlite"),
        dir.join("receiver.sqlite"),
        dir.join("tmp"),
    );
    std::fs::rename(&s, &t).unwrap();
    std::fs::rename(&r, &s).unwrap();
    std::fs::rename(&t, &r).unwrap();
}

/// Every file's name and bytes: after damage the files may not be
/// databases at all, so "unchanged" is checked byte for byte.
fn listing(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).ok(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_read_only_workspace_is_a_storage_error_and_changes_nothing() {
    let lab = table_lab();
    let dir = lab.path().to_path_buf();
    drop(lab.ws);
    let before = listing(&dir);
    // Root ignores permission bits, so as root the children run as nobody.
    let as_nobody = std::fs::metadata(&dir).unwrap().uid() == 0;
    let set = |mode_dir: u32, mode_file: u32| {
        for f in ["sender.sqlite", "receiver.sqlite"] {
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(mode_file))
                .unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode_dir)).unwrap();
    };
    set(0o555, 0o444);
    let ws = dir.display().to_string();
    let commands: [&[&str]; 4] = [
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "new",
            "--action",
            "pay",
            "--payload",
            "{}",
        ],
        &[
            "reconcile",
            "--workspace",
            &ws,
            "gone",
            "--reviewer",
            "Ann",
            "--decision",
            "not_applied",
            "--expected-version",
            "2",
            "--close",
            "--authorized-by",
            "Ann",
        ],
        &["dispatch", "--workspace", &ws, "gone"],
        &[
            "receiver",
            "apply",
            "--workspace",
            &ws,
            "--op",
            "gone",
            "--action",
            "pay",
            "--payload",
            "{}",
        ],
    ];
    let mut results = Vec::new();
    for args in commands {
        let os: Vec<OsString> = args.iter().map(OsString::from).collect();
        results.push((args.join(" "), run_os(&os, None, &[], as_nobody)));
    }
    set(0o755, 0o644);
    for (args, out) in &results {
        check(
            &case("read-only workspace", &[], 4, "readonly database"),
            out,
        );
        let _ = args;
    }
    assert_eq!(listing(&dir), before, "the read-only workspace changed");
    assert_invariants(&dir, &none());
}

// ---------------------------------------------------------------------------
// Odd but valid input goes through untouched.

#[test]
fn a_payload_at_the_size_limit_goes_through_dispatch_evidence_and_export() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let file = lab.path().join("big.json");
    let limit = recon::cli::MAX_PAYLOAD_BYTES;
    let big = json!({"blob": "z".repeat(limit - 64), "n": 1});
    std::fs::write(&file, big.to_string()).unwrap();
    let at = format!("@{}", file.display());
    let r = run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "big",
            "--action",
            "upload",
            "--payload",
            &at,
        ],
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // Larger than one argument may be: the adapter reads it on stdin.
    let r = run(&["dispatch", "--workspace", &ws, "big", "--json"], None);
    assert_eq!(r.json()["outcome"], "receipt", "{}", r.stderr);
    let ledger = lab.reopen().ledger(Some("big")).unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].payload, big);
    let r = run(&["export", "--workspace", &ws], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.len() > limit - 64);
    assert_invariants(lab.path(), &none());
}

#[test]
fn sql_looking_and_unusual_unicode_text_is_stored_verbatim() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let id = "x');DROP/**/TABLE/**/operations;--";
    let payload = r#"{"memo":"'; DELETE FROM effects; --","emoji":"💸","zw":"a\u200bb"}"#;
    let r = run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            id,
            "--action",
            "pay",
            "--payload",
            payload,
        ],
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(
        &[
            "dispatch",
            "--workspace",
            &ws,
            id,
            "--fault",
            "crash-after-commit",
        ],
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let reviewer = "Robert'); DROP TABLE evidence;-- Öztürk";
    let r = run(
        &[
            "reconcile",
            "--workspace",
            &ws,
            id,
            "--reviewer",
            reviewer,
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
            "--close",
            "--authorized-by",
            reviewer,
        ],
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let ws2 = lab.reopen();
    let op = ws2.require(id).unwrap();
    assert_eq!(op.payload, serde_json::from_str::<Value>(payload).unwrap());
    assert_eq!(
        ws2.evidence(id).unwrap()[0].reviewer.as_deref(),
        Some(reviewer)
    );
    assert_eq!(ws2.closure(id).unwrap().unwrap().authorized_by, reviewer);
    assert_invariants(lab.path(), &none());
}

#[test]
fn a_lost_database_is_not_recreated_beside_the_other_one() {
    // Losing one file of a workspace must stop recon, not start it afresh:
    // a fresh outbox beside a used ledger forgets which ops were sent, so
    // the same op could be prepared and dispatched again (a doubled
    // effect); a fresh ledger beside a used outbox forgets its close
    // tombstones, so a late original could land after not_applied.
    for lost in ["sender.sqlite", "receiver.sqlite"] {
        for how in ["deleted", "emptied"] {
            let mut lab = Lab::new();
            lab.ws
                .prepare("paid", "pay", &json!({"amount": 10}))
                .unwrap();
            lab.ws.dispatch("paid", DispatchOptions::default()).unwrap();
            let dir = lab.path().to_path_buf();
            drop(lab.ws);
            match how {
                "deleted" => std::fs::remove_file(dir.join(lost)).unwrap(),
                _ => std::fs::write(dir.join(lost), "").unwrap(),
            }
            let before = listing(&dir);
            let ws = dir.display().to_string();
            let prepare = [
                "prepare",
                "--workspace",
                &ws,
                "--op",
                "paid",
                "--action",
                "pay",
                "--payload",
                r#"{"amount":10}"#,
            ];
            let out = run_os(&prepare.map(OsString::from), None, &[], false);
            let message = if how == "deleted" {
                "is missing from the workspace"
            } else {
                "is not a recon SQLite database"
            };
            check(&case("lost database", &[], 4, message), &out);
            assert_eq!(listing(&dir), before, "{lost} {how}: the workspace changed");
        }
        // A workspace whose creation completed is refused even when nothing
        // was written in it yet (SPEC 11): its lost file is never recreated.
        // (A crash during creation is completed by the next command:
        // tests/it/creation.rs.)
        let lab = Lab::new();
        let dir = lab.path().to_path_buf();
        drop(lab.ws);
        std::fs::remove_file(dir.join(lost)).unwrap();
        let ws = dir.display().to_string();
        let r = run(
            &[
                "prepare",
                "--workspace",
                &ws,
                "--op",
                "a",
                "--action",
                "pay",
                "--payload",
                "{}",
            ],
            None,
        );
        assert_eq!(r.code, Some(4), "{lost}: {}", r.stderr);
        assert!(
            r.stderr.contains("is missing from the workspace"),
            "{}",
            r.stderr
        );
        assert!(!dir.join(lost).exists(), "{lost} was recreated");
    }
}

/// A stderr that is gone (a pipe whose reader has left, or a hung-up
/// terminal) loses the message but never turns a refusal into a panic:
/// the exit code is the refusal's, not an abort.
#[test]
fn a_refusal_whose_stderr_reader_is_gone_exits_with_its_code_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-workspace");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let ws = missing.display().to_string();
    let status = std::process::Command::new(recon_bin())
        .args([
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "a",
            "--action",
            "pay",
        ])
        .args(["--payload", "{}"])
        .stdout(std::process::Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3), "{status:?}");
    assert!(!missing.exists());
}
