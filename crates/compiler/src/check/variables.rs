//! The variables a workflow declares, and the `${{name}}` references that name none of
//! them.
//!
//! A variable is declared by a `requires` (a trigger's or a state's), a trigger's
//! `returns`, a `locks` list, or by being one of the reserved names `trigger` and
//! `title`. A host may seed other names, so an undeclared reference is not wrong by
//! itself; the one thing to know is that it is reported only when it is a near miss of
//! a declared name, which is a typo far more often than a seed. Guards get the "did you
//! mean" on their AMX0501; instructions, which tell the model which reference to write,
//! are lexed here (a malformed reference is AMX0500) and a near miss is AMX0502.

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::schema::ast::Workflow;
use crate::source::Spanned;
use crate::syntax::reference::parse_template;
use crate::syntax::text_subspan;
use crate::workspace::Workspace;

use super::Findings;

/// Every variable name a workflow declares.
pub struct Declared {
    names: BTreeSet<String>,
}

impl Declared {
    pub fn new(workflow: &Workflow) -> Declared {
        let mut names: BTreeSet<String> = ["trigger", "title"].into_iter().map(String::from).collect();
        for (_, trigger) in workflow.triggers() {
            names.extend(trigger.requires.iter().chain(&trigger.returns).map(|entry| entry.name.value.clone()));
        }
        for state in &workflow.states {
            names.extend(state.requires.iter().chain(&state.locks).map(|name| name.value.clone()));
        }
        Declared { names }
    }

    /// Every declared name, sorted (what an editor offers after `${{`).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// The declared name `name` is most likely a misspelling of; `None` when `name` is
    /// declared itself or close to nothing declared.
    pub fn near_miss(&self, name: &str) -> Option<&str> {
        if self.names.contains(name) {
            return None;
        }
        did_you_mean(name, self.names.iter().map(String::as_str))
    }
}

/// Lexes the references in the root's and every state's `instructions`.
pub fn check(workspace: &Workspace, workflow: &Workflow, findings: &mut Findings<'_>) {
    let declared = Declared::new(workflow);
    if let Some(instructions) = &workflow.instructions {
        check_text(workspace, instructions, &declared, "instructions", findings);
    }
    for state in &workflow.states {
        if let Some(instructions) = &state.instructions {
            let path = format!("states.{}.instructions", state.slug.value);
            check_text(workspace, instructions, &declared, &path, findings);
        }
    }
}

fn check_text(
    workspace: &Workspace,
    text: &Spanned<String>,
    declared: &Declared,
    path: &str,
    findings: &mut Findings<'_>,
) {
    let source = &workspace.sources.file(text.span.file).text;
    match parse_template(&text.value) {
        Err(error) => findings.push(
            Diagnostic::at(
                Code::MalformedReference,
                text_subspan(source, text.span, &text.value, error.range.clone()),
                format!("malformed reference in the instructions: {}", error.message),
            )
            .with_label("here")
            .with_help(
                "the model copies a reference it is told to write: write `${{name}}` or `${{name.path.-1}}`, or `$${{` for the literal characters",
            ),
            path,
        ),
        Ok(template) => {
            let mut reported = BTreeSet::new();
            for (reference, range) in template.references() {
                let Some(close) = declared.near_miss(&reference.root) else {
                    continue;
                };
                if !reported.insert(reference.root.clone()) {
                    continue;
                }
                findings.push(
                    Diagnostic::at(
                        Code::MisspeltReference,
                        text_subspan(source, text.span, &text.value, range.clone()),
                        format!(
                            "the instructions refer to `{}`, which no trigger or state declares",
                            reference.root
                        ),
                    )
                    .with_label("not declared")
                    .with_help(format!(
                        "did you mean `{close}`? A reference the model writes to an unset variable is refused"
                    )),
                    path,
                );
            }
        }
    }
}
