//! Code-state scripts as QuickJS module bytecode: the one compiler both the front end
//! (when it validates a workflow) and the artifact loader (when it checks that a
//! program's bytecode is what its source compiles to) use.

use rquickjs::module::{WriteOptions, WriteOptionsEndianness};
use rquickjs::{Context, Module, Runtime};

/// Why QuickJS refused a script, and where (1-based line and column), when it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(formatter, "{} (line {line}, column {column})", self.message),
            _ => formatter.write_str(&self.message),
        }
    }
}

/// The `name:line:column` QuickJS puts in a syntax error's stack.
fn position_in_stack(stack: &str, name: &str) -> (Option<usize>, Option<usize>) {
    let Some(start) = stack.find(name) else {
        return (None, None);
    };
    let mut numbers = stack[start + name.len()..]
        .split(|character: char| character == ':' || character == ')' || character.is_whitespace())
        .skip(1)
        .map_while(|part| part.parse::<usize>().ok());
    (numbers.next(), numbers.next())
}

/// Compiles JavaScript module source to bytecode; `Err` carries QuickJS's message.
pub fn module_bytecode(name: &str, source: &str) -> Result<Vec<u8>, ScriptError> {
    let plain = |message: String| ScriptError { message, line: None, column: None };
    let runtime = Runtime::new().map_err(|error| plain(error.to_string()))?;
    let context = Context::full(&runtime).map_err(|error| plain(error.to_string()))?;
    context.with(|ctx| {
        let module = Module::declare(ctx.clone(), name, source).map_err(|error| {
            let exception = ctx.catch();
            match exception.as_exception() {
                Some(exception) => {
                    let (line, column) =
                        exception.stack().map(|stack| position_in_stack(&stack, name)).unwrap_or((None, None));
                    ScriptError { message: exception.message().unwrap_or_else(|| error.to_string()), line, column }
                }
                None => plain(error.to_string()),
            }
        })?;
        module
            .write(WriteOptions {
                endianness: WriteOptionsEndianness::Little,
                strip_source: true,
                ..WriteOptions::default()
            })
            .map_err(|error| plain(error.to_string()))
    })
}

/// The module name a script is compiled under: its path in the workspace.
pub fn module_name(workflow: &str, path: &str) -> String {
    format!("workflows/{workflow}/{path}")
}
