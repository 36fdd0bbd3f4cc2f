//! `recon metrics` (SPEC 15): every family there with its HELP and TYPE,
//! read by an independent parser (Python's `prometheus_client`, in a
//! virtual environment the tests make), and every number equal to what
//! the other commands show (`ops --json`, `show --json`, `receivers list
//! --json`, `checkpoint --json`), on a demo workspace and on both stores;
//! in team mode a reader may run it; `--output` is never left half
//! written, even when the process dies in the middle of writing it.

use crate::stores::{on_both_stores, Site, Store};
use crate::support::{copy_demo, require_python_venv, run, run_with_env, Run};
use recon::domain::Timestamp;
use recon::faults::{CRASH_EXIT_CODE, CRASH_POINT_ENV};
use recon::receiver::Fault;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The families of SPEC 15, by the name their samples carry, and type.
const FAMILIES: [(&str, &str); 8] = [
    ("recon_operations", "gauge"),
    ("recon_unknown_operations", "gauge"),
    ("recon_oldest_unknown_age_seconds", "gauge"),
    ("recon_contradicted_operations", "gauge"),
    ("recon_surplus_effects", "gauge"),
    ("recon_failed_calls_total", "counter"),
    ("recon_decisions_total", "counter"),
    ("recon_journal_entries", "gauge"),
];

const AGE: &str = "recon_oldest_unknown_age_seconds";

/// Python's parser over the exposition on stdin, each family as JSON.
const PARSE: &str = "
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = []
for f in text_string_to_metric_families(sys.stdin.read()):
    families.append({'name': f.name, 'type': f.type, 'help': f.documentation,
        'samples': [{'name': s.name, 'labels': s.labels, 'value': s.value} for s in f.samples]})
print(json.dumps(families))
";

/// One series: the sample's name and its labels.
type Key = (String, BTreeMap<String, String>);

fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    (name.to_string(), labels.collect())
}

/// The exposition as Python's parser reads it: each family's samples'
/// name, type and help, and every series' value.
struct Parsed {
    families: Vec<(BTreeSet<String>, String, String)>,
    series: BTreeMap<Key, f64>,
}

fn parse(python: &Path, text: &str) -> Parsed {
    let mut child = Command::new(python)
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(text.as_bytes()).expect("write the text");
    drop(stdin);
    let out = child.wait_with_output().expect("python's answer");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the parser refused it: {said}\n{text}"
    );
    let families: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut parsed = Parsed {
        families: Vec::new(),
        series: BTreeMap::new(),
    };
    for family in families {
        let mut names = BTreeSet::new();
        for sample in family["samples"].as_array().expect("samples") {
            let name = sample["name"].as_str().expect("a name").to_string();
            let labels = (sample["labels"].as_object().expect("labels").iter())
                .map(|(k, v)| (k.clone(), v.as_str().expect("a label").to_string()))
                .collect();
            let value = sample["value"].as_f64().expect("a value");
            assert!(parsed
                .series
                .insert((name.clone(), labels), value)
                .is_none());
            names.insert(name);
        }
        let text = |field: &str| family[field].as_str().expect(field).to_string();
        parsed.families.push((names, text("type"), text("help")));
    }
    parsed
}

/// Every family of SPEC 15 is there once, with its type and a help text,
/// and no other.
#[track_caller]
fn assert_every_family(parsed: &Parsed) {
    let found: Vec<(String, String)> = (parsed.families.iter())
        .map(|(names, kind, help)| {
            assert!(!help.is_empty(), "{names:?} has no help");
            assert_eq!(names.len(), 1, "one sample name per family: {names:?}");
            (names.first().cloned().unwrap_or_default(), kind.clone())
        })
        .collect();
    let wanted: Vec<(String, String)> = (FAMILIES.iter())
        .map(|(name, kind)| (name.to_string(), kind.to_string()))
        .collect();
    assert_eq!(found, wanted);
}

