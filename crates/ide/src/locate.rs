//! Go to definition, document symbols and renaming a state.
//!
//! The one thing to know: a rename edits the state's key, every `to:` and `on_error:`
//! naming it and every case step that names it, and is refused when the new name is not a
//! slug or already names a state, because either would break the workflow it edits.

use std::path::PathBuf;

use archmax_compiler::schema::ast::Workflow;
use archmax_compiler::syntax::is_slug;

use crate::navigation::{self, Target};
use crate::text::{LineIndex, Range};
use crate::workspace::Workspace;

/// A file a location is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A root-relative path of the workspace (an open document, or a file on disk).
    Document(String),
    /// A path on disk, as the workflow names it (a code state's script).
    Disk(PathBuf),
}

/// A range of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub place: Place,
    pub range: Range,
}

/// What a document symbol is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    State,
    Trigger,
}

/// A named part of a document, with the range it spans and the range of its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub detail: Option<String>,
    pub kind: SymbolKind,
    pub range: Range,
    pub selection_range: Range,
    pub children: Vec<Symbol>,
}

/// Replace the text at `range` with `new_text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEdit {
    pub range: Range,
    pub new_text: String,
}

/// Where the name at `offset` is defined: a state's key, a script file, a skill's `SKILL.md`.
pub fn definition(session: &Workspace, path: &str, text: &str, offset: usize) -> Option<Location> {
    let workflow = session.workflow(path)?;
    let (target, _) = navigation::target_at(workflow, offset)?;
    let start = Range::default();
    match target {
        Target::State(name) => {
            let state = navigation::state(workflow, &name)?;
            let span = navigation::name_span(text, state.slug.span, &name);
            Some(Location { place: Place::Document(path.to_string()), range: LineIndex::new(text).span_range(span) })
        }
        Target::Script(script) => {
            let dir = path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
            Some(Location { place: Place::Disk(session.root()?.join(dir).join(script)), range: start })
        }
        Target::Skill(slug) => {
            let analysis = session.analysis()?;
            let file = analysis.workspace.skill(&slug)?.file?;
            Some(Location { place: Place::Document(analysis.sources().file(file).name.clone()), range: start })
        }
        Target::Mount(_) => None,
    }
}

/// The states of the workflow whose `workflow.yaml` is at `path`, each with its triggers
/// as children; none when it is not a workflow that parses.
pub fn symbols(session: &Workspace, path: &str, text: &str) -> Vec<Symbol> {
    match session.workflow(path) {
        Some(workflow) => workflow_symbols(workflow, text),
        None => Vec::new(),
    }
}

fn workflow_symbols(workflow: &Workflow, text: &str) -> Vec<Symbol> {
    let index = LineIndex::new(text);
    let starts: Vec<usize> =
        workflow.states.iter().map(|state| index.line_start(index.line_of(state.slug.span.start as usize))).collect();
    workflow
        .states
        .iter()
        .enumerate()
        .map(|(number, state)| {
            let end = starts.get(number + 1).copied().unwrap_or(text.len()).max(state.slug.span.end as usize);
            let selection = index.span_range(state.slug.span);
            let children: Vec<Symbol> = state
                .triggers
                .iter()
                .map(|trigger| Symbol {
                    name: trigger.id.value.clone(),
                    detail: trigger.description.as_ref().map(|description| description.value.clone()),
                    kind: SymbolKind::Trigger,
                    range: index.span_range(trigger.id.span),
                    selection_range: index.span_range(trigger.id.span),
                    children: Vec::new(),
                })
                .collect();
            Symbol {
                name: state.slug.value.clone(),
                detail: Some(match &state.title {
                    Some(title) => format!("{} · {}", state.kind.as_str(), title.value),
                    None => state.kind.as_str().to_string(),
                }),
                kind: SymbolKind::State,
                range: Range { start: selection.start, end: index.position(end) },
                selection_range: selection,
                children,
            }
        })
        .collect()
}

