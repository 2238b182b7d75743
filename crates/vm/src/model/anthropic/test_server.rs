//! An Anthropic-compatible Messages server on loopback, for tests only (compiled for this
//! crate's tests and with the `test-support` feature; it never reaches the internet).
//!
//! It speaks the documented protocol: `POST /v1/messages` with `x-api-key` and
//! `anthropic-version`, a whole JSON message or, for `stream: true`, the server-sent
//! events of a Messages stream (`message_start`, `ping`, `content_block_start`,
//! `content_block_delta` with `text_delta` and `input_json_delta`, `content_block_stop`,
//! `message_delta`, `message_stop`). It checks every request against the protocol's
//! rules (alternating turns, each `tool_result` answering a `tool_use` of the turn
//! before, at most four `cache_control` breakpoints with a `5m` or `1h` TTL) and keeps
//! what it found wrong beside the request, and it simulates prompt caching: the prefix
//! up to the last breakpoint (tools, then system) is written on first sight and read
//! after, so the usage carries `cache_creation_input_tokens` and `cache_read_input_tokens`.
//!
//! The one thing to know: it runs on plain threads, so a synchronous test that starts the
//! `archmax` binary can use it as well as an async one.

use std::collections::{BTreeSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

/// What the server answers to one request.
#[derive(Clone, Debug)]
pub enum Scripted {
    /// An answer, streamed or whole as the request asks.
    Answer(Answer),
    /// An error status with Anthropic's error body and, when given, `Retry-After`.
    Status { status: u16, error_type: String, retry_after: Option<u64> },
    /// A stream that sends this text, then an `error` event of this type.
    ErrorMidStream { text: String, error_type: String },
    /// A stream that sends this text, then closes without `message_stop`.
    CutMidStream { text: String },
}

/// One scripted answer.
#[derive(Clone, Debug, Default)]
pub struct Answer {
    pub text: String,
    /// `(id, name, input)` of each `tool_use` block, after the text.
    pub tool_uses: Vec<(String, String, Value)>,
    /// `end_turn` when empty (`tool_use` when there are tool uses).
    pub stop_reason: String,
}

impl Answer {
    pub fn text(text: &str) -> Scripted {
        Scripted::Answer(Answer { text: text.to_string(), ..Answer::default() })
    }

    pub fn tool_use(text: &str, id: &str, name: &str, input: Value) -> Scripted {
        Scripted::Answer(Answer {
            text: text.to_string(),
            tool_uses: vec![(id.to_string(), name.to_string(), input)],
            stop_reason: String::new(),
        })
    }

    pub fn stopped(text: &str, stop_reason: &str) -> Scripted {
        Scripted::Answer(Answer { text: text.to_string(), tool_uses: Vec::new(), stop_reason: stop_reason.to_string() })
    }
}

/// One request as the server received it, with what it found wrong in it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// Protocol rules the request broke; empty for a good request.
    pub problems: Vec<String>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

struct Shared {
    script: Mutex<VecDeque<Scripted>>,
    received: Mutex<Vec<Received>>,
    cached: Mutex<BTreeSet<u64>>,
}

/// The server: started with a script, answering until dropped with the process.
pub struct MessagesServer {
    /// The API root to configure (`base_url`): `http://127.0.0.1:<port>`.
    pub base_url: String,
    shared: Arc<Shared>,
}

impl MessagesServer {
    pub fn start(script: Vec<Scripted>) -> std::io::Result<MessagesServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            received: Mutex::default(),
            cached: Mutex::default(),
        });
        let serving = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = Arc::clone(&serving);
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        Ok(MessagesServer { base_url, shared })
    }

    /// Every request so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Scripted replies not yet given.
    pub fn left(&self) -> usize {
        self.shared.script.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    let Some(Raw { method, path, headers, bytes }) = read_request(&mut stream) else { return };
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let problems = check(&method, &path, &headers, &body);
    let usage = cache_usage(shared, &body);
    let streaming = body.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("claude-test").to_string();
    shared.received.lock().unwrap_or_else(PoisonError::into_inner).push(Received {
        method,
        path,
        headers,
        body,
        problems,
    });
    let reply = shared.script.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
    let written = match reply {
        None => respond(&mut stream, 500, &[], &error_body("api_error", "the test server's script is exhausted")),
        Some(Scripted::Status { status, error_type, retry_after }) => {
            let retry = retry_after.map(|seconds| ("retry-after".to_string(), seconds.to_string()));
            respond(&mut stream, status, &retry.into_iter().collect::<Vec<_>>(), &error_body(&error_type, "scripted"))
        }
        Some(Scripted::Answer(answer)) if !streaming => respond(&mut stream, 200, &[], &whole(&answer, &model, &usage)),
        Some(Scripted::Answer(answer)) => stream_events(&mut stream, &events(&answer, &model, &usage)),
        Some(Scripted::ErrorMidStream { text, error_type }) => {
            let mut sent = opening(&model, &usage);
            sent.extend(text_block(0, &text));
            sent.push((
                "error",
                json!({ "type": "error", "error": { "type": error_type, "message": "scripted failure" } }),
            ));
            stream_events(&mut stream, &sent)
        }
        Some(Scripted::CutMidStream { text }) => {
            let mut sent = opening(&model, &usage);
            sent.extend(text_block(0, &text));
            sent.truncate(sent.len() - 1);
            stream_events(&mut stream, &sent)
        }
    };
    let _ = written;
}

