//! The accept loop and what bounds a connection: how many are served at once, how many
//! one peer may hold, how long one may sit without sending a request, how long it may
//! leave an answer unread, and how long it is kept alive at all.
//!
//! ```text
//! accept ─▶ total cap (a slot, else wait in the listen backlog)
//!        ─▶ per-peer cap, and per-/48 cap for IPv6 (over either: closed at once)
//!        ─▶ HTTP/1 ─ first request head within `first_request_timeout`, else closed
//!                   ─ each later head within `idle_timeout` of the last answer, else closed
//!                   ─ an answer the peer takes no byte of for `write_timeout`: closed
//!                   ─ the answer to the `max_requests_per_connection`th request, or to the
//!                     first request after `max_connection_age`, says `Connection: close`
//! ```
//!
//! The one thing to know: every way of holding a slot ends. A socket that never sends a
//! byte costs a slot until its first-request deadline; one that stops reading its answers
//! until the write-progress deadline; one that keeps asking, until its request or age cap
//! closes it after an answer (at most `max_connection_age` plus one idle timeout plus that
//! answer). The age and request caps only refuse keep-alive reuse: an answer in flight,
//! such as an event stream that is being read, is never cut by them. One address (an IPv6
//! /64) can never hold more than `max_connections_per_peer` of the `max_connections`
//! slots, nor one IPv6 /48 more than `max_connections_per_network`. Request
//! bodies are bounded per request by the router's layers ([`crate::request_limits`]).

mod write_progress;

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::sync::Notify;

use crate::server::Server;
use crate::{recovery, routes};

pub use write_progress::WriteStalled;

/// How long a new connection may take to send its first complete request head.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a kept-alive connection may wait for its next complete request head after
/// an answer (also the bound on reading any one head).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an answer may go without the peer taking a byte of it before the connection
/// is closed (a peer that stops reading, or advertises a zero window, frees its slot).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection is kept alive: the first answer after this says
/// `Connection: close`.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(10 * 60);

/// How many requests one connection is served: the answer to the last says
/// `Connection: close`.
pub const MAX_REQUESTS_PER_CONNECTION: usize = 1_000;

/// The most connections served at once; past it, new ones wait in the listen backlog
/// until one closes (many slow or idle clients cannot exhaust memory or descriptors).
pub const MAX_CONNECTIONS: usize = 4096;

/// The most connections one peer (an IPv4 address, an IPv6 /64) holds at once.
pub const MAX_CONNECTIONS_PER_PEER: usize = 64;

/// The most connections one IPv6 /48 holds at once: four peers' worth, so an attacker
/// needs sixteen /48s, not sixty-four /64s of one, to fill [`MAX_CONNECTIONS`].
pub const MAX_CONNECTIONS_PER_NETWORK: usize = 4 * MAX_CONNECTIONS_PER_PEER;

