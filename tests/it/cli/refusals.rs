//! Every refusal code of SPEC sections 3, 4, 6 and 8, reached from the shell:
//! exit 3, `refused: <code>: <detail>` on stderr, and nothing written.

use super::{assert_refused, Shell};
use crate::support::{adapter_fixture, REFUSAL_CODES};
use recon::dispatch::DispatchOptions;
use recon::domain::CompensationRequest;
use recon::workspace::NewReceiver;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The demo workspace, plus two compensations that only a buggy writer can
/// make: one without an approval, one whose action changed after it; and a
/// receiver `post` that cannot close, with an `unknown` letter routed to it.
fn fixture() -> (Shell, String, String) {
    let sh = Shell::demo(0);
    let mut ws = sh.workspace();
    let post = fixture_adapter(&sh, "post", &[]);
    ws.register_receiver(&NewReceiver {
        env: &[],
        name: "post",
        actions: &["post_letter".to_string()],
        program: &post[0],
        args: &post[1..]
            .iter()
            .map(|a| a.display().to_string())
            .collect::<Vec<_>>(),
        timeout_ms: None,
    })
    .unwrap();
    ws.prepare("op-3001-letter", "post_letter", &json!({"to": "ada"}))
        .unwrap();
    std::fs::write(sh.ws.with_file_name("post.mode"), "apply:crash-before").unwrap();
    ws.dispatch("op-3001-letter", DispatchOptions::default())
        .unwrap();
    let welcome = ws.require("op-1001-welcome-email").unwrap();
    let welcome_fx = welcome.confirmed_effect_id.clone().unwrap();
    ws.drills()
        .unwrap()
        .insert_unapproved_compensation(
            "op-1001-unapproved-fix",
            "send_correction_email",
            &json!({"to": "maya.lopez@example.com"}),
            &welcome.op_id,
            &welcome_fx,
        )
        .unwrap();
    ws.prepare(
        "op-2001-receipt-email",
        "send_email",
        &json!({"to": "kofi.mensah@example.com", "subject": "Receipt"}),
    )
    .unwrap();
    ws.dispatch("op-2001-receipt-email", DispatchOptions::default())
        .unwrap();
    let receipt = ws.require("op-2001-receipt-email").unwrap();
    ws.approve_compensation(&CompensationRequest {
        original_op_id: &receipt.op_id,
        effect_id: receipt.confirmed_effect_id.as_deref().unwrap(),
        approver: "lee",
        expected_version: receipt.version,
        compensation_op_id: "op-2001-apology",
        action_kind: "send_apology_email",
        payload: &json!({"to": "kofi.mensah@example.com"}),
    })
    .unwrap();
    ws.drills()
        .unwrap()
        .change_action_kind("op-2001-apology", "send_sms")
        .unwrap();
    let plan = ws.require("op-1010-annual-plan").unwrap();
    (sh, welcome_fx, plan.confirmed_effect_id.unwrap())
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
        // The receiver's close barrier.
        (
            with(
                vec![
                    "receiver",
                    "apply",
                    "--op",
                    "op-1005-delivery-sms",
                    "--action",
                    "send_sms",
                    "--payload",
                    "{}",
                ],
                &[],
            ),
            "operation_closed",
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

#[test]
fn every_refusal_code_exits_3_and_leaves_the_databases_unchanged() {
    let (sh, welcome_fx, plan_fx) = fixture();
    let cases: Vec<Case> = [
        name_and_scope_cases(&welcome_fx),
        verdict_and_version_cases(&welcome_fx),
        dispatch_and_id_cases(&welcome_fx),
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
    let all: BTreeSet<&str> = REFUSAL_CODES.iter().copied().collect();
    assert_eq!(seen, all, "every refusal code is reached");
}

#[test]
fn stale_reviewer_hears_what_changed_and_who_changed_it() {
    let sh = Shell::demo(0);
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

#[test]
fn refused_reconcile_with_close_does_not_close_the_operation() {
    let sh = Shell::demo(0);
    let mut args = reconcile("op-1004-support-ticket", "confirmed", "2");
    args.extend(["--close", "--authorized-by", "dana"]);
    assert_refused(&sh.run(&args), "unsupported_verdict");
    assert!(sh
        .workspace()
        .closure("op-1004-support-ticket")
        .unwrap()
        .is_none());
    // So a late original can still land and be seen, as it must.
    assert_eq!(
        sh.json(&["snapshot", "op-1004-support-ticket"])["snapshot"]["closed"],
        false
    );
}
