//! The schema's unique keys whose violation is a refusal, as each store
//! names them: [`violated`] reads SQLite's names of the keys,
//! [`pg_violated`] PostgreSQL's constraint names, both to the same
//! [`Key`]s. Which refusal a key means is `store::conflict`'s; this file
//! only names keys, below the executor (`store::sql`) that asks it.

use crate::error::{DatabaseProblem, StoreError};
use rusqlite::ffi;

/// A unique key of the schema whose violation is a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// `duplicate_operation`.
    OpId,
    /// `already_approved`.
    Approval,
    /// `receiver_exists`.
    ReceiverName,
    /// `action_routed`.
    Route,
}

/// The keys, as SQLite names them in a violation (`table.column, ...`).
const KEYS: &[(&str, Key)] = &[
    ("operations.op_id", Key::OpId),
    ("compensation_approvals.compensation_op_id", Key::OpId),
    (
        "compensation_approvals.original_op_id, compensation_approvals.effect_id",
        Key::Approval,
    ),
    ("receivers.name", Key::ReceiverName),
    ("routes.action_kind", Key::Route),
];

/// The same keys, as PostgreSQL names them: the constraints its schema
/// (`store::postgres::schema`) gets by default, `table_pkey` and
/// `table_columns_key`.
const PG_KEYS: &[(&str, Key)] = &[
    ("operations_pkey", Key::OpId),
    ("compensation_approvals_compensation_op_id_key", Key::OpId),
    (
        "compensation_approvals_original_op_id_effect_id_key",
        Key::Approval,
    ),
    ("receivers_pkey", Key::ReceiverName),
    ("routes_pkey", Key::Route),
];

/// Which of [`PG_KEYS`] a PostgreSQL error (SQLSTATE 23505, its constraint
/// kept by `store::postgres::db_error`) violated, if any.
pub(crate) fn pg_violated(error: &StoreError) -> Option<Key> {
    let StoreError::Database {
        problem: DatabaseProblem::Duplicate { constraint, .. },
        ..
    } = error
    else {
        return None;
    };
    PG_KEYS
        .iter()
        .find(|(named, _)| named == constraint)
        .map(|(_, key)| *key)
}

/// Which key a failed statement violated, if it was one of [`KEYS`].
pub(crate) fn violated(error: &rusqlite::Error) -> Option<Key> {
    let rusqlite::Error::SqliteFailure(failure, Some(message)) = error else {
        return None;
    };
    let unique = matches!(
        failure.extended_code,
        ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE
    );
    let columns = message.strip_prefix("UNIQUE constraint failed: ")?;
    let key = KEYS.iter().find(|(named, _)| *named == columns)?.1;
    unique.then_some(key)
}
