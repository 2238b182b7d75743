//! The schema of `workflows/<slug>/workflow.yaml` (runtime contract "3").

use serde_json::{Value, json};

use archmax_program::program::{
    CONTRACT, DEFAULT_MAX_PTC_CALLS, DEFAULT_MAX_RESULT_CHARS, DEFAULT_MEMORY_LIMIT_BYTES, DEFAULT_TIMEOUT_MS,
};

use super::{closed, count, defaults_to, document, flag, list, nonempty, object, one_of, reference, text};
use crate::lower::DEFAULT_CASE_TIMEOUT_MS;

const STATE_TYPES: [&str; 4] = ["agent", "human", "grader", "code"];
const VALUE_TYPES: [&str; 9] =
    ["string", "integer", "number", "boolean", "date", "date-time", "object", "array", "file"];
const VARIABLE_NAME: &str = "^[a-z][a-z0-9_]*$";
const SLUG: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

pub fn schema() -> Value {
    let mut schema = document(
        "workflow.schema.json",
        "archmax workflow",
        "A workflow of runtime contract 3: an enforced state machine whose states each declare the tools, skills and mounts they may use.",
        closed(
            "A workflow document.",
            &[
                ("title", nonempty("A label for people.")),
                ("instructions", nonempty("The rules that hold in every state; they open the cached prompt prefix.")),
                ("disabled", defaults_to(flag("A disabled workflow validates but starts no session."), json!(false))),
                ("runtime", reference("runtime")),
                ("settings", reference("settings")),
                ("tests", reference("tests")),
                ("tools", reference("rootTools")),
                ("skills", reference("rootGrants")),
                ("mounts", reference("rootGrants")),
                ("metadata", json!({ "description": "An editor's or host's own data; the runtime never reads it." })),
                (
                    "states",
                    json!({
                        "type": "object",
                        "description": "The states, keyed by their kebab-case slug. At least one state declares a trigger.",
                        "minProperties": 1,
                        "propertyNames": { "pattern": SLUG },
                        "additionalProperties": reference("state"),
                    }),
                ),
            ],
            &["states"],
        ),
    );
    schema["$defs"] = definitions();
    schema
}

/// A grant block: a list of entries that grants, and one that denies.
fn block(description: &str, keys: [&str; 2], lists: [&str; 2], entry: &str) -> Value {
    closed(
        description,
        &[(keys[0], list(lists[0], reference(entry))), (keys[1], list(lists[1], reference(entry)))],
        &[],
    )
}

/// The `$defs` the schema's references name, one a kind of block.
fn definitions() -> Value {
    json!({
        "runtime": closed(
            "The runtime contract the workflow is written for.",
            &[
                ("engine", defaults_to(one_of("The engine; only one exists.", &["archmax-harness"]), json!("archmax-harness"))),
                (
                    "version",
                    json!({ "enum": ["3", 3], "default": CONTRACT, "description": "The runtime contract: \"3\"." }),
                ),
            ],
            &[],
        ),
        "settings": settings(),
        "tests": test_settings(),
        "rootTools": block(
            "Tool grants and denials for every state.",
            ["allow_always", "forbid_always"],
            ["Tools on in every state.", "Tools no state may use; a denial beats every grant."],
            "toolEntry",
        ),
        "rootGrants": block(
            "Skill bundles or mounts granted or denied in every state.",
            ["allow_always", "forbid_always"],
            ["Granted in every state.", "Denied in every state."],
            "grantEntry",
        ),
        "stateGrants": block(
            "Skill bundles or mounts this state adds or takes away.",
            ["allow", "forbid"],
            ["Granted in this state.", "Denied in this state."],
            "grantEntry",
        ),
        "stateTools": block(
            "The tools this state may use beyond the defaults, and those it may not.",
            ["allow", "forbid"],
            ["Tools this state may use; an entry may guard arguments and paths.", "Tools this state may not use."],
            "toolEntry",
        ),
        "toolEntry": tool_entry(),
        "grantEntry": grant_entry(),
        "state": state(),
        "transition": closed(
            "An edge to another state.",
            &[
                ("to", json!({ "type": "string", "pattern": SLUG, "description": "The target state's slug." })),
                ("description", nonempty("When to take the edge (never where it goes).")),
                (
                    "type",
                    defaults_to(
                        one_of("A human state's choice label.", &["none", "approve", "reject", "refine"]),
                        json!("none"),
                    ),
                ),
            ],
            &["to"],
        ),
        "trigger": trigger(),
        "variableName": { "type": "string", "pattern": VARIABLE_NAME, "description": "A session variable's name." },
        "signatureEntry": signature_entry(),
    })
}

