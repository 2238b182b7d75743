//! Host tools over the Model Context Protocol: [`McpHost`] is the VM's
//! [`ToolHost`] backed by the servers `archmax.toml` configures (`[mcp_servers.<name>]`),
//! over stdio children or streamable HTTP, with the official Rust SDK (`rmcp`).
//!
//! ```no_run
//! # async fn run(servers: Vec<archmax_config::settings::McpServer>) {
//! use std::sync::Arc;
//! use archmax_mcp::{HostOptions, McpHost};
//! use archmax_vm::tool_host::ToolHost;
//!
//! let host = Arc::new(McpHost::new(servers, HostOptions::new("/path/to/workspace")));
//! let catalog = host.catalog().await; // starts the servers, lists their tools
//! # host.shutdown().await;
//! # }
//! ```
//!
//! The one thing to know: the host only answers; the kernel has decided every call
//! before it arrives. What the host owes the kernel is an honest catalog: each tool's
//! full name, its schema, and which of its arguments name workspace paths.
//!
//! # Names
//!
//! A server's tool `lookup` is offered as `<collection>__lookup` (the collection is the
//! table's `collection`, else its name). A tool whose full name is not a valid model
//! function name (`^[A-Za-z0-9_-]{1,64}$`) is skipped with a catalog problem. When
//! several servers serve one collection and more than one has a tool of the name, the
//! tools entry's `connection:` (a server's table name) picks the server; without it the
//! call fails saying so. The catalog lists such a tool once, as the first server's.
//!
//! # Path arguments
//!
//! The kernel governs a host tool's path arguments as it does a file tool's (`paths:`
//! guards, zones). Which arguments they are, in order (see [`paths`]):
//! 1. a property of the tool's input schema marked `"x-archmax-path"` with one of
//!    `"read"`, `"list"`, `"search"`, `"write"`, `"remove"`, `"execute"`:
//!    ```json
//!    {"type": "object", "properties": {"destination": {"type": "string", "x-archmax-path": "write"}}}
//!    ```
//! 2. for arguments the schema does not mark, the server table's `path_arguments`
//!    (`[mcp_servers.x.path_arguments] export = { destination = "write" }`);
//! 3. when neither names any, a property named `file_path`, read.
//!
//! The marks are removed from the schema the model is shown. The runtime hands a server
//! each declared path as an absolute path, resolved beneath its mount or session folder
//! without following any link (`zone.link` refuses the call otherwise).
//!
//! # Runtime
//!
//! Servers start lazily, on the first [`ToolHost::catalog`] or [`ToolHost::call`] that
//! needs them (spawn or connect, `initialize`, every page of `tools/list`, all within
//! `startup_timeout_ms`), and are shared by every session of the process. A stdio child
//! starts from an empty environment ([`launch`]) and is killed when the host drops it;
//! its stderr is kept as a 4 KiB tail, shown only redacted. A server that stops (a
//! crash, a closed connection) fails the calls in flight with its stderr tail and is
//! restarted on the next need, after a backoff of 250 ms doubling to 30 s; a server
//! that will not start is warned about once and listed in [`Catalog::problems`] while it
//! stays down. Each call runs under `tool_timeout_ms`; a call that times out or whose
//! future is dropped is cancelled with `notifications/cancelled`. A stdio server's message
//! (one line) over 16 MiB ends its connection, and the call fails saying the answer was
//! too large ([`launch::LineCapped`]) rather than waiting out the timeout. The tool list is
//! cached until the server sends `notifications/tools/list_changed`.
//!
//! # Secrets
//!
//! Every value of the variables a server's `env_vars` names, its bearer token, and every
//! value of its `env` table of 8 bytes or more (shorter ones are configuration written in
//! `archmax.toml`, such as `eu`, and hiding them would mangle messages) is replaced by
//! `[redacted]` in every error, problem, log line and text answer the host produces. A missing `env_vars` or `bearer_token_env_var` variable is
//! a start failure that names the variable, never a value.

pub mod answer;
pub mod launch;
pub mod names;
pub mod paths;
pub mod redact;
mod supervisor;
mod toolset;
mod traced_http;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use archmax_config::settings::McpServer;
use archmax_vm::tool_host::{Catalog, HostAnswer, HostCall, HostError, HostFuture, ToolHost};

use crate::supervisor::{Supervisor, Unavailable};

/// The longest server error message passed on to the model, in characters.
const MAX_ERROR_CHARS: usize = 2000;

/// Reads one variable of the runner's environment.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where and with what the host starts servers.
#[derive(Clone)]
pub struct HostOptions {
    /// The workspace root: a stdio child's working directory, and what a relative `cwd`
    /// or a command path with a `/` is resolved against.
    pub root: PathBuf,
    /// Searched for a bare `command` before `PATH` (the CLI passes the directory of the
    /// archmax executable, where the workspace's own servers are built).
    pub command_dirs: Vec<PathBuf>,
    /// The runner's environment, which `env_vars`, `bearer_token_env_var` and the child's
    /// base variables are read from.
    pub env: EnvLookup,
}

