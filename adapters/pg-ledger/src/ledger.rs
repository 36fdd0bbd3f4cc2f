//! The PostgreSQL ledger as a `recon::receiver::Receiver`.
//!
//! Three tables, created on first use in the database the user names:
//! `recon_ledger` (one row: the id made once with the ledger, part of its
//! `instance`),
//! `recon_gate` (one row per operation: open, or closed by whom and when)
//! and `recon_effects` (one row per effect; `op_id` is not unique, because
//! a receiver is genuinely non-idempotent). An effect's id is its row's
//! identity, `pgfx-000042`, so the same row always has the same id. A
//! trigger keeps every tombstone final and writes into it the login that
//! closed (`session_user`), answered as `closed_by`. A ledger made by
//! `recon-pg-ledger init` also has `recon_ledger_roles`, and each verb
//! first checks that its login holds the verb's role ([`crate::roles`]).
//!
//! Every row is keyed by the workspace the request names as well as by its
//! op id: one ledger database may serve many workspaces (or team
//! databases), whose op ids are unique only within each, so every read,
//! write and close is scoped to the requester's workspace. Tables made by
//! a version without that key are refused, never read as if they were
//! one workspace's: their rows could belong to any.
//!
//! # Why no apply can commit after a close that did not see it
//!
//! Both sides meet on the operation's gate row, under READ COMMITTED:
//!
//! - `apply` takes `SELECT ... FOR SHARE` on the gate row, checks that it is
//!   open, inserts the effect and commits, all in one transaction. Share
//!   locks do not conflict with each other, so concurrent applies of one
//!   operation never wait for each other.
//! - `close` takes `SELECT ... FOR UPDATE` on the same row, which waits
//!   until every transaction holding the share lock has committed or rolled
//!   back. Only then does it mark the row closed and read the effects, in a
//!   later statement of the same transaction; under READ COMMITTED that
//!   statement takes a fresh snapshot, so it sees every apply that held the
//!   lock. It commits the mark and the read together.
//! - An apply that asks for its share lock while the close holds (or is
//!   granted) the exclusive one waits for the close to end; READ COMMITTED
//!   then rechecks the newest version of the row, reads `closed`, and the
//!   apply is refused `operation_closed` without writing. An apply that
//!   arrives while the close is still waiting may be granted its share lock
//!   ahead of it (PostgreSQL lets a compatible lock join the holders); the
//!   close then waits for it too, and it appears in the close's snapshot.
//!
//! So every effect either is in the close's snapshot or was never written,
//! and nothing is written for the operation after the close. A
//! `BEFORE INSERT` trigger takes the same share lock and refuses a closed
//! or unknown operation, so a write path that forgot the check (or a person
//! with `psql`) cannot add an effect after a close either.
//!
//! The gate row is created before the apply's transaction, in its own
//! short one (`INSERT ... ON CONFLICT DO NOTHING`): a row inserted and not
//! yet committed makes every other writer of the same key wait for that
//! transaction, so creating it inside the apply would serialize the
//! applies of one operation behind each other's whole transactions.

use crate::drill::{self, Commit, HoldPoint};
use crate::roles::{self, TOMBSTONE_TRIGGER};
use postgres::error::SqlState;
use postgres::{Client, GenericClient, IsolationLevel, Row, Transaction};
use recon::domain::{canonical_json, Ceiling, Description, Effect, EffectRequest, Snapshot};
use recon::receiver::protocol::Invocation;
use recon::receiver::Receiver;
use recon::workspace::postgres_error_detail;
use recon::{ConnectError, DatabaseUrl, Error, Refusal, Result, StoreError};
use std::collections::HashMap;
use std::time::Duration;

/// The SQLSTATE the trigger raises for an insert into a closed (or
/// unknown) operation.
const CLOSED_SQLSTATE: &str = "RC001";

/// How long a connection attempt may take before the server counts as
/// unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The tables, their index and the trigger, created in one transaction
/// under an advisory lock so concurrent first calls do not race.
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS recon_gate (
    workspace text NOT NULL,
    op_id text NOT NULL,
    closed_at timestamptz,
    closed_by text,
    PRIMARY KEY (workspace, op_id)
);
CREATE TABLE IF NOT EXISTS recon_effects (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace text NOT NULL,
    op_id text NOT NULL,
    action_kind text NOT NULL,
    payload text NOT NULL,
    compensates_effect_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workspace, op_id) REFERENCES recon_gate (workspace, op_id)
);
CREATE INDEX IF NOT EXISTS recon_effects_op ON recon_effects (workspace, op_id);
"#;

