//! The chain, walked in `seq` order one entry at a time: its links, a kept
//! checkpoint, and an exported copy, all in one pass with constant memory.
//!
//! A link holds when the entry's `seq` follows the previous one's and its
//! `prev_hash` is the previous entry's `hash`; that its `hash` is the hash
//! of its own `prev_hash` and content is checked where the content is read
//! anyway, in the replay (`projection::parse_entry`), so each entry's text
//! is read and hashed once. The walk works on [`StoredEntry`]s, the columns
//! exactly as SQLite holds them, so an entry an attacker made unreadable (a
//! hash that is now a blob) is reported as a broken link instead of
//! stopping the check. The chain cannot see its own end: removing the last entries leaves a shorter
//! chain that is still intact. The projection notices when the tables still
//! show what those entries did; a checkpoint or an export kept elsewhere
//! notices in any case, and they also notice a chain rewritten with fresh
//! hashes, which nothing inside the database can.

use super::entry::{link_hash, Checkpoint, GENESIS_HASH};
use crate::domain::{canonical_json, parse_json};
use serde::Serialize;
use serde_json::{Map, Value};

/// One journal row as stored, trusted for nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry<'a> {
    /// The table's integer primary key, which orders the journal.
    pub seq: i64,
    /// The canonical content, as stored (empty when the walk did not read
    /// it: only `export` needs it).
    pub entry: &'a str,
    pub prev_hash: &'a str,
    pub hash: &'a str,
    /// Why a column could not be read at all, if one could not.
    pub malformed: Option<String>,
}

impl StoredEntry<'_> {
    /// One line of `recon export`: the content plus both hashes, as
    /// canonical JSON. An entry whose text is not a JSON object (it was
    /// edited) is written as `{"seq", "entry": TEXT, ...}`, so the copy
    /// shows the damage rather than hiding it.
    pub fn export_line(&self) -> String {
        let mut line = match serde_json::from_str::<Value>(self.entry) {
            Ok(Value::Object(map)) => map,
            _ => Map::from_iter([
                ("seq".to_string(), Value::from(self.seq)),
                ("entry".to_string(), Value::from(self.entry)),
            ]),
        };
        line.insert("prev_hash".into(), Value::from(self.prev_hash));
        line.insert("hash".into(), Value::from(self.hash));
        canonical_json(&Value::Object(line))
    }
}

/// One line of an export read back: the content, and the two hashes.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportedEntry {
    pub seq: i64,
    pub content: Map<String, Value>,
    pub prev_hash: String,
    pub hash: String,
}

impl ExportedEntry {
    pub fn from_line(text: &str) -> Result<ExportedEntry, String> {
        let value = parse_json(text).map_err(|e| format!("it {e}"))?;
        let Value::Object(mut content) = value else {
            return Err("not a JSON object".into());
        };
        let mut take_hash = |key: &str| match content.remove(key) {
            Some(Value::String(hash)) => Ok(hash),
            _ => Err(format!("no {key} string")),
        };
        let hash = take_hash("hash")?;
        let prev_hash = take_hash("prev_hash")?;
        let seq = content
            .get("seq")
            .and_then(Value::as_i64)
            .ok_or("no integer seq")?;
        Ok(ExportedEntry {
            seq,
            content,
            prev_hash,
            hash,
        })
    }

    /// The hash this line's content and `prev_hash` call for.
    fn recomputed(&self) -> String {
        // The map is rebuilt as a value only to canonicalize it.
        link_hash(
            &self.prev_hash,
            &canonical_json(&Value::Object(self.content.clone())),
        )
    }
}

/// Where the chain first breaks, or where a copy first differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokenLink {
    /// Position in the journal, counting from 0.
    pub index: u64,
    pub seq: i64,
    pub reason: String,
}

/// How the journal compares with a copy exported earlier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportComparison {
    /// Entries read from the copy (reading stops at the first difference).
    pub rows: u64,
    /// The first entry where the copy and the journal disagree; `None` when
    /// the copy is an intact prefix of the journal.
    pub first_difference: Option<BrokenLink>,
}

/// How the journal compares with a checkpoint kept elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointComparison {
    pub length: i64,
    pub head_hash: String,
    /// True when the journal's first `length` entries end in `head_hash`.
    pub extended: bool,
    pub reason: Option<String>,
}

/// What the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    pub rows: u64,
    /// The hash of the last entry, as stored: the journal's head.
    pub head_hash: String,
    pub first_broken: Option<BrokenLink>,
    pub export: Option<ExportComparison>,
    pub checkpoint: Option<CheckpointComparison>,
}

/// The walk in progress. Feed it every entry in `seq` order with
/// [`Walk::push`], then [`Walk::finish`].
pub struct Walk<'a> {
    rows: u64,
    prev: String,
    broken: Option<BrokenLink>,
    checkpoint: Option<(Checkpoint, Option<String>)>,
    export: Option<ExportWalk<'a>>,
}

struct ExportWalk<'a> {
    source: &'a mut (dyn Iterator<Item = ExportedEntry> + Send),
    rows: u64,
    prev: String,
    difference: Option<BrokenLink>,
    ended: bool,
}

