//! The HTTP routes. Each handler is thin: it authenticates, parses the path, query and
//! body, calls one [`Server`] function and turns its answer or typed error into a
//! response.

mod answers;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::server::{Answer, MAX_PAGE, MAX_WAIT_SECONDS, Server, SessionQuery};

type Shared = State<Arc<Server>>;

/// Every route of the API, and the decision inbox's pages ([`crate::inbox`]); every
/// request body is held to the server's body deadline.
pub fn router(server: Arc<Server>) -> Router {
    let body_deadline = server.body_timeout;
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(openapi))
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
        .fallback(not_found)
        .with_state(Arc::clone(&server))
        .merge(crate::inbox::router(server))
        .layer(axum::middleware::from_fn_with_state(body_deadline, crate::request_limits::body_deadline))
}

/// The decoded `key=value` pairs of a query string.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| bytes.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[index], escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                index += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                index += 1;
            }
            (byte, None) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn bad_query(field: &str, problem: &str) -> ApiError {
    ApiError::invalid(
        format!("`{field}`: {problem}"),
        &[archmax_vm::FieldProblem { field: field.to_string(), problem: problem.to_string() }],
    )
}

/// `?wait=SECONDS` (fractions allowed, at most [`MAX_WAIT_SECONDS`]).
fn wait_of(query: Option<&str>) -> Result<Duration, ApiError> {
    let Some((_, value)) = query_pairs(query).into_iter().find(|(key, _)| key == "wait") else {
        return Ok(Duration::ZERO);
    };
    match value.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Ok(Duration::from_secs_f64(seconds.min(MAX_WAIT_SECONDS)))
        }
        _ => Err(bad_query("wait", "must be a number of seconds, 0 or more")),
    }
}

fn session_query(query: Option<&str>) -> Result<SessionQuery, ApiError> {
    let mut parsed = SessionQuery::default();
    let mut problems = Vec::new();
    let flag = |value: &str| match value {
        "true" | "1" | "" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    };
    for (key, value) in query_pairs(query) {
        let problem = match key.as_str() {
            "workflow" => {
                parsed.workflow = Some(value);
                None
            }
            "status" => match serde_json::from_value(Value::String(value)) {
                Ok(status) => {
                    parsed.status = Some(status);
                    None
                }
                Err(_) => Some("must be running, completed, failed, rejected, awaiting_decision or awaiting_input"),
            },
            "cursor" => {
                parsed.cursor = Some(value);
                None
            }
            "parked" => match flag(&value) {
                Some(parked) => {
                    parsed.parked = Some(parked);
                    None
                }
                None => Some("must be true or false"),
            },
            "due" => match flag(&value) {
                Some(due) => {
                    parsed.due = due;
                    None
                }
                None => Some("must be true or false"),
            },
            "limit" => match value.parse::<usize>() {
                Ok(limit) if (1..=MAX_PAGE).contains(&limit) => {
                    parsed.limit = limit;
                    None
                }
                _ => Some("must be a whole number from 1 to 500"),
            },
            _ => Some("unknown filter; use workflow, status, parked, due, cursor or limit"),
        };
        if let Some(problem) = problem {
            problems.push(archmax_vm::FieldProblem { field: key, problem: problem.to_string() });
        }
    }
    if problems.is_empty() {
        Ok(parsed)
    } else {
        Err(ApiError::invalid(format!("{} query parameters do not hold", problems.len()), &problems))
    }
}

/// The largest artifact `POST /v1/admin/artifacts` takes, in bytes.
const ARTIFACT_LIMIT: usize = 64 * 1024 * 1024;

/// The request body's bytes, refused with 413 past `limit` and 408 when it does not
/// arrive within the server's body deadline ([`crate::request_limits::body_deadline`]).
async fn body_bytes(headers: &HeaderMap, body: Body, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request.too-large",
            format!("the body is larger than {limit} bytes"),
        )
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large());
    }
    to_bytes(body, limit).await.map_err(|error| {
        if crate::request_limits::is_too_slow(&error) {
            ApiError::new(StatusCode::REQUEST_TIMEOUT, "request.timeout", error.to_string())
        } else {
            too_large()
        }
    })
}

