//! Reading files that hold secrets or trust: signing keys, trusted-key lists, the
//! session seal key, token files.
//!
//! The one thing to know: such a file is opened without following a symbolic link at
//! its last component and without blocking (a FIFO planted in its place cannot hang
//! the open), then checked on the open handle: anything but a regular file, a file any
//! user may write (mode `o+w`), and one in a folder any user may write (unless the
//! folder is sticky, like `/tmp`, and the file is the reader's own) is refused with an
//! error naming the path and the fix. A secret ([`read_secret_text`]: a signing key,
//! the seal key, a tokens file) is refused as well when any user may read it (mode
//! `o+r`); a trusted-key list ([`read_trust_text`]) holds public keys and may be
//! readable. A world-writable key file, or one in a folder anyone may write, would let
//! any local user swap the key; a world-readable secret lets them forge what it signs;
//! a FIFO or device in its place would feed the reader whatever its writer chose. A
//! group may read or write: a shared operators' group is a legitimate setup.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a secret file was not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretFileError {
    #[error("{what} `{}` is a symbolic link; name the file itself", path.display())]
    Link { what: &'static str, path: PathBuf },
    #[error("{what} `{}` is not a regular file; put the key in a plain file", path.display())]
    NotRegular { what: &'static str, path: PathBuf },
    #[error(
        "{what} `{}` can be written by every user (mode {mode:o}); run `chmod o-w {}` (or `chmod 600`) and check it was not changed",
        path.display(),
        path.display()
    )]
    WorldWritable { what: &'static str, path: PathBuf, mode: u32 },
    #[error(
        "{what} `{}` can be read by every user (mode {mode:o}); run `chmod o-r {}` (or `chmod 600`), and replace the secret if others may have read it",
        path.display(),
        path.display()
    )]
    WorldReadable { what: &'static str, path: PathBuf, mode: u32 },
    #[error(
        "{what} `{}` lies in the folder `{}`, which every user may write (mode {mode:o}), so any of them could swap the file; run `chmod o-w {}`, or keep the file in a folder only you can write",
        path.display(),
        folder.display(),
        folder.display()
    )]
    FolderWritable { what: &'static str, path: PathBuf, folder: PathBuf, mode: u32 },
    #[error("{what} `{}` is larger than {limit} bytes, too large to be one", path.display())]
    TooLarge { what: &'static str, path: PathBuf, limit: u64 },
    #[error("could not read {what} `{}`: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl SecretFileError {
    /// True when the file does not exist (a caller may then create it).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Who may read a file besides its owner and group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readers {
    /// Nobody else: a private key, the seal key, a tokens file.
    OwnerAndGroup,
    /// Anyone: a list of public keys.
    Anyone,
}

fn open_checked(path: &Path, what: &'static str, readers: Readers) -> Result<File, SecretFileError> {
    let io_error = |source: io::Error| SecretFileError::Io { what, path: path.to_path_buf(), source };
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|error| {
        #[cfg(unix)]
        if error.raw_os_error() == Some(libc::ELOOP) {
            return SecretFileError::Link { what, path: path.to_path_buf() };
        }
        io_error(error)
    })?;
    let metadata = file.metadata().map_err(io_error)?;
    if !metadata.is_file() {
        return Err(SecretFileError::NotRegular { what, path: path.to_path_buf() });
    }
    #[cfg(unix)]
    check_modes(path, what, &metadata, readers)?;
    Ok(file)
}

/// The mode checks of [`open_checked`] on the open file's `metadata` and its folder's.
#[cfg(unix)]
fn check_modes(
    path: &Path,
    what: &'static str,
    metadata: &std::fs::Metadata,
    readers: Readers,
) -> Result<(), SecretFileError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(SecretFileError::WorldWritable { what, path: path.to_path_buf(), mode });
    }
    if readers == Readers::OwnerAndGroup && mode & 0o004 != 0 {
        return Err(SecretFileError::WorldReadable { what, path: path.to_path_buf(), mode });
    }
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let folder_metadata =
        std::fs::metadata(folder).map_err(|source| SecretFileError::Io { what, path: path.to_path_buf(), source })?;
    let folder_mode = folder_metadata.permissions().mode() & 0o7777;
    // In a sticky folder (`/tmp`) others may add files but not rename or remove this
    // one; that is safe only when the file is the reader's own, not one planted there.
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let own_file = metadata.uid() == unsafe { libc::geteuid() };
    let sticky = folder_mode & 0o1000 != 0;
    if folder_mode & 0o002 != 0 && !(sticky && own_file) {
        return Err(SecretFileError::FolderWritable {
            what,
            path: path.to_path_buf(),
            folder: folder.to_path_buf(),
            mode: folder_mode,
        });
    }
    Ok(())
}

