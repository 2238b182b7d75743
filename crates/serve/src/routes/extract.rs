//! What the routes read from a request, as axum extractors: the caller a bearer token
//! proves, `?wait=` and the other query strings, `Last-Event-ID`, and the JSON or raw
//! bodies. A handler names what it needs in its arguments and sees only checked values.
//!
//! The one thing to know: every extractor's rejection is an [`ApiError`], so a request
//! an extractor refuses gets the API's one error shape, with the status and message it
//! always had. Axum runs the extractors in argument order (the body last), and each
//! handler lists them in the order the checks must run: the token before the query,
//! the query before a byte of the body is read. One check comes before all of them,
//! [`well_formed`], a middleware on the whole API: a path that is not UTF-8 or a query
//! parameter given twice is refused (400) before the token is looked at, since neither
//! depends on who asks and no route could read such a request one way.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::server::{MAX_PAGE, MAX_WAIT_SECONDS, Server, SessionQuery};

/// The decoded `key=value` pairs of a query string (or of a form body): `+` is a space,
/// `%XX` a byte, and a malformed escape is kept as written.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned().collect()
}

/// Middleware of every API route: a request whose path is not UTF-8 once its `%` escapes
/// are decoded, or whose query names one parameter more than once, is refused with 400
/// in the API's error shape before any route reads it, so no route picks the first
/// value while another picks the last (or answers axum's plain-text path rejection).
pub(crate) async fn well_formed(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = request.uri().path();
    if percent_encoding::percent_decode_str(path).decode_utf8().is_err() {
        let problem = "is not UTF-8 once its %-escapes are decoded; an id is text";
        return bad_query("path", problem).into_response();
    }
    let pairs = query_pairs(request.uri().query());
    // A set, not a list: a 64 KiB query holds some 16,000 names, and this runs before
    // any token is checked.
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    for (key, _) in &pairs {
        if !seen.insert(key.as_str()) {
            return bad_query(key, "is given more than once; give it once").into_response();
        }
    }
    next.run(request).await
}

/// A 400 naming the one `field` of the request that does not hold.
pub(crate) fn bad_query(field: &str, problem: &str) -> ApiError {
    ApiError::invalid(
        format!("`{field}`: {problem}"),
        &[archmax_vm::FieldProblem { field: field.to_string(), problem: problem.to_string() }],
    )
}

/// The scope a route's token must hold, as a type: [`Authorized`] and [`TurnInput`] take
/// one of the markers in [`scopes`].
pub(crate) trait RequiredScope: Send + Sync + 'static {
    const SCOPE: Scope;
}

/// The markers of [`RequiredScope`], one per [`Scope`].
pub(crate) mod scopes {
    use super::{RequiredScope, Scope};

    /// [`Scope::Read`].
    pub(crate) struct Read;
    /// [`Scope::Start`].
    pub(crate) struct Start;
    /// [`Scope::Decide`].
    pub(crate) struct Decide;
    /// [`Scope::Admin`].
    pub(crate) struct Admin;

    impl RequiredScope for Read {
        const SCOPE: Scope = Scope::Read;
    }
    impl RequiredScope for Start {
        const SCOPE: Scope = Scope::Start;
    }
    impl RequiredScope for Decide {
        const SCOPE: Scope = Scope::Decide;
    }
    impl RequiredScope for Admin {
        const SCOPE: Scope = Scope::Admin;
    }
}

/// The caller, proven to hold the scope `S` (401 without a valid token, 403 without the
/// scope; an open server takes loopback callers only).
pub(crate) struct Authorized<S: RequiredScope>(pub Caller, pub PhantomData<S>);

impl<S: RequiredScope> FromRequestParts<Arc<Server>> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, server: &Arc<Server>) -> Result<Self, ApiError> {
        let caller = server.auth.caller(&parts.headers, S::SCOPE)?;
        Ok(Authorized(caller, PhantomData))
    }
}

/// `?wait=SECONDS`: how long a turn request waits for its outcome (fractions allowed, at
/// most [`MAX_WAIT_SECONDS`]; none is zero). Read by [`TurnInput`] and [`FireParams`].
pub(crate) struct Wait(pub Duration);

impl Wait {
    fn of(query: Option<&str>) -> Result<Wait, ApiError> {
        let Some((_, value)) = query_pairs(query).into_iter().find(|(key, _)| key == "wait") else {
            return Ok(Wait(Duration::ZERO));
        };
        match value.parse::<f64>() {
            Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
                Ok(Wait(Duration::from_secs_f64(seconds.min(MAX_WAIT_SECONDS))))
            }
            _ => Err(bad_query("wait", "must be a number of seconds, 0 or more")),
        }
    }
}

/// `POST /v1/triggers/{trigger}`'s query: `workflow` and `wait`, nothing else.
pub(crate) struct FireParams {
    pub workflow: Option<String>,
    pub wait: Duration,
}

