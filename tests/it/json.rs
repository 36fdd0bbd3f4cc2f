//! One meaning of a JSON value everywhere (SPEC 8 rule 7), as a person
//! meets it: JSON that names a key twice is refused wherever it comes in
//! (exit 2, one line naming the key, nothing written), an effect id obeys
//! the op-id rules, and whatever recon writes as JSON (`--json`, `export`)
//! reads back as exactly the stored text, characters above U+FFFF
//! included. The adapter's side of the rule is in `adapters/json.rs`.

use crate::cli::assert_json_error;
use crate::support::{dump, export_then_verify_against, run, Lab};
use serde_json::{json, Value};

/// The payload of the duplicate-key cases: one reader sees 1, another 1000.
const DUPLICATE: &str = r#"{"amount":1,"amount":1000}"#;

/// A payload holding characters above the BMP: a variation selector
/// (U+E0100), the flag of England (a black flag and five tag characters,
/// U+E0067..U+E007F) and a regional-indicator flag.
fn supplementary_payload() -> Value {
    json!({
        "note": "a\u{E0100}b",
        "flag": "\u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}",
        "country": "\u{1F1EB}\u{1F1F7}",
    })
}

/// Exit 2, one line on stderr naming the key, and nothing written.
#[track_caller]
fn assert_duplicate_refused(lab: &Lab, args: &[&str], stdin: Option<&[u8]>, key: &str) {
    let before = dump(lab.path());
    let out = run(args, stdin);
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
    assert!(
        out.stderr.contains(&format!("has the key \"{key}\" twice")),
        "{args:?}: {}",
        out.stderr
    );
    assert_eq!(dump(lab.path()), before, "{args:?} wrote something");
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `recon prepare` of `op-1` in `lab` with this `--payload`.
fn prepare(lab: &Lab, payload: &str) -> Vec<String> {
    let ws = lab.path_str();
    [
        "prepare",
        "--workspace",
        &ws,
        "--op",
        "op-1",
        "--action",
        "pay",
        "--payload",
        payload,
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn a_duplicate_key_in_a_payload_is_refused() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let file = lab.path().join("payload.json");
    std::fs::write(&file, DUPLICATE).unwrap();
    let at_file = format!("@{}", file.display());
    for (payload, stdin) in [
        (DUPLICATE, None),
        (at_file.as_str(), None),
        ("@-", Some(DUPLICATE.as_bytes())),
    ] {
        assert_duplicate_refused(&lab, &strs(&prepare(&lab, payload)), stdin, "amount");
    }
    // At any depth, naming the object that holds it.
    let nested = prepare(&lab, r#"{"lines":[{"sku":"a"},{"sku":"b","sku":"c"}]}"#);
    assert_duplicate_refused(&lab, &strs(&nested), None, "sku");
    let out = run(&strs(&nested), None);
    assert!(
        out.stderr.contains("in the object at /lines/1"),
        "{}",
        out.stderr
    );
    // Every command that takes a payload.
    for args in [
        vec![
            "reconcile",
            "--workspace",
            &ws,
            "op-1",
            "--reviewer",
            "ann",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
            "--payload",
            DUPLICATE,
        ],
        vec![
            "approve-compensation",
            "--workspace",
            &ws,
            "op-1",
            "--effect",
            "fx-000001",
            "--approver",
            "lee",
            "--expected-version",
            "3",
            "--compensation-op",
            "op-1-undo",
            "--action",
            "refund",
            "--payload",
            DUPLICATE,
        ],
        vec![
            "receiver",
            "apply",
            "--workspace",
            &ws,
            "--op",
            "op-2",
            "--action",
            "pay",
            "--payload",
            DUPLICATE,
        ],
    ] {
        assert_duplicate_refused(&lab, &args, None, "amount");
    }
    // Under --json: the one JSON error document of a usage error.
    let mut args = prepare(&lab, DUPLICATE);
    args.push("--json".into());
    let out = run(&strs(&args), None);
    assert_json_error(&out, 2);
    let message = out.json()["error"]["message"].clone();
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains("has the key \"amount\" twice")),
        "{message}"
    );
}

#[test]
fn a_duplicate_key_in_an_export_read_by_verify_is_refused() {
    let lab = Lab::new();
    let ws = lab.path_str();
    assert_eq!(run(&strs(&prepare(&lab, "{}")), None).code, Some(0));
    let export = run(&["export", "--workspace", &ws], None);
    assert_eq!(export.code, Some(0), "{}", export.stderr);
    // The first line with its `kind` given twice: a reader keeping the
    // first would see one entry, a reader keeping the last another.
    let line = export.stdout.lines().next().unwrap();
    let edited = line.replacen("{", r#"{"kind":"noted","#, 1);
    let kept = lab.path().join("kept.jsonl");
    std::fs::write(&kept, format!("{edited}\n")).unwrap();
    let kept = kept.display().to_string();
    assert_duplicate_refused(
        &lab,
        &["verify", "--workspace", &ws, "--against", &kept],
        None,
        "kind",
    );
    let out = run(
        &["verify", "--workspace", &ws, "--against", &kept, "--json"],
        None,
    );
    assert_json_error(&out, 2);
}

#[test]
fn a_duplicate_key_in_the_expected_results_of_check_is_refused() {
    let lab = Lab::new();
    let expected = lab.path().join("expected.json");
    std::fs::write(&expected, r#"{"scenarios":{},"scenarios":{}}"#).unwrap();
    let expected = expected.display().to_string();
    let out = run(&["--check", &expected], None);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("has the key \"scenarios\" twice"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_duplicate_key_in_a_request_to_the_built_in_adapter_is_a_bad_request() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let request = concat!(
        r#"{"recon_adapter":1,"op":{"op_id":"op-1","action_kind":"pay","#,
        r#""payload":{"amount":1,"amount":1000},"compensates_effect_id":null}}"#,
        "\n"
    );
    let before = dump(lab.path());
    let out = run(
        &["receiver", "adapter", "--workspace", &ws, "apply"],
        Some(request.as_bytes()),
    );
    let answer = out.json();
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["error"]["code"], "bad_request", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("has the key \"amount\" twice")),
        "{answer}"
    );
    assert_eq!(dump(lab.path()), before, "the ledger wrote an effect");
}

#[test]
fn an_effect_id_that_breaks_the_op_id_rules_is_a_usage_error() {
    let lab = Lab::new();
    let ws = lab.path_str();
    for (effect, shown) in [
        ("fx 000001", "a space (U+0020)"),
        ("fx-\u{1b}[1m01", "\\x1b"),
        ("fx-\u{202e}100000", "\\u{202e}"),
        ("", "effect id is empty"),
    ] {
        let before = dump(lab.path());
        let out = run(
            &[
                "approve-compensation",
                "--workspace",
                &ws,
                "op-1",
                "--effect",
                effect,
                "--approver",
                "lee",
                "--expected-version",
                "3",
                "--compensation-op",
                "op-1-undo",
                "--action",
                "refund",
                "--payload",
                "{}",
            ],
            None,
        );
        assert_eq!(out.code, Some(2), "{effect:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("effect id") && out.stderr.contains(shown),
            "{effect:?}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains(['\u{1b}', '\u{202e}']),
            "{}",
            out.stderr
        );
        assert_eq!(dump(lab.path()), before);
    }
}

#[test]
fn characters_above_the_bmp_survive_json_output() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let payload = supplementary_payload();
    let mut args = prepare(&lab, &payload.to_string());
    args.push("--json".into());
    let prepared = run(&strs(&args), None);
    assert_eq!(prepared.code, Some(0), "{}", prepared.stderr);
    let shown = run(&["show", "--workspace", &ws, "op-1", "--json"], None);
    let listed = run(&["ops", "--workspace", &ws, "--json"], None);
    for (what, out, read_back) in [
        ("prepare", &prepared, prepared.json()["payload"].clone()),
        ("show", &shown, shown.json()["operation"]["payload"].clone()),
        ("ops", &listed, listed.json()[0]["payload"].clone()),
    ] {
        assert_eq!(read_back, payload, "{what}: {}", out.stdout);
        // Invisible characters stay escaped for the terminal, as the
        // surrogate pair a JSON parser reads as one character.
        assert!(
            out.stdout.contains(r"a\udb40\udd00b"),
            "{what}: {}",
            out.stdout
        );
        assert!(!out.stdout.contains('\u{E0100}'), "{what}: {}", out.stdout);
    }
}

#[test]
fn an_export_with_supplementary_characters_verifies_against_itself() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let payload = supplementary_payload();
    assert_eq!(
        run(&strs(&prepare(&lab, &payload.to_string())), None).code,
        Some(0)
    );
    let dispatched = run(&["dispatch", "--workspace", &ws, "op-1", "--json"], None);
    assert_eq!(
        dispatched.json()["outcome"],
        "receipt",
        "{}",
        dispatched.stderr
    );
    let (export, out) = export_then_verify_against(lab.path(), &["--json"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(
        report["export"]["first_difference"],
        Value::Null,
        "{report}"
    );
    assert!(report["export"]["rows"].as_u64().unwrap() >= 3, "{report}");
    // Written for the terminal: the invisible characters as surrogate pairs.
    assert!(
        export.stdout.contains(r"a\udb40\udd00b"),
        "{}",
        export.stdout
    );
    assert!(!export.stdout.contains('\u{E0100}'));
}
