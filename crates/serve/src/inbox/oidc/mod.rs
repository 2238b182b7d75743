//! Signing in to the inbox through an OpenID Connect provider (`[inbox.oidc]`), beside
//! the token form.
//!
//! ```text
//! GET /inbox/oidc/start?return=/path   a state (and its cookie and record), then 303 to the provider
//! GET /inbox/oidc/callback?code&state  the state checked and taken, the code redeemed with PKCE,
//!                                      the ID token and its claims checked, an inbox session kept
//! ```
//!
//! The code flow with PKCE (S256), `state` and `nonce`; how a sign-in under way is kept
//! so that the callback may land on any runner is [`pending`]'s business, the provider
//! and the checks of the ID token [`provider`]'s, who the claims let in [`claims`]'s. A
//! person let in gets the same server-side inbox session a token sign-in gets (slot,
//! cookie, CSRF, sign-out), bound under a key derived from the client secret
//! ([`IdentityKey::of_provider`]), and holds `grant_scopes`.
//!
//! The one thing to know: the callback answers with a page that moves on to the inbox
//! (a `<meta http-equiv="refresh">` and a link) instead of a redirect: the browser
//! arrived from the provider's site, and on that cross-site redirect chain it would not
//! send the `SameSite=Strict` session cookie it was just given. Every refusal is a page
//! naming what was wrong in this inbox's own words; nothing of the token is shown.

pub mod claims;
mod http;
mod pending;
pub mod provider;

use std::sync::Arc;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use archmax_program::hex::hex;
use archmax_vm::session::records::{Record, RecordKind};

use super::render;
use super::session_record::{IdentityKey, SignInMethod};
use super::signin::{client_of, cookie, open_session, over_https, store_unavailable_page, throttled};
use super::{Inbox, Shared};
use crate::auth::Scope;
use crate::server::Server;
use claims::ClaimsRefusal;
pub use provider::Provider;
use provider::ProviderRefusal;

impl Provider {
    /// A MAC of `value` for `purpose` under the deployment's flow key (derived from the
    /// client secret, the issuer and the client id), as hex.
    pub(super) fn flow_mac(&self, purpose: &str, value: &[u8]) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.secret()) else {
            unreachable!("HMAC accepts keys of every length")
        };
        mac.update(b"archmax inbox provider flow\0");
        for part in [self.settings.issuer.as_bytes(), self.settings.client_id.as_bytes(), purpose.as_bytes(), value] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        hex(&mac.finalize().into_bytes())
    }

    /// The key `identity`'s provider sign-ins are bound with. It covers who the settings
    /// let in, so a runner started with narrower `allowed_domains` or `allowed_groups`
    /// (or other claims) no longer honours a sign-in an earlier policy admitted.
    pub(super) fn identity_key(&self, identity: &str) -> IdentityKey {
        let settings = &self.settings;
        let policy = serde_json::json!({
            "domains": settings.allowed_domains,
            "groups": settings.allowed_groups,
            "identity": settings.identity_claim,
            "groupsClaim": settings.groups_claim,
            "trustUnverifiedEmail": settings.trust_unverified_email,
            "grant": settings.grant_scopes,
        })
        .to_string();
        IdentityKey::of_provider(identity, (self.secret(), &settings.issuer, &settings.client_id, &policy))
    }

    /// The runner scopes a provider sign-in holds.
    pub(super) fn grant_scopes(&self) -> Vec<Scope> {
        Scope::ALL
            .into_iter()
            .filter(|scope| *scope != Scope::Admin && self.settings.grant_scopes.iter().any(|s| s == scope.as_str()))
            .collect()
    }
}

impl Server {
    /// Lets people sign in to the inbox through `provider` (`[inbox.oidc]`).
    pub fn with_oidc(mut self, provider: Provider) -> Server {
        self.oidc = Some(Arc::new(provider));
        self
    }
}

/// Why a sign-in through the provider was refused.
#[derive(Debug)]
enum Refusal {
    Foreign,
    Expired,
    Used,
    OtherBrowser,
    Denied,
    NoCode,
    Provider(ProviderRefusal),
    Claims(ClaimsRefusal),
}

impl Refusal {
    /// Whether the refusal counts against the client's failed sign-ins: only one made
    /// after the provider redeemed the code, and not the provider being unreachable.
    fn counts(&self) -> bool {
        match self {
            Refusal::Foreign
            | Refusal::Expired
            | Refusal::Used
            | Refusal::OtherBrowser
            | Refusal::Denied
            | Refusal::NoCode
            | Refusal::Provider(ProviderRefusal::Unreachable) => false,
            Refusal::Provider(_) | Refusal::Claims(_) => true,
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Refusal::Provider(ProviderRefusal::Unreachable) => StatusCode::BAD_GATEWAY,
            Refusal::Foreign | Refusal::NoCode => StatusCode::BAD_REQUEST,
            _ => StatusCode::FORBIDDEN,
        }
    }

