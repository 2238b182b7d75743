//! Sending one notification: signed, bounded in time, retried with backoff.
//!
//! Each attempt is a POST of the body with `X-Archmax-Timestamp` (Unix seconds, fresh for
//! each attempt) and `X-Archmax-Signature: sha256=<hex>`, the HMAC-SHA256 of
//! `<timestamp>.<body>` under the notifier's key: the scheme of incoming webhooks
//! ([`crate::webhooks::sign`]), so a receiver checks it as archmax checks a connection
//! with `timestamp_header = "X-Archmax-Timestamp"`. `X-Archmax-Delivery` is the same on
//! every attempt of one delivery, for a receiver to drop a repeat.
//!
//! The one thing to know: a network error, a timed-out attempt, 429 and 5xx are tried
//! again after the runtime's backoff (500 ms doubling to 8 s with up to a quarter more of
//! jitter, or the receiver's numeric `Retry-After`, at most 30 s) until `max_attempts`;
//! any other answer ends the delivery. Redirects are not followed, so a signed body only
//! ever goes to the address configured.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};

/// Where one delivery goes and how it is signed.
pub(crate) struct Target<'a> {
    pub client: &'a reqwest::Client,
    pub url: &'a str,
    pub secret: Option<&'a [u8]>,
    pub timeout: Duration,
    pub max_attempts: u32,
}

/// How a delivery ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer, after this many attempts.
    Delivered { attempts: u32, status: u16 },
    /// No 2xx answer: the last status (if any answer came) and why, after this many attempts.
    Failed { attempts: u32, status: Option<u16>, reason: String },
}

/// One attempt's result.
enum Attempt {
    Done(u16),
    /// Worth another try, after the receiver's `Retry-After` if it gave one.
    Retry {
        status: Option<u16>,
        reason: String,
        retry_after: Option<Duration>,
    },
    Refused {
        status: u16,
    },
}

/// Sends `body` to `target`, retrying as the module says; `now_seconds` gives each
/// attempt's timestamp.
pub(crate) async fn deliver(
    target: &Target<'_>,
    delivery_id: &str,
    event: &str,
    body: &[u8],
    now_seconds: impl Fn() -> i64,
) -> Outcome {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match attempt(target, delivery_id, event, body, now_seconds()).await {
            Attempt::Done(status) => return Outcome::Delivered { attempts, status },
            Attempt::Refused { status } => {
                return Outcome::Failed {
                    attempts,
                    status: Some(status),
                    reason: format!("the receiver answered {status}, which is not retried"),
                };
            }
            Attempt::Retry { status, reason, retry_after } => {
                if attempts >= target.max_attempts {
                    return Outcome::Failed { attempts, status, reason };
                }
                let delay = archmax_vm::model::backoff_delay(attempts - 1, retry_after, archmax_vm::model::jitter());
                tokio::time::sleep(delay).await;
            }
        }
    }
}

async fn attempt(target: &Target<'_>, delivery_id: &str, event: &str, body: &[u8], now_seconds: i64) -> Attempt {
    let timestamp = now_seconds.to_string();
    let mut request = target
        .client
        .post(target.url)
        .timeout(target.timeout)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header("x-archmax-event", event)
        .header("x-archmax-delivery", delivery_id)
        .header("x-archmax-timestamp", &timestamp)
        .body(body.to_vec());
    if let Some(secret) = target.secret {
        request = request.header("x-archmax-signature", crate::webhooks::sign(secret, Some(&timestamp), body));
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(archmax_vm::model::parse_retry_after);
            // The answer's body is not read: nothing in it is used.
            drop(response);
            judge(status, retry_after)
        }
        Err(error) => Attempt::Retry {
            status: None,
            // Never the URL: it may carry a token (a Slack webhook's does).
            reason: if error.is_timeout() {
                "the attempt timed out".to_string()
            } else if error.is_connect() {
                "the receiver could not be reached".to_string()
            } else {
                "the request failed on the network".to_string()
            },
            retry_after: None,
        },
    }
}

fn judge(status: StatusCode, retry_after: Option<Duration>) -> Attempt {
    if status.is_success() {
        Attempt::Done(status.as_u16())
    } else if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        Attempt::Retry {
            status: Some(status.as_u16()),
            reason: format!("the receiver answered {}", status.as_u16()),
            retry_after,
        }
    } else {
        Attempt::Refused { status: status.as_u16() }
    }
}

/// The client notifications are sent with: no redirects, the runtime's user agent, and a
/// connect bound; each attempt has its notifier's own timeout besides.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    archmax_vm::model::openai::install_tls_provider();
    reqwest::Client::builder()
        .user_agent(concat!("archmax/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|error| format!("the notifications' HTTP client could not be built: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_ends_5xx_and_429_retry_and_other_answers_are_final() {
        assert!(matches!(judge(StatusCode::NO_CONTENT, None), Attempt::Done(204)));
        for status in [StatusCode::INTERNAL_SERVER_ERROR, StatusCode::BAD_GATEWAY, StatusCode::TOO_MANY_REQUESTS] {
            assert!(matches!(judge(status, None), Attempt::Retry { .. }), "{status}");
        }
        for status in [StatusCode::BAD_REQUEST, StatusCode::UNAUTHORIZED, StatusCode::NOT_FOUND, StatusCode::FOUND] {
            assert!(matches!(judge(status, None), Attempt::Refused { .. }), "{status}");
        }
        let Attempt::Retry { retry_after, .. } = judge(StatusCode::TOO_MANY_REQUESTS, Some(Duration::from_secs(2)))
        else {
            panic!("429 is retried")
        };
        assert_eq!(retry_after, Some(Duration::from_secs(2)));
    }

    #[tokio::test]
    async fn a_receiver_nobody_listens_at_is_retried_until_the_attempts_are_used_and_the_url_is_not_told() {
        // A port that was open a moment ago and is closed now: connections are refused.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("loopback");
        let url = format!("http://{}/hook?token=secret-token", listener.local_addr().expect("address"));
        drop(listener);
        let client = client().expect("a client");
        let target =
            Target { client: &client, url: &url, secret: None, timeout: Duration::from_secs(5), max_attempts: 2 };
        let outcome = deliver(&target, "d1", "parked", b"{}", || 0).await;
        let Outcome::Failed { attempts, status, reason } = outcome else { panic!("nobody answers: {outcome:?}") };
        assert_eq!((attempts, status), (2, None));
        assert!(reason.contains("could not be reached") && !reason.contains("secret-token"), "{reason}");
    }
}
