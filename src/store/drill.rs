//! Deliberate damage, for the experiment and the tests: a failing trigger on
//! the evidence table, a compensation that bypassed approval, an operation whose
//! action was changed after approval. Each models a fault or a buggy writer
//! that the rules must catch. Nothing in the normal flow calls these. The
//! last two write behind the journal's back, so `recon verify` reports
//! them as projection mismatches, as it would a real buggy writer.

use super::SqlContext;
use crate::domain::Timestamp;
use crate::error::StoreError;
use crate::store::{Drills, SqliteSender};
use rusqlite::params;

impl Drills for SqliteSender {
    /// Makes every evidence insert fail, as a full disk or a broken writer
    /// would, until [`SqliteSender::drill_remove_evidence_fault`].
    fn drill_install_evidence_fault(&self) -> Result<(), StoreError> {
        self.conn()
            .execute_batch(
                "CREATE TRIGGER drill_evidence_fault BEFORE INSERT ON evidence
                 BEGIN SELECT RAISE(ABORT, 'drill: evidence insert failed'); END;",
            )
            .at(self.path())
    }

    fn drill_remove_evidence_fault(&self) -> Result<(), StoreError> {
        self.conn()
            .execute_batch("DROP TRIGGER IF EXISTS drill_evidence_fault")
            .at(self.path())
    }

    /// Writes a `prepared` compensation op with no approval, as a writer
    /// that skipped `approve_compensation` would.
    fn drill_insert_unapproved_compensation(
        &self,
        op_id: &str,
        action_kind: &str,
        payload: &serde_json::Value,
        original_op_id: &str,
        effect_id: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                &format!(
                    "INSERT INTO operations
                         (op_id, kind, action_kind, payload, state, version,
                          compensates_effect_id, compensates_op_id, receiver,
                          created_at, updated_at)
                     VALUES (?1, 'compensation', ?2, ?3, 'prepared', 1, ?4, ?5, {}, ?6, ?6)",
                    super::sender::route_sql("?2", "?5")
                ),
                params![
                    op_id,
                    action_kind,
                    crate::domain::canonical_json(payload),
                    effect_id,
                    original_op_id,
                    at.to_string()
                ],
            )
            .map(drop)
            .at(self.path())
    }

    /// Changes a prepared operation's action kind behind the approval's back.
    fn drill_change_action_kind(&self, op_id: &str, action_kind: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE operations SET action_kind = ?2 WHERE op_id = ?1",
                params![op_id, action_kind],
            )
            .map(drop)
            .at(self.path())
    }
}
