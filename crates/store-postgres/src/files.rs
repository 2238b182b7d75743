//! A session's own files in `archmax_files`, as the synchronous [`Vfs`] the tools use.
//!
//! The one thing to know: while the session's writer is open in this store value,
//! writes and removals are *staged* here and flushed by the writer's next commit, in the
//! step's own statement; otherwise they go to the database at once. Every read looks at
//! the staged changes first, then the database, so this store value always reads its own
//! writes. Directories are implied by the files beneath them, as in
//! [`archmax_stdlib::vfs::MemoryVfs`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_postgres::types::Type;

use archmax_stdlib::vfs::{Entry, Vfs, VfsError, last_segment, relative_segments};

use crate::{Inner, describe};

/// Changes not yet committed, by canonical path: `Some` written, `None` removed.
pub(crate) type Staged = BTreeMap<String, Option<Vec<u8>>>;

/// What a session's writer and its `Vfs` share within one store value.
#[derive(Default)]
pub(crate) struct SessionFiles {
    state: Mutex<Staging>,
}

#[derive(Default)]
struct Staging {
    writer_open: bool,
    staged: Staged,
}

impl SessionFiles {
    fn lock(&self) -> MutexGuard<'_, Staging> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn writer_is_open(&self) -> bool {
        self.lock().writer_open
    }

    pub(crate) fn writer_opened(&self) {
        self.lock().writer_open = true;
    }

    /// The writer is gone: what it staged belonged to no committed step.
    pub(crate) fn writer_closed(&self) {
        let mut state = self.lock();
        state.writer_open = false;
        state.staged.clear();
    }

    /// Hands the staged changes to a commit.
    pub(crate) fn take_staged(&self) -> Staged {
        std::mem::take(&mut self.lock().staged)
    }

    /// Puts back the changes of a commit that failed, under anything staged since.
    pub(crate) fn restore_staged(&self, taken: Staged) {
        let mut state = self.lock();
        if !state.writer_open {
            return;
        }
        for (path, change) in taken {
            state.staged.entry(path).or_insert(change);
        }
    }
}

/// A stored file's size, and its bytes when they were asked for and within the bound.
type Fetched = (u64, Option<Vec<u8>>);

/// One session's files.
pub(crate) struct PgFiles {
    inner: Arc<Inner>,
    id: String,
    shared: Arc<SessionFiles>,
}

/// A canonical path: `/`-separated, no empty or `.` segments; climbing is refused.
fn key_of(path: &str) -> Result<String, VfsError> {
    Ok(relative_segments(path)?.join("/"))
}

/// Whether `key` is a directory of `index` (the root always is).
fn is_directory(index: &BTreeMap<String, u64>, key: &str) -> bool {
    if key.is_empty() {
        return true;
    }
    let prefix = format!("{key}/");
    index.range(prefix.clone()..).next().is_some_and(|(path, _)| path.starts_with(&prefix))
}

impl PgFiles {
    pub(crate) fn new(inner: Arc<Inner>, id: String, shared: Arc<SessionFiles>) -> PgFiles {
        PgFiles { inner, id, shared }
    }

    /// Runs one query on the store's executor and waits for its answer.
    fn block<T, F>(&self, key: &str, work: impl FnOnce(deadpool_postgres::Pool, String) -> F) -> Result<T, VfsError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, String>> + Send + 'static,
    {
        match self.inner.wait(work(self.inner.pool.clone(), self.id.clone()), None) {
            Some(result) => result.map_err(|message| VfsError::Other(key.to_string(), message)),
            None => Err(VfsError::Other(key.to_string(), "the session store shut down".to_string())),
        }
    }

