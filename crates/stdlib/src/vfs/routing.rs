//! How a [`Workspace`] routes a path: to the mount with the longest matching key, with
//! the key stripped, or else to the session's own store.
//!
//! A directory key `catalogs/eu/` matches `catalogs/eu` and everything below it; a file
//! key `AGENTS.md` matches only itself, and its store holds that file at path `""`.
//! Mounts also shape listings: the directories that lead to a mount always exist, and the
//! root shows every mount (a file mount even when its file is absent) beside the session's
//! own entries, minus the areas only the runtime reads.

use std::collections::BTreeMap;

use super::{Entry, MountPoint, Vfs, VfsError, Workspace, last_segment, relative_segments};

/// True for a session-root folder the agent never sees in the root listing: a reserved
/// root the zone table says the model does not list.
fn hidden_root(name: &str) -> bool {
    archmax_program::zones::session_root(name).is_some_and(|root| !root.model_lists)
}

impl MountPoint {
    /// The key without a leading slash or trailing slash: the workspace path it occupies.
    pub fn path(&self) -> &str {
        self.key.trim_start_matches('/').trim_end_matches('/')
    }

    /// True for a directory mount (key ending in `/`).
    pub fn is_directory(&self) -> bool {
        self.key.ends_with('/')
    }

    /// True when the canonical `path` routes into this mount (ignoring longer keys).
    pub fn contains(&self, path: &str) -> bool {
        let key = self.path();
        if self.is_directory() {
            path == key || path.strip_prefix(key).is_some_and(|rest| rest.starts_with('/'))
        } else {
            path == key
        }
    }

    /// The mount-relative path of a canonical path this mount contains.
    fn inner<'p>(&self, path: &'p str) -> &'p str {
        path.strip_prefix(self.path()).map(|rest| rest.trim_start_matches('/')).unwrap_or("")
    }

    /// The workspace path of a mount-relative path.
    fn outer(&self, inner: &str) -> String {
        if inner.is_empty() { self.path().to_string() } else { format!("{}/{inner}", self.path()) }
    }
}

/// Where a path goes: a store and the path within it.
struct Route<'w> {
    store: &'w dyn Vfs,
    inner: String,
    mount: Option<&'w MountPoint>,
}

impl Route<'_> {
    /// Rewrites a store's error so it names the workspace path, never the store's.
    fn reframe(&self, error: VfsError) -> VfsError {
        let Some(mount) = self.mount else { return error };
        match error {
            VfsError::NotFound(path) => VfsError::NotFound(mount.outer(&path)),
            VfsError::IsADirectory(path) => VfsError::IsADirectory(mount.outer(&path)),
            VfsError::NotADirectory(path) => VfsError::NotADirectory(mount.outer(&path)),
            VfsError::ReadOnly(path) => VfsError::ReadOnly(mount.outer(&path)),
            VfsError::Escape(path) => VfsError::Escape(mount.outer(&path)),
            VfsError::TooLarge { path, size, limit } => VfsError::TooLarge { path: mount.outer(&path), size, limit },
            VfsError::Other(path, detail) => VfsError::Other(mount.outer(&path), detail),
        }
    }
}

/// The canonical form of a workspace path, or an escape naming it as given.
fn canonical(path: &str) -> Result<String, VfsError> {
    archmax_program::zones::canonicalize(path).map_err(|_| VfsError::Escape(path.to_string()))
}

impl Workspace {
    /// The mount a canonical path routes to: the longest key that contains it.
    pub fn mount_for(&self, path: &str) -> Option<&MountPoint> {
        self.mounts.iter().filter(|mount| mount.contains(path)).max_by_key(|mount| mount.path().len())
    }

    /// False when the path lies inside a mount the host declared `searchable: false`.
    pub fn searchable(&self, path: &str) -> bool {
        self.mount_for(path).is_none_or(|mount| mount.searchable)
    }

    /// True when a mount lies strictly below `path`, so `path` is a directory that leads
    /// to it whatever the routed store holds.
    fn leads_to_mount(&self, path: &str) -> bool {
        path.is_empty()
            || self.mounts.iter().any(|mount| mount.path().strip_prefix(path).is_some_and(|rest| rest.starts_with('/')))
    }

