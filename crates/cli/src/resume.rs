//! `archmax decide`, `archmax reply` and `archmax deliver`: moving a parked session on.
//!
//! Each reads the session first (without locking it): an unknown id, a session not parked
//! on the command's channel or a target the decision does not offer is refused before
//! anything is compiled or any model configured. The runtime then opens the session
//! exclusively and checks the park again, so a session changed in between, or held by
//! another process, is refused without being touched; so is a session pinned to another
//! program of its workflow, unless `--upgrade` moves it to this one. `decide` records who
//! decided (`--as`, else `ARCHMAX_IDENTITY`, else the OS user) and warns, without refusing,
//! when that name is not among the state's `approvers`.

use std::process::ExitCode;

use serde_json::Map;

use archmax_vm::{Channel, decision_refusal, park_refusal};

use archmax_vm::session::id::check_session_id;
use archmax_vm::{DecideRequest, DeliverRequest, ReplyRequest};

use crate::output::{failure, usage};
use crate::run::parse_variables;
use crate::session::{SessionOptions, execute};

/// A parked session as read before the command runs.
struct Parked {
    /// The full id (the command may have named a unique prefix).
    id: String,
    workflow: String,
    /// The state a decision is pending at and its `approvers`, when one is.
    decision: Option<(String, Vec<String>)>,
}

/// Reads the stored session (unlocked) and refuses, before any model is configured, a
/// session that does not exist or belongs to another workflow (alike), or is not parked on
/// `channel`.
fn parked_session(
    options: &SessionOptions<'_>,
    command: &str,
    id: &str,
    named: Option<&str>,
    (channel, raise): (Channel, bool),
    to: Option<&str>,
) -> Result<Parked, ExitCode> {
    if let Err(problem) = check_session_id(id, &[]) {
        return Err(usage(command, &format!("`{id}` is not a usable session id: {problem}")));
    }
    let store = crate::store::open_or_exit(options.executor, options.root, options.store, command)?;
    let (id, state) = crate::store::resolve(options.executor, store.as_ref(), id).map_err(failure)?;
    // A session of another workflow is refused in the words used for one that does not exist.
    archmax_vm::check_named_workflow(&state, named).map_err(|error| failure(crate::session::run_problem(&error)))?;
    let mut channel = channel;
    if let Some(stop) = &state.head.budget.stop {
        // A decision cannot lift a stop: the refusal names the commands that can.
        if !raise || command == "decide" {
            return Err(failure(crate::session::budget_stopped(&id, stop)));
        }
        // A message with a raise goes to the stopped state, which runs on.
        if command == "reply" {
            channel = Channel::Input;
        }
    }
    if let Some(refusal) = park_refusal(&state, channel) {
        return Err(failure(crate::session::not_parked(&refusal)));
    }
    if let Some(refusal) = to.and_then(|to| decision_refusal(&state, to)) {
        return Err(failure(refusal));
    }
    let decision = state.head.pending_decision.map(|decision| (decision.state, decision.approvers));
    Ok(Parked { id, workflow: state.head.workflow, decision })
}

/// What `archmax decide` was told: the target, the comment and who decides (`--as`).
pub struct Decision<'a> {
    pub to: &'a str,
    pub comment: Option<&'a str>,
    pub decider: Option<&'a str>,
}

