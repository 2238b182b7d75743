//! Where a workspace's files come from: [`DiskFiles`] (a directory on disk) or
//! [`MemoryFiles`] (tests, fuzzing, benches), behind the [`Files`] trait.
//!
//! The one thing to know: only regular files inside the root are ever read. On disk
//! every path is opened with `openat2(RESOLVE_BENEATH)` from a handle on the root, so a
//! symbolic link is followed only while it stays inside the workspace, and a file is
//! judged by `fstat` on the very handle that reads it (opened non-blocking), so a named
//! pipe can neither hang loading nor be swapped in after a check. What is refused is a
//! [`Kind::Refused`] entry, which loading reports as a diagnostic where it lies.
//! [`Files::links_in`] names the links of a folder without following them, so loading can
//! warn about links inside a mount's source: the runtime never follows those.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::join;

/// What a workspace path is, once links that stay inside the root are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    /// Something the compiler never reads; loading reports it where it lies.
    Refused(Refusal),
}

/// Why a workspace path is never read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A named pipe, socket or device: reading it could block forever. Names the kind.
    NotRegular(&'static str),
    /// A symbolic link whose target lies outside the workspace root.
    LeavesRoot,
}

/// Where a workspace's files come from: the disk, or memory (tests, fuzzing, benches).
/// Paths are relative to the root, `/`-separated; `""` is the root itself.
pub trait Files {
    /// The entries of a directory, sorted by name, with what each is. An entry that
    /// cannot be judged (a dangling link) is a [`Kind::File`], so reading it reports why.
    fn entries(&self, dir: &str) -> Vec<(String, Kind)>;
    /// What is at a path, if anything.
    fn kind(&self, path: &str) -> Option<Kind>;
    /// The file's bytes, refusing files larger than `limit` and anything but a regular
    /// file inside the root.
    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError>;
    /// The path to show for a file.
    fn location(&self, path: &str) -> PathBuf;
    /// The names of the symbolic links directly in a folder, sorted, judged without
    /// following them. Memory has no links.
    fn links_in(&self, _dir: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Why a file could not be read.
#[derive(Debug)]
pub enum ReadError {
    TooLarge(u64),
    Refused(Refusal),
    Io(std::io::Error),
}

/// Files on disk under a root directory, opened only beneath it.
pub struct DiskFiles {
    root: PathBuf,
    handle: OwnedFd,
}

impl DiskFiles {
    /// Opens the workspace root (as named, links and all: the root is the caller's choice).
    pub fn open(root: &Path) -> std::io::Result<DiskFiles> {
        let handle = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(DiskFiles { root: root.to_path_buf(), handle })
    }

    fn open_beneath(&self, path: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        let path = if path.is_empty() { "." } else { path };
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let mut outcome = Err(Errno::AGAIN);
        for _ in 0..OPEN_RETRIES {
            outcome = rustix::fs::openat2(&self.handle, path, flags | OFlags::CLOEXEC, Mode::empty(), resolve);
            if !matches!(outcome, Err(Errno::AGAIN)) {
                break;
            }
        }
        outcome
    }

    /// What is at a path, judged on a handle that reads nothing (`O_PATH`).
    fn judge(&self, path: &str) -> Result<Kind, Errno> {
        let handle = self.open_beneath(path, OFlags::PATH)?;
        Ok(kind_of(&rustix::fs::fstat(&handle)?))
    }
}

/// How often an open is retried when the kernel reports a concurrent rename (EAGAIN).
const OPEN_RETRIES: usize = 8;

fn kind_of(stat: &rustix::fs::Stat) -> Kind {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        FileType::Fifo => Kind::Refused(Refusal::NotRegular("a named pipe")),
        FileType::Socket => Kind::Refused(Refusal::NotRegular("a socket")),
        FileType::CharacterDevice => Kind::Refused(Refusal::NotRegular("a character device")),
        FileType::BlockDevice => Kind::Refused(Refusal::NotRegular("a block device")),
        _ => Kind::Refused(Refusal::NotRegular("a special file")),
    }
}

impl Files for DiskFiles {
    fn entries(&self, dir: &str) -> Vec<(String, Kind)> {
        let Ok(handle) = self.open_beneath(dir, OFlags::RDONLY | OFlags::DIRECTORY) else {
            return Vec::new();
        };
        let Ok(reader) = rustix::fs::Dir::read_from(&handle) else {
            return Vec::new();
        };
        let mut entries: Vec<(String, Kind)> = reader
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name != "." && name != "..")
            .map(|name| {
                let kind = match self.judge(&join(dir, &name)) {
                    Ok(kind) => kind,
                    Err(Errno::XDEV) => Kind::Refused(Refusal::LeavesRoot),
                    Err(_) => Kind::File,
                };
                (name, kind)
            })
            .collect();
        entries.sort_by(|left, right| left.0.cmp(&right.0));
        entries
    }

