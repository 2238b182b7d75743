//! What an embedding program builds from its environment: the model, the clock and the pricing table.
//!
//! The one thing to know: every command (`run` and the session commands, `test`) builds
//! these through this module, so one variable means the same thing everywhere. The
//! environment is passed in as a lookup (`|name| std::env::var(name).ok()` in a binary,
//! a table in a test), never read here behind the caller's back.
//!
//! | Variable | Read by |
//! | --- | --- |
//! | `ARCHMAX_MODEL`, `ARCHMAX_API_BASE_URL`, `ARCHMAX_API_KEY`, `ARCHMAX_TEMPERATURE`, `ARCHMAX_MAX_TOKENS`, `ARCHMAX_REQUEST_TIMEOUT_MS`, `ARCHMAX_MAX_RETRIES` | [`endpoint_from_env`] ([`OpenAiConfig::from_env`]) |
//! | `ARCHMAX_PRICE_INPUT`, `ARCHMAX_PRICE_OUTPUT`, `ARCHMAX_PRICE_CACHE_READ`, `ARCHMAX_PRICE_CACHE_WRITE` | [`ClockAndPricing::from_env`] ([`PricingTable::from_env`]; [`ClockAndPricing::for_settings`] puts `archmax.toml`'s prices over them) and the endpoint |
//! | `ARCHMAX_FIXED_CLOCK` | [`ClockAndPricing::from_env`] ([`clock::from_env`]) |
//! | the `api_key_env` of each `[providers.<name>]` in `archmax.toml` | [`endpoint_for`] |

use std::collections::BTreeMap;
#[cfg(feature = "frontend")]
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use archmax_config::settings::RunnerSettings;
use archmax_config::settings::providers::{DEFAULT_ENDPOINT_VARIABLE, Provider, ProviderKind};

use crate::clock::{self, Clock};
use crate::model::anthropic::{AnthropicAdapter, AnthropicConfig};
use crate::model::limited::Limited;
use crate::model::openai::{ChatFlavor, OpenAiAdapter, OpenAiConfig, RetryObserver};
use crate::model::pricing::PricingTable;
use crate::model::router::{Route, Router};
#[cfg(feature = "frontend")]
use crate::model::tape::{Tape, TapeError};
use crate::model::{ModelAdapter, ModelError};

/// The variable naming the default model; the endpoint reads it, and hosts show it.
pub(crate) const MODEL_VARIABLE: &str = "ARCHMAX_MODEL";

/// The process environment as a lookup.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The default model the environment names, when it names one.
pub fn configured_model(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    get(MODEL_VARIABLE).filter(|model| !model.trim().is_empty())
}

/// Why the configured model endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// A variable is missing or malformed.
    #[error(transparent)]
    Environment(ModelError),
    /// The configuration read, but the client refused it (an unusable URL, a zero timeout).
    #[error(transparent)]
    Client(ModelError),
}

/// The OpenAI-compatible endpoint the environment configures.
pub fn endpoint_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Arc<dyn ModelAdapter>, EndpointError> {
    endpoint_with_retries(get, None)
}

/// [`endpoint_from_env`], telling `on_retry` of every retry (the CLI prints them).
pub fn endpoint_with_retries(
    get: impl Fn(&str) -> Option<String>,
    on_retry: Option<RetryObserver>,
) -> Result<Arc<dyn ModelAdapter>, EndpointError> {
    let config = OpenAiConfig::from_env(get).map_err(EndpointError::Environment)?;
    let adapter = OpenAiAdapter::new(config).map_err(EndpointError::Client)?;
    Ok(Arc::new(match on_retry {
        Some(observer) => adapter.on_retry(observer),
        None => adapter,
    }))
}

