//! The case format: `workflows/<slug>/tests/**/*.test.yaml`.
//!
//! A case is one conversation on one session: start conditions (`trigger`, locked
//! `variables`, seeded `workspace` files, `mocks`) and a flat list of `steps` where
//! actions (`send`, `decide`, `deliver`) and assertions are peers, each assertion bound to
//! the nearest action above it. Every shape problem is an `AMX0900` finding (the title
//! and description caps, an assertion before any action, and malformed `/regex/flags`
//! strings have codes of their own). Cross-references (states, triggers, fixtures,
//! seedable paths) are checked in [`crate::check`].

use serde_json::Value;

use crate::diagnostic::{Code, Diagnostic, Scope, SpecPath};
use crate::source::{FileId, Span, Spanned};
use crate::syntax::reference::{VarPath, is_variable_name};
use crate::syntax::yaml::{Node, NodeKind};

pub(crate) mod steps;

pub use super::matcher::{CompiledRegex, Matcher, RegexText, TextMatcher};
use super::reader::{Fields, Reader};
use super::state::variable_name_diagnostic;
use steps::steps;

/// Longest case title, in characters after collapsing whitespace.
pub const TITLE_MAX_CHARS: usize = 60;
/// Longest case description, in characters after collapsing whitespace.
pub const DESCRIPTION_MAX_CHARS: usize = 200;

/// One parsed case file.
#[derive(Clone, Debug)]
pub struct Case {
    /// The tests-relative path without `.test.yaml` / `.test.yml`.
    pub id: String,
    pub file: FileId,
    pub title: String,
    pub description: String,
    pub skip: Option<String>,
    pub trigger: Option<Spanned<String>>,
    pub variables: Vec<(Spanned<String>, Value)>,
    pub workspace: Vec<Seed>,
    pub mocks: Vec<Mock>,
    pub steps: Vec<Step>,
}

/// A file seeded into the case's session before any step.
#[derive(Clone, Debug)]
pub struct Seed {
    pub path: Spanned<String>,
    pub content: SeedContent,
}

#[derive(Clone, Debug)]
pub enum SeedContent {
    /// Written verbatim.
    Text(String),
    /// Written as pretty JSON.
    Json(Value),
    /// Copied byte for byte from a file under `tests/`.
    From(Spanned<String>),
}

/// A declared tool result: `{ tool, whenInput?, result }`.
#[derive(Clone, Debug)]
pub struct Mock {
    pub tool: Spanned<String>,
    pub when_input: Option<Matcher>,
    pub result: Value,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Step {
    /// 0-based index in `steps`.
    pub index: usize,
    pub span: Span,
    pub kind: StepKind,
}

impl Step {
    /// The state the step names, with the key that names it: what `validate` checks
    /// against the workflow's states and a state rename edits.
    pub fn state_reference(&self) -> Option<(&Spanned<String>, &'static str)> {
        match &self.kind {
            StepKind::Decide { to, .. } => Some((to, "decide.to")),
            StepKind::ReachedState(name) => Some((name, "reachedState")),
            StepKind::Parked { state: Some(name), .. } => Some((name, "parked.state")),
            StepKind::Trail { to: Some(name), .. } => Some((name, "trail.to")),
            _ => None,
        }
    }

