//! `recon --check` and `recon experiment`, through the built binary.
//!
//! The experiment runs three times per test process, in runs the tests
//! share (see `support`): one `recon experiment`, one passing `recon
//! --check --output` and one `recon --check` against tampered results. The
//! two passing runs, separate processes, also prove that two runs are
//! identical.

use crate::support::{check_run, experiment_run, run, tampered_check_run};
use serde_json::Value;

#[test]
fn check_passes_against_the_checked_in_results() {
    let out = &check_run().run;
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
    // The shared tampered results set these effects to 7 (they are 1).
    let out = tampered_check_run();
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("$.scenarios.receipt_lost_after_commit.effects: expected 7, actual 1"),
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
    let check = check_run();
    assert_eq!(check.run.code, Some(0), "{}", check.run.stderr);
    assert_eq!(check.written, recon::experiment::EXPECTED_RESULTS);
}

#[test]
fn two_experiment_runs_are_byte_identical() {
    // `recon experiment` and `recon --check --output` are two processes,
    // each running the experiment from scratch and writing its results.
    let first = experiment_run();
    let second = check_run();
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(second.run.code, Some(0), "{}", second.run.stderr);
    assert_eq!(first.stdout, second.written);
    assert!(!first.stdout.contains("/tmp"), "no paths in results");
}
