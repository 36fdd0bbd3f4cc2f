//! `recon mcp`: the agent's door (SPEC 13). An MCP server over stdio,
//! built on the official Rust SDK (`rmcp`), with three tools:
//! `recon_do`, `recon_status` and `recon_unknown`; with `--gateway`, also
//! the tools a downstream MCP server offers, as the gateway file declares
//! them (`gate`, `crate::gateway`).
//!
//! The protocol runs on a current-thread tokio runtime that lives only
//! inside this command; the engine stays synchronous. One engine thread
//! owns the process's one long-lived [`Workspace`] (its connection, its
//! adapter sessions) and runs the tools' work one call after another, so
//! a call that arrives while another is in flight waits for it. A call
//! the client cancels is not stopped: its work is already queued on the
//! engine thread, which finishes it and records its outcome (the
//! operation was durable as `unknown` before its receiver was invoked).

pub mod gate;
pub mod status;
pub mod tools;

use crate::workspace::Workspace;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use status::{DoRequest, ToolError};
use std::borrow::Cow;
use std::sync::mpsc;

/// The protocol versions `recon mcp` speaks (SPEC 13); it answers in the
/// one the client asks for.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// Why the server stopped or never started.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Open(crate::Error),
    #[error("the MCP runtime: {0}")]
    Runtime(String),
}

type Job = Box<dyn FnOnce(&mut Workspace) + Send>;

/// The engine thread's queue: each job runs on the workspace in turn;
/// `None` ends the thread after the jobs before it.
#[derive(Clone)]
struct Engine {
    jobs: mpsc::Sender<Option<Job>>,
}

impl Engine {
    /// Starts the engine thread on the workspace `open` opens there.
    fn start(
        open: impl FnOnce() -> crate::Result<Workspace> + Send + 'static,
    ) -> Result<(Engine, std::thread::JoinHandle<()>), ServeError> {
        let (jobs, queue) = mpsc::channel::<Option<Job>>();
        let (opened, ready) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("recon-mcp-engine".into())
            .spawn(move || {
                let mut ws = match open() {
                    Ok(ws) => {
                        let _ = opened.send(Ok(()));
                        ws
                    }
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                while let Ok(Some(job)) = queue.recv() {
                    // A call that panics answers nothing (its caller is told
                    // the engine failed); the calls after it still run.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut ws)));
                }
            })
            .map_err(|e| ServeError::Runtime(e.to_string()))?;
        match ready.recv() {
            Ok(Ok(())) => Ok((Engine { jobs }, thread)),
            Ok(Err(e)) => Err(ServeError::Open(e)),
            Err(_) => Err(ServeError::Runtime("the engine thread ended".into())),
        }
    }

    /// Runs `work` on the engine thread and waits for its answer. When the
    /// caller stops waiting (a cancelled call), the work still runs to its
    /// end.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Workspace) -> T + Send + 'static,
    ) -> Result<T, McpError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |ws| {
            let _ = answer.send(work(ws));
        });
        let gone = || McpError::internal_error("the recon engine failed on this call", None);
        self.jobs.send(Some(job)).map_err(|_| gone())?;
        answered.await.map_err(|_| gone())
    }
}

/// The MCP server: its tools, answered on the engine, and the gateway's
/// tools when it has one.
#[derive(Clone)]
struct Door {
    engine: Engine,
    gate: Option<std::sync::Arc<gate::Gate>>,
}

impl ServerHandler for Door {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("recon", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "recon sends each action at most once per key. An unknown outcome means a \
                 person decides: never retry it; poll recon_status.",
            );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut all = tools::all();
        all.extend(self.gate.iter().flat_map(|g| g.tools.iter().cloned()));
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let answer = match request.name.as_ref() {
            tools::DO => {
                let call = do_request(&args, client_name(&context))?;
                self.engine
                    .run(move |ws| status::recon_do(ws, &call))
                    .await?
            }
            tools::STATUS => {
                self.engine
                    .run(move |ws| status::recon_status(ws, &args))
                    .await?
            }
            tools::UNKNOWN => {
                let (limit, after) = page(&args)?;
                self.engine
                    .run(move |ws| status::recon_unknown(ws, limit, after.as_deref()))
                    .await?
            }
            other => return self.gateway_call(other, args, client_name(&context)).await,
        };
        Ok(result(answer).into())
    }
}

impl Door {
    /// A call of one of the gateway's tools: forwarded (`pass`) or an
    /// operation (`effect`, its `key` taken out of the arguments).
    async fn gateway_call(
        &self,
        name: &str,
        mut args: Map<String, Value>,
        client: Option<String>,
    ) -> Result<CallToolResponse, McpError> {
        let call = self.gate.as_ref().and_then(|g| Some((g, g.call_of(name)?)));
        let answer = match call {
            Some((gate, gate::Call::Pass)) => {
                let forwarded = gate.forward(name, args).await;
                return forwarded
                    .map(Into::into)
                    .map_err(|lost| McpError::internal_error(lost.to_string(), None));
            }
            Some((_, gate::Call::Effect)) => {
                let key = match args.remove("key") {
                    Some(Value::String(key)) => key,
                    _ => {
                        return Err(McpError::invalid_params(
                            format!("{name} needs key (a string)"),
                            None,
                        ))
                    }
                };
                let call = DoRequest {
                    action: name.to_string(),
                    payload: Value::Object(args),
                    key,
                    client,
                };
                self.engine
                    .run(move |ws| status::recon_do(ws, &call))
                    .await?
            }
            None => {
                return Err(McpError::invalid_params(
                    format!("no tool {}", crate::domain::sanitize::escape(name)),
                    None,
                ))
            }
        };
        Ok(result(answer).into())
    }
}

