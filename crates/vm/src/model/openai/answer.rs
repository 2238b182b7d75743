//! The answer: a chat-completions body read into a [`ModelResponse`], and the pieces of
//! it (error text, content, tool calls, usage) that the stream reader shares.

use super::*;

/// Reads a chat-completions answer: the first choice, its tool calls, the usage.
pub(in crate::model) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let body: Value = serde_json::from_slice(bytes)
        .map_err(|error| ModelError::Response(format!("the answer is not JSON ({error}): {}", excerpt(bytes))))?;
    let Some(choice) = body.get("choices").and_then(Value::as_array).and_then(|choices| choices.first()) else {
        return Err(ModelError::Response(match body.get("error").filter(|error| !error.is_null()) {
            Some(error) => format!("the endpoint reported an error: {}", error_text(error)),
            None => format!("the answer has no choices: {}", excerpt(bytes)),
        }));
    };
    let Some(message) = choice.get("message").filter(|message| message.is_object()) else {
        return Err(ModelError::Response(format!("the first choice has no message: {}", excerpt(bytes))));
    };

    let tool_calls = match message.get("tool_calls") {
        Some(Value::Array(calls)) => {
            calls.iter().enumerate().map(|(index, call)| tool_call(index, call)).collect::<Result<_, _>>()?
        }
        _ => Vec::new(),
    };
    let mut text = content_text(message.get("content"));
    if text.is_empty()
        && tool_calls.is_empty()
        && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
    {
        text = refusal.to_string();
    }
    let model = body.get("model").and_then(Value::as_str).filter(|model| !model.is_empty()).map(str::to_string);
    let id = body.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_string);
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    if finish == Some(CONTENT_FILTER) {
        return Err(filtered_answer(&text));
    }
    let truncated = finish == Some("length");
    Ok(ModelResponse {
        text,
        tool_calls,
        usage: parse_usage(body.get("usage")),
        model,
        id,
        truncated,
        ..ModelResponse::default()
    })
}

pub(in crate::model) fn error_text(error: &Value) -> String {
    match error.get("message").and_then(Value::as_str) {
        Some(message) => message.to_string(),
        None => excerpt(error.to_string().as_bytes()),
    }
}

/// `content` as a string, or the text parts of an array joined together.
pub(in crate::model) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                part => part.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => String::new(),
    }
}

/// One tool call. Arguments that are not valid JSON are kept as `{ "_raw": … }` so the
/// runtime can tell the model rather than fail the turn; a call without an id gets one.
pub(in crate::model) fn tool_call(index: usize, call: &Value) -> Result<ToolCall, ModelError> {
    let function = call.get("function");
    let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str).filter(|name| !name.is_empty())
    else {
        return Err(ModelError::Response(format!(
            "tool call {index} has no function name: {}",
            excerpt(call.to_string().as_bytes())
        )));
    };
    let id = match call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
        Some(id) => id.to_string(),
        None => format!("call_{index}"),
    };
    let args = match function.and_then(|f| f.get("arguments")) {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
        Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or_else(|_| json!({ "_raw": raw })),
        Some(args @ Value::Object(_)) => args.clone(),
        Some(other) => json!({ "_raw": other.to_string() }),
    };
    Ok(ToolCall { id, name: name.to_string(), args })
}

/// Token counts in OpenAI (`prompt_tokens`, `prompt_tokens_details.cached_tokens`) or
/// Anthropic (`input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`)
/// shape; missing counts are 0. `input` comes out as the total: OpenAI's `prompt_tokens`
/// already includes cached tokens (unless it is smaller than them, which only a disjoint
/// count can be), Anthropic's `input_tokens` never does.
pub(in crate::model) fn parse_usage(usage: Option<&Value>) -> TokenUsage {
    let Some(usage) = usage.filter(|usage| usage.is_object()) else { return TokenUsage::default() };
    let count = |pointer: &str| -> Option<u64> {
        let value = usage.pointer(pointer)?;
        value.as_u64().or_else(|| value.as_f64().filter(|n| n.is_finite() && *n >= 0.0).map(|n| n.round() as u64))
    };
    let cache_read = [count("/prompt_tokens_details/cached_tokens"), count("/cache_read_input_tokens")]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
    let cache_write = [count("/cache_creation_input_tokens"), count("/prompt_tokens_details/cache_write_tokens")]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
    let cached = cache_read.saturating_add(cache_write);
    let input = match (count("/prompt_tokens"), count("/input_tokens")) {
        (Some(prompt), _) if prompt >= cached => prompt,
        (Some(disjoint), _) | (None, Some(disjoint)) => disjoint.saturating_add(cached),
        (None, None) => cached,
    };
    let output = count("/completion_tokens").or_else(|| count("/output_tokens")).unwrap_or(0);
    TokenUsage { input, output, cache_read, cache_write }
}

/// The `finish_reason` and error `code` a content filter answers with (Azure OpenAI).
pub(in crate::model) const CONTENT_FILTER: &str = "content_filter";

/// An answer a content filter stopped, with whatever text came before it.
pub(in crate::model) fn filtered_answer(text: &str) -> ModelError {
    let shown = if text.is_empty() { String::new() } else { format!(" after {} characters", text.chars().count()) };
    ModelError::ContentFilter(format!("the provider's content filter stopped the answer{shown}"))
}

/// What a refused request's body says, when a content filter refused it: Azure answers
/// `{"error": {"code": "content_filter", "message": …, "innererror": {"code":
/// "ResponsibleAIPolicyViolation", …}}}`.
pub(in crate::model) fn content_filter_refusal(bytes: &[u8]) -> Option<String> {
    let body: Value = serde_json::from_slice(bytes).ok()?;
    let error = body.get("error")?;
    let code = |value: &Value| value.get("code").and_then(Value::as_str).map(str::to_string);
    let filtered = code(error).as_deref() == Some(CONTENT_FILTER)
        || error.get("innererror").and_then(code).as_deref() == Some("ResponsibleAIPolicyViolation");
    filtered.then(|| format!("the provider's content filter refused the prompt: {}", error_text(error)))
}
