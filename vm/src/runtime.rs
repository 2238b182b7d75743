//! The runtime: a verified program, a session store, a model, and the events of a run.
//!
//! [`Runtime::run_turn`] is the one entry point for a new message on a session: it
//! resolves the workflow, trigger and session, refuses a disabled workflow or an unmet
//! signature before any model call, and hands the open session to the interpreter
//! ([`crate::interp`]). Sessions are keyed by id in the store; a second process that
//! opens the same session while one runs it is refused by the store's lock. A stored
//! session is pinned to its workflow's spec hash: resuming it under another is
//! [`RunError::ProgramChanged`] unless the request asks to `upgrade`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use archmax_compiler::host::{Mount, MountTable};
use archmax_compiler::program::{Program, WorkflowId};
use archmax_stdlib::vfs::{DiskVfs, MemoryVfs, MountPoint, Vfs, Workspace};

use crate::clock::Clock;
use crate::events::{Event, EventSink};
use crate::model::ModelAdapter;
use crate::model::ToolDefinition;
use crate::model::pricing::PricingTable;
use crate::session::{Exit, PendingDecision, PendingInput, SessionStore, Status, StoreError, Usage};

/// The most steps one turn may take (model calls, tool batches, automated states).
pub const RECURSION_LIMIT: usize = 400;

/// Everything a runtime is built from.
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

/// A loaded program ready to run sessions.
pub struct Runtime {
    pub program: Arc<Program>,
    pub store: Arc<dyn SessionStore>,
    pub model: Arc<dyn ModelAdapter>,
    pub events: EventSink,
    pub clock: Arc<dyn Clock>,
    pub root: PathBuf,
    pub pricing: PricingTable,
    pub mounts: MountTable,
    pub recursion_limit: usize,
    /// The bounds every tool call and `${{…}}` substitution runs under (the documented
    /// defaults of `archmax_stdlib::limits` unless the host sets others).
    pub limits: archmax_stdlib::limits::Limits,
    /// Declared tool results (a case's `mocks`), served after governance allowed a call.
    pub mocks: Vec<Mock>,
    /// Tool definitions per workflow, per surface.
    pub definitions: Vec<Vec<Vec<ToolDefinition>>>,
    memory_sessions: Mutex<HashMap<String, Arc<MemoryVfs>>>,
    /// Each session's `archmax_eval` REPL, for as long as this runtime lives.
    repls: Mutex<HashMap<String, Arc<crate::sandbox::Sandbox>>>,
}

