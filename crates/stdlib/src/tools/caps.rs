//! Applying the [`Limits`] to the file tools: a bounded read, and
//! the check every write makes before it writes (the per-file bound, and the quota of
//! the session's own files or of the writable mount the write lands in).
//!
//! The one thing to know: a quota is computed from a walk of the store written to (the
//! session's own, or the mount's) at write time, so it is always true (files removed,
//! moved or written by scripts or by the host are all seen) and needs no bookkeeping;
//! the walk is bounded by the quota's own file count.

use super::{ToolContext, ToolError, shown, vfs_failure};
use crate::limits::{Limits, bound_in_words};
use crate::vfs::{Entry, MountPoint, Vfs, VfsError};

use archmax_program::zones::session_root;

/// The session folder's root entries that belong to the runtime or are never written
/// by a tool (every reserved root the zone table does not count) hold nothing that counts.
fn counted_root(name: &str) -> bool {
    session_root(name).is_none_or(|root| root.counts_toward_quota)
}

/// Reads a whole file of at most the per-file bound; a larger one is refused unread,
/// with `advice` saying what to do instead.
pub(crate) fn read_bounded(ctx: &ToolContext, tool: &str, path: &str, advice: &str) -> Result<Vec<u8>, ToolError> {
    ctx.workspace.read_limited(path, ctx.limits.file_bytes).map_err(|error| match error {
        VfsError::TooLarge { path, size, limit } => file_too_large(tool, &path, size, limit, advice),
        other => vfs_failure(other),
    })
}

/// The error for a file over the per-file bound.
pub(crate) fn file_too_large(tool: &str, path: &str, size: u64, limit: u64, advice: &str) -> ToolError {
    ToolError(format!(
        "{} has {size} bytes, over {tool}'s limit of {} per file; {advice}",
        shown(path),
        bound_in_words(limit)
    ))
}

/// What a write would change in the session's own areas.
pub(crate) struct Write<'p> {
    pub tool: &'static str,
    pub path: &'p str,
    pub bytes: u64,
    /// A file the same call removes afterwards (a move's source), whose bytes are freed.
    pub freed: Option<&'p str>,
}

/// Refuses a write over the per-file bound, or one that would take the session over its
/// quota of bytes or files, or a writable directory mount over its own quota
/// ([`Limits::mount_bytes`](crate::limits::Limits::mount_bytes), `mount_files`).
pub(crate) fn check_write(ctx: &ToolContext, write: &Write) -> Result<(), ToolError> {
    let limits = ctx.limits;
    if write.bytes > limits.file_bytes {
        return Err(ToolError(format!(
            "writing {} bytes to {} is over {}'s limit of {} per file; write smaller files",
            write.bytes,
            shown(write.path),
            write.tool,
            bound_in_words(limits.file_bytes)
        )));
    }
    let workspace = ctx.workspace;
    if let Some(mount) = workspace.mount_for(write.path) {
        return check_mount_quota(ctx, mount, write);
    }
    let session = workspace.session.as_ref();
    let Some(usage) = usage(session, limits.session_files, counted_root) else {
        return Err(ToolError(format!(
            "the session already keeps more than {} files, its limit; remove files you no longer need \
             before writing new ones",
            limits.session_files
        )));
    };
    let replaced = file_size(session.stat(write.path))?;
    let freed = match write.freed.filter(|path| workspace.mount_for(path).is_none()) {
        Some(path) => file_size(session.stat(path))?,
        None => None,
    };
    let Usage { bytes, files } = usage.after(write, replaced, freed);
    if bytes > limits.session_bytes {
        return Err(ToolError(format!(
            "writing {} bytes to {} would make the session's files total {bytes} bytes, over the session's \
             limit of {}; remove files you no longer need or write less",
            write.bytes,
            shown(write.path),
            bound_in_words(limits.session_bytes)
        )));
    }
    if files > limits.session_files {
        return Err(ToolError(format!(
            "writing {} would make the session keep {files} files, over its limit of {}; remove files you no \
             longer need or write into an existing one",
            shown(write.path),
            limits.session_files
        )));
    }
    Ok(())
}