/// What the other commands show, as the series `metrics` should print
/// (the ages aside); `run` runs a command against the outbox.
fn shown(run: &dyn Fn(&[&str]) -> Run) -> BTreeMap<Key, f64> {
    let json_of = |words: &[&str]| {
        let out = run(words);
        assert_eq!(out.code, Some(0), "{words:?}: {}", out.stderr);
        out.json()
    };
    let mut series = BTreeMap::new();
    let mut add = |key: Key, n: f64| *series.entry(key).or_insert(0.0) += n;
    let receivers = json_of(&["receivers", "list", "--json"]);
    let ops = json_of(&["ops", "--state", "all", "--json"]);
    let mut names: BTreeSet<String> = (receivers.as_array().expect("receivers").iter())
        .map(|r| r["name"].as_str().expect("name").to_string())
        .collect();
    let ops = ops.as_array().expect("ops");
    names.extend(
        ops.iter()
            .map(|op| op["receiver"].as_str().expect("receiver").to_string()),
    );
    for name in &names {
        for state in ["prepared", "unknown", "confirmed", "not_applied"] {
            add(
                key("recon_operations", &[("state", state), ("receiver", name)]),
                0.0,
            );
        }
    }
    for decision in ["confirmed", "not_applied"] {
        for source in ["receipt", "review", "policy"] {
            let labels = [("decision", decision), ("source", source)];
            add(key("recon_decisions_total", &labels), 0.0);
        }
    }
    let mut contradicted = 0.0;
    let mut surplus = 0.0;
    for op in ops {
        let text = |v: &Value| v.as_str().expect("text").to_string();
        let (id, state, receiver) = (
            text(&op["op_id"]),
            text(&op["state"]),
            text(&op["receiver"]),
        );
        let labels = [("state", state.as_str()), ("receiver", receiver.as_str())];
        add(key("recon_operations", &labels), 1.0);
        if state == "unknown" {
            let verdict = op["latest_observation"]["verdict"]
                .as_str()
                .unwrap_or("never");
            let escalated = if op["escalated"].is_null() {
                "false"
            } else {
                "true"
            };
            let labels = [
                ("verdict", verdict),
                ("receiver", &receiver),
                ("escalated", escalated),
            ];
            add(key("recon_unknown_operations", &labels), 1.0);
        }
        if !op["contradicted"].is_null() {
            contradicted += 1.0;
        }
        let detail = json_of(&["show", &id, "--json"]);
        // Surplus effects of a kept duplicate no approval compensates yet.
        for effect in detail["surplus"].as_array().into_iter().flatten() {
            if effect["compensation_op_id"].is_null() {
                surplus += 1.0;
            }
        }
        for evidence in detail["evidence"].as_array().expect("evidence") {
            let labels = [
                ("decision", evidence["decision"].as_str().expect("decision")),
                ("source", evidence["source"].as_str().expect("source")),
            ];
            add(key("recon_decisions_total", &labels), 1.0);
        }
        for failure in detail["failures"].as_array().expect("failures") {
            let labels = [
                ("receiver", failure["receiver"].as_str().expect("receiver")),
                ("verb", failure["verb"].as_str().expect("verb")),
                ("kind", failure["kind"].as_str().expect("kind")),
            ];
            add(key("recon_failed_calls_total", &labels), 1.0);
        }
    }
    add(key("recon_contradicted_operations", &[]), contradicted);
    add(key("recon_surplus_effects", &[]), surplus);
    let length = json_of(&["checkpoint", "--json"])["length"].as_f64();
    add(key("recon_journal_entries", &[]), length.expect("length"));
    series
}

/// The oldest `updated_at` of each receiver's unknown operations.
fn oldest_unknown(run: &dyn Fn(&[&str]) -> Run) -> BTreeMap<String, i64> {
    let ops = run(&["ops", "--state", "unknown", "--json"]).json();
    let mut oldest = BTreeMap::new();
    for op in ops.as_array().expect("ops") {
        let at = op["updated_at"].as_str().expect("updated_at");
        let at = Timestamp::parse(at).expect("a time").millis();
        let receiver = op["receiver"].as_str().expect("receiver").to_string();
        let kept = oldest.entry(receiver).or_insert(at);
        *kept = (*kept).min(at);
    }
    oldest
}

fn now_millis() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.expect("after 1970").as_millis() as i64
}

