//! A throwaway PostgreSQL server for tests (this crate's and the CLI's).
//!
//! [`TestCluster::start`] uses the server named by `ARCHMAX_TEST_DATABASE_URL` when it
//! is set (the role must be allowed to create databases); otherwise it runs `initdb`
//! into a fresh temporary folder and starts a server there that listens only on a unix
//! socket in that folder, as the `postgres` user when the tests run as root (the server
//! refuses to run as root). Dropping the cluster stops the server and removes the folder.
//! [`TestCluster::database`] makes a fresh, empty database per use, so every test sees
//! its own tables and migrations run from nothing. [`TestCluster::start_tls`] starts one
//! that also listens on `127.0.0.1` with `ssl=on` and the certificates it is handed, and
//! refuses every TCP connection that is not TLS (`hostnossl … reject`);
//! [`TestCluster::start_tcp`] one that listens on `127.0.0.1` without TLS. On a server of
//! its own, [`TestCluster::role`] makes login roles: trusted, or signing in with a
//! password (`scram-sha-256`) as members of [`PASSWORD_GROUP`].
//! [`TestCluster::pooler`] puts the distribution's PgBouncer in front of a throwaway
//! server, in transaction mode with a small server pool, as a fleet behind a pooler runs.
//!
//! The one thing to know: without PostgreSQL this is an error that says how to get it,
//! and the tests that need it fail; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Names a server the tests may use instead of starting their own.
pub const DATABASE_URL_VARIABLE: &str = "ARCHMAX_TEST_DATABASE_URL";

const HOW_TO_GET_IT: &str = "install the PostgreSQL server (`apt-get install postgresql`, which puts initdb and \
     pg_ctl in /usr/lib/postgresql/<version>/bin; `.ci/run` does this when they are missing), put its bin folder \
     on PATH, or set ARCHMAX_TEST_DATABASE_URL to a server whose role may create databases";

/// The group whose members sign in with their password on a server this process
/// started (its `pg_hba.conf` asks them for it, over the socket and TCP alike); every
/// other role is trusted.
pub const PASSWORD_GROUP: &str = "archmax_password_login";

/// A running server the tests own, or one named by [`DATABASE_URL_VARIABLE`].
pub struct TestCluster {
    /// How to reach the server's default database (key=value options for a throwaway
    /// server, or `ARCHMAX_TEST_DATABASE_URL` as given).
    base: String,
    /// The databases [`TestCluster::database`] made.
    created: Mutex<Vec<String>>,
    /// The data folder of a server this process started.
    owned: Option<Owned>,
}

struct Owned {
    dir: PathBuf,
    pg_ctl: PathBuf,
    user: Option<String>,
    /// The port of the server's socket (and of its TCP listener, when it has one).
    port: u16,
    /// The TCP port of a server that listens on `127.0.0.1`.
    tcp_port: Option<u16>,
}

/// Where a server this process starts listens besides its unix socket.
enum Listen<'a> {
    SocketOnly,
    /// `127.0.0.1`, without TLS.
    Tcp,
    /// `127.0.0.1`, with TLS only.
    Tls(&'a TlsFiles<'a>),
}

/// What a TLS test server is given, as PEM text.
pub struct TlsFiles<'a> {
    /// The server's certificate chain and its private key.
    pub server_cert: &'a str,
    pub server_key: &'a str,
    /// The roots client certificates must lead to.
    pub client_ca: &'a str,
    /// The role that signs in by client certificate alone (`cert` in `pg_hba.conf`); it
    /// is created as a superuser, and its certificate's common name must be this name.
    pub cert_user: &'a str,
}

impl TestCluster {
    /// Starts a throwaway server (or uses `ARCHMAX_TEST_DATABASE_URL`).
    pub fn start() -> Result<TestCluster, String> {
        TestCluster::start_with(true)
    }

