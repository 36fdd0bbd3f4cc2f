//! The workspace's metadata (the outbox's `meta` table) against what the
//! journal and the ledger imply.
//!
//! `verify` trusts two keys to time the entries an upgrade from schema 4
//! found (`upgraded_at`, `upgraded_through_seq`), and the pair rests on two
//! more (`workspace_id`, `creation_complete`). None is a journal entry, so
//! each is held to what can be derived without it: the entries written
//! before the upgrade are exactly those without an `at`, so the last of
//! them is `upgraded_through_seq`; an act is journaled only once creation
//! completed, so an outbox with entries carries the mark; and the ledger,
//! when it is there, carries the workspace's id. `upgraded_at` is held by
//! the rows it times (the replay compares each with it); nothing in the
//! journal carries it for certain (see docs/internals.md).

use super::entry::Settings;
use super::projection::{Mismatch, Table};
use super::row::{Column, Row};
use serde_json::Value;

pub const WORKSPACE_ID: &str = "workspace_id";
pub const CREATION_COMPLETE: &str = "creation_complete";
pub const UPGRADED_AT: &str = "upgraded_at";
pub const UPGRADED_THROUGH_SEQ: &str = "upgraded_through_seq";

pub const META: Table = Table {
    name: "meta",
    columns: &["key", "value"],
    key: 0,
};

/// What the replay learned of the journal that the metadata must agree
/// with.
#[derive(Debug, Default, Clone, Copy)]
pub struct JournalFacts<'a> {
    /// Entries replayed (readable or not).
    pub entries: u64,
    /// The seq of the last readable entry without an `at` (0 for none).
    pub last_untimed: i64,
    /// Where the store journals its settings (SPEC 12, PostgreSQL): the
    /// newest `settings` entry's, `Some(None)` when there is none (or it
    /// could not be read); `None` where settings are not journaled.
    pub settings: Option<Option<&'a Settings>>,
}

