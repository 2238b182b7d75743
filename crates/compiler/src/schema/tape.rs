//! The shape of a case's tape, `tests/<case>.tape.yaml`, checked with spans.
//!
//! A tape is a list of scripted model answers (the VM's `model::tape` replays it; its
//! module docs describe the entries). The VM reads a tape through serde, which can only
//! say that it is malformed; `validate` reads each tape beside a case here first, so a
//! misspelt key or a wrong type is an AMX0911 at its line, rendered like any workflow
//! error. The one thing to know: the keys here are exactly the VM's `Entry`, `TapeCall`
//! and `TapeUsage` fields, all optional but a call's `name`.

use crate::diagnostic::{Code, Diagnostic, Scope, SpecPath};
use crate::source::FileId;
use crate::syntax::yaml::{self, Node};

use super::reader::{Fields, Reader};

const ENTRY: Fields = Fields {
    known: &[
        "state",
        "role",
        "workflow",
        "variables",
        "text",
        "chunks",
        "tool_calls",
        "usage",
        "model",
        "id",
        "truncated",
    ],
    removed: &[],
    what: "a tape entry",
};
const CALL: Fields = Fields { known: &["name", "args", "id"], removed: &[], what: "a tape tool call" };
const USAGE: Fields =
    Fields { known: &["input", "output", "cache_read", "cache_write"], removed: &[], what: "a tape entry's `usage`" };

/// The roles a tape entry may match.
pub const ROLES: [&str; 4] = ["agent", "grader", "judge", "summarizer"];

/// Every problem in one tape's text.
pub fn check_tape(file: FileId, text: &str, workflow: &str) -> Vec<Diagnostic> {
    let scope = Scope::Workflow(workflow.to_string());
    let document = yaml::load(file, text);
    let mut diagnostics: Vec<Diagnostic> =
        document.diagnostics.into_iter().map(|diagnostic| diagnostic.with_scope(scope.clone())).collect();
    let Some(root) = document.root else {
        return diagnostics;
    };
    let mut reader = Reader::new(text, scope);
    match root.as_sequence() {
        Some(entries) => {
            for (index, entry) in entries.iter().enumerate() {
                read_entry(&mut reader, entry, &SpecPath::ROOT.index(index));
            }
        }
        None if root.is_null() => {}
        None => reader.wrong_type(&root, &SpecPath::ROOT, "a list of model answers"),
    }
    diagnostics.extend(reader.diagnostics.into_iter().map(retag));
    diagnostics
}

/// The reader reports as the workflow schema does; on a tape every finding is AMX0911.
fn retag(mut diagnostic: Diagnostic) -> Diagnostic {
    diagnostic.code = Code::TapeSchema;
    diagnostic.severity = Code::TapeSchema.info().severity;
    diagnostic
}

fn read_entry(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) {
    let Some(fields) = reader.fields(node, path, &ENTRY, false) else {
        return;
    };
    if let (Some(_), Some(chunks)) =
        (fields.iter().find(|field| field.key == "text"), fields.iter().find(|field| field.key == "chunks"))
    {
        reader.report(
            Diagnostic::at(Code::TapeSchema, chunks.value.span, "a tape entry has both `text` and `chunks`")
                .with_label("the text again, in pieces")
                .with_help("keep one: `chunks` is the entry's text in the pieces a stream would bring"),
            &path.key("chunks"),
        );
    }
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "state" | "workflow" | "text" | "model" | "id" => {
                reader.string(field.value, &key_path);
            }
            "truncated" => {
                reader.boolean(field.value, &key_path);
            }
            "chunks" => {
                reader.string_list(field.value, &key_path);
            }
            "role" => match field.value.as_str() {
                Some(role) if ROLES.contains(&role) => {}
                _ => reader.invalid_value(
                    field.value,
                    &key_path,
                    format!(
                        "`{}` is not a role a tape entry matches",
                        field.value.scalar_text().unwrap_or("this value")
                    ),
                    "a tape entry's `role` is `agent`, `grader`, `judge` or `summarizer`".to_string(),
                ),
            },
            "variables" => {
                reader.mapping(field.value, &key_path, false);
            }
            "tool_calls" => match field.value.as_sequence() {
                Some(calls) => {
                    for (index, call) in calls.iter().enumerate() {
                        read_call(reader, call, &key_path.index(index));
                    }
                }
                None => reader.wrong_type(field.value, &key_path, "a list of tool calls"),
            },
            "usage" => {
                if let Some(counts) = reader.fields(field.value, &key_path, &USAGE, false) {
                    for count in counts {
                        reader.integer_at_least(count.value, &key_path.key(count.key), 0);
                    }
                }
            }
            _ => {}
        }
    }
}

fn read_call(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) {
    let Some(fields) = reader.fields(node, path, &CALL, false) else {
        return;
    };
    if !fields.iter().any(|field| field.key == "name") {
        reader.report(
            Diagnostic::at(Code::TapeSchema, node.span, "a tape tool call has no `name`")
                .with_label("which tool?")
                .with_help("write `{ name: archmax_advance, args: { to: next-state } }`"),
            path,
        );
    }
    for field in fields {
        match field.key {
            "name" | "id" => {
                reader.string(field.value, &path.key(field.key));
            }
            _ => {}
        }
    }
}
