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
//!
//! A person signed in through the OpenID Connect provider (`[inbox.oidc]`) has no token,
//! so their key cannot come from one: [`IdentityKey::of_provider`] derives it from the
//! provider's client secret (with the issuer and client id), which every runner of the
//! deployment holds in its environment and the store never does. Such a record says so
//! (`method: provider`) and names no token; a store writer who flips a record's method
//! gets a record whose key no longer matches its slot. Rotating the client secret ends
//! every provider sign-in; the tokens' sessions are not affected.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::Inbox;
use super::signin::Secret;
use archmax_program::hex::{decode, hex};
use archmax_vm::session::records::{Record, RecordKind};

/// The most inbox sessions one identity keeps at once, across every runner on the store;
/// a sign-in past it ends that identity's oldest session.
pub const MAX_SESSIONS_PER_IDENTITY: u8 = 8;

/// How a session was signed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignInMethod {
    /// With a token the runner accepts.
    #[default]
    Token,
    /// Through the OpenID Connect provider of `[inbox.oidc]`.
    Provider,
}

impl SignInMethod {
    fn is_token(&self) -> bool {
        *self == SignInMethod::Token
    }
}

/// What the store keeps of one signed-in browser.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboxSession {
    pub identity: String,
    /// How the session was signed in (records without one: with a token).
    #[serde(default, skip_serializing_if = "SignInMethod::is_token")]
    pub method: SignInMethod,
    /// The identity's slot the session occupies (below [`MAX_SESSIONS_PER_IDENTITY`]).
    pub slot: u8,
    /// When the session started (milliseconds since the Unix epoch): the oldest is ended
    /// first when the identity signs in once more.
    pub issued_ms: u64,
    /// The MAC of the signed-in token's digest (hex); empty for a provider sign-in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
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

    /// The key of `identity` signed in through the OpenID Connect provider: an HMAC
    /// keyed by the provider's client secret over the issuer, the client id, the
    /// admission policy (who `[inbox.oidc]` lets in, so narrowing it ends the sign-ins
    /// it no longer admits) and the identity (each prefixed by its length).
    pub fn of_provider(identity: &str, (secret, issuer, client_id, policy): (&[u8], &str, &str, &str)) -> IdentityKey {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
            unreachable!("HMAC accepts keys of every length")
        };
        mac.update(b"archmax inbox provider identity key\0");
        for part in [issuer.as_bytes(), client_id.as_bytes(), policy.as_bytes(), identity.as_bytes()] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        IdentityKey(mac.finalize().into_bytes().into())
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

/// How many times a sign-in looks for a slot again after another sign-in of the same
/// identity took the one it chose.
const SLOT_TRIES: usize = 4;

/// Keeps a new inbox session for `identity` in the store, in a free slot of its identity or
/// in place of its oldest session; the cookie's value (`<key>.<secret hex>`), or `Err`
/// (logged) when the store did not answer.
pub(super) async fn start_session(
    inbox: &Inbox,
    identity: &str,
    identity_key: &IdentityKey,
    (method, token_mac): (SignInMethod, String),
) -> Result<String, ()> {
    let mut secret = [0u8; 32];
    if !super::signin::random_bytes(&mut secret) {
        return Err(());
    }
    let store = &inbox.server.store;
    for _ in 0..SLOT_TRIES {
        let now = inbox.server.now_ms();
        let (slot, oldest_live) = choose_slot(inbox, identity_key, now).await?;
        let key = identity_key.slot_key(slot);
        if oldest_live {
            // The identity holds its most sessions: its oldest one ends.
            if let Err(error) = store.remove_record(RecordKind::InboxSession, &key).await {
                tracing::error!("the inbox could not end an identity's oldest sign-in: {error}");
                return Err(());
            }
            tracing::info!(identity, "an inbox session ended: its identity signed in again");
        }
        let session = InboxSession {
            identity: identity.to_string(),
            method,
            slot,
            issued_ms: now,
            token_mac: token_mac.clone(),
            secret_mac: identity_key.secret_mac(&key, &secret),
        };
        let value = serde_json::to_vec(&session).map_err(|_| ())?;
        let expires_ms = now.saturating_add(super::signin::SIGNED_IN_SECONDS * 1000);
        let record = Record { kind: RecordKind::InboxSession, key: key.clone(), value, expires_ms };
        match store.claim_record(&record, now).await {
            Ok(true) => return Ok(format!("{key}.{}", hex(&secret))),
            // Another sign-in of the identity took the slot first: look again.
            Ok(false) => {}
            Err(error) => {
                tracing::error!("the inbox could not keep a sign-in in the session store: {error}");
                return Err(());
            }
        }
    }
    Err(())
}

/// The slot a new session of the identity takes: the first free one (`false`), or the
/// one of its oldest live session (`true`).
async fn choose_slot(inbox: &Inbox, identity_key: &IdentityKey, now: u64) -> Result<(u8, bool), ()> {
    let mut oldest: Option<(u64, u8)> = None;
    for slot in 0..MAX_SESSIONS_PER_IDENTITY {
        let key = identity_key.slot_key(slot);
        match inbox.server.store.read_record(RecordKind::InboxSession, &key, now).await {
            Ok(None) => return Ok((slot, false)),
            Ok(Some(kept)) => {
                // A record that does not read counts as the oldest.
                let issued = serde_json::from_slice::<InboxSession>(&kept).map_or(0, |session| session.issued_ms);
                if oldest.is_none_or(|(at, _)| issued < at) {
                    oldest = Some((issued, slot));
                }
            }
            Err(error) => {
                tracing::error!("the inbox could not read an identity's sign-ins from the session store: {error}");
                return Err(());
            }
        }
    }
    oldest.map(|(_, slot)| (slot, true)).ok_or(())
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

    #[test]
    fn a_provider_identity_key_depends_on_the_secret_the_issuer_the_client_the_policy_and_the_identity() {
        let key = |secret: &[u8], issuer: &str, client: &str, identity: &str| {
            IdentityKey::of_provider(identity, (secret, issuer, client, "policy")).slot_key(0)
        };
        let narrowed = IdentityKey::of_provider(
            "lead@fernhill.example",
            (b"secret", "https://login.example", "inbox", "another policy"),
        );
        let base = key(b"secret", "https://login.example", "inbox", "lead@fernhill.example");
        assert_eq!(base, key(b"secret", "https://login.example", "inbox", "lead@fernhill.example"));
        assert_ne!(base, key(b"rotated", "https://login.example", "inbox", "lead@fernhill.example"));
        assert_ne!(base, key(b"secret", "https://other.example", "inbox", "lead@fernhill.example"));
        assert_ne!(base, key(b"secret", "https://login.example", "inbox-2", "lead@fernhill.example"));
        assert_ne!(base, key(b"secret", "https://login.example", "inbox", "care@fernhill.example"));
        assert_ne!(base, narrowed.slot_key(0), "who the settings let in");
        // Nor is it the key of a token identity of the same name.
        let token = IdentityKey::of("lead@fernhill.example", &[[1u8; 32]]).expect("a key");
        assert_ne!(base, token.slot_key(0));
        // A record of the old shape (no method) reads as a token sign-in.
        let old = r#"{"identity":"x","slot":0,"issuedMs":1,"tokenMac":"ab","secretMac":"cd"}"#;
        let read: InboxSession = serde_json::from_str(old).expect("an old record");
        assert_eq!(read.method, SignInMethod::Token);
    }
}
