//! Races between real processes on the outbox's store. The decision, the
//! approval and the write-lock races run on both stores (`crate::stores`);
//! the races of delayed originals need the built-in ledger's permit drill
//! and direct calls to it, and stay on SQLite. Racers are lined up with
//! a `std::sync::Barrier` (each thread waits, then spawns its process or
//! writes its permit) and delayed receivers with the `ready`/permit pipe
//! protocol; nothing sleeps. The assertions hold under every interleaving,
//! and each race is repeated ([`crate::stress::scaled`]) in a fresh
//! workspace so that many interleavings are actually seen.

use crate::invariants::{assert_invariants, direct, none};
use crate::stores::{on_both_stores, Site, Store};
use crate::stress::scaled;
use crate::support::{program, recon_bin, run, Lab, Run};
use recon::dispatch::{self, DispatchOptions, InFlight, PendingDispatch, ReceiverCall};
use recon::domain::{EvidenceSource, OpState, Verdict};
use recon::receiver::Fault;
use recon::OpenOptions;
use recon::Workspace;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;

/// Default repetitions of each race (times `RECON_STRESS`).
const REPETITIONS: usize = 50;

/// A thread that waits on `barrier` and only then spawns `recon ARGS`.
fn racer(args: Vec<String>, barrier: &Arc<Barrier>) -> thread::JoinHandle<Run> {
    let barrier = Arc::clone(barrier);
    thread::spawn(move || {
        let mut command = Command::new(recon_bin());
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        barrier.wait();
        let out = command.spawn().and_then(|c| c.wait_with_output());
        let out = out.expect("run a racer");
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
}

/// Starts every command at once and returns the runs in command order.
pub(crate) fn race(commands: Vec<Vec<String>>) -> Vec<Run> {
    let barrier = Arc::new(Barrier::new(commands.len()));
    let handles: Vec<_> = commands.into_iter().map(|a| racer(a, &barrier)).collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("racer thread"))
        .collect()
}

pub(crate) fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn payload() -> serde_json::Value {
    json!({"amount": 10, "to": "acct-7"})
}

/// `op` prepared to pay and dispatched once, with an optional fault.
fn dispatched(site: &mut Site, op: &str, fault: Option<Fault>) {
    site.dispatched(op, "pay", &payload(), fault);
}

on_both_stores!(eight_reviewers_racing_one_version_record_exactly_one_decision);
fn eight_reviewers_racing_one_version_record_exactly_one_decision(store: Store) {
    for rep in 0..scaled(REPETITIONS) {
        let mut lab = Site::new(store);
        let at = lab.args();
        // Even repetitions: one effect, everyone confirms (half of them
        // closing first). Odd: no effect, everyone closes and records
        // not_applied, so the closes race too.
        let confirm = rep % 2 == 0;
        let fault = if confirm {
            Fault::CrashAfterCommit
        } else {
            Fault::CrashBeforeCommit
        };
        dispatched(&mut lab, "op", Some(fault));
        let commands = (0..8)
            .map(|i| {
                let reviewer = format!("reviewer-{i}");
                let mut a = strings(&["reconcile"]);
                a.extend(at.iter().cloned());
                a.extend(strings(&["op", "--json"]));
                a.extend(strings(&[
                    "--reviewer",
                    &reviewer,
                    "--expected-version",
                    "2",
                ]));
                a.extend(strings(&[
                    "--decision",
                    if confirm { "confirmed" } else { "not_applied" },
                ]));
                if !confirm || i % 2 == 1 {
                    a.extend(strings(&["--close", "--authorized-by", &reviewer]));
                }
                a
            })
            .collect();
        let runs = race(commands);
        let winners: Vec<usize> = (0..8).filter(|&i| runs[i].code == Some(0)).collect();
        assert_eq!(
            winners.len(),
            1,
            "rep {rep}: exactly one reviewer wins: {runs:#?}"
        );
        let winner = format!("reviewer-{}", winners[0]);
        for (i, r) in runs.iter().enumerate().filter(|(i, _)| *i != winners[0]) {
            assert_eq!(r.code, Some(3), "rep {rep} reviewer {i}: {r:?}");
            assert!(
                r.stderr
                    .contains("refused: stale_version: expected version 2, found 3")
                    && r.stderr
                        .contains(&format!("last changed by reviewer {winner}")),
                "rep {rep} reviewer {i} must hear stale_version and who won: {}",
                r.stderr
            );
        }
        let evidence = lab.ws.evidence_log().unwrap();
        assert_eq!(evidence.len(), 1, "rep {rep}: one evidence row");
        assert_eq!(evidence[0].reviewer.as_deref(), Some(winner.as_str()));
        let op = lab.ws.require("op").unwrap();
        let expected = if confirm {
            OpState::Confirmed
        } else {
            OpState::NotApplied
        };
        assert_eq!((op.state, op.version), (expected, 3));
        assert_eq!(runs[winners[0]].json()["evidence_seq"], 1);
        lab.assert_sound();
    }
}

on_both_stores!(eight_approvals_of_one_effect_record_exactly_one);
fn eight_approvals_of_one_effect_record_exactly_one(store: Store) {
    for rep in 0..scaled(REPETITIONS) {
        let mut lab = Site::new(store);
        let at = lab.args();
        dispatched(&mut lab, "op", None);
        // Even repetitions: eight different compensation ids; odd: the same.
        let comp_id = |i: usize| {
            if rep % 2 == 0 {
                format!("comp-{i}")
            } else {
                "comp".into()
            }
        };
        let commands = (0..8)
            .map(|i| {
                let mut a = strings(&["approve-compensation"]);
                a.extend(at.iter().cloned());
                a.extend(strings(&["op", "--json"]));
                a.extend(strings(&[
                    "--effect",
                    "fx-000001",
                    "--expected-version",
                    "3",
                ]));
                a.extend(strings(&["--approver", &format!("approver-{i}")]));
                a.extend(strings(&[
                    "--compensation-op",
                    &comp_id(i),
                    "--action",
                    "refund",
                ]));
                a.extend(strings(&["--payload", &json!({"refund": i}).to_string()]));
                a
            })
            .collect();
        let runs = race(commands);
        let winners: Vec<usize> = (0..8).filter(|&i| runs[i].code == Some(0)).collect();
        assert_eq!(
            winners.len(),
            1,
            "rep {rep}: exactly one approval wins: {runs:#?}"
        );
        let w = winners[0];
        for (i, r) in runs.iter().enumerate().filter(|(i, _)| *i != w) {
            assert_eq!(r.code, Some(3), "rep {rep} approver {i}: {r:?}");
            assert!(
                r.stderr.contains("refused: already_approved"),
                "rep {rep}: {}",
                r.stderr
            );
        }
        let approvals = lab.ws.approvals("op").unwrap();
        assert_eq!(approvals.len(), 1, "rep {rep}");
        assert_eq!(approvals[0].approver, format!("approver-{w}"));
        assert_eq!(approvals[0].compensation_op_id, comp_id(w));
        let comps = lab.ws.ops(None, None, usize::MAX).unwrap();
        assert_eq!(
            comps.len(),
            2,
            "rep {rep}: the original and one compensation: {comps:?}"
        );
        assert_eq!(
            comps
                .iter()
                .find(|o| o.op_id == comp_id(w))
                .unwrap()
                .payload,
            json!({"refund": w})
        );
        // The one approved compensation dispatches, once.
        let report = lab
            .ws
            .dispatch(&comp_id(w), DispatchOptions::default())
            .unwrap();
        assert_eq!(report.outcome, "receipt");
        lab.assert_sound();
    }
}

/// A delayed writer: the real dispatch of the op, or a direct duplicate.
enum Writer {
    Dispatch(Box<PendingDispatch>),
    Direct(InFlight),
}

/// What a writer ended with: the effect it committed, or its refusal.
fn finish(writer: Writer, ws: &mut Workspace) -> Result<String, String> {
    match writer {
        Writer::Dispatch(pending) => {
            let report = ws.finish_dispatch(*pending).unwrap();
            report.effect_id.ok_or(format!(
                "exit {:?}: {}",
                report.receiver_exit_code, report.receiver_stderr
            ))
        }
        Writer::Direct(child) => {
            let outcome = child.finish().unwrap();
            outcome
                .receipt
                .map(|r| r.effect_id)
                .ok_or(format!("exit {:?}: {}", outcome.exit_code, outcome.stderr))
        }
    }
}

fn permit(writer: &mut Writer) {
    match writer {
        Writer::Dispatch(pending) => pending.child.permit().unwrap(),
        Writer::Direct(child) => child.permit().unwrap(),
    }
}

// SQLite only: the originals are held by the built-in ledger's permit drill, some called directly.
#[test]
fn a_closing_snapshot_racing_eight_delayed_originals_takes_each_or_refuses_it() {
    // How many racing writers the close took, over all repetitions: shows
    // that the interleavings really vary.
    let mut taken_by_close: BTreeMap<usize, usize> = BTreeMap::new();
    for rep in 0..scaled(REPETITIONS) {
        let mut lab = Lab::new();
        lab.ws.prepare("op", "pay", &payload()).unwrap();
        // Writer 0 is the real dispatch; 1 to 7 are direct duplicates (the
        // receiver is not idempotent). All are open and blocked on a permit.
        let pending = lab.held_dispatch("op");
        let op = pending.operation.clone();
        let mut writers = vec![Writer::Dispatch(Box::new(pending))];
        for _ in 1..8 {
            let call = ReceiverCall {
                wait_permit: true,
                ..ReceiverCall::for_operation(&op)
            };
            writers.push(Writer::Direct(
                dispatch::spawn(&program(), lab.path(), &call).unwrap(),
            ));
        }
        // Let `rep % 8` writers (from the end) finish before the race, so
        // every mix of early and racing writers is covered.
        let early = rep % 8;
        let mut outcomes: Vec<Result<String, String>> = Vec::new();
        for _ in 0..early {
            let mut writer = writers.pop().unwrap();
            permit(&mut writer);
            outcomes.push(finish(writer, &mut lab.ws));
        }
        let racing = writers.len();
        let barrier = Arc::new(Barrier::new(racing + 1));
        let handles: Vec<_> = writers
            .into_iter()
            .map(|mut writer| {
                let barrier = Arc::clone(&barrier);
                thread::spawn(move || {
                    barrier.wait();
                    permit(&mut writer);
                    writer
                })
            })
            .collect();
        // Even repetitions close from a `recon snapshot --close` process,
        // odd ones from this process (quicker off the mark).
        let dir = lab.path().to_path_buf();
        let closer = {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || -> (Vec<String>, Verdict) {
                if rep % 2 == 0 {
                    let ws = dir.display().to_string();
                    let args = ["snapshot", "--workspace", &ws, "op", "--json", "--close"];
                    let mut args = strings(&args);
                    args.extend(strings(&["--authorized-by", "closer"]));
                    let out = racer(args, &barrier).join().unwrap();
                    assert_eq!(out.code, Some(0), "{out:?}");
                    let v = out.json();
                    let ids = v["snapshot"]["matches"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|m| m["effect_id"].as_str().unwrap().to_string())
                        .collect();
                    (ids, serde_json::from_value(v["verdict"].clone()).unwrap())
                } else {
                    let mut ws = Workspace::open(&dir, OpenOptions::default()).unwrap();
                    barrier.wait();
                    let c = ws.snapshot("op", Some("closer")).unwrap();
                    let ids = c
                        .snapshot
                        .matches
                        .into_iter()
                        .map(|m| m.effect_id)
                        .collect();
                    (ids, c.verdict)
                }
            })
        };
        let writers: Vec<Writer> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let (matches, verdict) = closer.join().unwrap();
        for writer in writers {
            outcomes.push(finish(writer, &mut lab.ws));
        }
        // Each original is in the snapshot or was refused operation_closed.
        for outcome in &outcomes {
            match outcome {
                Ok(effect) => assert!(
                    matches.contains(effect),
                    "rep {rep}: {effect} committed but is not in the closing snapshot {matches:?}"
                ),
                Err(refusal) => assert!(
                    refusal.starts_with("exit Some(3)")
                        && refusal.contains("refused: operation_closed"),
                    "rep {rep}: a writer neither committed nor was refused by the close: {refusal}"
                ),
            }
        }
        let committed = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(
            committed,
            matches.len(),
            "rep {rep}: every match is some writer's receipt"
        );
        *taken_by_close.entry(committed - early).or_default() += 1;
        // Nothing beyond the snapshot ever lands, not even a ninth attempt.
        let late = run(
            &[
                "receiver",
                "apply",
                "--workspace",
                &lab.path_str(),
                "--op",
                "op",
                "--action",
                "pay",
                "--payload",
                &payload().to_string(),
            ],
            None,
        );
        assert_eq!(late.code, Some(3), "{late:?}");
        let ledger: Vec<String> = lab
            .ws
            .ledger(Some("op"))
            .unwrap()
            .into_iter()
            .map(|e| e.effect_id)
            .collect();
        assert_eq!(
            ledger, matches,
            "rep {rep}: the ledger is exactly the snapshot"
        );
        let closure = lab.ws.closure("op").unwrap().unwrap();
        assert_eq!(closure.effects_at_close, matches.len() as i64);
        let expected = match matches.len() {
            0 => Verdict::TerminalAbsence,
            1 => Verdict::UniqueExactMatch,
            _ => Verdict::DuplicateMatches,
        };
        assert_eq!(verdict, expected, "rep {rep}");
        assert_invariants(lab.path(), &direct("op", 8));
    }
    eprintln!("closing snapshot vs 8 delayed originals: racing writers taken by the close -> repetitions: {taken_by_close:?}");
}

