//! The runtime: a verified program, a session store, a model, and the events of a run.
//!
//! [`Runtime::run_turn`] is the one entry point for a new message on a session: it
//! resolves the workflow, trigger and session, refuses a disabled workflow or an unmet
//! signature before any model call, and hands the open session to the interpreter
//! ([`crate::interp`]). Sessions are keyed by id in the store; a second process that
//! opens the same session while one runs it is refused by the store's lock. A stored
//! session is pinned to its workflow's spec hash: resuming it under another is
//! [`RunError::ProgramChanged`] unless the request asks to `upgrade`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use archmax_config::mounts::{Mount, MountTable};
use archmax_program::program::{Program, WorkflowId};
use archmax_stdlib::vfs::{DiskVfs, MountPoint, Vfs, Workspace};

use crate::clock::Clock;
use crate::events::{Event, EventSink};
use crate::model::ModelAdapter;
use crate::model::ToolDefinition;
use crate::model::pricing::PricingTable;
use crate::session::{Exit, PendingDecision, PendingInput, SessionStore, Status, StoreError, Usage};

mod requests;
pub use requests::{DecideRequest, DeliverRequest, ReplyRequest, TurnRequest};

/// The most steps one turn may take (model calls, tool batches, automated states).
pub(crate) const RECURSION_LIMIT: usize = 400;

/// What a host must supply to build a runtime ([`Runtime::builder`]).
#[derive(Clone)]
pub struct RuntimeParts {
    pub program: Arc<Program>,
    pub store: Arc<dyn SessionStore>,
    pub model: Arc<dyn ModelAdapter>,
    pub events: EventSink,
    pub clock: Arc<dyn Clock>,
    /// The workspace root, where mount sources live.
    pub root: PathBuf,
    pub pricing: PricingTable,
}

/// What a host may choose beyond [`RuntimeParts`]; each has a default.
#[derive(Clone)]
struct HostChoices {
    recursion_limit: usize,
    limits: archmax_stdlib::limits::Limits,
    mocks: Arc<crate::tool_host::Mocks>,
    host: Arc<dyn crate::tool_host::ToolHost>,
    essential_tools: Vec<String>,
    context: crate::context::ContextSettings,
    budgets: archmax_config::settings::Budgets,
    repl_capacity: usize,
}

impl Default for HostChoices {
    fn default() -> HostChoices {
        HostChoices {
            recursion_limit: RECURSION_LIMIT,
            limits: archmax_stdlib::limits::Limits::default(),
            mocks: Arc::new(crate::tool_host::Mocks::default()),
            host: Arc::new(crate::tool_host::NoHost),
            essential_tools: Vec::new(),
            context: crate::context::ContextSettings::default(),
            budgets: archmax_config::settings::Budgets::default(),
            repl_capacity: DEFAULT_REPL_CAPACITY,
        }
    }
}

/// What a runtime computes from its program once, when it is built. Never set from
/// outside: a runtime for another program is built anew ([`Runtime::for_program`]).
struct Derived {
    /// The host mount table the program was built against.
    mounts: MountTable,
    /// Tool definitions per workflow, per surface.
    definitions: Vec<Vec<Vec<ToolDefinition>>>,
    /// The same definitions as JSON, serialized the first time a turn measures them
    /// (the context meter's byte count), then shared by every later turn.
    definitions_json: Vec<Vec<std::sync::OnceLock<Arc<str>>>>,
}

impl Derived {
    fn of(program: &Program) -> Derived {
        let definitions = program
            .workflows
            .iter()
            .map(|workflow| {
                workflow
                    .surfaces
                    .iter()
                    .map(|surface| crate::prompt::tool_definitions(program, workflow, surface))
                    .collect()
            })
            .collect::<Vec<Vec<_>>>();
        let definitions_json =
            definitions.iter().map(|surfaces| surfaces.iter().map(|_| std::sync::OnceLock::new()).collect()).collect();
        Derived { mounts: mount_table(program), definitions, definitions_json }
    }
}

