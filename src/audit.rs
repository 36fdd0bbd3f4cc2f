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

use crate::domain::{canonical_json, EvidenceRecord};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

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
    })
}

pub fn link_hash(prev_hash: &str, content: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(canonical_json(content).as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
    let mut prev = GENESIS_HASH.to_string();
    let mut prev_seq = 0;
    let mut rows = 0;
    for (index, record) in records.into_iter().enumerate() {
        rows += 1;
        let reason = if record.seq <= prev_seq {
            Some(format!(
                "seq {} follows seq {prev_seq}: rows are out of order",
                record.seq
            ))
        } else if record.prev_hash != prev {
            Some("prev_hash does not match the previous row's hash: a row was removed, inserted or reordered".to_string())
        } else if link_hash(&prev, &chained_content(record)) != record.hash {
            Some("hash does not match the row's content: the row was edited".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            return ChainReport {
                rows,
                intact: false,
                first_broken: Some(BrokenLink {
                    index,
                    seq: record.seq,
                    reason,
                }),
                head_hash: prev,
            };
        }
        prev = record.hash.clone();
        prev_seq = record.seq;
    }
    ChainReport {
        rows,
        intact: true,
        first_broken: None,
        head_hash: prev,
    }
}
