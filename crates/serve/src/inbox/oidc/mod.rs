//! Signing in to the inbox through an OpenID Connect provider (`[inbox.oidc]`), beside
//! the token form.
//!
//! ```text
//! GET /inbox/oidc/start?return=/path   a state in a sealed cookie (nothing stored), then 303 to the provider
//! GET /inbox/oidc/callback?code&state  the state checked against the cookie (then cleared), the code
//!                                      redeemed with PKCE, the ID token and its claims checked,
//!                                      an inbox session kept
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

use super::cookies::InboxCookie;
use super::render;
use super::session_record::{IdentityKey, SignInMethod};
use super::signin::{open_session, throttled};
use super::{Inbox, Shared};
use crate::auth::Scope;
use crate::clients::client_of;
use crate::server::Server;
use claims::ClaimsRefusal;
use pending::{PendingRefusal, PendingSignIn};
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
    OtherBrowser,
    Tampered,
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
            | Refusal::OtherBrowser
            | Refusal::Tampered
            | Refusal::Denied
            | Refusal::NoCode
            | Refusal::Provider(ProviderRefusal::Unreachable { .. }) => false,
            Refusal::Provider(_) | Refusal::Claims(_) => true,
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Refusal::Provider(ProviderRefusal::Unreachable { .. }) => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::Foreign | Refusal::NoCode => StatusCode::BAD_REQUEST,
            _ => StatusCode::FORBIDDEN,
        }
    }

    /// What the page says, in the inbox's own words (`claim`: the identity claim's name).
    fn message(&self, claim: &str) -> String {
        let token = |why: &str| format!("The provider's ID token was refused: {why}.");
        match self {
            Refusal::Foreign => format!("This sign-in was not started by this inbox. {START_AGAIN}"),
            Refusal::Expired => {
                format!("This sign-in took longer than {} minutes. {START_AGAIN}", pending::PENDING_SECONDS / 60)
            }
            Refusal::OtherBrowser => format!(
                "This browser holds no sign-in under way for this link: it was already completed, started in another browser, or this browser lost its sign-in cookie. {START_AGAIN}"
            ),
            Refusal::Tampered => {
                format!("This browser's sign-in cookie was altered, or was not made by this inbox. {START_AGAIN}")
            }
            Refusal::Denied => "The provider did not sign you in.".into(),
            Refusal::NoCode => "The provider sent no authorization code back.".into(),
            Refusal::Provider(refusal) => match refusal {
                ProviderRefusal::Unreachable { retry_in_seconds } => render::provider_unreachable(*retry_in_seconds),
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

    /// The refusal's page to the request with `headers`.
    fn page(&self, claim: &str, headers: &HeaderMap) -> Response {
        let mut response = render::error_page(self.status(), "Sign-in refused", &self.message(claim));
        // Whatever went wrong, the sign-in under way is over.
        InboxCookie::PendingSignIn.clear(&mut response, headers);
        if let Refusal::Provider(ProviderRefusal::Unreachable { retry_in_seconds }) = self
            && let Ok(value) = HeaderValue::from_str(&retry_in_seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

/// What a refusal before the provider was asked tells the person to do.
const START_AGAIN: &str = "Start signing in again from the sign-in page.";

/// The value of query parameter `name`.
fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// `GET /inbox/oidc/start`: a new sign-in through the provider, held by the browser's
/// sealed cookie ([`pending`]); nothing is written to the store.
pub async fn start(axum::extract::State(inbox): Shared, uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let Some(provider) = inbox.server.oidc.clone() else { return render::not_found_page() };
    let now_ms = inbox.server.now_ms();
    let wanted = query_value(uri.query(), "return");
    let Some(pending) = PendingSignIn::start(&provider, now_ms / 1000, wanted.as_deref()) else {
        return no_random_source_page();
    };
    let url = match provider
        .authorization_url(&pending.state, &pending.nonce(&provider), &pending.verifier(&provider), now_ms)
        .await
    {
        Ok(url) => url,
        Err(refusal) => return Refusal::Provider(refusal).page(&provider.settings.identity_claim, &headers),
    };
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, url)]).into_response();
    InboxCookie::PendingSignIn.append(
        &mut response,
        &pending.cookie_value(&provider),
        pending::PENDING_SECONDS,
        &headers,
    );
    response
}

/// The page of a start that found no random source to make a state with.
fn no_random_source_page() -> Response {
    tracing::error!("the inbox found no random source to start a sign-in through the provider with");
    render::error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in unavailable",
        "The runner could not start a sign-in right now; the runner's log says why. Try again shortly.",
    )
}

/// `GET /inbox/oidc/callback`: the provider sends the browser back here.
///
/// A callback refused after its code was redeemed (a token or claims the inbox
/// refuses) counts against the client as a refused token does. One refused before
/// that does not ([`Refusal::counts`]): its state and cookie are MAC'd, so there is
/// nothing to guess, and counting it would let any page the victim opens (an `<img>`
/// of the callback) lock their address out of both sign-ins. Whatever the outcome, the
/// browser's sign-in under way is cleared: it is used once.
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
        Err(refusal) => {
            tracing::warn!(client = client.as_str(), refusal = ?refusal, "a sign-in through the provider was refused");
            if refusal.counts() {
                attempt.keep();
            }
            return refusal.page(&claim, &headers);
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
    if let Ok(value) = HeaderValue::from_str(&kept) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    InboxCookie::PendingSignIn.clear(&mut response, &headers);
    response
}

/// The identity the callback's code signs in, and where to go then; or a refusal.
async fn admitted(
    inbox: &Inbox,
    provider: &Provider,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<(String, String), Refusal> {
    let now_ms = inbox.server.now_ms();
    let state = query_value(query, "state").ok_or(Refusal::Foreign)?;
    let cookie = InboxCookie::PendingSignIn.read(headers);
    let pending = PendingSignIn::taken(provider, &state, cookie, now_ms / 1000).map_err(|refused| match refused {
        PendingRefusal::Foreign => Refusal::Foreign,
        PendingRefusal::Expired => Refusal::Expired,
        PendingRefusal::NotThisBrowser => Refusal::OtherBrowser,
        PendingRefusal::Tampered => Refusal::Tampered,
    })?;
    if query_value(query, "error").is_some() {
        return Err(Refusal::Denied);
    }
    let code = query_value(query, "code").filter(|code| !code.is_empty()).ok_or(Refusal::NoCode)?;
    let (nonce, verifier) = (pending.nonce(provider), pending.verifier(provider));
    let claims = provider.redeem(&code, &verifier, &nonce, now_ms).await.map_err(Refusal::Provider)?;
    let identity = claims::admit(&provider.settings, &claims).map_err(Refusal::Claims)?;
    Ok((identity, pending.return_to))
}
