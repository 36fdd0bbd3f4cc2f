//! The PostgreSQL outbox's schema, and `recon db init`.
//!
//! The tables mirror the SQLite outbox's (`store::sender`) at the same
//! schema version: every table, column name and order, CHECK, index and
//! append-only trigger, so `verify`'s projection can read both the same
//! way. What differs is what PostgreSQL needs said:
//! - every text is `text COLLATE "C"`, so keys and the texts the audit
//!   compares and orders compare by their bytes, as SQLite's do, whatever
//!   the database's locale; entries and payloads are `text`, never
//!   `jsonb`, which would reorder their keys and break their hashes;
//! - integers are `bigint`, SQLite's 0/1 flags `smallint` with the same
//!   CHECK; the foreign keys SQLite declares before their table exists
//!   are added once it does;
//! - `journal_head (id = 1, seq, hash)`: the one row every write
//!   transaction locks `FOR UPDATE` first (the analogue of `BEGIN
//!   IMMEDIATE`), and a `BEFORE INSERT` trigger on `journal` that refuses
//!   an entry that does not follow the journal's last (its seq one past
//!   that entry's, read at the end of the key, or 1 on an empty journal),
//!   whose `prev_hash` is not that entry's hash, or whose hash is not
//!   SHA-256(prev_hash || entry) in lowercase hex (`audit::link_hash`);
//!   a statement trigger then moves the head to the last entry the
//!   statement appended. Whatever writes (recon, or a person with `psql`),
//!   the chain cannot fork or skip; the head itself moves only through
//!   that trigger, forward, to an entry of the journal;
//! - the append-only tables also refuse `TRUNCATE`, which skips row
//!   triggers;
//! - the schema version, the application id (SQLite's `application_id`,
//!   the same number) and the workspace id live in `meta`.
//!
//! The refusals carry SQLSTATEs of their own: [`CHAIN_REFUSED`] and
//! [`APPEND_ONLY`].

use super::{connect, db_error, problem_at, roles, DatabaseUrl};
use crate::audit::meta::{CREATION_COMPLETE, WORKSPACE_ID};
use crate::audit::GENESIS_HASH;
use crate::clock::SystemClock;
use crate::domain::team::{Act, TeamRole, DEFAULT_ROLES_PREFIX};
use crate::domain::Refusal;
use crate::error::{DatabaseProblem, StoreError};
use crate::settings::OpenOptions;
use crate::store::{identity, sender, SCHEMA_VERSION};
use postgres::Transaction;

/// The SQLSTATE of an entry that does not follow the journal's head, and
/// of a change to the head that is not an append.
pub const CHAIN_REFUSED: &str = "RCJ01";

/// The SQLSTATE of a change to an append-only table.
pub const APPEND_ONLY: &str = "RCA01";

/// The keys of `meta` that say what the database is.
pub(super) const APPLICATION_KEY: &str = "application_id";
pub(super) const VERSION_KEY: &str = "schema_version";

/// The tables, their indexes and the functions of their triggers.
const TABLES: &str = r#"
CREATE TABLE meta (key text COLLATE "C" PRIMARY KEY, value text COLLATE "C" NOT NULL);
CREATE TABLE operations (
    op_id text COLLATE "C" PRIMARY KEY,
    kind text COLLATE "C" NOT NULL CHECK (kind IN ('original', 'compensation')),
    action_kind text COLLATE "C" NOT NULL,
    payload text COLLATE "C" NOT NULL,
    compensates_effect_id text COLLATE "C",
    compensates_op_id text COLLATE "C" REFERENCES operations(op_id),
    state text COLLATE "C" NOT NULL
        CHECK (state IN ('prepared', 'unknown', 'confirmed', 'not_applied')),
    version bigint NOT NULL DEFAULT 1 CHECK (version >= 1),
    confirmed_effect_id text COLLATE "C",
    receiver text COLLATE "C" NOT NULL,
    created_at text COLLATE "C" NOT NULL,
    updated_at text COLLATE "C" NOT NULL,
    dispatch_count bigint NOT NULL DEFAULT 0 CHECK (dispatch_count >= 0),
    last_dispatched_at text COLLATE "C",
    latest_observation bigint,
    latest_verdict text COLLATE "C" CHECK (latest_verdict IN ('duplicate_matches',
        'payload_mismatch', 'action_scope_mismatch', 'unique_exact_match',
        'exact_match_existence_only', 'terminal_absence', 'inconclusive')),
    escalation bigint,
    receiver_id bigint,
    contradiction bigint,
    surplus_effect_ids text COLLATE "C",
    CHECK ((kind = 'original') = (compensates_effect_id IS NULL)),
    CHECK ((kind = 'original') = (compensates_op_id IS NULL)),
    CHECK ((latest_observation IS NULL) = (latest_verdict IS NULL))
);
CREATE INDEX operations_by_state ON operations(state, op_id);
CREATE INDEX operations_by_state_age ON operations(state, updated_at, op_id);
CREATE INDEX operations_by_verdict ON operations(latest_verdict, op_id);
CREATE INDEX operations_by_verdict_age ON operations(latest_verdict, updated_at, op_id);
CREATE INDEX operations_by_age ON operations(updated_at, op_id);
CREATE INDEX operations_escalated ON operations(op_id) WHERE escalation IS NOT NULL;
CREATE INDEX operations_escalated_by_age ON operations(updated_at, op_id)
    WHERE escalation IS NOT NULL;

