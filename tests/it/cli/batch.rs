//! `recon prepare --batch FILE` (SPEC 10): JSON lines prepared in
//! transactions of up to 500, each line refused alone with its 1-based
//! number, the report printed under `--json` in place of an error
//! document, exit 3 when any line was refused.

use crate::pg_store::{initialized, roles};
use crate::real_receivers::servers;
use crate::stores::{on_both_stores, Site, Store};
use crate::support::{mkfifo, run, Run};
use recon::{OpenOptions, Workspace};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

fn line(op: &str, action: &str) -> String {
    json!({"op": op, "action": action, "payload": {"to": op, "n": 1}}).to_string()
}

/// The report of a run that printed one, and its refused lines as
/// `(line, code)`.
#[track_caller]
fn report(out: &Run, exit: i32) -> (Value, Vec<(u64, String)>) {
    assert_eq!(out.code, Some(exit), "{}{}", out.stdout, out.stderr);
    let report = out.json();
    let refused = report["refused"]
        .as_array()
        .expect("refused")
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().expect("a line"),
                r["code"].as_str().expect("a code").to_string(),
            )
        })
        .collect();
    (report, refused)
}

on_both_stores!(prepare_batch_prepares_in_transactions_of_500_and_refuses_each_bad_line_alone);
fn prepare_batch_prepares_in_transactions_of_500_and_refuses_each_bad_line_alone(store: Store) {
    let site = Site::new(store);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut lines: Vec<String> = (1..=1203).map(|n| line(&format!("b-{n}"), "pay")).collect();
    // In the first transaction, beside the line it repeats.
    lines[1] = line("b-1", "pay");
    lines[599] = "{oops".into();
    lines[699] = r#"{"op": "b-700", "action": "pay", "payload": {"n": 9007199254740993}}"#.into();
    lines[799] = r#"{"op": "b-800", "action": "pay", "payload": {}, "extra": 1}"#.into();
    lines[999] = String::new();
    let file = dir.path().join("batch.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("write the batch");
    let file = file.display().to_string();
    let out = site.run(&["prepare", "--batch", &file, "--json"], None);
    let (report, refused) = report(&out, 3);
    assert_eq!(
        refused,
        [
            (2, "duplicate_operation".to_string()),
            (600, "bad_line".to_string()),
            (700, "bad_line".to_string()),
            (800, "bad_line".to_string()),
        ],
        "{report}"
    );
    assert_eq!(report["prepared"], json!(1203 - 4 - 1), "{report}");
    let ops = site.run(
        &["ops", "--state", "prepared", "--limit", "5000", "--json"],
        None,
    );
    assert_eq!(ops.code, Some(0), "{}", ops.stderr);
    let ids: Vec<String> = ops
        .json()
        .as_array()
        .expect("ops")
        .iter()
        .map(|op| op["op_id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(ids.len(), 1198, "every line prepared once");
    assert!(ids.contains(&"b-3".to_string()) && ids.contains(&"b-1203".to_string()));
    assert!(!ids.contains(&"b-700".to_string()));
    let verified = site.run(&["verify"], None);
    assert_eq!(
        verified.code,
        Some(0),
        "the journal holds each prepared line once: {}",
        verified.stdout
    );
    // Again: every line is now a duplicate (or bad), and nothing changes.
    let again = site.run(&["prepare", "--batch", &file], None);
    assert_eq!(again.code, Some(3), "{}", again.stderr);
    assert!(
        again
            .stdout
            .starts_with("prepared 0 operations; 1202 lines refused"),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("line 1203: duplicate_operation"),
        "{}",
        again.stdout
    );
}

#[test]
fn prepare_batch_refuses_a_line_routed_nowhere_or_too_long_and_prepares_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = Workspace::open(dir.path(), OpenOptions::default().creating()).expect("create");
    ws.register_builtin("builtin", &["pay".to_string()], true)
        .expect("register");
    drop(ws);
    let long = "x".repeat(recon::domain::bounds::MAX_PAYLOAD_BYTES + 10);
    let text = [
        line("r-1", "ship"),
        format!(r#"{{"op": "r-2", "action": "pay", "payload": "{long}"}}"#),
        line("r-3", "pay"),
    ]
    .join("\n");
    let ws = dir.path().display().to_string();
    let out = run(
        &["prepare", "--workspace", &ws, "--batch", "-", "--json"],
        Some(text.as_bytes()),
    );
    let (report, refused) = report(&out, 3);
    assert_eq!(
        refused,
        [(1, "no_receiver".to_string()), (2, "bad_line".to_string())],
        "{report}"
    );
    assert_eq!(report["prepared"], json!(1), "{report}");
    let all_good = line("r-4", "pay");
    let out = run(
        &["prepare", "--workspace", &ws, "--batch", "-"],
        Some(all_good.as_bytes()),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "prepared 1 operations; 0 lines refused");
}

#[test]
fn prepare_batch_reads_a_fifo_as_it_is_written_and_refuses_a_directory() {
    let site = Site::new(Store::Sqlite);
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("batch.fifo");
    mkfifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut pipe = std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .expect("open the fifo");
            for n in 1..=3 {
                writeln!(pipe, "{}", line(&format!("f-{n}"), "pay")).expect("write a line");
            }
        })
    };
    let path = fifo.display().to_string();
    let out = site.run(&["prepare", "--batch", &path, "--json"], None);
    writer.join().expect("the writer");
    let (report, refused) = report(&out, 0);
    assert_eq!((report["prepared"].clone(), refused), (json!(3), vec![]));
    let directory = dir.path().display().to_string();
    let out = site.run(&["prepare", "--batch", &directory], None);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("is a directory"), "{}", out.stderr);
    assert_path_unused(Path::new(&directory));
}

/// The directory given as a batch is left as it was.
fn assert_path_unused(dir: &Path) {
    let names: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["batch.fifo"]);
}

#[test]
fn prepare_batch_by_a_login_without_the_sender_role_refuses_every_line_permission_denied() {
    let test =
        "prepare_batch_by_a_login_without_the_sender_role_refuses_every_line_permission_denied";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "batch_reader");
    let name = format!("{}_reader", url.rsplit('/').next().expect("a name"));
    let reader = roles::login(pg, &url, &name, &["recon_reader"]);
    let text = [line("p-1", "pay"), line("p-2", "pay")].join("\n");
    let out = run(
        &["prepare", "--database", &reader, "--batch", "-", "--json"],
        Some(text.as_bytes()),
    );
    let (report, refused) = report(&out, 3);
    assert_eq!(
        refused,
        [
            (1, "permission_denied".to_string()),
            (2, "permission_denied".to_string())
        ],
        "{report}"
    );
    assert_eq!(report["prepared"], json!(0));
}
