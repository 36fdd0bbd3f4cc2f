//! The tamper-evident evidence chain.
//!
//! Triggers make the evidence table append-only for every well-behaved
//! writer, but anyone with access to the file can drop them. So each evidence
//! row also carries `hash = SHA-256(prev_hash || canonical content)`, where
//! `prev_hash` is the previous row's hash (64 zeros for the first row).
//! Editing, deleting or reordering a row breaks the chain at that row, and
//! [`verify_chain`] reports the first broken link. This detects tampering; it
//! does not prevent an attacker from rewriting the whole chain, which only a
//! copy kept elsewhere (`recon export`) or a signature can.
//!
//! Verification works on [`StoredRow`]s, the columns exactly as SQLite holds
//! them, rather than on parsed [`EvidenceRecord`]s, so that a row an attacker
//! made unparsable (a snapshot that is no longer JSON, a version that is now
//! text) is reported as a broken link instead of stopping the check. The same
//! rows are what `recon export` writes, one JSON line each, and what
//! `recon verify --against` reads back.
//!
//! The chain cannot see the end of the log: removing the last rows leaves a
//! shorter chain that is still intact. Two further checks cover that: every
//! operation whose state left `unknown` must have exactly one evidence row that
//! agrees with it ([`state_mismatches`]), and a previously exported copy must
//! be a prefix of the log ([`compare_with_export`]).

use crate::domain::{canonical_json, EvidenceRecord};
use serde::Serialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The columns a row's hash covers, in the order of the table.
pub const CONTENT_COLUMNS: [&str; 13] = [
    "seq",
    "op_id",
    "source",
    "reviewer",
    "decision",
    "verdict",
    "snapshot",
    "from_version",
    "to_version",
    "effect_id",
    "receiver",
    "receiver_describe_sha256",
    "response_sha256",
];

/// The content a row's hash covers: every field except the hashes.
pub fn chained_content(record: &EvidenceRecord) -> Value {
    json!({
        "seq": record.seq,
        "op_id": record.op_id,
        "source": record.source,
        "reviewer": record.reviewer,
        "decision": record.decision,
        "verdict": record.verdict,
        "snapshot": record.snapshot,
        "from_version": record.from_version,
        "to_version": record.to_version,
        "effect_id": record.effect_id,
        "receiver": record.receiver,
        "receiver_describe_sha256": record.receiver_describe_sha256,
        "response_sha256": record.response_sha256,
    })
}

pub fn link_hash(prev_hash: &str, content: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(canonical_json(content).as_bytes());
    hex(&hasher.finalize())
}

/// SHA-256 of some bytes, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// One evidence row as stored, trusted for nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRow {
    /// The table's integer primary key, which orders the log.
    pub seq: i64,
    /// The [`CONTENT_COLUMNS`] as a JSON object, each column converted from
    /// its SQLite value (the snapshot column parsed from its JSON text).
    pub content: Value,
    pub prev_hash: String,
    pub hash: String,
    /// Why a column could not be read as evidence at all, if one could not.
    pub malformed: Option<String>,
}

impl From<&EvidenceRecord> for StoredRow {
    fn from(record: &EvidenceRecord) -> Self {
        StoredRow {
            seq: record.seq,
            content: chained_content(record),
            prev_hash: record.prev_hash.clone(),
            hash: record.hash.clone(),
            malformed: None,
        }
    }
}

impl StoredRow {
    /// One line of `recon export`: the content columns plus both hashes, as
    /// canonical JSON. A third party can recompute every hash from these
    /// lines alone: `SHA-256(prev_hash || canonical JSON of the line without
    /// prev_hash and hash)`.
    pub fn export_line(&self) -> String {
        let mut line = match &self.content {
            Value::Object(map) => map.clone(),
            other => Map::from_iter([("content".to_string(), other.clone())]),
        };
        line.insert("prev_hash".into(), Value::String(self.prev_hash.clone()));
        line.insert("hash".into(), Value::String(self.hash.clone()));
        canonical_json(&Value::Object(line))
    }

    /// Reads one exported line back.
    pub fn from_export_line(text: &str) -> Result<StoredRow, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(mut map) = value else {
            return Err("not a JSON object".into());
        };
        let mut take_hash = |key: &str| match map.remove(key) {
            Some(Value::String(hash)) => Ok(hash),
            _ => Err(format!("no {key} string")),
        };
        let hash = take_hash("hash")?;
        let prev_hash = take_hash("prev_hash")?;
        let seq = map
            .get("seq")
            .and_then(Value::as_i64)
            .ok_or("no integer seq")?;
        Ok(StoredRow {
            seq,
            content: Value::Object(map),
            prev_hash,
            hash,
            malformed: None,
        })
    }
}

/// Where the chain first breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokenLink {
    /// Position in the log, counting from 0.
    pub index: usize,
    pub seq: i64,
    pub reason: String,
}

/// The result of checking a whole log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    pub rows: usize,
    pub intact: bool,
    pub first_broken: Option<BrokenLink>,
    pub head_hash: String,
}

/// Recomputes the chain over rows in `seq` order.
pub fn verify_chain<'a>(records: impl IntoIterator<Item = &'a EvidenceRecord>) -> ChainReport {
    let rows: Vec<StoredRow> = records.into_iter().map(StoredRow::from).collect();
    verify_rows(&rows)
}

