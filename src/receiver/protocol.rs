//! `recon-adapter/1` on the wire: one JSON object on one line each way.
//!
//! Both sides live here so they cannot drift: the requests recon writes and
//! the answers it parses (the client, `receiver::process`), and the answers
//! an adapter written in Rust writes for the requests it reads ([`serve`],
//! [`answer`]), which is how the built-in ledger speaks the protocol. Parsing
//! is strict about what the contract needs (the protocol number, `ok`, the
//! fields of each answer) and ignores every field it does not know, on both
//! sides, so either can grow. Judging an answer (does this receipt belong to
//! the request, what may these flags claim) is not parsing: that is
//! `receiver::rules`.

use super::Receiver;
use crate::domain::{
    names, parse_json_slice, whole, Ceiling, Description, Effect, EffectRequest, Snapshot,
};
use crate::error::{Error, Refusal, StoreError};
use serde_json::{json, Map, Value};
use std::io::{BufRead, Read, Write};

/// The protocol number every request and answer carries.
pub const PROTOCOL: u64 = 1;
/// The longest answer line recon reads (and request line an adapter
/// reads): the domain's bound, which the largest accepted payload is
/// derived from (`domain::bounds`).
pub use crate::domain::bounds::MAX_LINE;

/// What recon asks an adapter to do; the last word of its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Describe,
    Apply,
    Query,
    Close,
}

impl Verb {
    pub const ALL: [Verb; 4] = [Verb::Describe, Verb::Apply, Verb::Query, Verb::Close];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Describe => "describe",
            Verb::Apply => "apply",
            Verb::Query => "query",
            Verb::Close => "close",
        }
    }

    pub fn parse(text: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == text)
    }
}

/// The codes of an `ok: false` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    OperationClosed,
    Unsupported,
    BadRequest,
    Unavailable,
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 5] = [
        ErrorCode::OperationClosed,
        ErrorCode::Unsupported,
        ErrorCode::BadRequest,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::OperationClosed => "operation_closed",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The code an adapter answers for a library error.
    pub fn of(error: &Error) -> ErrorCode {
        match error.cause() {
            Error::Refused(Refusal::OperationClosed(_)) => ErrorCode::OperationClosed,
            Error::Refused(Refusal::CloseUnsupported { .. })
            | Error::Store(StoreError::ReceiverUnsupported(_)) => ErrorCode::Unsupported,
            Error::Refused(_) | Error::Invalid(_) => ErrorCode::BadRequest,
            Error::Store(
                StoreError::Locked(_)
                | StoreError::MissingDatabase(_)
                | StoreError::MissingWorkspace(_)
                | StoreError::Unavailable(_),
            ) => ErrorCode::Unavailable,
            Error::Store(_) | Error::AfterCommit { .. } => ErrorCode::Internal,
        }
    }
}

/// An `ok: false` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub code: ErrorCode,
    pub message: String,
}

