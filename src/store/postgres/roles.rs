//! Authorization by the database (SPEC 10): the roles `db init` creates,
//! what they are granted, and the functions and triggers through which
//! every write of the outbox must pass, rendered from the one table of
//! who may do what (`domain::team`).
//!
//! Login roles hold no table privileges of their own; the owner grants
//! them the outbox's roles, `PREFIX_reader`, `PREFIX_sender`,
//! `PREFIX_reviewer`, `PREFIX_closer`, `PREFIX_approver` (`recon_*` by
//! default; `db init --roles PREFIX` names them, SPEC 12, and `meta`
//! records the prefix, which the functions read: the DDL is the same for
//! every prefix, and acts ask for a role by its short name). Recon's transaction scripts run unchanged on the
//! database (one place for each rule, shared with SQLite), so the writer
//! roles hold `INSERT` on the tables their acts append to and `UPDATE` on
//! `operations`; what keeps a person with `psql` to the same acts is that
//! every row is checked by functions the owner defines:
//! - an act begins with `recon_begin_write(act)` (`SECURITY DEFINER`): it
//!   refuses a session whose login lacks a role the act needs (SQLSTATE
//!   42501, naming the role): a role counts when the outbox's owner
//!   granted it to the login itself (`pg_auth_members.grantor`, SPEC 12;
//!   a grant by another `CREATEROLE` login, or through a group, counts for
//!   nothing; a superuser holds every role), takes the journal head's
//!   lock, and records the act and the head it started from in
//!   `recon_writers`, which only the owner's functions write;
//! - a journal entry is refused unless this transaction began an act, the
//!   entry is of a kind the act may write, and its `role` is the session's
//!   `session_user`;
//! - each row of the append-only tables must name an entry this act wrote,
//!   of its table's kinds, for the same operation; a new or changed
//!   operation, a dispatch, an approval or a receiver must have one such
//!   entry by the commit (deferred triggers);
//! - `operations` changes only as the rules allow (state, version, what
//!   never changes; the surplus of a kept duplicate is set once, with its
//!   confirmation), evidence only at the version its decision produced,
//!   an approval only for the confirmed effect (or a surplus one, SPEC 14)
//!   at the version approved,
//!   and with four eyes not by the role that confirmed the original.
//!
//! Every function runs with `search_path = pg_catalog, pg_temp` and names
//! recon's tables with their schema, so a temporary table of a session
//! cannot stand in for one of them.

use crate::domain::team::{Act, TeamRole, DEFAULT_ROLES_PREFIX};

/// What the schema's functions say for a table: `@.` is replaced with the
/// schema (`schema::ddl`).
pub(super) const SCHEMA: &str = "@.";

/// The SQLSTATE of the four-eyes refusal (`same_person`).
pub const SAME_PERSON: &str = "RCF01";

/// The SQLSTATE of a row the rules refuse (state, version, scope).
pub const RULE_REFUSED: &str = "RCR01";

/// The SQLSTATE of a decision on a closed snapshot that names no recorded
/// close holding exactly that snapshot (`unbacked_close`, SPEC 12).
pub const UNBACKED_CLOSE: &str = "RCC01";

/// The tables the writer roles' acts append to, each with the column that
/// names its journal entry and the kinds of entry that may write it.
const ENTRY_ROWS: [(&str, &str, &[&str]); 8] = [
    ("evidence", "journal_seq", &["receipt", "decided"]),
    ("closes", "journal_seq", &["closed"]),
    ("observations", "seq", &["observed", "receipt"]),
    ("notes", "seq", &["noted"]),
    ("escalations", "seq", &["escalated", "deescalated"]),
    ("acknowledgements", "seq", &["acknowledged"]),
    ("call_failures", "seq", &["call_failed"]),
    ("close_requests", "seq", &["close_requested"]),
];

/// The rows that must have an entry of this act by the commit: the table,
/// the column naming the operation (`-` for none), the kinds, and the
/// events.
const ACT_ROWS: [(&str, &str, &[&str], &str); 6] = [
    ("operations", "op_id", &["prepared", "approved"], "INSERT"),
    (
        "operations",
        "op_id",
        &[
            "dispatched",
            "receipt",
            "observed",
            "decided",
            "escalated",
            "deescalated",
            "acknowledged",
            "closed",
        ],
        "UPDATE",
    ),
    ("dispatch_log", "op_id", &["dispatched"], "INSERT"),
    (
        "compensation_approvals",
        "compensation_op_id",
        &["approved"],
        "INSERT",
    ),
    (
        "receivers",
        "-",
        &[
            "receiver_registered",
            "receiver_updated",
            "receiver_removed",
        ],
        "INSERT OR UPDATE OR DELETE",
    ),
    (
        "routes",
        "-",
        &[
            "receiver_registered",
            "receiver_updated",
            "receiver_removed",
        ],
        "INSERT OR UPDATE OR DELETE",
    ),
];

