//! What each assertion of a case checks against the view an action left: the reply,
//! the trail, the park, the variables and the tool calls, and how a miss is described.

use super::*;
use archmax_program::matcher::same_value;

pub(super) fn list(items: &[&str]) -> String {
    if items.is_empty() { "none".to_string() } else { items.join(", ") }
}

pub(super) fn trail_summary(session: &SessionState) -> String {
    let steps: Vec<String> = session.trail.iter().map(|trail| format!("{} → {}", trail.kind, trail.to)).collect();
    if steps.is_empty() { "empty".to_string() } else { steps.join(", ") }
}

pub(super) fn text_matches(matcher: &TextMatcher, text: &str) -> bool {
    match matcher {
        TextMatcher::Substring(token) => text.contains(token.as_str()),
        TextMatcher::Regex(regex) => regex.is_match(text),
    }
}

pub(super) fn describe_text(matcher: &TextMatcher) -> String {
    match matcher {
        TextMatcher::Substring(token) => format!("{token:?}"),
        TextMatcher::Regex(regex) => format!("/{}/{}", regex.pattern, regex.flags),
    }
}

pub(super) fn is_governance_block(answer: &str) -> bool {
    answer.starts_with("[workflow] BLOCKED") || answer.starts_with("[workflow] FAILED")
}

/// The last action's run finished: it neither failed nor parked. A tool call that
/// errored along the way is no failure of the run when the run went on to finish (the
/// model recovered); a failure the run did not recover from shows in its status.
pub(super) fn succeeded(view: &View) -> Option<String> {
    let outcome = &view.outcome;
    match outcome.status {
        Status::AwaitingDecision => Some(format!("the session parked for a decision at '{}'", outcome.state)),
        Status::AwaitingInput => Some(format!("the session parked waiting for input at '{}'", outcome.state)),
        Status::Failed => {
            let exit = outcome.exit.as_ref();
            Some(format!(
                "the session raised `{}`: {}",
                exit.map(|exit| exit.code.as_str()).unwrap_or("?"),
                exit.map(|exit| exit.reason.as_str()).unwrap_or("")
            ))
        }
        Status::Rejected => Some(format!("the session was rejected: {}", outcome.reason.as_deref().unwrap_or(""))),
        Status::Completed | Status::Running => None,
    }
}

pub(super) fn parked(view: &View, channel: Option<ParkChannel>, state: Option<&str>) -> Option<String> {
    let outcome = &view.outcome;
    let actual = match outcome.status {
        Status::AwaitingDecision => Some(ParkChannel::Decision),
        Status::AwaitingInput => Some(ParkChannel::Input),
        _ => None,
    };
    let Some(actual) = actual else {
        return Some(format!("the session did not park: it is {} in '{}'", outcome.status.as_str(), outcome.state));
    };
    let name = |channel: ParkChannel| if channel == ParkChannel::Decision { "decision" } else { "input" };
    if let Some(wanted) = channel
        && wanted != actual
    {
        return Some(format!("the session parked for {}, not for {}", name(actual), name(wanted)));
    }
    let parked_at = outcome
        .pending_decision
        .as_ref()
        .map(|decision| decision.state.clone())
        .or_else(|| outcome.pending_input.as_ref().map(|input| input.state.clone()))
        .unwrap_or_else(|| outcome.state.clone());
    if let Some(state) = state
        && state != parked_at
    {
        return Some(format!("the session parked at '{parked_at}', not at '{state}'"));
    }
    None
}

pub(super) fn raised(view: &View, code: Option<&str>, reason: Option<&TextMatcher>) -> Option<String> {
    let Some(exit) = view.outcome.exit.as_ref().filter(|_| view.outcome.status == Status::Failed) else {
        return Some(format!("the session did not raise: it is {}", view.outcome.status.as_str()));
    };
    if !exit.raised {
        return Some(format!(
            "the session did not raise: the runtime failed the turn ({}: {})",
            exit.code,
            exit.reason.lines().next().unwrap_or_default()
        ));
    }
    if let Some(code) = code
        && code != exit.code
    {
        return Some(format!("the session raised `{}`, not `{code}`", exit.code));
    }
    if let Some(reason) = reason
        && !text_matches(reason, &exit.reason)
    {
        return Some(format!("the raise's reason {:?} does not match {}", exit.reason, describe_text(reason)));
    }
    None
}

