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
pub const DEFAULT_FACTS: usize = 3;

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

/// A value as a person reads it: a string's text, a number as written (a whole one
/// without `.0`), a boolean as yes or no, nothing for null, and an object or list as compact JSON.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(true) => "yes".to_string(),
        Value::Bool(false) => "no".to_string(),
        Value::Null => "—".to_string(),
        Value::Number(number) => number_text(number),
        other => other.to_string(),
    }
}

/// A number as a person writes it: a whole amount without the `.0` JSON gives a float
/// (`312.0` reads `312`), any other as written.
fn number_text(number: &serde_json::Number) -> String {
    match number.as_f64() {
        Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < 1e15 => format!("{}", float as i64),
        _ => number.to_string(),
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

/// Words in a transition's description that ask the decider to say something.
const ASKS_FOR_WORDS: [&str; 4] = ["comment", "reason", "why", "explain"];

/// Whether deciding `choice` needs the decider's comment: the workflow's inbox settings
/// name its target, or its own description asks for words (it speaks of a comment, a
/// reason, why, or explaining: "tell the supplier why").
pub fn comment_required(choice: &DecisionChoice, settings: &InboxWorkflow) -> bool {
    settings.comment_required.contains(&choice.to)
        || choice.description.as_deref().is_some_and(|description| {
            let description = description.to_lowercase();
            description
                .split(|character: char| !character.is_alphanumeric())
                .any(|word| ASKS_FOR_WORDS.iter().any(|asks| word.starts_with(asks)))
        })
}

/// `text` on one line: line breaks and runs of space made one space, and the other
/// characters that reorder or hide text ([`archmax_program::text::disguises`]: controls,
/// bidirectional marks and overrides, zero-width marks) dropped, so a sender cannot make
/// a row read as another request.
fn one_line(text: &str) -> String {
    // White space (line breaks and tabs among the control characters) becomes one space.
    let visible: String = text.chars().filter(|c| c.is_whitespace() || !archmax_program::text::disguises(*c)).collect();
    visible.split_whitespace().collect::<Vec<_>>().join(" ")
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
        assert_eq!(value_text(&json!(312.0)), "312", "a whole amount reads without `.0`");
        assert_eq!(value_text(&json!(4850)), "4850");
        assert_eq!(value_text(&json!(-2.0)), "-2");
        assert_eq!(value_text(&json!(1e20)), "1e+20", "too large to be read as a whole number: as written");
        assert_eq!(value_text(&json!(true)), "yes");
        assert_eq!(value_text(&json!(null)), "—");
        assert_eq!(value_text(&json!({ "a": [1] })), r#"{"a":[1]}"#);
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(one_line("Refund\n  request\tfrom Jonas"), "Refund request from Jonas");
        assert_eq!(one_line("Pay \u{202E}0001 EUR\u{202C} to\u{200B} Acme"), "Pay 0001 EUR to Acme");
        assert_eq!(one_line("Pay\n\t\u{61C}100\u{1b}[2J EUR"), "Pay 100[2J EUR", "a letter mark and an escape go");
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
        assert!(comment_required(&choice("decline", Some("Do not pay; tell the supplier why.")), &settings));
        assert!(comment_required(&choice("hold", Some("Hold it, giving the reason.")), &settings));
        assert!(comment_required(&choice("refer", Some("Refer it up and explain the doubt.")), &settings));
        assert!(!comment_required(&choice("pay", Some("Pay the invoice whole.")), &settings), "`whole` is not `why`");
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