/// The ledger's own id, made once with its schema (a random value, never
/// changed): with the database's and the schema's OIDs it is the
/// `instance` the ledger declares. A copy restored elsewhere keeps the row
/// but lives in another database (another OID), so it is another instance.
/// With it comes the tombstone's `closed_login`: the login that closed
/// (`session_user`), answered as `closed_by`.
const LEDGER_ID: &str = r#"
CREATE TABLE IF NOT EXISTS recon_ledger (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE recon_gate ADD COLUMN IF NOT EXISTS closed_login text;
INSERT INTO recon_ledger (id)
    VALUES (md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text))
    ON CONFLICT (one) DO NOTHING;
"#;

/// The trigger that refuses a write for a closed operation.
const GATE_TRIGGER: &str = r#"
CREATE OR REPLACE FUNCTION recon_effects_gate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM recon_gate
        WHERE workspace = NEW.workspace AND op_id = NEW.op_id AND closed_at IS NULL
        FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'operation % is closed', NEW.op_id USING ERRCODE = 'RC001';
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS recon_effects_gate ON recon_effects;
CREATE TRIGGER recon_effects_gate BEFORE INSERT ON recon_effects
    FOR EACH ROW EXECUTE FUNCTION recon_effects_gate();
"#;

/// The ledger, connected on first use (by `describe` too: its instance is
/// read from the server).
pub struct PgLedger {
    /// Where the ledger is and how to reach it (its `sslmode` and files).
    url: DatabaseUrl,
    /// The URL's settings with this process's name added.
    config: postgres::Config,
    client: Option<Client>,
    /// The role of each verb, read once connected: `None` for a ledger
    /// made without roles (no `init`), where no verb checks any.
    roles: Option<HashMap<String, String>>,
    /// The verbs this connection's login was found to hold the role of.
    permitted: Vec<&'static str>,
}

/// The most operations one query or close of a batch may carry.
pub const BATCH: u32 = 500;

/// What this receiver declares: it can close, and a read of its table is
/// complete and authoritative (the table is where its effects live). Its
/// `instance` ([`PgLedger::instance`]) names the ledger itself: the id
/// made once inside its schema, with the database's and the schema's OIDs.
pub fn description(instance: String) -> Description {
    Description {
        instance: Some(instance),
        name: "recon-pg-ledger".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        can_close: true,
        query: Ceiling {
            complete: true,
            authoritative: true,
        },
        mandatory: Vec::new(),
        session: true,
        batch: Some(BATCH),
    }
}

/// The instance of a ledger: its id, its database's OID and its schema's
/// OID, hashed, so another database or schema, or a restored copy (the
/// same id in a database with another OID), is another instance.
pub fn instance_of(ledger_id: &str, database_oid: i64, schema_oid: i64) -> String {
    let store = format!("{ledger_id}|{database_oid}|{schema_oid}");
    let digest = recon::audit::sha256_hex(store.as_bytes());
    format!("recon-pg-ledger:{}", &digest[..32])
}

/// A PostgreSQL error in recon's terms: `unavailable` when the server
/// cannot be reached or is going away, `internal` otherwise.
pub(crate) fn failed(during: &str, e: postgres::Error) -> Error {
    let unreachable = match e.code() {
        None => true,
        Some(code) => {
            code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                    SqlState::INVALID_CATALOG_NAME,
                ]
                .contains(code)
        }
    };
    let message = format!("PostgreSQL, {during}: {}", postgres_error_detail(&e));
    if unreachable {
        StoreError::Unavailable(message).into()
    } else {
        StoreError::Receiver(message).into()
    }
}

fn closed_refusal(op_id: &str) -> Error {
    Refusal::OperationClosed(op_id.to_string()).into()
}

fn effect_of(op_id: &str, row: &Row) -> Result<Effect> {
    let seq: i64 = row.get(0);
    let payload: String = row.get(2);
    Ok(Effect {
        effect_id: format!("pgfx-{seq:06}"),
        op_id: op_id.to_string(),
        action_kind: row.get(1),
        payload: serde_json::from_str(&payload)
            .map_err(|e| StoreError::Corrupt(format!("recon_effects row {seq}: payload: {e}")))?,
        compensates_effect_id: row.get(3),
    })
}

