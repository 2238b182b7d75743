//! `archmax`: the command line. Parsing, rendering and exit codes only; every decision
//! is made by `archmax-compiler` and `archmax-vm`.
//!
//! Exit codes: 0 when the command did its job, 1 when it established a failure (an
//! invalid workflow, an unknown name), 2 for a usage error (one line on stderr).

mod build;
mod explain;
mod graph;
mod inspect;
mod output;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "archmax", version, about = "Compile, check and run declarative agent workflows")]
struct Cli {
    /// The workspace root (holds `workflows/`); defaults to the current directory.
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check workflows against every rule of the spec.
    Validate {
        /// Workflows to validate (slugs); all of them when none is named.
        workflows: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Validate, then compile the workspace into one verified artifact (`.amx`).
    Build {
        /// Workflows to build (with everything they call); all of them when none is named.
        workflows: Vec<String>,
        /// Where to write the artifact (default: `<root>/target/archmax/<name>.amx`).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Show every table of an artifact.
    Inspect {
        /// The artifact file.
        file: PathBuf,
        /// Show only this workflow.
        #[arg(long, value_name = "SLUG")]
        workflow: Option<String>,
        /// Show only this state (with `--workflow`).
        #[arg(long, value_name = "SLUG")]
        state: Option<String>,
        #[arg(long, value_enum, default_value_t = inspect::InspectFormat::Text)]
        format: inspect::InspectFormat,
    },
    /// Draw a workflow's states and transitions.
    Graph {
        /// The workflow to draw; every workflow when omitted.
        workflow: Option<String>,
        #[arg(long, value_enum, default_value_t = graph::GraphFormat::Mermaid)]
        format: graph::GraphFormat,
    },
    /// Print the long explanation of a diagnostic code.
    Explain {
        /// A code such as AMX0301.
        #[arg(required_unless_present = "list")]
        code: Option<String>,
        /// List every code with its title.
        #[arg(long)]
        list: bool,
    },
}

/// How `validate` prints its findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Sarif,
    Github,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return output::usage_error(error),
    };
    let root = cli.root.unwrap_or_else(|| PathBuf::from("."));
    match cli.command {
        Command::Validate { workflows, format } => validate::run(&root, &workflows, format),
        Command::Explain { code, list } => explain::run(code.as_deref(), list),
        Command::Build { workflows, output } => build::run(&root, &workflows, output.as_deref()),
        Command::Inspect { file, workflow, state, format } => {
            inspect::run(&file, workflow.as_deref(), state.as_deref(), format)
        }
        Command::Graph { workflow, format } => graph::run(&root, workflow.as_deref(), format),
    }
}
