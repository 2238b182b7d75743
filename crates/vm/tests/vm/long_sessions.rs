//! Long sessions end to end: the OpenAI-compatible adapter against an in-suite endpoint on
//! loopback that plays the agent (and the summarizer) and measures every request it is
//! sent. One session fetches a thousand 50 KB reports from a host tool, more than 2,000
//! messages in all: every request must stay under the `[context]` budget, the offloaded
//! results must page through `read_file`, no request may hold a tool call without its
//! answer (or an answer without its call), the summarized text must be in
//! `conversation_history/`, and the session resumed by another runtime over the same
//! files must be shown the very conversation the first one was showing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use archmax_vm::clock::FixedClock;
use archmax_vm::context::{ContextSettings, estimate};
use archmax_vm::events::EventSink;
use archmax_vm::model::openai::{OpenAiAdapter, OpenAiConfig};
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::{Message, Status};
use archmax_vm::tool_host::{Catalog, HostAnswer, HostCall, HostError, HostFuture, HostTool, ToolHost};
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const DESK: &str = r#"title: Report desk
instructions: You tally carrier reports for Fernhill's logistics team.
tools:
  allow_always: [read_file]
states:
  tally:
    triggers:
      manual:
        description: Tally a batch of carrier reports.
    instructions: Fetch every report with reports__fetch, then say the tally.
    tools:
      allow: [reports__fetch]
    transitions:
      - to: filed
        description: The tally is filed.
  filed:
    instructions: Say that the tally is filed.
"#;

/// Reports the agent fetches: two messages each, so the session passes 2,000 messages.
const REPORTS: usize = 1_000;
const WINDOW: u64 = 16_000;
const COMPACT_AT: f64 = 0.8;
/// `compact_at` of the window: no agent request may pass it.
const LIMIT: u64 = (WINDOW as f64 * COMPACT_AT) as u64;
/// The report whose offloaded result the agent pages through, and where.
const PAGED: usize = 1;
const PAGE_OFFSET: u64 = 200;

/// One report's text: 50 KB of numbered lines.
fn report(number: usize) -> String {
    let mut text = String::with_capacity(51_000);
    let mut line = 1;
    while text.len() < 50_000 {
        text.push_str(&format!("report {number} · line {line:04} · hub scan recorded, parcel in transit\n"));
        line += 1;
    }
    text
}

struct Reports {
    catalog: Arc<Catalog>,
}

impl ToolHost for Reports {
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
        let catalog = Arc::clone(&self.catalog);
        Box::pin(async move { catalog })
    }

    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
        Box::pin(async move {
            if call.tool != "reports__fetch" {
                return Err(HostError::NotProvided(call.tool.to_string()));
            }
            let number = call.args["report"].as_u64().unwrap_or(0) as usize;
            Ok(HostAnswer::text("reports", report(number)))
        })
    }

    fn may_provide(&self, name: &str) -> bool {
        name.starts_with("reports__")
    }
}

fn reports_host() -> Arc<Reports> {
    let fetch = HostTool {
        name: "reports__fetch".to_string(),
        server: "reports".to_string(),
        description: "Fetch one carrier report by its number.".to_string(),
        input_schema: json!({ "type": "object", "properties": { "report": { "type": "integer" } }, "required": ["report"] }),
        paths: Vec::new(),
    };
    Arc::new(Reports { catalog: Arc::new(Catalog { tools: vec![fetch], problems: Vec::new() }) })
}

/// What the endpoint saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    summarizer: bool,
    body_bytes: usize,
    /// The prompt's tokens by the runtime's estimate for this model (a quarter of the
    /// characters of each text the prompt carries).
    tokens: u64,
    /// The messages after the system message.
    messages: Vec<Value>,
    /// A tool answer without its call before it, or a call without its answer.
    unpaired: Option<String>,
}

/// How the endpoint plays the summarizer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Summarizer {
    /// With a short summary.
    #[default]
    Answers,
    /// With an HTTP 500: the call fails.
    Fails,
    /// With a tool call and no text.
    CallsATool,
    /// With a short summary the first time, with an HTTP 500 after that.
    AnswersOnce,
}