    /// Every file of the session with its size: the database under the staged changes.
    fn index(&self, key: &str) -> Result<BTreeMap<String, u64>, VfsError> {
        let rows = self.block(key, |pool, id| async move {
            let client = pool.get().await.map_err(|error| error.to_string())?;
            let rows = client
                .query_typed("SELECT path, size FROM archmax_files WHERE session_id = $1", &[(&id, Type::TEXT)])
                .await
                .map_err(|error| describe(&error))?;
            Ok(rows.iter().map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1))).collect::<Vec<_>>())
        })?;
        let mut index: BTreeMap<String, u64> =
            rows.into_iter().map(|(path, size)| (path, u64::try_from(size).unwrap_or(0))).collect();
        for (path, change) in &self.shared.lock().staged {
            match change {
                Some(bytes) => index.insert(path.clone(), bytes.len() as u64),
                None => index.remove(path),
            };
        }
        Ok(index)
    }

    /// The staged change of `key`, if any.
    fn staged(&self, key: &str) -> Option<Option<Vec<u8>>> {
        self.shared.lock().staged.get(key).cloned()
    }

    /// The size and (when `within` allows) the first bytes of a stored file; `None` when
    /// the database holds no file there.
    fn fetch(&self, key: &str, within: Option<u64>, head: Option<usize>) -> Result<Option<Fetched>, VfsError> {
        let path = key.to_string();
        let limit = within.map_or(i64::MAX, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let head = head.map_or(i32::MAX, |head| i32::try_from(head).unwrap_or(i32::MAX));
        self.block(key, move |pool, id| async move {
            let client = pool.get().await.map_err(|error| error.to_string())?;
            let row = client
                .query_typed_opt(
                    "SELECT size, CASE WHEN size <= $3 THEN substring(content FROM 1 FOR $4) END \
                     FROM archmax_files WHERE session_id = $1 AND path = $2",
                    &[(&id, Type::TEXT), (&path, Type::TEXT), (&limit, Type::INT8), (&head, Type::INT4)],
                )
                .await
                .map_err(|error| describe(&error))?;
            Ok(row.map(|row| (u64::try_from(row.get::<_, i64>(0)).unwrap_or(0), row.get::<_, Option<Vec<u8>>>(1))))
        })
    }

    /// `NotFound` or `IsADirectory`, whichever `key` is.
    fn absent(&self, key: String) -> VfsError {
        match self.index(&key) {
            Ok(index) if is_directory(&index, &key) => VfsError::IsADirectory(key),
            Ok(_) => VfsError::NotFound(key),
            Err(error) => error,
        }
    }

    /// Reads `key` whole when at most `limit` bytes, or its first `head` bytes.
    fn read_bounded(&self, path: &str, limit: Option<u64>, head: Option<usize>) -> Result<(Vec<u8>, u64), VfsError> {
        let key = key_of(path)?;
        if key.is_empty() {
            return Err(VfsError::IsADirectory(key));
        }
        let cut = |mut bytes: Vec<u8>| {
            let size = bytes.len() as u64;
            if let Some(head) = head {
                bytes.truncate(head);
            }
            (bytes, size)
        };
        match self.staged(&key) {
            Some(Some(bytes)) => {
                if let Some(limit) = limit.filter(|limit| bytes.len() as u64 > *limit) {
                    return Err(VfsError::TooLarge { path: key, size: bytes.len() as u64, limit });
                }
                return Ok(cut(bytes));
            }
            Some(None) => return Err(VfsError::NotFound(key)),
            None => {}
        }
        match self.fetch(&key, limit, head)? {
            Some((size, Some(bytes))) => Ok((bytes, size)),
            Some((size, None)) => Err(VfsError::TooLarge { path: key, size, limit: limit.unwrap_or(0) }),
            None => Err(self.absent(key)),
        }
    }

    /// Writes (`Some`) or removes (`None`) `key` in the database, in its own transaction.
    fn write_through(&self, key: &str, content: Option<Vec<u8>>) -> Result<(), VfsError> {
        let path = key.to_string();
        self.block(key, move |pool, id| async move {
            let client = pool.get().await.map_err(|error| error.to_string())?;
            let done = match content {
                Some(bytes) => {
                    let size = bytes.len() as i64;
                    client
                        .execute_typed(
                            "INSERT INTO archmax_files (session_id, path, size, content) VALUES ($1, $2, $3, $4) \
                             ON CONFLICT (session_id, path) DO UPDATE SET size = EXCLUDED.size, content = EXCLUDED.content",
                            &[(&id, Type::TEXT), (&path, Type::TEXT), (&size, Type::INT8), (&bytes, Type::BYTEA)],
                        )
                        .await
                }
                None => {
                    client
                        .execute_typed(
                            "DELETE FROM archmax_files WHERE session_id = $1 AND path = $2",
                            &[(&id, Type::TEXT), (&path, Type::TEXT)],
                        )
                        .await
                }
            };
            done.map(|_| ()).map_err(|error| describe(&error))
        })
    }

    /// Stages the change while a writer is open, or writes it through.
    fn change(&self, key: &str, content: Option<Vec<u8>>) -> Result<(), VfsError> {
        {
            let mut state = self.shared.lock();
            if state.writer_open {
                state.staged.insert(key.to_string(), content);
                return Ok(());
            }
        }
        self.write_through(key, content)
    }
}

