//! The real server on loopback, driven over HTTP with `reqwest`: the model is the tape
//! adapter (`archmax serve --tape`), each session reading it from its own start.

mod document;
mod fleet;
mod openai;

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use archmax_compiler::compile;
use archmax_compiler::lower::BuildInputs;
use archmax_serve::auth::{Auth, token_digest_hex};
use archmax_serve::turns::TurnLimits;
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::FixedClock;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::memory::MemoryStore;

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
    approvers: [finance@example.com]
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
- { state: review, text: Finance has it and will decide soon. }
- { state: done, text: Your payout was paid. }
- { state: declined, text: Your payout was declined. }
- { state: wait, text: "I will wait for the payment.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: the payment has not arrived } }] }
- { state: wait, text: "Thank you, the payment arrived." }
"#;

const ADMIN: &str = "admin-secret-of-the-api-tests";
const FINANCE: &str = "finance-secret";
const INTERN: &str = "intern-secret";
const READER: &str = "reader-secret";
const STARTER: &str = "starter-secret";

mod budgets;
mod carried;
mod configured;
mod connections;
mod metrics;
mod notify;
mod replay;
mod uploads;

struct Running {
    base: String,
    client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<bool>>,
}

fn workspace() -> std::path::PathBuf {
    workspace_of(&[("workflows/desk/workflow.yaml", DESK), ("workflows/waiter/workflow.yaml", WAITER)])
}

/// A fresh workspace in a temp dir holding `files` (path, text).
fn workspace_of(files: &[(&str, &str)]) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(format!("archmax-serve-api-{}-{}", std::process::id(), rand_suffix()));
    for (path, text) in files {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("workspace");
        std::fs::write(file, text).expect("workflow");
    }
    root
}

/// The workspace at `root`, compiled.
fn compiled(root: &std::path::Path) -> archmax_compiler::program::Program {
    compile(root, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .map(|compiled| compiled.program)
        .unwrap_or_else(|_| panic!("the test workspace compiles"))
}

/// Serves `server` on a loopback port until the returned server is stopped.
async fn listen(server: Arc<Server>) -> Running {
    listen_with(server, archmax_serve::ConnectionLimits::default()).await
}

/// [`listen`], with the accept loop's limits given.
async fn listen_with(server: Arc<Server>, limits: archmax_serve::ConnectionLimits) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let served = tokio::spawn(archmax_serve::serve_with(listener, server, shutdown, limits));
    Running { base, client: reqwest::Client::new(), stop: Some(stop), served }
}

