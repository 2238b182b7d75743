//! The read routes: the served workflows ([`crate::catalog`]), and over sessions the
//! list, one session, its transcript and its live events.
//!
//! The one thing to know: each takes a `read` token ([`Authorized`]) before anything
//! else of the request is looked at, and the session id in the path is checked by the
//! server (a 400 naming it), not here.

use axum::extract::{Path, State};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use super::extract::{Authorized, LastEventId, ListFilters, scopes};
use super::{Shared, answers, json_answer};

#[utoipa::path(
    get,
    path = "/v1/workflows",
    summary = "The served workflows: each trigger's inputs as JSON Schema, each human state's decisions.",
    responses(
        (status = 200, description = "Every served workflow, by slug, as the newest program holding it describes it.", body = crate::catalog::WorkflowList),
        (status = 401, description = "No valid bearer token.", body = crate::wire::ErrorBody),
        (status = 403, description = "The token lacks the scope.", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn workflows(State(server): Shared, _: Authorized<scopes::Read>) -> Response {
    axum::Json(server.catalog()).into_response()
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
        (status = 503, description = "The session store cannot be reached for now (`store.unavailable`, Retry-After).", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub(crate) async fn list(
    State(server): Shared,
    _: Authorized<scopes::Read>,
    ListFilters(filters): ListFilters,
) -> Response {
    json_answer(server.list(&filters).await)
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
pub(crate) async fn show(State(server): Shared, Path(id): Path<String>, _: Authorized<scopes::Read>) -> Response {
    json_answer(server.show(&id).await)
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
pub(crate) async fn transcript(State(server): Shared, Path(id): Path<String>, _: Authorized<scopes::Read>) -> Response {
    json_answer(server.transcript(&id).await)
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
pub(crate) async fn events(
    State(server): Shared,
    Path(id): Path<String>,
    _: Authorized<scopes::Read>,
    LastEventId(after): LastEventId,
) -> Response {
    match server.events(&id, after).await {
        Ok(stream) => Sse::new(stream).keep_alive(KeepAlive::default()).into_response(),
        Err(error) => error.into_response(),
    }
}
