//! Canonical JSON is RFC 8785's, checked against the RFC's own examples, and
//! payload numbers are held to I-JSON so that the canonical form keeps every
//! digit a payload was written with.

use crate::support::{dump, run, Lab};
use recon::domain::{canonical_json, check_i_json};
use serde_json::Value;

/// `input` is JSON text; serde_json reads it (with `float_roundtrip`, so
/// every number is the double nearest to what is written).
#[track_caller]
fn check(input: &str, expected: &str) {
    let value: Value = serde_json::from_str(input).expect("test input is JSON");
    assert_eq!(canonical_json(&value), expected, "input {input}");
}

/// `bits` is an IEEE 754 double, as RFC 8785 appendix B lists it.
#[track_caller]
fn check_double(bits: u64, expected: &str) {
    let value = Value::from(f64::from_bits(bits));
    assert_eq!(canonical_json(&value), expected, "double {bits:016x}");
}

#[test]
fn canonical_json_matches_rfc_8785_known_answers() {
    // Section 3.2.2: the primitive data types.
    check(
        r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#,
        r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#,
    );
    // Section 3.2.3: members sorted by UTF-16 code units, so the emoji (the
    // surrogate D83D) comes before U+FB33, where UTF-8 order puts it after.
    check(
        r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#,
        "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
         \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
         \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
    );
    // The RFC's sorting test data (weird.json): `<` and `/` stay as they
    // are, and so do DEL and the C1 control U+0080.
    check(
        r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\u000a": "Newline",
            "1": "One",
            "\u0080": "Control\u007f",
            "\ud83d\ude02": "Smiley",
            "\u00f6": "Latin Small Letter O With Diaeresis",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "</script>": "Browser Challenge"
        }"#,
        "{\"\\n\":\"Newline\",\"\\r\":\"Carriage Return\",\"1\":\"One\",\
         \"</script>\":\"Browser Challenge\",\"\u{80}\":\"Control\u{7f}\",\
         \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
         \"\u{1f602}\":\"Smiley\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
    );
    // Strings: the short escapes, `\u00xx` in lowercase for other controls.
    check(
        r#""\u0000\u0008\u0009\u000a\u000b\u000c\u000d\u001F\u007f""#,
        "\"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\u{7f}\"",
    );
    // Numbers, one by one, as serde_json reads them from text.
    check("1e30", "1e+30");
    check("4.50", "4.5");
    check("2e-3", "0.002");
    check("0.000001", "0.000001");
    check("1e-7", "1e-7");
    check("1e21", "1e+21");
    check("1e20", "100000000000000000000");
    check("999999999999999900000", "999999999999999900000");
    check("333333333.3333333", "333333333.3333333");
    check("-0", "0");
    check("-0.0", "0");
    check("1.0", "1");
    check("-1.5e-9", "-1.5e-9");
    check("123456789.125e3", "123456789125");
    check("9007199254740991", "9007199254740991");
    check("-9007199254740991", "-9007199254740991");
}

