//! The stores of a workspace, and the only code that writes SQL: the two
//! SQLite databases of a workspace directory, and the outbox's transaction
//! scripts, written once over a small executor (`store::sql`) for every
//! store whose outbox is SQL.
//!
//! A workspace is a directory holding `sender.sqlite` (the outbox) and
//! `receiver.sqlite` (the tool's ledger). They are opened on separate
//! connections with independent transactions; nothing ever opens both in one
//! transaction or attaches one to the other, because the whole point is to
//! model two parties that cannot commit together.
//!
//! Storage settings, chosen on purpose:
//! - `journal_mode = WAL`: the console and other readers keep reading while a
//!   reviewer or a receiver child writes; writers are still serialized.
//! - `synchronous = FULL`: a recorded decision or a committed effect survives
//!   power loss, not only a process crash. The cost is one extra fsync per
//!   commit, which is small next to a human decision. Only the experiment's
//!   throwaway workspaces are opened `OFF` in its own process
//!   (`settings::Durability`, crate-private).
//! - `busy_timeout` (default 5 s, `RECON_BUSY_TIMEOUT_MS` at the binary edge):
//!   a writer waits for another process's transaction instead of failing at
//!   once; past it the command reports the database as locked.
//! - `foreign_keys = ON`: evidence and dispatch rows must name a real
//!   operation.
//! - `application_id` tells a sender file from a receiver file, and
//!   `user_version` is the schema version: a file of schema 4, 5 or 6 is
//!   upgraded in place on opening (`store::upgrade`), one from any other
//!   incompatible recon is refused with a clear error instead of being
//!   misread.

//!
//! The sender side is a seam: the facade opens a workspace from its
//! [`Location`] (`store::location`; a workspace directory of two files is
//! `store::directory`, the only code that knows a store is a file), holds
//! a `Box<dyn SenderStore>` and speaks to it only in domain terms: the core
//! ([`Outbox`] for the flow, [`QueuePages`] for the console's pages,
//! [`TriageLog`], [`JournalAudit`] for `verify`, `export` and
//! `checkpoint`, [`ReceiverRegistry`]) and, through [`Capabilities`], the
//! optional [`BulkLoad`] for generated demo load and [`Drills`] for the
//! experiment's deliberate damage. No SQL and no rusqlite type appears in
//! those signatures, so a second store (PostgreSQL, for teams) is one more
//! implementation and no caller changes; a store that speaks SQL supplies
//! only `sql::SqlStore` (its write lock, its reads, its executor) and
//! runs the same scripts for all of the core but [`JournalAudit`]. The receiver's ledger has one
//! implementation and sits behind the `Receiver` trait instead
//! (`crate::receiver`).

mod audit_queries;
mod bulk;
mod conflict;
mod console_queries;
mod keys;
pub use console_queries::postgres_queue_page;
mod directory;
mod drill;
mod identity;
mod journal;
mod location;
mod metrics;
mod postgres;
mod receiver;
mod receivers;
mod rows;
mod sender;
mod sets;
mod sql;
mod triage;
mod upgrade;

use crate::audit::{Checkpoint, VerifyReport, VerifyRequest};
use crate::clock::Clock;
use crate::domain::{
    Acknowledgement, Approval, BulkOperation, CallFailure, CloseEntry, CloseRecord,
    CompensationRequest, Effect, EscalationRecord, EvidenceRecord, LostReceiver, Marking, Moved,
    NewNote, NewObservation, NewOperation, Note, NumberedIds, Observation, OpState, Operation,
    OpsQuery, PageBound, Policy, Provenance, QueueFilter, QueueKey, Recorded, Registration, Review,
    Timestamp, Verdict,
};
use crate::error::{Result, StoreError};
use crate::settings::{Durability, OpenOptions};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) use directory::open_receiver;
pub use location::Location;
pub(crate) use location::{
    copy_closed, head_listener, is_absent, ledger_workspace_id, open, open_journal, undo_creation,
    Presence,
};
pub(crate) use postgres::change_grants;
pub(crate) use postgres::init as init_database;
pub(crate) use postgres::status as database_status;
pub(crate) use postgres::upgrade as upgrade_database;
pub use postgres::DatabaseUpgrade;
pub use postgres::{
    detail as postgres_error_detail, ConnectError, DatabaseInit, DatabaseStatus, DatabaseUrl,
    LoginRoles, UrlError,
};
pub(crate) use receiver::ReceiverStore;
pub(crate) use sender::SqliteSender;

