//! `GET /metrics`: what an on-call person watches, in the Prometheus text format.
//!
//! Counters come from the runtime's events and from turns as they end: turns by workflow,
//! disposition and status; steps (states entered) by workflow and state; model calls,
//! tokens and cost by workflow, state, model and provider; kernel refusals by rule; parks
//! by what they await. Gauges: turns in flight and queued (the turn gate keeps them), and
//! the parked sessions by workflow and channel with the age of the oldest pending
//! decision, which the store counts at scrape time ([`parked`]). Histograms:
//! turn latency by workflow, and store commit latency ([`timed_store`]).
//!
//! The one thing to know: **cost is never made up**. A model call whose model has no
//! price adds nothing to `archmax_cost_usd_total` and is counted instead in
//! `archmax_model_calls_unpriced_total` and `archmax_tokens_unpriced_total`, so "free"
//! and "unknown" stay apart. Labels stay bounded: no session id is ever a label; the
//! workflow is the one the turn runs (a sub-workflow's steps count under its caller's
//! workflow, with their own state slugs); a model name past the first [`MAX_MODELS`] is
//! counted as `other`; every value is escaped ([`exposition::escape`]).

pub mod exposition;
pub mod parked;
pub mod timed_store;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use archmax_config::settings::RunnerSettings;
use archmax_vm::events::Event;
use archmax_vm::session::SessionStore;
use archmax_vm::session::store::ParkedSummary;

use crate::hub::root_session;
use exposition::{COMMIT_BUCKETS, Exposition, Histogram, TURN_BUCKETS};

/// The most distinct model names labelled; later ones are counted as `other`.
pub const MAX_MODELS: usize = 64;
/// The provider label of a model no `[models]` table routes: the `ARCHMAX_API_*` endpoint.
pub const DEFAULT_PROVIDER: &str = "default";
/// The label of a value that is not known (a model call that named no model, an event
/// outside any turn this runner admitted).
pub const UNKNOWN: &str = "unknown";

/// Where a model call was spent: `(workflow, state, model, provider, role)`.
type CallKey = (String, String, String, String, &'static str);

/// The `role` label of a usage event: one of the runtime's roles, else `unknown`.
fn role_label(role: Option<&str>) -> &'static str {
    match role {
        Some("agent") => "agent",
        Some("grader") => "grader",
        Some("summarizer") => "summarizer",
        Some("judge") => "judge",
        _ => UNKNOWN,
    }
}

/// The token kinds, in the order the usage event carries them.
const TOKEN_KINDS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];

