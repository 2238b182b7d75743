//! Signing in with the runner's tokens, the inbox sessions it starts, and the CSRF
//! tokens of every form.
//!
//! A person pastes a token the runner accepts (`ARCHMAX_SERVE_TOKEN` or a `--tokens`
//! entry); it is checked like a bearer token, and an inbox session is kept in the session
//! store as a shared record ([`RecordKind::InboxSession`]) that lives 12 hours, in one of
//! the identity's [`MAX_SESSIONS_PER_IDENTITY`] slots: a sign-in past them ends the
//! identity's oldest session, so a few identities cannot fill the store's capacity. How
//! the record is keyed and bound so that a reader or writer of the store cannot turn it
//! into a sign-in is [`super::session_record`]'s business. The session cookie
//! ([`InboxCookie::Session`]: `__Host-archmax_inbox` over HTTPS, `archmax_inbox` on plain
//! HTTP; see [`super::cookies`]) holds the
//! record's key and a random secret the record holds only a MAC of. Every runner on the
//! store serves the session; signing out removes the record (the old cookie is then
//! refused everywhere); a token removed from the configuration ends its sessions at the
//! next request, since each request derives the identity's key from the tokens served.
//! A form's CSRF token is an HMAC under the session's key; the sign-in form's is bound to
//! a signed nonce and its issue time in a short-lived cookie, under a key every runner
//! reads from the store ([`RecordKind::InboxKey`]), and a form older than
//! [`SIGN_IN_FORM_SECONDS`] is refused by the server, whatever the browser kept. On a POST
//! the cookie (or the sign-in nonce) and the origin are checked before the body is read.
//! Sign-in is throttled per client (IPv4 address or IPv6 /64) and per identity
//! ([`super::throttle`]).
//!
//! The one thing to know: with no token configured the runner is open to local programs
//! only and refuses requests from web pages, so the inbox asks for a token to be
//! configured instead of serving anyone.

use std::time::Instant;

use axum::body::Body;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use archmax_program::hex::{decode, hex};
use archmax_vm::session::records::{Record, RecordKind};

use super::cookies::InboxCookie;
use super::render::{self, Notice};
use super::session_record::{IdentityKey, InboxSession, MAX_SESSIONS_PER_IDENTITY, SignInMethod, start_session};
use super::{Inbox, Shared, forms::Form, timed};
use crate::auth::{Caller, Scope};
use crate::clients::client_of;

/// How long a sign-in lasts, in seconds (12 hours).
pub(super) const SIGNED_IN_SECONDS: u64 = 12 * 60 * 60;
/// How long the sign-in form stays valid, in seconds: the cookie's `Max-Age`, and the
/// age past which the server refuses it.
pub const SIGN_IN_FORM_SECONDS: u64 = 600;
/// How far in the future a sign-in form's issue time may lie (another runner's clock).
const SIGN_IN_FORM_SKEW_SECONDS: u64 = 60;
/// How long the shared sign-in form key is used before a new one is made (a week).
const SIGN_IN_KEY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// The record key of the shared sign-in form key.
const SIGN_IN_KEY: &str = "sign-in-form";

/// A key CSRF tokens are derived from (one SHA-256 block: HMAC takes it as it is).
pub struct Secret([u8; 64]);

/// Fills `bytes` from the operating system's random source; `false` when there is none.
pub(super) fn random_bytes(bytes: &mut [u8]) -> bool {
    getrandom::fill(bytes).is_ok()
}

impl Secret {
    /// A fresh key from the operating system's random source; `None` without one.
    pub fn random() -> Option<Secret> {
        let mut key = [0u8; 64];
        random_bytes(&mut key).then_some(Secret(key))
    }

    /// The key held in `bytes` (64 bytes; anything else is no key).
    fn from_bytes(bytes: &[u8]) -> Option<Secret> {
        Some(Secret(bytes.try_into().ok()?))
    }

    /// The key made of `bytes`.
    pub(super) fn from_array(bytes: [u8; 64]) -> Secret {
        Secret(bytes)
    }

