//! `recon mcp` (SPEC 13) through the official Python MCP SDK (`mcp==2.3.*`
//! in a virtual environment the tests make): the tools it lists, the
//! protocol versions it answers in, the key rules of `recon_do`, an
//! unknown outcome as a result with advice, two clients racing one key,
//! a cancelled call whose outcome is still recorded, the key and client
//! kept for `show`, `export` and the console, and team mode with a login
//! that holds only the sender role; and one call through the official MCP
//! inspector's command-line mode (npm, installed into `target/npm`).
//!
//! The client is `tests/it/mcp/client.py`, driven by a JSON plan; where
//! two processes must interleave, the order is held by fifos and pipes
//! (the server's hold points, the client's stdin), never by sleeping.

use crate::stores::{on_both_stores, Site, Store};
use crate::support::{adapter_fixture, mkfifo, recon_bin, require_python_venv};
use recon::domain::origin::op_id_of_key;
use recon::faults::{HOLD_FIFO_ENV, HOLD_POINT_ENV};
use recon::workspace::NewReceiver;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const SDK: &str = "mcp==2.3.*";
const PAYLOAD: &str = r#"{"to":"ada@example.com","subject":"hello"}"#;

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp/client.py")
}

fn payload() -> Value {
    serde_json::from_str(PAYLOAD).expect("the payload")
}

/// The client's plan: `recon mcp` on `args` (the outbox's `--workspace`
/// or `--database`), with `env`, connected as `connect` says.
fn plan(args: &[String], connect: Value, env: &[(&str, &str)], steps: Value) -> Value {
    let mut command = vec![recon_bin().display().to_string(), "mcp".to_string()];
    command.extend(args.iter().cloned());
    let env: serde_json::Map<String, Value> = (env.iter())
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let mut plan = json!({"command": command, "env": env, "steps": steps, "client": "test-agent"});
    for (k, v) in connect.as_object().into_iter().flatten() {
        plan[k] = v.clone();
    }
    plan
}

