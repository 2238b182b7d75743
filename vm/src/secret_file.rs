//! Reading files that hold secrets or trust: signing keys, trusted-key lists, the
//! session seal key, token files.
//!
//! The one thing to know: such a file is opened without following a symbolic link at
//! its last component and without blocking (a FIFO planted in its place cannot hang
//! the open), then checked on the open handle: anything but a regular file, and a file
//! any user may write (mode `o+w`), is refused with an error naming the path and the
//! fix. A world-writable key file would let any local user swap the key, and a FIFO
//! or device in its place would feed the reader whatever its writer chose.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a secret file was not read.
#[derive(Debug, thiserror::Error)]
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
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Opens `path` for reading, refusing a link, a non-regular file and a world-writable one.
/// `what` names the file in errors ("the signing key", "the tokens file").
pub fn open_secret_file(path: &Path, what: &'static str) -> Result<File, SecretFileError> {
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
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o002 != 0 {
            return Err(SecretFileError::WorldWritable { what, path: path.to_path_buf(), mode });
        }
    }
    Ok(file)
}

/// The bytes of the secret file `path` (at most `limit`), checked as [`open_secret_file`] does.
pub fn read_secret_file(path: &Path, what: &'static str, limit: u64) -> Result<Vec<u8>, SecretFileError> {
    let file = open_secret_file(path, what)?;
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

/// [`read_secret_file`] as text.
pub fn read_secret_text(path: &Path, what: &'static str, limit: u64) -> Result<String, SecretFileError> {
    let bytes = read_secret_file(path, what, limit)?;
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
