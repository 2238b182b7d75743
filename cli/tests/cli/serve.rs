//! `archmax serve` as a process: SIGTERM while a turn is in flight, then a second process
//! on the same filesystem store continues the session, with nothing lost or done twice.
//!
//! The model is an OpenAI-compatible server in this test (plain `std::net`), which holds
//! its answers where the test needs the turn to be in flight; the archmax server is
//! talked to with one-shot HTTP/1.1 requests.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The overall bound on every wait here; nothing is timed against it, it only ends a hang.
const PATIENCE: Duration = Duration::from_secs(120);

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
fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
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

/// One `archmax serve` process and what it printed.
struct Serving {
    child: Child,
    address: String,
    log: Arc<Mutex<VecDeque<String>>>,
}

fn serve(root: &Path, model: &ModelServer) -> Serving {
    let mut child = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["serve", "--listen", "127.0.0.1:0", "--grace", "2"])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_API_BASE_URL", &model.base_url)
        .env("ARCHMAX_API_KEY", "sk-relay")
        .env("ARCHMAX_MODEL", "relay-model")
        .env("ARCHMAX_MAX_RETRIES", "0")
        .env_remove("ARCHMAX_SERVE_TOKEN")
        .env_remove("ARCHMAX_TRUSTED_KEYS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("archmax serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let log = Arc::new(Mutex::new(VecDeque::new()));
    let (sender, lines) = channel();
    let kept = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push_back(line.clone());
            let _ = sender.send(line);
        }
    });
    let address = loop {
        let line = lines.recv_timeout(PATIENCE).expect("archmax serve says where it listens");
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split_whitespace().next().unwrap_or_default().to_string();
        }
    };
    Serving { child, address, log }
}

impl Serving {
    /// One request on a fresh connection: the status and the JSON body, or the error of
    /// connecting or reading.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> std::io::Result<(u16, Value)> {
        let mut stream = TcpStream::connect(&self.address)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.address,
            body.len()
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer.as_str(), ""));
        let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, None).expect("the server answers")
    }

    fn terminate(&self) {
        let sent = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill runs");
        assert!(sent.success(), "SIGTERM was sent");
    }

    /// Waits for the process to exit; its exit code.
    fn exit_code(&mut self) -> Option<i32> {
        let began = Instant::now();
        while began.elapsed() < PATIENCE {
            if let Some(status) = self.child.try_wait().expect("the process is waited for") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("archmax serve did not exit after SIGTERM; it printed {:?}", self.printed());
    }

    fn printed(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().cloned().collect()
    }

    /// Polls the session until `done` holds of it.
    fn session_until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let began = Instant::now();
        loop {
            let (status, shown) = self.get(&format!("/v1/sessions/{id}"));
            if status == 200 && done(&shown) {
                return shown;
            }
            assert!(began.elapsed() < PATIENCE, "session {id} never got there; last seen {shown}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn workspace() -> PathBuf {
    let root = crate::support::scratch("serve-sigterm");
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
    let root = workspace();
    let mut model = ModelServer::start();
    let mut first = serve(&root, &model);

    let start = json!({ "message": "Relay it.", "sessionId": "relay-1" });
    let (status, accepted) =
        first.request("POST", "/v1/workflows/relay/sessions", Some(&start)).expect("the server answers");
    assert_eq!(status, 202, "{accepted}");
    model.expect_call("alpha");
    // The model holds bravo's answer: the turn is in flight.
    model.expect_call("bravo");

    first.terminate();
    // The server stops accepting: a new connection is refused (or cut unanswered).
    let began = Instant::now();
    while first.request("GET", "/healthz", None).is_ok_and(|(status, _)| status == 200) {
        assert!(began.elapsed() < PATIENCE, "the server went on accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The step in flight still commits: bravo's answer is recorded and the turn goes on to
    // charlie, whose answer never comes, so the grace period ends and the turn is cut.
    model.set(|script| script.release_bravo = true);
    model.expect_call("charlie");
    assert_eq!(first.exit_code(), Some(0), "it printed {:?}", first.printed());
    let printed = first.printed().join("\n");
    assert!(printed.contains("unfinished turns resume"), "{printed}");

    let held = crate::support::archmax(&root, &["sessions", "relay-1", "--json"]);
    assert_eq!(held.code, 0, "{}", held.stderr);
    let held: Value = serde_json::from_str(&held.stdout).expect("JSON");
    assert_eq!(held["status"], "running", "cut mid-turn: {held}");
    assert_eq!(held["workflowState"], "charlie", "bravo's step was committed: {held}");

    // The next process continues the cut turn on its own.
    model.set(|script| script.answer_charlie = true);
    let second = serve(&root, &model);
    let done = second.session_until("relay-1", |shown| shown["status"] != "running");
    assert_eq!(done["status"], "completed", "{done}");
    let printed = second.printed().join("\n");
    assert!(printed.contains("continued relay-1"), "the recovery is logged: {printed}");

    let (status, transcript) = second.get("/v1/sessions/relay-1/transcript");
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
    assert_eq!(trail, ["alpha", "bravo", "charlie", "charlie"], "the resume re-entered charlie: {done}");
    assert_eq!(model.calls(), ["alpha", "bravo", "charlie", "charlie"], "only the cut call was made again");

    second.terminate();
    let mut second = second;
    assert_eq!(second.exit_code(), Some(0));
    let _ = fs::remove_dir_all(&root);
}
