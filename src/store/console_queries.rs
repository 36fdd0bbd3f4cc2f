//! The queue's pages: operations filtered by state, latest verdict,
//! escalation, receiver, age and a search text, in `op_id` order or by age
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
//! rarest first (escalated, then verdict, then receiver, whose indexes
//! hold its state too, then state); the other terms
//! are written `+column` so that the planner cannot pick their index
//! instead and sort (on SQLite; PostgreSQL has no such hint, and every
//! term is plain there). A search text still looks at rows until it has
//! found a page of matches: that is the price of a substring match. A
//! count of a state and a verdict reads the row of each operation in the
//! driving range (no index holds both), so it is taken from whichever side
//! reads fewer rows; `v` reads the keys of a filter (five columns, no
//! joins) in one walk of its index.
//!
//! Written over [`Db`]: [`QueuePages`] is implemented once, for every
//! [`SqlStore`].

use super::rows::{query_ops, OP_SELECT};
use super::sql::{Db, Dialect, SqlStore, ToValue, Value};
use super::QueuePages;
use crate::domain::{
    Cursor, Moved, OpState, Operation, OpsQuery, PageBound, QueueFilter, QueueKey, SortOrder,
    Timestamp, VerdictFilter,
};
use crate::error::{Result, StoreError};
use std::collections::BTreeMap;

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

impl Bound {
    /// The bound of a queue page, in op id order.
    fn of(bound: PageBound<'_>) -> Bound {
        let id = |key: &str| Cursor::OpId(key.to_string());
        match bound {
            PageBound::Start => Bound::Start,
            PageBound::End => Bound::End,
            PageBound::After(key) => Bound::After(id(key)),
            PageBound::From(key) => Bound::From(id(key)),
            PageBound::Before(key) => Bound::Before(id(key)),
        }
    }
}

/// Which filter's index a page walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    Escalated,
    Verdict,
    Receiver,
    State,
    Nothing,
}

/// A page's SQL and its parameters, numbered in the order they are bound.
#[derive(Debug)]
pub(crate) struct PageSql {
    pub sql: String,
    pub params: Vec<Value>,
    descending: bool,
    dialect: Dialect,
}

impl PageSql {
    fn new(dialect: Dialect, sql: String) -> Self {
        PageSql {
            sql,
            params: Vec::new(),
            descending: false,
            dialect,
        }
    }

    /// Binds `value` as the next parameter; its placeholder.
    fn bind(&mut self, value: impl ToValue) -> String {
        self.params.push(value.to_value());
        format!("?{}", self.params.len())
    }

    fn values(&self) -> Vec<&dyn ToValue> {
        self.params.iter().map(|v| v as &dyn ToValue).collect()
    }
}

/// The term whose index drives a page of `filter`: escalation, then the
/// verdict, the receiver or the state: the first of these it names.
fn driver_of(filter: &QueueFilter<'_>) -> Driver {
    match filter {
        QueueFilter {
            escalated: Some(true),
            ..
        } => Driver::Escalated,
        QueueFilter {
            verdict: Some(_), ..
        } => Driver::Verdict,
        QueueFilter {
            receiver: Some(_), ..
        } => Driver::Receiver,
        QueueFilter { state: Some(_), .. } => Driver::State,
        _ => Driver::Nothing,
    }
}

