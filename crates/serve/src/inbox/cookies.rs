//! The inbox's cookies: what each is called, how it is set and how it is read.
//!
//! Three cookies, all `HttpOnly`, `Path=/` and without `Domain`: the inbox session
//! ([`InboxCookie::Session`], `SameSite=Strict`), the sign-in form's CSRF binding
//! ([`InboxCookie::SignInForm`], `Strict`) and a sign-in through the provider under way
//! ([`InboxCookie::PendingSignIn`], `SameSite=Lax`, so the provider's redirect back
//! carries it).
//!
//! The one thing to know: a request that came in over HTTPS ([`over_https`]) is given,
//! and read, the `__Host-` name of each cookie, `Secure`: a browser keeps a `__Host-`
//! cookie only from a secure origin, only with `Path=/` and no `Domain`, so a page on a
//! sibling subdomain (or a plain-http answer) cannot plant one. Over plain HTTP (a
//! runner on loopback) the bare name is used, since a browser refuses a `__Host-` cookie
//! that is not `Secure`. A read looks only for the name of the scheme the request came in
//! by, never for the other.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;

/// One of the inbox's cookies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InboxCookie {
    /// The inbox session: its record's key and the secret the record holds a MAC of.
    Session,
    /// The sign-in form's signed nonce and issue time.
    SignInForm,
    /// A sign-in through the provider under way, sealed.
    PendingSignIn,
}

impl InboxCookie {
    /// The cookie's name for a request that came in over HTTPS (`https`) or not.
    pub fn name(self, https: bool) -> &'static str {
        match (self, https) {
            (InboxCookie::Session, false) => "archmax_inbox",
            (InboxCookie::Session, true) => "__Host-archmax_inbox",
            (InboxCookie::SignInForm, false) => "archmax_sign_in",
            (InboxCookie::SignInForm, true) => "__Host-archmax_sign_in",
            (InboxCookie::PendingSignIn, false) => "archmax_oidc",
            (InboxCookie::PendingSignIn, true) => "__Host-archmax_oidc",
        }
    }

    fn same_site(self) -> &'static str {
        match self {
            InboxCookie::Session | InboxCookie::SignInForm => "Strict",
            InboxCookie::PendingSignIn => "Lax",
        }
    }

    /// The value the request's browser holds under the name for how the request came in.
    pub fn read(self, headers: &HeaderMap) -> Option<&str> {
        let name = self.name(over_https(headers));
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.trim())
    }

    /// The `Set-Cookie` value that gives the browser of the request with `headers` this
    /// cookie holding `value` for `max_age` seconds (`0`, with an empty value: forgets it).
    pub fn set(self, value: &str, max_age: u64, headers: &HeaderMap) -> String {
        let https = over_https(headers);
        let secure = if https { "; Secure" } else { "" };
        format!(
            "{}={value}; Path=/; HttpOnly; SameSite={}; Max-Age={max_age}{secure}",
            self.name(https),
            self.same_site()
        )
    }

    /// Adds [`InboxCookie::set`]'s header to `response`.
    pub fn append(self, response: &mut Response, value: &str, max_age: u64, headers: &HeaderMap) {
        if let Ok(value) = HeaderValue::from_str(&self.set(value, max_age, headers)) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }

    /// Adds the header that makes the browser forget this cookie to `response`.
    pub fn clear(self, response: &mut Response, headers: &HeaderMap) {
        self.append(response, "", 0, headers);
    }
}

/// Whether the request reached the server over HTTPS, as a proxy in front of it says
/// (`X-Forwarded-Proto: https`, in any case; of a list that proxies appended to, the
/// first entry, the scheme the client used).
pub fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(https: bool, cookie: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if https {
            headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        }
        headers.insert(header::COOKIE, HeaderValue::from_str(cookie).expect("a cookie header"));
        headers
    }

    #[test]
    fn https_is_read_from_the_first_forwarded_scheme_in_any_case() {
        for (value, https) in
            [("https", true), ("HTTPS", true), (" https , http", true), ("http, https", false), ("", false)]
        {
            let mut headers = HeaderMap::new();
            headers.insert("x-forwarded-proto", HeaderValue::from_str(value).expect("a header"));
            assert_eq!(over_https(&headers), https, "{value:?}");
        }
        assert!(!over_https(&HeaderMap::new()));
    }

    #[test]
    fn over_https_every_cookie_is_set_under_its_host_prefix_secure_on_the_root_path_without_a_domain() {
        let https = request(true, "");
        for (cookie, same_site) in
            [(InboxCookie::Session, "Strict"), (InboxCookie::SignInForm, "Strict"), (InboxCookie::PendingSignIn, "Lax")]
        {
            let set = cookie.set("v", 600, &https);
            assert!(set.starts_with("__Host-archmax_"), "{set}");
            for part in ["; Secure", "; Path=/;", "; HttpOnly", &format!("; SameSite={same_site}")] {
                assert!(set.contains(part), "{set} lacks {part}");
            }
            assert!(!set.to_ascii_lowercase().contains("domain="), "{set}");
            let plain = cookie.set("v", 600, &request(false, ""));
            assert!(
                plain.starts_with("archmax_") && !plain.contains("Secure") && plain.contains("; Path=/;"),
                "{plain}"
            );
        }
    }

    #[test]
    fn a_cookie_is_read_only_under_the_name_of_the_scheme_the_request_came_in_by() {
        let both = "archmax_inbox=plain; __Host-archmax_inbox=prefixed";
        assert_eq!(InboxCookie::Session.read(&request(true, both)), Some("prefixed"));
        assert_eq!(InboxCookie::Session.read(&request(false, both)), Some("plain"));
        // A bare cookie (which a sibling subdomain can set) is not read over HTTPS, nor a
        // prefixed one over plain HTTP.
        assert_eq!(InboxCookie::Session.read(&request(true, "archmax_inbox=planted")), None);
        assert_eq!(InboxCookie::PendingSignIn.read(&request(true, "archmax_oidc=planted")), None);
        assert_eq!(InboxCookie::SignInForm.read(&request(true, "archmax_sign_in=planted")), None);
        assert_eq!(InboxCookie::Session.read(&request(false, "__Host-archmax_inbox=x")), None);
        assert_eq!(InboxCookie::SignInForm.read(&request(false, "a=1; archmax_sign_in=n")), Some("n"));
    }
}
