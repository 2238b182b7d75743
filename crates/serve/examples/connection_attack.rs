//! The connection attack of issue 29, measured: `cargo run -p archmax-serve --example
//! connection_attack` (add `--release` for release timings).
//!
//! The real server on loopback, with the default limits, in this process; the attacker's
//! sockets are plain file descriptors here too (no user-space buffers), so the growth of
//! this process's resident set is the server's. Three attacks, one after another:
//!
//! 1. 4,100 sockets that never send a byte, from ten loopback addresses;
//! 2. 4,100 such sockets from seventy addresses (under each address's cap, so together
//!    they fill the total cap);
//! 3. 600 unfinished `POST /sign-in` forms from ten addresses: half announce 2,000,000
//!    bytes and send what the server lets them, half send 7 KiB of a chunked body and
//!    stall;
//! 4. 300 connections from seventy addresses that each pipeline twenty
//!    `GET /v1/openapi.json` and never read (a 4 KiB receive window): the answers fill the
//!    sockets and the server's next write on each sits blocked until the write-progress
//!    deadline closes it. (Not 4,100: the document is built anew for every request, which
//!    in a debug build makes the attack's set-up take minutes; the memory each blocked
//!    connection holds is the figure sought. `/healthz` waits for the deadline once such
//!    connections fill the total cap, as for silent sockets.)
//!
//! For each: the peak resident set while the attack is held (`VmHWM`, reset before it
//! starts through `/proc/self/clear_refs`) against the resident set before, and the time
//! `GET /healthz` from another address takes to be answered while the attack is held.
//! Nothing here asserts: it prints what it measured.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::{analyze_workspace, load_memory};
use archmax_serve::auth::Auth;
use archmax_serve::turns::TurnLimits;
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::FixedClock;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::memory::MemoryStore;

const DESK: &str = "title: Desk\ninstructions: Answer.\nstates:\n  answer:\n    triggers:\n      manual:\n        description: Ask.\n    instructions: Answer.\n";

/// Health checks timed during each attack.
const SAMPLES: usize = 20;

fn server() -> Server {
    let workspace = load_memory([("workflows/desk/workflow.yaml", DESK)]).expect("the desk loads");
    let program = lower(
        &analyze_workspace(workspace),
        &[],
        &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT },
    )
    .expect("the desk lowers");
    Server::new(ServerParts {
        programs: vec![program],
        store: Arc::new(MemoryStore::new()),
        model: Arc::new(Tape::parse("attack", "- { state: answer, text: Answered. }\n").expect("tape")),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        pricing: PricingTable::default(),
        root: std::env::temp_dir(),
        auth: Auth::configure(Some("attack-example-token-0123456789"), None).expect("a token"),
        limits: TurnLimits::default(),
        body_limit: archmax_serve::server::DEFAULT_BODY_LIMIT,
        tools: Default::default(),
        context: Default::default(),
        budgets: Default::default(),
    })
    .expect("the server builds")
}

/// A `/proc/self/status` figure in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts a fresh peak: `VmHWM` becomes the resident set now.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn allow_many_descriptors() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(Resource::Nofile, rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum });
}

async fn connect_from(host: u8, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)), 0))?;
    socket.connect(server).await
}

/// How long `GET /healthz` from 127.0.0.2 takes to be answered (`None`: not in 60 s).
async fn healthz_time(server: SocketAddr) -> Option<Duration> {
    let began = Instant::now();
    let asked = async {
        let mut stream = connect_from(2, server).await.ok()?;
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        answer.starts_with(b"HTTP/1.1 200").then_some(())
    };
    tokio::time::timeout(Duration::from_secs(60), asked).await.ok().flatten().map(|()| began.elapsed())
}