/// The filter's terms: the driving one plain, the others `+column` on
/// SQLite (its planner's "use no index for this term"; PostgreSQL has no
/// such hint, and its planner chooses by statistics, so there every term
/// is plain).
///
/// A state and a verdict are written into the statement (they are names
/// of a fixed set, never a person's text): each shape of the queue gets a
/// plan of its own that PostgreSQL keeps, where a bound state would be
/// planned anew for each page (`unknown` is a few rows, `prepared` nearly
/// all: no one plan fits both).
fn filter_terms(page: &mut PageSql, filter: &QueueFilter<'_>, sort: SortOrder) {
    let driver = driver_of(filter);
    let hint = match page.dialect {
        Dialect::Sqlite => "+",
        Dialect::Postgres => "",
    };
    let plus = |d: Driver| if driver == d { "" } else { hint };
    if let Some(receiver) = filter.receiver {
        let p = page.bind(receiver);
        let clause = format!(" AND {}o.receiver = {p}", plus(Driver::Receiver));
        page.sql.push_str(&clause);
    }
    if let Some(state) = filter.state {
        // A receiver's indexes hold its state too: both terms drive them.
        let p = format!("'{}'", state.as_str());
        let plus = match driver {
            Driver::Receiver => "",
            _ => plus(Driver::State),
        };
        let clause = format!(" AND {plus}o.state = {p}");
        page.sql.push_str(&clause);
    }
    match filter.verdict {
        Some(VerdictFilter::Is(verdict)) => {
            let p = format!("'{}'", verdict.as_str());
            let clause = format!(" AND {}o.latest_verdict = {p}", plus(Driver::Verdict));
            page.sql.push_str(&clause);
        }
        Some(VerdictFilter::Never) => {
            let clause = format!(" AND {}o.latest_verdict IS NULL", plus(Driver::Verdict));
            page.sql.push_str(&clause);
        }
        None => {}
    }
    let clause = match filter.escalated {
        Some(true) => " AND o.escalation IS NOT NULL".to_string(),
        Some(false) => format!(" AND {hint}o.escalation IS NULL"),
        None => String::new(),
    };
    page.sql.push_str(&clause);
    let clause = match filter.contradicted {
        Some(true) => " AND o.contradiction IS NOT NULL".to_string(),
        Some(false) => format!(" AND {hint}o.contradiction IS NULL"),
        None => String::new(),
    };
    page.sql.push_str(&clause);
    if let Some(wanted) = filter.surplus {
        page.sql.push_str(&surplus_clause(page.dialect, wanted));
    }
    if let Some(before) = filter.updated_before {
        // By age it is a range of the index; by op id a filter.
        let p = page.bind(before.to_string());
        let clause = match sort {
            SortOrder::Age => format!(" AND o.updated_at < {p}"),
            SortOrder::OpId => format!(" AND {hint}o.updated_at < {p}"),
        };
        page.sql.push_str(&clause);
    }
    if let Some(search) = filter.search {
        let p = page.bind(like_pattern(search));
        // SQLite's LIKE ignores the case of ASCII letters; PostgreSQL's
        // ILIKE is the one that does.
        let like = match page.dialect {
            Dialect::Sqlite => "LIKE",
            Dialect::Postgres => "ILIKE",
        };
        let clause = format!(
            " AND (o.op_id {like} {p} ESCAPE '\\' OR o.action_kind {like} {p} ESCAPE '\\' \
             OR o.payload {like} {p} ESCAPE '\\')"
        );
        page.sql.push_str(&clause);
    }
}

/// The SQL of one page: the filter, the bound, the order and the limit.
pub(crate) fn page_sql(
    dialect: Dialect,
    filter: &QueueFilter<'_>,
    sort: SortOrder,
    bound: &Bound,
    limit: usize,
) -> PageSql {
    let mut page = PageSql::new(dialect, format!("{OP_SELECT} WHERE 1 = 1"));
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
            let key = page.bind(id.as_str());
            page.sql.push_str(&format!(" AND o.op_id {op} {key}"));
        }
        (Some(op), Some(Cursor::Age(at, id))) => {
            let key_at = page.bind(at.to_string());
            let key = page.bind(id.as_str());
            let clause = format!(" AND (o.updated_at, o.op_id) {op} ({key_at}, {key})");
            page.sql.push_str(&clause);
        }
        _ => {}
    }
    let direction = if descending { " DESC" } else { "" };
    page.sql.push_str(&match sort {
        SortOrder::OpId => format!(" ORDER BY o.op_id{direction}"),
        SortOrder::Age => format!(" ORDER BY o.updated_at{direction}, o.op_id{direction}"),
    });
    // The limit is written into the statement, not bound: a plan that
    // knows it reads a page is as cheap as the page, so PostgreSQL keeps
    // one generic plan per statement rather than planning each page anew
    // (planning cost more than the page; it grew with the outbox).
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    page.sql.push_str(&format!(" LIMIT {limit}"));
    page.descending = descending;
    page
}

