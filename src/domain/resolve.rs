//! Resolution by policy (SPEC 9): the plan a person authorizes, and why an
//! operation of it is passed over.
//!
//! A close can cancel an original still in flight, so `recon resolve`
//! closes only an exact list a person authorized: the plan names each
//! operation with the version it was read at and the receiver it routes
//! to, and a run closes only those still at that version. The plan is a
//! person's input (a file), so it is read as any input is: strictly
//! (`parse_json`), within a bound, each name under its rule.

use super::names;
use super::{parse_json_slice, Policy};
use serde::Serialize;
use serde_json::{json, Value};

/// The largest plan file recon reads: room for a million operations of
/// ordinary ids.
pub const MAX_PLAN_BYTES: usize = 256 * 1024 * 1024;

/// The format's marker and version: `{"recon_resolve_plan": 1, ...}`.
const PLAN_FORMAT: i64 = 1;

/// One operation of a plan, or of a selection: its id, the version it was
/// read at, and its receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Planned {
    pub op_id: String,
    pub version: i64,
    pub receiver: String,
    /// The registration (its id and version) the receiver had when the
    /// plan was made: a run skips the operation as `receiver_changed` when
    /// the registration was updated since (SPEC 12). A plan written before
    /// these fields existed has neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_version: Option<i64>,
}

impl Planned {
    /// Whether the registration `(id, version)` is another than the one
    /// the plan was made against (never, for a plan that names none).
    pub fn registration_changed(&self, id: i64, version: i64) -> bool {
        match (self.receiver_id, self.receiver_version) {
            (Some(planned_id), Some(planned_version)) => {
                (planned_id, planned_version) != (id, version)
            }
            (None, None) => false,
            _ => true,
        }
    }
}

/// An exact list of operations a policy may close and decide, made for
/// one workspace (or team database), by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvePlan {
    pub policy: Policy,
    pub workspace: String,
    /// The age limit (`--older-than`) the dry run selected with, in
    /// milliseconds: the run keeps it, so it closes what the dry run said
    /// it would. `None` in a plan made before it was recorded.
    pub older_than_ms: Option<u64>,
    pub operations: Vec<Planned>,
}

impl ResolvePlan {
    /// The plan as its file holds it.
    pub fn to_json(&self) -> Value {
        json!({
            "recon_resolve_plan": PLAN_FORMAT,
            "policy": self.policy.as_str(),
            "workspace": self.workspace,
            "older_than_ms": self.older_than_ms,
            "operations": self.operations,
        })
    }

    /// Reads a plan file's bytes, or says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<ResolvePlan, String> {
        if bytes.len() > MAX_PLAN_BYTES {
            return Err(format!("the plan is larger than {MAX_PLAN_BYTES} bytes"));
        }
        let value = parse_json_slice(bytes).map_err(|e| format!("the plan is not JSON: {e}"))?;
        if super::json::whole(&value["recon_resolve_plan"]) != Some(PLAN_FORMAT) {
            return Err("the plan is not a recon resolve plan of format 1".into());
        }
        let policy = value["policy"]
            .as_str()
            .and_then(Policy::parse)
            .ok_or("the plan names no policy recon knows (provable)")?;
        let workspace = value["workspace"]
            .as_str()
            .ok_or("the plan names no workspace")?
            .to_string();
        let operations = value["operations"]
            .as_array()
            .ok_or("the plan has no list of operations")?
            .iter()
            .enumerate()
            .map(|(i, op)| planned(op).map_err(|e| format!("operation {i} of the plan: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let older_than_ms = match &value["older_than_ms"] {
            Value::Null => None,
            limit => Some(
                super::json::whole(limit)
                    .and_then(|ms| u64::try_from(ms).ok())
                    .ok_or("older_than_ms must be a whole number of milliseconds")?,
            ),
        };
        Ok(ResolvePlan {
            policy,
            workspace,
            older_than_ms,
            operations,
        })
    }
}

fn planned(op: &Value) -> Result<Planned, String> {
    let op_id = op["op_id"].as_str().ok_or("no op_id")?;
    names::identifier("op id", op_id)?;
    let version = super::json::whole(&op["version"])
        .filter(|v| *v >= 1)
        .ok_or("no version of at least 1")?;
    let receiver = op["receiver"].as_str().ok_or("no receiver")?;
    names::receiver(receiver)?;
    let number = |field: &str| match &op[field] {
        Value::Null => Ok(None),
        value => (value.as_i64())
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or(format!("{field} is not a number of at least 1")),
    };
    Ok(Planned {
        op_id: op_id.to_string(),
        version,
        receiver: receiver.to_string(),
        receiver_id: number("receiver_id")?,
        receiver_version: number("receiver_version")?,
    })
}

/// Why `resolve` passed an operation over without closing it: each is
/// counted under its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// It is no longer `unknown` (decided meanwhile, or never dispatched).
    NotUnknown,
    /// Its version is not the one planned (or read when selected).
    VersionChanged,
    /// It routes to another receiver than the plan says, or its receiver's
    /// registration was updated since the plan was made.
    ReceiverChanged,
    /// It is escalated: people asked to decide it.
    Escalated,
    /// It changed more recently than `--older-than`.
    TooYoung,
    /// Its receiver cannot close, so nothing it says is proof.
    CannotClose,
    /// The run was stopped before its turn: nothing was asked about it.
    NotAttempted,
}

