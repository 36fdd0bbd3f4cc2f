//! The built-in ledger as a [`Receiver`]: `receiver.sqlite`, written and read
//! in one transaction per call, so its reads are complete and authoritative
//! and its close is a real barrier.
//!
//! Besides the four verbs it answers the questions only a ledger recon owns
//! can answer (`recon ledger`, who closed an operation, how many effects it
//! holds), which the facade uses for the ledger command, the console and the
//! experiment.

use super::Receiver;
use crate::domain::{Appended, BulkEffect, Closure, Description, Effect, EffectRequest, Snapshot};
use crate::error::{Refusal, Result, StoreError};
use crate::settings::OpenOptions;
use crate::store::{self, ReceiverStore};
use std::path::Path;

pub use crate::domain::BUILTIN_NAME;

pub struct Builtin {
    store: ReceiverStore,
    /// `false` when run as `recon receiver adapter --no-close`: it then
    /// declares `can_close: false` and answers `close` with `unsupported`
    /// (the experiment's receiver that cannot close).
    can_close: bool,
}

impl Builtin {
    /// Opens the ledger of an existing workspace directory. The outbox's
    /// side upgrades a schema-4 ledger when it opens the workspace; one
    /// opened here first (a receiver command run on its own) is upgraded
    /// at the system clock's time.
    pub fn open(workspace: &Path, options: OpenOptions) -> Result<Self, StoreError> {
        use crate::clock::Clock;
        Ok(Builtin {
            store: store::open_receiver(workspace, options, crate::clock::SystemClock.now())?,
            can_close: true,
        })
    }

    pub(crate) fn from_store(store: ReceiverStore) -> Self {
        Builtin {
            store,
            can_close: true,
        }
    }

    /// The same ledger, declaring that it cannot close.
    pub fn without_close(self) -> Self {
        Builtin {
            can_close: false,
            ..self
        }
    }

    /// What the built-in ledger says of itself.
    pub fn description(can_close: bool) -> Description {
        Description::builtin(can_close)
    }

    /// What the ledger says of itself when it is served as an adapter
    /// program (`recon receiver adapter`): its description with its
    /// instance, `recon-ledger:` and the workspace id the ledger was
    /// created with, so that another workspace's ledger (or a copy given
    /// a new id) is another receiver.
    pub fn served_description(&self) -> Result<Description, StoreError> {
        Ok(Description {
            instance: Some(format!("recon-ledger:{}", self.store.workspace_id()?)),
            ..Builtin::description(self.can_close)
        })
    }

    /// Every effect, or those of one operation, in ledger order.
    pub fn ledger(&self, op_id: Option<&str>) -> Result<Vec<Effect>> {
        self.store.ledger(op_id)
    }

    pub fn effect_count(&self, op_id: Option<&str>) -> Result<i64, StoreError> {
        self.store.effect_count(op_id)
    }

    /// Who closed the operation, if anyone.
    pub fn closure(&self, op_id: &str) -> Result<Option<Closure>, StoreError> {
        self.store.closure(op_id)
    }

    pub fn is_unused(&self) -> Result<bool, StoreError> {
        self.store.is_unused()
    }

    /// What the ledger holds, as one growing number (`ReceiverStore::mark`).
    pub fn mark(&self) -> Result<i64, StoreError> {
        self.store.mark()
    }

    /// Appends generated effects in one transaction, told where they start
    /// and committed only when `commit_if` says so (see
    /// `Workspace::append_generated`).
    pub(crate) fn append_effects(
        &mut self,
        effects: impl IntoIterator<Item = BulkEffect>,
        started: impl FnOnce(i64) -> bool,
        commit_if: impl FnOnce() -> bool,
    ) -> Result<Option<Appended>> {
        self.store.append_effects(effects, started, commit_if)
    }
}

impl Builtin {
    /// The id of the workspace this ledger belongs to.
    pub fn workspace_id(&self) -> Result<String, StoreError> {
        self.store.workspace_id()
    }

    /// The ledger serves its own workspace only: a request from another
    /// (a copied or swapped file, a stray registration) is refused before
    /// anything is read or written, so its op ids never meet ours.
    fn serves(&self, workspace: &str) -> Result<()> {
        let own = self.workspace_id()?;
        if workspace == own {
            return Ok(());
        }
        Err(crate::error::Error::Invalid(format!(
            "this ledger belongs to workspace {own}, not to {}",
            crate::domain::sanitize::escape(workspace)
        )))
    }
}

impl Receiver for Builtin {
    fn describe(&mut self) -> Result<Description> {
        Ok(Builtin::description(self.can_close))
    }

    fn apply(&mut self, workspace: &str, request: &EffectRequest<'_>) -> Result<Effect> {
        self.serves(workspace)?;
        self.store.apply(request)
    }

    fn query(&mut self, workspace: &str, op_id: &str) -> Result<Snapshot> {
        self.serves(workspace)?;
        self.store.snapshot(op_id, None)
    }

    fn close(&mut self, workspace: &str, op_id: &str, authorized_by: &str) -> Result<Snapshot> {
        self.serves(workspace)?;
        if !self.can_close {
            return Err(Refusal::CloseUnsupported {
                receiver: BUILTIN_NAME.to_string(),
            }
            .into());
        }
        self.store.snapshot(op_id, Some(authorized_by))
    }
}
