//! `archmax serve` as a process: SIGTERM while a turn is in flight, then a second process
//! on the same filesystem store continues the session, with nothing lost or done twice;
//! on PostgreSQL, the turn cut at the end of the grace gives its lease back before the
//! process exits.
//!
//! The model is an OpenAI-compatible server in this test (plain `std::net`), which holds
//! its answers where the test needs the turn to be in flight; the archmax server is
//! talked to with one-shot HTTP/1.1 requests.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serving::{PATIENCE, Served};

const RELAY: &str = r#"title: Relay
instructions: Pass the message along the relay.
states:
  alpha:
    triggers:
      manual:
        description: Start the relay.
    instructions: "Marker alpha: hand over to bravo."
    transitions:
      - to: bravo
        description: Alpha is done.
  bravo:
    instructions: "Marker bravo: hand over to charlie."
    transitions:
      - to: charlie
        description: Bravo is done.
  charlie:
    instructions: "Marker charlie: say the relay is done."
"#;

/// Which process the model is answering, and what it holds.
#[derive(Default)]
struct Script {
    /// `bravo` is answered once this is set.
    release_bravo: bool,
    /// `charlie` is answered (with the closing text) once this is set: the first process
    /// never gets its answer, the second does.
    answer_charlie: bool,
    /// Every held answer gives up (the test is over).
    over: bool,
}

struct ModelServer {
    base_url: String,
    script: Arc<(Mutex<Script>, Condvar)>,
    /// The state of every request, in arrival order.
    arrivals: Receiver<String>,
    seen: Vec<String>,
}

fn state_of(body: &Value) -> &'static str {
    let system: String = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "system")
        .filter_map(|message| message["content"].as_str())
        .collect();
    ["alpha", "bravo", "charlie"]
        .into_iter()
        .find(|state| system.contains(&format!("Marker {state}:")))
        .unwrap_or("unknown")
}

fn completion(message: Value) -> Value {
    json!({
        "id": "chatcmpl-relay",
        "object": "chat.completion",
        "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 50, "completion_tokens": 5 },
    })
}

fn advance(to: &str) -> Value {
    let arguments = json!({ "to": to, "reason": "my leg is run" }).to_string();
    let call = json!({ "id": format!("call-{to}"), "type": "function", "function": { "name": "archmax_advance", "arguments": arguments } });
    completion(json!({ "role": "assistant", "content": null, "tool_calls": [call] }))
}

/// Reads one HTTP/1.1 request: its body.
pub(crate) fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

fn answer_model(mut stream: TcpStream, script: &(Mutex<Script>, Condvar), arrivals: &Sender<String>) {
    let Some(body) = read_request(&mut stream) else { return };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let state = state_of(&body);
    let _ = arrivals.send(state.to_string());
    let (lock, changed) = script;
    let mut held = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let answer = match state {
        "alpha" => advance("bravo"),
        "bravo" => {
            while !held.release_bravo && !held.over {
                held = changed.wait(held).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            advance("charlie")
        }
        "charlie" => {
            while !held.answer_charlie && !held.over {
                held = changed.wait(held).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            completion(json!({ "role": "assistant", "content": "The relay is done." }))
        }
        _ => json!({ "error": { "message": "unknown state" } }),
    };
    drop(held);
    let text = answer.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

impl ModelServer {
    fn start() -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("an address"));
        let script = Arc::new((Mutex::new(Script::default()), Condvar::new()));
        let (sender, arrivals) = channel();
        let shared = Arc::clone(&script);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let script = Arc::clone(&shared);
                let sender = sender.clone();
                std::thread::spawn(move || answer_model(stream, &script, &sender));
            }
        });
        ModelServer { base_url, script, arrivals, seen: Vec::new() }
    }

    fn set(&self, change: impl FnOnce(&mut Script)) {
        let (lock, changed) = &*self.script;
        change(&mut lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        changed.notify_all();
    }

    /// Waits for the next request, which must be for `state`.
    fn expect_call(&mut self, state: &str) {
        let arrived = self.arrivals.recv_timeout(PATIENCE).expect("the model server is called");
        assert_eq!(arrived, state, "calls so far: {:?}", self.seen);
        self.seen.push(arrived);
    }

    /// Every request that arrived, in order.
    fn calls(&mut self) -> Vec<String> {
        self.seen.extend(self.arrivals.try_iter());
        self.seen.clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.set(|script| script.over = true);
    }
}