/// The model endpoints `archmax.toml` configures (`[providers]`, `[models]`) over the
/// environment's: each routed id goes to its provider, every other id to the endpoint of
/// the `ARCHMAX_API_*` variables when they set one. Without those tables this is
/// [`endpoint_with_retries`]. A provider whose key variable is unset refuses, naming it.
pub fn endpoint_for(
    settings: &RunnerSettings,
    get: impl Fn(&str) -> Option<String>,
    on_retry: Option<RetryObserver>,
) -> Result<Arc<dyn ModelAdapter>, EndpointError> {
    if settings.providers.is_empty() && settings.models.is_empty() {
        return endpoint_with_retries(get, on_retry);
    }
    let default = match get(DEFAULT_ENDPOINT_VARIABLE).filter(|value| !value.trim().is_empty()) {
        Some(_) => Some(endpoint_with_retries(&get, on_retry.clone())?),
        None => None,
    };
    let knobs = OpenAiConfig::knobs_from_env(&get).map_err(EndpointError::Environment)?;
    let mut adapters: BTreeMap<&str, Arc<dyn ModelAdapter>> = BTreeMap::new();
    for provider in settings.providers.values() {
        adapters.insert(&provider.name, provider_adapter(provider, &knobs, &get, on_retry.clone())?);
    }
    let mut routes = BTreeMap::new();
    for route in settings.models.values() {
        // The configuration reader keeps only routes to declared providers.
        if let Some(adapter) = adapters.get(route.provider.as_str()) {
            let target = Route {
                provider: route.provider.clone(),
                adapter: Arc::clone(adapter),
                name: route.provider_model().to_string(),
                fallbacks: route.fallbacks.clone(),
            };
            routes.insert(route.id.clone(), target);
        }
    }
    Ok(Arc::new(Router::new(routes, default, knobs.default_model)))
}

/// One provider's adapter: the shared knobs, the provider's endpoint, key and headers.
fn provider_adapter(
    provider: &Provider,
    knobs: &OpenAiConfig,
    get: &impl Fn(&str) -> Option<String>,
    on_retry: Option<RetryObserver>,
) -> Result<Arc<dyn ModelAdapter>, EndpointError> {
    let api_key = match &provider.api_key_env {
        Some(variable) => get(variable).map(|key| key.trim().to_string()).filter(|key| !key.is_empty()).ok_or_else(
            || {
                EndpointError::Environment(ModelError::Configuration(format!(
                    "provider `{}` of archmax.toml takes its key from {variable}, which is not set: set it in the runner's environment",
                    provider.name
                )))
            },
        )?,
        None => String::new(),
    };
    let request_timeout = provider.timeout_ms.map_or(knobs.request_timeout, Duration::from_millis);
    let headers: Vec<(String, String)> =
        provider.headers.iter().map(|(name, value)| (name.clone(), value.clone())).collect();
    let client_error = |error: ModelError| {
        EndpointError::Client(ModelError::Configuration(format!(
            "provider `{}` of archmax.toml: {error}",
            provider.name
        )))
    };
    let adapter: Arc<dyn ModelAdapter> = match provider.kind {
        ProviderKind::Anthropic => {
            let config = AnthropicConfig {
                base_url: provider.base_url.clone(),
                api_key,
                default_model: None,
                temperature: knobs.temperature,
                max_tokens: knobs.max_tokens,
                request_timeout,
                max_retries: knobs.max_retries,
                prompt_cache: knobs.prompt_cache,
                prompt_cache_ttl: knobs.prompt_cache_ttl,
                streaming: knobs.streaming,
                headers,
            };
            let adapter = AnthropicAdapter::new(config).map_err(client_error)?;
            Arc::new(match on_retry {
                Some(observer) => adapter.on_retry(observer),
                None => adapter,
            })
        }
        ProviderKind::OpenAi | ProviderKind::AzureOpenAi => {
            let flavor = match provider.kind {
                ProviderKind::AzureOpenAi => ChatFlavor::Azure {
                    api_version: provider.api_version.clone().unwrap_or_default(),
                    deployments: provider.deployments.clone(),
                },
                _ => ChatFlavor::OpenAi,
            };
            let config = OpenAiConfig {
                base_url: provider.base_url.clone(),
                api_key,
                default_model: None,
                request_timeout,
                flavor,
                headers,
                ..knobs.clone()
            };
            let adapter = OpenAiAdapter::new(config).map_err(client_error)?;
            Arc::new(match on_retry {
                Some(observer) => adapter.on_retry(observer),
                None => adapter,
            })
        }
    };
    Ok(match provider.max_concurrency {
        Some(permits) => Arc::new(Limited::new(adapter, permits)),
        None => adapter,
    })
}

