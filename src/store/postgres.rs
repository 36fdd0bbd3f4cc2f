//! The PostgreSQL outbox's foundation (team mode, SPEC 10): naming a
//! database ([`DatabaseUrl`], `url.rs`, with libpq's credentials,
//! `credentials.rs`), connecting to it with the session settings every
//! recon connection needs, and its schema (`schema.rs`: the outbox's DDL
//! at the SQLite schema's version, and `recon db init`).
//!
//! The outbox's transactions are the scripts every SQL store shares
//! (`store::sql`); [`PgSender`] (`sender.rs`) runs them on a connection,
//! and reads the journal for `verify` in one snapshot (`audit.rs`).
//!
//! Each connection, on opening:
//! - `application_name = recon`, so an operator sees who holds what;
//! - `lock_timeout` = the busy timeout (`RECON_BUSY_TIMEOUT_MS`, 5 s by
//!   default), SQLite's `busy_timeout`: a writer waits that long for the
//!   journal head (or any lock) and then fails, rather than forever;
//! - `idle_in_transaction_session_timeout` = [`IDLE_IN_TRANSACTION`]:
//!   recon never waits for a person or a receiver inside a transaction, so
//!   a transaction idle that long belongs to a process that hangs, and the
//!   server ends it, releasing the journal head for every other host;
//! - TCP keepalives and `tcp_user_timeout`, so a host that vanished (no
//!   FIN, no RST) is noticed by the kernel, on an idle connection and on
//!   one with unacknowledged data, instead of after hours;
//! - no `statement_timeout`: a lock wait is bounded by `lock_timeout` and
//!   a dead peer by the two above, and what else runs long is legitimate
//!   (`verify` reading a large journal); a statement timeout would fail
//!   that work and protect nobody;
//! - `synchronous_commit` must be `on` or `remote_apply` (checked, never
//!   set: it is the operator's setting, and a session could override it
//!   silently): as SQLite's `synchronous = FULL`, a commit recon reports
//!   is on disk. `off`, `local` and `remote_write` are refused: the last
//!   two let a failover lose a commit already reported;
//! - the database's encoding must be UTF8, the bytes the journal's hashes
//!   are taken over.
//!
//! Connections follow libpq's `sslmode` (`tls.rs`, through
//! [`DatabaseUrl::connect`]): TLS with rustls, `prefer` by default.

mod audit;
mod commit;
mod credentials;
mod listen;
mod roles;
mod schema;
mod sender;
mod settings;
mod shape;
mod status;
mod tls;
mod upgrade;
mod url;

pub(crate) use listen::PgHeadListener;
pub(crate) use sender::PgSender;

pub(crate) use status::{change_grants, status};
pub use status::{DatabaseStatus, LoginRoles};
pub use tls::ConnectError;
pub use url::{DatabaseUrl, UrlError};

pub(crate) use upgrade::upgrade;
pub use upgrade::DatabaseUpgrade;

pub use roles::{RULE_REFUSED, SAME_PERSON, UNBACKED_CLOSE};
pub(crate) use schema::init;
pub use schema::{DatabaseInit, APPEND_ONLY, CHAIN_REFUSED};

use crate::error::{DatabaseProblem, StoreError};
use crate::settings::OpenOptions;
use postgres::error::SqlState;
use postgres::{Client, SimpleQueryMessage};
use std::time::Duration;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a session may sit idle inside a transaction before the server
/// ends it (see the module docs).
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(10);

/// Idle time before the first keepalive probe, the interval between
/// probes, and how many may go unanswered: a silent peer is dropped
/// within a minute.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 3;

/// How long data sent may stay unacknowledged before the connection is
/// dropped (Linux's `TCP_USER_TIMEOUT`).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// The `synchronous_commit` values under which a commit is durable when
/// it returns.
const DURABLE_COMMITS: [&str; 2] = ["on", "remote_apply"];