impl FireParams {
    fn of(query: Option<&str>) -> Result<FireParams, ApiError> {
        let Wait(wait) = Wait::of(query)?;
        let mut workflow = None;
        for (key, value) in query_pairs(query) {
            match key.as_str() {
                "workflow" => workflow = Some(value),
                "wait" => {}
                _ => return Err(bad_query(&key, "unknown parameter; this route takes workflow and wait")),
            }
        }
        Ok(FireParams { workflow, wait })
    }
}

impl<State: Send + Sync> FromRequestParts<State> for FireParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &State) -> Result<Self, ApiError> {
        FireParams::of(parts.uri.query())
    }
}

/// `GET /v1/sessions`'s filters and page, each parameter checked and every one that does
/// not hold reported at once.
pub(crate) struct ListFilters(pub SessionQuery);

impl ListFilters {
    fn of(query: Option<&str>) -> Result<ListFilters, ApiError> {
        let mut parsed = SessionQuery::default();
        let mut problems = Vec::new();
        for (key, value) in query_pairs(query) {
            if let Err(problem) = parsed.take(&key, value) {
                problems.push(archmax_vm::FieldProblem { field: key, problem: problem.to_string() });
            }
        }
        if problems.is_empty() {
            Ok(ListFilters(parsed))
        } else {
            Err(ApiError::invalid_fields("query parameters", &problems))
        }
    }
}

impl SessionQuery {
    /// Sets the filter `key` to `value`, or says what is wrong with it.
    fn take(&mut self, key: &str, value: String) -> Result<(), &'static str> {
        let flag = |value: &str| match value {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err("must be true or false"),
        };
        match key {
            // PostgreSQL refuses a NUL in text, and no workflow or id holds a control character.
            "workflow" | "cursor" if value.chars().any(char::is_control) => {
                return Err("must not contain control characters");
            }
            "workflow" => self.workflow = Some(value),
            "status" => {
                let status = serde_json::from_value(Value::String(value))
                    .map_err(|_| "must be running, completed, failed, rejected, awaiting_decision or awaiting_input")?;
                self.status = Some(status);
            }
            "cursor" => self.cursor = Some(value),
            "parked" => self.parked = Some(flag(&value)?),
            "due" => self.due = flag(&value)?,
            "limit" => {
                self.limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|limit| (1..=MAX_PAGE).contains(limit))
                    .ok_or("must be a whole number from 1 to 500")?;
            }
            _ => return Err("unknown filter; use workflow, status, parked, due, cursor or limit"),
        }
        Ok(())
    }
}

impl<State: Send + Sync> FromRequestParts<State> for ListFilters {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &State) -> Result<Self, ApiError> {
        ListFilters::of(parts.uri.query())
    }
}

/// `Last-Event-ID`: the event an SSE client resumes after (0 without the header).
pub(crate) struct LastEventId(pub u64);

impl<State: Send + Sync> FromRequestParts<State> for LastEventId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &State) -> Result<Self, ApiError> {
        Ok(LastEventId(LastEventId::of(&parts.headers)?.unwrap_or(0)))
    }
}

impl LastEventId {
    /// The header's event id, if it was sent; a value that is not one is refused.
    pub(crate) fn of(headers: &axum::http::HeaderMap) -> Result<Option<u64>, ApiError> {
        let mut sent = headers.get_all("last-event-id").iter();
        let Some(value) = sent.next() else {
            return Ok(None);
        };
        if sent.next().is_some() {
            return Err(bad_query("Last-Event-ID", "was sent more than once; send the one last event id seen"));
        }
        value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            // The document types the header as int64, as event ids are stored.
            .filter(|id| i64::try_from(*id).is_ok())
            .map(Some)
            .ok_or_else(|| bad_query("Last-Event-ID", "must be an event id (a whole number from 0 to 2^63 - 1)"))
    }
}

/// The largest artifact `POST /v1/admin/artifacts` takes, in bytes.
pub(crate) const ARTIFACT_LIMIT: usize = 64 * 1024 * 1024;

/// How far past its limit a too-large body is read and thrown away before the `413` is
/// sent.
///
/// A server that answers and closes while the client is still writing makes the
/// client's write fail (a broken pipe, or a reset that eats the answer), so most HTTP
/// clients report a transport error instead of the `413`. Reading the rest of a body
/// that is only somewhat too large lets the client finish and read the answer on an
/// intact connection; a body larger than that is not worth receiving, and its sender
/// gets the answer (or the reset) at once. The body deadline still bounds the reading,
/// and nothing read is kept.
const DISCARD_PAST_LIMIT: usize = 1024 * 1024;

/// Limits above this (the artifact upload's) discard nothing: a body past them is far
/// too large to be read for politeness.
const DISCARD_UP_TO_LIMIT: usize = 4 * 1024 * 1024;

