//! The console's styles in one place: a palette per terminal background,
//! the contrast rule that picks one, and the styles drawn with it. No I/O:
//! what the terminal says about itself is read by [`super::probe`] and
//! passed in.
//!
//! Body text is in the terminal's own foreground everywhere. Accents (the
//! states, a difference, headings and keys) come from one of three
//! palettes of the 256-colour cube, whose RGB values are the same in every
//! terminal (the sixteen ANSI colours are not: a terminal theme picks
//! them, and grey, yellow and cyan all but vanish on white):
//!
//! - [`LIGHT`] and [`DARK`], for a background known to be light or dark:
//!   every accent reads at [`AAA`] (7:1, WCAG 2.2) or more against white
//!   and against black respectively. A background measured as RGB (an OSC 11
//!   answer) gets whichever of the two reads better on that very colour
//!   ([`Background::of`]: the one whose least contrasting colour contrasts
//!   more).
//! - [`UNKNOWN`], for a background the console could not learn: colours
//!   whose brightness sits between black and white, each at least
//!   [`AA`] (4.5:1) against both. No fixed colour does better on both: the
//!   two contrasts multiply to at most 21, so they cannot both pass about
//!   4.58.
//!
//! Which background it is, by precedence: `--theme`, then `RECON_THEME`,
//! then the terminal's answer to OSC 11, then `COLORFGBG`, else unknown
//! ([`Choice::resolve`]).
//!
//! The only fixed backgrounds (the title bar and the reviewer's badge, the
//! demo badge, the cursor row, a text field and its cursor) come with a
//! fixed foreground, all from the 256-colour cube and the same in every
//! palette, each pair at least 7:1. Black is the cube's own black (16),
//! never ANSI black: a terminal or tmux may draw bold ANSI black as bright
//! black (grey), which took the old black-on-cyan title to 2-3:1. A span on
//! the cursor row drops its own colour ([`Theme::on_cursor`]).
//!
//! A terminal of eight colours (`TERM=xterm`, `screen`, `linux`: [`Depth`])
//! cannot show the cube, and tmux there turns each colour into its nearest
//! ANSI one (green on white fell to 2.2:1), so it gets no colour at all:
//! the terminal's own foreground and background, told apart by modifiers,
//! as under `NO_COLOR`. `NO_COLOR` (read once at the binary edge and passed
//! in) and a `TERM` without colours keep only modifiers (bold, reverse,
//! underline, strike-through), so the screen still distinguishes the
//! cursor, a highlighted difference and an unavailable action. Nothing is
//! said by faintness, and nothing important by colour alone: differing
//! payload lines also carry a `≠` marker, the cursor a `>`, and the active
//! filter brackets, which is also what the text goldens see.

use ratatui::style::{Color, Modifier, Style};

/// WCAG 2.2's enhanced contrast (AAA) for text: what [`LIGHT`] and
/// [`DARK`] reach against their background.
pub const AAA: f64 = 7.0;
/// WCAG 2.2's minimum contrast (AA) for text: what [`UNKNOWN`] reaches
/// against white and black both.
pub const AA: f64 = 4.5;

/// An sRGB colour.
pub type Rgb = (u8, u8, u8);

/// The colours accents are drawn in, one palette per background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    /// Confirmed, available, identical.
    pub green: Color,
    /// Refused, failed, a difference.
    pub red: Color,
    /// Unknown, a warning, a mark.
    pub amber: Color,
    /// Prepared.
    pub blue: Color,
    /// not_applied.
    pub magenta: Color,
    /// Headings, keys, the focused panel.
    pub accent: Color,
    /// The lines between panels.
    pub grey: Color,
}

/// The palette for a background the console does not know: today's
/// mid-brightness colours, each at least 4.5:1 on white and on black.
pub const UNKNOWN: Palette = Palette {
    green: GREEN,
    red: RED,
    amber: AMBER,
    blue: BLUE,
    magenta: MAGENTA,
    accent: ACCENT,
    grey: GREY,
};

