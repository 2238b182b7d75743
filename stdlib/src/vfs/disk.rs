//! [`DiskVfs`]: a store rooted at a directory (or, for a file mount, a single file) on
//! disk.
//!
//! Nothing reaches above the root: `..` and absolute paths are refused before the disk is
//! touched, and a symbolic link is followed only when its target stays inside the root.
//! Writes land whole or not at all (a temporary file beside the target, then a rename).
//! Errors describe what went wrong in words of their own and carry only the store-relative
//! path, never the host's.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Entry, Vfs, VfsError, relative_segments};

/// Prefix of the temporary files a write stages beside its target; listings hide them.
const STAGING_PREFIX: &str = ".archmax-staging-";

/// Distinguishes concurrent writes of one process.
static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A directory on disk. For a file mount, `root` is the file and the file is path `""`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskVfs {
    pub root: PathBuf,
}

impl DiskVfs {
    pub fn new(root: impl Into<PathBuf>) -> DiskVfs {
        DiskVfs { root: root.into() }
    }

    /// The host location of a store path, after checking that neither the path nor any
    /// link along it leads outside the root.
    fn locate(&self, path: &str) -> Result<PathBuf, VfsError> {
        let segments = relative_segments(path)?;
        let mut host = self.root.clone();
        host.extend(&segments);
        let Ok(canonical_root) = fs::canonicalize(&self.root) else {
            // No root yet: nothing below it exists, so there is no link to follow.
            return Ok(host);
        };
        // The deepest part of the path that exists decides where links lead.
        let mut candidate = host.clone();
        for _ in 0..=segments.len() {
            if let Ok(resolved) = fs::canonicalize(&candidate) {
                if resolved.starts_with(&canonical_root) {
                    return Ok(host);
                }
                return Err(VfsError::Escape(path.to_string()));
            }
            if !candidate.pop() {
                break;
            }
        }
        Ok(host)
    }

    /// A staging file name beside `target`, unique within this process.
    fn staging_path(target: &Path) -> PathBuf {
        let sequence = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{STAGING_PREFIX}{}-{sequence}", std::process::id());
        target.with_file_name(name)
    }
}

/// Turns an I/O failure into a store error in our own words.
fn failure(path: &str, error: &io::Error) -> VfsError {
    let path = path.to_string();
    match error.kind() {
        io::ErrorKind::NotFound => VfsError::NotFound(path),
        io::ErrorKind::IsADirectory => VfsError::IsADirectory(path),
        io::ErrorKind::NotADirectory => VfsError::NotADirectory(path),
        io::ErrorKind::PermissionDenied => VfsError::Other(path, "permission denied".to_string()),
        io::ErrorKind::StorageFull => VfsError::Other(path, "the disk is full".to_string()),
        io::ErrorKind::ReadOnlyFilesystem => VfsError::Other(path, "the disk is read-only".to_string()),
        io::ErrorKind::InvalidFilename => VfsError::Other(path, "the name is not valid on this disk".to_string()),
        _ => VfsError::Other(path, "the file system refused the operation".to_string()),
    }
}

/// Writes `bytes` to a staging file and renames it over `target`.
fn write_atomically(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let staging = DiskVfs::staging_path(target);
    let written = fs::File::create_new(&staging).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&staging, target));
    if renamed.is_err() {
        // Best effort: the staging file is ours and must not linger.
        let _ = fs::remove_file(&staging);
    }
    renamed
}

