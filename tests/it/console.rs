//! The review console without a terminal: the key map, `update` for each
//! action against real workspaces (built by `recon demo`'s library entry,
//! with real receiver children), the golden screens, sanitized output down
//! to the bytes a terminal backend writes, and live refresh driven through
//! the poll action (no sleeps).

use crate::support::{dump, run, Lab};
use ratatui::backend::CrosstermBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::{Terminal, TerminalOptions, Viewport};
use recon::console::action::Edit;
use recon::console::app::{Filter, Mode, Origin, ReadState, Tone};
use recon::console::keys::{self, parse_keys, Context, BINDINGS};
use recon::console::screenshot::{to_svg, to_text};
use recon::console::{self, text, Action, App, Options, Source};
use recon::domain::{Decision, OpState, Verdict};
use recon::receiver::Fault;
use recon::workspace::{NewReceiver, ReconcileRequest};
use serde_json::json;
use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

mod late_answer;
mod theme;

// ---- fixtures ------------------------------------------------------------------

/// A fresh workspace holding `recon demo`'s showcase (this test's own copy
/// of the one demo built per test process).
fn demo_lab() -> Lab {
    Lab::demo(0)
}

fn options(reviewer: Option<&str>) -> Options {
    Options {
        reviewer: reviewer.map(str::to_string),
        colours: recon::console::theme::Choice::plain(false),
    }
}

/// A console on its own connections to the lab's workspace.
fn console_on(lab: &Lab, options: Options, size: (u16, u16)) -> App {
    let source = Source {
        location: lab.path().into(),
        temporary_demo: false,
    };
    // Ages are measured on the demo's stopped clock, so screens are stable.
    let ws = lab.reopen().with_clock(crate::support::demo_clock());
    App::open(ws, source, options, size).expect("open console")
}

/// A console on the lab's workspace whose clock is `clock`.
fn console_at(
    lab: &Lab,
    options: Options,
    size: (u16, u16),
    clock: &std::sync::Arc<recon::clock::FixedClock>,
) -> App {
    let source = Source {
        location: lab.path().into(),
        temporary_demo: false,
    };
    let ws = lab.reopen().with_clock(clock.clone());
    App::open(ws, source, options, size).expect("open console")
}

/// The demo three hours and five minutes after it was built, with ada's
/// observation of the invoice email recorded at 1h30 and of the charge
/// order refreshed at 3h: the ages the queue shows differ by row.
fn a_later_day() -> (Lab, std::sync::Arc<recon::clock::FixedClock>) {
    use std::time::Duration;
    let lab = demo_lab();
    let clock = crate::support::demo_clock();
    let mut ws = lab.reopen().with_clock(clock.clone());
    clock.advance(Duration::from_secs(90 * 60));
    let ids = ["op-1002-invoice-email".to_string()];
    let observe = |ws: &mut recon::workspace::Workspace, ids: &[String]| {
        ws.observe(&recon::workspace::ObserveRequest {
            op_ids: ids,
            by: "ada",
            ..Default::default()
        })
        .unwrap();
    };
    observe(&mut ws, &ids);
    clock.advance(Duration::from_secs(90 * 60));
    observe(&mut ws, &["op-1003-charge-order".to_string()]);
    clock.advance(Duration::from_secs(5 * 60));
    (lab, clock)
}

fn console(lab: &Lab, reviewer: Option<&str>) -> App {
    console_on(lab, options(reviewer), (120, 40))
}

#[track_caller]
fn press(app: &mut App, keys: &str) {
    let keys = parse_keys(keys).expect("key syntax");
    console::run_headless(app, &keys);
}

/// Moves the cursor to an operation of the current filter.
#[track_caller]
fn select(app: &mut App, op_id: &str) {
    console::update(app, Action::First);
    for _ in 0..200 {
        if app.selected().is_some_and(|o| o.op_id == op_id) {
            return;
        }
        console::update(app, Action::Down);
    }
    panic!("{op_id} is not in the {} queue", app.filter.label());
}

fn screen(app: &App) -> String {
    to_text(&console::render(app))
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

fn report(app: &App) -> (String, String) {
    match &app.mode {
        Mode::Report(r) => (
            r.title.clone(),
            r.lines
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        other => panic!("expected a report, the console is in {other:?}"),
    }
}

fn pending_text(app: &App) -> String {
    match &app.mode {
        Mode::Confirm(p) => p.lines.join("\n"),
        other => panic!("expected a confirmation, the console is in {other:?}"),
    }
}

/// `recon reconcile` from the command line: bob records `confirmed` for
/// op-1002-invoice-email at version 2, as another process would.
#[track_caller]
pub fn bob_confirms_the_invoice_email(workspace: &str) {
    let cli = run(
        &[
            "reconcile",
            "--workspace",
            workspace,
            "op-1002-invoice-email",
            "--reviewer",
            "bob",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
        None,
    );
    assert_eq!(cli.code, Some(0), "{}", cli.stderr);
}

// ---- the key map ------------------------------------------------------------------

#[track_caller]
fn check_key(app: &App, event: KeyEvent, expected: Option<Action>) {
    assert_eq!(
        keys::map_key(event, app),
        expected,
        "{event:?} in {:?}",
        app.mode
    );
}

#[test]
fn keys_map_to_actions_in_each_context() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    // The queue.
    check_key(&app, ch('j'), Some(Action::Down));
    check_key(&app, key(KeyCode::Down), Some(Action::Down));
    check_key(&app, ch('k'), Some(Action::Up));
    check_key(&app, ch('G'), Some(Action::Last));
    check_key(
        &app,
        KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT),
        Some(Action::Last),
    );
    check_key(&app, key(KeyCode::Tab), Some(Action::NextFilter));
    check_key(&app, ch('5'), Some(Action::Filter(4)));
    check_key(&app, ch('/'), Some(Action::Search));
    check_key(&app, ch(' '), Some(Action::ToggleMark));
    check_key(&app, ch('s'), Some(Action::ReadSnapshot));
    check_key(&app, ch('p'), Some(Action::ShowOperation));
    check_key(
        &app,
        ch('x'),
        Some(Action::Request(console::action::Request::Close)),
    );
    check_key(
        &app,
        ch('n'),
        Some(Action::Request(console::action::Request::Decide(
            Decision::NotApplied,
        ))),
    );
    check_key(
        &app,
        ch('d'),
        Some(Action::Request(console::action::Request::Dispatch)),
    );
    check_key(
        &app,
        KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL),
        Some(Action::PageDown),
    );
    check_key(&app, ch('?'), Some(Action::Help));
    check_key(&app, ch('z'), None);
    check_key(
        &app,
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        Some(Action::Quit),
    );
    // A text field types what is not bound, and `n` is just a letter.
    console::update(&mut app, Action::Search);
    let bar = screen(&app).lines().last().unwrap_or_default().to_string();
    assert!(bar.contains("Enter submit") && bar.contains("Esc cancel"));
    assert!(!bar.contains("next field"), "a search has one field: {bar}");
    check_key(&app, ch('n'), Some(Action::Input('n')));
    check_key(&app, ch('q'), Some(Action::Input('q')));
    check_key(&app, key(KeyCode::Enter), Some(Action::Submit));
    check_key(
        &app,
        key(KeyCode::Backspace),
        Some(Action::Edit(Edit::Backspace)),
    );
    check_key(&app, key(KeyCode::Delete), Some(Action::Edit(Edit::Delete)));
    check_key(&app, key(KeyCode::Left), Some(Action::Edit(Edit::Left)));
    check_key(&app, key(KeyCode::Home), Some(Action::Edit(Edit::Home)));
    check_key(
        &app,
        KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL),
        None,
    );
    console::update(&mut app, Action::Cancel);
    // A confirmation: y, n or Esc; Enter only says that y confirms.
    select(&mut app, "op-1004-support-ticket");
    press(&mut app, "x");
    assert!(matches!(app.mode, Mode::Confirm(_)));
    check_key(&app, ch('y'), Some(Action::Confirm));
    check_key(&app, key(KeyCode::Enter), Some(Action::Submit));
    check_key(&app, ch('n'), Some(Action::Cancel));
    check_key(&app, key(KeyCode::Esc), Some(Action::Cancel));
    check_key(&app, ch('c'), None);
}

#[test]
fn only_key_presses_count() {
    let lab = demo_lab();
    let app = console(&lab, None);
    for kind in [KeyEventKind::Release, KeyEventKind::Repeat] {
        let event = KeyEvent::new_with_kind(KeyCode::Char('j'), KeyModifiers::NONE, kind);
        check_key(&app, event, None);
    }
}

#[test]
fn every_key_in_the_table_is_in_the_help_and_the_bar_comes_from_it() {
    let lab = demo_lab();
    // The bar holds every labelled key at 200 columns; narrower bars keep
    // help and the acts first.
    let mut app = console_on(&lab, options(Some("ada")), (200, 120));
    press(&mut app, "?");
    let help = screen(&app);
    for binding in BINDINGS {
        if let Action::Filter(_) = binding.action {
            continue; // merged into one line, checked below
        }
        let line = format!("{:<12} {}", binding.key_names(), binding.help);
        assert!(help.contains(&line), "help lacks `{line}`:\n{help}");
    }
    assert!(help.contains("1/2/3/4/5    show unknown, prepared, confirmed, not_applied, all"));
    press(&mut app, "<esc>");
    let bar = screen(&app).lines().last().unwrap_or_default().to_string();
    // "Keep one" is on the bar only where it is allowed (a closed exact
    // duplicate, `duplicates::console`); the demo's first screen has none.
    let keep = Action::Request(recon::console::action::Request::Keep);
    for binding in
        keys::bindings(Context::Queue).filter(|b| !b.label.is_empty() && b.action != keep)
    {
        let item = format!("{} {}", binding.keys[0].name(), binding.label);
        assert!(bar.contains(&item), "bar lacks `{item}`: {bar}");
    }
}

/// The key list of docs/console.md is the queue's part of the key table,
/// word for word;
/// `RECON_UPDATE_SCREENSHOTS=1` rewrites it from the table.
#[test]
fn the_readme_key_list_is_the_key_table() {
    const START: &str = "<!-- keys: generated from src/console/bindings.rs -->\n";
    const END: &str = "<!-- /keys -->";
    let mut list = String::new();
    for binding in keys::bindings(Context::Queue) {
        list.push_str(&format!("- `{}` {}\n", binding.key_names(), binding.help));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find(START)
        .expect("docs/console.md has the key list's start marker")
        + START.len();
    let end = start + readme[start..].find(END).expect("and its end marker");
    if std::env::var_os("RECON_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        let fresh = format!("{}{list}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, fresh).unwrap();
        return;
    }
    assert_eq!(
        readme[start..end],
        list,
        "docs/console.md's key list drifted from the table"
    );
}

#[test]
fn screenshot_key_syntax_has_literal_and_named_keys() {
    let keys = parse_keys("j k<enter> <Space><c-c><lt>/ab c").unwrap();
    let expected = vec![
        ch('j'),
        ch('k'),
        key(KeyCode::Enter),
        ch(' '),
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        ch('<'),
        ch('/'),
        ch('a'),
        ch('b'),
        ch('c'),
    ];
    assert_eq!(keys, expected);
    assert!(parse_keys("<enter").unwrap_err().contains("not closed"));
    assert!(parse_keys("<nope>")
        .unwrap_err()
        .contains("unknown key <nope>"));
}

// ---- the queue ------------------------------------------------------------------

#[test]
fn queue_opens_on_unknown_with_counts_per_state() {
    let lab = demo_lab();
    let app = console(&lab, None);
    assert_eq!(app.filter, Filter::State(OpState::Unknown));
    assert_eq!(app.count(Filter::State(OpState::Unknown)), 8);
    assert_eq!(app.count(Filter::State(OpState::Prepared)), 1);
    assert_eq!(app.count(Filter::State(OpState::Confirmed)), 4);
    assert_eq!(app.count(Filter::State(OpState::NotApplied)), 1);
    assert_eq!(app.count(Filter::All), 14);
    assert!(app.queue.rows.iter().all(|op| op.state == OpState::Unknown));
    assert_eq!(app.selected().unwrap().op_id, "op-1002-invoice-email");
    let detail = app.selected_detail().unwrap();
    assert_eq!(detail.shown().unwrap().origin, Origin::Selected);
    assert_eq!(
        detail.shown().unwrap().verdict,
        Verdict::ExactMatchExistenceOnly
    );
}

#[test]
fn filters_switch_between_each_state_and_all() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    for (index, filter) in Filter::ORDER.iter().enumerate() {
        console::update(&mut app, Action::Filter(index));
        assert_eq!(app.filter, *filter);
        assert_eq!(app.queue.rows.len() as i64, app.count(*filter));
        if let Some(state) = filter.state() {
            assert!(app.queue.rows.iter().all(|op| op.state == state));
        }
    }
    press(&mut app, "<tab>");
    assert_eq!(app.filter, Filter::ORDER[0]);
    press(&mut app, "<backtab>");
    assert_eq!(app.filter, Filter::All);
}

/// The search looks into payloads too: a name that is only in a payload
/// finds its operation.
#[test]
fn search_finds_text_inside_a_payload() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "5/lena.FISCHER");
    let ids: Vec<&str> = app.queue.rows.iter().map(|o| o.op_id.as_str()).collect();
    assert_eq!(ids, ["op-1009-password-reset"]);
    assert!(queue_title(&app).contains("match 1"), "{}", screen(&app));
}

/// Typing a search never waits for its scan: each key starts it off the
/// key loop (or queues it behind the one running), the filter line says
/// it is searching, and only the search still asked for lands.
#[test]
fn a_search_runs_off_the_key_loop_and_only_the_newest_lands() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "5");
    let before: Vec<String> = app.queue.rows.iter().map(|o| o.op_id.clone()).collect();
    type_keys(&mut app, "/lena");
    assert_eq!(app.searching.as_deref(), Some("lena"));
    let still: Vec<String> = app.queue.rows.iter().map(|o| o.op_id.clone()).collect();
    assert_eq!(still, before, "the rows wait for the scan");
    assert!(screen(&app).contains("searching…"), "{}", screen(&app));
    until(&mut app, "the search to land", |a| a.searching.is_none());
    let ids: Vec<&str> = app.queue.rows.iter().map(|o| o.op_id.as_str()).collect();
    assert_eq!(ids, ["op-1009-password-reset"]);
    assert!(!screen(&app).contains("searching…"));
}

#[test]
fn search_matches_an_op_id_or_an_action_substring() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "5/CHARGE<enter>");
    let ids: Vec<&str> = app.queue.rows.iter().map(|o| o.op_id.as_str()).collect();
    // By op id (op-1003-charge-order) and by action (charge_card), any case.
    assert_eq!(
        ids,
        [
            "op-1003-charge-order",
            "op-1007-renewal-charge",
            "op-1008-deposit-capture",
            "op-1010-annual-plan",
            "op-1013-setup-fee"
        ]
    );
    press(&mut app, "/refund<enter>");
    let ids: Vec<&str> = app.queue.rows.iter().map(|o| o.op_id.as_str()).collect();
    assert_eq!(
        ids,
        ["op-1011-annual-plan-refund", "op-1014-setup-fee-refund"]
    );
    // A wildcard is a literal character, not a pattern.
    press(&mut app, "/%<enter>");
    assert!(app.queue.rows.is_empty());
    assert!(screen(&app).contains("No all operation matches \"%\"."));
    press(&mut app, "<esc>");
    assert_eq!(app.search, None);
    assert_eq!(app.queue.rows.len(), 14);
}

// ---- text fields ----------------------------------------------------------------

/// The field a prompt is editing: its text and where the cursor is.
fn field(app: &App) -> (String, usize) {
    let field = match &app.mode {
        Mode::Search { input, .. } | Mode::Reviewer { input, .. } => input,
        Mode::Compensate(form) => &form.fields[form.focus],
        other => panic!("no text field in {other:?}"),
    };
    (field.text().to_string(), field.cursor())
}

#[track_caller]
fn check_field(app: &mut App, keys: &str, text: &str, cursor: usize) {
    press(app, keys);
    assert_eq!(field(app), (text.to_string(), cursor), "after {keys}");
}

#[test]
fn the_search_field_moves_the_cursor_and_types_at_it() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "5");
    check_field(&mut app, "/rfund", "rfund", 5);
    check_field(&mut app, "<home>", "rfund", 0);
    check_field(&mut app, "<right>e", "refund", 2);
    check_field(&mut app, "<end><left><left><left>", "refund", 3);
    check_field(&mut app, "<del>", "refnd", 3);
    check_field(&mut app, "u", "refund", 4);
    check_field(&mut app, "<home><bs><left><del>", "efund", 0);
    check_field(
        &mut app,
        "<right><right><right><right><right><right>",
        "efund",
        5,
    );
    check_field(&mut app, "<del><home>r", "refund", 1);
    press(&mut app, "<enter>");
    assert_eq!(app.search.as_deref(), Some("refund"));
    assert_eq!(app.selected().unwrap().op_id, "op-1011-annual-plan-refund");
}

#[test]
fn the_reviewer_name_moves_the_cursor_and_types_at_it() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    select(&mut app, "op-1004-support-ticket");
    press(&mut app, "x");
    check_field(&mut app, "da<space>L", "da L", 4);
    check_field(&mut app, "<home>A", "Ada L", 1);
    check_field(&mut app, "<end><bs>Lee", "Ada Lee", 7);
    check_field(&mut app, "<c-a><del><c-e>", "da Lee", 6);
    press(&mut app, "<home>A<enter>");
    assert_eq!(app.reviewer.as_deref(), Some("Ada Lee"));
}

