//! A streamed chat-completions answer, read as it arrives.
//!
//! With `stream: true` an OpenAI-compatible endpoint answers with server-sent events: one
//! `data:` line per chunk, each a JSON object whose first choice carries a `delta` (a piece
//! of the text, or pieces of tool calls by `index`: the id and name once, the arguments in
//! fragments), a `finish_reason` at the end, a last chunk with the `usage`
//! (`stream_options.include_usage`), then `data: [DONE]`. The [`Assembler`] is fed the
//! bytes as they come, hands each piece of text on at once, and puts the whole answer
//! together at the end, exactly as a non-streamed answer would have read.
//!
//! A stream that ends before `[DONE]` is cut: [`Assembler::finish`] refuses it, and the
//! adapter retries the call when no text was handed on yet, else fails it (the text
//! already shown cannot be taken back; the interpreter reports it as a partial answer and
//! keeps nothing of it in the session).

use serde_json::{Value, json};

use super::openai::{CONTENT_FILTER, content_text, error_text, excerpt, filtered_answer, parse_usage, tool_call};
use super::{ModelError, ModelResponse};

/// The most tool calls one answer may make.
const MAX_TOOL_CALLS: usize = 128;
/// The longest line of a stream: no chunk an endpoint sends comes near it.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One tool call being put together from its fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The pieces of one streamed answer.
#[derive(Default)]
pub(crate) struct Assembler {
    /// Bytes not yet ending a line.
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no line end.
    scanned: usize,
    /// The `data:` lines of the event being read.
    data: Vec<String>,
    text: String,
    refusal: String,
    id: Option<String>,
    model: Option<String>,
    finish: Option<String>,
    usage: Option<Value>,
    calls: Vec<PartialCall>,
    done: bool,
    /// Characters of text handed on so far.
    forwarded: usize,
}

