//! Canonical JSON as RFC 8785 (the JSON Canonicalization Scheme) defines it,
//! and the I-JSON check that keeps payloads inside its domain.
//!
//! Payloads are compared, stored and hashed as canonical text, so two
//! programs that hold the same JSON value must write the same bytes. RFC 8785
//! fixes those bytes by borrowing ECMAScript's `JSON.stringify`: members
//! sorted by their names as UTF-16 code units, strings escaped minimally,
//! numbers written as `Number.prototype.toString` writes an IEEE double.
//! Anyone can recompute a hash with a JCS library in another language.
//!
//! JCS is defined for I-JSON (RFC 7493) only. A value holding an integer
//! beyond ±(2^53−1) is written here with all its digits (as serde_json holds
//! it), where ECMAScript would round it to a double; such a value never comes
//! from `--payload`, which [`check_i_json`] holds to I-JSON. The check reads
//! the payload's text rather than a parsed [`Value`], because by the time a
//! number is a `Value` its lost digits are gone: `18446744073709551617` has
//! become a double, and `0.10000000000000001` is `0.1`.

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// The largest integer an IEEE double holds together with all its
/// neighbours, 2^53−1: I-JSON's bound for integers.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The RFC 8785 canonical text of a value.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// The SHA-256 of a value's canonical text, as 64 lowercase hex digits:
/// what an evidence row names as the answer it rests on, and what a
/// `closed` entry names as the snapshot it recorded (SPEC 12).
pub fn canonical_sha256(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// SHA-256 of some bytes, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

/// Members in the order of their names as UTF-16 code units. This differs
/// from the map's own (UTF-8 byte) order only where a name holds a character
/// above U+FFFF and another holds one in U+E000..=U+FFFF at the same place:
/// UTF-16 writes the first as a surrogate (U+D800..) and sorts it before.
fn write_object(out: &mut String, map: &Map<String, Value>) {
    let mut members: Vec<(&String, &Value)> = map.iter().collect();
    members.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    out.push('{');
    for (i, (name, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, name);
        out.push(':');
        write_value(out, value);
    }
    out.push('}');
}

/// A string as `JSON.stringify` writes it: the two-character escapes where
/// JSON has one, `\u00xx` (lowercase) for the other controls, and every
/// other character as itself, DEL and non-ASCII included.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c < ' ' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_number(out: &mut String, number: &Number) {
    if let Some(n) = number.as_u64() {
        let _ = write!(out, "{n}");
    } else if let Some(n) = number.as_i64() {
        let _ = write!(out, "{n}");
    } else if let Some(x) = number.as_f64() {
        write_double(out, x);
    }
}

/// `Number.prototype.toString` (ECMA-262, Number::toString with radix 10)
/// for a finite double: the shortest digits that read back as the same
/// double, in fixed notation from 1e-6 up to (not including) 1e21 and as
/// `d.ddde±N` otherwise; both zeros are `0`.
fn write_double(out: &mut String, x: f64) {
    if x == 0.0 || !x.is_finite() {
        // serde_json's `Number` holds no NaN or infinity; `0` keeps the
        // output JSON if one ever arrives.
        out.push('0');
        return;
    }
    if x < 0.0 {
        out.push('-');
    }
    let Shortest { digits, point: n } = shortest(x.abs());
    let k = digits.len() as i64;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (whole, fraction) = digits.split_at(n as usize);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        // A positive double has at least one significant digit.
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let exponent = n - 1;
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{}", exponent.abs());
    }
}

/// A positive decimal `0.digits × 10^point`, with no leading or trailing
/// zero in `digits` (empty for zero).
#[derive(Debug, PartialEq, Eq)]
struct Shortest {
    digits: String,
    point: i64,
}

/// The shortest digits that read back as `x` (finite, positive), the nearest
/// to `x` when several are as short, and the even one when two are as near:
/// what ECMAScript's Number::toString asks for. Ryu computes exactly those
/// (Rust's own `{:e}` rounds such ties up, and would write
/// `1424953923781206.3` for RFC 8785's `1424953923781206.2`); its text is
/// plain decimal, read back by [`written`].
fn shortest(x: f64) -> Shortest {
    written(ryu::Buffer::new().format_finite(x))
}

/// Holds a payload's JSON text to I-JSON (RFC 7493), so that its canonical
/// form keeps every digit it was written with: an integer must lie within
/// ±(2^53−1), and a number with a fraction or an exponent must be written
/// with no more digits than its double keeps (`0.1` is fine, it reads back
/// as `0.1`; `0.10000000000000001` reads back as `0.1` too, and is refused).
/// Numbers that are not finite are refused as well.
///
/// `text` is JSON that serde_json has already accepted; the error is one line
/// naming the first offending number and its JSON pointer (RFC 6901).
pub fn check_i_json(text: &str) -> Result<(), String> {
    scan_numbers(text, check_number)
}

/// Holds JSON text's numbers to one meaning (SPEC 12): none of magnitude
/// above 2^53-1, in any notation (`1e20`, `9007199254740992.0`,
/// `100000000000000000001`), since beyond it one double stands for many
/// numbers. What an adapter answers is held to this; a person's payload to
/// all of [`check_i_json`], which includes it.
pub fn check_magnitudes(text: &str) -> Result<(), String> {
    scan_numbers(text, check_magnitude)
}