/// How the accept loop bounds connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// How long admitted turns and open connections get after `shutdown` resolves.
    pub grace: Duration,
    /// From accept to the first request's complete head.
    pub first_request_timeout: Duration,
    /// From an answer to the next request's complete head on a kept-alive connection.
    pub idle_timeout: Duration,
    /// How long a blocked write waits for the peer to take a byte.
    pub write_timeout: Duration,
    /// From accept to the last request whose answer keeps the connection alive.
    pub max_connection_age: Duration,
    /// The most requests served on one connection (`0` counts as `1`).
    pub max_requests_per_connection: usize,
    /// The most connections served at once.
    pub max_connections: usize,
    /// The most connections one peer holds at once (`0`: no per-peer cap, for a runner
    /// whose every client arrives through one proxy; the per-network cap is then off too).
    pub max_connections_per_peer: usize,
    /// The most connections one IPv6 /48 holds at once (`0`: no such cap).
    pub max_connections_per_network: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            grace: Duration::from_secs(30),
            first_request_timeout: FIRST_REQUEST_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            write_timeout: WRITE_TIMEOUT,
            max_connection_age: MAX_CONNECTION_AGE,
            max_requests_per_connection: MAX_REQUESTS_PER_CONNECTION,
            max_connections: MAX_CONNECTIONS,
            max_connections_per_peer: MAX_CONNECTIONS_PER_PEER,
            max_connections_per_network: MAX_CONNECTIONS_PER_NETWORK,
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
    tokio::spawn(recovery::recover(Arc::clone(&server)));
    tokio::spawn(server.hub.clone().follow(server.stopping()));
    tokio::spawn(Arc::clone(&server.notify).run(server.stopping()));
    tokio::spawn(Arc::clone(&server).run_waiting_scan());
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    // HTTP/1 only, so the connection reads request heads from its first byte (the
    // protocol sniffing of `auto` would wait for a first byte with no timer at all).
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.idle_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let peers = Arc::new(PeerCounts::new(limits.max_connections_per_peer, limits.max_connections_per_network));
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
                tracing::warn!(
                    peer = %peer.ip(),
                    per_peer = limits.max_connections_per_peer,
                    per_network = limits.max_connections_per_network,
                    "connection closed: its address, or its IPv6 /48, holds the most connections it may"
                )
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let usage = Arc::new(ConnectionUse::new(&limits));
        let service = hyper_util::service::TowerToHyperService::new(CountedRequests {
            // The peer's address, for what is counted per client (sign-in throttling).
            inner: app.clone().layer(axum::Extension(axum::extract::ConnectInfo(peer))),
            usage: Arc::clone(&usage),
        });
        let io = TokioIo::new(write_progress::WriteProgressDeadline::new(stream, limits.write_timeout));
        let connection = builder.serve_connection(io, service).into_owned();
        let watched = connections.watch(connection);
        let first_request_timeout = limits.first_request_timeout;
        tokio::spawn(async move {
            let mut watched = std::pin::pin!(watched);
            tokio::select! {
                _ = &mut watched => {}
                () = usage.first_request.notified() => {
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
    let drained = server.gate.drain(deadline.saturating_duration_since(tokio::time::Instant::now())).await;
    if !drained && !server.gate.cut_remaining(CUT_BOUND).await {
        tracing::warn!("a cut turn did not give its session back in time; its lease runs out by itself");
    }
    Ok(drained)
}

/// How long the turns cut at the end of a shutdown's grace get to give their sessions
/// back (a PostgreSQL lease release is one statement).
const CUT_BOUND: Duration = Duration::from_secs(5);

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

/// The open connections of each peer, against the per-peer cap, and of each IPv6 /48,
/// against the per-network cap.
struct PeerCounts {
    per_peer: usize,
    per_network: usize,
    open: Mutex<HashMap<Holder, usize>>,
}

/// Whom a connection is counted against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Holder {
    /// An IPv4 address or an IPv6 /64 ([`peer_of`]).
    Peer(IpAddr),
    /// An IPv6 /48 ([`network_of`]), which holds 65,536 /64s.
    Network(Ipv6Addr),
}

/// One admitted connection's places in its holders' counts (none without a cap);
/// dropping it gives them back.
struct PeerSlot {
    peers: Arc<PeerCounts>,
    holders: Vec<Holder>,
}

impl PeerCounts {
    /// Counts under `per_peer` and `per_network`; `per_peer` 0 turns both off (every
    /// client behind one proxy), `per_network` 0 the second alone.
    fn new(per_peer: usize, per_network: usize) -> PeerCounts {
        PeerCounts { per_peer, per_network, open: Mutex::new(HashMap::new()) }
    }

    fn cap_of(&self, holder: Holder) -> usize {
        match holder {
            Holder::Peer(_) => self.per_peer,
            Holder::Network(_) => self.per_network,
        }
    }

    /// A place for one more connection from `address`, unless its peer, or its IPv6 /48,
    /// holds its cap.
    fn admit(peers: &Arc<PeerCounts>, address: SocketAddr) -> Option<PeerSlot> {
        let mut holders = Vec::with_capacity(2);
        if peers.per_peer > 0 {
            holders.push(Holder::Peer(peer_of(address.ip())));
            if peers.per_network > 0 {
                holders.extend(network_of(address.ip()).map(Holder::Network));
            }
        }
        let mut open = peers.open.lock().unwrap_or_else(PoisonError::into_inner);
        if holders.iter().any(|holder| open.get(holder).is_some_and(|count| *count >= peers.cap_of(*holder))) {
            return None;
        }
        for holder in &holders {
            *open.entry(*holder).or_insert(0) += 1;
        }
        Some(PeerSlot { peers: Arc::clone(peers), holders })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        if self.holders.is_empty() {
            return;
        }
        let mut open = self.peers.open.lock().unwrap_or_else(PoisonError::into_inner);
        for holder in &self.holders {
            if let Some(count) = open.get_mut(holder) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    open.remove(holder);
                }
            }
        }
    }
}

/// Who a connection counts against: its IPv4 address, or its IPv6 /64 (one host is
/// usually handed a whole /64, so counting single IPv6 addresses would bound nothing).
pub(crate) fn peer_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(prefix_of(v6, 64)),
    }
}

/// The IPv6 /48 a connection comes from (a site is usually handed one, so one owner can
/// spread its connections over its 65,536 /64s); none for IPv4.
fn network_of(address: IpAddr) -> Option<Ipv6Addr> {
    match address.to_canonical() {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => Some(prefix_of(v6, 48)),
    }
}

/// `address` with all but its first `bits` bits cleared.
fn prefix_of(address: Ipv6Addr, bits: u32) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(address) & !(u128::MAX >> bits))
}

