//! `recon mcp --gateway` (SPEC 13) in front of the real reference
//! filesystem server (`@modelcontextprotocol/server-filesystem@2026.8.31`
//! from npm, installed once into `target/npm`), driven by the official
//! Python SDK client: an effect call becomes an operation whose receipt is
//! the downstream's result, an undeclared tool is not exposed, and each
//! way the answer can fail (lost after the write, a timeout, a crash
//! after the request, an `isError` result) leaves the operation
//! `unknown` with the failure kept. The failures are made by
//! `tests/it/mcp/downstream.py`, which watches the lines it relays (no
//! sleeping).

use super::{call, client, plan, python, shown};
use crate::stores::{Site, Store};
use crate::support::recon_bin;
use recon::domain::origin::op_id_of_key;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const PACKAGE: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// The filesystem server's entry point (`super::npm_package`).
fn filesystem_server(test: &str) -> Option<PathBuf> {
    super::npm_package(
        test,
        PACKAGE,
        "@modelcontextprotocol/server-filesystem/dist/index.js",
    )
}

fn absolute(program: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A gateway in `dir`: the filesystem server serving `dir/files`,
/// behind the wrapper in `mode`; `write_file` an effect read back by
/// `read_text_file`, `list_directory` passed through.
struct Gate {
    dir: tempfile::TempDir,
    file: PathBuf,
}

impl Gate {
    fn new(entry: &Path, mode: &str, timeout_ms: u64) -> Gate {
        let dir = tempfile::tempdir().expect("temp dir");
        let files = dir.path().join("files");
        std::fs::create_dir(&files).expect("files dir");
        let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp/downstream.py");
        let text = format!(
            r#"receiver = "files"
instance = "filesystem:test"
command = {python:?}
args = [{wrapper:?}, {mode:?}, {node:?}, {entry:?}, {files:?}]
timeout_ms = {timeout_ms}

[tools.list_directory]
mode = "pass"

[tools.read_text_file]
mode = "evidence"

[tools.write_file]
mode = "effect"
complete = true
authoritative = true

[tools.write_file.evidence]
tool = "read_text_file"
arguments = {{ path = "/path" }}
found_pointer = "/content"
expected_pointer = "/content"
absent_error_contains = "ENOENT"
"#,
            python = absolute("python3"),
            node = absolute("node"),
        );
        let file = dir.path().join("gateway.toml");
        std::fs::write(&file, text).expect("gateway file");
        Gate { dir, file }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("files").join(name)
    }

    /// `--gateway FILE` after the site's arguments.
    fn args(&self, site: &Site) -> Vec<String> {
        let mut args = site.args();
        args.push("--gateway".into());
        args.push(self.file.display().to_string());
        args
    }
}

fn write(gate: &Gate, key: &str, name: &str, content: &str) -> Value {
    let path = gate.path(name).display().to_string();
    call(
        "write_file",
        json!({"path": path, "content": content, "key": key}),
    )
}

/// What the one client step of a write answered, on a fresh site.
fn one_write(python: &Path, site: &Site, gate: &Gate, key: &str) -> Value {
    let steps = json!([write(gate, key, "note.txt", "hello")]);
    let (_, lines) = client(python, &plan(&gate.args(site), json!({}), &[], steps));
    assert_eq!(lines[0]["isError"], false, "{}", lines[0]);
    lines[0]["structured"].clone()
}

macro_rules! setup {
    ($test:expr, $mode:expr, $timeout:expr) => {{
        let test = concat!("mcp::gateway::", $test);
        let Some(python) = python(test) else { return };
        let Some(entry) = filesystem_server(test) else {
            return;
        };
        (
            python,
            Site::new(Store::Sqlite),
            Gate::new(&entry, $mode, $timeout),
        )
    }};
}

#[test]
fn the_gateway_exposes_pass_tools_as_they_are_and_effect_tools_with_a_key_and_recon_status() {
    let (python, site, gate) = setup!(
        "the_gateway_exposes_pass_tools_as_they_are_and_effect_tools_with_a_key_and_recon_status",
        "relay",
        10_000
    );
    std::fs::write(gate.path("seen.txt"), "x").expect("a file");
    let files = gate.path("").display().to_string();
    let steps = json!([{"list": true}, call("list_directory", json!({"path": files}))]);
    let (_, lines) = client(&python, &plan(&gate.args(&site), json!({}), &[], steps));
    assert_eq!(lines[1]["isError"], false, "{}", lines[1]);
    assert!(
        lines[1]["text"].as_str().unwrap().contains("seen.txt"),
        "a pass tool is forwarded as it is: {}",
        lines[1]
    );
    let tools = lines[0]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "recon_do",
            "recon_status",
            "recon_unknown",
            "write_file",
            "list_directory"
        ],
        "undeclared (move_file, edit_file...) and evidence-only tools are not exposed"
    );
    let write_file = &tools[3];
    assert_eq!(
        write_file["inputSchema"]["required"],
        json!(["path", "content", "key"])
    );
    assert_eq!(
        write_file["outputSchema"]["required"],
        json!(["op_id", "key", "state", "version", "advice"])
    );
}

