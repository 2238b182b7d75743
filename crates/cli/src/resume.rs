//! `archmax decide`, `archmax reply` and `archmax deliver`: moving a parked session on.
//!
//! Each reads the session first (without locking it): an unknown id, a session not parked
//! on the command's channel or a target the decision does not offer is refused before
//! anything is compiled or any model configured. The runtime then opens the session
//! exclusively and checks the park again, so a session changed in between, or held by
//! another process, is refused without being touched; so is a session pinned to another
//! program of its workflow, unless `--upgrade` moves it to this one.

use std::process::ExitCode;

use serde_json::Map;

use archmax_vm::{Channel, decision_refusal, park_refusal};

use archmax_vm::session::id::check_session_id;
use archmax_vm::{DecideRequest, DeliverRequest, ReplyRequest};

use crate::output::{failure, usage};
use crate::run::parse_variables;
use crate::session::{SessionOptions, execute};

/// Reads the stored session (unlocked) and refuses, before any model is configured, a
/// session that does not exist or belongs to another workflow (alike), or is not parked on
/// `channel`. Returns its full id (`id` may be a unique prefix) and its workflow.
fn parked_workflow(
    options: &SessionOptions<'_>,
    command: &str,
    id: &str,
    named: Option<&str>,
    channel: Channel,
    to: Option<&str>,
) -> Result<(String, String), ExitCode> {
    if let Err(problem) = check_session_id(id, &[]) {
        return Err(usage(command, &format!("`{id}` is not a usable session id: {problem}")));
    }
    let store = crate::store::open_or_exit(options.executor, options.root, options.store, command)?;
    let (id, state) = crate::store::resolve(options.executor, store.as_ref(), id).map_err(failure)?;
    // A session of another workflow is refused in the words used for one that does not exist.
    archmax_vm::check_named_workflow(&state, named).map_err(|error| failure(crate::session::run_problem(&error)))?;
    if let Some(refusal) = park_refusal(&state, channel) {
        return Err(failure(crate::session::not_parked(&refusal)));
    }
    if let Some(refusal) = to.and_then(|to| decision_refusal(&state, to)) {
        return Err(failure(refusal));
    }
    Ok((id, state.head.workflow))
}

pub fn decide(
    options: &SessionOptions<'_>,
    id: &str,
    to: &str,
    comment: Option<&str>,
    workflow: Option<&str>,
) -> ExitCode {
    if to.trim().is_empty() {
        return usage("decide", "--to names no state");
    }
    let (id, workflow) = match parked_workflow(options, "decide", id, workflow, Channel::Decision, Some(to.trim())) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let request = DecideRequest {
        session: id.to_string(),
        workflow: Some(workflow.clone()),
        to: to.trim().to_string(),
        comment: comment.map(str::to_string),
        upgrade: options.upgrade,
        ..DecideRequest::default()
    };
    execute(options, &workflow, |runtime| Box::pin(async move { runtime.decide(request).await }))
}

pub fn reply(options: &SessionOptions<'_>, id: &str, message: &[String], workflow: Option<&str>) -> ExitCode {
    let message = message.join(" ");
    if message.trim().is_empty() {
        return usage("reply", "the message is empty");
    }
    let (id, workflow) = match parked_workflow(options, "reply", id, workflow, Channel::Decision, None) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let request =
        ReplyRequest { session: id.to_string(), workflow: Some(workflow.clone()), message, upgrade: options.upgrade };
    execute(options, &workflow, |runtime| Box::pin(async move { runtime.reply(request).await }))
}

pub fn deliver(
    options: &SessionOptions<'_>,
    id: &str,
    (trigger, undeclared): (&str, bool),
    (variables, files): (Option<&str>, &[String]),
    workflow: Option<&str>,
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
    let (id, workflow) = match parked_workflow(options, "deliver", id, workflow, Channel::Input, None) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let mut request = DeliverRequest {
        session: id.to_string(),
        workflow: Some(workflow.clone()),
        trigger: trigger.trim().to_string(),
        variables: Map::new(),
        message: None,
        upgrade: options.upgrade,
        declared_only: !undeclared,
    };
    let trigger = trigger.trim().to_string();
    let workflow_name = workflow.clone();
    execute(options, &workflow, |runtime| {
        Box::pin(async move {
            crate::inputs::hand_over(runtime, &workflow_name, &trigger, &request.session, files, &mut variables)?;
            request.variables = variables;
            runtime.deliver(request).await
        })
    })
}
