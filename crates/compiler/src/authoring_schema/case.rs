//! The schema of a case, `workflows/<slug>/tests/**/*.test.yaml` (test spec version 1).

use serde_json::{Value, json};

use super::{closed, count, document, list, nonempty, one_of, reference, text};
use crate::schema::case::{DESCRIPTION_MAX_CHARS, TITLE_MAX_CHARS};

const TRAIL_KINDS: [&str; 8] = ["trigger", "agent", "human", "on_error", "reset", "grader", "code", "sub-workflow"];

pub fn schema() -> Value {
    let mut schema = document(
        "case.schema.json",
        "archmax case",
        "One case of a workflow's suite: a conversation on one session, its actions and what must hold after each.",
        closed(
            "A case document.",
            &[
                (
                    "title",
                    json!({ "type": "string", "pattern": prose_pattern(TITLE_MAX_CHARS, true), "description": "One line, at most 60 characters once each run of whitespace counts as one." }),
                ),
                (
                    "description",
                    json!({ "type": "string", "pattern": prose_pattern(DESCRIPTION_MAX_CHARS, false), "description": "What the case shows, at most 200 characters once each run of whitespace counts as one." }),
                ),
                ("skip", nonempty("Why the case is skipped; a skipped case needs no tape or model.")),
                (
                    "trigger",
                    closed(
                        "The trigger the session starts on (default `manual`).",
                        &[("id", nonempty("The trigger id."))],
                        &["id"],
                    ),
                ),
                ("variables", json!({ "type": "object", "description": "Variables seeded locked, as a host would." })),
                (
                    "workspace",
                    json!({
                        "type": "object",
                        "description": "Session files to seed, keyed by path: the file's text, `{ from: <file under tests/> }` for a fixture, or any other value, written as JSON.",
                    }),
                ),
                ("mocks", list("Host tool answers, matched after governance allowed the call.", reference("mock"))),
                (
                    "steps",
                    list(
                        "Actions and assertions, in order; an assertion checks the action before it.",
                        reference("step"),
                    ),
                ),
            ],
            &["title", "description", "steps"],
        ),
    );
    schema["$defs"] = definitions();
    schema
}

/// A pattern holding text to what `validate` allows a case's `title` or `description`:
/// something besides whitespace, at most `limit` characters once the ends are trimmed and
/// each inner run of whitespace counts as one, and (for a title) no line break inside.
/// `maxLength` cannot say this: it counts every character as written.
fn prose_pattern(limit: usize, single_line: bool) -> String {
    let gap = if single_line { "[^\\S\\n]" } else { "\\s" };
    format!("^\\s*(?:\\S|{gap}+(?=\\S)){{1,{limit}}}\\s*$")
}

fn tool_match(description: &str) -> Value {
    closed(
        description,
        &[
            ("name", nonempty("The tool's name.")),
            ("input", json!({ "type": "object", "description": "A partial match on the call's arguments." })),
        ],
        &["name"],
    )
}

fn tokens(description: &str) -> Value {
    json!({
        "description": description,
        "oneOf": [{ "type": "string" }, { "type": "array", "items": { "type": "string" } }],
    })
}

/// `trail`: which steps to count (at least one selector), and how many.
fn trail() -> Value {
    let mut trail = closed(
        "Steps on the session's trail.",
        &[
            ("to", nonempty("The state moved to.")),
            ("kind", one_of("How it moved.", &TRAIL_KINDS)),
            ("reason", nonempty("Text or a `/regex/flags` the step's reason matches.")),
            ("count", count("How many such steps.", 0)),
        ],
        &["count"],
    );
    trail["anyOf"] = json!([{ "required": ["to"] }, { "required": ["kind"] }, { "required": ["reason"] }]);
    trail
}