/// Builds a [`Runtime`]: the parts a host must supply, then whatever it chooses to set;
/// [`RuntimeBuilder::build`] derives the program's tables once.
#[must_use]
pub struct RuntimeBuilder {
    parts: RuntimeParts,
    choices: HostChoices,
}

impl RuntimeBuilder {
    /// The most steps one turn may take (default [`RECURSION_LIMIT`]).
    pub fn recursion_limit(mut self, limit: usize) -> RuntimeBuilder {
        self.choices.recursion_limit = limit;
        self
    }

    /// The bounds every tool call and `${{…}}` substitution runs under (default: the
    /// documented defaults of `archmax_stdlib::limits`).
    pub fn limits(mut self, limits: archmax_stdlib::limits::Limits) -> RuntimeBuilder {
        self.choices.limits = limits;
        self
    }

    /// Declared tool results (a case's `mocks`), served after governance allowed a call,
    /// before the tool host or a built-in is asked.
    pub fn mocks(mut self, mocks: Vec<Mock>) -> RuntimeBuilder {
        self.choices.mocks = Arc::new(crate::tool_host::Mocks(mocks));
        self
    }

    /// Asks `host` for every tool the runtime does not implement itself
    /// ([`crate::tool_host`]), with `essential_tools` on in every state unless a state
    /// entry narrows or a denial names them. Default: no host.
    pub fn tool_host(
        mut self,
        host: Arc<dyn crate::tool_host::ToolHost>,
        essential_tools: Vec<String>,
    ) -> RuntimeBuilder {
        self.choices.host = host;
        self.choices.essential_tools = essential_tools;
        self
    }

    /// [`RuntimeBuilder::tool_host`] from a [`crate::tool_host::HostTools`].
    pub fn tools(self, tools: &crate::tool_host::HostTools) -> RuntimeBuilder {
        self.tool_host(Arc::clone(&tools.host), tools.essential.clone())
    }

    /// The host's context budgets (`[context]` of `archmax.toml`): when a tool result
    /// is offloaded, when a conversation is compacted.
    pub fn context(mut self, context: crate::context::ContextSettings) -> RuntimeBuilder {
        self.choices.context = context;
        self
    }

    /// The host's budgets (`[limits]` of `archmax.toml`): what a session may spend before
    /// a person must raise them (default: no limits). See `interp/budget.rs`.
    pub fn budgets(mut self, budgets: archmax_config::settings::Budgets) -> RuntimeBuilder {
        self.choices.budgets = budgets;
        self
    }

    /// How many sessions' `archmax_eval` REPLs the runtime keeps at most (default
    /// [`DEFAULT_REPL_CAPACITY`]).
    pub fn repl_capacity(mut self, capacity: usize) -> RuntimeBuilder {
        self.choices.repl_capacity = capacity;
        self
    }

    /// The runtime, with its program's tables derived.
    pub fn build(self) -> Runtime {
        let derived = Derived::of(&self.parts.program);
        let repls = Mutex::new(crate::cache::Lru::new(self.choices.repl_capacity));
        Runtime { parts: self.parts, choices: self.choices, derived, repls, calibration: Default::default() }
    }
}

/// A loaded program ready to run sessions. Built by [`Runtime::builder`]; what it holds
/// is read through accessors, and its program never changes after it is built.
pub struct Runtime {
    parts: RuntimeParts,
    choices: HostChoices,
    derived: Derived,
    /// Each session's `archmax_eval` REPL, kept while the session is among the most
    /// recently used ones, or until [`Runtime::close_session`].
    repls: Mutex<crate::cache::Lru<Arc<crate::sandbox::Sandbox>>>,
    /// What the providers' reported prompt sizes taught about the token estimate, per model.
    calibration: crate::context::Calibration,
}

