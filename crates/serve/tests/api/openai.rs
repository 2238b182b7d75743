//! The server with the real OpenAI adapter, pointed at a chat-completions server in this
//! suite on loopback: each test scripts the answers (chosen from the request) and then
//! checks both what its HTTP client saw and what the model server was sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::StatusCode;
use serde_json::{Value, json};

use archmax_compiler::compile;
use archmax_compiler::lower::BuildInputs;
use archmax_serve::Server;
use archmax_vm::session::SessionStore;
use archmax_vm::session::memory::MemoryStore;

const API_KEY: &str = "sk-suite-0000";

/// One request the model server got.
#[derive(Clone, Debug)]
pub(super) struct Received {
    authorization: Option<String>,
    pub(super) body: Value,
}

/// What the script answers a request with: a status and a JSON body.
pub(super) type Script = Arc<dyn Fn(&Value) -> (u16, Value) + Send + Sync>;

#[derive(Clone)]
struct Shared {
    script: Script,
    received: Arc<Mutex<Vec<Received>>>,
}

/// A chat-completions server on loopback.
pub(super) struct ModelServer {
    pub(super) base_url: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

async fn completions(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (AxumStatus, Json<Value>) {
    let authorization = headers.get("authorization").and_then(|value| value.to_str().ok()).map(str::to_string);
    shared
        .received
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(Received { authorization, body: body.clone() });
    let (status, answer) = (shared.script)(&body);
    (AxumStatus::from_u16(status).unwrap_or(AxumStatus::INTERNAL_SERVER_ERROR), Json(answer))
}

impl ModelServer {
    pub(super) async fn start(script: Script) -> ModelServer {
        let received = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared { script, received: Arc::clone(&received) };
        let app =
            axum::Router::new().route("/v1/chat/completions", axum::routing::post(completions)).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ModelServer { base_url, received, task }
    }

    pub(super) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The system message's text (a string, or text parts).
fn system_text(body: &Value) -> String {
    let Some(messages) = body["messages"].as_array() else { return String::new() };
    messages
        .iter()
        .filter(|message| message["role"] == "system")
        .map(|message| match &message["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts.iter().filter_map(|part| part["text"].as_str()).collect(),
            _ => String::new(),
        })
        .collect()
}

/// The desk state a request is for, told by the system prompt: the state's instructions,
/// or (for the line written as the session is handed to finance) the parked block.
pub(super) fn desk_state(body: &Value) -> &'static str {
    let system = system_text(body);
    [("Hand the request to finance.", "intake"), ("## This session is parked", "review"), ("Say it was paid.", "done")]
        .into_iter()
        .find(|(marker, _)| system.contains(marker))
        .map_or("unknown", |(_, state)| state)
}

/// The names of the functions a request offered.
fn offered(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

fn answer(message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-suite",
        "object": "chat.completion",
        "model": "suite-model",
        "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
        "usage": { "prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110 },
    })
}

fn text_answer(text: &str) -> (u16, Value) {
    (200, answer(json!({ "role": "assistant", "content": text }), "stop"))
}

fn call_answer(name: &str, arguments: Value) -> (u16, Value) {
    let call =
        json!({ "id": "call_1", "type": "function", "function": { "name": name, "arguments": arguments.to_string() } });
    (200, answer(json!({ "role": "assistant", "content": null, "tool_calls": [call] }), "tool_calls"))
}

/// The archmax server with the OpenAI adapter built as `archmax serve` builds it: from
/// the `ARCHMAX_*` variables (here a table), pointed at `model`.
fn build_server(model: &ModelServer, retries: u32, store: Arc<MemoryStore>) -> Arc<Server> {
    build_server_on(&model.base_url, retries, store)
}

/// [`build_server`] for a model at `base_url`, on any store.
pub(super) fn build_server_on(base_url: &str, retries: u32, store: Arc<dyn SessionStore>) -> Arc<Server> {
    archmax_vm::model::openai::install_tls_provider();
    let variables = [
        ("ARCHMAX_API_BASE_URL", base_url.to_string()),
        ("ARCHMAX_API_KEY", API_KEY.to_string()),
        ("ARCHMAX_MODEL", "suite-model".to_string()),
        ("ARCHMAX_MAX_RETRIES", retries.to_string()),
    ];
    let get = move |name: &str| variables.iter().find(|(key, _)| *key == name).map(|(_, value)| value.clone());
    let adapter = archmax_vm::environment::endpoint_from_env(get).expect("the adapter is configured");
    let root = super::workspace();
    let program = compile(&root, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .map(|compiled| compiled.program)
        .unwrap_or_else(|_| panic!("the test workspace compiles"));
    let server = Server::new(super::parts(program, store, adapter, root)).expect("server");
    Arc::new(server)
}

/// [`build_server`] on a loopback port.
async fn serve_with(model: &ModelServer, retries: u32) -> super::Running {
    let server = build_server(model, retries, Arc::new(MemoryStore::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let served = tokio::spawn(archmax_serve::serve(listener, server, shutdown, Duration::from_secs(30)));
    super::Running { base, client: reqwest::Client::new(), stop: Some(stop), served }
}

/// The desk's model: hand over at intake, a line while parked, a closing line once paid.
pub(super) fn desk_script() -> Script {
    Arc::new(|body: &Value| match desk_state(body) {
        "intake" => call_answer("archmax_advance", json!({ "to": "review", "reason": "ready for finance" })),
        "review" => text_answer("Finance will review your payout."),
        "done" => text_answer("Your payout was paid."),
        _ => (400, json!({ "error": { "message": "the suite's model server does not know this state" } })),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_on_an_openai_compatible_server_from_start_to_decision_to_completion() {
    let model = ModelServer::start(desk_script()).await;
    let server = serve_with(&model, 0).await;

    let parked = server.start_desk(None, "oa-flow").await;
    assert_eq!(parked["park"]["channel"], "decision", "{parked}");
    assert_eq!(parked["turn"]["reply"], "Finance will review your payout.");
    assert_eq!(parked["turn"]["usage"]["inputTokens"], 200, "two calls of 100 prompt tokens: {parked}");
    assert_eq!(parked["turn"]["usage"]["outputTokens"], 20);

    let (status, decided) = server.post("/v1/sessions/oa-flow/decide?wait=60", None, json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "completed");
    assert_eq!(decided["turn"]["reply"], "Your payout was paid.");

    let received = model.received();
    let states: Vec<&str> = received.iter().map(|request| desk_state(&request.body)).collect();
    assert_eq!(states, ["intake", "review", "done"], "one call per step, each for its own state");
    for request in &received {
        assert_eq!(request.authorization.as_deref(), Some(format!("Bearer {API_KEY}").as_str()), "the API key arrived");
        assert_eq!(request.body["model"], "suite-model");
        // Streaming is asked for (the default); this server answers whole JSON anyway,
        // which the adapter reads as it is.
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["stream_options"]["include_usage"], true);
    }
    let intake = offered(&received[0].body);
    assert!(intake.iter().any(|name| name == "archmax_advance"), "intake may route: {intake:?}");
    // The line written as the session is handed over is told that any call is refused.
    assert!(system_text(&received[1].body).contains("every call is refused"), "{:?}", received[1].body);
    // The advance the model asked for at intake came back to it as a tool answer.
    // The terminal state has no way out to offer; the decision reached it as a runtime
    // note, so the note function is declared beside its tools.
    let done = offered(&received[2].body);
    assert!(!done.iter().any(|name| name == "archmax_advance"), "{done:?}");
    assert!(done.iter().any(|name| name == "archmax_note"), "{done:?}");
    let last = received[2].body["messages"].as_array().expect("messages");
    assert!(last.iter().any(|message| message["role"] == "tool" && message["tool_call_id"] == "call_1"), "{last:?}");
    assert!(server.stop().await, "every turn ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_server_that_keeps_failing_fails_the_turn_with_its_error() {
    let failing: Script = Arc::new(|_: &Value| (500, json!({ "error": { "message": "the suite's model is down" } })));
    let model = ModelServer::start(failing).await;
    // One retry: the adapter tries twice, then gives up.
    let server = serve_with(&model, 1).await;

    let (status, body) = server
        .post(
            "/v1/workflows/desk/sessions?wait=120",
            None,
            json!({ "message": "Pay invoice 9.", "sessionId": "oa-down" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "the turn ended, failed, within the wait: {body}");
    assert_eq!(body["status"], "failed", "{body}");

    let (status, shown) = server.get("/v1/sessions/oa-down", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown["status"], "failed");
    let reason = shown["exit"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("500") && reason.contains("the suite's model is down"), "a clear error: {shown}");
    assert_eq!(model.received().len(), 2, "the first attempt and one retry");
    assert!(server.stop().await, "nothing hangs");
}

/// A desk session as a process cut off mid-turn leaves it: running, in `intake`, with
/// the person's message and nothing after it.
fn cut_session(store: &MemoryStore, id: &str) -> archmax_vm::session::memory::MemoryWriter {
    let mut state = archmax_vm::session::SessionState {
        id: archmax_vm::session::id::SessionId::parse(id, &[]).expect("an id"),
        ..Default::default()
    };
    state.head.workflow = "desk".to_string();
    state.head.position = Some("intake".to_string());
    state.head.entry_state = Some("intake".to_string());
    state.head.trigger = Some("manual".to_string());
    state.head.spec_hash = desk_spec_hash();
    state.messages.push(archmax_vm::session::Message::User { text: "Pay invoice 11.".to_string(), opening: None });
    store.create_writer(&state).expect("the session is written")
}

fn desk_spec_hash() -> String {
    let root = super::workspace();
    let program = compile(&root, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .map(|compiled| compiled.program)
        .unwrap_or_else(|_| panic!("the test workspace compiles"));
    program.workflow("desk").map(|(_, desk)| desk.spec_hash.clone()).expect("the desk workflow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_start_a_session_cut_mid_turn_is_continued_and_one_held_elsewhere_is_left_alone() {
    let model = ModelServer::start(desk_script()).await;
    let store = Arc::new(MemoryStore::new());
    let server = build_server(&model, 0, Arc::clone(&store));
    drop(cut_session(&store, "cut-1"));
    // Another process holds this one: its writer stays open.
    let _held = cut_session(&store, "held-1");

    let recovered = archmax_serve::recovery::resume_cut_turns(Arc::clone(&server), 2).await;
    assert_eq!(recovered.resumed, ["cut-1"], "{recovered:?}");
    assert_eq!(recovered.held_elsewhere, ["held-1"], "{recovered:?}");
    assert!(recovered.failed.is_empty(), "{recovered:?}");

    let continued = server.show("cut-1").await.expect("the session reads");
    assert_eq!(continued["status"], "awaiting_decision", "the cut turn went on to the decision: {continued}");
    let held = server.show("held-1").await.expect("the session reads");
    assert_eq!(held["status"], "running", "{held}");
    let states: Vec<&str> = model.received().iter().map(|request| desk_state(&request.body)).collect();
    assert_eq!(states, ["intake", "review"], "only the free session was continued");
}
