//! The accept loop and what bounds a connection: how many are served at once, how many
//! one peer may hold, and how long one may sit without sending a request.
//!
//! ```text
//! accept ─▶ total cap (a slot, else wait in the listen backlog)
//!        ─▶ per-peer cap (over it: closed at once)
//!        ─▶ HTTP/1 ─ first request head within `first_request_timeout`, else closed
//!                   ─ each later head within `idle_timeout` of the last answer, else closed
//! ```
//!
//! The one thing to know: a socket that never sends a byte costs a slot only until its
//! first-request deadline, and one address can never hold more than
//! `max_connections_per_peer` of the `max_connections` slots, so idle or half-open
//! sockets from a few addresses cannot lock every other client out. Request bodies are
//! bounded per request by the router's layers ([`crate::request_limits`]), not here.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::sync::Notify;

use crate::server::Server;
use crate::{recovery, routes};

/// How long a new connection may take to send its first complete request head.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a kept-alive connection may wait for its next complete request head after
/// an answer (also the bound on reading any one head).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections served at once; past it, new ones wait in the listen backlog
/// until one closes (many slow or idle clients cannot exhaust memory or descriptors).
pub const MAX_CONNECTIONS: usize = 4096;

/// The most connections one peer (an IPv4 address, an IPv6 /64) holds at once.
pub const MAX_CONNECTIONS_PER_PEER: usize = 64;

/// How the accept loop bounds connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// How long admitted turns and open connections get after `shutdown` resolves.
    pub grace: Duration,
    /// From accept to the first request's complete head.
    pub first_request_timeout: Duration,
    /// From an answer to the next request's complete head on a kept-alive connection.
    pub idle_timeout: Duration,
    /// The most connections served at once.
    pub max_connections: usize,
    /// The most connections one peer holds at once (`0`: no per-peer cap, for a runner
    /// whose every client arrives through one proxy).
    pub max_connections_per_peer: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            grace: Duration::from_secs(30),
            first_request_timeout: FIRST_REQUEST_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_connections_per_peer: MAX_CONNECTIONS_PER_PEER,
        }
    }
}

