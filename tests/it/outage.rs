//! After an outage (issue 21): many unknown operations read in one
//! `observe`, recorded in few transactions, one observation the store
//! refuses rolled back alone, and a long run stopped with Ctrl-C keeping
//! what it recorded; and the drill itself at small scale: after an outage
//! behind `recon-pg-ledger`, `resolve` decides exactly the provable
//! operations, each on its own closing snapshot.

mod drill;

use crate::real_receivers::servers;
use crate::stores::{on_both_stores, Site, Store};
use crate::support::{catches_sigint, mkfifo};
use drill::Fate;
use recon::demo::{generate, Load};
use recon::domain::Verdict;
use recon::receiver::Fault;
use recon::workspace::ObserveRequest;
use recon::{OpenOptions, Workspace};
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

/// SQL that makes the outbox refuse each insert into a table for one
/// operation, and SQL that lets it again: each as (SQLite, PostgreSQL).
struct StoreRefusal {
    install: (String, String),
    remove: (String, String),
}

fn refuse_insert(table: &str, op_id: &str) -> StoreRefusal {
    let name = format!("refuse_{table}");
    let message = format!("the drill refuses {op_id}");
    StoreRefusal {
        install: (
            format!(
                "CREATE TRIGGER {name} BEFORE INSERT ON {table} WHEN NEW.op_id = '{op_id}'
                 BEGIN SELECT RAISE(ABORT, '{message}'); END;"
            ),
            format!(
                "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN IF NEW.op_id = '{op_id}' THEN RAISE EXCEPTION '{message}'; END IF;
                 RETURN NEW; END $$;
                 CREATE TRIGGER {name} BEFORE INSERT ON {table}
                 FOR EACH ROW EXECUTE FUNCTION {name}();"
            ),
        ),
        remove: (
            format!("DROP TRIGGER {name};"),
            format!("DROP TRIGGER {name} ON {table}; DROP FUNCTION {name}();"),
        ),
    }
}

