//! Reading text: the spanned YAML loader (with `yaml_errors`, which blames a scan error
//! on its cause), the `${{…}}` reference lexer, and Markdown frontmatter.

pub use archmax_program::reference;
pub use archmax_program::slug::is_slug;
pub mod yaml;
mod yaml_errors;

use std::ops::Range;

use crate::source::Span;
use yaml::Node;

/// A Markdown file's leading `---` block: its YAML text and where that text starts.
#[derive(Debug, PartialEq, Eq)]
pub struct Frontmatter<'t> {
    pub yaml: &'t str,
    /// Byte offset of `yaml` in the file.
    pub offset: usize,
    /// Byte offset where the body after the closing fence starts.
    pub body_offset: usize,
    /// The span of the whole block, fences included.
    pub block: Range<usize>,
}

/// Finds a frontmatter block: a first line of `---` and a later line of `---` (or `...`).
/// A first line of `---` with no closing fence still counts as an opened block and
/// returns the rest of the file as its YAML.
pub fn frontmatter(text: &str) -> Option<Frontmatter<'_>> {
    let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let rest = &text[start..];
    let first_line_end = rest.find('\n').map(|index| index + 1).unwrap_or(rest.len());
    if rest[..first_line_end].trim_end() != "---" {
        return None;
    }
    let yaml_start = start + first_line_end;
    let mut line_start = yaml_start;
    while line_start < text.len() {
        let line_end = text[line_start..].find('\n').map(|index| line_start + index + 1).unwrap_or(text.len());
        let line = text[line_start..line_end].trim_end();
        if line == "---" || line == "..." {
            return Some(Frontmatter {
                yaml: &text[yaml_start..line_start],
                offset: yaml_start,
                body_offset: line_end,
                block: start..line_end,
            });
        }
        line_start = line_end;
    }
    Some(Frontmatter {
        yaml: &text[yaml_start..],
        offset: yaml_start,
        body_offset: text.len(),
        block: start..text.len(),
    })
}

/// The span of `range` inside the string value of `node`, mapped back to the file.
///
/// A plain or quoted scalar without escapes maps one to one; otherwise the raw text of
/// the range is searched for inside the node's source, and the whole node is the
/// fallback (block scalars, escapes that change lengths).
pub fn value_subspan(source: &str, node: &Node, value: &str, range: Range<usize>) -> Span {
    text_subspan(source, node.span, value, range)
}

/// [`value_subspan`] for a string value known only by the span it was read from.
pub fn text_subspan(source: &str, span: Span, value: &str, range: Range<usize>) -> Span {
    let raw = source.get(span.start as usize..span.end as usize).unwrap_or("");
    let piece = value.get(range.clone()).unwrap_or("");
    let shifted = |offset: usize| Span {
        file: span.file,
        start: span.start + (offset + range.start) as u32,
        end: span.start + (offset + range.end) as u32,
    };
    if raw == value {
        return shifted(0);
    }
    let quoted = raw.len() >= 2
        && ((raw.starts_with('"') && raw.ends_with('"')) || (raw.starts_with('\'') && raw.ends_with('\'')));
    if quoted && &raw[1..raw.len() - 1] == value {
        return shifted(1);
    }
    if !piece.is_empty()
        && let Some(found) = raw.find(piece)
    {
        return Span {
            file: span.file,
            start: span.start + found as u32,
            end: span.start + (found + piece.len()) as u32,
        };
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_frontmatter_blocks() {
        let text = "---\nname: x\n---\nbody\n";
        let found = frontmatter(text).expect("a block");
        assert_eq!(found.yaml, "name: x\n");
        assert_eq!(&text[found.body_offset..], "body\n");
        assert!(frontmatter("# title\n---\n").is_none());
        assert!(frontmatter("---\nunclosed: true\n").is_some());
    }
}
