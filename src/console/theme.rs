//! The console's styles in one place, with and without colour.
//!
//! `NO_COLOR` (read once at the binary edge and passed in) turns every
//! colour off and keeps only modifiers (bold, reverse, dim, underline), so
//! the screen still distinguishes the cursor, a highlighted difference and
//! an unavailable action. Nothing important is conveyed by colour alone:
//! differing payload lines also carry a `≠` marker, the cursor a `>`, and
//! the active filter brackets, which is also what the text goldens see.

use ratatui::style::{Color, Modifier, Style};

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

    pub fn tab_active(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::White).bold(),
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )
    }

    pub fn border(&self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray), Style::new())
    }

    pub fn border_focus(&self) -> Style {
        self.pick(Style::new().fg(Color::Cyan), Style::new().bold())
    }

    pub fn heading(&self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).bold(), Style::new().bold())
    }

    pub fn label(&self) -> Style {
        self.pick(Style::new().fg(Color::Gray), Style::new())
    }

    pub fn selected(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::LightCyan),
            Style::new().add_modifier(Modifier::REVERSED),
        )
    }

    pub fn marked(&self) -> Style {
        self.pick(Style::new().fg(Color::Yellow).bold(), Style::new().bold())
    }

    pub fn state(&self, state: crate::domain::OpState) -> Style {
        use crate::domain::OpState;
        let color = match state {
            OpState::Prepared => Color::Blue,
            OpState::Unknown => Color::Yellow,
            OpState::Confirmed => Color::Green,
            OpState::NotApplied => Color::Magenta,
        };
        self.pick(Style::new().fg(color), Style::new())
    }

    /// A field that differs from the expected payload.
    pub fn differs(&self) -> Style {
        self.pick(
            Style::new().fg(Color::LightRed).bold(),
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        )
    }

    pub fn good(&self) -> Style {
        self.pick(Style::new().fg(Color::Green), Style::new())
    }

    pub fn bad(&self) -> Style {
        self.pick(Style::new().fg(Color::LightRed).bold(), Style::new().bold())
    }

    pub fn warn(&self) -> Style {
        self.pick(Style::new().fg(Color::Yellow).bold(), Style::new().bold())
    }

    pub fn dim(&self) -> Style {
        self.pick(
            Style::new().fg(Color::DarkGray),
            Style::new().add_modifier(Modifier::DIM),
        )
    }

    pub fn key(&self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).bold(), Style::new().bold())
    }

    pub fn key_unavailable(&self) -> Style {
        self.pick(
            Style::new()
                .fg(Color::DarkGray)
                .add_modifier(Modifier::CROSSED_OUT),
            Style::new().add_modifier(Modifier::DIM | Modifier::CROSSED_OUT),
        )
    }

    pub fn input(&self) -> Style {
        self.pick(
            Style::new().fg(Color::White).bg(Color::DarkGray),
            Style::new().add_modifier(Modifier::UNDERLINED),
        )
    }

    /// The cell under a text field's cursor.
    pub fn cursor(&self) -> Style {
        self.input().add_modifier(Modifier::REVERSED)
    }

    pub fn popup(&self) -> Style {
        Style::new()
    }
}
