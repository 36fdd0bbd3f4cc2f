//! Receiver work off the key loop: the reads and the confirmed jobs that
//! ask a registered adapter, which is a process that may take up to its
//! timeout to answer.
//!
//! Each errand runs on a thread of its own with its own [`Workspace`]
//! handle, opened on the same directory, so the console's handle is never
//! shared and never waited on; the result comes back over a channel and is
//! applied by `update` on the next poll, and only where it still belongs:
//! a read lands on the detail only while that operation is selected, still
//! waiting for it, and at the version the read classified. Meanwhile every
//! key keeps working. The built-in ledger is read in process, as before: a
//! read of it is one SQLite transaction.
//!
//! A read is not started twice for one operation: moving away and back, or
//! pressing the read key, while one is running waits for that one. At most
//! [`MAX_READS`] run at once, so holding a key down over many operations
//! does not start a process for each; past that, the newest request waits
//! and starts when a read ends, if its operation is still the selected one.

use super::super::app::{App, Origin, ReadState, Tone};
use super::jobs::{self, Done};
use super::queue::shown;
use super::{normal, set_status, Result};
use crate::dispatch::ReceiverProgram;
use crate::error::StoreError;
use crate::settings::OpenOptions;
use crate::workspace::{Classified, Workspace};
use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// How many adapter reads run at once.
pub const MAX_READS: usize = 4;

/// A read of one operation's receiver, as asked for.
#[derive(Debug, Clone)]
pub(crate) struct ReadErrand {
    pub op_id: String,
    pub receiver: String,
    pub origin: Origin,
}

/// An errand that came back.
pub(crate) enum Landed {
    Read {
        errand: ReadErrand,
        result: Result<Classified>,
    },
    Job(Result<Done>),
}

/// The errands running off the key loop, and the channel they come back on.
pub(crate) struct Background {
    dir: PathBuf,
    program: ReceiverProgram,
    send: Sender<Landed>,
    inbox: Receiver<Landed>,
    /// Errands that came back while a caller waited, not yet applied.
    arrived: VecDeque<Landed>,
    /// The operations whose read is running.
    reading: BTreeSet<String>,
    /// The newest read past [`MAX_READS`].
    queued: Option<ReadErrand>,
    job_running: bool,
}

impl Background {
    /// Errands for the workspace `ws` is a handle on; each opens its own.
    pub(crate) fn new(ws: &Workspace) -> Background {
        let (send, inbox) = mpsc::channel();
        Background {
            dir: ws.dir().to_path_buf(),
            program: ws.receiver_program().clone(),
            send,
            inbox,
            arrived: VecDeque::new(),
            reading: BTreeSet::new(),
            queued: None,
            job_running: false,
        }
    }

    /// Whether anything is running or waiting to run.
    pub(crate) fn busy(&self) -> bool {
        !self.reading.is_empty() || self.queued.is_some() || self.job_running
    }

    /// Blocks until an errand comes back or `timeout` passes; true when one
    /// came back (it is applied by the next poll).
    pub(crate) fn wait(&mut self, timeout: Duration) -> bool {
        if !self.arrived.is_empty() {
            return true;
        }
        match self.inbox.recv_timeout(timeout) {
            Ok(landed) => {
                self.arrived.push_back(landed);
                true
            }
            Err(_) => false,
        }
    }