#[test]
fn each_compensation_field_moves_its_own_cursor() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("lee"));
    press(&mut app, "3");
    select(&mut app, "op-1001-welcome-email");
    press(&mut app, "a");
    let id = "op-1001-welcome-email-undo";
    check_field(&mut app, "", id, id.len());
    check_field(
        &mut app,
        "<left><left><left><left><del>r",
        "op-1001-welcome-email-rndo",
        23,
    );
    check_field(&mut app, "<tab>", "undo_send_email", 15);
    check_field(&mut app, "<home><del><del><del><del><del>", "send_email", 0);
    check_field(&mut app, "<backtab>", "op-1001-welcome-email-rndo", 23);
    press(&mut app, "<enter>");
    let text = pending_text(&app);
    assert!(
        text.contains("Approve compensation op-1001-welcome-email-rndo"),
        "{text}"
    );
    assert!(text.contains("action:  send_email"), "{text}");
}

#[test]
fn a_field_keeps_its_cursor_in_view_and_moves_over_a_character_with_its_marks() {
    use recon::console::field::TextField;
    let mut field = TextField::new("caf\u{e9}e\u{301}!");
    field.edit(Edit::Left);
    field.edit(Edit::Left);
    // The cursor is before "e" and its accent, which move as one.
    assert_eq!(field.cursor(), 4);
    let window = field.window(20);
    assert_eq!(
        (
            window.before.as_str(),
            window.at.as_str(),
            window.after.as_str()
        ),
        ("caf\u{e9}", "e\u{301}", "!")
    );
    field.edit(Edit::Delete);
    assert_eq!(field.text(), "caf\u{e9}!");
    // A control character is one step, shown escaped.
    let mut field = TextField::new("a\u{1b}b");
    field.edit(Edit::Left);
    field.edit(Edit::Left);
    assert_eq!(field.window(20).at, "\\x1b");
    // A long text shows the cursor with text on both sides, cut with `…`.
    let mut field = TextField::new("abcdefghijklmnopqrstuvwxyz");
    for _ in 0..10 {
        field.edit(Edit::Left);
    }
    let window = field.window(12);
    assert_eq!(
        (
            window.before.as_str(),
            window.at.as_str(),
            window.after.as_str()
        ),
        ("…jklmnop", "q", "rs…")
    );
    field.edit(Edit::End);
    let window = field.window(12);
    assert_eq!(
        (window.before.as_str(), window.at.as_str()),
        ("…qrstuvwxyz", " ")
    );
}

/// The cursor is a block where it is: blue in colour, reversed without.
#[test]
fn the_cursor_is_drawn_where_it_is() {
    let lab = demo_lab();
    for no_color in [false, true] {
        let options = Options {
            reviewer: None,
            colours: recon::console::theme::Choice::plain(no_color),
        };
        let mut app = console_on(&lab, options, (120, 40));
        press(&mut app, "/charge<left><left>");
        let buffer = console::render(&app);
        let row = to_text(&buffer).lines().nth(1).unwrap().to_string();
        let x = row.find("/charge").expect("the search field") + "/char".len();
        let cell = &buffer[(u16::try_from(x).unwrap(), 1)];
        let cursor = |cell: &ratatui::buffer::Cell| {
            if no_color {
                cell.modifier.contains(Modifier::REVERSED)
            } else {
                cell.bg == recon::console::theme::FIELD_CURSOR_BG
            }
        };
        assert_eq!(cell.symbol(), "g");
        assert!(cursor(cell), "{cell:?}");
        let before = &buffer[(u16::try_from(x - 1).unwrap(), 1)];
        assert!(!cursor(before), "{before:?}");
        if !no_color {
            golden("search_cursor", &app, lab.path());
        }
    }
}

#[test]
fn the_search_follows_each_key_and_esc_goes_back_to_the_search_before() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "5/");
    assert_eq!(app.queue.rows.len(), 14, "an empty prompt changes nothing");
    let ids =
        |app: &App| -> Vec<String> { app.queue.rows.iter().map(|o| o.op_id.clone()).collect() };
    press(&mut app, "an");
    assert!(matches!(app.mode, Mode::Search { .. }));
    assert_eq!(app.search.as_deref(), Some("an"));
    // Matched before Enter, in op ids, action kinds and payloads alike.
    let found = ids(&app);
    assert!(
        found.contains(&"op-1010-annual-plan".to_string()),
        "{found:?}"
    );
    for op in &app.queue.rows {
        let text = format!("{} {} {}", op.op_id, op.action_kind, op.payload).to_lowercase();
        assert!(text.contains("an"), "{text}");
    }
    press(&mut app, "<home>pl<left><left><del>");
    assert_eq!(app.search.as_deref(), Some("lan"));
    assert_eq!(
        ids(&app),
        ["op-1010-annual-plan", "op-1011-annual-plan-refund"]
    );
    press(&mut app, "<end>-r");
    assert_eq!(ids(&app), ["op-1011-annual-plan-refund"]);
    press(&mut app, "<esc>");
    assert_eq!(app.search, None, "Esc goes back to no search");
    assert_eq!(app.queue.rows.len(), 14);
    press(&mut app, "/sms<enter>");
    assert_eq!(ids(&app), ["op-1005-delivery-sms"]);
    press(&mut app, "/card");
    assert_eq!(app.queue.rows.len(), 7);
    press(&mut app, "<esc>");
    assert_eq!(
        app.search.as_deref(),
        Some("sms"),
        "Esc keeps the search before"
    );
    assert_eq!(ids(&app), ["op-1005-delivery-sms"]);
}

#[test]
fn the_queue_pages_through_the_database_and_never_holds_more_than_a_screen() {
    let lab = Lab::demo(500);
    let mut app = console_on(&lab, options(None), (120, 30));
    let page = app.queue.height;
    let unknown = app.count(Filter::State(OpState::Unknown)) as usize;
    assert!(unknown > 500, "{unknown}");
    let mut seen = vec![app.selected().unwrap().op_id.clone()];
    for i in 1..unknown {
        console::update(&mut app, Action::Down);
        assert!(app.queue.rows.len() <= page);
        assert_eq!(app.queue.position(), Some(i + 1));
        seen.push(app.selected().unwrap().op_id.clone());
    }
    // Every unknown op once, in order, and the last one stays selected.
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(seen, sorted);
    assert_eq!(seen.len(), unknown);
    console::update(&mut app, Action::Down);
    assert_eq!(app.selected().unwrap().op_id, *seen.last().unwrap());
    // Pages: down then up comes back to the same op; Home and End.
    console::update(&mut app, Action::First);
    assert_eq!(app.selected().unwrap().op_id, seen[0]);
    console::update(&mut app, Action::PageDown);
    console::update(&mut app, Action::PageDown);
    assert_eq!(app.selected().unwrap().op_id, seen[2 * page]);
    console::update(&mut app, Action::PageUp);
    assert_eq!(app.selected().unwrap().op_id, seen[page]);
    assert_eq!(app.queue.position(), Some(page + 1));
    console::update(&mut app, Action::Last);
    assert_eq!(app.selected().unwrap().op_id, *seen.last().unwrap());
    assert_eq!(app.queue.rows.len(), page);
    assert_eq!(app.queue.position(), Some(unknown));
    for _ in 0..page + 3 {
        console::update(&mut app, Action::Up);
    }
    assert_eq!(app.selected().unwrap().op_id, seen[unknown - page - 4]);
    assert_eq!(app.queue.position(), Some(unknown - page - 3));
    assert!(app.queue.rows.len() <= page);
}

/// The title says where the cursor is in the filter while the console
/// knows it without counting rows: from either end, carried along as the
/// cursor moves, kept across the console's own changes. Another process's
/// change in the middle of the queue leaves only the count until the
/// reviewer reaches an end.
#[test]
fn the_queue_title_shows_the_position_while_it_is_known() {
    let lab = Lab::demo(500);
    let mut app = console_on(&lab, options(Some("ada")), (120, 30));
    let unknown = app.count(Filter::State(OpState::Unknown));
    assert!(screen(&app).contains(&format!("Queue: unknown · 1 of {unknown} ")));
    for _ in 0..3 {
        console::update(&mut app, Action::PageDown);
    }
    console::update(&mut app, Action::Down);
    let here = 3 * app.queue.height + 2;
    assert!(screen(&app).contains(&format!("Queue: unknown · {here} of {unknown} ")));
    // The console's own closing snapshot keeps the place.
    press(&mut app, "xy");
    assert!(
        app.status.as_ref().unwrap().text.starts_with("closed "),
        "{:?}",
        app.status
    );
    assert_eq!(app.queue.position(), Some(here));
    // Another process adds an operation before the page: the count alone.
    press(&mut app, "5");
    for _ in 0..3 {
        console::update(&mut app, Action::PageDown);
    }
    let all = app.count(Filter::All);
    assert_eq!(app.queue.position(), Some(3 * app.queue.height + 1));
    lab.reopen()
        .prepare("op-0000-first", "send_email", &json!({}))
        .unwrap();
    catch_up(&mut app, &lab);
    assert_eq!(app.count(Filter::All), all + 1);
    assert_eq!(app.queue.position(), None);
    assert!(screen(&app).contains(&format!("Queue: all ({}) ", all + 1)));
    // Paging up to the first row finds the place again: three pages up
    // is one row short of it, now that one more comes first.
    for _ in 0..3 {
        console::update(&mut app, Action::PageUp);
    }
    assert_eq!(app.queue.position(), None);
    console::update(&mut app, Action::PageUp);
    assert_eq!(app.selected().unwrap().op_id, "op-0000-first");
    assert_eq!(app.queue.position(), Some(1));
    // A search shows which match the cursor is on.
    press(&mut app, "/bulk-0000<enter>j");
    assert!(screen(&app).contains("Queue: all, search \"bulk-0000\" · match 2 "));
}

// ---- snapshots and decisions ---------------------------------------------------

/// The read key asks for the reviewer's name once, labels the read as
/// theirs and records it as their observation: the row's verdict and
/// "seen" follow. A cursor move's read is shown, not recorded.
#[test]
fn read_snapshot_is_the_reviewers_read_and_recorded_as_their_observation() {
    let (lab, clock) = a_later_day();
    let mut app = console_at(&lab, options(None), (120, 40), &clock);
    let before = dump(lab.path());
    press(&mut app, "jj");
    assert_eq!(
        dump(lab.path()),
        before,
        "a cursor move's read writes nothing"
    );
    press(&mut app, "s");
    assert!(matches!(app.mode, Mode::Reviewer { .. }));
    press(&mut app, "ada<enter>");
    assert_eq!(
        app.selected_detail().unwrap().shown().unwrap().origin,
        Origin::Read
    );
    let text = screen(&app);
    assert!(text.contains("Snapshot: your read (not closing)"), "{text}");
    assert!(
        status(&app).ends_with("; recorded as ada's observation"),
        "{}",
        status(&app)
    );
    let detail = lab.reopen().show("op-1004-support-ticket").unwrap();
    assert_eq!(detail.observations.len(), 1);
    assert_eq!(detail.observations[0].seen.observed_by, "ada");
    // The row shows the recorded verdict, seen just now.
    assert!(
        text.contains(">   op-1004-support-ticket        unsure  <1m  3h"),
        "{text}"
    );
}

#[test]
fn closing_snapshot_asks_first_names_the_mutation_and_records_the_authorizer() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1004-support-ticket");
    let before = dump(lab.path());
    press(&mut app, "x");
    let text = pending_text(&app);
    assert!(text.contains("CLOSING snapshot of op-1004-support-ticket, authorized by ada"));
    assert!(text.contains("receiver mutation"));
    assert!(text.contains("can cancel an original"));
    assert!(text.contains("ada is recorded in the tombstone"));
    assert_eq!(dump(lab.path()), before, "asking writes nothing");
    press(&mut app, "n");
    assert!(matches!(app.mode, Mode::Normal));
    assert_eq!(dump(lab.path()), before, "cancelling writes nothing");

    press(&mut app, "xy");
    let closure = lab
        .reopen()
        .closure("op-1004-support-ticket")
        .unwrap()
        .expect("closed");
    assert_eq!(closure.authorized_by, "ada");
    let detail = app.selected_detail().unwrap();
    assert_eq!(
        detail.shown().unwrap().origin,
        Origin::Closing {
            authorized_by: "ada".to_string()
        }
    );
    assert_eq!(detail.shown().unwrap().verdict, Verdict::TerminalAbsence);
    assert!(app.availability(console::action::Request::Close).is_err());
}

#[test]
fn a_decision_the_evidence_does_not_allow_is_unavailable_with_its_reason() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1004-support-ticket"); // inconclusive
    let before = dump(lab.path());
    let reason = app
        .availability(console::action::Request::Decide(Decision::NotApplied))
        .unwrap_err();
    assert!(reason.contains("this read is inconclusive"), "{reason}");
    assert!(reason.contains("x takes a closing snapshot"), "{reason}");
    press(&mut app, "n");
    assert!(matches!(app.mode, Mode::Normal));
    let status = app.status.clone().unwrap();
    assert_eq!(status.tone, Tone::Warn);
    assert!(status.text.contains("record not_applied is unavailable"));
    assert!(screen(&app).contains("n record not_applied: unavailable"));
    assert_eq!(dump(lab.path()), before);
}

#[test]
fn the_reviewer_is_asked_once_and_a_blank_name_is_refused() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    select(&mut app, "op-1004-support-ticket");
    press(&mut app, "x");
    assert!(matches!(app.mode, Mode::Reviewer { .. }));
    press(&mut app, "<space><space><enter>");
    match &app.mode {
        Mode::Reviewer { error: Some(e), .. } => assert!(e.contains("empty_reviewer"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(screen(&app).contains("refused: empty_reviewer"));
    press(&mut app, "<bs><bs>Ada<space>L<enter>");
    assert_eq!(app.reviewer.as_deref(), Some("Ada L"));
    // The request carries on to its confirmation, naming the reviewer.
    assert!(pending_text(&app).contains("authorized by Ada L"));
    press(&mut app, "<esc>");
    press(&mut app, "x");
    assert!(matches!(app.mode, Mode::Confirm(_)), "asked only once");
    assert!(screen(&app).contains("reviewer: Ada L"));
}

#[test]
fn close_then_not_applied_records_against_the_version_shown() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1004-support-ticket");
    press(&mut app, "xy");
    press(&mut app, "n");
    let text = pending_text(&app);
    assert!(text.contains("Record not_applied for op-1004-support-ticket as reviewer ada, against version 2 (unknown)"));
    assert!(text.contains("the snapshot on screen says terminal_absence"));
    press(&mut app, "y");
    let op = lab.reopen().require("op-1004-support-ticket").unwrap();
    assert_eq!((op.state, op.version), (OpState::NotApplied, 3));
    let evidence = lab.reopen().evidence("op-1004-support-ticket").unwrap();
    let last = evidence.last().unwrap();
    assert_eq!(last.reviewer.as_deref(), Some("ada"));
    assert_eq!(last.verdict, Some(Verdict::TerminalAbsence));
    assert_eq!(app.status.as_ref().unwrap().tone, Tone::Good);
    // It left the unknown queue.
    assert!(app
        .queue
        .rows
        .iter()
        .all(|o| o.op_id != "op-1004-support-ticket"));
}

#[test]
fn a_stale_decision_in_the_console_after_the_command_line_changed_the_op() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1002-invoice-email");
    assert_eq!(app.selected_detail().unwrap().operation.version, 2);
    // The command line decides first, while the console shows version 2.
    bob_confirms_the_invoice_email(&lab.path_str());
    let before = dump(lab.path());
    press(&mut app, "cy");
    let (title, text) = report(&app);
    assert_eq!(title, "record confirmed: closed, its operation changed");
    assert!(
        text.contains("op-1002-invoice-email: decided by bob, journal entry"),
        "{text}"
    );
    assert!(text.contains("now confirmed at version 3"), "{text}");
    assert_eq!(dump(lab.path()), before, "the stale decision wrote nothing");
    // The console refreshed: the op is gone from the unknown queue, and the
    // counts say so.
    assert!(app
        .queue
        .rows
        .iter()
        .all(|o| o.op_id != "op-1002-invoice-email"));
    assert_eq!(app.count(Filter::State(OpState::Unknown)), 7);
}

#[test]
fn bulk_triage_checks_each_against_its_own_version_and_verdict() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    // Mark op-1002 (existence only), op-1003 (unique), op-1004 (inconclusive).
    select(&mut app, "op-1002-invoice-email");
    press(&mut app, "<space><space><space>");
    assert_eq!(app.marks.len(), 3);
    press(&mut app, "c");
    let text = pending_text(&app);
    assert!(text.contains("each against the version it had when you marked it"));
    assert!(text.contains("op-1003-charge-order  version 2 (unknown)"));
    press(&mut app, "y");
    let (title, text) = report(&app);
    assert_eq!(title, "bulk record confirmed: 2 recorded, 1 refused");
    assert!(
        text.contains("recorded confirmed for op-1002-invoice-email on exact_match_existence_only")
    );
    assert!(text.contains("recorded confirmed for op-1003-charge-order on unique_exact_match"));
    assert!(text.contains("refused op-1004-support-ticket: unsupported_verdict: the verdict inconclusive does not support the decision confirmed"));
    assert_eq!(
        app.marks.keys().collect::<Vec<_>>(),
        ["op-1004-support-ticket"]
    );
    let ws = lab.reopen();
    assert_eq!(
        ws.require("op-1002-invoice-email").unwrap().state,
        OpState::Confirmed
    );
    assert_eq!(
        ws.require("op-1004-support-ticket").unwrap().state,
        OpState::Unknown
    );
}

