//! Throwaway servers for the real-receiver tests: a PostgreSQL cluster and
//! a Postfix instance, each started at most once per test process, on a free
//! loopback port, with every file in a temporary directory, and stopped when
//! the process exits (an `atexit` hook: statics are never dropped).
//!
//! Nothing here touches the machine's own services or configuration:
//! PostgreSQL runs from `initdb` into the temp dir, its socket there too;
//! Postfix runs `MAIL_CONFIG=DIR postfix start-fg` on a private `main.cf` and
//! `master.cf` (chroot off, one smtpd on `127.0.0.1:PORT`, delivery through a
//! virtual mailbox map into Maildirs owned by `nobody`, its log in the temp
//! dir). As root, PostgreSQL runs as `postgres` through `runuser`, and the
//! directories it or Postfix's daemons need are handed to those users.
//!
//! A server that cannot start is an `Err` with the reason; [`require`] turns
//! it into one printed line and a test that returns early, or a failure
//! when `CI` is set. This file also serves the latency bench
//! (`benches/real_receivers.rs`), so it uses nothing else from the tests.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

/// How long a server may take to come up.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The server for a test, or `None` after one line saying the test did not
/// run. Under `CI` a server that cannot start fails the test instead: CI
/// installs both, so a missing one there is a broken machine.
pub fn require<T>(test: &str, server: &'static Result<T, String>) -> Option<&'static T> {
    require_own(test, server.as_ref().map_err(Clone::clone))
}

/// [`require`] for a server the test owns (say [`Postgres::dedicated`]).
pub fn require_own<T>(test: &str, server: Result<T, String>) -> Option<T> {
    match server {
        Ok(server) => Some(server),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: a server did not start under CI: {why}")
        }
        Err(why) => {
            println!("{test}: did not run: {why}");
            None
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of a system user.
fn user_ids(name: &str) -> Result<(u32, u32), String> {
    let text = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {e}"))?;
    text.lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() > 3 && fields[0] == name)
        .and_then(|fields| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
        .ok_or_else(|| format!("there is no user {name}"))
}

fn chown(path: &Path, user: &str) -> Result<(), String> {
    let (uid, gid) = user_ids(user)?;
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| format!("chown {} {user}: {e}", path.display()))
}

/// A port nothing listens on now (the kernel's pick, released at once).
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

/// A temp dir the servers' own users can traverse (`mktemp -d` is 0700).
fn server_dir(prefix: &str) -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?
        .keep();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Runs a command to its end; `Err` carries its output.
fn run(command: &mut Command) -> Result<String, String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{command:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{command:?}: {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Stops every server this process started; registered once with `atexit`.
extern "C" fn stop_servers() {
    for pg in [&POSTGRES, &TLS_POSTGRES, &OLDER_POSTGRES] {
        if let Some(Ok(pg)) = pg.get() {
            pg.stop();
        }
    }
    if let Some(Ok(postfix)) = POSTFIX.get() {
        postfix.stop();
    }
}

fn stop_at_exit() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: `stop_servers` is an `extern "C" fn()` that lives for the
        // whole process; atexit only stores the pointer.
        unsafe { libc::atexit(stop_servers) };
    });
}

// ---------------------------------------------------------------- PostgreSQL

/// A throwaway PostgreSQL cluster on `127.0.0.1:port`, trusting local
/// connections, its socket and data in `dir`.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    databases: AtomicUsize,
    fsync: bool,
    /// A TLS cluster's certificates ([`Postgres::tls`]).
    pub tls: Option<TlsFiles>,
}

/// The certificates of a TLS cluster, made in its directory with the
/// openssl CLI: a CA, the server's certificate signed by it for the DNS
/// name `localhost` only (not for `127.0.0.1`), and another CA that signed
/// nothing the server shows.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub other_ca: PathBuf,
}

static POSTGRES: OnceLock<Result<Postgres, String>> = OnceLock::new();
static TLS_POSTGRES: OnceLock<Result<Postgres, String>> = OnceLock::new();
static OLDER_POSTGRES: OnceLock<Result<Postgres, String>> = OnceLock::new();
static DURABLE: AtomicBool = AtomicBool::new(false);

