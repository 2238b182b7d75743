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
    let strings = Strings(strings);
    let in_code = |offset: usize| !strings.contains(offset);
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
    let strings = Strings(strings);
    let in_code = |offset: usize| !strings.contains(offset);
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

/// A literal target in a script's `tools.archmax_advance({ to: "…" })` (or
/// `tools.archmaxAdvance`): the state it names and the byte range of the name.
#[derive(Debug, PartialEq, Eq)]
pub struct AdvanceTarget {
    pub target: String,
    pub range: std::ops::Range<usize>,
}

static ADVANCE_CALL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\btools\s*\.\s*(?:archmax_advance|archmaxAdvance)\s*\(\s*\{").expect("static pattern")
});

/// Finds the targets a script names literally in its advance calls: a `to` key at the top
/// of the call's object literal whose value is a plain string (a template with `${…}`,
/// a variable or an expression names nothing checkable and is passed over). Comments are
/// blanked first, and a call written inside a string does not count. Targets come call by
/// call, in the order the calls start.
///
/// One pass over the script, however many calls it holds and however they nest or are
/// left open: each open call's object is a frame on a stack, and only the innermost can be
/// at its own top level (an outer one is at least two brackets deep until the inner one
/// closes), so each byte is looked at once.
pub fn advance_targets(source: &str) -> Vec<AdvanceTarget> {
    scan_advance_targets(source).0
}

/// One call's object literal being read.
struct Frame {
    /// Which call it is, in the order the calls start.
    call: usize,
    /// Open brackets inside the call, its object's own `{` counted: 0 when it closed.
    depth: usize,
    /// Whether the next token at the top of the object would be a key.
    key_start: bool,
}

/// [`advance_targets`], with the number of bytes the scan stepped through (for the test
/// that holds it to one look at each byte).
fn scan_advance_targets(source: &str) -> (Vec<AdvanceTarget>, usize) {
    let (code, strings) = blank_comments(source);
    let strings = Strings(strings);
    let string_at = |offset: usize| strings.starting_at(offset);
    let bytes = code.as_bytes();
    let calls: Vec<usize> =
        ADVANCE_CALL.find_iter(&code).filter(|call| !strings.contains(call.start())).map(|call| call.end()).collect();
    let mut found: Vec<(usize, AdvanceTarget)> = Vec::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut next_call = 0;
    let mut index = 0;
    let mut steps = 0;
    loop {
        if frames.is_empty() {
            // Outside every call nothing is read: on to where the next one opens.
            match calls.get(next_call) {
                Some(&opens) => index = index.max(opens),
                None => break,
            }
        }
        // A call whose object opens here is read from here on, inside any open one.
        while calls.get(next_call).is_some_and(|&opens| opens <= index) {
            frames.push(Frame { call: next_call, depth: 1, key_start: true });
            next_call += 1;
        }
        if index >= bytes.len() {
            break;
        }
        steps += 1;
        let Some(frame) = frames.last_mut() else { break };
        if let Some(range) = string_at(index) {
            if frame.depth == 1
                && frame.key_start
                && literal(source, &range).as_deref() == Some("to")
                && let Some(target) = to_value(source, bytes, &string_at, range.end)
            {
                found.push((frame.call, target));
            }
            frame.key_start = false;
            index = range.end;
            continue;
        }
        let byte = bytes[index];
        match byte {
            b'{' | b'[' | b'(' => frame.depth += 1,
            b'}' | b']' | b')' => {
                frame.depth -= 1;
                if frame.depth == 0 {
                    frames.pop();
                    // The closing byte closes one bracket of the call around it too;
                    // that call's key state was settled before this one opened.
                    if let Some(outer) = frames.last_mut() {
                        outer.depth -= 1;
                        outer.key_start = false;
                    }
                    index += 1;
                    continue;
                }
            }
            b',' if frame.depth == 1 => frame.key_start = true,
            _ if byte.is_ascii_whitespace() => {}
            _ if frame.depth == 1 && frame.key_start => {
                let end = index
                    + code[index..]
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                        .unwrap_or(code.len() - index);
                if &code[index..end] == "to"
                    && let Some(target) = to_value(source, bytes, &string_at, end)
                {
                    found.push((frame.call, target));
                }
                frame.key_start = false;
                index = end.max(index + 1);
                continue;
            }
            _ => frame.key_start = false,
        }
        index += 1;
    }
    // Stable: a call's targets keep their order.
    found.sort_by_key(|(call, _)| *call);
    (found.into_iter().map(|(_, target)| target).collect(), steps)
}

