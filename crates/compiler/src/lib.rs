//! # archmax-compiler
//!
//! The compiler half of archmax: it reads a workspace of contract-3 workflows, tells an
//! author exactly and instantly what is wrong with it, and lowers a valid one into a
//! [`program::Program`] that [`artifact`] writes as a verified, optionally signed `.amx`.
//!
//! ```text
//! workspace on disk ──load──▶ SourceMap ──syntax::yaml──▶ spanned nodes
//!        ──schema──▶ typed tree (schema::ast) ──check──▶ diagnostics ──render──▶ text
//! ```
//!
//! [`analyze`] runs the whole pipeline over a root directory and returns an
//! [`Analysis`]; [`Analysis::report`] selects workflows and
//! [`diagnostic::render`] turns the report into human, JSON, SARIF or GitHub output.
//! [`compile()`] is the one entry point that goes on to a lowered program: it refuses a
//! workspace with errors (handing back the report to render) and lowers the rest.
//! Nothing here panics on input: every problem is a [`Diagnostic`] with a stable
//! `AMX` code (see [`diagnostic::codes`]), a span, and help saying what to write.

// The runtime's half of the program lives in `archmax-program`; each of its modules is
// re-exported at the path it always had here.
pub use archmax_program::{artifact, codec, glob, inspect, program, slug, source, tools, values, zones};

pub mod analysis;
pub mod authoring_schema;
pub mod check;
pub mod compile;
pub mod diagnostic;
pub mod graph;
pub mod lower;
pub mod schema;
pub mod standing;
pub mod syntax;
pub mod workspace;

#[cfg(test)]
mod artifact_tests;

/// The version of this compiler; artifacts record it and the VM refuses others.
pub use archmax_program::VERSION;

pub use analysis::{Analysis, Report, UnknownWorkflow, WorkflowReport, analyze, analyze_workspace};
pub use compile::{CompileError, Compiled, compile, compile_analysis};
pub use diagnostic::{Code, Diagnostic, Severity};
pub use slug::{Slug, SlugRef};
pub use workspace::WorkspaceError;
pub use workspace::load_memory;
