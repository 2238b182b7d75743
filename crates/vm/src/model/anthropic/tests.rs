//! The Anthropic adapter against the in-suite Messages server ([`super::test_server`]).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::test_server::{Answer, MessagesServer, Scripted};
use super::*;
use crate::model::{ModelResponse, Role, Sampling, TextSink, TokenUsage};
use crate::session::NoteKind;

fn config(base_url: &str) -> AnthropicConfig {
    AnthropicConfig {
        base_url: base_url.to_string(),
        api_key: "sk-ant-test".into(),
        default_model: Some("claude-test".into()),
        temperature: None,
        max_tokens: None,
        request_timeout: Duration::from_secs(10),
        max_retries: 2,
        prompt_cache: true,
        prompt_cache_ttl: "5m",
        streaming: true,
        headers: vec![("x-team".into(), "support".into())],
    }
}

fn adapter(config: AnthropicConfig) -> AnthropicAdapter {
    crate::model::openai::install_tls_provider();
    AnthropicAdapter::new(config).expect("adapter")
}

fn server(script: Vec<Scripted>) -> MessagesServer {
    MessagesServer::start(script).expect("a loopback server")
}

/// A conversation with a tool call, its failed result, a runtime note and a follow-up.
fn conversation() -> Vec<Message> {
    vec![
        Message::User { text: "Where is order ORD-1042?".into(), opening: None },
        Message::Assistant {
            text: "Looking it up.".into(),
            tool_calls: vec![ToolCall {
                id: "toolu_1".into(),
                name: "read_file".into(),
                args: json!({ "file_path": "orders.json" }),
            }],
        },
        Message::Note { kind: NoteKind::Decision, call_id: "note_1".into(), text: "read_file allowed".into() },
        Message::Tool {
            call_id: "toolu_1".into(),
            name: "read_file".into(),
            content: "no such file".into(),
            status: ToolStatus::Error,
        },
        Message::User { text: "Try the archive.".into(), opening: None },
    ]
}

fn tools() -> Vec<ToolDefinition> {
    let schema = json!({ "type": "object", "properties": { "file_path": { "type": "string" } } });
    vec![
        ToolDefinition { name: "read_file".into(), description: "Read a file.".into(), parameters: schema.clone() },
        ToolDefinition { name: "grep".into(), description: "Search files.".into(), parameters: schema },
    ]
}

struct Call {
    messages: Vec<Message>,
    tools: Vec<ToolDefinition>,
    variables: Value,
    prompt_cache: PromptCache<'static>,
    sampling: Sampling,
}

impl Call {
    fn new() -> Call {
        Call {
            messages: conversation(),
            tools: tools(),
            variables: json!({}),
            prompt_cache: PromptCache { enabled: Some(true), ttl: Some("1h") },
            sampling: Sampling::default(),
        }
    }

    fn request<'a>(&'a self, on_text: Option<TextSink<'a>>) -> ModelRequest<'a> {
        ModelRequest {
            model: Some("claude-sonnet-test"),
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
            timeout: None,
            sampling: self.sampling,
            tape: None,
            on_text,
        }
    }
}

/// Calls `adapter` once, collecting the text handed on.
async fn call(adapter: &AnthropicAdapter, call: &Call) -> (Result<ModelResponse, ModelError>, Vec<String>) {
    let pieces = Mutex::new(Vec::new());
    let keep =
        |text: &str, _: Option<&str>| pieces.lock().unwrap_or_else(PoisonError::into_inner).push(text.to_string());
    let answer = adapter.call(call.request(Some(TextSink(&keep)))).await;
    (answer, pieces.into_inner().unwrap_or_else(PoisonError::into_inner))
}

