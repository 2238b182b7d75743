//! An OpenID Connect provider for the tests, on loopback: discovery, a key set, an
//! authorize endpoint that signs in whoever the test says (no login form) and sends the
//! browser back with a code, and a token endpoint that checks the client's secret
//! (HTTP Basic), the code (once) and its PKCE verifier (S256) and answers with an ID
//! token signed by an Ed25519 key (EdDSA).
//!
//! A test steers what the next token looks like ([`Twist`]): another audience or
//! issuer, an expired token, another nonce, a key the set does not publish, a wrong
//! `at_hash`, a challenge the verifier will not match. It can also be down (discovery
//! and keys answered 503), and counts the discovery requests it gets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256, Sha512};

pub const CLIENT_ID: &str = "archmax-inbox";
pub const CLIENT_SECRET: &str = "the-client-secret-of-the-inbox-tests";
/// The instant tokens are issued at: the inbox tests' clock at its start.
pub const ISSUED_AT: u64 = 1_741_435_200;

/// What the next ID token gets wrong.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Twist {
    #[default]
    None,
    Audience,
    Issuer,
    Expired,
    Nonce,
    /// Signed by a key the key set does not publish.
    UnpublishedKey,
    AccessTokenHash,
    /// The code's challenge is not the one the client sent: its verifier is refused.
    Challenge,
}

struct Issued {
    challenge: String,
    nonce: String,
    redirect_uri: String,
    claims: Map<String, Value>,
}

struct Provider {
    issuer: String,
    /// The key set published and the key tokens are signed with (its `kid`).
    published: Mutex<Vec<(String, SigningKey)>>,
    signing: Mutex<(String, SigningKey)>,
    /// Who the authorize endpoint signs in (the ID token's claims besides the standard ones).
    user: Mutex<Map<String, Value>>,
    twist: Mutex<Twist>,
    codes: Mutex<HashMap<String, Issued>>,
    /// How many token requests were refused for their PKCE verifier.
    refused_verifiers: Mutex<u32>,
    next_code: Mutex<u64>,
    /// Whether discovery and the keys are answered 503.
    down: AtomicBool,
    /// How many discovery requests arrived.
    discovery_reads: AtomicU32,
}

/// A running test provider.
pub struct TestProvider {
    pub issuer: String,
    state: Arc<Provider>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

impl TestProvider {
    pub async fn start() -> TestProvider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
        let issuer = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(Provider {
            issuer: issuer.clone(),
            published: Mutex::new(vec![("key-1".into(), key(1))]),
            signing: Mutex::new(("key-1".into(), key(1))),
            user: Mutex::new(Map::new()),
            twist: Mutex::new(Twist::None),
            codes: Mutex::new(HashMap::new()),
            refused_verifiers: Mutex::new(0),
            next_code: Mutex::new(0),
            down: AtomicBool::new(false),
            discovery_reads: AtomicU32::new(0),
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&state));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        TestProvider { issuer, state, stop: Some(stop) }
    }

    /// Signs in `claims` (such as `{"email": …}`) at the next authorization.
    pub fn sign_in_as(&self, claims: Value) {
        *self.state.user.lock().expect("user") = claims.as_object().cloned().unwrap_or_default();
    }

    pub fn twist(&self, twist: Twist) {
        *self.state.twist.lock().expect("twist") = twist;
    }

    /// Publishes a new key and signs with it from now on (the old one is withdrawn).
    pub fn rotate_key(&self) {
        *self.state.published.lock().expect("keys") = vec![("key-2".into(), key(2))];
        *self.state.signing.lock().expect("signing") = ("key-2".into(), key(2));
    }

    /// Answers discovery and the keys 503 (`true`) or as usual.
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// How many discovery requests arrived so far.
    pub fn discovery_reads(&self) -> u32 {
        self.state.discovery_reads.load(Ordering::SeqCst)
    }

    pub fn refused_verifiers(&self) -> u32 {
        *self.state.refused_verifiers.lock().expect("count")
    }

