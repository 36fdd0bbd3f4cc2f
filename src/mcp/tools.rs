//! The three tools of `recon mcp` as MCP declares them (SPEC 13): names,
//! descriptions, input and output JSON schemas, annotations. No reviewer
//! act is among them: decisions, closes, approvals and resolve stay with
//! people and their logins.

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub const DO: &str = "recon_do";
pub const STATUS: &str = "recon_status";
pub const UNKNOWN: &str = "recon_unknown";

/// The tools, in the order `tools/list` gives them.
pub fn all() -> Vec<Tool> {
    vec![
        Tool::new(
            DO,
            "Prepare and send one action through recon, at most once per key. The same key \
             with the same action and payload returns what was recorded and never sends \
             twice. An unknown outcome is not a failure: do not retry it; a person decides, \
             and recon_status tells you the decision.",
            schema(do_input()),
        )
        .with_raw_output_schema(schema(status_schema()))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(true),
        ),
        Tool::new(
            STATUS,
            "The status of one operation, by the key it was sent with or by its op_id.",
            schema(status_input()),
        )
        .with_raw_output_schema(schema(status_schema()))
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            UNKNOWN,
            "Operations whose outcome is unknown, oldest first, at most 100 a page; pass \
             `next` as `after` for the next page.",
            schema(unknown_input()),
        )
        .with_raw_output_schema(schema(unknown_schema()))
        .with_annotations(ToolAnnotations::new().read_only(true)),
    ]
}

fn schema(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    }
}

/// A key: 1-128 characters of `[A-Za-z0-9._:-]`.
pub fn key_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": 128,
        "pattern": "^[A-Za-z0-9._:-]{1,128}$",
        "description": "Your idempotency key for this one action."
    })
}

fn do_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "The action kind, routed to its receiver."},
            "payload": {"description": "The action's arguments (JSON)."},
            "key": key_schema()
        },
        "required": ["action", "payload", "key"],
        "additionalProperties": false
    })
}

fn status_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "key": key_schema(),
            "op_id": {"type": "string", "minLength": 1}
        },
        "oneOf": [{"required": ["key"]}, {"required": ["op_id"]}],
        "additionalProperties": false
    })
}

fn unknown_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "after": {"type": "string", "description": "The `next` of the previous page."}
        },
        "additionalProperties": false
    })
}

/// A status: `{op_id, key, state, version, effect_id?, verdict?,
/// decided_by?, decided_at?, advice}`.
pub fn status_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "op_id": {"type": "string"},
            "key": {"type": ["string", "null"]},
            "state": {"type": "string", "enum": ["prepared", "unknown", "confirmed", "not_applied"]},
            "version": {"type": "integer"},
            "effect_id": {"type": "string"},
            "verdict": {"type": "string"},
            "decided_by": {"type": "string"},
            "decided_at": {"type": "string"},
            "advice": {"type": "string"}
        },
        "required": ["op_id", "key", "state", "version", "advice"],
        "additionalProperties": false
    })
}

fn unknown_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "operations": {"type": "array", "items": status_schema(), "maxItems": 100},
            "next": {"type": ["string", "null"]}
        },
        "required": ["operations", "next"],
        "additionalProperties": false
    })
}
