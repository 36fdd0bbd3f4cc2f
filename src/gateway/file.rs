//! The gateway file (SPEC 13): which downstream MCP server to start and
//! what each of its tools is to recon. Parsing and checking only, no I/O
//! beyond reading the file: every mistake is one line naming the key.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The longest a downstream call may take before the gateway gives up on
/// it (its answer is then lost), unless the file says otherwise.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The receiver name the gateway registers under, unless the file names one.
pub const DEFAULT_RECEIVER: &str = "gateway";

/// A checked gateway file.
#[derive(Debug, Clone, PartialEq)]
pub struct Gateway {
    /// The file's absolute path (what the receiver's command line names).
    pub path: PathBuf,
    pub receiver: String,
    pub instance: String,
    pub command: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub timeout_ms: u64,
    pub tools: BTreeMap<String, ToolMode>,
    /// The file's text as read (a running gateway is found by it,
    /// `gateway::relay`).
    pub text: String,
}

/// What one downstream tool is to recon.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolMode {
    /// Read-only: exposed and forwarded as it is.
    Pass,
    /// Read by the gateway's receiver only (an effect's evidence or close).
    Evidence,
    /// Every call is an operation.
    Effect(Box<Effect>),
}

/// How an effect tool is called, and read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    /// The downstream argument that carries the op id, if any.
    pub pass_op_id_as: Option<String>,
    /// Where in the result (its structured content) the effect id is; the
    /// op id when absent.
    pub effect_id_pointer: Option<String>,
    pub evidence: Read,
    pub complete: bool,
    pub authoritative: bool,
    /// The close tool, with `can_close = true` only.
    pub close: Option<Read>,
}

/// A downstream read: the tool, its arguments (each a JSON pointer into
/// the operation's payload), and how its result is matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub tool: String,
    pub arguments: BTreeMap<String, String>,
    /// Where in the read's structured content the found value is.
    pub found_pointer: String,
    /// Where in the payload the value it must equal is.
    pub expected_pointer: String,
    /// An `isError` read whose text holds this means "absent" (no match);
    /// any other `isError` read is a failed read.
    pub absent_error_contains: Option<String>,
    /// Where in the read's structured content the effect's id is; the op
    /// id when absent. Required where the effect tool names its effect by
    /// a pointer, so a read names the effect its receipt named.
    pub effect_id_pointer: Option<String>,
    /// Where in the read's structured content a boolean says the
    /// downstream holds a tombstone for the operation (it was closed).
    /// Required on the evidence of a tool that can close, so a query
    /// after the close still says `closed` (SPEC 8, 12).
    pub closed_pointer: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    receiver: Option<String>,
    instance: String,
    command: PathBuf,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    timeout_ms: Option<u64>,
    #[serde(default)]
    tools: BTreeMap<String, RawTool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    mode: String,
    pass_op_id_as: Option<String>,
    effect_id_pointer: Option<String>,
    evidence: Option<RawRead>,
    complete: Option<bool>,
    authoritative: Option<bool>,
    close: Option<RawRead>,
    #[serde(default)]
    can_close: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRead {
    tool: String,
    #[serde(default)]
    arguments: BTreeMap<String, String>,
    found_pointer: String,
    expected_pointer: String,
    absent_error_contains: Option<String>,
    effect_id_pointer: Option<String>,
    closed_pointer: Option<String>,
}

/// Reads and checks the gateway file at `path`; the error is one line.
pub fn load(path: &Path) -> Result<Gateway, String> {
    let shown = path.display();
    let path = std::path::absolute(path).map_err(|e| format!("gateway file {shown}: {e}"))?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("gateway file {shown}: {e}"))?;
    parse(&path, &text).map_err(|why| format!("gateway file {shown}: {why}"))
}

/// Checks the text of a gateway file.
pub fn parse(path: &Path, text: &str) -> Result<Gateway, String> {
    let raw: Raw = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
    let receiver = raw.receiver.unwrap_or_else(|| DEFAULT_RECEIVER.to_string());
    crate::domain::names::receiver(&receiver).map_err(|why| format!("receiver: {why}"))?;
    if raw.instance.trim().is_empty() {
        return Err("instance must not be empty".into());
    }
    if !raw.command.is_absolute() {
        return Err(format!(
            "command must be an absolute path, not {}",
            raw.command.display()
        ));
    }
    for name in &raw.env {
        crate::domain::names::env_var(name).map_err(|why| format!("env: {why}"))?;
    }
    let mut tools = BTreeMap::new();
    for (name, tool) in raw.tools {
        let mode = tool_mode(&name, tool).map_err(|why| format!("tools.{name}: {why}"))?;
        tools.insert(name, mode);
    }
    check_reads(&tools)?;
    if !tools.values().any(|m| matches!(m, ToolMode::Effect(_))) {
        return Err("declares no effect tool (mode = \"effect\")".into());
    }
    Ok(Gateway {
        path: path.to_path_buf(),
        receiver,
        instance: raw.instance,
        command: raw.command,
        args: raw.args,
        env: raw.env,
        timeout_ms: raw.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
        tools,
        text: text.to_string(),
    })
}