impl HostOptions {
    /// Options over the process environment, with no command directories.
    pub fn new(root: impl Into<PathBuf>) -> HostOptions {
        HostOptions {
            root: root.into(),
            command_dirs: Vec::new(),
            env: Arc::new(|name: &str| std::env::var(name).ok()),
        }
    }

    /// The same options reading a fixed environment instead of the process's.
    pub fn with_env_map(mut self, env: BTreeMap<String, String>) -> HostOptions {
        self.env = Arc::new(move |name: &str| env.get(name).cloned());
        self
    }

    pub fn with_command_dirs(mut self, dirs: Vec<PathBuf>) -> HostOptions {
        self.command_dirs = dirs;
        self
    }
}

/// The MCP tool host. Cheap to share (`Arc` it); every method takes `&self`.
pub struct McpHost {
    servers: Vec<Supervisor>,
    /// Bumped on every change a catalog would show (a start, a stop, a new tool list).
    generation: Arc<AtomicU64>,
    cached: Mutex<Option<CachedCatalog>>,
}

/// The last catalog built, reused while nothing changed and every server answered.
struct CachedCatalog {
    generation: u64,
    /// No server was unavailable (an unavailable one is asked again next time).
    complete: bool,
    catalog: Arc<Catalog>,
}

impl McpHost {
    pub fn new(servers: Vec<McpServer>, options: HostOptions) -> McpHost {
        let options = Arc::new(options);
        let generation = Arc::new(AtomicU64::new(0));
        let servers = servers
            .into_iter()
            .map(|server| Supervisor::new(server, Arc::clone(&options), Arc::clone(&generation)))
            .collect();
        McpHost { servers, generation, cached: Mutex::new(None) }
    }

    /// Stops every server (a stdio child is killed if it does not exit); later calls fail.
    pub async fn shutdown(&self) {
        futures_util::future::join_all(self.servers.iter().map(Supervisor::shutdown)).await;
    }

    async fn build_catalog(&self) -> Arc<Catalog> {
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some(cached) = &*self.cached.lock().unwrap_or_else(PoisonError::into_inner)
            && cached.generation == generation
            && cached.complete
        {
            return Arc::clone(&cached.catalog);
        }
        let parts = futures_util::future::join_all(self.servers.iter().map(|server| async move {
            match server.connection().await {
                Ok(connection) => (Some(server.tools(&connection).await), None),
                Err(unavailable) => (server.last_tools(), Some(unavailable.problem)),
            }
        }))
        .await;
        let complete = parts.iter().all(|(_, unavailable)| unavailable.is_none());
        let mut catalog = Catalog::default();
        for (set, unavailable) in parts {
            catalog.problems.extend(unavailable);
            let Some(set) = set else { continue };
            catalog.problems.extend(set.problems.iter().cloned());
            for tool in &set.tools {
                match catalog.tools.iter_mut().find(|known| known.name == tool.host.name) {
                    None => catalog.tools.push(tool.host.clone()),
                    // Several servers of one collection serve the tool: the kernel decides
                    // on every path argument any of them declares, however each uses it,
                    // since a tools entry's `connection` may send the call to any of them.
                    Some(known) => {
                        for declared in &tool.host.paths {
                            if !known.paths.contains(declared) {
                                known.paths.push(declared.clone());
                            }
                        }
                    }
                }
            }
        }
        let catalog = Arc::new(catalog);
        *self.cached.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(CachedCatalog { generation, complete, catalog: Arc::clone(&catalog) });
        catalog
    }

