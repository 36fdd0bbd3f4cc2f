//! The PostgreSQL outbox as a store: one connection, the statements it
//! has prepared, and the transactions the shared scripts run in.
//!
//! A write transaction is READ COMMITTED and takes the journal head's one
//! row `FOR UPDATE` as its first statement: the analogue of SQLite's
//! `BEGIN IMMEDIATE`, so writers take turns at the journal, and the time of
//! an act is read after its turn has come. Reads run in a transaction of
//! their own on the same connection.

use super::{connect, db_error, problem_at, schema, DatabaseUrl};
use crate::clock::Clock;
use crate::domain::team::{Act, TeamRole};
use crate::domain::Refusal;
use crate::domain::Timestamp;
use crate::error::{DatabaseProblem, Error, Result, StoreError};
use crate::faults::{hold_point, HoldPoint};
use crate::settings::OpenOptions;
use crate::store::sql::{Db, Postgres, SqlStore};
use postgres::{Client, IsolationLevel, Statement};
use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The statement every write transaction runs first: the database checks
/// that the session may do the act (`roles`), and takes the journal
/// head's lock.
const BEGIN_WRITE: &str = "SELECT seq, hash FROM recon_begin_write(?1)";

/// The journal head's lock alone, for a writer settling a lost commit.
pub(super) const TAKE_HEAD: &str = "SELECT seq, hash FROM recon_head_locked()";

/// A connection and the statements prepared on it (a prepared statement
/// belongs to its connection).
pub(super) struct Connection {
    pub(super) client: Client,
    pub(super) statements: HashMap<String, Statement>,
    pub(super) session: Session,
    /// When a transaction last began on it ([`revive`]).
    pub(super) used: Instant,
}

/// Which server session a connection is: its backend's pid and start
/// time (a pid alone can be reused by another session), and the role it
/// authenticated as (`session_user`), which every act records.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub(super) pid: i32,
    pub(super) started: String,
    pub(super) role: String,
}

impl Connection {
    /// Connects (`postgres::connect`) and reads which session it is.
    pub(super) fn open(url: &DatabaseUrl, options: OpenOptions) -> Result<Self, StoreError> {
        let mut client = connect(url, options)?;
        let failed = |e: postgres::Error| db_error(url, "reading its session", &e);
        let row = client
            .query_one(
                "SELECT pid, backend_start::text, session_user::text FROM pg_stat_activity \
                 WHERE pid = pg_backend_pid()",
                &[],
            )
            .map_err(failed)?;
        let session = Session {
            pid: row.try_get(0).map_err(failed)?,
            started: row.try_get(1).map_err(failed)?,
            role: row.try_get(2).map_err(failed)?,
        };
        Ok(Connection {
            client,
            statements: HashMap::new(),
            session,
            used: Instant::now(),
        })
    }
}

/// A PostgreSQL outbox, opened.
pub(crate) struct PgSender {
    /// Behind a `RefCell` because reads take `&self` and a transaction
    /// needs the client mutably; a read never runs inside another (the
    /// scripts see only their `Db`), so a borrow never meets another
    /// ([`PgSender::connection`] says so as an error if one ever did).
    pub(super) conn: RefCell<Connection>,
    pub(super) url: DatabaseUrl,
    /// What it was opened with: a lost commit reconnects with the same.
    pub(super) options: OpenOptions,
    workspace_id: String,
    /// The role the first connection authenticated as: a connection made
    /// again after a lost commit logs in with the same URL and options.
    login: String,
    /// The prefix of the outbox's roles, for naming one in a refusal.
    roles_prefix: String,
}

impl PgSender {
    /// Connects with recon's session settings and checks that the database
    /// holds a recon outbox of this version (else refused, naming
    /// `recon db init`).
    pub(crate) fn open(url: &DatabaseUrl, options: OpenOptions) -> Result<Self, StoreError> {
        let mut conn = Connection::open(url, options)?;
        let mut tx = conn
            .client
            .transaction()
            .map_err(|e| db_error(url, "beginning", &e))?;
        let workspace_id = schema::outbox_id(&mut tx, url)?;
        let roles_prefix = schema::roles_prefix(&mut tx, url)?;
        tx.commit().map_err(|e| db_error(url, "reading meta", &e))?;
        let login = conn.session.role.clone();
        Ok(PgSender {
            login,
            roles_prefix,
            conn: RefCell::new(conn),
            url: url.clone(),
            options,
            workspace_id,
        })
    }

