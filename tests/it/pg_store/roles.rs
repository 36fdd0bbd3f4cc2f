//! Who may do what is the database's answer (SPEC 10): for each role `db
//! init` creates, the acts it may and may not do, through recon and
//! through a plain SQL connection as a login granted that role; the role
//! each entry records; four eyes.
//!
//! Login roles are the cluster's, so each test names its own after its
//! database. The cluster trusts local connections (`servers`), so a URL
//! with another user name logs in as that role.

use super::outbox::{client, confirm, location, outbox, refusal, register_mail, unknown_op};
use super::{database_of, db_init};
use crate::real_receivers::servers::Postgres;
use crate::support::adapter_fixture;
use recon::domain::CompensationRequest;
use recon::workspace::NewReceiver;
use recon::{OpenOptions, Refusal, Workspace};
use serde_json::{json, Value};

const ACTION: &str = "post_letter";

/// `role` (a name under the default prefix, `recon_reviewer`) in the
/// outbox at `url`, whose roles carry its own prefix.
pub(crate) fn role_in(pg: &Postgres, url: &str, role: &str) -> String {
    match role.strip_prefix("recon_") {
        Some(short) => format!("{}_{short}", pg.roles_prefix_of(url)),
        None => role.to_string(),
    }
}

/// A login role `name` granted `roles`; its URL for `url`'s database.
pub(crate) fn login(pg: &Postgres, url: &str, name: &str, roles: &[&str]) -> String {
    let database = database_of(url);
    pg.psql(database, &format!("CREATE ROLE {name} LOGIN"));
    for role in roles {
        let role = role_in(pg, url, role);
        pg.psql(database, &format!("GRANT {role} TO {name}"));
    }
    url.replacen("postgres@", &format!("{name}@"), 1)
}

pub(super) fn open(url: &str) -> Workspace {
    Workspace::open(location(url), OpenOptions::default()).expect("open the outbox")
}

fn journal_length(pg: &Postgres, url: &str) -> String {
    pg.psql(database_of(url), "SELECT count(*) FROM journal")
        .trim()
        .to_string()
}

/// `result` is `permission_denied` naming `role` and `login`, and the
/// journal did not move.
#[track_caller]
fn denied<T: std::fmt::Debug>(
    pg: &Postgres,
    url: &str,
    (result, before): (recon::Result<T>, String),
    role: &str,
    who: &str,
) {
    let refused = refusal(result.map(drop));
    match &refused {
        Refusal::PermissionDenied {
            role: named, login, ..
        } => {
            assert_eq!(named, role, "{refused}");
            assert_eq!(login, who, "{refused}");
        }
        other => panic!("expected permission_denied, got {other:?}"),
    }
    assert_eq!(journal_length(pg, url), before, "nothing was written");
}

/// An outbox with `op-1` unknown at the receiver, dispatched by the
/// owner; the test's name prefix for its login roles.
pub(super) fn team(
    test: &str,
    prefix: &str,
) -> Option<(&'static Postgres, String, tempfile::TempDir)> {
    let (pg, url) = outbox(test, prefix)?;
    let dir = tempfile::tempdir().expect("temp dir");
    unknown_op(&mut open(&url), dir.path(), "op-1");
    Some((pg, url, dir))
}

fn compensation<'a>(effect: &'a str, version: i64, payload: &'a Value) -> CompensationRequest<'a> {
    CompensationRequest {
        reason: None,
        original_op_id: "op-1",
        effect_id: effect,
        approver: "carol",
        expected_version: version,
        compensation_op_id: "undo-1",
        action_kind: ACTION,
        payload,
    }
}

