//! `recon demo`: the showcase holds every verdict and state, made through
//! the real code paths, and `--ops N` adds generated load that continues its
//! numbering.

use crate::support::{copy_demo, demo_clock, dump, program, run, Lab};
use recon::demo::{self, generate};
use recon::domain::{OpKind, OpState, Verdict};
use recon::OpenOptions;
use recon::Workspace;
use std::collections::BTreeSet;
use std::path::Path;

fn open(dir: &Path) -> Workspace {
    Workspace::open(dir, OpenOptions::default().creating())
        .expect("open workspace")
        .with_receiver_program(program())
}

#[test]
fn demo_shows_every_verdict_and_every_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = open(dir.path());
    let summary = demo::build(&mut ws, 0).unwrap();
    assert_eq!(summary.operations, 14);
    assert!(summary.generated.is_none());

    let ops = ws.ops(None, None, usize::MAX).unwrap();
    let mut verdicts = BTreeSet::new();
    let mut states = BTreeSet::new();
    for op in &ops {
        states.insert(op.state);
        verdicts.insert(ws.snapshot(&op.op_id, None).unwrap().verdict.as_str());
    }
    let all_verdicts: BTreeSet<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(verdicts, all_verdicts);
    let all_states: BTreeSet<OpState> = OpState::ALL.iter().copied().collect();
    assert_eq!(states, all_states);
    // Every unknown op alone also covers every verdict, so a reviewer's
    // default queue shows them all.
    let unknown_verdicts: BTreeSet<&str> = ops
        .iter()
        .filter(|op| op.state == OpState::Unknown)
        .map(|op| ws.snapshot(&op.op_id, None).unwrap().verdict.as_str())
        .collect();
    assert_eq!(unknown_verdicts, all_verdicts);
}

#[test]
fn demo_shows_a_duplicate_with_one_charge_kept_and_the_surplus_refunded() {
    let dir = tempfile::tempdir().unwrap();
    copy_demo(0, dir.path());
    let ws = open(dir.path());
    let kept = ws
        .operation("op-1013-setup-fee")
        .unwrap()
        .expect("the kept duplicate");
    assert_eq!(kept.state, OpState::Confirmed);
    assert_eq!(kept.surplus_effect_ids.len(), 1, "{kept:?}");
    let refund = ws
        .operation("op-1014-setup-fee-refund")
        .unwrap()
        .expect("the refund");
    assert_eq!(refund.kind, OpKind::Compensation);
    assert_eq!(refund.state, OpState::Confirmed);
    assert_eq!(
        refund.compensates_effect_id.as_deref(),
        Some(kept.surplus_effect_ids[0].as_str()),
        "the refund reverses the surplus, never the kept charge"
    );
    assert_ne!(kept.confirmed_effect_id, refund.compensates_effect_id);
}

#[test]
fn demo_compensation_is_unknown_after_its_receipt_was_lost() {
    // A copy of the showcase built once per test process.
    let dir = tempfile::tempdir().unwrap();
    copy_demo(0, dir.path());
    let ws = open(dir.path());
    let ops = ws.ops(None, None, usize::MAX).unwrap();
    let compensation = ops
        .iter()
        .find(|op| op.kind == OpKind::Compensation)
        .expect("a compensation op");
    assert_eq!(compensation.state, OpState::Unknown);
    assert_eq!(ws.dispatch_count(&compensation.op_id).unwrap(), 1);
    let original = ws
        .require(compensation.compensates_op_id.as_deref().unwrap())
        .unwrap();
    assert_eq!(original.state, OpState::Confirmed);
    let target = original.confirmed_effect_id.clone().unwrap();
    assert_eq!(
        compensation.compensates_effect_id.as_deref(),
        Some(&*target)
    );
    // The receiver wrote the compensation as a new row; the original's row stays.
    let written = ws.ledger(Some(&compensation.op_id)).unwrap();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].compensates_effect_id.as_deref(), Some(&*target));
    assert_eq!(ws.ledger(Some(&original.op_id)).unwrap().len(), 1);
    let approvals = ws.show(&original.op_id).unwrap().approvals;
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].compensation_op_id, compensation.op_id);
    // Closed snapshots were real receiver mutations, with their authorizer.
    let closed: Vec<_> = ops
        .iter()
        .filter_map(|op| ws.closure(&op.op_id).unwrap())
        .collect();
    assert!(closed.len() >= 3, "{closed:?}");
    assert!(closed.iter().all(|c| !c.authorized_by.is_empty()));
}