/// Makes the cluster of this process (if not started yet) flush its
/// commits as a production server does: for measuring latency.
pub fn durable_postgres() {
    DURABLE.store(true, Ordering::SeqCst);
}

/// The cluster of this process, started on first use. Tests run it with
/// fsync off (`-F`): none of them is about surviving a power cut.
pub fn postgres() -> &'static Result<Postgres, String> {
    POSTGRES.get_or_init(|| {
        stop_at_exit();
        Postgres::start(DURABLE.load(Ordering::SeqCst))
    })
}

/// Where the PostgreSQL server binaries are: `RECON_PG_BIN`, or Debian's
/// newest under /usr/lib/postgresql.
fn pg_bin() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("RECON_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("PostgreSQL is not installed (/usr/lib/postgresql: {e})"))?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no PostgreSQL server binaries under /usr/lib/postgresql".into())
}

impl Postgres {
    /// A command of the cluster, as `postgres` when this process is root.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    fn start(fsync: bool) -> Result<Postgres, String> {
        Postgres::start_with(fsync, false)
    }

    fn start_with(fsync: bool, tls: bool) -> Result<Postgres, String> {
        let dir = server_dir("recon-pg-")?;
        if is_root() {
            chown(&dir, "postgres")?;
        }
        let mut pg = Postgres {
            bin: pg_bin()?,
            dir,
            port: 0,
            databases: AtomicUsize::new(0),
            fsync,
            tls: None,
        };
        let data = pg.dir.join("data");
        let init = run(pg
            .command("initdb")
            .args(["-N", "-A", "trust", "-U", "postgres", "-E", "UTF8", "-D"])
            .arg(&data));
        if let Err(why) = init {
            let _ = std::fs::remove_dir_all(&pg.dir);
            return Err(format!("initdb failed: {why}"));
        }
        if tls {
            match make_certificates(&pg.dir, &data) {
                Ok(files) => pg.tls = Some(files),
                Err(why) => {
                    let _ = std::fs::remove_dir_all(&pg.dir);
                    return Err(format!("no TLS cluster: {why}"));
                }
            }
        }
        let mut last = String::new();
        for _ in 0..3 {
            pg.port = free_port()?;
            match pg.launch() {
                Ok(_) => return Ok(pg),
                Err(why) => last = why,
            }
        }
        let log = std::fs::read_to_string(pg.dir.join("log")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&pg.dir);
        Err(format!("PostgreSQL did not start: {last}\n{log}"))
    }

    /// `pg_ctl start` on this cluster's data and port, waiting until it
    /// accepts connections.
    fn launch(&self) -> Result<String, String> {
        // The whole suite shares one cluster, with many processes at once
        // (eight-writer races, adapter sessions, both stores' tests): room
        // for all of them past the default of 100 connections.
        let options = format!(
            "-k {} -p {} -c listen_addresses=127.0.0.1 -c max_connections=300{}{}",
            self.dir.display(),
            self.port,
            if self.fsync { "" } else { " -F" },
            if self.tls.is_some() {
                " -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
            } else {
                ""
            }
        );
        // More server settings for a person investigating a run, e.g.
        // RECON_PG_SERVER_OPTIONS='-c log_lock_waits=on -c deadlock_timeout=20ms'.
        let options = match std::env::var("RECON_PG_SERVER_OPTIONS") {
            Ok(more) => format!("{options} {more}"),
            Err(_) => options,
        };
        run(self
            .command("pg_ctl")
            .args(["-w", "-t", "60", "-D"])
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-o", &options, "start"]))
    }

    /// A cluster of the caller's own, not the one the other tests share:
    /// for a test that stops its server. Dropping it stops it and removes
    /// its files.
    pub fn dedicated() -> Result<Postgres, String> {
        Postgres::start(false)
    }

    /// A cluster of this process that speaks TLS only on TCP (`hostssl`
    /// lines, no `host`), with its certificates in [`Postgres::tls`];
    /// started on first use and shared by the TLS tests.
    pub fn tls() -> &'static Result<Postgres, String> {
        TLS_POSTGRES.get_or_init(|| {
            stop_at_exit();
            Postgres::start_with(false, true)
        })
    }

    /// A cluster of this process for outboxes an older recon made, whose
    /// roles (`recon_*`) serve every copy of them: apart from the
    /// cluster of [`postgres`], whose own outboxes' roles must not serve
    /// another database (`roles_in_use`); started on first use.
    pub fn older() -> &'static Result<Postgres, String> {
        OLDER_POSTGRES.get_or_init(|| {
            stop_at_exit();
            Postgres::start(false)
        })
    }

    /// Stops the server as a crash does (`pg_ctl stop -m immediate`):
    /// every backend killed, no checkpoint, recovery on the next start.
    #[track_caller]
    pub fn stop_immediately(&self) {
        run(self
            .command("pg_ctl")
            .args(["-w", "-m", "immediate", "-D"])
            .arg(self.dir.join("data"))
            .arg("stop"))
        .unwrap_or_else(|e| panic!("pg_ctl stop -m immediate: {e}"));
    }

    /// Starts the server again on the same port after [`Self::stop_immediately`].
    #[track_caller]
    pub fn start_again(&self) {
        self.launch()
            .unwrap_or_else(|e| panic!("pg_ctl start again: {e}"));
    }

    fn stop(&self) {
        let _ = run(self
            .command("pg_ctl")
            .args(["-w", "-m", "fast", "-D"])
            .arg(self.dir.join("data"))
            .arg("stop"));
        // For a person investigating a run (say with PGOPTIONS='-c
        // log_lock_waits=on'): the server's log, kept where this names.
        if let Some(keep) = std::env::var_os("RECON_PG_KEEP_LOG") {
            let _ = std::fs::copy(self.dir.join("log"), keep);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// A URL of `database` naming the server by `host` (`localhost`, or
    /// `127.0.0.1`, which its certificate does not name), with `query`.
    pub fn url_at(&self, host: &str, database: &str, query: &str) -> String {
        format!(
            "postgres://postgres@{host}:{}/{database}?{query}",
            self.port
        )
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The prefix of the roles of the outbox in the database at `url`, as
    /// its `meta` records it (`recon` for one that records none).
    pub fn roles_prefix_of(&self, url: &str) -> String {
        let database = url.rsplit('/').next().expect("a database name");
        let database = database.split('?').next().unwrap_or(database);
        let found = self.psql(
            database,
            "SELECT coalesce((SELECT value FROM meta WHERE key = 'roles_prefix'), 'recon')",
        );
        found.trim().to_string()
    }

    /// A new empty database, named after `prefix`; its URL.
    pub fn new_database(&self, prefix: &str) -> String {
        self.create_database(prefix, "")
    }

    /// A new database that starts as a copy of `template` (a database no
    /// session is connected to), which costs a file copy rather than
    /// building it again; its URL.
    pub fn new_database_from(&self, prefix: &str, template: &str) -> String {
        self.create_database(prefix, &format!(" TEMPLATE {template}"))
    }

    fn create_database(&self, prefix: &str, clause: &str) -> String {
        let n = self.databases.fetch_add(1, Ordering::SeqCst);
        let name = format!("{prefix}_{n}");
        self.psql("postgres", &format!("CREATE DATABASE {name}{clause}"));
        self.url(&name)
    }

    /// Runs SQL through psql in `database`; the rows, one a line,
    /// columns separated by `|`.
    #[track_caller]
    pub fn psql(&self, database: &str, sql: &str) -> String {
        self.try_psql(database, sql)
            .unwrap_or_else(|e| panic!("psql: {e}"))
    }

    /// Runs the SQL file `path` (a dump, with its `COPY` data) through psql
    /// in `database`, stopping at its first error.
    #[track_caller]
    pub fn psql_file(&self, database: &str, path: &Path) {
        run(Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
            ])
            .arg("-f")
            .arg(path))
        .unwrap_or_else(|e| panic!("psql -f {}: {e}", path.display()));
    }

    /// [`Postgres::psql`] for SQL the server may refuse: `Err` carries
    /// psql's output, the server's message among it.
    pub fn try_psql(&self, database: &str, sql: &str) -> Result<String, String> {
        run(Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
            ])
            .args(["-c", sql]))
    }
}

