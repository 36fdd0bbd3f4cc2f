//! One workspace, one pair (SPEC 11): both files carry the workspace's id,
//! a file of another workspace is refused, creation is atomic (a crash at
//! any step of it is completed by the next command), and a handle whose
//! workspace went away refuses every mutation.

use crate::support::{recon_bin, run, run_with_env, Lab};
use recon::{OpenOptions, Workspace};
use serde_json::json;
use std::path::Path;

fn prepare_in(ws: &str, op: &str) -> crate::support::Run {
    run(
        &[
            "prepare",
            "--workspace",
            ws,
            "--op",
            op,
            "--action",
            "pay",
            "--payload",
            "{}",
        ],
        None,
    )
}

/// `recon receivers add` of the built-in ledger: the command that creates
/// a workspace now that no receiver is implicit.
const ADD_LEDGER: [&str; 6] = ["receivers", "add", "builtin", "--builtin", "--actions", "*"];

fn add_ledger_in(ws: &str, env: &[(&str, &str)]) -> crate::support::Run {
    let args = [&ADD_LEDGER[..], &["--workspace", ws]].concat();
    run_with_env(&args, None, env)
}

fn ids(dir: &Path) -> (String, String) {
    let id = |file: &str| -> String {
        rusqlite::Connection::open(dir.join(file))
            .unwrap()
            .query_row(
                "SELECT value FROM meta WHERE key = 'workspace_id'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    (id("sender.sqlite"), id("receiver.sqlite"))
}

#[test]
fn both_files_of_a_workspace_carry_the_same_workspace_id() {
    let lab = Lab::new();
    let (sender, receiver) = ids(lab.path());
    assert_eq!(sender.len(), 32);
    assert_eq!(sender, receiver);
    let other = Lab::new();
    assert_ne!(ids(other.path()).0, sender, "each workspace has its own id");
}

#[test]
fn a_file_from_another_workspace_is_refused_at_open_with_exit_4() {
    for file in ["receiver.sqlite", "sender.sqlite"] {
        for how in ["copied", "symlinked"] {
            let mut mine = Lab::new();
            mine.dispatched("op", "pay", &json!({"n": 1}), None);
            let theirs = Lab::new();
            let their_dir = theirs.path().to_path_buf();
            // Closed, so their file holds all of theirs; mine is closed too,
            // and the file is swapped whole (no WAL of mine left beside it).
            drop(theirs.ws);
            drop(mine.ws);
            let target = mine.dir.path().join(file);
            std::fs::remove_file(&target).unwrap();
            for leftover in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{leftover}", target.display()));
            }
            match how {
                "copied" => drop(std::fs::copy(their_dir.join(file), &target).unwrap()),
                _ => std::os::unix::fs::symlink(their_dir.join(file), &target).unwrap(),
            }
            let out = run(
                &["ops", "--workspace", &mine.dir.path().display().to_string()],
                None,
            );
            assert_eq!(out.code, Some(4), "{file} {how}: {}", out.stderr);
            assert!(
                out.stderr.contains("belongs to another workspace"),
                "{}",
                out.stderr
            );
        }
    }
}

/// A crash at each step of creation (the process killed through a crash
/// point) leaves something the next command completes: a creating command
/// and an ordinary one alike, and both files end with one id.
#[test]
fn a_crash_at_any_step_of_creation_is_completed_by_the_next_command() {
    for point in ["create.after_sender", "create.before_complete"] {
        for next in ["receivers add", "ops"] {
            let dir = tempfile::tempdir().unwrap();
            let ws = dir.path().join("ws").display().to_string();
            let crashed = add_ledger_in(&ws, &[("RECON_CRASH_POINT", point)]);
            assert_eq!(crashed.code, Some(86), "{point}: {}", crashed.stderr);
            let out = match next {
                "receivers add" => add_ledger_in(&ws, &[]),
                _ => run(&["ops", "--workspace", &ws], None),
            };
            assert_eq!(out.code, Some(0), "{point} then {next}: {}", out.stderr);
            let (sender, receiver) = ids(Path::new(&ws));
            assert_eq!(sender, receiver, "{point} then {next}");
            // Completed: losing a file now is refused, never recreated.
            std::fs::remove_file(Path::new(&ws).join("receiver.sqlite")).unwrap();
            let lost = prepare_in(&ws, "c");
            assert_eq!(lost.code, Some(4), "{point} then {next}: {}", lost.stderr);
        }
    }
}

#[test]
fn a_handle_whose_workspace_was_replaced_refuses_every_mutation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ws");
    let mut ws = crate::support::with_ledger(
        Workspace::open(&path, OpenOptions::default().creating())
            .unwrap()
            .with_receiver_program(crate::support::program()),
    );
    ws.prepare("a", "pay", &json!({})).unwrap();
    assert!(ws.ensure_present().is_ok());
    // Moved away and replaced by a fresh workspace at the same path.
    std::fs::rename(&path, dir.path().join("moved")).unwrap();
    let fresh = run(
        &[
            "receivers",
            "add",
            "--workspace",
            &path.display().to_string(),
            "builtin",
            "--builtin",
            "--actions",
            "*",
        ],
        None,
    );
    assert_eq!(fresh.code, Some(0), "{}", fresh.stderr);
    let gone = |e: recon::Error| e.to_string().contains("was deleted, moved or replaced");
    assert!(ws.ensure_present().is_err());
    assert!(ws.prepare("b", "pay", &json!({})).is_err_and(gone));
    assert!(ws.dispatch("a", Default::default()).is_err_and(gone));
    assert!(ws.snapshot("a", Some("rosa")).is_err_and(gone));
    let _ = recon_bin();
}

