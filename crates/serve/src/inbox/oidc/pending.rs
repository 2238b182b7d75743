//! A sign-in through the provider while it is under way: its `state`, the nonce and PKCE
//! verifier derived from it, and the sealed cookie that holds it in the browser that
//! started it, so starting a sign-in costs the shared store nothing.
//!
//! `state` is a timed token ([`crate::inbox::timed`]), its MAC under a key derived from the
//! client secret ([`Provider::flow_mac`]): a state this deployment did not make, or one
//! older than [`PENDING_SECONDS`], is refused. The nonce and the PKCE verifier are MACs
//! of the state under that key, so neither is written anywhere (not in the cookie, not
//! in the store): any runner of the deployment recomputes them, and nobody without the
//! client secret can. The cookie ([`PendingSignIn::cookie_value`]) carries the state and
//! the path to return to, under one more MAC of that key, so any runner verifies it and
//! nobody can change where the browser goes afterwards.
//!
//! The one thing to know: the callback takes only the state its own browser's cookie
//! holds, and clears that cookie whatever happens, so a link carrying someone else's code
//! and state does not sign the clicker in as that someone, and a browser uses its sign-in
//! once; the provider, for its part, redeems an authorization code once.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use subtle::ConstantTimeEq;

use super::provider::Provider;
use crate::inbox::timed;
use archmax_program::hex::hex;

/// How long a sign-in through the provider may take, in seconds.
pub const PENDING_SECONDS: u64 = 600;
/// How far in the future a state's issue time may lie (another runner's clock).
const SKEW_SECONDS: u64 = 60;

/// A sign-in under way, as its browser's cookie holds it.
#[derive(Debug, PartialEq, Eq)]
pub struct PendingSignIn {
    /// The `state` sent to the provider (it carries its issue time under its MAC).
    pub state: String,
    /// The inbox path to open once signed in.
    pub return_to: String,
}

/// Why a callback's state, or the cookie beside it, is not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum PendingRefusal {
    /// The state is not one this deployment made.
    Foreign,
    /// The state was made more than [`PENDING_SECONDS`] ago.
    Expired,
    /// The browser holds no sign-in under way, or one for another state (started in
    /// another browser, already completed, or its cookie lost).
    NotThisBrowser,
    /// The browser's cookie is not one this deployment sealed (altered or forged).
    Tampered,
}

impl PendingSignIn {
    /// A fresh sign-in issued at `now_seconds`, returning to `wanted` when that is a path
    /// of this inbox ([`return_path`]); `None` without a random source.
    pub fn start(provider: &Provider, now_seconds: u64, wanted: Option<&str>) -> Option<PendingSignIn> {
        let mut random = [0u8; 16];
        if !crate::inbox::signin::random_bytes(&mut random) {
            return None;
        }
        let state = timed::issue(&hex(&random), now_seconds, |signed| provider.flow_mac("state", signed));
        Some(PendingSignIn { state, return_to: return_path(wanted) })
    }

    /// The nonce the ID token of this sign-in must carry.
    pub fn nonce(&self, provider: &Provider) -> String {
        provider.flow_mac("nonce", self.state.as_bytes())
    }

    /// The PKCE verifier of this sign-in (64 hex digits: within RFC 7636's alphabet and
    /// length).
    pub fn verifier(&self, provider: &Provider) -> String {
        provider.flow_mac("pkce", self.state.as_bytes())
    }

    /// The cookie's value: `<state>.<return path, base64url>.<mac>`.
    pub fn cookie_value(&self, provider: &Provider) -> String {
        let sealed = format!("{}.{}", self.state, URL_SAFE_NO_PAD.encode(self.return_to.as_bytes()));
        format!("{sealed}.{}", provider.flow_mac("pending-cookie", sealed.as_bytes()))
    }

    /// The sign-in the callback of `state` completes, from its browser's `cookie`, at
    /// `now_seconds`.
    pub fn taken(
        provider: &Provider,
        state: &str,
        cookie: Option<&str>,
        now_seconds: u64,
    ) -> Result<PendingSignIn, PendingRefusal> {
        check_state(provider, state, now_seconds)?;
        let cookie = cookie.ok_or(PendingRefusal::NotThisBrowser)?;
        let (sealed, mac) = cookie.rsplit_once('.').ok_or(PendingRefusal::Tampered)?;
        let expected = provider.flow_mac("pending-cookie", sealed.as_bytes());
        if !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
            return Err(PendingRefusal::Tampered);
        }
        let (held, return_to) = sealed.rsplit_once('.').ok_or(PendingRefusal::Tampered)?;
        if !bool::from(held.as_bytes().ct_eq(state.as_bytes())) {
            return Err(PendingRefusal::NotThisBrowser);
        }
        let return_to = URL_SAFE_NO_PAD.decode(return_to).ok().and_then(|bytes| String::from_utf8(bytes).ok());
        let return_to = return_to.ok_or(PendingRefusal::Tampered)?;
        Ok(PendingSignIn { state: state.to_string(), return_to: return_path(Some(&return_to)) })
    }
}

