//! `recon mcp --gateway FILE` (SPEC 13): the downstream's tools as the
//! agent sees them. `pass` tools are forwarded as they are; each `effect`
//! tool gets a required `key` (removed before forwarding) and recon's
//! status as its output, and a call of it is a `recon_do` with the tool's
//! name as the action kind, routed to the gateway's receiver, whose
//! `apply` this process answers itself through its running downstream
//! ([`LentApply`]): no adapter child. Undeclared and `evidence` tools are not
//! exposed. Before serving, the gateway's receiver is registered (or
//! re-checked) on a workspace; in team mode it must already be.

use super::tools;
use crate::dispatch::adapter::Reply;
use crate::dispatch::InProcessApply;
use crate::domain::{FailureKind, Refusal, Registration};
use crate::gateway::downstream::{Downstream, Lost};
use crate::gateway::{Gateway, ToolMode};
use crate::receiver::rules::failure;
use crate::store::Location;
use crate::workspace::{NewReceiver, Workspace};
use rmcp::model::Tool;
use serde_json::{json, Map, Value};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

/// The started gateway: its file, its downstream (none after a call lost
/// it: the next call starts another), the tools it exposes.
pub struct Gate {
    pub file: Gateway,
    downstream: tokio::sync::Mutex<Option<Downstream>>,
    pub tools: Vec<Tool>,
}

/// What a call of a gateway tool is.
pub enum Call {
    /// Forward to the downstream as it is.
    Pass,
    /// An operation: `recon_do` of this tool.
    Effect,
}

impl Gate {
    /// Starts the downstream and lists its tools.
    pub async fn start(file: Gateway) -> Result<Gate, Lost> {
        let downstream = Downstream::start(&file).await?;
        let listed = downstream.tools().await?;
        let tools = exposed(&file, listed);
        Ok(Gate {
            file,
            downstream: tokio::sync::Mutex::new(Some(downstream)),
            tools,
        })
    }

    /// What calling `name` is, if the gateway exposes it.
    pub fn call_of(&self, name: &str) -> Option<Call> {
        if !self.tools.iter().any(|t| t.name == name) {
            return None;
        }
        match self.file.tools.get(name) {
            Some(ToolMode::Pass) => Some(Call::Pass),
            Some(ToolMode::Effect(_)) => Some(Call::Effect),
            _ => None,
        }
    }

    /// Calls a downstream tool, one call at a time: a `pass` call, or the
    /// receiver's call lent through `gateway::relay`. A lost answer is the
    /// caller's error, and the downstream that lost it is stopped (it may
    /// be dead or hung); the next call starts a fresh one.
    pub async fn forward(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<rmcp::model::CallToolResult, Lost> {
        let mut slot = self.downstream.lock().await;
        let mut downstream = match slot.take() {
            Some(running) => running,
            None => Downstream::start(&self.file).await?,
        };
        let result = downstream.call(name, arguments).await;
        match result {
            Ok(_) => *slot = Some(downstream),
            Err(_) => downstream.stop().await,
        }
        result
    }
}

impl crate::gateway::relay::Lender for Gate {
    async fn call(
        &self,
        tool: String,
        arguments: Map<String, Value>,
    ) -> Result<rmcp::model::CallToolResult, Lost> {
        self.forward(&tool, arguments).await
    }
}

/// The gateway's receiver's `apply`, answered in this process through the
/// running downstream ([`Gate::forward`]) instead of by a
/// `recon gateway-adapter` child relaying the call back through the
/// socket: the same answer line, given after `unknown` is committed, the
/// effect tool called once. It serves only the registration that names
/// this gateway's adapter with this file; reads, closes and every other
/// process's calls still run the adapter.
pub struct LentApply {
    gate: Arc<Gate>,
    runtime: tokio::runtime::Handle,
    args: Vec<String>,
}

impl LentApply {
    /// The gate's apply, run on `runtime` (the one its downstream lives on).
    pub fn new(gate: Arc<Gate>, runtime: tokio::runtime::Handle) -> crate::Result<LentApply> {
        let (_, args) = command(&gate.file)?;
        Ok(LentApply {
            gate,
            runtime,
            args,
        })
    }
}

impl InProcessApply for LentApply {
    fn serves(&self, registration: &Registration) -> bool {
        !registration.builtin
            && registration.name == self.gate.file.receiver
            && registration.args == self.args
    }