fn definitions() -> Value {
    let steps = [
        ("send", nonempty("Send the session a message.")),
        (
            "decide",
            closed(
                "Decide a parked human state.",
                &[("to", nonempty("The transition's target.")), ("comment", text("The decider's comment."))],
                &["to"],
            ),
        ),
        (
            "deliver",
            closed(
                "Deliver a trigger to a session waiting for input.",
                &[
                    ("trigger", nonempty("The trigger id.")),
                    ("variables", json!({ "type": "object", "description": "The firing's input." })),
                ],
                &["trigger"],
            ),
        ),
        ("succeeded", json!({ "const": true, "description": "The turn completed." })),
        (
            "parked",
            json!({
                "description": "The session parked: `true`, its channel, or where and on which channel.",
                "oneOf": [
                    { "const": true },
                    one_of("The park's channel.", &["decision", "input"]),
                    closed(
                        "Where the session parked.",
                        &[("channel", one_of("The park's channel.", &["decision", "input"])), ("state", nonempty("The state it parked in."))],
                        &[],
                    ),
                ],
            }),
        ),
        (
            "raised",
            json!({
                "description": "The session raised: `true`, a code, or the code and a reason.",
                "oneOf": [
                    { "const": true },
                    { "type": "string", "minLength": 1 },
                    closed(
                        "The raise expected.",
                        &[("code", nonempty("The raised code.")), ("reason", nonempty("Text or a `/regex/flags` the reason matches."))],
                        &[],
                    ),
                ],
            }),
        ),
        ("reachedState", nonempty("The session entered this state.")),
        (
            "noTraversal",
            json!({ "const": true, "description": "The last action moved the session through no transition." }),
        ),
        ("triggerArrival", nonempty("The session was entered by this trigger.")),
        ("trail", trail()),
        (
            "variables",
            closed(
                "The session's variables.",
                &[
                    ("expect", json!({ "type": "object", "description": "A partial match on the variables." })),
                    (
                        "path",
                        json!({ "type": "object", "description": "For a variable in `expect`, the dotted path into it that is compared.", "additionalProperties": { "type": "string" } }),
                    ),
                    (
                        "locked",
                        json!({ "type": "object", "description": "For each variable named, whether it must be locked." }),
                    ),
                ],
                &[],
            ),
        ),
        (
            "reply",
            closed(
                "The session's last reply.",
                &[
                    ("includes", tokens("Text or `/regex/flags` the reply holds.")),
                    ("excludes", tokens("Text or `/regex/flags` the reply must not hold.")),
                ],
                &[],
            ),
        ),
        ("calledTool", tool_match("A tool was called.")),
        ("notCalledTool", tool_match("A tool was not called.")),
        ("blockedTool", tool_match("A tool call was refused by governance.")),
        ("usedNoTools", json!({ "const": true, "description": "The last action made no tool call." })),
        (
            "ranWorkflow",
            closed(
                "A sub-workflow ran.",
                &[
                    ("workflow", nonempty("The workflow's slug.")),
                    ("status", one_of("How it ended.", &["ok", "error", "parked"])),
                    ("count", count("How many runs.", 0)),
                ],
                &["workflow"],
            ),
        ),
        (
            "grade",
            closed(
                "The judge grades the conversation.",
                &[
                    ("closedQA", nonempty("The criterion the judge answers yes or no.")),
                    (
                        "atLeast",
                        json!({ "type": "number", "minimum": 0, "maximum": 1, "description": "The least passing score." }),
                    ),
                ],
                &["closedQA", "atLeast"],
            ),
        ),
    ];
    let mut step = closed("One action or assertion: a mapping with exactly one key.", &steps, &[]);
    step["minProperties"] = json!(1);
    step["maxProperties"] = json!(1);
    json!({
        "step": step,
        "mock": closed(
            "A host tool's scripted answer.",
            &[
                ("tool", nonempty("The tool's name.")),
                ("whenInput", json!({ "type": "object", "description": "A partial match on the call's arguments." })),
                ("result", json!({ "description": "The answer the call gets." })),
            ],
            &["tool", "result"],
        ),
    })
}
