//! `recon gateway-adapter --gateway FILE VERB`: the gateway's receiver, a
//! `recon-adapter/1` program (SPEC 8 and 13) that answers by calling the
//! downstream MCP server the file names. `apply` calls the effect tool
//! with the payload as its arguments (and the op id under
//! `pass_op_id_as`); `query` calls the evidence tool with its arguments
//! filled from the request's `op` and returns records: the found value
//! equal to the payload's is one exact match, another value a match with
//! what was found (a mismatch), an absent one no match. `close` calls the
//! declared close tool, then reads. A lost answer, a timeout, a crash or
//! an `isError` result is an `ok: false` answer: never a receipt. The
//! downstream is a running `recon mcp --gateway`'s, lent through
//! [`super::relay`], or one started for the call where none runs.
//! [`apply_lent`] gives the same `apply` answer inside a running
//! gateway, which applies its own effect calls so, with no child.

use super::downstream::{text_of, Lost};
use super::file::{Effect as EffectTool, Gateway};
use super::relay::{Lender, Link};
use crate::domain::{same_json, Ceiling, Description, Effect, Snapshot};
use crate::receiver::protocol::{self, ErrorCode, Failed, Request, Verb};
use serde_json::{Map, Value};

/// Serves one call: the request on stdin, the answer on stdout. Returns
/// the diagnostic exit code (0 answered, 3 refused, 4 unavailable).
pub fn serve(gateway: &Gateway, verb: Verb) -> std::io::Result<i32> {
    let mut input = std::io::stdin().lock();
    let answer = match protocol::read_line(&mut input) {
        Ok(raw) => answer(gateway, verb, &raw),
        Err(failed) => protocol::failure_answer(&failed),
    };
    protocol::write_line(&mut std::io::stdout().lock(), &answer)?;
    Ok(
        match answer["error"]["code"].as_str().and_then(ErrorCode::parse) {
            None => 0,
            Some(ErrorCode::Unavailable | ErrorCode::Internal) => 4,
            Some(_) => 3,
        },
    )
}

/// What the gateway says of itself: its instance, closing only when every
/// effect tool declares a close tool, and a ceiling no effect tool exceeds.
pub fn description(gateway: &Gateway) -> Description {
    let effects: Vec<&EffectTool> = (gateway.effect_tools().iter())
        .filter_map(|name| gateway.effect(name))
        .collect();
    Description {
        name: gateway.receiver.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        can_close: effects.iter().all(|e| e.close.is_some()),
        query: Ceiling {
            complete: effects.iter().all(|e| e.complete),
            authoritative: effects.iter().all(|e| e.authoritative),
        },
        mandatory: Vec::new(),
        instance: Some(gateway.instance.clone()),
        session: false,
        batch: None,
    }
}

fn failed(code: ErrorCode, message: impl Into<String>) -> Failed {
    Failed {
        code,
        message: message.into(),
    }
}

fn lost(lost: Lost) -> Failed {
    failed(ErrorCode::Unavailable, lost.to_string())
}

/// The answer to one request line.
pub fn answer(gateway: &Gateway, verb: Verb, raw: &Value) -> Value {
    let request = match protocol::parse_request(verb, raw) {
        Ok(Request::Describe) => return protocol::describe_answer(&description(gateway)),
        Ok(request) => request,
        Err(failed) => return protocol::failure_answer(&failed),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return protocol::failure_answer(&failed(ErrorCode::Internal, e.to_string())),
    };
    let answered = runtime.block_on(async {
        match request {
            Request::Apply {
                op_id,
                action_kind,
                payload,
                compensates_effect_id: None,
                ..
            } => apply(gateway, &op_id, &action_kind, &payload).await,
            Request::Apply { .. } => Err(failed(
                ErrorCode::Unsupported,
                "the gateway performs no compensation",
            )),
            Request::Query { .. } => read(gateway, raw, false).await,
            Request::Close { .. } => read(gateway, raw, true).await,
            _ => Err(failed(
                ErrorCode::Unsupported,
                "the gateway reads one op at a time",
            )),
        }
    });
    answered.unwrap_or_else(|f| protocol::failure_answer(&f))
}

