//! `archmax serve`: flags in, a running server out. Loading the programs, the model, the
//! store, the tokens and `archmax.toml`'s runner tables happens here, and so does
//! reloading them; everything the server does is `archmax-serve`'s.
//!
//! Reloads: on SIGHUP the server re-reads its `--artifact` files (or recompiles the
//! workspace) and its `--tokens` file; in development mode (no `--artifact`) it also
//! recompiles whenever a workflow, skill or `archmax.toml` changes. A program that
//! does not load is logged and the one being served stays; new sessions start on the
//! newest program, sessions already running keep the one they started on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use archmax_compiler::artifact;
use archmax_compiler::diagnostic::render;
use archmax_compiler::lower::BuildInputs;
use archmax_compiler::program::Program;
use archmax_compiler::{CompileError, compile};
use archmax_config::settings::RunnerSettings;
use archmax_serve::auth::Auth;
use archmax_serve::notify::Notifiers;
use archmax_serve::server::DEFAULT_BODY_LIMIT;
use archmax_serve::turns::TurnLimits;
use archmax_serve::webhooks::Connections;
use archmax_serve::{Server, ServerParts};
use archmax_vm::environment::{ClockAndPricing, process_env};
use archmax_vm::stdlib::PLATFORM_PROMPT;

use crate::output::failure;
use crate::session::{self, SessionOptions};

/// The variable holding the one all-scopes token.
const TOKEN_VARIABLE: &str = "ARCHMAX_SERVE_TOKEN";
/// A tokens file is a few lines per client; anything larger is not one.
const TOKENS_FILE_LIMIT: u64 = 1024 * 1024;

/// How often the scheduler looks for sessions whose `resumeAt` has come.
const WAKE_EVERY: Duration = Duration::from_secs(1);

/// How often development mode looks for changed workspace files.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The workspace files a compiled program is made from.
const WATCHED: [&str; 5] = ["workflows", "skills", ".platform", "archmax.toml", "AGENTS.md"];

/// How the server writes its log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line a person reads.
    Text,
    /// One JSON object per line, for a log pipeline.
    Json,
}

pub struct ServeArgs<'a> {
    pub artifacts: &'a [PathBuf],
    pub listen: &'a str,
    pub trust: &'a [String],
    pub tokens: Option<&'a Path>,
    pub max_turns_in_flight: usize,
    pub tape: Option<&'a Path>,
    /// `--store`: where sessions live (the filesystem store by default).
    pub store: Option<&'a str>,
    pub log_format: LogFormat,
    /// The accept loop's limits, with how long admitted turns get to finish after SIGTERM
    /// (`--grace`, `--max-connections`, `--max-connections-per-peer`).
    pub connections: archmax_serve::ConnectionLimits,
    /// `--trusted-proxy`: proxies whose `X-Forwarded-For` the inbox's sign-in throttle takes.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// The flags only a PostgreSQL store reads (refused with any other store).
    pub postgres: crate::store::PgFlags,
}

/// What a reload needs, owned, so it can run on a blocking thread.
#[derive(Clone)]
struct Sources {
    root: PathBuf,
    artifacts: Vec<PathBuf>,
    trust: Vec<String>,
    tokens: Option<PathBuf>,
}

/// Installs the log subscriber; `RUST_LOG` filters the log (default `info`, and `warn` for
/// the MCP library `rmcp`, whose INFO lines are protocol chatter such as a debug dump of
/// each server's capabilities at every connection). With tracing
/// on, the OpenTelemetry layer sees every INFO span whatever the log's filter, and JSON
/// lines carry their span's `trace_id` and `span_id`.
fn init_logs(format: LogFormat, tracing: Option<&archmax_telemetry::Tracing>) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let exported = tracing.map(|tracing| tracing.layer());
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false);
    let installed = match format {
        LogFormat::Text => tracing_subscriber::registry()
            .with(exported)
            .with(lines.with_ansi(crate::output::stderr_color()).with_filter(filter))
            .try_init(),
        LogFormat::Json => {
            let json = tracing_subscriber::fmt::format().json().flatten_event(true).with_target(false);
            let lines = lines.json().event_format(archmax_telemetry::logs::WithTraceIds(json));
            tracing_subscriber::registry().with(exported).with(lines.with_filter(filter)).try_init()
        }
    };
    if let Err(error) = installed {
        eprintln!("warning: could not install the log: {error}");
    }
}

