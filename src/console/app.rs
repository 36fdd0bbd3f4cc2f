//! The console's whole state, in one struct that the view reads and only
//! `update` writes.
//!
//! The workspace handle lives here so that `update` can reach the library
//! API; the view never touches it and renders only the values `update`
//! loaded: the counts, one screenful of queue rows (keyset-paged, never the
//! whole outbox), and the selected operation's detail. Whether an action is
//! available right now is a pure function of this state
//! ([`App::availability`]), shared by the key bar, the help overlay, the
//! verdict panel and `update` itself, so they cannot disagree.

use super::action::Request;
use super::theme::Theme;
use crate::domain::{
    Approval, Closure, Decision, EvidenceRecord, OpKind, OpState, Operation, Snapshot, Verdict,
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

/// Everything shown about the selected operation.
#[derive(Debug, Clone)]
pub struct Detail {
    pub operation: Operation,
    pub evidence: Vec<EvidenceRecord>,
    pub approvals: Vec<Approval>,
    pub closure: Option<Closure>,
    pub dispatches: i64,
    pub snapshot: Shown,
}

/// What the reviewer marked for bulk triage: the version and payload they
/// saw, which is what each decision is checked against.
#[derive(Debug, Clone)]
pub struct Mark {
    pub version: i64,
    pub state: OpState,
    pub payload: Value,
}

/// One operation a confirmed job acts on, as the reviewer saw it.
#[derive(Debug, Clone)]
pub struct Target {
    pub op_id: String,
    pub version: i64,
    pub state: OpState,
    pub payload: Value,
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
    },
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

    /// Whether a request can be made now, or why not. With marks, the
    /// bulk requests apply to the marked operations, each checked against
    /// its own version and verdict when it runs.
    pub fn availability(&self, request: Request) -> Result<String, String> {
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
        let op = &detail.operation;
        let verdict = detail.snapshot.verdict;
        match request {
            Request::Close => {
                if op.state != OpState::Unknown {
                    return Err(format!(
                        "only an unknown operation needs the close barrier; this one is {}",
                        op.state
                    ));
                }
                if let Some(closure) = &detail.closure {
                    return Err(format!(
                        "the receiver already closed it (authorized by {}); a read shows the same",
                        closure.authorized_by
                    ));
                }
                Ok("a receiver mutation that bars every later write for this op".to_string())
            }
            Request::Decide(decision) => {
                if op.state != OpState::Unknown {
                    return Err(format!(
                        "only an unknown operation takes a decision; this one is {}",
                        op.state
                    ));
                }
                if verdict.supports(decision) {
                    return Ok(format!(
                        "{verdict} supports it, against version {}",
                        op.version
                    ));
                }
                let needs = match decision {
                    Decision::Confirmed => "one exact match",
                    Decision::NotApplied => "terminal_absence (no match under a closing read)",
                };
                let blocked = matches!(
                    verdict,
                    Verdict::DuplicateMatches
                        | Verdict::PayloadMismatch
                        | Verdict::ActionScopeMismatch
                );
                let hint = if detail.snapshot.snapshot.closed || blocked {
                    ""
                } else {
                    "; x takes a closing snapshot"
                };
                Err(format!(
                    "{decision} needs {needs}; this read is {verdict}{hint}"
                ))
            }
            Request::Compensate => {
                if op.kind != OpKind::Original {
                    return Err("a compensation is not itself compensated".to_string());
                }
                if op.state != OpState::Confirmed {
                    return Err(format!(
                        "only a confirmed original can be compensated; this one is {}",
                        op.state
                    ));
                }
                let Some(effect) = &op.confirmed_effect_id else {
                    return Err("no confirmed effect is recorded".to_string());
                };
                if let Some(a) = detail
                    .approvals
                    .iter()
                    .find(|a| a.original_op_id == op.op_id && &a.effect_id == effect)
                {
                    return Err(format!(
                        "{effect} already has an approved compensation, {}",
                        a.compensation_op_id
                    ));
                }
                Ok(format!("for the confirmed effect {effect}"))
            }
            Request::Dispatch => {
                if op.state != OpState::Prepared {
                    return Err(format!(
                        "dispatched only once, from prepared; this one is {}, so a dispatch \
                         would be a blind retry",
                        op.state
                    ));
                }
                if op.kind == OpKind::Compensation
                    && !detail
                        .approvals
                        .iter()
                        .any(|a| a.compensation_op_id == op.op_id)
                {
                    return Err("this compensation has no approval".to_string());
                }
                Ok("runs the receiver once".to_string())
            }
        }
    }
}