fn error_body(kind: &str, message: &str) -> String {
    json!({ "type": "error", "error": { "type": kind, "message": message } }).to_string()
}

fn respond(stream: &mut TcpStream, status: u16, headers: &[(String, String)], body: &str) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}

fn stream_events(stream: &mut TcpStream, events: &[(&str, Value)]) -> std::io::Result<()> {
    stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")?;
    for (name, data) in events {
        stream.write_all(format!("event: {name}\ndata: {data}\n\n").as_bytes())?;
        stream.flush()?;
    }
    Ok(())
}

/// `message_start` and a `ping`.
fn opening(model: &str, usage: &Value) -> Vec<(&'static str, Value)> {
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    vec![
        (
            "message_start",
            json!({ "type": "message_start", "message": {
                "id": "msg_test_1", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage } }),
        ),
        ("ping", json!({ "type": "ping" })),
    ]
}

/// A text block's events, its text in two deltas.
fn text_block(index: usize, text: &str) -> Vec<(&'static str, Value)> {
    let middle = text.char_indices().nth(text.chars().count() / 2).map_or(text.len(), |(at, _)| at);
    let mut events = vec![(
        "content_block_start",
        json!({ "type": "content_block_start", "index": index, "content_block": { "type": "text", "text": "" } }),
    )];
    for piece in [&text[..middle], &text[middle..]].into_iter().filter(|piece| !piece.is_empty()) {
        events.push((
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": index, "delta": { "type": "text_delta", "text": piece } }),
        ));
    }
    events.push(("content_block_stop", json!({ "type": "content_block_stop", "index": index })));
    events
}

fn events(answer: &Answer, model: &str, usage: &Value) -> Vec<(&'static str, Value)> {
    let mut events = opening(model, usage);
    let mut index = 0;
    if !answer.text.is_empty() {
        events.extend(text_block(index, &answer.text));
        index += 1;
    }
    for (id, name, input) in &answer.tool_uses {
        events.push((
            "content_block_start",
            json!({ "type": "content_block_start", "index": index, "content_block": { "type": "tool_use", "id": id, "name": name, "input": {} } }),
        ));
        let input = input.to_string();
        let cuts = [0, input.len() / 3, 2 * input.len() / 3, input.len()];
        for pair in cuts.windows(2) {
            let piece = input.get(pair[0]..pair[1]).unwrap_or_default();
            events.push((
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": index, "delta": { "type": "input_json_delta", "partial_json": piece } }),
            ));
        }
        events.push(("content_block_stop", json!({ "type": "content_block_stop", "index": index })));
        index += 1;
    }
    events.push((
        "message_delta",
        json!({ "type": "message_delta", "delta": { "stop_reason": stop_reason(answer), "stop_sequence": null },
                "usage": { "output_tokens": usage["output_tokens"] } }),
    ));
    events.push(("message_stop", json!({ "type": "message_stop" })));
    events
}

fn stop_reason(answer: &Answer) -> &str {
    match answer.stop_reason.as_str() {
        "" if answer.tool_uses.is_empty() => "end_turn",
        "" => "tool_use",
        other => other,
    }
}

fn whole(answer: &Answer, model: &str, usage: &Value) -> String {
    let mut content = Vec::new();
    if !answer.text.is_empty() {
        content.push(json!({ "type": "text", "text": answer.text }));
    }
    for (id, name, input) in &answer.tool_uses {
        content.push(json!({ "type": "tool_use", "id": id, "name": name, "input": input }));
    }
    json!({ "id": "msg_test_1", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason(answer), "stop_sequence": null, "usage": usage })
    .to_string()
}

/// The usage of a request, caching simulated: the prefix up to the last breakpoint is
/// written the first time it is seen and read after; a token is four bytes of JSON.
fn cache_usage(shared: &Shared, body: &Value) -> Value {
    let mut prefix = Vec::new();
    let mut cached_upto = 0;
    let blocks = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(body.get("system").and_then(Value::as_array).into_iter().flatten());
    for block in blocks {
        prefix.push(block.to_string());
        if block.get("cache_control").is_some() {
            cached_upto = prefix.len();
        }
    }
    let prefix = prefix[..cached_upto].concat();
    let tokens = |bytes: usize| bytes.div_ceil(4) as u64;
    let total = tokens(body.to_string().len());
    let (mut read, mut written) = (0, 0);
    if !prefix.is_empty() {
        let mut hasher = DefaultHasher::new();
        prefix.hash(&mut hasher);
        let fresh = shared.cached.lock().unwrap_or_else(PoisonError::into_inner).insert(hasher.finish());
        if fresh { written = tokens(prefix.len()) } else { read = tokens(prefix.len()) }
    }
    json!({
        "input_tokens": total.saturating_sub(read + written),
        "output_tokens": 17,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
    })
}

