//! The console's palettes against the background each is for, by the WCAG
//! 2.2 formula computed here (`super::contrast`, this test's own, not the
//! crate's), and how the background is chosen: `--theme`, `RECON_THEME`,
//! the terminal's OSC 11 answer, `COLORFGBG`, else unknown.

use super::{console, contrast, demo_lab, press};
use ratatui::style::{Color, Modifier};
use recon::console::probe::{answered, read_reply, Reply, MAX_REPLY};
use recon::console::theme::{self, Background, Choice, Depth, Theme, AA, AAA};

/// The screens every contrast test reads: the queue, each panel, the help,
/// a form, a confirmation, a search, each state's filter.
const SCREENS: [&str; 10] = ["", "jjjj", "jjjjj", "?", "3a", "jjx", "/zz", "2", "5", "4"];

/// Every style of `theme`, on the terminal's background and patched on the
/// cursor row, and every cell of the console's screens drawn with it,
/// reaches `goal` on the background(s) named (`light`: black text on white;
/// else white on black).
#[track_caller]
fn every_pair_reaches(theme: Theme, goal: f64, backgrounds: &[bool]) {
    let styles = theme.styles();
    assert!(styles.len() >= 20, "{styles:?}");
    for (name, style) in &styles {
        let on_cursor = theme.selected().patch(theme.on_cursor(*style));
        for (place, s) in [("", *style), (" on the cursor row", on_cursor)] {
            for &light in backgrounds {
                let reversed = s.add_modifier.contains(Modifier::REVERSED);
                let (fg, bg) = (s.fg.unwrap_or(Color::Reset), s.bg.unwrap_or(Color::Reset));
                let ratio = contrast(fg, bg, reversed, light);
                assert!(ratio >= goal, "{name}{place} (light {light}): {ratio:.2}");
            }
        }
    }
    let lab = demo_lab();
    for keys in SCREENS {
        let mut app = console(&lab, if keys == "jjx" { None } else { Some("ada") });
        app.theme = theme;
        press(&mut app, keys);
        let buffer = recon::console::render(&app);
        for (i, cell) in buffer.content().iter().enumerate() {
            if cell.symbol().trim().is_empty() {
                continue;
            }
            for &light in backgrounds {
                let reversed = cell.modifier.contains(Modifier::REVERSED);
                let ratio = contrast(cell.fg, cell.bg, reversed, light);
                assert!(
                    ratio >= goal,
                    "{keys:?}: {:?} at {i} ({:?} on {:?}) is {ratio:.2} (light {light})",
                    cell.symbol(),
                    cell.fg,
                    cell.bg
                );
            }
        }
    }
}

#[test]
fn the_wcag_formula_gives_its_known_ratios_here_and_in_the_crate() {
    let (white, black, grey) = ((255, 255, 255), (0, 0, 0), (0x76, 0x76, 0x76));
    // #767676 on white is WCAG's own example of the lightest grey at 4.5:1.
    for (a, b, ratio) in [
        (white, black, 21.0),
        (grey, white, 4.54),
        (white, white, 1.0),
    ] {
        let ours = contrast(
            Color::Rgb(a.0, a.1, a.2),
            Color::Rgb(b.0, b.1, b.2),
            false,
            true,
        );
        assert!((ours - ratio).abs() < 0.005, "{a:?} on {b:?}: {ours}");
        let crate_ratio = theme::contrast(a, b);
        assert!(
            (crate_ratio - ratio).abs() < 0.005,
            "{a:?} on {b:?}: {crate_ratio}"
        );
    }
}

#[test]
fn the_light_palette_reads_at_7_to_1_on_white() {
    for (name, colour) in theme::LIGHT.colours() {
        let ratio = contrast(colour, Color::Reset, false, true);
        assert!(ratio >= AAA, "{name} {colour:?} on white: {ratio:.2}");
    }
    every_pair_reaches(Theme::on(Background::Light), AAA, &[true]);
}

#[test]
fn the_dark_palette_reads_at_7_to_1_on_black() {
    for (name, colour) in theme::DARK.colours() {
        let ratio = contrast(colour, Color::Reset, false, false);
        assert!(ratio >= AAA, "{name} {colour:?} on black: {ratio:.2}");
    }
    every_pair_reaches(Theme::on(Background::Dark), AAA, &[false]);
}

/// Where the background is unknown, today's palette: every pair at 4.5:1
/// on white and on black both.
#[test]
fn the_unknown_background_palette_reads_at_4_5_to_1_on_white_and_black() {
    assert_eq!(Theme::on(Background::Unknown), Theme::new(false));
    every_pair_reaches(Theme::new(false), AA, &[true, false]);
}

/// The title bar, the reviewer's badge and the cursor row are drawn in
/// the 256-colour cube's black, which no terminal (nor tmux) turns into a
/// bright grey when bold as it may ANSI black, on a background of the
/// cube; never an ANSI colour.
#[test]
fn the_title_badge_and_cursor_row_use_no_ansi_colour() {
    let ansi = |c: Option<Color>| !matches!(c, None | Some(Color::Indexed(16..)));
    for theme in [Background::Light, Background::Dark, Background::Unknown].map(Theme::on) {
        for style in [
            theme.title(),
            theme.demo_badge(),
            theme.selected(),
            theme.cursor(),
        ] {
            assert!(!ansi(style.fg) && !ansi(style.bg), "{style:?}");
        }
    }
}

