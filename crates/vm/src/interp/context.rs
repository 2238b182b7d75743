//! The turn's context window: the conversation the model is shown and what it measures.
//!
//! [`ContextWindow`] is the part of a turn that owns the model's view of the
//! conversation (the session's messages, or, once the session has been compacted, the
//! view derived from them and the head's [`Compaction`]), the running measure of that view
//! in bytes and tokens, and the two once-a-turn flags of compaction: whether the context
//! warning was given and whether the summarizer failed. Deciding *when* and *where* to
//! compact is [`super::compact`]'s; this module only keeps the view and its counts true.
//!
//! The one thing to know: the view is never the source of truth. It is rebuilt from the
//! session whenever the compaction changes, and between rebuilds it only grows by the
//! messages the session grows by, so the meter's counts (kept per message, in order)
//! stay valid without recounting.

use serde_json::Value;

use archmax_program::program::StateId;

use super::compact::model_view;
use crate::context::count_tokens;
use crate::session::{Compaction, Message};

/// What a message costs beyond its text (its role and framing), in bytes and in tokens
/// alike, so that the byte count stays an upper bound of the token count.
pub(super) const MESSAGE_OVERHEAD: u64 = 8;

/// The model's view of the conversation and its measure, for one turn.
///
/// Invariants: `view` is `None` exactly when the session has no compaction (the model is
/// shown the session's messages), and otherwise equals [`model_view`] of the session's
/// messages and its compaction; the meter counts a prefix of that view. Both flags start
/// `false` each turn and are only ever set.
#[derive(Debug, Default)]
pub(super) struct ContextWindow {
    /// The conversation the model is shown, once it has been compacted.
    view: Option<Vec<Message>>,
    /// The measure of that conversation.
    meter: Meter,
    /// A context warning was given this turn (it is given once).
    warned: bool,
    /// The summarizer failed this turn; it is not asked again until the next.
    summarizer_failed: bool,
}

impl ContextWindow {
    /// The window of a turn that opens on `messages` under `compaction`.
    pub fn opened(messages: &[Message], compaction: Option<&Compaction>) -> ContextWindow {
        let mut window = ContextWindow::default();
        window.rebuild(messages, compaction);
        window
    }

    /// The conversation the model is shown now, given the session's `messages`.
    pub fn view<'a>(&'a self, messages: &'a [Message]) -> &'a [Message] {
        self.view.as_deref().unwrap_or(messages)
    }

    /// Derives the view afresh (the turn opened, or a compaction changed it) and forgets
    /// every count.
    pub fn rebuild(&mut self, messages: &[Message], compaction: Option<&Compaction>) {
        self.view = compaction.map(|compaction| model_view(messages, compaction));
        self.meter.reset();
    }

    /// Keeps the view in step with a message just appended to the session.
    pub fn append(&mut self, message: &Message) {
        if let Some(view) = &mut self.view {
            view.push(message.clone());
        }
    }

    /// The bytes of the view, counting only what came since the last call.
    pub(crate) fn view_bytes(&mut self, messages: &[Message]) -> u64 {
        let view = self.view.as_deref().unwrap_or(messages);
        self.meter.bytes(view)
    }

    /// The tokens of the view for `model`, counting only what has not been counted.
    pub(crate) fn view_tokens(&mut self, model: Option<&str>, messages: &[Message]) -> u64 {
        let view = self.view.as_deref().unwrap_or(messages);
        self.meter.tokens(model, view)
    }

    /// The tokens of the view as last counted.
    pub(crate) fn counted_tokens(&self) -> u64 {
        self.meter.tokens_total
    }

    /// Where the tool definitions of state `id` are measured, if they are yet.
    pub(crate) fn tools_measured(&self, id: StateId) -> Option<usize> {
        self.meter.tools.iter().position(|tools| tools.state == id)
    }

    /// Keeps the tool definitions of state `id` as sent (`json`); returns where.
    pub(crate) fn measure_tools(&mut self, id: StateId, json: std::sync::Arc<str>) -> usize {
        self.meter.tools.push(ToolsMeasure { state: id, json, tokens: None });
        self.meter.tools.len() - 1
    }

    /// The bytes of the tool definitions measured at `at`.
    pub(crate) fn tools_bytes(&self, at: usize) -> usize {
        self.meter.tools.get(at).map_or(0, |tools| tools.json.len())
    }

    /// The tokens of the tool definitions measured at `at`, for `model`, counted once.
    pub(crate) fn tools_tokens(&mut self, at: usize, model: Option<&str>) -> u64 {
        match self.meter.tools.get_mut(at) {
            Some(ToolsMeasure { json, tokens, .. }) => *tokens.get_or_insert_with(|| count_tokens(model, json)),
            None => 0,
        }
    }

    /// Whether the context warning is still to be given this turn; asking marks it given.
    pub(crate) fn warn_once(&mut self) -> bool {
        !std::mem::replace(&mut self.warned, true)
    }

    /// The summarizer failed: it is not asked again this turn.
    pub(crate) fn summarizer_failed(&mut self) {
        self.summarizer_failed = true;
    }

