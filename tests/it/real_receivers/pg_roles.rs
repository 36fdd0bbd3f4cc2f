//! Least privilege at the receiver (SPEC 12): `recon-pg-ledger init` and
//! the ledger roles of its verbs, against a real PostgreSQL. Roles are the
//! cluster's, shared by every test of this process, so each test uses a
//! prefix and logins of its own.

use super::pg::{database_of, setup};
use super::servers::Postgres;
use super::{
    apply_request, call_adapter, close_request, error_code, ok_json, prepare, query_request,
};
use crate::support::{run, run_with_env, Run};
use serde_json::{json, Value};
use std::path::Path;

/// `recon-pg-ledger init --database URL --roles PREFIX`, run as the
/// cluster's superuser: its exit code and stdout (stderr on failure).
fn init(binary: &Path, url: &str, prefix: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(binary)
        .args(["init", "--database", url, "--roles", prefix])
        .output()
        .expect("run recon-pg-ledger init");
    let text = if out.status.success() {
        out.stdout
    } else {
        out.stderr
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&text).into_owned(),
    )
}

/// The URL of `url`'s database reached as `login` (the test cluster
/// trusts every login, so no password).
fn as_login(url: &str, login: &str) -> String {
    url.replacen("postgres://postgres@", &format!("postgres://{login}@"), 1)
}

/// Creates each login, granting it the ledger role named after it.
fn logins(pg: &Postgres, database: &str, grants: &[(&str, Option<&str>)]) {
    for (login, role) in grants {
        pg.psql(database, &format!("CREATE ROLE {login} LOGIN"));
        if let Some(role) = role {
            pg.psql(database, &format!("GRANT {role} TO {login}"));
        }
    }
}

/// One call as `login`: its answer.
#[track_caller]
fn call_as(binary: &Path, url: &str, login: &str, verb: &str, request: &Value) -> Value {
    let url = as_login(url, login);
    let (answer, _) = call_adapter(binary, &["--database", &url], verb, request, &[]);
    answer.unwrap_or_else(|| panic!("{login} {verb}: no answer"))
}

/// The answer is `unsupported` and its message names `role`.
#[track_caller]
fn refused_naming(answer: &Value, role: &str) {
    assert_eq!(error_code(answer), Some("unsupported"), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(role), "names {role}: {answer}");
}

