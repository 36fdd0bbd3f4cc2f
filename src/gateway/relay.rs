//! A running gateway lends its downstream to its receiver. `recon mcp
//! --gateway FILE` keeps one downstream server for its whole life; the
//! gateway's receiver, `recon gateway-adapter`, runs as a fresh process for
//! every call (SPEC 8), and starting the server each time (a Node program
//! takes a quarter of a second) was most of a gateway call. So the server
//! listens on a unix socket named after the file, and the adapter asks its
//! downstream through it; where no server listens (the command line or the
//! console reading while no `recon mcp` runs), the adapter starts its own
//! downstream as before.
//!
//! - One request line `{"tool", "arguments"}` and one answer line per
//!   connection: `{"result": CallToolResult}`, or `{"lost": {"timeout":
//!   MS}}` / `{"lost": {"gone": TEXT}}`, each at most [`MAX_LINE`] bytes.
//! - Only tools the file declares are called; the file is the same one:
//!   the socket's name is the SHA-256 of the file's path and bytes, so an
//!   adapter reading an edited file never reaches a downstream started
//!   from the old one.
//! - The socket lives in `/tmp/recon-gateway-UID`, a directory made with
//!   mode 0700 and used only when it is this user's own (not a link, no
//!   access for others): another user can neither call the downstream nor
//!   plant a socket. A socket left by a server that died refuses the
//!   connection and is replaced by the next server.
//! - A request once written is never sent again: an answer lost on the
//!   way is a lost answer (the operation stays `unknown`), never a retry.

use super::downstream::{Downstream, Lost};
use super::file::Gateway;
use crate::domain::bounds::MAX_LINE;
use rmcp::model::CallToolResult;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// Where the socket of the gateway `file` is, when its directory is safe
/// to use (made here when missing); `None` otherwise.
pub fn socket_path(file: &Gateway) -> Option<PathBuf> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = PathBuf::from(format!("/tmp/recon-gateway-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    let private = meta.is_dir() && meta.uid() == uid && meta.permissions().mode() & 0o077 == 0;
    if !private {
        return None;
    }
    let mut digest = Sha256::new();
    digest.update(file.path.as_os_str().as_encoded_bytes());
    digest.update([0]);
    digest.update(&file.text);
    let name: String = (digest.finalize().iter().take(16))
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(dir.join(format!("{name}.sock")))
}

/// What the server side calls each request through: the gateway's one
/// downstream.
pub trait Lender: Send + Sync + 'static {
    fn call(
        &self,
        tool: String,
        arguments: Map<String, Value>,
    ) -> impl std::future::Future<Output = Result<CallToolResult, Lost>> + Send;
}

/// Listens for the gateway's receiver on its socket, when the socket can
/// be had: not when another live server holds it, or the directory is not
/// safe. A socket left by a dead server is replaced.
pub fn listen(file: &Gateway) -> Option<(UnixListener, PathBuf)> {
    let path = socket_path(file)?;
    if std::os::unix::net::UnixStream::connect(&path).is_ok() {
        return None;
    }
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).ok()?;
    Some((listener, path))
}

/// Serves each connection on `listener` in its own task, for as long as
/// the runtime runs.
pub async fn serve<L: Lender>(listener: UnixListener, file: Gateway, lender: std::sync::Arc<L>) {
    let file = std::sync::Arc::new(file);
    while let Ok((stream, _)) = listener.accept().await {
        let (file, lender) = (file.clone(), lender.clone());
        tokio::spawn(async move { answer(stream, &file, &*lender).await });
    }
}

async fn answer<L: Lender>(stream: UnixStream, file: &Gateway, lender: &L) {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut read = BufReader::new(read).take(MAX_LINE as u64 + 1);
    if read.read_until(b'\n', &mut line).await.is_err() || line.len() > MAX_LINE {
        return;
    }
    let request: Value = match serde_json::from_slice(&line) {
        Ok(request) => request,
        Err(_) => return,
    };
    let (Some(tool), Some(Value::Object(arguments))) = (
        request["tool"].as_str().map(str::to_string),
        request.get("arguments").cloned(),
    ) else {
        return;
    };
    let answer = if file.tools.contains_key(&tool) {
        lost_or_result(lender.call(tool, arguments).await)
    } else {
        lost_or_result(Err(Lost::Gone(format!("{tool} is not the gateway's"))))
    };
    let mut text = answer.to_string();
    text.push('\n');
    let _ = write.write_all(text.as_bytes()).await;
}

