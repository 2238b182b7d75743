//! Offloading long tool results: a result longer than the host's
//! `max_tool_result_tokens` is saved whole under `large_tool_results/` in the session's
//! own files, and the conversation holds a preview (its beginning and its end, its size,
//! and the path to page through with `read_file` offset and limit) instead.
//!
//! The one thing to know: what is saved is the result the model would have read, after
//! governance decided the call, so offloading reveals nothing a call could not; the file
//! sits in an offload area the agent may read (`tool.offload-read`) and never write.
//! Because `read_file` shows at most 2000 characters of a line, a JSON result is saved
//! pretty-printed and other long lines are wrapped, so every part can be paged to. A
//! `read_file` result is never saved: it is a page of a file that is already there, so
//! one over the budget is cut to it with a note to ask for fewer lines (which is also how
//! an offloaded file is paged without being offloaded again).

use serde_json::Value;

use archmax_program::program::StateId;
use archmax_program::text::split_at_chars;

use super::Turn;
use super::calls::Answer;
use super::host::MAX_ANSWER_TEXT;
use crate::context::{count_tokens, estimate};
use crate::events::Event;
use crate::session::ToolCall;

/// Characters of a line in a saved result; longer lines are wrapped.
const WRAP_CHARS: usize = 1000;
/// The longest answer whose tokens are counted exactly; a longer one is estimated.
const COUNT_AT_MOST: usize = 4 << 20;
/// The most characters a preview shows of a result (its beginning and end together).
const MAX_PREVIEW_CHARS: usize = 4000;

impl Turn<'_> {
    /// The answer the conversation keeps for `call` in state `id`: `answer` itself when it
    /// fits the budget, else its preview (the whole saved under `large_tool_results/`). A
    /// `hosted` answer (a host tool's) over [`MAX_ANSWER_TEXT`] bytes is offloaded whatever
    /// its tokens: that is the bound on what a server may put into the conversation.
    pub(super) fn offload(
        &mut self,
        id: StateId,
        here: &str,
        call: &ToolCall,
        args: &Value,
        answer: Answer,
        hosted: bool,
    ) -> Answer {
        let budget = self.runtime.context().max_tool_result_tokens;
        let huge = hosted && answer.content.len() > MAX_ANSWER_TEXT;
        // A token is at least one byte: a short answer needs no count.
        if answer.content.len() as u64 <= budget && !huge {
            return answer;
        }
        let model = self.state(id).model.map(|model| self.program().str(model));
        // Counting is linear but not cheap; past this size the estimate says enough.
        let tokens = if answer.content.len() > COUNT_AT_MOST {
            estimate(&answer.content)
        } else {
            count_tokens(model, &answer.content)
        };
        if tokens <= budget && !huge {
            return answer;
        }
        let text = &answer.content;
        if call.name == "read_file" {
            let file = args.get("file_path").and_then(Value::as_str).unwrap_or("the file");
            let keep = preview_chars(budget);
            let (head, _) = split_at_chars(text, keep);
            let content = format!(
                "{head}\n[… this page of `{file}` is {} characters (≈{tokens} tokens), more than the {budget} tokens a result may take here; the rest of it is left out. Read fewer lines at a time (`offset` and `limit`).]",
                text.chars().count()
            );
            return Answer { content, ..answer };
        }
        let path = format!("large_tool_results/{}", self.free_name(&call.id));
        let (saved, shape) = saved_form(text);
        let kept = self.keep(&path, saved.as_bytes());
        let lines = saved.lines().count();
        let readable = {
            let program = self.program();
            let surface = self.workflow.surface(self.state(id).surface);
            surface.tools.iter().any(|tool| program.str(tool.name) == "read_file")
        };
        let content = preview(text, &path, tokens, budget, lines, shape, readable, kept.as_ref().err());
        if kept.is_ok() {
            self.emit(Event::ToolResultOffloaded {
                state: here.to_string(),
                tool: call.name.clone(),
                call_id: call.id.clone(),
                path,
                bytes: saved.len() as u64,
                tokens,
            });
        }
        Answer { content, ..answer }
    }

    /// A file name under `large_tool_results/` for a call id a model chose: only
    /// letters, digits, `-` and `_`, at most 64 characters, and never one already taken.
    fn free_name(&self, call_id: &str) -> String {
        let mut base: String = call_id
            .chars()
            .map(|character| if character.is_ascii_alphanumeric() || character == '-' { character } else { '_' })
            .take(64)
            .collect();
        if base.trim_matches('_').is_empty() {
            base = "call".to_string();
        }
        let taken =
            |name: &str| matches!(self.workspace.stat(&format!("large_tool_results/{name}")), Ok(Some(_)) | Err(_));
        if !taken(&base) {
            return base;
        }
        (2..1000).map(|number| format!("{base}-{number}")).find(|name| !taken(name)).unwrap_or(base)
    }
}

/// How a result is shaped in its saved file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// As it was.
    Verbatim,
    /// JSON, pretty-printed.
    PrettyJson,
    /// Lines longer than [`WRAP_CHARS`] wrapped.
    Wrapped,
}