/// Refuses a non-empty body not sent as JSON: a form a web page posts without a
/// preflight never passes.
fn require_json(headers: &HeaderMap, bytes: &[u8]) -> Result<(), ApiError> {
    let json = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(|value| {
        value.split(';').next().is_some_and(|kind| kind.trim().eq_ignore_ascii_case("application/json"))
    });
    if bytes.is_empty() || json {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "request.not-json",
        "the body must be JSON, sent with `Content-Type: application/json`",
    ))
}

/// The request body as JSON, refused with 413 past the server's limit.
async fn json_body(server: &Server, headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    let bytes = body_bytes(headers, body, server.body_limit).await?;
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    require_json(headers, &bytes)?;
    serde_json::from_slice(&bytes).map_err(|error| bad_query("body", &format!("is not JSON: {error}")))
}

fn answer(answer: Result<Answer, ApiError>) -> Response {
    match answer {
        Ok(Answer::Accepted { session, status }) => {
            (StatusCode::ACCEPTED, axum::Json(json!({ "sessionId": session, "status": status }))).into_response()
        }
        Ok(Answer::Finished(shown)) => (StatusCode::OK, axum::Json(shown)).into_response(),
        Err(error) => error.into_response(),
    }
}

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
pub(crate) async fn metrics(State(server): Shared, headers: HeaderMap) -> Response {
    if let Err(error) = server.auth.caller(&headers, Scope::Read) {
        return error.into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], server.metrics.render()).into_response()
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

/// A turn route: authenticate for `scope`, read `?wait=` and the JSON body, then `call`.
async fn turn_route<Call, Answered>(
    server: &Server,
    scope: Scope,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
    call: Call,
) -> Response
where
    Call: FnOnce(Value, Caller, Duration) -> Answered,
    Answered: Future<Output = Result<Answer, ApiError>>,
{
    let parsed = async {
        let caller = server.auth.caller(headers, scope)?;
        let wait = wait_of(query)?;
        let body = json_body(server, headers, body).await?;
        call(body, caller, wait).await
    };
    answer(parsed.await)
}

#[utoipa::path(
    post,
    path = "/v1/workflows/{slug}/sessions",
    summary = "Start a session of a workflow.",
    params(crate::wire::WorkflowPath, crate::wire::WaitQuery),
    request_body(content = crate::wire::StartRequest, content_type = "application/json"),
    responses(
        answers::TurnRequestAnswers,
        answers::TokenTurnAnswers,
        (status = 404, description = "No such workflow.", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["start"])),
)]
pub(crate) async fn start(
    State(server): Shared,
    Path(slug): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (shared, slug) = (&*server, &slug);
    let call = |body: Value, _: Caller, wait| async move { shared.start(slug, &body, wait).await };
    turn_route(&server, Scope::Start, query.as_deref(), &headers, body, call).await
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/messages",
    summary = "Continue a session, or write to one parked at a decision (a reply-only turn).",
    params(crate::wire::SessionPath, crate::wire::WaitQuery),
    request_body(content = crate::wire::MessageRequest, content_type = "application/json"),
    responses(
        answers::TurnRequestAnswers,
        answers::TokenTurnAnswers,
        answers::NoSuchSession,
    ),
    security(("bearer" = ["start"])),
)]
pub(crate) async fn message(
    State(server): Shared,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (shared, id) = (&*server, &id);
    let call = |body: Value, _: Caller, wait| async move { shared.message(id, &body, wait).await };
    turn_route(&server, Scope::Start, query.as_deref(), &headers, body, call).await
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/decide",
    summary = "Decide a session parked at a human state; the caller's identity is recorded and held against `approvers`.",
    params(crate::wire::SessionPath, crate::wire::WaitQuery),
    request_body(content = crate::wire::DecideRequest, content_type = "application/json"),
    responses(
        answers::TurnRequestAnswers,
        answers::TokenTurnAnswers,
        answers::NoSuchSession,
    ),
    security(("bearer" = ["decide"])),
)]
pub(crate) async fn decide(
    State(server): Shared,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (shared, id) = (&*server, &id);
    let call = |body: Value, caller: Caller, wait| async move { shared.decide(id, &body, &caller, wait).await };
    turn_route(&server, Scope::Decide, query.as_deref(), &headers, body, call).await
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/deliver",
    summary = "Deliver a trigger the workflow declares (its requires checked) to a session waiting for input.",
    params(crate::wire::SessionPath, crate::wire::WaitQuery),
    request_body(content = crate::wire::DeliverRequest, content_type = "application/json"),
    responses(
        answers::TurnRequestAnswers,
        answers::TokenTurnAnswers,
        answers::NoSuchSession,
    ),
    security(("bearer" = ["start"])),
)]
pub(crate) async fn deliver(
    State(server): Shared,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (shared, id, scoped) = (&*server, &id, &headers);
    let call = |body: Value, _: Caller, wait| async move {
        // A trigger the workflow does not declare skips its signature: only an admin
        // token may deliver one.
        if body.get("undeclared").and_then(Value::as_bool) == Some(true) {
            shared.auth.caller(scoped, Scope::Admin)?;
        }
        shared.deliver(id, &body, wait).await
    };
    turn_route(&server, Scope::Start, query.as_deref(), &headers, body, call).await
}