/// A tool's answer as its result: the structured status, or a tool error
/// (`isError`) naming its code.
fn result(answer: Result<Value, ToolError>) -> CallToolResult {
    match answer {
        Ok(value) => CallToolResult::structured(value),
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error.text())]),
    }
}

/// The client's name: this request's metadata (2026-07-28), else the
/// `clientInfo` it gave at `initialize`.
fn client_name(context: &RequestContext<RoleServer>) -> Option<String> {
    if let Some(info) = context.meta.client_info() {
        return Some(info.name);
    }
    context.peer.peer_info().map(|p| p.client_info.name.clone())
}

fn do_request(args: &Map<String, Value>, client: Option<String>) -> Result<DoRequest, McpError> {
    let text = |name: &str| match args.get(name) {
        Some(Value::String(text)) => Ok(text.clone()),
        _ => Err(McpError::invalid_params(
            format!("recon_do needs {name} (a string)"),
            None,
        )),
    };
    let payload = args
        .get("payload")
        .cloned()
        .ok_or_else(|| McpError::invalid_params("recon_do needs a payload", None))?;
    Ok(DoRequest {
        action: text("action")?,
        payload,
        key: text("key")?,
        client,
    })
}

fn page(args: &Map<String, Value>) -> Result<(Option<usize>, Option<String>), McpError> {
    let limit = match args.get("limit") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            (n.as_u64().and_then(|n| usize::try_from(n).ok())).ok_or_else(|| {
                McpError::invalid_params("limit is a whole number from 1 to 100", None)
            })?,
        ),
    };
    let after = match args.get("after") {
        None | Some(Value::Null) => None,
        Some(Value::String(after)) => Some(after.clone()),
        Some(_) => return Err(McpError::invalid_params("after is a string", None)),
    };
    Ok((limit, after))
}

/// Registers (or re-checks) the gateway's receiver on the engine, then
/// starts the downstream server and lists its tools, and lends it to the
/// engine's workspace for the receiver's `apply`.
async fn open_gate(
    engine: &Engine,
    file: crate::gateway::Gateway,
) -> Result<std::sync::Arc<gate::Gate>, ServeError> {
    let registering = file.clone();
    engine
        .run(move |ws| gate::register(ws, &registering))
        .await
        .map_err(|e| ServeError::Runtime(e.message.to_string()))?
        .map_err(ServeError::Open)?;
    let started = gate::Gate::start(file).await;
    let gate = started
        .map(std::sync::Arc::new)
        .map_err(|lost| ServeError::Runtime(format!("the gateway's downstream: {lost}")))?;
    let lent = gate::LentApply::new(gate.clone(), tokio::runtime::Handle::current())
        .map_err(ServeError::Open)?;
    engine
        .run(move |ws| ws.apply_in_process(Box::new(lent)))
        .await
        .map_err(|e| ServeError::Runtime(e.message.to_string()))?;
    Ok(gate)
}

/// Serves MCP on stdin and stdout until the client closes them, on the
/// workspace `open` opens (on the engine thread), then lets the engine
/// finish every call it was given before returning.
pub fn serve(
    open: impl FnOnce() -> crate::Result<Workspace> + Send + 'static,
    gateway: Option<crate::gateway::Gateway>,
) -> Result<(), ServeError> {
    let (engine, thread) = Engine::start(open)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ServeError::Runtime(e.to_string()))?;
    let gate = match gateway {
        Some(file) => Some(runtime.block_on(open_gate(&engine, file))?),
        None => None,
    };
    // The gateway's receiver borrows its downstream while this serves.
    let lent = (gate.as_ref()).and_then(|gate| {
        let _entered = runtime.enter();
        let (listener, path) = crate::gateway::relay::listen(&gate.file)?;
        runtime.spawn(crate::gateway::relay::serve(
            listener,
            gate.file.clone(),
            gate.clone(),
        ));
        Some(path)
    });
    let door = Door {
        engine: engine.clone(),
        gate,
    };
    let served = runtime.block_on(async move {
        let running = door
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError::Runtime(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| ServeError::Runtime(e.to_string()))?;
        Ok::<(), ServeError>(())
    });
    // No new receiver call finds the socket; the ones under way are still
    // answered while the engine finishes its calls.
    if let Some(path) = lent {
        let _ = std::fs::remove_file(path);
    }
    let _ = engine.jobs.send(None);
    runtime.block_on(async move {
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    });
    served
}
