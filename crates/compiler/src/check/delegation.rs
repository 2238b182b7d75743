//! The sub-workflow call graph: a state calls workflow `x` by allowing
//! `archmax_workflow_x`. Every target must exist, validate and have a `manual` entry;
//! the graph must be acyclic; no chain of calls may nest deeper than the runtime's bound.

use std::collections::{BTreeMap, HashMap};

use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

use crate::diagnostic::{Code, Diagnostic, Scope, did_you_mean, list_names};
use crate::source::Span;
use crate::tools::delegation_target;

use super::Unit;

/// Deepest chain of nested sub-workflow calls the runtime runs.
pub const MAX_DEPTH: usize = 3;

/// One `archmax_workflow_<slug>` entry.
#[derive(Clone, Debug)]
pub struct Call {
    pub target: String,
    pub span: Span,
    pub path: String,
    /// The state whose allow list names it; `None` for `allow_always`.
    pub state: Option<String>,
}

/// Every delegation entry of a unit's workflow.
pub fn calls(unit: &Unit) -> Vec<Call> {
    let Some(workflow) = &unit.workflow else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    if let Some(allow) = &workflow.tools.allow_always {
        for (index, entry) in allow.value.iter().enumerate() {
            if let Some(target) = delegation_target(entry.name()) {
                calls.push(Call {
                    target: target.to_string(),
                    span: entry.tool.span,
                    path: format!("tools.allow_always.{index}"),
                    state: None,
                });
            }
        }
    }
    for state in &workflow.states {
        for (index, entry) in state.tools.allow.iter().enumerate() {
            if let Some(target) = delegation_target(entry.name()) {
                calls.push(Call {
                    target: target.to_string(),
                    span: entry.tool.span,
                    path: format!("states.{}.tools.allow.{index}", state.slug.value),
                    state: Some(state.slug.value.clone()),
                });
            }
        }
    }
    calls
}

