//! One model call over HTTP, whatever the provider's protocol: the attempts, their time
//! bounds, the retries, and the reading of a whole or a streamed answer.
//!
//! The one thing to know: the adapters differ only in the request they build and in
//! how an answer reads ([`Wire`]); everything about getting an answer (the bound on each
//! attempt and on the state's whole budget, which failures are retried and after how
//! long, when a broken stream may be retried and when what was shown forbids it) is
//! here, once. 429, 5xx, connection failures and timed-out attempts are retried with
//! exponential backoff (honouring a numeric `Retry-After`); every other failure is
//! returned at once. Nothing read from the network can panic.

use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};

use super::openai::{RetryNotice, RetryObserver, excerpt};
use super::{ModelError, ModelResponse, TextSink};

pub(super) const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_CAP: Duration = Duration::from_secs(8);
const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);
/// An answer larger than this is refused rather than buffered.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The protocol an answer is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wire {
    /// OpenAI chat completions (and Azure OpenAI's, which are the same).
    ChatCompletions,
    /// Anthropic's Messages API.
    Messages,
}

/// A streamed answer being put together, in either protocol.
pub(super) trait StreamAssembler: Send {
    /// Reads `bytes` (any split); each piece of text goes to `on_text` at once.
    fn feed(&mut self, bytes: &[u8], on_text: &mut dyn FnMut(&str, Option<&str>)) -> Result<(), ModelError>;
    /// Characters of text handed on so far.
    fn forwarded(&self) -> usize;
    /// The whole answer, or why the stream did not make one.
    fn finish(self: Box<Self>) -> Result<ModelResponse, ModelError>;
    /// Whether a failure the stream reported (an error event) may be retried: only when
    /// no text was handed on and the provider called it passing (overloaded, rate limited).
    fn failure_is_passing(&self) -> bool {
        false
    }
}

impl Wire {
    fn assembler(self) -> Box<dyn StreamAssembler> {
        match self {
            Wire::ChatCompletions => Box::new(super::stream::Assembler::default()),
            Wire::Messages => Box::new(super::anthropic::stream::Assembler::default()),
        }
    }

    fn parse_whole(self, bytes: &[u8]) -> Result<ModelResponse, ModelError> {
        match self {
            Wire::ChatCompletions => super::openai::parse_response(bytes),
            Wire::Messages => super::anthropic::parse_message(bytes),
        }
    }

    /// The error a refused request is reported as: a content filter's refusal as such,
    /// everything else as its status and an excerpt of the body.
    fn status_error(self, status: u16, bytes: &[u8]) -> ModelError {
        if let Some(reason) = super::openai::content_filter_refusal(bytes) {
            return ModelError::ContentFilter(reason);
        }
        ModelError::Status { status, body: excerpt(bytes) }
    }
}

/// Where and how one adapter's calls go.
pub(super) struct Endpoint<'a> {
    pub client: &'a reqwest::Client,
    pub url: Url,
    /// Authentication and any extra headers the host configured.
    pub headers: HeaderMap,
    pub streaming: bool,
    pub wire: Wire,
    /// The bound on each attempt.
    pub request_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub on_retry: Option<&'a RetryObserver>,
}

/// How one attempt ended.
pub(super) enum Attempt {
    Done(ModelResponse),
    Fail(ModelError),
    /// Worth another try, after the server's `Retry-After` if it gave one.
    Retry(ModelError, Option<Duration>),
}

impl Endpoint<'_> {
    /// Sends `body` until an answer comes, a failure is final, the retries run out or
    /// the state's `budget` (when given) ends.
    pub async fn call(
        &self,
        body: &[u8],
        budget: Option<Duration>,
        on_text: Option<TextSink<'_>>,
    ) -> Result<ModelResponse, ModelError> {
        let deadline = budget.map(|budget| (Instant::now() + budget, budget));
        let mut retry = 0;
        loop {
            // Each attempt is bounded by the request timeout and by what is left of the
            // state's budget, whichever is shorter; the error names the bound that expired.
            let (limit, reported) = match deadline {
                Some((end, budget)) => {
                    let remaining = end.saturating_duration_since(Instant::now());
                    if remaining.is_zero() {
                        return Err(ModelError::Timeout(budget));
                    }
                    if remaining < self.request_timeout {
                        (remaining, budget)
                    } else {
                        (self.request_timeout, self.request_timeout)
                    }
                }
                None => (self.request_timeout, self.request_timeout),
            };
            let outcome = match tokio::time::timeout(limit, self.attempt(body, on_text)).await {
                Ok(outcome) => outcome,
                Err(_) => Attempt::Retry(ModelError::Timeout(reported), None),
            };
            let (error, retry_after) = match outcome {
                Attempt::Done(response) => return Ok(response),
                Attempt::Fail(error) => return Err(error),
                Attempt::Retry(error, retry_after) => (error, retry_after),
            };
            if retry >= self.max_retries {
                return Err(error);
            }
            let delay = backoff_delay(retry, retry_after, jitter());
            if deadline.is_some_and(|(end, _)| Instant::now() + delay >= end) {
                return Err(error);
            }
            if let Some(observer) = self.on_retry {
                observer(&RetryNotice {
                    attempt: retry + 2,
                    of: self.max_retries.saturating_add(1),
                    delay,
                    reason: error.to_string().lines().next().unwrap_or_default().to_string(),
                });
            }
            tokio::time::sleep(delay).await;
            retry += 1;
        }
    }

    /// One HTTP exchange, classified. A streamed answer hands its text to `on_text` as
    /// it arrives; once any has been handed on, a broken stream fails the call instead of
    /// retrying it (what was shown cannot be taken back).
    async fn attempt(&self, body: &[u8], on_text: Option<TextSink<'_>>) -> Attempt {
        let accept = if self.streaming { "text/event-stream, application/json" } else { "application/json" };
        let sent = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body.to_vec())
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(error) => {
                let retryable = error.is_connect() || error.is_timeout() || error.is_request();
                let error = ModelError::Transport(describe(&error));
                return if retryable { Attempt::Retry(error, None) } else { Attempt::Fail(error) };
            }
        };
        let status = response.status();
        let retry_after =
            response.headers().get(RETRY_AFTER).and_then(|value| value.to_str().ok()).and_then(parse_retry_after);
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|kind| kind.trim_start().starts_with("text/event-stream"));
        if status.is_success() && streamed {
            return read_stream(&mut response, self.wire.assembler(), on_text).await;
        }

        let mut bytes = Vec::new();
        let read = loop {
            match response.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES => {
                    break Err(format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes"));
                }
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) => break Ok(()),
                Err(error) => break Err(describe(&error)),
            }
        };

        if status.is_success() {
            return match read {
                Ok(()) => match self.wire.parse_whole(&bytes) {
                    Ok(response) => Attempt::Done(response),
                    Err(error) => Attempt::Fail(error),
                },
                Err(why) => Attempt::Retry(ModelError::Transport(format!("reading the answer failed: {why}")), None),
            };
        }
        let error = self.wire.status_error(status.as_u16(), &bytes);
        // 529 is Anthropic's "overloaded": passing, like a 503.
        if status.as_u16() == 429 || status.is_server_error() || status.as_u16() == 529 {
            Attempt::Retry(error, retry_after)
        } else {
            Attempt::Fail(error)
        }
    }
}