/// Whether any file of the ledger is in `dir`.
fn any_ledger_file(dir: &Path) -> Option<String> {
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| format!("receiver.sqlite{suffix}"))
        .find(|name| dir.join(name).exists())
}

/// Every command that opens a workspace, run on a used one whose ledger
/// was deleted, and again with the outbox's completion mark removed too
/// (its journal still says creation completed): none makes the ledger
/// afresh, which would forget its closes. `verify`, `export` and
/// `checkpoint` need only the outbox and go on (the removed mark is a
/// finding); every other command exits 4, the ledger's own child included.
#[test]
fn a_lost_ledger_is_never_recreated_by_any_command() {
    for mark_removed in [false, true] {
        let mut lab = Lab::new();
        lab.dispatched("paid", "pay", &json!({"amount": 10}), None);
        lab.ws.prepare("fresh", "pay", &json!({})).unwrap();
        let id = lab.ws.id().to_string();
        let dir = lab.path().to_path_buf();
        drop(lab.ws);
        std::fs::remove_file(dir.join("receiver.sqlite")).unwrap();
        assert_eq!(any_ledger_file(&dir), None);
        if mark_removed {
            rusqlite::Connection::open(dir.join("sender.sqlite"))
                .unwrap()
                .execute("DELETE FROM meta WHERE key = 'creation_complete'", [])
                .unwrap();
        }
        let ws = dir.display().to_string();
        let apply = json!({"recon_adapter": 1, "workspace": id, "op": {
            "op_id": "paid", "action_kind": "pay", "payload": {"amount": 10},
            "compensates_effect_id": null}});
        let query = json!({"recon_adapter": 1, "workspace": id, "op_id": "paid"});
        let close = json!({"recon_adapter": 1, "workspace": id, "op_id": "paid",
            "authorized_by": "Ann"});
        let found = if mark_removed { 1 } else { 0 };
        let commands: Vec<(Vec<&str>, Option<String>, i32)> = vec![
            (vec!["ops"], None, 4),
            (vec!["show", "paid"], None, 4),
            (vec!["ledger"], None, 4),
            (vec!["ledger", "--op", "paid"], None, 4),
            (
                vec![
                    "prepare",
                    "--op",
                    "new",
                    "--action",
                    "pay",
                    "--payload",
                    "{}",
                ],
                None,
                4,
            ),
            (vec!["dispatch", "fresh"], None, 4),
            (vec!["snapshot", "paid"], None, 4),
            (
                vec![
                    "reconcile",
                    "paid",
                    "--reviewer",
                    "Ann",
                    "--decision",
                    "confirmed",
                    "--expected-version",
                    "3",
                ],
                None,
                4,
            ),
            (
                vec![
                    "approve-compensation",
                    "paid",
                    "--effect",
                    "fx-000001",
                    "--approver",
                    "lee",
                    "--expected-version",
                    "3",
                    "--compensation-op",
                    "refund",
                    "--action",
                    "refund",
                    "--payload",
                    "{}",
                ],
                None,
                4,
            ),
            (vec!["observe", "--by", "Ann", "paid"], None, 4),
            (vec!["note", "--by", "Ann", "--text", "hi", "paid"], None, 4),
            (
                vec!["escalate", "--by", "Ann", "--reason", "r", "fresh"],
                None,
                4,
            ),
            (
                vec!["deescalate", "--by", "Ann", "--reason", "r", "fresh"],
                None,
                4,
            ),
            (vec!["screenshot"], None, 4),
            (vec!["demo"], None, 4),
            (
                vec!["receivers", "add", "mail", "--builtin", "--actions", "mail"],
                None,
                4,
            ),
            (vec!["receivers", "list"], None, 4),
            (vec!["receivers", "check", "builtin"], None, 4),
            (
                vec!["receivers", "update", "builtin", "--timeout-ms", "1000"],
                None,
                4,
            ),
            (vec!["receivers", "remove", "builtin"], None, 4),
            (
                vec![
                    "receiver",
                    "apply",
                    "--op",
                    "paid",
                    "--action",
                    "pay",
                    "--payload",
                    "{}",
                ],
                None,
                4,
            ),
            // Its describe names the ledger's instance, read from the
            // ledger: a lost one cannot be described either.
            (
                vec!["receiver", "adapter", "describe"],
                Some(json!({"recon_adapter": 1}).to_string()),
                4,
            ),
            (
                vec!["receiver", "adapter", "apply"],
                Some(apply.to_string()),
                4,
            ),
            (
                vec!["receiver", "adapter", "query"],
                Some(query.to_string()),
                4,
            ),
            (
                vec!["receiver", "adapter", "close"],
                Some(close.to_string()),
                4,
            ),
            (vec!["verify"], None, found),
            (vec!["export"], None, found),
            (vec!["checkpoint"], None, 0),
        ];
        for (args, stdin, code) in commands {
            let args = [&args[..], &["--workspace", &ws]].concat();
            let stdin = stdin.map(|line| line + "\n");
            let out = run(&args, stdin.as_deref().map(str::as_bytes));
            let case = format!("{args:?} (mark removed: {mark_removed})");
            assert_eq!(out.code, Some(code), "{case}: {}{}", out.stdout, out.stderr);
            if code == 4 {
                let said = format!("{}{}", out.stdout, out.stderr);
                assert!(
                    said.contains("is missing from the workspace"),
                    "{case}: {said}"
                );
            }
            assert_eq!(
                any_ledger_file(&dir),
                None,
                "{case}: the ledger was made afresh"
            );
        }
    }
}

/// An outbox whose creation completed and whose id was then removed is
/// refused as it is: not given a fresh id, which its ledger would then
/// not share (or a lost ledger would be made afresh with).
#[test]
fn a_completed_outbox_that_lost_its_id_is_refused_not_given_a_new_one() {
    let lab = Lab::new();
    let dir = lab.path().to_path_buf();
    drop(lab.ws);
    let sender = || rusqlite::Connection::open(dir.join("sender.sqlite")).unwrap();
    sender()
        .execute("DELETE FROM meta WHERE key = 'workspace_id'", [])
        .unwrap();
    let out = run(&["ops", "--workspace", &dir.display().to_string()], None);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("sender.sqlite belongs to another workspace"),
        "{}",
        out.stderr
    );
    let id: Option<String> = sender()
        .query_row(
            "SELECT value FROM meta WHERE key = 'workspace_id'",
            [],
            |r| r.get(0),
        )
        .ok();
    assert_eq!(id, None, "the outbox was given a new id");
}