impl Vfs for PgFiles {
    fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
        self.read_bounded(path, None, None).map(|(bytes, _)| bytes)
    }

    fn read_limited(&self, path: &str, limit: u64) -> Result<Vec<u8>, VfsError> {
        self.read_bounded(path, Some(limit), None).map(|(bytes, _)| bytes)
    }

    fn read_head(&self, path: &str, max: usize) -> Result<(Vec<u8>, u64), VfsError> {
        self.read_bounded(path, None, Some(max))
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
        let key = key_of(path)?;
        if key.is_empty() {
            return Err(VfsError::IsADirectory(key));
        }
        let limits = self.inner.limits;
        let size = bytes.len() as u64;
        if size > limits.file_bytes {
            return Err(VfsError::TooLarge { path: key, size, limit: limits.file_bytes });
        }
        let index = self.index(&key)?;
        if is_directory(&index, &key) {
            return Err(VfsError::IsADirectory(key));
        }
        let segments: Vec<&str> = key.split('/').collect();
        for depth in 1..segments.len() {
            let ancestor = segments[..depth].join("/");
            if index.contains_key(&ancestor) {
                return Err(VfsError::NotADirectory(ancestor));
            }
        }
        let replaced = index.get(&key).copied();
        let total: u64 = index.values().sum::<u64>() - replaced.unwrap_or(0) + size;
        let count = index.len() + usize::from(replaced.is_none());
        if total > limits.session_bytes || count > limits.session_files {
            return Err(VfsError::Other(
                key,
                format!(
                    "the session's files would be {count} files of {total} bytes, over its caps of {} files and {} bytes",
                    limits.session_files, limits.session_bytes
                ),
            ));
        }
        self.change(&key, Some(bytes.to_vec()))
    }

    fn remove(&self, path: &str) -> Result<(), VfsError> {
        let key = key_of(path)?;
        let index = self.index(&key)?;
        if index.contains_key(&key) {
            return self.change(&key, None);
        }
        if is_directory(&index, &key) { Err(VfsError::IsADirectory(key)) } else { Err(VfsError::NotFound(key)) }
    }

    fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
        let key = key_of(dir)?;
        let index = self.index(&key)?;
        if index.contains_key(&key) {
            return Err(VfsError::NotADirectory(key));
        }
        let prefix = if key.is_empty() { String::new() } else { format!("{key}/") };
        let mut entries: BTreeMap<&str, Entry> = BTreeMap::new();
        for (path, size) in index.range(prefix.clone()..) {
            let Some(rest) = path.strip_prefix(&prefix) else { break };
            match rest.split_once('/') {
                Some((folder, _)) => entries.insert(folder, Entry::directory(folder)),
                None => entries.insert(rest, Entry::file(rest, *size)),
            };
        }
        if entries.is_empty() && !key.is_empty() {
            return Err(VfsError::NotFound(key));
        }
        Ok(entries.into_values().collect())
    }

    fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
        let key = key_of(path)?;
        let index = self.index(&key)?;
        if let Some(size) = index.get(&key) {
            return Ok(Some(Entry::file(last_segment(&key), *size)));
        }
        Ok(is_directory(&index, &key).then(|| Entry::directory(last_segment(&key))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_canonical_and_never_climb() {
        assert_eq!(key_of("a/./b//c.md"), Ok("a/b/c.md".to_string()));
        assert_eq!(key_of(""), Ok(String::new()));
        assert!(matches!(key_of("a/../b"), Err(VfsError::Escape(_))));
        assert!(matches!(key_of("/etc/passwd"), Err(VfsError::Escape(_))));
    }

    #[test]
    fn directories_are_implied_by_the_files_beneath() {
        let index: BTreeMap<String, u64> = [("a/b.md".to_string(), 1), ("ab.md".to_string(), 2)].into();
        assert!(is_directory(&index, "a"));
        assert!(is_directory(&index, ""));
        assert!(!is_directory(&index, "ab.md"));
        assert!(!is_directory(&index, "a/b.md"));
    }
}