/// A compile that failed, as one log message with its diagnostics.
fn compile_problem(error: &CompileError) -> String {
    match error {
        CompileError::Invalid(invalid) => {
            let shown = render::human(invalid.analysis.sources(), &invalid.report, false);
            format!("{}\n{shown}{}", error, render::verdict(&invalid.report))
        }
        other => other.to_string(),
    }
}

impl Sources {
    /// The programs to serve: each artifact, verified, or the workspace compiled.
    fn programs(&self) -> Result<Vec<Program>, String> {
        if self.artifacts.is_empty() {
            // Development mode compiles every workflow: each must validate.
            return compile(&self.root, &[], &BuildInputs { platform_prompt: PLATFORM_PROMPT })
                .map(|compiled| vec![compiled.program])
                .map_err(|error| compile_problem(&error));
        }
        let trusted = crate::keys::trusted_keys(&self.trust)?;
        self.artifacts
            .iter()
            .map(|path| {
                let bytes =
                    std::fs::read(path).map_err(|error| format!("could not read `{}`: {error}", path.display()))?;
                artifact::load(&bytes, &trusted).map(|loaded| loaded.program).map_err(|error| {
                    format!("`{}` is refused: {}", path.display(), crate::keys::artifact_problem(&error))
                })
            })
            .collect()
    }

    fn auth(&self) -> Result<Auth, String> {
        let text = match &self.tokens {
            // A token file every user may write would let any of them grant themselves
            // access: refused like every key file, as are links and non-regular files.
            Some(path) => Some(
                archmax_vm::secret_file::read_secret_text(path, "the tokens file", TOKENS_FILE_LIMIT)
                    .map_err(|error| error.to_string())?,
            ),
            None => None,
        };
        Auth::configure(process_env(TOKEN_VARIABLE).as_deref(), text.as_deref()).map_err(|error| error.to_string())
    }

    /// `archmax.toml`'s runner tables; every problem of them refuses the start.
    fn settings(&self) -> Result<RunnerSettings, String> {
        crate::tools::read_settings(&self.root)
    }

    /// A fingerprint of the files a compile reads: their paths, sizes and times.
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut stack: Vec<PathBuf> = WATCHED.iter().map(|name| self.root.join(name)).collect();
        while let Some(path) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            path.hash(&mut hasher);
            meta.len().hash(&mut hasher);
            meta.modified().ok().and_then(|time| time.duration_since(SystemTime::UNIX_EPOCH).ok()).hash(&mut hasher);
            if meta.is_dir()
                && let Ok(entries) = std::fs::read_dir(&path)
            {
                let mut children: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
                children.sort();
                stack.extend(children);
            }
        }
        hasher.finish()
    }
}

/// Loads every program of `sources` into `server`, logging what changed.
async fn reload(server: &Server, sources: &Sources, why: &str) {
    let reading = sources.clone();
    let programs = match tokio::task::spawn_blocking(move || reading.programs()).await {
        Ok(programs) => programs,
        Err(error) => Err(format!("the reload stopped: {error}")),
    };
    match programs {
        Ok(programs) => {
            let loaded = server.load_programs(programs);
            if loaded.is_empty() {
                tracing::info!(why, "reloaded; every workflow is unchanged");
            }
            for workflow in loaded {
                tracing::info!(
                    why,
                    workflow = workflow.workflow.as_str(),
                    spec_hash = workflow.spec_hash.as_str(),
                    previous = workflow.previous.as_deref().unwrap_or("none"),
                    disabled = workflow.disabled,
                    "new sessions start on a new program; running sessions keep theirs"
                );
            }
        }
        Err(problem) => tracing::error!(why, "the reload failed; the programs served stay: {problem}"),
    }
}