/// The most a body's buffer is given before its bytes arrive, whatever its
/// `Content-Length` says: a client that declares a large body and sends nothing holds
/// no more memory than this.
const INITIAL_BUFFER: usize = 64 * 1024;

/// How many bytes of a body past `limit` are read before it is refused.
fn discard_limit(limit: usize) -> usize {
    if limit <= DISCARD_UP_TO_LIMIT { limit + DISCARD_PAST_LIMIT } else { limit }
}

/// The request body's bytes, refused with 413 past `limit`, 408 when it does not arrive
/// within the server's body deadline ([`crate::request_limits::body_deadline`]) and 400
/// when the transport finds it broken.
/// A refused body of up to [`discard_limit`] bytes is read to its end first.
pub(super) async fn body_bytes(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    let mut pieces = body.into_data_stream();
    if let Some(length) = declared.filter(|length| *length > limit) {
        let read = if length <= discard_limit(limit) { 0 } else { usize::MAX };
        return Err(refuse_after_reading(&mut pieces, read, limit).await);
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(INITIAL_BUFFER));
    while let Some(piece) = pieces.next().await {
        let piece = piece.map_err(|error| refused(&error, limit))?;
        if bytes.len() + piece.len() > limit {
            let read = bytes.len() + piece.len();
            drop(bytes);
            return Err(refuse_after_reading(&mut pieces, read, limit).await);
        }
        bytes.extend_from_slice(&piece);
    }
    Ok(Bytes::from(bytes))
}

/// The `413` for a body past `limit` of which `read` bytes went by: the rest is read and
/// dropped first while the total stays within [`discard_limit`] (a `408` when the body
/// deadline cuts that reading short).
async fn refuse_after_reading(pieces: &mut axum::body::BodyDataStream, mut read: usize, limit: usize) -> ApiError {
    while read <= discard_limit(limit) {
        match pieces.next().await {
            None => break,
            Some(Ok(piece)) => read = read.saturating_add(piece.len()),
            Some(Err(error)) => return refused(&error, limit),
        }
    }
    too_large(limit)
}

/// What a body that failed while being read is answered: `408` when the body deadline
/// cut it off; `413` when a size layer around the route stopped it (the inbox's deliver
/// form: tower-http's limit on a body sent without a `Content-Length`); else `400`, the
/// transport found it broken (the client closed before its `Content-Length`, or sent a
/// malformed chunk).
fn refused(error: &axum::Error, limit: usize) -> ApiError {
    if crate::request_limits::is_over_limit(error) {
        return too_large(limit);
    }
    if crate::request_limits::is_too_slow(error) {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "request.timeout", error.to_string())
    } else {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.body-broken",
            format!(
                "the body could not be read to its end ({error}): it stopped before its Content-Length or its chunked encoding is malformed; send the whole body again"
            ),
        )
    }
}

/// The `413` for a body past `limit` bytes.
fn too_large(limit: usize) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request.too-large", format!("the body is larger than {limit} bytes"))
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

/// A body sent as JSON, not parsed: a webhook's bytes, whose signature covers them as
/// sent. Refused past the server's body limit (413), late (408) or not JSON (415).
pub(crate) struct JsonBytes(pub Bytes);

impl FromRequest<Arc<Server>> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, server: &Arc<Server>) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let bytes = body_bytes(&parts.headers, body, server.body_limit).await?;
        require_json(&parts.headers, &bytes)?;
        Ok(JsonBytes(bytes))
    }
}

/// The body as JSON (`{}` when empty), refused as [`JsonBytes`] is and with 400 when it
/// does not parse; read by [`TurnInput`]. It stays a [`Value`], not a `wire.rs` type: the
/// server checks its fields one by one, so every field that does not hold is named in
/// one answer, which serde's first-error-wins parse of a typed body could not do.
pub(crate) struct JsonBody(pub Value);

impl JsonBody {
    async fn read(headers: &HeaderMap, body: Body, server: &Server) -> Result<JsonBody, ApiError> {
        let bytes = body_bytes(headers, body, server.body_limit).await?;
        if bytes.is_empty() {
            return Ok(JsonBody(json!({})));
        }
        require_json(headers, &bytes)?;
        crate::strict_json::parse(&bytes)
            .map(JsonBody)
            .map_err(|error| bad_query("body", &format!("is not JSON: {error}")))
    }
}

/// An artifact's bytes (`POST /v1/admin/artifacts`), at most [`ARTIFACT_LIMIT`].
pub(crate) struct ArtifactBytes(pub Bytes);

impl<State: Send + Sync> FromRequest<State> for ArtifactBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &State) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        body_bytes(&parts.headers, body, ARTIFACT_LIMIT).await.map(ArtifactBytes)
    }
}

