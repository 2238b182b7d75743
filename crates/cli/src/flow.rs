//! `archmax flow plan --flow FILE` and `archmax flow run --flow FILE --input TEXT …` (the
//! path alone, first, is a shorthand for `--flow`): flow documents.
//!
//! Parsing and rendering only: reading, planning and walking are `archmax-flow`'s. A
//! document that does not validate is rendered like `validate` renders a workspace
//! (`--format human|json|sarif|github` for `plan`), and exits 1. `run` exits with the
//! walk's status: 0 clean or awaiting the operator, 2 finished and not clean or
//! cancelled (SIGINT), 1 refused before it started or aborted on a loop error. A pause
//! prints the command line that continues the walk; a model is configured only when a
//! model step is left to run.
//! (A session's live rendering of its states on stderr is [`crate::trace`], not this.)

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Subcommand, ValueEnum};

use archmax_compiler::diagnostic::render::{self, Stream};
use archmax_config::settings::RunnerSettings;
use archmax_flow::events::EventNames;
use archmax_flow::gate::{APPROVER_TIMEOUT, Approver};
use archmax_flow::hooks::Hooks;
use archmax_flow::read::{self, Loaded};
use archmax_flow::record::Header;
use archmax_flow::step::{FlowBudget, Outcome, StepBudget, StepEnvironment};
use archmax_flow::walk::{OperatorVerdict, WalkOptions, new_run_id};
use archmax_flow::{FlowDocument, FlowEvent};
use archmax_vm::environment::{self, ClockAndPricing};
use archmax_vm::kernel::{ScopeOwner, WriteScope};
use archmax_vm::model::{ModelAdapter, ModelError, ModelFuture, ModelRequest};
use archmax_vm::session::SessionStore;
use archmax_vm::stdlib::vfs::{DiskVfs, Workspace};

use crate::Format;
use crate::output::{failure, quiet, stderr_color};

/// `archmax flow …`.
#[derive(Subcommand)]
pub enum FlowCommand {
    /// Validate a flow document and print what runs in what order (no endpoint).
    Plan {
        #[command(flatten)]
        flow: FlowFile,
        /// Override every group's `repeat.max` (the root's included).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_attempts: Option<u32>,
        /// Print the plan (or the refusal) as JSON (`--format json` for a refusal only).
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// How a refusal is printed (not with `--json`).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Walk a flow document: model steps, gated commands, operator pauses.
    Run(Box<RunFlags>),
}

/// The flow document: `--flow FILE`, or the same path as the first positional argument
/// (the shorthand). Exactly one of the two is given; clap refuses both or neither.
#[derive(Args)]
#[group(id = "document", required = true, multiple = false)]
pub struct FlowFile {
    /// The document (`.yaml`, `.yml` or `.json`).
    #[arg(long = "flow", value_name = "FILE")]
    named: Option<PathBuf>,
    /// The document, as a positional shorthand for `--flow`
    #[arg(value_name = "FLOW")]
    positional: Option<PathBuf>,
}

impl FlowFile {
    fn path(&self) -> &Path {
        self.named.as_deref().or(self.positional.as_deref()).unwrap_or(Path::new(""))
    }
}

/// `--event-names`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EventNamesFlag {
    Camel,
    Snake,
}

/// The verdict an operator records with `--resume`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OperatorWord {
    Passed,
    Failed,
}

