//! `essential_tools` and the `[mcp_servers.<name>]` tables of `archmax.toml`: read and
//! checked offline by [`read`], and their environment checked at start by
//! [`check_environment`].
//!
//! The one thing to know: these tables are read by hand over the TOML parser's spanned
//! tree rather than through serde, so each server is judged on its own (a bad server is
//! reported and left out, the others are kept) and every diagnostic points at the very
//! key or value at fault. No diagnostic ever quotes an `env` value: it may be a secret.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use super::{
    DEFAULT_STARTUP_TIMEOUT_MS, DEFAULT_TOOL_TIMEOUT_MS, McpServer, McpTransport, RunnerSettings, is_variable_name,
};
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};
use archmax_program::tools::{PathAccess, Tool, UNGRANTABLE_TOOL};

/// The longest a server may be given to start or a call to answer: ten minutes.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// The longest tool name models accept.
const MAX_TOOL_NAME: usize = 64;

/// Every key an `[mcp_servers.<name>]` table takes.
const SERVER_KEYS: [&str; 11] = [
    "command",
    "args",
    "env",
    "env_vars",
    "cwd",
    "url",
    "bearer_token_env_var",
    "collection",
    "startup_timeout_ms",
    "tool_timeout_ms",
    "path_arguments",
];

/// The keys only a stdio server takes.
const STDIO_KEYS: [&str; 4] = ["args", "env", "env_vars", "cwd"];

/// The endings of an `env` key whose value is likely a secret.
const SECRET_ENDINGS: [&str; 4] = ["TOKEN", "KEY", "SECRET", "PASSWORD"];

/// Why a server or collection name cannot prefix tool names, if it cannot.
pub fn prefix_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if !name.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '_')) {
        Some("may hold only letters, digits, `-` and `_`")
    } else if name.contains("__") || name.ends_with('_') {
        Some("would blur the `__` between collection and tool")
    } else if name.to_ascii_lowercase().starts_with("archmax") {
        Some("starts with `archmax`, which the runtime's own tools use")
    } else {
        None
    }
}

/// Whether `name` can be a tool name a model calls: 1 to 64 letters, digits, `_` and `-`.
pub fn is_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '_'))
}

/// Whether an MCP server's own name for a tool is usable: what MCP allows (letters,
/// digits, `_`, `-` and `.`), at most 128 characters.
fn is_server_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '_' | '.'))
}

/// Why a URL cannot reach a streamable HTTP server, if it cannot.
fn url_problem(url: &str) -> Option<&'static str> {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://")) else {
        return Some("is not an http:// or https:// URL");
    };
    if url.chars().any(|character| character.is_whitespace() || character.is_control()) {
        return Some("holds whitespace");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') { Some("names no host") } else { None }
}

/// Whether an `env` key names what is probably a secret.
fn looks_secret(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    SECRET_ENDINGS.iter().any(|ending| upper == *ending || upper.ends_with(&format!("_{ending}")))
        || upper.contains("PASSWORD")
}

/// Why a name cannot be listed in `essential_tools`, with the fix, if it cannot.
fn essential_problem(name: &str) -> Option<(String, &'static str)> {
    if !is_tool_name(name) {
        return Some((
            format!("`{name}` in `essential_tools` is not a tool name"),
            "write a host tool's full name, `<collection>__<tool>` (letters, digits, `_` and `-`, at most 64 characters)",
        ));
    }
    if Tool::from_name(name).is_some() || archmax_program::tools::delegation_target(name).is_some() {
        return Some((
            format!("`{name}` in `essential_tools` is one of the runtime's own tools"),
            "remove it: the runtime's tools are on wherever the spec grants them; `essential_tools` lists host tools",
        ));
    }
    if name == UNGRANTABLE_TOOL {
        return Some((format!("`{name}` cannot be granted to any state"), "remove it from `essential_tools`"));
    }
    if name.starts_with("archmax_") {
        return Some((
            format!("`{name}` in `essential_tools` uses the `archmax_` prefix the runtime reserves"),
            "name the host tool by its `<collection>__<tool>` name",
        ));
    }
    None
}

/// Reads the MCP keys of `text` into `settings`. A file that is not TOML yields nothing:
/// the mount table's reader reports it.
pub(super) fn read(file: FileId, text: &str, settings: &mut RunnerSettings, diagnostics: &mut Vec<Diagnostic>) {
    let Ok(document) = DeTable::parse(text) else { return };
    let mut reader = Reader { file, diagnostics, errors: 0 };
    let document = document.get_ref();
    let mut collections = BTreeSet::new();
    if let Some(servers) = document.get("mcp_servers") {
        match servers.get_ref() {
            DeValue::Table(servers) => {
                for (name, table) in servers.iter() {
                    if let Some(server) = reader.server(name, table, &mut collections) {
                        settings.mcp_servers.insert(server.name.clone(), server);
                    }
                }
            }
            _ => reader.error(
                servers.span(),
                "`mcp_servers` must be a table of servers".to_string(),
                "declare each server as its own table, `[mcp_servers.<name>]`",
            ),
        }
    }
    if let Some(essential) = document.get("essential_tools") {
        reader.essential_tools(essential, &collections, settings);
    }
}

