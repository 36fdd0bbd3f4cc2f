//! The library's front door: one workspace, its outbox and its receivers,
//! and the reconciliation flow as the command line, the console, the
//! experiment and the demo use it.
//!
//! A [`Workspace`] is the only door. Its stores are private: the outbox is a
//! `Box<dyn SenderStore>` (a SQLite file in a workspace directory, or a
//! PostgreSQL outbox in team mode), and every receiver is reached through
//! the `Receiver` trait (the built-in ledger, read in process, or an
//! adapter program speaking `recon-adapter/1`). Callers see domain types only;
//! when a caller needs something, the facade grows a method named after the
//! need. Each mutation is one transaction on one store (a closing snapshot
//! is the receiver's; everything else the outbox's), so the two are never
//! written together.

use crate::audit::{Checkpoint, VerifyReport, VerifyRequest};
use crate::clock::{Clock, SystemClock};
use crate::dispatch::{DispatchOptions, DispatchReport, PendingDispatch, ReceiverProgram};
use crate::domain::origin::Origin;
use crate::domain::{
    classify, normalize_name, Approval, CloseEntry, Closure, CompensationRequest, Decision, Effect,
    EscalationRecord, EvidenceRecord, Moved, NewObservation, NewOperation, Note, Observation,
    Observed, OpState, Operation, PageBound, Provenance, QueueFilter, QueueKey, Recorded, Review,
    Snapshot, Timestamp, Verdict,
};
use crate::error::{Committed, Error, Refusal, Result, StoreError};
use crate::faults::{self, CrashPoint, HoldPoint};
use crate::receiver::Builtin;

mod drills;
mod generated;
mod live;
mod receivers;
mod recheck;
mod resolve;
mod triage;
mod watch;

use crate::settings::OpenOptions;
pub use crate::store::DatabaseUpgrade;
use crate::store::{self, SenderStore};
pub use crate::store::{
    postgres_error_detail, postgres_queue_page, ConnectError, DatabaseInit, DatabaseStatus,
    DatabaseUrl, Location, LoginRoles, UrlError,
};
pub use drills::Drills;
pub use generated::GeneratedLoad;
pub use live::HeadWatch;
use receivers::{judge_apply, report_of};
pub use receivers::{NewReceiver, ReceiverChange, ReceiverCheck, DEFAULT_TIMEOUT_MS};
pub use recheck::{Contradiction, ReceiversReport};
pub use resolve::{Interrupted, ResolveReport, ResolveRequest, Resolved, Selection};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
pub use triage::{ObserveReport, ObserveRequest, Unread};
pub use watch::Watch;

/// The most operations `prepare --batch` prepares in one transaction
/// (SPEC 10).
pub const BATCH_TRANSACTION: usize = 500;

pub struct Workspace {
    location: Location,
    /// Whether the location still names the stores opened, to refuse a
    /// mutation once it names others.
    presence: Box<dyn store::Presence>,
    sender: Box<dyn SenderStore>,
    /// The workspace's id, which every adapter request carries.
    id: String,
    /// The built-in ledger: none behind a database (SPEC 10).
    ledger: Option<Builtin>,
    program: ReceiverProgram,
    /// The time of every act; the system clock unless a test sets another.
    clock: Arc<dyn Clock>,
    /// The registrations whose `describe` this process has run again.
    described: std::collections::BTreeSet<i64>,
    /// The adapter sessions of this command, by registration id and
    /// version; each process ends when the workspace is dropped.
    sessions: std::collections::HashMap<(i64, i64), crate::dispatch::adapter::Session>,
    /// A receiver whose `apply` this process answers itself (a running
    /// gateway's), when one is lent.
    in_process: Option<Box<dyn crate::dispatch::InProcessApply>>,
}

/// A snapshot with the operation it was taken for and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classified {
    #[serde(skip)]
    pub operation: Operation,
    pub snapshot: Snapshot,
    pub verdict: Verdict,
    /// The receiver the snapshot came from and the answer it rests on.
    pub provenance: Provenance,
    /// The observation this read was recorded as, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observed>,
}

