//! Porting a contract-2 hook script (`hooks/<name>.js`) to a code-state script
//! (`scripts/<state>.js`).
//!
//! The one thing to know: the hook's own code is kept as it was written, renamed from the
//! default export to a local `contract2Hook`, and a generated adapter becomes the new
//! default export. The adapter hands the hook the argument it used to get (`messages`
//! from `tools.archmax_get_history`, `phase`, the guarded `state`) and turns its verdict
//! (`ok`, `veto`, `correct`, `false`, any other object) into exactly one decision:
//! `tools.archmax_advance` onward or back, `tools.archmax_raise`, or a thrown error where
//! the hook's failure used to route through `on_error`.

use regex::Regex;

/// Which side of its state a hook ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Before,
    After,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::After => "after",
        }
    }
}

/// Where the ported script's decisions go.
pub(crate) struct Port<'a> {
    pub phase: Phase,
    /// The state whose hook this was.
    pub guarded: &'a str,
    /// The code state running the port.
    pub here: &'a str,
    /// Where an `ok` goes: the next check or the guarded state (`before`), or the
    /// guarded state's own transitions (`after`).
    pub onward: &'a [String],
    /// `before` only: the refusal state a veto advances to; `None` raises instead.
    pub refused: Option<&'a str>,
    /// The code an `archmax_raise` carries.
    pub raise_code: &'a str,
    /// `after` only: how many `correct` send-backs are allowed (the old `max_iterations`).
    pub max_iterations: u64,
}

/// The ported text and what needs a person, each with a byte offset into the hook file.
pub(crate) struct Ported {
    pub text: String,
    pub changes: Vec<(usize, String)>,
    pub follow_ups: Vec<(usize, String)>,
}

/// Tool names a script calls (`tools.readFile(` → `read_file`), in first-call order.
pub(crate) fn called_tools(source: &str) -> Vec<(usize, String)> {
    let Ok(pattern) = Regex::new(r"\btools\.([A-Za-z_][A-Za-z0-9_]*)\s*\(") else {
        return Vec::new();
    };
    let mut found: Vec<(usize, String)> = Vec::new();
    for capture in pattern.captures_iter(source) {
        let Some(name) = capture.get(1) else { continue };
        let snake = snake_case(name.as_str());
        if !found.iter().any(|(_, known)| *known == snake) {
            found.push((name.start(), snake));
        }
    }
    found
}

/// Skill bundles a script names a path in (`skills/<slug>/…`), in first-mention order.
pub(crate) fn named_skills(source: &str) -> Vec<String> {
    let Ok(pattern) = Regex::new(r"\bskills/([a-z0-9]+(?:-[a-z0-9]+)*)/") else {
        return Vec::new();
    };
    let mut found: Vec<String> = Vec::new();
    for capture in pattern.captures_iter(source) {
        if let Some(slug) = capture.get(1)
            && !found.iter().any(|known| known == slug.as_str())
        {
            found.push(slug.as_str().to_string());
        }
    }
    found
}

fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for character in name.chars() {
        if character.is_ascii_uppercase() {
            out.push('_');
            out.push(character.to_ascii_lowercase());
        } else {
            out.push(character);
        }
    }
    out
}

/// `value` made safe to stand inside a `//` or `/* */` comment: the characters that end
/// a JavaScript line become their escapes and `*/` cannot close the comment.
pub(crate) fn comment_safe(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out.replace("*/", "*\\/")
}