#[derive(Args)]
pub struct RunFlags {
    #[command(flatten)]
    flow: FlowFile,
    /// The task, given to every step beside its own prompt (a resume reuses the recorded one).
    #[arg(long, value_name = "TEXT", required_unless_present = "resume")]
    input: Option<String>,
    /// The directory the steps work in (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
    /// Override every group's `repeat.max` (the root's included).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: Option<u32>,
    /// Print every event as one JSON object per line on stdout.
    #[arg(long)]
    json: bool,
    /// How `--json` names an event's kind and fields: `camel` (`event`, `stepKind`, as
    /// workflow events do), or `snake` (`kind`, `step_kind`: the earlier names, kept for
    /// one release).
    #[arg(long, value_enum, value_name = "NAMES", default_value_t = EventNamesFlag::Camel, requires = "json")]
    event_names: EventNamesFlag,
    /// Hooks: `{"version": 1, "hooks": [{"on": POINT, "command": [...]}]}`, POINT one of
    /// `transition`, `before-call`, `after-call`, `stop`.
    #[arg(long, value_name = "FILE")]
    hooks: Option<PathBuf>,
    /// A program asked to approve every `run` and every write (a JSON document on stdin;
    /// exit 0 yes, 2 no with a reason, anything else no). Without it a terminal is asked
    /// y/N on stderr; with neither, calls are not asked (the flags are the approval).
    #[arg(long, value_name = "PROGRAM")]
    approve: Option<String>,
    /// Where any step may write: `<glob>=<allowed|partial-only|denied>`, first match wins; repeatable.
    #[arg(long = "write-scope", value_name = "RULE")]
    write_scope: Vec<String>,
    /// A program `run` may start (command steps and model steps alike; by name or path); repeatable.
    #[arg(long = "allow-program", value_name = "NAME")]
    allow_program: Vec<String>,
    /// Replay scripted model turns from this tape instead of calling a model.
    #[arg(long, value_name = "FILE")]
    tape: Option<PathBuf>,
    /// Most model turns per step.
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// Most output tokens per step.
    #[arg(long, value_name = "N")]
    max_output_tokens: Option<u64>,
    /// Most output tokens per model turn.
    #[arg(long, value_name = "N")]
    max_output_tokens_per_turn: Option<u64>,
    /// Most the whole flow may cost, in microunits (`ARCHMAX_PRICE_*` prices the calls).
    #[arg(long, value_name = "N")]
    max_cost_microunits: Option<u64>,
    /// Most the whole flow may take, in milliseconds.
    #[arg(long, value_name = "N")]
    max_duration_ms: Option<u64>,
    /// The session store the attempts' sessions and the flow record are filed in:
    /// `fs:[DIR]`, `postgres://…` or `host=/socket dbname=…` (default: `ARCHMAX_STORE`,
    /// else the workspace's `sessions/` folder, where workflow sessions go).
    #[arg(long, value_name = "STORE", conflicts_with = "no_session")]
    store: Option<String>,
    /// A filesystem store in DIR (the same as `--store fs:DIR`).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["no_session", "store"], value_parser = crate::store::session_folder)]
    session_dir: Option<PathBuf>,
    /// Write no session and no record (a walk that cannot be resumed).
    #[arg(long)]
    no_session: bool,
    /// Run at most N steps of a layer at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    parallel: u32,
    /// Continue the walk with this flow-run id from its record.
    #[arg(long, value_name = "FLOW-RUN-ID", conflicts_with = "no_session")]
    resume: Option<String>,
    /// The verdict of the operator step the walk paused at (with `--resume`).
    #[arg(long, value_enum, requires = "resume")]
    operator: Option<OperatorWord>,
    /// The operator's note (with `--operator`).
    #[arg(long, value_name = "TEXT", requires = "operator")]
    note: Option<String>,
    /// The default model endpoint (over ARCHMAX_API_BASE_URL); ids the workspace's
    /// archmax.toml routes go to their providers.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model (over ARCHMAX_MODEL).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// The variable holding the API key (over ARCHMAX_API_KEY).
    #[arg(long, value_name = "NAME")]
    api_key_env: Option<String>,
}

impl FlowCommand {
    /// The session store the command names (`--store`, or `--session-dir` as `fs:DIR`),
    /// if any: what decides the runtime it gets.
    pub fn store_flag(&self) -> Option<String> {
        match self {
            FlowCommand::Run(flags) => flags.store_flag(),
            FlowCommand::Plan { .. } => None,
        }
    }
}

impl RunFlags {
    fn store_flag(&self) -> Option<String> {
        self.store.clone().or_else(|| self.session_dir.as_ref().map(|directory| format!("fs:{}", directory.display())))
    }
}

pub fn run(executor: &tokio::runtime::Runtime, command: FlowCommand) -> ExitCode {
    match command {
        FlowCommand::Plan { flow, max_attempts, json, format } => plan(flow.path(), max_attempts, json, format),
        FlowCommand::Run(flags) => walk(executor, &flags),
    }
}

