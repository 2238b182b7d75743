//! Who is calling: bearer tokens with an identity and scopes.
//!
//! Tokens come from `ARCHMAX_SERVE_TOKEN` (one token, every scope, identity `admin`) or
//! a tokens file (`[[tokens]]` tables with `identity`, `scopes` and the `sha256` of the
//! token). Only digests are kept; a presented token is hashed and compared with every
//! entry in constant time, so neither the match nor its position leaks through timing.
//!
//! The one thing to know: with no token configured the server is [`Auth::Open`]: every
//! caller is `local` with every scope, the host binds loopback only, and `approvers`
//! cannot be enforced (there is no identity to hold them against).

use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Start sessions, send messages, deliver triggers.
    Start,
    /// Decide parked sessions.
    Decide,
    /// Read sessions, transcripts, events and metrics.
    Read,
    /// Everything.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Start, Scope::Decide, Scope::Read, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Start => "start",
            Scope::Decide => "decide",
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub identity: String,
    /// Whether the identity was proven by a token (decisions then enforce `approvers`).
    pub authenticated: bool,
}

/// One accepted token, by its digest.
#[derive(Clone, Debug)]
pub struct Token {
    identity: String,
    scopes: Vec<Scope>,
    sha256: [u8; 32],
}

/// How callers are authenticated.
#[derive(Clone, Debug)]
pub enum Auth {
    /// No token configured: loopback only, no auth.
    Open,
    Tokens(Vec<Token>),
}

/// Why a token configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("the tokens file is malformed: {0}")]
    Malformed(String),
    #[error("token {index} (`{identity}`): `sha256` must be 64 hexadecimal digits")]
    BadDigest { index: usize, identity: String },
    #[error("token {index} (`{identity}`) has no scopes")]
    NoScopes { index: usize, identity: String },
    #[error("ARCHMAX_SERVE_TOKEN is empty")]
    EmptyToken,
    #[error(
        "ARCHMAX_SERVE_TOKEN is {bytes} bytes long; a token needs at least {MIN_TOKEN_BYTES} (make one with `openssl rand -hex 32`)"
    )]
    ShortToken { bytes: usize },
}

/// The shortest token `ARCHMAX_SERVE_TOKEN` may hold, in bytes. (A tokens file holds
/// digests only, so the length of its tokens cannot be checked.)
pub const MIN_TOKEN_BYTES: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    identity: String,
    scopes: Vec<Scope>,
    sha256: String,
}

/// The SHA-256 of a token, as the tokens file holds it (lowercase hex).
pub fn token_digest_hex(token: &str) -> String {
    archmax_program::hex::hex(&Sha256::digest(token.as_bytes()))
}

/// A SHA-256 digest written as 64 hexadecimal digits (either case; surrounding space
/// ignored).
pub(crate) fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    archmax_program::hex::decode_array(hex.trim())
}

impl Auth {
    /// One token with every scope, identity `admin` (`ARCHMAX_SERVE_TOKEN`), plus the
    /// entries of a tokens file's text, when given. Neither: [`Auth::Open`].
    pub fn configure(env_token: Option<&str>, tokens_file: Option<&str>) -> Result<Auth, AuthConfigError> {
        let mut tokens = Vec::new();
        if let Some(token) = env_token {
            if token.trim().is_empty() {
                return Err(AuthConfigError::EmptyToken);
            }
            if token.trim().len() < MIN_TOKEN_BYTES {
                return Err(AuthConfigError::ShortToken { bytes: token.trim().len() });
            }
            let sha256 = Sha256::digest(token.trim().as_bytes()).into();
            tokens.push(Token { identity: "admin".to_string(), scopes: vec![Scope::Admin], sha256 });
        }
        if let Some(text) = tokens_file {
            let file: TokensFile =
                toml::from_str(text).map_err(|error| AuthConfigError::Malformed(error.to_string()))?;
            for (index, entry) in file.tokens.into_iter().enumerate() {
                let Some(sha256) = parse_digest(&entry.sha256) else {
                    return Err(AuthConfigError::BadDigest { index: index + 1, identity: entry.identity });
                };
                if entry.scopes.is_empty() {
                    return Err(AuthConfigError::NoScopes { index: index + 1, identity: entry.identity });
                }
                tokens.push(Token { identity: entry.identity, scopes: entry.scopes, sha256 });
            }
        }
        Ok(if tokens.is_empty() && env_token.is_none() && tokens_file.is_none() {
            Auth::Open
        } else {
            Auth::Tokens(tokens)
        })
    }

    pub fn is_open(&self) -> bool {
        matches!(self, Auth::Open)
    }

