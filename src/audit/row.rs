//! A table row as SQLite holds it, kept compact: the text of every column
//! in one buffer and each column a span of it or a number, so reading a
//! row costs two allocations whatever its width. `verify` reads millions
//! of rows on one thread and drops them on another; fewer, larger
//! allocations are most of what keeps that fast.

use serde_json::{json, Number, Value};
use std::fmt::Write;

/// One stored row. Build it column by column with the `push_*` methods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    text: String,
    cells: Vec<Cell>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(usize, usize),
    /// The bytes as lowercase hex, in the text buffer.
    Blob(usize, usize),
}

/// One column of a stored row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Column<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    /// The bytes as lowercase hex.
    Blob(&'a str),
}

impl Row {
    pub fn with_capacity(columns: usize, text: usize) -> Self {
        Row {
            text: String::with_capacity(text),
            cells: Vec::with_capacity(columns),
        }
    }

    pub fn push_null(&mut self) {
        self.cells.push(Cell::Null);
    }

    pub fn push_integer(&mut self, value: i64) {
        self.cells.push(Cell::Integer(value));
    }

    pub fn push_real(&mut self, value: f64) {
        self.cells.push(Cell::Real(value));
    }

    pub fn push_text(&mut self, text: &str) {
        let start = self.text.len();
        self.text.push_str(text);
        self.cells.push(Cell::Text(start, self.text.len()));
    }

    pub fn push_blob(&mut self, bytes: &[u8]) {
        let start = self.text.len();
        for b in bytes {
            let _ = write!(self.text, "{b:02x}");
        }
        self.cells.push(Cell::Blob(start, self.text.len()));
    }

    /// Column `i` (null past the last).
    pub fn get(&self, i: usize) -> Column<'_> {
        match self.cells.get(i) {
            None | Some(Cell::Null) => Column::Null,
            Some(Cell::Integer(v)) => Column::Integer(*v),
            Some(Cell::Real(v)) => Column::Real(*v),
            Some(Cell::Text(start, end)) => Column::Text(&self.text[*start..*end]),
            Some(Cell::Blob(start, end)) => Column::Blob(&self.text[*start..*end]),
        }
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
}

impl Column<'_> {
    /// Whether the column holds exactly this value: text equal to a
    /// string, an integer equal to an integer, a real equal to a number
    /// that is not an integer, null to null. A blob equals nothing the
    /// journal can say.
    pub fn matches(self, expected: &Value) -> bool {
        match (self, expected) {
            (Column::Null, Value::Null) => true,
            (Column::Integer(i), Value::Number(n)) => n.as_i64() == Some(i),
            (Column::Real(x), Value::Number(n)) => n.is_f64() && n.as_f64() == Some(x),
            (Column::Text(text), Value::String(s)) => text == s,
            _ => false,
        }
    }

    /// The column as JSON, for a report: a blob as `{"blob": HEX}` and a
    /// real JSON cannot hold as `{"real": TEXT}`, so neither reads as a
    /// value the journal could hold.
    pub fn value(self) -> Value {
        match self {
            Column::Null => Value::Null,
            Column::Integer(i) => Value::from(i),
            Column::Real(x) => {
                Number::from_f64(x).map_or_else(|| json!({ "real": x.to_string() }), Value::Number)
            }
            Column::Text(text) => Value::from(text),
            Column::Blob(hex) => json!({ "blob": hex }),
        }
    }

    /// The column as plain text, for messages.
    pub fn text(self) -> String {
        match self {
            Column::Text(text) => text.to_string(),
            other => other.value().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_matches_only_the_value_it_holds() {
        let mut row = Row::default();
        row.push_integer(3);
        row.push_real(3.0);
        row.push_text("3");
        row.push_blob(b"3");
        row.push_null();
        let three = json!(3);
        let matches: Vec<bool> = (0..5).map(|i| row.get(i).matches(&three)).collect();
        assert_eq!(matches, [true, false, false, false, false]);
        assert!(row.get(1).matches(&json!(3.0)));
        assert!(row.get(2).matches(&json!("3")));
        assert!(row.get(4).matches(&Value::Null) && row.get(9).matches(&Value::Null));
        assert_eq!(row.get(3).value(), json!({"blob": "33"}));
    }
}
