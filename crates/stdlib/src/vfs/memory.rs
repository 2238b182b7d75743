//! [`MemoryVfs`]: a store held in a map from path to bytes.
//!
//! Directories are implied: `a/b` exists as a directory exactly while some file lies
//! beneath it, and the root always exists. Used by tests and by sessions that need no
//! durability. A store whose only file sits at path `""` is a single file, the shape a
//! file mount (`AGENTS.md`) routes to.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{Entry, Vfs, VfsError, last_segment, relative_segments};

/// Files in memory, keyed by canonical path.
#[derive(Debug, Default)]
pub struct MemoryVfs {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryVfs {
    pub fn new() -> MemoryVfs {
        MemoryVfs::default()
    }

    /// A store holding `files` (path, bytes). Paths that climb are skipped.
    pub fn with_files<P, B>(files: impl IntoIterator<Item = (P, B)>) -> MemoryVfs
    where
        P: AsRef<str>,
        B: Into<Vec<u8>>,
    {
        let mut map = BTreeMap::new();
        for (path, bytes) in files {
            if let Ok(key) = key_of(path.as_ref()) {
                map.insert(key, bytes.into());
            }
        }
        MemoryVfs { files: Mutex::new(map) }
    }

    /// A store that is one file, for a file mount.
    pub fn single_file(bytes: impl Into<Vec<u8>>) -> MemoryVfs {
        MemoryVfs::with_files([("", bytes)])
    }

    /// A snapshot of every file, for assertions and exports.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.files().clone()
    }

    /// Runs `use_file` on the stored bytes of a file, borrowed under the lock, so a
    /// bounded read copies only what it returns.
    fn with_file<T>(
        &self,
        path: &str,
        use_file: impl FnOnce(&str, &[u8]) -> Result<T, VfsError>,
    ) -> Result<T, VfsError> {
        let key = key_of(path)?;
        let files = self.files();
        match files.get(&key) {
            Some(bytes) => use_file(&key, bytes),
            None if is_directory(&files, &key) => Err(VfsError::IsADirectory(key)),
            None => Err(VfsError::NotFound(key)),
        }
    }

    /// The map, even after another thread panicked while holding it: every operation
    /// leaves the map consistent, so a poisoned lock carries no half-written state.
    fn files(&self) -> MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key_of(path: &str) -> Result<String, VfsError> {
    Ok(relative_segments(path)?.join("/"))
}

/// True when `key` names the root (unless the store is a single file) or an implied
/// directory.
fn is_directory(files: &BTreeMap<String, Vec<u8>>, key: &str) -> bool {
    if key.is_empty() {
        return !files.contains_key("");
    }
    let prefix = format!("{key}/");
    files.range(prefix.clone()..).next().is_some_and(|(path, _)| path.starts_with(&prefix))
}

impl Vfs for MemoryVfs {
    fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
        self.with_file(path, |_, bytes| Ok(bytes.to_vec()))
    }

    fn read_limited(&self, path: &str, limit: u64) -> Result<Vec<u8>, VfsError> {
        self.with_file(path, |key, bytes| {
            let size = bytes.len() as u64;
            if size > limit {
                return Err(VfsError::TooLarge { path: key.to_string(), size, limit });
            }
            Ok(bytes.to_vec())
        })
    }

    fn read_head(&self, path: &str, max: usize) -> Result<(Vec<u8>, u64), VfsError> {
        self.with_file(path, |_, bytes| Ok((bytes[..max.min(bytes.len())].to_vec(), bytes.len() as u64)))
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
        let key = key_of(path)?;
        let mut files = self.files();
        if key.is_empty() {
            // The root becomes (or stays) a single file only while nothing else is stored.
            if files.keys().any(|path| !path.is_empty()) {
                return Err(VfsError::IsADirectory(key));
            }
            files.insert(key, bytes.to_vec());
            return Ok(());
        }
        if is_directory(&files, &key) {
            return Err(VfsError::IsADirectory(key));
        }
        if files.contains_key("") {
            return Err(VfsError::NotADirectory(String::new()));
        }
        let segments: Vec<&str> = key.split('/').collect();
        for depth in 1..segments.len() {
            let ancestor = segments[..depth].join("/");
            if files.contains_key(&ancestor) {
                return Err(VfsError::NotADirectory(ancestor));
            }
        }
        files.insert(key, bytes.to_vec());
        Ok(())
    }

    fn remove(&self, path: &str) -> Result<(), VfsError> {
        let key = key_of(path)?;
        let mut files = self.files();
        if files.remove(&key).is_some() {
            return Ok(());
        }
        if is_directory(&files, &key) { Err(VfsError::IsADirectory(key)) } else { Err(VfsError::NotFound(key)) }
    }

    fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
        let key = key_of(dir)?;
        let files = self.files();
        if files.contains_key(&key) {
            return Err(VfsError::NotADirectory(key));
        }
        let prefix = if key.is_empty() { String::new() } else { format!("{key}/") };
        let mut entries: BTreeMap<&str, Entry> = BTreeMap::new();
        for (path, bytes) in files.range(prefix.clone()..) {
            if path.is_empty() {
                continue;
            }
            let Some(rest) = path.strip_prefix(&prefix) else { break };
            match rest.split_once('/') {
                Some((directory, _)) => {
                    entries.insert(directory, Entry::directory(directory));
                }
                None => {
                    entries.insert(rest, Entry::file(rest, bytes.len() as u64));
                }
            }
        }
        if entries.is_empty() && !key.is_empty() {
            return Err(VfsError::NotFound(key));
        }
        Ok(entries.into_values().collect())
    }

    fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
        let key = key_of(path)?;
        let files = self.files();
        if let Some(bytes) = files.get(&key) {
            return Ok(Some(Entry::file(last_segment(&key), bytes.len() as u64)));
        }
        Ok(is_directory(&files, &key).then(|| Entry::directory(last_segment(&key))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> MemoryVfs {
        MemoryVfs::with_files([("a/b.txt", "bee"), ("a/c/d.txt", "dee"), ("top.md", "top")])
    }

    #[test]
    fn reads_and_writes_files() {
        let store = store();
        assert_eq!(store.read("a/b.txt").unwrap(), b"bee");
        store.write("a/new/e.txt", b"e").unwrap();
        assert_eq!(store.read("a/new/e.txt").unwrap(), b"e");
        store.write("a/b.txt", b"again").unwrap();
        assert_eq!(store.read("./a//b.txt").unwrap(), b"again");
    }

    #[test]
    fn directories_are_implied_by_their_files() {
        let store = store();
        assert_eq!(store.stat("a/c").unwrap(), Some(Entry::directory("c")));
        assert_eq!(store.stat("").unwrap(), Some(Entry::directory("")));
        assert_eq!(store.stat("a/b.txt").unwrap(), Some(Entry::file("b.txt", 3)));
        assert_eq!(store.stat("a/zzz").unwrap(), None);
        store.remove("a/c/d.txt").unwrap();
        assert_eq!(store.stat("a/c").unwrap(), None);
    }

    #[test]
    fn lists_sorted_with_directories_once() {
        let store = store();
        store.write("a/c/e.txt", b"").unwrap();
        assert_eq!(store.list("a").unwrap(), vec![Entry::file("b.txt", 3), Entry::directory("c")]);
        assert_eq!(store.list("").unwrap(), vec![Entry::directory("a"), Entry::file("top.md", 3)]);
        assert_eq!(MemoryVfs::new().list("").unwrap(), vec![]);
    }

    #[test]
    fn refusals_name_the_path() {
        let store = store();
        assert_eq!(store.read("a"), Err(VfsError::IsADirectory("a".to_string())));
        assert_eq!(store.read("nope"), Err(VfsError::NotFound("nope".to_string())));
        assert_eq!(store.write("a", b""), Err(VfsError::IsADirectory("a".to_string())));
        assert_eq!(store.write("top.md/x", b""), Err(VfsError::NotADirectory("top.md".to_string())));
        assert_eq!(store.remove("a"), Err(VfsError::IsADirectory("a".to_string())));
        assert_eq!(store.remove("nope"), Err(VfsError::NotFound("nope".to_string())));
        assert_eq!(store.list("top.md"), Err(VfsError::NotADirectory("top.md".to_string())));
        assert_eq!(store.list("nope"), Err(VfsError::NotFound("nope".to_string())));
        assert_eq!(store.read("../x"), Err(VfsError::Escape("../x".to_string())));
    }

    #[test]
    fn a_single_file_store_serves_a_file_mount() {
        let store = MemoryVfs::single_file("# agents");
        assert_eq!(store.read("").unwrap(), b"# agents");
        assert_eq!(store.stat("").unwrap(), Some(Entry::file("", 8)));
        assert_eq!(store.list(""), Err(VfsError::NotADirectory(String::new())));
        assert_eq!(store.write("x", b""), Err(VfsError::NotADirectory(String::new())));
        store.write("", b"new").unwrap();
        assert_eq!(store.read("").unwrap(), b"new");
        store.remove("").unwrap();
        assert_eq!(store.stat("").unwrap(), Some(Entry::directory("")));
        store.write("", b"again").unwrap();
        assert_eq!(store.read("").unwrap(), b"again");
        let directory = MemoryVfs::with_files([("a", "a")]);
        assert_eq!(directory.write("", b""), Err(VfsError::IsADirectory(String::new())));
    }

    #[test]
    fn bounded_reads_copy_no_more_than_they_return() {
        let store = MemoryVfs::with_files([("big.txt", "0123456789"), ("dir/x", "x")]);
        assert_eq!(store.read_limited("big.txt", 10).unwrap(), b"0123456789");
        assert_eq!(
            store.read_limited("./big.txt", 9),
            Err(VfsError::TooLarge { path: "big.txt".to_string(), size: 10, limit: 9 })
        );
        assert_eq!(store.read_head("big.txt", 3).unwrap(), (b"012".to_vec(), 10));
        assert_eq!(store.read_head("big.txt", 30).unwrap(), (b"0123456789".to_vec(), 10));
        assert_eq!(store.read_head("dir", 3), Err(VfsError::IsADirectory("dir".to_string())));
        assert_eq!(store.read_limited("none", 3), Err(VfsError::NotFound("none".to_string())));
    }

    #[test]
    fn a_sibling_with_a_longer_name_is_not_a_child() {
        let store = MemoryVfs::with_files([("ab/x", "1"), ("a-b", "2")]);
        assert_eq!(store.stat("a").unwrap(), None);
        assert_eq!(store.list("").unwrap(), vec![Entry::file("a-b", 1), Entry::directory("ab")]);
    }
}
