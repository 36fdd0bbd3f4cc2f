//! `verify --receivers` (SPEC 12): every final decision read again at its
//! receiver and held to what the receiver says now, on both stores.
//!
//! The forger (or the accident) here has the receiver's storage, not the
//! outbox's: it deletes an effect, writes one for an operation decided
//! `not_applied`, or removes a close tombstone, straight in the built-in
//! ledger's file (its guarding triggers dropped) or, on PostgreSQL, in the
//! fixture adapter's ledger file. recon's journal stays intact throughout,
//! so plain `verify` passes; only asking the receiver finds it.

use crate::cli::{assert_refused, Shell};
use crate::stores::{on_both_stores, Store};
use recon::domain::{
    contradiction, Effect, Found, OpKind, OpState, Operation, RestedClose, Snapshot, Triage,
};
use recon::receiver::Fault;
use rusqlite::Connection;
use serde_json::{json, Value};

/// The builtin ledger's file of a workspace shell, with the triggers
/// that keep its effects and tombstones dropped, for the forger's `sql`.
fn forge_ledger(sh: &Shell, sql: &str) {
    let conn = Connection::open(sh.ws.join("receiver.sqlite")).expect("the ledger's file");
    conn.execute_batch(
        "DROP TRIGGER IF EXISTS effects_append_only_delete;
         DROP TRIGGER IF EXISTS effects_refuse_closed;
         DROP TRIGGER IF EXISTS closed_ops_durable_delete;",
    )
    .expect("drop the ledger's triggers");
    conn.execute_batch(sql).expect("the forger's edit");
}

/// On PostgreSQL: the fixture adapter's ledger file, edited by `edit`.
fn forge_adapter(sh: &Shell, edit: impl FnOnce(&mut Value)) {
    let site = sh.postgres().expect("a PostgreSQL site");
    let path = site.scratch().join("adapter.json");
    let mut ledger: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the adapter's ledger"))
            .expect("its JSON");
    edit(&mut ledger);
    std::fs::write(&path, ledger.to_string()).expect("write the adapter's ledger");
}

/// Deletes every effect of `op` at its receiver.
fn delete_effects(sh: &Shell, op: &str) {
    match sh.store() {
        Store::Sqlite => forge_ledger(sh, &format!("DELETE FROM effects WHERE op_id = '{op}'")),
        Store::Postgres => forge_adapter(sh, |ledger| {
            let effects = ledger["effects"].as_array_mut().expect("effects");
            effects.retain(|e| e["op_id"] != op);
        }),
    }
}

/// Removes `op`'s close tombstone at its receiver.
fn delete_tombstone(sh: &Shell, op: &str) {
    match sh.store() {
        Store::Sqlite => forge_ledger(sh, &format!("DELETE FROM closed_ops WHERE op_id = '{op}'")),
        Store::Postgres => forge_adapter(sh, |ledger| {
            let closed = ledger["closed"].as_object_mut().expect("closes");
            closed.remove(op);
        }),
    }
}

/// Writes an effect for `op` at its receiver, closed or not.
fn write_effect(sh: &Shell, op: &str, payload: &str) {
    match sh.store() {
        Store::Sqlite => forge_ledger(
            sh,
            &format!(
                "INSERT INTO effects (effect_id, op_id, action_kind, compensates_effect_id, payload)
                 VALUES ('fx-forged', '{op}', 'pay', NULL, '{payload}')"
            ),
        ),
        Store::Postgres => sh.effect_behind(op, "pay", payload),
    }
}

