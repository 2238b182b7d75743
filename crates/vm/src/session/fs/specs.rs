//! The store's pinned specs: `<dir>/_specs/<hash>.json`, one per workflow spec a session
//! ran under, shared by every session and never removed with one.
//!
//! The one thing to know: a spec is content-addressed, so writing one that is already
//! there (or losing the race to write it) changes nothing; it is replaced by a synced
//! staging file renamed into place, and read without following links.

use std::fs;
use std::io;
use std::path::PathBuf;

use super::FsStore;
use super::faults::Faults;
use super::files::{read_if_exists, real_dir_exists, replace};
use crate::session::StoreError;
use crate::session::spec::{PinnedSpec, is_spec_hash};

/// The folder of pinned specs, beside the sessions.
pub(crate) const SPECS_DIR: &str = "_specs";
/// A spec file larger than this is refused as damaged.
const MAX_SPEC_BYTES: usize = 4 * 1024 * 1024;

fn spec_error(hash: &str) -> impl Fn(io::Error) -> StoreError + '_ {
    move |error| StoreError::Spec { hash: hash.to_string(), message: error.to_string() }
}

impl FsStore {
    /// `<dir>/_specs`, refused when it is a link or not a folder.
    fn specs_dir(&self, hash: &str) -> Result<(PathBuf, bool), StoreError> {
        if !is_spec_hash(hash) {
            return Err(StoreError::Spec {
                hash: hash.to_string(),
                message: "a spec hash is lowercase hexadecimal".to_string(),
            });
        }
        let dir = self.dir.join(SPECS_DIR);
        let exists = real_dir_exists(&dir).map_err(spec_error(hash))?;
        Ok((dir, exists))
    }

    pub(super) fn write_spec(&self, spec: &PinnedSpec) -> Result<(), StoreError> {
        let hash = spec.spec_hash.as_str();
        if self.read_spec(hash)?.is_some() {
            return Ok(());
        }
        let (dir, exists) = self.specs_dir(hash)?;
        if !exists {
            fs::create_dir_all(&dir).map_err(spec_error(hash))?;
        }
        let bytes = serde_json::to_vec_pretty(spec).map_err(|error| spec_error(hash)(io::Error::other(error)))?;
        replace(&dir, &format!("{hash}.json"), &bytes, &mut Faults::default()).map_err(spec_error(hash))
    }

    pub(super) fn read_spec(&self, hash: &str) -> Result<Option<PinnedSpec>, StoreError> {
        let (dir, exists) = self.specs_dir(hash)?;
        if !exists {
            return Ok(None);
        }
        let Some(bytes) = read_if_exists(&dir.join(format!("{hash}.json"))).map_err(spec_error(hash))? else {
            return Ok(None);
        };
        let damaged = |message: String| StoreError::Spec { hash: hash.to_string(), message };
        if bytes.len() > MAX_SPEC_BYTES {
            return Err(damaged(format!("the file is larger than {MAX_SPEC_BYTES} bytes")));
        }
        let spec: PinnedSpec = serde_json::from_slice(&bytes).map_err(|error| damaged(error.to_string()))?;
        if spec.spec_hash != hash {
            return Err(damaged(format!("the file holds the spec of `{}`", spec.spec_hash)));
        }
        Ok(Some(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::spec::PinnedState;

    /// A fresh store under the system temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(label: &str) -> Self {
            let path = std::env::temp_dir().join(format!("archmax-specs-{label}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            Scratch(path)
        }

        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn spec(hash: &str) -> PinnedSpec {
        PinnedSpec {
            workflow: "w".into(),
            spec_hash: hash.into(),
            states: vec![PinnedState { slug: "a".into(), kind: "agent".into(), digest: "d".into() }],
        }
    }

    #[test]
    fn a_kept_spec_reads_back_and_is_not_listed_as_a_session() {
        let dir = Scratch::new("kept");
        let store = FsStore::new(dir.path(), crate::session::fs::SealKeys::generate().unwrap());
        assert_eq!(store.read_spec("ab12").unwrap(), None);
        store.write_spec(&spec("ab12")).unwrap();
        store.write_spec(&spec("ab12")).unwrap();
        assert_eq!(store.read_spec("ab12").unwrap(), Some(spec("ab12")));
        assert!(dir.path().join("_specs/ab12.json").is_file());
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn a_hash_that_is_not_hex_never_becomes_a_path() {
        let dir = Scratch::new("hash");
        let store = FsStore::new(dir.path(), crate::session::fs::SealKeys::generate().unwrap());
        assert!(matches!(store.read_spec("../../etc/passwd"), Err(StoreError::Spec { .. })));
        assert!(matches!(store.write_spec(&spec("../x")), Err(StoreError::Spec { .. })));
    }

    #[test]
    fn a_spec_file_naming_another_hash_is_refused() {
        let dir = Scratch::new("other");
        let store = FsStore::new(dir.path(), crate::session::fs::SealKeys::generate().unwrap());
        store.write_spec(&spec("ab12")).unwrap();
        fs::copy(dir.path().join("_specs/ab12.json"), dir.path().join("_specs/cd34.json")).unwrap();
        assert!(matches!(store.read_spec("cd34"), Err(StoreError::Spec { .. })));
    }
}