/// `metrics` against the outbox `run` reaches: every family, every number
/// as the other commands show it, each age between the times before and
/// after the run.
fn check_against_the_other_commands(test: &str, run: &dyn Fn(&[&str]) -> Run) {
    let Some(python) = require_python_venv(test, &["prometheus_client"]) else {
        return;
    };
    let expected = shown(run);
    let oldest = oldest_unknown(run);
    let before = now_millis();
    let out = run(&["metrics"]);
    let after = now_millis();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let parsed = parse(&python, &out.stdout);
    assert_every_family(&parsed);
    let (ages, counts): (BTreeMap<Key, f64>, BTreeMap<Key, f64>) =
        (parsed.series.into_iter()).partition(|((name, _), _)| name == AGE);
    assert_eq!(counts, expected);
    assert_eq!(json_series(run), counts, "--json gives the text's series");
    for ((_, labels), age) in ages {
        let receiver = &labels["receiver"];
        let Some(at) = oldest.get(receiver) else {
            assert_eq!(age, 0.0, "{receiver} has no unknown operation");
            continue;
        };
        let (low, high) = ((before - at) as f64 / 1000.0, (after - at) as f64 / 1000.0);
        assert!(
            (low..=high).contains(&age),
            "{receiver}: {age} not in {low}..={high}"
        );
    }
}

/// `metrics --json`'s series but the ages, keyed as the text's are.
fn json_series(run: &dyn Fn(&[&str]) -> Run) -> BTreeMap<Key, f64> {
    let out = run(&["metrics", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let mut series = BTreeMap::new();
    for family in out.json().as_array().expect("families") {
        let name = family["name"].as_str().expect("a name");
        for sample in family["samples"].as_array().expect("samples") {
            let labels = (sample["labels"].as_object().expect("labels").iter())
                .map(|(k, v)| (k.clone(), v.as_str().expect("a label").to_string()))
                .collect();
            let value = sample["value"].as_f64().expect("a value");
            if name != AGE {
                series.insert((name.to_string(), labels), value);
            }
        }
    }
    series
}

#[test]
fn metrics_of_a_demo_workspace_equal_what_ops_show_and_checkpoint_count() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_demo(0, dir.path());
    let path = dir.path().display().to_string();
    let run = |words: &[&str]| {
        let split = if words.first() == Some(&"receivers") {
            2
        } else {
            1
        };
        let (head, tail) = words.split_at(split);
        let mut all = head.to_vec();
        all.extend(["--workspace", path.as_str()]);
        all.extend(tail);
        crate::support::run(&all, None)
    };
    check_against_the_other_commands(
        "metrics_of_a_demo_workspace_equal_what_ops_show_and_checkpoint_count",
        &run,
    );
}

const ACTION: &str = "post_letter";

/// An outbox with an operation in every state and each kind of count:
/// a receipt, a lost one observed, one that never arrived escalated, a
/// decision by a person, failed calls.
fn varied(site: &mut Site) {
    let payload = |op: &str| json!({"to": "ann", "text": op});
    site.ws
        .prepare("m-prep", ACTION, &payload("m-prep"))
        .expect("prepare");
    site.dispatched("m-rcpt", ACTION, &payload("m-rcpt"), None);
    site.dispatched(
        "m-lost",
        ACTION,
        &payload("m-lost"),
        Some(Fault::CrashAfterCommit),
    );
    site.dispatched(
        "m-gone",
        ACTION,
        &payload("m-gone"),
        Some(Fault::CrashBeforeCommit),
    );
    site.dispatched(
        "m-kept",
        ACTION,
        &payload("m-kept"),
        Some(Fault::CrashAfterCommit),
    );
    let acts: [&[&str]; 3] = [
        &[
            "escalate",
            "m-gone",
            "--by",
            "ann",
            "--reason",
            "never arrived",
        ],
        &["observe", "m-lost", "--by", "ann"],
        &[
            "reconcile",
            "m-kept",
            "--reviewer",
            "rita",
            "--decision",
            "confirmed",
            "--expected-version",
            "2",
        ],
    ];
    for words in acts {
        let out = site.run(words, None);
        assert_eq!(out.code, Some(0), "{words:?}: {}", out.stderr);
    }
}

fn metrics_equal_what_the_other_commands_show(store: Store) {
    let mut site = Site::new(store);
    varied(&mut site);
    let run = |words: &[&str]| site.run(words, None);
    check_against_the_other_commands(&format!("metrics::{store:?}"), &run);
}
on_both_stores!(metrics_equal_what_the_other_commands_show);

/// The exposition without its age lines, which move with the clock.
fn without_ages(text: &str) -> String {
    (text.lines())
        .filter(|line| !line.starts_with(AGE))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn in_team_mode_a_login_with_only_the_reader_role_reads_the_metrics() {
    let test = "in_team_mode_a_login_with_only_the_reader_role_reads_the_metrics";
    if !Store::Postgres.available(test) {
        return;
    }
    let mut site = Site::new(Store::Postgres);
    varied(&mut site);
    let pg = crate::real_receivers::servers::postgres()
        .as_ref()
        .expect("the cluster");
    let url = site.args()[1].clone();
    let reader = crate::pg_store::roles::login(pg, &url, "metrics_reader", &["recon_reader"]);
    let owner = site.run(&["metrics"], None);
    let read = run(&["metrics", "--database", &reader], None);
    assert_eq!(read.code, Some(0), "{}", read.stderr);
    assert_eq!(without_ages(&read.stdout), without_ages(&owner.stdout));
}

#[test]
fn metrics_output_is_never_left_half_written_when_the_process_dies_while_writing() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_demo(0, dir.path());
    let ws = dir.path().display().to_string();
    let textfiles = tempfile::tempdir().expect("the collector's directory");
    let target = textfiles.path().join("recon.prom");
    let target_text = target.display().to_string();
    let words = ["metrics", "--workspace", &ws, "--output", &target_text];
    let crash = [(CRASH_POINT_ENV, "metrics.mid_write")];
    // Killed on its first write: no file of that name appears.
    let died = run_with_env(&words, None, &crash);
    assert_eq!(died.code, Some(CRASH_EXIT_CODE), "{}", died.stderr);
    assert!(!target.exists());
    let whole = run(&words, None);
    assert_eq!(
        (whole.code, whole.stdout.as_str()),
        (Some(0), ""),
        "{}",
        whole.stderr
    );
    let written = std::fs::read_to_string(&target).expect("the file");
    assert!(written.ends_with("recon_journal_entries 61\n"), "{written}");
    // Killed while replacing it: the file is the whole one before.
    let died = run_with_env(&words, None, &crash);
    assert_eq!(died.code, Some(CRASH_EXIT_CODE), "{}", died.stderr);
    assert_eq!(std::fs::read_to_string(&target).expect("the file"), written);
    // What the dead runs left is hidden and no `*.prom` a collector reads.
    let names: Vec<String> = (std::fs::read_dir(textfiles.path()).expect("the directory"))
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".prom"))
        .collect();
    assert_eq!(names, ["recon.prom"]);
}