/// Everything recorded about one operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpDetail {
    pub operation: Operation,
    pub evidence: Vec<EvidenceRecord>,
    pub approvals: Vec<Approval>,
    pub observations: Vec<Observation>,
    pub notes: Vec<Note>,
    pub closes: Vec<CloseEntry>,
    pub escalations: Vec<EscalationRecord>,
    pub acknowledgements: Vec<crate::domain::Acknowledgement>,
    /// The receiver calls that gave no usable answer (why it is unknown).
    pub failures: Vec<crate::domain::CallFailure>,
    /// The authenticated role (team mode) each journal entry about the
    /// operation records, by the entry's seq: the evidence's
    /// `journal_seq`, a close's, observation's, note's, escalation's or
    /// acknowledgement's `seq`. Empty on a workspace directory.
    #[serde(skip)]
    pub roles: BTreeMap<i64, String>,
    /// The role that approved each of `approvals`, in the same order.
    #[serde(skip)]
    pub approval_roles: Vec<Option<String>>,
    /// The MCP key and client the operation came with (SPEC 13); `None`
    /// for an operation a command prepared.
    #[serde(skip)]
    pub origin: Option<Origin>,
    /// Each surplus effect of a kept duplicate with its compensation's op
    /// id and state, when one was approved (SPEC 14).
    pub surplus: Vec<crate::domain::duplicates::SurplusEffect>,
}

impl Workspace {
    /// Opens an existing workspace, or creates it with `options.create`
    /// (a directory converts into its [`Location`]).
    pub fn open(location: impl Into<Location>, options: OpenOptions) -> Result<Self, StoreError> {
        Workspace::open_with_clock(location, options, Arc::new(SystemClock))
    }

    /// Opens with `clock` as the time of every act from the start: a
    /// workspace of schema 4 is upgraded at its time (`store::upgrade`).
    pub fn open_with_clock(
        location: impl Into<Location>,
        options: OpenOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let location = location.into();
        let opened = store::open(&location, options, clock.now())?;
        Ok(Workspace {
            location,
            presence: opened.presence,
            sender: opened.sender,
            id: opened.workspace_id,
            ledger: opened.ledger.map(Builtin::from_store),
            program: ReceiverProgram::current()?,
            clock,
            described: Default::default(),
            sessions: Default::default(),
            in_process: None,
        })
    }

    /// Stamps every act with `clock` instead of the system clock (tests
    /// of times and ages use a [`crate::clock::FixedClock`]); an upgrade
    /// on opening has already used the clock it was opened with.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Creates a PostgreSQL outbox's schema in `database` (`recon db
    /// init`), or finds it there already. Nothing else opens a database
    /// yet: team mode is not usable beyond this.
    pub fn init_database(
        database: &DatabaseUrl,
        options: OpenOptions,
        four_eyes: bool,
        roles_prefix: Option<&str>,
    ) -> Result<DatabaseInit> {
        store::init_database(database, options, four_eyes, roles_prefix)
    }

    /// What the outbox in `database` is and who may act on it (`recon db
    /// status`): read only.
    pub fn database_status(
        database: &DatabaseUrl,
        options: OpenOptions,
    ) -> Result<DatabaseStatus, StoreError> {
        store::database_status(database, options)
    }

    /// `recon db grant` (`grant`) or `recon db revoke`: the outbox's
    /// `roles`, granted to or revoked from `login` by its owner; what the
    /// login holds afterwards.
    pub fn change_grants(
        database: &DatabaseUrl,
        options: OpenOptions,
        login: &str,
        roles: &[crate::domain::team::TeamRole],
        grant: bool,
    ) -> Result<LoginRoles> {
        store::change_grants(database, options, login, roles, grant)
    }

    /// Upgrades the outbox in `database` made by an older recon to this
    /// build's schema, in one transaction (`recon db upgrade`, its owner
    /// only), at the system's time.
    pub fn upgrade_database(
        database: &DatabaseUrl,
        options: OpenOptions,
    ) -> Result<DatabaseUpgrade, Error> {
        store::upgrade_database(database, options, &SystemClock)
    }

    /// Whether nothing of a workspace is at `location` (for a directory:
    /// neither of its files).
    pub fn is_absent(location: impl Into<Location>) -> bool {
        store::is_absent(&location.into())
    }

    /// Copies the workspace at `from`, which no connection may hold open,
    /// to `to`, where there is none: the experiment's labs each start from
    /// a copy of one fresh workspace.
    pub(crate) fn copy_closed(
        from: impl Into<Location>,
        to: impl Into<Location>,
    ) -> Result<(), StoreError> {
        store::copy_closed(&from.into(), &to.into())
    }

