//! Rules 2, 3, 5 and 6 of SPEC 8: what a read may claim, who may be asked
//! to close, what evidence names, and closing twice.

use super::{assert_refused_json, sha256_of_answer, Rig, NO_CLOSE};
use crate::stores::{on_both_stores, Store};
use serde_json::{json, Value};

/// Prepares `op` for the receiver of `action` and loses its receipt before
/// anything is applied (the fixture crashes first): `unknown`, no effect.
fn unknown_and_empty(rig: &Rig, receiver: &str, op: &str, action: &str) {
    rig.prepare(op, action, "{}");
    rig.set_mode(receiver, "apply:crash-before");
    assert_eq!(rig.dispatch(op)["outcome"], "unknown");
}

/// The same, but the effect is applied before the crash: one match.
fn unknown_and_applied(rig: &Rig, receiver: &str, op: &str, action: &str) {
    rig.prepare(op, action, "{}");
    rig.set_mode(receiver, "apply:crash-after");
    assert_eq!(rig.dispatch(op)["outcome"], "unknown");
}

on_both_stores!(
    a_receiver_that_cannot_prove_its_reads_never_yields_terminal_absence_or_unique_exact_match
);
fn a_receiver_that_cannot_prove_its_reads_never_yields_terminal_absence_or_unique_exact_match(
    store: Store,
) {
    // Each can close, but one is not complete and the other not
    // authoritative; both overclaim every flag in every answer.
    for (name, flags) in [
        ("partial", ["--can-close", "--authoritative"]),
        ("hearsay", ["--can-close", "--complete"]),
    ] {
        let rig = Rig::on(store);
        let row = rig.register(name, "post_letter", &[], &flags);
        unknown_and_empty(&rig, name, "op-none", "post_letter");
        unknown_and_applied(&rig, name, "op-one", "post_letter");
        rig.set_mode(name, "overclaim");
        for (op, verdict) in [
            ("op-none", "inconclusive"),
            ("op-one", "exact_match_existence_only"),
        ] {
            let read = rig.snapshot(op, true);
            assert_eq!(read["verdict"], verdict, "{name} {op}: {read}");
            let snapshot = &read["snapshot"];
            assert_eq!(snapshot["closed"], true);
            assert_eq!(snapshot["complete"], row["complete"], "{name}: capped");
            assert_eq!(snapshot["authoritative"], row["authoritative"]);
        }
        assert_refused_json(
            &rig.reconcile("op-none", "not_applied", "2", true),
            "unsupported_verdict",
        );
        assert_eq!(rig.show("op-none")["evidence"], json!([]));
    }
}