#[test]
fn a_write_file_effect_through_the_gateway_writes_the_file_and_confirms_the_operation() {
    let (python, site, gate) = setup!(
        "a_write_file_effect_through_the_gateway_writes_the_file_and_confirms_the_operation",
        "relay",
        10_000
    );
    let key = "note:1";
    let status = one_write(&python, &site, &gate, key);
    assert_eq!(status["state"], "confirmed", "{status}");
    assert_eq!(status["op_id"], op_id_of_key(key));
    assert_eq!(status["effect_id"], op_id_of_key(key));
    assert_eq!(
        std::fs::read_to_string(gate.path("note.txt")).expect("the file"),
        "hello"
    );
    let op = shown(&site, &op_id_of_key(key));
    assert_eq!(op["operation"]["receiver"], "files", "{op}");
    assert_eq!(op["operation"]["action_kind"], "write_file", "{op}");
    assert_eq!(
        op["operation"]["payload"],
        json!({"path": gate.path("note.txt").display().to_string(), "content": "hello"}),
        "the key is not part of the payload"
    );
    let listed = site.run(&["receivers", "list", "--json"], None).json();
    let files = (listed.as_array().expect("receivers").iter())
        .find(|r| r["name"] == "files")
        .expect("recon mcp --gateway registered the gateway's receiver")
        .clone();
    assert_eq!(files["actions"], json!(["write_file"]));
    assert_eq!(
        files["args"],
        json!([
            "gateway-adapter",
            "--gateway",
            gate.file.display().to_string()
        ])
    );
    assert_eq!(files["can_close"], false);
    // The same key again is the recorded outcome, not a second write.
    let again = one_write(&python, &site, &gate, key);
    assert_eq!(again, status);
}

/// The gateway's receiver registered as a wrapper around `recon
/// gateway-adapter --gateway FILE` that appends each verb it is run with
/// to `log` (the registration `recon mcp --gateway` then re-checks and
/// uses): every adapter child started shows there.
fn register_counted(site: &Site, gate: &Gate, log: &Path) {
    let wrapper = gate.dir.path().join("counted-adapter");
    let script = format!(
        "#!/bin/sh\nfor verb; do :; done\necho \"$verb\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        recon_bin().display()
    );
    std::fs::write(&wrapper, script).expect("the wrapper");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&wrapper, mode).expect("executable");
    let (wrapper, file) = (
        wrapper.display().to_string(),
        gate.file.display().to_string(),
    );
    let added = site.run(
        &[
            "receivers",
            "add",
            "files",
            "--actions",
            "write_file",
            "--",
            &wrapper,
            "gateway-adapter",
            "--gateway",
            &file,
        ],
        None,
    );
    assert_eq!(added.code, Some(0), "{}", added.stderr);
}

