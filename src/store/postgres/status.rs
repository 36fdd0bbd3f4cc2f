//! `recon db status` (SPEC 12, "Roles belong to one outbox"): what an
//! outbox is and who may act on it, read in one read-only transaction by
//! any login that can read the outbox.
//!
//! - `schema`, `four_eyes` and the owner from `meta`; `roles_prefix` from
//!   `meta` when an outbox records one, else `recon` (the names this
//!   build's `db init` creates);
//! - `tls`: whether this very connection is encrypted (`pg_stat_ssl`);
//! - `logins`: each role that holds one of the outbox's roles granted by
//!   the owner, with the roles' short names;
//! - `foreign_grants`: each membership in one of them granted by anyone
//!   else (`pg_auth_members.grantor`), which counts for nothing.
//!
//! `recon db grant` and `recon db revoke` change those memberships, as the
//! owner ([`change_grants`]).

use super::schema::{self, FOUR_EYES_KEY, OWNER_KEY, ROLES_PREFIX_KEY as PREFIX_KEY, VERSION_KEY};
use super::{connect, db_error, problem_at, DatabaseUrl};
use crate::domain::team::{TeamRole, DEFAULT_ROLES_PREFIX as DEFAULT_PREFIX};
use crate::error::{DatabaseProblem, StoreError};
use crate::settings::OpenOptions;
use postgres::Transaction;

/// What `recon db status` prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DatabaseStatus {
    /// The database, its password redacted.
    pub database: String,
    pub schema: i64,
    pub roles_prefix: String,
    pub four_eyes: bool,
    pub tls: bool,
    /// The role that ran `db init`.
    pub owner: String,
    pub logins: Vec<LoginRoles>,
    pub foreign_grants: Vec<ForeignGrant>,
}

/// A role holding some of the outbox's roles, granted by its owner.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoginRoles {
    pub login: String,
    /// Short names (`reader`, `reviewer`, ...), in the order `db init`
    /// creates them.
    pub roles: Vec<String>,
}

/// A membership in one of the outbox's roles granted by another role than
/// its owner.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ForeignGrant {
    pub login: String,
    /// The role's full name.
    pub role: String,
    pub grantor: String,
}

/// Reads the status of the outbox at `url`; a database with none is
/// `Uninitialized`. Writes nothing.
pub(crate) fn status(
    url: &DatabaseUrl,
    options: OpenOptions,
) -> Result<DatabaseStatus, StoreError> {
    let mut client = connect(url, options)?;
    let mut tx = client
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(|e| db_error(url, "beginning", &e))?;
    let present = schema::present_objects(&mut tx, url, &["meta".to_string()])?;
    if present.is_empty() {
        return Err(problem_at(url, DatabaseProblem::Uninitialized));
    }
    let meta = tx
        .query("SELECT key::text, value::text FROM meta", &[])
        .map_err(|e| db_error(url, "reading meta", &e))?;
    let value = |key: &str| {
        meta.iter()
            .find(|row| row.get::<_, String>(0) == key)
            .map(|row| row.get::<_, String>(1))
    };
    let owner = value(OWNER_KEY).unwrap_or_default();
    let roles_prefix = value(PREFIX_KEY).unwrap_or_else(|| DEFAULT_PREFIX.to_string());
    let tls = tx
        .query_one(
            "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
            &[],
        )
        .map_err(|e| db_error(url, "reading pg_stat_ssl", &e))?
        .get(0);
    let (logins, foreign_grants) = memberships(&mut tx, url, &roles_prefix, &owner)?;
    Ok(DatabaseStatus {
        database: url.to_string(),
        schema: value(VERSION_KEY)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                problem_at(
                    url,
                    DatabaseProblem::Incomplete("its schema_version".into()),
                )
            })?,
        roles_prefix,
        four_eyes: value(FOUR_EYES_KEY).as_deref() == Some("1"),
        tls,
        owner,
        logins,
        foreign_grants,
    })
}

