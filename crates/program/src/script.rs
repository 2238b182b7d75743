//! Code-state scripts: their imports and their QuickJS module bytecode, as both the front
//! end (when it validates a workflow) and the runtime (when it loads an artifact and
//! runs a script) see them. The sandbox strips static imports from
//! `@archmax-ai/harness/*` (they carry types only) and refuses every other module.

use std::sync::LazyLock;

use regex::Regex;
use rquickjs::module::{WriteOptions, WriteOptionsEndianness};
use rquickjs::{Context, Module, Runtime};

/// The module prefix the sandbox strips.
pub const HARNESS_PREFIX: &str = "@archmax-ai/harness/";

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

/// The source with harness imports blanked.
pub fn strip_harness_imports(source: &str) -> String {
    let mut bytes = source.as_bytes().to_vec();
    for range in harness_imports(source) {
        for byte in &mut bytes[range] {
            if *byte != b'\n' && *byte != b'\r' {
                *byte = b' ';
            }
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|_| source.to_string())
}

/// An import the sandbox would refuse.
#[derive(Debug, PartialEq, Eq)]
pub struct ForbiddenImport {
    pub specifier: String,
    pub dynamic: bool,
    pub range: std::ops::Range<usize>,
}

impl ForbiddenImport {
    /// What is wrong with the import, as a diagnostic or a refusal says it.
    pub fn describe(&self) -> String {
        if self.dynamic {
            format!("loads `{}` at run time, which the sandbox cannot do", self.specifier)
        } else {
            format!("imports `{}`, which is not an `@archmax-ai/harness/…` module", self.specifier)
        }
    }
}

static STATIC_FROM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*(['"])([^'"\n]*)['"]"#).expect("static pattern")
});
static BARE_IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?m)^[ \t]*import\s*(['"])([^'"\n]*)['"]"#).expect("static pattern"));
static DYNAMIC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\b(?:import|require)\s*\(\s*(['"`])([^'"`\n]*)['"`]"#).expect("static pattern"));

/// Finds the imports of a script that the sandbox refuses. Comments are blanked first,
/// keeping offsets, so prose in a docblock never counts.
pub fn forbidden_imports(source: &str) -> Vec<ForbiddenImport> {
    let (code, strings) = blank_comments(source);
    let in_code = |offset: usize| !strings.iter().any(|range| range.contains(&offset));
    let mut found = Vec::new();
    for pattern in [&*STATIC_FROM, &*BARE_IMPORT] {
        for captures in pattern.captures_iter(&code) {
            if let Some(specifier) = captures.get(2)
                && captures.get(0).is_some_and(|whole| {
                    in_code(whole.start() + whole.as_str().len() - whole.as_str().trim_start().len())
                })
                && !specifier.as_str().starts_with(HARNESS_PREFIX)
            {
                found.push(ForbiddenImport {
                    specifier: specifier.as_str().to_string(),
                    dynamic: false,
                    range: specifier.range(),
                });
            }
        }
    }
    for captures in DYNAMIC.captures_iter(&code) {
        if let Some(specifier) = captures.get(2)
            && captures.get(0).is_some_and(|whole| in_code(whole.start()))
        {
            found.push(ForbiddenImport {
                specifier: specifier.as_str().to_string(),
                dynamic: true,
                range: specifier.range(),
            });
        }
    }
    found.sort_by_key(|import| import.range.start);
    found.dedup_by_key(|import| import.range.start);
    found
}

/// The byte ranges of static `@archmax-ai/harness/…` import statements, which the
/// sandbox strips before running a script (a trailing `;` included).
pub fn harness_imports(source: &str) -> Vec<std::ops::Range<usize>> {
    let (code, strings) = blank_comments(source);
    let in_code = |offset: usize| !strings.iter().any(|range| range.contains(&offset));
    let mut ranges = Vec::new();
    for pattern in [&*STATIC_FROM, &*BARE_IMPORT] {
        for captures in pattern.captures_iter(&code) {
            let (Some(whole), Some(specifier)) = (captures.get(0), captures.get(2)) else {
                continue;
            };
            let keyword = whole.start() + whole.as_str().len() - whole.as_str().trim_start().len();
            if !specifier.as_str().starts_with(HARNESS_PREFIX) || !in_code(keyword) {
                continue;
            }
            let mut end = whole.end();
            let rest = &source[end..];
            let spaces = rest.len() - rest.trim_start_matches([' ', '\t']).len();
            if rest[spaces..].starts_with(';') {
                end += spaces + 1;
            }
            ranges.push(keyword..end);
        }
    }
    ranges.sort_by_key(|range| range.start);
    ranges
}

/// Replaces `//` and `/* */` comments with spaces (newlines kept), and returns the
/// byte ranges of string literals, so matches inside strings can be told apart.
fn blank_comments(source: &str) -> (String, Vec<std::ops::Range<usize>>) {
    let bytes = source.as_bytes();
    let mut out = bytes.to_vec();
    let mut strings = Vec::new();
    let mut index = 0;
    let mut quote: Option<(u8, usize)> = None;
    while index < bytes.len() {
        let byte = bytes[index];
        if let Some((open, start)) = quote {
            if byte == b'\\' {
                index += 2;
                continue;
            }
            if byte == open || (byte == b'\n' && open != b'`') {
                quote = None;
                strings.push(start..index + 1);
            }
            index += 1;
            continue;
        }
        match byte {
            b'"' | b'\'' | b'`' => {
                quote = Some((byte, index));
                index += 1;
            }
            b'/' if bytes.get(index + 1) == Some(&b'/') => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    out[index] = b' ';
                    index += 1;
                }
            }
            b'/' if bytes.get(index + 1) == Some(&b'*') => {
                let end = source[index + 2..].find("*/").map(|offset| index + 2 + offset + 2).unwrap_or(bytes.len());
                for position in index..end {
                    if bytes[position] != b'\n' {
                        out[position] = b' ';
                    }
                }
                index = end;
            }
            _ => index += 1,
        }
    }
    if let Some((_, start)) = quote {
        strings.push(start..bytes.len());
    }
    // Whole comments are blanked, multi-byte characters included, so the bytes stay
    // valid UTF-8; should that ever fail, the source itself is scanned.
    (String::from_utf8(out).unwrap_or_else(|_| source.to_string()), strings)
}