#[tokio::test]
async fn a_streamed_tool_use_answer_comes_together_from_a_well_formed_request() {
    let server = server(vec![Answer::tool_use(
        "Checking the archive — ",
        "toolu_2",
        "grep",
        json!({ "pattern": "ORD-1042", "path": "archive/é" }),
    )]);
    let adapter = adapter(config(&server.base_url));
    let (answer, pieces) = call(&adapter, &Call::new()).await;
    let answer = answer.expect("an answer");
    assert_eq!(pieces.concat(), "Checking the archive — ");
    assert!(pieces.len() >= 2, "the text arrives in pieces: {pieces:?}");
    assert_eq!(answer.text, "Checking the archive — ");
    assert_eq!(answer.id.as_deref(), Some("msg_test_1"));
    assert_eq!(answer.model.as_deref(), Some("claude-sonnet-test"));
    let calls: Vec<(&str, &str, &Value)> =
        answer.tool_calls.iter().map(|call| (call.id.as_str(), call.name.as_str(), &call.args)).collect();
    assert_eq!(calls, [("toolu_2", "grep", &json!({ "pattern": "ORD-1042", "path": "archive/é" }))]);
    assert!(!answer.truncated);

    let received = server.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert!(request.problems.is_empty(), "the server found {:?}", request.problems);
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(request.header("anthropic-version"), Some(ANTHROPIC_VERSION));
    assert_eq!(request.header("x-team"), Some("support"));
    assert_eq!(request.header("authorization"), None);
    let body = &request.body;
    assert_eq!(body["model"], "claude-sonnet-test");
    assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["system"],
        json!([
            { "type": "text", "text": "You are the static part.", "cache_control": { "type": "ephemeral", "ttl": "1h" } },
            { "type": "text", "text": "Current state: triage" },
        ])
    );
    // The tool definitions: the state's, then the note tool, the breakpoint on the last.
    let names: Vec<&str> =
        body["tools"].as_array().into_iter().flatten().filter_map(|tool| tool["name"].as_str()).collect();
    assert_eq!(names, ["read_file", "grep", NOTE_TOOL]);
    let marked: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tool| tool.get("cache_control").is_some())
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(marked, [NOTE_TOOL]);
    assert_eq!(body["tools"][2]["cache_control"], json!({ "type": "ephemeral", "ttl": "1h" }));
    assert_eq!(body["tool_choice"], json!({ "type": "auto" }));
    // The turns: the note waits for the tool result, which is marked as an error.
    assert_eq!(
        body["messages"],
        json!([
            { "role": "user", "content": [{ "type": "text", "text": "Where is order ORD-1042?" }] },
            { "role": "assistant", "content": [
                { "type": "text", "text": "Looking it up." },
                { "type": "tool_use", "id": "toolu_1", "name": "read_file", "input": { "file_path": "orders.json" } },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file", "is_error": true },
            ] },
            { "role": "assistant", "content": [
                { "type": "tool_use", "id": "note_1", "name": NOTE_TOOL, "input": { "kind": "decision" } },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "note_1", "content": "read_file allowed" },
                { "type": "text", "text": "Try the archive." },
            ] },
        ])
    );
}

#[tokio::test]
async fn the_usage_carries_the_cache_write_then_the_cache_read_of_the_same_prefix() {
    let server = server(vec![Answer::text("First."), Answer::text("Second.")]);
    let adapter = adapter(config(&server.base_url));
    let call_once = Call::new();
    let first = call(&adapter, &call_once).await.0.expect("first").usage;
    let second = call(&adapter, &call_once).await.0.expect("second").usage;
    assert!(first.cache_write > 0 && first.cache_read == 0, "{first:?}");
    assert!(second.cache_read == first.cache_write && second.cache_write == 0, "{second:?}");
    // `input` is the total: the server counts cached tokens apart from `input_tokens`.
    assert_eq!(first.input, second.input);
    assert!(first.input > first.cache_write);
    assert_eq!(first.output, 17);
}