    /// What the page says, in the inbox's own words (`claim`: the identity claim's name).
    fn message(&self, claim: &str) -> String {
        let token = |why: &str| format!("The provider's ID token was refused: {why}.");
        match self {
            Refusal::Foreign => "This sign-in was not started by this inbox.".into(),
            Refusal::Expired => format!("This sign-in took longer than {} minutes.", pending::PENDING_SECONDS / 60),
            Refusal::Used => "This sign-in was already completed or given up; each one is used once.".into(),
            Refusal::OtherBrowser => "This sign-in was started in another browser, or this browser lost its sign-in cookie.".into(),
            Refusal::Denied => "The provider did not sign you in.".into(),
            Refusal::NoCode => "The provider sent no authorization code back.".into(),
            Refusal::Provider(refusal) => match refusal {
                ProviderRefusal::Unreachable => "The sign-in provider cannot be reached right now; the runner's log says why.".into(),
                ProviderRefusal::CodeRefused => "The provider refused to complete this sign-in: its code was used before, expired, or does not belong to this sign-in.".into(),
                ProviderRefusal::NoIdToken => "The provider answered without an ID token.".into(),
                ProviderRefusal::Signature => token("its signature is not by a key the provider publishes"),
                ProviderRefusal::Issuer => token("it was issued by another issuer than the one configured"),
                ProviderRefusal::Audience => token("it was issued for another client"),
                ProviderRefusal::Expired => token("it has expired"),
                ProviderRefusal::Nonce => token("its nonce does not belong to this sign-in"),
                ProviderRefusal::AccessTokenHash => token("its at_hash does not match the access token"),
                ProviderRefusal::Malformed => token("it is malformed"),
            },
            Refusal::Claims(ClaimsRefusal::NoIdentity) => {
                format!("The provider's ID token carries no usable `{claim}` claim, which this inbox knows people by.")
            }
            Refusal::Claims(ClaimsRefusal::EmailUnverified) => {
                "The provider has not verified this account's email address.".into()
            }
            Refusal::Claims(ClaimsRefusal::NotAllowed(identity)) => format!(
                "{identity} may not sign in to this inbox: neither the email domain nor any group of the account is allowed."
            ),
        }
    }

    fn page(&self, claim: &str) -> Response {
        let mut response = render::error_page(self.status(), "Sign-in refused", &self.message(claim));
        // Whatever went wrong, the sign-in under way is over.
        if let Ok(value) = HeaderValue::from_str(&state_cookie("", 0, false)) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
        response
    }
}

/// The state cookie's `Set-Cookie` value.
fn state_cookie(value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{}={value}; Path={}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}",
        pending::STATE_COOKIE,
        pending::COOKIE_PATH
    )
}