CREATE TABLE state_counts (state text COLLATE "C" PRIMARY KEY, n bigint NOT NULL);
INSERT INTO state_counts (state, n)
VALUES ('prepared', 0), ('unknown', 0), ('confirmed', 0), ('not_applied', 0);
CREATE FUNCTION recon_state_counts_insert() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE @.state_counts SET n = n + 1 WHERE state = NEW.state;
    RETURN NULL;
END
$$;
CREATE TRIGGER state_counts_insert AFTER INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION recon_state_counts_insert();
CREATE FUNCTION recon_state_counts_update() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE @.state_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE @.state_counts SET n = n + 1 WHERE state = NEW.state;
    RETURN NULL;
END
$$;
CREATE TRIGGER state_counts_update AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state <> NEW.state) EXECUTE FUNCTION recon_state_counts_update();

CREATE TABLE journal (
    seq bigint PRIMARY KEY,
    kind text COLLATE "C" NOT NULL CHECK (kind IN ('prepared', 'dispatched', 'receipt',
        'observed', 'closed', 'decided', 'approved', 'noted', 'escalated', 'deescalated',
        'receiver_registered', 'receiver_updated', 'receiver_removed', 'acknowledged',
        'call_failed', 'close_requested', 'upgraded', 'settings')),
    op_id text COLLATE "C",
    entry text COLLATE "C" NOT NULL,
    prev_hash text COLLATE "C" NOT NULL,
    hash text COLLATE "C" NOT NULL
);
CREATE INDEX journal_by_op ON journal(op_id, seq);
CREATE TABLE journal_head (
    id smallint PRIMARY KEY CHECK (id = 1),
    seq bigint NOT NULL CHECK (seq >= 0),
    hash text COLLATE "C" NOT NULL
);
@WRITERS@
CREATE FUNCTION recon_journal_follows_head() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last_seq bigint;
    last_hash text;
    w @.recon_writers;