    /// Like [`TestCluster::start`]; with `fsync` false the throwaway server never waits for
    /// the disk, which benches use to tell the store's own cost from the disk's. Not
    /// durable: for measurements only.
    pub fn start_with(fsync: bool) -> Result<TestCluster, String> {
        if let Ok(url) = std::env::var(DATABASE_URL_VARIABLE)
            && !url.trim().is_empty()
        {
            return Ok(TestCluster { base: url, created: Mutex::new(Vec::new()), owned: None });
        }
        TestCluster::start_owned(fsync, Listen::SocketOnly)
    }

    /// A throwaway server that also takes TLS connections on `127.0.0.1` (its port is
    /// [`TestCluster::tcp_port`]) and no other TCP connections. Always a server of its
    /// own: `ARCHMAX_TEST_DATABASE_URL` is not used, because the test needs to know the
    /// server's certificates.
    pub fn start_tls(files: &TlsFiles<'_>) -> Result<TestCluster, String> {
        let cluster = TestCluster::start_owned(true, Listen::Tls(files))?;
        cluster.execute(&format!("CREATE ROLE \"{}\" LOGIN SUPERUSER", files.cert_user))?;
        Ok(cluster)
    }

    /// A throwaway server that also takes plain TCP connections on `127.0.0.1` (its port
    /// is [`TestCluster::tcp_port`]) and offers no TLS. Always a server of its own.
    pub fn start_tcp() -> Result<TestCluster, String> {
        TestCluster::start_owned(true, Listen::Tcp)
    }

    /// The TCP port of a server started by [`TestCluster::start_tls`] or
    /// [`TestCluster::start_tcp`].
    pub fn tcp_port(&self) -> Option<u16> {
        self.owned.as_ref().and_then(|owned| owned.tcp_port)
    }