/// The palette for a light background: dark colours, each at least 7:1 on
/// white.
pub const LIGHT: Palette = Palette {
    // #005f00
    green: Color::Indexed(22),
    // #870000
    red: Color::Indexed(88),
    // #870087
    amber: Color::Indexed(90),
    // #0000d7
    blue: Color::Indexed(20),
    // #5f00af
    magenta: Color::Indexed(55),
    // #0000d7
    accent: Color::Indexed(20),
    // #4e4e4e
    grey: Color::Indexed(239),
};

/// The palette for a dark background: light colours, each at least 7:1 on
/// black.
pub const DARK: Palette = Palette {
    // #5fd75f
    green: Color::Indexed(77),
    // #ff8787
    red: Color::Indexed(210),
    // #ff87ff
    amber: Color::Indexed(213),
    // #87afff
    blue: Color::Indexed(111),
    // #d787ff
    magenta: Color::Indexed(177),
    // #87afff
    accent: Color::Indexed(111),
    // #a8a8a8
    grey: Color::Indexed(248),
};

/// `#00875f`: confirmed, available, identical (background unknown).
pub const GREEN: Color = Color::Indexed(29);
/// `#af5f5f`: refused, failed, a difference (background unknown).
pub const RED: Color = Color::Indexed(131);
/// `#d700af`: unknown, a warning, a mark (background unknown).
pub const AMBER: Color = Color::Indexed(163);
/// `#5f5fff`: prepared (background unknown).
pub const BLUE: Color = Color::Indexed(63);
/// `#875fd7`: not_applied (background unknown).
pub const MAGENTA: Color = Color::Indexed(98);
/// `#5f5fff`: headings, keys, the focused panel (background unknown).
pub const ACCENT: Color = Color::Indexed(63);
/// `#767676`: the lines between panels (background unknown).
pub const GREY: Color = Color::Indexed(243);

/// The cube's black (`#000000`), which no terminal brightens when bold.
pub const INK: Color = Color::Indexed(16);
/// The cube's white (`#ffffff`).
pub const PAPER: Color = Color::Indexed(231);
/// `#87d7ff`: the title bar and the reviewer's badge (black on it, 13:1).
pub const TITLE_BG: Color = Color::Indexed(117);
/// `#ffd700`: the demo badge (black on it, 15:1).
pub const BADGE_BG: Color = Color::Indexed(220);
/// `#afd7ff`: the cursor row (black on it, 14:1).
pub const CURSOR_ROW_BG: Color = Color::Indexed(153);
/// `#444444`: a text field (white on it, 9.7:1).
pub const FIELD_BG: Color = Color::Indexed(238);
/// `#0000d7`: the cell under a text field's cursor (white on it, 10.6:1).
pub const FIELD_CURSOR_BG: Color = Color::Indexed(20);

/// What the console knows of the terminal's background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Background {
    Light,
    Dark,
    Unknown,
}

impl Background {
    /// The background a measured colour is, for the palette to draw on it:
    /// light or dark, whichever palette's least contrasting colour
    /// contrasts more with it. On white that is [`LIGHT`] and on black
    /// [`DARK`], each at [`AAA`] or more; on an off-white or a dark grey the
    /// same palettes still read best, if a little under 7:1 on a light grey
    /// (xterm's ANSI white, `#e5e5e5`: 6.3).
    pub fn of(rgb: Rgb) -> Background {
        if LIGHT.least(rgb) >= DARK.least(rgb) {
            Background::Light
        } else {
            Background::Dark
        }
    }

    /// The background `COLORFGBG` (`FG;BG`, or `FG;X;BG`) names: its last
    /// field, an ANSI colour index, dark for 0-6 and 8, light for 7 and
    /// 15; `None` for anything else (`default`, 9-14, junk).
    pub fn from_colorfgbg(value: &str) -> Option<Background> {
        let last = value.rsplit(';').next()?;
        match last.trim().parse::<u8>().ok()? {
            0..=6 | 8 => Some(Background::Dark),
            7 | 15 => Some(Background::Light),
            _ => None,
        }
    }

    /// The palette for this background.
    pub fn palette(self) -> &'static Palette {
        match self {
            Background::Light => &LIGHT,
            Background::Dark => &DARK,
            Background::Unknown => &UNKNOWN,
        }
    }
}

