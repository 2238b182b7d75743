//! What `run`, `sessions` (and the resume commands) share: compiling or loading the
//! program, choosing the model, the store, the event listeners, and printing an outcome.

use std::fs::File;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use archmax_compiler::artifact;
use archmax_compiler::lower::BuildInputs;
use archmax_compiler::program::Program;
use archmax_compiler::{CompileError, compile};
use archmax_vm::environment::{self, ClockAndPricing, process_env};
use archmax_vm::events::{EventSink, JsonLines};
use archmax_vm::model::ModelAdapter;
use archmax_vm::model::record::RecordError;
use archmax_vm::session::{Status, Usage};
use archmax_vm::stdlib::PLATFORM_PROMPT;
use archmax_vm::{Disposition, InputReason, NotParked, Outcome, RunError, Runtime, RuntimeParts};

use crate::build::refused;
use crate::output::{failure, note, stderr_color};
use crate::trace::Trace;

/// Options every session command takes.
pub struct SessionOptions<'a> {
    pub root: &'a Path,
    /// Whether `--root` was given (else `root` is the current directory).
    pub root_given: bool,
    pub artifact: Option<&'a Path>,
    /// `--trust` values; with `ARCHMAX_TRUSTED_KEYS`, the keys an artifact must be signed by.
    pub trust: &'a [String],
    pub tape: Option<&'a Path>,
    /// `--record FILE`: the live model's answers are also written to this tape.
    pub record: Option<&'a Path>,
    pub events: Option<&'a Path>,
    /// `--upgrade`: move a session pinned to another program of its workflow to this one.
    pub upgrade: bool,
    /// `--mocks`: host tools answered from this file of mocks.
    pub mocks: Option<&'a Path>,
    /// `--timeout SECONDS`: the bound on each model call.
    pub timeout: Option<f64>,
    /// `--store`: the session store (else `ARCHMAX_STORE`, else `<root>/sessions`).
    pub store: Option<&'a str>,
    /// The process's one async runtime (built in `main`), which runs the session.
    pub executor: &'a tokio::runtime::Runtime,
}

/// A failure before anything ran, with the message to print.
pub struct Refusal(pub String);

/// A program to run and the workflows left out of it.
pub struct Loaded {
    pub program: Program,
    /// Workflows that do not validate and were not needed: each is worth a warning.
    pub left_out: Vec<String>,
}

/// Loads the artifact under the trust policy, or compiles `workflow` and the workflows
/// it calls in process (validation included); a broken sibling blocks nothing. A program
/// compiled here is trusted as it stands; a loaded one carries bytecode only when a
/// trusted key signed it (the loader recompiles the rest).
pub fn program(options: &SessionOptions<'_>, workflow: &str) -> Result<Loaded, Result<Refusal, CompileError>> {
    load(options, &[workflow.to_string()])
}

/// Loads the artifact, or compiles the `selection` (every workflow when empty).
pub fn load(options: &SessionOptions<'_>, selection: &[String]) -> Result<Loaded, Result<Refusal, CompileError>> {
    if let Some(path) = options.artifact {
        let trusted = crate::keys::trusted_keys(options.trust).map_err(|error| Ok(Refusal(error)))?;
        let bytes = std::fs::read(path)
            .map_err(|error| Ok(Refusal(format!("could not read `{}`: {error}", path.display()))))?;
        return artifact::load(&bytes, &trusted)
            .map(|loaded| Loaded { program: loaded.program, left_out: Vec::new() })
            .map_err(|error| {
                Ok(Refusal(format!("`{}` is refused: {}", path.display(), crate::keys::artifact_problem(&error))))
            });
    }
    compile(options.root, selection, &BuildInputs { platform_prompt: PLATFORM_PROMPT })
        .map(|compiled| Loaded { program: compiled.program, left_out: compiled.left_out })
        .map_err(Err)
}

