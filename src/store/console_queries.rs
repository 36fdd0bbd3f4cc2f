//! The queue's pages: operations filtered by state, latest verdict,
//! escalation, age and a search text, in `op_id` order or by age
//! (`updated_at`, then `op_id`), from any position and in either
//! direction. `recon ops` and the console both page through here.
//!
//! Nobody holds more than a page: every query is bounded by `LIMIT` and
//! starts from a keyset bound (the cursor: an op id, or an `updated_at`
//! and an op id), and every filter and order is one range of one index of
//! the operations table, so a page costs what it holds, not what the
//! outbox holds. The latest verdict and the escalation marker are columns
//! of the operations row (a projection `verify` checks) precisely so that
//! filtering on them is such a range. One filter drives the index, the
//! rarest first (escalated, then verdict, then state); the other terms
//! are written `+column` so that the planner cannot pick their index
//! instead and sort. A search text still looks at rows until it has found
//! a page of matches: that is the price of a substring match. A count of
//! a state and a verdict reads the row of each operation in the driving
//! range (no index holds both), so it is taken from whichever side reads
//! fewer rows; `v` reads the keys of a filter (five columns, no joins) in
//! one walk of its index.

use super::rows::{query_ops, OP_SELECT};
use super::sender::SqliteSender;
use super::QueuePages;
use crate::domain::{
    Cursor, OpState, Operation, OpsQuery, PageBound, QueueFilter, QueueKey, SortOrder, Timestamp,
    VerdictFilter,
};
use crate::error::{Result, StoreError};
use rusqlite::types::{ToSql, Value};

/// `LIKE` pattern for a substring, with the wildcards in it escaped.
fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Where a page starts, under its order.
#[derive(Debug, Clone)]
pub(crate) enum Bound {
    Start,
    End,
    After(Cursor),
    From(Cursor),
    Before(Cursor),
}

/// Which filter's index a page walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    Escalated,
    Verdict,
    State,
    Nothing,
}

/// A page's SQL and its named parameters.
#[derive(Debug, Default)]
pub(crate) struct PageSql {
    pub sql: String,
    params: Vec<(&'static str, Value)>,
    descending: bool,
}

impl PageSql {
    fn push(&mut self, clause: &str, name: &'static str, value: Value) {
        self.sql.push_str(clause);
        self.params.push((name, value));
    }

