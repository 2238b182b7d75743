//! What the session store keeps of a signed-in browser, and the keys that make it useless
//! to anyone who can only read or write the store.
//!
//! An inbox session lives in one of [`MAX_SESSIONS_PER_IDENTITY`] slots of its identity.
//! Everything that ties a record to a person is an HMAC under the identity's key
//! ([`IdentityKey`]), which each runner derives from the digests of the tokens configured
//! for that identity: material every runner of one deployment holds (the same tokens
//! file and `ARCHMAX_SERVE_TOKEN`) and the store never does.
//!
//! - The record's key is the MAC of the slot number ([`IdentityKey::slot_key`]), so the
//!   keys a runner looks up cannot be chosen by a store writer.
//! - The record holds the MAC of the secret half of the browser's cookie, bound to the
//!   record's key ([`IdentityKey::secret_mac`]): the cookie is `<key>.<secret>`, and
//!   neither the key nor the record gives the secret away.
//! - The record names the token signed in with by its MAC ([`IdentityKey::token_mac`]),
//!   never by its bare digest, so a store reader learns nothing that stands for a token.
//! - The session's CSRF key is derived from the cookie's secret, not stored.
//!
//! So a record copied, or crafted from another record's fields, does not verify under any
//! cookie its writer holds. The one thing to know: the identity's key changes when the
//! tokens configured for it change (a token added or revoked), which ends that identity's
//! inbox sessions; other identities are not affected.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::signin::Secret;
use archmax_program::hex::{decode, hex};

/// The most inbox sessions one identity keeps at once, across every runner on the store;
/// a sign-in past it ends that identity's oldest session.
pub const MAX_SESSIONS_PER_IDENTITY: u8 = 8;

/// What the store keeps of one signed-in browser.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboxSession {
    pub identity: String,
    /// The identity's slot the session occupies (below [`MAX_SESSIONS_PER_IDENTITY`]).
    pub slot: u8,
    /// When the session started (milliseconds since the Unix epoch): the oldest is ended
    /// first when the identity signs in once more.
    pub issued_ms: u64,
    /// The MAC of the signed-in token's digest (hex).
    pub token_mac: String,
    /// The MAC of the cookie's secret, bound to the record's key (hex).
    pub secret_mac: String,
}

/// The key an identity's inbox sessions are bound with: an HMAC keyed by the digests of
/// the identity's configured tokens.
pub struct IdentityKey([u8; 32]);

impl IdentityKey {
    /// The key of `identity`, whose configured tokens have `digests` (sorted); `None`
    /// when it has none (no such identity, or every token of it revoked).
    pub fn of(identity: &str, digests: &[[u8; 32]]) -> Option<IdentityKey> {
        if digests.is_empty() {
            return None;
        }
        let mut mac = Hmac::<Sha256>::new_from_slice(&digests.concat()).ok()?;
        mac.update(b"archmax inbox identity key\0");
        mac.update(identity.as_bytes());
        Some(IdentityKey(mac.finalize().into_bytes().into()))
    }

    /// The MAC of `parts` for `purpose`, each part prefixed by its length so no two
    /// inputs read alike.
    fn mac(&self, purpose: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        };
        mac.update(purpose.as_bytes());
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// The store's key of the identity's session slot `slot`.
    pub fn slot_key(&self, slot: u8) -> String {
        hex(&self.mac("inbox-slot", &[&[slot]]).finalize().into_bytes())
    }

    /// What the record at `key` holds of the cookie secret `secret`.
    pub fn secret_mac(&self, key: &str, secret: &[u8]) -> String {
        hex(&self.mac("inbox-secret", &[key.as_bytes(), secret]).finalize().into_bytes())
    }

    /// Whether `kept` is the MAC of `secret` for the record at `key` (constant time).
    pub fn verify_secret(&self, key: &str, secret: &[u8], kept: &str) -> bool {
        decode(kept)
            .is_some_and(|bytes| self.mac("inbox-secret", &[key.as_bytes(), secret]).verify_slice(&bytes).is_ok())
    }

    /// What a record holds of the token signed in with.
    pub fn token_mac(&self, digest: &[u8; 32]) -> String {
        hex(&self.mac("inbox-token", &[digest]).finalize().into_bytes())
    }

    /// Which of `digests` the record's `kept` token MAC names, if any.
    pub fn token_of(&self, digests: &[[u8; 32]], kept: &str) -> Option<[u8; 32]> {
        let kept = decode(kept)?;
        digests.iter().copied().find(|digest| self.mac("inbox-token", &[digest]).verify_slice(&kept).is_ok())
    }

    /// The CSRF key of the session at `key` whose cookie holds `secret`.
    pub fn csrf_secret(&self, key: &str, secret: &[u8]) -> Secret {
        let half = |part: &[u8]| self.mac("inbox-csrf", &[key.as_bytes(), secret, part]).finalize().into_bytes();
        let mut bytes = [0u8; 64];
        bytes[..32].copy_from_slice(&half(b"1"));
        bytes[32..].copy_from_slice(&half(b"2"));
        Secret::from_array(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_key_depends_on_the_identity_and_on_every_one_of_its_tokens() {
        let (one, two) = ([1u8; 32], [2u8; 32]);
        let key = |identity: &str, digests: &[[u8; 32]]| IdentityKey::of(identity, digests).map(|key| key.slot_key(0));
        assert!(key("lead", &[]).is_none(), "no token, no key");
        assert_eq!(key("lead", &[one, two]), key("lead", &[one, two]));
        assert_ne!(key("lead", &[one, two]), key("lead", &[one]), "a token revoked");
        assert_ne!(key("lead", &[one]), key("care", &[one]), "another identity");
        let lead = IdentityKey::of("lead", &[one, two]).expect("a key");
        assert_ne!(lead.slot_key(0), lead.slot_key(1));
        let secret = [7u8; 32];
        let kept = lead.secret_mac(&lead.slot_key(0), &secret);
        assert!(lead.verify_secret(&lead.slot_key(0), &secret, &kept));
        assert!(!lead.verify_secret(&lead.slot_key(1), &secret, &kept), "bound to its record's key");
        assert!(!lead.verify_secret(&lead.slot_key(0), &[8u8; 32], &kept), "another secret");
        assert_eq!(lead.token_of(&[one, two], &lead.token_mac(&two)), Some(two));
        assert_eq!(lead.token_of(&[one], &lead.token_mac(&two)), None, "a token no longer served");
    }
}
