//! The exit codes each command can return, as its `--help` shows them.
//!
//! `recon --help` prints the whole table ([`super::EXIT_CODES`]); a
//! command's own help prints only its lines: the codes it can return, with
//! what they mean for it, and the refusal codes it can raise. The table is
//! data here; `commands::parse` attaches each entry to its subcommand.

/// What one command can end with.
struct Exits {
    /// The command's words (`["receivers", "add"]`).
    path: &'static [&'static str],
    /// What exit 0 means.
    done: &'static str,
    /// What exit 1 means, when the command can find something.
    finding: Option<&'static str>,
    /// The refusal codes it can raise (exit 3), if any.
    refusals: &'static [&'static str],
    /// Exit codes of its own (the receiver's drills).
    own: &'static [(u8, &'static str)],
    /// Whether it takes --json (and so prints a JSON error document).
    json: bool,
    /// Whether it opens a workspace (and so waits on its lock).
    workspace: bool,
    /// Whether it opens a PostgreSQL database (`--database`) instead.
    database: bool,
    /// Whether it works on a workspace directory only, never on a
    /// database (`--database` is a usage error for it).
    directory_only: bool,
    /// Whether it writes a file or a stream of its own (--output).
    output: bool,
    /// Whether it calls a receiver.
    receiver: bool,
    /// What else exit 4 means, when the command goes on past a failure.
    partial: Option<&'static str>,
}

const fn exits(path: &'static [&'static str]) -> Exits {
    Exits {
        path,
        done: "done",
        finding: None,
        refusals: &[],
        own: &[],
        json: true,
        workspace: true,
        database: false,
        directory_only: false,
        output: false,
        receiver: false,
        partial: None,
    }
}

const OP: &[&str] = &["unknown_operation"];

