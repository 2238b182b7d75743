//! The shape of a session as the API answers it, for the OpenAPI document only.
//!
//! The session's JSON is made once, by [`archmax_vm::session::summary::summary`], which
//! the CLI's `sessions ID --json` prints too; these types describe it member by member so
//! a generated client knows every field. They are never built: the `api` test suite holds
//! real answers (parked at a decision, waiting for input, completed, failed, stopped at a
//! budget, and a turn's) against the published schema, so the two cannot drift apart.

use serde_json::Value;
use utoipa::ToSchema;

/// One variable: its value (any JSON) and whether it is locked.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SessionVariable {
    /// Any JSON value, `null` included.
    pub value: Value,
    pub locked: bool,
}

/// What moved a session.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "kebab-case")]
pub enum TrailKind {
    Trigger,
    Agent,
    Human,
    #[schema(rename = "on_error")]
    OnError,
    Reset,
    Grader,
    Code,
    SubWorkflow,
    Upgrade,
}

/// One step of the session's trail, oldest first.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct TrailStep {
    /// The state moved to.
    pub to: String,
    pub kind: TrailKind,
    /// The trigger's id, the agent's reason, or what a sub-workflow or an upgrade was.
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// A settled sub-workflow's workflow.
    #[schema(nullable = false)]
    pub workflow: Option<String>,
    /// A settled sub-workflow's status.
    #[schema(nullable = false)]
    pub status: Option<String>,
    /// Who made a person's decision, when the host knew.
    #[schema(nullable = false)]
    pub decided_by: Option<String>,
    /// A person's decision: the record it was made on, as it stood then.
    #[schema(nullable = false)]
    pub decision: Option<DecisionRecord>,
}

/// What a person decided on, kept with the decision: later changes to the evidence do
/// not change it.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// The human state decided.
    pub state: String,
    #[schema(nullable = false)]
    pub title: Option<String>,
    /// The decision's number in the session.
    #[schema(minimum = 0)]
    pub seq: u64,
    /// The instructions shown, as written then.
    pub instructions: String,
    /// The transition taken, with its description.
    pub choice: DecisionChoice,
    /// When the decision was opened (RFC 3339).
    pub opened_at: String,
    /// The evidence files as shown when the decision was made (absent when none).
    #[schema(nullable = false)]
    pub evidence: Option<Vec<EvidenceSeen>>,
}

/// One evidence file as the decider saw it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct EvidenceSeen {
    pub path: String,
    /// Its size in bytes (0 when it could not be read).
    #[schema(minimum = 0)]
    pub size: u64,
    /// The SHA-256 of the whole file, hex, when it was read.
    #[schema(nullable = false)]
    pub sha256: Option<String>,
    /// The start of the file as text (none for an image).
    #[schema(nullable = false)]
    pub text: Option<String>,
    /// Why the file could not be read then.
    #[schema(nullable = false)]
    pub unreadable: Option<String>,
}

/// Marks a session a flow walk (`archmax flow run`) filed in a shared store: a section
/// attempt (with its path and attempt), or the walk's record (without them).
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct FlowMarker {
    /// The walk's flow-run id.
    pub run: String,
    #[schema(nullable = false)]
    pub path: Option<String>,
    #[schema(nullable = false, minimum = 1)]
    pub attempt: Option<u32>,
    #[schema(nullable = false, minimum = 0)]
    pub turns: Option<u32>,
    #[schema(nullable = false, minimum = 0)]
    pub cost_microunits: Option<u64>,
    /// The operator step a paused walk waits at.
    #[schema(nullable = false)]
    pub paused: Option<String>,
}

/// How the session ended: `success`, with the failure's `code` and `reason` when it
/// failed, or the rejection's `reason`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SessionExit {
    pub success: bool,
    #[schema(nullable = false)]
    pub code: Option<String>,
    pub reason: Option<String>,
}

