//! Least privilege at the receiver (SPEC 12): `recon-pg-ledger init`
//! makes the ledger (as a first call would) and three NOLOGIN roles, one
//! per verb, each granted exactly what its verb does:
//!
//! - `PREFIX_query`: reads the gate rows, the effects and the ledger's id;
//! - `PREFIX_close`: that, plus creating a gate row and marking it closed
//!   (`UPDATE` of the tombstone's columns only);
//! - `PREFIX_apply`: that read, plus creating a gate row and writing an
//!   effect (its `UPDATE` right on `op_id` only lets it take the share
//!   lock an apply takes; the tombstone trigger refuses any change of
//!   a gate row's key).
//!
//! `PUBLIC` keeps nothing on the ledger's tables but a read of
//! `recon_ledger_roles`, the table that records the three roles: a verb
//! finds its role there and answers `unsupported`, naming the role, to a
//! login that is not a member of it, before it touches anything else. A
//! ledger without that table (never `init`ed) checks nothing, as before.
//!
//! `init` is idempotent: run again it creates nothing and grants the same
//! rights again. It refuses a prefix other than the one the ledger was
//! made with, and roles that already hold rights in another database (a
//! login granted them would read that ledger too).

use crate::ledger::{ensure_schema, failed};
use postgres::{Client, GenericClient, Transaction};
use recon::{Result, StoreError};
use std::collections::HashMap;

/// The prefix of the roles when `--roles` is not given.
pub const DEFAULT_PREFIX: &str = "recon_ledger";

/// The verbs that need a role, each with what its role is granted on
/// `recon_gate` and `recon_effects`.
const VERBS: [(&str, &str, &str); 3] = [
    ("query", "SELECT", "SELECT"),
    (
        "close",
        "SELECT, INSERT, UPDATE (closed_at, closed_by, closed_login)",
        "SELECT",
    ),
    ("apply", "SELECT, INSERT, UPDATE (op_id)", "SELECT, INSERT"),
];

/// The table that records the roles, readable by every login (it holds
/// their names only), so a verb can say which role it needs.
const ROLES_TABLE: &str = r#"
CREATE TABLE IF NOT EXISTS recon_ledger_roles (
    verb text PRIMARY KEY CHECK (verb IN ('query', 'close', 'apply')),
    role text NOT NULL
);
"#;

/// A gate row, once closed, never changes, and the login that closes it
/// is the session's, whatever a statement says (so a closer with `psql`
/// cannot write another name into a tombstone).
pub const TOMBSTONE_TRIGGER: &str = r#"
CREATE OR REPLACE FUNCTION recon_gate_tombstone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'operation % is closed: its tombstone is final', OLD.op_id
            USING ERRCODE = 'RC001';
    END IF;
    IF NEW.workspace IS DISTINCT FROM OLD.workspace OR NEW.op_id IS DISTINCT FROM OLD.op_id THEN
        RAISE EXCEPTION 'a gate row keeps its workspace and op id' USING ERRCODE = 'RC002';
    END IF;
    IF NEW.closed_at IS NOT NULL THEN
        NEW.closed_login := session_user;
    END IF;
    RETURN NEW;
END
$$;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'recon_gate_tombstone'
                     AND tgrelid = to_regclass('recon_gate')) THEN
        CREATE TRIGGER recon_gate_tombstone BEFORE UPDATE ON recon_gate
            FOR EACH ROW EXECUTE FUNCTION recon_gate_tombstone();
    END IF;
END
$$;
"#;

/// A role prefix: a lowercase letter, then lowercase letters, digits and
/// `_`, at most 40 in all (so every role name is a plain identifier).
pub fn valid_prefix(prefix: &str) -> bool {
    let mut chars = prefix.chars();
    prefix.len() <= 40
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// What `init` found and made.
pub struct Initialized {
    /// The schema the ledger's tables are in.
    pub schema: String,
    /// Each role, with whether this run created it.
    pub roles: Vec<(String, bool)>,
}

/// `recon-pg-ledger init`: the ledger, its roles and their rights, in one
/// transaction under the schema's advisory lock.
pub fn init(client: &mut Client, prefix: &str) -> Result<Initialized> {
    ensure_schema(client)?;
    let mut tx = client.transaction().map_err(|e| failed("beginning", e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('recon-pg-ledger schema'))",
        &[],
    )
    .map_err(|e| failed("locking the schema", e))?;
    tx.batch_execute(ROLES_TABLE)
        .map_err(|e| failed("creating recon_ledger_roles", e))?;
    let names: Vec<String> = VERBS
        .iter()
        .map(|(verb, ..)| format!("{prefix}_{verb}"))
        .collect();
    refuse_other_prefix(&mut tx, &names)?;
    refuse_other_database(&mut tx, &names)?;
    let mut roles = Vec::new();
    for name in &names {
        let exists = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
                &[name],
            )
            .map_err(|e| failed("looking for the roles", e))?
            .get::<_, bool>(0);
        if !exists {
            tx.batch_execute(&format!("CREATE ROLE \"{name}\" NOLOGIN"))
                .map_err(|e| failed("creating the roles", e))?;
        }
        roles.push((name.clone(), !exists));
    }
    let schema: String = tx
        .query_one("SELECT current_schema()", &[])
        .map_err(|e| failed("reading the schema", e))?
        .get(0);
    tx.batch_execute(&grants(&schema, &names))
        .map_err(|e| failed("granting the roles their rights", e))?;
    tx.commit().map_err(|e| failed("committing the roles", e))?;
    Ok(Initialized { schema, roles })
}

