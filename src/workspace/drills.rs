//! The store's deliberate damage, reached explicitly: `ws.drills()?` and
//! then the drill. Drills are an optional capability of a store (the
//! SQLite outbox has them; the experiment builds a SQLite workspace of its
//! own), not part of the flow, so they are not methods of [`Workspace`].

use super::Workspace;
use crate::clock::Clock;
use crate::error::StoreError;
use crate::store;
use serde_json::Value;

/// The drills of one workspace's outbox, stamped with its clock.
pub struct Drills<'w> {
    drills: &'w dyn store::Drills,
    clock: &'w dyn Clock,
}

impl Workspace {
    /// The outbox's drills, or `Unsupported` for a store without them.
    pub fn drills(&self) -> Result<Drills<'_>, StoreError> {
        let drills = self
            .sender
            .drills()
            .ok_or(StoreError::Unsupported("drills"))?;
        Ok(Drills {
            drills,
            clock: self.clock.as_ref(),
        })
    }
}

impl Drills<'_> {
    /// Installs a trigger that makes every evidence insert fail.
    pub fn install_evidence_fault(&self) -> Result<(), StoreError> {
        self.drills.drill_install_evidence_fault()
    }

    pub fn remove_evidence_fault(&self) -> Result<(), StoreError> {
        self.drills.drill_remove_evidence_fault()
    }

    /// A compensation operation with no approval behind it.
    pub fn insert_unapproved_compensation(
        &self,
        op_id: &str,
        action_kind: &str,
        payload: &Value,
        original_op_id: &str,
        effect_id: &str,
    ) -> Result<(), StoreError> {
        self.drills.drill_insert_unapproved_compensation(
            op_id,
            action_kind,
            payload,
            original_op_id,
            effect_id,
            self.clock.now(),
        )
    }

    /// Changes an operation's action kind behind the rules' back.
    pub fn change_action_kind(&self, op_id: &str, action_kind: &str) -> Result<(), StoreError> {
        self.drills.drill_change_action_kind(op_id, action_kind)
    }
}
