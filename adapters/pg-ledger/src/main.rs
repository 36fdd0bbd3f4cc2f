//! `recon-pg-ledger`: a `recon-adapter/1` receiver that keeps its effects in
//! a table of a PostgreSQL database the user names, and can close an
//! operation for good.
//!
//! ```text
//! recon-pg-ledger --database postgres://USER@HOST:PORT/DB VERB
//! recon-pg-ledger init --database postgres://USER@HOST:PORT/DB [--roles PREFIX]
//! ```
//!
//! `init` (run once, by a login that may create tables and roles) makes
//! the ledger and its three roles ([`roles`]) and prints them; it is not
//! a protocol call, so it prints text and exits 0, or 1 with the reason.
//!
//! It is shaped like a Cargo credential provider: the ledger is a
//! `recon::receiver::Receiver` ([`ledger::PgLedger`]) and this `main` hands
//! it to `recon::receiver::protocol::serve`, which reads the one request
//! line, answers it and writes the one answer line. The protocol's parsing
//! and answer shapes are recon's own, so the two cannot drift. Every verb
//! connects (`describe` too: the instance it declares is read from the
//! ledger), creates the tables on first use, and answers `unavailable` when
//! the server cannot be reached.
//!
//! recon's own code stays synchronous; the `postgres` crate runs a small
//! runtime of its own inside this process, which is none of recon's
//! business.

mod drill;
mod ledger;
mod roles;

use recon::receiver::protocol::{self, ErrorCode, Failed, Invocation};
use std::io::Write;

/// Exit code when the arguments are not `--database URL VERB`.
const EXIT_USAGE: i32 = 2;
/// Exit code when the answer could not be written.
const EXIT_IO: i32 = 4;
/// Exit code when `init` failed.
const EXIT_INIT: i32 = 1;

const USAGE: &str = "usage: recon-pg-ledger --database postgres://USER@HOST:PORT/DATABASE \
                     describe|apply|query|close (one request line on stdin) | session \
                     (request after request, each with its verb and id)\n       \
                     recon-pg-ledger init --database URL [--roles PREFIX]";

/// `init --database URL [--roles PREFIX]`, in any order after `init`:
/// the URL and the prefix, or the usage error.
fn parse_init(args: &[String]) -> Result<(recon::DatabaseUrl, String), String> {
    let (mut url, mut prefix) = (None, None);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| USAGE.to_string())?;
        match flag.as_str() {
            "--database" if url.is_none() => url = Some(value),
            "--roles" if prefix.is_none() => prefix = Some(value.clone()),
            _ => return Err(USAGE.to_string()),
        }
    }
    let url = url.ok_or_else(|| USAGE.to_string())?;
    let url = recon::DatabaseUrl::parse(url).map_err(|e| format!("--database: {e}"))?;
    let prefix = prefix.unwrap_or_else(|| roles::DEFAULT_PREFIX.to_string());
    if !roles::valid_prefix(&prefix) {
        return Err(format!(
            "--roles {}: a prefix is a lowercase letter, then lowercase letters, digits and _ \
             (at most 40)",
            recon::sanitize::escape(&prefix)
        ));
    }
    Ok((url, prefix))
}

/// Runs `init` and prints what it made; the exit code.
fn run_init(url: &recon::DatabaseUrl, prefix: &str) -> i32 {
    let mut config = url.config().clone();
    config.application_name("recon-pg-ledger init");
    let made = match url.connect(&config) {
        Ok(mut client) => roles::init(&mut client, prefix),
        Err(recon::ConnectError::Postgres(e)) => Err(ledger::failed("connecting", e)),
        Err(recon::ConnectError::Settings(why)) => {
            Err(recon::StoreError::Unavailable(format!("PostgreSQL, connecting: {why}")).into())
        }
    };
    match made {
        Ok(made) => {
            println!("ledger: {url}, schema {}", made.schema);
            for (role, created) in &made.roles {
                let how = if *created { "created" } else { "present" };
                println!("role {role}: {how}");
            }
            println!("grant each login the one role it needs: GRANT {prefix}_query TO LOGIN");
            0
        }
        Err(e) => {
            eprintln!(
                "recon-pg-ledger init: {}",
                recon::sanitize::escape(&e.to_string())
            );
            EXIT_INIT
        }
    }
}

