//! The turn boundary: resolving the session, refusing what must not start (a session
//! pinned to another program among it), seeding the variables and opening the turn at
//! the right state.

use serde_json::{Map, Value};

use archmax_program::program::{Program, StateKind, TriggerProgram, WorkflowId, WorkflowProgram};
use archmax_program::reference::is_variable_name;

use crate::events::Event;
use crate::kernel::resolve_reference;
use crate::runtime::{FieldProblem, InputReason, Outcome, Refusal, RunError, Runtime, TurnRequest};
use crate::session::TrailKind;
use crate::session::id::SessionId;
use crate::session::{Head, Message, SessionState, SessionWriter, Status, StoreError, Variable};

use super::Turn;
use super::carried::{Carry, Undeclared};

/// Longest `title` a session may carry.
pub const TITLE_MAX_CHARS: usize = 200;

/// Checks a variable name; `Err` says what is wrong.
pub(crate) fn validate_variable_name(name: &str) -> Result<(), String> {
    if is_variable_name(name) {
        return Ok(());
    }
    if name.contains('.') {
        return Err(format!("'{name}' is not a variable name: names have no dots, and there is no sub-path write"));
    }
    Err(format!("'{name}' is not a variable name: use lowercase letters, digits and `_`, starting with a letter"))
}

/// Checks a title value; returns it trimmed.
pub(crate) fn validate_title(value: &Value) -> Result<String, String> {
    let Value::String(text) = value else {
        return Err("`title` must be a string".to_string());
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("`title` must not be empty".to_string());
    }
    if trimmed.contains('\n') {
        return Err("`title` must be one line".to_string());
    }
    if trimmed.chars().count() > TITLE_MAX_CHARS {
        return Err(format!("`title` must be at most {TITLE_MAX_CHARS} characters"));
    }
    Ok(trimmed.to_string())
}

/// The trigger ids a workflow declares, for a refusal to list.
pub(super) fn names(program: &archmax_program::program::Program, workflow: &WorkflowProgram) -> Vec<String> {
    workflow.triggers.iter().map(|trigger| program.str(trigger.id).to_string()).collect()
}

/// The writes a start's or a delivery's seeds make, as the bound on a session's
/// variables counts them (`trigger` is the runtime's own).
pub(super) fn seed_writes(seeds: &Map<String, Value>) -> Vec<(String, Variable)> {
    seeds
        .iter()
        .filter(|(name, _)| name.as_str() != "trigger")
        .map(|(name, value)| (name.clone(), Variable { value: value.clone(), locked: true }))
        .collect()
}

/// Checks every seeded variable's name, naming each bad one.
pub(super) fn check_variable_names(variables: &Map<String, Value>) -> Result<(), RunError> {
    let fields: Vec<FieldProblem> = variables
        .keys()
        .filter_map(|name| {
            validate_variable_name(name).err().map(|problem| FieldProblem { field: name.clone(), problem })
        })
        .collect();
    if fields.is_empty() {
        return Ok(());
    }
    let message = fields.iter().map(|field| field.problem.as_str()).collect::<Vec<_>>().join("; ");
    Err(RunError::InvalidInput { message, fields, reason: InputReason::Fields })
}

/// What fired a trigger: a start, or a delivery to a waiting session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Firing {
    Start,
    Delivery,
}

impl Firing {
    pub(super) fn refusing(self) -> &'static str {
        match self {
            Firing::Start => "Refusing to start",
            Firing::Delivery => "Refusing the delivery",
        }
    }
}