    fn mac(&self, purpose: &str, value: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new((&self.0).into());
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value);
        mac
    }

    /// The CSRF token of forms for `purpose` bound to `value`.
    pub fn token(&self, purpose: &str, value: &[u8]) -> String {
        hex(&self.mac(purpose, value).finalize().into_bytes())
    }

    /// Whether `presented` is the token for `purpose` and `value` (constant time).
    pub fn verify(&self, purpose: &str, value: &[u8], presented: &str) -> bool {
        match decode(presented) {
            Some(bytes) => self.mac(purpose, value).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }
}

/// The inbox session a browser presents: the record's key (64 hex digits) and the
/// cookie's secret (32 bytes), from `<key>.<secret hex>`.
fn presented_session(headers: &HeaderMap) -> Option<(String, Vec<u8>)> {
    let (key, secret) = InboxCookie::Session.read(headers)?.split_once('.')?;
    let key_is_digest = key.len() == 64 && key.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    let secret = decode(secret).filter(|secret| secret.len() == 32)?;
    key_is_digest.then(|| (key.to_string(), secret))
}

/// Who is signed in, with the CSRF token of their forms.
pub struct SignedIn {
    pub caller: Caller,
    pub csrf: String,
    /// What the sign-in holds: its token, or the provider's grant.
    grant: Grant,
    /// The store's key of the session.
    key: String,
    /// The session's CSRF key.
    secret: Secret,
}

/// What a signed-in person may do, by how they signed in.
enum Grant {
    /// The SHA-256 of the signed-in token, to ask the runner's auth about scopes.
    Token([u8; 32]),
    /// Signed in through the provider: the scopes `[inbox.oidc] grant_scopes` gives.
    Provider(Vec<Scope>),
}

impl Grant {
    fn holds(&self, inbox: &Inbox, scope: Scope) -> bool {
        match self {
            Grant::Token(digest) => inbox.server.auth.caller_by_digest(digest, scope).is_ok(),
            Grant::Provider(scopes) => scopes.contains(&scope),
        }
    }
}

impl SignedIn {
    /// Whether the sign-in also holds `scope`.
    pub fn holds(&self, inbox: &Inbox, scope: Scope) -> bool {
        self.grant.holds(inbox, scope)
    }
}

/// Why a request is not served as a signed-in person's.
pub enum NotSignedIn {
    /// No token is configured: the inbox is not served.
    Open,
    /// No cookie, a session that ended, or a token the runner no longer accepts.
    Anonymous,
    /// Signed in, but the token lacks the scope.
    Scope(crate::error::ApiError),
    /// The store that keeps inbox sessions did not answer.
    Unavailable,
}

impl NotSignedIn {
    /// The answer to a page request: the sign-in page, or why not.
    pub fn into_page(self) -> Response {
        match self {
            NotSignedIn::Open => open_server_page(),
            NotSignedIn::Anonymous => Redirect::to("/sign-in").into_response(),
            NotSignedIn::Scope(error) => render::error_page(error.status, "Not allowed", &error.message),
            NotSignedIn::Unavailable => store_unavailable_page(),
        }
    }
}

pub(super) fn store_unavailable_page() -> Response {
    render::error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The inbox cannot check sign-ins right now",
        "The session store did not answer; the runner's log says why. Try again shortly.",
    )
}

