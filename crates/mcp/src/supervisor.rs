//! One configured server's life: started on first need, its tool list cached until it
//! says the list changed, restarted with backoff after it stops, stopped at shutdown.
//!
//! The one thing to know: every state change goes through [`Supervisor::connection`]
//! under one lock, so concurrent sessions needing a stopped server wait for one start
//! instead of racing several, and a server that will not start is warned about once per
//! outage (the catalog carries its problem while it lasts) rather than once per call.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientHandler, ServiceExt as _};

use archmax_config::settings::{McpServer, McpTransport};

use crate::HostOptions;
use crate::launch::{self, Launch, Process};
use crate::redact::{Redactor, with_tail};
use crate::toolset::ToolSet;

/// The first restart waits this long; each failure in a row doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How many times a broken HTTP event stream is resumed before the server counts as stopped.
const HTTP_RESUMES: usize = 3;
/// How long a stopped child is given to exit and finish its stderr before its tail is read.
const SETTLE: Duration = Duration::from_millis(500);

fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1 << doublings).min(MAX_BACKOFF)
}

/// Shared between a connection and its client handler: set when the server says its
/// tool list changed.
struct Listing {
    stale: AtomicBool,
    generation: Arc<AtomicU64>,
}

/// The client side of one connection: it only listens for `list_changed`.
struct Listener {
    listing: Arc<Listing>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("archmax", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.listing.stale.store(true, Ordering::SeqCst);
        self.listing.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// One started server.
pub struct Connection {
    client: RunningService<RoleClient, Listener>,
    listing: Arc<Listing>,
    /// The child of a stdio server.
    process: Option<Process>,
    tools: Mutex<Arc<ToolSet>>,
    /// Held while the tool list is fetched again.
    relisting: tokio::sync::Mutex<()>,
}

impl Connection {
    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.client.peer()
    }

    fn is_alive(&self) -> bool {
        !self.client.peer().is_transport_closed() && !self.process.as_ref().is_some_and(Process::has_ended)
    }

    fn tool_set(&self) -> Arc<ToolSet> {
        Arc::clone(&self.tools.lock().unwrap_or_else(PoisonError::into_inner))
    }

    async fn close(&self) {
        self.client.cancellation_token().cancel();
        if let Some(process) = &self.process {
            process.stop_and_wait(SETTLE).await;
        }
    }
}

/// Why a server cannot be asked now.
#[derive(Clone, Debug)]
pub struct Unavailable {
    /// The sentence for the catalog: which server, why, its stderr tail.
    pub problem: String,
    /// When it is tried again, if it will be.
    pub retry_in: Option<Duration>,
}

impl Unavailable {
    /// The sentence a failed call gives the model.
    pub fn for_call(&self) -> String {
        match self.retry_in {
            Some(wait) => format!("{}; it is tried again in {} ms", self.problem, wait.as_millis().max(1)),
            None => self.problem.clone(),
        }
    }
}

enum Slot {
    Idle,
    Up(Arc<Connection>),
    Down { retry_at: Instant, problem: String, start_failed: bool },
    Stopped,
}

pub struct Supervisor {
    pub config: McpServer,
    pub redactor: Redactor,
    options: Arc<HostOptions>,
    generation: Arc<AtomicU64>,
    slot: tokio::sync::Mutex<Slot>,
    /// Failures in a row (starts that failed, stops); a call that completes resets it.
    failures: AtomicU32,
    /// The tools last listed, shown while the server is restarting.
    last_tools: Mutex<Option<Arc<ToolSet>>>,
}

impl Supervisor {
    pub fn new(config: McpServer, options: Arc<HostOptions>, generation: Arc<AtomicU64>) -> Supervisor {
        let redactor = Redactor::new(secret_values(&config, &options));
        Supervisor {
            config,
            redactor,
            options,
            generation,
            slot: tokio::sync::Mutex::new(Slot::Idle),
            failures: AtomicU32::new(0),
            last_tools: Mutex::new(None),
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The running connection, starting the server if it is not running and not backing off.
    pub async fn connection(&self) -> Result<Arc<Connection>, Unavailable> {
        let mut slot = self.slot.lock().await;
        if let Slot::Up(connection) = &*slot {
            if connection.is_alive() {
                return Ok(Arc::clone(connection));
            }
            let connection = Arc::clone(connection);
            let problem = self.stop_message(&connection, "stopped").await;
            tracing::warn!(server = %self.config.name, "{problem}");
            self.go_down(&mut slot, problem, false);
        }
        let start_failed_before = match &*slot {
            Slot::Stopped => {
                return Err(Unavailable {
                    problem: format!("MCP server `{}` is shut down", self.config.name),
                    retry_in: None,
                });
            }
            Slot::Down { retry_at, problem, .. } if Instant::now() < *retry_at => {
                return Err(Unavailable { problem: problem.clone(), retry_in: Some(*retry_at - Instant::now()) });
            }
            Slot::Down { start_failed, .. } => *start_failed,
            Slot::Idle | Slot::Up(_) => false,
        };
        match self.start().await {
            Ok(connection) => {
                *self.last_tools.lock().unwrap_or_else(PoisonError::into_inner) = Some(connection.tool_set());
                *slot = Slot::Up(Arc::clone(&connection));
                self.changed();
                Ok(connection)
            }
            Err(problem) => {
                if start_failed_before {
                    tracing::debug!(server = %self.config.name, "{problem}");
                } else {
                    tracing::warn!(server = %self.config.name, "{problem}");
                }
                let retry_in = self.go_down(&mut slot, problem.clone(), true);
                Err(Unavailable { problem, retry_in: Some(retry_in) })
            }
        }
    }

    fn go_down(&self, slot: &mut Slot, problem: String, start_failed: bool) -> Duration {
        let failures = self.failures.fetch_add(1, Ordering::SeqCst).saturating_add(1);
        let wait = backoff(failures);
        *slot = Slot::Down { retry_at: Instant::now() + wait, problem, start_failed };
        self.changed();
        wait
    }

    /// A call completed: the next stop is a first failure again.
    pub fn answered(&self) {
        self.failures.store(0, Ordering::SeqCst);
    }

    /// The tools the server provides now, fetched again when it said they changed. A
    /// failed fetch keeps the previous list (and tries again next time).
    pub async fn tools(&self, connection: &Connection) -> Arc<ToolSet> {
        if connection.listing.stale.load(Ordering::SeqCst) {
            let _relisting = connection.relisting.lock().await;
            if connection.listing.stale.swap(false, Ordering::SeqCst) {
                let wait = Duration::from_millis(self.config.startup_timeout_ms);
                match tokio::time::timeout(wait, list_tools(connection.peer())).await {
                    Ok(Ok(listed)) => {
                        let set = Arc::new(ToolSet::describe(&self.config, listed, &self.redactor));
                        *connection.tools.lock().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&set);
                        *self.last_tools.lock().unwrap_or_else(PoisonError::into_inner) = Some(set);
                        self.changed();
                    }
                    outcome => {
                        let why = match outcome {
                            Ok(Err(error)) => error,
                            _ => format!("no answer within {} ms", self.config.startup_timeout_ms),
                        };
                        tracing::warn!(server = %self.config.name, "MCP server `{}` could not list its tools again: {}", self.config.name, self.redactor.redact(&why));
                        connection.listing.stale.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
        connection.tool_set()
    }

    /// The tools last listed (for the catalog while the server is down).
    pub fn last_tools(&self) -> Option<Arc<ToolSet>> {
        self.last_tools.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The connection broke during a call: the sentence for the model, and the server
    /// marked down so the next need restarts it.
    pub async fn lost(&self, connection: &Arc<Connection>, tool: &str) -> String {
        let oversized = connection.process.as_ref().is_some_and(Process::sent_oversized_line);
        let what = if oversized {
            format!(
                "answered `{tool}` with a message over the line cap of {} bytes, which is too large to read; the connection was closed",
                launch::MAX_LINE_BYTES
            )
        } else {
            format!("stopped during the call of `{tool}`")
        };
        let problem = self.stop_message(connection, &what).await;
        let mut slot = self.slot.lock().await;
        if matches!(&*slot, Slot::Up(current) if Arc::ptr_eq(current, connection)) {
            tracing::warn!(server = %self.config.name, "{problem}");
            self.go_down(&mut slot, problem.clone(), false);
        }
        let again = if connection.process.is_some() { "restarted" } else { "reconnected" };
        format!("{problem}; it is {again} when next needed")
    }

    /// Stops the server (its child, if any); later needs fail.
    pub async fn shutdown(&self) {
        let mut slot = self.slot.lock().await;
        if let Slot::Up(connection) = std::mem::replace(&mut *slot, Slot::Stopped) {
            connection.close().await;
        }
        self.changed();
    }

    async fn stop_message(&self, connection: &Connection, what: &str) -> String {
        let mut message = format!("MCP server `{}` {what}", self.config.name);
        if let Some(process) = &connection.process {
            if let Some(status) = process.ending(SETTLE).await {
                message.push_str(&format!(" ({status})"));
            }
            message = with_tail(message, &process.stderr.text(&self.redactor));
        }
        self.redactor.redact(&message)
    }

    async fn start(&self) -> Result<Arc<Connection>, String> {
        let listing = Arc::new(Listing { stale: AtomicBool::new(false), generation: Arc::clone(&self.generation) });
        let listener = Listener { listing: Arc::clone(&listing) };
        let wait = Duration::from_millis(self.config.startup_timeout_ms);
        let failed = |why: String| format!("MCP server `{}` did not start: {why}", self.config.name);
        match &self.config.transport {
            McpTransport::Stdio { command, args, env, env_vars, cwd } => {
                let launch = Launch { server: &self.config.name, command, args, env, env_vars, cwd: cwd.as_deref() };
                let (process, stdout, stdin) = launch::spawn(&launch, &self.options, Arc::clone(&self.generation))
                    .map_err(|why| self.redactor.redact(&failed(why)))?;
                let outcome = tokio::time::timeout(wait, self.handshake(listener, (stdout, stdin))).await;
                let why = match outcome {
                    Ok(Ok((client, set))) => return Ok(self.connected(client, listing, Some(process), set)),
                    Ok(Err(why)) => why,
                    Err(_) => {
                        process.stop();
                        format!(
                            "it did not finish starting within {} ms (startup_timeout_ms)",
                            self.config.startup_timeout_ms
                        )
                    }
                };
                let mut message = failed(why);
                if let Some(status) = process.ending(SETTLE).await {
                    message.push_str(&format!(" ({status})"));
                }
                Err(self.redactor.redact(&with_tail(message, &process.stderr.text(&self.redactor))))
            }
            McpTransport::Http { url, bearer_token_env_var } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                // A broken event stream is resumed a few times, quickly; past that the
                // server is treated as stopped, so a dead server fails its calls instead of
                // leaving them to their timeout.
                let mut resume = ExponentialBackoff::default();
                resume.max_times = Some(HTTP_RESUMES);
                resume.base_duration = FIRST_BACKOFF;
                resume.max_delay = Some(Duration::from_secs(2));
                config.retry_config = Arc::new(resume);
                if let Some(variable) = bearer_token_env_var {
                    let Some(token) = (self.options.env)(variable) else {
                        return Err(failed(format!(
                            "the environment variable `{variable}` (its bearer_token_env_var) is not set"
                        )));
                    };
                    config = config.auth_header(token);
                }
                // reqwest is built without a default TLS provider; the process needs one.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let client = crate::traced_http::TracedHttp::new().map_err(&failed)?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                match tokio::time::timeout(wait, self.handshake(listener, transport)).await {
                    Ok(Ok((client, set))) => Ok(self.connected(client, listing, None, set)),
                    Ok(Err(why)) => Err(self.redactor.redact(&failed(why))),
                    Err(_) => Err(failed(format!(
                        "`{url}` did not finish the handshake within {} ms (startup_timeout_ms)",
                        self.config.startup_timeout_ms
                    ))),
                }
            }
        }
    }

    fn connected(
        &self,
        client: RunningService<RoleClient, Listener>,
        listing: Arc<Listing>,
        process: Option<Process>,
        set: ToolSet,
    ) -> Arc<Connection> {
        Arc::new(Connection {
            client,
            listing,
            process,
            tools: Mutex::new(Arc::new(set)),
            relisting: tokio::sync::Mutex::new(()),
        })
    }

    /// `initialize`, then every page of `tools/list`.
    async fn handshake<T, E, A>(
        &self,
        listener: Listener,
        transport: T,
    ) -> Result<(RunningService<RoleClient, Listener>, ToolSet), String>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let client = listener.serve(transport).await.map_err(|error| format!("the handshake failed: {error}"))?;
        let listed = list_tools(client.peer()).await.map_err(|error| format!("it did not list its tools: {error}"))?;
        Ok((client, ToolSet::describe(&self.config, listed, &self.redactor)))
    }
}

/// The shortest `env` table value hidden from messages (every `env_vars` value and bearer
/// token is hidden, however short).
const MIN_TABLE_SECRET: usize = 8;

/// The most tools one server may list: a server listing more is refused, so a hostile or
/// broken server cannot make the runner hold, check and show an unbounded list.
pub const MAX_TOOLS_PER_SERVER: usize = 1_000;
/// The most pages one `tools/list` may take.
const MAX_LIST_PAGES: usize = 100;

/// Every page of `tools/list`, within [`MAX_TOOLS_PER_SERVER`] and [`MAX_LIST_PAGES`].
async fn list_tools(peer: &rmcp::Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor.take());
        let page = peer.list_tools(Some(params)).await.map_err(|error| error.to_string())?;
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS_PER_SERVER {
            return Err(format!("it lists more than {MAX_TOOLS_PER_SERVER} tools"));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!("its tool list goes on past {MAX_LIST_PAGES} pages"))
}

/// Every value this server's messages must hide: its `env` table, its `env_vars` and its
/// bearer token as the runner has them.
fn secret_values(config: &McpServer, options: &HostOptions) -> Vec<String> {
    match &config.transport {
        McpTransport::Stdio { env, env_vars, .. } => env
            .values()
            // The `env` table is written in `archmax.toml`, so a short value there is
            // configuration (`eu`, `1`, `debug`), not a secret, and hiding it would mangle
            // every message that happens to contain it; a long one is hidden in case.
            .filter(|value| value.len() >= MIN_TABLE_SECRET)
            .cloned()
            .chain(env_vars.iter().filter_map(|name| (options.env)(name)))
            .collect(),
        McpTransport::Http { bearer_token_env_var, .. } => {
            bearer_token_env_var.iter().filter_map(|name| (options.env)(name)).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_a_quarter_second_to_half_a_minute() {
        let waits: Vec<u128> = [1, 2, 3, 4, 8, 9, 100].iter().map(|&n| backoff(n).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 30_000, 30_000, 30_000]);
    }
}
