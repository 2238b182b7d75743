//! The decision inbox: the web pages `archmax serve` answers at `/`, where people find,
//! read and decide parked sessions.
//!
//! ```text
//! GET  /sign-in, POST /sign-in, POST /sign-out   signin: a store-kept session, its id in a cookie
//! GET  /inbox/oidc/start, /inbox/oidc/callback    oidc: the same, through an OpenID Connect provider
//! GET  /?view=&q=&after=…                         pages: one page of a view (views, listing)
//! GET  /sessions/{id}                             pages::session (graph, evidence, forms, record)
//! POST /decide, /reply, /deliver                  actions: one Server call each
//! GET  /live, /live/{id}                          server-sent events that refresh a page
//! GET  /evidence?session=&path=                   an evidence image
//! GET  /assets/{name}                             the embedded CSS and JavaScript
//! ```
//!
//! The one thing to know: every page is rendered on the server with maud, which escapes
//! whatever it is given, and works without JavaScript (the script only refreshes regions
//! as events arrive); every POST carries a CSRF token under the inbox session's own key
//! (derived from the cookie's secret under the identity's key, so any runner verifies
//! it; see `session_record.rs`) and is refused before its body is
//! read when the session or origin is not good, and
//! every answer carries a strict Content-Security-Policy (no inline script or style).
//! A decision goes through [`Server::decide`] with the signed-in identity, so the VM
//! enforces `approvers` and records the decider exactly as for the API.

mod actions;
mod cookies;
mod forms;
mod graph;
pub mod listing;
pub mod markdown;
mod objects;
pub mod oidc;
pub mod pages;
mod present;
mod record;
mod render;
mod session_record;
mod signin;
mod throttle;
mod timed;
pub mod views;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::middleware::map_response;
use axum::response::Response;
use axum::routing::{get, post};

use crate::request_limits::{form_body_limit, upload_form_body_limit};
use crate::server::Server;

pub use objects::field_shape_problems;
pub use signin::Secret;

/// The inbox's share of the server: the server itself and the sign-in throttles (this
/// process's counters; the sign-ins and CSRF keys live in the session store).
pub struct Inbox {
    pub server: Arc<Server>,
    failures_per_client: throttle::Throttle,
    sign_ins_per_identity: throttle::Throttle,
}

type Shared = axum::extract::State<Arc<Inbox>>;

/// The Content-Security-Policy of every inbox answer: only the server's own script,
/// style, images and event streams; no inline script or style, no framing, forms post
/// only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The inbox's routes, to merge into the API's router.
pub fn router(server: Arc<Server>) -> Router {
    let inbox = Arc::new(Inbox {
        server,
        failures_per_client: throttle::Throttle::new(throttle::FAILURES_PER_CLIENT, throttle::SIGN_IN_WINDOW),
        sign_ins_per_identity: throttle::Throttle::new(throttle::SIGN_INS_PER_IDENTITY, throttle::SIGN_IN_WINDOW),
    });
    Router::new()
        .route("/", get(pages::inbox_route))
        .route(
            "/sign-in",
            get(signin::sign_in_page)
                .post(signin::sign_in)
                .layer(form_body_limit())
                .layer(map_response(too_large_page)),
        )
        .route("/sign-out", post(signin::sign_out).layer(form_body_limit()).layer(map_response(too_large_page)))
        .route("/inbox/oidc/start", get(oidc::start))
        .route("/inbox/oidc/callback", get(oidc::callback))
        .route("/sessions/{*id}", get(pages::session_route))
        .route("/decide", post(actions::decide).layer(form_body_limit()).layer(map_response(too_large_page)))
        .route("/reply", post(actions::reply).layer(form_body_limit()).layer(map_response(too_large_page)))
        .route("/deliver", post(actions::deliver).layer(upload_form_body_limit()).layer(map_response(too_large_page)))
        .route("/live", get(actions::inbox_events))
        .route("/live/{*id}", get(actions::session_events))
        .route("/evidence", get(actions::evidence))
        .route("/assets/{name}", get(asset))
        .layer(map_response(secure_headers))
        .with_state(inbox)
}

/// The size layers' own `413` (plain text) as the inbox's error page, saying the limit
/// (route layer: `axum::middleware::map_response(too_large_page)` outside the size layer).
/// A page the inbox made itself (HTML, such as one naming the upload that was too large)
/// is kept as it is.
async fn too_large_page<B>(response: axum::http::Response<B>) -> Response
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|kind| kind.starts_with("text/html"));
    if response.status() != axum::http::StatusCode::PAYLOAD_TOO_LARGE || html {
        return response.map(axum::body::Body::new);
    }
    render::error_page(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "Form refused",
        &format!(
            "The form is larger than the inbox takes ({} KiB of text, and files within the upload limits). Shorten it; a longer message goes through the API.",
            crate::request_limits::FORM_BODY_LIMIT / 1024
        ),
    )
}

/// The headers every inbox answer carries.
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a form's POST carries
    // `Origin: null`, and the origin check needs the real one.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

const STYLE: &str = include_str!("../../assets/inbox.css");
const SCRIPT: &str = include_str!("../../assets/inbox.js");

async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    use axum::response::IntoResponse;
    let (kind, body) = match name.as_str() {
        "inbox.css" => ("text/css; charset=utf-8", STYLE),
        "inbox.js" => ("text/javascript; charset=utf-8", SCRIPT),
        _ => return render::not_found_page().into_response(),
    };
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "max-age=3600")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    async fn text_of(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("a body");
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn the_size_layers_plain_413_becomes_the_inbox_page_and_the_inbox_own_pages_are_kept() {
        let plain = axum::http::Response::builder()
            .status(StatusCode::PAYLOAD_TOO_LARGE)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(axum::body::Body::from("length limit exceeded"))
            .expect("a response");
        let page = too_large_page(plain).await;
        assert_eq!(page.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert!(text_of(page).await.contains("larger than the inbox takes (8 KiB"));
        let own = render::error_page(StatusCode::PAYLOAD_TOO_LARGE, "Form refused", "part `field.slip` is too large");
        let kept = too_large_page(own).await;
        assert!(text_of(kept).await.contains("part `field.slip` is too large"), "the inbox's own page is kept");
        let fine = axum::http::Response::new(axum::body::Body::from("ok"));
        assert_eq!(text_of(too_large_page(fine).await).await, "ok");
    }
}
