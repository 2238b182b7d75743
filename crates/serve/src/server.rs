//! The server's library functions: everything a handler calls, one function per route.
//!
//! Handlers parse and authenticate; these functions check the request's fields (all of
//! them, every problem reported at once), find the runtime that holds the workflow,
//! admit the turn through the [`TurnGate`] and answer with the session as
//! [`summary`] shows it.
//!
//! The one thing to know: an answer comes once the turn was **accepted** (the runtime
//! passed its checks and emitted its first event) or ended, so a refused request is
//! answered with its error, never with a 202; `?wait=` then waits for the outcome.

mod admission;
mod fields;
mod handover;
mod ticks;

pub use admission::Answer;
pub(crate) use admission::Refused;

use fields::{checked_session_id, session_path};
pub(crate) use ticks::Ticks;

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::sse;
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::routes::Uploaded;
use archmax_program::program::Program;
use archmax_vm::clock::Clock;
use archmax_vm::events::EventSink;
use archmax_vm::model::ModelAdapter;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::session::summary::summary;
use archmax_vm::session::{SessionState, SessionStore};
use archmax_vm::{DecideRequest, DeliverRequest, FieldProblem, RunError, Runtime, RuntimeParts, TurnRequest};

use crate::auth::{Auth, Caller, SharedAuth};
use crate::error::ApiError;
use crate::hub::{Hub, root_session};
use crate::metrics::Metrics;
use crate::turns::{TurnGate, TurnLimits};
use crate::webhooks::Connections;
use archmax_config::settings::RunnerSettings;
use fields::{Fields, raised_by};

/// The longest `?wait=` honoured, in seconds.
pub const MAX_WAIT_SECONDS: f64 = 300.0;
/// The largest request body accepted by default, in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// How long a request's body may take to arrive, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The most sessions one page of `GET /v1/sessions` holds.
pub const MAX_PAGE: usize = archmax_vm::session::store::ListQuery::MAX_LIMIT;

/// Everything a server is built from.
pub struct ServerParts {
    /// The programs served (one per artifact, or the compiled workspace).
    pub programs: Vec<Program>,
    pub store: Arc<dyn SessionStore>,
    pub model: Arc<dyn ModelAdapter>,
    pub clock: Arc<dyn Clock>,
    pub pricing: PricingTable,
    /// The workspace root (mount sources).
    pub root: PathBuf,
    pub auth: Auth,
    pub limits: TurnLimits,
    pub body_limit: usize,
    /// The host tools (MCP servers) and essential tools every runtime asks.
    pub tools: archmax_vm::tool_host::HostTools,
    /// The context budgets of every session (`[context]` of `archmax.toml`).
    pub context: archmax_vm::context::ContextSettings,
    /// What a session may spend before a person raises it (`[limits]`).
    pub budgets: archmax_config::settings::Budgets,
}

/// Why a server could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("there is nothing to serve: no program holds a workflow")]
    Empty,
}

/// Turns an artifact's bytes into a program, verifying it (and its signature, where
/// keys are trusted): what `POST /v1/admin/artifacts` and a reload use.
pub type ArtifactLoader = Arc<dyn Fn(&[u8]) -> Result<Program, String> + Send + Sync>;

/// What a runtime for a newly loaded program is built from.
struct RuntimeFactory {
    model: Arc<dyn ModelAdapter>,
    events: EventSink,
    root: PathBuf,
    pricing: PricingTable,
    tools: archmax_vm::tool_host::HostTools,
    context: archmax_vm::context::ContextSettings,
    budgets: archmax_config::settings::Budgets,
}

/// One workflow as a load changed it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedWorkflow {
    pub workflow: String,
    pub spec_hash: String,
    /// The hash new sessions started on before, if the workflow was served.
    pub previous: Option<String>,
    /// Whether the workflow is now out of service. Toggling `disabled` keeps the spec
    /// hash (parked sessions still finish), so a load that only does that is reported
    /// with `previous` equal to `spec_hash`.
    pub disabled: bool,
}

