//! Files handed to a trigger's `file`-typed inputs from outside the workspace: the
//! command line's `--file [NAME=]PATH` and the HTTP API's `multipart/form-data` parts.
//!
//! The one thing to know: a handed file becomes a file of the session, never a path on
//! the host. [`Runtime::prepare_handover`] checks every file against its trigger (which
//! input it fills, its `maxSize` and `accept`, no input given twice or also as a value)
//! and names the session path it is kept under, `scratchpad/inputs/<NAME><.ext>`,
//! writing nothing; [`Runtime::check_handed_start`] refuses early what would refuse the
//! start anyway. The host then seeds each input with its path ([`Handover::seed`], locked
//! like every host seed) and hands the files over with the request; the runtime copies
//! them only once it holds the session (its lease, on a shared store) and has accepted
//! the request, just before the seeds are applied. So a refused request leaves the
//! session's files as they were, and a delivery forwarded to a parked child writes into
//! the child's files.
//!
//! The suffix is predictable. For an input with `accept`, it is the entry the sender's
//! file name ends in, matched in any ASCII case with the longest winning
//! (`Backup.TAR.GZ` under `accept: [.gz, .tar.gz]` is kept as `<NAME>.tar.gz`),
//! lowercased; a name that ends in none is refused naming the list. Without `accept` the
//! file keeps its own last extension, made safe. The sender's file name is used for
//! nothing else: it never becomes a path.

use std::path::Path;

use serde_json::{Map, Value};

use archmax_program::program::ValueType;

use crate::runtime::{FieldProblem, InputReason, Refusal, RunError, Runtime, TurnRequest};
use crate::session::Status;

/// Where handed files are kept in a session (the validator's help names it too).
pub const INPUTS_DIR: &str = archmax_program::zones::HANDED_FILES;

/// Who handed the files over, for the words a refusal uses: a flag on the command line
/// or a part of an upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// `archmax run|deliver --file`.
    CommandLine,
    /// `multipart/form-data` on `POST /v1/workflows/{slug}/sessions` or `…/deliver`.
    Upload,
}

impl Sender {
    /// How the sender hands one file over.
    fn file(self) -> &'static str {
        match self {
            Sender::CommandLine => "--file",
            Sender::Upload => "a file part",
        }
    }

    /// How the sender gives values.
    fn values(self) -> &'static str {
        match self {
            Sender::CommandLine => "--variables",
            Sender::Upload => "`variables`",
        }
    }

    /// How the sender names the input a file fills.
    fn naming(self) -> &'static str {
        match self {
            Sender::CommandLine => "write --file NAME=PATH with one of",
            Sender::Upload => "name each file part after one of",
        }
    }
}

/// One file handed over: the input it fills when the sender names one, the name the
/// sender gave it (a path on the command line, a part's file name in an upload), and
/// its bytes, already bounded by the session file limit.
#[derive(Clone, Debug)]
pub struct HandedFile {
    pub input: Option<String>,
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Handed files checked against their trigger, each with the session path it is to be
/// kept under. A host seeds the paths into the request's values ([`Handover::seed`]) and
/// hands the files to the runtime with the request (`TurnRequest::handed`,
/// `DeliverRequest::handed`); the runtime copies them once it holds the session and has
/// accepted the request.
#[derive(Clone, Debug, Default)]
pub struct Handover {
    files: Vec<Checked>,
}

#[derive(Clone, Debug)]
struct Checked {
    input: String,
    path: String,
    file: HandedFile,
}

impl Handover {
    /// The inputs the files fill.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|checked| checked.input.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Seeds each file's input in `variables` with the session path it is kept under.
    pub fn seed(&self, variables: &mut Map<String, Value>) {
        for checked in &self.files {
            variables.insert(checked.input.clone(), Value::String(checked.path.clone()));
        }
    }