/// Reads a mocks file (`--mocks`). A finding is one line per problem, each naming
/// the file, line and column.
pub fn load_mocks(path: &Path) -> Result<Vec<archmax_vm::Mock>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("could not read the mocks `{}`: {error}", path.display()))?;
    let parsed = archmax_compiler::schema::case::parse_mocks(&text).map_err(|findings| {
        let lines: Vec<String> = findings
            .iter()
            .map(|finding| {
                let at = finding.span.map_or(0, |span| span.start as usize);
                let before = text.get(..at).unwrap_or(&text);
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().map_or(0, |tail| tail.chars().count()) + 1;
                let help = finding.help.as_deref().map(|help| format!(" ({help})")).unwrap_or_default();
                format!("{}:{line}:{column}: {}{help}", path.display(), finding.message)
            })
            .collect();
        format!("the mocks `{}` are invalid:\n  {}", path.display(), lines.join("\n  "))
    })?;
    Ok(parsed.iter().map(archmax_vm::Mock::from).collect())
}

/// The model: the tape when given, else the endpoints `archmax.toml` and the environment
/// configure.
pub fn model(options: &SessionOptions<'_>) -> Result<Arc<dyn ModelAdapter>, Refusal> {
    match options.tape {
        Some(path) => {
            environment::tape_from_file(path, &path.display().to_string()).map_err(|error| Refusal(error.to_string()))
        }
        None => {
            // `--timeout` bounds each call, over ARCHMAX_REQUEST_TIMEOUT_MS.
            let timeout = options.timeout.map(|seconds| ((seconds * 1000.0).round() as u64).max(1).to_string());
            let get = |name: &str| match (&timeout, name) {
                (Some(millis), "ARCHMAX_REQUEST_TIMEOUT_MS") => Some(millis.clone()),
                _ => process_env(name),
            };
            let show: archmax_vm::model::openai::RetryObserver = Arc::new(|notice| {
                eprintln!(
                    "retrying in {:.1} s (attempt {} of {}): {}",
                    notice.delay.as_secs_f64(),
                    notice.attempt,
                    notice.of,
                    notice.reason
                );
            });
            let settings = crate::tools::read_settings(options.root).map_err(Refusal)?;
            let endpoint =
                environment::endpoint_for(&settings, get, Some(show)).map_err(|error| Refusal(error.to_string()))?;
            match options.record {
                Some(path) => archmax_vm::model::record::Recorder::new(endpoint, path)
                    .map(|recorder| Arc::new(recorder) as Arc<dyn ModelAdapter>)
                    .map_err(|error| Refusal(record_problem(&error))),
                None => Ok(endpoint),
            }
        }
    }
}

/// A tape `--record` cannot write to, as the CLI says it (naming its option).
fn record_problem(error: &RecordError) -> String {
    match error {
        RecordError::NotATape { path, problem } => format!(
            "`{path}` is not a tape, so --record will not add to it ({problem}); name a new file or an existing tape"
        ),
        _ => error.to_string(),
    }
}

/// Builds a runtime with the flow renderer and, when asked, a JSON-lines event file.
pub fn runtime(
    options: &SessionOptions<'_>,
    program: Program,
    model: Arc<dyn ModelAdapter>,
) -> Result<Runtime, Refusal> {
    let events = EventSink::new();
    events.listen(Box::new(crate::reply::ReplyStream::default()));
    if !crate::output::quiet() {
        events.listen(Box::new(Trace::new(stderr_color())));
    }
    if let Some(path) = options.events {
        let file =
            File::create(path).map_err(|error| Refusal(format!("could not write `{}`: {error}", path.display())))?;
        events.listen(Box::new(JsonLines { writer: std::io::BufWriter::new(file) }));
    }
    let mocks = match options.mocks {
        Some(path) => load_mocks(path).map_err(Refusal)?,
        None => Vec::new(),
    };
    let settings = crate::tools::read_settings(options.root).map_err(Refusal)?;
    let ClockAndPricing { clock, pricing } = ClockAndPricing::for_settings(&settings, process_env).map_err(Refusal)?;
    let tools = crate::tools::host_tools(options.root, &settings).map_err(Refusal)?;
    Ok(Runtime::builder(RuntimeParts {
        program: Arc::new(program),
        store: crate::faults::with_test_faults(
            crate::store::open_for(options.executor, options.root, options.store).map_err(Refusal)?,
        ),
        model,
        events,
        clock,
        root: options.root.to_path_buf(),
        pricing,
    })
    .tools(&tools)
    .context(settings.context)
    .budgets(settings.limits.clone())
    .mocks(mocks)
    .build())
}

