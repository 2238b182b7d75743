//! The answers several routes share, documented once: each set is a type the handlers'
//! `#[utoipa::path]` attributes name in their `responses(...)`, beside the answers that
//! are their own (such as what a 404 means on that route).
//!
//! The one thing to know: a set holds only answers whose meaning is the same on every
//! route that names it, word for word; an answer that means something else on one route
//! (a start's 404 names the workflow, a webhook's 401 its signature) stays on that route.

use std::borrow::Cow;
use std::collections::BTreeMap;

use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{IntoResponses, ToSchema};

use crate::wire::{Accepted, ErrorBody, Session};

/// The 401 of a route that takes a bearer token.
const NO_VALID_TOKEN: &str = "No valid bearer token.";

/// The 403 of a route that takes a bearer token with a scope.
const REFUSED_CALLER: &str =
    "The token lacks the scope, or the request is refused (such as a decider who is not an approver).";

/// The 404 of a route on one session.
const NO_SUCH_SESSION: &str = "No such session.";

/// One documented answer: its status, what it means, and the component its JSON body is.
type Documented = (u16, &'static str, Cow<'static, str>);

/// `answers` as a document's responses map.
fn responses_of(answers: impl IntoIterator<Item = Documented>) -> BTreeMap<String, RefOr<Response>> {
    answers
        .into_iter()
        .map(|(status, description, body)| {
            let content = ContentBuilder::new().schema(Some(RefOr::Ref(Ref::from_schema_name(body)))).build();
            let response = ResponseBuilder::new().description(description).content("application/json", content).build();
            (status.to_string(), RefOr::T(response))
        })
        .collect()
}

/// What every turn request (a start, a message, a decision, a delivery, a webhook
/// firing) can answer alike: accepted to run on, or refused for its body, its caller or
/// the session's state, or failed in the store.
pub(crate) struct TurnRequestAnswers;

impl IntoResponses for TurnRequestAnswers {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses_of([
            (202, "The turn was accepted and runs on.", Accepted::name()),
            (
                400,
                "Invalid input: a bad `wait`, a body that is not a JSON object, or fields that do not hold (each in `details.fields`).",
                ErrorBody::name(),
            ),
            (408, "The body did not arrive within the server's body timeout.", ErrorBody::name()),
            (413, "The body is larger than the server's limit.", ErrorBody::name()),
            (415, "A non-empty body not sent as `application/json`.", ErrorBody::name()),
            (403, REFUSED_CALLER, ErrorBody::name()),
            (
                409,
                "The session is busy with a turn (Retry-After), exists already, or is not in a state that takes this request.",
                ErrorBody::name(),
            ),
            (500, "The session store failed, or the turn's task ended without an answer.", ErrorBody::name()),
            (503, UNAVAILABLE, ErrorBody::name()),
        ])
    }
}

/// `store.unavailable`: the store refused every connection; nothing was read or written.
const UNAVAILABLE: &str = "The session store cannot be reached for now (`store.unavailable`, Retry-After).";

/// What a turn request made with a bearer token (every turn route but a webhook firing)
/// answers besides [`TurnRequestAnswers`]: the session as it stands, or a refusal of the
/// token or of a busy or stopping server.
pub(crate) struct TokenTurnAnswers;

impl IntoResponses for TokenTurnAnswers {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses_of([
            (200, "The turn ended within the wait: the session as it stands, with `turn`.", Session::name()),
            (401, NO_VALID_TOKEN, ErrorBody::name()),
            (429, "Saturated: too many turns are queued (Retry-After).", ErrorBody::name()),
            (
                503,
                "Shutting down (no new turns), or the session store cannot be reached for now (Retry-After).",
                ErrorBody::name(),
            ),
        ])
    }
}

/// What a turn on an existing session answers when there is none.
pub(crate) struct NoSuchSession;

impl IntoResponses for NoSuchSession {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses_of([(404, NO_SUCH_SESSION, ErrorBody::name())])
    }
}

/// What a read of one session (the session, its transcript, its events) answers besides
/// its own success and its own 400: a refused token, no such session, a failed store.
pub(crate) struct SessionReadRefusals;

impl IntoResponses for SessionReadRefusals {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses_of([
            (401, NO_VALID_TOKEN, ErrorBody::name()),
            (403, REFUSED_CALLER, ErrorBody::name()),
            (404, NO_SUCH_SESSION, ErrorBody::name()),
            (500, "The session store failed.", ErrorBody::name()),
            (503, UNAVAILABLE, ErrorBody::name()),
        ])
    }
}