/// The value of query parameter `name`.
fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// `GET /inbox/oidc/start`: a new sign-in through the provider.
pub async fn start(
    axum::extract::State(inbox): Shared,
    extensions: axum::http::Extensions,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let Some(provider) = inbox.server.oidc.clone() else { return render::not_found_page() };
    let client = client_of(&extensions, &headers, &inbox.server.trusted_proxies);
    let attempt = match inbox.starts_per_client.attempt(&client, Instant::now()) {
        Ok(attempt) => attempt,
        Err(retry_after) => return throttled(retry_after, "This address started too many sign-ins."),
    };
    let now_ms = inbox.server.now_ms();
    let Some(state) = pending::new_state(&provider, now_ms / 1000) else { return store_unavailable_page() };
    let (nonce, verifier) = (pending::nonce_of(&provider, &state), pending::verifier_of(&provider, &state));
    let url = match provider.authorization_url(&state, &nonce, &verifier, now_ms).await {
        Ok(url) => url,
        Err(refusal) => return Refusal::Provider(refusal).page(&provider.settings.identity_claim),
    };
    let return_to = pending::return_path(query_value(uri.query(), "return").as_deref());
    let Ok(value) = serde_json::to_vec(&pending::PendingRecord { return_to }) else { return store_unavailable_page() };
    let record = Record {
        kind: RecordKind::InboxSignInPending,
        key: pending::record_key(&provider, &state),
        value,
        expires_ms: now_ms.saturating_add(pending::PENDING_SECONDS * 1000),
    };
    match inbox.server.store.claim_record(&record, now_ms).await {
        Ok(true) => {}
        Ok(false) => return store_unavailable_page(),
        Err(error) => {
            tracing::error!("the inbox could not keep a sign-in under way in the session store: {error}");
            return store_unavailable_page();
        }
    }
    attempt.keep();
    let cookie = state_cookie(&state, pending::PENDING_SECONDS, over_https(&headers));
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, url)]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `GET /inbox/oidc/callback`: the provider sends the browser back here.
///
/// A callback refused after its code was redeemed (a token or claims the inbox
/// refuses) counts against the client as a refused token does. One refused before
/// that does not ([`Refusal::counts`]): its state is MAC'd and used once, so there is
/// nothing to guess, and counting it would let any page the victim opens (an `<img>`
/// of the callback) lock their address out of both sign-ins.
pub async fn callback(
    axum::extract::State(inbox): Shared,
    extensions: axum::http::Extensions,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let Some(provider) = inbox.server.oidc.clone() else { return render::not_found_page() };
    let client = client_of(&extensions, &headers, &inbox.server.trusted_proxies);
    let attempt = match inbox.failures_per_client.attempt(&client, Instant::now()) {
        Ok(attempt) => attempt,
        Err(retry_after) => return throttled(retry_after, "This address made too many failed sign-ins."),
    };
    let claim = provider.settings.identity_claim.clone();
    let (identity, return_to) = match admitted(&inbox, &provider, uri.query(), &headers).await {
        Ok(admitted) => admitted,
        Err(Err(response)) => return *response,
        Err(Ok(refusal)) => {
            tracing::warn!(client = client.as_str(), refusal = ?refusal, "a sign-in through the provider was refused");
            if refusal.counts() {
                attempt.keep();
            }
            return refusal.page(&claim);
        }
    };
    drop(attempt);
    let identity_key = provider.identity_key(&identity);
    let kept =
        match open_session(&inbox, &identity, &identity_key, (SignInMethod::Provider, String::new()), &headers).await {
            Ok(kept) => kept,
            Err(refused) => return *refused,
        };
    let mut response = render::html_response(StatusCode::OK, render::signed_in_page(&identity, &return_to));
    for value in [kept.1, state_cookie("", 0, over_https(&headers))] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The identity the callback's code signs in, and where to go then; a refusal, or a
/// page already made (the store did not answer).
async fn admitted(
    inbox: &Inbox,
    provider: &Provider,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<(String, String), Result<Refusal, Box<Response>>> {
    let now_ms = inbox.server.now_ms();
    let state = query_value(query, "state").ok_or(Ok(Refusal::Foreign))?;
    pending::check_state(provider, &state, now_ms / 1000).map_err(|refused| {
        Ok(match refused {
            pending::StateRefusal::Foreign => Refusal::Foreign,
            pending::StateRefusal::Expired => Refusal::Expired,
        })
    })?;
    if !pending::cookie_holds(cookie(headers, pending::STATE_COOKIE), &state) {
        return Err(Ok(Refusal::OtherBrowser));
    }
    let return_to = take_pending(inbox, provider, &state, now_ms).await?;
    if query_value(query, "error").is_some() {
        return Err(Ok(Refusal::Denied));
    }
    let code = query_value(query, "code").filter(|code| !code.is_empty()).ok_or(Ok(Refusal::NoCode))?;
    let (nonce, verifier) = (pending::nonce_of(provider, &state), pending::verifier_of(provider, &state));
    let claims =
        provider.redeem(&code, &verifier, &nonce, now_ms).await.map_err(|refused| Ok(Refusal::Provider(refused)))?;
    let identity = claims::admit(&provider.settings, &claims).map_err(|refused| Ok(Refusal::Claims(refused)))?;
    Ok((identity, return_to))
}

/// Takes the record of `state` from the store (read, then removed: of two callbacks
/// with one state, one removes it): where to go once signed in.
async fn take_pending(
    inbox: &Inbox,
    provider: &Provider,
    state: &str,
    now_ms: u64,
) -> Result<String, Result<Refusal, Box<Response>>> {
    let store = &inbox.server.store;
    let key = pending::record_key(provider, state);
    let unavailable = |error: archmax_vm::session::StoreError| {
        tracing::error!("the inbox could not read a sign-in under way from the session store: {error}");
        Err(Box::new(store_unavailable_page()))
    };
    let kept = match store.read_record(RecordKind::InboxSignInPending, &key, now_ms).await {
        Ok(Some(kept)) => kept,
        Ok(None) => return Err(Ok(Refusal::Used)),
        Err(error) => return Err(unavailable(error)),
    };
    match store.remove_record(RecordKind::InboxSignInPending, &key).await {
        Ok(true) => {}
        Ok(false) => return Err(Ok(Refusal::Used)),
        Err(error) => return Err(unavailable(error)),
    }
    let record: pending::PendingRecord = serde_json::from_slice(&kept).map_err(|_| Ok(Refusal::Used))?;
    Ok(pending::return_path(Some(&record.return_to)))
}