/// Reloads on every SIGHUP: the programs and the tokens file.
async fn reload_on_hangup(server: Arc<Server>, sources: Sources) {
    let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::warn!("SIGHUP cannot be caught here; reload with POST /v1/admin/artifacts");
        return;
    };
    while hangups.recv().await.is_some() {
        reload(&server, &sources, "SIGHUP").await;
        match sources.auth().and_then(|auth| server.auth.replace(auth)) {
            Ok(()) => tracing::info!(tokens = server.auth.token_count(), "tokens reloaded"),
            Err(problem) => tracing::error!("the tokens were not reloaded; the ones served stay: {problem}"),
        }
    }
}

/// Development mode: recompiles when a watched file changes.
async fn reload_on_change(server: Arc<Server>, sources: Sources) {
    let mut seen = sources.fingerprint();
    let mut stopping = server.stopping();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(WATCH_EVERY) => {}
            _ = stopping.changed() => return,
        }
        let watching = sources.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || watching.fingerprint()).await else { return };
        if now != seen {
            seen = now;
            reload(&server, &sources, "workspace changed").await;
        }
    }
}

/// `archmax serve`, with its spans exported when tracing is configured; the spans still
/// batched are sent once the server has stopped.
pub fn run(executor: &tokio::runtime::Runtime, root: &Path, args: ServeArgs<'_>) -> ExitCode {
    let tracing = match crate::telemetry::start() {
        Ok(tracing) => tracing,
        Err(problem) => return failure(problem),
    };
    init_logs(args.log_format, tracing.as_ref());
    let code = serve(executor, root, args);
    if let Some(tracing) = tracing {
        tracing.shutdown();
    }
    code
}