/// An outbox on `store` with a decision of each source:
/// - `a`: confirmed by its receipt;
/// - `b`: never applied, decided `not_applied` on a closing read;
/// - `c`: applied, its receipt lost, confirmed on an open read.
fn decided(store: Store) -> Shell {
    let sh = Shell::on(store);
    sh.prepare("a", "pay", r#"{"op":"a"}"#);
    sh.ok(&["dispatch", "a"]);
    for (op, fault) in [
        ("b", Fault::CrashBeforeCommit),
        ("c", Fault::CrashAfterCommit),
    ] {
        sh.prepare(op, "pay", &json!({ "op": op }).to_string());
        sh.faulted(&["dispatch", op], fault);
    }
    sh.closed_not_applied("b", "2", "ann");
    sh.ok(&[
        "reconcile",
        "c",
        "--reviewer",
        "ann",
        "--decision",
        "confirmed",
        "--expected-version",
        "2",
    ]);
    sh
}

/// `verify --receivers [EXTRA] --json`: its exit code and report.
fn recheck(sh: &Shell, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["verify", "--receivers", "--json"];
    args.extend(extra);
    let out = sh.run(&args);
    let code = out.code.expect("an exit code");
    assert!(matches!(code, 0 | 1 | 4), "{code}: {}", out.stderr);
    (code, out.json())
}

/// The journal's head now (`checkpoint --json`'s length).
fn head(sh: &Shell) -> i64 {
    sh.json(&["checkpoint"])["length"]
        .as_i64()
        .expect("a length")
}

fn observations(sh: &Shell, op: &str) -> usize {
    let shown = sh.json(&["show", op]);
    shown["observations"]
        .as_array()
        .expect("observations")
        .len()
}

on_both_stores!(a_confirmed_effect_deleted_at_the_receiver_is_recorded_and_marked_contradicted);
fn a_confirmed_effect_deleted_at_the_receiver_is_recorded_and_marked_contradicted(store: Store) {
    let sh = decided(store);
    delete_effects(&sh, "a");
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["checked"], 3, "{report}");
    let found = &report["contradicted"];
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{report}");
    let a = &found[0];
    assert_eq!(
        (&a["op_id"], &a["decision"], &a["found"], &a["recorded"]),
        (
            &json!("a"),
            &json!("confirmed"),
            &json!("effect_gone"),
            &json!(true)
        ),
        "{report}"
    );
    assert_eq!(report["unchecked"], json!({}), "{report}");
    assert_eq!(
        report["through_seq"].as_i64(),
        Some(head(&sh) - 1),
        "{report}"
    );
    // The observation it recorded marks the operation, as `show` and
    // `ops --contradicted yes` say.
    let shown = sh.json(&["show", "a"]);
    assert_eq!(
        shown["operation"]["contradicted"]["seq"], a["seq"],
        "{shown}"
    );
    let listed = sh.json(&["ops", "--state", "all", "--contradicted", "yes"]);
    let ids: Vec<&str> = (listed.as_array().expect("a page").iter())
        .map(|op| op["op_id"].as_str().expect("an op id"))
        .collect();
    assert_eq!(ids, ["a"], "{listed}");
    // The journal itself is intact: only the receiver was edited.
    sh.ok(&["verify"]);
    // In words: the operation, what was found, and the summary.
    let out = sh.run(&["verify", "--receivers"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("contradicted: a (confirmed, decided at entry ")
            && out
                .stdout
                .contains("effect_gone; already marked by observation"),
        "{}",
        out.stdout
    );
}

on_both_stores!(a_not_applied_operation_whose_receiver_now_holds_an_effect_is_contradicted);
fn a_not_applied_operation_whose_receiver_now_holds_an_effect_is_contradicted(store: Store) {
    let sh = decided(store);
    write_effect(&sh, "b", r#"{"op":"b"}"#);
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 1, "{report}");
    let b = &report["contradicted"][0];
    assert_eq!(
        (&b["op_id"], &b["decision"], &b["found"]),
        (&json!("b"), &json!("not_applied"), &json!("effect_held")),
        "{report}"
    );
    assert_eq!(report["contradicted"].as_array().map(Vec::len), Some(1));
    assert!(sh.json(&["show", "b"])["operation"]["contradicted"].is_object());
}

on_both_stores!(a_decision_whose_close_tombstone_is_gone_at_the_receiver_is_contradicted);
fn a_decision_whose_close_tombstone_is_gone_at_the_receiver_is_contradicted(store: Store) {
    let sh = decided(store);
    delete_tombstone(&sh, "b");
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 1, "{report}");
    let b = &report["contradicted"][0];
    assert_eq!(
        (&b["op_id"], &b["found"]),
        (&json!("b"), &json!("tombstone_gone")),
        "{report}"
    );
    // `c` was decided on an open read: no tombstone to lose.
    assert_eq!(report["contradicted"].as_array().map(Vec::len), Some(1));
}

