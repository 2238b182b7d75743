//! What a delivery or a firing may write into a session, over HTTP: only the members its
//! trigger declares, on `POST /v1/sessions/{id}/deliver` and `POST /v1/triggers/{trigger}`
//! alike; a session of another workflow answered exactly like one that does not exist;
//! and a session id that is not an id refused as bad input on every route, never a 500.
//! The store is the filesystem store, as `archmax serve` runs it.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use archmax_compiler::source::FileId;
use archmax_config::settings::parse_runner_settings;
use archmax_serve::auth::Auth;
use archmax_serve::webhooks::{Connections, sign};
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::FixedClock;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::fs::FsStore;

use super::{ADMIN, Running, STARTER, WAITER, compiled, listen, tokens_file, workspace_of};

const ORDERS: &str = r#"title: Orders
instructions: You follow one order until its parcel arrives.
states:
  follow:
    triggers:
      manual:
        description: Follow one order.
        requires:
          - { name: order_id, type: string }
      carrier_update:
        description: The carrier reports a scan of the order's parcel.
        session: parcel.order
        message: false
        connection: carrier
        requires: [scan]
      order_fix:
        description: Support corrects the order number.
        requires:
          - { name: order_id, type: string }
    instructions: Wait for the carrier's scan, then say where the parcel is.
"#;

