//! Go to definition, document symbols and renaming a state.
//!
//! The one thing to know: a rename edits the state's key, every `to:` and `on_error:`
//! naming it and every case step that names it, and is refused (an `InvalidParams` answer) when the new name is not a slug
//! or already names a state, because either would break the workflow it edits.

use std::collections::HashMap;

use archmax_compiler::schema::ast::Workflow;
use archmax_compiler::syntax::is_slug;
use lsp_types::{DocumentSymbol, Location, Position, Range, SymbolKind, TextEdit, Uri, WorkspaceEdit};

use super::navigation::{self, Target};
use super::session::{Session, file_uri};
use super::text::LineIndex;

/// Where the name at `offset` is defined: a state's key, a script file, a skill's `SKILL.md`.
pub fn definition(session: &Session, path: &str, text: &str, offset: usize) -> Option<Location> {
    let workflow = session.workflow(path)?;
    let (target, _) = navigation::target_at(workflow, offset)?;
    let start = Range::new(Position::new(0, 0), Position::new(0, 0));
    match target {
        Target::State(name) => {
            let state = navigation::state(workflow, &name)?;
            let span = navigation::name_span(text, state.slug.span, &name);
            Some(Location { uri: session.uri_of(path)?, range: LineIndex::new(text).span_range(span) })
        }
        Target::Script(script) => {
            let dir = path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
            let uri = file_uri(&session.root()?.join(dir).join(script))?;
            Some(Location { uri, range: start })
        }
        Target::Skill(slug) => {
            let analysis = session.analysis()?;
            let file = analysis.workspace.skill(&slug)?.file?;
            Some(Location { uri: session.uri_of(&analysis.sources().file(file).name)?, range: start })
        }
        Target::Mount(_) => None,
    }
}

/// The states of a workflow, each with its triggers as children.
#[allow(deprecated)]
pub fn symbols(workflow: &Workflow, text: &str) -> Vec<DocumentSymbol> {
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
            let children: Vec<DocumentSymbol> = state
                .triggers
                .iter()
                .map(|trigger| DocumentSymbol {
                    name: trigger.id.value.clone(),
                    detail: trigger.description.as_ref().map(|description| description.value.clone()),
                    kind: SymbolKind::EVENT,
                    tags: None,
                    deprecated: None,
                    range: index.span_range(trigger.id.span),
                    selection_range: index.span_range(trigger.id.span),
                    children: None,
                })
                .collect();
            DocumentSymbol {
                name: state.slug.value.clone(),
                detail: Some(match &state.title {
                    Some(title) => format!("{} · {}", state.kind.as_str(), title.value),
                    None => state.kind.as_str().to_string(),
                }),
                kind: SymbolKind::CLASS,
                tags: None,
                deprecated: None,
                range: Range { start: selection.start, end: index.position(end) },
                selection_range: selection,
                children: (!children.is_empty()).then_some(children),
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

/// The state name at `offset` and its range, for `prepareRename`.
pub fn state_at(workflow: &Workflow, text: &str, offset: usize) -> Option<(String, Range)> {
    let (Target::State(name), span) = navigation::target_at(workflow, offset)? else {
        return None;
    };
    navigation::state(workflow, &name)?;
    Some((name.clone(), LineIndex::new(text).span_range(navigation::name_span(text, span, &name))))
}

/// The edits renaming the state at `offset` of the workflow at `path` to `new_name`: in
/// `workflow.yaml` and in the workflow's cases (`decide.to`, `reachedState`, `parked.state`,
/// `trail.to`).
// `WorkspaceEdit::changes` is keyed by `Uri`, whose cached parse is the "interior
// mutability" clippy sees; nothing here mutates a key.
#[allow(clippy::mutable_key_type)]
pub fn rename(
    session: &Session,
    path: &str,
    text: &str,
    offset: usize,
    new_name: &str,
) -> Result<WorkspaceEdit, RenameRefused> {
    let workflow = session.workflow(path).ok_or(RenameRefused::NotAWorkflow)?;
    let (name, _) = state_at(workflow, text, offset).ok_or(RenameRefused::NoState)?;
    if !is_slug(new_name) {
        return Err(RenameRefused::NotASlug(new_name.to_string()));
    }
    if new_name != name && workflow.state_indices.contains_key(new_name) {
        return Err(RenameRefused::Taken(new_name.to_string()));
    }
    let edit = |index: &LineIndex<'_>, span| TextEdit { range: index.span_range(span), new_text: new_name.to_string() };
    let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    let index = LineIndex::new(text);
    let spec =
        navigation::state_occurrences(workflow, text, &name).into_iter().map(|span| edit(&index, span)).collect();
    changes.insert(session.uri_of(path).ok_or(RenameRefused::NotAWorkflow)?, spec);
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
            if let Some(uri) = session.uri_of(&analysis.sources().file(case.file).name)
                && !edits.is_empty()
            {
                changes.entry(uri).or_default().extend(edits);
            }
        }
    }
    Ok(WorkspaceEdit { changes: Some(changes), ..WorkspaceEdit::default() })
}
