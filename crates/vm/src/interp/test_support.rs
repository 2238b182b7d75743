//! Messages for the interpreter's unit tests: a user line, an assistant turn calling
//! tools, a tool's answer and a note, each as small as a test of the conversation's shape
//! (compaction's cuts and view, the context meter) needs.

use serde_json::Value;

use crate::session::{Message, NoteKind, ToolCall, ToolStatus};

/// A user message that is not the session's opening line.
pub(super) fn user(text: &str) -> Message {
    Message::User { text: text.to_string(), opening: None }
}

/// An assistant turn with no text that calls `lookup` once per id.
pub(super) fn calls(ids: &[&str]) -> Message {
    Message::Assistant {
        text: String::new(),
        tool_calls: ids
            .iter()
            .map(|id| ToolCall { id: id.to_string(), name: "lookup".to_string(), args: Value::Null })
            .collect(),
    }
}

/// `lookup`'s successful answer to the call `id`.
pub(super) fn answer(id: &str) -> Message {
    Message::Tool {
        call_id: id.to_string(),
        name: "lookup".to_string(),
        content: "ok".to_string(),
        status: ToolStatus::Ok,
    }
}

/// A runtime note of `kind` saying `text`.
pub(super) fn note(kind: NoteKind, text: &str) -> Message {
    Message::Note { kind, call_id: format!("note-{text}"), text: text.to_string() }
}