    /// Runs the call on the gateway's runtime and waits for its answer, at
    /// most `timeout` (the downstream's own timeout, the file's, is
    /// shorter, and a call past it is lost there).
    fn apply(&self, request: &Value, timeout: Duration) -> Reply {
        let (answer, answered) = std::sync::mpsc::channel();
        let (gate, request) = (self.gate.clone(), request.clone());
        self.runtime.spawn(async move {
            let line = crate::gateway::adapter::apply_lent(&gate.file, &*gate, &request).await;
            let _ = answer.send(line);
        });
        let answer = match answered.recv_timeout(timeout) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(failure(
                FailureKind::Timeout,
                format!(
                    "the gateway's downstream gave no answer within {} ms",
                    timeout.as_millis()
                ),
            )),
            Err(RecvTimeoutError::Disconnected) => Err(failure(
                FailureKind::Crash,
                "the gateway stopped before its downstream answered",
            )),
        };
        Reply {
            answer,
            exit_code: None,
            stderr: String::new(),
        }
    }
}

/// The downstream's tools recon exposes, in its order: `pass` ones as
/// they are, `effect` ones with a key and recon's status. A downstream
/// tool named like one of recon's own is not exposed.
fn exposed(file: &Gateway, listed: Vec<Tool>) -> Vec<Tool> {
    let own = [tools::DO, tools::STATUS, tools::UNKNOWN];
    (listed.into_iter())
        .filter(|tool| !own.contains(&tool.name.as_ref()))
        .filter_map(|tool| match file.tools.get(tool.name.as_ref()) {
            Some(ToolMode::Pass) => Some(tool),
            Some(ToolMode::Effect(_)) => Some(effect_tool(tool)),
            _ => None,
        })
        .collect()
}

fn effect_tool(mut tool: Tool) -> Tool {
    let mut input = (*tool.input_schema).clone();
    let properties = input.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(properties) = properties {
        properties.insert("key".into(), tools::key_schema());
    }
    let required = input.entry("required").or_insert_with(|| json!([]));
    if let Value::Array(required) = required {
        required.push(json!("key"));
    }
    tool.input_schema = Arc::new(input);
    let Value::Object(status) = tools::status_schema() else {
        return tool;
    };
    tool.output_schema = Some(Arc::new(status));
    let said = tool.description.as_deref().unwrap_or_default().to_string();
    tool.description = Some(
        format!(
            "{said} Sent through recon at most once per key: an unknown outcome means a person \
             decides; do not retry it, poll recon_status."
        )
        .trim()
        .to_string()
        .into(),
    );
    tool
}

/// The gateway receiver's command line: this recon, `gateway-adapter`,
/// the file's absolute path.
fn command(file: &Gateway) -> crate::Result<(std::path::PathBuf, Vec<String>)> {
    let program = std::env::current_exe().map_err(crate::error::StoreError::Io)?;
    let args = vec![
        "gateway-adapter".to_string(),
        "--gateway".to_string(),
        file.path.display().to_string(),
    ];
    Ok((program, args))
}