on_both_stores!(an_observation_the_store_refuses_rolls_back_alone_and_its_batch_is_recorded);
fn an_observation_the_store_refuses_rolls_back_alone_and_its_batch_is_recorded(store: Store) {
    let mut site = Site::new(store);
    for op in ["a", "b", "c"] {
        let payload = json!({ "to": op });
        site.dispatched(op, "send_email", &payload, Some(Fault::CrashBeforeCommit));
    }
    let refusal = refuse_insert("observations", "b");
    execute(&site, &refusal.install.0, &refusal.install.1);
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
    execute(&site, &refusal.remove.0, &refusal.remove.1);
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

/// An outbox on `store` whose `fax` operations route to the fixture
/// adapter in session mode, batches of `batch`, holding (if `hold` says
/// `(n, verb)`) its `verb` request number `n + 1` until released through
/// the fifos `held` and `release` in the site's scratch directory; `count`
/// of them are unknown, each with its effect (the receipt lost).
pub(crate) fn fax_outage(
    store: Store,
    count: usize,
    batch: usize,
    hold: Option<(usize, &str)>,
) -> (Site, Vec<String>) {
    let mut site = Site::new(store);
    let dir = site.scratch().to_path_buf();
    let file = |name: &str| dir.join(name).display().to_string();
    let mut args: Vec<String> = [
        "--state",
        &file("fax.json"),
        "--mode-file",
        &file("fax.mode"),
        "--complete",
        "--authoritative",
        "--can-close",
        "--session",
        "--batch",
        &batch.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some((n, verb)) = hold {
        args.extend([
            "--hold".to_string(),
            file(""),
            "--hold-after".to_string(),
            n.to_string(),
            "--hold-verb".to_string(),
            verb.to_string(),
        ]);
        mkfifo(&dir.join("held"));
        mkfifo(&dir.join("release"));
    }
    let program = crate::support::adapter_fixture();
    site.ws
        .register_receiver(&recon::workspace::NewReceiver {
            name: "fax",
            actions: &["fax".to_string()],
            program: &program,
            args: &args,
            timeout_ms: None,
            env: &[],
        })
        .expect("register the fax adapter");
    std::fs::write(dir.join("fax.mode"), "apply:crash-after").unwrap();
    let ops: Vec<String> = (1..=count).map(|n| format!("op-{n:03}")).collect();
    for op in &ops {
        site.ws.prepare(op, "fax", &json!({ "page": op })).unwrap();
        site.ws.dispatch(op, Default::default()).unwrap();
    }
    std::fs::write(dir.join("fax.mode"), "").unwrap();
    (site, ops)
}

on_both_stores!(an_outage_is_read_through_one_adapter_session_in_batches_on_either_store);
fn an_outage_is_read_through_one_adapter_session_in_batches_on_either_store(store: Store) {
    let (mut site, ops) = fax_outage(store, 120, 25, None);
    let spawned = site.ws.receiver_program().spawned();
    let request = ObserveRequest {
        by: "ann",
        ..ObserveRequest::default()
    };
    let report = site.ws.observe(&request).expect("observe");
    assert!(report.unread.is_empty(), "{:?}", report.unread.first());
    assert_eq!(site.ws.receiver_program().spawned() - spawned, 1);
    let seen: Vec<(&str, Verdict, i64)> = (report.observed.iter())
        .map(|o| (o.op_id.as_str(), o.verdict, o.matches))
        .collect();
    let expected: Vec<(&str, Verdict, i64)> = (ops.iter())
        .map(|op| (op.as_str(), Verdict::ExactMatchExistenceOnly, 1))
        .collect();
    assert_eq!(seen, expected);
    site.assert_sound();
}

on_both_stores!(a_close_the_outbox_refuses_in_a_batch_fails_alone_and_the_rest_is_decided);
fn a_close_the_outbox_refuses_in_a_batch_fails_alone_and_the_rest_is_decided(store: Store) {
    // Six lost receipts, closed in batches of three: the second one's
    // close cannot be journaled.
    let (site, ops) = fax_outage(store, 6, 3, None);
    let refusal = refuse_insert("closes", &ops[1]);
    execute(&site, &refusal.install.0, &refusal.install.1);
    let words = [
        "resolve",
        "--policy",
        "provable",
        "--by",
        "robot",
        "--authorized-by",
        "cy",
        "--older-than",
        "0s",
        "--json",
    ];
    let first = site.run(&words, None);
    let report = first.json();
    assert_eq!(
        (&report["confirmed"], &report["failed"]),
        (&json!(5), &json!(1)),
        "{report} {}",
        first.stderr
    );
    let failed: Vec<&serde_json::Value> = (report["operations"].as_array().unwrap().iter())
        .filter(|o| o["outcome"] == "failed")
        .map(|o| &o["op_id"])
        .collect();
    assert_eq!(failed, [&json!(ops[1])]);
    // Said once, naming the refusal and that the receiver closed it.
    let said = format!("the drill refuses {}", ops[1]);
    assert!(first.stderr.contains(&said), "{}", first.stderr);
    assert!(first.stderr.contains("now closed"), "{}", first.stderr);
    let shown = site.run(&["show", &ops[1], "--json"], None).json();
    assert_eq!(
        (&shown["operation"]["state"], &shown["closes"]),
        (&json!("unknown"), &json!([]))
    );
    // Allowed again, a second run closes it again (a close is idempotent)
    // and decides it.
    execute(&site, &refusal.remove.0, &refusal.remove.1);
    let second = site.run(&words, None).json();
    assert_eq!(
        (&second["confirmed"], &second["failed"]),
        (&json!(1), &json!(0))
    );
    assert_verifies(&site);
}

#[test]
fn ctrl_c_stops_observe_after_the_request_in_hand_and_keeps_what_it_read() {
    // 30 operations, batches of 5: the third request is held.
    let (site, ops) = fax_outage(Store::Sqlite, 30, 5, Some((2, "query")));
    let dir = site.scratch().to_path_buf();
    let mut args = vec!["observe".to_string()];
    args.extend(site.args());
    args.extend(["--by", "ann", "--json"].map(String::from));
    let child = std::process::Command::new(crate::support::recon_bin())
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start observe");
    let mut held = String::new();
    std::io::Read::read_to_string(
        &mut std::fs::File::open(dir.join("held")).expect("open held"),
        &mut held,
    )
    .unwrap();
    assert_eq!(held, "held\n");
    let pid = child.id();
    // SAFETY: kill with a live child's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    while catches_sigint(pid) {
        std::thread::yield_now();
    }
    std::fs::write(dir.join("release"), "go\n").expect("release the adapter");
    let out = child.wait_with_output().expect("observe ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the array");
    let read: Vec<&str> = (rows.as_array().unwrap().iter())
        .map(|r| r["op_id"].as_str().unwrap())
        .collect();
    // The held request (the third batch) was answered and recorded.
    assert_eq!(
        read,
        ops[..15].iter().map(String::as_str).collect::<Vec<_>>()
    );
    // No progress on a stderr that is not a terminal: one line, the stop.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let last: serde_json::Value =
        serde_json::from_str(stderr.lines().last().expect("a line")).expect("JSON");
    assert_eq!(
        last,
        json!({"interrupted": {"observed": 15, "unread": 0, "not_attempted": 15}})
    );
    // What was read is recorded, and nothing else.
    let never = site.run(
        &["ops", "--verdict", "never", "--json", "--limit", "100"],
        None,
    );
    let never: Vec<String> = (never.json().as_array().unwrap().iter())
        .map(|op| op["op_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(never, ops[15..]);
    site.assert_sound();
    // Run again over those never read, it reads the rest (a new session
    // holds its third request again: released at once).
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut held = String::new();
            std::io::Read::read_to_string(
                &mut std::fs::File::open(dir.join("held")).unwrap(),
                &mut held,
            )
            .unwrap();
            std::fs::write(dir.join("release"), "go\n").unwrap();
        });
        let words = ["observe", "--older-than", "1h", "--by", "ann", "--json"];
        let again = site.run(&words, None);
        assert_eq!(again.code, Some(0), "{}", again.stderr);
        let read: Vec<String> = (again.json().as_array().unwrap().iter())
            .map(|r| r["op_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(read, ops[15..]);
    });
    site.assert_sound();
}

/// A workspace whose `count` unknown operations route to recon's own
/// ledger registered `--no-close`, which is read through its adapter (a
/// session that answers batches of 500), never in process.
fn outage_behind_the_ledgers_adapter(count: u64) -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ws = Workspace::open(dir.path(), OpenOptions::default().creating())
        .expect("create workspace")
        .with_receiver_program(crate::support::program());
    ws.register_builtin("builtin", &["*".to_string()], false)
        .expect("register the ledger --no-close");
    let schedule = generate::Schedule::new(1, count, ws.now());
    ws.append_generated(&Load::new(1, count, schedule))
        .expect("generate the outage");
    (dir, ws)
}

