//! The journal: every act on the outbox as one entry of an append-only,
//! hash-chained log, and the checks that prove the tables are its
//! projection.
//!
//! Triggers make the journal append-only for every well-behaved writer,
//! but anyone with the file can drop them, and anyone can edit a table
//! behind them. So each entry carries `hash = SHA-256(prev_hash || entry)`
//! over its canonical content ([`entry`]), which makes an edited, removed,
//! reordered or inserted entry a broken link ([`chain`]); and the tables
//! the flow reads (operations, approvals, evidence, dispatches, closes,
//! receivers, routes) are replayed from the journal and compared field by
//! field ([`projection`]), which makes an edit of any of them a mismatch.
//! A decision is also held to the rules that recorded it (its snapshot,
//! classified again, must support it), which no comparison of rows can
//! do: a forger who edits an entry and every row to agree is still found.
//! What none of these can see from inside the database, a journal rewritten
//! whole with fresh hashes or cut short together with its tables, a
//! checkpoint (`LEN:HASH`) or an export kept elsewhere can.
//!
//! Everything here is pure: a store reads rows exactly as it holds them
//! ([`Row`]: null, integer, real, text, blob) and feeds them in, one entry
//! or one operation at a time, each per-operation stream an iterator in
//! byte order of its key ([`source`] states the contract and merges the
//! streams), so a journal of millions of entries is checked in constant
//! memory and any store can feed the same replay.

mod chain;
mod entry;
pub mod meta;
mod projection;
mod row;
mod source;

pub use chain::{
    BrokenLink, CheckpointComparison, ExportComparison, ExportedEntry, StoredEntry, Walk, Walked,
};
pub use entry::{
    acknowledged, approved, call_failed, close_requested, closed, content, dispatched, evidence,
    link_hash, marked, noted, observed, person_of, prepared, receiver_registered, receiver_removed,
    receiver_updated, seal_generated, settings, sha256_hex, upgraded, Checkpoint, EntryKind,
    Sealed, Settings, GENESIS_HASH,
};
pub use projection::{
    Mismatch, OpTables, Table, ACKNOWLEDGEMENTS, APPROVALS, CALL_FAILURES, CLOSES, CLOSE_REQUESTS,
    COMPENSATED_EFFECTS, COMPENSATED_EFFECTS_WHERE, COMPENSATION_ROUTES, COMPENSATION_ROUTES_WHERE,
    DISPATCH_LOG, ESCALATIONS, EVIDENCE, JOURNAL, NOTES, OBSERVATIONS, OPERATIONS, RECEIVERS,
    ROUTES, STATE_COUNTS,
};
pub use row::{Column, Row};
pub use source::{merge_groups, replay_operations, OP_STREAMS};

use projection::{
    compare_counts, compare_keyed, compare_op, parse_entry, replay_op, replay_receivers,
    state_mismatches, ParsedEntry, OP_STATE,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// Replays the journal against the tables, fed one group at a time: first
/// the entries that name no operation with the receivers and routes, then
/// each operation in `op_id` order, then the state counts.
#[derive(Debug, Default)]
pub struct Projector {
    /// The upgrade from schema 4, when the file had one.
    upgraded: Option<Upgraded>,
    entries: u64,
    mismatches: Vec<Mismatch>,
    state_mismatches: Vec<String>,
    first_broken: Option<BrokenLink>,
    counts: BTreeMap<String, i64>,
    /// The seq of the last readable entry without an `at`.
    last_untimed: i64,
    /// The last entry a schema older than 7 wrote (0 for none): what an
    /// upgrade found, exempt from the rule that a closed snapshot is a
    /// recorded close (SPEC 12), which that schema did not have.
    older_through: i64,
    /// Whether the store journals its settings (PostgreSQL's outbox,
    /// SPEC 12): then `meta` is held to the newest `settings` entry.
    settings_journaled: bool,
    /// The newest `settings` entry's, when one was replayed (`None`
    /// inside for one that could not be read).
    settings: Option<Option<Settings>>,
    /// The last entry of the upgrade that fixed the routes of operations
    /// prepared before schema 6 (0 for none), and what it fixed them to.
    routes_fixed_through: i64,
    fixed_routes: projection::FixedRoutes,
}

/// An upgrade from schema 4, as the outbox's `meta` records it: entries
/// up to `through_seq` were written before it, without an `at`, and their
/// rows carry the upgrade's time (SPEC 9). Only those entries take it: an
/// entry without `at` after them, or an edited row, is still a mismatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgraded {
    pub at: String,
    pub through_seq: i64,
}