/// The command line: `--database URL` before the verb (or `session`),
/// nothing else.
fn parse_args(args: &[String]) -> Result<(recon::DatabaseUrl, Invocation), String> {
    let [flag, url, verb] = args else {
        return Err(USAGE.to_string());
    };
    if flag != "--database" {
        return Err(USAGE.to_string());
    }
    // recon's own parsing: libpq's credentials (PGSERVICE, PGPASSWORD,
    // ~/.pgpass) complete the URL, its sslmode and certificate files (or
    // PGSSLMODE and friends) say how to connect, and a message names it
    // redacted.
    let url = recon::DatabaseUrl::parse(url).map_err(|e| format!("--database: {e}"))?;
    let verb = Invocation::parse(verb).ok_or_else(|| USAGE.to_string())?;
    Ok((url, verb))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("init") {
        let code = match parse_init(&args[1..]) {
            Ok((url, prefix)) => run_init(&url, &prefix),
            Err(message) => {
                eprintln!("recon-pg-ledger: {message}");
                EXIT_USAGE
            }
        };
        std::process::exit(code);
    }
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let code = match parse_args(&args) {
        // Still one protocol answer on stdout, so recon reports the reason
        // (at registration, a malformed description naming it).
        Err(message) => {
            eprintln!("recon-pg-ledger: {message}");
            let answer = protocol::failure_answer(&Failed {
                code: ErrorCode::BadRequest,
                message,
            });
            match protocol::write_line(&mut output, &answer) {
                Ok(()) => EXIT_USAGE,
                Err(_) => EXIT_IO,
            }
        }
        Ok((url, verb)) => {
            let mut ledger = ledger::PgLedger::new(url, verb);
            let served = match verb {
                Invocation::Call(verb) => {
                    protocol::serve(&mut ledger, verb, &mut input, &mut output)
                }
                Invocation::Session => {
                    protocol::serve_session(&mut ledger, &mut input, &mut output)
                }
            };
            match served {
                Ok(()) => 0,
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "recon-pg-ledger: {e}");
                    EXIT_IO
                }
            }
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(last: &str) -> Vec<String> {
        [
            "--database",
            "postgres://ledger@localhost:5432/ledger",
            last,
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn init_takes_the_database_and_an_optional_prefix_and_refuses_a_bad_one() {
        let url = "postgres://ledger@localhost:5432/ledger";
        let parse =
            |words: &[&str]| parse_init(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>());
        let (_, prefix) = parse(&["--database", url]).expect("the default prefix");
        assert_eq!(prefix, roles::DEFAULT_PREFIX);
        let (_, prefix) = parse(&["--roles", "team_a", "--database", url]).expect("a prefix");
        assert_eq!(prefix, "team_a");
        assert!(parse(&["--database", url, "--roles", "Team-A"]).is_err());
        assert!(parse(&["--roles", "team_a"]).is_err(), "no database");
        assert!(parse(&["--database", url, "--roles"]).is_err(), "no value");
    }

    #[test]
    fn session_is_started_by_its_word_and_declared_with_a_batch_in_describe() {
        let (url, invocation) = parse_args(&args("session")).expect("session is a last word");
        assert_eq!(invocation, Invocation::Session);
        assert!(url.config().get_dbname().is_some());
        let description = ledger::description(ledger::instance_of("id", 1, 2));
        assert!(description.session);
        assert_eq!(description.batch, Some(ledger::BATCH));
        assert!(parse_args(&args("sessions")).is_err());
    }
}
