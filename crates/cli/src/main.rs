//! `archmax`: the command line. Parsing, rendering and exit codes only; every decision
//! is made by `archmax-compiler` and `archmax-vm` (and, for the language server, `archmax-ide`).
//!
//! Exit codes: 0 when the command did its job, 1 when it established a failure (an
//! invalid workflow, an unknown name), 2 for a usage error (one line on stderr) — except
//! under `archmax flow`, where a usage error is 1 and 2 means a walk that finished unclean.

mod build;
mod completions;
mod dotenv;
mod explain;
mod faults;
mod flow;
mod graph;
mod init;
mod inputs;
mod inspect;
mod keys;
mod lsp;
mod migrate;
mod output;
mod probe;
mod reference;
mod reply;
mod resume;
mod run;
mod schema_cmd;
mod serve;
mod session;
mod sessions;
mod store;
mod telemetry;
mod test;
mod tools;
mod trace;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "archmax", version, about = "Compile, check and run declarative agent workflows")]
struct Cli {
    /// The workspace root (holds `workflows/`); defaults to the current directory.
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Print only results and problems: no headers, state flows, progress or footers.
    #[arg(long, short = 'q', global = true)]
    quiet: bool,
    /// When to colour stderr.
    #[arg(long, global = true, value_enum, default_value_t = output::ColorChoice::Auto, value_name = "WHEN")]
    color: output::ColorChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check workflows against every rule of the spec.
    Validate {
        /// Workflows to validate (slugs); all of them when none is named.
        workflows: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Also start the configured MCP servers and report granted host tools no
        /// server provides, and servers that cannot be asked, as errors.
        #[arg(long)]
        tools: bool,
        /// Fail (exit 1) when there are warnings, as when there are errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// List the host tools the configured MCP servers provide, which states grant each,
    /// and the granted tools no server provides (starts the servers; exits 1 when a
    /// server could not be asked).
    Tools {
        /// Print the report as JSON (its shape is in the book's MCP guide).
        #[arg(long)]
        json: bool,
    },
    /// Validate, then compile the workspace into one verified artifact (`.amx`).
    Build {
        /// Workflows to build (with everything they call); all of them when none is named.
        workflows: Vec<String>,
        /// Where to write the artifact (default: `<root>/target/archmax/<name>.amx`).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// Sign the artifact with this private key file (made by `archmax keygen`).
        #[arg(long, value_name = "KEYFILE")]
        sign: Option<PathBuf>,
        /// Refuse to build (exit 1) when there are warnings, as when there are errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Make an Ed25519 key pair for signing artifacts; prints the public key.
    Keygen {
        /// Where to write the private key (created with mode 0600).
        #[arg(short = 'o', long = "output", value_name = "KEYFILE")]
        output: PathBuf,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Show every table of an artifact, and who signed it.
    Inspect {
        /// The artifact file.
        file: PathBuf,
        /// Trust artifacts signed by this public key (`ed25519:…`, or a file holding one); repeatable.
        #[arg(long = "trust", value_name = "KEY")]
        trust: Vec<String>,
        /// Show only this workflow.
        #[arg(long, value_name = "SLUG")]
        workflow: Option<String>,
        /// Show only this state (with `--workflow`).
        #[arg(long, value_name = "SLUG")]
        state: Option<String>,
        #[arg(long, value_enum, default_value_t = inspect::InspectFormat::Text)]
        format: inspect::InspectFormat,
    },
    /// Draw a workflow's states and transitions.
    Graph {
        /// The workflow to draw; every workflow when omitted.
        workflow: Option<String>,
        /// The workflow to draw, as a flag (the same as naming it).
        #[arg(long = "workflow", value_name = "SLUG", conflicts_with = "workflow")]
        only: Option<String>,
        /// Draw this flow document instead (groups as clusters).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["workflow", "only"])]
        flow: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = graph::GraphFormat::Mermaid)]
        format: graph::GraphFormat,
    },
    /// Run one turn of a workflow: start a session, or continue one.
    Run {
        /// The workflow to run.
        workflow: String,
        /// The message, the rest of the line.
        #[arg(required = true, num_args = 1..)]
        prompt: Vec<String>,
        /// The trigger the turn runs under (default `manual`).
        #[arg(long, value_name = "ID")]
        trigger: Option<String>,
        /// Variables to seed, locked: a JSON object.
        #[arg(long, value_name = "JSON")]
        variables: Option<String>,
        /// Continue this session (its id, or the start of exactly one session's id), or
        /// start one under this id when no session's id starts with it.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Start a new session under exactly the `--session` id, even where it is the
        /// start of another session's id; refused if a session has that id.
        #[arg(long = "new", requires = "session")]
        new_session: bool,
        /// Hand this file to the trigger's `file` input (copied into the session);
        /// `NAME=PATH` picks the input when there are several. Repeatable.
        #[arg(long = "file", value_name = "[NAME=]PATH")]
        files: Vec<String>,
        #[command(flatten)]
        common: SessionFlags,
    },
    /// List sessions (the most recently moved first), or show one; `rm` and `gc` remove
    /// them; `export` and `import` move one between stores.
    #[command(args_conflicts_with_subcommands = true)]
    Sessions {
        #[command(subcommand)]
        action: Option<SessionsAction>,
        /// A session id, or the start of exactly one.
        id: Option<String>,
        /// Only sessions of this workflow.
        #[arg(long, value_name = "SLUG")]
        workflow: Option<String>,
        /// Only sessions with this status: running, interrupted, completed, resumable,
        /// failed, rejected, awaiting_decision or awaiting_input.
        #[arg(long, value_name = "STATUS", conflicts_with = "id")]
        status: Option<String>,
        /// Only sessions parked for a `decision` or for `input`.
        #[arg(long, value_name = "CHANNEL", conflicts_with = "id")]
        parked: Option<String>,
        /// The session's conversation: messages, tool calls with their verdicts, runtime
        /// notes and parks.
        #[arg(long, requires = "id")]
        transcript: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Cut a damaged session back to its longest verified prefix, saying what is dropped.
        #[arg(long, requires = "id", conflicts_with_all = ["json", "workflow", "transcript"])]
        repair: bool,
        /// Reseal a session under the current seal key: one sealed by a build before
        /// keyed seals (adopting its files as they are), or by a previous key.
        #[arg(long, requires = "id", conflicts_with_all = ["json", "workflow", "transcript", "repair"])]
        reseal: bool,
        /// The session store: `fs:[DIR]`, `postgres://…` or `host=/socket dbname=…`
        /// (default: ARCHMAX_STORE, else `fs:`, the workspace's `sessions/`).
        #[arg(long, global = true, value_name = "URL")]
        store: Option<String>,
        /// A filesystem store in DIR (the same as `--store fs:DIR`), as `archmax flow run
        /// --session-dir` writes one.
        #[arg(long, global = true, value_name = "DIR", conflicts_with = "store", value_parser = store::session_folder)]
        session_dir: Option<PathBuf>,
    },
    /// Decide a session parked at a human state: route it along one transition.
    Decide {
        /// The parked session.
        session: String,
        /// The transition's target state.
        #[arg(long, value_name = "STATE")]
        to: String,
        /// Why: the target state reads it.
        #[arg(long, value_name = "TEXT")]
        comment: Option<String>,
        /// Who decides, recorded with the decision [default: $ARCHMAX_IDENTITY, else the
        /// OS user]. A name the state's `approvers` do not list is warned about, not refused.
        #[arg(long = "as", value_name = "NAME")]
        decider: Option<String>,
        /// Refuse unless the session runs this workflow.
        #[arg(long, value_name = "SLUG")]
        workflow: Option<String>,
        /// Raise the session's budget (`[limits]` of archmax.toml) before deciding: one
        /// more allowance of `max_cost_per_session` for the work after the decision.
        #[arg(long = "raise-budget")]
        raise: bool,
        #[command(flatten)]
        common: SessionFlags,
    },
    /// Write to a session parked at a human state; it answers and stays parked. With
    /// --raise-budget, a session stopped at its budget takes the message and goes on.
    Reply {
        /// The parked session.
        session: String,
        /// The message, the rest of the line.
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
        /// Refuse unless the session runs this workflow.
        #[arg(long, value_name = "SLUG")]
        workflow: Option<String>,
        /// Raise the session's budget (`[limits]` of archmax.toml). A session stopped at
        /// its budget takes the message and goes on; one parked for a decision gets one
        /// more allowance of `max_cost_per_session` ahead of time.
        #[arg(long = "raise-budget")]
        raise: bool,
        #[command(flatten)]
        common: SessionFlags,
    },
    /// Deliver a trigger to a session waiting for input; it continues where it waited.
    Deliver {
        /// The waiting session.
        session: String,
        /// The trigger being delivered: one the workflow declares.
        #[arg(long, value_name = "ID")]
        trigger: String,
        /// Deliver a trigger id the workflow does not declare.
        #[arg(long)]
        undeclared: bool,
        /// Variables the trigger carries, seeded locked: a JSON object.
        #[arg(long, value_name = "JSON")]
        variables: Option<String>,
        /// Hand this file to the trigger's `file` input (copied into the session);
        /// `NAME=PATH` picks the input when there are several. Repeatable.
        #[arg(long = "file", value_name = "[NAME=]PATH")]
        files: Vec<String>,
        /// Refuse unless the session runs this workflow.
        #[arg(long, value_name = "SLUG")]
        workflow: Option<String>,
        /// Raise the session's budget (`[limits]` of archmax.toml): lifts a stop at it
        /// and grants one more allowance of `max_cost_per_session`.
        #[arg(long = "raise-budget")]
        raise: bool,
        #[command(flatten)]
        common: SessionFlags,
    },
    /// Run a workflow's cases (`tests/**/*.test.yaml`).
    Test(test::TestArgs),
    /// Serve workflows over HTTP: compiled artifacts (`--artifact`), or the workspace.
    Serve {
        /// Run these compiled artifacts (verified; signed when keys are trusted); repeatable.
        /// Without any, the workspace at `--root` is compiled (development mode).
        #[arg(long = "artifact", value_name = "FILE")]
        artifacts: Vec<PathBuf>,
        /// The address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
        listen: String,
        /// Trust artifacts signed by this public key (`ed25519:…`, or a file holding one); repeatable.
        #[arg(long = "trust", value_name = "KEY")]
        trust: Vec<String>,
        /// Bearer tokens: `[[tokens]]` tables with `identity`, `scopes` and `sha256`.
        #[arg(long, value_name = "FILE")]
        tokens: Option<PathBuf>,
        /// How many turns run at once; more wait in a bounded queue.
        #[arg(long, value_name = "N", default_value_t = 64)]
        max_turns_in_flight: usize,
        /// Answer every session's model calls from this tape, each session from its start.
        #[arg(long, value_name = "FILE")]
        tape: Option<PathBuf>,
        /// The session store: `fs:[DIR]`, `postgres://…` or `host=/socket dbname=…`
        /// (default: ARCHMAX_STORE, else `fs:`, the workspace's `sessions/`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        /// The log's form: `text` for people, `json` (one object per line) for a pipeline;
        /// `RUST_LOG` filters it (default `info,rmcp=warn`).
        #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
        log_format: serve::LogFormat,
        /// How long admitted turns get to finish after SIGTERM, in seconds; a turn still
        /// running then is cut and resumes in the next process.
        #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = positive_seconds)]
        grace: f64,
        /// The most connections served at once; more wait in the listen backlog.
        #[arg(long, value_name = "N", default_value_t = archmax_serve::MAX_CONNECTIONS)]
        max_connections: usize,
        /// The most connections one client address (an IPv6 /64) holds at once; more are
        /// closed on accept. 0 turns the cap off (every client behind one proxy).
        #[arg(long, value_name = "N", default_value_t = archmax_serve::MAX_CONNECTIONS_PER_PEER)]
        max_connections_per_peer: usize,
        /// A reverse proxy (IP address) whose `X-Forwarded-For` names the client: inbox
        /// sign-in attempts through it are counted per forwarded client. Repeatable.
        #[arg(long, value_name = "ADDRESS")]
        trusted_proxy: Vec<std::net::IpAddr>,
        /// With a PostgreSQL store: the most connections this runner opens to it (default
        /// 16). Open sessions hold none, so this bounds statements at once, not sessions.
        /// More is not faster: a few per core of the database server keep it busy.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(2..))]
        store_connections: Option<u16>,
        /// With a PostgreSQL store: how long this runner's hold on a session it runs lasts
        /// unless renewed, in seconds (default: ARCHMAX_STORE_LEASE_TERM, else 10). A runner
        /// that dies mid-turn is taken over by another about this long after it stopped
        /// renewing (at least 0.3).
        #[arg(long, value_name = "SECONDS", value_parser = store::lease_seconds)]
        lease_term: Option<f64>,
        /// With a PostgreSQL store: how many of each session's newest events are kept for
        /// event streams (default 10000; older ones are pruned as turns end).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        events_kept: Option<u64>,
        /// With a PostgreSQL store behind a pooler in transaction mode (PgBouncer), which
        /// cannot LISTEN: where the connection that hears other runners' commits goes (the
        /// server itself, or a session-mode pool), in the `--store` forms.
        #[arg(long, value_name = "URL")]
        store_listen: Option<String>,
        /// With a PostgreSQL store: `--store` is a pooler in transaction mode (PgBouncer),
        /// so no statement is prepared for reuse.
        #[arg(long)]
        store_behind_pooler: bool,
    },
    /// Rewrite contract-2 workflows (hooks, removed keys, hook scripts, cases) to contract 3, in place.
    Migrate {
        /// Workflows to migrate (slugs); all of them when none is named.
        workflows: Vec<String>,
        /// Print what would change and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also print a unified diff of every file it changes.
        #[arg(long)]
        diff: bool,
    },
    /// Write a new workspace to start from: a workflow, its case and the case's tape.
    Init {
        /// Where to write it: a new or empty directory (default: `--root`, else `.`).
        dir: Option<PathBuf>,
        /// Which workspace to write.
        #[arg(long, value_enum, default_value = "minimal")]
        template: init::Template,
    },
    /// Print the JSON Schema of a workflow, a case, archmax.toml (for editors and linters) or an event line.
    Schema {
        /// Which file the schema describes.
        #[arg(value_enum, default_value = "workflow")]
        kind: schema_cmd::Kind,
        /// Write it to FILE instead of stdout.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print a shell completion script (e.g. `archmax completions bash > /etc/bash_completion.d/archmax`).
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: completions::Shell,
    },
    /// Plan or walk a flow document (`flow plan`, `flow run`).
    #[command(subcommand)]
    Flow(flow::FlowCommand),
    /// GET a URL once (plain HTTP); exit 0 on a 2xx answer, 1 naming the status or the
    /// failure otherwise. The container image's health check (it has no curl).
    Probe {
        /// The URL to ask, such as http://127.0.0.1:8787/healthz (default: ARCHMAX_PROBE_URL).
        url: Option<String>,
        /// Give up after this many seconds (connecting, and waiting for the answer).
        #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = positive_seconds)]
        timeout: f64,
    },
    /// Serve the language server protocol on stdin and stdout (diagnostics, hover, completion, definition, rename).
    Lsp,
    /// Print the long explanation of a diagnostic code or a kernel rule.
    Explain {
        /// A code such as AMX0301 (or its name), or a rule id such as tool.not-allowed.
        #[arg(required_unless_present = "list")]
        code: Option<String>,
        /// List every code and rule with its title.
        #[arg(long)]
        list: bool,
    },
    /// Write the book's generated reference (`docs/src/reference/`, and its entries in
    /// `docs/src/SUMMARY.md`) from this build; for maintainers.
    #[command(hide = true)]
    BookReference {
        /// Write nothing; fail, naming each file, when the checked-in pages differ.
        #[arg(long)]
        check: bool,
        /// The repository holding `docs/` and `golden/`.
        #[arg(long, value_name = "DIR", default_value = ".")]
        repository: PathBuf,
    },
}

/// What `archmax sessions` does besides listing and showing.
#[derive(Subcommand)]
enum SessionsAction {
    /// Write a session (state, pinned spec, files) as JSON lines to stdout.
    Export {
        /// The session to export.
        id: String,
    },
    /// Create the session an export on stdin holds.
    Import,
    /// Remove sessions for good, with their sub-workflow sessions (a running one is refused).
    Rm {
        /// Whole session ids (removing never goes by the start of an id).
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Remove the finished and resumable sessions that last moved longer ago than a duration.
    Gc {
        /// How long ago: a whole number and a unit (`s`, `m`, `h`, `d`, `w`), such as 30d.
        #[arg(long, value_name = "DURATION")]
        older_than: String,
        /// Remove parked sessions too (nobody decided or answered them in that time).
        #[arg(long)]
        include_parked: bool,
        /// Say what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Flags every session command takes.
#[derive(clap::Args)]
struct SessionFlags {
    /// Run this artifact instead of compiling the workspace.
    #[arg(long, value_name = "FILE")]
    artifact: Option<PathBuf>,
    /// Trust artifacts signed by this public key (`ed25519:…`, or a file holding one); repeatable.
    /// With any trusted key (here or in ARCHMAX_TRUSTED_KEYS), other artifacts are refused.
    #[arg(long = "trust", value_name = "KEY")]
    trust: Vec<String>,
    /// Replay scripted model turns from this tape instead of calling a model.
    #[arg(long, value_name = "FILE")]
    tape: Option<PathBuf>,
    /// Also write the live model's answers to this tape (added to it when it is one
    /// already), so the session can be replayed offline with --tape.
    #[arg(long, value_name = "FILE", conflicts_with = "tape")]
    record: Option<PathBuf>,
    /// Write every event as JSON lines to this file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Move a session pinned to another program of its workflow (the workflow changed
    /// since it started) to the current one; its current state must still exist.
    #[arg(long)]
    upgrade: bool,
    /// The session store: `fs:[DIR]`, `postgres://…` or `host=/socket dbname=…`
    /// (default: ARCHMAX_STORE, else `fs:`, the workspace's `sessions/`).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Bound each model call to this many seconds (over ARCHMAX_REQUEST_TIMEOUT_MS).
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds)]
    timeout: Option<f64>,
    /// Answer host tools from this file of mocks, in the cases' format
    /// (`- { tool, whenInput?, result }`), so a workflow runs before its tools exist.
    #[arg(long, value_name = "FILE")]
    mocks: Option<PathBuf>,
}

/// A positive, finite number of seconds.
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err(format!("`{text}` is not a number of seconds between 0 and 86400, such as 30 or 2.5")),
    }
}

