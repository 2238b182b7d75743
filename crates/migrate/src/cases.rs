//! The rewrite of a workflow's cases (`tests/*.test.yaml`) after its states moved.
//!
//! The one thing to know: a case names moved states only in `reachedState` (a removed
//! trigger state becomes a `triggerArrival`) and in the `noTraversal` it asserted when a
//! `before` hook vetoed entry, so those are the only steps rewritten, in place; case keys that never were part of the case format are
//! reported with their span, never guessed at.

use std::collections::BTreeMap;

use archmax_compiler::source::FileId;
use archmax_compiler::syntax::yaml::{self, Node};

use super::edit::Edits;
use super::workflow::Note;

/// What a case rewrite needs from its workflow's rewrite.
pub(crate) struct Moves<'a> {
    /// Removed states and the state that now stands for each.
    pub renamed: &'a BTreeMap<String, String>,
    /// The refusal state a vetoed start now reaches.
    pub refusal: Option<&'a str>,
}

pub(crate) struct CaseRewrite {
    pub text: String,
    pub changes: Vec<Note>,
    pub follow_ups: Vec<Note>,
}

/// Rewrites one case; `Err` carries the offset and message of a YAML error.
pub(crate) fn rewrite(text: &str, moves: &Moves<'_>) -> Result<CaseRewrite, (usize, String)> {
    let document = yaml::load(FileId(0), text);
    if let Some(error) = document.diagnostics.iter().find(|diagnostic| diagnostic.is_error()) {
        return Err((error.span.map_or(0, |span| span.start as usize), error.message.clone()));
    }
    let mut edits = Edits::default();
    let mut changes = Vec::new();
    let mut follow_ups = Vec::new();
    let Some(root) = document.root else {
        return Ok(CaseRewrite { text: text.to_string(), changes, follow_ups });
    };
    for key in ["sessions", "session", "parallel", "expect"] {
        if let Some(entry) = root.as_mapping().unwrap_or(&[]).iter().find(|entry| entry.key.scalar_text() == Some(key))
        {
            follow_ups.push(Note {
                at: entry.key.span.start as usize,
                text: format!(
                    "the case key `{key}` is not part of the case format: rewrite it as steps of one conversation"
                ),
            });
        }
    }
    for step in root.get("steps").and_then(Node::as_sequence).unwrap_or(&[]) {
        for entry in step.as_mapping().unwrap_or(&[]) {
            let Some(key) = entry.key.scalar_text() else { continue };
            let at = entry.value.span.start as usize;
            match key {
                "reachedState" => {
                    // A trigger state was entered first and left at once; it is now the
                    // trigger itself, so what the case pinned is the arrival.
                    if let Some(name) = entry.value.as_str()
                        && let Some(into) = moves.renamed.get(name)
                    {
                        edits.replace(entry.key.span.start as usize..entry.key.span.end as usize, "triggerArrival");
                        changes.push(Note {
                            at: entry.key.span.start as usize,
                            text: format!("`reachedState: {name}` → `triggerArrival: {name}` (`{name}` is now a trigger of `{into}`)"),
                        });
                    }
                }
                "noTraversal" if entry.value.as_bool() == Some(true) => {
                    if let Some(refused) = moves.refusal {
                        let end = at + text.get(at..entry.value.span.end as usize).unwrap_or("").trim_end().len();
                        edits.replace(entry.key.span.start as usize..end, format!("reachedState: {refused}"));
                        changes.push(Note {
                            at,
                            text: format!("`noTraversal: true` → `reachedState: {refused}`: a veto at entry is now an advance into the refusal state"),
                        });
                    }
                }
                "judge" => follow_ups.push(Note {
                    at: entry.key.span.start as usize,
                    text: "the `judge` step is gone: write it as `grade: { closedQA: <criterion>, atLeast: <0..1> }`"
                        .to_string(),
                }),
                "expect" => follow_ups.push(Note {
                    at: entry.key.span.start as usize,
                    text: "`expect` is gone: list each assertion as its own step".to_string(),
                }),
                _ => {}
            }
        }
    }
    Ok(CaseRewrite { text: edits.apply(text), changes, follow_ups })
}
