//! `archmax graph`: a workflow's states and edges as Mermaid, Graphviz DOT or JSON.
//!
//! Every state appears with its type; transitions are labelled with their type (when not
//! `none`); `on_error` routes are dashed; each trigger gets its own entry edge from a
//! start node named after it. No edge is dropped: one that names a state the workflow
//! does not declare leads to a node marked missing, and [`dangling`] lists them so the
//! CLI can warn. Output depends only on the workflow, in document order.

use serde_json::{Value, json};

use crate::schema::ast::{StateKind, TransitionType, Workflow};

/// One edge of the drawn graph.
struct Edge<'w> {
    from: &'w str,
    to: &'w str,
    kind: EdgeKind<'w>,
    /// The target is not a state of the workflow.
    missing: bool,
}

enum EdgeKind<'w> {
    Entry(&'w str),
    Transition(TransitionType),
    OnError,
}

fn edges(workflow: &Workflow) -> Vec<Edge<'_>> {
    let mut edges = Vec::new();
    for (index, trigger) in workflow.triggers() {
        edges.push(Edge {
            from: &trigger.id.value,
            to: &workflow.states[index].slug.value,
            kind: EdgeKind::Entry(&trigger.id.value),
            missing: false,
        });
    }
    for state in &workflow.states {
        for transition in &state.transitions {
            edges.push(Edge {
                from: &state.slug.value,
                to: &transition.to.value,
                kind: EdgeKind::Transition(transition.kind),
                missing: workflow.state(&transition.to.value).is_none(),
            });
        }
        if let Some(target) = &state.on_error {
            edges.push(Edge {
                from: &state.slug.value,
                to: &target.value,
                kind: EdgeKind::OnError,
                missing: workflow.state(&target.value).is_none(),
            });
        }
    }
    edges
}

/// Every edge of `workflow` that names a state it does not declare: `(from, to)`.
pub fn dangling(workflow: &Workflow) -> Vec<(String, String)> {
    edges(workflow)
        .into_iter()
        .filter(|edge| edge.missing)
        .map(|edge| (edge.from.to_string(), edge.to.to_string()))
        .collect()
}

/// The distinct missing targets, in the order edges name them.
fn missing_targets<'w>(edges: &[Edge<'w>]) -> Vec<&'w str> {
    let mut targets = Vec::new();
    for edge in edges.iter().filter(|edge| edge.missing) {
        if !targets.contains(&edge.to) {
            targets.push(edge.to);
        }
    }
    targets
}

/// Identifiers safe in both Mermaid and DOT.
fn node_id(prefix: &str, name: &str) -> String {
    let cleaned: String =
        name.chars().map(|character| if character.is_ascii_alphanumeric() { character } else { '_' }).collect();
    format!("{prefix}_{cleaned}")
}

fn label(workflow: &Workflow, slug: &str) -> String {
    let state = workflow.state(slug);
    let kind = state.map(|state| state.kind.as_str()).unwrap_or("agent");
    let terminal = state.is_some_and(|state| state.is_terminal());
    if terminal { format!("{slug}\\n{kind}, terminal") } else { format!("{slug}\\n{kind}") }
}