impl Assembler {
    /// Reads `bytes` (any split, even inside a character or a line); each piece of text
    /// goes to `on_text` with the answer's id as soon as its event is complete.
    pub fn feed(&mut self, bytes: &[u8], on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        self.pending.extend_from_slice(bytes);
        // Each byte is looked at once: the scan resumes where the last one stopped, and
        // the lines found are taken off the front together.
        let mut start = 0;
        while let Some(offset) = self.pending[start + self.scanned..].iter().position(|byte| *byte == b'\n') {
            let end = start + self.scanned + offset;
            let line = String::from_utf8_lossy(&self.pending[start..end]).into_owned();
            start = end + 1;
            self.scanned = 0;
            self.line(line.strip_suffix('\r').unwrap_or(&line), on_text)?;
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(ModelError::Response(format!(
                "a line of the answer's stream is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// Whether any text was handed on.
    pub fn forwarded(&self) -> usize {
        self.forwarded
    }

    fn line(&mut self, line: &str, on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        if line.is_empty() {
            return self.dispatch(on_text);
        }
        // Comments (`: keep-alive`) and the `event:`, `id:` and `retry:` fields carry
        // nothing a chat answer needs.
        if let Some(data) = line.strip_prefix("data:") {
            self.data.push(data.strip_prefix(' ').unwrap_or(data).to_string());
        }
        Ok(())
    }

    /// Handles the event whose lines were read.
    fn dispatch(&mut self, on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        if self.data.is_empty() {
            return Ok(());
        }
        let payload = std::mem::take(&mut self.data).join("\n");
        if payload.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if self.done {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(&payload).map_err(|error| {
            ModelError::Response(format!("a streamed chunk is not JSON ({error}): {}", excerpt(payload.as_bytes())))
        })?;
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            return Err(ModelError::Response(format!(
                "the endpoint reported an error mid-stream: {}",
                error_text(error)
            )));
        }
        let named = |key: &str| chunk.get(key).and_then(Value::as_str).filter(|value| !value.is_empty());
        if self.id.is_none() {
            self.id = named("id").map(str::to_string);
        }
        if self.model.is_none() {
            self.model = named("model").map(str::to_string);
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|choices| choices.first()) else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else { return Ok(()) };
        let piece = content_text(delta.get("content"));
        if !piece.is_empty() {
            self.text.push_str(&piece);
            self.forwarded += piece.chars().count();
            on_text(&piece, self.id.as_deref());
        }
        if let Some(refusal) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.push_str(refusal);
        }
        for fragment in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            self.call_fragment(fragment)?;
        }
        Ok(())
    }

    fn call_fragment(&mut self, fragment: &Value) -> Result<(), ModelError> {
        // Providers that send each call whole leave `index` out; it is then the next one.
        let index = match fragment.get("index").and_then(Value::as_u64) {
            Some(index) => index as usize,
            None => self.calls.len(),
        };
        if index >= MAX_TOOL_CALLS {
            return Err(ModelError::Response(format!(
                "a streamed tool call has the index {index}; an answer may make at most {MAX_TOOL_CALLS} calls"
            )));
        }
        while self.calls.len() <= index {
            self.calls.push(PartialCall::default());
        }
        let call = &mut self.calls[index];
        if let Some(id) = fragment.get("id").and_then(Value::as_str) {
            call.id.push_str(id);
        }
        let function = fragment.get("function");
        if let Some(name) = function.and_then(|function| function.get("name")).and_then(Value::as_str) {
            call.name.push_str(name);
        }
        match function.and_then(|function| function.get("arguments")) {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Object(whole)) => call.arguments.push_str(&Value::Object(whole.clone()).to_string()),
            _ => {}
        }
        Ok(())
    }

    /// The whole answer, or why the stream did not make one.
    pub fn finish(mut self) -> Result<ModelResponse, ModelError> {
        // An event the stream did not close with a blank line still counts.
        // A cut stream's last line may be half a chunk: the cut is what is reported.
        let mut ignore = |_: &str, _: Option<&str>| {};
        self.scanned = 0;
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        let trailing =
            self.line(line.strip_suffix('\r').unwrap_or(&line), &mut ignore).and_then(|()| self.dispatch(&mut ignore));
        if !self.done {
            return Err(ModelError::Transport(format!(
                "the answer's stream was cut before its end ({} characters of text had arrived)",
                self.forwarded
            )));
        }
        trailing?;
        let tool_calls = self
            .calls
            .iter()
            .enumerate()
            .filter(|(_, call)| !call.name.is_empty() || !call.id.is_empty() || !call.arguments.is_empty())
            .map(|(index, call)| {
                let wire = json!({ "id": call.id, "function": { "name": call.name, "arguments": call.arguments } });
                tool_call(index, &wire)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.finish.as_deref() == Some(CONTENT_FILTER) {
            return Err(filtered_answer(&self.text));
        }
        let mut text = self.text;
        if text.is_empty() && tool_calls.is_empty() {
            text = self.refusal;
        }
        Ok(ModelResponse {
            text,
            tool_calls,
            usage: parse_usage(self.usage.as_ref()),
            model: self.model,
            id: self.id,
            truncated: self.finish.as_deref() == Some("length"),
            ..ModelResponse::default()
        })
    }
}

impl super::http::StreamAssembler for Assembler {
    fn feed(&mut self, bytes: &[u8], on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        Assembler::feed(self, bytes, on_text)
    }

    fn forwarded(&self) -> usize {
        Assembler::forwarded(self)
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, ModelError> {
        Assembler::finish(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TokenUsage;

    fn events(chunks: &[Value]) -> String {
        let mut out: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// Feeds `bytes` in pieces of `size`, collecting what was handed on.
    fn read(bytes: &[u8], size: usize) -> (Result<ModelResponse, ModelError>, Vec<String>) {
        let mut assembler = Assembler::default();
        let mut pieces = Vec::new();
        for part in bytes.chunks(size) {
            let mut keep = |text: &str, _: Option<&str>| pieces.push(text.to_string());
            if let Err(error) = assembler.feed(part, &mut keep) {
                return (Err(error), pieces);
            }
        }
        (assembler.finish(), pieces)
    }

    fn sample() -> String {
        events(&[
            json!({ "id": "chatcmpl-7", "model": "gpt-test", "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "" } }] }),
            json!({ "id": "chatcmpl-7", "choices": [{ "index": 0, "delta": { "content": "Looking ORD-1042 up — " } }] }),
            json!({ "id": "chatcmpl-7", "choices": [{ "index": 0, "delta": { "content": "one moment." } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                { "index": 0, "id": "call_a", "type": "function", "function": { "name": "read_file", "arguments": "" } } ] } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                { "index": 1, "id": "call_b", "type": "function", "function": { "name": "grep", "arguments": "{\"pat" } } ] } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                { "index": 0, "function": { "arguments": "{\"file_path\": \"orders" } } ] } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                { "index": 0, "function": { "arguments": ".json\"}" } },
                { "index": 1, "function": { "arguments": "tern\": \"é\"}" } } ] } }] }),
            json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }),
            json!({ "choices": [], "usage": { "prompt_tokens": 900, "completion_tokens": 40, "prompt_tokens_details": { "cached_tokens": 512 } } }),
        ])
    }

