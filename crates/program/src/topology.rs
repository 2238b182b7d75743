//! A compiled workflow's shape as JSON: what the runtime reports in the `graph-topology`
//! event and `archmax graph` prints for one workflow.

use serde_json::{Value, json};

use crate::program::{Program, WorkflowProgram};

/// A compiled workflow's topology, in the shape the front end's `graph::json` gives one workflow:
/// `{"workflow", "states", "edges"}`. A compiled workflow has no dangling edge, so no edge
/// carries `missing`. The runtime reports it in the `graph-topology` event.
pub fn topology(program: &Program, workflow: &WorkflowProgram) -> Value {
    let slug = |id: crate::program::StateId| program.str(workflow.state(id).slug);
    let states: Vec<Value> = workflow
        .states
        .iter()
        .enumerate()
        .map(|(index, state)| {
            let triggers: Vec<&str> = workflow
                .triggers
                .iter()
                .filter(|trigger| trigger.entry.0 as usize == index)
                .map(|trigger| program.str(trigger.id))
                .collect();
            json!({
                "state": program.str(state.slug),
                "type": state.kind.as_str(),
                "terminal": state.is_terminal(),
                "triggers": triggers,
            })
        })
        .collect();
    let mut edges: Vec<Value> = workflow
        .triggers
        .iter()
        .map(|trigger| json!({ "kind": "entry", "trigger": program.str(trigger.id), "to": slug(trigger.entry) }))
        .collect();
    for state in &workflow.states {
        let from = program.str(state.slug);
        for transition in &state.transitions {
            edges.push(json!({
                "kind": "transition", "from": from, "to": slug(transition.target), "type": transition.kind.as_str(),
            }));
        }
        if let Some(target) = state.on_error {
            edges.push(json!({ "kind": "on_error", "from": from, "to": slug(target) }));
        }
    }
    json!({ "workflow": program.str(workflow.slug), "states": states, "edges": edges })
}