on_both_stores!(closed_from_a_receiver_that_cannot_close_is_lowered);
fn closed_from_a_receiver_that_cannot_close_is_lowered(store: Store) {
    let rig = Rig::on(store);
    rig.register("mail", "post_letter", &[], NO_CLOSE);
    unknown_and_empty(&rig, "mail", "op-none", "post_letter");
    unknown_and_applied(&rig, "mail", "op-one", "post_letter");
    rig.set_mode("mail", "query:overclaim");
    let empty = rig.snapshot("op-none", false);
    assert_eq!(empty["snapshot"]["closed"], false, "{empty}");
    assert_eq!(empty["verdict"], "inconclusive");
    let one = rig.snapshot("op-one", false);
    assert_eq!(one["snapshot"]["closed"], false, "{one}");
    assert_eq!(one["verdict"], "exact_match_existence_only");
    let queried = rig.answers("mail", "query");
    assert!(
        queried.iter().all(|a| a.contains(r#""closed":true"#)),
        "{queried:?}"
    );
}

on_both_stores!(closing_at_a_receiver_that_cannot_close_is_refused_before_it_is_invoked);
fn closing_at_a_receiver_that_cannot_close_is_refused_before_it_is_invoked(store: Store) {
    let rig = Rig::on(store);
    rig.register("mail", "post_letter", &[], NO_CLOSE);
    unknown_and_empty(&rig, "mail", "op-1", "post_letter");
    rig.set_mode("mail", "");
    let (log, dump) = (rig.log("mail"), rig.dump());
    let close = ["--close", "--authorized-by", "dana"];
    let mut snapshot = vec!["snapshot", "op-1"];
    snapshot.extend(close);
    let refused = [
        rig.recon(&snapshot),
        rig.reconcile("op-1", "not_applied", "2", true),
        rig.reconcile("op-1", "confirmed", "2", true),
    ];
    for out in &refused {
        assert_refused_json(out, "close_unsupported");
        assert!(
            out.stderr.contains("absence is never proof"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(rig.log("mail"), log, "the adapter was invoked");
    assert_eq!(rig.dump(), dump);
}

on_both_stores!(a_receiver_that_cannot_close_allows_confirmed_on_existence_and_never_not_applied);
fn a_receiver_that_cannot_close_allows_confirmed_on_existence_and_never_not_applied(store: Store) {
    let rig = Rig::on(store);
    rig.register("mail", "post_letter", &[], NO_CLOSE);
    unknown_and_empty(&rig, "mail", "op-none", "post_letter");
    unknown_and_applied(&rig, "mail", "op-one", "post_letter");
    rig.set_mode("mail", "");
    for op in ["op-none", "op-one"] {
        assert_refused_json(
            &rig.reconcile(op, "not_applied", "2", false),
            "unsupported_verdict",
        );
    }
    let out = rig.reconcile("op-one", "confirmed", "2", false);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let recorded = out.json();
    assert_eq!(recorded["verdict"], "exact_match_existence_only");
    assert_eq!(recorded["state"], "confirmed");
}

on_both_stores!(evidence_names_its_receiver_the_stored_describe_and_the_answer_it_rests_on);
fn evidence_names_its_receiver_the_stored_describe_and_the_answer_it_rests_on(store: Store) {
    let rig = Rig::with_mail_on(store);
    let stored = rig.list()[0]["describe_sha256"].clone();
    let described = rig.answers("mail", "describe");
    assert_eq!(stored, json!(sha256_of_answer(&described[0])));
    rig.prepare("op-receipt", "post_letter", r#"{"to":"ada","n":1}"#);
    assert_eq!(rig.dispatch("op-receipt")["outcome"], "receipt");
    let applied = rig.answers("mail", "apply");
    unknown_and_applied(&rig, "mail", "op-read", "post_letter");
    unknown_and_applied(&rig, "mail", "op-closed", "post_letter");
    rig.set_mode("mail", "");
    let read = rig.reconcile("op-read", "confirmed", "2", false);
    assert_eq!(read.code, Some(0), "{}", read.stderr);
    let queried = rig.answers("mail", "query");
    let closed = rig.reconcile("op-closed", "confirmed", "2", true);
    assert_eq!(closed.code, Some(0), "{}", closed.stderr);
    assert_eq!(closed.json()["verdict"], "unique_exact_match");
    let closes = rig.answers("mail", "close");
    for (op, source, answer) in [
        ("op-receipt", "receipt", &applied[0]),
        ("op-read", "review", queried.last().unwrap()),
        ("op-closed", "review", closes.last().unwrap()),
    ] {
        let evidence = rig.show(op)["evidence"].clone();
        let row: &Value = &evidence[0];
        assert_eq!(row["source"], source, "{op}");
        assert_eq!(row["receiver"], "mail", "{op}");
        assert_eq!(row["receiver_describe_sha256"], stored, "{op}");
        assert_eq!(
            row["response_sha256"],
            json!(sha256_of_answer(answer)),
            "{op}"
        );
    }
}

on_both_stores!(closing_twice_returns_the_same_snapshot);
fn closing_twice_returns_the_same_snapshot(store: Store) {
    let rig = Rig::with_mail_on(store);
    unknown_and_applied(&rig, "mail", "op-1", "post_letter");
    rig.set_mode("mail", "");
    let mut first = rig.snapshot("op-1", true);
    let mut second = rig.snapshot("op-1", true);
    assert_eq!(first["snapshot"]["closed"], true);
    assert_eq!(first["verdict"], "unique_exact_match");
    // Each close is recorded as an observation of its own, at its time.
    let (one, two) = (first["observation"].take(), second["observation"].take());
    assert_eq!(
        (one["observed_by"].clone(), two["verdict"].clone()),
        (json!("dana"), json!("unique_exact_match"))
    );
    assert_eq!(first, second);
    assert_eq!(rig.calls("mail", "close").len(), 2);
}

on_both_stores!(a_close_whose_answer_was_lost_can_be_repeated);
fn a_close_whose_answer_was_lost_can_be_repeated(store: Store) {
    let rig = Rig::with_mail_on(store);
    unknown_and_empty(&rig, "mail", "op-1", "post_letter");
    rig.set_mode("mail", "close:crash-after");
    let lost = rig.recon(&["snapshot", "op-1", "--close", "--authorized-by", "dana"]);
    assert_eq!(lost.code, Some(4), "{}", lost.stderr);
    assert!(lost.stderr.contains("crash"), "{}", lost.stderr);
    rig.set_mode("mail", "");
    let again = rig.snapshot("op-1", true);
    assert_eq!(again["verdict"], "terminal_absence", "{again}");
    // The repeated close is the one a decision rests on.
    let out = rig.reconcile("op-1", "not_applied", "2", true);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["state"], "not_applied");
}

on_both_stores!(a_match_for_another_operation_is_refused_as_unusable);
fn a_match_for_another_operation_is_refused_as_unusable(store: Store) {
    // Two operations of one action and payload: op-a's effect is a match
    // that fits op-b in every field but its op_id.
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-a", "post_letter", "{}");
    assert_eq!(rig.dispatch("op-a")["outcome"], "receipt");
    unknown_and_empty(&rig, "mail", "op-b", "post_letter");
    rig.set_mode("mail", "query:other-ops");
    let dump = rig.dump();
    let unusable = "receiver mail gave no usable answer: a match is for operation op-a, not op-b";
    let read = rig.recon(&["snapshot", "op-b", "--json"]);
    let decided = rig.reconcile("op-b", "confirmed", "2", false);
    for out in [&read, &decided] {
        assert_eq!(out.code, Some(4), "{}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(unusable), "{}", out.stderr);
    }
    assert_eq!(
        rig.dump(),
        dump,
        "nothing rests on another operation's effect"
    );
    let shown = rig.show("op-b");
    assert_eq!(shown["operation"]["state"], "unknown");
    assert_eq!(shown["evidence"], json!([]));
    assert_eq!(
        rig.answers("mail", "query").len(),
        2,
        "both reads were asked"
    );
}

on_both_stores!(snapshot_suggests_a_closing_snapshot_only_where_one_could_settle_the_read);
fn snapshot_suggests_a_closing_snapshot_only_where_one_could_settle_the_read(store: Store) {
    // (receiver, its flags, closing read?, whether the text may suggest a
    // close): one that cannot close, one whose reads are never complete
    // (open and closed), and the full contract, open (the one suggestion)
    // and closed.
    let cases: [(&str, &[&str], bool, bool); 5] = [
        ("mail", NO_CLOSE, false, false),
        ("partial", &["--can-close", "--authoritative"], false, false),
        ("partial", &["--can-close", "--authoritative"], true, false),
        ("full", super::FULL, false, true),
        ("full", super::FULL, true, false),
    ];
    for (name, flags, close, suggests) in cases {
        let rig = Rig::on(store);
        rig.register(name, "post_letter", &[], flags);
        unknown_and_empty(&rig, name, "op-none", "post_letter");
        rig.set_mode(name, "");
        let mut args = vec!["snapshot", "op-none"];
        if close {
            args.extend(["--close", "--authorized-by", "dana"]);
        }
        let text = rig.ok(&args).stdout;
        assert_eq!(
            text.contains("take a closing snapshot"),
            suggests,
            "{name}, close {close}: {text}"
        );
    }
}