/// Reads the document; a refusal is printed in `format` and is `Err(exit code)`.
pub fn load(flow: &Path, format: Format) -> Result<(Loaded, FlowDocument), ExitCode> {
    let loaded = read::load(flow, &flow.display().to_string());
    let report = loaded.report();
    match &loaded.document {
        Some(document) => {
            if !report.distinct().is_empty() && !quiet() {
                eprint!("{}", render::human(&loaded.sources, &report, stderr_color()));
            }
            let document = document.clone();
            Ok((loaded, document))
        }
        None => {
            let printout = render::validation(&loaded.sources, &report, format.into(), "", stderr_color());
            for (stream, text) in &printout.writes {
                match stream {
                    Stream::Stdout => print!("{text}"),
                    Stream::Stderr => eprint!("{text}"),
                }
            }
            Err(ExitCode::from(1))
        }
    }
}

fn plan(flow: &Path, max_attempts: Option<u32>, json: bool, format: Format) -> ExitCode {
    let format = if json { Format::Json } else { format };
    let (_, document) = match load(flow, format) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    if json {
        let plan = archmax_flow::plan::to_json(&document, max_attempts);
        println!("{}", serde_json::to_string_pretty(&plan).unwrap_or_default());
    } else {
        print!("{}", archmax_flow::plan::render(&document, max_attempts));
    }
    ExitCode::SUCCESS
}

/// Set by SIGINT: the walk stops after the step in flight.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn listen_for_interrupt() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t);
    }
}

/// The lookup the endpoint is configured from: the flags over the environment.
fn model_lookup(flags: &RunFlags) -> impl Fn(&str) -> Option<String> + '_ {
    move |name: &str| match name {
        "ARCHMAX_API_BASE_URL" if flags.base_url.is_some() => flags.base_url.clone(),
        "ARCHMAX_MODEL" if flags.model.is_some() => flags.model.clone(),
        "ARCHMAX_API_KEY" => match &flags.api_key_env {
            Some(variable) => environment::process_env(variable),
            None => environment::process_env(name),
        },
        _ => environment::process_env(name),
    }
}

fn standing_instruction(flow: &str, run_scope: Option<&WriteScope>) -> String {
    let mut text = format!(
        "You are one step of the flow `{flow}`. Work in the workspace with the file tools. When the step is done, \
         call `answer` once with `outcome` (`passed` or `failed`), a short `note`, and under `gives` the names \
         this section hands on, if it gives any."
    );
    if let Some(scope) = run_scope {
        text.push_str(&format!("\n\n{}", scope.describe(ScopeOwner::Run)));
    }
    text
}

/// `--hooks FILE` read, or no hooks.
fn read_hooks(path: Option<&Path>) -> Result<Hooks, String> {
    let Some(path) = path else { return Ok(Hooks::default()) };
    let mut hooks = std::fs::read_to_string(path)
        .map_err(|error| error.to_string())
        .and_then(|text| Hooks::parse(&text))
        .map_err(|problem| format!("--hooks `{}`: {problem}", path.display()))?;
    let file = std::path::absolute(path).map_err(|error| format!("--hooks `{}`: {error}", path.display()))?;
    hooks.place_programs(file.parent().unwrap_or(Path::new("/")));
    Ok(hooks)
}

/// The hooks and the approver the walk asks, each program found before anything runs.
fn asked_programs(flags: &RunFlags) -> Result<(Hooks, Approver), String> {
    let hooks = read_hooks(flags.hooks.as_deref())?;
    let approver = approver(flags.approve.as_deref(), std::io::IsTerminal::is_terminal(&std::io::stdin()))?;
    programs_found(&hooks, &approver)?;
    Ok((hooks, approver))
}

