//! Model adapters: the one seam between the turn loop and a language model.
//!
//! The interpreter builds a [`ModelRequest`] (system prompt in two blocks, the
//! transcript, the state's tool schemas) and an adapter answers with a
//! [`ModelResponse`] (text, tool calls, usage). [`openai`] speaks the OpenAI-compatible
//! chat-completions protocol over `reqwest` (any vLLM, Ollama, LiteLLM, OpenRouter or
//! OpenAI endpoint, and Azure OpenAI's deployments); [`anthropic`] speaks Anthropic's
//! Messages API; both get their answers through `http` (attempts, bounds, retries).
//! [`router`] sends each model id to the provider `archmax.toml` routes it to; [`tape`]
//! replays scripted turns from a YAML file, which makes every run reproducible offline.
//!
//! Dependencies point one way: this module uses `session`'s messages, tool calls and
//! [`TapeReading`]; `session` uses nothing of it.

pub mod anthropic;
#[cfg(test)]
pub(crate) mod fake_endpoint;
pub(crate) mod http;
/// The retry timing every HTTP caller of the runtime and its hosts shares: exponential
/// backoff with jitter, and a numeric `Retry-After`.
pub use http::{backoff_delay, jitter, parse_retry_after};
pub mod limited;
pub(crate) mod list_prices;
pub mod openai;
pub mod pricing;
#[cfg(feature = "frontend")]
pub mod record;
pub mod router;
pub(crate) mod stream;
#[cfg(feature = "frontend")]
pub mod tape;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::session::Message;
/// The tape reading is session state (it is kept in the durable head), so it is defined
/// in `session`: this module depends on `session`, never the other way round.
pub use crate::session::TapeReading;

/// Who a model call is for, which decides how its model is resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Agent,
    Grader,
    Judge,
    /// The call that summarizes the older part of a long conversation (compaction).
    Summarizer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Grader => "grader",
            Role::Judge => "judge",
            Role::Summarizer => "summarizer",
        }
    }
}

/// A tool as the model is shown it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// Sampling options one call asks for, over the adapter's own defaults (a case's judge
/// names them in `tests.judge.modelOptions`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
}

/// One model call.
#[derive(Clone, Debug)]
pub struct ModelRequest<'a> {
    /// The declared model id (state, then `settings.model`); `None` defers to the adapter.
    pub model: Option<&'a str>,
    pub role: Role,
    /// The calling session's id (a child's is `<root>~<n>`): a tape keeps one reading
    /// position per root session.
    pub session: &'a str,
    /// What the call is about, for tape matchers and error messages.
    pub workflow: &'a str,
    pub state: &'a str,
    pub variables: &'a Value,
    /// The cacheable system prefix and the per-call volatile block.
    pub system_static: &'a str,
    pub system_volatile: &'a str,
    pub messages: &'a [Message],
    /// How many messages the conversation holds before this call: `messages.len()`
    /// until the conversation is compacted, more after (the model is shown fewer). A
    /// tape numbers its generated call ids by it, so they stay unique in the session.
    pub history: usize,
    pub tools: &'a [ToolDefinition],
    /// Provider prompt caching as the workflow declares it; what it leaves unset the
    /// adapter decides (`ARCHMAX_PROMPT_CACHE`, `ARCHMAX_PROMPT_CACHE_TTL`).
    pub prompt_cache: PromptCache<'a>,
    pub timeout: Option<Duration>,
    /// Sampling options for this call; what it leaves unset the adapter decides.
    pub sampling: Sampling,
    /// How far the session read a tape in an earlier process, if it did: a tape that
    /// has not seen the session yet continues from there (when it is the same tape).
    pub tape: Option<&'a TapeReading>,
    /// Where each piece of the answer's text goes as it arrives (a streaming adapter, a
    /// tape's `chunks`); `None` when nobody watches the text (graders, judges).
    pub on_text: Option<TextSink<'a>>,
}

/// What a model call is about, the same for every role: the model asked for, the session,
/// workflow and state, the variables, the workflow's prompt caching and the session's
/// tape reading. The role constructors of [`ModelRequest`] add what each role differs in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallSubject<'a> {
    /// The declared model id; `None` defers to the adapter.
    pub model: Option<&'a str>,
    pub session: &'a str,
    pub workflow: &'a str,
    pub state: &'a str,
    pub variables: &'a Value,
    pub prompt_cache: PromptCache<'a>,
    /// `None` for a call a tape must not continue from the session's reading (a judge).
    pub tape: Option<&'a TapeReading>,
}

/// The system prompt of a call, in its two blocks: the cacheable prefix and the per-call
/// volatile block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SystemPrompt<'a> {
    pub fixed: &'a str,
    pub volatile: &'a str,
}

