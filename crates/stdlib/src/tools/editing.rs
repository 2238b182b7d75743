//! `write_file` and `edit_file`: replacing a file whole, or changing exact text in it.
//!
//! Both are bounded before they write: the content, or the edited text's size computed
//! from the lengths (never by building it), must fit the per-file bound and the
//! session's quota.

use serde_json::{Value, json};

use super::arguments::Arguments;
use super::caps::{Write, check_write, read_bounded};
use super::content::{Content, classify};
use super::{ToolContext, ToolError, ToolSchema, vfs_failure};
use crate::limits::bound_in_words;
use crate::vfs::VfsError;

pub(crate) fn write_file(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("write_file", args, &["file_path", "content"])?;
    let path = args.required_path("file_path")?;
    let content = args.required_string("content")?;
    check_write(ctx, &Write { tool: "write_file", path: &path, bytes: content.len() as u64, freed: None })?;
    ctx.workspace.write(&path, content.as_bytes()).map_err(vfs_failure)?;
    Ok(format!("Wrote {} bytes to '{path}'.", content.len()))
}

pub(crate) fn edit_file(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("edit_file", args, &["file_path", "old_string", "new_string", "replace_all"])?;
    let path = args.required_path("file_path")?;
    let old = args.required_string("old_string")?;
    let new = args.required_string("new_string")?;
    let replace_all = args.flag("replace_all")?;
    if old.is_empty() {
        return Err(ToolError(
            "the argument `old_string` is empty; name the text to replace, or use write_file to write a whole file"
                .to_string(),
        ));
    }
    if old == new {
        return Err(ToolError(
            "`old_string` and `new_string` are identical, so there is nothing to change".to_string(),
        ));
    }
    // Refuse a read-only file before judging the edit, so the model learns the real obstacle.
    if ctx.workspace.mount_for(&path).is_some_and(|mount| mount.read_only) {
        return Err(vfs_failure(VfsError::ReadOnly(path)));
    }
    let bytes = read_bounded(ctx, "edit_file", &path, "edit_file changes files up to that size only")?;
    let text = match classify(&path, bytes) {
        Content::Text(text) => text,
        Content::Binary { mime } => {
            return Err(ToolError(format!("'{path}' is a binary file ({mime}); edit_file changes text files only")));
        }
    };
    let occurrences = text.matches(old).count();
    match occurrences {
        0 => {
            return Err(ToolError(format!(
                "`old_string` occurs 0 times in '{path}'; copy the text exactly as the file has it \
                 (without read_file's line numbers)"
            )));
        }
        1 => {}
        many if !replace_all => {
            return Err(ToolError(format!(
                "`old_string` occurs {many} times in '{path}'; add surrounding text so it occurs once, \
                 or set `replace_all` to true to change every occurrence"
            )));
        }
        _ => {}
    }
    let replaced = if replace_all { occurrences } else { 1 };
    let edited_size = edited_size(text.len(), old.len(), new.len(), replaced);
    if edited_size > ctx.limits.file_bytes {
        return Err(ToolError(format!(
            "replacing {replaced} {} would make '{path}' {edited_size} bytes, over edit_file's limit of {} per \
             file; replace fewer occurrences or with shorter text",
            if replaced == 1 { "occurrence" } else { "occurrences" },
            bound_in_words(ctx.limits.file_bytes)
        )));
    }
    check_write(ctx, &Write { tool: "edit_file", path: &path, bytes: edited_size, freed: None })?;
    let edited = if replace_all { text.replace(old, new) } else { text.replacen(old, new, 1) };
    ctx.workspace.write(&path, edited.as_bytes()).map_err(vfs_failure)?;
    let noun = if occurrences == 1 { "occurrence" } else { "occurrences" };
    Ok(format!("Edited '{path}': replaced {occurrences} {noun}."))
}