/// Why a tape file could not be replayed.
#[cfg(feature = "frontend")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TapeFileError {
    #[error("could not read the tape `{path}`: {error}")]
    Unreadable { path: String, error: std::io::Error },
    #[error(transparent)]
    Invalid(#[from] TapeError),
}

/// A tape read from `path`, named `name` in its own error messages.
#[cfg(feature = "frontend")]
pub fn tape_from_file(path: &Path, name: &str) -> Result<Arc<dyn ModelAdapter>, TapeFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| TapeFileError::Unreadable { path: path.display().to_string(), error })?;
    Ok(Arc::new(Tape::parse(name, &text)?))
}

/// The clock and the pricing table a runtime or a case harness runs with.
pub struct ClockAndPricing {
    pub clock: Arc<dyn Clock>,
    pub pricing: PricingTable,
}

/// AMX0020: each model id a workflow names (`uses`) that `pricing` prices neither by the id
/// nor by the provider's name its route gives, where `max_cost_per_session` bounds that
/// workflow's sessions: calls to it add nothing to the cost, so the limit cannot bound them.
pub fn check_budget_prices(
    settings: &RunnerSettings,
    uses: &[archmax_config::settings::providers::ModelUse],
    pricing: &PricingTable,
) -> Vec<archmax_program::diagnostic::Diagnostic> {
    use archmax_program::diagnostic::{Code, Diagnostic};
    let mut seen = std::collections::BTreeSet::new();
    uses.iter()
        .filter_map(|used| {
            let limit = settings.limits.for_workflow(&used.workflow).max_cost_per_session?;
            let route = archmax_config::settings::providers::route_for(&settings.models, &used.id);
            let name = route.and_then(|route| route.name.as_deref());
            let ids: Vec<&str> = std::iter::once(used.id.as_str()).chain(name).collect();
            if pricing.lookup_any(&ids).is_some() || !seen.insert((used.workflow.clone(), used.id.clone())) {
                return None;
            }
            Some(
                Diagnostic::at(
                    Code::UnpricedUnderCostLimit,
                    used.span,
                    format!(
                        "the model `{}` has no price, so `max_cost_per_session` ({limit}) cannot bound the calls of workflow `{}` to it",
                        used.id, used.workflow
                    ),
                )
                .with_help(format!(
                    "price it in archmax.toml (`[models.\"{}\"].price` with `input` and `output` in USD per million tokens), or bound the workflow by `max_tokens_per_turn` and `max_model_calls_per_turn`",
                    used.id
                )),
            )
        })
        .collect()
}