/// Every effect of the operation, in the order they were written, read by
/// one statement of `tx` (so with one snapshot).
fn effects(tx: &mut Transaction<'_>, workspace: &str, op_id: &str) -> Result<Vec<Effect>> {
    tx.query(
        "SELECT seq, action_kind, payload, compensates_effect_id \
         FROM recon_effects WHERE workspace = $1 AND op_id = $2 ORDER BY seq",
        &[&workspace, &op_id],
    )
    .map_err(|e| failed("reading effects", e))?
    .iter()
    .map(|row| effect_of(op_id, row))
    .collect()
}

fn snapshot(op_id: &str, matches: Vec<Effect>, closed: Option<Option<String>>) -> Snapshot {
    Snapshot {
        op_id: op_id.to_string(),
        matches,
        complete: true,
        authoritative: true,
        closed: closed.is_some(),
        closed_by: closed.flatten(),
    }
}

impl PgLedger {
    pub fn new(url: DatabaseUrl, invocation: Invocation) -> Self {
        let mut config = url.config().clone();
        let word = match invocation {
            Invocation::Call(verb) => verb.as_str(),
            Invocation::Session => "session",
        };
        config
            .application_name(&format!("recon-pg-ledger {word}"))
            .connect_timeout(CONNECT_TIMEOUT);
        PgLedger {
            url,
            config,
            client: None,
            roles: None,
            permitted: Vec::new(),
        }
    }

    /// The connection, opened (and the schema created) on first use.
    fn client(&mut self) -> Result<&mut Client> {
        if self.client.is_none() {
            let mut client = self.url.connect(&self.config).map_err(|e| match e {
                ConnectError::Postgres(e) => failed("connecting", e),
                // TLS settings that cannot be used: this host cannot reach
                // the ledger until they are mended.
                ConnectError::Settings(why) => {
                    StoreError::Unavailable(format!("PostgreSQL, connecting: {why}")).into()
                }
            })?;
            ensure_schema(&mut client)?;
            self.roles = roles::load(&mut client)?;
            self.permitted.clear();
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::Receiver("no connection".into()).into())
    }

    /// Creates the operation's gate row if it is missing, in a transaction
    /// of its own that commits at once (see the module docs for why).
    fn ensure_gate(&mut self, workspace: &str, op_id: &str) -> Result<()> {
        self.client()?
            .execute(
                "INSERT INTO recon_gate (workspace, op_id) VALUES ($1, $2) \
                 ON CONFLICT (workspace, op_id) DO NOTHING",
                &[&workspace, &op_id],
            )
            .map_err(|e| failed("creating the gate row", e))?;
        Ok(())
    }

    /// The ledger's instance, read from the server: its id row, the
    /// database's OID and the OID of the schema its tables are in.
    fn instance(&mut self) -> Result<String> {
        let row = self
            .client()?
            .query_one(
                "SELECT l.id, d.oid::bigint, c.relnamespace::bigint \
                 FROM recon_ledger l, pg_database d, pg_class c \
                 WHERE d.datname = current_database() AND c.oid = to_regclass('recon_ledger')",
                &[],
            )
            .map_err(|e| failed("reading the ledger's id", e))?;
        Ok(instance_of(
            &row.get::<_, String>(0),
            row.get(1),
            row.get(2),
        ))
    }

    /// Refuses `verb` (`unsupported`, naming the role) to a login that is
    /// not a member of its role, on a ledger made with roles; `describe`
    /// needs any of them. Checked once per connection and verb.
    fn permit(&mut self, verb: &'static str) -> Result<()> {
        self.client()?;
        let Some(roles) = &self.roles else {
            return Ok(());
        };
        if self.permitted.contains(&verb) {
            return Ok(());
        }
        let mut needed: Vec<String> = match roles.get(verb) {
            Some(role) => vec![role.clone()],
            None => roles.values().cloned().collect(),
        };
        needed.sort();
        let client = self.client()?;
        if roles::member_of_any(client, &needed)? {
            self.permitted.push(verb);
            return Ok(());
        }
        let login: String = client
            .query_one("SELECT session_user::text", &[])
            .map_err(|e| failed("reading the login", e))?
            .get(0);
        let role = needed.join(" or ");
        Err(StoreError::ReceiverUnsupported(format!(
            "{verb} on this ledger needs the role {role}, which the login {login} does not hold \
             (GRANT {role} TO {login})"
        ))
        .into())
    }

