//! A terminal's answer to the background question that comes after the
//! probe gave up reaches the key loop, where crossterm reads it as keys:
//! `ESC ] 11 ; rgb:ffff/ffff/ffff BEL` is Alt+], `1`, `1`, `;`, the
//! colour's characters and Ctrl+G (`ESC \` is `Alt+\`). None of them acts:
//! not `/` (the search), not a digit (a filter), not a letter (an act).
//! The real terminal's side is in `terminal`
//! (`a_late_osc_11_answer_in_the_key_loop_acts_on_nothing`).

use super::{ch, console, demo_lab, press};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use recon::console::app::Mode;
use recon::console::update::MAX_ANSWER_KEYS;
use recon::console::App;

/// The keys crossterm reads for an OSC 11 answer of `body`, ended by BEL
/// (`st` false) or ST.
fn answer_keys(body: &str, st: bool) -> Vec<KeyEvent> {
    let mut keys = vec![KeyEvent::new(KeyCode::Char(']'), KeyModifiers::ALT)];
    keys.extend(format!("11;{body}").chars().map(typed));
    keys.push(match st {
        false => KeyEvent::new(KeyCode::Char('g'), KeyModifiers::CONTROL),
        true => KeyEvent::new(KeyCode::Char('\\'), KeyModifiers::ALT),
    });
    keys
}

/// A character as crossterm reads it: Shift with a capital.
fn typed(c: char) -> KeyEvent {
    match c.is_uppercase() {
        true => KeyEvent::new(KeyCode::Char(c), KeyModifiers::SHIFT),
        false => ch(c),
    }
}

/// What a stray key would change: the mode, the filter, the search and
/// the selected operation.
fn state(app: &App) -> String {
    format!(
        "{:?} {:?} {:?} {:?}",
        std::mem::discriminant(&app.mode),
        app.filter,
        app.search,
        app.selected().map(|o| o.op_id.clone())
    )
}

fn status(app: &App) -> String {
    app.status
        .as_ref()
        .map(|s| s.text.clone())
        .unwrap_or_default()
}

/// Each answer, ended by BEL or by ST, in the queue: the mode, the filter,
/// the search and the selection stay as they were, the status line says
/// what was dropped, and the next real key acts.
#[test]
fn a_late_osc_11_answer_read_as_keys_acts_on_nothing() {
    let lab = demo_lab();
    for (body, st) in [
        ("rgb:ffff/ffff/ffff", false),
        ("rgb:0000/0000/0000", true),
        ("rgba:FFFF/0/0/e5e5", false),
    ] {
        let mut app = console(&lab, Some("rita"));
        press(&mut app, "j");
        let before = state(&app);
        console::run_headless(&mut app, &answer_keys(body, st));
        assert_eq!(state(&app), before, "{body}");
        assert!(matches!(app.mode, Mode::Normal), "{body}");
        assert!(status(&app).contains("late answer"), "{}", status(&app));
        press(&mut app, "j");
        assert_ne!(state(&app), before, "{body}: j did not move");
    }
}

/// In the search field an answer types nothing: the search text stays
/// what the reviewer typed.
#[test]
fn a_late_osc_11_answer_types_nothing_into_a_field() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("rita"));
    press(&mut app, "/cha");
    console::run_headless(&mut app, &answer_keys("rgb:ffff/ffff/ffff", false));
    press(&mut app, "rge");
    match &app.mode {
        Mode::Search { input, .. } => assert_eq!(input.text(), "charge"),
        other => panic!("not searching: {other:?}"),
    }
}

/// Alt+] followed by a key that cannot continue an answer (`j`, or Esc
/// after `11;`) drops only what came before it, and the key acts.
#[test]
fn a_key_that_cannot_continue_an_answer_is_read_as_usual() {
    let lab = demo_lab();
    let alt_bracket = KeyEvent::new(KeyCode::Char(']'), KeyModifiers::ALT);
    let mut app = console(&lab, Some("rita"));
    let before = state(&app);
    console::run_headless(&mut app, &[alt_bracket, ch('j')]);
    assert_ne!(state(&app), before, "j after Alt+] did not move");
    press(&mut app, "/");
    assert!(matches!(app.mode, Mode::Search { .. }));
    let mut keys = vec![alt_bracket];
    keys.extend("11;".chars().map(ch));
    keys.push(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    console::run_headless(&mut app, &keys);
    assert!(matches!(app.mode, Mode::Normal), "{:?}", app.mode);
}

/// The dropping is bounded: after Alt+] at most [`MAX_ANSWER_KEYS`] keys
/// are dropped, and the next one acts even in an answer's shape.
#[test]
fn at_most_max_answer_keys_are_dropped_after_alt_bracket() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("rita"));
    let mut keys = vec![KeyEvent::new(KeyCode::Char(']'), KeyModifiers::ALT)];
    keys.extend("11;".chars().map(ch));
    keys.extend(std::iter::repeat_n(ch('j'), MAX_ANSWER_KEYS - 3));
    let before = state(&app);
    console::run_headless(&mut app, &keys);
    assert_eq!(state(&app), before, "a key within the bound acted");
    let cursor = app.queue.cursor;
    console::run_headless(&mut app, &[ch('j')]);
    assert_eq!(app.queue.cursor, cursor + 1, "the key past the bound");
}

/// Whether `keys`, then `j`, leave the `j` acting: the cursor moves.
fn j_acts_after(lab: &super::Lab, keys: &[KeyEvent]) -> (bool, String) {
    let mut app = console(lab, Some("rita"));
    console::run_headless(&mut app, keys);
    let cursor = app.queue.cursor;
    console::run_headless(&mut app, &[ch('j')]);
    (app.queue.cursor == cursor + 1, status(&app))
}

/// Only an answer's own keys are dropped: a `]` without Alt begins none;
/// a key with Alt or Ctrl, a key other than `1` before `;`, or a
/// character no answer holds ends the dropping; and the status line
/// speaks of a dropped answer only once one has ended.
#[test]
fn keys_outside_an_answers_shape_end_the_dropping_and_act() {
    let lab = demo_lab();
    let alt = |c: char| KeyEvent::new(KeyCode::Char(c), KeyModifiers::ALT);
    let ctrl = |c: char| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
    let cases: [(&str, Vec<KeyEvent>); 6] = [
        (
            "11; after a ] without Alt",
            vec![ch(']'), ch('1'), ch('1'), ch(';')],
        ),
        ("Alt+1 after Alt+]", vec![alt(']'), alt('1')]),
        (
            "Ctrl+r in the body",
            vec![alt(']'), ch('1'), ch('1'), ch(';'), ctrl('r')],
        ),
        ("j in place of ;", vec![alt(']'), ch('1'), ch('1')]),
        (
            "é in the body",
            vec![alt(']'), ch('1'), ch('1'), ch(';'), ch('é')],
        ),
        ("a cut answer", vec![alt(']'), ch('1')]),
    ];
    for (what, keys) in cases {
        let (moved, status) = j_acts_after(&lab, &keys);
        assert!(moved, "{what}: j was dropped");
        assert!(!status.contains("late answer"), "{what}: {status}");
    }
}
