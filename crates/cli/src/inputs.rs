//! `--file [NAME=]PATH` on `run` and `deliver`: a file from this machine handed to a
//! `file`-typed input of the trigger.
//!
//! The file is read before anything runs (a missing, unreadable or oversized file is
//! refused naming it), copied into the session's own files as
//! `scratchpad/inputs/<NAME><.ext>`, and the input is seeded with that workspace path,
//! locked like every host seed, so a workflow can name the path (in a human state's
//! `evidence`, say). The suffix is predictable: for an input with `accept`, the entry the
//! file's name ends in, matched in any case and the longest winning (`Backup.TAR.GZ`
//! under `accept: [.gz, .tar.gz]` is kept as `<NAME>.tar.gz`), lowercased; a file that
//! ends in none is refused here, naming the list. Without `accept` the file keeps its own
//! last extension. A bare `PATH` goes to the trigger's one `file` input; with several,
//! `NAME=PATH` picks one. The input's `maxSize` is checked here against the real size.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value};

use archmax_compiler::program::ValueType;
use archmax_compiler::syntax::reference::is_variable_name;
use archmax_vm::runtime::{FieldProblem, InputReason, RunError, Runtime};

use crate::output::usage;

/// Where handed files are kept in a session (the validator's help names it too).
const INPUTS_DIR: &str = archmax_compiler::check::variables::HANDED_FILES;

/// One `--file` argument, read.
pub struct HandedFile {
    /// The input it fills, when the argument names one.
    pub input: Option<String>,
    pub source: PathBuf,
    pub bytes: Vec<u8>,
}

/// Reads every `--file` argument; a file that is missing, not a regular file or larger
/// than the session file limit is a usage error naming it.
pub fn read(arguments: &[String], command: &str) -> Result<Vec<HandedFile>, ExitCode> {
    let limit = archmax_vm::stdlib::limits::MAX_FILE_BYTES;
    let mut files = Vec::with_capacity(arguments.len());
    for argument in arguments {
        let (input, path) = match argument.split_once('=') {
            Some((name, path)) if is_variable_name(name) => (Some(name.to_string()), path),
            _ => (None, argument.as_str()),
        };
        let source = PathBuf::from(path);
        let unreadable = |error: std::io::Error| usage(command, &format!("--file `{path}` cannot be read: {error}"));
        // One open, checked on its own handle (a FIFO or a device is never read), and read
        // to at most one byte past the limit, so a file that grows meanwhile is refused too.
        let file =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&source).map_err(unreadable)?;
        if !file.metadata().map_err(unreadable)?.is_file() {
            return Err(usage(command, &format!("--file `{path}` is not a file")));
        }
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes).map_err(unreadable)?;
        if bytes.len() as u64 > limit {
            return Err(usage(
                command,
                &format!("--file `{path}` is over the limit of {}", archmax_vm::stdlib::limits::bound_in_words(limit)),
            ));
        }
        files.push(HandedFile { input, source, bytes });
    }
    Ok(files)
}

/// Copies `files` into session `session` and seeds their inputs in `variables`. `trigger`
/// is the trigger whose `requires` the inputs belong to.
pub fn hand_over(
    runtime: &Runtime,
    workflow: &str,
    trigger: &str,
    session: &str,
    files: Vec<HandedFile>,
    variables: &mut Map<String, Value>,
) -> Result<(), RunError> {
    prepare(runtime, workflow, trigger, files, variables)?.write(runtime, session, variables)
}

/// Handed files checked against their trigger, each with the session path it is to be
/// kept under. Nothing is written until [`Handover::write`], so a caller can check
/// whatever else may refuse the request first and leave the session as it was.
pub struct Handover {
    files: Vec<(String, String, HandedFile)>,
}

impl Handover {
    /// The inputs the files fill.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|(name, _, _)| name.as_str())
    }

    /// Copies every file into session `session` and seeds its input in `variables`.
    pub fn write(self, runtime: &Runtime, session: &str, variables: &mut Map<String, Value>) -> Result<(), RunError> {
        if self.files.is_empty() {
            return Ok(());
        }
        let store = runtime.store().files(session).map_err(RunError::Store)?;
        for (name, path, file) in self.files {
            store.write(&path, &file.bytes).map_err(|error| {
                RunError::invalid(
                    name.as_str(),
                    format!("`{}` could not be copied into the session: {error}", file.source.display()),
                )
            })?;
            variables.insert(name, Value::String(path));
        }
        Ok(())
    }
}

