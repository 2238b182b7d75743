//! What `archmax.toml` configures around the API: webhooks signed per connection, the scheduler
//! that wakes sessions whose `resumeAt` has come, and artifacts loaded while serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::StatusCode;
use serde_json::{Value, json};

use archmax_compiler::artifact::{self, TrustedKeys};
use archmax_compiler::source::FileId;
use archmax_config::settings::parse_runner_settings;
use archmax_serve::auth::Auth;
use archmax_serve::webhooks::{Connections, sign};
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::Clock;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::memory::MemoryStore;

use super::{ADMIN, DESK, Running, STARTER, TAPE, WAITER, compiled, listen, listen_with, workspace_of};

pub(super) const INBOX: &str = r#"title: Inbox
instructions: You answer mail threads.
states:
  answer:
    triggers:
      manual:
        description: Answer one question.
      mail-in:
        description: A mail arrived on a thread.
        session: thread_id
        message: mail.text
        connection: mail
        requires:
          - { name: thread_id, type: string }
      ping:
        description: A bare ping, fired with a token.
    instructions: Answer the mail.
"#;

pub(super) const INBOX_TAPE: &str = r#"
- { state: answer, text: "Thanks, we read your mail." }
- { state: answer, text: "Thanks again, noted." }
- { state: answer, text: "Yes, still here." }
"#;

const SETTINGS: &str = r#"
[connections.mail]
secret_env = "INBOX_MAIL_SECRET"
timestamp_header = "X-Mail-Time"

[schedule.waiter]
wake_trigger = "payment"
"#;

pub(super) const SECRET: &str = "mail-hook-secret";
pub(super) const NOW_MS: u64 = 1_767_605_400_000;

/// A clock a test moves.
pub(super) struct TestClock(pub(super) AtomicU64);

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn server_of(files: &[(&str, &str)], tape: &str, clock: Arc<TestClock>) -> Server {
    server_on(files, tape, clock, Arc::new(MemoryStore::new()))
}

pub(super) fn server_on(
    files: &[(&str, &str)],
    tape: &str,
    clock: Arc<TestClock>,
    store: Arc<dyn archmax_vm::session::SessionStore>,
) -> Server {
    server_with_model(files, Arc::new(Tape::parse("host", tape).expect("tape")), clock, store)
}

/// [`server_on`] answered by `model`.
pub(super) fn server_with_model(
    files: &[(&str, &str)],
    model: Arc<dyn archmax_vm::model::ModelAdapter>,
    clock: Arc<TestClock>,
    store: Arc<dyn archmax_vm::session::SessionStore>,
) -> Server {
    archmax_vm::model::openai::install_tls_provider();
    let root = workspace_of(files);
    let (settings, problems) = parse_runner_settings(FileId(0), SETTINGS);
    assert!(problems.is_empty(), "{problems:?}");
    let connections = Connections::configure(&settings, |name| (name == "INBOX_MAIL_SECRET").then(|| SECRET.into()))
        .expect("the secret is set");
    Server::new(ServerParts {
        clock,
        auth: Auth::configure(Some(ADMIN), Some(&super::tokens_file())).expect("tokens"),
        ..super::parts(compiled(&root), store, model, root)
    })
    .expect("server")
    .with_settings(settings, connections)
}

pub(super) fn clock() -> Arc<TestClock> {
    Arc::new(TestClock(AtomicU64::new(NOW_MS)))
}

