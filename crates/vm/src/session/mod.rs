//! Sessions: the durable state of one conversation with a workflow.
//!
//! [`SessionState`] is everything a session needs to resume in another process: its
//! position, entry state and trigger, status, the spec hash it is pinned to ([`spec`]), variables with their lock
//! flags, the audit trail, usage, park records, counters and the transcript. Every
//! committed step is written as a [`Delta`] (only what changed: appended messages and
//! trail steps, changed variables, and the small scalar head), so the cost of a durable
//! step does not grow with the session. A [`SessionStore`] keeps the deltas and the
//! session's files, behind an asynchronous interface: the filesystem store ([`fs`])
//! appends deltas to an fsync'ed log with periodic compacted snapshots and keeps files
//! in the session's folder; the memory store ([`memory`]) keeps both in memory, for
//! tests, benches and hosts that need no durability. Other stores live in their own
//! crates (`archmax-store-postgres`); `conformance` is the one suite every store's
//! tests run (behind the `test-support` feature), and [`transfer`] moves a session from any store to any other.

#[cfg(any(test, feature = "test-support"))]
pub mod conformance;
pub mod decision_record;
pub mod event_log;
mod flow_part;
pub mod fs;
pub mod id;
pub mod memory;
pub mod records;
pub mod spec;
pub mod store;
pub mod summary;
mod tape_reading;
pub mod transfer;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use flow_part::FlowPart;
pub use store::{SessionStore, SessionWriter, StoreError};
pub use tape_reading::TapeReading;

/// A session's lifecycle status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Running,
    Completed,
    Failed,
    Rejected,
    AwaitingDecision,
    AwaitingInput,
}

impl Status {
    /// Every status, in declaration order.
    pub const ALL: [Status; 6] = [
        Status::Running,
        Status::Completed,
        Status::Failed,
        Status::Rejected,
        Status::AwaitingDecision,
        Status::AwaitingInput,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Rejected => "rejected",
            Status::AwaitingDecision => "awaiting_decision",
            Status::AwaitingInput => "awaiting_input",
        }
    }

    /// Completed, failed and rejected sessions are finished; the rest are open.
    pub fn is_finished(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Rejected)
    }

    pub fn is_parked(self) -> bool {
        matches!(self, Status::AwaitingDecision | Status::AwaitingInput)
    }
}

impl Head {
    /// The status as a person reads it: a turn that completed in a state that is not
    /// terminal is `resumable`, never `completed`.
    pub fn status_label(&self) -> &'static str {
        if self.status == Status::Completed && self.resumable { "resumable" } else { self.status.as_str() }
    }
}

/// One variable: its value and whether it is locked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    pub value: Value,
    pub locked: bool,
}

/// A model's request to call a tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

/// How a tool call ended, as the model is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Ok,
    Error,
}

/// The kind of a runtime note.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoteKind {
    Decision,
    Event,
    Error,
    Code,
    Grader,
    SubWorkflow,
    Opening,
    /// What an earlier part of the conversation said, in a summarizer's words: it stands
    /// for that part in every later model call (see [`Compaction`]).
    Summary,
}

impl NoteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::Decision => "decision",
            NoteKind::Event => "event",
            NoteKind::Error => "error",
            NoteKind::Code => "code",
            NoteKind::Grader => "grader",
            NoteKind::SubWorkflow => "sub-workflow",
            NoteKind::Opening => "opening",
            NoteKind::Summary => "summary",
        }
    }
}

/// One message of the transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// A person's message (or a child's opening line, marked `opening`).
    User {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opening: Option<bool>,
    },
    /// What a model said and the calls it made.
    Assistant {
        #[serde(default)]
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The answer to one tool call.
    Tool { call_id: String, name: String, content: String, status: ToolStatus },
    /// A runtime note: shown to the model as a synthetic `archmax_note` call and its
    /// result, never counted as a call by any view.
    Note { kind: NoteKind, call_id: String, text: String },
}

impl Message {
    pub(crate) fn is_note(&self) -> bool {
        matches!(self, Message::Note { .. })
    }
}

