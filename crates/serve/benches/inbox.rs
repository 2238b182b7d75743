//! The decision inbox with 1,000 and 10,000 parked sessions: `cargo bench -p
//! archmax-serve --bench inbox`.
//!
//! For each store size, the goal being under 200 ms of server time for a page:
//!
//! - `page`: one page of the default view (50 sessions) read from the memory store by
//!   its own filter (`read_view`) and rendered (`inbox_body`), no network;
//! - `search`: one page of a search, which the inbox filters in memory over at most
//!   `SCAN_BOUND` sessions read from the store, rendered;
//! - `get`: `GET /` on the real server on loopback, signed in: the page read from the
//!   store, rendered, the headers, and one loopback round trip.
//!
//! Measured on 2026-12-04 (2 shared cores): a page of 10,000 parked sessions in 2.5 ms
//! (most of it the memory store's default `list_page` sorting the 10,000 ids), `GET /`
//! in 2.8 ms, a search page in 4.5 ms, and a search nothing matches (2,000 sessions
//! read, the page's bound) in 13 ms.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};

use archmax_compiler::compile;
use archmax_compiler::lower::BuildInputs;
use archmax_serve::auth::Auth;
use archmax_serve::inbox::listing::{Choices, inbox_body};
use archmax_serve::inbox::views::{InboxFilter, PAGE_SIZE, read_view};
use archmax_serve::turns::TurnLimits;
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::FixedClock;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{DecisionChoice, Head, PendingDecision, SessionState, Status};

/// The store sizes measured.
const SESSIONS: [usize; 2] = [1_000, 10_000];
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
        id: SessionId::from_store(format!("payout-{index:05}")),
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
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    archmax_vm::model::openai::install_tls_provider();
    for count in SESSIONS {
        let store = Arc::new(MemoryStore::new());
        for session in (0..count).map(parked) {
            store.create_writer(&session).expect("a session");
        }
        let choices = Choices { workflows: vec!["payout".to_string()], states: vec!["review".to_string()] };
        let settings = Default::default();
        let render = |filter: &InboxFilter| {
            runtime.block_on(async {
                let page = read_view(&*store, filter, "admin", &settings).await.expect("a page");
                inbox_body(&page, filter, ("admin", NOW_MS), &choices, &settings).into_string().len()
            })
        };
        // The default view: the store's own filter, one page.
        let default = InboxFilter::default();
        assert_eq!(
            runtime.block_on(read_view(&*store, &default, "admin", &settings)).map(|page| page.sessions.len()).ok(),
            Some(PAGE_SIZE)
        );
        criterion.bench_function(&format!("inbox/page of {count} parked"), |bench| bench.iter(|| render(&default)));
        // A search a third of the sessions match (their id holds a 7), filtered in memory.
        let search = InboxFilter::parse(Some("q=7"));
        criterion
            .bench_function(&format!("inbox/search page of {count} parked"), |bench| bench.iter(|| render(&search)));
        // A search nothing matches: the page reads as many sessions as one page may.
        let nothing = InboxFilter::parse(Some("q=no-such-session"));
        criterion.bench_function(&format!("inbox/fruitless search of {count} parked"), |bench| {
            bench.iter(|| render(&nothing))
        });

        let base = runtime.block_on(serve(Arc::clone(&store) as Arc<dyn archmax_vm::session::SessionStore>));
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client");
        let cookie = runtime.block_on(sign_in(&client, &base));
        let get = || async {
            let response = client.get(format!("{base}/")).header("cookie", &cookie).send().await.expect("an answer");
            assert!(response.status().is_success(), "{}", response.status());
            response.bytes().await.expect("the page").len()
        };
        let size = runtime.block_on(get());
        assert!(size > PAGE_SIZE * 100, "the page lists a page of sessions ({size} bytes)");
        criterion
            .bench_function(&format!("inbox/GET / {count} parked"), |bench| bench.iter(|| runtime.block_on(get())));
    }
}

/// A server on `store` on loopback, serving the UI tests' workspace (its payout desk is
/// the workflow the sessions are parked in): its base URL.
async fn serve(store: Arc<dyn archmax_vm::session::SessionStore>) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/workspace");
    let program = compile(&root, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .map(|compiled| compiled.program)
        .unwrap_or_else(|_| panic!("the bench workflow compiles"));
    let server = Server::new(ServerParts {
        programs: vec![program],
        store,
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