impl Failed {
    /// The answer for a library error: its code, and its message without
    /// the code said again. (A store that cannot be reached reads
    /// `unavailable: ...` where no code stands beside it; here one does,
    /// and recon prints the two as `code: message`.)
    fn of(error: &Error) -> Self {
        let code = ErrorCode::of(error);
        let text = error.to_string();
        let message = match text.strip_prefix(code.as_str()) {
            Some(rest) => rest.strip_prefix(": ").unwrap_or(&text),
            None => &text,
        };
        Failed {
            code,
            message: message.to_string(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Failed {
            code: ErrorCode::BadRequest,
            message: message.into(),
        }
    }
}

/// The SHA-256 of a request or answer, over its canonical JSON: what an
/// evidence row names as the answer it rests on.
pub fn sha256_of(value: &Value) -> String {
    crate::domain::canonical_sha256(value)
}

fn envelope(fields: Value) -> Value {
    let mut object = Map::new();
    object.insert("recon_adapter".into(), Value::from(PROTOCOL));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Value::Object(object)
}

fn effect_json(effect: &Effect) -> Value {
    json!({
        "effect_id": effect.effect_id,
        "op_id": effect.op_id,
        "action_kind": effect.action_kind,
        "payload": effect.payload,
        "compensates_effect_id": effect.compensates_effect_id,
    })
}

/// The request recon writes for a verb. Every request but `describe`
/// names the workspace it comes from, so an adapter that serves several
/// workspaces keeps their equal op ids apart.
pub fn request(
    verb: Verb,
    workspace: &str,
    op: &EffectRequest<'_>,
    authorized_by: Option<&str>,
) -> Value {
    match verb {
        Verb::Describe => envelope(json!({})),
        Verb::Apply => envelope(json!({"workspace": workspace, "op": {
            "op_id": op.op_id,
            "action_kind": op.action_kind,
            "payload": op.payload,
            "compensates_effect_id": op.compensates_effect_id,
        }})),
        // From the MCP wave, reads carry the operation too (SPEC 13), so
        // an adapter that reads by the payload (the gateway) can.
        Verb::Query => envelope(json!({"workspace": workspace, "op_id": op.op_id,
            "op": read_op(op)})),
        Verb::Close => envelope(json!({
            "workspace": workspace,
            "op_id": op.op_id,
            "authorized_by": authorized_by,
            "op": read_op(op),
        })),
    }
}

/// `{op_id, action_kind, payload}` of a query or close request.
fn read_op(op: &EffectRequest<'_>) -> Value {
    json!({"op_id": op.op_id, "action_kind": op.action_kind, "payload": op.payload})
}

pub fn describe_answer(description: &Description) -> Value {
    description.answer()
}

pub fn receipt_answer(effect: &Effect) -> Value {
    envelope(json!({"ok": true, "receipt": effect_json(effect)}))
}

pub fn snapshot_answer(snapshot: &Snapshot) -> Value {
    let mut answer = envelope(json!({
        "ok": true,
        "matches": snapshot.matches.iter().map(effect_json).collect::<Vec<_>>(),
        "complete": snapshot.complete,
        "authoritative": snapshot.authoritative,
        "closed": snapshot.closed,
    }));
    if let (Some(closed_by), Value::Object(fields)) = (&snapshot.closed_by, &mut answer) {
        fields.insert("closed_by".into(), Value::from(closed_by.as_str()));
    }
    answer
}

pub fn failure_answer(failed: &Failed) -> Value {
    envelope(json!({
        "ok": false,
        "error": {"code": failed.code.as_str(), "message": failed.message},
    }))
}

/// A request as an adapter reads it. `workspace` is the id of the
/// workspace (or team database) that sent it: the scope of its op ids.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Describe,
    Apply {
        workspace: String,
        op_id: String,
        action_kind: String,
        payload: Value,
        compensates_effect_id: Option<String>,
    },
    Query {
        workspace: String,
        op_id: String,
    },
    Close {
        workspace: String,
        op_id: String,
        authorized_by: String,
    },
    /// A query carrying `op_ids` (`"batch": N` in describe).
    QueryBatch {
        workspace: String,
        op_ids: Vec<String>,
    },
    /// A close carrying `op_ids`.
    CloseBatch {
        workspace: String,
        op_ids: Vec<String>,
        authorized_by: String,
    },
}

fn text_field(object: &Map<String, Value>, name: &str) -> Result<String, Failed> {
    match object.get(name) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        _ => Err(Failed::bad_request(format!(
            "{name} must be a non-empty string"
        ))),
    }
}

fn optional_text(object: &Map<String, Value>, name: &str) -> Result<Option<String>, Failed> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(Failed::bad_request(format!(
            "{name} must be a string or null"
        ))),
    }
}

fn op_ids_field(object: &Map<String, Value>) -> Result<Vec<String>, Failed> {
    let bad = || Failed::bad_request("op_ids must be an array of non-empty strings");
    let items = object
        .get("op_ids")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    items
        .iter()
        .map(|item| match item {
            Value::String(id) if !id.is_empty() => Ok(id.clone()),
            _ => Err(bad()),
        })
        .collect()
}

/// The request recon writes for a batch of `verb` (`query` or `close`)
/// about `op_ids`, answered with one result per id, in order.
pub fn batch_request(
    verb: Verb,
    workspace: &str,
    op_ids: &[&str],
    authorized_by: Option<&str>,
) -> Value {
    let mut request = envelope(json!({"workspace": workspace, "op_ids": op_ids}));
    if verb == Verb::Close {
        request["authorized_by"] = json!(authorized_by);
    }
    request
}

/// The answer to a batch: each result exactly what a single answer would be.
pub fn batch_answer(results: Vec<Value>) -> Value {
    envelope(json!({ "results": results }))
}