/// Prints the header, builds the runtime (program, model, store, listeners), runs the
/// action and prints its outcome. Returns the exit code.
pub fn execute<F>(options: &SessionOptions<'_>, workflow: &str, action: F) -> ExitCode
where
    F: for<'a> FnOnce(&'a Runtime) -> Pin<Box<dyn Future<Output = Result<Outcome, RunError>> + 'a>>,
{
    // `run`, `decide`, `reply` and `deliver` all come here: their turn's spans are exported
    // when the OTEL_* variables configure tracing.
    crate::telemetry::traced(|| execute_untraced(options, workflow, action))
}

fn execute_untraced<F>(options: &SessionOptions<'_>, workflow: &str, action: F) -> ExitCode
where
    F: for<'a> FnOnce(&'a Runtime) -> Pin<Box<dyn Future<Output = Result<Outcome, RunError>> + 'a>>,
{
    let Loaded { program, left_out } = match program(options, workflow) {
        Ok(loaded) => loaded,
        Err(refusal) => {
            header(options, workflow, None);
            return match refusal {
                Ok(refusal) => failure(refusal.0),
                Err(error) => refused(error),
            };
        }
    };
    header(options, workflow, Some(&program));
    for sibling in left_out {
        eprintln!(
            "warning: workflow `{sibling}` does not validate and was left out (`archmax validate {sibling}` says why)"
        );
    }
    let model = match model(options) {
        Ok(model) => model,
        Err(refusal) => return failure(refusal.0),
    };
    if let Some(refusal) = missing_model(options, &program, workflow) {
        return failure(refusal);
    }
    let runtime = match runtime(options, program, model) {
        Ok(runtime) => runtime,
        Err(refusal) => return failure(refusal.0),
    };
    let finished = options.executor.block_on(async {
        let outcome = action(&runtime).await?;
        let caller = runtime.awaiting_caller(&outcome.session_id).await;
        Ok::<_, RunError>((outcome, caller))
    });
    match finished {
        Ok((outcome, caller)) => finish(&outcome, &runtime, caller.as_deref(), &repeated_flags(options)),
        Err(error) => failure(run_problem(&error)),
    }
}

/// A runtime error as the CLI says it: the library's sentence (what is wrong), then the
/// command that helps, where this CLI has one.
pub fn run_problem(error: &RunError) -> String {
    match error {
        RunError::UnknownSession(_) => format!("{error}; `archmax sessions` lists them"),
        RunError::ProgramChanged { changes, .. } if changes.missing_position().is_none() => format!(
            "{error} Run the same command with `--upgrade` to move the session to the new program, or resume it with the artifact it started under to keep the old rules."
        ),
        RunError::Store(store) => crate::store::store_problem(store),
        RunError::NotParked(refusal) => not_parked(refusal),
        RunError::BudgetStopped { session, stop } => budget_stopped(session, stop),
        RunError::AwaitedByCaller { session, caller } => format!(
            "session `{session}` is a sub-workflow that its caller `{caller}` waits for; resume it through the caller (`archmax decide {caller} --to <state>` or `archmax deliver {caller} --trigger <id>`). Nothing was changed."
        ),
        RunError::InvalidInput { message, reason: InputReason::MissingVariables { advice_at }, .. }
            if message.is_char_boundary(*advice_at) =>
        {
            let (before, after) = message.split_at(*advice_at);
            format!("{before} (`--variables` on the command line){after}")
        }
        RunError::InvalidInput { reason: InputReason::VariablesWhileDeciding, .. } => {
            format!("{error} (decide it with `archmax decide`)")
        }
        _ => error.to_string(),
    }
}

