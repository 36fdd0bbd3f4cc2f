//! The invariants that must hold after any crash, race or step, read straight
//! from both database files with plain SQL (not through recon's readers, so a
//! bug there cannot hide a bug in what was written):
//!
//! - an operation with a `dispatch_log` row is never `prepared`, and one
//!   without is;
//! - the receiver holds no more effects for an operation than its dispatches
//!   plus the direct receiver calls the test made;
//! - every state change out of `unknown` has exactly one evidence row and
//!   every evidence row a state change, with the versions, decision and
//!   effect agreeing; a `not_applied` op is closed at the receiver with no
//!   effect, a `confirmed` one names an exact effect of its own;
//! - an approval exists if and only if its compensation operation does, and
//!   it still describes that operation and a confirmed original;
//! - no effect committed for an operation after it was closed;
//! - the state counts agree with the rows, the journal verifies (its chain,
//!   and the tables as its projection), and
//!   `PRAGMA integrity_check` is `ok` on both files.

use recon::workspace::Journal;
use recon::OpenOptions;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Direct receiver calls per op id, as counted by the test.
pub type DirectCalls = BTreeMap<String, u64>;

#[derive(Debug)]
struct Op {
    kind: String,
    action: String,
    payload: Value,
    state: String,
    version: i64,
    compensates_effect: Option<String>,
    compensates_op: Option<String>,
    confirmed_effect: Option<String>,
}

#[derive(Debug)]
struct Evidence {
    seq: i64,
    op_id: String,
    source: String,
    reviewer: Option<String>,
    decision: String,
    verdict: Option<String>,
    from_version: i64,
    to_version: i64,
    effect_id: Option<String>,
}

#[derive(Debug)]
struct Effect {
    effect_id: String,
    op_id: String,
    action: String,
    compensates: Option<String>,
    payload: Value,
}

#[derive(Debug)]
struct Approval {
    original: String,
    effect_id: String,
    approved_version: i64,
    compensation_op: String,
    action: String,
    payload: Value,
}

fn open(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("open {} read-only: {e}", path.display()))
}

fn rows<T>(
    conn: &Connection,
    sql: &str,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    conn.prepare(sql)
        .and_then(|mut s| s.query_map([], f)?.collect())
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn json(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("stored JSON {text:?}: {e}"))
}

fn integrity(conn: &Connection, file: &str, out: &mut Vec<String>) {
    let result: Vec<String> = rows(conn, "PRAGMA integrity_check", |r| r.get(0));
    if result != ["ok"] {
        out.push(format!("{file}: integrity_check says {result:?}"));
    }
    let fk: Vec<String> = rows(conn, "PRAGMA foreign_key_check", |r| r.get(0));
    if !fk.is_empty() {
        out.push(format!("{file}: foreign key violations in {fk:?}"));
    }
}