    /// The caller of a request that needs `scope`: 401 without a valid bearer token, 403
    /// when the token lacks the scope (`admin` holds every scope).
    pub fn caller(&self, headers: &HeaderMap, scope: Scope) -> Result<Caller, ApiError> {
        if let Auth::Open = self {
            local_only(headers)?;
            return Ok(Caller { identity: "local".to_string(), authenticated: false });
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(bearer_token)
            .filter(|token| !token.is_empty());
        let Some(presented) = presented else {
            return Err(unauthorized("this request needs `Authorization: Bearer <token>`"));
        };
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        self.caller_by_digest(&digest, scope)
    }

    /// The caller whose token has the SHA-256 `digest` (what an inbox session keeps
    /// instead of the token): 401 when no configured token has it (any more), 403 when it
    /// lacks `scope`. An open server has no tokens: 401.
    pub fn caller_by_digest(&self, digest: &[u8; 32], scope: Scope) -> Result<Caller, ApiError> {
        let Auth::Tokens(tokens) = self else {
            return Err(unauthorized("no token is configured"));
        };
        // Every entry is compared, whatever matched before: the time taken does not say
        // which token (or whether any) matched.
        let mut found: Option<&Token> = None;
        for token in tokens {
            let same: bool = token.sha256.ct_eq(digest).into();
            if same && found.is_none() {
                found = Some(token);
            }
        }
        let Some(token) = found else {
            return Err(unauthorized("the bearer token is not accepted"));
        };
        if !token.scopes.iter().any(|held| *held == scope || *held == Scope::Admin) {
            return Err(lacks_scope(&token.identity, scope));
        }
        Ok(Caller { identity: token.identity.clone(), authenticated: true })
    }

    /// The digests of the tokens configured for `identity`, sorted (none when open): the
    /// runner's secret material from which the inbox derives that identity's session key.
    pub(crate) fn digests_of(&self, identity: &str) -> Vec<[u8; 32]> {
        let Auth::Tokens(tokens) = self else { return Vec::new() };
        let mut digests: Vec<[u8; 32]> =
            tokens.iter().filter(|token| token.identity == identity).map(|token| token.sha256).collect();
        digests.sort_unstable();
        digests
    }
}

/// The 403 of `identity` lacking `scope`.
pub(crate) fn lacks_scope(identity: &str, scope: Scope) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "auth.scope",
        format!("`{identity}` may not do this: it needs the `{}` scope", scope.as_str()),
    )
    .with_details(serde_json::json!({ "needs": scope.as_str() }))
}

/// The token of an `Authorization` value in the bearer scheme, whose name is matched
/// without regard to case (RFC 9110 §11.1): `Bearer`, `bearer`, `BEARER`.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Without tokens the server serves only local programs: a request a browser made for a
/// web page (it carries `Origin`) or one whose `Host` is not a loopback name (DNS
/// rebinding) is refused, so no page the operator visits can drive the server.
fn local_only(headers: &HeaderMap) -> Result<(), ApiError> {
    let refuse = |why: &str| {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "auth.local-only",
            format!(
                "no token is configured, so the server answers only local programs: {why}; configure a token (ARCHMAX_SERVE_TOKEN or --tokens) to serve anything else"
            ),
        ))
    };
    if headers.contains_key(header::ORIGIN) {
        return refuse("this request came from a web page (it carries Origin)");
    }
    if let Some(host) = headers.get(header::HOST) {
        let host = host.to_str().unwrap_or_default();
        let name = match host.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        let loopback = name.eq_ignore_ascii_case("localhost")
            || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback());
        if !loopback {
            return refuse("its Host is not a loopback name");
        }
    }
    Ok(())
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "auth.unauthenticated", message)
}

/// Why authentication refused an API request: the `reason` label of
/// `archmax_api_refused_total` and of the log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token, or one no entry has (401).
    Unauthenticated = 0,
    /// A known token without the route's scope (403).
    Scope = 1,
    /// An open server's refusal of a web page or a non-loopback `Host` (403).
    LocalOnly = 2,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [Refusal::Unauthenticated, Refusal::Scope, Refusal::LocalOnly];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::Scope => "scope",
            Refusal::LocalOnly => "local-only",
        }
    }

    /// The refusal `error` is, when it is one of [`Auth::caller`]'s.
    pub fn of(error: &ApiError) -> Option<Refusal> {
        match error.code {
            "auth.unauthenticated" => Some(Refusal::Unauthenticated),
            "auth.scope" => Some(Refusal::Scope),
            "auth.local-only" => Some(Refusal::LocalOnly),
            _ => None,
        }
    }
}

