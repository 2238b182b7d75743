//! The seal key: the secret that makes a session's seal a MAC instead of a checksum.
//!
//! The one thing to know: the key lives outside every session folder, where a tool call
//! (or a local user who may write `sessions/` but not the runner's own files) cannot read
//! it. Where it comes from, first match wins:
//!
//! 1. `ARCHMAX_SEAL_KEY`: the keys inline, separated by commas or whitespace;
//! 2. `ARCHMAX_SEAL_KEY_FILE`: a key file at that path;
//! 3. `<workspace root>/.archmax/seal.key`, created (mode 0600, its folder 0700) with a
//!    fresh random key the first time a store needs it, so a workspace stays zero-config.
//!
//! A key is 32 bytes written as 64 hex digits; a key file holds one per line (blank lines
//! and `#` comments are skipped). The first key is the current one: every seal and log
//! record is written under it. The others are previous keys, still accepted on load, so a
//! key is rotated by putting a new line first and keeping the old one below it; each
//! session is resealed under the new key the next time it is opened for writing (or by
//! `archmax sessions ID --reseal`), after which the old line may go. A session sealed
//! under a key no longer listed is refused as tampered. Key files are read through
//! [`crate::secret_file`], so a link, a FIFO or a world-writable file is refused.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use archmax_program::hex::{decode_array, hex};

use crate::secret_file::{SecretFileError, read_secret_text};

/// The environment variable holding the seal keys inline (current first).
pub(crate) const SEAL_KEY_VARIABLE: &str = "ARCHMAX_SEAL_KEY";
/// The environment variable naming a seal key file.
pub(crate) const SEAL_KEY_FILE_VARIABLE: &str = "ARCHMAX_SEAL_KEY_FILE";
/// The workspace's own seal key file, relative to its root.
pub(crate) const DEFAULT_SEAL_KEY_FILE: &str = ".archmax/seal.key";
/// A key file holds a few lines; anything larger is not one.
const KEY_FILE_LIMIT: u64 = 64 * 1024;
const KEY_BYTES: usize = 32;

/// A short public name of a key (the start of a hash of it), recorded in each seal slot
/// so a load finds the key that sealed it and an error can name it.
pub(super) type KeyId = [u8; 8];

#[derive(Clone)]
struct SealKey {
    secret: [u8; KEY_BYTES],
    id: KeyId,
}

/// The current seal key and the previous ones still accepted.
#[derive(Clone)]
pub struct SealKeys {
    /// Never empty; the first is the current key.
    keys: Arc<[SealKey]>,
    /// Where the keys came from, for errors.
    source: Arc<str>,
}

/// Why no seal key could be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealKeyError {
    #[error(transparent)]
    File(#[from] SecretFileError),
    #[error("{source_name} holds no seal key; put one key (64 hex digits) per line, the current one first")]
    Empty { source_name: String },
    #[error(
        "{source_name}, key {position}: `{shown}` is not a seal key; a key is 64 hex digits (32 random bytes), e.g. from `head -c32 /dev/urandom | xxd -p -c64`"
    )]
    Malformed { source_name: String, position: usize, shown: String },
    #[error("could not create the seal key file `{}`: {source}; create it yourself (one key of 64 hex digits, mode 0600) or set {SEAL_KEY_VARIABLE}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not draw a random seal key: {0}")]
    Random(String),
}

impl SealKeys {
    /// The keys in `text` (a key file's content, or the inline variable's value).
    pub fn parse(text: &str, source_name: &str) -> Result<Self, SealKeyError> {
        let mut keys = Vec::new();
        let words = text
            .lines()
            .map(|line| line.split('#').next().unwrap_or_default())
            .flat_map(|line| line.split([',', ' ', '\t']))
            .map(str::trim)
            .filter(|word| !word.is_empty());
        for (index, word) in words.enumerate() {
            let secret = decode_array::<KEY_BYTES>(word).ok_or_else(|| SealKeyError::Malformed {
                source_name: source_name.to_string(),
                position: index + 1,
                shown: word.chars().take(6).chain("…".chars()).collect(),
            })?;
            keys.push(SealKey { secret, id: key_id(&secret) });
        }
        if keys.is_empty() {
            return Err(SealKeyError::Empty { source_name: source_name.to_string() });
        }
        Ok(Self { keys: keys.into(), source: source_name.into() })
    }

    /// A fresh random key held only in memory (tests, benchmarks, throwaway stores).
    pub fn generate() -> Result<Self, SealKeyError> {
        Self::parse(&fresh_key_hex()?, "a generated key")
    }

    /// These keys with `previous`'s keys accepted after them: what a rotation looks like.
    #[cfg(test)]
    pub(crate) fn with_previous(&self, previous: &SealKeys) -> Self {
        let keys: Vec<SealKey> = self.keys.iter().chain(previous.keys.iter()).cloned().collect();
        Self { keys: keys.into(), source: self.source.clone() }
    }

    /// The keys of the workspace at `root`: [`SEAL_KEY_VARIABLE`], else the file
    /// [`SEAL_KEY_FILE_VARIABLE`] names, else `<root>/.archmax/seal.key` (created when absent).
    pub fn for_workspace(root: &Path) -> Result<Self, SealKeyError> {
        if let Some(inline) = std::env::var(SEAL_KEY_VARIABLE).ok().filter(|value| !value.trim().is_empty()) {
            return Self::parse(&inline, SEAL_KEY_VARIABLE);
        }
        match std::env::var_os(SEAL_KEY_FILE_VARIABLE).filter(|value| !value.is_empty()) {
            Some(path) => Self::from_file_or_create(Path::new(&path)),
            None => Self::from_file_or_create(&root.join(DEFAULT_SEAL_KEY_FILE)),
        }
    }