/// Recomputes the chain over stored rows in `seq` order and stops at the
/// first broken link.
pub fn verify_rows(rows: &[StoredRow]) -> ChainReport {
    let mut prev = GENESIS_HASH.to_string();
    let mut prev_seq = 0;
    for (index, row) in rows.iter().enumerate() {
        let reason = if let Some(why) = &row.malformed {
            Some(format!("the row is malformed ({why}): it was edited"))
        } else if row.seq <= prev_seq {
            Some(format!(
                "seq {} follows seq {prev_seq}: rows are out of order",
                row.seq
            ))
        } else if row.prev_hash != prev {
            Some("prev_hash does not match the previous row's hash: a row was removed, inserted or reordered".to_string())
        } else if link_hash(&prev, &row.content) != row.hash {
            Some("hash does not match the row's content: the row was edited".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            return ChainReport {
                rows: rows.len(),
                intact: false,
                first_broken: Some(BrokenLink {
                    index,
                    seq: row.seq,
                    reason,
                }),
                head_hash: prev,
            };
        }
        prev = row.hash.clone();
        prev_seq = row.seq;
    }
    ChainReport {
        rows: rows.len(),
        intact: true,
        first_broken: None,
        head_hash: prev,
    }
}

/// An operation's stored state, as read for the cross-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpStateRow {
    pub op_id: String,
    pub state: String,
    pub version: i64,
}

/// The disagreements between the operations and the evidence log: every
/// operation that left `unknown` (it is `confirmed` or `not_applied`) has
/// exactly one evidence row, with its decision and its version, and every
/// evidence row belongs to such an operation. This is what notices the last
/// rows of the log being removed, which the chain alone cannot.
pub fn state_mismatches(rows: &[StoredRow], ops: &[OpStateRow]) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut by_op: BTreeMap<&str, Vec<&StoredRow>> = BTreeMap::new();
    let mut problems = Vec::new();
    for row in rows {
        match row.content.get("op_id").and_then(Value::as_str) {
            Some(op_id) => by_op.entry(op_id).or_default().push(row),
            None => problems.push(format!("evidence row {} names no operation", row.seq)),
        }
    }
    for op in ops {
        let decided = matches!(op.state.as_str(), "confirmed" | "not_applied");
        let rows = by_op.remove(op.op_id.as_str()).unwrap_or_default();
        match (decided, rows.as_slice()) {
            (false, []) => {}
            (true, [row]) => {
                let agrees = row.content.get("decision").and_then(Value::as_str)
                    == Some(op.state.as_str())
                    && row.content.get("to_version").and_then(Value::as_i64) == Some(op.version);
                if !agrees {
                    problems.push(format!(
                        "operation {} is {} at version {}, but its evidence row {} records otherwise",
                        op.op_id, op.state, op.version, row.seq
                    ));
                }
            }
            (true, []) => problems.push(format!(
                "operation {} is {} at version {} but has no evidence row",
                op.op_id, op.state, op.version
            )),
            (_, rows) => problems.push(format!(
                "operation {} is {} at version {} but has {} evidence rows",
                op.op_id,
                op.state,
                op.version,
                rows.len()
            )),
        }
    }
    for (op_id, rows) in by_op {
        for row in rows {
            problems.push(format!(
                "evidence row {} belongs to {op_id}, which is not an operation",
                row.seq
            ));
        }
    }
    problems
}

/// How the log compares with a copy exported earlier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportComparison {
    /// Rows in the exported copy.
    pub rows: usize,
    /// The first row where the copy and the log disagree; `None` when the
    /// copy is an intact prefix of the log (rows appended since are fine).
    pub first_difference: Option<BrokenLink>,
}

/// Checks an exported copy's own chain, then that it is a prefix of `log`.
/// This notices what the chain in the database cannot: the whole chain
/// rewritten with fresh hashes, or rows removed from its end.
pub fn compare_with_export(log: &[StoredRow], export: &[StoredRow]) -> ExportComparison {
    let own = verify_rows(export);
    let first_difference = if let Some(broken) = own.first_broken {
        Some(BrokenLink {
            reason: format!("the exported copy itself is broken: {}", broken.reason),
            ..broken
        })
    } else {
        export.iter().enumerate().find_map(|(index, kept)| {
            let reason = match log.get(index) {
                None => {
                    "the log has fewer rows than the exported copy: rows were removed from its end"
                }
                Some(row) if row.seq != kept.seq || row.hash != kept.hash => {
                    "the log's row differs from the exported copy: the chain was rewritten"
                }
                Some(_) => return None,
            };
            Some(BrokenLink {
                index,
                seq: kept.seq,
                reason: reason.to_string(),
            })
        })
    };
    ExportComparison {
        rows: export.len(),
        first_difference,
    }
}

/// Everything `recon verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// True when the chain is intact, the operations agree with it, and the
    /// exported copy (if one was given) is a prefix of it.
    pub intact: bool,
    pub rows: usize,
    pub head_hash: String,
    pub first_broken: Option<BrokenLink>,
    pub state_mismatches: Vec<String>,
    pub export: Option<ExportComparison>,
}

/// Runs every check over rows and operations read in one transaction.
pub fn verify(
    rows: &[StoredRow],
    ops: &[OpStateRow],
    export: Option<&[StoredRow]>,
) -> VerifyReport {
    let chain = verify_rows(rows);
    let state_mismatches = state_mismatches(rows, ops);
    let export = export.map(|kept| compare_with_export(rows, kept));
    VerifyReport {
        intact: chain.intact
            && state_mismatches.is_empty()
            && export.as_ref().is_none_or(|e| e.first_difference.is_none()),
        rows: chain.rows,
        head_hash: chain.head_hash,
        first_broken: chain.first_broken,
        state_mismatches,
        export,
    }
}
