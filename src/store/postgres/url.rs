//! A `postgres://` URL, parsed once, completed with the credentials libpq
//! would find, and printed only with its password redacted.
//!
//! The URL's own text is never kept: what a [`DatabaseUrl`] can print is
//! its redacted form, taken when it is parsed, so no message, error or
//! journal entry built from it can carry a password. The redaction follows
//! the `postgres` crate's parser (the user information ends at the first
//! `@`, its password starts at the first `:`), and errs on the side of
//! hiding more: everything up to the *last* `@` after that colon, so a
//! password holding an unescaped `@` is hidden whole, and the whole query
//! when any of its parameters is a password.
//!
//! Its TLS settings (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`) are
//! taken out of the query before the `postgres` crate reads the rest, and
//! kept beside it ([`TlsSettings`], `tls.rs`): every connection to the
//! database is made through [`DatabaseUrl::connect`].

use super::credentials::{self, Env};
use super::tls::{self, ConnectError, TlsSettings};
use std::fmt;

const SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// Where the redacted text stands for a password.
const HIDDEN: &str = "***";

/// A database named by a `postgres://` URL (`--database`,
/// `RECON_DATABASE_URL`, `recon-pg-ledger --database`).
#[derive(Clone)]
pub struct DatabaseUrl {
    redacted: String,
    config: postgres::Config,
    tls: TlsSettings,
}

/// Why a text is not a usable `postgres://` URL; its message names the
/// URL redacted, or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

impl DatabaseUrl {
    /// Parses `text` and completes it from the process's environment and
    /// files, as libpq would (`PGSERVICE`, `PGPASSWORD`, `.pgpass`).
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        Self::parse_in(text, &Env::process())
    }

    pub(crate) fn parse_in(text: &str, env: &Env) -> Result<Self, UrlError> {
        if !SCHEMES.iter().any(|scheme| text.starts_with(scheme)) {
            // Not a URL: there is no telling where a password would be in
            // it, so it is not repeated.
            return Err(UrlError(
                "a database is named by a postgres:// URL (postgres://USER@HOST:PORT/DATABASE; \
                 the password from PGPASSWORD, ~/.pgpass or a PGSERVICE)"
                    .into(),
            ));
        }
        let redacted = redact(text);
        let (rest, taken) = take_tls_parameters(text);
        let tls = TlsSettings::new(
            &taken,
            &|name| env.var(name),
            env.var("HOME").map(Into::into),
        )
        .map_err(|e| UrlError(format!("{redacted}: {e}")))?;
        let mut config = rest
            .parse::<postgres::Config>()
            .map_err(|e| UrlError(format!("{redacted}: {e}")))?;
        credentials::complete(&mut config, env);
        Ok(DatabaseUrl {
            redacted,
            config,
            tls,
        })
    }

    /// The connection settings, credentials included: for connecting,
    /// never for printing.
    pub fn config(&self) -> &postgres::Config {
        &self.config
    }

    /// The URL's TLS settings (`sslmode` and its files).
    pub fn tls(&self) -> &TlsSettings {
        &self.tls
    }

    /// Connects with `config` (this URL's [`Self::config`], with the
    /// caller's session settings added) under this URL's `sslmode`.
    pub fn connect(&self, config: &postgres::Config) -> Result<postgres::Client, ConnectError> {
        self.tls.connect(config)
    }

    /// Hides the password in a message that came from the server or the
    /// client library: neither is known to print it, and this makes sure.
    pub(crate) fn scrub(&self, message: &str) -> String {
        match self
            .config
            .get_password()
            .and_then(|p| std::str::from_utf8(p).ok())
        {
            Some(password) if !password.is_empty() => message.replace(password, HIDDEN),
            _ => message.to_string(),
        }
    }
}

impl fmt::Display for DatabaseUrl {
    /// The URL as typed, its password (if any) replaced by `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

/// Two URLs name the same database when they read the same redacted: the
/// password (which is not part of where the database is) aside.
impl PartialEq for DatabaseUrl {
    fn eq(&self, other: &Self) -> bool {
        self.redacted == other.redacted
    }
}

impl Eq for DatabaseUrl {}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({})", self.redacted)
    }
}