fn lines_of(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

#[test]
fn effect_calls_through_a_running_gateway_start_no_adapter_child_and_no_server_of_their_own() {
    let test = "mcp::gateway::effect_calls_through_a_running_gateway_start_no_adapter_child_and_no_server_of_their_own";
    let Some(python) = python(test) else { return };
    let Some(entry) = filesystem_server(test) else {
        return;
    };
    let site = Site::new(Store::Sqlite);
    let starts = tempfile::NamedTempFile::new().expect("a count file");
    let mode = format!("count={}", starts.path().display());
    let gate = Gate::new(&entry, &mode, 10_000);
    let verbs = gate.dir.path().join("verbs.log");
    register_counted(&site, &gate, &verbs);
    let described = lines_of(&verbs).len();
    let steps = json!([
        write(&gate, "lent:1", "one.txt", "1"),
        write(&gate, "lent:2", "two.txt", "2"),
        write(&gate, "lent:3", "three.txt", "3"),
    ]);
    let (_, lines) = client(&python, &plan(&gate.args(&site), json!({}), &[], steps));
    for line in &lines {
        assert_eq!(line["structured"]["state"], "confirmed", "{line}");
    }
    assert_eq!(
        std::fs::read_to_string(gate.path("three.txt")).expect("written"),
        "3"
    );
    assert_eq!(
        lines_of(starts.path()).len(),
        1,
        "one downstream served the listing and the three writes"
    );
    let run = lines_of(&verbs);
    assert!(
        run[described..].iter().all(|verb| verb == "describe"),
        "the writes started no adapter child, only its re-check: {run:?}"
    );
    // With no gateway running, the adapter is a child of its own, which
    // starts its own downstream to read.
    let snap = site.run(&["snapshot", &op_id_of_key("lent:1"), "--json"], None);
    assert_eq!(snap.code, Some(0), "{}", snap.stderr);
    assert_eq!(snap.json()["verdict"], "exact_match_existence_only");
    assert_eq!(lines_of(&verbs).last().map(String::as_str), Some("query"));
    assert_eq!(
        lines_of(starts.path()).len(),
        2,
        "the snapshot started its own"
    );
}

/// `recon snapshot` through the gateway's adapter, then a reviewer's
/// confirmation, for an operation whose write happened.
fn snapshot_then_confirm(site: &Site, op_id: &str) {
    let snap = site.run(&["snapshot", op_id, "--json"], None);
    assert_eq!(snap.code, Some(0), "{}", snap.stderr);
    let snap = snap.json();
    assert_eq!(snap["verdict"], "exact_match_existence_only", "{snap}");
    let version = shown(site, op_id)["operation"]["version"].to_string();
    let decided = site.run(
        &[
            "reconcile",
            op_id,
            "--decision",
            "confirmed",
            "--expected-version",
            &version,
            "--reviewer",
            "ada",
        ],
        None,
    );
    assert_eq!(decided.code, Some(0), "{}", decided.stderr);
    assert_eq!(shown(site, op_id)["operation"]["state"], "confirmed");
}

#[test]
fn a_lost_answer_after_the_write_leaves_the_operation_unknown_and_a_reviewer_confirms_it() {
    let (python, site, gate) = setup!(
        "a_lost_answer_after_the_write_leaves_the_operation_unknown_and_a_reviewer_confirms_it",
        "lose",
        10_000
    );
    let status = one_write(&python, &site, &gate, "note:lost");
    assert_eq!(status["state"], "unknown", "{status}");
    assert!(status["advice"].as_str().unwrap().contains("Do not retry"));
    assert!(gate.path("note.txt").exists(), "the write happened");
    let op_id = op_id_of_key("note:lost");
    let op = shown(&site, &op_id);
    assert_failure_kept(&op, "answer was lost");
    snapshot_then_confirm(&site, &op_id);
}

#[test]
fn a_downstream_timeout_leaves_the_operation_unknown_with_the_failure_kept() {
    let (python, site, gate) = setup!(
        "a_downstream_timeout_leaves_the_operation_unknown_with_the_failure_kept",
        "hold",
        1_000
    );
    let status = one_write(&python, &site, &gate, "note:held");
    assert_eq!(status["state"], "unknown", "{status}");
    // Whether the write landed before the second ran out is the
    // downstream's pace, not an order this test holds: not asserted.
    let op = shown(&site, &op_id_of_key("note:held"));
    assert_failure_kept(&op, "no answer within 1000 ms");
}

#[test]
fn a_downstream_crash_after_the_request_leaves_the_operation_unknown_and_nothing_proves_absence() {
    let (python, site, gate) = setup!(
        "a_downstream_crash_after_the_request_leaves_the_operation_unknown_and_nothing_proves_absence",
        "crash",
        10_000
    );
    let status = one_write(&python, &site, &gate, "note:crash");
    assert_eq!(status["state"], "unknown", "{status}");
    assert!(!gate.path("note.txt").exists());
    let op_id = op_id_of_key("note:crash");
    assert_failure_kept(&shown(&site, &op_id), "answer was lost");
    // The file is absent, but the receiver cannot close: inconclusive.
    let snap = site.run(&["snapshot", &op_id, "--json"], None);
    assert_eq!(snap.code, Some(0), "{}", snap.stderr);
    assert_eq!(snap.json()["verdict"], "inconclusive");
}

#[test]
fn an_is_error_result_leaves_the_operation_unknown_with_the_failure_kept() {
    let (python, site, gate) = setup!(
        "an_is_error_result_leaves_the_operation_unknown_with_the_failure_kept",
        "relay",
        10_000
    );
    let steps = json!([call(
        "write_file",
        json!({"path": "/etc/recon-gateway-test", "content": "x", "key": "outside"})
    )]);
    let (_, lines) = client(&python, &plan(&gate.args(&site), json!({}), &[], steps));
    assert_eq!(lines[0]["isError"], false, "an unknown outcome is a result");
    assert_eq!(lines[0]["structured"]["state"], "unknown", "{}", lines[0]);
    let op = shown(&site, &op_id_of_key("outside"));
    assert_failure_kept(&op, "isError");
}

#[test]
fn in_team_mode_recon_mcp_gateway_refuses_to_start_until_the_owner_registers_the_receiver() {
    let test = "mcp::gateway::in_team_mode_recon_mcp_gateway_refuses_to_start_until_the_owner_registers_the_receiver";
    if !Store::Postgres.available(test) {
        return;
    }
    let Some(python) = python(test) else { return };
    let Some(entry) = filesystem_server(test) else {
        return;
    };
    let site = Site::new(Store::Postgres);
    let gate = Gate::new(&entry, "relay", 10_000);
    let file = gate.file.display().to_string();
    let refused = site.run(&["mcp", "--gateway", &file], Some(b""));
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("unknown_receiver"),
        "{}",
        refused.stderr
    );
    let recon = recon_bin().display().to_string();
    let added = site.run(
        &[
            "receivers",
            "add",
            "files",
            "--actions",
            "write_file",
            "--",
            &recon,
            "gateway-adapter",
            "--gateway",
            &file,
        ],
        None,
    );
    assert_eq!(added.code, Some(0), "{}", added.stderr);
    let status = one_write(&python, &site, &gate, "team:1");
    assert_eq!(status["state"], "confirmed", "{status}");
    assert_eq!(
        std::fs::read_to_string(gate.path("note.txt")).unwrap(),
        "hello"
    );
}

