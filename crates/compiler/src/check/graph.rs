//! The state graph: transition and `on_error` targets, where a description is required,
//! duplicate edges, reachability from the triggers, trigger ids, lock owners, redundant
//! models, and evidence paths.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use crate::schema::ast::{State, StateKind, Workflow};
use crate::source::Span;
use crate::zones::canonicalize;

use super::Findings;
use super::follow_on::Reach;

/// The graph of states: transitions and `on_error` routes, node `i` being state `i`.
pub fn state_graph(workflow: &Workflow) -> DiGraph<(), bool> {
    let mut graph = DiGraph::with_capacity(workflow.states.len(), workflow.states.len() * 2);
    let nodes: Vec<NodeIndex> = workflow.states.iter().map(|_| graph.add_node(())).collect();
    let index: HashMap<&str, usize> =
        workflow.states.iter().enumerate().map(|(position, state)| (state.slug.value.as_str(), position)).collect();
    for (from, state) in workflow.states.iter().enumerate() {
        for transition in &state.transitions {
            if let Some(to) = index.get(transition.to.value.as_str()) {
                graph.add_edge(nodes[from], nodes[*to], false);
            }
        }
        if let Some(target) = &state.on_error
            && let Some(to) = index.get(target.value.as_str())
        {
            graph.add_edge(nodes[from], nodes[*to], true);
        }
    }
    graph
}

pub fn check(workflow: &Workflow, findings: &mut Findings<'_>) {
    let slugs: Vec<&str> = workflow.states.iter().map(|state| state.slug.value.as_str()).collect();
    for state in &workflow.states {
        let base = format!("states.{}", state.slug.value);
        check_targets(workflow, state, &slugs, &base, findings);
        check_descriptions(workflow, state, &base, findings);
        check_duplicate_edges(state, &base, findings);
        if let (Some(model), Some(settings)) = (&state.model, &workflow.settings.model)
            && model.value == settings.value
        {
            findings.push(
                Diagnostic::at(
                    Code::RedundantModel,
                    model.span,
                    format!("`{}` repeats `settings.model`, which every state already runs on", model.value),
                )
                .with_label("same as settings.model")
                .with_secondary(settings.span, "set here")
                .with_help("remove the state's `model`; name one only where this state's work needs a different model"),
                format!("{base}.model"),
            );
        }
        for (index, evidence) in state.evidence.iter().enumerate() {
            match canonicalize(&evidence.value) {
                Ok(path) if path.split('/').next() == Some("workflows") => findings.push(
                    Diagnostic::at(
                        Code::GovernancePlane,
                        evidence.span,
                        format!(
                            "the evidence path `{}` is under `workflows/`, which no session can read",
                            evidence.value
                        ),
                    )
                    .with_label("authoring plane")
                    .with_help("show the person a file the session produced, such as `scratchpad/summary.md`"),
                    format!("{base}.evidence.{index}"),
                ),
                Ok(path) if path.is_empty() => findings.push(
                    Diagnostic::at(Code::InvalidValue, evidence.span, "an evidence path must name a file")
                        .with_help("write a workspace-relative path such as `scratchpad/refund.md`"),
                    format!("{base}.evidence.{index}"),
                ),
                Err(_) => findings.push(
                    Diagnostic::at(
                        Code::InvalidValue,
                        evidence.span,
                        format!("the evidence path `{}` climbs above the workspace root", evidence.value),
                    )
                    .with_label("escapes the workspace")
                    .with_help("write a workspace-relative path without `..`, such as `scratchpad/refund.md`"),
                    format!("{base}.evidence.{index}"),
                ),
                Ok(_) => {}
            }
        }
    }
    check_reachability(workflow, findings);
    check_trigger_ids(workflow, findings);
    check_lock_owners(workflow, findings);
}

fn unknown_state(name: &str, span: Span, slugs: &[&str], what: &str) -> Diagnostic {
    let diagnostic =
        Diagnostic::at(Code::UnknownTarget, span, format!("{what} `{name}` is not a state of this workflow"))
            .with_label("no such state");
    match did_you_mean(name, slugs.iter().copied()) {
        Some(close) => diagnostic.with_help(format!("did you mean `{close}`?")),
        None => diagnostic.with_help(format!("`to` and `on_error` take a state slug: {}", list_names(slugs))),
    }
}

fn check_targets(workflow: &Workflow, state: &State, slugs: &[&str], base: &str, findings: &mut Findings<'_>) {
    for (index, transition) in state.transitions.iter().enumerate() {
        if workflow.state(&transition.to.value).is_none() && !workflow.misplaced_states.contains(&transition.to.value) {
            findings.push(
                unknown_state(&transition.to.value, transition.to.span, slugs, "the transition target"),
                format!("{base}.transitions.{index}.to"),
            );
        }
    }
    if let Some(target) = &state.on_error {
        if workflow.state(&target.value).is_none() {
            if workflow.misplaced_states.contains(&target.value) {
                return;
            }
            findings.push(
                unknown_state(&target.value, target.span, slugs, "the `on_error` target"),
                format!("{base}.on_error"),
            );
        } else if target.value == state.slug.value {
            findings.push(
                Diagnostic::at(
                    Code::OnErrorSelf,
                    target.span,
                    format!("`{}` routes its own failures back to itself", state.slug.value),
                )
                .with_label("loops on failure")
                .with_help("a failure would re-enter the failing state until the turn's recursion limit: route it to a state that reports or escalates"),
                format!("{base}.on_error"),
            );
        }
    }
}

