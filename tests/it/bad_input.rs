//! Malformed input at the command line and at the library: each case has its
//! expected exit code (or refusal) and message, and leaves both databases
//! exactly as they were.

use crate::support::{dump, run, Lab};

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn a_payload_at_the_nesting_limit_goes_all_the_way_and_one_level_more_is_a_usage_error() {
    let lab = Lab::new();
    let ws = lab.path_str();
    let limit = recon::cli::MAX_PAYLOAD_DEPTH;
    let deep = nested(limit);
    let prepared = run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "deep",
            "--action",
            "pay",
            "--payload",
            &deep,
        ],
        None,
    );
    assert_eq!(prepared.code, Some(0), "{}", prepared.stderr);
    let dispatched = run(&["dispatch", "--workspace", &ws, "deep", "--json"], None);
    assert_eq!(
        dispatched.json()["outcome"],
        "receipt",
        "{}",
        dispatched.stderr
    );
    let shown = run(&["show", "--workspace", &ws, "deep", "--json"], None);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert_eq!(shown.json()["evidence"].as_array().map(Vec::len), Some(1));

    let before = dump(lab.path());
    let deeper = nested(limit + 1);
    let refused = run(
        &[
            "prepare",
            "--workspace",
            &ws,
            "--op",
            "deeper",
            "--action",
            "pay",
            "--payload",
            &deeper,
        ],
        None,
    );
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("nested deeper than"),
        "{}",
        refused.stderr
    );
    assert_eq!(dump(lab.path()), before);
}