/// The prepared op-1012-onboarding-call marked at version 1, then `other`
/// (unknown) marked at version 2.
fn mark_the_prepared_call_and(app: &mut App, other: &str) {
    press(app, "2");
    select(app, PREPARED_CALL);
    press(app, "<space>");
    press(app, "1");
    select(app, other);
    press(app, "<space>");
    let marked: Vec<(&str, i64)> = app
        .marks
        .iter()
        .map(|(id, m)| (id.as_str(), m.version))
        .collect();
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert!(marked.contains(&(PREPARED_CALL, 1)), "{marked:?}");
}

const PREPARED_CALL: &str = "op-1012-onboarding-call";

/// `recon dispatch` from the command line, as another process would: the
/// prepared call goes out and its receipt is lost (`unknown`, version 2).
#[track_caller]
fn dispatch_the_prepared_call(lab: &Lab, fault: &str) {
    let workspace = lab.path_str();
    let args = [
        "dispatch",
        "--workspace",
        &workspace,
        PREPARED_CALL,
        "--fault",
        fault,
    ];
    let out = run(&args, None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let op = lab.reopen().require(PREPARED_CALL).unwrap();
    assert_eq!((op.state, op.version), (OpState::Unknown, 2));
}

#[test]
fn a_bulk_close_skips_a_mark_whose_operation_changed_after_its_dialog_opened() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    mark_the_prepared_call_and(&mut app, "op-1004-support-ticket");
    press(&mut app, "x");
    assert!(pending_text(&app).contains("op-1012-onboarding-call  (marked at version 1)"));
    // Signed at version 1; dispatched (and left unknown) before `y`.
    dispatch_the_prepared_call(&lab, "crash-before-commit");
    press(&mut app, "y");
    let (title, text) = report(&app);
    assert_eq!(
        title, "bulk closing snapshot: 1 recorded, 0 refused, 1 skipped (changed since the dialog)",
        "{text}"
    );
    assert!(
        text.contains("Skipped 1 operation that changed after the dialog opened"),
        "{text}"
    );
    assert!(
        text.contains("  op-1012-onboarding-call: ") && text.contains("now unknown at version 2"),
        "{text}"
    );
    let ws = lab.reopen();
    assert_eq!(ws.show("op-1004-support-ticket").unwrap().closes.len(), 1);
    let call = ws.show(PREPARED_CALL).unwrap();
    assert!(call.closes.is_empty(), "closed anyway: {:?}", call.closes);
}

#[test]
fn a_bulk_decision_skips_a_mark_taken_while_prepared_and_dispatched_after_its_dialog_opened() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    mark_the_prepared_call_and(&mut app, "op-1002-invoice-email");
    press(&mut app, "c");
    assert!(pending_text(&app).contains("op-1012-onboarding-call  version 1 (prepared)"));
    // Applied at the receiver, receipt lost: a fresh read would support
    // `confirmed`, but not against the version the reviewer marked.
    dispatch_the_prepared_call(&lab, "crash-after-commit");
    press(&mut app, "y");
    let (title, text) = report(&app);
    assert_eq!(
        title, "bulk record confirmed: 1 recorded, 0 refused, 1 skipped (changed since the dialog)",
        "{text}"
    );
    assert!(
        text.contains("  op-1012-onboarding-call: ") && text.contains("now unknown at version 2"),
        "{text}"
    );
    let ws = lab.reopen();
    let call = ws.show(PREPARED_CALL).unwrap();
    assert_eq!(
        (call.operation.state, call.operation.version),
        (OpState::Unknown, 2)
    );
    assert!(
        call.evidence.is_empty(),
        "decided anyway: {:?}",
        call.evidence
    );
    let invoice = ws.require("op-1002-invoice-email").unwrap();
    assert_eq!(invoice.state, OpState::Confirmed);
}

#[test]
fn compensation_is_approved_with_defaults_then_dispatched() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("lee"));
    press(&mut app, "3");
    select(&mut app, "op-1001-welcome-email");
    press(&mut app, "a");
    let Mode::Compensate(form) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert_eq!(form.fields[0], "op-1001-welcome-email-undo");
    assert_eq!(form.fields[1], "undo_send_email");
    let effect = form.effect_id.clone();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(form.fields[2].text()).unwrap(),
        json!({"original_op_id": "op-1001-welcome-email", "undo_effect_id": effect})
    );
    // A field that is not JSON is caught before any confirmation.
    press(&mut app, "<tab><tab>}<enter>");
    let Mode::Compensate(form) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(form.error.as_deref().unwrap().contains("not JSON"));
    press(&mut app, "<bs><enter>");
    let text = pending_text(&app);
    assert!(text.contains(&format!(
        "Approve compensation op-1001-welcome-email-undo for effect {effect} of op-1001-welcome-email (confirmed at version 3), approved by lee"
    )));
    press(&mut app, "y");
    let ws = lab.reopen();
    let comp = ws.require("op-1001-welcome-email-undo").unwrap();
    assert_eq!(comp.state, OpState::Prepared);
    assert_eq!(comp.compensates_effect_id.as_deref(), Some(effect.as_str()));
    assert!(app
        .availability(console::action::Request::Compensate)
        .unwrap_err()
        .contains("already has an approved compensation"));
    // Dispatch it from the prepared queue.
    press(&mut app, "2");
    select(&mut app, "op-1001-welcome-email-undo");
    press(&mut app, "d");
    assert!(
        pending_text(&app).contains("its approval and the original's version are checked again")
    );
    press(&mut app, "y");
    let comp = lab.reopen().require("op-1001-welcome-email-undo").unwrap();
    assert_eq!(comp.state, OpState::Confirmed, "{:?}", app.status);
    assert!(app
        .status
        .as_ref()
        .unwrap()
        .text
        .contains("receipt for fx-"));
}

#[test]
fn a_duplicate_key_in_the_compensation_form_is_refused_before_confirmation() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("lee"));
    press(&mut app, "3");
    select(&mut app, "op-1001-welcome-email");
    press(&mut app, "a");
    // The default payload names `original_op_id`; name it again.
    press(
        &mut app,
        r#"<tab><tab><bs>,"original_op_id":"op-x"}<enter>"#,
    );
    let Mode::Compensate(form) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    let error = form.error.as_deref().unwrap_or_default();
    assert!(
        error.contains(r#"the payload has the key "original_op_id" twice"#),
        "{error}"
    );
    assert!(lab
        .reopen()
        .operation("op-1001-welcome-email-undo")
        .unwrap()
        .is_none());
}

/// Every act the console confirms is for good, so Enter, the key pressed
/// out of habit after a name or a form, never carries one out: each dialog
/// stays open, says that y does it, and nothing is written until y.
#[test]
fn enter_never_confirms_an_act_only_y_does() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    let before = dump(lab.path());
    // A close, asked for through the reviewer prompt (Enter submits the
    // name, then Enter again in the dialog).
    select(&mut app, "op-1004-support-ticket");
    press(&mut app, "xada<enter><enter><enter>");
    let quiet = |app: &App| match &app.mode {
        Mode::Confirm(p) => p.title.clone(),
        other => panic!("the dialog closed on Enter: {other:?}"),
    };
    let mut asked = vec![quiet(&app)];
    let status = app.status.clone().unwrap();
    assert_eq!(status.tone, Tone::Warn);
    assert!(
        status.text.starts_with("press y to close"),
        "{}",
        status.text
    );
    press(&mut app, "<esc>");
    // A decision.
    select(&mut app, "op-1003-charge-order");
    press(&mut app, "c<enter>");
    asked.push(quiet(&app));
    assert!(app
        .status
        .as_ref()
        .unwrap()
        .text
        .starts_with("press y to record confirmed"));
    press(&mut app, "<esc>");
    // An approval, after its form's Enter.
    press(&mut app, "3");
    select(&mut app, "op-1001-welcome-email");
    press(&mut app, "a<enter><enter>");
    asked.push(quiet(&app));
    press(&mut app, "<esc>");
    // A dispatch.
    press(&mut app, "2d<enter>");
    asked.push(quiet(&app));
    assert_eq!(
        asked,
        [
            "closing snapshot (receiver mutation)",
            "record confirmed",
            "approve compensation",
            "dispatch"
        ]
    );
    press(&mut app, "<esc>");
    assert_eq!(dump(lab.path()), before, "Enter wrote nothing");
    // y does it.
    press(&mut app, "dy");
    assert!(app
        .status
        .as_ref()
        .unwrap()
        .text
        .starts_with("dispatched op-1012"));
}

#[test]
fn dispatch_is_only_for_prepared_operations() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    let reason = app
        .availability(console::action::Request::Dispatch)
        .unwrap_err();
    assert!(reason.contains("blind retry"), "{reason}");
    let before = dump(lab.path());
    press(&mut app, "d");
    assert!(matches!(app.mode, Mode::Normal));
    assert_eq!(dump(lab.path()), before);
    press(&mut app, "2");
    assert_eq!(app.selected().unwrap().op_id, "op-1012-onboarding-call");
    assert!(app.availability(console::action::Request::Dispatch).is_ok());
}

// ---- live updates -------------------------------------------------------------

#[test]
fn changes_by_another_process_appear_on_the_next_poll() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    console::update(&mut app, Action::Poll);
    assert!(app.status.is_none(), "no change, no refresh");
    // Another handle (a second console, say) records a decision.
    let mut other = lab.reopen();
    other
        .reconcile(&ReconcileRequest {
            keep: None,
            op_id: "op-1003-charge-order",
            reviewer: "priya",
            decision: Decision::Confirmed,
            expected_version: 2,
            payload: None,
            close_authorized_by: None,
        })
        .unwrap();
    assert_eq!(app.count(Filter::State(OpState::Unknown)), 8);
    catch_up(&mut app, &lab);
    assert_eq!(app.count(Filter::State(OpState::Unknown)), 7);
    assert!(app
        .queue
        .rows
        .iter()
        .all(|o| o.op_id != "op-1003-charge-order"));
    assert!(app
        .status
        .as_ref()
        .unwrap()
        .text
        .contains("another process changed the workspace"));
    // A receiver-side change alone (a closing snapshot from the command
    // line) is seen too.
    let cli = run(
        &[
            "snapshot",
            "--workspace",
            &lab.path_str(),
            "op-1002-invoice-email",
            "--close",
            "--authorized-by",
            "bob",
        ],
        None,
    );
    assert_eq!(cli.code, Some(0), "{}", cli.stderr);
    catch_up(&mut app, &lab);
    let detail = app.selected_detail().unwrap();
    assert_eq!(detail.operation.op_id, "op-1002-invoice-email");
    assert_eq!(detail.shown().unwrap().origin, Origin::Refreshed);
    assert!(detail.shown().unwrap().snapshot.closed);
    assert_eq!(detail.shown().unwrap().verdict, Verdict::UniqueExactMatch);
}

// ---- what reaches the terminal ------------------------------------------------

/// A writer the test can read back after the backend wrote into it.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every escape sequence in the bytes, checked to be one the backend itself
/// writes (CSI with a final byte for colour, cursor and clearing).
fn assert_only_backend_escapes(bytes: &[u8]) {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => {
                assert_eq!(
                    bytes.get(i + 1),
                    Some(&b'['),
                    "a non-CSI escape at byte {i}"
                );
                let mut j = i + 2;
                while j < bytes.len() && !(0x40..=0x7e).contains(&bytes[j]) {
                    j += 1;
                }
                let final_byte = bytes.get(j).copied().unwrap_or(0);
                assert!(
                    b"mHJKhlABCD".contains(&final_byte),
                    "unexpected CSI {:?}",
                    String::from_utf8_lossy(&bytes[i..=j.min(bytes.len() - 1)])
                );
                i = j + 1;
            }
            b => {
                assert!(b >= 0x20 || b == b'\n', "raw control byte {b:#04x} at {i}");
                i += 1;
            }
        }
    }
}

#[test]
fn payload_escape_sequences_never_reach_the_terminal() {
    let mut lab = Lab::new();
    let hostile = json!({
        "note": "\u{1b}]0;owned\u{7}\rnow \u{202e}txt.exe\u{1b}[2J",
        "del\u{7f}key": "c1 \u{9b}31m",
        "tab": "a\tb",
    });
    lab.ws
        .prepare("op-\u{1b}[31mred\u{202e}", "send\u{7}mail", &hostile)
        .unwrap();
    let mut app = console(&lab, None);
    press(&mut app, "2");
    let shared = Shared::default();
    let backend = CrosstermBackend::new(shared.clone());
    let mut terminal = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, 120, 40)),
        },
    )
    .unwrap();
    terminal
        .draw(|frame| frame.render_widget(&app, frame.area()))
        .unwrap();
    let bytes = shared.0.borrow().clone();
    assert_only_backend_escapes(&bytes);
    let text = String::from_utf8(bytes).unwrap();
    for raw in ['\u{7}', '\r', '\u{202e}', '\u{9b}', '\u{7f}'] {
        assert!(!text.contains(raw), "raw {raw:?} reached the terminal");
    }
    // And they are there to see, escaped.
    let screen = screen(&app);
    assert!(screen.contains("op-\\x1b[31mred\\u{202e}"), "{screen}");
    assert!(screen.contains("send\\x07mail"), "{screen}");
    assert!(
        screen.contains(r#""note": "\u001b]0;owned\u0007\rnow \u202etxt.exe\u001b[2J""#),
        "{screen}"
    );
    assert!(
        screen.contains(r#""del\u007fkey": "c1 \u009b31m""#),
        "{screen}"
    );
}

#[test]
fn tabs_are_expanded_and_wide_characters_keep_the_columns() {
    assert_eq!(text::clean("a\tbc\td"), "a   bc  d");
    assert_eq!(text::clean("x\u{1b}y\u{85}z"), "x\\x1by\\u{0085}z");
    let mut lab = Lab::new();
    lab.ws
        .prepare("op-宽字符-wide", "通知_notify", &json!({"to": "名前"}))
        .unwrap();
    lab.ws.prepare("op-narrow", "notify", &json!({})).unwrap();
    lab.ws.prepare("op-\ttab", "no\ttify", &json!({})).unwrap();
    let mut app = console(&lab, None);
    press(&mut app, "2");
    let buffer = console::render(&app);
    // The queue's right border sits in the same column on every row.
    let border_x = |y: u16| -> Vec<u16> {
        (0..buffer.area.width)
            .filter(|&x| buffer[(x, y)].symbol() == "│")
            .collect()
    };
    let first = border_x(4)[..2].to_vec();
    for y in 5..8 {
        assert_eq!(border_x(y)[..2], first, "row {y}:\n{}", to_text(&buffer));
    }
    let text = to_text(&buffer);
    assert!(text.contains("op-宽字符-wide"), "{text}");
    assert!(
        text.contains("op-    tab") || text.contains("op- tab"),
        "{text}"
    );
}

#[test]
fn differing_payload_fields_are_marked_and_highlighted() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    select(&mut app, "op-1007-renewal-charge");
    let detail = app.selected_detail().unwrap();
    assert_eq!(detail.shown().unwrap().verdict, Verdict::PayloadMismatch);
    assert_eq!(
        detail.shown().unwrap().differing,
        vec![vec!["/amount_cents".to_string()]]
    );
    let buffer = console::render(&app);
    let text = to_text(&buffer);
    let (y, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("≠   \"amount_cents\": 12000,"))
        .unwrap_or_else(|| panic!("no highlighted line:\n{text}"));
    let x = line.chars().position(|c| c == '≠').unwrap();
    let cell = &buffer[(u16::try_from(x).unwrap(), u16::try_from(y).unwrap())];
    assert_eq!(cell.fg, recon::console::theme::RED);
    assert!(cell.modifier.contains(Modifier::BOLD));
    // The lines that agree are not marked.
    assert!(text.contains("    \"currency\": \"USD\","));
}

#[test]
fn the_whole_payload_is_one_key_away_when_the_panel_cuts_it() {
    let mut lab = Lab::new();
    let fields: serde_json::Map<String, serde_json::Value> = (0..40)
        .map(|i| {
            (
                format!("field_{i:02}"),
                json!(format!("value \u{1b}[31m {i}")),
            )
        })
        .collect();
    lab.ws
        .prepare(
            "op-long-payload",
            "notify",
            &serde_json::Value::Object(fields),
        )
        .unwrap();
    let mut app = console(&lab, None);
    press(&mut app, "2");
    let text = screen(&app);
    assert!(text.contains("more lines · p shows all"), "{text}");
    assert!(!text.contains("field_39"), "{text}");
    press(&mut app, "p");
    let (title, body) = report(&app);
    assert_eq!(title, "operation op-long-payload");
    assert!(body.contains("state prepared · version 1"), "{body}");
    assert!(
        body.ends_with(
            "history:\nnothing recorded yet\n\nobservations:\n\
             none recorded: a read on screen is live until s records it"
        ),
        "{body}"
    );
    for i in 0..40 {
        assert!(body.contains(&format!("\"field_{i:02}\": ")), "{body}");
    }
    // Scrolling reaches the last field; the escape stays visible text.
    press(&mut app, &"j".repeat(40));
    let text = screen(&app);
    assert!(
        text.contains("\"field_39\": \"value \\u001b[31m 39\""),
        "{text}"
    );
    press(&mut app, "<esc>");
    assert!(matches!(app.mode, Mode::Normal));
}

