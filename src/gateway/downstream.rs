//! The downstream MCP server a gateway file names, from the client side
//! (the official Rust SDK): started as a child with the adapter
//! environment of SPEC 8 (an allowlist plus the variables the file
//! names), in `/`, killed when dropped. Each call is bounded by the file's
//! timeout; a call with no answer (a timeout, a crash, a closed pipe) is a
//! lost answer, never a result.

use super::file::{Gateway, DEFAULT_TIMEOUT_MS};
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};
use std::process::Stdio;
use std::time::Duration;

/// Variables every adapter runs with (SPEC 8), besides those named.
const ALLOWED: &[&str] = &["PATH", "HOME", "LANG", "TZ"];

/// A started downstream server, initialized.
pub struct Downstream {
    client: RunningService<RoleClient, ()>,
    child: tokio::process::Child,
    timeout: Duration,
}

/// A downstream call that gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// No answer within the timeout; the server was killed.
    Timeout(u64),
    /// The server died or closed its pipe, or answered garbage.
    Gone(String),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Timeout(ms) => write!(f, "the downstream gave no answer within {ms} ms"),
            Lost::Gone(why) => write!(f, "the downstream's answer was lost: {why}"),
        }
    }
}

impl Downstream {
    /// Starts the server and completes the MCP handshake (it answers in
    /// whichever protocol version it supports).
    pub async fn start(gateway: &Gateway) -> Result<Downstream, Lost> {
        let mut command = tokio::process::Command::new(&gateway.command);
        command
            .args(&gateway.args)
            .current_dir("/")
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (name, value) in std::env::vars_os() {
            let text = name.to_string_lossy();
            let named = gateway.env.iter().any(|n| *n == text);
            if ALLOWED.contains(&text.as_ref()) || text.starts_with("LC_") || named {
                command.env(&name, value);
            }
        }
        let shown = gateway.command.display().to_string();
        let mut child = command
            .spawn()
            .map_err(|e| Lost::Gone(format!("cannot start {shown}: {e}")))?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(Lost::Gone("the downstream has no pipes".into()));
        };
        let timeout = Duration::from_millis(gateway.timeout_ms);
        // Starting a server (a runtime, its modules) may take longer than
        // one call is allowed to: its handshake has at least the default.
        let start_ms = gateway.timeout_ms.max(DEFAULT_TIMEOUT_MS);
        let handshake = ().serve((stdout, stdin));
        let started = tokio::time::timeout(Duration::from_millis(start_ms), handshake).await;
        let client = match started {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(Lost::Gone(format!("the handshake failed: {e}"))),
            Err(_) => return Err(Lost::Timeout(start_ms)),
        };
        Ok(Downstream {
            client,
            child,
            timeout,
        })
    }

    /// Every tool the server lists.
    pub async fn tools(&self) -> Result<Vec<Tool>, Lost> {
        match tokio::time::timeout(self.timeout, self.client.peer().list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(Lost::Gone(e.to_string())),
            Err(_) => Err(Lost::Timeout(self.timeout.as_millis() as u64)),
        }
    }

    /// Calls `name` with `arguments`; a result with `isError` is a result.
    pub async fn call(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, Lost> {
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        let call = self.client.peer().call_tool(params);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(Lost::Gone(e.to_string())),
            Err(_) => {
                let _ = self.child.start_kill();
                Err(Lost::Timeout(self.timeout.as_millis() as u64))
            }
        }
    }

    /// Ends the session and the server.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.client.cancel().await;
        let _ = self.child.wait().await;
    }
}

/// The text blocks of a result, joined.
pub fn text_of(result: &CallToolResult) -> String {
    (result.content.iter())
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