    pub fn is_action(&self) -> bool {
        matches!(self.kind, StepKind::Send(_) | StepKind::Decide { .. } | StepKind::Deliver { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParkChannel {
    Decision,
    Input,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrailKind {
    Trigger,
    Agent,
    Human,
    OnError,
    Reset,
    Grader,
    Code,
    SubWorkflow,
}

impl TrailKind {
    pub const ALL: [(&'static str, TrailKind); 8] = [
        ("trigger", TrailKind::Trigger),
        ("agent", TrailKind::Agent),
        ("human", TrailKind::Human),
        ("on_error", TrailKind::OnError),
        ("reset", TrailKind::Reset),
        ("grader", TrailKind::Grader),
        ("code", TrailKind::Code),
        ("sub-workflow", TrailKind::SubWorkflow),
    ];

    pub fn as_str(self) -> &'static str {
        TrailKind::ALL.iter().find(|(_, kind)| *kind == self).map(|(name, _)| *name).unwrap_or("agent")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubWorkflowStatus {
    Ok,
    Error,
    Parked,
}

#[derive(Clone, Debug)]
pub struct ToolMatch {
    pub name: Spanned<String>,
    pub input: Option<Matcher>,
}

#[derive(Clone, Debug)]
pub enum StepKind {
    Send(String),
    Decide { to: Spanned<String>, comment: Option<String> },
    Deliver { trigger: String, variables: Vec<(Spanned<String>, Value)> },
    Succeeded,
    Parked { channel: Option<ParkChannel>, state: Option<Spanned<String>> },
    Raised { code: Option<String>, reason: Option<TextMatcher> },
    ReachedState(Spanned<String>),
    NoTraversal,
    TriggerArrival(String),
    Trail { to: Option<Spanned<String>>, kind: Option<TrailKind>, reason: Option<TextMatcher>, count: u64 },
    Variables { expect: Vec<(String, Value)>, path: Vec<(String, VarPath)>, locked: Vec<(String, bool)> },
    Reply { includes: Vec<TextMatcher>, excludes: Vec<TextMatcher> },
    CalledTool(ToolMatch),
    NotCalledTool(ToolMatch),
    BlockedTool(ToolMatch),
    UsedNoTools,
    RanWorkflow { workflow: Spanned<String>, status: SubWorkflowStatus, count: Option<u64> },
    Grade { criterion: String, at_least: f64 },
}

impl StepKind {
    /// A structural assertion halts the case when it fails.
    pub fn is_structural(&self) -> bool {
        matches!(
            self,
            StepKind::Succeeded
                | StepKind::Parked { .. }
                | StepKind::Raised { .. }
                | StepKind::ReachedState(_)
                | StepKind::NoTraversal
                | StepKind::TriggerArrival(_)
                | StepKind::Trail { .. }
                | StepKind::Variables { .. }
        )
    }
}

pub(crate) const CASE: Fields = Fields {
    known: &["title", "description", "skip", "trigger", "variables", "workspace", "mocks", "steps"],
    removed: &[
        (
            "sessions",
            "a case is one conversation on one session: multi-session cases are not part of test spec version 1; write one case per session",
        ),
        ("session", "a case is one conversation on one session: sessions are not part of test spec version 1"),
        ("parallel", "cases run one at a time and drive one session: `parallel` is not part of test spec version 1"),
        ("expect", "assertions are steps themselves: move each one into `steps`, after the action it checks"),
    ],
    what: "a case",
};

/// Reads one case document. Returns `None` when its top level is unusable.
pub fn parse_case(
    id: &str,
    file: FileId,
    source: &str,
    root: &Node,
    workflow: &str,
) -> (Option<Case>, Vec<Diagnostic>) {
    let mut reader = Reader::new(source, Scope::Workflow(workflow.to_string()));
    let case = read_case(&mut reader, id, file, root);
    for diagnostic in &mut reader.diagnostics {
        if diagnostic.code == Code::RemovedKey
            && let Some((key, _)) = diagnostic.message.split_once(" was removed from ")
        {
            diagnostic.message = format!("{key} is not part of the case format (test spec version 1)");
            diagnostic.label = Some("not in test spec version 1".to_string());
        }
        if matches!(
            diagnostic.code,
            Code::UnknownKey
                | Code::RemovedKey
                | Code::WrongType
                | Code::MissingKey
                | Code::EmptyValue
                | Code::InvalidValue
        ) {
            diagnostic.code = Code::CaseSchema;
            diagnostic.severity = Code::CaseSchema.info().severity;
        }
    }
    (case, reader.diagnostics)
}

fn read_case(reader: &mut Reader<'_>, id: &str, file: FileId, root: &Node) -> Option<Case> {
    let path = SpecPath::ROOT;
    let fields = reader.fields(root, &path, &CASE, false)?;
    let mut case = Case {
        id: id.to_string(),
        file,
        title: String::new(),
        description: String::new(),
        skip: None,
        trigger: None,
        variables: Vec::new(),
        workspace: Vec::new(),
        mocks: Vec::new(),
        steps: Vec::new(),
    };
    let mut title = None;
    let mut description = None;
    for field in &fields {
        let key_path = path.key(field.key);
        match field.key {
            "title" => title = Some(field.value),
            "description" => description = Some(field.value),
            "skip" => case.skip = reader.nonempty_string(field.value, &key_path).map(|skip| skip.value),
            "trigger" => case.trigger = read_trigger(reader, field.value, &key_path),
            "variables" => case.variables = variables(reader, field.value, &key_path),
            "workspace" => case.workspace = seeds(reader, field.value, &key_path),
            "mocks" => case.mocks = mocks(reader, field.value, &key_path),
            "steps" => case.steps = steps(reader, field.value, &key_path),
            _ => {}
        }
    }
    case.title = prose(reader, title, root.span, &path.key("title"), Code::CaseTitle, TITLE_MAX_CHARS, true);
    case.description = prose(
        reader,
        description,
        root.span,
        &path.key("description"),
        Code::CaseDescription,
        DESCRIPTION_MAX_CHARS,
        false,
    );
    Some(case)
}

/// `title` / `description`: required strings, capped after collapsing whitespace.
fn prose(
    reader: &mut Reader<'_>,
    node: Option<&Node>,
    root_span: Span,
    path: &SpecPath<'_>,
    code: Code,
    limit: usize,
    single_line: bool,
) -> String {
    let field = if code == Code::CaseTitle { "title" } else { "description" };
    let Some(node) = node else {
        reader.report(
            Diagnostic::at(
                code,
                Span::new(root_span.file, root_span.start as usize, root_span.start as usize),
                format!("the case has no `{field}`"),
            )
            .with_help(if code == Code::CaseTitle {
                format!("add `title:`, a one-line label of at most {limit} characters naming the behaviour under test")
            } else {
                format!("add `description:`, at most {limit} characters saying what the case drives and asserts")
            }),
            path,
        );
        return String::new();
    };
    let Some(text) = node.as_str() else {
        reader.report(
            Diagnostic::at(code, node.span, format!("`{field}` must be a string, not {}", node.type_name()))
                .with_label("not text"),
            path,
        );
        return String::new();
    };
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        reader.report(
            Diagnostic::at(code, node.span, format!("the case's `{field}` is empty")).with_label("empty"),
            path,
        );
    } else if single_line && text.trim().contains('\n') {
        reader.report(
            Diagnostic::at(code, node.span, "the case title spans several lines")
                .with_label("one line only")
                .with_help("keep the title to one line; put longer rationale in a YAML comment above the document"),
            path,
        );
    }
    let length = collapsed.chars().count();
    if length > limit {
        reader.report(
            Diagnostic::at(
                code,
                node.span,
                format!("the case's `{field}` is {length} characters, over the limit of {limit}"),
            )
            .with_label(format!("{length} characters"))
            .with_help("shorten it; longer rationale belongs in a YAML comment above the document"),
            path,
        );
    }
    collapsed
}

fn read_trigger(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
    let entries = reader.mapping(node, path, false)?;
    let mut id = None;
    for entry in entries {
        match entry.key.scalar_text() {
            Some("id") => id = reader.nonempty_string(&entry.value, &path.key("id")),
            Some("args") => reader.report(
                Diagnostic::at(Code::CaseSchema, entry.key.span, "a case trigger carries only an `id`")
                    .with_label("not accepted")
                    .with_help(
                        "put the firing's input in the case's `variables:`, which are seeded locked like a host's",
                    ),
                &path.key("args"),
            ),
            other => reader.report(
                Diagnostic::at(
                    Code::CaseSchema,
                    entry.key.span,
                    format!("unknown key `{}` in `trigger`", other.unwrap_or("?")),
                )
                .with_label("not part of the schema")
                .with_help("write `trigger: { id: <trigger-id> }`"),
                &path.key(other.unwrap_or("?")),
            ),
        }
    }
    if id.is_none() && node.get("id").is_none() {
        reader.report(
            Diagnostic::at(Code::CaseSchema, node.span, "a case trigger needs an `id`")
                .with_help("write `trigger: { id: <trigger-id> }`"),
            path,
        );
    }
    id
}

fn variables(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<(Spanned<String>, Value)> {
    let Some(entries) = reader.mapping(node, path, true) else {
        return Vec::new();
    };
    let mut variables = Vec::with_capacity(entries.len());
    for entry in entries {
        let name = entry.key.scalar_text().unwrap_or("");
        let name = Spanned::new(name.to_string(), entry.key.span);
        if !is_variable_name(&name.value) {
            reader.report(variable_name_diagnostic(&name), &path.key(&name.value));
            continue;
        }
        variables.push((name, entry.value.to_json()));
    }
    variables
}

fn seeds(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<Seed> {
    let Some(entries) = reader.mapping(node, path, true) else {
        return Vec::new();
    };
    let mut seeds = Vec::with_capacity(entries.len());
    for entry in entries {
        let key = entry.key.scalar_text().unwrap_or("");
        let key_path = path.key(key);
        let content = match &entry.value.kind {
            NodeKind::Mapping(fields) if fields.len() == 1 && fields[0].key.scalar_text() == Some("from") => {
                match reader.string(&fields[0].value, &key_path.key("from")) {
                    Some(from) => SeedContent::From(from),
                    None => continue,
                }
            }
            _ => match entry.value.as_str() {
                Some(text) => SeedContent::Text(text.to_string()),
                None => SeedContent::Json(entry.value.to_json()),
            },
        };
        seeds.push(Seed { path: Spanned::new(key.to_string(), entry.key.span), content });
    }
    seeds
}

pub(crate) const MOCK: Fields = Fields { known: &["tool", "whenInput", "result"], removed: &[], what: "a mock" };

/// Reads a mocks file (`archmax run --mocks`): a list of mocks in the case format
/// (`- { tool, whenInput?, result }`). `Err` holds every finding, each with its span in
/// `text`.
pub fn parse_mocks(text: &str) -> Result<Vec<Mock>, Vec<Diagnostic>> {
    let document = crate::syntax::yaml::load(FileId(0), text);
    if document.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(document.diagnostics);
    }
    let Some(root) = document.root else {
        return Ok(Vec::new());
    };
    let mut reader = Reader::new(text, Scope::Workspace);
    let found = mocks(&mut reader, &root, &SpecPath::ROOT);
    if reader.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(reader.diagnostics);
    }
    Ok(found)
}

fn mocks(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<Mock> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, "a list of mocks");
        return Vec::new();
    };
    let mut mocks = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let item_path = path.index(index);
        let Some(fields) = reader.fields(item, &item_path, &MOCK, false) else {
            continue;
        };
        let mut tool = None;
        let mut when_input = None;
        let mut result = None;
        for field in fields {
            let key_path = item_path.key(field.key);
            match field.key {
                "tool" => tool = reader.nonempty_string(field.value, &key_path),
                "whenInput" => {
                    let is_mapping = reader.mapping(field.value, &key_path, false).is_some();
                    when_input = if is_mapping { matcher(reader, field.value, &key_path) } else { None };
                }
                "result" => result = Some(field.value.to_json()),
                _ => {}
            }
        }
        match (tool, result) {
            (Some(tool), Some(result)) => mocks.push(Mock { tool, when_input, result, span: item.span }),
            (tool, result) => {
                let missing = if tool.is_none() && item.get("tool").is_none() {
                    Some("tool")
                } else if result.is_none() && item.get("result").is_none() {
                    Some("result")
                } else {
                    None
                };
                if let Some(missing) = missing {
                    reader.report(
                        Diagnostic::at(Code::CaseSchema, item.span, format!("a mock needs `{missing}`"))
                            .with_help("write `{ tool: <name>, whenInput: { … }, result: … }`"),
                        &item_path,
                    );
                }
            }
        }
    }
    mocks
}

/// A partial-match pattern; `/re/flags` strings become regexes.
fn matcher(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Matcher> {
    match &node.kind {
        NodeKind::Mapping(entries) => {
            let mut fields = Vec::with_capacity(entries.len());
            for entry in entries {
                let key = entry.key.scalar_text().unwrap_or("").to_string();
                let value = matcher(reader, &entry.value, &path.key(&key))?;
                fields.push((key, value));
            }
            Some(Matcher::Map(fields))
        }
        NodeKind::Sequence(items) => {
            let mut matchers = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                matchers.push(matcher(reader, item, &path.index(index))?);
            }
            Some(Matcher::List(matchers))
        }
        NodeKind::Scalar(_) => match node.as_str() {
            Some(text) => match regex_text(reader, text, node, path)? {
                TextMatcher::Regex(regex) => Some(Matcher::Regex(regex)),
                TextMatcher::Substring(text) => Some(Matcher::Exact(Value::String(text))),
            },
            None => Some(Matcher::Exact(node.to_json())),
        },
    }
}

/// A token: `/pattern/flags` compiles to a regex; anything else is literal text.
/// `None` (with a diagnostic) when a regex-shaped token does not compile.
fn regex_text(reader: &mut Reader<'_>, text: &str, node: &Node, path: &SpecPath<'_>) -> Option<TextMatcher> {
    let Some(regex) = regex_shape(text) else {
        return Some(TextMatcher::Substring(text.to_string()));
    };
    if let Some(flag) = regex.flags.chars().find(|flag| !REGEX_FLAGS.contains(*flag)) {
        reader.report(
            Diagnostic::at(Code::MalformedRegex, node.span, format!("`{text}` has the unknown regex flag `{flag}`"))
                .with_label("unknown flag")
                .with_help("a token written `/pattern/flags` is a regex; its flags are `i` (ignore case), `m`, `s`, `u`, `g`, `y`, `d` and `v`"),
            path,
        );
        return None;
    }
    match regex.compile() {
        Ok(compiled) => Some(TextMatcher::Regex(compiled)),
        Err(error) => {
            let detail = error.to_string();
            let detail = detail
                .lines()
                .last()
                .unwrap_or("invalid pattern")
                .trim()
                .trim_start_matches("error:")
                .trim()
                .to_string();
            reader.report(
                Diagnostic::at(
                    Code::MalformedRegex,
                    node.span,
                    format!("`{text}` does not compile as a regex: {detail}"),
                )
                .with_label("malformed regex")
                .with_help(
                    "a token written `/pattern/flags` is a regex: fix the pattern (escape a literal `/` as `\\/`)",
                ),
                path,
            );
            None
        }
    }
}

/// The flags a regex token may carry (JavaScript's set; `i`, `m` and `s` change matching).
const REGEX_FLAGS: &str = "dgimsuvy";

/// Splits `/pattern/flags` when the text has that shape: a leading `/`, a closing `/`,
/// and a suffix of regex flags. A suffix of one or two other letters (`/x/q`) still
/// counts, so a mistyped flag is reported rather than silently read as text; a longer
/// word (`/orders/latest`) makes the text a plain path.
pub fn regex_shape(text: &str) -> Option<RegexText> {
    let rest = text.strip_prefix('/')?;
    let close = rest.rfind('/')?;
    let flags = &rest[close + 1..];
    let all_flags = flags.chars().all(|flag| REGEX_FLAGS.contains(flag));
    let short_letters = flags.len() <= 2 && flags.bytes().all(|byte| byte.is_ascii_alphabetic());
    if close == 0 || !(all_flags || short_letters) {
        return None;
    }
    Some(RegexText { pattern: rest[..close].to_string(), flags: flags.to_string() })
}

fn tokens(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<TextMatcher> {
    let items: Vec<(&Node, SpecPath<'_>)> = match &node.kind {
        NodeKind::Sequence(items) => items.iter().enumerate().map(|(index, item)| (item, path.index(index))).collect(),
        _ => vec![(node, *path)],
    };
    let mut out = Vec::with_capacity(items.len());
    for (item, item_path) in items {
        let Some(text) = reader.nonempty_string(item, &item_path) else {
            continue;
        };
        if let Some(token) = regex_text(reader, &text.value, item, &item_path) {
            out.push(token);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_tokens_need_the_slash_shape() {
        assert_eq!(regex_shape("/approv/i"), Some(RegexText { pattern: "approv".into(), flags: "i".into() }));
        assert_eq!(regex_shape("/orders"), None);
        assert_eq!(regex_shape("/orders/latest"), None);
        assert_eq!(regex_shape("/shipped/q").map(|regex| regex.flags), Some("q".into()));
        assert_eq!(regex_shape("plain"), None);
        assert_eq!(regex_shape("//"), None);
        assert_eq!(regex_shape("/a/b/").map(|regex| regex.pattern), Some("a/b".into()));
    }
}