/// Prints the health-check times and the memory of one attack held open.
async fn measure(name: &str, server: SocketAddr, before_kib: u64, samples: usize) {
    let mut times = Vec::new();
    for _ in 0..samples {
        match healthz_time(server).await {
            Some(time) => times.push(time),
            None => println!("{name}: /healthz was not answered within 60 s"),
        }
    }
    times.sort();
    let peak = status_kib("VmHWM").unwrap_or(0);
    let shown =
        |time: Option<&Duration>| time.map_or("-".to_string(), |time| format!("{:.1} ms", time.as_secs_f64() * 1e3));
    println!(
        "{name}: /healthz p50 {} max {} ({} of {samples} answered); resident set {} MiB before, peak {} MiB (+{} MiB)",
        shown(times.get(times.len() / 2)),
        shown(times.last()),
        times.len(),
        before_kib / 1024,
        peak / 1024,
        peak.saturating_sub(before_kib) / 1024,
    );
}

async fn idle_sockets(server: SocketAddr, count: usize, addresses: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(count);
    for index in 0..count {
        let host = 10 + (index % addresses) as u8;
        if let Ok(stream) = connect_from(host, server).await {
            held.push(stream);
        }
    }
    held
}

async fn never_reading(server: SocketAddr, count: usize, addresses: usize) -> Vec<TcpStream> {
    let pipelined = "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20);
    let mut held = Vec::with_capacity(count);
    for index in 0..count {
        let Ok(socket) = TcpSocket::new_v4() else { continue };
        let _ = socket.set_recv_buffer_size(4096);
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + (index % addresses) as u8)), 0);
        if socket.bind(from).is_err() {
            continue;
        }
        let Ok(mut stream) = socket.connect(server).await else { continue };
        let _ = tokio::time::timeout(Duration::from_millis(200), stream.write_all(pipelined.as_bytes())).await;
        held.push(stream);
    }
    held
}

async fn unfinished_forms(server: SocketAddr, count: usize) -> Vec<TcpStream> {
    let filler = vec![b'a'; 64 * 1024];
    let mut held = Vec::with_capacity(count);
    for index in 0..count {
        let Ok(mut stream) = connect_from(100 + (index % 10) as u8, server).await else { continue };
        if index % 2 == 0 {
            let head = "POST /sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 2000000\r\n\r\ntoken=";
            let _ = stream.write_all(head.as_bytes()).await;
            // As much of the body as the server takes, up to 1,999,000 bytes.
            let mut sent = 0;
            while sent < 1_999_000 {
                match tokio::time::timeout(Duration::from_millis(200), stream.write(&filler)).await {
                    Ok(Ok(written)) if written > 0 => sent += written,
                    _ => break,
                }
            }
        } else {
            let head = format!(
                "POST /sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n1c00\r\n{}\r\n",
                "a".repeat(0x1c00)
            );
            let _ = stream.write_all(head.as_bytes()).await;
        }
        held.push(stream);
    }
    held
}

/// Opens the sockets of one attack, measures while they are held, then lets them go.
async fn hold(
    name: &str,
    server: SocketAddr,
    samples: usize,
    attack: impl std::future::Future<Output = Vec<TcpStream>>,
) {
    let before = status_kib("VmRSS").unwrap_or(0);
    reset_peak();
    let held = attack.await;
    measure(&format!("{} {name}", held.len()), server, before, samples).await;
    drop(held);
    tokio::time::sleep(Duration::from_millis(500)).await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    allow_many_descriptors();
    archmax_vm::model::openai::install_tls_provider();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let address = listener.local_addr().expect("an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let served = tokio::spawn(archmax_serve::serve(listener, Arc::new(server()), shutdown, Duration::from_secs(5)));
    let _ = healthz_time(address).await;
    println!("limits: {:?}", archmax_serve::ConnectionLimits::default());

    hold("idle sockets from 10 addresses", address, SAMPLES, idle_sockets(address, 4_100, 10)).await;
    hold("idle sockets from 70 addresses", address, 3, idle_sockets(address, 4_100, 70)).await;
    hold("unfinished sign-in forms", address, SAMPLES, unfinished_forms(address, 600)).await;
    hold("never-reading pipelines from 70 addresses", address, 3, never_reading(address, 300, 70)).await;

    let _ = stop.send(());
    let _ = served.await;
}
