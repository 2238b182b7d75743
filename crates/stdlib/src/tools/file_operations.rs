//! `copy_file`, `move_file` and `remove_file`: acting on one whole file without its
//! content entering the conversation.
//!
//! Bytes are carried as they are, so binaries survive. Folders are never copied, moved or
//! removed. A copy or move checks that the destination really holds the bytes before it
//! reports success, and a move removes its source only after that check; a destination
//! that failed the check is put back as it was. The source must fit the per-file bound
//! and the destination the session's quota before a byte is read.

use serde_json::{Value, json};

use super::arguments::Arguments;
use super::caps::{Write, check_write, file_too_large, read_bounded};
use super::content::human_size;
use super::{ToolContext, ToolError, ToolSchema, shown, vfs_failure};
use crate::vfs::VfsError;

/// Whether a transfer keeps its source.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Transfer {
    Copy,
    Move,
}

impl Transfer {
    fn tool(self) -> &'static str {
        match self {
            Transfer::Copy => "copy_file",
            Transfer::Move => "move_file",
        }
    }
}

pub(crate) fn copy_file(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    transfer(Transfer::Copy, args, ctx)
}

pub(crate) fn move_file(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    transfer(Transfer::Move, args, ctx)
}

fn transfer(kind: Transfer, args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let tool = kind.tool();
    let args = Arguments::parse(tool, args, &["source", "destination", "overwrite"])?;
    let source = args.required_path("source")?;
    let destination = args.required_path("destination")?;
    let overwrite = args.flag("overwrite")?;
    for (argument, path) in [("source", &source), ("destination", &destination)] {
        if path.is_empty() {
            return Err(ToolError(format!("`{argument}` names the workspace root; {tool} works on a single file")));
        }
    }
    if source == destination {
        return Err(ToolError(format!("`source` and `destination` are the same file, '{source}'")));
    }
    let workspace = ctx.workspace;
    let source_entry = workspace.stat(&source).map_err(vfs_failure)?;
    let source_size = match source_entry {
        None => return Err(ToolError(format!("'{source}' does not exist"))),
        Some(entry) if entry.is_dir => {
            return Err(ToolError(format!("'{source}' is a folder; {tool} works on single files only")));
        }
        Some(entry) => entry.size,
    };
    let limit = ctx.limits.file_bytes;
    if source_size > limit {
        return Err(file_too_large(tool, &source, source_size, limit, "it cannot be copied or moved"));
    }
    if kind == Transfer::Move && workspace.mount_for(&source).is_some_and(|mount| mount.read_only) {
        return Err(ToolError(format!(
            "'{source}' is in a read-only area, so it cannot be moved away; use copy_file to copy it instead"
        )));
    }
    let previous = match workspace.stat(&destination).map_err(vfs_failure)? {
        Some(entry) if entry.is_dir => {
            return Err(ToolError(format!(
                "'{destination}' is a folder; give the full path of the file to create inside it"
            )));
        }
        Some(_) if !overwrite => {
            return Err(ToolError(format!("'{destination}' already exists; set `overwrite` to true to replace it")));
        }
        Some(_) => Some(read_bounded(ctx, tool, &destination, "remove it with remove_file first")?),
        None => None,
    };
    if workspace.mount_for(&destination).is_some_and(|mount| mount.read_only) {
        return Err(vfs_failure(VfsError::ReadOnly(destination)));
    }
    let freed = (kind == Transfer::Move).then_some(source.as_str());
    check_write(ctx, &Write { tool, path: &destination, bytes: source_size, freed })?;
    let bytes = read_bounded(ctx, tool, &source, "it cannot be copied or moved")?;
    workspace.write(&destination, &bytes).map_err(vfs_failure)?;
    let kept = workspace.read(&destination).is_ok_and(|stored| stored == bytes);
    if !kept {
        // Put the destination back as it was; the source was never touched.
        let restored = match &previous {
            Some(old) => {
                workspace.write(&destination, old).is_ok()
                    && workspace.read(&destination).is_ok_and(|stored| &stored == old)
            }
            None => workspace.remove(&destination).is_ok(),
        };
        let state = if restored { "it was put back as it was" } else { "it may now hold partial content" };
        return Err(ToolError(format!(
            "the store did not keep the bytes written to '{destination}' ({state}); '{source}' is unchanged"
        )));
    }
    let size = human_size(bytes.len() as u64);
    match kind {
        Transfer::Copy => Ok(format!("Copied '{source}' to '{destination}' ({size}).")),
        Transfer::Move => match workspace.remove(&source) {
            Ok(()) => Ok(format!("Moved '{source}' to '{destination}' ({size}).")),
            Err(error) => Err(ToolError(format!(
                "copied '{source}' to '{destination}' ({size}) but could not remove the source ({}); \
                 both files remain",
                vfs_failure(error)
            ))),
        },
    }
}