    fn route(&self, path: &str) -> Route<'_> {
        match self.mount_for(path) {
            Some(mount) => {
                Route { store: mount.store.as_ref(), inner: mount.inner(path).to_string(), mount: Some(mount) }
            }
            None => Route { store: self.session.as_ref(), inner: path.to_string(), mount: None },
        }
    }

    /// For a file mount: `Some(false)` when its store holds no file (a store with nothing
    /// in it reads as an empty folder, which a file mount must show as absent).
    fn file_mount_present(&self, route: &Route<'_>) -> Result<Option<bool>, VfsError> {
        match route.mount {
            Some(mount) if !mount.is_directory() => {
                let found = route.store.stat("").map_err(|error| route.reframe(error))?;
                Ok(Some(found.is_some_and(|entry| !entry.is_dir)))
            }
            _ => Ok(None),
        }
    }

    /// Refuses a change at `path` before any store sees it.
    fn check_writable(&self, path: &str, route: &Route<'_>) -> Result<(), VfsError> {
        if route.mount.is_some_and(|mount| mount.read_only) {
            return Err(VfsError::ReadOnly(path.to_string()));
        }
        if self.leads_to_mount(path) || route.mount.is_some_and(|mount| mount.is_directory() && route.inner.is_empty())
        {
            return Err(VfsError::IsADirectory(path.to_string()));
        }
        Ok(())
    }

    pub fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
        self.routed_read(path, |store, inner| store.read(inner))
    }

    /// [`Vfs::read_limited`] through the routing.
    pub fn read_limited(&self, path: &str, limit: u64) -> Result<Vec<u8>, VfsError> {
        self.routed_read(path, |store, inner| store.read_limited(inner, limit))
    }

    /// [`Vfs::read_head`] through the routing.
    pub fn read_head(&self, path: &str, max: usize) -> Result<(Vec<u8>, u64), VfsError> {
        self.routed_read(path, |store, inner| store.read_head(inner, max))
    }

    fn routed_read<T>(
        &self,
        path: &str,
        read: impl FnOnce(&dyn Vfs, &str) -> Result<T, VfsError>,
    ) -> Result<T, VfsError> {
        let path = canonical(path)?;
        if self.leads_to_mount(&path) {
            return Err(VfsError::IsADirectory(path));
        }
        let route = self.route(&path);
        if self.file_mount_present(&route)? == Some(false) {
            return Err(VfsError::NotFound(path));
        }
        read(route.store, &route.inner).map_err(|error| route.reframe(error))
    }

    /// Writes a file; refused inside a read-only mount.
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
        let path = canonical(path)?;
        let route = self.route(&path);
        self.check_writable(&path, &route)?;
        route.store.write(&route.inner, bytes).map_err(|error| route.reframe(error))
    }

    /// Removes a file; refused inside a read-only mount.
    pub fn remove(&self, path: &str) -> Result<(), VfsError> {
        let path = canonical(path)?;
        let route = self.route(&path);
        self.check_writable(&path, &route)?;
        if self.file_mount_present(&route)? == Some(false) {
            return Err(VfsError::NotFound(path));
        }
        route.store.remove(&route.inner).map_err(|error| route.reframe(error))
    }

    /// The entries of a directory, sorted by name, with the mounts below it merged in.
    pub fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
        let dir = canonical(dir)?;
        let route = self.route(&dir);
        if route.mount.is_some_and(|mount| !mount.is_directory()) {
            return Err(VfsError::NotADirectory(dir));
        }
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        let mount_root = route.mount.is_some_and(|mount| route.inner.is_empty() && mount.is_directory());
        match route.store.list(&route.inner) {
            Ok(listed) => {
                for entry in listed {
                    if dir.is_empty() && hidden_root(&entry.name) {
                        continue;
                    }
                    entries.insert(entry.name.clone(), entry);
                }
            }
            // A missing session root, a mount whose folder is absent, or a folder that
            // exists only because a mount lies below it: an empty listing, not an error.
            Err(VfsError::NotFound(_)) if dir.is_empty() || mount_root || self.leads_to_mount(&dir) => {}
            Err(error) => return Err(route.reframe(error)),
        }
        for entry in self.mount_entries(&dir) {
            entries.insert(entry.name.clone(), entry);
        }
        Ok(entries.into_values().collect())
    }

    /// What is at a path, if anything. The root, the folders leading to a mount and a
    /// directory mount's own folder always exist.
    pub fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
        let path = canonical(path)?;
        if self.leads_to_mount(&path) {
            return Ok(Some(Entry::directory(last_segment(&path))));
        }
        let route = self.route(&path);
        if self.file_mount_present(&route)? == Some(false) {
            return Ok(None);
        }
        let found = route.store.stat(&route.inner).map_err(|error| route.reframe(error))?;
        let name = last_segment(&path);
        Ok(match found {
            Some(entry) => Some(Entry { name: name.to_string(), ..entry }),
            None if route.mount.is_some_and(|mount| mount.is_directory() && route.inner.is_empty()) => {
                Some(Entry::directory(name))
            }
            None => None,
        })
    }

    /// The entries the mounts contribute directly below `dir`.
    fn mount_entries(&self, dir: &str) -> Vec<Entry> {
        let mut entries = Vec::new();
        for mount in &self.mounts {
            let key = mount.path();
            let rest = if dir.is_empty() {
                key
            } else {
                match key.strip_prefix(dir).and_then(|rest| rest.strip_prefix('/')) {
                    Some(rest) => rest,
                    None => continue,
                }
            };
            let Ok(segments) = relative_segments(rest) else { continue };
            let Some(first) = segments.first() else { continue };
            if segments.len() > 1 || mount.is_directory() {
                entries.push(Entry::directory(*first));
            } else {
                let size =
                    mount.store.stat("").ok().flatten().filter(|entry| !entry.is_dir).map_or(0, |entry| entry.size);
                entries.push(Entry::file(*first, size));
            }
        }
        entries
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::vfs::MemoryVfs;

    fn mount(key: &str, read_only: bool, searchable: bool, store: MemoryVfs) -> MountPoint {
        MountPoint { key: key.to_string(), read_only, searchable, store: Arc::new(store) }
    }

    fn workspace() -> (Workspace, Arc<MemoryVfs>) {
        let session = Arc::new(MemoryVfs::with_files([
            ("scratchpad/notes.md", "notes"),
            ("checkpoints/cp-1.json", "{}"),
            ("artifacts/graph.json", "{}"),
            ("reports/a.md", "report"),
            ("AGENTS.md", "shadowed"),
        ]));
        let workspace = Workspace {
            session: session.clone(),
            mounts: vec![
                mount("skills/", true, true, MemoryVfs::with_files([("orders/SKILL.md", "skill")])),
                mount("catalogs/", true, true, MemoryVfs::with_files([("uk/x.json", "uk"), ("eu/x.json", "shadowed")])),
                mount("catalogs/eu/", false, false, MemoryVfs::with_files([("x.json", "eu")])),
                mount("AGENTS.md", true, true, MemoryVfs::single_file("agents")),
                mount("docs/guide.md", true, true, MemoryVfs::new()),
            ],
        };
        (workspace, session)
    }

    #[test]
    fn the_longest_key_wins() {
        let (workspace, _) = workspace();
        assert_eq!(workspace.read("catalogs/eu/x.json").unwrap(), b"eu");
        assert_eq!(workspace.read("catalogs/uk/x.json").unwrap(), b"uk");
        assert_eq!(workspace.mount_for("catalogs/eu").map(|mount| mount.key.as_str()), Some("catalogs/eu/"));
        assert_eq!(workspace.mount_for("catalogs/europe").map(|mount| mount.key.as_str()), Some("catalogs/"));
        assert_eq!(workspace.mount_for("scratchpad/notes.md").map(|mount| mount.key.as_str()), None);
    }

    #[test]
    fn file_mounts_match_exactly() {
        let (workspace, session) = workspace();
        assert_eq!(workspace.read("AGENTS.md").unwrap(), b"agents");
        assert_eq!(workspace.read("/AGENTS.md").unwrap(), b"agents");
        workspace.write("AGENTS.md.bak", b"backup").unwrap();
        assert_eq!(session.read("AGENTS.md.bak").unwrap(), b"backup");
        assert_eq!(workspace.stat("AGENTS.md").unwrap(), Some(Entry::file("AGENTS.md", 6)));
    }

    #[test]
    fn read_only_mounts_refuse_changes() {
        let (workspace, _) = workspace();
        assert_eq!(
            workspace.write("skills/orders/SKILL.md", b"x"),
            Err(VfsError::ReadOnly("skills/orders/SKILL.md".to_string()))
        );
        assert_eq!(
            workspace.remove("skills/orders/SKILL.md"),
            Err(VfsError::ReadOnly("skills/orders/SKILL.md".to_string()))
        );
        assert_eq!(workspace.write("AGENTS.md", b"x"), Err(VfsError::ReadOnly("AGENTS.md".to_string())));
        assert_eq!(workspace.read("skills/orders/SKILL.md").unwrap(), b"skill");
        workspace.write("catalogs/eu/y.json", b"new").unwrap();
        assert_eq!(workspace.read("catalogs/eu/y.json").unwrap(), b"new");
    }

    #[test]
    fn errors_name_workspace_paths() {
        let (workspace, _) = workspace();
        assert_eq!(workspace.read("skills/none.md"), Err(VfsError::NotFound("skills/none.md".to_string())));
        assert_eq!(workspace.read("catalogs/eu/none"), Err(VfsError::NotFound("catalogs/eu/none".to_string())));
        assert_eq!(workspace.read("../up"), Err(VfsError::Escape("../up".to_string())));
        assert_eq!(workspace.read("docs/guide.md"), Err(VfsError::NotFound("docs/guide.md".to_string())));
        assert_eq!(workspace.stat("docs/guide.md").unwrap(), None);
        assert_eq!(workspace.list("AGENTS.md"), Err(VfsError::NotADirectory("AGENTS.md".to_string())));
    }

    #[test]
    fn folders_leading_to_mounts_are_directories() {
        let (workspace, _) = workspace();
        assert_eq!(workspace.read(""), Err(VfsError::IsADirectory(String::new())));
        assert_eq!(workspace.read("docs"), Err(VfsError::IsADirectory("docs".to_string())));
        assert_eq!(workspace.write("docs", b"x"), Err(VfsError::IsADirectory("docs".to_string())));
        assert_eq!(workspace.write("catalogs/eu", b"x"), Err(VfsError::IsADirectory("catalogs/eu".to_string())));
        assert_eq!(workspace.stat("docs").unwrap(), Some(Entry::directory("docs")));
        assert_eq!(workspace.stat("").unwrap(), Some(Entry::directory("")));
        assert_eq!(workspace.list("docs").unwrap(), vec![Entry::file("guide.md", 0)]);
    }

    #[test]
    fn the_root_listing_merges_session_and_mounts() {
        let (workspace, _) = workspace();
        let names: Vec<(String, bool)> =
            workspace.list("").unwrap().into_iter().map(|entry| (entry.name, entry.is_dir)).collect();
        assert_eq!(
            names,
            vec![
                ("AGENTS.md".to_string(), false),
                ("catalogs".to_string(), true),
                ("docs".to_string(), true),
                ("reports".to_string(), true),
                ("scratchpad".to_string(), true),
                ("skills".to_string(), true),
            ]
        );
        let agents = workspace.list("").unwrap().into_iter().find(|entry| entry.name == "AGENTS.md").unwrap();
        assert_eq!(agents.size, 6, "the mount's file, not the session's shadowed copy");
    }

    #[test]
    fn nested_mounts_appear_in_their_parent_listing() {
        let session = Arc::new(MemoryVfs::new());
        let workspace = Workspace {
            session,
            mounts: vec![mount("catalogs/eu/", true, true, MemoryVfs::with_files([("x.json", "eu")]))],
        };
        assert_eq!(workspace.list("catalogs").unwrap(), vec![Entry::directory("eu")]);
        assert_eq!(workspace.list("").unwrap(), vec![Entry::directory("catalogs")]);
        assert_eq!(workspace.list("catalogs/eu").unwrap(), vec![Entry::file("x.json", 2)]);
        assert_eq!(workspace.list("elsewhere"), Err(VfsError::NotFound("elsewhere".to_string())));
    }

    #[test]
    fn an_empty_mount_lists_empty_and_exists() {
        let workspace = Workspace {
            session: Arc::new(MemoryVfs::new()),
            mounts: vec![mount("reference/", true, true, MemoryVfs::new())],
        };
        assert_eq!(workspace.list("reference").unwrap(), vec![]);
        assert_eq!(workspace.stat("reference").unwrap(), Some(Entry::directory("reference")));
        assert_eq!(workspace.list("").unwrap(), vec![Entry::directory("reference")]);
    }

    #[test]
    fn the_mount_listing_strips_its_key() {
        let (workspace, _) = workspace();
        assert_eq!(workspace.list("skills").unwrap(), vec![Entry::directory("orders")]);
        assert_eq!(workspace.list("catalogs").unwrap(), vec![Entry::directory("eu"), Entry::directory("uk")]);
        assert_eq!(workspace.list("skills/orders").unwrap(), vec![Entry::file("SKILL.md", 5)]);
    }

    #[test]
    fn a_writable_file_mount_takes_writes_at_its_key() {
        let store = Arc::new(MemoryVfs::new());
        let workspace = Workspace {
            session: Arc::new(MemoryVfs::new()),
            mounts: vec![MountPoint {
                key: "NOTES.md".to_string(),
                read_only: false,
                searchable: true,
                store: store.clone(),
            }],
        };
        assert_eq!(workspace.list("").unwrap(), vec![Entry::file("NOTES.md", 0)]);
        assert_eq!(workspace.stat("NOTES.md").unwrap(), None);
        workspace.write("NOTES.md", b"kept").unwrap();
        assert_eq!(store.read("").unwrap(), b"kept");
        assert_eq!(workspace.stat("NOTES.md").unwrap(), Some(Entry::file("NOTES.md", 4)));
        workspace.remove("NOTES.md").unwrap();
        assert_eq!(workspace.remove("NOTES.md"), Err(VfsError::NotFound("NOTES.md".to_string())));
    }

    #[test]
    fn searchability_follows_the_routing_mount() {
        let (workspace, _) = workspace();
        assert!(workspace.searchable("catalogs/uk/x.json"));
        assert!(!workspace.searchable("catalogs/eu"));
        assert!(!workspace.searchable("catalogs/eu/x.json"));
        assert!(workspace.searchable("scratchpad/notes.md"));
        assert!(workspace.searchable(""));
    }
}
