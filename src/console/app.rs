//! The console's whole state, in one struct that the view reads and only
//! `update` writes.
//!
//! The workspace handle lives here so that `update` can reach the library
//! API; the view never touches it and renders only the values `update`
//! loaded: the counts, one screenful of queue rows (keyset-paged, never the
//! whole outbox), and the selected operation's detail. Whether an action is
//! available right now is a pure function of this state
//! ([`App::availability`]): the domain's policy judges the selected
//! operation, and only the bulk case (marks) is the console's own. The key
//! bar, the help overlay, the verdict panel and `update` all ask it, so they
//! cannot disagree.
//!
//! A read of a registered adapter runs off the key loop, so the selected
//! operation's read has three states ([`ReadState`]): shown, still running,
//! or failed; a confirmed job that asks an adapter runs off the loop too,
//! and [`App::working`] says what it is doing meanwhile.

use super::action::Request;
use super::bindings::key_for;
use super::theme::Theme;
use super::update::background::Background;
use crate::domain::policy::{self, Facts, LatestRead};
use crate::domain::{
    Approval, Closure, Decision, EvidenceRecord, OpState, Operation, Registration, Snapshot,
    Verdict,
};

use crate::workspace::Workspace;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Which operations the queue lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    State(OpState),
    All,
}

impl Filter {
    /// The filter tabs, in order; `unknown` first because it is the work.
    pub const ORDER: [Filter; 5] = [
        Filter::State(OpState::Unknown),
        Filter::State(OpState::Prepared),
        Filter::State(OpState::Confirmed),
        Filter::State(OpState::NotApplied),
        Filter::All,
    ];

    pub fn state(self) -> Option<OpState> {
        match self {
            Filter::State(s) => Some(s),
            Filter::All => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Filter::State(s) => s.as_str(),
            Filter::All => "all",
        }
    }

    pub fn index(self) -> usize {
        Filter::ORDER.iter().position(|f| *f == self).unwrap_or(0)
    }
}

/// Where the workspace came from, for the title bar.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    /// A fresh temporary demo workspace, removed when the console exits.
    pub temporary_demo: bool,
}

/// How the console was started.
#[derive(Debug, Clone)]
pub struct Options {
    /// The reviewer's name from `--reviewer`; asked for when `None`.
    pub reviewer: Option<String>,
    pub no_color: bool,
}

/// One screenful of the queue: the rows shown, in `op_id` order, and the
/// cursor among them. Paging replaces rows; it never accumulates them.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    pub rows: Vec<Operation>,
    pub cursor: usize,
    /// How many rows fit on screen (the page size).
    pub height: usize,
}

impl Queue {
    pub fn selected(&self) -> Option<&Operation> {
        self.rows.get(self.cursor)
    }
}

/// How the snapshot on screen was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Read automatically when the operation was selected (not closing).
    Selected,
    /// Read again automatically after another process changed the
    /// workspace (not closing).
    Refreshed,
    /// A read the reviewer took with the read key (not closing).
    Read,
    /// The closing snapshot the reviewer took.
    Closing { authorized_by: String },
}

impl Origin {
    pub fn describe(&self) -> String {
        match self {
            Origin::Selected => "read on selection (not closing)".to_string(),
            Origin::Refreshed => "re-read after an outside change (not closing)".to_string(),
            Origin::Read => "your read (not closing)".to_string(),
            Origin::Closing { authorized_by } => {
                format!("your CLOSING snapshot, authorized by {authorized_by}")
            }
        }
    }
}

/// A classified snapshot as shown, with the payload paths of each match that
/// differ from the operation's payload.
#[derive(Debug, Clone)]
pub struct Shown {
    pub snapshot: Snapshot,
    pub verdict: Verdict,
    pub origin: Origin,
    pub differing: Vec<Vec<String>>,
}

/// Where the selected operation's read of its receiver stands.
#[derive(Debug, Clone)]
pub enum ReadState {
    /// The read came back and is classified.
    Shown(Shown),
    /// The read is running off the key loop (an adapter's process).
    Reading { origin: Origin },
    /// The read did not come back: `error` says why, naming the receiver.
    Failed { origin: Origin, error: String },
}