/// How many sessions' `archmax_eval` REPLs a runtime keeps by default. Each holds a
/// QuickJS heap (up to the sandbox's memory limit), so a host running many sessions
/// bounds them; an evicted REPL starts afresh on the session's next `archmax_eval`, as
/// it does in another process.
pub(crate) const DEFAULT_REPL_CAPACITY: usize = 64;

/// A declared result for calls of one tool: `{ tool, whenInput?, result }`. The first
/// mock (in declaration order) whose tool matches and whose `when_input` partially
/// matches the call's arguments answers it; the tool never runs.
#[derive(Clone, Debug)]
pub struct Mock {
    pub tool: String,
    pub when_input: Option<archmax_program::matcher::Matcher>,
    pub result: Value,
}

#[cfg(feature = "frontend")]
impl From<&archmax_compiler::schema::case::Mock> for Mock {
    /// A mock as the case format declares it (a case's `mocks`, or `run --mocks`).
    fn from(declared: &archmax_compiler::schema::case::Mock) -> Mock {
        Mock {
            tool: declared.tool.value.clone(),
            when_input: declared.when_input.clone(),
            result: declared.result.clone(),
        }
    }
}

impl Mock {
    /// The mock's result as a tool answers: a string verbatim, anything else as JSON.
    pub fn answer(&self) -> String {
        match &self.result {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
}

/// What kind of entry point produced an outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    Turn,
    Decide,
    Reply,
    Deliver,
}

impl Disposition {
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Turn => "turn",
            Disposition::Decide => "decide",
            Disposition::Reply => "reply",
            Disposition::Deliver => "deliver",
        }
    }
}

/// How a turn (or resume) ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub session_id: crate::session::id::SessionId,
    pub disposition: Disposition,
    pub workflow: String,
    pub status: Status,
    /// Where the session stands now.
    pub state: String,
    /// Everything the session said in this turn.
    pub reply: String,
    /// Why the answer to a person's message to the parked session (a reply) was not
    /// written, when it was not: its one reply-only model call failed, or a budget or the
    /// context window stopped it. The session is parked as before and keeps the message;
    /// the person got no answer. (A park's own note that fails is only a warning.)
    pub unanswered: Option<String>,
    /// Why it was rejected, when it was.
    pub reason: Option<String>,
    pub exit: Option<Exit>,
    /// The session's usage so far.
    pub usage: Usage,
    /// What this turn alone spent.
    pub turn_usage: Usage,
    /// What this turn's own calls spent per model and role (a sub-workflow's are in its
    /// session's account).
    pub turn_spend: Vec<crate::session::Spend>,
    /// The model calls this turn made, its sub-workflows' included.
    pub turn_model_calls: u64,
    /// The open decision, when the session parked at a human state.
    pub pending_decision: Option<PendingDecision>,
    /// The open wait, when the session parked for input.
    pub pending_input: Option<PendingInput>,
    /// The limit the session stopped at, when a model call would have passed one (it
    /// then waits `awaiting_input` for a person to raise its budget).
    pub budget_stop: Option<crate::session::BudgetStop>,
    /// The session as the turn left it, every step committed: what a host answering
    /// for the turn shows without reading it back from the store.
    pub session: std::sync::Arc<crate::session::SessionState>,
}