    /// The connection, for a read. A read inside another read would be a
    /// bug of this build; it fails as an error rather than a panic.
    pub(super) fn connection(&self) -> Result<RefMut<'_, Connection>, StoreError> {
        self.conn.try_borrow_mut().map_err(|_| {
            problem_at(
                &self.url,
                DatabaseProblem::Failed {
                    during: "reading",
                    detail: "the connection is in use by another read of this process".into(),
                },
            )
        })
    }

    /// The workspace id the outbox's `meta` holds.
    pub(crate) fn workspace_id(&self) -> &str {
        &self.workspace_id
    }
}

impl SqlStore for PgSender {
    /// The act as one write transaction ([`PgSender::write_as`]); a
    /// privilege the database refused is the refusal `permission_denied`
    /// (nothing was written: the transaction rolled back).
    fn write<T>(
        &mut self,
        clock: &dyn Clock,
        what: Act,
        act: impl FnOnce(&mut dyn Db, Timestamp) -> Result<T>,
    ) -> Result<T> {
        let login = self.conn.get_mut().session.role.clone();
        let first_role = what.roles()[0].name_in(&self.roles_prefix);
        self.write_as(clock, what, act)
            .map_err(|e| authorization(e, &first_role, what, &login))
    }

    /// Runs `act` in a read transaction of its own (READ COMMITTED, as the
    /// SQLite store's reads see each statement's own snapshot).
    fn read<T, E: From<StoreError>>(
        &self,
        act: impl FnOnce(&mut dyn Db) -> Result<T, E>,
    ) -> Result<T, E> {
        let url = &self.url;
        let mut conn = self.connection()?;
        revive(&mut conn, url, self.options)?;
        let mut act = Some(act);
        match read_once(&mut conn, url, &mut act)? {
            Ok(done) => Ok(done),
            // Broken under the probe's eyes (the server went within the
            // last second): nothing of the read was sent; once more on a
            // new connection.
            Err(_) => {
                *conn = Connection::open(url, self.options)?;
                read_once(&mut conn, url, &mut act)?
                    .map_err(|e| db_error(url, "beginning a read", &e).into())
            }
        }
    }
}

impl PgSender {
    /// The write itself: `BEGIN` (READ COMMITTED), the act begun with the
    /// database (which checks the session's roles and takes the journal
    /// head `FOR UPDATE`), the time of the act, the act (the executor keeps
    /// the last journal entry it writes), and COMMIT; an error (or a
    /// panic) drops the transaction, which rolls it back. A COMMIT that
    /// loses its connection is settled by that entry
    /// ([`PgSender::settle`]).
    fn write_as<T>(
        &mut self,
        clock: &dyn Clock,
        what: Act,
        act: impl FnOnce(&mut dyn Db, Timestamp) -> Result<T>,
    ) -> Result<T> {
        hold_point(HoldPoint::BeforeWriteLock);
        let url = &self.url;
        revive(self.conn.get_mut(), url, self.options)?;
        let Connection {
            client,
            statements,
            session,
            ..
        } = self.conn.get_mut();
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .map_err(|e| db_error(url, "beginning a write", &e))?;
        let mut db = Postgres {
            tx: &mut tx,
            statements,
            url,
            appended: None,
            role: &session.role,
        };
        crate::actlog::begin();
        db.execute(BEGIN_WRITE, &[&what.as_str()])?;
        let at = clock.now();
        let done = act(&mut db, at)?;
        let appended = db.appended.take();
        hold_point(HoldPoint::BeforeCommit);
        match (tx.commit(), appended) {
            (Ok(()), _) => {
                crate::actlog::ended("committed");
                Ok(done)
            }
            // No answer from the server, not its refusal: the act may or
            // may not have committed.
            (Err(lost), Some(appended)) if lost.as_db_error().is_none() => {
                let settled = self.settle(&appended, &lost);
                match &settled {
                    Ok(()) => crate::actlog::ended("committed"),
                    Err(e) if e.committed().is_some() => crate::actlog::ended("unknown"),
                    Err(_) => {}
                }
                settled.map(|()| done)
            }
            (Err(e), _) => Err(db_error(&self.url, "committing", &e).into()),
        }
    }
}

/// An act's error in recon's terms: the database's refusal of a privilege
/// is `permission_denied`, naming the role the database named (else the
/// act's first, `first_role`), and `login`, the session's role; a rule's refusal
/// (`RCR01`) is `rule_violation`, saying the rule, and a decision on a
/// closed snapshot no recorded close holds (`RCC01`) `unbacked_close`.
fn authorization(error: Error, first_role: &str, what: Act, login: &str) -> Error {
    match error {
        Error::Store(StoreError::Database {
            problem: DatabaseProblem::Denied { role, .. },
            ..
        }) => Refusal::PermissionDenied {
            act: what.as_str().to_string(),
            role: role.unwrap_or_else(|| first_role.to_string()),
            login: login.to_string(),
        }
        .into(),
        Error::Store(StoreError::Database {
            problem: DatabaseProblem::RuleRefused { detail, .. },
            ..
        }) => Refusal::RuleViolation { rule: detail }.into(),
        Error::Store(StoreError::Database {
            problem: DatabaseProblem::UnbackedClose { detail, .. },
            ..
        }) => Refusal::UnbackedClose(detail).into(),
        other => other,
    }
}