/// The first line of a parser's message, with its position.
fn one_line(message: &str) -> String {
    let lines: Vec<&str> = message.lines().map(str::trim).collect();
    let head = lines.first().copied().unwrap_or_default();
    match lines
        .iter()
        .rev()
        .find(|l| !l.is_empty() && !l.starts_with('|'))
    {
        Some(last) if *last != head => format!("{head} {last}"),
        _ => head.to_string(),
    }
}

fn tool_mode(name: &str, tool: RawTool) -> Result<ToolMode, String> {
    crate::domain::names::identifier("tool name", name)?;
    let effect_only = tool.pass_op_id_as.is_some()
        || tool.effect_id_pointer.is_some()
        || tool.evidence.is_some()
        || tool.complete.is_some()
        || tool.authoritative.is_some()
        || tool.close.is_some()
        || tool.can_close;
    match tool.mode.as_str() {
        "pass" | "evidence" if effect_only => Err(format!(
            "mode {:?} takes no effect keys (evidence, close, complete, ...)",
            tool.mode
        )),
        "pass" => Ok(ToolMode::Pass),
        "evidence" => Ok(ToolMode::Evidence),
        "effect" => effect(tool).map(|e| ToolMode::Effect(Box::new(e))),
        other => Err(format!("mode is pass, effect or evidence, not {other:?}")),
    }
}

fn effect(tool: RawTool) -> Result<Effect, String> {
    let evidence = tool
        .evidence
        .ok_or("an effect tool needs an evidence table ([tools.NAME.evidence])")?;
    if tool.can_close && evidence.closed_pointer.is_none() {
        return Err(
            "can_close = true needs closed_pointer in the evidence table (where \
                    its read says the operation was closed), or a query after a close \
                    would say it is open"
                .into(),
        );
    }
    let close = match (tool.close, tool.can_close) {
        (Some(close), true) => Some(read(close).map_err(|why| format!("close: {why}"))?),
        (Some(_), false) => return Err("a close tool needs can_close = true".into()),
        (None, true) => return Err("can_close = true needs a close table".into()),
        (None, false) => None,
    };
    if let Some(pointer) = &tool.effect_id_pointer {
        pointer_syntax("effect_id_pointer", pointer)?;
        if evidence.effect_id_pointer.is_none() {
            return Err(
                "effect_id_pointer names the effect by the result, so the evidence \
                        table needs one too (where the read says the effect's id)"
                    .into(),
            );
        }
    }
    if let Some(name) = &tool.pass_op_id_as {
        if name.is_empty() {
            return Err("pass_op_id_as names an argument".into());
        }
    }
    Ok(Effect {
        pass_op_id_as: tool.pass_op_id_as,
        effect_id_pointer: tool.effect_id_pointer,
        evidence: read(evidence).map_err(|why| format!("evidence: {why}"))?,
        complete: tool.complete.unwrap_or(false),
        authoritative: tool.authoritative.unwrap_or(false),
        close,
    })
}

fn read(raw: RawRead) -> Result<Read, String> {
    for pointer in raw.arguments.values() {
        pointer_syntax("arguments", pointer)?;
    }
    pointer_syntax("found_pointer", &raw.found_pointer)?;
    pointer_syntax("expected_pointer", &raw.expected_pointer)?;
    for (key, pointer) in [
        ("effect_id_pointer", &raw.effect_id_pointer),
        ("closed_pointer", &raw.closed_pointer),
    ] {
        if let Some(pointer) = pointer {
            pointer_syntax(key, pointer)?;
        }
    }
    Ok(Read {
        tool: raw.tool,
        arguments: raw.arguments,
        found_pointer: raw.found_pointer,
        expected_pointer: raw.expected_pointer,
        absent_error_contains: raw.absent_error_contains,
        effect_id_pointer: raw.effect_id_pointer,
        closed_pointer: raw.closed_pointer,
    })
}

fn pointer_syntax(key: &str, pointer: &str) -> Result<(), String> {
    if pointer.is_empty() || pointer.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "{key}: {pointer:?} is not a JSON pointer (\"\" or /...)"
        ))
    }
}