/// Everything shown about the selected operation.
#[derive(Debug, Clone)]
pub struct Detail {
    pub operation: Operation,
    /// The receiver the operation routes to, as registered: its name and
    /// the ceiling of what its reads can claim.
    pub receiver: Registration,
    pub evidence: Vec<EvidenceRecord>,
    pub approvals: Vec<Approval>,
    pub closure: Option<Closure>,
    pub dispatches: i64,
    pub read: ReadState,
}

impl Detail {
    /// The classified read on screen, once it has come back.
    pub fn shown(&self) -> Option<&Shown> {
        match &self.read {
            ReadState::Shown(shown) => Some(shown),
            ReadState::Reading { .. } | ReadState::Failed { .. } => None,
        }
    }

    /// What the policy judges an act on: the operation, its receiver and
    /// the read on screen, as the reviewer sees them.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            operation: &self.operation,
            read: self.shown().map(|shown| LatestRead {
                verdict: shown.verdict,
                closed: shown.snapshot.closed,
            }),
            can_close: self.receiver.can_close(),
            closure: self.closure.as_ref(),
            approvals: &self.approvals,
        }
    }
}

/// What the reviewer marked for bulk triage: the version and payload they
/// saw, which is what each decision is checked against.
#[derive(Debug, Clone)]
pub struct Mark {
    pub version: i64,
    pub state: OpState,
    pub payload: Value,
    pub receiver: String,
}

/// One operation a confirmed job acts on, as the reviewer saw it.
#[derive(Debug, Clone)]
pub struct Target {
    pub op_id: String,
    pub version: i64,
    pub state: OpState,
    pub payload: Value,
    /// The receiver it routes to.
    pub receiver: String,
}

/// A mutation waiting for its confirmation, with the exact values it will
/// submit.
#[derive(Debug, Clone)]
pub enum Job {
    Close {
        targets: Vec<Target>,
    },
    Decide {
        decision: Decision,
        targets: Vec<Target>,
        /// The verdict on screen when the reviewer asked (single decisions).
        verdict_shown: Option<Verdict>,
    },
    Approve {
        original_op_id: String,
        effect_id: String,
        expected_version: i64,
        compensation_op_id: String,
        action_kind: String,
        payload: Value,
    },
    Dispatch {
        op_id: String,
        version: i64,
        receiver: String,
    },
}

