//! Ed25519 keys for signing artifacts, and the set of public keys a loader trusts.
//!
//! The one thing to know is the two text forms, which are the whole user interface:
//!
//! - a public key is `ed25519:` followed by its 32 bytes as 64 lowercase hex digits
//!   (what `archmax keygen` prints, what `--trust` and `ARCHMAX_TRUSTED_KEYS` take);
//! - a private key file holds one line `ed25519-secret:<64 hex digits>` (the 32-byte
//!   seed), plus `#` comment lines; `archmax keygen` writes it with mode 0600.
//!
//! Signing is deterministic (RFC 8032): the same key over the same bytes gives the same
//! signature, so signed builds stay byte-identical.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::hex::{decode_array, hex};

/// The prefix of a public key's text form.
pub const PUBLIC_PREFIX: &str = "ed25519:";
/// The prefix of the secret line of a private key file.
pub const SECRET_PREFIX: &str = "ed25519-secret:";

/// Why a key could not be read or made. Which command makes a key is the host's to add
/// (the CLI does, by variant).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("`{0}` is not a public key: write `ed25519:` followed by 64 hex digits")]
    NotAPublicKey(String),
    #[error("`{0}` is not a usable Ed25519 public key (it is not a point on the curve, or a weak one)")]
    WeakPublicKey(String),
    #[error("not an archmax private key file: it needs one line `ed25519-secret:` followed by 64 hex digits")]
    NotAPrivateKey,
    #[error("the operating system gave no randomness for a new key: {0}")]
    Randomness(String),
}

/// A public key that verifies signatures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Reads `ed25519:<64 hex>`; surrounding whitespace is ignored.
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let trimmed = text.trim();
        let bytes = trimmed
            .strip_prefix(PUBLIC_PREFIX)
            .and_then(decode_array::<32>)
            .ok_or_else(|| KeyError::NotAPublicKey(shorten(trimmed)))?;
        PublicKey::from_bytes(&bytes).ok_or_else(|| KeyError::WeakPublicKey(shorten(trimmed)))
    }

    /// The key from its 32 bytes; `None` when they are no usable key.
    pub fn from_bytes(bytes: &[u8; 32]) -> Option<PublicKey> {
        VerifyingKey::from_bytes(bytes).ok().filter(|key| !key.is_weak()).map(PublicKey)
    }

    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// True when `signature` is this key's strict Ed25519 signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        self.0.verify_strict(message, &Signature::from_bytes(signature)).is_ok()
    }
}

impl std::fmt::Display for PublicKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{PUBLIC_PREFIX}{}", hex(self.0.as_bytes()))
    }
}

/// A private signing key. Its bytes are wiped from memory when it is dropped.
pub struct SecretKey(SigningKey);

impl SecretKey {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<SecretKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|error| KeyError::Randomness(error.to_string()))?;
        let key = SecretKey::from_seed(&seed);
        zeroize::Zeroize::zeroize(&mut seed);
        Ok(key)
    }

    /// The key a 32-byte seed determines.
    pub fn from_seed(seed: &[u8; 32]) -> SecretKey {
        SecretKey(SigningKey::from_bytes(seed))
    }

    /// Reads a private key file: `#` comments, blank lines, and exactly one secret line.
    pub fn parse_file(text: &str) -> Result<SecretKey, KeyError> {
        let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#'));
        let (Some(line), None) = (lines.next(), lines.next()) else {
            return Err(KeyError::NotAPrivateKey);
        };
        let mut seed = line.strip_prefix(SECRET_PREFIX).and_then(decode_array::<32>).ok_or(KeyError::NotAPrivateKey)?;
        let key = SecretKey::from_seed(&seed);
        zeroize::Zeroize::zeroize(&mut seed);
        Ok(key)
    }

    /// The text of a private key file for this key.
    pub fn to_file_text(&self) -> String {
        format!(
            "# archmax artifact signing key (Ed25519). Keep this file secret.\n# public key: {}\n{SECRET_PREFIX}{}\n",
            self.public(),
            hex(self.0.as_bytes())
        )
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "SecretKey({})", self.public())
    }
}

