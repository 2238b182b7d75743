//! Code-state scripts compiled to QuickJS module bytecode, once per build.
//!
//! Validation ([`super::scripts`]) compiles every script a code state runs, reports the
//! ones QuickJS refuses, and keeps the bytecode of the others in the analysis
//! ([`CompiledScript`] on each [`super::Unit`]); lowering copies it into the program and
//! never compiles again. Harness imports are stripped first by blanking each static
//! `import … from "@archmax-ai/harness/…"` statement character by character (newlines
//! kept), so line and column numbers in a stack trace still point into the file as
//! written.

pub use archmax_program::script::{ScriptError, module_name, strip_harness_imports};

/// A script as validation compiled it: the source the VM runs (harness imports
/// blanked) and its bytecode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledScript {
    /// Relative to the workflow directory, as `script:` names it.
    pub path: String,
    pub source: String,
    pub bytecode: Vec<u8>,
}

#[cfg(test)]
thread_local! {
    /// How many times this thread asked QuickJS to compile a module.
    pub(crate) static COMPILATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Compiles JavaScript module source to bytecode ([`archmax_program::script::module_bytecode`]),
/// counting compilations in tests.
pub fn module_bytecode(name: &str, source: &str) -> Result<Vec<u8>, ScriptError> {
    #[cfg(test)]
    COMPILATIONS.with(|count| count.set(count.get() + 1));
    archmax_program::script::module_bytecode(name, source)
}