impl Job {
    /// The registered adapters (receivers other than the built-in ledger)
    /// the job will ask, by name: a job that asks one runs off the key loop.
    pub fn adapters(&self) -> Vec<&str> {
        let mut names: Vec<&str> = match self {
            Job::Close { targets } | Job::Decide { targets, .. } => {
                targets.iter().map(|t| t.receiver.as_str()).collect()
            }
            Job::Dispatch { receiver, .. } => vec![receiver.as_str()],
            Job::Approve { .. } => Vec::new(),
        };
        names.retain(|name| *name != crate::receiver::BUILTIN_NAME);
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The operations the job acts on.
    pub fn op_ids(&self) -> Vec<String> {
        match self {
            Job::Close { targets } | Job::Decide { targets, .. } => {
                targets.iter().map(|t| t.op_id.clone()).collect()
            }
            Job::Dispatch { op_id, .. } => vec![op_id.clone()],
            Job::Approve { original_op_id, .. } => vec![original_op_id.clone()],
        }
    }
}

/// A confirmed job running off the key loop, because it asks an adapter.
#[derive(Debug, Clone)]
pub struct Working {
    /// What it is doing, in words, for the status line and the detail.
    pub text: String,
    pub op_ids: Vec<String>,
}

/// A confirmation dialog: what will happen, in words, and the job.
#[derive(Debug, Clone)]
pub struct Pending {
    pub title: String,
    pub lines: Vec<String>,
    /// What `y` does, for the dialog's last line.
    pub yes: String,
    pub job: Job,
}

/// The compensation approval form.
#[derive(Debug, Clone)]
pub struct CompensationForm {
    pub original_op_id: String,
    pub effect_id: String,
    pub expected_version: i64,
    /// Compensation op id, action kind, payload (JSON text).
    pub fields: [String; 3],
    pub focus: usize,
    pub error: Option<String>,
}

impl CompensationForm {
    pub const LABELS: [&'static str; 3] = ["compensation op id", "action kind", "payload (JSON)"];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Bad,
    Warn,
}

/// A result shown in a modal: a refusal, or what a bulk job did.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub lines: Vec<(Tone, String)>,
    pub scroll: u16,
}

/// What the console is doing besides showing the queue.
#[derive(Debug, Clone)]
pub enum Mode {
    Normal,
    Help {
        scroll: u16,
    },
    Search {
        input: String,
    },
    /// Asking for the reviewer's name before the first mutation; `resume`
    /// is the request to carry on with.
    Reviewer {
        input: String,
        error: Option<String>,
        resume: Request,
    },
    Compensate(CompensationForm),
    Confirm(Pending),
    Report(Report),
}

/// The status line.
#[derive(Debug, Clone)]
pub struct Status {
    pub tone: Tone,
    pub text: String,
}

pub struct App {
    pub(super) ws: Workspace,
    pub source: Source,
    pub reviewer: Option<String>,
    pub theme: Theme,
    pub width: u16,
    pub height: u16,
    pub filter: Filter,
    pub search: Option<String>,
    pub counts: BTreeMap<OpState, i64>,
    pub queue: Queue,
    pub marks: BTreeMap<String, Mark>,
    pub detail: Option<Detail>,
    pub snapshot_scroll: u16,
    pub mode: Mode,
    pub status: Option<Status>,
    /// The confirmed job running off the key loop, if any.
    pub working: Option<Working>,
    /// Reads and jobs that ask an adapter, running on their own threads.
    pub(super) background: Background,
    /// `PRAGMA data_version` of both databases when last refreshed.
    pub(super) seen_version: (i64, i64),
    pub should_quit: bool,
    /// Keeps a temporary demo workspace alive until the console is dropped.
    pub(super) _demo_dir: Option<tempfile::TempDir>,
}

impl App {
    pub fn total(&self) -> i64 {
        self.counts.values().sum()
    }

    pub fn count(&self, filter: Filter) -> i64 {
        match filter {
            Filter::State(s) => self.counts.get(&s).copied().unwrap_or(0),
            Filter::All => self.total(),
        }
    }

    pub fn selected(&self) -> Option<&Operation> {
        self.queue.selected()
    }

    /// The detail, when it belongs to the selected row.
    pub fn selected_detail(&self) -> Option<&Detail> {
        let selected = self.selected()?;
        self.detail
            .as_ref()
            .filter(|d| d.operation.op_id == selected.op_id)
    }

    /// Whether a request can be made now, or why not. While a job runs
    /// off the key loop, none can: one mutation at a time. With marks, the
    /// bulk requests apply to the marked operations, each checked against
    /// its own version and verdict when it runs; otherwise the domain's
    /// policy judges the selected operation, and a refusal that a closing
    /// snapshot could lift names the key that takes one.
    pub fn availability(&self, request: Request) -> Result<String, String> {
        if let Some(working) = &self.working {
            return Err(format!("wait: {} is still running", working.text));
        }
        if request.is_bulk() && !self.marks.is_empty() {
            return Ok(format!(
                "applies to the {} marked operation{}",
                self.marks.len(),
                if self.marks.len() == 1 { "" } else { "s" }
            ));
        }
        let Some(detail) = self.selected_detail() else {
            return Err("no operation is selected".to_string());
        };
        policy::availability(request.act(), &detail.facts()).map_err(|no| {
            if no.close_first {
                format!(
                    "{}; {} takes a closing snapshot",
                    no.reason,
                    key_for(Request::Close)
                )
            } else {
                no.reason
            }
        })
    }
}
