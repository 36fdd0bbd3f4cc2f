//! Claim 4: the queue's queries through `recon ops`: `--verdict` (and
//! `never`), `--escalated`, `--older-than` on `updated_at`, `--sort age`,
//! each row's `cursor`, and paging with `--after` under each order.

use crate::cli::{assert_json_error, Shell};
use crate::stores::{on_both_stores, Site, Store};
use recon::clock::{Clock, FixedClock, SystemClock};
use recon::dispatch::DispatchOptions;
use recon::domain::Timestamp;
use recon::receiver::Fault;
use serde_json::{json, Value};
use std::sync::Arc;

fn fault(fault: Option<Fault>) -> DispatchOptions {
    DispatchOptions {
        fault,
        wait_permit: false,
    }
}

/// A queue on `store` made on a hand-moved clock, then listed by the
/// binary on the system clock:
/// - `a1`, `a2`, `a3`: prepared at one instant in 2020 (a tie);
/// - `b1`, `b2`: unknown since a day later; `b1` closed, which is
///   observed (terminal absence), `b2` never observed and escalated;
/// - `c1`: unknown since now, observed (unique exact match);
/// - `d1`: confirmed now by its receipt, never observed.
fn queue(store: Store) -> Shell {
    let at = |text| Timestamp::parse(text).unwrap();
    let clock = Arc::new(FixedClock::at(at("2020-01-01T00:00:00.000Z")));
    let mut site = Site::new(store);
    site.ws = site.ws.with_clock(clock.clone());
    for op in ["b2", "a3", "c1", "a1", "b1", "a2"] {
        site.ws.prepare(op, "pay", &json!({"op": op})).unwrap();
    }
    clock.set(at("2020-01-02T00:00:00.000Z"));
    for op in ["b1", "b2"] {
        site.dispatch(op, fault(Some(Fault::CrashBeforeCommit)))
            .unwrap();
    }
    site.ws.snapshot_by("b1", Some("ann"), None).unwrap();
    site.ws.escalate("b2", "ann", "two charges?").unwrap();
    clock.set(SystemClock.now());
    site.dispatch("c1", fault(Some(Fault::CrashAfterCommit)))
        .unwrap();
    site.ws.snapshot_by("c1", None, Some("ann")).unwrap();
    site.ws.prepare("d1", "pay", &json!({"op": "d1"})).unwrap();
    site.dispatch("d1", fault(None)).unwrap();
    Shell::at(site)
}

fn ids(rows: &Value) -> Vec<String> {
    rows.as_array()
        .unwrap_or_else(|| panic!("not an array: {rows}"))
        .iter()
        .map(|r| r["op_id"].as_str().unwrap().to_string())
        .collect()
}

/// `recon ops --json` with these flags: the op ids in order.
fn listed(sh: &Shell, flags: &[&str]) -> Vec<String> {
    let mut args = vec!["ops"];
    args.extend(flags);
    ids(&sh.json(&args))
}

on_both_stores!(ops_filters_on_the_latest_verdict_escalation_and_age);
fn ops_filters_on_the_latest_verdict_escalation_and_age(store: Store) {
    let sh = queue(store);
    for (flags, expected) in [
        (&["--verdict", "terminal_absence"][..], &["b1"][..]),
        (&["--verdict", "exact_match_existence_only"], &["c1"]),
        (&["--verdict", "unique_exact_match"], &[]),
        (&["--verdict", "duplicate_matches"], &[]),
        (&["--verdict", "never"], &["a1", "a2", "a3", "b2", "d1"]),
        (&["--escalated", "yes"], &["b2"]),
        (
            &["--escalated", "no"],
            &["a1", "a2", "a3", "b1", "c1", "d1"],
        ),
        (&["--older-than", "1d"], &["a1", "a2", "a3", "b1", "b2"]),
        (&["--older-than", "90s"], &["a1", "a2", "a3", "b1", "b2"]),
        (&["--older-than", "3650d"], &[]),
        // Combined with each other and with --state.
        (&["--state", "unknown", "--verdict", "never"], &["b2"]),
        (&["--state", "unknown", "--escalated", "no"], &["b1", "c1"]),
        (
            &["--state", "prepared", "--older-than", "2h"],
            &["a1", "a2", "a3"],
        ),
        (&["--state", "confirmed", "--verdict", "never"], &["d1"]),
        (
            &[
                "--state",
                "unknown",
                "--older-than",
                "15m",
                "--escalated",
                "yes",
            ],
            &["b2"],
        ),
        (
            &["--verdict", "never", "--escalated", "no", "--sort", "age"],
            &["a1", "a2", "a3", "d1"],
        ),
    ] {
        assert_eq!(listed(&sh, flags), expected, "ops {flags:?}");
    }
}