    /// Runs `work` on a thread of its own, on a new handle on the
    /// workspace, and sends what it returns back to the console.
    fn spawn(
        &self,
        name: &str,
        work: impl FnOnce(Result<Workspace>) -> Landed + Send + 'static,
    ) -> std::io::Result<()> {
        let (dir, program, send) = (self.dir.clone(), self.program.clone(), self.send.clone());
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let ws = Workspace::open(&dir, OpenOptions::default())
                    .map(|ws| ws.with_receiver_program(program))
                    .map_err(Into::into);
                // The console may have quit; then nobody waits for this.
                let _ = send.send(work(ws));
            })
            .map(drop)
    }

    /// Starts a non-closing read, unless one of the same operation is
    /// running; past [`MAX_READS`] it waits for one to end.
    pub(crate) fn read(&mut self, errand: ReadErrand) -> std::io::Result<()> {
        if self.reading.contains(&errand.op_id) {
            return Ok(());
        }
        if self.reading.len() >= MAX_READS {
            self.queued = Some(errand);
            return Ok(());
        }
        let op_id = errand.op_id.clone();
        self.spawn("recon-read", move |ws| {
            let result = ws.and_then(|mut ws| ws.snapshot(&errand.op_id, None));
            Landed::Read { errand, result }
        })?;
        self.reading.insert(op_id);
        Ok(())
    }

    /// Starts a confirmed job, carried out as in process.
    pub(crate) fn job(&mut self, job: super::super::app::Job, reviewer: String) -> Result<()> {
        self.spawn("recon-job", move |ws| {
            Landed::Job(ws.and_then(|mut ws| jobs::carry_out(&mut ws, job, &reviewer)))
        })
        .map_err(StoreError::from)?;
        self.job_running = true;
        Ok(())
    }

    /// Everything that came back since the last call, with the bookkeeping
    /// of what is still running brought up to date.
    fn take_landed(&mut self) -> Vec<Landed> {
        let mut landed: Vec<Landed> = self.arrived.drain(..).collect();
        landed.extend(self.inbox.try_iter());
        for l in &landed {
            match l {
                Landed::Read { errand, .. } => {
                    self.reading.remove(&errand.op_id);
                }
                Landed::Job(_) => self.job_running = false,
            }
        }
        landed
    }
}

/// Applies what came back: reads where they still belong, then a job's
/// report; then starts the queued read if its operation is still waiting.
/// One errand's storage trouble does not drop the others: the first is
/// reported after all are applied.
pub(super) fn land(app: &mut App) -> Result<()> {
    let mut trouble = Ok(());
    for landed in app.background.take_landed() {
        let applied = match landed {
            Landed::Read { errand, result } => {
                land_read(app, errand, result);
                Ok(())
            }
            Landed::Job(done) => {
                app.working = None;
                done.and_then(|done| jobs::finish(app, done))
            }
        };
        if trouble.is_ok() {
            trouble = applied;
        }
    }
    if app.background.reading.len() < MAX_READS {
        if let Some(errand) = app.background.queued.take() {
            if still_reading(app, &errand.op_id) {
                start_read(app, errand);
            }
        }
    }
    trouble
}

/// Whether the selected operation is `op_id` and waits for its read.
fn still_reading(app: &App, op_id: &str) -> bool {
    app.selected_detail()
        .is_some_and(|d| d.operation.op_id == op_id && matches!(d.read, ReadState::Reading { .. }))
}

/// Starts a read for the detail; a read that cannot start fails in words.
pub(super) fn start_read(app: &mut App, errand: ReadErrand) {
    let receiver = errand.receiver.clone();
    if let Err(e) = app.background.read(errand) {
        if let Some(detail) = app.detail.as_mut() {
            let origin = match &detail.read {
                ReadState::Reading { origin } => origin.clone(),
                _ => Origin::Selected,
            };
            detail.read = ReadState::Failed {
                origin,
                error: format!("the read of receiver {receiver} could not start: {e}"),
            };
        }
    }
}

/// A read that came back: shown if its operation is still selected and
/// waiting for it at the version it classified; read again if the
/// operation moved on meanwhile; a failure said in words. The reviewer's
/// own read (the read key) is announced in the status line, as in process.
fn land_read(app: &mut App, errand: ReadErrand, result: Result<Classified>) {
    if !still_reading(app, &errand.op_id) {
        return;
    }
    let Some(detail) = app.detail.as_mut() else {
        return;
    };
    // The read key pressed while this read ran waited for it: announce it.
    let announce = errand.origin == Origin::Read
        || matches!(&detail.read, ReadState::Reading { origin } if *origin == Origin::Read);
    match result {
        Ok(classified) if classified.operation.version == detail.operation.version => {
            detail.read = ReadState::Shown(shown(&detail.operation, classified, errand.origin));
            if announce {
                normal::announce_read(app);
            }
        }
        Ok(_) => start_read(app, errand),
        Err(error) => {
            detail.read = ReadState::Failed {
                origin: errand.origin,
                error: error.to_string(),
            };
            if announce {
                let text = format!("reading {} failed: {error}", errand.receiver);
                set_status(app, Tone::Bad, text);
            }
        }
    }
}