/// Checks, when the runner starts, that every variable the servers copy from its
/// environment is set (`env_vars`, `bearer_token_env_var`); each one missing or empty
/// is an error at its server's table. The connections' `secret_env` is checked where
/// webhooks are configured.
pub fn check_environment(settings: &RunnerSettings, env: impl Fn(&str) -> Option<String>) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for server in settings.mcp_servers.values() {
        let (names, key): (Vec<&str>, &str) = match &server.transport {
            McpTransport::Stdio { env_vars, .. } => (env_vars.iter().map(String::as_str).collect(), "env_vars"),
            McpTransport::Http { bearer_token_env_var, .. } => {
                (bearer_token_env_var.iter().map(String::as_str).collect(), "bearer_token_env_var")
            }
        };
        for variable in names {
            if env(variable).is_none_or(|value| value.is_empty()) {
                diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        server.span,
                        format!(
                            "MCP server `{}` takes {variable} from the environment (`{key}`), but it is not set",
                            server.name
                        ),
                    )
                    .with_help(format!(
                        "set {variable} in the runner's environment (or its .env), or remove it from `{key}`"
                    )),
                );
            }
        }
    }
    diagnostics
}

/// The reader of one file's MCP keys: where diagnostics go, and how many errors so far
/// (a server with an error of its own is left out).
struct Reader<'d> {
    file: FileId,
    diagnostics: &'d mut Vec<Diagnostic>,
    errors: usize,
}

/// A value with its span, as the parser hands it out.
type Value<'i> = Spanned<DeValue<'i>>;