#[test]
fn recon_mcp_gateway_rechecks_its_receiver_and_refuses_another_instance() {
    let (python, site, gate) = setup!(
        "recon_mcp_gateway_rechecks_its_receiver_and_refuses_another_instance",
        "relay",
        10_000
    );
    let status = one_write(&python, &site, &gate, "recheck:1");
    assert_eq!(status["state"], "confirmed", "{status}");
    let file = gate.file.display().to_string();
    // Unchanged: the registration is re-checked and the server serves.
    let again = one_write(&python, &site, &gate, "recheck:2");
    assert_eq!(again["state"], "confirmed", "{again}");
    let text = std::fs::read_to_string(&gate.file).expect("file");
    let moved = text.replace("filesystem:test", "filesystem:elsewhere");
    std::fs::write(&gate.file, moved).expect("file");
    let refused = site.run(&["mcp", "--gateway", &file], Some(b""));
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("receiver_changed"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_bad_gateway_file_is_refused_in_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        ("instance = \"x\"\ncommand = \"node\"\n", "absolute path"),
        ("command = \"/bin/true\"\n", "instance"),
        (
            "instance = \"x\"\ncommand = \"/bin/true\"\n[tools.w]\nmode = \"write\"\n",
            "mode is pass, effect or evidence",
        ),
        (
            "instance = \"x\"\ncommand = \"/bin/true\"\n[tools.w]\nmode = \"effect\"\n",
            "evidence table",
        ),
        (
            "instance = \"x\"\ncommand = \"/bin/true\"\n",
            "no effect tool",
        ),
        ("instance = [\n", "gateway file"),
    ];
    for (text, said) in cases {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text).expect("file");
        let out = Command::new(recon_bin())
            .args(["gateway-adapter", "--gateway"])
            .arg(&file)
            .arg("describe")
            .output()
            .expect("recon");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{text}: {stderr}");
        assert!(stderr.contains(said), "{text}: {stderr}");
    }
}

/// The operation's kept failure (SPEC 8 rule 7): the gateway's `apply`
/// answered an error saying `said`.
fn assert_failure_kept(op: &Value, said: &str) {
    let failures = op["failures"].as_array().expect("failures");
    assert!(
        failures.iter().any(|f| f["receiver"] == "files"
            && f["verb"] == "apply"
            && f["kind"] == "error"
            && f["detail"].as_str().unwrap_or_default().contains(said)),
        "the failure is kept: {op}"
    );
}