/// Every program the hooks file and `--approve` name can be started: a program written
/// as a path is a file there, a bare name is found on `PATH`. One that cannot refuses
/// the walk before it starts, naming it; otherwise every call it was to judge would be
/// refused later, one by one (the gate fails closed on a program that vanished).
fn programs_found(hooks: &Hooks, approver: &Approver) -> Result<(), String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = |program: &str| {
        if program.contains('/') {
            Path::new(program).is_file()
        } else {
            std::env::split_paths(&path).any(|folder| folder.join(program).is_file())
        }
    };
    let missing = |program: &str| {
        if program.contains('/') {
            format!("`{program}` is not a file")
        } else {
            format!("`{program}` is not found on PATH")
        }
    };
    if let Approver::Program { argv, .. } = approver
        && let Some(program) = argv.first().filter(|program| !found(program))
    {
        return Err(format!(
            "--approve: {}; name a program that exists (a relative path is taken from the current directory)",
            missing(program)
        ));
    }
    let points = [
        ("transition", &hooks.transition),
        ("before-call", &hooks.before_call),
        ("after-call", &hooks.after_call),
        ("stop", &hooks.stop),
    ];
    for (point, list) in points {
        for hook in list.iter() {
            if let Some(program) = hook.argv.first().filter(|program| !found(program)) {
                return Err(format!(
                    "--hooks: the `{point}` hook's program {}; a relative program is found beside the hooks file",
                    missing(program)
                ));
            }
        }
    }
    Ok(())
}

/// Who approves the calls that act: `--approve PROGRAM`, else the terminal when stdin is
/// one, else nobody (the run's flags are the approval).
fn approver(program: Option<&str>, terminal: bool) -> Result<Approver, String> {
    match program {
        Some("") => Err("--approve names no program; give the program to ask (an argv of one word, no shell)".into()),
        Some(program) => {
            // The approver runs in the workspace; `./approve` means the operator's, from
            // where the command was typed, never a file a step wrote there.
            let here = std::env::current_dir()
                .map_err(|error| format!("--approve `{program}`: the current directory cannot be read: {error}"))?;
            let argv = vec![archmax_flow::hooks::placed(program, &here)];
            Ok(Approver::Program { argv, timeout: APPROVER_TIMEOUT })
        }
        None if terminal => Ok(Approver::Terminal),
        None => Ok(Approver::Unattended),
    }
}

/// The model the steps call: the tape, else the endpoint the flags, the environment and
/// the workspace's `archmax.toml` configure, or why there is none.
fn configure_model(flags: &RunFlags, settings: &RunnerSettings) -> Result<Arc<dyn ModelAdapter>, String> {
    match &flags.tape {
        Some(tape) => environment::tape_from_file(tape, &tape.display().to_string()).map_err(|error| error.to_string()),
        None => environment::endpoint_for(settings, model_lookup(flags), None).map_err(|error| error.to_string()),
    }
}

/// The model of a walk that should not need one: a call says why there is none.
struct Unconfigured(String);

impl ModelAdapter for Unconfigured {
    fn call<'a>(&'a self, _: ModelRequest<'a>) -> ModelFuture<'a> {
        let problem = self.0.clone();
        Box::pin(async move { Err(ModelError::Configuration(problem)) })
    }
}

/// Moves the walks an earlier build left in the workspace's old folder into the store,
/// once ([`archmax_flow::legacy`]), saying so on stderr.
fn import_old_layout(
    executor: &tokio::runtime::Runtime,
    store: Option<&Arc<dyn SessionStore>>,
    workspace_root: &Path,
    shown: &str,
    now_ms: u64,
) -> Result<(), String> {
    let Some(store) = store else { return Ok(()) };
    let imported = executor
        .block_on(archmax_flow::legacy::import(workspace_root, store.clone(), now_ms))
        .map_err(|error| error.to_string())?;
    if let Some(imported) = imported
        && !quiet()
    {
        eprintln!(
            "imported {} walk record(s) and {} section session(s) from `{}` into {shown}; the folder is now `{}`",
            imported.records,
            imported.sessions,
            archmax_flow::legacy::LEGACY_DIR,
            imported.renamed_to.display()
        );
    }
    Ok(())
}

/// The walk's flow-run id: a new one, or the recorded walk `--resume` names by its id
/// or by the start of exactly one id.
fn run_id(
    executor: &tokio::runtime::Runtime,
    resume: Option<&str>,
    store: Option<(&dyn SessionStore, &str)>,
) -> Result<String, String> {
    match (resume, store) {
        (None, _) => new_run_id().map_err(|error| error.to_string()),
        (Some(id), _) if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => {
            Err(format!("`{id}` is not a flow-run id"))
        }
        (Some(id), Some((store, shown))) => {
            executor.block_on(archmax_flow::record::find_run(store, id, shown)).map_err(|error| error.to_string())
        }
        (Some(id), None) => Ok(id.to_string()),
    }
}

