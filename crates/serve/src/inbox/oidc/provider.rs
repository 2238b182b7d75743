//! The configured OpenID Connect provider: its discovery document and keys, the
//! authorization request, the code exchange, and the checks of the ID token.
//!
//! Discovery (`<issuer>/.well-known/openid-configuration`, then its `jwks_uri`) is read
//! once and kept. An ID token signed with a key the kept set lacks makes the runner read
//! the key set once more (at most once per [`KEYS_REFRESH_MS`]), so a provider's key
//! rotation needs no restart. When a read fails, the provider is not asked again until a
//! pause has passed ([`Backoff`]: one second after the first failure, doubling with each
//! failure after it, at most [`LONGEST_PAUSE_MS`]); sign-ins meanwhile are told when it
//! will be tried again, and a success ends the pause.
//!
//! The one thing to know: the ID token is checked by the `openidconnect` library
//! (signature over the provider's published keys with an asymmetric algorithm only,
//! issuer, audience, expiry, nonce) against the server's clock, then `at_hash` when the
//! token has one; only then are its claims read ([`super::claims`]).

use std::sync::Arc;

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreJsonWebKeySet, CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AccessTokenHash, AuthUrl, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken,
    EndpointNotSet, EndpointSet, IssuerUrl, JsonWebKeySetUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope as OAuthScope, SignatureVerificationError, TokenResponse, TokenUrl,
};
use serde_json::{Map, Value};

use super::http::ProviderHttp;
use archmax_config::settings::oidc::OidcSettings;

/// How often at most the provider's keys are read again for a token signed with a key
/// the runner does not know (milliseconds).
pub const KEYS_REFRESH_MS: u64 = 60_000;
/// The pause after the first failed read of the provider (milliseconds).
pub const FIRST_PAUSE_MS: u64 = 1_000;
/// The longest pause between reads of a provider that keeps failing (milliseconds).
pub const LONGEST_PAUSE_MS: u64 = 60_000;

/// How long the provider is left alone after reads of it failed: each failure doubles
/// the pause, from [`FIRST_PAUSE_MS`] up to [`LONGEST_PAUSE_MS`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Failed reads since the last one that worked.
    failures: u32,
    /// When the provider may be read again (server clock, milliseconds).
    retry_at_ms: u64,
}

impl Backoff {
    /// Counts a failed read at `now_ms`: the pause that starts.
    pub fn failed(&mut self, now_ms: u64) -> u64 {
        let pause = FIRST_PAUSE_MS.saturating_mul(1 << self.failures.min(16)).min(LONGEST_PAUSE_MS);
        self.failures = self.failures.saturating_add(1);
        self.retry_at_ms = now_ms.saturating_add(pause);
        pause
    }

    /// A read worked: no pause.
    pub fn succeeded(&mut self) {
        *self = Backoff::default();
    }

    /// While paused at `now_ms`: the whole seconds (at least one) until the next read.
    pub fn paused(&self, now_ms: u64) -> Option<u64> {
        (now_ms < self.retry_at_ms).then(|| (self.retry_at_ms - now_ms).div_ceil(1000).max(1))
    }
}

/// The ID token signature algorithms taken: the asymmetric ones the library verifies,
/// never a MAC under the client secret, never `none`.
const SIGNING_ALGORITHMS: [CoreJwsSigningAlgorithm; 10] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EcdsaP521Sha512,
    CoreJwsSigningAlgorithm::EdDsa,
];

type Client = CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet, EndpointNotSet>;

/// What discovery found: the client to the provider's endpoints with its keys.
struct Discovered {
    client: Client,
    issuer: IssuerUrl,
    auth_uri: AuthUrl,
    token_uri: TokenUrl,
    jwks_uri: JsonWebKeySetUrl,
    /// When the keys were read (server clock, milliseconds).
    keys_read_ms: u64,
}

/// Why a sign-in through the provider failed on the provider's side or in its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderRefusal {
    /// Discovery or the keys could not be read; the provider is tried again in
    /// `retry_in_seconds`.
    Unreachable {
        retry_in_seconds: u64,
    },
    /// The token endpoint refused the code (used before, expired, or its PKCE verifier).
    CodeRefused,
    /// The token endpoint answered without an ID token.
    NoIdToken,
    /// The ID token's signature is by no key the provider publishes, or does not verify.
    Signature,
    Issuer,
    Audience,
    Expired,
    Nonce,
    /// `at_hash` does not match the access token.
    AccessTokenHash,
    /// Anything else wrong with the token.
    Malformed,
}