/// A PostgreSQL error in recon's terms, naming the database redacted.
pub(crate) fn db_error(url: &DatabaseUrl, during: &'static str, e: &postgres::Error) -> StoreError {
    let problem = match e.code() {
        Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => DatabaseProblem::Locked { during },
        Some(code) if *code == SqlState::UNIQUE_VIOLATION => DatabaseProblem::Duplicate {
            during,
            constraint: e
                .as_db_error()
                .and_then(|db| db.constraint())
                .unwrap_or_default()
                .to_string(),
            detail: url.scrub(&detail(e)),
        },
        Some(code) if *code == SqlState::INSUFFICIENT_PRIVILEGE => DatabaseProblem::Denied {
            during,
            role: e
                .as_db_error()
                .and_then(|db| db.detail())
                .map(str::to_string),
            detail: url.scrub(&detail(e)),
        },
        Some(code) if code.code() == SAME_PERSON => DatabaseProblem::SamePerson {
            during,
            role: e
                .as_db_error()
                .and_then(|db| db.detail())
                .unwrap_or_default()
                .to_string(),
            detail: url.scrub(&detail(e)),
        },
        Some(code) if code.code() == RULE_REFUSED => DatabaseProblem::RuleRefused {
            during,
            detail: url.scrub(&message(e)),
        },
        Some(code) if code.code() == UNBACKED_CLOSE => DatabaseProblem::UnbackedClose {
            during,
            detail: url.scrub(&message(e)),
        },
        Some(code) if [CHAIN_REFUSED, APPEND_ONLY].contains(&code.code()) => {
            DatabaseProblem::Guarded {
                during,
                detail: url.scrub(&detail(e)),
            }
        }
        _ => DatabaseProblem::Failed {
            during,
            detail: url.scrub(&detail(e)),
        },
    };
    problem_at(url, problem)
}

pub(crate) fn problem_at(url: &DatabaseUrl, problem: DatabaseProblem) -> StoreError {
    StoreError::Database {
        url: url.to_string(),
        problem,
    }
}

/// The server's own message alone, without its SQLSTATE (a rule's
/// refusal says it to a person); else [`detail`].
fn message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => detail(e),
    }
}

/// The server's own message when there is one (the `Display` of a
/// database error is only "db error"), else the chain of causes. The
/// adapters that speak to PostgreSQL (`recon-pg-ledger`) say their errors
/// with it too.
pub fn detail(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        }
    }
}

/// Connects to the database with recon's session settings, and refuses a
/// server whose commits are not durable or whose encoding is not UTF8.
pub(crate) fn connect(url: &DatabaseUrl, options: OpenOptions) -> Result<Client, StoreError> {
    let mut config = url.config().clone();
    config
        .application_name("recon")
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES)
        .tcp_user_timeout(TCP_USER_TIMEOUT);
    let mut client = url.connect(&config).map_err(|e| match e {
        ConnectError::Postgres(e) => db_error(url, "connecting", &e),
        ConnectError::Settings(detail) => problem_at(
            url,
            DatabaseProblem::Failed {
                during: "connecting",
                detail: url.scrub(&detail),
            },
        ),
    })?;
    // Zero would mean "wait forever" to PostgreSQL; to SQLite (and to
    // RECON_BUSY_TIMEOUT_MS) it means "do not wait".
    let lock_ms = options.busy_timeout.as_millis().max(1);
    let settings = format!(
        "SET lock_timeout = {lock_ms}; \
         SET idle_in_transaction_session_timeout = {idle}; \
         SELECT current_setting('synchronous_commit'), current_setting('server_encoding')",
        idle = IDLE_IN_TRANSACTION.as_millis(),
    );
    let answer = client
        .simple_query(&settings)
        .map_err(|e| db_error(url, "setting up the session", &e))?;
    let (commit, encoding) = answer
        .iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some((
                row.get(0).unwrap_or_default().to_string(),
                row.get(1).unwrap_or_default().to_string(),
            )),
            _ => None,
        })
        .unwrap_or_default();
    if !DURABLE_COMMITS.contains(&commit.as_str()) {
        return Err(problem_at(url, DatabaseProblem::AsynchronousCommit(commit)));
    }
    if !encoding.eq_ignore_ascii_case("UTF8") {
        return Err(problem_at(url, DatabaseProblem::Encoding(encoding)));
    }
    Ok(client)
}
