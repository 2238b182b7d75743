//! How a target string becomes connections, and what a first connection that failed
//! says.
//!
//! [`driver_config`] reads a libpq-style target (URL or `key=value`) into the driver's
//! configuration and the TLS its keys ask for ([`crate::tls`]), or says which key does
//! not read (and, for a URL, that credentials holding `@`, `/`, `:` or `?` must be
//! percent-encoded, which it checks itself: the driver would take part of such a
//! password for the host); [`first_connection`]
//! turns the pool's error into the server's own words and what to do about the failures
//! a new target meets.
//!
//! The one thing to know: the keys archmax reads itself (the TLS keys and `passfile`)
//! are taken out of the target before the driver reads it ([`split`], which refuses one
//! given twice), so their meaning is archmax's (`sslmode=verify-full` checks the host
//! name with rustls, `passfile` names libpq's password file), and a target that names
//! only unix sockets goes without TLS, as libpq does.
//!
//! No message quotes a password, however badly the target is written. A URL is never
//! shown, and a key is named only when it cannot be part of one ([`showable`]): a
//! password written without the quotes its spaces need (or, in a URL's query, with a
//! bare `&`) runs on into the words after it, so an unknown word there is refused
//! unnamed, with the advice to quote (or encode) the password, and so is a word not
//! shaped like a key (`password:…`).

use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres_rustls::MakeRustlsConnect;

use archmax_vm::errors::with_causes;

use crate::password::{self, Variables};
use crate::{ConnectError, tls};

/// What the driver needs to reach a target, and what a failed first connection's message
/// draws on.
pub(crate) struct Driver {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: MakeRustlsConnect,
    pub(crate) facts: Facts,
}

/// What was decided about a target on the way to the driver, for [`first_connection`].
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    /// Where the password came from when not from the target ([`password::Found`]).
    password_source: Option<String>,
    /// Why a password file was passed over.
    passed_over: Option<String>,
    tls: tls::TlsSettings,
    /// The host names the target dials over TCP.
    host_names: Vec<String>,
}

/// [`driver_config_with`] the process's own variables.
pub(crate) fn driver_config(target: &str) -> Result<Driver, ConnectError> {
    driver_config_with(target, &|name| std::env::var_os(name))
}

