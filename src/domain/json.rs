//! One meaning of a JSON value everywhere (SPEC 8 rule 7): how JSON text is
//! read, what a payload may be, and when two values are the same.
//!
//! Reading is strict about one thing serde_json lets pass: a member name
//! that appears twice in one object. serde_json keeps the last value, other
//! readers keep the first or refuse, so the same bytes could mean one
//! payload to recon and another to the receiver or an auditor. Every JSON
//! text that comes in, from a person or from an adapter, is read by
//! [`parse_json`] (or [`parse_json_slice`]), which refuses a duplicate at
//! any depth and names it.
//!
//! Two values are the same when their RFC 8785 canonical texts are
//! ([`same_json`]): `10`, `10.0` and `1e1` are one number, as they are one
//! double in every reader, and an adapter that echoes `10.0` for a payload
//! sent as `10` has echoed it exactly.

use super::bounds::MAX_PAYLOAD_BYTES;
use super::canonical::{canonical_json, check_i_json, check_magnitudes};
use super::sanitize;
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::fmt;

/// A JSON number read where a whole number is expected: `10`, and also
/// `10.0` or `1e1`, which are the same number in every reader (SPEC 8
/// rule 7), within ±(2^53−1); `None` for anything else (a fraction, a
/// string, a number past the bound).
pub fn whole(value: &Value) -> Option<i64> {
    const MAX_SAFE: i64 = (1 << 53) - 1;
    let n = match value.as_i64() {
        Some(n) => n,
        None => {
            let x = value.as_f64().filter(|x| x.fract() == 0.0)?;
            if x.abs() > MAX_SAFE as f64 {
                return None;
            }
            // Exact: a whole double within 2^53 is an integer.
            x as i64
        }
    };
    (-MAX_SAFE..=MAX_SAFE).contains(&n).then_some(n)
}

/// The deepest nesting of arrays and objects accepted in a payload. The
/// engine wraps a payload in up to four more levels (a receipt line, a
/// snapshot in an evidence row, an exported evidence line), and serde_json
/// reads at most 128; a payload nested deeper than this limit would be
/// stored, and then its receipt, its evidence or its export would not read
/// back.
pub const MAX_PAYLOAD_DEPTH: usize = 64;

/// Why JSON text was not read. Its `Display` has no subject, so a caller
/// writes `--payload {error}` or `the answer {error}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON at all (serde_json's own words, with line and column).
    Syntax(String),
    /// A member name given twice in one object: the name, and the JSON
    /// pointer (RFC 6901) of the object that holds it.
    DuplicateKey { key: String, object: String },
    /// A number with no one meaning (SPEC 12, `bad_number`): the number,
    /// where it is, and why.
    BadNumber(String),
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(why) => write!(f, "is not JSON: {why}"),
            JsonError::BadNumber(why) => write!(f, "has a bad number: {why}"),
            JsonError::DuplicateKey { key, object } => {
                let at = if object.is_empty() {
                    "the top-level object".to_string()
                } else {
                    format!("the object at {}", shown(object))
                };
                write!(
                    f,
                    "has the key {} twice in {at}; a duplicate key is refused, since JSON \
                     readers disagree on which value it means",
                    shown(&canonical_json(&Value::String(key.clone())))
                )
            }
        }
    }
}

impl std::error::Error for JsonError {}

/// Reads JSON text strictly: exactly one value, and no object that names a
/// member twice, at any depth.
pub fn parse_json(text: &str) -> Result<Value, JsonError> {
    strict(serde_json::Deserializer::from_str(text))
}

/// [`parse_json`] over bytes (an adapter's answer line); text that is not
/// UTF-8 is not JSON.
pub fn parse_json_slice(bytes: &[u8]) -> Result<Value, JsonError> {
    strict(serde_json::Deserializer::from_slice(bytes))
}

/// Reads JSON that comes in from outside (an adapter's answer line), as
/// [`parse_json_slice`] does, and refuses a number of magnitude above
/// 2^53-1 in any notation (SPEC 12): beyond it one double stands for many
/// numbers, so `100000000000000000001` would count as the `1e20` it is
/// not.
pub fn parse_json_input(bytes: &[u8]) -> Result<Value, JsonError> {
    let value = parse_json_slice(bytes)?;
    // It parsed, so it is UTF-8.
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError::Syntax(e.to_string()))?;
    check_magnitudes(text).map_err(JsonError::BadNumber)?;
    Ok(value)
}

/// Why a person's payload was refused: a number with no one meaning
/// (`bad_number`, SPEC 12), or anything else. Its `Display` has no
/// subject, as [`JsonError`]'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadPayload {
    Number(String),
    Other(String),
}

impl BadPayload {
    /// The code a JSON error carries: `bad_number` for a number.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            BadPayload::Number(_) => Some("bad_number"),
            BadPayload::Other(_) => None,
        }
    }
}

impl fmt::Display for BadPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadPayload::Number(why) | BadPayload::Other(why) => f.write_str(why),
        }
    }
}

