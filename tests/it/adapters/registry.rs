//! Registration and routes (SPEC 8, "Registration"): what `receivers add`
//! refuses and stores, `list`, `check` and `remove`, and where an operation
//! goes.

use super::{assert_refused_json, Rig, FULL, NO_CLOSE};
use crate::cli::assert_refused;
use crate::stores::{on_both_stores, Store};
use serde_json::{json, Value};

on_both_stores!(registration_refusals_store_nothing);
fn registration_refusals_store_nothing(store: Store) {
    let rig = Rig::with_mail_on(store);
    let (dump, list) = (rig.dump(), rig.list());
    for (name, actions, mode, code) in [
        ("bad", "x", "describe:garbage", "adapter_malformed"),
        ("bad", "x", "protocol-2", "adapter_malformed"),
        ("bad", "x", "missing-field", "adapter_malformed"),
        (
            "bad",
            "x",
            "unknown-capability",
            "adapter_unknown_capability",
        ),
        ("mail", "x", "", "receiver_exists"),
        ("other", "post_letter", "", "action_routed"),
        ("other", "x,post_letter", "", "action_routed"),
        ("builtin", "x", "", "reserved_name"),
    ] {
        let out = rig.add(name, actions, &[], &["--mode", mode]);
        assert_refused(&out, code);
        assert_eq!(rig.dump(), dump, "{name} {mode}: something was stored");
    }
    assert_eq!(rig.list(), list);
}

// SQLite only: it proves no workspace directory is created.
#[test]
fn a_receiver_name_outside_the_pattern_is_a_usage_error() {
    let rig = Rig::new();
    let long = "a".repeat(41);
    for name in [
        "Mail",
        "-mail",
        "_mail",
        "mail.eu",
        "ma il",
        "mail\u{1b}",
        &long,
    ] {
        let out = rig.add(name, "x", &[], &[]);
        assert_eq!(out.code, Some(2), "{name:?}: {}", out.stderr);
        assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
    }
    assert!(!std::path::Path::new(&rig.ws()).exists(), "nothing created");
    rig.register(&"a".repeat(40), "x", &[], &[]);
}

on_both_stores!(add_prints_the_registration_as_list_prints_it);
fn add_prints_the_registration_as_list_prints_it(store: Store) {
    let rig = Rig::on(store);
    let options = ["--timeout-ms", "1500", "--json"];
    let out = rig.add("mail", "post_letter,post_parcel", &options, NO_CLOSE);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The fields in the order of SPEC 8 (a parsed `Value` would sort them).
    let at = |key: &str| out.stdout.find(&format!("\"{key}\":")).expect(key);
    let order = [
        "name",
        "actions",
        "program",
        "args",
        "timeout_ms",
        "can_close",
        "complete",
        "authoritative",
        "describe_sha256",
        "env",
        "version",
        "instance",
        "registration_version",
    ];
    assert!(
        order.windows(2).all(|w| at(w[0]) < at(w[1])),
        "{}",
        out.stdout
    );
    let added = out.json();
    assert_eq!(added.as_object().unwrap().len(), order.len());
    assert_eq!(rig.list(), json!([added.clone()]));
    assert_eq!(added["actions"], json!(["post_letter", "post_parcel"]));
    assert_eq!(added["timeout_ms"], 1500);
    assert_eq!(
        (
            &added["can_close"],
            &added["complete"],
            &added["authoritative"]
        ),
        (&json!(false), &json!(true), &json!(true))
    );
    assert_eq!(
        added["args"],
        json!(rig.fixture_args("mail", NO_CLOSE)[1..])
    );
}

// SQLite only: it lists the built-in ledger's registration.
#[test]
fn list_prints_one_escaped_line_per_receiver() {
    let rig = Rig::with_ledger();
    rig.prepare("op-0", "send_email", "{}");
    assert!(rig.ok(&["receivers", "list"]).stdout.contains("builtin"));
    rig.register(
        "mail",
        "post_letter",
        &[],
        &["--name", "post\u{1b}[2Joffice"],
    );
    rig.register("sms", "send_sms", &[], FULL);
    let text = rig.ok(&["receivers", "list"]).stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("builtin  actions *  ") && lines[0].ends_with("(recon's own ledger)")
    );
    let lines = &lines[1..];
    assert!(lines[0].starts_with("mail ") && lines[1].starts_with("sms "));
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(lines[0].contains(r"post\x1b[2Joffice"), "{text}");
    assert!(lines[0].contains("can_close false"), "{text}");
    assert!(lines[1].contains("can_close true complete true authoritative true"));
    assert_eq!(rig.list()[0]["program"], "");
    assert_eq!(rig.list()[1]["args"][9], "post\u{1b}[2Joffice");
}

