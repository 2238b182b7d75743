//! Code-state scripts: the `script` path's shape, the file's existence, its imports, and
//! the targets it advances to.
//!
//! The sandbox strips static imports from `@archmax-ai/harness/*` (they carry types
//! only) and refuses every other module, so the validator refuses them first: a static
//! import or re-export of anything else, and any dynamic `import()` or `require()`. A
//! `tools.archmax_advance({ to: "…" })` whose target is a string literal is held to the
//! state's transitions (AMX0220, a warning: the call would be refused at run time, but
//! the script may never reach it); a computed target is left to the runtime.

use crate::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use crate::schema::ast::{State, StateKind, Workflow};
use crate::source::{SourceFile, Span};
use crate::workspace::Workspace;

use super::Findings;
use super::bytecode::{CompiledScript, ScriptError, module_bytecode, module_name, strip_harness_imports};

pub use archmax_program::script::{
    AdvanceTarget, ForbiddenImport, HARNESS_PREFIX, advance_targets, forbidden_imports, harness_imports,
};

/// What a `script` value must look like; `Err` says why it does not.
pub fn script_path_problem(path: &str) -> Option<&'static str> {
    if path.starts_with('/') || path.contains('\\') {
        return Some("it must be relative to the workflow directory");
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return Some("it must not climb out with `..`");
    }
    if segments.iter().any(|segment| segment.is_empty() || *segment == ".") {
        return Some("it has an empty or `.` segment");
    }
    if segments.first() != Some(&"scripts") || segments.len() < 2 {
        return Some("code-state scripts live under `scripts/`");
    }
    if !(path.ends_with(".js") || path.ends_with(".mjs")) {
        return Some("a script ends in `.js` or `.mjs`");
    }
    None
}

/// Checks every code state's script and compiles each valid one once, into `compiled`.
pub fn check(
    workspace: &Workspace,
    workflow: &Workflow,
    compiled: &mut Vec<CompiledScript>,
    findings: &mut Findings<'_>,
) {
    let Some(source) = workspace.workflow(&workflow.slug) else {
        return;
    };
    for state in &workflow.states {
        if state.kind != StateKind::Code {
            continue;
        }
        let Some(script) = &state.script else {
            continue;
        };
        let path = format!("states.{}.script", state.slug.value);
        if let Some(problem) = script_path_problem(&script.value) {
            findings.push(
                Diagnostic::at(
                    Code::ScriptPath,
                    script.span,
                    format!("`{}` is not a script path: {problem}", script.value),
                )
                .with_label("malformed script path")
                .with_help("write `script: scripts/<file>.js`, resolving to `workflows/<slug>/scripts/<file>.js`"),
                path,
            );
            continue;
        }
        let Some((_, file)) = source.scripts.iter().find(|(relative, _)| *relative == script.value) else {
            findings.push(
                Diagnostic::at(
                    Code::ScriptMissing,
                    script.span,
                    format!("`workflows/{}/{}` does not exist", workflow.slug, script.value),
                )
                .with_label("no such file")
                .with_help(match source.scripts.first() {
                    Some((existing, _)) => {
                        format!("create the script, or point `script` at an existing one such as `{existing}`")
                    }
                    None => "create the script under the workflow's `scripts/` directory".to_string(),
                }),
                path,
            );
            continue;
        };
        let text = workspace.sources.text(*file);
        check_advance_targets(workflow, state, *file, text, &path, findings);
        let imports = forbidden_imports(text);
        if imports.is_empty() && !compiled.iter().any(|done| done.path == script.value) {
            let stripped = strip_harness_imports(text);
            match module_bytecode(&module_name(&workflow.slug, &script.value), &stripped) {
                Ok(bytecode) => {
                    compiled.push(CompiledScript { path: script.value.clone(), source: stripped, bytecode });
                }
                Err(error) => {
                    let offset = error_offset(workspace.sources.file(*file), &error);
                    findings.push(
                        Diagnostic::at(
                            Code::ScriptSyntax,
                            Span::new(*file, offset, offset),
                            format!("the script for `{}` does not compile: {}", state.slug.value, error.message),
                        )
                        .with_label("QuickJS refused it")
                        .with_secondary(script.span, "run by this state")
                        .with_help(
                            "fix the JavaScript: the script is an ES module whose default export is an async function",
                        ),
                        path.clone(),
                    );
                }
            }
        }
        for import in imports {
            findings.push(
                Diagnostic::at(
                    Code::ScriptImport,
                    Span::new(*file, import.range.start, import.range.end),
                    format!("the script for `{}` {}", state.slug.value, import.describe()),
                )
                .with_label("refused by the sandbox")
                .with_secondary(script.span, "run by this state")
                .with_help("scripts reach the outside only through `tools.*`; type-only imports from `@archmax-ai/harness/…` are the one exception"),
                path.clone(),
            );
        }
    }
}

