//! Resuming a parked session: a person's decision, a message while a decision is pending,
//! and a delivered trigger.
//!
//! A park is one mechanism with two channels. `awaiting_decision` (a human state) is moved
//! on only by [`Runtime::decide`]; a message to it is answered by [`Runtime::reply`] on a
//! reply-only call and the session parks again on the very same record. `awaiting_input`
//! (`archmax_wait`) is moved on only by [`Runtime::deliver`], which resumes the same state.
//! Every entry point checks the channel before it changes anything, so a call on the wrong
//! channel, an unknown target or a second delivery leaves the session exactly as it was.
//! None of them is a turn boundary: park counts, the entry state and the transcript carry
//! over, and a disabled workflow still finishes what is parked. A session pinned to
//! another program is refused before anything changes, unless the request upgrades it.
//! A session stopped at its budget (`awaiting_input`, see `budget.rs`) is refused every
//! resume that does not raise the budget; `reply` with a raise lifts the stop and runs
//! the stopped state on with the message.

use serde_json::Value;

use crate::events::Event;
use crate::runtime::{
    DecideRequest, DeliverRequest, Disposition, FieldProblem, InputReason, Outcome, Refusal, ReplyRequest, RunError,
    Runtime, TurnRequest,
};
use crate::session::decision_record::DecisionRecord;
use crate::session::id::SessionId;
use crate::session::{Message, NoteKind, ParkPhase, SessionState, SessionWriter, Status, StoreError, Variable};
use crate::session::{PendingDecision, TrailKind, TrailStep};

use super::carried::{Carry, Undeclared};
use super::pin::Upgrade;
use super::start::validate_title;
use super::{ParkOpening, Turn};

/// A parked session opened for a resume, with the upgrade it needs, if any.
struct Parked {
    session: SessionState,
    writer: Box<dyn SessionWriter>,
    upgrade: Option<Upgrade>,
}

impl Parked {
    /// The turn that resumes it, moved to the current program first when it upgrades.
    async fn into_turn(
        self,
        runtime: &Runtime,
        workflow_id: archmax_program::program::WorkflowId,
    ) -> Result<Turn<'_>, RunError> {
        let mut turn = Turn::new(runtime, workflow_id, self.session, self.writer)?;
        turn.upgrade(self.upgrade).await;
        Ok(turn)
    }
}

/// A raise of the budget that comes with a resume: who raises it, when one does.
type Raise<'a> = Option<Option<&'a str>>;

/// The channel a resume needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Decision,
    Input,
}

/// Why a session cannot be resumed on the channel a call needs: it is parked on the
/// other one, or not at all. Nothing was changed. How to resume it on the channel it is
/// parked on is the host's to say ([`NotParked::sentence`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotParked {
    pub session: String,
    /// The channel the call needs.
    pub wanted: Channel,
    /// Where the session stands.
    pub status: Status,
    /// The state it is parked at (empty when it holds none).
    pub position: String,
}

impl NotParked {
    /// The refusal in one sentence, with a host's `advice` (how its users resume the
    /// session) after what the session waits for.
    pub fn sentence(&self, advice: Option<&str>) -> String {
        let now = match self.status {
            Status::AwaitingDecision => format!("it waits for a decision at '{}'", self.position),
            Status::AwaitingInput => format!("it waits for input at '{}'", self.position),
            other => format!("it is {}", other.as_str()),
        };
        let wanted = match self.wanted {
            Channel::Decision => "parked for a decision",
            Channel::Input => "waiting for input",
        };
        let advice = advice.map(|advice| format!("; {advice}")).unwrap_or_default();
        format!("session `{}` is not {wanted}: {now}{advice}. Nothing was changed.", self.session)
    }
}

impl std::fmt::Display for NotParked {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.sentence(None))
    }
}

/// Why `state` cannot be resumed on `channel`, or `None` when it can. Hosts may ask
/// before building anything; the runtime asks again under the session's lock.
pub fn park_refusal(state: &SessionState, channel: Channel) -> Option<NotParked> {
    let head = &state.head;
    let parked_right = match channel {
        Channel::Decision => head.status == Status::AwaitingDecision && head.pending_decision.is_some(),
        Channel::Input => head.status == Status::AwaitingInput && head.pending_input.is_some(),
    };
    if parked_right {
        return None;
    }
    Some(NotParked {
        session: state.id.to_string(),
        wanted: channel,
        status: head.status,
        position: head.position.clone().unwrap_or_default(),
    })
}