#[test]
fn after_init_each_verb_answers_unsupported_naming_its_role_to_a_login_without_it() {
    let test = "after_init_each_verb_answers_unsupported_naming_its_role_to_a_login_without_it";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("ledger_roles");
    let database = database_of(&url);
    let (code, printed) = init(&binary, &url, "lr1");
    assert_eq!(code, Some(0), "{printed}");
    for verb in ["query", "close", "apply"] {
        assert!(
            printed.contains(&format!("role lr1_{verb}: created")),
            "{printed}"
        );
    }
    logins(
        pg,
        database,
        &[
            ("lr1_reader", Some("lr1_query")),
            ("lr1_closer", Some("lr1_close")),
            ("lr1_writer", Some("lr1_apply")),
            ("lr1_nobody", None),
        ],
    );
    let apply = apply_request("r-1", "ledger_write", &json!({"n": 1}));
    let written = call_as(&binary, &url, "lr1_writer", "apply", &apply);
    assert_eq!(written["ok"], json!(true), "the writer applies: {written}");
    let read = call_as(&binary, &url, "lr1_reader", "query", &query_request("r-1"));
    assert_eq!(read["matches"].as_array().map(Vec::len), Some(1), "{read}");
    let close = close_request("r-1", "ann");
    refused_naming(
        &call_as(&binary, &url, "lr1_reader", "close", &close),
        "lr1_close",
    );
    refused_naming(
        &call_as(&binary, &url, "lr1_reader", "apply", &apply),
        "lr1_apply",
    );
    refused_naming(
        &call_as(&binary, &url, "lr1_writer", "close", &close),
        "lr1_close",
    );
    refused_naming(
        &call_as(&binary, &url, "lr1_closer", "apply", &apply),
        "lr1_apply",
    );
    let nobody_read = call_as(&binary, &url, "lr1_nobody", "query", &query_request("r-1"));
    refused_naming(&nobody_read, "lr1_query");
    let describe = json!({"recon_adapter": 1});
    refused_naming(
        &call_as(&binary, &url, "lr1_nobody", "describe", &describe),
        "lr1_query",
    );
    let described = call_as(&binary, &url, "lr1_reader", "describe", &describe);
    assert_eq!(described["can_close"], json!(true), "{described}");
    // Batches in a session: the reader's batched read answers, its batched
    // close answers each operation unsupported.
    let batched = reader_session_batches(&binary, &as_login(&url, "lr1_reader"));
    assert_eq!(
        batched[0]["results"][0]["matches"].as_array().map(Vec::len),
        Some(1)
    );
    for result in batched[1]["results"].as_array().expect("results") {
        refused_naming(result, "lr1_close");
    }
    // Nothing the refused calls asked for happened.
    let effects = pg.psql(database, "SELECT count(*) FROM recon_effects");
    assert_eq!(effects.trim(), "1");
    let closed = call_as(&binary, &url, "lr1_closer", "close", &close);
    assert_eq!(closed["closed"], json!(true), "the closer closes: {closed}");
    assert_eq!(closed["closed_by"], json!("lr1_closer"), "{closed}");
    let read = call_as(&binary, &url, "lr1_reader", "query", &query_request("r-1"));
    assert_eq!(read["closed_by"], json!("lr1_closer"), "{read}");
    // The tombstone is final, whoever writes: not even the owner renames
    // its closer.
    let rename = pg.try_psql(database, "UPDATE recon_gate SET closed_login = 'someone'");
    assert!(rename.is_err_and(|e| e.contains("tombstone is final")));
}

