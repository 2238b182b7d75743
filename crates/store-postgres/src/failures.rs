//! How the store's failures read: a connection the pool could not lend
//! ([`StoreError::Unavailable`]), a statement the server refused (its words, detail and
//! hint), a session whose stored state does not read.

use std::io;

use archmax_vm::session::StoreError;

/// The store could not lend a connection (every attempt to open one failed, or the pool
/// is closed): the store is unreachable for now, not this session broken. The pool's own
/// wrapping is left out of the words.
pub(crate) fn pool_error(id: &str) -> impl Fn(deadpool_postgres::PoolError) -> StoreError + '_ {
    move |error| {
        let said = match &error {
            deadpool_postgres::PoolError::Backend(error) => describe(error),
            other => archmax_vm::errors::with_causes(other),
        };
        let whose = if id.is_empty() { String::new() } else { format!(" (session `{id}`)") };
        StoreError::Unavailable(format!("PostgreSQL refused a connection{whose}: {said}"))
    }
}

/// A store I/O error naming the session.
pub(crate) fn io_error(id: &str, message: String) -> StoreError {
    StoreError::Io { id: id.to_string(), source: io::Error::other(message) }
}

/// What a driver error says: the server's own message with its detail and hint when the
/// server answered (the driver's own text is only "db error"), else every cause.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    let Some(db) = error.as_db_error() else { return archmax_vm::errors::with_causes(error) };
    let mut said = format!("{}: {}", db.severity(), db.message());
    // The server's detail and hint often name the way out (a role that may not log in, a
    // database being shut down, the units a setting takes): they are kept.
    for (label, part) in [("detail", db.detail()), ("hint", db.hint())] {
        if let Some(part) = part.filter(|part| !part.trim().is_empty()) {
            said.push_str(&format!("; {label}: {}", part.trim()));
        }
    }
    said
}

pub(crate) fn db_error(id: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
    move |error| io_error(id, describe(&error))
}

pub(crate) fn number(id: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| io_error(id, format!("{value} does not fit the store's bigint columns")))
}

pub(crate) fn corrupt(id: &str, message: String) -> StoreError {
    StoreError::Corrupt { id: id.to_string(), message }
}
