//! `archmax graph --flow FILE`: a flow document drawn, groups as clusters.
//!
//! Mermaid draws each group as a `subgraph` and an edge to a group ends at the
//! subgraph; DOT draws each group as a `cluster` holding an entry point the group's
//! edges end at. Node ids are numbered breadth-first from the root (`n0`, `n1`, …), so a
//! drawing is stable and no id needs escaping; the labels carry the names.

use crate::document::{FlowDocument, Group, Node};

/// The numbered nodes of a document, breadth-first, with their parents.
struct Numbered<'d> {
    nodes: Vec<(&'d Node, Option<usize>)>,
}

impl<'d> Numbered<'d> {
    fn of(root: &'d Node) -> Numbered<'d> {
        let mut nodes = vec![(root, None)];
        let mut next = 0;
        while next < nodes.len() {
            if let Node::Group(group) = nodes[next].0 {
                for child in &group.nodes {
                    nodes.push((child, Some(next)));
                }
            }
            next += 1;
        }
        Numbered { nodes }
    }

    fn children(&self, parent: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(move |index| self.nodes[*index].1 == Some(parent))
    }

    /// `(from, to)` for every `needs` edge, by number.
    fn edges(&self) -> Vec<(usize, usize)> {
        let mut edges = Vec::new();
        for (index, (node, parent)) in self.nodes.iter().enumerate() {
            for need in node.needs() {
                let from =
                    self.children(parent.unwrap_or(usize::MAX)).find(|sibling| self.nodes[*sibling].0.id() == need);
                if let Some(from) = from {
                    edges.push((from, index));
                }
            }
        }
        edges
    }
}

fn group_label(group: &Group) -> String {
    let bound = group.bound(None);
    let mut label = group.id.clone();
    if bound > 1 {
        label.push_str(&format!(" (up to {bound} attempts)"));
    }
    if !group.gives.is_empty() {
        label.push_str(&format!(", gives {}", group.gives.join(", ")));
    }
    label
}

fn step_label(node: &Node) -> String {
    match node {
        Node::Step(step) => format!("{} [{}]", step.id, step.kind.as_str()),
        Node::Group(group) => group_label(group),
    }
}

fn quoted(text: &str) -> String {
    text.replace('"', "'")
}

/// The document as a Mermaid flowchart.
pub fn mermaid(document: &FlowDocument) -> String {
    let root = Node::Group(document.root.clone());
    let numbered = Numbered::of(&root);
    let mut out = format!("%% flow {}\nflowchart TD\n", document.id);
    mermaid_node(&numbered, 0, 1, &mut out);
    for (from, to) in numbered.edges() {
        out.push_str(&format!("  n{from} --> n{to}\n"));
    }
    out
}

fn mermaid_node(numbered: &Numbered<'_>, index: usize, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let node = numbered.nodes[index].0;
    match node {
        Node::Step(_) => out.push_str(&format!("{indent}n{index}[\"{}\"]\n", quoted(&step_label(node)))),
        Node::Group(_) => {
            out.push_str(&format!("{indent}subgraph n{index}[\"{}\"]\n", quoted(&step_label(node))));
            for child in numbered.children(index).collect::<Vec<_>>() {
                mermaid_node(numbered, child, depth + 1, out);
            }
            out.push_str(&format!("{indent}end\n"));
        }
    }
}

/// The document as Graphviz DOT, each group a cluster.
pub fn dot(document: &FlowDocument) -> String {
    let root = Node::Group(document.root.clone());
    let numbered = Numbered::of(&root);
    let mut out = format!("digraph \"{}\" {{\n  compound=true;\n  node [shape=box];\n", quoted(&document.id));
    dot_node(&numbered, 0, 1, &mut out);
    for (from, to) in numbered.edges() {
        out.push_str(&format!("  n{from} -> n{to};\n"));
    }
    out.push_str("}\n");
    out
}

fn dot_node(numbered: &Numbered<'_>, index: usize, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let node = numbered.nodes[index].0;
    match node {
        Node::Step(_) => out.push_str(&format!("{indent}n{index} [label=\"{}\"];\n", quoted(&step_label(node)))),
        Node::Group(_) => {
            out.push_str(&format!("{indent}subgraph cluster_{index} {{\n"));
            out.push_str(&format!("{indent}  label=\"{}\";\n", quoted(&step_label(node))));
            out.push_str(&format!("{indent}  n{index} [shape=point, label=\"\"];\n"));
            for child in numbered.children(index).collect::<Vec<_>>() {
                dot_node(numbered, child, depth + 1, out);
            }
            out.push_str(&format!("{indent}}}\n"));
        }
    }
}