    /// Copies every file into session `session`'s own files, called by the runtime with
    /// the session held. An input's earlier handed file under another extension is
    /// removed first, so each input keeps one file however often it is handed over.
    pub(crate) fn write(&self, runtime: &Runtime, session: &str) -> Result<(), RunError> {
        if self.files.is_empty() {
            return Ok(());
        }
        let store = runtime.store().files(session).map_err(RunError::Store)?;
        let limits = runtime.limits();
        crate::blocking::run_blocking(|| {
            let sizes: Vec<(&str, u64)> =
                self.files.iter().map(|checked| (checked.path.as_str(), checked.file.bytes.len() as u64)).collect();
            archmax_stdlib::tools::check_handed_files(store.as_ref(), &limits, &sizes)
                .map_err(|(index, error)| RunError::invalid(self.files[index].input.as_str(), error.0))?;
            let earlier = store.list(INPUTS_DIR).unwrap_or_default();
            for Checked { input, path, file } in &self.files {
                let kept = crate::stdlib::vfs::last_segment(path);
                let stale = earlier.iter().filter(|entry| {
                    !entry.is_dir
                        && entry.name != kept
                        && (entry.name == *input || entry.name.starts_with(&format!("{input}.")))
                });
                for entry in stale {
                    let _ = store.remove(&format!("{INPUTS_DIR}/{}", entry.name));
                }
                store.write(path, &file.bytes).map_err(|error| {
                    RunError::invalid(
                        input.as_str(),
                        format!("`{}` could not be copied into the session: {error}", file.name),
                    )
                })?;
            }
            Ok(())
        })
    }
}

/// A refusal naming the one field that does not hold.
fn problem(field: &str, message: String) -> RunError {
    RunError::InvalidInput {
        message: message.clone(),
        fields: vec![FieldProblem { field: field.to_string(), problem: message }],
        reason: InputReason::Fields,
    }
}

impl Runtime {
    /// Checks `files` against the `file` inputs of `trigger` of `workflow` and names the
    /// session path each is kept under, writing nothing. Every file is checked before any
    /// is accepted, so a refusal names the first problem and leaves nothing behind.
    pub fn prepare_handover(
        &self,
        (workflow, trigger): (&str, &str),
        files: Vec<HandedFile>,
        variables: &Map<String, Value>,
        sender: Sender,
    ) -> Result<Handover, RunError> {
        if files.is_empty() {
            return Ok(Handover::default());
        }
        let program = &self.program();
        let Some((_, declared)) = program.workflow(workflow) else {
            return Err(problem("workflow", format!("there is no workflow `{workflow}`")));
        };
        let Some(entries) = program.trigger(declared, trigger).map(|trigger| &trigger.requires) else {
            return Err(problem("trigger", format!("workflow `{workflow}` has no trigger `{trigger}`")));
        };
        let inputs: Vec<_> = entries.iter().filter(|entry| entry.ty == Some(ValueType::File)).collect();
        let names: Vec<&str> = inputs.iter().map(|entry| program.str(entry.name)).collect();
        let mut checked: Vec<Checked> = Vec::with_capacity(files.len());
        for file in files {
            let input = match (&file.input, names.as_slice()) {
                (Some(name), _) if names.contains(&name.as_str()) => name.clone(),
                (Some(name), _) => {
                    let listed = if names.is_empty() {
                        String::new()
                    } else {
                        format!("; its file inputs are {}", names.join(", "))
                    };
                    return Err(problem(name, format!("trigger `{trigger}` has no file input `{name}`{listed}")));
                }
                (None, [only]) => only.to_string(),
                (None, []) => {
                    return Err(problem("file", format!("trigger `{trigger}` of `{workflow}` takes no file input")));
                }
                (None, several) => {
                    return Err(problem(
                        "file",
                        format!("trigger `{trigger}` takes several files: {} {}", sender.naming(), several.join(", ")),
                    ));
                }
            };
            if variables.contains_key(&input) {
                return Err(problem(
                    &input,
                    format!("`{input}` is given by both {} and {}", sender.file(), sender.values()),
                ));
            }
            let entry = inputs.iter().find(|entry| program.str(entry.name) == input);
            if let Some(max) = entry.and_then(|entry| entry.rules.max_size)
                && file.bytes.len() as u64 > max
            {
                return Err(problem(
                    &input,
                    format!("`{}` is {} bytes; '{input}' takes at most {max}", file.name, file.bytes.len()),
                ));
            }
            if checked.iter().any(|other| other.input == input) {
                return Err(problem(&input, format!("`{input}` is given by {} twice", sender.file())));
            }
            let accepted: Vec<&str> = entry
                .and_then(|entry| entry.rules.accept.as_ref())
                .map(|accept| accept.iter().map(|extension| program.str(*extension)).collect())
                .unwrap_or_default();
            let suffix = if accepted.is_empty() {
                extension(&file.name)
            } else {
                accepted_suffix(&file.name, &accepted).ok_or_else(|| {
                    problem(
                        &input,
                        format!(
                            "`{}` is not a file '{input}' takes: it accepts {}; hand over a file ending in one of them",
                            file.name,
                            accepted.join(", ")
                        ),
                    )
                })?
            };
            let path = format!("{INPUTS_DIR}/{input}{suffix}");
            checked.push(Checked { input, path, file });
        }
        // What no session could keep is refused before one is opened or created; what the
        // session already holds is counted when the files are copied ([`Handover::write`]).
        let limits = self.limits();
        let empty = crate::stdlib::vfs::MemoryVfs::new();
        let sizes: Vec<(&str, u64)> =
            checked.iter().map(|checked| (checked.path.as_str(), checked.file.bytes.len() as u64)).collect();
        if let Some(index) = sizes.iter().position(|(_, bytes)| *bytes > limits.file_bytes) {
            let Checked { input, file, .. } = &checked[index];
            return Err(problem(
                input,
                format!(
                    "`{}` is {} bytes, over the {} a session's file may hold",
                    file.name,
                    file.bytes.len(),
                    archmax_stdlib::limits::bound_in_words(limits.file_bytes)
                ),
            ));
        }
        archmax_stdlib::tools::check_handed_files(&empty, &limits, &sizes)
            .map_err(|(index, error)| problem(&checked[index].input, error.0))?;
        Ok(Handover { files: checked })
    }