/// The refusal of a firing whose trigger signature does not hold: every mistyped
/// variable, every missing one and every member the trigger does not declare at once, or
/// `None` when it holds.
fn signature_refusal(
    firing: Firing,
    trigger: &str,
    (missing, files): (&[&str], &[&str]),
    mistyped: Vec<FieldProblem>,
    undeclared: Option<Undeclared<'_>>,
) -> Option<RunError> {
    if missing.is_empty() && mistyped.is_empty() {
        let undeclared = undeclared?;
        return Some(RunError::InvalidInput {
            message: format!("{}: trigger '{trigger}' {}", firing.refusing(), undeclared.clause()),
            fields: undeclared.fields(trigger),
            reason: InputReason::Fields,
        });
    }
    let quoted: Vec<String> = missing.iter().map(|name| format!("'{name}'")).collect();
    let them = if missing.len() == 1 { "it" } else { "them" };
    let absent = format!(
        "requires {}, which this firing does not supply. Supply {them} as session variables.",
        quoted.join(", ")
    );
    let problems = mistyped.iter().map(|field| field.problem.as_str()).collect::<Vec<_>>().join("; ");
    let message = match (mistyped.is_empty(), missing.is_empty()) {
        (true, _) => format!("{}: trigger '{trigger}' {absent}", firing.refusing()),
        (false, true) => format!("{}: trigger '{trigger}': {problems}.", firing.refusing()),
        (false, false) => format!("{}: trigger '{trigger}': {problems}. It also {absent}", firing.refusing()),
    };
    // A host's words for supplying variables go before the full stop `absent` ends with.
    let reason = match missing.is_empty() {
        true => InputReason::Fields,
        false => InputReason::MissingVariables { advice_at: message.len().saturating_sub(1) },
    };
    let mut fields = mistyped;
    fields.extend(missing.iter().map(|name| FieldProblem {
        field: name.to_string(),
        problem: if files.contains(name) {
            format!(
                "'{name}' is a file trigger '{trigger}' requires and was not handed over: hand it over as a file (`--file {name}=PATH`, or an upload's part named `{name}`)"
            )
        } else {
            format!("'{name}' is required by trigger '{trigger}' and was not supplied")
        },
    }));
    let message = match undeclared {
        Some(undeclared) => {
            fields.extend(undeclared.fields(trigger));
            format!("{message} The trigger also {}", undeclared.clause())
        }
        None => message,
    };
    Some(RunError::InvalidInput { message, fields, reason })
}

impl Runtime {
    /// Runs one turn: a new message (or a start) on a session. In order: the request is
    /// checked, the session opened (a parked one is resumed instead), its pin and the
    /// trigger's signature are held, and only then is the turn opened and run.
    pub async fn run_turn(&self, request: TurnRequest) -> Result<Outcome, RunError> {
        self.run_turn_carrying(request, Carry::AnySeeds).await
    }

    /// Runs one turn fired from outside (a webhook): as [`Runtime::run_turn`], except
    /// that its variables may hold only what the fired trigger declares
    /// ([`super::carried`]), whether it starts a session, joins one for a new turn or
    /// resumes one waiting for input.
    pub async fn run_firing(&self, request: TurnRequest) -> Result<Outcome, RunError> {
        self.run_turn_carrying(request, Carry::Declared).await
    }

