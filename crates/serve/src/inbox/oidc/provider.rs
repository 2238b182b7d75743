//! The configured OpenID Connect provider: its discovery document and keys, the
//! authorization request, the code exchange, and the checks of the ID token.
//!
//! Discovery (`<issuer>/.well-known/openid-configuration`, then its `jwks_uri`) is read
//! once and kept; when it could not be read, the next sign-in reads it again. An ID token
//! signed with a key the kept set lacks makes the runner read the key set once more (at
//! most once per [`KEYS_REFRESH_MS`]), so a provider's key rotation needs no restart.
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
    /// Discovery or the keys could not be read.
    Unreachable,
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
        })
    }

    /// The client secret: every runner of the deployment holds it, the store never does.
    pub(super) fn secret(&self) -> &[u8] {
        self.secret.as_bytes()
    }

    /// Reads discovery and the keys unless kept; `Err` (logged) when the provider could
    /// not be read. Several sign-ins at once read it once.
    async fn discovered(&self, now_ms: u64) -> Result<Arc<Discovered>, ProviderRefusal> {
        let mut kept = self.discovered.lock().await;
        if let Some(discovered) = kept.as_ref() {
            return Ok(Arc::clone(discovered));
        }
        let discovered = Arc::new(self.discover(now_ms).await.map_err(|problem| {
            tracing::error!(
                issuer = self.settings.issuer.as_str(),
                "the OpenID Connect provider could not be read: {problem}"
            );
            ProviderRefusal::Unreachable
        })?);
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
        let keys = CoreJsonWebKeySet::fetch_async(&seen.jwks_uri, &self.http).await.map_err(|error| {
            tracing::error!(issuer = self.settings.issuer.as_str(), "the provider's keys could not be read: {error}");
            ProviderRefusal::Unreachable
        })?;
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
