//! A YAML 1.2 loader that keeps a span on every node.
//!
//! Built on `saphyr-parser`'s event stream rather than a generic document type, so the
//! loader controls what a workflow file may do: a duplicate key is reported with both
//! locations (and the later entry dropped), alias expansion is bounded by a node budget,
//! nesting depth is bounded, and a second document is refused. Plain scalars resolve
//! under the YAML 1.2 core schema (`yes` is a string, `0o17` an integer).
//!
//! The parser counts positions in characters; spans here are byte offsets, converted
//! through a [`CharOffsets`] table, so they can be handed to any renderer as they are.
//! The loader never recurses, so no input can overflow the stack.

use std::borrow::Cow;
use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span as ParserSpan, Tag};

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{FileId, Span};

use super::yaml_errors::ScanProblem;

/// Deepest nesting of collections a document may have.
pub const MAX_DEPTH: usize = 64;
/// Most nodes a document may hold, aliases counted as expanded.
pub const MAX_NODES: usize = 100_000;
/// Most nodes all alias expansions of a document may add together.
pub const MAX_ALIAS_NODES: usize = 10_000;
/// Largest YAML file the loader reads.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// A YAML node with the byte span it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Scalar(Scalar),
    Sequence(Vec<Node>),
    Mapping(Vec<Entry>),
}

/// One key-value pair of a mapping, in document order.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: Node,
    pub value: Node,
}

/// A scalar: its text as written (after YAML unescaping) and its core-schema value.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    pub text: String,
    pub value: ScalarValue,
    pub style: ScalarKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ScalarValue {
    Null,
    Bool(bool),
    Integer(i64),
    Float(f64),
    String,
}

/// How a scalar was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarKind {
    Plain,
    Quoted,
    Block,
}

impl Node {
    /// The text of a string scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar(Scalar { text, value: ScalarValue::String, .. }) => Some(text),
            _ => None,
        }
    }

    /// The text of any scalar as written: how a mapping key is compared.
    pub fn scalar_text(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar(scalar) => Some(&scalar.text),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, NodeKind::Scalar(Scalar { value: ScalarValue::Null, .. }))
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.kind {
            NodeKind::Scalar(Scalar { value: ScalarValue::Bool(value), .. }) => Some(value),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self.kind {
            NodeKind::Scalar(Scalar { value: ScalarValue::Integer(value), .. }) => Some(value),
            _ => None,
        }
    }

    /// An integer or a float, as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match self.kind {
            NodeKind::Scalar(Scalar { value: ScalarValue::Integer(value), .. }) => Some(value as f64),
            NodeKind::Scalar(Scalar { value: ScalarValue::Float(value), .. }) => Some(value),
            _ => None,
        }
    }

    pub fn as_mapping(&self) -> Option<&[Entry]> {
        match &self.kind {
            NodeKind::Mapping(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn as_sequence(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Sequence(items) => Some(items),
            _ => None,
        }
    }

    /// The value under a string key of a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_mapping()?.iter().find(|entry| entry.key.scalar_text() == Some(key)).map(|entry| &entry.value)
    }

    /// A short name for the node's type, for "expected X, found Y" messages.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Mapping(_) => "a mapping",
            NodeKind::Sequence(_) => "a list",
            NodeKind::Scalar(scalar) => match scalar.value {
                ScalarValue::Null => "null",
                ScalarValue::Bool(_) => "a boolean",
                ScalarValue::Integer(_) => "an integer",
                ScalarValue::Float(_) => "a number",
                ScalarValue::String => "a string",
            },
        }
    }

    /// Converts to JSON; keys are compared as written. Depth is bounded by the loader.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.kind {
            NodeKind::Scalar(scalar) => match scalar.value {
                ScalarValue::Null => serde_json::Value::Null,
                ScalarValue::Bool(value) => serde_json::Value::Bool(value),
                ScalarValue::Integer(value) => serde_json::Value::from(value),
                ScalarValue::Float(value) => serde_json::Number::from_f64(value)
                    .map(serde_json::Value::Number)
                    .unwrap_or(serde_json::Value::Null),
                ScalarValue::String => serde_json::Value::String(scalar.text.clone()),
            },
            NodeKind::Sequence(items) => serde_json::Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Mapping(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|entry| {
                        let key = entry
                            .key
                            .scalar_text()
                            .map(str::to_string)
                            .unwrap_or_else(|| entry.key.to_json().to_string());
                        (key, entry.value.to_json())
                    })
                    .collect(),
            ),
        }
    }

    /// How many nodes this subtree holds.
    fn count(&self) -> usize {
        let mut total = 0;
        let mut stack = vec![self];
        while let Some(node) = stack.pop() {
            total += 1;
            match &node.kind {
                NodeKind::Scalar(_) => {}
                NodeKind::Sequence(items) => stack.extend(items),
                NodeKind::Mapping(entries) => {
                    for entry in entries {
                        stack.push(&entry.key);
                        stack.push(&entry.value);
                    }
                }
            }
        }
        total
    }
}