/// The text saved for a result, so that every part of it can be paged to.
fn saved_form(text: &str) -> (String, Shape) {
    if text.lines().all(|line| line.chars().count() <= WRAP_CHARS) {
        return (text.to_string(), Shape::Verbatim);
    }
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && (value.is_object() || value.is_array())
        && let Ok(pretty) = serde_json::to_string_pretty(&value)
        && pretty.lines().all(|line| line.chars().count() <= WRAP_CHARS)
    {
        return (pretty, Shape::PrettyJson);
    }
    let mut wrapped = String::with_capacity(text.len() + text.len() / WRAP_CHARS + 1);
    for line in text.split_inclusive('\n') {
        let mut count = 0;
        for character in line.chars() {
            if count == WRAP_CHARS && character != '\n' {
                wrapped.push('\n');
                count = 0;
            }
            wrapped.push(character);
            count += 1;
        }
    }
    (wrapped, Shape::Wrapped)
}

/// The characters a preview shows under a budget of `budget` tokens: about half the
/// budget by the four-characters estimate, at most [`MAX_PREVIEW_CHARS`].
fn preview_chars(budget: u64) -> usize {
    usize::try_from(budget.saturating_mul(2)).unwrap_or(usize::MAX).min(MAX_PREVIEW_CHARS)
}

/// What the conversation holds for an offloaded result.
#[allow(clippy::too_many_arguments)]
fn preview(
    text: &str,
    path: &str,
    tokens: u64,
    budget: u64,
    lines: usize,
    shape: Shape,
    readable: bool,
    failed: Option<&String>,
) -> String {
    let total = text.chars().count();
    let keep = preview_chars(budget);
    let head_chars = keep * 3 / 4;
    let tail_chars = keep - head_chars;
    let (head, rest) = split_at_chars(text, head_chars);
    let rest_chars = total.saturating_sub(head_chars);
    let (_, tail) = split_at_chars(rest, rest_chars.saturating_sub(tail_chars));
    let left_out = total.saturating_sub(head.chars().count() + tail.chars().count());
    let how = match shape {
        Shape::Verbatim => "",
        Shape::PrettyJson => " (pretty-printed, so that each part has a line of its own)",
        Shape::Wrapped => " (lines longer than 1000 characters wrapped)",
    };
    let opening = match failed {
        None if readable => format!(
            "[This result is {total} characters (≈{tokens} tokens), more than the {budget} tokens a result may take here. It is saved whole in `{path}`{how}, {lines} lines: read it with `read_file` (`file_path: {path}`, `offset` and `limit` in lines). Its beginning and its end follow.]"
        ),
        None => format!(
            "[This result is {total} characters (≈{tokens} tokens), more than the {budget} tokens a result may take here. It is saved whole in `{path}`{how}, but `read_file` is not granted in this state, so only its beginning and its end follow.]"
        ),
        Some(error) => format!(
            "[This result is {total} characters (≈{tokens} tokens), more than the {budget} tokens a result may take here, and it could not be saved ({error}); only its beginning and its end follow.]"
        ),
    };
    if left_out == 0 {
        return format!("{opening}\n{text}");
    }
    format!("{opening}\n{head}\n[… {left_out} characters left out …]\n{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_made_pageable_and_short_ones_are_left_alone() {
        let short = "one\ntwo\n";
        assert!(matches!(saved_form(short), (ref text, Shape::Verbatim) if text == short));
        let json =
            serde_json::json!({ "orders": (0..400).map(|n| format!("ORD-{n}")).collect::<Vec<_>>() }).to_string();
        let (pretty, shape) = saved_form(&json);
        assert!(shape == Shape::PrettyJson && pretty.lines().count() > 400);
        let prose = format!("{}\nend", "é".repeat(2500));
        let (wrapped, shape) = saved_form(&prose);
        assert!(shape == Shape::Wrapped);
        assert_eq!(wrapped.lines().map(|line| line.chars().count()).collect::<Vec<_>>(), [1000, 1000, 500, 3]);
        assert_eq!(wrapped.replace('\n', ""), prose.replace('\n', ""), "nothing but line breaks was added");
    }

    #[test]
    fn a_preview_keeps_the_beginning_and_the_end_and_says_where_the_rest_is() {
        let text: String = (0..5000).map(|n| format!("line {n}\n")).collect();
        let shown = preview(&text, "large_tool_results/call_1", 12_000, 1000, 5000, Shape::Verbatim, true, None);
        assert!(shown.starts_with("[This result is"), "{shown}");
        assert!(shown.contains("`large_tool_results/call_1`") && shown.contains("5000 lines"));
        assert!(shown.contains("line 0\n") && shown.contains("line 4999"));
        assert!(shown.contains("characters left out"));
        assert!(shown.chars().count() < 2000 + 400, "about half the budget: {}", shown.chars().count());
        let closed = preview(&text, "large_tool_results/x", 12_000, 1000, 5000, Shape::Verbatim, false, None);
        assert!(closed.contains("`read_file` is not granted in this state"));
        let error = "the session's files are full".to_string();
        let failed = preview(&text, "large_tool_results/x", 12_000, 1000, 5000, Shape::Verbatim, true, Some(&error));
        assert!(failed.contains("could not be saved (the session's files are full)"));
    }
}
