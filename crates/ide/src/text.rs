//! Positions: line/character pairs, whose characters are UTF-16 code units (what editors
//! count), against the compiler's byte offsets.
//!
//! The one thing to know: a character past the end of its line means the line's end (as
//! editors expect), but a line past the end of the document is an error the request
//! reports.

use archmax_compiler::source::Span;

/// A zero-based line and a column counted in UTF-16 code units; ordered line first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

impl Position {
    pub fn new(line: u32, character: u32) -> Position {
        Position { line, character }
    }
}

/// A start and an end position; the end is exclusive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Range {
    pub start: Position,
    pub end: Position,
}

impl Range {
    pub fn new(start: Position, end: Position) -> Range {
        Range { start, end }
    }

    /// True when `position` lies inside the range or on either end.
    pub fn touches(&self, position: Position) -> bool {
        self.start <= position && position <= self.end
    }
}

/// Line starts of one text, for conversions both ways.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

/// A position whose line the document does not have.
#[derive(Debug, thiserror::Error)]
#[error("line {line} is past the end of the document, which has {lines} lines")]
pub struct OutOfRange {
    pub line: u32,
    pub lines: usize,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(index, _)| index + 1));
        LineIndex { text, starts }
    }

    /// The position of a byte offset (clamped to the text and to a char boundary).
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|start| *start <= offset).saturating_sub(1);
        let start = self.starts[line];
        let character = self.text[start..offset].encode_utf16().count();
        Position {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            character: u32::try_from(character).unwrap_or(u32::MAX),
        }
    }

    pub fn range(&self, start: usize, end: usize) -> Range {
        Range { start: self.position(start), end: self.position(end) }
    }

    pub fn span_range(&self, span: Span) -> Range {
        self.range(span.start as usize, span.end as usize)
    }

    /// The byte offset of a position.
    pub fn offset(&self, position: Position) -> Result<usize, OutOfRange> {
        let line = position.line as usize;
        let Some(&start) = self.starts.get(line) else {
            return Err(OutOfRange { line: position.line, lines: self.starts.len() });
        };
        let content = self.line_text(line);
        let mut units = 0usize;
        for (index, character) in content.char_indices() {
            if units >= position.character as usize {
                return Ok(start + index);
            }
            units += character.len_utf16();
        }
        Ok(start + content.len())
    }

    /// A line's text without its line break.
    pub fn line_text(&self, line: usize) -> &'a str {
        let start = self.starts.get(line).copied().unwrap_or(self.text.len());
        let end = self.starts.get(line + 1).map(|next| next - 1).unwrap_or(self.text.len());
        self.text.get(start..end.max(start)).unwrap_or("").trim_end_matches('\r')
    }

    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.text.len())
    }

    /// The line an offset lies on.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|start| *start <= offset).saturating_sub(1)
    }

    pub fn lines(&self) -> usize {
        self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_units_both_ways() {
        let text = "a: é😀x\nb";
        let index = LineIndex::new(text);
        let x = text.find('x').unwrap_or(0);
        assert_eq!(index.position(x), Position { line: 0, character: 6 });
        assert_eq!(index.offset(Position { line: 0, character: 6 }).ok(), Some(x));
        assert_eq!(index.offset(Position { line: 0, character: 99 }).ok(), Some(x + 1));
        assert_eq!(index.offset(Position { line: 1, character: 0 }).ok(), Some(text.len() - 1));
        assert!(index.offset(Position { line: 2, character: 0 }).is_err());
    }
}
