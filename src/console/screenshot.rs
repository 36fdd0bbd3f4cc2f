//! A rendered buffer as text (the golden files) or as SVG (colours kept),
//! for `recon screenshot` and the tests.
//!
//! Text keeps one line per terminal row, with trailing spaces trimmed and
//! the cells hidden behind a wide character skipped, so a golden file reads
//! like the screen. SVG draws each run of equally styled cells at its exact
//! column (with `textLength`), so alignment does not depend on the viewer's
//! monospace font.

use ratatui::buffer::{Buffer, Cell};
use ratatui::style::{Color, Modifier};
use std::fmt::Write;
use unicode_width::UnicodeWidthStr;

/// The visible cells of one row, skipping those a wide symbol covers.
fn visible_cells(buffer: &Buffer, y: u16) -> Vec<(u16, &Cell, usize)> {
    let mut out = Vec::new();
    let mut skip = 0usize;
    for x in 0..buffer.area.width {
        let Some(cell) = buffer.cell((buffer.area.x + x, buffer.area.y + y)) else {
            continue;
        };
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let width = cell.symbol().width().max(1);
        skip = width - 1;
        out.push((x, cell, width));
    }
    out
}

/// The buffer as text: one line per row, trailing spaces trimmed.
pub fn to_text(buffer: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let line: String = visible_cells(buffer, y)
            .into_iter()
            .map(|(_, cell, _)| cell.symbol())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

const CELL_WIDTH: f32 = 8.4;
const CELL_HEIGHT: f32 = 18.0;
const FONT_SIZE: f32 = 14.0;
const DEFAULT_FG: &str = "#d4d4d4";
const DEFAULT_BG: &str = "#1e1e1e";

/// The 16 ANSI colours as a dark terminal theme shows them.
const ANSI: [&str; 16] = [
    "#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
];

fn hex(color: Color) -> Option<String> {
    let ansi = |i: usize| Some(ANSI[i].to_string());
    match color {
        Color::Reset => None,
        Color::Black => ansi(0),
        Color::Red => ansi(1),
        Color::Green => ansi(2),
        Color::Yellow => ansi(3),
        Color::Blue => ansi(4),
        Color::Magenta => ansi(5),
        Color::Cyan => ansi(6),
        Color::Gray => ansi(7),
        Color::DarkGray => ansi(8),
        Color::LightRed => ansi(9),
        Color::LightGreen => ansi(10),
        Color::LightYellow => ansi(11),
        Color::LightBlue => ansi(12),
        Color::LightMagenta => ansi(13),
        Color::LightCyan => ansi(14),
        Color::White => ansi(15),
        Color::Rgb(r, g, b) => Some(format!("#{r:02x}{g:02x}{b:02x}")),
        Color::Indexed(i) => Some(indexed(i)),
    }
}

/// The xterm 256-colour palette.
fn indexed(i: u8) -> String {
    match i {
        0..=15 => ANSI[usize::from(i)].to_string(),
        16..=231 => {
            let n = i - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            format!(
                "#{:02x}{:02x}{:02x}",
                level(n / 36),
                level((n / 6) % 6),
                level(n % 6)
            )
        }
        _ => {
            let v = 8 + (i - 232) * 10;
            format!("#{v:02x}{v:02x}{v:02x}")
        }
    }
}

fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The style of a cell as SVG sees it: colours after `REVERSED`, and the
/// modifiers that change the text.
#[derive(PartialEq, Eq, Clone)]
struct Look {
    fg: String,
    bg: Option<String>,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    crossed: bool,
}

fn look(cell: &Cell) -> Look {
    let mut fg = hex(cell.fg);
    let mut bg = hex(cell.bg);
    if cell.modifier.contains(Modifier::REVERSED) {
        std::mem::swap(&mut fg, &mut bg);
        fg = fg.or_else(|| Some(DEFAULT_BG.to_string()));
        bg = bg.or_else(|| Some(DEFAULT_FG.to_string()));
    }
    Look {
        fg: fg.unwrap_or_else(|| DEFAULT_FG.to_string()),
        bg,
        bold: cell.modifier.contains(Modifier::BOLD),
        dim: cell.modifier.contains(Modifier::DIM),
        italic: cell.modifier.contains(Modifier::ITALIC),
        underline: cell.modifier.contains(Modifier::UNDERLINED),
        crossed: cell.modifier.contains(Modifier::CROSSED_OUT),
    }
}

/// The buffer as an SVG image, colours and text attributes kept.
pub fn to_svg(buffer: &Buffer) -> String {
    let width = f32::from(buffer.area.width) * CELL_WIDTH;
    let height = f32::from(buffer.area.height) * CELL_HEIGHT;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.1} {height:.1}\" font-family=\"'DejaVu Sans Mono', Menlo, \
         Consolas, monospace\" font-size=\"{FONT_SIZE}\">"
    );
    let _ = writeln!(
        out,
        "<rect width=\"100%\" height=\"100%\" fill=\"{DEFAULT_BG}\"/>"
    );
    for y in 0..buffer.area.height {
        let cells = visible_cells(buffer, y);
        let mut i = 0;
        while i < cells.len() {
            let (x0, first, _) = cells[i];
            let style = look(first);
            let mut text = String::new();
            let mut columns = 0usize;
            while i < cells.len() && look(cells[i].1) == style {
                text.push_str(cells[i].1.symbol());
                columns += cells[i].2;
                i += 1;
            }
            let x = f32::from(x0) * CELL_WIDTH;
            let top = f32::from(y) * CELL_HEIGHT;
            let run_width = columns as f32 * CELL_WIDTH;
            if let Some(bg) = &style.bg {
                let _ = writeln!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{run_width:.1}\" \
                     height=\"{CELL_HEIGHT:.1}\" fill=\"{bg}\"/>"
                );
            }
            if text.trim().is_empty() && !style.underline && !style.crossed {
                continue;
            }
            let mut attrs = format!("fill=\"{}\"", style.fg);
            if style.bold {
                attrs.push_str(" font-weight=\"bold\"");
            }
            if style.dim {
                attrs.push_str(" opacity=\"0.6\"");
            }
            if style.italic {
                attrs.push_str(" font-style=\"italic\"");
            }
            match (style.underline, style.crossed) {
                (true, true) => attrs.push_str(" text-decoration=\"underline line-through\""),
                (true, false) => attrs.push_str(" text-decoration=\"underline\""),
                (false, true) => attrs.push_str(" text-decoration=\"line-through\""),
                (false, false) => {}
            }
            let baseline = top + CELL_HEIGHT * 0.75;
            let _ = writeln!(
                out,
                "<text x=\"{x:.1}\" y=\"{baseline:.1}\" textLength=\"{run_width:.1}\" \
                 lengthAdjust=\"spacingAndGlyphs\" xml:space=\"preserve\" {attrs}>{}</text>",
                escape_xml(&text)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}
