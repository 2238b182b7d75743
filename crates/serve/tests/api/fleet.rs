//! Two runners on one PostgreSQL: the first dies in the middle of a model call, and the
//! second, which was never restarted, continues the cut turn once the dead runner's lease
//! runs out. The time it took is printed (the takeover figure of the fleet issue); the
//! test checks only that it happened, once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use archmax_serve::recovery;
use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{PgOptions, PgStore};
use archmax_vm::session::{Message, SessionStore, Status, TrailKind};

use super::openai::{ModelServer, build_server_on, desk_script, desk_state};

/// A model endpoint that takes every connection and never answers: the dying runner's
/// turn waits there, mid-call, holding its session.
async fn black_hole() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (base_url, task)
}

#[test]
fn a_turn_cut_when_its_runner_dies_is_continued_once_by_a_runner_that_keeps_running() {
    let cluster = TestCluster::require();
    let target = cluster.database("takeover").expect("a database");
    let term = Duration::from_millis(1_000);
    let options = PgOptions { lease_term: term, ..PgOptions::default() };
    // The first runner lives on an executor of its own, so it can die alone.
    let doomed = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");
    let host = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");

    let (hole, hole_task) = host.block_on(black_hole());
    let first_store = PgStore::connect_blocking(doomed.handle(), &target, options.clone()).expect("first runner");
    let first = build_server_on(&hole, 0, Arc::new(first_store));
    let first_address = doomed.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
        let address = listener.local_addr().expect("address");
        tokio::spawn(archmax_serve::serve(listener, first, std::future::pending(), Duration::from_secs(30)));
        address
    });

    host.block_on(async {
        let model = ModelServer::start(desk_script()).await;
        let second_store = Arc::new(PgStore::connect_with(&target, options.clone()).await.expect("second runner"));
        let second = build_server_on(&model.base_url, 0, Arc::clone(&second_store) as Arc<dyn SessionStore>);
        let recovering = tokio::spawn(recovery::recover(Arc::clone(&second)));

        // A turn starts on the first runner and waits in its model call.
        let accepted: Value = reqwest::Client::new()
            .post(format!("http://{first_address}/v1/workflows/desk/sessions?wait=0"))
            .json(&json!({ "message": "Pay invoice 12.", "sessionId": "cut-by-death" }))
            .send()
            .await
            .expect("the first runner answers")
            .json()
            .await
            .expect("json");
        assert_eq!(accepted["sessionId"], "cut-by-death", "{accepted}");
        let started = Instant::now();
        loop {
            let state = second_store.read("cut-by-death").await.expect("read");
            if state.is_some_and(|state| state.head.status == Status::Running && !state.messages.is_empty()) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "the first runner never started the turn");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Held: the second runner's recovery leaves it alone while the first renews.
        tokio::time::sleep(term * 2).await;
        assert!(model.received().is_empty(), "a live runner's turn is not taken");

        // The first runner dies: nothing of it runs any more, its lease is not renewed.
        doomed.shutdown_background();
        let died = Instant::now();
        let state = loop {
            let state = second_store.read("cut-by-death").await.expect("read").expect("the session");
            if state.head.status != Status::Running {
                break state;
            }
            assert!(died.elapsed() < Duration::from_secs(120), "the cut turn was never continued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let taken = died.elapsed();
        eprintln!(
            "takeover: the cut turn was continued and parked {} ms after its runner died \
             (lease term {} ms, recovery every {} ms)",
            taken.as_millis(),
            term.as_millis(),
            recovery::RECOVER_EVERY.as_millis()
        );
        assert_eq!(state.head.status, Status::AwaitingDecision, "the turn went on to the decision");
        // The turn writes its line for the person after it parks: let it end.
        while model.received().len() < 2 || second.gate.admitted() > 0 {
            assert!(died.elapsed() < Duration::from_secs(120), "the continued turn never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let state = second_store.read("cut-by-death").await.expect("read").expect("the session");
        let asked: Vec<&str> = model.received().iter().map(|request| desk_state(&request.body)).collect::<Vec<_>>();
        let asked: Vec<String> = asked.into_iter().map(str::to_string).collect();
        assert_eq!(asked, ["intake", "review"], "continued once, from the step the dead runner committed");
        let people = state.messages.iter().filter(|message| matches!(message, Message::User { .. })).count();
        assert_eq!(people, 1, "the person's message is there once: {:?}", state.messages);
        // The continued turn is the same turn: one trigger opened it, and the trail says so.
        let opened: Vec<&str> =
            state.trail.iter().filter(|step| step.kind == TrailKind::Trigger).map(|step| step.to.as_str()).collect();
        assert_eq!(opened, ["intake"], "{:?}", state.trail);
        recovering.abort();
    });
    hole_task.abort();
}

/// Reads SSE frames (`id:` and `data:` lines) until one whose data names `until`.
async fn frames_until(response: reqwest::Response, until: &str) -> Vec<(u64, Value)> {
    let mut response = response;
    let mut text = String::new();
    let mut frames = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(60), response.chunk())
            .await
            .expect("events arrive")
            .expect("a chunk")
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let frame = text[..end].to_string();
            text.drain(..end + 2);
            let id = frame.lines().find_map(|line| line.strip_prefix("id: ")).map(|id| id.trim().parse::<u64>());
            let data = frame.lines().find_map(|line| line.strip_prefix("data: "));
            let (Some(Ok(id)), Some(data)) = (id, data) else { continue };
            let event: Value = serde_json::from_str(data).expect("an event is JSON");
            let done = event["event"] == until;
            frames.push((id, event));
            if done {
                return frames;
            }
        }
    }
}