/// Every number literal of JSON text (already accepted by serde_json),
/// held to `check`; the error names the first one refused and its JSON
/// pointer.
fn scan_numbers(text: &str, check: fn(&str) -> Result<(), String>) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut path: Vec<Step> = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'{' => path.push(Step::Member(None)),
            b'[' => path.push(Step::Index(0)),
            b'}' | b']' => {
                path.pop();
            }
            b',' => match path.last_mut() {
                Some(Step::Index(index)) => *index += 1,
                Some(Step::Member(name)) => *name = None,
                None => {}
            },
            b'"' => {
                let start = i;
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    match c {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                let token = text.get(start..=i).unwrap_or("\"\"");
                if let Some(Step::Member(name @ None)) = path.last_mut() {
                    *name = Some(token);
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while bytes
                    .get(i + 1)
                    .is_some_and(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    i += 1;
                }
                let literal = text.get(start..=i).unwrap_or_default();
                if let Err(why) = check(literal) {
                    return Err(format!(
                        "number {} at {} is not I-JSON: {why}",
                        shown(literal),
                        pointer(&path)
                    ));
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// One step of the path to the token being read: an array index, or an
/// object member whose name (its raw JSON string token) has been read.
enum Step<'a> {
    Index(usize),
    Member(Option<&'a str>),
}

fn pointer(path: &[Step]) -> String {
    if path.is_empty() {
        return "the top level".into();
    }
    let mut out = String::new();
    for step in path {
        out.push('/');
        match step {
            Step::Index(index) => {
                let _ = write!(out, "{index}");
            }
            Step::Member(name) => {
                let name: String = name
                    .and_then(|token| serde_json::from_str(token).ok())
                    .unwrap_or_default();
                out.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
        }
    }
    out
}

/// A number literal as the error shows it: whole unless it is very long.
fn shown(literal: &str) -> String {
    const SHOWN: usize = 40;
    match literal.get(..SHOWN) {
        Some(head) if literal.len() > SHOWN => {
            format!("{head}... ({} characters)", literal.len())
        }
        _ => literal.to_string(),
    }
}

/// A number's magnitude, in whatever notation it is written, at most
/// 2^53-1, compared as the decimal it is written as (no double rounds it).
fn check_magnitude(literal: &str) -> Result<(), String> {
    let magnitude = literal.strip_prefix('-').unwrap_or(literal);
    let Shortest { digits, point } = written(magnitude);
    let max = MAX_SAFE_INTEGER.to_string();
    let above = match point.cmp(&(max.len() as i64)) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        // Same count of whole digits: compare digit by digit, and any
        // digit beyond (no trailing zero is kept) makes it larger.
        std::cmp::Ordering::Equal => {
            let head: String = digits
                .chars()
                .chain(std::iter::repeat('0'))
                .take(max.len())
                .collect();
            head > max || (head == max && digits.len() > max.len())
        }
    };
    if above {
        return Err(format!(
            "its magnitude is above {MAX_SAFE_INTEGER} (2^53-1), where one double stands for \
             many numbers; send it as a string"
        ));
    }
    Ok(())
}

fn check_number(literal: &str) -> Result<(), String> {
    check_magnitude(literal)?;
    let magnitude = literal.strip_prefix('-').unwrap_or(literal);
    if !magnitude.contains(['.', 'e', 'E']) {
        // Within 2^53-1 (just checked), so it parses.
        return magnitude
            .parse::<u64>()
            .map(drop)
            .map_err(|_| "it is not a number".to_string());
    }
    let x: f64 = magnitude
        .parse()
        .map_err(|_| "it is not a number".to_string())?;
    if !x.is_finite() {
        return Err("it is not a finite double".into());
    }
    let kept = if x == 0.0 {
        Shortest {
            digits: String::new(),
            point: 0,
        }
    } else {
        shortest(x)
    };
    if written(magnitude) == kept {
        return Ok(());
    }
    let mut double = String::new();
    write_double(&mut double, x);
    Err(format!(
        "it reads back as the double {double}, so its canonical form would lose digits; \
         write {double}, or send the number as a string"
    ))
}

/// The decimal a literal (without its sign) is written as, normalized as
/// [`Shortest`] is. The exponent saturates: a literal whose exponent does not
/// fit is out of any double's range, and compares unequal to what it reads
/// back as.
fn written(magnitude: &str) -> Shortest {
    let (significand, exponent) = match magnitude.split_once(['e', 'E']) {
        Some((significand, exponent)) => (significand, exponent),
        None => (magnitude, "0"),
    };
    let (whole, fraction) = significand.split_once('.').unwrap_or((significand, ""));
    let (negative, exponent_digits) = match exponent.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, exponent.strip_prefix('+').unwrap_or(exponent)),
    };
    let exponent = exponent_digits
        .bytes()
        .filter(u8::is_ascii_digit)
        .fold(0i64, |e, d| {
            e.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    let exponent = if negative { -exponent } else { exponent };
    let all: String = whole.chars().chain(fraction.chars()).collect();
    let significant = all.trim_start_matches('0');
    let leading_zeros = (all.len() - significant.len()) as i64;
    let digits = significant.trim_end_matches('0').to_string();
    if digits.is_empty() {
        return Shortest { digits, point: 0 };
    }
    Shortest {
        digits,
        point: (whole.len() as i64 - leading_zeros).saturating_add(exponent),
    }
}
