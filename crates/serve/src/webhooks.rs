//! Webhook senders: who may fire a host trigger (`POST /v1/triggers/{trigger}`).
//!
//! A trigger whose declaration names a `connection:` is fired by a system, not a person:
//! its sender proves itself with an HMAC-SHA256 signature of the body, keyed by a secret
//! from the environment variable its `[connections.<slug>]` entry in `archmax.toml`
//! names (see [`archmax_config::settings`]). The signature header holds
//! `sha256=<hex>` (or the bare hex digest); with a `timestamp_header` the signed bytes are
//! `<timestamp>.<body>`, a timestamp further than `tolerance_seconds` from now is
//! refused, and a signature accepted once is refused for the rest of its window, so a
//! captured request cannot be sent again. The accepted signatures are kept in the session
//! store as shared records ([`RecordKind::WebhookReplay`]) until their window closes, so
//! every runner on one store (and a runner after a restart) refuses the replay; the
//! store's capacity for them bounds a flood (past it: 429 until old ones expire). The
//! record is claimed when the signature passes (so two copies sent at once cannot both
//! run), and handed back as a [`ReplayClaim`]: when the firing is then refused after all
//! (an undeclared member, a busy session, a store error: any answer that is not 2xx) the
//! caller [releases](Connections::release) it, so the sender's honest retry of the same
//! signed request is not taken for a replay. Without a timestamp a captured request stays
//! valid, which the host is warned of at start. A trigger without a connection takes a
//! bearer token with the `start` scope, like every other turn.
//!
//! The one thing to know: a refused signature is logged (connection, trigger, reason)
//! and answered 401 before the body is even parsed; nothing of it reaches a session.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use archmax_config::settings::{Connection, RunnerSettings};
use archmax_vm::session::SessionStore;
use archmax_vm::session::StoreError;
use archmax_vm::session::records::{Record, RecordKind};

use crate::error::ApiError;

type HmacSha256 = Hmac<Sha256>;

/// One connection with its secret, read from the environment at start.
struct Verifier {
    connection: Connection,
    secret: Vec<u8>,
}

/// Every configured connection, ready to check signatures.
#[derive(Default)]
pub struct Connections {
    verifiers: BTreeMap<String, Verifier>,
}

/// A signature that passed, with the second its timestamp's window closes: the replay
/// guard keeps it in the store until then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignedWindow {
    signature: [u8; 32],
    closes_at_seconds: i64,
}

/// The replay record of a signature just accepted: kept when the firing is admitted,
/// given back with [`Connections::release`] when it is refused after all.
#[derive(Debug)]
#[must_use = "a refused firing must release its replay record"]
pub struct ReplayClaim {
    key: String,
}

/// The shortest webhook secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// Why a webhook's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    #[error("the `{0}` header is missing")]
    MissingSignature(String),
    #[error("the `{0}` header is not `sha256=<64 hex digits>`")]
    MalformedSignature(String),
    #[error("the `{0}` header is missing")]
    MissingTimestamp(String),
    #[error("the `{0}` header is not a Unix time in seconds")]
    MalformedTimestamp(String),
    #[error("the timestamp is {0} s away from the server's clock (more than the connection's tolerance)")]
    Stale(i64),
    #[error("the signature does not match the body")]
    Mismatch,
    #[error("this signed request was accepted before; a replay is refused")]
    Replayed,
    #[error("too many signed requests within the tolerance; try again shortly")]
    Flooded,
    #[error("the replay guard could not reach the session store; send it again shortly")]
    Unguarded,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        formatter.debug_list().entries(self.verifiers.keys()).finish()
    }
}

/// A signature header's digest: `sha256=<hex>` or the bare hex.
fn parse_hex_digest(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    crate::auth::parse_digest(text.strip_prefix("sha256=").unwrap_or(text))
}

/// The `sha256=<hex>` signature of `body` under `secret`, with the timestamp prefix
/// when given: what a sender puts in its signature header.
pub fn sign(secret: &[u8], timestamp: Option<&str>, body: &[u8]) -> String {
    let mut mac = mac_of(secret);
    if let Some(timestamp) = timestamp {
        mac.update(timestamp.as_bytes());
        mac.update(b".");
    }
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex = archmax_program::hex::hex(&digest);
    format!("sha256={hex}")
}

