//! Which `${{name}}` guards are guaranteed.
//!
//! A guard in a state's `tools.allow` reads a variable at call time; when nothing
//! guarantees the variable is set, the guard cannot resolve and the session fails. A
//! name is guaranteed in state `S` when it is `trigger`, when every trigger whose entry
//! can reach `S` requires it, or when some trigger or some state's exit dominates `S`
//! and requires it. The dominator analysis runs over a graph where each state `X` has an
//! exit node `X'` (reached only once `X`'s `requires` hold) leading to its transitions,
//! while `on_error` routes leave `X` directly, since a failure skips the `requires` check.

use std::collections::BTreeSet;

use petgraph::algo::dominators::simple_fast;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::Bfs;

use crate::diagnostic::{Code, Diagnostic};
use crate::schema::ast::{ToolEntry, Workflow};
use crate::source::Span;

use super::Findings;
use super::follow_on::Reach;
use super::variables::Declared;

enum Node {
    Root,
    Trigger(usize),
    State,
    Exit(usize),
}

struct Guarantees {
    graph: DiGraph<Node, ()>,
    root: NodeIndex,
    state_nodes: Vec<NodeIndex>,
    /// For each trigger (in `Workflow::triggers` order), its `requires` names.
    trigger_requires: Vec<BTreeSet<String>>,
    /// For each trigger, the states its entry reaches.
    trigger_reach: Vec<Vec<bool>>,
}

impl Guarantees {
    fn new(workflow: &Workflow) -> Guarantees {
        let mut graph = DiGraph::new();
        let root = graph.add_node(Node::Root);
        let state_nodes: Vec<NodeIndex> = workflow.states.iter().map(|_| graph.add_node(Node::State)).collect();
        let exit_nodes: Vec<NodeIndex> =
            (0..workflow.states.len()).map(|index| graph.add_node(Node::Exit(index))).collect();
        for (index, state) in workflow.states.iter().enumerate() {
            graph.add_edge(state_nodes[index], exit_nodes[index], ());
            // A person's decision leaves a human state without its `requires` being held.
            let leaves_from =
                if state.kind == crate::schema::ast::StateKind::Human { state_nodes[index] } else { exit_nodes[index] };
            for transition in &state.transitions {
                if let Some(target) = workflow.state_index(&transition.to.value) {
                    graph.add_edge(leaves_from, state_nodes[target], ());
                }
            }
            if let Some(target) = state.on_error.as_ref().and_then(|target| workflow.state_index(&target.value)) {
                graph.add_edge(state_nodes[index], state_nodes[target], ());
            }
        }
        let mut trigger_requires = Vec::new();
        let mut trigger_nodes = Vec::new();
        for (position, (entry, trigger)) in workflow.triggers().enumerate() {
            let node = graph.add_node(Node::Trigger(position));
            graph.add_edge(root, node, ());
            graph.add_edge(node, state_nodes[entry], ());
            trigger_nodes.push(node);
            trigger_requires.push(trigger.requires.iter().map(|entry| entry.name.value.clone()).collect());
        }
        let trigger_reach = trigger_nodes
            .iter()
            .map(|node| {
                // State `i` is node `i + 1`: the root was added first.
                let mut reached = vec![false; workflow.states.len()];
                let mut bfs = Bfs::new(&graph, *node);
                while let Some(visited) = bfs.next(&graph) {
                    if let Some(slot) = visited.index().checked_sub(1).and_then(|index| reached.get_mut(index)) {
                        *slot = true;
                    }
                }
                reached
            })
            .collect();
        Guarantees { graph, root, state_nodes, trigger_requires, trigger_reach }
    }

