//! The per-call cost of the two HTTP adapters, side by side: one agent call of a
//! 40-message conversation over 12 tools, answered on loopback with the same streamed
//! answer (two pieces of text and one tool call with its input in three fragments), in
//! chat-completions form for the OpenAI adapter and in Messages form for the Anthropic
//! adapter. Both servers write a canned answer and do no work of their own, so what
//! differs is the adapters' work: building and encoding the request, reading the events.
//! Run with `cargo bench -p archmax-vm --bench adapters`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

use archmax_vm::model::anthropic::{AnthropicAdapter, AnthropicConfig};
use archmax_vm::model::openai::{OpenAiAdapter, OpenAiConfig};
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelRequest, PromptCache, Role, Sampling, ToolDefinition};
use archmax_vm::session::{Message, ToolCall, ToolStatus};

/// A server that answers every request with `head` and `body`, one connection each.
fn canned(head: &'static str, body: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || answer(stream, head, &body));
        }
    });
    format!("http://{address}")
}

/// Reads one request (to the end of its body) and writes the answer.
fn answer(mut stream: TcpStream, head: &str, body: &str) {
    let mut read = Vec::new();
    let mut chunk = [0u8; 65_536];
    loop {
        let Ok(count) = stream.read(&mut chunk) else { return };
        if count == 0 {
            return;
        }
        read.extend_from_slice(&chunk[..count]);
        let text = String::from_utf8_lossy(&read);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().to_string())
                })
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            if read.len() >= end + 4 + length {
                break;
            }
        }
    }
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

fn chat_stream() -> String {
    let chunks = [
        json!({ "id": "c1", "model": "m", "choices": [{ "index": 0, "delta": { "content": "Looking the order " } }] }),
        json!({ "choices": [{ "index": 0, "delta": { "content": "up now." } }] }),
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "id": "call_1", "type": "function", "function": { "name": "read_file", "arguments": "{\"file_" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "function": { "arguments": "path\": \"orders/" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "function": { "arguments": "ORD-1042.json\"}" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }),
        json!({ "choices": [], "usage": { "prompt_tokens": 5000, "completion_tokens": 40, "prompt_tokens_details": { "cached_tokens": 4000 } } }),
    ];
    let mut out: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

fn messages_stream() -> String {
    let events = [
        (
            "message_start",
            json!({ "type": "message_start", "message": { "id": "msg_1", "model": "m", "usage": { "input_tokens": 1000, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 0, "output_tokens": 1 } } }),
        ),
        ("ping", json!({ "type": "ping" })),
        (
            "content_block_start",
            json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "Looking the order " } }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "up now." } }),
        ),
        ("content_block_stop", json!({ "type": "content_block_stop", "index": 0 })),
        (
            "content_block_start",
            json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {} } }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "{\"file_" } }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "path\": \"orders/" } }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "ORD-1042.json\"}" } }),
        ),
        ("content_block_stop", json!({ "type": "content_block_stop", "index": 1 })),
        (
            "message_delta",
            json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" }, "usage": { "output_tokens": 40 } }),
        ),
        ("message_stop", json!({ "type": "message_stop" })),
    ];
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

/// A 40-message conversation: questions, answers with tool calls, their results.
fn conversation() -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 0..10 {
        messages.push(Message::User { text: format!("Where is order ORD-{}?", 1000 + turn), opening: None });
        let id = format!("call_{turn}");
        messages.push(Message::Assistant {
            text: "Looking it up.".into(),
            tool_calls: vec![ToolCall {
                id: id.clone(),
                name: "read_file".into(),
                args: json!({ "file_path": format!("orders/ORD-{}.json", 1000 + turn) }),
            }],
        });
        messages.push(Message::Tool {
            call_id: id,
            name: "read_file".into(),
            content: "{\"status\":\"shipped\"}".repeat(20),
            status: ToolStatus::Ok,
        });
        messages.push(Message::Assistant {
            text: "It shipped on Monday and should arrive this week.".into(),
            tool_calls: Vec::new(),
        });
    }
    messages
}

fn tools() -> Vec<ToolDefinition> {
    (0..12)
        .map(|index| ToolDefinition {
            name: format!("tool_{index}"),
            description: "Does one thing to one file of the workspace.".into(),
            parameters: json!({ "type": "object", "properties": { "file_path": { "type": "string" } }, "required": ["file_path"] }),
        })
        .collect()
}

fn adapters(criterion: &mut Criterion) {
    archmax_vm::model::openai::install_tls_provider();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let openai = OpenAiAdapter::new(OpenAiConfig {
        base_url: format!("{}/v1", canned(STREAM_HEAD, chat_stream())),
        api_key: "sk-bench".into(),
        default_model: None,
        temperature: None,
        max_tokens: None,
        request_timeout: Duration::from_secs(10),
        max_retries: 0,
        pricing: PricingTable::default(),
        prompt_cache: true,
        prompt_cache_ttl: "5m",
        streaming: true,
        flavor: Default::default(),
        headers: Vec::new(),
    })
    .expect("openai adapter");
    let anthropic = AnthropicAdapter::new(AnthropicConfig {
        base_url: canned(STREAM_HEAD, messages_stream()),
        api_key: "sk-ant-bench".into(),
        default_model: None,
        temperature: None,
        max_tokens: None,
        request_timeout: Duration::from_secs(10),
        max_retries: 0,
        prompt_cache: true,
        prompt_cache_ttl: "5m",
        streaming: true,
        headers: Vec::new(),
    })
    .expect("anthropic adapter");
    let (messages, tools, variables) = (conversation(), tools(), Value::Object(Default::default()));
    let static_block = "You are the desk's order assistant. ".repeat(200);
    let request = |model: &'static str| ModelRequest {
        model: Some(model),
        role: Role::Agent,
        session: "s1",
        workflow: "desk",
        state: "answer",
        variables: &variables,
        system_static: &static_block,
        system_volatile: "Current state: answer",
        messages: &messages,
        history: messages.len(),
        tools: &tools,
        prompt_cache: PromptCache::default(),
        timeout: None,
        sampling: Sampling::default(),
        tape: None,
        on_text: None,
    };
    let mut group = criterion.benchmark_group("adapter_call");
    group.measurement_time(Duration::from_secs(8));
    let adapters: [(&str, &dyn ModelAdapter, &'static str); 2] =
        [("openai", &openai, "gpt-4.1"), ("anthropic", &anthropic, "claude-sonnet-4-5")];
    for (name, adapter, model) in adapters {
        group.bench_function(name, |bencher| {
            bencher.iter(|| {
                let answer = runtime.block_on(adapter.call(request(model))).expect("an answer");
                assert_eq!(answer.tool_calls.len(), 1);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, adapters);
criterion_main!(benches);
