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
//! and a sign-in that then lacks a password says so; so are anything but a plain file and
//! a file over [`MOST_BYTES`]. The file is opened once, without waiting (a FIFO put in
//! its place opens at once instead of holding the start up until something writes to
//! it), and every check is made on the opened file, so what is checked is what is read.
//!
//! The driver holds one password for all of a target's hosts and sends it to whichever
//! answers, where libpq looks one up per host. A file that gives the hosts different
//! passwords, or gives some a password and others none, is refused rather than let one
//! host's password reach another.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
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

/// The largest password file read (1 MiB): a bigger one is passed over. libpq sets no
/// bound; without one a file that keeps growing would be read until memory runs out.
const MOST_BYTES: u64 = 1 << 20;

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
    let per_host: Vec<(Wanted, Option<Vec<u8>>)> = wanted(config)
        .into_iter()
        .map(|wanted| {
            let password = lines(&text).find(|line| line.matches(&wanted)).map(|line| line.password);
            (wanted, password.filter(|password| !password.is_empty()))
        })
        .collect();
    // Hosts that disagree get no password from the file, rather than a refused start: a
    // server that asks for none (trust, peer, certificates) is still reached, and one that
    // asks is answered with why the file gave none (`passed_over`, in the sign-in error).
    match one_for_every_host(&per_host) {
        Ok(password) => Ok(Found {
            source: password.as_ref().map(|_| format!("the password file {}", file.display())),
            password,
            passed_over: None,
        }),
        Err(disagreement) => {
            let passed_over = format!(
                "the password file {} {disagreement}, and the driver sends one password to whichever of the \
                 target's hosts answers, so it gave none (one host could have been sent another's password): give \
                 every host the same password in the file, give the password in the target (it then goes to every \
                 host, as libpq does), or use one target per host",
                file.display()
            );
            tracing::warn!("{passed_over}");
            Ok(Found { passed_over: Some(passed_over), ..Found::default() })
        }
    }
}

/// The one password the file gives every host of the target (`None` when it gives none
/// of them one); else what differs, naming two hosts that disagree.
fn one_for_every_host(per_host: &[(Wanted, Option<Vec<u8>>)]) -> Result<Option<Vec<u8>>, String> {
    let Some((first, password)) = per_host.first() else { return Ok(None) };
    match per_host.iter().find(|(_, other)| other != password) {
        None => Ok(password.clone()),
        Some((other, other_password)) => {
            let (with, without) = match (password, other_password) {
                (Some(_), None) => (first, other),
                (None, Some(_)) => (other, first),
                _ => {
                    return Err(format!(
                        "gives the hosts {} and {} different passwords",
                        first.shown_host(),
                        other.shown_host()
                    ));
                }
            };
            Err(format!("gives the host {} a password and the host {} none", with.shown_host(), without.shown_host()))
        }
    }
}

/// The file's bytes; `None` when there is none to read; an error saying why a file that
/// is there is passed over.
fn readable(file: &Path, explicit: bool) -> Result<Option<Vec<u8>>, String> {
    let shown = file.display();
    let opened = match open_without_waiting(file) {
        Ok(opened) => opened,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && explicit => {
            return Err(format!("the password file {shown} does not exist"));
        }
        Err(_) => return Ok(None),
    };
    // The opened file's own metadata (fstat): the path may name another file by now.
    let Ok(metadata) = opened.metadata() else { return Ok(None) };
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
    // One byte past the bound tells a file over it from one exactly at it, whatever size
    // the file claims or grows to while it is read.
    let mut text = Vec::new();
    if opened.take(MOST_BYTES + 1).read_to_end(&mut text).is_err() {
        return Ok(None);
    }
    if text.len() as u64 > MOST_BYTES {
        return Err(format!(
            "the password file {shown} is larger than {} MiB ({MOST_BYTES} bytes), so it is ignored",
            MOST_BYTES >> 20
        ));
    }
    Ok(Some(text))
}

/// Opens `file` for reading without waiting for anything: opening a FIFO for reading
/// otherwise waits until something opens it for writing. Reading a plain file is the same
/// either way, and nothing else is read ([`readable`] checks first). No terminal the path
/// might name becomes the process's.
#[cfg(unix)]
fn open_without_waiting(file: &Path) -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::open(file, flags, Mode::empty())?))
}

#[cfg(not(unix))]
fn open_without_waiting(file: &Path) -> std::io::Result<File> {
    File::open(file)
}

/// What a line must match for one host of the target.
#[derive(Debug, PartialEq, Eq)]
struct Wanted {
    host: Vec<u8>,
    port: Vec<u8>,
    database: Vec<u8>,
    user: Vec<u8>,
}