/// A running server's state.
///
/// It serves *generations* of programs: every program loaded since start, oldest first.
/// A new session starts on the newest generation holding its workflow; an existing one
/// runs on the generation whose workflow has the session's spec hash, so a parked
/// session finishes on the program it started on after a newer one was loaded.
pub struct Server {
    generations: RwLock<Arc<Vec<Arc<Runtime>>>>,
    factory: RuntimeFactory,
    pub store: Arc<dyn SessionStore>,
    pub auth: SharedAuth,
    /// Webhook senders (`[connections.<slug>]`).
    pub connections: Connections,
    /// The runner's tables of `archmax.toml`.
    pub settings: RunnerSettings,
    /// Outgoing notifications (`[notify.<name>]`).
    pub notify: Arc<crate::notify::Notifiers>,
    loader: Option<ArtifactLoader>,
    /// Resume times of waiting sessions, for the scheduler.
    pub(crate) due: Arc<crate::schedule::DueIndex>,
    pub gate: Arc<TurnGate>,
    pub hub: Hub,
    pub metrics: Arc<Metrics>,
    pub body_limit: usize,
    /// How long a request's body may take to arrive (408 past it).
    pub body_timeout: Duration,
    /// Reverse proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`): the
    /// inbox's sign-in throttle counts that client instead of the proxy.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// `[inbox.oidc]`: the provider people sign in to the inbox through.
    pub oidc: Option<Arc<crate::inbox::oidc::Provider>>,
    /// Uploads (`multipart/form-data` turn requests) being read now, bounded.
    pub(crate) uploads: crate::routes::UploadSlots,
    clock: Arc<dyn Clock>,
    stopping: watch::Sender<bool>,
}

/// The id `/readyz` reads: a valid id no session is ever given (ids with `~` are never
/// started by a caller), so the read is a cheap miss.
const READINESS_PROBE: &str = "readyz~probe";

impl Server {
    pub fn new(parts: ServerParts) -> Result<Server, ServerError> {
        let metrics = Arc::new(Metrics::default());
        let hub = Hub::shared_through(parts.store.event_log());
        let events = EventSink::new();
        events.listen(hub.listener(Arc::clone(&metrics)));
        let due = Arc::new(crate::schedule::DueIndex::default());
        events.listen(due.listener());
        if parts.programs.iter().all(|program| program.workflows.is_empty()) {
            return Err(ServerError::Empty);
        }
        let server = Server {
            generations: RwLock::new(Arc::new(Vec::new())),
            factory: RuntimeFactory {
                model: parts.model,
                events,
                root: parts.root,
                pricing: parts.pricing,
                tools: parts.tools,
                context: parts.context,
                budgets: parts.budgets,
            },
            store: crate::metrics::timed_store::timed(parts.store, Arc::clone(&metrics)),
            auth: SharedAuth::new(parts.auth),
            connections: Connections::default(),
            settings: RunnerSettings::default(),
            notify: Arc::new(crate::notify::Notifiers::default()),
            loader: None,
            due,
            gate: TurnGate::new(parts.limits, Arc::clone(&metrics)),
            hub,
            metrics,
            body_limit: parts.body_limit,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            trusted_proxies: Vec::new(),
            oidc: None,
            uploads: Default::default(),
            clock: parts.clock,
            stopping: watch::channel(false).0,
        };
        // Later programs are newer: `--artifact v1.amx --artifact v2.amx` starts new
        // sessions on v2 and keeps v1 for the sessions pinned to it.
        server.load_programs(parts.programs);
        Ok(server)
    }

    /// Serves webhooks and the scheduler from `archmax.toml`'s runner tables.
    pub fn with_settings(mut self, settings: RunnerSettings, connections: Connections) -> Server {
        self.metrics.route_models(&settings);
        self.settings = settings;
        self.connections = connections;
        self
    }

    /// Sends `notifiers`' notifications: parked and failed turns from the runtime's
    /// events, waiting decisions from the scan [`serve_with`](crate::serve_with) starts.
    pub fn with_notifiers(mut self, mut notifiers: crate::notify::Notifiers) -> Server {
        notifiers.attach(Arc::clone(&self.metrics), Arc::clone(&self.clock));
        let notifiers = Arc::new(notifiers);
        if !notifiers.is_empty() {
            self.factory.events.listen(notifiers.listener());
        }
        self.notify = notifiers;
        self
    }

