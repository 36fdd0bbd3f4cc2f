//! A COMMIT whose connection was lost: the sender-side twin of the lost
//! receipt. The server may have committed the act before the connection
//! went, or never seen the COMMIT; recon cannot tell which from the error.
//! It knows the `(seq, hash)` of the last journal entry the act appended,
//! so it asks again: it reconnects (retrying within the busy timeout),
//! ends the old session if the server still has it, takes the journal
//! head `FOR UPDATE` (which waits for the old session's transaction to
//! end, committed or rolled back) and looks for entry `seq`.
//! That entry with that hash means the act committed; anything else means
//! it did not, and nothing was written. A server that cannot be asked
//! leaves the outcome unknown: the error carries
//! [`Committed::unknown`], exit 4, and the entry settles it later.

use super::sender::{Connection, PgSender, Session, TAKE_HEAD};
use super::{detail, problem_at};
use crate::error::{Committed, DatabaseProblem, Error, Result, StoreError};
use crate::store::sql::Appended;
use postgres::Client;
use std::time::{Duration, Instant};

/// The pause between two attempts to reach the server again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

impl PgSender {
    /// Settles an act whose COMMIT lost its connection (`lost`): `Ok` if
    /// it committed, an error saying nothing was written if it did not,
    /// and the unknown outcome if the server cannot be asked.
    pub(super) fn settle(&mut self, appended: &Appended, lost: &postgres::Error) -> Result<()> {
        let said = self.url.scrub(&detail(lost));
        let unknown = |why: StoreError| {
            Error::from(why).after(Committed::unknown(
                &appended.kind,
                appended.seq,
                &appended.hash,
            ))
        };
        let mut conn = self.reconnect().map_err(unknown)?;
        let lost_session = self.conn.get_mut().session.clone();
        self.end_session(&mut conn.client, &lost_session);
        let found = self
            .entry_hash(&mut conn.client, appended.seq)
            .map_err(unknown)?;
        // The old connection is gone: later acts run on the new one.
        *self.conn.get_mut() = conn;
        if found.as_deref() == Some(appended.hash.as_str()) {
            return Ok(());
        }
        Err(problem_at(
            &self.url,
            DatabaseProblem::NotCommitted {
                seq: appended.seq,
                detail: said,
            },
        )
        .into())
    }

    /// A new connection, tried until the busy timeout has passed (at
    /// least once); the last attempt's error if none succeeds.
    fn reconnect(&self) -> Result<Connection, StoreError> {
        let deadline = Instant::now() + self.options.busy_timeout;
        loop {
            match Connection::open(&self.url, self.options) {
                Ok(client) => return Ok(client),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(RETRY_PAUSE),
            }
        }
    }

    /// Ends the lost connection's server session if it is still there (a
    /// peer that vanished without closing leaves it open, holding the
    /// journal head until the server notices): the session ends, its
    /// transaction committed or rolled back as far as it had got. Best
    /// effort: a role not allowed to signal it waits for it instead, within
    /// the busy timeout.
    fn end_session(&self, client: &mut Client, lost: &Session) {
        let _ = client.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE pid = $1 AND backend_start::text = $2",
            &[&lost.pid, &lost.started],
        );
    }

    /// The hash of journal entry `seq`, read under the journal head's
    /// lock (so after the lost transaction ended); `None` if there is no
    /// such entry. Nothing is written: the transaction rolls back.
    fn entry_hash(&self, client: &mut Client, seq: i64) -> Result<Option<String>, StoreError> {
        let failed =
            |e: postgres::Error| super::db_error(&self.url, "asking for the lost commit", &e);
        let mut tx = client.transaction().map_err(failed)?;
        tx.query_one(TAKE_HEAD, &[]).map_err(failed)?;
        let found = tx
            .query_opt("SELECT hash FROM journal WHERE seq = $1", &[&seq])
            .map_err(failed)?
            .map(|row| row.try_get::<_, String>(0))
            .transpose()
            .map_err(failed)?;
        tx.rollback().map_err(failed)?;
        Ok(found)
    }
}