    fn read_committed(&mut self) -> Result<Transaction<'_>> {
        self.client()?
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .map_err(|e| failed("beginning", e))
    }
}

/// Every effect of each of `op_ids`, by op id, in the order they were
/// written, read by one statement of `tx` (so with one snapshot).
fn effects_of_many(
    tx: &mut Transaction<'_>,
    workspace: &str,
    op_ids: &[String],
) -> Result<HashMap<String, Vec<Effect>>> {
    let rows = tx
        .query(
            "SELECT seq, action_kind, payload, compensates_effect_id, op_id \
             FROM recon_effects WHERE workspace = $1 AND op_id = ANY($2) ORDER BY seq",
            &[&workspace, &op_ids],
        )
        .map_err(|e| failed("reading effects", e))?;
    let mut matches: HashMap<String, Vec<Effect>> = HashMap::new();
    for row in &rows {
        let op_id: String = row.get(4);
        let effect = effect_of(&op_id, row)?;
        matches.entry(op_id).or_default().push(effect);
    }
    Ok(matches)
}

/// The closed operations among `op_ids`, each with the login that closed
/// it where the tombstone records one, read by one statement of `tx`.
fn closed_of_many(
    tx: &mut Transaction<'_>,
    workspace: &str,
    op_ids: &[String],
) -> Result<HashMap<String, Option<String>>> {
    Ok(tx
        .query(
            "SELECT op_id, closed_login FROM recon_gate \
             WHERE workspace = $1 AND op_id = ANY($2) AND closed_at IS NOT NULL",
            &[&workspace, &op_ids],
        )
        .map_err(|e| failed("reading the gate rows", e))?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect())
}

/// One snapshot per id of `op_ids`, in order, from the effects read.
fn snapshots(
    op_ids: &[String],
    mut matches: HashMap<String, Vec<Effect>>,
    closed: &HashMap<String, Option<String>>,
) -> Vec<Snapshot> {
    op_ids
        .iter()
        .map(|id| {
            snapshot(
                id,
                matches.remove(id).unwrap_or_default(),
                closed.get(id).cloned(),
            )
        })
        .collect()
}

impl PgLedger {
    fn read_many(&mut self, workspace: &str, op_ids: &[String]) -> Result<Vec<Snapshot>> {
        let mut tx = self
            .client()?
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| failed("beginning", e))?;
        let closed = closed_of_many(&mut tx, workspace, op_ids)?;
        let matches = effects_of_many(&mut tx, workspace, op_ids)?;
        tx.commit().map_err(|e| failed("ending the read", e))?;
        Ok(snapshots(op_ids, matches, &closed))
    }

    /// [`Receiver::close`] for many operations in one transaction, by the
    /// same argument (see the module's comment): the gate rows are created
    /// in a short transaction of their own, then locked `FOR UPDATE` in op
    /// id order (so two batches that share operations never deadlock),
    /// marked closed where they were open (a closed one keeps its first
    /// closer), and their effects read by a later statement, whose fresh
    /// snapshot sees every apply that held a share lock.
    fn close_many(
        &mut self,
        workspace: &str,
        op_ids: &[String],
        authorized_by: &str,
    ) -> Result<Vec<Snapshot>> {
        let mut sorted = op_ids.to_vec();
        sorted.sort();
        sorted.dedup();
        self.client()?
            .execute(
                "INSERT INTO recon_gate (workspace, op_id) \
                 SELECT $1, id FROM unnest($2::text[]) AS id ORDER BY id \
                 ON CONFLICT (workspace, op_id) DO NOTHING",
                &[&workspace, &sorted],
            )
            .map_err(|e| failed("creating the gate rows", e))?;
        let mut tx = self.read_committed()?;
        tx.query(
            "SELECT op_id FROM recon_gate WHERE workspace = $1 AND op_id = ANY($2) \
             ORDER BY op_id FOR UPDATE",
            &[&workspace, &sorted],
        )
        .map_err(|e| failed("locking the gate rows", e))?;
        drill::hold(HoldPoint::CloseAfterGateLock);
        tx.execute(
            "UPDATE recon_gate SET closed_at = now(), closed_by = $3, closed_login = session_user \
             WHERE workspace = $1 AND op_id = ANY($2) AND closed_at IS NULL",
            &[&workspace, &sorted, &authorized_by],
        )
        .map_err(|e| failed("closing", e))?;
        let matches = effects_of_many(&mut tx, workspace, &sorted)?;
        let closed = closed_of_many(&mut tx, workspace, &sorted)?;
        tx.commit().map_err(|e| failed("committing the close", e))?;
        drill::after_commit(Commit::Close);
        Ok(snapshots(op_ids, matches, &closed))
    }
}

