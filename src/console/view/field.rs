//! A text field as drawn: its text around the cursor, cut to the room it
//! has, and the cursor as a block where it is (a space after the last
//! character): a coloured cell, or a reversed one without colour, so the
//! reviewer sees where typing goes either way.

use super::super::field::TextField;
use super::super::theme::Theme;
use ratatui::style::Style;
use ratatui::text::Span;

/// The field's spans in `room` columns; an unfocused field shows no
/// cursor and no field background.
pub fn field_spans(
    theme: &Theme,
    field: &TextField,
    room: usize,
    focused: bool,
) -> Vec<Span<'static>> {
    let window = field.window(room);
    let (style, cursor) = if focused {
        (theme.input(), theme.cursor())
    } else {
        (Style::new(), Style::new())
    };
    vec![
        Span::styled(window.before, style),
        Span::styled(window.at, cursor),
        Span::styled(window.after, style),
    ]
}