on_both_stores!(every_decision_its_receiver_still_holds_exits_0_with_each_one_checked);
fn every_decision_its_receiver_still_holds_exits_0_with_each_one_checked(store: Store) {
    let sh = decided(store);
    // A confirmed compensation is checked too.
    let effect = sh.effects(Some("a"))[0]["effect_id"]
        .as_str()
        .expect("a's effect")
        .to_string();
    sh.ok(&[
        "approve-compensation",
        "a",
        "--effect",
        &effect,
        "--approver",
        "bob",
        "--expected-version",
        "3",
        "--compensation-op",
        "undo-a",
        "--action",
        "refund",
        "--payload",
        "{}",
    ]);
    sh.ok(&["dispatch", "undo-a"]);
    let before = sh.dump();
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report,
        json!({"checked": 4, "contradicted": [], "unchecked": {}, "through_seq": head(&sh)})
    );
    // A run that finds nothing records nothing.
    assert_eq!(sh.dump(), before);
    let out = sh.ok(&["verify", "--receivers"]);
    assert!(
        out.stdout
            .starts_with("checked 4 decisions at their receivers through journal entry "),
        "{}",
        out.stdout
    );
}

on_both_stores!(a_kept_duplicate_its_receiver_shows_with_surplus_and_compensation_is_consistent);
fn a_kept_duplicate_its_receiver_shows_with_surplus_and_compensation_is_consistent(store: Store) {
    let sh = Shell::on(store);
    let payload = r#"{"amount":10}"#;
    sh.prepare("dup", "pay", payload);
    sh.faulted(&["dispatch", "dup"], Fault::CrashAfterCommit);
    sh.effect_behind("dup", "pay", payload);
    let effects = sh.effects(Some("dup"));
    let id = |i: usize| effects[i]["effect_id"].as_str().expect("an id").to_string();
    let (kept, surplus) = (id(0), id(1));
    sh.ok(&[
        "reconcile",
        "dup",
        "--reviewer",
        "ann",
        "--decision",
        "confirmed",
        "--keep",
        &kept,
        "--expected-version",
        "2",
        "--close",
        "--authorized-by",
        "ann",
    ]);
    sh.ok(&[
        "approve-compensation",
        "dup",
        "--effect",
        &surplus,
        "--approver",
        "bob",
        "--expected-version",
        "3",
        "--compensation-op",
        "undo-dup",
        "--action",
        "refund",
        "--payload",
        payload,
        "--reason",
        "duplicate",
    ]);
    sh.ok(&["dispatch", "undo-dup"]);
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["checked"], 2, "{report}");
    // A third effect the decision did not list is one.
    write_effect(&sh, "dup", payload);
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        report["contradicted"][0]["found"], "other_effect",
        "{report}"
    );
}

/// Registers the fixture adapter as `flaky` for `fax`, its misbehaviour
/// read from the file it returns.
fn flaky(sh: &Shell) -> std::path::PathBuf {
    let dir = match sh.postgres() {
        Some(site) => site.scratch().to_path_buf(),
        None => sh.ws.clone(),
    };
    let (mode, state) = (dir.join("flaky.mode"), dir.join("flaky.state"));
    let adapter = crate::support::adapter_fixture();
    sh.ok(&[
        "receivers",
        "add",
        "flaky",
        "--actions",
        "fax",
        "--",
        adapter.to_str().expect("a path"),
        "--state",
        state.to_str().expect("a path"),
        "--mode-file",
        mode.to_str().expect("a path"),
    ]);
    mode
}