#[derive(Default)]
struct Endpoint {
    /// How many reports the agent fetches before it says the tally.
    reports: usize,
    summarizer: Summarizer,
    seen: Vec<Seen>,
    /// Agent calls answered so far.
    agent_calls: usize,
    /// What the agent read back of the page it asked for.
    page: Option<String>,
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|part| part["text"].as_str()).collect::<Vec<_>>().join("\n\n"),
        _ => String::new(),
    }
}

fn measure(body: &Value) -> u64 {
    let mut tokens = 0;
    for message in body["messages"].as_array().into_iter().flatten() {
        tokens += estimate(&text_of(&message["content"]));
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            tokens += estimate(call["function"]["name"].as_str().unwrap_or(""));
            tokens += estimate(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        let function = &tool["function"];
        tokens += estimate(function["name"].as_str().unwrap_or(""));
        tokens += estimate(function["description"].as_str().unwrap_or(""));
        tokens += estimate(&function["parameters"].to_string());
    }
    tokens
}

/// Checks that every tool answer follows its call and every call is answered.
fn pairing(messages: &[Value]) -> Option<String> {
    let mut open: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        match message["role"].as_str() {
            Some("assistant") => {
                if !open.is_empty() {
                    return Some(format!("message {index}: calls {open:?} were never answered"));
                }
                open = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|call| call["id"].as_str().map(str::to_string))
                    .collect();
            }
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or("");
                let Some(at) = open.iter().position(|open| open == id) else {
                    return Some(format!("message {index}: an answer to `{id}` with no call before it"));
                };
                open.remove(at);
            }
            _ => {
                if !open.is_empty() {
                    return Some(format!("message {index}: calls {open:?} were never answered"));
                }
            }
        }
    }
    None
}

impl Endpoint {
    fn new(reports: usize, summarizer: Summarizer) -> Endpoint {
        Endpoint { reports, summarizer, ..Endpoint::default() }
    }

    /// The answer to one request body, as a chat-completions response, or an HTTP error.
    fn answer(&mut self, body: &Value) -> Result<Value, u16> {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let system = messages.first().map(|message| text_of(&message["content"])).unwrap_or_default();
        let summarizer = system.starts_with("You condense");
        let rest = messages.get(1..).map(<[Value]>::to_vec).unwrap_or_default();
        self.seen.push(Seen {
            summarizer,
            body_bytes: body.to_string().len(),
            tokens: measure(body),
            unpaired: pairing(&rest),
            messages: rest.clone(),
        });
        if summarizer {
            let number = self.seen.iter().filter(|seen| seen.summarizer).count();
            return match self.summarizer {
                Summarizer::AnswersOnce if number > 1 => Err(500),
                Summarizer::Answers | Summarizer::AnswersOnce => Ok(completion(json!({
                    "role": "assistant",
                    "content": format!("Summary {number}: the agent is fetching carrier reports one by one; every report so far says its parcels are in transit.")
                }))),
                Summarizer::Fails => Err(500),
                Summarizer::CallsATool => Ok(completion(json!({
                    "role": "assistant", "content": null, "tool_calls": [{
                        "id": "summary-call", "type": "function",
                        "function": { "name": "read_file", "arguments": "{\"file_path\":\"notes.md\"}" }
                    }]
                }))),
            };
        }
        let reports = self.reports;
        let call = self.agent_calls;
        self.agent_calls += 1;
        if call == PAGED + 3 {
            // The answer to the page the agent asked for on its last call.
            self.page = rest.last().map(|message| text_of(&message["content"]));
        }
        let function = |name: &str, arguments: Value| {
            json!({ "role": "assistant", "content": null, "tool_calls": [{
                "id": format!("c{call}"), "type": "function",
                "function": { "name": name, "arguments": arguments.to_string() }
            }] })
        };
        let message = match call {
            call if call == PAGED + 2 => function(
                "read_file",
                json!({ "file_path": format!("large_tool_results/c{PAGED}"), "offset": PAGE_OFFSET, "limit": 3 }),
            ),
            call if call <= reports => {
                let number = if call > PAGED + 2 { call - 1 } else { call };
                function("reports__fetch", json!({ "report": number }))
            }
            _ => {
                json!({ "role": "assistant", "content": format!("Tallied {reports} reports: every parcel is in transit.") })
            }
        };
        Ok(completion(message))
    }
}

