//! The workspace as the editor sees it: the files on disk, with every open document's
//! unsaved text in place of its disk copy (and open documents that are not saved yet).
//!
//! The one thing to know: only the text changes hands; what the disk refuses (a link out
//! of the root, a FIFO) stays refused, because everything else goes to [`DiskFiles`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use archmax_compiler::workspace::{DiskFiles, Files, Kind, ReadError};

/// Disk files under open documents' texts, keyed by root-relative path.
pub struct Overlay<'a> {
    pub disk: &'a DiskFiles,
    pub open: &'a BTreeMap<String, String>,
}

impl Overlay<'_> {
    /// True when an open document lies under `dir`.
    fn holds_under(&self, dir: &str) -> bool {
        let prefix = format!("{dir}/");
        self.open.range(prefix.clone()..).next().is_some_and(|(path, _)| path.starts_with(&prefix))
    }
}

impl Files for Overlay<'_> {
    fn entries(&self, dir: &str) -> Vec<(String, Kind)> {
        let mut entries: BTreeMap<String, Kind> = self.disk.entries(dir).into_iter().collect();
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        for path in self.open.keys().filter(|path| path.starts_with(&prefix)) {
            let rest = &path[prefix.len()..];
            let (name, kind) = match rest.split_once('/') {
                Some((name, _)) => (name, Kind::Directory),
                None => (rest, Kind::File),
            };
            entries.entry(name.to_string()).or_insert(kind);
        }
        entries.into_iter().collect()
    }

    fn kind(&self, path: &str) -> Option<Kind> {
        if self.open.contains_key(path) {
            return Some(Kind::File);
        }
        self.disk.kind(path).or_else(|| self.holds_under(path).then_some(Kind::Directory))
    }

    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        match self.open.get(path) {
            Some(text) if text.len() as u64 > limit => Err(ReadError::TooLarge(text.len() as u64)),
            Some(text) => Ok(text.as_bytes().to_vec()),
            None => self.disk.read(path, limit),
        }
    }

    fn location(&self, path: &str) -> PathBuf {
        self.disk.location(path)
    }

    fn links_in(&self, dir: &str) -> Vec<String> {
        self.disk.links_in(dir)
    }
}
