//! Signing in with the runner's tokens, and the CSRF tokens of every form.
//!
//! A person pastes a token the runner accepts (`ARCHMAX_SERVE_TOKEN` or a `--tokens`
//! entry); it is checked like a bearer token and kept in the `archmax_inbox` cookie
//! (hex, `HttpOnly; SameSite=Strict; Path=/`, `Secure` behind an HTTPS proxy). Each
//! request presents it again, so a token removed from the tokens file stops working at
//! once. A form's CSRF token is the HMAC-SHA256 of the signed-in token under a key made
//! at start; the sign-in form's is bound to a random value in a short-lived cookie.
//!
//! The one thing to know: with no token configured the runner is open to local programs
//! only and refuses requests from web pages, so the inbox asks for a token to be
//! configured instead of serving anyone.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::render::{self, Notice};
use super::{Inbox, Shared, forms::Form};
use crate::auth::{Caller, Scope};

/// The cookie that holds the signed-in token (hex).
pub const TOKEN_COOKIE: &str = "archmax_inbox";
/// The cookie that binds the sign-in form's CSRF token.
pub const SIGN_IN_COOKIE: &str = "archmax_sign_in";
/// How long a sign-in lasts, in seconds (12 hours).
const SIGNED_IN_SECONDS: u64 = 12 * 60 * 60;

/// The key CSRF tokens are derived from (one SHA-256 block: HMAC takes it as it is).
pub struct Secret([u8; 64]);

impl Secret {
    /// A fresh key from the operating system's random source.
    pub fn random() -> Secret {
        let mut key = [0u8; 64];
        if getrandom::fill(&mut key).is_err() {
            // No random source: a key no client can know in advance still binds forms to
            // this process (its start time, id and an address in it), and the log says so.
            tracing::warn!("no random source for the inbox's CSRF key; deriving one from the process");
            let seed = format!("{:?}{}{:p}", std::time::SystemTime::now(), std::process::id(), &key);
            let digest: [u8; 32] = Sha256::digest(seed.as_bytes()).into();
            key[..32].copy_from_slice(&digest);
        }
        Secret(key)
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

/// The token a signed-in browser presents.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let bytes = unhex(cookie(headers, TOKEN_COOKIE)?)?;
    String::from_utf8(bytes).ok().filter(|token| !token.is_empty())
}

/// The headers a bearer of `token` would send.
fn bearer(token: &str) -> Option<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).ok()?);
    Some(headers)
}

/// A caller as the API would see it with `token` as its bearer token.
fn caller_of(inbox: &Inbox, token: &str, scope: Scope) -> Result<Caller, crate::error::ApiError> {
    let unaccepted = || crate::error::ApiError::new(StatusCode::UNAUTHORIZED, "auth.unauthenticated", "a bad token");
    inbox.server.auth.caller(&bearer(token).ok_or_else(unaccepted)?, scope)
}

/// Who is signed in, with the CSRF token of their forms.
pub struct SignedIn {
    pub caller: Caller,
    pub csrf: String,
    /// The headers of a bearer of the signed-in token, to ask the runner's auth about
    /// other scopes.
    pub bearer: HeaderMap,
}

impl SignedIn {
    /// Whether the signed-in token also holds `scope`.
    pub fn holds(&self, inbox: &Inbox, scope: Scope) -> bool {
        inbox.server.auth.caller(&self.bearer, scope).is_ok()
    }
}

/// Why a request is not served as a signed-in person's.
pub enum NotSignedIn {
    /// No token is configured: the inbox is not served.
    Open,
    /// No cookie, or a token the runner no longer accepts.
    Anonymous,
    /// Signed in, but the token lacks the scope.
    Scope(crate::error::ApiError),
}

impl NotSignedIn {
    /// The answer to a page request: the sign-in page, or why not.
    pub fn into_page(self) -> Response {
        match self {
            NotSignedIn::Open => open_server_page(),
            NotSignedIn::Anonymous => Redirect::to("/sign-in").into_response(),
            NotSignedIn::Scope(error) => render::error_page(error.status, "Not allowed", &error.message),
        }
    }
}