fn mac_of(secret: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; `new_from_slice` only fails for fixed-size keys.
    match HmacSha256::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

impl Connections {
    /// Reads each connection's secret through `env`; a secret that is unset or empty is
    /// an error naming the connection and the variable, so a server never starts with
    /// a webhook nobody can sign.
    pub fn configure(settings: &RunnerSettings, env: impl Fn(&str) -> Option<String>) -> Result<Connections, String> {
        let mut verifiers = BTreeMap::new();
        for (slug, connection) in &settings.connections {
            let secret = match env(&connection.secret_env) {
                Some(secret) if secret.len() >= MIN_SECRET_BYTES => secret.into_bytes(),
                Some(secret) if !secret.is_empty() => {
                    return Err(format!(
                        "connection `{slug}`: the secret in {} is {} bytes; use at least {MIN_SECRET_BYTES} random bytes (such as `openssl rand -hex 32`)",
                        connection.secret_env,
                        secret.len()
                    ));
                }
                _ => {
                    return Err(format!(
                        "connection `{slug}` takes its webhook secret from {}, which is not set; set it, or remove [connections.{slug}] from archmax.toml",
                        connection.secret_env
                    ));
                }
            };
            verifiers.insert(slug.clone(), Verifier { connection: connection.clone(), secret });
        }
        Ok(Connections { verifiers })
    }

    /// The connections that sign no timestamp: a captured request of theirs can be sent
    /// again at any time, so the host is warned at start.
    pub fn without_replay_guard(&self) -> Vec<&str> {
        self.verifiers
            .iter()
            .filter(|(_, verifier)| verifier.connection.timestamp_header.is_none())
            .map(|(slug, _)| slug.as_str())
            .collect()
    }

    /// Keeps an accepted signature in `store` until its window closes; refuses one that
    /// any runner on the store accepted before.
    async fn remember(
        store: &dyn SessionStore,
        window: SignedWindow,
        now_seconds: i64,
    ) -> Result<ReplayClaim, SignatureRefusal> {
        let millis = |seconds: i64| u64::try_from(seconds.max(0)).unwrap_or(0).saturating_mul(1000);
        // Live through the last second the timestamp is accepted in.
        let record = Record {
            kind: RecordKind::WebhookReplay,
            key: archmax_program::hex::hex(&window.signature),
            value: Vec::new(),
            expires_ms: millis(window.closes_at_seconds.saturating_add(1)),
        };
        match store.claim_record(&record, millis(now_seconds)).await {
            Ok(true) => Ok(ReplayClaim { key: record.key }),
            Ok(false) => Err(SignatureRefusal::Replayed),
            Err(StoreError::RecordsFull { .. }) => Err(SignatureRefusal::Flooded),
            Err(error) => {
                tracing::error!("the webhook replay guard could not reach the session store: {error}");
                Err(SignatureRefusal::Unguarded)
            }
        }
    }

    pub fn contains(&self, slug: &str) -> bool {
        self.verifiers.contains_key(slug)
    }

    /// Checks a webhook from connection `slug`: its signature over `body` (and its
    /// timestamp, when the connection signs one, against `now_seconds`), then, for a
    /// timestamped one, that no runner on `store` accepted it before. A timestamped one's
    /// replay record is claimed and returned: [release](Connections::release) it when the
    /// firing is refused after all.
    pub async fn verify(
        &self,
        store: &dyn SessionStore,
        slug: &str,
        headers: &HeaderMap,
        body: &[u8],
        now_seconds: i64,
    ) -> Result<Option<ReplayClaim>, ApiError> {
        let Some(window) = self.check(slug, headers, body, now_seconds)? else { return Ok(None) };
        Connections::remember(store, window, now_seconds).await.map(Some).map_err(refused)
    }

    /// Gives back the replay record of a firing that was refused after its signature
    /// passed, so the same signed request may be sent again. A store that cannot remove
    /// it is logged: the retry is then refused as a replay until the window closes.
    pub async fn release(store: &dyn SessionStore, claim: ReplayClaim) {
        if let Err(error) = store.remove_record(RecordKind::WebhookReplay, &claim.key).await {
            tracing::error!(
                "a refused webhook's replay record could not be removed (a retry of it is refused until its window closes): {error}"
            );
        }
    }

    /// The signature check of [`Connections::verify`] alone: the window to guard against
    /// a replay, for a timestamped signature.
    pub fn check(
        &self,
        slug: &str,
        headers: &HeaderMap,
        body: &[u8],
        now_seconds: i64,
    ) -> Result<Option<SignedWindow>, ApiError> {
        let Some(verifier) = self.verifiers.get(slug) else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "connection.unconfigured",
                format!(
                    "the trigger's connection `{slug}` is not configured on this server; add [connections.{slug}] to archmax.toml"
                ),
            ));
        };
        verifier.check(headers, body, now_seconds).map_err(refused)
    }
}

