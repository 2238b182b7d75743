//! Code-state scripts: the `script` path's shape, the file's existence, and its imports.
//!
//! The sandbox strips static imports from `@archmax-ai/harness/*` (they carry types
//! only) and refuses every other module, so the validator refuses them first: a static
//! import or re-export of anything else, and any dynamic `import()` or `require()`.

use regex::Regex;
use std::sync::LazyLock;

use crate::diagnostic::{Code, Diagnostic};
use crate::schema::ast::{StateKind, Workflow};
use crate::source::{SourceFile, Span};
use crate::workspace::Workspace;

use super::Findings;
use super::bytecode::{CompiledScript, ScriptError, module_bytecode, module_name, strip_harness_imports};

/// The module prefix the sandbox strips.
pub const HARNESS_PREFIX: &str = "@archmax-ai/harness/";

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

/// An import the sandbox would refuse.
#[derive(Debug, PartialEq, Eq)]
pub struct ForbiddenImport {
    pub specifier: String,
    pub dynamic: bool,
    pub range: std::ops::Range<usize>,
}

impl ForbiddenImport {
    fn describe(&self) -> String {
        if self.dynamic {
            format!("loads `{}` at run time, which the sandbox cannot do", self.specifier)
        } else {
            format!("imports `{}`, which is not an `@archmax-ai/harness/…` module", self.specifier)
        }
    }
}

static STATIC_FROM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*(['"])([^'"\n]*)['"]"#).expect("static pattern")
});
static BARE_IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?m)^[ \t]*import\s*(['"])([^'"\n]*)['"]"#).expect("static pattern"));
static DYNAMIC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\b(?:import|require)\s*\(\s*(['"`])([^'"`\n]*)['"`]"#).expect("static pattern"));

/// Finds the imports of a script that the sandbox refuses. Comments are blanked first,
/// keeping offsets, so prose in a docblock never counts.
pub fn forbidden_imports(source: &str) -> Vec<ForbiddenImport> {
    let (code, strings) = blank_comments(source);
    let in_code = |offset: usize| !strings.iter().any(|range| range.contains(&offset));
    let mut found = Vec::new();
    for pattern in [&*STATIC_FROM, &*BARE_IMPORT] {
        for captures in pattern.captures_iter(&code) {
            if let Some(specifier) = captures.get(2)
                && captures.get(0).is_some_and(|whole| {
                    in_code(whole.start() + whole.as_str().len() - whole.as_str().trim_start().len())
                })
                && !specifier.as_str().starts_with(HARNESS_PREFIX)
            {
                found.push(ForbiddenImport {
                    specifier: specifier.as_str().to_string(),
                    dynamic: false,
                    range: specifier.range(),
                });
            }
        }
    }
    for captures in DYNAMIC.captures_iter(&code) {
        if let Some(specifier) = captures.get(2)
            && captures.get(0).is_some_and(|whole| in_code(whole.start()))
        {
            found.push(ForbiddenImport {
                specifier: specifier.as_str().to_string(),
                dynamic: true,
                range: specifier.range(),
            });
        }
    }
    found.sort_by_key(|import| import.range.start);
    found.dedup_by_key(|import| import.range.start);
    found
}

/// The byte ranges of static `@archmax-ai/harness/…` import statements, which the
/// sandbox strips before running a script (a trailing `;` included).
pub fn harness_imports(source: &str) -> Vec<std::ops::Range<usize>> {
    let (code, strings) = blank_comments(source);
    let in_code = |offset: usize| !strings.iter().any(|range| range.contains(&offset));
    let mut ranges = Vec::new();
    for pattern in [&*STATIC_FROM, &*BARE_IMPORT] {
        for captures in pattern.captures_iter(&code) {
            let (Some(whole), Some(specifier)) = (captures.get(0), captures.get(2)) else {
                continue;
            };
            let keyword = whole.start() + whole.as_str().len() - whole.as_str().trim_start().len();
            if !specifier.as_str().starts_with(HARNESS_PREFIX) || !in_code(keyword) {
                continue;
            }
            let mut end = whole.end();
            let rest = &source[end..];
            let spaces = rest.len() - rest.trim_start_matches([' ', '\t']).len();
            if rest[spaces..].starts_with(';') {
                end += spaces + 1;
            }
            ranges.push(keyword..end);
        }
    }
    ranges.sort_by_key(|range| range.start);
    ranges
}

/// Replaces `//` and `/* */` comments with spaces (newlines kept), and returns the
/// byte ranges of string literals, so matches inside strings can be told apart.
fn blank_comments(source: &str) -> (String, Vec<std::ops::Range<usize>>) {
    let bytes = source.as_bytes();
    let mut out = bytes.to_vec();
    let mut strings = Vec::new();
    let mut index = 0;
    let mut quote: Option<(u8, usize)> = None;
    while index < bytes.len() {
        let byte = bytes[index];
        if let Some((open, start)) = quote {
            if byte == b'\\' {
                index += 2;
                continue;
            }
            if byte == open || (byte == b'\n' && open != b'`') {
                quote = None;
                strings.push(start..index + 1);
            }
            index += 1;
            continue;
        }
        match byte {
            b'"' | b'\'' | b'`' => {
                quote = Some((byte, index));
                index += 1;
            }
            b'/' if bytes.get(index + 1) == Some(&b'/') => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    out[index] = b' ';
                    index += 1;
                }
            }
            b'/' if bytes.get(index + 1) == Some(&b'*') => {
                let end = source[index + 2..].find("*/").map(|offset| index + 2 + offset + 2).unwrap_or(bytes.len());
                for position in index..end {
                    if bytes[position] != b'\n' {
                        out[position] = b' ';
                    }
                }
                index = end;
            }
            _ => index += 1,
        }
    }
    if let Some((_, start)) = quote {
        strings.push(start..bytes.len());
    }
    // Whole comments are blanked, multi-byte characters included, so the bytes stay
    // valid UTF-8; should that ever fail, the source itself is scanned.
    (String::from_utf8(out).unwrap_or_else(|_| source.to_string()), strings)
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
