//! `archmax build [WORKFLOW…] [--root DIR] [-o FILE] [--sign KEYFILE] [--deny-warnings]`:
//! validate, lower, and write one verified (optionally signed) artifact; print a one-line
//! summary.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use archmax_compiler::artifact;
use archmax_compiler::diagnostic::render;
use archmax_compiler::lower::BuildInputs;
use archmax_compiler::{Analysis, CompileError, compile};
use archmax_vm::stdlib::PLATFORM_PROMPT;

use crate::output::{failure, stderr_color};

/// Where an artifact goes when `-o` is not given: `<root>/target/archmax/<name>.amx`.
pub fn default_output(root: &Path, selection: &[String]) -> PathBuf {
    let name = if selection.is_empty() { "workspace".to_string() } else { selection.join("+") };
    root.join("target").join("archmax").join(format!("{name}.{}", artifact::EXTENSION))
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension(format!("{}.tmp{}", artifact::EXTENSION, std::process::id()));
    {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&temporary, path)
}

/// A byte count for people: `84.2 KB`.
pub fn human_size(bytes: usize) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

/// Prints why the workspace did not compile (a refusal for errors renders its diagnostics
/// and the verdict line first, as `validate` does) and returns the exit code.
pub fn refused(error: CompileError) -> ExitCode {
    if let CompileError::Invalid(invalid) = &error {
        eprint!("{}", render::human(invalid.analysis.sources(), &invalid.report, stderr_color()));
        eprintln!("{}", render::verdict(&invalid.report));
    }
    failure(error)
}

/// `--deny-warnings`: when the workflows `selection` compiles (with every workflow they
/// call; all of them when empty) have warnings, renders them on stderr with the verdict
/// line and returns the refusal that says why; `None` when there are none.
pub fn denied_warnings(analysis: &Analysis, selection: &[String]) -> Option<String> {
    let included = archmax_compiler::lower::included_workflows(analysis, selection);
    // Errors refuse the build on their own, with their own rendering.
    let report = analysis.report(&included).ok().filter(|report| report.is_valid())?;
    let warnings = report.warnings();
    if warnings == 0 {
        return None;
    }
    eprint!("{}", render::human(analysis.sources(), &report, stderr_color()));
    eprintln!("{}", render::verdict(&report));
    Some(format!(
        "{warnings} warning{} and --deny-warnings was given, so {} refused",
        if warnings == 1 { "" } else { "s" },
        if warnings == 1 { "it is" } else { "they are" }
    ))
}

/// `archmax build`; with `deny_warnings`, a warning refuses the build as an error would.
pub fn run(
    root: &Path,
    selection: &[String],
    output: Option<&Path>,
    sign: Option<&Path>,
    deny_warnings: bool,
) -> ExitCode {
    let key = match sign.map(crate::keys::signing_key).transpose() {
        Ok(key) => key,
        Err(error) => return failure(error),
    };
    let program = match compile(root, selection, &BuildInputs { platform_prompt: PLATFORM_PROMPT }) {
        Ok(compiled) if deny_warnings => match denied_warnings(&compiled.analysis, selection) {
            Some(reason) => return failure(format!("{reason}: nothing was built")),
            None => compiled.program,
        },
        Ok(compiled) => compiled.program,
        Err(error) => return refused(error),
    };
    let bytes = match &key {
        Some(key) => artifact::encode_signed(&program, key),
        None => artifact::encode(&program),
    };
    let path = output.map(Path::to_path_buf).unwrap_or_else(|| default_output(root, selection));
    if let Err(error) = write_atomically(&path, &bytes) {
        return failure(format!("could not write `{}`: {error}", path.display()));
    }
    let checksum = artifact::read_envelope(&bytes)
        .map(|envelope| archmax_compiler::lower::hash::hex(&envelope.header.checksum))
        .unwrap_or_default();
    let signed = key.map(|key| format!(", signed by {}", key.public())).unwrap_or_default();
    println!(
        "built {} — {} workflow(s), {} state(s), {}, sha256 {}{signed}",
        path.display(),
        program.workflows.len(),
        program.state_count(),
        human_size(bytes.len()),
        &checksum[..checksum.len().min(16)]
    );
    ExitCode::SUCCESS
}