/// The public keys whose signatures a loader accepts. Empty means no trust is configured:
/// unsigned artifacts load, but their bytecode is never run (see [`super::load`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<PublicKey>);

impl TrustedKeys {
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> TrustedKeys {
        let mut trusted = TrustedKeys::default();
        for key in keys {
            trusted.add(key);
        }
        trusted
    }

    /// Reads a list separated by commas and whitespace, as `ARCHMAX_TRUSTED_KEYS` holds it.
    pub fn parse_list(text: &str) -> Result<TrustedKeys, KeyError> {
        let keys = text
            .split(|character: char| character == ',' || character.is_whitespace())
            .filter(|item| !item.is_empty())
            .map(PublicKey::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TrustedKeys::new(keys))
    }

    pub fn add(&mut self, key: PublicKey) {
        if !self.0.contains(&key) {
            self.0.push(key);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &PublicKey) -> bool {
        self.0.contains(key)
    }
}

/// A hostile key argument is echoed only in part.
fn shorten(text: &str) -> String {
    crate::text::cut_with_ellipsis(text, 80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_keys_round_trip_through_their_text_form() {
        let key = SecretKey::from_seed(&[7; 32]).public();
        let text = key.to_string();
        assert!(text.starts_with("ed25519:") && text.len() == 8 + 64, "{text}");
        assert_eq!(PublicKey::parse(&format!("  {text}\n")), Ok(key));
    }

    #[test]
    fn malformed_public_keys_are_named() {
        for text in ["", "ed25519:", "ed25519:zz", "rsa:00", &format!("ed25519:{}", "g".repeat(64))] {
            assert!(matches!(PublicKey::parse(text), Err(KeyError::NotAPublicKey(_))), "{text}");
        }
        // The identity point is a weak key: it would accept forged signatures.
        let identity = format!("ed25519:01{}", "0".repeat(62));
        assert!(matches!(PublicKey::parse(&identity), Err(KeyError::WeakPublicKey(_))));
    }

    #[test]
    fn private_key_files_round_trip_and_refuse_anything_else() {
        let key = SecretKey::from_seed(&[9; 32]);
        let parsed = SecretKey::parse_file(&key.to_file_text()).expect("parses");
        assert_eq!(parsed.public(), key.public());
        let secret_line = key.to_file_text().lines().last().unwrap_or_default().to_string();
        for text in ["", "ed25519-secret:00", &format!("{secret_line}\n{secret_line}\n"), &key.public().to_string()] {
            assert!(matches!(SecretKey::parse_file(text), Err(KeyError::NotAPrivateKey)), "{text}");
        }
    }

    #[test]
    fn generated_keys_differ_and_sign_deterministically() {
        let (first, second) = (SecretKey::generate().expect("random"), SecretKey::generate().expect("random"));
        assert_ne!(first.public(), second.public());
        assert_eq!(first.sign(b"payload"), first.sign(b"payload"));
        assert!(first.public().verifies(b"payload", &first.sign(b"payload")));
        assert!(!second.public().verifies(b"payload", &first.sign(b"payload")));
    }

    #[test]
    fn trusted_key_lists_split_on_commas_and_whitespace() {
        let (a, b) = (SecretKey::from_seed(&[1; 32]).public(), SecretKey::from_seed(&[2; 32]).public());
        let trusted = TrustedKeys::parse_list(&format!(" {a},\n{b} , {a}")).expect("parses");
        assert_eq!(trusted, TrustedKeys::new([a, b]));
        assert!(TrustedKeys::parse_list("").expect("empty").is_empty());
        assert!(TrustedKeys::parse_list(&format!("{a},nonsense")).is_err());
    }
}
