//! A fleet under fire: three `archmax serve` processes on one throwaway PostgreSQL, behind
//! a round-robin proxy in this test, while a load generator starts, decides, delivers and
//! streams sessions and runners are killed with SIGKILL and started again at random.
//!
//! At the end every session is in the state its requests imply, its transcript holds
//! each step once (nothing lost, nothing applied twice), and every event stream, which
//! reconnected through the proxy with `Last-Event-ID` whenever its runner died, received
//! every event once, in order, exactly as a fresh read shows them.
//!
//! Clients here do what a client behind a load balancer must: a request whose connection
//! broke is sent again (a start names its session id, so a repeated start finds the
//! session; a decision or delivery that already happened finds the session moved on).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use archmax_store_postgres::test_cluster::TestCluster;

use crate::serving::{PATIENCE, Served};
use crate::support::scratch;

const DESK: &str = r#"title: Desk
instructions: You route a payout request to finance.
states:
  intake:
    triggers:
      manual:
        description: Take one payout request.
    instructions: Hand the request to finance.
    transitions:
      - to: review
        description: The request is ready.
  review:
    type: human
    instructions: Approve the payout or turn it down.
    transitions:
      - { to: done, type: approve, description: Pay it. }
      - { to: declined, type: reject, description: Turn it down. }
  done:
    instructions: Say it was paid.
  declined:
    instructions: Say it was declined.
"#;

const WAITER: &str = r#"title: Waiter
instructions: You wait for a payment to arrive.
states:
  wait:
    triggers:
      manual:
        description: Wait for one payment.
    instructions: Wait for the payment, then thank the customer.
"#;

const TAPE: &str = r#"
- { state: intake, tool_calls: [{ name: archmax_advance, args: { to: review, reason: ready } }] }
- { state: review, text: Finance will review your payout. }
- { state: done, text: Your payout was paid. }
- { state: wait, text: "I will wait for the payment.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: the payment has not arrived } }] }
- { state: wait, text: "Thank you, the payment arrived." }
"#;

/// Clients of the load generator; each drives one session after another, alternating the
/// workflows, until [`LOAD_FOR`] has passed.
const CLIENTS: usize = 8;
/// How long new sessions are started, and runners killed and started again.
const LOAD_FOR: Duration = Duration::from_secs(15);
const RUNNERS: usize = 3;

/// The runners' addresses as the proxy sees them (`None`: that runner is down).
type Backends = Arc<Mutex<Vec<Option<String>>>>;

/// A round-robin TCP proxy: each connection goes to the next runner that is up and
/// accepts it; a connection no runner accepts is closed.
fn proxy(backends: Backends) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("an address").to_string();
    std::thread::spawn(move || {
        let mut next = 0usize;
        for client in listener.incoming().map_while(Result::ok) {
            let candidates: Vec<String> = {
                let list = backends.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                (0..list.len()).filter_map(|offset| list[(next + offset) % list.len()].clone()).collect()
            };
            next = next.wrapping_add(1);
            let Some(server) = candidates.iter().find_map(|address| TcpStream::connect(address).ok()) else {
                continue;
            };
            let (Ok(client_reader), Ok(server_writer)) = (client.try_clone(), server.try_clone()) else { continue };
            std::thread::spawn(move || pipe(client_reader, server_writer));
            std::thread::spawn(move || pipe(server, client));
        }
    });
    address
}

/// Copies `from` into `to` until either side ends, then closes both.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

/// One request through the proxy: the status and the JSON body, or why it failed.
fn request(proxy: &str, method: &str, path: &str, body: Option<&Value>) -> std::io::Result<(u16, Value)> {
    let mut stream = TcpStream::connect(proxy)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| std::io::Error::other("no answer"))?;
    let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// Sends a request until a runner answers it with something other than a 5xx or a busy