/// How many colours the terminal shows, as its `TERM` (and `COLORTERM`)
/// say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// None: `NO_COLOR`, or a `TERM` without colours (vt100, xterm-mono).
    Mono,
    /// The eight ANSI colours (sixteen with their bright forms): `TERM`
    /// `xterm`, `screen`, `tmux`, `linux`, ... without `256color`.
    Eight,
    /// The 256-colour cube or more.
    Full,
}

impl Depth {
    /// The depth `TERM` and `COLORTERM` name. A `TERM` of the known
    /// terminfo entries with eight or sixteen colours is [`Depth::Eight`]
    /// unless `COLORTERM` says truecolor; any other name (`*-256color`,
    /// `xterm-kitty`, `alacritty`, ...) is taken to show the cube.
    pub fn of(term: &str, colorterm: &str) -> Depth {
        let mono = matches!(
            term,
            "vt52" | "vt100" | "vt102" | "vt220" | "vt320" | "dumb"
        ) || term.ends_with("-mono");
        let eight = matches!(
            term,
            "xterm"
                | "xterm-color"
                | "xterm-16color"
                | "screen"
                | "screen-16color"
                | "tmux"
                | "tmux-16color"
                | "linux"
                | "rxvt"
                | "ansi"
                | "cygwin"
        );
        if mono {
            Depth::Mono
        } else if eight && !matches!(colorterm, "truecolor" | "24bit") {
            Depth::Eight
        } else {
            Depth::Full
        }
    }
}

/// What decides the console's colours, gathered at the binary edge before
/// the terminal is asked: the depth, a background named by `--theme` or
/// `RECON_THEME` (which wins over anything the terminal says), and the one
/// `COLORFGBG` names (which the terminal's OSC 11 answer wins over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub depth: Depth,
    /// `--theme`, else `RECON_THEME`.
    pub named: Option<Background>,
    /// `COLORFGBG`'s background.
    pub colorfgbg: Option<Background>,
}

impl Choice {
    /// Colours on the unknown background, or none under `NO_COLOR`: what
    /// `recon screenshot` draws with, and the console before it asks.
    pub fn plain(no_color: bool) -> Choice {
        Choice {
            depth: if no_color { Depth::Mono } else { Depth::Full },
            named: None,
            colorfgbg: None,
        }
    }

    /// Whether the terminal's own answer could change the theme: only
    /// when it shows the cube and no flag or variable named the
    /// background.
    pub fn asks_terminal(&self) -> bool {
        self.depth == Depth::Full && self.named.is_none()
    }

    /// The theme, given the background colour the terminal answered with
    /// (OSC 11), if any: `--theme` > `RECON_THEME` > OSC 11 > `COLORFGBG` >
    /// unknown.
    pub fn resolve(&self, answered: Option<Rgb>) -> Theme {
        let background = self
            .named
            .or(answered.map(Background::of))
            .or(self.colorfgbg)
            .unwrap_or(Background::Unknown);
        match self.depth {
            Depth::Full => Theme::on(background),
            Depth::Mono | Depth::Eight => Theme::new(true),
        }
    }
}