    #[test]
    fn text_and_tool_call_fragments_come_together_whatever_the_byte_split() {
        let bytes = sample().into_bytes();
        for size in [1, 2, 3, 7, 64, bytes.len()] {
            let (answer, pieces) = read(&bytes, size);
            let answer = answer.unwrap_or_else(|error| panic!("split {size}: {error}"));
            assert_eq!(pieces, ["Looking ORD-1042 up — ", "one moment."], "split {size}");
            assert_eq!(answer.text, "Looking ORD-1042 up — one moment.");
            assert_eq!(answer.id.as_deref(), Some("chatcmpl-7"));
            assert_eq!(answer.model.as_deref(), Some("gpt-test"));
            assert_eq!(answer.usage, TokenUsage { input: 900, output: 40, cache_read: 512, cache_write: 0 });
            let calls: Vec<(&str, &str, &Value)> =
                answer.tool_calls.iter().map(|call| (call.id.as_str(), call.name.as_str(), &call.args)).collect();
            assert_eq!(
                calls,
                [
                    ("call_a", "read_file", &json!({ "file_path": "orders.json" })),
                    ("call_b", "grep", &json!({ "pattern": "é" }))
                ]
            );
            assert!(!answer.truncated);
        }
    }

    #[test]
    fn a_stream_cut_before_done_is_refused_naming_what_had_arrived() {
        let whole = sample();
        let cut = &whole[..whole.find("tool_calls").unwrap()];
        let (answer, pieces) = read(cut.as_bytes(), 5);
        assert_eq!(pieces.concat(), "Looking ORD-1042 up — one moment.");
        match answer {
            Err(ModelError::Transport(message)) => assert!(message.contains("cut before its end"), "{message}"),
            other => panic!("a cut stream is refused, got {other:?}"),
        }
    }

    #[test]
    fn an_error_chunk_a_broken_chunk_and_the_output_limit_are_told() {
        let error = events(&[json!({ "error": { "message": "overloaded" } })]);
        match read(error.as_bytes(), 10).0 {
            Err(ModelError::Response(message)) => assert!(message.contains("overloaded"), "{message}"),
            other => panic!("{other:?}"),
        }
        let many = events(&[
            json!({ "choices": [{ "delta": { "tool_calls": [{ "index": 128, "function": { "name": "x" } }] } }] }),
        ]);
        match read(many.as_bytes(), 50).0 {
            Err(ModelError::Response(message)) => assert!(message.contains("at most 128 calls"), "{message}"),
            other => panic!("{other:?}"),
        }
        match read(b"data: {not json\n\n", 4).0 {
            Err(ModelError::Response(message)) => assert!(message.contains("not JSON"), "{message}"),
            other => panic!("{other:?}"),
        }
        let limit = events(&[
            json!({ "choices": [{ "delta": { "content": "The refund is appr" }, "finish_reason": "length" }] }),
        ]);
        let (answer, _) = read(limit.as_bytes(), 9);
        assert!(answer.expect("answer").truncated);
        // Comments, other fields, CRLF line ends and an unterminated last event are fine.
        let odd = ": keep-alive\r\nevent: message\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\ndata: [DONE]";
        let (answer, pieces) = read(odd.as_bytes(), 3);
        assert_eq!((answer.expect("answer").text, pieces), ("Hi".to_string(), vec!["Hi".to_string()]));
    }
}
