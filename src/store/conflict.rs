//! A unique key the schema holds, violated: the refusal it means.
//!
//! Every act that claims a unique value (an operation id, an approval of
//! one effect, a receiver's name, an action kind's route) reads first, in
//! its transaction, whether the value is free, and refuses if not. On
//! SQLite the write lock makes that read the truth. A store whose writers
//! run side by side (PostgreSQL under READ COMMITTED) can pass the read and
//! then lose the insert to the other writer; the key violation is then the
//! same refusal, never a storage failure. The mapping is here, once, keyed
//! by which key failed: [`refusal`] from a [`Key`] to its refusal, for any
//! store, applied by [`insert`] (through [`Claimed::claiming`]) to an
//! insert's result; which key failed is the store's to say
//! (`Db::violated`, through `store::keys`).

use super::keys::Key;
use super::sql::{Db, Dialect, ToValue};
use crate::domain::Refusal;
use crate::error::{Error, StoreError};

/// The values an insert claims, which its refusal names.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Claim<'a> {
    /// The id of the operation it creates.
    pub op_id: Option<&'a str>,
    /// The original and the effect it approves a compensation of.
    pub approval: Option<(&'a str, &'a str)>,
    /// The receiver it registers.
    pub receiver: Option<&'a str>,
    /// The action kind it routes.
    pub action: Option<&'a str>,
}

/// The refusal a violation of `key` by `claim` means, whichever store
/// found it; `routed_to` names the receiver that holds an action kind's
/// route.
pub(crate) fn refusal(
    key: Key,
    claim: &Claim<'_>,
    routed_to: impl FnOnce(&str) -> Option<String>,
) -> Option<Refusal> {
    match key {
        Key::OpId => claim
            .op_id
            .map(|id| Refusal::DuplicateOperation(id.to_string())),
        Key::Approval => claim
            .approval
            .map(|(op_id, effect_id)| Refusal::AlreadyApproved {
                op_id: op_id.to_string(),
                effect_id: effect_id.to_string(),
            }),
        Key::ReceiverName => claim
            .receiver
            .map(|name| Refusal::ReceiverExists(name.to_string())),
        Key::Route => {
            let action = claim.action?;
            routed_to(action).map(|receiver| Refusal::ActionRouted {
                action: action.to_string(),
                receiver,
            })
        }
    }
}

/// The receiver an action kind routes to, read on `db`: on SQLite a
/// failed statement leaves its transaction open; on PostgreSQL it aborts
/// it, so [`insert`] has rolled back to its savepoint first.
fn routed_to(db: &mut dyn Db, action: &str) -> Option<String> {
    db.query_opt(
        "SELECT receiver FROM routes WHERE action_kind = ?1",
        &[&action],
        |r| r.get::<String>(0),
    )
    .ok()
    .flatten()
}

/// Attaches the refusal a key violation means to an insert's result; any
/// other failure stays the storage error it is.
pub(crate) trait Claimed<T> {
    fn claiming(self, db: &mut dyn Db, claim: &Claim<'_>) -> Result<T, Error>;
}

impl<T> Claimed<T> for Result<T, StoreError> {
    fn claiming(self, db: &mut dyn Db, claim: &Claim<'_>) -> Result<T, Error> {
        self.map_err(|e| {
            let key = db.violated(&e);
            let routed = |action: &str| routed_to(db, action);
            match key.and_then(|key| refusal(key, claim, routed)) {
                Some(refused) => refused.into(),
                None => e.into(),
            }
        })
    }
}

/// Runs an insert that claims `claim`'s values: its result with the
/// refusal a key violation means ([`Claimed::claiming`]). A refusal that
/// needs another read (`action_routed` names the route's holder) needs a
/// transaction still open, which a failed statement on PostgreSQL is not:
/// there the insert runs under a savepoint, rolled back to when it fails,
/// so the read and the refusal go on in the caller's transaction.
pub(crate) fn insert(
    db: &mut dyn Db,
    sql: &str,
    params: &[&dyn ToValue],
    claim: &Claim<'_>,
) -> Result<usize, Error> {
    let savepoint = db.dialect() == Dialect::Postgres && claim.action.is_some();
    if savepoint {
        db.execute("SAVEPOINT claim", &[])?;
    }
    let result = db.execute(sql, params);
    if savepoint {
        let end = match result {
            Ok(_) => "RELEASE SAVEPOINT claim",
            Err(_) => "ROLLBACK TO SAVEPOINT claim",
        };
        db.execute(end, &[])?;
    }
    result.claiming(db, claim)
}
