//! `/v1/openapi.json` against the server that serves it: every answer the server gives a
//! route is documented on that route, the limits it enforces are stated, and the event
//! stream's frames are typed by the events JSON Schema. Only the served JSON is read, so
//! these tests hold whatever builds the document.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ADMIN, READER, Running, STARTER, token_server};

impl Running {
    pub(super) async fn document(&self) -> Value {
        let (status, document) = self.get("/v1/openapi.json", None).await;
        assert_eq!(status, StatusCode::OK);
        document
    }

    /// Sends `method path` with a raw body, content type and token; the answer's status.
    async fn raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        content_type: &str,
        body: Vec<u8>,
    ) -> StatusCode {
        let url = format!("{}{path}", self.base);
        let mut request = match method {
            "get" => self.client.get(url),
            _ => self.client.post(url).header("content-type", content_type).body(body),
        };
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        tokio::time::timeout(Duration::from_secs(60), request.send())
            .await
            .expect("the server answers in time")
            .expect("the server answers")
            .status()
    }
}

/// One request and the status it draws: (method, path sent, documented path, token,
/// content type, body, the status expected).
type Probe = (&'static str, &'static str, &'static str, Option<&'static str>, &'static str, Vec<u8>, StatusCode);

/// The statuses `method template` documents.
fn documented(document: &Value, method: &str, template: &str) -> Vec<String> {
    document["paths"][template][method]["responses"]
        .as_object()
        .map(|responses| responses.keys().cloned().collect())
        .unwrap_or_default()
}

/// Follows a local `$ref`.
fn resolve<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|target| target.strip_prefix('#')) {
        Some(pointer) => document.pointer(pointer).unwrap_or(&Value::Null),
        None => schema,
    }
}

fn parameter<'a>(document: &'a Value, method: &str, template: &str, name: &str) -> &'a Value {
    document["paths"][template][method]["parameters"]
        .as_array()
        .and_then(|parameters| parameters.iter().find(|parameter| parameter["name"] == name))
        .map_or(&Value::Null, |parameter| resolve(document, &parameter["schema"]))
}