#[test]
fn the_whole_view_lists_the_evidence_history_with_reviewers_and_versions() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "4");
    select(&mut app, "op-1009-password-reset");
    press(&mut app, "p");
    let (_, body) = report(&app);
    let history = body.split("\nhistory:\n").nth(1).unwrap_or_default();
    assert!(history.contains("review by "), "{body}");
    assert!(
        history.contains("not_applied on terminal_absence · v2→v3"),
        "{body}"
    );
    assert!(
        history.contains(" closed at receiver builtin, authorized by "),
        "{body}"
    );
}

#[test]
fn a_cut_op_id_ends_in_an_ellipsis_and_the_flags_are_never_cut() {
    let mut lab = Lab::new();
    let long = format!("op-{}-a", "x".repeat(60));
    let twin = format!("op-{}-b", "x".repeat(60));
    for id in [&long, &twin] {
        lab.ws
            .prepare(id, "a_rather_long_action_kind", &json!({}))
            .unwrap();
    }
    let mut app = console_on(&lab, options(None), (120, 40));
    press(&mut app, "2");
    let text = screen(&app);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("  op-xxx")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].contains("…xxxxxxx-a never   -    <1m"), "{text}");
    assert!(rows[1].contains("…xxxxxxx-b never   -    <1m"), "{text}");

    let mut app = console_on(&lab, options(None), (80, 24));
    press(&mut app, "2");
    let text = screen(&app);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("  op-xxx")).collect();
    // The short list of a small screen has the op id cut in the middle
    // beside the verdict and the ages; the flags keep their line whole.
    assert!(rows[0].contains("…x-a never   -   <1m│"), "{text}");
    assert!(rows[1].contains("…x-b never   -   <1m│"), "{text}");
    assert!(
        text.contains("│complete yes · authoritative yes · closed no│"),
        "{text}"
    );
}

#[test]
fn a_small_terminal_gets_a_message_instead_of_a_squeezed_screen() {
    let lab = demo_lab();
    let app = console_on(&lab, options(None), (79, 24));
    let text = screen(&app)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("recon needs a terminal of at least 80x24"),
        "{text}"
    );
    assert!(text.contains("this one is 79x24"), "{text}");
    let app = console_on(&lab, options(None), (80, 24));
    assert!(screen(&app).contains("Queue: unknown · 1 of 8"));
}

#[test]
fn no_color_keeps_the_screen_free_of_colours() {
    let lab = demo_lab();
    let mut app = console_on(
        &lab,
        Options {
            reviewer: None,
            colours: recon::console::theme::Choice::plain(true),
        },
        (120, 40),
    );
    select(&mut app, "op-1007-renewal-charge");
    let buffer = console::render(&app);
    for cell in buffer.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset));
    }
    // The difference is still visible without colour.
    assert!(buffer
        .content()
        .iter()
        .any(|c| c.modifier.contains(Modifier::UNDERLINED)));
}

/// The status line's words, as the screen shows them: its rows (the
/// one or two above the key bar, up to the reviewer's badge) joined by
/// single spaces.
fn status_words(app: &App) -> String {
    let text = screen(app);
    let lines: Vec<&str> = text.lines().collect();
    let rows = &lines[lines.len() - 3..lines.len() - 1];
    rows.iter()
        .filter(|row| !row.trim_start().starts_with('└'))
        .map(|row| row.split(" reviewer: ").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The status line is never cut at 80 and 120 columns: a message longer
/// than its row wraps onto the row above it (the panels' bottom border),
/// beside the reviewer's badge, and when two rows beside the badge do not
/// hold it the badge gives way. Only a message longer than two whole rows
/// ends with `…`, its start kept.
#[test]
fn the_status_line_is_never_cut_at_80_and_120_columns() {
    let lab = demo_lab();
    for size in [(80, 24), (120, 40)] {
        // Marking every operation of the filter; an escalation (with its
        // reason typed); an unavailable decision, said with its reason.
        for keys in ["v", "jeduplicate invoice?<enter>", "jjjjn"] {
            let mut app = console_on(&lab, options(Some("ada")), size);
            press(&mut app, keys);
            let status = app.status.as_ref().expect("a status").text.clone();
            let words = status.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                words.len() > usize::from(size.0) - 20,
                "{size:?} {keys:?}: too short to prove anything: {words}"
            );
            assert_eq!(
                status_words(&app),
                words,
                "{size:?} {keys:?}:\n{}",
                screen(&app)
            );
        }
    }
    // Longer than two rows: the start kept, the end elided.
    let mut app = console_on(&lab, options(Some("ada")), (80, 24));
    let long = format!("refused: stale_version: {}", "word ".repeat(60));
    app.status = Some(recon::console::app::Status {
        tone: Tone::Bad,
        text: long.clone(),
        at: app.now,
    });
    let shown = status_words(&app);
    assert!(shown.starts_with("refused: stale_version: word"), "{shown}");
    assert!(shown.ends_with('…'), "{shown}");
    assert!(!screen(&app).contains("reviewer: ada"), "{}", screen(&app));
}

/// Text on the terminal's own background is in its default foreground or
/// in a colour of the mid-brightness palette (`theme::GREEN`, ...), which
/// reads on white and on black alike; nothing is faint. Lines between
/// panels may be grey: they say nothing.
#[test]
fn every_word_reads_on_a_light_and_a_dark_background() {
    use recon::console::theme::{ACCENT, AMBER, BLUE, GREEN, GREY, MAGENTA, RED};
    let lab = demo_lab();
    let mut screens = Vec::new();
    for keys in ["", "jjjj", "jjjjj", "?", "3a", "jjx", "/zz", "2"] {
        let mut app = console(&lab, if keys == "jjx" { None } else { Some("ada") });
        press(&mut app, keys);
        screens.push((keys, console::render(&app)));
    }
    let readable = [Color::Reset, GREEN, RED, AMBER, BLUE, MAGENTA, ACCENT, GREY];
    for (keys, buffer) in &screens {
        for (i, cell) in buffer.content().iter().enumerate() {
            let symbol = cell.symbol();
            let drawing = symbol
                .chars()
                .all(|c| c == ' ' || ('\u{2500}'..='\u{257f}').contains(&c));
            assert!(
                !cell.modifier.contains(Modifier::DIM),
                "{keys:?}: a faint cell at {i}: {cell:?}"
            );
            if cell.bg == Color::Reset && !drawing {
                assert!(
                    readable.contains(&cell.fg),
                    "{keys:?}: {symbol:?} at {i} is {:?} on the terminal's background",
                    cell.fg
                );
            }
        }
    }
}

/// A colour as xterm's default palette draws it; `None` is the terminal's
/// own colour.
fn xterm_rgb(color: Color) -> Option<(u8, u8, u8)> {
    const ANSI: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    let index = match color {
        Color::Reset => return None,
        Color::Rgb(r, g, b) => return Some((r, g, b)),
        Color::Indexed(i) => i,
        Color::Black => 0,
        Color::Red => 1,
        Color::Green => 2,
        Color::Yellow => 3,
        Color::Blue => 4,
        Color::Magenta => 5,
        Color::Cyan => 6,
        Color::Gray => 7,
        Color::DarkGray => 8,
        Color::LightRed => 9,
        Color::LightGreen => 10,
        Color::LightYellow => 11,
        Color::LightBlue => 12,
        Color::LightMagenta => 13,
        Color::LightCyan => 14,
        Color::White => 15,
    };
    let level = |n: u8| if n == 0 { 0 } else { 55 + 40 * n };
    Some(match index {
        0..=15 => ANSI[usize::from(index)],
        16..=231 => {
            let n = index - 16;
            (level(n / 36), level(n / 6 % 6), level(n % 6))
        }
        _ => {
            let v = 8 + 10 * (index - 232);
            (v, v, v)
        }
    })
}

/// WCAG 2.2 relative luminance.
fn luminance((r, g, b): (u8, u8, u8)) -> f64 {
    let lin = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
}

/// The contrast of a cell drawn with `fg` on `bg` (the terminal's own
/// colours where they are `Reset`, swapped when reversed) in a terminal
/// whose background is `light` (black text on white) or not.
fn contrast(fg: Color, bg: Color, reversed: bool, light: bool) -> f64 {
    let (ink, paper) = if light {
        ((0, 0, 0), (255, 255, 255))
    } else {
        ((255, 255, 255), (0, 0, 0))
    };
    let mut fg = luminance(xterm_rgb(fg).unwrap_or(ink));
    let mut bg = luminance(xterm_rgb(bg).unwrap_or(paper));
    if reversed {
        std::mem::swap(&mut fg, &mut bg);
    }
    (fg.max(bg) + 0.05) / (fg.min(bg) + 0.05)
}

// ---- receivers as adapters ------------------------------------------------------

/// A workspace with receiver `held` (`tests/fixtures/held_adapter.sh`) for
/// the action kind `send_held`: its `query` and `close` each wait for one
/// line on `fifo` and answer with it, so the test decides when a read ends
/// and what the receiver said.
pub struct Held {
    pub lab: Lab,
    fifo: PathBuf,
}

const HELD_PAYLOAD: &str = r#"{"to":"ada@example.com"}"#;

fn held_adapter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/held_adapter.sh")
}

/// Registers `name` for `action` on the held adapter, waiting on `fifo`.
fn register_held(
    ws: &mut recon::Workspace,
    name: &str,
    action: &str,
    fifo: &Path,
    can_close: bool,
    timeout_ms: u64,
) {
    let status = std::process::Command::new("mkfifo")
        .arg(fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success(), "mkfifo {}", fifo.display());
    ws.register_receiver(&NewReceiver {
        env: &[],
        name,
        actions: &[action.to_string()],
        program: &held_adapter(),
        args: &[fifo.display().to_string(), can_close.to_string()],
        timeout_ms: Some(timeout_ms),
    })
    .expect("register the held adapter");
}

impl Held {
    /// `ops` routed to `held` and dispatched once: its `apply` fails, so
    /// each is `unknown` at version 2.
    pub fn new(can_close: bool, ops: &[&str]) -> Held {
        let mut lab = Lab::new();
        // Acts on the demo's stopped clock, so the history's times (a
        // failed call's) read the same on every run.
        lab.ws = lab.ws.with_clock(crate::support::demo_clock());
        let fifo = lab.path().join("held.fifo");
        register_held(&mut lab.ws, "held", "send_held", &fifo, can_close, 60_000);
        let payload: serde_json::Value = serde_json::from_str(HELD_PAYLOAD).unwrap();
        for op in ops {
            lab.dispatched(op, "send_held", &payload, None);
        }
        Held { lab, fifo }
    }

    /// Lets the one waiting `query` or `close` answer with `line`. The
    /// write happens on a thread (opening a fifo waits for its reader), and
    /// the test waits for the answer to land, with a bound.
    pub fn answer(&self, line: &str) {
        let (fifo, line) = (self.fifo.clone(), format!("{line}\n"));
        std::thread::spawn(move || std::fs::write(fifo, line).expect("write the fifo"));
    }
}

/// A test that failed half-way may leave a read waiting on the fifo, and
/// its adapter would outlive the test: every waiting reader is let go with
/// an error answer. Opening without blocking fails when nobody waits.
impl Drop for Held {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        if let Ok(mut fifo) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.fifo)
        {
            let _ = fifo.write_all(
                b"{\"recon_adapter\":1,\"ok\":false,\"error\":{\"code\":\"internal\",\"message\":\"the test ended\"}}\n",
            );
        }
    }
}

/// A `query` or `close` answer with `matches` exact matches of the held
/// payload for `op_id`.
pub fn held_answer(op_id: &str, matches: usize, closed: bool) -> String {
    let effects: Vec<serde_json::Value> = (1..=matches)
        .map(|i| {
            json!({
                "effect_id": format!("held-{i}"),
                "op_id": op_id,
                "action_kind": "send_held",
                "payload": serde_json::from_str::<serde_json::Value>(HELD_PAYLOAD).unwrap(),
                "compensates_effect_id": null,
            })
        })
        .collect();
    json!({
        "recon_adapter": 1,
        "ok": true,
        "matches": effects,
        "complete": true,
        "authoritative": true,
        "closed": closed,
    })
    .to_string()
}

/// Keys as the terminal loop applies them: nothing waits for an adapter.
#[track_caller]
fn type_keys(app: &mut App, keys: &str) {
    for key in parse_keys(keys).expect("key syntax") {
        if let Some(action) = keys::map_key(key, app) {
            console::update(app, action);
        }
    }
}

/// Applies what comes back from adapters until `done`, each wait bounded;
/// fails with the screen if it does not happen in time.
#[track_caller]
fn until(app: &mut App, what: &str, done: impl Fn(&App) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done(app) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(
            !left.is_zero() && app.wait_for_receivers(left),
            "{what} did not happen in time; the screen:\n{}",
            screen(app)
        );
        console::update(app, Action::Poll);
    }
}

/// Makes the console live (as the terminal console is) and applies what
/// its watcher and refresher bring until it has looked at the workspace's
/// journal as it is now: its screen read there, or its open dialog checked
/// there. Bounded, like [`until`].
#[track_caller]
fn catch_up(app: &mut App, lab: &Lab) {
    app.go_live().expect("start the watcher");
    let head = lab.reopen().change_marker().unwrap().journal.length;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // A poll first, as the terminal loop polls on its own: the
        // watcher's news may have come already, and nothing more will.
        console::update(app, Action::Poll);
        if app.live_through() >= head {
            return;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(
            !left.is_zero() && app.wait_for_receivers(left),
            "the console did not catch up with the workspace in time; the screen:\n{}",
            screen(app)
        );
    }
}

fn status(app: &App) -> String {
    app.status
        .as_ref()
        .map(|s| s.text.clone())
        .unwrap_or_default()
}

fn verdict_of(app: &App) -> Option<Verdict> {
    app.selected_detail()?.shown().map(|s| s.verdict)
}

#[test]
fn a_slow_adapter_read_never_freezes_the_console() {
    let mut held = Held::new(false, &["op-held-1"]);
    held.lab.dispatched(
        "op-local-1",
        "send_email",
        &json!({"to": "bob"}),
        Some(Fault::CrashAfterCommit),
    );
    let mut app = console_on(&held.lab, options(Some("ada")), (80, 24));
    // The read of op-held-1 started when the console opened; held waits.
    assert!(app.awaiting_receivers());
    let text = screen(&app);
    assert!(text.contains("Snapshot: reading held…"), "{text}");
    assert!(text.contains("Verdict: none yet"), "{text}");
    // The cursor moves, and the built-in ledger is read meanwhile.
    type_keys(&mut app, "j");
    assert_eq!(app.selected().unwrap().op_id, "op-local-1");
    assert_eq!(verdict_of(&app), Some(Verdict::ExactMatchExistenceOnly));
    assert!(
        screen(&app).contains("builtin: complete, authoritative, can close"),
        "{}",
        screen(&app)
    );
    // Back on op-held-1, the read already running is the one waited for.
    type_keys(&mut app, "k");
    assert!(screen(&app).contains("reading held…"), "{}", screen(&app));
    // No decision rests on a read that has not come back.
    type_keys(&mut app, "c");
    assert!(matches!(app.mode, Mode::Normal));
    assert!(
        status(&app).contains("no read of receiver held has come back"),
        "{}",
        status(&app)
    );
    // Help opens and closes.
    type_keys(&mut app, "?");
    assert!(matches!(app.mode, Mode::Help { .. }));
    type_keys(&mut app, "<esc>");
    assert!(matches!(app.mode, Mode::Normal));

    held.answer(&held_answer("op-held-1", 1, false));
    until(&mut app, "the verdict of op-held-1", |app| {
        verdict_of(app).is_some()
    });
    assert_eq!(verdict_of(&app), Some(Verdict::ExactMatchExistenceOnly));
    assert!(!app.awaiting_receivers());
    let text = screen(&app);
    assert!(
        text.contains("Snapshot: read on selection (not closing)"),
        "{text}"
    );
    assert!(
        text.contains("│receiver held: complete, authoritative,"),
        "{text}"
    );
    assert!(
        text.contains("cannot close, so absence is never proof"),
        "{text}"
    );
    type_keys(&mut app, "n");
    assert!(matches!(app.mode, Mode::Normal));
    golden("adapter_cannot_close", &app, held.lab.path());

    // A fresh read; quitting does not wait for it.
    type_keys(&mut app, "s");
    assert!(
        status(&app).contains("reading op-held-1 from receiver held…"),
        "{}",
        status(&app)
    );
    golden("adapter_reading", &app, held.lab.path());
    type_keys(&mut app, "q");
    assert!(app.should_quit);
    held.answer(&held_answer("op-held-1", 1, false));
    until(&mut app, "the last read to end", |app| {
        !app.awaiting_receivers()
    });
}