/// The provider of `[inbox.oidc]`, with the client secret read from the environment.
pub struct Provider {
    pub settings: OidcSettings,
    secret: String,
    redirect: RedirectUrl,
    http: ProviderHttp,
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
    /// The pause after failed reads (held only briefly, never across a read).
    backoff: std::sync::Mutex<Backoff>,
}

impl Provider {
    /// The provider of `settings`: its client secret from `env` (refused when unset or
    /// empty), its redirect URL from `settings` or `public_url`.
    pub fn configure(
        settings: &OidcSettings,
        public_url: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Provider, String> {
        let variable = &settings.client_secret_env;
        let secret = env(variable).filter(|secret| !secret.trim().is_empty()).ok_or_else(|| {
            format!(
                "[inbox.oidc] takes the client secret from {variable}, which is not set or empty; set it to the secret the provider issued for client `{}`, or remove [inbox.oidc] from archmax.toml",
                settings.client_id
            )
        })?;
        let redirect = settings.redirect_url(public_url).ok_or_else(|| {
            "[inbox.oidc] needs to know where the provider sends people back: set `[serve] public_url` (the callback is <public_url>/inbox/oidc/callback) or `redirect_url` in [inbox.oidc]".to_string()
        })?;
        let redirect = RedirectUrl::new(redirect.clone())
            .map_err(|error| format!("[inbox.oidc]: the redirect URL `{redirect}` is not a URL: {error}"))?;
        IssuerUrl::new(settings.issuer.clone())
            .map_err(|error| format!("[inbox.oidc]: the issuer `{}` is not a URL: {error}", settings.issuer))?;
        Ok(Provider {
            settings: settings.clone(),
            secret: secret.trim().to_string(),
            redirect,
            // The configuration took plain http only for a loopback issuer.
            http: ProviderHttp::new(settings.issuer.starts_with("https://"))?,
            discovered: tokio::sync::Mutex::new(None),
            backoff: std::sync::Mutex::new(Backoff::default()),
        })
    }

    /// The client secret: every runner of the deployment holds it, the store never does.
    pub(super) fn secret(&self) -> &[u8] {
        self.secret.as_bytes()
    }

    /// While reads of the provider are paused after failures, at `now_ms`: the seconds
    /// until it is tried again.
    pub fn paused(&self, now_ms: u64) -> Option<u64> {
        self.backoff.lock().map_or(None, |backoff| backoff.paused(now_ms))
    }

    /// `Err` while reads of the provider are paused.
    fn not_paused(&self, now_ms: u64) -> Result<(), ProviderRefusal> {
        match self.paused(now_ms) {
            Some(retry_in_seconds) => Err(ProviderRefusal::Unreachable { retry_in_seconds }),
            None => Ok(()),
        }
    }

    /// Records how a read of the provider at `now_ms` went: `Err` (logged, with the pause
    /// that starts) when it failed.
    fn read_went<T>(&self, read: Result<T, String>, what: &str, now_ms: u64) -> Result<T, ProviderRefusal> {
        let Ok(mut backoff) = self.backoff.lock() else {
            return read.map_err(|_| ProviderRefusal::Unreachable { retry_in_seconds: FIRST_PAUSE_MS / 1000 });
        };
        match read {
            Ok(value) => {
                backoff.succeeded();
                Ok(value)
            }
            Err(problem) => {
                let pause = backoff.failed(now_ms);
                let retry_in_seconds = pause.div_ceil(1000);
                tracing::error!(
                    issuer = self.settings.issuer.as_str(),
                    retry_in_seconds,
                    "{what} could not be read: {problem}"
                );
                Err(ProviderRefusal::Unreachable { retry_in_seconds })
            }
        }
    }

    /// Reads discovery and the keys unless kept; `Err` (logged) when the provider could
    /// not be read, or while reads are paused after failures. Several sign-ins at once
    /// read it once.
    async fn discovered(&self, now_ms: u64) -> Result<Arc<Discovered>, ProviderRefusal> {
        let mut kept = self.discovered.lock().await;
        if let Some(discovered) = kept.as_ref() {
            return Ok(Arc::clone(discovered));
        }
        self.not_paused(now_ms)?;
        let read = self.discover(now_ms).await;
        let discovered = Arc::new(self.read_went(read, "the OpenID Connect provider", now_ms)?);
        *kept = Some(Arc::clone(&discovered));
        Ok(discovered)
    }

    /// Reads discovery now (at start, so a wrong issuer shows in the log at once).
    pub async fn warm(&self, now_ms: u64) -> Result<(), String> {
        self.discovered(now_ms)
            .await
            .map(|_| ())
            .map_err(|_| format!("the OpenID Connect provider {} could not be read", self.settings.issuer))
    }

    async fn discover(&self, now_ms: u64) -> Result<Discovered, String> {
        let issuer = IssuerUrl::new(self.settings.issuer.clone()).map_err(|error| error.to_string())?;
        let metadata = CoreProviderMetadata::discover_async(issuer, &self.http).await.map_err(|error| {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            message
        })?;
        let token_uri = metadata
            .token_endpoint()
            .cloned()
            .ok_or_else(|| "its discovery document names no token_endpoint".to_string())?;
        let (issuer, auth_uri) = (metadata.issuer().clone(), metadata.authorization_endpoint().clone());
        let client = self.client(&issuer, metadata.jwks().clone(), &auth_uri, &token_uri);
        Ok(Discovered {
            client,
            issuer,
            auth_uri,
            token_uri,
            jwks_uri: metadata.jwks_uri().clone(),
            keys_read_ms: now_ms,
        })
    }

    /// The client of this deployment to the provider's endpoints, with its keys `keys`.
    fn client(&self, issuer: &IssuerUrl, keys: CoreJsonWebKeySet, auth_uri: &AuthUrl, token_uri: &TokenUrl) -> Client {
        CoreClient::new(ClientId::new(self.settings.client_id.clone()), issuer.clone(), keys)
            .set_client_secret(ClientSecret::new(self.secret.clone()))
            .set_auth_uri(auth_uri.clone())
            .set_token_uri(token_uri.clone())
            .set_redirect_uri(self.redirect.clone())
    }

    /// The URL that sends the browser to the provider with `state`, the nonce and the
    /// PKCE challenge (S256) of `verifier`.
    pub async fn authorization_url(
        &self,
        state: &str,
        nonce: &str,
        verifier: &str,
        now_ms: u64,
    ) -> Result<String, ProviderRefusal> {
        let discovered = self.discovered(now_ms).await?;
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.to_string()));
        let (state, nonce) = (state.to_string(), nonce.to_string());
        let mut request = discovered
            .client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(state),
                move || Nonce::new(nonce),
            )
            .set_pkce_challenge(challenge);
        for scope in &self.settings.scopes {
            request = request.add_scope(OAuthScope::new(scope.clone()));
        }
        Ok(request.url().0.to_string())
    }

    /// Redeems `code` with `verifier` and checks the ID token (nonce `nonce`, clock
    /// `now_ms`): its claims, as signed.
    pub async fn redeem(
        &self,
        code: &str,
        verifier: &str,
        nonce: &str,
        now_ms: u64,
    ) -> Result<Map<String, Value>, ProviderRefusal> {
        let discovered = self.discovered(now_ms).await?;
        let answer = discovered
            .client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()))
            .request_async(&self.http)
            .await
            .map_err(|error| {
                tracing::warn!(
                    issuer = self.settings.issuer.as_str(),
                    "the provider refused an authorization code: {error}"
                );
                ProviderRefusal::CodeRefused
            })?;
        let id_token = answer.id_token().ok_or(ProviderRefusal::NoIdToken)?;
        let nonce = Nonce::new(nonce.to_string());
        let discovered = match self.check(&discovered, id_token, &nonce, now_ms) {
            Err(ProviderRefusal::Signature) if unknown_key(&discovered, id_token, now_ms) => {
                // Perhaps the provider rotated its keys: read them once more.
                let refreshed = self.refresh_keys(&discovered, now_ms).await?;
                self.check(&refreshed, id_token, &nonce, now_ms)?;
                refreshed
            }
            Err(refusal) => return Err(refusal),
            Ok(()) => discovered,
        };
        let verifier = verifier_of(&discovered.client, now_ms);
        let claims = id_token.claims(&verifier, &nonce).map_err(|_| ProviderRefusal::Malformed)?;
        if let Some(expected) = claims.access_token_hash() {
            let algorithm = id_token.signing_alg().map_err(|_| ProviderRefusal::Malformed)?;
            let key = id_token.signing_key(&verifier).map_err(|_| ProviderRefusal::Signature)?;
            let actual = AccessTokenHash::from_token(answer.access_token(), algorithm, key)
                .map_err(|_| ProviderRefusal::AccessTokenHash)?;
            if actual != *expected {
                return Err(ProviderRefusal::AccessTokenHash);
            }
        }
        payload(&id_token.to_string()).ok_or(ProviderRefusal::Malformed)
    }

    /// Checks the token's signature and claims against `discovered`'s keys.
    fn check(
        &self,
        discovered: &Discovered,
        id_token: &CoreIdToken,
        nonce: &Nonce,
        now_ms: u64,
    ) -> Result<(), ProviderRefusal> {
        let verifier = verifier_of(&discovered.client, now_ms);
        id_token.claims(&verifier, nonce).map(|_| ()).map_err(|error| {
            tracing::warn!(issuer = self.settings.issuer.as_str(), "an ID token was refused: {error}");
            refusal_of(&error)
        })
    }

    /// Reads the provider's keys again, unless they were read within [`KEYS_REFRESH_MS`].
    async fn refresh_keys(&self, seen: &Arc<Discovered>, now_ms: u64) -> Result<Arc<Discovered>, ProviderRefusal> {
        let mut kept = self.discovered.lock().await;
        if let Some(current) = kept.as_ref()
            && (!Arc::ptr_eq(current, seen) || now_ms.saturating_sub(current.keys_read_ms) < KEYS_REFRESH_MS)
        {
            // Another sign-in read them meanwhile, or they are fresh enough.
            return Ok(Arc::clone(current));
        }
        self.not_paused(now_ms)?;
        let read = CoreJsonWebKeySet::fetch_async(&seen.jwks_uri, &self.http).await.map_err(|error| error.to_string());
        let keys = self.read_went(read, "the provider's keys", now_ms)?;
        let refreshed = Arc::new(Discovered {
            client: self.client(&seen.issuer, keys, &seen.auth_uri, &seen.token_uri),
            issuer: seen.issuer.clone(),
            auth_uri: seen.auth_uri.clone(),
            token_uri: seen.token_uri.clone(),
            jwks_uri: seen.jwks_uri.clone(),
            keys_read_ms: now_ms,
        });
        *kept = Some(Arc::clone(&refreshed));
        Ok(refreshed)
    }
}