    /// True when `name` is set whenever the session stands in state `state`.
    fn guaranteed(
        &self,
        workflow: &Workflow,
        state: usize,
        name: &str,
        dominators: &petgraph::algo::dominators::Dominators<NodeIndex>,
    ) -> bool {
        if name == "trigger" {
            return true;
        }
        if name == "title" {
            return false;
        }
        let reaching: Vec<usize> =
            (0..self.trigger_reach.len()).filter(|trigger| self.trigger_reach[*trigger][state]).collect();
        if !reaching.is_empty() && reaching.iter().all(|trigger| self.trigger_requires[*trigger].contains(name)) {
            return true;
        }
        let Some(chain) = dominators.strict_dominators(self.state_nodes[state]) else {
            return false;
        };
        for dominator in chain {
            match self.graph[dominator] {
                Node::Exit(owner) if workflow.states[owner].requires.iter().any(|required| required.value == name) => {
                    return true;
                }
                Node::Trigger(trigger) if self.trigger_requires[trigger].contains(name) => return true,
                _ => {}
            }
        }
        false
    }
}

/// The variables an entry's guards read: its globs', and those of globs dropped for a
/// malformed reference beside them.
fn references(entry: &ToolEntry) -> Vec<(String, Span)> {
    entry
        .globs()
        .flat_map(|glob| glob.template.references().map(move |(path, _)| (path.root.clone(), glob.text.span)))
        .chain(entry.partial_references.iter().cloned())
        .collect()
}

pub fn check(workflow: &Workflow, findings: &mut Findings<'_>) {
    let needs_analysis = workflow
        .states
        .iter()
        .flat_map(|state| state.tools.allow.iter())
        .chain(workflow.tools.allow_always.iter().flat_map(|allow| allow.value.iter()))
        .any(|entry| !references(entry).is_empty());
    if !needs_analysis {
        return;
    }
    let guarantees = Guarantees::new(workflow);
    let dominators = simple_fast(&guarantees.graph, guarantees.root);
    let reach = Reach::new(workflow);
    let declared = Declared::new(workflow);
    for (index, state) in workflow.states.iter().enumerate() {
        if reach.hidden_by_open_edge(index) {
            continue;
        }
        for (entry_index, entry) in state.tools.allow.iter().enumerate() {
            let mut reported = BTreeSet::new();
            for (name, span) in references(entry) {
                if reported.contains(&name) || guarantees.guaranteed(workflow, index, &name, &dominators) {
                    continue;
                }
                findings.push(
                    unguaranteed(&name, span, &format!("the state `{}`", state.slug.value), &declared),
                    format!("states.{}.tools.allow.{entry_index}", state.slug.value),
                );
                reported.insert(name);
            }
        }
    }
    if let Some(allow) = &workflow.tools.allow_always {
        for (entry_index, entry) in allow.value.iter().enumerate() {
            let mut reported = BTreeSet::new();
            for (name, span) in references(entry) {
                let everywhere = name == "trigger"
                    || (name != "title"
                        && !guarantees.trigger_requires.is_empty()
                        && guarantees.trigger_requires.iter().all(|required| required.contains(&name)));
                if everywhere || reported.contains(&name) {
                    continue;
                }
                findings.push(
                    unguaranteed(&name, span, "every state", &declared),
                    format!("tools.allow_always.{entry_index}"),
                );
                reported.insert(name);
            }
        }
    }
}

fn unguaranteed(name: &str, span: Span, place: &str, declared: &Declared) -> Diagnostic {
    let help = if let Some(close) = declared.near_miss(name) {
        format!("did you mean `{close}`? No trigger or state declares `{name}`")
    } else if name == "title" {
        "`title` is set by the agent whenever it chooses and is never guaranteed: guard on a variable a trigger or an earlier state requires".to_string()
    } else {
        format!(
            "require `{name}` on every trigger that leads here, or in the `requires` of a state every path passes through first, and lock it"
        )
    };
    Diagnostic::at(
        Code::UnguaranteedReference,
        span,
        format!("the guard reads `{name}`, which nothing guarantees is set in {place}; if it is unset the guarded call fails the session"),
    )
    .with_label("may not resolve")
    .with_help(help)
}