/// Why a turn could not run at all (nothing was started or changed).
///
/// Each variant is one kind of answer a host gives ([`RunError::kind`]): a session or
/// workflow that is not there, a session another process holds, a stale or pinned
/// session, a refusal with its [`Refusal`] reason, or input with one [`FieldProblem`]
/// per offending field. The `Display` text is the one sentence a person reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error("there is no workflow `{workflow}` among {}", archmax_program::diagnostic::list_names(known))]
    UnknownWorkflow { workflow: String, known: Vec<String> },
    #[error(
        "workflow `{workflow}` declares no trigger `{trigger}` (it declares {}){}",
        archmax_program::diagnostic::list_names(declared),
        suggestion(trigger, declared)
    )]
    UnknownTrigger { workflow: String, trigger: String, declared: Vec<String> },
    #[error("there is no session `{0}`")]
    UnknownSession(String),
    /// Another process (or task) holds the session; nothing changed, try again later.
    #[error("session `{0}` is in use by another process; try again when it finishes")]
    Busy(String),
    /// The session moved on while this call held an older view of it; nothing written.
    #[error(
        "session `{session}` moved on to step {found} while this process held step {expected}; nothing was written"
    )]
    Conflict { session: String, expected: u64, found: u64 },
    /// The request is well formed but may not run, for `reason`.
    #[error("{message}")]
    Refused { reason: Refusal, message: String },
    /// The session is not parked on the channel the call needs; nothing changed.
    #[error("{0}")]
    NotParked(crate::interp::NotParked),
    /// The session stopped at its budget, and the call did not raise it; nothing
    /// changed. How a person raises it is the host's to add.
    #[error(
        "session `{session}` stopped at its budget in '{}': {}. Nothing was changed; a person who may let it spend more raises its budget to go on",
        stop.state, stop.reason
    )]
    BudgetStopped { session: String, stop: Box<crate::session::BudgetStop> },
    /// The session is a sub-workflow its caller waits for: it is resumed only through
    /// `caller`, so the caller learns the result. Nothing changed. Its reason is
    /// [`Refusal::AwaitedByCaller`].
    #[error(
        "session `{session}` is a sub-workflow that its caller `{caller}` waits for; resume it through the caller. Nothing was changed."
    )]
    AwaitedByCaller { session: String, caller: String },
    /// The decision names no transition of the parked state; the park is intact.
    #[error("{0}")]
    InvalidDecision(String),
    /// Input that does not hold: every offending field with what is wrong with it, and
    /// which kind of problem it is.
    #[error("{message}")]
    InvalidInput { message: String, fields: Vec<FieldProblem>, reason: InputReason },
    /// The session is pinned to another program of its workflow than this runtime's;
    /// nothing changed. Resuming with `upgrade` moves it on.
    #[error(
        "session `{session}` is pinned to program {pinned} of workflow `{workflow}`, but the workflow is now program {current} ({changes}). Nothing was changed.{}",
        pin_advice(changes)
    )]
    ProgramChanged {
        session: String,
        workflow: String,
        pinned: String,
        current: String,
        changes: Box<crate::session::spec::SpecChanges>,
    },
    /// An upgrade was asked for, but the new program does not declare the session's
    /// current state; nothing changed.
    #[error(
        "session `{session}` cannot move from program {pinned} to program {current}: its current state '{state}' is not declared there. Nothing was changed. Declare '{state}' again, or resume the session with the artifact it started under."
    )]
    UpgradeImpossible { session: String, state: String, pinned: String, current: String },
    #[error(transparent)]
    Store(StoreError),
}

/// One offending field of a request: its name (a variable name, `message`, `session`,
/// `trigger`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldProblem {
    pub field: String,
    pub problem: String,
}

/// Which kind of problem an input refusal ([`RunError::InvalidInput`]) is, for a host
/// that says how its users mend it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputReason {
    /// Fields that do not hold: names, types, bounds, members a trigger does not declare.
    #[default]
    Fields,
    /// A firing lacks variables its trigger requires (and maybe more). The message says
    /// to supply them as session variables; a host's words for how its users do that go
    /// at byte `advice_at` of the message, just before that sentence's full stop.
    MissingVariables { advice_at: usize },
    /// Variables sent to a session that waits for a decision, which takes none.
    VariablesWhileDeciding,
}

