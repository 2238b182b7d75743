//! The OpenAI-compatible chat-completions adapter.
//!
//! [`OpenAiAdapter`] turns a [`ModelRequest`] into one `POST {base}/chat/completions` and
//! the first choice of the answer into a [`ModelResponse`]. By default it asks for a stream
//! (`stream: true`, with the usage in the last chunk) and hands the text on as it arrives
//! ([`super::stream`] puts the answer together); `ARCHMAX_STREAMING=0`, or an endpoint that
//! answers with plain JSON anyway, gives the answer whole. It talks to
//! anything that speaks that protocol: OpenAI, vLLM, Ollama, LiteLLM, OpenRouter, or an
//! Anthropic model behind such a proxy (which is why a `claude` model gets a
//! `cache_control` marker on the static system block when prompt caching is on).
//!
//! The one thing to know: the transcript holds runtime notes that no provider knows about.
//! Each note is sent as a synthetic call to the `archmax_note` function followed by its
//! result, and that function is then declared among the tools, because providers reject
//! calls to functions they were not given. The model is told never to call it.
//!
//! Failures are values: 429, 5xx, connection failures and timed-out attempts are retried
//! with exponential backoff (honouring a numeric `Retry-After`); every other failure is
//! returned at once as a [`ModelError`]. Nothing read from the network can panic.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use archmax_program::text::{cut_at_chars, first_chars};

use super::pricing::PricingTable;
use super::{
    CachePlan, ModelAdapter, ModelError, ModelFuture, ModelRequest, ModelResponse, PromptCache, TokenUsage,
    ToolDefinition,
};
use crate::session::{Message, ToolCall, ToolStatus};

mod answer;

use super::http::{self, Endpoint, Wire};
#[cfg(test)]
use super::http::{BACKOFF_BASE, backoff_delay, jitter, parse_retry_after};
pub(super) use answer::{
    CONTENT_FILTER, content_filter_refusal, content_text, error_text, filtered_answer, parse_response, parse_usage,
    tool_call,
};

/// The function runtime notes are shown as: the compiler's tool vocabulary names it.
pub use archmax_program::tools::NOTE_TOOL;

const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(120_000);
const DEFAULT_MAX_RETRIES: u32 = 3;
/// The most of an error body quoted in a [`ModelError::Status`], in characters.
const BODY_EXCERPT_CHARS: usize = 500;

/// Everything the adapter needs to reach an endpoint.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub api_key: String,
    /// The model used when neither the state nor the workflow names one.
    pub default_model: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
    /// The bound on each attempt (the state's own timeout may be shorter).
    pub request_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub pricing: PricingTable,
    /// Prompt caching where a workflow does not set it: `ARCHMAX_PROMPT_CACHE` (`0` or
    /// `false` turns it off; default on) and its TTL, `ARCHMAX_PROMPT_CACHE_TTL` (`5m`,
    /// the default, or `1h`).
    pub prompt_cache: bool,
    pub prompt_cache_ttl: &'static str,
    /// `ARCHMAX_STREAMING` (default on): ask for the answer as a stream of events and hand
    /// its text on as it arrives; off, each answer comes whole.
    pub streaming: bool,
    /// OpenAI's own URL and bearer key, or Azure OpenAI's deployments and `api-key`.
    pub flavor: ChatFlavor,
    /// Sent with every request after the authentication (`[providers.<name>] headers`).
    pub headers: Vec<(String, String)>,
}

/// Which dialect of chat completions an endpoint speaks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ChatFlavor {
    /// `POST {base}/chat/completions` with `Authorization: Bearer <key>`.
    #[default]
    OpenAi,
    /// Azure OpenAI: `POST {base}/openai/deployments/{deployment}/chat/completions
    /// ?api-version={api_version}` with an `api-key` header; the deployment serving a
    /// model is `deployments[model]`, else the model's name.
    Azure { api_version: String, deployments: BTreeMap<String, String> },
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("default_model", &self.default_model)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("pricing", &self.pricing)
            .field("prompt_cache", &self.prompt_cache)
            .field("prompt_cache_ttl", &self.prompt_cache_ttl)
            .field("streaming", &self.streaming)
            .field("flavor", &self.flavor)
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .finish()
    }
}

impl OpenAiConfig {
    /// Reads the `ARCHMAX_*` variables through `get` (the process environment, or a map in
    /// tests). Blank values count as unset. Missing required variables are all named in
    /// one [`ModelError::Configuration`]; a malformed number names its variable.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<OpenAiConfig, ModelError> {
        let base_url = env_var(&get, "ARCHMAX_API_BASE_URL");
        let api_key = env_var(&get, "ARCHMAX_API_KEY");
        let (Some(base_url), Some(api_key)) = (base_url.clone(), api_key.clone()) else {
            let mut missing = Vec::new();
            if base_url.is_none() {
                missing.push(
                    "ARCHMAX_API_BASE_URL is not set: set it to the endpoint's API root, e.g. \
                     ARCHMAX_API_BASE_URL=https://api.openai.com/v1",
                );
            }
            if api_key.is_none() {
                missing.push(
                    "ARCHMAX_API_KEY is not set: set it to the endpoint's API key (any non-empty value \
                     for a local server that ignores it)",
                );
            }
            return Err(ModelError::Configuration(missing.join("; ")));
        };
        chat_completions_url(&base_url)?;
        Ok(OpenAiConfig { base_url, api_key, ..OpenAiConfig::knobs_from_env(&get)? })
    }

    /// The variables every provider shares (sampling, timeouts, retries, caching,
    /// streaming, prices, the default model), with no endpoint: `base_url` and `api_key`
    /// are left empty for the caller to fill.
    pub fn knobs_from_env(get: &impl Fn(&str) -> Option<String>) -> Result<OpenAiConfig, ModelError> {
        let get = |name: &str| get(name);
        let temperature = env_number::<f64>(&get, "ARCHMAX_TEMPERATURE", "a non-negative number, e.g. 0.2", |t| {
            t.is_finite() && *t >= 0.0
        })?;
        let max_tokens =
            env_number::<u64>(&get, "ARCHMAX_MAX_TOKENS", "a positive whole number, e.g. 4096", |n| *n > 0)?;
        let request_timeout = env_number::<u64>(
            &get,
            "ARCHMAX_REQUEST_TIMEOUT_MS",
            "a positive number of milliseconds, e.g. 120000",
            |n| *n > 0,
        )?
        .map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_millis);
        let max_retries =
            env_number::<u32>(&get, "ARCHMAX_MAX_RETRIES", "a whole number of retries, e.g. 3", |_| true)?
                .unwrap_or(DEFAULT_MAX_RETRIES);

        let prompt_cache = match env_var(&get, "ARCHMAX_PROMPT_CACHE").as_deref().map(str::trim) {
            None | Some("1" | "true" | "on") => true,
            Some("0" | "false" | "off") => false,
            Some(other) => {
                return Err(ModelError::Configuration(format!(
                    "ARCHMAX_PROMPT_CACHE is `{other}`: set it to 0 to turn prompt caching off, or 1 (the default) to keep it on"
                )));
            }
        };
        let prompt_cache_ttl = match env_var(&get, "ARCHMAX_PROMPT_CACHE_TTL").as_deref().map(str::trim) {
            None | Some("5m") => crate::model::DEFAULT_CACHE_TTL,
            Some("1h") => "1h",
            Some(other) => {
                return Err(ModelError::Configuration(format!(
                    "ARCHMAX_PROMPT_CACHE_TTL is `{other}`: providers cache prompts for 5m (the default) or 1h"
                )));
            }
        };
        let streaming = match env_var(&get, "ARCHMAX_STREAMING").as_deref().map(str::trim) {
            None | Some("1" | "true" | "on") => true,
            Some("0" | "false" | "off") => false,
            Some(other) => {
                return Err(ModelError::Configuration(format!(
                    "ARCHMAX_STREAMING is `{other}`: set it to 0 to take each answer whole, or 1 (the default) to stream"
                )));
            }
        };
        Ok(OpenAiConfig {
            streaming,
            base_url: String::new(),
            api_key: String::new(),
            default_model: env_var(&get, crate::environment::MODEL_VARIABLE),
            temperature,
            max_tokens,
            request_timeout,
            max_retries,
            prompt_cache,
            prompt_cache_ttl,
            pricing: PricingTable::from_env(get)?,
            flavor: ChatFlavor::OpenAi,
            headers: Vec::new(),
        })
    }
}

