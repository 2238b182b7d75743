//! Completion by position: after `${{` the declared variables; in a `to:` or `on_error:`
//! the workflow's states; in a tools list the tool vocabulary (and `archmax_workflow_<slug>`
//! for each workflow); in a skills or mounts list the registry's skills or the host's
//! mounts; any other value the schema's enum values; on a key the keys the enclosing
//! mapping takes that it does not have yet.

use archmax_compiler::check::variables::Declared;
use archmax_compiler::tools::{DELEGATION_PREFIX, Tool};

use crate::cursor::{self, Context};
use crate::schema_docs::SchemaDocs;
use crate::text::{LineIndex, Range};
use crate::workspace::Workspace;

const TOOL_LISTS: [&str; 4] = ["allow", "forbid", "allow_always", "forbid_always"];

/// What a completion names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    /// A variable a `${{` reference may name.
    Variable,
    /// A state, or a value the schema enumerates.
    EnumMember,
    /// A key of a mapping.
    Property,
    /// A tool.
    Function,
    /// A skill.
    Module,
    /// A mount.
    Folder,
}

/// One completion: the label replaces the word at `range`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletionItem {
    pub label: String,
    pub kind: CompletionKind,
    pub documentation: Option<String>,
    pub range: Range,
}

/// The completions at a byte offset of a root-relative path.
pub fn complete(session: &Workspace, path: &str, text: &str, offset: usize) -> Vec<CompletionItem> {
    let context = cursor::context(text, offset);
    let index = LineIndex::new(text);
    let (start, end) = context.word;
    let range = index.range(start, end);
    let mut items: Vec<CompletionItem> = Vec::new();
    let mut push = |label: &str, kind: CompletionKind, detail: Option<&str>| {
        items.push(CompletionItem { label: label.to_string(), kind, documentation: detail.map(str::to_string), range });
    };
    if in_reference(&context.before) {
        if let Some(workflow) = session.owning_workflow(path) {
            for name in Declared::new(workflow).names() {
                push(name, CompletionKind::Variable, None);
            }
        }
        return items;
    }
    if context.in_value {
        let candidates = value_candidates(session, path, &context);
        let named = !candidates.is_empty();
        for (label, kind) in candidates {
            push(&label, kind, None);
        }
        if !named
            && let Some(docs) = SchemaDocs::for_path(path)
            && let Some(node) = docs.at(&context.value_path())
        {
            for value in docs.values(node) {
                push(value, CompletionKind::EnumMember, None);
            }
        }
    } else if let Some(docs) = SchemaDocs::for_path(path)
        && let Some(node) = docs.at(&context.parents)
    {
        let present = sibling_keys(text, offset);
        for (key, description) in docs.keys(node) {
            if !present.iter().any(|known| known == key) || context.key.as_deref() == Some(key) {
                push(key, CompletionKind::Property, description);
            }
        }
    }
    items
}

/// True when the text before the cursor opens a `${{` it has not closed.
fn in_reference(before: &str) -> bool {
    before.rfind("${{").is_some_and(|open| !before[open..].contains("}}"))
}

/// Names for the value the cursor is in, by what its keys say it is.
fn value_candidates(session: &Workspace, path: &str, context: &Context) -> Vec<(String, CompletionKind)> {
    let keys = context.keys();
    let last = keys.last().copied().unwrap_or("");
    let Some(analysis) = session.analysis() else {
        return Vec::new();
    };
    let workspace = &analysis.workspace;
    if matches!(last, "to" | "on_error") && keys.first() == Some(&"states") {
        let Some(workflow) = session.owning_workflow(path) else {
            return Vec::new();
        };
        return workflow.states.iter().map(|state| (state.slug.value.clone(), CompletionKind::EnumMember)).collect();
    }
    let parent = keys.len().checked_sub(2).and_then(|index| keys.get(index)).copied().unwrap_or("");
    let list_of = |name: &str| {
        (TOOL_LISTS.contains(&last) && parent == name) || (keys.contains(&name) && matches!(last, "tool" | "name"))
    };
    if list_of("tools") {
        let tools = Tool::ALL.iter().map(|tool| tool.name().to_string());
        let delegations = workspace.workflows.iter().map(|workflow| format!("{DELEGATION_PREFIX}{}", workflow.slug));
        return tools.chain(delegations).map(|name| (name, CompletionKind::Function)).collect();
    }
    if list_of("skills") {
        return workspace.skills.iter().map(|skill| (skill.slug.clone(), CompletionKind::Module)).collect();
    }
    if list_of("mounts") {
        return workspace.mounts.names().into_iter().map(|name| (name.to_string(), CompletionKind::Folder)).collect();
    }
    Vec::new()
}

/// The keys already written in the mapping the cursor's line belongs to (same
/// indentation, no shallower line between).
fn sibling_keys(text: &str, offset: usize) -> Vec<String> {
    let index = LineIndex::new(text);
    let line = index.line_of(offset);
    let own = index.line_text(line);
    let indent = own.len() - own.trim_start_matches([' ', '-']).len();
    let mut keys = Vec::new();
    let mut collect = |number: usize| -> bool {
        let text = index.line_text(number);
        let body = text.trim_start_matches(' ');
        if body.is_empty() || body.starts_with('#') {
            return true;
        }
        let column = text.len() - body.len();
        let item_column = text.len() - text.trim_start_matches([' ', '-']).len();
        if column < indent && item_column != indent {
            return false;
        }
        if item_column == indent
            && let Some((key, _)) = text[item_column..].split_once(':')
        {
            keys.push(key.trim().to_string());
        }
        !(body.starts_with('-') && item_column == indent && number != line)
    };
    for number in (0..line).rev() {
        if !collect(number) {
            break;
        }
    }
    for number in line + 1..index.lines() {
        if !collect(number) {
            break;
        }
    }
    keys
}