    /// Whether the summarizer may still be asked this turn.
    pub(crate) fn may_summarize(&self) -> bool {
        !self.summarizer_failed
    }
}

/// The conversation's measure for the model's view, kept up to date as messages come.
#[derive(Debug, Default)]
struct Meter {
    /// The model the token counts are for.
    model: Option<String>,
    /// How many messages of the view `bytes` covers, and their bytes.
    bytes_counted: usize,
    bytes: u64,
    /// Token counts per message of the view, in order, as far as they have been counted.
    tokens: Vec<u64>,
    tokens_total: u64,
    /// The tool definitions as sent, per state, with their tokens once counted.
    tools: Vec<ToolsMeasure>,
}

/// The tool definitions of one state's calls, as JSON, and their tokens once counted.
#[derive(Debug)]
struct ToolsMeasure {
    state: StateId,
    json: std::sync::Arc<str>,
    tokens: Option<u64>,
}

impl Meter {
    fn reset(&mut self) {
        self.bytes_counted = 0;
        self.bytes = 0;
        self.tokens.clear();
        self.tokens_total = 0;
    }

    /// The bytes of `view`, catching up with what came since the last call.
    fn bytes(&mut self, view: &[Message]) -> u64 {
        for message in &view[self.bytes_counted.min(view.len())..] {
            self.bytes += message_bytes(message);
        }
        self.bytes_counted = view.len();
        self.bytes
    }

    /// The tokens of `view` for `model`, counting only what has not been counted.
    fn tokens(&mut self, model: Option<&str>, view: &[Message]) -> u64 {
        if self.model.as_deref() != model {
            self.model = model.map(str::to_string);
            self.tokens.clear();
            self.tokens_total = 0;
            for tools in &mut self.tools {
                tools.tokens = None;
            }
        }
        for message in &view[self.tokens.len().min(view.len())..] {
            let count = message_tokens(model, message);
            self.tokens.push(count);
            self.tokens_total += count;
        }
        self.tokens_total
    }
}

/// An upper bound of a message's tokens under any tokenizer here: its bytes.
fn message_bytes(message: &Message) -> u64 {
    MESSAGE_OVERHEAD
        + match message {
            Message::User { text, .. } => text.len() as u64,
            Message::Assistant { text, tool_calls } => {
                text.len() as u64
                    + tool_calls
                        .iter()
                        .map(|call| (call.id.len() + call.name.len() + args_len(&call.args)) as u64)
                        .sum::<u64>()
            }
            Message::Tool { call_id, name, content, .. } => (call_id.len() + name.len() + content.len()) as u64,
            Message::Note { call_id, text, .. } => (call_id.len() + text.len()) as u64 + MESSAGE_OVERHEAD,
        }
}

/// The length of `args` as JSON, counted without building the text.
fn args_len(args: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    if args.is_null() {
        return 2;
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, args) {
        Ok(()) => counter.0,
        Err(_) => args.to_string().len(),
    }
}

/// A message's tokens for `model`.
pub(super) fn message_tokens(model: Option<&str>, message: &Message) -> u64 {
    MESSAGE_OVERHEAD
        + match message {
            Message::User { text, .. } => count_tokens(model, text),
            Message::Assistant { text, tool_calls } => {
                count_tokens(model, text)
                    + tool_calls
                        .iter()
                        .map(|call| {
                            let args = if call.args.is_null() { "{}".to_string() } else { call.args.to_string() };
                            count_tokens(model, &call.id) + count_tokens(model, &call.name) + count_tokens(model, &args)
                        })
                        .sum::<u64>()
            }
            Message::Tool { call_id, name, content, .. } => {
                count_tokens(model, call_id) + count_tokens(model, name) + count_tokens(model, content)
            }
            Message::Note { call_id, text, .. } => {
                count_tokens(model, call_id) + count_tokens(model, text) + MESSAGE_OVERHEAD
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::test_support::{answer, calls, note, user};
    use crate::session::NoteKind;

    #[test]
    fn bytes_bound_tokens_for_every_tokenizer() {
        let messages = [
            user("héllo wörld, this is a test of the meter"),
            calls(&["call_1"]),
            answer("call_1"),
            note(NoteKind::Code, "ran"),
        ];
        for model in [None, Some("gpt-4o"), Some("claude-sonnet-4")] {
            for message in &messages {
                assert!(message_tokens(model, message) <= message_bytes(message), "{model:?} {message:?}");
            }
        }
        let mut meter = Meter::default();
        let first = meter.tokens(Some("gpt-4o"), &messages[..2]);
        let all = meter.tokens(Some("gpt-4o"), &messages);
        assert!(first < all && meter.tokens.len() == 4);
        assert_eq!(meter.tokens(Some("gpt-4o"), &messages), all, "nothing is counted twice");
        let estimated = meter.tokens(None, &messages);
        assert_eq!(meter.tokens.len(), 4, "another model counts afresh");
        assert_ne!(estimated, 0);
    }
}
