//! OpenTelemetry traces of `archmax serve` and the session commands, received by a
//! collector stand-in on loopback that decodes each OTLP/HTTP export with the protobuf
//! types (`ExportTraceServiceRequest`), and the JSON log lines that carry trace ids.
//!
//! Each server is stopped before its spans are read: its graceful shutdown sends what is
//! still batched, so nothing here waits on the exporter's schedule.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};

use crate::serving::{PATIENCE, Served};

/// The refund workflow of the park tests, with a webhook trigger on `prepare` as well.
fn workflow() -> String {
    let manual = "        description: Prepare one refund.\n";
    assert!(crate::parks::WORKFLOW.contains(manual), "the park tests' workflow has a manual trigger on `prepare`");
    let webhook = "      refund-requested:\n        description: The shop's webhook asks for a refund.\n        requires:\n          - { name: order, type: string }\n";
    crate::parks::WORKFLOW.replace(manual, &format!("{manual}{webhook}"))
}

/// The first answer calls a tool no state offers (the kernel refuses it), the second
/// hands the refund to a person; `pay` answers once the decision is made.
const TAPE: &str = r#"
- state: prepare
  model: tape-model-1
  usage: { input: 120, output: 30, cache_read: 100, cache_write: 7 }
  tool_calls:
    - { name: launch_rockets, args: {} }
- state: prepare
  usage: { input: 160, output: 20 }
  tool_calls:
    - { name: archmax_advance, args: { to: review, reason: the refund is worked out } }
- state: review
  text: A colleague will approve your refund shortly.
- state: pay
  text: Your refund is on its way.
"#;

const PROMPT: &str = "Refund ORD-3, please.";
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The collector stand-in: every span of every export it was sent, with its service.
struct Collector {
    address: String,
    spans: Arc<Mutex<Vec<(String, Span)>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("its address").to_string();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || receive(stream, &kept));
            }
        });
        Collector { address, spans }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    fn spans(&self) -> Vec<(String, Span)> {
        self.spans.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// Answers every POST on one connection (the exporter keeps it alive) with an empty
/// `ExportTraceServiceResponse`, keeping the decoded spans.
fn receive(stream: TcpStream, kept: &Mutex<Vec<(String, Span)>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("the stream clones"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("a content length");
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).expect("the body");
        assert!(request_line.starts_with("POST /v1/traces "), "the exporter posts to /v1/traces: {request_line}");
        let export = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP protobuf export");
        let mut spans = kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for resource in export.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|resource| text(&resource.attributes, "service.name"))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                spans.extend(scope.spans.into_iter().map(|span| (service.clone(), span)));
            }
        }
        drop(spans);
        let answered =
            writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
        if answered.is_err() {
            return;
        }
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes.iter().find(|pair| pair.key == key).and_then(|pair| pair.value.as_ref()?.value.as_ref())
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attribute(attributes, key)? {
        AnyValue::StringValue(text) => Some(text.clone()),
        _ => None,
    }
}

