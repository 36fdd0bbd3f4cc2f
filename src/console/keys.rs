//! The pure key map built on the key table, and the key syntax of
//! `recon screenshot --keys`.
//!
//! [`map_key`] reads the one key table ([`super::bindings`]): the mode of
//! the [`App`] picks the [`Context`], and the first binding of that context
//! (or of every context) that matches the key is its action. In a text
//! field, printable keys that are not bound are typed. Only key presses
//! count: releases and repeats that some terminals report are ignored.
//! The table sits below the state ([`super::app`] names a key in a reason)
//! and this map above it; the table's names are re-exported here for the
//! callers of the map.

use super::action::Action;
use super::app::{App, Mode};
pub use super::bindings::{bindings, key_for, Binding, Context, Key, BINDINGS};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// The key context of a mode.
pub fn context(mode: &Mode) -> Context {
    match mode {
        Mode::Normal => Context::Queue,
        Mode::Help { .. } | Mode::Report(_) => Context::Overlay,
        Mode::Search { .. } | Mode::Reviewer { .. } | Mode::Compensate(_) | Mode::Annotate(_) => {
            Context::Input
        }
        Mode::Confirm(_) => Context::Confirm,
        Mode::Keep(_) => Context::Pick,
    }
}

/// The pure key map: which action a key press means in the app's current
/// mode, if any.
pub fn map_key(event: KeyEvent, app: &App) -> Option<Action> {
    if event.kind != KeyEventKind::Press {
        return None;
    }
    let context = context(&app.mode);
    let bound = BINDINGS
        .iter()
        .filter(|b| b.context == context || b.context == Context::Global)
        .find(|b| b.keys.iter().any(|key| key.matches(&event)));
    if let Some(binding) = bound {
        return Some(binding.action);
    }
    match (context, event.code) {
        (Context::Input, KeyCode::Char(c))
            if !event
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(Action::Input(c))
        }
        _ => None,
    }
}

/// The key syntax, as `recon screenshot --help` prints it.
pub const KEY_SYNTAX: &str = "\
Key syntax for --keys:
  Every character is one key press of that character; whitespace only
  separates and is ignored. A name in angle brackets is a named key:
    <enter> <esc> <tab> <backtab> <space> <bs> <del> <up> <down> <left>
    <right> <pgup> <pgdn> <home> <end> <lt> (a literal <) <gt> and <c-X>
    (Control-X)
  Names are case-insensitive. The keys are those of the console (press ? in
  it, or see docs): for example
    --keys 'jj'                  move the cursor down twice
    --keys '/refund<enter>'      search for \"refund\"
    --keys 'x'                   ask for a closing snapshot (the confirmation)
    --keys '<space><space>n'     mark two ops and ask to record not_applied
  A mutation asks for confirmation; a `y` after it carries it out for real.

Exit codes: 0 printed; 2 usage (bad size or keys); 3 refused (blank
--reviewer); 4 storage (missing workspace).";

/// The names `recon screenshot --keys` accepts inside `<...>`.
pub const KEY_NAMES: &[(&str, KeyCode)] = &[
    ("enter", KeyCode::Enter),
    ("esc", KeyCode::Esc),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("s-tab", KeyCode::BackTab),
    ("space", KeyCode::Char(' ')),
    ("bs", KeyCode::Backspace),
    ("backspace", KeyCode::Backspace),
    ("del", KeyCode::Delete),
    ("delete", KeyCode::Delete),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("pgup", KeyCode::PageUp),
    ("pageup", KeyCode::PageUp),
    ("pgdn", KeyCode::PageDown),
    ("pagedown", KeyCode::PageDown),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("lt", KeyCode::Char('<')),
    ("gt", KeyCode::Char('>')),
];

/// Parses the key syntax of `recon screenshot --keys`: every character is a
/// key press of that character, except that whitespace separates and is
/// ignored, and `<name>` is a named key (`<enter>`, `<esc>`, `<space>`,
/// `<down>`, `<c-c>` for Control-C, `<lt>` for `<` itself; see
/// [`KEY_NAMES`]). Names are case-insensitive.
pub fn parse_keys(text: &str) -> Result<Vec<KeyEvent>, String> {
    let mut keys = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c != '<' {
            keys.push(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            continue;
        }
        let mut name = String::new();
        loop {
            match chars.next() {
                Some('>') => break,
                Some(c) => name.push(c),
                None => {
                    return Err(format!(
                        "`<{name}` is not closed with `>` (write <lt> for a literal <)"
                    ))
                }
            }
        }
        keys.push(named_key(&name)?);
    }
    Ok(keys)
}

fn named_key(name: &str) -> Result<KeyEvent, String> {
    let lower = name.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("c-") {
        let mut chars = rest.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            return Ok(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
        }
    }
    KEY_NAMES
        .iter()
        .find(|(n, _)| *n == lower)
        .map(|(_, code)| KeyEvent::new(*code, KeyModifiers::NONE))
        .ok_or_else(|| {
            format!(
                "unknown key <{name}>; known: {}, and <c-X> for Control-X",
                KEY_NAMES
                    .iter()
                    .map(|(n, _)| format!("<{n}>"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })
}