/// Why `to` is not a decision the parked record offers, or `None` when it is.
pub fn decision_refusal(state: &SessionState, to: &str) -> Option<String> {
    let decision = state.head.pending_decision.as_ref()?;
    let valid: Vec<&str> = decision
        .transitions
        .iter()
        .map(|choice| choice.to.as_str())
        .filter(|target| *target != decision.state)
        .collect();
    if valid.contains(&to) {
        return None;
    }
    Some(format!(
        "'{to}' is not a decision at '{}'; the valid targets are {}. The decision is still pending.",
        decision.state,
        valid.join(", ")
    ))
}

/// Why `request`'s decider may not take the decision, when the request enforces the
/// parked state's `approvers` and it names some; `None` when the decision may go ahead.
fn approver_refusal(decision: &PendingDecision, request: &DecideRequest) -> Option<RunError> {
    if !request.enforce_approvers || decision.approvers.is_empty() {
        return None;
    }
    let decider = request.decider.as_deref();
    if decider.is_some_and(|decider| decision.admits(decider)) {
        return None;
    }
    let who = decider.map_or_else(|| "an unidentified caller".to_string(), |decider| format!("`{decider}`"));
    Some(RunError::refused(
        Refusal::NotAnApprover,
        format!(
            "{who} may not decide at '{}': its approvers are {}. The decision is still pending.",
            decision.state,
            decision.approvers.join(", ")
        ),
    ))
}

/// Refuses a request that names a workflow (`named`) for a session of another one, in
/// exactly the words used for a session that does not exist: a caller learns nothing of
/// the sessions outside the workflow it names.
pub fn check_named_workflow(session: &SessionState, named: Option<&str>) -> Result<(), RunError> {
    match named {
        Some(named) if named != session.head.workflow => Err(RunError::UnknownSession(session.id.to_string())),
        _ => Ok(()),
    }
}

impl Runtime {
    /// Opens a session for a resume: it must exist, belong to `workflow` when one is named
    /// (a session of another is refused as unknown),
    /// be parked on `channel`, and be pinned to this program (or `upgrade` be asked for
    /// and possible). Nothing is written on refusal.
    async fn open_parked(
        &self,
        id: &str,
        workflow: Option<&str>,
        channel: Channel,
        (upgrade, raise): (bool, bool),
    ) -> Result<Parked, RunError> {
        let (state, writer) = match self.store().open(id).await {
            Ok(open) => open,
            Err(StoreError::Missing(_)) => return Err(RunError::UnknownSession(id.to_string())),
            Err(error) => return Err(error.into()),
        };
        check_named_workflow(&state, workflow)?;
        if self.program().workflow(&state.head.workflow).is_none() {
            return Err(RunError::refused(
                Refusal::WorkflowNotInProgram,
                format!("session `{id}` runs workflow `{}`, which this program does not contain", state.head.workflow),
            ));
        }
        // A session stopped at its budget goes on only when the call raises it.
        if let Some(stop) = &state.head.budget.stop
            && !raise
        {
            return Err(RunError::BudgetStopped { session: id.to_string(), stop: Box::new(stop.clone()) });
        }
        if let Some(refusal) = park_refusal(&state, channel) {
            return Err(RunError::NotParked(refusal));
        }
        let upgrade = self.check_pin(&state, upgrade).await?;
        Ok(Parked { session: state, writer, upgrade })
    }

    /// The program's id of the workflow a stored session runs.
    fn workflow_of(&self, session: &SessionState) -> Result<archmax_program::program::WorkflowId, RunError> {
        self.program().workflow(&session.head.workflow).map(|(id, _)| id).ok_or_else(|| {
            RunError::refused(
                Refusal::WorkflowNotInProgram,
                format!("workflow `{}` is not in this program", session.head.workflow),
            )
        })
    }

