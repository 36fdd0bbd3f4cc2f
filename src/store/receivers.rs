//! Registered receivers and the routes of action kinds to them, in the
//! outbox. A route is looked up when an operation is prepared (in the same
//! transaction, `sender::route_sql`) and never again, so registering or
//! removing a receiver never re-routes an operation. Both tables are a
//! projection of the journal: registering appends `receiver_registered`,
//! removing `receiver_removed`, in the transaction that writes the rows.
//! Removing one as lost (its store gone) while operations route to it
//! escalates each open one there too, one `escalated` entry each after
//! the removal's (`triage::escalate_lost`).
//! Written over [`Db`]: [`ReceiverRegistry`] is implemented once, for
//! every [`SqlStore`].

use super::conflict::{self, Claim};
use super::sql::{Db, Dialect, Row, SqlStore, ToValue};
use super::{journal, ReceiverRegistry};
use crate::audit::{self, EntryKind};
use crate::clock::Clock;
use crate::domain::team::Act;
use crate::domain::{canonical_json, Description, LostReceiver, Refusal, Registration, Timestamp};
use crate::error::{Result, StoreError};
use std::collections::HashMap;

const COLUMNS: &str =
    "name, program, args, timeout_ms, describe, describe_sha256, builtin, env, id, version";

/// A registration with its JSON columns still as text.
struct RawRegistration {
    name: String,
    program: String,
    args: String,
    timeout_ms: i64,
    describe: String,
    describe_sha256: String,
    builtin: bool,
    env: String,
    id: i64,
    version: i64,
}

fn raw(row: &Row) -> Result<RawRegistration, StoreError> {
    Ok(RawRegistration {
        name: row.get(0)?,
        program: row.get(1)?,
        args: row.get(2)?,
        timeout_ms: row.get(3)?,
        describe: row.get(4)?,
        describe_sha256: row.get(5)?,
        builtin: row.get(6)?,
        env: row.get(7)?,
        id: row.get(8)?,
        version: row.get(9)?,
    })
}

/// A registration as stored, with its routes read on `db`.
fn parse_registration(db: &mut dyn Db, raw: RawRegistration) -> Result<Registration> {
    let name = raw.name;
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of receiver {name}"));
    let args: Vec<String> = serde_json::from_str(&raw.args).map_err(|_| corrupt("args"))?;
    let env: Vec<String> = serde_json::from_str(&raw.env).map_err(|_| corrupt("env"))?;
    let describe: Description =
        serde_json::from_str(&raw.describe).map_err(|_| corrupt("describe answer"))?;
    let actions = db.query(
        "SELECT action_kind FROM routes WHERE receiver = ?1 ORDER BY action_kind",
        &[&name],
        |r| r.get(0),
    )?;
    Ok(Registration {
        id: raw.id,
        version: raw.version,
        actions,
        builtin: raw.builtin,
        program: raw.program,
        args,
        env,
        timeout_ms: u64::try_from(raw.timeout_ms).map_err(|_| corrupt("timeout"))?,
        describe,
        describe_sha256: raw.describe_sha256,
        name,
    })
}

/// The registrations a query over [`COLUMNS`] selects, each with its
/// routes.
fn registrations(db: &mut dyn Db, sql: &str, params: &[&dyn ToValue]) -> Result<Vec<Registration>> {
    let rows = db.query(sql, params, raw)?;
    rows.into_iter()
        .map(|row| parse_registration(db, row))
        .collect()
}

/// Writes a registration's row, its routes and its `receiver_registered`
/// entry in the caller's transaction, which has checked that they are
/// free.
pub(crate) fn insert_registration(
    db: &mut dyn Db,
    registration: &Registration,
    at: Timestamp,
) -> Result<()> {
    let args = canonical_json(&serde_json::Value::from(registration.args.clone()));
    let env = canonical_json(&serde_json::Value::from(registration.env.clone()));
    let describe = serde_json::to_value(&registration.describe)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    // The registration's id is the seq of the entry appended below, in
    // this transaction: never reused, as no seq is.
    conflict::insert(
        db,
        &format!(
            "INSERT INTO receivers ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM journal), 1)"
        ),
        &[
            &registration.name,
            &registration.program,
            &args,
            &i64::try_from(registration.timeout_ms).unwrap_or(i64::MAX),
            &canonical_json(&describe),
            &registration.describe_sha256,
            &registration.builtin,
            &env,
        ],
        &Claim {
            receiver: Some(&registration.name),
            ..Claim::default()
        },
    )?;
    for action in &registration.actions {
        conflict::insert(
            db,
            "INSERT INTO routes (action_kind, receiver) VALUES (?1, ?2)",
            &[action, &registration.name],
            &Claim {
                action: Some(action),
                ..Claim::default()
            },
        )?;
    }
    let fields = audit::receiver_registered(registration, at);
    journal::append(db, EntryKind::ReceiverRegistered, None, fields)?;
    Ok(())
}

