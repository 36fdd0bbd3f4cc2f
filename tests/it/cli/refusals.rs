//! Every refusal code of SPEC sections 3, 4, 6 and 8, reached from the shell:
//! exit 3, `refused: <code>: <detail>` on stderr, and nothing written.

use super::{assert_refused, Shell};
use crate::stores::{on_both_stores, Store};
use crate::support::{adapter_fixture, REFUSAL_CODES};
use recon::receiver::Fault;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// `recon prepare` of `op` with `action` and `payload`.
fn prepare(sh: &Shell, op: &str, action: &str, payload: &Value) {
    let payload = payload.to_string();
    sh.prepare(op, action, &payload);
}

/// `reconcile OP` with a decision, on version 2, closing as `by`.
fn decide_closing(sh: &Shell, op: &str, decision: &str, by: &str) -> Value {
    let closing = ["--close", "--authorized-by", by];
    sh.json(&[&reconcile(op, decision, "2")[..], &closing].concat())
}

/// The effect an operation was confirmed on.
fn confirmed_effect(sh: &Shell, op: &str) -> String {
    let shown = sh.json(&["show", op]);
    shown["operation"]["confirmed_effect_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{op} is not confirmed: {shown}"))
        .to_string()
}

/// The demo's showcase stories the refusals are reached on, made through
/// the binary on `store` (the demo itself builds only a directory, and its
/// unsafe retries are the receiver's own effects here, see
/// [`Shell::effect_behind`]); each op is named and ends as in the demo.
pub(crate) fn stories(store: Store) -> Shell {
    let sh = Shell::on(store);
    let lost_after = |op: &str| drop(sh.faulted(&["dispatch", op], Fault::CrashAfterCommit));
    let lost_before = |op: &str| drop(sh.faulted(&["dispatch", op], Fault::CrashBeforeCommit));
    let close = |op: &str| drop(sh.ok(&["snapshot", op, "--close", "--authorized-by", "dana.ops"]));
    let mail = |to: &str| json!({"to": to, "subject": "Hello"});
    let charge = |customer: &str, cents: u64| json!({"customer": customer, "amount_cents": cents});

    prepare(
        &sh,
        "op-1001-welcome-email",
        "send_email",
        &mail("maya.lopez@example.com"),
    );
    sh.ok(&["dispatch", "op-1001-welcome-email"]);
    prepare(
        &sh,
        "op-1002-invoice-email",
        "send_email",
        &mail("omar.haddad@example.com"),
    );
    lost_after("op-1002-invoice-email");
    prepare(
        &sh,
        "op-1003-charge-order",
        "charge_card",
        &charge("cus_48213", 4999),
    );
    lost_after("op-1003-charge-order");
    close("op-1003-charge-order");
    prepare(
        &sh,
        "op-1004-support-ticket",
        "create_ticket",
        &json!({"summary": "reset"}),
    );
    lost_before("op-1004-support-ticket");
    prepare(
        &sh,
        "op-1005-delivery-sms",
        "send_sms",
        &json!({"to": "+15550142"}),
    );
    lost_before("op-1005-delivery-sms");
    close("op-1005-delivery-sms");
    let slack = json!({"channel": "#deploys", "text": "Deploying api v2.14.0"});
    prepare(&sh, "op-1006-deploy-notice", "post_slack_message", &slack);
    lost_after("op-1006-deploy-notice");
    sh.effect_behind(
        "op-1006-deploy-notice",
        "post_slack_message",
        &slack.to_string(),
    );
    prepare(
        &sh,
        "op-1007-renewal-charge",
        "charge_card",
        &charge("cus_51877", 1200),
    );
    lost_before("op-1007-renewal-charge");
    let ten_times = charge("cus_51877", 12000).to_string();
    sh.effect_behind("op-1007-renewal-charge", "charge_card", &ten_times);
    let deposit = charge("cus_60321", 25000);
    prepare(&sh, "op-1008-deposit-capture", "charge_card", &deposit);
    lost_before("op-1008-deposit-capture");
    sh.effect_behind(
        "op-1008-deposit-capture",
        "authorize_card",
        &deposit.to_string(),
    );
    prepare(
        &sh,
        "op-1009-password-reset",
        "send_email",
        &mail("lena.fischer@example.com"),
    );
    lost_before("op-1009-password-reset");
    decide_closing(&sh, "op-1009-password-reset", "not_applied", "priya.sre");
    let plan = charge("cus_30412", 29900);
    prepare(&sh, "op-1010-annual-plan", "charge_card", &plan);
    lost_after("op-1010-annual-plan");
    decide_closing(&sh, "op-1010-annual-plan", "confirmed", "dana.ops");
    let plan_fx = confirmed_effect(&sh, "op-1010-annual-plan");
    let refund = approve(
        "op-1010-annual-plan",
        &plan_fx,
        "3",
        "op-1011-annual-plan-refund",
    );
    sh.ok(&refund.iter().map(String::as_str).collect::<Vec<_>>());
    lost_after("op-1011-annual-plan-refund");
    prepare(
        &sh,
        "op-1012-onboarding-call",
        "create_ticket",
        &json!({"summary": "call"}),
    );
    sh
}