    fn kind(&self, path: &str) -> Option<Kind> {
        match self.judge(path) {
            Ok(kind) => Some(kind),
            Err(Errno::XDEV) => Some(Kind::Refused(Refusal::LeavesRoot)),
            Err(_) => None,
        }
    }

    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let handle = match self.open_beneath(path, flags) {
            Ok(handle) => handle,
            Err(Errno::XDEV) => return Err(ReadError::Refused(Refusal::LeavesRoot)),
            // A socket cannot be opened at all.
            Err(Errno::NXIO) => {
                let kind = self.judge(path).unwrap_or(Kind::Refused(Refusal::NotRegular("a special file")));
                return Err(ReadError::Refused(match kind {
                    Kind::Refused(refusal) => refusal,
                    _ => Refusal::NotRegular("a special file"),
                }));
            }
            Err(errno) => return Err(ReadError::Io(errno.into())),
        };
        let stat = rustix::fs::fstat(&handle).map_err(|errno| ReadError::Io(errno.into()))?;
        match kind_of(&stat) {
            Kind::File => {}
            Kind::Directory => return Err(ReadError::Io(Errno::ISDIR.into())),
            Kind::Refused(refusal) => return Err(ReadError::Refused(refusal)),
        }
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        if size > limit {
            return Err(ReadError::TooLarge(size));
        }
        let mut bytes = Vec::new();
        fs::File::from(handle).take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::Io)?;
        if bytes.len() as u64 > limit {
            return Err(ReadError::TooLarge(bytes.len() as u64));
        }
        Ok(bytes)
    }

    fn location(&self, path: &str) -> PathBuf {
        if path.is_empty() { self.root.clone() } else { self.root.join(path) }
    }

    fn links_in(&self, dir: &str) -> Vec<String> {
        let Ok(handle) = self.open_beneath(dir, OFlags::RDONLY | OFlags::DIRECTORY) else {
            return Vec::new();
        };
        let Ok(reader) = rustix::fs::Dir::read_from(&handle) else {
            return Vec::new();
        };
        let mut links: Vec<String> = reader
            .filter_map(Result::ok)
            .filter(|entry| {
                rustix::fs::statat(&handle, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
            })
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        links.sort();
        links
    }
}

/// Files held in memory, keyed by root-relative path; directories are implied.
#[derive(Default)]
pub struct MemoryFiles {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemoryFiles {
    pub fn new<P: AsRef<str>, C: AsRef<[u8]>>(files: impl IntoIterator<Item = (P, C)>) -> MemoryFiles {
        MemoryFiles {
            files: files
                .into_iter()
                .map(|(path, content)| (path.as_ref().trim_matches('/').to_string(), content.as_ref().to_vec()))
                .collect(),
        }
    }

    fn is_dir(&self, path: &str) -> bool {
        path.is_empty()
            || self.files.keys().any(|file| file.starts_with(path) && file.as_bytes().get(path.len()) == Some(&b'/'))
    }
}

impl Files for MemoryFiles {
    fn entries(&self, dir: &str) -> Vec<(String, Kind)> {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        let mut entries: BTreeMap<String, Kind> = BTreeMap::new();
        for path in self.files.keys().filter(|path| path.starts_with(&prefix)) {
            let rest = &path[prefix.len()..];
            match rest.split_once('/') {
                Some((name, _)) => {
                    entries.insert(name.to_string(), Kind::Directory);
                }
                None => {
                    entries.entry(rest.to_string()).or_insert(Kind::File);
                }
            }
        }
        entries.into_iter().collect()
    }

    fn kind(&self, path: &str) -> Option<Kind> {
        if self.files.contains_key(path) { Some(Kind::File) } else { self.is_dir(path).then_some(Kind::Directory) }
    }

    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        match self.files.get(path) {
            Some(bytes) if bytes.len() as u64 > limit => Err(ReadError::TooLarge(bytes.len() as u64)),
            Some(bytes) => Ok(bytes.clone()),
            None => Err(ReadError::Io(std::io::Error::from(std::io::ErrorKind::NotFound))),
        }
    }

    fn location(&self, path: &str) -> PathBuf {
        PathBuf::from(path)
    }
}