pub fn check(units: &[Unit]) -> Vec<(usize, Vec<Diagnostic>)> {
    let index: HashMap<&str, usize> =
        units.iter().enumerate().map(|(position, unit)| (unit.slug.as_str(), position)).collect();
    let names: Vec<&str> = units.iter().map(|unit| unit.slug.as_str()).collect();
    let all_calls: Vec<Vec<Call>> = units.iter().map(calls).collect();
    let mut findings: BTreeMap<usize, Vec<Diagnostic>> = BTreeMap::new();
    let mut push = |unit: usize, diagnostic: Diagnostic, path: &str| {
        findings
            .entry(unit)
            .or_default()
            .push(diagnostic.with_path(path).with_scope(Scope::Workflow(units[unit].slug.clone())));
    };

    let mut graph: DiGraphMap<usize, ()> = DiGraphMap::new();
    for (caller, calls) in all_calls.iter().enumerate() {
        graph.add_node(caller);
        for call in calls {
            let Some(&target) = index.get(call.target.as_str()) else {
                let diagnostic = Diagnostic::at(
                    Code::UnknownWorkflowTarget,
                    call.span,
                    format!("the workspace has no workflow `{}` to call", call.target),
                )
                .with_label("unknown workflow");
                let diagnostic = match did_you_mean(&call.target, names.iter().copied()) {
                    Some(close) => diagnostic.with_help(format!("did you mean `archmax_workflow_{close}`?")),
                    None => diagnostic.with_help(format!(
                        "the slug after `archmax_workflow_` is a directory under `workflows/`: {}",
                        list_names(&names)
                    )),
                };
                push(caller, diagnostic, &call.path);
                continue;
            };
            graph.add_edge(caller, target, ());
            let callee = &units[target];
            match &callee.workflow {
                None => push(
                    caller,
                    Diagnostic::at(
                        Code::InvalidTarget,
                        call.span,
                        format!("the workflow `{}` has no usable workflow.yaml, so it cannot be called", call.target),
                    )
                    .with_label("target does not load")
                    .with_help(format!("fix `workflows/{}/workflow.yaml` first", call.target)),
                    &call.path,
                ),
                Some(workflow) => {
                    if callee.has_errors() {
                        push(
                            caller,
                            Diagnostic::at(
                                Code::InvalidTarget,
                                call.span,
                                format!("the workflow `{}` does not validate, so calling it would fail", call.target),
                            )
                            .with_label("target has errors")
                            .with_help(format!("run `archmax validate {}` and fix its errors", call.target)),
                            &call.path,
                        );
                    } else if workflow.manual_trigger().is_none() {
                        let declared: Vec<&str> =
                            workflow.triggers().map(|(_, trigger)| trigger.id.value.as_str()).collect();
                        push(
                            caller,
                            Diagnostic::at(
                                Code::TargetNoManual,
                                call.span,
                                format!("the workflow `{}` has no `manual` trigger, so a call has no state to start in", call.target),
                            )
                            .with_label("no manual entry")
                            .with_help(format!(
                                "declare `triggers: {{ manual: … }}` on the state a caller should enter (it declares {})",
                                list_names(&declared)
                            )),
                            &call.path,
                        );
                    }
                    if workflow.disabled {
                        push(
                            caller,
                            Diagnostic::at(
                                Code::DisabledTarget,
                                call.span,
                                format!("the workflow `{}` is disabled, so every call to it is refused", call.target),
                            )
                            .with_label("disabled target")
                            .with_help("the caller still validates; re-enable the target or stop calling it"),
                            &call.path,
                        );
                    }
                }
            }
        }
    }

    let mut in_cycle = vec![false; units.len()];
    for component in tarjan_scc(&graph) {
        let cyclic = component.len() > 1 || component.iter().any(|node| graph.contains_edge(*node, *node));
        if !cyclic {
            continue;
        }
        for node in &component {
            in_cycle[*node] = true;
        }
        for &caller in &component {
            for call in &all_calls[caller] {
                let Some(&target) = index.get(call.target.as_str()) else {
                    continue;
                };
                if !component.contains(&target) {
                    continue;
                }
                let chain = cycle_chain(&graph, caller, target, &component)
                    .iter()
                    .map(|node| units[*node].slug.as_str())
                    .collect::<Vec<_>>()
                    .join(" → ");
                push(
                    caller,
                    Diagnostic::at(Code::DelegationCycle, call.span, format!("sub-workflow calls form a cycle: {chain}"))
                        .with_label("closes the cycle")
                        .with_help("a workflow may not call itself, directly or through others: break the cycle by removing one of the calls"),
                    &call.path,
                );
            }
        }
    }

    // Longest chain of calls below each workflow, ignoring cyclic parts.
    let mut depth: Vec<Option<(usize, Option<usize>)>> = vec![None; units.len()];
    fn longest(
        node: usize,
        graph: &DiGraphMap<usize, ()>,
        in_cycle: &[bool],
        depth: &mut Vec<Option<(usize, Option<usize>)>>,
    ) -> usize {
        if let Some((value, _)) = depth[node] {
            return value;
        }
        depth[node] = Some((0, None));
        let mut best = (0, None);
        for next in graph.neighbors(node) {
            if in_cycle[next] && in_cycle[node] {
                continue;
            }
            let below = 1 + longest(next, graph, in_cycle, depth);
            if below > best.0 {
                best = (below, Some(next));
            }
        }
        depth[node] = Some(best);
        best.0
    }
    for caller in 0..units.len() {
        longest(caller, &graph, &in_cycle, &mut depth);
    }
    for (caller, calls) in all_calls.iter().enumerate() {
        let mut reported = false;
        for call in calls {
            if reported {
                break;
            }
            let Some(&target) = index.get(call.target.as_str()) else {
                continue;
            };
            let below = depth[target].map(|(value, _)| value).unwrap_or(0);
            if 1 + below > MAX_DEPTH {
                let mut chain = vec![caller, target];
                let mut cursor = target;
                while let Some((_, Some(next))) = depth[cursor] {
                    chain.push(next);
                    cursor = next;
                    if chain.len() > units.len() + 1 {
                        break;
                    }
                }
                let chain = chain.iter().map(|node| units[*node].slug.as_str()).collect::<Vec<_>>().join(" → ");
                push(
                    caller,
                    Diagnostic::at(
                        Code::DelegationDepth,
                        call.span,
                        format!("this call starts a chain of {} nested sub-workflow calls ({chain}); the limit is {MAX_DEPTH}", 1 + below),
                    )
                    .with_label("too deep")
                    .with_help("flatten the chain: let a workflow nearer the top call the deepest work directly"),
                    &call.path,
                );
                reported = true;
            }
        }
    }
    findings.into_iter().collect()
}

/// The path `caller → target → … → caller` inside one strongly connected component.
fn cycle_chain(graph: &DiGraphMap<usize, ()>, caller: usize, target: usize, component: &[usize]) -> Vec<usize> {
    if caller == target {
        return vec![caller, caller];
    }
    let mut previous: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([target]);
    while let Some(node) = queue.pop_front() {
        if node == caller {
            break;
        }
        for next in graph.neighbors(node) {
            if component.contains(&next) && next != target && !previous.contains_key(&next) {
                previous.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    let mut path = vec![caller];
    let mut cursor = caller;
    while let Some(&before) = previous.get(&cursor) {
        path.push(before);
        cursor = before;
    }
    path.reverse();
    let mut chain = vec![caller];
    chain.extend(path);
    chain
}