#[test]
fn a_receiver_that_cannot_close_explains_instead_of_asking() {
    let held = Held::new(false, &["op-held-1"]);
    let mut app = console_on(&held.lab, options(Some("ada")), (120, 40));
    held.answer(&held_answer("op-held-1", 0, false));
    until(&mut app, "the read", |app| verdict_of(app).is_some());
    assert_eq!(verdict_of(&app), Some(Verdict::Inconclusive));
    let before = dump(held.lab.path());

    type_keys(&mut app, "x");
    assert!(matches!(app.mode, Mode::Normal), "x asked: {:?}", app.mode);
    assert_eq!(
        status(&app),
        "closing snapshot is unavailable: receiver held cannot close, so absence is never proof"
    );
    type_keys(&mut app, "n");
    assert!(matches!(app.mode, Mode::Normal));
    assert_eq!(
        status(&app),
        "record not_applied is unavailable: not_applied is unreachable for this receiver: \
         receiver held cannot close, so absence is never proof"
    );
    let text = screen(&app);
    assert!(
        text.contains("receiver held: complete, authoritative, cannot close, so absence"),
        "{text}"
    );
    assert!(
        text.contains("x closing snapshot: unavailable — receiver held cannot close"),
        "{text}"
    );
    // Nothing suggests a close that cannot be taken.
    assert!(!text.contains("x takes a closing snapshot"), "{text}");
    assert!(
        !app.awaiting_receivers(),
        "nothing was asked of the receiver"
    );
    assert_eq!(dump(held.lab.path()), before, "nothing was written");

    // Marked, the close is asked for and refused by the library, unasked.
    type_keys(&mut app, "<space>xy");
    until(&mut app, "the refused close", |app| {
        !app.awaiting_receivers()
    });
    let (title, body) = report(&app);
    assert!(title.contains("close_unsupported"), "{title}\n{body}");
    assert!(
        body.contains("receiver held cannot close an operation"),
        "{body}"
    );
    assert_eq!(dump(held.lab.path()), before, "nothing was written");
}

#[test]
fn a_failed_or_timed_out_adapter_read_says_so_with_the_receivers_name() {
    let mut held = Held::new(true, &["op-held-1"]);
    let quick_fifo = held.lab.path().join("quick.fifo");
    register_held(
        &mut held.lab.ws,
        "quick",
        "send_quick",
        &quick_fifo,
        true,
        500,
    );
    held.lab
        .dispatched("op-quick-1", "send_quick", &json!({}), None);
    let mut app = console_on(&held.lab, options(None), (120, 40));
    assert_eq!(app.selected().unwrap().op_id, "op-held-1");
    held.answer(
        r#"{"recon_adapter":1,"ok":false,"error":{"code":"unavailable","message":"down \u001b[31mfor maintenance"}}"#,
    );
    until(&mut app, "the failed read", |app| {
        matches!(
            app.selected_detail().map(|d| &d.read),
            Some(ReadState::Failed { .. })
        )
    });
    let text = screen(&app);
    assert!(text.contains("Snapshot: the read of held failed"), "{text}");
    assert!(text.contains("reading held failed: receiver"), "{text}");
    assert!(
        text.contains("down \\x1b[31mfor maintenance"),
        "escaped: {text}"
    );
    assert!(!text.contains('\u{1b}'));
    assert!(text.contains("Verdict: none"), "{text}");

    // quick never answers: its timeout ends the read.
    type_keys(&mut app, "j");
    assert_eq!(app.selected().unwrap().op_id, "op-quick-1");
    until(&mut app, "the timed-out read", |app| {
        matches!(
            app.selected_detail().map(|d| &d.read),
            Some(ReadState::Failed { .. })
        )
    });
    let text = screen(&app);
    assert!(
        text.contains("Snapshot: the read of quick failed"),
        "{text}"
    );
    assert!(text.contains("receiver quick: timeout"), "{text}");
}

#[test]
fn closing_and_deciding_through_an_adapter_run_off_the_key_loop() {
    let held = Held::new(true, &["op-held-1"]);
    let mut app = console_on(&held.lab, options(Some("ada")), (120, 40));
    held.answer(&held_answer("op-held-1", 0, false));
    until(&mut app, "the read", |app| verdict_of(app).is_some());
    assert_eq!(verdict_of(&app), Some(Verdict::Inconclusive));

    type_keys(&mut app, "x");
    let text = pending_text(&app);
    assert!(
        text.contains("receiver held is asked to close the operation for good"),
        "{text}"
    );
    type_keys(&mut app, "y");
    // The close waits for held; the console does not.
    assert!(app.awaiting_receivers());
    assert_eq!(
        status(&app),
        "closing op-held-1 at receiver held…; keys keep working, Esc cancels"
    );
    assert!(screen(&app).contains("closing op-held-1 at receiver held…"));
    type_keys(&mut app, "?<esc>");
    type_keys(&mut app, "n");
    assert!(
        status(&app).contains("wait: closing op-held-1 at receiver held… is still running"),
        "{}",
        status(&app)
    );
    held.answer(&held_answer("op-held-1", 0, true));
    until(&mut app, "the close", |app| app.working.is_none());
    assert_eq!(
        status(&app),
        "closed op-held-1 (authorized by ada): terminal_absence (0 matches)"
    );
    let detail = app.selected_detail().unwrap();
    assert_eq!(
        detail.shown().unwrap().origin,
        Origin::Closing {
            authorized_by: "ada".to_string()
        }
    );

    // not_applied: a fresh read of held, then the library records it.
    type_keys(&mut app, "n");
    assert!(pending_text(&app).contains("from receiver held (in the background)"));
    type_keys(&mut app, "y");
    held.answer(&held_answer("op-held-1", 0, true));
    until(&mut app, "the decision", |app| app.working.is_none());
    assert!(
        status(&app).starts_with("recorded not_applied for op-held-1 on terminal_absence"),
        "{}",
        status(&app)
    );
    let op = held.lab.ws.require("op-held-1").unwrap();
    assert_eq!((op.state, op.version), (OpState::NotApplied, 3));
    let evidence = held.lab.ws.evidence("op-held-1").unwrap();
    assert_eq!(evidence.last().unwrap().receiver, "held");
}

#[test]
fn a_dispatch_to_an_adapter_runs_off_the_key_loop_and_says_why_no_receipt_counts() {
    let mut held = Held::new(true, &[]);
    let payload: serde_json::Value = serde_json::from_str(HELD_PAYLOAD).unwrap();
    held.lab
        .ws
        .prepare("op-held-9", "send_held", &payload)
        .unwrap();
    let mut app = console_on(&held.lab, options(Some("ada")), (120, 40));
    type_keys(&mut app, "2");
    assert_eq!(app.selected().unwrap().op_id, "op-held-9");
    type_keys(&mut app, "d");
    assert!(pending_text(&app).contains("receiver held's adapter (apply), in the background"));
    type_keys(&mut app, "y");
    until(&mut app, "the dispatch", |app| app.working.is_none());
    assert_eq!(
        status(&app),
        "dispatched op-held-9: no receipt (receiver held: error: unavailable: this test \
         adapter applies nothing); now unknown at version 2: take a snapshot"
    );
    let op = held.lab.ws.require("op-held-9").unwrap();
    assert_eq!((op.state, op.version), (OpState::Unknown, 2));
    // The read of op-held-9 on selection is still waiting for held.
    held.answer(&held_answer("op-held-9", 0, false));
    until(&mut app, "the last read to end", |app| {
        !app.awaiting_receivers()
    });
}

// ---- goldens ---------------------------------------------------------------------

pub fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("screenshots")
}

/// Replaces the workspace path on the title row (a temp dir) with a fixed
/// marker, in the buffer itself, so text and SVG are both stable.
fn mask_workspace(buffer: &mut Buffer, path: &Path) {
    let path = path.display().to_string();
    let row: String = (0..buffer.area.width)
        .map(|x| buffer[(x, 0)].symbol().to_string())
        .collect();
    if let Some(start) = row.find(&path) {
        let start = row[..start].chars().count();
        let marker = "<workspace>";
        for (i, x) in (start..start + path.chars().count()).enumerate() {
            let symbol = marker.chars().nth(i).map_or(" ".to_string(), String::from);
            buffer[(u16::try_from(x).unwrap(), 0)].set_symbol(&symbol);
        }
    }
}

/// Renders into a temporary directory and compares with `screenshots/`;
/// `RECON_UPDATE_SCREENSHOTS=1` rewrites the goldens on purpose.
#[track_caller]
fn golden(name: &str, app: &App, workspace: &Path) {
    let mut buffer = console::render(app);
    mask_workspace(&mut buffer, workspace);
    let text = to_text(&buffer);
    let svg = to_svg(&buffer);
    let fresh = tempfile::Builder::new()
        .prefix("recon-screenshots-")
        .tempdir()
        .unwrap();
    std::fs::write(fresh.path().join(format!("{name}.txt")), &text).unwrap();
    std::fs::write(fresh.path().join(format!("{name}.svg")), &svg).unwrap();
    let dir = screenshots_dir();
    if std::env::var_os("RECON_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.txt")), &text).unwrap();
        std::fs::write(dir.join(format!("{name}.svg")), &svg).unwrap();
        return;
    }
    for (ext, fresh_text) in [("txt", &text), ("svg", &svg)] {
        let golden_path = dir.join(format!("{name}.{ext}"));
        let expected = std::fs::read_to_string(&golden_path).unwrap_or_default();
        if &expected != fresh_text {
            let kept = fresh.keep();
            let first = expected
                .lines()
                .zip(fresh_text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(expected.lines().count().min(fresh_text.lines().count()));
            panic!(
                "screenshots/{name}.{ext} drifted at line {}; the fresh render is in {}\n\
                 (rerun with RECON_UPDATE_SCREENSHOTS=1 to accept it)\n\nfresh:\n{text}",
                first + 1,
                kept.display()
            );
        }
    }
}

#[test]
fn golden_queue() {
    let lab = demo_lab();
    let app = console(&lab, None);
    golden("queue", &app, lab.path());
}

/// At 80x24 the queue is a short list and the selected operation's panels
/// take the screen: the payload, the match and every decision with its
/// availability are in view without scrolling.
#[test]
fn golden_queue_80x24() {
    let lab = demo_lab();
    let app = console_on(&lab, options(None), (80, 24));
    let text = screen(&app);
    for seen in [
        "\"body\": \"Hi Omar",
        "fx-000002 · action send_email",
        "x closing snapshot: available",
        "c record confirmed: available",
        "n record not_applied: unavailable",
    ] {
        assert!(text.contains(seen), "{seen}:\n{text}");
    }
    golden("queue_80x24", &app, lab.path());
}

/// At 200 columns the queue shows every column in full and the panels of
/// the selected operation stand in two columns.
#[test]
fn golden_queue_200x50() {
    let lab = demo_lab();
    let mut app = console_on(&lab, options(None), (200, 50));
    press(&mut app, "5jjjjjj");
    let text = screen(&app);
    assert!(text.contains("op-1011-annual-plan-refund"), "{text}");
    assert!(text.contains("post_slack_message"), "{text}");
    golden("queue_200x50", &app, lab.path());
}

/// Each row: the latest observation's verdict (or never), how long ago it
/// was seen, and the operation's age, on the workspace's clock.
#[test]
fn each_row_shows_its_latest_verdict_when_it_was_seen_and_its_age() {
    let (lab, clock) = a_later_day();
    let app = console_at(&lab, options(None), (80, 24), &clock);
    let text = screen(&app);
    assert!(text.contains("op-1002-…ail exists  1h  3h"), "{text}");
    assert!(text.contains("op-1003-…der unique  5m  3h"), "{text}");
    assert!(text.contains("op-1004-…ket never   -   3h"), "{text}");
    golden("queue_ages_80x24", &app, lab.path());
    let app = console_at(&lab, options(None), (200, 50), &clock);
    let text = screen(&app);
    assert!(
        text.contains(
            "op-1002-invoice-email         send_email         v2   exact_match_existence_only 1h   3h"
        ),
        "{text}"
    );
    golden("queue_ages_200x50", &app, lab.path());
}

/// The title of the queue, as the first frame line shows it.
fn queue_title(app: &App) -> String {
    screen(app)
        .lines()
        .find(|l| l.contains("┌"))
        .unwrap_or_default()
        .to_string()
}

/// The verdict and escalation filters sit beside the state filters, each
/// on its key from the one table, and the title keeps the position under
/// every combination.
#[test]
fn verdict_and_escalation_filters_keep_the_position() {
    let (lab, clock) = a_later_day();
    let mut ws = lab.reopen().with_clock(clock.clone());
    ws.escalate(
        "op-1005-delivery-sms",
        "bob",
        "the SMS gateway cannot close",
    )
    .unwrap();
    let unknown = ws.ops(Some(OpState::Unknown), None, 100).unwrap();
    let never = unknown
        .iter()
        .filter(|o| o.triage.latest_observation.is_none())
        .count();
    let mut app = console_at(&lab, options(None), (80, 24), &clock);
    press(&mut app, "f");
    assert!(
        queue_title(&app).contains(&format!("unknown, never · 1 of {never}")),
        "{}",
        screen(&app)
    );
    press(&mut app, "j");
    assert!(queue_title(&app).contains(&format!("2 of {never}")));
    assert!(
        screen(&app).contains("[f verdict never]"),
        "{}",
        screen(&app)
    );
    press(&mut app, "F!");
    assert_eq!(app.verdict_filter, None);
    let text = screen(&app);
    assert!(
        queue_title(&app).contains("unknown, escalated · 1 of 1"),
        "{text}"
    );
    assert!(text.contains("> ! op-1005-…sms absent"), "{text}");
    assert!(text.contains("[! escalated]"), "{text}");
    golden("filters_80x24", &app, lab.path());
    press(&mut app, "!");
    let others = unknown.len() - 1;
    assert!(
        queue_title(&app).contains(&format!(" 1 of {others} ")),
        "{}",
        screen(&app)
    );
    let mut wide = console_at(&lab, options(None), (200, 50), &clock);
    press(&mut wide, "5fffff");
    assert!(
        queue_title(&wide).contains("all, unique_exact_match · 1 of"),
        "{}",
        screen(&wide)
    );
    golden("filters_200x50", &wide, lab.path());
}

/// `v` marks every operation the filters show, on every page, and the
/// confirmation names the exact count; each is then checked against its
/// own marked version and a fresh snapshot, and the result lists what was
/// recorded and what was refused, with codes.
#[test]
fn mark_all_marks_every_page_of_the_filter_and_the_confirmation_counts_them() {
    let lab = Lab::demo(500);
    let ws = lab.reopen();
    let mut never = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = ws
            .ops(Some(OpState::Unknown), after.as_deref(), 100)
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.op_id.clone());
        never.extend(
            page.iter()
                .filter(|o| o.triage.latest_observation.is_none())
                .map(|o| o.op_id.clone()),
        );
    }
    // More than a page of marking (256) and far more than a screen.
    assert!(never.len() > 256, "{}", never.len());
    let mut wide = console_on(&lab, options(Some("ada")), (200, 50));
    press(&mut wide, "fvc");
    golden("mark_all_confirmation_200x50", &wide, lab.path());
    press(&mut wide, "<esc>");
    let mut app = console_on(&lab, options(Some("ada")), (80, 24));
    press(&mut app, "fv");
    let marked: Vec<String> = app.marks.keys().cloned().collect();
    assert_eq!(marked, never);
    assert!(
        status(&app).contains(&format!(
            "marked all {} operations the filter shows (unknown, never",
            never.len()
        )),
        "{}",
        status(&app)
    );
    press(&mut app, "c");
    let text = pending_text(&app);
    assert!(
        text.contains(&format!(
            "Record confirmed for each of these {} marked operations",
            never.len()
        )),
        "{text}"
    );
    golden("mark_all_confirmation", &app, lab.path());
    press(&mut app, "y");
    let (title, body) = report(&app);
    assert!(title.starts_with("bulk record confirmed: "), "{title}");
    assert!(body.contains(&format!("of {} marked operations", never.len())));
    assert!(body.contains("recorded confirmed for"), "{body}");
    assert!(body.contains(": unsupported_verdict: "), "{body}");
    golden("mark_all_result", &app, lab.path());
    console::update(&mut app, Action::Resize(200, 50));
    golden("mark_all_result_200x50", &app, lab.path());
}

/// A mark never outlives a change: on the refresh after another process
/// changed a marked operation, its mark goes and the status says so.
#[test]
fn a_mark_is_dropped_when_its_operation_changes_and_the_reviewer_is_told() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    press(&mut app, "v");
    assert_eq!(app.marks.len(), 8);
    bob_confirms_the_invoice_email(&lab.path_str());
    catch_up(&mut app, &lab);
    assert_eq!(app.marks.len(), 7);
    assert!(!app.marks.contains_key("op-1002-invoice-email"));
    assert_eq!(app.status.as_ref().unwrap().tone, Tone::Warn);
    assert!(
        status(&app).contains(
            "1 mark dropped, changed since marked: op-1002-invoice-email (marked at version 2, \
             now confirmed at version 3); 7 still marked"
        ),
        "{}",
        status(&app)
    );
}

/// What a refresh reads again to keep its marks true is what the journal
/// names after the head it last saw, each operation once with its state
/// and version now, in one query, and nothing before that head: marks
/// cost what changed, not how many there are.
#[test]
fn the_journal_after_a_seen_head_names_each_changed_operation_once() {
    let lab = demo_lab();
    let head = lab.ws.change_marker().unwrap().journal.length;
    assert!(lab.ws.changed_since(head).unwrap().is_empty());
    bob_confirms_the_invoice_email(&lab.path_str());
    assert_eq!(
        lab.ws.changed_since(head).unwrap(),
        [recon::domain::Moved {
            op_id: "op-1002-invoice-email".into(),
            state: recon::domain::OpState::Confirmed,
            version: 3,
        }]
    );
    let now = lab.ws.change_marker().unwrap().journal.length;
    assert!(now > head);
    assert!(lab.ws.changed_since(now).unwrap().is_empty());
}