impl Reader<'_> {
    fn span(&self, range: Range<usize>) -> Span {
        Span::new(self.file, range.start, range.end)
    }

    fn error(&mut self, range: Range<usize>, message: String, help: impl Into<String>) {
        self.errors += 1;
        let span = self.span(range);
        self.diagnostics.push(Diagnostic::at(Code::HostConfig, span, message).with_help(help));
    }

    fn warn(&mut self, range: Range<usize>, message: String, help: impl Into<String>) {
        let span = self.span(range);
        self.diagnostics.push(Diagnostic::at(Code::HostConfigSuspect, span, message).with_help(help));
    }

    /// A table value, or an error.
    fn table<'v, 'i>(
        &mut self,
        value: &'v Value<'i>,
        message: String,
        help: impl Into<String>,
    ) -> Option<&'v DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => {
                self.error(value.span(), message, help);
                None
            }
        }
    }

    /// A string value, or an error naming what `what` must be.
    fn string(&mut self, value: &Value<'_>, what: &str) -> Option<String> {
        match value.get_ref() {
            DeValue::String(text) => Some(text.to_string()),
            other => {
                self.error(
                    value.span(),
                    format!("{what} must be a string, not {}", other.type_str()),
                    "quote the value",
                );
                None
            }
        }
    }

    /// An array of strings with their spans.
    fn strings(&mut self, value: &Value<'_>, what: &str) -> Option<Vec<Spanned<String>>> {
        let DeValue::Array(items) = value.get_ref() else {
            self.error(
                value.span(),
                format!("{what} must be an array of strings, not {}", value.get_ref().type_str()),
                "write a list such as [\"one\", \"two\"]",
            );
            return None;
        };
        let mut strings = Vec::new();
        for item in items.iter() {
            strings.push(Spanned::new(item.span(), self.string(item, &format!("each entry of {what}"))?));
        }
        Some(strings)
    }

    /// Warns about each entry that repeats an earlier one; returns the distinct entries.
    fn distinct(&mut self, entries: Vec<Spanned<String>>, what: &str) -> Vec<Spanned<String>> {
        let mut seen = BTreeSet::new();
        let mut kept = Vec::new();
        for entry in entries {
            if seen.insert(entry.get_ref().clone()) {
                kept.push(entry);
            } else {
                let message = format!("{what} lists `{}` twice", entry.get_ref());
                self.warn(entry.span(), message, "remove the repeated entry");
            }
        }
        kept
    }

    /// A name that prefixes tool names, or an error saying why it cannot.
    fn prefix(&mut self, range: Range<usize>, name: &str, what: &str) -> bool {
        match prefix_problem(name) {
            None => true,
            Some(problem) => {
                self.error(
                    range,
                    format!("the {what} `{name}` {problem}"),
                    "tools are named `<collection>__<tool>`: use letters, digits, `-` and single `_`, such as `crm` or `mail-eu`",
                );
                false
            }
        }
    }

    /// A list of environment variable names, each checked.
    fn variable_names(&mut self, value: &Value<'_>, what: &str) -> Vec<Spanned<String>> {
        let names = self.strings(value, what).unwrap_or_default();
        let mut valid = Vec::new();
        for name in names {
            if is_variable_name(name.get_ref()) {
                valid.push(name);
            } else {
                let message = format!("`{}` in {what} is not an environment variable name", name.get_ref());
                self.error(
                    name.span(),
                    message,
                    "write the variable's name (letters, digits and `_`), such as CRM_TOKEN",
                );
            }
        }
        self.distinct(valid, what)
    }

    /// One `[mcp_servers.<name>]` table, or `None` when it has an error.
    fn server(
        &mut self,
        name: &Spanned<DeString<'_>>,
        table: &Value<'_>,
        collections: &mut BTreeSet<String>,
    ) -> Option<McpServer> {
        let errors_before = self.errors;
        let server = name.get_ref().to_string();
        let named = self.prefix(name.span(), &server, "MCP server name");
        let keys = self.table(
            table,
            format!("`mcp_servers.{server}` must be a table"),
            format!("declare it as `[mcp_servers.{server}]` with `command` or `url`"),
        )?;
        let what = |key: &str| format!("`{key}` of MCP server `{server}`");
        let mut present: BTreeMap<&str, Range<usize>> = BTreeMap::new();
        let mut command = None;
        let mut args = Vec::new();
        let mut env = BTreeMap::new();
        let mut env_vars = Vec::new();
        let mut cwd = None;
        let mut url = None;
        let mut bearer_token_env_var = None;
        let mut collection = named.then(|| server.clone());
        let mut startup_timeout_ms = DEFAULT_STARTUP_TIMEOUT_MS;
        let mut tool_timeout_ms = DEFAULT_TOOL_TIMEOUT_MS;
        let mut path_arguments = BTreeMap::new();
        for (key, value) in keys.iter() {
            let Some(known) = SERVER_KEYS.iter().copied().find(|known| *known == key.get_ref().as_ref()) else {
                self.unknown_key(key, &server);
                continue;
            };
            present.insert(known, key.span());
            match known {
                "command" => match self.string(value, &what(known)) {
                    Some(text) if text.trim().is_empty() => self.error(
                        value.span(),
                        format!("the `command` of MCP server `{server}` is empty"),
                        "name the program to start, such as `crm-mcp` or `/usr/local/bin/crm-mcp`",
                    ),
                    found => command = found,
                },
                "args" => args = self.strings(value, &what(known)).unwrap_or_default(),
                "env" => env = self.env(value, &server),
                "env_vars" => env_vars = self.variable_names(value, &what(known)),
                "cwd" => cwd = self.cwd(value, &server),
                "url" => url = self.url(value, &server),
                "bearer_token_env_var" => {
                    bearer_token_env_var = self.string(value, &what(known)).and_then(|name| {
                        if is_variable_name(&name) {
                            return Some(name);
                        }
                        self.error(
                            value.span(),
                            format!("the `bearer_token_env_var` `{name}` of MCP server `{server}` is not an environment variable name"),
                            "name the variable that holds the token, such as MAIL_TOKEN; the token itself never goes in the file",
                        );
                        None
                    })
                }
                "collection" => {
                    collection = self
                        .string(value, &what(known))
                        .filter(|name| self.prefix(value.span(), name, "collection"));
                }
                "startup_timeout_ms" => startup_timeout_ms = self.timeout(value, &what(known)),
                "tool_timeout_ms" => tool_timeout_ms = self.timeout(value, &what(known)),
                _ => path_arguments = self.path_arguments(value, &server),
            }
        }
        if let Some(collection) = &collection {
            collections.insert(collection.clone());
        }
        self.set_both_ways(&server, &env, &env_vars);
        let transport = match (command, url) {
            (Some(command), None) => {
                if let Some(range) = present.get("bearer_token_env_var") {
                    self.error(
                        range.clone(),
                        format!("MCP server `{server}` runs a `command`, which takes no `bearer_token_env_var`"),
                        "pass a stdio server its token with `env_vars`; `bearer_token_env_var` is for a `url` server",
                    );
                }
                let env_vars = env_vars.into_iter().map(Spanned::into_inner).collect();
                McpTransport::Stdio {
                    command,
                    args: args.into_iter().map(Spanned::into_inner).collect(),
                    env,
                    env_vars,
                    cwd,
                }
            }
            (None, Some(url)) => {
                for key in STDIO_KEYS {
                    if let Some(range) = present.get(key) {
                        self.error(
                            range.clone(),
                            format!("MCP server `{server}` has a `url`, which takes no `{key}`"),
                            format!("`{key}` configures a child process (`command`); remove it, or run the server with `command`"),
                        );
                    }
                }
                McpTransport::Http { url, bearer_token_env_var }
            }
            (Some(_), Some(_)) => {
                let command_span = present.get("command").cloned().unwrap_or_default();
                let url_span = present.get("url").cloned().unwrap_or_default();
                self.errors += 1;
                self.diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        self.span(url_span),
                        format!("MCP server `{server}` has both a `command` and a `url`"),
                    )
                    .with_secondary(self.span(command_span), "the command is here")
                    .with_help(
                        "keep `command` to start a child process over stdio, or `url` to reach a streamable HTTP server",
                    ),
                );
                return None;
            }
            (None, None) => {
                if !present.contains_key("command") && !present.contains_key("url") {
                    self.error(
                        table.span(),
                        format!("MCP server `{server}` has neither a `command` nor a `url`"),
                        "set `command` (and `args`) to start it over stdio, or `url` to reach it over streamable HTTP",
                    );
                }
                return None;
            }
        };
        let collection = collection?;
        (self.errors == errors_before).then(|| McpServer {
            name: server,
            collection,
            transport,
            startup_timeout_ms,
            tool_timeout_ms,
            path_arguments,
            span: self.span(table.span()),
        })
    }

    fn unknown_key(&mut self, key: &Spanned<DeString<'_>>, server: &str) {
        let name = key.get_ref().as_ref();
        // A key cut short (`bearer_token_env`) is too far off for an edit distance.
        let close = did_you_mean(name, SERVER_KEYS)
            .or_else(|| SERVER_KEYS.into_iter().find(|key| name.len() >= 3 && key.starts_with(name)));
        let help = match close {
            Some(close) => format!("did you mean `{close}`?"),
            None => format!("an MCP server takes {}", list_names(&SERVER_KEYS)),
        };
        self.error(key.span(), format!("MCP server `{server}` has an unknown key `{name}`"), help);
    }

    /// An error for each variable a server both sets in `env` and copies in `env_vars`.
    fn set_both_ways(&mut self, server: &str, env: &BTreeMap<String, String>, env_vars: &[Spanned<String>]) {
        for variable in env_vars {
            if env.contains_key(variable.get_ref()) {
                self.error(
                    variable.span(),
                    format!(
                        "MCP server `{server}` both sets {} in `env` and copies it in `env_vars`",
                        variable.get_ref()
                    ),
                    "keep one: `env` for a fixed value, `env_vars` to pass the runner's own",
                );
            }
        }
    }

    /// `env`: a table of variable names to strings. A value under a secret-looking name
    /// is kept but warned about.
    fn env(&mut self, value: &Value<'_>, server: &str) -> BTreeMap<String, String> {
        let message = format!("the `env` of MCP server `{server}` must be a table of strings");
        let Some(entries) = self.table(value, message, "write `env = { NAME = \"value\" }`") else {
            return BTreeMap::new();
        };
        let mut env = BTreeMap::new();
        for (key, entry) in entries.iter() {
            let name = key.get_ref().to_string();
            if !is_variable_name(&name) {
                self.error(
                    key.span(),
                    format!("`{name}` in the `env` of MCP server `{server}` is not an environment variable name"),
                    "use letters, digits and `_`, not starting with a digit",
                );
                continue;
            }
            let Some(text) = self.string(entry, &format!("`env.{name}` of MCP server `{server}`")) else { continue };
            if looks_secret(&name) {
                self.warn(
                    entry.span(),
                    format!("`env.{name}` of MCP server `{server}` writes what looks like a secret into archmax.toml"),
                    format!("set {name} in the runner's environment and pass it with `env_vars = [\"{name}\"]`, so the file can be committed"),
                );
            }
            env.insert(name, text);
        }
        env
    }

    fn cwd(&mut self, value: &Value<'_>, server: &str) -> Option<String> {
        let raw = self.string(value, &format!("`cwd` of MCP server `{server}`"))?;
        match crate::mounts::workspace_path(&raw) {
            Ok(canonical) => Some(canonical),
            Err(_) => {
                self.error(
                    value.span(),
                    format!("the `cwd` `{raw}` of MCP server `{server}` is not a folder inside the workspace"),
                    "give a path relative to the workspace root, such as `tools/crm`; leave `cwd` out to run in the root",
                );
                None
            }
        }
    }

    fn url(&mut self, value: &Value<'_>, server: &str) -> Option<String> {
        let url = self.string(value, &format!("`url` of MCP server `{server}`"))?;
        if let Some(problem) = url_problem(&url) {
            self.error(
                value.span(),
                format!("the `url` of MCP server `{server}` {problem}"),
                "give the server's streamable HTTP endpoint, such as `https://mail.internal/mcp`",
            );
            return None;
        }
        let authority = url.split("://").nth(1).and_then(|rest| rest.split(['/', '?', '#']).next()).unwrap_or("");
        // A secret written in the file would be committed with it and shown in every
        // message naming the server's address: refused, not warned.
        if authority.contains('@') {
            self.error(
                value.span(),
                format!("the `url` of MCP server `{server}` carries credentials"),
                "drop the `user:password@` part and name the variable holding a token in `bearer_token_env_var`",
            );
            return None;
        }
        Some(url)
    }

    fn timeout(&mut self, value: &Value<'_>, what: &str) -> u64 {
        let milliseconds = match value.get_ref() {
            DeValue::Integer(integer) => i64::from_str_radix(integer.as_str(), integer.radix()).ok(),
            _ => None,
        };
        match milliseconds {
            Some(milliseconds) if (1..=MAX_TIMEOUT_MS as i64).contains(&milliseconds) => milliseconds as u64,
            _ => {
                let shown = self.shown(value);
                self.error(
                    value.span(),
                    format!("{what} is {shown}, outside 1 to {MAX_TIMEOUT_MS} milliseconds"),
                    "give a whole number of milliseconds from 1 to 600000 (ten minutes)",
                );
                0
            }
        }
    }

    /// How a value reads in a message: a number as written, anything else by its type.
    fn shown(&self, value: &Value<'_>) -> String {
        match value.get_ref() {
            DeValue::Integer(integer) if integer.radix() == 10 => integer.as_str().to_string(),
            DeValue::Float(float) => float.as_str().to_string(),
            other => format!("a {}", other.type_str()),
        }
    }

    /// `path_arguments`: tool (as the server names it) → argument → access.
    fn path_arguments(&mut self, value: &Value<'_>, server: &str) -> BTreeMap<String, BTreeMap<String, PathAccess>> {
        let help = "write `[mcp_servers.<name>.path_arguments]` with `<tool> = { <argument> = \"read\" }`";
        let message = format!("the `path_arguments` of MCP server `{server}` must be a table");
        let Some(tools) = self.table(value, message, help) else { return BTreeMap::new() };
        let mut found = BTreeMap::new();
        for (tool, arguments) in tools.iter() {
            let tool_name = tool.get_ref().to_string();
            if !is_server_tool_name(&tool_name) {
                self.error(
                    tool.span(),
                    format!("`{tool_name}` in the `path_arguments` of MCP server `{server}` is not a tool name"),
                    "key it by the tool's name as the server lists it, without the collection prefix",
                );
                continue;
            }
            let message = format!("the path arguments of `{tool_name}` (MCP server `{server}`) must be a table");
            let Some(arguments) = self.table(arguments, message, help) else { continue };
            let mut accesses = BTreeMap::new();
            for (argument, access) in arguments.iter() {
                let spelled = access.get_ref().as_str().unwrap_or("");
                match PathAccess::parse(spelled) {
                    Some(known) => {
                        accesses.insert(argument.get_ref().to_string(), known);
                    }
                    None => {
                        let names = PathAccess::spellings();
                        self.error(
                            access.span(),
                            format!(
                                "the path argument `{}` of `{tool_name}` (MCP server `{server}`) takes an unknown access",
                                argument.get_ref()
                            ),
                            format!("say how the tool uses the path: one of {}", list_names(&names)),
                        );
                    }
                }
            }
            found.insert(tool_name, accesses);
        }
        found
    }

    /// `essential_tools`: host tools on in every state.
    fn essential_tools(&mut self, value: &Value<'_>, collections: &BTreeSet<String>, settings: &mut RunnerSettings) {
        let Some(names) = self.strings(value, "`essential_tools`") else { return };
        for name in self.distinct(names, "`essential_tools`") {
            let range = name.span();
            let name = name.into_inner();
            if let Some((message, help)) = essential_problem(&name) {
                self.error(range, message, help);
                continue;
            }
            match name.split_once("__") {
                Some((collection, _)) if collections.contains(collection) => {}
                Some((collection, _)) => self.warn(
                    range.clone(),
                    format!("essential tool `{name}` belongs to collection `{collection}`, which no MCP server serves"),
                    format!(
                        "add `[mcp_servers.{collection}]`, or a server with `collection = \"{collection}\"`; served now: {}",
                        list_names(&collections.iter().collect::<Vec<_>>())
                    ),
                ),
                None => self.warn(
                    range.clone(),
                    format!("essential tool `{name}` names no collection, so no MCP server serves it"),
                    "MCP tools are named `<collection>__<tool>`, such as `crm__whoami`",
                ),
            }
            settings.essential_tool_spans.insert(name.clone(), self.span(range));
            settings.essential_tools.push(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::parse_runner_settings;
    use archmax_program::diagnostic::Severity;

    /// Each finding as (severity, the text its span covers, message).
    fn findings(text: &str) -> Vec<(Severity, &str, String)> {
        let (_, diagnostics) = parse_runner_settings(FileId(0), text);
        diagnostics
            .into_iter()
            .map(|diagnostic| {
                assert!(diagnostic.help.is_some(), "no help: {}", diagnostic.message);
                let span = diagnostic.span.unwrap_or_else(|| panic!("no span: {}", diagnostic.message));
                (diagnostic.severity, &text[span.start as usize..span.end as usize], diagnostic.message)
            })
            .collect()
    }

    fn errors(text: &str) -> Vec<(&str, String)> {
        findings(text)
            .into_iter()
            .filter(|(severity, ..)| *severity == Severity::Error)
            .map(|(_, covered, message)| (covered, message))
            .collect()
    }

    fn warnings(text: &str) -> Vec<(&str, String)> {
        findings(text)
            .into_iter()
            .filter(|(severity, ..)| *severity == Severity::Warning)
            .map(|(_, covered, message)| (covered, message))
            .collect()
    }

    #[test]
    fn servers_are_read_with_their_defaults() {
        let text = r#"
essential_tools = ["crm__whoami"]

[mcp_servers.crm]
command = "crm-mcp"
args = ["--region", "eu"]
env = { CRM_URL = "https://crm.internal" }
env_vars = ["CRM_TOKEN"]
cwd = "tools/crm"

[mcp_servers.crm.path_arguments]
export = { destination = "write", template = "read" }

[mcp_servers.mail-eu]
url = "https://mail.internal/mcp"
bearer_token_env_var = "MAIL_TOKEN"
collection = "mail"
startup_timeout_ms = 2000
tool_timeout_ms = 600000
"#;
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(settings.essential_tools, ["crm__whoami"]);
        let crm = &settings.mcp_servers["crm"];
        assert_eq!(crm.collection, "crm");
        assert_eq!(
            (crm.startup_timeout_ms, crm.tool_timeout_ms),
            (DEFAULT_STARTUP_TIMEOUT_MS, DEFAULT_TOOL_TIMEOUT_MS)
        );
        assert_eq!(
            crm.transport,
            McpTransport::Stdio {
                command: "crm-mcp".to_string(),
                args: vec!["--region".to_string(), "eu".to_string()],
                env: BTreeMap::from([("CRM_URL".to_string(), "https://crm.internal".to_string())]),
                env_vars: vec!["CRM_TOKEN".to_string()],
                cwd: Some("tools/crm".to_string()),
            }
        );
        assert_eq!(crm.path_arguments["export"]["destination"], PathAccess::Write);
        assert_eq!(crm.path_arguments["export"]["template"], PathAccess::Read);
        assert_eq!(&text[crm.span.start as usize..crm.span.end as usize], "[mcp_servers.crm]");
        let mail = &settings.mcp_servers["mail-eu"];
        assert_eq!((mail.name.as_str(), mail.collection.as_str()), ("mail-eu", "mail"));
        assert_eq!((mail.startup_timeout_ms, mail.tool_timeout_ms), (2000, MAX_TIMEOUT_MS));
        assert_eq!(
            mail.transport,
            McpTransport::Http {
                url: "https://mail.internal/mcp".to_string(),
                bearer_token_env_var: Some("MAIL_TOKEN".to_string())
            }
        );
        let span = settings.essential_tool_spans["crm__whoami"];
        assert_eq!(&text[span.start as usize..span.end as usize], "\"crm__whoami\"");
    }

    #[test]
    fn an_unknown_key_is_refused_at_the_key_with_the_closest_name() {
        let text = "[mcp_servers.crm]\ncomand = \"crm-mcp\"\ncommand = \"crm-mcp\"\n";
        assert_eq!(errors(text), [("comand", "MCP server `crm` has an unknown key `comand`".to_string())]);
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert_eq!(diagnostics[0].help.as_deref(), Some("did you mean `command`?"));
        assert!(settings.mcp_servers.is_empty());
    }

    #[test]
    fn a_server_takes_exactly_one_of_command_and_url() {
        let both = "[mcp_servers.crm]\ncommand = \"crm-mcp\"\nurl = \"https://crm/mcp\"\n";
        assert_eq!(errors(both), [("url", "MCP server `crm` has both a `command` and a `url`".to_string())]);
        let (_, diagnostics) = parse_runner_settings(FileId(0), both);
        let secondary = diagnostics[0].labels[0].span;
        assert_eq!(&both[secondary.start as usize..secondary.end as usize], "command");
        let neither = "[mcp_servers.crm]\nargs = [\"x\"]\n";
        assert_eq!(
            errors(neither),
            [("[mcp_servers.crm]", "MCP server `crm` has neither a `command` nor a `url`".to_string())]
        );
        assert_eq!(
            errors("[mcp_servers.crm]\ncommand = \" \"\n"),
            [("\" \"", "the `command` of MCP server `crm` is empty".to_string())]
        );
    }

    #[test]
    fn transport_keys_belong_to_their_transport() {
        let text = "[mcp_servers.mail]\nurl = \"https://mail/mcp\"\nenv_vars = [\"X\"]\ncwd = \"tools\"\n\n[mcp_servers.crm]\ncommand = \"crm\"\nbearer_token_env_var = \"T\"\n";
        assert_eq!(
            errors(text),
            [
                (
                    "bearer_token_env_var",
                    "MCP server `crm` runs a `command`, which takes no `bearer_token_env_var`".to_string()
                ),
                ("env_vars", "MCP server `mail` has a `url`, which takes no `env_vars`".to_string()),
                ("cwd", "MCP server `mail` has a `url`, which takes no `cwd`".to_string()),
            ]
        );
    }

    #[test]
    fn names_that_cannot_prefix_tools_are_refused() {
        let text = r#"
[mcp_servers."Crm!"]
command = "a"
[mcp_servers.crm__eu]
command = "a"
[mcp_servers.archmax-tools]
command = "a"
[mcp_servers.crm_]
command = "a"
[mcp_servers.ok]
command = "a"
collection = "mail__eu"
"#;
        let found = errors(text);
        assert_eq!(
            found,
            [
                ("\"Crm!\"", "the MCP server name `Crm!` may hold only letters, digits, `-` and `_`".to_string()),
                (
                    "archmax-tools",
                    "the MCP server name `archmax-tools` starts with `archmax`, which the runtime's own tools use"
                        .to_string()
                ),
                ("crm_", "the MCP server name `crm_` would blur the `__` between collection and tool".to_string()),
                (
                    "crm__eu",
                    "the MCP server name `crm__eu` would blur the `__` between collection and tool".to_string()
                ),
                (
                    "\"mail__eu\"",
                    "the collection `mail__eu` would blur the `__` between collection and tool".to_string()
                ),
            ]
        );
        assert!(parse_runner_settings(FileId(0), text).0.mcp_servers.is_empty());
    }

    #[test]
    fn timeouts_must_lie_between_a_millisecond_and_ten_minutes() {
        let text = "[mcp_servers.a]\ncommand = \"a\"\nstartup_timeout_ms = 0\ntool_timeout_ms = 600001\n[mcp_servers.b]\ncommand = \"b\"\ntool_timeout_ms = \"10s\"\n[mcp_servers.c]\ncommand = \"c\"\nstartup_timeout_ms = 1\n";
        assert_eq!(
            errors(text),
            [
                ("0", "`startup_timeout_ms` of MCP server `a` is 0, outside 1 to 600000 milliseconds".to_string()),
                (
                    "600001",
                    "`tool_timeout_ms` of MCP server `a` is 600001, outside 1 to 600000 milliseconds".to_string()
                ),
                (
                    "\"10s\"",
                    "`tool_timeout_ms` of MCP server `b` is a string, outside 1 to 600000 milliseconds".to_string()
                ),
            ]
        );
        let (settings, _) = parse_runner_settings(FileId(0), text);
        assert_eq!(settings.mcp_servers.keys().collect::<Vec<_>>(), ["c"]);
        assert_eq!(settings.mcp_servers["c"].startup_timeout_ms, 1);
    }

    #[test]
    fn a_url_must_reach_an_http_server() {
        let text = "[mcp_servers.a]\nurl = \"ftp://files/mcp\"\n[mcp_servers.b]\nurl = \"https:///mcp\"\n[mcp_servers.c]\nurl = \"http://mail internal/mcp\"\n";
        assert_eq!(
            errors(text),
            [
                ("\"ftp://files/mcp\"", "the `url` of MCP server `a` is not an http:// or https:// URL".to_string()),
                ("\"https:///mcp\"", "the `url` of MCP server `b` names no host".to_string()),
                ("\"http://mail internal/mcp\"", "the `url` of MCP server `c` holds whitespace".to_string()),
            ]
        );
        let credentials = "[mcp_servers.a]\nurl = \"https://me:pw@mail/mcp\"\n";
        assert!(warnings(credentials).is_empty());
        assert_eq!(
            errors(credentials),
            [("\"https://me:pw@mail/mcp\"", "the `url` of MCP server `a` carries credentials".to_string())]
        );
    }

    #[test]
    fn variable_names_must_be_variable_names() {
        let text = "[mcp_servers.a]\ncommand = \"a\"\nenv = { 1X = \"v\" }\nenv_vars = [\"bad-name\", \"GOOD\"]\n[mcp_servers.b]\nurl = \"https://b/mcp\"\nbearer_token_env_var = \"MAIL TOKEN\"\n[mcp_servers.c]\ncommand = \"c\"\nenv = { SAME = \"v\" }\nenv_vars = [\"SAME\"]\n";
        assert_eq!(
            errors(text),
            [
                ("1X", "`1X` in the `env` of MCP server `a` is not an environment variable name".to_string()),
                (
                    "\"bad-name\"",
                    "`bad-name` in `env_vars` of MCP server `a` is not an environment variable name".to_string()
                ),
                (
                    "\"MAIL TOKEN\"",
                    "the `bearer_token_env_var` `MAIL TOKEN` of MCP server `b` is not an environment variable name"
                        .to_string()
                ),
                ("\"SAME\"", "MCP server `c` both sets SAME in `env` and copies it in `env_vars`".to_string()),
            ]
        );
    }

    #[test]
    fn a_secret_looking_literal_is_kept_but_warned_about_without_quoting_it() {
        let text = "[mcp_servers.crm]\ncommand = \"crm\"\nenv = { CRM_URL = \"https://crm\", CRM_API_TOKEN = \"tok_live_1\", DB_PASSWORD = \"hunter2\", SIGNING_KEY = \"k\" }\nenv_vars = [\"A\", \"A\"]\n";
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert!(diagnostics.iter().all(|diagnostic| !diagnostic.is_error()), "{diagnostics:?}");
        assert!(settings.mcp_servers.contains_key("crm"));
        assert_eq!(
            warnings(text),
            [
                (
                    "\"tok_live_1\"",
                    "`env.CRM_API_TOKEN` of MCP server `crm` writes what looks like a secret into archmax.toml"
                        .to_string()
                ),
                (
                    "\"hunter2\"",
                    "`env.DB_PASSWORD` of MCP server `crm` writes what looks like a secret into archmax.toml"
                        .to_string()
                ),
                (
                    "\"k\"",
                    "`env.SIGNING_KEY` of MCP server `crm` writes what looks like a secret into archmax.toml"
                        .to_string()
                ),
                ("\"A\"", "`env_vars` of MCP server `crm` lists `A` twice".to_string()),
            ]
        );
        for diagnostic in &diagnostics {
            let said = format!("{} {}", diagnostic.message, diagnostic.help.as_deref().unwrap_or(""));
            assert!(!said.contains("tok_live_1") && !said.contains("hunter2"), "{said}");
        }
        assert_eq!(diagnostics[0].code, Code::HostConfigSuspect);
    }

    #[test]
    fn cwd_and_path_arguments_are_checked() {
        let text = "[mcp_servers.a]\ncommand = \"a\"\ncwd = \"../elsewhere\"\n[mcp_servers.a.path_arguments]\nexport = { target = \"overwrite\" }\n\"bad tool\" = { file = \"read\" }\n";
        assert_eq!(
            errors(text),
            [
                (
                    "\"../elsewhere\"",
                    "the `cwd` `../elsewhere` of MCP server `a` is not a folder inside the workspace".to_string()
                ),
                ("\"bad tool\"", "`bad tool` in the `path_arguments` of MCP server `a` is not a tool name".to_string()),
                (
                    "\"overwrite\"",
                    "the path argument `target` of `export` (MCP server `a`) takes an unknown access".to_string()
                ),
            ]
        );
    }

    #[test]
    fn essential_tools_must_be_host_tools_some_server_serves() {
        let text = r#"
essential_tools = ["crm__whoami", "billing__whoami", "whoami", "read_file", "archmax_advance", "archmax_workflow_refunds", "task", "archmax_mine", "bad name", "crm__whoami"]

[mcp_servers.crm]
command = "crm"
"#;
        assert_eq!(
            errors(text),
            [
                ("\"read_file\"", "`read_file` in `essential_tools` is one of the runtime's own tools".to_string()),
                (
                    "\"archmax_advance\"",
                    "`archmax_advance` in `essential_tools` is one of the runtime's own tools".to_string()
                ),
                (
                    "\"archmax_workflow_refunds\"",
                    "`archmax_workflow_refunds` in `essential_tools` is one of the runtime's own tools".to_string()
                ),
                ("\"task\"", "`task` cannot be granted to any state".to_string()),
                (
                    "\"archmax_mine\"",
                    "`archmax_mine` in `essential_tools` uses the `archmax_` prefix the runtime reserves".to_string()
                ),
                ("\"bad name\"", "`bad name` in `essential_tools` is not a tool name".to_string()),
            ]
        );
        assert_eq!(
            warnings(text),
            [
                ("\"crm__whoami\"", "`essential_tools` lists `crm__whoami` twice".to_string()),
                (
                    "\"billing__whoami\"",
                    "essential tool `billing__whoami` belongs to collection `billing`, which no MCP server serves"
                        .to_string()
                ),
                ("\"whoami\"", "essential tool `whoami` names no collection, so no MCP server serves it".to_string()),
            ]
        );
        let (settings, _) = parse_runner_settings(FileId(0), text);
        assert_eq!(settings.essential_tools, ["crm__whoami", "billing__whoami", "whoami"]);
        assert_eq!(
            errors("essential_tools = \"crm__whoami\"\n"),
            [("\"crm__whoami\"", "`essential_tools` must be an array of strings, not string".to_string())]
        );
    }

    #[test]
    fn a_bad_server_leaves_the_others_and_the_connections_in_place() {
        let text = "[connections.hooks]\nsecret_env = \"HOOK_SECRET\"\n\n[mcp_servers.bad]\ncommand = 1\n\n[mcp_servers.good]\ncommand = \"good\"\n\n[mcp_servers.table]\n";
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert_eq!(settings.mcp_servers.keys().collect::<Vec<_>>(), ["good"]);
        assert!(settings.connections.contains_key("hooks"));
        assert_eq!(
            errors(text),
            [
                ("1", "`command` of MCP server `bad` must be a string, not integer".to_string()),
                ("[mcp_servers.table]", "MCP server `table` has neither a `command` nor a `url`".to_string()),
            ]
        );
        assert!(diagnostics.iter().all(|diagnostic| diagnostic.code == Code::HostConfig));
        assert_eq!(errors("mcp_servers = [1]\n"), [("[1]", "`mcp_servers` must be a table of servers".to_string())]);
    }

    #[test]
    fn the_environment_check_names_each_missing_variable_at_its_server() {
        let text = "[mcp_servers.crm]\ncommand = \"crm\"\nenv_vars = [\"CRM_TOKEN\", \"CRM_REGION\", \"CRM_EMPTY\"]\n\n[mcp_servers.mail]\nurl = \"https://mail/mcp\"\nbearer_token_env_var = \"MAIL_TOKEN\"\n\n[mcp_servers.open]\nurl = \"https://open/mcp\"\n";
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let env = |name: &str| match name {
            "CRM_REGION" => Some("eu".to_string()),
            "CRM_EMPTY" => Some(String::new()),
            _ => None,
        };
        let missing = check_environment(&settings, env);
        let found: Vec<(&str, &str)> = missing
            .iter()
            .map(|diagnostic| {
                let span = diagnostic.span.unwrap_or(Span::file_start(FileId(0)));
                (&text[span.start as usize..span.end as usize], diagnostic.message.as_str())
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "[mcp_servers.crm]",
                    "MCP server `crm` takes CRM_TOKEN from the environment (`env_vars`), but it is not set"
                ),
                (
                    "[mcp_servers.crm]",
                    "MCP server `crm` takes CRM_EMPTY from the environment (`env_vars`), but it is not set"
                ),
                (
                    "[mcp_servers.mail]",
                    "MCP server `mail` takes MAIL_TOKEN from the environment (`bearer_token_env_var`), but it is not set"
                ),
            ]
        );
        assert!(missing.iter().all(|diagnostic| diagnostic.code == Code::HostConfig && diagnostic.help.is_some()));
        let everything = |_: &str| Some("set".to_string());
        assert!(check_environment(&settings, everything).is_empty());
    }

    #[test]
    fn the_mount_reader_accepts_the_mcp_keys() {
        let text =
            "essential_tools = [\"crm__whoami\"]\n[mcp_servers.crm]\ncommand = \"crm\"\n[mounts.\"reference/\"]\n";
        let (table, diagnostics) = crate::mounts::parse_mounts(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert!(table.by_name("reference").is_some());
    }
}