    /// Takes the client named by `X-Forwarded-For` when the peer is one of `proxies`.
    pub fn with_trusted_proxies(mut self, proxies: Vec<std::net::IpAddr>) -> Server {
        self.trusted_proxies = proxies;
        self
    }

    /// Lets `POST /v1/admin/artifacts` load artifacts through `loader`.
    pub fn with_loader(mut self, loader: ArtifactLoader) -> Server {
        self.loader = Some(loader);
        self
    }

    /// The server clock's time, in milliseconds since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Every generation, oldest first.
    fn generations(&self) -> Arc<Vec<Arc<Runtime>>> {
        match self.generations.read() {
            Ok(generations) => Arc::clone(&generations),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Serves `program` as the newest generation; see [`Server::load_programs`].
    pub fn load_program(&self, program: Program) -> Vec<LoadedWorkflow> {
        self.load_programs(vec![program])
    }

    /// Serves `programs`, in order, as the newest generations: new sessions of their
    /// workflows start on the last one holding each, sessions already running keep theirs.
    /// A program a generation already serves (every workflow with the same spec hash)
    /// reuses that generation, moved to the newest place, so a reload of unchanged
    /// artifacts adds nothing and loading an older artifact again rolls back to it. The
    /// whole set is swapped in at once. Returns the workflows whose newest program changed.
    pub fn load_programs(&self, programs: Vec<Program>) -> Vec<LoadedWorkflow> {
        // `disabled` is not in the spec hash (a disabled workflow's parked sessions keep
        // their program), so a program is the same one only if it agrees on both.
        fn signature(program: &Program) -> Vec<(String, String, bool)> {
            let mut entries: Vec<(String, String, bool)> = program
                .workflows
                .iter()
                .map(|workflow| (program.str(workflow.slug).to_string(), workflow.spec_hash.clone(), workflow.disabled))
                .collect();
            entries.sort();
            entries
        }
        let newest_of = |generations: &[Arc<Runtime>], slug: &str| {
            generations.iter().rev().find_map(|runtime| {
                runtime.program().workflow(slug).map(|(_, workflow)| (workflow.spec_hash.clone(), workflow.disabled))
            })
        };
        // The runtimes for new programs are built before the lock is taken.
        let current = self.generations();
        let mut incoming: Vec<Result<Arc<Runtime>, Program>> = Vec::new();
        for program in programs {
            let wanted = signature(&program);
            match current.iter().find(|runtime| signature(runtime.program()) == wanted) {
                Some(existing) => incoming.push(Ok(Arc::clone(existing))),
                None => incoming.push(Err(program)),
            }
        }
        let incoming: Vec<Arc<Runtime>> = incoming
            .into_iter()
            .map(|entry| match entry {
                Ok(existing) => existing,
                Err(program) => Arc::new(
                    Runtime::builder(RuntimeParts {
                        program: Arc::new(program),
                        store: Arc::clone(&self.store),
                        model: Arc::clone(&self.factory.model),
                        events: self.factory.events.clone(),
                        clock: Arc::clone(&self.clock),
                        root: self.factory.root.clone(),
                        pricing: self.factory.pricing.clone(),
                    })
                    .tools(&self.factory.tools)
                    .context(self.factory.context)
                    .budgets(self.factory.budgets.clone())
                    .build(),
                ),
            })
            .collect();
        let mut generations = match self.generations.write() {
            Ok(generations) => generations,
            Err(poisoned) => poisoned.into_inner(),
        };
        let before: Vec<Arc<Runtime>> = generations.iter().cloned().collect();
        let mut next: Vec<Arc<Runtime>> =
            before.iter().filter(|runtime| !incoming.iter().any(|new| Arc::ptr_eq(new, runtime))).cloned().collect();
        next.extend(incoming.iter().cloned());
        let mut changed = Vec::new();
        let mut slugs: Vec<String> = incoming
            .iter()
            .flat_map(|runtime| runtime.program().workflows.iter().map(|w| runtime.program().str(w.slug).to_string()))
            .collect();
        slugs.sort();
        slugs.dedup();
        for slug in slugs {
            let (previous, now) = (newest_of(&before, &slug), newest_of(&next, &slug));
            if let Some((spec_hash, disabled)) = now
                && previous.as_ref() != Some(&(spec_hash.clone(), disabled))
            {
                let previous = previous.map(|(hash, _)| hash);
                changed.push(LoadedWorkflow { workflow: slug, spec_hash, previous, disabled });
            }
        }
        self.metrics.generations_loaded.store(next.len() as u64, std::sync::atomic::Ordering::Relaxed);
        *generations = Arc::new(next);
        changed
    }

    /// `POST /v1/admin/artifacts`: verifies and loads an artifact's bytes.
    pub fn load_artifact(&self, bytes: &[u8]) -> Result<Value, ApiError> {
        let Some(loader) = &self.loader else {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "artifacts.not-loadable",
                "this server compiles its workspace (development mode); it reloads on change instead",
            ));
        };
        let program = loader(bytes).map_err(|problem| {
            ApiError::invalid(problem.clone(), &[FieldProblem { field: "body".to_string(), problem }])
        })?;
        let loaded = self.load_program(program);
        Ok(json!({ "loaded": loaded, "workflows": self.workflows() }))
    }

