//! Code-state scripts in the program: validation compiled each one already
//! ([`crate::check::bytecode`]); lowering interns its source and copies its bytecode.

pub use crate::check::bytecode::{CompiledScript, ScriptError, module_bytecode, module_name, strip_harness_imports};
use crate::program::ScriptProgram;
use crate::schema::ast::Workflow;

use super::{BuildError, Interner};

/// The program's record of the script at `path`, from what validation compiled.
pub fn compile(
    compiled: &[CompiledScript],
    workflow: &Workflow,
    path: &str,
    interner: &mut Interner,
) -> Result<ScriptProgram, BuildError> {
    let script = compiled.iter().find(|script| script.path == path).ok_or_else(|| BuildError::Script {
        workflow: workflow.slug.clone(),
        path: path.to_string(),
        message: "validation did not compile it".to_string(),
    })?;
    Ok(ScriptProgram {
        path: interner.intern(path),
        source: interner.intern(&script.source),
        bytecode: script.bytecode.clone(),
    })
}