impl Running {
    /// The `host:port` the server listens on, for raw connections.
    fn address(&self) -> &str {
        self.base.trim_start_matches("http://")
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

fn tokens_file() -> String {
    [
        ("finance@example.com", "[\"decide\", \"read\"]", FINANCE),
        ("intern@example.com", "[\"decide\"]", INTERN),
        ("reader", "[\"read\"]", READER),
        ("starter", "[\"start\"]", STARTER),
    ]
    .iter()
    .map(|(identity, scopes, token)| {
        format!("[[tokens]]\nidentity = \"{identity}\"\nscopes = {scopes}\nsha256 = \"{}\"\n", token_digest_hex(token))
    })
    .collect()
}

async fn start_server(auth: Auth, limits: TurnLimits, body_limit: usize) -> Running {
    start_server_on(Arc::new(MemoryStore::new()), auth, limits, body_limit).await
}

async fn start_server_on(
    store: Arc<dyn archmax_vm::session::SessionStore>,
    auth: Auth,
    limits: TurnLimits,
    body_limit: usize,
) -> Running {
    listen(Arc::new(api_server(store, auth, limits, body_limit))).await
}

/// The parts every test server shares: one program, its store, model and workspace, the
/// fixed clock of the tapes, no token, and the default limits, prices and budgets. A test
/// names only what it changes (`ServerParts { auth, ..parts(…) }`).
fn parts(
    program: archmax_compiler::program::Program,
    store: Arc<dyn archmax_vm::session::SessionStore>,
    model: Arc<dyn archmax_vm::model::ModelAdapter>,
    root: std::path::PathBuf,
) -> ServerParts {
    ServerParts {
        programs: vec![program],
        store,
        model,
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        pricing: PricingTable::default(),
        root,
        auth: Auth::Open,
        limits: TurnLimits::default(),
        body_limit: 64 * 1024,
        tools: Default::default(),
        context: Default::default(),
        budgets: Default::default(),
    }
}

/// The desk and the waiter on the tape, not yet listening.
fn api_server(
    store: Arc<dyn archmax_vm::session::SessionStore>,
    auth: Auth,
    limits: TurnLimits,
    body_limit: usize,
) -> Server {
    archmax_vm::model::openai::install_tls_provider();
    let root = workspace();
    let program = compiled(&root);
    Server::new(ServerParts {
        auth,
        limits,
        body_limit,
        ..parts(program, store, Arc::new(Tape::parse("api", TAPE).expect("tape")), root)
    })
    .expect("server")
}

async fn open_server() -> Running {
    start_server(Auth::Open, TurnLimits::default(), 64 * 1024).await
}

async fn token_server() -> Running {
    let auth = Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens");
    start_server(auth, TurnLimits::default(), 64 * 1024).await
}

impl Running {
    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (StatusCode, Value) {
        let mut request = self.client.post(format!("{}{path}", self.base)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn start_desk(&self, token: Option<&str>, session: &str) -> Value {
        let (status, body) = self
            .post(
                "/v1/workflows/desk/sessions?wait=60",
                token,
                json!({ "message": "Pay invoice 7.", "sessionId": session }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "awaiting_decision", "{body}");
        body
    }

    async fn stop(mut self) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.served.await.expect("the server task").expect("served")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_parks_at_the_decision_then_a_decision_completes_it() {
    let server = open_server().await;
    let (status, accepted) =
        server.post("/v1/workflows/desk/sessions", None, json!({ "message": "Pay invoice 7." })).await;
    assert!(status == StatusCode::ACCEPTED || status == StatusCode::OK, "{status} {accepted}");
    let session = accepted["sessionId"].as_str().expect("an id").to_string();

    let parked = server.start_desk(None, "s-flow").await;
    assert_eq!(parked["park"]["channel"], "decision");
    assert_eq!(parked["park"]["approvers"], json!(["finance@example.com"]));
    assert_eq!(parked["turn"]["reply"], "Finance will review your payout.");

    let (status, decided) =
        server.post("/v1/sessions/s-flow/decide?wait=60", None, json!({ "to": "done", "comment": "ok" })).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "completed");
    assert_eq!(decided["turn"]["reply"], "Your payout was paid.");

    let (status, shown) = server.get("/v1/sessions/s-flow", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown["status"], "completed");
    let (_, transcript) = server.get("/v1/sessions/s-flow/transcript", None).await;
    assert!(transcript["messages"].as_array().is_some_and(|messages| messages.len() > 3), "{transcript}");

    let (_, listed) = server.get("/v1/sessions?workflow=desk&status=completed", None).await;
    let ids: Vec<&str> =
        listed["sessions"].as_array().expect("a page").iter().filter_map(|shown| shown["sessionId"].as_str()).collect();
    assert_eq!(ids, ["s-flow"]);
    let (_, first) = server.get("/v1/sessions?limit=1", None).await;
    let cursor = first["nextCursor"].as_str().expect("a second page").to_string();
    let (_, second) = server.get(&format!("/v1/sessions?limit=1&cursor={cursor}"), None).await;
    let both = [first["sessions"][0]["sessionId"].clone(), second["sessions"][0]["sessionId"].clone()];
    let mut expected = [json!(session), json!("s-flow")];
    expected.sort_by_key(|id| id.as_str().unwrap_or_default().to_string());
    assert_eq!(both, expected, "cursor paging walks the sessions in id order");
    assert!(server.stop().await, "every turn ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_a_parked_session_is_a_reply_only_turn() {
    let server = open_server().await;
    server.start_desk(None, "s-reply").await;
    let (status, replied) =
        server.post("/v1/sessions/s-reply/messages?wait=60", None, json!({ "message": "Any news?" })).await;
    assert_eq!(status, StatusCode::OK, "{replied}");
    assert_eq!(replied["status"], "awaiting_decision", "the session stays parked");
    assert_eq!(replied["turn"]["disposition"], "reply");
    assert_eq!(replied["turn"]["reply"], "Finance has it and will decide soon.");
    assert_eq!(replied["turn"]["unanswered"], Value::Null, "{replied}");
    // The tape holds no third answer for `review`: the message is kept, the session stays
    // parked, and the answer says the person got no reply and why.
    let (status, unanswered) =
        server.post("/v1/sessions/s-reply/messages?wait=60", None, json!({ "message": "Hello?" })).await;
    assert_eq!(status, StatusCode::OK, "{unanswered}");
    assert_eq!(unanswered["status"], "awaiting_decision", "{unanswered}");
    assert_eq!(unanswered["turn"]["reply"], "", "{unanswered}");
    let why = unanswered["turn"]["unanswered"].as_str().unwrap_or_default();
    assert!(why.starts_with("the parked session's message failed: ") && why.contains("tape"), "{unanswered}");
    let (_, transcript) = server.get("/v1/sessions/s-reply/transcript", None).await;
    assert!(transcript.to_string().contains("Hello?"), "the message is kept: {transcript}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_trigger_resumes_a_waiting_session() {
    let server = open_server().await;
    let (status, waiting) = server
        .post(
            "/v1/workflows/waiter/sessions?wait=60",
            None,
            json!({ "message": "Tell me when it is paid.", "sessionId": "w1" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_input");
    let (status, refused) = server.post("/v1/sessions/w1/decide", None, json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::CONFLICT, "a decision for a session not parked at one: {refused}");
    assert_eq!(refused["error"]["code"], "session.not-parked");
    let (status, delivered) = server
        .post("/v1/sessions/w1/deliver?wait=60", None, json!({ "trigger": "piad", "variables": { "amount": 40 } }))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a trigger the workflow does not declare: {delivered}");
    assert_eq!(delivered["error"]["code"], "trigger.unknown");
    let (status, delivered) =
        server.post("/v1/sessions/w1/deliver?wait=60", None, json!({ "trigger": "paid", "undeclared": true })).await;
    assert_eq!(status, StatusCode::OK, "{delivered}");
    assert_eq!(delivered["status"], "completed");
    assert_eq!(delivered["variables"]["trigger"]["value"], "paid");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grant_scopes_and_only_an_approver_may_decide() {
    let server = token_server().await;
    let (status, body) = server.post("/v1/workflows/desk/sessions", None, json!({ "message": "Hi." })).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = server.post("/v1/workflows/desk/sessions", Some("wrong"), json!({ "message": "Hi." })).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = server.post("/v1/workflows/desk/sessions", Some(READER), json!({ "message": "Hi." })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("auth.scope")));

    server.start_desk(Some(ADMIN), "s-auth").await;
    let (status, body) = server.post("/v1/sessions/s-auth/decide", Some(READER), json!({ "to": "done" })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("auth.scope")));
    let (status, body) = server.post("/v1/sessions/s-auth/decide", Some(INTERN), json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "decision.not-an-approver");
    // Every refusal by authentication is counted by its reason (and logged, at most one
    // line per ten seconds); a refused decision is not one.
    let (status, scrape) = server.get_text("/metrics", Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{scrape}");
    for (reason, count) in [("unauthenticated", 2), ("scope", 2), ("local-only", 0)] {
        let line = format!("archmax_api_refused_total{{reason=\"{reason}\"}} {count}\n");
        assert!(scrape.contains(&line), "{line}in\n{scrape}");
    }
    let (status, body) = server.get("/v1/sessions/s-auth", Some(READER)).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("awaiting_decision")), "the park is intact");

    let (status, decided) =
        server.post("/v1/sessions/s-auth/decide?wait=60", Some(FINANCE), json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    let human =
        decided["trail"].as_array().and_then(|trail| trail.iter().find(|step| step["kind"] == "human")).cloned();
    assert_eq!(human.map(|step| step["decidedBy"].clone()), Some(json!("finance@example.com")));
    let (status, _) = server.get("/metrics", Some(READER)).await;
    assert_eq!(status, StatusCode::OK);

    // An undeclared trigger skips the signature: only an admin token may deliver one.
    let undeclared = json!({ "trigger": "anything", "undeclared": true, "variables": { "tenant": "other" } });
    let (status, body) = server.post("/v1/sessions/s-auth/deliver", Some(STARTER), undeclared).await;
    assert_eq!((status, body["error"]["details"]["needs"].as_str()), (StatusCode::FORBIDDEN, Some("admin")), "{body}");
    let (status, body) =
        server.post("/v1/sessions/s-auth/deliver", Some(STARTER), json!({ "trigger": "anything" })).await;
    assert_ne!(status, StatusCode::FORBIDDEN, "a declared-trigger delivery needs only `start`: {body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_damaged_session_is_named_in_the_listing_and_hides_no_other() {
    let dir = std::env::temp_dir().join(format!("archmax-serve-damaged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = archmax_vm::session::fs::FsStore::for_workspace(&dir).expect("the scratch workspace's seal key");
    let server = start_server_on(Arc::new(store), Auth::Open, TurnLimits::default(), 64 * 1024).await;
    server.start_desk(None, "s-good").await;
    // A session folder whose files verify as nothing a crash leaves.
    let damaged = dir.join("sessions/s-bad/checkpoints");
    std::fs::create_dir_all(&damaged).expect("scratch");
    std::fs::write(damaged.join("checkpoint.json"), b"{ not a snapshot").expect("write");
    let (status, listed) = server.get("/v1/sessions", None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let ids: Vec<&str> =
        listed["sessions"].as_array().into_iter().flatten().filter_map(|shown| shown["sessionId"].as_str()).collect();
    assert_eq!(ids, ["s-good"]);
    assert_eq!(listed["unreadable"], json!(["s-bad"]));
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_a_filtered_listing_walk_every_match_once_in_id_order() {
    let server = open_server().await;
    for session in ["p-E", "p-b", "p-a", "p-D", "p-c"] {
        server.start_desk(None, session).await;
    }
    let (status, decided) = server.post("/v1/sessions/p-c/decide?wait=60", None, json!({ "to": "done" })).await;
    assert_eq!((status, decided["status"].as_str()), (StatusCode::OK, Some("completed")), "{decided}");
    let (status, waiting) = server
        .post("/v1/workflows/waiter/sessions?wait=60", None, json!({ "message": "Wait.", "sessionId": "p-0" }))
        .await;
    assert_eq!((status, waiting["status"].as_str()), (StatusCode::OK, Some("awaiting_input")), "{waiting}");

    // The parked desk sessions, two a page: byte order puts upper case first.
    let mut walked = Vec::new();
    let mut path = "/v1/sessions?workflow=desk&parked=true&limit=2".to_string();
    for _ in 0..5 {
        let (status, page) = server.get(&path, None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let ids: Vec<String> = page["sessions"]
            .as_array()
            .expect("a page")
            .iter()
            .filter_map(|shown| shown["sessionId"].as_str().map(str::to_string))
            .collect();
        assert!(ids.len() <= 2, "{page}");
        walked.extend(ids);
        match page["nextCursor"].as_str() {
            Some(cursor) => path = format!("/v1/sessions?workflow=desk&parked=true&limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(walked, ["p-D", "p-E", "p-a", "p-b"]);

    let (_, page) = server.get("/v1/sessions?status=completed&cursor=p-", None).await;
    assert_eq!(page["sessions"][0]["sessionId"], "p-c", "a cursor naming no session: {page}");
    assert_eq!(page["nextCursor"], Value::Null);
    // The waiter's resume time is a day after the server's clock: not due yet.
    let (_, page) = server.get("/v1/sessions?due=true", None).await;
    assert_eq!(page["sessions"], json!([]), "{page}");
    let (_, page) = server.get("/v1/sessions?parked=true&workflow=waiter", None).await;
    assert_eq!(page["sessions"][0]["park"]["channel"], "input", "{page}");
    let (status, refused) = server.get("/v1/sessions?status=parked&limit=0", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let mut fields: Vec<&str> = refused["error"]["details"]["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|field| field["field"].as_str())
        .collect();
    fields.sort();
    assert_eq!(fields, ["limit", "status"], "{refused}");
    // A control character names no workflow and no session; PostgreSQL would refuse a NUL.
    for query in ["workflow=a%00b", "cursor=p%00", "workflow=%0A"] {
        let (status, refused) = server.get(&format!("/v1/sessions?{query}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {refused}");
        let problem = &refused["error"]["details"]["fields"][0]["problem"];
        assert_eq!(problem, "must not contain control characters", "{refused}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_must_be_json_and_an_open_server_refuses_web_pages() {
    let server = open_server().await;
    let url = format!("{}/v1/workflows/desk/sessions", server.base);
    let form = server.client.post(&url).body("message=Hi").send().await.expect("the server answers");
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let page = server
        .client
        .post(&url)
        .header("origin", "https://evil.example")
        .json(&json!({ "message": "Hi." }))
        .send()
        .await
        .expect("the server answers");
    assert_eq!(page.status(), StatusCode::FORBIDDEN, "a cross-site request to a token-less server");
    server.stop().await;
}

/// The status line the server answers a request whose head is `head` and whose
/// declared body is never sent (a hang guard, far past the body deadline, stops a server
/// that waits for it).
async fn status_line_without_the_body(running: &Running, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(running.address()).await.expect("connects");
    stream.write_all(head.as_bytes()).await.expect("head sent");
    let mut answer = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n") && stream.read(&mut byte).await.is_ok_and(|read| read == 1) {
            answer.push(byte[0]);
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read).await.expect("an answer before the body");
    String::from_utf8_lossy(&answer).trim_end().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_request_is_refused_for_its_token_or_its_query_before_its_body_is_read() {
    let server = token_server().await;
    let routes = [
        ("/v1/workflows/desk/sessions", STARTER, READER),
        ("/v1/sessions/s-1/messages", STARTER, READER),
        ("/v1/sessions/s-1/decide", FINANCE, STARTER),
        ("/v1/sessions/s-1/deliver", STARTER, READER),
    ];
    for (path, holder, lacker) in routes {
        let head = |token: &str, query: &str| {
            format!(
                "POST {path}{query} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            )
        };
        let refused = status_line_without_the_body(&server, &head(lacker, "")).await;
        assert_eq!(refused, "HTTP/1.1 403 Forbidden", "{path} without its scope");
        let bad_wait = status_line_without_the_body(&server, &head(holder, "?wait=soon")).await;
        assert_eq!(bad_wait, "HTTP/1.1 400 Bad Request", "{path} with a bad wait");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_concurrent_decisions_one_runs_and_the_other_is_a_conflict() {
    let server = open_server().await;
    server.start_desk(None, "s-race").await;
    let decide = || server.post("/v1/sessions/s-race/decide?wait=60", None, json!({ "to": "done" }));
    let (first, second) = tokio::join!(decide(), decide());
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT], "{first:?} {second:?}");
    let conflict = if first.0 == StatusCode::CONFLICT { &first.1 } else { &second.1 };
    let code = conflict["error"]["code"].as_str().unwrap_or_default();
    assert!(["session.busy", "session.not-parked"].contains(&code), "{conflict}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sessions_run_at_once_each_reading_the_tape_from_its_start() {
    // Two hundred connections from one address: past the default per-peer cap, as a
    // runner behind one proxy (or with one busy backend) is configured.
    let limits = archmax_serve::ConnectionLimits { max_connections_per_peer: 256, ..Default::default() };
    let server = api_server(Arc::new(MemoryStore::new()), Auth::Open, TurnLimits::default(), 64 * 1024);
    let server = listen_with(Arc::new(server), limits).await;
    let starts = (0..200).map(|index| {
        let server = &server;
        async move {
            let body = json!({ "message": "Pay me.", "sessionId": format!("fleet-{index:03}") });
            server.post("/v1/workflows/desk/sessions?wait=120", None, body).await
        }
    });
    let answers = futures_util::future::join_all(starts).await;
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "awaiting_decision", "{body}");
        assert_eq!(body["turn"]["reply"], "Finance will review your payout.");
    }
    let (_, listed) = server.get("/v1/sessions?parked=true&limit=500", None).await;
    assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(200));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_error_shape_with_every_field_named() {
    let server = start_server(Auth::Open, TurnLimits::default(), 256).await;
    let (status, body) = server
        .post("/v1/workflows/desk/sessions", None, json!({ "message": 7, "variables": [], "colour": "red" }))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let mut fields: Vec<&str> = body["error"]["details"]["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .filter_map(|field| field["field"].as_str())
        .collect();
    fields.sort();
    assert_eq!(fields, ["colour", "message", "variables"]);
    let (status, body) = server
        .post(
            "/v1/workflows/desk/sessions",
            None,
            json!({ "message": "Hi.", "variables": { "Bad.Name": 1, "Other Name": 2 } }),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "the runtime's field problems are listed: {body}");
    assert_eq!(body["error"]["details"]["fields"].as_array().map(Vec::len), Some(2));
    let (status, body) = server.post("/v1/workflows/nope/sessions", None, json!({ "message": "Hi." })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("workflow.unknown")));
    let (status, _) = server.get("/v1/sessions/nobody", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = server.post("/v1/workflows/desk/sessions", None, json!({ "message": "x".repeat(1000) })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("request.too-large")));
    let (status, body) = server.get("/v1/nothing-here", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("route.unknown")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_is_answered_in_the_error_shape_naming_the_methods_allowed() {
    let server = open_server().await;
    let refused = server.client.get(format!("{}/v1/sessions/s-1/decide", server.base)).send().await.expect("sent");
    assert_eq!(refused.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(refused.headers().get("allow").and_then(|value| value.to_str().ok()), Some("POST"));
    let body: Value = refused.json().await.unwrap_or(Value::Null);
    assert_eq!(
        body,
        json!({ "error": {
            "code": "route.method-not-allowed",
            "message": "this route does not take GET; it takes POST",
            "details": { "allow": ["POST"] },
        } })
    );
    let refused = server.client.delete(format!("{}/v1/sessions", server.base)).send().await.expect("sent");
    let allow = refused.headers().get("allow").and_then(|value| value.to_str().ok()).unwrap_or("").to_string();
    let body: Value = refused.json().await.unwrap_or(Value::Null);
    assert_eq!(body["error"]["details"]["allow"], json!(allow.split(',').collect::<Vec<_>>()), "{body}");
    // The inbox's pages are not the API: their 405 stays as axum makes it.
    let page = server.client.get(format!("{}/decide", server.base)).send().await.expect("sent");
    assert_eq!(page.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(page.text().await.unwrap_or_default(), "");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_route_is_served() {
    let server = open_server().await;
    server.start_desk(None, "s-doc").await;
    let (status, document) = server.get("/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    let operations: Vec<(&str, &str)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object().into_iter().flatten().map(move |(method, _)| (method.as_str(), path.as_str()))
        })
        .collect();
    assert_eq!(operations.len(), 16, "every route of the API is documented: {operations:?}");
    for (method, template) in operations {
        let path = template.replace("{slug}", "desk").replace("{id}", "s-doc").replace("{trigger}", "payment");
        let url = format!("{}{path}", server.base);
        // The router serves no method on a documented path that the document does not name.
        let other = if method == "get" { server.client.post(&url).json(&json!({})) } else { server.client.get(&url) };
        let refused = other.send().await.expect("sent");
        assert_eq!(refused.status(), StatusCode::METHOD_NOT_ALLOWED, "{template} answers only {method}");
        let allow = refused.headers().get("allow").and_then(|value| value.to_str().ok()).unwrap_or("").to_string();
        assert!(allow.split(',').any(|allowed| allowed.eq_ignore_ascii_case(method)), "{template}: Allow {allow}");
        let body: Value = refused.json().await.unwrap_or(Value::Null);
        assert_eq!(body["error"]["code"], "route.method-not-allowed", "{template}: {body}");
        let request = match method {
            "get" => server.client.get(url),
            _ => server.client.post(url).json(&json!({})),
        };
        let response =
            tokio::time::timeout(Duration::from_secs(30), request.send()).await.expect("answers").expect("sent");
        let status = response.status();
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {template}");
        if status == StatusCode::NOT_FOUND {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_ne!(body["error"]["code"], "route.unknown", "{method} {template} is routed");
        }
    }
    server.stop().await;
}

/// Reads SSE frames until one whose data contains `until`; returns the ids seen.
async fn read_events(response: reqwest::Response, until: &str) -> Vec<u64> {
    let mut response = response;
    let mut text = String::new();
    let mut ids = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("events arrive")
            .expect("a chunk");
        let Some(chunk) = chunk else { return ids };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let frame = text[..end].to_string();
            text.drain(..end + 2);
            if let Some(id) = frame.lines().find_map(|line| line.strip_prefix("id: ")) {
                ids.push(id.trim().parse().expect("a numeric id"));
            }
            if frame.contains(until) {
                return ids;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_resumed_with_last_event_id_loses_nothing() {
    let server = open_server().await;
    server.start_desk(None, "s-events").await;
    let url = format!("{}/v1/sessions/s-events/events", server.base);
    let all = read_events(server.client.get(&url).send().await.expect("stream"), "\"event\":\"parked\"").await;
    assert!(all.len() >= 3, "{all:?}");
    assert!(all.windows(2).all(|pair| pair[1] == pair[0] + 1), "numbered without gaps: {all:?}");
    let resume_after = all[1];
    let resumed =
        server.client.get(&url).header("Last-Event-ID", resume_after.to_string()).send().await.expect("stream");
    let rest = read_events(resumed, "\"event\":\"parked\"").await;
    assert_eq!(rest, all[2..].to_vec(), "the resumed stream starts right after the last id seen");
    assert!(server.stop().await, "open streams end at shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_after_a_restart_with_an_old_id_is_sent_every_event_of_the_new_process() {
    // One store, two processes of the server one after the other: the events of the
    // first stay in it, and the second numbers its own. A client that saw the first's
    // must get all of the second's, not only those numbered above what it saw.
    let store: Arc<dyn archmax_vm::session::SessionStore> = Arc::new(MemoryStore::new());
    let first = start_server_on(Arc::clone(&store), Auth::Open, TurnLimits::default(), 64 * 1024).await;
    first.start_desk(None, "s-restarted").await;
    let path = "/v1/sessions/s-restarted/events";
    let before = read_events(
        first.client.get(format!("{}{path}", first.base)).send().await.expect("stream"),
        "\"event\":\"parked\"",
    )
    .await;
    let seen = *before.last().expect("events");
    assert!(first.stop().await);

    let second = start_server_on(store, Auth::Open, TurnLimits::default(), 64 * 1024).await;
    let (status, decided) =
        second.post("/v1/sessions/s-restarted/decide?wait=60", None, json!({ "to": "done", "comment": "ok" })).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "completed");
    let url = format!("{}{path}", second.base);
    let whole = read_events(second.client.get(&url).send().await.expect("stream"), "\"event\":\"turn-end\"").await;
    let resumed = second.client.get(&url).header("Last-Event-ID", seen.to_string()).send().await.expect("stream");
    let after = read_events(resumed, "\"event\":\"turn-end\"").await;
    assert!(whole.len() >= 3 && whole[0] > seen, "the new process's ids are above the old ones: {seen} then {whole:?}");
    assert_eq!(after, whole, "the old id resumes before every event of the new process");
    assert!(second.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_resumed_past_the_last_event_starts_over() {
    // A client that saw ids no process of the server gave (a later one's, or made up)
    // must not wait, silently, until the numbering passes its id: it is sent what the
    // server has, from the first event kept.
    let server = open_server().await;
    server.start_desk(None, "s-renumbered").await;
    let url = format!("{}/v1/sessions/s-renumbered/events", server.base);
    let all = read_events(server.client.get(&url).send().await.expect("stream"), "\"event\":\"parked\"").await;
    assert!(all.len() >= 3, "{all:?}");
    let beyond = (all[all.len() - 1] + 1000).to_string();
    let resumed = server.client.get(&url).header("Last-Event-ID", beyond.as_str()).send().await.expect("stream");
    assert_eq!(resumed.status(), 200);
    let again = read_events(resumed, "\"event\":\"parked\"").await;
    assert_eq!(again, all, "the stream starts over from the first event kept");

    for garbage in ["-1", "1.5", "ten", "9223372036854775808"] {
        let refused = server.client.get(&url).header("Last-Event-ID", garbage).send().await.expect("answer");
        assert_eq!(refused.status(), 400, "Last-Event-ID {garbage}");
        let body: serde_json::Value = refused.json().await.expect("json");
        assert!(body.to_string().contains("Last-Event-ID"), "{body}");
    }
    let twice = server.client.get(&url).header("Last-Event-ID", "1").header("Last-Event-ID", "2");
    let refused = twice.send().await.expect("answer");
    assert_eq!(refused.status(), 400, "two Last-Event-IDs name no one place to resume");
    assert!(server.stop().await, "open streams end at shutdown");
}