/// Why an undescribed transition is refused, or `None` when it may stay undescribed.
fn description_requirement(workflow: &Workflow, state: &State, index: usize) -> Option<String> {
    let transition = &state.transitions[index];
    let target = workflow.state(&transition.to.value)?;
    if state.kind != StateKind::Agent {
        return Some(format!(
            "every transition of a {} state needs a description{}",
            state.kind.as_str(),
            if state.kind == StateKind::Human { ": it labels the person's choice" } else { "" }
        ));
    }
    if target.kind != StateKind::Agent {
        let what = match target.kind {
            StateKind::Human => "human",
            StateKind::Grader => "grader",
            _ => "code",
        };
        return Some(format!(
            "an edge into the {what} state `{}` needs a description saying what must be ready",
            target.slug.value
        ));
    }
    if target.slug.value == state.slug.value {
        return Some("an edge back into its own state needs a description saying when to take it".to_string());
    }
    if state.transitions.len() > 1 {
        return Some(format!(
            "`{}` has {} transitions, so each needs a description saying when to take it",
            state.slug.value,
            state.transitions.len()
        ));
    }
    if !state.has_instructions() {
        return Some(format!(
            "`{}` has no instructions, so its transition's description is the only condition the agent has",
            state.slug.value
        ));
    }
    None
}

fn check_descriptions(workflow: &Workflow, state: &State, base: &str, findings: &mut Findings<'_>) {
    for (index, transition) in state.transitions.iter().enumerate() {
        if transition.description.is_some() {
            continue;
        }
        if let Some(reason) = description_requirement(workflow, state, index) {
            findings.push(
                Diagnostic::at(
                    Code::DescriptionRequired,
                    transition.span,
                    format!(
                        "the transition from `{}` to `{}` has no description",
                        state.slug.value, transition.to.value
                    ),
                )
                .with_label("needs a description")
                .with_help(format!(
                    "{reason}. Write when to take it (\"The refund is approved.\"), never where it goes"
                )),
                format!("{base}.transitions.{index}.description"),
            );
        }
    }
}

fn check_duplicate_edges(state: &State, base: &str, findings: &mut Findings<'_>) {
    if state.kind == StateKind::Human {
        return;
    }
    for (index, transition) in state.transitions.iter().enumerate() {
        if let Some(first) = state.transitions[..index].iter().find(|earlier| earlier.to.value == transition.to.value) {
            findings.push(
                Diagnostic::at(
                    Code::DuplicateTransition,
                    transition.to.span,
                    format!("`{}` has two transitions to `{}`", state.slug.value, transition.to.value),
                )
                .with_label("second edge to the same state")
                .with_secondary(first.to.span, "first edge")
                .with_help("the agent chooses a target, not an edge: merge the two descriptions into one transition"),
                format!("{base}.transitions.{index}.to"),
            );
        }
    }
}

fn check_reachability(workflow: &Workflow, findings: &mut Findings<'_>) {
    if workflow.triggers().next().is_none() {
        return;
    }
    let reach = Reach::new(workflow);
    for (index, state) in workflow.states.iter().enumerate() {
        if reach.is_reached(index) || reach.hidden_by_open_edge(index) || state.slug.value.is_empty() {
            continue;
        }
        findings.push(
            Diagnostic::at(
                Code::UnreachableState,
                state.slug.span,
                format!("no trigger can reach `{}`", state.slug.value),
            )
            .with_label("unreachable")
            .with_help(
                "add a transition or an `on_error` into it from a reachable state, give it a trigger, or remove it",
            ),
            format!("states.{}", state.slug.value),
        );
    }
}

fn check_trigger_ids(workflow: &Workflow, findings: &mut Findings<'_>) {
    let mut seen: HashMap<&str, (&str, Span)> = HashMap::new();
    for state in &workflow.states {
        for trigger in &state.triggers {
            match seen.get(trigger.id.value.as_str()) {
                Some((owner, first)) => findings.push(
                    Diagnostic::at(
                        Code::DuplicateTrigger,
                        trigger.id.span,
                        format!(
                            "the trigger `{}` is declared on `{}` and on `{owner}`",
                            trigger.id.value, state.slug.value
                        ),
                    )
                    .with_label("declared again")
                    .with_secondary(*first, "first declared here")
                    .with_help(
                        "a trigger has one entry state: keep one declaration, or give the other trigger its own id",
                    ),
                    format!("states.{}.triggers.{}", state.slug.value, trigger.id.value),
                ),
                None => {
                    seen.insert(&trigger.id.value, (&state.slug.value, trigger.id.span));
                }
            }
        }
    }
}

fn check_lock_owners(workflow: &Workflow, findings: &mut Findings<'_>) {
    let mut owners: HashMap<&str, (&str, Span)> = HashMap::new();
    for state in &workflow.states {
        if state.kind == StateKind::Human {
            continue;
        }
        for (index, lock) in state.locks.iter().enumerate() {
            if matches!(lock.value.as_str(), "trigger" | "title") {
                continue;
            }
            match owners.get(lock.value.as_str()) {
                Some((owner, first)) => findings.push(
                    Diagnostic::at(
                        Code::LockOwner,
                        lock.span,
                        format!("`{}` is locked by `{owner}` and by `{}`", lock.value, state.slug.value),
                    )
                    .with_label("second owner")
                    .with_secondary(*first, "first owner")
                    .with_help("a variable has one owner: keep the lock on the state that decides the value, and route back to it to change it"),
                    format!("states.{}.locks.{index}", state.slug.value),
                ),
                None => {
                    owners.insert(&lock.value, (&state.slug.value, lock.span));
                }
            }
        }
    }
}