/// Every membership in the outbox's roles: those the owner granted by
/// member, and the others.
fn memberships(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
    prefix: &str,
    owner: &str,
) -> Result<(Vec<LoginRoles>, Vec<ForeignGrant>), StoreError> {
    let roles: Vec<(String, String)> = TeamRole::CREATED
        .iter()
        .map(|role| (role.name_in(prefix), role.short().to_string()))
        .collect();
    let names: Vec<&str> = roles.iter().map(|(full, _)| full.as_str()).collect();
    let rows = tx
        .query(
            "SELECT m.rolname::text, r.rolname::text, coalesce(g.rolname::text, '')
               FROM pg_auth_members a
               JOIN pg_roles r ON r.oid = a.roleid
               JOIN pg_roles m ON m.oid = a.member
               LEFT JOIN pg_roles g ON g.oid = a.grantor
              WHERE r.rolname::text = ANY($1)
                -- The outbox's roles hold each other (every role reads):
                -- those grants are the schema's, not a login's.
                AND m.rolname::text <> ALL($1)
              ORDER BY m.rolname::text COLLATE \"C\", g.rolname::text COLLATE \"C\"",
            &[&names],
        )
        .map_err(|e| db_error(url, "reading role memberships", &e))?;
    let mut logins: Vec<LoginRoles> = Vec::new();
    let mut foreign = Vec::new();
    for row in &rows {
        let (login, role, grantor): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        if grantor != owner {
            foreign.push(ForeignGrant {
                login,
                role,
                grantor,
            });
            continue;
        }
        if logins.last().is_none_or(|last| last.login != login) {
            logins.push(LoginRoles {
                login: login.clone(),
                roles: Vec::new(),
            });
        }
        if let Some(last) = logins.last_mut() {
            last.roles.push(role);
        }
    }
    // Short names, in the order the roles are created.
    for login in &mut logins {
        login.roles = roles
            .iter()
            .filter(|(full, _)| login.roles.contains(full))
            .map(|(_, short)| short.clone())
            .collect();
    }
    Ok((logins, foreign))
}

/// `recon db grant` (`grant: true`) or `recon db revoke`: the named roles
/// of the outbox, granted to or revoked from `login` by its owner (the
/// grantor PostgreSQL records, so the grant counts), in one transaction;
/// refused `permission_denied` for any other login, with nothing changed.
/// Returns the roles the login holds afterwards, as `db status` lists them.
pub(crate) fn change_grants(
    url: &DatabaseUrl,
    options: OpenOptions,
    login: &str,
    roles: &[TeamRole],
    grant: bool,
) -> crate::Result<LoginRoles> {
    let mut client = connect(url, options)?;
    let mut tx = client
        .transaction()
        .map_err(|e| db_error(url, "beginning", &e))?;
    let present = schema::present_objects(&mut tx, url, &["meta".to_string()])?;
    if present.is_empty() {
        return Err(problem_at(url, DatabaseProblem::Uninitialized).into());
    }
    let row = tx
        .query_one(
            "SELECT session_user::text,
                    (SELECT value::text FROM meta WHERE key = $1),
                    coalesce((SELECT value::text FROM meta WHERE key = $2), $3),
                    EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $4)",
            &[&OWNER_KEY, &PREFIX_KEY, &DEFAULT_PREFIX, &login],
        )
        .map_err(|e| db_error(url, "reading the owner", &e))?;
    let (session, owner, prefix, exists): (String, Option<String>, String, bool) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    let owner = owner.unwrap_or_default();
    if session != owner {
        return Err(crate::error::Refusal::PermissionDenied {
            act: if grant { "grant" } else { "revoke" }.to_string(),
            role: "owner".to_string(),
            login: session,
        }
        .into());
    }
    if !exists {
        return Err(problem_at(url, DatabaseProblem::NoSuchLogin(login.to_string())).into());
    }
    let quoted = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    for role in roles {
        let full = role.name_in(&prefix);
        let sql = if grant {
            format!("GRANT {} TO {}", quoted(&full), quoted(login))
        } else {
            format!("REVOKE {} FROM {}", quoted(&full), quoted(login))
        };
        let during = if grant { "granting" } else { "revoking" };
        tx.batch_execute(&sql)
            .map_err(|e| db_error(url, during, &e))?;
    }
    let (logins, _) = memberships(&mut tx, url, &prefix, &owner)?;
    tx.commit().map_err(|e| db_error(url, "committing", &e))?;
    let held = logins.into_iter().find(|l| l.login == login);
    Ok(held.unwrap_or_else(|| LoginRoles {
        login: login.to_string(),
        roles: Vec::new(),
    }))
}
