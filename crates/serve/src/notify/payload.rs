//! What a notification says, and the two bodies it is sent as: archmax's JSON and what a
//! Slack incoming webhook takes.
//!
//! The one thing to know: a body carries what a person needs to act (the session, its
//! workflow and state, why, and the link to its page) and nothing else: no variables, no
//! messages, no tool arguments, no part of the runner's configuration.

use serde_json::{Value, json};

use archmax_config::settings::notify::{NotifyEvent, NotifyPreset};

/// One thing worth telling someone about a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub event: NotifyEvent,
    pub session: String,
    pub workflow: String,
    /// The session's status (`awaiting_decision`, `awaiting_input`, `failed`).
    pub status: String,
    /// The state it is in.
    pub state: Option<String>,
    /// What a parked session waits for (`decision`, `input`, …).
    pub awaiting: Option<String>,
    /// Why it parked or failed, as the session records it.
    pub reason: Option<String>,
    /// A failure's code.
    pub code: Option<String>,
    /// When a waiting decision was asked for (RFC 3339).
    pub waiting_since: Option<String>,
    /// When it happened, in milliseconds since the epoch.
    pub at_ms: u64,
}

/// The link to a session's page in the inbox, under the runner's public URL (already
/// without a trailing `/`); `None` without one.
pub fn session_link(public_url: Option<&str>, session: &str) -> Option<String> {
    let base = public_url?;
    let mut path = String::new();
    for byte in session.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            path.push(char::from(byte));
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
    Some(format!("{base}/sessions/{path}"))
}

/// The body `preset` sends for `notification` from the notifier `notifier`.
pub fn body(preset: NotifyPreset, notifier: &str, notification: &Notification, link: Option<&str>) -> Value {
    match preset {
        NotifyPreset::Archmax => archmax_body(notifier, notification, link),
        NotifyPreset::Slack => slack_body(notification, link),
    }
}

fn archmax_body(notifier: &str, notification: &Notification, link: Option<&str>) -> Value {
    let mut body = json!({
        "event": notification.event.as_str(),
        "notifier": notifier,
        "sessionId": notification.session,
        "workflow": notification.workflow,
        "status": notification.status,
        "sessionUrl": link,
        "at": archmax_vm::clock::rfc3339(notification.at_ms),
    });
    for (key, value) in [
        ("state", &notification.state),
        ("awaiting", &notification.awaiting),
        ("reason", &notification.reason),
        ("code", &notification.code),
        ("waitingSince", &notification.waiting_since),
    ] {
        if let Some(value) = value {
            body[key] = json!(value);
        }
    }
    body
}

/// One line a person reads: what happened to which session, and why.
pub fn headline(notification: &Notification) -> String {
    let Notification { session, workflow, .. } = notification;
    let state = notification.state.as_deref().map(|state| format!(" at `{state}`")).unwrap_or_default();
    let what = match notification.event {
        NotifyEvent::Parked => match notification.awaiting.as_deref() {
            Some("decision") => "is waiting for a decision".to_string(),
            Some(awaiting) => format!("is waiting for {awaiting}"),
            None => "parked".to_string(),
        },
        NotifyEvent::Failed => "failed".to_string(),
        NotifyEvent::Waiting => {
            let since = notification.waiting_since.as_deref().unwrap_or("a while");
            format!("has been waiting for a decision since {since}")
        }
    };
    let reason = notification.reason.as_deref().map(|reason| format!(": {reason}")).unwrap_or_default();
    format!("Session {session} of {workflow} {what}{state}{reason}")
}

/// Slack's mrkdwn needs `&`, `<` and `>` escaped; everything else is text.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn slack_body(notification: &Notification, link: Option<&str>) -> Value {
    let headline = slack_escape(&headline(notification));
    let text = match link {
        Some(link) => format!("{headline}\n<{}|Open the session>", slack_escape(link)),
        None => headline,
    };
    json!({
        "text": text,
        "blocks": [{ "type": "section", "text": { "type": "mrkdwn", "text": text } }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked() -> Notification {
        Notification {
            event: NotifyEvent::Parked,
            session: "s 1/<x>".into(),
            workflow: "desk".into(),
            status: "awaiting_decision".into(),
            state: Some("review".into()),
            awaiting: Some("decision".into()),
            reason: Some("over <500> & due".into()),
            code: None,
            waiting_since: None,
            at_ms: 1_767_605_400_000,
        }
    }

    #[test]
    fn the_link_is_under_the_public_url_with_the_id_escaped_and_absent_without_one() {
        assert_eq!(
            session_link(Some("https://a.test/base"), "s 1/<x>~2").as_deref(),
            Some("https://a.test/base/sessions/s%201%2F%3Cx%3E~2")
        );
        assert_eq!(session_link(None, "s1"), None);
    }

    #[test]
    fn the_archmax_body_names_the_event_session_workflow_state_reason_link_and_time() {
        let body = body(NotifyPreset::Archmax, "ops", &parked(), Some("https://a.test/sessions/s1"));
        assert_eq!(body["event"], "parked");
        assert_eq!(body["notifier"], "ops");
        assert_eq!(body["sessionId"], "s 1/<x>");
        assert_eq!(body["workflow"], "desk");
        assert_eq!(body["state"], "review");
        assert_eq!(body["awaiting"], "decision");
        assert_eq!(body["reason"], "over <500> & due");
        assert_eq!(body["sessionUrl"], "https://a.test/sessions/s1");
        assert_eq!(body["at"], "2026-01-05T09:30:00Z");
        assert!(body.get("code").is_none(), "absent keys are left out: {body}");
    }

    #[test]
    fn the_slack_body_has_text_and_a_section_with_the_link_escaped_for_mrkdwn() {
        let body = body(NotifyPreset::Slack, "ops", &parked(), Some("https://a.test/sessions/s1"));
        let text = body["text"].as_str().expect("text");
        assert!(
            text.starts_with(
                "Session s 1/&lt;x&gt; of desk is waiting for a decision at `review`: over &lt;500&gt; &amp; due"
            ),
            "{text}"
        );
        assert!(text.ends_with("<https://a.test/sessions/s1|Open the session>"), "{text}");
        assert_eq!(body["blocks"][0]["text"]["text"], text);
        let unlinked = super::body(NotifyPreset::Slack, "ops", &parked(), None);
        assert!(!unlinked["text"].as_str().unwrap_or_default().contains("Open the session"));
    }
}
