//! Walking a folder of the workspace for `glob` and `grep`.
//!
//! A walk skips any mount the host declared not searchable, unless the walk started inside
//! that very mount: a search of the root or of an ancestor folder passes it by silently,
//! while a search addressed at it searches it. The walk is bounded in depth and in entries
//! visited, so a link cycle on disk cannot make it run forever.

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

    #[test]
    fn a_missing_start_is_an_error() {
        let fixture = Fixture::new();
        assert!(files_below(&fixture.workspace, "nowhere").is_err());
    }
}
