//! Host triggers fired over HTTP: `POST /v1/triggers/{trigger}` (webhooks).
//!
//! The body is the trigger's input: a JSON object whose members become the session's
//! locked variables, held against the trigger's `requires`. It may hold only what the
//! trigger declares (its `requires` and the first names of its `session:` and `message:`
//! paths; see [`archmax_vm::Runtime::run_firing`]): any other member is a 400 naming it,
//! so a sender cannot replace a locked variable the trigger does not declare. The
//! trigger's `session:` path, resolved in that input, names the session the firing joins
//! (a parked one is resumed: a firing into a wait is its delivery); without one, when it
//! does not resolve to an id, or when it names another workflow's session, the firing
//! starts a session of its own. The trigger's `message:` path names
//! the words of the firing, if any; `message: false` means it carries none.
//!
//! The one thing to know: a trigger id names one workflow's trigger, so a firing finds
//! its workflow by the id; when two served workflows declare the same id, the caller
//! names one with `?workflow=`. `manual` is not a host trigger.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use archmax_vm::kernel::resolve_reference;
use archmax_vm::{FieldProblem, Runtime, TurnRequest};

use crate::auth::Scope;
use crate::error::ApiError;
use crate::server::{Answer, Refused, Server};
use crate::webhooks::{Connections, ReplayClaim};

/// What the route hands over: the raw body (the signature covers its bytes) and the
/// request's headers.
pub struct Firing<'a> {
    pub trigger: &'a str,
    pub workflow: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    pub wait: Duration,
}

impl Server {
    /// Fires host trigger `firing.trigger`: authenticates the sender (its connection's
    /// signature, or a bearer token with `start`), then starts or joins a session. A
    /// firing refused after its signature passed gives its replay record back, so the
    /// sender may send the same signed request again.
    ///
    /// A firing whose turn failed after it changed the session (a runner of the fleet
    /// died under it, a commit failed half-way) keeps its record: it was applied, and a
    /// replay must not apply it again ([`crate::server::Refused::applied`]).
    pub async fn fire(&self, firing: Firing<'_>) -> Result<Answer, ApiError> {
        let mut claims = Vec::new();
        match self.fire_claiming(firing, &mut claims).await {
            Ok(answer) => Ok(answer),
            Err(refused) => {
                if !refused.applied {
                    for claim in claims {
                        Connections::release(self.store.as_ref(), claim).await;
                    }
                }
                Err(refused.error)
            }
        }
    }

