//! The native Anthropic Messages adapter.
//!
//! [`AnthropicAdapter`] turns a [`ModelRequest`] into one `POST {base}/v1/messages` (an
//! `x-api-key` and an `anthropic-version` header) and the answer's content blocks into a
//! [`ModelResponse`]: text blocks become the text, `tool_use` blocks the tool calls. It
//! streams by default (`stream` reads the Messages events) and shares with the OpenAI
//! adapter everything about getting an answer: bounds, retries, the partial-answer rule
//! (`super::http`).
//!
//! The one thing to know: the Messages API wants strictly alternating user and assistant
//! turns, and tool results are user content. The transcript is therefore built as blocks
//! and a message of the same role as the last one is merged into it; runtime notes are
//! sent as a synthetic `archmax_note` `tool_use` and its `tool_result`, held back (as in
//! the OpenAI adapter) until the tool calls before them are all answered.
//!
//! Prompt caching is placed, not approximated: with caching on, the last tool definition
//! and the static system block (the compiler's precomputed prefix: platform prompt, workflow
//! and state instructions) each carry a `cache_control` breakpoint with the workflow's TTL,
//! and the note tool is declared from the first call on, so a session's first note does
//! not move the prefix.

pub(crate) mod stream;
#[cfg(any(test, feature = "test-support"))]
pub mod test_server;

use std::fmt;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::http::{self, Endpoint, Wire};
use super::openai::{NOTE_TOOL, RetryObserver, error_text, excerpt, parse_usage};
use super::{
    CachePlan, ModelAdapter, ModelError, ModelFuture, ModelRequest, ModelResponse, PromptCache, ToolDefinition,
};
use crate::session::{Message, ToolCall, ToolStatus};

/// The API version every request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The answer's length when neither the call nor the provider sets `max_tokens`, which
/// the Messages API requires.
pub const DEFAULT_MAX_TOKENS: u64 = 8_192;

/// Everything the adapter needs to reach the Messages API.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The API root, e.g. `https://api.anthropic.com`; `/v1/messages` is appended.
    pub base_url: String,
    pub api_key: String,
    pub default_model: Option<String>,
    pub temperature: Option<f64>,
    /// Used when the call's own sampling (`modelOptions`) sets none.
    pub max_tokens: Option<u64>,
    pub request_timeout: Duration,
    pub max_retries: u32,
    /// Prompt caching where a workflow does not set it, and its TTL (`5m` or `1h`).
    pub prompt_cache: bool,
    pub prompt_cache_ttl: &'static str,
    pub streaming: bool,
    /// Sent with every request after the protocol's own headers.
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("default_model", &self.default_model)
            .field("max_tokens", &self.max_tokens)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("prompt_cache", &self.prompt_cache)
            .field("prompt_cache_ttl", &self.prompt_cache_ttl)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

/// The adapter: one configuration, one connection-pooling HTTP client.
pub struct AnthropicAdapter {
    config: AnthropicConfig,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    on_retry: Option<RetryObserver>,
}