/// What the replay found.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub entries: u64,
    pub mismatches: Vec<Mismatch>,
    pub state_mismatches: Vec<String>,
    /// The earliest entry that could not be replayed (not canonical, its
    /// columns disagreeing with it): a broken link the chain cannot see.
    pub first_broken: Option<BrokenLink>,
}

impl Projector {
    /// A projector for a file upgraded from schema 4 (see [`Upgraded`]).
    pub fn after_upgrade(upgraded: Option<Upgraded>) -> Self {
        Projector {
            upgraded,
            ..Projector::default()
        }
    }

    /// Entries up to `seq` were written by an older schema, as a workspace
    /// file's upgrade recorded (`older_schema_through_seq`); a database's
    /// upgrade is its `upgraded` entry, which [`Projector::receivers`]
    /// finds.
    pub fn older_schema_through(mut self, seq: i64) -> Self {
        self.older_through = self.older_through.max(seq);
        self
    }

    /// Parses journal rows ([`JOURNAL`] columns) for replay; one that does
    /// not parse is noted as broken and left out.
    fn parse_all<'a>(&mut self, rows: &'a [Row]) -> Vec<ParsedEntry<'a>> {
        self.entries += rows.len() as u64;
        let mut parsed = Vec::with_capacity(rows.len());
        for row in rows {
            match parse_entry(row) {
                Ok(mut entry) => {
                    if entry.is_untimed() {
                        self.last_untimed = self.last_untimed.max(entry.seq);
                    }
                    if let Some(upgraded) = &self.upgraded {
                        if entry.seq <= upgraded.through_seq {
                            entry.time_if_untimed = Some(upgraded.at.clone());
                        }
                    }
                    parsed.push(entry)
                }
                Err(broken) => {
                    if self
                        .first_broken
                        .as_ref()
                        .is_none_or(|b| broken.seq < b.seq)
                    {
                        self.first_broken = Some(broken);
                    }
                }
            }
        }
        parsed
    }

    /// An upgrade gave every operation prepared before schema 6 the
    /// registration its receiver's name held when the journal ended at
    /// `seq` (a workspace file's `routes_fixed_through_seq`).
    pub fn routes_fixed_through(mut self, seq: i64) -> Self {
        self.routes_fixed_through = seq;
        self
    }

    /// The store journals its settings (SPEC 12): `meta` is held to its
    /// newest `settings` entry, and an outbox with entries has one.
    pub fn settings_journaled(mut self) -> Self {
        self.settings_journaled = true;
        self
    }

    /// The entries with no `op_id`, against every receivers and routes row.
    pub fn receivers(&mut self, journal: &[Row], receivers: &[Row], routes: &[Row]) {
        let entries = self.parse_all(journal);
        for entry in &entries {
            if entry.kind == EntryKind::Settings {
                self.settings = Some(projection::settings_of(entry));
            }
            let from = entry
                .fields
                .find("from")
                .and_then(|raw| raw.get().parse::<i64>().ok());
            if entry.kind == EntryKind::Upgraded
                && from.is_some_and(|from| from < crate::domain::RECORDED_CLOSES_SINCE)
            {
                self.older_through = self.older_through.max(entry.seq);
            }
        }
        if self.routes_fixed_through > 0 {
            self.fixed_routes = projection::fixed_routes(&entries, self.routes_fixed_through);
        }
        let (expected_receivers, expected_routes, problems) = replay_receivers(&entries);
        self.mismatches.extend(problems);
        compare_keyed(
            &RECEIVERS,
            &expected_receivers,
            receivers,
            &mut self.mismatches,
        );
        compare_keyed(&ROUTES, &expected_routes, routes, &mut self.mismatches);
    }

    /// One operation's entries against its rows.
    pub fn operation(&mut self, op_id: &str, journal: &[Row], tables: &OpTables) {
        let entries = self.parse_all(journal);
        let (projected, problems) =
            replay_op(op_id, &entries, self.older_through, &self.fixed_routes);
        self.mismatches.extend(problems);
        if let Some(op) = projected.operation.first() {
            let state = op[OP_STATE].as_text();
            match self.counts.get_mut(state.as_ref()) {
                Some(n) => *n += 1,
                None => {
                    self.counts.insert(state.into_owned(), 1);
                }
            }
        }
        compare_op(op_id, &projected, tables, &mut self.mismatches);
        state_mismatches(op_id, tables, &mut self.state_mismatches);
    }

    /// The compensations routed elsewhere than their original effect
    /// ([`projection::COMPENSATION_ROUTES`]): the tables agree with the
    /// journal once every operation was compared, so the rows say what the
    /// entries do.
    pub fn compensation_routes(&mut self, rows: &[Row]) {
        projection::compensation_routes(rows, &mut self.mismatches);
    }

    /// The approvals of an effect other than their original's confirmed
    /// one that is not one of its surplus either
    /// ([`projection::COMPENSATED_EFFECTS`], SPEC 14).
    pub fn compensated_effects(&mut self, rows: &[Row]) {
        projection::compensated_effects(rows, &mut self.mismatches);
    }

    /// The replayed counts per state against the `state_counts` rows.
    pub fn state_counts(&mut self, rows: &[Row]) {
        compare_counts(&self.counts, rows, &mut self.mismatches);
    }

    /// The outbox's `meta` rows against what the journal implies and the
    /// ledger's id (when the ledger is there and holds one); call it last,
    /// after every entry was replayed.
    pub fn meta(&mut self, rows: &[Row], ledger_id: Option<&str>) {
        let facts = meta::JournalFacts {
            entries: self.entries,
            last_untimed: self.last_untimed,
            settings: self
                .settings_journaled
                .then_some(self.settings.as_ref().and_then(Option::as_ref)),
        };
        self.mismatches
            .extend(meta::mismatches(rows, facts, ledger_id));
    }

    pub fn finish(self) -> Projection {
        Projection {
            entries: self.entries,
            mismatches: self.mismatches,
            state_mismatches: self.state_mismatches,
            first_broken: self.first_broken,
        }
    }
}

