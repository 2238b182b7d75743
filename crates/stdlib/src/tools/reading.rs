//! `read_file`: a window of a text file, one numbered line per line.
//!
//! Binary files are reported, never returned: the answer names the type and the size and
//! is an ordinary result, because nothing went wrong with the call. Only the first bytes
//! of a file are read to classify it; a text file over the per-file bound is refused
//! unread.

use serde_json::{Value, json};

use super::arguments::Arguments;
use super::caps::{file_too_large, read_bounded};
use super::content::{Content, binary_head, binary_notice, binary_type_by_name, classify};
use super::{ToolContext, ToolError, ToolSchema, shown, vfs_failure};
use crate::limits::CLASSIFY_HEAD_BYTES;

/// Lines shown when the call sets no `limit`.
pub(crate) const DEFAULT_LINE_LIMIT: usize = 2000;

/// What to do about a text file over the per-file bound.
const TOO_LARGE_ADVICE: &str =
    "the file tools do not open files this large; ask the user for a smaller file or an extract of it";

/// Characters of one line shown before the rest is cut.
pub(crate) const MAX_LINE_CHARS: usize = 2000;

pub(crate) fn read_file(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("read_file", args, &["file_path", "offset", "limit"])?;
    let path = args.required_path("file_path")?;
    let offset = args.optional_count("offset")?.unwrap_or(0);
    let limit = args.optional_count("limit")?.unwrap_or(DEFAULT_LINE_LIMIT);
    if limit == 0 {
        return Err(ToolError("the argument `limit` must be at least 1".to_string()));
    }
    let entry = ctx.workspace.stat(&path).map_err(vfs_failure)?.ok_or_else(|| missing(&path))?;
    if entry.is_dir {
        return Err(ToolError(format!("{} is a folder; list it with ls", shown(&path))));
    }
    // A name that marks the file binary spares reading it at all.
    if let Some(mime) = binary_type_by_name(&path) {
        return Ok(binary_notice(&path, mime, entry.size));
    }
    // The head tells a binary apart before the size bound, so a huge binary is still
    // reported as one; only text is read whole, and only under the bound.
    let (head, size) = ctx.workspace.read_head(&path, CLASSIFY_HEAD_BYTES).map_err(vfs_failure)?;
    let whole = head.len() as u64 == size;
    if let Some(mime) = binary_head(&head, whole) {
        return Ok(binary_notice(&path, mime, size));
    }
    if size > ctx.limits.file_bytes {
        return Err(file_too_large("read_file", &path, size, ctx.limits.file_bytes, TOO_LARGE_ADVICE));
    }
    let bytes = if whole { head } else { read_bounded(ctx, "read_file", &path, TOO_LARGE_ADVICE)? };
    let size = bytes.len() as u64;
    match classify(&path, bytes) {
        Content::Binary { mime } => Ok(binary_notice(&path, mime, size)),
        Content::Text(text) if ctx.raw_text => Ok(raw_window(&text, offset, args.optional_count("limit")?)),
        Content::Text(text) => numbered_window(&path, &text, offset, limit),
    }
}

fn missing(path: &str) -> ToolError {
    ToolError(format!("'{path}' does not exist"))
}

/// Cuts a line longer than [`MAX_LINE_CHARS`], saying how long it was.
pub(crate) fn clipped_line(line: &str) -> String {
    match archmax_program::text::cut_at_chars(line, MAX_LINE_CHARS) {
        None => line.to_string(),
        Some(kept) => {
            let total = line.chars().count();
            format!("{kept} [… line cut here; it has {total} characters]")
        }
    }
}

/// A script's read: the text as it is, or only lines `offset..offset + limit` when
/// either is given (line endings kept).
fn raw_window(text: &str, offset: usize, limit: Option<usize>) -> String {
    if offset == 0 && limit.is_none() {
        return text.to_string();
    }
    let lines = text.split_inclusive('\n').skip(offset);
    match limit {
        Some(limit) => lines.take(limit).collect(),
        None => lines.collect(),
    }
}