/// What every turn route (a start, a message, a decision, a delivery) reads, in the order
/// it is checked: the caller holding the scope `S`, then `?wait=`, then the JSON body. The
/// request's headers are kept for a check the body calls for (an undeclared delivery
/// needs an admin token). A route with `UPLOADS` (a start, a delivery) also takes a
/// `multipart/form-data` body ([`super::upload`]): its `request` part is the body, its
/// other parts the files; any other route refuses one as not JSON.
pub(crate) struct TurnInput<S: RequiredScope, const UPLOADS: bool = false> {
    pub caller: Caller,
    pub wait: Duration,
    pub body: Value,
    pub files: super::upload::Uploaded,
    pub headers: HeaderMap,
    scope: PhantomData<S>,
}

impl<S: RequiredScope, const UPLOADS: bool> FromRequest<Arc<Server>> for TurnInput<S, UPLOADS> {
    type Rejection = ApiError;

    async fn from_request(request: Request, server: &Arc<Server>) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let caller = server.auth.caller(&parts.headers, S::SCOPE)?;
        let Wait(wait) = Wait::of(parts.uri.query())?;
        let (body, files) = match super::upload::boundary(&parts.headers).filter(|_| UPLOADS) {
            Some(boundary) => {
                refuse_cross_site(&parts.headers)?;
                let layout = (boundary?, super::upload::Layout::Api);
                let sender = (server.as_ref(), caller.identity.as_str());
                let upload = super::upload::read(&parts.headers, body, layout, sender, server.body_limit).await?;
                (upload.body, upload.files)
            }
            None => (JsonBody::read(&parts.headers, body, server).await?.0, super::upload::Uploaded::none()),
        };
        Ok(TurnInput { caller, wait, body, files, headers: parts.headers, scope: PhantomData })
    }
}

/// Refuses an upload a browser sent for another site's page (`Sec-Fetch-Site`):
/// `multipart/form-data` is a body a page may post without a preflight, which a JSON
/// body never is, so the API's uploads check what the browser says of the request too.
fn refuse_cross_site(headers: &HeaderMap) -> Result<(), ApiError> {
    let site = headers.get("sec-fetch-site").and_then(|value| value.to_str().ok()).unwrap_or("none");
    if matches!(site, "none" | "same-origin") {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "auth.cross-site",
        "an upload from another site's web page is refused; send it from a program, or from the inbox's own forms",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_a_size_layer_cut_is_413_and_one_that_broke_is_400() {
        // What tower-http's limit does to a body sent without a Content-Length.
        let limited = Body::new(http_body_util::Limited::new(Body::from("more than four bytes"), 4));
        let refused = body_bytes(&HeaderMap::new(), limited, 1024).await.expect_err("the layer's limit");
        assert_eq!((refused.status, refused.code), (StatusCode::PAYLOAD_TOO_LARGE, "request.too-large"));
        let broken = Body::from_stream(futures_util::stream::iter([
            Ok(Bytes::from_static(b"{")),
            Err(std::io::Error::other("connection reset")),
        ]));
        let refused = body_bytes(&HeaderMap::new(), broken, 1024).await.expect_err("a broken body");
        assert_eq!((refused.status, refused.code), (StatusCode::BAD_REQUEST, "request.body-broken"));
    }

    #[test]
    fn query_strings_are_decoded_and_checked_field_by_field() {
        assert_eq!(
            query_pairs(Some("a=b%20c&d=e+f&g")),
            [("a".into(), "b c".into()), ("d".into(), "e f".into()), ("g".into(), String::new())]
        );
        assert_eq!(query_pairs(Some("p=100%")), [("p".into(), "100%".into())]);
        let wait = |query| Wait::of(query).map(|Wait(wait)| wait);
        assert_eq!(wait(Some("wait=1.5")).expect("wait"), Duration::from_millis(1500));
        assert_eq!(wait(None).expect("none"), Duration::ZERO);
        assert_eq!(wait(Some("wait=100000")).expect("capped"), Duration::from_secs(300));
        assert!(wait(Some("wait=soon")).is_err());
        let Err(error) = ListFilters::of(Some("parked=maybe&limit=0&colour=red")) else {
            panic!("three problems");
        };
        assert_eq!(error.details["fields"].as_array().map(Vec::len), Some(3));
        assert_eq!(error.message, "3 query parameters do not hold");
        let Err(error) = ListFilters::of(Some("limit=0")) else {
            panic!("one problem");
        };
        assert_eq!(error.message, "`limit`: must be a whole number from 1 to 500", "one problem is named, not counted");
        let Ok(ListFilters(query)) = ListFilters::of(Some("workflow=desk&parked=true&limit=10")) else {
            panic!("valid");
        };
        assert_eq!((query.workflow.as_deref(), query.parked, query.limit), (Some("desk"), Some(true), 10));
    }
}