/// Why a well-formed request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The workflow is `disabled`.
    WorkflowDisabled,
    /// The session runs a workflow this program does not contain.
    WorkflowNotInProgram,
    /// The session is a sub-workflow its caller waits for: resume the caller.
    AwaitedByCaller,
    /// The decision record names a state the workflow no longer declares.
    DecisionTargetGone,
    /// The operating system could not supply randomness for a session id.
    NoSessionId,
    /// The decider is not among the parked state's `approvers`.
    NotAnApprover,
}

impl Refusal {
    /// A stable id for logs and API answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::WorkflowDisabled => "workflow.disabled",
            Refusal::WorkflowNotInProgram => "workflow.not-in-program",
            Refusal::AwaitedByCaller => "session.awaited-by-caller",
            Refusal::DecisionTargetGone => "decision.target-gone",
            Refusal::NoSessionId => "session.no-id",
            Refusal::NotAnApprover => "decision.not-an-approver",
        }
    }
}

/// The kind of answer a host gives for a [`RunError`], e.g. an HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 404: the workflow, trigger or session does not exist.
    NotFound,
    /// 409 with a retry: another process holds the session.
    Busy,
    /// 409: the session's state does not allow the call (moved on, not parked there,
    /// pinned to another program).
    Conflict,
    /// 403: the call may not run.
    Refused,
    /// 400: the request's fields do not hold.
    InvalidInput,
    /// 500: the store failed.
    Internal,
    /// 503 with a retry: the store cannot be reached for now.
    Unavailable,
}

impl ErrorKind {
    /// The HTTP status a host answers with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::NotFound => 404,
            ErrorKind::Busy | ErrorKind::Conflict => 409,
            ErrorKind::Refused => 403,
            ErrorKind::InvalidInput => 400,
            ErrorKind::Internal => 500,
            ErrorKind::Unavailable => 503,
        }
    }
}

impl RunError {
    /// Input with one offending field.
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> RunError {
        let problem = problem.into();
        RunError::InvalidInput {
            message: problem.clone(),
            fields: vec![FieldProblem { field: field.into(), problem }],
            reason: InputReason::Fields,
        }
    }

    pub fn refused(reason: Refusal, message: impl Into<String>) -> RunError {
        RunError::Refused { reason, message: message.into() }
    }

    /// The reason a refusal ([`ErrorKind::Refused`]) gives, for logs and API answers.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            RunError::Refused { reason, .. } => Some(*reason),
            RunError::AwaitedByCaller { .. } => Some(Refusal::AwaitedByCaller),
            _ => None,
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            RunError::UnknownWorkflow { .. } | RunError::UnknownTrigger { .. } | RunError::UnknownSession(_) => {
                ErrorKind::NotFound
            }
            RunError::Busy(_) => ErrorKind::Busy,
            RunError::Conflict { .. }
            | RunError::NotParked(_)
            | RunError::BudgetStopped { .. }
            | RunError::ProgramChanged { .. }
            | RunError::UpgradeImpossible { .. } => ErrorKind::Conflict,
            RunError::Refused { .. } | RunError::AwaitedByCaller { .. } => ErrorKind::Refused,
            RunError::InvalidDecision(_) | RunError::InvalidInput { .. } => ErrorKind::InvalidInput,
            RunError::Store(StoreError::Exists(_) | StoreError::TakenOver(_)) => ErrorKind::Conflict,
            RunError::Store(StoreError::Unavailable(_)) => ErrorKind::Unavailable,
            RunError::Store(_) => ErrorKind::Internal,
        }
    }
}

impl From<StoreError> for RunError {
    fn from(error: StoreError) -> RunError {
        match error {
            StoreError::Busy(session) => RunError::Busy(session),
            StoreError::Conflict { id, expected, found } => RunError::Conflict { session: id, expected, found },
            StoreError::Missing(session) => RunError::UnknownSession(session),
            other => RunError::Store(other),
        }
    }
}

/// `; did you mean `x`?` when one of `known` is close to `word`.
fn suggestion(word: &str, known: &[String]) -> String {
    archmax_program::diagnostic::did_you_mean(word, known.iter().map(String::as_str))
        .map(|close| format!("; did you mean `{close}`?"))
        .unwrap_or_default()
}