/// What the schema holds: the two tables, whether they are scoped by
/// workspace, and whether the ledger has its id.
struct Tables {
    present: bool,
    scoped: bool,
    identified: bool,
}

/// Read from the catalog, which every login may read (`information_schema`
/// shows a login only the columns it has rights on, so a login of a
/// ledger made with roles would see no `workspace` column).
///
/// Every answer is read from `pg_attribute` under the statement's one
/// snapshot: `to_regclass` alone looks names up in the catalog as it is
/// now, so a table committed by another process after the statement began
/// would count as present while its columns were not yet visible, and a
/// ledger being created at that moment would look like one that predates
/// workspace scoping.
fn tables(client: &mut impl GenericClient) -> Result<Tables> {
    let row = client
        .query_one(
            "WITH cols AS (SELECT attrelid, attname FROM pg_attribute \
                 WHERE attnum > 0 AND NOT attisdropped AND attrelid IN \
                 (to_regclass('recon_effects'), to_regclass('recon_gate'), \
                  to_regclass('recon_ledger'))) \
             SELECT EXISTS (SELECT 1 FROM cols WHERE attrelid = to_regclass('recon_effects')) \
                AND EXISTS (SELECT 1 FROM cols WHERE attrelid = to_regclass('recon_gate')), \
             EXISTS (SELECT 1 FROM cols WHERE attrelid = to_regclass('recon_gate') \
                       AND attname = 'workspace'), \
             EXISTS (SELECT 1 FROM cols WHERE attrelid = to_regclass('recon_ledger'))",
            &[],
        )
        .map_err(|e| failed("checking the tables", e))?;
    Ok(Tables {
        present: row.get(0),
        scoped: row.get(1),
        identified: row.get(2),
    })
}

/// Creates what is missing, once: under an advisory lock, after looking
/// again, so a ledger that another process made meanwhile is left alone
/// (its DDL would wait on every writer's lock, and a writer held at a
/// drill point would never let it through).
pub(crate) fn ensure_schema(client: &mut Client) -> Result<()> {
    let found = tables(client)?;
    if found.present && !found.scoped {
        return Err(StoreError::Receiver(
            "recon_gate and recon_effects predate workspace scoping (recon-pg-ledger 0.1): \
             their rows name no workspace, so no read of them proves anything; \
             use a new database or schema for this ledger"
                .into(),
        )
        .into());
    }
    if found.present && found.identified {
        return Ok(());
    }
    let mut tx = client.transaction().map_err(|e| failed("beginning", e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('recon-pg-ledger schema'))",
        &[],
    )
    .map_err(|e| failed("locking the schema", e))?;
    let found = tables(&mut tx)?;
    // A ledger made before it had an id gets one now (its first describe).
    let script = match (found.present, found.identified) {
        (true, true) => String::new(),
        (true, false) => LEDGER_ID.to_string(),
        (false, _) => format!("{SCHEMA}{GATE_TRIGGER}{TOMBSTONE_TRIGGER}{LEDGER_ID}"),
    };
    tx.batch_execute(&script)
        .map_err(|e| failed("creating the tables", e))?;
    tx.commit().map_err(|e| failed("creating the tables", e))
}

impl Receiver for PgLedger {
    /// Connects: the instance is the ledger's own, read from the server
    /// (its id, created with the tables on first use).
    fn describe(&mut self) -> Result<Description> {
        self.permit("describe")?;
        Ok(description(self.instance()?))
    }

