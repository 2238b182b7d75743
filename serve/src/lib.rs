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
pub mod inbox;
pub mod metrics;
pub mod openapi;
pub mod recovery;
pub mod routes;
pub mod schedule;
pub mod server;
pub mod triggers;
pub mod turns;
pub mod webhooks;
pub mod wire;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use server::{Server, ServerError, ServerParts};

/// How long a client may take to send a request's headers before its connection is
/// closed (a slow or idle client must not hold a connection forever).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections served at once; past it, new ones wait in the listen backlog
/// until one closes (many slow or idle clients cannot exhaust memory or descriptors).
pub const MAX_CONNECTIONS: usize = 4096;

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
    let limits = ConnectionLimits { grace, ..ConnectionLimits::default() };
    serve_with(listener, server, shutdown, limits).await
}

/// How the accept loop bounds connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// How long admitted turns and open connections get after `shutdown` resolves.
    pub grace: Duration,
    /// How long a client may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// The most connections served at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            grace: Duration::from_secs(30),
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// [`serve`], with every connection limit given.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> std::io::Result<bool> {
    let ConnectionLimits { grace, header_read_timeout, max_connections } = limits;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;

    let app = routes::router(Arc::clone(&server));
    tokio::spawn(recovery::resume_cut_turns(Arc::clone(&server), recovery::RECOVERY_AT_ONCE));
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
    let mut last_warning: Option<tokio::time::Instant> = None;
    loop {
        let accepted = tokio::select! {
            accepted = async {
                let slot = Arc::clone(&slots).acquire_owned().await;
                (slot, listener.accept().await)
            } => accepted,
            () = &mut shutdown => break,
        };
        let (Ok(slot), accepted) = accepted else { break };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of file descriptors and the like: back off a little, keep serving, and
            // say so at most once a second.
            Err(error) => {
                if last_warning.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                    tracing::warn!(%error, "could not accept a connection");
                    last_warning = Some(tokio::time::Instant::now());
                }
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
            drop(slot);
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
