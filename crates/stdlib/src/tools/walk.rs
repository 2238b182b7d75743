//! Walking a folder of the workspace for `glob` and `grep`.
//!
//! A walk skips any mount the host declared not searchable, unless the walk started inside
//! that very mount: a search of the root or of an ancestor folder passes it by silently,
//! while a search addressed at it searches it. A walk never descends into a symbolic
//! link: stores leave links out of listings, so a link inside a mount cannot give a
//! file a second name that a path denial does not cover. The walk is also bounded in
//! depth and in entries visited.

use crate::vfs::{VfsError, Workspace};

use super::listing::child_path;

/// Most entries one walk visits before it stops.
pub(crate) const MAX_VISITED_ENTRIES: usize = 100_000;

/// Most folder levels a walk descends below its start.
const MAX_DEPTH: usize = 64;

/// The files a walk found.
pub(crate) struct Walk {
    /// Workspace paths, sorted.
    pub files: Vec<String>,
    /// True when a bound stopped the walk before it saw everything.
    pub cut_short: bool,
}

/// Every file below the folder `base`.
pub(crate) fn files_below(workspace: &Workspace, base: &str) -> Result<Walk, VfsError> {
    let home = workspace.mount_for(base).map(|mount| mount.key.as_str());
    let skipped = |path: &str| {
        workspace.mount_for(path).is_some_and(|mount| !mount.searchable && Some(mount.key.as_str()) != home)
    };
    let mut files = Vec::new();
    let mut cut_short = false;
    let mut visited = 0usize;
    let mut pending = vec![(base.to_string(), 0usize)];
    let mut first = true;
    while let Some((dir, depth)) = pending.pop() {
        let entries = match workspace.list(&dir) {
            Ok(entries) => entries,
            Err(error) if first => return Err(error),
            // A folder that vanished or refuses listing mid-walk holds nothing to find.
            Err(_) => continue,
        };
        first = false;
        for entry in entries {
            visited += 1;
            if visited > MAX_VISITED_ENTRIES {
                cut_short = true;
                pending.clear();
                break;
            }
            let path = child_path(&dir, &entry.name);
            if skipped(&path) {
                continue;
            }
            if !entry.is_dir {
                files.push(path);
            } else if depth < MAX_DEPTH {
                pending.push((path, depth + 1));
            } else {
                cut_short = true;
            }
        }
    }
    files.sort();
    Ok(Walk { files, cut_short })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::fixture::Fixture;

    #[test]
    fn a_root_walk_skips_unsearchable_mounts_and_runtime_folders() {
        let fixture = Fixture::new();
        let walk = files_below(&fixture.workspace, "").unwrap();
        assert!(!walk.cut_short);
        assert_eq!(
            walk.files,
            vec![
                "AGENTS.md",
                "catalogs/eu/prices.json",
                "reports/2024/q1.md",
                "scratchpad/notes.md",
                "scratchpad/todo.txt",
                "skills/billing/SKILL.md",
                "skills/orders/SKILL.md",
                "skills/orders/scripts/lookup.js",
            ]
        );
    }

    #[test]
    fn a_walk_addressed_inside_an_unsearchable_mount_searches_it() {
        let fixture = Fixture::new();
        assert_eq!(files_below(&fixture.workspace, "reference").unwrap().files, vec!["reference/manual.md"]);
    }

    /// The review's `mount-link` repro: a link inside a mount names a denied folder (and
    /// a loop names the mount itself) under paths the denial does not cover.
    #[test]
    fn links_inside_a_disk_mount_give_a_denied_file_no_second_name() {
        use crate::limits::Limits;
        use crate::tools::{ToolContext, run};
        use crate::vfs::{DiskVfs, MountPoint};
        use serde_json::json;
        use std::sync::Arc;

        let root = std::env::temp_dir().join(format!("archmax-stdlib-mount-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("reference/internal")).unwrap();
        std::fs::create_dir_all(root.join("session")).unwrap();
        std::fs::write(root.join("reference/carriers.md"), "DHL, DPD\n").unwrap();
        std::fs::write(root.join("reference/internal/rates.md"), "DHL secret-rate-3.85\n").unwrap();
        std::os::unix::fs::symlink("internal", root.join("reference/alias")).unwrap();
        std::os::unix::fs::symlink(".", root.join("reference/loop")).unwrap();
        let mount = MountPoint {
            key: "reference/".to_string(),
            read_only: false,
            searchable: true,
            store: Arc::new(DiskVfs::mount(root.join("reference"))),
        };
        let workspace = Workspace { session: Arc::new(DiskVfs::new(root.join("session"))), mounts: vec![mount] };
        // The kernel's redaction for a denial of reading `reference/internal/**`.
        let visible = |path: &str| !path.starts_with("reference/internal/");
        let ctx = ToolContext { workspace: &workspace, visible: &visible, raw_text: false, limits: Limits::default() };
        let answer = |tool: &str, args: serde_json::Value| match run(tool, &args, &ctx) {
            Ok(text) => text,
            Err(error) => error.0,
        };

        let walk = files_below(&workspace, "reference").unwrap();
        assert_eq!(walk.files, vec!["reference/carriers.md", "reference/internal/rates.md"]);
        let answers = [
            answer("read_file", json!({ "file_path": "reference/alias/rates.md" })),
            answer("read_file", json!({ "file_path": "reference/loop/internal/rates.md" })),
            answer("grep", json!({ "pattern": "DHL", "path": "reference", "output_mode": "count" })),
            answer("grep", json!({ "pattern": "DHL", "path": "reference", "output_mode": "content" })),
            answer("copy_file", json!({ "source": "reference/alias/rates.md", "destination": "scratchpad/r.md" })),
            answer("ls", json!({ "path": "reference" })),
        ];
        let _ = std::fs::remove_dir_all(&root);
        for text in &answers {
            assert!(!text.contains("secret-rate"), "{text}");
            assert!(!text.contains("alias/") && !text.contains("loop/") || text.contains("symbolic link"), "{text}");
        }
        assert!(answers[0].contains("symbolic link") && answers[1].contains("symbolic link"), "{answers:?}");
        assert_eq!(answers[2], "reference/carriers.md:1");
        assert!(answers[4].contains("symbolic link"), "{}", answers[4]);
    }

    #[test]
    fn a_missing_start_is_an_error() {
        let fixture = Fixture::new();
        assert!(files_below(&fixture.workspace, "nowhere").is_err());
    }
}
