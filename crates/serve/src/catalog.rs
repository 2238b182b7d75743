//! `GET /v1/workflows`: the workflows a runner serves, as a client needs them to build a
//! start form and a decision form without reading the YAML.
//!
//! The one thing to know: the catalog is read from the programs being served, never
//! from the workspace's files. Each workflow is described by the newest program that
//! holds it (the one new sessions start on), each trigger's inputs by the JSON Schema
//! the compiler derived from its `requires` (the same schema the runtime checks a start
//! against), and each human state by its transitions, so what a client builds from it
//! is what the server will take.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use archmax_program::kinds::{StateKind, ValueType};
use archmax_program::program::{Program, StateProgram, TriggerProgram, WorkflowProgram};

use crate::server::Server;

/// The served workflows, by slug.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowList {
    pub workflows: Vec<WorkflowEntry>,
}

/// One served workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowEntry {
    pub slug: String,
    pub title: Option<String>,
    /// The program new sessions of this workflow start on.
    pub spec_hash: String,
    /// Out of service: a start is refused (sessions already parked go on).
    pub disabled: bool,
    /// Where a start is posted: `POST` this path with `trigger` naming one of `triggers`.
    pub start: String,
    pub triggers: Vec<TriggerEntry>,
    /// The states where a person decides, in the workflow's order.
    pub human_states: Vec<HumanStateEntry>,
}

/// One trigger of a workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerEntry {
    pub id: String,
    /// What the trigger is for, as its author wrote it for callers.
    pub description: Option<String>,
    /// The state the trigger enters.
    pub entry: String,
    /// Whether a start by this trigger takes a `message` (a trigger with `message: false`
    /// takes none).
    pub takes_message: bool,
    /// Whether the trigger is a webhook with a signed connection: senders then post to
    /// `POST /v1/triggers/{id}` with the connection's signature.
    pub webhook: bool,
    /// The JSON Schema of the trigger's `requires`: the `variables` a start must carry.
    /// A `file` input is a string marked `x-archmax-type: file`.
    #[schema(value_type = Object)]
    pub inputs: Value,
    /// The `file` inputs, which an upload fills with one part each.
    pub file_inputs: Vec<String>,
}

/// A human state: where a session parks for a person's decision.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanStateEntry {
    pub state: String,
    pub title: Option<String>,
    /// Who may decide (`approvers`); empty when anyone with `decide` may.
    pub approvers: Vec<String>,
    /// The decisions, each posted as `POST /v1/sessions/{id}/decide` with `to`.
    pub transitions: Vec<TransitionEntry>,
}

/// One decision a person can take at a human state.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransitionEntry {
    /// The state the decision leads to: the `to` of a decision.
    pub to: String,
    /// What the decision means, as the author described the transition.
    pub description: Option<String>,
    /// The decision's type: `approve`, `reject`, `refine`, or `none`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl Server {
    /// `GET /v1/workflows`: every served workflow, each from the newest program holding it.
    pub fn catalog(&self) -> WorkflowList {
        let workflows = self
            .workflows()
            .into_iter()
            .filter_map(|slug| {
                let runtime = self.runtime_for(&slug).ok()?;
                let program = runtime.program();
                let (_, workflow) = program.workflow(&slug)?;
                Some(workflow_entry(program, workflow))
            })
            .collect();
        WorkflowList { workflows }
    }
}

fn workflow_entry(program: &Program, workflow: &WorkflowProgram) -> WorkflowEntry {
    let slug = program.str(workflow.slug).to_string();
    WorkflowEntry {
        start: format!("/v1/workflows/{slug}/sessions"),
        title: workflow.title.map(|title| program.str(title).to_string()),
        spec_hash: workflow.spec_hash.clone(),
        disabled: workflow.disabled,
        triggers: workflow.triggers.iter().map(|trigger| trigger_entry(program, workflow, trigger)).collect(),
        human_states: workflow
            .states
            .iter()
            .filter(|state| state.kind == StateKind::Human)
            .map(|state| human_state_entry(program, workflow, state))
            .collect(),
        slug,
    }
}

fn trigger_entry(program: &Program, workflow: &WorkflowProgram, trigger: &TriggerProgram) -> TriggerEntry {
    TriggerEntry {
        id: program.str(trigger.id).to_string(),
        description: trigger.description.map(|text| program.str(text).trim().to_string()),
        entry: program.str(workflow.state(trigger.entry).slug).to_string(),
        takes_message: !matches!(trigger.message, Some(None)),
        webhook: trigger.connection.is_some(),
        inputs: serde_json::from_str(program.str(trigger.schema)).unwrap_or_else(|_| serde_json::json!({})),
        file_inputs: trigger
            .requires
            .iter()
            .filter(|entry| entry.ty == Some(ValueType::File))
            .map(|entry| program.str(entry.name).to_string())
            .collect(),
    }
}

fn human_state_entry(program: &Program, workflow: &WorkflowProgram, state: &StateProgram) -> HumanStateEntry {
    HumanStateEntry {
        state: program.str(state.slug).to_string(),
        title: state.title.map(|title| program.str(title).to_string()),
        approvers: state
            .decision
            .as_ref()
            .map(|decision| decision.approvers.iter().map(|approver| program.str(*approver).to_string()).collect())
            .unwrap_or_default(),
        transitions: state
            .transitions
            .iter()
            .map(|transition| TransitionEntry {
                to: program.str(workflow.state(transition.target).slug).to_string(),
                description: transition.description.map(|text| program.str(text).trim().to_string()),
                kind: transition.kind.as_str(),
            })
            .collect(),
    }
}