/// A session stopped at its budget, with the commands that raise it.
pub fn budget_stopped(id: &str, stop: &archmax_vm::session::BudgetStop) -> String {
    format!(
        "session `{id}` stopped at its budget in '{}': {}. Nothing was changed. To let it go on, raise its budget: `archmax reply {id} --raise-budget <message>` (or `archmax deliver {id} --trigger <id> --raise-budget`)",
        stop.state, stop.reason
    )
}

/// A session not parked on a command's channel, with the command that resumes it on the
/// channel it is parked on.
pub fn not_parked(refusal: &NotParked) -> String {
    let id = &refusal.session;
    let advice = match refusal.status {
        Status::AwaitingDecision => {
            Some(format!("use `archmax decide {id} --to <state>` (or `archmax reply` to write to it)"))
        }
        Status::AwaitingInput => Some(format!("use `archmax deliver {id} --trigger <id>`")),
        _ => None,
    };
    refusal.sentence(advice.as_deref())
}

/// The session header on stderr: which workflow, which workspace, which model.
pub fn header(options: &SessionOptions<'_>, workflow: &str, program: Option<&Program>) {
    let root = options.root.canonicalize().unwrap_or_else(|_| options.root.to_path_buf());
    let model = match options.tape {
        Some(tape) => format!("tape {}", tape.display()),
        None => models_used(program, workflow, environment::configured_model(process_env)),
    };
    let model = match options.record {
        Some(tape) => format!("{model} · recording to {}", tape.display()),
        None => model,
    };
    note!("archmax · workflow {workflow} · root {} · model {model}", root.display());
}

/// Each model-calling state of `workflow` (its slug) with the model it will really use:
/// its own (its `model`, else `settings.model`, both folded into the program), else the
/// environment's; `None` when it names none and the environment names none either.
fn state_models(program: &Program, workflow: &str, configured: Option<&str>) -> Vec<(String, Option<String>)> {
    let Some((_, source)) = program.workflow(workflow) else {
        return Vec::new();
    };
    source
        .states
        .iter()
        .filter(|state| state.kind != archmax_compiler::program::StateKind::Code)
        .map(|state| {
            let model = state.model.map(|model| program.str(model).to_string()).or(configured.map(str::to_string));
            (program.str(state.slug).to_string(), model)
        })
        .collect()
}

/// The models the workflow's model-calling states will really use. Without a program
/// only the environment is known.
fn models_used(program: Option<&Program>, workflow: &str, configured: Option<String>) -> String {
    const UNSET: &str = "ARCHMAX_MODEL is unset (states and settings must name one)";
    let Some(program) = program.filter(|program| program.workflow(workflow).is_some()) else {
        return configured.unwrap_or_else(|| UNSET.to_string());
    };
    let mut models: Vec<String> = Vec::new();
    let mut unresolved = false;
    for (_, model) in state_models(program, workflow, configured.as_deref()) {
        match model {
            Some(model) if !models.contains(&model) => models.push(model),
            Some(_) => {}
            None => unresolved = true,
        }
    }
    match (models.is_empty(), unresolved) {
        (true, _) => UNSET.to_string(),
        (false, false) => models.join(", "),
        (false, true) => format!("{} (other states name none and ARCHMAX_MODEL is unset)", models.join(", ")),
    }
}

