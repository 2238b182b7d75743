//! The requests a host hands the runtime: a start or message ([`TurnRequest`]), a
//! person's decision ([`DecideRequest`]), a reply to a parked session ([`ReplyRequest`])
//! and a delivery ([`DeliverRequest`]). Plain data; the runtime checks every field.

use serde_json::{Map, Value};

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
    /// Files for the trigger's `file` inputs, already checked and seeded in `variables`
    /// ([`crate::handover`]): copied into the session once it is held and every check
    /// passed, so a refused start writes nothing.
    pub handed: crate::handover::Handover,
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
    /// Who decides, as the host authenticated them; recorded in the decision's trail step
    /// and note.
    pub decider: Option<String>,
    /// Hold the parked state's `approvers` (when it names any) against `decider`: anyone
    /// else is refused with [`Refusal::NotAnApprover`](super::Refusal::NotAnApprover) and the park stays intact. The CLI
    /// leaves this off (`approvers` is informational there); `archmax serve` sets it.
    pub enforce_approvers: bool,
    /// Raise the session's budget before deciding (one more allowance of its cost limit).
    pub raise_budget: bool,
}

/// A message to a session parked at a human state: answered, the session stays parked.
#[derive(Clone, Debug, Default)]
pub struct ReplyRequest {
    pub session: String,
    pub workflow: Option<String>,
    pub message: String,
    /// Move a session pinned to another program of the workflow to this one.
    pub upgrade: bool,
    /// Raise the session's budget: a session stopped at it takes the message and goes
    /// on in the stopped state; one parked for a decision gets the raise ahead of time.
    pub raise_budget: bool,
    /// Who raises it, as the host authenticated them (recorded in `budget-raised`).
    pub raised_by: Option<String>,
}

/// A trigger delivered to a session waiting for input.
#[derive(Clone, Debug, Default)]
pub struct DeliverRequest {
    pub session: String,
    /// When given, the session must belong to this workflow; a session of another one
    /// is refused exactly as an unknown session is.
    pub workflow: Option<String>,
    /// Any id, as the spec's runtime accepts; a trigger the workflow declares has its
    /// `requires` checked as at a start. An undeclared one has no signature to check,
    /// carries no variables and becomes the session's trigger, so no `returns` check
    /// applies after it.
    pub trigger: String,
    /// Refuse a trigger the workflow does not declare, with a "did you mean" (the CLI's
    /// and the server's default; `deliver --undeclared` turns it off).
    pub declared_only: bool,
    /// Seeded locked (`title` excepted); only members the trigger declares
    /// (`interp::carried::declared_members`), anything else is refused by name.
    pub variables: Map<String, Value>,
    pub message: Option<String>,
    /// Move a session pinned to another program of the workflow to this one.
    pub upgrade: bool,
    /// Raise the session's budget before delivering: a session stopped at it can only
    /// be delivered to this way.
    pub raise_budget: bool,
    /// Who raises it, as the host authenticated them (recorded in `budget-raised`).
    pub raised_by: Option<String>,
    /// Files for the trigger's `file` inputs, as for [`TurnRequest::handed`]: copied
    /// into the session that takes the delivery (a parked child's, when it is forwarded)
    /// once it is held and the delivery is accepted.
    pub handed: crate::handover::Handover,
}
