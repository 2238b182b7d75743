//! `grade`: a judge model scores the session against one criterion.
//!
//! The judge reads two sections built from the same view the other assertions read: a
//! record of what happened (assistant messages, runtime notes as `[runtime:<kind>]`, each
//! tool call with its input, output and status), and the reply (everything the session
//! said to the person). Criteria about what the person was told are met only by the reply;
//! criteria about behaviour may be met by the record. Values are capped at 800
//! characters and the record at 12,000, dropping the oldest entries first. The judge
//! answers JSON `{ score, pass, reason }`; prose or a fence around it is tolerated, and a
//! judge that gives no readable JSON is asked once more, then scored 0.

use std::collections::HashMap;

use serde_json::Value;

use crate::model::{CallSubject, ModelRequest};
use crate::runtime::Runtime;
use crate::session::{Message, ToolStatus, Usage};

use super::{Harness, Record, RecordStatus, View};

const MAX_VALUE_CHARS: usize = 800;
const MAX_RECORD_CHARS: usize = 12_000;

const JUDGE_SYSTEM: &str = "You grade one conversation of an automated agent against one criterion. You get a \
record of what the agent did (its messages, runtime notes, and every tool call with its input, output and \
status) and the reply: everything the agent said to the person. A criterion about what the person was told \
is met only by the reply; a criterion about what the agent did may be met by the record. Score from 0 (not \
met at all) to 1 (fully met). Answer with JSON only: {\"score\": <0..1>, \"pass\": <true|false>, \"reason\": \
\"<one to three sentences>\"}.";

fn capped(text: &str) -> String {
    match archmax_program::text::cut_at_chars(text, MAX_VALUE_CHARS) {
        Some(kept) => format!("{kept}…(+{} chars)", text.chars().count() - MAX_VALUE_CHARS),
        None => text.to_string(),
    }
}

/// The chronological record, oldest entries dropped past the cap.
fn record(view: &View) -> String {
    let mut answers: HashMap<&str, (&str, ToolStatus)> = HashMap::new();
    for message in &view.session.messages {
        if let Message::Tool { call_id, content, status, .. } = message {
            answers.insert(call_id.as_str(), (content.as_str(), *status));
        }
    }
    let mut entries = Vec::new();
    for message in &view.session.messages {
        match message {
            Message::User { text, .. } => entries.push(format!("user: {}", capped(text))),
            Message::Assistant { text, tool_calls } => {
                if !text.trim().is_empty() {
                    entries.push(format!("assistant: {}", capped(text)));
                }
                for call in tool_calls {
                    let (output, status) = match answers.get(call.id.as_str()) {
                        Some((content, _)) if content.starts_with("[workflow] BLOCKED") => (*content, "rejected"),
                        Some((content, ToolStatus::Error)) => (*content, "failed"),
                        Some((content, ToolStatus::Ok)) => (*content, "completed"),
                        None => ("", "pending"),
                    };
                    entries.push(format!(
                        "tool call {} ({status})\n  input: {}\n  output: {}",
                        call.name,
                        capped(&call.args.to_string()),
                        capped(output)
                    ));
                }
            }
            Message::Note { kind, text, .. } => entries.push(format!("[runtime:{}] {}", kind.as_str(), capped(text))),
            Message::Tool { .. } => {}
        }
    }
    if entries.is_empty() {
        return "(the record is empty: the agent did nothing that left a trace)".to_string();
    }
    let mut total: usize = entries.iter().map(|entry| entry.len() + 1).sum();
    let mut dropped = 0;
    while total > MAX_RECORD_CHARS && dropped < entries.len() {
        total -= entries[dropped].len() + 1;
        dropped += 1;
    }
    let mut out = String::new();
    if dropped > 0 {
        out.push_str(&format!("… {dropped} earlier entries omitted\n"));
    }
    out.push_str(&entries[dropped..].join("\n"));
    out
}