/// The signed-in person, when their token holds `scope`.
pub fn signed_in(inbox: &Inbox, headers: &HeaderMap, scope: Scope) -> Result<SignedIn, NotSignedIn> {
    if inbox.server.auth.is_open() {
        return Err(NotSignedIn::Open);
    }
    let token = presented_token(headers).ok_or(NotSignedIn::Anonymous)?;
    let caller = caller_of(inbox, &token, scope).map_err(|error| match error.status {
        StatusCode::FORBIDDEN => NotSignedIn::Scope(error),
        _ => NotSignedIn::Anonymous,
    })?;
    let bearer = bearer(&token).unwrap_or_default();
    Ok(SignedIn { caller, csrf: inbox.secret.token("form", token.as_bytes()), bearer })
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

/// A POST of a signed-in person: same origin, a valid CSRF token, and `scope`.
pub fn signed_in_post(
    inbox: &Inbox,
    headers: &HeaderMap,
    form: &Form,
    scope: Scope,
) -> Result<SignedIn, Box<Response>> {
    let signed = signed_in(inbox, headers, scope).map_err(|refused| Box::new(refused.into_page()))?;
    let presented = form.get("csrf").unwrap_or_default();
    let token = presented_token(headers).unwrap_or_default();
    if !same_origin(headers) || !inbox.secret.verify("form", token.as_bytes(), presented) {
        return Err(Box::new(csrf_refused()));
    }
    Ok(signed)
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

/// `GET /sign-in`: the token form, its CSRF token bound to a fresh cookie.
pub async fn sign_in_page(axum::extract::State(inbox): Shared, headers: HeaderMap) -> Response {
    sign_in_form(&inbox, &headers, StatusCode::OK, None)
}

fn sign_in_form(inbox: &Inbox, headers: &HeaderMap, status: StatusCode, notice: Option<Notice>) -> Response {
    if inbox.server.auth.is_open() {
        return open_server_page();
    }
    let mut nonce = [0u8; 16];
    if getrandom::fill(&mut nonce).is_err() {
        nonce =
            Sha256::digest(format!("{:?}", std::time::Instant::now()).as_bytes())[..16].try_into().unwrap_or([7; 16]);
    }
    let nonce = hex(&nonce);
    let csrf = inbox.secret.token("sign-in", nonce.as_bytes());
    let cookie = set_cookie(SIGN_IN_COOKIE, &nonce, 600, over_https(headers));
    let mut response = render::html_response(status, render::sign_in_page(&csrf, notice.as_ref()));
    if let Ok(value) = HeaderValue::from_str(&cookie.1) {
        response.headers_mut().append(cookie.0, value);
    }
    response
}

/// `POST /sign-in`: checks the token and keeps it in the cookie.
pub async fn sign_in(axum::extract::State(inbox): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let nonce = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    let presented = form.get("csrf").unwrap_or_default();
    if inbox.server.auth.is_open() {
        return open_server_page();
    }
    if nonce.is_empty() || !same_origin(&headers) || !inbox.secret.verify("sign-in", nonce.as_bytes(), presented) {
        return csrf_refused();
    }
    let token = form.get("token").unwrap_or_default().trim().to_string();
    match caller_of(&inbox, &token, Scope::Read) {
        Ok(caller) => {
            tracing::info!(identity = caller.identity.as_str(), "signed in to the inbox");
            let secure = over_https(&headers);
            let kept = set_cookie(TOKEN_COOKIE, &hex(token.as_bytes()), SIGNED_IN_SECONDS, secure);
            let cleared = set_cookie(SIGN_IN_COOKIE, "", 0, secure);
            let mut response = Redirect::to("/").into_response();
            for (name, value) in [kept, cleared] {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response.headers_mut().append(name, value);
                }
            }
            response
        }
        Err(error) => {
            let why = match error.status {
                StatusCode::FORBIDDEN => "This token may not read sessions (it needs the `read` scope).",
                _ => "The runner does not accept this token.",
            };
            sign_in_form(&inbox, &headers, StatusCode::UNAUTHORIZED, Some(Notice::error(why)))
        }
    }
}

/// `POST /sign-out`: forgets the cookie.
pub async fn sign_out(axum::extract::State(inbox): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    if let Err(refused) = signed_in_post(&inbox, &headers, &form, Scope::Read) {
        return *refused;
    }
    let cleared = set_cookie(TOKEN_COOKIE, "", 0, over_https(&headers));
    ([cleared], Redirect::to("/sign-in")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csrf_token_verifies_only_for_its_purpose_and_value() {
        let secret = Secret::random();
        let token = secret.token("form", b"alice");
        assert!(secret.verify("form", b"alice", &token));
        assert!(!secret.verify("form", b"bob", &token));
        assert!(!secret.verify("sign-in", b"alice", &token));
        assert!(!secret.verify("form", b"alice", "zz"));
        assert!(!secret.verify("form", b"alice", ""));
        assert!(!Secret::random().verify("form", b"alice", &token), "another process's key");
    }

    #[test]
    fn cookies_are_read_by_name_and_a_foreign_origin_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; archmax_inbox=6869; b=2"));
        assert_eq!(presented_token(&headers).as_deref(), Some("hi"));
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
}
