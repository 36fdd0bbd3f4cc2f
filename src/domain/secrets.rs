//! Secrets stay out of an adapter's arguments (SPEC 12): arguments are
//! stored, journaled and printed, so one that carries a credential is
//! refused `secret_in_arguments` before the program is ever run, and the
//! value travels in the adapter's environment instead (`--env NAME`).
//!
//! The rule is deliberately wider than any one parser: every argument is
//! judged as typed and again percent-decoded (up to three rounds, so a
//! doubly encoded key is still seen), and an `@` anywhere after `://`
//! closes a URL's user information, as some clients (tokio-postgres among
//! them) read it, so a password holding `/ ? # @` is still a password. A
//! reason names the argument and what it carries, never the value.

/// What a key (of `KEY=VALUE`, a query parameter or a flag) may end with,
/// compared lowercase with `-` and `_` left out, for its value to be a
/// credential.
const SECRET_KEY_ENDINGS: [&str; 9] = [
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "authorization",
    "credentials",
];

/// Keys that are credentials only as a whole (`pass=`, `auth=`): as
/// endings they would catch `bypass` or `oauth`.
const SECRET_KEYS: [&str; 2] = ["pass", "auth"];

/// Why the adapter's arguments carry a credential, if they do: the first
/// argument (counted from 1, after the program) that does, and what it
/// carries.
pub fn secret_in_arguments(args: &[String]) -> Option<String> {
    args.iter().enumerate().find_map(|(i, arg)| {
        secret_in_argument(arg)
            .map(|what| format!("argument {} of the adapter carries {what}", i + 1))
    })
}

/// What one argument carries that is a credential, if anything.
fn secret_in_argument(arg: &str) -> Option<String> {
    decoded_forms(arg)
        .iter()
        .enumerate()
        .find_map(|(round, form)| {
            if let Some(flag) = secret_flag(form) {
                return Some(format!("the flag --{flag}, whose value is a credential"));
            }
            if url_password(form, round == 0) {
                return Some("a password in a URL".to_string());
            }
            secret_setting(form).map(|key| format!("a value for the key {key}"))
        })
}

/// The argument as typed and percent-decoded, round after round, until
/// decoding changes nothing (at most three rounds).
fn decoded_forms(arg: &str) -> Vec<String> {
    let mut forms = vec![arg.to_string()];
    for _ in 0..3 {
        let next = percent_decode(forms.last().map(String::as_str).unwrap_or_default());
        if forms.contains(&next) {
            break;
        }
        forms.push(next);
    }
    forms
}

/// `%XX` sequences decoded (anything else kept as it is; bytes that are
/// not UTF-8 become U+FFFD).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a key names a credential: lowercase, without `-` and `_`, it
/// ends with one of [`SECRET_KEY_ENDINGS`] or is one of [`SECRET_KEYS`].
pub fn secret_key(key: &str) -> bool {
    let key: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_KEYS.contains(&key.as_str()) || SECRET_KEY_ENDINGS.iter().any(|end| key.ends_with(end))
}

/// A flag whose value is a credential (`--password`, `--api-key`, with or
/// without `=VALUE`): its name, when the argument is one.
fn secret_flag(arg: &str) -> Option<&str> {
    let name = arg.strip_prefix("--")?;
    let name = name.split_once('=').map_or(name, |(name, _)| name);
    (!name.is_empty() && key_chars(name) && secret_key(name)).then_some(name)
}