impl<'a> Walk<'a> {
    pub fn new(
        checkpoint: Option<&Checkpoint>,
        export: Option<&'a mut (dyn Iterator<Item = ExportedEntry> + Send)>,
    ) -> Self {
        Walk {
            rows: 0,
            prev: GENESIS_HASH.to_string(),
            broken: None,
            checkpoint: checkpoint.map(|c| (c.clone(), None)),
            export: export.map(|source| ExportWalk {
                source,
                rows: 0,
                prev: GENESIS_HASH.to_string(),
                difference: None,
                ended: false,
            }),
        }
    }

    pub fn push(&mut self, entry: &StoredEntry<'_>) {
        let index = self.rows;
        self.rows += 1;
        if self.broken.is_none() {
            if let Some(reason) = link_problem(index, &self.prev, entry) {
                self.broken = Some(BrokenLink {
                    index,
                    seq: entry.seq,
                    reason,
                });
            }
        }
        self.prev.clear();
        self.prev.push_str(entry.hash);
        if let Some((kept, found)) = &mut self.checkpoint {
            if i64::try_from(index + 1).ok() == Some(kept.length) {
                *found = Some(entry.hash.to_string());
            }
        }
        if let Some(export) = &mut self.export {
            export.push(index, entry);
        }
    }

    pub fn finish(self) -> Walked {
        let rows = self.rows;
        Walked {
            rows,
            head_hash: self.prev,
            first_broken: self.broken,
            export: self.export.map(|e| e.finish(rows)),
            checkpoint: self
                .checkpoint
                .map(|(kept, found)| compare_checkpoint(kept, found, rows)),
        }
    }
}

impl Walked {
    /// A store that keeps the journal's head in a row of its own (the
    /// PostgreSQL outbox's `journal_head`, which every write locks and
    /// the chain trigger moves): that row against the chain walked, as a
    /// mismatch of the field `journal_head` when they differ. A head that
    /// does not name the last entry means entries were removed, or the
    /// head moved, behind the triggers.
    pub fn head_mismatch(&self, seq: i64, hash: &str) -> Option<super::Mismatch> {
        let walked = (
            i64::try_from(self.rows).unwrap_or(i64::MAX),
            self.head_hash.as_str(),
        );
        (walked != (seq, hash)).then(|| super::Mismatch {
            op_id: None,
            field: "journal_head".to_string(),
            journal: serde_json::json!({"seq": walked.0, "hash": walked.1}),
            table: serde_json::json!({"seq": seq, "hash": hash}),
        })
    }
}

/// Why an entry does not link to the one before it, if it does not.
fn link_problem(index: u64, prev: &str, entry: &StoredEntry<'_>) -> Option<String> {
    let expected_seq = i64::try_from(index + 1).unwrap_or(i64::MAX);
    if let Some(why) = &entry.malformed {
        Some(format!("the entry is malformed ({why}): it was edited"))
    } else if entry.seq != expected_seq {
        Some(format!(
            "seq {} where seq {expected_seq} belongs: entries were removed, inserted or reordered",
            entry.seq
        ))
    } else if entry.prev_hash != prev {
        Some(
            "prev_hash does not match the previous entry's hash: an entry was removed, \
             inserted or reordered"
                .to_string(),
        )
    } else {
        None
    }
}

fn compare_checkpoint(kept: Checkpoint, found: Option<String>, rows: u64) -> CheckpointComparison {
    let reason = if kept.length == 0 {
        (kept.head_hash != GENESIS_HASH)
            .then(|| "a checkpoint of no entries has the genesis hash as its head".to_string())
    } else {
        match found {
            None => Some(format!(
                "the journal has {rows} entries, fewer than the checkpoint's {}: it was shortened",
                kept.length
            )),
            Some(hash) if hash != kept.head_hash => Some(format!(
                "entry {} has hash {hash}, not the checkpoint's: the journal was rewritten",
                kept.length
            )),
            Some(_) => None,
        }
    };
    CheckpointComparison {
        length: kept.length,
        head_hash: kept.head_hash,
        extended: reason.is_none(),
        reason,
    }
}

impl ExportWalk<'_> {
    fn push(&mut self, index: u64, entry: &StoredEntry<'_>) {
        if self.ended || self.difference.is_some() {
            return;
        }
        let Some(kept) = self.source.next() else {
            // The copy ended here: the rest of the journal came after it.
            self.ended = true;
            return;
        };
        self.rows += 1;
        let reason = if kept.prev_hash != self.prev || kept.recomputed() != kept.hash {
            "the exported copy itself is broken: its entry does not chain to the one before"
        } else if kept.seq != entry.seq || kept.hash != entry.hash {
            "the journal's entry differs from the exported copy: the journal was rewritten"
        } else {
            self.prev.clone_from(&kept.hash);
            return;
        };
        self.difference = Some(BrokenLink {
            index,
            seq: kept.seq,
            reason: reason.to_string(),
        });
    }

    /// Reads at most one line past the journal's end: a copy longer than
    /// the journal says so, however long it is.
    fn finish(mut self, rows: u64) -> ExportComparison {
        if !self.ended && self.difference.is_none() {
            if let Some(extra) = self.source.next() {
                self.rows += 1;
                self.difference = Some(BrokenLink {
                    index: rows,
                    seq: extra.seq,
                    reason: "the journal has fewer entries than the exported copy: entries \
                             were removed from its end"
                        .to_string(),
                });
            }
        }
        ExportComparison {
            rows: self.rows,
            first_difference: self.difference,
        }
    }
}