/// The statement PostgreSQL runs for one queue page (placeholders `$n`)
/// and its parameters as SQL literals, in order: what `EXPLAIN EXECUTE`
/// needs to show the plan that page gets (its tests and the benchmark
/// check that every shape walks an index range and sorts nothing).
pub fn postgres_queue_page(
    filter: &QueueFilter<'_>,
    bound: PageBound<'_>,
    limit: usize,
) -> (String, Vec<String>) {
    let page = page_sql(
        Dialect::Postgres,
        filter,
        SortOrder::OpId,
        &Bound::of(bound),
        limit,
    );
    let literals = page
        .params
        .iter()
        .map(|value| match value {
            Value::Null => "NULL".to_string(),
            Value::Integer(n) => n.to_string(),
            Value::Real(x) => x.to_string(),
            Value::Text(text) => format!("'{}'", text.replace('\'', "''")),
        })
        .collect();
    (
        Dialect::Postgres.statement(&page.sql).into_owned(),
        literals,
    )
}

/// The SQL of [`QueuePages::queue_keys`]: the filter's index range in
/// `op_id` order, five columns of the operations row, no joins.
pub(crate) fn keys_sql(dialect: Dialect, filter: &QueueFilter<'_>, limit: usize) -> PageSql {
    let sql = "SELECT o.op_id, o.version, o.state, o.payload, o.receiver FROM operations o \
               WHERE 1 = 1";
    let mut page = PageSql::new(dialect, sql.to_string());
    filter_terms(&mut page, filter, SortOrder::OpId);
    let limit = page.bind(i64::try_from(limit).unwrap_or(i64::MAX));
    page.sql
        .push_str(&format!(" ORDER BY o.op_id LIMIT {limit}"));
    page
}

/// A count of the filter's index range.
fn count_sql(dialect: Dialect, filter: &QueueFilter<'_>) -> PageSql {
    let sql = "SELECT count(*) FROM operations o WHERE 1 = 1".to_string();
    let mut page = PageSql::new(dialect, sql);
    filter_terms(&mut page, filter, SortOrder::OpId);
    page
}

/// A state and a verdict filter counted from the other side: the
/// verdict's range counted in its index alone (no row is read), less
/// those of its operations in `others`, the other states, whose rows are
/// read through the state index. One statement, so one snapshot. With no
/// other state holding operations, the verdict's count is the answer.
fn complement_sql(dialect: Dialect, filter: &QueueFilter<'_>, others: &[OpState]) -> PageSql {
    let verdict_only = QueueFilter {
        state: None,
        ..*filter
    };
    let mut page = count_sql(dialect, &verdict_only);
    if others.is_empty() {
        return page;
    }
    let hint = match dialect {
        Dialect::Sqlite => "+",
        Dialect::Postgres => "",
    };
    let states: Vec<String> = others.iter().map(|s| page.bind(s.as_str())).collect();
    let verdict = match filter.verdict {
        Some(VerdictFilter::Is(verdict)) => {
            let p = format!("'{}'", verdict.as_str());
            format!("{hint}o.latest_verdict = {p}")
        }
        _ => format!("{hint}o.latest_verdict IS NULL"),
    };
    page.sql = format!(
        "SELECT ({}) - (SELECT count(*) FROM operations o WHERE o.state IN ({}) AND {verdict})",
        page.sql,
        states.join(", ")
    );
    page
}