    fn apply(&mut self, workspace: &str, request: &EffectRequest<'_>) -> Result<Effect> {
        self.permit("apply")?;
        let op_id = request.op_id;
        self.ensure_gate(workspace, op_id)?;
        let mut tx = self.read_committed()?;
        let open: Option<bool> = tx
            .query_opt(
                "SELECT closed_at IS NULL FROM recon_gate \
                 WHERE workspace = $1 AND op_id = $2 FOR SHARE",
                &[&workspace, &op_id],
            )
            .map_err(|e| failed("locking the gate row", e))?
            .map(|row| row.get(0));
        if open != Some(true) {
            return Err(closed_refusal(op_id));
        }
        drill::hold(HoldPoint::ApplyAfterGateLock);
        let payload = canonical_json(request.payload);
        let row = tx
            .query_one(
                "INSERT INTO recon_effects \
                 (workspace, op_id, action_kind, payload, compensates_effect_id) \
                 VALUES ($1, $2, $3, $4, $5) \
                 RETURNING seq, action_kind, payload, compensates_effect_id",
                &[
                    &workspace,
                    &op_id,
                    &request.action_kind,
                    &payload,
                    &request.compensates_effect_id,
                ],
            )
            .map_err(|e| match e.code() {
                Some(code) if code.code() == CLOSED_SQLSTATE => closed_refusal(op_id),
                _ => failed("inserting the effect", e),
            })?;
        let effect = effect_of(op_id, &row)?;
        tx.commit()
            .map_err(|e| failed("committing the effect", e))?;
        drill::after_commit(Commit::Apply);
        Ok(effect)
    }

    fn query(&mut self, workspace: &str, op_id: &str) -> Result<Snapshot> {
        self.permit("query")?;
        // One snapshot for both reads: a `closed` seen here comes with
        // every effect written before the close.
        let mut tx = self
            .client()?
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| failed("beginning", e))?;
        let ids = [op_id.to_string()];
        let mut closed = closed_of_many(&mut tx, workspace, &ids)?;
        let matches = effects(&mut tx, workspace, op_id)?;
        tx.commit().map_err(|e| failed("ending the read", e))?;
        Ok(snapshot(op_id, matches, closed.remove(op_id)))
    }

    /// A batch read in one snapshot and two statements: the gate rows and
    /// the effects of every op id (`= ANY($2)`), split per operation. When
    /// that fails (a login without the query role too), each operation is
    /// read alone, so each answer carries its own error.
    fn query_batch(&mut self, workspace: &str, op_ids: &[String]) -> Vec<Result<Snapshot>> {
        let read = self
            .permit("query")
            .and_then(|()| self.read_many(workspace, op_ids));
        match read {
            Ok(snapshots) => snapshots.into_iter().map(Ok).collect(),
            Err(_) => op_ids.iter().map(|id| self.query(workspace, id)).collect(),
        }
    }

    /// One transaction for the batch; should it fail, each operation is
    /// closed on its own (a close is idempotent, so one the batch did
    /// commit answers its snapshot again).
    fn close_batch(
        &mut self,
        workspace: &str,
        op_ids: &[String],
        authorized_by: &str,
    ) -> Vec<Result<Snapshot>> {
        let closed = self
            .permit("close")
            .and_then(|()| self.close_many(workspace, op_ids, authorized_by));
        match closed {
            Ok(snapshots) => snapshots.into_iter().map(Ok).collect(),
            Err(_) => (op_ids.iter())
                .map(|id| self.close(workspace, id, authorized_by))
                .collect(),
        }
    }

    fn close(&mut self, workspace: &str, op_id: &str, authorized_by: &str) -> Result<Snapshot> {
        self.permit("close")?;
        self.ensure_gate(workspace, op_id)?;
        let mut tx = self.read_committed()?;
        // Waits until every apply holding the share lock has ended.
        let already: bool = tx
            .query_one(
                "SELECT closed_at IS NOT NULL FROM recon_gate \
                 WHERE workspace = $1 AND op_id = $2 FOR UPDATE",
                &[&workspace, &op_id],
            )
            .map_err(|e| failed("locking the gate row", e))?
            .get(0);
        drill::hold(HoldPoint::CloseAfterGateLock);
        if !already {
            tx.execute(
                "UPDATE recon_gate SET closed_at = now(), closed_by = $3, \
                 closed_login = session_user WHERE workspace = $1 AND op_id = $2",
                &[&workspace, &op_id, &authorized_by],
            )
            .map_err(|e| failed("closing", e))?;
        }
        // A later statement, so a fresh snapshot: every apply that held the
        // share lock has committed or rolled back by now.
        let matches = effects(&mut tx, workspace, op_id)?;
        let ids = [op_id.to_string()];
        let closed = closed_of_many(&mut tx, workspace, &ids)?.remove(op_id);
        tx.commit().map_err(|e| failed("committing the close", e))?;
        drill::after_commit(Commit::Close);
        Ok(snapshot(op_id, matches, Some(closed.flatten())))
    }
}