#[test]
fn an_outage_of_thousands_is_read_through_one_session_in_batches() {
    let count = 3000;
    let (dir, mut ws) = outage_behind_the_ledgers_adapter(count);
    let spawned = ws.receiver_program().spawned();
    let request = ObserveRequest {
        by: "ann",
        ..ObserveRequest::default()
    };
    let report = ws.observe(&request).expect("observe");
    assert!(report.unread.is_empty(), "{:?}", report.unread.first());
    assert_eq!(report.stopped, None);
    // One adapter process for the whole command.
    assert_eq!(ws.receiver_program().spawned() - spawned, 1);
    let observed: Vec<(String, Verdict)> = (report.observed.iter())
        .map(|o| (o.op_id.clone(), o.verdict))
        .collect();
    let expected: Vec<(String, Verdict)> = (1..=count)
        .map(|n| (generate::op_id(n), generate::Evidence::of(n).open_verdict()))
        .collect();
    assert_eq!(observed, expected);
    for o in &report.observed {
        assert_eq!((o.receiver.as_str(), o.closed), ("builtin", false), "{o:?}");
    }
    // Each operation's latest observation is this read.
    let page = ws
        .ops_page(&recon::domain::OpsQuery {
            limit: usize::try_from(count).unwrap(),
            ..Default::default()
        })
        .expect("ops");
    assert_eq!(page.len() as u64, count);
    for op in &page {
        let latest = op.triage.latest_observation.as_ref().expect("observed");
        assert_eq!(latest.observed_by, "ann", "{}", op.op_id);
    }
    drop(ws);
    // The journal replays to the tables (the generated load's background
    // effects are other callers', so the single-host invariants that
    // count a ledger's rows do not apply).
    let report = recon::workspace::Journal::open(
        recon::Location::workspace(dir.path()),
        OpenOptions::default(),
    )
    .expect("open the journal")
    .verify(recon::audit::VerifyRequest::default())
    .expect("verify");
    assert!(report.intact, "{report:?}");
}