fn serve(root: &Path, model: &ModelServer) -> Served {
    let env = [
        ("ARCHMAX_API_BASE_URL", model.base_url.as_str()),
        ("ARCHMAX_API_KEY", "sk-relay"),
        ("ARCHMAX_MODEL", "relay-model"),
        ("ARCHMAX_MAX_RETRIES", "0"),
    ];
    Served::spawn(root, &["--grace", "2"], &env)
}

fn workspace(label: &str) -> PathBuf {
    let root = crate::support::scratch(&format!("serve-sigterm-{label}"));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("workflows/relay")).expect("workspace");
    fs::write(root.join("workflows/relay/workflow.yaml"), RELAY).expect("workflow");
    root
}

/// The transcript as (role, what) pairs: the user's text, each call's name and target,
/// each tool answer's call id, the assistant's text.
fn transcript_outline(transcript: &Value) -> Vec<String> {
    transcript["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| {
            let calls: Vec<String> = message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|call| {
                    format!("{}→{}", call["name"].as_str().unwrap_or("?"), call["args"]["to"].as_str().unwrap_or(""))
                })
                .collect();
            match message["role"].as_str().unwrap_or("?") {
                "tool" => format!("tool {}", message["call_id"].as_str().unwrap_or("?")),
                role if calls.is_empty() => format!("{role} {}", message["text"].as_str().unwrap_or("")),
                role => format!("{role} {}", calls.join(",")),
            }
        })
        .collect()
}