/// Whether `state` is one this deployment made no more than [`PENDING_SECONDS`] before
/// `now_seconds`.
fn check_state(provider: &Provider, state: &str, now_seconds: u64) -> Result<(), PendingRefusal> {
    let lifetime = timed::Lifetime { seconds: PENDING_SECONDS, skew: SKEW_SECONDS };
    let verifies =
        |signed: &[u8], mac: &str| bool::from(provider.flow_mac("state", signed).as_bytes().ct_eq(mac.as_bytes()));
    match timed::check(state, now_seconds, lifetime, verifies) {
        Ok(_) => Ok(()),
        Err(timed::Refusal::Foreign) => Err(PendingRefusal::Foreign),
        Err(timed::Refusal::Expired) => Err(PendingRefusal::Expired),
    }
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
    use archmax_config::settings::oidc::OidcSettings;

    fn provider(secret: &str) -> Provider {
        let settings = OidcSettings {
            issuer: "https://login.fernhill.example".into(),
            client_id: "inbox".into(),
            client_secret_env: "SECRET".into(),
            allowed_domains: vec!["fernhill.example".into()],
            allowed_groups: vec![],
            groups_claim: "groups".into(),
            identity_claim: "email".into(),
            scopes: vec![],
            grant_scopes: vec!["read".into()],
            provider_name: "SSO".into(),
            redirect_url: None,
            trust_unverified_email: false,
        };
        Provider::configure(&settings, Some("https://inbox.example"), |_| Some(secret.into())).expect("configured")
    }

    const ISSUED: u64 = 1_741_435_200;

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
    fn the_cookie_any_runner_of_the_deployment_sealed_gives_back_its_sign_in_within_ten_minutes() {
        let (runner, other_runner) = (provider("secret"), provider("secret"));
        let started = PendingSignIn::start(&runner, ISSUED, Some("/sessions/pay-1")).expect("a random source");
        let cookie = started.cookie_value(&runner);
        for now in [ISSUED, ISSUED + PENDING_SECONDS] {
            let taken = PendingSignIn::taken(&other_runner, &started.state, Some(&cookie), now);
            assert_eq!(taken.as_ref(), Ok(&started), "at {now}");
        }
        assert_eq!(started.nonce(&runner), started.nonce(&other_runner), "recomputed, not kept");
        assert_eq!(started.verifier(&runner), started.verifier(&other_runner));
        assert_ne!(started.nonce(&runner), started.verifier(&runner));
        assert!(!cookie.contains(&started.verifier(&runner)) && !cookie.contains(&started.nonce(&runner)));
        let late = PendingSignIn::taken(&runner, &started.state, Some(&cookie), ISSUED + PENDING_SECONDS + 1);
        assert_eq!(late, Err(PendingRefusal::Expired));
    }

    #[test]
    fn a_cookie_altered_forged_missing_or_of_another_sign_in_is_refused() {
        let runner = provider("secret");
        let started = PendingSignIn::start(&runner, ISSUED, Some("/sessions/pay-1")).expect("a random source");
        let cookie = started.cookie_value(&runner);
        let taken = |state: &str, cookie: Option<&str>| PendingSignIn::taken(&runner, state, cookie, ISSUED);
        assert_eq!(taken(&started.state, None), Err(PendingRefusal::NotThisBrowser), "no cookie");
        let other = PendingSignIn::start(&runner, ISSUED, None).expect("a random source");
        let other_cookie = other.cookie_value(&runner);
        assert_eq!(taken(&started.state, Some(&other_cookie)), Err(PendingRefusal::NotThisBrowser), "another's");
        // Where to go afterwards is sealed: another path breaks the cookie.
        let (sealed, mac) = cookie.rsplit_once('.').expect("a mac");
        let (state, _) = sealed.rsplit_once('.').expect("a path");
        let moved = format!("{state}.{}.{mac}", URL_SAFE_NO_PAD.encode("/sessions/other"));
        assert_eq!(taken(&started.state, Some(&moved)), Err(PendingRefusal::Tampered));
        assert_eq!(
            taken(&started.state, Some(&format!("{sealed}.{}", "00".repeat(32)))),
            Err(PendingRefusal::Tampered)
        );
        assert_eq!(taken(&started.state, Some("junk")), Err(PendingRefusal::Tampered));
        // Sealed by a deployment with another client secret: neither its state nor its
        // cookie is taken here.
        let foreign = provider("another secret");
        let elsewhere = PendingSignIn::start(&foreign, ISSUED, None).expect("a random source");
        let foreign_cookie = elsewhere.cookie_value(&foreign);
        assert_eq!(taken(&elsewhere.state, Some(&foreign_cookie)), Err(PendingRefusal::Foreign));
        assert_eq!(taken(&started.state, Some(&foreign_cookie)), Err(PendingRefusal::Tampered));
    }
}