/// The re-read key reads every marked operation again and records each as
/// the reviewer's observation; the marks stay.
#[test]
fn rereading_the_marks_records_each_as_the_reviewers_observation_and_keeps_them() {
    let (lab, clock) = a_later_day();
    let mut app = console_at(&lab, options(Some("ada")), (120, 40), &clock);
    press(&mut app, "fv");
    let marked: Vec<String> = app.marks.keys().cloned().collect();
    assert!(marked.len() > 1);
    press(&mut app, "R");
    let asked = pending_text(&app);
    assert!(
        asked.contains(&format!(
            "Read each of the {} marked operations again from its receiver, and record what it \
             shows as ada's observation: {} observations",
            marked.len(),
            marked.len()
        )),
        "{asked}"
    );
    press(&mut app, "y");
    let (title, body) = report(&app);
    assert!(
        title.starts_with(&format!(
            "bulk re-read: {} recorded, 0 refused",
            marked.len()
        )),
        "{title}"
    );
    assert!(body.contains("recorded as ada's"), "{body}");
    assert_eq!(app.marks.len(), marked.len(), "the marks stay");
    let ws = lab.reopen();
    for id in &marked {
        let observations = ws.show(id).unwrap().observations;
        assert_eq!(observations.len(), 1, "{id}");
        assert_eq!(observations[0].seen.observed_by, "ada");
    }
}

/// A note, an escalation and its lowering from keys, each a form with one
/// field, recorded as the reviewer; refusals come with their codes; the
/// history panel lists closes, decisions, notes and escalations in the
/// order they happened, with their times.
#[test]
fn notes_and_escalations_from_keys_land_in_the_history_with_their_times() {
    use std::time::Duration;
    let (lab, clock) = a_later_day();
    let mut app = console_at(&lab, options(Some("ada")), (80, 24), &clock);
    press(&mut app, "m");
    assert!(matches!(app.mode, Mode::Annotate(_)));
    press(&mut app, "<enter>");
    assert!(
        screen(&app).contains("the note's text is empty"),
        "{}",
        screen(&app)
    );
    press(
        &mut app,
        "called<space>the<space>customer:<space>no<space>second<space>invoice",
    );
    golden("note_form", &app, lab.path());
    console::update(&mut app, Action::Resize(200, 50));
    golden("note_form_200x50", &app, lab.path());
    console::update(&mut app, Action::Resize(80, 24));
    press(&mut app, "<enter>");
    assert!(status(&app).starts_with("note #"), "{}", status(&app));
    clock.advance(Duration::from_secs(120));
    press(&mut app, "e");
    press(
        &mut app,
        "duplicate<space>invoice?<space>finance<space>decides",
    );
    golden("escalate_form", &app, lab.path());
    console::update(&mut app, Action::Resize(200, 50));
    golden("escalate_form_200x50", &app, lab.path());
    console::update(&mut app, Action::Resize(80, 24));
    press(&mut app, "<enter>");
    let op = lab.reopen().require("op-1002-invoice-email").unwrap();
    assert_eq!(op.triage.escalated.unwrap().by, "ada");
    let text = screen(&app);
    assert!(text.contains("> ! op-1002"), "{text}");
    assert!(
        text.contains("11:07Z escalated by ada: duplicate"),
        "{text}"
    );
    golden("history_80x24", &app, lab.path());
    press(&mut app, "p");
    let (_, body) = report(&app);
    let history = body.split("\nhistory:\n").nth(1).unwrap_or_default();
    let note = history.find("12-03 11:05Z note by ada: called the customer: no second invoice");
    let escalated =
        history.find("12-03 11:07Z escalated by ada: duplicate invoice? finance decides");
    assert!(note.is_some() && note < escalated, "{history}");
    press(&mut app, "<esc>");
    let mut wide = console_at(&lab, options(Some("ada")), (200, 50), &clock);
    press(&mut wide, "4");
    select(&mut wide, "op-1009-password-reset");
    press(
        &mut wide,
        "mcustomer<space>confirmed:<space>no<space>reset<space>email<space>arrived<enter>",
    );
    let text = screen(&wide);
    let close = text.find("12-03 08:00Z closed at receiver builtin,");
    let review = text.find("12-03 08:00Z #2 review by priya.sre: not_applied");
    let note = text.find("12-03 11:07Z note by ada: customer confirmed");
    assert!(close.is_some() && close < review && review < note, "{text}");
    golden("history_200x50", &wide, lab.path());
}

/// Lowering the marker from keys, and the domain's refusals with their
/// codes: before the form opens, and when another process got there first
/// while the reason was typed (a report, nothing written).
#[test]
fn escalation_refusals_from_keys_come_with_their_codes() {
    let (lab, clock) = a_later_day();
    lab.reopen()
        .with_clock(clock.clone())
        .escalate("op-1002-invoice-email", "ada", "finance decides")
        .unwrap();
    let mut app = console_at(&lab, options(Some("ada")), (80, 24), &clock);
    press(&mut app, "e");
    assert!(
        status(&app).starts_with("escalate is unavailable: refused: already_escalated: "),
        "{}",
        status(&app)
    );
    press(&mut app, "Eanswered<space>by<space>finance<enter>");
    assert!(
        status(&app).starts_with("lowered the escalation"),
        "{}",
        status(&app)
    );
    press(&mut app, "E");
    assert!(
        status(&app).contains("refused: not_escalated: "),
        "{}",
        status(&app)
    );
    press(&mut app, "3e");
    assert!(
        status(&app).contains("refused: not_unknown: "),
        "{}",
        status(&app)
    );
    // Another process escalates while the reason is typed: a report with
    // the code, and nothing written.
    press(&mut app, "1j");
    press(&mut app, "e");
    lab.reopen()
        .escalate("op-1003-charge-order", "bob", "mine")
        .unwrap();
    press(&mut app, "also<space>mine<enter>");
    assert_eq!(report(&app).0, "refused: already_escalated");
}

#[test]
fn golden_duplicate_matches() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "jjjj");
    assert_eq!(
        app.selected_detail().unwrap().shown().unwrap().verdict,
        Verdict::DuplicateMatches
    );
    golden("duplicate_matches", &app, lab.path());
}

#[test]
fn golden_payload_mismatch() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "jjjjj");
    assert_eq!(
        app.selected_detail().unwrap().shown().unwrap().verdict,
        Verdict::PayloadMismatch
    );
    golden("payload_mismatch", &app, lab.path());
}

#[test]
fn golden_closing_snapshot_confirmation() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "jj x ada<enter>");
    assert!(matches!(app.mode, Mode::Confirm(_)));
    golden("closing_confirmation", &app, lab.path());
}

#[test]
fn golden_stale_version_refusal() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    // A second handle decides while the console shows version 2.
    lab.reopen()
        .reconcile(&ReconcileRequest {
            keep: None,
            op_id: "op-1002-invoice-email",
            reviewer: "bob",
            decision: Decision::Confirmed,
            expected_version: 2,
            payload: None,
            close_authorized_by: None,
        })
        .unwrap();
    press(&mut app, "cy");
    assert!(report(&app).0.contains("closed, its operation changed"));
    golden("stale_version", &app, lab.path());
}

#[test]
fn golden_compensation_approval() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("lee.finance"));
    press(&mut app, "3a");
    golden("compensation_form", &app, lab.path());
    press(&mut app, "<enter>");
    assert!(matches!(app.mode, Mode::Confirm(_)));
    golden("compensation_confirmation", &app, lab.path());
}

#[test]
fn golden_bulk_triage_result() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    press(&mut app, "<space><space><space>jj<space>cy");
    assert!(report(&app).0.starts_with("bulk record confirmed"));
    golden("bulk_result", &app, lab.path());
}

#[test]
fn golden_help() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "?");
    golden("help", &app, lab.path());
}

#[test]
fn golden_too_small() {
    let lab = demo_lab();
    let app = console_on(&lab, options(None), (70, 20));
    golden("too_small", &app, lab.path());
}

// ---- the command line ---------------------------------------------------------

/// `recon screenshot` on a workspace made by `recon demo` prints the same
/// screen as the golden (the paths masked).
#[test]
fn recon_screenshot_prints_the_golden_screen() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ws = ws.to_str().unwrap();
    let demo = run(&["demo", "--workspace", ws], None);
    assert_eq!(demo.code, Some(0), "{}", demo.stderr);
    let shot = run(&["screenshot", "--workspace", ws, "--keys", "jjjjj"], None);
    assert_eq!(shot.code, Some(0), "{}", shot.stderr);
    let masked = shot.stdout.replacen(ws, "<workspace>", 1);
    let expected = std::fs::read_to_string(screenshots_dir().join("payload_mismatch.txt")).unwrap();
    // The demo was built now, the golden's at DEMO_TIME: the history's
    // times (MM-DD HH:MMZ) differ, and only they may.
    let trim = |s: &str| {
        s.lines()
            .map(|l| mask_history_times(l.trim_end()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(trim(&masked), trim(&expected));

    let svg = run(
        &[
            "screenshot",
            "--workspace",
            ws,
            "--format",
            "svg",
            "--size",
            "100x30",
        ],
        None,
    );
    assert_eq!(svg.code, Some(0), "{}", svg.stderr);
    assert!(svg.stdout.starts_with("<svg"));
    assert!(
        svg.stdout.contains("fill=\"#87d7ff\""),
        "the title keeps its colour"
    );

    let bad = run(&["screenshot", "--workspace", ws, "--keys", "<nope>"], None);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    let blank = run(&["screenshot", "--workspace", ws, "--reviewer", "  "], None);
    assert_eq!(blank.code, Some(3), "{}", blank.stderr);
    assert!(blank.stderr.contains("refused: empty_reviewer"));
    let size = run(&["screenshot", "--workspace", ws, "--size", "12"], None);
    assert_eq!(size.code, Some(2), "{}", size.stderr);
}

#[test]
fn a_console_whose_workspace_was_moved_refuses_every_mutation_and_says_so() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1004-support-ticket");
    let moved = lab.dir.path().with_extension("moved");
    std::fs::rename(lab.path(), &moved).unwrap();
    let before = dump(&moved);
    console::update(&mut app, Action::Poll);
    assert!(
        screen(&app).contains("was deleted, moved or replaced"),
        "{}",
        screen(&app)
    );
    press(&mut app, "xy");
    assert!(
        screen(&app).contains("was deleted, moved or replaced"),
        "{}",
        screen(&app)
    );
    assert_eq!(
        dump(&moved),
        before,
        "nothing was written to the moved workspace"
    );
    std::fs::rename(&moved, lab.path()).unwrap();
}

#[test]
fn a_stale_dispatch_in_the_console_after_the_command_line_dispatched_the_op() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    press(&mut app, "2");
    let op = "op-1012-onboarding-call";
    select(&mut app, op);
    assert_eq!(app.selected_detail().unwrap().operation.version, 1);
    // The command line dispatches first, while the console shows version 1.
    let out = crate::support::run(&["dispatch", "--workspace", &lab.path_str(), op], None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let before = dump(lab.path());
    press(&mut app, "dy");
    let (_, text) = report(&app);
    assert!(
        text.contains("op-1012-onboarding-call: ") && text.contains("at version 3"),
        "{text}"
    );
    assert_eq!(dump(lab.path()), before, "the stale dispatch wrote nothing");
    assert_eq!(lab.reopen().dispatch_count(op).unwrap(), 1);
}

#[test]
fn a_refused_bulk_decision_suggests_no_close_at_a_receiver_that_cannot_close() {
    let mut lab = Lab::new();
    lab.ws
        .register_builtin("noclose", &["send_nc".to_string()], false)
        .expect("register the ledger that cannot close");
    for op in ["op-nc-1", "op-nc-2"] {
        lab.dispatched(op, "send_nc", &json!({}), Some(Fault::CrashBeforeCommit));
    }
    let mut app = console(&lab, Some("ada"));
    press(&mut app, "<space>j<space>cy");
    let (title, lines) = report(&app);
    assert!(title.starts_with("bulk record confirmed"), "{title}");
    assert_eq!(
        lines.matches(": unsupported_verdict: ").count(),
        2,
        "{lines}"
    );
    assert!(!lines.contains("take a closing snapshot"), "{lines}");
    assert_eq!(
        lines.matches("no closing snapshot can be taken").count(),
        2,
        "{lines}"
    );
}

// ---- long acts off the key loop -------------------------------------------------

/// Three operations at receiver `held` (which can close, or not) and one
/// unknown operation at the built-in ledger, with the three held ones
/// marked (through a search, so that no read of them but the first
/// starts) and the first one's read landed:
/// a console ready to start a bulk act that waits on the fifo.
fn three_held_marked(can_close: bool) -> (Held, App) {
    let ops = ["op-held-1", "op-held-2", "op-held-3"];
    let mut held = Held::new(can_close, &ops);
    held.lab.dispatched(
        "op-local-1",
        "send_email",
        &json!({"to": "bob"}),
        Some(Fault::CrashAfterCommit),
    );
    let mut app = console_on(&held.lab, options(Some("ada")), (120, 40));
    held.answer(&held_answer("op-held-1", 1, false));
    until(&mut app, "the first read", |app| verdict_of(app).is_some());
    type_keys(&mut app, "/held<enter>");
    until(&mut app, "the search", |app| app.searching.is_none());
    type_keys(&mut app, "v");
    until(&mut app, "the marks", |app| app.working.is_none());
    assert_eq!(
        app.marks.keys().map(String::as_str).collect::<Vec<_>>(),
        ops
    );
    type_keys(&mut app, "<esc>");
    assert!(app.search.is_none());
    assert_eq!(app.marks.len(), 3, "Esc took the search only");
    (held, app)
}

/// Waits (bounded) until the running job has its first operation in hand:
/// it waits for the held receiver, so a cancel now stops it after that one.
#[track_caller]
fn in_hand(app: &App) {
    let progress = &app.working.as_ref().expect("a job runs").progress;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !progress.in_hand() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never started"
        );
        std::thread::yield_now();
    }
}

