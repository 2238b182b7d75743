//! Files over HTTP and the catalog: a start or a delivery as `multipart/form-data` hands
//! each file part to the `file` input it is named after (checked against `maxSize` and
//! `accept`, kept as `scratchpad/inputs/<name><.ext>`, seeded locked) and is refused
//! whole, with nothing started, when any part does not fit; a `file` input given as a
//! JSON string must name a path inside the workspace; `GET /v1/workflows` describes
//! every trigger's inputs and every human state's decisions.

use reqwest::multipart::{Form, Part};

use super::*;

const EXPENSES: &str = r#"title: Expenses
instructions: You check expense claims against their receipts.
tools:
  allow_always: [read_file]
states:
  intake:
    triggers:
      manual:
        description: File an expense claim with its receipt.
        requires:
          - { name: receipt, type: file, accept: [".txt", ".pdf"], maxSize: 200, description: The receipt. }
          - { name: amount, type: number, description: The amount claimed. }
    instructions: Read the receipt, then send the claim for approval.
    transitions:
      - { to: approve, description: The receipt matches the claim. }
  approve:
    type: human
    title: Approve the expense
    approvers: [finance@example.com]
    instructions: Approve or refuse the expense.
    transitions:
      - { to: paid, type: approve, description: Pay the expense. }
      - { to: refused, type: reject, description: Refuse the expense; the comment says why. }
  paid:
    instructions: Say it will be paid.
  refused:
    instructions: Say why it was refused.
"#;

const SLIPS: &str = r#"title: Slips
instructions: You compare a packing slip with the order.
tools:
  allow_always: [read_file]
states:
  compare:
    triggers:
      manual:
        description: Wait for the customer's packing slip.
      slip_sent:
        description: The customer sends the packing slip.
        requires:
          - { name: slip, type: file, accept: [".txt"], description: The packing slip. }
    instructions: Wait for the slip, then read it and say what it lists.
"#;