fn spawn(python: &Path, plan: &Value) -> Child {
    Command::new(python)
        .arg(client_script())
        .arg(plan.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python client")
}

/// Runs a client to its end: the JSON line of each step, after the first
/// (the negotiated protocol), which is returned with them.
fn client(python: &Path, plan: &Value) -> (String, Vec<Value>) {
    let out = spawn(python, plan).wait_with_output().expect("the client");
    assert!(
        out.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = (String::from_utf8_lossy(&out.stdout).lines())
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .collect::<Vec<_>>();
    let first = lines.remove(0);
    (
        first["protocol"].as_str().expect("protocol").to_string(),
        lines,
    )
}

fn call(tool: &str, args: Value) -> Value {
    json!({"call": tool, "args": args})
}

fn do_call(key: &str, action: &str, payload: &Value) -> Value {
    call(
        "recon_do",
        json!({"action": action, "payload": payload, "key": key}),
    )
}

fn python(test: &str) -> Option<PathBuf> {
    require_python_venv(test, &[SDK])
}

/// The file `entry` of the npm `package`, installed into `target/npm`
/// when missing (`.ci/run` installs it first); `None` after one line when
/// npm cannot install it (a failure under `CI`). Installs into the one
/// prefix wait for each other behind a lock file (two at once left a
/// half-made `node_modules`).
pub(crate) fn npm_package(test: &str, package: &str, entry: &str) -> Option<PathBuf> {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/npm");
    let entry = prefix.join("node_modules").join(entry);
    if entry.exists() {
        return Some(entry);
    }
    let _in_process = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    std::fs::create_dir_all(&prefix).expect("target/npm");
    let lock = std::fs::File::create(prefix.with_extension("lock")).expect("the npm lock");
    // SAFETY: flock on a file this function holds open; the lock is
    // released when `lock` is closed at the end of the function.
    let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    assert_eq!(
        locked,
        0,
        "the npm lock: {}",
        std::io::Error::last_os_error()
    );
    if !entry.exists() {
        let installed = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(package)
            .output();
        let why = match installed {
            Ok(out) if out.status.success() && entry.exists() => None,
            Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = why {
            let line = format!("{test}: did not run: npm cannot install {package}: {why}");
            assert!(std::env::var_os("CI").is_none(), "{line}");
            println!("{line}");
            return None;
        }
    }
    Some(entry)
}

#[test]
fn the_official_inspectors_command_line_calls_recon_do_and_reads_its_structured_status() {
    let test =
        "mcp::the_official_inspectors_command_line_calls_recon_do_and_reads_its_structured_status";
    let Some(launcher) = npm_package(
        test,
        "@modelcontextprotocol/inspector@2.12.0",
        "@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    ) else {
        return;
    };
    let site = Site::new(Store::Sqlite);
    let catalog = tempfile::tempdir().expect("a catalog dir");
    let key = "inspector:1";
    let out = Command::new("node")
        .arg(&launcher)
        .args(["--cli", "--method", "tools/call", "--tool-name", "recon_do"])
        .args(["--tool-arg", "action=send_email"])
        .arg("--tool-arg")
        .arg(format!("payload={PAYLOAD}"))
        .args(["--tool-arg", &format!("key={key}"), "--"])
        .arg(recon_bin())
        .arg("mcp")
        .args(site.args())
        .env("MCP_CATALOG_PATH", catalog.path().join("mcp.json"))
        .stdin(Stdio::null())
        .output()
        .expect("node runs the inspector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(&stdout).expect("the inspector prints JSON");
    assert_eq!(result["isError"], false, "{result}");
    let status = &result["structuredContent"];
    assert_eq!(status["state"], "confirmed", "{result}");
    assert_eq!(status["op_id"], op_id_of_key(key));
    let detail = shown(&site, &op_id_of_key(key));
    assert_eq!(detail["operation"]["payload"], payload(), "{detail}");
    assert_eq!(detail["operation"]["dispatch_count"], 1);
    assert_eq!(
        detail["origin"],
        json!({"door": "mcp", "key": key, "client": "inspector-cli"}),
        "the client's name from its initialize"
    );
}

/// `recon show OP --json` on the site.
fn shown(site: &Site, op_id: &str) -> Value {
    let out = site.run(&["show", op_id, "--json"], None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.json()
}

#[test]
fn tools_list_names_exactly_the_three_tools_with_schemas_and_annotations() {
    let test = "mcp::tools_list_names_exactly_the_three_tools_with_schemas_and_annotations";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let (_, lines) = client(
        &python,
        &plan(&site.args(), json!({}), &[], json!([{"list": true}])),
    );
    let tools = lines[0]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["recon_do", "recon_status", "recon_unknown"],
        "no reviewer act"
    );
    let by = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();
    let recon_do = by("recon_do");
    assert_eq!(
        recon_do["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true,
               "openWorldHint": true})
    );
    assert_eq!(
        recon_do["inputSchema"]["required"],
        json!(["action", "payload", "key"])
    );
    for name in ["recon_status", "recon_unknown"] {
        assert_eq!(by(name)["annotations"]["readOnlyHint"], true, "{name}");
    }
    let status = &recon_do["outputSchema"];
    assert_eq!(
        status["required"],
        json!(["op_id", "key", "state", "version", "advice"])
    );
    assert_eq!(by("recon_status")["outputSchema"], *status);
    let page = &by("recon_unknown")["outputSchema"];
    assert_eq!(page["required"], json!(["operations", "next"]));
    assert_eq!(page["properties"]["operations"]["items"], *status);
}

#[test]
fn the_server_answers_in_the_protocol_version_the_client_asks_for() {
    let test = "mcp::the_server_answers_in_the_protocol_version_the_client_asks_for";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let cases = [
        (
            json!({"mode": "legacy", "version": "2025-06-18"}),
            "2025-06-18",
        ),
        (json!({"mode": "legacy"}), "2025-11-25"),
        // A version recon does not offer is answered with the newest one
        // it offers that has a handshake.
        (
            json!({"mode": "legacy", "version": "2025-03-26"}),
            "2025-11-25",
        ),
        (json!({"mode": "2026-07-28"}), "2026-07-28"),
        (json!({"mode": "auto"}), "2026-07-28"),
    ];
    for (i, (connect, expected)) in cases.into_iter().enumerate() {
        let key = format!("version-{i}");
        let steps = json!([do_call(&key, "send_email", &payload())]);
        let (version, lines) = client(&python, &plan(&site.args(), connect.clone(), &[], steps));
        assert_eq!(version, expected, "{connect}");
        assert_eq!(lines[0]["isError"], false, "{connect}: {}", lines[0]);
        assert_eq!(lines[0]["structured"]["state"], "confirmed", "{connect}");
    }
}

on_both_stores!(recon_do_sends_once_per_key_and_returns_the_recorded_outcome);
fn recon_do_sends_once_per_key_and_returns_the_recorded_outcome(store: Store) {
    let test = "mcp::recon_do_sends_once_per_key_and_returns_the_recorded_outcome";
    let Some(python) = python(test) else { return };
    let site = Site::new(store);
    let key = "order-7:email.1";
    let steps = json!([
        do_call(key, "send_email", &payload()),
        // The same payload in another member order is the same payload.
        do_call(
            key,
            "send_email",
            &json!({"subject": "hello", "to": "ada@example.com"})
        ),
        call("recon_status", json!({"key": key})),
        call("recon_status", json!({"op_id": op_id_of_key(key)})),
    ]);
    let (_, lines) = client(&python, &plan(&site.args(), json!({}), &[], steps));
    let first = &lines[0]["structured"];
    assert_eq!(lines[0]["isError"], false, "{}", lines[0]);
    assert_eq!(first["op_id"], op_id_of_key(key));
    assert_eq!(first["key"], key);
    assert_eq!(first["state"], "confirmed");
    assert!(first["effect_id"].is_string(), "{first}");
    for line in &lines[1..] {
        assert_eq!(
            line["structured"], *first,
            "the recorded outcome, every time"
        );
    }
    let detail = shown(&site, &op_id_of_key(key));
    assert_eq!(detail["operation"]["dispatch_count"], 1, "sent once");
    assert_eq!(detail["evidence"].as_array().map(Vec::len), Some(1));
}

#[test]
fn the_same_key_with_another_action_or_payload_is_a_tool_error_naming_duplicate_operation() {
    let test = "mcp::the_same_key_with_another_action_or_payload_is_a_tool_error_naming_duplicate_operation";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let steps = json!([
        do_call("k1", "send_email", &payload()),
        do_call("k1", "send_email", &json!({"to": "eve@example.com"})),
        do_call("k1", "charge_card", &payload()),
    ]);
    let (_, lines) = client(&python, &plan(&site.args(), json!({}), &[], steps));
    for line in &lines[1..] {
        assert_eq!(line["isError"], true, "{line}");
        assert!(
            line["text"]
                .as_str()
                .unwrap()
                .starts_with("duplicate_operation:"),
            "{line}"
        );
    }
    let detail = shown(&site, &op_id_of_key("k1"));
    assert_eq!(detail["operation"]["dispatch_count"], 1);
    assert_eq!(detail["operation"]["payload"], payload());
}

#[test]
fn a_malformed_key_is_a_tool_error_naming_bad_key_with_nothing_prepared() {
    let test = "mcp::a_malformed_key_is_a_tool_error_naming_bad_key_with_nothing_prepared";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let long = "k".repeat(129);
    let steps = json!([
        do_call("two words", "send_email", &payload()),
        do_call(&long, "send_email", &payload()),
        do_call("", "send_email", &payload()),
        do_call("ключ", "send_email", &payload()),
        call("recon_status", json!({"key": "a/b"})),
    ]);
    let (_, lines) = client(&python, &plan(&site.args(), json!({}), &[], steps));
    for line in &lines {
        assert_eq!(line["isError"], true, "{line}");
        assert!(
            line["text"].as_str().unwrap().starts_with("bad_key:"),
            "{line}"
        );
    }
    let ops = site.run(&["ops", "--json"], None).json();
    assert_eq!(ops, json!([]), "nothing prepared");
}

/// Registers the fixture adapter as receiver `flaky` for `flaky_call`,
/// set to commit its effect and die before answering.
fn flaky_receiver(site: &Site, dir: &Path) {
    let file = |name: &str| dir.join(name).display().to_string();
    std::fs::write(dir.join("mode"), "apply:crash-after").expect("the adapter's mode");
    let args: Vec<String> = [
        "--state",
        &file("state.json"),
        "--mode-file",
        &file("mode"),
        "--log",
        &file("log"),
        "--name",
        "fl",
        "--complete",
        "--authoritative",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    site.reopen()
        .register_receiver(&NewReceiver {
            name: "flaky",
            actions: &["flaky_call".to_string()],
            program: &adapter_fixture(),
            args: &args,
            timeout_ms: None,
            env: &[],
        })
        .expect("register the flaky receiver");
}

on_both_stores!(an_unknown_outcome_is_a_result_with_advice_not_a_tool_error);
fn an_unknown_outcome_is_a_result_with_advice_not_a_tool_error(store: Store) {
    let test = "mcp::an_unknown_outcome_is_a_result_with_advice_not_a_tool_error";
    let Some(python) = python(test) else { return };
    let site = Site::new(store);
    let dir = tempfile::tempdir().expect("temp dir");
    flaky_receiver(&site, dir.path());
    let steps = json!([
        do_call("lost-1", "flaky_call", &json!({"n": 1})),
        do_call("lost-1", "flaky_call", &json!({"n": 1})),
        call("recon_unknown", json!({})),
    ]);
    let (_, lines) = client(&python, &plan(&site.args(), json!({}), &[], steps));
    let status = &lines[0]["structured"];
    assert_eq!(lines[0]["isError"], false, "{}", lines[0]);
    assert_eq!(status["state"], "unknown");
    let advice = status["advice"].as_str().unwrap();
    for words in ["Do not retry", "A person decides", "poll recon_status"] {
        assert!(advice.contains(words), "{advice}");
    }
    assert_eq!(lines[1]["structured"], *status, "not sent again");
    let page = &lines[2]["structured"];
    let listed: Vec<&Value> = page["operations"].as_array().unwrap().iter().collect();
    assert!(listed.contains(&status), "{page}");
    let detail = shown(&site, &op_id_of_key("lost-1"));
    assert_eq!(detail["operation"]["dispatch_count"], 1);
    assert_eq!(
        detail["failures"].as_array().map(Vec::len),
        Some(1),
        "the failure kept"
    );
}

#[test]
fn recon_unknown_pages_oldest_first_with_a_cursor() {
    let test = "mcp::recon_unknown_pages_oldest_first_with_a_cursor";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let dir = tempfile::tempdir().expect("temp dir");
    flaky_receiver(&site, dir.path());
    let mut steps: Vec<Value> = (0..3)
        .map(|n| do_call(&format!("u{n}"), "flaky_call", &json!({"n": n})))
        .collect();
    steps.push(call("recon_unknown", json!({"limit": 2})));
    let (_, lines) = client(&python, &plan(&site.args(), json!({}), &[], json!(steps)));
    let first = &lines[3]["structured"];
    let keys = |page: &Value| -> Vec<String> {
        (page["operations"].as_array().unwrap().iter())
            .map(|s| s["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys(first), ["u0", "u1"]);
    let next = first["next"].as_str().expect("a next cursor").to_string();
    let steps = json!([call("recon_unknown", json!({"limit": 2, "after": next}))]);
    let (_, lines) = client(&python, &plan(&site.args(), json!({}), &[], steps));
    assert_eq!(keys(&lines[0]["structured"]), ["u2"]);
    assert_eq!(lines[0]["structured"]["next"], Value::Null);
}

/// A line from a client started with [`spawn`].
fn line(reader: &mut impl BufRead) -> Value {
    let mut text = String::new();
    reader.read_line(&mut text).expect("a line from the client");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

on_both_stores!(two_clients_racing_one_key_dispatch_it_once);
fn two_clients_racing_one_key_dispatch_it_once(store: Store) {
    let test = "mcp::two_clients_racing_one_key_dispatch_it_once";
    let Some(python) = python(test) else { return };
    let site = Site::new(store);
    let fifo = tempfile::tempdir().expect("temp dir");
    let fifo = fifo.path().join("hold");
    mkfifo(&fifo);
    let fifo_text = fifo.display().to_string();
    // Client A's server has seen no operation for the key and stops
    // before its prepare takes the write lock.
    let held = [
        (HOLD_POINT_ENV, "store.before_write_lock"),
        (HOLD_FIFO_ENV, fifo_text.as_str()),
    ];
    let steps = json!([do_call("race", "send_email", &payload())]);
    let mut a = spawn(
        &python,
        &plan(&site.args(), json!({}), &held, steps.clone()),
    );
    let mut release = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("A's server reaches its hold point");
    // B sends the same key to the end while A is held.
    let (_, b) = client(&python, &plan(&site.args(), json!({}), &[], steps));
    assert_eq!(b[0]["structured"]["state"], "confirmed", "{}", b[0]);
    release.write_all(b"go\n").expect("release A");
    drop(release);
    let mut out = BufReader::new(a.stdout.take().unwrap());
    assert!(line(&mut out)["protocol"].is_string());
    let a_answer = line(&mut out);
    assert!(a.wait().expect("client A").success());
    assert_eq!(a_answer["isError"], false, "{a_answer}");
    assert_eq!(
        a_answer["structured"], b[0]["structured"],
        "A answers B's outcome"
    );
    let detail = shown(&site, &op_id_of_key("race"));
    assert_eq!(detail["operation"]["dispatch_count"], 1, "dispatched once");
    if store == Store::Postgres {
        return; // no built-in ledger in a database
    }
    let ledger = site.run(&["ledger", "--json"], None).json();
    let effects = (ledger.as_array().expect("the effects").iter())
        .filter(|e| e["op_id"] == op_id_of_key("race"))
        .count();
    assert_eq!(effects, 1, "{ledger}");
}

#[test]
fn a_cancelled_recon_do_is_still_dispatched_once_and_recorded() {
    let test = "mcp::a_cancelled_recon_do_is_still_dispatched_once_and_recorded";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let fifo = tempfile::tempdir().expect("temp dir");
    let fifo = fifo.path().join("hold");
    mkfifo(&fifo);
    let fifo_text = fifo.display().to_string();
    // The server stops inside the dispatch: the operation prepared, the
    // dispatch's checks done, `unknown` not written yet.
    let held = [
        (HOLD_POINT_ENV, "store.after_check"),
        (HOLD_FIFO_ENV, fifo_text.as_str()),
    ];
    let args = json!({"action": "send_email", "payload": payload(), "key": "cancel-me"});
    let steps = json!([
        {"cancel": "recon_do", "args": args},
        {"wait": true},
        do_call("cancel-me", "send_email", &payload()),
    ]);
    let mut a = spawn(&python, &plan(&site.args(), json!({}), &held, steps));
    let mut to_client = a.stdin.take().unwrap();
    let mut out = BufReader::new(a.stdout.take().unwrap());
    assert!(line(&mut out)["protocol"].is_string());
    assert_eq!(line(&mut out), json!({"started": true}));
    let mut release = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("the server reaches its hold point inside the dispatch");
    to_client
        .write_all(b"cancel\n")
        .expect("tell the client to cancel");
    assert_eq!(line(&mut out), json!({"cancelled": true}));
    release.write_all(b"go\n").expect("release the dispatch");
    drop(release);
    to_client
        .write_all(b"again\n")
        .expect("let the client call again");
    assert_eq!(line(&mut out), json!({"waited": true}));
    let again = line(&mut out);
    drop(to_client);
    assert!(a.wait().expect("the client").success());
    assert_eq!(again["structured"]["state"], "confirmed", "{again}");
    let detail = shown(&site, &op_id_of_key("cancel-me"));
    assert_eq!(detail["operation"]["dispatch_count"], 1, "dispatched once");
    assert_eq!(
        detail["evidence"][0]["source"], "receipt",
        "its receipt recorded"
    );
}

#[test]
fn an_operation_through_mcp_shows_its_key_and_client_in_show_export_and_the_console() {
    let test =
        "mcp::an_operation_through_mcp_shows_its_key_and_client_in_show_export_and_the_console";
    let Some(python) = python(test) else { return };
    let site = Site::new(Store::Sqlite);
    let steps = json!([do_call("shown-1", "send_email", &payload())]);
    client(
        &python,
        &plan(&site.args(), json!({"mode": "legacy"}), &[], steps),
    );
    let steps = json!([do_call("shown-2", "send_email", &payload())]);
    let modern = json!({"mode": "2026-07-28", "client": "modern-agent"});
    client(&python, &plan(&site.args(), modern, &[], steps));
    for (key, client) in [("shown-1", "test-agent"), ("shown-2", "modern-agent")] {
        let op_id = op_id_of_key(key);
        let detail = shown(&site, &op_id);
        assert_eq!(
            detail["origin"],
            json!({"door": "mcp", "key": key, "client": client})
        );
        let text = site.run(&["show", &op_id], None);
        assert!(
            text.stdout
                .contains(&format!("via mcp: key {key}, client {client}")),
            "{}",
            text.stdout
        );
        let detail = site.reopen().show(&op_id).expect("show");
        let origin = detail.origin.expect("the origin");
        assert_eq!(
            (origin.key.as_str(), origin.client.as_deref()),
            (key, Some(client))
        );
    }
    // The console's detail of the selected (the only unknown) operation.
    let dir = tempfile::tempdir().expect("temp dir");
    flaky_receiver(&site, dir.path());
    let steps = json!([do_call("shown-3", "flaky_call", &json!({"n": 3}))]);
    client(&python, &plan(&site.args(), json!({}), &[], steps));
    let screen = site.run(&["screenshot", "--size", "160x40"], None);
    assert_eq!(screen.code, Some(0), "{}", screen.stderr);
    assert!(
        screen
            .stdout
            .contains("via mcp · key shown-3 · client test-agent"),
        "{}",
        screen.stdout
    );
    let export = site.run(&["export"], None);
    assert_eq!(export.code, Some(0), "{}", export.stderr);
    let origins: Vec<Value> = (export.stdout.lines())
        .map(|l| serde_json::from_str::<Value>(l).expect("an export line"))
        .filter(|e| e["kind"] == "prepared" && e.get("origin").is_some())
        .map(|e| e["origin"].clone())
        .collect();
    for (key, client) in [
        ("shown-1", "test-agent"),
        ("shown-2", "modern-agent"),
        ("shown-3", "test-agent"),
    ] {
        let origin = json!({"door": "mcp", "key": key, "client": client});
        assert!(origins.contains(&origin), "{origin} in {origins:?}");
    }
    let verify = site.run(&["verify"], None);
    assert_eq!(
        verify.code,
        Some(0),
        "the journal with origins verifies: {}",
        verify.stdout
    );
}

#[test]
fn team_mode_with_a_sender_only_login_serves_recon_do_on_one_connection() {
    let test = "mcp::team_mode_with_a_sender_only_login_serves_recon_do_on_one_connection";
    let Some(python) = python(test) else { return };
    if !Store::Postgres.available(test) {
        return;
    }
    let site = Site::new(Store::Postgres);
    let url = site.args()[1].clone();
    let pg = crate::real_receivers::servers::postgres().as_ref().unwrap();
    let agent = crate::pg_store::roles::login(pg, &url, "mcp_agent_sender", &["recon_sender"]);
    let args = vec!["--database".to_string(), agent];
    let steps = json!([
        {"list": true},
        do_call("team-1", "send_email", &payload()),
        call("recon_status", json!({"key": "team-1"})),
        call("recon_unknown", json!({})),
        do_call("team-2", "send_email", &payload()),
        {"wait": true},
    ]);
    let mut agent_client = spawn(&python, &plan(&args, json!({}), &[], steps));
    let mut out = BufReader::new(agent_client.stdout.take().unwrap());
    assert!(line(&mut out)["protocol"].is_string());
    let lines: Vec<Value> = (0..5).map(|_| line(&mut out)).collect();
    // Five calls, one long-lived server, one connection.
    let database = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let sessions = pg.psql(
        database,
        "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mcp_agent_sender'",
    );
    assert_eq!(sessions.trim(), "1", "the server's connections");
    let mut input = agent_client.stdin.take().unwrap();
    input.write_all(b"done\n").expect("end the client");
    drop(input);
    assert_eq!(line(&mut out), json!({"waited": true}));
    assert!(agent_client.wait().expect("the client").success());
    let names: Vec<&Value> = (lines[0]["tools"].as_array().unwrap().iter())
        .map(|t| &t["name"])
        .collect();
    assert_eq!(
        names,
        [
            &json!("recon_do"),
            &json!("recon_status"),
            &json!("recon_unknown")
        ]
    );
    for line in &lines[1..] {
        assert_eq!(line["isError"], false, "{line}");
    }
    assert_eq!(lines[1]["structured"]["state"], "confirmed", "{}", lines[1]);
    assert_eq!(lines[4]["structured"]["state"], "confirmed", "{}", lines[4]);
    let detail = shown(&site, &op_id_of_key("team-1"));
    assert_eq!(detail["operation"]["dispatch_count"], 1);
}

mod gateway;