/// Reads a streamed answer to its end, handing its text on as it arrives.
async fn read_stream(
    response: &mut reqwest::Response,
    mut assembler: Box<dyn StreamAssembler>,
    on_text: Option<TextSink<'_>>,
) -> Attempt {
    let mut received = 0usize;
    let mut hand_on = |text: &str, id: Option<&str>| {
        if let Some(sink) = on_text {
            sink.send(text, id);
        }
    };
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                received += chunk.len();
                if received > MAX_RESPONSE_BYTES {
                    return Attempt::Fail(ModelError::Response(format!(
                        "the streamed answer is larger than {MAX_RESPONSE_BYTES} bytes"
                    )));
                }
                if let Err(error) = assembler.feed(&chunk, &mut hand_on) {
                    return if assembler.failure_is_passing() {
                        Attempt::Retry(error, None)
                    } else {
                        Attempt::Fail(error)
                    };
                }
            }
            Ok(None) => break,
            Err(error) => {
                let error = ModelError::Transport(format!(
                    "reading the answer's stream failed after {} characters of text: {}",
                    assembler.forwarded(),
                    describe(&error)
                ));
                return if assembler.forwarded() > 0 { Attempt::Fail(error) } else { Attempt::Retry(error, None) };
            }
        }
    }
    let forwarded = assembler.forwarded();
    match assembler.finish() {
        Ok(answer) => Attempt::Done(answer),
        Err(error @ ModelError::Transport(_)) if forwarded == 0 => Attempt::Retry(error, None),
        Err(error) => Attempt::Fail(error),
    }
}

/// The wait before retry number `retry + 1`: the server's `Retry-After` (capped), else
/// 500 ms doubling per retry up to 8 s, plus up to a quarter more (`jitter` in `[0, 1)`).
pub fn backoff_delay(retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(RETRY_AFTER_CAP);
    }
    let factor = 2u32.checked_pow(retry).unwrap_or(u32::MAX);
    let delay = BACKOFF_BASE.checked_mul(factor).map_or(BACKOFF_CAP, |delay| delay.min(BACKOFF_CAP));
    delay + delay.mul_f64(jitter.clamp(0.0, 1.0) / 4.0)
}

/// A uniform number in `[0, 1)` from the operating system's random source, so that
/// clients retrying together spread out. Should the source fail, the retry simply waits
/// the unspread delay: jitter is a courtesy to the server, not a safety property.
pub fn jitter() -> f64 {
    getrandom::u64().map_or(0.0, |bits| (bits >> 11) as f64 / (1u64 << 53) as f64)
}

/// A `Retry-After` given in seconds (the HTTP-date form is ignored).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(seconds.min(RETRY_AFTER_CAP.as_secs_f64())))
}

/// An error and its causes on one line (reqwest's own message omits the cause).
pub(super) fn describe(error: &dyn std::error::Error) -> String {
    archmax_program::errors::with_causes(error)
}

/// The HTTP client every adapter builds, once the process has a TLS provider.
pub(super) fn client() -> Result<reqwest::Client, ModelError> {
    // The library installs nothing process-wide: the host picks the TLS crypto
    // provider (`install_tls_provider`). Without one the HTTP client cannot be built.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(ModelError::Configuration(
            "no TLS crypto provider is installed in this process: the host installs one at start-up, for example with `archmax_vm::model::openai::install_tls_provider()` (the archmax binary does)".into(),
        ));
    }
    reqwest::Client::builder()
        .user_agent(concat!("archmax/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| ModelError::Configuration(format!("the HTTP client could not be built: {}", describe(&error))))
}

/// Headers from configured `(name, value)` pairs, each checked.
pub(super) fn header_map<'p>(pairs: impl IntoIterator<Item = (&'p str, &'p str)>) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ModelError::Configuration(format!("`{name}` is not an HTTP header name")))?;
        let mut value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| ModelError::Configuration(format!("the value of header `{name}` is not a header value")))?;
        if matches!(name.as_str(), "authorization" | "api-key" | "x-api-key") {
            value.set_sensitive(true);
        }
        headers.insert(name, value);
    }
    Ok(headers)
}