fn completion(message: Value) -> Value {
    json!({
        "id": "chatcmpl-suite",
        "model": "relay-model-1",
        "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 100, "completion_tokens": 10 }
    })
}

/// Serves chat completions on loopback until the test ends.
fn serve(endpoint: Arc<Mutex<Endpoint>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let endpoint = Arc::clone(&endpoint);
            std::thread::spawn(move || connection(stream, &endpoint));
        }
    });
    base_url
}

/// Answers the requests of one connection (the client may keep it alive).
fn connection(stream: TcpStream, endpoint: &Mutex<Endpoint>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut started = false;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" && started {
                break;
            }
            started = true;
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = match endpoint.lock() {
            Ok(mut endpoint) => endpoint.answer(&request),
            Err(_) => return,
        };
        let (status, text) = match answer {
            Ok(answer) => ("200 OK", answer.to_string()),
            Err(_) => {
                ("500 Internal Server Error", json!({ "error": { "message": "the summarizer is down" } }).to_string())
            }
        };
        let head =
            format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", text.len());
        if writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(text.as_bytes())).is_err() {
            return;
        }
    }
}

fn runtime(base_url: &str, root: &Path, events: &EventSink) -> Runtime {
    let config = OpenAiConfig {
        base_url: base_url.to_string(),
        api_key: "sk-suite".to_string(),
        default_model: Some("relay-model".to_string()),
        temperature: None,
        max_tokens: None,
        request_timeout: Duration::from_secs(120),
        max_retries: 0,
        pricing: PricingTable::default(),
        prompt_cache: true,
        prompt_cache_ttl: "5m",
        streaming: false,
        flavor: Default::default(),
        headers: Vec::new(),
    };
    archmax_vm::model::openai::install_tls_provider();
    Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/desk/workflow.yaml", DESK)])),
        store: Arc::new(FsStore::for_workspace(root).expect("the workspace's seal key")),
        model: Arc::new(OpenAiAdapter::new(config).expect("adapter")),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: root.to_path_buf(),
        pricing: PricingTable::default(),
    })
    .tool_host(reports_host(), Vec::new())
    .context(ContextSettings {
        window_tokens: Some(WINDOW),
        compact_at: COMPACT_AT,
        max_tool_result_tokens: 1_000,
        keep_recent: 12,
    })
    // One turn holds the whole session: a thousand tool batches.
    .recursion_limit(10 * REPORTS)
    .build()
}

/// A file under `dir` whose path ends in `tail`.
fn find(dir: &Path, tail: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find(&path, tail) {
                return Some(found);
            }
        } else if path.to_string_lossy().ends_with(tail) {
            return Some(path);
        }
    }
    None
}

/// The `[trimmed]` note in the last agent request.
fn trimmed_note(agent: &[&Seen]) -> String {
    let last = agent.last().expect("a last request");
    last.messages
        .iter()
        .map(|message| text_of(&message["content"]))
        .find(|text| text.starts_with("[trimmed] Messages"))
        .unwrap_or_else(|| panic!("no [trimmed] note in {:#?}", last.messages))
}

/// What a desk session runs against: a fresh root, the scripted endpoint on loopback, an
/// executor, the recorded events and a runtime on them all.
struct Desk {
    root: PathBuf,
    endpoint: Arc<Mutex<Endpoint>>,
    base_url: String,
    executor: tokio::runtime::Runtime,
    events: EventSink,
    runtime: Runtime,
}

