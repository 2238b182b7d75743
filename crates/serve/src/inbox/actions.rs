//! What a signed-in person does: decide, reply, deliver (each a form POST answered
//! with a redirect to the session's page, or that page with why not), and the event
//! streams and evidence images the pages load.
//!
//! The one thing to know: each action is one [`Server`](crate::Server) call with the
//! signed-in caller, the same the API makes, so the turn gate (one turn per session),
//! `approvers` and the decider's record are the VM's and the runner's, not the page's.
//! Of two people deciding one session, the second is answered 409 with the page saying
//! who decided, or that a decision is being carried out.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{Value, json};

use super::forms::{self, Form};
use super::pages::session_page;
use super::render::{self, Notice, session_url};
use super::signin::{SignedIn, signed_in, signed_in_post};
use super::{Inbox, Shared, present};
use crate::auth::Scope;
use crate::error::ApiError;

/// How long a form POST waits for its turn before the page is shown (it then updates
/// as the turn goes on).
const TURN_WAIT: Duration = Duration::from_secs(20);

/// A form POST of a signed-in person holding `scope`: the form, the person and the
/// session it names; else the answer that refuses it.
async fn form_action(
    inbox: &Inbox,
    headers: &HeaderMap,
    body: Body,
    scope: (Scope, bool),
) -> Result<(Form, SignedIn, String), Box<Response>> {
    let (form, signed) = signed_in_post(inbox, headers, body, scope).await?;
    let Some(session) = form.text("session") else {
        return Err(Box::new(render::error_page(StatusCode::BAD_REQUEST, "No session", "The form named no session.")));
    };
    Ok((form, signed, session))
}

/// Why a request was refused, as the page says it: the runner's message, every field
/// problem, and for a decision (`done` is `decided`) that lost a race who won it. A reply
/// or delivery to a session not parked for it keeps the runner's message, which says
/// what the session waits for instead.
async fn refusal(inbox: &Inbox, session: &str, done: &str, error: &ApiError) -> String {
    let mut text = error.message.clone();
    if let Some(fields) = error.details.get("fields").and_then(Value::as_array) {
        for field in fields {
            let (name, problem) = (field["field"].as_str().unwrap_or(""), field["problem"].as_str().unwrap_or(""));
            text.push_str(&format!(" {name}: {problem}"));
        }
    }
    match error.code {
        "session.busy" => {
            text = "Another turn of this session is running right now (someone else may have just decided it); this page shows the outcome once it ends.".to_string();
        }
        "session.not-parked" if done == "decided" => {
            let decided = inbox
                .server
                .session(session)
                .await
                .ok()
                .and_then(|state| state.trail.iter().rev().find(|step| step.decided_by.is_some()).cloned());
            text = match decided {
                Some(step) => format!(
                    "This session is no longer waiting for a decision: {} decided it (to {}).",
                    step.decided_by.unwrap_or_default(),
                    step.to
                ),
                None => "This session is no longer waiting for a decision.".to_string(),
            };
        }
        _ => {}
    }
    text
}

/// Runs one action for a signed-in person and answers: a redirect to the session's page
/// saying `done`, or that page with the refusal.
async fn act<Call, Answered>(
    inbox: &std::sync::Arc<Inbox>,
    signed: &SignedIn,
    session: &str,
    done: &str,
    call: Call,
) -> Response
where
    Call: FnOnce() -> Answered,
    Answered: Future<Output = Result<crate::server::Answer, ApiError>>,
{
    match call().await {
        Ok(_) => Redirect::to(&format!("{}?done={done}", session_url(session))).into_response(),
        Err(error) => {
            let why = refusal(inbox, session, done, &error).await;
            session_page(inbox, signed, session, error.status, Some(Notice::error(why))).await
        }
    }
}