/// Whether two JSON values are the same value: equal canonical texts. A
/// value equal as serde_json sees it is always canonically equal (its
/// numbers are then the same integer or the same double), so only values
/// that differ there are written out and compared.
pub fn same_json(a: &Value, b: &Value) -> bool {
    a == b || canonical_json(a) == canonical_json(b)
}

/// Reads a payload from its JSON text, as a person gives it (`--payload`,
/// the console's compensation form): at most [`MAX_PAYLOAD_BYTES`] of text
/// (so that every answer about it stays readable), read strictly, nested
/// at most [`MAX_PAYLOAD_DEPTH`] levels, and held to I-JSON so that its
/// canonical form says what was sent. The error is one line without a
/// subject, as [`JsonError`]'s is.
pub fn parse_payload(text: &str) -> Result<Value, BadPayload> {
    if text.len() > MAX_PAYLOAD_BYTES {
        return Err(BadPayload::Other(format!(
            "is {} bytes, larger than {MAX_PAYLOAD_BYTES} bytes",
            text.len()
        )));
    }
    let value = parse_json(text).map_err(|e| BadPayload::Other(e.to_string()))?;
    if depth(&value) > MAX_PAYLOAD_DEPTH {
        return Err(BadPayload::Other(format!(
            "is nested deeper than {MAX_PAYLOAD_DEPTH} levels"
        )));
    }
    check_i_json(text).map_err(BadPayload::Number)?;
    Ok(value)
}

/// How many arrays and objects deep a value is (a scalar is 0). Iterative,
/// so no input can exhaust the stack here.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(level + 1);
        stack.extend(children.map(|child| (child, level + 1)));
    }
    deepest
}

/// Untrusted text in an error line: escaped for a terminal, and cut when
/// it is long (a member name can be megabytes).
fn shown(text: &str) -> String {
    const SHOWN: usize = 60;
    let escaped = sanitize::escape(text);
    match escaped.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}...", &escaped[..cut]),
        None => escaped.into_owned(),
    }
}

fn strict<'de, R: serde_json::de::Read<'de>>(
    mut deserializer: serde_json::Deserializer<R>,
) -> Result<Value, JsonError> {
    let found = RefCell::new(Duplicate::default());
    let value = Strict(&found)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match (value, found.into_inner()) {
        (Ok(value), _) => Ok(value),
        (
            Err(_),
            Duplicate {
                key: Some(key),
                trail,
            },
        ) => Err(JsonError::DuplicateKey {
            key,
            object: trail.iter().rev().fold(String::new(), |mut pointer, step| {
                pointer.push('/');
                pointer.push_str(&step.replace('~', "~0").replace('/', "~1"));
                pointer
            }),
        }),
        (Err(e), _) => Err(JsonError::Syntax(e.to_string())),
    }
}

/// A duplicate found while reading: its name, and the path to the object
/// holding it, innermost step first (each level adds its step as the
/// error passes through it, so reading without one costs nothing).
#[derive(Default)]
struct Duplicate {
    key: Option<String>,
    trail: Vec<String>,
}

/// Builds a [`Value`] as serde_json's own visitor does, refusing a repeated
/// member name.
#[derive(Clone, Copy)]
struct Strict<'a>(&'a RefCell<Duplicate>);

