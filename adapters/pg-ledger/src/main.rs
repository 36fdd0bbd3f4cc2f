//! `recon-pg-ledger`: a `recon-adapter/1` receiver that keeps its effects in
//! a table of a PostgreSQL database the user names, and can close an
//! operation for good.
//!
//! ```text
//! recon-pg-ledger --database postgres://USER@HOST:PORT/DB VERB
//! ```
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

use recon::receiver::protocol::{self, ErrorCode, Failed, Invocation};
use std::io::Write;

/// Exit code when the arguments are not `--database URL VERB`.
const EXIT_USAGE: i32 = 2;
/// Exit code when the answer could not be written.
const EXIT_IO: i32 = 4;

const USAGE: &str = "usage: recon-pg-ledger --database postgres://USER@HOST:PORT/DATABASE \
                     describe|apply|query|close (one request line on stdin) | session \
                     (request after request, each with its verb and id)";

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
