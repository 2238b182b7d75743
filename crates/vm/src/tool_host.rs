//! The tool host seam: where the interpreter goes for a tool it does not implement.
//!
//! The runtime implements its control tools, sub-workflow calls and the standard
//! library's file tools itself. Every other granted tool (`crm__lookup`, `send_email`)
//! is asked of the runtime's [`ToolHost`]. The kernel has decided the call before the host
//! sees it, so a host never decides governance; it only answers.
//!
//! Implementations:
//! - [`Mocks`]: a case's declared results (`mocks:`), which answer an allowed call of any
//!   tool but the runtime's controls, built-ins included; the interpreter asks them first.
//! - [`NoHost`]: provides nothing (the default).
//! - the `archmax-mcp` crate's host: the servers `archmax.toml` configures, over the Model
//!   Context Protocol.
//!
//! A host's [`ToolHost::catalog`] lists what it provides with each tool's schema; the
//! interpreter merges the granted ones into the surface the model is shown, and takes
//! each tool's path arguments from it so `paths:` guards and zone safety govern them.
//! Only a tool the catalog listed when the kernel decided the call is sent to the host,
//! and its declared path arguments are sent as the real paths decided (inside a mount's
//! source, or the session's own folder when the store keeps one on this machine). The
//! catalog is asked for only when a state's surface holds a host tool, so a host may
//! start its servers lazily there.

#[cfg(feature = "frontend")]
pub mod survey;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use archmax_program::tools::PathAccess;

/// A boxed `Send` future, the return type of every [`ToolHost`] method.
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One tool a host provides.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTool {
    /// The name the model calls it by (`crm__lookup`).
    pub name: String,
    /// Who serves it, as events name it (an MCP server's name from `archmax.toml`).
    pub server: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// The arguments that name workspace paths, and how the tool uses each. The kernel
    /// canonicalizes and governs them as it does a file tool's.
    pub paths: Vec<(String, PathAccess)>,
}

/// What a host currently provides.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub tools: Vec<HostTool>,
    /// Servers that could not be asked, each said once in words a person can act on
    /// (which server, why, the tail of its stderr). Never carries a secret.
    pub problems: Vec<String>,
}

impl Catalog {
    pub fn tool(&self, name: &str) -> Option<&HostTool> {
        self.tools.iter().find(|tool| tool.name == name)
    }
}

/// One allowed call, as the host receives it.
#[derive(Clone, Copy, Debug)]
pub struct HostCall<'a> {
    pub session: &'a str,
    /// The key a tool that must not act twice keeps ([`idempotency_key`]); empty where
    /// the host cannot act (a case's mocks).
    pub idempotency_key: &'a str,
    /// The state the call is made in.
    pub state: &'a str,
    /// The call's id in the transcript.
    pub call_id: &'a str,
    /// The tool's full name (after name resolution).
    pub tool: &'a str,
    /// The connection the deciding tools entry names, which picks the server when several
    /// serve one collection.
    pub connection: Option<&'a str>,
    /// The arguments the kernel allowed (`${{…}}` substituted).
    pub args: &'a Value,
}

/// A key naming one host call for a tool that must not act twice: the SHA-256, in hex, of
/// the session, the step the call belongs to (the number the session's next commit takes),
/// the call's place among the step's host calls, the tool, and its arguments as the kernel
/// decided them (workspace paths, not the real paths a server is handed, which differ from
/// process to process), with object members in sorted order. Each part is written after
/// its length, so no two calls hash the same bytes. A step redone after its runner died
/// (its calls were never committed) makes the same calls under the same keys, as long as
/// its model asks the same in the same order; two identical calls of one step differ in
/// place. The MCP host sends it in the call's `_meta` as `archmax/idempotencyKey`.
pub fn idempotency_key(session: &str, step: u64, place: u64, tool: &str, decided: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for part in [session, &step.to_string(), &place.to_string(), tool, &canonical_json(decided)] {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part.as_bytes());
    }
    digest.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `value` as JSON text with every object's members sorted by name.
fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(members) => {
            let mut names: Vec<&String> = members.keys().collect();
            names.sort();
            let inner: Vec<String> = names
                .into_iter()
                .map(|name| format!("{}:{}", Value::String(name.clone()), canonical_json(&members[name])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// One piece of a tool's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    /// Binary content (an image or audio clip); the runtime writes it under `scratchpad/`
    /// and tells the model the path.
    Blob {
        mime_type: String,
        data: Vec<u8>,
    },
    /// An embedded resource's text.
    ResourceText {
        uri: String,
        mime_type: Option<String>,
        text: String,
    },
    /// A link to a resource the server holds.
    ResourceLink {
        uri: String,
        name: String,
    },
}

/// A host's answer to one call.
#[derive(Clone, Debug, PartialEq)]
pub struct HostAnswer {
    /// Who answered (for events).
    pub server: String,
    pub content: Vec<Content>,
    /// The tool reported an error (MCP's `isError`): the model reads an error answer.
    pub is_error: bool,
}

impl HostAnswer {
    /// A plain text answer.
    pub fn text(server: impl Into<String>, text: impl Into<String>) -> HostAnswer {
        HostAnswer { server: server.into(), content: vec![Content::Text(text.into())], is_error: false }
    }
}

/// Why a host did not answer a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// This host has no such tool; the next host (or the standard library) is asked.
    #[error("no host provides `{0}`")]
    NotProvided(String),
    /// The tool exists but the call failed before the tool answered: the server crashed,
    /// timed out, would not start, or broke the protocol. The model reads `message` as an
    /// error answer; it never carries a secret.
    #[error("{message}")]
    Failed { server: String, message: String },
}

/// Anything that answers the tools the runtime does not implement itself.
pub trait ToolHost: Send + Sync {
    /// What this host provides now. Cheap after the first call; a host may start its
    /// servers here.
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>>;

    /// Answers one allowed call, or says it does not provide the tool. Dropping the
    /// future cancels the call.
    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>>;

    /// Whether a tool of this name could be this host's without asking the catalog
    /// (MCP tools are `<collection>__<action>`). Lets the interpreter skip the catalog
    /// for built-ins.
    fn may_provide(&self, name: &str) -> bool {
        let _ = name;
        true
    }

    /// The catalog as far as the host has it without starting or reaching a server it
    /// has not yet started, or `None`. The interpreter asks this, not [`ToolHost::catalog`],
    /// to tell a host tool a state does not grant from a name no one provides, so such a
    /// call never starts a server. A host whose catalog costs nothing to build may answer
    /// it whole (the default).
    fn known_catalog(&self) -> HostFuture<'_, Option<Arc<Catalog>>> {
        Box::pin(async move { Some(self.catalog().await) })
    }
}

/// What a runtime is given for tools it does not implement: a host and the host's
/// essential tools. The default provides nothing.
#[derive(Clone)]
pub struct HostTools {
    pub host: Arc<dyn ToolHost>,
    /// On in every state (the spec's `essentialTools`), by full name.
    pub essential: Vec<String>,
}

impl Default for HostTools {
    fn default() -> HostTools {
        HostTools { host: Arc::new(NoHost), essential: Vec::new() }
    }
}

/// The host that provides nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHost;

impl ToolHost for NoHost {
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
        Box::pin(async { Arc::new(Catalog::default()) })
    }

    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
        Box::pin(async move { Err(HostError::NotProvided(call.tool.to_string())) })
    }

    fn may_provide(&self, _name: &str) -> bool {
        false
    }
}

/// The server name events give a mocked answer.
pub(crate) const MOCK_SERVER: &str = "mock";

/// A case's declared results: `{ tool, whenInput?, result }`. The first mock (in
/// declaration order) whose tool matches and whose `when_input` partially matches the
/// call's arguments answers it; the tool never runs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mocks(pub Vec<crate::runtime::Mock>);

impl Mocks {
    /// The mock answering a call of `tool` with `args`, if any.
    pub fn find(&self, tool: &str, args: &Value) -> Option<&crate::runtime::Mock> {
        self.0
            .iter()
            .find(|mock| mock.tool == tool && mock.when_input.as_ref().is_none_or(|pattern| pattern.matches(args)))
    }
}

impl ToolHost for Mocks {
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
        // Mocks declare results, not schemas: a mocked host tool is shown as granted.
        Box::pin(async { Arc::new(Catalog::default()) })
    }

    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
        let answer = match self.find(call.tool, call.args) {
            Some(mock) => Ok(HostAnswer::text(MOCK_SERVER, mock.answer())),
            None => Err(HostError::NotProvided(call.tool.to_string())),
        };
        Box::pin(async move { answer })
    }

    fn may_provide(&self, name: &str) -> bool {
        self.0.iter().any(|mock| mock.tool == name)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::idempotency_key;

    #[test]
    fn a_redone_call_has_its_key_and_every_other_call_another() {
        let key = |session: &str, step: u64, place: u64, tool: &str, args: serde_json::Value| {
            idempotency_key(session, step, place, tool, &args)
        };
        let first = key("s1", 3, 0, "bank__pay", json!({ "amount": 42, "to": "acme" }));
        assert_eq!(first.len(), 64);
        assert!(first.chars().all(|c| c.is_ascii_hexdigit()), "{first}");
        assert_eq!(key("s1", 3, 0, "bank__pay", json!({ "to": "acme", "amount": 42 })), first, "members in any order");
        for other in [
            key("s1", 3, 1, "bank__pay", json!({ "amount": 42, "to": "acme" })),
            key("s1", 4, 0, "bank__pay", json!({ "amount": 42, "to": "acme" })),
            key("s2", 3, 0, "bank__pay", json!({ "amount": 42, "to": "acme" })),
            key("s1", 3, 0, "bank__refund", json!({ "amount": 42, "to": "acme" })),
            key("s1", 3, 0, "bank__pay", json!({ "amount": 43, "to": "acme" })),
            key("s1", 3, 0, "bank__pay", json!({ "amount": 42, "to": { "name": "acme" } })),
        ] {
            assert_ne!(other, first);
        }
        // Lengths go first: moving a character from one part to the next is another call.
        assert_ne!(key("s1", 31, 0, "x", json!(null)), key("s13", 1, 0, "x", json!(null)));
    }
}
