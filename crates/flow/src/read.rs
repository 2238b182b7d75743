//! Reading a flow document: the file by its extension, the spanned YAML (or strict
//! JSON) tree, then every rule of the notation, each refusal a [`Diagnostic`] of the
//! compiler's registry (`AMX10xx`) with its span, its node path and a help.
//!
//! The one thing to know: the reader reports **every** problem it finds and produces a
//! [`FlowDocument`] only when none is an error, so `flow plan` and `flow run` refuse a
//! document with the same words and nothing downstream meets an unchecked value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use archmax_compiler::syntax::yaml::{self, Node as YamlNode};
use archmax_compiler::{Report, WorkflowReport};
use archmax_program::diagnostic::{Code, Diagnostic, Scope, did_you_mean};
use archmax_program::source::{SourceMap, Span};

use crate::document::{FlowDocument, Group, Node, Step, join_path};

/// The keys a node may carry.
const NODE_KEYS: [&str; 6] = ["id", "needs", "nodes", "repeat", "gives", "run"];
/// The keys of a `run` payload archmax reads.
const RUN_KEYS: [&str; 8] = ["kind", "state", "summary", "prompt", "context", "scope", "command", "timeout_ms"];
/// The step kinds, a closed vocabulary.
const KINDS: [&str; 3] = ["llm", "command", "operator"];

/// The format a document is read in, decided by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

impl Format {
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension().and_then(|extension| extension.to_str()) {
            Some("yaml" | "yml") => Some(Format::Yaml),
            Some("json") => Some(Format::Json),
            _ => None,
        }
    }
}

/// A document as read: its sources (for rendering), the findings, and the typed
/// document when there is no error.
#[derive(Debug)]
pub struct Loaded {
    /// The name the document is reported under (the path as given).
    pub name: String,
    pub sources: SourceMap,
    pub diagnostics: Vec<Diagnostic>,
    pub document: Option<FlowDocument>,
    /// The document's text (empty when it could not be read), for the record's digest.
    pub text: String,
}

impl Loaded {
    /// The findings as a report of one entry, for the compiler's renderers.
    pub fn report(&self) -> Report {
        Report { workflows: vec![WorkflowReport { slug: self.name.clone(), diagnostics: self.diagnostics.clone() }] }
    }
}

/// Reads the document at `path`, reported as `name`.
pub fn load(path: &Path, name: &str) -> Loaded {
    let mut sources = SourceMap::new();
    let Some(format) = Format::from_path(path) else {
        let diagnostic = Diagnostic::new(
            Code::FlowFile,
            None,
            format!("`{name}` is not a flow document: its extension is not `.yaml`, `.yml` or `.json`"),
        )
        .with_help("name the file `<name>.yaml` (or `.yml`) for YAML, `<name>.json` for JSON");
        return Loaded {
            name: name.to_string(),
            sources,
            diagnostics: vec![diagnostic],
            document: None,
            text: String::new(),
        };
    };
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => read_text(name, path, &text, format),
            Err(_) => {
                let diagnostic = Diagnostic::new(Code::NotUtf8, None, format!("`{name}` is not UTF-8 text"))
                    .with_help("save the document as UTF-8");
                Loaded {
                    name: name.to_string(),
                    sources,
                    diagnostics: vec![diagnostic],
                    document: None,
                    text: String::new(),
                }
            }
        },
        Err(error) => {
            let id = sources.add(name, path, "");
            let diagnostic =
                Diagnostic::at(Code::FlowFile, Span::file_start(id), format!("`{name}` cannot be read: {error}"))
                    .with_help("name an existing, readable flow document");
            Loaded {
                name: name.to_string(),
                sources,
                diagnostics: vec![diagnostic],
                document: None,
                text: String::new(),
            }
        }
    }
}

