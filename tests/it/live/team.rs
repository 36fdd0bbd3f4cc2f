//! The console in team mode knows what its login may do (issue 32): an
//! act whose role the database says the login lacks is marked as such and
//! opens nothing, and another host's close reaches the snapshot panel of
//! a console showing that operation, read from the outbox. The roles are
//! asked again when the console's watcher finds the server again.
//!
//! Real terminals (tmux), each console its own `recon --database`
//! process; waits are on the screen's content, with a deadline.

use super::{console, lost_receipts, open};
use crate::pg_store::roles::login;
use crate::real_receivers::servers;
use crate::support::run;
use crate::terminal::Tmux;

/// The journal's length, read through the library as the outbox's owner.
fn journal_length(url: &str) -> i64 {
    open(url).change_marker().expect("marker").journal.length
}

#[test]
fn a_reader_logins_console_marks_decisions_as_needing_the_reviewer_role_and_c_opens_nothing() {
    let test =
        "a_reader_logins_console_marks_decisions_as_needing_the_reviewer_role_and_c_opens_nothing";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = crate::pg_store::initialized(pg, "lacks");
    let dir = tempfile::tempdir().expect("temp dir");
    lost_receipts(&url, dir.path(), 1);
    let reader = login(pg, &url, "lacks_r", &["recon_reader"]);
    // 200 columns: the bottom bar has room for acts not available now
    // (at 120 the verdict panel and the help say it).
    let args = ["--database", reader.as_str(), "--reviewer", "rita"];
    let Some(rita) = Tmux::start_with_env(&[], &args, (200, 40)) else {
        return;
    };
    // The verdict panel and the bottom bar say it in words, not only in
    // colour, once the adapter's read is on screen.
    rita.shows_all(&[
        "Verdict: exact_match_existence_only",
        "c confirmed (needs reviewer)",
        "c record confirmed: unavailable — needs the",
    ]);
    let before = journal_length(&url);
    rita.keys(&["c"]);
    let screen = rita.shows_all(&[
        "ask the outbox's owner: recon db grant lacks_r reviewer",
        "c needs the reviewer role",
    ]);
    assert!(!screen.contains("Record confirmed"), "no dialog:\n{screen}");
    assert!(!screen.contains("name:"), "no name prompt:\n{screen}");
    // The closing snapshot needs the closer role, which a reader lacks too.
    rita.keys(&["x"]);
    rita.shows("x needs the closer role");
    // The help lists each such key as unavailable, naming the role.
    rita.keys(&["?"]);
    rita.shows("[unavailable: needs the reviewer role, which lacks_r lacks]");
    assert_eq!(journal_length(&url), before, "nothing was written");
}

#[test]
fn another_hosts_close_makes_the_snapshot_panel_say_closed_without_a_key_press() {
    let test = "another_hosts_close_makes_the_snapshot_panel_say_closed_without_a_key_press";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let url = crate::pg_store::initialized(pg, "closed_elsewhere");
    let dir = tempfile::tempdir().expect("temp dir");
    lost_receipts(&url, dir.path(), 1);
    let Some(bob) = console(&url, "bob") else {
        return;
    };
    bob.shows("Verdict: exact_match_existence_only");
    let open_panel = bob.shows("closed no");
    assert!(!open_panel.contains("closed yes"), "{open_panel}");
    // Another host (a closer's login) closes op-live-1 by the command line.
    let closer = login(pg, &url, "closed_elsewhere_c", &["recon_closer"]);
    let args = [
        "snapshot",
        "--database",
        &closer,
        "op-live-1",
        "--close",
        "--authorized-by",
        "ann",
    ];
    let out = run(&args, None);
    assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    bob.shows_all(&["closed yes", "CLOSING snapshot", "read from the outbox"]);
}

#[test]
fn a_role_granted_while_the_server_was_away_is_offered_once_the_console_is_live_again() {
    let test = "a_role_granted_while_the_server_was_away_is_offered_once_the_console_is_live_again";
    let Some(pg) = servers::require_own(test, servers::Postgres::dedicated()) else {
        return;
    };
    let url = pg.new_database("lacks_again");
    let init = run(&["db", "init", "--database", &url], None);
    assert_eq!(init.code, Some(0), "db init: {}", init.stderr);
    let dir = tempfile::tempdir().expect("temp dir");
    lost_receipts(&url, dir.path(), 1);
    let reader = login(&pg, &url, "lacks_again_r", &["recon_reader"]);
    let Some(rita) = console(&reader, "rita") else {
        return;
    };
    rita.shows("c record confirmed: unavailable — needs the");
    // Granted while the console runs: it asks again only once its watcher
    // has lost the server and found it again.
    let database = url.rsplit('/').next().expect("a database");
    pg.psql(database, "GRANT recon_reviewer TO lacks_again_r");
    pg.stop_immediately();
    rita.shows("not live:");
    pg.start_again();
    // The verdict panel may now say the read failed while the server was
    // away; what it no longer says is that a role is missing, but for the
    // closer's, which was not granted.
    rita.wait_until("the reviewer role offered", |s| {
        s.contains("live again")
            && s.contains("m note")
            && !s.contains("needs the reviewer")
            && s.contains("needs the closer role")
    });
}