/// The states `recon ops --json` gives, by op id.
fn states_by_cli(lab: &Lab) -> std::collections::BTreeMap<String, String> {
    let out = run(&["ops", "--workspace", &lab.path_str(), "--json"], None).json();
    out.as_array()
        .unwrap()
        .iter()
        .map(|op| {
            (
                op["op_id"].as_str().unwrap().to_string(),
                op["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A bulk decision runs on a thread of its own: while its first operation
/// waits for the receiver, the cursor moves and the progress is on
/// screen; Esc asks it to stop, it stops after the operation in hand, and
/// the report counts exactly what `recon ops` then shows.
#[test]
fn a_bulk_decision_runs_off_the_key_loop_and_esc_stops_it_after_the_operation_in_hand() {
    let (held, mut app) = three_held_marked(false);
    type_keys(&mut app, "cy");
    in_hand(&app);
    assert!(screen(&app).contains("0 of 3"), "{}", screen(&app));
    type_keys(&mut app, "<end>");
    assert_eq!(app.selected().unwrap().op_id, "op-local-1");
    assert!(app.working.is_some(), "the cursor moved while the job ran");
    type_keys(&mut app, "<esc>");
    assert!(
        status(&app).starts_with("cancelling recording confirmed for 3 operations"),
        "{}",
        status(&app)
    );
    assert!(screen(&app).contains("cancelling after the operation in hand"));
    held.answer(&held_answer("op-held-1", 1, false));
    until(&mut app, "the job", |app| app.working.is_none());
    let (title, body) = report(&app);
    assert_eq!(
        title,
        "bulk record confirmed: 1 recorded, 0 refused, 2 not attempted (cancelled)"
    );
    assert!(
        body.contains(
            "Cancelled after 1 of 3: the 2 not attempted were left unchanged, nothing was \
             written for them; the 1 recorded stay recorded."
        ),
        "{body}"
    );
    let states = states_by_cli(&held.lab);
    assert_eq!(states["op-held-1"], "confirmed");
    assert_eq!(states["op-held-2"], "unknown");
    assert_eq!(states["op-held-3"], "unknown");
    assert_eq!(
        app.marks.keys().map(String::as_str).collect::<Vec<_>>(),
        ["op-held-2", "op-held-3"],
        "the unattempted stay marked"
    );
}

/// The filter bar's state tabs follow a bulk job chunk by chunk: once its
/// first decision is recorded (the second still waiting for the receiver)
/// they count it, and when the job lands they agree with `recon ops`.
#[test]
fn the_state_tabs_count_each_chunk_of_a_bulk_job_while_it_runs() {
    let (held, mut app) = three_held_marked(false);
    let bar = |app: &App| screen(app).lines().nth(1).unwrap_or_default().to_string();
    assert!(bar(&app).contains("1 unknown 4"), "{}", bar(&app));
    type_keys(&mut app, "cy");
    in_hand(&app);
    let progress = app.working.as_ref().expect("a job runs").progress.clone();
    // Each answer in turn: the next read opens the fifo once this one is done.
    let answer_and_wait = |op: &str, done: usize| {
        held.answer(&held_answer(op, 1, false));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while progress.counts().0 < done {
            assert!(std::time::Instant::now() < deadline, "{op} was not decided");
            std::thread::yield_now();
        }
    };
    answer_and_wait("op-held-1", 1);
    console::update(&mut app, Action::Poll);
    assert!(
        app.working.is_some(),
        "the job waits on its second operation"
    );
    let during = bar(&app);
    assert!(during.contains("1 unknown 3"), "{during}");
    assert!(during.contains("3 confirmed 1"), "{during}");
    answer_and_wait("op-held-2", 2);
    held.answer(&held_answer("op-held-3", 1, false));
    until(&mut app, "the job", |app| app.working.is_none());
    let states = states_by_cli(&held.lab);
    let count = |state: &str| states.values().filter(|s| *s == state).count();
    let after = bar(&app);
    assert!(
        after.contains(&format!("1 unknown {}", count("unknown"))),
        "{after}"
    );
    assert!(
        after.contains(&format!("3 confirmed {}", count("confirmed"))),
        "{after}"
    );
}

/// While a bulk act runs, another is refused with the reason and the key
/// that cancels the running one: a decision, `v` and a re-read.
#[test]
fn a_second_bulk_while_one_runs_is_refused_with_a_status_message() {
    let (held, mut app) = three_held_marked(true);
    type_keys(&mut app, "xy");
    in_hand(&app);
    for (keys, name) in [
        ("n", "record not_applied is unavailable"),
        ("v", "v is unavailable"),
        ("R", "re-read is unavailable"),
    ] {
        type_keys(&mut app, keys);
        assert!(matches!(app.mode, Mode::Normal), "{keys}");
        assert!(
            status(&app).starts_with(&format!(
                "{name}: wait: closing 3 operations at receiver held… is still running (Esc \
                 cancels it)"
            )),
            "{keys}: {}",
            status(&app)
        );
    }
    type_keys(&mut app, "<esc>");
    held.answer(&held_answer("op-held-1", 1, true));
    until(&mut app, "the job", |app| app.working.is_none());
    let (title, _) = report(&app);
    assert_eq!(
        title,
        "bulk closing snapshot: 1 recorded, 0 refused, 2 not attempted (cancelled)"
    );
}

/// A job's report that lands while the reviewer types a search does not
/// take the keys meant for the search: it waits, and opens once they are
/// back in the queue.
#[test]
fn keys_typed_while_a_job_runs_are_never_applied_to_its_report() {
    let (held, mut app) = three_held_marked(false);
    type_keys(&mut app, "cy");
    in_hand(&app);
    type_keys(&mut app, "<esc>/op-");
    held.answer(&held_answer("op-held-1", 1, false));
    until(&mut app, "the job", |app| app.working.is_none());
    assert!(matches!(app.mode, Mode::Search { .. }));
    assert!(
        status(&app).ends_with("the report opens when you are back in the queue"),
        "{}",
        status(&app)
    );
    type_keys(&mut app, "local");
    match &app.mode {
        Mode::Search { input, .. } => assert_eq!(input.text(), "op-local"),
        other => panic!("expected the search, found {other:?}"),
    }
    type_keys(&mut app, "<enter>");
    let (title, _) = report(&app);
    assert!(
        title.starts_with("bulk record confirmed: 1 recorded"),
        "{title}"
    );
}

/// Another process's change is read off the key loop; when the reviewer
/// moves within the page while that read is out, it still lands: the
/// counts and rows are the new ones, the cursor stays on the operation the
/// reviewer moved to, and the console has seen the change (a refresh is
/// not thrown away, and asked for again, on every key).
#[test]
fn a_refresh_that_lands_after_a_move_within_the_page_keeps_the_reviewers_cursor() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    catch_up(&mut app, &lab);
    assert_eq!(app.selected().unwrap().op_id, "op-1002-invoice-email");
    bob_confirms_the_invoice_email(&lab.path_str());
    let head = lab.reopen().change_marker().unwrap().journal.length;
    // The watcher's news lands, and the poll that applies it starts the
    // read of the screen off the key loop.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !app.awaiting_receivers() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero() && app.wait_for_receivers(left), "no news");
        console::update(&mut app, Action::Poll);
    }
    // The reviewer moves before that read is applied.
    console::update(&mut app, Action::Down);
    assert_eq!(app.selected().unwrap().op_id, "op-1003-charge-order");
    assert!(app.live_through() < head);
    // The one read out lands, and the next poll applies it.
    assert!(app.wait_for_receivers(std::time::Duration::from_secs(30)));
    console::update(&mut app, Action::Poll);
    assert!(app.live_through() >= head, "{}", screen(&app));
    assert_eq!(app.count(Filter::State(OpState::Unknown)), 7);
    assert_eq!(app.selected().unwrap().op_id, "op-1003-charge-order");
    assert!(app
        .queue
        .rows
        .iter()
        .all(|r| r.op_id != "op-1002-invoice-email"));
}

/// A confirmation names an operation at a version; when another process
/// changes it, the dialog says so and closes, and nothing is written.
#[test]
fn a_dialog_closes_and_says_so_when_another_process_changes_its_operation() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1002-invoice-email");
    press(&mut app, "c");
    assert!(matches!(app.mode, Mode::Confirm(_)));
    bob_confirms_the_invoice_email(&lab.path_str());
    catch_up(&mut app, &lab);
    let (title, body) = report(&app);
    assert_eq!(title, "record confirmed: closed, its operation changed");
    assert!(
        body.contains("op-1002-invoice-email: decided by bob, journal entry"),
        "{body}"
    );
    assert!(body.contains("now confirmed at version 3"), "{body}");
    assert!(
        body.contains("It was closed; nothing was written."),
        "{body}"
    );
    let evidence = lab.reopen().evidence("op-1002-invoice-email").unwrap();
    assert!(evidence
        .iter()
        .all(|e| e.reviewer.as_deref() != Some("ada")));
}

/// Another process's change to something else leaves the dialog open and
/// the screen behind it on the dialog's operation; the screen refreshes
/// once the dialog is answered.
#[test]
fn the_screen_behind_a_dialog_stays_on_its_operation() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1003-charge-order");
    press(&mut app, "c");
    let rows: Vec<String> = app.queue.rows.iter().map(|r| r.op_id.clone()).collect();
    // Bob decides the row before it: the queue would lose a row above.
    bob_confirms_the_invoice_email(&lab.path_str());
    catch_up(&mut app, &lab);
    assert!(matches!(app.mode, Mode::Confirm(_)), "{:?}", app.mode);
    assert_eq!(app.selected().unwrap().op_id, "op-1003-charge-order");
    let now: Vec<String> = app.queue.rows.iter().map(|r| r.op_id.clone()).collect();
    assert_eq!(now, rows);
    press(&mut app, "n");
    catch_up(&mut app, &lab);
    assert!(!app
        .queue
        .rows
        .iter()
        .any(|r| r.op_id == "op-1002-invoice-email"));
    assert_eq!(app.selected().unwrap().op_id, "op-1003-charge-order");
}

/// Esc in the queue backs out one level at a time: the search, then the
/// verdict filter, then (asked first) the marks.
#[test]
fn esc_backs_out_the_search_then_the_filter_then_asks_before_dropping_marks() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    press(&mut app, "<space><space>f/op<enter>");
    assert_eq!(app.marks.len(), 2);
    assert!(app.verdict_filter.is_some() && app.search.is_some());
    press(&mut app, "<esc>");
    assert!(app.search.is_none() && app.verdict_filter.is_some());
    assert_eq!(app.marks.len(), 2);
    press(&mut app, "<esc>");
    assert!(app.verdict_filter.is_none());
    assert_eq!(app.marks.len(), 2);
    assert!(status(&app).contains("Esc again asks to drop the marks"));
    press(&mut app, "<esc>");
    assert!(pending_text(&app).starts_with("Drop all 2 marks? Nothing is written either way"));
    press(&mut app, "n");
    assert_eq!(app.marks.len(), 2);
    assert_eq!(status(&app), "the 2 marks stay");
    press(&mut app, "<esc>y");
    assert!(app.marks.is_empty());
    assert_eq!(status(&app), "2 marks dropped");
}

/// With marks, the verdict panel says that c, n and x act on the marks,
/// with their count, and whether the operation under the cursor is one.
#[test]
fn the_verdict_panel_says_whether_c_and_n_act_on_the_marks_or_the_cursor() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1002-invoice-email");
    press(&mut app, "<space>");
    // Marking moved the cursor to the next, unmarked operation.
    assert_eq!(
        app.availability(recon::console::action::Request::Decide(Decision::Confirmed)),
        Ok("acts on the 1 marked operation, not on this one".to_string())
    );
    let shown = screen(&app);
    assert!(shown.contains("acts on the 1 marked"), "{shown}");
    assert!(shown.contains("not on this one"), "{shown}");
    press(&mut app, "k");
    assert_eq!(
        app.availability(recon::console::action::Request::Decide(
            Decision::NotApplied
        )),
        Ok("acts on the 1 marked operation, this one among them".to_string())
    );
    press(&mut app, "<esc>y");
    let policy = app.availability(recon::console::action::Request::Decide(Decision::Confirmed));
    assert!(!policy.unwrap_or_default().contains("marked"));
}

/// A plain status line expires after a minute; a result stays and says
/// how old it is; "search cleared" is gone while a new search is typed.
#[test]
fn status_lines_expire_or_say_how_old_they_are() {
    use std::time::Duration;
    let (lab, clock) = a_later_day();
    let mut app = console_at(&lab, options(Some("ada")), (120, 40), &clock);
    press(&mut app, "<space>");
    assert!(status(&app).starts_with("marked "));
    clock.advance(Duration::from_secs(61));
    console::update(&mut app, Action::Poll);
    assert!(app.status.is_none(), "{}", status(&app));
    press(&mut app, "m");
    type_keys(&mut app, "looked<enter>");
    assert!(status(&app).starts_with("note #"));
    assert!(!screen(&app).contains(" ago)"));
    clock.advance(Duration::from_secs(120));
    console::update(&mut app, Action::Poll);
    assert!(status(&app).starts_with("note #"), "a result stays");
    assert!(screen(&app).contains("by ada (2m ago)"), "{}", screen(&app));
    press(&mut app, "/op<enter><esc>");
    assert!(status(&app).starts_with("search cleared"));
    press(&mut app, "/");
    assert!(app.status.is_none());
    assert!(!screen(&app).contains("search cleared"));
}

/// `R` with no marks names the rows on screen it will read and record,
/// and `n` records nothing; `y` reports in a whole sentence.
#[test]
fn rereading_asks_first_naming_the_rows_and_reports_in_a_sentence() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    let rows: Vec<String> = app.queue.rows.iter().map(|r| r.op_id.clone()).collect();
    let n = rows.len();
    let observations = |lab: &Lab| -> usize {
        let ws = lab.reopen();
        rows.iter()
            .map(|id| ws.show(id).unwrap().observations.len())
            .sum()
    };
    let before = observations(&lab);
    press(&mut app, "R");
    let asked = pending_text(&app);
    assert!(
        asked.starts_with(&format!(
            "Read each of the {n} rows on screen, {} to {} again from its receiver, and record \
             what it shows as ada's observation: {n} observations, one per operation:",
            rows[0],
            rows[n - 1]
        )),
        "{asked}"
    );
    press(&mut app, "n");
    assert_eq!(observations(&lab), before, "n records nothing");
    press(&mut app, "Ry");
    let (_, body) = report(&app);
    assert!(
        body.starts_with(&format!(
            "Recorded {n} observations as ada's, each what the receiver showed for one of the \
             {n} rows on screen, {} to {}; 0 could not be read.",
            rows[0],
            rows[n - 1]
        )),
        "{body}"
    );
}

/// The change marker is the outbox journal's head (what `recon
/// checkpoint` prints), so it moves on every commit to the outbox, from
/// any handle, whatever the store.
#[test]
fn the_change_marker_is_the_journal_head() {
    let lab = demo_lab();
    let ws = lab.reopen();
    let journal = || {
        recon::workspace::Journal::open(lab.path(), recon::OpenOptions::default())
            .unwrap()
            .checkpoint()
            .unwrap()
    };
    let before = ws.change_marker().unwrap();
    assert_eq!(before.journal, journal());
    bob_confirms_the_invoice_email(&lab.path_str());
    let after = ws.change_marker().unwrap();
    assert_ne!(after.journal, before.journal);
    assert_eq!(after.journal, journal());
}

/// `v` reads the filter's pages on a thread of its own: until its result
/// lands, the status line shows its progress against the filter's count
/// and the key that cancels it, and another bulk act waits.
#[test]
fn marking_a_whole_filter_runs_off_the_key_loop_with_its_progress() {
    let lab = Lab::demo(500);
    let mut app = console(&lab, Some("ada"));
    let unknown = app.count(Filter::State(OpState::Unknown));
    console::update(&mut app, Action::MarkAll);
    let working = app.working.as_ref().expect("v runs off the key loop");
    assert_eq!(
        working.text,
        "marking every operation the filter shows (unknown)…"
    );
    assert!(
        screen(&app).contains(&format!(" of {unknown} (")),
        "{}",
        screen(&app)
    );
    assert!(screen(&app).contains("Esc cancels"));
    type_keys(&mut app, "c");
    assert!(
        status(&app).starts_with("record confirmed is unavailable: wait: marking every"),
        "{}",
        status(&app)
    );
    until(&mut app, "the marks", |app| app.working.is_none());
    assert_eq!(app.marks.len(), usize::try_from(unknown).unwrap());
    assert!(status(&app).starts_with(&format!("marked all {unknown} operations")));
}

// ---- every size ------------------------------------------------------------------

/// The op ids the queue's rows show, in order: the word after each row's
/// lead, from the row under the column heads to the queue's bottom line.
fn queue_ids(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.contains(" op id "))
        .skip(1)
        .take_while(|l| l.starts_with('│'))
        .filter_map(|l| {
            l.chars()
                .skip(5)
                .collect::<String>()
                .split(' ')
                .next()
                .map(String::from)
        })
        .filter(|id| !id.is_empty())
        .collect()
}

/// What a decision needs, read off a rendered screen: the selected
/// operation's full id; its payload's fields when there are three or
/// fewer; each differing field with the match's value, marked `≠`; the
/// verdict; each decision the state allows, with whether it is available;
/// queue rows that never read the same; and `?` and `q` on the bar.
#[track_caller]
fn assert_shows_what_a_decision_needs(app: &App, text: &str, what: &str) {
    use recon::console::action::Request;
    let d = app.selected_detail().expect("a selected operation");
    let op = &d.operation;
    assert!(
        text.contains(op.op_id.as_str()),
        "{what}: no full id {}:\n{text}",
        op.op_id
    );
    if let Some(fields) = op.payload.as_object().filter(|f| f.len() <= 3) {
        for key in fields.keys() {
            assert!(
                text.contains(&format!("\"{key}\": ")),
                "{what}: no field {key}:\n{text}"
            );
        }
    }
    let shown = d.shown().expect("a read shown");
    for (m, paths) in shown.snapshot.matches.iter().zip(&shown.differing) {
        for path in paths {
            let key = path.trim_start_matches('/');
            let value = m.payload.pointer(path).expect("the match has the field");
            let line = format!("≠   \"{key}\": {value}");
            assert!(text.contains(&line), "{what}: no `{line}`:\n{text}");
        }
    }
    let verdict = format!("Verdict: {}", shown.verdict);
    assert!(text.contains(&verdict), "{what}: no `{verdict}`:\n{text}");
    for request in Request::ALL {
        if request.act().from_state() != op.state {
            continue;
        }
        let word = if app.availability(request).is_ok() {
            "available"
        } else {
            "unavailable"
        };
        let said = format!("{} {}: {word}", keys::key_for(request), request.name());
        assert!(text.contains(&said), "{what}: no `{said}`:\n{text}");
    }
    let ids = queue_ids(text);
    assert!(ids.len() >= 2, "{what}: no queue rows:\n{text}");
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(
        distinct.len(),
        ids.len(),
        "{what}: two rows read the same:\n{text}"
    );
    let bar = text.lines().last().unwrap_or_default();
    for item in ["? help", "q quit"] {
        assert!(bar.contains(item), "{what}: the bar lacks `{item}`: {bar}");
    }
}

/// The three screens a decision is made on: the queue (unknown), the all
/// view, and a payload mismatch, by their keys.
const DECISION_SCREENS: [(&str, &str); 3] = [("queue", ""), ("all", "5"), ("mismatch", "jjjjj")];

/// The sizes from 80x24 to 200x50, every fifth column and every other
/// row, each screen resized in place (the same console, as a terminal
/// window is dragged).
#[test]
fn every_size_from_80x24_to_200x50_shows_what_a_decision_needs() {
    let lab = demo_lab();
    for (name, keys) in DECISION_SCREENS {
        let mut app = console_on(&lab, options(None), (80, 24));
        press(&mut app, keys);
        for width in (80..=200).step_by(5) {
            for height in (24..=50).step_by(2) {
                console::update(&mut app, Action::Resize(width, height));
                let what = format!("{name} at {width}x{height}");
                assert_shows_what_a_decision_needs(&app, &screen(&app), &what);
            }
        }
    }
}

#[test]
fn goldens_at_four_sizes_show_the_full_id_the_differing_field_and_the_decisions() {
    let lab = demo_lab();
    for (name, keys) in DECISION_SCREENS {
        for (width, height) in [(80, 24), (100, 32), (120, 40), (200, 50)] {
            let mut app = console_on(&lab, options(None), (width, height));
            press(&mut app, keys);
            let file = format!("decide_{name}_{width}x{height}");
            golden(&file, &app, lab.path());
            let kept = std::fs::read_to_string(screenshots_dir().join(format!("{file}.txt")))
                .expect("the golden is written");
            assert_shows_what_a_decision_needs(&app, &kept, &file);
        }
    }
}