on_both_stores!(sort_age_orders_by_updated_at_oldest_first_then_op_id);
fn sort_age_orders_by_updated_at_oldest_first_then_op_id(store: Store) {
    let sh = queue(store);
    let rows = sh.json(&["ops", "--sort", "age"]);
    assert_eq!(ids(&rows), ["a1", "a2", "a3", "b1", "b2", "c1", "d1"]);
    let keys: Vec<(String, String)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["updated_at"].as_str().unwrap().to_string(),
                r["op_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    // The default order is by op id.
    assert_eq!(listed(&sh, &[]), ["a1", "a2", "a3", "b1", "b2", "c1", "d1"]);
    assert_eq!(
        listed(&sh, &["--sort", "op_id", "--state", "unknown"]),
        ["b1", "b2", "c1"]
    );
}

on_both_stores!(every_row_of_ops_json_carries_a_cursor);
fn every_row_of_ops_json_carries_a_cursor(store: Store) {
    let sh = queue(store);
    for sort in ["op_id", "age"] {
        let rows = sh.json(&["ops", "--sort", sort]);
        for row in rows.as_array().unwrap() {
            let cursor = row["cursor"].as_str().unwrap_or_else(|| panic!("{row}"));
            assert!(!cursor.is_empty());
        }
    }
}

/// Pages through `ops --sort SORT FLAGS --limit LIMIT` with `--after`,
/// returning every row's op id in order and the number of pages.
fn paged(sh: &Shell, sort: &str, flags: &[&str], limit: usize) -> (Vec<String>, usize) {
    let limit = limit.to_string();
    let (mut all, mut pages, mut after) = (Vec::new(), 0, None::<String>);
    loop {
        let mut args = vec!["ops", "--sort", sort, "--limit", &limit];
        args.extend(flags);
        if let Some(cursor) = &after {
            args.extend(["--after", cursor]);
        }
        let page = sh.json(&args);
        let rows = page.as_array().unwrap();
        pages += 1;
        assert!(pages < 50, "paging does not end");
        let Some(last) = rows.last() else {
            return (all, pages);
        };
        all.extend(ids(&page));
        after = Some(last["cursor"].as_str().unwrap().to_string());
    }
}

on_both_stores!(paging_with_after_gives_every_row_once_in_order_under_each_sort);
fn paging_with_after_gives_every_row_once_in_order_under_each_sort(store: Store) {
    let sh = queue(store);
    for sort in ["op_id", "age"] {
        for flags in [&[][..], &["--state", "unknown"], &["--verdict", "never"]] {
            let mut args = vec!["ops", "--sort", sort];
            args.extend(flags);
            let whole = ids(&sh.json(&args));
            assert!(!whole.is_empty());
            for limit in [1, 2, 3, 100] {
                let (rows, pages) = paged(&sh, sort, flags, limit);
                assert_eq!(rows, whole, "--sort {sort} {flags:?} --limit {limit}");
                assert_eq!(pages, whole.len().div_ceil(limit) + 1, "{sort} {limit}");
            }
        }
    }
}

on_both_stores!(an_op_id_is_a_cursor_of_sort_op_id);
fn an_op_id_is_a_cursor_of_sort_op_id(store: Store) {
    let sh = queue(store);
    assert_eq!(listed(&sh, &["--after", "a3"]), ["b1", "b2", "c1", "d1"]);
    assert_eq!(listed(&sh, &["--after", "b", "--limit", "2"]), ["b1", "b2"]);
    let cursor = sh.json(&["ops", "--limit", "1"])[0]["cursor"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(listed(&sh, &["--after", &cursor, "--limit", "1"]), ["a2"]);
}

on_both_stores!(a_malformed_cursor_or_one_of_the_other_sort_is_a_usage_error);
fn a_malformed_cursor_or_one_of_the_other_sort_is_a_usage_error(store: Store) {
    let sh = queue(store);
    let by_age = sh.json(&["ops", "--sort", "age", "--limit", "1"])[0]["cursor"]
        .as_str()
        .unwrap()
        .to_string();
    let by_id = sh.json(&["ops", "--limit", "1"])[0]["cursor"]
        .as_str()
        .unwrap()
        .to_string();
    let before = sh.dump();
    for (sort, cursor) in [
        ("op_id", by_age.as_str()),
        ("age", by_id.as_str()),
        ("age", "a1"),
        ("age", "age yesterday a1"),
        ("age", "age 2020-01-01T00:00:00Z a1"),
        ("age", "age 2020-01-01T00:00:00.000Z"),
        ("age", ""),
        ("op_id", ""),
        ("op_id", "op_id "),
        ("op_id", "a b c"),
    ] {
        for json in [false, true] {
            let mut args = vec!["ops", "--sort", sort, "--after", cursor];
            if json {
                args.push("--json");
            }
            let out = sh.run(&args);
            assert_eq!(out.code, Some(2), "{args:?}: {}{}", out.stdout, out.stderr);
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
            assert!(out.stderr.contains("--after"), "{}", out.stderr);
            if json {
                assert_json_error(&out, 2);
            } else {
                assert!(out.stdout.is_empty());
            }
        }
    }
    assert_eq!(sh.dump(), before);
}

on_both_stores!(malformed_queue_flags_are_usage_errors);
fn malformed_queue_flags_are_usage_errors(store: Store) {
    let sh = queue(store);
    for flags in [
        &["--verdict", "maybe"][..],
        &["--escalated", "perhaps"],
        &["--older-than", "1w"],
        &["--older-than", "-1h"],
        &["--older-than", "h"],
        &["--sort", "updated_at"],
    ] {
        let mut args = vec!["ops"];
        args.extend(flags);
        args.push("--json");
        let out = sh.run(&args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_json_error(&out, 2);
    }
}

on_both_stores!(state_all_lists_every_state_as_no_state_does);
fn state_all_lists_every_state_as_no_state_does(store: Store) {
    let sh = queue(store);
    let every = listed(&sh, &[]);
    assert_eq!(every.len(), 7, "{every:?}");
    assert_eq!(listed(&sh, &["--state", "all"]), every);
    assert_eq!(
        listed(&sh, &["--state", "all", "--sort", "age"]),
        listed(&sh, &["--sort", "age"])
    );
    assert_eq!(listed(&sh, &["--state", "prepared"]), ["a1", "a2", "a3"]);
}

on_both_stores!(ops_text_columns_line_up_on_the_page_as_a_terminal_shows_them);
fn ops_text_columns_line_up_on_the_page_as_a_terminal_shows_them(store: Store) {
    use unicode_width::UnicodeWidthStr;
    let sh = Shell::on(store);
    // A wide character, an id longer than any fixed column, and action
    // kinds of different lengths.
    for (op, action) in [
        ("op-1", "pay"),
        ("op-\u{6ce8}\u{6587}-2", "send_email"),
        ("op-with-an-id-much-longer-than-twenty-four-characters", "x"),
    ] {
        sh.ok(&["prepare", "--op", op, "--action", action, "--payload", "{}"]);
    }
    let text = sh.ok(&["ops"]).stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    // Where a column begins, in terminal cells: the version's, and the
    // last column's (nothing was observed).
    let column = |line: &str, marker: &str| {
        let at = line
            .find(marker)
            .unwrap_or_else(|| panic!("{marker} in {line}"));
        line[..at].width()
    };
    for marker in [" v1 ", " never observed"] {
        let starts: Vec<usize> = lines.iter().map(|l| column(l, marker)).collect();
        assert!(
            starts.windows(2).all(|w| w[0] == w[1]),
            "{marker:?} at {starts:?}:\n{text}"
        );
    }
}
