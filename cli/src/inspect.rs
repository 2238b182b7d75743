//! `archmax inspect FILE [--workflow SLUG] [--state SLUG] [--format text|json]`.

use std::path::Path;
use std::process::ExitCode;

use archmax_vm::compiler::artifact;
use archmax_vm::compiler::inspect::{self, Filter};

use crate::output::failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InspectFormat {
    Text,
    Json,
}

pub fn run(file: &Path, workflow: Option<&str>, state: Option<&str>, format: InspectFormat) -> ExitCode {
    if state.is_some() && workflow.is_none() {
        return failure("`--state` needs `--workflow` to say which workflow's state");
    }
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => return failure(format!("could not read `{}`: {error}", file.display())),
    };
    let program = match artifact::decode(&bytes) {
        Ok(program) => program,
        Err(error) => return failure(format!("`{}` is refused: {error}", file.display())),
    };
    let filter = Filter { workflow, state };
    if let Err(error) = inspect::check_filter(&program, &filter) {
        return failure(error);
    }
    match format {
        InspectFormat::Json => {
            let view = inspect::view(&program, &filter);
            println!("{}", serde_json::to_string_pretty(&view).unwrap_or_else(|_| "{}".to_string()));
        }
        InspectFormat::Text => {
            let (header, _) = match artifact::read_header(&bytes) {
                Ok(header) => header,
                Err(error) => return failure(error),
            };
            let summary = format!(
                "artifact {} · format {} · payload {} bytes · sha256 {}\n",
                file.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default(),
                header.format,
                header.payload_length,
                archmax_vm::compiler::lower::hash::hex(&header.checksum)
            );
            print!("{}", inspect::text(&program, &filter, &summary));
        }
    }
    ExitCode::SUCCESS
}
