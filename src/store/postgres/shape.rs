//! `verify` holds a PostgreSQL outbox to this build's schema, as it holds
//! a SQLite file to its creation SQL: a trigger dropped or disabled, a
//! function made a no-op, an index or a CHECK changed behind recon's back
//! is a difference `verify` names.
//!
//! The target is this build's DDL itself, not a description of it: it is
//! run in the session's temporary schema, in a transaction that is always
//! rolled back (so a role with the `TEMPORARY` privilege, which PostgreSQL
//! grants to every role by default, can compare; nothing is left behind).
//! Both schemas are then described from the catalogs in the same words:
//! each column (type, collation, nullability, default, position), each
//! constraint (`pg_get_constraintdef`), index (`pg_get_indexdef`), trigger
//! (`pg_get_triggerdef` and whether it is enabled, which the definition
//! does not say) and function (its body, language, security and
//! settings), with the schema names taken out of the definitions; and
//! what decides who may write (SPEC 12): the privileges on each table,
//! column and function granted to any role but the owner (`PUBLIC`
//! included; the target gets `db init`'s grants), the rules (`CREATE
//! RULE`), row security and its policies.

use super::{db_error, DatabaseUrl};
use crate::audit::{Difference, SchemaDifference};
use crate::error::StoreError;
use postgres::Client;
use std::collections::BTreeMap;

/// One object of a schema: its kind and name, and its definition.
type Shape = BTreeMap<(String, String), String>;

/// Every column, constraint, index and trigger of the tables `$2` in the
/// schema `$1` (an oid), and the functions `$3` there or called by those
/// triggers, as `(kind, name, definition)`.
const DESCRIBE: &str = r#"
SELECT 'column', c.relname || '.' || a.attname,
       format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attcollation <> 0 AND a.attcollation <> 100
               THEN ' COLLATE ' || quote_ident(co.collname) ELSE '' END
       || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
       || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
       || ' #' || row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = $1 AND c.relname = ANY($2) AND c.relkind = 'r' AND a.attnum > 0
  AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', c.relname || '.' || con.conname, pg_get_constraintdef(con.oid)
FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
WHERE c.relnamespace = $1 AND c.relname = ANY($2)
UNION ALL
SELECT 'index', i.relname, pg_get_indexdef(i.oid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
WHERE c.relnamespace = $1 AND c.relname = ANY($2)
UNION ALL
SELECT 'trigger', c.relname || '.' || t.tgname,
       pg_get_triggerdef(t.oid) || ' [enabled ' || t.tgenabled::text || ']'
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = $1 AND c.relname = ANY($2) AND NOT t.tgisinternal
UNION ALL
SELECT 'function', p.proname,
       p.prosrc || ' [' || l.lanname || CASE WHEN p.prosecdef THEN ' security definer' ELSE '' END
       || ' ' || p.provolatile::text || ' ' || coalesce(array_to_string(p.proconfig, ','), '') || ']'
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE (p.pronamespace = $1 AND p.proname = ANY($3))
   OR p.oid IN (SELECT t.tgfoid FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                WHERE c.relnamespace = $1 AND c.relname = ANY($2))
UNION ALL
SELECT 'privileges', c.relname || ' to ' || CASE a.grantee WHEN 0 THEN 'PUBLIC'
                                              ELSE a.grantee::regrole::text END,
       string_agg(a.privilege_type, ',' ORDER BY a.privilege_type)
FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
WHERE c.relnamespace = $1 AND c.relname = ANY($2) AND a.grantee <> c.relowner
GROUP BY c.relname, a.grantee
UNION ALL
SELECT 'column privileges', c.relname || '.' || att.attname || ' to '
       || CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
       string_agg(a.privilege_type, ',' ORDER BY a.privilege_type)
FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid, aclexplode(att.attacl) a
WHERE c.relnamespace = $1 AND c.relname = ANY($2) AND a.grantee <> c.relowner
GROUP BY c.relname, att.attname, a.grantee
UNION ALL
SELECT 'function privileges', p.proname || ' to ' || CASE a.grantee WHEN 0 THEN 'PUBLIC'
                                                     ELSE a.grantee::regrole::text END,
       string_agg(a.privilege_type, ',' ORDER BY a.privilege_type)
FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
WHERE p.pronamespace = $1 AND p.proname = ANY($3) AND a.grantee <> p.proowner
GROUP BY p.proname, a.grantee
UNION ALL
SELECT 'rule', c.relname || '.' || r.rulename, pg_get_ruledef(r.oid)
FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
WHERE c.relnamespace = $1 AND c.relname = ANY($2)
UNION ALL
SELECT 'row security', c.relname,
       'enabled ' || c.relrowsecurity::text || ', forced ' || c.relforcerowsecurity::text
FROM pg_class c WHERE c.relnamespace = $1 AND c.relname = ANY($2) AND c.relkind = 'r'
UNION ALL
SELECT 'policy', c.relname || '.' || p.polname,
       p.polcmd::text || CASE WHEN p.polpermissive THEN ' permissive' ELSE ' restrictive' END
       || ' to ' || coalesce((SELECT string_agg(CASE r WHEN 0 THEN 'PUBLIC'
                                                  ELSE r::regrole::text END, ',' ORDER BY r)
                              FROM unnest(p.polroles) AS r), '')
       || ' using ' || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
       || ' check ' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
WHERE c.relnamespace = $1 AND c.relname = ANY($2)
"#;

/// What recon creates: its DDL, and the names of its tables and functions
/// (the objects compared are those, and everything on those tables).
pub(crate) struct Ours {
    pub ddl: String,
    pub tables: Vec<String>,
    pub functions: Vec<String>,
}

/// How the outbox's schema differs from this build's: this build's objects
/// missing or different, then the outbox's unknown to it (each in name
/// order). The comparison runs in a transaction of its own, rolled back.
pub(crate) fn differences(
    client: &mut Client,
    url: &DatabaseUrl,
    ours: &Ours,
) -> Result<Vec<SchemaDifference>, StoreError> {
    let failed = |e: postgres::Error| db_error(url, "comparing the schema with this build's", &e);
    let mut tx = client.transaction().map_err(failed)?;
    let live_schema: (u32, String) = tx
        .query_one(
            "SELECT oid, nspname::text FROM pg_namespace WHERE nspname = current_schema()",
            &[],
        )
        .map(|r| (r.get(0), r.get(1)))
        .map_err(failed)?;
    let live = describe(&mut tx, live_schema, ours).map_err(failed)?;
    tx.batch_execute("SET LOCAL search_path = pg_temp")
        .map_err(failed)?;
    tx.batch_execute(&in_temporary_schema(&ours.ddl))
        .map_err(failed)?;
    let scratch: (u32, String) = tx
        .query_one(
            "SELECT oid, nspname::text FROM pg_namespace WHERE oid = pg_my_temp_schema()",
            &[],
        )
        .map(|r| (r.get(0), r.get(1)))
        .map_err(failed)?;
    let wanted = describe(&mut tx, scratch, ours).map_err(failed)?;
    tx.rollback().map_err(failed)?;
    Ok(compare(&wanted, &live))
}

/// The DDL with its functions made in the temporary schema, where
/// PostgreSQL looks a function up only when it is named with the schema.
fn in_temporary_schema(ddl: &str) -> String {
    ddl.replace("FUNCTION recon_", "FUNCTION pg_temp.recon_")
}

/// Recon's objects in the schema `(oid, name)`, their definitions with
/// the schema's name taken out.
fn describe(
    tx: &mut postgres::Transaction<'_>,
    (oid, name): (u32, String),
    ours: &Ours,
) -> Result<Shape, postgres::Error> {
    let qualified = [format!("{name}."), "pg_temp.".to_string()];
    Ok(tx
        .query(DESCRIBE, &[&oid, &ours.tables, &ours.functions])?
        .into_iter()
        .map(|row| {
            let definition: String = row.get(2);
            let plain = qualified
                .iter()
                .fold(definition, |text, prefix| text.replace(prefix.as_str(), ""));
            ((row.get(0), row.get(1)), plain)
        })
        .collect())
}

fn compare(wanted: &Shape, have: &Shape) -> Vec<SchemaDifference> {
    let difference = |(kind, name): &(String, String), difference| SchemaDifference {
        kind: kind.clone(),
        name: name.clone(),
        difference,
    };
    let mut out: Vec<SchemaDifference> = wanted
        .iter()
        .filter_map(|(key, definition)| match have.get(key) {
            Some(found) if found == definition => None,
            Some(_) => Some(difference(key, Difference::Differs)),
            None => Some(difference(key, Difference::Missing)),
        })
        .collect();
    out.extend(
        have.keys()
            .filter(|key| !wanted.contains_key(*key))
            .map(|key| difference(key, Difference::Unknown)),
    );
    out
}
