//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of every route.
//!
//! The one thing to know: [`ROUTES`] is the list the document is built from, and the
//! integration tests call every entry on a live server, so a route added to the router
//! without a line here (or the reverse) fails a test.

use serde_json::{Map, Value, json};

/// One documented operation.
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    /// The scope a token needs; `None` for open routes.
    pub scope: Option<&'static str>,
    /// The request body's schema name, for POSTs.
    pub body: Option<&'static str>,
    /// Whether the route takes `?wait=`.
    pub waits: bool,
    /// The success status and its schema name.
    pub ok: (&'static str, &'static str),
}

/// Every route the server answers.
pub const ROUTES: &[Operation] = &[
    Operation {
        method: "get",
        path: "/healthz",
        summary: "Liveness: the process answers.",
        scope: None,
        body: None,
        waits: false,
        ok: ("200", "Health"),
    },
    Operation {
        method: "get",
        path: "/readyz",
        summary: "Readiness: programs loaded, store reachable.",
        scope: None,
        body: None,
        waits: false,
        ok: ("200", "Ready"),
    },
    Operation {
        method: "get",
        path: "/metrics",
        summary: "Prometheus text metrics.",
        scope: Some("read"),
        body: None,
        waits: false,
        ok: ("200", "Metrics"),
    },
    Operation {
        method: "get",
        path: "/v1/openapi.json",
        summary: "This document.",
        scope: None,
        body: None,
        waits: false,
        ok: ("200", "OpenApi"),
    },
    Operation {
        method: "post",
        path: "/v1/workflows/{slug}/sessions",
        summary: "Start a session of a workflow.",
        scope: Some("start"),
        body: Some("StartRequest"),
        waits: true,
        ok: ("202", "Accepted"),
    },
    Operation {
        method: "get",
        path: "/v1/sessions",
        summary: "List sessions (filters, cursor paging).",
        scope: Some("read"),
        body: None,
        waits: false,
        ok: ("200", "SessionPage"),
    },
    Operation {
        method: "get",
        path: "/v1/sessions/{id}",
        summary: "One session, with its park record.",
        scope: Some("read"),
        body: None,
        waits: false,
        ok: ("200", "Session"),
    },
    Operation {
        method: "post",
        path: "/v1/sessions/{id}/messages",
        summary: "Continue a session, or write to one parked at a decision (a reply-only turn).",
        scope: Some("start"),
        body: Some("MessageRequest"),
        waits: true,
        ok: ("202", "Accepted"),
    },
    Operation {
        method: "post",
        path: "/v1/sessions/{id}/decide",
        summary: "Decide a session parked at a human state; the caller's identity is recorded and held against `approvers`.",
        scope: Some("decide"),
        body: Some("DecideRequest"),
        waits: true,
        ok: ("202", "Accepted"),
    },
    Operation {
        method: "post",
        path: "/v1/sessions/{id}/deliver",
        summary: "Deliver a trigger the workflow declares (its requires checked) to a session waiting for input.",
        scope: Some("start"),
        body: Some("DeliverRequest"),
        waits: true,
        ok: ("202", "Accepted"),
    },
    Operation {
        method: "get",
        path: "/v1/sessions/{id}/transcript",
        summary: "A session's messages.",
        scope: Some("read"),
        body: None,
        waits: false,
        ok: ("200", "Transcript"),
    },
    Operation {
        method: "get",
        path: "/v1/sessions/{id}/events",
        summary: "Server-Sent Events of a session, live; resumable with Last-Event-ID.",
        scope: Some("read"),
        body: None,
        waits: false,
        ok: ("200", "EventStream"),
    },
    Operation {
        method: "post",
        path: "/v1/triggers/{trigger}",
        summary: "Fire a host trigger (a webhook): the body is its input. A trigger with a connection is authenticated by its HMAC-SHA256 signature header instead of a token; any other takes a token with start. Its session: path joins an existing session or starts one. The answer names the session and its status only.",
        scope: Some("start"),
        body: Some("TriggerInput"),
        waits: true,
        ok: ("202", "Accepted"),
    },
    Operation {
        method: "post",
        path: "/v1/admin/artifacts",
        summary: "Load an artifact (.amx bytes, verified like --artifact) without downtime: new sessions start on it, running ones keep their program.",
        scope: Some("admin"),
        body: Some("Artifact"),
        waits: false,
        ok: ("200", "Loaded"),
    },
];

/// The path parameters routes use.
const PATH_PARAMETERS: [&str; 3] = ["slug", "id", "trigger"];

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn error_response(description: &str) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": reference("Error") } } })
}