#[tokio::test]
async fn a_whole_answer_reads_like_a_streamed_one() {
    let server = server(vec![Answer::tool_use("Looking.", "toolu_9", "read_file", json!({ "file_path": "a" }))]);
    let adapter = adapter(AnthropicConfig { streaming: false, ..config(&server.base_url) });
    let (answer, pieces) = call(&adapter, &Call::new()).await;
    let answer = answer.expect("an answer");
    assert!(pieces.is_empty());
    assert_eq!(answer.text, "Looking.");
    assert_eq!(answer.tool_calls[0].args, json!({ "file_path": "a" }));
    assert!(answer.usage.cache_write > 0);
    assert_eq!(server.received()[0].body["stream"], false);
}

#[tokio::test]
async fn caching_off_places_no_breakpoint_and_the_plan_says_so() {
    let server = server(vec![Answer::text("ok")]);
    let adapter = adapter(config(&server.base_url));
    let mut uncached = Call::new();
    uncached.prompt_cache = PromptCache::OFF;
    call(&adapter, &uncached).await.0.expect("an answer");
    let body = server.received()[0].body.to_string();
    assert!(!body.contains("cache_control"), "{body}");
    let off = adapter.cache_plan(None, PromptCache::OFF);
    assert_eq!((off.enabled, off.strategy), (false, "off"));
    let on = adapter.cache_plan(Some("claude-x"), PromptCache { enabled: None, ttl: None });
    assert_eq!((on.enabled, on.ttl.as_deref(), on.strategy), (true, Some("5m"), "anthropic"));
}

#[tokio::test]
async fn max_tokens_comes_from_the_calls_model_options_then_the_provider() {
    let server = server(vec![Answer::text("a"), Answer::text("b")]);
    let adapter = adapter(AnthropicConfig { max_tokens: Some(1_000), ..config(&server.base_url) });
    let mut judged = Call::new();
    judged.sampling = Sampling { temperature: Some(0.0), max_tokens: Some(300) };
    call(&adapter, &judged).await.0.expect("a");
    call(&adapter, &Call::new()).await.0.expect("b");
    let received = server.received();
    assert_eq!(
        (received[0].body["max_tokens"].clone(), received[0].body["temperature"].clone()),
        (json!(300), json!(0.0))
    );
    assert_eq!(received[1].body["max_tokens"], 1_000);
}