/// Mermaid: one flowchart document for one workflow; for several, each its own
/// ```` ```mermaid ```` block (a Markdown document of valid diagrams), since one Mermaid
/// document holds one diagram.
pub fn mermaid(workflows: &[&Workflow]) -> String {
    match workflows {
        [only] => mermaid_document(only),
        many => many
            .iter()
            .map(|workflow| {
                format!("```mermaid\n{}```\n", mermaid_document(workflow).trim_end_matches('\n').to_string() + "\n")
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn mermaid_document(workflow: &Workflow) -> String {
    let mut out = String::new();
    {
        out.push_str(&format!("%% workflow: {}\nflowchart TD\n", workflow.slug));
        for (_, trigger) in workflow.triggers() {
            out.push_str(&format!("    {}([\"{}\"])\n", node_id("trigger", &trigger.id.value), trigger.id.value));
        }
        for state in &workflow.states {
            let id = node_id("state", &state.slug.value);
            let text = label(workflow, &state.slug.value).replace("\\n", "<br/>");
            let shape = match state.kind {
                StateKind::Agent => format!("[\"{text}\"]"),
                StateKind::Human => format!("{{{{\"{text}\"}}}}"),
                StateKind::Grader => format!("[/\"{text}\"/]"),
                StateKind::Code => format!("[[\"{text}\"]]"),
            };
            out.push_str(&format!("    {id}{shape}\n"));
        }
        let all = edges(workflow);
        for target in missing_targets(&all) {
            out.push_str(&format!(
                "    {}[\"{target}<br/>missing: not a state\"]\n    style {} stroke:#c00,stroke-dasharray:4\n",
                node_id("state", target),
                node_id("state", target)
            ));
        }
        for edge in all {
            let line = match edge.kind {
                EdgeKind::Entry(_) => {
                    format!("    {} --> {}\n", node_id("trigger", edge.from), node_id("state", edge.to))
                }
                EdgeKind::Transition(TransitionType::None) => {
                    format!("    {} --> {}\n", node_id("state", edge.from), node_id("state", edge.to))
                }
                EdgeKind::Transition(kind) => format!(
                    "    {} -->|{}| {}\n",
                    node_id("state", edge.from),
                    kind.as_str(),
                    node_id("state", edge.to)
                ),
                EdgeKind::OnError => {
                    format!("    {} -.->|on_error| {}\n", node_id("state", edge.from), node_id("state", edge.to))
                }
            };
            out.push_str(&line);
        }
    }
    out
}

/// Graphviz DOT, one cluster per workflow, in one font family throughout.
pub fn dot(workflows: &[&Workflow]) -> String {
    let mut out = String::from(
        "digraph archmax {\n    rankdir=TB;\n    graph [fontname=\"Helvetica\"];\n    node [fontname=\"Helvetica\"];\n    edge [fontname=\"Helvetica\"];\n",
    );
    for workflow in workflows {
        let prefix = node_id("w", &workflow.slug);
        out.push_str(&format!("    subgraph cluster_{prefix} {{\n        label=\"{}\";\n", workflow.slug));
        for (_, trigger) in workflow.triggers() {
            out.push_str(&format!(
                "        {} [label=\"{}\", shape=oval, style=dashed];\n",
                node_id(&format!("{prefix}_trigger"), &trigger.id.value),
                trigger.id.value
            ));
        }
        for state in &workflow.states {
            let shape = match state.kind {
                StateKind::Agent => "box",
                StateKind::Human => "hexagon",
                StateKind::Grader => "parallelogram",
                StateKind::Code => "component",
            };
            let peripheries = if state.is_terminal() { ", peripheries=2" } else { "" };
            out.push_str(&format!(
                "        {} [label=\"{}\", shape={shape}{peripheries}];\n",
                node_id(&format!("{prefix}_state"), &state.slug.value),
                label(workflow, &state.slug.value)
            ));
        }
        let all = edges(workflow);
        for target in missing_targets(&all) {
            out.push_str(&format!(
                "        {} [label=\"{target}\\nmissing: not a state\", shape=box, style=dashed, color=red];\n",
                node_id(&format!("{prefix}_state"), target)
            ));
        }
        for edge in all {
            let (from, attributes) = match edge.kind {
                EdgeKind::Entry(_) => (node_id(&format!("{prefix}_trigger"), edge.from), String::new()),
                EdgeKind::Transition(TransitionType::None) => {
                    (node_id(&format!("{prefix}_state"), edge.from), String::new())
                }
                EdgeKind::Transition(kind) => {
                    (node_id(&format!("{prefix}_state"), edge.from), format!(" [label=\"{}\"]", kind.as_str()))
                }
                EdgeKind::OnError => {
                    (node_id(&format!("{prefix}_state"), edge.from), " [label=\"on_error\", style=dashed]".to_string())
                }
            };
            out.push_str(&format!("        {from} -> {}{attributes};\n", node_id(&format!("{prefix}_state"), edge.to)));
        }
        out.push_str("    }\n");
    }
    out.push_str("}\n");
    out
}

/// `{"workflows": [{"workflow", "states": [...], "edges": [...]}]}`.
pub fn json(workflows: &[&Workflow]) -> String {
    let documents: Vec<Value> = workflows
        .iter()
        .map(|workflow| {
            let states: Vec<Value> = workflow
                .states
                .iter()
                .map(|state| {
                    json!({
                        "state": state.slug.value,
                        "type": state.kind.as_str(),
                        "terminal": state.is_terminal(),
                        "triggers": state.triggers.iter().map(|trigger| trigger.id.value.clone()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let edges: Vec<Value> = edges(workflow)
                .iter()
                .map(|edge| match edge.kind {
                    EdgeKind::Entry(trigger) => json!({ "kind": "entry", "trigger": trigger, "to": edge.to }),
                    EdgeKind::Transition(kind) => json!({
                        "kind": "transition", "from": edge.from, "to": edge.to, "type": kind.as_str(), "missing": edge.missing,
                    }),
                    EdgeKind::OnError => {
                        json!({ "kind": "on_error", "from": edge.from, "to": edge.to, "missing": edge.missing })
                    }
                })
                .collect();
            json!({ "workflow": workflow.slug, "states": states, "edges": edges })
        })
        .collect();
    let mut text =
        serde_json::to_string_pretty(&json!({ "workflows": documents })).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

pub use archmax_program::topology::topology;