/// Refuses, before any session is created or moved, a live run in which some state of
/// `workflow` would call a model without one: no `model`, no `settings.model`, and
/// ARCHMAX_MODEL unset. A tape needs no model.
fn missing_model(options: &SessionOptions<'_>, program: &Program, workflow: &str) -> Option<String> {
    if options.tape.is_some() {
        return None;
    }
    let configured = environment::configured_model(process_env);
    let unnamed: Vec<String> = state_models(program, workflow, configured.as_deref())
        .into_iter()
        .filter(|(_, model)| model.is_none())
        .map(|(state, _)| format!("`{state}`"))
        .collect();
    (!unnamed.is_empty()).then(|| {
        format!(
            "no model is configured for {} {} of workflow `{workflow}`: set ARCHMAX_MODEL, or name one with \
             `settings.model` or the state's `model` (or replay a tape with --tape); nothing was run",
            if unnamed.len() == 1 { "state" } else { "states" },
            unnamed.join(", ")
        )
    })
}

/// The token footer, or `None` when no usage was reported.
pub fn footer(usage: &Usage) -> Option<String> {
    if usage.is_empty() {
        return None;
    }
    let mut line = format!(
        "tokens     in {} · out {} · cache r {}/w {}",
        crate::output::thousands(usage.input_tokens),
        crate::output::thousands(usage.output_tokens),
        crate::output::thousands(usage.cache_read_tokens),
        crate::output::thousands(usage.cache_creation_tokens)
    );
    if let Some(cost) = usage.cost_usd {
        line.push_str(&format!(" · ${cost:.4}"));
    }
    Some(line)
}

/// One model's and role's share, as the footer and `archmax sessions ID` show it.
pub fn spend_line(line: &archmax_vm::session::Spend) -> String {
    let model = if line.model.is_empty() { "(no model)" } else { line.model.as_str() };
    let calls = if line.calls == 1 { "call" } else { "calls" };
    let cost = match line.cost_usd {
        Some(cost) => format!("${cost:.4}"),
        None => "unpriced".to_string(),
    };
    format!(
        "  {} · {} · {} {calls} · in {} · out {} · {cost}",
        crate::output::terminal_safe(model),
        line.role,
        line.calls,
        crate::output::thousands(line.input_tokens),
        crate::output::thousands(line.output_tokens)
    )
}

/// The flags a suggested follow-up command repeats so that it can be pasted as it is:
/// the `--root`, `--store`, `--artifact`, `--tape` and `--mocks` this command was given (a
/// store's password shown as `***`), each with a leading space. `--mocks` is repeated so a
/// pasted follow-up never sends a mocked tool's calls to the real server.
pub fn repeated_flags(options: &SessionOptions<'_>) -> String {
    let path = |path: &Path| path.to_string_lossy().into_owned();
    let given = [
        ("--root", options.root_given.then(|| path(options.root))),
        ("--store", options.store.map(crate::store::redacted)),
        ("--artifact", options.artifact.map(path)),
        ("--tape", options.tape.map(path)),
        ("--mocks", options.mocks.map(path)),
    ];
    given
        .into_iter()
        .filter_map(|(flag, value)| Some(format!(" {flag} {}", archmax_program::shell::word(&value?))))
        .collect()
}

/// What to do about a parked session: where it waits, and the command that moves it on
/// (`flags`, from [`repeated_flags`], reach the same session, program and model).
pub fn park_report(outcome: &Outcome, program: &Program, resume_through: Option<&str>, flags: &str) -> Option<String> {
    // A sub-workflow its caller waits for is moved on through the caller. What the model
    // wrote (a reason, a title) is kept to one inert line, and every word of a `next:`
    // command is quoted as a shell reads it back.
    let shown = crate::output::one_terminal_line;
    let word = archmax_program::shell::word;
    let session = resume_through.unwrap_or(&outcome.session_id);
    let (named, id) = (shown(session), word(session));
    if let Some(stop) = &outcome.budget_stop {
        return Some(format!(
            "⏸ stopped at its budget in {}: {} · session {named}\n  next: archmax reply {id} --raise-budget{flags} \"go on\"",
            shown(&stop.state),
            shown(&stop.reason)
        ));
    }
    if let Some(decision) = &outcome.pending_decision {
        let title = decision.title.as_ref().map(|title| format!(" ({})", shown(title))).unwrap_or_default();
        let targets: Vec<&str> = decision.transitions.iter().map(|choice| choice.to.as_str()).collect();
        let to = match targets.as_slice() {
            [only] => word(only),
            _ => format!("<{}>", shown(&targets.join("|"))),
        };
        return Some(format!(
            "⏸ awaiting human decision at {}{title} · session {named}\n  next: archmax decide {id} --to {to}{flags} [--comment \"why\"]",
            shown(&decision.state)
        ));
    }
    if let Some(input) = &outcome.pending_input {
        let trigger = delivery_trigger(program, &outcome.workflow, &input.state);
        let trigger = if trigger.starts_with('<') { shown(&trigger) } else { word(&trigger) };
        let due = input.resume_at.as_ref().map(|at| format!(" · due {}", shown(at))).unwrap_or_default();
        return Some(format!(
            "⏸ awaiting input at {}: {}{due} · session {named}\n  next: archmax deliver {id} --trigger {trigger}{flags} [--variables '{{…}}']",
            shown(&input.state),
            shown(&input.reason)
        ));
    }
    None
}

