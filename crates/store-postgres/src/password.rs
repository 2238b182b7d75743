//! Where the password comes from when the target gives none: libpq's sources.
//!
//! A target without a password (or with an empty one) takes `PGPASSWORD`, else a line of
//! the password file: `passfile=` in the target, else `PGPASSFILE`, else `~/.pgpass`.
//! Each line of the file is `hostname:port:database:username:password`; a field that is
//! `*` matches anything, `\:` and `\\` stand for `:` and `\`, and lines starting with `#`
//! are comments. The first line matching the connection's host, port, database (the
//! user's name when the target names none) and user gives the password. The host is the
//! target's host name (else its `hostaddr`); a unix socket is matched by its folder, or
//! as `localhost` when that is a usual default one (`/run/postgresql`,
//! `/var/run/postgresql`, `/tmp`), as libpq does for its own default.
//!
//! The one thing to know: a password file that its group or others may use in any way is
//! passed over with a warning, as libpq does (a password anyone can read is no secret),
//! and a sign-in that then lacks a password says so. The driver sends one password to
//! whichever of the target's hosts answers, so a file that gives the hosts different
//! passwords is refused.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio_postgres::config::Host;

/// The process's variables as the lookup reads them (`PGPASSWORD`, `PGPASSFILE`,
/// `HOME`); tests hand in their own.
pub(crate) type Variables<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// Socket folders a libpq build may have as its default, where a line for `localhost`
/// applies.
const DEFAULT_SOCKET_DIRS: [&str; 3] = ["/run/postgresql", "/var/run/postgresql", "/tmp"];

/// The port the driver dials when the target names none.
const DEFAULT_PORT: u16 = 5432;

/// A password found for a target, and what a failed sign-in should say about it.
#[derive(Default)]
pub(crate) struct Found {
    pub(crate) password: Option<Vec<u8>>,
    /// Where the password came from (`PGPASSWORD`, a file), when not from the target.
    pub(crate) source: Option<String>,
    /// Why a password file was passed over, for a sign-in that then lacked a password.
    pub(crate) passed_over: Option<String>,
}

impl std::fmt::Debug for Found {
    /// Without the password itself.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Found")
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("source", &self.source)
            .field("passed_over", &self.passed_over)
            .finish()
    }
}

/// The password for `config` when it has none: `PGPASSWORD`, else the password file
/// (`passfile` from the target, else `PGPASSFILE`, else `~/.pgpass`).
pub(crate) fn find(
    config: &tokio_postgres::Config,
    passfile: Option<&Path>,
    variables: Variables<'_>,
) -> Result<Found, String> {
    if config.get_password().is_some_and(|password| !password.is_empty()) {
        return Ok(Found::default());
    }
    if let Some(password) = variables("PGPASSWORD").filter(|password| !password.is_empty()) {
        return Ok(Found {
            password: Some(password.into_encoded_bytes()),
            source: Some("PGPASSWORD".to_string()),
            passed_over: None,
        });
    }
    let named = passfile
        .filter(|path| !path.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| variables("PGPASSFILE").filter(|path| !path.is_empty()).map(PathBuf::from));
    let explicit = named.is_some();
    let Some(file) = named.or_else(|| variables("HOME").map(|home| PathBuf::from(home).join(".pgpass"))) else {
        return Ok(Found::default());
    };
    let text = match readable(&file, explicit) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(Found::default()),
        Err(passed_over) => {
            tracing::warn!("{passed_over}");
            return Ok(Found { passed_over: Some(passed_over), ..Found::default() });
        }
    };
    let mut passwords: Vec<Vec<u8>> = Vec::new();
    for wanted in wanted(config) {
        if let Some(password) = lines(&text).find(|line| line.matches(&wanted)).map(|line| line.password)
            && !password.is_empty()
            && !passwords.contains(&password)
        {
            passwords.push(password);
        }
    }
    if passwords.len() > 1 {
        return Err(format!(
            "the password file {} gives the target's hosts different passwords, and one password is sent to \
             whichever host answers: give the password in the target, or one target per host",
            file.display()
        ));
    }
    Ok(Found {
        source: passwords.first().map(|_| format!("the password file {}", file.display())),
        password: passwords.pop(),
        passed_over: None,
    })
}

/// The file's bytes; `None` when there is none to read; an error saying why a file that
/// is there is passed over.
fn readable(file: &Path, explicit: bool) -> Result<Option<Vec<u8>>, String> {
    let shown = file.display();
    let metadata = match std::fs::metadata(file) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && explicit => {
            return Err(format!("the password file {shown} does not exist"));
        }
        Err(_) => return Ok(None),
    };
    if !metadata.is_file() {
        return Err(format!("the password file {shown} is not a plain file, so it is ignored"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "the password file {shown} is open to its group or others, so it is ignored (as libpq does); \
                 `chmod 600 {shown}` makes it the owner's alone"
            ));
        }
    }
    Ok(std::fs::read(file).ok())
}

/// What a line must match for one host of the target.
#[derive(Debug, PartialEq, Eq)]
struct Wanted {
    host: Vec<u8>,
    port: Vec<u8>,
    database: Vec<u8>,
    user: Vec<u8>,
}