/// Ids that share their start and their end stay apart in the queue at
/// every width: the cut moves to where they differ.
#[test]
fn op_ids_that_share_a_start_and_an_end_never_read_the_same() {
    let mut lab = Lab::new();
    for n in 1..=6 {
        let id = format!("op-2024-{n}-customer-notification-email");
        lab.ws.prepare(&id, "send_email", &json!({"n": n})).unwrap();
    }
    let mut app = console_on(&lab, options(None), (80, 24));
    press(&mut app, "5");
    for width in (80..=200).step_by(10) {
        console::update(&mut app, Action::Resize(width, 40));
        let text = screen(&app);
        let ids = queue_ids(&text);
        assert_eq!(ids.len(), 6, "{text}");
        let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 6, "at {width} columns:\n{text}");
    }
    let cut = text::fit_apart(
        &[
            "op-1001-welcome-email".to_string(),
            "op-1002-invoice-email".to_string(),
        ],
        10,
    )
    .unwrap();
    assert_ne!(cut[0], cut[1]);
    assert!(
        cut.iter()
            .all(|c| c.contains('…') && c.chars().count() == 10),
        "{cut:?}"
    );
}

// ---- words -----------------------------------------------------------------------

/// `p` promises everything: it lists each recorded observation with its
/// time, who recorded it, the receiver, the verdict and the flags.
#[test]
fn p_lists_every_recorded_observation_of_the_operation() {
    let (lab, clock) = a_later_day();
    let mut app = console_at(&lab, options(None), (120, 40), &clock);
    select(&mut app, "op-1002-invoice-email");
    press(&mut app, "p");
    let (_, body) = report(&app);
    let listed = body.split("\nobservations:\n").nth(1).unwrap_or_default();
    let recorded = lab
        .reopen()
        .show("op-1002-invoice-email")
        .unwrap()
        .observations;
    assert_eq!(recorded.len(), 1);
    let o = &recorded[0];
    let at = o.seen.observed_at.to_string();
    let line = format!(
        "{} {}Z #{} by ada from builtin: exact_match_existence_only · complete yes · \
         authoritative yes · closed no · 1 match",
        &at[5..10],
        &at[11..16],
        o.seq
    );
    assert!(listed.starts_with(&line), "{line}\n{body}");
}

/// Each compensation approval in the history carries the time it was made.
#[test]
fn the_history_shows_when_each_approval_was_made() {
    let lab = demo_lab();
    let mut app = console(&lab, None);
    press(&mut app, "3");
    select(&mut app, "op-1010-annual-plan");
    let created = lab
        .reopen()
        .operation("op-1011-annual-plan-refund")
        .unwrap()
        .unwrap()
        .triage
        .created_at
        .to_string();
    let at = format!("{} {}Z", &created[5..10], &created[11..16]);
    press(&mut app, "p");
    let (_, body) = report(&app);
    assert!(
        body.contains(&format!(
            "{at} approval by lee.finance: op-1011-annual-plan-refund"
        )),
        "{at}\n{body}"
    );
}

/// When the selected operation has no recorded observation, the panel says
/// its read is live and unrecorded beside the queue's `never`; once `s`
/// records one, the note goes.
#[test]
fn a_never_row_says_the_panels_read_is_live_and_unrecorded() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    select(&mut app, "op-1002-invoice-email");
    let note = "live, unrecorded read: the queue keeps never";
    let text = screen(&app);
    assert!(
        text.contains("op-1002-invoice-email         never"),
        "{text}"
    );
    assert!(text.contains(note), "{text}");
    press(&mut app, "s");
    let text = screen(&app);
    assert!(!text.contains(note), "{text}");
    assert!(
        !text.contains("op-1002-invoice-email         never"),
        "{text}"
    );
}

// ---- first frames ----------------------------------------------------------------

/// Every state and verdict filter counts what its pages hold, whichever
/// side the count is taken from (the demo's queue is mostly `unknown`, so
/// its `never` count is taken from the other states).
#[test]
fn filter_counts_match_the_operations_they_mark_from_either_side() {
    use recon::domain::{QueueFilter, VerdictFilter};
    let lab = demo_lab();
    let ws = lab.reopen();
    let mut verdicts = vec![None, Some(VerdictFilter::Never)];
    verdicts.extend(Verdict::ALL.iter().map(|v| Some(VerdictFilter::Is(*v))));
    let mut checked = 0;
    for state in [
        None,
        Some(OpState::Unknown),
        Some(OpState::Prepared),
        Some(OpState::Confirmed),
        Some(OpState::NotApplied),
    ] {
        for verdict in &verdicts {
            let filter = QueueFilter {
                state,
                verdict: *verdict,
                ..QueueFilter::default()
            };
            let keys = ws.queue_keys(filter, 1_000).unwrap();
            let count = ws.queue_count(filter).unwrap();
            assert_eq!(count, i64::try_from(keys.len()).unwrap(), "{filter:?}");
            assert!(
                keys.windows(2).all(|w| w[0].op_id < w[1].op_id),
                "{filter:?}"
            );
            checked += usize::from(count > 0);
        }
    }
    assert!(checked >= 8, "{checked}");
    // The unknown queue's `never` count is taken from the other side: the
    // other states hold fewer operations than the verdict does.
    let counts = ws.counts().unwrap();
    let elsewhere: i64 = counts
        .iter()
        .filter(|(s, _)| **s != OpState::Unknown)
        .map(|(_, n)| n)
        .sum();
    let never = QueueFilter {
        verdict: Some(VerdictFilter::Never),
        ..QueueFilter::default()
    };
    assert!(elsewhere < ws.queue_count(never).unwrap(), "{counts:?}");
}

/// At every width from 80 columns the bottom bar keeps `?` and `q`, each
/// act the evidence allows now, the filter and the search; the acts it
/// does not allow are the first left out when the bar is short.
#[test]
fn the_bottom_bar_keeps_help_quit_and_the_allowed_acts_at_every_width() {
    let lab = demo_lab();
    for keys in ["", "jjjjj", "5", "2"] {
        let mut app = console_on(&lab, options(None), (80, 24));
        press(&mut app, keys);
        for width in (80..=200).step_by(5) {
            console::update(&mut app, Action::Resize(width, 30));
            let text = screen(&app);
            let bar = text.lines().last().unwrap_or_default();
            let mut kept = vec!["? help".to_string(), "q quit".to_string()];
            kept.extend(["Tab filter", "/ search"].map(String::from));
            for binding in keys::bindings(Context::Queue) {
                if let Action::Request(request) = binding.action {
                    if app.availability(request).is_ok() {
                        kept.push(format!("{} {}", binding.keys[0].name(), binding.label));
                    }
                }
            }
            for item in &kept {
                assert!(
                    bar.contains(item.as_str()),
                    "{keys:?} at {width}: `{item}` not in {bar}"
                );
            }
        }
    }
}

/// `P` asks first, naming how many unknown operations the filter shows and
/// at which receivers; `n` records nothing; `y` authorizes that exact
/// list and runs the policy off the key loop, ending in a report of what
/// was recorded, left and skipped. Each decision it recorded is the
/// policy's (run by the reviewer), on a closed snapshot, and the journal
/// verifies.
#[test]
fn the_resolve_key_asks_naming_the_counts_and_records_only_the_policys_decisions() {
    let (lab, clock) = a_later_day();
    let mut app = console_at(&lab, options(Some("ada")), (120, 40), &clock);
    let unknown: Vec<String> = lab
        .reopen()
        .ops(Some(OpState::Unknown), None, 1_000)
        .unwrap()
        .into_iter()
        .map(|op| op.op_id)
        .collect();
    let before = dump(lab.path());
    press(&mut app, "P");
    let asked = pending_text(&app);
    assert!(
        asked.starts_with(&format!(
            "Resolve by policy provable the {} unknown operations the filter shows (unknown), at 1 \
             receiver (builtin), authorized by ada:",
            unknown.len()
        )),
        "{asked}"
    );
    press(&mut app, "n");
    assert_eq!(before, dump(lab.path()), "n records nothing");
    press(&mut app, "Py");
    let (title, body) = report(&app);
    assert!(
        title.starts_with("bulk resolve by policy provable: "),
        "{title}"
    );
    assert!(
        body.starts_with("By policy provable, run by ada over unknown: recorded "),
        "{body}"
    );
    let ws = lab.reopen();
    let (mut confirmed, mut not_applied) = (0, 0);
    let mut decided_one = None;
    for id in &unknown {
        let detail = ws.show(id).unwrap();
        match detail.operation.state {
            OpState::Unknown => {
                assert!(detail.evidence.is_empty(), "{id}");
                continue;
            }
            OpState::Confirmed => confirmed += 1,
            _ => not_applied += 1,
        }
        decided_one.get_or_insert((id.clone(), detail.operation.state));
        let evidence = &detail.evidence[0];
        assert_eq!(
            evidence.source,
            recon::domain::EvidenceSource::Policy,
            "{id}"
        );
        assert_eq!(evidence.reviewer.as_deref(), Some("ada"), "{id}");
        assert_eq!(evidence.snapshot["closed"], true, "{id}");
    }
    assert!(confirmed + not_applied > 0, "{body}");
    let counted = format!("recorded {confirmed} confirmed and {not_applied} not_applied");
    assert!(body.contains(&counted), "{body}");
    // The history panel tells the policy's decision from a person's.
    let (id, state) = decided_one.unwrap();
    let filter = if state == OpState::Confirmed {
        "3"
    } else {
        "4"
    };
    press(&mut app, &format!("<esc>{filter}/{id}<enter>"));
    let shown = screen(&app);
    assert!(shown.contains("policy provable, run by ada"), "{shown}");
    let report = recon::workspace::Journal::open(lab.path(), recon::OpenOptions::default())
        .unwrap()
        .verify(Default::default())
        .unwrap();
    assert!(report.intact, "{report:?}");
}

// ---- what the reviewer saw (issue 30), headless ----------------------------------------

/// A paste is text, never keys: outside a text field it is dropped with a
/// word (the dialog `c` would open stays shut); in the note form it is
/// typed on one line, line breaks as spaces, and Enter is still the
/// reviewer's own key.
#[test]
fn a_paste_is_typed_into_a_field_on_one_line_and_dropped_anywhere_else() {
    let lab = demo_lab();
    let before = dump(lab.path());
    let mut app = console(&lab, Some("ada"));
    console::update::paste(&mut app, "copy yes");
    assert!(matches!(app.mode, Mode::Normal));
    let status = app.status.as_ref().expect("a status line");
    assert!(
        status
            .text
            .starts_with("a paste of 8 characters was dropped"),
        "{}",
        status.text
    );
    assert_eq!(dump(lab.path()), before, "the paste wrote nothing");
    press(&mut app, "m");
    console::update::paste(&mut app, "called\nthe customer\r\n\x1b[2J");
    let Mode::Annotate(form) = &app.mode else {
        panic!("the note form closed: {}", screen(&app));
    };
    assert_eq!(form.input.text(), "called the customer [2J");
    assert_eq!(dump(lab.path()), before, "nothing recorded before Enter");
}

/// A paste past the bound is cut there, and the status line says so.
#[test]
fn a_paste_into_a_field_is_bounded() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    press(&mut app, "/");
    let long = "x".repeat(console::update::MAX_PASTE_CHARS + 10);
    console::update::paste(&mut app, &long);
    let Mode::Search { input, .. } = &app.mode else {
        panic!("the search closed: {}", screen(&app));
    };
    assert_eq!(input.text().len(), console::update::MAX_PASTE_CHARS);
    let status = app.status.as_ref().expect("a status line");
    assert!(
        status.text.contains("cut at 65536 characters"),
        "{}",
        status.text
    );
}

/// Headless too, a console smaller than 80x24 acts on nothing it is
/// given: `j c y` at 60x20 leaves the workspace as it was.
#[test]
fn keys_below_the_minimum_size_are_ignored_headless_too() {
    let lab = demo_lab();
    let before = dump(lab.path());
    let mut app = console_on(&lab, options(Some("ada")), (60, 20));
    press(&mut app, "jcyjny");
    assert!(matches!(app.mode, Mode::Normal));
    assert_eq!(dump(lab.path()), before);
    console::update(&mut app, Action::Resize(120, 40));
    let status = app.status.as_ref().expect("a status line");
    assert_eq!(status.text, "6 keys ignored below 80x24");
}

/// The help pages: PgDn moves it a page (the rows its box shows), End
/// shows its last line and no further, so one `k` from there moves it at
/// once however many `j`s were pressed past the end, and Home goes back to
/// its first line.
#[test]
fn the_help_pages_to_its_end_and_never_scrolls_past_it() {
    let lab = demo_lab();
    let mut app = console(&lab, Some("ada"));
    let scroll_of = |app: &App| match app.mode {
        Mode::Help { scroll } => scroll,
        ref other => panic!("the help is not open: {other:?}"),
    };
    let area = Rect::new(0, 0, app.width, app.height);
    press(&mut app, "?");
    let console::view::Scroll { last, page } =
        console::view::overlay_scroll(&app, area).expect("the help scrolls");
    assert!(
        last > page,
        "the help is longer than two pages: {last} {page}"
    );
    let first = "Queue and selected operation";
    assert!(screen(&app).contains(first), "{}", screen(&app));
    press(&mut app, "<pgdn>");
    assert_eq!(scroll_of(&app), page);
    press(&mut app, "<pgup>");
    assert_eq!(scroll_of(&app), 0);
    press(&mut app, "<end>");
    assert_eq!(scroll_of(&app), last);
    let end = screen(&app);
    // The help's last words, on the box's last row at this width.
    assert!(end.contains("│changed.  "), "{end}");
    assert!(!end.contains(first), "{end}");
    press(&mut app, "jjjjj<pgdn><pgdn>");
    assert_eq!(scroll_of(&app), last);
    assert_eq!(screen(&app), end);
    press(&mut app, "k");
    assert_eq!(scroll_of(&app), last - 1);
    press(&mut app, "<home>");
    assert_eq!(scroll_of(&app), 0);
    assert!(screen(&app).contains(first), "{}", screen(&app));
}

/// `line` with every history time in it (`12-03 08:00Z`) replaced by
/// `MM-DD HH:MMZ`.
fn mask_history_times(line: &str) -> String {
    const SHAPE: &[u8] = b"00-00 00:00Z";
    let chars: Vec<char> = line.chars().collect();
    let fits = |at: usize| {
        chars.len() >= at + SHAPE.len()
            && SHAPE
                .iter()
                .zip(&chars[at..])
                .all(|(&shape, &c)| match shape {
                    b'0' => c.is_ascii_digit(),
                    other => c == char::from(other),
                })
    };
    let mut out = String::new();
    let mut at = 0;
    while at < chars.len() {
        if fits(at) {
            out.push_str("MM-DD HH:MMZ");
            at += SHAPE.len();
        } else {
            out.push(chars[at]);
            at += 1;
        }
    }
    out
}

/// The history panel shows whole entries: at every size and on every
/// operation of the demo's queue, its first row begins an entry, never
/// the wrapped tail (the lines that hang two columns in) of one whose
/// start is cut off.
#[test]
fn the_history_shows_whole_entries_never_the_tail_of_one() {
    let lab = demo_lab();
    let mut checked = 0;
    for size in [(80, 24), (100, 32), (120, 40), (200, 50)] {
        let mut app = console_on(&lab, options(Some("ada")), size);
        press(&mut app, "5");
        for _ in 0..12 {
            let shown = screen(&app);
            let rows: Vec<Vec<char>> = shown.lines().map(|l| l.chars().collect()).collect();
            let title = rows.iter().enumerate().find_map(|(i, row)| {
                let text: String = row.iter().collect();
                let col = text.find(" History ")?;
                Some((i, text[..col].chars().count()))
            });
            if let Some((row, col)) = title {
                let first: String = rows
                    .get(row + 1)
                    .map(|r| r.iter().skip(col).take(13).collect())
                    .unwrap_or_default();
                // An entry's later lines hang two columns in.
                let starts_entry = !first.starts_with("  ");
                assert!(
                    starts_entry || first.trim().is_empty(),
                    "{size:?}: the history's first row is {first:?}:\n{shown}"
                );
                checked += 1;
            }
            press(&mut app, "j");
        }
    }
    assert!(checked > 0, "no history panel was seen");
}

/// A job's progress says about how long is left at its rate so far:
/// nothing before an operation is done or once all are, and halfway
/// through no more than the time the first half took.
#[test]
fn a_jobs_progress_says_about_how_long_is_left_at_its_rate() {
    let before = std::time::Instant::now();
    let progress = recon::console::app::Progress::new(10);
    assert_eq!(progress.left(), None);
    progress.step(5);
    let left = progress.left().expect("a rate once half is done");
    assert!(left <= before.elapsed(), "{left:?}");
    progress.step(5);
    assert_eq!(progress.left(), None);
}

/// The filter bar never cuts the mark count (the scope of a bulk act): at
/// 80 columns, with the verdict filter on and a search applied, the tabs
/// and the search's text give way and "N marked" is shown whole.
#[test]
fn the_mark_count_is_never_cut_at_80_columns() {
    let lab = demo_lab();
    let mut app = console_on(&lab, options(Some("ada")), (80, 24));
    press(&mut app, "5<space><space><space>");
    press(&mut app, "/op-10<enter>");
    let bar = |app: &App| screen(app).lines().nth(1).unwrap_or_default().to_string();
    assert_eq!(app.marks.len(), 3, "{}", screen(&app));
    assert!(bar(&app).contains("3 marked"), "{}", bar(&app));
    press(
        &mut app,
        "/op-1002-invoice-email-and-more-words-than-fit<enter>",
    );
    assert!(bar(&app).trim_end().ends_with("3 marked"), "{}", bar(&app));
    press(&mut app, "f");
    assert!(bar(&app).trim_end().ends_with("3 marked"), "{}", bar(&app));
}
