//! Commits whose outcome is unknown (SPEC 10): a decision's COMMIT loses
//! its connection (a proxy, `proxy.rs`, cuts it at the COMMIT message),
//! either before the server saw it or after the server committed and
//! before recon heard the answer. With the server reachable again recon
//! settles which from the `(seq, hash)` it sealed; without, it says the
//! act may have committed (exit 4, with seq and hash). Either way the
//! journal verifies, nothing is doubled, and a re-run of the same decision
//! is refused (it had committed) or succeeds (it had not).

use super::outbox::{confirm, location, open_with, outbox, refusal, unknown_op, verify};
use super::proxy::{Cut, Proxy};
use crate::real_receivers::servers::Postgres;
use recon::commands::{Failure, EXIT_STORAGE};
use recon::domain::OpState;
use recon::error::DatabaseProblem;
use recon::{Error, OpenOptions, Refusal, StoreError, Workspace};
use serde_json::json;
use std::time::Duration;

/// A decision on an `unknown` op made through a proxy that cuts its
/// COMMIT as `cut`: the op's version before, what the decision returned,
/// and the directory of the adapter's ledger (a re-run asks it again).
fn decide_cut(
    pg: &Postgres,
    url: &str,
    cut: Cut,
    reachable: bool,
) -> (i64, recon::Result<()>, tempfile::TempDir) {
    let proxy = Proxy::start(pg.port);
    let options = OpenOptions::default().waiting(Duration::from_millis(300));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = open_with(&proxy.url(url, pg.port), options);
    let version = unknown_op(&mut ws, dir.path(), "op-1");
    proxy.arm(cut, reachable);
    (version, confirm(&mut ws, "op-1", version), dir)
}

/// The seq and hash of the journal's head, read directly.
fn head(url: &str) -> (i64, String) {
    let mut client = super::outbox::client(url);
    let row = client
        .query_one("SELECT seq, hash FROM journal_head", &[])
        .expect("the head");
    (row.get(0), row.get(1))
}

/// How many `decided` entries the journal holds for op-1.
fn decisions(url: &str) -> i64 {
    let mut client = super::outbox::client(url);
    client
        .query_one(
            "SELECT count(*) FROM journal WHERE kind = 'decided' AND op_id = 'op-1'",
            &[],
        )
        .expect("count")
        .get(0)
}

fn direct(url: &str) -> Workspace {
    Workspace::open(location(url), OpenOptions::default()).expect("open directly")
}

/// The op's state and version, read directly.
fn op_now(url: &str) -> (OpState, i64) {
    let op = direct(url)
        .operation("op-1")
        .expect("read")
        .expect("the operation");
    (op.state, op.version)
}

#[test]
fn a_decision_whose_commit_never_reached_the_server_is_settled_as_not_committed() {
    let test = "a_decision_whose_commit_never_reached_the_server_is_settled_as_not_committed";
    let Some((pg, url)) = outbox(test, "lost_before") else {
        return;
    };
    let (version, result, _ledger) = decide_cut(pg, &url, Cut::BeforeServer, true);
    let seq = match result {
        Err(Error::Store(StoreError::Database {
            problem: DatabaseProblem::NotCommitted { seq, .. },
            ..
        })) => seq,
        other => panic!("expected not committed, got {other:?}"),
    };
    nothing_was_written_and_the_rerun_succeeds_once(&url, version, seq);
}

#[test]
fn a_decision_whose_commit_landed_but_lost_its_answer_is_settled_as_committed() {
    let test = "a_decision_whose_commit_landed_but_lost_its_answer_is_settled_as_committed";
    let Some((pg, url)) = outbox(test, "lost_after") else {
        return;
    };
    let (version, result, _ledger) = decide_cut(pg, &url, Cut::AfterServer, true);
    result.expect("the lost answer is settled as committed");
    assert_eq!(op_now(&url), (OpState::Confirmed, version + 1));
    assert_eq!(decisions(&url), 1);
    rerun_is_refused_naming_the_version_found(&url, version);
}

