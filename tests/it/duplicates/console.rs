//! Keep one in the console (SPEC 14, issue 33): on a closed exact
//! duplicate the verdict panel offers "keep one", a picker lists the
//! matches side by side and the cursor picks the kept one; the header then
//! counts the surplus effects awaiting compensation and the queue marks
//! the operation with `+`, each surplus effect offers its compensation
//! (reason `duplicate`), and the count goes to 0 once it is approved. A
//! duplicate whose matches differ says why in words and offers no keep.
//! Headless through `update`, and in a real terminal (tmux).

use crate::support::{run, Lab};
use crate::terminal::Tmux;
use recon::console::app::{KeepChoice, KeepPicker, Mode};
use recon::console::keys::parse_keys;
use recon::console::screenshot::to_text;
use recon::console::{self, App, Options, Source};
use recon::domain::duplicates::{awaiting, payload_hash, why_not_keep};
use recon::domain::{Approval, Effect, OpKind, OpState, Operation, Snapshot, Triage, Verdict};
use recon::receiver::Fault;
use serde_json::json;

const PAYLOAD: &str = r#"{"amount":10,"to":"acct-7"}"#;

/// `op-1` unknown at version 2 with two effects at the built-in ledger,
/// the second written behind recon's back with `second` as its payload;
/// the effect ids in write order.
fn duplicated_with(second: &str) -> (Lab, Vec<String>) {
    let mut lab = Lab::new();
    let payload: serde_json::Value = serde_json::from_str(PAYLOAD).unwrap();
    lab.dispatched("op-1", "pay", &payload, Some(Fault::CrashAfterCommit));
    let ws = lab.path_str();
    let args = ["receiver", "apply", "--workspace", &ws, "--op", "op-1"];
    let out = run(
        &[&args[..], &["--action", "pay", "--payload", second]].concat(),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let ids: Vec<String> = (lab.ws.ledger(Some("op-1")).expect("the ledger").into_iter())
        .map(|e| e.effect_id)
        .collect();
    assert_eq!(ids.len(), 2, "two effects: {ids:?}");
    (lab, ids)
}

fn console(lab: &Lab) -> App {
    console_sized(lab, (120, 40))
}

fn console_sized(lab: &Lab, size: (u16, u16)) -> App {
    let source = Source {
        location: lab.path().into(),
        temporary_demo: false,
    };
    let options = Options {
        reviewer: Some("ada".to_string()),
        colours: recon::console::theme::Choice::plain(true),
    };
    App::open(lab.reopen(), source, options, size).expect("open console")
}

#[track_caller]
fn press(app: &mut App, keys: &str) {
    console::run_headless(app, &parse_keys(keys).expect("key syntax"));
}

fn screen(app: &App) -> String {
    to_text(&console::render(app))
}

#[test]
fn keeping_one_with_the_cursor_counts_marks_and_compensates_the_surplus() {
    let (lab, ids) = duplicated_with(PAYLOAD);
    let mut app = console(&lab);
    press(&mut app, "xy");
    let shown = screen(&app);
    assert!(shown.contains("o keep one: available"), "{shown}");
    let bar = shown.lines().last().unwrap_or_default();
    assert!(
        bar.contains("o keep one"),
        "on the bar where allowed: {bar}"
    );
    press(&mut app, "o");
    let Mode::Keep(picker) = &app.mode else {
        panic!("no picker: {:?}", app.mode);
    };
    let hashes: Vec<&str> = (picker.choices.iter())
        .map(|c| c.payload_hash.as_str())
        .collect();
    assert_eq!(hashes[0], hashes[1], "an exact duplicate hashes alike");
    let shown = screen(&app);
    for id in &ids {
        assert!(shown.contains(&format!("{id}  {}", hashes[0])), "{shown}");
    }
    press(&mut app, "j<enter>");
    let Mode::Confirm(pending) = &app.mode else {
        panic!("no confirmation: {:?}", app.mode);
    };
    assert!(pending.lines[0].contains(&format!("keeping effect {}", ids[1])));
    press(&mut app, "y");
    let op = lab.reopen().require("op-1").unwrap();
    assert_eq!(op.state, OpState::Confirmed);
    assert_eq!(op.confirmed_effect_id.as_deref(), Some(ids[1].as_str()));
    assert_eq!(op.surplus_effect_ids, [ids[0].clone()]);
    assert_eq!(app.surplus.get("op-1"), Some(&1));
    press(&mut app, "3");
    let shown = screen(&app);
    assert!(shown.contains("+1 surplus to compensate"), "{shown}");
    assert!(shown.contains("> + op-1"), "{shown}");
    assert!(
        shown.contains(&format!("surplus {}: awaiting compensation", ids[0])),
        "{shown}"
    );
    press(&mut app, "a");
    let Mode::Compensate(form) = &app.mode else {
        panic!("no form: {:?}", app.mode);
    };
    assert_eq!(
        (form.effect_id.as_str(), form.reason.as_deref()),
        (ids[0].as_str(), Some("duplicate"))
    );
    press(&mut app, "<enter>y");
    let approvals = lab.reopen().approvals("op-1").unwrap();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0].effect_id, ids[0]);
    // The store keeps the reason in the approval's journal entry.
    let export = run(&["export", "--workspace", &lab.path_str()], None);
    let approved = (export.stdout.lines())
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("an entry"))
        .find(|e| e["kind"] == "approved")
        .expect("an approved entry");
    assert_eq!(approved["reason"], "duplicate", "{approved}");
    assert_eq!(app.surplus.get("op-1"), Some(&0));
    let shown = screen(&app);
    assert!(
        !shown.contains("surplus to compensate"),
        "none awaits: {shown}"
    );
    assert!(!shown.contains("> + op-1"), "{shown}");
}

