//! What bounds one request's body, as layers on the router: a total deadline on every
//! route, and a small size limit on the inbox's form routes.
//!
//! The one thing to know: the deadline counts from the moment the request's head was
//! read and covers the whole body, not the gap between two pieces of it, so a client
//! that trickles a byte at a time is cut off as surely as one that stops. (tower-http's
//! `RequestBodyTimeoutLayer` restarts its timer on every frame, which bounds neither.)
//! Both layers only wrap the body: nothing is read before the handler asks, so a handler
//! that checks a cookie or a token first still refuses before any body is read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::error::ApiError;

/// The largest body of an inbox form (`/sign-in`, `/sign-out`, `/decide`, `/reply`,
/// `/deliver`). A form holds a token, a CSRF token and a few short fields; a longer
/// message or delivery goes through the API.
pub const FORM_BODY_LIMIT: usize = 8 * 1024;

/// The size limit of the inbox's form routes: past [`FORM_BODY_LIMIT`] a request is
/// answered `413` (at once when its `Content-Length` says so, else when the body reaches
/// the limit) and its connection is closed.
pub fn form_body_limit() -> tower_http::limit::RequestBodyLimitLayer {
    tower_http::limit::RequestBodyLimitLayer::new(FORM_BODY_LIMIT)
}

/// The size limit of the inbox's deliver form, which may upload files: a form's text
/// plus the files an upload may carry ([`crate::routes::files_limit`]).
pub fn upload_form_body_limit() -> tower_http::limit::RequestBodyLimitLayer {
    tower_http::limit::RequestBodyLimitLayer::new(crate::routes::files_limit(FORM_BODY_LIMIT))
}

/// Why a request's body stopped: it had not arrived whole within the deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s", .0.as_secs_f64())]
pub struct BodyTooSlow(pub Duration);

/// Whether `error` (or what caused it) is a body cut off by [`body_deadline`].
pub fn is_too_slow(error: &(dyn std::error::Error + 'static)) -> bool {
    caused_by::<BodyTooSlow>(error)
}

/// Whether `error` (or what caused it) is a body a size layer ([`form_body_limit`],
/// [`upload_form_body_limit`]) stopped at its limit.
pub fn is_over_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    caused_by::<http_body_util::LengthLimitError>(error)
}

/// Whether `error` or an error under it is a `Cause`.
fn caused_by<Cause: std::error::Error + 'static>(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<Cause>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Middleware (`axum::middleware::from_fn_with_state(deadline, body_deadline)`): the
/// request's body ends in [`BodyTooSlow`] once `deadline` has passed since its head was
/// read, and a handler that met that error is answered `408 request.timeout` whatever it
/// made of it (the connection then closes: the rest of the body is never read).
pub async fn body_deadline(State(deadline): State<Duration>, request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let body = Body::from_stream(within(body, deadline, Arc::clone(&expired)));
    let response = next.run(Request::from_parts(parts, body)).await;
    if expired.load(Ordering::Acquire) {
        return ApiError::new(StatusCode::REQUEST_TIMEOUT, "request.timeout", BodyTooSlow(deadline).to_string())
            .into_response();
    }
    response
}

/// `body`'s pieces until `deadline` from now; then one [`BodyTooSlow`] error, and the end.
fn within(
    body: Body,
    deadline: Duration,
    expired: Arc<AtomicBool>,
) -> impl futures_util::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Send + 'static {
    let at = tokio::time::Instant::now() + deadline;
    futures_util::stream::unfold(Some(body.into_data_stream()), move |pieces| {
        let expired = Arc::clone(&expired);
        async move {
            let mut pieces = pieces?;
            match tokio::time::timeout_at(at, pieces.next()).await {
                Ok(Some(piece)) => Some((piece, Some(pieces))),
                Ok(None) => None,
                Err(_) => {
                    expired.store(true, Ordering::Release);
                    Some((Err(axum::Error::new(BodyTooSlow(deadline))), None))
                }
            }
        }
    })
}