/// The byte ranges of a script's string literals, in order and disjoint, as
/// [`blank_comments`] finds them; looked up by binary search.
struct Strings(Vec<std::ops::Range<usize>>);

impl Strings {
    /// The literal that starts at `offset`.
    fn starting_at(&self, offset: usize) -> Option<std::ops::Range<usize>> {
        self.0.binary_search_by_key(&offset, |range| range.start).ok().map(|at| self.0[at].clone())
    }

    /// Whether `offset` lies inside a literal (its quotes included).
    fn contains(&self, offset: usize) -> bool {
        let after = self.0.partition_point(|range| range.start <= offset);
        after > 0 && self.0[after - 1].contains(&offset)
    }
}

/// The text of a plain string literal spanning `range` (quotes included); `None` for a
/// template with a substitution, an escape, or an unclosed string.
fn literal(source: &str, range: &std::ops::Range<usize>) -> Option<String> {
    let text = source.get(range.clone())?;
    let quote = text.chars().next()?;
    let inner = text.strip_prefix(quote)?.strip_suffix(quote)?;
    if inner.contains('\\') || inner.contains('\n') || (quote == '`' && inner.contains("${")) {
        return None;
    }
    Some(inner.to_string())
}

/// After a `to` key ending at `index`: `:` then a plain string literal, as a target.
fn to_value(
    source: &str,
    bytes: &[u8],
    string_at: &dyn Fn(usize) -> Option<std::ops::Range<usize>>,
    mut index: usize,
) -> Option<AdvanceTarget> {
    let skip = |mut index: usize| {
        while index < bytes.len() && bytes[index].is_ascii_whitespace() {
            index += 1;
        }
        index
    };
    index = skip(index);
    if bytes.get(index) != Some(&b':') {
        return None;
    }
    let range = string_at(skip(index + 1))?;
    let target = literal(source, &range)?;
    Some(AdvanceTarget { target, range: range.start + 1..range.end - 1 })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(source: &str) -> Vec<String> {
        advance_targets(source).into_iter().map(|found| found.target).collect()
    }

    #[test]
    fn literal_advance_targets_are_found_with_their_ranges() {
        let source = r#"export default async function () {
  // tools.archmax_advance({ to: "in-a-comment" })
  const note = "tools.archmax_advance({ to: 'in-a-string' })";
  if (x) await tools.archmax_advance({ to: "approve", reason: "fine {ok}" });
  await tools.archmaxAdvance({ reason: `checked, to: x`, "to": 'reject' });
  await tools.archmax_advance({ to: `review` });
  await tools.archmax_advance({ to: `${next}` });
  await tools.archmax_advance({ to: next, reason: "computed" });
  await tools.archmax_advance({ evidence: [{ to: "nested" }], to: "escalate" });
}
"#;
        assert_eq!(targets(source), ["approve", "reject", "review", "escalate"]);
        let first = &advance_targets(source)[0];
        assert_eq!(&source[first.range.clone()], "approve");
    }

    #[test]
    fn a_call_inside_another_gives_its_targets_after_the_outer_ones() {
        let source = r#"await tools.archmax_advance({ reason: await tools.archmaxAdvance({ to: "inner" }), to: "outer" });
await tools.archmax_advance({ to: "last" });"#;
        assert_eq!(targets(source), ["outer", "inner", "last"]);
        // Left open, the outer call still reads its own keys up to the inner one.
        assert_eq!(targets(r#"tools.archmax_advance({ to: "a", x: tools.archmax_advance({ to: "b", "#), ["a", "b"]);
    }

    /// The scan as it was before it was one pass: every call read from its `{` to its
    /// close (or the end), each string found by a walk over all of them. The single pass
    /// must find exactly what it found.
    fn rescanning_targets(source: &str) -> Vec<String> {
        let (code, strings) = blank_comments(source);
        let string_at = |offset: usize| strings.iter().find(|range| range.start == offset).cloned();
        let bytes = code.as_bytes();
        let mut found = Vec::new();
        for call in ADVANCE_CALL.find_iter(&code) {
            if strings.iter().any(|range| range.contains(&call.start())) {
                continue;
            }
            let (mut index, mut depth, mut key_start) = (call.end(), 1usize, true);
            while index < bytes.len() && depth > 0 {
                if let Some(range) = string_at(index) {
                    if depth == 1 && key_start && literal(source, &range).as_deref() == Some("to") {
                        found.extend(to_value(source, bytes, &string_at, range.end).map(|found| found.target));
                    }
                    key_start = false;
                    index = range.end;
                    continue;
                }
                let byte = bytes[index];
                match byte {
                    b'{' | b'[' | b'(' => depth += 1,
                    b'}' | b']' | b')' => depth -= 1,
                    b',' if depth == 1 => key_start = true,
                    _ if byte.is_ascii_whitespace() => {}
                    _ if depth == 1 && key_start => {
                        let end = index
                            + code[index..]
                                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                                .unwrap_or(code.len() - index);
                        if &code[index..end] == "to" {
                            found.extend(to_value(source, bytes, &string_at, end).map(|found| found.target));
                        }
                        key_start = false;
                        index = end.max(index + 1);
                        continue;
                    }
                    _ => key_start = false,
                }
                index += 1;
            }
        }
        found
    }

    #[test]
    fn the_single_pass_finds_what_rescanning_every_call_found() {
        let pieces = [
            "tools.archmax_advance({",
            "tools.archmaxAdvance( {",
            " to: \"a\"",
            " 'to': 'b'",
            " to: `c`",
            " to: `${d}`",
            " to: e",
            ", ",
            " }",
            ")",
            ";",
            " [",
            "]",
            " (",
            " \"tools.archmax_advance({ to: 'quoted' })\"",
            " // tools.archmax_advance({ to: 'commented' })\n",
            " /* } ) */",
            " reason: \"x, to: 'y'\"",
            " $to: \"z\"",
            " to : \"spaced\"",
            "\n",
            " \"unclosed",
        ];
        // Every sequence of up to four pieces, then longer ones from a fixed generator.
        let mut sources = Vec::new();
        let count = pieces.len();
        for length in 1..=4u32 {
            for mut number in 0..count.pow(length) {
                let mut source = String::new();
                for _ in 0..length {
                    source.push_str(pieces[number % count]);
                    number /= count;
                }
                sources.push(source);
            }
        }
        let mut seed = 0x2545_f491_u64;
        for _ in 0..2_000 {
            let mut source = String::new();
            for _ in 0..24 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                source.push_str(pieces[(seed % count as u64) as usize]);
            }
            sources.push(source);
        }
        for source in &sources {
            assert_eq!(targets(source), rescanning_targets(source), "{source:?}");
        }
    }

    /// A large script that opens thousands of advance calls and closes none, each with a
    /// string: rescanning from every call to the end took time quadratic in its size (and
    /// every string lookup walked all strings). The single pass finds every target and
    /// looks at each byte at most once.
    #[test]
    fn a_large_script_of_unclosed_calls_is_read_in_one_pass() {
        const CALLS: usize = 20_000;
        let mut source = String::from("export default async function ({ tools }) {\n");
        for number in 0..CALLS {
            source.push_str(&format!("  await tools.archmax_advance({{ to: \"s{number}\", reason: \"r\", next: "));
        }
        let (found, steps) = scan_advance_targets(&source);
        assert_eq!(found.len(), CALLS);
        assert!(found.iter().enumerate().all(|(number, found)| found.target == format!("s{number}")));
        let last = found.last().expect("a last target");
        assert_eq!(&source[last.range.clone()], format!("s{}", CALLS - 1));
        assert!(steps <= source.len(), "{steps} steps over {} bytes", source.len());
    }
}