/// The tables each writer role may append to (and `UPDATE` on
/// `operations` for every one of them but the approver).
fn tables_of(role: TeamRole) -> &'static [&'static str] {
    match role {
        TeamRole::Sender => &[
            "journal",
            "operations",
            "dispatch_log",
            "evidence",
            "observations",
            "call_failures",
        ],
        TeamRole::Reviewer => &[
            "journal",
            "evidence",
            "observations",
            "notes",
            "escalations",
            "acknowledgements",
            "call_failures",
        ],
        TeamRole::Closer => &[
            "journal",
            "closes",
            "close_requests",
            "observations",
            "call_failures",
        ],
        TeamRole::Approver => &["journal", "compensation_approvals", "operations"],
        TeamRole::Reader | TeamRole::Owner => &[],
    }
}

/// A SQL array of text literals.
fn array(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("'{i}'")).collect();
    format!("ARRAY[{}]::text[]", quoted.join(", "))
}

/// `CASE act WHEN ... END` over every act, giving `of(act)`.
fn case_of_act(of: impl Fn(Act) -> String) -> String {
    let arms: String = Act::ALL
        .iter()
        .map(|act| format!("        WHEN '{}' THEN {}\n", act.as_str(), of(*act)))
        .collect();
    format!("CASE act\n{arms}    END")
}

/// The table of the acts under way and the functions that begin one:
/// created after `meta` and `journal_head`, before the journal's trigger,
/// which reads them (`@.` for the schema; `@ROLES@` and `@ENTRIES@` for
/// the act table's two columns, [`writers`]).
const WRITERS: &str = r#"
CREATE TABLE recon_writers (
    pid integer PRIMARY KEY,
    xact xid8 NOT NULL,
    start_seq bigint NOT NULL,
    act text COLLATE "C" NOT NULL
);
CREATE FUNCTION recon_role_name(short text) RETURNS text LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN short = 'owner' THEN short
        ELSE coalesce((SELECT value FROM @.meta WHERE key = 'roles_prefix'), '@DEFAULT_PREFIX@')
            || '_' || short
        END
$$;
CREATE FUNCTION recon_has_role(wanted text) RETURNS boolean LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN wanted = 'owner'
        THEN pg_has_role(session_user,
            (SELECT value FROM @.meta WHERE key = 'owner'), 'MEMBER')
        ELSE coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false)
            OR EXISTS (SELECT 1 FROM pg_auth_members m
                JOIN pg_roles member ON member.oid = m.member
                JOIN pg_roles granted ON granted.oid = m.roleid
                JOIN pg_roles grantor ON grantor.oid = m.grantor
                WHERE member.rolname = session_user
                  AND granted.rolname = @.recon_role_name(wanted)
                  AND grantor.rolname = (SELECT value FROM @.meta WHERE key = 'owner'))
        END
