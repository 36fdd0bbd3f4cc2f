//! What the MCP tools answer (SPEC 13): an operation's status with the
//! advice an agent acts on, the refusals a tool reports as its error, and
//! the work each tool does on the workspace. Synchronous: the engine
//! thread runs these on the one long-lived [`Workspace`].

use crate::dispatch::DispatchOptions;
use crate::domain::origin::{check_key, op_id_of_key, Origin};
use crate::domain::{
    parse_payload, same_json, Cursor, OpState, Operation, OpsQuery, QueueFilter, SortOrder,
};
use crate::error::{Error, Refusal};
use crate::workspace::Workspace;
use serde_json::{json, Map, Value};

/// The most operations one `recon_unknown` page holds.
pub const MAX_PAGE: usize = 100;

/// A tool call that did not do what was asked: the code it names (a SPEC
/// refusal code such as `bad_key` or `duplicate_operation`, or `failed`)
/// and why, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: String,
    pub message: String,
}

impl ToolError {
    fn new(code: &str, message: impl Into<String>) -> ToolError {
        ToolError {
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// The text of the tool's error result.
    pub fn text(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

impl From<Error> for ToolError {
    fn from(error: Error) -> ToolError {
        match error.refusal() {
            Some(refusal) => ToolError::new(refusal.code(), error.to_string()),
            None => ToolError::new("failed", error.to_string()),
        }
    }
}

/// What `recon_do` was asked: an action, its payload and the agent's key.
#[derive(Debug, Clone)]
pub struct DoRequest {
    pub action: String,
    pub payload: Value,
    pub key: String,
    /// The client's name (`clientInfo.name`), where the protocol gave one.
    pub client: Option<String>,
}

/// `recon_do`: prepares and dispatches the operation `key` names, once.
/// The same key with the same action and payload returns what was
/// recorded (dispatching an operation still `prepared`); anything else
/// under that key is `duplicate_operation`.
pub fn recon_do(ws: &mut Workspace, request: &DoRequest) -> Result<Value, ToolError> {
    check_key(&request.key).map_err(|why| ToolError::new("bad_key", why))?;
    crate::domain::names::identifier("action", &request.action)
        .map_err(|why| ToolError::new("usage", why))?;
    let text = serde_json::to_string(&request.payload)
        .map_err(|e| ToolError::new("usage", e.to_string()))?;
    let payload =
        parse_payload(&text).map_err(|why| ToolError::new("usage", format!("payload {why}")))?;
    let op_id = op_id_of_key(&request.key);
    let origin = Origin::mcp(&request.key, request.client.as_deref());
    let op = match ws.operation(&op_id)? {
        Some(op) => op,
        None => match ws.prepare_from(&op_id, &request.action, &payload, Some(&origin)) {
            Ok(op) => op,
            // Another call with this key prepared it first.
            Err(Error::Refused(Refusal::DuplicateOperation(_))) => ws.require(&op_id)?,
            Err(other) => return Err(other.into()),
        },
    };
    let kept = ws.origin(&op_id)?;
    let same_key = kept.as_ref().is_some_and(|o| o.key == request.key);
    if !same_key || op.action_kind != request.action || !same_json(&op.payload, &payload) {
        return Err(ToolError::new(
            "duplicate_operation",
            format!(
                "key {} already names operation {op_id} with another action or payload; \
                 nothing was sent",
                request.key
            ),
        ));
    }
    if op.state == OpState::Prepared {
        match ws.dispatch(&op_id, DispatchOptions::default()) {
            Ok(_) => {}
            // Another call with this key dispatched it first: its outcome
            // (or `unknown`) is what this call answers.
            Err(Error::Refused(Refusal::BlindRetry { .. })) => {}
            // A failure after `unknown` was committed leaves an unknown
            // outcome, which is a result with its advice, not a tool
            // error; before it, nothing was sent and the error is told.
            Err(other) => {
                if ws.require(&op_id)?.state == OpState::Prepared {
                    return Err(other.into());
                }
            }
        }
    }
    status(ws, &op_id)
}

/// `recon_status`: the status of the operation a key or an op id names.
pub fn recon_status(ws: &Workspace, args: &Map<String, Value>) -> Result<Value, ToolError> {
    let op_id = match (args.get("key"), args.get("op_id")) {
        (Some(Value::String(key)), None) => {
            check_key(key).map_err(|why| ToolError::new("bad_key", why))?;
            op_id_of_key(key)
        }
        (None, Some(Value::String(op_id))) => op_id.clone(),
        _ => {
            return Err(ToolError::new(
                "usage",
                "recon_status takes a key or an op_id (a string), not both",
            ))
        }
    };
    status(ws, &op_id)
}

/// `recon_unknown`: unknown operations, oldest first, at most `limit`
/// (1 to 100) after the cursor `after`.
pub fn recon_unknown(
    ws: &Workspace,
    limit: Option<usize>,
    after: Option<&str>,
) -> Result<Value, ToolError> {
    let limit = limit.unwrap_or(MAX_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ToolError::new(
            "usage",
            format!("limit is from 1 to {MAX_PAGE}, not {limit}"),
        ));
    }
    let after = after
        .map(|text| Cursor::parse(text, SortOrder::Age))
        .transpose()
        .map_err(|why| ToolError::new("usage", why))?;
    let query = OpsQuery {
        filter: QueueFilter {
            state: Some(OpState::Unknown),
            ..QueueFilter::default()
        },
        sort: SortOrder::Age,
        after,
        limit: limit + 1,
    };
    let mut ops = ws.ops_page(&query)?;
    let next = (ops.len() > limit).then(|| {
        ops.truncate(limit);
        ops.last().map(|op| Cursor::of(op, SortOrder::Age).encode())
    });
    let operations = (ops.iter())
        .map(|op| status_of(ws, op))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({ "operations": operations, "next": next.flatten() }))
}

/// The status of `op_id`, or `unknown_operation`.
pub fn status(ws: &Workspace, op_id: &str) -> Result<Value, ToolError> {
    let op = ws.require(op_id)?;
    status_of(ws, &op)
}

/// `{op_id, key, state, version, effect_id?, verdict?, decided_by?,
/// decided_at?, advice}` of one operation.
fn status_of(ws: &Workspace, op: &Operation) -> Result<Value, ToolError> {
    let origin = ws.origin(&op.op_id)?;
    let mut status = json!({
        "op_id": op.op_id,
        "key": origin.map(|o| o.key),
        "state": op.state,
        "version": op.version,
        "advice": advice(op.state),
    });
    let fields = status.as_object_mut().expect("a status is an object");
    if let Some(effect) = &op.confirmed_effect_id {
        fields.insert("effect_id".into(), json!(effect));
    }
    if let Some(seen) = &op.triage.latest_observation {
        fields.insert("verdict".into(), json!(seen.verdict));
    }
    if matches!(op.state, OpState::Confirmed | OpState::NotApplied) {
        let evidence = ws.evidence(&op.op_id)?;
        if let Some(decided) = evidence.iter().rev().find(|e| e.to_version == op.version) {
            if let Some(verdict) = decided.verdict {
                fields.entry("verdict").or_insert(json!(verdict));
            }
            if let Some(by) = &decided.reviewer {
                fields.insert("decided_by".into(), json!(by));
            }
            fields.insert("decided_at".into(), json!(decided.recorded_at));
        }
    }
    Ok(status)
}

/// What an agent should do about an operation in `state`, in words.
pub fn advice(state: OpState) -> &'static str {
    match state {
        OpState::Prepared => {
            "Prepared, not sent yet. Call recon_do again with the same key, action and payload \
             to send it; it is sent once."
        }
        OpState::Unknown => {
            "The outcome is unknown: the action may or may not have happened. Do not retry, \
             not with this key and not with a new one. A person decides from the receiver's \
             evidence; poll recon_status (with this key or op_id) to learn the decision."
        }
        OpState::Confirmed => "Done: the receiver's effect is recorded. Do not send it again.",
        OpState::NotApplied => {
            "Not applied: it was decided that the action did not happen. Whether to try \
             again is a new request with a new key."
        }
    }
}
