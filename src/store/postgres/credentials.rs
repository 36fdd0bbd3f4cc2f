//! Credentials as every libpq client finds them, so that none has to travel
//! in a URL that recon prints, stores or passes on: `PGSERVICE` (a section
//! of `PGSERVICEFILE` or `~/.pg_service.conf`) fills in what the URL leaves
//! out, then `PGPASSWORD`, then the password file (`PGPASSFILE` or
//! `~/.pgpass`, ignored unless only its owner can read it, as libpq does).
//! A password the URL does carry wins.
//!
//! One implementation serves both PostgreSQL clients recon ships: the
//! outbox's `--database` (`store::postgres`) and `recon-pg-ledger`, which
//! depends on recon's library already and reaches this through
//! [`super::DatabaseUrl`]. recon passes an adapter only the variables its
//! registration names, so the adapter is registered with `--env
//! PGPASSWORD` (or `--env PGPASSFILE`, `--env PGSERVICE`); `HOME` is
//! always passed, so `~/.pgpass` needs nothing.

use postgres::config::Host;
use postgres::Config;
use std::path::PathBuf;

/// Reads one variable; `None` when unset or empty.
type Lookup = Box<dyn Fn(&str) -> Option<String>>;

/// What the process environment says (a seam for the tests).
pub(crate) struct Env {
    pub(crate) get: Lookup,
}

impl Env {
    pub(crate) fn process() -> Env {
        Env {
            get: Box::new(|name| std::env::var(name).ok().filter(|v| !v.is_empty())),
        }
    }

    pub(crate) fn var(&self, name: &str) -> Option<String> {
        (self.get)(name)
    }

    fn home_file(&self, name: &str) -> Option<PathBuf> {
        self.var("HOME").map(|home| PathBuf::from(home).join(name))
    }
}

/// Completes `config` from the service, `PGPASSWORD` and the password file.
pub(crate) fn complete(config: &mut Config, env: &Env) {
    if let Some(service) = env.var("PGSERVICE") {
        let file = env
            .var("PGSERVICEFILE")
            .map(PathBuf::from)
            .or_else(|| env.home_file(".pg_service.conf"));
        if let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) {
            apply_service(config, &text, &service);
        }
    }
    if config.get_password().is_some() {
        return;
    }
    if let Some(password) = env.var("PGPASSWORD") {
        config.password(password);
        return;
    }
    let file = env
        .var("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| env.home_file(".pgpass"));
    if let Some(text) = file
        .filter(|f| private(f))
        .and_then(|f| std::fs::read_to_string(f).ok())
    {
        let user = config
            .get_user()
            .map(str::to_string)
            .or_else(|| env.var("PGUSER"))
            .or_else(|| env.var("USER"))
            .unwrap_or_default();
        let key = Key {
            host: match config.get_hosts().first() {
                Some(Host::Tcp(host)) => host.clone(),
                _ => "localhost".to_string(),
            },
            port: config
                .get_ports()
                .first()
                .copied()
                .unwrap_or(5432)
                .to_string(),
            database: config
                .get_dbname()
                .map_or_else(|| user.clone(), str::to_string),
            user,
        };
        if let Some(password) = pgpass_lookup(&text, &key) {
            config.password(password);
        }
    }
}

/// A password file readable only by its owner, as libpq demands.
fn private(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o077 == 0)
}

/// The connection a password is looked up for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) host: String,
    pub(crate) port: String,
    pub(crate) database: String,
    pub(crate) user: String,
}

/// The password of the first line of a `.pgpass` that matches `key`:
/// `hostname:port:database:username:password`, `*` matching anything,
/// `\:` and `\\` escaping; comments and malformed lines skipped.
pub(crate) fn pgpass_lookup(text: &str, key: &Key) -> Option<String> {
    let wanted = [&key.host, &key.port, &key.database, &key.user];
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(split_fields)
        .find(|fields| {
            fields[..4]
                .iter()
                .zip(wanted)
                .all(|(field, value)| field == "*" || field == value)
        })
        .map(|mut fields| fields.swap_remove(4))
}

fn split_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    (fields.len() == 5).then_some(fields)
}

/// Fills what the URL left out from the service's section of a
/// `pg_service.conf`: `host`, `port`, `dbname`, `user`, `password`.
pub(crate) fn apply_service(config: &mut Config, text: &str, service: &str) {
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name == service;
            continue;
        }
        let Some((name, value)) = line.split_once('=').filter(|_| inside) else {
            continue;
        };
        let value = value.trim();
        match name.trim() {
            "host" if config.get_hosts().is_empty() => drop(config.host(value)),
            "port" if config.get_ports().is_empty() => {
                if let Ok(port) = value.parse() {
                    config.port(port);
                }
            }
            "dbname" if config.get_dbname().is_none() => drop(config.dbname(value)),
            "user" if config.get_user().is_none() => drop(config.user(value)),
            "password" if config.get_password().is_none() => drop(config.password(value)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key {
            host: "db.internal".into(),
            port: "5432".into(),
            database: "payments".into(),
            user: "recon".into(),
        }
    }

    #[test]
    fn a_pgpass_line_matches_field_by_field_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.internal:5432:other:recon:wrong\n\
                    db.internal:*:payments:recon:p\\:ass\\\\word\n\
                    *:*:*:*:fallback\n";
        assert_eq!(pgpass_lookup(text, &key()).as_deref(), Some("p:ass\\word"));
        let other = Key {
            user: "someone".into(),
            ..key()
        };
        assert_eq!(pgpass_lookup(text, &other).as_deref(), Some("fallback"));
        assert_eq!(pgpass_lookup("too:few:fields\n", &key()), None);
    }

    #[test]
    fn pgpassword_and_a_private_pgpass_give_the_password_the_url_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        let pgpass = dir.path().join("pgpass");
        std::fs::write(&pgpass, "127.0.0.1:5433:ledger:ann:from-file\n").unwrap();
        let url = "postgres://ann@127.0.0.1:5433/ledger";
        let env = |vars: Vec<(&'static str, String)>| Env {
            get: Box::new(move |name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.clone())
            }),
        };
        let file = pgpass.display().to_string();
        let mut config: Config = url.parse().unwrap();
        complete(&mut config, &env(vec![("PGPASSWORD", "from-env".into())]));
        assert_eq!(config.get_password(), Some(&b"from-env"[..]));
        // A file others can read is ignored, as libpq ignores it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut config: Config = url.parse().unwrap();
        complete(&mut config, &env(vec![("PGPASSFILE", file.clone())]));
        assert_eq!(config.get_password(), None);
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut config: Config = url.parse().unwrap();
        complete(&mut config, &env(vec![("PGPASSFILE", file)]));
        assert_eq!(config.get_password(), Some(&b"from-file"[..]));
    }

    #[test]
    fn a_service_fills_what_the_url_leaves_out() {
        let text = "[other]\nhost=elsewhere\n[ledger]\nhost=db.internal\nport=5444\n\
                    dbname=payments\nuser=recon\npassword=svc\n";
        let mut config = Config::new();
        config.user("ann");
        apply_service(&mut config, text, "ledger");
        assert_eq!(config.get_user(), Some("ann"), "the URL's own wins");
        assert_eq!(config.get_dbname(), Some("payments"));
        assert_eq!(config.get_ports(), &[5444]);
        assert_eq!(config.get_password(), Some(&b"svc"[..]));
        assert!(matches!(&config.get_hosts()[0], Host::Tcp(h) if h == "db.internal"));
    }
}
