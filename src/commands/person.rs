//! Who acts: the name a person types, or in team mode the role the
//! database authenticated (SPEC 10: `--reviewer`, `--by`, `--approver`
//! and `--authorized-by` default to `session_user`).
//!
//! Whether a name may be left out depends on where the stores are, which
//! is known while the arguments are validated; the login itself is known
//! only once the database is open. So validation gives a [`Person`] (a
//! name checked as every name is, or "the login"), and the command turns
//! it into the name to record once its workspace is open. On a workspace
//! directory a missing name is a usage error (exit 2) before anything is
//! opened, as it always was.

use super::open::Place;
use super::Failure;
use crate::cli::person;
use crate::workspace::Workspace;

/// What a missing name's error says about its default.
const LOGIN_DEFAULT: &str = "default in team mode: the database login";

/// A person's name as the command line gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Person {
    /// Typed, and checked as a person's name.
    Named(String),
    /// Left out in team mode: the role the database authenticated.
    Login,
}

impl Person {
    /// `value` of `flag`, checked as a person's name; when absent, the
    /// database login in team mode, else a usage error naming the flag.
    pub fn of(flag: &str, value: Option<String>, place: &Place) -> Result<Person, Failure> {
        match value {
            Some(name) => {
                person(flag, &name)?;
                Ok(Person::Named(name))
            }
            None if place.database_url()?.is_some() => Ok(Person::Login),
            None => Err(required(flag)),
        }
    }

    /// The name to record: the one typed, or the session's role.
    pub fn name(&self, ws: &Workspace) -> Result<String, Failure> {
        match self {
            Person::Named(name) => Ok(name.clone()),
            Person::Login => ws.session_role().map(str::to_string).ok_or_else(|| {
                Failure::Usage(
                    "a name was left out, and this store has no database login to stand \
                         in for it"
                        .into(),
                )
            }),
        }
    }
}

/// The usage error of a name left out where no login stands in for it.
fn required(flag: &str) -> Failure {
    Failure::Usage(format!(
        "{flag} NAME is required on a workspace directory ({LOGIN_DEFAULT})"
    ))
}