    /// The servers that could answer the call's tool (its collection's, narrowed by the
    /// call's `connection`) and the tool's own name; `None` when no collection matches.
    fn candidates<'a>(&'a self, call: &HostCall<'a>) -> Option<Result<(Vec<&'a Supervisor>, &'a str), HostError>> {
        // A tool's own name may hold `__` too: the longest collection the name starts with wins.
        let collection = self
            .servers
            .iter()
            .map(|server| server.config.collection.as_str())
            .filter(|collection| names::tool_of(call.tool, collection).is_some())
            .max_by_key(|collection| collection.len())?;
        let action = names::tool_of(call.tool, collection)?;
        let serving: Vec<&Supervisor> =
            self.servers.iter().filter(|server| server.config.collection == collection).collect();
        let Some(connection) = call.connection else {
            return Some(Ok((serving, action)));
        };
        let picked: Vec<&Supervisor> = serving.iter().copied().filter(|server| server.name() == connection).collect();
        if picked.is_empty() {
            return Some(Err(HostError::Failed {
                server: connection.to_string(),
                message: format!(
                    "the tools entry names connection `{connection}`, but collection `{collection}` is served by {}",
                    quoted_names(&serving)
                ),
            }));
        }
        Some(Ok((picked, action)))
    }

    async fn answer(&self, call: HostCall<'_>) -> Result<HostAnswer, HostError> {
        let (candidates, action) = match self.candidates(&call) {
            None => return Err(HostError::NotProvided(call.tool.to_string())),
            Some(found) => found?,
        };
        let mut providers = Vec::new();
        let mut unavailable: Option<(&Supervisor, Unavailable)> = None;
        for server in candidates {
            match server.connection().await {
                Ok(connection) => {
                    if server.tools(&connection).await.find(action).is_some() {
                        providers.push((server, connection));
                    }
                }
                Err(why) => {
                    unavailable.get_or_insert((server, why));
                }
            }
        }
        let (server, connection) = match providers.len() {
            0 => {
                return Err(match unavailable {
                    Some((server, why)) => {
                        HostError::Failed { server: server.name().to_string(), message: why.for_call() }
                    }
                    None => HostError::NotProvided(call.tool.to_string()),
                });
            }
            1 => providers.remove(0),
            _ => {
                let servers: Vec<&Supervisor> = providers.iter().map(|(server, _)| *server).collect();
                return Err(HostError::Failed {
                    server: servers[0].name().to_string(),
                    message: format!(
                        "`{}` is served by {}; add `connection: <server>` to the tools entry that grants it to pick one",
                        call.tool,
                        quoted_names(&servers)
                    ),
                });
            }
        };
        let failed = |message: String| HostError::Failed {
            server: server.name().to_string(),
            message: server.redactor.redact(&message),
        };
        let mut params = CallToolRequestParams::new(action.to_string());
        match call.args {
            Value::Object(arguments) => params = params.with_arguments(arguments.clone()),
            Value::Null => {}
            other => return Err(failed(format!("the arguments of `{}` must be an object, not {other}", call.tool))),
        }
        // The trace context, and the key a tool that must not act twice keeps.
        let mut meta = trace_context().unwrap_or_default();
        meta.insert(IDEMPOTENCY_KEY.to_string(), Value::String(call.idempotency_key.to_string()));
        params.meta = Some(meta);
        let timeout_ms = server.config.tool_timeout_ms;
        // Dropping the call future (timeout or caller) sends `notifications/cancelled`.
        match tokio::time::timeout(Duration::from_millis(timeout_ms), connection.peer().call_tool(params)).await {
            Err(_) => Err(failed(format!(
                "MCP server `{}` did not answer `{}` within {timeout_ms} ms (tool_timeout_ms); the call was cancelled",
                server.name(),
                call.tool
            ))),
            Ok(Ok(result)) => {
                server.answered();
                Ok(answer::convert(server.name(), result, &server.redactor))
            }
            Ok(Err(ServiceError::McpError(error))) => {
                server.answered();
                Err(failed(format!(
                    "MCP server `{}` refused `{}`: {}",
                    server.name(),
                    call.tool,
                    bounded(&error.message)
                )))
            }
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(failed(server.lost(&connection, call.tool).await))
            }
            Ok(Err(error)) => Err(failed(format!(
                "MCP server `{}` broke the protocol answering `{}`: {}",
                server.name(),
                call.tool,
                bounded(&error.to_string())
            ))),
        }
    }
}

fn quoted_names(servers: &[&Supervisor]) -> String {
    let names: Vec<String> = servers.iter().map(|server| format!("`{}`", server.name())).collect();
    match names.as_slice() {
        [] => "no server".to_string(),
        [one] => format!("server {one}"),
        [init @ .., last] => format!("servers {} and {last}", init.join(", ")),
    }
}

/// `text` cut to [`MAX_ERROR_CHARS`] characters.
fn bounded(text: &str) -> String {
    archmax_program::text::cut_with_ellipsis(text, MAX_ERROR_CHARS)
}

impl ToolHost for McpHost {
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
        Box::pin(self.build_catalog())
    }

    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
        Box::pin(self.answer(call))
    }

    fn may_provide(&self, name: &str) -> bool {
        self.servers.iter().any(|server| names::tool_of(name, &server.config.collection).is_some())
    }

    /// The catalog last built (for a state that grants host tools), never a new build:
    /// a call the state does not grant must not start or reconnect a server.
    fn known_catalog(&self) -> HostFuture<'_, Option<Arc<Catalog>>> {
        let cached = self
            .cached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|cached| Arc::clone(&cached.catalog));
        Box::pin(async move { cached })
    }
}

/// The calling span's W3C trace context as the request's `_meta` (`traceparent`,
/// `tracestate`; MCP's SEP-414), so the server's spans join the tool call's trace. None
/// when tracing is off.
/// The `_meta` member of every `tools/call` carrying [`HostCall::idempotency_key`]
/// ([`archmax_vm::tool_host::idempotency_key`]).
pub const IDEMPOTENCY_KEY: &str = "archmax/idempotencyKey";

fn trace_context() -> Option<rmcp::model::RequestMetaObject> {
    let headers = archmax_vm::trace::outgoing_headers();
    if headers.is_empty() {
        return None;
    }
    let mut meta = rmcp::model::MetaObject::new();
    for (name, value) in headers {
        match name {
            "traceparent" => meta.set_traceparent(value),
            "tracestate" => meta.set_tracestate(value),
            _ => {}
        }
    }
    Some(meta.into())
}
