//! The library's front door: one workspace, its two stores, and the
//! reconciliation flow as the command line and the console use it.
//!
//! A [`Workspace`] holds a connection to each database. Each method is one
//! step a user can take, and each mutation is one transaction on one store
//! (a closing snapshot is the receiver's; everything else the sender's), so
//! the two databases are never written together.

use crate::dispatch::{self, DispatchOptions, DispatchReport, PendingDispatch, ReceiverProgram};
use crate::domain::{
    classify, normalize_name, Approval, CompensationRequest, Decision, Effect, EvidenceRecord,
    Operation, Review, Snapshot, Verdict,
};
use crate::error::{Refusal, Result, StoreError};
use crate::store::sender::{NewOperation, Recorded};
use crate::store::{OpenOptions, ReceiverStore, SenderStore, WorkspacePaths};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

pub struct Workspace {
    pub paths: WorkspacePaths,
    pub sender: SenderStore,
    pub receiver: ReceiverStore,
    program: ReceiverProgram,
}

/// A snapshot with the operation it was taken for and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classified {
    #[serde(skip)]
    pub operation: Operation,
    pub snapshot: Snapshot,
    pub verdict: Verdict,
}

/// Everything recorded about one operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpDetail {
    pub operation: Operation,
    pub evidence: Vec<EvidenceRecord>,
    pub approvals: Vec<Approval>,
}

impl Workspace {
    /// Opens an existing workspace, or creates it with `options.create`.
    pub fn open(dir: &Path, options: OpenOptions) -> Result<Self, StoreError> {
        let paths = WorkspacePaths::new(dir);
        paths.prepare_dir(options)?;
        let options = whole_or_nothing(&paths, options)?;
        // Check an existing database before creating its missing partner,
        // so a workspace with one bad file is refused without a new file
        // appearing beside it.
        let (sender, receiver) = if paths.receiver.exists() && !paths.sender.exists() {
            let receiver = ReceiverStore::open(&paths.receiver, options)?;
            (SenderStore::open(&paths.sender, options)?, receiver)
        } else {
            let sender = SenderStore::open(&paths.sender, options)?;
            (sender, ReceiverStore::open(&paths.receiver, options)?)
        };
        Ok(Workspace {
            paths,
            sender,
            receiver,
            program: ReceiverProgram::current()?,
        })
    }

    /// Uses another binary as the receiver child (tests run the library from
    /// a test binary, which is not `recon`).
    pub fn with_receiver_program(mut self, program: ReceiverProgram) -> Self {
        self.program = program;
        self
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
        self.sender.prepare(&NewOperation {
            op_id,
            action_kind,
            payload,
        })
    }

    pub fn dispatch(&mut self, op_id: &str, options: DispatchOptions) -> Result<DispatchReport> {
        let pending = self.start_dispatch(op_id, options)?;
        self.finish_dispatch(pending)
    }

    /// The first half of a dispatch: `unknown` committed, child running.
    pub fn start_dispatch(
        &mut self,
        op_id: &str,
        options: DispatchOptions,
    ) -> Result<PendingDispatch> {
        dispatch::start(&mut self.sender, &self.paths, &self.program, op_id, options)
    }

    pub fn finish_dispatch(&mut self, pending: PendingDispatch) -> Result<DispatchReport> {
        dispatch::finish(&mut self.sender, pending)
    }

    /// Takes a snapshot of the operation's receiver effects and classifies
    /// it. With `close_authorized_by`, this is the receiver mutation that
    /// closes the operation for good; the authorizer must be named.
    pub fn snapshot(
        &mut self,
        op_id: &str,
        close_authorized_by: Option<&str>,
    ) -> Result<Classified> {
        let close = match close_authorized_by {
            Some(who) => Some(normalize_name(who).ok_or(Refusal::EmptyReviewer)?),
            None => None,
        };
        let operation = self.sender.require(op_id)?;
        let snapshot = self.receiver.snapshot(op_id, close)?;
        let verdict = classify(operation.scope(), &snapshot);
        Ok(Classified {
            operation,
            snapshot,
            verdict,
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
    pub fn reconcile(&mut self, request: &ReconcileRequest<'_>) -> Result<Recorded> {
        let reviewer = normalize_name(request.reviewer).ok_or(Refusal::EmptyReviewer)?;
        let close = match request.close_authorized_by {
            Some(who) => Some(normalize_name(who).ok_or(Refusal::EmptyReviewer)?),
            None => None,
        };
        let current = self.sender.require(request.op_id)?;
        let payload = request.payload.unwrap_or(&current.payload);
        let open = self.receiver.snapshot(request.op_id, None)?;
        let snapshot = match close {
            Some(who) => {
                let as_closed = Snapshot {
                    closed: true,
                    ..open.clone()
                };
                self.sender
                    .precheck_review(&review_of(request, payload, reviewer, &as_closed))?;
                self.receiver.snapshot(request.op_id, Some(who))?
            }
            None => open,
        };
        self.sender
            .record_review(&review_of(request, payload, reviewer, &snapshot))
    }

    pub fn approve_compensation(&mut self, request: &CompensationRequest<'_>) -> Result<Approval> {
        self.sender.approve_compensation(request)
    }

    pub fn show(&self, op_id: &str) -> Result<OpDetail> {
        Ok(OpDetail {
            operation: self.sender.require(op_id)?,
            evidence: self.sender.evidence(op_id)?,
            approvals: self.sender.approvals(op_id)?,
        })
    }

    pub fn ledger(&self, op_id: Option<&str>) -> Result<Vec<Effect>> {
        self.receiver.ledger(op_id)
    }

    /// A value that changes whenever another connection commits to either
    /// database: what the console polls to stay live.
    pub fn data_version(&self) -> Result<(i64, i64), StoreError> {
        Ok((self.sender.data_version()?, self.receiver.data_version()?))
    }
}

fn review_of<'a>(
    request: &ReconcileRequest<'a>,
    payload: &'a Value,
    reviewer: &'a str,
    snapshot: &'a Snapshot,
) -> Review<'a> {
    Review {
        op_id: request.op_id,
        payload,
        reviewer,
        decision: request.decision,
        snapshot,
        expected_version: request.expected_version,
    }
}

/// A workspace is created whole or not at all. When one database is absent
/// (or an empty file) and the other holds data, the absent one was lost, and
/// recreating it would be unsafe: a fresh outbox forgets which operations
/// were sent, so the same op could be prepared and dispatched again; a fresh
/// ledger forgets its close tombstones, so a late original could land after
/// `not_applied`. Then the workspace is opened without creating anything,
/// which reports the lost file.
fn whole_or_nothing(
    paths: &WorkspacePaths,
    options: OpenOptions,
) -> Result<OpenOptions, StoreError> {
    if !options.create {
        return Ok(options);
    }
    let existing = OpenOptions {
        create: false,
        ..options
    };
    let in_use = match (holds_nothing(&paths.sender), holds_nothing(&paths.receiver)) {
        (true, false) => !ReceiverStore::open(&paths.receiver, existing)?.is_unused()?,
        (false, true) => !SenderStore::open(&paths.sender, existing)?.is_unused()?,
        _ => false,
    };
    Ok(if in_use { existing } else { options })
}

/// Absent, or an empty file (which SQLite would treat as a new database).
fn holds_nothing(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) => meta.is_file() && meta.len() == 0,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
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
}