/// The first balanced `{…}` in `text` that parses as a verdict.
fn verdict(text: &str) -> Option<(f64, String)> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        for (index, &byte) in bytes.iter().enumerate().skip(open) {
            if in_string {
                match byte {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&text[open..=index]) {
                            let score = map.get("score").and_then(Value::as_f64);
                            if let Some(score) = score {
                                let reason = map.get("reason").and_then(Value::as_str).unwrap_or("").to_string();
                                return Some((score.clamp(0.0, 1.0), reason));
                            }
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
        start = open + 1;
    }
    None
}

/// Scores `criterion` for `view`; the record passes when the score reaches `at_least`.
pub(super) async fn grade(
    harness: &Harness,
    runtime: &Runtime,
    view: &View,
    criterion: &str,
    at_least: f64,
    usage: &mut Usage,
) -> Record {
    let mut out = Record {
        kind: "grade.closedQA".to_string(),
        status: RecordStatus::Failed,
        threshold: Some(at_least),
        score: Some(0.0),
        detail: None,
        step: 0,
    };
    let program = &harness.program;
    let Some((_, workflow)) = program.workflow(&harness.workflow) else {
        out.detail = Some("the workflow is not in the program".to_string());
        return out;
    };
    let Some(judge) = &workflow.tests.judge else {
        out.detail = Some(
            "grading needs a judge: declare `tests: { judge: {} }` (or `judge: { model: … }`) in the workflow"
                .to_string(),
        );
        return out;
    };
    let reply = super::said(view);
    let task = format!(
        "Criterion:\n{criterion}\n\n## Record\n{}\n\n## Reply\n{}",
        record(view),
        if reply.trim().is_empty() { "(the agent said nothing)" } else { reply.as_str() }
    );
    let mut messages = vec![Message::User { text: task, opening: None }];
    let variables = view.session.variable_values();
    let state = view.outcome.state.clone();
    for attempt in 0..2 {
        let subject = CallSubject {
            model: judge.model.map(|model| program.str(model)),
            session: &view.session.id,
            workflow: &harness.workflow,
            state: &state,
            variables: &variables,
            prompt_cache: crate::model::PromptCache::declared(program, workflow),
            // A judge reads no tape position: it is not part of the session.
            tape: None,
        };
        // `tests.judge.modelOptions`: the judge's own sampling.
        let sampling = crate::model::Sampling { temperature: judge.temperature, max_tokens: judge.max_tokens };
        let request = ModelRequest::for_judge(subject, JUDGE_SYSTEM, &messages, sampling);
        let response = match runtime.model().call(request).await {
            Ok(response) => response,
            Err(error) => {
                out.detail = Some(format!("the judge could not be asked: {error}"));
                return out;
            }
        };
        usage.input_tokens += response.usage.input;
        usage.output_tokens += response.usage.output;
        usage.cache_read_tokens += response.usage.cache_read;
        usage.cache_creation_tokens += response.usage.cache_write;
        if let Some((score, reason)) = verdict(&response.text) {
            out.score = Some(score);
            out.status = if score >= at_least { RecordStatus::Passed } else { RecordStatus::Failed };
            out.detail = Some(if reason.is_empty() { format!("score {score:.2}") } else { reason });
            return out;
        }
        if attempt == 0 {
            messages.push(Message::Assistant { text: response.text.clone(), tool_calls: Vec::new() });
            messages.push(Message::User {
                text:
                    "Answer with the JSON object only: {\"score\": <0..1>, \"pass\": <true|false>, \"reason\": \"…\"}."
                        .to_string(),
                opening: None,
            });
        }
    }
    out.detail = Some("grader returned no readable JSON verdict".to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn verdicts_are_found_in_prose_and_fences() {
        assert_eq!(verdict("{\"score\": 0.8, \"pass\": true, \"reason\": \"ok\"}"), Some((0.8, "ok".to_string())));
        let fenced = "Here you go:\n```json\n{\"score\": 1.5, \"reason\": \"a {brace} inside\"}\n```";
        assert_eq!(verdict(fenced), Some((1.0, "a {brace} inside".to_string())));
        assert_eq!(verdict("{not json} then {\"score\": 0.2}"), Some((0.2, String::new())));
        assert_eq!(verdict("no verdict here"), None);
        assert_eq!(verdict("{\"pass\": true}"), None);
    }
}
