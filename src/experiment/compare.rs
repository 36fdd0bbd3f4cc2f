//! The whole-document comparison behind `--check`: every path where the
//! reproduced JSON differs from the expected one, with both values.

use serde_json::Value;
use std::fmt;

/// One differing JSON path. `None` means the path is absent on that side.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    pub expected: Option<Value>,
    pub actual: Option<Value>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| match v {
            Some(v) => v.to_string(),
            None => "(missing)".to_string(),
        };
        write!(
            f,
            "{}: expected {}, actual {}",
            self.path,
            show(&self.expected),
            show(&self.actual)
        )
    }
}

/// Every leaf where `actual` differs from `expected`, in document order.
/// Paths are written `$.scenarios.name.field[2]`.
pub fn compare(expected: &Value, actual: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    walk("$".to_string(), Some(expected), Some(actual), &mut out);
    out
}

fn walk(path: String, expected: Option<&Value>, actual: Option<&Value>, out: &mut Vec<Difference>) {
    match (expected, actual) {
        (Some(Value::Object(e)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = e.keys().collect();
            keys.extend(a.keys().filter(|k| !e.contains_key(*k)));
            for key in keys {
                walk(format!("{path}.{key}"), e.get(key), a.get(key), out);
            }
        }
        (Some(Value::Array(e)), Some(Value::Array(a))) => {
            for i in 0..e.len().max(a.len()) {
                walk(format!("{path}[{i}]"), e.get(i), a.get(i), out);
            }
        }
        (e, a) if e == a => {}
        (e, a) => out.push(Difference {
            path,
            expected: e.cloned(),
            actual: a.cloned(),
        }),
    }
}