/// The driver's configuration and TLS for a libpq-style `target`: archmax's own keys
/// taken out and given meaning ([`tls`], [`password`]), a password from libpq's other
/// sources when the target gives none, no TLS where only unix sockets are named, and
/// archmax's application name ([`application_name`]) and connect timeout unless the
/// target sets them.
pub(crate) fn driver_config_with(target: &str, variables: Variables<'_>) -> Result<Driver, ConnectError> {
    let Split { driver_target, tls: tls_settings, passfile } = split(target).map_err(ConnectError::Config)?;
    let mut config: tokio_postgres::Config = driver_target.parse().map_err(|error: tokio_postgres::Error| {
        // The driver's own text is only "invalid connection string"; its cause names the
        // key ("invalid value for option `port`").
        let said = with_causes(&error);
        ConnectError::Config(if is_url(target) { format!("{said} ({PERCENT_ENCODE})") } else { said })
    })?;
    let tls = tls::connector(&tls_settings).map_err(ConnectError::Tls)?;
    // The mode is archmax's, whatever the driver made of the rewritten target: set again
    // here, so no reading of it can leave TLS to chance.
    config.ssl_mode(match tls_settings.mode.for_driver() {
        "disable" => tokio_postgres::config::SslMode::Disable,
        "prefer" => tokio_postgres::config::SslMode::Prefer,
        _ => tokio_postgres::config::SslMode::Require,
    });
    let password::Found { password, source: password_source, passed_over } =
        password::find(&config, passfile.as_deref(), variables).map_err(ConnectError::Config)?;
    if let Some(password) = password {
        config.password(password);
    }
    // A unix socket carries no TLS (the server refuses it there, and libpq ignores the
    // mode): a target that reaches the server only through sockets goes without.
    let hosts = config.get_hosts();
    if !hosts.is_empty()
        && config.get_hostaddrs().is_empty()
        && hosts.iter().all(|host| !matches!(host, tokio_postgres::config::Host::Tcp(_)))
    {
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    }
    if config.get_application_name().is_none() {
        config.application_name(application_name(crate::host_name().as_deref(), std::process::id()));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    let host_names = config
        .get_hosts()
        .iter()
        .filter_map(|host| match host {
            tokio_postgres::config::Host::Tcp(name) => Some(name.clone()),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(_) => None,
        })
        .collect();
    Ok(Driver { config, tls, facts: Facts { password_source, passed_over, tls: tls_settings, host_names } })
}

/// The longest `application_name` PostgreSQL keeps (NAMEDATALEN - 1 bytes).
const APPLICATION_NAME_BYTES: usize = 63;

/// `archmax <host> <pid>`: which runner holds a connection, for `pg_stat_activity` and
/// the server's log. The host is shortened to fit, so the pid is never cut.
fn application_name(host: Option<&str>, pid: u32) -> String {
    let pid = pid.to_string();
    let room = APPLICATION_NAME_BYTES - "archmax  ".len() - pid.len();
    match host {
        Some(host) => {
            let mut cut = host.len().min(room);
            while !host.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("archmax {} {pid}", &host[..cut])
        }
        None => format!("archmax {pid}"),
    }
}

/// Why the first connection failed, in the server's words when it answered, with what to
/// do for the failures a new target meets (no such database, a refused login, a missing
/// password, nothing listening, a host name nobody knows, TLS the server does not offer
/// or a certificate that does not check out); the pool's own wrapping ("error occurred
/// while creating a new object") is left out.
pub(crate) fn first_connection(error: &deadpool_postgres::PoolError, facts: &Facts) -> String {
    let deadpool_postgres::PoolError::Backend(error) = error else { return with_causes(error) };
    let Some(db) = error.as_db_error() else {
        let text = with_causes(error);
        return match unanswered(error, &text, facts) {
            Some(what_to_do) => format!("{text} ({what_to_do})"),
            None => text,
        };
    };
    let hint = match db.code().code() {
        "3D000" => " (create the database, for example with `createdb`, or fix the name in the target)".to_string(),
        "28P01" | "28000" => match &facts.password_source {
            Some(source) => format!(" (check the user, the password from {source}, and the server's pg_hba.conf)"),
            None => " (check the user and password the target gives, and the server's pg_hba.conf)".to_string(),
        },
        "53300" => {
            " (the server is at max_connections: lower --store-connections or raise the server's limit)".to_string()
        }
        _ => String::new(),
    };
    crate::describe(error) + &hint
}

/// What to do about a connection that failed before the server said anything: `text` is
/// the error with its causes.
fn unanswered(error: &tokio_postgres::Error, text: &str, facts: &Facts) -> Option<String> {
    if let Some(refused) = tls_refusal(error) {
        return certificate_advice(refused, facts);
    }
    if text.contains("server does not support TLS") {
        return Some(format!(
            "sslmode={} needs TLS and the server offers none: turn TLS on in the server (`ssl = on`, with \
             ssl_cert_file and ssl_key_file, in postgresql.conf), or, only on a network you trust, use \
             sslmode=prefer or sslmode=disable",
            facts.tls.mode.name()
        ));
    }
    if text.contains("failed to lookup address information") {
        let names = facts.host_names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
        return Some(format!("the host {names} could not be resolved: check its spelling and this machine's DNS"));
    }
    if text.contains("Connection refused") || text.contains("No such file or directory") {
        return Some("is the server running, and listening at the target's host and port?".to_string());
    }
    if text.contains("password missing") {
        let passed_over = facts.passed_over.as_ref().map(|why| format!("; {why}")).unwrap_or_default();
        return Some(format!(
            "the server asks for a password and none was found: give it in the target (password=… or \
             postgres://user:password@…), in PGPASSWORD, or in a password file (passfile=…, PGPASSFILE or \
             ~/.pgpass){passed_over}"
        ));
    }
    None
}

/// The rustls error under a failed handshake: the driver wraps it in an I/O error, whose
/// own `source` skips it.
fn tls_refusal(error: &tokio_postgres::Error) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = next {
        if let Some(found) = current.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(inner) = current.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref)
            && let Some(found) = inner.downcast_ref::<rustls::Error>()
        {
            return Some(found);
        }
        next = current.source();
    }
    None
}

