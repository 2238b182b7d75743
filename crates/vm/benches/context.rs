//! Prompt size over a long session, with and without compaction, and how much of each
//! request repeats the previous one byte for byte (what a provider's prefix cache can
//! reuse). Not a timing benchmark: it prints figures, run with
//! `cargo bench -p archmax-vm --bench context`.
//!
//! The session is a ring: one state, and a model that fetches a 3 KB report (under the
//! offload budget, so every answer stays in the conversation) a thousand times, 2,000
//! messages and more, then answers. A request is measured as the model would read it:
//! the static and volatile system blocks, then the conversation as JSON. Its tokens are
//! the runtime's estimate (a quarter of the characters), which is what it budgets with
//! for this model. Compaction on: a 32,000-token window, `compact_at` 0.8, the last 20
//! messages kept; off: a window too large to ever compact.
//!
//! (a) prompt tokens per call at every hundredth call: without compaction they grow with
//! every report, with it they stay under the budget; (b) the cache-stable share: for each
//! request after the first since the last compaction, the length of the prefix it shares
//! with the previous request over its own length (target: at least 95%).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, load_memory};
use archmax_vm::clock::FixedClock;
use archmax_vm::context::{ContextSettings, estimate};
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, Role, TokenUsage};
use archmax_vm::session::ToolCall;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::tool_host::{Catalog, HostAnswer, HostCall, HostError, HostFuture, HostTool, ToolHost};
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

const CALLS: usize = 1_000;

const SPEC: &str = r#"
title: Report ring
instructions: You tally carrier reports.
states:
  tally:
    triggers: { manual: }
    instructions: Fetch every report with reports__fetch, then say the tally.
    tools:
      allow: [reports__fetch]
"#;

fn program() -> Program {
    let analysis = analyze_workspace(load_memory([("workflows/ring/workflow.yaml", SPEC)]).expect("workspace"));
    lower(&analysis, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT }).expect("lowers")
}

struct Reports(Arc<Catalog>);

impl ToolHost for Reports {
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
        let catalog = Arc::clone(&self.0);
        Box::pin(async move { catalog })
    }

    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
        Box::pin(async move {
            let number = call.args["report"].as_u64().unwrap_or(0);
            let text: String = (1..=40)
                .map(|line| format!("report {number} · line {line:02} · parcel scanned in transit\n"))
                .collect();
            Ok(HostAnswer::text("reports", text))
        })
    }
}

/// One measured agent request.
struct Request {
    tokens: u64,
    /// The share of it identical to the previous request's beginning, and the share of
    /// the previous request it repeats, when no compaction came between the two.
    share: Option<(f64, f64)>,
}

/// The ring's model: fetch, fetch, …, then the tally; a fixed summary when asked for one.
#[derive(Default)]
struct Ring {
    requests: Mutex<Vec<Request>>,
    summaries: Mutex<usize>,
    /// The last agent request's prompt and the compactions before it.
    previous: Mutex<Option<(String, usize)>>,
}