fn body_schema<'a>(document: &'a Value, method: &str, template: &str) -> &'a Value {
    resolve(document, &document["paths"][template][method]["requestBody"]["content"]["application/json"]["schema"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_status_the_server_answers_a_route_with_is_documented_on_that_route() {
    let server = token_server().await;
    server.start_desk(Some(ADMIN), "s-statuses").await;
    let document = server.document().await;
    let json = "application/json";
    // Just over the 64 KiB limit: the server reads it to its end before it answers 413.
    let large = serde_json::to_vec(&json!({ "message": "x".repeat(65 * 1024) })).expect("json");
    let starts = "/v1/workflows/{slug}/sessions";
    // (method, path sent, documented path, token, content type, body, the status expected)
    let cases: Vec<Probe> = vec![
        (
            "post",
            "/v1/workflows/desk/sessions",
            starts,
            Some(ADMIN),
            "text/plain",
            b"hello".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "post",
            "/v1/workflows/desk/sessions",
            starts,
            Some(ADMIN),
            json,
            large.clone(),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "post",
            "/v1/workflows/desk/sessions",
            starts,
            Some(ADMIN),
            json,
            br#"{"message": " "}"#.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "post",
            "/v1/workflows/desk/sessions",
            starts,
            Some(ADMIN),
            json,
            br#"{"message": "Hi.", "sessionId": "s-statuses"}"#.to_vec(),
            StatusCode::CONFLICT,
        ),
        (
            "post",
            "/v1/workflows/nope/sessions",
            starts,
            Some(ADMIN),
            json,
            br#"{"message": "Hi."}"#.to_vec(),
            StatusCode::NOT_FOUND,
        ),
        (
            "post",
            "/v1/workflows/desk/sessions",
            starts,
            None,
            json,
            br#"{"message": "Hi."}"#.to_vec(),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "post",
            "/v1/workflows/desk/sessions",
            starts,
            Some(READER),
            json,
            br#"{"message": "Hi."}"#.to_vec(),
            StatusCode::FORBIDDEN,
        ),
        (
            "post",
            "/v1/sessions/s-statuses/messages",
            "/v1/sessions/{id}/messages",
            Some(STARTER),
            "text/plain",
            b"hi".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "post",
            "/v1/sessions/s-statuses/messages",
            "/v1/sessions/{id}/messages",
            Some(STARTER),
            json,
            br#"{"message": ""}"#.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "post",
            "/v1/sessions/nobody/messages",
            "/v1/sessions/{id}/messages",
            Some(STARTER),
            json,
            br#"{"message": "Hi."}"#.to_vec(),
            StatusCode::NOT_FOUND,
        ),
        (
            "post",
            "/v1/sessions/s-statuses/deliver",
            "/v1/sessions/{id}/deliver",
            Some(STARTER),
            json,
            br#"{"trigger": "payment"}"#.to_vec(),
            StatusCode::CONFLICT,
        ),
        (
            "post",
            "/v1/sessions/s-statuses/deliver",
            "/v1/sessions/{id}/deliver",
            Some(STARTER),
            "text/plain",
            b"x".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "post",
            "/v1/sessions/s-statuses/decide",
            "/v1/sessions/{id}/decide",
            Some(ADMIN),
            "text/plain",
            b"x".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "post",
            "/v1/sessions/s-statuses/decide?wait=soon",
            "/v1/sessions/{id}/decide",
            Some(ADMIN),
            json,
            br#"{"to": "done"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "post",
            "/v1/triggers/manual",
            "/v1/triggers/{trigger}",
            Some(STARTER),
            json,
            b"{}".to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "post",
            "/v1/triggers/nothing",
            "/v1/triggers/{trigger}",
            Some(STARTER),
            json,
            b"{}".to_vec(),
            StatusCode::NOT_FOUND,
        ),
        (
            "post",
            "/v1/triggers/nothing",
            "/v1/triggers/{trigger}",
            Some(STARTER),
            "text/plain",
            b"x".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "post",
            "/v1/admin/artifacts",
            "/v1/admin/artifacts",
            Some(ADMIN),
            "application/octet-stream",
            b"not an artifact".to_vec(),
            StatusCode::CONFLICT,
        ),
        ("get", "/v1/sessions?limit=0", "/v1/sessions", Some(READER), json, Vec::new(), StatusCode::BAD_REQUEST),
        ("get", "/v1/sessions?limit=501", "/v1/sessions", Some(READER), json, Vec::new(), StatusCode::BAD_REQUEST),
        ("get", "/v1/sessions/a%20b", "/v1/sessions/{id}", Some(READER), json, Vec::new(), StatusCode::BAD_REQUEST),
        (
            "get",
            "/v1/sessions/a%20b/transcript",
            "/v1/sessions/{id}/transcript",
            Some(READER),
            json,
            Vec::new(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "get",
            "/v1/sessions/a%20b/events",
            "/v1/sessions/{id}/events",
            Some(READER),
            json,
            Vec::new(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "get",
            "/v1/sessions/nobody/events",
            "/v1/sessions/{id}/events",
            Some(READER),
            json,
            Vec::new(),
            StatusCode::NOT_FOUND,
        ),
        ("get", "/metrics", "/metrics", None, json, Vec::new(), StatusCode::UNAUTHORIZED),
        (
            "get",
            "/v1/admin/notifications",
            "/v1/admin/notifications",
            Some(STARTER),
            json,
            Vec::new(),
            StatusCode::FORBIDDEN,
        ),
        ("get", "/metrics", "/metrics", Some(STARTER), json, Vec::new(), StatusCode::FORBIDDEN),
    ];
    for (method, path, template, token, content_type, body, expected) in cases {
        let status = server.raw(method, path, token, content_type, body).await;
        assert_eq!(status, expected, "{method} {path}");
        let statuses = documented(&document, method, template);
        assert!(
            statuses.iter().any(|documented| documented == status.as_str()),
            "{method} {template} answers {status} but documents only {statuses:?}"
        );
        let error = &document["paths"][template][method]["responses"][status.as_str()]["content"][json]["schema"];
        assert_eq!(
            resolve(&document, error)["required"],
            json!(["error"]),
            "{method} {template} {status}: the error shape"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_the_server_enforces_are_stated_in_the_document() {
    let server = token_server().await;
    let document = server.document().await;

    let limit = parameter(&document, "get", "/v1/sessions", "limit");
    assert_eq!((limit["minimum"].as_u64(), limit["maximum"].as_u64()), (Some(1), Some(500)), "{limit}");
    for (query, expected) in
        [("limit=1", StatusCode::OK), ("limit=500", StatusCode::OK), ("limit=0", StatusCode::BAD_REQUEST)]
    {
        assert_eq!(server.get(&format!("/v1/sessions?{query}"), Some(READER)).await.0, expected, "{query}");
    }
    let status = parameter(&document, "get", "/v1/sessions", "status");
    let mut statuses: Vec<&str> = status["enum"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["awaiting_decision", "awaiting_input", "completed", "failed", "rejected", "running"]);

    // The session id: the pattern and length the VM's check enforces, in the path and
    // in a start's `sessionId`.
    let id = parameter(&document, "get", "/v1/sessions/{id}", "id");
    assert_eq!(id["maxLength"], 200, "{id}");
    let id_pattern = regex::Regex::new(id["pattern"].as_str().expect("an id pattern")).expect("the pattern compiles");
    for (good, bad) in [("s-1", "a b"), ("tenant.conv:42@x", ".."), ("a~1", "é")] {
        assert!(id_pattern.is_match(good) && !id_pattern.is_match(bad), "{good} / {bad}");
    }
    let start = body_schema(&document, "post", "/v1/workflows/{slug}/sessions");
    let new_id = regex::Regex::new(start["properties"]["sessionId"]["pattern"].as_str().expect("a new id's pattern"))
        .expect("the pattern compiles");
    assert!(new_id.is_match("s-1") && !new_id.is_match("s~1"), "a start names no sub-workflow id");
    let (status, _) =
        server.post("/v1/workflows/desk/sessions", Some(ADMIN), json!({ "message": "Hi.", "sessionId": "s~1" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(start["required"], json!(["message"]));
    assert_eq!(start["additionalProperties"], false, "unknown members are refused");

    // `message` and `trigger` must hold more than white space.
    let blank = |schema: &Value, field: &str| {
        let pattern =
            schema["properties"][field]["pattern"].as_str().unwrap_or_else(|| panic!("{field} has a pattern"));
        let pattern = regex::Regex::new(pattern).expect("the pattern compiles");
        (pattern.is_match(" \t\n"), pattern.is_match(" a "))
    };
    assert_eq!(blank(start, "message"), (false, true));
    assert_eq!(blank(body_schema(&document, "post", "/v1/sessions/{id}/messages"), "message"), (false, true));
    assert_eq!(blank(body_schema(&document, "post", "/v1/sessions/{id}/deliver"), "trigger"), (false, true));
    let (status, refused) =
        server.post("/v1/workflows/desk/sessions", Some(ADMIN), json!({ "message": " \t\n" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");

    let names = &start["properties"]["variables"]["propertyNames"]["pattern"];
    let names = regex::Regex::new(names.as_str().expect("variable names have a pattern")).expect("compiles");
    assert!(names.is_match("order_id") && !names.is_match("Bad.Name") && !names.is_match("1x"));
    let wait = parameter(&document, "post", "/v1/workflows/{slug}/sessions", "wait");
    assert_eq!(wait["minimum"].as_u64(), Some(0), "{wait}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_is_documented_with_the_events_schema_and_its_frames_match_it() {
    let server = token_server().await;
    server.start_desk(Some(ADMIN), "s-frames").await;
    let document = server.document().await;
    let stream =
        &document["paths"]["/v1/sessions/{id}/events"]["get"]["responses"]["200"]["content"]["text/event-stream"];
    let frame = resolve(&document, &stream["schema"]);
    assert_eq!(frame["required"], json!(["event", "id", "data"]), "{frame}");
    let event = resolve(&document, &frame["properties"]["data"]["contentSchema"]);
    let shipped: Value =
        serde_json::from_str(include_str!("../../../../schemas/events.schema.json")).expect("the events schema parses");
    assert_eq!(event["required"], shipped["required"], "the envelope is the events schema's");
    assert_eq!(event["properties"]["event"]["enum"], shipped["properties"]["event"]["enum"], "every event kind");

    let response = server
        .client
        .get(format!("{}/v1/sessions/s-frames/events", server.base))
        .bearer_auth(READER)
        .send()
        .await
        .expect("a stream");
    let mut response = response;
    let mut text = String::new();
    let mut seen = 0;
    while seen < 3 {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk()).await.expect("events arrive");
        let Some(chunk) = chunk.expect("a chunk") else { break };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let frame_text: String = text.drain(..end + 2).collect();
            let field = |name: &str| {
                frame_text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(": ").map(str::to_string))
            };
            let Some(data) = field("data") else { continue };
            assert_eq!(field("event").as_deref(), Some("archmax"));
            assert!(field("id").is_some_and(|id| id.parse::<u64>().is_ok()));
            let data: Value = serde_json::from_str(&data).expect("data is JSON");
            for required in event["required"].as_array().expect("required members") {
                let name = required.as_str().expect("a name");
                assert!(data.get(name).is_some(), "{data} has {name}");
            }
            let kinds = event["properties"]["event"]["enum"].as_array().expect("kinds");
            assert!(kinds.contains(&data["event"]), "{} is a documented kind", data["event"]);
            seen += 1;
        }
    }
    assert_eq!(seen, 3);
    server.stop().await;
}

/// A body's `variables` schema on `template`: the names it lists, and whether it allows
/// other well-formed names.
fn variables_of(document: &Value, template: &str) -> (Vec<String>, bool) {
    let variables = &body_schema(document, "post", template)["properties"]["variables"];
    let listed = variables["properties"].as_object().map(|names| names.keys().cloned().collect()).unwrap_or_default();
    let others = variables["additionalProperties"].as_bool().unwrap_or_else(|| panic!("{template}: {variables}"));
    (listed, others)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_variables_a_start_or_a_delivery_may_carry_are_the_ones_the_document_allows() {
    let server = token_server().await;
    let document = server.document().await;
    let (start_listed, start_takes_others) = variables_of(&document, "/v1/workflows/{slug}/sessions");
    let (delivery_listed, delivery_takes_others) = variables_of(&document, "/v1/sessions/{id}/deliver");
    assert_eq!(
        (start_listed.as_slice(), delivery_listed.as_slice()),
        (["title".to_string()].as_slice(), ["title".to_string()].as_slice())
    );
    // A start by `manual` seeds any well-formed name, as the document allows.
    assert!(start_takes_others, "a manual start takes any name");
    let (status, started) = server
        .post(
            "/v1/workflows/desk/sessions?wait=60",
            Some(ADMIN),
            json!({ "message": "Pay invoice 7.", "sessionId": "s-seeded", "variables": { "title": "A payout", "order_id": "7" } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["variables"]["order_id"]["value"], "7", "{started}");
    // A delivery takes only what its trigger declares: the document allows no name it does
    // not list, and the server refuses one, naming it.
    assert!(!delivery_takes_others, "a delivery's variables allow no name the document does not list");
    let (status, waiting) = server
        .post(
            "/v1/workflows/waiter/sessions?wait=60",
            Some(ADMIN),
            json!({ "message": "Wait.", "sessionId": "w-seeded" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    let deliver = |variables: Value| {
        let body = json!({ "trigger": "manual", "variables": variables });
        server.post("/v1/sessions/w-seeded/deliver?wait=60", Some(ADMIN), body)
    };
    let (status, refused) = deliver(json!({ "order_id": "7" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().contains("order_id"), "the refusal names the variable: {refused}");
    let (status, delivered) = deliver(json!({ "title": "Paid" })).await;
    assert_eq!(status, StatusCode::OK, "every name the document lists is taken: {delivered}");
    server.stop().await;
}

/// The session schemas the document publishes, held closed: an answer member the
/// document does not name is a drift this suite reports.
const SESSION_SCHEMAS: &[&str] = &[
    "Session",
    "SessionVariable",
    "TrailStep",
    "SessionExit",
    "SessionUsage",
    "Park",
    "DecisionChoice",
    "SpendLine",
    "SessionBudget",
    "BudgetStop",
    "TurnSummary",
    "TurnUsage",
];

/// Holds `answer` against the served document's `Session` schema, with every session
/// schema closed to members it does not name.
pub(super) fn assert_is_a_session(document: &Value, answer: &Value) {
    let mut components = document["components"].clone();
    for name in SESSION_SCHEMAS {
        let schema = &mut components["schemas"][*name];
        assert!(schema.is_object(), "the document publishes `{name}`");
        if schema["type"] == "object" {
            schema["additionalProperties"] = json!(false);
        }
    }
    let schema = json!({ "$ref": "#/components/schemas/Session", "components": components });
    let validator = jsonschema::draft202012::new(&schema).expect("the Session schema compiles");
    let problems: Vec<String> =
        validator.iter_errors(answer).map(|error| format!("{error} at `{}`", error.instance_path())).collect();
    assert!(problems.is_empty(), "{answer}\ndoes not match the documented Session: {problems:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_answer_matches_the_documented_session_member_by_member() {
    let server = token_server().await;
    let document = server.document().await;
    // Parked at a decision, as a waited turn answers it and as a read does.
    let parked = server.start_desk(Some(ADMIN), "shape-1").await;
    assert_eq!(parked["park"]["channel"], "decision", "{parked}");
    assert!(parked["turn"].is_object(), "{parked}");
    assert_is_a_session(&document, &parked);
    let (_, read) = server.get("/v1/sessions/shape-1", Some(READER)).await;
    assert_is_a_session(&document, &read);
    // Decided and completed, with a trail of every kind it took.
    let (status, decided) =
        server.post("/v1/sessions/shape-1/decide?wait=60", Some(super::FINANCE), json!({ "to": "done" })).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert!(decided["exit"]["success"].is_boolean(), "{decided}");
    assert!(decided["trail"].as_array().is_some_and(|trail| trail.len() >= 2), "{decided}");
    assert_is_a_session(&document, &decided);
    // Waiting for an input, then delivered to.
    let (status, waiting) = server
        .post(
            "/v1/workflows/waiter/sessions?wait=60",
            Some(ADMIN),
            json!({ "message": "Tell me when it is paid.", "sessionId": "shape-2" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    assert_eq!(waiting["park"]["channel"], "input", "{waiting}");
    assert_is_a_session(&document, &waiting);
    // A listing's sessions are sessions too.
    let (status, page) = server.get("/v1/sessions", Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let listed = page["sessions"].as_array().expect("a page");
    assert!(listed.len() >= 2, "{page}");
    for session in listed {
        assert_is_a_session(&document, session);
    }
    // And a member the document does not name is reported.
    let mut drifted = read.clone();
    drifted["undocumented"] = json!(1);
    let caught = std::panic::catch_unwind(|| assert_is_a_session(&document, &drifted));
    assert!(caught.is_err(), "an undocumented member is caught");
    server.stop().await;
}