/// The script that installs the tombstone trigger, takes every right from
/// `PUBLIC` and the roles, and grants each role its own again.
fn grants(schema: &str, names: &[String]) -> String {
    let schema = format!("\"{}\"", schema.replace('"', "\"\""));
    let mut script = String::from(TOMBSTONE_TRIGGER);
    script.push_str(
        "REVOKE ALL ON recon_gate, recon_effects, recon_ledger, recon_ledger_roles FROM PUBLIC;\n\
         GRANT SELECT ON recon_ledger_roles TO PUBLIC;\n",
    );
    for ((verb, gate, effects), name) in VERBS.iter().zip(names) {
        script.push_str(&format!(
            "REVOKE ALL ON recon_gate, recon_effects, recon_ledger FROM \"{name}\";\n\
             GRANT USAGE ON SCHEMA {schema} TO \"{name}\";\n\
             GRANT SELECT ON recon_ledger TO \"{name}\";\n\
             GRANT {gate} ON recon_gate TO \"{name}\";\n\
             GRANT {effects} ON recon_effects TO \"{name}\";\n\
             INSERT INTO recon_ledger_roles (verb, role) VALUES ('{verb}', '{name}') \
             ON CONFLICT (verb) DO NOTHING;\n"
        ));
    }
    script
}

/// A ledger made with other roles keeps them: `init` with another prefix
/// is refused (drop the old roles' rows by hand to change it).
fn refuse_other_prefix(tx: &mut Transaction<'_>, names: &[String]) -> Result<()> {
    let other: Option<String> = tx
        .query_opt(
            "SELECT role FROM recon_ledger_roles WHERE role <> ALL($1) ORDER BY verb LIMIT 1",
            &[&names],
        )
        .map_err(|e| failed("reading recon_ledger_roles", e))?
        .map(|row| row.get(0));
    match other {
        None => Ok(()),
        Some(role) => Err(StoreError::Receiver(format!(
            "this ledger's roles are already set ({role}); run init with the prefix it was \
             made with"
        ))
        .into()),
    }
}

/// Roles that hold rights in another database are that ledger's: a login
/// granted them here would read (or write) there too.
fn refuse_other_database(tx: &mut Transaction<'_>, names: &[String]) -> Result<()> {
    let other: Option<(String, String)> = tx
        .query_opt(
            "SELECT r.rolname::text, d.datname::text FROM pg_shdepend s \
             JOIN pg_roles r ON r.oid = s.refobjid AND s.refclassid = 'pg_authid'::regclass \
             JOIN pg_database d ON d.oid = s.dbid \
             WHERE r.rolname = ANY($1) AND s.deptype = 'a' AND d.datname <> current_database() \
             LIMIT 1",
            &[&names],
        )
        .map_err(|e| failed("looking for the roles' other grants", e))?
        .map(|row| (row.get(0), row.get(1)));
    match other {
        None => Ok(()),
        Some((role, database)) => Err(StoreError::Receiver(format!(
            "the role {role} already holds rights in the database {database}: roles serve one \
             ledger; choose another prefix with --roles"
        ))
        .into()),
    }
}

/// The role of each verb, when the ledger was made with roles (`init`);
/// `None` when it was not, and no verb checks any.
pub fn load(client: &mut impl GenericClient) -> Result<Option<HashMap<String, String>>> {
    let present: bool = client
        .query_one("SELECT to_regclass('recon_ledger_roles') IS NOT NULL", &[])
        .map_err(|e| failed("looking for recon_ledger_roles", e))?
        .get(0);
    if !present {
        return Ok(None);
    }
    let rows = client
        .query("SELECT verb, role FROM recon_ledger_roles", &[])
        .map_err(|e| failed("reading recon_ledger_roles", e))?;
    Ok(Some(rows.iter().map(|r| (r.get(0), r.get(1))).collect()))
}

/// Whether the session's login is a member of any of `roles` (a role
/// dropped since counts as held by nobody).
pub fn member_of_any(client: &mut impl GenericClient, roles: &[String]) -> Result<bool> {
    Ok(client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = ANY($1) \
             AND pg_has_role(session_user, r.oid, 'MEMBER'))",
            &[&roles],
        )
        .map_err(|e| failed("checking the ledger roles", e))?
        .get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_a_plain_lowercase_identifier() {
        for good in ["recon_ledger", "a", "team2_ledger"] {
            assert!(valid_prefix(good), "{good}");
        }
        for bad in ["", "2x", "Recon", "a-b", "a\"b", &"x".repeat(41)] {
            assert!(!valid_prefix(bad), "{bad}");
        }
    }
}