/// An eight-colour terminal gets no colour at all, whatever its
/// background: every cell in the terminal's own colours (21:1 on its own
/// theme, whatever that is), told apart by modifiers.
#[test]
fn an_eight_colour_terminal_draws_every_cell_in_its_own_colours() {
    for named in [None, Some(Background::Light), Some(Background::Dark)] {
        let choice = Choice {
            depth: Depth::of("xterm", ""),
            named,
            colorfgbg: Some(Background::Light),
        };
        assert_eq!(choice.depth, Depth::Eight);
        assert!(!choice.asks_terminal());
        assert_eq!(choice.resolve(Some((255, 255, 255))), Theme::new(true));
    }
    let lab = demo_lab();
    for keys in SCREENS {
        let mut app = console(&lab, if keys == "jjx" { None } else { Some("ada") });
        app.theme = Choice {
            depth: Depth::Eight,
            named: None,
            colorfgbg: None,
        }
        .resolve(None);
        press(&mut app, keys);
        let buffer = recon::console::render(&app);
        for cell in buffer.content() {
            assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "{keys:?}");
        }
    }
}

#[test]
fn term_and_colorterm_say_how_many_colours_there_are() {
    for (term, colorterm, depth) in [
        ("xterm", "", Depth::Eight),
        ("screen", "", Depth::Eight),
        ("linux", "", Depth::Eight),
        ("xterm", "truecolor", Depth::Full),
        ("xterm-256color", "", Depth::Full),
        ("tmux-256color", "", Depth::Full),
        ("xterm-kitty", "", Depth::Full),
        ("vt100", "truecolor", Depth::Mono),
        ("xterm-mono", "", Depth::Mono),
    ] {
        assert_eq!(Depth::of(term, colorterm), depth, "{term} {colorterm}");
    }
}

/// `--theme` (or `RECON_THEME`, which the command line folds into the same
/// `named`) wins over the terminal's answer, which wins over `COLORFGBG`;
/// with none of them the background is unknown.
#[test]
fn the_background_is_named_then_answered_then_read_from_colorfgbg() {
    let (white, black) = (Some((255, 255, 255)), Some((0, 0, 0)));
    let choice = |named, colorfgbg| Choice {
        depth: Depth::Full,
        named,
        colorfgbg,
    };
    let (light, dark) = (Some(Background::Light), Some(Background::Dark));
    for (choice, answer, background) in [
        (choice(dark, light), white, Background::Dark),
        (choice(light, dark), black, Background::Light),
        (choice(None, light), black, Background::Dark),
        (choice(None, dark), white, Background::Light),
        (choice(None, dark), None, Background::Dark),
        (choice(None, None), None, Background::Unknown),
    ] {
        assert_eq!(choice.asks_terminal(), choice.named.is_none());
        assert_eq!(choice.resolve(answer), Theme::on(background), "{choice:?}");
    }
}

/// A measured background gets the palette that reads best on it (whose
/// least contrasting colour contrasts most): 7:1 or more on white, black
/// and near them; on any colour, never a palette that reads worse than
/// another would.
#[test]
fn a_measured_background_gets_the_palette_that_reads_best_on_it() {
    let least = |palette: &theme::Palette, (r, g, b): (u8, u8, u8)| {
        palette
            .colours()
            .iter()
            .map(|(_, colour)| contrast(*colour, Color::Rgb(r, g, b), false, true))
            .fold(f64::INFINITY, f64::min)
    };
    for (rgb, background) in [
        ((255, 255, 255), Background::Light),
        ((253, 246, 227), Background::Light),
        ((0, 0, 0), Background::Dark),
        ((18, 18, 18), Background::Dark),
    ] {
        assert_eq!(Background::of(rgb), background, "{rgb:?}");
        let ratio = least(background.palette(), rgb);
        assert!(ratio >= AAA, "{background:?} on {rgb:?}: {ratio:.2}");
    }
    for v in (0..=255).step_by(5) {
        for rgb in [(v, v, v), (v, 0, 0), (0, v, 0), (0, 0, v), (v, v, 255 - v)] {
            let picked = least(Background::of(rgb).palette(), rgb);
            for other in [&theme::LIGHT, &theme::DARK, &theme::UNKNOWN] {
                assert!(picked >= least(other, rgb), "{rgb:?}: {picked:.2}");
            }
        }
    }
}

#[test]
fn colorfgbg_names_the_background_by_its_last_field() {
    for (value, background) in [
        ("15;0", Some(Background::Dark)),
        ("7;8", Some(Background::Dark)),
        ("0;15", Some(Background::Light)),
        ("0;7", Some(Background::Light)),
        ("0;default;15", Some(Background::Light)),
        ("default;default", None),
        ("0;12", None),
        ("", None),
    ] {
        assert_eq!(Background::from_colorfgbg(value), background, "{value:?}");
    }
}

