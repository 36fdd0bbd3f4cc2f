//! The queue's pages on PostgreSQL cost what they hold, not what the
//! outbox holds: on a populated operations table (after `ANALYZE`) each
//! page shape the console and `recon ops` ask for is planned as a walk of
//! an index range, with no sequential scan of the table and no sort
//! (PostgreSQL takes no `+column` hints; its planner has only the schema's
//! indexes and its statistics to go on).
//!
//! The rows are written straight into `operations` with SQL: a plan is
//! about the table's rows and statistics, and no journal entry is read.
//! Their triggers and foreign keys are off while they are written
//! (`session_replication_role = replica`): the observations their
//! verdicts name are not there.

use super::outbox::{client, outbox};
use super::plan::{outbox_sized, page_plan};
use recon::domain::{OpState, PageBound, QueueFilter, VerdictFilter};

/// Operations in a populated outbox: mostly unknown, a third of those
/// observed (`inconclusive`), the rest confirmed or prepared.
const POPULATE: &str = "
SET session_replication_role = replica;
INSERT INTO operations (op_id, kind, action_kind, payload, state, version, receiver,
                        created_at, updated_at, latest_observation, latest_verdict)
SELECT format('op-%s', lpad(i::text, 6, '0')), 'original', 'post_letter',
       format('{\"n\": %s}', i),
       CASE WHEN i % 10 < 7 THEN 'unknown' WHEN i % 10 < 9 THEN 'confirmed' ELSE 'prepared' END,
       2, CASE WHEN i % 4 = 0 THEN 'ledger' ELSE 'mail' END, '2026-01-01T00:00:00Z',
       format('2026-01-01T%s:%s:%sZ', lpad((i / 3600 % 24)::text, 2, '0'),
              lpad((i / 60 % 60)::text, 2, '0'), lpad((i % 60)::text, 2, '0')),
       CASE WHEN i % 3 = 0 THEN i END, CASE WHEN i % 3 = 0 THEN 'inconclusive' END
FROM generate_series(1, 100000) AS i;
SET session_replication_role = origin;
ANALYZE operations;
";

#[test]
fn every_queue_page_shape_on_a_populated_postgres_table_walks_an_index_and_sorts_nothing() {
    let test =
        "every_queue_page_shape_on_a_populated_postgres_table_walks_an_index_and_sorts_nothing";
    let Some((_pg, url)) = outbox(test, "page_plans") else {
        return;
    };
    let mut db = client(&url);
    db.batch_execute(POPULATE).expect("populate operations");
    let unknown_never = QueueFilter {
        state: Some(OpState::Unknown),
        verdict: Some(VerdictFilter::Never),
        ..QueueFilter::default()
    };
    let mail_unknown = QueueFilter {
        state: Some(OpState::Unknown),
        receiver: Some("mail"),
        ..QueueFilter::default()
    };
    let ledger = QueueFilter {
        receiver: Some("ledger"),
        ..QueueFilter::default()
    };
    let shapes = [
        ("first page", QueueFilter::default(), PageBound::Start),
        ("one receiver's unknown", mail_unknown, PageBound::Start),
        (
            "one receiver's unknown, after a cursor",
            mail_unknown,
            PageBound::After("op-050000"),
        ),
        ("one receiver", ledger, PageBound::After("op-050000")),
        (
            "after a cursor",
            QueueFilter::default(),
            PageBound::After("op-050000"),
        ),
        ("unknown, never observed", unknown_never, PageBound::Start),
        (
            "unknown, never observed, after a cursor",
            unknown_never,
            PageBound::After("op-050000"),
        ),
    ];
    for (shape, filter, bound) in shapes {
        let plan = page_plan(&mut db, &filter, bound, 50);
        let found = outbox_sized(&plan);
        assert!(found.is_empty(), "{shape}: {found:?} in {plan}");
        assert!(
            plan.to_string().contains("\"Index Name\""),
            "{shape}: {plan}"
        );
    }
}