/// Refuses `receiver_changed` unless the registration stored under
/// `changed`'s name is the one the caller compared with (its id, at the
/// version before `changed`'s), `unknown_receiver` when there is none.
fn still_current(db: &mut dyn Db, changed: &Registration) -> Result<()> {
    let current: Option<(i64, i64)> = db.query_opt(
        "SELECT id, version FROM receivers WHERE name = ?1",
        &[&changed.name],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    match current {
        Some(stored) if stored == (changed.id, changed.version - 1) => Ok(()),
        Some(_) => Err(Refusal::ReceiverChanged {
            receiver: changed.name.clone(),
            what: "another command changed its registration meanwhile".into(),
        }
        .into()),
        None => Err(Refusal::UnknownReceiver(changed.name.clone()).into()),
    }
}

/// Stores `changed` over the registration it was compared with, under the
/// predicate [`still_current`] checked: one another writer changed after
/// that read is not overwritten unseen, and the update is refused as the
/// row now is.
fn write_update(db: &mut dyn Db, changed: &Registration) -> Result<()> {
    let args = canonical_json(&serde_json::Value::from(changed.args.clone()));
    let env = canonical_json(&serde_json::Value::from(changed.env.clone()));
    let describe =
        serde_json::to_value(&changed.describe).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let updated = db.execute(
        "UPDATE receivers SET program = ?2, args = ?3, timeout_ms = ?4, describe = ?5,
                 describe_sha256 = ?6, env = ?7, version = ?8
             WHERE name = ?1 AND id = ?9 AND version = ?8 - 1",
        &[
            &changed.name,
            &changed.program,
            &args,
            &i64::try_from(changed.timeout_ms).unwrap_or(i64::MAX),
            &canonical_json(&describe),
            &changed.describe_sha256,
            &env,
            &changed.version,
            &changed.id,
        ],
    )?;
    if updated != 1 {
        still_current(db, changed)?;
        return Err(StoreError::Corrupt(format!(
            "the update of receiver {} matched no row, though it is current",
            changed.name
        ))
        .into());
    }
    Ok(())
}

/// Whether a receiver of this name is registered (an `EXISTS` reads as a
/// flag on every store: the executor reads PostgreSQL's boolean as 0 or 1,
/// what SQLite's is).
fn receiver_exists(db: &mut dyn Db, name: &str) -> Result<bool> {
    Ok(db.query_one(
        "SELECT EXISTS (SELECT 1 FROM receivers WHERE name = ?1)",
        &[&name],
        |r| r.get(0),
    )?)
}

/// The prepared or unknown operations that route to `name`, by op id (the
/// first `limit` of them, or all).
fn open_ops(db: &mut dyn Db, name: &str, limit: Option<i64>) -> Result<Vec<String>> {
    Ok(db.query(
        "SELECT op_id FROM operations
                 WHERE receiver = ?1 AND state IN ('prepared', 'unknown')
                 ORDER BY op_id LIMIT ?2",
        &[&name, &limit.unwrap_or(i64::MAX)],
        |r| r.get(0),
    )?)
}

/// Refuses `receiver_in_use` while a prepared or unknown operation routes
/// to `name`, naming the first few.
fn refuse_in_use(db: &mut dyn Db, name: &str) -> Result<()> {
    let open: i64 = db.query_one(
        "SELECT COUNT(*) FROM operations
                 WHERE receiver = ?1 AND state IN ('prepared', 'unknown')",
        &[&name],
        |r| r.get(0),
    )?;
    if open == 0 {
        return Ok(());
    }
    let first = open_ops(db, name, Some(5))?;
    Err(Refusal::ReceiverInUse {
        receiver: name.to_string(),
        open,
        first,
    }
    .into())
}

/// The registry, written once for every store whose outbox is SQL.
impl<S: SqlStore> ReceiverRegistry for S {
    fn register_receiver(&mut self, registration: &Registration, clock: &dyn Clock) -> Result<()> {
        self.write(clock, Act::Receivers, |db, at| {
            if receiver_exists(db, &registration.name)? {
                return Err(Refusal::ReceiverExists(registration.name.clone()).into());
            }
            for action in &registration.actions {
                let routed: Option<String> = db.query_opt(
                    "SELECT receiver FROM routes WHERE action_kind = ?1",
                    &[action],
                    |r| r.get(0),
                )?;
                if let Some(receiver) = routed {
                    return Err(Refusal::ActionRouted {
                        action: action.clone(),
                        receiver,
                    }
                    .into());
                }
            }
            insert_registration(db, registration, at)
        })
    }

    fn receivers(&self) -> Result<Vec<Registration>> {
        let sql = format!("SELECT {COLUMNS} FROM receivers ORDER BY name");
        self.read(|db| registrations(db, &sql, &[]))
    }

    fn registration(&self, name: &str) -> Result<Option<Registration>> {
        let sql = format!("SELECT {COLUMNS} FROM receivers WHERE name = ?1");
        self.read(|db| Ok(registrations(db, &sql, &[&name])?.into_iter().next()))
    }

    fn routes_of(&self, ops: &[(&str, &str)]) -> Result<Vec<crate::store::Route>> {
        let by_id = format!("SELECT {COLUMNS} FROM receivers WHERE id = ?1");
        let by_name = format!("SELECT {COLUMNS} FROM receivers WHERE name = ?1");
        self.read(|db| {
            // Each registration is read once for the batch.
            let mut ids: HashMap<i64, Option<Registration>> = HashMap::new();
            let mut names: HashMap<&str, Option<Registration>> = HashMap::new();
            let mut routes = Vec::with_capacity(ops.len());
            let op_ids: Vec<&str> = ops.iter().map(|&(op_id, _)| op_id).collect();
            let routed = receiver_ids_of(db, &op_ids)?;
            for &(op_id, receiver) in ops {
                let id = routed.get(op_id).copied().flatten();
                let registration = match id {
                    Some(id) if !ids.contains_key(&id) => {
                        let found = registrations(db, &by_id, &[&id])?.into_iter().next();
                        ids.entry(id).or_insert(found).clone()
                    }
                    Some(id) => ids[&id].clone(),
                    None if !names.contains_key(receiver) => {
                        let found = registrations(db, &by_name, &[&receiver])?;
                        names
                            .entry(receiver)
                            .or_insert(found.into_iter().next())
                            .clone()
                    }
                    None => names[receiver].clone(),
                };
                routes.push((id, registration));
            }
            Ok(routes)
        })
    }

    fn update_receiver(
        &mut self,
        changed: &Registration,
        clock: &dyn Clock,
    ) -> Result<Registration> {
        self.write(clock, Act::Receivers, |db, at| {
            still_current(db, changed)?;
            write_update(db, changed)?;
            let fields = audit::receiver_updated(changed, at);
            journal::append(db, EntryKind::ReceiverUpdated, None, fields)?;
            Ok(changed.clone())
        })
    }

    fn remove_receiver(
        &mut self,
        name: &str,
        lost: Option<&LostReceiver<'_>>,
        clock: &dyn Clock,
    ) -> Result<Vec<String>> {
        self.write(clock, Act::Receivers, |db, at| {
            if !receiver_exists(db, name)? {
                return Err(Refusal::UnknownReceiver(name.to_string()).into());
            }
            let open = match lost {
                None => {
                    refuse_in_use(db, name)?;
                    Vec::new()
                }
                Some(_) => open_ops(db, name, None)?,
            };
            db.execute("DELETE FROM routes WHERE receiver = ?1", &[&name])?;
            db.execute("DELETE FROM receivers WHERE name = ?1", &[&name])?;
            let fields = audit::receiver_removed(name, lost, at);
            journal::append(db, EntryKind::ReceiverRemoved, None, fields)?;
            if let Some(lost) = lost {
                for op_id in &open {
                    super::triage::escalate_lost(db, op_id, lost, at)?;
                }
            }
            Ok(open)
        })
    }
}

/// The registration an operation was routed to, when it names one (an
/// operation prepared before schema 6 routes by its receiver's name).
pub(crate) fn receiver_id_of(db: &mut dyn Db, op_id: &str) -> Result<Option<i64>> {
    Ok(db
        .query_opt(
            "SELECT receiver_id FROM operations WHERE op_id = ?1",
            &[&op_id],
            |r| r.get::<Option<i64>>(0),
        )?
        .flatten())
}

/// The registrations each of `op_ids` was routed to, by id ([`receiver_id_of`]
/// each): in one statement on a server, where a round trip each would
/// cost more than the batch's other reads; one by one in process.
fn receiver_ids_of(db: &mut dyn Db, op_ids: &[&str]) -> Result<HashMap<String, Option<i64>>> {
    if db.dialect() == Dialect::Sqlite {
        return (op_ids.iter())
            .map(|op_id| Ok((op_id.to_string(), receiver_id_of(db, op_id)?)))
            .collect();
    }
    let ids = serde_json::json!(op_ids).to_string();
    let rows = db.query(
        "SELECT o.op_id, o.receiver_id FROM json_array_elements_text(?1::json) AS i(op_id)
             JOIN operations o ON o.op_id = i.op_id COLLATE \"C\"",
        &[&ids],
        |r| Ok((r.get::<String>(0)?, r.get::<Option<i64>>(1)?)),
    )?;
    Ok(rows.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::{insert_registration, write_update};
    use crate::clock::Clock;
    use crate::domain::Refusal;
    use crate::error::Error;
    use crate::store::sender::fixture::{registration, Fixture};
    use crate::store::sql::Sqlite;
    use crate::store::ReceiverRegistry;

    /// Two registrations that both read a name or a route as free (side by
    /// side under READ COMMITTED): the loser's key violation is the refusal
    /// it means, `receiver_exists` or `action_routed` (exit 3), never a
    /// storage failure.
    #[test]
    fn a_receiver_or_route_taken_after_the_read_is_refused_as_taken() {
        let mut fx = Fixture::new();
        let at = fx.clock.now();
        let path = fx.store.path().to_path_buf();
        let tx = fx.store.conn_mut().transaction().unwrap();
        let db = &mut Sqlite {
            conn: &tx,
            path: &path,
        };
        let same_name = insert_registration(db, &registration("builtin", &["mail"]), at);
        let routed = insert_registration(db, &registration("mailer", &["*"]), at);
        let refusals: Vec<Option<Refusal>> = [same_name, routed]
            .into_iter()
            .map(|r| match r {
                Err(Error::Refused(refused)) => Some(refused),
                _ => None,
            })
            .collect();
        assert_eq!(
            refusals,
            [
                Some(Refusal::ReceiverExists("builtin".into())),
                Some(Refusal::ActionRouted {
                    action: "*".into(),
                    receiver: "builtin".into()
                }),
            ]
        );
    }

    /// Two updates of one registration that both compared with version 1
    /// (side by side under READ COMMITTED): the second overwrites nothing
    /// and is refused `receiver_changed`.
    #[test]
    fn an_update_of_a_registration_changed_after_the_read_is_refused() {
        let mut fx = Fixture::new();
        let stored = fx.store.registration("builtin").unwrap().unwrap();
        let next = |timeout_ms| crate::domain::Registration {
            version: stored.version + 1,
            timeout_ms,
            ..stored.clone()
        };
        fx.store.update_receiver(&next(7), &fx.clock).unwrap();
        let path = fx.store.path().to_path_buf();
        let tx = fx.store.conn_mut().transaction().unwrap();
        let db = &mut Sqlite {
            conn: &tx,
            path: &path,
        };
        let refused = match write_update(db, &next(9)) {
            Err(Error::Refused(refused)) => refused,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(refused.code(), "receiver_changed");
        drop(tx);
        let now = fx.store.registration("builtin").unwrap().unwrap();
        assert_eq!((now.version, now.timeout_ms), (2, 7));
    }
}