    /// [`Server::fire`], keeping in `claims` the replay records its signatures claimed.
    async fn fire_claiming(&self, firing: Firing<'_>, claims: &mut Vec<ReplayClaim>) -> Result<Answer, Refused> {
        if firing.trigger == "manual" {
            return Err(Refused::from(ApiError::new(
                StatusCode::BAD_REQUEST,
                "trigger.manual",
                "`manual` is not a host trigger; start a session with POST /v1/workflows/{slug}/sessions",
            )));
        }
        let declaring: Vec<_> = self
            .newest_runtimes()
            .into_iter()
            .filter(|(slug, runtime)| {
                let program = &runtime.program();
                program.workflow(slug).is_some_and(|(_, workflow)| program.trigger(workflow, firing.trigger).is_some())
            })
            .filter(|(slug, _)| firing.workflow.is_none_or(|wanted| wanted == slug))
            .collect();
        let (slug, newest) = match declaring.as_slice() {
            [one] => one.clone(),
            // Which triggers exist is nobody's business before they authenticate.
            [] => {
                self.auth.caller(firing.headers, Scope::Start)?;
                return Err(ApiError::not_found(
                    "trigger.unknown",
                    match firing.workflow {
                        Some(workflow) => format!("workflow `{workflow}` declares no trigger `{}`", firing.trigger),
                        None => format!("no served workflow declares a trigger `{}`", firing.trigger),
                    },
                )
                .into());
            }
            many => {
                self.auth.caller(firing.headers, Scope::Start)?;
                let names: Vec<&str> = many.iter().map(|(slug, _)| slug.as_str()).collect();
                return Err(ApiError::invalid(
                    format!(
                        "trigger `{}` is declared by {}; name one with ?workflow=",
                        firing.trigger,
                        names.join(" and ")
                    ),
                    &[FieldProblem {
                        field: "workflow".to_string(),
                        problem: format!("required: one of {}", names.join(", ")),
                    }],
                )
                .into());
            }
        };
        let sender = self.authenticate(&newest, &slug, &firing, None, claims).await?;
        let variables = input_of(firing.body)?;
        let mut request = TurnRequest {
            handed: Default::default(),
            workflow: slug.clone(),
            session: None,
            trigger: Some(firing.trigger.to_string()),
            message: None,
            variables,
            upgrade: false,
        };
        // A path naming another workflow's session resolves to no session: the firing
        // starts one of its own, so a sender cannot probe other workflows' sessions.
        let session = newest.session_to_join(&request).await?.to_string();
        // A session the firing joins runs on the program it started on; its trigger there
        // (and that trigger's sender) is the one that counts.
        let existing =
            self.store.read(&session).await.map_err(|error| ApiError::from(archmax_vm::RunError::from(error)))?;
        let runtime = match existing {
            Some(state) => self.runtime_for_session(&state)?,
            None => std::sync::Arc::clone(&newest),
        };
        if !std::sync::Arc::ptr_eq(&runtime, &newest) {
            self.authenticate(&runtime, &slug, &firing, Some(&sender), claims).await?;
        }
        let program = &runtime.program();
        let message = program
            .workflow(&slug)
            .and_then(|(_, workflow)| program.trigger(workflow, firing.trigger))
            .and_then(|trigger| match &trigger.message {
                Some(Some(path)) => resolve_reference(path, &Value::Object(request.variables.clone())),
                Some(None) | None => None,
            });
        request.message = message;
        request.session = Some(session.clone());
        tracing::info!(trigger = firing.trigger, workflow = slug.as_str(), session = session.as_str(), "trigger fired");
        let running = std::sync::Arc::clone(&runtime);
        let turn = Box::pin(async move { running.run_firing(request).await });
        // The sender learns the session and how the turn ended, never what it holds.
        match self.admit_tracked(runtime, &session, &slug, "turn", turn, firing.wait).await? {
            Answer::Finished(shown) => Ok(Answer::Finished(json!({
                "sessionId": shown["sessionId"],
                "status": shown["status"],
                "turn": { "disposition": shown["turn"]["disposition"] },
            }))),
            accepted => Ok(accepted),
        }
    }

    /// Holds the sender of `firing` to the trigger as `runtime`'s program declares it:
    /// its connection's signature, or a bearer token with `start`. Returns the connection
    /// checked (`None`: a token); one `already` checked is not checked twice (its
    /// signature would count as a replay). A replay record it claims goes into `claims`.
    async fn authenticate(
        &self,
        runtime: &Runtime,
        slug: &str,
        firing: &Firing<'_>,
        already: Option<&Option<String>>,
        claims: &mut Vec<ReplayClaim>,
    ) -> Result<Option<String>, ApiError> {
        let program = &runtime.program();
        let Some(trigger) = program.workflow(slug).and_then(|(_, workflow)| program.trigger(workflow, firing.trigger))
        else {
            self.auth.caller(firing.headers, Scope::Start)?;
            return Err(ApiError::not_found(
                "trigger.unknown",
                format!("the program this session runs on declares no trigger `{}`", firing.trigger),
            ));
        };
        let connection = trigger.connection.map(|connection| program.str(connection).to_owned());
        if already == Some(&connection) {
            return Ok(connection);
        }
        let Some(connection) = connection else {
            return self.auth.caller(firing.headers, Scope::Start).map(|_| None);
        };
        let now = (self.now_ms() / 1000) as i64;
        let verified =
            self.connections.verify(self.store.as_ref(), &connection, firing.headers, firing.body, now).await;
        verified.map(|claim| claims.extend(claim)).map(|()| Some(connection.clone())).inspect_err(|refused| {
            tracing::warn!(
                trigger = firing.trigger,
                workflow = slug,
                connection = connection.as_str(),
                reason = refused.message.as_str(),
                "webhook refused"
            );
            self.metrics.webhook_refused();
        })
    }
}

/// The firing's input: an empty body is no input; anything else must be a JSON object.
fn input_of(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let invalid =
        |problem: String| ApiError::invalid(problem.clone(), &[FieldProblem { field: "body".to_string(), problem }]);
    match crate::strict_json::parse(body) {
        Ok(Value::Object(input)) => Ok(input),
        Ok(_) => Err(invalid("the trigger's input must be a JSON object of variable values".to_string())),
        Err(error) => Err(invalid(format!("the body is not JSON: {error}"))),
    }
}