$$;
CREATE FUNCTION recon_act_roles(act text) RETURNS text[] LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT @ROLES@
$$;
CREATE FUNCTION recon_act_entries(act text) RETURNS text[] LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT @ENTRIES@
$$;
CREATE FUNCTION recon_begin_write(act text) RETURNS TABLE (seq bigint, hash text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    needed text[] := @.recon_act_roles(act);
    needed_role text;
    head_seq bigint;
    head_hash text;
BEGIN
    IF needed IS NULL THEN
        RAISE EXCEPTION 'recon knows no act %', act USING ERRCODE = '22023';
    END IF;
    FOREACH needed_role IN ARRAY needed LOOP
        IF NOT coalesce(@.recon_has_role(needed_role), false) THEN
            RAISE EXCEPTION 'permission denied: % may not %: it needs the role %',
                session_user, act, @.recon_role_name(needed_role)
                USING ERRCODE = '42501', DETAIL = @.recon_role_name(needed_role);
        END IF;
    END LOOP;
    SELECT h.seq, h.hash INTO head_seq, head_hash FROM @.journal_head h WHERE h.id = 1
        FOR UPDATE;
    INSERT INTO @.recon_writers (pid, xact, start_seq, act)
        VALUES (pg_backend_pid(), pg_current_xact_id(), head_seq, act)
        ON CONFLICT (pid) DO UPDATE
        SET xact = EXCLUDED.xact, start_seq = EXCLUDED.start_seq, act = EXCLUDED.act;
    RETURN QUERY SELECT head_seq, head_hash;
END
$$;
CREATE FUNCTION recon_head_locked() RETURNS TABLE (seq bigint, hash text)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT h.seq, h.hash FROM @.journal_head h WHERE h.id = 1 FOR UPDATE
$$;
CREATE FUNCTION recon_writer() RETURNS @.recon_writers LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w @.recon_writers;
BEGIN
    SELECT * INTO w FROM @.recon_writers
        WHERE pid = pg_backend_pid() AND xact = pg_current_xact_id_if_assigned();
    IF NOT FOUND AND (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        -- A superuser bypasses privileges, as everywhere in PostgreSQL:
        -- outside an act its writes are checked by the chain and the rules
        -- alone (no act, no role).
        RETURN NULL;
    ELSIF NOT FOUND THEN
        RAISE EXCEPTION 'permission denied: the outbox is written only inside an act begun with recon_begin_write'
            USING ERRCODE = '42501';
    END IF;
    RETURN w;
END
$$;
"#;

/// The act under way, into `w`, as a trigger reads it on every row: its
/// row read in place, and only when there is none `recon_writer`'s
/// answer (a superuser's null, or the refusal), which stays the one rule
/// of what a write outside an act is. A function call a row would cost
/// more than the read.
pub(super) const WRITER: &str = r#"    SELECT * INTO w FROM @.recon_writers
        WHERE pid = pg_backend_pid() AND xact = pg_current_xact_id_if_assigned();
    IF NOT FOUND THEN
        w := @.recon_writer();
    END IF;"#;

/// The guards of the tables and the rules of `operations`, `evidence` and
/// `compensation_approvals` (`@.` for the schema, `@RULE_REFUSED@` and
/// `@SAME_PERSON@` for the SQLSTATEs).
const GUARDS: &str = r#"
CREATE FUNCTION recon_guard_entry() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w @.recon_writers;
    entry_seq bigint;
    j record;
BEGIN
@WRITER@
    IF w.pid IS NULL THEN
        RETURN NEW;
    END IF;
    -- The column read as it is (the row as JSON would carry a snapshot
    -- whole): each branch is compiled only for the tables that take it.
    IF TG_ARGV[0] = 'seq' THEN
        entry_seq := NEW.seq;
    ELSE
        entry_seq := NEW.journal_seq;
    END IF;
    SELECT e.kind, e.op_id INTO j FROM @.journal e
        WHERE e.seq = entry_seq AND e.seq > w.start_seq;
    IF NOT FOUND OR NOT (j.kind = ANY(TG_ARGV[1]::text[]))
            OR j.op_id IS DISTINCT FROM NEW.op_id THEN
        RAISE EXCEPTION 'permission denied: a row of % names journal entry %, which this act (%) did not write for it',
            TG_TABLE_NAME, entry_seq, w.act USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END
$$;
CREATE FUNCTION recon_guard_act() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w @.recon_writers;
    item text;
    written boolean;
BEGIN
@WRITER@
    IF w.pid IS NULL THEN
        RETURN NULL;
    END IF;
    -- The operation's id: an operation's own column read as it is (the
    -- row as JSON would carry its whole payload), any other by name.
    IF TG_TABLE_NAME = 'operations' THEN
        item := NEW.op_id;
    ELSIF TG_ARGV[0] <> '-' THEN
        item := CASE WHEN TG_OP = 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END
            ->> TG_ARGV[0];
    END IF;
    -- Two statements, not one with an OR: a cached plan of the one would
    -- scan every entry of the act for each row (a batch's acts would cost
    -- the square of their size); the operation's is an index range of it.
    IF TG_ARGV[0] = '-' THEN
        written := EXISTS (SELECT 1 FROM @.journal j WHERE j.seq > w.start_seq
            AND j.kind = ANY(TG_ARGV[1]::text[]));
    ELSE
        written := EXISTS (SELECT 1 FROM @.journal j WHERE j.op_id = item
            AND j.seq > w.start_seq AND j.kind = ANY(TG_ARGV[1]::text[]));
    END IF;
    IF NOT written THEN
        RAISE EXCEPTION 'permission denied: a % of % without a journal entry of this act (%) for it',
            lower(TG_OP), TG_TABLE_NAME, w.act USING ERRCODE = '42501';
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION recon_operation_rules() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (NEW.op_id, NEW.kind, NEW.action_kind, NEW.payload, NEW.compensates_effect_id,
            NEW.compensates_op_id, NEW.created_at) IS DISTINCT FROM
        (OLD.op_id, OLD.kind, OLD.action_kind, OLD.payload, OLD.compensates_effect_id,
            OLD.compensates_op_id, OLD.created_at) THEN
        RAISE EXCEPTION 'operation %: what it is never changes', OLD.op_id
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF (NEW.receiver, NEW.receiver_id) IS DISTINCT FROM (OLD.receiver, OLD.receiver_id) THEN
        RAISE EXCEPTION 'operation %: routes are fixed: its receiver and registration never change',
            OLD.op_id USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF NEW.state <> OLD.state AND (NEW.version <> OLD.version + 1
            OR (OLD.state, NEW.state) NOT IN (('prepared', 'unknown'),
                ('unknown', 'confirmed'), ('unknown', 'not_applied'))) THEN
        RAISE EXCEPTION 'operation %: % at version % cannot become % at version %',
            OLD.op_id, OLD.state, OLD.version, NEW.state, NEW.version
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF NEW.version < OLD.version OR NEW.dispatch_count < OLD.dispatch_count
            OR (OLD.confirmed_effect_id IS NOT NULL
                AND NEW.confirmed_effect_id IS DISTINCT FROM OLD.confirmed_effect_id)
            OR (NEW.confirmed_effect_id IS NOT NULL AND NEW.state <> 'confirmed')
            OR (NEW.surplus_effect_ids IS DISTINCT FROM OLD.surplus_effect_ids
                AND (OLD.surplus_effect_ids IS NOT NULL OR OLD.state <> 'unknown'
                    OR NEW.state <> 'confirmed')) THEN
        RAISE EXCEPTION 'operation %: its version, dispatches and confirmed effect only go forward',
            OLD.op_id USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER operation_rules BEFORE UPDATE ON operations
    FOR EACH ROW EXECUTE FUNCTION recon_operation_rules();
CREATE FUNCTION recon_operation_route() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    original record;
BEGIN
    IF NEW.kind = 'compensation' THEN
        SELECT receiver, receiver_id INTO original FROM @.operations
            WHERE op_id = NEW.compensates_op_id;
        IF NOT FOUND OR (NEW.receiver, NEW.receiver_id)
                IS DISTINCT FROM (original.receiver, original.receiver_id) THEN
            RAISE EXCEPTION 'compensation %: routes are fixed: it goes to the registration of the effect it compensates',
                NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
        END IF;
    ELSIF NEW.receiver_id IS DISTINCT FROM
            (SELECT r.id FROM @.receivers r WHERE r.name = NEW.receiver) THEN
        RAISE EXCEPTION 'operation %: routes are fixed: it goes to the registration its receiver names now',
            NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER operations_route_rules BEFORE INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION recon_operation_route();
CREATE FUNCTION recon_evidence_rules() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    op record;
BEGIN
    SELECT state, version, confirmed_effect_id INTO op FROM @.operations
        WHERE op_id = NEW.op_id;
    IF NOT FOUND OR op.state <> NEW.decision OR op.version <> NEW.to_version
            OR NEW.from_version <> NEW.to_version - 1
            OR (NEW.decision = 'confirmed'
                AND op.confirmed_effect_id IS DISTINCT FROM NEW.effect_id) THEN
        RAISE EXCEPTION 'evidence for %: its decision % at version % is not the operation''s change',
            NEW.op_id, NEW.decision, NEW.to_version USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER evidence_rules BEFORE INSERT ON evidence
    FOR EACH ROW EXECUTE FUNCTION recon_evidence_rules();
CREATE FUNCTION recon_approval_rules() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    op record;
    confirmed_by text;
BEGIN
    SELECT state, version, confirmed_effect_id, surplus_effect_ids INTO op FROM @.operations
        WHERE op_id = NEW.original_op_id;
    IF NOT FOUND OR op.state <> 'confirmed' OR op.version <> NEW.approved_version
            OR (op.confirmed_effect_id IS DISTINCT FROM NEW.effect_id
                AND NOT COALESCE(op.surplus_effect_ids::jsonb ? NEW.effect_id, false)) THEN
        RAISE EXCEPTION 'approval for %: not its confirmed effect (or a surplus one) at the version approved',
            NEW.original_op_id USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF EXISTS (SELECT 1 FROM @.meta WHERE key = 'four_eyes' AND value = '1') THEN
        SELECT j.entry::jsonb ->> 'role' INTO confirmed_by
            FROM @.evidence e JOIN @.journal j ON j.seq = e.journal_seq
            WHERE e.op_id = NEW.original_op_id AND e.decision = 'confirmed'
            ORDER BY e.seq DESC LIMIT 1;
        IF confirmed_by = session_user THEN
            RAISE EXCEPTION 'four eyes: % recorded the confirmation of %, so another role must approve its compensation',
                confirmed_by, NEW.original_op_id
                USING ERRCODE = '@SAME_PERSON@', DETAIL = confirmed_by;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER approval_rules BEFORE INSERT ON compensation_approvals
    FOR EACH ROW EXECUTE FUNCTION recon_approval_rules();
"#;

/// The rules of SPEC 12 on settings: the workspace id never changes and
/// four eyes, once on, stays on (`meta`, even for its owner). On journal
/// entries, whoever writes them (a
/// superuser outside an act too): a dispatch happens once, as the
/// operation's move from `prepared` to `unknown`; a receipt is the first
/// outcome of that dispatch (no receipt, no failed `apply` before it),
/// in the name of the role that dispatched; an `escalated` entry of a
/// `prepared` operation, one saying `lost`, or one written by removing
/// receivers, only as the `lost` escalation of an open operation of the
/// receiver that act removed as lost, with the removal's reason; a
/// `closed` entry only by a login holding the closer role, after a
/// `close_requested` of its operation, carrying the snapshot it recorded
/// and its hash; a decision (or receipt) whose snapshot says `closed: true`
/// only naming (`close_seq`) a `closed` entry of its operation whose
/// snapshot is the same JSON (SQLSTATE `RCC01`; `verify` holds the
/// canonical SHA-256, `domain::check_close_named`). And on
/// `operations`, at the
/// commit: a move out of `prepared` has its `dispatched` entry, a move out
/// of `unknown` its evidence row (`@.` for the schema, `@RULE_REFUSED@`).
const ENTRY_RULES: &str = r#"
CREATE FUNCTION recon_journal_rules() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e jsonb := NEW.entry::jsonb;
    dispatch record;
    w @.recon_writers;
BEGIN
    IF NEW.kind = 'dispatched' THEN
        IF EXISTS (SELECT 1 FROM @.journal j WHERE j.op_id = NEW.op_id AND j.kind = 'dispatched')
            OR NOT EXISTS (SELECT 1 FROM @.operations o WHERE o.op_id = NEW.op_id
                AND o.state = 'unknown' AND o.version = (e ->> 'to_version')::bigint
                AND o.version = (e ->> 'from_version')::bigint + 1) THEN
            RAISE EXCEPTION 'operation %: a dispatch happens once, as its move from prepared to unknown',
                NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
        END IF;
    ELSIF NEW.kind = 'receipt' THEN
        SELECT j.seq, j.entry::jsonb ->> 'role' AS role INTO dispatch FROM @.journal j
            WHERE j.op_id = NEW.op_id AND j.kind = 'dispatched' ORDER BY j.seq LIMIT 1;
        IF NOT FOUND OR EXISTS (SELECT 1 FROM @.journal j
                WHERE j.op_id = NEW.op_id AND j.seq > dispatch.seq
                AND (j.kind = 'receipt'
                    OR (j.kind = 'call_failed' AND j.entry::jsonb ->> 'verb' = 'apply'))) THEN
            RAISE EXCEPTION 'operation %: a receipt is the first outcome of its dispatch, and it has had one',
                NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
        END IF;
        IF (e ->> 'role') IS DISTINCT FROM dispatch.role THEN
            RAISE EXCEPTION 'operation %: its receipt is written by the login that dispatched it (%), not %',
                NEW.op_id, dispatch.role, e ->> 'role' USING ERRCODE = '@RULE_REFUSED@';
        END IF;
    ELSIF NEW.kind = 'escalated' THEN
        w := @.recon_writer();
        IF w.act = 'receivers' THEN
            IF NOT EXISTS (SELECT 1 FROM @.operations o
                    WHERE o.op_id = NEW.op_id AND o.state IN ('prepared', 'unknown')
                    AND EXISTS (SELECT 1 FROM @.journal j
                        WHERE j.seq > w.start_seq AND j.kind = 'receiver_removed'
                        AND j.entry::jsonb ->> 'name' = o.receiver
                        AND j.entry::jsonb -> 'lost' = 'true'::jsonb
                        AND j.entry::jsonb -> 'reason' = e -> 'reason'))
                    OR e -> 'lost' IS DISTINCT FROM 'true'::jsonb THEN
                RAISE EXCEPTION 'operation %: removing receivers escalates only an open operation routed to the receiver this act removed as lost, with its reason',
                    NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
            END IF;
        ELSIF e ? 'lost' OR EXISTS (SELECT 1 FROM @.operations o
                WHERE o.op_id = NEW.op_id AND o.state = 'prepared') THEN
            RAISE EXCEPTION 'operation %: a prepared operation is escalated (and an escalation says lost) only when its receiver is removed as lost',
                NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
        END IF;
    ELSIF NEW.kind = 'closed' THEN
        IF NOT coalesce(@.recon_has_role('@CLOSER@'), false) THEN
            RAISE EXCEPTION 'permission denied: a closed entry is written by a login holding %, and % holds it not',
                @.recon_role_name('@CLOSER@'), session_user
                USING ERRCODE = '42501', DETAIL = @.recon_role_name('@CLOSER@');
        END IF;
        IF NOT EXISTS (SELECT 1 FROM @.journal j
                WHERE j.op_id = NEW.op_id AND j.kind = 'close_requested') THEN
            RAISE EXCEPTION 'operation %: a closed entry follows a close_requested of it, and it has none',
                NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
        END IF;
        IF jsonb_typeof(e -> 'snapshot') IS DISTINCT FROM 'object'
                OR jsonb_typeof(e -> 'snapshot_sha256') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'operation %: a closed entry carries the snapshot it recorded and its snapshot_sha256',
                NEW.op_id USING ERRCODE = '@RULE_REFUSED@';
        END IF;
    END IF;
    IF NEW.kind IN ('decided', 'receipt') THEN
        IF e -> 'snapshot' -> 'closed' = 'true'::jsonb AND NOT EXISTS (SELECT 1 FROM @.journal c
                WHERE c.seq = (e ->> 'close_seq')::bigint AND c.kind = 'closed'
                AND c.op_id = NEW.op_id AND c.entry::jsonb -> 'snapshot' = e -> 'snapshot') THEN
            RAISE EXCEPTION 'operation %: a decision on a closed snapshot rests on a recorded close, and entry % is no close of it holding exactly this snapshot',
                NEW.op_id, coalesce(e ->> 'close_seq', '(none)') USING ERRCODE = '@UNBACKED_CLOSE@';
        ELSIF e -> 'snapshot' -> 'closed' IS DISTINCT FROM 'true'::jsonb AND e ? 'close_seq' THEN
            RAISE EXCEPTION 'operation %: a decision names a close only when its snapshot is closed',
                NEW.op_id USING ERRCODE = '@UNBACKED_CLOSE@';
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER journal_rules BEFORE INSERT ON journal
    FOR EACH ROW EXECUTE FUNCTION recon_journal_rules();
CREATE FUNCTION recon_operation_moves() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.state = 'prepared' AND NOT EXISTS (SELECT 1 FROM @.journal j
            WHERE j.op_id = NEW.op_id AND j.kind = 'dispatched'
            AND (j.entry::jsonb ->> 'to_version')::bigint = NEW.version) THEN
        RAISE EXCEPTION 'operation %: it leaves prepared only by its dispatched entry', NEW.op_id
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF OLD.state = 'unknown' AND NOT EXISTS (SELECT 1 FROM @.evidence v
            WHERE v.op_id = NEW.op_id AND v.to_version = NEW.version
            AND v.decision = NEW.state) THEN
        RAISE EXCEPTION 'operation %: it leaves unknown only by a receipt or a decision', NEW.op_id
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION recon_meta_rules() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'the outbox''s settings are never emptied'
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF OLD.key = 'workspace_id'
            AND (TG_OP = 'DELETE' OR NEW.key <> OLD.key OR NEW.value <> OLD.value) THEN
        RAISE EXCEPTION 'the outbox''s workspace id never changes'
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF OLD.key = 'four_eyes' AND OLD.value = '1'
            AND (TG_OP = 'DELETE' OR NEW.key <> OLD.key OR NEW.value <> OLD.value) THEN
        RAISE EXCEPTION 'four eyes, once set, stays set' USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF OLD.key = 'owner' AND TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'the outbox''s owner is never removed' USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    IF OLD.key = 'roles_prefix'
            AND (TG_OP = 'DELETE' OR NEW.key <> OLD.key OR NEW.value <> OLD.value) THEN
        RAISE EXCEPTION 'the outbox''s roles keep the prefix they were created with'
            USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER meta_rules BEFORE UPDATE OR DELETE ON meta
    FOR EACH ROW EXECUTE FUNCTION recon_meta_rules();
CREATE FUNCTION recon_meta_settings() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    newest jsonb;
    held text;
    wanted text;
BEGIN
    IF NEW.key NOT IN ('four_eyes', 'workspace_id', 'owner', 'roles_prefix') THEN
        RETURN NULL;
    END IF;
    SELECT j.entry::jsonb INTO newest FROM @.journal j WHERE j.kind = 'settings'
        ORDER BY j.seq DESC LIMIT 1;
    SELECT m.value INTO held FROM @.meta m WHERE m.key = NEW.key;
    wanted := CASE WHEN NEW.key = 'four_eyes'
        THEN CASE WHEN newest -> 'four_eyes' = 'true'::jsonb THEN '1' END
        ELSE newest ->> NEW.key END;
    IF held IS DISTINCT FROM wanted THEN
        RAISE EXCEPTION 'the outbox''s setting % is set only by a journaled act, and its newest settings entry says %',
            NEW.key, coalesce(wanted, '(none)') USING ERRCODE = '@RULE_REFUSED@';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER meta_settings_rules AFTER INSERT OR UPDATE ON meta
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION recon_meta_settings();
CREATE TRIGGER meta_truncate_rules BEFORE TRUNCATE ON meta
    FOR EACH STATEMENT EXECUTE FUNCTION recon_meta_rules();
CREATE CONSTRAINT TRIGGER operations_moves_rules AFTER UPDATE OF state ON operations
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.state <> NEW.state) EXECUTE FUNCTION recon_operation_moves();
"#;

/// [`WRITERS`] with the act table in it.
pub(super) fn writers() -> String {
    let roles =
        case_of_act(|act| array(&act.roles().iter().map(|r| r.short()).collect::<Vec<_>>()));
    WRITERS
        .replace("@ROLES@", &roles)
        .replace("@DEFAULT_PREFIX@", DEFAULT_ROLES_PREFIX)
        .replace("@ENTRIES@", &case_of_act(|act| array(act.entries())))
}

/// The triggers of authorization, appended to the schema's DDL (`@.` for
/// the schema): [`GUARDS`], then a guard trigger per table.
pub(super) fn ddl() -> String {
    let mut ddl = format!("{GUARDS}{ENTRY_RULES}")
        .replace("@WRITER@", WRITER)
        .replace("@RULE_REFUSED@", RULE_REFUSED)
        .replace("@UNBACKED_CLOSE@", UNBACKED_CLOSE)
        .replace("@CLOSER@", TeamRole::Closer.short())
        .replace("@SAME_PERSON@", SAME_PERSON);
    for (table, column, kinds) in ENTRY_ROWS {
        ddl.push_str(&format!(
            "CREATE TRIGGER {table}_guard BEFORE INSERT ON {table}\n    \
             FOR EACH ROW EXECUTE FUNCTION recon_guard_entry('{column}', '{{{}}}');\n",
            kinds.join(",")
        ));
    }
    for (index, (table, column, kinds, events)) in ACT_ROWS.iter().enumerate() {
        ddl.push_str(&format!(
            "CREATE CONSTRAINT TRIGGER {table}_act_{index} AFTER {events} ON {table}\n    \
             DEFERRABLE INITIALLY DEFERRED\n    \
             FOR EACH ROW EXECUTE FUNCTION recon_guard_act('{column}', '{{{}}}');\n",
            kinds.join(",")
        ));
    }
    ddl
}

/// The journal trigger's check of an entry against the act that writes
/// it: inserted into `recon_journal_follows_head` (`schema.rs`).
pub(super) const JOURNAL_CHECK: &str = r#"
@WRITER@
    IF w.pid IS NOT NULL AND NOT (NEW.kind = ANY(@.recon_act_entries(w.act))) THEN
        RAISE EXCEPTION 'permission denied: the act % does not write % entries', w.act, NEW.kind
            USING ERRCODE = '42501';
    END IF;
    IF w.pid IS NOT NULL AND (NEW.entry::jsonb ->> 'role') IS DISTINCT FROM session_user THEN
        RAISE EXCEPTION 'permission denied: journal entry % names the role %, and the session is %',
            NEW.seq, NEW.entry::jsonb ->> 'role', session_user USING ERRCODE = '42501';
    END IF;
"#;

/// The outbox's roles, created once per cluster (they are the cluster's,
/// not the database's): a concurrent `db init` on another database may
/// create one first, which is as good (and then the roles are in use
/// there, which [`ROLES_IN_USE`] finds before this runs).
fn create_roles(prefix: &str) -> String {
    let reader = TeamRole::Reader.name_in(prefix);
    let mut sql = String::from("DO $$\nBEGIN\n");
    for role in TeamRole::CREATED.map(|r| r.name_in(prefix)) {
        sql.push_str(&format!(
            "    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN\n        \
             BEGIN\n            CREATE ROLE {role} NOLOGIN;\n        \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;\n        \
             END;\n    END IF;\n"
        ));
    }
    for role in TeamRole::CREATED[1..].iter().map(|r| r.name_in(prefix)) {
        sql.push_str(&format!(
            "    IF NOT pg_has_role('{role}', '{reader}', 'MEMBER') THEN\n        \
             BEGIN\n            GRANT {reader} TO {role};\n        \
             EXCEPTION WHEN OTHERS THEN\n            \
             IF NOT pg_has_role('{role}', '{reader}', 'MEMBER') THEN RAISE; END IF;\n        \
             END;\n    END IF;\n"
        ));
    }
    sql.push_str("END\n$$;\n");
    sql
}

/// The databases other than this one whose objects the roles of `$1` (a
/// text array of role names) hold privileges on or own: roles serving
/// another outbox (`roles_in_use`, SPEC 12). PostgreSQL records every
/// such dependency of a role, in every database, in `pg_shdepend`.
pub(super) const ROLES_IN_USE: &str = "SELECT DISTINCT d.datname::text
      FROM pg_shdepend s
      JOIN pg_database d ON d.oid = s.dbid
      JOIN pg_roles r ON r.oid = s.refobjid
     WHERE s.refclassid = 'pg_authid'::regclass
       AND r.rolname::text = ANY($1)
       AND s.dbid <> (SELECT oid FROM pg_database WHERE datname = current_database())
     ORDER BY 1";

/// What `db init` runs on every run (idempotent): the roles of `prefix`,
/// and the privileges on recon's `tables` in the schema.
pub(super) fn grants(tables: &[String], prefix: &str) -> String {
    create_roles(prefix) + &privileges(tables, prefix)
}

/// The privileges on recon's `tables` and functions alone, as `db init`
/// gives them to the roles of `prefix`: what `verify` holds a live
/// schema's to (`postgres::shape`).
pub(super) fn privileges(tables: &[String], prefix: &str) -> String {
    let mut sql = String::new();
    let readable: Vec<&str> = tables
        .iter()
        .map(String::as_str)
        .filter(|t| *t != "recon_writers")
        .collect();
    sql.push_str(&format!(
        "REVOKE ALL ON {} FROM PUBLIC;\n",
        tables.join(", ")
    ));
    sql.push_str(&format!(
        "GRANT SELECT ON {} TO {};\n",
        readable.join(", "),
        TeamRole::Reader.name_in(prefix)
    ));
    for role in &TeamRole::CREATED[1..] {
        let name = role.name_in(prefix);
        sql.push_str(&format!(
            "GRANT INSERT ON {} TO {name};\n",
            tables_of(*role).join(", ")
        ));
        if *role != TeamRole::Approver {
            sql.push_str(&format!("GRANT UPDATE ON operations TO {name};\n"));
        }
        sql.push_str(&format!(
            "GRANT EXECUTE ON FUNCTION recon_head_locked() TO {name};\n"
        ));
    }
    sql.push_str("REVOKE ALL ON FUNCTION recon_head_locked() FROM PUBLIC;\n");
    sql
}

#[cfg(test)]
mod tests {
    use super::ENTRY_ROWS;

    /// `recon_guard_entry` reads a row's entry from `seq` or, for any other
    /// name, `journal_seq`: every table it guards names its entry so.
    #[test]
    fn every_guarded_table_names_its_entry_by_a_column_the_guard_reads() {
        for (table, column, _) in ENTRY_ROWS {
            assert!(["seq", "journal_seq"].contains(&column), "{table}.{column}");
        }
    }
}