/// Why a session pinned to another program cannot be upgraded, when its state is gone
/// from the new one. How to upgrade one that can be is the host's to say (the CLI names
/// its `--upgrade`).
fn pin_advice(changes: &crate::session::spec::SpecChanges) -> String {
    match changes.missing_position() {
        Some(state) => format!(
            " It cannot be upgraded while the workflow does not declare '{state}': declare it again, or resume the session with the artifact it started under."
        ),
        None => String::new(),
    }
}

/// The host mount table an artifact was built against.
pub fn mount_table(program: &Program) -> MountTable {
    MountTable {
        mounts: program
            .mounts
            .iter()
            .map(|mount| Mount {
                key: program.str(mount.key).to_string(),
                name: program.str(mount.name).to_string(),
                directory: mount.directory,
                read_only: mount.read_only,
                governed: mount.governed,
                searchable: mount.searchable,
                source: program.str(mount.source).to_string(),
                declared: None,
            })
            .collect(),
    }
}

impl Runtime {
    /// Starts building a runtime from what a host must supply.
    pub fn builder(parts: RuntimeParts) -> RuntimeBuilder {
        RuntimeBuilder { parts, choices: HostChoices::default() }
    }

    /// A runtime for `program` with everything else this one was built with (store,
    /// model, events, clock, tool host, limits, …); its tables are derived from
    /// `program`, and it keeps no REPL of this one.
    pub fn for_program(&self, program: Arc<Program>) -> Runtime {
        let parts = RuntimeParts { program, ..self.parts.clone() };
        RuntimeBuilder { parts, choices: self.choices.clone() }.build()
    }

    /// The program this runtime runs.
    pub fn program(&self) -> &Arc<Program> {
        &self.parts.program
    }

