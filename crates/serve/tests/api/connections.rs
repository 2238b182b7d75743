//! Connection discipline under attack: sockets that never send a byte, thousands of them
//! from a few addresses, form bodies that never finish, clients that keep a connection by
//! asking again just in time, and clients that never read their answers. Each test holds
//! the attack open while a real client is served, and only hang guards are timed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
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

/// Sends a start whose JSON body (`size` bytes, declared by `Content-Length` or sent
/// chunked) is past the API's body limit, in two pieces with a pause between them in
/// which a server that answered at once would have closed the connection; then the
/// status of the answer and of a `/healthz` asked next on the same connection.
async fn too_large_start_then_healthz(running: &Running, size: usize, chunked: bool) -> (String, String) {
    let asked = async {
        let mut stream = BufReader::new(TcpStream::connect(running.address()).await.expect("connects"));
        let framing =
            if chunked { "Transfer-Encoding: chunked".to_string() } else { format!("Content-Length: {size}") };
        let head = format!(
            "POST /v1/workflows/desk/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n\
             Content-Type: application/json\r\n{framing}\r\n\r\n"
        );
        let body = vec![b' '; size];
        let (first, rest) = body.split_at(16 * 1024);
        let frame = |piece: &[u8]| {
            if chunked {
                [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat()
            } else {
                piece.to_vec()
            }
        };
        let writer = stream.get_mut();
        writer.write_all(head.as_bytes()).await.expect("the head is sent");
        writer.write_all(&frame(first)).await.expect("the first piece is sent");
        tokio::time::sleep(Duration::from_millis(300)).await;
        writer.write_all(&frame(rest)).await.expect("the rest of the body is sent: the server still reads");
        if chunked {
            writer.write_all(b"0\r\n\r\n").await.expect("the last chunk is sent");
        }
        let refused = next_answer(&mut stream).await.expect("an answer to the start");
        assert!(!refused.closes, "the connection is kept after a body that was read to its end");
        stream.get_mut().write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("asked again");
        let next = next_answer(&mut stream).await.expect("an answer on the same connection");
        (refused.status, next.status)
    };
    tokio::time::timeout(HANG_GUARD, asked).await.expect("answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_somewhat_past_the_limit_is_read_to_its_end_so_the_client_gets_its_413() {
    let running = listen(Arc::new(server_of_desk())).await;
    let too_large = ("HTTP/1.1 413 Payload Too Large".to_string(), "HTTP/1.1 200 OK".to_string());
    assert_eq!(too_large_start_then_healthz(&running, 200 * 1024, false).await, too_large, "declared length");
    assert_eq!(too_large_start_then_healthz(&running, 200 * 1024, true).await, too_large, "chunked");
    // Far past the limit, the answer comes at once and the connection closes unread.
    let mut stream = TcpStream::connect(running.address()).await.expect("connects");
    let head = format!(
        "POST /v1/workflows/desk/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        64 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).await.expect("sent");
    assert_eq!(closed_with(&mut stream).await, "HTTP/1.1 413 Payload Too Large");
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

/// One answer read off a kept-alive connection: its status line and whether it said
/// the connection closes after it. `None` when the server closed the connection instead.
struct KeptAliveAnswer {
    status: String,
    closes: bool,
}

/// Reads one whole answer (head and a `Content-Length` body) from `stream`.
async fn next_answer(stream: &mut BufReader<TcpStream>) -> Option<KeptAliveAnswer> {
    let read = async {
        let mut status = String::new();
        if stream.read_line(&mut status).await.ok()? == 0 {
            return None;
        }
        let (mut length, mut closes) = (0usize, false);
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).await.ok()?;
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("content-length:") {
                length = value.trim().parse().ok()?;
            }
            closes |= line == "connection: close";
        }
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.ok()?;
        Some(KeptAliveAnswer { status: status.trim_end().to_string(), closes })
    };
    tokio::time::timeout(HANG_GUARD, read).await.expect("an answer or the end of the connection")
}

/// A client that keeps its connection by asking `/healthz` again well inside the idle
/// timeout: the answers it got, up to the one that closed the connection.
async fn ask_again_and_again(running: &Running, pause: Duration) -> Vec<KeptAliveAnswer> {
    let stream = TcpStream::connect(running.address()).await.expect("connects");
    let mut stream = BufReader::new(stream);
    let mut answers = Vec::new();
    let asked = async {
        loop {
            if stream.get_mut().write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.is_err() {
                return;
            }
            let Some(answer) = next_answer(&mut stream).await else { return };
            let closes = answer.closes;
            answers.push(answer);
            if closes {
                let mut rest = Vec::new();
                let ended = stream.read_to_end(&mut rest).await;
                assert!(ended.is_ok_and(|_| rest.is_empty()), "nothing follows the closing answer");
                return;
            }
            tokio::time::sleep(pause).await;
        }
    };
    let closed = tokio::time::timeout(HANG_GUARD, asked).await;
    assert!(closed.is_ok(), "the server kept the connection for ever: {} answers", answers.len());
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_asking_again_within_every_idle_timeout_is_closed_at_its_request_cap() {
    let limits = archmax_serve::ConnectionLimits {
        idle_timeout: Duration::from_secs(5),
        max_requests_per_connection: 3,
        ..Default::default()
    };
    let running = listen_with(Arc::new(server_of_desk()), limits).await;
    let answers = ask_again_and_again(&running, Duration::from_millis(100)).await;
    let statuses: Vec<&str> = answers.iter().map(|answer| answer.status.as_str()).collect();
    assert_eq!(statuses, ["HTTP/1.1 200 OK"; 3], "three requests are served, then the connection closes");
    assert_eq!(answers.iter().filter(|answer| answer.closes).count(), 1, "only the last says it closes");
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_asking_again_within_every_idle_timeout_is_closed_once_the_connection_is_too_old() {
    let limits = archmax_serve::ConnectionLimits {
        idle_timeout: Duration::from_secs(5),
        max_connection_age: Duration::from_secs(1),
        ..Default::default()
    };
    let running = listen_with(Arc::new(server_of_desk()), limits).await;
    let answers = ask_again_and_again(&running, Duration::from_millis(100)).await;
    assert!(answers.iter().all(|answer| answer.status == "HTTP/1.1 200 OK"), "every request was served");
    assert!(answers.len() > 1, "a young connection is kept alive");
    assert!(answers.last().is_some_and(|answer| answer.closes), "the connection ends with an answer");
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_pipelines_requests_and_never_reads_is_closed_and_its_slot_freed() {
    let limits = archmax_serve::ConnectionLimits {
        max_connections_per_peer: 1,
        write_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let running = listen_with(Arc::new(server_of_desk()), limits).await;
    let address = running.address().to_string();
    // A small receive window, and never a read: the server's answers soon fill it.
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small window");
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 40)), 0)).expect("binds");
    let mut reader_that_never_reads = socket.connect(address.parse().expect("an address")).await.expect("connects");
    let pipelined = "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n".repeat(PIPELINED_REQUESTS);
    reader_that_never_reads.write_all(pipelined.as_bytes()).await.expect("the requests fit the server's window");
    // The only slot of 127.0.0.40 comes back once the server gives up on that write: a
    // new connection from it is then served (until then, each is closed on accept).
    let served_again = async {
        loop {
            if healthz_attempt_from(40, &address).await == "HTTP/1.1 200 OK" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let freed = tokio::time::timeout(HANG_GUARD, served_again).await;
    assert!(freed.is_ok(), "the connection that never reads kept the address's only slot");
    drop(reader_that_never_reads);
    assert!(running.stop().await);
}

/// Requests the never-reading client pipelines: their answers (the whole document each)
/// are far more than the socket buffers between the two ends can hold.
const PIPELINED_REQUESTS: usize = 200;

/// One `GET /healthz` from `127.0.0.{host}`: the status line, or empty when the
/// connection was closed without an answer (as the per-peer cap does).
async fn healthz_attempt_from(host: u8, server: &str) -> String {
    let Ok(mut stream) = connect_from(host, server).await else { return String::new() };
    if stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.is_err() {
        return String::new();
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_that_is_read_keeps_flowing_past_every_connection_timeout() {
    let short = Duration::from_millis(300);
    let limits = archmax_serve::ConnectionLimits {
        idle_timeout: short,
        write_timeout: short,
        max_connection_age: short,
        max_requests_per_connection: 1,
        ..Default::default()
    };
    let server = api_server(Arc::new(MemoryStore::new()), Auth::Open, TurnLimits::default(), 64 * 1024);
    let running = listen_with(Arc::new(server), limits).await;
    running.start_desk(None, "s-long-stream").await;
    let url = format!("{}/v1/sessions/s-long-stream/events", running.base);
    let stream = running.client.get(&url).send().await.expect("the stream opens");
    let mut frames = EventFrames::new(stream);
    frames.until("\"event\":\"parked\"").await;
    // Quiet for longer than every connection timeout, then a decision posts events.
    tokio::time::sleep(4 * short).await;
    let (status, decided) = running
        .post("/v1/sessions/s-long-stream/decide?wait=60", None, json!({ "to": "done", "comment": "Invoice checked." }))
        .await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    let frame = frames.until("\"event\":\"decided\"").await;
    // An open server knows no decider; the comment travels with the event all the same.
    assert!(frame.contains("\"comment\":\"Invoice checked.\"") && !frame.contains("decidedBy"), "{frame}");
    assert!(running.stop().await, "open streams end at shutdown");
}

/// The frames of one event stream, read as they come.
pub(super) struct EventFrames {
    response: reqwest::Response,
    text: String,
}

impl EventFrames {
    pub(super) fn new(response: reqwest::Response) -> EventFrames {
        EventFrames { response, text: String::new() }
    }

    /// Reads frames until one holds `wanted`; returns that frame.
    pub(super) async fn until(&mut self, wanted: &str) -> String {
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let frame: String = self.text.drain(..end + 2).collect();
                if frame.contains(wanted) {
                    return frame;
                }
            }
            let chunk = tokio::time::timeout(HANG_GUARD, self.response.chunk()).await.expect("events arrive");
            let chunk =
                chunk.expect("the stream is not cut").unwrap_or_else(|| panic!("the stream ended before {wanted}"));
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// The desk on the tape, bearer tokens configured (so the inbox serves its forms).
fn server_of_desk() -> Server {
    let auth = Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens");
    api_server(Arc::new(MemoryStore::new()), auth, TurnLimits::default(), 64 * 1024)
}