/// Serves `server` on `listener` under `limits` until `shutdown` resolves (see
/// [`crate::serve`]).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> std::io::Result<bool> {
    let app = routes::router(Arc::clone(&server));
    tokio::spawn(recovery::resume_cut_turns(Arc::clone(&server), recovery::RECOVERY_AT_ONCE));
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    // HTTP/1 only, so the connection reads request heads from its first byte (the
    // protocol sniffing of `auto` would wait for a first byte with no timer at all).
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.idle_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let peers = Arc::new(PeerCounts::new(limits.max_connections_per_peer));
    let mut warnings = Warnings::default();
    loop {
        let accepted = tokio::select! {
            accepted = async {
                let slot = Arc::clone(&slots).acquire_owned().await;
                (slot, listener.accept().await)
            } => accepted,
            () = &mut shutdown => break,
        };
        let (Ok(slot), accepted) = accepted else { break };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: back off a little, keep serving.
            Err(error) => {
                warnings.say(|| tracing::warn!(%error, "could not accept a connection"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(peer_slot) = PeerCounts::admit(&peers, peer) else {
            warnings.say(|| {
                tracing::warn!(peer = %peer.ip(), cap = limits.max_connections_per_peer, "connection closed: its address holds the most connections one peer may")
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let first_request = Arc::new(Notify::new());
        let service = hyper_util::service::TowerToHyperService::new(FirstRequestSignal {
            // The peer's address, for what is counted per client (sign-in throttling).
            inner: app.clone().layer(axum::Extension(axum::extract::ConnectInfo(peer))),
            seen: Arc::clone(&first_request),
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
        let watched = connections.watch(connection);
        let first_request_timeout = limits.first_request_timeout;
        tokio::spawn(async move {
            let mut watched = std::pin::pin!(watched);
            tokio::select! {
                _ = &mut watched => {}
                () = first_request.notified() => {
                    let _ = watched.await;
                }
                // No complete request head in time: dropping the connection closes it.
                () = tokio::time::sleep(first_request_timeout) => {}
            }
            drop((slot, peer_slot));
        });
    }
    drop(listener);
    server.stop_accepting();
    // One deadline for both: open connections finish their request (event streams end as
    // the server stops), admitted turns finish; what is still open then is dropped.
    let deadline = tokio::time::Instant::now() + limits.grace;
    let _ = tokio::time::timeout_at(deadline, connections.shutdown()).await;
    Ok(server.gate.drain(deadline.saturating_duration_since(tokio::time::Instant::now())).await)
}

/// A warning said at most once a second, so a flood of refused connections is one line
/// a second, not one a connection.
#[derive(Default)]
struct Warnings {
    last: Option<tokio::time::Instant>,
}

impl Warnings {
    fn say(&mut self, warn: impl FnOnce()) {
        if self.last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            warn();
            self.last = Some(tokio::time::Instant::now());
        }
    }
}

/// The open connections of each peer, against the per-peer cap.
struct PeerCounts {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection's place in its peer's count (none without a cap); dropping
/// it gives the place back.
struct PeerSlot {
    peers: Arc<PeerCounts>,
    peer: Option<IpAddr>,
}

impl PeerCounts {
    fn new(cap: usize) -> PeerCounts {
        PeerCounts { cap, open: Mutex::new(HashMap::new()) }
    }

    /// A place for one more connection from `address`, unless its peer holds the cap.
    fn admit(peers: &Arc<PeerCounts>, address: SocketAddr) -> Option<PeerSlot> {
        if peers.cap == 0 {
            return Some(PeerSlot { peers: Arc::clone(peers), peer: None });
        }
        let peer = peer_of(address.ip());
        let mut open = peers.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(peer).or_insert(0);
        if *count >= peers.cap {
            return None;
        }
        *count += 1;
        Some(PeerSlot { peers: Arc::clone(peers), peer: Some(peer) })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let Some(peer) = self.peer else { return };
        let mut open = self.peers.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&peer);
            }
        }
    }
}

/// Who a connection counts against: its IPv4 address, or its IPv6 /64 (one host is
/// usually handed a whole /64, so counting single IPv6 addresses would bound nothing).
pub(crate) fn peer_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
    }
}

/// The router, telling its connection's task that a complete request head arrived (the
/// service is called only once hyper has parsed one).
#[derive(Clone)]
struct FirstRequestSignal<S> {
    inner: S,
    seen: Arc<Notify>,
}

impl<S, Request> tower_service::Service<Request> for FirstRequestSignal<S>
where
    S: tower_service::Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request) -> S::Future {
        self.seen.notify_one();
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_peers_count_by_their_64_prefix_and_mapped_ipv4_as_ipv4() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("v6");
        let other: IpAddr = "2001:db8:1:2:bbbb::9".parse().expect("v6");
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().expect("v6");
        assert_eq!(peer_of(one), peer_of(other));
        assert_ne!(peer_of(one), peer_of(elsewhere));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("mapped");
        assert_eq!(peer_of(mapped), "192.0.2.7".parse::<IpAddr>().expect("v4"));
    }

    #[test]
    fn a_peer_past_its_cap_is_refused_until_one_of_its_connections_closes() {
        let peers = Arc::new(PeerCounts::new(2));
        let at = |ip: &str| SocketAddr::new(ip.parse().expect("ip"), 1);
        let first = PeerCounts::admit(&peers, at("192.0.2.1")).expect("first");
        let _second = PeerCounts::admit(&peers, at("192.0.2.1")).expect("second");
        assert!(PeerCounts::admit(&peers, at("192.0.2.1")).is_none(), "the third is refused");
        assert!(PeerCounts::admit(&peers, at("192.0.2.2")).is_some(), "another peer is not");
        drop(first);
        assert!(PeerCounts::admit(&peers, at("192.0.2.1")).is_some(), "a place came back");
        let uncapped = Arc::new(PeerCounts::new(0));
        assert!((0..1000).all(|_| PeerCounts::admit(&uncapped, at("192.0.2.1")).is_some()));
    }
}