impl Skip {
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::NotUnknown => "not_unknown",
            Skip::VersionChanged => "version_changed",
            Skip::ReceiverChanged => "receiver_changed",
            Skip::Escalated => "escalated",
            Skip::TooYoung => "too_young",
            Skip::CannotClose => "cannot_close",
            Skip::NotAttempted => "not_attempted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> ResolvePlan {
        ResolvePlan {
            policy: Policy::Provable,
            workspace: "ws-1".into(),
            older_than_ms: Some(90_000),
            operations: vec![Planned {
                op_id: "op-1".into(),
                version: 2,
                receiver: "mail".into(),
                receiver_id: Some(7),
                receiver_version: Some(3),
            }],
        }
    }

    #[test]
    fn a_plan_reads_back_as_it_was_written() {
        let text = plan().to_json().to_string();
        assert_eq!(ResolvePlan::parse(text.as_bytes()), Ok(plan()));
    }

    #[test]
    fn a_plan_with_a_bad_field_is_refused_naming_it() {
        let cases = [
            (json!({"policy": "provable"}), "format 1"),
            (
                json!({"recon_resolve_plan": 1, "policy": "other", "workspace": "w", "operations": []}),
                "policy",
            ),
            (
                json!({"recon_resolve_plan": 1, "policy": "provable", "workspace": "w",
                       "operations": [{"op_id": "a b", "version": 1, "receiver": "m"}]}),
                "operation 0",
            ),
            (
                json!({"recon_resolve_plan": 1, "policy": "provable", "workspace": "w",
                       "operations": [{"op_id": "a", "version": 0, "receiver": "m"}]}),
                "version",
            ),
            (
                json!({"recon_resolve_plan": 1, "policy": "provable", "workspace": "w",
                       "operations": [{"op_id": "a", "version": 1, "receiver": "M"}]}),
                "receiver",
            ),
        ];
        for (value, says) in cases {
            let error = ResolvePlan::parse(value.to_string().as_bytes()).unwrap_err();
            assert!(error.contains(says), "{value}: {error}");
        }
        let twice = br#"{"recon_resolve_plan": 1, "recon_resolve_plan": 1}"#;
        assert!(ResolvePlan::parse(twice).is_err());
    }

    /// `2.0` is the number `2` wherever recon reads a whole number (SPEC 8
    /// rule 7), in a plan as in a payload; `2.5` is not a version.
    #[test]
    fn a_plan_version_written_2_0_is_the_version_2() {
        let text = br#"{"recon_resolve_plan": 1.0, "policy": "provable", "workspace": "w",
                        "operations": [{"op_id": "a", "version": 2.0, "receiver": "m"}]}"#;
        let plan = ResolvePlan::parse(text).expect("a plan");
        assert_eq!(plan.operations[0].version, 2);
        let half = br#"{"recon_resolve_plan": 1, "policy": "provable", "workspace": "w",
                        "operations": [{"op_id": "a", "version": 2.5, "receiver": "m"}]}"#;
        assert!(ResolvePlan::parse(half).is_err());
    }
}
