//! The session page's "Decisions made" section: every person's decision of the session,
//! oldest first, each with the record it was decided on.
//!
//! The one thing to know: this shows what the runtime kept when the decision was made
//! (the trail step's [`DecisionRecord`]), never the session's files or variables as they
//! are now, so a memo rewritten after the approval does not change what the page says
//! the approver read. A step written before records were kept shows what the trail has:
//! the transition, the comment, who and when.

use maud::{Markup, html};

use archmax_vm::session::decision_record::{DecisionRecord, EvidenceSeen};
use archmax_vm::session::{SessionState, TrailKind, TrailStep};

use super::present;
use super::render::{self, markdown_block};

/// The decisions section, or nothing when no person decided this session yet.
pub fn decisions(session: &SessionState) -> Markup {
    let decided: Vec<&TrailStep> = session.trail.iter().filter(|step| step.kind == TrailKind::Human).collect();
    if decided.is_empty() {
        return html! {};
    }
    html! {
        section.decisions data-region="decisions" aria-labelledby="decisions-heading" {
            h2 id="decisions-heading" { "Decisions made" }
            ol.decisions {
                @for step in decided { li { (decision(step)) } }
            }
        }
    }
}

fn decision(step: &TrailStep) -> Markup {
    let record = step.decision.as_deref();
    let at = record.map_or_else(|| step.to.clone(), |record| record.title.clone().unwrap_or(record.state.clone()));
    html! {
        article.decided aria-label={ "Decision at " (at) } {
            h3 {
                @match record {
                    Some(record) => { (record.title.as_deref().unwrap_or(&record.state)) }
                    None => { "Decision" }
                }
            }
            p.verdict {
                span.who { (step.decided_by.as_deref().unwrap_or("A person")) }
                " chose "
                @match record.and_then(|record| record.choice.description.as_deref()) {
                    Some(description) => { strong.choice { (description) } " " span.slug { "→ " (step.to) } }
                    None => { strong.choice { (step.to) } }
                }
                " at " (present::instant(step.ts)) "."
            }
            @match &step.reason {
                Some(comment) => { blockquote.comment { p { (comment) } } }
                None => { p.hint { "No comment." } }
            }
            @if let Some(record) = record { (shown(record)) }
            @else { p.hint { "This decision was recorded before the runtime kept what was shown." } }
        }
    }
}

/// What the decider was shown: the instructions and the evidence, as they were.
fn shown(record: &DecisionRecord) -> Markup {
    html! {
        details.record open {
            summary { "What was shown (record " (record.seq) ", opened " (present::instant_of(&record.opened_at)) ")" }
            h4 { "Instructions" }
            (markdown_block(&record.instructions))
            @if !record.evidence.is_empty() {
                h4 { "Evidence as shown" }
                @for seen in &record.evidence { (evidence(seen)) }
            }
        }
    }
}

fn evidence(seen: &EvidenceSeen) -> Markup {
    html! {
        article.evidence-file aria-label={ "Evidence as shown " (seen.path) } {
            h5 { code { (seen.path) } }
            @if let Some(why) = &seen.unreadable {
                p.hint { "Not readable then: " (why) }
            } @else if let Some(text) = &seen.text {
                (render::evidence_file(&seen.path, text.as_bytes(), seen.size, ""))
            } @else {
                p.hint { "An image of " (seen.size) " bytes." }
            }
            @if let Some(digest) = &seen.sha256 {
                p.hint.digest { "SHA-256 " code { (digest) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use archmax_vm::session::DecisionChoice;

    fn step(record: Option<DecisionRecord>) -> TrailStep {
        TrailStep {
            decided_by: Some("lead@example.com".into()),
            decision: record.map(Box::new),
            ..TrailStep::new("send", TrailKind::Human, Some("<b>Fine</b>".into()), 1_741_435_200_000)
        }
    }

    #[test]
    fn a_decision_shows_what_was_shown_escaped() {
        let record = DecisionRecord {
            state: "review".into(),
            title: None,
            seq: 1,
            instructions: "Read the memo.".into(),
            choice: DecisionChoice {
                to: "send".into(),
                description: Some("Send the reply".into()),
                kind: "approve".into(),
            },
            opened_at: "2025-03-08T11:00:00Z".into(),
            evidence: vec![EvidenceSeen {
                path: "memo.txt".into(),
                size: 9,
                sha256: Some("ab".into()),
                text: Some("<i>64</i>".into()),
                unreadable: None,
            }],
        };
        let shown = decision(&step(Some(record))).into_string();
        assert!(shown.contains("Send the reply"), "{shown}");
        assert!(shown.contains(r#"<time datetime="2025-03-08T12:00:00Z""#), "{shown}");
        assert!(shown.contains("&lt;b&gt;Fine&lt;/b&gt;") && shown.contains("&lt;i&gt;64&lt;/i&gt;"), "{shown}");
        assert!(shown.contains("Read the memo."), "{shown}");
        let old = decision(&step(None)).into_string();
        assert!(old.contains("before the runtime kept what was shown") && old.contains("lead@example.com"), "{old}");
    }
}
