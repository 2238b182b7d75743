//! A session as JSON, the one shape hosts show: the CLI's `sessions ID --json` and the
//! server's session resource. Camel-case keys; the park record under `park` while the
//! session is parked, and the flow marker under `flow` for a session a flow walk filed
//! (`run`, `path`, `attempt`, `turns`, `costMicrounits`, `paused`).

use serde_json::{Value, json};

use super::{SessionState, Status};

/// The summary of one session: `archmax sessions ID --json` prints it, and `archmax serve`
/// answers `GET /v1/sessions/{id}` with it.
pub fn summary(state: &SessionState) -> Value {
    let head = &state.head;
    let variables: serde_json::Map<String, Value> = state
        .variables
        .iter()
        .map(|(name, variable)| (name.clone(), json!({ "value": variable.value, "locked": variable.locked })))
        .collect();
    let mut out = json!({
        "sessionId": state.id,
        "workflow": head.workflow,
        "status": head.status.as_str(),
        "workflowState": head.position,
        "variables": variables,
        "trail": state.trail.iter().map(|step| {
            let mut entry = json!({ "to": step.to, "kind": step.kind });
            if let Some(reason) = &step.reason {
                entry["reason"] = json!(reason);
            }
            if let Some(workflow) = &step.workflow {
                entry["workflow"] = json!(workflow);
            }
            if let Some(status) = &step.status {
                entry["status"] = json!(status);
            }
            if let Some(decided_by) = &step.decided_by {
                entry["decidedBy"] = json!(decided_by);
            }
            if let Some(decision) = &step.decision {
                entry["decision"] = json!(decision);
            }
            entry
        }).collect::<Vec<_>>(),
        "exit": match (&head.exit, head.status) {
            (Some(exit), _) => json!({ "success": false, "code": exit.code, "reason": exit.reason }),
            (None, Status::Completed) => json!({ "success": true }),
            (None, Status::Rejected) => json!({ "success": false, "reason": head.rejected }),
            _ => Value::Null,
        },
        "usage": {
            "inputTokens": head.usage.input_tokens,
            "outputTokens": head.usage.output_tokens,
            "cacheReadTokens": head.usage.cache_read_tokens,
            "cacheCreationTokens": head.usage.cache_creation_tokens,
            "costUsd": head.usage.cost_usd,
        },
        "specHash": head.spec_hash,
        "createdAt": head.created_at,
        "updatedAt": head.updated_at,
    });
    if head.status == Status::Completed && head.resumable {
        out["resumable"] = json!(true);
    }
    if let Some(parent) = &head.parent {
        out["parentSessionId"] = json!(parent);
    }
    if let Some(flow) = &head.flow {
        out["flow"] = json!(flow);
    }
    if let Some(decision) = &head.pending_decision {
        out["park"] = json!({
            "channel": "decision",
            "state": decision.state,
            "title": decision.title,
            "seq": decision.seq,
            "since": decision.created_at,
            "instructions": decision.instructions,
            "approvers": decision.approvers,
            "transitions": decision.transitions,
            "evidence": decision.evidence,
        });
    }
    if let Some(input) = &head.pending_input {
        out["park"] = json!({ "channel": "input", "state": input.state, "reason": input.reason, "since": input.parked_at, "resumeAt": input.resume_at });
    }
    if !head.spend.is_empty() {
        out["spend"] = spend_lines(&head.spend);
    }
    if head.budget.raises > 0 || head.budget.stop.is_some() {
        out["budget"] = json!({
            "raises": head.budget.raises,
            "stop": head.budget.stop.as_ref().map(budget_stop),
        });
    }
    out
}

/// An account per model and role as the session's JSON shows it (`spend`, and a turn's).
pub fn spend_lines(lines: &[super::Spend]) -> Value {
    Value::Array(
        lines
            .iter()
            .map(|line| {
                json!({
                    "model": line.model,
                    "role": line.role,
                    "calls": line.calls,
                    "inputTokens": line.input_tokens,
                    "outputTokens": line.output_tokens,
                    "cacheReadTokens": line.cache_read_tokens,
                    "cacheCreationTokens": line.cache_creation_tokens,
                    "costUsd": line.cost_usd,
                })
            })
            .collect(),
    )
}

/// A budget stop as the session's JSON shows it (under `budget.stop`).
pub fn budget_stop(stop: &super::BudgetStop) -> Value {
    json!({
        "state": stop.state,
        "limit": stop.limit,
        "ceiling": stop.ceiling,
        "spent": stop.spent,
        "next": stop.next,
        "reason": stop.reason,
        "since": stop.stopped_at,
    })
}