/// 409; that answer.
fn until_answered(proxy: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let began = Instant::now();
    loop {
        match request(proxy, method, path, body) {
            Ok((status, answer))
                if status != 0 && status < 500 && !(status == 409 && answer["error"]["code"] == "session.busy") =>
            {
                return (status, answer);
            }
            _ => {}
        }
        assert!(began.elapsed() < PATIENCE, "{method} {path} was never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads session `id` until `done` holds of it.
fn session_until(proxy: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let began = Instant::now();
    let mut last = Value::Null;
    loop {
        if let Ok((200, shown)) = request(proxy, "GET", &format!("/v1/sessions/{id}"), None) {
            if done(&shown) {
                return shown;
            }
            last = shown;
        }
        assert!(began.elapsed() < PATIENCE, "session {id} never got there; last seen {last}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One event as a stream carried it.
#[derive(Clone, Debug, PartialEq)]
struct Frame {
    id: u64,
    event: Value,
}

/// The frames of one connection to session `id`'s stream after `last`, until the
/// connection breaks, `enough` says the reader has what it wants (checked at least every
/// second), or it stays quiet `quiet` long. Whether the connection broke.
fn stream_once(
    proxy: &str,
    id: &str,
    last: u64,
    frames: &mut Vec<Frame>,
    quiet: Duration,
    enough: &dyn Fn(&[Frame]) -> bool,
) -> bool {
    let Ok(mut stream) = TcpStream::connect(proxy) else { return true };
    // HTTP/1.0: the body ends when the connection does, with no chunked framing.
    let sent = write!(
        stream,
        "GET /v1/sessions/{id}/events HTTP/1.0\r\nhost: 127.0.0.1\r\nlast-event-id: {last}\r\naccept: text/event-stream\r\n\r\n"
    );
    if sent.is_err() || stream.set_read_timeout(Some(Duration::from_secs(1))).is_err() {
        return true;
    }
    let mut reader = BufReader::new(stream);
    let (mut line, mut in_body, mut quiet_since) = (String::new(), false, Instant::now());
    let (mut id_line, mut data_line) = (None, None);
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if enough(frames) || quiet_since.elapsed() >= quiet {
                    return false;
                }
                continue;
            }
            Err(_) => return true,
        }
        let text = line.trim_end_matches(['\r', '\n']);
        if !in_body {
            if text.starts_with("HTTP/") && !text.contains(" 200 ") {
                return true;
            }
            in_body = text.is_empty();
            continue;
        }
        if let Some(value) = text.strip_prefix("id: ") {
            id_line = value.trim().parse::<u64>().ok();
        } else if let Some(value) = text.strip_prefix("data: ") {
            data_line = serde_json::from_str::<Value>(value).ok();
        } else if text.is_empty()
            && let (Some(id), Some(event)) = (id_line.take(), data_line.take())
        {
            frames.push(Frame { id, event });
            quiet_since = Instant::now();
            if enough(frames) {
                return false;
            }
        }
    }
}

/// Streams session `id`'s events through the proxy, reconnecting after the last id
/// received whenever the connection breaks, until `until` names an id and it arrived;
/// every frame received, in order (as many times as it came), and the reconnects.
fn stream_events(proxy: &str, id: &str, until: &Mutex<Option<u64>>) -> (Vec<Frame>, usize) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut reconnects = 0;
    let began = Instant::now();
    let enough = |frames: &[Frame]| {
        let wanted = *until.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        wanted.is_some_and(|wanted| frames.last().is_some_and(|frame| frame.id >= wanted) || wanted == 0)
    };
    while !enough(&frames) {
        assert!(began.elapsed() < PATIENCE, "the stream of {id} never caught up");
        let last = frames.last().map_or(0, |frame| frame.id);
        if stream_once(proxy, id, last, &mut frames, PATIENCE, &enough) {
            reconnects += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    (frames, reconnects)
}

/// Every committed event of session `id`, read afresh: one stream from the start until
/// it stays quiet for three seconds (retried whole when the connection breaks).
fn read_all(proxy: &str, id: &str) -> Vec<Frame> {
    let began = Instant::now();
    loop {
        let mut frames = Vec::new();
        if !stream_once(proxy, id, 0, &mut frames, Duration::from_secs(3), &|_| false) {
            return frames;
        }
        assert!(began.elapsed() < PATIENCE, "the events of {id} could not be read");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What one client did to its session, and what its stream received.
struct Driven {
    id: String,
    frames: Vec<Frame>,
    /// What a fresh read showed once the session completed.
    all: Vec<Frame>,
    reconnects: usize,
}

/// Starts session `id` of `workflow`, waits for it to park, then decides (desk) or
/// delivers (waiter) until it completes, streaming its events all along.
fn drive(proxy: &str, workflow: &str, id: &str) -> Driven {
    let start = json!({ "message": "Pay invoice 5.", "sessionId": id });
    let (status, started) =
        until_answered(proxy, "POST", &format!("/v1/workflows/{workflow}/sessions?wait=0"), Some(&start));
    // Sent again after a broken connection, a start finds the session it made.
    assert!(
        [200, 202].contains(&status) || started["error"]["code"] == "session.exists",
        "{id}: start answered {status} {started}"
    );
    let until = Arc::new(Mutex::new(None));
    let streamer = {
        let (proxy, id, until) = (proxy.to_string(), id.to_string(), Arc::clone(&until));
        std::thread::spawn(move || stream_events(&proxy, &id, &until))
    };
    let parked = session_until(proxy, id, |shown| {
        ["awaiting_decision", "awaiting_input"].contains(&shown["status"].as_str().unwrap_or_default())
            || shown["status"] == "completed"
    });
    let (path, body) = match workflow {
        "desk" => (format!("/v1/sessions/{id}/decide?wait=0"), json!({ "to": "done" })),
        _ => (format!("/v1/sessions/{id}/deliver?wait=0"), json!({ "trigger": "paid", "undeclared": true })),
    };
    if parked["status"] != "completed" {
        let (status, answer) = until_answered(proxy, "POST", &path, Some(&body));
        // Sent again after a broken connection, it finds the session moved on.
        assert!(
            [200, 202].contains(&status) || answer["error"]["code"] == "session.not-parked",
            "{id}: {path} answered {status} {answer}"
        );
    }
    session_until(proxy, id, |shown| shown["status"] == "completed");
    // The stream is done once it has every event the store holds for the session.
    let all = read_all(proxy, id);
    *until.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(all.last().map_or(0, |frame| frame.id));
    let (frames, reconnects) = streamer.join().expect("the streamer");
    Driven { id: id.to_string(), frames, all, reconnects }
}

/// Prints what the runners logged when the test fails, for the next engineer.
struct LogsOnFailure(Arc<Mutex<Vec<Served>>>);

impl Drop for LogsOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (index, runner) in self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().enumerate() {
                eprintln!("--- runner {index} ---\n{}", runner.lines().join("\n"));
            }
        }
    }
}

/// A tiny deterministic generator, so a failing run can be repeated.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound.max(1)
    }
}

fn spawn_runner(root: &Path, target: &str) -> Served {
    Served::spawn(
        root,
        &["--tape", "tape.yaml", "--store", target, "--lease-term", "1", "--max-connections-per-peer", "0"],
        &[("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")],
    )
}

#[test]
fn a_fleet_killed_at_random_loses_and_repeats_no_step_and_every_stream_sees_every_event_once() {
    let cluster = TestCluster::require();
    let target = cluster.database("fleet").expect("a database");
    let root = scratch("fleet");
    let _ = std::fs::remove_dir_all(&root);
    for (slug, text) in [("desk", DESK), ("waiter", WAITER)] {
        std::fs::create_dir_all(root.join(format!("workflows/{slug}"))).expect("workspace");
        std::fs::write(root.join(format!("workflows/{slug}/workflow.yaml")), text).expect("workflow");
    }
    std::fs::write(root.join("tape.yaml"), TAPE).expect("tape");

    let runners: Arc<Mutex<Vec<Served>>> =
        Arc::new(Mutex::new((0..RUNNERS).map(|_| spawn_runner(&root, &target)).collect()));
    let backends: Backends = Arc::new(Mutex::new(
        runners.lock().expect("runners").iter().map(|runner| Some(runner.address.clone())).collect(),
    ));
    let proxy = proxy(Arc::clone(&backends));
    let _logs = LogsOnFailure(Arc::clone(&runners));

    // The chaos: one runner at a time killed with SIGKILL, started again a moment later.
    let load_done = Arc::new(AtomicBool::new(false));
    let chaos = {
        let (runners, backends, load_done, root, target) =
            (Arc::clone(&runners), Arc::clone(&backends), Arc::clone(&load_done), root.clone(), target.clone());
        std::thread::spawn(move || {
            let mut random = Lcg(0x5eed_f1ee7);
            let began = Instant::now();
            let mut kills = 0;
            while began.elapsed() < LOAD_FOR && !load_done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(700 + random.below(1_800)));
                let victim = random.below(RUNNERS as u64) as usize;
                backends.lock().expect("backends")[victim] = None;
                runners.lock().expect("runners")[victim].signal("KILL");
                kills += 1;
                std::thread::sleep(Duration::from_millis(200 + random.below(600)));
                let fresh = spawn_runner(&root, &target);
                backends.lock().expect("backends")[victim] = Some(fresh.address.clone());
                runners.lock().expect("runners")[victim] = fresh;
            }
            kills
        })
    };

    let began = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let proxy = proxy.clone();
            std::thread::spawn(move || {
                // Spread the clients' first starts over the first seconds.
                std::thread::sleep(Duration::from_millis(client as u64 * 300));
                let mut driven = Vec::new();
                while began.elapsed() < LOAD_FOR {
                    let workflow = if (client + driven.len()) % 2 == 0 { "desk" } else { "waiter" };
                    driven.push(drive(&proxy, workflow, &format!("fleet-{workflow}-{client}-{}", driven.len())));
                }
                driven
            })
        })
        .collect();
    let driven: Vec<Driven> = clients.into_iter().flat_map(|client| client.join().expect("a client")).collect();
    load_done.store(true, Ordering::SeqCst);
    let kills = chaos.join().expect("the chaos");
    assert!(kills >= 3, "runners were killed during the load ({kills})");

    let mut reconnects = 0;
    for session in &driven {
        let id = &session.id;
        let (status, shown) = until_answered(&proxy, "GET", &format!("/v1/sessions/{id}"), None);
        assert_eq!((status, shown["status"].as_str()), (200, Some("completed")), "{id}: {shown}");
        let (status, transcript) = until_answered(&proxy, "GET", &format!("/v1/sessions/{id}/transcript"), None);
        assert_eq!(status, 200, "{id}: {transcript}");
        let messages = transcript["messages"].as_array().expect("messages");
        let from_people = messages.iter().filter(|message| message["role"] == "user").count();
        let answers: Vec<&str> = messages
            .iter()
            .filter(|message| message["role"] == "assistant")
            .filter_map(|message| message["text"].as_str().or_else(|| message["content"].as_str()))
            .filter(|text| !text.is_empty())
            .collect();
        let expected: &[&str] = if id.contains("desk") {
            &["Finance will review your payout.", "Your payout was paid."]
        } else {
            &["I will wait for the payment.", "Thank you, the payment arrived."]
        };
        assert_eq!(from_people, 1, "{id}: the person's message once: {transcript}");
        // Every answer at most once, in order, and the closing one there. The desk's line
        // to the person written after it parks may be missing: a runner killed after the
        // park was committed leaves a session at rest, whose unwritten line no runner
        // continues (the decision that follows does not need it).
        let mut rest = expected.iter();
        assert!(
            answers.iter().all(|answer| rest.any(|wanted| wanted == answer)),
            "{id}: every model answer at most once, in order: {transcript}"
        );
        assert_eq!(answers.last(), expected.last(), "{id}: the closing answer: {transcript}");
        if !id.contains("desk") {
            assert_eq!(answers, expected, "{id}: every model answer once: {transcript}");
        }

        // The stream: every id once, in order, from 1; and what a fresh read shows.
        let ids: Vec<u64> = session.frames.iter().map(|frame| frame.id).collect();
        assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "{id}: every event once, in order");
        assert_eq!(session.all, session.frames, "{id}: the stream saw what the store holds");
        assert!(session.all.iter().any(|frame| frame.event["event"] == "parked"), "{id}: {:?}", session.all);
        reconnects += session.reconnects;
    }
    eprintln!(
        "fleet: {} sessions completed through {kills} SIGKILLs in {} s; streams reconnected {reconnects} times",
        driven.len(),
        began.elapsed().as_secs()
    );
    for runner in runners.lock().expect("runners").drain(..) {
        runner.stop();
    }
}
