//! How the inbox presents what a session holds to a person: a row's one-line summary,
//! a variable's value, an instant, and whether a decision needs a comment.
//!
//! The one thing to know: a person reads values, not JSON. A string is shown as its
//! text, a number or a yes/no as written, and only an object or a list as JSON; every
//! shown value is bounded, and everything is escaped by the page's templates.

use maud::{Markup, html};
use serde_json::Value;

use archmax_config::settings::InboxWorkflow;
use archmax_vm::session::{DecisionChoice, Message, SessionState};

/// The most characters of a row's headline (the request's first words).
const HEADLINE_CHARS: usize = 90;
/// The most characters of one value in a row's summary.
const FACT_CHARS: usize = 48;
/// The most variables a row shows without `[inbox.workflows.<slug>] summary`.
const DEFAULT_FACTS: usize = 3;

/// What a row of the inbox says of a session: a headline (its `title`, else the first
/// words of the message that started it, else its id) and the chosen variables.
pub struct RowSummary {
    pub headline: String,
    pub facts: Vec<(String, String)>,
}

/// The summary of `session`: the variables `settings.summary` names, or its first locked
/// inputs (the trigger's values, not the `trigger` and `title` the runtime keeps).
pub fn row_summary(session: &SessionState, settings: &InboxWorkflow) -> RowSummary {
    let title = session.variables.get("title").and_then(|variable| variable.value.as_str());
    let first_message = session.messages.iter().find_map(|message| match message {
        Message::User { text, .. } if !text.trim().is_empty() => Some(text.as_str()),
        _ => None,
    });
    let headline = match title.or(first_message) {
        Some(text) => clip(&one_line(text), HEADLINE_CHARS),
        None => session.id.to_string(),
    };
    let facts = if settings.summary.is_empty() {
        session
            .variables
            .iter()
            .filter(|(name, variable)| variable.locked && !matches!(name.as_str(), "trigger" | "title"))
            .take(DEFAULT_FACTS)
            .map(|(name, variable)| (name.clone(), clip(&one_line(&value_text(&variable.value)), FACT_CHARS)))
            .collect()
    } else {
        settings
            .summary
            .iter()
            .filter_map(|name| {
                let variable = session.variables.get(name)?;
                Some((name.clone(), clip(&one_line(&value_text(&variable.value)), FACT_CHARS)))
            })
            .collect()
    };
    RowSummary { headline, facts }
}

/// A value as a person reads it: a string's text, a number or boolean as written (a
/// boolean as yes or no), nothing for null, and an object or list as compact JSON.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(true) => "yes".to_string(),
        Value::Bool(false) => "no".to_string(),
        Value::Null => "—".to_string(),
        Value::Number(number) => number.to_string(),
        other => other.to_string(),
    }
}

/// A variable's value on the session page: text as text (its line breaks kept), an
/// object or list as indented JSON.
pub fn value_block(value: &Value) -> Markup {
    match value {
        Value::Object(_) | Value::Array(_) => super::render::json_block(value),
        other => html! { span.value { (value_text(other)) } },
    }
}

/// An instant (milliseconds since the epoch): shown in UTC, and in the viewer's own time
/// zone once the page's script has run; the UTC instant stays in the hover title.
pub fn instant(ms: u64) -> Markup {
    let utc = archmax_vm::clock::rfc3339(ms);
    html! { (instant_of(&utc)) }
}

/// An instant written in RFC 3339, presented as [`instant`] presents one.
pub fn instant_of(rfc3339: &str) -> Markup {
    let shown = rfc3339.replacen('T', " ", 1).trim_end_matches('Z').to_string();
    let shown = shown.split('.').next().unwrap_or(&shown).to_string();
    html! { time datetime=(rfc3339) title={ (rfc3339) " (UTC)" } { (shown) " UTC" } }
}

/// Whether deciding `choice` needs the decider's comment: the workflow's inbox settings
/// name its target, or its own description asks for a comment.
pub fn comment_required(choice: &DecisionChoice, settings: &InboxWorkflow) -> bool {
    settings.comment_required.contains(&choice.to)
        || choice.description.as_deref().is_some_and(|description| description.to_lowercase().contains("comment"))
}

/// `text` on one line: line breaks and runs of space made one space, and the invisible
/// characters that reorder or hide text (bidirectional overrides, zero-width marks)
/// dropped, so a sender cannot make a row read as another request.
fn one_line(text: &str) -> String {
    let visible: String = text.chars().filter(|c| !is_invisible_format(*c)).collect();
    visible.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A format character that changes how text around it reads without being seen.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{00AD}')
}

/// `text`, cut to `chars` characters with `…` when longer.
fn clip(text: &str, chars: usize) -> String {
    match archmax_program::text::cut_at_chars(text, chars) {
        Some(_) => format!("{}…", archmax_program::text::first_chars(text, chars.saturating_sub(1))),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_read_as_values() {
        assert_eq!(value_text(&json!("ORD-1042")), "ORD-1042");
        assert_eq!(value_text(&json!(64.5)), "64.5");
        assert_eq!(value_text(&json!(true)), "yes");
        assert_eq!(value_text(&json!(null)), "—");
        assert_eq!(value_text(&json!({ "a": [1] })), r#"{"a":[1]}"#);
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(one_line("Refund\n  request\tfrom Jonas"), "Refund request from Jonas");
        assert_eq!(one_line("Pay \u{202E}0001 EUR\u{202C} to\u{200B} Acme"), "Pay 0001 EUR to Acme");
    }

    #[test]
    fn a_comment_is_required_where_the_settings_or_the_description_say_so() {
        let choice = |to: &str, description: Option<&str>| DecisionChoice {
            to: to.to_string(),
            description: description.map(str::to_string),
            kind: "reject".to_string(),
        };
        let settings = InboxWorkflow { comment_required: vec!["escalate".into()], ..InboxWorkflow::default() };
        assert!(comment_required(&choice("escalate", None), &settings));
        assert!(comment_required(&choice("decline", Some("Refuse it; the Comment says why.")), &settings));
        assert!(!comment_required(&choice("send", Some("Send the reply.")), &settings));
    }

    #[test]
    fn an_instant_shows_utc_and_carries_its_instant_for_the_script() {
        let shown = instant_of("2025-03-08T12:00:00Z").into_string();
        assert_eq!(
            shown,
            r#"<time datetime="2025-03-08T12:00:00Z" title="2025-03-08T12:00:00Z (UTC)">2025-03-08 12:00:00 UTC</time>"#
        );
    }
}