/// Each policy decision of the export, checked to rest on its own closing
/// snapshot (closed, of its operation, of the verdict its decision
/// requires, after a `closed` entry of the same operation); the decided
/// op ids and their decisions.
fn policy_decisions(export: &str) -> Vec<(String, String)> {
    let entries: Vec<serde_json::Value> = (export.lines())
        .map(|l| serde_json::from_str(l).expect("an entry"))
        .collect();
    let mut closed = std::collections::BTreeSet::new();
    let mut decided = Vec::new();
    for e in &entries {
        let op = e["op_id"].as_str().unwrap_or_default().to_string();
        match e["kind"].as_str() {
            Some("closed") => {
                closed.insert(op);
            }
            Some("decided") if e["source"] == "policy" => {
                assert_eq!(e["policy"], "provable", "{e}");
                assert!(closed.contains(&op), "decided before its close: {e}");
                let snapshot = &e["snapshot"];
                assert_eq!(snapshot["closed"], true, "{e}");
                assert_eq!(snapshot["op_id"].as_str(), Some(op.as_str()), "{e}");
                let matches = snapshot["matches"].as_array().expect("matches");
                let (verdict, decision, count) = match Fate::of(number(&op)) {
                    Fate::Applied => ("unique_exact_match", "confirmed", 1),
                    Fate::NeverApplied => ("terminal_absence", "not_applied", 0),
                    other => panic!("{op} ({other:?}) decided by the policy: {e}"),
                };
                assert_eq!(
                    (&e["verdict"], &e["decision"]),
                    (&json!(verdict), &json!(decision))
                );
                assert_eq!(matches.len(), count, "{e}");
                for m in matches {
                    assert_eq!(m["op_id"].as_str(), Some(op.as_str()), "{e}");
                    assert_eq!(
                        m["payload"],
                        serde_json::from_str::<serde_json::Value>(&drill::payload(number(&op)))
                            .unwrap(),
                        "{e}"
                    );
                }
                decided.push((op, decision.to_string()));
            }
            _ => {}
        }
    }
    decided
}

fn number(op_id: &str) -> u64 {
    op_id
        .strip_prefix("drill-")
        .and_then(|n| n.parse().ok())
        .expect("a drill op id")
}

