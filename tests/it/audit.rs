//! The journal: `recon verify`, `recon export` and `recon checkpoint`.
//!
//! The attacker here has the file: they drop the append-only triggers and
//! edit, delete, reorder or forge journal entries, or edit any table the
//! journal projects, with plain SQL. Every such change is found: by the
//! chain, by the replay of the journal against the tables, or (for a
//! journal rewritten whole with fresh hashes, or cut short with its
//! tables) by a checkpoint or an export kept outside the database. The
//! exported lines are rehashed here with plain `sha2`, so the format is
//! reproducible without recon.

mod decisions;
mod postgres;
mod receivers;

use crate::support::{program, run, Lab, Run};
use recon::audit::{Checkpoint, EntryKind};
use recon::dispatch::DispatchOptions;
use recon::domain::{CompensationRequest, Decision};
use recon::receiver::Fault;
use recon::workspace::{NewReceiver, ReconcileRequest};
use recon::{OpenOptions, Workspace};
use rusqlite::Connection;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The entries of [`journal_lab`], in order.
const KINDS: [(&str, Option<&str>); 30] = [
    ("receiver_registered", None),
    ("receiver_registered", None),
    ("receiver_registered", None),
    ("receiver_removed", None),
    ("prepared", Some("a")),
    ("dispatched", Some("a")),
    ("receipt", Some("a")),
    ("prepared", Some("b")),
    ("dispatched", Some("b")),
    ("call_failed", Some("b")),
    ("prepared", Some("c")),
    ("dispatched", Some("c")),
    ("call_failed", Some("c")),
    ("close_requested", Some("b")),
    ("closed", Some("b")),
    ("observed", Some("b")),
    ("decided", Some("b")),
    ("observed", Some("c")),
    ("decided", Some("c")),
    ("approved", Some("comp")),
    ("dispatched", Some("comp")),
    ("receipt", Some("comp")),
    ("prepared", Some("d")),
    ("dispatched", Some("d")),
    ("call_failed", Some("d")),
    ("observed", Some("d")),
    ("noted", Some("d")),
    ("escalated", Some("d")),
    ("deescalated", Some("d")),
    ("escalated", Some("d")),
];

/// How many entries [`journal_lab`] holds.
const LENGTH: usize = KINDS.len();

/// Every act of the outbox once: two receivers registered (routing `mail`
/// and `fax`) and one removed; `a` confirmed by its receipt; `b` closed and
/// decided `not_applied` by Ann (the closing read her observation); `c`
/// confirmed by Ann from an open read (recorded as her observation);
/// `comp`, a compensation of `a` approved by Bob, confirmed by its receipt;
/// `d` lost in flight, `unknown`, observed by Cy, noted, escalated,
/// deescalated and escalated again.
fn build_lab() -> Lab {
    let mut lab = Lab::new();
    let adapter = |dir: &Path| {
        let args = ["receiver", "adapter", "--workspace"].map(String::from);
        [args.as_slice(), &[dir.display().to_string()]].concat()
    };
    for (name, action) in [("ledger2", "mail"), ("gone", "fax")] {
        let args = adapter(lab.path());
        lab.ws
            .register_receiver(&NewReceiver {
                env: &[],
                name,
                actions: &[action.to_string()],
                program: &program().program,
                args: &args,
                timeout_ms: None,
            })
            .unwrap();
    }
    lab.ws.remove_receiver("gone").unwrap();
    let payload = json!({"amount": 0.1, "to": "acct-7"});
    for (op, fault) in [
        ("a", None),
        ("b", Some(Fault::CrashBeforeCommit)),
        ("c", Some(Fault::CrashAfterCommit)),
    ] {
        lab.dispatched(op, "pay", &payload, fault);
    }
    let review = |op_id, decision, close| ReconcileRequest {
        keep: None,
        op_id,
        reviewer: "Ann",
        decision,
        expected_version: 2,
        payload: None,
        close_authorized_by: close,
    };
    let ws = &mut lab.ws;
    ws.reconcile(&review("b", Decision::NotApplied, Some("Ann")))
        .unwrap();
    ws.reconcile(&review("c", Decision::Confirmed, None))
        .unwrap();
    ws.approve_compensation(&CompensationRequest {
        reason: None,
        original_op_id: "a",
        effect_id: "fx-000001",
        approver: "Bob",
        expected_version: 3,
        compensation_op_id: "comp",
        action_kind: "refund",
        payload: &json!({"amount": 0.1}),
    })
    .unwrap();
    ws.dispatch("comp", DispatchOptions::default()).unwrap();
    lab.dispatched("d", "pay", &payload, Some(Fault::CrashBeforeCommit));
    let ws = &mut lab.ws;
    ws.snapshot_by("d", None, Some("Cy")).unwrap();
    ws.note("d", "Cy", "the bank says it may have gone through")
        .unwrap();
    ws.escalate("d", "Cy", "only the bank can tell").unwrap();
    ws.deescalate("d", "Dee", "the bank answered").unwrap();
    ws.escalate("d", "Dee", "the answer was about another payment")
        .unwrap();
    lab
}

/// A fresh copy of the lab: built once per test process, since building
/// it runs a dozen receiver children.
fn journal_lab() -> Lab {
    static FILES: OnceLock<Vec<(OsString, Vec<u8>)>> = OnceLock::new();
    let files = FILES.get_or_init(|| {
        let lab = build_lab();
        let dir = lab.path().to_path_buf();
        drop(lab.ws);
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect()
    });
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let ws = Workspace::open(dir.path(), OpenOptions::default())
        .unwrap()
        .with_receiver_program(program());
    Lab { dir, ws }
}

fn ws_arg(dir: &Path) -> String {
    dir.display().to_string()
}

fn verify(dir: &Path, extra: &[&str]) -> (Run, Value) {
    let ws = ws_arg(dir);
    let mut args = vec!["verify", "--workspace", &ws, "--json"];
    args.extend(extra);
    let r = run(&args, None);
    let report = r.json();
    (r, report)
}

fn export(dir: &Path) -> Run {
    run(&["export", "--workspace", &ws_arg(dir)], None)
}