    /// Where sessions are kept.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.parts.store
    }

    /// The model every agent call goes to.
    pub fn model(&self) -> &Arc<dyn ModelAdapter> {
        &self.parts.model
    }

    /// Where the runtime's events go.
    pub fn events(&self) -> &EventSink {
        &self.parts.events
    }

    /// The clock every timestamp is read from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.parts.clock
    }

    /// The workspace root, where mount sources live.
    pub fn root(&self) -> &std::path::Path {
        &self.parts.root
    }

    /// What model calls cost.
    pub fn pricing(&self) -> &PricingTable {
        &self.parts.pricing
    }

    /// The host mount table the program was built against.
    pub fn mounts(&self) -> &MountTable {
        &self.derived.mounts
    }

    /// The tool definitions the model is shown on `surface` of `workflow`, as the
    /// program lists them.
    pub fn definitions(&self, workflow: WorkflowId, surface: archmax_program::program::SurfaceId) -> &[ToolDefinition] {
        self.derived
            .definitions
            .get(workflow.0 as usize)
            .and_then(|surfaces| surfaces.get(surface.0 as usize))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// [`Self::definitions`] as JSON, serialized once per runtime.
    pub(crate) fn definitions_json(
        &self,
        workflow: WorkflowId,
        surface: archmax_program::program::SurfaceId,
    ) -> Arc<str> {
        let Some(slot) = self
            .derived
            .definitions_json
            .get(workflow.0 as usize)
            .and_then(|surfaces| surfaces.get(surface.0 as usize))
        else {
            return Arc::from("[]");
        };
        slot.get_or_init(|| {
            Arc::from(serde_json::to_string(self.definitions(workflow, surface)).unwrap_or_default().as_str())
        })
        .clone()
    }

    /// The most steps one turn may take.
    pub fn recursion_limit(&self) -> usize {
        self.choices.recursion_limit
    }

    /// The bounds every tool call and `${{…}}` substitution runs under.
    pub fn limits(&self) -> archmax_stdlib::limits::Limits {
        self.choices.limits
    }

    /// Where tools the runtime does not implement itself are asked for.
    pub fn tool_host(&self) -> &Arc<dyn crate::tool_host::ToolHost> {
        &self.choices.host
    }

    /// The host's essential tools: on in every state unless a state entry narrows or a
    /// denial names them.
    pub fn essential_tools(&self) -> &[String] {
        &self.choices.essential_tools
    }

    /// Declared tool results (a case's `mocks`).
    pub(crate) fn mocks(&self) -> &crate::tool_host::Mocks {
        &self.choices.mocks
    }

    /// The host's context budgets.
    pub fn context(&self) -> crate::context::ContextSettings {
        self.choices.context
    }

    /// The limits a session of `workflow` runs under (`[limits]` of `archmax.toml`).
    pub fn budget_limits(&self, workflow: &str) -> archmax_config::settings::BudgetLimits {
        self.choices.budgets.for_workflow(workflow)
    }

    /// The token estimate's correction per model, learned from the providers' counts.
    pub fn calibration(&self) -> &crate::context::Calibration {
        &self.calibration
    }

    pub fn now(&self) -> u64 {
        self.parts.clock.now_ms()
    }

    pub fn emit(&self, session: &str, event: Event) {
        self.parts.events.emit(self.now(), Some(session), None, event);
    }

    pub fn workflow_id(&self, slug: &str) -> Result<WorkflowId, RunError> {
        let program = self.program();
        program.workflow(slug).map(|(id, _)| id).ok_or_else(|| {
            let known = program.workflows.iter().map(|workflow| program.str(workflow.slug).to_string()).collect();
            RunError::UnknownWorkflow { workflow: slug.to_string(), known }
        })
    }

    /// The mock answering a call of `tool` with `args`, if any.
    pub(crate) fn mock_for(&self, tool: &str, args: &Value) -> Option<&Mock> {
        self.choices.mocks.find(tool, args)
    }

    /// The REPL of a session, if one is kept; using it makes it the most recent.
    pub(crate) fn repl(&self, session: &str) -> Option<Arc<crate::sandbox::Sandbox>> {
        self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(session).cloned()
    }

    /// Keeps a session's REPL; a REPL another call kept first wins. When the cache is
    /// full the least recently used session's REPL is dropped.
    pub(crate) fn keep_repl(&self, session: &str, sandbox: crate::sandbox::Sandbox) -> Arc<crate::sandbox::Sandbox> {
        let mut repls = self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kept) = repls.get(session) {
            return Arc::clone(kept);
        }
        let kept = Arc::new(sandbox);
        repls.insert(session, Arc::clone(&kept));
        kept
    }

    /// How many sessions' REPLs this runtime keeps at most; lowering it evicts the least
    /// recently used ones at once.
    pub fn set_repl_capacity(&self, capacity: usize) {
        self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).set_capacity(capacity);
    }

    /// How many sessions hold a REPL in this runtime now.
    pub fn kept_repls(&self) -> usize {
        self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    /// Drops everything this runtime keeps in memory for a session (its REPL). The
    /// session itself stays in the store; a host calls this when it is done with a
    /// session for now (it finished, or parked for a person).
    pub fn close_session(&self, session: &str) {
        self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(session);
    }

    /// The agent's workspace for a session: its own files, kept by the store, plus the
    /// host's mounts.
    pub fn workspace(&self, session: &str) -> Result<Workspace, StoreError> {
        let store = self.parts.store.files(session)?;
        let mounts = self
            .derived
            .mounts
            .mounts
            .iter()
            .map(|mount| MountPoint {
                key: mount.key.clone(),
                read_only: mount.read_only,
                searchable: mount.searchable,
                store: Arc::new(DiskVfs::mount(self.parts.root.join(&mount.source))) as Arc<dyn Vfs>,
            })
            .collect();
        Ok(Workspace { session: store, mounts })
    }
}