/// Who decides when `--as` is not given: `ARCHMAX_IDENTITY`, else the operating system's
/// user as the environment names them (`USER`, `LOGNAME`, `USERNAME`); none when all are
/// unset or blank.
fn default_decider() -> Option<String> {
    ["ARCHMAX_IDENTITY", "USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok())
        .map(|value| value.trim().to_string())
        .find(|value| !value.is_empty())
}

/// The decider's name, or why it cannot be recorded.
fn decider(given: Option<&str>) -> Result<Option<String>, String> {
    let Some(given) = given else {
        return Ok(default_decider().filter(|name| !name.chars().any(char::is_control)));
    };
    let name = given.trim();
    if name.is_empty() {
        return Err("--as names no one; give the decider's name, or leave it out to use $ARCHMAX_IDENTITY".to_string());
    }
    if name.chars().any(char::is_control) {
        return Err("--as holds a control character; give the decider's name as plain text".to_string());
    }
    Ok(Some(name.to_string()))
}

pub fn decide(
    options: &SessionOptions<'_>,
    id: &str,
    decision: Decision<'_>,
    (workflow, raise): (Option<&str>, bool),
) -> ExitCode {
    let to = decision.to.trim();
    if to.is_empty() {
        return usage("decide", "--to names no state");
    }
    let decider = match decider(decision.decider) {
        Ok(decider) => decider,
        Err(problem) => return usage("decide", &problem),
    };
    let parked = match parked_session(options, "decide", id, workflow, (Channel::Decision, raise), Some(to)) {
        Ok(found) => found,
        Err(code) => return code,
    };
    // The CLI does not enforce `approvers` (whoever runs it holds the store anyway); it
    // says so when the decider is not among them, and records who it was.
    if let Some((state, approvers)) = &parked.decision
        && !approvers.is_empty()
        && !decider.as_ref().is_some_and(|name| approvers.contains(name))
    {
        let who = decider.as_deref().map_or_else(|| "an unnamed decider".to_string(), |name| format!("`{name}`"));
        eprintln!(
            "warning: {} is not among the approvers of '{state}' ({}); the CLI does not enforce them, so the decision is taken all the same",
            crate::output::terminal_safe(&who),
            crate::output::terminal_safe(&approvers.join(", "))
        );
    }
    let request = DecideRequest {
        session: parked.id,
        workflow: Some(parked.workflow.clone()),
        to: to.to_string(),
        comment: decision.comment.map(str::to_string),
        upgrade: options.upgrade,
        decider,
        raise_budget: raise,
        ..DecideRequest::default()
    };
    execute(options, &parked.workflow, |runtime| Box::pin(async move { runtime.decide(request).await }))
}

pub fn reply(
    options: &SessionOptions<'_>,
    id: &str,
    message: &[String],
    (workflow, raise): (Option<&str>, bool),
) -> ExitCode {
    let message = message.join(" ");
    if message.trim().is_empty() {
        return usage("reply", "the message is empty");
    }
    let parked = parked_session(options, "reply", id, workflow, (Channel::Decision, raise), None);
    let Parked { id, workflow, .. } = match parked {
        Ok(found) => found,
        Err(code) => return code,
    };
    let raised_by = if raise { default_decider().filter(|name| !name.chars().any(char::is_control)) } else { None };
    let request = ReplyRequest {
        session: id.to_string(),
        workflow: Some(workflow.clone()),
        message,
        upgrade: options.upgrade,
        raise_budget: raise,
        raised_by,
    };
    execute(options, &workflow, |runtime| Box::pin(async move { runtime.reply(request).await }))
}

pub fn deliver(
    options: &SessionOptions<'_>,
    id: &str,
    (trigger, undeclared): (&str, bool),
    (variables, files): (Option<&str>, &[String]),
    (workflow, raise): (Option<&str>, bool),
) -> ExitCode {
    if trigger.trim().is_empty() {
        return usage("deliver", "--trigger names no trigger");
    }
    let mut variables = match parse_variables(variables, "deliver") {
        Ok(variables) => variables,
        Err(code) => return code,
    };
    let files = match crate::inputs::read(files, "deliver") {
        Ok(files) => files,
        Err(code) => return code,
    };
    let parked = parked_session(options, "deliver", id, workflow, (Channel::Input, raise), None);
    let Parked { id, workflow, .. } = match parked {
        Ok(found) => found,
        Err(code) => return code,
    };
    let mut request = DeliverRequest {
        handed: Default::default(),
        session: id.to_string(),
        workflow: Some(workflow.clone()),
        trigger: trigger.trim().to_string(),
        variables: Map::new(),
        message: None,
        upgrade: options.upgrade,
        declared_only: !undeclared,
        raise_budget: raise,
        raised_by: if raise { default_decider().filter(|name| !name.chars().any(char::is_control)) } else { None },
    };
    let trigger = trigger.trim().to_string();
    let workflow_name = workflow.clone();
    execute(options, &workflow, |runtime| {
        Box::pin(async move {
            request.handed = crate::inputs::hand_over(runtime, (&workflow_name, &trigger), files, &mut variables)?;
            request.variables = variables;
            runtime.deliver(request).await
        })
    })
}
