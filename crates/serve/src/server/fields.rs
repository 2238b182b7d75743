//! The fields of a turn route's JSON body, read by hand so every problem is collected
//! and named (`400 input.invalid` with one entry per field), the session ids callers
//! name, and who a body that raises a session's budget was authorized for.

use serde_json::{Map, Value};

use archmax_vm::FieldProblem;
use archmax_vm::session::id::check_session_id;

use crate::auth::Caller;
use crate::error::ApiError;

/// A session id from a path, checked before it reaches the store.
pub(super) fn session_path(id: &str) -> Result<String, ApiError> {
    checked_session_id(id, "session")
}

/// A session id a caller supplied as `field`, checked before it reaches the store: one
/// that is not an id (a path such as `/abs` among them) is a 400 naming the field and
/// the id pattern.
pub(super) fn checked_session_id(id: &str, field: &str) -> Result<String, ApiError> {
    check_session_id(id, &[])
        .map_err(|problem| ApiError::invalid_fields("fields", &[FieldProblem { field: field.to_string(), problem }]))?;
    Ok(id.to_string())
}

/// Who raises a session's budget when a body asks to (`raiseBudget: true`): the caller
/// the route authorized for it, named when authenticated. A raise no one was authorized
/// for is refused (403).
pub(super) fn raised_by(raise: bool, raiser: Option<&Caller>) -> Result<Option<String>, ApiError> {
    match (raise, raiser) {
        (false, _) => Ok(None),
        (true, Some(caller)) => Ok(caller.authenticated.then(|| caller.identity.clone())),
        (true, None) => Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "auth.forbidden",
            "raising a session's budget needs a token with the `decide` scope",
        )),
    }
}

/// The fields of a JSON object body, with every problem collected.
pub(super) struct Fields<'a> {
    object: Option<&'a Map<String, Value>>,
    problems: Vec<FieldProblem>,
}

impl<'a> Fields<'a> {
    pub(super) fn of(body: &'a Value, allowed: &[&str]) -> Fields<'a> {
        let Some(object) = body.as_object() else {
            let problem =
                FieldProblem { field: "body".to_string(), problem: "the body must be a JSON object".to_string() };
            return Fields { object: None, problems: vec![problem] };
        };
        let problems = object
            .keys()
            .filter(|key| !allowed.contains(&key.as_str()))
            .map(|key| FieldProblem {
                field: key.clone(),
                problem: format!("unknown field; this request takes {}", allowed.join(", ")),
            })
            .collect();
        Fields { object: Some(object), problems }
    }

    fn problem(&mut self, field: &str, problem: &str) {
        self.problems.push(FieldProblem { field: field.to_string(), problem: problem.to_string() });
    }

    pub(super) fn text(&mut self, field: &str, required: bool) -> Option<String> {
        match self.object.and_then(|object| object.get(field)) {
            Some(Value::String(text)) => Some(text.clone()),
            None | Some(Value::Null) => {
                if required && self.object.is_some() {
                    self.problem(field, "required: a string");
                }
                None
            }
            Some(_) => {
                self.problem(field, "must be a string");
                None
            }
        }
    }

    pub(super) fn flag(&mut self, field: &str) -> bool {
        match self.object.and_then(|object| object.get(field)) {
            Some(Value::Bool(flag)) => *flag,
            None | Some(Value::Null) => false,
            Some(_) => {
                self.problem(field, "must be true or false");
                false
            }
        }
    }

    pub(super) fn variables(&mut self) -> Map<String, Value> {
        match self.object.and_then(|object| object.get("variables")) {
            Some(Value::Object(variables)) => variables.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => {
                self.problem("variables", "must be an object of variable values");
                Map::new()
            }
        }
    }

    pub(super) fn finish(self) -> Result<(), ApiError> {
        match self.problems.as_slice() {
            [] => Ok(()),
            problems => Err(ApiError::invalid_fields("fields of the request", problems)),
        }
    }
}