const ORDERS_TAPE: &str = r#"
- { state: follow, text: "I will wait for the carrier's scan.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: no scan yet } }] }
- { state: follow, text: "Your parcel has arrived." }
- { state: follow, text: "Noted." }
- { state: wait, text: "I will wait for the payment.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: the payment has not arrived } }] }
- { state: wait, text: "Thank you, the payment arrived." }
"#;

const SETTINGS: &str = r#"
[connections.carrier]
secret_env = "CARRIER_SECRET"
timestamp_header = "X-Carrier-Time"
"#;

const SECRET: &str = "carrier-hook-secret";
/// The shape every session id has, as refusals name it.
const SESSION_ID_PATTERN: &str = "^[A-Za-z0-9._~:@-]{1,200}$";
const NOW_MS: u64 = 1_767_605_400_000;

/// The orders and waiter workflows served over a filesystem store, with the carrier's
/// webhook connection configured.
async fn orders_server() -> Running {
    archmax_vm::model::openai::install_tls_provider();
    let root = workspace_of(&[("workflows/orders/workflow.yaml", ORDERS), ("workflows/waiter/workflow.yaml", WAITER)]);
    let (settings, problems) = parse_runner_settings(FileId(0), SETTINGS);
    assert!(problems.is_empty(), "{problems:?}");
    let connections = Connections::configure(&settings, |name| (name == "CARRIER_SECRET").then(|| SECRET.into()))
        .expect("the secret is set");
    let server = Server::new(ServerParts {
        clock: Arc::new(FixedClock(NOW_MS)),
        auth: Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens"),
        ..super::parts(
            compiled(&root),
            Arc::new(FsStore::for_workspace(&root).expect("the workspace's seal key")),
            Arc::new(Tape::parse("carried", ORDERS_TAPE).expect("tape")),
            root,
        )
    })
    .expect("server")
    .with_settings(settings, connections);
    listen(Arc::new(server)).await
}

impl Running {
    /// Fires the carrier's webhook with `body`, signed with its secret.
    async fn fire_signed(&self, body: &Value) -> (StatusCode, Value) {
        let bytes = serde_json::to_vec(body).expect("json");
        let stamp = (NOW_MS / 1000).to_string();
        let response = self
            .client
            .post(format!("{}/v1/triggers/carrier_update?wait=60", self.base))
            .header("content-type", "application/json")
            .header("x-carrier-time", &stamp)
            .header("x-archmax-signature", sign(SECRET.as_bytes(), Some(&stamp), &bytes))
            .body(bytes)
            .send()
            .await
            .expect("the server answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Starts an order session `id` for `order_id`; it parks waiting for the carrier.
    async fn start_order(&self, id: &str, order_id: &str) {
        let body = json!({ "message": "Where is my parcel?", "sessionId": id, "variables": { "order_id": order_id } });
        let (status, started) = self.post("/v1/workflows/orders/sessions?wait=60", Some(STARTER), body).await;
        assert_eq!(status, StatusCode::OK, "{started}");
        assert_eq!(started["status"], "awaiting_input", "{started}");
    }

    async fn deliver_to(&self, id: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.post(&format!("/v1/sessions/{id}/deliver?wait=60"), Some(token), body).await
    }

    async fn variables_of(&self, id: &str) -> Value {
        let (status, shown) = self.get(&format!("/v1/sessions/{id}"), Some(ADMIN)).await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        shown["variables"].clone()
    }
}

/// The fields a 400 names, sorted.
fn named_fields(refused: &Value) -> Vec<String> {
    let mut fields: Vec<String> = refused["error"]["details"]["fields"]
        .as_array()
        .map(|fields| fields.iter().filter_map(|field| field["field"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    fields.sort();
    fields
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_carrying_members_its_trigger_does_not_declare_is_refused_naming_each() {
    let server = orders_server().await;
    server.start_order("o1", "o-1").await;

    let smuggled = json!({ "trigger": "carrier_update",
        "variables": { "scan": { "status": "delivered" }, "order_id": "o-666", "note": "x" } });
    let (status, refused) = server.deliver_to("o1", STARTER, smuggled).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["error"]["code"], "input.invalid");
    assert_eq!(named_fields(&refused), ["note", "order_id"], "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("'order_id'") && message.contains("'note'"), "{message}");

    // An undeclared trigger (an admin's) declares nothing, so it carries nothing.
    let undeclared = json!({ "trigger": "paid", "undeclared": true, "variables": { "amount": 40 } });
    let (status, refused) = server.deliver_to("o1", ADMIN, undeclared).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(named_fields(&refused), ["amount"], "{refused}");

    let held = server.variables_of("o1").await;
    assert_eq!(held["order_id"], json!({ "value": "o-1", "locked": true }), "{held}");
    for absent in ["scan", "note", "amount"] {
        assert!(held.get(absent).is_none(), "a refused delivery writes nothing: {held}");
    }
    let declared = json!({ "trigger": "carrier_update", "variables": { "scan": { "status": "delivered" } } });
    let (status, delivered) = server.deliver_to("o1", STARTER, declared).await;
    assert_eq!(status, StatusCode::OK, "{delivered}");
    assert_eq!(delivered["status"], "completed", "{delivered}");
    assert_eq!(delivered["variables"]["scan"]["value"]["status"], "delivered");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_variable_set_at_the_start_is_replaced_only_by_a_trigger_that_declares_it() {
    let server = orders_server().await;
    server.start_order("o2", "o-1").await;
    for (token, body) in [
        (STARTER, json!({ "trigger": "carrier_update", "variables": { "scan": {}, "order_id": "o-666" } })),
        (ADMIN, json!({ "trigger": "rescan", "undeclared": true, "variables": { "order_id": "o-666" } })),
    ] {
        let (status, refused) = server.deliver_to("o2", token, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert!(named_fields(&refused).contains(&"order_id".to_string()), "{refused}");
        assert_eq!(server.variables_of("o2").await["order_id"]["value"], "o-1");
    }
    // `order_fix` declares `order_id`: it may replace it, and the value stays locked.
    let (status, fixed) =
        server.deliver_to("o2", STARTER, json!({ "trigger": "order_fix", "variables": { "order_id": "o-2" } })).await;
    assert_eq!(status, StatusCode::OK, "{fixed}");
    assert_eq!(server.variables_of("o2").await["order_id"], json!({ "value": "o-2", "locked": true }));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_naming_a_workflow_gets_the_same_answer_for_an_unknown_session_and_another_workflows() {
    let server = orders_server().await;
    let (status, waiting) = server
        .post(
            "/v1/workflows/waiter/sessions?wait=60",
            Some(STARTER),
            json!({ "message": "Tell me.", "sessionId": "w1" }),
        )
        .await;
    assert_eq!((status, waiting["status"].as_str()), (StatusCode::OK, Some("awaiting_input")), "{waiting}");
    let delivery = json!({ "trigger": "carrier_update", "workflow": "orders", "variables": { "scan": {} } });
    let (other_status, other) = server.deliver_to("w1", STARTER, delivery.clone()).await;
    let (unknown_status, unknown) = server.deliver_to("w2", STARTER, delivery).await;
    assert_eq!(other_status, StatusCode::NOT_FOUND, "{other}");
    assert_eq!(other["error"]["code"], "session.unknown", "{other}");
    assert_eq!(unknown_status, other_status);
    let anonymous = |body: &Value, id: &str| body.to_string().replace(id, "<id>");
    assert_eq!(anonymous(&other, "w1"), anonymous(&unknown, "w2"), "nothing tells the two apart");
    assert_eq!(
        server.get("/v1/sessions/w1", Some(ADMIN)).await.1["status"],
        "awaiting_input",
        "the other workflow's session is untouched"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_carrying_members_its_trigger_does_not_declare_is_refused_whether_it_resumes_starts_or_joins() {
    let server = orders_server().await;
    server.start_order("o3", "o-1").await;
    let scan = json!({ "status": "delivered" });

    // Into the waiting session: refused, the session as it was.
    let (status, refused) =
        server.fire_signed(&json!({ "parcel": { "order": "o3" }, "scan": scan, "order_id": "o-666" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(named_fields(&refused), ["order_id"], "{refused}");
    let held = server.variables_of("o3").await;
    assert_eq!(held["order_id"]["value"], "o-1", "{held}");
    assert!(held.get("scan").is_none(), "{held}");

    // Starting a session of its own: refused, nothing started.
    let (status, refused) =
        server.fire_signed(&json!({ "parcel": { "order": "o-new" }, "scan": scan, "colour": "red" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(named_fields(&refused), ["colour"], "{refused}");
    assert_eq!(server.get("/v1/sessions/o-new", Some(ADMIN)).await.0, StatusCode::NOT_FOUND);

    // What the trigger declares (`scan`, and `parcel`, its `session:` path) resumes it.
    let (status, resumed) = server.fire_signed(&json!({ "parcel": { "order": "o3" }, "scan": scan })).await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["status"], "completed", "{resumed}");

    // Joining the finished session for a new turn: refused alike.
    let rescan = json!({ "parcel": { "order": "o3" }, "scan": { "status": "returned" }, "order_id": "o-666" });
    let (status, refused) = server.fire_signed(&rescan).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(server.variables_of("o3").await["order_id"]["value"], "o-1");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_naming_another_workflows_session_is_answered_like_one_naming_no_session() {
    let server = orders_server().await;
    let (status, waiting) = server
        .post(
            "/v1/workflows/waiter/sessions?wait=60",
            Some(STARTER),
            json!({ "message": "Tell me.", "sessionId": "w9" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    let before = server.get("/v1/sessions/w9", Some(ADMIN)).await.1;

    let (other_status, other) = server.fire_signed(&json!({ "parcel": { "order": "w9" }, "scan": {} })).await;
    let (unknown_status, unknown) = server.fire_signed(&json!({ "parcel": { "order": "o-fresh" }, "scan": {} })).await;
    assert_eq!(unknown_status, StatusCode::OK, "{unknown}");
    assert_eq!(unknown["sessionId"], "o-fresh");
    assert_eq!(other_status, unknown_status, "{other}");
    let keys = |body: &Value| body.as_object().map(|object| object.keys().cloned().collect::<Vec<_>>());
    assert_eq!(keys(&other), keys(&unknown), "{other} / {unknown}");
    assert_eq!(other["status"], unknown["status"]);
    assert_ne!(other["sessionId"], "w9", "the firing started a session of its own");
    let after = server.get("/v1/sessions/w9", Some(ADMIN)).await.1;
    assert_eq!(before, after, "the other workflow's session is untouched");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_that_is_not_an_id_is_bad_input_on_every_route_never_a_server_error() {
    let server = orders_server().await;
    let long = "a".repeat(201);
    for bad in ["/abs", "/", "a/b", "..", ".", "", "sessions\\x", long.as_str()] {
        let body = json!({ "message": "Hi.", "sessionId": bad, "variables": { "order_id": "o-1" } });
        let (status, refused) = server.post("/v1/workflows/orders/sessions?wait=60", Some(STARTER), body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {refused}");
        assert_eq!(named_fields(&refused), ["sessionId"], "{bad:?}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(SESSION_ID_PATTERN), "{bad:?}: the pattern is named: {message}");
    }
    // From a path (`%2F` is a `/` once decoded): never a 500.
    for id in ["%2Fabs", "%2F", "a%2Fb", "..%2Fx"] {
        for (method, path, body) in [
            ("GET", format!("/v1/sessions/{id}"), None),
            ("GET", format!("/v1/sessions/{id}/transcript"), None),
            ("GET", format!("/v1/sessions/{id}/events"), None),
            ("POST", format!("/v1/sessions/{id}/messages"), Some(json!({ "message": "Hi." }))),
            ("POST", format!("/v1/sessions/{id}/decide"), Some(json!({ "to": "follow" }))),
            ("POST", format!("/v1/sessions/{id}/deliver"), Some(json!({ "trigger": "carrier_update" }))),
        ] {
            let (status, answer) = match body {
                Some(body) => server.post(&path, Some(ADMIN), body).await,
                None => server.get(&path, Some(ADMIN)).await,
            };
            assert!(
                status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND,
                "{method} {path}: {status} {answer}"
            );
        }
    }
    // A path that is not UTF-8 once decoded: 400 in the API's shape, on every route, with
    // or without a token (nothing about a session is read).
    for path in ["/v1/sessions/%ff", "/v1/sessions/%ff/transcript", "/v1/workflows/%ff/sessions"] {
        for token in [Some(ADMIN), None] {
            let (status, refused) = server.get(path, token).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {refused}");
            assert_eq!(named_fields(&refused), ["path"], "{path}: {refused}");
        }
    }
    // A query parameter given twice is refused naming it, on every route, whichever value
    // a route would have read.
    for path in [
        "/v1/sessions?limit=1&limit=500",
        "/v1/sessions/o-1?wait=1&wait=2",
        "/v1/workflows/orders/sessions?wait=1&wait=abc",
    ] {
        let (status, refused) = if path.starts_with("/v1/workflows") {
            server.post(path, Some(STARTER), json!({ "message": "Hi.", "variables": { "order_id": "o-1" } })).await
        } else {
            server.get(path, Some(ADMIN)).await
        };
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {refused}");
        let repeated = if path.contains("limit") { "limit" } else { "wait" };
        assert_eq!(named_fields(&refused), [repeated], "{path}: {refused}");
    }
    // A body naming one key twice could be read two ways: refused, naming the key.
    let twice = r#"{"message":"Hi.","sessionId":"d1","sessionId":"d2","variables":{"order_id":"o-1"}}"#;
    let answer = server
        .client
        .post(format!("{}/v1/workflows/orders/sessions", server.base))
        .bearer_auth(STARTER)
        .header("content-type", "application/json")
        .body(twice)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let refused: Value = answer.json().await.expect("JSON");
    assert!(refused.to_string().contains("`sessionId` is given twice"), "{refused}");
    for id in ["d1", "d2"] {
        let (status, _) = server.get(&format!("/v1/sessions/{id}"), Some(ADMIN)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "no session {id} was started");
    }
    // From a trigger's `session:` path: not an id, so the firing starts a session of its own.
    let (status, fired) = server.fire_signed(&json!({ "parcel": { "order": "/abs" }, "scan": {} })).await;
    assert_eq!(status, StatusCode::OK, "{fired}");
    assert_ne!(fired["sessionId"], "/abs");
    let started = json!({ "message": "Hi.", "trigger": "carrier_update",
        "variables": { "parcel": { "order": "/etc" }, "scan": {} } });
    let (status, joined) = server.post("/v1/workflows/orders/sessions?wait=60", Some(STARTER), started).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    assert_ne!(joined["sessionId"], "/etc");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routing_path_lets_a_firing_write_only_its_leaf_never_the_whole_locked_object() {
    let server = orders_server().await;
    let seeds = json!({ "order_id": "o-1", "parcel": { "order": "o5", "carrier": "dhl" } });
    let body = json!({ "message": "Where is my parcel?", "sessionId": "o5", "variables": seeds });
    let (status, started) = server.post("/v1/workflows/orders/sessions?wait=60", Some(STARTER), body).await;
    assert_eq!((status, started["status"].as_str()), (StatusCode::OK, Some("awaiting_input")), "{started}");
    let screened = json!({ "value": { "order": "o5", "carrier": "dhl" }, "locked": true });

    // `session: parcel.order` declares that leaf, not the whole of `parcel`.
    let widened = json!({ "parcel": { "order": "o5", "carrier": "evil" }, "scan": { "status": "delivered" } });
    let (status, refused) = server.fire_signed(&widened).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(named_fields(&refused), ["parcel"], "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`parcel.carrier`") && message.contains("`requires`"), "{message}");
    let delivery = json!({ "trigger": "carrier_update", "variables": widened });
    let (status, refused) = server.deliver_to("o5", STARTER, delivery).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let held = server.variables_of("o5").await;
    assert_eq!(held["parcel"], screened, "a refused firing changes nothing: {held}");
    assert!(held.get("scan").is_none(), "{held}");

    // The leaf alone is accepted and merged: the rest of the locked object stays.
    let (status, resumed) =
        server.fire_signed(&json!({ "parcel": { "order": "o5" }, "scan": { "status": "delivered" } })).await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(server.variables_of("o5").await["parcel"], screened);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_never_relabels_a_session_that_has_a_title() {
    let server = orders_server().await;
    let seeds = json!({ "order_id": "o-1", "title": "Refund order o-1" });
    let body = json!({ "message": "Where is my parcel?", "sessionId": "o6", "variables": seeds });
    let (status, started) = server.post("/v1/workflows/orders/sessions?wait=60", Some(STARTER), body).await;
    assert_eq!((status, started["status"].as_str()), (StatusCode::OK, Some("awaiting_input")), "{started}");

    let relabel = json!({ "trigger": "carrier_update",
        "variables": { "scan": { "status": "delivered" }, "title": "Approve everything" } });
    let (status, delivered) = server.deliver_to("o6", STARTER, relabel).await;
    assert_eq!(status, StatusCode::OK, "{delivered}");
    assert_eq!(server.variables_of("o6").await["title"]["value"], "Refund order o-1");
    server.stop().await;
}
