//! Host tools at the call site and on the surface: name resolution, the host's catalog
//! (schemas and path arguments), the connection a grant names, and turning a host's
//! answer into the text the model reads.
//!
//! The one thing to know: nothing here decides governance. The kernel decides every host
//! call as it does a built-in's, with the path arguments the host declares; this module
//! only finds the tool, shows it, and reads its answer. Binary content never enters the
//! transcript: it is written under `scratchpad/tool-output/` and the model is told the
//! path.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use archmax_program::program::{StateId, ToolKind};
use archmax_program::tools::{DEFAULT_TOOLS, NOTE_TOOL, PathAccess, RUNTIME_TOOLS, delegation_target};
use archmax_program::zones::Zone;
use archmax_stdlib::vfs::{DiskVfs, HandedPath, HostPathError};

use crate::model::ToolDefinition;
use crate::session::ToolCall;
use crate::tool_host::{Catalog, Content, HostAnswer, HostCall, HostTool, ToolHost as _};

use super::Turn;
use super::calls::Answer;

/// Where binary tool content is written, inside the always-writable scratchpad.
pub(super) const TOOL_OUTPUT_DIR: &str = "scratchpad/tool-output";

impl<'r> Turn<'r> {
    /// The tools offered in state `id` by name: its surface and the host's essential tools.
    fn offered(&self, id: StateId) -> Vec<&str> {
        let program = self.program();
        let surface = self.workflow.surface(self.state(id).surface);
        let mut offered: Vec<&str> = surface.tools.iter().map(|tool| program.str(tool.name)).collect();
        for essential in self.runtime.essential_tools() {
            if !offered.contains(&essential.as_str()) {
                offered.push(essential);
            }
        }
        offered
    }

    /// Whether `name` is a tool the call site knows in state `id`: one it offers (its
    /// surface, the essential tools), one the runtime defines, one the state grants, or a
    /// sub-workflow; the kernel decides each. Any other name is answered as no tool,
    /// unless [`Turn::is_provided`] finds it is a host tool granted elsewhere or nowhere.
    pub(super) fn is_known(&self, id: StateId, name: &str) -> bool {
        let program = self.program();
        self.offered(id).contains(&name)
            || RUNTIME_TOOLS.contains(&name)
            || DEFAULT_TOOLS.contains(&name)
            || matches!(name, "task" | "eval")
            || name == NOTE_TOOL
            || self.state(id).guards.grants.iter().any(|grant| program.str(grant.tool) == name)
            || delegation_target(name).is_some()
    }

    /// Whether `name` is a host tool that exists for this session although state `id` may
    /// not offer it: some state of the workflow grants it, a case's mock answers it, or
    /// the host's catalog lists it. A call to one the state does not grant is a governance
    /// decision the kernel makes and the audit records, not a name that is no tool. The
    /// catalog is read only as far as the host already has it
    /// ([`crate::tool_host::ToolHost::known_catalog`]), so such a call never starts a server.
    pub(super) async fn is_provided(&self, name: &str) -> bool {
        let program = self.program();
        let granted = |state: &archmax_program::program::StateProgram| {
            state.guards.grants.iter().any(|grant| program.str(grant.tool) == name)
        };
        if self.workflow.states.iter().any(granted) || self.runtime.mocks().may_provide(name) {
            return true;
        }
        let host = self.runtime.tool_host();
        host.may_provide(name) && host.known_catalog().await.is_some_and(|catalog| catalog.tool(name).is_some())
    }

    /// Resolves the name a model called: `Ok(None)` when it names a tool as it is,
    /// `Ok(Some(full))` when it is the unambiguous `<action>` of one offered
    /// `<collection>__<action>`, `Err(candidates)` when several offered tools end so.
    pub(super) fn resolve_name(&self, id: StateId, called: &str) -> Result<Option<String>, Vec<String>> {
        if called.is_empty() || self.is_known(id, called) {
            return Ok(None);
        }
        let offered = self.offered(id);
        let suffix = format!("__{called}");
        let candidates: Vec<String> =
            offered.iter().filter(|name| name.ends_with(&suffix)).map(|name| name.to_string()).collect();
        match candidates.len() {
            0 => Ok(None),
            1 => Ok(candidates.into_iter().next()),
            _ => Err(candidates),
        }
    }