impl Strict<'_> {
    /// Notes the step an error passed through, when it is a duplicate's.
    fn through(self, step: impl FnOnce() -> String) {
        let mut found = self.0.borrow_mut();
        if found.key.is_some() {
            found.trail.push(step());
        }
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    self.through(|| items.len().to_string());
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let value = match access.next_value_seed(self) {
                Ok(value) => value,
                Err(e) => {
                    self.through(|| key);
                    return Err(e);
                }
            };
            match map.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(slot) => {
                    self.0.borrow_mut().key = Some(slot.key().clone());
                    return Err(A::Error::custom("duplicate key"));
                }
            }
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_whole_number_may_be_written_with_a_zero_fraction_within_i_json_bounds() {
        for (text, expected) in [
            ("10", Some(10)),
            ("10.0", Some(10)),
            ("1e1", Some(10)),
            ("-3.0", Some(-3)),
            ("9007199254740991", Some(9_007_199_254_740_991)),
            ("9007199254740991.0", Some(9_007_199_254_740_991)),
            ("9007199254740992", None),
            ("9007199254740992.0", None),
            ("1e20", None),
            ("2.5", None),
            ("\"2\"", None),
            ("null", None),
        ] {
            let value: Value = serde_json::from_str(text).expect("JSON");
            assert_eq!(whole(&value), expected, "{text}");
        }
    }

    #[track_caller]
    fn duplicate(text: &str, key: &str, object: &str) {
        assert_eq!(
            parse_json(text),
            Err(JsonError::DuplicateKey {
                key: key.into(),
                object: object.into()
            }),
            "{text}"
        );
    }

    #[test]
    fn a_duplicate_key_is_refused_at_any_depth_naming_its_object() {
        duplicate(r#"{"amount":1,"amount":1000}"#, "amount", "");
        duplicate(r#"{"a":[1,{"b":{"c":1,"c":1}}]}"#, "c", "/a/1/b");
        duplicate(r#"[{}, {"x/y~": {"k":1,"k":2}}]"#, "k", "/1/x~1y~0");
        // The same name escaped two ways is the same name.
        duplicate(r#"{"a":1,"\u0061":2}"#, "a", "");
        let message = parse_json(r#"{"n":{"amount":1,"amount":1000}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(r#"has the key "amount" twice in the object at /n;"#),
            "{message}"
        );
    }

    #[test]
    fn strict_reading_agrees_with_serde_json_on_everything_else() {
        for text in [
            r#"{"a":[1,-2,3.5,1e300,null,true,false,"\ud83d\ude00"],"b":{"c":{}},"d":[]}"#,
            "  12  \n",
            r#""\u0000""#,
            "-0.0",
            "18446744073709551615",
            "-9223372036854775808",
            "0.1",
        ] {
            let loose: Value = serde_json::from_str(text).expect("test input is JSON");
            assert_eq!(parse_json(text), Ok(loose.clone()), "{text}");
            assert_eq!(parse_json_slice(text.as_bytes()), Ok(loose), "{text}");
        }
        for text in ["", "{", "1 2", "{\"a\":1,}", "[1]]", "nul"] {
            assert!(
                matches!(parse_json(text), Err(JsonError::Syntax(_))),
                "{text}"
            );
        }
        assert!(matches!(
            parse_json_slice(b"\"\xff\""),
            Err(JsonError::Syntax(_))
        ));
    }

    #[test]
    fn ten_point_zero_ten_and_one_e_one_are_the_same_json() {
        let read = |text: &str| parse_json(text).expect("JSON");
        let ten = read(r#"{"amount":10}"#);
        for same in [
            r#"{"amount":10.0}"#,
            r#"{"amount":1e1}"#,
            r#"{"amount":100e-1}"#,
        ] {
            assert!(same_json(&ten, &read(same)), "{same}");
            assert!(same_json(&read(same), &ten), "{same}");
        }
        assert!(same_json(&json!(0), &json!(-0.0)));
        assert!(!same_json(&ten, &read(r#"{"amount":10.5}"#)));
        assert!(!same_json(&ten, &read(r#"{"amount":"10"}"#)));
        assert!(!same_json(
            &json!(9007199254740993_u64),
            &json!(9007199254740992.0)
        ));
    }

    #[test]
    fn a_payload_is_strict_bounded_and_i_json() {
        assert_eq!(
            parse_payload(r#"{"amount":10.0}"#),
            Ok(json!({"amount": 10.0}))
        );
        assert!(parse_payload(r#"{"a":1,"a":2}"#)
            .unwrap_err()
            .to_string()
            .starts_with(r#"has the key "a" twice"#));
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            parse_payload(&deep),
            Err(BadPayload::Other(format!(
                "is nested deeper than {MAX_PAYLOAD_DEPTH} levels"
            )))
        );
        let refused = parse_payload("9007199254740993").unwrap_err();
        assert!(refused.to_string().contains("is not I-JSON"), "{refused}");
        assert_eq!(refused.code(), Some("bad_number"));
    }

    /// Numbers of magnitude above 2^53-1 in every notation, and the ones
    /// at the bound, as a person's payload and as an adapter's answer.
    const MAGNITUDES: &[(&str, bool)] = &[
        ("1e20", false),
        ("1E20", false),
        ("-1e20", false),
        ("9007199254740992.0", false),
        ("9007199254740993.5", false),
        ("100000000000000000001", false),
        ("9007199254740992", false),
        ("9.007199254740992e15", false),
        ("90071992547409910e-1", true),
        ("1e300", false),
        ("0.9e16", true),
        ("9007199254740991", true),
        ("-9007199254740991", true),
        ("9007199254740991.0", true),
        ("9.007199254740991e15", true),
        ("1e15", true),
        ("0e999", true),
        ("1e-300", true),
    ];

    #[test]
    fn a_number_of_magnitude_above_2_53_minus_1_in_any_notation_is_a_bad_number() {
        for &(number, kept) in MAGNITUDES {
            let payload = format!(r#"{{"amount":{number}}}"#);
            let from_person = parse_payload(&payload);
            let from_adapter = parse_json_input(payload.as_bytes());
            match kept {
                true => {
                    assert!(from_person.is_ok(), "{number}: {from_person:?}");
                    assert!(from_adapter.is_ok(), "{number}: {from_adapter:?}");
                }
                false => {
                    let person = from_person.expect_err(number);
                    assert_eq!(person.code(), Some("bad_number"), "{number}: {person}");
                    assert!(person.to_string().contains("2^53-1"), "{number}: {person}");
                    assert!(
                        matches!(from_adapter, Err(JsonError::BadNumber(_))),
                        "{number}: {from_adapter:?}"
                    );
                }
            }
        }
    }
}