/// Each evidence and close tool must be declared `evidence` or `pass`.
fn check_reads(tools: &BTreeMap<String, ToolMode>) -> Result<(), String> {
    for (name, mode) in tools {
        let ToolMode::Effect(effect) = mode else {
            continue;
        };
        for read in std::iter::once(&effect.evidence).chain(&effect.close) {
            if !matches!(
                tools.get(&read.tool),
                Some(ToolMode::Evidence | ToolMode::Pass)
            ) {
                return Err(format!(
                    "tools.{name}: the tool it reads, {}, is not declared mode = \"evidence\" \
                     or \"pass\"",
                    read.tool
                ));
            }
        }
    }
    Ok(())
}

impl Gateway {
    /// The effect tools' names: the action kinds routed to the receiver.
    pub fn effect_tools(&self) -> Vec<String> {
        (self.tools.iter())
            .filter(|(_, m)| matches!(m, ToolMode::Effect(_)))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The effect tool `name`, if it is one.
    pub fn effect(&self, name: &str) -> Option<&Effect> {
        match self.tools.get(name) {
            Some(ToolMode::Effect(effect)) => Some(effect),
            _ => None,
        }
    }
}

impl Read {
    /// The read's arguments, filled from the operation's payload; `None`
    /// names the pointer the payload lacks.
    pub fn arguments_for(&self, payload: &Value) -> Result<serde_json::Map<String, Value>, String> {
        let mut filled = serde_json::Map::new();
        for (name, pointer) in &self.arguments {
            let value = payload
                .pointer(pointer)
                .ok_or_else(|| format!("the payload has nothing at {pointer} for {name}"))?;
            filled.insert(name.clone(), value.clone());
        }
        Ok(filled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_example_gateway_file_is_valid_and_declares_write_file_an_effect() {
        let text = include_str!("../../examples/gateway.toml");
        let gateway = parse(Path::new("/etc/recon/gateway.toml"), text).expect("the example");
        assert_eq!(gateway.effect_tools(), ["write_file"]);
        let effect = gateway.effect("write_file").expect("write_file");
        assert!(effect.complete && effect.authoritative && effect.close.is_none());
        assert_eq!(effect.evidence.tool, "read_text_file");
        assert_eq!(gateway.tools.get("list_directory"), Some(&ToolMode::Pass));
        assert_eq!(
            gateway.tools.get("read_text_file"),
            Some(&ToolMode::Evidence)
        );
    }

    #[test]
    fn an_effect_named_by_a_pointer_needs_its_evidence_to_name_it_too() {
        let example = include_str!("../../examples/gateway.toml");
        let named = example.replace(
            "# effect_id_pointer = \"/id\"\n# The flags",
            "effect_id_pointer = \"/id\"\n# The flags",
        );
        assert_ne!(named, example, "the example's effect line");
        let refused = parse(Path::new("/g.toml"), &named).unwrap_err();
        assert!(
            refused.contains("the evidence table needs one too"),
            "{refused}"
        );
        let both = named.replace(
            "# effect_id_pointer = \"/id\"",
            "effect_id_pointer = \"/id\"",
        );
        let gateway = parse(Path::new("/g.toml"), &both).expect("both name it");
        let effect = gateway.effect("write_file").expect("effect");
        assert_eq!(effect.effect_id_pointer.as_deref(), Some("/id"));
        assert_eq!(effect.evidence.effect_id_pointer.as_deref(), Some("/id"));
    }

    #[test]
    fn a_tool_that_can_close_needs_its_evidence_to_say_where_a_read_says_closed() {
        let example = include_str!("../../examples/gateway.toml");
        let closing = example.replace(
            "can_close = false",
            "can_close = true\n[tools.write_file.close]\ntool = \"list_directory\"\n\
             found_pointer = \"\"\nexpected_pointer = \"\"",
        );
        let refused = parse(Path::new("/g.toml"), &closing).unwrap_err();
        assert!(refused.contains("needs closed_pointer"), "{refused}");
        let said = closing.replace(
            "# closed_pointer = \"/closed\"",
            "closed_pointer = \"/closed\"",
        );
        let gateway = parse(Path::new("/g.toml"), &said).expect("it says where");
        let effect = gateway.effect("write_file").expect("effect");
        assert!(effect.close.is_some());
        assert_eq!(effect.evidence.closed_pointer.as_deref(), Some("/closed"));
    }

    #[test]
    fn an_evidence_template_is_filled_from_the_payload_and_a_missing_value_is_named() {
        let text = include_str!("../../examples/gateway.toml");
        let gateway = parse(Path::new("/g.toml"), text).expect("the example");
        let read = &gateway.effect("write_file").expect("effect").evidence;
        let payload = serde_json::json!({"path": "/srv/a", "content": "x"});
        let filled = read.arguments_for(&payload).expect("filled");
        assert_eq!(Value::Object(filled), serde_json::json!({"path": "/srv/a"}));
        let missing = read.arguments_for(&serde_json::json!({"content": "x"}));
        assert!(missing.unwrap_err().contains("/path"));
    }
}
