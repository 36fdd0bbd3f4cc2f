//! Four eyes holds for a surplus effect's compensation as for the kept
//! one's (SPEC 10 and 14): the role that kept one effect of a duplicate may
//! not approve the compensation of its surplus; another role may.

use super::database_of;
use super::roles::login;
use crate::cli::assert_refused;
use crate::real_receivers::servers;
use crate::stores::{Site, Store};
use crate::support::run_with_env;
use recon::receiver::Fault;
use serde_json::json;

#[test]
fn with_four_eyes_the_role_that_kept_one_effect_may_not_approve_a_surplus_compensation() {
    let test =
        "with_four_eyes_the_role_that_kept_one_effect_may_not_approve_a_surplus_compensation";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let mut site = Site::new(Store::Postgres);
    let payload = json!({"amount": 10, "to": "acct-7"});
    site.dispatched("op-1", "pay", &payload, Some(Fault::CrashAfterCommit));
    site.effect_behind("op-1", "pay", &payload);
    let url = site.args()[1].clone();
    let out = run_with_env(
        &["db", "init", "--four-eyes", "--database", &url],
        None,
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let roles = ["recon_reviewer", "recon_closer", "recon_approver"];
    let keeper = login(pg, &url, "dupkeep_k", &roles);
    let other = login(pg, &url, "dupkeep_o", &["recon_approver"]);
    let ids: Vec<String> = (site.ledger(Some("op-1")).into_iter())
        .map(|e| e.effect_id)
        .collect();
    let run = |url: &str, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--database", url]);
        run_with_env(&all, None, &[])
    };
    let kept = run(
        &keeper,
        &[
            "reconcile",
            "op-1",
            "--decision",
            "confirmed",
            "--keep",
            &ids[0],
            "--expected-version",
            "2",
            "--close",
        ],
    );
    assert_eq!(kept.code, Some(0), "{}", kept.stderr);
    let approve = |url: &str| {
        run(
            url,
            &[
                "approve-compensation",
                "op-1",
                "--effect",
                &ids[1],
                "--reason",
                "duplicate",
                "--expected-version",
                "3",
                "--compensation-op",
                "undo-1",
                "--action",
                "refund",
                "--payload",
                "{}",
            ],
        )
    };
    let count = || pg.psql(database_of(&url), "SELECT count(*) FROM journal");
    let before = count();
    assert_refused(&approve(&keeper), "same_person");
    assert_eq!(count(), before, "nothing was written");
    let out = approve(&other);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}
