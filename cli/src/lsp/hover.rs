//! Hover: a diagnostic code's `archmax explain` text, a state's summary (on its key or a
//! reference to it), or a key's documentation from the authoring schema.

use archmax_compiler::Code;
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind};

use super::cursor::{self, Segment};
use super::navigation::{self, Target};
use super::schema_docs::SchemaDocs;
use super::session::Session;
use super::text::LineIndex;

/// The hover at a byte offset of a root-relative path; `None` when nothing is there.
pub fn hover(session: &Session, path: &str, text: &str, offset: usize) -> Option<Hover> {
    let index = LineIndex::new(text);
    let context = cursor::context(text, offset);
    let (start, end) = context.word;
    let word = text.get(start..end).unwrap_or("");
    let (markdown, range) = if let Some(code) = code_in(word) {
        (format!("**{}** `{}`\n\n{}", code.as_str(), code.info().name, code.info().explanation), (start, end))
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
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: markdown }),
        range: Some(index.range(range.0, range.1)),
    })
}

/// An `AMX` code written as a word (in a comment, a case's expectation).
fn code_in(word: &str) -> Option<Code> {
    let code = word.trim_matches(|character: char| !character.is_ascii_alphanumeric());
    code.starts_with("AMX").then(|| Code::from_code(code)).flatten()
}

fn state_hover(session: &Session, path: &str, offset: usize) -> Option<(String, archmax_compiler::source::Span)> {
    let workflow = session.workflow(path)?;
    let (Target::State(name), span) = navigation::target_at(workflow, offset)? else {
        return None;
    };
    Some((navigation::state_summary(navigation::state(workflow, &name)?), span))
}