#[test]
fn an_event_stream_on_any_runner_shows_every_turn_wherever_it_ran_and_resumes_on_any_runner() {
    let cluster = TestCluster::require();
    let target = cluster.database("events").expect("a database");
    let host = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");
    host.block_on(every_turn_on_every_runner(&target));
}

async fn every_turn_on_every_runner(target: &str) {
    let store = || async { Arc::new(PgStore::connect(target).await.expect("a runner")) as Arc<dyn SessionStore> };
    let limits = archmax_serve::turns::TurnLimits::default();
    let one = super::start_server_on(store().await, archmax_serve::auth::Auth::Open, limits, 64 * 1024).await;
    let two = super::start_server_on(store().await, archmax_serve::auth::Auth::Open, limits, 64 * 1024).await;

    // The first turn runs on runner one; a stream on runner two shows it from the start.
    one.start_desk(None, "fleet-events").await;
    let url = |running: &super::Running| format!("{}/v1/sessions/fleet-events/events", running.base);
    let first = frames_until(two.client.get(url(&two)).send().await.expect("stream on two"), "turn-end").await;
    let ids: Vec<u64> = first.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "numbered from 1 without gaps: {ids:?}");
    assert!(first.iter().any(|(_, event)| event["event"] == "parked"), "{first:?}");

    // A stream opened on runner one now, resuming after the first turn, is woken by the
    // second turn, which runs on runner two.
    let last_of_first = ids.len() as u64;
    let resumed = one
        .client
        .get(url(&one))
        .header("Last-Event-ID", last_of_first.to_string())
        .send()
        .await
        .expect("stream on one");
    let (status, decided) = two.post("/v1/sessions/fleet-events/decide?wait=60", None, json!({ "to": "done" })).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "completed", "{decided}");
    let second = frames_until(resumed, "turn-end").await;
    let ids: Vec<u64> = second.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.first(), Some(&(last_of_first + 1)), "right after the last id seen: {ids:?}");
    assert!(ids.windows(2).all(|pair| pair[1] == pair[0] + 1), "in order, none twice: {ids:?}");
    assert!(second.iter().any(|(_, event)| event["event"] == "decided"), "the second turn's events: {second:?}");

    // Both runners tell one history: the same ids carry the same events.
    let everything = frames_until(one.client.get(url(&one)).send().await.expect("stream on one"), "turn-end").await;
    assert_eq!(everything, first, "runner one shows the first turn as runner two did");
    assert!(one.stop().await && two.stop().await, "open streams end at shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_after_a_delivery_of_an_undeclared_trigger_is_continued() {
    let store = Arc::new(archmax_vm::session::memory::MemoryStore::new());
    let server = Arc::new(super::api_server(
        Arc::clone(&store) as Arc<dyn SessionStore>,
        archmax_serve::auth::Auth::Open,
        archmax_serve::turns::TurnLimits::default(),
        64 * 1024,
    ));
    let program = super::compiled(&super::workspace());
    let spec_hash = program.workflow("waiter").map(|(_, waiter)| waiter.spec_hash.clone()).expect("the waiter");
    // As a runner killed mid-turn leaves it: the delivery of `paid` (which the waiter does
    // not declare; the API sends it with `undeclared`) applied, the turn not ended.
    let mut state = archmax_vm::session::SessionState {
        id: archmax_vm::session::id::SessionId::parse("cut-paid", &[]).expect("an id"),
        ..Default::default()
    };
    state.head.workflow = "waiter".to_string();
    state.head.position = Some("wait".to_string());
    state.head.entry_state = Some("wait".to_string());
    state.head.trigger = Some("paid".to_string());
    state.head.spec_hash = spec_hash;
    state.messages.push(Message::User { text: "Tell me when it is paid.".to_string(), opening: None });
    for trigger in ["manual", "paid"] {
        state.trail.push(archmax_vm::session::TrailStep::new(
            "wait",
            archmax_vm::session::TrailKind::Trigger,
            Some(trigger.to_string()),
            0,
        ));
    }
    drop(store.create_writer(&state).expect("the session is written"));

    let recovered = recovery::resume_cut_turns(Arc::clone(&server), 2).await;
    assert!(recovered.failed.is_empty(), "{recovered:?}");
    assert_eq!(recovered.resumed, ["cut-paid"], "{recovered:?}");
    let shown = server.show("cut-paid").await.expect("the session reads");
    assert_ne!(shown["status"], "running", "{shown}");
}
