//! Signing in with the runner's tokens, the inbox sessions it starts, and the CSRF
//! tokens of every form.
//!
//! A person pastes a token the runner accepts (`ARCHMAX_SERVE_TOKEN` or a `--tokens`
//! entry); it is checked like a bearer token, and an inbox session is kept in the session
//! store as a shared record ([`RecordKind::InboxSession`]): the identity, the token's
//! SHA-256, when it ends (12 hours on) and a random key for the session's CSRF tokens.
//! The `archmax_inbox` cookie (`HttpOnly; SameSite=Strict; Path=/`, `Secure` behind an
//! HTTPS proxy) holds only a random session id; the store keys the record by the id's
//! digest, so what the store holds cannot be replayed as a cookie. Every runner on the
//! store serves the session; signing out removes the record (the old cookie is then
//! refused everywhere); a token removed from the configuration ends its sessions at the
//! next request, since each request checks the kept digest against the tokens served.
//! A form's CSRF token is an HMAC under the session's key; the sign-in form's is bound to
//! a signed nonce in a short-lived cookie, under a key every runner reads from the store
//! ([`RecordKind::InboxKey`]). On a POST the cookie (or the sign-in nonce) and the origin
//! are checked before the body is read. Sign-in is throttled per client address and per
//! identity ([`super::throttle`]).
//!
//! The one thing to know: with no token configured the runner is open to local programs
//! only and refuses requests from web pages, so the inbox asks for a token to be
//! configured instead of serving anyone.

use std::net::SocketAddr;
use std::time::Instant;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use archmax_vm::session::records::{Record, RecordKind};

use super::render::{self, Notice};
use super::{Inbox, Shared, forms::Form};
use crate::auth::{Caller, Scope};

/// The cookie that holds the inbox session's id (hex).
pub const TOKEN_COOKIE: &str = "archmax_inbox";
/// The cookie that binds the sign-in form's CSRF token.
pub const SIGN_IN_COOKIE: &str = "archmax_sign_in";
/// How long a sign-in lasts, in seconds (12 hours).
const SIGNED_IN_SECONDS: u64 = 12 * 60 * 60;
/// How long the sign-in form stays valid, in seconds.
const SIGN_IN_FORM_SECONDS: u64 = 600;
/// How long the shared sign-in form key is used before a new one is made (a week).
const SIGN_IN_KEY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// The record key of the shared sign-in form key.
const SIGN_IN_KEY: &str = "sign-in-form";

/// A key CSRF tokens are derived from (one SHA-256 block: HMAC takes it as it is).
pub struct Secret([u8; 64]);

/// Fills `bytes` from the operating system's random source; `false` when there is none.
fn random_bytes(bytes: &mut [u8]) -> bool {
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
        match unhex(presented) {
            Some(bytes) => self.mac(purpose, value).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|index| u8::from_str_radix(&text[index..index + 2], 16).ok()).collect()
}

/// The value of cookie `name` in the request.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

/// What the store keeps of one signed-in browser.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InboxSession {
    identity: String,
    /// The SHA-256 of the token signed in with (hex), checked against the tokens served
    /// on every request.
    token_sha256: String,
    /// The key of this session's CSRF tokens (hex, 64 bytes).
    csrf_key: String,
}

/// The store's key of the inbox session whose cookie holds `id`: the id's SHA-256.
fn session_key(id: &[u8]) -> String {
    hex(&Sha256::digest(id))
}

/// The inbox session id a browser presents (32 bytes, hex).
fn presented_session(headers: &HeaderMap) -> Option<Vec<u8>> {
    unhex(cookie(headers, TOKEN_COOKIE)?).filter(|id| id.len() == 32)
}

/// Who is signed in, with the CSRF token of their forms.
pub struct SignedIn {
    pub caller: Caller,
    pub csrf: String,
    /// The SHA-256 of the signed-in token, to ask the runner's auth about other scopes.
    token_sha256: [u8; 32],
    /// The store's key of the session.
    key: String,
    /// The session's CSRF key.
    secret: Secret,
}

