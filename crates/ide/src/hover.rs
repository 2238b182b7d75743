//! Hover: a diagnostic code's `archmax explain` text (a code written in the text, or a
//! finding where the cursor is), a state's summary (on its key or a reference to it), or
//! a key's documentation from the authoring schema.

use archmax_compiler::Code;

use crate::cursor::{self, Segment};
use crate::navigation::{self, Target};
use crate::schema_docs::SchemaDocs;
use crate::text::{LineIndex, Range};
use crate::workspace::Workspace;

/// What to show for the cursor's place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hover {
    pub markdown: String,
    /// The text the hover is about.
    pub range: Range,
}

/// The hover at a byte offset of a root-relative path; `None` when nothing is there. A
/// finding of the last check where the cursor is adds its code's explanation.
pub fn hover(session: &Workspace, path: &str, text: &str, offset: usize) -> Option<Hover> {
    let index = LineIndex::new(text);
    let position = index.position(offset);
    let findings: Vec<Code> = session
        .findings(path)
        .iter()
        .filter(|finding| finding.range.touches(position))
        .map(|finding| finding.code)
        .collect();
    let found = subject(session, path, text, offset);
    if found.is_none() && findings.is_empty() {
        return None;
    }
    let (mut markdown, range) = found.unwrap_or_else(|| (String::new(), (offset, offset)));
    for code in findings {
        if !markdown.is_empty() {
            markdown.push_str("\n\n---\n\n");
        }
        markdown.push_str(&explanation(code));
    }
    Some(Hover { markdown, range: index.range(range.0, range.1) })
}

fn explanation(code: Code) -> String {
    format!("**{}** `{}`\n\n{}", code.as_str(), code.info().name, code.info().explanation)
}

/// What the cursor is on: a code, a state, a key; with the byte range it covers.
fn subject(session: &Workspace, path: &str, text: &str, offset: usize) -> Option<(String, (usize, usize))> {
    let context = cursor::context(text, offset);
    let (start, end) = context.word;
    let word = text.get(start..end).unwrap_or("");
    let (markdown, range) = if let Some(code) = code_in(word) {
        (explanation(code), (start, end))
    } else if let Some((markdown, span)) = state_hover(session, path, offset) {
        (markdown, (span.start as usize, span.end as usize))
    } else {
        let docs = SchemaDocs::for_path(path)?;
        let key = context.key.as_ref().filter(|_| !context.in_value)?;
        let mut keys = context.parents.clone();
        keys.push(Segment::Key(key.clone()));
        let node = docs.at(&keys)?;
        let mut markdown = format!("**`{key}`**");
        if let Some(description) = docs.description(node) {
            markdown.push_str(&format!("\n\n{description}"));
        }
        let values = docs.values(node);
        if !values.is_empty() {
            let values: Vec<String> = values.iter().map(|value| format!("`{value}`")).collect();
            markdown.push_str(&format!("\n\none of {}", values.join(", ")));
        }
        (markdown, (start, end))
    };
    Some((markdown, range))
}

/// An `AMX` code written as a word (in a comment, a case's expectation).
fn code_in(word: &str) -> Option<Code> {
    let code = word.trim_matches(|character: char| !character.is_ascii_alphanumeric());
    code.starts_with("AMX").then(|| Code::from_code(code)).flatten()
}

fn state_hover(session: &Workspace, path: &str, offset: usize) -> Option<(String, archmax_compiler::source::Span)> {
    let workflow = session.workflow(path)?;
    let (Target::State(name), span) = navigation::target_at(workflow, offset)? else {
        return None;
    };
    Some((navigation::state_summary(navigation::state(workflow, &name)?), span))
}