/// The store a walk files in (none under `--no-session`), how a refusal names it, and
/// the folder inside the workspace it keeps, which no step may write.
struct WalkStore {
    store: Option<Arc<dyn SessionStore>>,
    shown: String,
    reserved: Option<String>,
}

fn open_store(
    executor: &tokio::runtime::Runtime,
    flags: &RunFlags,
    workspace_root: &Path,
) -> Result<WalkStore, ExitCode> {
    if flags.no_session {
        return Ok(WalkStore { store: None, shown: String::new(), reserved: None });
    }
    let flag = flags.store_flag();
    let target = crate::store::target(workspace_root, flag.as_deref())
        .map_err(|message| crate::output::usage("flow run", &message))?;
    let (shown, reserved) = match &target {
        crate::store::Target::Fs(directory) => {
            let inside = std::fs::create_dir_all(directory)
                .and_then(|()| std::fs::canonicalize(directory))
                .ok()
                .and_then(|directory| {
                    directory.strip_prefix(workspace_root).ok().map(|inside| inside.to_string_lossy().into_owned())
                })
                .filter(|inside| !inside.is_empty());
            (format!("the session store `{}`", directory.display()), inside)
        }
        crate::store::Target::Postgres(connection) => {
            (format!("the session store `{}`", crate::store::redacted(connection)), None)
        }
    };
    let store = crate::store::open(executor, workspace_root, &target).map_err(failure)?;
    Ok(WalkStore { store: Some(store), shown, reserved })
}

/// The command line that continues this walk from a pause: this one (every flag the
/// rest of the walk needs: the document, the workspace, the session directory, the
/// tape or endpoint, programs, scopes, hooks, bounds) without `--input` (the record
/// keeps it) or an earlier `--resume`, `--operator` or `--note`, and with
/// `--resume RUN --operator passed`.
/// Every word is quoted for a POSIX shell where it needs to be.
fn resume_command(run: &str) -> String {
    let arguments: Vec<String> = std::env::args_os().skip(1).map(|word| word.to_string_lossy().into_owned()).collect();
    let mut words = vec!["archmax".to_string()];
    let mut index = 0;
    while index < arguments.len() {
        let word = &arguments[index];
        let flag = word.split('=').next().unwrap_or_default();
        index += 1;
        if ["--input", "--resume", "--operator", "--note"].contains(&flag) {
            index += usize::from(!word.contains('='));
        } else {
            words.push(word.clone());
        }
    }
    words.extend(["--resume".to_string(), run.to_string(), "--operator".to_string(), "passed".to_string()]);
    archmax_program::shell::line(&words)
}

/// Every variable holding a model key or a runner secret: kept out of the programs a walk runs (commands,
/// `run`, hooks, the approver).
fn credential_variables(flags: &RunFlags, settings: &RunnerSettings) -> Vec<String> {
    // The model keys, and the runner's own secrets: the seal key (which signs the
    // session store's records), the serve token and the store's address (which may
    // carry a database password).
    let mut variables: Vec<String> =
        ["ARCHMAX_API_KEY", "ARCHMAX_SEAL_KEY", "ARCHMAX_SEAL_KEY_FILE", "ARCHMAX_SERVE_TOKEN", "ARCHMAX_STORE"]
            .map(str::to_string)
            .to_vec();
    variables.extend(flags.api_key_env.clone());
    variables.extend(settings.providers.values().filter_map(|provider| provider.api_key_env.clone()));
    variables
}