/// A variable's trimmed value, `None` when unset or blank.
fn env_var(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name).map(|value| value.trim().to_string()).filter(|value| !value.is_empty())
}

fn env_number<T: FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    expected: &str,
    valid: impl Fn(&T) -> bool,
) -> Result<Option<T>, ModelError> {
    let Some(raw) = env_var(get, name) else { return Ok(None) };
    match raw.parse::<T>() {
        Ok(value) if valid(&value) => Ok(Some(value)),
        _ => Err(ModelError::Configuration(format!("{name} is `{raw}`: set it to {expected}"))),
    }
}

/// The chat-completions URL under an API root. A trailing slash is ignored, a root that
/// already ends in `/chat/completions` is taken as is, and a query string is kept.
pub(crate) fn chat_completions_url(base_url: &str) -> Result<Url, ModelError> {
    let invalid = |why: String| {
        ModelError::Configuration(format!(
            "ARCHMAX_API_BASE_URL `{base_url}` is not usable ({why}): set it to an http(s) URL such as \
             https://api.openai.com/v1"
        ))
    };
    let mut url = Url::parse(base_url.trim()).map_err(|error| invalid(error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!("the scheme is `{}`", url.scheme())));
    }
    let path = url.path().trim_end_matches('/').to_string();
    if path.ends_with("/chat/completions") {
        url.set_path(&path);
    } else {
        url.set_path(&format!("{path}/chat/completions"));
    }
    Ok(url)
}

/// An API root as a URL: http(s), trailing slashes dropped.
pub(crate) fn api_root(base_url: &str) -> Result<Url, ModelError> {
    let invalid = |why: String| {
        ModelError::Configuration(format!("the base URL `{base_url}` is not usable ({why}): give an http(s) URL"))
    };
    let mut url = Url::parse(base_url.trim()).map_err(|error| invalid(error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!("the scheme is `{}`", url.scheme())));
    }
    let path = url.path().trim_end_matches('/').to_string();
    url.set_path(&path);
    Ok(url)
}

/// Azure's URL for one deployment: `{root}/openai/deployments/{deployment}/chat/completions
/// ?api-version={version}`, the deployment's name encoded as one path segment.
fn azure_deployment_url(root: &Url, deployment: &str, api_version: &str) -> Result<Url, ModelError> {
    let mut url = root.clone();
    url.path_segments_mut()
        .map_err(|()| ModelError::Configuration(format!("the base URL `{root}` cannot take a path")))?
        .pop_if_empty()
        .extend(["openai", "deployments", deployment, "chat", "completions"]);
    url.query_pairs_mut().clear().append_pair("api-version", api_version);
    Ok(url)
}

/// The adapter: one configuration, one connection-pooling HTTP client.
pub struct OpenAiAdapter {
    config: OpenAiConfig,
    /// The chat-completions URL; for Azure, the resource's root the deployments are under.
    endpoint: Url,
    /// Authentication and the configured extra headers.
    headers: HeaderMap,
    client: reqwest::Client,
    on_retry: Option<RetryObserver>,
}

impl std::fmt::Debug for OpenAiAdapter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OpenAiAdapter")
            .field("config", &self.config)
            .field("endpoint", &self.endpoint)
            .field("on_retry", &self.on_retry.is_some())
            .finish_non_exhaustive()
    }
}

/// A retry the adapter is about to make, for a host to show (the CLI prints it).
#[derive(Clone, Debug, PartialEq)]
pub struct RetryNotice {
    /// The attempt about to be made, counting the first as 1.
    pub attempt: u32,
    /// How many attempts may be made in all.
    pub of: u32,
    /// How long the adapter waits first.
    pub delay: Duration,
    /// Why the last attempt failed, one line.
    pub reason: String,
}

/// Told of every retry before its wait.
pub type RetryObserver = Arc<dyn Fn(&RetryNotice) + Send + Sync>;

/// Installs rustls' `ring` provider as the process's TLS crypto provider, unless one is
/// installed already. A host calls this once at start-up, before building an adapter.
pub fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another thread's install leaves a provider installed, which
        // is all this asks.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

impl OpenAiAdapter {
    /// Checks the configuration and builds the HTTP client. The process must have a TLS
    /// crypto provider installed ([`install_tls_provider`]).
    pub fn new(config: OpenAiConfig) -> Result<OpenAiAdapter, ModelError> {
        let endpoint = match config.flavor {
            ChatFlavor::OpenAi => chat_completions_url(&config.base_url)?,
            ChatFlavor::Azure { .. } => api_root(&config.base_url)?,
        };
        if config.request_timeout.is_zero() {
            return Err(ModelError::Configuration(
                "the request timeout is zero: set ARCHMAX_REQUEST_TIMEOUT_MS to a positive number of milliseconds"
                    .into(),
            ));
        }
        // A local endpoint that takes no key (`[providers]` without `api_key_env`) is sent none.
        let bearer = format!("Bearer {}", config.api_key);
        let authentication = match config.flavor {
            _ if config.api_key.is_empty() => None,
            ChatFlavor::OpenAi => Some(("authorization", bearer.as_str())),
            ChatFlavor::Azure { .. } => Some(("api-key", config.api_key.as_str())),
        };
        let extra = config.headers.iter().map(|(name, value)| (name.as_str(), value.as_str()));
        let headers = http::header_map(authentication.into_iter().chain(extra))?;
        let client = http::client()?;
        Ok(OpenAiAdapter { config, endpoint, headers, client, on_retry: None })
    }

    /// Where and how a call on `model` goes: the one chat-completions URL, or the
    /// deployment serving `model` on Azure.
    fn endpoint_for(&self, model: &str) -> Result<Endpoint<'_>, ModelError> {
        let url = match &self.config.flavor {
            ChatFlavor::OpenAi => self.endpoint.clone(),
            ChatFlavor::Azure { api_version, deployments } => {
                let deployment = deployments.get(model).map_or(model, String::as_str);
                azure_deployment_url(&self.endpoint, deployment, api_version)?
            }
        };
        Ok(Endpoint {
            client: &self.client,
            url,
            headers: self.headers.clone(),
            streaming: self.config.streaming,
            wire: Wire::ChatCompletions,
            request_timeout: self.config.request_timeout,
            max_retries: self.config.max_retries,
            on_retry: self.on_retry.as_ref(),
        })
    }

    /// Tells `observer` of every retry before its wait.
    pub(crate) fn on_retry(mut self, observer: RetryObserver) -> OpenAiAdapter {
        self.on_retry = Some(observer);
        self
    }

    /// Reads the configuration from `ARCHMAX_*` (see [`OpenAiConfig::from_env`]).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<OpenAiAdapter, ModelError> {
        OpenAiAdapter::new(OpenAiConfig::from_env(get)?)
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The prices used to cost this adapter's calls.
    pub fn pricing(&self) -> &PricingTable {
        &self.config.pricing
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// The model a request runs on: its declared id, else the configured default.
    pub(crate) fn resolve_model<'r>(&'r self, request: &ModelRequest<'r>) -> Result<&'r str, ModelError> {
        let declared = request.model.map(str::trim).filter(|model| !model.is_empty());
        declared.or(self.config.default_model.as_deref()).ok_or_else(|| {
            ModelError::Configuration(format!(
                "no model for the {} call in state `{}` of workflow `{}`: set ARCHMAX_MODEL or settings.model",
                request.role.as_str(),
                request.state,
                request.workflow
            ))
        })
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let model = self.resolve_model(&request)?;
        let body = request_body(&self.config, &request, model);
        let body = serde_json::to_vec(&body)
            .map_err(|error| ModelError::Response(format!("the request could not be encoded: {error}")))?;

        let endpoint = self.endpoint_for(model)?;
        endpoint.call(&body, request.timeout, request.on_text).await
    }
}