/// `POST /decide`: `to` and an optional `comment`, by the signed-in person.
pub async fn decide(State(inbox): Shared, headers: HeaderMap, body: Body) -> Response {
    let (form, signed, session) = match form_action(&inbox, &headers, body, (Scope::Decide, false)).await {
        Ok(action) => action,
        Err(refused) => return *refused,
    };
    let shown = form.text("decision");
    let waiting = inbox.server.session(&session).await.ok().and_then(|state| {
        let workflow = state.head.workflow;
        state.head.pending_decision.map(|decision| (workflow, decision))
    });
    let pending = waiting.as_ref().map(|(_, decision)| decision.seq.to_string());
    // A page names the record it showed; when another record waits now, the click was
    // for that earlier one. (With nothing waiting, the decide below says why.)
    if pending.is_some() && shown.is_some() && shown != pending {
        let why = "The decision you answered is no longer the one waiting: the session moved on since the page was loaded. Here it is as it stands now; decide again if it still needs you.";
        return session_page(&inbox, &signed, &session, StatusCode::CONFLICT, Some(Notice::error(why))).await;
    }
    let to = form.get("to").unwrap_or_default();
    // A decision whose transition asks for a comment (its description, or the workflow's
    // `[inbox]` settings) is not taken without one.
    let needs_comment = waiting.as_ref().and_then(|(workflow, decision)| {
        let settings = inbox.server.settings.inbox.for_workflow(workflow);
        decision.transitions.iter().find(|choice| choice.to == to && present::comment_required(choice, &settings))
    });
    if let Some(choice) = needs_comment
        && form.text("comment").is_none()
    {
        let why = format!(
            "Moving to {} needs a comment: write in the comment box why you decide so, then choose again.",
            choice.to
        );
        return session_page(&inbox, &signed, &session, StatusCode::BAD_REQUEST, Some(Notice::error(why))).await;
    }
    let mut request = json!({ "to": to });
    if let Some(comment) = form.text("comment") {
        request["comment"] = json!(comment);
    }
    let server = &inbox.server;
    let call = || server.decide(&session, &request, &signed.caller, TURN_WAIT);
    act(&inbox, &signed, &session, "decided", call).await
}

/// `POST /reply`: a message to a parked session (a reply-only turn).
pub async fn reply(State(inbox): Shared, headers: HeaderMap, body: Body) -> Response {
    let (form, signed, session) = match form_action(&inbox, &headers, body, (Scope::Start, false)).await {
        Ok(action) => action,
        Err(refused) => return *refused,
    };
    let request = json!({ "message": form.get("message").unwrap_or_default() });
    let server = &inbox.server;
    let call = || server.message(&session, &request, None, TURN_WAIT);
    act(&inbox, &signed, &session, "replied", call).await
}

/// `POST /deliver`: a trigger's values, typed by its signature's schema.
pub async fn deliver(State(inbox): Shared, headers: HeaderMap, body: Body) -> Response {
    let (mut form, signed, session) = match form_action(&inbox, &headers, body, (Scope::Start, true)).await {
        Ok(action) => action,
        Err(refused) => return *refused,
    };
    let files = std::mem::take(&mut form.files);
    let trigger = form.text("trigger").unwrap_or_default();
    let (workflow, schema) = trigger_schema(&inbox, &session, &trigger).await.unwrap_or_default();
    let shapes = inbox.server.settings.inbox.for_workflow(&workflow).fields;
    let variables = match forms::variables(&schema, &form, &shapes) {
        Ok(variables) => variables,
        Err(problems) => {
            let why = format!("The input was not delivered: {}. Correct it and deliver again.", problems.join("; "));
            return session_page(&inbox, &signed, &session, StatusCode::BAD_REQUEST, Some(Notice::error(why))).await;
        }
    };
    let mut request = json!({ "trigger": trigger, "variables": variables });
    if let Some(message) = form.text("message") {
        request["message"] = json!(message);
    }
    let server = &inbox.server;
    let call = || server.deliver(&session, (&request, files), None, TURN_WAIT);
    act(&inbox, &signed, &session, "delivered", call).await
}