impl Vfs for DiskVfs {
    fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
        let host = self.locate(path)?;
        let metadata = fs::metadata(&host).map_err(|error| failure(path, &error))?;
        if metadata.is_dir() {
            return Err(VfsError::IsADirectory(path.to_string()));
        }
        fs::read(&host).map_err(|error| failure(path, &error))
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
        if relative_segments(path)?.is_empty() && self.root.is_dir() {
            return Err(VfsError::IsADirectory(path.to_string()));
        }
        if !self.root.exists()
            && let Some(parent) = self.root.parent()
        {
            // The root is the host's choice; creating it follows no agent-named link.
            fs::create_dir_all(parent).map_err(|error| failure(path, &error))?;
            if !relative_segments(path)?.is_empty() {
                fs::create_dir_all(&self.root).map_err(|error| failure(path, &error))?;
            }
        }
        let host = self.locate(path)?;
        if host.is_dir() {
            return Err(VfsError::IsADirectory(path.to_string()));
        }
        if let Some(parent) = host.parent() {
            fs::create_dir_all(parent).map_err(|error| failure(path, &error))?;
        }
        write_atomically(&host, bytes).map_err(|error| failure(path, &error))
    }

    fn remove(&self, path: &str) -> Result<(), VfsError> {
        let host = self.locate(path)?;
        let metadata = fs::symlink_metadata(&host).map_err(|error| failure(path, &error))?;
        if metadata.is_dir() {
            return Err(VfsError::IsADirectory(path.to_string()));
        }
        fs::remove_file(&host).map_err(|error| failure(path, &error))
    }

    fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
        let host = self.locate(dir)?;
        let metadata = fs::metadata(&host).map_err(|error| failure(dir, &error))?;
        if !metadata.is_dir() {
            return Err(VfsError::NotADirectory(dir.to_string()));
        }
        let canonical_root = fs::canonicalize(&self.root).map_err(|error| failure(dir, &error))?;
        let mut entries = Vec::new();
        for item in fs::read_dir(&host).map_err(|error| failure(dir, &error))? {
            let Ok(item) = item else { continue };
            let Ok(name) = item.file_name().into_string() else { continue };
            if name.starts_with(STAGING_PREFIX) {
                continue;
            }
            let Ok(kind) = item.file_type() else { continue };
            if kind.is_symlink() {
                let inside = fs::canonicalize(item.path()).is_ok_and(|target| target.starts_with(&canonical_root));
                if !inside {
                    continue;
                }
            }
            let Ok(metadata) = fs::metadata(item.path()) else { continue };
            entries.push(if metadata.is_dir() { Entry::directory(name) } else { Entry::file(name, metadata.len()) });
        }
        entries.sort_by(|left, right| left.name.cmp(&right.name));
        Ok(entries)
    }

    fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
        let host = self.locate(path)?;
        let name = super::last_segment(path);
        match fs::metadata(&host) {
            Ok(metadata) if metadata.is_dir() => Ok(Some(Entry::directory(name))),
            Ok(metadata) => Ok(Some(Entry::file(name, metadata.len()))),
            Err(error) if matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => Ok(None),
            Err(error) => Err(failure(path, &error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(label: &str) -> Scratch {
            let sequence = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("archmax-stdlib-{label}-{}-{sequence}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            Scratch(path)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn writes_create_parents_and_read_back() {
        let scratch = Scratch::new("write");
        let store = DiskVfs::new(scratch.0.join("session"));
        store.write("scratchpad/deep/a.txt", b"hello").unwrap();
        assert_eq!(store.read("scratchpad/deep/a.txt").unwrap(), b"hello");
        store.write("scratchpad/deep/a.txt", b"again").unwrap();
        assert_eq!(store.read("scratchpad/deep/a.txt").unwrap(), b"again");
        assert_eq!(store.list("scratchpad/deep").unwrap(), vec![Entry::file("a.txt", 5)]);
        assert_eq!(store.stat("scratchpad").unwrap(), Some(Entry::directory("scratchpad")));
        assert_eq!(store.stat("scratchpad/deep/a.txt").unwrap(), Some(Entry::file("a.txt", 5)));
        assert_eq!(store.stat("scratchpad/none").unwrap(), None);
        assert_eq!(store.stat("scratchpad/deep/a.txt/below").unwrap(), None);
    }

    #[test]
    fn no_staging_file_is_left_behind() {
        let scratch = Scratch::new("staging");
        let store = DiskVfs::new(&scratch.0);
        for round in 0..5 {
            store.write("a.txt", format!("round {round}").as_bytes()).unwrap();
        }
        assert_eq!(fs::read_dir(&scratch.0).unwrap().count(), 1);
        assert_eq!(store.list("").unwrap(), vec![Entry::file("a.txt", 7)]);
    }

    #[test]
    fn refusals_name_the_store_path_only() {
        let scratch = Scratch::new("refusals");
        let store = DiskVfs::new(&scratch.0);
        store.write("dir/a.txt", b"a").unwrap();
        assert_eq!(store.read("dir"), Err(VfsError::IsADirectory("dir".to_string())));
        assert_eq!(store.read("missing.txt"), Err(VfsError::NotFound("missing.txt".to_string())));
        assert_eq!(store.write("dir", b"x"), Err(VfsError::IsADirectory("dir".to_string())));
        assert_eq!(store.write("", b"x"), Err(VfsError::IsADirectory(String::new())));
        assert_eq!(store.remove("dir"), Err(VfsError::IsADirectory("dir".to_string())));
        assert_eq!(store.remove("missing.txt"), Err(VfsError::NotFound("missing.txt".to_string())));
        assert_eq!(store.list("dir/a.txt"), Err(VfsError::NotADirectory("dir/a.txt".to_string())));
        assert!(store.write("dir/a.txt/under", b"x").is_err());
        let host = scratch.0.to_string_lossy().to_string();
        for error in [store.read("missing.txt").unwrap_err(), store.list("nope").unwrap_err()] {
            assert!(!error.to_string().contains(&host), "{error}");
        }
    }

    #[test]
    fn climbing_and_absolute_paths_are_escapes() {
        let scratch = Scratch::new("escape");
        fs::write(scratch.0.join("secret.txt"), b"secret").unwrap();
        let store = DiskVfs::new(scratch.0.join("session"));
        store.write("a.txt", b"a").unwrap();
        assert_eq!(store.read("../secret.txt"), Err(VfsError::Escape("../secret.txt".to_string())));
        assert_eq!(store.read("a/../../secret.txt"), Err(VfsError::Escape("a/../../secret.txt".to_string())));
        let absolute = scratch.0.join("secret.txt").to_string_lossy().to_string();
        assert_eq!(store.read(&absolute), Err(VfsError::Escape(absolute.clone())));
        assert_eq!(store.write("../planted.txt", b"x"), Err(VfsError::Escape("../planted.txt".to_string())));
        assert!(!scratch.0.join("planted.txt").exists());
    }

    #[cfg(unix)]
    #[test]
    fn links_leaving_the_root_are_refused() {
        use std::os::unix::fs::symlink;
        let scratch = Scratch::new("symlink");
        let outside = scratch.0.join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), b"secret").unwrap();
        let root = scratch.0.join("session");
        fs::create_dir_all(root.join("inner")).unwrap();
        fs::write(root.join("inner/ok.txt"), b"ok").unwrap();
        symlink(&outside, root.join("door")).unwrap();
        symlink(outside.join("secret.txt"), root.join("secret-link")).unwrap();
        symlink(root.join("inner"), root.join("shortcut")).unwrap();
        let store = DiskVfs::new(&root);

        assert_eq!(store.read("door/secret.txt"), Err(VfsError::Escape("door/secret.txt".to_string())));
        assert_eq!(store.read("secret-link"), Err(VfsError::Escape("secret-link".to_string())));
        assert_eq!(store.list("door"), Err(VfsError::Escape("door".to_string())));
        assert_eq!(store.stat("door"), Err(VfsError::Escape("door".to_string())));
        assert_eq!(store.write("door/planted.txt", b"x"), Err(VfsError::Escape("door/planted.txt".to_string())));
        assert_eq!(store.write("door/new/deeper.txt", b"x"), Err(VfsError::Escape("door/new/deeper.txt".to_string())));
        assert_eq!(store.remove("secret-link"), Err(VfsError::Escape("secret-link".to_string())));
        assert!(!outside.join("planted.txt").exists());
        assert!(!outside.join("new").exists());
        assert!(outside.join("secret.txt").exists());

        // A link that stays inside the root is an ordinary path.
        assert_eq!(store.read("shortcut/ok.txt").unwrap(), b"ok");
        let names: Vec<String> = store.list("").unwrap().into_iter().map(|entry| entry.name).collect();
        assert_eq!(names, vec!["inner", "shortcut"]);
    }

    #[test]
    fn a_file_root_serves_a_file_mount() {
        let scratch = Scratch::new("file-root");
        fs::write(scratch.0.join("AGENTS.md"), b"# agents").unwrap();
        let store = DiskVfs::new(scratch.0.join("AGENTS.md"));
        assert_eq!(store.read("").unwrap(), b"# agents");
        assert_eq!(store.stat("").unwrap(), Some(Entry::file("", 8)));
        assert_eq!(store.list(""), Err(VfsError::NotADirectory(String::new())));
        let missing = DiskVfs::new(scratch.0.join("absent.md"));
        assert_eq!(missing.stat("").unwrap(), None);
        assert_eq!(missing.read(""), Err(VfsError::NotFound(String::new())));
    }

    #[test]
    fn a_missing_root_lists_as_missing_and_is_created_on_write() {
        let scratch = Scratch::new("missing-root");
        let store = DiskVfs::new(scratch.0.join("later/session"));
        assert_eq!(store.list(""), Err(VfsError::NotFound(String::new())));
        assert_eq!(store.stat("").unwrap(), None);
        store.write("scratchpad/a.md", b"a").unwrap();
        assert_eq!(store.read("scratchpad/a.md").unwrap(), b"a");
    }
}