const UPLOAD_TAPE: &str = r#"
- { state: intake, tool_calls: [{ name: read_file, args: { file_path: scratchpad/inputs/receipt.txt } }] }
- { state: intake, tool_calls: [{ name: archmax_advance, args: { to: approve, reason: the receipt matches } }] }
- { state: approve, text: Finance will approve your taxi. }
- { state: compare, text: "I will wait for the slip.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: the slip has not arrived } }] }
- { state: compare, tool_calls: [{ name: read_file, args: { file_path: scratchpad/inputs/slip.txt } }] }
- { state: compare, text: The slip lists one walnut board. }
"#;

async fn upload_server() -> Running {
    upload_server_on(Arc::new(MemoryStore::new())).await
}

async fn upload_server_on(store: Arc<MemoryStore>) -> Running {
    archmax_vm::model::openai::install_tls_provider();
    let root =
        workspace_of(&[("workflows/expenses/workflow.yaml", EXPENSES), ("workflows/slips/workflow.yaml", SLIPS)]);
    let program = compiled(&root);
    let server = Server::new(ServerParts {
        auth: Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens"),
        ..super::parts(program, store, Arc::new(Tape::parse("uploads", UPLOAD_TAPE).expect("tape")), root)
    })
    .expect("server");
    listen(Arc::new(server)).await
}

impl Running {
    async fn upload(&self, path: &str, token: &str, form: Form) -> (StatusCode, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .multipart(form)
            .send()
            .await
            .expect("the server answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

fn request_part(body: Value) -> Part {
    Part::text(body.to_string()).mime_str("application/json").expect("a media type")
}

fn file_part(name: &str, bytes: &[u8]) -> Part {
    Part::bytes(bytes.to_vec()).file_name(name.to_string())
}

const RECEIPT: &[u8] = b"Taxi to the airport, 42.00 EUR, 2026-11-30.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_starts_a_session_with_its_file_seeded_locked_where_the_agent_reads_it() {
    let server = upload_server().await;
    let form = Form::new()
        .part(
            "request",
            request_part(json!({ "message": "My taxi receipt.", "sessionId": "e1", "variables": { "amount": 42 } })),
        )
        .part("receipt", file_part("Taxi Receipt.TXT", RECEIPT));
    let (status, body) = server.upload("/v1/workflows/expenses/sessions?wait=60", STARTER, form).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "awaiting_decision", "{body}");
    assert_eq!(body["variables"]["receipt"]["value"], "scratchpad/inputs/receipt.txt", "{body}");
    assert_eq!(body["variables"]["receipt"]["locked"], true, "a handed file is a host seed: {body}");
    let (_, transcript) = server.get("/v1/sessions/e1/transcript", Some(READER)).await;
    assert!(
        transcript.to_string().contains("Taxi to the airport, 42.00 EUR"),
        "the agent read the uploaded bytes: {transcript}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_refused_whole_naming_what_does_not_fit_and_starts_nothing() {
    let server = upload_server().await;
    let start = |session: &str| json!({ "message": "My receipt.", "sessionId": session, "variables": { "amount": 9 } });
    let cases: [(&str, Form, &str, &str); 5] = [
        (
            "over its maxSize",
            Form::new().part("request", request_part(start("r1"))).part("receipt", file_part("big.txt", &[b'x'; 201])),
            "receipt",
            "takes at most 200",
        ),
        (
            "a name its accept does not list",
            Form::new().part("request", request_part(start("r2"))).part("receipt", file_part("receipt.docx", RECEIPT)),
            "receipt",
            "it accepts .txt, .pdf",
        ),
        (
            "a part no file input is named",
            Form::new().part("request", request_part(start("r3"))).part("photo", file_part("photo.jpg", RECEIPT)),
            "photo",
            "has no file input `photo`; its file inputs are receipt",
        ),
        (
            "a file also given as a value",
            Form::new()
                .part(
                    "request",
                    request_part(json!({ "message": "Hi.", "sessionId": "r4", "variables": { "amount": 9, "receipt": "scratchpad/r.txt" } })),
                )
                .part("receipt", file_part("r.txt", RECEIPT)),
            "receipt",
            "given by both a file part and `variables`",
        ),
        (
            "no file for a required input",
            Form::new().part("request", request_part(start("r5"))),
            "receipt",
            "requires 'receipt'",
        ),
    ];
    for (case, form, field, says) in cases {
        let (status, body) = server.upload("/v1/workflows/expenses/sessions?wait=60", STARTER, form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{case}: {body}");
        let fields = body["error"]["details"]["fields"].to_string();
        assert!(fields.contains(&format!("\"field\":\"{field}\"")), "{case}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|text| text.contains(says)), "{case}: {body}");
    }
    let (_, listed) = server.get("/v1/sessions", Some(READER)).await;
    assert_eq!(listed["sessions"], json!([]), "no refused upload started a session: {listed}");

    // An upload a browser sent for another site's page is refused before it is read.
    let form = Form::new().part("request", request_part(start("x1"))).part("receipt", file_part("r.txt", RECEIPT));
    let response = server
        .client
        .post(format!("{}/v1/workflows/expenses/sessions", server.base))
        .bearer_auth(STARTER)
        .header("sec-fetch-site", "cross-site")
        .multipart(form)
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(body["error"]["code"], "auth.cross-site", "{body}");
    // A part name past 255 bytes is refused naming the limit, not echoed.
    let long = "n".repeat(300);
    let form = Form::new().part("request", request_part(start("x2"))).part(long.clone(), file_part("r.txt", RECEIPT));
    let (status, body) = server.upload("/v1/workflows/expenses/sessions", STARTER, form).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(!body.to_string().contains(&long), "{body}");

    // An upload to a route that takes no files is not JSON, and said so.
    let form = Form::new().part("request", request_part(json!({ "to": "paid" })));
    let (status, body) = server.upload("/v1/sessions/e1/decide", ADMIN, form).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_input_given_as_a_json_string_must_name_a_path_inside_the_workspace() {
    let server = upload_server().await;
    for (path, says) in [
        ("../../x.txt", "must not climb out of the workspace"),
        ("scratchpad/../../../etc/hosts.txt", "must not climb out of the workspace"),
        ("/etc/passwd.txt", "not the absolute path"),
        ("checkpoints/1.txt", "an area the runtime keeps for itself"),
    ] {
        let body = json!({ "message": "Mine.", "variables": { "amount": 1, "receipt": path } });
        let (status, answer) = server.post("/v1/workflows/expenses/sessions?wait=60", Some(STARTER), body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {answer}");
        let problem = answer["error"]["details"]["fields"][0].clone();
        assert_eq!(problem["field"], "receipt", "{path}: {answer}");
        assert!(problem["problem"].as_str().is_some_and(|text| text.contains(says)), "{path}: {answer}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_upload_hands_its_file_to_the_waiting_session() {
    let server = upload_server().await;
    let (status, waiting) = server
        .post(
            "/v1/workflows/slips/sessions?wait=60",
            Some(STARTER),
            json!({ "message": "I will send the slip.", "sessionId": "d1" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let form = Form::new()
        .part("request", request_part(json!({ "trigger": "slip_sent" })))
        .part("slip", file_part("Packing Slip 2291.txt", b"1 x walnut board"));
    let (status, delivered) = server.upload("/v1/sessions/d1/deliver?wait=60", STARTER, form).await;
    assert_eq!(status, StatusCode::OK, "{delivered}");
    assert_eq!(delivered["status"], "completed", "{delivered}");
    assert_eq!(delivered["turn"]["reply"], "The slip lists one walnut board.", "{delivered}");
    assert_eq!(delivered["variables"]["slip"]["value"], "scratchpad/inputs/slip.txt", "{delivered}");
    let (_, transcript) = server.get("/v1/sessions/d1/transcript", Some(READER)).await;
    assert!(transcript.to_string().contains("1 x walnut board"), "{transcript}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_lists_each_workflow_with_its_triggers_inputs_and_decisions() {
    let server = upload_server().await;
    let (status, _) = server.get("/v1/workflows", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the catalog takes a read token");
    let (status, catalog) = server.get("/v1/workflows", Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{catalog}");
    let slugs: Vec<&str> =
        catalog["workflows"].as_array().expect("a list").iter().filter_map(|entry| entry["slug"].as_str()).collect();
    assert_eq!(slugs, ["expenses", "slips"]);
    let expenses = &catalog["workflows"][0];
    assert_eq!(expenses["title"], "Expenses");
    assert_eq!(expenses["start"], "/v1/workflows/expenses/sessions");
    let manual = &expenses["triggers"][0];
    assert_eq!(manual["id"], "manual");
    assert_eq!(manual["entry"], "intake");
    assert_eq!(manual["fileInputs"], json!(["receipt"]));
    assert_eq!(manual["inputs"]["required"], json!(["receipt", "amount"]));
    assert_eq!(manual["inputs"]["properties"]["receipt"]["x-archmax-type"], "file");
    assert_eq!(manual["inputs"]["properties"]["receipt"]["x-max-size"], 200);
    assert_eq!(manual["inputs"]["properties"]["amount"]["type"], "number");
    let approve = &expenses["humanStates"][0];
    assert_eq!(approve["state"], "approve");
    assert_eq!(approve["title"], "Approve the expense");
    assert_eq!(approve["approvers"], json!(["finance@example.com"]));
    assert_eq!(
        approve["transitions"],
        json!([
            { "to": "paid", "description": "Pay the expense.", "type": "approve" },
            { "to": "refused", "description": "Refuse the expense; the comment says why.", "type": "reject" },
        ])
    );
    let slips = &catalog["workflows"][1];
    let triggers: Vec<&str> =
        slips["triggers"].as_array().expect("triggers").iter().filter_map(|trigger| trigger["id"].as_str()).collect();
    assert_eq!(triggers, ["manual", "slip_sent"]);
    assert_eq!(slips["humanStates"], json!([]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_leaves_the_files_a_session_was_handed_as_they_were() {
    use archmax_vm::session::SessionStore;
    let store = Arc::new(MemoryStore::new());
    let server = upload_server_on(Arc::clone(&store)).await;
    let form = Form::new()
        .part(
            "request",
            request_part(json!({ "message": "My taxi.", "sessionId": "kept", "variables": { "amount": 42 } })),
        )
        .part("receipt", file_part("receipt.txt", RECEIPT));
    let (status, body) = server.upload("/v1/workflows/expenses/sessions?wait=60", STARTER, form).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "awaiting_decision", "{body}");
    let kept = || {
        let files = SessionStore::files(store.as_ref(), "kept").expect("files");
        files.read("scratchpad/inputs/receipt.txt").expect("the receipt")
    };
    assert_eq!(kept(), RECEIPT);

    // A delivery to a session waiting for a decision, and a start under its id: both
    // refused, and the receipt the approver decides on is the one it was handed.
    let swapped = || file_part("receipt.txt", b"Taxi to the airport, 4200.00 EUR.");
    let deliver = Form::new()
        .part("request", request_part(json!({ "trigger": "manual", "variables": { "amount": 4200 } })))
        .part("receipt", swapped());
    let (status, refused) = server.upload("/v1/sessions/kept/deliver?wait=60", STARTER, deliver).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let restart = Form::new()
        .part(
            "request",
            request_part(json!({ "message": "Again.", "sessionId": "kept", "variables": { "amount": 4200 } })),
        )
        .part("receipt", swapped());
    let (status, refused) = server.upload("/v1/workflows/expenses/sessions?wait=60", STARTER, restart).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(kept(), RECEIPT, "no refused request wrote a byte");
    server.stop().await;
}