    /// Runs `act` on the workspace at `location`, creating it when there
    /// is none; when `act` fails on a workspace it created, the workspace
    /// is removed again (the directory too, if it made it), so a refused
    /// command leaves nothing behind.
    pub fn create_for<T>(
        location: impl Into<Location>,
        options: OpenOptions,
        act: impl FnOnce(&mut Workspace) -> Result<T>,
    ) -> Result<T> {
        let location = location.into();
        let undo = store::undo_creation(&location);
        let result = Workspace::open(&location, options.creating())
            .map_err(Into::into)
            .and_then(|mut ws| act(&mut ws));
        if let (Err(_), Some(undo)) = (&result, undo) {
            undo.undo();
        }
        result
    }

    /// The workspace's id: the scope of its op ids at a receiver that
    /// serves several workspaces.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The time the next act would be stamped with: what ages are measured
    /// against.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The clock this handle stamps acts with, for another handle on the
    /// same workspace (the console's errands off the key loop).
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The newest time an operation's state or version changed: the time
    /// a rendering of the workspace "as it was left" is taken at
    /// (`recon screenshot`), so the same workspace renders the same ages.
    pub fn newest_update(&self) -> Result<Option<Timestamp>> {
        self.sender.newest_update()
    }

    /// Where the workspace is: what another handle on it opens.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The workspace directory, where the built-in ledger's file is (its
    /// adapter child and the experiment's direct receiver calls are given
    /// it); none for an outbox in a database.
    pub fn dir(&self) -> Option<&Path> {
        match &self.location {
            Location::Workspace(dir) => Some(dir),
            Location::Database(_) => None,
        }
    }

    /// The directory of the built-in ledger, or the refusal an outbox in a
    /// database gives whatever needs it (`builtin_single_host`).
    pub fn ledger_dir(&self) -> Result<&Path> {
        Ok(self.dir().ok_or(Refusal::BuiltinSingleHost)?)
    }

    /// The built-in ledger, or `builtin_single_host` behind a database.
    fn builtin(&self) -> Result<&Builtin, Refusal> {
        self.ledger.as_ref().ok_or(Refusal::BuiltinSingleHost)
    }

    fn builtin_mut(&mut self) -> Result<&mut Builtin, Refusal> {
        self.ledger.as_mut().ok_or(Refusal::BuiltinSingleHost)
    }

    /// Refuses (exit 4, nothing changed) when the location no longer names
    /// the stores this handle opened (for a directory: it was deleted,
    /// moved or replaced, or a file swapped). Every mutation asks first;
    /// the console also asks on its refresh tick, to say so on screen.
    pub fn ensure_present(&self) -> Result<(), StoreError> {
        self.presence.check()
    }

    /// Uses another binary as the receiver child (tests run the library from
    /// a test binary, which is not `recon`).
    pub fn with_receiver_program(mut self, program: ReceiverProgram) -> Self {
        self.program = program;
        self
    }

    /// Answers the `apply` of the receiver `local` serves in this process
    /// from now on, instead of starting its program (`recon mcp
    /// --gateway`'s own effect calls); every other call still runs its
    /// program.
    pub fn apply_in_process(&mut self, local: Box<dyn crate::dispatch::InProcessApply>) {
        self.in_process = Some(local);
    }

    pub fn receiver_program(&self) -> &ReceiverProgram {
        &self.program
    }

    pub fn prepare(
        &mut self,
        op_id: &str,
        action_kind: &str,
        payload: &Value,
    ) -> Result<Operation> {
        self.prepare_from(op_id, action_kind, payload, None)
    }

    /// [`Workspace::prepare`], keeping where the operation came from (an
    /// MCP key and client) in its `prepared` entry.
    pub fn prepare_from(
        &mut self,
        op_id: &str,
        action_kind: &str,
        payload: &Value,
        origin: Option<&Origin>,
    ) -> Result<Operation> {
        self.ensure_present()?;
        let new = NewOperation {
            op_id,
            action_kind,
            payload,
            origin,
        };
        self.sender.prepare(&new, &*self.clock)
    }

    /// Where an operation came from, when it came through MCP: the key and
    /// client its `prepared` entry keeps.
    pub fn origin(&self, op_id: &str) -> Result<Option<Origin>> {
        self.sender.origin(op_id)
    }