/// `apply`: the effect tool, called once; its result is the receipt.
async fn apply(
    gateway: &Gateway,
    op_id: &str,
    action_kind: &str,
    payload: &Value,
) -> Result<Value, Failed> {
    let (tool, arguments) = effect_call(gateway, op_id, action_kind, payload)?;
    let mut downstream = Link::open(gateway).await.map_err(lost)?;
    let result = downstream.call(action_kind, arguments).await;
    downstream.stop().await;
    receipt_of(tool, result, (op_id, action_kind, payload))
}

/// The answer to an `apply` request line, given by a running gateway's
/// own downstream (`lender`) in its process: the answer this adapter would
/// have written, the effect tool called once. `recon mcp --gateway`
/// applies its effect calls so, starting no adapter child.
pub async fn apply_lent<L: Lender>(gateway: &Gateway, lender: &L, raw: &Value) -> Value {
    let applied = match protocol::parse_request(Verb::Apply, raw) {
        Ok(Request::Apply {
            op_id,
            action_kind,
            payload,
            compensates_effect_id: None,
            ..
        }) => match effect_call(gateway, &op_id, &action_kind, &payload) {
            Ok((tool, arguments)) => {
                let result = lender.call(action_kind.clone(), arguments).await;
                receipt_of(tool, result, (&op_id, &action_kind, &payload))
            }
            Err(failed) => Err(failed),
        },
        Ok(_) => Err(failed(
            ErrorCode::Unsupported,
            "the gateway performs no compensation",
        )),
        Err(failed) => Err(failed),
    };
    applied.unwrap_or_else(|f| protocol::failure_answer(&f))
}

/// The effect tool an apply calls and its arguments: the payload, with
/// the op id under `pass_op_id_as`.
fn effect_call<'g>(
    gateway: &'g Gateway,
    op_id: &str,
    action_kind: &str,
    payload: &Value,
) -> Result<(&'g EffectTool, Map<String, Value>), Failed> {
    let tool = gateway.effect(action_kind).ok_or_else(|| {
        failed(
            ErrorCode::Unsupported,
            format!("{action_kind} is not an effect tool of the gateway"),
        )
    })?;
    let Value::Object(mut arguments) = payload.clone() else {
        return Err(failed(
            ErrorCode::BadRequest,
            "the payload is not a JSON object",
        ));
    };
    if let Some(name) = &tool.pass_op_id_as {
        arguments.insert(name.clone(), Value::from(op_id));
    }
    Ok((tool, arguments))
}

/// The receipt answer an effect call's result is: none for a lost answer
/// or an `isError` result.
fn receipt_of(
    tool: &EffectTool,
    result: Result<rmcp::model::CallToolResult, Lost>,
    (op_id, action_kind, payload): (&str, &str, &Value),
) -> Result<Value, Failed> {
    let result = result.map_err(lost)?;
    if result.is_error == Some(true) {
        return Err(failed(
            ErrorCode::Unavailable,
            format!("{action_kind} answered isError: {}", text_of(&result)),
        ));
    }
    let effect_id = effect_id_of(
        &result,
        tool.effect_id_pointer.as_deref(),
        op_id,
        action_kind,
    )?;
    Ok(protocol::receipt_answer(&Effect {
        effect_id,
        op_id: op_id.to_string(),
        action_kind: action_kind.to_string(),
        compensates_effect_id: None,
        payload: payload.clone(),
    }))
}

/// The operation a query or close request carries as `op` (SPEC 13).
fn op_of(raw: &Value) -> Result<(String, String, Value), Failed> {
    let op = raw.get("op").and_then(Value::as_object).ok_or_else(|| {
        failed(
            ErrorCode::BadRequest,
            "the gateway reads by the request's op (SPEC 13)",
        )
    })?;
    let text = |name: &str| op.get(name).and_then(Value::as_str).map(str::to_string);
    match (text("op_id"), text("action_kind"), op.get("payload")) {
        (Some(id), Some(kind), Some(payload)) if raw["op_id"] == id.as_str() => {
            Ok((id, kind, payload.clone()))
        }
        _ => Err(failed(
            ErrorCode::BadRequest,
            "op must carry this op_id, action_kind and payload",
        )),
    }
}

