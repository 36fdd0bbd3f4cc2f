//! Watching a PostgreSQL outbox's journal head from a connection of its
//! own (a live console, SPEC 10).
//!
//! Every statement that appends journal entries notifies the channel
//! `recon_journal` once (the trigger `journal_notify`, `schema.rs`), so a
//! session that `LISTEN`s on it wakes within a round trip of another
//! host's commit. Notifications are only a
//! hint: they are lost while the listener reconnects, and the trigger could
//! be missing on a database made by an older build. So the listener never
//! trusts their payload: each wake, and each `fallback` without one, reads
//! the head row itself; a lost notification costs at most `fallback`.
//!
//! The connection is its own (not a `PgSender`'s), since waiting for a
//! notification holds it for as long as nothing happens. When it breaks (the
//! server restarted), the next call connects again, listens again and reads
//! the head at once: whatever was committed meanwhile shows in that head.
//! Waiting between attempts is the caller's (`workspace::HeadWatch`).

use super::{connect, db_error, DatabaseUrl};
use crate::audit::Checkpoint;
use crate::error::StoreError;
use crate::settings::OpenOptions;
use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use std::time::Duration;

/// The channel every journal entry notifies (the DDL's `pg_notify`).
pub(crate) const JOURNAL_CHANNEL: &str = "recon_journal";

/// A connection listening on [`JOURNAL_CHANNEL`], made on first use and
/// made again after it broke.
pub(crate) struct PgHeadListener {
    url: DatabaseUrl,
    options: OpenOptions,
    client: Option<Client>,
}

impl PgHeadListener {
    pub(crate) fn new(url: &DatabaseUrl, options: OpenOptions) -> PgHeadListener {
        PgHeadListener {
            url: url.clone(),
            options,
            client: None,
        }
    }

    /// Connects and listens; the head right after, which covers whatever
    /// was committed while there was no connection.
    fn listen(&mut self) -> Result<Checkpoint, StoreError> {
        let mut client = connect(&self.url, self.options)?;
        client
            .batch_execute(&format!("LISTEN {JOURNAL_CHANNEL}"))
            .map_err(|e| db_error(&self.url, "listening for journal entries", &e))?;
        let head = read_head(&mut client, &self.url)?;
        self.client = Some(client);
        Ok(head)
    }
}

impl crate::store::HeadListener for PgHeadListener {
    fn next(&mut self, fallback: Duration) -> Result<Checkpoint, StoreError> {
        let Some(client) = self.client.as_mut() else {
            return self.listen();
        };
        let woken = wait(client, &self.url, fallback).and_then(|()| read_head(client, &self.url));
        if woken.is_err() {
            // Broken: the next call connects again.
            self.client = None;
        }
        woken
    }
}

/// Waits for a notification, at most `fallback`, then takes every other one
/// already there: one head read answers them all. A closed connection ends
/// the wait at once, and the head read that follows says why.
fn wait(client: &mut Client, url: &DatabaseUrl, fallback: Duration) -> Result<(), StoreError> {
    let failed = |e: postgres::Error| db_error(url, "waiting for journal entries", &e);
    let mut notifications = client.notifications();
    notifications
        .timeout_iter(fallback)
        .next()
        .map_err(failed)?;
    let mut pending = notifications.iter();
    while pending.next().map_err(failed)?.is_some() {}
    Ok(())
}

/// The journal head as stored, outside any transaction of recon's.
fn read_head(client: &mut Client, url: &DatabaseUrl) -> Result<Checkpoint, StoreError> {
    let failed = |e: postgres::Error| db_error(url, "reading the journal head", &e);
    let row = client
        .query_one("SELECT seq, hash FROM journal_head WHERE id = 1", &[])
        .map_err(failed)?;
    Ok(Checkpoint {
        length: row.try_get(0).map_err(failed)?,
        head_hash: row.try_get(1).map_err(failed)?,
    })
}