/// The stories, plus two compensations that only a buggy writer can
/// make (written behind recon, [`Shell::tamper`]): one without an
/// approval, one whose action changed after it; and a receiver `post`
/// that cannot close, with an `unknown` letter routed to it.
fn fixture(store: Store) -> (Shell, String, String) {
    let sh = stories(store);
    let post = fixture_adapter(&sh, "post", &[]);
    let mut add = vec!["receivers", "add", "post", "--actions", "post_letter", "--"];
    let post: Vec<String> = post.iter().map(|a| a.display().to_string()).collect();
    add.extend(post.iter().map(String::as_str));
    sh.ok(&add);
    prepare(&sh, "op-3001-letter", "post_letter", &json!({"to": "ada"}));
    std::fs::write(sh.ws.with_file_name("post.mode"), "apply:crash-before").unwrap();
    sh.ok(&["dispatch", "op-3001-letter"]);
    let welcome_fx = confirmed_effect(&sh, "op-1001-welcome-email");
    sh.tamper(
        "INSERT INTO operations (op_id, kind, action_kind, payload, state, version,
             compensates_effect_id, compensates_op_id, receiver, receiver_id,
             created_at, updated_at)
         SELECT 'op-1001-unapproved-fix', 'compensation', 'send_correction_email',
             '{\"to\":\"maya.lopez@example.com\"}', 'prepared', 1, confirmed_effect_id,
             op_id, receiver, receiver_id, created_at, updated_at
         FROM operations WHERE op_id = 'op-1001-welcome-email'",
    );
    let receipt = json!({"to": "kofi.mensah@example.com", "subject": "Receipt"});
    prepare(&sh, "op-2001-receipt-email", "send_email", &receipt);
    sh.ok(&["dispatch", "op-2001-receipt-email"]);
    let receipt_fx = confirmed_effect(&sh, "op-2001-receipt-email");
    let mut apology = approve("op-2001-receipt-email", &receipt_fx, "3", "op-2001-apology");
    apology[11] = "send_apology_email".into();
    sh.ok(&apology.iter().map(String::as_str).collect::<Vec<_>>());
    sh.tamper("UPDATE operations SET action_kind = 'send_sms' WHERE op_id = 'op-2001-apology'");
    let plan_fx = confirmed_effect(&sh, "op-1010-annual-plan");
    (sh, welcome_fx, plan_fx)
}

/// The fixture adapter's command line, its files beside the workspace,
/// then `flags`.
fn fixture_adapter(sh: &Shell, name: &str, flags: &[&str]) -> Vec<PathBuf> {
    let beside = |suffix: &str| sh.ws.with_file_name(format!("{name}.{suffix}"));
    let mut args = vec![adapter_fixture()];
    for (flag, suffix) in [("--state", "state"), ("--mode-file", "mode")] {
        args.extend([PathBuf::from(flag), beside(suffix)]);
    }
    args.extend(flags.iter().map(PathBuf::from));
    args
}

