//! The HTTP routes: the router, the probes and the document, and the answers every
//! route maps its outcome to. The turn routes live in [`turns`], the session reads in
//! [`sessions`], and what a handler reads from a request in [`extract`].
//!
//! The one thing to know: a handler is thin. Its extractors authorize the caller and
//! parse the path, query and body (each refusal an [`ApiError`] in the API's one shape);
//! it calls one [`Server`] function and maps the answer or typed error to a response
//! with [`answer`] or [`json_answer`].

mod answers;
pub(crate) mod extract;
mod sessions;
mod turns;
mod upload;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{DefaultOnFailure, DefaultOnRequest, DefaultOnResponse, TraceLayer};

use crate::error::ApiError;
use crate::server::{Answer, Server};
use extract::{ArtifactBytes, Authorized, scopes};

pub(crate) use extract::query_pairs;
pub(crate) use upload::{
    Layout as UploadLayout, REQUEST_PART, UploadSlots, boundary as upload_boundary, files_limit, read as read_upload,
};
pub use upload::{UploadPermit, Uploaded};
// The handlers with their `#[utoipa::path]` items, named by `crate::openapi`.
pub(crate) use sessions::*;
pub(crate) use turns::*;

type Shared = State<Arc<Server>>;

/// Every route of the API, and the decision inbox's pages ([`crate::inbox`]); every
/// request body is held to the server's body deadline, and every request is traced
/// ([`request_spans`]). The API answers a method a route does not take in its error
/// shape ([`method_not_allowed`]); the inbox's pages keep axum's empty 405.
pub fn router(server: Arc<Server>) -> Router {
    let body_deadline = server.body_timeout;
    let bounded_and_traced = |routes: Router| {
        routes
            .layer(axum::middleware::from_fn_with_state(body_deadline, crate::request_limits::body_deadline))
            .layer(request_spans())
    };
    let api = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/workflows", get(workflows))
        .route("/v1/workflows/{slug}/sessions", post(start))
        .route("/v1/sessions", get(list))
        .route("/v1/sessions/{id}", get(show))
        .route("/v1/sessions/{id}/messages", post(message))
        .route("/v1/sessions/{id}/decide", post(decide))
        .route("/v1/sessions/{id}/deliver", post(deliver))
        .route("/v1/sessions/{id}/transcript", get(transcript))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/triggers/{trigger}", post(fire))
        .route("/v1/admin/artifacts", post(load_artifact))
        .route("/v1/admin/notifications", get(notifications))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&server), note_refusals))
        .layer(axum::middleware::from_fn(extract::well_formed))
        .with_state(Arc::clone(&server));
    // A router's layers wrap each of its routes, and axum sets a 405's `Allow` header
    // after they have run: only a layer around the API's whole router sees it. The inbox's
    // routes are matched first; every other path, an unknown one too, reaches the API.
    Router::new()
        .fallback_service(bounded_and_traced(api))
        .layer(axum::middleware::from_fn(method_not_allowed))
        .merge(bounded_and_traced(crate::inbox::router(server)))
}

/// Counts and logs each API request refused by authentication
/// ([`crate::auth::SharedAuth::note_refusal`]), by the client it came from and its route:
/// whichever handler refused it, its answer carries the [`crate::auth::Refusal`].
async fn note_refusals(
    State(server): Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let client = crate::clients::client_of(request.extensions(), request.headers(), &server.trusted_proxies);
    let route = request.extensions().get::<axum::extract::MatchedPath>().cloned();
    let response = next.run(request).await;
    if let Some(refusal) = response.extensions().get::<crate::auth::Refusal>() {
        let route = route.as_ref().map_or("unmatched", axum::extract::MatchedPath::as_str);
        server.auth.note_refusal(*refusal, &client, route, &server.metrics);
    }
    response
}

/// A 405 in the API's error shape, naming the methods its `Allow` header names (the
/// header is kept).
async fn method_not_allowed(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let method = request.method().clone();
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let Some(allow) = response.headers().get(header::ALLOW).cloned() else {
        return response;
    };
    let methods: Vec<&str> =
        allow.to_str().unwrap_or_default().split(',').map(str::trim).filter(|name| !name.is_empty()).collect();
    let message = format!("this route does not take {method}; it takes {}", methods.join(" or "));
    let mut answer = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "route.method-not-allowed", message)
        .with_details(json!({ "allow": methods }))
        .into_response();
    answer.headers_mut().insert(header::ALLOW, allow);
    answer
}

