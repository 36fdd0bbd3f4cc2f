//! Named crash points, for drills that kill `recon` at the boundaries of its
//! multi-step paths and then check that nothing was lost or doubled.
//!
//! A crash point is off unless the environment variable
//! `RECON_CRASH_POINT` names it exactly (for example
//! `RECON_CRASH_POINT=dispatch.after_unknown_commit`); an unknown or empty
//! value arms nothing. When the named point is reached the process exits at
//! once with code [`CRASH_EXIT_CODE`], through `std::process::exit`: no
//! unwinding, no destructors, and any open SQLite transaction is left
//! uncommitted, exactly as if the power had gone at that line. The variable
//! is read once per process.
//!
//! One more name is a panic drill rather than a crash point:
//! `RECON_CRASH_POINT=console.panic` makes the review console panic on its
//! first key press in a real terminal, so that a test can see the terminal
//! restored and one line printed, as after any bug.
//!
//! A hold point is the other kind of drill: with `RECON_HOLD_POINT` naming
//! it and `RECON_HOLD_FIFO` naming a fifo, the process opens the fifo for
//! reading when it reaches the point (which lets a test's open for writing
//! return: the test now knows where the process is) and waits for one line
//! before it goes on. Only the first time a process reaches the point
//! holds it (a dispatch writes more than once; the drill stops its first
//! write, and the later ones go on). Tests land a write between two steps
//! this way, in order, without sleeping.

use std::sync::OnceLock;

pub const CRASH_POINT_ENV: &str = "RECON_CRASH_POINT";

/// The exit code of a process that died at a crash point.
pub const CRASH_EXIT_CODE: i32 = 86;

macro_rules! crash_points {
    ($($variant:ident => $name:literal: $doc:literal),+ $(,)?) => {
        /// A boundary inside a multi-step path.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum CrashPoint {
            $(#[doc = $doc] $variant),+
        }

        impl CrashPoint {
            pub const ALL: &'static [CrashPoint] = &[$(CrashPoint::$variant),+];

            pub fn name(self) -> &'static str {
                match self { $(CrashPoint::$variant => $name),+ }
            }

            pub fn description(self) -> &'static str {
                match self { $(CrashPoint::$variant => $doc),+ }
            }

            pub fn parse(name: &str) -> Option<Self> {
                match name { $($name => Some(CrashPoint::$variant),)+ _ => None }
            }
        }
    };
}

crash_points! {
    DispatchAfterUnknownCommit => "dispatch.after_unknown_commit":
        "dispatch: `unknown` and the dispatch_log row are committed; the receiver is not spawned yet",
    DispatchAfterReceiptRead => "dispatch.after_receipt_read":
        "dispatch: the receipt was read from the child; `confirmed` is not committed yet",
    ReceiptBeforeCommit => "receipt.before_commit":
        "dispatch: inside the receipt transaction, state and evidence written, not committed",
    ReconcileAfterStateUpdate => "reconcile.after_state_update":
        "reconcile: inside the transaction, state updated, evidence not yet appended",
    ReconcileBeforeCommit => "reconcile.before_commit":
        "reconcile: inside the transaction, state and evidence written, not committed",
    ApprovalAfterApprovalInsert => "approval.after_approval_insert":
        "approve-compensation: approval row written, compensation op not yet, not committed",
    ApprovalBeforeCommit => "approval.before_commit":
        "approve-compensation: approval and compensation op written, not committed",
    CloseBeforeCommit => "snapshot.close_before_commit":
        "closing snapshot: tombstone written and effects read, not committed",
    CloseAfterCommit => "snapshot.close_after_commit":
        "closing snapshot: committed; the snapshot was not returned yet",
    CreateAfterSender => "create.after_sender":
        "creating a workspace: the outbox written with its id; no ledger yet",
    CreateBeforeComplete => "create.before_complete":
        "creating a workspace: both files written with the id; not marked complete",
    UpgradeBeforeCommit => "upgrade.before_commit":
        "upgrading a schema-4 file: every table rebuilt and created, the time recorded, the \
         version not set, not committed",
    MetricsMidWrite => "metrics.mid_write":
        "metrics --output: half of the text in the temporary file beside the target, not \
         renamed",
}

/// The name of the panic drill (see the module docs).
pub const CONSOLE_PANIC: &str = "console.panic";

/// The value of `RECON_CRASH_POINT`, read once.
fn armed_name() -> Option<&'static str> {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| std::env::var(CRASH_POINT_ENV).ok())
        .as_deref()
}

fn armed() -> Option<CrashPoint> {
    armed_name().and_then(CrashPoint::parse)
}

/// Panics here if the console panic drill is armed; does nothing otherwise.
pub fn console_panic_drill() {
    if armed_name() == Some(CONSOLE_PANIC) {
        panic!("the {CONSOLE_PANIC} drill");
    }
}

/// Dies here if this point is armed; does nothing otherwise.
pub fn crash_point(point: CrashPoint) {
    if armed() == Some(point) {
        std::process::exit(CRASH_EXIT_CODE);
    }
}

pub const HOLD_POINT_ENV: &str = "RECON_HOLD_POINT";
pub const HOLD_FIFO_ENV: &str = "RECON_HOLD_FIFO";

/// A boundary where a drill can hold the process (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldPoint {
    /// reconcile --close: every rule checked on the open read, the close not
    /// taken yet.
    ReconcileBeforeClose,
    /// Any write to the outbox: before its transaction takes the write
    /// lock (and so before it reads the time of its act).
    BeforeWriteLock,
    /// A write to a PostgreSQL outbox: the act written and its last
    /// journal entry read back, COMMIT not sent yet (for `db upgrade`:
    /// every step done and its entry journaled).
    BeforeCommit,
    /// A reviewer's decision or a dispatch: its row read under the write
    /// lock and every rule checked on it, nothing of the act written yet
    /// (so a test can move the row behind the write lock's back and see
    /// the conditional UPDATE's own predicate refuse the act).
    AfterCheck,
}

impl HoldPoint {
    pub fn name(self) -> &'static str {
        match self {
            HoldPoint::ReconcileBeforeClose => "reconcile.before_close",
            HoldPoint::BeforeWriteLock => "store.before_write_lock",
            HoldPoint::BeforeCommit => "store.before_commit",
            HoldPoint::AfterCheck => "store.after_check",
        }
    }
}

/// Waits here for the drill's line if this point is armed and this is the
/// first time the process reaches it; does nothing otherwise (or when the
/// fifo cannot be read: a drill never breaks a run).
pub fn hold_point(point: HoldPoint) {
    static HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if std::env::var(HOLD_POINT_ENV).ok().as_deref() != Some(point.name())
        || HELD.swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        return;
    }
    let Some(fifo) = std::env::var_os(HOLD_FIFO_ENV) else {
        return;
    };
    if let Ok(file) = std::fs::File::open(fifo) {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(file), &mut line);
    }
}