    /// What would refuse the start `request` of session `session` before anything is
    /// written, checked before the handed files are copied so a refused start leaves the
    /// session's files as they were: a session of another workflow, one waiting for a
    /// decision (which takes no values), an id reserved for sub-workflows, a disabled
    /// workflow, or a required input nobody gives.
    pub async fn check_handed_start(
        &self,
        request: &TurnRequest,
        session: &str,
        handed: &Handover,
        sender: Sender,
    ) -> Result<(), RunError> {
        let program = self.program();
        let existing = self.store().read(session).await?;
        let parked = existing.as_ref().is_some_and(|state| state.head.status.is_parked());
        if let Some(state) = &existing {
            if state.head.workflow != request.workflow {
                return Err(RunError::invalid(
                    "session",
                    format!(
                        "session `{session}` belongs to workflow `{}`, not `{}`",
                        state.head.workflow, request.workflow
                    ),
                ));
            }
            if parked && state.head.status != Status::AwaitingInput {
                return Err(RunError::invalid(
                    "variables",
                    format!("session `{session}` waits for a decision; files cannot be handed to it"),
                ));
            }
        } else if session.contains('~') {
            return Err(RunError::invalid(
                "session",
                format!(
                    "`{session}` cannot start a session: `~` is reserved for the ids of sub-workflow sessions; choose an id without it"
                ),
            ));
        }
        let Some((_, workflow)) = program.workflow(request.workflow.as_str()) else {
            return Ok(());
        };
        if workflow.disabled && !parked {
            return Err(RunError::refused(
                Refusal::WorkflowDisabled,
                format!("Refusing to start: workflow '{}' is disabled.", request.workflow),
            ));
        }
        let trigger = request.trigger.as_deref().unwrap_or("manual");
        let Some(declared) = program.trigger(workflow, trigger) else {
            return Ok(());
        };
        let given: Vec<&str> = request.variables.keys().map(String::as_str).chain(handed.names()).collect();
        let held = existing.as_ref().map(|state| &state.variables);
        let missing: Vec<String> = declared
            .requires
            .iter()
            .map(|entry| program.str(entry.name))
            .filter(|name| !given.contains(name) && !held.is_some_and(|held| held.contains_key(*name)))
            .map(|name| format!("'{name}'"))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let supply = match sender {
            Sender::CommandLine => "Supply them with `--variables` or `--file`.",
            Sender::Upload => "Supply them in `variables` or as file parts.",
        };
        Err(RunError::invalid(
            "variables",
            format!(
                "Refusing to start: trigger '{trigger}' requires {}, which this run does not supply. {supply}",
                missing.join(", ")
            ),
        ))
    }
}

/// The `accept` entry a handed file's name ends in, in any case, lowercased: the longest
/// one that matches (`.tar.gz` before `.gz`), or `None` when none does.
fn accepted_suffix(name: &str, accepted: &[&str]) -> Option<String> {
    // ASCII case only, as the runtime compares when it checks the input.
    let file_name = Path::new(name).file_name()?.to_string_lossy().to_ascii_lowercase();
    accepted
        .iter()
        .map(|extension| extension.to_ascii_lowercase())
        .filter(|extension| file_name.ends_with(extension.as_str()))
        .max_by_key(String::len)
}

/// The extension a handed file keeps, with its dot: the name's own, made safe (letters,
/// digits, `-`, `_`; at most 16 characters), or nothing.
fn extension(name: &str) -> String {
    let Some(extension) = Path::new(name).extension().and_then(|extension| extension.to_str()) else {
        return String::new();
    };
    let safe: String = extension
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') { c } else { '-' })
        .take(16)
        .collect();
    if safe.is_empty() { String::new() } else { format!(".{safe}") }
}

#[cfg(test)]
mod tests {
    use super::{accepted_suffix, extension};

    #[test]
    fn a_handed_file_keeps_its_own_extension_made_safe() {
        assert_eq!(extension("/tmp/Invoice 2025.pdf"), ".pdf");
        assert_eq!(extension("scan.tar.gz"), ".gz");
        assert_eq!(extension("../../.env"), "");
        assert_eq!(extension("notes"), "");
        assert_eq!(extension("odd.p d$f"), ".p-d-f");
    }

    #[test]
    fn a_handed_file_takes_the_longest_accept_entry_it_ends_in_lowercased() {
        let accepted = [".gz", ".TAR.GZ", ".pdf"];
        assert_eq!(accepted_suffix("/tmp/nightly.tar.gz", &accepted).as_deref(), Some(".tar.gz"));
        assert_eq!(accepted_suffix("logs.GZ", &accepted).as_deref(), Some(".gz"));
        assert_eq!(accepted_suffix("Receipt.PDF", &accepted).as_deref(), Some(".pdf"));
        assert_eq!(accepted_suffix("receipt.docx", &accepted), None);
        assert_eq!(accepted_suffix("receiptpdf", &accepted), None);
    }
}