/// A `tracing` span per request, the parent of the turn it starts: its method, route,
/// path and answer's status, never its headers (they carry tokens and cookies) but the
/// W3C `traceparent` and `tracestate`, whose context it continues when tracing is on.
/// The lines when a request arrives and is answered stay at DEBUG: with
/// `RUST_LOG=tower_http=debug` every request is logged, and at the default `info`
/// nothing is. An answer of 5xx is logged at DEBUG as well, not tower-http's ERROR: the
/// refusal is the client's to read, and what failed inside is logged where it failed.
type RequestSpans = TraceLayer<
    SharedClassifier<ServerErrorsAsFailures>,
    fn(&axum::http::Request<axum::body::Body>) -> tracing::Span,
    DefaultOnRequest,
    fn(&Response, std::time::Duration, &tracing::Span),
>;

fn request_spans() -> RequestSpans {
    TraceLayer::new_for_http()
        .make_span_with(request_span as fn(&axum::http::Request<axum::body::Body>) -> tracing::Span)
        .on_response(answered as fn(&Response, std::time::Duration, &tracing::Span))
        .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG))
}

/// The longest request path a span records, in bytes; a longer one is cut (on a
/// character boundary) and marked with `…`.
const SPAN_PATH_BYTES: usize = 256;

/// The request's span, named by its method and route (never by a session id in its path).
/// Everything it records is bounded before any authentication: a method outside the
/// standard ones is `_OTHER` (as the OpenTelemetry HTTP conventions have it; hyper admits
/// any token as a method) and the path is cut at [`SPAN_PATH_BYTES`], so no client can
/// grow the spans waiting for export, or their names, by what it sends.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let route = request.extensions().get::<axum::extract::MatchedPath>().map_or("unmatched", |path| path.as_str());
    let method = span_method(request.method());
    let span = tracing::info_span!(
        "http.request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = method,
        http.route = route,
        url.path = span_path(request.uri().path()).as_ref(),
        http.response.status_code = tracing::field::Empty,
    );
    let header = |name: &str| request.headers().get(name).and_then(|value| value.to_str().ok());
    if let Some(parent) = header("traceparent") {
        archmax_vm::trace::adopt_parent(&span, parent, header("tracestate"));
    }
    span
}

/// The method as a span records it: a standard one, else `_OTHER`.
fn span_method(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    const STANDARD: [(Method, &str); 9] = [
        (Method::GET, "GET"),
        (Method::HEAD, "HEAD"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::CONNECT, "CONNECT"),
        (Method::OPTIONS, "OPTIONS"),
        (Method::TRACE, "TRACE"),
        (Method::PATCH, "PATCH"),
    ];
    STANDARD.iter().find(|(standard, _)| standard == method).map_or("_OTHER", |(_, name)| name)
}

/// The path as a span records it: at most [`SPAN_PATH_BYTES`] of it.
fn span_path(path: &str) -> std::borrow::Cow<'_, str> {
    if path.len() <= SPAN_PATH_BYTES {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut end = SPAN_PATH_BYTES;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &path[..end]))
}

fn answered(response: &Response, latency: std::time::Duration, span: &tracing::Span) {
    // As an i64: the OpenTelemetry bridge writes an unsigned field as text.
    span.record("http.response.status_code", i64::from(response.status().as_u16()));
    tower_http::trace::OnResponse::on_response(DefaultOnResponse::default(), response, latency, span);
}

/// A turn route's answer: 202 with the session and its status while the turn runs on,
/// 200 with the session once it ended within the wait, or the refusal.
fn answer(answer: Result<Answer, ApiError>) -> Response {
    match answer {
        Ok(Answer::Accepted { session, status }) => {
            (StatusCode::ACCEPTED, axum::Json(json!({ "sessionId": session, "status": status }))).into_response()
        }
        Ok(Answer::Finished(shown)) => (StatusCode::OK, axum::Json(shown)).into_response(),
        Err(error) => error.into_response(),
    }
}

/// A JSON answer with 200, or the refusal.
fn json_answer(answer: Result<Value, ApiError>) -> Response {
    match answer {
        Ok(value) => axum::Json(value).into_response(),
        Err(error) => error.into_response(),
    }
}

#[utoipa::path(
    get,
    path = "/healthz",
    summary = "Liveness: the process answers.",
    responses(
        (status = 200, description = "The process answers.", body = crate::wire::Health),
    ),
    security(()),
)]
pub(crate) async fn healthz() -> Response {
    axum::Json(json!({ "ok": true })).into_response()
}

#[utoipa::path(
    get,
    path = "/readyz",
    summary = "Readiness: programs loaded, store reachable.",
    responses(
        (status = 200, description = "Ready.", body = crate::wire::Ready),
        (status = 503, description = "Shutting down, or the session store did not answer.", body = crate::wire::ErrorBody),
    ),
    security(()),
)]
pub(crate) async fn readyz(State(server): Shared) -> Response {
    json_answer(server.ready().await)
}