/// `ops --surplus`: an operation with a surplus effect (SPEC 14) that no
/// approval compensates yet (`wanted`), or one without.
fn surplus_clause(dialect: Dialect, wanted: bool) -> String {
    let listed = match dialect {
        Dialect::Sqlite => "json_array_length(o.surplus_effect_ids)",
        Dialect::Postgres => "jsonb_array_length(o.surplus_effect_ids::jsonb)",
    };
    let awaiting = format!(
        "(o.surplus_effect_ids IS NOT NULL AND {listed} > (SELECT count(*) FROM \
         compensation_approvals a WHERE a.original_op_id = o.op_id \
         AND a.effect_id <> o.confirmed_effect_id))"
    );
    match wanted {
        true => format!(" AND {awaiting}"),
        false => format!(" AND NOT {awaiting}"),
    }
}

/// The state of a filter of exactly a state and a verdict (the one shape
/// [`complement_sql`] counts).
fn state_and_verdict_only(filter: &QueueFilter<'_>) -> Option<OpState> {
    match (
        filter.state,
        filter.verdict,
        filter.escalated,
        filter.contradicted,
        filter.updated_before,
        (filter.receiver, filter.surplus),
    ) {
        (Some(state), Some(_), None, None, None, (None, None)) => Some(state),
        _ => None,
    }
}

/// When a count of `state` and a verdict reads fewer rows from the other
/// side (no index holds both, so the plain count reads the row of every
/// operation with the verdict to check its state): the other states, if
/// together they hold fewer operations than the verdict does. A triage
/// outbox is mostly `unknown`, so the `never` filter of the unknown queue
/// counts in milliseconds this way.
fn states_elsewhere(
    db: &mut dyn Db,
    filter: &QueueFilter<'_>,
    state: OpState,
    counts: &BTreeMap<OpState, i64>,
) -> Result<Option<Vec<OpState>>> {
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
    let page = count_sql(db.dialect(), &verdict_only);
    let in_verdict: i64 = db.query_one(&page.sql, &page.values(), |r| r.get(0))?;
    Ok((elsewhere < in_verdict).then_some(others))
}

/// Runs one page's query, in ascending order.
fn page(db: &mut dyn Db, page: &PageSql) -> Result<Vec<Operation>> {
    let mut ops = query_ops(db, &page.sql, &page.values())?;
    if page.descending {
        ops.reverse();
    }
    Ok(ops)
}

/// The queue's pages, written once for every store whose outbox is SQL.
impl<S: SqlStore> QueuePages for S {
    /// One page of the queue: at most `limit` operations matching `filter`
    /// next to `bound`, in ascending `op_id` order.
    fn queue_page(
        &self,
        filter: QueueFilter<'_>,
        bound: PageBound<'_>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        let bound = Bound::of(bound);
        self.read(|db| {
            let sql = page_sql(db.dialect(), &filter, SortOrder::OpId, &bound, limit);
            page(db, &sql)
        })
    }

    fn ops_page(&self, query: &OpsQuery<'_>) -> Result<Vec<Operation>> {
        let bound = match &query.after {
            Some(cursor) => Bound::After(cursor.clone()),
            None => Bound::Start,
        };
        self.read(|db| {
            let sql = page_sql(db.dialect(), &query.filter, query.sort, &bound, query.limit);
            page(db, &sql)
        })
    }

    fn count_matching(&self, filter: QueueFilter<'_>) -> Result<i64> {
        let filter = QueueFilter {
            search: None,
            ..filter
        };
        let counts = match state_and_verdict_only(&filter) {
            Some(_) => Some(super::Outbox::count_by_state(self)?),
            None => None,
        };
        self.read(|db| {
            let elsewhere = match (state_and_verdict_only(&filter), &counts) {
                (Some(state), Some(counts)) => states_elsewhere(db, &filter, state, counts)?,
                _ => None,
            };
            let page = match elsewhere {
                Some(others) => complement_sql(db.dialect(), &filter, &others),
                None => count_sql(db.dialect(), &filter),
            };
            Ok(db.query_one(&page.sql, &page.values(), |r| r.get(0))?)
        })
    }