/// What to do about a server certificate the target's TLS settings refused.
fn certificate_advice(refused: &rustls::Error, facts: &Facts) -> Option<String> {
    use rustls::CertificateError;
    let rustls::Error::InvalidCertificate(problem) = refused else { return None };
    match problem {
        CertificateError::UnknownIssuer => {
            let roots = match &facts.tls.root_cert {
                Some(tls::Roots::File(path)) => format!("sslrootcert `{}`", path.display()),
                Some(tls::Roots::System) => "the operating system's roots (sslrootcert=system)".to_string(),
                None => "~/.postgresql/root.crt (read when the target names no sslrootcert)".to_string(),
            };
            Some(format!(
                "the server's certificate does not lead to a root certificate in {roots}: name the file holding \
                 the CA certificate that signed the server's with sslrootcert=FILE"
            ))
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            let host = match problem {
                CertificateError::NotValidForNameContext { expected, .. } => expected.to_str().into_owned(),
                _ => facts.host_names.join(", "),
            };
            Some(format!(
                "the server's certificate does not name the host `{host}` the target connects to: connect by a \
                 name the certificate carries, or let sslmode=verify-ca check the chain without the name"
            ))
        }
        _ => None,
    }
}

/// The key naming the password file ([`password`]).
const PASSFILE: &str = "passfile";

/// Whether archmax reads `key` itself (the TLS keys and [`PASSFILE`]): the driver never
/// sees it.
fn is_own(key: &str) -> bool {
    key == PASSFILE || tls::TLS_KEYS.contains(&key)
}

/// The keys the driver reads (tokio-postgres 0.7's).
const DRIVER_KEYS: [&str; 19] = [
    "host",
    "hostaddr",
    "port",
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "sslmode",
    "sslnegotiation",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// Whether `key` is one a target takes (the driver's, the TLS keys, `passfile`): what a
/// message about a target may show with its value, even after the password.
pub fn is_target_key(key: &str) -> bool {
    is_own(key) || DRIVER_KEYS.contains(&key)
}

/// Whether a message may show `key` as the target has it. A key some target takes is
/// shown. Another word is shown only when it is shaped like a key (lowercase letters,
/// digits, `_`), does not name the password, and does not come after the password: a
/// password written without the quotes its spaces need runs on into the words after it,
/// and `password:…` is a password after the wrong sign.
fn showable(key: &str, after_password: bool) -> bool {
    let shaped = !key.is_empty()
        && key.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
        && !key.contains("password");
    is_target_key(key) || (shaped && !after_password)
}

/// How a message names `key`: itself when [`showable`], else by where it stands, with
/// advice to put after the message.
fn named(key: &str, after_password: bool, url: bool) -> (String, &'static str) {
    if showable(key, after_password) {
        (format!("`{key}`"), "")
    } else if !after_password {
        ("a key (not shown, in case it holds a password)".to_string(), "")
    } else if url {
        (
            "a key after the password".to_string(),
            "; if what follows the password is part of it, write `&` in the password as %26",
        )
    } else {
        (
            "a word after the password".to_string(),
            "; if what follows the password is part of it, put the password in single quotes, with `\\'` for a \
             quote in it: password='…'",
        )
    }
}

/// Refuses a key no target takes that a message could not show ([`showable`]); the
/// driver names the other unknown keys itself.
fn check_keys<'a>(keys: impl IntoIterator<Item = &'a str>, url: bool) -> Result<(), String> {
    let mut after_password = false;
    for key in keys {
        if !showable(key, after_password) {
            let (shown, advice) = named(key, after_password, url);
            return Err(format!("{shown} is not among the keys a store target takes{advice}"));
        }
        after_password |= key == "password";
    }
    Ok(())
}