impl Wanted {
    /// `host:port`, for a message.
    fn shown_host(&self) -> String {
        format!("`{}:{}`", String::from_utf8_lossy(&self.host), String::from_utf8_lossy(&self.port))
    }
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
    fn a_file_others_may_read_or_that_is_missing_is_passed_over_with_the_reason() {
        let folder = Folder::new("passed-over");
        let open = folder.write("open", "*:*:*:*:exposed\n", 0o644);
        let passed = found("host=h user=u", Some(&open), &[]).expect("found");
        assert_eq!(passed.password, None);
        assert!(passed.passed_over.as_deref().is_some_and(|why| why.contains("chmod 600")), "{passed:?}");
        let missing = found("host=h user=u", Some(&folder.0.join("nowhere")), &[]).expect("found");
        assert!(missing.passed_over.as_deref().is_some_and(|why| why.contains("does not exist")), "{missing:?}");
    }

    #[test]
    fn a_multi_host_target_takes_the_file_only_when_it_gives_every_host_the_same_password() {
        let folder = Folder::new("hosts");
        let password = |text: &str, target: &str| {
            let file = folder.write("pgpass", text, 0o600);
            found(target, Some(&file), &[])
        };
        let same = password("a:*:*:*:one\nb:*:*:*:one\n", "host=a,b user=u").expect("one password");
        assert_eq!(same.password, Some(b"one".to_vec()));
        // Each host is looked up with its own port.
        let by_port = password("a:1:*:*:one\nb:2:*:*:one\nb:1:*:*:other\n", "host=a,b port=1,2 user=u");
        assert_eq!(by_port.expect("one password").password, Some(b"one".to_vec()));
        assert_eq!(password("c:*:*:*:one\n", "host=a,b user=u").expect("none").password, None);

        // Hosts that disagree get no password from the file, with why: the start goes on
        // (a server that asks for none is reached) and a refused sign-in says why.
        let passed_over = |text: &str| {
            let found = password(text, "host=a,b user=u").expect("no refusal");
            assert_eq!(found.password, None, "{text:?}");
            found.passed_over.unwrap_or_default()
        };
        let different = passed_over("a:*:*:*:one\nb:*:*:*:other\n");
        assert!(different.contains("gives the hosts `a:5432` and `b:5432` different passwords"), "{different}");
        // A host the file has no line for would be sent the other host's password.
        let why = passed_over("a:*:*:*:pw-of-a\n");
        assert!(why.contains("gives the host `a:5432` a password and the host `b:5432` none"), "{why}");
        assert!(why.contains("give the password in the target"), "{why}");
        assert!(!why.contains("pw-of-a"), "no password in the message: {why}");
        let why = passed_over("b:*:*:*:pw-of-b\n");
        assert!(why.contains("gives the host `b:5432` a password and the host `a:5432` none"), "{why}");
    }

    #[test]
    fn a_fifo_in_the_files_place_is_opened_without_waiting_and_passed_over() {
        use rustix::fs::{FileType, Mode, OFlags};
        let folder = Folder::new("fifo");
        let fifo = folder.0.join("pgpass");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).expect("a FIFO");
        // A writer is held open so that an open that waited for one would return rather
        // than hang this test; the flags then tell whether the open would have waited.
        let _writer = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).expect("a writer");
        let opened = open_without_waiting(&fifo).expect("opens");
        let flags = rustix::fs::fcntl_getfl(&opened).expect("flags");
        assert!(flags.contains(OFlags::NONBLOCK), "opened without waiting for a writer: {flags:?}");
        let passed = found("host=h user=u", Some(&fifo), &[]).expect("found");
        assert_eq!(passed.password, None);
        assert!(passed.passed_over.as_deref().is_some_and(|why| why.contains("not a plain file")), "{passed:?}");
    }

    #[test]
    fn a_file_over_a_mebibyte_is_passed_over_and_one_of_exactly_that_is_read() {
        let folder = Folder::new("size");
        let line = "*:*:*:*:big\n";
        let padded = |bytes: u64| {
            let padding = usize::try_from(bytes).expect("fits") - line.len() - 1;
            format!("{line}#{}", "x".repeat(padding))
        };
        let at_bound = folder.write("at", &padded(MOST_BYTES), 0o600);
        assert_eq!(std::fs::metadata(&at_bound).expect("written").len(), MOST_BYTES);
        assert_eq!(found("host=h user=u", Some(&at_bound), &[]).expect("found").password, Some(b"big".to_vec()));

        let over = folder.write("over", &padded(MOST_BYTES + 1), 0o600);
        let passed = found("host=h user=u", Some(&over), &[]).expect("found");
        assert_eq!(passed.password, None);
        let why = passed.passed_over.expect("a reason");
        assert!(why.contains(&over.display().to_string()), "names the file: {why}");
        assert!(why.contains("larger than 1 MiB (1048576 bytes)"), "names the limit: {why}");
    }
}
