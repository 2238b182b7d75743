//! Diagnostics: the one type every check reports through.
//!
//! A [`Diagnostic`] carries a stable [`Code`] (see [`codes`]), a severity fixed by the
//! code, a one-sentence message, a primary span with an optional label, secondary labels,
//! a `help` that says what to write instead, and the dotted spec path of the offending
//! value (`states.review.transitions.0.description`). The front end's renderers turn a
//! report of them into human, JSON, SARIF or GitHub output; this crate holds only the
//! types, so a runner that never renders does not link a renderer.

pub mod codes;
pub mod values;

pub use codes::{Code, CodeInfo};

use crate::source::Span;

/// How serious a finding is. Errors make a workflow invalid; warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A secondary location with its own short message.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// Which workflows a finding belongs to, for per-workflow reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A finding in one workflow's files.
    Workflow(String),
    /// A finding about the workspace as a whole (the host table, the skill registry):
    /// reported under every workflow it can affect.
    Workspace,
    /// A finding about one skill bundle: reported under the workflows that name it.
    Skill(String),
}

/// One finding.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    /// The primary location; `None` only for findings about no file at all.
    pub span: Option<Span>,
    /// Text shown at the primary location.
    pub label: Option<String>,
    pub labels: Vec<Label>,
    /// What to write instead.
    pub help: Option<String>,
    /// The dotted spec path of the offending value; empty for file-level findings.
    pub path: String,
    pub scope: Scope,
}

impl Diagnostic {
    pub fn new(code: Code, span: Option<Span>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.info().severity,
            message: message.into(),
            span,
            label: None,
            labels: Vec::new(),
            help: None,
            path: String::new(),
            scope: Scope::Workspace,
        }
    }

    pub fn at(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, Some(span), message)
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = Some(label.into());
        self
    }

    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: message.into() });
        self
    }

    pub fn with_path(mut self, path: impl Into<String>) -> Diagnostic {
        self.path = path.into();
        self
    }

    pub fn with_scope(mut self, scope: Scope) -> Diagnostic {
        self.scope = scope;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A dotted path into a document, built without allocating as the reader descends.
#[derive(Clone, Copy, Debug)]
pub struct SpecPath<'a> {
    parent: Option<&'a SpecPath<'a>>,
    segment: Segment<'a>,
}

#[derive(Clone, Copy, Debug)]
enum Segment<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> SpecPath<'a> {
    pub const ROOT: SpecPath<'static> = SpecPath { parent: None, segment: Segment::Root };

    pub fn key(&'a self, key: &'a str) -> SpecPath<'a> {
        SpecPath { parent: Some(self), segment: Segment::Key(key) }
    }

    pub fn index(&'a self, index: usize) -> SpecPath<'a> {
        SpecPath { parent: Some(self), segment: Segment::Index(index) }
    }

    /// The path this one extends; `None` at the root.
    pub fn parent(&self) -> Option<&SpecPath<'a>> {
        self.parent
    }

    /// The last segment when it is a key.
    pub fn last_key(&self) -> Option<&'a str> {
        match self.segment {
            Segment::Key(key) => Some(key),
            Segment::Root | Segment::Index(_) => None,
        }
    }

    pub fn is_index(&self) -> bool {
        matches!(self.segment, Segment::Index(_))
    }

    /// `states.review.transitions.0.to`; the root renders as `""`.
    pub fn render(&self) -> String {
        let mut segments = Vec::new();
        let mut cursor = Some(self);
        while let Some(path) = cursor {
            match path.segment {
                Segment::Root => {}
                Segment::Key(key) => segments.push(path_key(key).into_owned()),
                Segment::Index(index) => segments.push(index.to_string()),
            }
            cursor = path.parent;
        }
        segments.reverse();
        segments.join(".")
    }
}

impl std::fmt::Display for SpecPath<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.render())
    }
}

/// A key as it appears in a dotted path: quoted when it is empty or holds a dot.
pub fn path_key(key: &str) -> std::borrow::Cow<'_, str> {
    if key.is_empty() || key.contains(['.', ' ', '"']) { format!("{key:?}").into() } else { key.into() }
}

/// The closest candidate within a small edit distance, for "did you mean" hints.
pub fn did_you_mean<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let word_lower = word.to_ascii_lowercase();
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(&word_lower, &candidate.to_ascii_lowercase()), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, candidate)| (*distance, *candidate))
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over characters, with adjacent transpositions counted as one edit.
pub fn edit_distance(left: &str, right: &str) -> usize {
    let left: Vec<char> = left.chars().collect();
    let right: Vec<char> = right.chars().collect();
    let width = right.len() + 1;
    let mut rows = vec![0usize; (left.len() + 1) * width];
    for (index, cell) in rows.iter_mut().enumerate().take(width) {
        *cell = index;
    }
    for row in 1..=left.len() {
        rows[row * width] = row;
        for column in 1..=right.len() {
            let cost = usize::from(left[row - 1] != right[column - 1]);
            let mut best = (rows[(row - 1) * width + column] + 1)
                .min(rows[row * width + column - 1] + 1)
                .min(rows[(row - 1) * width + column - 1] + cost);
            if row > 1 && column > 1 && left[row - 1] == right[column - 2] && left[row - 2] == right[column - 1] {
                best = best.min(rows[(row - 2) * width + column - 2] + 1);
            }
            rows[row * width + column] = best;
        }
    }
    rows[left.len() * width + right.len()]
}

/// `a`, `a and b`, `a, b and c`, each in backticks.
pub fn list_names<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{}`", name.as_ref())).collect();
    match quoted.len() {
        0 => "none".to_string(),
        1 => quoted[0].clone(),
        count => format!("{} and {}", quoted[..count - 1].join(", "), quoted[count - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_paths_render_dotted() {
        let root = SpecPath::ROOT;
        let states = root.key("states");
        let review = states.key("review");
        let transitions = review.key("transitions");
        let first = transitions.index(0);
        assert_eq!(first.key("description").render(), "states.review.transitions.0.description");
        assert_eq!(root.render(), "");
        let workspace = root.key("workspace");
        assert_eq!(workspace.key("trigger.json").render(), "workspace.\"trigger.json\"");
        assert_eq!(states.key("").render(), "states.\"\"");
    }

    #[test]
    fn did_you_mean_finds_close_keys_only() {
        let keys = ["transitions", "triggers", "instructions"];
        assert_eq!(did_you_mean("transtions", keys), Some("transitions"));
        assert_eq!(did_you_mean("trigers", keys), Some("triggers"));
        assert_eq!(did_you_mean("colour", keys), None);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }

    #[test]
    fn every_code_has_a_titled_explanation() {
        for code in Code::ALL {
            let info = code.info();
            assert!(info.code.starts_with("AMX") && info.code.len() == 7, "{}", info.code);
            assert!(!info.title.is_empty());
            let heading = format!("# {}: {}", info.code, info.name);
            assert!(info.explanation.starts_with(&heading), "{} explanation must start with `{heading}`", info.code);
        }
    }
}