    async fn run_turn_carrying(&self, request: TurnRequest, carry: Carry) -> Result<Outcome, RunError> {
        let program = &self.program();
        let (workflow_id, trigger) = self.start_trigger(&request)?;
        let workflow = &program.workflows[workflow_id.0 as usize];
        let slug = program.str(workflow.slug).to_string();
        let trigger_id = program.str(trigger.id).to_string();
        check_request(&request)?;
        let session_id = self.session_id_for(&request, trigger)?;

        let existing = match self.store().open(&session_id).await {
            Ok(open) => Some(open),
            Err(StoreError::Missing(_)) => None,
            Err(error) => return Err(error.into()),
        };
        if existing.is_none() && session_id.contains('~') {
            return Err(RunError::invalid(
                "session",
                format!(
                    "`{session_id}` cannot start a session: `~` is reserved for the ids of sub-workflow sessions (`<caller>~<n>`); choose an id without it"
                ),
            ));
        }
        if let Some((state, _)) = &existing
            && state.head.workflow != slug
        {
            return Err(RunError::invalid(
                "session",
                format!("session `{session_id}` belongs to workflow `{}`, not `{slug}`", state.head.workflow),
            ));
        }
        // A parked session is resumed, not given a new turn: a firing into a wait is a
        // delivery, a message to a pending decision a reply. The lock is released first;
        // the resume takes it again and checks the park afresh.
        if let Some((state, _)) = &existing
            && state.head.status.is_parked()
        {
            let status = state.head.status;
            drop(existing);
            return self.resume_parked(request, session_id, status).await;
        }
        let upgrade = match &existing {
            Some((state, _)) => self.check_pin(state, request.upgrade).await?,
            None => None,
        };
        if workflow.disabled {
            return Err(RunError::refused(
                Refusal::WorkflowDisabled,
                format!("Refusing to start: workflow '{slug}' is disabled."),
            ));
        }
        // The trigger's signature, held before any model call.
        let held = existing.as_ref().map(|(state, _)| state.variable_values()).unwrap_or_default();
        self.check_signature(Firing::Start, (trigger, &trigger_id), &request.variables, &held, carry)?;
        let variables = match carry {
            Carry::Declared => super::carried::routed_values(
                program,
                (trigger, &trigger_id),
                Firing::Start.refusing(),
                &request.variables,
                &held,
            )?,
            Carry::AnySeeds => request.variables.clone(),
        };
        // Seeds count against the bound on the session's variables, before anything exists.
        let writes = seed_writes(&variables);
        let none = std::collections::BTreeMap::new();
        let kept = existing.as_ref().map_or(&none, |(state, _)| &state.variables);
        super::controls::check_variable_total(kept, &writes, self.limits().variable_bytes)
            .map_err(|problem| RunError::invalid("variables", problem))?;

        // A session still `running` had its last turn cut: children that turn was running
        // are settled before this one dispatches afresh.
        if let Some((state, _)) = &existing
            && state.head.status == Status::Running
        {
            self.settle_orphans(state).await;
        }
        // A turn cut mid-way (its session still `running`, its runner stopped) that is
        // taken up with nothing new (no message, no variables: a recovery) is the same
        // turn going on from its last committed step: its trail, trigger, variables and
        // stream are not opened again, only told that it goes on.
        let continued = existing.as_ref().and_then(|(state, _)| {
            let cut = state.head.status == Status::Running && request.message.is_none() && request.variables.is_empty();
            cut.then(|| state.head.position.clone()).flatten()
        });
        let (mut session, writer) = match existing {
            Some(open) => open,
            None => self.create_session(&session_id, workflow).await?,
        };
        if let Some(position) = continued {
            let mut turn = Turn::new(self, workflow_id, session, writer)?;
            turn.upgrade(upgrade).await;
            turn.emit(Event::Warning {
                scope: "turn".to_string(),
                message: format!(
                    "this turn was cut (its runner stopped) and goes on in '{position}' from its last committed step"
                ),
            });
            turn.mark_opened();
            return turn.run().await;
        }
        // The session is held and the start accepted: its handed files are copied now.
        request.handed.write(self, &session_id)?;
        let opening = opening_state(program, workflow, trigger, &session);
        let opening_slug = program.str(workflow.states[opening].slug).to_string();
        open_head(&mut session.head, &trigger_id, &opening_slug);

        let mut turn = Turn::new(self, workflow_id, session, writer)?;
        turn.upgrade(upgrade).await;
        turn.seed(trigger, &trigger_id, &variables)?;
        turn.emit(Event::Advance {
            from: "__start__".to_string(),
            to: opening_slug.clone(),
            reason: None,
            call_id: None,
        });
        turn.emit(Event::StateEnter { state: opening_slug.clone() });
        if opening == trigger.entry.0 as usize {
            turn.emit(Event::WorkflowReset { entry: opening_slug.clone() });
        }
        turn.push_trail(&opening_slug, TrailKind::Trigger, Some(trigger_id));
        if let Some(message) = &request.message {
            turn.push_message(Message::User { text: message.clone(), opening: None });
        }
        turn.mark_opened();
        turn.commit().await?;
        turn.run().await
    }

    /// The session a start of `request` would run in, without opening anything: the one
    /// asked for, else the trigger's `session:` path when it resolves in the request's
    /// variables to a usable id (a firing joining a conversation), else a new random id.
    /// A host that must know the id before the turn runs (to queue it) asks here.
    pub(crate) fn start_session_id(&self, request: &TurnRequest) -> Result<SessionId, RunError> {
        let (_, trigger) = self.start_trigger(request)?;
        self.session_id_for(request, trigger)
    }