/// A target with archmax's own keys taken out.
pub(crate) struct Split {
    /// The rest, with a TLS mode the driver knows, for the driver to parse.
    pub(crate) driver_target: String,
    pub(crate) tls: tls::TlsSettings,
    /// `passfile`: the password file to look the password up in.
    pub(crate) passfile: Option<PathBuf>,
}

impl std::fmt::Debug for Split {
    /// Without the driver's target, which may hold the password.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Split")
            .field("driver_target", &"…")
            .field("tls", &self.tls)
            .field("passfile", &self.passfile)
            .finish()
    }
}

/// What a URL whose credentials do not read is told.
const PERCENT_ENCODE: &str = "in a store URL, a user or password holding `@`, `/`, `:` or `?` must be \
     percent-encoded: `@` as %40, `/` as %2F, `:` as %3A, `?` as %3F";

fn is_url(target: &str) -> bool {
    let trimmed = target.trim();
    trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://")
}

/// Takes archmax's own keys out of `target` (either form), each given at most once.
pub(crate) fn split(target: &str) -> Result<Split, String> {
    let trimmed = target.trim();
    let (own, rest) = if is_url(trimmed) {
        check_credentials(trimmed)?;
        split_url(trimmed)?
    } else {
        split_keywords(trimmed)?
    };
    let mut seen: Vec<&str> = Vec::new();
    for (key, _) in &own {
        // The last of two would win silently: a target built by appending text could turn
        // verify-full into disable. Say so instead.
        if seen.contains(&key.as_str()) {
            return Err(format!("`{key}` is given twice in the store target; give it once"));
        }
        seen.push(key);
    }
    let (passfile, tls_pairs): (Vec<_>, Vec<_>) = own.into_iter().partition(|(key, _)| key == PASSFILE);
    let tls = tls::settings(tls_pairs)?;
    let passfile = passfile.into_iter().next().map(|(_, path)| PathBuf::from(path));
    Ok(Split { driver_target: rest.written_with_mode(tls.mode.for_driver()), tls, passfile })
}

/// What of a target the driver parses.
enum Rest<'a> {
    /// A URL's part before the query, and its other query pairs exactly as written.
    Url {
        base: &'a str,
        pairs: Vec<&'a str>,
    },
    Keywords(Vec<(String, String)>),
}

impl Rest<'_> {
    /// The target the driver is given, with `sslmode` set to `mode`.
    fn written_with_mode(self, mode: &str) -> String {
        match self {
            Rest::Url { base, pairs } => {
                let mode = format!("sslmode={mode}");
                let query: Vec<&str> = pairs.into_iter().chain([mode.as_str()]).collect();
                format!("{base}?{}", query.join("&"))
            }
            Rest::Keywords(pairs) => pairs
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str()))
                .chain([("sslmode", mode)])
                .map(|(key, value)| format!("{key}={}", quoted(value)))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Refuses a URL whose `@` cannot be the end of its credentials: a second `@` before the
/// host, or a `/` or `?` before the `@`. The driver takes everything before a URL's first
/// `@` for the credentials, wherever it stands, so an `@` in a path or a query value (`?
/// user=me@corp`) would have it read another host, database and options than archmax
/// reads; such an `@` is written `%40`. The URL is not shown: it holds the password.
fn check_credentials(url: &str) -> Result<(), String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let Some(at) = rest.find('@') else { return Ok(()) };
    let credentials = &rest[..at];
    let after = &rest[at + 1..];
    let host_end = after.find(['/', '?']).unwrap_or(after.len());
    let cut_before = credentials.contains(['/', '?']);
    if after[..host_end].contains('@') || cut_before {
        return Err(format!("the store URL's user, password and host cannot be told apart: {PERCENT_ENCODE}"));
    }
    Ok(())
}