// SQLite only: what a list shows does not depend on the store.
#[test]
fn list_shows_the_env_names_the_adapter_version_and_the_instance() {
    let rig = Rig::new();
    let mut args = FULL.to_vec();
    args.extend(["--instance", "ledger-7"]);
    rig.register(
        "mail",
        "post_letter",
        &["--env", "MAIL_KEY", "--env", "HOME"],
        &args,
    );
    let row = &rig.list()[0];
    assert_eq!(row["env"], json!(["MAIL_KEY", "HOME"]), "{row}");
    assert_eq!(
        (
            &row["version"],
            &row["instance"],
            &row["registration_version"]
        ),
        (&json!("1.0"), &json!("ledger-7"), &json!(1)),
        "{row}"
    );
    let text = rig.ok(&["receivers", "list"]).stdout;
    for shown in [
        "env MAIL_KEY,HOME",
        "version 1.0 (registration version 1)",
        "instance ledger-7",
    ] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
}

on_both_stores!(a_bare_program_name_is_looked_up_on_path_once);
fn a_bare_program_name_is_looked_up_on_path_once(store: Store) {
    let rig = Rig::on(store);
    let mut args = vec![
        "receivers",
        "add",
        "mail",
        "--actions",
        "post_letter",
        "--json",
    ];
    args.extend(["--", "python3"]);
    let command = rig.fixture_args("mail", FULL);
    args.extend(command.iter().map(String::as_str));
    let added = rig.json(&args);
    let program = added["program"].as_str().unwrap();
    assert!(
        program.starts_with('/') && program.ends_with("python3"),
        "{program}"
    );
    assert_eq!(added["args"][0], command[0]);
    rig.prepare("op-1", "post_letter", "{}");
    assert_eq!(rig.dispatch("op-1")["outcome"], "receipt");
}

on_both_stores!(a_receiver_is_in_use_while_an_open_operation_routes_to_it);
fn a_receiver_is_in_use_while_an_open_operation_routes_to_it(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", "{}");
    assert_refused(
        &rig.recon(&["receivers", "remove", "mail"]),
        "receiver_in_use",
    );
    rig.set_mode("mail", "apply:crash-after");
    assert_eq!(rig.dispatch("op-1")["state"], "unknown");
    let dump = rig.dump();
    assert_refused(
        &rig.recon(&["receivers", "remove", "mail"]),
        "receiver_in_use",
    );
    assert_eq!(rig.dump(), dump);
    rig.set_mode("mail", "");
    assert_eq!(rig.reconcile("op-1", "confirmed", "2", false).code, Some(0));
    let out = rig.ok(&["receivers", "remove", "mail"]);
    assert!(
        out.stdout.contains("removed receiver mail"),
        "{}",
        out.stdout
    );
    assert_eq!(rig.list(), json!([]));
    assert_refused(
        &rig.recon(&["receivers", "remove", "mail"]),
        "unknown_receiver",
    );
    assert_refused(
        &rig.recon(&["receivers", "remove", "builtin"]),
        "unknown_receiver",
    );
    // The decided operation keeps the name of the receiver it went to.
    assert_eq!(rig.show("op-1")["operation"]["receiver"], "mail");
}

