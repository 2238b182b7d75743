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

/// The call graph's diagnostics, per unit: targets that are missing or unusable, then
/// calls that close a cycle, then chains nested too deep.
pub fn check(units: &[Unit]) -> Vec<(usize, Vec<Diagnostic>)> {
    let graph = CallGraph::new(units);
    let mut findings = Findings { units, by_unit: BTreeMap::new() };
    report_targets(&graph, &mut findings);
    let in_cycle = report_cycles(&graph, &mut findings);
    report_depth(&graph, &in_cycle, &mut findings);
    findings.by_unit.into_iter().collect()
}

/// The workspace's sub-workflow calls: each unit's calls, and the graph of the calls
/// whose target exists (a node per unit, an edge per caller and target).
struct CallGraph<'a> {
    units: &'a [Unit],
    index: HashMap<&'a str, usize>,
    calls: Vec<Vec<Call>>,
    graph: DiGraphMap<usize, ()>,
}

impl<'a> CallGraph<'a> {
    fn new(units: &'a [Unit]) -> Self {
        let index: HashMap<&str, usize> =
            units.iter().enumerate().map(|(position, unit)| (unit.slug.as_str(), position)).collect();
        let calls: Vec<Vec<Call>> = units.iter().map(calls).collect();
        let mut graph: DiGraphMap<usize, ()> = DiGraphMap::new();
        for (caller, unit_calls) in calls.iter().enumerate() {
            graph.add_node(caller);
            for call in unit_calls {
                if let Some(&target) = index.get(call.target.as_str()) {
                    graph.add_edge(caller, target, ());
                }
            }
        }
        Self { units, index, calls, graph }
    }

    /// The unit a call names, when the workspace has it.
    fn target(&self, call: &Call) -> Option<usize> {
        self.index.get(call.target.as_str()).copied()
    }

    /// A chain of units as their slugs, `a → b → c`.
    fn chain(&self, nodes: &[usize]) -> String {
        nodes.iter().map(|node| self.units[*node].slug.as_str()).collect::<Vec<_>>().join(" → ")
    }
}

/// The diagnostics found so far, per unit, each scoped to its workflow.
struct Findings<'a> {
    units: &'a [Unit],
    by_unit: BTreeMap<usize, Vec<Diagnostic>>,
}

impl Findings<'_> {
    fn push(&mut self, unit: usize, diagnostic: Diagnostic, path: &str) {
        self.by_unit
            .entry(unit)
            .or_default()
            .push(diagnostic.with_path(path).with_scope(Scope::Workflow(self.units[unit].slug.clone())));
    }
}

/// Every call's target must exist, load, validate, have a `manual` entry and be enabled.
fn report_targets(graph: &CallGraph, findings: &mut Findings) {
    let names: Vec<&str> = graph.units.iter().map(|unit| unit.slug.as_str()).collect();
    for (caller, calls) in graph.calls.iter().enumerate() {
        for call in calls {
            let problems = match graph.target(call) {
                None => vec![unknown_target(call, &names)],
                Some(target) => target_problems(&graph.units[target], call),
            };
            for diagnostic in problems {
                findings.push(caller, diagnostic, &call.path);
            }
        }
    }
}

/// A call whose target the workspace does not have, with the nearest name or the list.
fn unknown_target(call: &Call, names: &[&str]) -> Diagnostic {
    let diagnostic = Diagnostic::at(
        Code::UnknownWorkflowTarget,
        call.span,
        format!("the workspace has no workflow `{}` to call", call.target),
    )
    .with_label("unknown workflow");
    match did_you_mean(&call.target, names.iter().copied()) {
        Some(close) => diagnostic.with_help(format!("did you mean `archmax_workflow_{close}`?")),
        None => diagnostic.with_help(format!(
            "the slug after `archmax_workflow_` is a directory under `workflows/`: {}",
            list_names(names)
        )),
    }
}

/// What is wrong with an existing target of a call, in the order it is reported.
fn target_problems(callee: &Unit, call: &Call) -> Vec<Diagnostic> {
    let Some(workflow) = &callee.workflow else {
        return vec![
            Diagnostic::at(
                Code::InvalidTarget,
                call.span,
                format!("the workflow `{}` has no usable workflow.yaml, so it cannot be called", call.target),
            )
            .with_label("target does not load")
            .with_help(format!("fix `workflows/{}/workflow.yaml` first", call.target)),
        ];
    };
    let mut problems = Vec::new();
    if callee.has_errors() {
        problems.push(
            Diagnostic::at(
                Code::InvalidTarget,
                call.span,
                format!("the workflow `{}` does not validate, so calling it would fail", call.target),
            )
            .with_label("target has errors")
            .with_help(format!("run `archmax validate {}` and fix its errors", call.target)),
        );
    } else if workflow.manual_trigger().is_none() {
        let declared: Vec<&str> = workflow.triggers().map(|(_, trigger)| trigger.id.value.as_str()).collect();
        problems.push(
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
        );
    }
    if workflow.disabled {
        problems.push(
            Diagnostic::at(
                Code::DisabledTarget,
                call.span,
                format!("the workflow `{}` is disabled, so every call to it is refused", call.target),
            )
            .with_label("disabled target")
            .with_help("the caller still validates; re-enable the target or stop calling it"),
        );
    }
    problems
}

/// Every call that closes a cycle of calls; returns which units sit on a cycle.
fn report_cycles(graph: &CallGraph, findings: &mut Findings) -> Vec<bool> {
    let mut in_cycle = vec![false; graph.units.len()];
    for component in tarjan_scc(&graph.graph) {
        let cyclic = component.len() > 1 || component.iter().any(|node| graph.graph.contains_edge(*node, *node));
        if !cyclic {
            continue;
        }
        for node in &component {
            in_cycle[*node] = true;
        }
        for &caller in &component {
            for call in &graph.calls[caller] {
                let Some(target) = graph.target(call) else {
                    continue;
                };
                if !component.contains(&target) {
                    continue;
                }
                let chain = graph.chain(&cycle_chain(&graph.graph, caller, target, &component));
                findings.push(
                    caller,
                    Diagnostic::at(Code::DelegationCycle, call.span, format!("sub-workflow calls form a cycle: {chain}"))
                        .with_label("closes the cycle")
                        .with_help("a workflow may not call itself, directly or through others: break the cycle by removing one of the calls"),
                    &call.path,
                );
            }
        }
    }
    in_cycle
}

/// Each workflow's first call that starts a chain deeper than [`MAX_DEPTH`].
fn report_depth(graph: &CallGraph, in_cycle: &[bool], findings: &mut Findings) {
    let units = graph.units;
    let depth = longest_chains(&graph.graph, in_cycle);
    for (caller, calls) in graph.calls.iter().enumerate() {
        let mut reported = false;
        for call in calls {
            if reported {
                break;
            }
            let Some(target) = graph.target(call) else {
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
                let chain = graph.chain(&chain);
                findings.push(
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
}

/// Longest chain of calls below each workflow, ignoring cyclic parts: its length and
/// the first unit along it.
fn longest_chains(graph: &DiGraphMap<usize, ()>, in_cycle: &[bool]) -> Vec<Option<(usize, Option<usize>)>> {
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
    let mut depth: Vec<Option<(usize, Option<usize>)>> = vec![None; in_cycle.len()];
    for caller in 0..in_cycle.len() {
        longest(caller, graph, in_cycle, &mut depth);
    }
    depth
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