fn desk(label: &str, reports: usize, summarizer: Summarizer) -> Desk {
    let root = std::env::temp_dir().join(format!("archmax-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let endpoint = Arc::new(Mutex::new(Endpoint::new(reports, summarizer)));
    let base_url = serve(Arc::clone(&endpoint));
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let events = EventSink::new();
    events.record();
    let runtime = runtime(&base_url, &root, &events);
    Desk { root, endpoint, base_url, executor, events, runtime }
}

/// The desk's one request, on session `s1`.
fn tally() -> TurnRequest {
    TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Tally this week's carrier reports.".to_string()),
        ..TurnRequest::default()
    }
}

#[test]
fn a_two_thousand_message_session_stays_under_its_budget_and_resumes_compacted() {
    let Desk { root, endpoint, base_url, executor, events, runtime: first } =
        desk("long-session", REPORTS, Summarizer::Answers);
    let outcome = executor.block_on(first.run_turn(tally())).expect("the turn runs");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert!(outcome.reply.starts_with("Tallied 1000 reports"), "{}", outcome.reply);
    let session = executor.block_on(first.store().read("s1")).expect("reads").expect("stored");
    assert!(session.messages.len() > 2 * REPORTS, "{} messages", session.messages.len());

    let seen = endpoint.lock().expect("endpoint").seen.clone();
    let agent: Vec<&Seen> = seen.iter().filter(|seen| !seen.summarizer).collect();
    let summaries = seen.len() - agent.len();
    assert_eq!(agent.len(), REPORTS + 2, "a call per report, the page, and the tally");

    // The budget: every agent request under `compact_at` of the window, every request
    // (the summarizer's too) inside the window, and the session did come close to it.
    for (index, request) in agent.iter().enumerate() {
        assert!(request.tokens <= LIMIT, "agent request {index} takes {} tokens, over {LIMIT}", request.tokens);
        assert!(request.unpaired.is_none(), "agent request {index}: {:?}", request.unpaired);
    }
    for request in &seen {
        assert!((request.body_bytes as u64) / 4 <= WINDOW, "a request of {} bytes", request.body_bytes);
    }
    let largest = agent.iter().map(|request| request.tokens).max().unwrap_or(0);
    assert!(largest > LIMIT * 3 / 4, "the session never came near its budget ({largest} tokens)");
    // Without compaction the prompt would have grown with every report.
    let shown_messages = agent.last().map_or(0, |last| last.messages.len());
    assert!(shown_messages < 100, "the last request still shows {shown_messages} messages");

    // Each compaction was one summarizer call and one event, smaller after than before.
    let recorded: Vec<Value> =
        events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    let compactions: Vec<&Value> = recorded.iter().filter(|event| event["event"] == "context-compacted").collect();
    assert!(compactions.len() >= 50, "{} compactions", compactions.len());
    assert_eq!(compactions.len(), summaries);
    for (index, event) in compactions.iter().enumerate() {
        let (before, after) = (event["tokensBefore"].as_u64().unwrap_or(0), event["tokensAfter"].as_u64().unwrap_or(0));
        assert!(before > LIMIT && after < before && after <= LIMIT, "{event}");
        assert_eq!(event["count"], json!(index + 1));
        assert_eq!(event["path"], json!(format!("conversation_history/{}.jsonl", index + 1)));
    }
    // After the first compaction, every agent request opens with the latest summary.
    let last = agent.last().expect("a last request");
    let opening =
        last.messages.iter().find(|message| message["role"] == "tool").map(|message| text_of(&message["content"]));
    assert!(
        opening.as_deref().is_some_and(
            |text| text.starts_with("[summary] Messages") && text.contains(&format!("Summary {summaries}:"))
        ),
        "{opening:?}"
    );

    // The page the agent asked for of an offloaded report is the right one, and the
    // saved file holds the whole report.
    let page = endpoint.lock().expect("endpoint").page.clone().unwrap_or_default();
    let line = |number: u64| format!("report {PAGED} · line {number:04} ·");
    assert!(page.contains(&line(PAGE_OFFSET + 1)) && page.contains(&line(PAGE_OFFSET + 2)), "{page}");
    assert!(!page.contains(&line(PAGE_OFFSET - 2)) && !page.contains(&line(PAGE_OFFSET + 5)), "{page}");
    let saved = find(&root, &format!("large_tool_results/c{PAGED}")).expect("the offloaded result is saved");
    assert_eq!(std::fs::read_to_string(saved).expect("reads"), report(PAGED));

    // The summarized messages are kept whole, the first file starting with the request.
    let history = find(&root, "conversation_history/1.jsonl").expect("the first history file");
    let lines: Vec<Message> = std::fs::read_to_string(&history)
        .expect("reads")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is a message"))
        .collect();
    assert_eq!(lines.first(), session.messages.first());
    assert_eq!(lines.as_slice(), &session.messages[..lines.len()]);
    assert!(find(&root, "conversation_history/1.md").is_some());
    let last_history = find(&root, &format!("conversation_history/{summaries}.md")).expect("the last history file");
    assert!(std::fs::read_to_string(last_history).expect("reads").contains("reports__fetch"));

    // Another runtime over the same files: the conversation it shows the model is the
    // one the first runtime showed last, plus the tally and the new message.
    drop(first);
    let resumed = runtime(&base_url, &root, &EventSink::new());
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("And how many reports was that?".to_string()),
        ..TurnRequest::default()
    };
    let outcome = executor.block_on(resumed.run_turn(request)).expect("the resumed turn runs");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    let seen = endpoint.lock().expect("endpoint").seen.clone();
    let again = seen.iter().rev().find(|seen| !seen.summarizer).expect("the resumed call");
    let shown = &last.messages;
    assert_eq!(&again.messages[..shown.len()], shown.as_slice(), "the resumed session shows the same conversation");
    let added: Vec<&str> =
        again.messages[shown.len()..].iter().filter_map(|message| message["role"].as_str()).collect();
    assert_eq!(added, ["assistant", "user"], "{:#?}", &again.messages[shown.len()..]);
    let _ = std::fs::remove_dir_all(&root);
}