/// The answer to a refused webhook.
fn refused(refusal: SignatureRefusal) -> ApiError {
    let status = match refusal {
        SignatureRefusal::Flooded => StatusCode::TOO_MANY_REQUESTS,
        SignatureRefusal::Unguarded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::UNAUTHORIZED,
    };
    ApiError::new(status, "webhook.bad-signature", format!("webhook refused: {refusal}"))
}

impl Verifier {
    /// Checks the signature; with a signed timestamp, returns the signature and when its
    /// window closes, for the replay guard.
    fn check(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now_seconds: i64,
    ) -> Result<Option<SignedWindow>, SignatureRefusal> {
        let connection = &self.connection;
        let header_text = |name: &str| headers.get(name).map(|value| value.to_str().map(str::trim));
        let signature = match header_text(&connection.signature_header) {
            None => return Err(SignatureRefusal::MissingSignature(connection.signature_header.clone())),
            Some(value) => value
                .ok()
                .and_then(parse_hex_digest)
                .ok_or_else(|| SignatureRefusal::MalformedSignature(connection.signature_header.clone()))?,
        };
        let mut mac = mac_of(&self.secret);
        let mut window = None;
        if let Some(name) = &connection.timestamp_header {
            let stamp = match header_text(name) {
                None => return Err(SignatureRefusal::MissingTimestamp(name.clone())),
                Some(value) => {
                    value.ok().filter(|text| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()))
                }
            };
            let stamp = stamp.ok_or_else(|| SignatureRefusal::MalformedTimestamp(name.clone()))?;
            let seconds: i64 = stamp.parse().map_err(|_| SignatureRefusal::MalformedTimestamp(name.clone()))?;
            let skew = now_seconds.saturating_sub(seconds);
            if skew.unsigned_abs() > connection.tolerance_seconds {
                return Err(SignatureRefusal::Stale(skew));
            }
            mac.update(stamp.as_bytes());
            mac.update(b".");
            window = Some(seconds.saturating_add(connection.tolerance_seconds as i64));
        }
        mac.update(body);
        // `verify_slice` compares in constant time.
        mac.verify_slice(&signature).map_err(|_| SignatureRefusal::Mismatch)?;
        Ok(window.map(|closes_at_seconds| SignedWindow { signature, closes_at_seconds }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use archmax_config::settings::parse_runner_settings;
    use archmax_program::source::FileId;

    fn connections() -> Connections {
        let text = r#"
[connections.plain]
secret_env = "PLAIN_SECRET"

[connections.stamped]
secret_env = "STAMPED_SECRET"
signature_header = "X-Signature"
timestamp_header = "X-Timestamp"
tolerance_seconds = 60
"#;
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        Connections::configure(&settings, |name| Some(format!("secret of {name}"))).expect("both secrets set")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().expect("a header value"));
        }
        headers
    }

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        // Key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            sign(b"Jefe", None, b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_good_signature_passes_and_every_bad_one_is_refused_with_its_reason() {
        let connections = connections();
        let body = br#"{"order":"A-1"}"#;
        let good = sign(b"secret of PLAIN_SECRET", None, body);
        let bare = good.trim_start_matches("sha256=").to_uppercase();
        assert!(connections.check("plain", &headers(&[("x-archmax-signature", &good)]), body, 0).is_ok());
        assert!(connections.check("plain", &headers(&[("x-archmax-signature", &bare)]), body, 0).is_ok(), "bare hex");
        let refusal = |found: Result<Option<SignedWindow>, ApiError>| {
            let error = found.expect_err("refused");
            (error.status, error.message)
        };
        let (status, message) = refusal(connections.check("plain", &HeaderMap::new(), body, 0));
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(message.contains("`x-archmax-signature` header is missing"), "{message}");
        let (_, message) =
            refusal(connections.check("plain", &headers(&[("x-archmax-signature", "sha256=zz")]), body, 0));
        assert!(message.contains("is not `sha256="), "{message}");
        let tampered = br#"{"order":"A-2"}"#;
        let (_, message) =
            refusal(connections.check("plain", &headers(&[("x-archmax-signature", &good)]), tampered, 0));
        assert!(message.contains("does not match"), "{message}");
        let other_key = sign(b"another secret", None, body);
        let (_, message) =
            refusal(connections.check("plain", &headers(&[("x-archmax-signature", &other_key)]), body, 0));
        assert!(message.contains("does not match"), "{message}");
        let (status, message) = refusal(connections.check("nobody", &HeaderMap::new(), body, 0));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(message.contains("[connections.nobody]"), "{message}");
    }

    #[tokio::test]
    async fn a_timestamped_signature_covers_the_time_and_refuses_stale_or_replayed_times() {
        let connections = connections();
        let store = archmax_vm::session::memory::MemoryStore::new();
        let body = b"{}";
        let secret = b"secret of STAMPED_SECRET";
        let now = 1_767_605_400;
        let stamp = now.to_string();
        let good = sign(secret, Some(&stamp), body);
        let sent = headers(&[("x-signature", &good), ("x-timestamp", &stamp)]);
        assert!(connections.verify(&store, "stamped", &sent, body, now).await.is_ok());
        let again = connections.verify(&store, "stamped", &sent, body, now + 60).await.expect_err("sent twice");
        assert!(again.message.contains("replay is refused"), "{}", again.message);
        let late = connections.verify(&store, "stamped", &sent, body, now + 61).await.expect_err("replayed later");
        assert!(late.message.contains("61 s away"), "{}", late.message);
        let later_body = br#"{"n":2}"#;
        let fresh = sign(secret, Some(&stamp), later_body);
        let fresh_headers = headers(&[("x-signature", &fresh), ("x-timestamp", &stamp)]);
        assert!(
            connections.verify(&store, "stamped", &fresh_headers, later_body, now + 60).await.is_ok(),
            "within the tolerance"
        );
        assert_eq!(connections.without_replay_guard(), ["plain"]);
        // The same signature under another time does not pass: the time is signed.
        let moved = headers(&[("x-signature", &good), ("x-timestamp", &(now + 1).to_string())]);
        assert!(connections.verify(&store, "stamped", &moved, body, now).await.is_err());
        let unsigned_time = sign(secret, None, body);
        let plain = headers(&[("x-signature", &unsigned_time), ("x-timestamp", &stamp)]);
        assert!(connections.verify(&store, "stamped", &plain, body, now).await.is_err());
        let missing = connections
            .verify(&store, "stamped", &headers(&[("x-signature", &good)]), body, now)
            .await
            .expect_err("no time");
        assert!(missing.message.contains("`x-timestamp` header is missing"), "{}", missing.message);
        let words = headers(&[("x-signature", &good), ("x-timestamp", "yesterday")]);
        let malformed = connections.verify(&store, "stamped", &words, body, now).await.expect_err("not a number");
        assert!(malformed.message.contains("not a Unix time"), "{}", malformed.message);
    }

    #[tokio::test]
    async fn a_released_signature_is_accepted_again_and_a_kept_one_is_not() {
        let connections = connections();
        let store = archmax_vm::session::memory::MemoryStore::new();
        let (body, now) = (b"{}", 1_767_605_400);
        let stamp = now.to_string();
        let sent = headers(&[
            ("x-signature", &sign(b"secret of STAMPED_SECRET", Some(&stamp), body)),
            ("x-timestamp", &stamp),
        ]);
        let claim = connections.verify(&store, "stamped", &sent, body, now).await.expect("accepted").expect("a claim");
        Connections::release(&store, claim).await;
        let kept = connections.verify(&store, "stamped", &sent, body, now).await.expect("accepted again");
        assert!(kept.is_some());
        assert!(connections.verify(&store, "stamped", &sent, body, now).await.is_err(), "a kept one is a replay");
    }

    #[test]
    fn a_connection_whose_secret_is_unset_stops_the_start_naming_the_variable() {
        let (settings, _) = parse_runner_settings(FileId(0), "[connections.mail]\nsecret_env = \"MAIL_HOOK_SECRET\"\n");
        let error = Connections::configure(&settings, |_| None).expect_err("unset");
        assert!(error.contains("MAIL_HOOK_SECRET") && error.contains("connection `mail`"), "{error}");
        assert!(Connections::configure(&settings, |_| Some(String::new())).is_err(), "an empty secret");
        let short = Connections::configure(&settings, |_| Some("short".into())).expect_err("too short");
        assert!(short.contains("5 bytes") && short.contains("at least 16"), "{short}");
        let configured = Connections::configure(&settings, |_| Some("zebra-secret-of-length".into())).expect("set");
        let shown = format!("{configured:?}");
        assert!(shown.contains("mail") && !shown.contains("zebra"), "Debug never shows a secret: {shown}");
    }
}
