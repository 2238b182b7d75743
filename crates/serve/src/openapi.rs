//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of the API, derived with `utoipa`.
//!
//! The one thing to know: nothing here lists routes or fields by hand. Each handler in
//! [`crate::routes`] carries a `#[utoipa::path]` naming its method, path, parameters,
//! body and every status it can answer; the shapes are the types of [`crate::wire`],
//! where each enforced constraint (length, pattern, enum, range) sits beside its field.
//! [`ApiDoc`] gathers them; [`document`] adds what a derive cannot: the bearer scheme and
//! the events JSON Schema (`schemas/events.schema.json`) that types the event stream's
//! data. The inbox's HTML pages are not part of the API and are not documented here.
//!
//! The integration tests call every documented operation on a live server, and
//! Schemathesis (`interop/schemathesis/run.sh`) drives the whole document against one.

use serde_json::{Map, Value, json};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use crate::routes;
use crate::wire;

/// The events JSON Schema, as the repository ships it.
const EVENTS_SCHEMA: &str = include_str!("../../../schemas/events.schema.json");

/// The component the event stream's data refers to; the schema's `$defs` become
/// components named `Event.<kind>`.
pub const EVENT_COMPONENT: &str = "Event";

/// The document's paths, components and top matter, from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "archmax serve",
        description = "The production runner for compiled archmax artifacts. Every error answer is `{\"error\": {\"code\", \"message\", \"details\"}}`; a 400 lists each offending field in `details.fields`."
    ),
    paths(
        routes::healthz,
        routes::readyz,
        routes::metrics,
        routes::openapi,
        routes::workflows,
        routes::start,
        routes::list,
        routes::show,
        routes::message,
        routes::decide,
        routes::deliver,
        routes::transcript,
        routes::events,
        routes::fire,
        routes::load_artifact,
        routes::notifications,
    ),
    components(schemas(
        wire::StartRequest,
        wire::MessageRequest,
        wire::DecideRequest,
        wire::DeliverRequest,
        wire::StartUpload,
        crate::catalog::WorkflowList,
        crate::catalog::WorkflowEntry,
        crate::catalog::TriggerEntry,
        crate::catalog::HumanStateEntry,
        crate::catalog::TransitionEntry,
        wire::DeliverUpload,
        wire::TriggerInput,
        wire::ErrorBody,
        wire::Accepted,
        wire::Session,
        wire::Fired,
        wire::SessionPage,
        wire::Transcript,
        wire::Health,
        wire::Ready,
        wire::Loaded,
        wire::Notifications,
    ))
)]
pub struct ApiDoc;

/// The events JSON Schema as document components: the root as [`EVENT_COMPONENT`], each
/// `$defs` entry as `Event.<name>`, with every internal reference rewritten to match. Its
/// `$schema` and `$id` are dropped: inside the document, an `$id` would move the base
/// every reference resolves against.
fn event_components() -> Map<String, Value> {
    fn rewrite(value: &mut Value) {
        match value {
            Value::Object(object) => {
                if let Some(Value::String(target)) = object.get_mut("$ref")
                    && let Some(name) = target.strip_prefix("#/$defs/")
                {
                    *target = format!("#/components/schemas/{EVENT_COMPONENT}.{name}");
                }
                object.values_mut().for_each(rewrite);
            }
            Value::Array(items) => items.iter_mut().for_each(rewrite),
            _ => {}
        }
    }
    let mut components = Map::new();
    // The file is part of this repository and its tests parse it; a broken file leaves
    // the stream's data untyped rather than taking the document down.
    let Ok(Value::Object(mut root)) = serde_json::from_str::<Value>(EVENTS_SCHEMA) else {
        tracing::error!("schemas/events.schema.json does not parse; the event stream is documented untyped");
        components.insert(EVENT_COMPONENT.to_string(), json!({ "type": "object" }));
        return components;
    };
    root.remove("$schema");
    root.remove("$id");
    if let Some(Value::Object(definitions)) = root.remove("$defs") {
        for (name, mut schema) in definitions {
            rewrite(&mut schema);
            components.insert(format!("{EVENT_COMPONENT}.{name}"), schema);
        }
    }
    let mut root = Value::Object(root);
    rewrite(&mut root);
    components.insert(EVENT_COMPONENT.to_string(), root);
    components
}