/// What one connection has used of its keep-alive: when it opened and how many
/// requests it has been served, against its caps; and the signal that its first complete
/// request head arrived (which ends its first-request deadline).
struct ConnectionUse {
    first_request: Notify,
    opened: tokio::time::Instant,
    requests: AtomicUsize,
    max_age: Duration,
    max_requests: usize,
}

impl ConnectionUse {
    fn new(limits: &ConnectionLimits) -> ConnectionUse {
        ConnectionUse {
            first_request: Notify::new(),
            opened: tokio::time::Instant::now(),
            requests: AtomicUsize::new(0),
            max_age: limits.max_connection_age,
            max_requests: limits.max_requests_per_connection.max(1),
        }
    }

    /// Whether the answer to the connection's `request_number`th request is its last.
    fn is_last(&self, request_number: usize) -> bool {
        request_number >= self.max_requests || self.opened.elapsed() >= self.max_age
    }
}

/// The router for one connection: it signals the first request and counts every one, and
/// the answer to the connection's last request carries `Connection: close`, so hyper
/// closes the connection once that answer is written (the service is called only once
/// hyper has parsed a complete head).
#[derive(Clone)]
struct CountedRequests<S> {
    inner: S,
    usage: Arc<ConnectionUse>,
}

type Answer<Body> = axum::http::Response<Body>;

impl<S, Request, Body> tower_service::Service<Request> for CountedRequests<S>
where
    S: tower_service::Service<Request, Response = Answer<Body>>,
{
    type Response = Answer<Body>;
    type Error = S::Error;
    type Future = futures_util::future::MapOk<S::Future, fn(Answer<Body>) -> Answer<Body>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.usage.first_request.notify_one();
        let request_number = self.usage.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let mark: fn(Answer<Body>) -> Answer<Body> =
            if self.usage.is_last(request_number) { closing } else { std::convert::identity };
        futures_util::TryFutureExt::map_ok(self.inner.call(request), mark)
    }
}

/// `answer`, saying the connection closes after it.
fn closing<Body>(mut answer: Answer<Body>) -> Answer<Body> {
    answer.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    answer
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
        let peers = Arc::new(PeerCounts::new(2, 0));
        let at = |ip: &str| SocketAddr::new(ip.parse().expect("ip"), 1);
        let first = PeerCounts::admit(&peers, at("192.0.2.1")).expect("first");
        let _second = PeerCounts::admit(&peers, at("192.0.2.1")).expect("second");
        assert!(PeerCounts::admit(&peers, at("192.0.2.1")).is_none(), "the third is refused");
        assert!(PeerCounts::admit(&peers, at("192.0.2.2")).is_some(), "another peer is not");
        drop(first);
        assert!(PeerCounts::admit(&peers, at("192.0.2.1")).is_some(), "a place came back");
        let uncapped = Arc::new(PeerCounts::new(0, 1));
        assert!((0..1000).all(|_| PeerCounts::admit(&uncapped, at("192.0.2.1")).is_some()));
    }

    #[test]
    fn one_ipv6_48_holds_at_most_its_network_cap_however_many_64s_it_spreads_over() {
        let peers = Arc::new(PeerCounts::new(2, 3));
        let at = |ip: &str| SocketAddr::new(ip.parse().expect("ip"), 1);
        // Three /64s of one /48, each under its own cap: the /48 is full after three.
        let first = PeerCounts::admit(&peers, at("2001:db8:7:1::1")).expect("first");
        let _second = PeerCounts::admit(&peers, at("2001:db8:7:2::1")).expect("second");
        let _third = PeerCounts::admit(&peers, at("2001:db8:7:3::1")).expect("third");
        assert!(PeerCounts::admit(&peers, at("2001:db8:7:4::1")).is_none(), "a fourth /64 of the /48 is refused");
        assert!(PeerCounts::admit(&peers, at("2001:db8:8:4::1")).is_some(), "another /48 is not");
        drop(first);
        assert!(PeerCounts::admit(&peers, at("2001:db8:7:4::1")).is_some(), "a place came back");
        // IPv4 peers have no network count; no per-peer cap turns the network cap off.
        let v4 = Arc::new(PeerCounts::new(5, 1));
        let held: Vec<_> = (0..5).filter_map(|host| PeerCounts::admit(&v4, at(&format!("192.0.2.{host}")))).collect();
        assert_eq!(held.len(), 5);
        let behind_a_proxy = Arc::new(PeerCounts::new(0, 1));
        let held: Vec<_> = (0..10).filter_map(|_| PeerCounts::admit(&behind_a_proxy, at("2001:db8:7:1::1"))).collect();
        assert_eq!(held.len(), 10);
    }
}