/// Reads a document from its text (the file at `path`, shown as `name`).
pub fn read_text(name: &str, path: &Path, text: &str, format: Format) -> Loaded {
    let mut sources = SourceMap::new();
    let file = sources.add(name, path, text);
    let mut diagnostics = Vec::new();
    if format == Format::Json
        && let Err(error) = serde_json::from_str::<serde_json::Value>(text)
    {
        let offset = line_offset(text, error.line(), error.column());
        diagnostics.push(
            Diagnostic::at(
                Code::FlowFile,
                Span::new(file, offset, offset),
                format!("`{name}` is not valid JSON: {error}"),
            )
            .with_help("a `.json` flow document is strict JSON; write YAML in a `.yaml` file"),
        );
        return Loaded { name: name.to_string(), sources, diagnostics, document: None, text: text.to_string() };
    }
    let loaded = yaml::load(file, text);
    diagnostics.extend(loaded.diagnostics);
    let document = match &loaded.root {
        Some(root) => {
            let mut reader = Reader { diagnostics: &mut diagnostics };
            reader.document(root)
        }
        None => {
            if loaded.empty {
                diagnostics.push(
                    Diagnostic::at(Code::FlowShape, Span::file_start(file), format!("`{name}` holds no document"))
                        .with_help("write a mapping with `id` and `root`"),
                );
            }
            None
        }
    };
    let valid = !diagnostics.iter().any(Diagnostic::is_error);
    for diagnostic in &mut diagnostics {
        diagnostic.scope = Scope::Workflow(name.to_string());
    }
    Loaded {
        name: name.to_string(),
        sources,
        diagnostics,
        document: document.filter(|_| valid),
        text: text.to_string(),
    }
}

/// The byte offset of a 1-based line and column, clamped to the text.
fn line_offset(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    (start + column.saturating_sub(1)).min(text.len())
}

struct Reader<'d> {
    diagnostics: &'d mut Vec<Diagnostic>,
}