fn checkpoint(dir: &Path) -> String {
    let r = run(&["checkpoint", "--workspace", &ws_arg(dir)], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    r.stdout.trim_end().to_string()
}

/// Keeps an export beside the workspace, as a copy kept elsewhere would be.
fn keep_export(lab: &Lab) -> String {
    let kept = lab.path().join("kept.jsonl");
    std::fs::write(&kept, export(lab.path()).stdout).unwrap();
    kept.display().to_string()
}

fn sender(dir: &Path) -> Connection {
    Connection::open(dir.join("sender.sqlite")).unwrap()
}

/// The attacker's access: the file, with no foreign key enforced and every
/// append-only trigger dropped for the edit and put back after it, as a
/// careful attacker does (`verify` names a trigger that is missing:
/// `verify_names_a_dropped_trigger_and_index`).
pub fn tamper(dir: &Path, sql: &str) {
    as_attacker(dir, |conn| conn.execute_batch(sql).unwrap());
}

/// Runs `edit` on the outbox with the append-only triggers dropped, and
/// puts them back.
fn as_attacker(dir: &Path, edit: impl FnOnce(&Connection)) {
    let conn = sender(dir);
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    let triggers: Vec<(String, String)> = conn
        .prepare(
            "SELECT name, sql FROM sqlite_master
             WHERE type = 'trigger' AND name LIKE '%append_only%' ORDER BY rowid",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (trigger, _) in &triggers {
        conn.execute_batch(&format!("DROP TRIGGER {trigger}"))
            .unwrap();
    }
    edit(&conn);
    for (_, create) in &triggers {
        conn.execute_batch(create).unwrap();
    }
}

/// SHA-256 of the previous hash and a text, as a third party computes it.
fn sha(prev: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(text.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The attacker who knows the format: edits one entry's content (written
/// back as canonical JSON: sorted keys, no whitespace), then recomputes
/// every link in seq order, so the chain is intact again.
pub fn rewrite_entry(dir: &Path, seq: i64, edit: impl FnOnce(&mut Map<String, Value>)) {
    let conn = sender(dir);
    let text: String = conn
        .query_row("SELECT entry FROM journal WHERE seq = ?1", [seq], |r| {
            r.get(0)
        })
        .unwrap();
    let mut content: Map<String, Value> = serde_json::from_str(&text).unwrap();
    edit(&mut content);
    tamper(
        dir,
        &format!(
            "UPDATE journal SET entry = '{}' WHERE seq = {seq}",
            Value::Object(content).to_string().replace('\'', "''")
        ),
    );
    rechain(dir);
}

fn rechain(dir: &Path) {
    as_attacker(dir, |conn| {
        let rows: Vec<(i64, String)> = conn
            .prepare("SELECT seq, entry FROM journal ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut prev = GENESIS.to_string();
        for (seq, entry) in rows {
            let hash = sha(&prev, &entry);
            conn.execute(
                "UPDATE journal SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
                rusqlite::params![prev, hash, seq],
            )
            .unwrap();
            prev = hash;
        }
    });
}

#[track_caller]
fn assert_broken_at(dir: &Path, seq: i64, reason: &str) {
    let (r, report) = verify(dir, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert_eq!(report["intact"], false);
    assert_eq!(report["first_broken"]["seq"], seq, "{report:#}");
    let found = report["first_broken"]["reason"].as_str().unwrap();
    assert!(found.contains(reason), "expected {reason:?}, got {found:?}");
    assert_eq!(
        export(dir).code,
        Some(1),
        "export must flag a broken journal"
    );
}

/// Verifies and expects the chain intact and this mismatch among the
/// projection's; returns it.
#[track_caller]
fn assert_mismatch(dir: &Path, op_id: Option<&str>, field: &str) -> Value {
    let (r, report) = verify(dir, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert_eq!(report["first_broken"], Value::Null, "{report:#}");
    let mismatches = report["projection_mismatches"].as_array().unwrap();
    mismatches
        .iter()
        .find(|m| m["op_id"] == json!(op_id) && m["field"] == field)
        .cloned()
        .unwrap_or_else(|| panic!("no mismatch {op_id:?} {field}: {mismatches:#?}"))
}

/// Each case: the tampering SQL, and the mismatch it must produce.
type Case<'a> = (&'a str, Option<&'a str>, &'a str);

#[track_caller]
fn check_mismatches(cases: &[Case<'_>]) {
    for (sql, op_id, field) in cases {
        let lab = journal_lab();
        tamper(lab.path(), sql);
        eprintln!("{sql}");
        assert_mismatch(lab.path(), *op_id, field);
    }
}

#[test]
fn an_untouched_journal_verifies_and_its_export_rehashes_with_plain_sha256() {
    let lab = journal_lab();
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    assert_eq!(
        (report["rows"].clone(), report["journal_entries"].clone()),
        (json!(LENGTH), json!(LENGTH))
    );
    assert_eq!(report["projection_mismatches"], json!([]));
    assert_eq!(report["state_mismatches"], json!([]));
    let human = run(&["verify", "--workspace", &lab.path_str()], None);
    assert!(
        human
            .stdout
            .starts_with(&format!("journal intact: {LENGTH} entries")),
        "{}",
        human.stdout
    );

    let exported = export(lab.path());
    assert_eq!(exported.code, Some(0), "{}", exported.stderr);
    let mut prev = GENESIS.to_string();
    let mut lines = Vec::new();
    for line in exported.stdout.lines() {
        let mut entry: Map<String, Value> = serde_json::from_str(line).unwrap();
        let hash = entry.remove("hash").unwrap();
        assert_eq!(entry.remove("prev_hash").unwrap(), prev.as_str());
        let content = Value::Object(entry.clone()).to_string();
        assert_eq!(hash, sha(&prev, &content).as_str(), "{line}");
        let canonical = serde_json::to_string(&serde_json::from_str::<Value>(line).unwrap());
        assert_eq!(line, canonical.unwrap(), "canonical");
        prev = hash.as_str().unwrap().to_string();
        lines.push(Value::Object(entry));
    }
    let kinds: Vec<(String, Option<String>)> = lines
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().into(),
                e["op_id"].as_str().map(Into::into),
            )
        })
        .collect();
    let expected: Vec<(String, Option<String>)> = KINDS
        .iter()
        .map(|(k, op)| (k.to_string(), op.map(Into::into)))
        .collect();
    assert_eq!(kinds, expected);
    assert_eq!(report["head_hash"], prev.as_str());
    assert_eq!(checkpoint(lab.path()), format!("{LENGTH}:{prev}"));
    assert_entry_contents(&lines);
    // An evidence row names its entry, whose hash is the one exported.
    let shown = run(
        &["show", "--workspace", &lab.path_str(), "b", "--json"],
        None,
    )
    .json();
    let evidence = &shown["evidence"][0];
    assert_eq!(
        (evidence["journal_seq"].clone(), evidence["seq"].clone()),
        (json!(17), json!(2))
    );
    let line_17: Value = serde_json::from_str(exported.stdout.lines().nth(16).unwrap()).unwrap();
    assert_eq!(evidence["hash"], line_17["hash"]);
    assert_eq!(evidence.get("prev_hash"), None);
}

/// What the entries of the lab record, beyond their kinds.
#[track_caller]
fn assert_entry_contents(lines: &[Value]) {
    // First the ledger every other kind routes to, registered as `Lab`
    // registers it; the story's own entries follow.
    assert_eq!(
        (lines[0]["name"].clone(), lines[0]["actions"].clone()),
        (json!("builtin"), json!(["*"]))
    );
    assert_eq!(lines[0]["builtin"], true);
    let lines = &lines[1..];
    let registered = &lines[0];
    assert_eq!(
        (registered["name"].clone(), registered["actions"].clone()),
        (json!("ledger2"), json!(["mail"]))
    );
    assert_eq!(registered["describe"]["name"], "builtin");
    assert_eq!(lines[2]["name"], "gone");
    let prepared = &lines[3];
    assert_eq!(
        (
            prepared["op_kind"].clone(),
            prepared["payload"].clone(),
            prepared["receiver"].clone()
        ),
        (
            json!("original"),
            json!({"amount": 0.1, "to": "acct-7"}),
            json!("builtin")
        )
    );
    assert_eq!(
        (
            lines[4]["from_version"].clone(),
            lines[4]["to_version"].clone()
        ),
        (json!(1), json!(2))
    );
    // The failed calls of b and c (entries 10 and 13) come before these.
    let closed = &lines[13];
    assert_eq!(
        (
            closed["receiver"].clone(),
            closed["authorized_by"].clone(),
            closed["matches"].clone()
        ),
        (json!("builtin"), json!("Ann"), json!([]))
    );
    assert_eq!(closed["response_sha256"].as_str().map(str::len), Some(64));
    let decided = &lines[15];
    assert_eq!(
        (decided["reviewer"].clone(), decided["verdict"].clone()),
        (json!("Ann"), json!("terminal_absence"))
    );
    assert_eq!(
        decided["snapshot"]["closed"], true,
        "the whole snapshot a reviewer saw"
    );
    let approved = &lines[18];
    for (field, value) in [
        ("original_op_id", json!("a")),
        ("effect_id", json!("fx-000001")),
        ("approved_version", json!(3)),
        ("approver", json!("Bob")),
        ("op_kind", json!("compensation")),
        ("action_kind", json!("refund")),
        ("compensates_effect_id", json!("fx-000001")),
        ("compensates_op_id", json!("a")),
    ] {
        assert_eq!(approved[field], value, "{field}");
    }
    assert_eq!(lines[20]["effect_id"], "fx-000003");
    assert_triage_contents(lines);
}

/// What the entries of triage record: every one its time, an observation
/// its reader and what they saw, a note its text, a marker its reason.
#[track_caller]
fn assert_triage_contents(lines: &[Value]) {
    for line in lines {
        let at = line["at"].as_str().unwrap_or_default();
        assert!(recon::domain::Timestamp::parse(at).is_some(), "{line}");
    }
    let closing = &lines[14];
    assert_eq!(
        (
            closing["observed_by"].clone(),
            closing["verdict"].clone(),
            closing["closed"].clone(),
            closing["matches"].clone()
        ),
        (
            json!("Ann"),
            json!("terminal_absence"),
            json!(true),
            json!(0)
        )
    );
    assert_eq!(closing["snapshot"]["op_id"], "b");
    assert_eq!(lines[16]["observed_by"], "Ann");
    assert_eq!(
        (
            lines[24]["observed_by"].clone(),
            lines[24]["verdict"].clone()
        ),
        (json!("Cy"), json!("inconclusive"))
    );
    assert_eq!(lines[25]["text"], "the bank says it may have gone through");
    assert_eq!(
        (lines[26]["by"].clone(), lines[26]["reason"].clone()),
        (json!("Cy"), json!("only the bank can tell"))
    );
    assert_eq!(lines[27]["by"], "Dee");
    // Each lost call is kept with its operation: b's never arrived, c's
    // receipt was lost after the commit, d's never arrived.
    let failed: Vec<(Value, Value)> = [8, 11, 23]
        .iter()
        .map(|&i| (lines[i]["kind"].clone(), lines[i]["failure"].clone()))
        .collect();
    assert!(
        failed
            .iter()
            .all(|(kind, failure)| kind == "call_failed" && failure == "crash"),
        "{failed:?}"
    );
}

#[test]
fn an_entry_hash_is_sha256_of_the_previous_hash_and_the_canonical_content() {
    // Known answer: the entry and its hash, written out by hand here and
    // hashed outside recon (`printf '%s' "$GENESIS$ENTRY" | sha256sum`).
    let entry = r#"{"action_kind":"pay","at":"2026-12-03T08:15:02.123Z","compensates_effect_id":null,"compensates_op_id":null,"kind":"prepared","op_id":"op-1","op_kind":"original","payload":{"amount":0.1,"to":"acct-7"},"receiver":"builtin","seq":1}"#;
    let known = "4d228adfecc61d55d452462a9be0faffedfa41a5d6f630aebf8aa01de2424e9f";
    assert_eq!(sha(GENESIS, entry), known);
    let fields = json!({
        "op_kind": "original",
        "action_kind": "pay",
        "payload": {"to": "acct-7", "amount": 0.1},
        "compensates_effect_id": null,
        "compensates_op_id": null,
        "receiver": "builtin",
        "at": "2026-12-03T08:15:02.123Z",
    });
    let Value::Object(fields) = fields else {
        unreachable!()
    };
    let mut head = Checkpoint::genesis();
    let sealed = head.seal(EntryKind::Prepared, Some("op-1"), fields.clone());
    assert_eq!(
        (sealed.entry.as_str(), sealed.hash.as_str()),
        (entry, known)
    );
    head.after(&sealed);
    let next = head.seal(EntryKind::Dispatched, Some("op-1"), Map::new());
    assert_eq!((next.seq, next.prev_hash.as_str()), (2, known));

    // And a workspace writes exactly that entry for the same prepare at
    // the same time, chained after its receiver's registration.
    let scratch = tempfile::tempdir().unwrap();
    let at = recon::domain::Timestamp::parse("2026-12-03T08:15:02.123Z").unwrap();
    crate::support::with_ledger(
        Workspace::open(scratch.path(), OpenOptions::default().creating())
            .unwrap()
            .with_clock(std::sync::Arc::new(recon::clock::FixedClock::at(at))),
    )
    .prepare("op-1", "pay", &json!({"to": "acct-7", "amount": 0.1}))
    .unwrap();
    let row = |seq: i64| -> (String, String, String) {
        sender(scratch.path())
            .query_row(
                "SELECT entry, prev_hash, hash FROM journal WHERE seq = ?1",
                [seq],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    };
    let (_, _, registered) = row(1);
    let after_registration = Checkpoint {
        length: 1,
        head_hash: registered.clone(),
    };
    // Routed to the registration of entry 1, which the entry names.
    let mut fields = fields;
    fields.insert("receiver_id".into(), json!(1));
    let expected = after_registration.seal(EntryKind::Prepared, Some("op-1"), fields);
    assert_eq!(
        expected.entry,
        entry.replace(r#""seq":1"#, r#""receiver_id":1,"seq":2"#)
    );
    assert_eq!(
        row(2),
        (expected.entry, registered, sha(&row(1).2, &row(2).0))
    );
    assert_eq!(checkpoint(scratch.path()), format!("2:{}", row(2).2));
}

#[test]
fn an_empty_journal_is_intact_and_its_checkpoint_is_the_genesis_hash() {
    // A new workspace with nothing registered yet: no act at all.
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path(), OpenOptions::default().creating()).unwrap();
    let lab = Lab { dir, ws };
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0));
    assert_eq!(
        (report["rows"].clone(), report["head_hash"].clone()),
        (json!(0), json!(GENESIS))
    );
    let exported = export(lab.path());
    assert_eq!((exported.code, exported.stdout.as_str()), (Some(0), ""));
    assert_eq!(checkpoint(lab.path()), format!("0:{GENESIS}"));
    let (r, _) = verify(lab.path(), &["--checkpoint", &format!("0:{GENESIS}")]);
    assert_eq!(r.code, Some(0));
}

#[test]
fn a_checkpoint_of_no_entries_holds_only_with_the_genesis_hash() {
    // Any other head for length 0, on an empty journal and on a full one
    // (whose own head it is, even): no journal extends it.
    let (empty, full) = (Lab::new(), journal_lab());
    let head = checkpoint(full.path())
        .split_once(':')
        .unwrap()
        .1
        .to_string();
    for (lab, hash) in [
        (&empty, "ab".repeat(32)),
        (&full, "ab".repeat(32)),
        (&full, head),
    ] {
        let kept = format!("0:{hash}");
        let (r, report) = verify(lab.path(), &["--checkpoint", &kept]);
        assert_eq!(r.code, Some(1), "{kept}: {report:#}");
        assert_eq!(report["checkpoint"]["extended"], false, "{kept}");
        let reason = report["checkpoint"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("a checkpoint of no entries has the genesis hash as its head"),
            "{kept}: {reason}"
        );
    }
}

#[test]
fn a_refused_act_appends_nothing_and_a_failed_decision_rolls_its_entry_back() {
    let mut lab = journal_lab();
    let before = checkpoint(lab.path());
    let refused = lab.ws.dispatch("a", DispatchOptions::default());
    assert_eq!(
        refused.unwrap_err().refusal().map(|r| r.code()),
        Some("blind_retry")
    );
    assert_eq!(checkpoint(lab.path()), before);
    // The close commits at the receiver and is journaled on its own, with
    // the closing read as an observation; the decision's evidence write
    // fails, and its entry goes with it.
    lab.ws.drills().unwrap().install_evidence_fault().unwrap();
    let failed = lab.ws.reconcile(&ReconcileRequest {
        keep: None,
        op_id: "d",
        reviewer: "Ann",
        decision: Decision::NotApplied,
        expected_version: 2,
        payload: None,
        close_authorized_by: Some("Ann"),
    });
    assert!(failed
        .unwrap_err()
        .to_string()
        .contains("now closed at receiver builtin"));
    lab.ws.drills().unwrap().remove_evidence_fault().unwrap();
    let kinds: Vec<String> = sender(lab.path())
        .prepare("SELECT kind FROM journal WHERE seq > 30 ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kinds, ["close_requested", "closed", "observed"]);
    assert_eq!(lab.ws.require("d").unwrap().version, 2);
    assert_eq!(verify(lab.path(), &[]).0.code, Some(0));
}

#[test]
fn generated_operations_are_journaled_as_a_prepare_a_dispatch_and_any_observation() {
    let lab = Lab::demo(30);
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0), "{report:#}");
    let kinds: Vec<(String, String)> = sender(lab.path())
        .prepare("SELECT kind, op_id FROM journal WHERE op_id LIKE 'op-bulk-%' ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut ops: Vec<(String, Vec<String>)> = Vec::new();
    for (kind, op_id) in kinds {
        match ops.last_mut() {
            Some((last, entries)) if *last == op_id => entries.push(kind),
            _ => ops.push((op_id, vec![kind])),
        }
    }
    assert_eq!(ops.len(), 30, "each op's entries follow each other");
    let observed = ops.iter().filter(|(_, e)| e.len() == 3).count();
    assert!(observed > 0 && observed < 30, "{observed} of 30 observed");
    for (op_id, entries) in &ops {
        assert!(
            entries == &["prepared", "dispatched"]
                || entries == &["prepared", "dispatched", "observed"],
            "{op_id}: {entries:?}"
        );
    }
}

/// Fails unless every column of `table` (but `skip`) is the field of one of
/// the cases, written `{prefix}{column}`: a column the replay stopped
/// comparing would then go unnoticed.
#[track_caller]
fn assert_every_column_has_a_case(table: &str, skip: &str, prefix: &str, cases: &[Case<'_>]) {
    let lab = journal_lab();
    let columns: Vec<String> = sender(lab.path())
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
        .unwrap()
        .query_map([table], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!columns.is_empty(), "{table} has columns");
    let missing: Vec<&String> = columns
        .iter()
        .filter(|c| *c != skip && !cases.iter().any(|(_, _, f)| *f == format!("{prefix}{c}")))
        .collect();
    assert!(missing.is_empty(), "no edit of {table} tries {missing:?}");
}

#[test]
fn an_edit_of_any_operation_column_is_a_projection_mismatch_naming_the_op_and_field() {
    let cases: &[Case<'_>] = &[
        (
            "UPDATE operations SET state = 'not_applied' WHERE op_id = 'c'",
            Some("c"),
            "state",
        ),
        (
            "UPDATE operations SET version = 9 WHERE op_id = 'a'",
            Some("a"),
            "version",
        ),
        (
            r#"UPDATE operations SET payload = '{"amount":1000,"to":"acct-7"}' WHERE op_id = 'a'"#,
            Some("a"),
            "payload",
        ),
        (
            r#"UPDATE operations SET payload = '{"to":"acct-7","amount":0.1}' WHERE op_id = 'd'"#,
            Some("d"),
            "payload",
        ),
        (
            "UPDATE operations SET confirmed_effect_id = 'fx-000002' WHERE op_id = 'a'",
            Some("a"),
            "confirmed_effect_id",
        ),
        (
            "UPDATE operations SET action_kind = 'charge_card' WHERE op_id = 'comp'",
            Some("comp"),
            "action_kind",
        ),
        (
            "UPDATE operations SET receiver = 'ledger2' WHERE op_id = 'd'",
            Some("d"),
            "receiver",
        ),
        (
            "UPDATE operations SET compensates_effect_id = 'fx-000002' WHERE op_id = 'comp'",
            Some("comp"),
            "compensates_effect_id",
        ),
        (
            "UPDATE operations SET compensates_op_id = 'c' WHERE op_id = 'comp'",
            Some("comp"),
            "compensates_op_id",
        ),
        (
            "UPDATE operations SET kind = 'compensation', compensates_effect_id = 'fx-000002',
             compensates_op_id = 'c' WHERE op_id = 'd'",
            Some("d"),
            "kind",
        ),
        // A dispatch undone: the op is prepared again, ready to be sent twice.
        (
            "UPDATE operations SET state = 'prepared', version = 1 WHERE op_id = 'd';
             DELETE FROM dispatch_log WHERE op_id = 'd';",
            Some("d"),
            "dispatch_count",
        ),
        (
            "INSERT INTO operations (op_id, kind, action_kind, payload, state, version, receiver,
              created_at, updated_at)
          VALUES ('ghost', 'original', 'pay', '{}', 'prepared', 1, 'builtin',
              '2026-12-03T08:15:02.123Z', '2026-12-03T08:15:02.123Z')",
            Some("ghost"),
            "operation",
        ),
        // The times and the denormalized triage columns.
        (
            "UPDATE operations SET created_at = '2020-01-01T00:00:00.000Z' WHERE op_id = 'a'",
            Some("a"),
            "created_at",
        ),
        (
            "UPDATE operations SET updated_at = '2020-01-01T00:00:00.000Z' WHERE op_id = 'a'",
            Some("a"),
            "updated_at",
        ),
        (
            "UPDATE operations SET dispatch_count = 5 WHERE op_id = 'a'",
            Some("a"),
            "dispatch_count",
        ),
        (
            "UPDATE operations SET last_dispatched_at = NULL WHERE op_id = 'a'",
            Some("a"),
            "last_dispatched_at",
        ),
        (
            "UPDATE operations SET latest_observation = 11 WHERE op_id = 'd'",
            Some("d"),
            "latest_observation",
        ),
        (
            "UPDATE operations SET latest_verdict = 'terminal_absence' WHERE op_id = 'd'",
            Some("d"),
            "latest_verdict",
        ),
        // The marker lowered behind the journal's back.
        (
            "UPDATE operations SET escalation = NULL WHERE op_id = 'd'",
            Some("d"),
            "escalation",
        ),
        // Routed to another registration behind the journal's back.
        (
            "UPDATE operations SET receiver_id = 2 WHERE op_id = 'a'",
            Some("a"),
            "receiver_id",
        ),
        // A contradiction raised behind the journal's back.
        (
            "UPDATE operations SET contradiction = 5 WHERE op_id = 'a'",
            Some("a"),
            "contradiction",
        ),
        // A surplus (SPEC 14) listed behind the journal's back.
        (
            "UPDATE operations SET surplus_effect_ids = '[\"fx-000009\"]' WHERE op_id = 'a'",
            Some("a"),
            "surplus_effect_ids",
        ),
    ];
    check_mismatches(cases);
    assert_every_column_has_a_case("operations", "op_id", "", cases);
    // The version alone, both sides named.
    let lab = journal_lab();
    tamper(
        lab.path(),
        "UPDATE operations SET version = 9 WHERE op_id = 'a'",
    );
    let m = assert_mismatch(lab.path(), Some("a"), "version");
    assert_eq!(
        (m["journal"].clone(), m["table"].clone()),
        (json!(3), json!(9))
    );
}

#[test]
fn an_edit_of_any_approval_column_is_a_projection_mismatch() {
    let set = |column: &str, value: &str| {
        format!("UPDATE compensation_approvals SET {column} = {value} WHERE compensation_op_id = 'comp'")
    };
    let cases: Vec<(String, &str)> = vec![
        (set("original_op_id", "'c'"), "approval[0].original_op_id"),
        (set("effect_id", "'fx-000002'"), "approval[0].effect_id"),
        (set("approved_version", "4"), "approval[0].approved_version"),
        (set("approver", "'Mallory'"), "approval[0].approver"),
        (
            set("action_kind", "'charge_card'"),
            "approval[0].action_kind",
        ),
        (set("payload", r#"'{"amount":100}'"#), "approval[0].payload"),
        (set("compensation_op_id", "'d'"), "approval[0]"),
        ("DELETE FROM compensation_approvals".into(), "approval[0]"),
    ];
    let cases: Vec<Case<'_>> = cases
        .iter()
        .map(|(sql, f)| (sql.as_str(), Some("comp"), *f))
        .collect();
    check_mismatches(&cases);
    // Re-targeted to another op, the approval is missing from one and
    // foreign to the other.
    let lab = journal_lab();
    tamper(lab.path(), &set("compensation_op_id", "'d'"));
    let m = assert_mismatch(lab.path(), Some("d"), "approval[0]");
    assert_eq!(
        (m["journal"].clone(), m["table"]["approver"].clone()),
        (Value::Null, json!("Bob"))
    );
}

#[test]
fn a_deleted_added_or_edited_dispatch_is_a_projection_mismatch() {
    check_mismatches(&[
        (
            "DELETE FROM dispatch_log WHERE op_id = 'a'",
            Some("a"),
            "dispatch_count",
        ),
        (
            "INSERT INTO dispatch_log (seq, op_id, from_version) VALUES (99, 'c', 2)",
            Some("c"),
            "dispatch_count",
        ),
        (
            "UPDATE dispatch_log SET from_version = 2 WHERE op_id = 'b'",
            Some("b"),
            "dispatch_log[0].from_version",
        ),
    ]);
}

#[test]
fn an_edited_evidence_row_is_a_projection_mismatch() {
    let cases: &[Case<'_>] = &[
        ("UPDATE evidence SET seq = 99 WHERE op_id = 'a'", Some("a"), "evidence[0].seq"),
        ("UPDATE evidence SET source = 'review' WHERE op_id = 'a'", Some("a"), "evidence[0].source"),
        ("UPDATE evidence SET verdict = 'inconclusive' WHERE op_id = 'b'", Some("b"), "evidence[0].verdict"),
        ("UPDATE evidence SET from_version = 1 WHERE op_id = 'c'", Some("c"), "evidence[0].from_version"),
        ("UPDATE evidence SET receiver = 'ledger2' WHERE op_id = 'c'", Some("c"), "evidence[0].receiver"),
        // Another registration, or another version of it, named behind the journal's back.
        ("UPDATE evidence SET receiver_id = 2 WHERE op_id = 'c'", Some("c"), "evidence[0].receiver_id"),
        ("UPDATE evidence SET receiver_version = 7 WHERE op_id = 'c'", Some("c"), "evidence[0].receiver_version"),
        // The receiver description the evidence rests on, swapped.
        ("UPDATE evidence SET receiver_describe_sha256 = hex(zeroblob(32)) WHERE op_id = 'c'", Some("c"), "evidence[0].receiver_describe_sha256"),
        ("UPDATE evidence SET recorded_at = '2020-01-01T00:00:00.000Z' WHERE op_id = 'c'", Some("c"), "evidence[0].recorded_at"),
        ("UPDATE evidence SET reviewer = 'Mallory' WHERE op_id = 'b'", Some("b"), "evidence[0].reviewer"),
        ("UPDATE evidence SET effect_id = 'fx-000002' WHERE op_id = 'a'", Some("a"), "evidence[0].effect_id"),
        ("UPDATE evidence SET decision = 'confirmed' WHERE op_id = 'b'", Some("b"), "evidence[0].decision"),
        // A person's decision passed off as a policy's.
        ("UPDATE evidence SET source = 'policy', policy = 'provable' WHERE op_id = 'b'", Some("b"), "evidence[0].policy"),
        (r#"UPDATE evidence SET snapshot = '{"authoritative":true,"closed":true,"complete":true,"matches":[],"op_id":"c"}' WHERE op_id = 'c'"#, Some("c"), "evidence[0].snapshot"),
        ("UPDATE evidence SET snapshot = 'not json at all' WHERE op_id = 'comp'", Some("comp"), "evidence[0].snapshot"),
        ("UPDATE evidence SET to_version = 3.5 WHERE op_id = 'a'", Some("a"), "evidence[0].to_version"),
        ("UPDATE evidence SET response_sha256 = X'00' WHERE op_id = 'c'", Some("c"), "evidence[0].response_sha256"),
        ("UPDATE evidence SET journal_seq = 99 WHERE op_id = 'c'", Some("c"), "evidence[0].journal_seq"),
        // A close named behind the journal's back (SPEC 12).
        ("UPDATE evidence SET close_seq = 1 WHERE op_id = 'c'", Some("c"), "evidence[0].close_seq"),
        ("INSERT INTO evidence SELECT 9, 'd', source, reviewer, decision, verdict, snapshot, 2, 3,
          effect_id, receiver, receiver_describe_sha256, response_sha256, 99, recorded_at,
          receiver_id, receiver_version, policy, close_seq
          FROM evidence WHERE op_id = 'c'",
         Some("d"), "evidence[0]"),
    ];
    check_mismatches(cases);
    assert_every_column_has_a_case("evidence", "op_id", "evidence[0].", cases);
    // The last evidence row removed: the wave-1 cross-check names it too.
    let lab = journal_lab();
    tamper(lab.path(), "DELETE FROM evidence WHERE op_id = 'comp'");
    let m = assert_mismatch(lab.path(), Some("comp"), "evidence[0]");
    assert_eq!(
        (m["journal"]["journal_seq"].clone(), m["table"].clone()),
        (json!(22), Value::Null)
    );
    let (_, report) = verify(lab.path(), &[]);
    assert_eq!(
        report["state_mismatches"],
        json!(["operation comp is confirmed at version 3 but has no evidence row"])
    );
}

#[test]
fn a_deleted_or_edited_close_is_a_projection_mismatch() {
    check_mismatches(&[
        (
            "DELETE FROM closes WHERE op_id = 'b'",
            Some("b"),
            "closes[0]",
        ),
        (
            "UPDATE closes SET authorized_by = 'Mallory' WHERE op_id = 'b'",
            Some("b"),
            "closes[0].authorized_by",
        ),
        (
            "UPDATE closes SET op_id = 'd' WHERE op_id = 'b'",
            Some("d"),
            "closes[0]",
        ),
    ]);
}

#[test]
fn an_edited_receiver_or_route_is_a_projection_mismatch() {
    check_mismatches(&[
        ("UPDATE receivers SET program = '/bin/sh' WHERE name = 'ledger2'", None, "receivers[ledger2].program"),
        ("UPDATE receivers SET timeout_ms = 1 WHERE name = 'ledger2'", None, "receivers[ledger2].timeout_ms"),
        ("UPDATE receivers SET describe = replace(describe, 'true', 'false') WHERE name = 'ledger2'", None, "receivers[ledger2].describe"),
        ("UPDATE routes SET receiver = 'builtin' WHERE action_kind = 'mail'", None, "routes[mail].receiver"),
        ("DELETE FROM routes WHERE action_kind = 'mail'", None, "routes[mail]"),
        ("INSERT INTO routes VALUES ('pay', 'ledger2')", None, "routes[pay]"),
        ("INSERT INTO receivers SELECT 'gone', program, args, timeout_ms, describe, describe_sha256,
          builtin, env, 99, 1 FROM receivers WHERE name = 'ledger2'", None, "receivers[gone]"),
        ("UPDATE receivers SET id = 3 WHERE name = 'ledger2'", None, "receivers[ledger2].id"),
        ("UPDATE receivers SET version = 2 WHERE name = 'ledger2'", None, "receivers[ledger2].version"),
        ("UPDATE receivers SET env = '[\"PGPASSWORD\"]' WHERE name = 'ledger2'", None, "receivers[ledger2].env"),
        ("UPDATE receivers SET builtin = 0 WHERE name = 'builtin'", None, "receivers[builtin].builtin"),
    ]);
}

#[test]
fn edited_deleted_reordered_or_inserted_entries_break_the_chain() {
    let cases: [(&str, i64, &str); 9] = [
        ("UPDATE journal SET entry = replace(entry, 'Ann', 'Eve') WHERE seq = 14", 14, "hash does not match the entry's content"),
        ("UPDATE journal SET entry = 'garbage' WHERE seq = 5", 5, "hash does not match"),
        ("UPDATE journal SET prev_hash = hash WHERE seq = 10", 10, "prev_hash does not match"),
        ("UPDATE journal SET kind = 'closed' WHERE seq = 9", 9, "the kind column disagrees with the entry"),
        ("UPDATE journal SET op_id = 'd' WHERE seq = 9", 9, "the op_id column disagrees with the entry"),
        ("UPDATE journal SET hash = X'00' WHERE seq = 7", 7, "hash is not text"),
        ("DELETE FROM journal WHERE seq = 10", 11, "seq 11 where seq 10 belongs"),
        // Every column but seq swapped between two entries.
        ("CREATE TEMP TABLE t AS SELECT * FROM journal WHERE seq IN (9, 10);
          UPDATE journal SET (kind, op_id, entry, prev_hash, hash) =
              (SELECT kind, op_id, entry, prev_hash, hash FROM t WHERE t.seq = 19 - journal.seq)
          WHERE seq IN (9, 10);", 9, "prev_hash does not match"),
        ("INSERT INTO journal SELECT 31, kind, op_id, entry, prev_hash, hash FROM journal WHERE seq = 30", 31, "prev_hash does not match"),
    ];
    for (sql, seq, reason) in cases {
        let lab = journal_lab();
        tamper(lab.path(), sql);
        eprintln!("{sql}");
        assert_broken_at(lab.path(), seq, reason);
    }
    // Moved to the end: the chain breaks where it left.
    let lab = journal_lab();
    tamper(lab.path(), "UPDATE journal SET seq = 100 WHERE seq = 12");
    assert_broken_at(lab.path(), 13, "seq 13 where seq 12 belongs");
}

#[test]
fn a_forged_entry_chained_properly_is_caught_by_the_projection() {
    // A decision for `d`, which is still unknown, appended with a correct
    // hash: the chain holds, the tables do not show it.
    let lab = journal_lab();
    let conn = sender(lab.path());
    let entry: String = conn
        .query_row("SELECT entry FROM journal WHERE seq = 17", [], |r| r.get(0))
        .unwrap();
    let head: String = conn
        .query_row("SELECT hash FROM journal WHERE seq = 30", [], |r| r.get(0))
        .unwrap();
    let mut forged: Map<String, Value> = serde_json::from_str(&entry).unwrap();
    forged.insert("seq".into(), json!(31));
    forged.insert("op_id".into(), json!("d"));
    let forged = Value::Object(forged).to_string();
    conn.execute(
        "INSERT INTO journal VALUES (31, 'decided', 'd', ?1, ?2, ?3)",
        rusqlite::params![forged, head, sha(&head, &forged)],
    )
    .unwrap();
    let m = assert_mismatch(lab.path(), Some("d"), "state");
    assert_eq!(
        (m["journal"].clone(), m["table"].clone()),
        (json!("not_applied"), json!("unknown"))
    );
    assert_mismatch(lab.path(), Some("d"), "evidence[0]");
}

#[test]
fn a_consistent_rewrite_passes_the_database_alone_but_not_a_kept_checkpoint_nor_an_earlier_export()
{
    let lab = journal_lab();
    let kept = keep_export(&lab);
    let point = checkpoint(lab.path());
    let (r, report) = verify(lab.path(), &["--against", &kept, "--checkpoint", &point]);
    assert_eq!(r.code, Some(0), "{report:#}");
    assert_eq!(
        (
            report["export"]["rows"].clone(),
            report["checkpoint"]["extended"].clone()
        ),
        (json!(LENGTH), json!(true))
    );

    // Rewrite history: another reviewer in the entry and in its evidence
    // row, every hash recomputed. The database alone cannot tell.
    rewrite_entry(lab.path(), 17, |e| {
        e.insert("reviewer".into(), json!("Mallory"));
    });
    tamper(
        lab.path(),
        "UPDATE evidence SET reviewer = 'Mallory' WHERE op_id = 'b'",
    );
    let (r, _) = verify(lab.path(), &[]);
    assert_eq!(
        r.code,
        Some(0),
        "documented limit: a consistent rewrite keeps the database intact"
    );
    let (r, report) = verify(lab.path(), &["--checkpoint", &point]);
    assert_eq!(r.code, Some(1));
    assert_eq!(report["checkpoint"]["extended"], false);
    assert!(
        report["checkpoint"]["reason"]
            .as_str()
            .unwrap()
            .contains("rewritten"),
        "{report:#}"
    );
    let (r, report) = verify(lab.path(), &["--against", &kept]);
    assert_eq!(r.code, Some(1));
    assert_eq!(report["export"]["first_difference"]["seq"], 17);
    assert!(report["export"]["first_difference"]["reason"]
        .as_str()
        .unwrap()
        .contains("rewritten"));
    let human = run(
        &[
            "verify",
            "--workspace",
            &lab.path_str(),
            "--checkpoint",
            &point,
        ],
        None,
    );
    assert!(
        human
            .stdout
            .contains(&format!("checkpoint {point}: entry {LENGTH} has hash")),
        "{}",
        human.stdout
    );
}

#[test]
fn a_shortened_journal_fails_against_the_checkpoint_and_an_earlier_export() {
    let lab = journal_lab();
    let kept = keep_export(&lab);
    let point = checkpoint(lab.path());
    // The last entry cut, and what it did undone in the tables.
    tamper(
        lab.path(),
        "DELETE FROM journal WHERE seq = 30;
         DELETE FROM escalations WHERE seq = 30;
         UPDATE operations SET escalation = NULL WHERE op_id = 'd';",
    );
    let (r, _) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0));
    let (r, report) = verify(lab.path(), &["--checkpoint", &point]);
    assert_eq!(r.code, Some(1));
    assert!(
        report["checkpoint"]["reason"]
            .as_str()
            .unwrap()
            .contains("it was shortened"),
        "{report:#}"
    );
    let (r, report) = verify(lab.path(), &["--against", &kept]);
    assert_eq!(r.code, Some(1));
    assert!(report["export"]["first_difference"]["reason"]
        .as_str()
        .unwrap()
        .contains("fewer entries"));
    // A checkpoint of the shorter journal is still extended.
    let earlier = Checkpoint {
        length: 10,
        head_hash: sender(lab.path())
            .query_row("SELECT hash FROM journal WHERE seq = 10", [], |r| r.get(0))
            .unwrap(),
    };
    let (r, _) = verify(lab.path(), &["--checkpoint", &earlier.to_string()]);
    assert_eq!(r.code, Some(0));
}

#[test]
fn a_malformed_checkpoint_is_a_usage_error() {
    let lab = journal_lab();
    let hex = "ab".repeat(32);
    for bad in [
        String::new(),
        "18".into(),
        format!("18:{}", &hex[1..]),
        format!("18:{}", hex.to_uppercase()),
        format!("-1:{hex}"),
        format!("1.5:{hex}"),
        format!(":{hex}"),
        "18:zz".into(),
    ] {
        let flag = format!("--checkpoint={bad}");
        let r = run(&["verify", "--workspace", &lab.path_str(), &flag], None);
        assert_eq!(r.code, Some(2), "{bad:?}: {}", r.stderr);
        assert!(r.stderr.contains("--checkpoint"), "{}", r.stderr);
    }
    let r = run(
        &[
            "verify",
            "--workspace",
            &lab.path_str(),
            "--checkpoint",
            "x",
            "--json",
        ],
        None,
    );
    assert_eq!(
        (r.code, r.json()["error"]["kind"].clone()),
        (Some(2), json!("usage"))
    );
}

#[test]
fn checkpoint_prints_the_length_and_head_hash() {
    let lab = journal_lab();
    let r = run(
        &["checkpoint", "--workspace", &lab.path_str(), "--json"],
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let (_, report) = verify(lab.path(), &[]);
    assert_eq!(
        r.json(),
        json!({"length": LENGTH, "head_hash": report["head_hash"]})
    );
    assert_eq!(
        checkpoint(lab.path()),
        format!("{LENGTH}:{}", report["head_hash"].as_str().unwrap())
    );
}

#[test]
fn an_edited_export_is_not_trusted_as_a_reference() {
    let lab = journal_lab();
    let text = export(lab.path()).stdout.replace("\"Ann\"", "\"Eve\"");
    let kept = lab.path().join("kept.jsonl");
    std::fs::write(&kept, text).unwrap();
    let (r, report) = verify(lab.path(), &["--against", &kept.display().to_string()]);
    assert_eq!(r.code, Some(1));
    assert!(report["export"]["first_difference"]["reason"]
        .as_str()
        .unwrap()
        .contains("exported copy itself is broken"));
}

#[test]
fn an_export_that_is_not_one_is_a_usage_error_read_within_a_bound() {
    let lab = journal_lab();
    let path = |name: &str| lab.path().join(name);
    let not_json = path("not.jsonl");
    std::fs::write(
        &not_json,
        format!(
            "{}\nnot json\n",
            export(lab.path()).stdout.lines().next().unwrap()
        ),
    )
    .unwrap();
    let r = run(
        &[
            "verify",
            "--workspace",
            &lab.path_str(),
            "--against",
            &not_json.display().to_string(),
        ],
        None,
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("line 2 is not an exported journal entry"),
        "{}",
        r.stderr
    );
    let long = path("long.jsonl");
    let file = std::fs::File::create(&long).unwrap();
    file.set_len(64 * 1024 * 1024 + 1).unwrap();
    let r = run(
        &[
            "verify",
            "--workspace",
            &lab.path_str(),
            "--against",
            &long.display().to_string(),
        ],
        None,
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("is longer than 67108864 bytes; refusing to read it"),
        "{}",
        r.stderr
    );
    // Beyond the whole file's bound, refused before a byte is read (the
    // file is sparse: it takes no space).
    std::fs::File::create(&long)
        .unwrap()
        .set_len(16 * 1024 * 1024 * 1024 + 1)
        .unwrap();
    let r = run(
        &[
            "verify",
            "--workspace",
            &lab.path_str(),
            "--against",
            &long.display().to_string(),
        ],
        None,
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("is larger than 17179869184 bytes; refusing to read it"),
        "{}",
        r.stderr
    );
}

#[test]
fn export_writes_a_file_atomically_and_verify_needs_only_the_sender() {
    let lab = journal_lab();
    let out = lab.path().join("journal.jsonl");
    let r = run(
        &[
            "export",
            "--workspace",
            &lab.path_str(),
            "--output",
            &out.display().to_string(),
        ],
        None,
    );
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        export(lab.path()).stdout
    );
    let dir: PathBuf = lab.path().to_path_buf();
    let point = checkpoint(&dir);
    drop(lab.ws);
    std::fs::remove_file(dir.join("receiver.sqlite")).unwrap();
    let (r, _) = verify(&dir, &["--checkpoint", &point]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(checkpoint(&dir), point);
}

#[test]
fn verify_reports_storage_errors_with_exit_4() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("nope").display().to_string();
    for command in ["verify", "checkpoint", "export"] {
        let r = run(&[command, "--workspace", &missing], None);
        assert_eq!(r.code, Some(4), "{command}: {}", r.stderr);
    }
    std::fs::write(scratch.path().join("sender.sqlite"), "garbage").unwrap();
    let r = run(&["verify", "--workspace", &ws_arg(scratch.path())], None);
    assert_eq!(r.code, Some(4));
    assert!(
        r.stderr.contains("is not a recon SQLite database"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_workspace_of_an_earlier_schema_version_is_refused_naming_its_version() {
    // Version 4 is upgraded (tests/it/upgrade.rs); these are refused.
    for version in [1, 2, 3] {
        let lab = journal_lab();
        sender(lab.path())
            .execute_batch(&format!("PRAGMA user_version = {version}"))
            .unwrap();
        for command in ["verify", "ops"] {
            let r = run(&[command, "--workspace", &lab.path_str()], None);
            assert_eq!(r.code, Some(4), "{}", r.stderr);
            let says = format!("has schema version {version}; this recon reads version 7");
            assert!(r.stderr.contains(&says), "{}", r.stderr);
        }
    }
}

#[test]
fn a_close_is_journaled_with_its_receiver_authorizer_and_answer() {
    let lab = journal_lab();
    let r = run(
        &[
            "snapshot",
            "--workspace",
            &lab.path_str(),
            "d",
            "--close",
            "--authorized-by",
            "Ann",
            "--json",
        ],
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let conn = sender(lab.path());
    let (kind, entry): (String, String) = conn
        .query_row("SELECT kind, entry FROM journal WHERE seq = 32", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let entry: Value = serde_json::from_str(&entry).unwrap();
    assert_eq!(kind, "closed");
    assert_eq!(
        (
            entry["op_id"].clone(),
            entry["authorized_by"].clone(),
            entry["matches"].clone()
        ),
        (json!("d"), json!("Ann"), json!([]))
    );
    let close: (String, String, String, i64) = conn
        .query_row(
            "SELECT op_id, receiver, authorized_by, journal_seq FROM closes WHERE op_id = 'd'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(close, ("d".into(), "builtin".into(), "Ann".into(), 32));
    assert_eq!(verify(lab.path(), &[]).0.code, Some(0));
}

#[test]
fn a_close_the_outbox_cannot_journal_says_the_operation_is_closed_at_the_receiver() {
    let lab = journal_lab();
    sender(lab.path())
        .execute_batch("CREATE TRIGGER full BEFORE INSERT ON closes BEGIN SELECT RAISE(ABORT, 'disk full'); END;")
        .unwrap();
    let r = run(
        &[
            "snapshot",
            "--workspace",
            &lab.path_str(),
            "d",
            "--close",
            "--authorized-by",
            "Ann",
            "--json",
        ],
        None,
    );
    assert_eq!(r.code, Some(4), "{}", r.stderr);
    assert!(
        r.stderr.contains("disk full")
            && r.stderr
                .contains("the operation is now closed at receiver builtin"),
        "{}",
        r.stderr
    );
    let committed = &r.json()["error"]["committed"]["closed"];
    assert_eq!(
        (
            committed["op_id"].clone(),
            committed["authorized_by"].clone()
        ),
        (json!("d"), json!("Ann"))
    );
    assert!(
        lab.ws.closure("d").unwrap().is_some(),
        "the receiver's close stands"
    );
    // Only its authorization was journaled, before the receiver was asked.
    let kinds: Vec<String> = sender(lab.path())
        .prepare(&format!(
            "SELECT kind FROM journal WHERE seq > {LENGTH} ORDER BY seq"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kinds, ["close_requested"], "nothing else journaled");
    // The test's fault is not recon's schema: verify would name it.
    sender(lab.path())
        .execute_batch("DROP TRIGGER full")
        .unwrap();
    assert_eq!(
        verify(lab.path(), &[]).0.code,
        Some(0),
        "the journal is honest, only shorter"
    );
}

#[test]
fn the_text_report_names_the_first_mismatch_and_the_count() {
    let lab = journal_lab();
    tamper(lab.path(), "UPDATE operations SET version = 9 WHERE op_id = 'a'; UPDATE closes SET authorized_by = 'Eve'");
    let (_, report) = verify(lab.path(), &[]);
    let count = report["projection_mismatches"].as_array().unwrap().len();
    assert_eq!(count, 2, "{report:#}");
    let human = run(&["verify", "--workspace", &lab.path_str()], None);
    assert_eq!(human.code, Some(1));
    assert!(
        human
            .stdout
            .starts_with(&format!("journal BROKEN ({LENGTH} entries)")),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains(
            "2 mismatches; the first: operation a, version: the journal says 3, the table holds 9"
        ),
        "{}",
        human.stdout
    );
}

/// Without the attacker's `DROP TRIGGER`: on a live workspace each table
/// that is only ever appended to refuses an edit and a delete, even one
/// that changes nothing, and the journal still verifies afterwards.
#[test]
fn every_append_only_table_refuses_update_and_delete_on_a_live_workspace() {
    let lab = journal_lab();
    let cases = [
        (
            "sender.sqlite",
            "journal",
            "entry",
            "the journal is append-only",
        ),
        (
            "sender.sqlite",
            "evidence",
            "reviewer",
            "evidence is append-only",
        ),
        (
            "sender.sqlite",
            "closes",
            "authorized_by",
            "closes are append-only",
        ),
        (
            "sender.sqlite",
            "observations",
            "observed_by",
            "observations are append-only",
        ),
        ("sender.sqlite", "notes", "text", "notes are append-only"),
        (
            "sender.sqlite",
            "escalations",
            "reason",
            "escalations are append-only",
        ),
        (
            "receiver.sqlite",
            "effects",
            "payload",
            "the receiver ledger is append-only",
        ),
        (
            "receiver.sqlite",
            "closed_ops",
            "authorized_by",
            "close tombstones are durable",
        ),
    ];
    let before = crate::support::dump(lab.path());
    for (file, table, column, message) in cases {
        let conn = Connection::open(lab.path().join(file)).unwrap();
        let rows: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert!(rows > 0, "{table} has rows for its triggers to fire on");
        for sql in [
            format!("UPDATE {table} SET {column} = {column}"),
            format!("DELETE FROM {table}"),
        ] {
            let refused = conn.execute(&sql, []).expect_err(&sql);
            assert!(refused.to_string().contains(message), "{sql}: {refused}");
        }
    }
    assert_eq!(crate::support::dump(lab.path()), before);
    assert_eq!(verify(lab.path(), &[]).0.code, Some(0));
}

#[test]
fn verify_json_names_the_workspace_by_its_id_from_the_outbox_alone() {
    let lab = Lab::new();
    let id = lab.ws.id().to_string();
    assert_eq!(id.len(), 32, "{id}");
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(report["workspace"], json!(id), "{report}");
    // The field comes first, as SPEC 8 lists it beside the report.
    assert!(
        r.stdout.trim_start().starts_with("{\n  \"workspace\": "),
        "{}",
        r.stdout
    );
    // It is read from the outbox: without the ledger's file it is the same.
    std::fs::remove_file(lab.path().join("receiver.sqlite")).expect("remove the ledger");
    let (_, report) = verify(lab.path(), &[]);
    assert_eq!(report["workspace"], json!(id), "{report}");
}

/// `verify` trusts the outbox's metadata: the id and the completion mark
/// make the pair, the upgrade's keys time the entries written before it.
/// Each key is held to what the journal and the ledger imply, so an edit
/// is a mismatch of `meta.KEY`, in JSON and in text.
#[test]
fn verify_holds_the_workspace_metadata_to_the_journal_and_the_ledger() {
    let ledger_id: String = Connection::open(journal_lab().path().join("receiver.sqlite"))
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'workspace_id'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let cases = [
        (
            "DELETE FROM meta WHERE key = 'creation_complete'",
            "meta.creation_complete",
            json!("1"),
            Value::Null,
        ),
        (
            "UPDATE meta SET value = '0' WHERE key = 'creation_complete'",
            "meta.creation_complete",
            json!("1"),
            json!("0"),
        ),
        (
            "UPDATE meta SET value = '00112233445566778899aabbccddeeff'
             WHERE key = 'workspace_id'",
            "meta.workspace_id",
            json!(ledger_id),
            json!("00112233445566778899aabbccddeeff"),
        ),
        // No upgrade happened: no entry predates one.
        (
            "INSERT INTO meta (key, value) VALUES ('upgraded_through_seq', '5')",
            "meta.upgraded_through_seq",
            json!("0"),
            json!("5"),
        ),
    ];
    for (sql, field, journal, table) in cases {
        let lab = journal_lab();
        tamper(lab.path(), sql);
        let (r, report) = verify(lab.path(), &[]);
        assert_eq!(r.code, Some(1), "{sql}: {report:#}");
        assert_eq!(
            report["projection_mismatches"],
            json!([{"op_id": null, "field": field, "journal": journal, "table": table}]),
            "{sql}"
        );
        let human = run(&["verify", "--workspace", &lab.path_str()], None);
        assert_eq!(human.code, Some(1), "{sql}");
        assert!(
            human
                .stdout
                .contains(&format!("the first: {field}: the journal says")),
            "{sql}: {}",
            human.stdout
        );
    }
}

/// The outbox's tables, indexes and triggers are held to those this build
/// creates: a dropped append-only trigger, one made a no-op, a dropped
/// index and an index recon does not know are each a finding.
#[test]
fn verify_names_a_dropped_trigger_and_index() {
    let lab = journal_lab();
    sender(lab.path())
        .execute_batch(
            "DROP TRIGGER journal_append_only_update;
             DROP INDEX operations_by_state;
             DROP TRIGGER notes_append_only_delete;
             CREATE TRIGGER notes_append_only_delete BEFORE DELETE ON notes BEGIN SELECT 1; END;
             CREATE INDEX notes_by_text ON notes(text);",
        )
        .unwrap();
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(1), "{report:#}");
    assert_eq!(report["first_broken"], Value::Null, "{report:#}");
    assert_eq!(report["projection_mismatches"], json!([]), "{report:#}");
    let found = report["schema_differences"].as_array().unwrap();
    let expected = [
        json!({"type": "trigger", "name": "journal_append_only_update", "difference": "missing"}),
        json!({"type": "index", "name": "operations_by_state", "difference": "missing"}),
        json!({"type": "trigger", "name": "notes_append_only_delete", "difference": "differs"}),
        json!({"type": "index", "name": "notes_by_text", "difference": "unknown"}),
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for difference in &expected {
        assert!(found.contains(difference), "{difference} in {found:#?}");
    }
    let human = run(&["verify", "--workspace", &lab.path_str()], None);
    assert_eq!(human.code, Some(1));
    for said in [
        "it lacks the trigger journal_append_only_update",
        "it lacks the index operations_by_state",
        "its trigger notes_append_only_delete differs",
        "it has an unknown index notes_by_text",
    ] {
        assert!(human.stdout.contains(said), "{said}: {}", human.stdout);
    }
}

/// Reproduction 4 of issue 29, found after the fact (SPEC 12: a
/// compensation's registration is its original effect's): `comp`'s
/// approval and row are rewritten to route it to `ledger2`, another
/// registered receiver, every row agreeing with its entry; only the rule
/// across the two operations sees it.
#[test]
fn a_compensation_routed_away_from_its_original_effects_registration_is_a_mismatch() {
    let lab = journal_lab();
    let conn = sender(lab.path());
    let (seq, other): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT seq FROM journal WHERE kind = 'approved'),
                    (SELECT id FROM receivers WHERE name = 'ledger2')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    drop(conn);
    rewrite_entry(lab.path(), seq, |e| {
        e.insert("receiver".into(), json!("ledger2"));
        e.insert("receiver_id".into(), json!(other));
    });
    tamper(
        lab.path(),
        &format!(
            "UPDATE operations SET receiver = 'ledger2', receiver_id = {other} WHERE op_id = 'comp'"
        ),
    );
    let (r, report) = verify(lab.path(), &[]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    let found: Vec<(&Value, &Value)> = report["projection_mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (&m["op_id"], &m["field"]))
        .collect();
    assert_eq!(found, [(&json!("comp"), &json!("route"))], "{report:#}");
}