BEGIN
@JOURNAL_CHECK@
    -- The journal's last entry, read at the end of its key (an earlier
    -- row of this statement included, which a row trigger sees); the head
    -- row's genesis before the first.
    SELECT j.seq, j.hash INTO last_seq, last_hash FROM @.journal j ORDER BY j.seq DESC LIMIT 1;
    IF NOT FOUND THEN
        SELECT h.seq, h.hash INTO last_seq, last_hash FROM @.journal_head h WHERE h.id = 1;
    END IF;
    IF NEW.seq IS DISTINCT FROM last_seq + 1 THEN
        RAISE EXCEPTION 'journal entry % does not follow the head: the next seq is %',
            NEW.seq, last_seq + 1 USING ERRCODE = 'RCJ01';
    END IF;
    IF NEW.prev_hash IS DISTINCT FROM last_hash THEN
        RAISE EXCEPTION 'journal entry % does not chain to the head: its prev_hash is not the hash of entry %',
            NEW.seq, last_seq USING ERRCODE = 'RCJ01';
    END IF;
    IF NEW.hash IS DISTINCT FROM
            encode(sha256(convert_to(NEW.prev_hash || NEW.entry, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'journal entry %: its hash is not SHA-256(prev_hash || entry)',
            NEW.seq USING ERRCODE = 'RCJ01';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER journal_follows_head BEFORE INSERT ON journal
    FOR EACH ROW EXECUTE FUNCTION recon_journal_follows_head();
-- The head moves once per statement, to the last entry it appended: one
-- update of the head row however many rows the statement wrote (a row's
-- update each would lengthen the row's chain of versions in the
-- transaction, and every read of it, with each entry).
CREATE FUNCTION recon_journal_head_follows() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last_seq bigint;
    last_hash text;
BEGIN
    SELECT a.seq, a.hash INTO last_seq, last_hash FROM appended a ORDER BY a.seq DESC LIMIT 1;
    IF FOUND THEN
        UPDATE @.journal_head SET seq = last_seq, hash = last_hash WHERE id = 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER journal_head_follows AFTER INSERT ON journal
    REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION recon_journal_head_follows();
CREATE FUNCTION recon_journal_head_moves() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last_seq bigint;
    last_hash text;
BEGIN
    -- Depth 2: the update comes from the journal's own trigger above, to
    -- the journal's last entry.
    SELECT j.seq, j.hash INTO last_seq, last_hash FROM @.journal j ORDER BY j.seq DESC LIMIT 1;
    IF pg_trigger_depth() < 2 OR NEW.id <> OLD.id OR NEW.seq <= OLD.seq
            OR (NEW.seq, NEW.hash) IS DISTINCT FROM (last_seq, last_hash) THEN
        RAISE EXCEPTION 'the journal head moves only by appending an entry to the journal'
            USING ERRCODE = 'RCJ01';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER journal_head_moves BEFORE UPDATE ON journal_head
    FOR EACH ROW EXECUTE FUNCTION recon_journal_head_moves();
CREATE FUNCTION recon_refuse_change() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'RCA01';
END
$$;

CREATE TABLE evidence (
    seq bigint PRIMARY KEY,
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    source text COLLATE "C" NOT NULL CHECK (source IN ('receipt', 'review', 'policy')),
    reviewer text COLLATE "C",
    decision text COLLATE "C" NOT NULL CHECK (decision IN ('confirmed', 'not_applied')),
    verdict text COLLATE "C",
    snapshot text COLLATE "C" NOT NULL,
    from_version bigint NOT NULL,
    to_version bigint NOT NULL,
    effect_id text COLLATE "C",
    receiver text COLLATE "C" NOT NULL,
    receiver_describe_sha256 text COLLATE "C" NOT NULL,
    response_sha256 text COLLATE "C" NOT NULL,
    journal_seq bigint NOT NULL UNIQUE REFERENCES journal(seq),
    recorded_at text COLLATE "C" NOT NULL,
    receiver_id bigint,
    receiver_version bigint,
    policy text COLLATE "C" CHECK (policy IN ('provable')),
    close_seq bigint,
    CHECK ((source = 'policy') = (policy IS NOT NULL))
);
CREATE INDEX evidence_by_op ON evidence(op_id, seq);

CREATE TABLE closes (
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    receiver text COLLATE "C" NOT NULL,
    authorized_by text COLLATE "C" NOT NULL,
    journal_seq bigint PRIMARY KEY REFERENCES journal(seq),
    closed_at text COLLATE "C" NOT NULL
);
CREATE INDEX closes_by_op ON closes(op_id, journal_seq);

CREATE TABLE observations (
    seq bigint PRIMARY KEY REFERENCES journal(seq),
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    receiver text COLLATE "C" NOT NULL,
    observed_by text COLLATE "C" NOT NULL,
    observed_at text COLLATE "C" NOT NULL,
    verdict text COLLATE "C" NOT NULL,
    complete smallint NOT NULL CHECK (complete IN (0, 1)),
    authoritative smallint NOT NULL CHECK (authoritative IN (0, 1)),
    closed smallint NOT NULL CHECK (closed IN (0, 1)),
    matches bigint NOT NULL CHECK (matches >= 0),
    receiver_describe_sha256 text COLLATE "C" NOT NULL,
    response_sha256 text COLLATE "C" NOT NULL
);
CREATE INDEX observations_by_op ON observations(op_id, seq);
CREATE TABLE notes (
    seq bigint PRIMARY KEY REFERENCES journal(seq),
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    noted_by text COLLATE "C" NOT NULL,
    noted_at text COLLATE "C" NOT NULL,
    text text COLLATE "C" NOT NULL
);
CREATE INDEX notes_by_op ON notes(op_id, seq);
CREATE TABLE escalations (
    seq bigint PRIMARY KEY REFERENCES journal(seq),
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    action text COLLATE "C" NOT NULL CHECK (action IN ('escalate', 'deescalate')),
    acted_by text COLLATE "C" NOT NULL,
    acted_at text COLLATE "C" NOT NULL,
    reason text COLLATE "C" NOT NULL
);
CREATE INDEX escalations_by_op ON escalations(op_id, seq);
ALTER TABLE operations
    ADD FOREIGN KEY (latest_observation) REFERENCES observations(seq),
    ADD FOREIGN KEY (escalation) REFERENCES escalations(seq),
    ADD FOREIGN KEY (contradiction) REFERENCES observations(seq);
CREATE INDEX operations_contradicted ON operations(op_id) WHERE contradiction IS NOT NULL;
-- Kept duplicates (SPEC 14): `ops --surplus` and the surplus metric.
CREATE INDEX operations_with_surplus ON operations(op_id) WHERE surplus_effect_ids IS NOT NULL;
CREATE TABLE acknowledgements (
    seq bigint PRIMARY KEY REFERENCES journal(seq),
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    acknowledged_by text COLLATE "C" NOT NULL,
    acknowledged_at text COLLATE "C" NOT NULL,
    reason text COLLATE "C" NOT NULL
);
CREATE INDEX acknowledgements_by_op ON acknowledgements(op_id, seq);
CREATE TABLE call_failures (
    seq bigint PRIMARY KEY REFERENCES journal(seq),
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    verb text COLLATE "C" NOT NULL CHECK (verb IN ('apply', 'query', 'close')),
    receiver text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL,
    detail text COLLATE "C" NOT NULL,
    exit_code bigint,
    stderr text COLLATE "C" NOT NULL,
    failed_at text COLLATE "C" NOT NULL
);
CREATE INDEX call_failures_by_op ON call_failures(op_id, seq);
CREATE TABLE close_requests (
    seq bigint PRIMARY KEY REFERENCES journal(seq),
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    receiver text COLLATE "C" NOT NULL,
    authorized_by text COLLATE "C" NOT NULL,
    requested_at text COLLATE "C" NOT NULL
);
CREATE INDEX close_requests_by_op ON close_requests(op_id, seq);

CREATE TABLE compensation_approvals (
    original_op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    effect_id text COLLATE "C" NOT NULL,
    approved_version bigint NOT NULL,
    approver text COLLATE "C" NOT NULL,
    compensation_op_id text COLLATE "C" NOT NULL UNIQUE,
    action_kind text COLLATE "C" NOT NULL,
    payload text COLLATE "C" NOT NULL,
    UNIQUE (original_op_id, effect_id)
);

CREATE TABLE dispatch_log (
    seq bigint PRIMARY KEY,
    op_id text COLLATE "C" NOT NULL REFERENCES operations(op_id),
    from_version bigint NOT NULL
);
CREATE INDEX dispatch_log_by_op ON dispatch_log(op_id, from_version);

CREATE TABLE receivers (
    name text COLLATE "C" PRIMARY KEY,
    program text COLLATE "C" NOT NULL,
    args text COLLATE "C" NOT NULL,
    timeout_ms bigint NOT NULL CHECK (timeout_ms > 0),
    describe text COLLATE "C" NOT NULL,
    describe_sha256 text COLLATE "C" NOT NULL,
    builtin smallint NOT NULL DEFAULT 0 CHECK (builtin IN (0, 1)),
    env text COLLATE "C" NOT NULL DEFAULT '[]',
    id bigint NOT NULL UNIQUE,
    version bigint NOT NULL DEFAULT 1 CHECK (version >= 1)
);
CREATE TABLE routes (
    action_kind text COLLATE "C" PRIMARY KEY,
    receiver text COLLATE "C" NOT NULL REFERENCES receivers(name)
);
CREATE INDEX routes_by_receiver ON routes(receiver);
CREATE INDEX operations_by_receiver ON operations(receiver, state);
-- `ops --receiver` (with or without a state) in either order: one range each.
CREATE INDEX operations_by_receiver_state ON operations(receiver, state, op_id);
CREATE INDEX operations_by_receiver_state_age ON operations(receiver, state, updated_at, op_id);
CREATE INDEX operations_by_receiver_op ON operations(receiver, op_id);
CREATE INDEX operations_by_receiver_age ON operations(receiver, updated_at, op_id);

-- Live consoles (SPEC 10): each statement that appends entries wakes every
-- session that LISTENs on recon_journal (the console's head watcher), once,
-- with the last seq it appended. A notification lost (a listener
-- reconnecting) costs only the watcher's fallback poll; nothing depends
-- on it.
CREATE FUNCTION recon_journal_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('recon_journal', max(a.seq)::text) FROM notified a HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE TRIGGER journal_notify AFTER INSERT ON journal
    REFERENCING NEW TABLE AS notified
    FOR EACH STATEMENT EXECUTE FUNCTION recon_journal_notify();
"#;

/// The append-only tables (SQLite's, with its messages), and the head.
const APPEND_ONLY_TABLES: [(&str, &str); 10] = [
    ("journal", "the journal is append-only"),
    ("evidence", "evidence is append-only"),
    ("closes", "closes are append-only"),
    ("close_requests", "close requests are append-only"),
    ("call_failures", "call failures are append-only"),
    ("acknowledgements", "acknowledgements are append-only"),
    ("observations", "observations are append-only"),
    ("notes", "notes are append-only"),
    ("escalations", "escalations are append-only"),
    ("journal_head", "the journal head is kept"),
];

/// The whole schema: [`TABLES`], then the append-only triggers, named as
/// SQLite's are (`journal_head` refuses updates through its own trigger,
/// so only its deletes are here).
pub(super) fn ddl(schema: &str) -> String {
    let mut ddl = TABLES.to_string();
    for (table, message) in APPEND_ONLY_TABLES {
        let changes: &[&str] = match table {
            "journal_head" => &["delete", "truncate"],
            _ => &["update", "delete", "truncate"],
        };
        for change in changes {
            let each = match *change {
                "truncate" => "STATEMENT",
                _ => "ROW",
            };
            ddl.push_str(&format!(
                "CREATE TRIGGER {table}_append_only_{change} BEFORE {verb} ON {table}\n    \
                 FOR EACH {each} EXECUTE FUNCTION recon_refuse_change('{message}');\n",
                verb = change.to_uppercase(),
            ));
        }
    }
    ddl.push_str(&format!(
        "INSERT INTO journal_head (id, seq, hash) VALUES (1, 0, '{GENESIS_HASH}');\n"
    ));
    ddl.push_str(&roles::ddl());
    ddl.replace("@WRITERS@", &roles::writers())
        .replace("@JOURNAL_CHECK@", roles::JOURNAL_CHECK)
        .replace("@WRITER@", roles::WRITER)
        .replace(roles::SCHEMA, &format!("{schema}."))
}

/// The names the schema creates (tables, indexes, functions), in the
/// order it creates them: read from the DDL itself, so the two cannot
/// drift.
pub(crate) fn object_names() -> Vec<String> {
    names_created(&["TABLE", "INDEX", "FUNCTION"])
}

/// The names the schema creates of the kinds given (`TABLE`, `INDEX`,
/// `FUNCTION`), in the order it creates them.
pub(super) fn names_created(kinds: &[&str]) -> Vec<String> {
    let ddl = ddl("pg_temp");
    let words: Vec<&str> = ddl.split_whitespace().collect();
    words
        .windows(3)
        .filter(|w| w[0] == "CREATE" && kinds.contains(&w[1]))
        .map(|w| w[2].split('(').next().unwrap_or_default().to_string())
        .collect()
}

/// How the outbox's schema differs from this build's (see
/// `postgres::shape`): recon's tables, everything on them, and their
/// functions; other objects in the same schema are not recon's to judge.
pub(crate) fn schema_differences(
    client: &mut postgres::Client,
    url: &DatabaseUrl,
) -> Result<Vec<crate::audit::SchemaDifference>, StoreError> {
    let tables = names_created(&["TABLE"]);
    let prefix = {
        let mut tx = client
            .build_transaction()
            .read_only(true)
            .start()
            .map_err(|e| db_error(url, "beginning", &e))?;
        roles_prefix(&mut tx, url)?
    };
    let ours = super::shape::Ours {
        ddl: ddl("pg_temp") + &roles::privileges(&tables, &prefix),
        tables,
        functions: names_created(&["FUNCTION"]),
    };
    super::shape::differences(client, url, &ours)
}

/// What `recon db init` found or made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DatabaseInit {
    /// The database, its password redacted.
    pub database: String,
    pub schema_version: i64,
    /// Whether this run created the schema (false: it was there already).
    pub created: bool,
    pub workspace_id: String,
    /// The role that created the outbox: it alone registers receivers.
    pub owner: String,
    /// Whether a compensation's approver must be another role than the one
    /// that recorded the original's confirmation; once set, it stays set.
    pub four_eyes: bool,
    /// The prefix of the outbox's roles, and their names.
    pub roles_prefix: String,
    pub roles: Vec<String>,
}

/// The keys of `meta` for the owner, four eyes and the roles' prefix.
pub(super) const OWNER_KEY: &str = "owner";
pub(super) const FOUR_EYES_KEY: &str = "four_eyes";
pub(super) const ROLES_PREFIX_KEY: &str = "roles_prefix";

/// Creates the outbox's schema, unless the database holds it already;
/// in one transaction, under a transaction-level advisory lock so that two
/// runs at once create it once (the second, after the lock, sees the
/// first's commit). A database at another schema version, holding a
/// partial outbox, or holding objects of recon's names that are not a
/// recon outbox is refused, and nothing is written. A new outbox's roles
/// carry `prefix` (else the default), refused `roles_in_use` when they
/// already serve another database; an existing outbox keeps the prefix it
/// recorded (another is `rule_violation`). Every run (re)creates the roles
/// and grants their privileges (`roles`), and `four_eyes` sets four eyes,
/// which no run unsets.
pub(crate) fn init(
    url: &DatabaseUrl,
    options: OpenOptions,
    four_eyes: bool,
    prefix: Option<&str>,
) -> crate::Result<DatabaseInit> {
    init_as_owner(url, options, four_eyes, prefix).map_err(|e| match e {
        // What the login running db init lacks is a storage failure of
        // db init's (exit 4), not a refused act.
        crate::Error::Store(StoreError::Database {
            url,
            problem: DatabaseProblem::Denied { during, detail, .. },
        }) => StoreError::Database {
            url,
            problem: DatabaseProblem::Failed {
                during,
                detail: format!("permission denied: {detail}"),
            },
        }
        .into(),
        other => other,
    })
}

fn init_as_owner(
    url: &DatabaseUrl,
    options: OpenOptions,
    four_eyes: bool,
    prefix: Option<&str>,
) -> crate::Result<DatabaseInit> {
    let mut client = connect(url, options)?;
    let mut tx = locked_transaction(&mut client, url)?;
    let names = object_names();
    let present = present_objects(&mut tx, url, &names)?;
    let (created, workspace_id, prefix) = if present.is_empty() {
        let prefix = prefix.unwrap_or(DEFAULT_ROLES_PREFIX);
        refuse_roles_in_use(&mut tx, url, prefix)?;
        (true, create(&mut tx, url, prefix)?, prefix.to_string())
    } else if present.iter().any(|name| name == "meta") {
        let workspace_id = existing(&mut tx, url, &names, &present)?;
        let recorded = roles_prefix(&mut tx, url)?;
        if prefix.is_some_and(|given| given != recorded) {
            return Err(Refusal::RuleViolation {
                rule: format!(
                    "the outbox's roles carry the prefix {recorded}, recorded at its creation; \
                     db init on it takes that one or none"
                ),
            }
            .into());
        }
        (false, workspace_id, recorded)
    } else {
        return Err(problem_at(url, DatabaseProblem::Foreign(present.join(", "))).into());
    };
    let grants = roles::grants(&names_created(&["TABLE"]), &prefix);
    tx.batch_execute(&grants).map_err(|e| match e.code() {
        // Not a refused act: what the login running db init lacks.
        Some(code) if *code == postgres::error::SqlState::INSUFFICIENT_PRIVILEGE => problem_at(
            url,
            DatabaseProblem::Failed {
                during: "creating the roles and granting them",
                detail: format!(
                    "{}; db init creates recon's roles once per cluster, which needs \
                     CREATEROLE (or an administrator who runs db init once first)",
                    url.scrub(&super::detail(&e))
                ),
            },
        ),
        _ => db_error(url, "creating the roles and granting them", &e),
    })?;
    if four_eyes {
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ($1, '1') ON CONFLICT (key) DO NOTHING",
            &[&FOUR_EYES_KEY],
        )
        .map_err(|e| db_error(url, "setting four eyes", &e))?;
    }
    let row = tx
        .query_one(
            "SELECT (SELECT value::text FROM meta WHERE key = $1),
                    EXISTS (SELECT 1 FROM meta WHERE key = $2 AND value = '1')",
            &[&OWNER_KEY, &FOUR_EYES_KEY],
        )
        .map_err(|e| db_error(url, "reading meta", &e))?;
    let (owner, four_eyes): (Option<String>, bool) = (row.get(0), row.get(1));
    let login: String = tx
        .query_one("SELECT session_user::text", &[])
        .map_err(|e| db_error(url, "reading the session's login", &e))?
        .get(0);
    super::settings::journal_settings(&mut tx, url, &login, Act::Settings, &SystemClock)?;
    tx.commit().map_err(|e| db_error(url, "committing", &e))?;
    Ok(DatabaseInit {
        database: url.to_string(),
        schema_version: SCHEMA_VERSION,
        created,
        workspace_id,
        owner: owner.unwrap_or_default(),
        four_eyes,
        roles: TeamRole::CREATED.map(|r| r.name_in(&prefix)).to_vec(),
        roles_prefix: prefix,
    })
}

/// Refuses `roles_in_use` when any role of `prefix` already holds
/// privileges on, or owns, objects of another database (SPEC 12).
fn refuse_roles_in_use(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
    prefix: &str,
) -> crate::Result<()> {
    let names: Vec<String> = TeamRole::CREATED.map(|r| r.name_in(prefix)).to_vec();
    let databases: Vec<String> = tx
        .query(roles::ROLES_IN_USE, &[&names])
        .map_err(|e| db_error(url, "reading where the roles serve", &e))?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if databases.is_empty() {
        return Ok(());
    }
    Err(Refusal::RolesInUse {
        prefix: prefix.to_string(),
        databases: databases.join(", "),
    }
    .into())
}

/// The prefix of the outbox's roles, as `meta` records it (an outbox made
/// before the prefix records none, and has the default's).
pub(super) fn roles_prefix(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
) -> Result<String, StoreError> {
    tx.query_one(
        "SELECT coalesce((SELECT value::text FROM meta WHERE key = $1), $2)",
        &[&ROLES_PREFIX_KEY, &DEFAULT_ROLES_PREFIX],
    )
    .map(|row| row.get(0))
    .map_err(|e| db_error(url, "reading the roles' prefix", &e))
}

/// The workspace id of the database's outbox, checked as `recon db init`
/// checks an existing one (this version, every object, recon's own);
/// a database with no `meta` is refused `Uninitialized`, which tells the
/// user to run `recon db init`. Reads only.
pub(crate) fn outbox_id(tx: &mut Transaction<'_>, url: &DatabaseUrl) -> Result<String, StoreError> {
    let names = object_names();
    let present = present_objects(tx, url, &names)?;
    if !present.iter().any(|name| name == "meta") {
        return Err(problem_at(url, DatabaseProblem::Uninitialized));
    }
    existing(tx, url, &names, &present)
}

/// Which of `names` exist in the schema recon creates its tables in (the
/// first of the `search_path`), as relations or functions.
pub(super) fn present_objects(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
    names: &[String],
) -> Result<Vec<String>, StoreError> {
    let rows = tx
        .query(
            "SELECT c.relname::text FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relname::text = ANY($1)
             UNION
             SELECT p.proname::text FROM pg_proc p
                JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = current_schema() AND p.proname::text = ANY($1)",
            &[&names],
        )
        .map_err(|e| db_error(url, "reading the catalog", &e))?;
    let found: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    Ok(names
        .iter()
        .filter(|name| found.contains(name))
        .cloned()
        .collect())
}

/// Creates every object and writes `meta` (its owner is the role that
/// runs this); returns the new workspace id.
fn create(tx: &mut Transaction<'_>, url: &DatabaseUrl, prefix: &str) -> Result<String, StoreError> {
    let schema: String = tx
        .query_one("SELECT quote_ident(current_schema())", &[])
        .map(|row| row.get(0))
        .map_err(|e| db_error(url, "reading the schema's name", &e))?;
    tx.batch_execute(&ddl(&schema))
        .map_err(|e| db_error(url, "creating the schema", &e))?;
    let workspace_id = identity::new_workspace_id()?;
    let rows = [
        (APPLICATION_KEY, sender::ROLE.application_id.to_string()),
        (VERSION_KEY, SCHEMA_VERSION.to_string()),
        (WORKSPACE_ID, workspace_id.clone()),
        (ROLES_PREFIX_KEY, prefix.to_string()),
        (CREATION_COMPLETE, "1".to_string()),
    ];
    for (key, value) in &rows {
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2)",
            &[key, value],
        )
        .map_err(|e| db_error(url, "writing meta", &e))?;
    }
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ($1, session_user)",
        &[&OWNER_KEY],
    )
    .map_err(|e| db_error(url, "writing meta", &e))?;
    Ok(workspace_id)
}

