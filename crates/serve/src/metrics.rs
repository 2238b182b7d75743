//! `GET /metrics`: counters and a latency histogram in the Prometheus text format.
//!
//! Turns are counted by disposition and status when they end; model calls, tool calls
//! (by verdict, blocked ones by rule), parks and tokens come from the runtime's events;
//! in-flight and queued turns are gauges the turn gate keeps.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use archmax_vm::events::Event;
use archmax_vm::session::Usage;

/// Upper bounds of the turn latency histogram, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

#[derive(Default)]
struct Counters {
    /// `(disposition, status)` → turns.
    turns: BTreeMap<(String, String), u64>,
    /// `(verdict, rule)` → tool calls; the rule is empty for allowed calls.
    tool_calls: BTreeMap<(String, String), u64>,
    parks: BTreeMap<String, u64>,
    model_calls: u64,
    tokens: BTreeMap<&'static str, u64>,
    cost_usd: f64,
    latency_buckets: [u64; BUCKETS.len()],
    latency_count: u64,
    latency_sum: f64,
}

/// The `# HELP` and `# TYPE` lines of one metric family.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Everything `/metrics` reports.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    pub in_flight: AtomicU64,
    pub queued: AtomicU64,
    pub rejected_saturated: AtomicU64,
    pub webhooks_refused: AtomicU64,
    pub wakes: AtomicU64,
    pub generations_loaded: AtomicU64,
}

impl Metrics {
    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A webhook whose signature did not hold.
    pub fn webhook_refused(&self) {
        self.webhooks_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts what an event says happened.
    pub fn observe_event(&self, event: &Event) {
        let mut counters = self.counters();
        match event {
            Event::ModelUsage { .. } => counters.model_calls += 1,
            Event::ToolCalled { .. } => {
                *counters.tool_calls.entry(("called".to_string(), String::new())).or_default() += 1;
            }
            Event::ToolBlocked { rule, .. } => {
                *counters.tool_calls.entry(("blocked".to_string(), rule.clone())).or_default() += 1;
            }
            Event::Parked { awaiting, .. } => *counters.parks.entry(awaiting.clone()).or_default() += 1,
            _ => {}
        }
    }

    /// Counts a turn that ended, with what it spent and how long it took.
    pub fn observe_turn(&self, disposition: &str, status: &str, usage: &Usage, took: Duration) {
        let mut counters = self.counters();
        *counters.turns.entry((disposition.to_string(), status.to_string())).or_default() += 1;
        for (kind, tokens) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_creation_tokens),
        ] {
            *counters.tokens.entry(kind).or_default() += tokens;
        }
        counters.cost_usd += usage.cost_usd.unwrap_or(0.0);
        let seconds = took.as_secs_f64();
        for (bucket, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                counters.latency_buckets[bucket] += 1;
            }
        }
        counters.latency_count += 1;
        counters.latency_sum += seconds;
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let counters = self.counters();
        let mut out = String::new();
        family(&mut out, "archmax_turns_total", "counter", "Turns that ended, by disposition and status.");
        for ((disposition, status), count) in &counters.turns {
            let _ = writeln!(out, "archmax_turns_total{{disposition=\"{disposition}\",status=\"{status}\"}} {count}");
        }
        family(&mut out, "archmax_model_calls_total", "counter", "Model calls answered.");
        let _ = writeln!(out, "archmax_model_calls_total {}", counters.model_calls);
        family(&mut out, "archmax_tool_calls_total", "counter", "Tool calls by verdict (and, when blocked, rule).");
        for ((verdict, rule), count) in &counters.tool_calls {
            let _ = writeln!(out, "archmax_tool_calls_total{{verdict=\"{verdict}\",rule=\"{rule}\"}} {count}");
        }
        family(&mut out, "archmax_parks_total", "counter", "Sessions parked, by what they await.");
        for (awaiting, count) in &counters.parks {
            let _ = writeln!(out, "archmax_parks_total{{awaiting=\"{awaiting}\"}} {count}");
        }
        family(&mut out, "archmax_tokens_total", "counter", "Tokens spent by ended turns.");
        for (kind, tokens) in &counters.tokens {
            let _ = writeln!(out, "archmax_tokens_total{{kind=\"{kind}\"}} {tokens}");
        }
        family(&mut out, "archmax_cost_usd_total", "counter", "What ended turns cost, in US dollars.");
        let _ = writeln!(out, "archmax_cost_usd_total {}", counters.cost_usd);
        family(&mut out, "archmax_turns_in_flight", "gauge", "Turns running now.");
        let _ = writeln!(out, "archmax_turns_in_flight {}", self.in_flight.load(Ordering::Relaxed));
        family(&mut out, "archmax_turns_queued", "gauge", "Turns waiting for a slot.");
        let _ = writeln!(out, "archmax_turns_queued {}", self.queued.load(Ordering::Relaxed));
        family(&mut out, "archmax_turns_saturated_total", "counter", "Requests refused because the queue was full.");
        let _ = writeln!(out, "archmax_turns_saturated_total {}", self.rejected_saturated.load(Ordering::Relaxed));
        family(&mut out, "archmax_webhooks_refused_total", "counter", "Webhooks refused for their signature.");
        let _ = writeln!(out, "archmax_webhooks_refused_total {}", self.webhooks_refused.load(Ordering::Relaxed));
        family(&mut out, "archmax_wakes_total", "counter", "Wake triggers the scheduler delivered.");
        let _ = writeln!(out, "archmax_wakes_total {}", self.wakes.load(Ordering::Relaxed));
        family(&mut out, "archmax_program_generations", "gauge", "Programs loaded since start (hot swaps + 1).");
        let _ = writeln!(out, "archmax_program_generations {}", self.generations_loaded.load(Ordering::Relaxed));
        family(&mut out, "archmax_turn_duration_seconds", "histogram", "How long turns took.");
        for (bucket, bound) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "archmax_turn_duration_seconds_bucket{{le=\"{bound}\"}} {}",
                counters.latency_buckets[bucket]
            );
        }
        let _ = writeln!(out, "archmax_turn_duration_seconds_bucket{{le=\"+Inf\"}} {}", counters.latency_count);
        let _ = writeln!(out, "archmax_turn_duration_seconds_sum {}", counters.latency_sum);
        let _ = writeln!(out, "archmax_turn_duration_seconds_count {}", counters.latency_count);
        out
    }
}