fn lost_or_result(outcome: Result<CallToolResult, Lost>) -> Value {
    match outcome {
        Ok(result) => json!({"result": result}),
        Err(Lost::Timeout(ms)) => json!({"lost": {"timeout": ms}}),
        Err(Lost::Gone(why)) => json!({"lost": {"gone": why}}),
    }
}

/// How the adapter reaches the downstream for one call.
pub enum Link {
    /// Through a running gateway's socket.
    Lent(UnixStream, Duration),
    /// A server of its own, started for this call.
    Own(Box<Downstream>),
}

impl Link {
    /// The running gateway's downstream when one listens for this file,
    /// else a downstream started here.
    pub async fn open(file: &Gateway) -> Result<Link, Lost> {
        if let Some(path) = socket_path(file) {
            if let Ok(stream) = UnixStream::connect(&path).await {
                // The server bounds the downstream's answer by the file's
                // timeout; this bounds the server (a second more).
                let wait = Duration::from_millis(file.timeout_ms.saturating_add(1_000));
                return Ok(Link::Lent(stream, wait));
            }
        }
        Downstream::start(file)
            .await
            .map(|own| Link::Own(Box::new(own)))
    }

    /// Calls `tool` once; a lent link serves one call.
    pub async fn call(
        &mut self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, Lost> {
        match self {
            Link::Own(downstream) => downstream.call(tool, arguments).await,
            Link::Lent(stream, wait) => {
                let wait = *wait;
                let asked = ask(stream, tool, arguments);
                match tokio::time::timeout(wait, asked).await {
                    Ok(answer) => answer,
                    Err(_) => Err(Lost::Timeout(wait.as_millis() as u64)),
                }
            }
        }
    }

    /// Ends the call's server when it is its own.
    pub async fn stop(self) {
        if let Link::Own(downstream) = self {
            downstream.stop().await;
        }
    }
}

async fn ask(
    stream: &mut UnixStream,
    tool: &str,
    arguments: Map<String, Value>,
) -> Result<CallToolResult, Lost> {
    let gone = |why: String| Lost::Gone(format!("the running gateway: {why}"));
    let mut text = json!({"tool": tool, "arguments": arguments}).to_string();
    text.push('\n');
    stream
        .write_all(text.as_bytes())
        .await
        .map_err(|e| gone(e.to_string()))?;
    let mut line = Vec::new();
    let mut read = BufReader::new(stream).take(MAX_LINE as u64 + 1);
    read.read_until(b'\n', &mut line)
        .await
        .map_err(|e| gone(e.to_string()))?;
    if line.last() != Some(&b'\n') {
        return Err(gone("it closed the connection without an answer".into()));
    }
    let answer: Value =
        serde_json::from_slice(&line).map_err(|e| gone(format!("its answer: {e}")))?;
    if let Some(ms) = answer["lost"]["timeout"].as_u64() {
        return Err(Lost::Timeout(ms));
    }
    if let Some(why) = answer["lost"]["gone"].as_str() {
        return Err(Lost::Gone(why.to_string()));
    }
    serde_json::from_value(answer["result"].clone()).map_err(|e| gone(format!("its answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn example(path: &str, extra: &str) -> Gateway {
        let text = format!("{}{extra}", include_str!("../../examples/gateway.toml"));
        super::super::file::parse(Path::new(path), &text).expect("the example")
    }

    #[test]
    fn the_socket_is_named_after_the_files_path_and_text_so_an_edited_file_finds_no_server() {
        let one = socket_path(&example("/g/one.toml", "")).expect("a private directory");
        assert_eq!(socket_path(&example("/g/one.toml", "")), Some(one.clone()));
        assert_ne!(socket_path(&example("/g/two.toml", "")), Some(one.clone()));
        assert_ne!(
            socket_path(&example("/g/one.toml", "\n")),
            Some(one.clone())
        );
        let dir = std::fs::metadata(one.parent().expect("a directory")).expect("made");
        assert_eq!(
            dir.permissions().mode() & 0o777,
            0o700,
            "only its user enters"
        );
    }

    #[test]
    fn a_socket_left_by_a_dead_server_is_replaced_and_a_live_one_is_left_alone() {
        let file = example(&format!("/g/{}.toml", std::process::id()), "");
        let path = socket_path(&file).expect("a private directory");
        let dead = std::os::unix::net::UnixListener::bind(&path).expect("bound");
        drop(dead);
        assert!(path.exists(), "the dead server's socket is left");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let _entered = runtime.enter();
        let (live, bound) = listen(&file).expect("the dead socket is replaced");
        assert_eq!(bound, path);
        assert!(listen(&file).is_none(), "a live server's socket is its own");
        drop(live);
        let _ = std::fs::remove_file(path);
    }
}