    /// Prepares each of `news` (at most [`BATCH_TRANSACTION`]) in one
    /// transaction, each alone: one result per item, in order, a refused
    /// item rolling back only its own writes. The outer error is the
    /// transaction's: nothing of it was committed.
    pub fn prepare_each(&mut self, news: &[NewOperation<'_>]) -> Result<Vec<Result<Operation>>> {
        self.ensure_present()?;
        if news.len() > BATCH_TRANSACTION {
            return Err(Error::Invalid(format!(
                "at most {BATCH_TRANSACTION} operations are prepared in one transaction"
            )));
        }
        self.sender.prepare_each(news, &*self.clock)
    }

    pub fn dispatch(&mut self, op_id: &str, options: DispatchOptions) -> Result<DispatchReport> {
        let pending = self.start_dispatch(op_id, options)?;
        self.finish_dispatch(pending)
    }

    /// The first half of a dispatch: `prepared -> unknown` committed with
    /// its dispatch record, then the receiver's adapter started with the
    /// request on its stdin. Refusals (blind retry, compensation rechecks)
    /// happen in that transaction, before any child exists. The built-in
    /// ledger's drills are refused for any other receiver
    /// ([`Workspace::accepts_drills`]), and a receiver that is no longer
    /// registered is refused `unknown_receiver`, before anything is written.
    pub fn start_dispatch(
        &mut self,
        op_id: &str,
        options: DispatchOptions,
    ) -> Result<PendingDispatch> {
        self.ensure_present()?;
        let op = self.sender.require(op_id)?;
        if options.has_drills() && !self.accepts_drills(op_id)? {
            return Err(StoreError::Receiver(format!(
                "drills belong to the built-in ledger; {op_id} routes to {}",
                op.receiver
            ))
            .into());
        }
        // A prepared operation whose receiver has since been removed (a
        // compensation follows its original's) is refused before anything
        // is written; otherwise it would be left unknown, never invoked.
        if op.state == OpState::Prepared {
            self.current_registration(&op)?;
        }
        let operation = self.sender.begin_dispatch(op_id, &*self.clock)?;
        faults::crash_point(CrashPoint::DispatchAfterUnknownCommit);
        self.start_apply(operation, options)
    }

    /// Waits for the receiver and records its receipt, if one counts, as
    /// evidence. No receipt (a crash, a timeout, an answer that does not
    /// match the request) leaves the operation `unknown`, and the report
    /// says why.
    pub fn finish_dispatch(&mut self, pending: PendingDispatch) -> Result<DispatchReport> {
        let PendingDispatch {
            operation,
            child,
            registration,
        } = pending;
        let reply = child.finish();
        let judged = judge_apply(&operation, &registration, &reply);
        let mut report = report_of(&operation, reply, &judged);
        if let Err(failure) = &judged {
            // Why the operation stays unknown, kept with it for a reviewer.
            let (exit_code, stderr) = (report.receiver_exit_code, &report.receiver_stderr);
            let call = (
                "apply",
                registration.name.as_str(),
                exit_code,
                stderr.as_str(),
            );
            self.keep_failure(&operation, call, failure)?;
        }
        if let Ok((receipt, provenance)) = judged {
            faults::crash_point(CrashPoint::DispatchAfterReceiptRead);
            let recorded = self
                .sender
                .record_receipt(&operation, &receipt, &provenance, &*self.clock)
                .map_err(|e| e.after(committed_effect(&operation, &receipt)))?;
            let current = match recorded {
                Some(recorded) => {
                    if recorded.late {
                        report.late = true;
                        report.contradicts = Some(recorded.contradicts);
                    }
                    recorded.operation
                }
                None => self.sender.require(&operation.op_id)?,
            };
            report.state = current.state;
            report.version = current.version;
        }
        Ok(report)
    }

    /// Journals a receiver call that gave no usable answer with its
    /// operation: kind, detail, exit code and the tail of its stderr.
    /// `call` is the verb, the receiver, the exit code and the stderr.
    fn keep_failure(
        &mut self,
        op: &Operation,
        (verb, receiver, exit_code, stderr): (&str, &str, Option<i32>, &str),
        failure: &crate::domain::AdapterFailure,
    ) -> Result<()> {
        let call_failure = crate::domain::CallFailure {
            seq: 0,
            op_id: op.op_id.clone(),
            verb: verb.to_string(),
            receiver: receiver.to_string(),
            kind: failure.kind,
            detail: failure.detail.clone(),
            exit_code,
            stderr: crate::domain::CallFailure::tail(stderr),
            at: self.clock.now(),
        };
        match self.sender.record_call_failure(&call_failure, &*self.clock) {
            // A reader's snapshot is a read: the failure is reported to
            // them, and a role that may record it keeps it next time.
            Err(crate::Error::Refused(Refusal::PermissionDenied { .. })) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Takes a snapshot of the operation's receiver effects and classifies
    /// it, showing it only. With `close_authorized_by`, this is the
    /// receiver mutation that closes the operation for good; the
    /// authorizer must be named, and the closing read is recorded as their
    /// observation.
    pub fn snapshot(
        &mut self,
        op_id: &str,
        close_authorized_by: Option<&str>,
    ) -> Result<Classified> {
        self.snapshot_by(op_id, close_authorized_by, None)
    }

    /// A snapshot as [`Workspace::snapshot`] takes it, recorded as an
    /// observation by `observed_by` when one is named (a close is always
    /// recorded, as the authorizer's unless `observed_by` names another).
    pub fn snapshot_by(
        &mut self,
        op_id: &str,
        close_authorized_by: Option<&str>,
        observed_by: Option<&str>,
    ) -> Result<Classified> {
        let close = named(close_authorized_by)?;
        let observer = named(observed_by)?;
        if close.is_some() || observer.is_some() {
            self.ensure_present()?;
        }
        let operation = self.sender.require(op_id)?;
        let read = self.read_receiver(&operation, close, observer)?;
        let verdict = classify(operation.scope(), &read.snapshot);
        let observation = match (read.observation, observer) {
            (Some(recorded), _) => Some(recorded.seen),
            (None, Some(by)) => {
                let new = NewObservation {
                    op_id,
                    by,
                    at: self.clock.now(),
                    snapshot: &read.snapshot,
                    verdict,
                    provenance: &read.provenance,
                };
                let recorded = self.sender.record_observations(&[new], &*self.clock)?;
                recorded.into_iter().next().transpose()?.map(|o| o.seen)
            }
            (None, None) => None,
        };
        Ok(Classified {
            operation,
            snapshot: read.snapshot,
            verdict,
            provenance: read.provenance,
            observation,
        })
    }

    /// Takes a fresh snapshot (closing it only when asked), classifies it,
    /// and records the decision only when the verdict supports it.
    ///
    /// A closing snapshot is a receiver mutation, so it is taken only when
    /// the decision would be recorded on it: first every rule runs against
    /// an ordinary read as the close would see it (the same rows, closed),
    /// and a decision that is going to be refused (stale, not unknown, wrong
    /// scope, unsupported verdict) closes nothing. The store checks every
    /// rule again inside the recording transaction, against the real
    /// closing snapshot, in case a write landed in between.
    ///
    /// The read the decision rests on is recorded as the reviewer's
    /// observation in the decision's transaction; a closing read is
    /// recorded with the close instead (as the authorizer's), once.
    pub fn reconcile(&mut self, request: &ReconcileRequest<'_>) -> Result<Recorded> {
        let reviewer = normalize_name(request.reviewer).ok_or(Refusal::EmptyReviewer)?;
        self.ensure_present()?;
        let close = named(request.close_authorized_by)?;
        let current = self.sender.require(request.op_id)?;
        if close.is_some() {
            crate::receiver::rules::check_close(&self.registration_of(&current)?)?;
        }
        let payload = request.payload.unwrap_or(&current.payload);
        let open = self.read_receiver(&current, None, Some(reviewer))?;
        let read = match close {
            Some(who) => {
                let as_closed = Snapshot {
                    closed: true,
                    ..open.snapshot.clone()
                };
                let review = review_of(request, payload, reviewer, &as_closed);
                self.sender.precheck_review(&review)?;
                faults::hold_point(HoldPoint::ReconcileBeforeClose);
                self.read_receiver(&current, Some(who), Some(who))?
            }
            None => open,
        };
        let review = review_of(request, payload, reviewer, &read.snapshot);
        let recorded = self.record_decision(&review, &read.provenance, read.observation.is_none());
        match close {
            Some(who) => recorded.map_err(|e| e.after(committed_close(&current, who))),
            None => recorded,
        }
    }

    /// Records a decision on a snapshot the caller already holds, under
    /// every rule of a review (the experiment shows that a snapshot of
    /// another operation is refused `scope_mismatch`), with the snapshot
    /// recorded as the reviewer's observation.
    pub fn record_review(
        &mut self,
        review: &Review<'_>,
        provenance: &Provenance,
    ) -> Result<Recorded> {
        self.record_decision(review, provenance, true)
    }

    /// Records a decision at the clock's time (read once the store holds its
    /// write lock), and the read it rests on as
    /// the reviewer's observation when `observe`.
    fn record_decision(
        &mut self,
        review: &Review<'_>,
        provenance: &Provenance,
        observe: bool,
    ) -> Result<Recorded> {
        self.sender
            .record_review(review, provenance, &*self.clock, observe)
    }

    pub fn approve_compensation(&mut self, request: &CompensationRequest<'_>) -> Result<Approval> {
        self.ensure_present()?;
        // The compensation goes to the registration of the effect it
        // compensates: refused `receiver_gone` when that one was removed.
        if let Some(original) = self.sender.get(request.original_op_id)? {
            self.registration_of(&original)?;
        }
        self.sender.approve_compensation(request, &*self.clock)
    }

    /// The operation with its whole history: evidence, approvals, recorded
    /// observations, notes, closes and escalations.
    pub fn show(&self, op_id: &str) -> Result<OpDetail> {
        let approvals = self.sender.approvals(op_id)?;
        // An approval's entry is the first of its compensation's: the
        // approval prepares the compensation in the same act.
        let approval_roles = (approvals.iter())
            .map(|a| {
                let roles = self.sender.entry_roles(&a.compensation_op_id)?;
                Ok(roles.into_values().next())
            })
            .collect::<Result<_>>()?;
        let operation = self.sender.require(op_id)?;
        let mut states = BTreeMap::new();
        for a in &approvals {
            if let Some(op) = self.sender.get(&a.compensation_op_id)? {
                states.insert(a.compensation_op_id.clone(), op.state);
            }
        }
        let surplus = crate::domain::duplicates::surplus_of(&operation, &approvals, |id| {
            states.get(id).copied()
        });
        Ok(OpDetail {
            operation,
            surplus,
            evidence: self.sender.evidence(op_id)?,
            approvals,
            approval_roles,
            roles: self.sender.entry_roles(op_id)?,
            observations: self.sender.observations(op_id)?,
            notes: self.sender.notes(op_id)?,
            closes: self.sender.closes(op_id)?,
            escalations: self.sender.escalations(op_id)?,
            acknowledgements: self.sender.acknowledgements(op_id)?,
            failures: self.sender.call_failures(op_id)?,
            origin: self.sender.origin(op_id)?,
        })
    }

    /// The role the database authenticated this session as (team mode:
    /// PostgreSQL's `session_user`), which every act records beside the
    /// name typed and which names default to; `None` on a workspace
    /// directory.
    pub fn session_role(&self) -> Option<&str> {
        self.sender.session_role()
    }

    /// The team roles this session holds now, as the database answers for
    /// its acts (`recon_has_role`); `None` on a workspace directory, where
    /// nobody is authenticated and every act is offered.
    pub fn roles_held(&self) -> Result<Option<Vec<crate::domain::team::TeamRole>>> {
        self.sender.roles_held()
    }

    /// The closes the outbox journaled for an operation, oldest first.
    pub fn closes(&self, op_id: &str) -> Result<Vec<CloseEntry>> {
        self.sender.closes(op_id)
    }

    /// The operation, or `None` when there is no such operation.
    pub fn operation(&self, op_id: &str) -> Result<Option<Operation>> {
        self.sender.get(op_id)
    }

    /// The operation, or `unknown_operation`.
    pub fn require(&self, op_id: &str) -> Result<Operation> {
        self.sender.require(op_id)
    }

    /// Operations in `op_id` order after `after`, optionally of one state.
    pub fn ops(
        &self,
        state: Option<OpState>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        self.sender.list(state, after, limit)
    }

    /// One page of the console's queue.
    pub fn queue_page(
        &self,
        filter: QueueFilter<'_>,
        bound: PageBound<'_>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        self.sender.queue_page(filter, bound, limit)
    }

    /// The keys of the first `limit` operations the queue's filter selects,
    /// in op id order, in one query: what `v` marks.
    pub fn queue_keys(&self, filter: QueueFilter<'_>, limit: usize) -> Result<Vec<QueueKey>> {
        self.sender.queue_keys(filter, limit)
    }

    /// The operations changed since the journal's head was at `seq` (each
    /// once), with their state and version now: what a reader who saw that
    /// head must look at again.
    pub fn changed_since(&self, seq: i64) -> Result<Vec<Moved>> {
        self.sender.changed_since(seq)
    }

    /// The newest journal entry naming `op_id`: what changed it last and
    /// who, and how far its history goes (the console binds a dialog to
    /// it).
    pub fn latest_entry(&self, op_id: &str) -> Result<Option<crate::domain::LatestEntry>> {
        self.sender.latest_entry(op_id)
    }

    /// How many operations the queue's filter selects (its search text
    /// aside), for the position in a verdict or escalation filter.
    pub fn queue_count(&self, filter: QueueFilter<'_>) -> Result<i64> {
        self.sender.count_matching(filter)
    }

    /// How many operations are in each state.
    pub fn counts(&self) -> Result<BTreeMap<OpState, i64>> {
        self.sender.count_by_state()
    }

    /// Each kept duplicate (SPEC 14) by op id, with how many of its
    /// surplus effects no approval compensates yet: the console's header
    /// counts them and its queue marks the operations with any.
    pub fn surplus_awaiting(&self) -> Result<BTreeMap<String, usize>> {
        self.sender.surplus_awaiting()
    }

    pub fn evidence(&self, op_id: &str) -> Result<Vec<EvidenceRecord>> {
        self.sender.evidence(op_id)
    }

    /// Every evidence row, in order.
    pub fn evidence_log(&self) -> Result<Vec<EvidenceRecord>> {
        self.sender.evidence_log()
    }

    pub fn approvals(&self, op_id: &str) -> Result<Vec<Approval>> {
        self.sender.approvals(op_id)
    }

    /// How many times the receiver was invoked for the operation.
    pub fn dispatch_count(&self, op_id: &str) -> Result<i64, StoreError> {
        self.sender.dispatch_count(op_id)
    }

    /// The built-in ledger's effects, all or one operation's.
    pub fn ledger(&self, op_id: Option<&str>) -> Result<Vec<Effect>> {
        self.builtin()?.ledger(op_id)
    }

    /// How many effects the built-in ledger holds, all or one operation's.
    pub fn effect_count(&self, op_id: Option<&str>) -> Result<i64, StoreError> {
        self.ledger
            .as_ref()
            .ok_or(StoreError::Unsupported(NO_LEDGER))?
            .effect_count(op_id)
    }

    /// Who closed the operation at the built-in ledger, if anyone: no one
    /// where there is no built-in ledger (an outbox in a database, whose
    /// receivers are adapters; their closes are in `closes`).
    pub fn closure(&self, op_id: &str) -> Result<Option<Closure>, StoreError> {
        match &self.ledger {
            Some(ledger) => ledger.closure(op_id),
            None => Ok(None),
        }
    }

    /// A value that moves whenever anyone commits to the outbox (its
    /// journal's head: every change to the outbox appends to the journal,
    /// whatever the store) or to the built-in ledger, when there is one
    /// (its effects and closes, [`Builtin::mark`]): what the console's
    /// watcher reads ([`Workspace::watch_head`]) to stay live. It reads the
    /// same on every connection.
    pub fn change_marker(&self) -> Result<ChangeMarker, StoreError> {
        Ok(ChangeMarker {
            journal: self.sender.journal_head()?,
            ledger: self.ledger.as_ref().map(Builtin::mark).transpose()?,
        })
    }

    /// A watcher of this workspace's change marker, to run on a thread of
    /// its own ([`HeadWatch::run`]) with connections of its own.
    pub fn watch_head(&self) -> HeadWatch {
        HeadWatch::new(self.location.clone())
    }
}

/// The journal of a workspace, opened without its receiver: `verify`,
/// `export` and `checkpoint` need nothing else, and must work when the
/// ledger is gone.
pub struct Journal {
    location: Location,
    sender: Box<dyn SenderStore>,
    id: Option<String>,
}

impl Journal {
    /// Opens the outbox; one of schema 4 is upgraded at the system
    /// clock's time, as [`Workspace::open`] would.
    pub fn open(location: impl Into<Location>, options: OpenOptions) -> Result<Self, StoreError> {
        let location = location.into();
        let (sender, id) = store::open_journal(&location, options, SystemClock.now())?;
        Ok(Journal {
            location,
            sender,
            id,
        })
    }

    /// The workspace's id, as the outbox holds it ([`Workspace::id`]);
    /// `None` for an outbox whose creation stopped before writing one.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Walks the chain, replays the journal against the tables, and
    /// compares it with an exported copy and a checkpoint when given, and
    /// the outbox's workspace id with the ledger's when the ledger is
    /// there (read only; never created).
    pub fn verify(&self, request: VerifyRequest<'_>) -> Result<VerifyReport, StoreError> {
        let ledger_id = store::ledger_workspace_id(&self.location);
        self.sender.verify_journal(request, ledger_id.as_deref())
    }

    /// Hands every entry's export line to `sink`, in order, and verifies
    /// exactly the journal it exported.
    pub fn export(
        &self,
        sink: &mut (dyn FnMut(&str) -> std::io::Result<()> + Send),
    ) -> Result<VerifyReport, StoreError> {
        let ledger_id = store::ledger_workspace_id(&self.location);
        self.sender.export_journal(ledger_id.as_deref(), sink)
    }

    /// The journal's length and head hash, to keep elsewhere.
    pub fn checkpoint(&self) -> Result<Checkpoint, StoreError> {
        self.sender.journal_head()
    }

    /// The system clock's time: what ages are measured against.
    pub fn now(&self) -> Timestamp {
        SystemClock.now()
    }

    /// What `recon metrics` counts, read in one snapshot of the outbox.
    pub fn tally(&self) -> Result<crate::domain::metrics::OutboxTally> {
        self.sender.tally()
    }
}

/// Where the workspace stood when [`Workspace::change_marker`] was read:
/// the outbox journal's head, and the built-in ledger's mark (a number
/// that grows with its effects and closes), `None` where there is no
/// built-in ledger (a database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeMarker {
    pub journal: Checkpoint,
    pub ledger: Option<i64>,
}

impl ChangeMarker {
    /// Whether this marker shows something `seen` did not: a longer
    /// journal, a ledger mark grown, or (which no append does) the same
    /// length with another head. An older marker (a watcher that read the
    /// head before the reader's own act landed) is not news.
    pub fn is_newer_than(&self, seen: &ChangeMarker) -> bool {
        let journal = match self.journal.length.cmp(&seen.journal.length) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => self.journal.head_hash != seen.journal.head_hash,
            std::cmp::Ordering::Less => false,
        };
        journal || self.ledger > seen.ledger
    }
}

/// What [`StoreError::Unsupported`] names behind a database.
const NO_LEDGER: &str = "built-in ledger";

/// What a dispatch had committed when recording its receipt failed: the
/// receiver's effect, which stays.
fn committed_effect(op: &Operation, receipt: &Effect) -> Committed {
    Committed {
        sentence: format!(
            "receiver {} had committed effect {} for {}; the receipt was not recorded, so \
             the operation stays unknown",
            op.receiver, receipt.effect_id, op.op_id
        ),
        json: serde_json::json!({"effect": {
            "op_id": op.op_id, "receiver": op.receiver, "effect_id": receipt.effect_id,
        }}),
    }
}

/// What a reconcile had committed when its decision failed after the close:
/// the close, which is for good.
fn committed_close(op: &Operation, authorized_by: &str) -> Committed {
    Committed {
        sentence: format!(
            "the operation is now closed at receiver {} (authorized by {authorized_by}): no \
             effect can be written for it any more",
            op.receiver
        ),
        json: serde_json::json!({"closed": {
            "op_id": op.op_id, "receiver": op.receiver, "authorized_by": authorized_by,
        }}),
    }
}

/// A name that must not be blank, when one is given.
fn named(name: Option<&str>) -> Result<Option<&str>> {
    name.map(|who| normalize_name(who).ok_or(Refusal::EmptyReviewer.into()))
        .transpose()
}

fn review_of<'a>(
    request: &ReconcileRequest<'a>,
    payload: &'a Value,
    reviewer: &'a str,
    snapshot: &'a Snapshot,
) -> Review<'a> {
    Review {
        keep: request.keep,
        op_id: request.op_id,
        payload,
        reviewer,
        decision: request.decision,
        snapshot,
        expected_version: request.expected_version,
    }
}

/// A reviewer's decision as the command line and console submit it.
#[derive(Debug, Clone)]
pub struct ReconcileRequest<'a> {
    pub op_id: &'a str,
    pub reviewer: &'a str,
    pub decision: Decision,
    pub expected_version: i64,
    /// The scope the reviewer decided on; the stored payload when `None`.
    pub payload: Option<&'a Value>,
    /// Take a closing snapshot first, authorized by this name.
    pub close_authorized_by: Option<&'a str>,
    /// The effect kept of a duplicate (`--keep`, SPEC 14).
    pub keep: Option<&'a str>,
}