#[test]
fn metrics_into_a_directory_that_does_not_exist_is_one_line_and_exit_4() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_demo(0, dir.path());
    let ws = dir.path().display().to_string();
    let target = dir.path().join("no-such-dir").join("recon.prom");
    let target = target.display().to_string();
    let out = run(
        &["metrics", "--workspace", &ws, "--output", &target, "--json"],
        None,
    );
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert_eq!(out.json()["error"]["kind"], json!("storage"));
}

/// The JSON lines a run wrote on stderr.
fn log_lines(out: &Run) -> Vec<Value> {
    (out.stderr.lines())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect()
}

fn json_log_lines_parse_and_carry_each_act_with_its_seq_and_login(store: Store) {
    let mut site = Site::new(store);
    let payload = json!({"to": "ann"});
    site.ws.prepare("l-1", ACTION, &payload).expect("prepare");
    let lost = Some(Fault::CrashBeforeCommit);
    site.dispatched("l-2", ACTION, &json!({"to": "bob"}), lost);
    let head = |site: &Site| site.run(&["checkpoint", "--json"], None).json()["length"].clone();
    let start = head(&site).as_i64().expect("a length");
    let log = [("RECON_LOG", "json")];
    let acts: [(&[&str], &[&str]); 3] = [
        (
            &["note", "l-1", "--by", "ann", "--text", "a note"],
            &["noted"],
        ),
        (
            &["escalate", "l-2", "--by", "bob", "--reason", "odd"],
            &["escalated"],
        ),
        (
            &[
                "prepare",
                "--op",
                "l-3",
                "--action",
                ACTION,
                "--payload",
                "{}",
            ],
            &["prepared"],
        ),
    ];
    let mut seq = start;
    for (words, kinds) in acts {
        let out = site.run_with_env(words, None, &log);
        assert_eq!(out.code, Some(0), "{words:?}: {}", out.stderr);
        let lines = log_lines(&out);
        assert_eq!(lines.len(), kinds.len(), "{}", out.stderr);
        for (line, kind) in lines.iter().zip(kinds) {
            seq += 1;
            let fields: Vec<&String> = line.as_object().expect("an object").keys().collect();
            assert_eq!(fields, ["act", "login", "op_id", "outcome", "seq", "ts"]);
            let typed = words
                .iter()
                .position(|w| w.starts_with("--by"))
                .map(|i| words[i + 1]);
            let login = match store {
                Store::Sqlite => typed.map(|name| json!(name)).unwrap_or(Value::Null),
                Store::Postgres => json!("postgres"),
            };
            let op = if words[0] == "prepare" {
                words[2]
            } else {
                words[1]
            };
            let ts = line["ts"].as_str().expect("ts");
            assert!(Timestamp::parse(ts).is_some(), "{ts}");
            let wanted = json!({"act": kind, "login": login, "op_id": op, "outcome": "committed",
                "seq": seq, "ts": ts});
            assert_eq!(line, &wanted);
        }
    }
    assert_eq!(head(&site), json!(seq));
    // A refused act commits nothing, and logs nothing.
    let refused = site.run_with_env(
        &["escalate", "l-2", "--by", "bob", "--reason", "x"],
        None,
        &log,
    );
    assert_eq!(
        (refused.code, refused.stderr.lines().count()),
        (Some(3), 1),
        "{}",
        refused.stderr
    );
}
on_both_stores!(json_log_lines_parse_and_carry_each_act_with_its_seq_and_login);

