//! Team mode from the command line (SPEC 10): `--database URL`, or
//! `RECON_DATABASE_URL`, in place of `--workspace DIR` for every command
//! that is not for a workspace directory only, with the same JSON and exit
//! codes; the commands for a directory only refusing `--database` and
//! ignoring the variable; `receivers add --builtin` refused on a
//! database; and a password in the URL never printed.

use super::{database_of, initialized};
use crate::real_receivers::servers::{self, Postgres};
use crate::support::{adapter_fixture, run_with_env, Run};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

const VARIABLE: &str = "RECON_DATABASE_URL";

/// Where a flow's commands are told their stores are.
enum Place<'a> {
    Workspace(&'a Path),
    Flag(&'a str),
    Variable(&'a str),
}

impl Place<'_> {
    /// Runs `recon ARGS` there, with `--json`, expecting `code`.
    #[track_caller]
    /// (`--json` goes before the `--` of `receivers add`, which the
    /// adapter's own arguments follow.)
    fn run(&self, args: &[&str], code: i32) -> Run {
        let mut all: Vec<String> = Vec::new();
        let mut env = Vec::new();
        match self {
            Place::Workspace(dir) => {
                all.extend(["--workspace".into(), dir.display().to_string()]);
            }
            Place::Flag(url) => all.extend(["--database".into(), url.to_string()]),
            Place::Variable(url) => env.push((VARIABLE, *url)),
        }
        let end = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        all.extend(args[..end].iter().map(|a| a.to_string()));
        all.push("--json".into());
        all.extend(args[end..].iter().map(|a| a.to_string()));
        let words: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = run_with_env(&words, None, &env);
        assert_eq!(
            out.code,
            Some(code),
            "{words:?}: {}{}",
            out.stdout,
            out.stderr
        );
        out
    }
}

/// A JSON value's shape: its objects' keys and its values' types, with
/// the values themselves left out (ids and times differ between runs).
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), shape(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().take(1).map(shape).collect()),
        Value::Null => json!("null"),
        Value::Bool(_) => json!("bool"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
    }
}

/// The flow of SPEC 10 through the command line at `place`: an adapter
/// registered, an operation prepared and dispatched to it (its receipt
/// lost), listed, shown, confirmed, and the journal verified. Returns each
/// command's JSON by its name.
fn flow(place: &Place, state: &Path) -> BTreeMap<&'static str, Value> {
    let state = state.join("mail.json").display().to_string();
    let adapter = adapter_fixture().display().to_string();
    let mut seen = BTreeMap::new();
    let registered = place.run(
        &[
            "receivers",
            "add",
            "mail",
            "--actions",
            "post_letter",
            "--",
            &adapter,
            "--state",
            &state,
            "--mode",
            "apply:crash-after",
            "--can-close",
            "--complete",
            "--authoritative",
        ],
        0,
    );
    seen.insert("receivers add", registered.json());
    let payload = r#"{"to": "ann", "text": "hello"}"#;
    let prepared = place.run(
        &[
            "prepare",
            "--op",
            "op-1",
            "--action",
            "post_letter",
            "--payload",
            payload,
        ],
        0,
    );
    seen.insert("prepare", prepared.json());
    let dispatched = place.run(&["dispatch", "op-1"], 0).json();
    assert_eq!(dispatched["outcome"], json!("unknown"), "{dispatched}");
    assert_eq!(dispatched["state"], json!("unknown"), "{dispatched}");
    let version = dispatched["version"]
        .as_i64()
        .expect("a version")
        .to_string();
    seen.insert("dispatch", dispatched);
    let ops = place.run(&["ops"], 0).json();
    assert_eq!(ops[0]["op_id"], json!("op-1"), "{ops}");
    seen.insert("ops", ops);
    seen.insert("show", place.run(&["show", "op-1"], 0).json());
    let decided = place
        .run(
            &[
                "reconcile",
                "op-1",
                "--reviewer",
                "ann",
                "--decision",
                "confirmed",
                "--expected-version",
                &version,
            ],
            0,
        )
        .json();
    assert_eq!(decided["state"], json!("confirmed"), "{decided}");
    seen.insert("reconcile", decided);
    let verified = place.run(&["verify"], 0).json();
    assert_eq!(verified["intact"], json!(true), "{verified}");
    seen.insert("verify", verified);
    let refused = place.run(&["show", "op-none"], 3).json();
    assert_eq!(refused["error"]["code"], json!("unknown_operation"));
    seen.insert("show (refused)", refused);
    seen
}

/// The same values, apart from those that name a run (ids, times, the
/// workspace and the database).
fn same_values(workspace: &Value, database: &Value, what: &str) {
    for key in [
        "op_id", "state", "version", "outcome", "decision", "verdict",
    ] {
        assert_eq!(workspace.get(key), database.get(key), "{what}: {key}");
    }
}