/// A dedicated cluster stops when its test ends (the shared one, in a
/// static, is stopped at exit instead).
impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

// ------------------------------------------------------------------- Postfix

/// How many mailboxes the private Postfix delivers to: one per test that
/// asks, so no test reads another's messages.
pub const MAILBOXES: usize = 16;

/// A private Postfix listening on `127.0.0.1:port`.
pub struct Postfix {
    dir: PathBuf,
    pub port: u16,
    master: Mutex<Option<Child>>,
    next_box: AtomicUsize,
}

/// A mailbox of the private Postfix: its address and its Maildir.
#[derive(Debug, Clone)]
pub struct Mailbox {
    pub address: String,
    pub maildir: PathBuf,
}

static POSTFIX: OnceLock<Result<Postfix, String>> = OnceLock::new();

/// The Postfix of this process, started on first use.
pub fn postfix() -> &'static Result<Postfix, String> {
    POSTFIX.get_or_init(|| {
        stop_at_exit();
        Postfix::start()
    })
}

fn postfix_program() -> Result<PathBuf, String> {
    ["/usr/sbin/postfix", "/usr/local/sbin/postfix"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| "Postfix is not installed (no /usr/sbin/postfix)".to_string())
}

/// The Debian `master.cf` with chroot off on every service and its public
/// smtpd moved to `127.0.0.1:port`.
fn master_cf(port: u16) -> Result<String, String> {
    let text = std::fs::read_to_string("/etc/postfix/master.cf")
        .map_err(|e| format!("/etc/postfix/master.cf: {e}"))?;
    let lines = text.lines().map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with('#') || line.starts_with([' ', '\t']) || fields.len() < 8 {
            return line.to_string();
        }
        let mut fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        if fields[0] == "smtp" && fields[1] == "inet" {
            fields[0] = format!("127.0.0.1:{port}");
        }
        fields[4] = "n".into();
        fields.join("  ")
    });
    Ok(lines.collect::<Vec<_>>().join("\n") + "\n")
}