on_both_stores!(a_receiver_that_cannot_be_read_is_unchecked_with_its_reason_and_exits_4);
fn a_receiver_that_cannot_be_read_is_unchecked_with_its_reason_and_exits_4(store: Store) {
    let sh = decided(store);
    let mode = flaky(&sh);
    sh.prepare("m5", "fax", "{}");
    assert_eq!(sh.json(&["dispatch", "m5"])["outcome"], "receipt");
    std::fs::write(&mode, "query:error-unavailable").expect("the mode file");
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 4, "{report}");
    assert_eq!(
        (
            &report["checked"],
            &report["unchecked"],
            &report["contradicted"]
        ),
        (&json!(3), &json!({"unavailable": 1}), &json!([])),
        "{report}"
    );
    std::fs::write(&mode, "query:crash-now").expect("the mode file");
    assert_eq!(recheck(&sh, &[]).1["unchecked"], json!({"crash": 1}));
    // Its registration removed (nothing open routes to it): receiver_gone.
    sh.ok(&["receivers", "remove", "flaky"]);
    assert_eq!(
        recheck(&sh, &[]).1["unchecked"],
        json!({"receiver_gone": 1})
    );
    // A contradiction elsewhere makes it exit 1 all the same.
    delete_effects(&sh, "c");
    let (code, report) = recheck(&sh, &[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["unchecked"], json!({"receiver_gone": 1}), "{report}");
    let out = sh.run(&["verify", "--receivers"]);
    assert!(
        out.stdout
            .contains("unchecked: 1 (receiver not read: receiver_gone)"),
        "{}",
        out.stdout
    );
}