/// `count` lost receipts routed to `ledger`: through the outbox's bulk
/// load, or (PostgreSQL, which has none) prepared and dispatched one by
/// one to a receiver that dies first.
fn lost_receipts(site: &mut Site, count: u64) {
    let at = site.ws.now();
    let mut ops = drill::operations(count, at);
    if site.store == Store::Sqlite {
        let written = site.ws.append_lost_receipts("ledger", &mut ops);
        assert_eq!(written.expect("the outage"), count);
        return;
    }
    let dies = site.scratch().join(drill::APPLY_DIES);
    std::fs::write(&dies, "").expect("the apply dies");
    for op in ops {
        let payload: serde_json::Value = serde_json::from_str(&op.canonical_payload).unwrap();
        site.ws
            .prepare(&op.op_id, &op.action_kind, &payload)
            .unwrap();
        let report = site.ws.dispatch(&op.op_id, Default::default()).unwrap();
        assert_eq!(report.outcome, "unknown", "{report:?}");
    }
    std::fs::remove_file(&dies).expect("the apply lives");
}

on_both_stores!(
    after_an_outage_resolve_leaves_exactly_the_duplicates_and_mismatches_and_each_decision_rests_on_its_own_closing_snapshot
);
fn after_an_outage_resolve_leaves_exactly_the_duplicates_and_mismatches_and_each_decision_rests_on_its_own_closing_snapshot(
    store: Store,
) {
    let test = "after_an_outage_resolve_leaves_exactly_the_duplicates_and_mismatches";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let Some(binary) = servers::require(test, servers::pg_ledger_binary()) else {
        return;
    };
    // Fewer where each is a prepare and a dispatch.
    let count = match store {
        Store::Sqlite => 400,
        Store::Postgres => 200,
    };
    let url = pg.new_database("drill");
    let mut site = Site::new(store);
    let program = drill::counting_spawns(binary, site.scratch());
    drill::register_ledger(&mut site.ws, &program, &url);
    lost_receipts(&mut site, count);
    drill::apply_fates(binary, &url, site.ws.id(), count);
    let registered = drill::spawned(site.scratch()).len();
    let observed = site.run(&["observe", "--by", "ann", "--json"], None);
    assert_eq!(observed.code, Some(0), "{}", observed.stderr);
    assert_eq!(
        observed.json().as_array().map(Vec::len),
        Some(count as usize)
    );
    let words = ["resolve", "--policy", "provable", "--by", "robot"];
    let resolved = site.run(
        &[
            &words[..],
            &["--authorized-by", "cy", "--older-than", "0s", "--json"],
        ]
        .concat(),
        None,
    );
    assert_eq!(resolved.code, Some(0), "{}", resolved.stderr);
    // Each command started the adapter once for its session, and once
    // to check its description before using it.
    assert_eq!(
        drill::spawned(site.scratch())[registered..],
        ["describe", "session", "describe", "session"]
    );
    let fates: Vec<Fate> = (1..=count).map(Fate::of).collect();
    let tally = |fate: Fate| fates.iter().filter(|f| **f == fate).count();
    let report = resolved.json();
    assert_eq!(
        (
            &report["confirmed"],
            &report["not_applied"],
            &report["failed"]
        ),
        (
            &json!(tally(Fate::Applied)),
            &json!(tally(Fate::NeverApplied)),
            &json!(0)
        ),
        "{report}"
    );
    assert_eq!(
        report["left"],
        json!({"duplicate_matches": tally(Fate::AppliedTwice),
               "payload_mismatch": tally(Fate::Changed)}),
        "{report}"
    );
    let queue = site.run(
        &["ops", "--state", "unknown", "--json", "--limit", "1000"],
        None,
    );
    let left: Vec<String> = (queue.json().as_array().expect("the queue").iter())
        .map(|op| op["op_id"].as_str().expect("an op id").to_string())
        .collect();
    let unprovable: Vec<String> = (1..=count)
        .filter(|n| !Fate::of(*n).provable())
        .map(drill::op_id)
        .collect();
    assert_eq!(left, unprovable);
    let export = site.run(&["export"], None);
    assert_eq!(export.code, Some(0), "{}", export.stderr);
    let decided = policy_decisions(&export.stdout);
    let provable: Vec<(String, String)> = (1..=count)
        .filter(|n| Fate::of(*n).provable())
        .map(|n| {
            let decision = match Fate::of(n) {
                Fate::Applied => "confirmed",
                _ => "not_applied",
            };
            (drill::op_id(n), decision.to_string())
        })
        .collect();
    let mut sorted = decided.clone();
    sorted.sort();
    assert_eq!(sorted, provable);
    assert_verifies(&site);
}