/// What moved a session, as its trail records it (and stores it, by these names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrailKind {
    /// A trigger fired (a start, or a delivery); the reason is the trigger id.
    #[serde(rename = "trigger")]
    Trigger,
    /// The agent advanced with `archmax_advance`.
    #[serde(rename = "agent")]
    Agent,
    /// A person decided.
    #[serde(rename = "human")]
    Human,
    /// A failure was routed through `on_error`.
    #[serde(rename = "on_error")]
    OnError,
    /// `archmax_reset` moved the session back to its entry.
    #[serde(rename = "reset")]
    Reset,
    /// A grader state moved the run.
    #[serde(rename = "grader")]
    Grader,
    /// A code state moved the run.
    #[serde(rename = "code")]
    Code,
    /// A sub-workflow call settled; `workflow` and `status` say which and how.
    #[serde(rename = "sub-workflow")]
    SubWorkflow,
    /// The session moved to a new program; the reason says from which to which.
    #[serde(rename = "upgrade")]
    Upgrade,
}

impl TrailKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TrailKind::Trigger => "trigger",
            TrailKind::Agent => "agent",
            TrailKind::Human => "human",
            TrailKind::OnError => "on_error",
            TrailKind::Reset => "reset",
            TrailKind::Grader => "grader",
            TrailKind::Code => "code",
            TrailKind::SubWorkflow => "sub-workflow",
            TrailKind::Upgrade => "upgrade",
        }
    }

    #[cfg(feature = "frontend")]
    /// Whether this is the kind a case's trail assertion names (cases cannot name
    /// `upgrade`, which only a host's resume makes).
    pub fn is(self, wanted: archmax_compiler::schema::case::TrailKind) -> bool {
        self.as_str() == wanted.as_str()
    }
}

impl std::fmt::Display for TrailKind {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.pad(self.as_str())
    }
}

/// One step of the audit trail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrailStep {
    pub to: String,
    pub kind: TrailKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Who made a person's decision, when the host that took it knew (`archmax serve`
    /// records the caller's token identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Milliseconds since the epoch.
    pub ts: u64,
    /// On a person's decision: the record they decided on, as it stood then (none on
    /// steps written before records were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Box<decision_record::DecisionRecord>>,
}

impl TrailStep {
    /// A step to `to`, moved by `kind`, at `ts`.
    pub fn new(to: &str, kind: TrailKind, reason: Option<String>, ts: u64) -> TrailStep {
        TrailStep {
            to: to.to_string(),
            kind,
            reason,
            workflow: None,
            status: None,
            decided_by: None,
            ts,
            decision: None,
        }
    }
}