/// What `verify` checks besides the database itself.
#[derive(Default)]
pub struct VerifyRequest<'a> {
    /// An earlier export, one entry at a time, to be a prefix of the
    /// journal.
    pub against: Option<&'a mut (dyn Iterator<Item = ExportedEntry> + Send)>,
    /// A checkpoint kept elsewhere, which the journal must extend.
    pub checkpoint: Option<&'a Checkpoint>,
}

/// One way the outbox's schema is not this build's: a table, index or
/// trigger it lacks, holds with other SQL, or holds unknown to recon. A
/// dropped append-only trigger lets any writer rewrite history; a dropped
/// index or an added trigger changes what every later act does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaDifference {
    /// `table`, `index` or `trigger` (SQLite's objects); on PostgreSQL
    /// `column`, `constraint`, `index`, `trigger` or `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub difference: Difference,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    Missing,
    Differs,
    Unknown,
}

impl std::fmt::Display for SchemaDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, name) = (&self.kind, &self.name);
        match self.difference {
            Difference::Missing => write!(f, "it lacks the {kind} {name}"),
            Difference::Differs => write!(f, "its {kind} {name} differs"),
            Difference::Unknown => write!(f, "it has an unknown {kind} {name}"),
        }
    }
}

/// Everything `recon verify` found. The first six fields are wave 1's
/// (`rows` and `head_hash` now count and name the journal).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    /// True when the chain is intact, the tables are its projection, the
    /// metadata agrees with it, the schema is this build's, and the
    /// exported copy and the checkpoint (when given) agree with it.
    pub intact: bool,
    /// Entries in the journal.
    pub rows: u64,
    pub head_hash: String,
    pub first_broken: Option<BrokenLink>,
    pub state_mismatches: Vec<String>,
    pub export: Option<ExportComparison>,
    /// Entries replayed into the projection.
    pub journal_entries: u64,
    pub projection_mismatches: Vec<Mismatch>,
    pub checkpoint: Option<CheckpointComparison>,
    /// How the outbox's tables, indexes and triggers differ from those
    /// this build creates.
    pub schema_differences: Vec<SchemaDifference>,
}

impl VerifyReport {
    pub fn new(
        walked: Walked,
        projection: Projection,
        schema_differences: Vec<SchemaDifference>,
    ) -> Self {
        let first_broken = match (walked.first_broken, projection.first_broken) {
            (Some(a), Some(b)) => Some(if b.seq < a.seq { b } else { a }),
            (a, b) => a.or(b),
        };
        let intact = first_broken.is_none()
            && projection.state_mismatches.is_empty()
            && projection.mismatches.is_empty()
            && walked
                .export
                .as_ref()
                .is_none_or(|e| e.first_difference.is_none())
            && walked.checkpoint.as_ref().is_none_or(|c| c.extended)
            && schema_differences.is_empty();
        VerifyReport {
            intact,
            rows: walked.rows,
            head_hash: walked.head_hash,
            first_broken,
            state_mismatches: projection.state_mismatches,
            export: walked.export,
            journal_entries: projection.entries,
            projection_mismatches: projection.mismatches,
            checkpoint: walked.checkpoint,
            schema_differences,
        }
    }
}
