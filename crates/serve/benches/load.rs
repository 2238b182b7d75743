//! The load generator: `cargo bench -p archmax-serve --bench load`.
//!
//! The real HTTP server on loopback, with an instant in-process model, serving a ring of
//! ten agent states. One turn is ten agent steps, each one model call answered at once
//! with one control call: `s0` … `s8` advance to the next state, `s9` waits (the session
//! parks awaiting input, so a delivery would go round again). N concurrent clients, each
//! with its own connection, start sessions with `?wait=` and time each turn from the
//! request's send to its answer. Reported:
//!
//! - turns/s, p50/p99 latency, the mean commit (the server's own histogram) and the CPU
//!   time per turn (this process's, and on PostgreSQL the server's) at 1, 8, 32 and 64 clients on the memory store and on the
//!   filesystem store (durable: every step committed to a temporary directory), and on
//!   the filesystem store in `/dev/shm`, which splits the device's fsync time from the
//!   store's own work;
//! - memory per idle parked session: the growth of the process's resident set
//!   (`/proc/self/statm`) while 10,000 sessions are started and left parked on the
//!   memory store, divided by 10,000; then the same over 10,000 more, once the event
//!   hub's bounded replay buffer is full (what one more session costs), with the
//!   average session's size as JSON and the hub's event bytes beside them;
//! - start-up with a 1,000-state artifact: in process, from the artifact's bytes to a
//!   listening server answering `/readyz`; and, when the release `archmax` binary is
//!   built (`cargo build --release -p archmax-cli`) or named by `ARCHMAX_BIN`, from
//!   spawning `archmax serve --artifact` to its first `/readyz` answer.
//!
//! Every phase is bounded in count and time and talks to loopback only. `LOAD_SECONDS`
//! sets how long each load point runs (default 3); for profiling, `LOAD_STORES` (of
//! `memory`, `filesystem`, `filesystem on /dev/shm`, `postgres`: a throwaway server with
//! fsync on, or `ARCHMAX_TEST_DATABASE_URL`) and `LOAD_CLIENTS` (of 1, 8, 32, 64),
//! comma-separated, pick the points, and `LOAD_TABLE_ONLY` skips the rest.
//! `LOAD_PG_CONNECTIONS` sets the PostgreSQL store's pool (default: the store's own
//! default, what `serve --store-connections` defaults to), for sizing it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use archmax_compiler::artifact;
use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, load_memory};
use archmax_serve::auth::Auth;
use archmax_serve::turns::TurnLimits;
use archmax_serve::{Server, ServerParts};
use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{PgOptions, PgStore};
use archmax_vm::clock::FixedClock;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, TokenUsage};
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{SessionStore, ToolCall};

/// States in the load ring: one turn visits each once.
const RING: usize = 10;
/// States in the start-up artifact.
const BIG_RING: usize = 1_000;
/// Sessions parked for the memory figure.
const PARKED: usize = 10_000;
/// The most turns one load point runs, whatever its time.
const MAX_TURNS_PER_POINT: usize = 200_000;

/// A ring of `states` agent states, `s0` → `s1` → … → the last → `s0`.
fn ring_yaml(states: usize) -> String {
    let mut yaml = String::from("title: Ring\ninstructions: Walk the ring one state at a time.\nstates:\n");
    for index in 0..states {
        yaml.push_str(&format!("  s{index}:\n"));
        if index == 0 {
            yaml.push_str("    triggers:\n      manual:\n        description: Walk once around.\n");
        }
        yaml.push_str(&format!(
            "    instructions: Step {index} of the ring.\n    transitions:\n      - to: s{}\n        description: Step {index} is done.\n",
            (index + 1) % states
        ));
    }
    yaml
}

fn ring_program(states: usize) -> Program {
    let yaml = ring_yaml(states);
    let workspace = load_memory([("workflows/ring/workflow.yaml", yaml.as_str())]).expect("the ring loads");
    lower(&analyze_workspace(workspace), &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .expect("the ring lowers")
}

/// Answers at once: advance to the next state, or wait at the last.
struct InstantModel;

impl ModelAdapter for InstantModel {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        let index = request.state.strip_prefix('s').and_then(|number| number.parse::<usize>().ok()).unwrap_or(0);
        let (name, args) = if index + 1 < RING {
            ("archmax_advance", json!({ "to": format!("s{}", index + 1), "reason": "step done" }))
        } else {
            ("archmax_wait", json!({ "until": "1d", "reason": "the lap is done" }))
        };
        let call = ToolCall { id: format!("call-{}", request.messages.len() + 1), name: name.to_string(), args };
        let usage = TokenUsage { input: 900, output: 20, ..TokenUsage::default() };
        Box::pin(std::future::ready(Ok(ModelResponse {
            text: String::new(),
            tool_calls: vec![call],
            usage,
            ..ModelResponse::default()
        })))
    }
}