/// A declared result for calls of one tool: `{ tool, whenInput?, result }`. The first
/// mock (in declaration order) whose tool matches and whose `when_input` partially
/// matches the call's arguments answers it; the tool never runs.
#[derive(Clone, Debug)]
pub struct Mock {
    pub tool: String,
    pub when_input: Option<archmax_compiler::schema::case::Matcher>,
    pub result: Value,
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

/// A new message (or start) for a session.
#[derive(Clone, Debug, Default)]
pub struct TurnRequest {
    pub workflow: String,
    /// Continue this session, or start one under this id.
    pub session: Option<String>,
    /// Default `manual`.
    pub trigger: Option<String>,
    pub message: Option<String>,
    /// Host seeds: locked (`title` excepted).
    pub variables: Map<String, Value>,
    /// Move a session pinned to another program of the workflow to this one.
    pub upgrade: bool,
}

/// A person's decision on a session parked at a human state.
#[derive(Clone, Debug, Default)]
pub struct DecideRequest {
    pub session: String,
    /// When given, the session must belong to this workflow.
    pub workflow: Option<String>,
    /// The transition's target.
    pub to: String,
    pub comment: Option<String>,
    /// Move a session pinned to another program of the workflow to this one.
    pub upgrade: bool,
}

/// A message to a session parked at a human state: answered, the session stays parked.
#[derive(Clone, Debug, Default)]
pub struct ReplyRequest {
    pub session: String,
    pub workflow: Option<String>,
    pub message: String,
    /// Move a session pinned to another program of the workflow to this one.
    pub upgrade: bool,
}

/// A trigger delivered to a session waiting for input.
#[derive(Clone, Debug, Default)]
pub struct DeliverRequest {
    pub session: String,
    pub workflow: Option<String>,
    /// Any id is accepted; the workflow need not declare it.
    pub trigger: String,
    /// Seeded locked (`title` excepted).
    pub variables: Map<String, Value>,
    pub message: Option<String>,
    /// Move a session pinned to another program of the workflow to this one.
    pub upgrade: bool,
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
    pub session_id: String,
    pub disposition: Disposition,
    pub workflow: String,
    pub status: Status,
    /// Where the session stands now.
    pub state: String,
    /// Everything the session said in this turn.
    pub reply: String,
    /// Why it was rejected, when it was.
    pub reason: Option<String>,
    pub exit: Option<Exit>,
    /// The session's usage so far.
    pub usage: Usage,
    /// What this turn alone spent.
    pub turn_usage: Usage,
    /// The open decision, when the session parked at a human state.
    pub pending_decision: Option<PendingDecision>,
    /// The open wait, when the session parked for input.
    pub pending_input: Option<PendingInput>,
}

/// Why a turn could not run at all (nothing was started or changed).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the artifact has no workflow `{0}` (it has {1})")]
    UnknownWorkflow(String, String),
    #[error("workflow `{workflow}` declares no trigger `{trigger}` (it declares {declared})")]
    UnknownTrigger { workflow: String, trigger: String, declared: String },
    #[error("{0}")]
    Refused(String),
    #[error("there is no session `{0}`; `archmax sessions` lists them")]
    UnknownSession(String),
    /// The session is not parked on the channel the call needs; nothing changed.
    #[error("{0}")]
    NotParked(String),
    /// The decision names no transition of the parked state; the park is intact.
    #[error("{0}")]
    InvalidDecision(String),
    #[error("{0}")]
    InvalidInput(String),
    /// The session is pinned to another program of its workflow than this runtime's;
    /// nothing changed. Resuming with `upgrade` moves it on.
    #[error(
        "session `{session}` is pinned to program {pinned} of workflow `{workflow}`, but the workflow is now program {current} ({changes}). Nothing was changed. {}",
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
    Store(#[from] StoreError),
}

/// What to do about a session pinned to another program: upgrade it, unless its state
/// is gone from the new one.
fn pin_advice(changes: &crate::session::spec::SpecChanges) -> String {
    match changes.missing_position() {
        Some(state) => format!(
            "It cannot be upgraded while the workflow does not declare '{state}': declare it again, or resume the session with the artifact it started under."
        ),
        None => "Run the same command with `--upgrade` to move the session to the new program, or resume it with the artifact it started under to keep the old rules.".to_string(),
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
    pub fn new(parts: RuntimeParts) -> Runtime {
        let program = parts.program;
        let mounts = mount_table(&program);
        let definitions = program
            .workflows
            .iter()
            .map(|workflow| {
                workflow
                    .surfaces
                    .iter()
                    .map(|surface| crate::prompt::tool_definitions(&program, workflow, surface))
                    .collect()
            })
            .collect();
        Runtime {
            program,
            store: parts.store,
            model: parts.model,
            events: parts.events,
            clock: parts.clock,
            root: parts.root,
            pricing: parts.pricing,
            mounts,
            recursion_limit: RECURSION_LIMIT,
            limits: archmax_stdlib::limits::Limits::default(),
            mocks: Vec::new(),
            definitions,
            memory_sessions: Mutex::new(HashMap::new()),
            repls: Mutex::new(HashMap::new()),
        }
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn emit(&self, session: &str, event: Event) {
        self.events.emit(self.now(), Some(session), None, event);
    }

    pub fn workflow_id(&self, slug: &str) -> Result<WorkflowId, RunError> {
        self.program.workflow(slug).map(|(id, _)| id).ok_or_else(|| {
            let names: Vec<&str> =
                self.program.workflows.iter().map(|workflow| self.program.str(workflow.slug)).collect();
            RunError::UnknownWorkflow(slug.to_string(), archmax_compiler::diagnostic::list_names(&names))
        })
    }

    /// The agent's workspace for a session: its own folder plus the host's mounts.
    /// Serves these declared results (a case's `mocks`) from now on.
    pub fn with_mocks(mut self, mocks: Vec<Mock>) -> Runtime {
        self.mocks = mocks;
        self
    }

    /// The mock answering a call of `tool` with `args`, if any.
    pub fn mock_for(&self, tool: &str, args: &Value) -> Option<&Mock> {
        self.mocks
            .iter()
            .find(|mock| mock.tool == tool && mock.when_input.as_ref().is_none_or(|pattern| pattern.matches(args)))
    }

    /// The REPL of a session, if one was started in this process.
    pub fn repl(&self, session: &str) -> Option<Arc<crate::sandbox::Sandbox>> {
        self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(session).cloned()
    }

    /// Keeps a session's REPL; a REPL another call kept first wins.
    pub fn keep_repl(&self, session: &str, sandbox: crate::sandbox::Sandbox) -> Arc<crate::sandbox::Sandbox> {
        let mut repls = self.repls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        repls.entry(session.to_string()).or_insert_with(|| Arc::new(sandbox)).clone()
    }

    pub fn workspace(&self, session: &str) -> Workspace {
        let store: Arc<dyn Vfs> = match self.store.session_dir(session) {
            Some(dir) => Arc::new(DiskVfs::new(dir)),
            None => {
                let mut sessions = self.memory_sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                sessions.entry(session.to_string()).or_insert_with(|| Arc::new(MemoryVfs::default())).clone()
            }
        };
        let mounts = self
            .mounts
            .mounts
            .iter()
            .map(|mount| MountPoint {
                key: mount.key.clone(),
                read_only: mount.read_only,
                searchable: mount.searchable,
                store: Arc::new(DiskVfs::mount(self.root.join(&mount.source))) as Arc<dyn Vfs>,
            })
            .collect();
        Workspace { session: store, mounts }
    }
}
