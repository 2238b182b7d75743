//! The turn routes: a start, a message, a decision and a delivery, which share one
//! shape, and a webhook firing.
//!
//! The one thing to know: a turn route is three steps. Its [`TurnInput`] extractor
//! authorizes the caller, reads `?wait=` and the JSON body; the handler calls one
//! [`crate::Server`] function with them; [`answer`] maps its outcome (a turn accepted,
//! a turn ended, or a typed refusal) to the response. What differs between the four is
//! only the scope, the path and the server function.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use super::extract::{FireParams, JsonBytes, TurnInput, scopes};
use super::{Shared, answer, answers};
use crate::auth::Scope;

#[utoipa::path(
    post,
    path = "/v1/workflows/{slug}/sessions",
    summary = "Start a session of a workflow.",
    params(crate::wire::WorkflowPath, crate::wire::WaitQuery),
    request_body(content(
        (crate::wire::StartRequest = "application/json"),
        (crate::wire::StartUpload = "multipart/form-data"),
    )),
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
    turn: TurnInput<scopes::Start, true>,
) -> Response {
    answer(server.start(&slug, &turn.body, turn.files, turn.wait).await)
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
pub(crate) async fn message(State(server): Shared, Path(id): Path<String>, turn: TurnInput<scopes::Start>) -> Response {
    let answered = async {
        let raiser = raiser(&server, &turn)?;
        server.message(&id, &turn.body, raiser.as_ref(), turn.wait).await
    };
    answer(answered.await)
}

/// The caller a body asking to raise the session's budget (`raiseBudget: true`) is
/// authorized for: raising what a session may spend takes a token that may decide.
fn raiser<S: super::extract::RequiredScope, const UPLOADS: bool>(
    server: &crate::Server,
    turn: &TurnInput<S, UPLOADS>,
) -> Result<Option<crate::auth::Caller>, crate::error::ApiError> {
    if turn.body.get("raiseBudget").and_then(Value::as_bool) != Some(true) {
        return Ok(None);
    }
    server.auth.caller(&turn.headers, crate::auth::Scope::Decide).map(Some)
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
pub(crate) async fn decide(State(server): Shared, Path(id): Path<String>, turn: TurnInput<scopes::Decide>) -> Response {
    answer(server.decide(&id, &turn.body, &turn.caller, turn.wait).await)
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/deliver",
    summary = "Deliver a trigger the workflow declares (its requires checked) to a session waiting for input.",
    params(crate::wire::SessionPath, crate::wire::WaitQuery),
    request_body(content(
        (crate::wire::DeliverRequest = "application/json"),
        (crate::wire::DeliverUpload = "multipart/form-data"),
    )),
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
    turn: TurnInput<scopes::Start, true>,
) -> Response {
    let delivered = async {
        // A trigger the workflow does not declare skips its signature: only an admin
        // token may deliver one.
        if turn.body.get("undeclared").and_then(Value::as_bool) == Some(true) {
            server.auth.caller(&turn.headers, Scope::Admin)?;
        }
        let raiser = raiser(&server, &turn)?;
        server.deliver(&id, (&turn.body, turn.files), raiser.as_ref(), turn.wait).await
    };
    answer(delivered.await)
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
    params: FireParams,
    headers: HeaderMap,
    JsonBytes(bytes): JsonBytes,
) -> Response {
    let firing = crate::triggers::Firing {
        trigger: &trigger,
        workflow: params.workflow.as_deref(),
        headers: &headers,
        body: &bytes,
        wait: params.wait,
    };
    answer(server.fire(firing).await)
}