/// `settings`: what every state runs under unless it says otherwise.
fn settings() -> Value {
    closed(
        "Settings every state runs under.",
        &[
            ("model", nonempty("The model id every state runs on unless it names its own.")),
            (
                "timeoutMs",
                defaults_to(
                    count(
                        "The bound on one sandbox evaluation (a code state's script, `archmax_eval`, `archmax_run`), in milliseconds.",
                        1,
                    ),
                    json!(DEFAULT_TIMEOUT_MS),
                ),
            ),
            (
                "memoryLimitBytes",
                defaults_to(
                    count("A sandbox evaluation's memory limit, in bytes.", 1),
                    json!(DEFAULT_MEMORY_LIMIT_BYTES),
                ),
            ),
            (
                "maxPtcCalls",
                defaults_to(count("The most tool calls one script may make.", 1), json!(DEFAULT_MAX_PTC_CALLS)),
            ),
            (
                "maxResultChars",
                defaults_to(
                    count("The longest tool answer the model reads, in characters.", 1),
                    json!(DEFAULT_MAX_RESULT_CHARS),
                ),
            ),
            (
                "prompt_cache",
                closed(
                    "Provider prompt caching of the static prefix.",
                    &[
                        ("enabled", defaults_to(flag("Ask the provider to cache the prompt prefix."), json!(true))),
                        ("ttl", defaults_to(one_of("How long the cache entry lives.", &["5m", "1h"]), json!("5m"))),
                    ],
                    &[],
                ),
            ),
        ],
        &[],
    )
}

/// `tests`: how `archmax test` runs the workflow's cases.
fn test_settings() -> Value {
    closed(
        "How `archmax test` runs this workflow's cases.",
        &[
            ("maxConcurrency", defaults_to(count("Cases run at once.", 1), json!(1))),
            (
                "caseTimeoutMs",
                defaults_to(count("A case's time limit, in milliseconds.", 1), json!(DEFAULT_CASE_TIMEOUT_MS)),
            ),
            (
                "judge",
                closed(
                    "The model that grades `grade` steps.",
                    &[
                        ("model", nonempty("The judge's model id.")),
                        (
                            "modelOptions",
                            closed(
                                "Sampling options for the judge.",
                                &[
                                    (
                                        "temperature",
                                        json!({ "type": "number", "minimum": 0, "description": "Sampling temperature." }),
                                    ),
                                    ("maxTokens", count("The longest answer, in tokens.", 1)),
                                ],
                                &[],
                            ),
                        ),
                    ],
                    &[],
                ),
            ),
        ],
        &[],
    )
}

/// One entry of a tool grant: a bare name, or a tool with guards.
fn tool_entry() -> Value {
    json!({
        "description": "A tool name, or a tool with guards on its arguments and paths.",
        "oneOf": [
            nonempty("A tool name (`read_file`, `crm__lookup`, `archmax_workflow_<slug>`)."),
            closed(
                "A tool with guards.",
                &[
                    ("tool", nonempty("The tool's name.")),
                    ("args", json!({
                        "type": "object",
                        "description": "Argument guards: each argument's allowed values (globs, `${{name}}` references).",
                        "additionalProperties": {
                            "oneOf": [
                                { "type": ["string", "number", "boolean"] },
                                { "type": "array", "items": { "type": ["string", "number", "boolean"] } }
                            ]
                        },
                    })),
                    ("paths", list("Path globs the call's path arguments must fall in.", text("A workspace-relative glob."))),
                    ("connection", nonempty("The MCP server that serves the call when several serve its collection.")),
                    ("source", text("For `archmax_run`: the scripts it may run.")),
                ],
                &["tool"],
            ),
        ],
    })
}

/// One entry of a skill or mount grant: a bare key, or a mount with its access.
fn grant_entry() -> Value {
    json!({
        "description": "A skill bundle's or mount's key, or a mount with its access.",
        "oneOf": [
            nonempty("A skill bundle slug or a mount key."),
            closed(
                "A mount with its access.",
                &[
                    ("mount", nonempty("The mount key, as `archmax.toml` declares it.")),
                    ("access", defaults_to(one_of("What the state may do there.", &["read", "read_write"]), json!("read"))),
                ],
                &["mount"],
            ),
        ],
    })
}