#[derive(Default)]
struct Counters {
    /// `(workflow, disposition, status)` → turns.
    turns: BTreeMap<(String, String, String), u64>,
    /// `(workflow, state)` → states entered.
    steps: BTreeMap<(String, String), u64>,
    model_calls: BTreeMap<CallKey, u64>,
    /// `(workflow, model, provider)` → calls passed on to a route's next model.
    fallbacks: BTreeMap<(String, String, String), u64>,
    unpriced_calls: BTreeMap<CallKey, u64>,
    /// `(call, kind)` → tokens.
    tokens: BTreeMap<(CallKey, &'static str), u64>,
    unpriced_tokens: BTreeMap<(CallKey, &'static str), u64>,
    cost_usd: BTreeMap<CallKey, f64>,
    /// `(verdict, rule)` → tool calls; the rule is empty for allowed calls.
    tool_calls: BTreeMap<(String, String), u64>,
    /// `(workflow, rule)` → kernel refusals.
    refusals: BTreeMap<(String, String), u64>,
    /// `(workflow, awaiting)` → parks.
    parks: BTreeMap<(String, String), u64>,
    models_seen: BTreeSet<String>,
    /// `(notifier, outcome)` → notifications; only on a runner with notifiers.
    notifications: BTreeMap<(String, &'static str), u64>,
    turn_latency: BTreeMap<String, Histogram>,
    commit_latency: BTreeMap<&'static str, Histogram>,
}

impl Counters {
    /// `model` as a label: itself while fewer than [`MAX_MODELS`] were seen, else `other`.
    fn model_label(&mut self, model: Option<&str>) -> String {
        let model = model.map(str::trim).filter(|model| !model.is_empty()).unwrap_or(UNKNOWN);
        if self.models_seen.contains(model) {
            return model.to_string();
        }
        if self.models_seen.len() < MAX_MODELS {
            self.models_seen.insert(model.to_string());
            return model.to_string();
        }
        "other".to_string()
    }
}

/// Everything `/metrics` reports.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    /// Root session → the workflow of the turn it runs, while the turn is admitted.
    running: Mutex<HashMap<String, String>>,
    /// Model id (and provider-side name) → the `[providers]` table serving it.
    providers: Mutex<BTreeMap<String, String>>,
    parked: parked::ParkedGauges,
    pub in_flight: AtomicU64,
    pub queued: AtomicU64,
    pub rejected_saturated: AtomicU64,
    pub webhooks_refused: AtomicU64,
    /// API requests refused by authentication, by [`crate::auth::Refusal`].
    api_refused: [AtomicU64; 3],
    pub wakes: AtomicU64,
    pub generations_loaded: AtomicU64,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Metrics {
    fn counters(&self) -> MutexGuard<'_, Counters> {
        locked(&self.counters)
    }

    /// Learns which provider serves each model from `archmax.toml`'s `[models]` tables.
    pub fn route_models(&self, settings: &RunnerSettings) {
        let mut providers = locked(&self.providers);
        providers.clear();
        for route in settings.models.values() {
            if route.is_pattern() {
                // `claude-*` labels the ids it routes by the part before its first `*`
                // (a longest-prefix match below); a pattern opening with `*` labels none.
                let prefix = route.id.split('*').next().unwrap_or_default();
                if !prefix.is_empty() {
                    providers.insert(prefix.to_string(), route.provider.clone());
                }
                continue;
            }
            providers.insert(route.provider_model().to_string(), route.provider.clone());
            providers.insert(route.id.clone(), route.provider.clone());
        }
    }

    /// The provider serving `model`: its route, or the route whose name it extends (a
    /// provider reports `gpt-4o-2024-08-06` for a call sent as `gpt-4o`), else the default.
    fn provider_of(&self, model: &str) -> String {
        let providers = locked(&self.providers);
        providers
            .get(model)
            .or_else(|| {
                providers
                    .iter()
                    .filter(|(name, _)| model.starts_with(name.as_str()))
                    .max_by_key(|(name, _)| name.len())
                    .map(|(_, provider)| provider)
            })
            .cloned()
            .unwrap_or_else(|| DEFAULT_PROVIDER.to_string())
    }

    /// A turn of `workflow` was admitted on the root session `root`: its events count
    /// under that workflow until [`Metrics::turn_released`].
    pub fn turn_admitted(&self, root: &str, workflow: &str) {
        locked(&self.running).insert(root.to_string(), workflow.to_string());
    }

    pub fn turn_released(&self, root: &str) {
        locked(&self.running).remove(root);
    }

    /// The workflow of the turn `session`'s root runs on this runner, while it is admitted.
    pub fn workflow_of_turn(&self, session: &str) -> Option<String> {
        locked(&self.running).get(root_session(session)).cloned()
    }

    /// A notifier is configured: its counters start at zero, so `/metrics` shows them.
    pub fn notifier_configured(&self, notifier: &str) {
        let mut counters = self.counters();
        for outcome in crate::notify::DeliveryOutcome::ALL {
            counters.notifications.entry((notifier.to_string(), outcome.as_str())).or_default();
        }
    }

    /// A notification of `notifier` ended `outcome` (`delivered`, `failed`, `dropped`).
    pub fn notification(&self, notifier: &str, outcome: &'static str) {
        *self.counters().notifications.entry((notifier.to_string(), outcome)).or_default() += 1;
    }

    fn workflow_of(&self, session: Option<&str>) -> String {
        session
            .and_then(|session| locked(&self.running).get(root_session(session)).cloned())
            .unwrap_or_else(|| UNKNOWN.to_string())
    }

    /// A webhook whose signature did not hold.
    pub fn webhook_refused(&self) {
        self.webhooks_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// An API request refused by authentication.
    pub fn api_refused(&self, refusal: crate::auth::Refusal) {
        self.api_refused[refusal as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts what an event of `session` says happened.
    pub fn observe_event(&self, session: Option<&str>, event: &Event) {
        match event {
            Event::StateEnter { state } => {
                let workflow = self.workflow_of(session);
                *self.counters().steps.entry((workflow, state.clone())).or_default() += 1;
            }
            Event::ModelUsage {
                state,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_creation_tokens,
                model,
                cost_usd,
                role,
                ..
            } => {
                let workflow = self.workflow_of(session);
                let provider = model.as_deref().map_or_else(|| UNKNOWN.to_string(), |model| self.provider_of(model));
                let mut counters = self.counters();
                let model = counters.model_label(model.as_deref());
                let key = (workflow, state.clone(), model, provider, role_label(role.as_deref()));
                let amounts = [*input_tokens, *output_tokens, *cache_read_tokens, *cache_creation_tokens];
                *counters.model_calls.entry(key.clone()).or_default() += 1;
                for (kind, tokens) in TOKEN_KINDS.into_iter().zip(amounts) {
                    *counters.tokens.entry((key.clone(), kind)).or_default() += tokens;
                }
                match cost_usd {
                    Some(cost) => *counters.cost_usd.entry(key).or_default() += cost,
                    None => {
                        *counters.unpriced_calls.entry(key.clone()).or_default() += 1;
                        for (kind, tokens) in TOKEN_KINDS.into_iter().zip(amounts) {
                            *counters.unpriced_tokens.entry((key.clone(), kind)).or_default() += tokens;
                        }
                    }
                }
            }
            Event::ModelFallback { model, provider, .. } => {
                let workflow = self.workflow_of(session);
                let mut counters = self.counters();
                let model = counters.model_label(Some(model));
                // A provider table's name (or `default`, `none`): archmax.toml's, never a caller's.
                *counters.fallbacks.entry((workflow, model, provider.clone())).or_default() += 1;
            }
            Event::ToolCalled { .. } => {
                *self.counters().tool_calls.entry(("called".to_string(), String::new())).or_default() += 1;
            }
            Event::ToolBlocked { rule, .. } => {
                let workflow = self.workflow_of(session);
                let mut counters = self.counters();
                *counters.tool_calls.entry(("blocked".to_string(), rule.clone())).or_default() += 1;
                *counters.refusals.entry((workflow, rule.clone())).or_default() += 1;
            }
            Event::Parked { awaiting, .. } => {
                let workflow = self.workflow_of(session);
                *self.counters().parks.entry((workflow, awaiting.clone())).or_default() += 1;
            }
            _ => {}
        }
    }

    /// Counts a turn of `workflow` that ended, and how long it took.
    pub fn observe_turn(&self, workflow: &str, disposition: &str, status: &str, took: Duration) {
        let mut counters = self.counters();
        *counters.turns.entry((workflow.to_string(), disposition.to_string(), status.to_string())).or_default() += 1;
        counters
            .turn_latency
            .entry(workflow.to_string())
            .or_insert_with(|| Histogram::new(TURN_BUCKETS))
            .observe(took.as_secs_f64());
    }

    /// Times one store commit.
    pub fn observe_commit(&self, committed: bool, took: Duration) {
        let outcome = if committed { "ok" } else { "error" };
        self.counters()
            .commit_latency
            .entry(outcome)
            .or_insert_with(|| Histogram::new(COMMIT_BUCKETS))
            .observe(took.as_secs_f64());
    }

    /// The Prometheus text exposition; the parked gauges are read from `store` (see
    /// [`parked`]) as of `now_ms`.
    pub async fn render(&self, store: &dyn SessionStore, now_ms: u64) -> String {
        let tally = self.parked.current(store).await;
        let mut out = Exposition::default();
        self.render_counters(&mut out);
        render_parked(&mut out, &tally, now_ms);
        self.render_gauges(&mut out);
        out.finish()
    }

    fn render_counters(&self, out: &mut Exposition) {
        let counters = self.counters();
        out.counters(
            "archmax_turns_total",
            "counter",
            "Turns that ended, by workflow, disposition and status.",
            counters.turns.iter().map(|((workflow, disposition, status), count)| {
                (vec![("workflow", workflow.as_str()), ("disposition", disposition), ("status", status)], *count)
            }),
        );
        out.counters(
            "archmax_steps_total",
            "counter",
            "States entered, by workflow and state.",
            counters
                .steps
                .iter()
                .map(|((workflow, state), count)| (vec![("workflow", workflow.as_str()), ("state", state)], *count)),
        );
        out.counters(
            "archmax_model_calls_total",
            "counter",
            "Model calls answered, by workflow, state, model, provider and role (agent, grader, summarizer).",
            counters.model_calls.iter().map(|(key, count)| (call_labels(key), *count)),
        );
        out.counters(
            "archmax_model_calls_unpriced_total",
            "counter",
            "Model calls whose model has no price: their cost is unknown and not in archmax_cost_usd_total.",
            counters.unpriced_calls.iter().map(|(key, count)| (call_labels(key), *count)),
        );
        out.counters(
            "archmax_tokens_total",
            "counter",
            "Tokens of model calls, by workflow, state, model, provider, role and kind.",
            counters.tokens.iter().map(|((key, kind), tokens)| (with_kind(key, kind), *tokens)),
        );
        out.counters(
            "archmax_tokens_unpriced_total",
            "counter",
            "Tokens of model calls whose model has no price, by workflow, state, model, provider, role and kind.",
            counters.unpriced_tokens.iter().map(|((key, kind), tokens)| (with_kind(key, kind), *tokens)),
        );
        out.counters(
            "archmax_model_fallbacks_total",
            "counter",
            "Model calls passed on to a route's next model, by workflow, the model that failed and its provider.",
            counters.fallbacks.iter().map(|((workflow, model, provider), count)| {
                (vec![("workflow", workflow.as_str()), ("model", model), ("provider", provider)], *count)
            }),
        );
        out.counters(
            "archmax_cost_usd_total",
            "counter",
            "What priced model calls cost, in US dollars (unpriced calls are counted apart).",
            counters.cost_usd.iter().map(|(key, cost)| (call_labels(key), *cost)),
        );
        out.counters(
            "archmax_tool_calls_total",
            "counter",
            "Tool calls by verdict (and, when blocked, rule).",
            counters
                .tool_calls
                .iter()
                .map(|((verdict, rule), count)| (vec![("verdict", verdict.as_str()), ("rule", rule)], *count)),
        );
        out.counters(
            "archmax_refusals_total",
            "counter",
            "Tool calls the kernel refused, by workflow and rule.",
            counters
                .refusals
                .iter()
                .map(|((workflow, rule), count)| (vec![("workflow", workflow.as_str()), ("rule", rule)], *count)),
        );
        out.counters(
            "archmax_parks_total",
            "counter",
            "Sessions parked, by workflow and what they await.",
            counters.parks.iter().map(|((workflow, awaiting), count)| {
                (vec![("workflow", workflow.as_str()), ("awaiting", awaiting)], *count)
            }),
        );
        if !counters.notifications.is_empty() {
            out.counters(
                "archmax_notifications_total",
                "counter",
                "Notifications ([notify.<name>]) by notifier and outcome: delivered, failed (after its attempts), dropped (the queue was full).",
                counters
                    .notifications
                    .iter()
                    .map(|((notifier, outcome), count)| (vec![("notifier", notifier.as_str()), ("outcome", *outcome)], *count)),
            );
        }
        out.family("archmax_turn_duration_seconds", "histogram", "How long turns took, by workflow.");
        for (workflow, histogram) in &counters.turn_latency {
            out.histogram("archmax_turn_duration_seconds", &[("workflow", workflow)], histogram);
        }
        out.family(
            "archmax_store_commit_duration_seconds",
            "histogram",
            "How long session store commits took, by outcome.",
        );
        for (outcome, histogram) in &counters.commit_latency {
            out.histogram("archmax_store_commit_duration_seconds", &[("outcome", outcome)], histogram);
        }
    }

    fn render_gauges(&self, out: &mut Exposition) {
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        for (name, kind, help, value) in [
            ("archmax_turns_in_flight", "gauge", "Turns running now.", load(&self.in_flight)),
            ("archmax_turns_queued", "gauge", "Turns waiting for a slot.", load(&self.queued)),
            (
                "archmax_turns_saturated_total",
                "counter",
                "Requests refused because the queue was full.",
                load(&self.rejected_saturated),
            ),
            (
                "archmax_webhooks_refused_total",
                "counter",
                "Webhooks refused for their signature.",
                load(&self.webhooks_refused),
            ),
            ("archmax_wakes_total", "counter", "Wake triggers the scheduler delivered.", load(&self.wakes)),
            (
                "archmax_program_generations",
                "gauge",
                "Programs loaded since start (hot swaps + 1).",
                load(&self.generations_loaded),
            ),
        ] {
            out.family(name, kind, help);
            out.sample(name, &[], value);
        }
        out.counters(
            "archmax_api_refused_total",
            "counter",
            "API requests refused by authentication, by reason (unauthenticated: no token or an unknown one; scope: the token lacks the route's scope; local-only: an open server's refusal of a web page or a non-loopback Host).",
            crate::auth::Refusal::ALL
                .into_iter()
                .map(|refusal| (vec![("reason", refusal.label())], load(&self.api_refused[refusal as usize]))),
        );
    }
}

fn call_labels(key: &CallKey) -> Vec<(&str, &str)> {
    let (workflow, state, model, provider, role) = key;
    vec![("workflow", workflow), ("state", state), ("model", model), ("provider", provider), ("role", role)]
}

fn with_kind<'a>(key: &'a CallKey, kind: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut labels = call_labels(key);
    labels.push(("kind", kind));
    labels
}

fn render_parked(out: &mut Exposition, tally: &ParkedSummary, now_ms: u64) {
    out.counters(
        "archmax_parked_sessions",
        "gauge",
        "Root sessions parked now, by workflow and channel (decision or input), read from the store.",
        tally.sessions.iter().map(|((workflow, status), count)| {
            (vec![("workflow", workflow.as_str()), ("channel", parked::channel(*status))], *count)
        }),
    );
    let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
    out.counters(
        "archmax_parked_decision_oldest_age_seconds",
        "gauge",
        "How long the oldest pending decision of each workflow has waited, read from the store.",
        tally.oldest_decision_ms.iter().map(|(workflow, asked)| {
            (vec![("workflow", workflow.as_str())], now.saturating_sub(*asked).max(0) as f64 / 1000.0)
        }),
    );
    out.family(
        "archmax_parked_listing_complete",
        "gauge",
        "1 when the parked gauges counted every parked session; 0 when the listing failed or was cut at its bound.",
    );
    out.sample("archmax_parked_listing_complete", &[], u8::from(tally.complete));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(model: &str) -> Event {
        Event::ModelUsage {
            state: "s".to_string(),
            input_tokens: 1,
            output_tokens: 1,
            cache_read_tokens: 0,
            cache_creation_tokens: 0,
            model: Some(model.to_string()),
            cost_usd: None,
            fallback_for: None,
            role: Some("agent".to_string()),
        }
    }

    #[test]
    fn model_names_past_the_bound_are_counted_as_other_and_session_ids_never_label() {
        let metrics = Metrics::default();
        metrics.turn_admitted("root-1", "desk");
        *locked(&metrics.providers) = BTreeMap::from([("gpt-4o".to_string(), "acme".to_string())]);
        metrics.observe_event(Some("root-1"), &usage("gpt-4o-2024-08-06"));
        for index in 0..MAX_MODELS + 2 {
            metrics.observe_event(Some("root-1~2"), &usage(&format!("model-{index}")));
        }
        metrics.turn_released("root-1");
        metrics.observe_event(Some("root-1"), &usage("model-0"));
        let mut out = Exposition::default();
        metrics.render_counters(&mut out);
        let text = out.finish();
        let other =
            r#"archmax_model_calls_total{workflow="desk",state="s",model="other",provider="default",role="agent"} 3"#;
        assert!(text.contains(other), "{text}");
        let outside = r#"archmax_model_calls_total{workflow="unknown",state="s",model="model-0",provider="default",role="agent"} 1"#;
        assert!(text.contains(outside), "an event after the turn was released has no workflow: {text}");
        assert!(!text.contains("root-1"), "{text}");
        let dated = r#"model="gpt-4o-2024-08-06",provider="acme",role="agent"} 1"#;
        assert!(text.contains(dated), "a provider's dated name is its route's: {text}");
    }

    #[test]
    fn an_id_a_pattern_routes_is_labelled_with_the_patterns_provider() {
        let text = "[providers.claude]\nkind = \"anthropic\"\napi_key_env = \"K\"\n\n[models.\"claude-*\"]\nprovider = \"claude\"\n\n[models.\"*\"]\nprovider = \"claude\"\n";
        let (settings, problems) =
            archmax_config::settings::parse_runner_settings(archmax_compiler::source::FileId(0), text);
        assert!(problems.is_empty(), "{problems:?}");
        let metrics = Metrics::default();
        metrics.route_models(&settings);
        assert_eq!(metrics.provider_of("claude-sonnet-4-5"), "claude");
        assert_eq!(metrics.provider_of("gpt-4.1"), DEFAULT_PROVIDER, "a pattern opening with `*` labels nothing");
    }

    #[test]
    fn fallbacks_and_each_roles_calls_are_counted_apart() {
        let metrics = Metrics::default();
        metrics.turn_admitted("root-1", "desk");
        let fallback = Event::ModelFallback {
            state: "s".to_string(),
            model: "gpt-4.1".to_string(),
            provider: "azure".to_string(),
            reason: "the model endpoint answered 429: slow down".to_string(),
            fallback: "claude-sonnet".to_string(),
        };
        metrics.observe_event(Some("root-1"), &fallback);
        metrics.observe_event(Some("root-1"), &fallback);
        let summary = Event::ModelUsage {
            state: "s".to_string(),
            input_tokens: 5,
            output_tokens: 1,
            cache_read_tokens: 0,
            cache_creation_tokens: 0,
            model: Some("gpt-4.1".to_string()),
            cost_usd: None,
            fallback_for: None,
            role: Some("summarizer".to_string()),
        };
        metrics.observe_event(Some("root-1"), &usage("gpt-4.1"));
        metrics.observe_event(Some("root-1"), &summary);
        let mut out = Exposition::default();
        metrics.render_counters(&mut out);
        let text = out.finish();
        let passed_on = r#"archmax_model_fallbacks_total{workflow="desk",model="gpt-4.1",provider="azure"} 2"#;
        assert!(text.contains(passed_on), "{text}");
        for role in ["agent", "summarizer"] {
            let calls = format!(
                r#"archmax_model_calls_total{{workflow="desk",state="s",model="gpt-4.1",provider="default",role="{role}"}} 1"#
            );
            assert!(text.contains(&calls), "{calls} in {text}");
        }
    }
}