/// `POST /v1/triggers/{trigger}[?workflow=][&wait=]`: a host trigger (a webhook). The
/// sender is authenticated by the trigger's connection, or by a `start` token.
#[utoipa::path(
    post,
    path = "/v1/triggers/{trigger}",
    summary = "Fire a host trigger (a webhook): the body is its input.",
    description = "A trigger with a connection is authenticated by its HMAC-SHA256 signature header instead of a token; any other takes a token with `start`. Its `session:` path joins an existing session or starts one. The answer names the session and its status only.",
    params(crate::wire::TriggerPath, crate::wire::FireQuery),
    request_body(content = crate::wire::TriggerInput, content_type = "application/json"),
    responses(
        answers::TurnRequestAnswers,
        (status = 200, description = "The turn ended within the wait: the session's id and status only.", body = crate::wire::Fired),
        (status = 401, description = "No valid bearer token, or a bad or stale webhook signature.", body = crate::wire::ErrorBody),
        (status = 404, description = "No served workflow declares the trigger.", body = crate::wire::ErrorBody),
        (status = 429, description = "Saturated (too many turns queued), or too many signed requests to remember (Retry-After).", body = crate::wire::ErrorBody),
        (status = 503, description = "The trigger's connection is not configured, or the server is shutting down.", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["start"])),
)]
pub(crate) async fn fire(
    State(server): Shared,
    Path(trigger): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let fired = async {
        let wait = wait_of(query.as_deref())?;
        let mut workflow = None;
        for (key, value) in query_pairs(query.as_deref()) {
            match key.as_str() {
                "workflow" => workflow = Some(value),
                "wait" => {}
                _ => return Err(bad_query(&key, "unknown parameter; this route takes workflow and wait")),
            }
        }
        let bytes = body_bytes(&headers, body, server.body_limit).await?;
        require_json(&headers, &bytes)?;
        let firing = crate::triggers::Firing {
            trigger: &trigger,
            workflow: workflow.as_deref(),
            headers: &headers,
            body: &bytes,
            wait,
        };
        server.fire(firing).await
    };
    answer(fired.await)
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
pub(crate) async fn load_artifact(State(server): Shared, headers: HeaderMap, body: Body) -> Response {
    let loaded = async {
        let caller = server.auth.caller(&headers, Scope::Admin)?;
        let bytes = body_bytes(&headers, body, ARTIFACT_LIMIT).await?;
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

#[utoipa::path(
    get,
    path = "/v1/sessions",
    summary = "List sessions (filters, cursor paging).",
    params(crate::wire::ListQuery),
    responses(
        (status = 200, description = "One page of sessions, in id order.", body = crate::wire::SessionPage),
        (status = 400, description = "A filter that does not hold, or an unknown one (each in `details.fields`).", body = crate::wire::ErrorBody),
        (status = 401, description = "No valid bearer token.", body = crate::wire::ErrorBody),
        (status = 403, description = "The token lacks the scope, or the request is refused (such as a decider who is not an approver).", body = crate::wire::ErrorBody),
        (status = 500, description = "The session store failed.", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn list(State(server): Shared, RawQuery(query): RawQuery, headers: HeaderMap) -> Response {
    let parsed = async {
        server.auth.caller(&headers, Scope::Read)?;
        server.list(&session_query(query.as_deref())?).await
    };
    json_answer(parsed.await)
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{id}",
    summary = "One session, with its park record.",
    params(crate::wire::SessionPath),
    responses(
        (status = 200, description = "The session.", body = crate::wire::Session),
        (status = 400, description = "The id is not a session id the server takes.", body = crate::wire::ErrorBody),
        answers::SessionReadRefusals,
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn show(State(server): Shared, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let parsed = async {
        server.auth.caller(&headers, Scope::Read)?;
        server.show(&id).await
    };
    json_answer(parsed.await)
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/transcript",
    summary = "A session's messages.",
    params(crate::wire::SessionPath),
    responses(
        (status = 200, description = "The messages.", body = crate::wire::Transcript),
        (status = 400, description = "The id is not a session id the server takes.", body = crate::wire::ErrorBody),
        answers::SessionReadRefusals,
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn transcript(State(server): Shared, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let parsed = async {
        server.auth.caller(&headers, Scope::Read)?;
        server.transcript(&id).await
    };
    json_answer(parsed.await)
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/events",
    summary = "Server-Sent Events of a session, live; resumable with Last-Event-ID.",
    params(crate::wire::SessionPath, crate::wire::EventsHeaders),
    responses(
        (status = 200, description = "An endless `text/event-stream`: each frame has `event: archmax`, a numeric `id` and one event as JSON `data` (the Event schema). Comment frames keep the connection alive.", body = ref("#/components/schemas/EventFrame"), content_type = "text/event-stream"),
        (status = 400, description = "The id is not a session id the server takes, or Last-Event-ID is not a whole number.", body = crate::wire::ErrorBody),
        answers::SessionReadRefusals,
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn events(State(server): Shared, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let parsed = async {
        server.auth.caller(&headers, Scope::Read)?;
        let after = match headers.get("last-event-id") {
            None => 0,
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .ok_or_else(|| bad_query("Last-Event-ID", "must be an event id (a whole number)"))?,
        };
        server.events(&id, after).await
    };
    match parsed.await {
        Ok(stream) => Sse::new(stream).keep_alive(KeepAlive::default()).into_response(),
        Err(error) => error.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_decoded_and_checked_field_by_field() {
        assert_eq!(
            query_pairs(Some("a=b%20c&d=e+f&g")),
            [("a".into(), "b c".into()), ("d".into(), "e f".into()), ("g".into(), String::new())]
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(wait_of(Some("wait=1.5")).expect("wait"), Duration::from_millis(1500));
        assert_eq!(wait_of(None).expect("none"), Duration::ZERO);
        assert_eq!(wait_of(Some("wait=100000")).expect("capped"), Duration::from_secs(300));
        assert!(wait_of(Some("wait=soon")).is_err());
        let error = session_query(Some("parked=maybe&limit=0&colour=red")).expect_err("three problems");
        assert_eq!(error.details["fields"].as_array().map(Vec::len), Some(3));
        let query = session_query(Some("workflow=desk&parked=true&limit=10")).expect("valid");
        assert_eq!((query.workflow.as_deref(), query.parked, query.limit), (Some("desk"), Some(true), 10));
    }
}
