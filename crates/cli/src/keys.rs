//! `archmax keygen -o KEYFILE [--force]`, and reading the keys other commands take:
//! `build --sign KEYFILE`, and `--trust KEY` (repeatable) with `ARCHMAX_TRUSTED_KEYS`.
//!
//! The one thing to know: a private key file is created with mode 0600 and never
//! replaces an existing file unless `--force` says so (then through a fresh 0600 file
//! and a rename, so the old file's permissions are not inherited).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::artifact::{
    ArtifactError, KeyError, PUBLIC_PREFIX, PublicKey, SECRET_PREFIX, SecretKey, TrustedKeys,
};
use archmax_vm::secret_file::{read_secret_text, read_trust_text};

use crate::output::failure;

/// The environment variable holding trusted public keys (comma or whitespace separated).
pub const TRUSTED_KEYS_VARIABLE: &str = "ARCHMAX_TRUSTED_KEYS";
/// A key file is a few lines; anything larger is not one.
const KEY_FILE_LIMIT: u64 = 64 * 1024;

pub fn keygen(output: &Path, force: bool) -> ExitCode {
    let key = match SecretKey::generate() {
        Ok(key) => key,
        Err(error) => return failure(error),
    };
    if let Err(error) = write_private(output, &key.to_file_text(), force) {
        return failure(error);
    }
    println!("{}", key.public());
    eprintln!(
        "wrote the private key to {} (mode 0600); loaders trust what it signs with `--trust {}`",
        output.display(),
        key.public()
    );
    ExitCode::SUCCESS
}

fn create_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
}

fn write_private(path: &Path, text: &str, force: bool) -> Result<(), String> {
    let describe = |error: std::io::Error| format!("could not write `{}`: {error}", path.display());
    if !force {
        let mut file = create_private(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => {
                format!("`{}` already exists; pass `--force` to replace it with a new key", path.display())
            }
            _ => describe(error),
        })?;
        return file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(describe);
    }
    let temporary = path.with_extension(format!("keygen-{}", std::process::id()));
    let written = create_private(&temporary)
        .and_then(|mut file| file.write_all(text.as_bytes()).and_then(|()| file.sync_all()))
        .and_then(|()| fs::rename(&temporary, path));
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written.map_err(describe)
}

/// The signing key of `build --sign KEYFILE`: a secret, so a file every user may read
/// is refused like one they may write ([`read_secret_text`]).
pub fn signing_key(path: &Path) -> Result<SecretKey, String> {
    let text = read_secret_text(path, "the key file", KEY_FILE_LIMIT).map_err(|error| error.to_string())?;
    SecretKey::parse_file(&text).map_err(|error| format!("`{}`: {}", path.display(), key_problem(&error)))
}

/// One `--trust` value: a public key as text, or a file holding one.
fn trusted_key(value: &str) -> Result<PublicKey, String> {
    if value.trim_start().starts_with(PUBLIC_PREFIX) {
        return PublicKey::parse(value).map_err(|error| key_problem(&error));
    }
    let path = Path::new(value);
    // Public keys: any user may read the file, none but its owner may write it.
    let text = read_trust_text(path, "the key file", KEY_FILE_LIMIT).map_err(|error| {
        format!("`--trust {value}` is neither a public key (`ed25519:` and 64 hex digits) nor a key file ({error})")
    })?;
    if text.contains(SECRET_PREFIX) {
        return Err(format!(
            "`{value}` is a private key file; trust the public key `archmax keygen` printed for it instead"
        ));
    }
    let keys: Vec<&str> =
        text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).collect();
    match keys.as_slice() {
        [key] => PublicKey::parse(key).map_err(|error| format!("`{value}`: {}", key_problem(&error))),
        _ => Err(format!("`{value}` must hold exactly one public key line (`ed25519:` and 64 hex digits)")),
    }
}

/// A key the library refused, as the CLI says it: the library's sentence (what is wrong),
/// then the command that makes a good one.
fn key_problem(error: &KeyError) -> String {
    match error {
        KeyError::NotAPublicKey(_) => format!("{error}, as `archmax keygen` prints it"),
        KeyError::NotAPrivateKey => format!("{error}; make one with `archmax keygen -o FILE`"),
        _ => error.to_string(),
    }
}

/// An artifact the library refused, as the CLI says it: the library's sentence (what is
/// wrong), then what to do about it with this CLI.
pub fn artifact_problem(error: &ArtifactError) -> String {
    match error {
        ArtifactError::OldFormat { .. } | ArtifactError::CompilerMismatch { .. } => {
            format!("{error}; rebuild it with `archmax build`")
        }
        ArtifactError::Unsigned => format!("{error}: sign it with `archmax build --sign KEYFILE`"),
        ArtifactError::Untrusted(_) => {
            format!("{error}: pass it to `--trust` (or ARCHMAX_TRUSTED_KEYS) only if you trust its signer")
        }
        _ => error.to_string(),
    }
}

/// Every trusted key: the `--trust` values and `ARCHMAX_TRUSTED_KEYS`.
pub fn trusted_keys(values: &[String]) -> Result<TrustedKeys, String> {
    let mut trusted = match std::env::var(TRUSTED_KEYS_VARIABLE) {
        // A variable that is set but names no key is a mistake (an unset secret in a
        // deployment, a stray comma), never a reason to trust every artifact.
        Ok(list) if list.split(|c: char| c == ',' || c.is_whitespace()).all(str::is_empty) => {
            return Err(format!(
                "{TRUSTED_KEYS_VARIABLE} is set but names no key; give it one or more `ed25519:…` public keys, or unset it to trust none"
            ));
        }
        Ok(list) => TrustedKeys::parse_list(&list)
            .map_err(|error| format!("{TRUSTED_KEYS_VARIABLE}: {}", key_problem(&error)))?,
        Err(std::env::VarError::NotPresent) => TrustedKeys::default(),
        Err(std::env::VarError::NotUnicode(_)) => return Err(format!("{TRUSTED_KEYS_VARIABLE} is not valid UTF-8")),
    };
    for value in values {
        trusted.add(trusted_key(value)?);
    }
    Ok(trusted)
}

#[cfg(test)]
mod tests {
    use super::{artifact_problem, key_problem};
    use archmax_compiler::artifact::{ArtifactError, KeyError};

    /// The library says what is wrong; the CLI adds the command, so the printed line is
    /// the one the goldens hold.
    #[test]
    fn the_cli_adds_the_command_to_an_artifact_or_key_refusal() {
        assert_eq!(
            artifact_problem(&ArtifactError::Unsigned),
            "the artifact is not signed, and trusted keys are configured: sign it with `archmax build --sign KEYFILE`"
        );
        assert_eq!(
            artifact_problem(&ArtifactError::OldFormat { found: 1 }),
            "the artifact uses the retired format 1; rebuild it with `archmax build`"
        );
        assert_eq!(artifact_problem(&ArtifactError::Checksum), ArtifactError::Checksum.to_string());
        assert_eq!(
            key_problem(&KeyError::NotAPrivateKey),
            "not an archmax private key file: it needs one line `ed25519-secret:` followed by 64 hex digits; make one with `archmax keygen -o FILE`"
        );
        for error in
            [ArtifactError::Unsigned, ArtifactError::CompilerMismatch { found: "0".into(), current: "1".into() }]
        {
            assert!(!error.to_string().contains("`archmax"), "the library names no command: {error}");
        }
    }
}