/// Reads a request for `verb`: the protocol number first, then the fields
/// the verb needs.
pub fn parse_request(verb: Verb, value: &Value) -> Result<Request, Failed> {
    let object = value
        .as_object()
        .ok_or_else(|| Failed::bad_request("the request is not a JSON object"))?;
    if object.get("recon_adapter") != Some(&Value::from(PROTOCOL)) {
        return Err(Failed::bad_request("recon_adapter must be 1"));
    }
    Ok(match verb {
        Verb::Describe => Request::Describe,
        Verb::Apply => {
            let op = object
                .get("op")
                .and_then(Value::as_object)
                .ok_or_else(|| Failed::bad_request("op must be an object"))?;
            Request::Apply {
                workspace: text_field(object, "workspace")?,
                op_id: text_field(op, "op_id")?,
                action_kind: text_field(op, "action_kind")?,
                payload: op
                    .get("payload")
                    .cloned()
                    .ok_or_else(|| Failed::bad_request("op.payload is missing"))?,
                compensates_effect_id: optional_text(op, "compensates_effect_id")?,
            }
        }
        Verb::Query | Verb::Close if object.contains_key("op_ids") => {
            let workspace = text_field(object, "workspace")?;
            let op_ids = op_ids_field(object)?;
            match verb {
                Verb::Query => Request::QueryBatch { workspace, op_ids },
                _ => Request::CloseBatch {
                    workspace,
                    op_ids,
                    authorized_by: text_field(object, "authorized_by")?,
                },
            }
        }
        Verb::Query => Request::Query {
            workspace: text_field(object, "workspace")?,
            op_id: text_field(object, "op_id")?,
        },
        Verb::Close => Request::Close {
            workspace: text_field(object, "workspace")?,
            op_id: text_field(object, "op_id")?,
            authorized_by: text_field(object, "authorized_by")?,
        },
    })
}

/// Reads one line of at most [`MAX_LINE`] bytes and parses it as JSON, strictly
/// (a duplicate key is a `bad_request`).
pub fn read_line(input: &mut dyn BufRead) -> Result<Value, Failed> {
    let mut line = Vec::new();
    input
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| Failed::bad_request(format!("cannot read the request: {e}")))?;
    if line.len() > MAX_LINE {
        return Err(Failed::bad_request(format!(
            "the request is longer than {MAX_LINE} bytes"
        )));
    }
    parse_json_slice(&line).map_err(|e| Failed::bad_request(format!("the request {e}")))
}

/// What a receiver answers to one parsed request.
pub fn answer(receiver: &mut dyn Receiver, request: &Request) -> Value {
    let result = match request {
        Request::Describe => return describe_answer_of(receiver),
        Request::Apply {
            workspace,
            op_id,
            action_kind,
            payload,
            compensates_effect_id,
        } => receiver
            .apply(
                workspace,
                &EffectRequest {
                    op_id,
                    action_kind,
                    payload,
                    compensates_effect_id: compensates_effect_id.as_deref(),
                },
            )
            .map(|effect| receipt_answer(&effect)),
        Request::Query { workspace, op_id } => receiver
            .query(workspace, op_id)
            .map(|s| snapshot_answer(&s)),
        Request::Close {
            workspace,
            op_id,
            authorized_by,
        } => receiver
            .close(workspace, op_id, authorized_by)
            .map(|s| snapshot_answer(&s)),
        Request::QueryBatch { workspace, op_ids } => {
            return batch_answer(each_answer(receiver.query_batch(workspace, op_ids)))
        }
        Request::CloseBatch {
            workspace,
            op_ids,
            authorized_by,
        } => {
            let snapshots = receiver.close_batch(workspace, op_ids, authorized_by);
            return batch_answer(each_answer(snapshots));
        }
    };
    result.unwrap_or_else(|error| failure_answer(&Failed::of(&error)))
}

fn each_answer(snapshots: Vec<crate::error::Result<Snapshot>>) -> Vec<Value> {
    snapshots
        .into_iter()
        .map(|result| match result {
            Ok(snapshot) => snapshot_answer(&snapshot),
            Err(error) => failure_answer(&Failed::of(&error)),
        })
        .collect()
}

fn describe_answer_of(receiver: &mut dyn Receiver) -> Value {
    match receiver.describe() {
        Ok(description) => describe_answer(&description),
        Err(error) => failure_answer(&Failed::of(&error)),
    }
}

/// Serves one call: reads the request line from `input`, answers it, and
/// writes the answer line to `output`. What an adapter written in Rust runs
/// as its whole `main`.
pub fn serve(
    receiver: &mut dyn Receiver,
    verb: Verb,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<()> {
    let answer = match read_line(input).and_then(|value| parse_request(verb, &value)) {
        Ok(request) => answer(receiver, &request),
        Err(failed) => failure_answer(&failed),
    };
    write_line(output, &answer)
}

/// How an adapter was started: for one call of a verb, or as a session
/// (`PROGRAM ARG... session`) answering request after request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invocation {
    Call(Verb),
    Session,
}

impl Invocation {
    /// The last word of an adapter's command line.
    pub fn parse(text: &str) -> Option<Invocation> {
        match text {
            "session" => Some(Invocation::Session),
            _ => Verb::parse(text).map(Invocation::Call),
        }
    }
}