/// tmux's answer to DA1, the question asked after OSC 11 whose answer
/// ends the reading.
const DA1: &[u8] = b"\x1b[?1;2c";

/// `answer` then DA1's answer.
fn then_da1(answer: &[u8]) -> Vec<u8> {
    [answer, DA1].concat()
}

/// Reads on through every byte of `bytes` but the last, and is done with
/// `colour` at the last.
#[track_caller]
fn read_to_the_end(bytes: &[u8], colour: Option<(u8, u8, u8)>) {
    assert!(bytes.len() <= MAX_REPLY, "{bytes:?}");
    for end in 1..bytes.len() {
        let so_far = &bytes[..end];
        assert_eq!(read_reply(so_far), Reply::More, "{so_far:?}");
    }
    assert_eq!(read_reply(bytes), Reply::Done(colour), "{bytes:?}");
}

/// The colour is taken from a well-formed OSC 11 answer, and the reading
/// ends only with the DA1 answer after it (a key is never read past).
#[test]
fn an_osc_11_answer_then_the_da1_answer_gives_the_colour() {
    for (answer, colour) in [
        (&b"\x1b]11;rgb:ffff/ffff/ffff\x07"[..], (255, 255, 255)),
        (b"\x1b]11;rgb:0000/0000/0000\x1b\\", (0, 0, 0)),
        (b"\x1b]11;rgb:fd/f6/e3\x07", (253, 246, 227)),
        (b"\x1b]11;rgb:8/8/8\x07", (136, 136, 136)),
    ] {
        read_to_the_end(&then_da1(answer), Some(colour));
        // Alone (the DA1 answer late), the answer is kept at the timeout.
        assert_eq!(answered(answer), Some(colour), "{answer:?}");
        assert_eq!(read_reply(answer), Reply::More, "{answer:?}");
    }
    // xterm's long DA1 answer fits beside the longest OSC 11 answer.
    let xterm = b"\x1b]11;rgb:ffff/ffff/ffff\x1b\\\x1b[?64;1;2;6;9;15;16;17;18;21;22;28c";
    read_to_the_end(xterm, Some((255, 255, 255)));
}

/// A terminal that answers DA1 and not OSC 11 (tmux with no pane
/// background) ends the reading at once, with no colour.
#[test]
fn the_da1_answer_alone_ends_the_reading_with_no_colour() {
    for da1 in [DA1, b"\x1b[?62;c", b"\x1b[?65;1;9c", b"\x1b[?c"] {
        read_to_the_end(da1, None);
        assert_eq!(answered(da1), None);
    }
}

/// An OSC 11 answer that is not `rgb:R/G/B` is still read to its end and
/// gives no colour, so none of it is left to reach the keys.
#[test]
fn a_malformed_osc_11_answer_is_read_whole_and_gives_no_colour() {
    for answer in [
        &b"\x1b]11;rgb:ffff/ffff\x07"[..],
        b"\x1b]11;rgb:fffff/ffff/ffff\x07",
        b"\x1b]11;rgb:ffff/zz/ffff\x07",
        b"\x1b]11;rgb:+ff/ffff/ffff\x07",
        b"\x1b]11;rgba:0000/0000/0000/e5e5\x1b\\",
    ] {
        read_to_the_end(&then_da1(answer), None);
        assert_eq!(answered(answer), None, "{answer:?}");
    }
}

/// A byte that cannot continue the answers ends the reading at once (it
/// is dropped: a key typed before the first screen); an answer cut short
/// gives no colour, and one already complete keeps its colour.
#[test]
fn a_byte_that_cannot_be_an_answer_or_a_cut_answer_ends_the_reading() {
    let white = Some((255, 255, 255));
    for (bytes, colour) in [
        (&b"j"[..], None),
        (b"\x1b[A", None),
        (b"\x1b]10;", None),
        (b"\x1b]11;rgb:ffff/ffff/ffff\x1bx", None),
        (b"\x1b]11;rgb:ffff/\x0d", None),
        (b"\x1b[?1;2x", None),
        (b"\x1b]11;rgb:ffff/ffff/ffff\x07j", white),
        (b"\x1b]11;rgb:ffff/ffff/ffff\x07\x1b[?1;x", white),
    ] {
        assert_eq!(read_reply(bytes), Reply::Done(colour), "{bytes:?}");
    }
    // Cut short (the timeout or the bound reached): nothing taken but a
    // complete OSC 11 answer.
    for (cut, colour) in [
        (&b"\x1b]11;rgb:ffff/ff"[..], None),
        (b"\x1b]11;rgb:ffff/ffff/ffff\x1b", None),
        (b"\x1b[?1;2", None),
        (b"\x1b]11;rgb:ffff/ffff/ffff\x07\x1b[?1", white),
    ] {
        assert_eq!(read_reply(cut), Reply::More, "{cut:?}");
        assert_eq!(answered(cut), colour, "{cut:?}");
    }
}
