//! The shape of a case's tape, `tests/<case>.tape.yaml`, checked with spans.
//!
//! A tape is a list of scripted model answers (the VM's `model::tape` replays it; its
//! module docs describe the entries). The VM reads a tape through serde, which can only
//! say that it is malformed; `validate` reads each tape beside a case here first, so a
//! misspelt key or a wrong type is an AMX0911 at its line, rendered like any workflow
//! error. The one thing to know: the keys here are exactly the VM's `Entry`, `TapeCall`
//! and `TapeUsage` fields, all optional but a call's `name`.
//!
//! What a tape says about the workflow (the states its entries match, the targets of its
//! scripted `archmax_advance` calls) is kept as a [`Tape`], with spans, so `validate` can
//! hold it to the workflow (`check::tapes`) and a state rename can edit it.

use crate::diagnostic::{Code, Diagnostic, Scope, SpecPath};
use crate::source::{FileId, Spanned};
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

/// The control tool whose `to` a tape's entry is held to.
const ADVANCE: &str = "archmax_advance";

/// The roles a tape entry may match.
pub const ROLES: [&str; 4] = ["agent", "grader", "judge", "summarizer"];

/// What one tape names of the workflows it plays: its entries' matchers and the targets
/// of their scripted advances, each with its span.
#[derive(Clone, Debug)]
pub struct Tape {
    pub file: FileId,
    pub entries: Vec<TapeEntry>,
}

/// One entry of a tape, as far as it names states.
#[derive(Clone, Debug, Default)]
pub struct TapeEntry {
    /// 0-based position in the tape.
    pub index: usize,
    /// `state:`, the state the answered call is made in.
    pub state: Option<Spanned<String>>,
    /// `workflow:`, the calling session's workflow (the tape's own when absent).
    pub workflow: Option<Spanned<String>>,
    /// The `to` of each `archmax_advance` call the entry scripts, with its call's index.
    pub advances: Vec<(usize, Spanned<String>)>,
}

/// Every problem in one tape's text, and what the tape names.
pub fn check_tape(file: FileId, text: &str, workflow: &str) -> (Tape, Vec<Diagnostic>) {
    let scope = Scope::Workflow(workflow.to_string());
    let document = yaml::load(file, text);
    let mut diagnostics: Vec<Diagnostic> =
        document.diagnostics.into_iter().map(|diagnostic| diagnostic.with_scope(scope.clone())).collect();
    let mut tape = Tape { file, entries: Vec::new() };
    let Some(root) = document.root else {
        return (tape, diagnostics);
    };
    let mut reader = Reader::new(text, scope);
    match root.as_sequence() {
        Some(entries) => {
            for (index, entry) in entries.iter().enumerate() {
                let mut named = TapeEntry { index, ..TapeEntry::default() };
                read_entry(&mut reader, entry, &SpecPath::ROOT.index(index), &mut named);
                tape.entries.push(named);
            }
        }
        None if root.is_null() => {}
        None => reader.wrong_type(&root, &SpecPath::ROOT, "a list of model answers"),
    }
    diagnostics.extend(reader.diagnostics.into_iter().map(retag));
    (tape, diagnostics)
}

/// The reader reports as the workflow schema does; on a tape every finding is AMX0911.
fn retag(mut diagnostic: Diagnostic) -> Diagnostic {
    diagnostic.code = Code::TapeSchema;
    diagnostic.severity = Code::TapeSchema.info().severity;
    diagnostic
}

fn read_entry(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>, named: &mut TapeEntry) {
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
            "state" => named.state = reader.string(field.value, &key_path),
            "workflow" => named.workflow = reader.string(field.value, &key_path),
            "text" | "model" | "id" => {
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
                        if let Some(to) = read_call(reader, call, &key_path.index(index)) {
                            named.advances.push((index, to));
                        }
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

/// Checks one scripted call; an `archmax_advance` gives back its `to` when it is a string.
fn read_call(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
    let fields = reader.fields(node, path, &CALL, false)?;
    if !fields.iter().any(|field| field.key == "name") {
        reader.report(
            Diagnostic::at(Code::TapeSchema, node.span, "a tape tool call has no `name`")
                .with_label("which tool?")
                .with_help("write `{ name: archmax_advance, args: { to: next-state } }`"),
            path,
        );
    }
    let mut advance = false;
    let mut to = None;
    for field in fields {
        match field.key {
            "name" => {
                advance = reader.string(field.value, &path.key(field.key)).is_some_and(|name| name.value == ADVANCE);
            }
            "id" => {
                reader.string(field.value, &path.key(field.key));
            }
            "args" => {
                to = field
                    .value
                    .get("to")
                    .and_then(|target| target.as_str().map(|text| Spanned::new(text.to_string(), target.span)));
            }
            _ => {}
        }
    }
    to.filter(|_| advance)
}