/// One request line of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRequest {
    /// The `id` its answer echoes (null when it has none).
    pub id: Value,
    /// Its verb and the request, or why it cannot be read.
    pub request: Result<(Verb, Value), Failed>,
}

/// The next request of a session; `None` once recon has closed stdin: the
/// session is over.
pub fn next_session_request(input: &mut dyn BufRead) -> std::io::Result<Option<SessionRequest>> {
    let mut line = Vec::new();
    let read = input
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.len() > MAX_LINE {
        let failed = Failed::bad_request(format!("the request is longer than {MAX_LINE} bytes"));
        return Ok(Some(SessionRequest {
            id: Value::Null,
            request: Err(failed),
        }));
    }
    let value = match parse_json_slice(&line) {
        Ok(value) => value,
        Err(e) => {
            let failed = Failed::bad_request(format!("the request {e}"));
            return Ok(Some(SessionRequest {
                id: Value::Null,
                request: Err(failed),
            }));
        }
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let verb = value
        .get("verb")
        .and_then(Value::as_str)
        .and_then(Verb::parse);
    let request = match verb {
        Some(verb) => Ok((verb, value)),
        None => Err(Failed::bad_request("verb must name a verb")),
    };
    Ok(Some(SessionRequest { id, request }))
}

/// An answer with the `id` of the session request it answers.
pub fn with_id(mut answer: Value, id: Value) -> Value {
    if let Value::Object(fields) = &mut answer {
        fields.insert("id".into(), id);
    }
    answer
}

/// Serves a session: request after request from `input`, each answer with
/// its request's `id`, until `input` ends. What an adapter written in Rust
/// runs as its `main` when started with `session`.
pub fn serve_session(
    receiver: &mut dyn Receiver,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<()> {
    while let Some(SessionRequest { id, request }) = next_session_request(input)? {
        let answer = match request.and_then(|(verb, value)| parse_request(verb, &value)) {
            Ok(request) => answer(receiver, &request),
            Err(failed) => failure_answer(&failed),
        };
        write_line(output, &with_id(answer, id))?;
    }
    Ok(())
}

/// Writes one JSON line and flushes it.
pub fn write_line(output: &mut dyn Write, value: &Value) -> std::io::Result<()> {
    let mut line = value.to_string();
    line.push('\n');
    output.write_all(line.as_bytes())?;
    output.flush()
}

/// An answer as recon reads it, before any rule judges it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Described(Description),
    Receipt(Effect),
    /// Matches and flags as claimed, for the operation asked about.
    Snapshot(Snapshot),
    Failed(Failed),
}

fn flag(object: &Map<String, Value>, name: &str) -> Result<bool, String> {
    object
        .get(name)
        .and_then(Value::as_bool)
        .ok_or_else(|| format!("{name} must be true or false"))
}

/// An effect as an adapter wrote it; its id obeys the op-id rules
/// (`domain::names::identifier`), so no id a receiver makes up can hide
/// or reorder text where it is shown.
fn effect_of(value: &Value) -> Result<Effect, String> {
    let effect: Effect = serde_json::from_value(value.clone())
        .map_err(|e| format!("an effect is malformed: {e}"))?;
    names::identifier("an effect's effect_id", &effect.effect_id)
        .map_err(|why| format!("an effect is malformed: {why}"))?;
    Ok(effect)
}

/// Reads an answer to `verb` about `op_id`. `Err` says why it is not a
/// `recon-adapter/1` answer at all (the client reports that as garbage, or
/// as a malformed description at registration).
pub fn parse_answer(verb: Verb, op_id: &str, value: &Value) -> Result<Answer, String> {
    let object = value.as_object().ok_or("the answer is not a JSON object")?;
    match object.get("recon_adapter").map(whole) {
        Some(Some(n)) if n == PROTOCOL as i64 => {}
        Some(Some(other)) => return Err(format!("protocol {other}, not {PROTOCOL}")),
        Some(None) => return Err("recon_adapter must be a whole number".into()),
        None => return Err("recon_adapter is missing".into()),
    }
    if verb == Verb::Describe {
        // A describe that failed says so as any call does (a ledger that
        // reads its instance from a server that is down).
        if object.get("ok").and_then(Value::as_bool) == Some(false) {
            return parse_failed(object).map(Answer::Failed);
        }
        return parse_description(object).map(Answer::Described);
    }
    match object.get("ok").and_then(Value::as_bool) {
        Some(true) => {}
        Some(false) => return parse_failed(object).map(Answer::Failed),
        None => return Err("ok must be true or false".into()),
    }
    if verb == Verb::Apply {
        let receipt = object.get("receipt").ok_or("the receipt is missing")?;
        return effect_of(receipt).map(Answer::Receipt);
    }
    let matches = object
        .get("matches")
        .and_then(Value::as_array)
        .ok_or("matches must be an array")?
        .iter()
        .map(effect_of)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Answer::Snapshot(Snapshot {
        op_id: op_id.to_string(),
        matches,
        complete: flag(object, "complete")?,
        authoritative: flag(object, "authoritative")?,
        closed: flag(object, "closed")?,
        closed_by: closed_by(object)?,
    }))
}

