//! SPEC 12, "A closed snapshot is a recorded close": a decision whose
//! snapshot says `closed: true` names the `closed` entry that recorded that
//! close (`close_seq`) and carries exactly that entry's snapshot (the same
//! canonical SHA-256); a `closed` entry follows a `close_requested` of its
//! operation. The one statement of what counts as backed: the decision
//! script asks [`backing_close`], `verify` asks [`check_close_named`] and
//! [`check_recorded_close`], and the PostgreSQL outbox's journal trigger
//! holds a login to the same (`store/postgres/roles.rs`).

use super::{canonical_sha256, Refusal};
use serde_json::Value;

/// The schema from which closes and decisions are held to this rule: the
/// entries an upgrade from an older one found are not.
pub const RECORDED_CLOSES_SINCE: i64 = 7;

/// A `closed` entry of one operation's journal, as a decision is held to
/// it: its seq and the canonical SHA-256 of the snapshot it recorded (none
/// for a close recorded before schema 7, which named no snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedClose {
    pub seq: i64,
    pub snapshot_sha256: Option<String>,
}

/// Whether a decision's snapshot says the operation was closed.
pub fn says_closed(snapshot: &Value) -> bool {
    snapshot.get("closed") == Some(&Value::Bool(true))
}

/// The close a decision on `snapshot` rests on, of the operation's
/// recorded `closes` (in seq order): none when the snapshot does not say
/// `closed: true`; else the latest whose snapshot is exactly this one;
/// else `unbacked_close` (a close recorded before schema 7 names no
/// snapshot: closing again, which a receiver answers with the same
/// snapshot, records one that does).
pub fn backing_close(
    op_id: &str,
    snapshot: &Value,
    closes: &[RecordedClose],
) -> Result<Option<i64>, Refusal> {
    if !says_closed(snapshot) {
        return Ok(None);
    }
    let hash = canonical_sha256(snapshot);
    let backing = closes
        .iter()
        .rev()
        .find(|close| close.snapshot_sha256.as_deref() == Some(hash.as_str()));
    match (backing, closes.is_empty()) {
        (Some(close), _) => Ok(Some(close.seq)),
        (None, true) => Err(unbacked(
            op_id,
            "no close of it is recorded (a close whose answer was lost is not: close it again, \
             `--close`, to record it)",
        )),
        (None, false) => Err(unbacked(
            op_id,
            "no recorded close of it holds this snapshot (close it again to record the \
             snapshot the receiver answers now)",
        )),
    }
}

/// Whether a decision names its close as the rule asks: a snapshot that
/// says `closed: true` names (`close_seq`) one of the operation's recorded
/// `closes` whose snapshot has its canonical SHA-256; any other snapshot
/// names none.
pub fn check_close_named(
    op_id: &str,
    snapshot: &Value,
    named: Option<i64>,
    closes: &[RecordedClose],
) -> Result<(), Refusal> {
    let seq = match (says_closed(snapshot), named) {
        (false, None) => return Ok(()),
        (false, Some(seq)) => {
            return Err(unbacked(
                op_id,
                &format!("it names the close {seq}, and its snapshot is not closed"),
            ))
        }
        (true, None) => return Err(unbacked(op_id, "it names no recorded close")),
        (true, Some(seq)) => seq,
    };
    let Some(close) = closes.iter().find(|close| close.seq == seq) else {
        return Err(unbacked(
            op_id,
            &format!("entry {seq} is not a recorded close of it"),
        ));
    };
    if close.snapshot_sha256.as_deref() != Some(canonical_sha256(snapshot).as_str()) {
        return Err(unbacked(
            op_id,
            &format!("its snapshot is not the one its close (entry {seq}) recorded"),
        ));
    }
    Ok(())
}

/// Whether a `closed` entry is a recorded close: it follows a
/// `close_requested` of its operation (`requested`), and names the
/// canonical SHA-256 of the snapshot it carries. Why not, if not.
pub fn check_recorded_close(
    requested: bool,
    snapshot: Option<&Value>,
    snapshot_sha256: Option<&str>,
) -> Result<(), String> {
    if !requested {
        return Err("it follows no close_requested of its operation".into());
    }
    match snapshot {
        Some(snapshot) if snapshot_sha256 == Some(canonical_sha256(snapshot).as_str()) => Ok(()),
        _ => Err("its snapshot_sha256 is not the canonical SHA-256 of its snapshot".into()),
    }
}

fn unbacked(op_id: &str, why: &str) -> Refusal {
    Refusal::UnbackedClose(format!(
        "operation {op_id}: a decision on a closed snapshot rests on a recorded close, and {why}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn closed(matches: Value) -> Value {
        json!({"op_id": "op", "matches": matches, "complete": true,
               "authoritative": true, "closed": true})
    }

    fn close(seq: i64, snapshot: &Value) -> RecordedClose {
        RecordedClose {
            seq,
            snapshot_sha256: Some(canonical_sha256(snapshot)),
        }
    }

    #[test]
    fn a_closed_snapshot_is_backed_by_the_latest_close_that_recorded_it_exactly() {
        let empty = closed(json!([]));
        let held = closed(json!([{"effect_id": "e1"}]));
        let closes = [close(3, &empty), close(5, &held), close(7, &empty)];
        assert_eq!(backing_close("op", &empty, &closes), Ok(Some(7)));
        assert_eq!(backing_close("op", &held, &closes), Ok(Some(5)));
        let open = json!({"closed": false, "matches": []});
        assert_eq!(backing_close("op", &open, &[]), Ok(None));
        assert!(check_close_named("op", &held, Some(5), &closes).is_ok());
        assert!(check_close_named("op", &open, None, &closes).is_ok());
    }

    #[test]
    fn a_closed_snapshot_without_its_recorded_close_is_unbacked() {
        let empty = closed(json!([]));
        let held = closed(json!([{"effect_id": "e1"}]));
        let old = RecordedClose {
            seq: 2,
            snapshot_sha256: None,
        };
        for closes in [vec![], vec![close(5, &held)], vec![old]] {
            let refused = backing_close("op", &empty, &closes).unwrap_err();
            assert_eq!(refused.code(), "unbacked_close", "{refused}");
        }
        let closes = [close(5, &held)];
        for named in [None, Some(5), Some(4)] {
            let refused = check_close_named("op", &empty, named, &closes).unwrap_err();
            assert_eq!(refused.code(), "unbacked_close", "{named:?}");
        }
        let open = json!({"closed": false, "matches": []});
        assert!(check_close_named("op", &open, Some(5), &closes).is_err());
    }

    #[test]
    fn a_recorded_close_follows_its_request_and_names_its_snapshot_hash() {
        let snapshot = closed(json!([]));
        let hash = canonical_sha256(&snapshot);
        assert!(check_recorded_close(true, Some(&snapshot), Some(&hash)).is_ok());
        assert!(check_recorded_close(false, Some(&snapshot), Some(&hash)).is_err());
        assert!(check_recorded_close(true, Some(&snapshot), Some("00")).is_err());
        assert!(check_recorded_close(true, None, Some(&hash)).is_err());
    }
}