on_both_stores!(receivers_check_exits_0_when_describe_is_unchanged_and_1_when_it_differs);
fn receivers_check_exits_0_when_describe_is_unchanged_and_1_when_it_differs(store: Store) {
    let rig = Rig::with_mail_on(store);
    let dump = rig.dump();
    let same = rig.ok(&["receivers", "check", "mail"]);
    assert!(
        same.stdout.contains("mail: describe unchanged"),
        "{}",
        same.stdout
    );
    let json = rig.json(&["receivers", "check", "mail", "--json"]);
    assert_eq!(json["unchanged"], true);
    assert_eq!(json["stored_sha256"], json["current_sha256"]);
    rig.set_mode("mail", "changed");
    let differs = rig.recon(&["receivers", "check", "mail"]);
    assert_eq!(differs.code, Some(1), "{}", differs.stderr);
    let text = &differs.stdout;
    assert!(text.contains("mail: describe differs"), "{text}");
    assert!(text.contains(r#""version":"1.0""#) && text.contains(r#""version":"2.0""#));
    let differs = rig.recon(&["receivers", "check", "mail", "--json"]);
    assert_eq!(differs.code, Some(1));
    let json: Value = differs.json();
    assert_eq!(json["unchanged"], false);
    assert_eq!(
        (&json["stored"]["version"], &json["current"]["version"]),
        (&json!("1.0"), &json!("2.0"))
    );
    assert_ne!(json["stored_sha256"], json["current_sha256"]);
    assert_eq!(rig.dump(), dump, "check stores nothing");
    assert_refused_json(
        &rig.recon(&["receivers", "check", "nobody"]),
        "unknown_receiver",
    );
}

on_both_stores!(an_action_routed_nowhere_is_refused_until_a_receiver_takes_every_kind);
fn an_action_routed_nowhere_is_refused_until_a_receiver_takes_every_kind(store: Store) {
    let rig = Rig::with_mail_on(store);
    let dump = rig.dump();
    let refused = rig.recon(&[
        "prepare",
        "--op=op-1",
        "--action=send_email",
        "--payload={}",
    ]);
    assert_refused(&refused, "no_receiver");
    assert_eq!(rig.dump(), dump);
    let any = rig.catch_all();
    // A named route still wins over `*`.
    assert_eq!(rig.prepare("op-2", "post_letter", "{}")["receiver"], "mail");
    let prepared = rig.prepare("op-1", "send_email", "{}");
    assert_eq!(prepared["receiver"], any);
    let report = rig.dispatch("op-1");
    assert_eq!(
        (&report["receiver"], &report["outcome"]),
        (&json!(any), &json!("receipt"))
    );
    assert_eq!(rig.effects_at(any, "op-1"), 1);
    assert!(rig.calls("mail", "apply").is_empty());
}

on_both_stores!(the_route_is_fixed_when_the_operation_is_prepared);
fn the_route_is_fixed_when_the_operation_is_prepared(store: Store) {
    let rig = Rig::on(store);
    let any = rig.catch_all();
    assert_eq!(
        rig.prepare("op-early", "post_letter", "{}")["receiver"],
        any
    );
    rig.register("mail", "post_letter", &[], FULL);
    assert_eq!(
        rig.prepare("op-late", "post_letter", "{}")["receiver"],
        "mail"
    );
    assert_eq!(rig.dispatch("op-early")["receiver"], any);
    assert_eq!(rig.effects_at(any, "op-early"), 1);
    assert_eq!(rig.dispatch("op-late")["receiver"], "mail");
    assert_eq!(rig.calls("mail", "apply")[0]["op"]["op_id"], "op-late");
    // Another receiver takes the route over; decided operations keep theirs.
    rig.ok(&["receivers", "remove", "mail"]);
    rig.register("post", "post_letter", &[], FULL);
    assert_eq!(rig.show("op-early")["operation"]["receiver"], any);
    assert_eq!(rig.show("op-late")["operation"]["receiver"], "mail");
    assert_eq!(
        rig.prepare("op-later", "post_letter", "{}")["receiver"],
        "post"
    );
}

on_both_stores!(a_compensation_routes_to_the_receiver_of_the_effect_it_compensates);
fn a_compensation_routes_to_the_receiver_of_the_effect_it_compensates(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.register("refunds", "refund_letter", &[], FULL);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    assert_eq!(rig.dispatch("op-1")["outcome"], "receipt");
    let approved = rig.json(&[
        "approve-compensation",
        "op-1",
        "--effect",
        "mail-000001",
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-1-refund",
        "--action",
        "refund_letter",
        "--payload",
        r#"{"to":"ada"}"#,
        "--json",
    ]);
    assert_eq!(approved["compensation_op_id"], "op-1-refund");
    assert_eq!(rig.show("op-1-refund")["operation"]["receiver"], "mail");
    let report = rig.dispatch("op-1-refund");
    assert_eq!(
        (&report["receiver"], &report["outcome"]),
        (&json!("mail"), &json!("receipt"))
    );
    let applied = rig.calls("mail", "apply");
    assert_eq!(applied[1]["op"]["compensates_effect_id"], "mail-000001");
    assert_eq!(applied[1]["op"]["action_kind"], "refund_letter");
    assert!(rig.calls("refunds", "apply").is_empty());
}

on_both_stores!(
    an_operation_whose_registration_was_removed_is_refused_and_its_name_does_not_take_it_back
);
/// A compensation routes to the registration of the effect it
/// compensates: once that registration is removed the approval is refused
/// `receiver_gone` before anything is written, and registering a receiver
/// under the same name again does not hand it the old effects.
fn an_operation_whose_registration_was_removed_is_refused_and_its_name_does_not_take_it_back(
    store: Store,
) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-1", "post_letter", r#"{"to":"ada"}"#);
    assert_eq!(rig.dispatch("op-1")["outcome"], "receipt");
    rig.ok(&["receivers", "remove", "mail"]);
    let approve = [
        "approve-compensation",
        "op-1",
        "--effect",
        "mail-000001",
        "--approver",
        "lee",
        "--expected-version",
        "3",
        "--compensation-op",
        "op-1-sorry",
        "--action",
        "post_apology",
        "--payload",
        "{}",
    ];
    let dump = rig.dump();
    assert_refused(&rig.recon(&approve), "receiver_gone");
    assert_refused(&rig.recon(&["snapshot", "op-1"]), "receiver_gone");
    assert_eq!(rig.dump(), dump, "nothing written");
    rig.register("mail", "post_letter", &[], FULL);
    let dump = rig.dump();
    assert_refused(&rig.recon(&approve), "receiver_gone");
    assert_eq!(rig.dump(), dump, "nothing written");
    assert_eq!(rig.calls("mail", "apply").len(), 1);
}

/// An adapter that answers `describe` and writes, first, its working
/// directory and its environment's names to `log`.
fn world_probe(dir: &std::path::Path, log: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("probe.sh");
    let body = format!(
        "#!/bin/sh\n{{ echo \"cwd=$(pwd)\"; env | cut -d= -f1 | sed 's/^/env=/'; }} > '{}'\n\
         printf '%s\\n' '{{\"recon_adapter\":1,\"name\":\"probe\",\"version\":\"1\",\"can_close\":false,\
         \"query\":{{\"complete\":false,\"authoritative\":false}},\"mandatory\":[]}}'\n",
        log.display()
    );
    std::fs::write(&script, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

on_both_stores!(an_adapter_runs_in_root_with_the_allowlist_and_its_named_variables_only);
/// What an adapter runs with is fixed and small: `/` as its working
/// directory, and of recon's environment only the allowlist and the
/// variables its registration names (values read at run time).
fn an_adapter_runs_in_root_with_the_allowlist_and_its_named_variables_only(store: Store) {
    let rig = Rig::on(store);
    let log = rig.dir.path().join("world.log");
    let probe = world_probe(rig.dir.path(), &log);
    let place = rig.place();
    let probe = probe.display().to_string();
    let args = [
        "receivers",
        "add",
        &place[0],
        &place[1],
        "probe",
        "--actions",
        "probe_it",
        "--env",
        "PROBE_NAMED",
        "--",
        &probe,
    ];
    let env = [
        ("PROBE_NAMED", "passed"),
        ("PROBE_UNNAMED", "kept back"),
        ("PGPASSWORD", "never passed"),
        ("LC_ALL", "C"),
    ];
    let out = crate::support::run_with_env(&args, None, &env);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let world = std::fs::read_to_string(&log).unwrap();
    let names: Vec<&str> = world
        .lines()
        .filter_map(|l| l.strip_prefix("env="))
        .collect();
    assert!(world.lines().any(|l| l == "cwd=/"), "{world}");
    for name in ["PROBE_NAMED", "PATH", "LC_ALL"] {
        assert!(names.contains(&name), "{name} missing: {world}");
    }
    for name in ["PROBE_UNNAMED", "PGPASSWORD", "CARGO_MANIFEST_DIR"] {
        assert!(!names.contains(&name), "{name} leaked: {world}");
    }
    // Only the name is stored, never its value.
    assert_eq!(rig.list()[0]["program"], json!(probe));
    assert!(
        !rig.dump().contains("passed"),
        "a variable's value was stored"
    );
}

on_both_stores!(a_registration_whose_arguments_carry_a_credential_is_refused_before_running);
/// Arguments are stored, journaled and printed, so one that carries a
/// credential, in any of the forms of SPEC 12 (the forms issue 29 found
/// stored, journaled and printed), is refused before the program is ever
/// run, and the refusal says to pass it with `--env NAME`. (The domain
/// rule's own table, `domain::secrets`, holds every form one line each.)
fn a_registration_whose_arguments_carry_a_credential_is_refused_before_running(store: Store) {
    let rig = Rig::on(store);
    let log = rig.dir.path().join("world.log");
    let probe = world_probe(rig.dir.path(), &log).display().to_string();
    let (place, ws) = (rig.place(), rig.ws());
    // A database exists before any registration; a workspace does not.
    let before = (store == Store::Postgres).then(|| rig.dump());
    for secret in [
        "postgres://ann:hunter2@db/ledger",
        "host=db password=hunter2",
        "postgres://ann:hun/ter?2@db/ledger",
        "postgres://ann:hun#ter2@db/ledger",
        "postgres://db/ledger?pass%77ord=hunter2",
        "--password",
        "passwd=hunter2",
        "token=hunter2",
        "api_key=hunter2",
        "access_token=hunter2",
        "client_secret=hunter2",
    ] {
        let args = [
            "receivers",
            "add",
            &place[0],
            &place[1],
            "probe",
            "--actions",
            "probe_it",
            "--",
            &probe,
            "--database",
            secret,
        ];
        let out = crate::support::run(&args, None);
        assert_refused(&out, "secret_in_arguments");
        assert!(out.stderr.contains("--env NAME"), "{}", out.stderr);
        assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
        assert!(!log.exists(), "the adapter was run");
        match &before {
            Some(dump) => assert_eq!(&rig.dump(), dump, "a refused registration wrote"),
            None => assert!(
                !std::path::Path::new(&ws).exists(),
                "a refused registration created the workspace"
            ),
        }
    }
}

/// Text with its backticks dropped and its white space collapsed, so that
/// `--help` and the README with its docs can be held to the same words.
fn plain_words(text: &str) -> String {
    text.replace('`', "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

on_both_stores!(
    help_and_readme_name_the_describe_fields_recon_requires_and_mandatory_may_be_left_out
);
fn help_and_readme_name_the_describe_fields_recon_requires_and_mandatory_may_be_left_out(
    store: Store,
) {
    const REQUIRED: &str = "must hold name, version, can_close and query {complete, authoritative}";
    const OPTIONAL: &str = "mandatory may be left out (the same as []): it lists the \
                            capabilities a host must understand to use the adapter at all";
    let help = crate::support::run(&["receivers", "add", "--help"], None);
    let readme = crate::readme::readme_and_docs();
    for (what, text) in [("--help", &help.stdout), ("README and docs/", &readme)] {
        let text = plain_words(text);
        assert!(text.contains(REQUIRED), "{what} names the required fields");
        assert!(text.contains(OPTIONAL), "{what} explains mandatory");
    }
    // And recon holds an adapter to exactly those words.
    let rig = Rig::on(store);
    for field in [
        "name",
        "version",
        "can_close",
        "query",
        "query.complete",
        "query.authoritative",
    ] {
        let out = rig.add("bad", "x", &[], &["--mode", &format!("missing-{field}")]);
        assert_refused(&out, "adapter_malformed");
    }
    rig.register("fine", "x", &[], &["--mode", "missing-mandatory"]);
}

#[test]
fn receivers_help_says_no_receiver_is_implicit() {
    let help = plain_words(&crate::support::run(&["--help"], None).stdout);
    let receivers = plain_words(&crate::support::run(&["receivers", "--help"], None).stdout);
    for text in [&help, &receivers] {
        assert!(!text.contains("goes to the built-in ledger"), "{text}");
    }
    assert!(receivers.contains("No receiver is implicit"), "{receivers}");
}

on_both_stores!(receiver_in_use_names_the_first_open_operations_and_counts_them);
fn receiver_in_use_names_the_first_open_operations_and_counts_them(store: Store) {
    let rig = Rig::with_mail_on(store);
    rig.prepare("op-a", "post_letter", "{}");
    let out = rig.recon(&["receivers", "remove", "mail"]);
    assert_refused(&out, "receiver_in_use");
    assert!(
        out.stderr.trim_end().ends_with(
            "receiver mail still has 1 prepared or unknown operation routed to it: op-a"
        ),
        "{}",
        out.stderr
    );
    for n in 1..=6 {
        rig.prepare(&format!("op-{n}"), "post_letter", "{}");
    }
    let out = rig.recon(&["receivers", "remove", "mail"]);
    assert_refused(&out, "receiver_in_use");
    assert!(
        out.stderr.trim_end().ends_with(
            "receiver mail still has 7 prepared or unknown operations routed to it, the first \
             5: op-1, op-2, op-3, op-4, op-5 (and 2 more)"
        ),
        "{}",
        out.stderr
    );
}

// SQLite only: `ledger` reads the built-in ledger.
#[test]
fn ledger_of_an_operation_at_an_adapter_says_what_reads_its_effects() {
    let rig = Rig::with_mail();
    rig.ok(&["receivers", "add", "builtin", "--builtin", "--actions", "*"]);
    rig.prepare("op-1", "post_letter", "{}");
    assert_eq!(rig.dispatch("op-1")["outcome"], "receipt");
    rig.prepare("op-2", "send_email", "{}");
    assert_eq!(rig.dispatch("op-2")["outcome"], "receipt");
    let out = rig.ok(&["ledger", "--op", "op-1"]);
    assert_eq!(
        out.stdout, "",
        "the built-in ledger holds none of its effects"
    );
    assert_eq!(
        out.stderr.trim_end(),
        "note: operation op-1 routes to receiver mail, an adapter: its effects are in that \
         receiver's own store, not in recon's ledger; `recon snapshot op-1` reads them (or use \
         the tool behind the adapter)"
    );
    // Under --json the list stays a list; the note is beside it.
    let out = rig.ok(&["ledger", "--op", "op-1", "--json"]);
    assert_eq!(out.json(), json!([]));
    assert!(out.stderr.contains("recon snapshot op-1"), "{}", out.stderr);
    // The whole ledger lists the built-in ledger's effects and names the
    // adapters whose effects it cannot list.
    let out = rig.ok(&["ledger"]);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    assert!(out.stdout.contains("op-2"), "{}", out.stdout);
    assert!(
        out.stderr.starts_with(
            "note: not listed here: the effects of receiver mail, an adapter that keeps them in \
             its own store; `recon snapshot ID` reads an operation's"
        ),
        "{}",
        out.stderr
    );
    // An operation at the built-in ledger needs no note.
    assert_eq!(rig.ok(&["ledger", "--op", "op-2"]).stderr, "");
}

on_both_stores!(a_describe_that_fails_is_a_failed_call_exit_4_and_stores_nothing);
/// A `describe` whose program ran and gave no usable answer (a crash,
/// `ok: false` as a server that wants a password answers) is the failed
/// call it is (SPEC 12): exit 4, the adapter's own words and stderr in the
/// message, nothing stored; `adapter_malformed` is kept for an answer
/// that is not a valid describe.
fn a_describe_that_fails_is_a_failed_call_exit_4_and_stores_nothing(store: Store) {
    let rig = Rig::with_mail_on(store);
    let (dump, list) = (rig.dump(), rig.list());
    for (mode, said) in [
        ("describe:crash-now", "exited with code 7 and no answer"),
        (
            "describe:error-unavailable",
            "it answered unavailable: the fixture was told to fail",
        ),
        (
            "describe:stderr-escape",
            r"its stderr: \x1b[2J\x1b]0;owned\x07 the adapter's last words",
        ),
    ] {
        let out = rig.add("bad", "x", &[], &["--mode", mode]);
        assert_eq!(out.code, Some(4), "{mode}: {}", out.stderr);
        assert!(
            out.stderr
                .starts_with("error: the adapter's describe failed: ")
                && out.stderr.contains(said),
            "{mode}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
        assert_eq!(rig.dump(), dump, "{mode}: something was stored");
    }
    assert_eq!(rig.list(), list);
}

on_both_stores!(a_registration_whose_describe_fails_shows_the_adapters_stderr);
/// A registration whose `describe` fails says what the adapter wrote on
/// stderr (escaped), which is usually the reason.
fn a_registration_whose_describe_fails_shows_the_adapters_stderr(store: Store) {
    let rig = Rig::on(store);
    let log = rig.dir.path().join("unused.log");
    let probe = world_probe(rig.dir.path(), &log);
    std::fs::write(
        &probe,
        "#!/bin/sh\necho 'ModuleNotFoundError: no module named \"\x1b[31mledger\"' >&2\nexit 1\n",
    )
    .unwrap();
    let probe = probe.display().to_string();
    let out = rig.recon(&["receivers", "add", "probe", "--actions", "p", "--", &probe]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(r#"its stderr: ModuleNotFoundError: no module named "\x1b[31mledger""#),
        "{}",
        out.stderr
    );
}
