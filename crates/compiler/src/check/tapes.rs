//! What tapes name: the states their entries match and the targets of the advances they
//! script.
//!
//! A tape (`tests/*.tape.yaml`) is written against the workflow as it was, and nothing
//! else ties it to the workflow: after a state is renamed, an entry still matching the
//! old name never fits a call, and the case fails at run time with no word from
//! `validate`. So an entry's `state:` (and `workflow:`) must name what the workspace has
//! (AMX0912, an error: the entry can never be used), and each scripted
//! `archmax_advance({ to })` should name a transition of the entry's state, or a state
//! of the workflow when the entry names none (AMX0913, a warning: a tape may script a
//! refused advance on purpose). The one thing to know: an entry with `workflow:` is held
//! to that workflow, since it answers a sub-workflow's session.

use crate::diagnostic::{Code, Diagnostic, Scope, did_you_mean, list_names};
use crate::schema::ast::Workflow;
use crate::schema::tape::TapeEntry;
use crate::source::Spanned;

use super::Unit;

pub fn check(units: &[Unit], index: usize) -> Vec<Diagnostic> {
    let unit = &units[index];
    let scope = Scope::Workflow(unit.slug.clone());
    let mut out = Vec::new();
    for tape in &unit.tapes {
        for entry in &tape.entries {
            let path = entry.index.to_string();
            let slug = entry.workflow.as_ref().map_or(unit.slug.as_str(), |named| named.value.as_str());
            let Some(target) = units.iter().find(|other| other.slug == slug) else {
                if let Some(named) = &entry.workflow {
                    out.push(unknown_workflow(named, units).with_path(format!("{path}.workflow")));
                }
                continue;
            };
            // A workflow that does not parse has its own errors; its tapes wait for it.
            let Some(workflow) = &target.workflow else {
                continue;
            };
            out.extend(check_entry(workflow, entry, &path));
        }
    }
    out.into_iter().map(|diagnostic| diagnostic.with_scope(scope.clone())).collect()
}

fn check_entry(workflow: &Workflow, entry: &TapeEntry, path: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let slugs: Vec<&str> = workflow.states.iter().map(|state| state.slug.value.as_str()).collect();
    let state =
        entry.state.as_ref().and_then(|named| workflow.states.iter().find(|state| state.slug.value == named.value));
    if let (Some(named), None) = (&entry.state, state) {
        let diagnostic = Diagnostic::at(
            Code::TapeUnknownState,
            named.span,
            format!("the tape entry matches state `{}`, which `{}` does not have", named.value, workflow.slug),
        )
        .with_label("unknown state");
        out.push(
            with_suggestion(diagnostic, &named.value, &slugs, "the workflow's states are")
                .with_path(format!("{path}.state")),
        );
    }
    for (call, to) in &entry.advances {
        let call_path = format!("{path}.tool_calls.{call}.args.to");
        let diagnostic = match state {
            Some(state) if state.lost_edges() => continue,
            Some(state) => {
                let targets: Vec<&str> =
                    state.transitions.iter().map(|transition| transition.to.value.as_str()).collect();
                if targets.contains(&to.value.as_str()) {
                    continue;
                }
                let message = if slugs.contains(&to.value.as_str()) {
                    format!(
                        "the tape advances from `{}` to `{}`, which `{}` has no transition to",
                        state.slug.value, to.value, state.slug.value
                    )
                } else {
                    format!(
                        "the tape advances from `{}` to `{}`, which is not a state of `{}`",
                        state.slug.value, to.value, workflow.slug
                    )
                };
                let lead = format!("`{}` may advance to", state.slug.value);
                with_suggestion(Diagnostic::at(Code::TapeAdvanceTarget, to.span, message), &to.value, &targets, &lead)
            }
            None if slugs.contains(&to.value.as_str()) => continue,
            None => with_suggestion(
                Diagnostic::at(
                    Code::TapeAdvanceTarget,
                    to.span,
                    format!("the tape advances to `{}`, which is not a state of `{}`", to.value, workflow.slug),
                ),
                &to.value,
                &slugs,
                "the workflow's states are",
            ),
        };
        out.push(diagnostic.with_label("no such transition").with_path(call_path));
    }
    out
}

/// "did you mean" when a name is close, else the names there are.
fn with_suggestion(diagnostic: Diagnostic, name: &str, names: &[&str], lead: &str) -> Diagnostic {
    match did_you_mean(name, names.iter().copied()) {
        Some(close) => {
            diagnostic.with_help(format!("did you mean `{close}`? A tape names states as the workflow spells them now"))
        }
        None if names.is_empty() => diagnostic.with_help(format!("{lead} none")),
        None => diagnostic.with_help(format!("{lead} {}", list_names(names))),
    }
}

fn unknown_workflow(named: &Spanned<String>, units: &[Unit]) -> Diagnostic {
    let slugs: Vec<&str> = units.iter().map(|unit| unit.slug.as_str()).collect();
    let diagnostic = Diagnostic::at(
        Code::TapeUnknownState,
        named.span,
        format!("the tape entry matches workflow `{}`, which the workspace does not have", named.value),
    )
    .with_label("unknown workflow");
    with_suggestion(diagnostic, &named.value, &slugs, "the workspace's workflows are")
}