fn parameters(operation: &Operation) -> Vec<Value> {
    let mut out = Vec::new();
    for name in PATH_PARAMETERS {
        if operation.path.contains(&format!("{{{name}}}")) {
            out.push(json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }));
        }
    }
    if operation.waits {
        out.push(json!({ "name": "wait", "in": "query", "required": false, "description": "Seconds to wait for the turn's outcome (at most 300).", "schema": { "type": "number", "minimum": 0 } }));
    }
    if operation.path == "/v1/sessions" {
        for (name, kind, description) in [
            ("workflow", "string", "Only this workflow's sessions."),
            (
                "status",
                "string",
                "Only sessions with this status: running, completed, failed, rejected, awaiting_decision or awaiting_input (another value is refused).",
            ),
            ("parked", "boolean", "Only parked (or only unparked) sessions."),
            ("due", "boolean", "Only sessions waiting for input whose resumeAt has come (compared as instants)."),
            ("cursor", "string", "The nextCursor of the previous page."),
            ("limit", "integer", "Sessions per page (1 to 500, default 50)."),
        ] {
            out.push(json!({ "name": name, "in": "query", "required": false, "description": description, "schema": { "type": kind } }));
        }
    }
    if operation.path == "/v1/triggers/{trigger}" {
        out.push(json!({ "name": "workflow", "in": "query", "required": false, "description": "The workflow, when several served workflows declare the trigger.", "schema": { "type": "string" } }));
    }
    if operation.path.ends_with("/events") {
        out.push(json!({ "name": "Last-Event-ID", "in": "header", "required": false, "description": "Resume after this event id.", "schema": { "type": "integer", "minimum": 0 } }));
    }
    out
}

fn responses_of(object: &mut Value) -> &mut Map<String, Value> {
    match object["responses"].as_object_mut() {
        Some(responses) => responses,
        None => unreachable!("every operation object has responses"),
    }
}

fn operation_object(operation: &Operation) -> Value {
    let mut responses = Map::new();
    let content = match operation.ok.1 {
        "Metrics" => json!({ "text/plain": { "schema": { "type": "string" } } }),
        "EventStream" => json!({ "text/event-stream": { "schema": { "type": "string" } } }),
        name => json!({ "application/json": { "schema": reference(name) } }),
    };
    responses.insert(operation.ok.0.to_string(), json!({ "description": "Success.", "content": content }));
    if operation.waits {
        responses.insert("200".to_string(), json!({ "description": "The turn ended within the wait: the session as it stands, with the turn.", "content": { "application/json": { "schema": reference("Session") } } }));
        responses.insert(
            "409".to_string(),
            error_response("The session is busy, or not in a state that accepts the request."),
        );
        responses.insert("413".to_string(), error_response("The body is too large."));
        responses.insert("429".to_string(), error_response("Saturated: too many turns are queued (Retry-After)."));
        responses.insert("503".to_string(), error_response("Shutting down (Retry-After)."));
    }
    if operation.scope.is_some() {
        responses.insert("401".to_string(), error_response("No valid bearer token."));
        responses.insert(
            "403".to_string(),
            error_response(
                "The token lacks the scope, or the request is refused (such as a decider who is not an approver).",
            ),
        );
    }
    if operation.path.contains('{') {
        responses.insert("404".to_string(), error_response("No such workflow or session."));
    }
    if operation.body.is_some() || operation.path == "/v1/sessions" {
        responses.insert("400".to_string(), error_response("Invalid input: every offending field in details.fields."));
    }
    let mut object = json!({
        "operationId": format!("{}{}", operation.method, operation.path.replace(['/', '{', '}', '.'], "_")),
        "summary": operation.summary,
        "parameters": parameters(operation),
        "responses": responses,
    });
    if operation.path == "/v1/triggers/{trigger}" {
        responses_of(&mut object).insert(
            "503".to_string(),
            error_response("The trigger's connection is not configured, or the server is shutting down."),
        );
    }
    if let Some(body) = operation.body {
        let media = if body == "Artifact" { "application/octet-stream" } else { "application/json" };
        object["requestBody"] = json!({ "required": true, "content": { media: { "schema": reference(body) } } });
    }
    object["security"] = match operation.scope {
        Some(scope) => json!([{ "bearer": [scope] }]),
        None => json!([]),
    };
    object
}