/// A database that has a `meta`: a recon outbox of this version with
/// every object, whose workspace id is returned; anything else refused.
fn existing(
    tx: &mut Transaction<'_>,
    url: &DatabaseUrl,
    names: &[String],
    present: &[String],
) -> Result<String, StoreError> {
    let foreign = || problem_at(url, DatabaseProblem::Foreign(present.join(", ")));
    // A `meta` without recon's columns fails this read: not recon's; a
    // login that may not read it is told so.
    let rows = tx
        .query("SELECT key::text, value::text FROM meta", &[])
        .map_err(|e| match e.code() {
            Some(code) if *code == postgres::error::SqlState::INSUFFICIENT_PRIVILEGE => {
                db_error(url, "reading meta", &e)
            }
            _ => foreign(),
        })?;
    let value = |key: &str| {
        rows.iter()
            .find(|row| row.get::<_, String>(0) == key)
            .map(|row| row.get::<_, String>(1))
    };
    if value(APPLICATION_KEY) != Some(sender::ROLE.application_id.to_string()) {
        return Err(foreign());
    }
    let found = value(VERSION_KEY)
        .and_then(|v| v.parse::<i64>().ok())
        .ok_or_else(foreign)?;
    if found < SCHEMA_VERSION {
        return Err(problem_at(
            url,
            DatabaseProblem::SchemaOutdated {
                found,
                expected: SCHEMA_VERSION,
            },
        ));
    }
    if found != SCHEMA_VERSION {
        return Err(problem_at(
            url,
            DatabaseProblem::IncompatibleSchema {
                found,
                expected: SCHEMA_VERSION,
            },
        ));
    }
    let missing: Vec<&str> = names
        .iter()
        .filter(|name| !present.contains(name))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(problem_at(
            url,
            DatabaseProblem::Incomplete(missing.join(", ")),
        ));
    }
    value(WORKSPACE_ID).ok_or_else(|| {
        problem_at(
            url,
            DatabaseProblem::Incomplete(format!("its {WORKSPACE_ID} in meta")),
        )
    })
}

/// A transaction holding the lock `db init` and `db upgrade` take, so that
/// two of them at once make or change the outbox once.
pub(super) fn locked_transaction<'a>(
    client: &'a mut postgres::Client,
    url: &DatabaseUrl,
) -> Result<postgres::Transaction<'a>, StoreError> {
    let mut tx = client
        .transaction()
        .map_err(|e| db_error(url, "beginning", &e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&sender::ROLE.application_id],
    )
    .map_err(|e| db_error(url, "waiting for another db init or upgrade", &e))?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_names_are_every_table_index_and_function_once() {
        let names = object_names();
        for name in [
            "meta",
            "operations",
            "journal",
            "journal_head",
            "routes",
            "operations_by_receiver",
            "recon_journal_follows_head",
            "recon_refuse_change",
            "recon_journal_notify",
        ] {
            assert_eq!(names.iter().filter(|n| *n == name).count(), 1, "{name}");
        }
        assert!(names
            .iter()
            .all(|n| !n.is_empty() && !n.contains(['(', ' '])));
    }
}
