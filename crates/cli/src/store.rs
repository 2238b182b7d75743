//! Which session store a command uses: `--store URL`, else `ARCHMAX_STORE`, else the
//! workspace's `sessions/` folder; and `archmax sessions export ID` / `sessions import`,
//! which move a session between stores.
//!
//! The targets: `fs:` (the workspace's `<root>/sessions`), `fs:DIR` (another folder),
//! `postgres://…` / `postgresql://…` (libpq URLs) and libpq `key=value` strings such as
//! `host=/run/postgresql dbname=archmax`. Anything else is a usage error naming the forms.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use archmax_store_postgres::{PgOptions, PgStore};
use archmax_vm::session::fs::{FsStore, SealKeys};
use archmax_vm::session::id::check_session_id;
use archmax_vm::session::{SessionState, SessionStore, StoreError, transfer};
use tokio::runtime::Runtime;

use crate::output::{failure, usage};

/// The sessions directory of a workspace.
pub fn sessions_dir(root: &Path) -> PathBuf {
    root.join("sessions")
}

/// The environment variable naming the store when `--store` is not given.
pub const STORE_VARIABLE: &str = "ARCHMAX_STORE";

/// Where sessions live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Fs(PathBuf),
    Postgres(String),
}

/// The store named by `flag`, else by `ARCHMAX_STORE`, else the workspace's folder.
pub fn target(root: &Path, flag: Option<&str>) -> Result<Target, String> {
    let variable = std::env::var(STORE_VARIABLE).ok().filter(|value| !value.trim().is_empty());
    let (text, source) = match (flag, variable) {
        (Some(flag), _) => (flag.trim().to_string(), "--store"),
        (None, Some(value)) => (value.trim().to_string(), STORE_VARIABLE),
        (None, None) => return Ok(Target::Fs(sessions_dir(root))),
    };
    parse(root, &text).ok_or_else(|| {
        format!(
            "{source} `{}` names no session store; use `fs:` (the workspace's sessions folder), `fs:DIR`, \
             `postgres://user@host/db`, or a libpq string such as `host=/run/postgresql dbname=archmax`",
            redacted(&text)
        )
    })
}

/// `text` with any password taken out (`scheme://user:secret@host` → `scheme://user:***@host`,
/// `password=secret` → `password=***`), so an error never prints a credential. What is
/// neither a URL nor a keyword string is cut at its first `password`, and not shown at
/// all when it holds an `@` (user information written without `//`).
pub fn redacted(text: &str) -> String {
    if let Some(scheme_end) = text.find("://") {
        return redacted_url(text, scheme_end + 3);
    }
    // The keyword form, read as libpq reads it (quotes, escapes, any whitespace). After
    // the password only the keys a target takes show: a password written without the
    // quotes its spaces need runs on into words that read as pairs.
    match archmax_store_postgres::tls::keyword_pairs(text) {
        Ok(pairs) => {
            let mut after_password = false;
            let mut words = Vec::with_capacity(pairs.len());
            for (key, value) in pairs {
                if key.to_ascii_lowercase().contains("password") {
                    after_password = true;
                    words.push(format!("{key}=***"));
                } else if !after_password || archmax_store_postgres::tls::is_target_key(&key) {
                    words.push(format!("{key}={value}"));
                } else {
                    words.push("…".to_string());
                }
            }
            words.dedup_by(|word, previous| word == "…" && previous == "…");
            words.join(" ")
        }
        // An `@` may end a password written as user information: nothing is shown.
        Err(_) if text.contains('@') => "(not shown: it may hold a password)".to_string(),
        // Cut at the first `password`, so nothing after it shows.
        Err(_) => match text.to_ascii_lowercase().find("password") {
            Some(at) => format!("{}password=***", &text[..at]),
            None => text.to_string(),
        },
    }
}

