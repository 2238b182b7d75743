//! # archmax-serve
//!
//! `archmax serve`: the production runner. An HTTP API (axum, on a multi-threaded tokio
//! runtime) over one or more [`archmax_vm::Runtime`]s that share a session store, a
//! model and one event sink:
//!
//! ```text
//! routes (thin handlers: auth, parse) ─▶ Server (checks fields, finds the runtime)
//!                                           ├ TurnGate: one turn per session, N in flight, a queue
//!                                           ├ Runtime::run_turn / decide / deliver (a task per turn)
//!                                           └ Hub: each session's events, for SSE and acceptance
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
pub mod error;
pub mod hub;
pub mod metrics;
pub mod openapi;
pub mod recovery;
pub mod routes;
pub mod server;
pub mod turns;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use server::{Server, ServerError, ServerParts};

/// Serves `server` on `listener` until `shutdown` resolves; then stops accepting turns
/// and connections, lets admitted turns finish within `grace` (each committed step is
/// durable, so a turn cut short resumes in the next process) and returns whether every
/// turn ended. Sessions a previous process left mid-turn are continued from the start
/// ([`recovery::resume_cut_turns`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<bool> {
    let app = routes::router(Arc::clone(&server));
    let stopping = Arc::clone(&server);
    tokio::spawn(recovery::resume_cut_turns(Arc::clone(&server), recovery::RECOVERY_AT_ONCE));
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stopping.stop_accepting();
        })
        .await?;
    Ok(server.gate.drain(grace).await)
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
