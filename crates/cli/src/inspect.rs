//! `archmax inspect FILE [--trust KEY…] [--workflow SLUG] [--state SLUG] [--format text|json]`:
//! every table of an artifact, and who signed it (the key, and whether it is trusted).

use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::artifact::{self, Loaded};
use archmax_compiler::inspect::{self, Filter};

use crate::output::failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InspectFormat {
    Text,
    Json,
}

/// `unsigned`, or the signer's key with its standing.
fn signature_line(loaded: &Loaded, trust_configured: bool) -> String {
    match loaded.signer {
        None => "unsigned".to_string(),
        Some(signer) if signer.trusted => format!("signed by {} (trusted)", signer.key),
        Some(signer) if trust_configured => format!("signed by {} (not trusted)", signer.key),
        Some(signer) => format!("signed by {} (not trusted: no trusted keys configured)", signer.key),
    }
}

pub fn run(
    file: &Path,
    trust: &[String],
    workflow: Option<&str>,
    state: Option<&str>,
    format: InspectFormat,
) -> ExitCode {
    if state.is_some() && workflow.is_none() {
        return failure("`--state` needs `--workflow` to say which workflow's state");
    }
    let trusted = match crate::keys::trusted_keys(trust) {
        Ok(trusted) => trusted,
        Err(error) => return failure(error),
    };
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => return failure(format!("could not read `{}`: {error}", file.display())),
    };
    let loaded = match artifact::load(&bytes, &trusted) {
        Ok(loaded) => loaded,
        Err(error) => {
            return failure(format!("`{}` is refused: {}", file.display(), crate::keys::artifact_problem(&error)));
        }
    };
    let program = &loaded.program;
    let filter = Filter { workflow, state };
    if let Err(error) = inspect::check_filter(program, &filter) {
        return failure(error);
    }
    let signature = signature_line(&loaded, !trusted.is_empty());
    match format {
        InspectFormat::Json => {
            let mut view = inspect::view(program, &filter);
            if let Some(object) = view.as_object_mut() {
                let signer = loaded
                    .signer
                    .map(|signer| serde_json::json!({ "key": signer.key.to_string(), "trusted": signer.trusted }));
                object.insert("signer".to_string(), signer.unwrap_or(serde_json::Value::Null));
            }
            println!("{}", serde_json::to_string_pretty(&view).unwrap_or_else(|_| "{}".to_string()));
        }
        InspectFormat::Text => {
            let header = &loaded.header;
            let summary = format!(
                "artifact {} · format {} · payload {} bytes · sha256 {}\nsignature {signature}\n",
                file.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default(),
                header.format,
                header.payload_length,
                archmax_compiler::lower::hash::hex(&header.checksum)
            );
            print!("{}", inspect::text(program, &filter, &summary));
        }
    }
    ExitCode::SUCCESS
}
