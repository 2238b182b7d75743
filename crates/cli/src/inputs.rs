//! `--file [NAME=]PATH` on `run` and `deliver`: a file from this machine handed to a
//! `file`-typed input of the trigger.
//!
//! The file is read here, before anything runs: a missing, unreadable, special or
//! oversized file is refused naming it. A bare `PATH` goes to the trigger's one `file`
//! input; with several, `NAME=PATH` picks one. What happens next is the runtime's
//! ([`archmax_vm::handover`]): each file is checked against its input (`maxSize`,
//! `accept`), copied into the session as `scratchpad/inputs/<NAME><.ext>`, and the input
//! seeded with that path, locked like every host seed.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Map, Value};

use archmax_compiler::syntax::reference::is_variable_name;
use archmax_vm::handover::{HandedFile, Handover, Sender};
use archmax_vm::runtime::{RunError, Runtime};

use crate::output::usage;

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
        files.push(HandedFile { input, name: path.to_string(), bytes });
    }
    Ok(files)
}

/// Checks `files` against the `file` inputs of `trigger` of `workflow` and seeds their
/// inputs in `variables`; the runtime copies the files it returns once it has accepted
/// the request (`DeliverRequest::handed`).
pub fn hand_over(
    runtime: &Runtime,
    (workflow, trigger): (&str, &str),
    files: Vec<HandedFile>,
    variables: &mut Map<String, Value>,
) -> Result<Handover, RunError> {
    let handed = runtime.prepare_handover((workflow, trigger), files, variables, Sender::CommandLine)?;
    handed.seed(variables);
    Ok(handed)
}
