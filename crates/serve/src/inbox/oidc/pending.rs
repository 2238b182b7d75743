//! A sign-in through the provider while it is under way: its `state`, the nonce and PKCE
//! verifier derived from it, the browser cookie that binds it, and the single-use record
//! every runner on the store can take.
//!
//! `state` is `<random>.<issued second>.<mac>`, the MAC under a key derived from the
//! client secret ([`Provider::flow_mac`]): a state this deployment did not make, or one
//! older than [`PENDING_SECONDS`], is refused before the store is asked. The nonce and
//! the PKCE verifier are MACs of the state under that key, so neither is kept anywhere
//! and any runner recomputes them. The record (`RecordKind::InboxSignInPending`, keyed by
//! another MAC of the state) holds only where to go afterwards; it expires with the state
//! and is removed by the callback that takes it, so a state (and the code that came with
//! it) is used once.
//!
//! The one thing to know: the state also sits in a cookie (`SameSite=Lax`, so the
//! provider's redirect back carries it; `HttpOnly`, path `/inbox/oidc`), and the callback
//! takes only the state its own browser started: a link carrying someone else's code and
//! state does not sign the clicker in as that someone.

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::provider::Provider;
use archmax_program::hex::hex;

/// How long a sign-in through the provider may take, in seconds.
pub const PENDING_SECONDS: u64 = 600;
/// How far in the future a state's issue time may lie (another runner's clock).
const SKEW_SECONDS: u64 = 60;
/// The cookie that binds a sign-in under way to its browser.
pub const STATE_COOKIE: &str = "archmax_oidc";
/// The path the state cookie is sent to.
pub const COOKIE_PATH: &str = "/inbox/oidc";

/// What the store keeps of a sign-in under way.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingRecord {
    /// The inbox path to open once signed in.
    pub return_to: String,
}

/// Why a `state` is not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum StateRefusal {
    /// Not one this deployment made.
    Foreign,
    /// Made more than [`PENDING_SECONDS`] ago.
    Expired,
}

/// A fresh state issued at `now_seconds`; `None` without a random source.
pub fn new_state(provider: &Provider, now_seconds: u64) -> Option<String> {
    let mut random = [0u8; 16];
    if !crate::inbox::signin::random_bytes(&mut random) {
        return None;
    }
    let signed = format!("{}.{now_seconds}", hex(&random));
    Some(format!("{signed}.{}", provider.flow_mac("state", signed.as_bytes())))
}

/// Whether `state` is one this deployment made no more than [`PENDING_SECONDS`] before
/// `now_seconds`.
pub fn check_state(provider: &Provider, state: &str, now_seconds: u64) -> Result<(), StateRefusal> {
    let (signed, mac) = state.rsplit_once('.').ok_or(StateRefusal::Foreign)?;
    let (random, issued) = signed.split_once('.').ok_or(StateRefusal::Foreign)?;
    let expected = provider.flow_mac("state", signed.as_bytes());
    if random.len() != 32 || !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
        return Err(StateRefusal::Foreign);
    }
    let issued: u64 = issued.parse().map_err(|_| StateRefusal::Foreign)?;
    let fresh = now_seconds.saturating_sub(issued) <= PENDING_SECONDS && issued <= now_seconds + SKEW_SECONDS;
    if fresh { Ok(()) } else { Err(StateRefusal::Expired) }
}

/// The nonce the ID token of `state`'s sign-in must carry.
pub fn nonce_of(provider: &Provider, state: &str) -> String {
    provider.flow_mac("nonce", state.as_bytes())
}

/// The PKCE verifier of `state`'s sign-in (64 hex digits: within RFC 7636's alphabet
/// and length).
pub fn verifier_of(provider: &Provider, state: &str) -> String {
    provider.flow_mac("pkce", state.as_bytes())
}

/// The store key of `state`'s record.
pub fn record_key(provider: &Provider, state: &str) -> String {
    provider.flow_mac("pending", state.as_bytes())
}

/// Whether the browser's state cookie holds `state` (constant time).
pub fn cookie_holds(cookie: Option<&str>, state: &str) -> bool {
    cookie.is_some_and(|held| bool::from(held.as_bytes().ct_eq(state.as_bytes())))
}

/// `wanted` when it is a path of this inbox to return to (`/`, or `/…` that is not
/// `//…`, without a backslash or control character, at most 512 bytes), else `/`.
pub fn return_path(wanted: Option<&str>) -> String {
    match wanted {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && path.len() <= 512
                && !path.contains('\\')
                && !path.chars().any(char::is_control) =>
        {
            path.to_string()
        }
        _ => "/".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_path_of_this_inbox_is_returned_to() {
        for (wanted, path) in [
            (Some("/sessions/pay-1"), "/sessions/pay-1"),
            (Some("/?view=mine"), "/?view=mine"),
            (Some("//evil.example/x"), "/"),
            (Some("https://evil.example"), "/"),
            (Some("/\\evil.example"), "/"),
            (Some("/a\nb"), "/"),
            (None, "/"),
        ] {
            assert_eq!(return_path(wanted), path, "{wanted:?}");
        }
    }

    #[test]
    fn the_state_cookie_must_hold_the_very_state() {
        assert!(cookie_holds(Some("a.1.b"), "a.1.b"));
        assert!(!cookie_holds(Some("a.1.c"), "a.1.b"));
        assert!(!cookie_holds(None, "a.1.b"));
    }
}