/// One [`Wanted`] per host of `config` (one for `localhost` when it names none).
fn wanted(config: &tokio_postgres::Config) -> Vec<Wanted> {
    let Some(user) = config.get_user().map(str::to_string).or_else(|| whoami::username().ok()) else {
        return Vec::new();
    };
    let database = config.get_dbname().unwrap_or(&user).as_bytes().to_vec();
    let mut hosts: Vec<Vec<u8>> = config.get_hosts().iter().map(host_as_matched).collect();
    if hosts.is_empty() {
        hosts = config.get_hostaddrs().iter().map(|address| address.to_string().into_bytes()).collect();
    }
    if hosts.is_empty() {
        hosts.push(b"localhost".to_vec());
    }
    let ports = config.get_ports();
    hosts
        .into_iter()
        .enumerate()
        .map(|(index, host)| {
            let port = match ports {
                [one] => *one,
                _ => ports.get(index).copied().unwrap_or(DEFAULT_PORT),
            };
            Wanted {
                host,
                port: port.to_string().into_bytes(),
                database: database.clone(),
                user: user.as_bytes().to_vec(),
            }
        })
        .collect()
}

fn host_as_matched(host: &Host) -> Vec<u8> {
    match host {
        Host::Tcp(name) => name.as_bytes().to_vec(),
        #[cfg(unix)]
        Host::Unix(path) => {
            let folder = path.as_os_str().as_encoded_bytes();
            let folder = folder.strip_suffix(b"/").filter(|folder| !folder.is_empty()).unwrap_or(folder);
            if DEFAULT_SOCKET_DIRS.iter().any(|default| default.as_bytes() == folder) {
                b"localhost".to_vec()
            } else {
                folder.to_vec()
            }
        }
    }
}

/// A field of the first four: `*` alone matches anything.
#[derive(Debug, PartialEq, Eq)]
enum Pattern {
    Any,
    Exactly(Vec<u8>),
}

impl Pattern {
    fn matches(&self, value: &[u8]) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exactly(text) => text == value,
        }
    }
}

/// One line of a password file.
#[derive(Debug, PartialEq, Eq)]
struct Line {
    host: Pattern,
    port: Pattern,
    database: Pattern,
    user: Pattern,
    password: Vec<u8>,
}

impl Line {
    fn matches(&self, wanted: &Wanted) -> bool {
        self.host.matches(&wanted.host)
            && self.port.matches(&wanted.port)
            && self.database.matches(&wanted.database)
            && self.user.matches(&wanted.user)
    }
}

/// The lines of a password file that have all five fields; comments and blank lines are
/// skipped, and anything after the password is ignored.
fn lines(text: &[u8]) -> impl Iterator<Item = Line> + '_ {
    text.split(|byte| *byte == b'\n').filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.starts_with(b"#") {
            return None;
        }
        let mut fields = fields(line).into_iter();
        let mut pattern =
            || fields.next().map(|(raw, text)| if raw == b"*" { Pattern::Any } else { Pattern::Exactly(text) });
        let (host, port, database, user) = (pattern()?, pattern()?, pattern()?, pattern()?);
        let password = fields.next()?.1;
        Some(Line { host, port, database, user, password })
    })
}