/// The signed-in person, when their inbox session is live and its token holds `scope`.
/// A session whose token is no longer served, or whose record does not verify under its
/// identity's key, is ended here.
pub async fn signed_in(inbox: &Inbox, headers: &HeaderMap, scope: Scope) -> Result<SignedIn, NotSignedIn> {
    if inbox.server.auth.is_open() {
        return Err(NotSignedIn::Open);
    }
    let (key, secret) = presented_session(headers).ok_or(NotSignedIn::Anonymous)?;
    let store = &inbox.server.store;
    let kept = match store.read_record(RecordKind::InboxSession, &key, inbox.server.now_ms()).await {
        Ok(Some(kept)) => kept,
        Ok(None) => return Err(NotSignedIn::Anonymous),
        Err(error) => {
            tracing::error!("the inbox could not read a sign-in from the session store: {error}");
            return Err(NotSignedIn::Unavailable);
        }
    };
    let session = serde_json::from_slice::<InboxSession>(&kept).ok();
    let verified = session.as_ref().and_then(|session| verified_record(inbox, session, &key));
    let (Some(session), Some((identity_key, grant))) = (session, verified) else {
        // A token revoked, the provider gone, or a record no runner wrote: it never
        // serves again.
        let _ = store.remove_record(RecordKind::InboxSession, &key).await;
        tracing::info!("an inbox session ended: its token is no longer served, or its record does not verify");
        return Err(NotSignedIn::Anonymous);
    };
    if !identity_key.verify_secret(&key, &secret, &session.secret_mac) {
        return Err(NotSignedIn::Anonymous);
    }
    let caller = match &grant {
        Grant::Token(token_sha256) => match inbox.server.auth.caller_by_digest(token_sha256, scope) {
            Ok(caller) => caller,
            Err(error) if error.status == StatusCode::FORBIDDEN => return Err(NotSignedIn::Scope(error)),
            Err(_) => return Err(NotSignedIn::Anonymous),
        },
        Grant::Provider(scopes) if scopes.contains(&scope) => {
            Caller { identity: session.identity.clone(), authenticated: true }
        }
        Grant::Provider(_) => return Err(NotSignedIn::Scope(crate::auth::lacks_scope(&session.identity, scope))),
    };
    let secret = identity_key.csrf_secret(&key, &secret);
    let csrf = secret.token("form", key.as_bytes());
    Ok(SignedIn { caller, csrf, grant, key, secret })
}

/// The key and grant of the record `session` at `key`, when it verifies: its slot key
/// under its identity's key, and (signed in with a token) a token still served.
fn verified_record(inbox: &Inbox, session: &InboxSession, key: &str) -> Option<(IdentityKey, Grant)> {
    let (identity_key, grant) = match session.method {
        SignInMethod::Token => {
            let digests = inbox.server.auth.digests_of(&session.identity);
            let identity_key = IdentityKey::of(&session.identity, &digests)?;
            let token = identity_key.token_of(&digests, &session.token_mac)?;
            (identity_key, Grant::Token(token))
        }
        SignInMethod::Provider => {
            let provider = inbox.server.oidc.as_ref()?;
            (provider.identity_key(&session.identity), Grant::Provider(provider.grant_scopes()))
        }
    };
    let in_its_slot = session.slot < MAX_SESSIONS_PER_IDENTITY && identity_key.slot_key(session.slot) == key;
    in_its_slot.then_some((identity_key, grant))
}

/// Whether a POST came from a page of this server: an `Origin` (or, without one,
/// `Sec-Fetch-Site`) naming another site is refused before the CSRF token is looked at.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|value| value.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

/// The refusal of a form whose `Origin` or `Sec-Fetch-Site` names another site.
fn cross_site_refused() -> Response {
    render::error_page(
        StatusCode::FORBIDDEN,
        "Form refused",
        "This form was sent from another site (the browser's Origin or Sec-Fetch-Site header says so), and the inbox takes forms only from its own pages. Open the inbox and send the form from there.",
    )
}

fn csrf_refused() -> Response {
    render::error_page(
        StatusCode::FORBIDDEN,
        "Form refused",
        "This form was not sent from a page of this inbox (its CSRF token is missing or wrong). Reload the page and send it again.",
    )
}