    pub fn params(&self) -> Vec<(&str, &dyn ToSql)> {
        self.params
            .iter()
            .map(|(name, value)| (*name, value as &dyn ToSql))
            .collect()
    }
}

/// The filter's terms: the driving one plain, the others `+column`.
fn filter_terms(page: &mut PageSql, filter: &QueueFilter<'_>, sort: SortOrder) {
    let driver = match filter {
        QueueFilter {
            escalated: Some(true),
            ..
        } => Driver::Escalated,
        QueueFilter {
            verdict: Some(_), ..
        } => Driver::Verdict,
        QueueFilter { state: Some(_), .. } => Driver::State,
        _ => Driver::Nothing,
    };
    let plus = |d: Driver| if driver == d { "" } else { "+" };
    if let Some(state) = filter.state {
        let clause = format!(" AND {}o.state = :state", plus(Driver::State));
        page.push(&clause, ":state", Value::from(state.as_str().to_string()));
    }
    match filter.verdict {
        Some(VerdictFilter::Is(verdict)) => {
            let clause = format!(" AND {}o.latest_verdict = :verdict", plus(Driver::Verdict));
            page.push(
                &clause,
                ":verdict",
                Value::from(verdict.as_str().to_string()),
            );
        }
        Some(VerdictFilter::Never) => {
            let clause = format!(" AND {}o.latest_verdict IS NULL", plus(Driver::Verdict));
            page.sql.push_str(&clause);
        }
        None => {}
    }
    match filter.escalated {
        Some(true) => page.sql.push_str(" AND o.escalation IS NOT NULL"),
        Some(false) => page.sql.push_str(" AND +o.escalation IS NULL"),
        None => {}
    }
    match filter.contradicted {
        Some(true) => page.sql.push_str(" AND o.contradiction IS NOT NULL"),
        Some(false) => page.sql.push_str(" AND +o.contradiction IS NULL"),
        None => {}
    }
    if let Some(before) = filter.updated_before {
        // By age it is a range of the index; by op id a filter.
        let clause = match sort {
            SortOrder::Age => " AND o.updated_at < :before",
            SortOrder::OpId => " AND +o.updated_at < :before",
        };
        page.push(clause, ":before", Value::from(before.to_string()));
    }
    if let Some(search) = filter.search {
        page.push(
            " AND (o.op_id LIKE :pattern ESCAPE '\\' OR o.action_kind LIKE :pattern ESCAPE '\\' \
             OR o.payload LIKE :pattern ESCAPE '\\')",
            ":pattern",
            Value::from(like_pattern(search)),
        );
    }
}

/// The SQL of one page: the filter, the bound, the order and the limit.
pub(crate) fn page_sql(
    filter: &QueueFilter<'_>,
    sort: SortOrder,
    bound: &Bound,
    limit: usize,
) -> PageSql {
    let mut page = PageSql {
        sql: format!("{OP_SELECT} WHERE 1 = 1"),
        ..PageSql::default()
    };
    filter_terms(&mut page, filter, sort);
    let (comparison, cursor, descending) = match bound {
        Bound::Start => (None, None, false),
        Bound::End => (None, None, true),
        Bound::After(c) => (Some(">"), Some(c), false),
        Bound::From(c) => (Some(">="), Some(c), false),
        Bound::Before(c) => (Some("<"), Some(c), true),
    };
    match (comparison, cursor) {
        (Some(op), Some(Cursor::OpId(id))) => {
            let clause = format!(" AND o.op_id {op} :key");
            page.push(&clause, ":key", Value::from(id.clone()));
        }
        (Some(op), Some(Cursor::Age(at, id))) => {
            let clause = format!(" AND (o.updated_at, o.op_id) {op} (:key_at, :key)");
            page.push(&clause, ":key_at", Value::from(at.to_string()));
            page.params.push((":key", Value::from(id.clone())));
        }
        _ => {}
    }
    let direction = if descending { " DESC" } else { "" };
    page.sql.push_str(&match sort {
        SortOrder::OpId => format!(" ORDER BY o.op_id{direction}"),
        SortOrder::Age => format!(" ORDER BY o.updated_at{direction}, o.op_id{direction}"),
    });
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    page.push(" LIMIT :limit", ":limit", Value::from(limit));
    page.descending = descending;
    page
}

/// The SQL of [`QueuePages::queue_keys`]: the filter's index range in
/// `op_id` order, five columns of the operations row, no joins.
pub(crate) fn keys_sql(filter: &QueueFilter<'_>, limit: usize) -> PageSql {
    let mut page = PageSql {
        sql: "SELECT o.op_id, o.version, o.state, o.payload, o.receiver FROM operations o \
              WHERE 1 = 1"
            .to_string(),
        ..PageSql::default()
    };
    filter_terms(&mut page, filter, SortOrder::OpId);
    page.sql.push_str(" ORDER BY o.op_id");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    page.push(" LIMIT :limit", ":limit", Value::from(limit));
    page
}

/// A count of the filter's index range.
fn count_sql(filter: &QueueFilter<'_>) -> PageSql {
    let mut page = PageSql {
        sql: "SELECT count(*) FROM operations o WHERE 1 = 1".to_string(),
        ..PageSql::default()
    };
    filter_terms(&mut page, filter, SortOrder::OpId);
    page
}

/// A state and a verdict filter counted from the other side: the
/// verdict's range counted in its index alone (no row is read), less
/// those of its operations in `others`, the other states, whose rows are
/// read through the state index. One statement, so one snapshot.
fn complement_sql(filter: &QueueFilter<'_>, others: &[OpState]) -> PageSql {
    let verdict_only = QueueFilter {
        state: None,
        ..*filter
    };
    let mut page = count_sql(&verdict_only);
    let names: Vec<String> = (0..others.len()).map(|i| format!(":other{i}")).collect();
    let verdict = match filter.verdict {
        Some(VerdictFilter::Is(_)) => "+o.latest_verdict = :verdict",
        _ => "+o.latest_verdict IS NULL",
    };
    page.sql = format!(
        "SELECT ({}) - (SELECT count(*) FROM operations o WHERE o.state IN ({}) AND {verdict})",
        page.sql,
        names.join(", ")
    );
    const NAMES: [&str; 4] = [":other0", ":other1", ":other2", ":other3"];
    for (name, state) in NAMES.iter().zip(others) {
        page.params
            .push((name, Value::from(state.as_str().to_string())));
    }
    page
}

impl SqliteSender {
    /// When a count of a state and a verdict reads fewer rows from the
    /// other side (SQLite has no index on both, so the plain count reads
    /// the row of every operation with the verdict to check its state):
    /// the other states, if together they hold fewer operations than the
    /// verdict does. A triage outbox is mostly `unknown`, so the `never`
    /// filter of the unknown queue counts in milliseconds this way.
    fn states_elsewhere(&self, filter: &QueueFilter<'_>) -> Result<Option<Vec<OpState>>> {
        let (Some(state), Some(_), None, None, None) = (
            filter.state,
            filter.verdict,
            filter.escalated,
            filter.contradicted,
            filter.updated_before,
        ) else {
            return Ok(None);
        };
        let counts = super::Outbox::count_by_state(self)?;
        let others: Vec<OpState> = counts
            .iter()
            .filter(|(s, n)| **s != state && **n > 0)
            .map(|(s, _)| *s)
            .collect();
        let elsewhere: i64 = others.iter().filter_map(|s| counts.get(s)).sum();
        let verdict_only = QueueFilter {
            state: None,
            ..*filter
        };
        let page = count_sql(&verdict_only);
        let in_verdict: i64 = self
            .conn()
            .query_row(&page.sql, page.params().as_slice(), |r| r.get(0))
            .map_err(|e| super::sql_error(self.path(), e))?;
        Ok((elsewhere < in_verdict).then_some(others))
    }