/// Maps the parser's character positions to byte offsets.
pub struct CharOffsets {
    /// Byte offset of each character, plus one past the end; empty for ASCII text.
    offsets: Vec<u32>,
    len: usize,
}

impl CharOffsets {
    pub fn new(text: &str) -> CharOffsets {
        let offsets = if text.is_ascii() {
            Vec::new()
        } else {
            text.char_indices().map(|(offset, _)| offset as u32).chain(std::iter::once(text.len() as u32)).collect()
        };
        CharOffsets { offsets, len: text.len() }
    }

    pub fn byte(&self, char_index: usize) -> usize {
        if self.offsets.is_empty() {
            char_index.min(self.len)
        } else {
            self.offsets.get(char_index).map(|offset| *offset as usize).unwrap_or(self.len)
        }
    }
}

/// The result of loading one file: the root node, if any, and what was found on the way.
/// A fatal problem leaves `root` empty with its diagnostic.
#[derive(Debug, Default)]
pub struct Document {
    pub root: Option<Node>,
    pub diagnostics: Vec<Diagnostic>,
    /// True when the stream held no document at all (an empty or comment-only file).
    pub empty: bool,
}

/// Loads one YAML document from `text`, which belongs to `file`.
pub fn load(file: FileId, text: &str) -> Document {
    load_fragment(file, text, 0)
}

/// Loads a document embedded in a file at byte offset `base` (a frontmatter block).
pub fn load_fragment(file: FileId, text: &str, base: usize) -> Document {
    let offsets = CharOffsets::new(text);
    let mut loader = Loader {
        file,
        base,
        text,
        offsets: &offsets,
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        alias_nodes: 0,
        documents: 0,
        root: None,
        diagnostics: Vec::new(),
    };
    if text.len() > MAX_FILE_BYTES {
        loader.diagnostics.push(Diagnostic::at(
            Code::YamlLimit,
            Span::new(file, base, base),
            format!("the file is {} bytes, over the {} byte limit for a YAML file", text.len(), MAX_FILE_BYTES),
        ));
        return loader.finish(false);
    }
    let mut parser = Parser::new_from_str(text);
    loop {
        match parser.next_event() {
            None => break,
            Some(Err(error)) => {
                loader.scan_error(&error);
                return loader.finish(false);
            }
            Some(Ok((event, span))) => match loader.event(event, span) {
                Flow::Continue => {}
                Flow::Stop => return loader.finish(false),
                Flow::End => break,
            },
        }
    }
    let empty = loader.documents == 0 || loader.root.is_none();
    loader.finish(empty)
}

enum Flow {
    Continue,
    Stop,
    End,
}

enum Frame {
    Sequence { start: usize, anchor: usize, items: Vec<Node> },
    Mapping { start: usize, anchor: usize, entries: Vec<Entry>, key: Option<Node>, seen: HashMap<String, Span> },
}

struct Loader<'o> {
    file: FileId,
    base: usize,
    text: &'o str,
    offsets: &'o CharOffsets,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    alias_nodes: usize,
    documents: usize,
    root: Option<Node>,
    diagnostics: Vec<Diagnostic>,
}