fn js(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

/// Ports one hook file for one hook position.
pub(crate) fn port(source: &str, hook_path: &str, spec: &Port<'_>) -> Ported {
    let mut changes = Vec::new();
    let mut follow_ups = Vec::new();
    let mut body = String::with_capacity(source.len() + 4096);
    let carrier = Regex::new(r#"^\s*import\b[^;]*\bfrom\s*["']@archmax-ai/harness(/[^"']*)?["']\s*;?\s*$"#).ok();
    let any_import = Regex::new(r"^\s*import\b").ok();
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if carrier.as_ref().is_some_and(|pattern| pattern.is_match(bare)) {
            changes.push((
                offset,
                "dropped the `@archmax-ai/harness` type import (the adapter defines the verdict helpers)".to_string(),
            ));
            body.push('\n');
        } else {
            if any_import.as_ref().is_some_and(|pattern| pattern.is_match(bare)) {
                follow_ups.push((
                    offset,
                    "a code-state script may import nothing: inline what this import brings".to_string(),
                ));
            }
            body.push_str(line);
        }
        offset += line.len();
    }
    if !body.ends_with('\n') {
        body.push('\n');
    }

    let pattern = Regex::new(r"(?m)^(\s*)export\s+default\b").ok();
    let export = pattern.as_ref().and_then(|pattern| pattern.find(&body).map(|found| found.range()));
    // Import lines become empty lines, so the report's offset is read in the original.
    let export_at = pattern
        .as_ref()
        .and_then(|pattern| pattern.find(source))
        .map_or(0, |found| found.start() + found.as_str().len() - found.as_str().trim_start().len());
    match export {
        Some(range) => {
            let indent_len = body[range.clone()].len() - body[range.clone()].trim_start().len();
            body.replace_range(range.start + indent_len..range.end, "const contract2Hook =");
            changes.push((
                export_at,
                format!(
                    "the hook's default export is kept as `contract2Hook`, called by a generated adapter ({hook_path})"
                ),
            ));
        }
        None => {
            // A hook with no default export was a plain script whose completion value
            // was the verdict: wrap it in a function and return its last expression.
            let mut lines: Vec<&str> = body.lines().collect();
            let last = lines.iter().rposition(|line| !line.trim().is_empty());
            let mut returned = None;
            if let Some(index) = last {
                let trimmed = lines[index].trim_start();
                let statement = [
                    "}",
                    "//",
                    "*",
                    "/*",
                    "const ",
                    "let ",
                    "var ",
                    "if ",
                    "if(",
                    "for ",
                    "while ",
                    "function ",
                    "return",
                    "throw ",
                ]
                .iter()
                .any(|start| trimmed.starts_with(start));
                if !statement {
                    returned = Some(format!("  return {trimmed}"));
                }
            }
            let mut wrapped = String::from(
                "const contract2Hook = async ({ state, phase, trigger, variables, messages, tools }) => {\n",
            );
            for (index, line) in lines.iter_mut().enumerate() {
                match (&returned, Some(index) == last) {
                    (Some(line_text), true) => wrapped.push_str(line_text),
                    _ => {
                        if !line.is_empty() {
                            wrapped.push_str("  ");
                        }
                        wrapped.push_str(line);
                    }
                }
                wrapped.push('\n');
            }
            wrapped.push_str("};\n");
            body = wrapped;
            follow_ups.push((
                0,
                "the hook had no default export (its completion value was the verdict): it is wrapped in a function that returns its last line; check that line is the verdict".to_string(),
            ));
        }
    }
    for (pattern, note) in [
        (
            r"\bargs\.(messages|phase|from|to|reason)\b",
            "the global `args` of a code state holds `state`, `trigger` and `variables` only: read these fields from the hook's argument instead",
        ),
        (r"\btask\s*\(", "`task()` never existed in a sandbox and still does not: judge with a grader state instead"),
        (r"\bSANDBOX_CONTRACT\b", "`SANDBOX_CONTRACT` is gone: a code state's script needs no contract probe"),
    ] {
        if let Some(found) = Regex::new(pattern).ok().and_then(|regex| regex.find(source)) {
            follow_ups.push((found.start(), note.to_string()));
        }
    }
    body.push_str(&adapter(spec));
    Ported { text: body, changes, follow_ups }
}

/// The generated default export.
fn adapter(spec: &Port<'_>) -> String {
    let onward: Vec<String> = spec.onward.iter().map(|slug| js(slug)).collect();
    let mut out = String::new();
    out.push_str("\n// --- Generated by `archmax migrate` -------------------------------------------------\n");
    out.push_str(&format!(
        "// This file was the `{}` hook of `{}`. Under contract 3 it runs as the code state `{}`:\n",
        spec.phase.as_str(),
        comment_safe(spec.guarded),
        comment_safe(spec.here)
    ));
    out.push_str("// the hook above is called as before, and its verdict becomes this state's decision.\n\n");
    out.push_str(&format!("const GUARDED = {};\n", js(spec.guarded)));
    out.push_str(&format!("const HERE = {};\n", js(spec.here)));
    out.push_str(&format!("const ONWARD = [{}];\n", onward.join(", ")));
    match spec.phase {
        Phase::Before => match spec.refused {
            Some(refused) => out.push_str(&format!("const REFUSED = {};\n", js(refused))),
            None => out.push_str("const REFUSED = null;\n"),
        },
        Phase::After => out.push_str(&format!("const MAX_SEND_BACKS = {};\n", spec.max_iterations)),
    }
    out.push_str(&format!("const RAISE_CODE = {};\n", js(spec.raise_code)));
    out.push_str(
        r#"const VERDICT = Symbol("verdict");

function ok() {
  return { [VERDICT]: "ok" };
}
function veto(reason) {
  return { [VERDICT]: "veto", reason: String(reason ?? "vetoed") };
}
function correct(reason) {
  return { [VERDICT]: "correct", reason: String(reason ?? "needs a correction") };
}
function defineHook(hook) {
  return hook;
}

// A contract-2 verdict: nothing, `true`, a number or a string proceed; `false` and any
// object that is not one of the helpers' verdicts veto.
function readVerdict(value) {
  if (value === false) return { kind: "veto", reason: "precondition not met" };
  if (value === null || typeof value !== "object") return { kind: "ok" };
  if (value[VERDICT]) return { kind: value[VERDICT], reason: value.reason };
  return { kind: "veto", reason: `the hook returned an object that is no verdict (keys: ${Object.keys(value).join(", ")})` };
}
"#,
    );
    match spec.phase {
        Phase::Before => out.push_str(
            r#"
export default async function ({ trigger, variables, tools }) {
  const history = JSON.parse(await tools.archmax_get_history());
  // A hook saw the last 24 messages of the session, newest last.
  const messages = history.messages.slice(-24);
  let verdict;
  try {
    verdict = readVerdict(await contract2Hook({ state: GUARDED, phase: "before", trigger, variables, messages, tools }));
  } catch (error) {
    // A hook that threw vetoed, with the error as the reason (fail-closed).
    verdict = { kind: "veto", reason: String(error?.message ?? error) };
  }
  if (verdict.kind === "ok") {
    await tools.archmax_advance({ to: ONWARD[0], reason: `The ${HERE} check passed.` });
    return;
  }
  // `correct` never applied before a state: it was a veto there.
  if (REFUSED) {
    await tools.archmax_advance({ to: REFUSED, reason: verdict.reason });
  } else {
    await tools.archmax_raise({ code: RAISE_CODE, reason: verdict.reason });
  }
}
"#,
        ),
        Phase::After => out.push_str(
            r#"
// The agent's reason for the advance that entered this state, and the onward
// transition it named (the only one when there is one).
function attempted(history) {
  let reason = "";
  for (const message of history.messages) {
    for (const call of message.toolCalls ?? []) {
      if (call.name === "archmax_advance" && call.args?.to === HERE) reason = String(call.args.reason ?? "");
    }
  }
  const to = ONWARD.length === 1 ? ONWARD[0] : ONWARD.find((slug) => new RegExp(`\\b${slug}\\b`).test(reason));
  return { reason, to };
}

export default async function ({ trigger, variables, tools }) {
  const history = JSON.parse(await tools.archmax_get_history());
  const messages = history.messages.slice(-24);
  const { reason, to } = attempted(history);
  if (!to) {
    await tools.archmax_advance({ to: GUARDED, reason: `Say which step comes next in the reason of your advance: ${ONWARD.join(" or ")}.` });
    return;
  }
  let verdict;
  try {
    verdict = readVerdict(
      await contract2Hook({ state: GUARDED, phase: "after", trigger, variables, messages, tools, from: GUARDED, to, reason }),
    );
  } catch (error) {
    // A hook that threw failed its state: this routes through `on_error` as it did.
    throw new Error(`the ${HERE} check failed: ${error?.message ?? error}`);
  }
  if (verdict.kind === "ok") {
    await tools.archmax_advance({ to, reason: `The ${HERE} check passed.` });
    return;
  }
  if (verdict.kind === "veto") {
    // A veto blocked the transition and the agent tried again: send the work back.
    await tools.archmax_advance({ to: GUARDED, reason: verdict.reason });
    return;
  }
  // `correct`: send it back while the old `max_iterations` allows, counting this
  // state's send-backs on the trail; past the bound the check fails, which routes
  // through `on_error` as a spent correction budget did.
  const trail = history.trail;
  const sendBacks = trail.filter((step, index) => index > 0 && step.kind === "code" && step.to === GUARDED && trail[index - 1].to === HERE).length;
  if (sendBacks < MAX_SEND_BACKS) {
    await tools.archmax_advance({ to: GUARDED, reason: verdict.reason });
    return;
  }
  throw new Error(`${RAISE_CODE}: ${verdict.reason} (after ${sendBacks} send-back(s))`);
}
"#,
        ),
    }
    out
}

/// The script of a terminal code state that ends the session once a check behind a
/// terminal state has passed.
pub(crate) fn finish_script(guarded: &str) -> String {
    let guarded = comment_safe(guarded);
    format!(
        "/**\n * Finish `{guarded}`\n *\n * Written by `archmax migrate`: `{guarded}` was a terminal state with an `after` check,\n * so the check now sits behind it and advances here when it passes. This terminal\n * code state decides nothing, so the session completes.\n */\nexport default async function () {{}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_and_skills_a_hook_uses() {
        let source = "const a = await tools.readFile({ file_path: \"skills/order-data/assets/x.json\" });\nawait tools.lookupCustomer({});\nawait tools.readFile({});";
        let names: Vec<String> = called_tools(source).into_iter().map(|(_, name)| name).collect();
        assert_eq!(names, ["read_file", "lookup_customer"]);
        assert_eq!(named_skills(source), ["order-data"]);
    }

    #[test]
    fn a_plain_script_hook_returns_its_last_line() {
        let spec = Port {
            phase: Phase::Before,
            guarded: "start",
            here: "gate",
            onward: &["start".to_string()],
            refused: None,
            raise_code: "start-vetoed",
            max_iterations: 0,
        };
        let ported = port("const n = 1;\nn > 0 ? ok() : veto(\"none\")\n", "hooks/gate.js", &spec);
        assert!(ported.text.contains("  return n > 0 ? ok() : veto(\"none\")\n"), "{}", ported.text);
        assert_eq!(ported.follow_ups.len(), 1);
    }
}
