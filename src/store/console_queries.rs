//! The outbox queries the review console needs beyond the command line's:
//! keyset pages of operations filtered by state and by a search text (a
//! substring of the op id or the action kind), from any position and in
//! either direction.
//!
//! The console keeps only one screenful of rows in memory and asks for the
//! next or previous few as the cursor moves, so every query here is bounded
//! by `LIMIT` and starts from an indexed `op_id` bound: the cost of a page
//! depends on the page, not on the size of the outbox. A search filter still
//! has to look at rows until it has found a page of matches, which is the
//! price of a substring match; with a state filter it walks only that
//! state's index.

use super::sender::SqliteSender;
use super::{Outbox, QueuePages, SqlContext};
use crate::domain::{OpState, Operation, PageBound, QueueFilter};
use crate::error::Result;
use rusqlite::types::ToSql;

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

impl QueuePages for SqliteSender {
    /// One page of the queue: at most `limit` operations matching `filter`
    /// next to `bound`, in ascending `op_id` order.
    fn queue_page(
        &self,
        filter: QueueFilter<'_>,
        bound: PageBound<'_>,
        limit: usize,
    ) -> Result<Vec<Operation>> {
        let mut sql = String::from("SELECT op_id FROM operations WHERE 1 = 1");
        let state = filter.state.map(OpState::as_str);
        let pattern = filter.search.map(like_pattern);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut params: Vec<(&str, &dyn ToSql)> = vec![(":limit", &limit)];
        if let Some(state) = &state {
            sql.push_str(" AND state = :state");
            params.push((":state", state));
        }
        if let Some(pattern) = &pattern {
            sql.push_str(
                " AND (op_id LIKE :pattern ESCAPE '\\' OR action_kind LIKE :pattern ESCAPE '\\')",
            );
            params.push((":pattern", pattern));
        }
        let (comparison, key, descending) = match bound {
            PageBound::Start => (None, None, false),
            PageBound::End => (None, None, true),
            PageBound::After(key) => (Some(">"), Some(key), false),
            PageBound::From(key) => (Some(">="), Some(key), false),
            PageBound::Before(key) => (Some("<"), Some(key), true),
        };
        if let (Some(comparison), Some(key)) = (comparison, &key) {
            sql.push_str(" AND op_id ");
            sql.push_str(comparison);
            sql.push_str(" :key");
            params.push((":key", key));
        }
        sql.push_str(if descending {
            " ORDER BY op_id DESC LIMIT :limit"
        } else {
            " ORDER BY op_id LIMIT :limit"
        });
        let mut ids: Vec<String> = self
            .conn()
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_map(params.as_slice(), |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .at(self.path())?;
        if descending {
            ids.reverse();
        }
        // The page is a handful of primary-key lookups; reading the rows
        // through `get` keeps their parsing in one place (store/sender.rs).
        let mut ops = Vec::with_capacity(ids.len());
        for id in &ids {
            if let Some(op) = self.get(id)? {
                ops.push(op);
            }
        }
        Ok(ops)
    }
}
