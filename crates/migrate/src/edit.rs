//! Byte-range edits over one source text, and the line arithmetic they are placed with.
//!
//! The one thing to know: a migration never re-serializes a document. Every change is a
//! replacement of a byte range of the original text, so whatever no edit covers comes
//! out byte for byte as it went in. When two edits overlap, the wider one (the first by
//! position, or of two at one offset the one reaching further) wins and the one inside
//! it is dropped: that is how a retargeted `to:` inside
//! a block that moves as a whole is taken care of by the copy, not twice.

use std::ops::Range;

/// The edits of one text, applied together.
#[derive(Debug, Default)]
pub(crate) struct Edits {
    list: Vec<(Range<usize>, String)>,
}

impl Edits {
    pub fn replace(&mut self, range: Range<usize>, text: impl Into<String>) {
        self.list.push((range, text.into()));
    }

    pub fn insert(&mut self, at: usize, text: impl Into<String>) {
        self.replace(at..at, text);
    }

    /// The edits that fall inside `range`, shifted to be relative to its start.
    pub fn within(&self, range: &Range<usize>) -> Edits {
        let list = self
            .list
            .iter()
            .filter(|(edit, _)| edit.start >= range.start && edit.end <= range.end && !edit.is_empty() && edit != range)
            .map(|(edit, text)| (edit.start - range.start..edit.end - range.start, text.clone()))
            .collect();
        Edits { list }
    }

    /// The text with every edit applied. Insertions at one offset keep the order they were
    /// made in and go ahead of a replacement starting there.
    pub fn apply(&self, source: &str) -> String {
        let mut order: Vec<usize> = (0..self.list.len()).collect();
        // At one start: insertions first, then the widest replacement, which takes the
        // narrower ones with it.
        order.sort_by_key(|&index| {
            let (range, _) = &self.list[index];
            (range.start, !range.is_empty(), std::cmp::Reverse(range.end), index)
        });
        let mut out = String::with_capacity(source.len());
        let mut cursor = 0;
        for index in order {
            let (range, text) = &self.list[index];
            if range.start < cursor || range.end > source.len() || range.start > range.end {
                continue;
            }
            out.push_str(source.get(cursor..range.start).unwrap_or(""));
            out.push_str(text);
            cursor = range.end;
        }
        out.push_str(source.get(cursor..).unwrap_or(""));
        out
    }
}

/// The offset where the line holding `at` starts.
pub(crate) fn line_start(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text[..at].rfind('\n').map_or(0, |index| index + 1)
}

/// The offset just past the line break ending the line that holds `at` (the end of the
/// text on the last line). An offset already at a line start is its own answer.
pub(crate) fn line_end(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    if at > 0 && text.as_bytes()[at - 1] == b'\n' {
        return at;
    }
    text[at..].find('\n').map_or(text.len(), |index| at + index + 1)
}

/// The end of the line holding the last non-blank character before `end`: where a node
/// whose span runs on over trailing blank lines (a block scalar) really ends.
pub(crate) fn node_end(text: &str, end: usize) -> usize {
    let end = end.min(text.len());
    let last = text[..end].trim_end().len();
    line_end(text, last)
}

/// The column (in bytes: indentation is spaces) of `at` on its line.
pub(crate) fn column(text: &str, at: usize) -> usize {
    at.min(text.len()) - line_start(text, at)
}

/// The start of the comment lines directly above the line at `at` that are indented like
/// it: they belong to what follows them.
pub(crate) fn comments_above(text: &str, at: usize) -> usize {
    let indent = column(text, at);
    let mut start = line_start(text, at);
    while start > 0 {
        let previous = line_start(text, start - 1);
        let line = &text[previous..start];
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') && line.len() - trimmed.len() == indent {
            start = previous;
        } else {
            break;
        }
    }
    start
}

/// `count` spaces.
pub(crate) fn pad(count: usize) -> String {
    " ".repeat(count)
}

/// Every non-blank line of `block` shifted right by `by` columns, or left when negative
/// (never past its own indentation).
pub(crate) fn reindent(block: &str, by: isize) -> String {
    let mut out = String::with_capacity(block.len());
    for line in block.split_inclusive('\n') {
        if line.trim().is_empty() {
            out.push_str(line);
        } else if by >= 0 {
            out.push_str(&pad(by as usize));
            out.push_str(line);
        } else {
            let leading = line.len() - line.trim_start_matches(' ').len();
            out.push_str(&line[leading.min(by.unsigned_abs())..]);
        }
    }
    out
}