impl ModelAdapter for Ring {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let usage = TokenUsage { input: 100, output: 10, ..TokenUsage::default() };
            if request.role == Role::Summarizer {
                let mut summaries = self.summaries.lock().expect("summaries");
                *summaries += 1;
                let text = format!("Summary {summaries}: the agent fetches carrier reports; all are in transit.");
                return Ok(ModelResponse { text, usage, ..ModelResponse::default() });
            }
            let prompt = format!(
                "{}\n\n{}\n\n{}",
                request.system_static,
                request.system_volatile,
                serde_json::to_string(request.messages).expect("json")
            );
            let compactions = *self.summaries.lock().expect("summaries");
            let mut previous = self.previous.lock().expect("previous");
            let share = match previous.as_ref() {
                Some((before, at)) if *at == compactions => {
                    let common = common_prefix(before, &prompt) as f64;
                    Some((common / prompt.len() as f64, common / before.len() as f64))
                }
                _ => None,
            };
            let tokens = estimate(&prompt);
            *previous = Some((prompt, compactions));
            let mut requests = self.requests.lock().expect("requests");
            let call = requests.len();
            requests.push(Request { tokens, share });
            if call >= CALLS {
                return Ok(ModelResponse { text: "Tallied.".to_string(), usage, ..ModelResponse::default() });
            }
            let tool_calls = vec![ToolCall {
                id: format!("c{call}"),
                name: "reports__fetch".to_string(),
                args: json!({ "report": call }),
            }];
            Ok(ModelResponse { tool_calls, usage, ..ModelResponse::default() })
        })
    }
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn ring(context: ContextSettings) -> (Vec<Request>, usize, f64) {
    let fetch = HostTool {
        name: "reports__fetch".to_string(),
        server: "reports".to_string(),
        description: "Fetch one carrier report by its number.".to_string(),
        input_schema: json!({ "type": "object", "properties": { "report": { "type": "integer" } } }),
        paths: Vec::new(),
    };
    let host = Arc::new(Reports(Arc::new(Catalog { tools: vec![fetch], problems: Vec::new() })));
    let model = Arc::new(Ring::default());
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(program()),
        store: Arc::new(MemoryStore::new()),
        model: model.clone(),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .tool_host(host, Vec::new())
    .context(context)
    .recursion_limit(10 * CALLS)
    .build();
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let request = TurnRequest {
        workflow: "ring".to_string(),
        session: Some("ring".to_string()),
        message: Some("Tally the reports.".to_string()),
        ..TurnRequest::default()
    };
    let started = Instant::now();
    let outcome = executor.block_on(runtime.run_turn(request)).expect("the ring runs");
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(outcome.reply, "Tallied.");
    let requests = std::mem::take(&mut *model.requests.lock().expect("requests"));
    let summaries = *model.summaries.lock().expect("summaries");
    (requests, summaries, elapsed)
}

fn report(label: &str, context: ContextSettings) {
    let (requests, summaries, elapsed) = ring(context);
    println!("## {label}: {} agent calls, {summaries} compactions, {elapsed:.2} s in all", requests.len());
    println!("calls        prompt tokens (estimate): lowest  mean  highest");
    for (block, chunk) in requests.chunks(100).enumerate() {
        let tokens: Vec<u64> = chunk.iter().map(|request| request.tokens).collect();
        let mean = tokens.iter().sum::<u64>() / tokens.len().max(1) as u64;
        let (low, high) = (tokens.iter().min().copied().unwrap_or(0), tokens.iter().max().copied().unwrap_or(0));
        println!("{:>4}–{:<4}  {low:>8} {mean:>8} {high:>8}", block * 100, block * 100 + chunk.len() - 1);
    }
    let largest = requests.iter().map(|request| request.tokens).max().unwrap_or(0);
    println!("largest prompt: {largest} tokens");
    let pairs: Vec<(f64, f64)> = requests.iter().filter_map(|request| request.share).collect();
    let summary = |mut shares: Vec<f64>| {
        shares.sort_by(f64::total_cmp);
        let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
        let p5 = shares.get(shares.len() / 20).copied().unwrap_or(0.0);
        let low = shares.first().copied().unwrap_or(0.0);
        format!("mean {:.2}%, 5th percentile {:.2}%, lowest {:.2}%", mean * 100.0, p5 * 100.0, low * 100.0)
    };
    println!("request pairs between compactions: {}", pairs.len());
    println!(
        "  cache-stable share (of each request, the bytes the previous one began with): {}",
        summary(pairs.iter().map(|pair| pair.0).collect())
    );
    println!(
        "  the previous request repeated as the next one's beginning: {}\n",
        summary(pairs.iter().map(|pair| pair.1).collect())
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run.
    if std::env::args().any(|argument| argument == "--list") {
        return;
    }
    let on = ContextSettings {
        window_tokens: Some(32_000),
        compact_at: 0.8,
        max_tool_result_tokens: 8_000,
        keep_recent: 20,
    };
    let off = ContextSettings { window_tokens: Some(100_000_000), compact_at: 0.95, ..on };
    report("compaction on (window 32,000, compact_at 0.8, keep_recent 20)", on);
    report("compaction off", off);
}
