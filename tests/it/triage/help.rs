//! Claim 6: `export --json` is accepted, and each triage command's
//! `--help` lists its own options and only the exit codes it can return
//! (`cli/flows.rs` checks the exit codes of every command).

use crate::cli::Shell;
use crate::support::run;

/// The exit codes a help text lists.
fn exit_codes(help: &str) -> Vec<String> {
    help.split("Exit codes:")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next())
        .filter(|code| code.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

/// A command's words, options its help must list, and its exit codes.
type HelpCase = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

fn cases() -> Vec<HelpCase> {
    vec![
        (
            &["note"][..],
            &["--by <NAME>", "--text <TEXT>", "--json", "--workspace"][..],
            &["0", "2", "3", "4"][..],
        ),
        (
            &["escalate"],
            &["--by <NAME>", "--reason <TEXT>", "--json"],
            &["0", "2", "3", "4"],
        ),
        (
            &["deescalate"],
            &["--by <NAME>", "--reason <TEXT>", "--json"],
            &["0", "2", "3", "4"],
        ),
        (
            &["observe"],
            &[
                "--by <NAME>",
                "--state",
                "--older-than <DURATION>",
                "--json",
                "[ID]...",
            ],
            &["0", "2", "3", "4", "130"],
        ),
        (
            &["ops"],
            &[
                "--state",
                "--verdict <V|never>",
                "--escalated <yes|no>",
                "--older-than <DURATION>",
                "--sort",
                "--limit <N>",
                "--after <CURSOR>",
                "--json",
            ],
            &["0", "2", "3", "4"],
        ),
        (
            &["snapshot"],
            &["--by <NAME>", "--close", "--authorized-by <NAME>", "--json"],
            &["0", "2", "3", "4"],
        ),
        (
            &["export"],
            &["--output <PATH>", "--json"],
            &["0", "1", "2", "3", "4"],
        ),
    ]
}

#[test]
fn each_triage_commands_help_lists_its_options_and_only_its_exit_codes() {
    for (command, options, exits) in cases() {
        let mut args = command.to_vec();
        args.push("--help");
        let out = run(&args, None);
        assert_eq!(out.code, Some(0), "{args:?}");
        for option in options {
            assert!(
                out.stdout.contains(option),
                "{args:?} lacks {option}: {}",
                out.stdout
            );
        }
        assert_eq!(exit_codes(&out.stdout), exits, "{args:?}: {}", out.stdout);
        // Not the global table: no other command's codes or environment.
        for foreign in ["NO_COLOR", "--check", "receivers check", "23 "] {
            assert!(!out.stdout.contains(foreign), "{args:?} shows {foreign:?}");
        }
    }
    // The refusals each can raise are named.
    let escalate = run(&["escalate", "--help"], None).stdout;
    for code in [
        "not_unknown",
        "already_escalated",
        "unknown_operation",
        "empty_reviewer",
    ] {
        assert!(escalate.contains(code), "escalate --help lacks {code}");
    }
    let ops = run(&["ops", "--help"], None).stdout;
    assert!(!ops.contains("refused"), "ops refuses nothing: {ops}");
}

#[test]
fn export_accepts_json_and_prints_the_same_lines() {
    let sh = Shell::demo(0);
    let plain = sh.ok(&["export"]);
    let json = sh.ok(&["export", "--json"]);
    assert_eq!(plain.stdout, json.stdout);
    assert!(json.stdout.lines().count() > 10);
    for line in json.stdout.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(entry["hash"].is_string(), "{line}");
    }
}