#[test]
fn the_cli_flow_on_postgres_prints_the_same_json_as_on_a_workspace_by_flag_and_by_variable() {
    let test =
        "the_cli_flow_on_postgres_prints_the_same_json_as_on_a_workspace_by_flag_and_by_variable";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let scratch = tempfile::tempdir().expect("temp dir");
    let dirs: Vec<_> = ["ws", "state-ws", "state-flag", "state-variable"]
        .iter()
        .map(|name| {
            let dir = scratch.path().join(name);
            std::fs::create_dir(&dir).expect("a directory");
            dir
        })
        .collect();
    let on_workspace = flow(&Place::Workspace(&dirs[0]), &dirs[1]);
    // `db init` itself, then the flow on the database it made.
    let by_flag = pg.new_database("cli_flag");
    let roles = servers::roles_args_for(&by_flag);
    let mut init_args = vec!["db", "init"];
    init_args.extend(roles.iter().map(String::as_str));
    let init = Place::Flag(&by_flag).run(&init_args, 0).json();
    assert_eq!(init["created"], json!(true), "{init}");
    let on_flag = flow(&Place::Flag(&by_flag), &dirs[2]);
    let by_variable = initialized(pg, "cli_variable");
    let on_variable = flow(&Place::Variable(&by_variable), &dirs[3]);
    for (what, workspace) in &on_workspace {
        for database in [&on_flag[what], &on_variable[what]] {
            assert_eq!(shape(workspace), shape(database), "{what}");
            same_values(workspace, database, what);
        }
    }
    let counts = "SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM receivers)";
    assert_eq!(pg.psql(database_of(&by_flag), counts).trim(), "1|1");
    assert_eq!(pg.psql(database_of(&by_variable), counts).trim(), "1|1");
}

#[test]
fn database_with_workspace_is_a_usage_error_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().display().to_string();
    let url = "postgres://nobody@127.0.0.1:1/none";
    for args in [
        vec!["ops", "--workspace", &ws, "--database", url, "--json"],
        vec!["--database", url, "verify", "--workspace", &ws, "--json"],
    ] {
        let out = run_with_env(&args, None, &[]);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        let error = &out.json()["error"];
        assert_eq!(error["kind"], json!("usage"), "{error}");
        assert!(
            error["message"].as_str().unwrap_or("").contains("give one"),
            "{error}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
}

#[test]
fn commands_for_a_workspace_directory_only_refuse_database_exit_2_and_ignore_the_variable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("demo");
    let ws = ws.display().to_string();
    let url = "postgres://nobody@127.0.0.1:1/none";
    for args in [
        vec!["demo", "--database", url, "--json"],
        vec!["ledger", "--database", url, "--json"],
        vec!["experiment", "--database", url],
        vec!["--check", "--database", url],
        vec![
            "receiver",
            "apply",
            "--database",
            url,
            "--op",
            "a",
            "--action",
            "b",
            "--payload",
            "{}",
        ],
        vec!["receiver", "adapter", "describe", "--database", url],
    ] {
        let out = run_with_env(&args, None, &[]);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("--database"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // The variable names a server that is not there: `demo` never asks it.
    let out = run_with_env(
        &["demo", "--workspace", &ws, "--ops", "0", "--json"],
        None,
        &[(VARIABLE, url)],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(Path::new(&ws).join("sender.sqlite").exists());
    let ledger = run_with_env(
        &["ledger", "--workspace", &ws, "--json"],
        None,
        &[(VARIABLE, url)],
    );
    assert_eq!(ledger.code, Some(0), "{}", ledger.stderr);
}

#[test]
fn receivers_add_builtin_on_a_database_is_refused_builtin_single_host_writing_nothing() {
    let test = "receivers_add_builtin_on_a_database_is_refused_builtin_single_host_writing_nothing";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = initialized(pg, "cli_builtin");
    let written = |pg: &Postgres| {
        pg.psql(
            database_of(&url),
            "SELECT (SELECT seq || ':' || hash FROM journal_head), \
             (SELECT count(*) FROM receivers), (SELECT count(*) FROM routes)",
        )
    };
    let before = written(pg);
    let out = run_with_env(
        &[
            "receivers",
            "add",
            "ledger",
            "--actions",
            "*",
            "--builtin",
            "--database",
            &url,
            "--json",
        ],
        None,
        &[],
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert_eq!(out.json()["error"]["code"], json!("builtin_single_host"));
    assert!(
        out.stderr.starts_with("refused: builtin_single_host: "),
        "{}",
        out.stderr
    );
    assert_eq!(written(pg), before);
}

#[test]
fn a_password_in_the_database_url_never_appears_in_stderr_or_json() {
    let test = "a_password_in_the_database_url_never_appears_in_stderr_or_json";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    const SECRET: &str = "Wr0ng-s3cret-pw";
    let url = initialized(pg, "cli_password");
    let with_password = url.replacen("postgres@", &format!("postgres:{SECRET}@"), 1);
    let no_outbox =
        pg.url("no_such_database")
            .replacen("postgres@", &format!("postgres:{SECRET}@"), 1);
    let unreachable = format!("postgres://ann:{SECRET}@127.0.0.1:1/none");
    let malformed = format!("postgres://ann:{SECRET}@127.0.0.1:notaport/none");
    let runs = [
        (vec!["ops", "--database", &with_password, "--json"], 0),
        (
            vec!["show", "op-none", "--database", &with_password, "--json"],
            3,
        ),
        (vec!["ops", "--database", &no_outbox, "--json"], 4),
        (vec!["ops", "--database", &unreachable, "--json"], 4),
        (vec!["ops", "--database", &malformed, "--json"], 2),
        (vec!["db", "init", "--database", &unreachable, "--json"], 4),
        (vec!["ops", "--database", &unreachable], 4),
    ];
    for (args, code) in runs {
        let out = run_with_env(&args, None, &[]);
        assert_eq!(out.code, Some(code), "{args:?}: {}", out.stderr);
        assert!(
            !out.stdout.contains(SECRET) && !out.stderr.contains(SECRET),
            "{args:?}: {}{}",
            out.stdout,
            out.stderr
        );
    }
    let out = run_with_env(&["ops", "--json"], None, &[(VARIABLE, &unreachable)]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));
    // The database is named, its password hidden.
    assert!(
        out.stderr.contains("postgres://ann:***@127.0.0.1:1/none"),
        "{}",
        out.stderr
    );
}
