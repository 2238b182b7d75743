//! Source files and spans.
//!
//! Every file the compiler reads is registered once in a [`SourceMap`] and named by a
//! [`FileId`]. A [`Span`] is a byte range inside one file; line and column numbers are
//! derived on demand (1-based, columns counted in Unicode scalar values), so spans stay
//! small and cheap to copy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file registered in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        let start = u32::try_from(start).unwrap_or(u32::MAX);
        let end = u32::try_from(end).unwrap_or(u32::MAX).max(start);
        Span { file, start, end }
    }

    /// An empty span at the start of a file, for findings about a file as a whole.
    pub fn file_start(file: FileId) -> Span {
        Span { file, start: 0, end: 0 }
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }
}

/// A value with the span it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Spanned<T> {
        Spanned { value, span }
    }
}

impl Spanned<String> {
    pub fn as_str(&self) -> &str {
        &self.value
    }
}

/// A 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineColumn {
    pub line: usize,
    pub column: usize,
}

/// One registered file.
#[derive(Debug)]
pub struct SourceFile {
    /// The path relative to the workspace root, with `/` separators.
    pub name: String,
    /// The path on disk.
    pub path: PathBuf,
    /// The text; empty when the file could not be decoded.
    pub text: Arc<str>,
    line_starts: Vec<u32>,
}

impl SourceFile {
    fn new(name: String, path: PathBuf, text: Arc<str>) -> SourceFile {
        let mut line_starts = vec![0u32];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, byte)| *byte == b'\n')
                .map(|(index, _)| u32::try_from(index + 1).unwrap_or(u32::MAX)),
        );
        SourceFile { name, path, text, line_starts }
    }

    /// The line and column of a byte offset; offsets past the end clamp to the end.
    pub fn line_column(&self, offset: u32) -> LineColumn {
        let offset = offset.min(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
        let line_index = match self.line_starts.binary_search(&offset) {
            Ok(index) => index,
            Err(index) => index.saturating_sub(1),
        };
        let line_start = self.line_starts[line_index] as usize;
        let end = (offset as usize).min(self.text.len());
        let column = self.text.get(line_start..end).map(|prefix| prefix.chars().count()).unwrap_or(end - line_start);
        LineColumn { line: line_index + 1, column: column + 1 }
    }

    /// The byte offset where a 1-based line starts (the end of the text past the last).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts.get(line.saturating_sub(1)).map(|start| *start as usize).unwrap_or(self.text.len())
    }

    /// The text a span covers, or `""` when the span does not fall on char boundaries.
    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.start as usize..span.end as usize).unwrap_or("")
    }
}

/// Every file of one compilation.
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, name: impl Into<String>, path: impl AsRef<Path>, text: impl Into<Arc<str>>) -> FileId {
        let id = FileId(u32::try_from(self.files.len()).unwrap_or(u32::MAX));
        self.files.push(SourceFile::new(name.into(), path.as_ref().to_path_buf(), text.into()));
        id
    }

    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn text(&self, id: FileId) -> &str {
        &self.file(id).text
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(index, file)| (FileId(index as u32), file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let mut map = SourceMap::new();
        let id = map.add("a.yaml", "a.yaml", "ab\nçd: x\n");
        let file = map.file(id);
        assert_eq!(file.line_column(0), LineColumn { line: 1, column: 1 });
        assert_eq!(file.line_column(3), LineColumn { line: 2, column: 1 });
        // 'ç' is two bytes: the ':' at byte 6 is the third character of line 2.
        assert_eq!(file.line_column(6), LineColumn { line: 2, column: 3 });
        assert_eq!(file.line_column(999), LineColumn { line: 3, column: 1 });
    }
}
