//! `/metrics` as an on-call person reads it: sessions run on a tape, the scrape is checked
//! by Prometheus's own `promtool check metrics`, and the labelled series carry the values
//! the sessions produced. The parked gauges come from the store, the oldest decision's age
//! from the server's clock; on one PostgreSQL, a runner counts what another parked.
//!
//! `promtool` comes with Debian's `prometheus` package (`.ci/run` installs it); without it
//! the test fails, never skips. `ARCHMAX_PROMTOOL` names another binary.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use reqwest::StatusCode;
use serde_json::json;

use archmax_compiler::source::FileId;
use archmax_config::settings::parse_runner_settings;
use archmax_serve::auth::Auth;
use archmax_serve::turns::TurnLimits;
use archmax_serve::webhooks::Connections;
use archmax_serve::{Server, ServerParts};
use archmax_store_postgres::PgStore;
use archmax_store_postgres::test_cluster::TestCluster;
use archmax_vm::clock::Clock;
use archmax_vm::model::pricing::{PricingTable, Rates};
use archmax_vm::model::tape::Tape;
use archmax_vm::session::SessionStore;
use archmax_vm::session::memory::MemoryStore;

use super::{DESK, Running, WAITER, api_server, compiled, listen, workspace_of};

/// The desk's intake tries the runtime's note channel (refused: `tool.note`) on a priced
/// model, then hands over; its review speaks on a model with no price whose name holds a
/// quote, a backslash and a line break.
const METRICS_TAPE: &str = r#"
- { state: intake, model: priced-model, usage: { input: 100, output: 10 }, tool_calls: [{ name: archmax_note, args: { text: hidden } }] }
- { state: intake, model: priced-model, usage: { input: 100, output: 10 }, tool_calls: [{ name: archmax_advance, args: { to: review, reason: ready } }] }
- { state: review, model: "odd\"model\\x\ny", usage: { input: 7, output: 3 }, text: Finance will review your payout. }
- { state: wait, model: priced-model, usage: { input: 5, output: 1 }, text: "I will wait.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: the payment has not arrived } }] }
"#;

const SETTINGS: &str = r#"
[providers.acme]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"

[models."priced-model"]
provider = "acme"
"#;

/// Runs `promtool check metrics` over `text`: its verdict and what it said.
fn promtool_check(text: &str) -> (bool, String) {
    let binary = std::env::var("ARCHMAX_PROMTOOL").unwrap_or_else(|_| "promtool".to_string());
    let mut child = Command::new(&binary)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| {
            panic!(
                "`{binary}` could not be started ({error}): install Debian's `prometheus` package \
                 (`apt-get install prometheus`; `.ci/run` does this) or name the binary in ARCHMAX_PROMTOOL"
            )
        });
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("promtool reads the scrape");
    let output = child.wait_with_output().expect("promtool ends");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

/// The value of the sample written exactly as `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrape_passes_promtool_with_labels_by_workflow_state_model_provider_and_rule() {
    archmax_vm::model::openai::install_tls_provider();
    let root = workspace_of(&[("workflows/desk/workflow.yaml", DESK), ("workflows/waiter/workflow.yaml", WAITER)]);
    let (settings, problems) = parse_runner_settings(FileId(0), SETTINGS);
    assert!(problems.is_empty(), "{problems:?}");
    let clock = super::configured::clock();
    let server = Server::new(ServerParts {
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        pricing: PricingTable {
            models: vec![("priced-model".to_string(), Rates::new(1.0, 2.0))],
            ..PricingTable::default()
        },
        ..super::parts(
            compiled(&root),
            Arc::new(MemoryStore::new()),
            Arc::new(Tape::parse("metrics", METRICS_TAPE).expect("tape")),
            root,
        )
    })
    .expect("server")
    .with_settings(settings, Connections::default());
    let running = listen(Arc::new(server)).await;

    let parked = running.start_desk(None, "s-desk").await;
    assert_eq!(parked["park"]["channel"], "decision", "{parked}");
    let (status, waiting) =
        running.post("/v1/workflows/waiter/sessions?wait=60", None, json!({ "message": "Wait for it." })).await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    // The decision has waited a minute and a half when the scrape is taken.
    clock.0.fetch_add(90_000, Ordering::SeqCst);

    let (status, text) = running.get_text("/metrics", None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (valid, said) = promtool_check(&text);
    assert!(valid, "promtool refused the scrape: {said}\n{text}");

    let priced = r#"workflow="desk",state="intake",model="priced-model",provider="acme",role="agent""#;
    let odd = r#"workflow="desk",state="review",model="odd\"model\\x\ny",provider="default",role="agent""#;
    for (series, value) in [
        (r#"archmax_turns_total{workflow="desk",disposition="turn",status="awaiting_decision"}"#.to_string(), 1.0),
        (r#"archmax_steps_total{workflow="desk",state="intake"}"#.to_string(), 1.0),
        (r#"archmax_steps_total{workflow="desk",state="review"}"#.to_string(), 1.0),
        (format!("archmax_model_calls_total{{{priced}}}"), 2.0),
        (format!("archmax_tokens_total{{{priced},kind=\"input\"}}"), 200.0),
        (format!("archmax_tokens_total{{{priced},kind=\"output\"}}"), 20.0),
        (format!("archmax_model_calls_total{{{odd}}}"), 1.0),
        (format!("archmax_model_calls_unpriced_total{{{odd}}}"), 1.0),
        (format!("archmax_tokens_unpriced_total{{{odd},kind=\"input\"}}"), 7.0),
        (r#"archmax_refusals_total{workflow="desk",rule="tool.note"}"#.to_string(), 1.0),
        (r#"archmax_parks_total{workflow="waiter",awaiting="input"}"#.to_string(), 1.0),
        (r#"archmax_parked_sessions{workflow="desk",channel="decision"}"#.to_string(), 1.0),
        (r#"archmax_parked_sessions{workflow="waiter",channel="input"}"#.to_string(), 1.0),
        (r#"archmax_parked_decision_oldest_age_seconds{workflow="desk"}"#.to_string(), 90.0),
        ("archmax_parked_listing_complete".to_string(), 1.0),
        (r#"archmax_turn_duration_seconds_count{workflow="waiter"}"#.to_string(), 1.0),
        ("archmax_turns_queued".to_string(), 0.0),
    ] {
        assert_eq!(sample(&text, &series), Some(value), "{series}\n{text}");
    }
    // Two calls at 100 input and 10 output tokens, at $1 and $2 per million.
    let cost = sample(&text, &format!("archmax_cost_usd_total{{{priced}}}")).expect("a priced cost");
    assert!((cost - 0.00024).abs() < 1e-12, "{cost}\n{text}");
    assert_eq!(sample(&text, &format!("archmax_cost_usd_total{{{odd}}}")), None, "no price, no cost: {text}");
    let commits = sample(&text, r#"archmax_store_commit_duration_seconds_count{outcome="ok"}"#).expect("commits");
    assert!(commits >= 2.0, "{text}");
    assert!(!text.contains("s-desk"), "no session id is a label: {text}");
    running.stop().await;
}

#[test]
fn promtool_refuses_a_label_value_that_breaks_the_format() {
    // The check above means something only if promtool would see an unescaped value.
    let (valid, said) = promtool_check("# TYPE m counter\nm{model=\"a\"b\"} 1\n");
    assert!(!valid, "promtool accepted a broken line: {said}");
}

#[test]
fn every_runner_on_one_postgresql_counts_the_sessions_another_runner_parked() {
    // The cluster is made and dropped outside the executor (it blocks).
    let cluster = TestCluster::require();
    let target = cluster.database("parked_gauges").expect("a database");
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor");
    executor.block_on(async {
        let mut runners = Vec::new();
        for _ in 0..2 {
            let store = Arc::new(PgStore::connect(&target).await.expect("connect")) as Arc<dyn SessionStore>;
            runners.push(listen(Arc::new(api_server(store, Auth::Open, TurnLimits::default(), 64 * 1024))).await);
        }
        let [parking, watching]: [Running; 2] = runners.try_into().unwrap_or_else(|_| panic!("two runners"));
        parking.start_desk(None, "parked-on-the-first").await;
        parking.start_desk(None, "parked-there-too").await;

        let (status, text) = watching.get_text("/metrics", None).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let (valid, said) = promtool_check(&text);
        assert!(valid, "promtool refused the scrape: {said}\n{text}");
        let series = r#"archmax_parked_sessions{workflow="desk",channel="decision"}"#;
        assert_eq!(sample(&text, series), Some(2.0), "the other runner's parks are counted: {text}");
        assert_eq!(sample(&text, r#"archmax_parked_decision_oldest_age_seconds{workflow="desk"}"#), Some(0.0));
        assert_eq!(sample(&text, "archmax_parked_listing_complete"), Some(1.0), "{text}");
        // The turn itself is the first runner's to count.
        assert!(!text.contains("archmax_turns_total{"), "{text}");
        parking.stop().await;
        watching.stop().await;
    });
    drop(executor);
    drop(cluster);
}