/// One read transaction: `Ok(Err(_))` when BEGIN found the connection
/// broken, before `act` was taken.
fn read_once<T, E: From<StoreError>>(
    conn: &mut Connection,
    url: &DatabaseUrl,
    act: &mut Option<impl FnOnce(&mut dyn Db) -> Result<T, E>>,
) -> Result<Result<T, postgres::Error>, E> {
    let Connection {
        client,
        statements,
        session,
        ..
    } = conn;
    let mut tx = match client.build_transaction().read_only(true).start() {
        Ok(tx) => tx,
        Err(e) if e.as_db_error().is_none() => return Ok(Err(e)),
        Err(e) => return Err(db_error(url, "beginning a read", &e).into()),
    };
    let Some(act) = act.take() else {
        return Err(StoreError::Io(std::io::Error::other("a read was run twice")).into());
    };
    let done = act(&mut Postgres {
        tx: &mut tx,
        statements,
        url,
        appended: None,
        role: &session.role,
    })?;
    tx.commit()
        .map_err(|e| db_error(url, "ending a read", &e))?;
    Ok(Ok(done))
}

/// Connects again when the connection has broken (the server restarted
/// since its last use), before a transaction begins, so nothing of the
/// act was sent: a long-lived handle (the console's) goes on after a
/// restart. A connection that broke unnoticed fails its next statement
/// instead; the one after that finds it closed.
/// A connection idle for [`IDLE_PROBE`] is probed first (one empty query);
/// one in steady use (a command's reads, a bench) is not, so the probe
/// costs nothing there.
fn revive(
    conn: &mut Connection,
    url: &DatabaseUrl,
    options: OpenOptions,
) -> Result<(), StoreError> {
    let idle = conn.used.elapsed() >= IDLE_PROBE;
    if conn.client.is_closed() || (idle && conn.client.is_valid(PROBE_WAIT).is_err()) {
        *conn = Connection::open(url, options)?;
    }
    conn.used = Instant::now();
    Ok(())
}

/// How long a connection may sit unused before [`revive`] probes it, and
/// how long the probe waits for the server.
const IDLE_PROBE: Duration = Duration::from_secs(1);
const PROBE_WAIT: Duration = Duration::from_secs(5);

/// A shared server offers neither optional capability: no bulk load (the
/// SQLite one drops a trigger, which would lock out every other host) and
/// no drills (they are for the stores the experiment builds for itself).
impl crate::store::Capabilities for PgSender {
    fn bulk(&mut self) -> Option<&mut dyn crate::store::BulkLoad> {
        None
    }

    fn drills(&self) -> Option<&dyn crate::store::Drills> {
        None
    }

    /// Asks the database, role by role, with the function its acts are
    /// checked by (`recon_has_role`).
    fn may(&self, what: Act) -> Result<()> {
        for role in what.roles() {
            if !self.read(|db| holds(db, *role))? {
                let login = self.login.clone();
                return Err(Refusal::PermissionDenied {
                    act: what.as_str().to_string(),
                    role: role.name_in(&self.roles_prefix),
                    login,
                }
                .into());
            }
        }
        Ok(())
    }

    fn session_role(&self) -> Option<&str> {
        Some(&self.login)
    }

    /// Asks the same function as [`Self::may`], for every role, in one
    /// read.
    fn roles_held(&self) -> Result<Option<Vec<TeamRole>>> {
        let roles = TeamRole::CREATED.into_iter().chain([TeamRole::Owner]);
        let held = self.read(|db| {
            let mut held = Vec::new();
            for role in roles {
                if holds(db, role)? {
                    held.push(role);
                }
            }
            Ok::<_, StoreError>(held)
        })?;
        Ok(Some(held))
    }
}

/// Whether the session's login holds `role`, as the database's own act
/// check (`recon_has_role`) judges it: one question for [`PgSender::may`]
/// and the console's marks alike.
fn holds(db: &mut dyn Db, role: TeamRole) -> Result<bool, StoreError> {
    db.query_one(
        "SELECT coalesce(recon_has_role(?1), false)",
        &[&role.short()],
        |r| r.get(0),
    )
}