    /// The keys in the file `path`; when it does not exist, it is created (mode 0600,
    /// exclusively, so two runners starting at once agree on one key) with a fresh key.
    pub(crate) fn from_file_or_create(path: &Path) -> Result<Self, SealKeyError> {
        match read_secret_text(path, "the seal key file", KEY_FILE_LIMIT) {
            Ok(text) => return Self::parse(&text, &format!("the seal key file `{}`", path.display())),
            Err(error) if error.is_not_found() => {}
            Err(error) => return Err(error.into()),
        }
        create_key_file(path)?;
        let text = read_secret_text(path, "the seal key file", KEY_FILE_LIMIT)?;
        Self::parse(&text, &format!("the seal key file `{}`", path.display()))
    }

    /// The current key's public id, as hex.
    pub fn current_id(&self) -> String {
        hex(&self.keys[0].id)
    }

    pub(super) fn current_key_id(&self) -> KeyId {
        self.keys[0].id
    }

    /// Where the keys came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// HMAC-SHA256 of `parts` under the current key.
    pub(super) fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        mac_with(&self.keys[0].secret, parts)
    }

    /// How many keys are accepted: the current one and the previous ones.
    pub(super) fn accepted(&self) -> usize {
        self.keys.len()
    }

    /// HMAC-SHA256 of `parts` under accepted key `index` (0 = current); `None` past the
    /// last key.
    pub(super) fn mac_by(&self, index: usize, parts: &[&[u8]]) -> Option<[u8; 32]> {
        self.keys.get(index).map(|key| mac_with(&key.secret, parts))
    }

    /// Whether `tag` is accepted key `index`'s HMAC-SHA256 of `parts` (constant time).
    pub(super) fn verify_by(&self, index: usize, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.keys.get(index).is_some_and(|key| verify_with(&key.secret, parts, tag))
    }

    /// Which key (0 = current) has id `id` and gives `tag` over `parts`; `Err` says
    /// whether the id is unknown (`None`) or known and the tag wrong (`Some(index)`).
    pub(super) fn check_with_id(&self, id: &KeyId, parts: &[&[u8]], tag: &[u8]) -> Result<usize, Option<usize>> {
        let index = self.keys.iter().position(|key| &key.id == id).ok_or(None)?;
        if verify_with(&self.keys[index].secret, parts, tag) { Ok(index) } else { Err(Some(index)) }
    }

    /// Which key, if any, gives `tag` over `parts`.
    pub(super) fn check_any(&self, parts: &[&[u8]], tag: &[u8]) -> Option<usize> {
        self.keys.iter().position(|key| verify_with(&key.secret, parts, tag))
    }
}

impl fmt::Debug for SealKeys {
    /// Shows the keys' public ids and their source, never a key.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.keys.iter().map(|key| hex(&key.id)).collect();
        formatter.debug_struct("SealKeys").field("ids", &ids).field("source", &self.source).finish()
    }
}

fn mac_with(secret: &[u8; KEY_BYTES], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = keyed(secret);
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn verify_with(secret: &[u8; KEY_BYTES], parts: &[&[u8]], tag: &[u8]) -> bool {
    let mut mac = keyed(secret);
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(tag).is_ok()
}

/// HMAC-SHA256 keyed with `secret`: a key shorter than the hash's 64-byte block is
/// zero-padded to it (RFC 2104), so the padded block is the same key, and infallible.
fn keyed(secret: &[u8; KEY_BYTES]) -> Hmac<Sha256> {
    let mut block = [0u8; 64];
    block[..KEY_BYTES].copy_from_slice(secret);
    <Hmac<Sha256> as hmac::digest::KeyInit>::new(&block.into())
}

fn key_id(secret: &[u8; KEY_BYTES]) -> KeyId {
    let digest = Sha256::new().chain_update(b"archmax seal key id\0").chain_update(secret).finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    id
}

/// 32 random bytes as 64 hex digits: a new key.
pub(crate) fn fresh_key_hex() -> Result<String, SealKeyError> {
    let mut secret = [0u8; KEY_BYTES];
    getrandom::fill(&mut secret).map_err(|error| SealKeyError::Random(error.to_string()))?;
    Ok(hex(&secret))
}

/// Creates the key file with one fresh key; another process creating it first is fine.
fn create_key_file(path: &Path) -> Result<(), SealKeyError> {
    let create_error = |source: io::Error| SealKeyError::Create { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(parent).map_err(create_error)?;
    }
    let text = format!(
        "# archmax session seal key: the first key seals, the others are previous keys still accepted.\n\
         # Keep this file private (mode 0600) and outside sessions/. See SECURITY.md, \"Session log integrity\".\n{}\n",
        fresh_key_hex()?
    );
    // Written whole under a private name, then linked into place: a runner starting at
    // the same moment sees no file or the whole file, never a half-written one.
    let staging = path.with_extension(format!("new-{}", std::process::id()));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written =
        options.open(&staging).and_then(|mut file| file.write_all(text.as_bytes()).and_then(|()| file.sync_all()));
    let linked = written.and_then(|()| fs::hard_link(&staging, path));
    let _ = fs::remove_file(&staging);
    match linked {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(create_error(error)),
    }
}