    /// Every workflow spec a generation here runs, as (slug, spec hash) pairs: the
    /// sessions a fleet's store may hand this runner ([`SessionStore::claim_chores`]).
    pub(crate) fn runnable_specs(&self) -> Vec<(String, String)> {
        let mut specs: Vec<(String, String)> = self
            .generations()
            .iter()
            .flat_map(|runtime| {
                let program = runtime.program();
                program
                    .workflows
                    .iter()
                    .map(|workflow| (program.str(workflow.slug).to_string(), workflow.spec_hash.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        specs.sort();
        specs.dedup();
        specs
    }

    /// Every workflow served, sorted.
    pub fn workflows(&self) -> Vec<String> {
        let mut slugs: Vec<String> = self
            .generations()
            .iter()
            .flat_map(|runtime| {
                runtime.program().workflows.iter().map(|workflow| runtime.program().str(workflow.slug).to_string())
            })
            .collect();
        slugs.sort();
        slugs.dedup();
        slugs
    }

    /// The newest generation holding `workflow`: where a new session starts.
    pub(crate) fn runtime_for(&self, workflow: &str) -> Result<Arc<Runtime>, ApiError> {
        self.generations()
            .iter()
            .rev()
            .find(|runtime| runtime.program().workflow(workflow).is_some())
            .cloned()
            .ok_or_else(|| RunError::UnknownWorkflow { workflow: workflow.to_string(), known: self.workflows() }.into())
    }

    /// The generation an existing session runs on: the one holding its workflow with
    /// its spec hash, else the newest (which refuses it as pinned to another program,
    /// naming both hashes).
    pub(crate) fn runtime_for_session(&self, state: &SessionState) -> Result<Arc<Runtime>, ApiError> {
        let generations = self.generations();
        let pinned = generations.iter().rev().find(|runtime| {
            runtime
                .program()
                .workflow(&state.head.workflow)
                .is_some_and(|(_, workflow)| workflow.spec_hash == state.head.spec_hash)
        });
        match pinned {
            Some(runtime) => Ok(Arc::clone(runtime)),
            None => self.runtime_for(&state.head.workflow),
        }
    }

    /// Every served workflow's newest program, for a host trigger's lookup.
    pub(crate) fn newest_runtimes(&self) -> Vec<(String, Arc<Runtime>)> {
        self.workflows()
            .into_iter()
            .filter_map(|slug| self.runtime_for(&slug).ok().map(|runtime| (slug, runtime)))
            .collect()
    }

    pub(crate) async fn session(&self, id: &str) -> Result<SessionState, ApiError> {
        let id = session_path(id)?;
        match self.store.read(&id).await {
            Ok(Some(state)) => Ok(state),
            Ok(None) => Err(RunError::UnknownSession(id).into()),
            Err(error) => Err(RunError::from(error).into()),
        }
    }

    /// `POST /v1/workflows/{slug}/sessions`: starts a session. `files` are an upload's
    /// files for the trigger's `file` inputs: checked before the turn is admitted, and
    /// copied into the session by the turn itself, in its place in the session's queue.
    pub async fn start(
        &self,
        workflow: &str,
        body: &Value,
        uploaded: Uploaded,
        wait: Duration,
    ) -> Result<Answer, ApiError> {
        let (files, permit) = uploaded.take();
        let mut fields = Fields::of(body, &["message", "trigger", "variables", "sessionId"]);
        let message = fields.text("message", true);
        let trigger = fields.text("trigger", false);
        let variables = fields.variables();
        let requested = fields.text("sessionId", false);
        fields.finish()?;
        let runtime = self.runtime_for(workflow)?;
        let mut request = TurnRequest {
            workflow: workflow.to_string(),
            session: None,
            trigger,
            message,
            variables,
            ..TurnRequest::default()
        };
        let (session, named) = match requested {
            Some(id) => (checked_session_id(&id, "sessionId")?, true),
            // The trigger's `session:` path names the conversation a firing joins; a
            // firing whose path does not resolve starts a session of its own.
            None => (runtime.session_to_join(&request).await?.to_string(), false),
        };
        let existing = self.store.read(&session).await.map_err(RunError::from)?;
        if named && existing.is_some() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "session.exists",
                format!("session `{session}` exists; continue it with POST /v1/sessions/{session}/messages"),
            ));
        }
        // A session joined keeps the program it started on.
        let runtime = match existing {
            Some(state) => self.runtime_for_session(&state)?,
            None => runtime,
        };
        request.session = Some(session.clone());
        handover::to_start(&runtime, &mut request, &session, files).await?;
        // A host trigger fired over HTTP carries only what it declares, as from a webhook.
        let host_trigger = request.trigger.as_deref().is_some_and(|trigger| trigger != "manual");
        let running = Arc::clone(&runtime);
        let turn = Box::pin(async move {
            // The upload counts against the runner's bound until its turn has ended.
            let _permit = permit;
            if host_trigger { running.run_firing(request).await } else { running.run_turn(request).await }
        });
        self.admit(runtime, &session, workflow, "turn", turn, wait).await
    }

    /// `POST /v1/sessions/{id}/messages`: continues a session, or a reply-only turn
    /// when it is parked at a decision.
    /// `raiser` is the caller a `raiseBudget: true` body was authorized for (a token
    /// that may decide); a raise without one is refused.
    pub async fn message(
        &self,
        id: &str,
        body: &Value,
        raiser: Option<&Caller>,
        wait: Duration,
    ) -> Result<Answer, ApiError> {
        let mut fields = Fields::of(body, &["message", "raiseBudget"]);
        let message = fields.text("message", true);
        let raise = fields.flag("raiseBudget");
        fields.finish()?;
        let raised_by = raised_by(raise, raiser)?;
        let state = self.session(id).await?;
        let runtime = self.runtime_for_session(&state)?;
        if raise {
            // A raise goes with a reply: to a session stopped at its budget (it goes on)
            // or parked for a decision (raised ahead of time).
            let request = archmax_vm::ReplyRequest {
                session: state.id.to_string(),
                workflow: None,
                message: message.unwrap_or_default(),
                upgrade: false,
                raise_budget: true,
                raised_by,
            };
            let running = Arc::clone(&runtime);
            let turn = Box::pin(async move { running.reply(request).await });
            return self.admit(runtime, &state.id, &state.head.workflow, "reply", turn, wait).await;
        }
        let request = TurnRequest {
            workflow: state.head.workflow.clone(),
            session: Some(state.id.to_string()),
            message,
            ..TurnRequest::default()
        };
        let running = Arc::clone(&runtime);
        let turn = Box::pin(async move { running.run_turn(request).await });
        self.admit(runtime, &state.id, &state.head.workflow, "turn", turn, wait).await
    }

    /// `POST /v1/sessions/{id}/decide`: a person's decision, by the caller. An
    /// authenticated caller's identity is recorded and held against `approvers`.
    pub async fn decide(&self, id: &str, body: &Value, caller: &Caller, wait: Duration) -> Result<Answer, ApiError> {
        let mut fields = Fields::of(body, &["to", "comment", "raiseBudget"]);
        let to = fields.text("to", true);
        let comment = fields.text("comment", false);
        let raise_budget = fields.flag("raiseBudget");
        fields.finish()?;
        let state = self.session(id).await?;
        let runtime = self.runtime_for_session(&state)?;
        let request = DecideRequest {
            session: state.id.to_string(),
            workflow: None,
            to: to.unwrap_or_default(),
            comment,
            upgrade: false,
            decider: caller.authenticated.then(|| caller.identity.clone()),
            enforce_approvers: caller.authenticated,
            raise_budget,
        };
        let running = Arc::clone(&runtime);
        let turn = Box::pin(async move { running.decide(request).await });
        self.admit(runtime, &state.id, &state.head.workflow, "decide", turn, wait).await
    }

    /// `POST /v1/sessions/{id}/deliver`: a trigger to a session waiting for input.
    /// `raiser` as for [`Server::message`].
    pub async fn deliver(
        &self,
        id: &str,
        (body, uploaded): (&Value, Uploaded),
        raiser: Option<&Caller>,
        wait: Duration,
    ) -> Result<Answer, ApiError> {
        let mut fields =
            Fields::of(body, &["trigger", "variables", "message", "undeclared", "workflow", "raiseBudget"]);
        let trigger = fields.text("trigger", true);
        let variables = fields.variables();
        let message = fields.text("message", false);
        let undeclared = fields.flag("undeclared");
        let workflow = fields.text("workflow", false);
        let raise_budget = fields.flag("raiseBudget");
        fields.finish()?;
        let raised_by = raised_by(raise_budget, raiser)?;
        let state = self.session(id).await?;
        // A session of another workflow is answered as one that does not exist.
        archmax_vm::check_named_workflow(&state, workflow.as_deref())?;
        let runtime = self.runtime_for_session(&state)?;
        let trigger = trigger.unwrap_or_default();
        let mut variables = variables;
        let (files, permit) = uploaded.take();
        let handed = handover::to_delivery(&runtime, (&state.head.workflow, &trigger), files, &mut variables)?;
        let request = DeliverRequest {
            session: state.id.to_string(),
            workflow,
            trigger,
            variables,
            message,
            upgrade: false,
            // A trigger the workflow declares, its `requires` checked; `undeclared: true`
            // lets any id through, as `archmax deliver --undeclared` does.
            declared_only: !undeclared,
            raise_budget,
            raised_by,
            handed,
        };
        let running = Arc::clone(&runtime);
        let turn = Box::pin(async move {
            let _permit = permit;
            running.deliver(request).await
        });
        self.admit(runtime, &state.id, &state.head.workflow, "deliver", turn, wait).await
    }

    /// `GET /v1/sessions/{id}`.
    pub async fn show(&self, id: &str) -> Result<Value, ApiError> {
        Ok(summary(&self.session(id).await?))
    }

    /// `GET /v1/sessions/{id}/transcript`.
    pub async fn transcript(&self, id: &str) -> Result<Value, ApiError> {
        let state = self.session(id).await?;
        Ok(json!({ "sessionId": state.id, "messages": state.messages }))
    }

    /// `GET /v1/sessions`: one page of sessions in id order after `cursor`, filtered and
    /// paged by the store ([`SessionStore::list_page`]). A session that no longer loads
    /// (damaged, or changed behind the store's back) is named in `unreadable` and skipped:
    /// one bad session must not hide all the others.
    pub async fn list(&self, query: &SessionQuery) -> Result<Value, ApiError> {
        let listing = archmax_vm::session::store::ListQuery {
            cursor: query.cursor.clone(),
            limit: query.limit,
            workflow: query.workflow.clone(),
            status: query.status,
            parked: query.parked,
            due_by: query.due.then(|| self.clock.now_ms()),
        };
        let page = self.store.list_page(&listing).await.map_err(RunError::from)?;
        let sessions: Vec<Value> = page.sessions.iter().map(summary).collect();
        let mut listed = json!({ "sessions": sessions, "nextCursor": page.next });
        if !page.unreadable.is_empty() {
            listed["unreadable"] = json!(page.unreadable);
        }
        Ok(listed)
    }

    /// `GET /readyz`: the programs are loaded and the store answers.
    pub async fn ready(&self) -> Result<Value, ApiError> {
        if self.gate.is_closing() {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server.shutting-down",
                "the server is shutting down",
            ));
        }
        // One cheap read (an id no session has) proves the store answers; listing every
        // session on each probe would cost a walk of the whole store. The cause goes to the
        // operator's log, not to an unauthenticated caller (it may name a host path).
        match self.store.read(READINESS_PROBE).await {
            Ok(_) => Ok(json!({ "ready": true, "workflows": self.workflows() })),
            Err(error) => {
                tracing::error!("readyz: the session store did not answer: {error}");
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store.unreachable",
                    "the session store did not answer; the server's log says why",
                ))
            }
        }
    }

    /// `GET /v1/sessions/{id}/events`: the session's events after `after`, then live
    /// ones, until the server stops. On a store a fleet shares they are read from the
    /// store, so the stream shows every turn wherever it ran ([`Hub`]).
    pub async fn events(
        &self,
        id: &str,
        after: u64,
    ) -> Result<impl Stream<Item = Result<sse::Event, Infallible>> + Send + 'static, ApiError> {
        let state = self.session(id).await?;
        let session = root_session(&state.id).to_string();
        let watch = self.hub.watch_stream(&session);
        // An id past the session's last event was given under another numbering (this
        // process restarted, or the hub let the session go): the stream starts over from
        // the first event kept, whose id tells the client so.
        // A store that could not say leaves the client's id as it is: the stream goes on
        // from there once the store answers.
        let renumbered = self.hub.last_known(&session).await.is_some_and(|last| after > last);
        let after = if renumbered { 0 } else { after };
        let stopping = self.stopping.subscribe();
        let hub = self.hub.clone();
        let stream = futures_util::stream::unfold(
            (hub, session, after, watch, stopping, std::collections::VecDeque::new()),
            |(hub, session, mut after, mut watch, mut stopping, mut pending)| async move {
                loop {
                    if let Some(event) = pending.pop_front() {
                        let event: crate::hub::NumberedEvent = event;
                        after = event.id;
                        let sent = sse::Event::default().id(event.id.to_string()).event("archmax").data(event.json);
                        return Some((Ok(sent), (hub, session, after, watch, stopping, pending)));
                    }
                    if *stopping.borrow() {
                        return None;
                    }
                    watch.borrow_and_update();
                    pending.extend(hub.since_anywhere(&session, after).await);
                    if !pending.is_empty() {
                        continue;
                    }
                    tokio::select! {
                        changed = watch.changed() => if changed.is_err() { return None; },
                        // On a shared store a notification can be missed (a listening
                        // connection that dropped): look again now and then regardless.
                        _ = tokio::time::sleep(crate::hub::SHARED_POLL), if hub.is_shared() => {}
                        _ = stopping.changed() => return None,
                    }
                }
            },
        );
        Ok(stream)
    }

    /// Turns `true` once the server stops accepting turns.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// A clock for the runner's periodic chores (recovery, schedules, waiting
    /// notifications): [`Ticks::next`] waits one period, and says `false` once the server
    /// stops accepting turns, which ends the chore's loop.
    pub(crate) fn ticks(&self, every: std::time::Duration) -> Ticks {
        Ticks { stopping: self.stopping(), every }
    }

    /// Stops taking turns and ends every event stream (graceful shutdown's first step).
    pub fn stop_accepting(&self) {
        self.gate.close();
        self.stopping.send_replace(true);
    }
}

/// The filters and page of `GET /v1/sessions`.
#[derive(Clone, Debug)]
pub struct SessionQuery {
    pub workflow: Option<String>,
    pub status: Option<archmax_vm::session::Status>,
    pub parked: Option<bool>,
    /// Only sessions waiting for input whose `resumeAt` has come.
    pub due: bool,
    pub cursor: Option<String>,
    pub limit: usize,
}

impl Default for SessionQuery {
    fn default() -> SessionQuery {
        let limit = archmax_vm::session::store::ListQuery::DEFAULT_LIMIT;
        SessionQuery { workflow: None, status: None, parked: None, due: false, cursor: None, limit }
    }
}