/// The trigger a delivery most likely carries: one declared on the parked state, else
/// any the workflow declares besides `manual`.
fn delivery_trigger(program: &Program, workflow: &str, state: &str) -> String {
    let Some((_, workflow)) = program.workflow(workflow) else {
        return "<id>".to_string();
    };
    let named = |here: bool| -> Vec<&str> {
        workflow
            .triggers
            .iter()
            .filter(|trigger| !here || program.str(workflow.state(trigger.entry).slug) == state)
            .map(|trigger| program.str(trigger.id))
            .filter(|id| *id != "manual")
            .collect()
    };
    let mut ids = named(true);
    if ids.is_empty() {
        ids = named(false);
    }
    match ids.as_slice() {
        [] => "<id>".to_string(),
        [only] => only.to_string(),
        many => format!("<{}>", many.join("|")),
    }
}

/// Prints an outcome: the reply on stdout; the park report, the usage footer and the
/// session on stderr (the verdict line came from the flow); `caller` is the session
/// that waits for this one, if any; `flags` go into the command a park report suggests.
/// Returns the exit code.
pub fn finish(outcome: &Outcome, runtime: &Runtime, caller: Option<&str>, flags: &str) -> ExitCode {
    if crate::reply::streamed() {
        // The reply went out as it arrived; only its line end is left.
        crate::reply::end_line();
    } else if !outcome.reply.is_empty() {
        println!("{}", outcome.reply);
    } else if outcome.disposition == Disposition::Decide && outcome.status.is_parked() {
        println!("parked again at {} ({})", outcome.state, outcome.status.as_str());
    }
    let leftover = runtime.model().leftover();
    if leftover > 0 {
        eprintln!("warning: the tape still holds {leftover} unused entr{}", if leftover == 1 { "y" } else { "ies" });
    }
    if let Some(report) = runtime.model().report() {
        eprintln!("{report}");
    }
    match park_report(outcome, runtime.program(), caller, flags) {
        Some(report) => note!("{report}"),
        None => note!("session {}", outcome.session_id),
    }
    if let Some(line) = footer(&outcome.turn_usage) {
        note!("{line}");
    }
    // Past one model or role, each one's share of the turn.
    if outcome.turn_spend.len() > 1 {
        for line in &outcome.turn_spend {
            note!("{}", spend_line(line));
        }
    }
    // A reply exists to answer the message: one that got no answer did not do its job,
    // though the session, still parked, keeps the message.
    // The warning the turn printed says why.
    if outcome.disposition == Disposition::Reply && outcome.unanswered.is_some() {
        eprintln!("error: the message got no answer (see the warning above); the session keeps it and is still parked");
        return ExitCode::from(1);
    }
    match outcome.status {
        Status::Completed | Status::AwaitingDecision | Status::AwaitingInput | Status::Running => ExitCode::SUCCESS,
        Status::Rejected | Status::Failed => ExitCode::from(1),
    }
}
