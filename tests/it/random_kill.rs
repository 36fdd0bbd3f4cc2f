//! The random-kill harness (`random_kill/harness.rs`) as tests, on both
//! stores (`crate::stores`): a scripted workload whose every step is a
//! real `recon` process killed with SIGKILL at a random moment or left to
//! finish, and after every step the outbox's invariants and `recon
//! verify`. A bounded run is a test; `cargo bench --bench random_kill` is
//! the long run on SQLite (`RECON_KILLS`, `RECON_KILL_SEED`).
//!
//! On SQLite the invariants are those of `invariants.rs`, read from both
//! files. On PostgreSQL they are read through the library and the
//! adapter's ledger: no operation dispatched twice, no effect doubled,
//! every operation's state, version, evidence and effects in agreement.

pub mod harness;

use crate::stores::{on_both_stores, Site, Store};
use harness::{recon_bin, run, run_on, Kills, Outbox, Report};
use recon::receiver::Fault;
use recon::Workspace;
use std::time::Duration;

impl Outbox for Site {
    fn location(&self) -> Vec<String> {
        self.args()
    }

    fn arm(&self, fault: Fault) -> Vec<String> {
        self.set_crash(Some(fault));
        Vec::new()
    }

    fn disarm(&self) {
        self.set_crash(None);
    }

    fn violations(&self) -> Vec<String> {
        let ws = self.reopen();
        let ops = ws.ops(None, None, usize::MAX).expect("list the ops");
        let mut out: Vec<String> = ops.iter().flat_map(|op| illegal(self, &ws, op)).collect();
        for effect in self.ledger(None) {
            if !ops.iter().any(|op| op.op_id == effect.op_id) {
                out.push(format!("effect {} names no operation", effect.effect_id));
            }
        }
        out
    }
}

/// What is wrong with `op` against its dispatches, evidence, approvals
/// and the receiver's effects, in words.
fn illegal(site: &Site, ws: &Workspace, op: &recon::domain::Operation) -> Vec<String> {
    use recon::domain::{OpKind, OpState};
    let id = &op.op_id;
    let d = ws.dispatch_count(id).expect("count dispatches");
    let ev = ws.evidence(id).expect("read evidence").len() as i64;
    let effects = site.ledger(Some(id));
    let decided = matches!(op.state, OpState::Confirmed | OpState::NotApplied);
    let mut out = Vec::new();
    let mut check = |holds: bool, what: String| {
        if !holds {
            out.push(format!("{id} ({:?} v{}): {what}", op.state, op.version));
        }
    };
    check(d <= 1, format!("dispatched {d} times"));
    check(
        (d == 0) == (op.state == OpState::Prepared),
        format!("{d} dispatches"),
    );
    check(
        decided == (ev == 1) && ev <= 1,
        format!("{ev} evidence rows"),
    );
    check(
        op.version == 1 + d + ev,
        format!("after {d} dispatches and {ev} evidence rows"),
    );
    check(
        effects.len() <= 1,
        format!("{} effects: one doubled", effects.len()),
    );
    check(
        d == 1 || effects.is_empty(),
        "an effect before its dispatch".into(),
    );
    let effect = effects.first().map(|e| e.effect_id.clone());
    match op.state {
        OpState::Confirmed => check(
            op.confirmed_effect_id == effect,
            format!("confirms {:?}", op.confirmed_effect_id),
        ),
        OpState::NotApplied => check(
            effect.is_none() && site.closed(id),
            "not applied, yet open or with an effect".into(),
        ),
        _ => check(
            op.confirmed_effect_id.is_none(),
            "names a confirmed effect".into(),
        ),
    }
    if op.kind == OpKind::Compensation {
        let original = op.compensates_op_id.as_deref().unwrap_or_default();
        let approvals = ws.approvals(original).expect("read approvals");
        let approved = approvals.iter().any(|a| &a.compensation_op_id == id);
        check(
            approved,
            format!("a compensation of {original} without its approval"),
        );
    }
    out
}

/// The seed of a run: `RECON_KILL_SEED`, or a fixed one.
fn seed() -> u64 {
    std::env::var("RECON_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe)
}

#[track_caller]
fn assert_meaningful(store: Store, seed: u64, report: &Report) {
    eprintln!(
        "random kills on {store:?} (seed {seed:#x}): {} steps, {} killed, {} finished",
        report.steps, report.killed, report.finished
    );
    assert!(
        report.killed > report.steps / 10,
        "too few kills to mean anything: {report:?}"
    );
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
}

on_both_stores!(processes_killed_at_random_moments_break_no_invariant_and_verify_holds);
fn processes_killed_at_random_moments_break_no_invariant_and_verify_holds(store: Store) {
    let seed = seed();
    let report = match store {
        Store::Sqlite => {
            let steps = crate::stress::scaled(250) as u64;
            let dir = tempfile::tempdir().unwrap();
            run(
                &recon_bin(),
                dir.path(),
                steps,
                seed,
                Duration::from_millis(12),
            )
        }
        Store::Postgres => {
            let steps = crate::stress::scaled(PG_STEPS) as u64;
            let site = Site::new(store);
            run_on(&recon_bin(), &site, steps, seed, PG_KILLS)
        }
    };
    assert_meaningful(store, seed, &report);
}

/// Fewer steps on PostgreSQL than SQLite's 250: a step that reaches the
/// receiver spawns the Python adapter (a dispatch takes some 350 ms here,
/// a closing review 500 ms), so the run keeps to about twenty seconds.
const PG_STEPS: usize = 80;

/// A window about as long as a dispatch, so a kill can land anywhere in
/// one; and a third of the steps spared, or few dispatches would finish
/// and the flows would not reach their decisions and compensations.
const PG_KILLS: Kills = Kills {
    window: Duration::from_millis(400),
    spared_percent: 30,
};

// PostgreSQL only: SQLite's invariants prove their own in invariants.rs.
#[test]
fn the_postgres_checker_sees_a_doubled_effect_and_an_effect_without_an_operation() {
    if !Store::Postgres.available(
        "random_kill::the_postgres_checker_sees_a_doubled_effect_and_an_effect_without_an_operation",
    ) {
        return;
    }
    let mut site = Site::new(Store::Postgres);
    let payload = serde_json::json!({"n": 1});
    site.dispatched("op", "pay", &payload, None);
    assert_eq!(site.violations(), Vec::<String>::new());
    for op_id in ["op", "ghost"] {
        let request = recon::domain::EffectRequest {
            op_id,
            action_kind: "pay",
            payload: &payload,
            compensates_effect_id: None,
        };
        site.direct_apply(&request).expect("a direct write");
    }
    assert_eq!(
        site.violations(),
        [
            "op (Confirmed v3): 2 effects: one doubled",
            "effect fx-000003 names no operation",
        ]
    );
}