fn schemas() -> Value {
    let variables =
        json!({ "type": "object", "description": "Variable values, seeded locked.", "additionalProperties": true });
    json!({
        "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "object", "required": ["code", "message", "details"], "properties": {
            "code": { "type": "string" }, "message": { "type": "string" },
            "details": { "type": "object", "properties": { "fields": { "type": "array", "items": { "type": "object", "properties": { "field": { "type": "string" }, "problem": { "type": "string" } } } } } } } } } },
        "StartRequest": { "type": "object", "required": ["message"], "additionalProperties": false, "properties": {
            "message": { "type": "string" }, "trigger": { "type": "string" }, "variables": variables, "sessionId": { "type": "string" } } },
        "MessageRequest": { "type": "object", "required": ["message"], "additionalProperties": false, "properties": { "message": { "type": "string" } } },
        "DecideRequest": { "type": "object", "required": ["to"], "additionalProperties": false, "properties": { "to": { "type": "string" }, "comment": { "type": "string" } } },
        "DeliverRequest": { "type": "object", "required": ["trigger"], "additionalProperties": false, "properties": {
            "trigger": { "type": "string" }, "variables": variables, "message": { "type": "string" },
            "undeclared": { "type": "boolean", "description": "Deliver a trigger id the workflow does not declare." } } },
        "Accepted": { "type": "object", "required": ["sessionId", "status"], "properties": { "sessionId": { "type": "string" }, "status": { "type": "string" } } },
        "Session": { "type": "object", "required": ["sessionId", "workflow", "status"], "properties": {
            "sessionId": { "type": "string" }, "workflow": { "type": "string" }, "status": { "type": "string" },
            "workflowState": { "type": ["string", "null"] }, "variables": { "type": "object" }, "trail": { "type": "array", "items": { "type": "object" } },
            "exit": {}, "usage": { "type": "object" }, "specHash": { "type": "string" }, "park": { "type": "object" },
            "turn": { "type": "object", "description": "Present when a turn request waited for the outcome." } } },
        "SessionPage": { "type": "object", "required": ["sessions"], "properties": { "sessions": { "type": "array", "items": reference("Session") }, "nextCursor": { "type": ["string", "null"] },
            "unreadable": { "type": "array", "items": { "type": "string" }, "description": "Sessions that no longer load, skipped." } } },
        "Transcript": { "type": "object", "properties": { "sessionId": { "type": "string" }, "messages": { "type": "array", "items": { "type": "object" } } } },
        "Health": { "type": "object", "properties": { "ok": { "type": "boolean" } } },
        "Ready": { "type": "object", "properties": { "ready": { "type": "boolean" }, "workflows": { "type": "array", "items": { "type": "string" } } } },
        "OpenApi": { "type": "object" },
        "TriggerInput": { "type": "object", "description": "The trigger's input: its members become the session's locked variables, held against the trigger's requires.", "additionalProperties": true },
        "Artifact": { "type": "string", "format": "binary", "description": "An artifact built by archmax build (signed when the server trusts keys)." },
        "Loaded": { "type": "object", "properties": {
            "loaded": { "type": "array", "description": "The workflows whose program changed.", "items": { "type": "object", "properties": { "workflow": { "type": "string" }, "specHash": { "type": "string" }, "previous": { "type": ["string", "null"] } } } },
            "workflows": { "type": "array", "items": { "type": "string" } } } },
    })
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for operation in ROUTES {
        let entry = paths.entry(operation.path.to_string()).or_insert_with(|| json!({}));
        entry[operation.method] = operation_object(operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "archmax serve", "version": env!("CARGO_PKG_VERSION"), "description": "The production runner for compiled archmax artifacts." },
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer", "description": "A token from ARCHMAX_SERVE_TOKEN or the --tokens file; scopes start, decide, read, admin." } },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in `value`.
    fn references(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(object) => {
                if let Some(Value::String(target)) = object.get("$ref") {
                    out.push(target.clone());
                }
                object.values().for_each(|inner| references(inner, out));
            }
            Value::Array(items) => items.iter().for_each(|inner| references(inner, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_is_openapi_3_1_with_every_reference_resolved_and_every_operation_answered() {
        let document = document();
        assert_eq!(document["openapi"], "3.1.0");
        let mut refs = Vec::new();
        references(&document, &mut refs);
        assert!(!refs.is_empty());
        for target in refs {
            let name = target.strip_prefix("#/components/schemas/").expect("a schema reference");
            assert!(document["components"]["schemas"].get(name).is_some(), "{target} resolves");
        }
        let mut ids = std::collections::HashSet::new();
        for operation in ROUTES {
            let object = &document["paths"][operation.path][operation.method];
            assert!(
                object["responses"].as_object().is_some_and(|responses| !responses.is_empty()),
                "{}",
                operation.path
            );
            assert!(ids.insert(object["operationId"].as_str().expect("an id").to_string()), "operation ids are unique");
            for name in PATH_PARAMETERS {
                if operation.path.contains(&format!("{{{name}}}")) {
                    let declared = object["parameters"].as_array().is_some_and(|parameters| {
                        parameters.iter().any(|parameter| parameter["name"] == name && parameter["in"] == "path")
                    });
                    assert!(declared, "{} declares its path parameter {name}", operation.path);
                }
            }
        }
    }
}