    /// The session a firing of `request` joins: as [`Runtime::start_session_id`] says,
    /// except that a `session:` path naming a session of another workflow does not
    /// resolve, so the firing starts a session of its own as it does when the path names
    /// no session; its answer says nothing of the session it named. An id the request
    /// names itself is returned as it is (the start refuses it if it is taken).
    pub async fn session_to_join(&self, request: &TurnRequest) -> Result<SessionId, RunError> {
        let id = self.start_session_id(request)?;
        if request.session.is_some() {
            return Ok(id);
        }
        let (workflow_id, _) = self.start_trigger(request)?;
        let slug = self.program().str(self.program().workflows[workflow_id.0 as usize].slug);
        match self.store().read(&id).await? {
            Some(state) if state.head.workflow != slug => {
                SessionId::mint().map_err(|error| RunError::refused(Refusal::NoSessionId, error.to_string()))
            }
            _ => Ok(id),
        }
    }

    /// The workflow a start names and the trigger it fires (`manual` when it names none).
    fn start_trigger(&self, request: &TurnRequest) -> Result<(WorkflowId, &TriggerProgram), RunError> {
        let program = &self.program();
        let workflow_id = self.workflow_id(&request.workflow)?;
        let workflow = &program.workflows[workflow_id.0 as usize];
        let trigger_id = request.trigger.as_deref().unwrap_or("manual");
        match program.trigger(workflow, trigger_id) {
            Some(trigger) => Ok((workflow_id, trigger)),
            None => Err(RunError::UnknownTrigger {
                workflow: program.str(workflow.slug).to_string(),
                trigger: trigger_id.to_string(),
                declared: names(program, workflow),
            }),
        }
    }

    /// The session a start runs in: the one asked for, else the trigger's `session`
    /// reference when it resolves to a usable id, else a new random id.
    fn session_id_for(&self, request: &TurnRequest, trigger: &TriggerProgram) -> Result<SessionId, RunError> {
        let mount_names: Vec<&str> = self.mounts().mounts.iter().map(|mount| mount.name.as_str()).collect();
        if let Some(id) = &request.session {
            return SessionId::parse(id, &mount_names).map_err(|problem| RunError::invalid("session", problem));
        }
        let referenced = trigger
            .session
            .as_ref()
            .and_then(|path| resolve_reference(path, &Value::Object(request.variables.clone())))
            .and_then(|id| SessionId::parse(&id, &mount_names).ok())
            // A firing joins a conversation, never a sub-workflow's session (`<caller>~<n>`).
            .filter(|id| !id.contains('~'));
        match referenced {
            Some(id) => Ok(id),
            None => SessionId::mint().map_err(|error| RunError::refused(Refusal::NoSessionId, error.to_string())),
        }
    }