impl ModelAdapter for OpenAiAdapter {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(self.complete(request))
    }

    /// The wire protocol is OpenAI's, whoever serves it at the configured base URL.
    fn provider(&self, _model: Option<&str>) -> &str {
        "openai"
    }

    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        let model = model.map(str::trim).filter(|model| !model.is_empty()).or(self.config.default_model.as_deref());
        let ttl = cache_ttl(&self.config, &cache);
        let strategy = match (ttl, model) {
            (None, _) => "off",
            (Some(_), Some(model)) if marks_static_block(model) => "anthropic-compat",
            (Some(_), _) => "unsupported",
        };
        CachePlan { enabled: ttl.is_some(), ttl: ttl.map(str::to_string), strategy }
    }
}

/// The time to live a call asks its provider to cache for, or `None` when caching is off:
/// the workflow's setting over the host's (`ARCHMAX_PROMPT_CACHE`, `_TTL`).
fn cache_ttl<'a>(config: &'a OpenAiConfig, cache: &PromptCache<'a>) -> Option<&'a str> {
    cache.enabled.unwrap_or(config.prompt_cache).then(|| cache.ttl.unwrap_or(config.prompt_cache_ttl))
}

/// Claude-family models behind an OpenAI-compatible endpoint cache only what carries a
/// `cache_control` marker; the others cache prefixes by themselves, if at all.
fn marks_static_block(model: &str) -> bool {
    model.to_ascii_lowercase().contains("claude")
}

/// The start of a body for an error message, at most [`BODY_EXCERPT_CHARS`] characters.
pub(super) fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match cut_at_chars(text, BODY_EXCERPT_CHARS) {
        Some(_) => format!("{}…", first_chars(text, BODY_EXCERPT_CHARS - 1)),
        None => text.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------

/// The JSON body of a chat-completions call.
fn request_body(config: &OpenAiConfig, request: &ModelRequest<'_>, model: &str) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(content) = system_content(config, request, model) {
        messages.push(json!({ "role": "system", "content": content }));
    }
    let has_notes = append_transcript(&mut messages, request.messages);

    let mut tools: Vec<Value> = request.tools.iter().map(tool_definition).collect();
    if has_notes && !request.tools.iter().any(|tool| tool.name == NOTE_TOOL) {
        tools.push(note_tool_definition());
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), Value::from("auto"));
    }
    // The call's own sampling options win over the endpoint's configured defaults.
    let temperature = request.sampling.temperature.or(config.temperature);
    if let Some(temperature) = temperature.and_then(serde_json::Number::from_f64) {
        body.insert("temperature".into(), Value::Number(temperature));
    }
    if let Some(max_tokens) = request.sampling.max_tokens.or(config.max_tokens) {
        body.insert("max_tokens".into(), Value::from(max_tokens));
    }
    body.insert("stream".into(), Value::Bool(config.streaming));
    if config.streaming {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    Value::Object(body)
}

/// The system message's content: the static and volatile blocks as two text parts with a
/// cache marker on the static one (prompt caching on, a Claude model, a non-empty static
/// block), else one string with the blocks a blank line apart; `None` when both are empty.
fn system_content(config: &OpenAiConfig, request: &ModelRequest<'_>, model: &str) -> Option<Value> {
    let (fixed, volatile) = (request.system_static, request.system_volatile);
    if let Some(ttl) = cache_ttl(config, &request.prompt_cache)
        && !fixed.trim().is_empty()
        && marks_static_block(model)
    {
        let mut parts =
            vec![json!({ "type": "text", "text": fixed, "cache_control": { "type": "ephemeral", "ttl": ttl } })];
        if !volatile.trim().is_empty() {
            parts.push(json!({ "type": "text", "text": volatile }));
        }
        return Some(Value::Array(parts));
    }
    let blocks: Vec<&str> = [fixed, volatile].into_iter().filter(|block| !block.trim().is_empty()).collect();
    (!blocks.is_empty()).then(|| Value::from(blocks.join("\n\n")))
}

/// Appends the transcript in chat-completions form and tells whether it held a note.
///
/// A note that falls between an assistant's tool calls and their answers is held back
/// until the last answer: providers require the answers to follow the calls directly.
fn append_transcript(out: &mut Vec<Value>, messages: &[Message]) -> bool {
    let mut has_notes = false;
    let mut unanswered: Vec<&str> = Vec::new();
    let mut held: Vec<&Message> = Vec::new();
    for message in messages {
        match message {
            Message::Note { .. } => {
                has_notes = true;
                if unanswered.is_empty() {
                    append_note(out, message);
                } else {
                    held.push(message);
                }
            }
            Message::Tool { call_id, content, status, .. } => {
                out.push(json!({ "role": "tool", "tool_call_id": call_id, "content": tool_content(content, *status) }));
                unanswered.retain(|id| id != call_id);
                if unanswered.is_empty() {
                    held.drain(..).for_each(|note| append_note(out, note));
                }
            }
            Message::User { text, .. } => {
                unanswered.clear();
                held.drain(..).for_each(|note| append_note(out, note));
                out.push(json!({ "role": "user", "content": text }));
            }
            Message::Assistant { text, tool_calls } => {
                unanswered.clear();
                held.drain(..).for_each(|note| append_note(out, note));
                out.push(assistant_message(text, tool_calls));
                unanswered.extend(tool_calls.iter().map(|call| call.id.as_str()));
            }
        }
    }
    held.drain(..).for_each(|note| append_note(out, note));
    has_notes
}

fn assistant_message(text: &str, tool_calls: &[ToolCall]) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), Value::from("assistant"));
    let content = if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { Value::from(text) };
    message.insert("content".into(), content);
    if !tool_calls.is_empty() {
        let calls = tool_calls.iter().map(|call| function_call(&call.id, &call.name, &call.args)).collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}

fn function_call(id: &str, name: &str, args: &Value) -> Value {
    let arguments = if args.is_null() { "{}".to_string() } else { args.to_string() };
    json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })
}

/// A tool answer; an error says so up front unless its text already does.
fn tool_content(content: &str, status: ToolStatus) -> String {
    let says_error = content.trim_start().get(..5).is_some_and(|start| start.eq_ignore_ascii_case("error"));
    match status {
        ToolStatus::Error if !says_error => format!("Error: {content}"),
        _ => content.to_string(),
    }
}

/// A note as a synthetic `archmax_note` call and its answer.
fn append_note(out: &mut Vec<Value>, note: &Message) {
    if let Message::Note { kind, call_id, text } = note {
        let call = function_call(call_id, NOTE_TOOL, &json!({ "kind": kind.as_str() }));
        out.push(json!({ "role": "assistant", "content": Value::Null, "tool_calls": [call] }));
        out.push(json!({ "role": "tool", "tool_call_id": call_id, "content": text }));
    }
}

fn tool_definition(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": { "name": tool.name, "description": tool.description, "parameters": tool.parameters },
    })
}