/// Why a rename is refused.
#[derive(Debug, thiserror::Error)]
pub enum RenameRefused {
    #[error("this document is not a workflow that parses")]
    NotAWorkflow,
    #[error("there is no state name at this position")]
    NoState,
    #[error("`{0}` is not a state name: use lowercase letters, digits and single hyphens")]
    NotASlug(String),
    #[error("the workflow already has a state `{0}`")]
    Taken(String),
}

/// The state name at `offset` of the workflow at `path` and its range, before a rename.
pub fn state_at(session: &Workspace, path: &str, text: &str, offset: usize) -> Option<(String, Range)> {
    workflow_state_at(session.workflow(path)?, text, offset)
}

fn workflow_state_at(workflow: &Workflow, text: &str, offset: usize) -> Option<(String, Range)> {
    let (Target::State(name), span) = navigation::target_at(workflow, offset)? else {
        return None;
    };
    navigation::state(workflow, &name)?;
    Some((name.clone(), LineIndex::new(text).span_range(navigation::name_span(text, span, &name))))
}

/// The edits renaming the state at `offset` of the workflow at `path` to `new_name`: in
/// `workflow.yaml`, in the workflow's cases (`decide.to`, `reachedState`, `parked.state`,
/// `trail.to`) and in the tapes that play it (an entry's `state`, an `archmax_advance`'s
/// `to`). The edits of each root-relative file: `path` first, then each case, then each
/// tape that names the state.
pub fn rename(
    session: &Workspace,
    path: &str,
    text: &str,
    offset: usize,
    new_name: &str,
) -> Result<Vec<(String, Vec<TextEdit>)>, RenameRefused> {
    let workflow = session.workflow(path).ok_or(RenameRefused::NotAWorkflow)?;
    let (name, _) = workflow_state_at(workflow, text, offset).ok_or(RenameRefused::NoState)?;
    if !is_slug(new_name) {
        return Err(RenameRefused::NotASlug(new_name.to_string()));
    }
    if new_name != name && workflow.state_indices.contains_key(new_name) {
        return Err(RenameRefused::Taken(new_name.to_string()));
    }
    let edit = |index: &LineIndex<'_>, span| TextEdit { range: index.span_range(span), new_text: new_name.to_string() };
    let index = LineIndex::new(text);
    let spec =
        navigation::state_occurrences(workflow, text, &name).into_iter().map(|span| edit(&index, span)).collect();
    let mut changes = vec![(path.to_string(), spec)];
    if let Some(analysis) = session.analysis()
        && let Some(unit) = analysis.unit(&workflow.slug)
    {
        for case in &unit.cases {
            let case_text = analysis.sources().text(case.file);
            let index = LineIndex::new(case_text);
            let edits: Vec<TextEdit> = case
                .steps
                .iter()
                .filter_map(|step| step.state_reference())
                .filter(|(named, _)| named.value == name)
                .map(|(named, _)| edit(&index, navigation::name_span(case_text, named.span, &name)))
                .collect();
            if !edits.is_empty() {
                changes.push((analysis.sources().file(case.file).name.clone(), edits));
            }
        }
        // Tapes: this workflow's own, and any other workflow's entries that answer a
        // session of this one (`workflow:` naming it).
        for unit in &analysis.units {
            for tape in &unit.tapes {
                let tape_text = analysis.sources().text(tape.file);
                let index = LineIndex::new(tape_text);
                let edits: Vec<TextEdit> = tape
                    .entries
                    .iter()
                    .filter(|entry| {
                        entry.workflow.as_ref().map_or(unit.slug.as_str(), |named| named.value.as_str())
                            == workflow.slug
                    })
                    .flat_map(|entry| entry.state.iter().chain(entry.advances.iter().map(|(_, to)| to)))
                    .filter(|named| named.value == name)
                    .map(|named| edit(&index, navigation::name_span(tape_text, named.span, &name)))
                    .collect();
                if !edits.is_empty() {
                    changes.push((analysis.sources().file(tape.file).name.clone(), edits));
                }
            }
        }
    }
    Ok(changes)
}