/// Tokens, and what the priced calls cost (null while none was priced).
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct SessionUsage {
    #[schema(minimum = 0)]
    pub input_tokens: u64,
    #[schema(minimum = 0)]
    pub output_tokens: u64,
    #[schema(minimum = 0)]
    pub cache_read_tokens: u64,
    #[schema(minimum = 0)]
    pub cache_creation_tokens: u64,
    pub cost_usd: Option<f64>,
}

/// One choice a person may make at the decision.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct DecisionChoice {
    /// The state the choice moves to: what a decision names.
    pub to: String,
    #[schema(nullable = false)]
    pub description: Option<String>,
    /// `approve`, `reject`, or the transition's own type.
    #[schema(rename = "type")]
    pub kind: String,
}

/// What a parked session waits for: a person's decision, or an input (a delivery, or
/// its time to resume).
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct Park {
    /// `decision` or `input`.
    pub channel: ParkChannel,
    /// The state it is parked in.
    pub state: String,
    /// When it parked (RFC 3339).
    pub since: String,
    /// A decision's title.
    #[schema(nullable = true)]
    pub title: Option<String>,
    /// A decision's number in the session, from 1.
    #[schema(minimum = 1, nullable = false)]
    pub seq: Option<u64>,
    /// A decision's instructions.
    #[schema(nullable = false)]
    pub instructions: Option<String>,
    /// Who may decide.
    #[schema(nullable = false)]
    pub approvers: Option<Vec<String>>,
    /// A decision's choices.
    #[schema(nullable = false)]
    pub transitions: Option<Vec<DecisionChoice>>,
    /// The evidence shown with a decision, as text.
    #[schema(nullable = false)]
    pub evidence: Option<Vec<String>>,
    /// Why an input is awaited.
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// When a waiting session may resume on its own (RFC 3339), if it may.
    #[schema(nullable = true)]
    pub resume_at: Option<String>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "lowercase")]
pub enum ParkChannel {
    Decision,
    Input,
}

/// What a session spent on one model in one role.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct SpendLine {
    pub model: String,
    /// `agent`, `grader` or `summarizer`.
    pub role: String,
    #[schema(minimum = 0)]
    pub calls: u64,
    #[schema(minimum = 0)]
    pub input_tokens: u64,
    #[schema(minimum = 0)]
    pub output_tokens: u64,
    #[schema(minimum = 0)]
    pub cache_read_tokens: u64,
    #[schema(minimum = 0)]
    pub cache_creation_tokens: u64,
    pub cost_usd: Option<f64>,
}

/// Where a session stands against the host's budgets.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SessionBudget {
    /// How often a person raised the budget.
    #[schema(minimum = 0)]
    pub raises: u32,
    /// The limit the session stopped at, while it waits for a raise.
    pub stop: Option<BudgetStop>,
}

/// The budget limit a session stopped at.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct BudgetStop {
    pub state: String,
    /// `max_tokens_per_turn`, `max_model_calls_per_turn` or `max_cost_per_session`.
    pub limit: String,
    pub ceiling: f64,
    pub spent: f64,
    pub next: Option<f64>,
    pub reason: String,
    /// RFC 3339.
    pub since: String,
}

/// What the turn a request waited for did.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TurnSummary {
    /// `turn`, `deliver` or `decide`.
    pub disposition: String,
    /// Everything the session said in the turn.
    pub reply: String,
    /// On a `reply`: why the answer to the message sent was not written (its model call
    /// failed, or a budget or the context window stopped it). The session is still
    /// parked and keeps the message. Null otherwise.
    pub unanswered: Option<String>,
    /// Why the turn failed or the session was rejected, when it was.
    pub reason: Option<String>,
    pub usage: TurnUsage,
    pub spend: Vec<SpendLine>,
}

/// A turn's tokens and cost.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "camelCase")]
pub struct TurnUsage {
    #[schema(minimum = 0)]
    pub input_tokens: u64,
    #[schema(minimum = 0)]
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
}