fn note_tool_definition() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": NOTE_TOOL,
            "description": "Runtime notes written by the archmax runtime (decisions, events, errors and the \
                            like), shown in the conversation as calls to this function and their results. \
                            They are information for you, not an action: never call this function.",
            "parameters": {
                "type": "object",
                "properties": { "kind": { "type": "string", "description": "What the note is about." } },
                "required": ["kind"],
                "additionalProperties": false,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};

    use tokio::net::TcpListener;

    use super::super::Role;
    use super::super::fake_endpoint::*;
    use super::super::pricing::Rates;
    use super::*;
    use crate::session::NoteKind;

    // -- fixtures ------------------------------------------------------------------------

    fn config(base_url: &str) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.to_string(),
            api_key: "sk-test".into(),
            default_model: Some("gpt-test".into()),
            temperature: None,
            max_tokens: None,
            request_timeout: Duration::from_secs(5),
            max_retries: 3,
            pricing: PricingTable::default(),
            prompt_cache: true,
            prompt_cache_ttl: "5m",
            streaming: false,
            flavor: ChatFlavor::OpenAi,
            headers: Vec::new(),
        }
    }

    fn adapter(config: OpenAiConfig) -> OpenAiAdapter {
        super::install_tls_provider();
        OpenAiAdapter::new(config).expect("adapter")
    }

    struct Call {
        messages: Vec<Message>,
        tools: Vec<ToolDefinition>,
        variables: Value,
        model: Option<&'static str>,
        prompt_cache: crate::model::PromptCache<'static>,
        timeout: Option<Duration>,
        sampling: super::super::Sampling,
    }

    impl Call {
        fn new() -> Call {
            Call {
                messages: vec![Message::User { text: "hi".into(), opening: None }],
                tools: Vec::new(),
                variables: json!({}),
                model: None,
                prompt_cache: crate::model::PromptCache::OFF,
                timeout: None,
                sampling: super::super::Sampling::default(),
            }
        }

        fn request(&self) -> ModelRequest<'_> {
            ModelRequest {
                model: self.model,
                role: Role::Agent,
                session: "s1",
                workflow: "support",
                state: "triage",
                variables: &self.variables,
                system_static: "You are the static part.",
                system_volatile: "Current state: triage",
                messages: &self.messages,
                history: self.messages.len(),
                tools: &self.tools,
                prompt_cache: self.prompt_cache,
                timeout: self.timeout,
                sampling: self.sampling,
                tape: None,
                on_text: None,
            }
        }
    }

    fn text_answer(text: &str) -> Value {
        json!({
            "id": "chatcmpl-1",
            "model": "gpt-test-2025",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 12, "completion_tokens": 3 },
        })
    }

    /// A tool call as it travels on the wire.
    fn wire_call(id: &str, name: &str, arguments: &str) -> Value {
        json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })
    }

    fn path_schema() -> Value {
        json!({ "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] })
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    // -- answers -------------------------------------------------------------------------

    #[tokio::test]
    async fn a_text_answer_carries_text_usage_cached_tokens_and_the_reported_model() {
        let server = FakeEndpoint::start(vec![ok(json!({
            "model": "gpt-test-2025-01-01",
            "choices": [{ "message": { "role": "assistant", "content": "Hello there." } }],
            "usage": {
                "prompt_tokens": 1200,
                "completion_tokens": 30,
                "prompt_tokens_details": { "cached_tokens": 1000 },
            },
        }))])
        .await;
        let call = Call::new();
        let answer = adapter(config(&server.base_url)).call(call.request()).await.expect("answer");
        assert_eq!(answer.text, "Hello there.");
        assert!(answer.tool_calls.is_empty());
        assert_eq!(answer.usage, TokenUsage { input: 1200, output: 30, cache_read: 1000, cache_write: 0 });
        assert_eq!(answer.model.as_deref(), Some("gpt-test-2025-01-01"));
        assert_eq!(server.requests().len(), 1);
    }

    /// Server-sent events of `chunks`, ended by `[DONE]` unless `cut`.
    fn sse(chunks: &[Value], cut: bool) -> String {
        let mut out: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
        if !cut {
            out.push_str("data: [DONE]\n\n");
        }
        out
    }

    fn piece(text: &str) -> Value {
        json!({ "id": "chatcmpl-s", "model": "gpt-test-s", "choices": [{ "index": 0, "delta": { "content": text } }] })
    }

    fn streaming(base_url: &str) -> OpenAiConfig {
        OpenAiConfig { streaming: true, max_retries: 2, ..config(base_url) }
    }

    /// Calls with a sink that keeps every piece of text it is handed.
    async fn call_watching(adapter: &OpenAiAdapter) -> (Result<ModelResponse, ModelError>, Vec<String>) {
        let pieces = Mutex::new(Vec::new());
        let keep =
            |text: &str, _: Option<&str>| pieces.lock().unwrap_or_else(PoisonError::into_inner).push(text.to_string());
        let call = Call::new();
        let request = ModelRequest { on_text: Some(crate::model::TextSink(&keep)), ..call.request() };
        let answer = adapter.call(request).await;
        (answer, pieces.into_inner().unwrap_or_else(PoisonError::into_inner))
    }

    #[tokio::test]
    async fn a_streamed_answer_hands_its_text_on_as_it_arrives_and_asks_for_the_usage() {
        let tool = json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
            { "index": 0, "id": "call_s", "type": "function", "function": { "name": "read_file", "arguments": "{\"file_path\": \"a.md\"}" } } ] } }] });
        let usage = json!({ "choices": [], "usage": { "prompt_tokens": 80, "completion_tokens": 9 } });
        let server =
            FakeEndpoint::start(vec![Reply::Stream(sse(&[piece("Reading "), piece("a.md now."), tool, usage], false))])
                .await;
        let adapter = adapter(streaming(&server.base_url));
        let (answer, pieces) = call_watching(&adapter).await;
        let answer = answer.expect("answer");
        assert_eq!(pieces, ["Reading ", "a.md now."]);
        assert_eq!(answer.text, "Reading a.md now.");
        assert_eq!(
            (answer.tool_calls[0].name.as_str(), &answer.tool_calls[0].args),
            ("read_file", &json!({ "file_path": "a.md" }))
        );
        assert_eq!((answer.usage.input, answer.usage.output), (80, 9));
        assert_eq!((answer.id.as_deref(), answer.model.as_deref()), (Some("chatcmpl-s"), Some("gpt-test-s")));
        let sent = server.requests()[0].json();
        assert_eq!(
            (sent["stream"].clone(), sent["stream_options"]["include_usage"].clone()),
            (json!(true), json!(true))
        );
    }

    #[tokio::test]
    async fn a_stream_cut_before_any_text_is_retried_and_one_cut_after_text_fails_the_call() {
        // Cut before any text: nothing was shown, so the call is made again.
        let server = FakeEndpoint::start(vec![
            Reply::Stream(sse(&[json!({ "choices": [{ "index": 0, "delta": { "role": "assistant" } }] })], true)),
            Reply::Stream(sse(&[piece("Hello.")], false)),
        ])
        .await;
        let (answer, pieces) = call_watching(&adapter(streaming(&server.base_url))).await;
        assert_eq!(
            (answer.expect("the retry answers").text, pieces),
            ("Hello.".to_string(), vec!["Hello.".to_string()])
        );
        assert_eq!(server.requests().len(), 2);
        // Cut after text was shown: the call fails, naming the cut, and is not made again.
        let server = FakeEndpoint::start(vec![
            Reply::Stream(sse(&[piece("The refund")], true)),
            Reply::Stream(sse(&[piece("x")], false)),
        ])
        .await;
        let (answer, pieces) = call_watching(&adapter(streaming(&server.base_url))).await;
        match answer {
            Err(ModelError::Transport(message)) => assert!(message.contains("cut before its end"), "{message}"),
            other => panic!("a stream cut after its text fails the call, got {other:?}"),
        }
        assert_eq!(pieces, ["The refund"]);
        assert_eq!(server.requests().len(), 1, "never retried once text was shown");
    }

    #[tokio::test]
    async fn an_endpoint_that_answers_json_to_a_stream_request_is_read_whole() {
        let server = FakeEndpoint::start(vec![ok(text_answer("Plain."))]).await;
        let (answer, pieces) = call_watching(&adapter(streaming(&server.base_url))).await;
        assert_eq!(answer.expect("answer").text, "Plain.");
        assert!(pieces.is_empty(), "nothing was streamed; the interpreter sends the whole text as one delta");
    }

    #[test]
    fn archmax_streaming_is_on_unless_turned_off_and_refuses_other_values() {
        let base = [("ARCHMAX_API_BASE_URL", "http://x/v1"), ("ARCHMAX_API_KEY", "k")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let pairs: Vec<(&str, &str)> = base.iter().chain(extra).copied().collect();
            OpenAiConfig::from_env(env(&pairs))
        };
        assert!(with(&[]).expect("config").streaming);
        assert!(!with(&[("ARCHMAX_STREAMING", "0")]).expect("config").streaming);
        match with(&[("ARCHMAX_STREAMING", "sometimes")]) {
            Err(ModelError::Configuration(message)) => assert!(message.contains("ARCHMAX_STREAMING"), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_answer_cut_at_the_output_limit_is_marked_truncated_and_keeps_its_id() {
        let server = FakeEndpoint::start(vec![
            ok(json!({
                "id": "chatcmpl-42",
                "choices": [{ "message": { "role": "assistant", "content": "The refund is appr" }, "finish_reason": "length" }],
            })),
            ok(json!({ "choices": [{ "message": { "role": "assistant", "content": "Done." }, "finish_reason": "stop" }] })),
        ])
        .await;
        let adapter = adapter(config(&server.base_url));
        let cut = adapter.call(Call::new().request()).await.expect("answer");
        assert!(cut.truncated);
        assert_eq!(cut.id.as_deref(), Some("chatcmpl-42"));
        let whole = adapter.call(Call::new().request()).await.expect("answer");
        assert!(!whole.truncated);
        assert_eq!(whole.id, None);
    }

    #[test]
    fn the_cache_plan_names_the_marker_each_model_gets() {
        let claude =
            OpenAiConfig { default_model: Some("anthropic/claude-sonnet-4".into()), ..config("http://127.0.0.1:9") };
        let adapter = adapter(claude.clone());
        let unset = crate::model::PromptCache::default();
        let plan = adapter.cache_plan(None, unset);
        assert_eq!((plan.enabled, plan.ttl.as_deref(), plan.strategy), (true, Some("5m"), "anthropic-compat"));
        let plan = adapter.cache_plan(Some("gpt-4.1"), crate::model::PromptCache { enabled: None, ttl: Some("1h") });
        assert_eq!((plan.ttl.as_deref(), plan.strategy), (Some("1h"), "unsupported"));
        let plan = adapter.cache_plan(Some("claude-haiku"), crate::model::PromptCache::OFF);
        assert_eq!((plan.enabled, plan.ttl, plan.strategy), (false, None, "off"));
        // The host's ARCHMAX_PROMPT_CACHE=0 holds where the workflow says nothing.
        let host_off = super::OpenAiAdapter::new(OpenAiConfig { prompt_cache: false, ..claude }).expect("adapter");
        assert_eq!(host_off.cache_plan(None, unset).strategy, "off");
        assert_eq!(
            host_off.cache_plan(None, crate::model::PromptCache { enabled: Some(true), ttl: None }).strategy,
            "anthropic-compat"
        );
    }

    #[tokio::test]
    async fn a_tool_call_answer_parses_arguments_and_keeps_broken_ones_raw() {
        let server = FakeEndpoint::start(vec![ok(json!({
            "choices": [{ "message": { "role": "assistant", "content": null, "tool_calls": [
                wire_call("call_a", "read_file", "{\"path\":\"a.md\",\"limit\":3}"),
                wire_call("call_b", "write_file", "{\"path\": \"b.md\""),
                { "type": "function", "function": { "name": "archmax_advance", "arguments": "" } },
            ] } }],
        }))])
        .await;
        let call = Call::new();
        let answer = adapter(config(&server.base_url)).call(call.request()).await.expect("answer");
        assert_eq!(answer.text, "");
        assert_eq!(
            answer.tool_calls,
            vec![
                ToolCall { id: "call_a".into(), name: "read_file".into(), args: json!({ "path": "a.md", "limit": 3 }) },
                ToolCall {
                    id: "call_b".into(),
                    name: "write_file".into(),
                    args: json!({ "_raw": "{\"path\": \"b.md\"" })
                },
                ToolCall { id: "call_2".into(), name: "archmax_advance".into(), args: json!({}) },
            ]
        );
        assert_eq!(answer.usage, TokenUsage::default());
        assert_eq!(answer.model, None);
    }

    #[tokio::test]
    async fn anthropic_style_counts_and_content_parts_are_normalized() {
        let server = FakeEndpoint::start(vec![ok(json!({
            "model": "claude-sonnet-4",
            "choices": [{ "message": { "content": [
                { "type": "text", "text": "Part one, " },
                { "type": "text", "text": "part two." },
            ] } }],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 200,
            },
        }))])
        .await;
        let call = Call::new();
        let answer = adapter(config(&server.base_url)).call(call.request()).await.expect("answer");
        assert_eq!(answer.text, "Part one, part two.");
        assert_eq!(answer.usage, TokenUsage { input: 1210, output: 5, cache_read: 1000, cache_write: 200 });
    }

    #[test]
    fn usage_shapes_all_come_out_with_the_total_input() {
        let cases = [
            (
                json!({
                    "input_tokens": 20,
                    "output_tokens": 7,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 50,
                }),
                TokenUsage { input: 170, output: 7, cache_read: 100, cache_write: 50 },
            ),
            (
                json!({
                    "prompt_tokens": 20_369,
                    "completion_tokens": 287,
                    "prompt_tokens_details": { "cached_tokens": 18_074 },
                }),
                TokenUsage { input: 20_369, output: 287, cache_read: 18_074, cache_write: 0 },
            ),
            (
                json!({
                    "prompt_tokens": 3000,
                    "completion_tokens": 1,
                    "prompt_tokens_details": { "cached_tokens": 1000, "cache_write_tokens": 1500 },
                }),
                TokenUsage { input: 3000, output: 1, cache_read: 1000, cache_write: 1500 },
            ),
            (json!({ "prompt_tokens": null, "completion_tokens": "many" }), TokenUsage::default()),
            (json!("not an object"), TokenUsage::default()),
        ];
        for (usage, expected) in cases {
            assert_eq!(parse_usage(Some(&usage)), expected, "{usage}");
        }
        assert_eq!(parse_usage(None), TokenUsage::default());
    }

    #[tokio::test]
    async fn malformed_json_is_a_response_error() {
        let server = FakeEndpoint::start(vec![status(200, "{\"choices\": [")]).await;
        let call = Call::new();
        let result = adapter(config(&server.base_url)).call(call.request()).await;
        assert!(matches!(&result, Err(ModelError::Response(message)) if message.contains("not JSON")), "{result:?}");
        assert_eq!(server.requests().len(), 1, "a malformed answer is not retried");
    }

    #[tokio::test]
    async fn an_answer_without_choices_is_a_response_error() {
        let server = FakeEndpoint::start(vec![
            ok(json!({ "choices": [] })),
            ok(json!({ "error": { "message": "context length exceeded" } })),
        ])
        .await;
        let call = Call::new();
        let adapter = adapter(config(&server.base_url));
        let result = adapter.call(call.request()).await;
        assert!(matches!(&result, Err(ModelError::Response(message)) if message.contains("no choices")), "{result:?}");
        let result = adapter.call(call.request()).await;
        assert!(
            matches!(&result, Err(ModelError::Response(message)) if message.contains("context length exceeded")),
            "{result:?}"
        );
    }

    // -- the request ---------------------------------------------------------------------

    #[tokio::test]
    async fn a_calls_own_sampling_wins_over_the_configured_defaults() {
        let server = FakeEndpoint::start(vec![ok(text_answer("steady")), ok(text_answer("default"))]).await;
        let mut settings = config(&server.base_url);
        settings.temperature = Some(0.7);
        settings.max_tokens = Some(4096);
        let adapter = adapter(settings);
        let mut call = Call::new();
        call.sampling = super::super::Sampling { temperature: Some(0.0), max_tokens: Some(300) };
        adapter.call(call.request()).await.expect("answer");
        adapter.call(Call::new().request()).await.expect("answer");
        let requests = server.requests();
        let (asked, defaulted) = (requests[0].json(), requests[1].json());
        assert_eq!((asked["temperature"].as_f64(), asked["max_tokens"].as_u64()), (Some(0.0), Some(300)));
        assert_eq!((defaulted["temperature"].as_f64(), defaulted["max_tokens"].as_u64()), (Some(0.7), Some(4096)));
    }

    #[tokio::test]
    async fn the_request_carries_system_blocks_transcript_notes_tools_and_the_key() {
        let server = FakeEndpoint::start(vec![ok(text_answer("done"))]).await;
        let mut call = Call::new();
        call.model = Some("gpt-4o-mini");
        call.messages = vec![
            Message::User { text: "Please check the report.".into(), opening: None },
            Message::Assistant {
                text: "Reading it.".into(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    args: json!({ "path": "r.md" }),
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                name: "read_file".into(),
                content: "# Report".into(),
                status: ToolStatus::Ok,
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ToolCall { id: "c2".into(), name: "write_file".into(), args: json!({ "path": "/etc/x" }) },
                    ToolCall { id: "c3".into(), name: "write_file".into(), args: json!({ "path": "/etc/y" }) },
                ],
            },
            Message::Tool {
                call_id: "c2".into(),
                name: "write_file".into(),
                content: "path is outside the workspace".into(),
                status: ToolStatus::Error,
            },
            Message::Tool {
                call_id: "c3".into(),
                name: "write_file".into(),
                content: "Error: denied".into(),
                status: ToolStatus::Error,
            },
            Message::Note {
                kind: NoteKind::Decision,
                call_id: "n1".into(),
                text: "A reviewer approved the report.".into(),
            },
        ];
        call.tools = vec![ToolDefinition {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: path_schema(),
        }];
        let mut settings = config(&server.base_url);
        settings.temperature = Some(0.2);
        settings.max_tokens = Some(1024);
        adapter(settings).call(call.request()).await.expect("answer");

        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let seen = &requests[0];
        assert_eq!(seen.method, "POST");
        assert_eq!(seen.path, "/v1/chat/completions");
        assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
        assert_eq!(seen.header("content-type"), Some("application/json"));
        let note_call = wire_call("n1", "archmax_note", "{\"kind\":\"decision\"}");
        let expected_messages = json!([
            { "role": "system", "content": "You are the static part.\n\nCurrent state: triage" },
            { "role": "user", "content": "Please check the report." },
            { "role": "assistant", "content": "Reading it.", "tool_calls": [
                wire_call("c1", "read_file", "{\"path\":\"r.md\"}"),
            ] },
            { "role": "tool", "tool_call_id": "c1", "content": "# Report" },
            { "role": "assistant", "content": null, "tool_calls": [
                wire_call("c2", "write_file", "{\"path\":\"/etc/x\"}"),
                wire_call("c3", "write_file", "{\"path\":\"/etc/y\"}"),
            ] },
            { "role": "tool", "tool_call_id": "c2", "content": "Error: path is outside the workspace" },
            { "role": "tool", "tool_call_id": "c3", "content": "Error: denied" },
            { "role": "assistant", "content": null, "tool_calls": [note_call] },
            { "role": "tool", "tool_call_id": "n1", "content": "A reviewer approved the report." },
        ]);
        let body = seen.json();
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(body["messages"], expected_messages);
        assert_eq!(body["tool_choice"], "auto");
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["stream"], false);
        let tools = body["tools"].as_array().cloned().unwrap_or_default();
        assert_eq!(tools.len(), 2);
        assert_eq!(
            tools[0],
            json!({ "type": "function", "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": path_schema(),
            } })
        );
        assert_eq!(tools[1]["function"]["name"], "archmax_note");
        let description = tools[1]["function"]["description"].as_str().unwrap_or_default();
        assert!(description.contains("never call"), "{description}");
    }

    fn azure(base_url: &str) -> OpenAiConfig {
        let deployments = BTreeMap::from([("gpt-4.1".to_string(), "prod gpt41".to_string())]);
        OpenAiConfig {
            flavor: ChatFlavor::Azure { api_version: "2024-10-21".into(), deployments },
            headers: vec![("x-team".into(), "support".into())],
            ..config(base_url)
        }
    }

    #[tokio::test]
    async fn azure_calls_go_to_the_models_deployment_with_the_api_version_and_the_api_key_header() {
        let server = FakeEndpoint::start(vec![ok(text_answer("from azure")), ok(text_answer("again"))]).await;
        let root = server.base_url.trim_end_matches("/v1").to_string();
        let adapter = adapter(azure(&format!("{root}/")));
        let mut call = Call::new();
        call.model = Some("gpt-4.1");
        assert_eq!(adapter.call(call.request()).await.expect("answer").text, "from azure");
        call.model = Some("gpt-4o-mini");
        adapter.call(call.request()).await.expect("answer");
        let requests = server.requests();
        assert_eq!(requests[0].method, "POST");
        assert_eq!(requests[0].path, "/openai/deployments/prod%20gpt41/chat/completions?api-version=2024-10-21");
        assert_eq!(requests[1].path, "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21");
        for request in &requests {
            assert_eq!(request.header("api-key"), Some("sk-test"));
            assert_eq!(request.header("authorization"), None, "Azure takes its key in api-key only");
            assert_eq!(request.header("x-team"), Some("support"));
        }
    }

    #[tokio::test]
    async fn a_content_filters_refusal_is_reported_as_such_and_not_retried() {
        let filtered = json!({ "error": {
            "code": "content_filter",
            "message": "The response was filtered due to the prompt triggering content management policy.",
            "innererror": { "code": "ResponsibleAIPolicyViolation", "content_filter_result": { "hate": { "filtered": true, "severity": "high" } } },
        } });
        let stopped = json!({
            "choices": [{ "index": 0, "finish_reason": "content_filter", "message": { "role": "assistant", "content": "Part of" } }],
        });
        let server = FakeEndpoint::start(vec![status(400, &filtered.to_string()), ok(stopped)]).await;
        let root = server.base_url.trim_end_matches("/v1").to_string();
        let adapter = adapter(azure(&root));
        match adapter.call(Call::new().request()).await {
            Err(ModelError::ContentFilter(message)) => {
                assert!(message.contains("content filter refused the prompt"), "{message}");
                assert!(message.contains("content management policy"), "{message}");
            }
            other => panic!("a content-filter refusal, got {other:?}"),
        }
        match adapter.call(Call::new().request()).await {
            Err(ModelError::ContentFilter(message)) => {
                assert!(message.contains("stopped the answer after 7 characters"), "{message}")
            }
            other => panic!("a filtered answer, got {other:?}"),
        }
        assert_eq!(server.requests().len(), 2, "neither is retried");
    }

    #[tokio::test]
    async fn a_provider_without_a_key_sends_no_authorization() {
        let server = FakeEndpoint::start(vec![ok(text_answer("local"))]).await;
        let adapter = adapter(OpenAiConfig { api_key: String::new(), ..config(&server.base_url) });
        adapter.call(Call::new().request()).await.expect("answer");
        assert_eq!(server.requests()[0].header("authorization"), None);
    }

    #[tokio::test]
    async fn a_plain_request_has_no_tools_and_falls_back_to_the_default_model() {
        let server = FakeEndpoint::start(vec![ok(text_answer("hi"))]).await;
        let call = Call::new();
        adapter(config(&format!("{}/", server.base_url))).call(call.request()).await.expect("answer");
        let requests = server.requests();
        assert_eq!(requests[0].path, "/v1/chat/completions", "a trailing slash is not doubled");
        let body = requests[0].json();
        assert_eq!(body["model"], "gpt-test");
        for absent in ["tools", "tool_choice", "temperature", "max_tokens"] {
            assert!(body.get(absent).is_none(), "{absent} should be absent: {body}");
        }
        assert_eq!(body["messages"][1], json!({ "role": "user", "content": "hi" }));
    }

    #[tokio::test]
    async fn a_claude_model_with_prompt_caching_gets_a_marked_static_block() {
        let server = FakeEndpoint::start(vec![ok(text_answer("a")), ok(text_answer("b")), ok(text_answer("c"))]).await;
        let adapter = adapter(config(&server.base_url));
        let mut call = Call::new();
        call.model = Some("anthropic/Claude-Sonnet-4");
        call.prompt_cache = crate::model::PromptCache { enabled: Some(true), ttl: Some("1h") };
        adapter.call(call.request()).await.expect("cached claude");
        call.model = Some("gpt-4o");
        adapter.call(call.request()).await.expect("cached gpt");
        call.model = Some("claude-haiku-4");
        call.prompt_cache = crate::model::PromptCache::OFF;
        adapter.call(call.request()).await.expect("uncached claude");

        let requests = server.requests();
        assert_eq!(
            requests[0].json()["messages"][0],
            json!({ "role": "system", "content": [
                {
                    "type": "text",
                    "text": "You are the static part.",
                    "cache_control": { "type": "ephemeral", "ttl": "1h" },
                },
                { "type": "text", "text": "Current state: triage" },
            ] })
        );
        let joined = json!({ "role": "system", "content": "You are the static part.\n\nCurrent state: triage" });
        assert_eq!(requests[1].json()["messages"][0], joined);
        assert_eq!(requests[2].json()["messages"][0], joined);
    }

    #[test]
    fn a_note_between_tool_calls_and_their_answers_waits_for_the_last_answer() {
        let note = |id: &str| Message::Note { kind: NoteKind::Event, call_id: id.into(), text: format!("note {id}") };
        let messages = vec![
            Message::Assistant {
                text: "Two things.".into(),
                tool_calls: vec![
                    ToolCall { id: "a".into(), name: "t".into(), args: Value::Null },
                    ToolCall { id: "b".into(), name: "t".into(), args: json!({}) },
                ],
            },
            Message::Tool { call_id: "a".into(), name: "t".into(), content: "A".into(), status: ToolStatus::Ok },
            note("n1"),
            Message::Tool { call_id: "b".into(), name: "t".into(), content: "B".into(), status: ToolStatus::Ok },
            note("n2"),
        ];
        let mut out = Vec::new();
        assert!(append_transcript(&mut out, &messages));
        let order: Vec<String> = out
            .iter()
            .map(|m| match (m["role"].as_str(), m["tool_call_id"].as_str()) {
                (Some("tool"), Some(id)) => format!("tool:{id}"),
                (Some(role), _) => role.to_string(),
                _ => String::from("?"),
            })
            .collect();
        assert_eq!(order, ["assistant", "tool:a", "tool:b", "assistant", "tool:n1", "assistant", "tool:n2"]);
        assert_eq!(out[0]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(out[3]["tool_calls"][0]["function"]["arguments"], "{\"kind\":\"event\"}");
        let mut plain = Vec::new();
        assert!(!append_transcript(&mut plain, &messages[..2]));
    }

    #[tokio::test]
    async fn no_model_anywhere_is_a_configuration_error_before_any_request() {
        let server = FakeEndpoint::start(vec![ok(text_answer("unused"))]).await;
        let mut settings = config(&server.base_url);
        settings.default_model = None;
        let call = Call::new();
        let result = adapter(settings).call(call.request()).await;
        assert!(
            matches!(&result, Err(ModelError::Configuration(m))
                if m.contains("ARCHMAX_MODEL") && m.contains("settings.model") && m.contains("triage")),
            "{result:?}"
        );
        assert!(server.requests().is_empty());
    }

    // -- retries and timeouts -----------------------------------------------------------

    // These run on paused tokio time, moved by the endpoint's `Clock`: a backoff or a
    // timeout passes at once, and `tokio::time::Instant` reads how long the adapter waited.

    #[tokio::test(start_paused = true)]
    async fn a_429_is_retried_after_the_servers_retry_after() {
        let server =
            FakeEndpoint::start_with_clock(vec![with_retry_after(429, "0"), ok(text_answer("second time"))]).await;
        let call = Call::new();
        let started = tokio::time::Instant::now();
        let answer = adapter(config(&server.base_url)).call(call.request()).await.expect("answer");
        assert_eq!(answer.text, "second time");
        assert_eq!(server.requests().len(), 2);
        let waited = started.elapsed();
        assert!(waited < BACKOFF_BASE, "Retry-After: 0 skips the backoff, yet it waited {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_error_is_retried_with_backoff() {
        let server = FakeEndpoint::start_with_clock(vec![status(503, "busy"), ok(text_answer("recovered"))]).await;
        let mut settings = config(&server.base_url);
        settings.max_retries = 1;
        let call = Call::new();
        let started = tokio::time::Instant::now();
        let answer = adapter(settings).call(call.request()).await.expect("answer");
        assert_eq!(answer.text, "recovered");
        let waited = started.elapsed();
        // The first backoff (half a second, plus up to a quarter more), not the second.
        assert!(waited >= BACKOFF_BASE && waited < 2 * BACKOFF_BASE, "waited {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn every_retry_is_told_to_the_observer_before_its_wait() {
        let script = vec![status(503, "busy"), status(502, "bad gateway"), ok(text_answer("recovered"))];
        let server = FakeEndpoint::start_with_clock(script).await;
        let mut settings = config(&server.base_url);
        settings.max_retries = 3;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let observer: super::RetryObserver = Arc::new(move |notice: &super::RetryNotice| {
            record.lock().expect("lock").push(notice.clone());
        });
        let answer = adapter(settings).on_retry(observer).call(Call::new().request()).await.expect("answer");
        assert_eq!(answer.text, "recovered");
        let seen = seen.lock().expect("lock");
        let counted: Vec<(u32, u32)> = seen.iter().map(|notice| (notice.attempt, notice.of)).collect();
        assert_eq!(counted, [(2, 4), (3, 4)]);
        assert!(seen[0].reason.contains("503") && !seen[0].reason.contains('\n'), "{:?}", seen[0].reason);
        assert!(seen[1].delay > seen[0].delay.mul_f64(1.2), "the backoff grows: {seen:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn persistent_server_errors_fail_with_the_status_after_every_retry() {
        let script = (0..4).map(|_| with_retry_after(500, "0")).chain([ok(text_answer("too late"))]).collect();
        let server = FakeEndpoint::start_with_clock(script).await;
        let call = Call::new();
        let result = adapter(config(&server.base_url)).call(call.request()).await;
        assert!(
            matches!(&result, Err(ModelError::Status { status: 500, body }) if body.contains("slow down")),
            "{result:?}"
        );
        assert_eq!(server.requests().len(), 4, "one attempt and max_retries = 3 retries");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_error_fails_at_once_with_a_short_excerpt() {
        let long = format!("{{\"error\":{{\"message\":\"{}\"}}}}", "bad request ".repeat(100));
        let server = FakeEndpoint::start_with_clock(vec![status(400, &long), ok(text_answer("never"))]).await;
        let call = Call::new();
        let result = adapter(config(&server.base_url)).call(call.request()).await;
        match &result {
            Err(ModelError::Status { status: 400, body }) => {
                assert!(body.chars().count() <= 500, "{} chars", body.chars().count());
                assert!(body.starts_with("{\"error\""), "{body}");
            }
            other => panic!("expected a 400, got {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "a 400 is not retried");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_times_out_within_the_request_timeout() {
        let server = FakeEndpoint::start_with_clock(vec![Reply::Hang]).await;
        let mut settings = config(&server.base_url);
        settings.request_timeout = Duration::from_millis(200);
        settings.max_retries = 0;
        let call = Call::new();
        let started = tokio::time::Instant::now();
        let result = adapter(settings).call(call.request()).await;
        let elapsed = started.elapsed();
        assert!(matches!(result, Err(ModelError::Timeout(limit)) if limit == Duration::from_millis(200)), "{result:?}");
        let limit = Duration::from_millis(200);
        assert!(elapsed >= limit && elapsed <= limit + TIMER_TICK, "took {elapsed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn timed_out_attempts_are_retried() {
        let server = FakeEndpoint::start_with_clock(vec![Reply::Hang, Reply::Hang]).await;
        let mut settings = config(&server.base_url);
        settings.request_timeout = Duration::from_millis(200);
        settings.max_retries = 1;
        let call = Call::new();
        let started = tokio::time::Instant::now();
        let result = adapter(settings).call(call.request()).await;
        let elapsed = started.elapsed();
        assert!(matches!(result, Err(ModelError::Timeout(_))), "{result:?}");
        assert_eq!(server.requests().len(), 2);
        // Two attempts of 200 ms each, with the first backoff between them.
        let attempts = Duration::from_millis(400);
        assert!(elapsed >= attempts + BACKOFF_BASE && elapsed < attempts + 2 * BACKOFF_BASE, "took {elapsed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_states_budget_bounds_the_whole_call_when_shorter() {
        let server = FakeEndpoint::start_with_clock(vec![Reply::Hang, Reply::Hang, Reply::Hang, Reply::Hang]).await;
        let mut call = Call::new();
        let budget = Duration::from_millis(200);
        call.timeout = Some(budget);
        let started = tokio::time::Instant::now();
        let result = adapter(config(&server.base_url)).call(call.request()).await;
        let elapsed = started.elapsed();
        assert!(matches!(result, Err(ModelError::Timeout(limit)) if limit == budget), "{result:?}");
        // Cut at the budget, not at the 5 s request timeout.
        assert!(elapsed <= budget + TIMER_TICK, "took {elapsed:?}");
        assert_eq!(server.requests().len(), 1, "no retry starts past the budget");
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        drop(listener);
        let mut settings = config(&format!("http://{address}/v1"));
        settings.max_retries = 0;
        let call = Call::new();
        let result = adapter(settings).call(call.request()).await;
        assert!(matches!(result, Err(ModelError::Transport(_))), "{result:?}");
    }

    #[test]
    fn backoff_doubles_from_half_a_second_caps_at_eight_and_honours_retry_after() {
        assert_eq!(backoff_delay(0, None, 0.0), Duration::from_millis(500));
        assert_eq!(backoff_delay(1, None, 0.0), Duration::from_millis(1000));
        assert_eq!(backoff_delay(3, None, 0.0), Duration::from_secs(4));
        assert_eq!(backoff_delay(4, None, 0.0), Duration::from_secs(8));
        assert_eq!(backoff_delay(40, None, 0.0), Duration::from_secs(8));
        assert_eq!(
            backoff_delay(0, None, 0.999_999),
            Duration::from_millis(500) + Duration::from_millis(500).mul_f64(0.999_999 / 4.0)
        );
        assert_eq!(backoff_delay(2, Some(Duration::from_secs(3)), 0.5), Duration::from_secs(3));
        assert_eq!(backoff_delay(2, Some(Duration::from_secs(300)), 0.5), Duration::from_secs(30));
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        let spread = jitter();
        assert!((0.0..1.0).contains(&spread), "{spread}");
    }

    // -- configuration ------------------------------------------------------------------

    #[test]
    fn missing_required_variables_are_all_named() {
        match OpenAiConfig::from_env(env(&[("ARCHMAX_MODEL", "gpt-4o"), ("ARCHMAX_API_KEY", "   ")])) {
            Err(ModelError::Configuration(message)) => {
                assert!(message.contains("ARCHMAX_API_BASE_URL"), "{message}");
                assert!(message.contains("ARCHMAX_API_KEY"), "{message}");
                assert!(message.contains("set it"), "{message}");
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
        match OpenAiConfig::from_env(env(&[("ARCHMAX_API_BASE_URL", "http://localhost:8000/v1")])) {
            Err(ModelError::Configuration(message)) => {
                assert!(message.contains("ARCHMAX_API_KEY") && !message.contains("ARCHMAX_API_BASE_URL"), "{message}");
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn malformed_variables_are_named() {
        let base = [("ARCHMAX_API_BASE_URL", "http://localhost:8000/v1"), ("ARCHMAX_API_KEY", "k")];
        for (name, value) in [
            ("ARCHMAX_TEMPERATURE", "warm"),
            ("ARCHMAX_TEMPERATURE", "-1"),
            ("ARCHMAX_MAX_TOKENS", "1.5"),
            ("ARCHMAX_MAX_TOKENS", "0"),
            ("ARCHMAX_REQUEST_TIMEOUT_MS", "2m"),
            ("ARCHMAX_MAX_RETRIES", "-3"),
            ("ARCHMAX_PRICE_INPUT", "$3"),
            ("ARCHMAX_API_BASE_URL", "localhost:8000"),
            ("ARCHMAX_API_BASE_URL", "ftp://example.com/v1"),
        ] {
            let mut pairs = base.to_vec();
            pairs.retain(|(key, _)| *key != name);
            pairs.push((name, value));
            if name == "ARCHMAX_PRICE_INPUT" {
                pairs.push(("ARCHMAX_PRICE_OUTPUT", "15"));
            }
            match OpenAiConfig::from_env(env(&pairs)) {
                Err(ModelError::Configuration(message)) => assert!(message.contains(name), "{name}: {message}"),
                other => panic!("expected a configuration error for {name}={value}, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_environment_fills_every_field_and_defaults_the_rest() {
        let minimal = OpenAiConfig::from_env(env(&[
            ("ARCHMAX_API_BASE_URL", "https://api.example.com/v1/"),
            ("ARCHMAX_API_KEY", "sk-1"),
        ]));
        let Ok(minimal) = minimal else { panic!("unexpected {minimal:?}") };
        assert_eq!(minimal.default_model, None);
        assert_eq!(minimal.request_timeout, Duration::from_millis(120_000));
        assert_eq!(minimal.max_retries, 3);
        assert_eq!((minimal.temperature, minimal.max_tokens), (None, None));
        assert_eq!(minimal.pricing, PricingTable::default());
        assert!(!format!("{minimal:?}").contains("sk-1"), "the key is redacted");

        let full = OpenAiConfig::from_env(env(&[
            ("ARCHMAX_API_BASE_URL", "http://localhost:11434/v1"),
            ("ARCHMAX_API_KEY", "ollama"),
            ("ARCHMAX_MODEL", "qwen3:8b"),
            ("ARCHMAX_TEMPERATURE", "0.7"),
            ("ARCHMAX_MAX_TOKENS", "2048"),
            ("ARCHMAX_REQUEST_TIMEOUT_MS", "30000"),
            ("ARCHMAX_MAX_RETRIES", "0"),
            ("ARCHMAX_PRICE_INPUT", "3"),
            ("ARCHMAX_PRICE_OUTPUT", "15"),
            ("ARCHMAX_PRICE_CACHE_READ", "0.3"),
        ]));
        let Ok(full) = full else { panic!("unexpected {full:?}") };
        assert_eq!(full.default_model.as_deref(), Some("qwen3:8b"));
        assert_eq!(full.temperature, Some(0.7));
        assert_eq!(full.max_tokens, Some(2048));
        assert_eq!(full.request_timeout, Duration::from_secs(30));
        assert_eq!(full.max_retries, 0);
        assert_eq!(full.pricing.default, Some(Rates { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.0 }));
    }

    #[test]
    fn prompt_caching_follows_the_workflow_then_the_environment_then_the_default() {
        let base = [("ARCHMAX_API_BASE_URL", "https://api.example.com/v1"), ("ARCHMAX_API_KEY", "sk-1")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let pairs: Vec<(&str, &str)> = base.iter().chain(extra).copied().collect();
            OpenAiConfig::from_env(env(&pairs))
        };
        let Ok(default) = with(&[]) else { panic!("the default config") };
        assert_eq!((default.prompt_cache, default.prompt_cache_ttl), (true, "5m"));
        let Ok(off) = with(&[("ARCHMAX_PROMPT_CACHE", "0"), ("ARCHMAX_PROMPT_CACHE_TTL", "1h")]) else {
            panic!("caching off")
        };
        assert_eq!((off.prompt_cache, off.prompt_cache_ttl), (false, "1h"));
        for (name, value) in [("ARCHMAX_PROMPT_CACHE", "maybe"), ("ARCHMAX_PROMPT_CACHE_TTL", "10m")] {
            match with(&[(name, value)]) {
                Err(ModelError::Configuration(message)) => {
                    assert!(message.contains(name) && message.contains(value), "{message}")
                }
                other => panic!("{name}={value} is refused, got {other:?}"),
            }
        }
        // What a call leaves unset comes from the host; what the workflow sets wins.
        let marker = |config: &OpenAiConfig, cache: crate::model::PromptCache<'static>| {
            let mut call = Call::new();
            call.prompt_cache = cache;
            let request = call.request();
            let content = system_content(config, &request, "claude-sonnet-4");
            content.and_then(|content| content[0]["cache_control"]["ttl"].as_str().map(str::to_string))
        };
        let unset = crate::model::PromptCache::default();
        assert_eq!(marker(&default, unset).as_deref(), Some("5m"));
        assert_eq!(marker(&off, unset), None, "ARCHMAX_PROMPT_CACHE=0 removes every marker");
        let declared = crate::model::PromptCache { enabled: Some(true), ttl: None };
        assert_eq!(marker(&off, declared).as_deref(), Some("1h"), "the workflow turns it on, the host's TTL stays");
        let hour = crate::model::PromptCache { enabled: None, ttl: Some("1h") };
        assert_eq!(marker(&default, hour).as_deref(), Some("1h"));
        assert_eq!(marker(&default, crate::model::PromptCache::OFF), None);
    }

    #[test]
    fn the_endpoint_is_the_base_plus_chat_completions_once() {
        for (base, expected) in [
            ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
            ("https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"),
            ("http://localhost:11434", "http://localhost:11434/chat/completions"),
            (
                "https://proxy.example.com/openai/v1/chat/completions/",
                "https://proxy.example.com/openai/v1/chat/completions",
            ),
            ("https://gw.example.com/v1?tenant=a", "https://gw.example.com/v1/chat/completions?tenant=a"),
        ] {
            let url = chat_completions_url(base).map(|url| url.to_string());
            assert_eq!(url.ok().as_deref(), Some(expected), "{base}");
        }
    }
}