/// The outbox's own flow: prepare, dispatch, receipts, reviews and
/// approvals, each one transaction, and the reads that show them. Every
/// write is stamped with the time `clock` tells once the write lock is
/// held, so times never go backwards in journal order.
/// What recording a receipt did: the operation as it now is and the seq
/// of the receipt's evidence (or, for a late receipt, of its entry), and
/// for a late one whether it contradicts the decision.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReceiptRecorded {
    pub operation: Operation,
    pub seq: i64,
    pub late: bool,
    pub contradicts: bool,
}

pub(crate) trait Outbox {
    fn prepare(&mut self, new: &NewOperation<'_>, clock: &dyn Clock) -> Result<Operation>;
    /// Prepares each of `news` in one transaction, each alone (`prepare`'s
    /// rules, under a savepoint): one result per item, a refusal rolling
    /// back only its own. The outer error is the transaction's own.
    fn prepare_each(
        &mut self,
        news: &[NewOperation<'_>],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Operation>>>;
    fn get(&self, op_id: &str) -> Result<Option<Operation>>;
    fn require(&self, op_id: &str) -> Result<Operation>;
    /// [`Outbox::require`] for each of `op_ids`, in one read: a refusal is
    /// that operation's own; the outer error is the read's.
    fn require_each(&self, op_ids: &[&str]) -> Result<Vec<Result<Operation>>>;
    /// Operations in `op_id` order after `after`, optionally of one state.
    fn list(
        &self,
        state: Option<OpState>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Operation>>;
    fn count_by_state(&self) -> Result<BTreeMap<OpState, i64>>;
    /// Commits `prepared -> unknown` with its dispatch record, or refuses.
    fn begin_dispatch(&mut self, op_id: &str, clock: &dyn Clock) -> Result<Operation>;
    /// Records a receipt as evidence, or, when the operation was decided
    /// meanwhile, as a late receipt (SPEC 12); `None` when the operation is
    /// still `unknown` at another version than `op`'s.
    fn record_receipt(
        &mut self,
        op: &Operation,
        receipt: &Effect,
        provenance: &Provenance,
        clock: &dyn Clock,
    ) -> Result<Option<ReceiptRecorded>>;
    /// Every rule of a review, without writing.
    fn precheck_review(&self, review: &Review<'_>) -> Result<Verdict>;
    /// Records a decision, and with `observe` the snapshot it rests on as
    /// the reviewer's observation, in one transaction.
    fn record_review(
        &mut self,
        review: &Review<'_>,
        provenance: &Provenance,
        clock: &dyn Clock,
        observe: bool,
    ) -> Result<Recorded>;
    /// Records the decisions a policy took, each on its own closing
    /// snapshot, in one transaction; each refused alone (its entry a
    /// refusal), the others recorded.
    fn record_policy_reviews(
        &mut self,
        policy: Policy,
        reviews: &[(Review<'_>, Provenance)],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Recorded>>>;
    fn approve_compensation(
        &mut self,
        request: &CompensationRequest<'_>,
        clock: &dyn Clock,
    ) -> Result<Approval>;
    /// Records closes receivers committed, each with the observation of
    /// its closing read (the operation is the observation's), all stamped
    /// with the time of the write, in one transaction: each one refused or
    /// failing rolls back alone. Returns each observation; the outer error
    /// is the store's own (nothing was recorded).
    fn record_closes(
        &mut self,
        closes: &[(CloseRecord, NewObservation<'_>)],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Observation>>>;
    fn evidence(&self, op_id: &str) -> Result<Vec<EvidenceRecord>>;
    fn evidence_log(&self) -> Result<Vec<EvidenceRecord>>;
    fn approvals(&self, op_id: &str) -> Result<Vec<Approval>>;
    fn dispatch_count(&self, op_id: &str) -> Result<i64, StoreError>;
}

/// One screenful of the queue, keyset-paged.
pub(crate) trait QueuePages {
    fn queue_page(
        &self,
        filter: QueueFilter<'_>,
        bound: PageBound<'_>,
        limit: usize,
    ) -> Result<Vec<Operation>>;
    /// One page of a listing under either order, after its cursor.
    fn ops_page(&self, query: &OpsQuery<'_>) -> Result<Vec<Operation>>;
    /// The newest `updated_at` of any operation (one step of the age
    /// index), or `None` in an empty outbox.
    fn newest_update(&self) -> Result<Option<Timestamp>>;

    /// The operations the journal's entries after `seq` name, each once,
    /// with their state and version now: what changed since a reader saw
    /// the head at `seq`, in one query (one range of the journal's key,
    /// so it costs what changed, not the outbox).
    fn changed_since(&self, seq: i64) -> Result<Vec<Moved>>;
    /// How many operations match `filter` (its search text aside): one
    /// index range counted, what the queue's position needs under a
    /// verdict or escalation filter.
    fn count_matching(&self, filter: QueueFilter<'_>) -> Result<i64>;
    /// The keys of the first `limit` operations matching `filter`, in
    /// `op_id` order, in one walk of the filter's index: what marking
    /// every operation a filter shows needs, without the joins and the
    /// columns of a queue row.
    fn queue_keys(&self, filter: QueueFilter<'_>, limit: usize) -> Result<Vec<QueueKey>>;
}

/// Triage: observations, notes and the escalation marker, each act one
/// transaction (a batch of observations, one for the batch, each
/// observation under its own savepoint: one refused or failed is that
/// observation's result alone, the others are recorded), and their
/// history. Each act is stamped with the time `clock` tells once the write
/// lock is held: the `at` of the record given is replaced by it.
pub(crate) trait TriageLog {
    fn record_observations(
        &mut self,
        batch: &[NewObservation<'_>],
        clock: &dyn Clock,
    ) -> Result<Vec<Result<Observation>>>;
    fn note(&mut self, note: &NewNote<'_>, clock: &dyn Clock) -> Result<Note>;
    /// Raises or lowers the escalation marker, or refuses `not_unknown`,
    /// `already_escalated`, `not_escalated`.
    fn mark(&mut self, marking: &Marking<'_>, clock: &dyn Clock) -> Result<Operation>;
    /// Clears a contradiction marker with a person's reason, or refuses
    /// `not_contradicted`.
    fn acknowledge(
        &mut self,
        acknowledgement: &NewNote<'_>,
        clock: &dyn Clock,
    ) -> Result<Operation>;
    fn acknowledgements(&self, op_id: &str) -> Result<Vec<Acknowledgement>>;
    /// Keeps a failed receiver call with its operation, journaled; returns
    /// it with its seq and time.
    fn record_call_failure(
        &mut self,
        failure: &CallFailure,
        clock: &dyn Clock,
    ) -> Result<CallFailure>;
    fn call_failures(&self, op_id: &str) -> Result<Vec<CallFailure>>;
    /// Journals each close's authorization before the receiver is asked,
    /// in one transaction, each refused alone; the outer error is the
    /// store's own (nothing was journaled).
    fn record_close_requests(
        &mut self,
        op_ids: &[&str],
        receiver: &str,
        authorized_by: &str,
        clock: &dyn Clock,
    ) -> Result<Vec<Result<()>>>;
    fn observations(&self, op_id: &str) -> Result<Vec<Observation>>;
    fn notes(&self, op_id: &str) -> Result<Vec<Note>>;
    fn escalations(&self, op_id: &str) -> Result<Vec<EscalationRecord>>;
    fn closes(&self, op_id: &str) -> Result<Vec<CloseEntry>>;
    /// The authenticated role each journal entry naming `op_id` records
    /// (team mode), by the entry's seq; none on a workspace directory.
    fn entry_roles(&self, op_id: &str) -> Result<std::collections::BTreeMap<i64, String>>;
    /// Where `op_id` came from when it came through MCP (its key and
    /// client, kept in its `prepared` entry); `None` otherwise.
    fn origin(&self, op_id: &str) -> Result<Option<crate::domain::origin::Origin>>;
    /// The newest journal entry naming `op_id`, if any: how far its
    /// history goes, and what changed it last and who.
    fn latest_entry(&self, op_id: &str) -> Result<Option<crate::domain::LatestEntry>>;
    /// Operations to observe, in `op_id` order after `after`: of one state
    /// (or any), last observed before `observed_before` or never.
    fn observation_due(
        &self,
        state: Option<OpState>,
        observed_before: Option<Timestamp>,
        after: &str,
        limit: usize,
    ) -> Result<Vec<Operation>>;
    /// The decided operations whose deciding entry (a `receipt` or a
    /// `decided`) lies after seq `after` and at most `through`, in journal
    /// order, at most `limit`, each with the close its evidence rested on:
    /// `verify --receivers`'s pages.
    fn decided_page(
        &self,
        after: i64,
        through: i64,
        limit: usize,
    ) -> Result<Vec<crate::domain::DecidedOp>>;
}

/// Generated load for the demo, written in large transactions: an optional
/// capability ([`Capabilities::bulk`]), since how a store writes a million
/// rows fast is its own affair (SQLite drops a per-row trigger for the
/// length of a chunk, which would lock out every reader of a shared
/// server).
pub(crate) trait BulkLoad: Send {
    /// The greatest number of an op id of the series `ids` the outbox
    /// holds: one step down the op id index, whatever the outbox's size.
    fn last_numbered_op(&self, ids: NumberedIds) -> Result<Option<u64>, StoreError>;
    /// Inserts operations whose receipts were lost, routed to the
    /// registration named `receiver` (by name, as generated load is).
    fn insert_lost_receipts(
        &mut self,
        receiver: &str,
        ops: &mut dyn Iterator<Item = BulkOperation>,
    ) -> Result<u64>;
}

/// Deliberate damage, for the experiment's refusal scenarios and the
/// tests: an optional capability ([`Capabilities::drills`]) that only a
/// store the experiment builds for itself needs to offer.
pub(crate) trait Drills {
    fn drill_install_evidence_fault(&self) -> Result<(), StoreError>;
    fn drill_remove_evidence_fault(&self) -> Result<(), StoreError>;
    fn drill_insert_unapproved_compensation(
        &self,
        op_id: &str,
        action_kind: &str,
        payload: &serde_json::Value,
        original_op_id: &str,
        effect_id: &str,
        at: Timestamp,
    ) -> Result<(), StoreError>;
    fn drill_change_action_kind(&self, op_id: &str, action_kind: &str) -> Result<(), StoreError>;
}

/// What a store offers beyond the core: `None` where it has no such
/// capability, and the facade says so (`StoreError::Unsupported`).
pub(crate) trait Capabilities {
    fn bulk(&mut self) -> Option<&mut dyn BulkLoad>;
    fn drills(&self) -> Option<&dyn Drills>;

    /// Whether the database would let this session do `act`, asked before
    /// an act that starts at a receiver (`resolve` closes there before it
    /// records): refused `permission_denied` as the act itself would be.
    /// A store that authorizes nobody (a workspace directory) allows all.
    fn may(&self, _act: crate::domain::team::Act) -> crate::error::Result<()> {
        Ok(())
    }

    /// The role the store's server authenticated this session as
    /// (PostgreSQL's `session_user`), which every act records; `None` for
    /// a store without one (a workspace directory).
    fn session_role(&self) -> Option<&str> {
        None
    }

    /// Which team roles this session holds now, as the database answers
    /// for its acts (the roles `db init` creates, then the owner's); `None`
    /// for a store that authorizes nobody (a workspace directory).
    fn roles_held(&self) -> crate::error::Result<Option<Vec<crate::domain::team::TeamRole>>> {
        Ok(None)
    }
}

/// Waits for an outbox's journal head to move, on a connection of its own
/// that nothing else uses (a store whose server can wake its readers:
/// PostgreSQL's `LISTEN`; see `location::head_listener`).
pub(crate) trait HeadListener: Send {
    /// Blocks until the head may have moved, or `fallback` has passed
    /// without a sign, and returns the head as stored then. The first call,
    /// and the first after an error, connects and returns the head at
    /// once.
    fn next(&mut self, fallback: std::time::Duration) -> Result<Checkpoint, StoreError>;
}

/// The journal and the tables read exactly as stored, for `verify`,
/// `export` and `checkpoint`.
pub(crate) trait JournalAudit {
    /// Walks the chain and replays the projection, in one read transaction,
    /// and holds the outbox's schema to this build's and its metadata to
    /// what the journal implies and to `ledger_id`, the workspace id the
    /// ledger holds (when it is there).
    fn verify_journal(
        &self,
        request: VerifyRequest<'_>,
        ledger_id: Option<&str>,
    ) -> Result<VerifyReport, StoreError>;
    /// Hands every entry, as its export line, to `sink`, in `seq` order,
    /// then verifies; all in one read transaction.
    fn export_journal(
        &self,
        ledger_id: Option<&str>,
        sink: &mut (dyn FnMut(&str) -> std::io::Result<()> + Send),
    ) -> Result<VerifyReport, StoreError>;
    /// The journal's length and head hash, as stored.
    fn journal_head(&self) -> Result<Checkpoint, StoreError>;
}

/// Where an operation routes, as [`ReceiverRegistry::routes_of`] finds
/// it: the registration's id it names (none before schema 6) and that
/// registration, or the one holding its receiver's name, while registered.
pub(crate) type Route = (Option<i64>, Option<Registration>);

/// Registered receivers and the routes of action kinds to them.
pub(crate) trait ReceiverRegistry {
    /// Stores a registration and its routes, or refuses `receiver_exists` /
    /// `action_routed`, writing nothing.
    fn register_receiver(&mut self, registration: &Registration, clock: &dyn Clock) -> Result<()>;
    fn receivers(&self) -> Result<Vec<Registration>>;
    fn registration(&self, name: &str) -> Result<Option<Registration>>;
    /// For each `(op_id, receiver)`, the id of the registration the
    /// operation was routed to (none for one prepared before schema 6,
    /// which routes by name) and that registration while it is registered
    /// (else the one registered as `receiver`): all in one read, each
    /// registration read once.
    fn routes_of(&self, ops: &[(&str, &str)]) -> Result<Vec<Route>>;
    /// Stores `changed` (its `version` one past the stored one) as the
    /// registration's new version, journaled; refused `receiver_changed`
    /// when another command changed it first.
    fn update_receiver(
        &mut self,
        changed: &Registration,
        clock: &dyn Clock,
    ) -> Result<Registration>;
    /// Removes a registration, or refuses `unknown_receiver` /
    /// `receiver_in_use` while a prepared or unknown operation routes to it.
    /// With `lost` (its store is gone) it is removed all the same, and each
    /// such operation is escalated with the reason in the same
    /// transaction; returns the operations escalated, by op id.
    fn remove_receiver(
        &mut self,
        name: &str,
        lost: Option<&LostReceiver<'_>>,
        clock: &dyn Clock,
    ) -> Result<Vec<String>>;
}

/// The SQLite outbox offers both: its bulk load (`store::bulk`) and its
/// drills (`store::drill`).
impl Capabilities for SqliteSender {
    fn bulk(&mut self) -> Option<&mut dyn BulkLoad> {
        Some(self)
    }

    fn drills(&self) -> Option<&dyn Drills> {
        Some(self)
    }
}

/// The counts `recon metrics` exposes (SPEC 15), read in one snapshot
/// (`store::metrics`).
pub(crate) trait OutboxMetrics {
    fn tally(&self) -> Result<crate::domain::metrics::OutboxTally>;
    /// Each kept duplicate (SPEC 14) by op id, with how many of its
    /// surplus effects no approval compensates yet (zero once all are).
    fn surplus_awaiting(&self) -> Result<std::collections::BTreeMap<String, usize>>;
}

/// Everything the facade needs of a sender store: the core every store
/// implements, and the optional capabilities it may offer.
pub(crate) trait SenderStore:
    Outbox
    + QueuePages
    + TriageLog
    + JournalAudit
    + ReceiverRegistry
    + OutboxMetrics
    + Capabilities
    + Send
{
}

impl<T> SenderStore for T where
    T: Outbox
        + QueuePages
        + TriageLog
        + JournalAudit
        + ReceiverRegistry
        + OutboxMetrics
        + Capabilities
        + Send
{
}

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 7;

pub const SENDER_FILE: &str = "sender.sqlite";
pub const RECEIVER_FILE: &str = "receiver.sqlite";

/// Which of the two databases a file is meant to be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Role {
    pub application_id: i64,
    pub schema: &'static str,
    /// How a schema-4 file of this role becomes this schema.
    pub from_four: upgrade::Steps,
    /// How a schema-5 file of this role becomes this schema.
    pub from_five: upgrade::Steps,
    /// How a schema-6 file of this role becomes this schema.
    pub from_six: upgrade::Steps,
    pub finish: upgrade::Finish,
}

/// Maps a rusqlite error to a storage error that names the file.
pub(crate) fn sql_error(path: &Path, source: rusqlite::Error) -> StoreError {
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabase(path.to_path_buf()),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::Locked(path.to_path_buf())
        }
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Attaches the file path to rusqlite results.
pub(crate) trait SqlContext<T> {
    fn at(self, path: &Path) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn at(self, path: &Path) -> Result<T, StoreError> {
        self.map_err(|e| sql_error(path, e))
    }
}

/// Opens one database of a workspace, creating and initializing it when
/// asked, and checks that it is the recon file of the expected role and
/// schema version; a file of schema 4 is upgraded first, at `now`
/// (`store::upgrade`).
pub(crate) fn open_database(
    path: &Path,
    role: Role,
    options: OpenOptions,
    now: Timestamp,
) -> Result<Connection, StoreError> {
    let exists = path.exists();
    if !exists && !options.create {
        return Err(StoreError::MissingDatabase(path.to_path_buf()));
    }
    if exists && !path.is_file() {
        return Err(StoreError::NotADatabase(path.to_path_buf()));
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if options.create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let mut conn = Connection::open_with_flags(path, flags).at(path)?;
    conn.busy_timeout(options.busy_timeout).at(path)?;
    // Reading the header is the first thing that fails on a file that is not
    // a database, so do it before anything else.
    let (application_id, user_version, tables): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id),
                    (SELECT user_version FROM pragma_user_version),
                    (SELECT COUNT(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .at(path)?;
    let fresh = application_id == 0 && user_version == 0 && tables == 0;
    if fresh && options.create {
        initialize(&conn, path, role, options.durability)?;
    } else if application_id != role.application_id {
        return Err(StoreError::NotADatabase(path.to_path_buf()));
    } else if upgrade::UPGRADABLE_VERSIONS.contains(&user_version) {
        upgrade::upgrade(&mut conn, path, role, now)?;
    } else if user_version != SCHEMA_VERSION {
        return Err(StoreError::IncompatibleSchema {
            path: path.to_path_buf(),
            found: user_version,
            expected: SCHEMA_VERSION,
        });
    }
    let synchronous = options.durability.synchronous();
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON;"
    ))
    .at(path)?;
    Ok(conn)
}

fn initialize(
    conn: &Connection,
    path: &Path,
    role: Role,
    durability: Durability,
) -> Result<(), StoreError> {
    // Creation costs one fsync instead of the seven a creation fully
    // synchronous at each step costs (a rollback journal and the database
    // for the first page, then the WAL header, the directory and the commit
    // of the schema), and every act stays as durable as before, because no
    // act can be durable without the workspace it is written in:
    //
    // 1. `journal_mode = WAL` (persistent, and impossible inside a
    //    transaction) writes the first page with the WAL flag and nothing
    //    else, without a rollback journal (a fresh file holds nothing to
    //    roll back to) and with one fsync of the file. That page
    //    must be on disk before anything is in the WAL: SQLite deletes the
    //    WAL of an empty database file. No act can be recorded in this
    //    file yet: no tables, application id and user version 0, a fresh
    //    file to every opener.
    // 2. The schema is committed to the WAL with `synchronous = OFF`. The
    //    first act is a later commit to the same WAL with `synchronous =
    //    FULL`, by this connection or any other: its fsync covers the
    //    schema's frames too, and WAL recovery keeps a commit only when
    //    every frame before it is intact (the checksums are chained), so an
    //    act that survives a power loss has its schema. Should a checkpoint
    //    come first, it runs with `synchronous = FULL` (set below and on
    //    every connection) and fsyncs the database before the WAL restarts.
    //    The first sync of the WAL on a connection also fsyncs the
    //    directory (SQLite does so for a WAL it opened with create), so the
    //    entries of both files are durable before the act counts.
    //
    // What a power loss before the first act can now lose is the schema,
    // leaving the fresh file of step 1 (or, torn in step 1, a file that is
    // not a database). Nothing was recorded in it, and recon treats it as
    // any file without its schema: a state that creation in two synchronous
    // commits could leave too, between them, only for a shorter while.
    //
    // With `Durability::ProcessCrash` (the experiment's throwaway
    // workspaces) every `FULL` below is `OFF`: no fsync at all.
    let synchronous = durability.synchronous();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .at(path)?;
    // A fresh file already in WAL (step 1 done, the schema lost) stays so:
    // MEMORY would take it out of WAL first.
    if !mode.eq_ignore_ascii_case("wal") {
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = MEMORY; PRAGMA synchronous = {synchronous};"
        ))
        .at(path)?;
        // journal_mode cannot change inside a transaction, and it is
        // persistent, so set it once here.
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .at(path)?;
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = OFF;
         BEGIN IMMEDIATE;
         {schema}
         PRAGMA application_id = {app};
         PRAGMA user_version = {version};
         COMMIT;
         PRAGMA synchronous = {synchronous};",
        schema = role.schema,
        app = role.application_id,
        version = SCHEMA_VERSION,
    ))
    .at(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `synchronous` setting of a connection to a `role` file in `dir`,
    /// opened with `options`.
    fn synchronous(dir: &Path, role: Role, options: OpenOptions) -> i64 {
        let path = dir.join(format!("{}.sqlite", role.application_id));
        let conn = open_database(&path, role, options, Timestamp::from_millis(0)).unwrap();
        conn.query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap()
    }

    const FULL: i64 = 2;
    const OFF: i64 = 0;

    #[test]
    fn a_workspace_opened_with_the_default_options_commits_with_synchronous_full() {
        for role in [sender::ROLE, receiver::ROLE] {
            let dir = tempfile::tempdir().unwrap();
            let created = synchronous(dir.path(), role, OpenOptions::default().creating());
            let reopened = synchronous(dir.path(), role, OpenOptions::default());
            assert_eq!((created, reopened), (FULL, FULL));
        }
    }

    #[test]
    fn a_throwaway_workspace_commits_without_fsync_and_a_default_opener_of_it_with_fsync() {
        for role in [sender::ROLE, receiver::ROLE] {
            let dir = tempfile::tempdir().unwrap();
            let throwaway = OpenOptions::default().creating().throwaway();
            let created = synchronous(dir.path(), role, throwaway);
            // A receiver child opens the experiment's files with the
            // default options: its commits keep their fsync.
            let child = synchronous(dir.path(), role, OpenOptions::default());
            let reopened = synchronous(dir.path(), role, OpenOptions::default().throwaway());
            assert_eq!((created, child, reopened), (OFF, FULL, OFF));
        }
    }

    /// A workspace at `dir` with the built-in ledger registered, closed.
    fn closed_workspace(dir: &Path) -> String {
        let mut ws =
            crate::workspace::Workspace::open(dir, OpenOptions::default().creating()).unwrap();
        ws.register_builtin("builtin", &["*".to_string()], true)
            .unwrap();
        ws.id().to_string()
    }

    #[test]
    fn a_copy_of_a_closed_workspace_opens_with_its_identity_and_registrations() {
        let (from, to) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let id = closed_workspace(from.path());
        crate::workspace::Workspace::copy_closed(from.path(), to.path()).unwrap();
        let copy = crate::workspace::Workspace::open(to.path(), OpenOptions::default()).unwrap();
        let names: Vec<String> = copy
            .receivers()
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            (copy.id(), names),
            (id.as_str(), vec!["builtin".to_string()])
        );
    }

    #[test]
    fn copying_a_workspace_never_writes_over_one() {
        let (from, to) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        closed_workspace(from.path());
        let theirs = closed_workspace(to.path());
        let copied = crate::workspace::Workspace::copy_closed(from.path(), to.path());
        assert!(
            matches!(&copied, Err(StoreError::Io(e)) if e.kind() == std::io::ErrorKind::AlreadyExists),
            "{copied:?}"
        );
        let kept = crate::workspace::Workspace::open(to.path(), OpenOptions::default()).unwrap();
        assert_eq!(kept.id(), theirs);
    }
}