#[tokio::test]
async fn stop_reasons_map_to_a_truncated_answer_or_a_refusal() {
    let server = server(vec![
        Answer::stopped("The refund is appr", "max_tokens"),
        Answer::stopped("I can't help with", "refusal"),
        Answer::stopped("", "refusal"),
    ]);
    let adapter = adapter(config(&server.base_url));
    let truncated = call(&adapter, &Call::new()).await.0.expect("an answer");
    assert!(truncated.truncated);
    assert_eq!(truncated.text, "The refund is appr");
    match call(&adapter, &Call::new()).await.0 {
        Err(ModelError::Refused(said)) => assert!(said.contains("I can't help with"), "{said}"),
        other => panic!("a refusal, got {other:?}"),
    }
    match call(&adapter, &Call::new()).await.0 {
        Err(error @ ModelError::Refused(_)) => assert_eq!(error.to_string(), "the model declined to answer"),
        other => panic!("a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_error_mid_stream_is_retried_before_any_text_and_fails_the_call_after_some() {
    let server = server(vec![
        Scripted::ErrorMidStream { text: String::new(), error_type: "overloaded_error".into() },
        Answer::text("Recovered."),
        Scripted::ErrorMidStream { text: "Half an ans".into(), error_type: "overloaded_error".into() },
    ]);
    let adapter = adapter(config(&server.base_url));
    let (answer, pieces) = call(&adapter, &Call::new()).await;
    assert_eq!(answer.expect("the retry answers").text, "Recovered.");
    assert_eq!(pieces.concat(), "Recovered.");
    let (answer, pieces) = call(&adapter, &Call::new()).await;
    assert_eq!(pieces.concat(), "Half an ans", "what was shown stays shown");
    match answer {
        Err(ModelError::Overloaded(message)) => {
            assert!(message.contains("mid-stream (overloaded_error)"), "{message}")
        }
        other => panic!("the call fails after text, got {other:?}"),
    }
    assert_eq!(server.received().len(), 3, "no retry after text was shown");
}

#[tokio::test]
async fn a_stream_cut_after_text_fails_and_an_invalid_request_error_is_not_retried() {
    let server = server(vec![
        Scripted::CutMidStream { text: "Cut he".into() },
        Scripted::ErrorMidStream { text: String::new(), error_type: "invalid_request_error".into() },
        Scripted::Status { status: 400, error_type: "invalid_request_error".into(), retry_after: None },
    ]);
    let adapter = adapter(config(&server.base_url));
    match call(&adapter, &Call::new()).await.0 {
        Err(ModelError::Transport(message)) => assert!(message.contains("cut before its end"), "{message}"),
        other => panic!("a cut stream, got {other:?}"),
    }
    assert!(matches!(call(&adapter, &Call::new()).await.0, Err(ModelError::Response(_))));
    match call(&adapter, &Call::new()).await.0 {
        Err(ModelError::Status { status: 400, body }) => assert!(body.contains("invalid_request_error"), "{body}"),
        other => panic!("a refused request, got {other:?}"),
    }
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_429_and_an_overload_are_retried_after_the_servers_retry_after() {
    let server = server(vec![
        // Retry-After: 0 rather than a real wait: without it the backoff would wait 500 ms or more.
        Scripted::Status { status: 429, error_type: "rate_limit_error".into(), retry_after: Some(0) },
        Scripted::Status { status: 529, error_type: "overloaded_error".into(), retry_after: Some(0) },
        Answer::text("Third time."),
    ]);
    let notices = std::sync::Arc::new(Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&notices);
    let observer: RetryObserver = std::sync::Arc::new(move |notice: &crate::model::openai::RetryNotice| {
        seen.lock().unwrap_or_else(PoisonError::into_inner).push((notice.attempt, notice.delay, notice.reason.clone()));
    });
    let adapter = adapter(config(&server.base_url)).on_retry(observer);
    let answer = call(&adapter, &Call::new()).await.0.expect("the third attempt answers");
    assert_eq!(answer.text, "Third time.");
    let notices = notices.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let waits: Vec<(u32, Duration)> = notices.iter().map(|(attempt, delay, _)| (*attempt, *delay)).collect();
    assert_eq!(waits, [(2, Duration::ZERO), (3, Duration::ZERO)], "each Retry-After is the wait");
    assert!(notices[0].2.contains("429") && notices[1].2.contains("529"), "{notices:?}");
    assert_eq!(server.received().len(), 3);
    assert!(server.received().iter().all(|request| request.problems.is_empty()));
}

#[test]
fn a_usage_in_anthropic_shape_comes_out_with_the_total_input() {
    let usage = json!({ "input_tokens": 30, "output_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 900 });
    assert_eq!(parse_usage(Some(&usage)), TokenUsage { input: 1_030, output: 5, cache_read: 900, cache_write: 100 });
}

#[test]
fn the_base_url_takes_the_messages_path_once() {
    crate::model::openai::install_tls_provider();
    for base in [
        "https://api.anthropic.com",
        "https://api.anthropic.com/",
        "https://proxy.test/anthropic/v1",
        "https://proxy.test/v1/messages",
    ] {
        let adapter = AnthropicAdapter::new(config(base)).expect("adapter");
        assert!(adapter.endpoint().path().ends_with("/v1/messages"), "{base}: {}", adapter.endpoint());
        assert_eq!(adapter.endpoint().path().matches("/v1").count(), 1, "{base}");
    }
    assert!(AnthropicAdapter::new(config("ftp://x")).is_err());
}
