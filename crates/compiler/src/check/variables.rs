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
//!
//! References resolve only where the spec says they do (a `tools.allow` guard, the text
//! arguments the model writes). A human state's `evidence` paths and `approvers` are
//! shown as written, so a `${{…}}` there would reach the person literally: it is refused
//! (AMX0503), with the path a file handed over by `--file` is kept under.

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::schema::ast::{State, ValueType, Workflow};
use crate::source::Spanned;
use crate::syntax::reference::scan_template;
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

/// Lexes the references in the root's and every state's `instructions`, and refuses
/// them where nothing substitutes them.
pub fn check(workspace: &Workspace, workflow: &Workflow, findings: &mut Findings<'_>) {
    let declared = Declared::new(workflow);
    for state in &workflow.states {
        check_unsubstituted(workflow, state, findings);
    }
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
    // Every malformed reference is reported, and the well-formed ones beside it are still
    // judged: one typo in a reference must not hide a misspelt name in another.
    let (template, errors) = scan_template(&text.value);
    for error in errors {
        findings.push(
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
        );
    }
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
                format!("the instructions refer to `{}`, which no trigger or state declares", reference.root),
            )
            .with_label("not declared")
            .with_help(format!("did you mean `{close}`? A reference the model writes to an unset variable is refused")),
            path,
        );
    }
}

/// Where a handed file (`--file NAME=PATH`, or a file part of an upload) is kept.
pub use archmax_program::zones::HANDED_FILES;

/// AMX0503: `${{…}}` in a state's `evidence` or `approvers`, which are never substituted.
fn check_unsubstituted(workflow: &Workflow, state: &State, findings: &mut Findings<'_>) {
    let lists = [("evidence", &state.evidence), ("approvers", &state.approvers)];
    for (key, values) in lists {
        for (index, value) in values.iter().enumerate() {
            let (template, errors) = scan_template(&value.value);
            if !template.has_references() && errors.is_empty() {
                continue;
            }
            let root = template.references().next().map(|(reference, _)| reference.root.clone());
            let help = match (key, root) {
                ("evidence", Some(root)) => evidence_help(workflow, &root),
                ("evidence", None) => format!(
                    "write the path as the session holds it, such as `{HANDED_FILES}/receipt.pdf`; to show a file the run names, let the agent attach it: `archmax_advance({{ to, evidence: [...] }})`"
                ),
                _ => "write each approver's name as it should be shown: approvers are informational and never substituted".to_string(),
            };
            findings.push(
                Diagnostic::at(
                    Code::UnsubstitutedReference,
                    value.span,
                    format!(
                        "`{}` holds a `${{{{…}}}}` reference, but `{key}` is shown as written, never substituted",
                        value.value
                    ),
                )
                .with_label("stays literal")
                .with_help(help),
                format!("states.{}.{key}.{index}", state.slug.value),
            );
        }
    }
}

/// The help for `${{name}}` in an evidence path: the path a handed file is kept under
/// when `name` is a `file` input, and in every case the agent's way to attach a file.
fn evidence_help(workflow: &Workflow, name: &str) -> String {
    let attach = format!(
        "or let the agent attach it when it advances: `archmax_advance({{ to, evidence: [\"${{{{{name}}}}}\"] }})`, where references are substituted"
    );
    let input = workflow
        .triggers()
        .flat_map(|(_, trigger)| trigger.requires.iter())
        .find(|entry| entry.name.value == name && entry.ty.as_ref().is_some_and(|ty| ty.value == ValueType::File));
    let Some(input) = input else {
        return format!("write the path the file has in the session, {attach}");
    };
    let extensions: Vec<&str> = input
        .rules
        .accept
        .iter()
        .flat_map(|accept| accept.value.iter())
        .map(String::as_str)
        .filter(|accepted| accepted.starts_with('.'))
        .collect();
    match extensions.as_slice() {
        [] => format!(
            "a file handed to `{name}` with `--file {name}=PATH` is kept as `{HANDED_FILES}/{name}` plus the file's own extension: write that path (give `{name}` a single `accept` extension to make it certain), {attach}"
        ),
        [only] => format!(
            "a file handed to `{name}` with `--file {name}=PATH` is kept as `{HANDED_FILES}/{name}{}`: write that path, {attach}",
            only.to_lowercase()
        ),
        _ => format!(
            "a file handed to `{name}` with `--file {name}=PATH` is kept as `{HANDED_FILES}/{name}` plus the `accept` entry the file's name ends in, in lowercase: write that path (give `{name}` a single `accept` extension to make it certain), {attach}"
        ),
    }
}