fn main_cf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "compatibility_level = 3.6\n\
         queue_directory = {d}/queue\n\
         data_directory = {d}/data\n\
         inet_interfaces = loopback-only\n\
         inet_protocols = ipv4\n\
         myhostname = recon-test.localdomain\n\
         mydestination =\n\
         mynetworks = 127.0.0.0/8\n\
         local_recipient_maps =\n\
         alias_maps =\n\
         alias_database =\n\
         default_transport = error\n\
         relay_transport = error\n\
         maillog_file = /dev/stdout\n\
         virtual_mailbox_domains = example.test\n\
         virtual_mailbox_base = {d}/mail\n\
         virtual_mailbox_maps = texthash:{d}/config/vmailbox\n\
         virtual_uid_maps = static:65534\n\
         virtual_gid_maps = static:65534\n\
         smtputf8_enable = no\n\
         biff = no\n"
    )
}

/// Writes the private configuration and the Maildirs (owned by `nobody`,
/// the virtual delivery agent's user here).
fn postfix_tree(dir: &Path, port: u16) -> Result<(), String> {
    let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
    for sub in ["config", "queue", "data", "mail"] {
        std::fs::create_dir(dir.join(sub)).map_err(|e| io(&dir.join(sub), e))?;
    }
    chown(&dir.join("data"), "postfix")?;
    let config = dir.join("config");
    let write = |name: &str, text: String| {
        std::fs::write(config.join(name), text).map_err(|e| io(&config.join(name), e))
    };
    write("main.cf", main_cf(dir))?;
    write("master.cf", master_cf(port)?)?;
    let mut map = String::new();
    for n in 0..MAILBOXES {
        map.push_str(&format!("box{n}@example.test box{n}/\n"));
        for sub in ["", "/new", "/cur", "/tmp"] {
            let path = dir.join(format!("mail/box{n}{sub}"));
            std::fs::create_dir(&path).map_err(|e| io(&path, e))?;
            chown(&path, "nobody")?;
        }
    }
    write("vmailbox", map)?;
    chown(&dir.join("mail"), "nobody")
}

