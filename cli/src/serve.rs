//! `archmax serve`: flags in, a running server out. Loading the programs, the model, the
//! store and the tokens happens here; everything the server does is `archmax-serve`'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use archmax_serve::auth::Auth;
use archmax_serve::server::DEFAULT_BODY_LIMIT;
use archmax_serve::turns::TurnLimits;
use archmax_serve::{Server, ServerParts};
use archmax_vm::host_env::{ClockAndPricing, process_env};

use crate::output::failure;
use crate::session::{self, SessionOptions};

/// How long admitted turns get to finish after SIGTERM.
const GRACE: Duration = Duration::from_secs(30);

/// The variable holding the one all-scopes token.
const TOKEN_VARIABLE: &str = "ARCHMAX_SERVE_TOKEN";

pub struct ServeArgs<'a> {
    pub artifacts: &'a [PathBuf],
    pub listen: &'a str,
    pub trust: &'a [String],
    pub tokens: Option<&'a Path>,
    pub max_turns_in_flight: usize,
    pub tape: Option<&'a Path>,
    /// `--store`: where sessions live (the filesystem store by default).
    pub store: Option<&'a str>,
}

pub fn run(root: &Path, args: ServeArgs<'_>) -> ExitCode {
    let options = |artifact| SessionOptions {
        root,
        artifact,
        trust: args.trust,
        tape: args.tape,
        events: None,
        upgrade: false,
        store: args.store,
        mocks: None,
        timeout: None,
    };
    let mut programs = Vec::new();
    let sources: Vec<Option<&Path>> = if args.artifacts.is_empty() {
        vec![None]
    } else {
        args.artifacts.iter().map(|path| Some(path.as_path())).collect()
    };
    for source in sources {
        // Development mode compiles every workflow: each must validate.
        match session::load(&options(source), &[]) {
            Ok(loaded) => programs.push(loaded.program),
            Err(Ok(refusal)) => return failure(refusal.0),
            Err(Err(error)) => return crate::build::refused(error),
        }
    }
    let model = match session::model(&options(None)) {
        Ok(model) => model,
        Err(refusal) => return failure(refusal.0),
    };
    let tokens_text = match args.tokens {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(error) => return failure(format!("could not read `{}`: {error}", path.display())),
        },
        None => None,
    };
    let env_token = process_env(TOKEN_VARIABLE);
    let auth = match Auth::configure(env_token.as_deref(), tokens_text.as_deref()) {
        Ok(auth) => auth,
        Err(error) => return failure(error),
    };
    let address: SocketAddr = match args.listen.parse() {
        Ok(address) => address,
        Err(_) => return failure(format!("--listen `{}` is not an address such as 127.0.0.1:8787", args.listen)),
    };
    if auth.is_open() && !address.ip().is_loopback() {
        return failure(format!(
            "no token is configured, so the server binds loopback only; `{address}` is not loopback (set {TOKEN_VARIABLE} or --tokens)"
        ));
    }
    let ClockAndPricing { clock, pricing } = match ClockAndPricing::from_env(process_env) {
        Ok(host) => host,
        Err(message) => return failure(message),
    };
    let open = auth.is_open();
    let server = match Server::new(ServerParts {
        programs,
        store: match crate::store::open_or_exit(root, args.store, "serve") {
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
    }) {
        Ok(server) => Arc::new(server),
        Err(error) => return failure(error),
    };
    let executor = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(executor) => executor,
        Err(error) => return failure(format!("could not start the runtime: {error}")),
    };
    executor.block_on(async {
        let listener = match tokio::net::TcpListener::bind(address).await {
            Ok(listener) => listener,
            Err(error) => return failure(format!("could not listen on {address}: {error}")),
        };
        let bound = listener.local_addr().unwrap_or(address);
        let mode = if args.artifacts.is_empty() { "development (compiled from the workspace)" } else { "artifacts" };
        eprintln!("archmax serve · http://{bound} · {mode} · workflows {}", server.workflows().join(", "));
        if open {
            eprintln!(
                "warning: no token configured ({TOKEN_VARIABLE} or --tokens): serving without auth, loopback only"
            );
        }
        match archmax_serve::serve(listener, Arc::clone(&server), archmax_serve::termination_signal(), GRACE).await {
            Ok(true) => {
                eprintln!("archmax serve · stopped; every admitted turn ended");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!(
                    "archmax serve · stopped after {}s; unfinished turns resume from their last committed step",
                    GRACE.as_secs()
                );
                ExitCode::SUCCESS
            }
            Err(error) => failure(format!("the server failed: {error}")),
        }
    })
}
