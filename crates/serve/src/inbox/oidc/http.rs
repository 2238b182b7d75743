//! The HTTP client the OpenID Connect library calls (discovery, JWKS, the token
//! endpoint), over the workspace's own `reqwest` rather than the library's pinned one.
//!
//! The one thing to know: it follows no redirect, speaks only `https://` unless the
//! issuer is on a loopback address, gives up after
//! [`REQUEST_TIMEOUT`], and reads at most [`MAX_BODY_BYTES`] of an answer, so a provider
//! that misbehaves cannot hold a sign-in or the runner's memory.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};

/// How long one request to the provider may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of one answer read (discovery documents and key sets are a few KiB).
pub const MAX_BODY_BYTES: usize = 512 * 1024;

/// Why a request to the provider got no answer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProviderHttpError(String);

/// A `reqwest` client as the library's [`AsyncHttpClient`].
#[derive(Clone)]
pub struct ProviderHttp(reqwest::Client);

impl ProviderHttp {
    /// `https_only`: refuse every plain `http://` URL, so an endpoint discovery names
    /// (the token endpoint receives the client secret) cannot be one; off only for an
    /// issuer on a loopback address (a test provider).
    pub fn new(https_only: bool) -> Result<ProviderHttp, String> {
        archmax_vm::model::openai::install_tls_provider();
        reqwest::Client::builder()
            .https_only(https_only)
            .user_agent(concat!("archmax/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(REQUEST_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map(ProviderHttp)
            .map_err(|error| format!("the OpenID Connect HTTP client could not be built: {error}"))
    }

    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, ProviderHttpError> {
        let request = reqwest::Request::try_from(request)
            .map_err(|error| ProviderHttpError(format!("the request could not be made: {error}")))?;
        let mut response = self
            .0
            .execute(request)
            .await
            .map_err(|error| ProviderHttpError(format!("the provider did not answer: {error}")))?;
        let mut answer = openidconnect::http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if body.len() + chunk.len() <= MAX_BODY_BYTES => body.extend_from_slice(&chunk),
                Ok(Some(_)) => {
                    return Err(ProviderHttpError(format!("the provider's answer is over {MAX_BODY_BYTES} bytes")));
                }
                Ok(None) => break,
                Err(error) => return Err(ProviderHttpError(format!("the provider's answer broke off: {error}"))),
            }
        }
        answer.body(body).map_err(|error| ProviderHttpError(format!("the provider's answer is not HTTP: {error}")))
    }
}

impl<'c> AsyncHttpClient<'c> for ProviderHttp {
    type Error = ProviderHttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, ProviderHttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}