/// The RGB a colour shows as in xterm's default palette; `None` for the
/// terminal's own colour (`Reset`). The cube and the grey ramp (16-255)
/// are the same in every terminal that shows them.
pub fn rgb_of(color: Color) -> Option<Rgb> {
    const ANSI: [Rgb; 16] = [
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

/// WCAG 2.2's relative luminance of an sRGB colour.
pub fn luminance((r, g, b): Rgb) -> f64 {
    let linear = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
}

/// WCAG 2.2's contrast ratio of two colours, 1 to 21.
pub fn contrast(a: Rgb, b: Rgb) -> f64 {
    let (a, b) = (luminance(a), luminance(b));
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

impl Palette {
    /// Every colour of the palette, by name.
    pub fn colours(&self) -> [(&'static str, Color); 7] {
        [
            ("green", self.green),
            ("red", self.red),
            ("amber", self.amber),
            ("blue", self.blue),
            ("magenta", self.magenta),
            ("accent", self.accent),
            ("grey", self.grey),
        ]
    }

    /// The contrast of its least contrasting colour with `background`.
    pub fn least(&self, background: Rgb) -> f64 {
        self.colours()
            .iter()
            .filter_map(|(_, c)| rgb_of(*c))
            .map(|rgb| contrast(rgb, background))
            .fold(f64::INFINITY, f64::min)
    }
}

/// The styles the console draws with: a palette, or none (modifiers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    palette: Option<&'static Palette>,
}

impl Theme {
    /// The unknown background's palette, or no colour at all.
    pub fn new(no_color: bool) -> Self {
        Theme {
            palette: (!no_color).then_some(&UNKNOWN),
        }
    }

    /// The palette for `background`.
    pub fn on(background: Background) -> Self {
        Theme {
            palette: Some(background.palette()),
        }
    }

    /// The palette drawn with; `None` when colours are off.
    pub fn palette(&self) -> Option<&'static Palette> {
        self.palette
    }

    fn pick(&self, colored: Style, plain: Style) -> Style {
        if self.palette.is_some() {
            colored
        } else {
            plain
        }
    }

    fn fg(&self, color: impl Fn(&Palette) -> Color) -> Style {
        match self.palette {
            Some(palette) => Style::new().fg(color(palette)),
            None => Style::new(),
        }
    }

    /// The title bar and the reviewer's badge: bold black on light blue.
    pub fn title(&self) -> Style {
        self.pick(
            Style::new().fg(INK).bg(TITLE_BG).bold(),
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )
    }

    pub fn demo_badge(&self) -> Style {
        self.pick(
            Style::new().fg(INK).bg(BADGE_BG).bold(),
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

    /// Lines between panels.
    pub fn border(&self) -> Style {
        self.fg(|p| p.grey)
    }

    pub fn border_focus(&self) -> Style {
        self.pick(self.fg(|p| p.accent), Style::new().bold())
    }

    pub fn heading(&self) -> Style {
        self.fg(|p| p.accent).bold()
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
            Style::new().fg(INK).bg(CURSOR_ROW_BG),
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
        self.fg(|p| p.amber).bold()
    }

    pub fn state(&self, state: crate::domain::OpState) -> Style {
        use crate::domain::OpState;
        self.fg(|p| match state {
            OpState::Prepared => p.blue,
            OpState::Unknown => p.amber,
            OpState::Confirmed => p.green,
            OpState::NotApplied => p.magenta,
        })
    }

    /// A field that differs from the expected payload.
    pub fn differs(&self) -> Style {
        self.pick(
            self.fg(|p| p.red).bold(),
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        )
    }

    pub fn good(&self) -> Style {
        self.fg(|p| p.green)
    }

    pub fn bad(&self) -> Style {
        self.fg(|p| p.red).bold()
    }

    pub fn warn(&self) -> Style {
        self.fg(|p| p.amber).bold()
    }

    /// A hint or an aside ("p shows all", "nothing recorded yet"): in the
    /// default foreground like any text, since faint grey would hide it on
    /// one background or the other; said outright, because a hint on a
    /// panel's border would otherwise take the border's grey.
    pub fn note(&self) -> Style {
        Style::new().fg(Color::Reset)
    }

    pub fn key(&self) -> Style {
        self.fg(|p| p.accent).bold()
    }

    /// A key the evidence does not allow now: struck through, not bold.
    pub fn key_unavailable(&self) -> Style {
        Style::new().add_modifier(Modifier::CROSSED_OUT)
    }

    /// A text field: white on dark grey from the 256-colour ramp, which
    /// no terminal theme restyles.
    pub fn input(&self) -> Style {
        self.pick(
            Style::new().fg(PAPER).bg(FIELD_BG),
            Style::new().add_modifier(Modifier::UNDERLINED),
        )
    }

    /// The cell under a text field's cursor: a blue block, which stands
    /// out from the field and from either background (the field reversed
    /// would be a white block, lost on white).
    pub fn cursor(&self) -> Style {
        self.pick(
            Style::new().fg(PAPER).bg(FIELD_CURSOR_BG),
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