#[test]
fn db_init_creates_the_five_roles_without_login_and_records_its_owner() {
    let test = "db_init_creates_the_five_roles_without_login_and_records_its_owner";
    let Some((pg, url)) = outbox(test, "rolesmade") else {
        return;
    };
    let roles = pg.psql(
        database_of(&url),
        "SELECT string_agg(rolname || ':' || rolcanlogin, ',' ORDER BY rolname) FROM pg_roles
         WHERE rolname LIKE 'recon\\_%'",
    );
    assert_eq!(
        roles.trim(),
        "recon_approver:false,recon_closer:false,recon_reader:false,recon_reviewer:false,\
         recon_sender:false"
    );
    let out = db_init(&url, true, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let answer = out.json();
    assert_eq!(answer["owner"], json!("postgres"));
    assert_eq!(answer["four_eyes"], json!(false));
}

#[test]
fn a_reader_may_read_and_is_refused_every_act_naming_the_role_that_would_allow_it() {
    let test = "a_reader_may_read_and_is_refused_every_act_naming_the_role_that_would_allow_it";
    let Some((pg, url, dir)) = team(test, "reader") else {
        return;
    };
    let reader = login(pg, &url, "reader_r1", &["recon_reader"]);
    let mut ws = open(&reader);
    let op = ws.operation("op-1").expect("read").expect("op-1");
    let before = || journal_length(pg, &url);
    let payload = json!({"to": "ann"});
    let cases: Vec<(recon::Result<()>, &str)> = vec![
        (
            ws.prepare("op-2", ACTION, &payload).map(drop),
            "recon_sender",
        ),
        (confirm(&mut ws, "op-1", op.version), "recon_reviewer"),
        (
            ws.note("op-1", "rita", "looked").map(drop),
            "recon_reviewer",
        ),
        (
            ws.escalate("op-1", "rita", "odd").map(drop),
            "recon_reviewer",
        ),
    ];
    for (result, role) in cases {
        denied(pg, &url, (result, before()), role, "reader_r1");
    }
    let registered = ws.remove_receiver("mail");
    denied(pg, &url, (registered, before()), "owner", "reader_r1");
    register_mail_refused(pg, &url, &mut ws, dir.path());
}

/// Registering a receiver needs the owner (a registered program runs on
/// every reviewer's host).
fn register_mail_refused(pg: &Postgres, url: &str, ws: &mut Workspace, dir: &std::path::Path) {
    let state = dir.join("other.json").display().to_string();
    let args = ["--state".to_string(), state];
    let registered = ws.register_receiver(&NewReceiver {
        name: "other",
        actions: &["other_action".to_string()],
        program: &adapter_fixture(),
        args: &args,
        timeout_ms: None,
        env: &[],
    });
    denied(
        pg,
        url,
        (registered, journal_length(pg, url)),
        "owner",
        "reader_r1",
    );
}

#[test]
fn each_writer_role_does_its_own_acts_and_is_refused_the_others() {
    let test = "each_writer_role_does_its_own_acts_and_is_refused_the_others";
    let Some((pg, url, _dir)) = team(test, "writers") else {
        return;
    };
    let before = || journal_length(pg, &url);
    let payload = json!({"to": "ann", "text": "sorry"});
    // The sender prepares; it may not decide.
    let mut sender = open(&login(pg, &url, "writers_s", &["recon_sender"]));
    sender
        .prepare("op-2", ACTION, &payload)
        .expect("the sender prepares");
    let version = sender
        .operation("op-1")
        .expect("read")
        .expect("op-1")
        .version;
    let decided = confirm(&mut sender, "op-1", version);
    denied(pg, &url, (decided, before()), "recon_reviewer", "writers_s");
    // The reviewer decides, notes and escalates; it may not prepare or
    // approve.
    let mut reviewer = open(&login(pg, &url, "writers_v", &["recon_reviewer"]));
    let prepared = reviewer.prepare("op-3", ACTION, &payload).map(drop);
    denied(pg, &url, (prepared, before()), "recon_sender", "writers_v");
    reviewer
        .note("op-2", "vic", "waiting")
        .expect("the reviewer notes");
    reviewer
        .escalate("op-1", "vic", "slow")
        .expect("the reviewer escalates");
    confirm(&mut reviewer, "op-1", version).expect("the reviewer decides");
    let op = reviewer.operation("op-1").expect("read").expect("op-1");
    let effect = op.confirmed_effect_id.clone().expect("the effect");
    let approved = reviewer
        .approve_compensation(&compensation(&effect, op.version, &payload))
        .map(drop);
    denied(
        pg,
        &url,
        (approved, before()),
        "recon_approver",
        "writers_v",
    );
    // The approver approves; it may not decide.
    let mut approver = open(&login(pg, &url, "writers_a", &["recon_approver"]));
    approver
        .approve_compensation(&compensation(&effect, op.version, &payload))
        .expect("the approver approves");
    let noted = approver.note("op-1", "amy", "done").map(drop);
    denied(pg, &url, (noted, before()), "recon_reviewer", "writers_a");
    // A closer alone may not record a note either; what it may begin, the
    // database says (the plain-SQL test below).
    let mut closer = open(&login(pg, &url, "writers_c", &["recon_closer"]));
    let noted = closer.note("op-1", "cal", "closing").map(drop);
    denied(pg, &url, (noted, before()), "recon_reviewer", "writers_c");
    assert!(super::outbox::verify(&url).intact);
}

#[test]
fn every_entry_records_the_session_role_beside_the_name_typed() {
    let test = "every_entry_records_the_session_role_beside_the_name_typed";
    let Some((pg, url, _dir)) = team(test, "identity") else {
        return;
    };
    let mut reviewer = open(&login(pg, &url, "identity_v", &["recon_reviewer"]));
    let version = reviewer
        .operation("op-1")
        .expect("read")
        .expect("op-1")
        .version;
    confirm(&mut reviewer, "op-1", version).expect("decide");
    let entry = pg.psql(
        database_of(&url),
        "SELECT entry::jsonb ->> 'role', entry::jsonb ->> 'reviewer' FROM journal
         WHERE kind = 'decided'",
    );
    assert_eq!(entry.trim(), "identity_v|ann");
    let roles = pg.psql(
        database_of(&url),
        "SELECT string_agg(DISTINCT entry::jsonb ->> 'role', ',') FROM journal
         WHERE kind IN ('receiver_registered', 'prepared', 'dispatched')",
    );
    assert_eq!(roles.trim(), "postgres", "the owner's acts name the owner");
}

/// What a plain SQL connection as `url`'s login gets for `sql`, in a
/// transaction of its own: `Ok` or the SQLSTATE and message.
fn try_sql(url: &str, sql: &str) -> Result<(), (String, String)> {
    let mut client = client(url);
    let mut tx = client.transaction().expect("begin");
    let ran = tx.batch_execute(sql).and_then(|()| tx.commit());
    ran.map_err(|e| {
        let db = e.as_db_error().expect("the server's refusal");
        (db.code().code().to_string(), db.message().to_string())
    })
}

#[track_caller]
fn refused_42501(url: &str, sql: &str) -> String {
    match try_sql(url, sql) {
        Err((code, message)) => {
            assert_eq!(code, "42501", "{sql}: {message}");
            message
        }
        Ok(()) => panic!("{sql}: allowed"),
    }
}

#[test]
fn a_reader_through_plain_sql_changes_nothing_and_the_function_names_the_role() {
    let test = "a_reader_through_plain_sql_changes_nothing_and_the_function_names_the_role";
    let Some((pg, url, _dir)) = team(test, "sqlreader") else {
        return;
    };
    let reader = login(pg, &url, "sqlreader_r", &["recon_reader"]);
    let before = journal_length(pg, &url);
    try_sql(&reader, "SELECT * FROM operations; SELECT * FROM journal").expect("reads");
    for sql in [
        "UPDATE operations SET state = 'confirmed', version = version + 1 WHERE op_id = 'op-1'",
        "INSERT INTO notes (seq, op_id, noted_by, noted_at, text) VALUES (99, 'op-1', 'x', 'x', 'x')",
        "DELETE FROM receivers",
        "SELECT * FROM recon_head_locked()",
        "SELECT * FROM recon_writers",
    ] {
        refused_42501(&reader, sql);
    }
    let message = refused_42501(&reader, "SELECT * FROM recon_begin_write('decide')");
    assert!(message.contains("recon_reviewer"), "{message}");
    let nobody = login(pg, &url, "sqlreader_n", &[]);
    refused_42501(&nobody, "SELECT * FROM operations");
    assert_eq!(journal_length(pg, &url), before);
}

#[test]
fn a_reviewer_through_plain_sql_writes_only_inside_an_act_of_its_own_and_as_itself() {
    let test = "a_reviewer_through_plain_sql_writes_only_inside_an_act_of_its_own_and_as_itself";
    let Some((pg, url, _dir)) = team(test, "sqlreviewer") else {
        return;
    };
    let reviewer = login(pg, &url, "sqlreviewer_v", &["recon_reviewer"]);
    let before = journal_length(pg, &url);
    // A state change with no act: refused at the commit.
    refused_42501(
        &reviewer,
        "UPDATE operations SET state = 'confirmed', version = version + 1 WHERE op_id = 'op-1'",
    );
    // An act of another role: refused, naming it.
    let message = refused_42501(&reviewer, "SELECT * FROM recon_begin_write('prepare')");
    assert!(message.contains("recon_sender"), "{message}");
    // Its own act, but an entry of a kind the act does not write.
    let head = pg.psql(
        database_of(&url),
        "SELECT seq || '|' || hash FROM journal_head",
    );
    let (seq, hash) = head.trim().split_once('|').expect("the head");
    let next = seq.parse::<i64>().expect("a seq") + 1;
    let entry = |kind: &str, role: &str| {
        let content = format!(
            r#"{{"at":"2026-12-04T00:00:00.000Z","kind":"{kind}","op_id":"op-1","role":"{role}","seq":{next}}}"#
        );
        let link = recon::audit::link_hash(hash, &content);
        format!(
            "SELECT * FROM recon_begin_write('note');
             INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
             VALUES ({next}, '{kind}', 'op-1', '{content}', '{hash}', '{link}')"
        )
    };
    refused_42501(&reviewer, &entry("decided", "sqlreviewer_v"));
    // Its own act and kind, but in another role's name.
    refused_42501(&reviewer, &entry("noted", "postgres"));
    // A receiver: the owner's.
    refused_42501(&reviewer, "DELETE FROM routes");
    assert_eq!(journal_length(pg, &url), before);
    // The same entry, as itself, in its own act: the database takes it.
    try_sql(&reviewer, &entry("noted", "sqlreviewer_v")).expect("a note entry as itself");
}

#[test]
fn a_closer_and_an_approver_through_plain_sql_begin_only_their_own_acts() {
    let test = "a_closer_and_an_approver_through_plain_sql_begin_only_their_own_acts";
    let Some((pg, url, _dir)) = team(test, "sqlothers") else {
        return;
    };
    let closer = login(pg, &url, "sqlothers_c", &["recon_closer"]);
    try_sql(&closer, "SELECT * FROM recon_begin_write('close')").expect("a close begins");
    let message = refused_42501(&closer, "SELECT * FROM recon_begin_write('resolve')");
    assert!(message.contains("recon_reviewer"), "{message}");
    let message = refused_42501(&closer, "SELECT * FROM recon_begin_write('decide')");
    assert!(message.contains("recon_reviewer"), "{message}");
    let both = login(
        pg,
        &url,
        "sqlothers_cv",
        &["recon_closer", "recon_reviewer"],
    );
    try_sql(&both, "SELECT * FROM recon_begin_write('resolve')").expect("resolve begins");
    let approver = login(pg, &url, "sqlothers_a", &["recon_approver"]);
    try_sql(&approver, "SELECT * FROM recon_begin_write('approve')").expect("approve begins");
    let message = refused_42501(&approver, "SELECT * FROM recon_begin_write('receivers')");
    assert!(message.contains("owner"), "{message}");
    let sender = login(pg, &url, "sqlothers_s", &["recon_sender"]);
    refused_42501(
        &sender,
        "INSERT INTO compensation_approvals SELECT * FROM compensation_approvals",
    );
}

#[test]
fn with_four_eyes_the_role_that_confirmed_the_original_may_not_approve_its_compensation() {
    let test =
        "with_four_eyes_the_role_that_confirmed_the_original_may_not_approve_its_compensation";
    let Some((pg, url, _dir)) = team(test, "foureyes") else {
        return;
    };
    let out = db_init(&url, true, &[]);
    assert_eq!(out.json()["four_eyes"], json!(false));
    let mut args = vec!["db", "init", "--four-eyes", "--json", "--database"];
    args.push(&url);
    let out = crate::support::run_with_env(&args, None, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["four_eyes"], json!(true));
    // Once set, it stays set.
    assert_eq!(db_init(&url, true, &[]).json()["four_eyes"], json!(true));
    let both = login(
        pg,
        &url,
        "foureyes_x",
        &["recon_reviewer", "recon_approver"],
    );
    let mut ws = open(&both);
    let version = ws.operation("op-1").expect("read").expect("op-1").version;
    confirm(&mut ws, "op-1", version).expect("decide");
    let op = ws.operation("op-1").expect("read").expect("op-1");
    let effect = op.confirmed_effect_id.clone().expect("the effect");
    let payload = json!({"to": "ann", "text": "sorry"});
    let before = journal_length(pg, &url);
    let refused = refusal(
        ws.approve_compensation(&compensation(&effect, op.version, &payload))
            .map(drop),
    );
    assert_eq!(
        refused,
        Refusal::SamePerson {
            op_id: "op-1".into(),
            role: "foureyes_x".into()
        }
    );
    assert_eq!(refused.code(), "same_person");
    assert_eq!(journal_length(pg, &url), before);
    let other = login(pg, &url, "foureyes_y", &["recon_approver"]);
    open(&other)
        .approve_compensation(&compensation(&effect, op.version, &payload))
        .expect("another role approves");
}

#[test]
fn a_confirmation_by_receipt_is_the_dispatching_roles_for_four_eyes() {
    let test = "a_confirmation_by_receipt_is_the_dispatching_roles_for_four_eyes";
    let Some((pg, url)) = outbox(test, "receipt4") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    register_mail(&mut open(&url), dir.path(), "");
    let mut args = vec!["db", "init", "--four-eyes", "--database"];
    args.push(&url);
    assert_eq!(crate::support::run_with_env(&args, None, &[]).code, Some(0));
    let both = login(pg, &url, "receipt4_s", &["recon_sender", "recon_approver"]);
    let mut ws = open(&both);
    let payload = json!({"to": "ann", "text": "hello"});
    ws.prepare("op-1", ACTION, &payload).expect("prepare");
    let report = ws
        .dispatch("op-1", recon::dispatch::DispatchOptions::default())
        .expect("dispatch");
    assert_eq!(report.outcome, "receipt", "{report:?}");
    let op = ws.operation("op-1").expect("read").expect("op-1");
    let effect = op.confirmed_effect_id.clone().expect("the effect");
    let refused = refusal(
        ws.approve_compensation(&compensation(&effect, op.version, &payload))
            .map(drop),
    );
    assert_eq!(refused.code(), "same_person", "{refused}");
}

#[test]
fn a_login_without_recon_reader_is_refused_permission_denied_exit_3_by_the_cli() {
    let test = "a_login_without_recon_reader_is_refused_permission_denied_exit_3_by_the_cli";
    let Some((pg, url)) = outbox(test, "noread") else {
        return;
    };
    let nobody = login(pg, &url, "noread_n", &[]);
    let out = crate::support::run_with_env(&["ops", "--json", "--database", &nobody], None, &[]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let error = &out.json()["error"];
    assert_eq!(error["code"], json!("permission_denied"), "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("recon_reader"),
        "{error}"
    );
}

#[test]
fn a_closer_closes_and_a_reviewer_observes_and_lowers_an_escalation_through_recon() {
    let test = "a_closer_closes_and_a_reviewer_observes_and_lowers_an_escalation_through_recon";
    let Some((pg, url, _dir)) = team(test, "closing") else {
        return;
    };
    let before = || journal_length(pg, &url);
    let mut reviewer = open(&login(pg, &url, "closing_v", &["recon_reviewer"]));
    reviewer
        .snapshot_by("op-1", None, Some("vic"))
        .expect("the reviewer records an observation");
    reviewer.escalate("op-1", "vic", "odd").expect("escalate");
    reviewer
        .deescalate("op-1", "vic", "fine")
        .expect("deescalate");
    let closed = reviewer.snapshot("op-1", Some("vic")).map(drop);
    denied(pg, &url, (closed, before()), "recon_closer", "closing_v");
    let mut closer = open(&login(pg, &url, "closing_c", &["recon_closer"]));
    let snapshot = closer
        .snapshot("op-1", Some("cal"))
        .expect("the closer closes");
    assert!(snapshot.snapshot.closed, "{snapshot:?}");
    let by = pg.psql(
        database_of(&url),
        "SELECT string_agg(kind || ':' || (entry::jsonb ->> 'role'), ',' ORDER BY seq)
         FROM journal WHERE kind IN ('close_requested', 'closed')",
    );
    assert_eq!(by.trim(), "close_requested:closing_c,closed:closing_c");
    assert!(super::outbox::verify(&url).intact);
}

#[test]
fn an_owner_who_is_not_a_superuser_initializes_its_database_and_alone_registers_receivers() {
    let test =
        "an_owner_who_is_not_a_superuser_initializes_its_database_and_alone_registers_receivers";
    // The roles exist in the cluster once any outbox does.
    let Some((pg, _)) = outbox(test, "ownerfirst") else {
        return;
    };
    pg.psql("postgres", "CREATE ROLE owner_o LOGIN CREATEROLE");
    pg.psql("postgres", "CREATE DATABASE owned_by_o OWNER owner_o");
    let url = pg.url("owned_by_o").replacen("postgres@", "owner_o@", 1);
    let out = db_init(&url, true, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["owner"], json!("owner_o"));
    let dir = tempfile::tempdir().expect("temp dir");
    register_mail(&mut open(&url), dir.path(), "");
    let other = login(pg, &pg.url("owned_by_o"), "owner_p", &["recon_reviewer"]);
    let mut ws = open(&other);
    let before = journal_length(pg, &url);
    let removed = ws.remove_receiver("mail");
    denied(pg, &url, (removed, before), "owner", "owner_p");
}

#[track_caller]
fn refused_by_the_rules(url: &str, sql: &str) {
    match try_sql(url, sql) {
        Err((code, message)) => assert_eq!(code, "RCR01", "{sql}: {message}"),
        Ok(()) => panic!("{sql}: allowed"),
    }
}

#[test]
fn inside_an_act_of_its_own_the_database_still_refuses_what_the_rules_forbid() {
    let test = "inside_an_act_of_its_own_the_database_still_refuses_what_the_rules_forbid";
    let Some((pg, url, _dir)) = team(test, "rules") else {
        return;
    };
    let reviewer = login(pg, &url, "rules_v", &["recon_reviewer"]);
    let decide = "SELECT * FROM recon_begin_write('decide');";
    for change in [
        // Two versions at once.
        "state = 'confirmed', version = version + 2",
        // Back to prepared.
        "state = 'prepared', version = version + 1",
        // What the operation is.
        "payload = '{\"to\":\"eve\"}'",
        // A confirmed effect on an operation that is not confirmed.
        "confirmed_effect_id = 'fx-9'",
    ] {
        refused_by_the_rules(
            &reviewer,
            &format!("{decide} UPDATE operations SET {change} WHERE op_id = 'op-1'"),
        );
    }
    // Evidence resting on no entry of this act (refused before its rules
    // are looked at: the guard triggers fire first).
    refused_42501(
        &reviewer,
        &format!(
            "{decide} INSERT INTO evidence (seq, op_id, source, reviewer, decision, verdict,
                 snapshot, from_version, to_version, effect_id, receiver,
                 receiver_describe_sha256, response_sha256, journal_seq, recorded_at)
             VALUES (1, 'op-1', 'review', 'x', 'confirmed', NULL, '{{}}', 7, 8, NULL, 'mail',
                 'x', 'x', 1, 'x')"
        ),
    );
    // An approval for an effect that is not the original's confirmed one.
    let approver = login(pg, &url, "rules_a", &["recon_approver"]);
    refused_by_the_rules(
        &approver,
        "SELECT * FROM recon_begin_write('approve');
         INSERT INTO compensation_approvals (original_op_id, effect_id, approved_version,
             approver, compensation_op_id, action_kind, payload)
         VALUES ('op-1', 'fx-9', 2, 'amy', 'undo-9', 'post_letter', '{}')",
    );
}

#[test]
fn a_failed_apply_or_close_is_recorded_by_the_sender_or_closer_whose_act_it_was() {
    // A failed call belongs to the act it was part of: a sender records
    // its own failed apply, a closer its own failed close, and neither
    // needs recon_reviewer, whose act is a failed read.
    let test = "a_failed_apply_or_close_is_recorded_by_the_sender_or_closer_whose_act_it_was";
    let Some((pg, url)) = outbox(test, "failedcall") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    register_mail(&mut open(&url), dir.path(), "crash-now");
    let mut sender = open(&login(pg, &url, "failedcall_s", &["recon_sender"]));
    let payload = json!({"to": "ann", "text": "hello"});
    sender.prepare("op-1", ACTION, &payload).expect("prepare");
    let report = sender
        .dispatch("op-1", recon::dispatch::DispatchOptions::default())
        .expect("the sender's dispatch, its failure recorded");
    assert_eq!(report.outcome, "unknown", "{report:?}");
    let mut closer = open(&login(pg, &url, "failedcall_c", &["recon_closer"]));
    let closed = closer.snapshot("op-1", Some("cal"));
    assert!(closed.is_err(), "the close crashed: {closed:?}");
    let recorded = pg.psql(
        database_of(&url),
        "SELECT string_agg(c.verb || ':' || (j.entry::jsonb ->> 'role'), ',' ORDER BY c.seq)
         FROM call_failures c JOIN journal j ON j.seq = c.seq WHERE c.op_id = 'op-1'",
    );
    assert_eq!(recorded.trim(), "apply:failedcall_s,close:failedcall_c");
    assert!(super::outbox::verify(&url).intact);
}

#[test]
fn a_role_granted_by_another_createrole_login_counts_for_nothing_at_the_act() {
    let test = "a_role_granted_by_another_createrole_login_counts_for_nothing_at_the_act";
    let Some((pg, url, _dir)) = team(test, "foreigngrant") else {
        return;
    };
    let database = database_of(&url);
    let (eve, bob) = (format!("{database}_eve"), format!("{database}_bob"));
    pg.psql(database, &format!("CREATE ROLE {eve} LOGIN CREATEROLE"));
    let bob_url = login(pg, &url, &bob, &["recon_reader"]);
    pg.psql(
        database,
        &format!("SET ROLE {eve}; GRANT recon_reviewer TO {bob}"),
    );
    let mut ws = open(&bob_url);
    let before = journal_length(pg, &url);
    let noted = ws.note("op-1", "bob", "granted by eve").map(drop);
    denied(pg, &url, (noted, before), "recon_reviewer", &bob);
    // The same role, granted by the owner, counts.
    let granted = crate::support::run_with_env(
        &["db", "revoke", "--database", &url, &bob, "reviewer"],
        None,
        &[],
    );
    assert_eq!(granted.code, Some(0), "{}", granted.stderr);
    let granted = crate::support::run_with_env(
        &["db", "grant", "--database", &url, &bob, "reviewer"],
        None,
        &[],
    );
    assert_eq!(granted.code, Some(0), "{}", granted.stderr);
    ws.note("op-1", "bob", "granted by the owner")
        .expect("a role the owner granted counts");
}

/// `SQL` that begins `act` and appends an `escalated` entry of `op`
/// (saying `"lost": true` for the receivers act, as a lost removal's
/// does), sealed after the outbox's head, in the name of `role` (the
/// session's).
fn escalation_in_act(pg: &Postgres, url: &str, act: &str, op: &str, role: &str) -> String {
    let head = pg.psql(
        database_of(url),
        "SELECT seq || ':' || hash FROM journal_head",
    );
    let head = recon::audit::Checkpoint::parse(head.trim()).expect("the head");
    let fields = json!({
        "by": role,
        "at": "2026-12-05T02:00:00.000Z",
        "reason": "the mailbox was deleted",
        "role": role,
    });
    let Value::Object(mut fields) = fields else {
        unreachable!("an object")
    };
    if act == "receivers" {
        fields.insert("lost".into(), json!(true));
    }
    let sealed = head.seal(recon::audit::EntryKind::Escalated, Some(op), fields);
    format!(
        "SELECT * FROM recon_begin_write('{act}');
         INSERT INTO journal (seq, kind, op_id, entry, prev_hash, hash)
         VALUES ({}, 'escalated', '{op}', $e${}$e$, '{}', '{}')",
        sealed.seq, sealed.entry, sealed.prev_hash, sealed.hash
    )
}

#[test]
fn the_database_accepts_an_escalation_of_a_prepared_operation_or_by_removing_receivers_only_for_a_lost_receiver(
) {
    let test = "the_database_accepts_an_escalation_of_a_prepared_operation_or_by_removing_receivers_only_for_a_lost_receiver";
    let Some((pg, url, _dir)) = team(test, "lostrule") else {
        return;
    };
    open(&url)
        .prepare("op-2", ACTION, &json!({"to": "bo"}))
        .expect("prepare");
    let before = journal_length(pg, &url);
    // A reviewer's escalation of a prepared operation.
    let reviewer = login(pg, &url, "lostrule_v", &["recon_reviewer"]);
    let sql = escalation_in_act(pg, &url, "escalate", "op-2", "lostrule_v");
    refused_by_the_rules(&reviewer, &sql);
    // The owner's act on receivers escalating an operation whose receiver
    // it did not remove as lost.
    let sql = escalation_in_act(pg, &url, "receivers", "op-1", "postgres");
    refused_by_the_rules(&url, &sql);
    assert_eq!(journal_length(pg, &url), before, "nothing written");
    // Removed as lost, both are escalated, by the same act.
    let escalated = open(&url)
        .remove_lost_receiver("mail", "the mailbox was deleted")
        .expect("the owner removes mail as lost");
    assert_eq!(escalated, ["op-1", "op-2"]);
    assert!(super::outbox::verify(&url).intact);
}

#[test]
fn a_login_that_is_not_the_owner_is_refused_removing_a_lost_receiver_and_nothing_is_written() {
    let test =
        "a_login_that_is_not_the_owner_is_refused_removing_a_lost_receiver_and_nothing_is_written";
    let Some((pg, url, _dir)) = team(test, "lostowner") else {
        return;
    };
    let reviewer = login(pg, &url, "lostowner_v", &["recon_reviewer", "recon_sender"]);
    let before = journal_length(pg, &url);
    let removed = open(&reviewer).remove_lost_receiver("mail", "gone");
    denied(pg, &url, (removed, before.clone()), "owner", "lostowner_v");
    let out = crate::support::run_with_env(
        &[
            "receivers",
            "remove",
            "--database",
            &reviewer,
            "mail",
            "--lost",
            "--reason",
            "gone",
        ],
        None,
        &[],
    );
    crate::cli::assert_refused(&out, "permission_denied");
    assert_eq!(journal_length(pg, &url), before, "nothing written");
    let ops = open(&url).operation("op-1").expect("read").expect("op-1");
    assert_eq!(ops.triage.escalated, None, "nothing escalated");
}
