//! The one key table: every key the console understands, in which
//! context, with the words the help overlay and the bottom bar show for it.
//!
//! [`BINDINGS`] is the only place a key is bound. The help overlay and the
//! bottom bar are generated from it, and the key map ([`super::keys`])
//! reads it, so what the screen says a key does is what it does. Each
//! binding belongs to a [`Context`] (the queue, a confirmation, a text
//! field, an overlay). The table is plain data over [`Action`]s and knows
//! nothing of the console's state, so the state itself can name a key in
//! its words (a reason that says which key takes a closing snapshot).

use super::action::{Action, Edit, Request};
use crate::domain::Decision;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// The queue and the panels of the selected operation.
    Queue,
    /// A confirmation dialog.
    Confirm,
    /// The "keep one" picker of a duplicate's matches.
    Pick,
    /// A text field: the search, the reviewer's name, the compensation form.
    Input,
    /// The help overlay and result reports.
    Overlay,
    /// Everywhere.
    Global,
}

impl Context {
    pub fn title(self) -> &'static str {
        match self {
            Context::Queue => "Queue and selected operation",
            Context::Confirm => "Confirmation",
            Context::Pick => "Keep one (a duplicate's matches)",
            Context::Input => "Text fields (search, reviewer name, compensation form)",
            Context::Overlay => "Help and results",
            Context::Global => "Anywhere",
        }
    }
}

/// One key, as the table lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn k(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: false,
    }
}

const fn code(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}

impl Key {
    /// Shift is part of the character (`G`), and terminals disagree on
    /// whether they also report it, so only Control is compared.
    pub fn matches(&self, event: &KeyEvent) -> bool {
        let has_ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        let same_code = match (self.code, event.code) {
            (KeyCode::Char(a), KeyCode::Char(b)) if self.ctrl => a.eq_ignore_ascii_case(&b),
            (a, b) => a == b,
        };
        same_code && has_ctrl == self.ctrl
    }

    pub fn name(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "space".to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Up => "↑".to_string(),
            KeyCode::Down => "↓".to_string(),
            KeyCode::Left => "←".to_string(),
            KeyCode::Right => "→".to_string(),
            KeyCode::PageUp => "PgUp".to_string(),
            KeyCode::PageDown => "PgDn".to_string(),
            KeyCode::Home => "Home".to_string(),
            KeyCode::End => "End".to_string(),
            KeyCode::Enter => "Enter".to_string(),
            KeyCode::Esc => "Esc".to_string(),
            KeyCode::Tab => "Tab".to_string(),
            KeyCode::BackTab => "S-Tab".to_string(),
            KeyCode::Backspace => "Bksp".to_string(),
            KeyCode::Delete => "Del".to_string(),
            other => format!("{other:?}"),
        };
        if self.ctrl {
            format!("C-{base}")
        } else {
            base
        }
    }
}

/// One entry of the key table.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub context: Context,
    pub keys: &'static [Key],
    pub action: Action,
    /// A word or two for the bottom bar; empty keeps it out of the bar.
    pub label: &'static str,
    /// The help overlay's sentence.
    pub help: &'static str,
}

impl Binding {
    pub fn key_names(&self) -> String {
        self.keys
            .iter()
            .map(Key::name)
            .collect::<Vec<_>>()
            .join("/")
    }
}

const fn bind(
    context: Context,
    keys: &'static [Key],
    action: Action,
    label: &'static str,
    help: &'static str,
) -> Binding {
    Binding {
        context,
        keys,
        action,
        label,
        help,
    }
}

use Context::{Confirm, Global, Input, Overlay, Pick, Queue};