/// Refuses files handed to a session from outside (`--file`, an upload) that would take
/// the session's own files over its quota, checked together before any is written: the
/// error is the index of the first file (`path`, its bytes) past the bound and why. Each
/// file replaces what its path holds; the per-file bound is the caller's (an input's
/// `maxSize`). A file the handover removes besides is still counted, so the check errs
/// on the side of refusing.
pub fn check_handed_files(session: &dyn Vfs, limits: &Limits, files: &[(&str, u64)]) -> Result<(), (usize, ToolError)> {
    let Some(mut usage) = usage(session, limits.session_files, counted_root) else {
        return Err((
            0,
            ToolError(format!(
                "the session already keeps more than {} files, its limit; remove files it no longer needs before \
             handing it more",
                limits.session_files
            )),
        ));
    };
    for (index, (path, bytes)) in files.iter().enumerate() {
        let write = Write { tool: "handover", path, bytes: *bytes, freed: None };
        usage = usage.after(&write, file_size(session.stat(path)).map_err(|error| (index, error))?, None);
        if usage.bytes > limits.session_bytes {
            return Err((
                index,
                ToolError(format!(
                    "{} ({bytes} bytes) would make the session's files total {} bytes, over the session's limit of \
                 {}; hand over smaller files",
                    shown(path),
                    usage.bytes,
                    bound_in_words(limits.session_bytes)
                )),
            ));
        }
        if usage.files > limits.session_files {
            return Err((
                index,
                ToolError(format!(
                    "{} would make the session keep {} files, over its limit of {}",
                    shown(path),
                    usage.files,
                    limits.session_files
                )),
            ));
        }
    }
    Ok(())
}

/// Refuses a write that would take a writable directory mount past its quota of bytes or
/// files. A read-only mount refuses the write itself, and a file mount holds one file,
/// which the per-file bound already covers.
fn check_mount_quota(ctx: &ToolContext, mount: &MountPoint, write: &Write) -> Result<(), ToolError> {
    if mount.read_only || !mount.is_directory() {
        return Ok(());
    }
    let limits = ctx.limits;
    let workspace = ctx.workspace;
    let key = mount.path();
    let Some(usage) = usage(mount.store.as_ref(), limits.mount_files, |_| true) else {
        return Err(ToolError(format!(
            "the mount `{key}/` already holds more than {} files, a writable mount's limit; remove files it no \
             longer needs before writing new ones",
            limits.mount_files
        )));
    };
    let in_this_mount = |path: &&str| workspace.mount_for(path).is_some_and(|other| other.key == mount.key);
    let replaced = file_size(workspace.stat(write.path))?;
    let freed = match write.freed.filter(in_this_mount) {
        Some(path) => file_size(workspace.stat(path))?,
        None => None,
    };
    let Usage { bytes, files } = usage.after(write, replaced, freed);
    if bytes > limits.mount_bytes {
        return Err(ToolError(format!(
            "writing {} bytes to {} would make the mount `{key}/` hold {bytes} bytes, over a writable mount's \
             limit of {}; remove files it no longer needs or write less",
            write.bytes,
            shown(write.path),
            bound_in_words(limits.mount_bytes)
        )));
    }
    if files > limits.mount_files {
        return Err(ToolError(format!(
            "writing {} would make the mount `{key}/` hold {files} files, over a writable mount's limit of {}; \
             remove files it no longer needs or write into an existing one",
            shown(write.path),
            limits.mount_files
        )));
    }
    Ok(())
}

/// The size of the file a `stat` found, if it found one (a folder is no file).
fn file_size(stat: Result<Option<Entry>, VfsError>) -> Result<Option<u64>, ToolError> {
    match stat {
        Ok(Some(entry)) if !entry.is_dir => Ok(Some(entry.size)),
        Ok(_) => Ok(None),
        Err(error) => Err(vfs_failure(error)),
    }
}