const TABLE: &[Exits] = &[
    Exits {
        json: false,
        workspace: false,
        output: true,
        done: "the JSON was printed or written",
        ..exits(&["experiment"])
    },
    Exits {
        done: "the demo was built, every story ending as told",
        receiver: true,
        directory_only: true,
        ..exits(&["demo"])
    },
    Exits {
        refusals: &["duplicate_operation", "no_receiver"],
        ..exits(&["prepare"])
    },
    Exits {
        done: "the receiver was invoked (a lost receipt is an outcome, not an error)",
        refusals: &[
            "blind_retry",
            "unknown_operation",
            "unknown_receiver",
            "compensation_not_approved",
            "original_not_confirmed",
            "stale_version",
            "compensation_action_mismatch",
            "compensation_effect_mismatch",
            "receiver_gone",
            "receiver_changed",
        ],
        receiver: true,
        ..exits(&["dispatch"])
    },
    Exits {
        done: "the page was printed (perhaps empty)",
        ..exits(&["ops"])
    },
    Exits {
        refusals: OP,
        ..exits(&["show"])
    },
    Exits {
        directory_only: true,
        ..exits(&["ledger"])
    },
    Exits {
        refusals: &[
            "unknown_operation",
            "empty_reviewer",
            "close_unsupported",
            "unknown_receiver",
            "receiver_gone",
            "receiver_changed",
        ],
        receiver: true,
        ..exits(&["snapshot"])
    },
    Exits {
        done: "the decision was recorded",
        refusals: &[
            "empty_reviewer",
            "stale_version",
            "not_unknown",
            "scope_mismatch",
            "unsupported_verdict",
            "unknown_operation",
            "close_unsupported",
            "unknown_receiver",
            "receiver_gone",
            "receiver_changed",
            "keep_not_allowed",
            "keep_not_a_match",
            "unbacked_close",
        ],
        receiver: true,
        ..exits(&["reconcile"])
    },
    Exits {
        refusals: &[
            "empty_reviewer",
            "original_not_confirmed",
            "stale_version",
            "compensation_effect_mismatch",
            "already_approved",
            "unknown_operation",
            "duplicate_operation",
            "receiver_gone",
            "same_person",
            "reason_required",
        ],
        ..exits(&["approve-compensation"])
    },
    Exits {
        done: "every selected operation was observed (perhaps none)",
        refusals: &["unknown_operation", "empty_reviewer"],
        partial: Some(
            "an operation could not be read (its receiver gave no usable answer, or its read \
             was refused: unknown_receiver, receiver_gone, receiver_changed); every other one \
             was still read and recorded and is printed as on exit 0 (under --json, the array, \
             not an error document), and stderr has one line for each operation not read, \
             naming it, its receiver and why (under --json, {\"op_id\", \"receiver\", \
             \"error\": {\"exit\", \"kind\", \"code\", \"message\"}})",
        ),
        own: &[(
            130,
            "stopped by Ctrl-C after the request in hand: what was read is recorded and \
             printed as on exit 0, and stderr says how many were not attempted (under --json, \
             {\"interrupted\": {\"observed\", \"unread\", \"not_attempted\"}})",
        )],
        ..exits(&["observe"])
    },
    Exits {
        done: "it ran: every listed operation was decided, left, skipped or failed (counted; \
               each failure named on stderr)",
        refusals: &["unknown_operation", "empty_reviewer"],
        output: true,
        receiver: true,
        own: &[(
            130,
            "stopped by Ctrl-C after the request in hand: what was closed by then is decided \
             and recorded, every operation not asked about is counted under skipped as \
             not_attempted, the report is printed as on exit 0 (under --json with \
             {\"interrupted\": {\"not_attempted\"}}), stderr says how many were not \
             attempted, and a dry run writes no plan; a run again finishes the rest",
        )],
        ..exits(&["resolve"])
    },
    Exits {
        refusals: &["unknown_operation", "empty_reviewer"],
        ..exits(&["note"])
    },
    Exits {
        refusals: &[
            "not_unknown",
            "already_escalated",
            "unknown_operation",
            "empty_reviewer",
        ],
        ..exits(&["escalate"])
    },
    Exits {
        refusals: &["not_escalated", "unknown_operation", "empty_reviewer"],
        ..exits(&["deescalate"])
    },
    Exits {
        refusals: &["not_contradicted", "unknown_operation", "empty_reviewer"],
        ..exits(&["acknowledge"])
    },
    Exits {
        done: "the journal is intact",
        finding: Some(
            "the journal is broken (its chain, a table or the metadata that is not its \
             projection, or a schema that is not this build's), or it disagrees with \
             --against's copy or --checkpoint",
        ),
        ..exits(&["verify"])
    },
    Exits {
        done: "every entry was written and the journal is intact",
        finding: Some("every entry was written, but the journal is broken"),
        output: true,
        ..exits(&["export"])
    },
    exits(&["checkpoint"]),
    Exits {
        done: "the metrics were printed or written",
        output: true,
        ..exits(&["metrics"])
    },
    Exits {
        done: "the receipt was printed",
        refusals: &["operation_closed"],
        own: &[
            (23, "crash-after-commit: the effect committed, no receipt"),
            (24, "crash-before-commit: nothing written"),
        ],
        json: false,
        directory_only: true,
        ..exits(&["receiver", "apply"])
    },
    Exits {
        done: "answered (the exit code is diagnostic only, never evidence)",
        refusals: &["operation_closed"],
        json: false,
        directory_only: true,
        ..exits(&["receiver", "adapter"])
    },
    Exits {
        refusals: &[
            "reserved_name",
            "adapter_malformed",
            "adapter_unknown_capability",
            "receiver_exists",
            "action_routed",
            "secret_in_arguments",
            "builtin_single_host",
            "instance_required",
        ],
        receiver: true,
        ..exits(&["receivers", "add"])
    },
    Exits {
        refusals: &[
            "unknown_receiver",
            "receiver_changed",
            "reserved_name",
            "adapter_malformed",
            "adapter_unknown_capability",
            "secret_in_arguments",
            "instance_required",
        ],
        receiver: true,
        ..exits(&["receivers", "update"])
    },
    exits(&["receivers", "list"]),
    Exits {
        done: "the describe answer is unchanged",
        finding: Some("the describe answer differs from the stored one"),
        refusals: &["unknown_receiver", "receiver_changed", "instance_required"],
        receiver: true,
        ..exits(&["receivers", "check"])
    },
    Exits {
        refusals: &["unknown_receiver", "receiver_in_use"],
        json: false,
        ..exits(&["receivers", "remove"])
    },
    Exits {
        done: "the schema is there at this recon's version (created now, or found)",
        workspace: false,
        database: true,
        ..exits(&["db", "init"])
    },
    Exits {
        done: "the outbox is at this recon's schema version (upgraded now, or found)",
        refusals: &["permission_denied"],
        workspace: false,
        database: true,
        ..exits(&["db", "upgrade"])
    },
];

/// Every command that has its own exit codes, by its words.
pub const COMMAND_PATHS: &[&[&str]] = &[
    &["experiment"],
    &["demo"],
    &["prepare"],
    &["dispatch"],
    &["ops"],
    &["show"],
    &["ledger"],
    &["snapshot"],
    &["reconcile"],
    &["approve-compensation"],
    &["observe"],
    &["resolve"],
    &["note"],
    &["escalate"],
    &["deescalate"],
    &["acknowledge"],
    &["verify"],
    &["export"],
    &["checkpoint"],
    &["receiver", "apply"],
    &["receiver", "adapter"],
    &["receivers", "add"],
    &["receivers", "update"],
    &["receivers", "list"],
    &["receivers", "check"],
    &["receivers", "remove"],
    &["db", "init"],
    &["metrics"],
    &["db", "upgrade"],
];

