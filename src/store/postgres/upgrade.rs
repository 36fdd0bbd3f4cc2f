//! `recon db upgrade` (SPEC 10, fourth wave): an outbox an older recon
//! made, brought to this build's schema in place, in one transaction.
//!
//! - Only the outbox's owner (the role in `meta.owner`, or a member of
//!   it) may run it: anyone else is refused `permission_denied` before
//!   anything changes.
//! - It takes `db init`'s advisory lock, then the journal head's row `FOR
//!   UPDATE`, so no act of any host runs beside it; each act waits and then
//!   finds the new schema.
//! - Each of [`STEPS`] brings the tables from one version to the next
//!   (columns, indexes, CHECKs): a later schema adds its step there. Then
//!   every function and trigger of recon's tables is made again from this
//!   build's DDL ([`rules`]), so the rules are exactly a new outbox's (what
//!   `verify` compares), the grants are made again (`roles::grants`),
//!   `meta.schema_version` is set, and the upgrade is journaled as
//!   `upgraded {from, to}` by an act of its own ([`Act::Upgrade`]), through
//!   the chain's trigger like every entry, so the chain goes on.
//! - PostgreSQL's DDL is transactional: killed anywhere before its COMMIT,
//!   the upgrade leaves the old schema as it was, and the next run starts
//!   again from it.
//! - An outbox already at this version is left alone (nothing is written);
//!   a newer one, or a database that is not a recon outbox, is refused as
//!   every command refuses it.
//!
//! The entries written before the upgrade were held to the rules of their
//! schema when they were written; `verify` replays them under this
//! build's, which they meet (schema 6's rules were a subset: see
//! `tests/it/pg_store/upgrade.rs`).

use super::sender::Connection;
use super::{db_error, problem_at, roles, schema, DatabaseUrl};
use crate::clock::Clock;
use crate::domain::team::{Act, TeamRole};
use crate::domain::Refusal;
use crate::error::{DatabaseProblem, Error, StoreError};
use crate::faults::{hold_point, HoldPoint};
use crate::settings::OpenOptions;
use crate::store::sql::Postgres;
use crate::store::{journal, sender, SCHEMA_VERSION};
use postgres::Transaction;
use std::collections::HashMap;

/// One step of the upgrade: the schema version it starts from, and the SQL
/// that brings recon's tables to the next one (functions and triggers are
/// made again after the last step, [`rules`]).
struct Step {
    from: i64,
    tables: &'static str,
}

/// Every step, in order; the last ends at [`SCHEMA_VERSION`].
const STEPS: [Step; 1] = [Step {
    from: 6,
    tables: FROM_SIX,
}];

/// Schema 6 (ce2d017) to 7: a kept duplicate's surplus (SPEC 14), the
/// close a decision rests on (`close_seq`, SPEC 12: the decisions journaled
/// before the `upgraded` entry name none, and `verify` exempts them), and
/// the journal's `upgraded` entries.
const FROM_SIX: &str = r#"
ALTER TABLE operations ADD COLUMN surplus_effect_ids text COLLATE "C";
ALTER TABLE evidence ADD COLUMN close_seq bigint;
CREATE INDEX operations_with_surplus ON operations(op_id) WHERE surplus_effect_ids IS NOT NULL;
ALTER TABLE journal DROP CONSTRAINT journal_kind_check;
ALTER TABLE journal ADD CONSTRAINT journal_kind_check CHECK (kind IN ('prepared', 'dispatched',
    'receipt', 'observed', 'closed', 'decided', 'approved', 'noted', 'escalated', 'deescalated',
    'receiver_registered', 'receiver_updated', 'receiver_removed', 'acknowledged',
    'call_failed', 'close_requested', 'upgraded', 'settings'));
"#;

/// What `recon db upgrade` found and did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DatabaseUpgrade {
    /// The database, its password redacted.
    pub database: String,
    /// The schema version it found.
    pub from: i64,
    /// The schema version it has now.
    pub to: i64,
    /// Whether this run upgraded it (false: it was at this version).
    pub upgraded: bool,
    /// The seq of the `upgraded` entry, when this run wrote one.
    pub seq: Option<i64>,
}