#[test]
fn sigterm_mid_turn_commits_the_step_in_flight_and_the_next_process_finishes_the_session() {
    let root = workspace("fs");
    let mut model = ModelServer::start();
    let mut first = serve(&root, &model);

    let start = json!({ "message": "Relay it.", "sessionId": "relay-1" });
    let (status, accepted) = first.request("POST", "/v1/workflows/relay/sessions", None, Some(&start));
    assert_eq!(status, 202, "{accepted}");
    model.expect_call("alpha");
    // The model holds bravo's answer: the turn is in flight.
    model.expect_call("bravo");

    first.signal("TERM");
    // The server stops accepting: a new connection is refused (or cut unanswered).
    let began = Instant::now();
    while first.try_request("GET", "/healthz", None, None).is_ok_and(|(status, _)| status == 200) {
        assert!(began.elapsed() < PATIENCE, "the server went on accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The step in flight still commits: bravo's answer is recorded and the turn goes on to
    // charlie, whose answer never comes, so the grace period ends and the turn is cut.
    model.set(|script| script.release_bravo = true);
    model.expect_call("charlie");
    assert_eq!(first.exit_code(), Some(0), "it logged {:?}", first.lines());
    let printed = first.lines().join("\n");
    assert!(printed.contains("unfinished turns resume"), "{printed}");

    let held = crate::support::archmax(&root, &["sessions", "relay-1", "--json"]);
    assert_eq!(held.code, 0, "{}", held.stderr);
    let held: Value = serde_json::from_str(&held.stdout).expect("JSON");
    assert_eq!(held["status"], "running", "cut mid-turn: {held}");
    assert_eq!(held["workflowState"], "charlie", "bravo's step was committed: {held}");

    // The next process continues the cut turn on its own.
    model.set(|script| script.answer_charlie = true);
    let mut second = serve(&root, &model);
    let done = second.session_until("relay-1", |shown| shown["status"] != "running");
    assert_eq!(done["status"], "completed", "{done}");
    // Recovery reports once the turns it continued have ended: the line may come a
    // moment after the session shows completed.
    second.wait_for_log("continued relay-1");

    let (status, transcript) = second.request("GET", "/v1/sessions/relay-1/transcript", None, None);
    assert_eq!(status, 200, "{transcript}");
    assert_eq!(
        transcript_outline(&transcript),
        [
            "user Relay it.",
            "assistant archmax_advance→bravo",
            "tool call-bravo",
            "assistant archmax_advance→charlie",
            "tool call-charlie",
            "assistant The relay is done.",
        ],
        "nothing lost, nothing twice: {transcript}"
    );
    let trail: Vec<&str> =
        done["trail"].as_array().expect("a trail").iter().filter_map(|step| step["to"].as_str()).collect();
    assert_eq!(trail, ["alpha", "bravo", "charlie"], "the continued turn opened no second trail entry: {done}");
    assert_eq!(model.calls(), ["alpha", "bravo", "charlie", "charlie"], "only the cut call was made again");

    assert_eq!(second.stop(), Some(0));
    let _ = fs::remove_dir_all(&root);
}

/// The lease columns of `session` in the database at `target`, through the
/// distribution's `psql`: `(owner, expiry)`, each empty when unset.
fn lease_of(target: &str, session: &str) -> String {
    let output = std::process::Command::new("psql")
        .args(["-X", "-A", "-t", "-d", target, "-c"])
        .arg(format!(
            "SELECT coalesce(lease_owner::text, '') || '|' || coalesce(lease_expires::text, '') \
             FROM archmax_sessions WHERE id = '{session}'"
        ))
        .output()
        .expect("psql runs (the distribution's PostgreSQL client)");
    assert!(output.status.success(), "psql: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn on_postgresql_a_turn_cut_at_the_end_of_the_grace_gives_its_lease_back_before_the_process_exits() {
    let cluster = archmax_store_postgres::test_cluster::TestCluster::require();
    let target = cluster.database("cutlease").expect("a database");
    let root = workspace("pg");
    let mut model = ModelServer::start();
    let base_url = model.base_url.clone();
    let env = [
        ("ARCHMAX_API_BASE_URL", base_url.as_str()),
        ("ARCHMAX_API_KEY", "sk-relay"),
        ("ARCHMAX_MODEL", "relay-model"),
        ("ARCHMAX_MAX_RETRIES", "0"),
    ];
    // A lease far longer than the test: only a release can clear it.
    let mut first = Served::spawn(root.as_path(), &["--grace", "1", "--store", &target, "--lease-term", "3600"], &env);
    let start = json!({ "message": "Relay it.", "sessionId": "relay-pg" });
    let (status, accepted) = first.request("POST", "/v1/workflows/relay/sessions", None, Some(&start));
    assert_eq!(status, 202, "{accepted}");
    model.expect_call("alpha");
    // The model holds bravo's answer: the turn is in flight, and holds the session's lease.
    model.expect_call("bravo");
    let held = lease_of(&target, "relay-pg");
    assert!(!held.starts_with('|'), "the running turn holds the lease: {held}");

    first.signal("TERM");
    assert_eq!(first.exit_code(), Some(0), "it logged {:?}", first.lines());
    let printed = first.lines().join("\n");
    assert!(printed.contains("unfinished turns resume"), "the turn was cut: {printed}");
    assert_eq!(lease_of(&target, "relay-pg"), "|", "the cut turn gave the lease back before the exit");

    // Another process takes the session over at once and finishes it.
    model.set(|script| {
        script.release_bravo = true;
        script.answer_charlie = true;
    });
    let second = Served::spawn(root.as_path(), &["--store", &target], &env);
    let done = second.session_until("relay-pg", |shown| shown["status"] != "running");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(second.stop(), Some(0));
    let _ = fs::remove_dir_all(&root);
}
