//! Nothing is acted on that the reviewer cannot see: the keys pressed
//! while the terminal is too small to show the console, a dialog that no
//! longer fits its window, pasted text, and a terminal's answer that came
//! too late for the probe and would otherwise read as keys.
//!
//! Below the minimum size the screen shows only a request for room, so
//! every key but `q`, `?` (and closing the help it opens) is ignored, and
//! counted; once the console fits again the status line says how many were
//! ignored. A confirmation is never scrolled, so when the window shrinks
//! below what it needs (its last line names the key that carries it out)
//! it closes with nothing written. A paste is text, never keys: in a text
//! field it is typed (bounded, on one line), anywhere else it is dropped
//! and the status line says so.
//!
//! The console asks the terminal for its background as it starts
//! ([`crate::console::probe`]); a terminal slower than the probe's timeout
//! answers in the key loop, where crossterm reads `ESC ] 11 ; rgb:… BEL`
//! as Alt+], `1`, `1`, `;`, the colour's characters and Ctrl+G (`ESC \`
//! as `Alt+\`). Alt+] is bound to nothing, so it begins such an answer:
//! the keys that follow it in the answer's shape are dropped until its
//! end, at most [`MAX_ANSWER_KEYS`] of them, and the status line says so
//! once it has ended; the first key that cannot be part of it is read as
//! usual. This sits below the modes' modules and uses only the state, the
//! view's sizes and the status line.

use super::super::action::Action;
use super::super::app::{App, Mode, Tone};
use super::super::bindings::Context;
use super::super::keys::context;
use super::super::view::{self, MIN_HEIGHT, MIN_WIDTH};
use super::status::set_status;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;

/// The most characters one paste types into a field: a compensation's
/// payload pasted whole fits, a file pasted by mistake does not flood the
/// form (the field's own check then says what is wrong with it).
pub const MAX_PASTE_CHARS: usize = 64 * 1024;

/// The most keys dropped after the Alt+] that begins a terminal's late
/// answer: `11;rgb:RRRR/GGGG/BBBB` and its end are 22, an `rgba:` answer
/// with its alpha 28.
pub const MAX_ANSWER_KEYS: usize = 40;

fn screen(width: u16, height: u16) -> Rect {
    Rect::new(0, 0, width, height)
}

/// Whether the console is too small to be shown now.
pub(super) fn too_small(app: &App) -> bool {
    view::too_small(screen(app.width, app.height))
}

/// Whether `action` is ignored because the terminal is too small: every
/// key but quit and the help (and closing the help) is, and is counted.
/// A resize and the poll are not keys.
pub(super) fn ignored(app: &mut App, action: Action) -> bool {
    if !too_small(app) {
        return false;
    }
    let allowed = match action {
        Action::Resize(..) | Action::Poll | Action::Stop | Action::Quit | Action::Help => true,
        Action::Cancel => matches!(app.mode, Mode::Help { .. }),
        _ => false,
    };
    if !allowed {
        app.unseen.ignored += 1;
    }
    !allowed
}

/// After a resize from `before`: an open confirmation that no longer fits
/// closes with nothing written; once the console fits again, the status
/// line says what happened while it did not.
pub(super) fn resized(app: &mut App, before: (u16, u16)) {
    let now = screen(app.width, app.height);
    if let Mode::Confirm(pending) = &app.mode {
        let was = screen(before.0, before.1);
        let shrunk = now.width < was.width || now.height < was.height;
        if view::too_small(now) || (shrunk && !view::confirm_fits(pending, now)) {
            app.unseen.closed = Some(pending.title.clone());
            app.mode = Mode::Normal;
        }
    }
    if view::too_small(now) {
        return;
    }
    let unseen = std::mem::take(&mut app.unseen);
    let mut said = Vec::new();
    if let Some(title) = unseen.closed {
        said.push(format!(
            "the {title} dialog closed, too small to show; nothing written"
        ));
    }
    if unseen.ignored > 0 {
        said.push(format!(
            "{} key{} ignored below {MIN_WIDTH}x{MIN_HEIGHT}",
            unseen.ignored,
            if unseen.ignored == 1 { "" } else { "s" },
        ));
    }
    if !said.is_empty() {
        set_status(app, Tone::Warn, said.join("; "));
    }
}

/// What a pasted text types into a field: each character that is not a
/// control character, line breaks and tabs as spaces (a field is one
/// line, and a pasted line break is not Enter).
fn typed(c: char) -> Option<char> {
    match c {
        '\n' | '\r' | '\t' => Some(' '),
        c if c.is_control() => None,
        c => Some(c),
    }
}

/// The characters a paste types, at most [`MAX_PASTE_CHARS`], and whether
/// any were left out past that bound. A CRLF is one space.
pub(super) fn pasted(text: &str) -> (Vec<char>, bool) {
    let text = text.replace("\r\n", "\n");
    let mut chars: Vec<char> = text.chars().filter_map(typed).collect();
    let cut = chars.len() > MAX_PASTE_CHARS;
    chars.truncate(MAX_PASTE_CHARS);
    (chars, cut)
}

/// Whether a paste goes into a text field now (otherwise it is dropped).
pub(super) fn pastes_into_field(app: &App) -> bool {
    !too_small(app) && context(&app.mode) == Context::Input
}

/// A paste outside a text field: dropped, and said.
pub(super) fn drop_paste(app: &mut App, text: &str) {
    if too_small(app) {
        app.unseen.ignored += 1;
        return;
    }
    let n = text.chars().count();
    set_status(
        app,
        Tone::Warn,
        format!(
            "a paste of {n} character{} was dropped: pasted text is never read as keys; paste \
             into a text field (/ search, a note, a form)",
            if n == 1 { "" } else { "s" }
        ),
    );
}

/// Whether `event` is a key of a terminal's late answer to the background
/// question, and so dropped: Alt+] begins one, then `11;`, printable
/// characters and its end (Ctrl+G for BEL, `Alt+\` for `ESC \`), at most
/// [`MAX_ANSWER_KEYS`] after the Alt+]. A key that cannot continue it ends
/// the dropping and is read as usual. Only presses count.
pub(super) fn late_answer(app: &mut App, event: KeyEvent) -> bool {
    if event.kind != KeyEventKind::Press {
        return false;
    }
    let alt =
        |c: char| event.code == KeyCode::Char(c) && event.modifiers.contains(KeyModifiers::ALT);
    let Some(dropped) = app.late_answer else {
        app.late_answer = alt(']').then_some(0);
        return app.late_answer.is_some();
    };
    let plain = match event.code {
        KeyCode::Char(c)
            if !event
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    };
    let bel = event.code == KeyCode::Char('g') && event.modifiers.contains(KeyModifiers::CONTROL);
    let ends = bel || alt('\\');
    let fits = match dropped {
        0 | 1 => plain == Some('1'),
        2 => plain == Some(';'),
        _ => ends || plain.is_some_and(|c| c == ' ' || c.is_ascii_graphic()),
    };
    app.late_answer = (fits && !ends && dropped + 1 < MAX_ANSWER_KEYS).then_some(dropped + 1);
    if fits && ends {
        set_status(
            app,
            Tone::Plain,
            "the terminal's late answer about its background was dropped, not read as keys",
        );
    }
    fits
}