/// Waits until something answers SMTP's 220 greeting on the port.
fn smtp_ready(port: u16, master: &mut Child, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
            use std::io::Read;
            let mut greeting = [0u8; 3];
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .map_err(|e| format!("smtp: {e}"))?;
            if (&stream).read_exact(&mut greeting).is_ok() && &greeting == b"220" {
                return Ok(());
            }
        }
        let log = || std::fs::read_to_string(log).unwrap_or_default();
        if let Ok(Some(status)) = master.try_wait() {
            return Err(format!("postfix start-fg exited ({status}):\n{}", log()));
        }
        if Instant::now() > deadline {
            return Err(format!("Postfix did not greet on port {port}:\n{}", log()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Postfix {
    fn start() -> Result<Postfix, String> {
        if !is_root() {
            return Err("Postfix runs as root, and this test is not".into());
        }
        let program = postfix_program()?;
        let dir = server_dir("recon-postfix-")?;
        let port = free_port()?;
        postfix_tree(&dir, port)?;
        let log = dir.join("maillog");
        let log_file = std::fs::File::create(&log).map_err(|e| format!("maillog: {e}"))?;
        let mut master = Command::new(program)
            .arg("start-fg")
            .env("MAIL_CONFIG", dir.join("config"))
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| format!("maillog: {e}"))?)
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("postfix start-fg: {e}"))?;
        let postfix = Postfix {
            dir,
            port,
            master: Mutex::new(None),
            next_box: AtomicUsize::new(0),
        };
        let ready = smtp_ready(port, &mut master, &log);
        *postfix.master.lock().unwrap_or_else(|p| p.into_inner()) = Some(master);
        match ready {
            Ok(()) => Ok(postfix),
            Err(why) => {
                postfix.stop();
                Err(why)
            }
        }
    }

    /// Stops the master (`postfix stop`), waits for `start-fg` to return,
    /// and kills it if it will not.
    fn stop(&self) {
        if let Ok(program) = postfix_program() {
            let _ = run(Command::new(program)
                .arg("stop")
                .env("MAIL_CONFIG", self.dir.join("config")));
        }
        let master = self.master.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut master) = master {
            let deadline = Instant::now() + Duration::from_secs(20);
            while matches!(master.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = master.kill();
            let _ = master.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    pub fn smtp(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A mailbox no other caller in this process gets.
    #[track_caller]
    pub fn mailbox(&self) -> Mailbox {
        let n = self.next_box.fetch_add(1, Ordering::SeqCst);
        assert!(n < MAILBOXES, "more than {MAILBOXES} mailboxes asked for");
        Mailbox {
            address: format!("box{n}@example.test"),
            maildir: self.dir.join(format!("mail/box{n}")),
        }
    }

    /// What Postfix logged so far (for a failure message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("maillog")).unwrap_or_default()
    }
}

// -------------------------------------------------------- recon-pg-ledger

/// The `recon-pg-ledger` binary of this build, built once per process.
///
/// A workspace member's binary has no `CARGO_BIN_EXE_*` in the root
/// package's tests, and a binary merely found in `target/` may be stale. So
/// the first caller runs `cargo build -p recon-pg-ledger` with the profile
/// and target directory of the `recon` binary under test: a no-op when it
/// is fresh (CI builds the workspace first), a real build otherwise, and
/// the path is then the one cargo just wrote. Only when cargo cannot be
/// run (a test binary started by hand) is an existing binary beside
/// `recon` used as it is.
pub fn pg_ledger_binary() -> &'static Result<PathBuf, String> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY.get_or_init(|| {
        let recon = PathBuf::from(env!("CARGO_BIN_EXE_recon"));
        let profile_dir = recon.parent().ok_or("recon has no directory")?;
        let binary = profile_dir.join("recon-pg-ledger");
        let target_dir = profile_dir.parent().ok_or("no target directory")?;
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev",
            Some(other) => other,
            None => return Err("no profile directory".into()),
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let built = run(Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "recon-pg-ledger",
                "--profile",
                profile,
            ])
            .arg("--manifest-path")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir));
        match built {
            Ok(_) if binary.is_file() => Ok(binary),
            Ok(_) => Err(format!("cargo built no {}", binary.display())),
            Err(_) if binary.is_file() => Ok(binary),
            Err(why) => Err(format!("cannot build recon-pg-ledger: {why}")),
        }
    })
}