/// `query` (or, with `close`, the close tool first): the evidence read as
/// a snapshot, flags as the file declares them.
async fn read(gateway: &Gateway, raw: &Value, close: bool) -> Result<Value, Failed> {
    let (op_id, action_kind, payload) = op_of(raw)?;
    let tool = gateway.effect(&action_kind).ok_or_else(|| {
        failed(
            ErrorCode::Unsupported,
            format!("{action_kind} is not an effect tool of the gateway"),
        )
    })?;
    let closing = match (close, &tool.close) {
        (false, _) => None,
        (true, Some(read)) => Some(read),
        (true, None) => return Err(failed(ErrorCode::Unsupported, "this tool cannot close")),
    };
    let bad = |why: String| failed(ErrorCode::BadRequest, why);
    let mut downstream = Link::open(gateway).await.map_err(lost)?;
    let mut ask = async |read: &super::file::Read| {
        let arguments: Map<String, Value> = read.arguments_for(&payload).map_err(bad)?;
        downstream.call(&read.tool, arguments).await.map_err(lost)
    };
    let closed = match closing {
        Some(read) => {
            let result = ask(read).await?;
            if result.is_error == Some(true) {
                return Err(failed(ErrorCode::Unavailable, text_of(&result)));
            }
            true
        }
        None => false,
    };
    let found = ask(&tool.evidence).await;
    downstream.stop().await;
    let found = found?;
    // A later query says closed only where the downstream keeps a
    // tombstone and its read says so (`closed_pointer`); never by guess.
    let closed = closed || tombstone_of(&tool.evidence, &found)?;
    let matches = matches_of(&tool.evidence, found, (&op_id, &action_kind, &payload))?;
    Ok(protocol::snapshot_answer(&Snapshot {
        op_id,
        matches,
        complete: tool.complete,
        authoritative: tool.authoritative,
        closed,
        closed_by: None,
    }))
}

/// The records an evidence read holds: none when absent; else one effect
/// (named by the op id, or by the id at the read's `effect_id_pointer`)
/// whose payload is the operation's with the found
/// value in place, so an equal value is an exact match and another value
/// a payload mismatch.
fn matches_of(
    read: &super::file::Read,
    result: rmcp::model::CallToolResult,
    (op_id, action_kind, payload): (&str, &str, &Value),
) -> Result<Vec<Effect>, Failed> {
    if result.is_error == Some(true) {
        let text = text_of(&result);
        return match &read.absent_error_contains {
            Some(absent) if text.contains(absent.as_str()) => Ok(Vec::new()),
            _ => Err(failed(
                ErrorCode::Unavailable,
                format!("{} answered isError: {text}", read.tool),
            )),
        };
    }
    let found = (result.structured_content.as_ref())
        .and_then(|s| s.pointer(&read.found_pointer))
        .ok_or_else(|| {
            failed(
                ErrorCode::Internal,
                format!("{} holds nothing at {}", read.tool, read.found_pointer),
            )
        })?;
    let mut seen = payload.clone();
    match seen.pointer_mut(&read.expected_pointer) {
        Some(slot) if !same_json(slot, found) => *slot = found.clone(),
        Some(_) => {}
        None => {
            return Err(failed(
                ErrorCode::BadRequest,
                format!("the payload has nothing at {}", read.expected_pointer),
            ))
        }
    }
    let effect_id = effect_id_of(
        &result,
        read.effect_id_pointer.as_deref(),
        op_id,
        &read.tool,
    )?;
    Ok(vec![Effect {
        effect_id,
        op_id: op_id.to_string(),
        action_kind: action_kind.to_string(),
        compensates_effect_id: None,
        payload: seen,
    }])
}