fn reconcile<'a>(op: &'a str, decision: &'a str, version: &'a str) -> Vec<&'a str> {
    vec![
        "reconcile",
        op,
        "--reviewer",
        "dana",
        "--decision",
        decision,
        "--expected-version",
        version,
    ]
}

/// One refused command line and the code it must be refused with.
type Case = (Vec<String>, &'static str);

const CLOSE: [&str; 3] = ["--close", "--authorized-by", "dana"];

fn with(base: Vec<&str>, extra: &[&str]) -> Vec<String> {
    base.into_iter()
        .chain(extra.iter().copied())
        .map(String::from)
        .collect()
}

fn approve(op: &str, effect: &str, version: &str, comp: &str) -> Vec<String> {
    [
        "approve-compensation",
        op,
        "--effect",
        effect,
        "--approver",
        "lee",
        "--expected-version",
        version,
        "--compensation-op",
        comp,
        "--action",
        "refund_card",
        "--payload",
        "{}",
    ]
    .map(String::from)
    .to_vec()
}

/// Sections 3 and 4: blank names, and decisions on another scope.
fn name_and_scope_cases(welcome_fx: &str) -> Vec<Case> {
    vec![
        // Blank names, after trimming.
        (
            with(
                vec![
                    "reconcile",
                    "op-1003-charge-order",
                    "--reviewer",
                    "   ",
                    "--decision",
                    "confirmed",
                    "--expected-version",
                    "2",
                ],
                &[],
            ),
            "empty_reviewer",
        ),
        (
            with(
                vec!["snapshot", "op-1004-support-ticket", "--close"],
                &["--authorized-by", " "],
            ),
            "empty_reviewer",
        ),
        (
            {
                let mut a = approve("op-1001-welcome-email", welcome_fx, "3", "op-x1");
                a[5] = " ".into();
                a
            },
            "empty_reviewer",
        ),
        // The reviewer decided on another payload; with --close it closes nothing.
        (
            with(
                reconcile("op-1002-invoice-email", "confirmed", "2"),
                &["--payload", r#"{"to":"someone.else@example.com"}"#],
            ),
            "scope_mismatch",
        ),
        (
            with(
                reconcile("op-1002-invoice-email", "confirmed", "2"),
                &["--payload", "{}", "--close", "--authorized-by", "dana"],
            ),
            "scope_mismatch",
        ),
    ]
}

/// Section 3: verdicts that do not support the decision, and versions.
fn verdict_and_version_cases(welcome_fx: &str) -> Vec<Case> {
    let close = CLOSE;
    vec![
        // Verdicts that do not support the decision.
        (
            with(reconcile("op-1003-charge-order", "not_applied", "2"), &[]),
            "unsupported_verdict",
        ),
        (
            with(reconcile("op-1004-support-ticket", "not_applied", "2"), &[]),
            "unsupported_verdict",
        ),
        (
            with(
                reconcile("op-1004-support-ticket", "confirmed", "2"),
                &close,
            ),
            "unsupported_verdict",
        ),
        (
            with(reconcile("op-1006-deploy-notice", "confirmed", "2"), &close),
            "unsupported_verdict",
        ),
        (
            with(reconcile("op-1007-renewal-charge", "confirmed", "2"), &[]),
            "unsupported_verdict",
        ),
        (
            with(reconcile("op-1008-deposit-capture", "confirmed", "2"), &[]),
            "unsupported_verdict",
        ),
        // Versions.
        (
            with(reconcile("op-1003-charge-order", "confirmed", "1"), &close),
            "stale_version",
        ),
        (
            with(reconcile("op-1009-password-reset", "not_applied", "2"), &[]),
            "stale_version",
        ),
        (
            approve("op-1001-welcome-email", welcome_fx, "2", "op-x2"),
            "stale_version",
        ),
        (
            with(reconcile("op-1001-welcome-email", "confirmed", "3"), &[]),
            "not_unknown",
        ),
        (
            with(
                reconcile("op-1012-onboarding-call", "confirmed", "1"),
                &close,
            ),
            "not_unknown",
        ),
    ]
}

/// Section 6: dispatch only from prepared, the close barrier, ids.
fn dispatch_and_id_cases(welcome_fx: &str) -> Vec<Case> {
    let close = CLOSE;
    vec![
        // Dispatch only from prepared.
        (
            with(vec!["dispatch", "op-1002-invoice-email"], &[]),
            "blind_retry",
        ),
        (
            with(vec!["dispatch", "op-1001-welcome-email"], &[]),
            "blind_retry",
        ),
        (
            with(vec!["dispatch", "op-1009-password-reset"], &[]),
            "blind_retry",
        ),
        (
            with(vec!["dispatch", "op-1011-annual-plan-refund"], &[]),
            "blind_retry",
        ),
        // Unknown and duplicate ids.
        (with(vec!["show", "op-nope"], &[]), "unknown_operation"),
        (with(vec!["dispatch", "op-nope"], &[]), "unknown_operation"),
        (with(vec!["snapshot", "op-nope"], &[]), "unknown_operation"),
        (
            with(vec!["snapshot", "op-nope"], &close),
            "unknown_operation",
        ),
        (
            with(reconcile("op-nope", "confirmed", "2"), &close),
            "unknown_operation",
        ),
        (
            approve("op-nope", "fx-000001", "3", "op-x3"),
            "unknown_operation",
        ),
        (
            with(
                vec![
                    "prepare",
                    "--op",
                    "op-1001-welcome-email",
                    "--action",
                    "send_email",
                    "--payload",
                    "{}",
                ],
                &[],
            ),
            "duplicate_operation",
        ),
        (
            approve(
                "op-1001-welcome-email",
                welcome_fx,
                "3",
                "op-1002-invoice-email",
            ),
            "duplicate_operation",
        ),
    ]
}

/// The built-in ledger's close barrier, which only its own `receiver
/// apply` reaches from the shell: a directory-only command, so SQLite's.
fn close_barrier_cases(store: Store) -> Vec<Case> {
    let apply = vec![
        "receiver",
        "apply",
        "--op",
        "op-1005-delivery-sms",
        "--action",
        "send_sms",
        "--payload",
        "{}",
    ];
    match store {
        Store::Sqlite => vec![(with(apply, &[]), "operation_closed")],
        Store::Postgres => Vec::new(),
    }
}

/// Section 4: compensation rules.
fn compensation_cases(plan_fx: &str) -> Vec<Case> {
    vec![
        // Compensation rules.
        (
            approve("op-1002-invoice-email", "fx-000002", "2", "op-x4"),
            "original_not_confirmed",
        ),
        (
            approve("op-1001-welcome-email", "fx-999999", "3", "op-x5"),
            "compensation_effect_mismatch",
        ),
        (
            approve("op-1010-annual-plan", plan_fx, "3", "op-x6"),
            "already_approved",
        ),
        (
            with(vec!["dispatch", "op-1001-unapproved-fix"], &[]),
            "compensation_not_approved",
        ),
        (
            with(vec!["dispatch", "op-2001-apology"], &[]),
            "compensation_action_mismatch",
        ),
    ]
}

/// Section 8: receivers, against the fixture's `post`, which cannot close.
fn receiver_cases(sh: &Shell) -> Vec<Case> {
    let close = CLOSE;
    let add = |name: &str, actions: &str, flags: &[&str]| -> Vec<String> {
        let mut args = ["receivers", "add", name, "--actions", actions, "--"]
            .map(String::from)
            .to_vec();
        let command = fixture_adapter(sh, name, flags);
        args.extend(command.iter().map(|a| a.display().to_string()));
        args
    };
    vec![
        // Receivers (SPEC 8).
        (
            with(vec!["snapshot", "op-3001-letter"], &close),
            "close_unsupported",
        ),
        (
            with(reconcile("op-3001-letter", "not_applied", "2"), &close),
            "close_unsupported",
        ),
        (add("builtin", "x", &[]), "reserved_name"),
        (
            add("bad", "x", &["--mode", "describe:garbage"]),
            "adapter_malformed",
        ),
        (
            add("bad", "x", &["--mode", "protocol-2"]),
            "adapter_malformed",
        ),
        (
            add("bad", "x", &["--mode", "unknown-capability"]),
            "adapter_unknown_capability",
        ),
        (add("post", "x", &[]), "receiver_exists"),
        (add("other", "x,post_letter", &[]), "action_routed"),
        (
            with(vec!["receivers", "remove", "post"], &[]),
            "receiver_in_use",
        ),
        (
            with(vec!["receivers", "check", "nobody"], &[]),
            "unknown_receiver",
        ),
        (
            with(vec!["receivers", "remove", "nobody"], &[]),
            "unknown_receiver",
        ),
    ]
}

on_both_stores!(every_refusal_code_exits_3_and_leaves_the_databases_unchanged);
fn every_refusal_code_exits_3_and_leaves_the_databases_unchanged(store: Store) {
    let (sh, welcome_fx, plan_fx) = fixture(store);
    let cases: Vec<Case> = [
        name_and_scope_cases(&welcome_fx),
        verdict_and_version_cases(&welcome_fx),
        dispatch_and_id_cases(&welcome_fx),
        close_barrier_cases(store),
        compensation_cases(&plan_fx),
        receiver_cases(&sh),
    ]
    .concat();
    let before = sh.dump();
    let mut seen = BTreeSet::new();
    for (args, code) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = sh.run(&args);
        assert_refused(&out, code);
        assert_eq!(sh.dump(), before, "recon {args:?} changed the databases");
        seen.insert(*code);
    }
    let mut all: BTreeSet<&str> = REFUSAL_CODES.iter().copied().collect();
    if store == Store::Postgres {
        all.remove("operation_closed");
    }
    assert_eq!(seen, all, "every refusal code is reached");
}

on_both_stores!(stale_reviewer_hears_what_changed_and_who_changed_it);
fn stale_reviewer_hears_what_changed_and_who_changed_it(store: Store) {
    let sh = stories(store);
    let first = sh.json(&[
        "reconcile",
        "op-1003-charge-order",
        "--reviewer",
        "dana",
        "--decision",
        "confirmed",
        "--expected-version",
        "2",
    ]);
    assert_eq!(first["state"], "confirmed");
    let before = sh.dump();
    let second = sh.run(&reconcile("op-1003-charge-order", "confirmed", "2"));
    assert_refused(&second, "stale_version");
    for needle in [
        "expected version 2",
        "found 3",
        "confirmed",
        "reviewer dana",
    ] {
        assert!(
            second.stderr.contains(needle),
            "{needle}: {}",
            second.stderr
        );
    }
    assert_eq!(sh.dump(), before);
}

on_both_stores!(refused_reconcile_with_close_does_not_close_the_operation);
fn refused_reconcile_with_close_does_not_close_the_operation(store: Store) {
    let sh = stories(store);
    let mut args = reconcile("op-1004-support-ticket", "confirmed", "2");
    args.extend(["--close", "--authorized-by", "dana"]);
    assert_refused(&sh.run(&args), "unsupported_verdict");
    let shown = sh.json(&["show", "op-1004-support-ticket"]);
    assert_eq!(shown["closes"], json!([]), "{shown}");
    // So a late original can still land and be seen, as it must.
    assert_eq!(
        sh.json(&["snapshot", "op-1004-support-ticket"])["snapshot"]["closed"],
        false
    );
}