#[test]
fn without_recon_log_no_json_line_is_written_and_an_unknown_value_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_demo(0, dir.path());
    let ws = dir.path().display().to_string();
    let note = [
        "note",
        "--workspace",
        &ws,
        "op-1002-invoice-email",
        "--by",
        "ann",
        "--text",
        "t",
    ];
    for quiet in ["", "text"] {
        let out = run_with_env(&note, None, &[("RECON_LOG", quiet)]);
        assert_eq!((out.code, out.stderr.as_str()), (Some(0), ""), "{quiet:?}");
    }
    let ops = ["ops", "--workspace", &ws, "--json"];
    let out = run_with_env(&ops, None, &[("RECON_LOG", "yaml")]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let error = &out.json()["error"];
    assert_eq!(error["kind"], json!("usage"));
    assert!(
        error["message"]
            .as_str()
            .expect("a message")
            .contains("RECON_LOG"),
        "{error}"
    );
}

/// The console owns its terminal: with `RECON_LOG=json` its acts go only
/// to `RECON_LOG_FILE`, one line each, and never to the screen.
#[test]
fn the_console_writes_its_acts_only_to_recon_log_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_demo(0, dir.path());
    let ws = dir.path().display().to_string();
    let log = dir.path().join("acts.jsonl");
    let env = [
        "RECON_LOG=json".to_string(),
        format!("RECON_LOG_FILE={}", log.display()),
    ];
    let env: Vec<&str> = env.iter().map(String::as_str).collect();
    let args = ["--workspace", ws.as_str(), "--reviewer", "ada"];
    let Some(tmux) = crate::terminal::Tmux::start_with_env(&env, &args, (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(&["m"], "Note op-1002-invoice-email");
    tmux.type_text("called the customer");
    tmux.keys(&["Enter"]);
    let screen = tmux.shows("left on op-1002-invoice-email by ada");
    assert!(!screen.contains("\"act\""), "{screen}");
    let text = std::fs::read_to_string(&log).expect("the log file");
    let lines: Vec<Value> = (text.lines())
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let seq = lines.first().map(|line| line["seq"].clone());
    let wanted = json!({"act": "noted", "login": "ada", "op_id": "op-1002-invoice-email",
        "outcome": "committed", "seq": seq, "ts": crate::support::DEMO_TIME});
    assert_eq!(lines, [wanted]);
}