/// Registers the gateway's receiver on a workspace, or re-checks the one
/// registered: refused `receiver_exists` when the name is taken by
/// another program, `receiver_changed` when the file now declares another
/// instance or other claims (`recon receivers update` or `check --accept`
/// stores them). In team mode it only re-checks, and refuses
/// (`unknown_receiver`) when the owner has not registered it.
pub fn register(ws: &mut Workspace, file: &Gateway) -> crate::Result<()> {
    let existing = (ws.receivers()?.into_iter()).find(|r| r.name == file.receiver);
    let team = matches!(ws.location(), Location::Database(_));
    let (program, args) = command(file)?;
    match existing {
        Some(registered) if registered.args != args => {
            Err(Refusal::ReceiverExists(file.receiver.clone()).into())
        }
        Some(_) => {
            let check = ws.check_receiver(&file.receiver)?;
            let (was, now) = (&check.stored, &check.current);
            let what = if was.instance != now.instance {
                Some("instance")
            } else if was.can_close != now.can_close || was.query != now.query {
                Some("claims")
            } else {
                None
            };
            match what {
                Some(what) => Err(Refusal::ReceiverChanged {
                    receiver: file.receiver.clone(),
                    what: what.to_string(),
                }
                .into()),
                None => Ok(()),
            }
        }
        None if team => Err(Refusal::UnknownReceiver(file.receiver.clone()).into()),
        None => {
            let actions = file.effect_tools();
            ws.register_receiver(&NewReceiver {
                name: &file.receiver,
                actions: &actions,
                program: &program,
                args: &args,
                timeout_ms: None,
                env: &file.env,
            })?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Description;

    fn registration(name: &str, actions: &[&str]) -> Registration {
        Registration {
            id: 1,
            version: 1,
            name: name.into(),
            actions: actions.iter().map(|a| a.to_string()).collect(),
            builtin: false,
            program: "/usr/bin/recon".into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout_ms: 30_000,
            describe_sha256: "0".repeat(64),
            describe: Description::builtin(true),
        }
    }

    fn lent(runtime: tokio::runtime::Handle) -> LentApply {
        let text = include_str!("../../examples/gateway.toml");
        let file = crate::gateway::file::parse(std::path::Path::new("/g/gateway.toml"), text)
            .expect("the example");
        let gate = Gate {
            file,
            downstream: tokio::sync::Mutex::new(None),
            tools: Vec::new(),
        };
        LentApply::new(Arc::new(gate), runtime).expect("the command line")
    }

    #[test]
    fn only_the_registration_naming_this_gateways_adapter_and_file_is_applied_in_process() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let lent = lent(runtime.handle().clone());
        let mut ours = registration("files", &["write_file"]);
        ours.args = ["gateway-adapter", "--gateway", "/g/gateway.toml"]
            .map(String::from)
            .into();
        assert!(lent.serves(&ours));
        let mut renamed = ours.clone();
        renamed.name = "mail".into();
        assert!(!lent.serves(&renamed), "another receiver");
        let mut other_file = ours.clone();
        other_file.args[2] = "/g/other.toml".into();
        assert!(!lent.serves(&other_file), "another gateway's adapter");
        let mut ledger = ours.clone();
        ledger.builtin = true;
        assert!(!lent.serves(&ledger), "recon's own ledger");
    }

    #[test]
    fn an_apply_the_gateway_cannot_answer_is_a_timeout_or_a_crash_never_a_receipt() {
        let request = json!({"recon_adapter": 1});
        let idle = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        // A runtime nobody drives: the call never runs, the wait ends.
        let reply = lent(idle.handle().clone()).apply(&request, Duration::from_millis(10));
        let failure = reply.answer.expect_err("no answer");
        assert_eq!(failure.kind, FailureKind::Timeout, "{}", failure.detail);
        assert!(
            failure.detail.contains("within 10 ms"),
            "{}",
            failure.detail
        );
        assert_eq!((reply.exit_code, reply.stderr.as_str()), (None, ""));
        let ended = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let handle = ended.handle().clone();
        drop(ended);
        let reply = lent(handle).apply(&request, Duration::from_secs(30));
        let failure = reply.answer.expect_err("no answer");
        assert_eq!(failure.kind, FailureKind::Crash, "{}", failure.detail);
    }
}
