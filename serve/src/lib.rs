//! # archmax-serve
//!
//! `archmax serve`: the production runner. An HTTP API (axum, on a multi-threaded tokio
//! runtime) over one or more [`archmax_vm::Runtime`]s that share a session store, a
//! model and one event sink:
//!
//! ```text
//! routes (thin handlers: auth, parse) ─▶ Server (checks fields, finds the runtime)
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
pub mod error;
pub mod hub;
pub mod metrics;
pub mod openapi;
pub mod recovery;
pub mod routes;
pub mod schedule;
pub mod server;
pub mod triggers;
pub mod turns;
pub mod webhooks;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use server::{Server, ServerError, ServerParts};

/// How long a client may take to send a request's headers before its connection is
/// closed (a slow or idle client must not hold a connection forever).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

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
    serve_with(listener, server, shutdown, grace, HEADER_READ_TIMEOUT).await
}

/// [`serve`], with the header-read timeout given.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    header_read_timeout: Duration,
) -> std::io::Result<bool> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;

    let app = routes::router(Arc::clone(&server));
    tokio::spawn(recovery::resume_cut_turns(Arc::clone(&server), recovery::RECOVERY_AT_ONCE));
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of file descriptors and the like: back off a little, keep serving.
            Err(error) => {
                tracing::warn!(%error, "could not accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
        let watched = connections.watch(connection);
        tokio::spawn(async move {
            let _ = watched.await;
        });
    }
    drop(listener);
    server.stop_accepting();
    // One deadline for both: open connections finish their request (event streams end as
    // the server stops), admitted turns finish; what is still open then is dropped.
    let deadline = tokio::time::Instant::now() + grace;
    let _ = tokio::time::timeout_at(deadline, connections.shutdown()).await;
    Ok(server.gate.drain(deadline.saturating_duration_since(tokio::time::Instant::now())).await)
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