/// Upgrades the outbox at `url` to this build's schema (see the module
/// docs); the time of the act is `clock`'s once the head is locked.
pub(crate) fn upgrade(
    url: &DatabaseUrl,
    options: OpenOptions,
    clock: &dyn Clock,
) -> Result<DatabaseUpgrade, Error> {
    let mut conn = Connection::open(url, options)?;
    let login = conn.session.role.clone();
    let Connection {
        client, statements, ..
    } = &mut conn;
    let mut tx = schema::locked_transaction(client, url)?;
    let found = found_version(&mut tx, url, &login)?;
    let done = |upgraded: bool, seq: Option<i64>| DatabaseUpgrade {
        database: url.to_string(),
        from: found,
        to: SCHEMA_VERSION,
        upgraded,
        seq,
    };
    if found == SCHEMA_VERSION {
        return Ok(done(false, None));
    }
    let steps = steps_from(found).ok_or_else(|| {
        problem_at(
            url,
            DatabaseProblem::IncompatibleSchema {
                found,
                expected: SCHEMA_VERSION,
            },
        )
    })?;
    tx.query_one("SELECT seq FROM journal_head WHERE id = 1 FOR UPDATE", &[])
        .map_err(|e| db_error(url, "locking the journal head", &e))?;
    for step in steps {
        tx.batch_execute(step.tables)
            .map_err(|e| db_error(url, "upgrading the tables", &e))?;
    }
    remake_rules(&mut tx, url)?;
    tx.execute(
        "UPDATE meta SET value = $1 WHERE key = $2",
        &[&SCHEMA_VERSION.to_string(), &schema::VERSION_KEY],
    )
    .map_err(|e| db_error(url, "setting the schema version", &e))?;
    let seq = journal_upgrade(&mut tx, statements, url, &login, found, clock)?;
    super::settings::journal_settings(&mut tx, url, &login, Act::Upgrade, clock)?;
    hold_point(HoldPoint::BeforeCommit);
    tx.commit().map_err(|e| db_error(url, "committing", &e))?;
    Ok(done(true, Some(seq)))
}

/// The steps from `found` to [`SCHEMA_VERSION`], if this build has them.
fn steps_from(found: i64) -> Option<&'static [Step]> {
    let first = STEPS.iter().position(|step| step.from == found)?;
    Some(&STEPS[first..])
}

/// The schema version of the recon outbox in the database, once the
/// session's login is known to be its owner: a database without one is
/// `Uninitialized`, one whose `meta` is not recon's is `Foreign`, a newer
/// one `IncompatibleSchema`, and a login that is not the owner (or may not
/// even read `meta`) is refused `permission_denied`.
fn found_version(tx: &mut Transaction<'_>, url: &DatabaseUrl, login: &str) -> Result<i64, Error> {
    let present = schema::present_objects(tx, url, &["meta".to_string()])?;
    if present.is_empty() {
        return Err(problem_at(url, DatabaseProblem::Uninitialized).into());
    }
    let denied = || Refusal::PermissionDenied {
        act: Act::Upgrade.as_str().to_string(),
        role: TeamRole::Owner.as_str().to_string(),
        login: login.to_string(),
    };
    let foreign = || problem_at(url, DatabaseProblem::Foreign("meta".into()));
    let rows = tx
        .query("SELECT key::text, value::text FROM meta", &[])
        .map_err(|e| match e.code() {
            Some(code) if *code == postgres::error::SqlState::INSUFFICIENT_PRIVILEGE => {
                Error::from(denied())
            }
            _ => foreign().into(),
        })?;
    let value = |key: &str| {
        rows.iter()
            .find(|row| row.get::<_, String>(0) == key)
            .map(|row| row.get::<_, String>(1))
    };
    if value(schema::APPLICATION_KEY) != Some(sender::ROLE.application_id.to_string()) {
        return Err(foreign().into());
    }
    let owner = value(schema::OWNER_KEY).ok_or_else(foreign)?;
    let is_owner: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)
                AND pg_has_role(session_user, $1::text, 'MEMBER')",
            &[&owner],
        )
        .map_err(|e| db_error(url, "reading the owner's role", &e))?
        .get(0);
    if !is_owner {
        return Err(denied().into());
    }
    let found = value(schema::VERSION_KEY)
        .and_then(|v| v.parse::<i64>().ok())
        .ok_or_else(foreign)?;
    if found > SCHEMA_VERSION {
        return Err(problem_at(
            url,
            DatabaseProblem::IncompatibleSchema {
                found,
                expected: SCHEMA_VERSION,
            },
        )
        .into());
    }
    Ok(found)
}

