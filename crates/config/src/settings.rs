//! The runner's tables of `archmax.toml`: how webhook senders authenticate
//! (`[connections.<slug>]`), which trigger wakes a workflow's waiting sessions
//! (`[schedule.<workflow>]`), and which MCP servers provide host tools
//! (`[mcp_servers.<name>]`, `essential_tools`; read in [`mcp`], documented in the book's MCP guide, `docs/src/guides/mcp.md`),
//! the sessions' context budgets (`[context]`, read in [`context`]), their spending
//! limits (`[limits]`, read in [`limits`]), how the inbox shows each workflow (`[inbox]`,
//! read in [`inbox`], with `[inbox.oidc]` in [`oidc`]), the model
//! providers and routes (`[providers.<name>]`, `[models."<id>"]`, read in [`providers`]),
//! and the outgoing notifications with the runner's public address (`[notify.<name>]`,
//! `[serve]`, read in [`notify`]).
//!
//! ```toml
//! [connections.acme-slack]              # the slug a trigger's `connection:` names
//! secret_env = "ACME_SLACK_SECRET"      # the variable holding the HMAC-SHA256 secret
//! signature_header = "X-Signature"      # default: X-Archmax-Signature
//! timestamp_header = "X-Timestamp"      # optional: sign "<timestamp>.<body>", refuse stale ones
//! tolerance_seconds = 300               # how old a timestamp may be (default 300)
//!
//! [schedule.support]                    # a workflow slug
//! wake_trigger = "wake"                 # delivered to its sessions whose resumeAt has come
//!
//! [mcp_servers.crm]                     # tools `crm__<tool>`, over stdio
//! command = "crm-mcp"
//! env_vars = ["CRM_TOKEN"]              # copied from the runner's environment
//! ```
//!
//! The one thing to know: a secret is only ever named by its environment variable, never
//! written in the file, so the file can be committed. `validate` reports every problem
//! of these tables (as `AMX0011`, and doubtful settings as the warning `AMX0016`) the same
//! way it reports mount problems; the runner reads them with [`parse_runner_settings`],
//! refuses to start on the same errors, and checks the variables they name with
//! [`check_environment`].

mod context;
mod inbox;
mod inbox_fields;
mod limits;
mod mcp;
pub mod notify;
pub mod oidc;
pub mod providers;

use std::collections::BTreeMap;

use serde::Deserialize;

use archmax_program::diagnostic::{Code, Diagnostic};
use archmax_program::source::{FileId, Span};

/// The signature header a connection uses when it names none.
pub const DEFAULT_SIGNATURE_HEADER: &str = "x-archmax-signature";
/// How old a signed timestamp may be by default, in seconds.
pub const DEFAULT_TOLERANCE_SECONDS: u64 = 300;
/// The longest tolerance accepted: a day.
const MAX_TOLERANCE_SECONDS: u64 = 86_400;

/// How the sender of one connection's webhooks authenticates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    pub slug: String,
    /// The environment variable that holds the shared secret.
    pub secret_env: String,
    /// Lowercase header name carrying `sha256=<hex>` (or the bare hex digest).
    pub signature_header: String,
    /// Lowercase header name carrying the sending time (Unix seconds); when set, the
    /// signed bytes are `<timestamp>.<body>`.
    pub timestamp_header: Option<String>,
    pub tolerance_seconds: u64,
}

/// What the runner's scheduler does for one workflow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub workflow: String,
    /// The trigger delivered to a session of this workflow once its `resumeAt` has come.
    pub wake_trigger: String,
}