/// The size of a text of `size` bytes once `replaced` occurrences of `old` (bytes) become
/// `new` (bytes), computed before anything is allocated; it saturates rather than wraps,
/// so an absurd edit reads as too large.
fn edited_size(size: usize, old: usize, new: usize, replaced: usize) -> u64 {
    let [size, old, new, replaced] = [size, old, new, replaced].map(|value| value as u64);
    size.saturating_sub(old.saturating_mul(replaced)).saturating_add(new.saturating_mul(replaced))
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    match tool {
        "write_file" => Some(ToolSchema::closed(
            "write_file",
            "Write a text file in the workspace, creating it and any missing folders, or replacing everything \
             it held before. Use edit_file to change part of an existing file.",
            json!({
                "file_path": {
                    "type": "string",
                    "description": "The file to write, relative to the workspace root, e.g. `scratchpad/draft.md`."
                },
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file."
                }
            }),
            &["file_path", "content"],
        )),
        "edit_file" => Some(ToolSchema::closed(
            "edit_file",
            "Change a text file by replacing exact text. `old_string` must appear exactly once in the file \
             unless `replace_all` is true; copy it from the file as it is, without the line numbers read_file \
             adds. Read the file first so the text matches.",
            json!({
                "file_path": {
                    "type": "string",
                    "description": "The file to change, relative to the workspace root."
                },
                "old_string": {
                    "type": "string",
                    "description": "The exact text to replace; include enough around it to make it unique."
                },
                "new_string": {
                    "type": "string",
                    "description": "The text to put in its place (may be empty to delete it)."
                },
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence instead of exactly one. Defaults to false."
                }
            }),
            &["file_path", "old_string", "new_string"],
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::limits::Limits;
    use crate::tools::fixture::Fixture;
    use crate::vfs::Vfs;

    #[test]
    fn write_file_creates_and_overwrites() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("write_file", json!({ "file_path": "/scratchpad/new/draft.md", "content": "héllo" })),
            "Wrote 6 bytes to 'scratchpad/new/draft.md'."
        );
        assert_eq!(fixture.session.read("scratchpad/new/draft.md").unwrap(), "héllo".as_bytes());
        fixture.ok("write_file", json!({ "file_path": "scratchpad/new/draft.md", "content": "" }));
        assert_eq!(fixture.session.read("scratchpad/new/draft.md").unwrap(), b"");
    }

    #[test]
    fn write_file_refusals() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.refused("write_file", json!({ "file_path": "skills/orders/SKILL.md", "content": "x" })),
            "'skills/orders/SKILL.md' is in a read-only area and cannot be changed"
        );
        assert_eq!(
            fixture.refused("write_file", json!({ "file_path": "scratchpad", "content": "x" })),
            "'scratchpad' is a folder, not a file"
        );
        assert_eq!(
            fixture.refused("write_file", json!({ "file_path": "", "content": "x" })),
            "the workspace root is a folder, not a file"
        );
        assert_eq!(fixture.refused("write_file", json!({ "file_path": "a.md" })), "the argument `content` is required");
        assert!(
            fixture
                .refused("write_file", json!({ "file_path": "a.md", "content": 5 }))
                .contains("`content` must be a string")
        );
        assert!(
            fixture.refused("write_file", json!({ "file_path": "../a.md", "content": "" })).contains("climbs above")
        );
    }

    #[test]
    fn write_file_reaches_a_writable_mount() {
        let fixture = Fixture::new();
        fixture.ok("write_file", json!({ "file_path": "catalogs/eu/new.json", "content": "{}" }));
        assert_eq!(fixture.ok("read_file", json!({ "file_path": "catalogs/eu/new.json" })), "     1\t{}");
        assert!(fixture.session.stat("catalogs/eu/new.json").unwrap().is_none());
    }

    #[test]
    fn edit_file_replaces_one_occurrence() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok(
                "edit_file",
                json!({ "file_path": "scratchpad/notes.md", "old_string": "second", "new_string": "2nd" })
            ),
            "Edited 'scratchpad/notes.md': replaced 1 occurrence."
        );
        assert_eq!(fixture.session.read("scratchpad/notes.md").unwrap(), b"first line\n2nd line\nthird line\n");
    }

    #[test]
    fn edit_file_counts_what_it_found() {
        let fixture = Fixture::new();
        let many = fixture.refused(
            "edit_file",
            json!({ "file_path": "scratchpad/notes.md", "old_string": "line", "new_string": "row" }),
        );
        assert!(many.contains("occurs 3 times"), "{many}");
        assert!(many.contains("`replace_all`"), "{many}");
        let none = fixture.refused(
            "edit_file",
            json!({ "file_path": "scratchpad/notes.md", "old_string": "absent", "new_string": "x" }),
        );
        assert!(none.contains("occurs 0 times"), "{none}");
        assert_eq!(
            fixture.ok(
                "edit_file",
                json!({ "file_path": "scratchpad/notes.md", "old_string": "line", "new_string": "row", "replace_all": true })
            ),
            "Edited 'scratchpad/notes.md': replaced 3 occurrences."
        );
        assert_eq!(fixture.session.read("scratchpad/notes.md").unwrap(), b"first row\nsecond row\nthird row\n");
    }

    #[test]
    fn write_file_refuses_content_over_the_bound() {
        let fixture = Fixture::new().limited(Limits { file_bytes: 100, ..Limits::default() });
        fixture.ok("write_file", json!({ "file_path": "scratchpad/fits.md", "content": "x".repeat(100) }));
        assert_eq!(
            fixture.refused("write_file", json!({ "file_path": "scratchpad/big.md", "content": "x".repeat(101) })),
            "writing 101 bytes to 'scratchpad/big.md' is over write_file's limit of 100 bytes per file; \
             write smaller files"
        );
        assert!(fixture.session.stat("scratchpad/big.md").unwrap().is_none());
    }

    #[test]
    fn replace_all_that_would_exceed_the_bound_is_refused_before_building_it() {
        let fixture = Fixture::new();
        fixture.session.write("scratchpad/seed.md", "x".repeat(4096).as_bytes()).unwrap();
        let refused = fixture.refused(
            "edit_file",
            json!({
                "file_path": "scratchpad/seed.md", "old_string": "x", "new_string": "y".repeat(4096), "replace_all": true
            }),
        );
        assert_eq!(
            refused,
            "replacing 4096 occurrences would make 'scratchpad/seed.md' 16777216 bytes, over edit_file's limit \
             of 10 MiB (10485760 bytes) per file; replace fewer occurrences or with shorter text"
        );
        assert_eq!(fixture.session.read("scratchpad/seed.md").unwrap(), "x".repeat(4096).as_bytes());
        assert_eq!(super::edited_size(10, 1, usize::MAX, usize::MAX), u64::MAX, "saturates, never wraps");
        assert_eq!(super::edited_size(10, 2, 0, 5), 0);
    }

    #[test]
    fn edit_file_refuses_a_source_over_the_bound() {
        let fixture = Fixture::new().limited(Limits { file_bytes: 20, ..Limits::default() });
        let refused = fixture.refused(
            "edit_file",
            json!({ "file_path": "scratchpad/notes.md", "old_string": "first", "new_string": "1st" }),
        );
        assert_eq!(
            refused,
            "'scratchpad/notes.md' has 34 bytes, over edit_file's limit of 20 bytes per file; \
             edit_file changes files up to that size only"
        );
    }

    #[test]
    fn edit_file_refusals() {
        let fixture = Fixture::new();
        let edit = |path: &str, old: &str, new: &str| {
            fixture.refused("edit_file", json!({ "file_path": path, "old_string": old, "new_string": new }))
        };
        assert!(edit("scratchpad/notes.md", "", "x").contains("`old_string` is empty"));
        assert!(edit("scratchpad/notes.md", "first", "first").contains("identical"));
        assert_eq!(edit("scratchpad/none.md", "a", "b"), "'scratchpad/none.md' does not exist");
        assert_eq!(
            edit("skills/orders/SKILL.md", "orders", "x"),
            "'skills/orders/SKILL.md' is in a read-only area and cannot be changed"
        );
        fixture.session.write("scratchpad/blob.bin", b"a\0b").unwrap();
        assert!(edit("scratchpad/blob.bin", "a", "b").contains("binary file (application/octet-stream)"));
        assert!(
            fixture
                .refused("edit_file", json!({ "file_path": "scratchpad/notes.md", "old_string": "a" }))
                .contains("`new_string` is required")
        );
        assert!(
            fixture
                .refused(
                    "edit_file",
                    json!({ "file_path": "scratchpad/notes.md", "old_string": "first", "new_string": "x", "replace_all": "yes" })
                )
                .contains("`replace_all`")
        );
    }
}