/// Tokens and cost spent by a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// What a session spent on one model in one role (`agent`, `grader`, `summarizer`): the
/// per-model account beside [`Usage`]'s totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// The model as the calls' `model-usage` events name it (the provider's id when it
    /// reported one, else the id archmax.toml or the workflow names; empty when none).
    pub model: String,
    pub role: String,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    /// What the priced calls cost; `None` while none was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Spend {
    /// The most lines an account keeps: past it, calls of models and roles not yet listed
    /// go to one line, the last, renamed [`Spend::OTHERS`] (a provider names its own
    /// models, so their number is not the workflow's to bound).
    pub const MAX_LINES: usize = 64;
    /// The model of the line that takes the calls past [`Spend::MAX_LINES`].
    pub const OTHERS: &str = "(other models)";
    /// The longest model name a line keeps, in bytes.
    const MAX_MODEL_BYTES: usize = 200;

    /// Adds one call's tokens (and cost, when priced) to the line of `model` and `role`
    /// in `lines`, opening it after the others when it is the first such call.
    pub fn record(lines: &mut Vec<Spend>, model: &str, role: &str, call: &Usage) {
        let model = archmax_program::text::cut_at_bytes(model, Self::MAX_MODEL_BYTES).unwrap_or(model);
        let at = match lines.iter().position(|line| line.model == model && line.role == role) {
            Some(at) => at,
            None if lines.len() < Self::MAX_LINES => {
                lines.push(Spend { model: model.to_string(), role: role.to_string(), ..Spend::default() });
                lines.len() - 1
            }
            None => {
                let last = lines.iter().position(|line| line.model == Self::OTHERS).unwrap_or(lines.len() - 1);
                lines[last].model = Self::OTHERS.to_string();
                last
            }
        };
        let line = &mut lines[at];
        line.calls = line.calls.saturating_add(1);
        line.input_tokens = line.input_tokens.saturating_add(call.input_tokens);
        line.output_tokens = line.output_tokens.saturating_add(call.output_tokens);
        line.cache_read_tokens = line.cache_read_tokens.saturating_add(call.cache_read_tokens);
        line.cache_creation_tokens = line.cache_creation_tokens.saturating_add(call.cache_creation_tokens);
        if let Some(cost) = call.cost_usd {
            line.cost_usd = Some(line.cost_usd.unwrap_or(0.0) + cost);
        }
    }

    /// The lines of `now` less those of `earlier` (a snapshot of the same account): what
    /// was spent since, per model and role, leaving out lines nothing was spent on.
    pub fn since(now: &[Spend], earlier: &[Spend]) -> Vec<Spend> {
        now.iter()
            .filter_map(|line| {
                let before = earlier.iter().find(|old| old.model == line.model && old.role == line.role);
                let Some(before) = before else { return Some(line.clone()) };
                (line.calls > before.calls).then(|| Spend {
                    model: line.model.clone(),
                    role: line.role.clone(),
                    calls: line.calls - before.calls,
                    input_tokens: line.input_tokens.saturating_sub(before.input_tokens),
                    output_tokens: line.output_tokens.saturating_sub(before.output_tokens),
                    cache_read_tokens: line.cache_read_tokens.saturating_sub(before.cache_read_tokens),
                    cache_creation_tokens: line.cache_creation_tokens.saturating_sub(before.cache_creation_tokens),
                    cost_usd: line.cost_usd.map(|cost| (cost - before.cost_usd.unwrap_or(0.0)).max(0.0)),
                })
            })
            .collect()
    }
}

impl Usage {
    /// What was spent after `earlier` (a snapshot of the same session's usage).
    pub fn since(&self, earlier: &Usage) -> Usage {
        let cost = match (self.cost_usd, earlier.cost_usd) {
            (Some(now), before) => Some((now - before.unwrap_or(0.0)).max(0.0)),
            (None, _) => None,
        };
        Usage {
            input_tokens: self.input_tokens.saturating_sub(earlier.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(earlier.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_sub(earlier.cache_read_tokens),
            cache_creation_tokens: self.cache_creation_tokens.saturating_sub(earlier.cache_creation_tokens),
            cost_usd: cost,
        }
    }

    /// Adds another session's spend (a child's) to this running total.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        if let Some(cost) = other.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }

    /// Whether any usage was reported at all.
    pub fn is_empty(&self) -> bool {
        self.input_tokens == 0
            && self.output_tokens == 0
            && self.cache_read_tokens == 0
            && self.cache_creation_tokens == 0
            && self.cost_usd.is_none()
    }
}

/// One choice a person may make at a human state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionChoice {
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
}

/// A pending human decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDecision {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// 1-based, monotonic per session.
    pub seq: u64,
    pub instructions: String,
    /// Who may decide, as the state declares them: shown to people, and held against the
    /// decider's identity when the host asks ([`crate::runtime::DecideRequest::enforce_approvers`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    pub transitions: Vec<DecisionChoice>,
    /// Declared evidence first, then attached, de-duplicated.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// RFC 3339.
    pub created_at: String,
    /// Set when this record is a parked sub-workflow's, presented on its caller: the
    /// child's session id, which a decision is forwarded to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<id::SessionId>,
}

impl PendingDecision {
    /// Whether `identity` is among those the state lets decide: it names no approvers
    /// (anyone the host lets decide may), or it names `identity`.
    pub fn admits(&self, identity: &str) -> bool {
        self.approvers.is_empty() || self.approvers.iter().any(|approver| approver == identity)
    }
}

/// A wait for something from outside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInput {
    pub state: String,
    pub reason: String,
    pub parked_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
    /// Set when this wait is a parked sub-workflow's, presented on its caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<id::SessionId>,
}