    fn page(&self, page: &PageSql) -> Result<Vec<Operation>> {
        let mut ops = query_ops(
            self.conn(),
            self.path(),
            &page.sql,
            page.params().as_slice(),
        )?;
        if page.descending {
            ops.reverse();
        }
        Ok(ops)
    }
}

impl QueuePages for SqliteSender {
    /// One page of the queue: at most `limit` operations matching `filter`
    /// next to `bound`, in ascending `op_id` order.
    fn queue_page(
        &self,
        filter: QueueFilter<'_>,
        bound: PageBound<'_>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        let id = |key: &str| Cursor::OpId(key.to_string());
        let bound = match bound {
            PageBound::Start => Bound::Start,
            PageBound::End => Bound::End,
            PageBound::After(key) => Bound::After(id(key)),
            PageBound::From(key) => Bound::From(id(key)),
            PageBound::Before(key) => Bound::Before(id(key)),
        };
        self.page(&page_sql(&filter, SortOrder::OpId, &bound, limit))
    }

    fn ops_page(&self, query: &OpsQuery<'_>) -> Result<Vec<Operation>> {
        let bound = match &query.after {
            Some(cursor) => Bound::After(cursor.clone()),
            None => Bound::Start,
        };
        self.page(&page_sql(&query.filter, query.sort, &bound, query.limit))
    }

    fn count_matching(&self, filter: QueueFilter<'_>) -> Result<i64> {
        let filter = QueueFilter {
            search: None,
            ..filter
        };
        let page = match self.states_elsewhere(&filter)? {
            Some(others) => complement_sql(&filter, &others),
            None => count_sql(&filter),
        };
        self.conn()
            .query_row(&page.sql, page.params().as_slice(), |r| r.get(0))
            .map_err(|e| super::sql_error(self.path(), e).into())
    }