/// AMX0220: each literal `archmax_advance` target of `state`'s script that is not one of
/// its transitions.
fn check_advance_targets(
    workflow: &Workflow,
    state: &State,
    file: crate::source::FileId,
    text: &str,
    path: &str,
    findings: &mut Findings<'_>,
) {
    // Transitions lost to a misspelt key are reported there, not at each call.
    if state.lost_edges() {
        return;
    }
    let targets: Vec<&str> = state.transitions.iter().map(|transition| transition.to.value.as_str()).collect();
    for AdvanceTarget { target, range } in advance_targets(text) {
        if targets.contains(&target.as_str()) {
            continue;
        }
        let is_state = workflow.states.iter().any(|other| other.slug.value == target);
        let message = match (is_state, targets.is_empty()) {
            (_, true) => format!(
                "the script for `{}` advances to `{target}`, but `{}` has no transitions, so it cannot advance",
                state.slug.value, state.slug.value
            ),
            (true, false) => format!(
                "the script for `{}` advances to `{target}`, a state `{}` has no transition to",
                state.slug.value, state.slug.value
            ),
            (false, false) => format!(
                "the script for `{}` advances to `{target}`, which is not a state of `{}`",
                state.slug.value, workflow.slug
            ),
        };
        let help = match did_you_mean(&target, targets.iter().copied()) {
            Some(close) => format!("did you mean `{close}`?"),
            None if targets.is_empty() => {
                format!("add a transition from `{}` to the state the script moves to", state.slug.value)
            }
            None => format!(
                "`{}` may advance to {}; add a transition or correct the target",
                state.slug.value,
                list_names(&targets)
            ),
        };
        findings.push(
            Diagnostic::at(Code::ScriptAdvanceTarget, crate::source::Span::new(file, range.start, range.end), message)
                .with_label("no such transition")
                .with_secondary(state.slug.span, "the state that runs the script")
                .with_help(help),
            path.to_string(),
        );
    }
}

/// The byte offset QuickJS's 1-based line and column point at (the file's start when it
/// names none).
fn error_offset(source: &SourceFile, error: &ScriptError) -> usize {
    match (error.line, error.column) {
        (Some(line), Some(column)) => {
            let start = source.line_start(line);
            let line_text = &source.text[start..source.line_start(line + 1).max(start)];
            start + line_text.char_indices().nth(column.saturating_sub(1)).map(|(at, _)| at).unwrap_or(0)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_imports_pass_and_others_are_found() {
        let source = r#"/**
 * Checks a refund. Do not import "fs" here.
 */
import type { CodeStateInput } from "@archmax-ai/harness/code-state";
import { readFileSync } from "node:fs";
import "./side-effect.js";
export { x } from 'lodash';
const later = await import("http");
// require("commented")
const value = "require('in a string')";
"#;
        let found: Vec<(String, bool)> =
            forbidden_imports(source).into_iter().map(|import| (import.specifier, import.dynamic)).collect();
        assert_eq!(
            found,
            vec![
                ("node:fs".to_string(), false),
                ("./side-effect.js".to_string(), false),
                ("lodash".to_string(), false),
                ("http".to_string(), true),
            ]
        );
    }

    #[test]
    fn harness_imports_are_found_with_their_semicolon() {
        let source = "import type { A } from \"@archmax-ai/harness/code-state\";\nimport x from \"other\";\n";
        let ranges = harness_imports(source);
        assert_eq!(ranges.len(), 1);
        assert_eq!(&source[ranges[0].clone()], "import type { A } from \"@archmax-ai/harness/code-state\";");
    }

    #[test]
    fn script_paths() {
        assert_eq!(script_path_problem("scripts/check.js"), None);
        assert_eq!(script_path_problem("scripts/nested/check.mjs"), None);
        assert!(script_path_problem("hooks/check.js").is_some());
        assert!(script_path_problem("scripts/check.ts").is_some());
        assert!(script_path_problem("scripts/../x.js").is_some());
        assert!(script_path_problem("/scripts/x.js").is_some());
    }
}