/// The bytes of the secret file `path` (at most `limit`), refusing a link, a non-regular
/// file, a file any user may read or write, and a file in a folder any user may write.
/// `what` names the file in errors ("the signing key", "the tokens file").
#[cfg(test)]
fn read_secret_file(path: &Path, what: &'static str, limit: u64) -> Result<Vec<u8>, SecretFileError> {
    read_checked(path, what, limit, Readers::OwnerAndGroup)
}

fn read_checked(path: &Path, what: &'static str, limit: u64, readers: Readers) -> Result<Vec<u8>, SecretFileError> {
    let file = open_checked(path, what, readers)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|source| SecretFileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.len() as u64 > limit {
        return Err(SecretFileError::TooLarge { what, path: path.to_path_buf(), limit });
    }
    Ok(bytes)
}

/// The secret file `path` (at most `limit` bytes) as text, refusing a link, a
/// non-regular file, a file any user may read or write, and a file in a folder any user
/// may write. `what` names the file in errors ("the signing key", "the tokens file").
pub fn read_secret_text(path: &Path, what: &'static str, limit: u64) -> Result<String, SecretFileError> {
    text(path, what, read_checked(path, what, limit, Readers::OwnerAndGroup)?)
}

/// A file of trust decisions (public keys) as text: checked as a secret is, except that
/// any user may read it.
pub fn read_trust_text(path: &Path, what: &'static str, limit: u64) -> Result<String, SecretFileError> {
    text(path, what, read_checked(path, what, limit, Readers::Anyone)?)
}

fn text(path: &Path, what: &'static str, bytes: Vec<u8>) -> Result<String, SecretFileError> {
    String::from_utf8(bytes).map_err(|error| SecretFileError::Io {
        what,
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, format!("it is not UTF-8 text ({error})")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_dir(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("archmax-secret-file-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_world_writable_key_file_is_refused_naming_the_path_and_chmod() {
        let dir = temp_dir("world");
        let path = dir.join("key");
        std::fs::write(&path, "secret").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let error = read_secret_text(&path, "the key file", 1024).expect_err("world-writable");
        let message = error.to_string();
        assert!(matches!(error, SecretFileError::WorldWritable { .. }), "{message}");
        assert!(message.contains(&path.display().to_string()) && message.contains("chmod"), "{message}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read_secret_text(&path, "the key file", 1024).expect("0600 reads"), "secret");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_secret_any_user_may_read_is_refused_naming_the_chmod_but_a_trust_list_may_be_read() {
        let dir = temp_dir("readable");
        let path = dir.join("key");
        std::fs::write(&path, "secret").expect("write");
        for mode in [0o644, 0o604] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let error = read_secret_text(&path, "the seal key file", 1024).expect_err("world-readable");
            let message = error.to_string();
            assert!(matches!(error, SecretFileError::WorldReadable { .. }), "{mode:o}: {message}");
            assert!(message.contains(&format!("chmod o-r {}", path.display())), "{message}");
            assert!(message.contains("the seal key file"), "{message}");
            assert_eq!(read_trust_text(&path, "the key file", 1024).expect("a public list reads"), "secret");
        }
        // A group may read (a shared operators' group); others may not.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        assert_eq!(read_secret_text(&path, "the key file", 1024).expect("0640 reads"), "secret");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).expect("chmod");
        assert!(matches!(read_trust_text(&path, "the key file", 1024), Err(SecretFileError::WorldWritable { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_key_file_in_a_folder_any_user_may_write_is_refused_unless_sticky_and_its_own() {
        let dir = temp_dir("folder");
        let folder = dir.join("keys");
        std::fs::create_dir(&folder).expect("folder");
        let path = folder.join("key");
        std::fs::write(&path, "secret").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        for read in [read_secret_text, read_trust_text] {
            let error = read(&path, "the tokens file", 1024).expect_err("a folder anyone may write");
            let message = error.to_string();
            assert!(matches!(error, SecretFileError::FolderWritable { .. }), "{message}");
            assert!(message.contains(&format!("chmod o-w {}", folder.display())), "{message}");
        }
        // Sticky, like `/tmp`: others cannot swap a file that is the reader's own.
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        assert_eq!(read_secret_text(&path, "the tokens file", 1024).expect("own file, sticky folder"), "secret");
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(read_secret_text(&path, "the tokens file", 1024).expect("a private folder"), "secret");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fifo_a_folder_or_a_link_in_place_of_a_key_file_is_refused_without_hanging() {
        let dir = temp_dir("kinds");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo");
        assert!(matches!(read_secret_file(&fifo, "the key file", 1024), Err(SecretFileError::NotRegular { .. })));
        assert!(matches!(read_secret_file(&dir, "the key file", 1024), Err(SecretFileError::NotRegular { .. })));
        let target = dir.join("real");
        std::fs::write(&target, "secret").expect("write");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(matches!(read_secret_file(&link, "the key file", 1024), Err(SecretFileError::Link { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
