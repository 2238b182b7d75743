//! Notifications (`[notify.<name>]`) against a receiver on loopback that checks each
//! request's signature with the code incoming webhooks are checked with
//! ([`Connections::check`]).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use archmax_config::settings::{RunnerSettings, parse_runner_settings};
use archmax_program::source::FileId;
use archmax_serve::notify::Notifiers;
use archmax_serve::webhooks::Connections;
use archmax_serve::{Server, ServerParts};
use archmax_store_postgres::PgStore;
use archmax_store_postgres::test_cluster::TestCluster;
use archmax_vm::clock::{Clock, SystemClock};
use archmax_vm::model::tape::Tape;
use archmax_vm::session::SessionStore;
use archmax_vm::session::memory::MemoryStore;

use super::{DESK, Running, TAPE, WAITER, compiled, listen, workspace_of};

/// The key every notifier of these tests signs with.
const KEY: &str = "the-notification-key-of-the-tests";
const PUBLIC: &str = "https://archmax.example.com";

/// A workflow whose only state has no entry on the tape: its first turn fails.
const BREAKER: &str = r#"title: Breaker
instructions: You break.
states:
  work:
    triggers:
      manual:
        description: Start.
    instructions: Do the work.
"#;

/// What the receiver answers one request with.
#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    /// Holds the request until the test lets it go.
    Hang,
}

/// One request as the receiver got it.
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

struct ReceiverState {
    script: Mutex<VecDeque<Answer>>,
    got: mpsc::UnboundedSender<Received>,
    release: watch::Receiver<bool>,
}

/// A receiver on loopback: its URL, the requests it gets, and the switch that lets a
/// hanging answer go.
struct Receiver {
    url: String,
    got: mpsc::UnboundedReceiver<Received>,
    release: watch::Sender<bool>,
}

async fn receive(State(state): State<Arc<ReceiverState>>, headers: HeaderMap, body: axum::body::Bytes) -> AxumStatus {
    let answer = state.script.lock().expect("script").pop_front().unwrap_or(Answer::Status(200));
    let _ = state.got.send(Received { headers, body: body.to_vec() });
    match answer {
        Answer::Status(status) => AxumStatus::from_u16(status).expect("a status"),
        Answer::Hang => {
            let mut release = state.release.clone();
            let _ = release.wait_for(|released| *released).await;
            AxumStatus::OK
        }
    }
}

async fn receiver(script: &[Answer]) -> Receiver {
    let (got, requests) = mpsc::unbounded_channel();
    let (release, released) = watch::channel(false);
    let state =
        Arc::new(ReceiverState { script: Mutex::new(script.iter().copied().collect()), got, release: released });
    let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver { url, got: requests, release }
}

impl Receiver {
    /// The next request; a test that gets none fails here instead of hanging.
    async fn next(&mut self) -> Received {
        tokio::time::timeout(Duration::from_secs(60), self.got.recv())
            .await
            .expect("a notification within a minute")
            .expect("the receiver runs")
    }
}

/// `[serve]` and the given notifier tables, read as the runner reads them.
fn settings(notify: &str) -> RunnerSettings {
    let (settings, diagnostics) =
        parse_runner_settings(FileId(0), &format!("[serve]\npublic_url = \"{PUBLIC}/\"\n\n{notify}"));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    settings
}

/// The desk, the waiter and the breaker on the tape, on the real clock (the waiting scan
/// compares a decision's time with now), sending `settings`' notifications.
fn notifying_server(store: Arc<dyn SessionStore>, settings: RunnerSettings) -> Arc<Server> {
    archmax_vm::model::openai::install_tls_provider();
    let root = workspace_of(&[
        ("workflows/desk/workflow.yaml", DESK),
        ("workflows/waiter/workflow.yaml", WAITER),
        ("workflows/breaker/workflow.yaml", BREAKER),
    ]);
    let notifiers = Notifiers::configure(&settings, |name| (name == "NOTIFY_KEY").then(|| KEY.to_string()))
        .expect("the notifiers are configured");
    let server = Server::new(ServerParts {
        clock: Arc::new(SystemClock),
        ..super::parts(compiled(&root), store, Arc::new(Tape::parse("api", TAPE).expect("tape")), root)
    })
    .expect("server");
    Arc::new(server.with_settings(settings, Connections::default()).with_notifiers(notifiers))
}