#[utoipa::path(
    get,
    path = "/metrics",
    summary = "Prometheus text metrics.",
    responses(
        (status = 200, description = "The metrics, in Prometheus text format.", body = String, content_type = "text/plain"),
        (status = 401, description = "No valid bearer token.", body = crate::wire::ErrorBody),
        (status = 403, description = "The token lacks the scope, or the request is refused (such as a decider who is not an approver).", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn metrics(State(server): Shared, _: Authorized<scopes::Read>) -> Response {
    let text = server.metrics.render(server.store.as_ref(), server.now_ms()).await;
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

#[utoipa::path(
    get,
    path = "/v1/admin/notifications",
    summary = "What became of each notifier's last deliveries ([notify.<name>] of archmax.toml), on this runner.",
    responses(
        (status = 200, description = "Every notifier with its last deliveries, oldest first.", body = crate::wire::Notifications),
        (status = 401, description = "No valid bearer token.", body = crate::wire::ErrorBody),
        (status = 403, description = "The token lacks the scope, or the request is refused (such as a decider who is not an approver).", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["admin"])),
)]
pub(crate) async fn notifications(State(server): Shared, _: Authorized<scopes::Admin>) -> Response {
    let notifiers = server
        .notify
        .all_recent()
        .into_iter()
        .map(|(notifier, deliveries)| crate::wire::NotifierDeliveries { notifier, deliveries })
        .collect();
    axum::Json(crate::wire::Notifications { notifiers }).into_response()
}

#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    summary = "This document.",
    responses(
        (status = 200, description = "This OpenAPI document.", body = Object),
    ),
    security(()),
)]
pub(crate) async fn openapi() -> Response {
    // Built once per process: the document is fixed at compile time, and deriving it on
    // every request would let a client spend the runner's CPU for free.
    static DOCUMENT: std::sync::LazyLock<axum::body::Bytes> =
        std::sync::LazyLock::new(|| axum::body::Bytes::from(crate::openapi::document().to_string()));
    ([(axum::http::header::CONTENT_TYPE, "application/json")], DOCUMENT.clone()).into_response()
}

async fn not_found() -> Response {
    ApiError::not_found("route.unknown", "there is no such route; GET /v1/openapi.json lists them").into_response()
}

/// `POST /v1/admin/artifacts`: the body is an artifact (`.amx`), verified like one
/// given with `--artifact`; new sessions of its workflows start on it.
#[utoipa::path(
    post,
    path = "/v1/admin/artifacts",
    summary = "Load an artifact (.amx bytes, verified like --artifact) without downtime.",
    request_body(content = inline(crate::wire::ArtifactBytes), content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "Loaded: new sessions start on it, running ones keep their program.", body = crate::wire::Loaded),
        (status = 400, description = "The bytes are not an artifact this server accepts (in `details.fields`).", body = crate::wire::ErrorBody),
        (status = 401, description = "No valid bearer token.", body = crate::wire::ErrorBody),
        (status = 403, description = "The token lacks the scope, or the request is refused (such as a decider who is not an approver).", body = crate::wire::ErrorBody),
        (status = 408, description = "The body did not arrive within the server's body timeout.", body = crate::wire::ErrorBody),
        (status = 409, description = "This server compiles its workspace (development mode) and loads no artifacts.", body = crate::wire::ErrorBody),
        (status = 413, description = "The artifact is larger than 64 MiB.", body = crate::wire::ErrorBody),
        (status = 500, description = "The load stopped.", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["admin"])),
)]
pub(crate) async fn load_artifact(
    State(server): Shared,
    Authorized(caller, _): Authorized<scopes::Admin>,
    ArtifactBytes(bytes): ArtifactBytes,
) -> Response {
    let loaded = async {
        // Verifying and decoding a large artifact is CPU work: off the executor's threads.
        let loading = Arc::clone(&server);
        let loaded = tokio::task::spawn_blocking(move || loading.load_artifact(&bytes))
            .await
            .map_err(|error| ApiError::internal(format!("the artifact's load stopped: {error}")))??;
        tracing::info!(by = caller.identity.as_str(), loaded = %loaded["loaded"], "artifact loaded");
        Ok(loaded)
    };
    json_answer(loaded.await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_records_a_bounded_method_and_path_whatever_the_client_sends() {
        assert_eq!(span_method(&axum::http::Method::PATCH), "PATCH");
        let invented = axum::http::Method::from_bytes("X".repeat(400_000).as_bytes()).expect("hyper admits any token");
        assert_eq!(span_method(&invented), "_OTHER");

        assert_eq!(span_path("/v1/sessions/s1"), "/v1/sessions/s1");
        let long = format!("/v1/{}", "é".repeat(40_000));
        let cut = span_path(&long);
        assert!(cut.len() <= SPAN_PATH_BYTES + '…'.len_utf8(), "{} bytes", cut.len());
        assert!(cut.ends_with('…') && long.starts_with(cut.trim_end_matches('…')));
    }
}
