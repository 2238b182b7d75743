//! Budgets over HTTP: a session stopped at `max_model_calls_per_turn` is refused a
//! message without a raise (409 `session.budget-stopped`, the stop in the details),
//! a raise needs a token that may decide as well as start (a starter's is 403 on a
//! message and on a delivery), and a message that raises it lets the stopped state run
//! on.

use super::*;

const LOOPER: &str = r#"title: Looper
instructions: You check a supplier's stock.
states:
  check:
    triggers:
      manual:
        description: Check one supplier.
    instructions: Read what the session holds, then say what is in stock.
"#;

const LOOPER_TAPE: &str = r#"
- { state: check, tool_calls: [{ name: archmax_get_variables, args: {} }] }
- { state: check, text: All forty plates are in stock. }
"#;

async fn budget_server() -> Running {
    archmax_vm::model::openai::install_tls_provider();
    let root = workspace_of(&[("workflows/looper/workflow.yaml", LOOPER)]);
    let program = compiled(&root);
    let limits = archmax_config::settings::BudgetLimits {
        max_model_calls_per_turn: Some(1),
        ..archmax_config::settings::BudgetLimits::default()
    };
    let server = Server::new(ServerParts {
        auth: Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens"),
        budgets: archmax_config::settings::Budgets { default: limits, ..Default::default() },
        ..super::parts(
            program,
            Arc::new(MemoryStore::new()),
            Arc::new(Tape::parse("looper", LOOPER_TAPE).expect("tape")),
            root,
        )
    })
    .expect("server");
    listen(Arc::new(server)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_session_goes_on_only_when_a_token_that_may_decide_raises_its_budget() {
    let server = budget_server().await;
    let (status, body) = server
        .post(
            "/v1/workflows/looper/sessions?wait=60",
            Some(STARTER),
            json!({ "message": "Are the plates in stock?", "sessionId": "b1" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "awaiting_input", "{body}");
    assert_eq!(body["budget"]["stop"]["limit"], "max_model_calls_per_turn", "{body}");
    assert_eq!(body["park"]["channel"], "input", "{body}");
    let document = server.document().await;
    super::document::assert_is_a_session(&document, &body);

    // No raise: refused, and nothing changed.
    let (status, body) =
        server.post("/v1/sessions/b1/messages?wait=60", Some(STARTER), json!({ "message": "Go on." })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "session.budget-stopped", "{body}");
    assert_eq!(body["error"]["details"]["budget"]["limit"], "max_model_calls_per_turn", "{body}");
    let (status, body) =
        server.post("/v1/sessions/b1/deliver?wait=60", Some(STARTER), json!({ "trigger": "manual" })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "session.budget-stopped", "{body}");

    // A raise by a token that may only start: refused before anything runs.
    for path in ["/v1/sessions/b1/messages?wait=60", "/v1/sessions/b1/deliver?wait=60"] {
        let body = json!({ "message": "Go on.", "trigger": "manual", "raiseBudget": true });
        let body = if path.ends_with("messages?wait=60") {
            json!({ "message": body["message"], "raiseBudget": true })
        } else {
            body
        };
        let (status, answer) = server.post(path, Some(STARTER), body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {answer}");
    }
    let (_, still) = server.get("/v1/sessions/b1", Some(READER)).await;
    assert_eq!(still["status"], "awaiting_input", "{still}");

    // A raise by a token that may start and decide: the stopped state runs on.
    let (status, body) = server
        .post("/v1/sessions/b1/messages?wait=60", Some(ADMIN), json!({ "message": "Go on.", "raiseBudget": true }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(body["turn"]["reply"], "All forty plates are in stock.", "{body}");
    assert_eq!(body["budget"], json!({ "raises": 1, "stop": null }), "{body}");
    super::document::assert_is_a_session(&document, &body);
    // A flag that is not a boolean is named.
    let (status, body) =
        server.post("/v1/sessions/b1/decide", Some(INTERN), json!({ "to": "x", "raiseBudget": "yes" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("raiseBudget"), "{body}");
    assert!(server.stop().await);
}