/// Every invariant that does not hold, in words; empty when all hold.
pub fn violations(dir: &Path, direct: &DirectCalls) -> Vec<String> {
    let mut out = Vec::new();
    let sender = open(&dir.join("sender.sqlite"));
    let receiver = open(&dir.join("receiver.sqlite"));
    integrity(&sender, "sender", &mut out);
    integrity(&receiver, "receiver", &mut out);

    let ops: BTreeMap<String, Op> = rows(
        &sender,
        "SELECT op_id, kind, action_kind, payload, state, version, compensates_effect_id,
                compensates_op_id, confirmed_effect_id FROM operations",
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                Op {
                    kind: r.get(1)?,
                    action: r.get(2)?,
                    payload: json(r.get(3)?),
                    state: r.get(4)?,
                    version: r.get(5)?,
                    compensates_effect: r.get(6)?,
                    compensates_op: r.get(7)?,
                    confirmed_effect: r.get(8)?,
                },
            ))
        },
    )
    .into_iter()
    .collect();
    let dispatches: BTreeMap<String, i64> = rows(
        &sender,
        "SELECT op_id, COUNT(*) FROM dispatch_log GROUP BY op_id",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .into_iter()
    .collect();
    let evidence: Vec<Evidence> = rows(
        &sender,
        "SELECT seq, op_id, source, reviewer, decision, verdict, from_version, to_version,
                effect_id FROM evidence ORDER BY seq",
        |r| {
            Ok(Evidence {
                seq: r.get(0)?,
                op_id: r.get(1)?,
                source: r.get(2)?,
                reviewer: r.get(3)?,
                decision: r.get(4)?,
                verdict: r.get(5)?,
                from_version: r.get(6)?,
                to_version: r.get(7)?,
                effect_id: r.get(8)?,
            })
        },
    );
    let approvals: Vec<Approval> = rows(
        &sender,
        "SELECT original_op_id, effect_id, approved_version, compensation_op_id, action_kind,
                payload FROM compensation_approvals",
        |r| {
            Ok(Approval {
                original: r.get(0)?,
                effect_id: r.get(1)?,
                approved_version: r.get(2)?,
                compensation_op: r.get(3)?,
                action: r.get(4)?,
                payload: json(r.get(5)?),
            })
        },
    );
    let state_counts: BTreeMap<String, i64> =
        rows(&sender, "SELECT state, n FROM state_counts", |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .into_iter()
        .collect();
    let effects: Vec<Effect> = rows(
        &receiver,
        "SELECT effect_id, op_id, action_kind, compensates_effect_id, payload FROM effects
         ORDER BY seq",
        |r| {
            Ok(Effect {
                effect_id: r.get(0)?,
                op_id: r.get(1)?,
                action: r.get(2)?,
                compensates: r.get(3)?,
                payload: json(r.get(4)?),
            })
        },
    );
    let closed: BTreeMap<String, i64> = rows(
        &receiver,
        "SELECT op_id, effects_at_close FROM closed_ops",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .into_iter()
    .collect();

    let mut effects_of: BTreeMap<&str, Vec<&Effect>> = BTreeMap::new();
    for e in &effects {
        effects_of.entry(e.op_id.as_str()).or_default().push(e);
    }
    let effect_count = |op: &str| effects_of.get(op).map_or(0, Vec::len) as i64;
    let mut evidence_of: BTreeMap<&str, Vec<&Evidence>> = BTreeMap::new();
    for e in &evidence {
        evidence_of.entry(e.op_id.as_str()).or_default().push(e);
        if !ops.contains_key(&e.op_id) {
            out.push(format!(
                "evidence row {} names no operation ({})",
                e.seq, e.op_id
            ));
        }
    }

    for (id, op) in &ops {
        let d = dispatches.get(id).copied().unwrap_or(0);
        let ev = evidence_of.get(id.as_str()).cloned().unwrap_or_default();
        let decided = matches!(op.state.as_str(), "confirmed" | "not_applied");
        if d > 0 && op.state == "prepared" {
            out.push(format!("{id} has a dispatch_log row but is prepared"));
        }
        if d == 0 && op.state != "prepared" {
            out.push(format!("{id} is {} without any dispatch", op.state));
        }
        if d > 1 {
            out.push(format!("{id} was dispatched {d} times"));
        }
        if ev.len() > 1 {
            out.push(format!("{id} has {} evidence rows", ev.len()));
        }
        if decided != (ev.len() == 1) {
            out.push(format!(
                "{id} is {} with {} evidence rows: a state change and its record disagree",
                op.state,
                ev.len()
            ));
        }
        if op.version != 1 + d + ev.len() as i64 {
            out.push(format!(
                "{id} is at version {} after {d} dispatches and {} evidence rows",
                op.version,
                ev.len()
            ));
        }
        if let [e] = ev.as_slice() {
            if e.decision != op.state || e.to_version != op.version || e.from_version != 1 + d {
                out.push(format!(
                    "{id} is {} v{} but evidence {} records {} v{} -> v{}",
                    op.state, op.version, e.seq, e.decision, e.from_version, e.to_version
                ));
            }
            match e.source.as_str() {
                "receipt" if e.reviewer.is_some() || e.verdict.is_some() => out.push(format!(
                    "receipt evidence {} names a reviewer or verdict",
                    e.seq
                )),
                "review" => {
                    let supported = matches!(
                        (e.decision.as_str(), e.verdict.as_deref()),
                        (
                            "confirmed",
                            Some("unique_exact_match" | "exact_match_existence_only")
                        ) | ("not_applied", Some("terminal_absence"))
                    );
                    if !supported {
                        out.push(format!(
                            "review evidence {} records {} on verdict {:?}",
                            e.seq, e.decision, e.verdict
                        ));
                    }
                    if e.reviewer
                        .as_deref()
                        .is_none_or(|r| r.trim().is_empty() || r.trim() != r)
                    {
                        out.push(format!(
                            "review evidence {} has reviewer {:?}",
                            e.seq, e.reviewer
                        ));
                    }
                }
                _ => {}
            }
            if e.effect_id != op.confirmed_effect {
                out.push(format!(
                    "{id}: evidence {} names effect {:?}, the op {:?}",
                    e.seq, e.effect_id, op.confirmed_effect
                ));
            }
        }
        match op.state.as_str() {
            "confirmed" => {
                let own = op
                    .confirmed_effect
                    .as_deref()
                    .and_then(|fx| effects.iter().find(|e| e.effect_id == fx));
                match own {
                    Some(e)
                        if e.op_id == *id
                            && e.action == op.action
                            && e.payload == op.payload
                            && e.compensates == op.compensates_effect => {}
                    other => out.push(format!(
                        "{id} is confirmed on {:?}, which is not an exact effect of it: {other:?}",
                        op.confirmed_effect
                    )),
                }
            }
            "not_applied" => {
                if !closed.contains_key(id) {
                    out.push(format!(
                        "{id} is not_applied but not closed at the receiver"
                    ));
                }
                if effect_count(id) != 0 {
                    out.push(format!(
                        "{id} is not_applied but has {} effects",
                        effect_count(id)
                    ));
                }
            }
            _ => {}
        }
        if op.state != "confirmed" && op.confirmed_effect.is_some() {
            out.push(format!("{id} is {} but names a confirmed effect", op.state));
        }
        // Compensation ops and their approvals, one to one.
        let approval_rows: Vec<&Approval> = approvals
            .iter()
            .filter(|a| a.compensation_op == *id)
            .collect();
        match (op.kind.as_str(), approval_rows.as_slice()) {
            ("original", []) => {}
            ("compensation", [a]) => {
                let original = ops.get(&a.original);
                let holds = op.compensates_effect.as_deref() == Some(a.effect_id.as_str())
                    && op.compensates_op.as_deref() == Some(a.original.as_str())
                    && op.action == a.action
                    && op.payload == a.payload
                    && original.is_some_and(|o| {
                        o.state == "confirmed"
                            && o.version == a.approved_version
                            && o.confirmed_effect.as_deref() == Some(a.effect_id.as_str())
                    });
                if !holds {
                    out.push(format!(
                        "compensation {id} does not match its approval {a:?}"
                    ));
                }
            }
            (kind, rows) => out.push(format!("{kind} op {id} has {} approvals", rows.len())),
        }
    }
    for a in &approvals {
        if ops
            .get(&a.compensation_op)
            .is_none_or(|op| op.kind != "compensation")
        {
            out.push(format!("approval {a:?} has no compensation operation"));
        }
    }

    // The receiver holds no more effects than dispatches plus direct calls.
    for (op_id, list) in &effects_of {
        let allowed = dispatches.get(*op_id).copied().unwrap_or(0)
            + direct.get(*op_id).copied().unwrap_or(0) as i64;
        if list.len() as i64 > allowed {
            out.push(format!(
                "{op_id} has {} effects for {allowed} dispatches and direct calls",
                list.len()
            ));
        }
    }
    // Nothing committed after a close.
    for (op_id, at_close) in &closed {
        if effect_count(op_id) != *at_close {
            out.push(format!(
                "{op_id} had {at_close} effects when closed and has {} now",
                effect_count(op_id)
            ));
        }
    }
    for state in ["prepared", "unknown", "confirmed", "not_applied"] {
        let actual = ops.values().filter(|op| op.state == state).count() as i64;
        if state_counts.get(state) != Some(&actual) {
            out.push(format!(
                "state_counts says {:?} {state}, the rows say {actual}",
                state_counts.get(state)
            ));
        }
    }
    match Journal::open(dir, OpenOptions::default())
        .and_then(|journal| journal.verify(Default::default()))
        .map_err(|e| e.to_string())
    {
        Ok(report) if report.intact => {}
        Ok(report) => out.push(format!("the journal does not verify: {report:?}")),
        Err(e) => out.push(format!("the journal cannot be verified: {e}")),
    }
    out
}

/// Panics with every violated invariant and a dump of both databases.
#[track_caller]
pub fn assert_invariants(dir: &Path, direct: &DirectCalls) {
    let found = violations(dir, direct);
    assert!(
        found.is_empty(),
        "invariants violated:\n  {}\n{}",
        found.join("\n  "),
        crate::support::dump(dir)
    );
}

/// No direct receiver calls.
pub fn none() -> DirectCalls {
    DirectCalls::new()
}

/// `n` direct receiver calls for one op.
pub fn direct(op: &str, n: u64) -> DirectCalls {
    DirectCalls::from([(op.to_string(), n)])
}

/// The checker must be able to fail: each kind of damage below is one a
/// buggy engine could do, written behind recon's back, and each is named.
#[test]
fn the_invariant_checker_names_each_kind_of_damage() {
    use recon::dispatch::DispatchOptions;
    let cases: [(&str, &str, &str); 6] = [
        (
            "receiver",
            "INSERT INTO effects (seq, effect_id, op_id, action_kind, payload)
             VALUES (99, 'fx-000099', 'op', 'pay', '{}')",
            "2 effects for 1 dispatches",
        ),
        (
            "sender",
            "UPDATE operations SET state = 'prepared', version = 1 WHERE op_id = 'op'",
            "has a dispatch_log row but is prepared",
        ),
        (
            "sender",
            "DROP TRIGGER evidence_append_only_delete; DELETE FROM evidence",
            "a state change and its record disagree",
        ),
        (
            "sender",
            "INSERT INTO compensation_approvals VALUES
             ('op', 'fx-000001', 3, 'Ann', 'ghost', 'refund', '{}')",
            "has no compensation operation",
        ),
        (
            "receiver",
            "INSERT INTO closed_ops VALUES ('op', 'Ann', 0)",
            "had 0 effects when closed and has 1 now",
        ),
        (
            "sender",
            "UPDATE state_counts SET n = 7 WHERE state = 'unknown'",
            "state_counts says",
        ),
    ];
    for (file, sql, needle) in cases {
        let mut lab = crate::support::Lab::new();
        lab.ws
            .prepare("op", "pay", &serde_json::json!({"n": 1}))
            .unwrap();
        lab.ws.dispatch("op", DispatchOptions::default()).unwrap();
        assert!(violations(lab.path(), &none()).is_empty());
        let conn = Connection::open(lab.path().join(format!("{file}.sqlite"))).unwrap();
        conn.execute_batch(sql).unwrap();
        drop(conn);
        let found = violations(lab.path(), &none());
        assert!(
            found.iter().any(|v| v.contains(needle)),
            "{sql}: expected {needle:?} in {found:#?}"
        );
    }
}