#[test]
fn generated_ops_are_unknown_with_the_evidence_their_number_says() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = open(dir.path());
    let summary = demo::build(&mut ws, 300).unwrap();
    let generated = summary.generated.expect("generated ops");
    assert_eq!(generated.operations, 300);
    assert_eq!(generated.first_op_id, "op-bulk-0000001");
    assert_eq!(generated.last_op_id, "op-bulk-0000300");
    assert_eq!(summary.operations, 314);
    let ledger = ws.ledger(None).unwrap();
    let showcase_rows = ledger
        .iter()
        .filter(|e| e.op_id.starts_with("op-10"))
        .count() as u64;
    assert_eq!(
        summary.effects,
        showcase_rows + generated.own_effects + generated.background_effects
    );
    let own_rows = ledger
        .iter()
        .filter(|e| e.op_id.starts_with("op-bulk-"))
        .count() as u64;
    assert_eq!(own_rows, generated.own_effects);
    let per_op = (generated.own_effects + generated.background_effects) as f64 / 300.0;
    assert!((8.0..=12.0).contains(&per_op), "{per_op} effects per op");

    let counts = ws.counts().unwrap();
    let unknown_listed = ws
        .ops(Some(OpState::Unknown), None, usize::MAX)
        .unwrap()
        .len() as i64;
    assert_eq!(counts[&OpState::Unknown], unknown_listed);
    let mut verdicts = BTreeSet::new();
    for n in 1..=300 {
        let id = generate::op_id(n);
        let op = ws.require(&id).unwrap();
        assert_eq!((op.state, op.version), (OpState::Unknown, 2), "{id}");
        assert_eq!(ws.dispatch_count(&id).unwrap(), 1, "{id}");
        let classified = ws.snapshot(&id, None).unwrap();
        let expected = generate::Evidence::of(n).open_verdict();
        assert_eq!(classified.verdict, expected, "{id}");
        verdicts.insert(expected.as_str());
    }
    assert_eq!(verdicts.len(), 5, "{verdicts:?}");
    // Effect ids still come from the ledger row.
    for (i, effect) in ledger.iter().enumerate() {
        assert_eq!(effect.effect_id, format!("fx-{:06}", i + 1));
    }
}

#[test]
fn repeated_demo_ops_continue_the_numbering_and_keep_one_showcase() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = open(dir.path());
    demo::build(&mut ws, 40).unwrap();
    let again = demo::build(&mut ws, 25).unwrap();
    assert!(again.showcase.is_empty());
    assert_eq!(again.operations, 25);
    let generated = again.generated.unwrap();
    assert_eq!(generated.first_op_id, "op-bulk-0000041");
    assert_eq!(generated.last_op_id, "op-bulk-0000065");
    let total: i64 = ws.counts().unwrap().values().sum();
    assert_eq!(total, 14 + 65);
}

#[test]
fn demo_command_creates_the_workspace_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("nested").join("demo");
    let ws_arg = ws.display().to_string();
    let out = run(
        &["demo", "--workspace", &ws_arg, "--ops", "20", "--json"],
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let summary = out.json();
    assert_eq!(summary["operations"], 34);
    assert_eq!(summary["showcase"].as_array().unwrap().len(), 14);
    assert_eq!(summary["generated"]["operations"], 20);
    assert!(ws.join("sender.sqlite").is_file() && ws.join("receiver.sqlite").is_file());
}

#[test]
fn demo_is_deterministic() {
    // Two builds in two workspaces: one here, and the one per test process
    // that `copy_demo` copies (built in a directory of its own).
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    demo::build(&mut open(a.path()).with_clock(demo_clock()), 30).unwrap();
    copy_demo(30, b.path());
    // Everything but each workspace's own random id is the same.
    let masked = |dir: &std::path::Path| {
        let conn = rusqlite::Connection::open(dir.join("sender.sqlite")).unwrap();
        let id: String = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'workspace_id'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        dump(dir).replace(&id, "<workspace id>")
    };
    assert_eq!(masked(a.path()), masked(b.path()));
}

#[test]
fn generated_numbering_continues_after_the_last_id_of_its_series_only() {
    let mut lab = Lab::new();
    assert_eq!(lab.ws.last_numbered_op(generate::IDS).unwrap(), None);
    // Between the series' bounds in byte order, but not of the series.
    for op_id in [
        "op-bulk-0000007",
        "op-bulk-5a",
        "op-bulk-00000099",
        "op-bulk-0000012x",
        "op-bulk-9999999z",
    ] {
        lab.ws
            .prepare(op_id, "send_email", &serde_json::json!({}))
            .unwrap();
    }
    assert_eq!(lab.ws.last_numbered_op(generate::IDS).unwrap(), Some(7));
}