/// One state of the machine, with every key a state may carry.
fn state() -> Value {
    closed(
        "One state of the machine.",
        &[
            (
                "type",
                defaults_to(
                    one_of("What runs the state: a model, a person, an isolated judge or a script.", &STATE_TYPES),
                    json!("agent"),
                ),
            ),
            ("title", nonempty("A label for people.")),
            ("summary", nonempty("One line saying what the state does, for people and listings.")),
            ("instructions", nonempty("What the agent (or the deciding person, or the grader) is told in this state.")),
            ("script", nonempty("A code state's script, `scripts/<name>.js`.")),
            (
                "triggers",
                json!({
                    "type": "object",
                    "description": "The triggers that enter the workflow at this state, keyed by trigger id (`manual`, `chat_message`, …).",
                    "additionalProperties": reference("trigger"),
                }),
            ),
            ("tools", reference("stateTools")),
            ("skills", reference("stateGrants")),
            ("mounts", reference("stateGrants")),
            (
                "requires",
                list("Variables that must be set before the session leaves this state.", reference("variableName")),
            ),
            ("locks", list("Variables only this state may write.", reference("variableName"))),
            ("model", nonempty("The model this state runs on, when it differs from `settings.model`.")),
            (
                "budget",
                closed(
                    "Bounds on this state.",
                    &[
                        ("timeoutMs", count("The state's time limit, in milliseconds.", 1)),
                        ("maxParks", count("How often a human state may park before it fails.", 1)),
                    ],
                    &[],
                ),
            ),
            (
                "on_error",
                json!({ "type": "string", "pattern": SLUG, "description": "The state a failure here routes to." }),
            ),
            ("transitions", list("The edges out of this state.", reference("transition"))),
            (
                "evidence",
                list("Files a deciding person is shown (human states).", nonempty("A workspace-relative path.")),
            ),
            ("approvers", list("Who may decide (human states).", nonempty("A principal."))),
            ("metadata", json!({ "description": "An editor's or host's own data; the runtime never reads it." })),
        ],
        &[],
    )
}

/// A trigger declaration and the signature a firing must meet.
fn trigger() -> Value {
    json!({
        "description": "A trigger declaration; `null` for one with nothing to declare. A host may keep keys of its own here.",
        "oneOf": [
            { "type": "null" },
            object(
                "A trigger with its signature.",
                &[
                    ("description", nonempty("What a firing of this trigger asks for.")),
                    ("session", nonempty("The dotted path in the firing's input that names the session to resume.")),
                    ("message", json!({ "description": "The dotted path of the firing's words, or `false` when it carries none.", "oneOf": [{ "type": "string", "minLength": 1 }, { "const": false }] })),
                    ("connection", nonempty("The `[connections.<slug>]` whose signature a webhook firing carries.")),
                    ("requires", list("What a firing must provide; checked before the session starts.", reference("signatureEntry"))),
                    ("returns", list("What the session hands back to a caller (a sub-workflow's result).", reference("signatureEntry"))),
                ],
                &[],
            ),
        ],
    })
}

/// One entry of a trigger's `requires` or `returns`: a name, or a typed entry with rules.
fn signature_entry() -> Value {
    json!({
        "description": "A variable name, or a typed entry with rules.",
        "oneOf": [
            reference("variableName"),
            closed(
                "A typed signature entry.",
                &[
                    ("name", reference("variableName")),
                    ("type", one_of("The value's type.", &VALUE_TYPES)),
                    ("description", nonempty("What the value is, for the agent and for callers.")),
                    ("format", one_of("A string's format.", &["email", "url", "phone"])),
                    (
                        "pattern",
                        json!({ "type": "string", "minLength": 1, "format": "regex", "description": "An RE2 regular expression a string must match." }),
                    ),
                    ("minLength", count("A string's least length.", 0)),
                    ("maxLength", count("A string's greatest length.", 0)),
                    ("enum", json!({ "type": "array", "minItems": 1, "uniqueItems": true, "description": "The values allowed." })),
                    ("content", one_of("A string's content kind.", &["text", "markdown", "html"])),
                    ("minimum", json!({ "type": ["number", "string"], "description": "The least value: a number, a date, an instant, `today` or `now`." })),
                    ("maximum", json!({ "type": ["number", "string"], "description": "The greatest value: a number, a date, an instant, `today` or `now`." })),
                    ("minItems", count("An array's least length.", 0)),
                    ("maxItems", count("An array's greatest length.", 0)),
                    ("accept", json!({ "type": "array", "items": { "type": "string" }, "description": "A file's accepted extensions (`.pdf`) or media types." })),
                    ("maxSize", json!({ "type": ["integer", "string"], "description": "A file's largest size (`5 MB`)." })),
                ],
                &["name"],
            ),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_and_value_types_are_the_compilers() {
        let signature: Vec<&str> = crate::schema::ast::ValueType::ALL.iter().map(|ty| ty.as_str()).collect();
        assert_eq!(VALUE_TYPES.to_vec(), signature);
        for kind in [
            crate::schema::ast::StateKind::Agent,
            crate::schema::ast::StateKind::Human,
            crate::schema::ast::StateKind::Grader,
            crate::schema::ast::StateKind::Code,
        ] {
            assert!(STATE_TYPES.contains(&kind.as_str()));
        }
    }
}