impl<'a> ModelRequest<'a> {
    /// The request every role starts from: no tools, no timeout, the adapter's sampling,
    /// nobody watching the text; `history` is the transcript's own length.
    fn base(role: Role, subject: CallSubject<'a>, system: SystemPrompt<'a>, messages: &'a [Message]) -> Self {
        ModelRequest {
            model: subject.model,
            role,
            session: subject.session,
            workflow: subject.workflow,
            state: subject.state,
            variables: subject.variables,
            system_static: system.fixed,
            system_volatile: system.volatile,
            messages,
            history: messages.len(),
            tools: &[],
            prompt_cache: subject.prompt_cache,
            timeout: None,
            sampling: Sampling::default(),
            tape: subject.tape,
            on_text: None,
        }
    }

    /// The agent's call in its state: the conversation as the model is shown it
    /// (`history` counts the whole conversation, compacted or not), the state's surface,
    /// the state's time budget; its text goes to `on_text` as it arrives.
    pub(crate) fn for_agent(
        subject: CallSubject<'a>,
        system: SystemPrompt<'a>,
        conversation: (&'a [Message], usize),
        tools: &'a [ToolDefinition],
        timeout: Option<Duration>,
        on_text: TextSink<'a>,
    ) -> Self {
        let (messages, history) = conversation;
        ModelRequest {
            history,
            tools,
            timeout,
            on_text: Some(on_text),
            ..ModelRequest::base(Role::Agent, subject, system, messages)
        }
    }

    /// A grader state's call: its own transcript (the task and its answers so far) over
    /// the grader's surface, with no time budget and nobody watching its text.
    pub(crate) fn for_grader(
        subject: CallSubject<'a>,
        system: SystemPrompt<'a>,
        transcript: &'a [Message],
        tools: &'a [ToolDefinition],
    ) -> Self {
        ModelRequest { tools, ..ModelRequest::base(Role::Grader, subject, system, transcript) }
    }

    /// The summarizer's call when a conversation is compacted: one task, no tools, an
    /// answer of at most `max_tokens`, within the state's time budget.
    pub(crate) fn for_summarizer(
        subject: CallSubject<'a>,
        instructions: &'a str,
        task: &'a [Message],
        max_tokens: u64,
        timeout: Option<Duration>,
    ) -> Self {
        let system = SystemPrompt { fixed: instructions, volatile: "" };
        ModelRequest {
            timeout,
            sampling: Sampling { temperature: None, max_tokens: Some(max_tokens) },
            ..ModelRequest::base(Role::Summarizer, subject, system, task)
        }
    }

    /// A case judge's call: one criterion over a finished session's record, no tools,
    /// the judge's own sampling.
    #[cfg(feature = "frontend")]
    pub(crate) fn for_judge(
        subject: CallSubject<'a>,
        instructions: &'a str,
        messages: &'a [Message],
        sampling: Sampling,
    ) -> Self {
        let system = SystemPrompt { fixed: instructions, volatile: "" };
        ModelRequest { sampling, ..ModelRequest::base(Role::Judge, subject, system, messages) }
    }
}

/// Receives an answer's text piece by piece, with the answer's id once it is known.
#[derive(Clone, Copy)]
pub struct TextSink<'a>(pub &'a (dyn Fn(&str, Option<&str>) + Send + Sync));

impl TextSink<'_> {
    pub fn send(&self, text: &str, id: Option<&str>) {
        (self.0)(text, id)
    }
}

impl std::fmt::Debug for TextSink<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("TextSink")
    }
}

/// What a model answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    pub text: String,
    pub tool_calls: Vec<crate::session::ToolCall>,
    pub usage: TokenUsage,
    /// The model id the provider reported, if any.
    pub model: Option<String>,
    /// The provider's id for this answer, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The answer stopped at the output limit: its text is not the whole message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// A tape's reading after this answer (only a tape sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<TapeReading>,
    /// The models tried before the one that answered, and why each failed (a route's
    /// `fallbacks`, see [`router`]); empty when the first model answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<FailedCall>,
    /// The model id that answered when it is a fallback, not the id the call asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
}

/// One model a call was sent to that failed, before another was tried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedCall {
    /// The model id, as workflows and `archmax.toml` name it.
    pub model: String,
    /// The provider's table name (`default` for the `ARCHMAX_API_*` endpoint).
    pub provider: String,
    /// Why it failed, after its own retries.
    pub error: String,
}

/// Tokens of one call. `input` is the total, cached tokens included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("the model is not configured: {0}")]
    Configuration(String),
    #[error("the model endpoint failed: {0}")]
    Transport(String),
    #[error("the model endpoint answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the model's answer could not be read: {0}")]
    Response(String),
    #[error("the model call timed out after {0:?}")]
    Timeout(Duration),
    /// A provider's content filter refused the prompt or stopped the answer.
    #[error("{0}")]
    ContentFilter(String),
    /// The model declined to answer (Anthropic's `refusal` stop reason).
    #[error("the model declined to answer{0}")]
    Refused(String),
    /// The provider reported a passing condition mid-stream (Anthropic's overloaded,
    /// rate-limit and API errors), before or after some text.
    #[error("{0}")]
    Overloaded(String),
    /// The model a call asked for and every fallback its route lists failed, in order.
    #[error("{}", describe_exhausted(.0))]
    Exhausted(Vec<FailedCall>),
    #[error("{0}")]
    Tape(String),
}

