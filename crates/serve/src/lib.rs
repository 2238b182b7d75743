//! # archmax-serve
//!
//! `archmax serve`: the production runner. An HTTP API (axum, on a multi-threaded tokio
//! runtime) over one or more [`archmax_vm::Runtime`]s that share a session store, a
//! model and one event sink:
//!
//! ```text
//! routes (extractors: auth, parse)    ─▶ Server (checks fields, finds the runtime)
//!   POST /v1/triggers/{id} ─▶ webhooks     ├ generations: one Runtime per loaded program
//!                                           ├ TurnGate: one turn per session, N in flight, a queue
//!                                           ├ Runtime::run_turn / decide / deliver (a task per turn)
//!                                           ├ Hub: each session's events, for SSE and acceptance
//!                                           └ scheduler: wake triggers for sessions past resumeAt
//! ```
//!
//! The one thing to know: HTTP and auth live here, never in the VM; the VM is given the
//! decider's identity and asked to enforce `approvers`, and everything else it decides
//! itself. The store is any [`archmax_vm::session::SessionStore`] (the CLI passes the
//! filesystem store at `<root>/sessions`).
//!
//! On start, [`serve`] continues every session the last process was cut off in mid-turn
//! (status `running`; [`recovery`]): those no other process holds, a few at a time, each
//! logged, through the same turn gate as every request.

pub mod auth;
pub mod catalog;
pub(crate) mod clients;
pub mod connections;
pub mod error;
pub mod hub;
pub mod inbox;
pub mod metrics;
pub mod notify;
pub mod openapi;
pub mod recovery;
pub mod request_limits;
pub mod routes;
pub mod schedule;
pub mod server;
mod strict_json;
pub mod triggers;
pub mod turns;
pub mod webhooks;
pub mod wire;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use connections::{
    ConnectionLimits, FIRST_REQUEST_TIMEOUT, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, serve_with,
};
pub use server::{Server, ServerError, ServerParts};

/// Serves `server` on `listener` until `shutdown` resolves; then stops accepting turns
/// and connections, lets admitted turns finish within `grace` (each committed step is
/// durable, so a turn cut short resumes in the next process) and returns whether every
/// turn ended. Sessions a previous process left mid-turn are continued from the start,
/// and on a store a fleet shares, those of any runner that dies later
/// ([`recovery::recover`]). Connections are bounded as [`connections`] says;
/// [`serve_with`] takes other limits.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<bool> {
    let limits = ConnectionLimits { grace, ..ConnectionLimits::default() };
    serve_with(listener, server, shutdown, limits).await
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn termination_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
