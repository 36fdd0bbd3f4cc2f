//! The console's styles in one place, with and without colour.
//!
//! The screen must read the same in a dark terminal and in a light one, so
//! text is drawn in the terminal's default foreground or in one of the
//! few colours of the 256-colour palette whose brightness sits just
//! between black and white ([`GREEN`], [`RED`], ...): each has a contrast
//! of at least 4.5:1 (WCAG 2.2) against both, and there are only five
//! hues and a grey that do, so headings share prepared's blue. The cursor
//! row is black on light cyan, and a span on it drops its own colour
//! ([`Theme::on_cursor`]): no colour reads at 4.5:1 on light cyan and on
//! white or black both. The sixteen ANSI colours are not used for text on the
//! terminal's own background: a terminal theme picks them, and grey,
//! yellow and cyan all but vanish on white. Nothing is said by faintness:
//! a label, a hint or an unavailable action is in the default foreground,
//! told apart by its words, by bold or by strike-through. The only fixed
//! backgrounds (the title bar, the cursor row, a text field) come with a
//! fixed foreground.
//!
//! `NO_COLOR` (read once at the binary edge and passed in) turns every
//! colour off and keeps only modifiers (bold, reverse, underline,
//! strike-through), so the screen still distinguishes the cursor, a
//! highlighted difference and an unavailable action. Nothing important is
//! conveyed by colour alone: differing payload lines also carry a `≠`
//! marker, the cursor a `>`, and the active filter brackets, which is also
//! what the text goldens see.

use ratatui::style::{Color, Modifier, Style};

/// `#00875f`: confirmed, available, identical.
pub const GREEN: Color = Color::Indexed(29);
/// `#af5f5f`: refused, failed, a difference.
pub const RED: Color = Color::Indexed(131);
/// `#d700af`: unknown, a warning, a mark.
pub const AMBER: Color = Color::Indexed(163);
/// `#5f5fff`: prepared.
pub const BLUE: Color = Color::Indexed(63);
/// `#875fd7`: not_applied.
pub const MAGENTA: Color = Color::Indexed(98);
/// `#5f5fff`: headings, keys, the focused panel, a field's cursor.
pub const ACCENT: Color = Color::Indexed(63);
/// `#767676`: the lines between panels.
pub const GREY: Color = Color::Indexed(243);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    pub fn new(no_color: bool) -> Self {
        Theme { color: !no_color }
    }

    fn pick(&self, colored: Style, plain: Style) -> Style {
        if self.color {
            colored
        } else {
            plain
        }
    }

    fn fg(&self, color: Color) -> Style {
        self.pick(Style::new().fg(color), Style::new())
    }

    pub fn title(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::Cyan).bold(),
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )
    }

    pub fn demo_badge(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::Yellow).bold(),
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )
    }

    pub fn tab(&self) -> Style {
        Style::new()
    }

    /// The terminal's own colours swapped: as clear on white as on black.
    pub fn tab_active(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
    }

    /// Lines between panels: a grey that still reads on white and black.
    pub fn border(&self) -> Style {
        self.fg(GREY)
    }

    pub fn border_focus(&self) -> Style {
        self.pick(Style::new().fg(ACCENT), Style::new().bold())
    }

    pub fn heading(&self) -> Style {
        self.fg(ACCENT).bold()
    }

    /// Words that name what follows (`payload:`, `complete`).
    pub fn label(&self) -> Style {
        Style::new()
    }

    /// A table's column heads.
    pub fn column_head(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    }

    pub fn selected(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::LightCyan),
            Style::new().add_modifier(Modifier::REVERSED),
        )
    }

    /// A span's style on the cursor row: its modifiers (bold, strike-
    /// through) on the row's own colours; its words say what its colour
    /// would.
    pub fn on_cursor(&self, style: Style) -> Style {
        let mut plain = Style::new();
        plain.add_modifier = style.add_modifier;
        plain.sub_modifier = style.sub_modifier;
        plain
    }

    pub fn marked(&self) -> Style {
        self.fg(AMBER).bold()
    }

    pub fn state(&self, state: crate::domain::OpState) -> Style {
        use crate::domain::OpState;
        self.fg(match state {
            OpState::Prepared => BLUE,
            OpState::Unknown => AMBER,
            OpState::Confirmed => GREEN,
            OpState::NotApplied => MAGENTA,
        })
    }

    /// A field that differs from the expected payload.
    pub fn differs(&self) -> Style {
        self.pick(
            Style::new().fg(RED).bold(),
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        )
    }

    pub fn good(&self) -> Style {
        self.fg(GREEN)
    }

    pub fn bad(&self) -> Style {
        self.fg(RED).bold()
    }

    pub fn warn(&self) -> Style {
        self.fg(AMBER).bold()
    }

    /// A hint or an aside ("p shows all", "nothing recorded yet"): in the
    /// default foreground like any text, since faint grey would hide it on
    /// one background or the other; said outright, because a hint on a
    /// panel's border would otherwise take the border's grey.
    pub fn note(&self) -> Style {
        Style::new().fg(Color::Reset)
    }

    pub fn key(&self) -> Style {
        self.fg(ACCENT).bold()
    }

    /// A key the evidence does not allow now: struck through, not bold.
    pub fn key_unavailable(&self) -> Style {
        Style::new().add_modifier(Modifier::CROSSED_OUT)
    }

    /// A text field: white on dark grey from the 256-colour ramp, which
    /// no terminal theme restyles.
    pub fn input(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Indexed(231)).bg(Color::Indexed(238)),
            Style::new().add_modifier(Modifier::UNDERLINED),
        )
    }

    /// The cell under a text field's cursor: a teal block, which stands
    /// out from the field and from either background (the field reversed
    /// would be a white block, lost on white).
    pub fn cursor(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Indexed(231)).bg(ACCENT),
            self.input().add_modifier(Modifier::REVERSED),
        )
    }

    pub fn popup(&self) -> Style {
        Style::new()
    }

    /// Every style this theme draws with, by name, for the contrast test.
    pub fn styles(&self) -> Vec<(String, Style)> {
        use crate::domain::OpState;
        let mut out: Vec<(String, Style)> = [
            ("title", self.title()),
            ("demo_badge", self.demo_badge()),
            ("tab", self.tab()),
            ("tab_active", self.tab_active()),
            ("border", self.border()),
            ("border_focus", self.border_focus()),
            ("heading", self.heading()),
            ("label", self.label()),
            ("column_head", self.column_head()),
            ("selected", self.selected()),
            ("marked", self.marked()),
            ("differs", self.differs()),
            ("good", self.good()),
            ("bad", self.bad()),
            ("warn", self.warn()),
            ("note", self.note()),
            ("key", self.key()),
            ("key_unavailable", self.key_unavailable()),
            ("input", self.input()),
            ("cursor", self.cursor()),
            ("popup", self.popup()),
        ]
        .into_iter()
        .map(|(name, style)| (name.to_string(), style))
        .collect();
        for state in [
            OpState::Prepared,
            OpState::Unknown,
            OpState::Confirmed,
            OpState::NotApplied,
        ] {
            out.push((format!("state {state}"), self.state(state)));
        }
        out
    }
}