/// The workflow of `session` and the JSON Schema of `trigger`'s `requires` in the
/// program it runs on.
async fn trigger_schema(inbox: &Inbox, session: &str, trigger: &str) -> Option<(String, Value)> {
    let state = inbox.server.session(session).await.ok()?;
    let runtime = inbox.server.runtime_for_session(&state).ok()?;
    let program = &runtime.program();
    let (_, workflow) = program.workflow(state.head.workflow.as_str())?;
    let declared = workflow.triggers.iter().find(|declared| program.str(declared.id) == trigger)?;
    Some((state.head.workflow.clone(), serde_json::from_str(program.str(declared.schema)).ok()?))
}

fn unauthenticated_stream() -> Response {
    (StatusCode::UNAUTHORIZED, "sign in first").into_response()
}

/// `GET /live`: one `changed` event whenever any session has new events (the inbox
/// then fetches itself again), until the server stops.
pub async fn inbox_events(State(inbox): Shared, headers: HeaderMap) -> Response {
    if signed_in(&inbox, &headers, Scope::Read).await.is_err() {
        return unauthenticated_stream();
    }
    let changes = inbox.server.hub.watch_all();
    let stopping = inbox.server.stopping();
    let stream = futures_util::stream::unfold((changes, stopping), |(mut changes, mut stopping)| async move {
        if *stopping.borrow() {
            return None;
        }
        tokio::select! {
            changed = changes.changed() => {
                changed.ok()?;
                let count = *changes.borrow_and_update();
                let event = sse::Event::default().event("changed").data(count.to_string());
                Some((Ok::<_, Infallible>(event), (changes, stopping)))
            }
            _ = stopping.changed() => None,
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// `GET /live/{id}?after=N`: the session's event stream (`GET /v1/sessions/{id}/events`)
/// after event `N` (the page's), or after `Last-Event-ID` when the browser reconnects.
pub async fn session_events(
    State(inbox): Shared,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    if signed_in(&inbox, &headers, Scope::Read).await.is_err() {
        return unauthenticated_stream();
    }
    let shown = crate::routes::query_pairs(query.as_deref())
        .into_iter()
        .find(|(key, _)| key == "after")
        .and_then(|(_, value)| value.parse::<u64>().ok());
    let resumed = match crate::routes::extract::LastEventId::of(&headers) {
        Ok(resumed) => resumed,
        Err(error) => return error.into_response(),
    };
    let after = resumed.or(shown).unwrap_or(0);
    match inbox.server.events(&id, after).await {
        Ok(stream) => Sse::new(stream).keep_alive(KeepAlive::default()).into_response(),
        Err(error) => error.into_response(),
    }
}

/// The largest evidence image served.
const IMAGE_LIMIT: u64 = 16 * 1024 * 1024;

/// `GET /evidence?session=&path=`: an image the pending decision names as evidence
/// (nothing else of the session's files), sandboxed.
pub async fn evidence(State(inbox): Shared, RawQuery(query): RawQuery, headers: HeaderMap) -> Response {
    if let Err(refused) = signed_in(&inbox, &headers, Scope::Read).await {
        return refused.into_page();
    }
    let pairs = crate::routes::query_pairs(query.as_deref());
    let value = |name: &str| pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    let (Some(session), Some(path)) = (value("session"), value("path")) else {
        return render::not_found_page();
    };
    let Ok(state) = inbox.server.session(&session).await else { return render::not_found_page() };
    let named = state.head.pending_decision.as_ref().is_some_and(|decision| decision.evidence.contains(&path));
    let (true, Some(media)) = (named, render::image_type(&path)) else {
        return render::not_found_page();
    };
    let Ok(files) = inbox.server.store.files(&state.id) else { return render::not_found_page() };
    let read = tokio::task::spawn_blocking(move || files.read_limited(&path, IMAGE_LIMIT)).await;
    match read {
        Ok(Ok(bytes)) => {
            ([(header::CONTENT_TYPE, media), (header::CONTENT_SECURITY_POLICY, "default-src 'none'; sandbox")], bytes)
                .into_response()
        }
        _ => render::not_found_page(),
    }
}