/// `recon verify` passes: the journal replays to the tables. (The
/// single-host invariants look for confirmed effects in recon's own
/// ledger, which holds none when an adapter confirmed them.)
#[track_caller]
fn assert_verifies(site: &Site) {
    let verified = site.run(&["verify", "--json"], None);
    let shown = format!("{}{}", verified.stdout, verified.stderr);
    assert_eq!(verified.code, Some(0), "{shown}");
}

#[test]
fn lost_receipts_in_bulk_are_refused_for_a_name_not_registered_and_for_recons_own_ledger() {
    let mut site = Site::new(Store::Sqlite);
    let at = site.ws.now();
    for name in ["nobody", recon::domain::BUILTIN_NAME] {
        let refused = site
            .ws
            .append_lost_receipts(name, &mut drill::operations(3, at))
            .expect_err("refused");
        assert!(
            matches!(&refused, recon::Error::Refused(recon::Refusal::UnknownReceiver(n)) if n == name),
            "{refused:?}"
        );
    }
    let written = site.ws.operation(&drill::op_id(1)).expect("read");
    assert_eq!(written, None);
}

on_both_stores!(
    the_loser_of_two_resolves_at_once_reports_what_the_winner_took_as_skipped_not_failed
);
/// A resolve holds in its close while another act decides one of its
/// operations first: the held run, released, records the rest and reports
/// the one it lost as passed over (`version_changed` or `not_unknown`, as
/// a fresh selection would), never as `failed`. (Two resolves at once
/// once reported hundreds of such operations failed.)
fn the_loser_of_two_resolves_at_once_reports_what_the_winner_took_as_skipped_not_failed(
    store: Store,
) {
    // Three lost receipts, closed in one batch: the close is held.
    let (site, ops) = fax_outage(store, 3, 3, Some((0, "close")));
    let dir = site.scratch().to_path_buf();
    let mut args: Vec<String> = [
        "resolve",
        "--policy",
        "provable",
        "--by",
        "robot",
        "--authorized-by",
        "cy",
        "--older-than",
        "0s",
        "--json",
    ]
    .map(String::from)
    .to_vec();
    args.extend(site.args());
    let child = std::process::Command::new(crate::support::recon_bin())
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start resolve");
    let mut held = String::new();
    std::io::Read::read_to_string(
        &mut std::fs::File::open(dir.join("held")).expect("open held"),
        &mut held,
    )
    .unwrap();
    assert_eq!(held, "held\n");
    // Meanwhile a person confirms the first on a plain read (its effect
    // exists: exact_match_existence_only supports confirmed).
    let decided = site.run(
        &[
            "reconcile",
            &ops[0],
            "--decision",
            "confirmed",
            "--reviewer",
            "ann",
            "--expected-version",
            "2",
            "--json",
        ],
        None,
    );
    assert_eq!(decided.code, Some(0), "{}", decided.stderr);
    std::fs::write(dir.join("release"), "go\n").expect("release the adapter");
    let out = child.wait_with_output().expect("resolve ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report");
    assert_eq!(
        (&report["confirmed"], &report["failed"]),
        (&json!(2), &json!(0)),
        "{report} {stderr}"
    );
    let skipped = report["skipped"].as_object().expect("skipped");
    let lost: u64 = ["version_changed", "not_unknown"]
        .iter()
        .filter_map(|why| skipped.get(*why).and_then(serde_json::Value::as_u64))
        .sum();
    assert_eq!(lost, 1, "{report}");
    let shown = site.run(&["show", &ops[0], "--json"], None).json();
    assert_eq!(shown["evidence"][0]["reviewer"], "ann", "{shown}");
    assert_verifies(&site);
}