/// `text`, a `postgres://` URL, with its password hidden: in the user
/// information, and the whole query when one of its parameters names a
/// password.
fn redact(text: &str) -> String {
    let Some((scheme, rest)) = SCHEMES
        .iter()
        .find_map(|scheme| Some((*scheme, text.strip_prefix(scheme)?)))
    else {
        return String::new();
    };
    let mut out = scheme.to_string();
    let rest = match rest.find('@') {
        Some(first_at) => {
            let user = &rest[..first_at];
            match user.find(':') {
                Some(colon) => {
                    let last_at = rest.rfind('@').unwrap_or(first_at);
                    out.push_str(&user[..colon]);
                    out.push(':');
                    out.push_str(HIDDEN);
                    out.push('@');
                    &rest[last_at + 1..]
                }
                None => {
                    out.push_str(&rest[..=first_at]);
                    &rest[first_at + 1..]
                }
            }
        }
        None => rest,
    };
    match rest.split_once('?') {
        Some((place, query)) if percent_decoded(query).contains("password") => {
            out.push_str(place);
            out.push('?');
            out.push_str(HIDDEN);
        }
        _ => out.push_str(rest),
    }
    out
}

/// `text` without the query parameters `tls.rs` reads, and those, decoded.
fn take_tls_parameters(text: &str) -> (String, Vec<(String, String)>) {
    let Some((place, query)) = text.split_once('?') else {
        return (text.to_string(), Vec::new());
    };
    let mut taken = Vec::new();
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decoded(key);
        if tls::PARAMETERS.contains(&key.as_str()) {
            taken.push((key, decoded(value)));
        } else {
            kept.push(pair);
        }
    }
    match kept.is_empty() {
        true => (place.to_string(), taken),
        false => (format!("{place}?{}", kept.join("&")), taken),
    }
}

/// `text` with its `%XX` escapes decoded, lowercased: only to look for a
/// word in it.
fn percent_decoded(text: &str) -> String {
    decoded(text).to_lowercase()
}

/// `text` with its `%XX` escapes decoded.
fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env() -> Env {
        Env {
            get: Box::new(|_| None),
        }
    }

    #[track_caller]
    fn check(url: &str, secret: &str, shown: &str) {
        let parsed = DatabaseUrl::parse_in(url, &no_env());
        let text = match &parsed {
            Ok(url) => format!("{url} {url:?}"),
            Err(e) => e.to_string(),
        };
        assert!(!text.contains(secret), "{url} printed as {text}");
        assert_eq!(redact(url), shown);
    }

    #[test]
    fn a_urls_password_never_appears_in_its_display() {
        check(
            "postgres://ann:s3cret@db.internal:5432/payments",
            "s3cret",
            "postgres://ann:***@db.internal:5432/payments",
        );
        check(
            "postgresql://ann:p%40ss@db/payments?sslmode=disable",
            "p%40ss",
            "postgresql://ann:***@db/payments?sslmode=disable",
        );
        // An unescaped `@` in the password: hidden whole.
        check(
            "postgres://ann:pa@ss@db/payments",
            "pa@ss",
            "postgres://ann:***@db/payments",
        );
        check(
            "postgres://ann@db/payments?application_name=x&password=hunter2",
            "hunter2",
            "postgres://ann@db/payments?***",
        );
        check(
            "postgres://db/payments?pass%77ord=hunter2&sslmode=disable",
            "hunter2",
            "postgres://db/payments?***",
        );
        // Malformed after the password: the error names the URL redacted.
        check(
            "postgres://ann:s3cret@db:notaport/payments",
            "s3cret",
            "postgres://ann:***@db:notaport/payments",
        );
        check(
            "postgres://ann@db/payments",
            "\0",
            "postgres://ann@db/payments",
        );
    }

    #[test]
    fn the_tls_parameters_are_taken_from_the_query_and_the_rest_kept() {
        let url = DatabaseUrl::parse_in(
            "postgres://ann@db/payments?application_name=x&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
            &no_env(),
        )
        .unwrap();
        assert_eq!(url.tls().mode(), tls::SslMode::VerifyFull);
        assert_eq!(url.config().get_application_name(), Some("x"));
        assert_eq!(
            url.config().get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        let e = DatabaseUrl::parse_in("postgres://ann:s3cret@db/p?sslmode=verify", &no_env())
            .unwrap_err();
        assert!(e.0.contains("sslmode") && !e.0.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_text_that_is_not_a_postgres_url_is_not_repeated() {
        let e = DatabaseUrl::parse_in("host=db password=s3cret", &no_env()).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(e.to_string().contains("postgres://"), "{e}");
    }

    #[test]
    fn a_password_from_the_environment_completes_the_url_and_is_scrubbed() {
        let env = Env {
            get: Box::new(|name| (name == "PGPASSWORD").then(|| "from-env".to_string())),
        };
        let url = DatabaseUrl::parse_in("postgres://ann@db/payments", &env).unwrap();
        assert_eq!(url.config().get_password(), Some(&b"from-env"[..]));
        assert_eq!(url.to_string(), "postgres://ann@db/payments");
        assert_eq!(url.scrub("auth from-env failed"), "auth *** failed");
    }
}