impl SignedIn {
    /// Whether the signed-in token also holds `scope`.
    pub fn holds(&self, inbox: &Inbox, scope: Scope) -> bool {
        inbox.server.auth.caller_by_digest(&self.token_sha256, scope).is_ok()
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

fn store_unavailable_page() -> Response {
    render::error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The inbox cannot check sign-ins right now",
        "The session store did not answer; the runner's log says why. Try again shortly.",
    )
}

/// The signed-in person, when their inbox session is live and its token holds `scope`.
/// A session whose token is no longer served is ended here.
pub async fn signed_in(inbox: &Inbox, headers: &HeaderMap, scope: Scope) -> Result<SignedIn, NotSignedIn> {
    if inbox.server.auth.is_open() {
        return Err(NotSignedIn::Open);
    }
    let id = presented_session(headers).ok_or(NotSignedIn::Anonymous)?;
    let key = session_key(&id);
    let store = &inbox.server.store;
    let kept = match store.read_record(RecordKind::InboxSession, &key, inbox.server.now_ms()).await {
        Ok(Some(kept)) => kept,
        Ok(None) => return Err(NotSignedIn::Anonymous),
        Err(error) => {
            tracing::error!("the inbox could not read a sign-in from the session store: {error}");
            return Err(NotSignedIn::Unavailable);
        }
    };
    let Ok(session) = serde_json::from_slice::<InboxSession>(&kept) else {
        return Err(NotSignedIn::Anonymous);
    };
    let token_sha256 = crate::auth::parse_digest(&session.token_sha256).ok_or(NotSignedIn::Anonymous)?;
    let secret = unhex(&session.csrf_key).and_then(|key| Secret::from_bytes(&key)).ok_or(NotSignedIn::Anonymous)?;
    let caller = match inbox.server.auth.caller_by_digest(&token_sha256, scope) {
        Ok(caller) => caller,
        Err(error) if error.status == StatusCode::FORBIDDEN => return Err(NotSignedIn::Scope(error)),
        Err(_) => {
            // The token was revoked: the session ends on every runner.
            let _ = store.remove_record(RecordKind::InboxSession, &key).await;
            tracing::info!(
                identity = session.identity.as_str(),
                "an inbox session ended: its token is no longer served"
            );
            return Err(NotSignedIn::Anonymous);
        }
    };
    let csrf = secret.token("form", key.as_bytes());
    Ok(SignedIn { caller, csrf, token_sha256, key, secret })
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
    match tokio::time::timeout(server.body_timeout, axum::body::to_bytes(body, server.body_limit)).await {
        Ok(Ok(bytes)) => Ok(Form::parse(&bytes)),
        Ok(Err(_)) => Err(Box::new(render::error_page(
            StatusCode::BAD_REQUEST,
            "Form refused",
            "The form's body could not be read (too large, or cut off). Reload the page and send it again.",
        ))),
        Err(_) => Err(Box::new(render::error_page(
            StatusCode::REQUEST_TIMEOUT,
            "Form refused",
            "The form's body did not arrive in time. Send it again.",
        ))),
    }
}

/// A POST of a signed-in person: the session and the origin are checked before the body
/// is read; then the form's CSRF token, and `scope`.
pub async fn signed_in_post(
    inbox: &Inbox,
    headers: &HeaderMap,
    body: Body,
    scope: Scope,
) -> Result<(Form, SignedIn), Box<Response>> {
    let signed = signed_in(inbox, headers, scope).await.map_err(|refused| Box::new(refused.into_page()))?;
    if !same_origin(headers) {
        return Err(Box::new(csrf_refused()));
    }
    let form = read_form(inbox, body).await?;
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

/// Whether the request reached the server over HTTPS (through a proxy that says so):
/// the cookies are then `Secure`.
fn over_https(headers: &HeaderMap) -> bool {
    headers.get("x-forwarded-proto").and_then(|value| value.to_str().ok()).is_some_and(|proto| proto == "https")
}

fn set_cookie(name: &str, value: &str, max_age: u64, secure: bool) -> (header::HeaderName, String) {
    let secure = if secure { "; Secure" } else { "" };
    (header::SET_COOKIE, format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"))
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

/// The sign-in cookie's value: a random nonce and its MAC, so the cookie can be checked
/// before a form's body is read.
fn sign_in_cookie_value(key: &Secret, nonce: &str) -> String {
    format!("{nonce}.{}", key.token("sign-in-cookie", nonce.as_bytes()))
}

/// The nonce of a sign-in cookie this inbox made (its MAC checks out).
fn sign_in_nonce<'a>(key: &Secret, headers: &'a HeaderMap) -> Option<&'a str> {
    let (nonce, mac) = cookie(headers, SIGN_IN_COOKIE)?.split_once('.')?;
    (nonce.len() == 32 && key.verify("sign-in-cookie", nonce.as_bytes(), mac)).then_some(nonce)
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
    let cookie =
        set_cookie(SIGN_IN_COOKIE, &sign_in_cookie_value(&key, &nonce), SIGN_IN_FORM_SECONDS, over_https(headers));
    let mut response = render::html_response(status, render::sign_in_page(&csrf, notice.as_ref()));
    if let Ok(value) = HeaderValue::from_str(&cookie.1) {
        response.headers_mut().append(cookie.0, value);
    }
    response
}

/// The client address a request came from, as the accept loop recorded it.
fn client_of(extensions: &Extensions) -> String {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "unknown".to_string(), |ConnectInfo(address)| address.ip().to_string())
}

/// 429 with `Retry-After`: too many sign-ins.
fn throttled(retry_after: std::time::Duration, why: &str) -> Response {
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
pub async fn sign_in(
    axum::extract::State(inbox): Shared,
    extensions: Extensions,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if inbox.server.auth.is_open() {
        return open_server_page();
    }
    let client = client_of(&extensions);
    if let Err(retry_after) = inbox.failures_per_client.check(&client, Instant::now()) {
        return throttled(retry_after, "This address made too many failed sign-ins.");
    }
    let Some(key) = sign_in_key(&inbox).await else { return store_unavailable_page() };
    let Some(nonce) = sign_in_nonce(&key, &headers) else { return csrf_refused() };
    if !same_origin(&headers) {
        return csrf_refused();
    }
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
        Err(error) => {
            inbox.failures_per_client.count(&client, Instant::now());
            tracing::warn!(client = client.as_str(), "a sign-in to the inbox was refused");
            let why = match error.status {
                StatusCode::FORBIDDEN => "This token may not read sessions (it needs the `read` scope).",
                _ => "The runner does not accept this token.",
            };
            return sign_in_form(&inbox, &headers, StatusCode::UNAUTHORIZED, Some(Notice::error(why))).await;
        }
    };
    if let Err(retry_after) = inbox.sign_ins_per_identity.check(&caller.identity, Instant::now()) {
        return throttled(retry_after, "This identity signed in too many times.");
    }
    inbox.sign_ins_per_identity.count(&caller.identity, Instant::now());
    let id = match start_session(&inbox, &caller, &token_sha256).await {
        Ok(id) => id,
        Err(response) => return *response,
    };
    tracing::info!(identity = caller.identity.as_str(), "signed in to the inbox");
    let secure = over_https(&headers);
    let kept = set_cookie(TOKEN_COOKIE, &id, SIGNED_IN_SECONDS, secure);
    let cleared = set_cookie(SIGN_IN_COOKIE, "", 0, secure);
    let mut response = Redirect::to("/").into_response();
    for (name, value) in [kept, cleared] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Keeps a new inbox session for `caller` in the store; its cookie value (the id, hex).
async fn start_session(inbox: &Inbox, caller: &Caller, token_sha256: &[u8; 32]) -> Result<String, Box<Response>> {
    let unavailable = || Box::new(store_unavailable_page());
    let mut id = [0u8; 32];
    let mut csrf_key = [0u8; 64];
    if !random_bytes(&mut id) || !random_bytes(&mut csrf_key) {
        return Err(unavailable());
    }
    let session =
        InboxSession { identity: caller.identity.clone(), token_sha256: hex(token_sha256), csrf_key: hex(&csrf_key) };
    let value = serde_json::to_vec(&session).map_err(|_| unavailable())?;
    let now = inbox.server.now_ms();
    let record = Record {
        kind: RecordKind::InboxSession,
        key: session_key(&id),
        value,
        expires_ms: now.saturating_add(SIGNED_IN_SECONDS * 1000),
    };
    match inbox.server.store.claim_record(&record, now).await {
        Ok(true) => Ok(hex(&id)),
        // 256 random bits met a live session's: the random source is broken.
        Ok(false) => Err(unavailable()),
        Err(error) => {
            tracing::error!("the inbox could not keep a sign-in in the session store: {error}");
            Err(unavailable())
        }
    }
}

/// `POST /sign-out`: ends the inbox session on every runner and forgets the cookie.
pub async fn sign_out(axum::extract::State(inbox): Shared, headers: HeaderMap, body: Body) -> Response {
    let signed = match signed_in_post(&inbox, &headers, body, Scope::Read).await {
        Ok((_, signed)) => signed,
        Err(refused) => return *refused,
    };
    if let Err(error) = inbox.server.store.remove_record(RecordKind::InboxSession, &signed.key).await {
        tracing::error!("the inbox could not end a sign-in in the session store: {error}");
        return store_unavailable_page();
    }
    tracing::info!(identity = signed.caller.identity.as_str(), "signed out of the inbox");
    let cleared = set_cookie(TOKEN_COOKIE, "", 0, over_https(&headers));
    ([cleared], Redirect::to("/sign-in")).into_response()
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
        headers
            .insert(header::COOKIE, HeaderValue::from_str(&format!("a=1; archmax_inbox={id}; b=2")).expect("cookie"));
        assert_eq!(presented_session(&headers), Some(vec![0xab; 32]));
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
    fn a_sign_in_cookie_is_accepted_only_as_this_inbox_signed_it() {
        let key = Secret::random().expect("a random source");
        let nonce = "0123456789abcdef0123456789abcdef";
        let mut headers = HeaderMap::new();
        let value = format!("archmax_sign_in={}", sign_in_cookie_value(&key, nonce));
        headers.insert(header::COOKIE, HeaderValue::from_str(&value).expect("cookie"));
        assert_eq!(sign_in_nonce(&key, &headers), Some(nonce));
        assert_eq!(sign_in_nonce(&Secret::random().expect("a random source"), &headers), None, "another key");
        let forged = format!("archmax_sign_in={nonce}.{}", "00".repeat(32));
        headers.insert(header::COOKIE, HeaderValue::from_str(&forged).expect("cookie"));
        assert_eq!(sign_in_nonce(&key, &headers), None);
    }
}
