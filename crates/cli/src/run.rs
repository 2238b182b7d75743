//! `archmax run WORKFLOW PROMPT… [--trigger ID] [--variables JSON] [--session ID]
//! [--root DIR] [--artifact FILE] [--tape FILE] [--events FILE] [--upgrade]`.

use std::process::ExitCode;

use serde_json::{Map, Value};

use archmax_vm::TurnRequest;

use crate::output::{failure, note, usage};
use crate::session::{SessionOptions, execute};

pub struct RunArgs<'a> {
    pub workflow: &'a str,
    pub prompt: &'a [String],
    pub trigger: Option<&'a str>,
    pub variables: Option<&'a str>,
    pub session: Option<&'a str>,
    /// `--file [NAME=]PATH` arguments.
    pub files: &'a [String],
}

/// Parses `--variables`: one JSON object.
pub fn parse_variables(text: Option<&str>, command: &str) -> Result<Map<String, Value>, ExitCode> {
    let Some(text) = text else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(usage(command, "--variables must be a JSON object, such as '{\"order_id\": \"ORD-1\"}'")),
        Err(error) => Err(usage(command, &format!("--variables is not valid JSON: {error}"))),
    }
}

/// The session `--session ID` names: the one of that id, else the one session whose id
/// starts with it (said on stderr), else a new session under `ID`. An id that starts
/// several sessions is refused naming them.
fn continued_session(options: &SessionOptions<'_>, given: &str) -> Result<String, ExitCode> {
    let store = crate::store::open_or_exit(options.executor, options.root, options.store, "run")?;
    let found = crate::store::existing_id(options.executor, store.as_ref(), given).map_err(failure)?;
    Ok(match found {
        Some(id) if id != given => {
            note!("continuing session {id} (the one session whose id starts with `{given}`)");
            id
        }
        _ => given.to_string(),
    })
}

pub fn run(options: &SessionOptions<'_>, args: RunArgs<'_>) -> ExitCode {
    let message = args.prompt.join(" ");
    if message.trim().is_empty() {
        return usage("run", "the prompt is empty");
    }
    let variables = match parse_variables(args.variables, "run") {
        Ok(variables) => variables,
        Err(code) => return code,
    };
    if let Some(id) = args.session
        && let Err(problem) = archmax_vm::session::id::check_session_id(id, &[])
    {
        return usage("run", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let files = match crate::inputs::read(args.files, "run") {
        Ok(files) => files,
        Err(code) => return code,
    };
    // Handed files go into the session's own files before the turn, so its id is known
    // first: the one asked for, else a new one.
    let session = match (args.session, files.is_empty()) {
        (Some(id), _) => match continued_session(options, id) {
            Ok(id) => Some(id),
            Err(code) => return code,
        },
        (None, true) => None,
        (None, false) => match archmax_vm::session::id::new_session_id() {
            Ok(id) => Some(id),
            Err(error) => return crate::output::failure(error.to_string()),
        },
    };
    let mut request = TurnRequest {
        workflow: args.workflow.to_string(),
        session,
        trigger: args.trigger.map(str::to_string),
        message: Some(message),
        variables,
        upgrade: options.upgrade,
    };
    execute(options, args.workflow, |runtime| {
        Box::pin(async move {
            if let Some(session) = request.session.clone() {
                let trigger = request.trigger.clone().unwrap_or_else(|| "manual".to_string());
                crate::inputs::hand_over(
                    runtime,
                    &request.workflow,
                    &trigger,
                    &session,
                    files,
                    &mut request.variables,
                )?;
            }
            runtime.run_turn(request).await
        })
    })
}