fn serve(executor: &tokio::runtime::Runtime, root: &Path, args: ServeArgs<'_>) -> ExitCode {
    let sources = Sources {
        root: root.to_path_buf(),
        artifacts: args.artifacts.to_vec(),
        trust: args.trust.to_vec(),
        tokens: args.tokens.map(Path::to_path_buf),
    };
    let programs = match programs_to_serve(&sources) {
        Ok(programs) => programs,
        Err(code) => return code,
    };
    let options = SessionOptions {
        root,
        root_given: false,
        artifact: None,
        trust: args.trust,
        tape: args.tape,
        record: None,
        events: None,
        upgrade: false,
        store: args.store,
        mocks: None,
        timeout: None,
        executor,
    };
    let model = match session::model(&options) {
        Ok(model) => model,
        Err(refusal) => return failure(refusal.0),
    };
    let auth = match sources.auth() {
        Ok(auth) => auth,
        Err(problem) => return failure(problem),
    };
    let settings = match sources.settings() {
        Ok(settings) => settings,
        Err(problem) => return failure(problem),
    };
    let (connections, notifiers) = match senders(&settings) {
        Ok(senders) => senders,
        Err(problem) => return failure(problem),
    };
    let oidc = match oidc_provider(&settings, auth.is_open()) {
        Ok(oidc) => oidc,
        Err(problem) => return failure(problem),
    };
    let address = match listen_address(args.listen, auth.is_open()) {
        Ok(address) => address,
        Err(problem) => return failure(problem),
    };
    let ClockAndPricing { clock, pricing } = match ClockAndPricing::for_settings(&settings, process_env) {
        Ok(from_env) => from_env,
        Err(message) => return failure(message),
    };
    let tools = match crate::tools::host_tools(root, &settings) {
        Ok(tools) => tools,
        Err(message) => return failure(message),
    };
    let unconfigured = unconfigured_connections(&programs, &connections);
    let shapes = archmax_serve::inbox::field_shape_problems(&programs, &settings.inbox);
    if !shapes.is_empty() {
        return failure(shapes.join("\nerror: "));
    }
    let open = auth.is_open();
    let server = match Server::new(ServerParts {
        programs,
        store: match crate::store::open_or_exit_with(executor, root, args.store, "serve", &args.postgres) {
            Ok(store) => store,
            Err(code) => return code,
        },
        model,
        clock,
        pricing,
        root: root.to_path_buf(),
        auth,
        limits: TurnLimits { in_flight: args.max_turns_in_flight.max(1), ..TurnLimits::default() },
        body_limit: DEFAULT_BODY_LIMIT,
        tools,
        context: settings.context,
        budgets: settings.limits.clone(),
    }) {
        Ok(server) => server
            .with_settings(settings, connections)
            .with_notifiers(notifiers)
            .with_trusted_proxies(args.trusted_proxies.clone()),
        Err(error) => return failure(error),
    };
    let server = match oidc {
        Some(provider) => server.with_oidc(provider),
        None => server,
    };
    let server = Arc::new(if args.artifacts.is_empty() {
        server
    } else {
        let trusted = match crate::keys::trusted_keys(args.trust) {
            Ok(trusted) => trusted,
            Err(problem) => return failure(problem),
        };
        server.with_loader(Arc::new(move |bytes: &[u8]| {
            artifact::load(bytes, &trusted)
                .map(|loaded| loaded.program)
                .map_err(|error| format!("the artifact is refused: {}", crate::keys::artifact_problem(&error)))
        }))
    });
    if let Err(problem) = executor.block_on(server.hub.check_follow()) {
        return failure(unheard(&problem));
    }
    executor.block_on(async {
        let listener = match tokio::net::TcpListener::bind(address).await {
            Ok(listener) => listener,
            Err(error) => return failure(format!("could not listen on {address}: {error}")),
        };
        let bound = listener.local_addr().unwrap_or(address);
        let mode = if args.artifacts.is_empty() { "development (compiled from the workspace)" } else { "artifacts" };
        tracing::info!(
            address = %format!("http://{bound}"),
            mode,
            workflows = server.workflows().join(", ").as_str(),
            "archmax serve is listening"
        );
        if open {
            tracing::warn!("no token configured ({TOKEN_VARIABLE} or --tokens): serving without auth, loopback only");
        }
        warn_of_settings(&server);
        warn_of_unconfigured(&unconfigured);
        warm_provider(&server);
        tokio::spawn(Arc::clone(&server).run_scheduler(WAKE_EVERY));
        tokio::spawn(reload_on_hangup(Arc::clone(&server), sources.clone()));
        if args.artifacts.is_empty() {
            tokio::spawn(reload_on_change(Arc::clone(&server), sources.clone()));
        }
        let stopped = archmax_serve::termination_signal();
        match archmax_serve::serve_with(listener, Arc::clone(&server), stopped, args.connections).await {
            Ok(true) => {
                tracing::info!("archmax serve stopped; every admitted turn ended");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                tracing::warn!(
                    grace_seconds = args.connections.grace.as_secs_f64(),
                    "archmax serve stopped; unfinished turns resume from their last committed step"
                );
                ExitCode::SUCCESS
            }
            Err(error) => failure(format!("the server failed: {error}")),
        }
    })
}

/// Why a runner on a shared store does not start when it cannot hear the other runners'
/// commits (their turns would never reach its event streams), and where to look.
fn unheard(problem: &str) -> String {
    format!(
        "cannot listen for the commits of the other runners on this store: {problem}; the listening connection goes \
         to --store-listen when it is given, else to --store (a pooler in transaction mode cannot listen: give \
         --store-listen the database server or a session-mode pool)"
    )
}

/// Warns of each trigger whose connection `archmax.toml` does not configure.
fn warn_of_unconfigured(unconfigured: &[(String, String)]) {
    for (trigger, connection) in unconfigured {
        tracing::warn!(
            trigger = trigger.as_str(),
            connection = connection.as_str(),
            "the trigger names a connection archmax.toml does not configure; its webhooks are refused"
        );
    }
}