impl SessionFlags {
    /// The options of a session command; `root_given` says whether `--root` was given
    /// (a follow-up command the CLI suggests then repeats it).
    fn options<'a>(
        &'a self,
        root: &'a std::path::Path,
        root_given: bool,
        executor: &'a tokio::runtime::Runtime,
    ) -> session::SessionOptions<'a> {
        session::SessionOptions {
            root,
            root_given,
            artifact: self.artifact.as_deref(),
            trust: &self.trust,
            tape: self.tape.as_deref(),
            record: self.record.as_deref(),
            events: self.events.as_deref(),
            upgrade: self.upgrade,
            store: self.store.as_deref(),
            mocks: self.mocks.as_deref(),
            timeout: self.timeout,
            executor,
        }
    }
}

/// How `validate` prints its findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Sarif,
    Github,
}

/// Rust ignores SIGPIPE, so a reader that stops early (`archmax inspect … | head`)
/// would make the next `println!` panic. Taking the default action back ends the
/// process quietly instead, as every Unix filter does.
fn end_quietly_on_closed_pipe() {
    // SAFETY: called first thing in `main`, before any thread exists; `signal` with
    // `SIG_DFL` only restores the kernel's default disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `serve` and `lsp` talk to peers that may go away at any moment (an HTTP client, an
/// event stream's reader, an editor): for them a closed peer must be a write error on
/// that one connection, never the end of the process, so they ignore SIGPIPE again.
fn survive_closed_peers(command: &Command) {
    if matches!(command, Command::Serve { .. } | Command::Lsp) {
        // SAFETY: called from `main` right after parsing the arguments, before any
        // thread exists; `signal` with `SIG_IGN` only sets the kernel's disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    }
}

/// The `.env` files of the current directory and the workspace root, under the real
/// environment (see [`dotenv`]).
fn load_dotenv(root: &std::path::Path) {
    let cwd = PathBuf::from(".env");
    let at_root = root.join(".env");
    let files: Vec<&std::path::Path> =
        if root == std::path::Path::new(".") { vec![&cwd] } else { vec![&cwd, &at_root] };
    let (values, warnings) = dotenv::read(&files);
    for warning in warnings {
        eprintln!("{warning}");
    }
    for (key, value) in values {
        if std::env::var_os(&key).is_none() {
            // SAFETY: called from `main` right after parsing the arguments, before any
            // thread exists (no runtime is built yet), so nothing reads the environment
            // while it changes.
            unsafe { std::env::set_var(&key, value) };
        }
    }
}

/// The process's one async runtime, built once the environment is final. `serve`
/// answers its clients on a pool of worker threads. Every other command drives its work
/// on the calling thread, so what it prints comes in one order, unless its sessions live
/// in PostgreSQL: that store runs its connections on the runtime's workers while a
/// session's synchronous file call waits, so it gets two. Commands get the runtime by
/// reference; no library builds one for them.
fn executor_for(command: &Command, root: &std::path::Path) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match command {
        Command::Serve { .. } => tokio::runtime::Builder::new_multi_thread(),
        _ if store_is_postgres(command, root) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2);
            builder
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    builder.enable_all().build()
}

/// Whether the command's session store (its `--store`, else `ARCHMAX_STORE`) is
/// PostgreSQL. A target that names no store is the command's own error to report.
fn store_is_postgres(command: &Command, root: &std::path::Path) -> bool {
    let flag = match command {
        Command::Run { common, .. }
        | Command::Decide { common, .. }
        | Command::Reply { common, .. }
        | Command::Deliver { common, .. } => common.store.as_deref(),
        Command::Sessions { store, .. } => store.as_deref(),
        Command::Flow(flow) => {
            return matches!(store::target(root, flow.store_flag().as_deref()), Ok(store::Target::Postgres(_)));
        }
        _ => return false,
    };
    matches!(store::target(root, flag), Ok(store::Target::Postgres(_)))
}

/// The process's TLS crypto for model endpoints is installed first: the binary's choice,
/// not the library's.
fn main() -> ExitCode {
    end_quietly_on_closed_pipe();
    archmax_vm::model::openai::install_tls_provider();
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return output::usage_error(error, &<Cli as clap::CommandFactory>::command()),
    };
    // `sessions --session-dir DIR` is `--store fs:DIR`: every action reads `store`.
    if let Command::Sessions { store, session_dir: Some(directory), .. } = &mut cli.command {
        *store = Some(format!("fs:{}", directory.display()));
    }
    survive_closed_peers(&cli.command);
    output::configure(output::Terminal { color: cli.color, quiet: cli.quiet });
    let root_flag = cli.root.clone();
    let root = cli.root.unwrap_or_else(|| PathBuf::from("."));
    load_dotenv(&root);
    let executor = &match executor_for(&cli.command, &root) {
        Ok(executor) => executor,
        Err(error) => return output::failure(format!("could not start the runtime: {error}")),
    };
    match cli.command {
        Command::Validate { workflows, format, tools, deny_warnings } => {
            validate::run(executor, &root, &workflows, format, tools, deny_warnings)
        }
        Command::Tools { json } => tools::run(executor, &root, json),
        Command::Serve {
            artifacts,
            listen,
            trust,
            tokens,
            max_turns_in_flight,
            tape,
            store,
            log_format,
            grace,
            max_connections,
            max_connections_per_peer,
            trusted_proxy,
            store_connections,
            lease_term,
            events_kept,
            store_listen,
            store_behind_pooler,
        } => serve::run(
            executor,
            &root,
            serve::ServeArgs {
                artifacts: &artifacts,
                listen: &listen,
                trust: &trust,
                tokens: tokens.as_deref(),
                max_turns_in_flight,
                tape: tape.as_deref(),
                store: store.as_deref(),
                log_format,
                connections: archmax_serve::ConnectionLimits {
                    grace: std::time::Duration::from_secs_f64(grace),
                    max_connections,
                    max_connections_per_peer,
                    ..archmax_serve::ConnectionLimits::default()
                },
                trusted_proxies: trusted_proxy,
                postgres: store::PgFlags {
                    connections: store_connections,
                    lease_term,
                    events_kept,
                    listen: store_listen,
                    behind_pooler: store_behind_pooler,
                },
            },
        ),
        Command::Probe { url, timeout } => probe::run(url.as_deref(), timeout),
        Command::Lsp => lsp::run(root_flag.and_then(|root| std::fs::canonicalize(root).ok())),
        Command::Explain { code, list } => explain::run(code.as_deref(), list),
        Command::Migrate { workflows, dry_run, diff } => migrate::run(&root, &workflows, dry_run, diff),
        Command::Init { dir, template } => init::run(&dir.unwrap_or(root), template),
        Command::Schema { kind, output } => schema_cmd::run(kind, output.as_deref()),
        Command::Completions { shell } => completions::run::<Cli>(shell),
        Command::BookReference { check, repository } => {
            reference::run(<Cli as clap::CommandFactory>::command(), &repository, check)
        }
        Command::Flow(command) => flow::run(executor, command),
        Command::Build { workflows, output, sign, deny_warnings } => {
            build::run(&root, &workflows, output.as_deref(), sign.as_deref(), deny_warnings)
        }
        Command::Keygen { output, force } => keys::keygen(&output, force),
        Command::Inspect { file, trust, workflow, state, format } => {
            inspect::run(&file, &trust, workflow.as_deref(), state.as_deref(), format)
        }
        Command::Graph { flow: Some(flow), format, .. } => graph::run_flow(&flow, format),
        Command::Graph { workflow, only, format, .. } => graph::run(&root, workflow.or(only).as_deref(), format),
        Command::Run { workflow, prompt, trigger, variables, session, new_session, files, common } => run::run(
            &common.options(&root, root_flag.is_some(), executor),
            run::RunArgs {
                workflow: &workflow,
                prompt: &prompt,
                trigger: trigger.as_deref(),
                variables: variables.as_deref(),
                session: session.as_deref(),
                new_session,
                files: &files,
            },
        ),
        Command::Sessions { action: Some(SessionsAction::Export { id }), store, .. } => {
            store::export(executor, &root, store.as_deref(), &id)
        }
        Command::Sessions { action: Some(SessionsAction::Import), store, .. } => {
            store::import(executor, &root, store.as_deref())
        }
        Command::Sessions { id: Some(id), repair: true, store, .. } => {
            sessions::repair(executor, &root, store.as_deref(), &id)
        }
        Command::Sessions { id: Some(id), reseal: true, store, .. } => {
            sessions::reseal(executor, &root, store.as_deref(), &id)
        }
        Command::Sessions { action: Some(SessionsAction::Rm { ids }), store, .. } => {
            sessions::remove(executor, &root, store.as_deref(), &ids)
        }
        Command::Sessions {
            action: Some(SessionsAction::Gc { older_than, include_parked, dry_run }), store, ..
        } => sessions::gc(executor, &root, store.as_deref(), &older_than, include_parked, dry_run),
        Command::Sessions { id, workflow, status, parked, transcript, json, store, .. } => {
            let query = sessions::Query {
                id: id.as_deref(),
                workflow: workflow.as_deref(),
                status: status.as_deref(),
                parked: parked.as_deref(),
                json,
                transcript,
            };
            sessions::run(executor, &root, store.as_deref(), &query)
        }
        Command::Test(args) => test::run(executor, &root, &args),
        command @ (Command::Decide { .. } | Command::Reply { .. } | Command::Deliver { .. }) => {
            resume_command(command, &root, root_flag.is_some(), executor)
        }
    }
}

/// `decide`, `reply` and `deliver`: a parked session resumed (`root_given` says whether
/// `--root` was given).
fn resume_command(
    command: Command,
    root: &std::path::Path,
    root_given: bool,
    executor: &tokio::runtime::Runtime,
) -> ExitCode {
    match command {
        Command::Decide { session, to, comment, decider, workflow, raise, common } => resume::decide(
            &common.options(root, root_given, executor),
            &session,
            resume::Decision { to: &to, comment: comment.as_deref(), decider: decider.as_deref() },
            (workflow.as_deref(), raise),
        ),
        Command::Reply { session, message, workflow, raise, common } => {
            resume::reply(&common.options(root, root_given, executor), &session, &message, (workflow.as_deref(), raise))
        }
        Command::Deliver { session, trigger, undeclared, variables, files, workflow, raise, common } => {
            resume::deliver(
                &common.options(root, root_given, executor),
                &session,
                (&trigger, undeclared),
                (variables.as_deref(), &files),
                (workflow.as_deref(), raise),
            )
        }
        _ => output::failure("internal error: only decide, reply and deliver resume a session".to_string()),
    }
}
