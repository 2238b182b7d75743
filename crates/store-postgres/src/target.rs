//! How a target string becomes connections, and what a first connection that failed
//! says.
//!
//! [`driver_config`] reads a libpq-style target (URL or `key=value`) into the driver's
//! configuration and the TLS its keys ask for ([`crate::tls`]); [`first_connection`]
//! turns the pool's error into the server's own words and what to do about the failures
//! a new target meets.
//!
//! The one thing to know: the TLS keys are taken out of the target before the driver
//! reads it, so their meaning is archmax's (`sslmode=verify-full` checks the host name
//! with rustls), and a target that names only unix sockets goes without TLS, as libpq
//! does.

use std::time::Duration;

use tokio_postgres_rustls::MakeRustlsConnect;

use archmax_vm::errors::with_causes;

use crate::{ConnectError, tls};

/// The driver's configuration and TLS for a libpq-style `target`: the TLS keys taken out
/// and given meaning ([`tls`]), no TLS where only unix sockets are named, and archmax's
/// application name and connect timeout unless the target sets them.
pub(crate) fn driver_config(target: &str) -> Result<(tokio_postgres::Config, MakeRustlsConnect), ConnectError> {
    let (driver_target, tls_settings) = tls::split(target).map_err(ConnectError::Config)?;
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