/// A form's body, read only after the sender was let in: too large or cut off is refused,
/// and so is one slower than the server's body timeout.
async fn read_form(inbox: &Inbox, body: Body) -> Result<Form, Box<Response>> {
    let server = &inbox.server;
    let limit = server.body_limit.min(crate::request_limits::FORM_BODY_LIMIT);
    match tokio::time::timeout(server.body_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Form::parse(&bytes).map_err(|problem| {
            Box::new(render::error_page(
                StatusCode::BAD_REQUEST,
                "Form refused",
                &format!("The form was not taken: {problem}. Reload the page and send it again."),
            ))
        }),
        Ok(Err(_)) => Err(Box::new(render::error_page(
            StatusCode::BAD_REQUEST,
            "Form refused",
            &format!(
                "The form's body could not be read: it is larger than {} KiB, or was cut off. Reload the page and send it again (a longer message goes through the API).",
                limit / 1024
            ),
        ))),
        Err(_) => Err(Box::new(render::error_page(
            StatusCode::REQUEST_TIMEOUT,
            "Form refused",
            "The form's body did not arrive in time. Send it again.",
        ))),
    }
}

/// A form sent as `multipart/form-data` (one with a file control): its text fields,
/// bounded as a plain form's body is, and its files, bounded as the API's uploads are.
async fn read_upload_form(
    inbox: &Inbox,
    headers: &HeaderMap,
    body: Body,
    (boundary, identity): (Result<String, crate::error::ApiError>, &str),
) -> Result<Form, Box<Response>> {
    let refused =
        |error: crate::error::ApiError| Box::new(render::error_page(error.status, "Form refused", &error.message));
    let layout = (boundary.map_err(refused)?, crate::routes::UploadLayout::Form);
    let text_limit = crate::request_limits::FORM_BODY_LIMIT;
    let sender = (inbox.server.as_ref(), identity);
    let upload = crate::routes::read_upload(headers, body, layout, sender, text_limit).await.map_err(refused)?;
    Ok(Form::of_parts(upload.fields, upload.files))
}

/// A POST of a signed-in person: the session and the origin are checked before the body
/// is read; then the form's CSRF token, and `scope`. Only a form that may carry files
/// (`uploads`: the deliver form) is read as `multipart/form-data`; any other form's body
/// is read as a plain form, at most [`crate::request_limits::FORM_BODY_LIMIT`].
pub async fn signed_in_post(
    inbox: &Inbox,
    headers: &HeaderMap,
    body: Body,
    (scope, uploads): (Scope, bool),
) -> Result<(Form, SignedIn), Box<Response>> {
    let signed = signed_in(inbox, headers, scope).await.map_err(|refused| Box::new(refused.into_page()))?;
    if !same_origin(headers) {
        return Err(Box::new(cross_site_refused()));
    }
    let form = match crate::routes::upload_boundary(headers).filter(|_| uploads) {
        Some(boundary) => read_upload_form(inbox, headers, body, (boundary, &signed.caller.identity)).await?,
        None => read_form(inbox, body).await?,
    };
    let presented = form.get("csrf").unwrap_or_default();
    if !signed.secret.verify("form", signed.key.as_bytes(), presented) {
        return Err(Box::new(csrf_refused()));
    }
    Ok((form, signed))
}

fn open_server_page() -> Response {
    render::error_page(
        StatusCode::FORBIDDEN,
        "The inbox needs a token",
        "No token is configured, so this server answers local programs only and no web page. Start it with ARCHMAX_SERVE_TOKEN or --tokens FILE and sign in with a token.",
    )
}

/// The key of the sign-in form's CSRF tokens, shared by every runner on the store: read
/// from it, or made and claimed there when there is none (of two runners making one at
/// once, both use the one that won).
async fn sign_in_key(inbox: &Inbox) -> Option<Secret> {
    let store = &inbox.server.store;
    let now = inbox.server.now_ms();
    for _ in 0..2 {
        match store.read_record(RecordKind::InboxKey, SIGN_IN_KEY, now).await {
            Ok(Some(bytes)) => return Secret::from_bytes(&bytes),
            Ok(None) => {}
            Err(error) => {
                tracing::error!("the inbox could not read its sign-in key from the session store: {error}");
                return None;
            }
        }
        let fresh = Secret::random()?;
        let record = Record {
            kind: RecordKind::InboxKey,
            key: SIGN_IN_KEY.to_string(),
            value: fresh.0.to_vec(),
            expires_ms: now.saturating_add(SIGN_IN_KEY_MS),
        };
        match store.claim_record(&record, now).await {
            Ok(true) => return Some(fresh),
            // Another runner made one first: read it.
            Ok(false) => {}
            Err(error) => {
                tracing::error!("the inbox could not keep its sign-in key in the session store: {error}");
                return None;
            }
        }
    }
    None
}