/// [`redacted`] for a URL whose authority starts at `authority`: the user information's
/// password (up to the last `@` before the query, since a password may hold `/`), and
/// from the first query key that names a password to the end (its value may hold an
/// unencoded `&`).
fn redacted_url(text: &str, authority: usize) -> String {
    let mut shown = text.to_string();
    let query = shown[authority..].find('?').map(|at| authority + at);
    if let Some(at) = query
        && let Some(key) = shown[at..].to_ascii_lowercase().find("password").map(|key| at + key)
    {
        // Back to the start of that key (after `?` or `&`).
        let from = shown[..key].rfind(['?', '&']).map_or(key, |separator| separator + 1);
        shown.replace_range(from.., "password=***");
    }
    let before_query = query.unwrap_or(shown.len()).min(shown.len());
    if let Some(at) = shown[authority..before_query].rfind('@').map(|at| authority + at)
        && let Some(colon) = shown[authority..at].find(':').map(|colon| authority + colon)
    {
        shown.replace_range(colon + 1..at, "***");
    }
    shown
}

/// A store error as the CLI says it: a session the filesystem store refuses gets the
/// `archmax sessions` option that mends or adopts it.
pub fn store_problem(error: &StoreError) -> String {
    // The seal key is the workspace's (`<root>/.archmax/seal.key`): a store another
    // workspace wrote reads as tampered with under this one's key.
    let other_key = |what: &str| {
        if what.contains("seal key") {
            " (if the session was written from another workspace, it is sealed with that workspace's key: run from that workspace or name it with --root DIR before repairing anything)"
        } else {
            ""
        }
    };
    match error {
        StoreError::Damaged { id, .. } => format!(
            "{error}{}; `archmax sessions {id} --repair` keeps the steps before the damage and drops the rest",
            other_key(&error.to_string())
        ),
        StoreError::Unkeyed { id } => format!(
            "{error}; if these files are yours and unaltered, `archmax sessions {id} --reseal` adopts the session under the key, otherwise restore it from a backup"
        ),
        StoreError::Unrepairable { id, what } => format!(
            "session `{id}` is unreadable: {what}{}; --repair cannot help, restore the session from a backup or delete it",
            other_key(what)
        ),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod redaction {
    use super::redacted;

    #[test]
    fn a_store_string_is_never_shown_with_its_password() {
        assert_eq!(redacted("postgre://app:s3cret@db.internal/archmax"), "postgre://app:***@db.internal/archmax");
        assert_eq!(redacted("host=/run/pg password=s3cret dbname=a"), "host=/run/pg password=*** dbname=a");
        assert_eq!(redacted("fs:/tmp/sessions"), "fs:/tmp/sessions");
        assert_eq!(redacted("pg://user@host/db"), "pg://user@host/db");
        assert_eq!(redacted("host=db\tpassword=s3cret X=1"), "host=db password=*** …");
        assert_eq!(redacted("password=a b=c d=e dbname=x"), "password=*** … dbname=x", "the password's run-on words");
        assert_eq!(
            redacted("postgres://u@h/db?sslmode=require&password=s3c&ret"),
            "postgres://u@h/db?sslmode=require&password=***"
        );
        assert_eq!(redacted("postgres://u@h/db?PASSWORD=s3cret"), "postgres://u@h/db?password=***");
        assert_eq!(
            redacted("jdbc:postgresql://db/app?user=u&password=S3CRET"),
            "jdbc:postgresql://db/app?user=u&password=***"
        );
        assert_eq!(redacted("postgresql+asyncpg://app:ab/S3CRET@db/app"), "postgresql+asyncpg://app:***@db/app");
        assert_eq!(redacted("postgres:/app:S3CRET@db/app"), "(not shown: it may hold a password)");
        assert_eq!(redacted("host=db passwordx=S3CRET"), "host=db passwordx=***");
        assert_eq!(redacted("host=db password='two words'"), "host=db password=***");
        assert_eq!(redacted("host=db password='unclosed secret"), "host=db password=***");
    }
}

fn parse(root: &Path, text: &str) -> Option<Target> {
    if let Some(dir) = text.strip_prefix("fs:") {
        return Some(Target::Fs(if dir.is_empty() { sessions_dir(root) } else { PathBuf::from(dir) }));
    }
    let url = text.starts_with("postgres://") || text.starts_with("postgresql://");
    let keywords = archmax_store_postgres::tls::keyword_pairs(text).is_ok_and(|pairs| {
        !pairs.is_empty()
            && pairs.iter().all(|(key, _)| !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    });
    (url || keywords).then(|| Target::Postgres(text.to_string()))
}

/// The filesystem store in `dir`, sealed with the seal keys of the workspace at `root`
/// (`ARCHMAX_SEAL_KEY`, `ARCHMAX_SEAL_KEY_FILE`, else `<root>/.archmax/seal.key`,
/// created on first use).
pub fn fs_store(root: &Path, dir: PathBuf) -> Result<FsStore, String> {
    let keys = SealKeys::for_workspace(root).map_err(|error| error.to_string())?;
    Ok(FsStore::new(dir, keys))
}

/// Opens the store `target` names; `root` is the workspace whose seal key a
/// filesystem store uses. A PostgreSQL store runs its connections on `executor`.
pub fn open(executor: &Runtime, root: &Path, target: &Target) -> Result<Arc<dyn SessionStore>, String> {
    open_with(executor, root, target, PgFlags::default().options_for(target)?)
}

/// The variable naming the lease term (seconds) of a PostgreSQL store's sessions, for
/// every command; `serve --lease-term` overrides it.
pub const LEASE_TERM_VARIABLE: &str = "ARCHMAX_STORE_LEASE_TERM";

/// `--session-dir`: a folder named by something, not an empty word (which would read as
/// the workspace's own `sessions/`), and not one whose name starts or ends in white space
/// (which the store target would trim to another folder).
pub fn session_folder(text: &str) -> Result<std::path::PathBuf, String> {
    if text.trim().is_empty() {
        return Err("the folder is empty; name the folder that holds the sessions, such as `runs/sessions`".to_string());
    }
    if text.trim() != text {
        return Err(format!("`{text}` starts or ends in white space; name the folder without it"));
    }
    Ok(std::path::PathBuf::from(text))
}

/// `--lease-term` and [`LEASE_TERM_VARIABLE`]: seconds, from the store's shortest term to a day.
pub fn lease_seconds(text: &str) -> Result<f64, String> {
    let shortest = archmax_store_postgres::lease::SHORTEST_TERM.as_secs_f64();
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && (shortest..=86_400.0).contains(&seconds) => Ok(seconds),
        _ => Err(format!("`{text}` is not a number of seconds between {shortest} and 86400, such as 10 or 2.5")),
    }
}

/// A PostgreSQL store's options: the lease term from `flag`, else from
/// [`LEASE_TERM_VARIABLE`]. A variable set to what it cannot read is refused naming it,
/// as `--lease-term` would be: a fleet whose runners silently fell back to the default
/// would take each other's sessions over at another pace than it was told.
pub fn postgres_options(flag: Option<f64>) -> Result<PgOptions, String> {
    let seconds = match flag {
        Some(seconds) => Some(seconds),
        None => match std::env::var(LEASE_TERM_VARIABLE) {
            Ok(text) if !text.trim().is_empty() => {
                Some(lease_seconds(&text).map_err(|problem| format!("{LEASE_TERM_VARIABLE}: {problem}"))?)
            }
            _ => None,
        },
    };
    Ok(match seconds {
        Some(seconds) => PgOptions { lease_term: std::time::Duration::from_secs_f64(seconds), ..PgOptions::default() },
        None => PgOptions::default(),
    })
}

/// `serve`'s flags that only a PostgreSQL store reads, as given (`None`: not given).
#[derive(Clone, Debug, Default)]
pub struct PgFlags {
    pub connections: Option<u16>,
    pub lease_term: Option<f64>,
    pub events_kept: Option<u64>,
    pub listen: Option<String>,
    pub behind_pooler: bool,
}

impl PgFlags {
    /// The flags given, by name.
    fn given(&self) -> Vec<&'static str> {
        [
            ("--store-connections", self.connections.is_some()),
            ("--lease-term", self.lease_term.is_some()),
            ("--events-kept", self.events_kept.is_some()),
            ("--store-listen", self.listen.is_some()),
            ("--store-behind-pooler", self.behind_pooler),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    /// The options for a store at `target`. On a filesystem store, where none of these
    /// flags means anything, a flag given is refused naming it rather than ignored.
    pub fn options_for(&self, target: &Target) -> Result<PgOptions, String> {
        if let Target::Fs(dir) = target {
            let given = self.given();
            if !given.is_empty() {
                return Err(format!(
                    "{} {} only for a PostgreSQL store, and the sessions are in the folder {}; drop {} or name a \
                     PostgreSQL store with --store",
                    given.join(", "),
                    if given.len() == 1 { "is" } else { "are" },
                    dir.display(),
                    if given.len() == 1 { "it" } else { "them" },
                ));
            }
            return Ok(PgOptions::default());
        }
        let defaults = PgOptions::default();
        Ok(PgOptions {
            max_connections: self.connections.map_or(defaults.max_connections, usize::from),
            events_kept: self.events_kept.unwrap_or(defaults.events_kept),
            listen_target: self.listen.clone(),
            behind_pooler: self.behind_pooler,
            ..postgres_options(self.lease_term)?
        })
    }
}

/// [`open`], with `options` for a PostgreSQL store (`serve`'s pool size and lease term).
pub fn open_with(
    executor: &Runtime,
    root: &Path,
    target: &Target,
    options: PgOptions,
) -> Result<Arc<dyn SessionStore>, String> {
    match target {
        Target::Fs(dir) => Ok(Arc::new(fs_store(root, dir.clone())?)),
        Target::Postgres(connection) => PgStore::connect_blocking(executor.handle(), connection, options)
            .map(|store| Arc::new(store) as Arc<dyn SessionStore>)
            .map_err(|error| error.to_string()),
    }
}

/// The store a command names (`--store`, `ARCHMAX_STORE`, or the workspace's folder).
pub fn open_for(executor: &Runtime, root: &Path, flag: Option<&str>) -> Result<Arc<dyn SessionStore>, String> {
    open(executor, root, &target(root, flag)?)
}

/// [`open_for`] for a command: a target that names no store, or a store setting that
/// cannot be read, is a usage error (exit 2), a store that cannot be reached a failure
/// (exit 1).
pub fn open_or_exit(
    executor: &Runtime,
    root: &Path,
    flag: Option<&str>,
    command: &str,
) -> Result<Arc<dyn SessionStore>, ExitCode> {
    open_or_exit_with(executor, root, flag, command, &PgFlags::default())
}

/// [`open_or_exit`], with `serve`'s PostgreSQL flags.
pub fn open_or_exit_with(
    executor: &Runtime,
    root: &Path,
    flag: Option<&str>,
    command: &str,
    flags: &PgFlags,
) -> Result<Arc<dyn SessionStore>, ExitCode> {
    let target = target(root, flag).map_err(|message| usage(command, &message))?;
    let options = flags.options_for(&target).map_err(|message| usage(command, &message))?;
    open_with(executor, root, &target, options).map_err(failure)
}

/// Reads one session (unlocked).
pub fn read(executor: &Runtime, store: &dyn SessionStore, id: &str) -> Result<Option<SessionState>, String> {
    executor.block_on(store.read(id)).map_err(|error| store_problem(&error))
}

/// The most ids an ambiguous prefix names in its refusal.
const SHOWN_CANDIDATES: usize = 5;

/// The session `given` names, and its state: the session of that id, else the one
/// session whose id starts with it. No match, or several, is refused with what to do.
pub fn resolve(executor: &Runtime, store: &dyn SessionStore, given: &str) -> Result<(String, SessionState), String> {
    if let Some(state) = read(executor, store, given)? {
        return Ok((given.to_string(), state));
    }
    let id = resolve_id(executor, store, given)?;
    match read(executor, store, &id)? {
        Some(state) => Ok((id, state)),
        None => Err(format!("session `{id}` was removed while it was being read")),
    }
}

/// The id `given` names among the listed sessions (itself, else the one id it starts),
/// without reading any session: what a command on a damaged session uses. A session
/// found by the start of its id is named on stderr before the command acts on it.
pub fn resolve_id(executor: &Runtime, store: &dyn SessionStore, given: &str) -> Result<String, String> {
    let id = existing_id(executor, store, given)?
        .ok_or_else(|| format!("there is no session `{given}`; `archmax sessions` lists them"))?;
    if id != given {
        crate::output::note!("session {id} (the one session whose id starts with `{given}`)");
    }
    Ok(id)
}

/// The listed session `given` names (itself, else the one id it starts), or `None` when
/// no id starts with it; an id that starts several is refused naming them.
pub fn existing_id(executor: &Runtime, store: &dyn SessionStore, given: &str) -> Result<Option<String>, String> {
    match starting_with(executor, store, given)? {
        Starting::Exact => Ok(Some(given.to_string())),
        Starting::Others(matching) => match matching.as_slice() {
            [] => Ok(None),
            [id] => Ok(Some(id.to_string())),
            many => Err(format!("`{given}` is the start of {}; give more of the id", candidates(many))),
        },
    }
}

/// Whether a session of exactly the id `given` exists (`run --session ID --new`).
pub fn exact_id(executor: &Runtime, store: &dyn SessionStore, given: &str) -> Result<bool, String> {
    Ok(matches!(starting_with(executor, store, given)?, Starting::Exact))
}

/// The listed ids `given` starts: itself, or the others.
enum Starting {
    Exact,
    Others(Vec<String>),
}

fn starting_with(executor: &Runtime, store: &dyn SessionStore, given: &str) -> Result<Starting, String> {
    let ids = executor.block_on(store.list()).map_err(|error| error.to_string())?;
    if ids.iter().any(|id| id == given) {
        return Ok(Starting::Exact);
    }
    Ok(Starting::Others(ids.into_iter().filter(|id| id.starts_with(given)).collect()))
}

/// `N session id(s): a, b and 3 more`, naming at most [`SHOWN_CANDIDATES`].
fn candidates(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(SHOWN_CANDIDATES).map(String::as_str).collect();
    let more = ids.len().saturating_sub(SHOWN_CANDIDATES);
    format!(
        "{} session id{}: {}{}",
        ids.len(),
        if ids.len() == 1 { "" } else { "s" },
        shown.join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    )
}

/// `archmax sessions export ID`: the session as JSON lines on stdout.
pub fn export(executor: &Runtime, root: &Path, flag: Option<&str>, id: &str) -> ExitCode {
    if let Err(problem) = check_session_id(id, &[]) {
        return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let store = match open_or_exit(executor, root, flag, "sessions") {
        Ok(store) => store,
        Err(code) => return code,
    };
    let id = match resolve(executor, store.as_ref(), id) {
        Ok((id, _)) => id,
        Err(message) => return failure(message),
    };
    let id = id.as_str();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    match executor.block_on(transfer::export(store.as_ref(), id, &mut out)) {
        Ok(summary) => {
            eprintln!("exported session {id} (step {}, {} files)", summary.seq, summary.files);
            ExitCode::SUCCESS
        }
        Err(error) => failure(error),
    }
}

/// `archmax sessions import`: creates the session an export on stdin holds.
pub fn import(executor: &Runtime, root: &Path, flag: Option<&str>) -> ExitCode {
    let store = match open_or_exit(executor, root, flag, "sessions") {
        Ok(store) => store,
        Err(code) => return code,
    };
    let mut input = std::io::BufReader::new(std::io::stdin());
    match executor.block_on(transfer::import(store.as_ref(), &mut input)) {
        Ok(summary) => {
            eprintln!("imported session {} (step {}, {} files)", summary.id, summary.seq, summary.files);
            ExitCode::SUCCESS
        }
        Err(error) => failure(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_a_folder_or_a_postgres_connection() {
        let root = Path::new("/work/ws");
        assert_eq!(parse(root, "fs:"), Some(Target::Fs(PathBuf::from("/work/ws/sessions"))));
        assert_eq!(parse(root, "fs:/var/sessions"), Some(Target::Fs(PathBuf::from("/var/sessions"))));
        for connection in
            ["postgres://archmax@db/archmax", "postgresql://db", "host=/run/postgresql dbname=archmax user=runner"]
        {
            assert_eq!(parse(root, connection), Some(Target::Postgres(connection.to_string())));
        }
        for nonsense in ["", "sessions", "mysql://db", "host", "=x", "Host=/x"] {
            assert_eq!(parse(root, nonsense), None, "{nonsense}");
        }
    }
}