    /// Holds the trigger's `requires` against the seeds and what the session holds, and,
    /// when only declared members may be carried, the seeds to what it declares.
    pub(super) fn check_signature(
        &self,
        firing: Firing,
        (trigger, trigger_id): (&TriggerProgram, &str),
        seeds: &Map<String, Value>,
        held: &Value,
        carry: Carry,
    ) -> Result<(), RunError> {
        let program = &self.program();
        let today = crate::values::Today::at(self.now());
        let mut missing = Vec::new();
        let mut mistyped = Vec::new();
        for entry in &trigger.requires {
            let name = program.str(entry.name);
            match seeds.get(name).or_else(|| held.get(name)) {
                None => missing.push(name),
                Some(value) => {
                    if let Err(problem) = crate::values::check(program, entry, value, &today) {
                        mistyped.push(FieldProblem { field: name.to_string(), problem });
                    }
                }
            }
        }
        let undeclared = match carry {
            Carry::Declared => Undeclared::find(program, Some(trigger), seeds),
            Carry::AnySeeds => None,
        };
        let files: Vec<&str> = trigger
            .requires
            .iter()
            .filter(|entry| entry.ty == Some(archmax_program::program::ValueType::File))
            .map(|entry| program.str(entry.name))
            .collect();
        match signature_refusal(firing, trigger_id, (&missing, &files), mistyped, undeclared) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Creates a new session of `workflow`, pinned to its program.
    async fn create_session(
        &self,
        session_id: &SessionId,
        workflow: &WorkflowProgram,
    ) -> Result<(SessionState, Box<dyn SessionWriter>), RunError> {
        let now = self.now();
        let state = SessionState {
            id: session_id.clone(),
            seq: 0,
            head: Head {
                workflow: self.program().str(workflow.slug).to_string(),
                spec_hash: workflow.spec_hash.clone(),
                created_at: now,
                updated_at: now,
                ..Head::default()
            },
            ..SessionState::default()
        };
        let writer = self.store().create(&state).await?;
        self.keep_spec(session_id, workflow).await;
        Ok((state, writer))
    }
}

/// The request's own fields: variable names, a seeded title, a non-empty message.
fn check_request(request: &TurnRequest) -> Result<(), RunError> {
    check_variable_names(&request.variables)?;
    if let Some(title) = request.variables.get("title") {
        validate_title(title).map_err(|problem| RunError::invalid("title", format!("the seeded {problem}")))?;
    }
    if let Some(message) = &request.message
        && message.trim().is_empty()
    {
        return Err(RunError::invalid("message", "the message is empty"));
    }
    Ok(())
}

/// Where a turn opens: where the session stands, except on its first turn and after an
/// automated terminal state completed, which open at the trigger's entry.
fn opening_state(
    program: &Program,
    workflow: &WorkflowProgram,
    trigger: &TriggerProgram,
    session: &SessionState,
) -> usize {
    let first_turn = session.head.position.is_none();
    let retained = session
        .head
        .position
        .as_deref()
        .and_then(|slug| workflow.states.iter().position(|state| program.str(state.slug) == slug));
    let completed_automated = retained.is_some_and(|index| {
        let state = &workflow.states[index];
        session.head.status == Status::Completed && state.is_terminal() && state.kind != StateKind::Agent
    });
    match retained {
        Some(index) if !first_turn && !completed_automated => index,
        _ => trigger.entry.0 as usize,
    }
}

/// The head of a session a new turn opens at `opening`: running, with nothing of the
/// last turn's outcome, parks or children left.
fn open_head(head: &mut Head, trigger_id: &str, opening: &str) {
    head.trigger = Some(trigger_id.to_string());
    head.status = Status::Running;
    head.rejected = None;
    head.exit = None;
    head.park_counts.clear();
    head.pending_decision = None;
    head.pending_input = None;
    head.park_phase = None;
    // A new turn is new work: failures and parked children of the last one are not
    // this turn's (a parked session never reaches here; it is resumed instead).
    head.failed_delegations.clear();
    head.pending_delegations.clear();
    if head.entry_state.is_none() {
        head.entry_state = Some(opening.to_string());
    }
    head.position = Some(opening.to_string());
}

impl Turn<'_> {
    /// Seeds a start's variables: locked host-boundary writes; `title` unlocked and
    /// never over an existing one; a seeded return lands unlocked and does not overwrite
    /// a held value; `trigger` always the firing's id.
    fn seed(&mut self, trigger: &TriggerProgram, trigger_id: &str, seeds: &Map<String, Value>) -> Result<(), RunError> {
        let program = self.program();
        let returns: Vec<&str> = trigger.returns.iter().map(|entry| program.str(entry.name)).collect();
        let mut seeded: Vec<String> = Vec::new();
        for (name, value) in seeds {
            if name == "trigger" {
                continue;
            }
            if name == "title" {
                if self.session.variables.contains_key("title") {
                    continue;
                }
                let title = validate_title(value).map_err(|problem| RunError::invalid("title", problem))?;
                self.set_variable("title", Variable { value: Value::String(title.clone()), locked: false });
                self.emit(Event::TitleSet { title, state: None, call_id: None });
                continue;
            }
            if returns.contains(&name.as_str()) {
                if !self.session.variables.contains_key(name) {
                    self.set_variable(name, Variable { value: value.clone(), locked: false });
                    seeded.push(name.clone());
                }
                continue;
            }
            self.set_variable(name, Variable { value: value.clone(), locked: true });
            seeded.push(name.clone());
        }
        self.set_variable("trigger", Variable { value: Value::String(trigger_id.to_string()), locked: true });
        seeded.push("trigger".to_string());
        self.emit(Event::VariablesSet { state: None, names: seeded, locked: true, call_id: None });
        Ok(())
    }
}