fn number(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attribute(attributes, key)? {
        AnyValue::IntValue(number) => Some(*number),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The spans of one run, found by name, attribute and parent.
struct Trace(Vec<Span>);

impl Trace {
    fn all(&self, name: &str) -> Vec<&Span> {
        self.0.iter().filter(|span| span.name == name).collect()
    }

    fn one(&self, name: &str, holds: impl Fn(&Span) -> bool) -> &Span {
        let found: Vec<&Span> = self.all(name).into_iter().filter(|span| holds(span)).collect();
        assert_eq!(found.len(), 1, "one span `{name}` as asked; the names received: {:?}", self.names());
        found[0]
    }

    fn children(&self, parent: &Span, name: &str) -> Vec<&Span> {
        self.all(name).into_iter().filter(|span| span.parent_span_id == parent.span_id).collect()
    }

    fn names(&self) -> Vec<&str> {
        self.0.iter().map(|span| span.name.as_str()).collect()
    }
}

struct Desk {
    root: PathBuf,
}

impl Desk {
    fn new(label: &str) -> Desk {
        let root = crate::support::scratch(&format!("telemetry-{label}"));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("workflows/refunds")).expect("workspace");
        fs::write(root.join("workflows/refunds/workflow.yaml"), workflow()).expect("workflow");
        fs::write(root.join("tape.yaml"), TAPE).expect("tape");
        Desk { root }
    }

    fn serve(&self, args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut all = vec!["--tape", "tape.yaml"];
        all.extend_from_slice(args);
        let mut env = env.to_vec();
        env.push(("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z"));
        Served::spawn(&self.root, &all, &env)
    }
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// The variables that send spans to `collector`.
fn traced(collector: &Collector) -> Vec<(&'static str, String)> {
    vec![("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()), ("OTEL_SERVICE_NAME", "refund-desk".to_string())]
}

/// One request with extra headers; the status and the JSON body.
fn request(served: &Served, method: &str, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    let mut stream = TcpStream::connect(&served.address).expect("the server accepts");
    stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
    let body = body.to_string();
    let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {}\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        served.address,
        body.len()
    )
    .expect("the request is sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer.as_str(), ""));
    let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Starts session `id` under the caller's trace and lets it park for the decision.
fn start_parked(served: &Served, id: &str) {
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let body = json!({ "message": PROMPT, "sessionId": id });
    let (status, shown) =
        request(served, "POST", "/v1/workflows/refunds/sessions?wait=60", &[("traceparent", &traceparent)], &body);
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "awaiting_decision", "{shown}");
}

fn decide(served: &Served, id: &str) {
    let (status, shown) =
        request(served, "POST", &format!("/v1/sessions/{id}/decide?wait=60"), &[], &json!({ "to": "pay" }));
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "completed", "{shown}");
}

/// Stops the server (which flushes its spans) and returns what the collector holds.
fn stopped(served: Served, collector: &Collector) -> Trace {
    assert_eq!(served.stop(), Some(0), "archmax serve stops cleanly");
    let received = collector.spans();
    assert!(received.iter().all(|(service, _)| service == "refund-desk"), "every span is the service's");
    Trace(received.into_iter().map(|(_, span)| span).collect())
}

#[test]
fn a_served_turn_is_traced_under_its_callers_context_from_request_to_commit() {
    let desk = Desk::new("tree");
    let collector = Collector::start();
    let env = traced(&collector);
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let served = desk.serve(&[], &env);
    start_parked(&served, "t1");
    let trace = stopped(served, &collector);

    let request = trace.one("POST /v1/workflows/{slug}/sessions", |_| true);
    assert_eq!(hex(&request.trace_id), CALLER_TRACE, "the caller's trace is continued");
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN, "the request is the caller's span's child");
    assert_eq!(text(&request.attributes, "http.route").as_deref(), Some("/v1/workflows/{slug}/sessions"));
    assert_eq!(number(&request.attributes, "http.response.status_code"), Some(200));

    let turn = trace.one("archmax.turn", |span| span.parent_span_id == request.span_id);
    assert_eq!(text(&turn.attributes, "archmax.session.id").as_deref(), Some("t1"));
    assert!(turn.links.is_empty(), "a new session links to nothing");
    // Each model call and its tool calls are one step: two steps in `prepare`.
    let prepares: Vec<&Span> = trace
        .children(turn, "archmax.state")
        .into_iter()
        .filter(|span| text(&span.attributes, "archmax.state").as_deref() == Some("prepare"))
        .collect();
    assert_eq!(prepares.len(), 2, "two steps in `prepare` under the turn; got {:?}", trace.names());
    let (prepare, advancing) = (prepares[0], prepares[1]);

    let calls = trace.children(prepare, "chat");
    assert!(!calls.is_empty(), "model calls under the state; got {:?}", trace.names());
    let first = calls
        .iter()
        .find(|span| number(&span.attributes, "gen_ai.usage.input_tokens") == Some(120))
        .expect("the first model call, with the tape's usage");
    assert_eq!(text(&first.attributes, "gen_ai.operation.name").as_deref(), Some("chat"));
    assert_eq!(text(&first.attributes, "gen_ai.provider.name").as_deref(), Some("archmax.tape"));
    assert_eq!(text(&first.attributes, "gen_ai.response.model").as_deref(), Some("tape-model-1"));
    assert_eq!(number(&first.attributes, "gen_ai.usage.output_tokens"), Some(30));
    assert_eq!(number(&first.attributes, "gen_ai.usage.cache_read.input_tokens"), Some(100));
    assert_eq!(number(&first.attributes, "gen_ai.usage.cache_creation.input_tokens"), Some(7));

    let tool = trace.one("execute_tool launch_rockets", |span| span.parent_span_id == prepare.span_id);
    let refusal = tool.events.iter().find(|event| event.name == "archmax.kernel.refusal").expect("the refusal event");
    let rule = text(&refusal.attributes, "archmax.rule").expect("the refusal's rule id");
    assert!(!rule.is_empty());
    let advance = trace.one("execute_tool archmax_advance", |span| span.parent_span_id == advancing.span_id);
    assert!(advance.events.iter().all(|event| event.name != "archmax.kernel.refusal"), "an allowed call");

    let commits: Vec<&Span> = trace.children(prepare, "archmax.store.commit");
    assert!(!commits.is_empty(), "the step's commit is under its state");
    for span in trace.all("chat") {
        for key in ["gen_ai.input.messages", "gen_ai.output.messages"] {
            assert!(attribute(&span.attributes, key).is_none(), "no content by default ({key})");
        }
    }
    for span in &trace.0 {
        assert!(!span.name.contains("t1") && !span.name.contains("ORD-3"), "no session content in `{}`", span.name);
    }
}

#[test]
fn a_parked_session_resumed_later_links_its_new_trace_to_the_turn_that_parked_it() {
    let desk = Desk::new("resume");
    let collector = Collector::start();
    let env = traced(&collector);
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let served = desk.serve(&[], &env);
    start_parked(&served, "r1");
    decide(&served, "r1");
    let trace = stopped(served, &collector);

    let started = trace.one("POST /v1/workflows/{slug}/sessions", |_| true);
    let parking = trace.one("archmax.turn", |span| span.parent_span_id == started.span_id);
    let decided = trace.one("POST /v1/sessions/{id}/decide", |_| true);
    assert_ne!(decided.trace_id, parking.trace_id, "the resumed turn is a trace of its own");
    let resumed = trace.one("archmax.turn", |span| span.parent_span_id == decided.span_id);
    assert_eq!(resumed.links.len(), 1, "the resumed turn links back");
    let link = &resumed.links[0];
    assert_eq!((&link.trace_id, &link.span_id), (&parking.trace_id, &parking.span_id), "to the parking turn");
    let pay = trace
        .children(resumed, "archmax.state")
        .into_iter()
        .find(|span| text(&span.attributes, "archmax.state").as_deref() == Some("pay"))
        .expect("the resumed turn runs `pay`");
    assert!(!trace.children(pay, "chat").is_empty(), "its model call is under it");
}

#[test]
fn content_is_captured_only_when_opted_in_and_json_logs_carry_the_span_ids() {
    let desk = Desk::new("content");
    let collector = Collector::start();
    let mut env = traced(&collector);
    env.push(("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true".to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let mut served = desk.serve(&["--log-format", "json"], &env);
    start_parked(&served, "c1");
    served.wait_for_log("archmax.kernel.refusal");
    let lines = served.lines();
    let trace = stopped(served, &collector);

    let first = trace
        .all("chat")
        .into_iter()
        .find(|span| number(&span.attributes, "gen_ai.usage.input_tokens") == Some(120))
        .expect("the first model call");
    let input = text(&first.attributes, "gen_ai.input.messages").expect("the prompt, opted in");
    let input: Value = serde_json::from_str(&input).expect("the prompt as JSON");
    let messages = input["messages"].as_array().expect("the conversation");
    assert!(messages.iter().any(|message| message.to_string().contains(PROMPT)), "the user's message: {input}");
    let output = text(&first.attributes, "gen_ai.output.messages").expect("the completion, opted in");
    let output: Value = serde_json::from_str(&output).expect("the completion as JSON");
    assert_eq!(output[0]["parts"][0]["name"], "launch_rockets", "{output}");

    let tool = trace.one("execute_tool launch_rockets", |_| true);
    let refusal_line = refusal_log(&lines);
    assert_eq!(refusal_line["trace_id"].as_str(), Some(hex(&tool.trace_id).as_str()), "{refusal_line}");
    assert_eq!(refusal_line["span_id"].as_str(), Some(hex(&tool.span_id).as_str()), "{refusal_line}");
}

/// The JSON log line of the kernel's refusal.
fn refusal_log(lines: &[String]) -> Value {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "archmax.kernel.refusal")
        .unwrap_or_else(|| panic!("a refusal line in the log:\n{}", lines.join("\n")))
}

#[test]
fn without_tracing_json_logs_carry_no_trace_ids() {
    let desk = Desk::new("untraced");
    let mut served = desk.serve(&["--log-format", "json"], &[]);
    start_parked(&served, "u1");
    served.wait_for_log("archmax.kernel.refusal");
    let line = refusal_log(&served.lines());
    assert!(line.get("trace_id").is_none() && line.get("span_id").is_none(), "{line}");
    assert_eq!(served.stop(), Some(0));
}

#[test]
fn a_bad_tracing_variable_stops_serve_naming_the_variable() {
    let desk = Desk::new("bad");
    let output = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["serve", "--listen", "127.0.0.1:0", "--tape", "tape.yaml"])
        .current_dir(&desk.root)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .expect("archmax runs");
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && stderr.contains("http/protobuf"), "{stderr}");
}

/// `archmax` in `root` with the variables that send spans to `collector`.
fn command(root: &Path, collector: &Collector, args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", format!("{}/v1/traces", collector.endpoint()))
        .env_remove("ARCHMAX_API_BASE_URL")
        .output()
        .expect("archmax runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn run_and_decide_export_their_turns_and_the_decision_links_to_the_park() {
    let desk = Desk::new("commands");
    let collector = Collector::start();
    let park: String = TAPE.split("- state: pay").next().unwrap_or(TAPE).to_string();
    fs::write(desk.root.join("park.yaml"), park).expect("tape");
    command(&desk.root, &collector, &["run", "refunds", PROMPT, "--session", "k1", "--tape", "park.yaml"]);
    let parked = Trace(collector.spans().into_iter().map(|(_, span)| span).collect());
    let parking = parked.one("archmax.turn", |_| true);
    assert!(parking.parent_span_id.is_empty(), "a command's turn is a root span");
    assert!(!parked.children(parking, "archmax.state").is_empty());

    fs::write(desk.root.join("pay.yaml"), "- { state: pay, text: Your refund is on its way. }\n").expect("tape");
    command(&desk.root, &collector, &["decide", "k1", "--to", "pay", "--tape", "pay.yaml"]);
    let all = Trace(collector.spans().into_iter().map(|(_, span)| span).collect());
    let resumed = all.one("archmax.turn", |span| span.span_id != parking.span_id);
    assert_eq!(resumed.links.len(), 1, "the decision's turn links to the park");
    assert_eq!((&resumed.links[0].trace_id, &resumed.links[0].span_id), (&parking.trace_id, &parking.span_id));
    let services: HashMap<String, usize> =
        collector.spans().into_iter().fold(HashMap::new(), |mut count, (service, _)| {
            *count.entry(service).or_default() += 1;
            count
        });
    assert_eq!(services.keys().collect::<Vec<_>>(), vec!["archmax"], "the default service name");
}

#[test]
fn a_webhook_firing_continues_its_senders_trace() {
    let desk = Desk::new("webhook");
    let collector = Collector::start();
    let env = traced(&collector);
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let served = desk.serve(&[], &env);
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let (status, shown) = request(
        &served,
        "POST",
        "/v1/triggers/refund-requested?wait=60",
        &[("traceparent", &traceparent)],
        &json!({ "order": "ORD-3" }),
    );
    assert_eq!(status, 200, "{shown}");
    let trace = stopped(served, &collector);

    let firing = trace.one("POST /v1/triggers/{trigger}", |_| true);
    assert_eq!(hex(&firing.trace_id), CALLER_TRACE, "the sender's trace is continued");
    assert_eq!(hex(&firing.parent_span_id), CALLER_SPAN, "the firing is the sender's span's child");
    let turn = trace.one("archmax.turn", |span| span.parent_span_id == firing.span_id);
    assert_eq!(hex(&turn.trace_id), CALLER_TRACE);
    assert!(!trace.children(turn, "archmax.state").is_empty(), "the turn's states under it: {:?}", trace.names());
}

#[test]
fn a_sub_workflow_is_traced_as_a_child_of_its_callers_tool_call() {
    let root = crate::support::scratch("telemetry-delegate");
    let _ = fs::remove_dir_all(&root);
    crate::support::copy_dir(&crate::support::repository().join("golden/runs/delegate-agent-call/workspace"), &root);
    let collector = Collector::start();
    let variables = r#"{"sku":"FH-MUG-OAT","quantity":4}"#;
    let prompt = "Can I order 4 more of the oat mugs?";
    command(
        &root,
        &collector,
        &["run", "order-desk", prompt, "--session", "s1", "--tape", "tape.yaml", "--variables", variables],
    );
    let trace = Trace(collector.spans().into_iter().map(|(_, span)| span).collect());
    let session =
        |id: &'static str| move |span: &Span| text(&span.attributes, "archmax.session.id").as_deref() == Some(id);
    let caller = trace.one("archmax.turn", session("s1"));
    let child = trace.one("archmax.turn", session("s1~1"));

    let by_id = |id: &[u8]| trace.0.iter().find(|span| span.span_id == id);
    let call = by_id(&child.parent_span_id).expect("the child's parent span is exported");
    assert_eq!(call.name, "execute_tool archmax_workflow_stock-check", "the child runs under the call that started it");
    assert_eq!(text(&call.attributes, "gen_ai.tool.name").as_deref(), Some("archmax_workflow_stock-check"));
    let state = by_id(&call.parent_span_id).expect("the call's state span is exported");
    assert_eq!(state.name, "archmax.state");
    assert_eq!(state.parent_span_id, caller.span_id, "the call is a step of the caller's turn");
    assert_eq!(child.trace_id, caller.trace_id, "one trace for the caller and its child");
    assert!(!trace.children(child, "archmax.state").is_empty(), "the child's own states under its turn");
    let _ = fs::remove_dir_all(&root);
}