/// What a store keeps.
struct Usage {
    bytes: u64,
    files: usize,
}

impl Usage {
    /// What the store would keep after `write`: the file it replaces (`replaced`, its
    /// size when there is one) and the file the call frees (`freed`) no longer count.
    fn after(&self, write: &Write, replaced: Option<u64>, freed: Option<u64>) -> Usage {
        Usage {
            bytes: self
                .bytes
                .saturating_sub(replaced.unwrap_or(0))
                .saturating_sub(freed.unwrap_or(0))
                .saturating_add(write.bytes),
            files: (self.files + usize::from(replaced.is_none())).saturating_sub(usize::from(freed.is_some())),
        }
    }
}

/// Sums the files below a store's root, skipping the root entries `counted` refuses
/// (for the session, the runtime's folders). `None` once more than `max_files` files
/// (or ten times as many entries, folders included) were seen: the walk stops there, so
/// a crowded store costs no more than the quota allows.
fn usage(session: &dyn Vfs, max_files: usize, counted: impl Fn(&str) -> bool) -> Option<Usage> {
    let max_entries = max_files.saturating_mul(10);
    let mut usage = Usage { bytes: 0, files: 0 };
    let mut entries = 0usize;
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        // A folder that vanished or refuses listing holds nothing to count.
        let Ok(listing) = session.list(&dir) else { continue };
        for entry in listing {
            if dir.is_empty() && !counted(&entry.name) {
                continue;
            }
            entries += 1;
            if entries > max_entries {
                return None;
            }
            let path = if dir.is_empty() { entry.name } else { format!("{dir}/{}", entry.name) };
            if entry.is_dir {
                pending.push(path);
            } else {
                usage.files += 1;
                usage.bytes = usage.bytes.saturating_add(entry.size);
                if usage.files > max_files {
                    return None;
                }
            }
        }
    }
    Some(usage)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::limits::Limits;
    use crate::tools::fixture::Fixture;
    use crate::vfs::Vfs;

    fn quota(bytes: u64, files: usize) -> Limits {
        Limits { session_bytes: bytes, session_files: files, ..Limits::default() }
    }

    /// A fixture under `limits` that writes `filling` bytes to `fill_path`, and the refusal
    /// of the one byte more it is then asked to write to `over_path`.
    fn one_byte_over(limits: Limits, fill_path: &str, filling: usize, over_path: &str) -> (Fixture, String) {
        let fixture = Fixture::new().limited(limits);
        fixture.ok("write_file", json!({ "file_path": fill_path, "content": "x".repeat(filling) }));
        let refused = fixture.refused("write_file", json!({ "file_path": over_path, "content": "y" }));
        (fixture, refused)
    }

    #[test]
    fn a_write_over_the_session_quota_is_refused_and_nothing_is_written() {
        // The fixture's session keeps 59 bytes in 3 files in scratchpad/ and reports/ (the
        // runtime's checkpoints/ and artifacts/ do not count).
        let (fixture, refused) = one_byte_over(quota(100, 100), "scratchpad/a.md", 41, "scratchpad/b.md");
        assert_eq!(
            refused,
            "writing 1 bytes to 'scratchpad/b.md' would make the session's files total 101 bytes, over the \
             session's limit of 100 bytes; remove files you no longer need or write less"
        );
        assert!(fixture.session.stat("scratchpad/b.md").unwrap().is_none());
        // Replacing a file counts its new size, not both.
        fixture.ok("write_file", json!({ "file_path": "scratchpad/a.md", "content": "z".repeat(41) }));
        fixture.ok("remove_file", json!({ "file_path": "scratchpad/a.md" }));
        fixture.ok("write_file", json!({ "file_path": "scratchpad/b.md", "content": "y" }));
    }

    #[test]
    fn every_way_of_writing_counts_against_the_quota() {
        let fixture = Fixture::new().limited(quota(60, 100));
        let edit = fixture.refused(
            "edit_file",
            json!({ "file_path": "scratchpad/notes.md", "old_string": "first", "new_string": "x".repeat(20) }),
        );
        assert!(edit.contains("over the session's limit of 60 bytes"), "{edit}");
        let copy =
            fixture.refused("copy_file", json!({ "source": "scratchpad/notes.md", "destination": "scratchpad/c.md" }));
        assert!(copy.contains("over the session's limit of 60 bytes"), "{copy}");
        // A move inside the session frees its source, so it fits.
        fixture.ok("move_file", json!({ "source": "scratchpad/notes.md", "destination": "scratchpad/moved.md" }));
        // Host mounts are not the session's to keep: their own quota applies, not the session's.
        fixture.ok("write_file", json!({ "file_path": "catalogs/eu/big.json", "content": "x".repeat(200) }));
    }

    #[test]
    fn files_handed_to_a_session_are_checked_together_against_its_quota() {
        // The fixture's session keeps 59 bytes in 3 files.
        let fixture = Fixture::new();
        let session = fixture.session.as_ref();
        let check = |limits: Limits, files: &[(&str, u64)]| super::check_handed_files(session, &limits, files);
        assert!(check(quota(100, 10), &[("scratchpad/inputs/a.pdf", 20), ("scratchpad/inputs/b.pdf", 21)]).is_ok());
        // The second file is the one past the bound, and it is named with its size.
        let (index, error) =
            check(quota(100, 10), &[("scratchpad/inputs/a.pdf", 20), ("scratchpad/inputs/b.pdf", 22)]).unwrap_err();
        assert_eq!(index, 1);
        assert_eq!(
            error.0,
            "'scratchpad/inputs/b.pdf' (22 bytes) would make the session's files total 101 bytes, over the \
             session's limit of 100 bytes; hand over smaller files"
        );
        // A file handed again replaces what its path holds: it is not counted twice.
        fixture.ok("write_file", json!({ "file_path": "scratchpad/inputs/a.pdf", "content": "x".repeat(40) }));
        assert!(check(quota(100, 10), &[("scratchpad/inputs/a.pdf", 41)]).is_ok());
        assert!(check(quota(100, 10), &[("scratchpad/inputs/a.pdf", 42)]).is_err());
        // The count of files holds too.
        let (index, error) = check(quota(1000, 4), &[("scratchpad/inputs/c.pdf", 1)]).unwrap_err();
        assert_eq!(index, 0);
        assert!(error.0.contains("would make the session keep 5 files, over its limit of 4"), "{}", error.0);
    }

    fn mount_quota(bytes: u64, files: usize) -> Limits {
        Limits { mount_bytes: bytes, mount_files: files, ..Limits::default() }
    }

    #[test]
    fn a_write_over_a_writable_mounts_quota_is_a_tool_error_naming_the_bound() {
        // `catalogs/eu/` holds `prices.json`, 15 bytes, when the session starts.
        let (fixture, refused) = one_byte_over(mount_quota(100, 100), "catalogs/eu/a.json", 85, "catalogs/eu/b.json");
        assert_eq!(
            refused,
            "writing 1 bytes to 'catalogs/eu/b.json' would make the mount `catalogs/eu/` hold 101 bytes, over a \
             writable mount's limit of 100 bytes; remove files it no longer needs or write less"
        );
        assert!(fixture.workspace.stat("catalogs/eu/b.json").unwrap().is_none(), "nothing was written");
        // Every way of writing counts, and what a call frees in the same mount is freed.
        let copy =
            fixture.refused("copy_file", json!({ "source": "scratchpad/notes.md", "destination": "catalogs/eu/c.md" }));
        assert!(copy.contains("over a writable mount's limit of 100 bytes"), "{copy}");
        let edit = fixture.refused(
            "edit_file",
            json!({ "file_path": "catalogs/eu/prices.json", "old_string": "revenue", "new_string": "r".repeat(20) }),
        );
        assert!(edit.contains("over a writable mount's limit of 100 bytes"), "{edit}");
        fixture.ok("move_file", json!({ "source": "catalogs/eu/a.json", "destination": "catalogs/eu/moved.json" }));
        // The session's own files are not the mount's: the session keeps its own quota.
        fixture.ok("write_file", json!({ "file_path": "scratchpad/big.md", "content": "x".repeat(500) }));
    }

    #[test]
    fn by_default_a_writable_mount_holds_at_most_ten_thousand_files() {
        let fixture = Fixture::new();
        let mount = fixture.workspace.mount_for("catalogs/eu").map(|mount| mount.store.clone()).unwrap();
        // `prices.json` and 9 999 more: the mount is full.
        for index in 0..9_999 {
            mount.write(&format!("batch/{index}.json"), b"{}").unwrap();
        }
        let refused =
            fixture.refused("write_file", json!({ "file_path": "catalogs/eu/one-more.json", "content": "{}" }));
        assert!(
            refused.contains(
                "would make the mount `catalogs/eu/` hold 10001 files, over a writable mount's limit of 10000"
            ),
            "{refused}"
        );
        // Replacing a file it holds adds none.
        fixture.ok("write_file", json!({ "file_path": "catalogs/eu/prices.json", "content": "{}" }));
        // A read-only mount refuses the write itself, quota or not.
        let read_only = fixture.refused("write_file", json!({ "file_path": "skills/orders/x.md", "content": "x" }));
        assert!(!read_only.contains("limit"), "{read_only}");
    }

    #[test]
    fn a_writable_mounts_quota_bounds_the_number_of_files_too() {
        let fixture = Fixture::new().limited(mount_quota(1_000, 3));
        fixture.ok("write_file", json!({ "file_path": "catalogs/eu/a.json", "content": "a" }));
        fixture.ok("write_file", json!({ "file_path": "catalogs/eu/deep/b.json", "content": "b" }));
        let refused = fixture.refused("write_file", json!({ "file_path": "catalogs/eu/c.json", "content": "c" }));
        assert!(
            refused.contains("would make the mount `catalogs/eu/` hold 4 files, over a writable mount's limit of 3"),
            "{refused}"
        );
        fixture.ok("write_file", json!({ "file_path": "catalogs/eu/a.json", "content": "again" }));
        let mount = fixture.workspace.mount_for("catalogs/eu").map(|mount| mount.store.clone()).unwrap();
        mount.write("d.json", b"d").unwrap();
        mount.write("e.json", b"e").unwrap();
        let crowded = fixture.refused("write_file", json!({ "file_path": "catalogs/eu/a.json", "content": "x" }));
        assert!(crowded.contains("the mount `catalogs/eu/` already holds more than 3 files"), "{crowded}");
    }

    #[test]
    fn the_quota_bounds_the_number_of_files_too() {
        let fixture = Fixture::new().limited(quota(1_000, 4));
        fixture.ok("write_file", json!({ "file_path": "scratchpad/a.md", "content": "a" }));
        let refused = fixture.refused("write_file", json!({ "file_path": "scratchpad/b.md", "content": "b" }));
        assert!(refused.contains("keep 5 files, over its limit of 4"), "{refused}");
        fixture.ok("write_file", json!({ "file_path": "scratchpad/a.md", "content": "again" }));
        fixture.session.write("scratchpad/c.md", b"c").unwrap();
        fixture.session.write("scratchpad/d.md", b"d").unwrap();
        let crowded = fixture.refused("write_file", json!({ "file_path": "scratchpad/a.md", "content": "x" }));
        assert!(crowded.contains("already keeps more than 4 files"), "{crowded}");
    }
}