/// The URL form: the query is split by hand, as tokio-postgres reads it (`&`-separated,
/// percent-decoded, `+` is a plus). The own pairs come back decoded; every other pair is
/// kept exactly as written, so nothing else of the URL (host lists, encoded options) is
/// touched.
fn split_url(target: &str) -> Result<(Vec<(String, String)>, Rest<'_>), String> {
    let (base, query) = target.split_once('?').unwrap_or((target, ""));
    let mut own = Vec::new();
    let mut pairs = Vec::new();
    let mut keys = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // Neither text is shown: a password holding `&` runs on into the next pair.
        let key = percent_decoded(key).ok_or("a key in the store URL's query is not UTF-8 once decoded")?;
        if is_own(&key) {
            let value = percent_decoded(value)
                .ok_or_else(|| format!("the value of `{key}` in the store URL's query is not UTF-8 once decoded"))?;
            own.push((key.clone(), value));
        } else {
            pairs.push(pair);
        }
        keys.push(key);
    }
    check_keys(keys.iter().map(String::as_str), true)?;
    Ok((own, Rest::Url { base, pairs }))
}

fn percent_decoded(text: &str) -> Option<String> {
    percent_encoding::percent_decode_str(text).decode_utf8().ok().map(|text| text.into_owned())
}

fn split_keywords(target: &str) -> Result<(Vec<(String, String)>, Rest<'_>), String> {
    let pairs = keyword_pairs(target)?;
    check_keys(pairs.iter().map(|(key, _)| key.as_str()), false)?;
    let (own, rest) = pairs.into_iter().partition(|(key, _)| is_own(key));
    Ok((own, Rest::Keywords(rest)))
}

