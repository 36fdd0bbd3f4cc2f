//! After an outage (issue 21): many unknown operations read in one
//! `observe`, recorded in few transactions, one observation the store
//! refuses rolled back alone, and a long run stopped with Ctrl-C keeping
//! what it recorded.

use crate::real_receivers::servers;
use crate::stores::{on_both_stores, Site, Store};
use recon::receiver::Fault;
use recon::workspace::ObserveRequest;
use serde_json::json;

/// Runs `sqlite` on the site's outbox file, or `postgres` on its database.
fn execute(site: &Site, sqlite: &str, postgres: &str) {
    match site.store {
        Store::Sqlite => rusqlite::Connection::open(site.path().join("sender.sqlite"))
            .and_then(|db| db.execute_batch(sqlite))
            .expect("run SQL on the outbox"),
        Store::Postgres => {
            let url = &site.args()[1];
            let database = url.rsplit('/').next().expect("a database name");
            let pg = servers::postgres().as_ref().expect("the cluster");
            pg.psql(database, postgres);
        }
    }
}

const REFUSE_B: (&str, &str) = (
    "CREATE TRIGGER refuse_b BEFORE INSERT ON observations WHEN NEW.op_id = 'b'
     BEGIN SELECT RAISE(ABORT, 'the drill refuses b'); END;",
    "CREATE FUNCTION refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN IF NEW.op_id = 'b' THEN RAISE EXCEPTION 'the drill refuses b'; END IF;
     RETURN NEW; END $$;
     CREATE TRIGGER refuse_b BEFORE INSERT ON observations
     FOR EACH ROW EXECUTE FUNCTION refuse_b();",
);

const ALLOW_B: (&str, &str) = (
    "DROP TRIGGER refuse_b;",
    "DROP TRIGGER refuse_b ON observations; DROP FUNCTION refuse_b();",
);

on_both_stores!(an_observation_the_store_refuses_rolls_back_alone_and_its_batch_is_recorded);
fn an_observation_the_store_refuses_rolls_back_alone_and_its_batch_is_recorded(store: Store) {
    let mut site = Site::new(store);
    for op in ["a", "b", "c"] {
        let payload = json!({ "to": op });
        site.dispatched(op, "send_email", &payload, Some(Fault::CrashBeforeCommit));
    }
    execute(&site, REFUSE_B.0, REFUSE_B.1);
    let request = ObserveRequest {
        by: "ann",
        ..ObserveRequest::default()
    };
    let report = site.ws.observe(&request).expect("observe");
    let observed: Vec<&str> = report.observed.iter().map(|o| o.op_id.as_str()).collect();
    assert_eq!(observed, ["a", "c"], "{report:?}");
    assert_eq!(report.unread.len(), 1, "{report:?}");
    assert_eq!(report.unread[0].op_id, "b");
    let why = report.unread[0].error.to_string();
    assert!(why.contains("the drill refuses b"), "{why}");
    execute(&site, ALLOW_B.0, ALLOW_B.1);
    for (op, seen) in [("a", true), ("b", false), ("c", true)] {
        let op = site.ws.operation(op).expect("read").expect("the operation");
        assert_eq!(op.triage.latest_observation.is_some(), seen, "{op:?}");
    }
    // The refused observation left no journal entry: the chain and the
    // projection verify, and b is read on the next run.
    site.assert_sound();
    let report = site.ws.observe(&request).expect("observe again");
    assert_eq!(report.observed.len(), 3, "{report:?}");
    assert!(report.unread.is_empty(), "{report:?}");
    site.assert_sound();
}
