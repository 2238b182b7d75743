//! `archmax run WORKFLOW PROMPT… [--trigger ID] [--variables JSON] [--session ID]
//! [--root DIR] [--artifact FILE] [--tape FILE] [--events FILE] [--upgrade]`.

use std::process::ExitCode;

use serde_json::{Map, Value};

use archmax_vm::TurnRequest;
use archmax_vm::handover::Sender;

use crate::output::{failure, note, usage};
use crate::session::{SessionOptions, execute};

pub struct RunArgs<'a> {
    pub workflow: &'a str,
    pub prompt: &'a [String],
    pub trigger: Option<&'a str>,
    pub variables: Option<&'a str>,
    pub session: Option<&'a str>,
    /// `--new`: `--session` names a session to start, never one to continue.
    pub new_session: bool,
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

/// The session `--session ID` names. Like every command, `run` takes the start of exactly
/// one session's id for that session, and says so on stderr with the way to start a new
/// session under `ID` instead (`--new`, since `invoice-1` is also the start of
/// `invoice-10`); the start of several is refused naming them. With `--new` the id is
/// taken whole and must be no session's yet. An id nothing starts begins a new session.
fn continued_session(options: &SessionOptions<'_>, given: &str, new: bool) -> Result<String, ExitCode> {
    let store = crate::store::open_or_exit(options.executor, options.root, options.store, "run")?;
    if new {
        return match crate::store::exact_id(options.executor, store.as_ref(), given) {
            Ok(false) => Ok(given.to_string()),
            Ok(true) => Err(failure(format!(
                "session `{given}` exists, and `--new` starts a session: drop `--new` to continue it, or choose another id"
            ))),
            Err(problem) => Err(failure(problem)),
        };
    }
    match crate::store::existing_id(options.executor, store.as_ref(), given) {
        Ok(Some(id)) if id != given => {
            note!(
                "continuing session {id} (the one session whose id starts with `{given}`); to start a new session `{given}` instead, add `--new`"
            );
            Ok(id)
        }
        Ok(_) => Ok(given.to_string()),
        Err(problem) => Err(failure(format!("{problem}, or add `--new` to start a new session `{given}`"))),
    }
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
        (Some(id), _) => match continued_session(options, id, args.new_session) {
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
        handed: Default::default(),
        workflow: args.workflow.to_string(),
        session,
        trigger: args.trigger.map(str::to_string),
        message: Some(message),
        variables,
        upgrade: options.upgrade,
    };
    execute(options, args.workflow, |runtime| {
        Box::pin(async move {
            if let Some(session) = request.session.clone()
                && !files.is_empty()
            {
                // Everything is checked before the first file is written.
                let trigger = request.trigger.clone().unwrap_or_else(|| "manual".to_string());
                let handed = runtime.prepare_handover(
                    (&request.workflow, &trigger),
                    files,
                    &request.variables,
                    Sender::CommandLine,
                )?;
                runtime.check_handed_start(&request, &session, &handed, Sender::CommandLine).await?;
                handed.seed(&mut request.variables);
                request.handed = handed;
            }
            runtime.run_turn(request).await
        })
    })
}