struct Served {
    base: String,
    server: Arc<Server>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<bool>>,
}

/// The server on a loopback port, serving `program` from `store`.
async fn serve(program: Program, store: Arc<dyn SessionStore>) -> Served {
    let server = Server::new(ServerParts {
        programs: vec![program],
        store,
        model: Arc::new(InstantModel),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        pricing: PricingTable::default(),
        root: std::env::temp_dir(),
        auth: Auth::Open,
        limits: TurnLimits { in_flight: 64, queued: 4096 },
        body_limit: archmax_serve::server::DEFAULT_BODY_LIMIT,
        tools: Default::default(),
        context: Default::default(),
        budgets: Default::default(),
    })
    .expect("the server builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let server = Arc::new(server);
    // Every client comes from loopback: no per-peer cap.
    let limits = archmax_serve::ConnectionLimits {
        grace: Duration::from_secs(10),
        max_connections_per_peer: 0,
        ..archmax_serve::ConnectionLimits::default()
    };
    let task = tokio::spawn(archmax_serve::serve_with(listener, Arc::clone(&server), shutdown, limits));
    Served { base, server, stop, task }
}

impl Served {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Starts one session and waits for its turn; the answer's status.
async fn one_turn(client: &reqwest::Client, base: &str) -> Result<String, String> {
    let response = client
        .post(format!("{base}/v1/workflows/ring/sessions?wait=60"))
        .json(&json!({ "message": "Go round." }))
        .send()
        .await
        .map_err(|error| error.to_string())?;
    let status = response.status();
    let body: Value = response.json().await.map_err(|error| error.to_string())?;
    if status != reqwest::StatusCode::OK {
        return Err(format!("{status}: {body}"));
    }
    Ok(body["status"].as_str().unwrap_or_default().to_string())
}

struct Point {
    turns: usize,
    seconds: f64,
    p50: Duration,
    p99: Duration,
    errors: usize,
    /// The mean committed step, as the server timed it.
    commit: Option<Duration>,
    /// CPU time this process spent (server and clients, user and system) over the point.
    cpu: Option<Duration>,
}

/// The CPU time (user and system) process `pid` and, with `children`, the processes whose
/// parent it is have spent so far, from `/proc` (clock ticks of 10 ms on Linux).
fn cpu_time(pid: u32, children: bool) -> Option<Duration> {
    let ticks_of = |stat: &str| -> Option<(u32, u64)> {
        // The command name is in parentheses and may hold spaces: fields count after it.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let parent = fields.get(1)?.parse().ok()?;
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some((parent, ticks))
    };
    let (_, mut ticks) = ticks_of(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    if children {
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(stat) = std::fs::read_to_string(entry.path().join("stat")).ok() else { continue };
            if let Some((_, child)) = ticks_of(&stat).filter(|(parent, _)| *parent == pid) {
                ticks += child;
            }
        }
    }
    Some(Duration::from_millis(ticks * 10))
}

/// `clients` clients, each turn after turn, for `duration` (or the turn cap).
async fn load_point(base: &str, clients: usize, duration: Duration) -> Point {
    // Warm up: connections open, allocator and caches warm.
    let warm = reqwest::Client::new();
    for _ in 0..20 {
        let _ = one_turn(&warm, base).await;
    }
    let began = Instant::now();
    let cpu_before = cpu_time(std::process::id(), false);
    let deadline = began + duration;
    let cap = MAX_TURNS_PER_POINT / clients;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let base = base.to_string();
        tasks.spawn(async move {
            let client = reqwest::Client::new();
            let mut latencies = Vec::new();
            let mut errors = 0;
            while Instant::now() < deadline && latencies.len() + errors < cap {
                let sent = Instant::now();
                match one_turn(&client, &base).await {
                    Ok(status) if status == "awaiting_input" => latencies.push(sent.elapsed()),
                    Ok(status) => {
                        errors += 1;
                        if errors == 1 {
                            eprintln!("a turn ended {status}, not parked");
                        }
                    }
                    Err(error) => {
                        errors += 1;
                        if errors == 1 {
                            eprintln!("a turn failed: {error}");
                        }
                    }
                }
            }
            (latencies, errors)
        });
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    while let Some(joined) = tasks.join_next().await {
        let (mine, failed) = joined.expect("a client task");
        latencies.extend(mine);
        errors += failed;
    }
    let seconds = began.elapsed().as_secs_f64();
    let cpu = cpu_time(std::process::id(), false).zip(cpu_before).map(|(after, before)| after.saturating_sub(before));
    latencies.sort();
    let at = |quantile: f64| {
        if latencies.is_empty() {
            return Duration::ZERO;
        }
        latencies[((latencies.len() as f64 * quantile).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    Point { turns: latencies.len(), seconds, p50: at(0.50), p99: at(0.99), errors, commit: None, cpu }
}

/// The mean time of a committed step over the point, warm-up included, from the server's
/// own `archmax_store_commit_duration_seconds` histogram.
async fn mean_commit(base: &str) -> Option<Duration> {
    let text = reqwest::get(format!("{base}/metrics")).await.ok()?.text().await.ok()?;
    let sample = |name: &str| {
        text.lines()
            .find(|line| line.starts_with(name) && line.contains("outcome=\"ok\""))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
    };
    let (sum, count) =
        (sample("archmax_store_commit_duration_seconds_sum")?, sample("archmax_store_commit_duration_seconds_count")?);
    (count > 0.0).then(|| Duration::from_secs_f64(sum / count))
}

/// The resident set, in bytes.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

fn page_size() -> u64 {
    // `statm` counts pages; `getconf` names their size (4 KiB when it cannot be asked).
    std::process::Command::new("getconf")
        .arg("PAGESIZE")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(4096)
}

/// Starts `count` sessions from 16 clients and leaves each parked; how many parked.
async fn park_sessions(base: &str, count: usize) -> usize {
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let base = base.to_string();
        tasks.spawn(async move {
            let client = reqwest::Client::new();
            let mut parked = 0;
            for _ in (worker..count).step_by(16) {
                if one_turn(&client, &base).await.is_ok_and(|status| status == "awaiting_input") {
                    parked += 1;
                }
            }
            parked
        });
    }
    let mut parked = 0;
    while let Some(joined) = tasks.join_next().await {
        parked += joined.unwrap_or(0);
    }
    parked
}

/// What parking sessions cost in memory.
struct Parked {
    /// Resident-set growth per session over the first [`PARKED`].
    first: f64,
    /// Growth per session over the next [`PARKED`], once the event hub's replay buffer
    /// (bounded in sessions and bytes) is full: what one more session costs.
    marginal: f64,
    /// The average parked session as JSON (transcript, trail, variables, head).
    session_json: f64,
    /// The bytes of event JSON the hub keeps for replay, over all sessions.
    hub_json: usize,
    parked: usize,
}

async fn parked_memory() -> Option<Parked> {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let served = serve(ring_program(RING), Arc::clone(&store)).await;
    // A few turns first, so the one-time costs (connections, caches) are not counted.
    let client = reqwest::Client::new();
    for _ in 0..50 {
        let _ = one_turn(&client, &served.base).await;
    }
    let settle = Duration::from_millis(300);
    tokio::time::sleep(settle).await;
    let before = resident_bytes()?;
    let first = park_sessions(&served.base, PARKED).await;
    tokio::time::sleep(settle).await;
    let middle = resident_bytes()?;
    let second = park_sessions(&served.base, PARKED).await;
    tokio::time::sleep(settle).await;
    let after = resident_bytes()?;
    let ids = store.list().await.unwrap_or_default();
    let mut session_bytes = 0;
    let mut hub_json = 0;
    for id in &ids {
        if let Ok(Some(state)) = store.read(id).await {
            session_bytes += serde_json::to_vec(&state).map_or(0, |bytes| bytes.len());
        }
        hub_json += served.server.hub.since(id, 0).iter().map(|event| event.json.len()).sum::<usize>();
    }
    drop(client);
    served.stop().await;
    eprintln!(
        "memory: {first} + {second} sessions parked ({} in the store); resident {before} → {middle} → {after} bytes",
        ids.len()
    );
    Some(Parked {
        first: middle.saturating_sub(before) as f64 / first.max(1) as f64,
        marginal: after.saturating_sub(middle) as f64 / second.max(1) as f64,
        session_json: session_bytes as f64 / ids.len().max(1) as f64,
        hub_json,
        parked: first + second,
    })
}

/// From artifact bytes to a server answering `/readyz`, in this process.
async fn startup_in_process(bytes: &[u8]) -> Duration {
    let began = Instant::now();
    let program = artifact::decode(bytes).expect("the artifact loads");
    let served = serve(program, Arc::new(MemoryStore::new())).await;
    let client = reqwest::Client::new();
    loop {
        if client.get(format!("{}/readyz", served.base)).send().await.is_ok_and(|answer| answer.status().is_success()) {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "the in-process server never became ready");
    }
    let elapsed = began.elapsed();
    served.stop().await;
    elapsed
}

/// The release `archmax` binary, if it is built.
fn archmax_binary() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("ARCHMAX_BIN") {
        return Some(PathBuf::from(named));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let release = target.join("release/archmax");
    release.is_file().then_some(release)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).map_or(0, |addr| addr.port())
}

/// From spawning `archmax serve --artifact` to its first `/readyz` answer.
fn startup_process(binary: &Path, artifact_path: &Path, root: &Path) -> Option<Duration> {
    use std::io::{Read, Write};
    let port = free_port();
    let began = Instant::now();
    let mut child = std::process::Command::new(binary)
        .args(["serve", "--artifact"])
        .arg(artifact_path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .current_dir(root)
        .env_remove("ARCHMAX_SERVE_TOKEN")
        // The model endpoint is only configured, never called: nothing runs a turn.
        .env("ARCHMAX_API_BASE_URL", "http://127.0.0.1:9/v1")
        .env("ARCHMAX_API_KEY", "unused")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(root.join("serve.log")).ok()?)
        .spawn()
        .ok()?;
    let mut ready = None;
    while began.elapsed() < Duration::from_secs(30) {
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            if answer.starts_with("HTTP/1.1 200") {
                ready = Some(began.elapsed());
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let _ = child.kill();
    let _ = child.wait();
    if ready.is_none() {
        let log = std::fs::read_to_string(root.join("serve.log")).unwrap_or_default();
        eprintln!("archmax serve did not become ready; it printed:\n{log}");
    }
    ready
}

/// The 1-, 5- and 15-minute load averages, as the kernel reports them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Where a load point's sessions live.
enum Where {
    Memory,
    Folder(PathBuf),
    Postgres,
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let seconds: f64 = std::env::var("LOAD_SECONDS").ok().and_then(|text| text.parse().ok()).unwrap_or(3.0);
    let duration = Duration::from_secs_f64(seconds.clamp(0.5, 60.0));
    // The clients are reqwest clients, which need a TLS provider installed even for http.
    archmax_vm::model::openai::install_tls_provider();
    let executor = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("the runtime");
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    println!(
        "archmax serve load · {RING}-step ring turns · instant in-process model · {cores} cores · {seconds} s a point"
    );
    println!();
    // Memory first, in a heap no load point has grown yet.
    if std::env::var_os("LOAD_TABLE_ONLY").is_none() {
        match executor.block_on(parked_memory()) {
            Some(parked) => {
                println!(
                    "memory per idle parked session (memory store, resident-set growth from /proc/self/statm): {:.1} KB over the first {PARKED}, {:.1} KB each over the next {PARKED}",
                    parked.first / 1024.0,
                    parked.marginal / 1024.0
                );
                println!(
                    "  of which: a parked session is {:.1} KB as JSON; the event hub keeps {:.1} MB of event JSON for replay ({} sessions parked)",
                    parked.session_json / 1024.0,
                    parked.hub_json as f64 / (1024.0 * 1024.0),
                    parked.parked
                );
            }
            None => println!("memory per idle parked session: /proc/self/statm is not readable here"),
        }
        println!();
    }
    // The load average beside each point says how much of the machine the point had.
    // CPU per turn: this process's (the server and the clients), and beside it, on
    // PostgreSQL, the server's (the postmaster and its backends): on a machine of two
    // cores, what bounds turns/s once the disk does not.
    println!(
        "| store | clients | turns | turns/s | p50 | p99 | mean commit | CPU per turn | PostgreSQL CPU per turn | errors | load average |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    // The filesystem store on the temporary directory (a disk: every commit's fsync
    // reaches the device), and, to split the device's share from the store's own work,
    // on /dev/shm where the machine has it (memory: an fsync there costs nothing).
    // And on PostgreSQL: a throwaway server (fsync on, like the tests') or
    // `ARCHMAX_TEST_DATABASE_URL`, a fresh database per point.
    let shm = Path::new("/dev/shm");
    let mut stores = vec![("memory", Where::Memory), ("filesystem", Where::Folder(std::env::temp_dir()))];
    if shm.is_dir() {
        stores.push(("filesystem on /dev/shm", Where::Folder(shm.to_path_buf())));
    }
    stores.push(("postgres", Where::Postgres));
    let mut cluster: Option<TestCluster> = None;
    let mut removals: Vec<PathBuf> = Vec::new();
    let wanted = |variable: &str, name: &str| {
        std::env::var(variable).map_or(true, |list| list.split(',').any(|item| item == name))
    };
    for (store_name, folder) in stores.into_iter().filter(|(name, _)| wanted("LOAD_STORES", name)) {
        for clients in [1usize, 8, 32, 64].into_iter().filter(|clients| wanted("LOAD_CLIENTS", &clients.to_string())) {
            let scratch = match &folder {
                Where::Folder(folder) => Some(folder.join(format!("archmax-load-{}-{clients}", std::process::id()))),
                _ => None,
            };
            if let Some(scratch) = &scratch {
                let _ = std::fs::remove_dir_all(scratch);
            }
            let store: Arc<dyn SessionStore> = match (&folder, &scratch) {
                (_, Some(scratch)) => {
                    Arc::new(FsStore::for_workspace(scratch).expect("the scratch workspace's seal key"))
                }
                (Where::Postgres, _) => {
                    let cluster = cluster.get_or_insert_with(TestCluster::require);
                    let target = cluster.database(&format!("load{clients}")).expect("a database");
                    let mut options = PgOptions::default();
                    if let Some(connections) =
                        std::env::var("LOAD_PG_CONNECTIONS").ok().and_then(|text| text.parse().ok())
                    {
                        options.max_connections = connections;
                    }
                    Arc::new(executor.block_on(PgStore::connect_with(&target, options)).expect("the store connects"))
                }
                _ => Arc::new(MemoryStore::new()),
            };
            let server_pid =
                cluster.as_ref().filter(|_| matches!(folder, Where::Postgres)).and_then(TestCluster::server_pid);
            let server_cpu_before = server_pid.and_then(|pid| cpu_time(pid, true));
            let (point, server_cpu) = executor.block_on(async {
                let served = serve(ring_program(RING), store).await;
                let mut point = load_point(&served.base, clients, duration).await;
                // Read before the stop: closing the pool ends the backends that were counted.
                let server_cpu = server_pid
                    .and_then(|pid| cpu_time(pid, true))
                    .zip(server_cpu_before)
                    .map(|(after, before)| after.saturating_sub(before));
                point.commit = mean_commit(&served.base).await;
                served.stop().await;
                (point, server_cpu)
            });
            let per_turn = |cpu: Option<Duration>| {
                cpu.filter(|_| point.turns > 0).map_or_else(|| "-".to_string(), |cpu| millis(cpu / point.turns as u32))
            };
            // Removed only after the last point: ext4 without a journal skips inodes
            // freed in the last minute or more when it allocates, scanning past each, so
            // deleting one point's sessions just before the next creates its own would
            // charge the next point for this one's cleanup.
            removals.extend(scratch);
            println!(
                "| {store_name} | {clients} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                point.turns,
                point.turns as f64 / point.seconds,
                millis(point.p50),
                millis(point.p99),
                point.commit.map_or_else(|| "-".to_string(), millis),
                per_turn(point.cpu),
                per_turn(server_cpu),
                point.errors,
                load_average()
            );
        }
    }
    for scratch in removals {
        let _ = std::fs::remove_dir_all(scratch);
    }
    println!();
    if std::env::var_os("LOAD_TABLE_ONLY").is_some() {
        return;
    }
    let program = ring_program(BIG_RING);
    let bytes = artifact::encode(&program);
    let in_process: Vec<Duration> = (0..5).map(|_| executor.block_on(startup_in_process(&bytes))).collect();
    let best = in_process.iter().min().copied().unwrap_or_default();
    println!(
        "start-up, {BIG_RING}-state artifact ({} KB), in process (bytes → /readyz answered): best {} of 5, first {}",
        bytes.len() / 1024,
        millis(best),
        millis(in_process[0])
    );
    match archmax_binary() {
        Some(binary) => {
            let root = std::env::temp_dir().join(format!("archmax-load-startup-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&root);
            let path = root.join("ring.archmax");
            std::fs::write(&path, &bytes).expect("the artifact is written");
            let runs: Vec<Duration> = (0..5).filter_map(|_| startup_process(&binary, &path, &root)).collect();
            match runs.iter().min() {
                Some(best) => println!(
                    "start-up, {BIG_RING}-state artifact, `{} serve --artifact` (spawn → /readyz answered): best {} of {}",
                    binary.display(),
                    millis(*best),
                    runs.len()
                ),
                None => println!("start-up as a process: `{}` never answered /readyz", binary.display()),
            }
            let _ = std::fs::remove_dir_all(&root);
        }
        None => println!(
            "start-up as a process: skipped, no release binary (cargo build --release -p archmax-cli, or set ARCHMAX_BIN)"
        ),
    }
    println!("load average at the end: {}", load_average());
}