/// A summarizer that cannot summarize (`behaviour`): the first compaction of the turn
/// asks it once, then every compaction cuts the older messages without a summary. No
/// request may pass the window, the cut messages are kept whole in
/// `conversation_history/`, and a `[trimmed]` note says what was cut.
fn without_a_summary_the_older_messages_are_cut_inside_the_window(behaviour: Summarizer, label: &str) {
    const FETCHED: usize = 60;
    let Desk { root, endpoint, executor, events, runtime, .. } = desk(&format!("trimmed-{label}"), FETCHED, behaviour);
    let outcome = executor.block_on(runtime.run_turn(tally())).expect("the turn runs");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    let session = executor.block_on(runtime.store().read("s1")).expect("reads").expect("stored");

    let seen = endpoint.lock().expect("endpoint").seen.clone();
    assert_eq!(seen.iter().filter(|seen| seen.summarizer).count(), 1, "a failed summarizer is asked once a turn");
    let agent: Vec<&Seen> = seen.iter().filter(|seen| !seen.summarizer).collect();
    assert_eq!(agent.len(), FETCHED + 2);
    for (index, request) in agent.iter().enumerate() {
        assert!(request.tokens <= WINDOW, "agent request {index} takes {} tokens, over the window", request.tokens);
        assert!((request.body_bytes as u64) / 4 <= WINDOW, "agent request {index} is {} bytes", request.body_bytes);
        assert!(request.tokens <= LIMIT, "agent request {index} takes {} tokens, over {LIMIT}", request.tokens);
        assert!(request.unpaired.is_none(), "agent request {index}: {:?}", request.unpaired);
    }
    let largest = agent.iter().map(|request| request.tokens).max().unwrap_or(0);
    assert!(largest > LIMIT * 3 / 4, "the session never came near its budget ({largest} tokens)");

    let recorded: Vec<Value> =
        events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    let warnings: Vec<&Value> = recorded
        .iter()
        .filter(|event| event["event"] == "warning" && event["scope"] == "context")
        .filter(|event| event["message"].as_str().is_some_and(|text| text.contains("could not be summarized")))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let cuts: Vec<&Value> = recorded.iter().filter(|event| event["event"] == "context-compacted").collect();
    assert!(cuts.len() >= 2, "{} cuts", cuts.len());
    for event in &cuts {
        assert_eq!(event["trimmed"], json!(true), "{event}");
        let (before, after) = (event["tokensBefore"].as_u64().unwrap_or(0), event["tokensAfter"].as_u64().unwrap_or(0));
        assert!(after < before && after <= LIMIT, "{event}");
    }
    let note = trimmed_note(&agent);
    assert!(note.contains(&format!("conversation_history/{}.md", cuts.len())), "{note}");

    let history = find(&root, "conversation_history/1.jsonl").expect("the first history file");
    let lines: Vec<Message> = std::fs::read_to_string(&history)
        .expect("reads")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is a message"))
        .collect();
    assert!(lines.len() > 10, "{} messages saved", lines.len());
    assert_eq!(lines.as_slice(), &session.messages[..lines.len()], "the cut messages are saved whole");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_summarizer_that_fails_gives_way_to_a_cut_inside_the_window() {
    without_a_summary_the_older_messages_are_cut_inside_the_window(Summarizer::Fails, "fails");
}

#[test]
fn a_summarizer_that_answers_with_no_text_gives_way_to_a_cut_inside_the_window() {
    without_a_summary_the_older_messages_are_cut_inside_the_window(Summarizer::CallsATool, "no-text");
}

/// A summarizer that summarizes once, then fails: every cut after the summary is made
/// without one, and the `[trimmed]` note that takes the summary's place in the model's
/// view carries that summary on and names every history file, the summary's included.
#[test]
fn a_cut_after_a_summary_keeps_the_summary_in_the_models_view() {
    const FETCHED: usize = 60;
    let Desk { root, endpoint, executor, events, runtime, .. } =
        desk("trimmed-after-summary", FETCHED, Summarizer::AnswersOnce);
    let outcome = executor.block_on(runtime.run_turn(tally())).expect("the turn runs");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");

    let recorded: Vec<Value> =
        events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    let cuts: Vec<&Value> = recorded.iter().filter(|event| event["event"] == "context-compacted").collect();
    assert!(cuts.len() >= 3, "{} cuts", cuts.len());
    assert!(cuts[0]["trimmed"] != json!(true), "the first cut is summarized: {}", cuts[0]);
    assert!(cuts[1..].iter().all(|event| event["trimmed"] == json!(true)), "{cuts:#?}");

    let seen = endpoint.lock().expect("endpoint").seen.clone();
    assert_eq!(seen.iter().filter(|seen| seen.summarizer).count(), 2, "asked again after a success, once");
    let agent: Vec<&Seen> = seen.iter().filter(|seen| !seen.summarizer).collect();
    for (index, request) in agent.iter().enumerate() {
        assert!(request.tokens <= LIMIT, "agent request {index} takes {} tokens, over {LIMIT}", request.tokens);
    }
    // From the first cut on, every request the agent is sent shows the summary.
    let first_shown = agent
        .iter()
        .position(|request| request.messages.iter().any(|message| text_of(&message["content"]).contains("Summary 1:")))
        .expect("the summary is shown");
    for (index, request) in agent.iter().enumerate().skip(first_shown) {
        let texts: Vec<String> = request.messages.iter().map(|message| text_of(&message["content"])).collect();
        assert!(
            texts.iter().any(|text| text.contains("Summary 1:")),
            "agent request {index} no longer shows the summary: {texts:#?}"
        );
    }
    let note = trimmed_note(&agent);
    let count = cuts.len();
    assert!(note.contains(&format!("`conversation_history/{count}.md`")), "{note}");
    assert!(
        note.contains(&format!("`conversation_history/1.md` to `conversation_history/{}.md`", count - 1)),
        "the note names every earlier history file: {note}"
    );
    assert!(note.contains("[summary] Messages 1–") && note.contains("Summary 1:"), "{note}");
    for number in 1..=count {
        assert!(find(&root, &format!("conversation_history/{number}.md")).is_some(), "history file {number}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