/// The exit codes (and environment) section of one command's `--help`.
pub fn exit_codes_of(path: &[&str]) -> Option<String> {
    let exits = TABLE.iter().find(|e| e.path == path)?;
    let mut text = format!("Exit codes:\n  0  {}\n", exits.done);
    if let Some(finding) = exits.finding {
        text.push_str(&format!("  1  {finding}\n"));
    }
    text.push_str(
        "  2  usage error (bad flags or values, a malformed id, name, text or payload)\n",
    );
    if !exits.refusals.is_empty() {
        text.push_str(&format!(
            "  3  refused by a safety rule ({}); stderr says `refused: <code>: <detail>`\n",
            exits.refusals.join(", ")
        ));
    }
    let team = exits.workspace && !exits.directory_only;
    if team {
        text.push_str(&format!(
            "  {}in team mode, permission_denied: the database login lacks the role the act \
             needs (named in the message)\n",
            if exits.refusals.is_empty() {
                "3  "
            } else {
                "   "
            }
        ));
    }
    text.push_str(&storage_line(exits));
    if let Some(partial) = exits.partial {
        text.push_str(&format!("     and when {partial}\n"));
    }
    for (code, meaning) in exits.own {
        text.push_str(&format!("  {code}  {meaning}\n"));
    }
    if exits.json {
        let failures = if exits.refusals.is_empty() && !team {
            "2 or 4"
        } else {
            "2, 3 or 4"
        };
        text.push_str(&format!(
            "  Under --json, a failure with {failures} also prints one JSON document:\n  \
             {{\"error\": {{\"exit\", \"kind\", \"code\", \"message\"}}}}\n",
        ));
    }
    text.push_str(&environment(exits));
    Some(text.trim_end().to_string())
}

/// Exit 4's line: what a storage failure is for a database, or for a
/// workspace (and what else this command's I/O adds).
fn storage_line(exits: &Exits) -> String {
    let also = match (exits.output, exits.receiver) {
        (true, _) => ", an --output file or standard output that cannot be written",
        (false, true) => ", a receiver that gave no usable answer",
        (false, false) => "",
    };
    if exits.database {
        "  4  storage error (the server cannot be reached or refuses the login, its \
             synchronous_commit is not on, its encoding is not UTF8, a recon outbox of another \
             schema version or an incomplete one, tables of recon's names that are not recon's, \
             a lock held past the busy timeout)\n"
            .to_string()
    } else {
        format!(
            "  4  storage or I/O error (missing workspace, not a recon database, a file of \
             another workspace, locked past the busy timeout{also})\n"
        )
    }
}

/// The environment variables the command reads, as its help lists them.
fn environment(exits: &Exits) -> String {
    let mut text = String::new();
    if exits.database {
        text.push_str(
            "\nEnvironment:\n  RECON_DATABASE_URL     the database when --database is not given\n  \
             PGPASSWORD, PGPASSFILE, PGSERVICE, PGSERVICEFILE  credentials, as libpq reads them \
             (and ~/.pgpass, ~/.pg_service.conf)\n  \
             RECON_BUSY_TIMEOUT_MS  how long to wait for a lock another session holds \
             (lock_timeout), in milliseconds (default 5000, at most 600000)",
        );
    }
    if exits.workspace {
        text.push_str(
            "\nEnvironment:\n  RECON_BUSY_TIMEOUT_MS  how long to wait for another process's \
             write lock, in milliseconds (default 5000, at most 600000)",
        );
        if !exits.directory_only {
            text.push_str(
                "\n  RECON_DATABASE_URL     the PostgreSQL outbox when neither --workspace nor \
                 --database is given (team mode)",
            );
        }
        text.push_str(
            "\n  RECON_WORKSPACE        the workspace directory when --workspace is not given \
             (and no database is named)\n  \
             RECON_LOG              json: also one JSON line per act committed, on stderr \
             ({ts, act, op_id, seq, login, outcome}); text (the default): none",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_its_exit_codes_once() {
        for path in COMMAND_PATHS {
            assert_eq!(
                TABLE.iter().filter(|e| e.path == *path).count(),
                1,
                "{path:?}"
            );
        }
        assert_eq!(TABLE.len(), COMMAND_PATHS.len());
    }

    #[test]
    fn only_commands_that_open_a_database_offer_recon_database_url_and_receivers_add_refuses_builtin_single_host(
    ) {
        for path in COMMAND_PATHS {
            let text = exit_codes_of(path).expect("its exit codes");
            let directory_only = matches!(
                *path,
                ["demo"] | ["ledger"] | ["receiver", _] | ["experiment"]
            );
            assert_eq!(
                text.contains("RECON_DATABASE_URL"),
                !directory_only,
                "{path:?}: {text}"
            );
        }
        let add = exit_codes_of(&["receivers", "add"]).expect("its exit codes");
        assert!(add.contains("builtin_single_host"), "{add}");
    }
}