/// The runner's tables, checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnerSettings {
    pub connections: BTreeMap<String, Connection>,
    pub schedules: BTreeMap<String, Schedule>,
    /// Host tools on in every state (the spec's `essentialTools`), by full name.
    pub essential_tools: Vec<String>,
    /// The MCP servers that provide host tools, by their table name.
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Where each of `essential_tools` is written, for diagnostics found at start.
    pub essential_tool_spans: BTreeMap<String, Span>,
    /// `[context]`: the context budgets of every session (read in [`context`]).
    pub context: ContextSettings,
    /// `[providers.<name>]`: the model endpoints besides the environment's (read in
    /// [`providers`]).
    pub providers: BTreeMap<String, providers::Provider>,
    /// `[models."<id>"]`: which provider serves which model id.
    pub models: BTreeMap<String, providers::ModelRoute>,
    /// `[models."<id>"].price`: what a model id costs, routed or not.
    pub prices: BTreeMap<String, providers::ModelPrice>,
    /// `[limits]`: what a session may spend before a person must let it go on (read in
    /// [`limits`]).
    pub limits: Budgets,
    /// `[inbox]`: how the decision inbox presents each workflow's sessions (read in
    /// [`inbox`]).
    pub inbox: InboxSettings,
    /// `[notify.<name>]`: outgoing webhooks for parked, failed and waiting sessions (read
    /// in [`notify`]).
    pub notify: BTreeMap<String, notify::Notifier>,
    /// `[serve] public_url`: where people reach this runner, without a trailing `/`; the
    /// links to a session's page start with it.
    pub public_url: Option<String>,
}

pub use context::ContextSettings;
pub use inbox::{InboxSettings, InboxWorkflow};
pub use inbox_fields::{FieldKind, FieldShape, ObjectShape};
pub use limits::{BudgetLimits, Budgets};

pub use mcp::{MAX_TIMEOUT_MS, check_environment, is_tool_name, prefix_problem};

/// How long a server may take to start by default, in milliseconds.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// How long one tool call may take by default, in milliseconds.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 60_000;

/// One `[mcp_servers.<name>]` table: a Model Context Protocol server whose tools the
/// runtime offers as `<collection>__<tool>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServer {
    /// The table's name; events name the server by it.
    pub name: String,
    /// The collection its tools are named under (`collection = "…"`, else `name`).
    pub collection: String,
    pub transport: McpTransport,
    pub startup_timeout_ms: u64,
    pub tool_timeout_ms: u64,
    /// Path arguments of tools whose input schema does not mark them: tool (as the
    /// server names it) → argument → how the tool uses it.
    pub path_arguments: BTreeMap<String, BTreeMap<String, archmax_program::tools::PathAccess>>,
    /// Where the table is, for diagnostics found when the server is started.
    pub span: Span,
}

/// How the runtime reaches an MCP server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set in the child's environment, over a minimal base (`PATH`, `HOME`, locale).
        env: BTreeMap<String, String>,
        /// Variables copied from the runner's own environment by name (how a secret
        /// reaches a stdio server).
        env_vars: Vec<String>,
        /// The child's working directory, relative to the workspace root (default: the root).
        cwd: Option<String>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        /// The environment variable holding a bearer token sent as `Authorization`.
        bearer_token_env_var: Option<String>,
    },
}

#[derive(Deserialize)]
struct SettingsFile {
    #[serde(default)]
    connections: BTreeMap<toml::Spanned<String>, toml::Spanned<ConnectionDeclaration>>,
    #[serde(default)]
    schedule: BTreeMap<toml::Spanned<String>, toml::Spanned<ScheduleDeclaration>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionDeclaration {
    secret_env: Option<String>,
    signature_header: Option<String>,
    timestamp_header: Option<String>,
    tolerance_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleDeclaration {
    wake_trigger: Option<String>,
}

/// Whether `name` can be an environment variable's name: letters, digits and `_`, not
/// starting with a digit.
fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|rest| rest.is_ascii_alphanumeric() || rest == '_')
}

/// Whether `name` can be an HTTP header name (an RFC 9110 token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

fn is_slug(text: &str) -> bool {
    archmax_program::slug::Slug::parse(text).is_ok()
}

