//! What a name in `workflow.yaml` refers to, read from the compiler's typed tree: a state
//! (its key, a transition's `to`, an `on_error`), a code state's script, a skill, a mount.
//! Definition, rename, hover and document symbols all start here.
//!
//! The one thing to know: the spans are the compiler's, so they index the text the
//! analysis read, which is the open document's (the session re-checks before answering).

use archmax_compiler::schema::ast::{State, TransitionType, Workflow};
use archmax_compiler::source::{Span, Spanned};

/// A name the cursor is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A state's key or a reference to it.
    State(String),
    /// A code state's `script`, workflow-relative.
    Script(String),
    Skill(String),
    Mount(String),
}

fn contains(span: Span, offset: usize) -> bool {
    (span.start as usize) <= offset && offset <= span.end as usize
}

/// Every reference to a state in a workflow: transitions' `to` and `on_error`.
pub fn state_references(workflow: &Workflow) -> impl Iterator<Item = &Spanned<String>> {
    workflow
        .states
        .iter()
        .flat_map(|state| state.transitions.iter().map(|transition| &transition.to).chain(state.on_error.as_ref()))
}

fn skill_names(workflow: &Workflow) -> impl Iterator<Item = &Spanned<String>> {
    let root = workflow.skills.iter().flat_map(|root| root.allow_always.iter().chain(&root.forbid_always));
    let states = workflow.states.iter().flat_map(|state| state.skills.allowed().iter().chain(&state.skills.forbid));
    root.chain(states)
}

fn mount_names(workflow: &Workflow) -> impl Iterator<Item = &Spanned<String>> {
    let root = workflow
        .mounts
        .iter()
        .flat_map(|root| root.allow_always.iter().map(|entry| &entry.name).chain(&root.forbid_always));
    let states = workflow
        .states
        .iter()
        .flat_map(|state| state.mounts.allowed().iter().map(|entry| &entry.name).chain(&state.mounts.forbid));
    root.chain(states)
}

/// The name at a byte offset, with its span.
pub fn target_at(workflow: &Workflow, offset: usize) -> Option<(Target, Span)> {
    let hit = |named: &Spanned<String>| contains(named.span, offset).then_some(named.span);
    for state in &workflow.states {
        if let Some(span) = hit(&state.slug) {
            return Some((Target::State(state.slug.value.clone()), span));
        }
        if let Some(script) = &state.script
            && let Some(span) = hit(script)
        {
            return Some((Target::Script(script.value.clone()), span));
        }
    }
    state_references(workflow)
        .find_map(|named| hit(named).map(|span| (Target::State(named.value.clone()), span)))
        .or_else(|| {
            skill_names(workflow).find_map(|named| hit(named).map(|span| (Target::Skill(named.value.clone()), span)))
        })
        .or_else(|| {
            mount_names(workflow).find_map(|named| hit(named).map(|span| (Target::Mount(named.value.clone()), span)))
        })
}

/// The exact span of `name` inside a value's span (a quoted scalar spans its quotes).
pub fn name_span(text: &str, span: Span, name: &str) -> Span {
    let slice = text.get(span.start as usize..span.end as usize).unwrap_or("");
    match slice.find(name) {
        Some(start) if slice != name => {
            let start = span.start as usize + start;
            Span::new(span.file, start, start + name.len())
        }
        _ => span,
    }
}

/// The state's key and every reference to it, as exact name spans.
pub fn state_occurrences(workflow: &Workflow, text: &str, name: &str) -> Vec<Span> {
    let definition = workflow.states.iter().map(|state| &state.slug).filter(|slug| slug.value == name);
    let references = state_references(workflow).filter(|named| named.value == name);
    definition.chain(references).map(|named| name_span(text, named.span, name)).collect()
}

pub fn state<'a>(workflow: &'a Workflow, name: &str) -> Option<&'a State> {
    workflow.state_indices.get(name).and_then(|index| workflow.states.get(*index))
}

/// A state's summary, as Markdown: its type, title, summary, triggers and transitions.
pub fn state_summary(state: &State) -> String {
    let mut text = format!("**state `{}`** ({})", state.slug.value, state.kind.as_str());
    if let Some(title) = &state.title {
        text.push_str(&format!(" — {}", title.value));
    }
    if let Some(summary) = &state.summary {
        text.push_str(&format!("\n\n{}", summary.value));
    }
    if !state.triggers.is_empty() {
        let triggers: Vec<String> = state.triggers.iter().map(|trigger| format!("`{}`", trigger.id.value)).collect();
        text.push_str(&format!("\n\nentered by triggers: {}", triggers.join(", ")));
    }
    if state.transitions.is_empty() {
        text.push_str("\n\nno transitions: a terminal state");
    } else {
        text.push_str("\n\ntransitions:");
        for transition in &state.transitions {
            text.push_str(&format!("\n- → `{}`", transition.to.value));
            if transition.kind != TransitionType::None {
                text.push_str(&format!(" ({})", transition.kind.as_str()));
            }
            if let Some(description) = &transition.description {
                text.push_str(&format!(": {}", description.value));
            }
        }
    }
    if let Some(on_error) = &state.on_error {
        text.push_str(&format!("\n\non error → `{}`", on_error.value));
    }
    text
}