impl Loader<'_> {
    fn finish(self, empty: bool) -> Document {
        let fatal = self
            .diagnostics
            .iter()
            .any(|diagnostic| matches!(diagnostic.code, Code::YamlSyntax | Code::YamlLimit | Code::MultipleDocuments));
        Document { root: if fatal { None } else { self.root }, diagnostics: self.diagnostics, empty }
    }

    fn span(&self, span: ParserSpan) -> Span {
        Span::new(
            self.file,
            self.base + self.offsets.byte(span.start.index()),
            self.base + self.offsets.byte(span.end.index()),
        )
    }

    fn scan_error(&mut self, error: &ScanError) {
        let stop = self.offsets.byte(error.marker().index());
        let open_flow = self.stack.iter().rev().find_map(|frame| {
            let (Frame::Sequence { start, .. } | Frame::Mapping { start, .. }) = frame;
            let local = start.checked_sub(self.base)?;
            matches!(self.text.as_bytes().get(local), Some(b'{' | b'[')).then_some(local)
        });
        let problem =
            ScanProblem { file: self.file, text: self.text, base: self.base, stop, info: error.info(), open_flow };
        self.diagnostics.push(problem.diagnostic());
    }

    fn limit(&mut self, span: Span, message: String) -> Flow {
        self.diagnostics.push(Diagnostic::at(Code::YamlLimit, span, message));
        Flow::Stop
    }

    fn event(&mut self, event: Event<'_>, parser_span: ParserSpan) -> Flow {
        let span = self.span(parser_span);
        match event {
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => Flow::Continue,
            Event::StreamEnd => Flow::End,
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    self.diagnostics.push(
                        Diagnostic::at(Code::MultipleDocuments, span, "the file holds a second YAML document")
                            .with_label("a new document starts here")
                            .with_help("keep one document per file; remove the `---` separator and what follows it"),
                    );
                    return Flow::Stop;
                }
                Flow::Continue
            }
            Event::Alias(anchor) => {
                let Some(node) = self.anchors.get(&anchor) else {
                    self.diagnostics.push(Diagnostic::at(
                        Code::YamlSyntax,
                        span,
                        "invalid YAML: an alias refers to an unknown anchor",
                    ));
                    return Flow::Stop;
                };
                let size = node.count();
                self.alias_nodes += size;
                if self.alias_nodes > MAX_ALIAS_NODES {
                    return self.limit(
                        span,
                        format!(
                            "alias expansion adds more than {MAX_ALIAS_NODES} nodes; the document may be an alias bomb"
                        ),
                    );
                }
                let mut node = node.clone();
                node.span = span;
                self.push_node(node, 0, size)
            }
            Event::Scalar(text, style, anchor, tag) => match self.scalar(text, style, tag.as_deref(), span) {
                Some(node) => self.push_node(node, anchor, 1),
                None => Flow::Stop,
            },
            Event::SequenceStart(anchor, tag) => {
                self.check_collection_tag(tag.as_deref(), "seq", span);
                self.open(Frame::Sequence { start: span.start as usize, anchor, items: Vec::new() }, span)
            }
            Event::MappingStart(anchor, tag) => {
                self.check_collection_tag(tag.as_deref(), "map", span);
                self.open(
                    Frame::Mapping {
                        start: span.start as usize,
                        anchor,
                        entries: Vec::new(),
                        key: None,
                        seen: HashMap::new(),
                    },
                    span,
                )
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else {
                    return Flow::Continue;
                };
                let (kind, start, anchor) = match frame {
                    Frame::Sequence { start, anchor, items } => (NodeKind::Sequence(items), start, anchor),
                    Frame::Mapping { start, anchor, entries, .. } => (NodeKind::Mapping(entries), start, anchor),
                };
                // A flow collection ends at its closing bracket, which the parser's span
                // stops short of; a block collection ends with its last child, not at the
                // next token (which may be lines further down).
                let flow = matches!(self.text.as_bytes().get(start - self.base), Some(b'{' | b'['));
                let last_child = match &kind {
                    NodeKind::Sequence(items) => items.last().map(|item| item.span.end as usize),
                    NodeKind::Mapping(entries) => {
                        entries.last().map(|entry| entry.value.span.end.max(entry.key.span.end) as usize)
                    }
                    NodeKind::Scalar(_) => None,
                };
                let end = if flow {
                    (span.start as usize + 1).max(last_child.unwrap_or(0))
                } else {
                    last_child.unwrap_or(start)
                };
                // At the end of a file without a final newline the parser's marker sits past
                // the last byte; a span never leaves its file.
                let end = end.min(self.base + self.text.len());
                let node =
                    Node { kind, span: Span { file: self.file, start: start as u32, end: end.max(start) as u32 } };
                // The collection itself was counted when it opened.
                self.push_node(node, anchor, 0)
            }
        }
    }

    fn open(&mut self, frame: Frame, span: Span) -> Flow {
        if self.stack.len() >= MAX_DEPTH {
            return self.limit(span, format!("collections nest more than {MAX_DEPTH} levels deep"));
        }
        self.nodes += 1;
        self.stack.push(frame);
        Flow::Continue
    }

    fn check_collection_tag(&mut self, tag: Option<&Tag>, expected: &str, span: Span) {
        if let Some(tag) = tag
            && !(tag.is_yaml_core_schema() && tag.suffix == expected)
        {
            self.unsupported_tag(tag, span);
        }
    }

    fn unsupported_tag(&mut self, tag: &Tag, span: Span) {
        self.diagnostics.push(
            Diagnostic::at(Code::YamlSyntax, span, format!("the tag `{tag}` is not supported here"))
                .with_help("write the value without a tag; workflow files use plain YAML 1.2 values"),
        );
    }

    fn scalar(&mut self, text: Cow<'_, str>, style: ScalarStyle, tag: Option<&Tag>, span: Span) -> Option<Node> {
        let kind = match style {
            ScalarStyle::Plain => ScalarKind::Plain,
            ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => ScalarKind::Quoted,
            ScalarStyle::Literal | ScalarStyle::Folded => ScalarKind::Block,
        };
        let value = match tag {
            Some(tag) if tag.is_yaml_core_schema() => match tag.suffix.as_str() {
                "str" => ScalarValue::String,
                "null" | "bool" | "int" | "float" => {
                    let resolved = resolve_plain(&text);
                    let fits = matches!(
                        (tag.suffix.as_str(), &resolved),
                        ("null", ScalarValue::Null)
                            | ("bool", ScalarValue::Bool(_))
                            | ("int", ScalarValue::Integer(_))
                            | ("float", ScalarValue::Float(_) | ScalarValue::Integer(_))
                    );
                    if !fits {
                        self.diagnostics.push(Diagnostic::at(
                            Code::YamlSyntax,
                            span,
                            format!("`{text}` is not a valid `!!{}` value", tag.suffix),
                        ));
                        return None;
                    }
                    match resolved {
                        ScalarValue::Integer(value) if tag.suffix == "float" => ScalarValue::Float(value as f64),
                        other => other,
                    }
                }
                _ => {
                    self.unsupported_tag(tag, span);
                    ScalarValue::String
                }
            },
            Some(tag) if tag.handle == "!" && tag.suffix.is_empty() => ScalarValue::String,
            Some(tag) => {
                self.unsupported_tag(tag, span);
                ScalarValue::String
            }
            None if kind == ScalarKind::Plain => resolve_plain(&text),
            None => ScalarValue::String,
        };
        Some(Node { kind: NodeKind::Scalar(Scalar { text: text.into_owned(), value, style: kind }), span })
    }

    /// Attaches a finished node to its parent (or makes it the root).
    fn push_node(&mut self, node: Node, anchor: usize, added: usize) -> Flow {
        self.nodes += added;
        if self.nodes > MAX_NODES {
            return self.limit(node.span, format!("the document holds more than {MAX_NODES} nodes"));
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => {
                self.root = Some(node);
            }
            Some(Frame::Sequence { items, .. }) => items.push(node),
            Some(Frame::Mapping { entries, key, seen, .. }) => match key.take() {
                None => *key = Some(node),
                Some(key_node) => {
                    let duplicate = key_node
                        .scalar_text()
                        .and_then(|text| seen.get(text).copied().map(|first| (text.to_string(), first)));
                    match duplicate {
                        Some((text, first)) => {
                            self.diagnostics.push(
                                Diagnostic::at(
                                    Code::DuplicateKey,
                                    key_node.span,
                                    format!("the key `{text}` appears twice in one mapping"),
                                )
                                .with_label("repeated here")
                                .with_secondary(first, "first written here")
                                .with_help("keep one entry for the key and merge the two values"),
                            );
                        }
                        None => {
                            if let Some(text) = key_node.scalar_text() {
                                seen.insert(text.to_string(), key_node.span);
                            }
                            entries.push(Entry { key: key_node, value: node });
                        }
                    }
                }
            },
        }
        Flow::Continue
    }
}