#[test]
fn canonical_numbers_match_rfc_8785_appendix_b() {
    // Every finite row of the table (NaN and Infinity are not JSON values).
    check_double(0x0000000000000000, "0");
    check_double(0x8000000000000000, "0");
    check_double(0x0000000000000001, "5e-324");
    check_double(0x8000000000000001, "-5e-324");
    check_double(0x7fefffffffffffff, "1.7976931348623157e+308");
    check_double(0xffefffffffffffff, "-1.7976931348623157e+308");
    check_double(0x4340000000000000, "9007199254740992");
    check_double(0xc340000000000000, "-9007199254740992");
    check_double(0x4430000000000000, "295147905179352830000");
    check_double(0x44b52d02c7e14af5, "9.999999999999997e+22");
    check_double(0x44b52d02c7e14af6, "1e+23");
    check_double(0x44b52d02c7e14af7, "1.0000000000000001e+23");
    check_double(0x444b1ae4d6e2ef4e, "999999999999999700000");
    check_double(0x444b1ae4d6e2ef4f, "999999999999999900000");
    check_double(0x444b1ae4d6e2ef50, "1e+21");
    check_double(0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7");
    check_double(0x3eb0c6f7a0b5ed8d, "0.000001");
    check_double(0x41b3de4355555553, "333333333.3333332");
    check_double(0x41b3de4355555554, "333333333.33333325");
    check_double(0x41b3de4355555555, "333333333.3333333");
    check_double(0x41b3de4355555556, "333333333.3333334");
    check_double(0x41b3de4355555557, "333333333.33333343");
    check_double(0xbecbf647612f3696, "-0.0000033333333333333333");
    check_double(0x43143ff3c1cb0959, "1424953923781206.2");
}

#[track_caller]
fn accepted(payload: &str) {
    assert_eq!(check_i_json(payload), Ok(()), "payload {payload}");
}

/// `payload` is refused with a message naming `number` at `at`.
#[track_caller]
fn refused(payload: &str, number: &str, at: &str) {
    let error = check_i_json(payload).expect_err(payload);
    let named = format!("number {number} at {at} is not I-JSON: ");
    assert!(error.starts_with(&named), "payload {payload}: {error}");
}

#[test]
fn i_json_refuses_numbers_whose_canonical_form_would_lose_digits() {
    accepted(r#"{"n": 9007199254740991}"#);
    accepted(r#"{"n": -9007199254740991}"#);
    accepted("-0");
    accepted("0.1");
    accepted("4.50");
    accepted("1E15");
    accepted("2e-3");
    accepted("0.000000000000000000000000001");
    accepted("333333333.3333333");
    accepted("[1.5e-7, 0e999, 9.007199254740991e15]");
    // Digits inside strings and member names are text, not numbers.
    accepted(r#"{"9007199254740993": "18446744073709551617"}"#);

    refused(r#"{"n": 9007199254740993}"#, "9007199254740993", "/n");
    refused("[0, -9007199254740992]", "-9007199254740992", "/1");
    refused(
        r#"{"a": [1, {"b/c~": 18446744073709551617}]}"#,
        "18446744073709551617",
        "/a/1/b~1c~0",
    );
    refused(r#"{"a": {"b": 1}, "c": 1e-400}"#, "1e-400", "/c");
    // Beyond 2^53-1 in any notation (SPEC 12): one double, many numbers.
    refused("1E30", "1E30", "the top level");
    refused(
        "[1.5e-7, 1.7976931348623157e308]",
        "1.7976931348623157e308",
        "/1",
    );
    refused(r#"{"n": 9007199254740992.0}"#, "9007199254740992.0", "/n");
    refused(
        "[[1], [2, 0.10000000000000001]]",
        "0.10000000000000001",
        "/1/1",
    );
    refused("333333333.33333329", "333333333.33333329", "the top level");
    refused(r#"{"\u0041\"": 1e999}"#, "1e999", "/A\"");
    refused(
        "3.141592653589793238462643383279502884197169399375105820974944",
        "3.14159265358979323846264338327950288419... (62 characters)",
        "the top level",
    );
    assert_eq!(
        check_i_json(r#"{"x": 0.10000000000000001}"#),
        Err(
            "number 0.10000000000000001 at /x is not I-JSON: it reads back as the double \
             0.1, so its canonical form would lose digits; write 0.1, or send the number \
             as a string"
                .to_string()
        )
    );
}

fn prepare(lab: &Lab, op: &str, payload: &str) -> crate::support::Run {
    let ws = lab.path_str();
    run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            op,
            "--action",
            "pay",
            "--payload",
            payload,
        ],
        None,
    )
}

#[test]
fn prepare_refuses_an_integer_beyond_2_53_naming_its_path() {
    let lab = Lab::new();
    let before = dump(lab.path());
    let out = prepare(&lab, "big", r#"{"n": 9007199254740993}"#);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "one line on stderr: {}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("--payload number 9007199254740993 at /n is not I-JSON"),
        "{}",
        out.stderr
    );
    assert_eq!(dump(lab.path()), before);

    let out = prepare(&lab, "safe", r#"{"n": 9007199254740991}"#);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

/// Issue 29, reproduction 12: `1e20` and `9007199254740992.0` were taken
/// in a payload while `100000000000000000000` was refused. Every notation
/// of a magnitude above 2^53-1 is now a usage error whose JSON error
/// carries `"code": "bad_number"`, and nothing is written.
#[test]
fn a_payload_number_above_2_53_minus_1_in_any_notation_is_a_usage_error_coded_bad_number() {
    let lab = Lab::new();
    assert_eq!(prepare(&lab, "first", r#"{"n": 1}"#).code, Some(0));
    let before = dump(lab.path());
    for number in [
        "1e20",
        "9007199254740992.0",
        "9007199254740993.5",
        "100000000000000000001",
        "-1E+16",
    ] {
        let ws = lab.path_str();
        let payload = format!(r#"{{"n": {number}}}"#);
        let args = [
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "big",
            "--action",
            "pay",
            "--payload",
            &payload,
            "--json",
        ];
        let out = run(&args, None);
        assert_eq!(out.code, Some(2), "{number}: {}", out.stderr);
        let error: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("{number}: {e}: {}", out.stdout));
        assert_eq!(error["error"]["code"], "bad_number", "{number}: {error}");
        assert_eq!(error["error"]["kind"], "usage", "{number}: {error}");
        assert_eq!(dump(lab.path()), before, "{number}: something was written");
    }
    assert_eq!(
        prepare(&lab, "safe", r#"{"n": 9.007199254740991e15}"#).code,
        Some(0)
    );
}