/// Reads the OpenID Connect provider's discovery now, in the background, so a wrong
/// issuer shows in the log at start; a sign-in reads it again when this fails.
fn warm_provider(server: &Server) {
    if let Some(provider) = server.oidc.clone() {
        let now_ms = server.now_ms();
        tokio::spawn(async move {
            if let Err(problem) = provider.warm(now_ms).await {
                tracing::warn!("{problem}; sign-ins through it are tried again as people start them");
            }
        });
    }
}

/// The programs to serve at start: each artifact, verified, or (with none given) the
/// workspace compiled, its errors rendered as `build` renders them.
fn programs_to_serve(sources: &Sources) -> Result<Vec<Program>, ExitCode> {
    if sources.artifacts.is_empty() {
        match compile(&sources.root, &[], &BuildInputs { platform_prompt: PLATFORM_PROMPT }) {
            Ok(compiled) => Ok(vec![compiled.program]),
            Err(error) => Err(crate::build::refused(error)),
        }
    } else {
        sources.programs().map_err(failure)
    }
}

/// The webhook senders' and the notifiers' secrets, read from the environment.
fn senders(settings: &RunnerSettings) -> Result<(Connections, Notifiers), String> {
    Ok((Connections::configure(settings, process_env)?, Notifiers::configure(settings, process_env)?))
}

/// The inbox's OpenID Connect provider (`[inbox.oidc]`), its client secret read from the
/// environment; refused on a runner without tokens (whose inbox is not served).
fn oidc_provider(
    settings: &RunnerSettings,
    auth_open: bool,
) -> Result<Option<archmax_serve::inbox::oidc::Provider>, String> {
    let Some(oidc) = settings.inbox.oidc.as_ref() else { return Ok(None) };
    if auth_open {
        return Err(format!(
            "[inbox.oidc] is set, but no token is configured, so the runner serves local programs only and no inbox; set {TOKEN_VARIABLE} or --tokens"
        ));
    }
    archmax_serve::inbox::oidc::Provider::configure(oidc, settings.public_url.as_deref(), process_env).map(Some)
}

/// Warns at start of settings that work but likely not as meant.
fn warn_of_settings(server: &Server) {
    for schedule in server.settings.schedules.values() {
        if !server.workflows().contains(&schedule.workflow) {
            tracing::warn!(
                workflow = schedule.workflow.as_str(),
                "archmax.toml schedules a workflow this server does not serve; its sessions are not woken here"
            );
        }
    }
    for connection in server.connections.without_replay_guard() {
        tracing::warn!(
            connection,
            "the connection signs no timestamp, so a captured webhook can be sent again; set timestamp_header"
        );
    }
    if !server.notify.is_empty() && !server.notify.links() {
        tracing::warn!(
            "archmax.toml has [notify] tables but no [serve] public_url: notifications carry no link to the session's page (sessionUrl is null); set public_url"
        );
    }
}

/// The `--listen` address; one that is not loopback is refused while no token is
/// configured.
fn listen_address(listen: &str, auth_open: bool) -> Result<SocketAddr, String> {
    let address: SocketAddr =
        listen.parse().map_err(|_| format!("--listen `{listen}` is not an address such as 127.0.0.1:8787"))?;
    if auth_open && !address.ip().is_loopback() {
        return Err(format!(
            "no token is configured, so the server binds loopback only; `{address}` is not loopback (set {TOKEN_VARIABLE} or --tokens)"
        ));
    }
    Ok(address)
}

/// The served triggers (`workflow/trigger`) whose `connection:` no connection configures.
fn unconfigured_connections(programs: &[Program], connections: &Connections) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for program in programs {
        for workflow in &program.workflows {
            for trigger in &workflow.triggers {
                if let Some(connection) = trigger.connection.map(|sym| program.str(sym))
                    && !connections.contains(connection)
                {
                    let name = format!("{}/{}", program.str(workflow.slug), program.str(trigger.id));
                    found.push((name, connection.to_string()));
                }
            }
        }
    }
    found
}
