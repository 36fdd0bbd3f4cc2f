//! `recon mcp` (SPEC 13): one `recon_do` over MCP against its floor and
//! against today's path, on a SQLite workspace routed to the built-in
//! ledger, in the same run (absolute rates differ between machines; the
//! ratios are the figures).
//!
//! - the floor: what one `recon_do` must do, measured in process through
//!   the library on the same workspace: a prepare (one durable commit)
//!   plus a dispatch (two commits and the apply child);
//! - `recon_do` from one client: a raw JSON-RPC client over the server's
//!   stdio (the release binary, one long-lived process), calls one after
//!   another, each with a new key;
//! - four clients at once, each with its own `recon mcp`, on one
//!   workspace;
//! - today's path: `recon prepare` then `recon dispatch`, a process each;
//! - the gateway (when the reference filesystem server is installed in
//!   `target/npm`, as `.ci/run` does): one `write_file` through `recon mcp
//!   --gateway` (an operation whose apply the gateway answers in its own
//!   process through its running downstream, no adapter child) against
//!   the same call made on the filesystem server directly.
//!
//! `RECON_BENCH_MCP=N` sets the calls measured per row (default 200).
//! `cargo bench --bench mcp`

#[allow(dead_code)]
mod support;

use recon::dispatch::{DispatchOptions, ReceiverProgram};
use recon::{OpenOptions, Workspace};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use support::{count, median, millis, recon, run, strings};

const ACTION: &str = "send_email";

fn payload(i: usize) -> Value {
    json!({"to": "ada@example.com", "n": i})
}

/// A workspace whose every action routes to the built-in ledger.
fn workspace(dir: &Path) -> Workspace {
    let mut ws = Workspace::open(dir, OpenOptions::default().creating())
        .expect("workspace")
        .with_receiver_program(ReceiverProgram::new(recon(), Duration::from_secs(60)));
    ws.register_builtin("builtin", &["*".to_string()], true)
        .expect("the built-in ledger");
    ws
}

/// The floor: a prepare, and a prepare's dispatch, medians in process.
fn floor(ws: &mut Workspace, n: usize, tag: &str) -> (Duration, Duration) {
    let mut prepares = Vec::new();
    let mut dispatches = Vec::new();
    for i in 0..n {
        let op = format!("{tag}-{i}");
        let start = Instant::now();
        ws.prepare(&op, ACTION, &payload(i)).expect("prepare");
        prepares.push(start.elapsed());
        let start = Instant::now();
        ws.dispatch(&op, DispatchOptions::default())
            .expect("dispatch");
        dispatches.push(start.elapsed());
    }
    (median(prepares), median(dispatches))
}

/// A raw MCP client on one `recon mcp` process.
struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut command = Command::new(recon());
        command.args(["mcp", "--workspace", &dir.display().to_string()]);
        Server::spawn(command)
    }

    /// Any MCP server over stdio, initialized.
    fn spawn(mut command: Command) -> Server {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the MCP server");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            input,
            output,
            next_id: 0,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}").expect("write to recon mcp");
        self.input.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            self.output
                .read_line(&mut line)
                .expect("read from recon mcp");
            assert!(!line.is_empty(), "recon mcp closed its stdout");
            let answer: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if answer["id"] == id {
                return answer;
            }
        }
    }

    /// One `recon_do` with a new key; panics unless it is confirmed.
    fn recon_do(&mut self, key: &str, i: usize) -> Duration {
        let start = Instant::now();
        let answer = self.request(
            "tools/call",
            json!({"name": "recon_do",
                   "arguments": {"action": ACTION, "payload": payload(i), "key": key}}),
        );
        let took = start.elapsed();
        let state = &answer["result"]["structuredContent"]["state"];
        assert_eq!(state, "confirmed", "{answer}");
        took
    }

    /// One `tools/call`; panics on an error result or a state other
    /// than `confirmed` (when there is one).
    fn call(&mut self, name: &str, arguments: Value) -> Duration {
        let start = Instant::now();
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let took = start.elapsed();
        let result = &answer["result"];
        assert_ne!(result["isError"], true, "{answer}");
        let state = &result["structuredContent"]["state"];
        assert!(state.is_null() || state == "confirmed", "{answer}");
        took
    }

    fn stop(mut self) {
        drop(self.input);
        self.child.wait().expect("recon mcp ends");
    }
}

