//! Connection discipline under attack: sockets that never send a byte, thousands of them
//! from a few addresses, and form bodies that never finish. Each test holds the attack
//! open while a real client is served, and only hang guards are timed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::*;

/// The bound on every wait here: it ends a hang, it measures nothing.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Idle sockets in the lock-out attack: more than the default total cap.
const IDLE_SOCKETS: usize = 4_100;

/// Unfinished form bodies in the slow-body attack.
const SLOW_FORMS: usize = 300;

/// Raises this process's open-file limit to its hard limit: the attack's sockets and the
/// server's ends of them all live in this one test process.
fn allow_many_descriptors(needed: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
    setrlimit(Resource::Nofile, raised).expect("the soft limit can rise to the hard one");
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    assert!(now >= needed, "this test needs {needed} open files; the hard limit is {now}: raise it (ulimit -Hn)");
}

/// A connection to `server` from the loopback address `127.0.0.{host}`.
async fn connect_from(host: u8, server: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)), 0))?;
    socket.connect(server.parse().expect("a socket address")).await
}

/// One `GET /healthz` from `127.0.0.{host}` on a fresh connection: the status line.
async fn healthz_from(host: u8, server: &str) -> String {
    let asked = async {
        let mut stream = connect_from(host, server).await.expect("connects");
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("sent");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("read");
        String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_string()
    };
    tokio::time::timeout(HANG_GUARD, asked).await.expect("/healthz is answered while the attack holds its sockets")
}

/// What the server sends on `stream` until it closes it: the answer's first line (empty
/// when it closed without one).
async fn closed_with(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server never closed the connection");
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_never_sends_a_byte_is_closed_at_the_first_request_deadline() {
    // The default limits: the point is what a runner does out of the box.
    let running = listen(Arc::new(server_of_desk())).await;
    let mut silent = TcpStream::connect(running.address()).await.expect("connects");
    let said = closed_with(&mut silent).await;
    assert_eq!(said, "", "closed without an answer");
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_sockets_from_a_few_addresses_do_not_lock_out_another_client() {
    allow_many_descriptors(3 * IDLE_SOCKETS as u64);
    let running = listen(Arc::new(server_of_desk())).await;
    let address = running.address().to_string();
    // Ten attacking addresses, 410 sockets each, none of which ever sends a byte.
    let mut idle = Vec::with_capacity(IDLE_SOCKETS);
    for index in 0..IDLE_SOCKETS {
        let host = 10 + (index % 10) as u8;
        idle.push(connect_from(host, &address).await.expect("the attack connects"));
    }
    // Another address is served at once, health check and real work alike.
    assert_eq!(healthz_from(2, &address).await, "HTTP/1.1 200 OK");
    let started = tokio::time::timeout(HANG_GUARD, running.start_desk(Some(ADMIN), "under-attack")).await;
    assert!(started.is_ok(), "a session starts while the idle sockets are held");
    // Each attacking address keeps at most its share: the rest were closed on accept.
    let mut closed = 0;
    for stream in &mut idle {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(1), stream.read(&mut byte)).await {
            closed += 1;
        }
    }
    let kept = IDLE_SOCKETS - closed;
    assert!(kept <= 10 * archmax_serve::MAX_CONNECTIONS_PER_PEER, "{kept} idle sockets kept open");
    drop(idle);
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_unfinished_sign_in_forms_are_cut_off_while_others_are_served() {
    let mut server = server_of_desk();
    server.body_timeout = Duration::from_millis(500);
    let running = listen(Arc::new(server)).await;
    let address = running.address().to_string();
    let mut slow = Vec::with_capacity(SLOW_FORMS);
    for index in 0..SLOW_FORMS {
        let host = 20 + (index % 6) as u8;
        let mut stream = connect_from(host, &address).await.expect("the attack connects");
        // Half announce a body of nearly 2 MB and send part of it; half send a few
        // chunks of a chunked body that never ends.
        let head = if index % 2 == 0 {
            "POST /sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 2000000\r\n\r\ntoken="
                .to_string()
        } else {
            "POST /sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n"
                .to_string()
                + &"a".repeat(1024)
                + "\r\n"
        };
        stream.write_all(head.as_bytes()).await.expect("sent");
        slow.push(stream);
    }
    // While they hang, the runner answers others.
    assert_eq!(healthz_from(2, &address).await, "HTTP/1.1 200 OK");
    let started = tokio::time::timeout(HANG_GUARD, running.start_desk(Some(ADMIN), "beside-slow-forms")).await;
    assert!(started.is_ok(), "a session starts while the slow forms are open");
    // Each slow form is refused (too large, or too slow) and its connection closed.
    for stream in &mut slow {
        let said = closed_with(stream).await;
        assert!(said.starts_with("HTTP/1.1 4"), "answered `{said}`");
    }
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_body_past_the_form_limit_is_refused_before_it_is_read() {
    let running = listen(Arc::new(server_of_desk())).await;
    let limit = archmax_serve::request_limits::FORM_BODY_LIMIT;
    let mut stream = TcpStream::connect(running.address()).await.expect("connects");
    let head = format!(
        "POST /sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        limit + 1
    );
    stream.write_all(head.as_bytes()).await.expect("sent");
    assert_eq!(closed_with(&mut stream).await, "HTTP/1.1 413 Payload Too Large");
    // A form within the limit reaches the sign-in handler (refused there for its CSRF
    // token, which is the handler's business, not the limit's).
    let client = reqwest::Client::new();
    let answered = client
        .post(format!("{}/sign-in", running.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", "t".repeat(limit - 100)))
        .send()
        .await
        .expect("answered");
    assert_ne!(answered.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_per_peer_cap_an_address_is_closed_while_another_is_served() {
    let limits = archmax_serve::ConnectionLimits { max_connections_per_peer: 2, ..Default::default() };
    let running = listen_with(Arc::new(server_of_desk()), limits).await;
    let address = running.address().to_string();
    let _first = connect_from(30, &address).await.expect("connects");
    let _second = connect_from(30, &address).await.expect("connects");
    let mut third = connect_from(30, &address).await.expect("the kernel accepts it");
    assert_eq!(closed_with(&mut third).await, "", "closed without an answer");
    assert_eq!(healthz_from(31, &address).await, "HTTP/1.1 200 OK");
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_is_closed_after_its_idle_timeout() {
    let limits = archmax_serve::ConnectionLimits { idle_timeout: Duration::from_millis(300), ..Default::default() };
    let running = listen_with(Arc::new(server_of_desk()), limits).await;
    let mut stream = TcpStream::connect(running.address()).await.expect("connects");
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("sent");
    // The answer, then nothing more from the client: the server closes the connection.
    let said = closed_with(&mut stream).await;
    assert_eq!(said, "HTTP/1.1 200 OK");
    assert!(running.stop().await);
}

/// The desk on the tape, bearer tokens configured (so the inbox serves its forms).
fn server_of_desk() -> Server {
    let auth = Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens");
    api_server(Arc::new(MemoryStore::new()), auth, TurnLimits::default(), 64 * 1024)
}
