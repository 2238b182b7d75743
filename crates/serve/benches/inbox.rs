//! The decision inbox with 1,000 parked sessions: `cargo bench -p archmax-serve --bench inbox`.
//!
//! Two measures, the goal being under 200 ms of server time for the whole page:
//!
//! - `render`: the inbox's HTML from 1,000 sessions in memory (filter, sort, both
//!   queues), no I/O;
//! - `get`: `GET /` on the real server on loopback, signed in, over the memory store
//!   holding the 1,000 sessions: reading them a page at a time, rendering, the headers,
//!   and one loopback round trip.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};

use archmax_compiler::compile;
use archmax_compiler::lower::BuildInputs;
use archmax_serve::auth::Auth;
use archmax_serve::inbox::pages::{InboxFilter, inbox_body};
use archmax_serve::turns::TurnLimits;
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::FixedClock;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{DecisionChoice, Head, PendingDecision, SessionState, Status};

const SESSIONS: usize = 1000;
const TOKEN: &str = "bench-secret-of-the-inbox-bench";
const NOW_MS: u64 = 1_741_435_200_000;

fn parked(index: usize) -> SessionState {
    let minutes = index as u64 * 7;
    let created = archmax_vm::clock::rfc3339(NOW_MS - minutes * 60_000);
    let decision = PendingDecision {
        state: "review".to_string(),
        title: Some("Approve the payout".to_string()),
        seq: 1,
        instructions: "Approve the payout or turn it down.".to_string(),
        approvers: if index.is_multiple_of(3) { vec!["admin".to_string()] } else { Vec::new() },
        transitions: vec![
            DecisionChoice {
                to: "done".to_string(),
                description: Some("Pay it.".to_string()),
                kind: "approve".to_string(),
            },
            DecisionChoice { to: "declined".to_string(), description: None, kind: "reject".to_string() },
        ],
        evidence: Vec::new(),
        created_at: created,
        child: None,
    };
    SessionState {
        id: SessionId::from_store(format!("payout-{index:04}")),
        seq: 3,
        head: Head {
            workflow: "payout".to_string(),
            position: Some("review".to_string()),
            status: Status::AwaitingDecision,
            pending_decision: Some(decision),
            updated_at: NOW_MS,
            ..Head::default()
        },
        ..SessionState::default()
    }
}

fn inbox(criterion: &mut Criterion) {
    let sessions: Vec<SessionState> = (0..SESSIONS).map(parked).collect();
    let workflows = vec!["payout".to_string()];
    criterion.bench_function("inbox/render 1000 parked", |bench| {
        bench.iter(|| {
            inbox_body(&sessions, &InboxFilter::default(), ("admin", NOW_MS), &workflows, &Default::default())
                .into_string()
                .len()
        })
    });

    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    // The UI tests' workspace: its payout desk is the workflow the sessions are parked in.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/workspace");
    let program = compile(&root, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .map(|compiled| compiled.program)
        .unwrap_or_else(|_| panic!("the bench workflow compiles"));
    let store = MemoryStore::new();
    for session in &sessions {
        store.create_writer(session).expect("a session");
    }
    let base = runtime.block_on(async {
        let server = Server::new(ServerParts {
            programs: vec![program],
            store: Arc::new(store),
            model: Arc::new(archmax_vm::model::tape::Tape::parse("bench", "[]").expect("a tape")),
            clock: Arc::new(FixedClock(NOW_MS)),
            pricing: Default::default(),
            root,
            auth: Auth::configure(Some(TOKEN), None).expect("a token"),
            limits: TurnLimits::default(),
            body_limit: 1024 * 1024,
            tools: Default::default(),
            context: Default::default(),
            budgets: Default::default(),
        })
        .expect("a server");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(archmax_serve::serve(listener, Arc::new(server), std::future::pending(), Default::default()));
        base
    });
    archmax_vm::model::openai::install_tls_provider();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client");
    let cookie = runtime.block_on(sign_in(&client, &base));
    let get = || async {
        let response = client.get(format!("{base}/")).header("cookie", &cookie).send().await.expect("an answer");
        assert!(response.status().is_success(), "{}", response.status());
        response.bytes().await.expect("the page").len()
    };
    let size = runtime.block_on(get());
    assert!(size > SESSIONS * 100, "the page lists every session ({size} bytes)");
    criterion.bench_function("inbox/GET / 1000 parked", |bench| bench.iter(|| runtime.block_on(get())));
}

/// Signs in through the form: the cookie header of the inbox session.
async fn sign_in(client: &reqwest::Client, base: &str) -> String {
    let form = client.get(format!("{base}/sign-in")).send().await.expect("the sign-in page");
    let nonce = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("archmax_sign_in="))
        .and_then(|value| value.split(';').next())
        .expect("the sign-in cookie")
        .to_string();
    let page = form.text().await.expect("the form");
    let marker = r#"name="csrf" value=""#;
    let start = page.find(marker).map(|at| at + marker.len()).expect("a CSRF field");
    let csrf = page[start..].split('"').next().unwrap_or_default();
    let signed = client
        .post(format!("{base}/sign-in"))
        .header("cookie", nonce)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&token={TOKEN}"))
        .send()
        .await
        .expect("signed in");
    signed
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("archmax_inbox="))
        .and_then(|value| value.split(';').next())
        .expect("the session cookie")
        .to_string()
}

criterion_group!(benches, inbox);
criterion_main!(benches);
