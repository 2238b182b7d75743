//! A streamed Messages answer, read as it arrives.
//!
//! With `stream: true` the Messages API answers with server-sent events, each named by
//! its `event:` line and carrying a JSON object of the same `type`: `message_start` (the
//! answer's id, model and input usage), then per content block `content_block_start`
//! (a text block, or a `tool_use` block with its id and name), `content_block_delta`s
//! (`text_delta` pieces of text, `input_json_delta` fragments of the tool input) and
//! `content_block_stop`; `message_delta` (the `stop_reason` and the output usage),
//! `message_stop` at the end; `ping`s anywhere; an `error` event when the provider
//! fails mid-stream.
//!
//! The one thing to know: the partial-answer rules are the OpenAI stream's. A stream that
//! ends before `message_stop` is cut and refused; the call is retried only when no text was
//! handed on yet. An `error` event fails the call, and is retried under the same
//! condition when the provider calls it passing (`overloaded_error`, `rate_limit_error`,
//! `api_error`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::openai::{error_text, excerpt};
use super::super::{ModelError, ModelResponse};
use super::{Stop, answer, tool_call};

/// The most content blocks one answer may hold.
const MAX_BLOCKS: usize = 256;
/// The longest line of a stream: no event comes near it.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// The error types a provider reports for a failure that may pass.
const PASSING_ERRORS: [&str; 3] = ["overloaded_error", "rate_limit_error", "api_error"];

/// One content block being put together.
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    /// Thinking and other blocks the runtime does not keep.
    Other,
}

/// The pieces of one streamed Messages answer.
#[derive(Default)]
pub(crate) struct Assembler {
    /// Bytes not yet ending a line.
    pending: Vec<u8>,
    /// The `data:` lines of the event being read.
    data: Vec<String>,
    blocks: BTreeMap<usize, Block>,
    id: Option<String>,
    model: Option<String>,
    /// The usage of `message_start`, with the counts `message_delta` reports over it.
    usage: serde_json::Map<String, Value>,
    stop_reason: Option<String>,
    done: bool,
    /// The stream reported an error the provider calls passing.
    passing: bool,
    /// Characters of text handed on so far.
    forwarded: usize,
}

impl Assembler {
    fn line(&mut self, line: &str, on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        if line.is_empty() {
            return self.dispatch(on_text);
        }
        // The `event:` name repeats the data's `type`; comments, `id:` and `retry:` carry
        // nothing an answer needs.
        if let Some(data) = line.strip_prefix("data:") {
            self.data.push(data.strip_prefix(' ').unwrap_or(data).to_string());
        }
        Ok(())
    }

    fn dispatch(&mut self, on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        if self.data.is_empty() || self.done {
            self.data.clear();
            return Ok(());
        }
        let payload = std::mem::take(&mut self.data).join("\n");
        let event: Value = serde_json::from_str(&payload).map_err(|error| {
            ModelError::Response(format!("a streamed event is not JSON ({error}): {}", excerpt(payload.as_bytes())))
        })?;
        let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let index = event.get("index").and_then(Value::as_u64).map(|index| index as usize);
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                let message = event.get("message").unwrap_or(&Value::Null);
                self.id = Some(text(message, "id")).filter(|id| !id.is_empty());
                self.model = Some(text(message, "model")).filter(|model| !model.is_empty());
                self.merge_usage(message.get("usage"));
            }
            "content_block_start" => {
                let index = self.block_index(index)?;
                let block = event.get("content_block").unwrap_or(&Value::Null);
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(String::new()),
                    Some("tool_use") => {
                        Block::ToolUse { id: text(block, "id"), name: text(block, "name"), input: String::new() }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, started);
                // A text block may open with text of its own.
                let opening = text(block, "text");
                if !opening.is_empty() {
                    self.text_piece(index, &opening, on_text);
                }
            }
            "content_block_delta" => {
                let index = self.block_index(index)?;
                let delta = event.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => self.text_piece(index, &text(delta, "text"), on_text),
                    Some("input_json_delta") => {
                        if let Some(Block::ToolUse { input, .. }) = self.blocks.get_mut(&index) {
                            input.push_str(&text(delta, "partial_json"));
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                self.merge_usage(event.get("usage"));
            }
            "message_stop" => self.done = true,
            "error" => {
                let error = event.get("error").unwrap_or(&Value::Null);
                let kind = text(error, "type");
                let passing = PASSING_ERRORS.contains(&kind.as_str());
                self.passing = self.forwarded == 0 && passing;
                let message = format!("the endpoint reported an error mid-stream ({kind}): {}", error_text(error));
                return Err(if passing { ModelError::Overloaded(message) } else { ModelError::Response(message) });
            }
            // `ping`, `content_block_stop` and event types yet to come carry nothing to keep.
            _ => {}
        }
        Ok(())
    }

    fn block_index(&self, index: Option<usize>) -> Result<usize, ModelError> {
        match index {
            Some(index) if index < MAX_BLOCKS => Ok(index),
            Some(index) => Err(ModelError::Response(format!(
                "a streamed content block has the index {index}; an answer may hold at most {MAX_BLOCKS}"
            ))),
            None => Err(ModelError::Response("a streamed content-block event has no index".into())),
        }
    }

    fn text_piece(&mut self, index: usize, piece: &str, on_text: &mut dyn FnMut(&str, Option<&str>)) {
        if piece.is_empty() {
            return;
        }
        if let Some(Block::Text(text)) = self.blocks.get_mut(&index) {
            text.push_str(piece);
            self.forwarded += piece.chars().count();
            on_text(piece, self.id.as_deref());
        }
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let Some(Value::Object(counts)) = usage {
            for (key, value) in counts {
                if !value.is_null() {
                    self.usage.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

impl super::super::http::StreamAssembler for Assembler {
    fn feed(&mut self, bytes: &[u8], on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError> {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|byte| *byte == b'\n') {
            let end = start + offset;
            let line = String::from_utf8_lossy(&self.pending[start..end]).into_owned();
            start = end + 1;
            self.line(line.strip_suffix('\r').unwrap_or(&line), on_text)?;
        }
        self.pending.drain(..start);
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(ModelError::Response(format!(
                "a line of the answer's stream is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(())
    }

    fn forwarded(&self) -> usize {
        self.forwarded
    }

    fn failure_is_passing(&self) -> bool {
        self.passing
    }

    fn finish(mut self: Box<Self>) -> Result<ModelResponse, ModelError> {
        // An event the stream did not close with a blank line still counts.
        let mut ignore = |_: &str, _: Option<&str>| {};
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
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (index, block) in std::mem::take(&mut self.blocks) {
            match block {
                Block::Text(piece) => text.push_str(&piece),
                Block::ToolUse { id, name, input } => {
                    let input = if input.trim().is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_str(&input).unwrap_or_else(|_| serde_json::json!({ "_raw": input }))
                    };
                    let call = tool_call(index, &id, &name, input)?;
                    // Input that did not parse is kept raw, for the runtime to tell the model.
                    tool_calls.push(call);
                }
                Block::Other => {}
            }
        }
        let usage = Value::Object(std::mem::take(&mut self.usage));
        let stop = Stop::from_reason(self.stop_reason.as_deref());
        answer(text, tool_calls, Some(&usage), (self.id.take(), self.model.take()), stop)
    }
}
