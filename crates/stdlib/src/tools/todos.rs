//! `write_todos`: the agent's working plan. The runtime keeps the list; the tool checks
//! its shape and echoes it back so the model sees what was recorded. A plan is bounded
//! ([`MAX_TODOS`] items of at most [`MAX_TODO_CHARS`] characters), since the runtime keeps
//! it in the session's state.

use serde_json::{Value, json};

use super::arguments::Arguments;
use super::{ToolError, ToolSchema};
use crate::limits::{MAX_TODO_CHARS, MAX_TODOS};

/// Where one todo stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

impl TodoStatus {
    pub fn parse(text: &str) -> Option<TodoStatus> {
        match text {
            "pending" => Some(TodoStatus::Pending),
            "in_progress" => Some(TodoStatus::InProgress),
            "completed" => Some(TodoStatus::Completed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
        }
    }
}

/// One item of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
}

/// The todos of a `write_todos` call, checked: every item an object with a non-empty
/// `content` and a known `status`, nothing else.
pub fn parse_todos(args: &Value) -> Result<Vec<Todo>, ToolError> {
    let args = Arguments::parse("write_todos", args, &["todos"])?;
    let Value::Array(items) = args.required("todos")? else {
        return Err(ToolError("the argument `todos` must be an array of { content, status } objects".to_string()));
    };
    if items.len() > MAX_TODOS {
        return Err(ToolError(format!(
            "the list has {} items, over write_todos's limit of {MAX_TODOS}; merge steps into fewer items",
            items.len()
        )));
    }
    items.iter().enumerate().map(|(index, item)| parse_todo(index, item)).collect()
}

fn parse_todo(index: usize, item: &Value) -> Result<Todo, ToolError> {
    let Value::Object(fields) = item else {
        return Err(ToolError(format!("`todos[{index}]` must be an object with `content` and `status`")));
    };
    if let Some(unknown) = fields.keys().find(|name| !matches!(name.as_str(), "content" | "status")) {
        return Err(ToolError(format!(
            "`todos[{index}]` has an unknown field `{unknown}`; a todo has only `content` and `status`"
        )));
    }
    let content = match fields.get("content") {
        Some(Value::String(text)) if text.chars().count() > MAX_TODO_CHARS => {
            return Err(ToolError(format!(
                "`todos[{index}].content` has {} characters, over write_todos's limit of {MAX_TODO_CHARS}; \
                 say what the step is in a few words",
                text.chars().count()
            )));
        }
        Some(Value::String(text)) if !text.trim().is_empty() => text.trim().to_string(),
        Some(Value::String(_)) => return Err(ToolError(format!("`todos[{index}].content` is empty"))),
        Some(_) => return Err(ToolError(format!("`todos[{index}].content` must be a string"))),
        None => return Err(ToolError(format!("`todos[{index}].content` is required"))),
    };
    let status = match fields.get("status") {
        Some(Value::String(text)) => TodoStatus::parse(text).ok_or_else(|| {
            ToolError(format!("`todos[{index}].status` is '{text}'; use pending, in_progress or completed"))
        })?,
        Some(_) => return Err(ToolError(format!("`todos[{index}].status` must be a string"))),
        None => return Err(ToolError(format!("`todos[{index}].status` is required"))),
    };
    Ok(Todo { content, status })
}

pub(crate) fn write_todos(args: &Value) -> Result<String, ToolError> {
    let todos = parse_todos(args)?;
    if todos.is_empty() {
        return Ok("The todo list is now empty.".to_string());
    }
    let noun = if todos.len() == 1 { "item" } else { "items" };
    let mut answer = format!("Recorded the todo list ({} {noun}):", todos.len());
    for todo in &todos {
        answer.push_str(&format!("\n- [{}] {}", todo.status.as_str(), todo.content));
    }
    Ok(answer)
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    (tool == "write_todos").then(|| {
        ToolSchema::closed(
            "write_todos",
            "Record your plan for work with several steps as a todo list, and keep it current: send the whole \
             list each time, with every item's status. Mark an item in_progress when you start it and completed \
             as soon as it is done; keep at most one in_progress. Skip the list for work of one or two steps.",
            json!({
                "todos": {
                    "type": "array",
                    "description": "The complete list, in order. An empty array clears it.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {
                                "type": "string",
                                "minLength": 1,
                                "description": "What the step is, in a few words."
                            },
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                                "description": "Where the step stands."
                            }
                        },
                        "required": ["content", "status"],
                        "additionalProperties": false
                    }
                }
            }),
            &["todos"],
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_list_is_echoed_with_statuses() {
        let answer = write_todos(&json!({ "todos": [
            { "content": "Read the order", "status": "completed" },
            { "content": "Draft the reply", "status": "in_progress" },
            { "content": "Send it", "status": "pending" }
        ] }))
        .unwrap();
        assert_eq!(
            answer,
            "Recorded the todo list (3 items):\n- [completed] Read the order\n- [in_progress] Draft the reply\n\
             - [pending] Send it"
        );
        assert_eq!(write_todos(&json!({ "todos": [] })).unwrap(), "The todo list is now empty.");
    }

    #[test]
    fn malformed_todos_are_named() {
        let refused = |args: Value| write_todos(&args).unwrap_err().0;
        assert_eq!(refused(json!({})), "the argument `todos` is required");
        assert!(refused(json!({ "todos": "x" })).contains("must be an array"));
        assert!(refused(json!({ "todos": [3] })).contains("`todos[0]` must be an object"));
        assert!(refused(json!({ "todos": [{ "status": "pending" }] })).contains("`todos[0].content` is required"));
        assert!(refused(json!({ "todos": [{ "content": " ", "status": "pending" }] })).contains("is empty"));
        assert!(refused(json!({ "todos": [{ "content": 1, "status": "pending" }] })).contains("must be a string"));
        let status = refused(json!({ "todos": [{ "content": "a", "status": "done" }] }));
        assert!(status.contains("`todos[0].status` is 'done'"), "{status}");
        assert!(refused(json!({ "todos": [{ "content": "a" }] })).contains("`todos[0].status` is required"));
        assert!(refused(json!({ "todos": [{ "content": "a", "status": "pending", "id": 1 }] })).contains("`id`"));
    }

    #[test]
    fn a_plan_is_bounded_in_items_and_characters() {
        let item = |content: String| json!({ "content": content, "status": "pending" });
        let full: Vec<Value> = (0..MAX_TODOS).map(|step| item(format!("step {step}"))).collect();
        assert!(write_todos(&json!({ "todos": full })).is_ok());
        let over: Vec<Value> = (0..=MAX_TODOS).map(|step| item(format!("step {step}"))).collect();
        assert_eq!(
            write_todos(&json!({ "todos": over })).unwrap_err().0,
            "the list has 101 items, over write_todos's limit of 100; merge steps into fewer items"
        );
        assert!(write_todos(&json!({ "todos": [item("é".repeat(MAX_TODO_CHARS))] })).is_ok());
        assert_eq!(
            write_todos(&json!({ "todos": [item("é".repeat(MAX_TODO_CHARS + 1))] })).unwrap_err().0,
            "`todos[0].content` has 1001 characters, over write_todos's limit of 1000; say what the step is in \
             a few words"
        );
    }

    #[test]
    fn parsed_todos_are_typed() {
        let todos = parse_todos(&json!({ "todos": [{ "content": "a", "status": "in_progress" }] })).unwrap();
        assert_eq!(todos, vec![Todo { content: "a".to_string(), status: TodoStatus::InProgress }]);
    }
}
