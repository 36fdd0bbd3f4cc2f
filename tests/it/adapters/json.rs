//! Rule 7 on the adapter's side: JSON has one meaning. A payload echoed
//! with its numbers spelled another way (`10.0` for `10`) is the same
//! payload, in a receipt and in a read alike; an answer that names a key
//! twice, at any depth, is `garbage`; an effect id that breaks the op-id
//! rules is `garbage` too, and is never shown raw.

use super::lost::assert_lost;
use super::Rig;
use crate::cli::assert_refused;
use crate::stores::{on_both_stores, Store};
use serde_json::json;

on_both_stores!(a_receipt_of_ten_point_zero_and_its_read_back_agree);
fn a_receipt_of_ten_point_zero_and_its_read_back_agree(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"amount":10.0,"items":[1,2]}"#);
    // The fixture keeps and echoes every integer as a float.
    rig.set_mode("mail", "apply:floats");
    let report = rig.dispatch("op-1");
    assert_eq!(report["outcome"], "receipt", "{report}");
    assert!(rig.answers("mail", "apply")[0].contains(r#""amount":10.0"#));
    let read = rig.snapshot("op-1", false);
    assert!(rig.answers("mail", "query")[0].contains(r#""items":[1.0,2.0]"#));
    assert_eq!(read["verdict"], "exact_match_existence_only", "{read}");
    let closed = rig.snapshot("op-1", true);
    assert_eq!(closed["verdict"], "unique_exact_match", "{closed}");
}

on_both_stores!(a_duplicate_key_in_an_adapter_answer_is_garbage);
fn a_duplicate_key_in_an_adapter_answer_is_garbage(store: Store) {
    // In a receipt: the answer carries an ignored member whose object
    // names a key twice; nothing counts, and nothing was written.
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    rig.set_mode("mail", "apply:duplicate-key");
    let report = rig.dispatch("op-1");
    assert_lost(&rig, "op-1", &report, "garbage", json!(0));
    let detail = report["adapter_failure"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(r#"has the key "k" twice in the object at /x-note/level/0"#),
        "{detail}"
    );
    // In a read: no usable answer (exit 4), so nothing to decide on.
    rig.set_mode("mail", "query:duplicate-key");
    let out = rig.recon(&["snapshot", "op-1"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr.contains("garbage") && out.stderr.contains(r#""k" twice"#),
        "{}",
        out.stderr
    );
    // In a description: the registration is refused, and nothing stored.
    let (dump, list) = (rig.dump(), rig.list());
    let out = rig.add(
        "probe",
        "probe_it",
        &[],
        &["--mode", "describe:duplicate-key"],
    );
    assert_refused(&out, "adapter_malformed");
    assert!(out.stderr.contains(r#""k" twice"#), "{}", out.stderr);
    assert_eq!((rig.dump(), rig.list()), (dump, list));
}

on_both_stores!(an_adapter_answer_holding_a_number_above_2_53_minus_1_is_garbage);
/// Issue 29, reproduction 12: a number beyond 2^53-1 has no one meaning
/// (`100000000000000000001` reads as the double `1e20`), so an answer
/// holding one, anywhere and in any notation, is `garbage`, in a receipt
/// and in a read.
fn an_adapter_answer_holding_a_number_above_2_53_minus_1_is_garbage(store: Store) {
    let rig = Rig::with_mail_on(store);
    let notations = [
        ("huge-number", "100000000000000000001"),
        ("huge-exponent", "1e20"),
        ("huge-decimal", "9007199254740992.0"),
    ];
    for (n, (mode, number)) in notations.iter().enumerate() {
        let op = format!("op-{n}");
        rig.prepare(&op, "post_letter", r#"{"amount":100000}"#);
        rig.set_mode("mail", &format!("apply:{mode}"));
        let report = rig.dispatch(&op);
        assert!(
            rig.answers("mail", "apply")[n].contains(&format!(":{number}}}")),
            "{mode}"
        );
        assert_lost(&rig, &op, &report, "garbage", json!(0));
        let detail = report["adapter_failure"]["detail"].as_str().unwrap();
        assert!(
            detail.contains("2^53-1") && detail.contains("/x-note"),
            "{mode}: {detail}"
        );
    }
    rig.set_mode("mail", "query:huge-exponent");
    let out = rig.recon(&["snapshot", "op-1"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("garbage"), "{}", out.stderr);
}

on_both_stores!(a_receipt_whose_payload_names_a_key_twice_is_garbage);
fn a_receipt_whose_payload_names_a_key_twice_is_garbage(store: Store) {
    // `{"amount":1,"amount":1000}` for a request of 1000: a reader keeping
    // the last value would call it exact.
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"amount":1000}"#);
    rig.set_mode("mail", "apply:duplicate-payload");
    let report = rig.dispatch("op-1");
    assert!(rig.answers("mail", "apply")[0].contains(r#""payload":{"amount":1,"amount":1000}"#));
    assert_lost(&rig, "op-1", &report, "garbage", json!(0));
}

on_both_stores!(an_effect_id_from_an_adapter_that_breaks_the_op_id_rules_is_garbage);
fn an_effect_id_from_an_adapter_that_breaks_the_op_id_rules_is_garbage(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    // The fixture writes the effect under an id holding a right-to-left
    // override, and says so in its receipt.
    rig.set_mode("mail", "apply:bad-effect-id");
    let report = rig.dispatch("op-1");
    assert_lost(&rig, "op-1", &report, "garbage", json!(0));
    let detail = report["adapter_failure"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("effect_id") && detail.contains(r"\u{202e}"),
        "{detail}"
    );
    // A read that finds the effect is no usable answer either.
    rig.set_mode("mail", "");
    let out = rig.recon(&["snapshot", "op-1"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("garbage"), "{}", out.stderr);
    assert!(!out.stderr.contains('\u{202e}'), "{}", out.stderr);
    assert_eq!(rig.show("op-1")["evidence"], json!([]));
}

/// `"recon_adapter": 1.0` is protocol 1 (rule 7: `1.0` is the number 1),
/// not a missing field; `1.5` is no protocol and says so, and `2.0` is
/// protocol 2.
#[test]
fn a_protocol_number_written_1_0_is_protocol_1() {
    use recon::receiver::protocol::{parse_answer, Answer, Verb};
    let describe = |protocol: serde_json::Value| {
        json!({"recon_adapter": protocol, "name": "n", "version": "1", "can_close": false,
               "query": {"complete": false, "authoritative": false}})
    };
    assert!(matches!(
        parse_answer(Verb::Describe, "", &describe(json!(1.0))),
        Ok(Answer::Described(_))
    ));
    let half = parse_answer(Verb::Describe, "", &describe(json!(1.5))).unwrap_err();
    assert!(half.contains("whole number"), "{half}");
    let two = parse_answer(Verb::Describe, "", &describe(json!(2.0))).unwrap_err();
    assert!(two.contains("protocol 2"), "{two}");
}