#[test]
fn at_80x24_the_picker_the_header_count_and_the_queue_mark_are_in_view() {
    let (lab, ids) = duplicated_with(PAYLOAD);
    let mut app = console_sized(&lab, (80, 24));
    press(&mut app, "xyo");
    let shown = screen(&app);
    for id in &ids {
        assert!(shown.contains(id.as_str()), "{shown}");
    }
    assert!(shown.contains("Enter: keep this one"), "{shown}");
    press(&mut app, "<enter>y3");
    let shown = screen(&app);
    let header = shown.lines().nth(1).unwrap_or_default();
    assert!(header.ends_with("  +1 surplus"), "{header}");
    assert!(
        header.contains("3 confirmed"),
        "the tabs keep their names: {header}"
    );
    assert!(shown.contains("> + op-1"), "{shown}");
}

#[test]
fn a_duplicate_whose_matches_differ_says_why_and_offers_no_keep() {
    let (lab, _) = duplicated_with(r#"{"amount":11,"to":"acct-7"}"#);
    let mut app = console(&lab);
    press(&mut app, "xy");
    let shown = screen(&app);
    assert!(shown.contains("Verdict: duplicate_matches"), "{shown}");
    assert!(shown.contains("o keep one: unavailable"), "{shown}");
    assert!(shown.contains("duplicates that differ"), "{shown}");
    assert!(!shown.contains("o keep one  "), "not on the bar:\n{shown}");
    press(&mut app, "o");
    assert!(matches!(app.mode, Mode::Normal), "{:?}", app.mode);
    let status = app
        .status
        .as_ref()
        .map(|s| s.text.clone())
        .unwrap_or_default();
    assert!(
        status.starts_with("keep one is unavailable:") && status.contains("differs"),
        "{status}"
    );
    let op = lab.reopen().require("op-1").unwrap();
    assert_eq!((op.state, op.version), (OpState::Unknown, 2));
}

#[test]
fn keep_one_waits_for_a_closing_snapshot_and_names_its_key() {
    let (lab, _) = duplicated_with(PAYLOAD);
    let app = console(&lab);
    let why = app.availability(recon::console::action::Request::Keep);
    let why = why.expect_err("not on an open read");
    assert!(
        why.contains("not closed") && why.ends_with("x takes a closing snapshot"),
        "{why}"
    );
}

/// A duplicate of `op-1` in a real terminal, closed by ada there, so that
/// keeping one is offered; `None` where tmux cannot start.
fn closed_duplicate_in_a_terminal() -> Option<(Lab, Vec<String>, Tmux)> {
    let (lab, ids) = duplicated_with(PAYLOAD);
    let ws = lab.path_str();
    let args = ["--workspace", ws.as_str(), "--reviewer", "ada"];
    let tmux = Tmux::start_with_env(&[], &args, (120, 40))?;
    tmux.shows("Verdict: duplicate_matches");
    tmux.press_until_shown(&["x"], "Confirm: closing snapshot");
    tmux.press_until_shown(&["y"], "o keep one: available");
    Some((lab, ids, tmux))
}

/// The real terminal: close, keep the second match with the cursor, see the
/// header count and the queue mark, approve the surplus's compensation and
/// see the count gone.
#[test]
fn the_real_terminal_keeps_one_of_a_duplicate_and_compensates_the_surplus() {
    let Some((_lab, ids, tmux)) = closed_duplicate_in_a_terminal() else {
        return;
    };
    tmux.press_until_shown(&["o"], "Keep one");
    tmux.press_until_shown(&["j"], &format!("> {}", ids[1]));
    tmux.press_until_shown(&["Enter"], &format!("keeping effect {}", ids[1]));
    tmux.press_until_shown(&["y"], "+1 surplus to compensate");
    tmux.press_until_shown(&["3"], "> + op-1");
    tmux.press_until_shown(&["a"], "surplus effect");
    tmux.press_until_shown(&["Enter"], "Confirm: approve compensation");
    let compensated = format!("surplus {}: compensated by", ids[0]);
    tmux.keys(&["y"]);
    // The panel, the filter bar and the queue are drawn by one refresh;
    // the filter bar (the screen's second line) then counts none.
    let screen = tmux.wait_until("the approval drawn everywhere", |screen| {
        let bar = screen.lines().nth(1).unwrap_or_default();
        screen.contains(&compensated) && !bar.contains("surplus")
    });
    assert!(!screen.contains("> + op-1"), "{screen}");
}

/// A note another process leaves on the operation while the picker is
/// open closes the picker with nothing written, and says who changed it.
#[test]
fn the_real_terminal_closes_the_keep_picker_when_the_operation_changes() {
    let Some((lab, _, tmux)) = closed_duplicate_in_a_terminal() else {
        return;
    };
    let ws = lab.path_str();
    tmux.press_until_shown(&["o"], "Enter: keep this one");
    let note = [
        "note",
        "--workspace",
        &ws,
        "op-1",
        "--by",
        "bob",
        "--text",
        "wait",
    ];
    let out = run(&note, None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let screen = tmux.shows("keep one closed, nothing written: op-1 noted by bob");
    assert!(!screen.contains("Enter: keep this one"), "{screen}");
    let op = lab.reopen().require("op-1").unwrap();
    assert_eq!((op.state, op.version), (OpState::Unknown, 2));
}

// ---- the pure rules the console asks ------------------------------------

fn effect(id: &str, payload: serde_json::Value) -> Effect {
    Effect {
        effect_id: id.to_string(),
        op_id: "op-1".to_string(),
        action_kind: "pay".to_string(),
        compensates_effect_id: None,
        payload,
    }
}

fn snapshot(matches: Vec<Effect>, closed: bool) -> Snapshot {
    Snapshot {
        op_id: "op-1".to_string(),
        matches,
        complete: true,
        authoritative: true,
        closed,
        closed_by: None,
    }
}

fn original(payload: serde_json::Value, state: OpState) -> Operation {
    Operation {
        op_id: "op-1".into(),
        kind: OpKind::Original,
        action_kind: "pay".into(),
        payload,
        state,
        version: 2,
        compensates_effect_id: None,
        compensates_op_id: None,
        confirmed_effect_id: None,
        surplus_effect_ids: Vec::new(),
        receiver: "builtin".into(),
        triage: Triage::default(),
    }
}

#[test]
fn a_payload_hash_is_the_same_however_its_fields_are_ordered() {
    let a = payload_hash(&json!({"amount": 10, "to": "acct-7"}));
    let b = payload_hash(&serde_json::from_str(r#"{"to":"acct-7","amount":10}"#).unwrap());
    assert_eq!(a, b);
    assert_eq!(a.len(), 16);
    assert_ne!(a, payload_hash(&json!({"amount": 11, "to": "acct-7"})));
}

#[test]
fn keep_is_allowed_only_on_a_closed_exact_duplicate_and_says_why_not_otherwise() {
    let payload = json!({"amount": 10});
    let op = original(payload.clone(), OpState::Unknown);
    let exact = vec![
        effect("fx-1", payload.clone()),
        effect("fx-2", payload.clone()),
    ];
    let dup = Verdict::DuplicateMatches;
    assert_eq!(
        why_not_keep(op.scope(), &snapshot(exact.clone(), true), dup),
        None
    );
    let open = why_not_keep(op.scope(), &snapshot(exact.clone(), false), dup).unwrap();
    assert!(open.contains("not closed"), "{open}");
    let differ = vec![
        effect("fx-1", payload),
        effect("fx-2", json!({"amount": 11})),
    ];
    let why = why_not_keep(op.scope(), &snapshot(differ, true), dup).unwrap();
    assert!(why.contains("fx-2 differs"), "{why}");
    let one = why_not_keep(
        op.scope(),
        &snapshot(exact, true),
        Verdict::UniqueExactMatch,
    );
    assert!(one.unwrap().contains("unique_exact_match"));
}

#[test]
fn the_surplus_awaiting_is_what_no_approval_names() {
    let mut op = original(json!({}), OpState::Confirmed);
    op.confirmed_effect_id = Some("fx-1".to_string());
    op.surplus_effect_ids = vec!["fx-2".to_string(), "fx-3".to_string()];
    let approval = |effect: &str| Approval {
        original_op_id: "op-1".to_string(),
        effect_id: effect.to_string(),
        approved_version: 3,
        approver: "bob".to_string(),
        compensation_op_id: format!("undo-{effect}"),
        action_kind: "refund".to_string(),
        payload: json!({}),
        reason: Some("duplicate".to_string()),
    };
    assert_eq!(awaiting(&op, &[]), ["fx-2", "fx-3"]);
    assert_eq!(
        awaiting(&op, &[approval("fx-1"), approval("fx-3")]),
        ["fx-2"]
    );
    assert!(awaiting(&op, &[approval("fx-2"), approval("fx-3")]).is_empty());
}

#[test]
fn the_keep_picker_moves_within_its_matches_and_the_rest_is_surplus() {
    let choice = |id: &str| KeepChoice {
        effect_id: id.to_string(),
        action_kind: "pay".to_string(),
        payload_hash: "00".repeat(8),
    };
    let picker = KeepPicker {
        op_id: "op-1".to_string(),
        version: 2,
        payload: json!({}),
        receiver: "builtin".to_string(),
        choices: vec![choice("fx-1"), choice("fx-2"), choice("fx-3")],
        cursor: 0,
        read: "your CLOSING snapshot".to_string(),
        since: 7,
    };
    assert_eq!(picker.clone().moved(-1).cursor, 0);
    let last = picker.clone().moved(1).moved(1).moved(1);
    assert_eq!(last.cursor, 2);
    assert_eq!(last.chosen(), Some(("fx-3", vec!["fx-1", "fx-2"])));
    assert_eq!(
        picker.clone().moved(1).chosen(),
        Some(("fx-2", vec!["fx-1", "fx-3"]))
    );
    assert_eq!(
        picker.window(2),
        0..2,
        "from the first while the cursor is in it"
    );
    assert_eq!(last.window(2), 1..3, "the cursor's row stays in view");
    assert_eq!(last.window(0), 2..3, "at least the cursor's row");
    assert_eq!(picker.window(10), 0..3, "never past the last match");
}