impl fmt::Debug for AnthropicAdapter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("AnthropicAdapter")
            .field("config", &self.config)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AnthropicAdapter {
    /// Checks the configuration and builds the HTTP client (the process must have a TLS
    /// crypto provider installed, as for the OpenAI adapter).
    pub fn new(config: AnthropicConfig) -> Result<AnthropicAdapter, ModelError> {
        let mut url = super::openai::api_root(&config.base_url)?;
        let path = url.path().trim_end_matches('/').to_string();
        let path = path.strip_suffix("/v1/messages").or_else(|| path.strip_suffix("/v1")).unwrap_or(&path).to_string();
        url.set_path(&format!("{path}/v1/messages"));
        if config.request_timeout.is_zero() {
            return Err(ModelError::Configuration("the request timeout is zero".into()));
        }
        let own = [("x-api-key", config.api_key.as_str()), ("anthropic-version", ANTHROPIC_VERSION)];
        let extra = config.headers.iter().map(|(name, value)| (name.as_str(), value.as_str()));
        let headers = http::header_map(own.into_iter().chain(extra))?;
        let client = http::client()?;
        Ok(AnthropicAdapter { config, url, headers, client, on_retry: None })
    }

    /// Tells `observer` of every retry before its wait.
    pub fn on_retry(mut self, observer: RetryObserver) -> AnthropicAdapter {
        self.on_retry = Some(observer);
        self
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &Url {
        &self.url
    }

    fn resolve_model<'r>(&'r self, request: &ModelRequest<'r>) -> Result<&'r str, ModelError> {
        let declared = request.model.map(str::trim).filter(|model| !model.is_empty());
        declared.or(self.config.default_model.as_deref()).ok_or_else(|| {
            ModelError::Configuration(format!(
                "no model for the {} call in state `{}` of workflow `{}`: set settings.model",
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
        let endpoint = Endpoint {
            client: &self.client,
            url: self.url.clone(),
            headers: self.headers.clone(),
            streaming: self.config.streaming,
            wire: Wire::Messages,
            request_timeout: self.config.request_timeout,
            max_retries: self.config.max_retries,
            on_retry: self.on_retry.as_ref(),
        };
        endpoint.call(&body, request.timeout, request.on_text).await
    }
}

impl ModelAdapter for AnthropicAdapter {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(self.complete(request))
    }

    fn provider(&self, _model: Option<&str>) -> &str {
        "anthropic"
    }

    fn cache_plan(&self, _model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        let ttl = cache_ttl(&self.config, &cache);
        CachePlan {
            enabled: ttl.is_some(),
            ttl: ttl.map(str::to_string),
            strategy: if ttl.is_some() { "anthropic" } else { "off" },
        }
    }
}

/// The TTL a call caches for, or `None` when caching is off: the workflow's setting over
/// the host's.
fn cache_ttl<'a>(config: &'a AnthropicConfig, cache: &PromptCache<'a>) -> Option<&'a str> {
    cache.enabled.unwrap_or(config.prompt_cache).then(|| cache.ttl.unwrap_or(config.prompt_cache_ttl))
}

// ---------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------

/// The JSON body of a Messages call.
pub(crate) fn request_body(config: &AnthropicConfig, request: &ModelRequest<'_>, model: &str) -> Value {
    let ttl = cache_ttl(config, &request.prompt_cache);
    let breakpoint = |ttl: &str| json!({ "type": "ephemeral", "ttl": ttl });
    let (messages, has_notes) = transcript(request.messages);

    let mut tools: Vec<Value> = request.tools.iter().map(tool_definition).collect();
    // With caching on the note tool is always declared, so the first note of a session
    // does not change the cached prefix.
    if (has_notes || ttl.is_some()) && !request.tools.iter().any(|tool| tool.name == NOTE_TOOL) {
        tools.push(note_tool_definition());
    }
    if let (Some(ttl), Some(Value::Object(last))) = (ttl, tools.last_mut()) {
        last.insert("cache_control".into(), breakpoint(ttl));
    }

    let mut system = Vec::new();
    if !request.system_static.trim().is_empty() {
        let mut block = Map::new();
        block.insert("type".into(), Value::from("text"));
        block.insert("text".into(), Value::from(request.system_static));
        if let Some(ttl) = ttl {
            block.insert("cache_control".into(), breakpoint(ttl));
        }
        system.push(Value::Object(block));
    }
    if !request.system_volatile.trim().is_empty() {
        system.push(json!({ "type": "text", "text": request.system_volatile }));
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    let max_tokens = request.sampling.max_tokens.or(config.max_tokens).unwrap_or(DEFAULT_MAX_TOKENS);
    body.insert("max_tokens".into(), Value::from(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!({ "type": "auto" }));
    }
    let temperature = request.sampling.temperature.or(config.temperature);
    if let Some(temperature) = temperature.and_then(serde_json::Number::from_f64) {
        body.insert("temperature".into(), Value::Number(temperature));
    }
    body.insert("stream".into(), Value::Bool(config.streaming));
    Value::Object(body)
}

/// Messages being built: each a role and its content blocks, a block of the same role as
/// the last message joining it.
#[derive(Default)]
struct Turns {
    messages: Vec<(&'static str, Vec<Value>)>,
}

impl Turns {
    fn push(&mut self, role: &'static str, block: Value) {
        match self.messages.last_mut() {
            Some((last, blocks)) if *last == role => blocks.push(block),
            _ => self.messages.push((role, vec![block])),
        }
    }

    fn note(&mut self, note: &Message) {
        if let Message::Note { kind, call_id, text } = note {
            self.push("assistant", tool_use(call_id, NOTE_TOOL, &json!({ "kind": kind.as_str() })));
            self.push("user", json!({ "type": "tool_result", "tool_use_id": call_id, "content": text }));
        }
    }
}

/// The transcript as Messages turns, and whether it held a note.
fn transcript(messages: &[Message]) -> (Vec<Value>, bool) {
    let mut turns = Turns::default();
    let mut has_notes = false;
    let mut unanswered: Vec<&str> = Vec::new();
    let mut held: Vec<&Message> = Vec::new();
    for message in messages {
        match message {
            Message::Note { .. } => {
                has_notes = true;
                if unanswered.is_empty() {
                    turns.note(message);
                } else {
                    held.push(message);
                }
            }
            Message::Tool { call_id, content, status, .. } => {
                let mut result = json!({ "type": "tool_result", "tool_use_id": call_id, "content": content });
                if *status == ToolStatus::Error
                    && let Value::Object(result) = &mut result
                {
                    result.insert("is_error".into(), Value::Bool(true));
                }
                turns.push("user", result);
                unanswered.retain(|id| id != call_id);
                if unanswered.is_empty() {
                    held.drain(..).for_each(|note| turns.note(note));
                }
            }
            Message::User { text, .. } => {
                unanswered.clear();
                held.drain(..).for_each(|note| turns.note(note));
                if !text.is_empty() {
                    turns.push("user", json!({ "type": "text", "text": text }));
                }
            }
            Message::Assistant { text, tool_calls } => {
                unanswered.clear();
                held.drain(..).for_each(|note| turns.note(note));
                if !text.is_empty() {
                    turns.push("assistant", json!({ "type": "text", "text": text }));
                }
                for call in tool_calls {
                    turns.push("assistant", tool_use(&call.id, &call.name, &call.args));
                }
                unanswered.extend(tool_calls.iter().map(|call| call.id.as_str()));
            }
        }
    }
    held.drain(..).for_each(|note| turns.note(note));
    let messages =
        turns.messages.into_iter().map(|(role, content)| json!({ "role": role, "content": content })).collect();
    (messages, has_notes)
}

fn tool_use(id: &str, name: &str, args: &Value) -> Value {
    let input = if args.is_object() { args.clone() } else { json!({}) };
    json!({ "type": "tool_use", "id": id, "name": name, "input": input })
}

fn tool_definition(tool: &ToolDefinition) -> Value {
    json!({ "name": tool.name, "description": tool.description, "input_schema": tool.parameters })
}

fn note_tool_definition() -> Value {
    json!({
        "name": NOTE_TOOL,
        "description": "Runtime notes written by the archmax runtime (decisions, events, errors and the \
                        like), shown in the conversation as calls to this tool and their results. \
                        They are information for you, not an action: never call this tool.",
        "input_schema": {
            "type": "object",
            "properties": { "kind": { "type": "string", "description": "What the note is about." } },
            "required": ["kind"],
        },
    })
}

// ---------------------------------------------------------------------------------------
// The answer
// ---------------------------------------------------------------------------------------

/// How a `stop_reason` ends an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `end_turn`, `stop_sequence`, `tool_use`, `pause_turn`, or none given.
    Whole,
    /// `max_tokens`: the text is not the whole message.
    Truncated,
    /// `refusal`: the model declined.
    Refused,
}

impl Stop {
    pub(crate) fn from_reason(reason: Option<&str>) -> Stop {
        match reason {
            Some("max_tokens" | "model_context_window_exceeded") => Stop::Truncated,
            Some("refusal") => Stop::Refused,
            _ => Stop::Whole,
        }
    }
}

/// The answer as the runtime takes it, once its parts are known: a refusal is an error
/// the turn fails with (naming what text had come), anything else an answer.
pub(crate) fn answer(
    text: String,
    tool_calls: Vec<ToolCall>,
    usage: Option<&Value>,
    (id, model): (Option<String>, Option<String>),
    stop: Stop,
) -> Result<ModelResponse, ModelError> {
    if stop == Stop::Refused {
        let said = if text.trim().is_empty() { String::new() } else { format!(": {}", excerpt(text.as_bytes())) };
        return Err(ModelError::Refused(said));
    }
    Ok(ModelResponse {
        text,
        tool_calls,
        usage: parse_usage(usage),
        model,
        id,
        truncated: stop == Stop::Truncated,
        ..ModelResponse::default()
    })
}

/// One `tool_use` block as a call; input that is not an object is kept as `{ "_raw": … }`.
pub(crate) fn tool_call(index: usize, id: &str, name: &str, input: Value) -> Result<ToolCall, ModelError> {
    if name.is_empty() {
        return Err(ModelError::Response(format!("tool_use block {index} has no name")));
    }
    let id = if id.is_empty() { format!("toolu_{index}") } else { id.to_string() };
    let args = match input {
        Value::Object(_) => input,
        Value::Null => json!({}),
        other => json!({ "_raw": other.to_string() }),
    };
    Ok(ToolCall { id, name: name.to_string(), args })
}

/// Reads a whole Messages answer.
pub(crate) fn parse_message(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let body: Value = serde_json::from_slice(bytes)
        .map_err(|error| ModelError::Response(format!("the answer is not JSON ({error}): {}", excerpt(bytes))))?;
    if body.get("type").and_then(Value::as_str) == Some("error") {
        let error = body.get("error").unwrap_or(&Value::Null);
        return Err(ModelError::Response(format!("the endpoint reported an error: {}", error_text(error))));
    }
    let Some(blocks) = body.get("content").and_then(Value::as_array) else {
        return Err(ModelError::Response(format!("the answer has no content: {}", excerpt(bytes))));
    };
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => text.push_str(field("text")),
            "tool_use" => tool_calls.push(tool_call(
                index,
                field("id"),
                field("name"),
                block.get("input").cloned().unwrap_or(Value::Null),
            )?),
            _ => {}
        }
    }
    let named = |key: &str| body.get(key).and_then(Value::as_str).filter(|value| !value.is_empty()).map(str::to_string);
    let stop = Stop::from_reason(body.get("stop_reason").and_then(Value::as_str));
    answer(text, tool_calls, body.get("usage"), (named("id"), named("model")), stop)
}

#[cfg(test)]
mod tests;