/// How often at most a refused API request is logged.
const REFUSAL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The log of refused API requests, which a client sending bad tokens must not flood: the
/// first refusal of each [`REFUSAL_LOG_EVERY`] is logged, with how many went unlogged
/// since the line before (`archmax_api_refused_total` counts every one).
#[derive(Debug, Default)]
struct RefusalLog {
    window: std::sync::Mutex<RefusalWindow>,
}

#[derive(Debug, Default)]
struct RefusalWindow {
    /// When the last line was logged.
    logged: Option<std::time::Instant>,
    /// Refusals since then that were not.
    unlogged: u64,
}

impl RefusalLog {
    /// A refusal at `now`: `Some(unlogged before it)` when it is to be logged.
    fn admit(&self, now: std::time::Instant) -> Option<u64> {
        let mut window = self.window.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if window.logged.is_some_and(|logged| now.saturating_duration_since(logged) < REFUSAL_LOG_EVERY) {
            window.unlogged += 1;
            return None;
        }
        window.logged = Some(now);
        Some(std::mem::take(&mut window.unlogged))
    }
}

/// The server's [`Auth`], replaceable while it serves (a reloaded tokens file).
///
/// A reload may change the tokens but never open a server that started closed: a server
/// bound beyond loopback behind tokens must not become open to everyone by a bad edit.
#[derive(Debug)]
pub struct SharedAuth {
    current: std::sync::RwLock<std::sync::Arc<Auth>>,
    refusals: RefusalLog,
}

impl SharedAuth {
    pub fn new(auth: Auth) -> SharedAuth {
        SharedAuth { current: std::sync::RwLock::new(std::sync::Arc::new(auth)), refusals: RefusalLog::default() }
    }