/// The sign-in cookie's value: a random nonce, the second it was issued and their MAC,
/// so the cookie (and its age) can be checked before a form's body is read.
fn sign_in_cookie_value(key: &Secret, nonce: &str, issued_seconds: u64) -> String {
    timed::issue(nonce, issued_seconds, |signed| key.token("sign-in-cookie", signed))
}

/// The nonce of a sign-in cookie this inbox made (its MAC checks out) no more than
/// [`SIGN_IN_FORM_SECONDS`] before `now_seconds`.
fn sign_in_nonce<'a>(key: &Secret, headers: &'a HeaderMap, now_seconds: u64) -> Result<&'a str, timed::Refusal> {
    let value = InboxCookie::SignInForm.read(headers).ok_or(timed::Refusal::Foreign)?;
    let lifetime = timed::Lifetime { seconds: SIGN_IN_FORM_SECONDS, skew: SIGN_IN_FORM_SKEW_SECONDS };
    timed::check(value, now_seconds, lifetime, |signed, mac| key.verify("sign-in-cookie", signed, mac))
}

fn sign_in_form_expired() -> Response {
    render::error_page(
        StatusCode::FORBIDDEN,
        "Sign-in form expired",
        &format!(
            "This sign-in form expired: it is valid for {} minutes. Reload the sign-in page and send it again.",
            SIGN_IN_FORM_SECONDS / 60
        ),
    )
}

/// `GET /sign-in`: the token form, its CSRF token bound to a fresh cookie.
pub async fn sign_in_page(axum::extract::State(inbox): Shared, headers: HeaderMap) -> Response {
    sign_in_form(&inbox, &headers, StatusCode::OK, None).await
}

async fn sign_in_form(inbox: &Inbox, headers: &HeaderMap, status: StatusCode, notice: Option<Notice>) -> Response {
    if inbox.server.auth.is_open() {
        return open_server_page();
    }
    let Some(key) = sign_in_key(inbox).await else { return store_unavailable_page() };
    let mut nonce = [0u8; 16];
    if !random_bytes(&mut nonce) {
        return store_unavailable_page();
    }
    let nonce = hex(&nonce);
    let csrf = key.token("sign-in", nonce.as_bytes());
    let issued_seconds = inbox.server.now_ms() / 1000;
    let value = sign_in_cookie_value(&key, &nonce, issued_seconds);
    let mut response = render::html_response(
        status,
        render::sign_in_page(
            &csrf,
            notice.as_ref(),
            inbox.server.oidc.as_ref().map(|provider| render::ProviderOffer {
                name: provider.settings.provider_name.as_str(),
                retry_in_seconds: provider.paused(inbox.server.now_ms()),
            }),
        ),
    );
    InboxCookie::SignInForm.append(&mut response, &value, SIGN_IN_FORM_SECONDS, headers);
    response
}