/// `text` as a quoted YAML scalar that reads back as `text`, for help that shows a value
/// quoted: double quotes, or single quotes when it holds a `"` or a `\`.
pub fn quoted(text: &str) -> String {
    if text.contains(['"', '\\']) { format!("'{}'", text.replace('\'', "''")) } else { format!("\"{text}\"") }
}

/// Resolves a plain scalar under the YAML 1.2 core schema.
pub fn resolve_plain(text: &str) -> ScalarValue {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return ScalarValue::Null,
        "true" | "True" | "TRUE" => return ScalarValue::Bool(true),
        "false" | "False" | "FALSE" => return ScalarValue::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return ScalarValue::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return ScalarValue::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return ScalarValue::Float(f64::NAN),
        _ => {}
    }
    if let Some(octal) = text.strip_prefix("0o") {
        if !octal.is_empty() && octal.bytes().all(|byte| (b'0'..=b'7').contains(&byte)) {
            return i64::from_str_radix(octal, 8).map(ScalarValue::Integer).unwrap_or(ScalarValue::String);
        }
        return ScalarValue::String;
    }
    if let Some(hex) = text.strip_prefix("0x") {
        if !hex.is_empty() && hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return i64::from_str_radix(hex, 16).map(ScalarValue::Integer).unwrap_or(ScalarValue::String);
        }
        return ScalarValue::String;
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !unsigned.is_empty() && unsigned.bytes().all(|byte| byte.is_ascii_digit()) {
        return match text.parse::<i64>() {
            Ok(value) => ScalarValue::Integer(value),
            Err(_) => text.parse::<f64>().map(ScalarValue::Float).unwrap_or(ScalarValue::String),
        };
    }
    if is_core_float(unsigned) {
        return text.parse::<f64>().map(ScalarValue::Float).unwrap_or(ScalarValue::String);
    }
    ScalarValue::String
}