// SQLite only: the dispatch is held by the built-in ledger's permit drill.
#[test]
fn a_reviewer_deciding_while_another_process_dispatches_never_doubles_a_decision() {
    // (variant, reviewer won) -> repetitions.
    let mut seen: BTreeMap<(&str, bool), usize> = BTreeMap::new();
    for rep in 0..scaled(REPETITIONS) {
        let mut lab = Lab::new();
        let ws = lab.path_str();
        lab.ws.prepare("op", "pay", &payload()).unwrap();
        lab.ws.prepare("other", "pay", &payload()).unwrap();
        // This process dispatches `op`: unknown is committed and the
        // receiver child waits for its permit.
        let pending = lab.held_dispatch("op");
        // Even repetitions: the reviewer confirms from an open read. Odd:
        // the reviewer closes and records not_applied.
        let closing = rep % 2 == 1;
        let mut review = strings(&["reconcile", "--workspace", &ws, "op", "--reviewer", "Rev"]);
        review.extend(strings(&["--expected-version", "2", "--json"]));
        if closing {
            review.extend(strings(&[
                "--decision",
                "not_applied",
                "--close",
                "--authorized-by",
                "Rev",
            ]));
        } else {
            review.extend(strings(&["--decision", "confirmed"]));
        }
        // A third process dispatches another op in the same workspace.
        let other = strings(&["dispatch", "--workspace", &ws, "other", "--json"]);
        let barrier = Arc::new(Barrier::new(3));
        let releaser = {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let mut pending = pending;
                barrier.wait();
                pending.child.permit().unwrap();
                pending
            })
        };
        let review = racer(review, &barrier);
        let other = racer(other, &barrier);
        let pending = releaser.join().unwrap();
        let report = lab.ws.finish_dispatch(pending).unwrap();
        let runs = [review.join().unwrap(), other.join().unwrap()];
        let (review, other) = (&runs[0], &runs[1]);
        assert_eq!(other.json()["outcome"], "receipt", "{other:?}");

        let op = lab.ws.require("op").unwrap();
        let evidence = lab.ws.evidence("op").unwrap();
        let effects = lab.ws.ledger(Some("op")).unwrap();
        let reviewer_won = review.code == Some(0);
        *seen
            .entry((
                if closing {
                    "close+not_applied"
                } else {
                    "confirmed"
                },
                reviewer_won,
            ))
            .or_default() += 1;
        assert_eq!(
            evidence.len(),
            1,
            "rep {rep}: exactly one decision: {evidence:?}"
        );
        let expected_source = if reviewer_won {
            EvidenceSource::Review
        } else {
            EvidenceSource::Receipt
        };
        assert_eq!(
            evidence[0].source, expected_source,
            "rep {rep}: {review:?} {report:?}"
        );
        if !reviewer_won {
            assert_eq!(review.code, Some(3), "rep {rep}: {review:?}");
            assert!(
                review.stderr.contains("refused: stale_version")
                    || review.stderr.contains("refused: unsupported_verdict"),
                "rep {rep}: {}",
                review.stderr
            );
        }
        match (closing, reviewer_won) {
            (true, true) => {
                // The close came first: the original was refused, nothing landed.
                assert_eq!(op.state, OpState::NotApplied);
                assert!(effects.is_empty());
                assert_eq!(report.receiver_exit_code, Some(3));
                assert!(report.receiver_stderr.contains("refused: operation_closed"));
            }
            _ => {
                // The original committed: one effect, confirmed on it, by
                // its receipt or by the reviewer, never both.
                assert_eq!(op.state, OpState::Confirmed, "rep {rep}: {review:?}");
                assert_eq!(effects.len(), 1);
                assert_eq!(op.confirmed_effect_id.as_ref(), Some(&effects[0].effect_id));
                assert_eq!(report.effect_id.as_ref(), Some(&effects[0].effect_id));
            }
        }
        assert_invariants(lab.path(), &none());
    }
    eprintln!("reviewer vs dispatch: (variant, reviewer won) -> repetitions: {seen:?}");
}