/// A line's `:`-separated fields, each as written and with its escapes undone.
fn fields(line: &[u8]) -> Vec<(&[u8], Vec<u8>)> {
    let mut fields = Vec::new();
    let (mut start, mut text, mut index) = (0, Vec::new(), 0);
    while index < line.len() {
        match line[index] {
            b'\\' if index + 1 < line.len() => {
                text.push(line[index + 1]);
                index += 2;
                continue;
            }
            b':' => {
                fields.push((&line[start..index], std::mem::take(&mut text)));
                start = index + 1;
            }
            byte => text.push(byte),
        }
        index += 1;
    }
    fields.push((&line[start..], text));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exactly(text: &str) -> Pattern {
        Pattern::Exactly(text.as_bytes().to_vec())
    }

    #[test]
    fn lines_read_as_libpq_reads_them() {
        let text = b"# a comment\n\
                     \n\
                     db.example:5432:archmax:app:s3cret\r\n\
                     *:*:*:*:any\n\
                     h\\:6:5432:d\\\\b:u:pa\\:ss\\\\word:ignored\n\
                     \\*:1:d:u:star\n\
                     too:few:fields:here\n";
        let read: Vec<Line> = lines(text).collect();
        assert_eq!(
            read,
            [
                Line {
                    host: exactly("db.example"),
                    port: exactly("5432"),
                    database: exactly("archmax"),
                    user: exactly("app"),
                    password: b"s3cret".to_vec(),
                },
                Line {
                    host: Pattern::Any,
                    port: Pattern::Any,
                    database: Pattern::Any,
                    user: Pattern::Any,
                    password: b"any".to_vec()
                },
                Line {
                    host: exactly("h:6"),
                    port: exactly("5432"),
                    database: exactly("d\\b"),
                    user: exactly("u"),
                    password: b"pa:ss\\word".to_vec(),
                },
                // An escaped star is a star, not a wildcard.
                Line {
                    host: exactly("*"),
                    port: exactly("1"),
                    database: exactly("d"),
                    user: exactly("u"),
                    password: b"star".to_vec()
                },
            ]
        );
    }

    /// Looks `target` up with `variables` given as pairs.
    fn found(target: &str, passfile: Option<&Path>, variables: &[(&str, &str)]) -> Result<Found, String> {
        let config: tokio_postgres::Config = target.parse().expect("a target");
        let lookup =
            |name: &str| variables.iter().find(|(key, _)| *key == name).map(|(_, value)| OsString::from(value));
        find(&config, passfile, &lookup)
    }

    struct Folder(PathBuf);

    impl Folder {
        fn new(label: &str) -> Folder {
            let dir = std::env::temp_dir().join(format!("archmax-pgpass-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a folder");
            Folder(dir)
        }

        /// Writes `name` with permissions `mode`.
        fn write(&self, name: &str, text: &str, mode: u32) -> PathBuf {
            use std::os::unix::fs::PermissionsExt;
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_first_matching_line_gives_the_password_for_the_targets_host_port_database_and_user() {
        let folder = Folder::new("match");
        let file = folder.write(
            "pgpass",
            "db.example:5433:archmax:app:wrong-port\n\
             db.example:*:other:app:wrong-database\n\
             db.example:*:archmax:app:right\n\
             db.example:*:archmax:app:too-late\n\
             localhost:5432:app:app:the-users-database\n\
             /srv/pg:5432:app:app:by-socket-folder\n\
             *:*:*:*:any\n",
            0o600,
        );
        let password = |target: &str| found(target, Some(&file), &[]).expect("found").password;
        assert_eq!(password("host=db.example port=5432 dbname=archmax user=app"), Some(b"right".to_vec()));
        assert_eq!(password("postgres://app@db.example/archmax"), Some(b"right".to_vec()));
        // No database named: the user's name stands for it. A default socket folder is
        // `localhost`; any other is matched by its path.
        assert_eq!(password("host=/run/postgresql user=app"), Some(b"the-users-database".to_vec()));
        assert_eq!(password("host=/srv/pg/ user=app"), Some(b"by-socket-folder".to_vec()));
        assert_eq!(password("host=elsewhere user=app dbname=x"), Some(b"any".to_vec()));
        // The target's own password wins, and PGPASSWORD comes before any file.
        assert_eq!(password("host=db.example user=app password=given"), None);
        let from_variable =
            found("host=db.example user=app", Some(&file), &[("PGPASSWORD", "from-env")]).expect("found");
        assert_eq!(from_variable.password, Some(b"from-env".to_vec()));
        assert_eq!(from_variable.source.as_deref(), Some("PGPASSWORD"));
    }

    #[test]
    fn the_file_is_the_targets_else_pgpassfile_else_the_homes() {
        let folder = Folder::new("which");
        let named = folder.write("named", "*:*:*:*:named\n", 0o600);
        let variable = folder.write("variable", "*:*:*:*:variable\n", 0o600);
        folder.write(".pgpass", "*:*:*:*:home\n", 0o600);
        let home = folder.0.display().to_string();
        let variable = variable.display().to_string();
        let password = |passfile: Option<&Path>, variables: &[(&str, &str)]| {
            found("host=h user=u", passfile, variables).expect("found").password
        };
        assert_eq!(password(Some(&named), &[("PGPASSFILE", &variable), ("HOME", &home)]), Some(b"named".to_vec()));
        assert_eq!(password(None, &[("PGPASSFILE", &variable), ("HOME", &home)]), Some(b"variable".to_vec()));
        assert_eq!(password(None, &[("HOME", &home)]), Some(b"home".to_vec()));
        assert_eq!(password(None, &[]), None);
    }

    #[test]
    fn a_file_others_may_read_is_passed_over_and_hosts_may_not_disagree() {
        let folder = Folder::new("passed-over");
        let open = folder.write("open", "*:*:*:*:exposed\n", 0o644);
        let passed = found("host=h user=u", Some(&open), &[]).expect("found");
        assert_eq!(passed.password, None);
        assert!(passed.passed_over.as_deref().is_some_and(|why| why.contains("chmod 600")), "{passed:?}");
        let missing = found("host=h user=u", Some(&folder.0.join("nowhere")), &[]).expect("found");
        assert!(missing.passed_over.as_deref().is_some_and(|why| why.contains("does not exist")), "{missing:?}");

        let two = folder.write("two", "a:*:*:*:one\nb:*:*:*:other\n", 0o600);
        let refused = found("host=a,b user=u", Some(&two), &[]).expect_err("two passwords");
        assert!(refused.contains("different passwords"), "{refused}");
        let same = folder.write("same", "a:*:*:*:one\nb:*:*:*:one\n", 0o600);
        assert_eq!(found("host=a,b user=u", Some(&same), &[]).expect("one").password, Some(b"one".to_vec()));
    }
}
