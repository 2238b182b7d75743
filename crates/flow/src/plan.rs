//! The plan of a document: what runs in what order, without an endpoint.
//!
//! [`render`] prints one line per layer, indented per group, with each group's attempt
//! bound beside it; [`to_json`] is the same plan as data. Both read the layers the
//! walker runs ([`Group::layers`]), so the plan cannot disagree with a walk.

use serde_json::{Value, json};

use crate::document::{FlowDocument, Group, Node, join_path};

/// `flow plan`'s text.
pub fn render(document: &FlowDocument, max_attempts: Option<u32>) -> String {
    let steps = document.root.step_count();
    let mut out = format!("flow {}: {steps} step{}\n", document.id, if steps == 1 { "" } else { "s" });
    group_lines(&document.root, "", 0, max_attempts, &mut out);
    out
}

fn attempts(bound: u32) -> String {
    if bound == 1 { "1 attempt".to_string() } else { format!("up to {bound} attempts") }
}

fn group_lines(group: &Group, parent: &str, depth: usize, max_attempts: Option<u32>, out: &mut String) {
    let path = join_path(parent, &group.id);
    let indent = "  ".repeat(depth);
    let gives = if group.gives.is_empty() { String::new() } else { format!(", gives {}", group.gives.join(", ")) };
    out.push_str(&format!("{indent}{path} ({}{gives})\n", attempts(group.bound(max_attempts))));
    for (index, layer) in group.layers().iter().enumerate() {
        let names: Vec<String> = layer
            .iter()
            .map(|node| match node {
                Node::Step(step) => format!("{} [{}]", step.id, step.kind.as_str()),
                Node::Group(group) => format!("{}/", group.id),
            })
            .collect();
        out.push_str(&format!("{indent}  layer {}: {}\n", index + 1, names.join(", ")));
        for node in layer {
            if let Node::Group(child) = node {
                group_lines(child, &path, depth + 2, max_attempts, out);
            }
        }
    }
}

/// `flow plan --json`.
pub fn to_json(document: &FlowDocument, max_attempts: Option<u32>) -> Value {
    json!({
        "flow": document.id,
        "steps": document.root.step_count(),
        "root": group_json(&document.root, "", max_attempts),
    })
}

fn group_json(group: &Group, parent: &str, max_attempts: Option<u32>) -> Value {
    let path = join_path(parent, &group.id);
    let layers: Vec<Value> = group
        .layers()
        .iter()
        .map(|layer| {
            Value::Array(
                layer
                    .iter()
                    .map(|node| match node {
                        Node::Step(step) => json!({
                            "step": join_path(&path, &step.id),
                            "kind": step.kind.as_str(),
                            "needs": step.needs,
                            "state": step.state,
                        }),
                        Node::Group(child) => group_json(child, &path, max_attempts),
                    })
                    .collect(),
            )
        })
        .collect();
    json!({
        "group": path,
        "needs": group.needs,
        "attempts": group.bound(max_attempts),
        "gives": group.gives,
        "layers": layers,
    })
}