/// A 1-based line and column (columns in characters) of a byte offset.
pub(crate) fn line_column(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let start = line_start(text, at);
    let line = text[..start].matches('\n').count() + 1;
    let column = text.get(start..at).map_or(at - start, |prefix| prefix.chars().count()) + 1;
    (line, column)
}

/// Plain words a YAML 1.1 reader takes for booleans; they are quoted for its sake.
const YAML_1_1_WORDS: [&str; 22] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "=", "<<",
    "true", "false", "null", "~",
];

/// `value` as a YAML scalar: plain when it reads back as the same string, else quoted.
pub(crate) fn yaml_string(value: &str) -> String {
    let plain = !value.is_empty()
        && value.trim() == value
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
        && !value.contains('\n')
        && !value.starts_with(|first: char| "-?:,[]{}#&*!|>'\"%@`".contains(first))
        && !YAML_1_1_WORDS.contains(&value)
        && matches!(
            archmax_compiler::syntax::yaml::resolve_plain(value),
            archmax_compiler::syntax::yaml::ScalarValue::String
        );
    if plain { value.to_string() } else { serde_json::Value::String(value.to_string()).to_string() }
}

/// `value` as a literal block scalar (`|-`) whose lines are indented by `indent`, the
/// value of a key at column `key`. When the text's first non-blank line itself starts
/// with spaces the block says its indentation (`|2-`), which a reader would otherwise
/// take from that line.
pub(crate) fn literal_block(value: &str, key: usize, indent: usize) -> String {
    let lines: Vec<&str> = value.trim_end_matches('\n').split('\n').collect();
    let leading = lines
        .iter()
        .find(|line| !line.trim().is_empty() || line.starts_with(' '))
        .is_some_and(|line| line.starts_with(' '));
    let step = indent.saturating_sub(key);
    let mut out = if leading && (1..=9).contains(&step) { format!("|{step}-\n") } else { String::from("|-\n") };
    for line in lines {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&pad(indent));
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wider_edit_wins_over_one_inside_it() {
        let mut edits = Edits::default();
        edits.replace(4..5, "X");
        edits.replace(2..8, "[moved]");
        edits.insert(2, "<");
        assert_eq!(edits.apply("0123456789"), "01<[moved]89");
    }

    #[test]
    fn of_two_edits_at_one_offset_the_wider_wins() {
        let mut edits = Edits::default();
        edits.replace(2..4, "n");
        edits.replace(2..8, "W");
        assert_eq!(edits.apply("0123456789"), "01W89");
    }

    #[test]
    fn a_block_whose_first_line_is_indented_says_its_indentation() {
        assert_eq!(literal_block("  one\ntwo", 4, 6), "|2-\n        one\n      two\n");
        assert_eq!(literal_block("\n   one\ntwo\n", 0, 2), "|2-\n\n     one\n  two\n");
        assert_eq!(literal_block("one\n  two", 4, 6), "|-\n      one\n        two\n");
        for (value, key) in [("  one\ntwo", 0), ("    deep\n\n  less\nnone", 2), ("plain\n  more", 4)] {
            let text = format!("{}k: {}", pad(key), literal_block(value, key, key + 2));
            let text = if key > 0 { format!("m:\n{text}") } else { text };
            let document = archmax_compiler::syntax::yaml::load(archmax_compiler::source::FileId(0), &text);
            let root = document.root.expect("a document");
            let node = if key > 0 { root.get("m").and_then(|m| m.get("k")) } else { root.get("k") };
            assert_eq!(node.and_then(|node| node.as_str()), Some(value), "{text}");
        }
    }

    #[test]
    fn words_a_yaml_1_1_reader_takes_for_booleans_are_quoted() {
        assert_eq!(yaml_string("yes"), "\"yes\"");
        assert_eq!(yaml_string("off"), "\"off\"");
        assert_eq!(yaml_string("1"), "\"1\"");
        assert_eq!(yaml_string("a\nb"), "\"a\\nb\"");
        assert_eq!(yaml_string("yesterday"), "yesterday");
    }

    #[test]
    fn lines_and_comments() {
        let text = "a:\n  # about b\n  # more\n  b: 1\n";
        let b = text.find("b: 1").unwrap();
        assert_eq!(comments_above(text, b), text.find("  # about").unwrap());
        assert_eq!(line_end(text, b), text.len());
        assert_eq!(line_column(text, b), (4, 3));
        assert_eq!(yaml_string("plain words"), "plain words");
        assert_eq!(yaml_string("true"), "\"true\"");
        assert_eq!(yaml_string("a: b"), "\"a: b\"");
    }
}