    fn now(&self) -> std::sync::Arc<Auth> {
        match self.current.read() {
            Ok(current) => std::sync::Arc::clone(&current),
            Err(poisoned) => std::sync::Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Counts `refusal`, of a request from `client` to `route`, in
    /// `archmax_api_refused_total`, and logs it as [`RefusalLog`] allows.
    pub(crate) fn note_refusal(&self, refusal: Refusal, client: &str, route: &str, metrics: &crate::metrics::Metrics) {
        metrics.api_refused(refusal);
        if let Some(earlier) = self.refusals.admit(std::time::Instant::now()) {
            tracing::warn!(
                client,
                route,
                reason = refusal.label(),
                "an API request was refused by authentication ({}); refused since the last such line and not logged: {earlier}",
                refusal.label()
            );
        }
    }

    pub fn is_open(&self) -> bool {
        self.now().is_open()
    }

    /// See [`Auth::caller`].
    pub fn caller(&self, headers: &HeaderMap, scope: Scope) -> Result<Caller, ApiError> {
        self.now().caller(headers, scope)
    }

    /// See [`Auth::caller_by_digest`].
    pub fn caller_by_digest(&self, digest: &[u8; 32], scope: Scope) -> Result<Caller, ApiError> {
        self.now().caller_by_digest(digest, scope)
    }

    /// See [`Auth::digests_of`].
    pub(crate) fn digests_of(&self, identity: &str) -> Vec<[u8; 32]> {
        self.now().digests_of(identity)
    }

    /// Serves `auth` from now on; refused when it would open a server that has tokens.
    pub fn replace(&self, auth: Auth) -> Result<(), String> {
        if auth.is_open() && !self.is_open() {
            return Err("the new configuration holds no token; a server started with tokens keeps them".to_string());
        }
        match self.current.write() {
            Ok(mut current) => *current = std::sync::Arc::new(auth),
            Err(poisoned) => *poisoned.into_inner() = std::sync::Arc::new(auth),
        }
        Ok(())
    }

    /// How many tokens are configured (0 when open).
    pub fn token_count(&self) -> usize {
        match &*self.now() {
            Auth::Open => 0,
            Auth::Tokens(tokens) => tokens.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).expect("header"));
        headers
    }

    #[test]
    fn refusals_are_logged_once_per_window_with_the_count_that_went_unlogged() {
        let log = RefusalLog::default();
        let start = std::time::Instant::now();
        let at = |seconds: u64| start + std::time::Duration::from_secs(seconds);
        assert_eq!(log.admit(at(0)), Some(0), "the first refusal is logged");
        assert_eq!(log.admit(at(1)), None);
        assert_eq!(log.admit(at(9)), None);
        assert_eq!(log.admit(at(10)), Some(2), "the next window's line counts the two between");
        assert_eq!(log.admit(at(30)), Some(0));
    }

    #[test]
    fn the_bearer_scheme_is_named_in_any_case_and_other_schemes_are_not_taken() {
        let auth = Auth::configure(Some("root-secret-of-16-bytes"), None).expect("configured");
        for value in
            ["Bearer root-secret-of-16-bytes", "bearer root-secret-of-16-bytes", "BEARER  root-secret-of-16-bytes "]
        {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).expect("header"));
            assert!(auth.caller(&headers, Scope::Read).is_ok(), "{value}");
        }
        for value in
            ["Basic root-secret-of-16-bytes", "Bearerroot-secret-of-16-bytes", "Bearer ", "root-secret-of-16-bytes"]
        {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).expect("header"));
            let refused = auth.caller(&headers, Scope::Read).expect_err(value);
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{value}");
        }
    }

    #[test]
    fn tokens_file_entries_grant_their_scopes_and_the_env_token_grants_every_scope() {
        let file = format!(
            "[[tokens]]\nidentity = \"alice@example.com\"\nscopes = [\"decide\", \"read\"]\nsha256 = \"{}\"\n",
            token_digest_hex("alice-secret")
        );
        let auth = Auth::configure(Some("root-secret-of-16-bytes"), Some(&file)).expect("configured");
        let alice = auth.caller(&bearer("alice-secret"), Scope::Decide).expect("alice decides");
        assert_eq!(alice, Caller { identity: "alice@example.com".to_string(), authenticated: true });
        let refused = auth.caller(&bearer("alice-secret"), Scope::Start).expect_err("alice cannot start");
        assert_eq!((refused.status, refused.code), (StatusCode::FORBIDDEN, "auth.scope"));
        for scope in Scope::ALL {
            assert_eq!(auth.caller(&bearer("root-secret-of-16-bytes"), scope).expect("admin").identity, "admin");
        }
        let wrong = auth.caller(&bearer("guess"), Scope::Read).expect_err("unknown token");
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            auth.caller(&HeaderMap::new(), Scope::Read).expect_err("no header").status,
            StatusCode::UNAUTHORIZED
        );
    }

    #[test]
    fn an_open_server_answers_only_local_programs() {
        let open = Auth::configure(None, None).expect("open");
        let with = |pairs: &[(header::HeaderName, &str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(name.clone(), HeaderValue::from_str(value).expect("a header"));
            }
            open.caller(&headers, Scope::Decide).map(|caller| caller.identity)
        };
        assert_eq!(with(&[(header::HOST, "127.0.0.1:8787")]).expect("loopback"), "local");
        assert!(with(&[(header::HOST, "localhost:8787")]).is_ok());
        assert!(with(&[(header::HOST, "[::1]:8787")]).is_ok());
        assert!(with(&[]).is_ok(), "no Host at all is a local program");
        let rebound = with(&[(header::HOST, "attacker.example:8787")]).expect_err("DNS rebinding");
        assert_eq!(rebound.status, StatusCode::FORBIDDEN);
        let page = with(&[(header::HOST, "127.0.0.1:8787"), (header::ORIGIN, "https://evil.example")]);
        assert_eq!(page.expect_err("a web page").status, StatusCode::FORBIDDEN);
    }

    #[test]
    fn no_configuration_is_open_and_a_bad_file_is_refused() {
        assert!(Auth::configure(None, None).expect("open").is_open());
        let open = Auth::configure(None, None).expect("open").caller(&HeaderMap::new(), Scope::Admin).expect("local");
        assert!(!open.authenticated);
        assert!(matches!(
            Auth::configure(None, Some("[[tokens]]\nidentity = \"x\"\nscopes = [\"read\"]\nsha256 = \"abc\"\n")),
            Err(AuthConfigError::BadDigest { index: 1, .. })
        ));
        assert!(matches!(
            Auth::configure(None, Some("[[tokens]]\nidentity = 1\n")),
            Err(AuthConfigError::Malformed(_))
        ));
        assert!(matches!(Auth::configure(Some(" "), None), Err(AuthConfigError::EmptyToken)));
    }

    #[test]
    fn a_token_shorter_than_16_bytes_is_refused_at_start_naming_the_variable() {
        let short = Auth::configure(Some("a"), None).expect_err("one byte");
        assert!(matches!(short, AuthConfigError::ShortToken { bytes: 1 }));
        let message = short.to_string();
        assert!(message.contains("ARCHMAX_SERVE_TOKEN") && message.contains("at least 16"), "{message}");
        assert!(Auth::configure(Some("fifteen-bytes!!"), None).is_err());
        assert!(Auth::configure(Some("sixteen-bytes!!!"), None).is_ok());
        // A configured file with no entries is not "open": nobody gets in.
        assert!(!Auth::configure(None, Some("")).expect("empty").is_open());
    }
}