/// Drops every trigger of recon's tables and makes every function and
/// trigger of this build's DDL, then its grants.
fn remake_rules(tx: &mut Transaction<'_>, url: &DatabaseUrl) -> Result<(), StoreError> {
    let failed = |e: postgres::Error| db_error(url, "making the rules again", &e);
    let tables = schema::names_created(&["TABLE"]);
    let triggers = tx
        .query(
            "SELECT quote_ident(t.tgname::text), quote_ident(c.relname::text)
             FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE c.relnamespace = current_schema()::regnamespace
               AND c.relname::text = ANY($1) AND NOT t.tgisinternal",
            &[&tables],
        )
        .map_err(failed)?;
    for row in triggers {
        let (trigger, table): (String, String) = (row.get(0), row.get(1));
        tx.batch_execute(&format!("DROP TRIGGER {trigger} ON {table}"))
            .map_err(failed)?;
    }
    let schema_name: String = tx
        .query_one("SELECT quote_ident(current_schema())", &[])
        .map_err(failed)?
        .get(0);
    tx.batch_execute(&rules(&schema::ddl(&schema_name)))
        .map_err(failed)?;
    // An outbox made before the prefix has the default's roles, and
    // records that prefix from now on.
    let prefix = schema::roles_prefix(tx, url)?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        &[&schema::ROLES_PREFIX_KEY, &prefix],
    )
    .map_err(|e| db_error(url, "recording the roles' prefix", &e))?;
    tx.batch_execute(&roles::grants(&tables, &prefix))
        .map_err(|e| db_error(url, "granting the roles again", &e))
}

/// The functions (as `CREATE OR REPLACE`) and triggers of `ddl`, in its
/// order, without its tables, indexes and rows.
fn rules(ddl: &str) -> String {
    statements(ddl)
        .into_iter()
        .filter_map(|statement| {
            let code = statement
                .lines()
                .skip_while(|line| {
                    let line = line.trim_start();
                    line.is_empty() || line.starts_with("--")
                })
                .collect::<Vec<_>>()
                .join("\n");
            if let Some(rest) = code.strip_prefix("CREATE FUNCTION ") {
                Some(format!("CREATE OR REPLACE FUNCTION {rest};\n"))
            } else if code.starts_with("CREATE TRIGGER ")
                || code.starts_with("CREATE CONSTRAINT TRIGGER ")
            {
                Some(format!("{code};\n"))
            } else {
                None
            }
        })
        .collect()
}

/// The statements of `ddl`, split at each `;` outside a `$$` body and
/// outside a `--` comment.
fn statements(ddl: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut in_body) = (0, false);
    let bytes = ddl.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"$$") {
            in_body = !in_body;
            i += 2;
            continue;
        }
        if !in_body && bytes[i..].starts_with(b"--") {
            i += bytes[i..]
                .iter()
                .position(|b| *b == b'\n')
                .unwrap_or(bytes.len() - i);
            continue;
        }
        if bytes[i] == b';' && !in_body {
            out.push(&ddl[start..i]);
            start = i + 1;
        }
        i += 1;
    }
    out
}

/// Journals the upgrade as an act of the owner's ([`Act::Upgrade`]),
/// through the chain's trigger; the entry's seq.
fn journal_upgrade(
    tx: &mut Transaction<'_>,
    statements: &mut HashMap<String, postgres::Statement>,
    url: &DatabaseUrl,
    login: &str,
    found: i64,
    clock: &dyn Clock,
) -> Result<i64, StoreError> {
    tx.query_one(
        "SELECT seq FROM recon_begin_write($1)",
        &[&Act::Upgrade.as_str()],
    )
    .map_err(|e| db_error(url, "beginning the upgrade's act", &e))?;
    let mut db = Postgres {
        tx,
        statements,
        url,
        appended: None,
        role: login,
    };
    let fields = crate::audit::upgraded(found, SCHEMA_VERSION, clock.now());
    let sealed = journal::append(&mut db, crate::audit::EntryKind::Upgraded, None, fields)?;
    Ok(sealed.seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_end_at_this_builds_schema_one_version_each() {
        for (i, step) in STEPS.iter().enumerate() {
            let next = STEPS.get(i + 1).map_or(SCHEMA_VERSION, |s| s.from);
            assert_eq!(step.from + 1, next, "{i}");
        }
        assert!(steps_from(SCHEMA_VERSION).is_none());
        assert!(steps_from(5).is_none());
    }

    #[test]
    fn the_rules_are_every_function_and_trigger_of_the_ddl_and_nothing_else() {
        let ddl = schema::ddl("public");
        let rules = rules(&ddl);
        let count = |text: &str, what: &str| text.matches(what).count();
        assert_eq!(
            count(&rules, "CREATE OR REPLACE FUNCTION "),
            count(&ddl, "CREATE FUNCTION ")
        );
        assert_eq!(
            count(&rules, "TRIGGER "),
            count(&ddl, "CREATE TRIGGER ") + count(&ddl, "CREATE CONSTRAINT TRIGGER ")
        );
        assert_eq!(count(&rules, "CREATE TABLE"), 0);
        assert_eq!(count(&rules, "CREATE INDEX"), 0);
        assert_eq!(count(&rules, "INSERT INTO journal_head"), 0);
    }
}