    /// After a parked child was resumed through its caller: the caller takes the child's
    /// result (or its failure) as a note and runs on, or presents the next parked child.
    async fn carry_on(
        &self,
        workflow_id: archmax_program::program::WorkflowId,
        parked: Parked,
        (disposition, raise): (Disposition, Raise<'_>),
        pending: &crate::session::PendingDelegation,
        outcome: Result<Outcome, RunError>,
    ) -> Result<Outcome, RunError> {
        let mut turn = parked.into_turn(self, workflow_id).await?;
        turn.ledger.set_disposition(disposition);
        if let Some(raised_by) = raise {
            turn.raise_budget(raised_by);
        }
        turn.resumed_child(pending, outcome).await;
        turn.mark_opened();
        turn.commit().await?;
        turn.run().await
    }

    /// The session that waits for `session` (its caller, while the call is pending), if
    /// any: such a session is resumed through its caller.
    pub async fn awaiting_caller(&self, session: &str) -> Option<SessionId> {
        let parent = self.store().read(session).await.ok().flatten()?.head.parent?;
        self.caller_awaits(&parent, session).await.then_some(parent)
    }

    async fn caller_awaits(&self, caller: &str, child: &str) -> bool {
        self.store()
            .read(caller)
            .await
            .ok()
            .flatten()
            .is_some_and(|caller| caller.head.pending_delegations.iter().any(|pending| pending.child == child))
    }

    /// A person's decision: routes the session along one transition of the parked human
    /// state and runs on from the target.
    pub async fn decide(&self, request: DecideRequest) -> Result<Outcome, RunError> {
        self.decide_as(request, false).await
    }

    /// A sub-workflow its caller waits for is resumed only through that caller, so the
    /// caller always learns the result.
    async fn refuse_awaited_child(&self, session: &SessionState) -> Result<(), RunError> {
        let Some(parent) = &session.head.parent else {
            return Ok(());
        };
        let awaited = self.caller_awaits(parent, &session.id).await;
        if awaited {
            return Err(RunError::AwaitedByCaller { session: session.id.to_string(), caller: parent.to_string() });
        }
        Ok(())
    }

    async fn decide_as(&self, request: DecideRequest, through_caller: bool) -> Result<Outcome, RunError> {
        let flags = (request.upgrade, request.raise_budget);
        let parked = self.open_parked(&request.session, request.workflow.as_deref(), Channel::Decision, flags).await?;
        let session = &parked.session;
        if !through_caller {
            self.refuse_awaited_child(session).await?;
        }
        let Some(decision) = session.head.pending_decision.clone() else {
            // `open_parked` saw the record; a session without one is refused the same way.
            return Err(RunError::NotParked(NotParked {
                session: request.session.clone(),
                wanted: Channel::Decision,
                status: session.head.status,
                position: session.head.position.clone().unwrap_or_default(),
            }));
        };
        if let Some(refusal) = decision_refusal(session, &request.to) {
            return Err(RunError::InvalidDecision(refusal));
        }
        let Some(choice) = decision.transitions.iter().find(|choice| choice.to == request.to) else {
            return Err(RunError::InvalidDecision(format!("'{}' is not a decision here", request.to)));
        };
        if let Some(refusal) = approver_refusal(&decision, &request) {
            return Err(refusal);
        }
        let comment = request.comment.as_deref().map(str::trim).filter(|comment| !comment.is_empty());
        let workflow_id = self.workflow_of(session)?;
        // The decision belongs to a parked child: it goes to that child alone, and the
        // child's result reaches this session as a note.
        let forwarded = session.head.pending_decision.as_ref().and_then(|decision| decision.child.clone());
        if let Some(pending) = forwarded
            .and_then(|child| session.head.pending_delegations.iter().find(|pending| pending.child == child).cloned())
        {
            self.emit(
                &session.id,
                crate::events::Event::Decided {
                    state: session.head.position.clone().unwrap_or_else(|| pending.state.clone()),
                    to: format!("{} (in sub-workflow {})", request.to, pending.workflow),
                    decided_by: request.decider.clone(),
                    comment: comment.map(str::to_string),
                },
            );
            // The budget is the caller's: the child is never stopped at one.
            let child = DecideRequest {
                session: pending.child.to_string(),
                workflow: None,
                raise_budget: false,
                ..request.clone()
            };
            // A refused resume of the child changes nothing here either.
            let outcome = Box::pin(self.decide_as(child, true)).await?;
            let outcome = Ok(outcome);
            let raise = request.raise_budget.then_some(request.decider.as_deref());
            return self.carry_on(workflow_id, parked, (Disposition::Decide, raise), &pending, outcome).await;
        }
        let mut turn = parked.into_turn(self, workflow_id).await?;
        turn.under_caller = through_caller;
        turn.ledger.set_disposition(Disposition::Decide);
        let Some(target) = turn.state_id_of(&choice.to) else {
            return Err(RunError::refused(
                Refusal::DecisionTargetGone,
                format!("the decision record names '{}', which the workflow no longer declares", choice.to),
            ));
        };
        if request.raise_budget {
            turn.raise_budget(request.decider.as_deref());
        }
        // What the person saw, kept before the next state may rewrite the evidence.
        let seen = {
            let files = self.store().files(turn.session.id.as_ref()).ok();
            let (shown, taken) = (decision.clone(), choice.clone());
            let read = move || DecisionRecord::of(&shown, &taken, files.as_deref());
            // The files may be on disk: read off the executor's threads.
            tokio::task::spawn_blocking(read).await.unwrap_or_else(|_| DecisionRecord::of(&decision, choice, None))
        };
        let here = decision.state.clone();
        let edge = if choice.kind == "none" {
            "the transition".to_string()
        } else {
            format!("the {} transition", choice.kind)
        };
        let who = match &request.decider {
            Some(decider) => format!("{decider} (a person)"),
            None => "A person".to_string(),
        };
        let said = match comment {
            Some(comment) => format!(" The reviewer's comment: \"{comment}\""),
            None => " The reviewer left no comment.".to_string(),
        };
        let next = if turn.state(target).kind == archmax_program::program::StateKind::Human {
            "it waits there for another decision"
        } else {
            "do that state's work"
        };
        turn.note(
            NoteKind::Decision,
            format!(
                "[decision] {who} decided at '{here}' and took {edge} to '{}'.{said} The session is now in '{}': {next}.",
                choice.to, choice.to
            ),
        );
        turn.emit(Event::Decided {
            state: here,
            to: choice.to.clone(),
            decided_by: request.decider.clone(),
            comment: comment.map(str::to_string),
        });
        turn.move_to(target);
        let step = TrailStep {
            decided_by: request.decider.clone(),
            decision: Some(Box::new(seen)),
            ..TrailStep::new(&choice.to, TrailKind::Human, comment.map(str::to_string), turn.now())
        };
        turn.push_trail_step(step);
        let head = &mut turn.session.head;
        head.pending_decision = None;
        head.park_phase = None;
        head.status = Status::Running;
        turn.park_if_human(target);
        turn.mark_opened();
        turn.commit().await?;
        turn.run().await
    }

    /// A message to a session parked at a human state: answered on one reply-only call;
    /// the session parks again on the same record and nothing routes it.
    pub async fn reply(&self, request: ReplyRequest) -> Result<Outcome, RunError> {
        if request.message.trim().is_empty() {
            return Err(RunError::invalid("message", "the message is empty"));
        }
        // A session stopped at its budget is parked on the input channel: a raise lifts
        // the stop and the message goes to the stopped state, which runs on.
        let stopped = request.raise_budget
            && self
                .store()
                .read(&request.session)
                .await
                .ok()
                .flatten()
                .is_some_and(|state| state.head.budget.stop.is_some());
        let channel = if stopped { Channel::Input } else { Channel::Decision };
        let flags = (request.upgrade, request.raise_budget);
        let parked = self.open_parked(&request.session, request.workflow.as_deref(), channel, flags).await?;
        // Read again under the session's lock: a stop lifted (or made) meanwhile is a race
        // this call lost, and it changes nothing.
        if parked.session.head.budget.stop.is_some() != stopped {
            return Err(RunError::Busy(request.session.clone()));
        }
        let workflow_id = self.workflow_of(&parked.session)?;
        let mut turn = parked.into_turn(self, workflow_id).await?;
        turn.ledger.set_disposition(Disposition::Reply);
        if request.raise_budget && turn.raise_budget(request.raised_by.as_deref()) {
            let here = turn.slug(turn.position_id()).to_string();
            turn.push_message(Message::User { text: request.message.clone(), opening: None });
            turn.emit(Event::ParkMessage { state: here, direction: "inbound".to_string(), text: request.message });
            turn.mark_opened();
            turn.commit().await?;
            return turn.run().await;
        }
        let id = turn.position_id();
        let here = turn.slug(id).to_string();
        turn.push_message(Message::User { text: request.message.clone(), opening: None });
        turn.mark_opened();
        turn.emit(Event::ParkMessage { state: here.clone(), direction: "inbound".to_string(), text: request.message });
        let answer = turn.reply_only_call(id, ParkOpening::Answering).await?;
        if !answer.trim().is_empty() {
            turn.emit(Event::ParkMessage { state: here, direction: "outbound".to_string(), text: answer });
        }
        turn.session.head.park_phase = Some(ParkPhase::Suspend);
        turn.commit().await?;
        Ok(turn.finish())
    }

    /// A trigger delivered to a session waiting for input: its variables are seeded locked,
    /// an `[event]` note tells the state, and the same state runs on.
    pub async fn deliver(&self, request: DeliverRequest) -> Result<Outcome, RunError> {
        self.deliver_as(request, false).await
    }

    async fn deliver_as(&self, request: DeliverRequest, through_caller: bool) -> Result<Outcome, RunError> {
        let trigger = request.trigger.trim().to_string();
        if trigger.is_empty() {
            return Err(RunError::invalid("trigger", "a delivery needs a trigger id"));
        }
        super::start::check_variable_names(&request.variables)?;
        let flags = (request.upgrade, request.raise_budget);
        let parked = self.open_parked(&request.session, request.workflow.as_deref(), Channel::Input, flags).await?;
        let session = &parked.session;
        if !through_caller {
            self.refuse_awaited_child(session).await?;
        }
        let workflow_id = self.workflow_of(session)?;
        // The delivery belongs to a parked child: it goes to that child alone, and the
        // child's result reaches this session as a note.
        let forwarded = session.head.pending_input.as_ref().and_then(|input| input.child.clone());
        if let Some(pending) = forwarded
            .and_then(|child| session.head.pending_delegations.iter().find(|pending| pending.child == child).cloned())
        {
            self.emit(
                &session.id,
                crate::events::Event::Delivered {
                    state: session.head.position.clone().unwrap_or_else(|| pending.state.clone()),
                    trigger: trigger.clone(),
                    to: format!("sub-workflow {}", pending.workflow),
                },
            );
            let child = DeliverRequest {
                session: pending.child.to_string(),
                workflow: None,
                raise_budget: false,
                ..request.clone()
            };
            let outcome = Box::pin(self.deliver_as(child, true)).await?;
            let outcome = Ok(outcome);
            let raise = request.raise_budget.then_some(request.raised_by.as_deref());
            return self.carry_on(workflow_id, parked, (Disposition::Deliver, raise), &pending, outcome).await;
        }
        let variables = self.check_delivery(workflow_id, &trigger, &request, &parked.session)?;
        let mut turn = parked.into_turn(self, workflow_id).await?;
        // What a delivery carries counts against the bound on the session's variables,
        // like any write, before anything is applied.
        let writes = super::start::seed_writes(&variables);
        turn.check_variable_bytes(&writes).map_err(|problem| RunError::invalid("variables", problem))?;
        // The session is held and the delivery accepted: its handed files are copied now.
        request.handed.write(self, &turn.session.id)?;
        turn.under_caller = through_caller;
        turn.ledger.set_disposition(Disposition::Deliver);
        if request.raise_budget {
            turn.raise_budget(request.raised_by.as_deref());
        }
        let id = turn.position_id();
        let here = turn.slug(id).to_string();
        turn.emit(Event::Delivered { state: here.clone(), trigger: trigger.clone(), to: here.clone() });

        // Seeds: locked, replacing what was there (a routing path's member merged by
        // `check_delivery`); `title` unlocked, never over a title the session has (a
        // sender may not relabel what an approver decides), skipped when malformed.
        let mut seeded = Vec::new();
        let mut pairs = Vec::new();
        for (name, value) in &variables {
            if name == "trigger" {
                continue;
            }
            if name == "title" {
                match validate_title(value) {
                    Ok(_) if turn.session.variables.contains_key("title") => turn.emit(Event::Warning {
                        scope: "deliver".to_string(),
                        message:
                            "Delivered title ignored: the session already has a title, and a delivery never replaces it"
                                .to_string(),
                    }),
                    Ok(title) => {
                        turn.set_variable("title", Variable { value: Value::String(title.clone()), locked: false });
                        turn.emit(Event::TitleSet { title, state: None, call_id: None });
                    }
                    Err(problem) => turn.emit(Event::Warning {
                        scope: "deliver".to_string(),
                        message: format!("Delivered title ignored: {problem}"),
                    }),
                }
                continue;
            }
            turn.set_variable(name, Variable { value: value.clone(), locked: true });
            seeded.push(name.clone());
            pairs.push(format!("{name}={}", serde_json::to_string(value).unwrap_or_default()));
        }
        turn.set_variable("trigger", Variable { value: Value::String(trigger.clone()), locked: true });
        seeded.push("trigger".to_string());
        turn.emit(Event::VariablesSet { state: None, names: seeded, locked: true, call_id: None });
        turn.session.head.trigger = Some(trigger.clone());
        turn.trigger = turn.runtime.program().trigger(turn.workflow, &trigger);

        let payload = if pairs.is_empty() {
            "It carried no variables.".to_string()
        } else {
            format!("It carried {} (also readable as session variables).", pairs.join(", "))
        };
        turn.note(
            NoteKind::Event,
            format!(
                "[event] The trigger '{trigger}' arrived. {payload} The session is still in '{here}': continue this state's work with what arrived."
            ),
        );
        let message = request.message.as_deref().map(str::trim).filter(|message| !message.is_empty());
        if let Some(message) = message {
            turn.push_message(Message::User { text: message.to_string(), opening: None });
            turn.emit(Event::ParkMessage {
                state: here.clone(),
                direction: "inbound".to_string(),
                text: message.to_string(),
            });
        }
        turn.push_trail(&here, TrailKind::Trigger, Some(trigger));
        let head = &mut turn.session.head;
        head.pending_input = None;
        head.park_phase = None;
        head.status = Status::Running;
        turn.emit(Event::StateEnter { state: here });
        turn.mark_opened();
        turn.commit().await?;
        turn.run().await
    }

    /// A delivery carries only what its trigger declares ([`super::carried`]) and meets
    /// its `requires` (counting what the session holds) when the workflow declares the
    /// trigger; an undeclared one carries no variables, and is refused with a "did you
    /// mean" when the caller asked for declared triggers only. Nothing changes on refusal.
    /// Gives the values the delivery writes (a routing path's leaf merged into what the
    /// session holds).
    fn check_delivery(
        &self,
        workflow_id: archmax_program::program::WorkflowId,
        trigger: &str,
        request: &DeliverRequest,
        session: &SessionState,
    ) -> Result<serde_json::Map<String, serde_json::Value>, RunError> {
        let program = &self.program();
        let workflow = &program.workflows[workflow_id.0 as usize];
        match program.trigger(workflow, trigger) {
            Some(declared) => {
                let firing = super::start::Firing::Delivery;
                let held = session.variable_values();
                self.check_signature(firing, (declared, trigger), &request.variables, &held, Carry::Declared)?;
                super::carried::routed_values(
                    program,
                    (declared, trigger),
                    firing.refusing(),
                    &request.variables,
                    &held,
                )
            }
            None if !request.declared_only => match Undeclared::find(program, None, &request.variables) {
                None => Ok(request.variables.clone()),
                Some(undeclared) => Err(RunError::InvalidInput {
                    message: format!("Refusing the delivery: trigger '{trigger}' {}", undeclared.clause()),
                    fields: undeclared.fields(trigger),
                    reason: InputReason::Fields,
                }),
            },
            None => Err(RunError::UnknownTrigger {
                workflow: program.str(workflow.slug).to_string(),
                trigger: trigger.to_string(),
                declared: super::start::names(program, workflow),
            }),
        }
    }

    /// `archmax run --session` on a parked session: a session waiting for input takes the
    /// firing as a delivery; one waiting for a decision takes the message as a reply.
    pub(super) async fn resume_parked(
        &self,
        request: TurnRequest,
        session_id: SessionId,
        status: Status,
    ) -> Result<Outcome, RunError> {
        match status {
            Status::AwaitingInput => {
                self.deliver(DeliverRequest {
                    session: session_id.into(),
                    workflow: Some(request.workflow),
                    trigger: request.trigger.unwrap_or_else(|| "manual".to_string()),
                    variables: request.variables,
                    message: request.message,
                    upgrade: request.upgrade,
                    // A start names a declared trigger; it was checked before.
                    declared_only: true,
                    handed: request.handed,
                    ..DeliverRequest::default()
                })
                .await
            }
            _ => {
                let Some(message) = request.message.filter(|message| !message.trim().is_empty()) else {
                    return Err(RunError::invalid(
                        "message",
                        format!("session `{session_id}` waits for a decision; a message is needed to write to it"),
                    ));
                };
                if !request.variables.is_empty() || !request.handed.is_empty() {
                    let problem =
                        format!("session `{session_id}` waits for a decision; variables cannot be delivered to it");
                    return Err(RunError::InvalidInput {
                        message: problem.clone(),
                        fields: vec![FieldProblem { field: "variables".to_string(), problem }],
                        reason: InputReason::VariablesWhileDeciding,
                    });
                }
                let reply = ReplyRequest {
                    session: session_id.into(),
                    workflow: Some(request.workflow),
                    message,
                    upgrade: request.upgrade,
                    ..ReplyRequest::default()
                };
                self.reply(reply).await
            }
        }
    }
}