    pub fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn discovery(State(provider): State<Arc<Provider>>) -> Response {
    provider.discovery_reads.fetch_add(1, Ordering::SeqCst);
    if provider.down.load(Ordering::SeqCst) {
        return refused(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable");
    }
    let issuer = &provider.issuer;
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["EdDSA"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
    .into_response()
}

async fn jwks(State(provider): State<Arc<Provider>>) -> Response {
    if provider.down.load(Ordering::SeqCst) {
        return refused(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable");
    }
    let keys: Vec<Value> = provider
        .published
        .lock()
        .expect("keys")
        .iter()
        .map(|(kid, key)| {
            json!({
                "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes()),
            })
        })
        .collect();
    axum::Json(json!({ "keys": keys })).into_response()
}

fn refused(status: StatusCode, error: &str) -> Response {
    (status, axum::Json(json!({ "error": error }))).into_response()
}

async fn authorize(State(provider): State<Arc<Provider>>, Query(query): Query<HashMap<String, String>>) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    if field("client_id") != CLIENT_ID
        || field("response_type") != "code"
        || field("code_challenge_method") != "S256"
        || field("code_challenge").is_empty()
        || !field("scope").split(' ').any(|scope| scope == "openid")
    {
        return refused(StatusCode::BAD_REQUEST, "invalid_request");
    }
    let code = {
        let mut next = provider.next_code.lock().expect("codes");
        *next += 1;
        format!("code-{next}")
    };
    let challenge = match *provider.twist.lock().expect("twist") {
        Twist::Challenge => URL_SAFE_NO_PAD.encode(Sha256::digest(b"another verifier")),
        _ => field("code_challenge"),
    };
    let claims = provider.user.lock().expect("user").clone();
    let issued = Issued { challenge, nonce: field("nonce"), redirect_uri: field("redirect_uri"), claims };
    provider.codes.lock().expect("codes").insert(code.clone(), issued);
    let back =
        format!("{}?code={}&state={}", field("redirect_uri"), crate::encode(&code), crate::encode(&field("state")));
    (StatusCode::SEE_OTHER, [(header::LOCATION, back)]).into_response()
}

async fn token(State(provider): State<Arc<Provider>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let expected = format!("Basic {}", STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}")));
    if headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()) != Some(expected.as_str()) {
        return refused(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("grant_type") != "authorization_code" {
        return refused(StatusCode::BAD_REQUEST, "unsupported_grant_type");
    }
    // A code is used once, whatever the outcome.
    let Some(issued) = provider.codes.lock().expect("codes").remove(&field("code")) else {
        return refused(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    if issued.redirect_uri != field("redirect_uri") {
        return refused(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    if URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes())) != issued.challenge {
        *provider.refused_verifiers.lock().expect("count") += 1;
        return refused(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    let access_token = format!("access-{}", field("code"));
    let id_token = provider.id_token(&issued, &access_token);
    axum::Json(json!({
        "access_token": access_token, "token_type": "Bearer", "expires_in": 3600, "id_token": id_token,
    }))
    .into_response()
}

impl Provider {
    fn id_token(&self, issued: &Issued, access_token: &str) -> String {
        let twist = self.twist.lock().expect("twist").clone();
        let hash = Sha512::digest(access_token.as_bytes());
        let at_hash = match twist {
            Twist::AccessTokenHash => URL_SAFE_NO_PAD.encode(&Sha512::digest(b"another token")[..32]),
            _ => URL_SAFE_NO_PAD.encode(&hash[..32]),
        };
        let mut claims = json!({
            "iss": if twist == Twist::Issuer { "https://elsewhere.example".to_string() } else { self.issuer.clone() },
            "sub": "user-1",
            "aud": if twist == Twist::Audience { "another-client" } else { CLIENT_ID },
            "iat": ISSUED_AT,
            "exp": if twist == Twist::Expired { ISSUED_AT - 60 } else { ISSUED_AT + 3600 },
            "nonce": if twist == Twist::Nonce { "another-nonce".to_string() } else { issued.nonce.clone() },
            "at_hash": at_hash,
        });
        if let Value::Object(map) = &mut claims {
            map.extend(issued.claims.clone());
        }
        let (kid, key) = match twist {
            Twist::UnpublishedKey => ("rogue".to_string(), key(9)),
            _ => self.signing.lock().expect("signing").clone(),
        };
        let header = json!({ "alg": "EdDSA", "typ": "JWT", "kid": kid });
        let signed =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = key.sign(signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }
}
