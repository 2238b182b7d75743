//! Schemas of the runtime's own tools: the control tools that move, pause, reset or end
//! a session, the variable tools, and the sandbox tools. The runtime carries them out;
//! this module only describes them to the model.

use archmax_program::tools::RUNTIME_TOOLS;
use serde_json::json;

use super::ToolSchema;

/// True for a tool the runtime implements itself.
pub(crate) fn is_control(tool: &str) -> bool {
    RUNTIME_TOOLS.contains(&tool)
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    let reason = |what: &str| json!({ "type": "string", "minLength": 1, "description": what });
    let schema = match tool {
        "archmax_advance" => ToolSchema::closed(
            tool,
            "Leave the current state along one of its transitions, once this state's work is done. Set `to` \
             to a transition's slug exactly as the Transitions list shows it in backticks (never its title). \
             The runtime checks that the transition exists and runs its checks; on success the next state's \
             tools become available, otherwise the answer says why you stayed.",
            json!({
                "to": { "type": "string", "minLength": 1, "description": "The slug of the state to move to." },
                "reason": reason("One sentence on why the work here is done and this transition is right."),
                "evidence": {
                    "type": "array",
                    "items": { "type": "string", "minLength": 1 },
                    "maxItems": 20,
                    "description": "Workspace paths of files that back the decision, for a person to review. \
                                    Only accepted when moving into a human decision state."
                }
            }),
            &["to", "reason"],
        ),
        "archmax_reset" => ToolSchema::closed(
            tool,
            "Return to the state this session began in, when the current state cannot serve the request in \
             front of you. Variables you locked yourself become writable again; the host's locked values stay \
             locked, and files, variables and the conversation are kept as they are.",
            json!({ "reason": reason("Why the session must start over from the entry state.") }),
            &["reason"],
        ),
        "archmax_wait" => ToolSchema::closed(
            tool,
            "Pause the session in this state until something arrives from outside: a reply, an event, a time. \
             The session resumes here when it does; nothing moves and nothing is scheduled. Stop working after \
             calling it. Do not use it to wait for a person's decision: advance into the human decision state \
             instead.",
            json!({
                "reason": reason("What the session is waiting for."),
                "until": {
                    "type": "string",
                    "description": "When waiting for a time: a duration such as `30m`, `2h` or `1d`, or an \
                                    ISO-8601 date and time. Recorded as a hint; any earlier message resumes the \
                                    session."
                }
            }),
            &["reason"],
        ),
        "archmax_raise" => ToolSchema::closed(
            tool,
            "End the session as failed, when the work cannot be completed even after trying to recover. Call it \
             alone in its message, and put what the person should read in the text of that message. Not for \
             work that succeeded, nor instead of waiting, resetting or handing over to a person.",
            json!({
                "code": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "description": "A short machine-readable failure code on one line, e.g. `order-not-found`."
                },
                "reason": reason("What went wrong, for the people who read the failure.")
            }),
            &["code", "reason"],
        ),
        "archmax_get_variables" => ToolSchema::closed(
            tool,
            "Read the session's variables as JSON. Without `name`, every variable with its value and whether it \
             is locked; with `name`, that variable; with `name` and `path`, one part of its value.",
            json!({
                "name": { "type": "string", "description": "The variable to read." },
                "path": {
                    "type": "string",
                    "description": "A dotted path into the variable's value, e.g. `customer.email` or `items.0`."
                }
            }),
            &[],
        ),
        "archmax_set_variables" => ToolSchema::closed(
            tool,
            "Set session variables, each to a whole new value (a part of a value cannot be set on its own). \
             Either every variable is set or, if any is refused, none is. A locked variable cannot be changed. \
             Set the reserved `title` to a short one-line name for the session.",
            json!({
                "variables": {
                    "type": "object",
                    "minProperties": 1,
                    "additionalProperties": true,
                    "description": "Variable names mapped to their new values."
                },
                "lock": {
                    "type": "boolean",
                    "description": "Lock these variables so nothing can change them afterwards. Defaults to \
                                    false; `title` is never locked."
                }
            }),
            &["variables"],
        ),
        "archmax_get_history" => ToolSchema::closed(
            tool,
            "Read this session's history so far: the states it passed through, the transitions taken and why, \
             as JSON.",
            json!({}),
            &[],
        ),
        "archmax_eval" => ToolSchema::closed(
            tool,
            "Run JavaScript in this session's sandbox and get back the value of its last expression together \
             with anything it logged. Definitions persist between calls. The allowed tools are reachable as \
             `tools.<camelCaseName>(args)`, each returning text.",
            json!({ "code": { "type": "string", "minLength": 1, "description": "The JavaScript to run." } }),
            &["code"],
        ),
        "archmax_run" => ToolSchema {
            name: tool.to_string(),
            description: "Run a script file from an enabled skill bundle in this session's sandbox. Any further \
                          arguments are handed to the script as the global `args`."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "file_path": {
                        "type": "string",
                        "description": "The script to run, e.g. `skills/orders/scripts/lookup.js`."
                    }
                },
                "required": ["file_path"],
                "additionalProperties": true,
            }),
        },
        _ => return None,
    };
    Some(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_runtime_tool_has_a_schema() {
        for tool in RUNTIME_TOOLS {
            let schema = schema(tool).unwrap_or_else(|| panic!("{tool} has no schema"));
            assert_eq!(schema.name, tool);
            assert_eq!(schema.parameters["type"], "object");
            assert!(schema.parameters["properties"].is_object(), "{tool}");
            assert!(schema.parameters["required"].is_array(), "{tool}");
            assert!(!schema.description.is_empty());
        }
        assert!(schema("archmax_note").is_none());
    }

    #[test]
    fn reset_is_described_by_contract_three() {
        let description = schema("archmax_reset").map(|schema| schema.description).unwrap_or_default();
        assert!(description.contains("began in"), "{description}");
        assert!(description.contains("locked yourself"), "names the release of the agent's locks: {description}");
        for contract_two in ["Correction", "correction", "checks run again"] {
            assert!(!description.contains(contract_two), "contract 2 wording `{contract_two}` in: {description}");
        }
    }

    #[test]
    fn required_arguments_match_the_contract() {
        let required = |tool: &str| schema(tool).map(|schema| schema.parameters["required"].clone());
        assert_eq!(required("archmax_advance"), Some(json!(["to", "reason"])));
        assert_eq!(required("archmax_reset"), Some(json!(["reason"])));
        assert_eq!(required("archmax_wait"), Some(json!(["reason"])));
        assert_eq!(required("archmax_raise"), Some(json!(["code", "reason"])));
        assert_eq!(required("archmax_get_variables"), Some(json!([])));
        assert_eq!(required("archmax_set_variables"), Some(json!(["variables"])));
        assert_eq!(required("archmax_get_history"), Some(json!([])));
        assert_eq!(required("archmax_eval"), Some(json!(["code"])));
        assert_eq!(required("archmax_run"), Some(json!(["file_path"])));
        let run = schema("archmax_run").unwrap();
        assert_eq!(run.parameters["additionalProperties"], true, "extra arguments reach the script");
    }
}