/// One frame of the event stream, as a client's SSE parser hands it over: `event`, `id`
/// and `data`, whose JSON is one event of the events schema.
fn event_frame() -> Value {
    json!({
        "type": "object",
        "description": "One Server-Sent Events frame; `data` holds one event as JSON.",
        "required": ["event", "id", "data"],
        "properties": {
            "event": { "const": "archmax" },
            "id": { "type": "string", "pattern": "^[0-9]+$", "description": "Send back as Last-Event-ID to resume after it." },
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": { "$ref": format!("#/components/schemas/{EVENT_COMPONENT}") },
            },
        },
    })
}

/// The operations a session's id leads to, by operation id, and the links a session's
/// answer gives to them (the id from the answer's `sessionId`).
const SESSION_OPERATIONS: [&str; 6] = ["show", "message", "decide", "deliver", "transcript", "events"];

/// Links from every answer naming a session to the operations on it: a client (and
/// Schemathesis's stateful phase) follows them with the answer's `sessionId`.
fn add_session_links(document: &mut Value) {
    let links: Map<String, Value> = SESSION_OPERATIONS
        .iter()
        .map(|operation| {
            let link = json!({ "operationId": operation, "parameters": { "id": "$response.body#/sessionId" } });
            (operation.to_string(), link)
        })
        .collect();
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for item in paths.values_mut() {
        for operation in item.as_object_mut().into_iter().flat_map(|item| item.values_mut()) {
            let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) else { continue };
            for (status, response) in responses.iter_mut() {
                let names_a_session =
                    response.pointer("/content/application~1json/schema/$ref").and_then(Value::as_str).is_some_and(
                        |target| ["/Accepted", "/Session", "/Fired"].iter().any(|name| target.ends_with(name)),
                    );
                if status.starts_with('2') && names_a_session {
                    response["links"] = Value::Object(links.clone());
                }
            }
        }
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut api = ApiDoc::openapi();
    api.info.version = env!("CARGO_PKG_VERSION").to_string();
    let bearer = HttpBuilder::new()
        .scheme(HttpAuthScheme::Bearer)
        .description(Some("A token from ARCHMAX_SERVE_TOKEN or the --tokens file; scopes start, decide, read, admin."))
        .build();
    if let Some(components) = api.components.as_mut() {
        components.add_security_scheme("bearer", SecurityScheme::Http(bearer));
    }
    let mut document = match serde_json::to_value(&api) {
        Ok(document) => document,
        Err(error) => {
            tracing::error!("the OpenAPI document does not serialize: {error}");
            return json!({ "openapi": "3.1.0", "info": { "title": "archmax serve", "version": env!("CARGO_PKG_VERSION") }, "paths": {} });
        }
    };
    if let Some(schemas) = document.pointer_mut("/components/schemas").and_then(Value::as_object_mut) {
        schemas.extend(event_components());
        schemas.insert("EventFrame".to_string(), event_frame());
    }
    add_session_links(&mut document);
    document
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

    /// Every operation of the document: (method, path, object).
    fn operations(document: &Value) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                out.push((method.clone(), path.clone(), operation.clone()));
            }
        }
        out
    }

    fn statuses(operation: &Value) -> Vec<String> {
        operation["responses"].as_object().map(|responses| responses.keys().cloned().collect()).unwrap_or_default()
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
        let operations = operations(&document);
        assert_eq!(operations.len(), 16, "every API route is documented once");
        for (method, path, object) in &operations {
            assert!(!statuses(object).is_empty(), "{method} {path} answers");
            assert!(ids.insert(object["operationId"].as_str().expect("an id").to_string()), "operation ids are unique");
            for segment in path.split('/').filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}')) {
                let declared = object["parameters"].as_array().is_some_and(|parameters| {
                    parameters.iter().any(|parameter| parameter["name"] == segment && parameter["in"] == "path")
                });
                assert!(declared, "{path} declares its path parameter {segment}");
            }
        }
        assert!(
            !operations
                .iter()
                .any(|(_, path, _)| !path.starts_with("/v1/") && !path.ends_with('z') && path != "/metrics"),
            "the inbox's pages are not part of the API"
        );
    }

    #[test]
    fn every_status_the_server_sends_is_documented_on_the_routes_that_send_it() {
        let document = document();
        let operation = |method: &str, path: &str| document["paths"][path][method].clone();
        let turn_statuses = ["200", "202", "400", "401", "403", "404", "408", "409", "413", "415", "429", "500", "503"];
        for path in [
            "/v1/workflows/{slug}/sessions",
            "/v1/sessions/{id}/messages",
            "/v1/sessions/{id}/decide",
            "/v1/sessions/{id}/deliver",
            "/v1/triggers/{trigger}",
        ] {
            let documented = statuses(&operation("post", path));
            for status in turn_statuses {
                assert!(documented.iter().any(|have| have == status), "POST {path} documents {status}");
            }
        }
        for (method, path) in
            [("get", "/v1/sessions/{id}"), ("get", "/v1/sessions/{id}/transcript"), ("get", "/v1/sessions/{id}/events")]
        {
            let documented = statuses(&operation(method, path));
            for status in ["200", "400", "401", "403", "404", "500"] {
                assert!(documented.iter().any(|have| have == status), "{method} {path} documents {status}");
            }
        }
        let list = statuses(&operation("get", "/v1/sessions"));
        assert!(["200", "400", "401", "403", "500"].iter().all(|status| list.iter().any(|have| have == status)));
        let artifacts = statuses(&operation("post", "/v1/admin/artifacts"));
        assert!(
            ["200", "400", "401", "403", "408", "409", "413", "500"]
                .iter()
                .all(|status| artifacts.iter().any(|have| have == status))
        );
        assert!(statuses(&operation("get", "/readyz")).iter().any(|status| status == "503"));
        let error =
            document["paths"]["/v1/sessions/{id}"]["get"]["responses"]["404"]["content"]["application/json"]["schema"]
                ["$ref"]
                .clone();
        assert_eq!(error, "#/components/schemas/Error");
    }

    #[test]
    fn the_limits_the_server_enforces_are_stated() {
        let document = document();
        let parameter = |path: &str, method: &str, name: &str| {
            document["paths"][path][method]["parameters"]
                .as_array()
                .and_then(|parameters| parameters.iter().find(|parameter| parameter["name"] == name).cloned())
                .unwrap_or(Value::Null)
        };
        let limit = parameter("/v1/sessions", "get", "limit");
        assert_eq!((limit["schema"]["minimum"].as_u64(), limit["schema"]["maximum"].as_u64()), (Some(1), Some(500)));
        let status = parameter("/v1/sessions", "get", "status");
        assert_eq!(status["schema"]["enum"].as_array().map(Vec::len), Some(6), "{status}");
        let id = parameter("/v1/sessions/{id}", "get", "id");
        assert_eq!(id["schema"]["pattern"], wire::SESSION_ID_PATTERN);
        assert_eq!(id["schema"]["maxLength"], 200);
        let schemas = &document["components"]["schemas"];
        assert_eq!(schemas["StartRequest"]["properties"]["message"]["pattern"], wire::NOT_BLANK_PATTERN);
        assert_eq!(schemas["StartRequest"]["properties"]["sessionId"]["pattern"], wire::NEW_SESSION_ID_PATTERN);
        assert_eq!(schemas["MessageRequest"]["properties"]["message"]["pattern"], wire::NOT_BLANK_PATTERN);
        assert_eq!(schemas["DeliverRequest"]["properties"]["trigger"]["pattern"], wire::NOT_BLANK_PATTERN);
        assert_eq!(
            schemas["StartRequest"]["properties"]["variables"]["propertyNames"]["pattern"],
            wire::VARIABLE_NAME_PATTERN
        );
        for body in ["StartRequest", "MessageRequest", "DecideRequest", "DeliverRequest"] {
            assert_eq!(schemas[body]["additionalProperties"], false, "{body} refuses unknown members");
        }
        assert_eq!(parameter("/v1/sessions/{id}/messages", "post", "wait")["schema"]["minimum"].as_u64(), Some(0));
    }

    #[test]
    fn the_event_stream_is_typed_by_the_events_schema() {
        let document = document();
        let stream = &document["paths"]["/v1/sessions/{id}/events"]["get"]["responses"]["200"]["content"];
        assert_eq!(stream["text/event-stream"]["schema"]["$ref"], "#/components/schemas/EventFrame");
        let frame = &document["components"]["schemas"]["EventFrame"];
        assert_eq!(
            frame["properties"]["data"]["contentSchema"]["$ref"],
            format!("#/components/schemas/{EVENT_COMPONENT}")
        );
        let event = &document["components"]["schemas"][EVENT_COMPONENT];
        assert!(event["required"].as_array().is_some_and(|required| required.iter().any(|name| name == "event")));
        assert!(event.get("$id").is_none(), "no base change inside the document");
        assert!(
            document["components"]["schemas"].as_object().is_some_and(|schemas| schemas.contains_key("Event.advance"))
        );
    }
}