/// Checks `request`'s signature as an incoming webhook of a connection signed with the
/// same key and `X-Archmax-Timestamp` would be checked.
fn assert_signed(request: &Received) {
    let (settings, diagnostics) = parse_runner_settings(
        FileId(0),
        "[connections.archmax]\nsecret_env = \"NOTIFY_KEY\"\nsignature_header = \"X-Archmax-Signature\"\ntimestamp_header = \"X-Archmax-Timestamp\"\n",
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let connections = Connections::configure(&settings, |_| Some(KEY.to_string())).expect("the receiver's key");
    let now = i64::try_from(SystemClock.now_ms() / 1000).expect("seconds");
    let checked = connections.check("archmax", &request.headers, &request.body, now);
    assert!(checked.is_ok(), "the signature holds: {:?}", checked.err().map(|error| error.message));
    let mut tampered = request.body.clone();
    tampered.push(b' ');
    assert!(connections.check("archmax", &request.headers, &tampered, now).is_err(), "and covers the body");
}

async fn start(server: &Running, workflow: &str, session: &str) -> (StatusCode, Value) {
    server
        .post(
            &format!("/v1/workflows/{workflow}/sessions?wait=60"),
            None,
            json!({ "message": "Pay invoice 7.", "sessionId": session }),
        )
        .await
}

/// Waits until `server` recorded `count` outcomes of `notifier` (each is recorded once its
/// delivery ended), and returns them.
async fn outcomes(server: &Server, notifier: &str, count: usize) -> Vec<archmax_serve::notify::DeliveryRecord> {
    for _ in 0..600 {
        let recent = server.notify.recent(notifier);
        if recent.len() >= count {
            return recent;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{notifier} recorded fewer than {count} outcomes: {:?}", server.notify.recent(notifier));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_park_notifies_with_a_signed_body_and_the_session_page_link() {
    let mut hook = receiver(&[]).await;
    let notify = format!("[notify.ops]\nurl = \"{}\"\nsecret_env = \"NOTIFY_KEY\"\nworkflows = [\"desk\"]\n", hook.url);
    let server = notifying_server(Arc::new(MemoryStore::new()), settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    let (status, parked) = start(&running, "desk", "s-park:1").await;
    assert_eq!((status, parked["status"].as_str()), (StatusCode::OK, Some("awaiting_decision")), "{parked}");
    let request = hook.next().await;
    assert_signed(&request);
    assert_eq!(request.headers["x-archmax-event"], "parked");
    let body = request.json();
    assert_eq!(body["event"], "parked");
    assert_eq!(body["notifier"], "ops");
    assert_eq!(body["sessionId"], "s-park:1");
    assert_eq!(body["workflow"], "desk");
    assert_eq!(body["status"], "awaiting_decision");
    assert_eq!(body["state"], "review");
    assert_eq!(body["awaiting"], "decision");
    assert_eq!(body["sessionUrl"], format!("{PUBLIC}/sessions/s-park%3A1"));
    assert!(body["at"].as_str().is_some_and(|at| at.ends_with('Z')), "{body}");
    let recorded = outcomes(&server, "ops", 1).await;
    assert_eq!((recorded[0].outcome.as_str(), recorded[0].attempts, recorded[0].status), ("delivered", 1, Some(200)));
    let metrics = running.client.get(format!("{}/metrics", running.base)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    assert!(metrics.contains("archmax_notifications_total{notifier=\"ops\",outcome=\"delivered\"} 1"), "{metrics}");
    assert!(metrics.contains("archmax_notifications_total{notifier=\"ops\",outcome=\"dropped\"} 0"), "{metrics}");
    let (status, shown) = running.get("/v1/admin/notifications", None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["notifiers"][0]["notifier"], "ops", "{shown}");
    let delivery = &shown["notifiers"][0]["deliveries"][0];
    assert_eq!((delivery["session"].as_str(), delivery["outcome"].as_str()), (Some("s-park:1"), Some("delivered")));
    assert_eq!((delivery["event"].as_str(), delivery["attempts"].as_u64()), (Some("parked"), Some(1)), "{shown}");
    // A message to the parked session is a reply-only turn: it parks nothing new.
    let (status, replied) =
        running.post("/v1/sessions/s-park:1/messages?wait=60", None, json!({ "message": "Any news?" })).await;
    assert_eq!((status, replied["turn"]["disposition"].as_str()), (StatusCode::OK, Some("reply")), "{replied}");
    running.start_desk(None, "s-park-2").await;
    assert_eq!(hook.next().await.json()["sessionId"], "s-park-2", "the next notification is the next park");
    let sessions: Vec<String> = outcomes(&server, "ops", 2).await.into_iter().map(|record| record.session).collect();
    assert_eq!(sessions, ["s-park:1", "s-park-2"]);
    // The waiter is not among the notifier's workflows: its park is not sent.
    let (_, waiting) = start(&running, "waiter", "w-filtered").await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    running.stop().await;
    assert!(hook.got.try_recv().is_err(), "nothing was sent for another workflow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_session_notifies_with_its_reason() {
    let mut hook = receiver(&[]).await;
    let notify = format!("[notify.ops]\nurl = \"{}\"\nsecret_env = \"NOTIFY_KEY\"\non = [\"failed\"]\n", hook.url);
    let server = notifying_server(Arc::new(MemoryStore::new()), settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    let (_, failed) = start(&running, "breaker", "b-1").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let request = hook.next().await;
    assert_signed(&request);
    let body = request.json();
    assert_eq!((body["event"].as_str(), body["sessionId"].as_str()), (Some("failed"), Some("b-1")), "{body}");
    assert_eq!((body["workflow"].as_str(), body["status"].as_str()), (Some("breaker"), Some("failed")), "{body}");
    assert!(body["reason"].as_str().is_some_and(|reason| reason.contains("tape")), "{body}");
    running.stop().await;
}

/// Two runners, each scanning its store (one store shared, or two connections to one
/// database), and a decision that waits past a 1 s threshold: the receiver gets one
/// notification, and neither runner would send another.
async fn a_waiting_decision_is_notified_once_by_two_runners(
    first: Arc<dyn SessionStore>,
    second: Arc<dyn SessionStore>,
) {
    let mut hook = receiver(&[]).await;
    let notify = format!(
        "[notify.ops]\nurl = \"{}\"\nsecret_env = \"NOTIFY_KEY\"\non = [\"waiting\"]\nwaiting_after = \"1s\"\n",
        hook.url
    );
    let server = notifying_server(first, settings(&notify));
    let other = notifying_server(second, settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    let other_running = listen(Arc::clone(&other)).await;
    running.start_desk(None, "s-wait").await;
    let request = hook.next().await;
    assert_signed(&request);
    let body = request.json();
    assert_eq!((body["event"].as_str(), body["sessionId"].as_str()), (Some("waiting"), Some("s-wait")), "{body}");
    assert_eq!(body["state"], "review");
    assert!(body["waitingSince"].as_str().is_some(), "{body}");
    assert_eq!(body["sessionUrl"], format!("{PUBLIC}/sessions/s-wait"));
    // A pass of either runner with nothing remembered finds the park's notification
    // claimed in the store.
    assert_eq!(server.notify_waiting(&mut HashSet::new()).await, 0, "claimed once, in the store");
    assert_eq!(other.notify_waiting(&mut HashSet::new()).await, 0, "the other runner does not send it again");
    running.stop().await;
    other_running.stop().await;
    let sent = server.notify.recent("ops").len() + other.notify.recent("ops").len();
    assert!(sent <= 1, "one delivery in all");
    assert!(hook.got.try_recv().is_err(), "exactly one waiting notification");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_waiting_past_the_threshold_notifies_exactly_once_across_runners() {
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    a_waiting_decision_is_notified_once_by_two_runners(Arc::clone(&store), store).await;
}

#[test]
fn two_runners_on_one_database_notify_a_waiting_decision_once() {
    // The cluster is made and dropped outside the executor (it blocks).
    let cluster = TestCluster::require();
    let target = cluster.database("notify").expect("a database");
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor");
    executor.block_on(async {
        let first = Arc::new(PgStore::connect(&target).await.expect("connect")) as Arc<dyn SessionStore>;
        let second = Arc::new(PgStore::connect(&target).await.expect("connect")) as Arc<dyn SessionStore>;
        a_waiting_decision_is_notified_once_by_two_runners(first, second).await;
    });
    drop(executor);
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slack_preset_sends_text_and_blocks_with_the_link() {
    let mut hook = receiver(&[]).await;
    let notify = format!("[notify.team]\nurl = \"{}\"\npreset = \"slack\"\n", hook.url);
    let server = notifying_server(Arc::new(MemoryStore::new()), settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    running.start_desk(None, "s-slack").await;
    let request = hook.next().await;
    assert!(request.headers.get("x-archmax-signature").is_none(), "no key, no signature");
    let body = request.json();
    let text = body["text"].as_str().expect("Slack's `text`");
    assert!(text.contains("Session s-slack of desk is waiting for a decision at `review`"), "{text}");
    assert!(text.contains(&format!("<{PUBLIC}/sessions/s-slack|Open the session>")), "{text}");
    assert_eq!(body["blocks"][0]["type"], "section", "{body}");
    assert_eq!(body["blocks"][0]["text"]["text"], text);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_500_gets_the_same_delivery_again_until_it_answers_200() {
    let mut hook = receiver(&[Answer::Status(500), Answer::Status(503)]).await;
    let notify = format!("[notify.ops]\nurl = \"{}\"\nsecret_env = \"NOTIFY_KEY\"\nmax_attempts = 3\n", hook.url);
    let server = notifying_server(Arc::new(MemoryStore::new()), settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    running.start_desk(None, "s-retry").await;
    let attempts = [hook.next().await, hook.next().await, hook.next().await];
    for attempt in &attempts {
        assert_signed(attempt);
        assert_eq!(attempt.json()["sessionId"], "s-retry");
    }
    let delivery = &attempts[0].headers["x-archmax-delivery"];
    assert!(attempts.iter().all(|attempt| attempt.headers["x-archmax-delivery"] == delivery), "one delivery");
    let recorded = outcomes(&server, "ops", 1).await;
    assert_eq!((recorded[0].outcome.as_str(), recorded[0].attempts, recorded[0].status), ("delivered", 3, Some(200)));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_gives_up_after_its_attempts() {
    let mut hook = receiver(&[Answer::Status(502), Answer::Status(502)]).await;
    let notify = format!("[notify.ops]\nurl = \"{}\"\nsecret_env = \"NOTIFY_KEY\"\nmax_attempts = 2\n", hook.url);
    let server = notifying_server(Arc::new(MemoryStore::new()), settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    running.start_desk(None, "s-gone").await;
    hook.next().await;
    hook.next().await;
    let recorded = outcomes(&server, "ops", 1).await;
    assert_eq!((recorded[0].outcome.as_str(), recorded[0].attempts, recorded[0].status), ("failed", 2, Some(502)));
    assert!(recorded[0].reason.as_deref().is_some_and(|reason| reason.contains("502")), "{recorded:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_hangs_does_not_delay_a_turn() {
    let mut hook = receiver(&[Answer::Hang, Answer::Hang]).await;
    let notify = format!("[notify.ops]\nurl = \"{}\"\nsecret_env = \"NOTIFY_KEY\"\ntimeout_ms = 60000\n", hook.url);
    let server = notifying_server(Arc::new(MemoryStore::new()), settings(&notify));
    let running = listen(Arc::clone(&server)).await;
    running.start_desk(None, "s-first").await;
    // The receiver holds the first session's notification …
    assert_eq!(hook.next().await.json()["sessionId"], "s-first");
    // … while another session's turn runs to its park and is answered.
    let parked = running.start_desk(None, "s-second").await;
    assert_eq!(parked["turn"]["reply"], "Finance will review your payout.");
    assert!(!*hook.release.borrow(), "the receiver was still holding the request when the turn was answered");
    assert!(server.notify.recent("ops").is_empty(), "no delivery had ended");
    hook.release.send_replace(true);
    outcomes(&server, "ops", 2).await;
    running.stop().await;
}