/// 429 with `Retry-After`: too many sign-ins.
pub(super) fn throttled(retry_after: std::time::Duration, why: &str) -> Response {
    let seconds = retry_after.as_secs().max(1);
    let mut response = render::error_page(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many sign-ins",
        &format!("{why} Try again in {seconds} seconds."),
    );
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// `POST /sign-in`: checks the token and starts an inbox session.
///
/// The attempt is counted against the client before anything else and given back unless
/// the token turns out wrong, so parallel attempts cannot all pass the throttle.
pub async fn sign_in(
    axum::extract::State(inbox): Shared,
    extensions: Extensions,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if inbox.server.auth.is_open() {
        return open_server_page();
    }
    let client = client_of(&extensions, &headers, &inbox.server.trusted_proxies);
    let attempt = match inbox.failures_per_client.attempt(&client, Instant::now()) {
        Ok(attempt) => attempt,
        Err(retry_after) => return throttled(retry_after, "This address made too many failed sign-ins."),
    };
    // Another site first: its browser never sends the `SameSite=Strict` form cookie, so
    // checked after the cookie it would be told its CSRF token was wrong.
    if !same_origin(&headers) {
        return cross_site_refused();
    }
    let Some(key) = sign_in_key(&inbox).await else { return store_unavailable_page() };
    let nonce = match sign_in_nonce(&key, &headers, inbox.server.now_ms() / 1000) {
        Ok(nonce) => nonce,
        Err(timed::Refusal::Foreign) => return csrf_refused(),
        Err(timed::Refusal::Expired) => return sign_in_form_expired(),
    };
    let form = match read_form(&inbox, body).await {
        Ok(form) => form,
        Err(refused) => return *refused,
    };
    if !key.verify("sign-in", nonce.as_bytes(), form.get("csrf").unwrap_or_default()) {
        return csrf_refused();
    }
    let token = form.get("token").unwrap_or_default().trim().to_string();
    let token_sha256: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    let caller = match inbox.server.auth.caller_by_digest(&token_sha256, Scope::Read) {
        Ok(caller) => caller,
        // A token the runner knows but that may not read is not a guess: it is not
        // counted against the client, and is answered 403.
        Err(error) if error.status == StatusCode::FORBIDDEN => {
            drop(attempt);
            tracing::warn!(client = client.as_str(), "a sign-in to the inbox with a token lacking `read` was refused");
            let why = "This token may not read sessions (it needs the `read` scope).";
            return sign_in_form(&inbox, &headers, StatusCode::FORBIDDEN, Some(Notice::error(why))).await;
        }
        Err(_) => {
            attempt.keep();
            tracing::warn!(client = client.as_str(), "a sign-in to the inbox was refused");
            let why = "The runner does not accept this token.";
            return sign_in_form(&inbox, &headers, StatusCode::UNAUTHORIZED, Some(Notice::error(why))).await;
        }
    };
    drop(attempt);
    let digests = inbox.server.auth.digests_of(&caller.identity);
    let Some(identity_key) = IdentityKey::of(&caller.identity, &digests) else { return store_unavailable_page() };
    let method = (SignInMethod::Token, identity_key.token_mac(&token_sha256));
    let kept = match open_session(&inbox, &caller.identity, &identity_key, method, &headers).await {
        Ok(kept) => kept,
        Err(refused) => return *refused,
    };
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&kept) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    InboxCookie::SignInForm.clear(&mut response, &headers);
    response
}

/// Starts an inbox session of `identity` under `identity_key` (one sign-in counted
/// against the identity's allowance): the `Set-Cookie` value that carries it.
pub(super) async fn open_session(
    inbox: &Inbox,
    identity: &str,
    identity_key: &IdentityKey,
    method: (SignInMethod, String),
    headers: &HeaderMap,
) -> Result<String, Box<Response>> {
    let sign_in = match inbox.sign_ins_per_identity.attempt(identity, Instant::now()) {
        Ok(sign_in) => sign_in,
        Err(retry_after) => return Err(Box::new(throttled(retry_after, "This identity signed in too many times."))),
    };
    let cookie_value = match start_session(inbox, identity, identity_key, method).await {
        Ok(value) => value,
        Err(()) => return Err(Box::new(store_unavailable_page())),
    };
    sign_in.keep();
    tracing::info!(identity, "signed in to the inbox");
    Ok(InboxCookie::Session.set(&cookie_value, SIGNED_IN_SECONDS, headers))
}