/// Checks `files` against the `file` inputs of `trigger` (which input each fills, its
/// `maxSize` and `accept`, no input given twice or also in `variables`) and names the
/// session path each is kept under, writing nothing.
pub fn prepare(
    runtime: &Runtime,
    workflow: &str,
    trigger: &str,
    files: Vec<HandedFile>,
    variables: &Map<String, Value>,
) -> Result<Handover, RunError> {
    if files.is_empty() {
        return Ok(Handover { files: Vec::new() });
    }
    let program = &runtime.program();
    let problem = |field: &str, message: String| RunError::InvalidInput {
        message: message.clone(),
        fields: vec![FieldProblem { field: field.to_string(), problem: message }],
        reason: InputReason::Fields,
    };
    let Some((_, declared)) = program.workflow(workflow) else {
        return Err(problem("workflow", format!("there is no workflow `{workflow}`")));
    };
    let Some(entries) = program.trigger(declared, trigger).map(|trigger| &trigger.requires) else {
        return Err(problem("trigger", format!("workflow `{workflow}` has no trigger `{trigger}`")));
    };
    let inputs: Vec<_> = entries.iter().filter(|entry| entry.ty == Some(ValueType::File)).collect();
    let names: Vec<&str> = inputs.iter().map(|entry| program.str(entry.name)).collect();
    // Every file is checked before any is copied, so a refusal leaves nothing behind.
    let mut checked = Vec::with_capacity(files.len());
    for file in files {
        let name = match (&file.input, names.as_slice()) {
            (Some(name), _) if names.contains(&name.as_str()) => name.clone(),
            (Some(name), _) => {
                return Err(problem(
                    name,
                    format!(
                        "trigger `{trigger}` has no file input `{name}`{}",
                        listed(&names, "; its file inputs are ")
                    ),
                ));
            }
            (None, [only]) => only.to_string(),
            (None, []) => {
                return Err(problem("file", format!("trigger `{trigger}` of `{workflow}` takes no file input")));
            }
            (None, several) => {
                return Err(problem(
                    "file",
                    format!(
                        "trigger `{trigger}` takes several files: write --file NAME=PATH with one of {}",
                        several.join(", ")
                    ),
                ));
            }
        };
        if variables.contains_key(&name) {
            return Err(problem(&name, format!("`{name}` is given by both --file and --variables")));
        }
        let entry = inputs.iter().find(|entry| program.str(entry.name) == name);
        if let Some(max) = entry.and_then(|entry| entry.rules.max_size)
            && file.bytes.len() as u64 > max
        {
            return Err(problem(
                &name,
                format!("`{}` is {} bytes; '{name}' takes at most {max}", file.source.display(), file.bytes.len()),
            ));
        }
        if checked.iter().any(|(other, _, _): &(String, String, HandedFile)| *other == name) {
            return Err(problem(&name, format!("`{name}` is given by --file twice")));
        }
        let accepted: Vec<&str> = entry
            .and_then(|entry| entry.rules.accept.as_ref())
            .map(|accept| accept.iter().map(|extension| program.str(*extension)).collect())
            .unwrap_or_default();
        let suffix = if accepted.is_empty() {
            extension(&file.source)
        } else {
            match accepted_suffix(&file.source, &accepted) {
                Some(suffix) => suffix,
                None => {
                    return Err(problem(
                        &name,
                        format!(
                            "`{}` is not a file '{name}' takes: it accepts {}; hand over a file ending in one of them",
                            file.source.display(),
                            accepted.join(", ")
                        ),
                    ));
                }
            }
        };
        let path = format!("{INPUTS_DIR}/{name}{suffix}");
        checked.push((name, path, file));
    }
    Ok(Handover { files: checked })
}

fn listed(names: &[&str], lead: &str) -> String {
    if names.is_empty() { String::new() } else { format!("{lead}{}", names.join(", ")) }
}

/// The `accept` entry a handed file's name ends in, in any case, lowercased: the longest
/// one that matches (`.tar.gz` before `.gz`), or `None` when none does.
fn accepted_suffix(source: &Path, accepted: &[&str]) -> Option<String> {
    // ASCII case only, as the runtime compares when it checks the input.
    let file_name = source.file_name()?.to_string_lossy().to_ascii_lowercase();
    accepted
        .iter()
        .map(|extension| extension.to_ascii_lowercase())
        .filter(|extension| file_name.ends_with(extension.as_str()))
        .max_by_key(String::len)
}

/// The extension a handed file keeps, with its dot: the source's own, made safe
/// (letters, digits, `-`, `_`; at most 16 characters), or nothing.
fn extension(source: &Path) -> String {
    let Some(extension) = source.extension().and_then(|extension| extension.to_str()) else {
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
    use std::path::Path;

    use super::{accepted_suffix, extension};

    #[test]
    fn a_handed_file_keeps_its_own_extension_made_safe() {
        assert_eq!(extension(Path::new("/tmp/Invoice 2025.pdf")), ".pdf");
        assert_eq!(extension(Path::new("scan.tar.gz")), ".gz");
        assert_eq!(extension(Path::new("../../.env")), "");
        assert_eq!(extension(Path::new("notes")), "");
        assert_eq!(extension(Path::new("odd.p d$f")), ".p-d-f");
    }

    #[test]
    fn a_handed_file_takes_the_longest_accept_entry_it_ends_in_lowercased() {
        let accepted = [".gz", ".TAR.GZ", ".pdf"];
        assert_eq!(accepted_suffix(Path::new("/tmp/nightly.tar.gz"), &accepted).as_deref(), Some(".tar.gz"));
        assert_eq!(accepted_suffix(Path::new("logs.GZ"), &accepted).as_deref(), Some(".gz"));
        assert_eq!(accepted_suffix(Path::new("Receipt.PDF"), &accepted).as_deref(), Some(".pdf"));
        assert_eq!(accepted_suffix(Path::new("receipt.docx"), &accepted), None);
        assert_eq!(accepted_suffix(Path::new("receiptpdf"), &accepted), None);
    }
}
