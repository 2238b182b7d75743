//! How a target string becomes connections, and what a first connection that failed
//! says.
//!
//! [`driver_config`] reads a libpq-style target (URL or `key=value`) into the driver's
//! configuration and the TLS its keys ask for ([`crate::tls`]); [`first_connection`]
//! turns the pool's error into the server's own words and what to do about the failures
//! a new target meets.
//!
//! The one thing to know: the keys archmax reads itself (the TLS keys) are taken out of
//! the target before the driver reads it ([`split`], which refuses one given twice), so
//! their meaning is archmax's (`sslmode=verify-full` checks the host name with rustls),
//! and a target that names only unix sockets goes without TLS, as libpq does.

use std::time::Duration;

use tokio_postgres_rustls::MakeRustlsConnect;

use archmax_vm::errors::with_causes;

use crate::{ConnectError, tls};

/// The driver's configuration and TLS for a libpq-style `target`: the TLS keys taken out
/// and given meaning ([`tls`]), no TLS where only unix sockets are named, and archmax's
/// application name and connect timeout unless the target sets them.
pub(crate) fn driver_config(target: &str) -> Result<(tokio_postgres::Config, MakeRustlsConnect), ConnectError> {
    let Split { driver_target, tls: tls_settings } = split(target).map_err(ConnectError::Config)?;
    let mut config: tokio_postgres::Config =
        driver_target.parse().map_err(|error: tokio_postgres::Error| ConnectError::Config(error.to_string()))?;
    let tls = tls::connector(&tls_settings).map_err(ConnectError::Tls)?;
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
        config.application_name("archmax");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    Ok((config, tls))
}

/// Why the first connection failed, in the server's words when it answered, with what to
/// do for the failures a new target meets (no such database, a refused login, nothing
/// listening); the pool's own wrapping ("error occurred while creating a new object") is
/// left out.
pub(crate) fn first_connection(error: &deadpool_postgres::PoolError) -> String {
    let deadpool_postgres::PoolError::Backend(error) = error else { return with_causes(error) };
    let Some(db) = error.as_db_error() else {
        let text = with_causes(error);
        let refused = text.contains("Connection refused") || text.contains("No such file or directory");
        return if refused {
            format!("{text} (is the server running, and listening at the target's host and port?)")
        } else {
            text
        };
    };
    let hint = match db.code().code() {
        "3D000" => " (create the database, for example with `createdb`, or fix the name in the target)",
        "28P01" | "28000" => " (check the user and password the target gives, and the server's pg_hba.conf)",
        "53300" => " (the server is at max_connections: lower --store-connections or raise the server's limit)",
        _ => "",
    };
    crate::describe(error) + hint
}

/// The keys archmax reads itself; the driver never sees them.
const OWN_KEYS: [&str; 4] = tls::TLS_KEYS;

/// A target with archmax's own keys taken out.
#[derive(Debug)]
pub(crate) struct Split {
    /// The rest, with a TLS mode the driver knows, for the driver to parse.
    pub(crate) driver_target: String,
    pub(crate) tls: tls::TlsSettings,
}

/// Takes archmax's own keys out of `target` (either form), each given at most once.
pub(crate) fn split(target: &str) -> Result<Split, String> {
    let trimmed = target.trim();
    let (own, rest) = if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
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
    let tls = tls::settings(own)?;
    Ok(Split { driver_target: rest.written_with_mode(tls.mode.for_driver()), tls })
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

/// The URL form: the query is split by hand, as tokio-postgres reads it (`&`-separated,
/// percent-decoded, `+` is a plus). The own pairs come back decoded; every other pair is
/// kept exactly as written, so nothing else of the URL (host lists, encoded options) is
/// touched.
fn split_url(target: &str) -> Result<(Vec<(String, String)>, Rest<'_>), String> {
    let (base, query) = target.split_once('?').unwrap_or((target, ""));
    let mut own = Vec::new();
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decoded(key)?;
        if OWN_KEYS.contains(&key.as_str()) {
            own.push((key, percent_decoded(value)?));
        } else {
            pairs.push(pair);
        }
    }
    Ok((own, Rest::Url { base, pairs }))
}

fn percent_decoded(text: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|_| format!("`{text}` in the store URL's query is not UTF-8 once decoded"))
}

fn split_keywords(target: &str) -> Result<(Vec<(String, String)>, Rest<'_>), String> {
    let (own, rest) = keyword_pairs(target)?.into_iter().partition(|(key, _)| OWN_KEYS.contains(&key.as_str()));
    Ok((own, Rest::Keywords(rest)))
}

/// The `key=value` pairs of a libpq keyword string: spaces around `=` allowed, a value
/// in single quotes may hold spaces, and `\` escapes the next character.
pub fn keyword_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("`{key}` has no `=value` in the store target"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => return Err(format!("the quoted value of `{key}` has no closing quote")),
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
        let Split { driver_target: rest, tls: settings } =
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
        let Split { driver_target: rest, tls: settings } = split(
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
        let Split { driver_target: rest, tls: settings } = split(
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
        let Split { driver_target: rest, tls: settings } =
            split(r"host=/run/postgresql password='it\'s a \\ secret'").expect("splits");
        assert_eq!(settings.mode, SslMode::Prefer);
        let config: tokio_postgres::Config = rest.parse().expect("reads");
        assert_eq!(config.get_password(), Some(&br"it's a \ secret"[..]));
    }
}