/// `n` calls from each of `clients` clients at once; every call's time.
fn clients_at_once(dir: &Path, clients: usize, n: usize, tag: &str) -> (Vec<Duration>, Duration) {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let dir = dir.to_path_buf();
            let barrier = barrier.clone();
            let tag = tag.to_string();
            std::thread::spawn(move || {
                let mut server = Server::start(&dir);
                barrier.wait();
                let times: Vec<Duration> = (0..n)
                    .map(|i| server.recon_do(&format!("{tag}-{c}-{i}"), i))
                    .collect();
                server.stop();
                times
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let times = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a client"))
        .collect();
    (times, start.elapsed())
}

/// The filesystem server's entry point in `target/npm`, if installed.
fn filesystem_server() -> Option<std::path::PathBuf> {
    let entry = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    entry.exists().then_some(entry)
}

/// `n` `write_file` calls on the filesystem server directly, then through
/// `recon mcp --gateway` on a fresh workspace: the medians.
fn gateway(entry: &Path, n: usize) -> (Duration, Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = dir.path().join("files");
    std::fs::create_dir(&files).expect("files");
    let node = "/usr/bin/node";
    let file = dir.path().join("gateway.toml");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway.toml"),
    )
    .expect("examples/gateway.toml")
    .replace(
        "/opt/recon/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        &entry.display().to_string(),
    )
    .replace(
        "\"/srv/agent-files\",",
        &format!("{:?},", files.display().to_string()),
    );
    std::fs::write(&file, text).expect("gateway file");
    let write = |i: usize, tag: &str| json!({"path": files.join(format!("{tag}-{i}.txt")).display().to_string(), "content": "x"});
    let mut direct = Command::new(node);
    direct.arg(entry).arg(&files);
    let mut server = Server::spawn(direct);
    let direct: Vec<Duration> = (0..n)
        .map(|i| server.call("write_file", write(i, "direct")))
        .collect();
    server.stop();
    let ws = workspace(&dir.path().join("ws"));
    drop(ws);
    let mut command = Command::new(recon());
    command.args([
        "mcp",
        "--workspace",
        &dir.path().join("ws").display().to_string(),
    ]);
    command.arg("--gateway").arg(&file);
    let mut server = Server::spawn(command);
    let through: Vec<Duration> = (0..n)
        .map(|i| {
            let mut arguments = write(i, "gateway");
            arguments["key"] = json!(format!("bench-{i}"));
            server.call("write_file", arguments)
        })
        .collect();
    server.stop();
    (median(direct), median(through))
}

fn main() {
    let n = count("RECON_BENCH_MCP", 200);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = workspace(dir.path());
    // Warm the page cache and the ledger's file.
    floor(&mut ws, 5, "warm");
    let (prepare, dispatch) = floor(&mut ws, n, "floor");
    drop(ws);
    let floor_time = prepare + dispatch;

    let (one, _) = clients_at_once(dir.path(), 1, n, "one");
    let one = median(one);
    let (four, wall) = clients_at_once(dir.path(), 4, n, "four");
    let four_median = median(four);
    let four_rate = (4 * n) as f64 / wall.as_secs_f64();

    let ws_arg = dir.path().display().to_string();
    let today: Vec<Duration> = (0..n.min(50))
        .map(|i| {
            let op = format!("cli-{i}");
            let payload = payload(i).to_string();
            run(&strings(&[
                "prepare",
                "--workspace",
                &ws_arg,
                "--op",
                &op,
                "--action",
                ACTION,
                "--payload",
                &payload,
            ])) + run(&strings(&["dispatch", "--workspace", &ws_arg, &op]))
        })
        .collect();
    let today = median(today);

    println!("## recon_do over MCP (SQLite, built-in ledger; medians of {n} calls)");
    println!(
        "floor: prepare {:.2} ms + dispatch {:.2} ms = {:.2} ms",
        millis(prepare),
        millis(dispatch),
        millis(floor_time)
    );
    println!(
        "recon_do, one client        {:>7.2} ms  ({:.2}x the floor)",
        millis(one),
        one.as_secs_f64() / floor_time.as_secs_f64()
    );
    println!(
        "recon_do, four clients      {:>7.2} ms  median call, {four_rate:.0} calls/s together",
        millis(four_median)
    );
    println!(
        "today: prepare + dispatch   {:>7.2} ms  ({:.1}x one recon_do)",
        millis(today),
        today.as_secs_f64() / one.as_secs_f64()
    );
    let Some(entry) = filesystem_server() else {
        println!("gateway: not measured: the filesystem server is not installed in target/npm");
        return;
    };
    let calls = n.min(30);
    let (direct, through) = gateway(&entry, calls);
    println!("## write_file through the gateway (medians of {calls} calls)");
    println!("filesystem server directly   {:>7.2} ms", millis(direct));
    println!(
        "recon mcp --gateway          {:>7.2} ms  (+{:.2} ms over the server directly; \
         {:+.2} ms against one recon_do, whose apply is a child of the built-in ledger)",
        millis(through),
        millis(through.saturating_sub(direct)),
        millis(through) - millis(one),
    );
}