    fn start_owned(fsync: bool, listen: Listen<'_>) -> Result<TestCluster, String> {
        let bin = server_bin().ok_or_else(|| format!("PostgreSQL's initdb was not found; {HOW_TO_GET_IT}"))?;
        let user = running_as_root().then(|| "postgres".to_string());
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "archmax-pg-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        let tcp_port = match listen {
            Listen::SocketOnly => None,
            Listen::Tcp | Listen::Tls(_) => Some(free_port()?),
        };
        let port = tcp_port.unwrap_or(5432);
        let owned = Owned { dir: dir.clone(), pg_ctl: bin.join("pg_ctl"), user: user.clone(), port, tcp_port };
        if let Some(user) = &user {
            hand_over(&dir, user)?;
        }
        let data = dir.join("data");
        run(
            user.as_deref(),
            Command::new(bin.join("initdb"))
                .args(["--auth=trust", "--encoding=UTF8", "--no-instructions", "-U", "postgres", "-D"])
                .arg(&data),
            "initdb",
        )?;
        let mut settings = format!(
            "-c unix_socket_directories='{}' -c port={port} -c max_connections=400 -c fsync={} \
             -c synchronous_commit=on",
            dir.display(),
            if fsync { "on" } else { "off" }
        );
        match listen {
            Listen::Tls(files) => settings.push_str(&serve_tls(&dir, &data, files, user.as_deref())?),
            Listen::Tcp => {
                write_rules(&data, &password_rules())?;
                settings.push_str(" -c listen_addresses='127.0.0.1'");
            }
            Listen::SocketOnly => {
                write_rules(&data, &password_rules())?;
                settings.push_str(" -c listen_addresses=''");
            }
        }
        run(
            user.as_deref(),
            Command::new(&owned.pg_ctl)
                .args(["-w", "-t", "60", "-D"])
                .arg(&data)
                .args(["-l"])
                .arg(dir.join("server.log"))
                .args(["-o", &settings, "start"]),
            "pg_ctl start",
        )?;
        let base = format!("host={} port={port} user=postgres", dir.display());
        Ok(TestCluster { base, created: Mutex::new(Vec::new()), owned: Some(owned) })
    }

    /// Like [`TestCluster::start`], failing the test with the reason and how to fix it.
    #[track_caller]
    pub fn require() -> TestCluster {
        match TestCluster::start() {
            Ok(cluster) => cluster,
            Err(message) => panic!("these tests need PostgreSQL: {message}"),
        }
    }

    /// Creates a fresh database and returns its connection string (key=value form for a
    /// throwaway server: `host=/tmp/… port=5432 user=postgres dbname=…`).
    pub fn database(&self, label: &str) -> Result<String, String> {
        let name = self.database_named(label)?;
        Ok(self.target_of(&name))
    }

    /// How to reach database `name` of this server directly.
    pub fn target_of(&self, name: &str) -> String {
        match &self.owned {
            Some(_) => format!("{} dbname={name}", self.base),
            None => with_dbname(&self.base, name),
        }
    }

    /// How `role` reaches database `name` of a server this process started, through its
    /// socket.
    pub fn target_as(&self, name: &str, role: &str) -> Result<String, String> {
        let owned = self.owned.as_ref().ok_or("roles are made only on a server this process started")?;
        Ok(format!("host={} port={} user={role} dbname={name}", owned.dir.display(), owned.port))
    }

    /// Creates a login role on a server this process started and returns its name: with
    /// `password`, a member of [`PASSWORD_GROUP`], which must give it to sign in; without,
    /// trusted. Either may do only what is granted to `PUBLIC` until more is granted.
    pub fn role(&self, label: &str, password: Option<&str>) -> Result<String, String> {
        if self.owned.is_none() {
            return Err("roles are made only on a server this process started (TestCluster::start_own)".to_string());
        }
        let name = fresh_name(label);
        match password {
            None => self.execute(&format!("CREATE ROLE {name} LOGIN"))?,
            Some(password) => self.execute(&format!(
                "DO $$ BEGIN CREATE ROLE {PASSWORD_GROUP} NOLOGIN; \
                 EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
                 CREATE ROLE {name} LOGIN PASSWORD '{}' IN ROLE {PASSWORD_GROUP}",
                password.replace('\'', "''")
            ))?,
        }
        Ok(name)
    }

    /// Creates a fresh database and returns its name (for [`TestCluster::pooler`]).
    pub fn database_named(&self, label: &str) -> Result<String, String> {
        let name = fresh_name(label);
        self.execute(&format!("CREATE DATABASE {name}"))?;
        self.created.lock().unwrap_or_else(PoisonError::into_inner).push(name.clone());
        Ok(name)
    }

    /// Runs one statement on the server's default database.
    fn execute(&self, sql: &str) -> Result<(), String> {
        let base = self.base.clone();
        let executor = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("no executor: {error}"))?;
        executor.block_on(async {
            let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
                .await
                .map_err(|error| format!("cannot reach the test server ({base}): {error}"))?;
            let connection = tokio::spawn(connection);
            client.batch_execute(sql).await.map_err(|error| format!("{sql}: {}", crate::describe(&error)))?;
            drop(client);
            let _ = connection.await;
            Ok(())
        })
    }

    /// The process id of the postmaster of a server this process started (its
    /// `postmaster.pid`), the parent of every backend: for measuring the server's CPU.
    pub fn server_pid(&self) -> Option<u32> {
        let owned = self.owned.as_ref()?;
        let text = std::fs::read_to_string(owned.dir.join("data").join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// The socket folder of a server this process started.
    pub fn socket_dir(&self) -> Option<&Path> {
        self.owned.as_ref().map(|owned| owned.dir.as_path())
    }

    /// A throwaway server of this process's own, even when `ARCHMAX_TEST_DATABASE_URL` is
    /// set (for tests that put something between the store and the server).
    pub fn start_own() -> Result<TestCluster, String> {
        TestCluster::start_owned(true, Listen::SocketOnly)
    }

    /// Starts PgBouncer (`pgbouncer` on PATH or in /usr/sbin) in front of this server's
    /// database `dbname`: transaction pooling, at most `server_connections` connections
    /// to the server, listening on a free port of `127.0.0.1`. Only for a server this
    /// process started ([`TestCluster::start_own`]).
    pub fn pooler(&self, dbname: &str, server_connections: usize) -> Result<Pooler, String> {
        let owned = self.owned.as_ref().ok_or("a pooler is put only in front of a server this process started")?;
        let binary = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
            .iter()
            .map(|dir| Path::new(dir).join("pgbouncer"))
            .chain(std::env::var_os("PATH").iter().flat_map(std::env::split_paths).map(|dir| dir.join("pgbouncer")))
            .find(|path| path.is_file())
            .ok_or("PgBouncer was not found; install it (`apt-get install pgbouncer`; `.ci/run` does this)")?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = owned.dir.join(format!("pooler-{}", COUNTER.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        let port = free_port()?;
        let users = dir.join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").map_err(|error| format!("cannot write the users: {error}"))?;
        let ini = dir.join("pgbouncer.ini");
        let config = format!(
            "[databases]\n\
             {dbname} = host={socket} port=5432 dbname={dbname} user=postgres\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {users}\n\
             pool_mode = transaction\n\
             default_pool_size = {server_connections}\n\
             max_client_conn = 1000\n\
             server_reset_query =\n\
             logfile = {log}\n\
             pidfile = {pid}\n",
            socket = owned.dir.display(),
            users = users.display(),
            log = dir.join("pgbouncer.log").display(),
            pid = dir.join("pgbouncer.pid").display(),
        );
        std::fs::write(&ini, config).map_err(|error| format!("cannot write {}: {error}", ini.display()))?;
        if let Some(user) = &owned.user {
            for path in [&dir, &users, &ini] {
                hand_over(path, user)?;
            }
        }
        run(owned.user.as_deref(), Command::new(&binary).arg("-d").arg(&ini), "pgbouncer")?;
        let pooler = Pooler { pid_file: dir.join("pgbouncer.pid"), port, dbname: dbname.to_string() };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(pooler);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default();
        Err(format!("PgBouncer did not start listening on port {port}: {log}"))
    }
}

/// A PgBouncer in front of a test server; dropping it stops it.
pub struct Pooler {
    pid_file: PathBuf,
    port: u16,
    dbname: String,
}

impl Pooler {
    /// How the store reaches the database through the pooler.
    pub fn target(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname={} sslmode=disable", self.port, self.dbname)
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).output();
        }
    }
}

/// A name no other database or role of this process has: `archmax_<label>_<pid>_<n>`,
/// the label's letters and digits only.
fn fresh_name(label: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "archmax_{}_{}_{}",
        label.chars().filter(char::is_ascii_alphanumeric).collect::<String>(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `target` pointing at database `name`, in whichever form it was written.
fn with_dbname(target: &str, name: &str) -> String {
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        let (before_query, query) = target.split_once('?').map_or((target, None), |(url, query)| (url, Some(query)));
        let scheme_end = before_query.find("://").map_or(0, |at| at + 3);
        let authority_end = before_query[scheme_end..].find('/').map_or(before_query.len(), |at| scheme_end + at);
        let mut url = format!("{}/{name}", &before_query[..authority_end]);
        if let Some(query) = query {
            url.push('?');
            url.push_str(query);
        }
        url
    } else {
        format!("{target} dbname={name}")
    }
}

impl Drop for TestCluster {
    /// Stops a server this process started (its folder goes with it); on a server named
    /// by `ARCHMAX_TEST_DATABASE_URL`, drops the databases made here instead.
    fn drop(&mut self) {
        if self.owned.is_none() {
            let created = std::mem::take(&mut *self.created.lock().unwrap_or_else(PoisonError::into_inner));
            for name in created {
                let _ = self.execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        }
        if let Some(owned) = &self.owned {
            let _ = run(
                owned.user.as_deref(),
                Command::new(&owned.pg_ctl).args(["-m", "immediate", "-D"]).arg(owned.dir.join("data")).arg("stop"),
                "pg_ctl stop",
            );
            let _ = std::fs::remove_dir_all(&owned.dir);
        }
    }
}

/// The folder holding `initdb` and `pg_ctl`: on PATH, or the newest
/// `/usr/lib/postgresql/<version>/bin`.
fn server_bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return Some(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// A TCP port nobody listens on now (the server takes it a moment later).
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|error| format!("no free port: {error}"))?;
    listener.local_addr().map(|address| address.port()).map_err(|error| format!("no free port: {error}"))
}

/// Writes the server's TLS files into `dir` and its client rules into `data`; the
/// server settings that use them.
fn serve_tls(dir: &Path, data: &Path, files: &TlsFiles<'_>, user: Option<&str>) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let write = |name: &str, text: &str| -> Result<PathBuf, String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|error| format!("cannot restrict {}: {error}", path.display()))?;
        if let Some(user) = user {
            hand_over(&path, user)?;
        }
        Ok(path)
    };
    let cert = write("server.crt", files.server_cert)?;
    let key = write("server.key", files.server_key)?;
    let ca = write("client-ca.crt", files.client_ca)?;
    let rules = format!(
        "local all all trust\n\
         hostssl all postgres 127.0.0.1/32 trust\n\
         hostssl all {cert_user} 127.0.0.1/32 cert\n\
         hostnossl all all 0.0.0.0/0 reject\n",
        cert_user = files.cert_user
    );
    write_rules(data, &rules)?;
    Ok(format!(
        " -c listen_addresses='127.0.0.1' -c ssl=on -c ssl_cert_file='{}' -c ssl_key_file='{}' -c ssl_ca_file='{}'",
        cert.display(),
        key.display(),
        ca.display()
    ))
}

/// The client rules of a server without TLS: members of [`PASSWORD_GROUP`] give their
/// password, everyone else is trusted.
fn password_rules() -> String {
    format!(
        "local all +{PASSWORD_GROUP} scram-sha-256\n\
         local all all trust\n\
         host all +{PASSWORD_GROUP} 127.0.0.1/32 scram-sha-256\n\
         host all all 127.0.0.1/32 trust\n"
    )
}

/// Writes the server's `pg_hba.conf`.
fn write_rules(data: &Path, rules: &str) -> Result<(), String> {
    let hba = data.join("pg_hba.conf");
    std::fs::write(&hba, rules).map_err(|error| format!("cannot write {}: {error}", hba.display()))
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Gives `dir` to `user`, who runs the server.
fn hand_over(dir: &Path, user: &str) -> Result<(), String> {
    let output =
        Command::new("chown").arg(user).arg(dir).output().map_err(|error| format!("cannot run chown: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cannot give {} to the `{user}` user ({}); {HOW_TO_GET_IT}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Runs a server command, as `user` when set (through `runuser`).
fn run(user: Option<&str>, command: &mut Command, what: &str) -> Result<(), String> {
    let mut command = match user {
        Some(user) => {
            let mut wrapped = Command::new("runuser");
            wrapped.args(["-u", user, "--"]).arg(command.get_program()).args(command.get_args());
            wrapped
        }
        None => std::mem::replace(command, Command::new("true")),
    };
    let output = command.output().map_err(|error| format!("cannot run {what}: {error}; {HOW_TO_GET_IT}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&output.stderr).trim(),
            String::from_utf8_lossy(&output.stdout).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::with_dbname;

    #[test]
    fn a_database_name_replaces_the_one_in_either_form() {
        assert_eq!(with_dbname("postgres://u@h:5/db?sslmode=disable", "x"), "postgres://u@h:5/x?sslmode=disable");
        assert_eq!(with_dbname("postgresql://u@h", "x"), "postgresql://u@h/x");
        assert_eq!(with_dbname("host=/run/postgresql user=u", "x"), "host=/run/postgresql user=u dbname=x");
    }
}