/// Whether an evidence read says the downstream closed the operation: the
/// boolean at the read's `closed_pointer` in a result that is no error;
/// false where the file names no pointer or the read is an error (an
/// absence the downstream reports as an error carries no tombstone).
fn tombstone_of(
    read: &super::file::Read,
    result: &rmcp::model::CallToolResult,
) -> Result<bool, Failed> {
    let Some(pointer) = &read.closed_pointer else {
        return Ok(false);
    };
    if result.is_error == Some(true) {
        return Ok(false);
    }
    (result.structured_content.as_ref())
        .and_then(|s| s.pointer(pointer))
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            failed(
                ErrorCode::Internal,
                format!("{}'s result holds no boolean at {pointer}", read.tool),
            )
        })
}

/// The effect's id in a tool's result: the string at `pointer` in its
/// structured content, or the op id where the file names no pointer.
fn effect_id_of(
    result: &rmcp::model::CallToolResult,
    pointer: Option<&str>,
    op_id: &str,
    tool: &str,
) -> Result<String, Failed> {
    let Some(pointer) = pointer else {
        return Ok(op_id.to_string());
    };
    (result.structured_content.as_ref())
        .and_then(|s| s.pointer(pointer))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            failed(
                ErrorCode::Internal,
                format!("{tool}'s result holds no string at {pointer}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;
    use serde_json::json;

    fn read(effect_id_pointer: Option<&str>) -> super::super::file::Read {
        super::super::file::Read {
            tool: "read_text_file".into(),
            arguments: Default::default(),
            found_pointer: "/content".into(),
            expected_pointer: "/content".into(),
            absent_error_contains: None,
            effect_id_pointer: effect_id_pointer.map(str::to_string),
            closed_pointer: Some("/closed".into()),
        }
    }

    /// The calls a downstream was given: each tool and its arguments.
    type Calls = Vec<(String, Map<String, Value>)>;

    /// A downstream that answers every call with `answer`, keeping each
    /// call it was given.
    struct Lent {
        calls: std::sync::Mutex<Calls>,
        answer: Result<CallToolResult, Lost>,
    }

    impl Lender for Lent {
        async fn call(
            &self,
            tool: String,
            arguments: Map<String, Value>,
        ) -> Result<CallToolResult, Lost> {
            (self.calls.lock().expect("calls")).push((tool, arguments));
            self.answer.clone()
        }
    }

    /// `apply_lent` of `request` on the example gateway (its op id passed
    /// as `request_id`, its effect id at `/id`): the answer and the calls.
    fn lent(answer: Result<CallToolResult, Lost>, request: &Value) -> (Value, Calls) {
        let text = include_str!("../../examples/gateway.toml")
            .replace(
                "can_close = false",
                "can_close = false\npass_op_id_as = \"request_id\"\neffect_id_pointer = \"/id\"",
            )
            .replace(
                "absent_error_contains = \"ENOENT\"",
                "absent_error_contains = \"ENOENT\"\neffect_id_pointer = \"/id\"",
            );
        let gateway =
            super::super::file::parse(std::path::Path::new("/g.toml"), &text).expect("the example");
        let lender = Lent {
            calls: Default::default(),
            answer,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let answer = runtime.block_on(apply_lent(&gateway, &lender, request));
        (answer, lender.calls.into_inner().expect("calls"))
    }

    fn apply_request(compensates: Option<&str>) -> Value {
        json!({"recon_adapter": 1, "workspace": "W", "op": {
            "op_id": "mcp-1", "action_kind": "write_file",
            "payload": {"path": "/a", "content": "hi"},
            "compensates_effect_id": compensates}})
    }

    #[test]
    fn an_apply_in_process_calls_the_effect_tool_once_and_answers_the_adapters_receipt() {
        let found = CallToolResult::structured(json!({"id": "E-9"}));
        let (answer, calls) = lent(Ok(found), &apply_request(None));
        assert_eq!(answer["ok"], true, "{answer}");
        assert_eq!(answer["receipt"]["effect_id"], "E-9");
        assert_eq!(answer["receipt"]["op_id"], "mcp-1");
        assert_eq!(
            answer["receipt"]["payload"],
            json!({"path": "/a", "content": "hi"}),
            "the receipt's payload is the operation's, without the op id argument"
        );
        assert_eq!(calls.len(), 1, "called once");
        assert_eq!(calls[0].0, "write_file");
        let sent = json!({"path": "/a", "content": "hi", "request_id": "mcp-1"});
        assert_eq!(Value::Object(calls[0].1.clone()), sent);
    }

    #[test]
    fn an_apply_in_process_whose_answer_is_lost_or_an_error_is_no_receipt_and_is_not_sent_again() {
        let is_error = CallToolResult::error(vec![rmcp::model::ContentBlock::text("EACCES")]);
        let outcomes = [
            (Err(Lost::Timeout(5)), "no answer within 5 ms"),
            (Err(Lost::Gone("pipe closed".into())), "answer was lost"),
            (Ok(is_error), "write_file answered isError: EACCES"),
        ];
        for (outcome, said) in outcomes {
            let (answer, calls) = lent(outcome, &apply_request(None));
            assert_eq!(answer["ok"], false, "{answer}");
            assert_eq!(answer["error"]["code"], "unavailable", "{answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(said), "{message}");
            assert_eq!(calls.len(), 1, "sent once, never again");
        }
    }

    #[test]
    fn an_apply_in_process_of_a_compensation_or_another_tool_is_refused_before_any_call() {
        let ok = || Ok(CallToolResult::structured(json!({"id": "E-9"})));
        let (answer, calls) = lent(ok(), &apply_request(Some("E-1")));
        assert_eq!(answer["error"]["code"], "unsupported", "{answer}");
        assert!(calls.is_empty());
        let mut other = apply_request(None);
        other["op"]["action_kind"] = json!("list_directory");
        let (answer, calls) = lent(ok(), &other);
        assert_eq!(answer["error"]["code"], "unsupported", "{answer}");
        assert!(calls.is_empty());
        let (answer, calls) = lent(ok(), &json!({"recon_adapter": 1}));
        assert_eq!(answer["error"]["code"], "bad_request", "{answer}");
        assert!(calls.is_empty());
    }

    #[test]
    fn a_read_names_the_effect_by_its_pointer_as_the_receipt_did_else_by_the_op_id() {
        let found = || CallToolResult::structured(json!({"content": "hi", "id": "E-7"}));
        let payload = json!({"path": "/a", "content": "hi"});
        let op = ("op-1", "write_file", &payload);
        let by_pointer = matches_of(&read(Some("/id")), found(), op).expect("a match");
        assert_eq!(by_pointer[0].effect_id, "E-7");
        let by_op = matches_of(&read(None), found(), op).expect("a match");
        assert_eq!(by_op[0].effect_id, "op-1");
        let missing = matches_of(&read(Some("/nothing")), found(), op).unwrap_err();
        assert!(
            missing.message.contains("no string at /nothing"),
            "{}",
            missing.message
        );
    }

    #[test]
    fn a_read_says_closed_only_where_the_downstream_says_so_at_its_pointer() {
        let result = |value: Value| CallToolResult::structured(value);
        let says = |v| tombstone_of(&read(None), &result(v));
        assert_eq!(
            says(json!({"content": "hi", "closed": true})).ok(),
            Some(true)
        );
        assert_eq!(
            says(json!({"content": "hi", "closed": false})).ok(),
            Some(false)
        );
        assert!(
            says(json!({"content": "hi"})).is_err(),
            "a pointer to nothing"
        );
        let mut unnamed = read(None);
        unnamed.closed_pointer = None;
        let no_pointer = tombstone_of(&unnamed, &result(json!({"closed": true})));
        assert_eq!(no_pointer.ok(), Some(false));
    }
}