    fn queue_keys(&self, filter: QueueFilter<'_>, limit: usize) -> Result<Vec<QueueKey>> {
        let rows = self.read(|db| {
            let page = keys_sql(db.dialect(), &filter, limit);
            db.query(&page.sql, &page.values(), |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<i64>(1)?,
                    r.get::<String>(2)?,
                    r.get::<String>(3)?,
                    r.get::<String>(4)?,
                ))
            })
        })?;
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

    fn changed_since(&self, seq: i64) -> Result<Vec<Moved>> {
        let rows: Vec<(String, String, i64)> = self.read(|db| {
            db.query(
                "SELECT o.op_id, o.state, o.version FROM operations o WHERE o.op_id IN \
                 (SELECT op_id FROM journal WHERE seq > ?1 AND op_id IS NOT NULL)",
                &[&seq],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })?;
        rows.into_iter()
            .map(|(op_id, state, version)| {
                let state = OpState::parse(&state).ok_or_else(|| {
                    StoreError::Corrupt(format!("state of operation {op_id}: {state}"))
                })?;
                Ok(Moved {
                    op_id,
                    state,
                    version,
                })
            })
            .collect()
    }

    fn newest_update(&self) -> Result<Option<Timestamp>> {
        let newest: Option<String> = self
            .read(|db| db.query_one("SELECT max(updated_at) FROM operations", &[], |r| r.get(0)))?;
        Ok(newest.as_deref().and_then(Timestamp::parse))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{OpState, Timestamp, Verdict};
    use crate::settings::OpenOptions;
    use crate::store::SqliteSender;

    /// Every filter and order the queue offers is one index range: the
    /// plan searches an index (never scans the table) and never sorts, so
    /// a page costs what it holds. (With no filter at all, by age, it walks
    /// the age index from its start; a search text is the one exception
    /// the module names, so it is left out.)
    #[test]
    fn every_page_is_one_index_range_without_a_sort() {
        let dir = tempfile::tempdir().unwrap();
        let sender = new_outbox(dir.path());
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
                        for receiver in [None, Some("mail")] {
                            filters.push(QueueFilter {
                                state,
                                verdict,
                                escalated,
                                updated_before,
                                receiver,
                                search: None,
                                contradicted: None,
                                surplus: None,
                            });
                        }
                    }
                }
            }
        }
        for filter in filters {
            for sort in [SortOrder::OpId, SortOrder::Age] {
                for bound in [Bound::Start, Bound::After(cursor(sort)), Bound::End] {
                    let page = page_sql(Dialect::Sqlite, &filter, sort, &bound, 50);
                    let plan = plan(&sender, &page);
                    let at = format!("{filter:?} {sort:?} {bound:?}: {plan}");
                    assert!(!plan.contains("TEMP B-TREE"), "{at}");
                    let driven = filter.state.is_some()
                        || filter.receiver.is_some()
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

    /// A receiver's pages walk its own indexes, with its state when one
    /// is asked for, in either order: `ops --receiver` costs its page.
    #[test]
    fn a_receivers_pages_walk_the_receiver_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let sender = new_outbox(dir.path());
        let cases = [
            (
                Some(OpState::Unknown),
                SortOrder::OpId,
                "operations_by_receiver_state ",
            ),
            (
                Some(OpState::Unknown),
                SortOrder::Age,
                "operations_by_receiver_state_age ",
            ),
            (None, SortOrder::OpId, "operations_by_receiver_op "),
            (None, SortOrder::Age, "operations_by_receiver_age "),
        ];
        for (state, sort, index) in cases {
            let filter = QueueFilter {
                state,
                receiver: Some("mail"),
                ..QueueFilter::default()
            };
            let page = page_sql(Dialect::Sqlite, &filter, sort, &Bound::Start, 50);
            let plan = plan(&sender, &page);
            assert!(
                plan.starts_with(&format!("SEARCH o USING INDEX {index}")),
                "{plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    /// A state and verdict count from the other side reads the verdict's
    /// index alone and the other states through theirs: no scan of the
    /// table, for either verdict filter. Marking reads one range in op id
    /// order without a sort.
    #[test]
    fn a_count_from_the_other_side_and_the_marks_read_index_ranges_only() {
        let dir = tempfile::tempdir().unwrap();
        let sender = new_outbox(dir.path());
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
            let count = plan(&sender, &complement_sql(Dialect::Sqlite, &filter, &others));
            assert!(!count.contains("SCAN o"), "{count}");
            assert!(
                count.contains("COVERING INDEX operations_by_verdict"),
                "{count}"
            );
            assert!(
                count.contains("INDEX operations_by_state (state=?)"),
                "{count}"
            );
            let keys = plan(&sender, &keys_sql(Dialect::Sqlite, &filter, 100));
            assert!(
                keys.starts_with("SEARCH o USING INDEX operations_by_verdict"),
                "{keys}"
            );
            assert!(!keys.contains("TEMP B-TREE"), "{keys}");
        }
    }

    /// On PostgreSQL a page names the same terms and binds the same
    /// values, with no `+column` hint (SQLite's alone) and a search that
    /// ignores case as SQLite's `LIKE` does (`ILIKE`).
    #[test]
    fn a_postgres_page_has_no_planner_hints_and_searches_ignoring_case() {
        let filter = QueueFilter {
            state: Some(OpState::Unknown),
            verdict: Some(VerdictFilter::Never),
            escalated: Some(false),
            updated_before: Some(Timestamp::from_millis(1_000)),
            search: Some("Pay"),
            contradicted: Some(false),
            receiver: None,
            surplus: None,
        };
        let bound = Bound::After(Cursor::Age(Timestamp::from_millis(5), "op-1".into()));
        let sqlite = page_sql(Dialect::Sqlite, &filter, SortOrder::OpId, &bound, 50);
        let postgres = page_sql(Dialect::Postgres, &filter, SortOrder::OpId, &bound, 50);
        assert!(
            sqlite.sql.contains("+o.escalation IS NULL"),
            "{}",
            sqlite.sql
        );
        assert!(sqlite.sql.contains("o.op_id LIKE ?2"), "{}", sqlite.sql);
        assert!(!postgres.sql.contains('+'), "{}", postgres.sql);
        assert!(
            postgres.sql.contains("o.payload ILIKE ?2"),
            "{}",
            postgres.sql
        );
        assert_eq!(
            sqlite.sql.replace('+', "").replace("LIKE", "ILIKE"),
            postgres.sql
        );
        assert_eq!(sqlite.params, postgres.params);
        let statement = Dialect::Postgres.statement(&postgres.sql);
        assert!(statement.contains("o.op_id) > ($3, $4)"), "{statement}");
        // The state and the limit are part of the statement: a plan that
        // knows them (see `page_sql` and `filter_terms`).
        assert!(statement.contains("o.state = 'unknown'"), "{statement}");
        assert!(statement.ends_with("LIMIT 50"), "{statement}");
    }

    /// A new, empty SQLite outbox in `dir`.
    fn new_outbox(dir: &std::path::Path) -> SqliteSender {
        SqliteSender::open(
            &dir.join("sender.sqlite"),
            OpenOptions::default().creating(),
            Timestamp::from_millis(0),
        )
        .unwrap()
    }

    fn plan(sender: &SqliteSender, page: &PageSql) -> String {
        let sql = format!("EXPLAIN QUERY PLAN {}", page.sql);
        let mut statement = sender.conn().prepare(&sql).unwrap();
        let rows = statement
            .query_map(rusqlite::params_from_iter(&page.params), |r| {
                r.get::<_, String>(3)
            })
            .unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }
}