/// `POST /sign-out`: ends the inbox session on every runner and forgets the cookie.
pub async fn sign_out(axum::extract::State(inbox): Shared, headers: HeaderMap, body: Body) -> Response {
    let signed = match signed_in_post(&inbox, &headers, body, (Scope::Read, false)).await {
        Ok((_, signed)) => signed,
        Err(refused) => return *refused,
    };
    if let Err(error) = inbox.server.store.remove_record(RecordKind::InboxSession, &signed.key).await {
        tracing::error!("the inbox could not end a sign-in in the session store: {error}");
        return store_unavailable_page();
    }
    tracing::info!(identity = signed.caller.identity.as_str(), "signed out of the inbox");
    let mut response = Redirect::to("/sign-in").into_response();
    InboxCookie::Session.clear(&mut response, &headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csrf_token_verifies_only_for_its_purpose_and_value() {
        let secret = Secret::random().expect("a random source");
        let token = secret.token("form", b"alice");
        assert!(secret.verify("form", b"alice", &token));
        assert!(!secret.verify("form", b"bob", &token));
        assert!(!secret.verify("sign-in", b"alice", &token));
        assert!(!secret.verify("form", b"alice", "zz"));
        assert!(!secret.verify("form", b"alice", ""));
        assert!(!Secret::random().expect("a random source").verify("form", b"alice", &token), "another key");
    }

    #[test]
    fn cookies_are_read_by_name_and_a_foreign_origin_is_refused() {
        let mut headers = HeaderMap::new();
        let id = "ab".repeat(32);
        let secret = "cd".repeat(32);
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=1; archmax_inbox={id}.{secret}; b=2")).expect("cookie"),
        );
        assert_eq!(presented_session(&headers), Some((id.clone(), vec![0xcd; 32])));
        headers.insert(header::COOKIE, HeaderValue::from_static("archmax_inbox=6869"));
        assert_eq!(presented_session(&headers), None, "not a session id");
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8787"));
        assert!(same_origin(&headers), "no Origin: a form of a page that sends none");
        headers.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:8787"));
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, HeaderValue::from_static("https://evil.example"));
        assert!(!same_origin(&headers));
        headers.remove(header::ORIGIN);
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin(&headers));
    }

    #[test]
    fn a_sign_in_cookie_is_accepted_only_as_this_inbox_signed_it_and_within_ten_minutes() {
        let key = Secret::random().expect("a random source");
        let nonce = "0123456789abcdef0123456789abcdef";
        let issued = 1_741_435_200;
        let mut headers = HeaderMap::new();
        let value = format!("archmax_sign_in={}", sign_in_cookie_value(&key, nonce, issued));
        headers.insert(header::COOKIE, HeaderValue::from_str(&value).expect("cookie"));
        assert_eq!(sign_in_nonce(&key, &headers, issued), Ok(nonce));
        assert_eq!(sign_in_nonce(&key, &headers, issued + SIGN_IN_FORM_SECONDS), Ok(nonce));
        assert_eq!(sign_in_nonce(&key, &headers, issued + SIGN_IN_FORM_SECONDS + 1), Err(timed::Refusal::Expired));
        assert_eq!(sign_in_nonce(&key, &headers, issued - 3600), Err(timed::Refusal::Expired), "issued ahead");
        let other = Secret::random().expect("a random source");
        assert_eq!(sign_in_nonce(&other, &headers, issued), Err(timed::Refusal::Foreign), "another key");
        // The issue time is under the MAC: moving it forward breaks the cookie.
        let moved = value.replace(&format!(".{issued}."), &format!(".{}.", issued + 1000));
        headers.insert(header::COOKIE, HeaderValue::from_str(&moved).expect("cookie"));
        assert_eq!(sign_in_nonce(&key, &headers, issued + 1000), Err(timed::Refusal::Foreign));
        let forged = format!("archmax_sign_in={nonce}.{issued}.{}", "00".repeat(32));
        headers.insert(header::COOKIE, HeaderValue::from_str(&forged).expect("cookie"));
        assert_eq!(sign_in_nonce(&key, &headers, issued), Err(timed::Refusal::Foreign));
    }
}