#[test]
fn a_commit_cut_while_the_old_session_stays_open_is_settled_by_ending_that_session() {
    let test = "a_commit_cut_while_the_old_session_stays_open_is_settled_by_ending_that_session";
    let Some((pg, url)) = outbox(test, "lost_hung") else {
        return;
    };
    // The lost session holds the journal head inside its transaction
    // for 10 s (idle_in_transaction_session_timeout), far past this busy
    // timeout: only ending it lets the lookup read the outcome in time.
    let (version, result, _ledger) = decide_cut(pg, &url, Cut::ClientOnly, true);
    match result {
        Err(Error::Store(StoreError::Database {
            problem: DatabaseProblem::NotCommitted { .. },
            ..
        })) => {}
        other => panic!("expected not committed, got {other:?}"),
    }
    assert_eq!(op_now(&url), (OpState::Unknown, version));
    confirm(&mut direct(&url), "op-1", version).expect("the re-run");
    assert_eq!(decisions(&url), 1);
    assert!(verify(&url).intact);
}

/// The same decision again, after it committed: refused, the version found
/// named, nothing doubled.
fn rerun_is_refused_naming_the_version_found(url: &str, version: i64) {
    match refusal(confirm(&mut direct(url), "op-1", version)) {
        Refusal::StaleVersion {
            expected, found, ..
        } => assert_eq!((expected, found), (version, version + 1)),
        other => panic!("expected stale_version, got {other:?}"),
    }
    assert_eq!(decisions(url), 1);
    assert!(verify(url).intact);
}

/// The unknown outcome as the command reports it: exit 4, and in JSON
/// `committed` with the act, seq and hash; in text, that it may have
/// committed and how to check. Returns the seq and hash.
/// The act did not commit: the head is below the seq it sealed, the
/// operation is as it was and holds no decision; the same decision again
/// succeeds, once, taking that seq, and the journal verifies.
fn nothing_was_written_and_the_rerun_succeeds_once(url: &str, version: i64, seq: i64) {
    assert!(head(url).0 < seq);
    assert_eq!(op_now(url), (OpState::Unknown, version));
    assert_eq!(decisions(url), 0);
    confirm(&mut direct(url), "op-1", version).expect("the re-run");
    assert_eq!(op_now(url), (OpState::Confirmed, version + 1));
    assert_eq!(decisions(url), 1);
    assert_eq!(head(url).0, seq);
    assert!(verify(url).intact);
}

fn assert_unknown(result: recon::Result<()>) -> (i64, String) {
    let error = result.expect_err("the outcome is unknown");
    let committed = error.committed().expect("what may have committed").clone();
    let seq = committed.json["seq"].as_i64().expect("a seq");
    let hash = committed.json["hash"].as_str().expect("a hash").to_string();
    let failure = Failure::from(error);
    assert_eq!(failure.exit_code(), EXIT_STORAGE);
    let json = failure.json().expect("a JSON error");
    assert_eq!(
        json["error"]["committed"],
        json!({"outcome": "unknown", "act": "decided", "seq": seq, "hash": hash})
    );
    assert_eq!(json["error"]["kind"], json!("storage"));
    let text = failure.message().expect("a message");
    for needle in [
        "may have committed",
        "recon verify",
        &format!("entry {seq}"),
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    (seq, hash)
}

#[test]
fn a_commit_that_landed_with_the_server_unreachable_is_unknown_and_its_entry_settles_it() {
    let test =
        "a_commit_that_landed_with_the_server_unreachable_is_unknown_and_its_entry_settles_it";
    let Some((pg, url)) = outbox(test, "unknown_after") else {
        return;
    };
    let (version, result, _ledger) = decide_cut(pg, &url, Cut::AfterServer, false);
    let (seq, hash) = assert_unknown(result);
    // The server answers again: entry `seq` with that hash is there.
    assert_eq!(head(&url), (seq, hash));
    assert_eq!(op_now(&url), (OpState::Confirmed, version + 1));
    rerun_is_refused_naming_the_version_found(&url, version);
}

#[test]
fn a_commit_that_never_landed_with_the_server_unreachable_is_unknown_and_its_rerun_succeeds() {
    let test =
        "a_commit_that_never_landed_with_the_server_unreachable_is_unknown_and_its_rerun_succeeds";
    let Some((pg, url)) = outbox(test, "unknown_before") else {
        return;
    };
    let (version, result, _ledger) = decide_cut(pg, &url, Cut::BeforeServer, false);
    let (seq, _) = assert_unknown(result);
    // The server answers again: the head is below `seq`, so the act did
    // not commit, and the same decision succeeds once.
    nothing_was_written_and_the_rerun_succeeds_once(&url, version, seq);
}