/// `closed_by`, the login a receiver's tombstone names (SPEC 12): absent,
/// null, or a person's name under recon's rule for names.
fn closed_by(object: &Map<String, Value>) -> Result<Option<String>, String> {
    match object.get("closed_by") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) if names::has_visible(name) => {
            names::person("closed_by", name).map(|name| Some(name.to_string()))
        }
        Some(_) => Err("closed_by must be a non-empty string".into()),
    }
}

fn parse_failed(object: &Map<String, Value>) -> Result<Failed, String> {
    let error = object
        .get("error")
        .and_then(Value::as_object)
        .ok_or("error must be an object")?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .ok_or("error.code must be a string")?;
    Ok(Failed {
        code: ErrorCode::parse(code).ok_or_else(|| format!("unknown error code {code:?}"))?,
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

fn parse_description(object: &Map<String, Value>) -> Result<Description, String> {
    let text = |name: &str| -> Result<String, String> {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{name} must be a string"))
    };
    let query = object
        .get("query")
        .and_then(Value::as_object)
        .ok_or("query must be an object")?;
    let mandatory = match object.get("mandatory") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| "mandatory must list strings".to_string())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("mandatory must be an array".into()),
    };
    let instance = match object.get("instance") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
        Some(_) => return Err("instance must be a non-empty string".into()),
    };
    let session = match object.get("session") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(on)) => *on,
        Some(_) => return Err("session must be true or false".into()),
    };
    let batch = match object.get("batch") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            whole(n)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or("batch must be a whole number from 1")?,
        ),
    };
    Ok(Description {
        session,
        batch,
        instance,
        name: text("name")?,
        version: text("version")?,
        can_close: flag(object, "can_close")?,
        query: Ceiling {
            complete: flag(query, "complete")?,
            authoritative: flag(query, "authoritative")?,
        },
        mandatory,
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_answer, snapshot_answer, Answer, Verb};
    use crate::domain::Snapshot;
    use serde_json::json;

    fn read(closed_by: serde_json::Value) -> Result<Answer, String> {
        let answer = json!({"recon_adapter": 1, "ok": true, "matches": [], "complete": true,
                            "authoritative": true, "closed": true, "closed_by": closed_by});
        parse_answer(Verb::Query, "op-1", &answer)
    }

    #[test]
    fn closed_by_is_read_from_any_adapter_kept_and_written_back_and_a_bad_one_refused() {
        let Ok(Answer::Snapshot(snapshot)) = read(json!("ledger_closer")) else {
            panic!("a snapshot");
        };
        assert_eq!(snapshot.closed_by.as_deref(), Some("ledger_closer"));
        assert_eq!(snapshot_answer(&snapshot)["closed_by"], "ledger_closer");
        // Lowered to open (a receiver that cannot close), it names no one.
        let open: Snapshot = snapshot.lowered(true, true, false);
        assert_eq!(open.closed_by, None);
        assert!(snapshot_answer(&open).get("closed_by").is_none());
        assert!(matches!(read(json!(null)), Ok(Answer::Snapshot(s)) if s.closed_by.is_none()));
        for bad in [json!(5), json!(""), json!("a\u{1b}b"), json!(["x"])] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn query_and_close_requests_carry_the_op_and_an_adapter_that_ignores_it_reads_them_alike() {
        let payload = json!({"path": "/a", "content": "x"});
        let op = crate::domain::EffectRequest {
            op_id: "op-1",
            action_kind: "write_file",
            payload: &payload,
            compensates_effect_id: None,
        };
        for verb in [Verb::Query, Verb::Close] {
            let request = super::request(verb, "ws-1", &op, Some("ada"));
            assert_eq!(
                request["op"],
                json!({"op_id": "op-1", "action_kind": "write_file", "payload": payload}),
                "{verb:?}"
            );
            let mut without = request.clone();
            without.as_object_mut().unwrap().remove("op");
            assert_eq!(
                super::parse_request(verb, &request),
                super::parse_request(verb, &without)
            );
        }
    }
}