impl Running {
    pub(super) async fn get_text(&self, path: &str, token: Option<&str>) -> (StatusCode, String) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the server answers");
        (response.status(), response.text().await.unwrap_or_default())
    }

    /// Fires `trigger` with `body`, signed (when `secret` is given) at `time`.
    pub(super) async fn fire(
        &self,
        trigger: &str,
        body: &Value,
        secret: Option<&str>,
        time: u64,
    ) -> (StatusCode, Value) {
        let bytes = serde_json::to_vec(body).expect("json");
        let stamp = time.to_string();
        let mut request = self
            .client
            .post(format!("{}/v1/triggers/{trigger}?wait=60", self.base))
            .header("content-type", "application/json")
            .header("x-mail-time", &stamp);
        if let Some(secret) = secret {
            request = request.header("x-archmax-signature", sign(secret.as_bytes(), Some(&stamp), &bytes));
        }
        let response = request.body(bytes).send().await.expect("the server answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_starts_then_joins_its_thread_and_a_bad_signature_runs_nothing() {
    let server = Arc::new(server_of(&[("workflows/inbox/workflow.yaml", INBOX)], INBOX_TAPE, clock()));
    let running = listen(Arc::clone(&server)).await;
    let now = NOW_MS / 1000;
    let mail = json!({ "thread_id": "thread-7", "mail": { "text": "Where is my parcel?" } });

    // A bad signature, a stale time, no signature: refused before anything runs.
    let (status, refused) = running.fire("mail-in", &mail, Some("not the secret"), now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    assert_eq!(refused["error"]["code"], "webhook.bad-signature");
    let (status, stale) = running.fire("mail-in", &mail, Some(SECRET), now - 301).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{stale}");
    assert!(stale["error"]["message"].as_str().is_some_and(|text| text.contains("301 s away")), "{stale}");
    let (status, _) = running.fire("mail-in", &mail, None, now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, listed) = running.get("/v1/sessions", Some(ADMIN)).await;
    assert_eq!(listed["sessions"], json!([]), "a refused webhook runs nothing");
    let (_, metrics) = running.get_text("/metrics", Some(ADMIN)).await;
    assert!(metrics.contains("archmax_webhooks_refused_total 3"), "{metrics}");
    // Which triggers exist is not told to a caller who has not authenticated.
    let (status, _) = running.post("/v1/triggers/nobody", None, json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Signed: the `session:` path names the session, `message:` the words.
    let (status, first) = running.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["sessionId"], "thread-7");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["turn"]["disposition"], "turn");
    assert!(first.get("variables").is_none(), "a sender learns the session and its status, not what it holds: {first}");
    let (_, shown) = running.get("/v1/sessions/thread-7", Some(ADMIN)).await;
    assert_eq!(shown["variables"]["thread_id"]["value"], "thread-7");
    // The same signed request again is a replay.
    let (status, replayed) = running.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{replayed}");
    let again = json!({ "thread_id": "thread-7", "mail": { "text": "Any news?" } });
    let (status, second) = running.fire("mail-in", &again, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["sessionId"], "thread-7", "the same thread joins its session");
    let (_, transcript) = running.get("/v1/sessions/thread-7/transcript", Some(ADMIN)).await;
    let said: Vec<&str> = transcript["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["text"].as_str())
        .collect();
    assert_eq!(said, ["Where is my parcel?", "Any news?"], "{transcript}");

    // A newer program of the inbox: the thread's session keeps running on its own.
    let (_, before) = running.get("/v1/sessions/thread-7", Some(ADMIN)).await;
    let newer = INBOX.replace("Answer the mail.", "Answer the mail politely.");
    assert_eq!(server.load_program(compiled(&workspace_of(&[("workflows/inbox/workflow.yaml", &newer)]))).len(), 1);
    let third = json!({ "thread_id": "thread-7", "mail": { "text": "Still there?" } });
    let (status, joined) = running.fire("mail-in", &third, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::OK, "a firing joins the session on its own program: {joined}");
    let (_, after) = running.get("/v1/sessions/thread-7", Some(ADMIN)).await;
    assert_eq!(after["specHash"], before["specHash"]);

    // The signature holds but the signature of the trigger does not: every field named.
    let (status, invalid) = running.fire("mail-in", &json!({ "thread_id": 7 }), Some(SECRET), now).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{invalid}");
    assert_eq!(invalid["error"]["details"]["fields"][0]["field"], "thread_id", "{invalid}");
    let (status, _) = running.fire("mail-in", &json!(["not", "an", "object"]), Some(SECRET), now).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // A trigger without a connection takes a token with `start`; `manual` and unknown ids are refused.
    let (status, _) = running.fire("ping", &json!({}), None, now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, pinged) = running.post("/v1/triggers/ping?wait=60", Some(STARTER), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{pinged}");
    assert_eq!(pinged["status"], "completed");
    let (status, manual) = running.post("/v1/triggers/manual", Some(ADMIN), json!({})).await;
    assert_eq!((status, manual["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("trigger.manual")));
    let (status, unknown) = running.post("/v1/triggers/nobody", Some(ADMIN), json!({})).await;
    assert_eq!((status, unknown["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("trigger.unknown")));
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_without_an_id_joins_the_session_its_triggers_path_names() {
    let running = listen(Arc::new(server_of(&[("workflows/inbox/workflow.yaml", INBOX)], INBOX_TAPE, clock()))).await;
    let body = json!({ "message": "Hello", "trigger": "mail-in", "variables": { "thread_id": "thread-9" } });
    let (status, started) = running.post("/v1/workflows/inbox/sessions?wait=60", Some(ADMIN), body).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["sessionId"], "thread-9");
    // A path that does not resolve starts a session of its own.
    let (status, own) = running
        .post("/v1/workflows/inbox/sessions?wait=60", Some(ADMIN), json!({ "message": "Hi", "trigger": "ping" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_ne!(own["sessionId"], "thread-9");
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_wakes_a_due_session_once_and_leaves_unscheduled_ones_listed() {
    let time = clock();
    let waiter = ("workflows/waiter/workflow.yaml", WAITER);
    let inbox_like = ("workflows/sleeper/workflow.yaml", WAITER.replace("Waiter", "Sleeper"));
    let store: Arc<dyn archmax_vm::session::SessionStore> = Arc::new(MemoryStore::new());
    let files = [waiter, (inbox_like.0, &inbox_like.1)];
    let server = Arc::new(server_on(&files, TAPE, Arc::clone(&time), Arc::clone(&store)));
    let running = listen(Arc::clone(&server)).await;
    for (workflow, id) in [("waiter", "w1"), ("sleeper", "z1"), ("waiter", "w2")] {
        let (status, parked) = running
            .post(
                &format!("/v1/workflows/{workflow}/sessions?wait=60"),
                Some(ADMIN),
                json!({ "message": "Wait for it.", "sessionId": id }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{parked}");
        assert_eq!(parked["status"], "awaiting_input", "{parked}");
    }
    // Not due yet: nothing happens.
    let wakes = server.wake_due().await;
    assert!(wakes.woken.is_empty() && wakes.unscheduled.is_empty(), "{wakes:?}");

    time.0.fetch_add(25 * 3600 * 1000, Ordering::SeqCst);
    let (_, due) = running.get("/v1/sessions?due=true", Some(ADMIN)).await;
    assert_eq!(due["sessions"].as_array().map(Vec::len), Some(3), "{due}");
    // A session delivered to by hand before its wake is no longer due: it is skipped.
    let (status, delivered) = running
        .post("/v1/sessions/w2/deliver?wait=60", Some(ADMIN), json!({ "trigger": "payment", "undeclared": true }))
        .await;
    assert_eq!(status, StatusCode::OK, "{delivered}");
    let wakes = server.wake_due().await;
    assert_eq!(wakes.woken, ["w1"]);
    assert_eq!(wakes.unscheduled, ["z1"], "a workflow without a schedule is only listed");
    let woken = wait_for_status(&running, "w1", "completed").await;
    assert_eq!(
        woken["trail"].as_array().and_then(|trail| trail.last()).map(|step| &step["kind"]),
        Some(&json!("trigger"))
    );
    let again = server.wake_due().await;
    assert!(again.woken.is_empty(), "a woken session is not woken twice: {again:?}");
    let (_, metrics) = running.get_text("/metrics", Some(ADMIN)).await;
    assert!(metrics.contains("archmax_wakes_total 1"), "{metrics}");
    assert!(running.stop().await);

    // A new process learns of sessions parked before it started from its first rescan.
    let restarted = Arc::new(server_on(&files, TAPE, Arc::clone(&time), store));
    let wakes = restarted.wake_due().await;
    assert_eq!((wakes.woken.len(), wakes.unscheduled.as_slice()), (0, ["z1".to_string()].as_slice()), "{wakes:?}");
}

async fn wait_for_status(running: &Running, id: &str, status: &str) -> Value {
    for _ in 0..600 {
        let (_, shown) = running.get(&format!("/v1/sessions/{id}"), Some(ADMIN)).await;
        if shown["status"] == status {
            return shown;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("session {id} never reached {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_artifact_serves_new_sessions_while_a_parked_one_finishes_on_its_old_program() {
    let desk = ("workflows/desk/workflow.yaml", DESK);
    let server = server_of(&[desk], TAPE, clock());
    let server = Arc::new(server.with_loader(Arc::new(|bytes: &[u8]| {
        artifact::load(bytes, &TrustedKeys::default()).map(|loaded| loaded.program).map_err(|error| error.to_string())
    })));
    let running = listen(Arc::clone(&server)).await;
    let old = running.start_desk(Some(ADMIN), "old-1").await;
    let old_hash = old["specHash"].as_str().expect("a hash").to_string();

    // Version 2 of the desk: the finishing state says something else.
    let v2 = compiled(&workspace_of(&[(desk.0, &DESK.replace("Say it was paid.", "Say it was paid, with the date."))]));
    let bytes = artifact::encode(&v2);
    let refused =
        running.client.post(format!("{}/v1/admin/artifacts", running.base)).bearer_auth(STARTER).body(bytes.clone());
    assert_eq!(refused.send().await.expect("answers").status(), StatusCode::FORBIDDEN, "admin only");
    let garbage = running.client.post(format!("{}/v1/admin/artifacts", running.base)).bearer_auth(ADMIN).body("junk");
    let garbage = garbage.send().await.expect("answers");
    assert_eq!(garbage.status(), StatusCode::BAD_REQUEST);
    let loaded = running.client.post(format!("{}/v1/admin/artifacts", running.base)).bearer_auth(ADMIN).body(bytes);
    let loaded: Value = loaded.send().await.expect("answers").json().await.expect("json");
    assert_eq!(loaded["loaded"][0]["workflow"], "desk", "{loaded}");
    assert_eq!(loaded["loaded"][0]["previous"], old_hash.as_str(), "{loaded}");
    let new_hash = loaded["loaded"][0]["specHash"].as_str().expect("a hash").to_string();
    assert_ne!(new_hash, old_hash);

    let new = running.start_desk(Some(ADMIN), "new-1").await;
    assert_eq!(new["specHash"], new_hash.as_str(), "new sessions start on the newest program");
    let (status, decided) =
        running.post("/v1/sessions/old-1/decide?wait=60", Some(super::FINANCE), json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "completed");
    assert_eq!(decided["specHash"], old_hash.as_str(), "the parked session finished on its own program");
    // Loading the same programs again changes nothing (a SIGHUP re-reading both
    // artifacts, older first); loading the old one alone rolls new sessions back to it.
    let v1 = compiled(&workspace_of(&[desk]));
    assert!(server.load_programs(vec![v1.clone(), v2.clone()]).is_empty());
    let (_, metrics) = running.get_text("/metrics", Some(ADMIN)).await;
    assert!(metrics.contains("archmax_program_generations 2"), "{metrics}");
    let rolled = server.load_program(v1);
    assert_eq!(rolled.len(), 1);
    assert_eq!(rolled[0].spec_hash, old_hash);
    assert_eq!(running.start_desk(Some(ADMIN), "back-1").await["specHash"], old_hash.as_str());
    let (_, metrics) = running.get_text("/metrics", Some(ADMIN)).await;
    assert!(metrics.contains("archmax_program_generations 2"), "a rollback reuses its generation: {metrics}");
    assert!(running.stop().await);

    // Without the old program, a server on the same store refuses the pinned session,
    // naming both hashes, and changes nothing.
    let store: Arc<dyn archmax_vm::session::SessionStore> = Arc::new(MemoryStore::new());
    let first = listen(Arc::new(server_on(&[desk], TAPE, clock(), Arc::clone(&store)))).await;
    first.start_desk(Some(ADMIN), "pinned-1").await;
    assert!(first.stop().await);
    let changed = DESK.replace("Say it was paid.", "Say so.");
    let second = listen(Arc::new(server_on(&[(desk.0, &changed)], TAPE, clock(), store))).await;
    let (status, refused) =
        second.post("/v1/sessions/pinned-1/decide?wait=60", Some(super::FINANCE), json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|text| text.contains(&old_hash)), "{refused}");
    let (_, still) = second.get("/v1/sessions/pinned-1", Some(ADMIN)).await;
    assert_eq!(still["status"], "awaiting_decision");
    assert!(second.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_a_workflow_stops_starts_while_its_parked_session_is_decided_on_the_same_program() {
    let desk = ("workflows/desk/workflow.yaml", DESK);
    let server = Arc::new(server_of(&[desk], TAPE, clock()));
    let running = listen(Arc::clone(&server)).await;
    let parked = running.start_desk(Some(ADMIN), "parked-1").await;
    let hash = parked["specHash"].as_str().expect("a hash").to_string();

    // The same desk, taken out of service: the spec hash stays, yet the load is a change.
    let disabled = compiled(&workspace_of(&[(desk.0, &format!("disabled: true\n{DESK}"))]));
    let loaded = server.load_program(disabled);
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert_eq!((loaded[0].spec_hash.as_str(), loaded[0].previous.as_deref()), (hash.as_str(), Some(hash.as_str())));
    assert!(loaded[0].disabled);

    let (status, refused) = running
        .post(
            "/v1/workflows/desk/sessions?wait=60",
            Some(ADMIN),
            json!({ "message": "Pay invoice 8.", "sessionId": "new-1" }),
        )
        .await;
    assert_ne!(status, StatusCode::OK, "a disabled workflow starts nothing: {refused}");
    assert!(refused.to_string().contains("is disabled"), "{refused}");
    let url = format!("{}/v1/sessions/parked-1/events", running.base);
    let stream = running.client.get(&url).bearer_auth(ADMIN).send().await.expect("the stream opens");
    let mut frames = super::connections::EventFrames::new(stream);
    frames.until("\"event\":\"parked\"").await;
    let (status, decided) = running
        .post("/v1/sessions/parked-1/decide?wait=60", Some(super::FINANCE), json!({ "to": "done", "comment": "Paid." }))
        .await;
    assert_eq!(status, StatusCode::OK, "a parked session is still decided: {decided}");
    assert_eq!((decided["status"].as_str(), decided["specHash"].as_str()), (Some("completed"), Some(hash.as_str())));
    // The stream's `decided` event names who decided, and what they wrote.
    let frame = frames.until("\"event\":\"decided\"").await;
    assert!(frame.contains("\"decidedBy\":\"finance@example.com\",\"comment\":\"Paid.\""), "{frame}");
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_cut_off_by_the_header_and_body_timeouts() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut server = server_of(&[("workflows/desk/workflow.yaml", DESK)], TAPE, clock());
    server.body_timeout = std::time::Duration::from_millis(200);
    let limits = archmax_serve::ConnectionLimits {
        grace: std::time::Duration::from_secs(5),
        first_request_timeout: std::time::Duration::from_millis(200),
        idle_timeout: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let running = listen_with(Arc::new(server), limits).await;
    let address = running.address();
    // Both waits are bounded generously: the point is that the server ends them at all.
    let bound = std::time::Duration::from_secs(60);

    // Headers that never finish: the connection is closed.
    let mut stalled = tokio::net::TcpStream::connect(address).await.expect("connects");
    stalled.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.expect("sent");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(bound, stalled.read_to_end(&mut answer)).await.expect("the server closes it");
    assert!(read.is_err() || !String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"), "never served");

    // A body that never arrives: 408.
    let mut slow = tokio::net::TcpStream::connect(address).await.expect("connects");
    let head = format!(
        "POST /v1/workflows/desk/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    slow.write_all(head.as_bytes()).await.expect("sent");
    let mut answer = [0u8; 512];
    let read = tokio::time::timeout(bound, slow.read(&mut answer)).await.expect("an answer").expect("read");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request.timeout"), "{answer}");

    // A body cut short (the client stops sending before its Content-Length) or sent in
    // malformed chunks: 400 saying so, not 413.
    let heads = [
        format!(
            "POST /v1/workflows/desk/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"message\":1"
        ),
        format!(
            "POST /v1/workflows/desk/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
        ),
    ];
    for head in heads {
        let mut broken = tokio::net::TcpStream::connect(address).await.expect("connects");
        broken.write_all(head.as_bytes()).await.expect("sent");
        broken.shutdown().await.expect("the sending side closes");
        let mut answer = Vec::new();
        tokio::time::timeout(bound, broken.read_to_end(&mut answer)).await.expect("an answer").expect("read");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{head}: {answer}");
        assert!(answer.contains("request.body-broken"), "{head}: {answer}");
    }
    assert!(running.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_a_client_waits_until_a_connection_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = server_of(&[("workflows/desk/workflow.yaml", DESK)], TAPE, clock());
    let limits = archmax_serve::ConnectionLimits { max_connections: 1, ..Default::default() };
    let running = listen_with(Arc::new(server), limits).await;
    let address = running.address();
    let healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    // The one slot is taken by a client that says nothing.
    let idle = tokio::net::TcpStream::connect(address).await.expect("connects");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut waiting = tokio::net::TcpStream::connect(address).await.expect("the backlog takes it");
    waiting.write_all(healthz).await.expect("sent");
    let mut answer = Vec::new();
    let early = tokio::time::timeout(std::time::Duration::from_millis(300), waiting.read_to_end(&mut answer)).await;
    assert!(early.is_err(), "served past the cap: {}", String::from_utf8_lossy(&answer));
    // The idle client leaves: the waiting one is served.
    drop(idle);
    let read = tokio::time::timeout(std::time::Duration::from_secs(60), waiting.read_to_end(&mut answer)).await;
    assert!(read.is_ok_and(|read| read.is_ok()), "answered once a slot is free");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    assert!(running.stop().await);
}