    fn queue_keys(&self, filter: QueueFilter<'_>, limit: usize) -> Result<Vec<QueueKey>> {
        let page = keys_sql(&filter, limit);
        let path = self.path();
        let rows = self
            .conn()
            .prepare_cached(&page.sql)
            .and_then(|mut s| {
                s.query_map(page.params().as_slice(), |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| super::sql_error(path, e))?;
        rows.into_iter()
            .map(|(op_id, version, state, payload, receiver)| {
                let corrupt =
                    |what: &str| StoreError::Corrupt(format!("{what} of operation {op_id}"));
                Ok(QueueKey {
                    state: OpState::parse(&state).ok_or_else(|| corrupt("state"))?,
                    payload: serde_json::from_str(&payload).map_err(|_| corrupt("payload"))?,
                    version,
                    receiver,
                    op_id,
                })
            })
            .collect()
    }

    fn newest_update(&self) -> Result<Option<Timestamp>> {
        let newest: Option<String> = self
            .conn()
            .query_row("SELECT max(updated_at) FROM operations", [], |r| r.get(0))
            .map_err(|e| super::sql_error(self.path(), e))?;
        Ok(newest.as_deref().and_then(Timestamp::parse))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{OpState, Timestamp, Verdict};
    use crate::settings::OpenOptions;

    /// Every filter and order the queue offers is one index range: the
    /// plan searches an index (never scans the table) and never sorts, so
    /// a page costs what it holds. (With no filter at all, by age, it walks
    /// the age index from its start; a search text is the one exception
    /// the module names, so it is left out.)
    #[test]
    fn every_page_is_one_index_range_without_a_sort() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sender.sqlite");
        let sender = SqliteSender::open(
            &path,
            OpenOptions::default().creating(),
            crate::domain::Timestamp::from_millis(0),
        )
        .unwrap();
        let verdicts = [
            None,
            Some(VerdictFilter::Is(Verdict::DuplicateMatches)),
            Some(VerdictFilter::Never),
        ];
        let cursor = |sort| match sort {
            SortOrder::OpId => Cursor::OpId("op-1".into()),
            SortOrder::Age => Cursor::Age(Timestamp::from_millis(5), "op-1".into()),
        };
        let mut filters = Vec::new();
        for state in [None, Some(OpState::Unknown)] {
            for verdict in verdicts {
                for escalated in [None, Some(true), Some(false)] {
                    for updated_before in [None, Some(Timestamp::from_millis(1_000))] {
                        filters.push(QueueFilter {
                            state,
                            verdict,
                            escalated,
                            updated_before,
                            search: None,
                            contradicted: None,
                        });
                    }
                }
            }
        }
        for filter in filters {
            for sort in [SortOrder::OpId, SortOrder::Age] {
                for bound in [Bound::Start, Bound::After(cursor(sort)), Bound::End] {
                    let plan = plan(&sender, &page_sql(&filter, sort, &bound, 50));
                    let at = format!("{filter:?} {sort:?} {bound:?}: {plan}");
                    assert!(!plan.contains("TEMP B-TREE"), "{at}");
                    let driven = filter.state.is_some()
                        || filter.verdict.is_some()
                        || filter.escalated == Some(true);
                    // The partial index holds only escalated operations.
                    let escalated = plan.starts_with("SCAN o USING INDEX operations_escalated");
                    if driven {
                        assert!(plan.starts_with("SEARCH o USING") || escalated, "{at}");
                    } else if sort == SortOrder::Age {
                        assert!(plan.contains(" o USING INDEX operations_by_age"), "{at}");
                    }
                }
            }
        }
    }

    /// A state and verdict count from the other side reads the verdict's
    /// index alone and the other states through theirs: no scan of the
    /// table, for either verdict filter. Marking reads one range in op id
    /// order without a sort.
    #[test]
    fn a_count_from_the_other_side_and_the_marks_read_index_ranges_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sender.sqlite");
        let sender = SqliteSender::open(
            &path,
            OpenOptions::default().creating(),
            crate::domain::Timestamp::from_millis(0),
        )
        .unwrap();
        let others = [OpState::Prepared, OpState::Confirmed, OpState::NotApplied];
        for verdict in [
            VerdictFilter::Never,
            VerdictFilter::Is(Verdict::UniqueExactMatch),
        ] {
            let filter = QueueFilter {
                state: Some(OpState::Unknown),
                verdict: Some(verdict),
                ..QueueFilter::default()
            };
            let count = plan(&sender, &complement_sql(&filter, &others));
            assert!(!count.contains("SCAN o"), "{count}");
            assert!(
                count.contains("COVERING INDEX operations_by_verdict"),
                "{count}"
            );
            assert!(
                count.contains("INDEX operations_by_state (state=?)"),
                "{count}"
            );
            let keys = plan(&sender, &keys_sql(&filter, 100));
            assert!(
                keys.starts_with("SEARCH o USING INDEX operations_by_verdict"),
                "{keys}"
            );
            assert!(!keys.contains("TEMP B-TREE"), "{keys}");
        }
    }

    fn plan(sender: &SqliteSender, page: &PageSql) -> String {
        let sql = format!("EXPLAIN QUERY PLAN {}", page.sql);
        let mut statement = sender.conn().prepare(&sql).unwrap();
        let rows = statement
            .query_map(page.params().as_slice(), |r| r.get::<_, String>(3))
            .unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }
}