/// The `key=value` pairs of a libpq keyword string: spaces around `=` allowed, a value
/// in single quotes may hold spaces, and `\` escapes the next character. A message names
/// a key only when it cannot be part of a password.
pub fn keyword_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let after_password = pairs.iter().any(|(key, _)| key == "password");
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        let (shown, advice) = named(&key, after_password, false);
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("{shown} has no `=value` in the store target{advice}"));
        }
        if key.is_empty() {
            // The driver would stop reading at it, and drop every key after it unread.
            return Err(format!("an `=` in the store target has no key before it{advice}"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => return Err(format!("the quoted value of {shown} has no closing quote{advice}")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// A value as a keyword string writes it back: quoted, with `'` and `\` escaped.
fn quoted(value: &str) -> String {
    let mut text = String::with_capacity(value.len() + 2);
    text.push('\'');
    for c in value.chars() {
        if matches!(c, '\'' | '\\') {
            text.push('\\');
        }
        text.push(c);
    }
    text.push('\'');
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::tls::{Roots, SslMode};

    #[test]
    fn the_tls_keys_leave_a_keyword_target_and_the_rest_stays() {
        let Split { driver_target: rest, tls: settings, .. } =
            split("host=db.example port=5432 user=app sslmode=verify-full sslrootcert='/etc/my ca.pem' dbname=x")
                .expect("splits");
        assert_eq!(rest, "host='db.example' port='5432' user='app' dbname='x' sslmode='require'");
        assert_eq!(settings.mode, SslMode::VerifyFull);
        assert_eq!(settings.root_cert, Some(Roots::File(PathBuf::from("/etc/my ca.pem"))));
        let config: tokio_postgres::Config = rest.parse().expect("tokio-postgres reads the rest");
        assert_eq!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
    }

    #[test]
    fn the_tls_keys_leave_a_url_target_and_the_rest_stays() {
        let Split { driver_target: rest, tls: settings, .. } = split(
            "postgres://app:s%40cret@db.example:6432/archmax?sslmode=verify-full&sslrootcert=system&application_name=a",
        )
        .expect("splits");
        assert_eq!(settings.mode, SslMode::VerifyFull);
        assert_eq!(settings.root_cert, Some(Roots::System));
        let config: tokio_postgres::Config = rest.parse().expect("tokio-postgres reads the rest");
        assert_eq!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        assert_eq!(config.get_application_name(), Some("a"));
        assert_eq!(config.get_password(), Some(&b"s@cret"[..]));
    }

    #[test]
    fn a_url_keeps_every_other_pair_exactly_as_written() {
        let Split { driver_target: rest, tls: settings, .. } = split(
            "postgres://app@h1:5432,h2:5433/db?options=-c%20statement_timeout%3D5s&sslrootcert=%2Fetc%2Fca%2Bbundle.pem&sslmode=verify-ca",
        )
        .expect("splits");
        assert_eq!(rest, "postgres://app@h1:5432,h2:5433/db?options=-c%20statement_timeout%3D5s&sslmode=require");
        assert_eq!(settings.root_cert, Some(Roots::File(PathBuf::from("/etc/ca+bundle.pem"))), "`+` is a plus");
        let config: tokio_postgres::Config = rest.parse().expect("tokio-postgres reads the rest");
        assert_eq!(config.get_options(), Some("-c statement_timeout=5s"));
        assert_eq!(config.get_hosts().len(), 2);
    }

    #[test]
    fn quoting_round_trips_and_the_default_is_prefer() {
        let Split { driver_target: rest, tls: settings, .. } =
            split(r"host=/run/postgresql password='it\'s a \\ secret'").expect("splits");
        assert_eq!(settings.mode, SslMode::Prefer);
        let config: tokio_postgres::Config = rest.parse().expect("reads");
        assert_eq!(config.get_password(), Some(&br"it's a \ secret"[..]));
    }

    #[test]
    fn no_message_about_a_target_shows_its_password_however_it_is_written() {
        // Each target holds `S3CRET` in its password, or in what may be the rest of one,
        // and each is refused with what to do.
        let keywords = "put the password in single quotes";
        let cases = [
            ("host=h password='S3CRET unterminated", "no closing quote"),
            ("host=h password=pw S3CRET", keywords),
            ("host=h password=pw S3CRET=x", keywords),
            ("host=h password=pw 'S3CRET", keywords),
            ("host=h password=pw dbname=d S3CRET x", keywords),
            ("host=h password=pw =S3CRET", "no key before it"),
            ("host=h password='don't-S3CRET x'", keywords),
            ("host=h password:S3CRET", "not shown"),
            ("host=h password:S3CRET=x", "not shown"),
            ("postgres://app:S3CRET@h:notaport/db", "`port`"),
            ("postgres://app:S3CRET?x@h/db", "percent-encoded"),
            ("postgres://app@h/db?password=pw&S3CRET=x", "%26"),
            ("postgres://app@h/db?password=pw&S3CRET", "%26"),
            ("postgres://app@h/db?password=pw&S3CRET%FF=x", "not UTF-8"),
            ("postgres://app@h/db?password=pw&sslrootcert=S3CRET%FF", "`sslrootcert`"),
        ];
        for (target, advice) in cases {
            let said = match driver_config_with(target, &|_| None) {
                Err(error) => format!("{error} {error:?}"),
                Ok(_) => panic!("{target} is refused"),
            };
            assert!(!said.to_lowercase().contains("s3cret"), "{target}: {said}");
            assert!(said.contains(advice), "{target}: {said}");
        }
        // A key that cannot be part of a password is still named, and the split's debug
        // form shows nothing the driver's target holds.
        let said = driver_config_with("host=h colour=blue password='S3CRET'", &|_| None).err().expect("refused");
        assert!(said.to_string().contains("`colour`") && !said.to_string().contains("S3CRET"), "{said}");
        let message = split("host=h =x dbname=d").expect_err("an empty key");
        assert!(message.contains("no key before it"), "{message}");
        let split_off = split("host=h password=S3CRET").expect("splits");
        assert!(!format!("{split_off:?}").contains("S3CRET"), "{split_off:?}");
    }

    #[test]
    fn passfile_leaves_either_form_and_is_given_once() {
        let split_off = split("host=h user=u passfile='/etc/my pgpass' dbname=d").expect("splits");
        assert_eq!(split_off.passfile, Some(PathBuf::from("/etc/my pgpass")));
        assert_eq!(split_off.driver_target, "host='h' user='u' dbname='d' sslmode='prefer'");
        let split_off = split("postgres://u@h/d?passfile=%2Fetc%2Fpgpass&application_name=a").expect("splits");
        assert_eq!(split_off.passfile, Some(PathBuf::from("/etc/pgpass")));
        assert_eq!(split_off.driver_target, "postgres://u@h/d?application_name=a&sslmode=prefer");
        let message = split("host=h passfile=/a passfile=/b").expect_err("twice");
        assert!(message.contains("`passfile` is given twice"), "{message}");
    }

    /// Signs in to `cluster`'s database as its password role through `target`, with the
    /// process variables `variables`; the role's name when the server let it in.
    async fn signed_in_as(target: &str, variables: &[(&str, &str)]) -> Result<String, String> {
        let lookup = |name: &str| variables.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).into());
        let Driver { config, tls, .. } = driver_config_with(target, &lookup).map_err(|error| error.to_string())?;
        let (client, connection) = config.connect(tls).await.map_err(|error| with_causes(&error))?;
        let connection = tokio::spawn(connection);
        let row = client.query_one("SELECT current_user::text", &[]).await.map_err(|error| with_causes(&error))?;
        drop(client);
        let _ = connection.await;
        Ok(row.get(0))
    }

    #[test]
    fn each_of_libpqs_password_sources_signs_a_role_in() {
        use std::os::unix::fs::PermissionsExt;
        let cluster = crate::test_cluster::TestCluster::start_tcp().expect("a server on TCP");
        let dbname = cluster.database_named("sources").expect("a database");
        let role = cluster.role("sources", Some("the secret")).expect("a role with a password");
        let port = cluster.tcp_port().expect("a TCP port");
        let home = std::env::temp_dir().join(format!("archmax-password-sources-{}", std::process::id()));
        std::fs::create_dir_all(&home).expect("a home");
        let write = |name: &str, text: &str| {
            let path = home.join(name);
            std::fs::write(&path, text).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            path.display().to_string()
        };
        let line = format!("localhost:{port}:{dbname}:{role}:the secret\n");
        write(".pgpass", &line);
        let named = write("named", &line);
        let home_text = home.display().to_string();
        let target = format!("host=localhost port={port} user={role} dbname={dbname} sslmode=disable");
        let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
        executor.block_on(async {
            let cases = [
                ("the target's password", format!("{target} password='the secret'"), vec![]),
                ("PGPASSWORD", target.clone(), vec![("PGPASSWORD", "the secret")]),
                ("passfile=", format!("{target} passfile={named}"), vec![]),
                ("PGPASSFILE", target.clone(), vec![("PGPASSFILE", named.as_str())]),
                ("~/.pgpass", target.clone(), vec![("HOME", home_text.as_str())]),
            ];
            for (source, target, variables) in cases {
                assert_eq!(signed_in_as(&target, &variables).await.as_deref(), Ok(role.as_str()), "{source}");
            }
            let none = signed_in_as(&target, &[]).await.expect_err("no password, no sign-in");
            assert!(none.contains("password missing"), "{none}");
            // A wrong password from the environment is not rescued by the file.
            let wrong = signed_in_as(&target, &[("PGPASSWORD", "wrong"), ("HOME", home_text.as_str())]).await;
            assert!(wrong.is_err_and(|message| message.contains("password authentication failed")));
        });
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn the_application_name_keeps_the_pid_within_postgresqls_63_bytes() {
        assert_eq!(application_name(Some("runner-7"), 4242), "archmax runner-7 4242");
        assert_eq!(application_name(None, 4242), "archmax 4242");
        let long = application_name(Some(&"h".repeat(100)), 4_294_967_295);
        assert_eq!(long.len(), APPLICATION_NAME_BYTES);
        assert!(long.starts_with("archmax hhh") && long.ends_with(" 4294967295"), "{long}");
    }
}
