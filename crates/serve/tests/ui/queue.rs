//! The inbox as a work queue, over HTTP: a decided session keeps the record it was
//! decided on, and an object input with a declared shape is a fieldset whose controls
//! the server assembles (no JavaScript anywhere).

use reqwest::StatusCode;
use serde_json::json;

use crate::{LEAD, serve};

/// The part of `page` from `marker` on (empty when it is not there).
fn from<'a>(page: &'a str, marker: &str) -> &'a str {
    page.find(marker).map_or("", |at| &page[at..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decided_session_keeps_the_record_it_was_decided_on_after_it_moves_on() {
    let server = serve(false).await;
    server.start_refund("refund-kept").await;
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/refund-kept", Some(&cookie)).await;
    assert!(!page.body.contains("Decisions made"), "nothing decided yet");
    let fields = [
        ("csrf", page.csrf()),
        ("session", "refund-kept".to_string()),
        ("to", "review-email".to_string()),
        ("comment", "The photos match the <claim>.".to_string()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (*key, value.as_str())).collect();
    let decided = server.post_form("/decide", Some(&cookie), &fields).await;
    assert_eq!(decided.status, StatusCode::SEE_OTHER, "{}", decided.body);
    assert_eq!(server.show("refund-kept").await["status"], "completed", "it went on past the decision");
    // A later state rewrites the memo the approver read.
    server.write_file("refund-kept", "scratchpad/refund.md", b"# Refund memo\n\nRefund 9999.00 EUR.\n");
    server.clock.advance(3600);

    let page = server.get("/sessions/refund-kept", Some(&cookie)).await.body;
    let record = from(&page, r#"data-region="decisions""#);
    let record = &record[..record.find("</section>").unwrap_or(record.len())];
    assert!(!record.is_empty(), "a completed session lists its decisions: {page}");
    assert!(record.contains("<h2 id=\"decisions-heading\">Decisions made</h2>"), "{record}");
    assert!(record.contains(r#"<span class="who">refunds-lead@fernhill.example</span>"#), "{record}");
    assert!(
        record.contains(r#"<strong class="choice">Approve the decision and the reply as drafted.</strong> <span class="slug">→ review-email</span>"#),
        "the transition with its description: {record}"
    );
    assert!(record.contains(r#"<time datetime="2025-03-08T12:00:"#), "when, as a time element: {record}");
    assert!(record.contains("The photos match the &lt;claim&gt;."), "the comment, escaped: {record}");
    assert!(record.contains("Read the memo"), "the instructions as shown: {record}");
    assert!(record.contains("64.00 EUR") && !record.contains("9999.00"), "the evidence as it was: {record}");
    assert!(record.contains("SHA-256"), "{record}");
    // The API shows the same record.
    let shown = server.show("refund-kept").await;
    let trail = shown["trail"].as_array().cloned().unwrap_or_default();
    let human = trail.iter().find(|step| step["kind"] == "human").cloned().unwrap_or_default();
    assert_eq!(human["decision"]["choice"]["to"], "review-email", "{shown}");
    assert!(human["decision"]["evidence"][0]["text"].as_str().unwrap_or_default().contains("64.00 EUR"), "{human}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shaped_object_input_is_a_fieldset_whose_controls_become_the_object() {
    let running = serve(false).await;
    shaped_object_input(&running).await;
    running.stop().await;
}

async fn shaped_object_input(server: &crate::Running) {
    let waiting = server.start("claims", "claim-1", json!({ "message": "I will file my claim." })).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/claim-1", Some(&cookie)).await;
    let form = from(&page.body, r#"aria-label="Deliver filed""#);
    assert!(form.contains(r#"<fieldset class="object" data-path="claim"><legend>claim"#), "{form}");
    assert!(
        form.contains(r#"<label for="filed-claim-amount">Amount (EUR) <span class="required">(required)</span>"#),
        "{form}"
    );
    assert!(
        form.contains(r#"id="filed-claim-amount" name="field.claim.amount" type="number" step="any" required"#),
        "{form}"
    );
    assert!(form.contains(r#"<select id="filed-claim-kind" name="field.claim.kind" required"#), "{form}");
    assert!(form.contains(r#"id="filed-claim-spent_on" name="field.claim.spent_on" type="date""#), "{form}");
    assert!(form.contains(r#"id="filed-claim-reimbursed" name="field.claim.reimbursed" type="checkbox""#), "{form}");
    assert!(form.contains(r#"<legend>vendor</legend>"#), "{form}");
    assert!(
        form.contains(r#"name="field.claim.vendor.name" type="text">"#),
        "a field required in an optional object is not required of the browser: {form}"
    );
    assert!(
        form.contains("[inbox.workflows.claims.fields.receipt]"),
        "an object without a shape says how to get one: {form}"
    );

    let (cookie, csrf) = (&cookie, page.csrf());
    let deliver = |pairs: Vec<(&'static str, &'static str)>| {
        let mut fields =
            vec![("csrf", csrf.clone()), ("session", "claim-1".to_string()), ("trigger", "filed".to_string())];
        fields.extend(pairs.into_iter().map(|(key, value)| (key, value.to_string())));
        async move {
            let fields: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (*key, value.as_str())).collect();
            server.post_form("/deliver", Some(cookie), &fields).await
        }
    };
    let refused = deliver(vec![
        ("field.claim.amount", "twelve"),
        ("field.claim.kind", "meal"),
        ("field.claim.vendor.name", ""),
        ("field.claim.vendor.country", "DE"),
        ("field.receipt", "{}"),
    ])
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        refused.body.contains("'claim.amount' must be a number; 'claim.vendor.name' is required"),
        "each problem by its path: {}",
        refused.body
    );
    assert_eq!(server.show("claim-1").await["status"], "awaiting_input", "nothing was delivered");

    let delivered = deliver(vec![
        ("field.claim.amount", "42.5"),
        ("field.claim.kind", "travel"),
        ("field.claim.spent_on", "2025-03-07"),
        ("field.claim.reimbursed", "true"),
        ("field.claim.tags", "train\r\nberlin\r\n"),
        ("field.claim.vendor.name", "Deutsche Bahn"),
        ("field.receipt", r#"{"number": "R-7"}"#),
    ])
    .await;
    assert_eq!(delivered.status, StatusCode::SEE_OTHER, "{}", delivered.body);
    let shown = server.show("claim-1").await;
    assert_eq!(shown["status"], "completed", "{shown}");
    assert_eq!(
        shown["variables"]["claim"]["value"],
        json!({
            "amount": 42.5, "kind": "travel", "spent_on": "2025-03-07", "reimbursed": true,
            "tags": ["train", "berlin"], "vendor": { "name": "Deutsche Bahn" },
        })
    );
    assert_eq!(shown["variables"]["receipt"]["value"], json!({ "number": "R-7" }));
}

#[test]
fn a_shape_for_an_input_the_workflow_does_not_take_as_an_object_is_refused_by_name() {
    let own = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/workspace");
    let programs = vec![crate::compiled(&own)];
    let text = "[inbox.workflows.claims.fields.clam]\nfields = [{ name = \"a\", type = \"string\" }]\n\
                [inbox.workflows.payment.fields.amount]\nfields = [{ name = \"a\", type = \"string\" }]\n\
                [inbox.workflows.elsewhere.fields.x]\nfields = [{ name = \"a\", type = \"string\" }]\n";
    let (settings, problems) =
        archmax_config::settings::parse_runner_settings(archmax_program::source::FileId(0), text);
    assert!(problems.is_empty(), "{problems:?}");
    let problems = archmax_serve::inbox::field_shape_problems(&programs, &settings.inbox);
    assert_eq!(problems.len(), 2, "a workflow this server does not serve is not checked: {problems:?}");
    assert!(
        problems[0]
            .starts_with("archmax.toml `[inbox.workflows.claims.fields.clam]` names no input of workflow `claims`")
            && problems[0].contains("`claim`"),
        "{problems:?}"
    );
    assert!(problems[1].contains("shapes the input `amount`, which is typed `number`"), "{problems:?}");
    let (good, _) =
        archmax_config::settings::parse_runner_settings(archmax_program::source::FileId(0), crate::SETTINGS);
    assert_eq!(archmax_serve::inbox::field_shape_problems(&programs, &good.inbox), Vec::<String>::new());
}
