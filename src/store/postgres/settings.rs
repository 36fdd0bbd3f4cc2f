//! The outbox's settings are journaled acts (SPEC 12): `db init` and `db
//! upgrade` end by journaling a `settings` entry whenever what `meta`
//! holds under `four_eyes`, `workspace_id`, `owner` and `roles_prefix`
//! is not what the newest `settings` entry says. The database holds
//! `meta` to that entry at every commit (`meta_settings_rules`,
//! `roles.rs`), and `verify` holds it after the fact (`audit::meta`).

use super::schema::{FOUR_EYES_KEY, OWNER_KEY, ROLES_PREFIX_KEY};
use super::{db_error, DatabaseUrl};
use crate::audit::meta::WORKSPACE_ID;
use crate::audit::{EntryKind, Settings};
use crate::clock::Clock;
use crate::domain::team::{Act, DEFAULT_ROLES_PREFIX};
use crate::error::StoreError;
use crate::store::journal;
use crate::store::sql::Postgres;
use postgres::Transaction;
use std::collections::HashMap;

/// The settings `meta` holds now.
fn held(tx: &mut Transaction<'_>, url: &DatabaseUrl) -> Result<Settings, StoreError> {
    let row = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM meta WHERE key = $1 AND value = '1'),
                    coalesce((SELECT value::text FROM meta WHERE key = $2), ''),
                    coalesce((SELECT value::text FROM meta WHERE key = $3), ''),
                    coalesce((SELECT value::text FROM meta WHERE key = $4), $5)",
            &[
                &FOUR_EYES_KEY,
                &WORKSPACE_ID,
                &OWNER_KEY,
                &ROLES_PREFIX_KEY,
                &DEFAULT_ROLES_PREFIX,
            ],
        )
        .map_err(|e| db_error(url, "reading the settings", &e))?;
    Ok(Settings {
        four_eyes: row.get(0),
        workspace_id: row.get(1),
        owner: row.get(2),
        roles_prefix: row.get(3),
    })
}

/// The settings the newest `settings` entry names, if there is one that
/// can be read.
fn journaled(tx: &mut Transaction<'_>, url: &DatabaseUrl) -> Result<Option<Settings>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT entry::jsonb ->> 'four_eyes', entry::jsonb ->> 'workspace_id',
                    entry::jsonb ->> 'owner', entry::jsonb ->> 'roles_prefix'
               FROM journal WHERE kind = 'settings' ORDER BY seq DESC LIMIT 1",
            &[],
        )
        .map_err(|e| db_error(url, "reading the newest settings entry", &e))?;
    Ok(row.and_then(|row| {
        Some(Settings {
            four_eyes: row.get::<_, Option<String>>(0)? == "true",
            workspace_id: row.get::<_, Option<String>>(1)?,
            owner: row.get::<_, Option<String>>(2)?,
            roles_prefix: row.get::<_, Option<String>>(3)?,
        })
    }))
}

/// Journals the settings `meta` holds as a `settings` entry when they are
/// not what the newest one says: inside the act `act` (`Act::Settings`
/// begins its own; `Act::Upgrade` is under way already), as `login`, at
/// `clock`'s time. The entry's seq when one was written.
pub(super) fn journal_settings(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
    login: &str,
    act: Act,
    clock: &dyn Clock,
) -> Result<Option<i64>, StoreError> {
    let now = held(tx, url)?;
    if journaled(tx, url)?.as_ref() == Some(&now) {
        return Ok(None);
    }
    if act == Act::Settings {
        tx.query_one("SELECT seq FROM recon_begin_write($1)", &[&act.as_str()])
            .map_err(|e| db_error(url, "beginning the settings' act", &e))?;
    }
    let mut statements = HashMap::new();
    let mut db = Postgres {
        tx,
        statements: &mut statements,
        url,
        appended: None,
        role: login,
    };
    let fields = crate::audit::settings(&now, clock.now());
    let sealed = journal::append(&mut db, EntryKind::Settings, None, fields)?;
    Ok(Some(sealed.seq))
}