/// `( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`
fn is_core_float(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut index = 0;
    let digits = |index: &mut usize| {
        let start = *index;
        while *index < bytes.len() && bytes[*index].is_ascii_digit() {
            *index += 1;
        }
        *index - start
    };
    let integer_digits = digits(&mut index);
    let mut fraction_digits = 0;
    if index < bytes.len() && bytes[index] == b'.' {
        index += 1;
        fraction_digits = digits(&mut index);
    } else if integer_digits == 0 {
        return false;
    }
    if integer_digits == 0 && fraction_digits == 0 {
        return false;
    }
    if index < bytes.len() && (bytes[index] == b'e' || bytes[index] == b'E') {
        index += 1;
        if index < bytes.len() && (bytes[index] == b'-' || bytes[index] == b'+') {
            index += 1;
        }
        if digits(&mut index) == 0 {
            return false;
        }
    }
    index == bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(text: &str) -> Document {
        load(FileId(0), text)
    }

    #[test]
    fn resolves_core_schema_scalars() {
        assert_eq!(resolve_plain("yes"), ScalarValue::String);
        assert_eq!(resolve_plain("true"), ScalarValue::Bool(true));
        assert_eq!(resolve_plain("~"), ScalarValue::Null);
        assert_eq!(resolve_plain("0o17"), ScalarValue::Integer(15));
        assert_eq!(resolve_plain("0x1F"), ScalarValue::Integer(31));
        assert_eq!(resolve_plain("-12"), ScalarValue::Integer(-12));
        assert_eq!(resolve_plain("1.5e3"), ScalarValue::Float(1500.0));
        assert_eq!(resolve_plain(".5"), ScalarValue::Float(0.5));
        assert_eq!(resolve_plain("1."), ScalarValue::Float(1.0));
        assert_eq!(resolve_plain("2026-01-02"), ScalarValue::String);
        assert_eq!(resolve_plain("5m"), ScalarValue::String);
        assert_eq!(resolve_plain("."), ScalarValue::String);
    }

    #[test]
    fn spans_are_byte_offsets() {
        let text = "tïtle: héllo\nstates: {}\n";
        let document = load_str(text);
        let root = document.root.expect("a root");
        let entries = root.as_mapping().expect("a mapping");
        let value = &entries[0].value;
        assert_eq!(&text[value.span.start as usize..value.span.end as usize], "héllo");
        let states_key = &entries[1].key;
        assert_eq!(&text[states_key.span.start as usize..states_key.span.end as usize], "states");
    }

    #[test]
    fn duplicate_keys_are_reported_with_both_spans_and_dropped() {
        let document = load_str("a: 1\nb: 2\na: 3\n");
        assert_eq!(document.diagnostics.len(), 1);
        let diagnostic = &document.diagnostics[0];
        assert_eq!(diagnostic.code, Code::DuplicateKey);
        assert_eq!(diagnostic.labels.len(), 1);
        let root = document.root.expect("duplicates are not fatal");
        assert_eq!(root.as_mapping().map(<[Entry]>::len), Some(2));
        assert_eq!(root.get("a").and_then(Node::as_i64), Some(1));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let previous = level - 1;
            text.push_str(&format!(
                "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
            ));
        }
        let document = load_str(&text);
        assert!(document.root.is_none());
        assert!(document.diagnostics.iter().any(|d| d.code == Code::YamlLimit));
    }

    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        let text = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
        let document = load_str(&text);
        assert!(document.root.is_none());
        assert!(!document.diagnostics.is_empty());
        let block: String = (0..200).map(|depth| format!("{}k{depth}:\n", " ".repeat(depth))).collect();
        let document = load_str(&block);
        assert!(document.diagnostics.iter().any(|d| d.code == Code::YamlLimit));
    }

    #[test]
    fn a_second_document_is_refused() {
        let document = load_str("a: 1\n---\nb: 2\n");
        assert!(document.root.is_none());
        assert_eq!(document.diagnostics[0].code, Code::MultipleDocuments);
    }

    #[test]
    fn empty_text_has_no_root() {
        let document = load_str("# only a comment\n");
        assert!(document.root.is_none());
        assert!(document.empty);
        assert!(document.diagnostics.is_empty());
    }

    #[test]
    fn a_value_quoted_for_help_reads_back_as_itself() {
        for text in ["Deny it, with a reason.", r#"Say "no", politely."#, r"C:\temp, then D:", "It's late, and \"no\"."]
        {
            let document = load_str(&format!("key: {}\n", quoted(text)));
            assert_eq!(
                document.root.and_then(|root| root.get("key").and_then(Node::as_str).map(str::to_string)).as_deref(),
                Some(text)
            );
        }
    }

    #[test]
    fn a_colon_in_a_plain_flow_value_is_answered_with_the_value_quoted() {
        let document = load_str("t: { to: done, description: Grant it: they have days left. }\n");
        let help = document.diagnostics[0].help.as_deref().unwrap_or_default();
        assert!(help.contains(r#"`description: "Grant it: they have days left."`"#), "{help}");
        // A flow mapping cut short on a later line is blamed on its bracket, not on a value.
        let document = load_str("t: { to: done, description: Grant it\nnext: 1\n");
        let help = document.diagnostics[0].help.as_deref().unwrap_or_default();
        assert!(!help.contains("quote the value"), "{help}");
    }

    #[test]
    fn syntax_errors_point_at_the_failure() {
        let document = load_str("a: [1, 2\nb: 3\n");
        assert_eq!(document.diagnostics[0].code, Code::YamlSyntax);
    }
}