/// Reads the runner's tables of `archmax.toml`. Every problem becomes a diagnostic; the
/// settings keep what was valid. A file that is not TOML at all yields no diagnostic
/// here: the mount table's reader reports it.
pub fn parse_runner_settings(file: FileId, text: &str) -> (RunnerSettings, Vec<Diagnostic>) {
    let mut settings = RunnerSettings::default();
    let mut diagnostics = Vec::new();
    mcp::read(file, text, &mut settings, &mut diagnostics);
    context::read(file, text, &mut settings, &mut diagnostics);
    limits::read(file, text, &mut settings, &mut diagnostics);
    inbox::read(file, text, &mut settings, &mut diagnostics);
    providers::read(file, text, &mut settings, &mut diagnostics);
    notify::read(file, text, &mut settings, &mut diagnostics);
    let span = |range: std::ops::Range<usize>| Span::new(file, range.start, range.end);
    let parsed: SettingsFile = match toml::from_str(text) {
        Ok(parsed) => parsed,
        Err(error) => {
            // A file that is not TOML is the mount reader's to report; a table of the
            // wrong shape here is this reader's.
            let range = error.span().unwrap_or(0..0);
            if toml::from_str::<toml::Table>(text).is_ok() {
                diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        span(range),
                        format!("archmax.toml is invalid: {}", error.message().trim()),
                    )
                    .with_help(
                        "a connection takes `secret_env`, `signature_header`, `timestamp_header` and `tolerance_seconds`; a schedule takes `wake_trigger`",
                    ),
                );
            }
            return (settings, diagnostics);
        }
    };
    for (slug, declaration) in parsed.connections {
        let slug_span = span(slug.span());
        let declaration_span = span(declaration.span());
        let slug = slug.into_inner();
        let declaration = declaration.into_inner();
        let mut problem = |message: String, help: &str| {
            diagnostics.push(Diagnostic::at(Code::HostConfig, declaration_span, message).with_help(help.to_string()));
        };
        if !is_slug(&slug) {
            diagnostics.push(
                Diagnostic::at(Code::HostConfig, slug_span, format!("the connection name `{slug}` is not a slug"))
                    .with_help("name connections with lowercase letters, digits and single hyphens, as a trigger's `connection:` does"),
            );
            continue;
        }
        let Some(secret_env) = declaration.secret_env else {
            problem(
                format!("connection `{slug}` names no `secret_env`"),
                "set `secret_env` to the environment variable that holds the webhook secret; the secret itself never goes in the file",
            );
            continue;
        };
        if !is_variable_name(&secret_env) {
            problem(
                format!("the `secret_env` `{secret_env}` of connection `{slug}` is not an environment variable name"),
                "write the variable's name (letters, digits and `_`), such as ACME_WEBHOOK_SECRET",
            );
            continue;
        }
        let header = |name: Option<String>, which: &str, problem: &mut dyn FnMut(String, &str)| match name {
            None => Ok(None),
            Some(name) if is_header_name(&name) => Ok(Some(name.to_ascii_lowercase())),
            Some(name) => {
                problem(
                    format!("the `{which}` `{name}` of connection `{slug}` is not an HTTP header name"),
                    "write a header name such as X-Signature",
                );
                Err(())
            }
        };
        let Ok(signature_header) = header(declaration.signature_header, "signature_header", &mut problem) else {
            continue;
        };
        let Ok(timestamp_header) = header(declaration.timestamp_header, "timestamp_header", &mut problem) else {
            continue;
        };
        let tolerance_seconds = match declaration.tolerance_seconds {
            None => DEFAULT_TOLERANCE_SECONDS,
            Some(seconds) if (1..=MAX_TOLERANCE_SECONDS as i64).contains(&seconds) => seconds as u64,
            Some(seconds) => {
                problem(
                    format!("the `tolerance_seconds` {seconds} of connection `{slug}` is out of range"),
                    "give a whole number of seconds from 1 to 86400",
                );
                continue;
            }
        };
        if declaration.tolerance_seconds.is_some() && timestamp_header.is_none() {
            problem(
                format!("connection `{slug}` sets `tolerance_seconds` without a `timestamp_header`"),
                "name the header that carries the sending time, or drop `tolerance_seconds`",
            );
            continue;
        }
        settings.connections.insert(
            slug.clone(),
            Connection {
                slug,
                secret_env,
                signature_header: signature_header.unwrap_or_else(|| DEFAULT_SIGNATURE_HEADER.to_string()),
                timestamp_header,
                tolerance_seconds,
            },
        );
    }
    for (workflow, declaration) in parsed.schedule {
        let workflow_span = span(workflow.span());
        let declaration_span = span(declaration.span());
        let workflow = workflow.into_inner();
        if !is_slug(&workflow) {
            diagnostics.push(
                Diagnostic::at(
                    Code::HostConfig,
                    workflow_span,
                    format!("the schedule key `{workflow}` is not a workflow slug"),
                )
                .with_help("key each schedule by the slug of the workflow it wakes (its folder under workflows/)"),
            );
            continue;
        }
        match declaration.into_inner().wake_trigger {
            Some(trigger) if !trigger.trim().is_empty() => {
                let wake_trigger = trigger.trim().to_string();
                settings.schedules.insert(workflow.clone(), Schedule { workflow, wake_trigger });
            }
            _ => diagnostics.push(
                Diagnostic::at(
                    Code::HostConfig,
                    declaration_span,
                    format!("the schedule of `{workflow}` names no `wake_trigger`"),
                )
                .with_help("set `wake_trigger` to the trigger id delivered when a session's resumeAt has come"),
            ),
        }
    }
    (settings, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(text: &str) -> Vec<String> {
        parse_runner_settings(FileId(0), text).1.into_iter().map(|diagnostic| diagnostic.message).collect()
    }

    #[test]
    fn connections_and_schedules_are_read_with_their_defaults() {
        let text = r#"
[mounts."reference/"]
governed = true

[connections.acme-slack]
secret_env = "ACME_SECRET"

[connections.stripe]
secret_env = "STRIPE_SECRET"
signature_header = "Stripe-Signature"
timestamp_header = "X-Stripe-Time"
tolerance_seconds = 60

[schedule.support]
wake_trigger = "wake"
"#;
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let slack = &settings.connections["acme-slack"];
        assert_eq!(slack.signature_header, DEFAULT_SIGNATURE_HEADER);
        assert_eq!((slack.timestamp_header.as_deref(), slack.tolerance_seconds), (None, DEFAULT_TOLERANCE_SECONDS));
        let stripe = &settings.connections["stripe"];
        assert_eq!(stripe.signature_header, "stripe-signature");
        assert_eq!((stripe.timestamp_header.as_deref(), stripe.tolerance_seconds), (Some("x-stripe-time"), 60));
        assert_eq!(settings.schedules["support"].wake_trigger, "wake");
    }

    #[test]
    fn every_bad_entry_is_named_and_the_good_ones_kept() {
        let text = r#"
[connections.ok]
secret_env = "OK_SECRET"

[connections.no-secret]

[connections.inline]
secret_env = "s3cr3t value"

[connections.bad-header]
secret_env = "X"
signature_header = "X Signature"

[connections.stale]
secret_env = "X"
timestamp_header = "X-Time"
tolerance_seconds = 0

[connections.loose]
secret_env = "X"
tolerance_seconds = 30

[connections.Upper]
secret_env = "X"

[schedule.support]

[schedule.Desk]
wake_trigger = "wake"
"#;
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        let found: Vec<&str> = diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect();
        assert_eq!(
            found,
            [
                "the connection name `Upper` is not a slug",
                "the `signature_header` `X Signature` of connection `bad-header` is not an HTTP header name",
                "the `secret_env` `s3cr3t value` of connection `inline` is not an environment variable name",
                "connection `loose` sets `tolerance_seconds` without a `timestamp_header`",
                "connection `no-secret` names no `secret_env`",
                "the `tolerance_seconds` 0 of connection `stale` is out of range",
                "the schedule key `Desk` is not a workflow slug",
                "the schedule of `support` names no `wake_trigger`",
            ]
        );
        assert!(diagnostics.iter().all(|diagnostic| diagnostic.code == Code::HostConfig));
        assert_eq!(settings.connections.keys().collect::<Vec<_>>(), ["ok"]);
        assert!(settings.schedules.is_empty());
    }

    #[test]
    fn an_unknown_key_in_a_connection_is_reported_with_help() {
        let found = messages("[connections.ok]\nsecret_env = \"X\"\nsecret = \"inline\"\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("unknown field `secret`"), "{found:?}");
        // A problem elsewhere in the file is the mount reader's to report.
        assert!(messages("[mounts.\"a/\"]\nwritable = 1\n").is_empty());
    }
}