pub(crate) fn remove_file(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("remove_file", args, &["file_path"])?;
    let path = args.required_path("file_path")?;
    match ctx.workspace.stat(&path).map_err(vfs_failure)? {
        None => Err(ToolError(format!("'{path}' does not exist"))),
        Some(entry) if entry.is_dir => {
            Err(ToolError(format!("{} is a folder; remove_file removes single files only", shown(&path))))
        }
        Some(_) => {
            ctx.workspace.remove(&path).map_err(vfs_failure)?;
            Ok(format!("Removed '{path}'."))
        }
    }
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    let transfer_properties = |verb: &str| {
        json!({
            "source": {
                "type": "string",
                "description": format!("The file to {verb}, relative to the workspace root.")
            },
            "destination": {
                "type": "string",
                "description": "The full path of the new file, relative to the workspace root; missing folders \
                                are created."
            },
            "overwrite": {
                "type": "boolean",
                "description": "Replace the destination if it already exists. Defaults to false."
            }
        })
    };
    match tool {
        "copy_file" => Some(ToolSchema::closed(
            "copy_file",
            "Copy one file to a new path, byte for byte (binary files included), without reading it into the \
             conversation. Folders cannot be copied. An existing destination is kept unless `overwrite` is true.",
            transfer_properties("copy"),
            &["source", "destination"],
        )),
        "move_file" => Some(ToolSchema::closed(
            "move_file",
            "Move (rename) one file, byte for byte, without reading it into the conversation. The source is \
             removed only after the destination is written and checked. Folders cannot be moved, and files in \
             read-only areas can only be copied. An existing destination is kept unless `overwrite` is true.",
            transfer_properties("move"),
            &["source", "destination"],
        )),
        "remove_file" => Some(ToolSchema::closed(
            "remove_file",
            "Delete one file. Folders cannot be removed.",
            json!({
                "file_path": {
                    "type": "string",
                    "description": "The file to delete, relative to the workspace root."
                }
            }),
            &["file_path"],
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::tools::fixture::{Fixture, mount};
    use crate::vfs::{Entry, MemoryVfs, Vfs, VfsError};

    #[test]
    fn a_source_over_the_bound_is_neither_copied_nor_moved() {
        let limits = crate::limits::Limits { file_bytes: 1_000, ..Default::default() };
        let fixture = Fixture::new().limited(limits);
        fixture.session.write("scratchpad/big.log", &[b'x'; 1_001]).unwrap();
        for tool in ["copy_file", "move_file"] {
            let refused =
                fixture.refused(tool, json!({ "source": "scratchpad/big.log", "destination": "scratchpad/c.log" }));
            assert_eq!(
                refused,
                format!(
                    "'scratchpad/big.log' has 1001 bytes, over {tool}'s limit of 1000 bytes per file; \
                     it cannot be copied or moved"
                )
            );
        }
        assert!(fixture.session.stat("scratchpad/c.log").unwrap().is_none());
        assert_eq!(fixture.session.read("scratchpad/big.log").unwrap().len(), 1_001);
        // Nor is a destination over the bound read back to keep it for a restore.
        let refused = fixture.refused(
            "copy_file",
            json!({ "source": "scratchpad/todo.txt", "destination": "scratchpad/big.log", "overwrite": true }),
        );
        assert!(refused.ends_with("remove it with remove_file first"), "{refused}");
    }

    /// A store that loses what it is given: it keeps only the first byte.
    struct Forgetful(MemoryVfs);

    impl Vfs for Forgetful {
        fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
            self.0.read(path)
        }
        fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
            self.0.write(path, &bytes[..bytes.len().min(1)])
        }
        fn remove(&self, path: &str) -> Result<(), VfsError> {
            self.0.remove(path)
        }
        fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
            self.0.list(dir)
        }
        fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
            self.0.stat(path)
        }
    }

    /// A store that cannot delete.
    struct Sticky(MemoryVfs);

    impl Vfs for Sticky {
        fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
            self.0.read(path)
        }
        fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
            self.0.write(path, bytes)
        }
        fn remove(&self, path: &str) -> Result<(), VfsError> {
            Err(VfsError::Other(path.to_string(), "deleting is not supported here".to_string()))
        }
        fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
            self.0.list(dir)
        }
        fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
            self.0.stat(path)
        }
    }

    fn binary() -> Vec<u8> {
        (0..=255u8).cycle().take(3000).collect()
    }

    #[test]
    fn copy_carries_bytes_exactly() {
        let fixture = Fixture::new();
        fixture.session.write("scratchpad/image.png", &binary()).unwrap();
        assert_eq!(
            fixture.ok("copy_file", json!({ "source": "scratchpad/image.png", "destination": "/out/deep/copy.png" })),
            "Copied 'scratchpad/image.png' to 'out/deep/copy.png' (2.9 KB)."
        );
        assert_eq!(fixture.session.read("out/deep/copy.png").unwrap(), binary());
        assert_eq!(fixture.session.read("scratchpad/image.png").unwrap(), binary());
    }

    #[test]
    fn copy_reads_from_read_only_mounts_into_writable_places() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture
                .ok("copy_file", json!({ "source": "skills/orders/SKILL.md", "destination": "catalogs/eu/SKILL.md" })),
            "Copied 'skills/orders/SKILL.md' to 'catalogs/eu/SKILL.md' (37 bytes)."
        );
    }

    #[test]
    fn move_removes_the_source_after_the_copy() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("move_file", json!({ "source": "scratchpad/todo.txt", "destination": "scratchpad/done.txt" })),
            "Moved 'scratchpad/todo.txt' to 'scratchpad/done.txt' (9 bytes)."
        );
        assert_eq!(fixture.session.stat("scratchpad/todo.txt").unwrap(), None);
        assert_eq!(fixture.session.read("scratchpad/done.txt").unwrap(), b"buy milk\n");
    }

    #[test]
    fn an_existing_destination_needs_overwrite() {
        let fixture = Fixture::new();
        let args = json!({ "source": "scratchpad/todo.txt", "destination": "scratchpad/notes.md" });
        let refusal = fixture.refused("copy_file", args.clone());
        assert_eq!(refusal, "'scratchpad/notes.md' already exists; set `overwrite` to true to replace it");
        assert!(fixture.refused("move_file", args).contains("already exists"));
        fixture.ok(
            "move_file",
            json!({ "source": "scratchpad/todo.txt", "destination": "scratchpad/notes.md", "overwrite": true }),
        );
        assert_eq!(fixture.session.read("scratchpad/notes.md").unwrap(), b"buy milk\n");
    }

    #[test]
    fn transfer_refusals() {
        let fixture = Fixture::new();
        let refused = |tool: &str, source: &str, destination: &str| {
            fixture.refused(tool, json!({ "source": source, "destination": destination }))
        };
        for tool in ["copy_file", "move_file"] {
            assert_eq!(
                refused(tool, "scratchpad/notes.md", "scratchpad/./notes.md"),
                "`source` and `destination` are the same file, 'scratchpad/notes.md'"
            );
            assert_eq!(refused(tool, "scratchpad/none.md", "scratchpad/x.md"), "'scratchpad/none.md' does not exist");
            assert!(refused(tool, "scratchpad", "elsewhere").contains("'scratchpad' is a folder"));
            assert!(refused(tool, "scratchpad/notes.md", "reports").contains("'reports' is a folder"));
            assert!(refused(tool, "/", "x.md").contains("`source` names the workspace root"));
            assert!(refused(tool, "scratchpad/notes.md", "").contains("`destination` names the workspace root"));
            assert!(refused(tool, "../x", "y").contains("climbs above"));
            assert_eq!(
                refused(tool, "scratchpad/notes.md", "skills/notes.md"),
                "'skills/notes.md' is in a read-only area and cannot be changed"
            );
            assert!(
                fixture.refused(tool, json!({ "source": "scratchpad/notes.md" })).contains("`destination` is required")
            );
        }
        let read_only = refused("move_file", "skills/orders/SKILL.md", "scratchpad/SKILL.md");
        assert!(read_only.contains("read-only") && read_only.contains("copy_file"), "{read_only}");
        assert_eq!(fixture.session.stat("scratchpad/SKILL.md").unwrap(), None, "nothing was written");
    }

    #[test]
    fn a_store_that_loses_bytes_fails_the_copy_and_is_put_back() {
        let mut fixture = Fixture::new();
        let lossy = Arc::new(Forgetful(MemoryVfs::with_files([("kept.txt", "old")])));
        fixture.workspace.mounts.push(mount("lossy/", false, true, lossy.clone()));
        let refusal =
            fixture.refused("move_file", json!({ "source": "scratchpad/todo.txt", "destination": "lossy/new.txt" }));
        assert!(refusal.contains("did not keep the bytes") && refusal.contains("unchanged"), "{refusal}");
        assert!(refusal.contains("it was put back as it was"), "{refusal}");
        assert_eq!(lossy.stat("new.txt").unwrap(), None, "the partial destination was removed");
        assert_eq!(fixture.session.read("scratchpad/todo.txt").unwrap(), b"buy milk\n", "the source stays");
        let refusal = fixture.refused(
            "copy_file",
            json!({ "source": "scratchpad/todo.txt", "destination": "lossy/kept.txt", "overwrite": true }),
        );
        assert!(refusal.contains("may now hold partial content"), "restoring went through the same lossy store");
    }

    #[test]
    fn a_source_that_cannot_be_removed_leaves_both_files() {
        let mut fixture = Fixture::new();
        let sticky = Arc::new(Sticky(MemoryVfs::with_files([("a.txt", "alpha")])));
        fixture.workspace.mounts.push(mount("sticky/", false, true, sticky.clone()));
        let refusal =
            fixture.refused("move_file", json!({ "source": "sticky/a.txt", "destination": "scratchpad/a.txt" }));
        assert!(refusal.contains("both files remain"), "{refusal}");
        assert!(refusal.contains("'sticky/a.txt': deleting is not supported here"), "{refusal}");
        assert_eq!(sticky.read("a.txt").unwrap(), b"alpha");
        assert_eq!(fixture.session.read("scratchpad/a.txt").unwrap(), b"alpha");
    }

    #[test]
    fn remove_file_removes_one_file() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("remove_file", json!({ "file_path": "/scratchpad/todo.txt" })),
            "Removed 'scratchpad/todo.txt'."
        );
        assert_eq!(fixture.session.stat("scratchpad/todo.txt").unwrap(), None);
    }

    #[test]
    fn remove_file_refusals() {
        let fixture = Fixture::new();
        let refused = |path: &str| fixture.refused("remove_file", json!({ "file_path": path }));
        assert_eq!(refused("scratchpad/todo.txt/x"), "'scratchpad/todo.txt/x' does not exist");
        assert_eq!(refused("scratchpad"), "'scratchpad' is a folder; remove_file removes single files only");
        assert_eq!(refused(""), "the workspace root is a folder; remove_file removes single files only");
        assert_eq!(refused("AGENTS.md"), "'AGENTS.md' is in a read-only area and cannot be changed");
        assert!(refused("../x").contains("climbs above"));
        assert_eq!(fixture.refused("remove_file", json!({})), "the argument `file_path` is required");
    }
}