/// Whether the token names a key the kept set lacks (or none of several it holds).
fn unknown_key(discovered: &Discovered, id_token: &CoreIdToken, now_ms: u64) -> bool {
    let verifier = verifier_of(&discovered.client, now_ms);
    matches!(
        id_token.signing_key(&verifier),
        Err(SignatureVerificationError::NoMatchingKey | SignatureVerificationError::AmbiguousKeyId(_))
    )
}

/// The library's ID token verifier for `client` on the server's clock, asymmetric
/// signatures only.
fn verifier_of(client: &Client, now_ms: u64) -> openidconnect::core::CoreIdTokenVerifier<'_> {
    let now = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(now_ms as i64).unwrap_or_default();
    client.id_token_verifier().set_allowed_algs(SIGNING_ALGORITHMS).set_time_fn(move || now)
}

fn refusal_of(error: &ClaimsVerificationError) -> ProviderRefusal {
    match error {
        ClaimsVerificationError::Expired(_) => ProviderRefusal::Expired,
        ClaimsVerificationError::InvalidAudience(_) => ProviderRefusal::Audience,
        ClaimsVerificationError::InvalidIssuer(_) => ProviderRefusal::Issuer,
        ClaimsVerificationError::InvalidNonce(_) => ProviderRefusal::Nonce,
        ClaimsVerificationError::SignatureVerification(_) => ProviderRefusal::Signature,
        _ => ProviderRefusal::Malformed,
    }
}

/// The claims of a compact JWS whose signature was verified: its payload, as JSON.
fn payload(compact: &str) -> Option<Map<String, Value>> {
    use base64::Engine;
    let encoded = compact.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded.trim_end_matches('=')).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(claims) => Some(claims),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failed_read_doubles_the_pause_from_one_second_up_to_a_minute_and_a_good_read_ends_it() {
        let mut backoff = Backoff::default();
        let now = 1_741_435_200_000;
        assert_eq!(backoff.paused(now), None, "never failed");
        let pauses: Vec<u64> = (0..9).map(|_| backoff.failed(now)).collect();
        assert_eq!(pauses, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
        assert_eq!(backoff.paused(now), Some(60));
        assert_eq!(backoff.paused(now + 59_001), Some(1), "a part of a second counts as one");
        assert_eq!(backoff.paused(now + 60_000), None, "the pause is over");
        for _ in 0..100 {
            backoff.failed(now);
        }
        assert_eq!(backoff.paused(now), Some(60), "many failures stay at the cap");
        backoff.succeeded();
        assert_eq!(backoff.paused(now), None);
        assert_eq!(backoff.failed(now), 1_000, "after a good read, the first pause again");
    }
}