/// Lines `offset..offset + limit` of `text`, numbered from 1.
fn numbered_window(path: &str, text: &str, offset: usize, limit: usize) -> Result<String, ToolError> {
    if text.is_empty() {
        return Ok(format!("'{path}' exists but is empty."));
    }
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if offset >= total {
        let noun = if total == 1 { "line" } else { "lines" };
        return Err(ToolError(format!(
            "the argument `offset` ({offset}) is past the end of '{path}', which has {total} {noun}; \
             offsets count lines from 0"
        )));
    }
    let end = offset.saturating_add(limit).min(total);
    let mut answer = lines[offset..end]
        .iter()
        .enumerate()
        .map(|(index, line)| format!("{:>6}\t{}", offset + index + 1, clipped_line(line)))
        .collect::<Vec<_>>()
        .join("\n");
    if end < total {
        answer.push_str(&format!(
            "\n\n(Lines {}-{end} of {total} shown. Call read_file again with offset {end} to read on.)",
            offset + 1
        ));
    }
    Ok(answer)
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    (tool == "read_file").then(|| {
        ToolSchema::closed(
            "read_file",
            "Read a text file of the workspace. The answer numbers each line from 1 (a tab separates the number \
             from the text) and shows up to 2000 lines; use `offset` and `limit` to page through longer files. \
             Very long lines are cut. Binary files (images, audio, video, PDF, slides, archives, or content that \
             is not UTF-8 text) are not returned: the answer only reports their type and size.",
            json!({
                "file_path": {
                    "type": "string",
                    "description": "The file to read, relative to the workspace root, e.g. `scratchpad/notes.md`."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The first line to show, counted from 0. Defaults to 0."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "How many lines to show at most. Defaults to 2000."
                }
            }),
            &["file_path"],
        )
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::limits::Limits;
    use crate::tools::fixture::Fixture;
    use crate::tools::{ToolContext, ToolError, run};
    use crate::vfs::{Entry, Vfs, VfsError, Workspace};

    #[test]
    fn lines_are_numbered_from_one() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("read_file", json!({ "file_path": "scratchpad/notes.md" })),
            "     1\tfirst line\n     2\tsecond line\n     3\tthird line"
        );
        assert_eq!(fixture.ok("read_file", json!({ "file_path": "/AGENTS.md" })), "     1\t# Agents\n     2\tBe kind.");
    }

    #[test]
    fn offset_and_limit_choose_a_window() {
        let fixture = Fixture::new();
        let answer = fixture.ok("read_file", json!({ "file_path": "scratchpad/notes.md", "offset": 1, "limit": 1 }));
        assert!(answer.starts_with("     2\tsecond line\n\n"), "{answer}");
        assert!(answer.contains("offset 2"), "{answer}");
        let tail = fixture.ok("read_file", json!({ "file_path": "scratchpad/notes.md", "offset": 2 }));
        assert_eq!(tail, "     3\tthird line");
        let past = fixture.refused("read_file", json!({ "file_path": "scratchpad/notes.md", "offset": 3 }));
        assert!(past.contains("`offset` (3)") && past.contains("3 lines"), "{past}");
        let zero = fixture.refused("read_file", json!({ "file_path": "scratchpad/notes.md", "limit": 0 }));
        assert!(zero.contains("`limit`"), "{zero}");
    }

    #[test]
    fn the_default_limit_is_two_thousand_lines() {
        let fixture = Fixture::new();
        let long: String = (1..=2500).map(|line| format!("line {line}\n")).collect();
        fixture.session.write("scratchpad/long.txt", long.as_bytes()).unwrap();
        let answer = fixture.ok("read_file", json!({ "file_path": "scratchpad/long.txt" }));
        assert!(answer.contains("  2000\tline 2000\n"), "the last shown line");
        assert!(!answer.contains("line 2001"));
        assert!(answer.ends_with("(Lines 1-2000 of 2500 shown. Call read_file again with offset 2000 to read on.)"));
    }

    #[test]
    fn long_lines_are_cut_with_a_marker() {
        let fixture = Fixture::new();
        let line = "é".repeat(2500);
        fixture.session.write("scratchpad/wide.txt", line.as_bytes()).unwrap();
        let answer = fixture.ok("read_file", json!({ "file_path": "scratchpad/wide.txt" }));
        assert!(answer.starts_with(&format!("     1\t{}", "é".repeat(2000))));
        assert!(answer.ends_with("[… line cut here; it has 2500 characters]"), "{answer}");
    }

    #[test]
    fn windows_line_endings_do_not_leak_into_lines() {
        let fixture = Fixture::new();
        fixture.session.write("scratchpad/crlf.txt", b"a\r\nb\r\n").unwrap();
        assert_eq!(fixture.ok("read_file", json!({ "file_path": "scratchpad/crlf.txt" })), "     1\ta\n     2\tb");
    }

    #[test]
    fn binaries_are_reported_not_returned() {
        let fixture = Fixture::new();
        fixture.session.write("scratchpad/logo.png", &vec![7u8; 24_678]).unwrap();
        assert_eq!(
            fixture.ok("read_file", json!({ "file_path": "scratchpad/logo.png" })),
            "Error: 'scratchpad/logo.png' is a binary file (image/png, 24.1 KB) and was not read; \
             read_file returns text files only."
        );
        fixture.session.write("scratchpad/blob.txt", b"ab\0cd").unwrap();
        assert_eq!(
            fixture.ok("read_file", json!({ "file_path": "scratchpad/blob.txt" })),
            "Error: 'scratchpad/blob.txt' is a binary file (application/octet-stream, 5 bytes) and was not read; \
             read_file returns text files only."
        );
        fixture.session.write("scratchpad/latin1.txt", &[0x63, 0x61, 0x66, 0xe9]).unwrap();
        let answer = fixture.ok("read_file", json!({ "file_path": "scratchpad/latin1.txt" }));
        assert!(answer.contains("application/octet-stream, 4 bytes"), "{answer}");
        fixture.session.write("scratchpad/logo.svg", b"<svg/>").unwrap();
        assert_eq!(fixture.ok("read_file", json!({ "file_path": "scratchpad/logo.svg" })), "     1\t<svg/>");
    }

    #[test]
    fn an_empty_file_says_so() {
        let fixture = Fixture::new();
        fixture.session.write("scratchpad/empty.md", b"").unwrap();
        assert_eq!(
            fixture.ok("read_file", json!({ "file_path": "scratchpad/empty.md" })),
            "'scratchpad/empty.md' exists but is empty."
        );
    }

    #[test]
    fn refusals() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.refused("read_file", json!({ "file_path": "scratchpad/none.md" })),
            "'scratchpad/none.md' does not exist"
        );
        assert_eq!(
            fixture.refused("read_file", json!({ "file_path": "scratchpad" })),
            "'scratchpad' is a folder; list it with ls"
        );
        assert_eq!(
            fixture.refused("read_file", json!({ "file_path": "/" })),
            "the workspace root is a folder; list it with ls"
        );
        assert_eq!(fixture.refused("read_file", json!({})), "the argument `file_path` is required");
        assert!(fixture.refused("read_file", json!({ "file_path": "../x" })).contains("climbs above"));
        assert!(fixture.refused("read_file", json!({ "path": "a.md" })).contains("`path`"));
    }

    /// A store holding one file of `size` bytes of which only the head exists: reading it
    /// whole fails loudly, so a test passes only if the tool never tries.
    struct HeadOnly {
        head: Vec<u8>,
        size: u64,
    }

    impl Vfs for HeadOnly {
        fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
            Err(VfsError::Other(path.to_string(), "read whole".to_string()))
        }
        fn read_head(&self, _: &str, max: usize) -> Result<(Vec<u8>, u64), VfsError> {
            Ok((self.head.iter().copied().take(max).collect(), self.size))
        }
        fn write(&self, path: &str, _: &[u8]) -> Result<(), VfsError> {
            Err(VfsError::ReadOnly(path.to_string()))
        }
        fn remove(&self, path: &str) -> Result<(), VfsError> {
            Err(VfsError::ReadOnly(path.to_string()))
        }
        fn list(&self, _: &str) -> Result<Vec<Entry>, VfsError> {
            Ok(vec![Entry::file("huge", self.size)])
        }
        fn stat(&self, _: &str) -> Result<Option<Entry>, VfsError> {
            Ok(Some(Entry::file("huge", self.size)))
        }
    }

    fn read_huge(head: &[u8]) -> Result<String, ToolError> {
        let store = HeadOnly { head: head.to_vec(), size: 1 << 30 };
        let workspace = Workspace { session: Arc::new(store), mounts: vec![] };
        let visible = |_: &str| true;
        let ctx = ToolContext { workspace: &workspace, visible: &visible, raw_text: false, limits: Limits::default() };
        run("read_file", &json!({ "file_path": "scratchpad/huge" }), &ctx)
    }

    #[test]
    fn a_huge_binary_is_classified_from_its_head_alone() {
        assert_eq!(
            read_huge(b"PK\x03\x04\0\0").unwrap(),
            "Error: 'scratchpad/huge' is a binary file (application/octet-stream, 1.0 GB) and was not read; \
             read_file returns text files only."
        );
    }

    #[test]
    fn a_text_file_over_the_bound_is_refused_unread() {
        assert_eq!(
            read_huge(&b"a line of text\n".repeat(1000)).unwrap_err().0,
            "'scratchpad/huge' has 1073741824 bytes, over read_file's limit of 10 MiB (10485760 bytes) per file; \
             the file tools do not open files this large; ask the user for a smaller file or an extract of it"
        );
    }

    #[test]
    fn a_file_just_under_the_bound_is_read_whole() {
        let limits = Limits { file_bytes: 20_000, ..Limits::default() };
        let fixture = Fixture::new().limited(limits);
        let text = "0123456789abcdefghi\n".repeat(1000);
        fixture.session.write("scratchpad/at.txt", text.as_bytes()).unwrap();
        let answer = fixture.ok("read_file", json!({ "file_path": "scratchpad/at.txt", "offset": 999 }));
        assert_eq!(answer, "  1000\t0123456789abcdefghi");
        fixture.session.write("scratchpad/over.txt", format!("{text}!").as_bytes()).unwrap();
        let refused = fixture.refused("read_file", json!({ "file_path": "scratchpad/over.txt" }));
        assert!(refused.contains("has 20001 bytes, over read_file's limit of 20000 bytes per file"), "{refused}");
        // A NUL past the head still makes a file binary when the file is read whole.
        let mut late = "text\n".repeat(3000).into_bytes();
        late.push(0);
        fixture.session.write("scratchpad/late.txt", &late).unwrap();
        assert!(fixture.ok("read_file", json!({ "file_path": "scratchpad/late.txt" })).contains("binary file"));
    }

    #[test]
    fn reading_is_never_filtered_by_visibility() {
        let fixture = Fixture::new().hide("skills");
        assert!(fixture.ok("read_file", json!({ "file_path": "skills/orders/SKILL.md" })).contains("Look up orders."));
    }
}