/// Every key the console understands.
pub static BINDINGS: &[Binding] = &[
    bind(
        Queue,
        &[code(KeyCode::Down), k('j')],
        Action::Down,
        "",
        "next operation",
    ),
    bind(
        Queue,
        &[code(KeyCode::Up), k('k')],
        Action::Up,
        "",
        "previous operation",
    ),
    bind(
        Queue,
        &[code(KeyCode::PageDown), ctrl('d')],
        Action::PageDown,
        "",
        "next page",
    ),
    bind(
        Queue,
        &[code(KeyCode::PageUp), ctrl('u')],
        Action::PageUp,
        "",
        "previous page",
    ),
    bind(
        Queue,
        &[code(KeyCode::Home), k('g')],
        Action::First,
        "",
        "first operation",
    ),
    bind(
        Queue,
        &[code(KeyCode::End), k('G')],
        Action::Last,
        "",
        "last operation",
    ),
    bind(
        Queue,
        &[code(KeyCode::Tab)],
        Action::NextFilter,
        "filter",
        "next state filter (unknown, prepared, confirmed, not_applied, all)",
    ),
    bind(
        Queue,
        &[code(KeyCode::BackTab)],
        Action::PrevFilter,
        "",
        "previous state filter",
    ),
    bind(
        Queue,
        &[k('1')],
        Action::Filter(0),
        "",
        "show unknown operations",
    ),
    bind(
        Queue,
        &[k('2')],
        Action::Filter(1),
        "",
        "show prepared operations",
    ),
    bind(
        Queue,
        &[k('3')],
        Action::Filter(2),
        "",
        "show confirmed operations",
    ),
    bind(
        Queue,
        &[k('4')],
        Action::Filter(3),
        "",
        "show not_applied operations",
    ),
    bind(
        Queue,
        &[k('5')],
        Action::Filter(4),
        "",
        "show all operations",
    ),
    bind(
        Queue,
        &[k('f')],
        Action::NextVerdict,
        "verdict",
        "next latest-verdict filter: any, never (no observation recorded), then each verdict",
    ),
    bind(
        Queue,
        &[k('F')],
        Action::PrevVerdict,
        "",
        "previous latest-verdict filter",
    ),
    bind(
        Queue,
        &[k('!')],
        Action::NextEscalated,
        "escalated",
        "escalation filter: any, escalated only (! in the row), not escalated",
    ),
    bind(
        Queue,
        &[k('/')],
        Action::Search,
        "search",
        "search op ids, actions and payloads as you type (Enter keeps, Esc goes back)",
    ),
    bind(
        Queue,
        &[k(' ')],
        Action::ToggleMark,
        "mark",
        "mark or unmark for bulk triage (x, c, n then apply to every mark)",
    ),
    bind(
        Queue,
        &[k('v')],
        Action::MarkAll,
        "mark all",
        "mark every operation the filters show, on every page (the status says how many)",
    ),
    bind(
        Queue,
        &[k('s')],
        Action::ReadSnapshot,
        "read",
        "read snapshot: a fresh, non-closing read, recorded as your observation",
    ),
    bind(
        Queue,
        &[k('R')],
        Action::Reread,
        "re-read",
        "re-read every mark (or the rows on screen) as your observations (asks first)",
    ),
    bind(
        Queue,
        &[k('P')],
        Action::Resolve,
        // Help only: the bar is full at 200 columns.
        "",
        "resolve by policy provable what the filter shows (asks first)",
    ),
    bind(
        Queue,
        &[k('m')],
        Action::Note,
        "note",
        "leave a note on the selected operation (any state; kept in its history)",
    ),
    bind(
        Queue,
        &[k('e')],
        Action::Escalate,
        "escalate",
        "escalate an unknown operation recon cannot decide, with a reason (it stays unknown)",
    ),
    bind(
        Queue,
        &[k('E')],
        Action::Deescalate,
        "",
        "lower the escalation marker, with a reason",
    ),
    bind(
        Queue,
        &[k('p')],
        Action::ShowOperation,
        "all of it",
        "the whole operation: payload and history, unabridged and scrollable",
    ),
    bind(
        Queue,
        &[k('x')],
        Action::Request(Request::Close),
        "close",
        "closing snapshot: a receiver mutation that bars late writes (asks first)",
    ),
    bind(
        Queue,
        &[k('c')],
        Action::Request(Request::Decide(Decision::Confirmed)),
        "confirmed",
        "record confirmed against the version shown (asks first)",
    ),
    bind(
        Queue,
        &[k('n')],
        Action::Request(Request::Decide(Decision::NotApplied)),
        "not_applied",
        "record not_applied against the version shown (asks first)",
    ),
    bind(
        Queue,
        &[k('a')],
        Action::Request(Request::Compensate),
        "approve",
        "approve a compensation for the confirmed effect or a surplus one (form, then asks)",
    ),
    bind(
        Queue,
        &[k('d')],
        Action::Request(Request::Dispatch),
        "dispatch",
        "dispatch a prepared operation (asks first)",
    ),
    bind(
        Queue,
        &[k('o')],
        Action::Request(Request::Keep),
        "keep one",
        "keep one effect of a closed exact duplicate, picked with the cursor (asks first)",
    ),
    bind(
        Queue,
        &[k('J')],
        Action::ScrollDown,
        "",
        "scroll the snapshot panel down",
    ),
    bind(
        Queue,
        &[k('K')],
        Action::ScrollUp,
        "",
        "scroll the snapshot panel up",
    ),
    bind(
        Queue,
        &[code(KeyCode::Esc)],
        Action::Cancel,
        "",
        "back out: cancel a bulk act, else the search, the filters, the marks (asks)",
    ),
    bind(Queue, &[k('?')], Action::Help, "help", "this help"),
    bind(Queue, &[k('q')], Action::Quit, "quit", "quit"),
    bind(
        Confirm,
        &[k('y')],
        Action::Confirm,
        "yes",
        "do exactly what the dialog says",
    ),
    bind(
        Confirm,
        &[code(KeyCode::Enter)],
        Action::Submit,
        "",
        "does not confirm: every act asked for here is for good, and only y does it",
    ),
    bind(
        Confirm,
        &[k('n'), code(KeyCode::Esc)],
        Action::Cancel,
        "no",
        "cancel; nothing is written",
    ),
    bind(
        Pick,
        &[code(KeyCode::Down), k('j')],
        Action::Down,
        "move",
        "next match",
    ),
    bind(
        Pick,
        &[code(KeyCode::Up), k('k')],
        Action::Up,
        "",
        "previous match",
    ),
    bind(
        Pick,
        &[code(KeyCode::Enter)],
        Action::Submit,
        "keep this one",
        "keep the match under the cursor (a confirmation says what is recorded)",
    ),
    bind(
        Pick,
        &[code(KeyCode::Esc)],
        Action::Cancel,
        "cancel",
        "cancel; nothing is written",
    ),
    bind(
        Input,
        &[code(KeyCode::Enter)],
        Action::Submit,
        "submit",
        "submit",
    ),
    bind(
        Input,
        &[code(KeyCode::Esc)],
        Action::Cancel,
        "cancel",
        "cancel",
    ),
    bind(
        Input,
        &[code(KeyCode::Tab), code(KeyCode::Down)],
        Action::NextField,
        "next field",
        "next form field",
    ),
    bind(
        Input,
        &[code(KeyCode::BackTab), code(KeyCode::Up)],
        Action::PrevField,
        "",
        "previous form field",
    ),
    bind(
        Input,
        &[code(KeyCode::Left)],
        Action::Edit(Edit::Left),
        "",
        "move the cursor left",
    ),
    bind(
        Input,
        &[code(KeyCode::Right)],
        Action::Edit(Edit::Right),
        "",
        "move the cursor right",
    ),
    bind(
        Input,
        &[code(KeyCode::Home), ctrl('a')],
        Action::Edit(Edit::Home),
        "",
        "move the cursor to the start",
    ),
    bind(
        Input,
        &[code(KeyCode::End), ctrl('e')],
        Action::Edit(Edit::End),
        "",
        "move the cursor to the end",
    ),
    bind(
        Input,
        &[code(KeyCode::Backspace)],
        Action::Edit(Edit::Backspace),
        "",
        "delete the character before the cursor",
    ),
    bind(
        Input,
        &[code(KeyCode::Delete)],
        Action::Edit(Edit::Delete),
        "",
        "delete the character at the cursor",
    ),
    bind(
        Overlay,
        &[code(KeyCode::Down), k('j')],
        Action::ScrollDown,
        "scroll",
        "scroll down",
    ),
    bind(
        Overlay,
        &[code(KeyCode::Up), k('k')],
        Action::ScrollUp,
        "",
        "scroll up",
    ),
    bind(
        Overlay,
        &[code(KeyCode::PageDown), ctrl('d'), code(KeyCode::Char(' '))],
        Action::PageDown,
        "page",
        "next page",
    ),
    bind(
        Overlay,
        &[code(KeyCode::PageUp), ctrl('u')],
        Action::PageUp,
        "",
        "previous page",
    ),
    bind(
        Overlay,
        &[code(KeyCode::Home), k('g')],
        Action::First,
        "",
        "the top",
    ),
    bind(
        Overlay,
        &[code(KeyCode::End), k('G')],
        Action::Last,
        "",
        "the end",
    ),
    bind(
        Overlay,
        &[code(KeyCode::Esc), code(KeyCode::Enter), k('q'), k('?')],
        Action::Cancel,
        "close",
        "close",
    ),
    bind(
        Global,
        &[ctrl('c')],
        Action::Quit,
        "",
        "quit at once (nothing pending is written)",
    ),
];

/// The bindings of one context, in table order.
pub fn bindings(context: Context) -> impl Iterator<Item = &'static Binding> {
    BINDINGS.iter().filter(move |b| b.context == context)
}

/// The keys bound to a request in the queue, as the help names them.
pub fn key_for(request: Request) -> String {
    key_for_action(Action::Request(request))
}

/// The keys bound to an action in the queue, as the help names them.
pub fn key_for_action(action: Action) -> String {
    bindings(Context::Queue)
        .find(|b| b.action == action)
        .map(|b| b.key_names())
        .unwrap_or_default()
}