/// A session at `url` answering a batched query, then a batched close,
/// of `r-1` and `r-2`.
fn reader_session_batches(binary: &Path, url: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new(binary)
        .args(["--database", url, "session"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start a session");
    let mut stdin = child.stdin.take().expect("stdin");
    for (id, verb) in [(1, "query"), (2, "close")] {
        let mut line = close_request("unused", "ann");
        if let Some(fields) = line.as_object_mut() {
            fields.remove("op_id");
        }
        line["op_ids"] = json!(["r-1", "r-2"]);
        line["verb"] = json!(verb);
        line["id"] = json!(id);
        writeln!(stdin, "{line}").expect("write a request");
    }
    drop(stdin);
    let output = super::finish(child);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON answer a line"))
        .collect()
}

/// What `init` leaves in the database: the tables' rights, the ledger's
/// roles and triggers, and the roles table.
fn grants_state(pg: &Postgres, database: &str) -> String {
    pg.psql(
        database,
        "SELECT relname || ' ' || coalesce(relacl::text, '-') FROM pg_class \
         WHERE relname LIKE 'recon_%' AND relkind = 'r' ORDER BY relname; \
         SELECT verb || ' ' || role FROM recon_ledger_roles ORDER BY verb; \
         SELECT tgname || ' ' || oid FROM pg_trigger WHERE tgname LIKE 'recon_%' ORDER BY 1; \
         SELECT rolname || ' ' || oid FROM pg_roles WHERE rolname LIKE 'lr2_%' ORDER BY 1",
    )
}

#[test]
fn init_run_twice_changes_nothing_and_refuses_another_prefix_or_roles_of_another_ledger() {
    let test =
        "init_run_twice_changes_nothing_and_refuses_another_prefix_or_roles_of_another_ledger";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("ledger_init");
    let database = database_of(&url);
    assert_eq!(init(&binary, &url, "lr2").0, Some(0));
    let first = grants_state(pg, database);
    assert!(first.contains("query lr2_query"), "{first}");
    assert!(first.contains("recon_gate_tombstone"), "{first}");
    let (code, printed) = init(&binary, &url, "lr2");
    assert_eq!(code, Some(0), "{printed}");
    for verb in ["query", "close", "apply"] {
        assert!(
            printed.contains(&format!("role lr2_{verb}: present")),
            "{printed}"
        );
    }
    assert_eq!(
        grants_state(pg, database),
        first,
        "the second init changed something"
    );
    let (code, said) = init(&binary, &url, "lr2_other");
    assert_eq!(code, Some(1), "another prefix: {said}");
    assert!(said.contains("lr2_"), "{said}");
    let elsewhere = pg.new_database("ledger_init_other");
    let (code, said) = init(&binary, &elsewhere, "lr2");
    assert_eq!(code, Some(1), "roles of another ledger: {said}");
    assert!(said.contains(database), "names the other database: {said}");
}

#[test]
fn without_init_a_login_that_may_create_tables_creates_the_ledger_on_first_use_with_no_roles() {
    let test =
        "without_init_a_login_that_may_create_tables_creates_the_ledger_on_first_use_with_no_roles";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("ledger_no_init");
    let database = database_of(&url);
    logins(pg, database, &[("lr3_owner", None)]);
    pg.psql(
        database,
        &format!("ALTER DATABASE {database} OWNER TO lr3_owner"),
    );
    let apply = apply_request("n-1", "ledger_write", &json!({"n": 1}));
    let written = call_as(&binary, &url, "lr3_owner", "apply", &apply);
    assert_eq!(written["ok"], json!(true), "{written}");
    let closed = call_as(
        &binary,
        &url,
        "lr3_owner",
        "close",
        &close_request("n-1", "ann"),
    );
    assert_eq!(closed["closed_by"], json!("lr3_owner"), "{closed}");
    let owner = pg.psql(
        database,
        "SELECT tableowner || ' ' || (to_regclass('recon_ledger_roles') IS NULL) \
         FROM pg_tables WHERE tablename = 'recon_gate'",
    );
    assert_eq!(
        owner.trim(),
        "lr3_owner true",
        "made by its first caller, no roles"
    );
}

/// `recon ARGS` on the "host" whose service file is `service_file`: its
/// ledger login is the one that file names.
fn on_host(args: &[&str], service_file: &Path) -> Run {
    on_host_with(args, service_file, &[])
}

/// [`on_host`] with more of the environment (a drill).
fn on_host_with(args: &[&str], service_file: &Path, more: &[(&str, &str)]) -> Run {
    let file = service_file.to_str().expect("a UTF-8 path");
    let env = [("PGSERVICE", "ledger"), ("PGSERVICEFILE", file)];
    run_with_env(args, None, &[&env[..], more].concat())
}

/// A `pg_service.conf` whose `ledger` section names `login`.
fn service_file(dir: &Path, login: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{login}.conf"));
    std::fs::write(&path, format!("[ledger]\nuser={login}\n")).expect("write a service file");
    path
}

#[test]
fn a_reviewers_host_with_a_reading_ledger_login_snapshots_and_its_close_is_kept_as_a_failed_call() {
    let test =
        "a_reviewers_host_with_a_reading_ledger_login_snapshots_and_its_close_is_kept_as_a_failed_call";
    let Some((pg, binary)) = setup(test) else {
        return;
    };
    let url = pg.new_database("ledger_hosts");
    let database = database_of(&url);
    assert_eq!(init(&binary, &url, "lr4").0, Some(0));
    let grants = [
        ("lr4_sender", Some("lr4_apply")),
        ("lr4_reviewer", Some("lr4_query")),
        ("lr4_closer", Some("lr4_close")),
    ];
    logins(pg, database, &grants);
    let dir = tempfile::tempdir().expect("temp dir");
    let [sender, reviewer, closer] = grants.map(|(login, _)| service_file(dir.path(), login));
    // One registration for every host: the URL names no login; each host's
    // service file does.
    let ws = dir.path().join("ws").display().to_string();
    let w = ws.as_str();
    let program = binary.display().to_string();
    let ledger = url.replacen("postgres://postgres@", "postgres://", 1);
    let add = [
        "receivers",
        "add",
        "--workspace",
        w,
        "ledger",
        "--actions",
        "ledger_write",
        "--env",
        "PGSERVICE",
        "--env",
        "PGSERVICEFILE",
        "--env",
        "RECON_PG_LEDGER_CRASH",
        "--",
        &program,
        "--database",
        &ledger,
    ];
    let added = on_host(&add, &reviewer);
    assert_eq!(
        added.code,
        Some(0),
        "registered from the reviewer's host: {}",
        added.stderr
    );
    prepare(w, "h-1", "ledger_write", &json!({"n": 1}));
    // The receipt is lost: the operation stays unknown, for a reviewer.
    let lost = [("RECON_PG_LEDGER_CRASH", "after-apply-commit")];
    let dispatch = ["dispatch", "--workspace", w, "h-1", "--json"];
    let sent = ok_json(
        &on_host_with(&dispatch, &sender, &lost),
        "the sender's dispatch",
    );
    assert_eq!(sent["outcome"], json!("unknown"), "{sent}");
    let read = on_host(&["snapshot", "--workspace", w, "h-1", "--json"], &reviewer);
    let read = ok_json(&read, "the reviewer's snapshot");
    assert_eq!(
        read["snapshot"]["matches"].as_array().map(Vec::len),
        Some(1),
        "{read}"
    );
    let closing = [
        "snapshot",
        "--workspace",
        w,
        "h-1",
        "--close",
        "--authorized-by",
        "ann",
    ];
    let refused = on_host(&[&closing[..], &["--json"]].concat(), &reviewer);
    assert_ne!(refused.code, Some(0), "the reviewer's host cannot close");
    assert!(refused.stderr.contains("lr4_close"), "{}", refused.stderr);
    let shown = ok_json(
        &run(&["show", "--workspace", w, "h-1", "--json"], None),
        "show",
    );
    // Kept with the operation as the failed call it was; nothing closed.
    let kept: Vec<(&Value, &Value)> = (shown["failures"].as_array().expect("failures").iter())
        .filter(|f| f["verb"] == json!("close"))
        .map(|f| (&f["kind"], &f["detail"]))
        .collect();
    assert_eq!(kept.len(), 1, "{shown}");
    assert_eq!(kept[0].0, &json!("error"), "{shown}");
    let detail = kept[0].1.as_str().unwrap_or_default();
    assert!(
        detail.starts_with("unsupported: ") && detail.contains("lr4_close"),
        "{detail}"
    );
    assert_eq!(shown["operation"]["state"], json!("unknown"), "{shown}");
    // The ledger answered, in a session it kept running: no exit to show,
    // and `show` does not say it was killed.
    let text = run(&["show", "--workspace", w, "h-1"], None);
    let line = (text.stdout.lines())
        .find(|l| l.starts_with("failed close"))
        .unwrap_or_default();
    assert!(
        line.ends_with("exit none (it answered and kept running, in a session)"),
        "{}",
        text.stdout
    );
    let gate = pg.psql(
        database,
        "SELECT count(*) FROM recon_gate WHERE closed_at IS NOT NULL",
    );
    assert_eq!(gate.trim(), "0", "the reviewer's login closed nothing");
    let closed = on_host(&[&closing[..], &["--json"]].concat(), &closer);
    let closed = ok_json(&closed, "the closer's close");
    assert_eq!(
        closed["snapshot"]["closed_by"],
        json!("lr4_closer"),
        "{closed}"
    );
    let read = on_host(&["snapshot", "--workspace", w, "h-1", "--json"], &reviewer);
    let read = ok_json(&read, "the reviewer's read after the close");
    assert_eq!(read["snapshot"]["closed_by"], json!("lr4_closer"), "{read}");
}