on_both_stores!(a_reviewer_stale_against_a_receipt_hears_what_changed);
fn a_reviewer_stale_against_a_receipt_hears_what_changed(store: Store) {
    // The deterministic end of the race above: the receipt lands first.
    let mut lab = Site::new(store);
    dispatched(&mut lab, "op", None);
    let r = lab.run(
        &[
            "reconcile",
            "op",
            "--reviewer",
            "Rev",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
        None,
    );
    assert_eq!(r.code, Some(3));
    assert!(
        r.stderr.contains("expected version 2, found 3; the operation is now confirmed (last changed by a receipt)"),
        "{}",
        r.stderr
    );
    lab.assert_sound();
}

on_both_stores!(times_are_taken_after_the_write_lock_so_at_never_goes_backwards_in_journal_order);
/// Times are read under the write lock. Writer A is held (a named hold
/// point, through a fifo) just before it takes the lock, after its command
/// started; writer B writes and commits meanwhile; then A goes on. A's
/// entry follows B's in the journal, and so does its time: `at` never goes
/// backwards in journal order, however the processes interleave. (A time
/// read before the lock, as the facade once did, would stamp A's later
/// entry with the earlier time.)
fn times_are_taken_after_the_write_lock_so_at_never_goes_backwards_in_journal_order(store: Store) {
    let mut lab = Site::new(store);
    lab.ws.prepare("op", "pay", &payload()).unwrap();
    let at = lab.args();
    let fifo = lab.scratch().join("hold");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let note = |by: &str| {
        let mut command = Command::new(recon_bin());
        command.arg("note").args(&at);
        command.args(["op", "--by", by, "--text", "t"]);
        command
    };
    let held = note("held")
        .env("RECON_HOLD_POINT", "store.before_write_lock")
        .env("RECON_HOLD_FIFO", &fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the held writer");
    // Opening the fifo for writing returns once the held writer is there.
    let mut hold = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let free = note("free").output().expect("run the free writer");
    assert_eq!(free.status.code(), Some(0), "{free:?}");
    writeln!(hold, "go").unwrap();
    drop(hold);
    let held = held.wait_with_output().unwrap();
    assert_eq!(held.status.code(), Some(0), "{held:?}");
    let detail = lab.reopen().show("op").unwrap();
    let notes: Vec<(&str, _)> = detail.notes.iter().map(|n| (n.by.as_str(), n.at)).collect();
    assert_eq!(
        notes.iter().map(|n| n.0).collect::<Vec<_>>(),
        ["free", "held"],
        "the held writer's entry comes second: {notes:?}"
    );
    let created = detail.operation.triage.created_at;
    assert!(
        created <= notes[0].1 && notes[0].1 <= notes[1].1,
        "times in journal order: {created:?} then {notes:?}"
    );
    lab.assert_sound();
}