    /// The host's catalog (the host caches it; it may start servers the first time).
    async fn catalog(&self) -> Arc<Catalog> {
        self.runtime.tool_host().catalog().await
    }

    /// A case's declared result for this call (the [`crate::tool_host::Mocks`] host),
    /// as the model reads it; `None` when no mock matches.
    pub(super) async fn mocked(&self, state: &str, call: &ToolCall, args: &Value) -> Option<String> {
        let asked = HostCall {
            session: &self.session.id,
            // A case's mocks answer from the case; nothing acts.
            idempotency_key: "",
            state,
            call_id: &call.id,
            tool: &call.name,
            connection: None,
            args,
        };
        let answered = self.runtime.mocks().call(asked).await.ok()?;
        Some(
            answered
                .content
                .into_iter()
                .filter_map(|content| match content {
                    Content::Text(text) => Some(text),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The host's entry for `name` (its server, schema and path arguments), if the host
    /// provides it. Asks the catalog only for a name the host could provide, so a state
    /// without host tools never starts a server.
    pub(super) async fn host_tool(&self, name: &str) -> Option<HostTool> {
        if !self.runtime.tool_host().may_provide(name) {
            return None;
        }
        self.catalog().await.tool(name).cloned()
    }

    /// The connection the grant deciding `tool` in state `id` names.
    pub(super) fn connection_of(&self, id: StateId, tool: &str) -> Option<String> {
        let program = self.program();
        self.state(id)
            .guards
            .grants
            .iter()
            .find(|grant| program.str(grant.tool) == tool)
            .and_then(|grant| grant.connection)
            .map(|connection| program.str(connection).to_string())
    }

    /// The tool definitions the model is shown in state `id`: the precomputed surface,
    /// each host tool with its host's real schema, then the essential tools the state
    /// does not deny by name. Borrowed when the state has no host tool to merge.
    pub(super) async fn definitions(&self, id: StateId) -> Cow<'r, [ToolDefinition]> {
        let state = self.state(id);
        let runtime: &'r crate::runtime::Runtime = self.runtime;
        let precomputed: &'r [ToolDefinition] = runtime.definitions(self.workflow_id, state.surface);
        let program = self.program();
        let surface = self.workflow.surface(state.surface);
        let essential: Vec<&String> = runtime
            .essential_tools()
            .iter()
            .filter(|tool| !surface.tools.iter().any(|shown| program.str(shown.name) == tool.as_str()))
            .filter(|tool| !self.denied_by_name(id, tool))
            .collect();
        let hosted = surface
            .tools
            .iter()
            .any(|tool| tool.kind == ToolKind::Host && runtime.tool_host().may_provide(program.str(tool.name)));
        if essential.is_empty() && !hosted {
            return Cow::Borrowed(precomputed);
        }
        let catalog = self.catalog().await;
        let mut merged: Vec<ToolDefinition> = precomputed
            .iter()
            .zip(&surface.tools)
            .map(|(definition, tool)| match catalog.tool(&definition.name) {
                Some(hosted) if tool.kind == ToolKind::Host => shown(hosted),
                _ => definition.clone(),
            })
            .collect();
        for tool in essential {
            match catalog.tool(tool) {
                Some(hosted) => merged.push(shown(hosted)),
                None => merged.push(crate::prompt::host_tool_definition(tool)),
            }
        }
        Cow::Owned(merged)
    }

    /// Whether a bare denial names `tool` in state `id` (its own `tools.forbid`, this
    /// workflow's `forbid_always`, or a caller's): what hides a tool from the surface.
    pub(super) fn denied_by_name(&self, id: StateId, tool: &str) -> bool {
        let bare_names = |program: &archmax_program::program::Program, rules: &[archmax_program::program::Rule]| {
            rules.iter().any(|rule| rule.is_bare() && rule.tool.is_none_or(|name| program.str(name) == tool))
        };
        let program = self.program();
        bare_names(program, &self.state(id).guards.forbid)
            || bare_names(program, &self.workflow.forbid_always)
            || self.inherited.iter().any(|caller| bare_names(caller.program, &caller.source.forbid_always))
    }

    /// The arguments a host tool's server receives: each declared path argument, which the
    /// kernel decided as a workspace path, turned into the ABSOLUTE real path it names on
    /// this machine (inside a mount's source, or inside the session's own folder), so the
    /// server opens exactly what was decided and nothing a different reading of the text
    /// would reach (`/…`, `~`, the runner's own files beside the workspace, the server's
    /// own working directory). Each is resolved beneath its root as the file tools
    /// resolve it (`DiskVfs::host_path`): a symbolic link anywhere on the way, or a
    /// planted hard link in the session's folder, refuses the call (`zone.link`).
    ///
    /// Each real path is handed over through an open handle on what was checked
    /// (`/proc/<pid>/fd/<n>/…`, see `DiskVfs::host_path`): the returned pins keep those
    /// handles open, so the caller holds them until the server has answered.
    pub(super) fn real_paths(
        &self,
        args: &Value,
        declared: &[(String, PathAccess)],
    ) -> Result<(Value, Vec<HandedPath>), HostPathProblem> {
        let Value::Object(map) = args else { return Ok((args.clone(), Vec::new())) };
        let mut out = map.clone();
        let mut pins = Vec::new();
        let mut hand = |name: &str, text: &str| -> Result<Value, HostPathProblem> {
            let handed = self.real_path(name, text)?;
            let path = Value::String(handed.path().to_string_lossy().into_owned());
            pins.push(handed);
            Ok(path)
        };
        for (name, _) in declared {
            let translated = match map.get(name) {
                Some(Value::String(text)) => hand(name, text)?,
                Some(Value::Array(items)) => Value::Array(
                    items
                        .iter()
                        .map(|item| match item {
                            Value::String(text) => hand(name, text),
                            other => Ok(other.clone()),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                _ => continue,
            };
            out.insert(name.clone(), translated);
        }
        Ok((Value::Object(out), pins))
    }

    fn real_path(&self, argument: &str, written: &str) -> Result<HandedPath, HostPathProblem> {
        let canonical = archmax_program::zones::canonicalize(written)
            .map_err(|_| HostPathProblem::Other(format!("`{argument}` ({written}) is not a workspace path")))?;
        let runtime = self.runtime;
        let (store, inside) = match archmax_program::zones::classify(&canonical, runtime.mounts()) {
            Zone::Mount(index) => {
                let mount = &runtime.mounts().mounts[index];
                let key = mount.key.trim_end_matches('/');
                let rest = canonical.strip_prefix(key).unwrap_or("").trim_start_matches('/');
                (DiskVfs::mount(runtime.root().join(&mount.source)), rest.to_string())
            }
            Zone::Root => {
                return Err(HostPathProblem::Other(format!(
                    "`{argument}` names the whole workspace; name a folder or file inside it"
                )));
            }
            _ => match runtime.store().local_dir(&self.session.id) {
                Some(dir) => (DiskVfs::new(dir), canonical.clone()),
                None => {
                    return Err(HostPathProblem::Other(format!(
                        "`{argument}` ({canonical}) names the session's own files, which this runner's session store keeps where an MCP server cannot open them; give the server a path inside a mount"
                    )));
                }
            },
        };
        match crate::blocking::run_blocking(|| store.host_path(&inside)) {
            Ok(handed) => Ok(handed),
            Err(refused) if refused.is_link() => {
                Err(HostPathProblem::Link { argument: argument.to_string(), path: canonical, refused })
            }
            Err(refused) => Err(HostPathProblem::Other(format!("`{argument}` ({canonical}): {refused}"))),
        }
    }

    /// The text the model reads for a host's answer: text as it is, embedded resources
    /// with their address, links by name, and binary content written under
    /// [`TOOL_OUTPUT_DIR`] and named by path (at most [`MAX_KEPT_PARTS`] parts, each
    /// within the session's quota). Text over [`MAX_ANSWER_TEXT`] bytes is kept whole in a
    /// file and shown cut, with the path, unless the answer is `offloaded` next (a model's
    /// or a grader's call: the offload saves it under `large_tool_results/` instead, so it
    /// is never cut twice). `isError` makes it an error answer.
    pub(super) async fn host_answer(&mut self, call_id: &str, answer: HostAnswer, offloaded: bool) -> Answer {
        let stem = format!("{}-{}", file_stem(call_id), self.session.seq + 1);
        let mut parts: Vec<String> = Vec::with_capacity(answer.content.len());
        let mut kept = 0usize;
        let mut dropped = 0usize;
        let mut dropped_at = 0usize;
        for content in answer.content {
            match content {
                Content::Text(text) => parts.push(text),
                Content::ResourceText { uri, text, .. } => parts.push(format!("Resource {uri}:\n{text}")),
                Content::ResourceLink { uri, name } => parts.push(format!("Resource link `{name}`: {uri}")),
                Content::Blob { .. } if kept >= MAX_KEPT_PARTS => {
                    if dropped == 0 {
                        dropped_at = parts.len();
                    }
                    dropped += 1;
                }
                Content::Blob { mime_type, data } => {
                    kept += 1;
                    let path = format!("{TOOL_OUTPUT_DIR}/{stem}-{kept}.{}", extension(&mime_type));
                    parts.push(match self.keep(&path, &data) {
                        Ok(()) => format!("[{mime_type}, {} bytes, written to {path}]", data.len()),
                        Err(error) => format!("[{mime_type}, {} bytes, which could not be kept: {error}]", data.len()),
                    });
                }
            }
        }
        if dropped > 0 {
            let note = format!("[{dropped} more binary part(s) dropped: at most {MAX_KEPT_PARTS} are kept per answer]");
            parts.insert(dropped_at, note);
        }
        let mut text =
            if parts.is_empty() { "(the tool answered with no content)".to_string() } else { parts.join("\n") };
        if text.len() > MAX_ANSWER_TEXT && !offloaded {
            let path = format!("{TOOL_OUTPUT_DIR}/{stem}.txt");
            let end = archmax_program::text::within_bytes(&text, MAX_ANSWER_TEXT).len();
            let note = match self.keep(&path, text.as_bytes()) {
                Ok(()) => format!("[the answer is {} bytes; the whole of it is in {path}]", text.len()),
                Err(error) => format!("[the answer is {} bytes, cut here; it could not be kept: {error}]", text.len()),
            };
            text.truncate(end);
            text.push('\n');
            text.push_str(&note);
        }
        if answer.is_error { Answer::error(text) } else { Answer::ok(text) }
    }

    /// Writes `bytes` into the session's files under the file tools' bounds.
    pub(super) fn keep(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        let everything = |_: &str| true;
        let context = archmax_stdlib::tools::ToolContext {
            workspace: &self.workspace,
            visible: &everything,
            raw_text: false,
            limits: self.runtime.limits(),
        };
        crate::blocking::run_blocking(|| archmax_stdlib::tools::keep_file("write_file", path, bytes, &context))
            .map_err(|error| error.0)
    }
}

/// Why a host tool's path argument could not be handed to its server.
#[derive(Debug)]
pub(super) enum HostPathProblem {
    /// A link is on the path: the call is refused under `zone.link`.
    Link { argument: String, path: String, refused: HostPathError },
    /// Anything else: the model reads it as an error answer.
    Other(String),
}

/// The most binary parts of one answer kept as files.
pub(crate) const MAX_KEPT_PARTS: usize = 16;
/// The most bytes of a host tool's text answer the model reads in the transcript.
pub(crate) const MAX_ANSWER_TEXT: usize = 64 * 1024;

/// How a host tool is shown to the model: its name, description and input schema.
fn shown(tool: &HostTool) -> ToolDefinition {
    ToolDefinition {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: tool.input_schema.clone(),
    }
}

/// A call id made safe as a file name: the model chose it, so only letters, digits, `-`
/// and `_` are kept, at most 64 of them.
fn file_stem(call_id: &str) -> String {
    let stem: String =
        call_id.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).take(64).collect();
    if stem.is_empty() { "call".to_string() } else { stem }
}

/// The file extension for a MIME type (`bin` for anything not listed).
fn extension(mime_type: &str) -> &'static str {
    match mime_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase().as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "text/plain" => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::{extension, file_stem};

    #[test]
    fn a_hostile_call_id_never_leaves_the_output_folder() {
        assert_eq!(file_stem("../../etc/passwd"), "etcpasswd");
        assert_eq!(file_stem("call_1"), "call_1");
        assert_eq!(file_stem("///"), "call");
        assert_eq!(file_stem(&"a".repeat(500)).len(), 64);
    }

    #[test]
    fn extensions_follow_the_mime_type() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("IMAGE/JPEG; q=1"), "jpg");
        assert_eq!(extension("application/x-unknown"), "bin");
    }
}