on_both_stores!(since_checks_only_decisions_journaled_after_it_and_reports_the_head);
fn since_checks_only_decisions_journaled_after_it_and_reports_the_head(store: Store) {
    let sh = decided(store);
    let seen = head(&sh);
    sh.prepare("d", "pay", r#"{"op":"d"}"#);
    sh.ok(&["dispatch", "d"]);
    delete_effects(&sh, "a");
    let since = seen.to_string();
    let (code, report) = recheck(&sh, &["--since", &since]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report,
        json!({"checked": 1, "contradicted": [], "unchecked": {}, "through_seq": head(&sh)})
    );
    // Past the head, nothing; a full run finds `a`.
    let through = report["through_seq"].to_string();
    assert_eq!(recheck(&sh, &["--since", &through]).1["checked"], 0);
    let (code, report) = recheck(&sh, &[]);
    assert_eq!((code, &report["checked"]), (1, &json!(4)), "{report}");
}

on_both_stores!(
    a_contradiction_is_recorded_once_while_its_marker_is_up_and_again_after_acknowledge
);
fn a_contradiction_is_recorded_once_while_its_marker_is_up_and_again_after_acknowledge(
    store: Store,
) {
    let sh = decided(store);
    delete_effects(&sh, "a");
    let (_, first) = recheck(&sh, &[]);
    let marked = first["contradicted"][0]["seq"].clone();
    assert_eq!(observations(&sh, "a"), 1);
    // Found again: reported (exit 1) with the marker that is up, nothing
    // recorded.
    let before = sh.dump();
    let (code, again) = recheck(&sh, &[]);
    assert_eq!(code, 1, "{again}");
    let a = &again["contradicted"][0];
    assert_eq!(
        (&a["seq"], &a["recorded"]),
        (&marked, &json!(false)),
        "{again}"
    );
    assert_eq!(sh.dump(), before);
    // Acknowledged, the next run that finds it marks it again.
    sh.ok(&[
        "acknowledge",
        "a",
        "--by",
        "ann",
        "--reason",
        "looking into it",
    ]);
    let (_, third) = recheck(&sh, &[]);
    let a = &third["contradicted"][0];
    assert_eq!(a["recorded"], true, "{third}");
    assert_ne!(a["seq"], marked, "{third}");
    assert_eq!(observations(&sh, "a"), 2);
    sh.ok(&["verify"]);
}

#[test]
fn since_without_receivers_and_receivers_with_a_journal_check_are_usage_errors() {
    let sh = Shell::with_ledger();
    for args in [
        &["verify", "--since", "3"][..],
        &["verify", "--receivers", "--checkpoint", "1:ab"],
        &["verify", "--receivers", "--since", "-1"],
    ] {
        let out = sh.run(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    }
    // Plain verify is as it was.
    sh.ok(&["verify"]);
}

#[test]
fn in_team_mode_verify_receivers_needs_the_reviewer_role() {
    let store = Store::Postgres;
    if !store.available("in_team_mode_verify_receivers_needs_the_reviewer_role") {
        return;
    }
    let sh = decided(store);
    let site = sh.postgres().expect("the site");
    let url = site.args()[1].clone();
    let pg = crate::real_receivers::servers::postgres()
        .as_ref()
        .expect("the cluster");
    let database = url.rsplit('/').next().expect("a database").to_string();
    let database = database.split('?').next().expect("a name").to_string();
    let reader =
        crate::pg_store::roles::login(pg, &url, &format!("{database}_r"), &["recon_reader"]);
    let out = crate::support::run(&["verify", "--receivers", "--database", &reader], None);
    assert_refused(&out, "permission_denied");
    let reviewer = crate::pg_store::roles::login(
        pg,
        &url,
        &format!("{database}_v"),
        &["recon_reader", "recon_reviewer"],
    );
    delete_effects(&sh, "a");
    let out = crate::support::run(
        &["verify", "--receivers", "--json", "--database", &reviewer],
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let shown = sh.json(&["show", "a"]);
    let observed_by = &shown["observations"][0]["observed_by"];
    assert_eq!(observed_by, &json!(format!("{database}_v")), "{shown}");
}

fn op(state: OpState, confirmed: Option<&str>) -> Operation {
    Operation {
        op_id: "op".into(),
        kind: OpKind::Original,
        action_kind: "pay".into(),
        payload: json!({"n": 1}),
        state,
        version: 3,
        compensates_effect_id: None,
        compensates_op_id: None,
        confirmed_effect_id: confirmed.map(str::to_string),
        surplus_effect_ids: Vec::new(),
        receiver: "builtin".into(),
        triage: Triage::default(),
    }
}

fn read(ids: &[&str], closed_by: Option<&str>) -> Snapshot {
    Snapshot {
        op_id: "op".into(),
        matches: (ids.iter())
            .map(|id| Effect {
                effect_id: id.to_string(),
                op_id: "op".into(),
                action_kind: "pay".into(),
                compensates_effect_id: None,
                payload: json!({"n": 1}),
            })
            .collect(),
        complete: true,
        authoritative: true,
        closed: closed_by.is_some(),
        closed_by: closed_by.filter(|by| !by.is_empty()).map(str::to_string),
    }
}

#[track_caller]
fn check(op: &Operation, rested: Option<Option<&str>>, now: &Snapshot, expected: Option<Found>) {
    let rested = rested.map(|by| RestedClose {
        closed_by: by.map(str::to_string),
    });
    assert_eq!(contradiction(op, rested.as_ref(), now), expected);
}

/// The one rule, case by case: `Some("")` in `read` is closed without a
/// closing login.
#[test]
fn the_rule_of_a_read_against_a_decision_names_what_it_found() {
    let confirmed = op(OpState::Confirmed, Some("fx-1"));
    let not_applied = op(OpState::NotApplied, None);
    check(&confirmed, None, &read(&["fx-1"], None), None);
    check(&confirmed, None, &read(&[], None), Some(Found::EffectGone));
    check(
        &confirmed,
        None,
        &read(&["fx-2"], None),
        Some(Found::OtherEffect),
    );
    check(
        &confirmed,
        None,
        &read(&["fx-1", "fx-2"], None),
        Some(Found::OtherEffect),
    );
    check(
        &not_applied,
        None,
        &read(&["fx-1"], None),
        Some(Found::EffectHeld),
    );
    check(&not_applied, None, &read(&[], None), None);
    // Held to the close the decision rested on.
    check(&not_applied, Some(None), &read(&[], Some("")), None);
    check(
        &not_applied,
        Some(None),
        &read(&[], None),
        Some(Found::TombstoneGone),
    );
    check(
        &not_applied,
        Some(Some("ann")),
        &read(&[], Some("ann")),
        None,
    );
    check(&not_applied, Some(Some("ann")), &read(&[], Some("")), None);
    check(&not_applied, Some(None), &read(&[], Some("eve")), None);
    check(
        &not_applied,
        Some(Some("ann")),
        &read(&[], Some("eve")),
        Some(Found::ClosedByDiffers),
    );
    // What section 9 finds comes first.
    check(
        &confirmed,
        Some(Some("ann")),
        &read(&[], None),
        Some(Found::EffectGone),
    );
    // Nothing to contradict before a decision.
    check(
        &op(OpState::Unknown, None),
        Some(None),
        &read(&["fx-1"], None),
        None,
    );
}