/// A session's standing against the host's budgets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetHold {
    /// How many times a person raised the budget: the cost limit is
    /// `max_cost_per_session × (1 + raises)`.
    #[serde(default)]
    pub raises: u32,
    /// The stop the session waits at (its status is then `awaiting_input`), until a
    /// person raises the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<BudgetStop>,
    /// What the session's sub-workflows cost, added as each returned: their sessions
    /// keep their own usage, and the cost limit counts theirs with this one's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub children_cost_usd: f64,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

impl BudgetHold {
    pub fn is_empty(&self) -> bool {
        self.raises == 0 && self.stop.is_none() && self.children_cost_usd == 0.0
    }
}

/// A model call a session did not make because it would have passed a limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetStop {
    /// The state whose call it was.
    pub state: String,
    /// `max_tokens_per_turn`, `max_model_calls_per_turn` or `max_cost_per_session`.
    pub limit: String,
    /// The limit's value: tokens, calls, or US dollars (the session's raises included).
    pub ceiling: f64,
    /// What was spent against it: this turn's tokens or calls, or the session's cost.
    pub spent: f64,
    /// What the call would have added by the runtime's estimate (tokens or dollars), when
    /// the limit is one an estimate applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<f64>,
    /// The stop in one sentence.
    pub reason: String,
    /// RFC 3339.
    pub stopped_at: String,
}

/// Where a park stands in its two phases: the handoff message is still owed, or the
/// session is suspended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParkPhase {
    Closing,
    Suspend,
}

/// A sub-workflow call that failed; the calling state's failure until recovered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedDelegation {
    pub state: String,
    pub workflow: String,
    /// The arguments as resolved, for matching a retry and naming the failure.
    pub args: Value,
    pub reason: String,
}

/// A child that parked, and so parked its caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDelegation {
    /// The calling state.
    pub state: String,
    pub workflow: String,
    /// The child's session id.
    pub child: id::SessionId,
    pub call_id: String,
    pub dispatch_id: String,
}

/// How a failed session ended, when it raised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    pub code: String,
    pub reason: String,
    pub state: String,
    /// The workflow raised it (`archmax_raise`, from the agent, a grader or a script),
    /// rather than the runtime failing the turn (a model error, the recursion limit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raised: bool,
}

/// How the conversation the model is shown differs from the session's messages once it
/// has been compacted: the messages before `through` are left out, except the runtime
/// notes among them (and a child's opening line), and the summary note stands for them.
/// The messages themselves stay in the session; only the model's view is shorter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// How many compactions there have been: the `<n>` of `conversation_history/<n>.jsonl`.
    pub count: u64,
    /// The index of the first message shown verbatim (earlier notes excepted).
    pub through: u64,
    /// The index of the summary note in the session's messages.
    pub summary: u64,
}