/// Every rule of the protocol `body` breaks.
fn check(method: &str, path: &str, headers: &[(String, String)], body: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let header = |name: &str| headers.iter().any(|(key, value)| key.eq_ignore_ascii_case(name) && !value.is_empty());
    if method != "POST" || !path.starts_with("/v1/messages") {
        problems.push(format!("{method} {path} is not POST /v1/messages"));
    }
    for required in ["x-api-key", "anthropic-version", "content-type"] {
        if !header(required) {
            problems.push(format!("no `{required}` header"));
        }
    }
    if body.get("model").and_then(Value::as_str).is_none_or(str::is_empty) {
        problems.push("no `model`".into());
    }
    if body.get("max_tokens").and_then(Value::as_u64).is_none_or(|tokens| tokens == 0) {
        problems.push("no positive `max_tokens`".into());
    }
    for tool in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
        if tool.get("name").and_then(Value::as_str).is_none() || !tool.get("input_schema").is_some_and(Value::is_object)
        {
            problems.push(format!("a tool without `name` or `input_schema`: {tool}"));
        }
    }
    check_turns(body.get("messages"), &mut problems);
    let breakpoints: Vec<&Value> = ["tools", "system", "messages"]
        .iter()
        .filter_map(|key| body.get(*key).and_then(Value::as_array))
        .flatten()
        .flat_map(|item| {
            std::iter::once(item).chain(item.get("content").and_then(Value::as_array).into_iter().flatten())
        })
        .filter_map(|item| item.get("cache_control"))
        .collect();
    if breakpoints.len() > 4 {
        problems.push(format!("{} cache_control breakpoints, more than 4", breakpoints.len()));
    }
    for breakpoint in breakpoints {
        let ttl = breakpoint.get("ttl").and_then(Value::as_str).unwrap_or("5m");
        if breakpoint.get("type").and_then(Value::as_str) != Some("ephemeral") || !["5m", "1h"].contains(&ttl) {
            problems.push(format!("a cache_control that is not ephemeral 5m or 1h: {breakpoint}"));
        }
    }
    problems
}

/// Turns alternate, the first is the user's, and each `tool_result` answers a `tool_use`
/// of the assistant turn just before, ahead of any other content.
fn check_turns(messages: Option<&Value>, problems: &mut Vec<String>) {
    let Some(messages) = messages.and_then(Value::as_array).filter(|messages| !messages.is_empty()) else {
        problems.push("no `messages`".into());
        return;
    };
    let mut expected = "user";
    let mut open_calls: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role != expected {
            problems.push(format!("message {index} is `{role}` where `{expected}` must come"));
        }
        let content = message.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
        if content.is_empty() {
            problems.push(format!("message {index} has no content blocks"));
        }
        let mut answered = Vec::new();
        let mut seen_other = false;
        let mut calls = Vec::new();
        for block in &content {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_result") => {
                    let id = block.get("tool_use_id").and_then(Value::as_str).unwrap_or_default().to_string();
                    if role != "user" || seen_other || !open_calls.contains(&id) {
                        problems.push(format!("message {index}: a tool_result for `{id}` out of place"));
                    }
                    answered.push(id);
                }
                Some("tool_use") => calls.push(block.get("id").and_then(Value::as_str).unwrap_or_default().to_string()),
                Some("text") if block.get("text").and_then(Value::as_str).is_none_or(str::is_empty) => {
                    problems.push(format!("message {index}: an empty text block"));
                }
                Some("text") => seen_other = true,
                other => problems.push(format!("message {index}: a block of type {other:?}")),
            }
        }
        if role == "user" {
            open_calls.retain(|id| !answered.contains(id));
            if !open_calls.is_empty() {
                problems.push(format!("message {index} leaves tool_use {open_calls:?} unanswered"));
            }
        }
        open_calls = calls;
        expected = if role == "user" { "assistant" } else { "user" };
    }
}

/// One request's parts as read off the wire.
struct Raw {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    bytes: Vec<u8>,
}

fn read_request(stream: &mut TcpStream) -> Option<Raw> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).ok().filter(|read| *read > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, path) = (request_line.next()?.to_string(), request_line.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + 4 + length {
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).ok().filter(|read| *read > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    }
    Some(Raw { method, path, headers, bytes: buffer[head_end + 4..head_end + 4 + length].to_vec() })
}
