//! The typed flow document: what the reader ([`crate::read`]) produces once a document
//! validates. Nothing here can be wrong: ids are unique among siblings and free of `.`,
//! every `needs` names a sibling, the siblings of each group are acyclic, commands are
//! argvs, operator steps have prompts and scopes are read.

use archmax_vm::kernel::WriteScope;

/// The JSON Schema (2020-12) of a flow document, for editors: the committed
/// `schemas/flow.schema.json`. The reader ([`crate::read`]) checks more than it can say.
pub const SCHEMA: &str = include_str!("../../../schemas/flow.schema.json");

/// A whole document: its id and its root group.
#[derive(Clone, Debug)]
pub struct FlowDocument {
    pub id: String,
    pub root: Group,
}

/// A node: one thing that runs, or a sub-tree.
#[derive(Clone, Debug)]
pub enum Node {
    Step(Step),
    Group(Group),
}

impl Node {
    pub fn id(&self) -> &str {
        match self {
            Node::Step(step) => &step.id,
            Node::Group(group) => &group.id,
        }
    }

    pub fn needs(&self) -> &[String] {
        match self {
            Node::Step(step) => &step.needs,
            Node::Group(group) => &group.needs,
        }
    }

    /// How many steps the node holds (a step is one).
    pub fn step_count(&self) -> usize {
        match self {
            Node::Step(_) => 1,
            Node::Group(group) => group.step_count(),
        }
    }
}

/// A group: a section with its own nodes, its repeat bound and what it promises.
#[derive(Clone, Debug)]
pub struct Group {
    pub id: String,
    pub needs: Vec<String>,
    /// `repeat.max`: the most attempts the section gets, when the document says.
    pub repeat: Option<u32>,
    pub gives: Vec<String>,
    pub nodes: Vec<Node>,
}

impl Group {
    pub fn step_count(&self) -> usize {
        self.nodes.iter().map(Node::step_count).sum()
    }

    /// The attempts the section gets: `--max-attempts` over the document's bound, else 1.
    pub fn bound(&self, max_attempts: Option<u32>) -> u32 {
        max_attempts.or(self.repeat).unwrap_or(1).max(1)
    }

    /// The nodes in layers: a node's layer is one past the deepest layer it needs, and a
    /// layer keeps the document's order. The reader refused cycles, so every node lands.
    pub fn layers(&self) -> Vec<Vec<&Node>> {
        let mut depth: Vec<Option<usize>> = vec![None; self.nodes.len()];
        // Each pass places every node whose needs are placed; a cycle-free group of n
        // nodes needs at most n passes.
        for _ in 0..self.nodes.len() {
            for (index, node) in self.nodes.iter().enumerate() {
                if depth[index].is_some() {
                    continue;
                }
                let mut deepest = Some(0);
                for need in node.needs() {
                    let placed = self.nodes.iter().position(|sibling| sibling.id() == need).and_then(|at| depth[at]);
                    deepest = match (deepest, placed) {
                        (Some(so_far), Some(layer)) => Some(so_far.max(layer + 1)),
                        _ => None,
                    };
                }
                depth[index] = deepest;
            }
        }
        let count = depth.iter().flatten().max().map_or(0, |deepest| deepest + 1);
        let mut layers: Vec<Vec<&Node>> = vec![Vec::new(); count];
        for (node, layer) in self.nodes.iter().zip(&depth) {
            if let Some(layer) = layer {
                layers[*layer].push(node);
            }
        }
        layers
    }
}

/// A step and the parts of its `run` payload archmax reads.
#[derive(Clone, Debug)]
pub struct Step {
    pub id: String,
    pub needs: Vec<String>,
    pub kind: StepKind,
    /// `run.state`: the step's name in prose and in the record.
    pub state: Option<String>,
    /// `run.prompt`, else `run.summary`.
    pub prompt: Option<String>,
    pub context: Vec<String>,
    pub scope: Option<WriteScope>,
}

/// What a step does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// One model turn that answers through `answer`.
    Llm,
    /// One gated run of an argv; `timeout_ms` bounds it.
    Command { argv: Vec<String>, timeout_ms: Option<u64> },
    /// A pause that hands the prompt to a person.
    Operator,
}

impl StepKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            StepKind::Llm => "llm",
            StepKind::Command { .. } => "command",
            StepKind::Operator => "operator",
        }
    }
}

impl FlowDocument {
    /// The path (`root.shape.specify`) of every model step, in document order.
    pub fn model_step_paths(&self) -> Vec<String> {
        fn collect(group: &Group, prefix: &str, into: &mut Vec<String>) {
            let here = join_path(prefix, &group.id);
            for node in &group.nodes {
                match node {
                    Node::Step(step) if step.kind == StepKind::Llm => into.push(join_path(&here, &step.id)),
                    Node::Step(_) => {}
                    Node::Group(inner) => collect(inner, &here, into),
                }
            }
        }
        let mut paths = Vec::new();
        collect(&self.root, "", &mut paths);
        paths
    }
}

/// `a.b.c`: a node's path from the root's id.
pub fn join_path(parent: &str, id: &str) -> String {
    if parent.is_empty() { id.to_string() } else { format!("{parent}.{id}") }
}
