//! Each guard has a test of its own, so removing any one of them fails a
//! test even while another guard would still catch the same write.

use crate::support::Lab;
use recon::domain::{
    check_compensation_dispatch, Approval, EffectRequest, OpKind, OpState, Operation,
};
use recon::receiver::{Builtin, Receiver};
use recon::OpenOptions;
use serde_json::json;

/// A closed operation at the built-in ledger, and the ledger's file.
fn closed_lab() -> Lab {
    let mut lab = Lab::new();
    lab.ws.prepare("op", "pay", &json!({"n": 1})).unwrap();
    lab.ws.snapshot("op", Some("rosa")).unwrap();
    lab
}

fn apply(lab: &Lab) -> recon::Result<recon::domain::Effect> {
    Builtin::open(lab.path(), OpenOptions::default())
        .unwrap()
        .apply(
            lab.ws.id(),
            &EffectRequest {
                op_id: "op",
                action_kind: "pay",
                payload: &json!({"n": 1}),
                compensates_effect_id: None,
            },
        )
}

#[test]
fn the_ledgers_explicit_check_refuses_a_write_for_a_closed_op_without_the_trigger() {
    let lab = closed_lab();
    let conn = rusqlite::Connection::open(lab.path().join("receiver.sqlite")).unwrap();
    conn.execute_batch("DROP TRIGGER effects_refuse_closed")
        .unwrap();
    drop(conn);
    let refused = apply(&lab).unwrap_err();
    assert_eq!(
        refused.refusal().map(|r| r.code()),
        Some("operation_closed")
    );
    assert_eq!(lab.ws.effect_count(Some("op")).unwrap(), 0);
}

#[test]
fn the_ledgers_trigger_refuses_a_write_for_a_closed_op_from_any_path() {
    let lab = closed_lab();
    // A write path that forgot the explicit check: plain SQL.
    let conn = rusqlite::Connection::open(lab.path().join("receiver.sqlite")).unwrap();
    let written = conn.execute(
        "INSERT INTO effects (effect_id, op_id, action_kind, payload)
         VALUES ('fx-999999', 'op', 'pay', '{\"n\":1}')",
        [],
    );
    assert!(written
        .unwrap_err()
        .to_string()
        .contains("operation_closed"));
    assert_eq!(lab.ws.effect_count(Some("op")).unwrap(), 0);
}

fn op(state: OpState, version: i64) -> Operation {
    Operation {
        surplus_effect_ids: Vec::new(),
        op_id: "orig".into(),
        kind: OpKind::Original,
        action_kind: "charge".into(),
        payload: json!({"amount": 10}),
        state,
        version,
        compensates_effect_id: None,
        compensates_op_id: None,
        confirmed_effect_id: Some("fx-000001".into()),
        receiver: "builtin".into(),
        triage: Default::default(),
    }
}

#[test]
fn a_compensation_dispatch_is_refused_when_the_original_moved_past_the_approved_version() {
    let approval = Approval {
        reason: None,
        original_op_id: "orig".into(),
        effect_id: "fx-000001".into(),
        approved_version: 3,
        approver: "ines".into(),
        compensation_op_id: "comp".into(),
        action_kind: "refund".into(),
        payload: json!({"amount": 10}),
    };
    let compensation = Operation {
        surplus_effect_ids: Vec::new(),
        op_id: "comp".into(),
        kind: OpKind::Compensation,
        action_kind: "refund".into(),
        payload: json!({"amount": 10}),
        state: OpState::Prepared,
        version: 1,
        compensates_effect_id: Some("fx-000001".into()),
        compensates_op_id: Some("orig".into()),
        confirmed_effect_id: None,
        receiver: "builtin".into(),
        triage: Default::default(),
    };
    let at_approval = op(OpState::Confirmed, 3);
    assert_eq!(
        check_compensation_dispatch(&compensation, Some(&approval), Some(&at_approval)),
        Ok(())
    );
    // Under READ COMMITTED another writer could move the original on; the
    // recheck must see it whatever the state.
    let moved = op(OpState::Confirmed, 4);
    let refused = check_compensation_dispatch(&compensation, Some(&approval), Some(&moved));
    assert_eq!(refused.map_err(|r| r.code()), Err("stale_version"));
}