impl ClockAndPricing {
    /// `ARCHMAX_FIXED_CLOCK` (else the system clock), and prices from the `ARCHMAX_PRICE_*`
    /// variables over the list prices of well-known models.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<ClockAndPricing, String> {
        let clock = clock::from_env(&get)?;
        let pricing = PricingTable::from_env(&get).map_err(|error| error.to_string())?.with_list_prices();
        Ok(ClockAndPricing { clock: Arc::from(clock), pricing })
    }

    /// [`ClockAndPricing::from_env`] with `archmax.toml`'s prices
    /// (`[models."<id>"].price`) over the environment's.
    pub fn for_settings(
        settings: &RunnerSettings,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ClockAndPricing, String> {
        let ClockAndPricing { clock, pricing } = ClockAndPricing::from_env(get)?;
        Ok(ClockAndPricing { clock, pricing: pricing.with_configured(&settings.prices) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
    }

    #[test]
    fn a_fixed_clock_and_prices_come_from_the_same_lookup() {
        let from_env = ClockAndPricing::from_env(table(&[
            ("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z"),
            ("ARCHMAX_PRICE_INPUT", "3"),
            ("ARCHMAX_PRICE_OUTPUT", "15"),
        ]))
        .expect("the table is well formed");
        assert_eq!(clock::rfc3339(from_env.clock.now_ms()), "2026-01-05T09:30:00Z");
        assert_eq!(from_env.pricing.lookup("any-model").map(|rates| rates.output), Some(15.0));
    }

    #[test]
    fn a_bad_variable_is_named_in_the_error() {
        let error = ClockAndPricing::from_env(table(&[("ARCHMAX_FIXED_CLOCK", "yesterday")])).err();
        assert!(error.is_some_and(|message| message.contains("ARCHMAX_FIXED_CLOCK")));
        match endpoint_from_env(table(&[("ARCHMAX_MODEL", "gpt-4o")])) {
            Err(EndpointError::Environment(error)) => assert!(error.to_string().contains("ARCHMAX_API_BASE_URL")),
            Err(other) => panic!("expected a missing variable, got {other}"),
            Ok(_) => panic!("an endpoint without a URL was accepted"),
        }
    }

    #[test]
    fn the_configured_model_ignores_blank_values() {
        assert_eq!(configured_model(table(&[("ARCHMAX_MODEL", "  ")])), None);
        assert_eq!(configured_model(table(&[("ARCHMAX_MODEL", "gpt-4o")])).as_deref(), Some("gpt-4o"));
    }

    fn settings(text: &str) -> RunnerSettings {
        let (settings, problems) =
            archmax_config::settings::parse_runner_settings(archmax_program::source::FileId(0), text);
        assert!(problems.is_empty(), "{problems:?}");
        settings
    }

    #[tokio::test]
    async fn a_routed_id_reaches_its_anthropic_provider_under_the_providers_name() {
        use crate::model::anthropic::test_server::{Answer, MessagesServer};
        let server = MessagesServer::start(vec![Answer::text("Hello from Claude.")]).expect("server");
        let text = format!(
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"CLAUDE_KEY\"\n\
             [models.\"claude-sonnet\"]\nprovider = \"claude\"\nname = \"claude-sonnet-4-5\"\n",
            server.base_url
        );
        let lookup = |name: &str| (name == "CLAUDE_KEY").then(|| "sk-ant-1".to_string());
        crate::model::openai::install_tls_provider();
        let model = endpoint_for(&settings(&text), lookup, None).expect("the endpoints build");
        let variables = serde_json::json!({});
        let messages = [crate::session::Message::User { text: "hi".into(), opening: None }];
        let request = crate::model::ModelRequest {
            model: Some("claude-sonnet"),
            role: crate::model::Role::Agent,
            session: "s1",
            workflow: "support",
            state: "triage",
            variables: &variables,
            system_static: "static",
            system_volatile: "",
            messages: &messages,
            history: 1,
            tools: &[],
            prompt_cache: crate::model::PromptCache::default(),
            timeout: None,
            sampling: crate::model::Sampling::default(),
            tape: None,
            on_text: None,
        };
        assert_eq!(model.call(request).await.expect("an answer").text, "Hello from Claude.");
        let received = server.received();
        assert_eq!(received[0].body["model"], "claude-sonnet-4-5");
        assert_eq!(received[0].header("x-api-key"), Some("sk-ant-1"));
        assert!(received[0].problems.is_empty(), "{:?}", received[0].problems);
    }

    #[test]
    fn a_providers_unset_key_refuses_naming_its_variable_and_no_tables_keep_the_old_endpoint() {
        let text = "[providers.claude]\nkind = \"anthropic\"\napi_key_env = \"CLAUDE_KEY\"\n";
        crate::model::openai::install_tls_provider();
        match endpoint_for(&settings(text), table(&[]), None) {
            Err(EndpointError::Environment(error)) => {
                assert!(error.to_string().contains("provider `claude`"), "{error}");
                assert!(error.to_string().contains("CLAUDE_KEY, which is not set"), "{error}");
            }
            Err(other) => panic!("a missing key, got {other}"),
            Ok(_) => panic!("a provider without its key was accepted"),
        }
        // Without the tables the environment's endpoint is all there is, as before.
        match endpoint_for(&RunnerSettings::default(), table(&[]), None) {
            Err(EndpointError::Environment(error)) => assert!(error.to_string().contains("ARCHMAX_API_BASE_URL")),
            _ => panic!("the environment's endpoint is required without tables"),
        }
    }
}