pub(super) fn variables(
    view: &View,
    kind: &str,
    index: usize,
    expect: &[(String, Value)],
    paths: &[(String, archmax_program::reference::VarPath)],
    locked: &[(String, bool)],
) -> Vec<Record> {
    let mut out = Vec::new();
    for (name, expected) in expect {
        let failure = match view.session.variables.get(name) {
            None => Some(format!("'{name}': expected {expected}, observed (not set)")),
            Some(variable) => {
                let observed = match paths.iter().find(|(path_name, _)| path_name == name) {
                    Some((_, path)) => crate::kernel::value_at(&variable.value, &path.segments).cloned(),
                    None => Some(variable.value.clone()),
                };
                match observed {
                    None => Some(format!("'{name}': expected {expected}, observed (path does not resolve)")),
                    Some(observed) if !same_value(expected, &observed) => {
                        Some(format!("'{name}': expected {expected}, observed {observed}"))
                    }
                    Some(_) => None,
                }
            }
        };
        out.push(Record::new(kind, index, failure));
    }
    for (name, wanted) in locked {
        let failure = match view.session.variables.get(name) {
            None => Some(format!("'{name}': expected locked {wanted}, observed (not set)")),
            Some(variable) if variable.locked != *wanted => {
                Some(format!("'{name}': expected locked {wanted}, observed locked {}", variable.locked))
            }
            Some(_) => None,
        };
        out.push(Record::new(kind, index, failure));
    }
    out
}

/// What the session said in the turn the action opened (a park's handoff included).
pub(super) fn said(view: &View) -> String {
    view.session.messages[view.opened_at.min(view.session.messages.len())..]
        .iter()
        .filter_map(|message| match message {
            Message::Assistant { text, .. } if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

pub(super) fn reply(view: &View, index: usize, includes: &[TextMatcher], excludes: &[TextMatcher]) -> Vec<Record> {
    let text = said(view);
    let mut out = Vec::new();
    for token in includes {
        let failure =
            (!text_matches(token, &text)).then(|| format!("the reply does not include {}", describe_text(token)));
        out.push(Record::new("reply.includes", index, failure));
    }
    for token in excludes {
        let failure = text_matches(token, &text).then(|| format!("the reply includes {}", describe_text(token)));
        out.push(Record::new("reply.excludes", index, failure));
    }
    out
}

/// Every model tool call of the session (runtime notes excluded), with its answer.
pub(super) fn calls(session: &SessionState) -> Vec<(&crate::session::ToolCall, Option<String>)> {
    let mut answers: BTreeMap<&str, &str> = BTreeMap::new();
    for message in &session.messages {
        if let Message::Tool { call_id, content, .. } = message {
            answers.insert(call_id.as_str(), content.as_str());
        }
    }
    session
        .messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.iter().collect::<Vec<_>>(),
            _ => Vec::new(),
        })
        .map(|call| (call, answers.get(call.id.as_str()).map(|answer| answer.to_string())))
        .collect()
}

pub(super) fn tool_matches(wanted: &ToolMatch, name: &str, args: &Value) -> bool {
    wanted.name.value == name && wanted.input.as_ref().is_none_or(|pattern: &Matcher| pattern.matches(args))
}

pub(super) fn describe_tool(wanted: &ToolMatch) -> String {
    match &wanted.input {
        Some(_) => format!("'{}' with the given input", wanted.name.value),
        None => format!("'{}'", wanted.name.value),
    }
}

pub(super) fn called_summary(view: &View) -> String {
    let names: Vec<String> = calls(&view.session).iter().map(|(call, _)| call.name.clone()).collect();
    if names.is_empty() { " (no tool was called)".to_string() } else { format!(" (calls made: {})", names.join(", ")) }
}