fn walk(executor: &tokio::runtime::Runtime, flags: &RunFlags) -> ExitCode {
    let (loaded, document) = match load(flags.flow.path(), Format::Human) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let run_scope = match WriteScope::parse_all(&flags.write_scope) {
        Ok(scope) => (!scope.rules.is_empty()).then_some(scope),
        Err(error) => return failure(format!("--write-scope: the rule {error}")),
    };
    let (hooks, approver) = match asked_programs(flags) {
        Ok(asked) => asked,
        Err(problem) => return failure(problem),
    };
    let workspace_root = match std::fs::canonicalize(&flags.workspace) {
        Ok(root) if root.is_dir() => root,
        _ => return failure(format!("--workspace `{}` is not a directory", flags.workspace.display())),
    };
    // The workspace's `archmax.toml` routes model ids to providers and prices them, as it
    // does for workflow sessions; without one the environment's endpoint serves every id.
    // A taped walk needs none of it.
    let settings = match &flags.tape {
        Some(_) => Default::default(),
        None => match crate::tools::read_settings(&workspace_root) {
            Ok(settings) => settings,
            Err(problem) => return failure(problem),
        },
    };
    // A model that cannot be configured refuses the walk only when a model step is left
    // to run: a walk of commands, or a resume past its last model step, needs none.
    let model = configure_model(flags, &settings);
    if let Err(problem) = &model
        && flags.resume.is_none()
        && !document.model_step_paths().is_empty()
    {
        return failure(problem);
    }
    let from_env = match ClockAndPricing::for_settings(&settings, environment::process_env) {
        Ok(from_env) => from_env,
        Err(error) => return failure(error),
    };
    let WalkStore { store, shown: store_shown, reserved } = match open_store(executor, flags, &workspace_root) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    if let Err(problem) =
        import_old_layout(executor, store.as_ref(), &workspace_root, &store_shown, from_env.clock.now_ms())
    {
        return failure(problem);
    }
    let run =
        match run_id(executor, flags.resume.as_deref(), store.as_deref().map(|store| (store, store_shown.as_str()))) {
            Ok(run) => run,
            Err(problem) => return failure(problem),
        };
    let digest = {
        use sha2::Digest;
        archmax_compiler::lower::hash::hex(&sha2::Sha256::digest(loaded.text.as_bytes()))
    };
    let header = Header {
        flow: document.id.clone(),
        run: run.clone(),
        digest,
        input: flags.input.clone().unwrap_or_default(),
        max_attempts: flags.max_attempts,
    };
    let continuing = flags.resume.is_some().then_some(archmax_flow::record::Continuing {
        input: flags.input.as_deref(),
        operator: flags.operator.is_some(),
    });
    let opening = archmax_flow::record::open(store.clone(), &header, continuing, from_env.clock.now_ms());
    let (record, recorded) = match executor.block_on(opening) {
        Ok(opened) => opened,
        Err(problem) => return failure(problem),
    };
    let model = match model {
        Ok(model) => model,
        Err(problem) if recorded.model_steps_left(&document) => return failure(problem),
        Err(problem) => Arc::new(Unconfigured(problem)),
    };
    // A resumed walk keeps the input it started with.
    let input = recorded.header.as_ref().map_or(header.input.clone(), |found| found.input.clone());
    let credential_variables = credential_variables(flags, &settings);
    let workspace = Workspace { session: Arc::new(DiskVfs::new(&workspace_root)), mounts: Vec::new() };
    let model_name = flags.model.clone().or_else(|| environment::configured_model(environment::process_env));
    let system = standing_instruction(&document.id, run_scope.as_ref());
    let environment = StepEnvironment {
        flow: &document.id,
        run: &run,
        model: model.as_ref(),
        model_name: model_name.as_deref(),
        pricing: &from_env.pricing,
        clock: from_env.clock.as_ref(),
        workspace: &workspace,
        workspace_root: &workspace_root,
        reserved: reserved.as_deref(),
        run_scope: run_scope.as_ref(),
        budget: StepBudget {
            max_turns: flags.max_turns,
            max_output_tokens: flags.max_output_tokens,
            max_output_tokens_per_turn: flags.max_output_tokens_per_turn,
        },
        flow_budget: FlowBudget {
            max_cost_microunits: flags.max_cost_microunits,
            max_duration_ms: flags.max_duration_ms,
        },
        allow_program: &flags.allow_program,
        approver: &approver,
        hooks: &hooks,
        credential_variables: &credential_variables,
        system: &system,
    };
    let operator = flags.operator.map(|word| OperatorVerdict {
        outcome: match word {
            OperatorWord::Passed => Outcome::Passed,
            OperatorWord::Failed => Outcome::Failed,
        },
        note: flags.note.clone(),
    });
    listen_for_interrupt();
    let resume_command = resume_command(&run);
    let options = WalkOptions {
        input: &input,
        max_attempts: flags.max_attempts,
        hooks: &hooks,
        parallel: flags.parallel as usize,
        store: store.as_deref(),
        recorded,
        operator,
        cancel: &INTERRUPTED,
        resume_command: store.is_some().then_some(resume_command.as_str()),
    };
    let json = flags.json;
    let names = match flags.event_names {
        EventNamesFlag::Camel => EventNames::Camel,
        EventNamesFlag::Snake => EventNames::Snake,
    };
    let mut sink = |event: &FlowEvent| {
        if json {
            println!("{}", event.json_named(names));
        } else if !quiet()
            && let Some(line) = event.line()
        {
            eprintln!("{}", crate::output::terminal_safe(&line));
        }
    };
    match executor.block_on(archmax_flow::walk(&environment, &document, options, record, &mut sink)) {
        Ok(end) => ExitCode::from(end.exit_status()),
        Err(error) => failure(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approver_is_the_program_else_the_terminal_else_nobody() {
        let program = Approver::Program { argv: vec!["approve".to_string()], timeout: APPROVER_TIMEOUT };
        assert_eq!(approver(Some("approve"), true), Ok(program.clone()), "a program beats the terminal");
        assert_eq!(approver(Some("approve"), false), Ok(program));
        assert_eq!(approver(None, true), Ok(Approver::Terminal));
        assert_eq!(approver(None, false), Ok(Approver::Unattended));
        assert!(approver(Some(""), true).is_err_and(|problem| problem.contains("--approve")));
    }

    #[test]
    fn a_relative_approver_is_found_where_the_operator_typed_it_not_in_the_workspace() {
        // The approver runs in the workspace; `./approve` must not mean the workspace's.
        let here = std::env::current_dir().unwrap();
        let Ok(Approver::Program { argv, .. }) = approver(Some("./approve"), false) else { panic!() };
        assert_eq!(argv, [here.join("approve").display().to_string()]);
        let Ok(Approver::Program { argv, .. }) = approver(Some("approve"), false) else { panic!() };
        assert_eq!(argv, ["approve"], "a bare name is looked up on PATH");
    }

    #[test]
    fn a_relative_hook_program_is_found_beside_the_hooks_file_not_in_the_workspace() {
        let dir = std::env::temp_dir().join(format!("archmax-flow-hooks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hooks.json");
        let text = r#"{"version": 1, "hooks": [{"on": "before-call", "command": ["./policy.sh", "./arg"]},
            {"on": "stop", "command": ["policy"]}, {"on": "after-call", "command": ["/opt/p"]}]}"#;
        std::fs::write(&file, text).unwrap();
        let hooks = read_hooks(Some(&file));
        let _ = std::fs::remove_dir_all(&dir);
        let hooks = hooks.unwrap();
        let before = dir.join("policy.sh").display().to_string();
        assert_eq!(hooks.before_call[0].argv, [before.as_str(), "./arg"], "only the program is placed");
        assert_eq!(hooks.stop[0].argv, ["policy"]);
        assert_eq!(hooks.after_call[0].argv, ["/opt/p"]);
    }

    #[test]
    fn the_runner_s_own_secrets_never_reach_a_program_the_walk_runs() {
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            flags: RunFlags,
        }
        let line = <Line as clap::Parser>::try_parse_from(["flow", "f.yaml", "--input", "x", "--api-key-env", "MINE"]);
        let variables = credential_variables(&line.unwrap().flags, &RunnerSettings::default());
        for secret in ["ARCHMAX_API_KEY", "MINE", "ARCHMAX_SEAL_KEY", "ARCHMAX_SEAL_KEY_FILE", "ARCHMAX_SERVE_TOKEN"] {
            assert!(variables.iter().any(|variable| variable == secret), "{secret}: {variables:?}");
        }
    }
}