impl ModelError {
    /// Whether another provider may well answer where this one could not: the provider
    /// was rate limited, overloaded, failing (a 5xx) or unreachable. A refusal, a bad
    /// request, an unreadable answer or a spent time budget would fail anywhere.
    pub fn calls_for_fallback(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => matches!(*status, 408 | 429 | 500..=599),
            ModelError::Transport(_) | ModelError::Overloaded(_) => true,
            _ => false,
        }
    }
}

fn describe_exhausted(failed: &[FailedCall]) -> String {
    let tried: Vec<String> =
        failed.iter().map(|call| format!("`{}` ({}): {}", call.model, call.provider, call.error)).collect();
    match failed.first() {
        Some(first) => {
            format!("the model `{}` and its fallbacks all failed; tried {}", first.model, tried.join("; then "))
        }
        None => "no model was tried".to_string(),
    }
}

/// A bare agent call in state `triage` of workflow `support` (session `s1`): nothing in
/// the conversation, no tools, every option the adapter's; for adapters' unit tests.
#[cfg(test)]
pub(crate) fn bare_request<'a>(model: Option<&'a str>, variables: &'a Value) -> ModelRequest<'a> {
    ModelRequest {
        model,
        role: Role::Agent,
        session: "s1",
        workflow: "support",
        state: "triage",
        variables,
        system_static: "",
        system_volatile: "",
        messages: &[],
        history: 0,
        tools: &[],
        prompt_cache: PromptCache::default(),
        timeout: None,
        sampling: Sampling::default(),
        tape: None,
        on_text: None,
    }
}

/// A boxed future, so adapters can be trait objects.
pub type ModelFuture<'a> = Pin<Box<dyn Future<Output = Result<ModelResponse, ModelError>> + Send + 'a>>;

/// Prompt caching for one call: each part the workflow's `settings.prompt_cache` sets,
/// or `None` for the host's default. The precedence is the workflow's setting, then the
/// host's environment (`ARCHMAX_PROMPT_CACHE`, `ARCHMAX_PROMPT_CACHE_TTL`), then on, `5m`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromptCache<'a> {
    pub enabled: Option<bool>,
    /// `5m` or `1h`.
    pub ttl: Option<&'a str>,
}

impl<'a> PromptCache<'a> {
    /// No caching, whatever the host's default.
    pub const OFF: PromptCache<'static> = PromptCache { enabled: Some(false), ttl: None };

    /// What `workflow`'s `settings.prompt_cache` declares, for every call its sessions make
    /// (the agent's, its graders', its summarizer's and its case judge's alike).
    pub fn declared(
        program: &'a archmax_program::program::Program,
        workflow: &archmax_program::program::WorkflowProgram,
    ) -> PromptCache<'a> {
        let settings = &workflow.settings;
        PromptCache { enabled: settings.prompt_cache, ttl: settings.prompt_cache_ttl.map(|ttl| program.str(ttl)) }
    }
}

/// The host's prompt caching default when a workflow sets nothing: on, for 5 minutes.
pub(crate) const DEFAULT_CACHE_TTL: &str = "5m";

/// How an adapter would mark one model's calls for provider prompt caching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachePlan {
    pub enabled: bool,
    /// The time to live asked for, when enabled.
    pub ttl: Option<String>,
    /// `anthropic`, `anthropic-compat`, `unsupported` or `off` (see [`crate::events::ModelCache`]).
    pub strategy: &'static str,
}

impl CachePlan {
    /// What an adapter that never marks anything reports: the request's setting (on,
    /// `5m` when it leaves them unset), no marker.
    pub(crate) fn unmarked(cache: PromptCache<'_>) -> CachePlan {
        let enabled = cache.enabled.unwrap_or(true);
        CachePlan {
            enabled,
            ttl: enabled.then(|| cache.ttl.unwrap_or(DEFAULT_CACHE_TTL).to_string()),
            strategy: if enabled { "unsupported" } else { "off" },
        }
    }
}

/// Anything that answers model calls.
pub trait ModelAdapter: Send + Sync {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a>;

    /// How calls to `model` (`None`: the adapter's default) would be marked for caching
    /// under `cache`. Reported once per turn in the `prompt-shaping` event.
    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        let _ = model;
        CachePlan::unmarked(cache)
    }

    /// Who serves calls to `model` (`None`: the adapter's default), as the GenAI semantic
    /// conventions name providers (`openai`, `anthropic`); the model call's span carries it.
    fn provider(&self, model: Option<&str>) -> &str {
        let _ = model;
        "unknown"
    }

    /// Entries a scripted adapter still holds at the end of a command (0 for live ones).
    fn leftover(&self) -> usize {
        0
    }

    /// What the adapter has to tell at the end of a command, if anything (a recorder:
    /// what it recorded, or why it could not write it).
    fn report(&self) -> Option<String> {
        None
    }
}
