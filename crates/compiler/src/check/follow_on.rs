//! Which graph findings an unknown target would cause, so they are not reported.
//!
//! A transition or `on_error` that names no state (AMX0300) is an edge that leads
//! somewhere the author meant but the graph does not have. A misspelt `transitions`,
//! `on_error` or `triggers` key (AMX0100 with its "did you mean") is the same: edges or
//! entries the author wrote that the graph cannot see. Every state that edge could
//! have reached looks unreachable, and a guard in such a state looks unguaranteed, though
//! fixing the typo may make both findings vanish. Like rustc after an unresolved name,
//! the checks report the cause alone: the one thing to know is that an open edge counts
//! only when its own state is reachable, since a typo in an unreachable state cannot
//! hide anything.

use petgraph::graph::NodeIndex;
use petgraph::visit::Bfs;

use crate::schema::ast::Workflow;

use super::graph::state_graph;

/// What the triggers reach, and whether a reached state has an edge to no state.
pub struct Reach {
    /// Indexed like `Workflow::states`.
    reached: Vec<bool>,
    /// A reached state has a transition or `on_error` whose target is unknown, or lost
    /// its edges to a misspelt key; or some state lost its triggers so.
    open_edge: bool,
}

impl Reach {
    pub fn new(workflow: &Workflow) -> Reach {
        let graph = state_graph(workflow);
        let mut reached = vec![false; workflow.states.len()];
        for (entry, _) in workflow.triggers() {
            let mut bfs = Bfs::new(&graph, NodeIndex::new(entry));
            while let Some(node) = bfs.next(&graph) {
                reached[node.index()] = true;
            }
        }
        let open_edge = workflow.states.iter().zip(&reached).any(|(state, reached)| {
            *reached
                && (state.lost_edges()
                    || state
                        .transitions
                        .iter()
                        .map(|transition| &transition.to)
                        .chain(state.on_error.as_ref())
                        .any(|target| workflow.state_index(&target.value).is_none()))
        }) || workflow.states.iter().any(|state| state.misspelt.contains(&"triggers"));
        Reach { reached, open_edge }
    }

    pub fn is_reached(&self, state: usize) -> bool {
        self.reached.get(state).copied().unwrap_or(false)
    }

    /// True when a finding about the unreached state `state` may be the unknown target's
    /// doing: then only the AMX0300 is reported.
    pub fn hidden_by_open_edge(&self, state: usize) -> bool {
        self.open_edge && !self.is_reached(state)
    }
}