/// Whether text holds only the characters a key is made of.
fn key_chars(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether a URL carries a password: after `://`, user information that
/// holds a `:`. As typed (`wide`), user information is the text up to any
/// `@`, past `/ ? #` too, as some clients read it; once decoded it is
/// RFC 3986's (up to the last `@` before the first `/ ? #`), so an `@`
/// that was encoded in a query (`?user=ann%40example.com`) is no password.
fn url_password(arg: &str, wide: bool) -> bool {
    arg.match_indices("://").any(|(i, _)| {
        let rest = &arg[i + 3..];
        let authority = if wide {
            rest
        } else {
            rest.split(['/', '?', '#']).next().unwrap_or_default()
        };
        authority
            .match_indices('@')
            .any(|(at, _)| authority[..at].contains(':'))
    })
}

/// The first `KEY=VALUE` setting (a libpq keyword, a query parameter, a
/// flag's `--key=value`) whose key names a credential: its key.
fn secret_setting(arg: &str) -> Option<String> {
    arg.match_indices('=').find_map(|(i, _)| {
        let before = arg[..i].trim_end();
        let start = before
            .char_indices()
            .rev()
            .take_while(|&(_, c)| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .last()
            .map_or(before.len(), |(j, _)| j);
        let key = before[start..].trim_start_matches('-');
        let last_part = key.rsplit('.').next().unwrap_or(key);
        (!last_part.is_empty() && secret_key(last_part)).then(|| key.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::{percent_decode, secret_in_arguments};

    /// Only `%` and two hex digits decode; anything else is kept as typed.
    #[test]
    fn percent_decoding_takes_only_a_percent_and_two_hex_digits() {
        assert_eq!(percent_decode("%41%4a%zz%4z%z4%4"), "AJ%zz%4z%z4%4");
    }

    /// One argument, and whether it must be refused.
    const CASES: &[(&str, bool)] = &[
        // A password in a URL, in any encoding.
        ("postgres://ann:hunter2@db/ledger", true),
        ("postgresql://ann:@db", true),
        ("postgres://:hunter2@db", true),
        ("--url=https://u:p@x", true),
        ("postgres://ann:hun%40ter2@db/ledger", true),
        ("postgres://ann:hun/ter2@db/ledger", true),
        ("postgres://ann:hun?ter2@db/ledger", true),
        ("postgres://ann:hun#ter2@db/ledger", true),
        ("postgres://ann:hun@ter2@db/ledger", true),
        ("postgres://ann%3Ahunter2@db/ledger", true),
        ("postgres%3A%2F%2Fann%3Ahunter2%40db", true),
        ("postgres://db/ledger?user=ann&password=hunter2", true),
        ("postgres://db/ledger?pass%77ord=hunter2", true),
        ("postgres://db/ledger?pass%2577ord=hunter2", true),
        ("postgres://db/ledger?sslmode=require&PASSWORD=x", true),
        // KEY=VALUE and query parameters whose key names a credential.
        ("host=db password=hunter2", true),
        ("host=db password = hunter2", true),
        ("passwd=hunter2", true),
        ("pwd=hunter2", true),
        ("db_pwd=hunter2", true),
        ("token=abc", true),
        ("access_token=abc", true),
        ("ACCESS-TOKEN=abc", true),
        ("client_secret=abc", true),
        ("api_key=abc", true),
        ("x-api-key=abc", true),
        ("aws_access_key=abc", true),
        ("authorization=Bearer abc", true),
        ("credentials=abc", true),
        ("pass=abc", true),
        ("auth=abc", true),
        ("https://api.example.com/v1?auth=abc", true),
        ("spring.datasource.password=abc", true),
        // Flags whose value is a credential, with or without `=`.
        ("--password", true),
        ("--password=hunter2", true),
        ("--passwd", true),
        ("--secret", true),
        ("--token", true),
        ("--token=abc", true),
        ("--api-key", true),
        ("--api_key=abc", true),
        ("--auth", true),
        ("--auth=abc", true),
        ("--db-password", true),
        // What carries no credential.
        ("postgres://ann@db/ledger", false),
        ("postgres://db:5432/ledger", false),
        ("postgres://db:5432/ledger?user=ann%40example.com", false),
        ("postgres://db:5432/ledger?user=ann%2540example.com", false),
        ("--database", false),
        ("/var/mail/box", false),
        // A flag's name is made of key characters: a path ending in a
        // credential's name is no flag.
        ("--notes/password", false),
        ("https://x/path@y:z", false),
        ("--password-file", false),
        ("--password-file=/etc/recon/pw", false),
        ("--token-file=/run/token", false),
        ("bypass=1", false),
        ("oauth=on", false),
        ("--no-auth-cache", false),
        ("sslmode=require", false),
        ("--smtp", false),
        ("127.0.0.1:25", false),
        ("user=ann", false),
        ("passphrase_file=/etc/key", false),
        ("a==b", false),
        ("PGPASSWORD", false),
    ];

    #[test]
    fn every_form_of_a_credential_spec_12_lists_is_refused_and_plain_arguments_pass() {
        for &(arg, refused) in CASES {
            let args = ["--database".to_string(), arg.to_string()];
            let why = secret_in_arguments(&args);
            assert_eq!(why.is_some(), refused, "{arg}: {why:?}");
            if let Some(why) = why {
                assert!(why.starts_with("argument 2 "), "{arg}: {why}");
                for value in ["hunter2", "abc"] {
                    assert!(!why.contains(value), "{arg}: the reason repeats it: {why}");
                }
            }
        }
    }
}
