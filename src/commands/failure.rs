//! Why a command did not finish with exit 0, and the exit codes of SPEC 6.
//!
//! A [`Failure`] is data, like a command's result: it knows its exit code
//! and its one line for stderr, and [`super::render::finish`] is what prints
//! it. Keeping the printing out of here is what lets a second form (the
//! JSON error document of SPEC 6) be added in that one place.

use crate::cli::UsageError;
use crate::domain::sanitize::escape;
use crate::domain::team::TeamRole;
use crate::error::{DatabaseProblem, Error, StoreError};

pub const EXIT_OK: i32 = 0;
pub const EXIT_MISMATCH: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_REFUSED: i32 = 3;
pub const EXIT_STORAGE: i32 = 4;

/// Why a command did not finish with exit 0.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    /// A usage error whose JSON error carries a code (`bad_number`).
    UsageCoded {
        code: &'static str,
        message: String,
    },
    Engine(Error),
    /// Standard output was closed by its reader; nothing more to say.
    ClosedPipe,
}

impl Failure {
    /// An I/O error outside the stores (a terminal, standard output): a
    /// storage-class failure, exit 4.
    pub fn io(e: std::io::Error) -> Self {
        Failure::Engine(StoreError::Io(e).into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Usage(_) | Failure::UsageCoded { .. } => EXIT_USAGE,
            Failure::Engine(error) if matches!(error.cause(), Error::Invalid(_)) => EXIT_USAGE,
            Failure::Engine(error) if error.refusal().is_some() => EXIT_REFUSED,
            Failure::Engine(_) => EXIT_STORAGE,
            Failure::ClosedPipe => EXIT_OK,
        }
    }

    /// The kind of a JSON error: `usage`, `refused` or `storage`.
    fn kind(&self) -> &'static str {
        match self.exit_code() {
            EXIT_USAGE => "usage",
            EXIT_REFUSED => "refused",
            _ => "storage",
        }
    }

    /// The failure's text, unescaped (JSON escapes it itself).
    pub(super) fn text(&self) -> String {
        match self {
            Failure::Usage(message) | Failure::UsageCoded { message, .. } => message.clone(),
            Failure::Engine(error) => {
                let cause = match error.cause() {
                    Error::Refused(refusal) => refusal.to_string(),
                    other => other.to_string(),
                };
                match error.committed() {
                    Some(committed) => format!("{cause}; {}", committed.sentence),
                    None => cause,
                }
            }
            Failure::ClosedPipe => String::new(),
        }
    }

    /// The one line for stderr, escaped for the terminal; none for a closed
    /// pipe, whose reader has gone.
    pub fn message(&self) -> Option<String> {
        match self {
            Failure::ClosedPipe => None,
            Failure::Engine(error) => Some(match error.refusal() {
                Some(refusal) => format!("refused: {}: {}", refusal.code(), escape(&self.text())),
                None => format!("error: {}", escape(&self.text())),
            }),
            Failure::Usage(_) | Failure::UsageCoded { .. } => {
                Some(format!("error: {}", escape(&self.text())))
            }
        }
    }

    /// The JSON error document of SPEC 6: `{"error": {exit, kind, code,
    /// message}}`, with `committed` when something was committed before
    /// the failure. `None` for a closed pipe.
    pub fn json(&self) -> Option<serde_json::Value> {
        if matches!(self, Failure::ClosedPipe) {
            return None;
        }
        let mut error = serde_json::json!({
            "exit": self.exit_code(),
            "kind": self.kind(),
            "code": match self {
                Failure::Engine(error) => error.code(),
                Failure::UsageCoded { code, .. } => Some(*code),
                _ => None,
            },
            "message": self.text(),
        });
        if let (Failure::Engine(e), serde_json::Value::Object(fields)) = (self, &mut error) {
            if let Some(committed) = e.committed() {
                fields.insert("committed".into(), committed.json.clone());
            }
        }
        Some(serde_json::json!({ "error": error }))
    }
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<crate::cli::PayloadError> for Failure {
    fn from(e: crate::cli::PayloadError) -> Self {
        match e.code {
            Some(code) => Failure::UsageCoded {
                code,
                message: e.message,
            },
            None => Failure::Usage(e.message),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Engine(denied_read(e))
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Engine(denied_read(e.into()))
    }
}

/// A privilege the database refused outside an act (acts are refused
/// `permission_denied` by the store itself): reading the outbox, which
/// needs `recon_reader`. The login is the URL's user, as the server saw it.
fn denied_read(e: Error) -> Error {
    match e {
        Error::Store(StoreError::Database {
            url,
            problem: DatabaseProblem::Denied { role, .. },
        }) => {
            let user = url
                .split_once("://")
                .and_then(|(_, rest)| rest.split_once('@'))
                .map(|(user, _)| user.split(':').next().unwrap_or(user).to_string());
            crate::domain::Refusal::PermissionDenied {
                act: "read the outbox".into(),
                role: role.unwrap_or_else(|| TeamRole::Reader.as_str().to_string()),
                login: user.unwrap_or_else(|| "this login".into()),
            }
            .into()
        }
        other => other,
    }
}

impl From<crate::domain::Refusal> for Failure {
    fn from(e: crate::domain::Refusal) -> Self {
        Failure::Engine(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Committed;

    #[test]
    fn an_unknown_commit_is_exit_4_with_its_act_seq_and_hash_in_json_and_in_text() {
        let hash = "ab".repeat(32);
        let lost = StoreError::Io(std::io::Error::other("connection closed"));
        let failure =
            Failure::from(Error::from(lost).after(Committed::unknown("decided", 7, &hash)));
        assert_eq!(failure.exit_code(), EXIT_STORAGE);
        let json = failure.json().expect("a JSON error");
        assert_eq!(
            json["error"]["committed"],
            serde_json::json!({"outcome": "unknown", "act": "decided", "seq": 7, "hash": hash})
        );
        assert_eq!(json["error"]["kind"], "storage");
        let line = failure.message().expect("a line");
        assert!(line.starts_with("error: connection closed; the act (decided, journal entry 7"));
        assert!(line.contains("may have committed") && line.contains("`recon verify`"));
        assert_eq!(json["error"]["message"], line["error: ".len()..]);
    }
}