// ---------------------------------------------------------------- certificates

/// Makes a CA, another CA, and the server's key and certificate (for
/// `localhost` only) with the openssl CLI; puts the server's pair in the
/// data directory as its server user's, and writes a `pg_hba.conf` that
/// takes TCP only over TLS.
fn make_certificates(dir: &Path, data: &Path) -> Result<TlsFiles, String> {
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).map_err(|e| format!("{}: {e}", tls.display()))?;
    let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(&tls).args(args));
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for (name, subject) in [("ca", "/CN=recon test CA"), ("other-ca", "/CN=another CA")] {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        let args = [
            &["req", "-x509", "-new", "-days", "2", "-subj", subject][..],
            &ec[..],
        ]
        .concat();
        openssl(
            &[
                &args[..],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                &["-keyout", &key, "-out", &crt],
            ]
            .concat(),
        )?;
    }
    let request = [&["req", "-new", "-subj", "/CN=localhost"][..], &ec[..]].concat();
    openssl(
        &[
            &request[..],
            &["-keyout", "server.key", "-out", "server.csr"],
        ]
        .concat(),
    )?;
    std::fs::write(
        tls.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| format!("server.ext: {e}"))?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
    ])?;
    for name in ["server.crt", "server.key"] {
        let to = data.join(name);
        std::fs::copy(tls.join(name), &to).map_err(|e| format!("{name}: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("chmod {name}: {e}"))?;
        if is_root() {
            chown(&to, "postgres")?;
        }
    }
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
    )
    .map_err(|e| format!("pg_hba.conf: {e}"))?;
    Ok(TlsFiles {
        ca: tls.join("ca.crt"),
        other_ca: tls.join("other-ca.crt"),
    })
}

/// A roles' prefix of the database at `url` alone (its name, which is
/// unique on the cluster, cut to fit): roles belong to one outbox, so each
/// test's `db init` gives its outbox its own (`db init --roles`).
pub fn roles_prefix_for(url: &str) -> String {
    let database = url.rsplit('/').next().expect("a database name");
    let database = database.split('?').next().unwrap_or(database);
    let (name, n) = database.rsplit_once('_').unwrap_or((database, "0"));
    let keep = 38usize.saturating_sub(n.len());
    let name: String = name.chars().take(keep).collect();
    format!("{name}_{n}").to_ascii_lowercase()
}

/// `--roles PREFIX` for a `db init` of the database at `url` when it holds
/// no outbox yet (its own prefix, [`roles_prefix_for`]); nothing for one
/// that holds one (it keeps the prefix it recorded) or that cannot be
/// reached (the test is about that).
pub fn roles_args_for(url: &str) -> Vec<String> {
    let fresh = postgres::Client::connect(url, postgres::NoTls)
        .and_then(|mut client| client.query_one("SELECT to_regclass('meta') IS NULL", &[]))
        .map(|row| row.get::<_, bool>(0))
        .unwrap_or(false);
    if fresh {
        vec!["--roles".to_string(), roles_prefix_for(url)]
    } else {
        Vec::new()
    }
}

/// `recon db init --database URL --roles PREFIX` for a fresh database at
/// `url`, its roles' prefix its own ([`roles_prefix_for`]): the
/// arguments, for the benches' runs of the binary.
pub fn db_init_args(url: &str) -> Vec<String> {
    [
        "db",
        "init",
        "--database",
        url,
        "--roles",
        &roles_prefix_for(url),
    ]
    .map(String::from)
    .to_vec()
}
