//! `recon --check` and `recon experiment`, through the built binary.

use crate::support::run;
use serde_json::Value;

#[test]
fn check_passes_against_the_checked_in_results() {
    let out = run(&["--check"], None);
    assert_eq!(
        out.code,
        Some(0),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    assert!(out.stdout.contains("check passed"), "{}", out.stdout);
}

#[test]
fn a_tampered_fact_makes_check_exit_1_and_name_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected: Value = serde_json::from_str(recon::experiment::EXPECTED_RESULTS).unwrap();
    expected["scenarios"]["receipt_lost_after_commit"]["effects"] = Value::from(2);
    let path = dir.path().join("tampered.json");
    std::fs::write(&path, serde_json::to_string_pretty(&expected).unwrap()).unwrap();
    let out = run(&["--check", path.to_str().unwrap()], None);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("$.scenarios.receipt_lost_after_commit.effects: expected 2, actual 1"),
        "{}",
        out.stdout
    );
}

#[test]
fn every_observed_fact_is_compared() {
    // Tamper each leaf in turn (on the parsed document, not the binary) and
    // make sure the comparison reports exactly that path.
    let actual: Value = serde_json::from_str(recon::experiment::EXPECTED_RESULTS).unwrap();
    let mut leaves = Vec::new();
    fn collect(path: String, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, v)| collect(format!("{path}/{k}"), v, out)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, v)| collect(format!("{path}/{i}"), v, out)),
            _ => out.push(path),
        }
    }
    collect(String::new(), &actual, &mut leaves);
    assert!(leaves.len() > 100, "{} leaves", leaves.len());
    for pointer in leaves {
        let mut tampered = actual.clone();
        *tampered.pointer_mut(&pointer).unwrap() = Value::String("tampered".into());
        let diffs = recon::experiment::compare(&tampered, &actual);
        assert_eq!(diffs.len(), 1, "{pointer}");
    }
}

#[test]
fn a_missing_expected_file_is_exit_2() {
    let out = run(&["--check", "/nonexistent/results.json"], None);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("cannot read /nonexistent/results.json"),
        "{}",
        out.stderr
    );
}

#[test]
fn check_writes_the_reproduced_json_with_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reproduced.json");
    let out = run(&["--check", "--output", path.to_str().unwrap()], None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(written, recon::experiment::EXPECTED_RESULTS);
}

#[test]
fn two_experiment_runs_are_byte_identical() {
    let first = run(&["experiment"], None);
    let second = run(&["experiment"], None);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(first.stdout, second.stdout);
    assert!(!first.stdout.contains("/tmp"), "no paths in results");
}