/// The small, fixed-size part of a session, rewritten whole by every step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub workflow: String,
    /// The spec hash of the workflow program the session is pinned to: set when it
    /// starts, changed only by an upgrade. Resuming under another one is refused.
    pub spec_hash: String,
    /// The current state's slug; `None` before the first turn.
    pub position: Option<String>,
    /// Where the session started; `archmax_reset` returns here.
    pub entry_state: Option<String>,
    pub trigger: Option<String>,
    pub status: Status,
    pub usage: Usage,
    /// `usage` per model and role, in the order each was first called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spend: Vec<Spend>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_decision: Option<PendingDecision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_input: Option<PendingInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub park_phase: Option<ParkPhase>,
    pub decision_count: u64,
    /// `archmax_wait` parks per state, this turn.
    #[serde(default)]
    pub park_counts: BTreeMap<String, u64>,
    /// A failure committed in the current state, routed when the model finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<Exit>,
    /// Sub-workflow calls made so far (names children `<id>~<n>`).
    pub delegations: u64,
    /// The id of the calling session, for a child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<id::SessionId>,
    /// For a child: the workflows of its callers, the root first. Their workflow-wide
    /// denials bind it, and they bound its depth and cycles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<String>,
    /// For a child: the dispatch that started it, which its events carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_id: Option<String>,
    /// Variables the agent locked with `lock: true`: `archmax_reset` releases them (a
    /// host's locks stay).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_locks: Vec<String>,
    /// Failed sub-workflow calls of the current state, not yet recovered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_delegations: Vec<FailedDelegation>,
    /// Children parked for a person or an event; the head is the parent's open park.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_delegations: Vec<PendingDelegation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todos: Vec<Value>,
    /// How far the session has read the tape it was run with, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<TapeReading>,
    /// The last turn ended with the agent's answer in a state that is not terminal: the
    /// status reads `completed` (the turn did), but the session can go on there. Read only
    /// while the status is `completed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumable: bool,
    /// The last compaction of the conversation, if the session has had one: what the
    /// model is shown in place of the messages before `through`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    /// The trace and span of the turn that last wrote the session, when tracing was on: a
    /// later turn (a parked session resumed days after) links its span to it. Records
    /// written before tracing existed, or with it off, have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::SpanIds>,
    /// What the host's budgets (`[limits]`) hold of this session: how often a person
    /// raised them, and the stop it waits at, if any.
    #[serde(default, skip_serializing_if = "BudgetHold::is_empty")]
    pub budget: BudgetHold,
    /// For a session a flow walk filed (a section attempt or the walk's record): which
    /// walk, section and attempt ([`FlowPart`]). `None` for a workflow's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowPart>,
    /// Milliseconds since the epoch.
    pub created_at: u64,
    pub updated_at: u64,
}

/// Everything a session is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    pub id: id::SessionId,
    /// The sequence number of the last committed step.
    pub seq: u64,
    pub head: Head,
    pub variables: BTreeMap<String, Variable>,
    pub trail: Vec<TrailStep>,
    pub messages: Vec<Message>,
}

/// What one committed step changed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub seq: u64,
    pub head: Head,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trail: Vec<TrailStep>,
    /// Set (`Some`) or removed (`None`) variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<(String, Option<Variable>)>,
}

impl SessionState {
    /// Applies a committed step.
    pub fn apply(&mut self, delta: &Delta) {
        self.seq = delta.seq;
        self.head = delta.head.clone();
        self.messages.extend(delta.messages.iter().cloned());
        self.trail.extend(delta.trail.iter().cloned());
        for (name, variable) in &delta.variables {
            match variable {
                Some(variable) => {
                    self.variables.insert(name.clone(), variable.clone());
                }
                None => {
                    self.variables.remove(name);
                }
            }
        }
    }

    /// The variables as one JSON object of values.
    pub(crate) fn variable_values(&self) -> Value {
        Value::Object(self.variables.iter().map(|(name, variable)| (name.clone(), variable.value.clone())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::TrailKind;

    const ALL: [TrailKind; 9] = [
        TrailKind::Trigger,
        TrailKind::Agent,
        TrailKind::Human,
        TrailKind::OnError,
        TrailKind::Reset,
        TrailKind::Grader,
        TrailKind::Code,
        TrailKind::SubWorkflow,
        TrailKind::Upgrade,
    ];

    #[test]
    fn trail_kinds_are_stored_by_their_names_and_read_back() {
        for kind in ALL {
            let stored = serde_json::to_value(kind).expect("serializes");
            assert_eq!(stored, serde_json::Value::String(kind.as_str().to_string()));
            assert_eq!(serde_json::from_value::<TrailKind>(stored).expect("reads back"), kind);
        }
        assert!(serde_json::from_str::<TrailKind>("\"teleport\"").is_err(), "an unknown kind is refused");
    }

    #[cfg(feature = "frontend")]
    #[test]
    fn every_kind_a_case_can_name_is_a_trail_kind() {
        use archmax_compiler::schema::case::TrailKind as CaseTrailKind;
        for (name, wanted) in CaseTrailKind::ALL {
            let kind = ALL.into_iter().find(|kind| kind.as_str() == name).expect("a session trail kind");
            assert!(kind.is(wanted));
        }
        assert!(!TrailKind::Upgrade.is(CaseTrailKind::Agent));
    }
}