/// Every `meta` value that disagrees with `facts` and with the ledger's
/// id (`ledger_id`, when the ledger is there and holds one), each as a
/// mismatch of the field `meta.KEY`: what the journal (or the ledger)
/// implies, and what the table holds.
pub fn mismatches(rows: &[Row], facts: JournalFacts<'_>, ledger_id: Option<&str>) -> Vec<Mismatch> {
    let stored = |key: &str| {
        rows.iter()
            .find(|row| row.get(0) == Column::Text(key))
            .map(|row| row.get(1))
    };
    let mut out = Vec::new();
    let mut want = |key: &str, expected: &str| {
        let held = stored(key);
        if held != Some(Column::Text(expected)) {
            out.push(Mismatch {
                op_id: None,
                field: format!("meta.{key}"),
                journal: Value::from(expected),
                table: held.map_or(Value::Null, Column::value),
            });
        }
    };
    if facts.entries > 0 || stored(CREATION_COMPLETE).is_some() {
        want(CREATION_COMPLETE, "1");
    }
    if let Some(id) = ledger_id {
        want(WORKSPACE_ID, id);
    }
    let upgraded = facts.last_untimed > 0
        || stored(UPGRADED_THROUGH_SEQ).is_some()
        || stored(UPGRADED_AT).is_some();
    if upgraded {
        want(UPGRADED_THROUGH_SEQ, &facts.last_untimed.to_string());
    }
    match facts.settings {
        // Each setting is what the newest `settings` entry says (four
        // eyes off: no row).
        Some(Some(settings)) => {
            for key in Settings::KEYS {
                let (expected, held) = (settings.meta_value(key), stored(key));
                if held != expected.map(Column::Text) {
                    out.push(Mismatch {
                        op_id: None,
                        field: format!("meta.{key}"),
                        journal: expected.map_or(Value::Null, Value::from),
                        table: held.map_or(Value::Null, Column::value),
                    });
                }
            }
        }
        // Settings set by no act the journal holds.
        Some(None) if facts.entries > 0 => out.push(Mismatch {
            op_id: None,
            field: "meta.settings".to_string(),
            journal: Value::Null,
            table: Value::from("set with no settings entry"),
        }),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(pairs: &[(&str, &str)]) -> Vec<Row> {
        pairs
            .iter()
            .map(|(key, value)| {
                let mut row = Row::default();
                row.push_text(key);
                row.push_text(value);
                row
            })
            .collect()
    }

    fn fields(found: &[Mismatch]) -> Vec<(String, Value, Value)> {
        found
            .iter()
            .map(|m| (m.field.clone(), m.journal.clone(), m.table.clone()))
            .collect()
    }

    #[track_caller]
    fn check(
        pairs: &[(&str, &str)],
        facts: (u64, i64),
        ledger: Option<&str>,
        expected: &[(&str, Value, Value)],
    ) {
        let facts = JournalFacts {
            entries: facts.0,
            last_untimed: facts.1,
            settings: None,
        };
        let expected: Vec<_> = expected
            .iter()
            .map(|(f, j, t)| (format!("meta.{f}"), j.clone(), t.clone()))
            .collect();
        assert_eq!(fields(&mismatches(&meta(pairs), facts, ledger)), expected);
    }

    #[test]
    fn each_key_is_held_to_what_the_journal_and_the_ledger_imply() {
        let whole = [(WORKSPACE_ID, "w1"), (CREATION_COMPLETE, "1")];
        check(&whole, (5, 0), Some("w1"), &[]);
        check(&whole, (5, 0), None, &[]);
        // A fresh outbox, its creation not yet completed: nothing to hold.
        check(&[(WORKSPACE_ID, "w1")], (0, 0), None, &[]);
        check(
            &[(WORKSPACE_ID, "w1")],
            (1, 0),
            None,
            &[(CREATION_COMPLETE, json!("1"), Value::Null)],
        );
        check(
            &[(WORKSPACE_ID, "w1"), (CREATION_COMPLETE, "0")],
            (0, 0),
            None,
            &[(CREATION_COMPLETE, json!("1"), json!("0"))],
        );
        check(
            &whole,
            (5, 0),
            Some("w2"),
            &[(WORKSPACE_ID, json!("w2"), json!("w1"))],
        );
        let upgraded = [
            (WORKSPACE_ID, "w1"),
            (CREATION_COMPLETE, "1"),
            (UPGRADED_AT, "2026-12-03T09:00:00.000Z"),
            (UPGRADED_THROUGH_SEQ, "34"),
        ];
        check(&upgraded, (40, 34), Some("w1"), &[]);
        // Raised or lowered, the seq is not the last entry without a time.
        for last in [33, 35, 0] {
            check(
                &upgraded,
                (40, last),
                None,
                &[(UPGRADED_THROUGH_SEQ, json!(last.to_string()), json!("34"))],
            );
        }
        // Untimed entries with no upgrade recorded, or an upgrade recorded
        // in a file that had none.
        check(
            &whole,
            (40, 34),
            None,
            &[(UPGRADED_THROUGH_SEQ, json!("34"), Value::Null)],
        );
        check(
            &[
                (CREATION_COMPLETE, "1"),
                (UPGRADED_AT, "2026-12-03T09:00:00.000Z"),
            ],
            (4, 0),
            None,
            &[(UPGRADED_THROUGH_SEQ, json!("0"), Value::Null)],
        );
    }

    #[test]
    fn where_settings_are_journaled_each_is_what_the_newest_settings_entry_says() {
        let settings = Settings {
            four_eyes: true,
            workspace_id: "w1".into(),
            owner: "ann".into(),
            roles_prefix: "team".into(),
        };
        let held = [
            (WORKSPACE_ID, "w1"),
            (CREATION_COMPLETE, "1"),
            ("four_eyes", "1"),
            ("owner", "ann"),
            ("roles_prefix", "team"),
        ];
        let facts = |settings| JournalFacts {
            entries: 3,
            last_untimed: 0,
            settings,
        };
        let found = |rows: &[(&str, &str)], settings| {
            fields(&mismatches(&meta(rows), facts(settings), None))
        };
        assert_eq!(found(&held, Some(Some(&settings))), vec![]);
        // Each key changed, or gone, behind the journal's back.
        for (i, (key, value)) in held.iter().enumerate().skip(2) {
            let mut changed = held.to_vec();
            changed[i] = (key, "x");
            assert_eq!(
                found(&changed, Some(Some(&settings))),
                vec![(format!("meta.{key}"), json!(value), json!("x"))]
            );
            let mut gone = held.to_vec();
            gone.remove(i);
            assert_eq!(
                found(&gone, Some(Some(&settings))),
                vec![(format!("meta.{key}"), json!(value), Value::Null)]
            );
        }
        let changed_id = [(WORKSPACE_ID, "w2")];
        assert!(found(&changed_id, Some(Some(&settings))).contains(&(
            "meta.workspace_id".into(),
            json!("w1"),
            json!("w2")
        )));
        // Four eyes off is no row.
        let off = Settings {
            four_eyes: false,
            ..settings.clone()
        };
        let mut without = held.to_vec();
        without.remove(2);
        assert_eq!(found(&without, Some(Some(&off))), vec![]);
        assert_eq!(
            found(&held, Some(Some(&off))),
            vec![("meta.four_eyes".into(), Value::Null, json!("1"))]
        );
        // No settings entry where settings are journaled; none asked for
        // where they are not (a workspace directory).
        assert_eq!(
            found(&held, Some(None)),
            vec![(
                "meta.settings".into(),
                Value::Null,
                json!("set with no settings entry")
            )]
        );
        assert_eq!(found(&held, None), vec![]);
        // An outbox with no entry yet has set nothing by an act either.
        let empty = JournalFacts {
            entries: 0,
            last_untimed: 0,
            settings: Some(None),
        };
        assert_eq!(fields(&mismatches(&meta(&held[..1]), empty, None)), vec![]);
    }
}