impl Reader<'_> {
    fn report(&mut self, code: Code, span: Span, path: &str, message: String, help: &str) {
        self.diagnostics.push(Diagnostic::at(code, span, message).with_path(path).with_help(help));
    }

    fn document(&mut self, root: &YamlNode) -> Option<FlowDocument> {
        let Some(entries) = root.as_mapping() else {
            self.report(
                Code::FlowShape,
                root.span,
                "",
                format!("a flow document is a mapping, not {}", root.type_name()),
                "write `id: <name>` and `root: {id: root, nodes: [...]}`",
            );
            return None;
        };
        for entry in entries {
            let key = entry.key.scalar_text().unwrap_or_default();
            if !matches!(key, "id" | "root") {
                let hint = did_you_mean(key, ["id", "root"])
                    .map(|near| format!("did you mean `{near}`? "))
                    .unwrap_or_default();
                self.report(
                    Code::FlowShape,
                    entry.key.span,
                    key,
                    format!("`{key}` is not a key of a flow document"),
                    &format!("{hint}a flow document has `id` and `root`"),
                );
            }
        }
        let id = match root.get("id") {
            Some(node) => match node.as_str().filter(|id| !id.trim().is_empty()) {
                Some(id) => Some(id.to_string()),
                None => {
                    self.report(
                        Code::FlowShape,
                        node.span,
                        "id",
                        format!("the flow's `id` is {}, not a non-empty string", node.type_name()),
                        "name the flow: `id: change-request`",
                    );
                    None
                }
            },
            None => {
                self.report(
                    Code::FlowShape,
                    root.span,
                    "",
                    "the flow document has no `id`".to_string(),
                    "name the flow: `id: change-request`",
                );
                None
            }
        };
        let group = match root.get("root") {
            Some(node) => match self.node(node, "") {
                Some(Node::Group(group)) if !group.needs.is_empty() => {
                    let span = node.get("needs").map_or(node.span, |needs| needs.span);
                    self.report(
                        Code::FlowUnknownNeed,
                        span,
                        &group.id,
                        "the root needs something, but it has no siblings".to_string(),
                        "remove `needs` from the root",
                    );
                    None
                }
                Some(Node::Group(group)) => Some(group),
                Some(Node::Step(_)) => {
                    self.report(
                        Code::FlowShape,
                        node.span,
                        "root",
                        "`root` is a step; it must be a group with `nodes`".to_string(),
                        "give the root `nodes: [...]`",
                    );
                    None
                }
                None => None,
            },
            None => {
                self.report(
                    Code::FlowShape,
                    root.span,
                    "",
                    "the flow document has no `root`".to_string(),
                    "add `root: {id: root, nodes: [...]}`",
                );
                None
            }
        };
        Some(FlowDocument { id: id?, root: group? })
    }

    /// One node under `parent` (a path; `""` for the root).
    fn node(&mut self, node: &YamlNode, parent: &str) -> Option<Node> {
        let Some(entries) = node.as_mapping() else {
            self.report(
                Code::FlowShape,
                node.span,
                parent,
                format!("a node is a mapping, not {}", node.type_name()),
                "write `{id: <name>, ...}`",
            );
            return None;
        };
        let id = self.node_id(node, parent);
        let path = join_path(parent, id.as_deref().unwrap_or("?"));
        for entry in entries {
            let key = entry.key.scalar_text().unwrap_or_default();
            if !NODE_KEYS.contains(&key) {
                let hint =
                    did_you_mean(key, NODE_KEYS).map(|near| format!("did you mean `{near}`? ")).unwrap_or_default();
                self.report(
                    Code::FlowShape,
                    entry.key.span,
                    &path,
                    format!("`{key}` is not a key of a node"),
                    &format!("{hint}a node has `id`, `needs`, `nodes`, `repeat`, `gives` and `run`"),
                );
            }
        }
        let needs = self.names(node.get("needs"), &path, "needs", Code::FlowShape);
        match node.get("nodes") {
            Some(children) => {
                if let Some(run) = node.get("run") {
                    self.report(
                        Code::FlowShape,
                        run.span,
                        &path,
                        format!("`{path}` has both `nodes` and `run`"),
                        "a node is a group (`nodes`) or a step (`run`), not both",
                    );
                }
                let repeat = self.repeat(node.get("repeat"), &path);
                let gives = self.names(node.get("gives"), &path, "gives", Code::FlowGives);
                let nodes = self.children(children, &path);
                Some(Node::Group(Group { id: id?, needs, repeat, gives, nodes: nodes? }))
            }
            None => {
                for key in ["repeat", "gives"] {
                    if let Some(value) = node.get(key) {
                        let code = if key == "repeat" { Code::FlowRepeat } else { Code::FlowGives };
                        self.report(
                            code,
                            value.span,
                            &path,
                            format!("`{key}` sits on the step `{path}`"),
                            "only a group repeats and gives: wrap the step in a group with `nodes`",
                        );
                    }
                }
                let step = self.step(node.get("run"), &path, needs);
                Some(Node::Step(Step { id: id?, ..step? }))
            }
        }
    }

    fn node_id(&mut self, node: &YamlNode, parent: &str) -> Option<String> {
        let Some(value) = node.get("id") else {
            self.report(
                Code::FlowNodeId,
                node.span,
                parent,
                "a node has no `id`".to_string(),
                "give every node an `id` unique among its siblings",
            );
            return None;
        };
        let Some(id) = value.as_str().filter(|id| !id.trim().is_empty()) else {
            self.report(
                Code::FlowNodeId,
                value.span,
                parent,
                format!("a node's `id` is {}, not a non-empty string", value.type_name()),
                "write the id as a string: `id: verify`",
            );
            return None;
        };
        if id.contains('.') {
            self.report(
                Code::FlowNodeId,
                value.span,
                &join_path(parent, id),
                format!("the id `{id}` holds a `.`, the character node paths and session ids join names with"),
                &format!("name it without dots, such as `{}`", id.replace('.', "-")),
            );
            return None;
        }
        Some(id.to_string())
    }

    /// The items of a list, or a report that `subject` is not a list of `of`.
    fn list<'n>(
        &mut self,
        value: &'n YamlNode,
        code: Code,
        path: &str,
        subject: &str,
        of: &str,
        help: &str,
    ) -> Option<&'n [YamlNode]> {
        let items = value.as_sequence();
        if items.is_none() {
            self.report(
                code,
                value.span,
                path,
                format!("{subject} is {}, not a list of {of}", value.type_name()),
                help,
            );
        }
        items
    }

    /// A list of names (`needs`, `gives`): strings, each once.
    fn names(&mut self, value: Option<&YamlNode>, path: &str, key: &str, code: Code) -> Vec<String> {
        let Some(value) = value else { return Vec::new() };
        let subject = format!("`{key}`");
        let Some(items) = self.list(value, code, path, &subject, "names", &format!("write `{key}: [name, ...]`"))
        else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for item in items {
            match item.as_str().filter(|name| !name.trim().is_empty()) {
                Some(name) if names.iter().any(|seen| seen == name) => {
                    self.report(code, item.span, path, format!("`{key}` names `{name}` twice"), "list each name once");
                }
                Some(name) => names.push(name.to_string()),
                None => self.report(
                    code,
                    item.span,
                    path,
                    format!("an entry of `{key}` is {}, not a name", item.type_name()),
                    "write each entry as a non-empty string",
                ),
            }
        }
        names
    }

    fn repeat(&mut self, value: Option<&YamlNode>, path: &str) -> Option<u32> {
        let value = value?;
        let max = value.get("max").filter(|_| value.as_mapping().is_some_and(|entries| entries.len() == 1));
        match max.and_then(YamlNode::as_i64).and_then(|max| u32::try_from(max).ok()).filter(|max| *max >= 1) {
            Some(max) => Some(max),
            None => {
                self.report(
                    Code::FlowRepeat,
                    value.span,
                    path,
                    format!("the repeat of `{path}` is not `{{max: N}}` with a whole N of at least 1"),
                    "write `repeat: {max: 3}`",
                );
                None
            }
        }
    }

    fn children(&mut self, value: &YamlNode, path: &str) -> Option<Vec<Node>> {
        let subject = format!("`nodes` of `{path}`");
        let items = self.list(value, Code::FlowShape, path, &subject, "nodes", "write `nodes: [{id: ...}, ...]`")?;
        let mut nodes = Vec::new();
        let mut spans: BTreeMap<String, Span> = BTreeMap::new();
        let mut complete = true;
        let mut unread: BTreeSet<&str> = BTreeSet::new();
        for item in items {
            match self.node(item, path) {
                Some(node) => {
                    let span = item.get("id").map_or(item.span, |id| id.span);
                    if let Some(first) = spans.get(node.id()) {
                        self.diagnostics.push(
                            Diagnostic::at(
                                Code::FlowNodeId,
                                span,
                                format!("`{}` is the id of two siblings in `{path}`", node.id()),
                            )
                            .with_secondary(*first, "first used here")
                            .with_path(join_path(path, node.id()))
                            .with_help("ids are unique among siblings: rename one"),
                        );
                        complete = false;
                        continue;
                    }
                    spans.insert(node.id().to_string(), span);
                    nodes.push((node, item));
                }
                None => {
                    complete = false;
                    // A sibling that failed to read is still a sibling: its id (when it
                    // names one) answers the others' `needs`, so its own diagnostic is
                    // not echoed as theirs.
                    if let Some(id) = item.get("id").and_then(YamlNode::as_str) {
                        unread.insert(id);
                    }
                }
            }
        }
        let ids: BTreeSet<&str> = nodes.iter().map(|(node, _)| node.id()).collect();
        for (node, item) in &nodes {
            for need in node.needs() {
                if need == node.id() || !(ids.contains(need.as_str()) || unread.contains(need.as_str())) {
                    let span = item.get("needs").map_or(item.span, |needs| needs.span);
                    let near = did_you_mean(need, ids.iter().copied().filter(|id| *id != node.id()));
                    let hint = near.map(|near| format!("did you mean `{near}`? ")).unwrap_or_default();
                    self.report(
                        Code::FlowUnknownNeed,
                        span,
                        &join_path(path, node.id()),
                        format!("`{}` needs `{need}`, which is not one of its siblings in `{path}`", node.id()),
                        &format!(
                            "{hint}an edge joins siblings only; to wait for a step inside a group, need the group"
                        ),
                    );
                }
            }
        }
        // A cycle among the siblings that read is refused beside any unknown need or
        // unread sibling: an edge to a name that is not a read sibling joins no cycle.
        self.cycles(&nodes, path);
        complete.then(|| nodes.into_iter().map(|(node, _)| node).collect())
    }

    /// Reports one cycle among siblings, if there is one.
    fn cycles(&mut self, nodes: &[(Node, &YamlNode)], path: &str) {
        let index = |id: &str| nodes.iter().position(|(node, _)| node.id() == id);
        // Colours of a depth-first search: 0 unvisited, 1 on the stack, 2 done.
        let mut colour = vec![0u8; nodes.len()];
        for start in 0..nodes.len() {
            if colour[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            colour[start] = 1;
            while let Some((at, next)) = stack.last().copied() {
                let needs = nodes[at].0.needs();
                if next == needs.len() {
                    colour[at] = 2;
                    stack.pop();
                    continue;
                }
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                // A node needing itself is an unknown need, reported as that alone.
                let Some(need) = index(&needs[next]).filter(|need| *need != at) else { continue };
                match colour[need] {
                    0 => {
                        colour[need] = 1;
                        stack.push((need, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|(node, _)| *node == need).unwrap_or(0);
                        let mut names: Vec<&str> = stack[from..].iter().map(|(node, _)| nodes[*node].0.id()).collect();
                        names.push(nodes[need].0.id());
                        let (node, item) = &nodes[at];
                        let span = item.get("needs").map_or(item.span, |needs| needs.span);
                        self.report(
                            Code::FlowNeedsCycle,
                            span,
                            &join_path(path, node.id()),
                            format!("the siblings of `{path}` need each other in a cycle: {}", names.join(" → ")),
                            "remove one edge of the cycle; a section that should run again is a group with `repeat`",
                        );
                        return;
                    }
                    _ => {}
                }
            }
        }
    }
}

mod run;
#[cfg(test)]
mod tests;
