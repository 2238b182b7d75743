//! The inbox over HTTP: every form works without JavaScript, and its safety holds at the
//! protocol level (cookies, CSRF, approvers, escaping, the CSP header).

use reqwest::StatusCode;
use reqwest::header::COOKIE;
use serde_json::json;

use crate::{CARE, INTERN, LEAD, READER, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_keeps_the_token_in_a_strict_http_only_cookie_and_pages_carry_a_strict_csp() {
    let server = serve(false).await;
    server.start_payout("pay-1").await;
    let anonymous = server.get("/", None).await;
    assert_eq!((anonymous.status, anonymous.location()), (StatusCode::SEE_OTHER, "/sign-in"));

    let form = server.get("/sign-in", None).await;
    let csp = form.headers.get("content-security-policy").and_then(|value| value.to_str().ok()).unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("form-action 'self'"), "{csp}");
    let nonce = form.cookie("archmax_sign_in").expect("a sign-in cookie");
    let nonce = nonce.split(';').next().unwrap_or_default();
    let forged = server.post_form("/sign-in", None, &[("csrf", &form.csrf()), ("token", LEAD)]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "a sign-in without its cookie (another site's form)");
    assert!(forged.cookie("archmax_inbox").is_none());
    let wrong = server.post_form("/sign-in", Some(nonce), &[("csrf", &form.csrf()), ("token", "guess")]).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("does not accept this token"), "{}", wrong.body);
    assert!(wrong.cookie("archmax_inbox").is_none());

    let form = server.get("/sign-in", None).await;
    let nonce = form.cookie("archmax_sign_in").expect("a sign-in cookie");
    let nonce = nonce.split(';').next().unwrap_or_default();
    let signed = server.post_form("/sign-in", Some(nonce), &[("csrf", &form.csrf()), ("token", LEAD)]).await;
    let kept = signed.cookie("archmax_inbox").expect("the token cookie");
    assert!(kept.contains("HttpOnly") && kept.contains("SameSite=Strict") && kept.contains("Path=/"), "{kept}");
    assert!(!kept.contains(LEAD), "the cookie holds the token encoded, never as typed: {kept}");

    let cookie = kept.split(';').next().unwrap_or_default();
    let inbox = server.get("/", Some(cookie)).await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(inbox.body.contains("Signed in as <strong>refunds-lead@fernhill.example</strong>"), "{}", inbox.body);
    assert!(inbox.body.contains(r#"href="/sessions/pay-1""#) && inbox.body.contains("Assigned to you"));
    assert!(inbox.headers.get("content-security-policy").is_some());

    let out = server.post_form("/sign-out", Some(cookie), &[("csrf", &inbox.csrf())]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/sign-in"));
    assert!(out.cookie("archmax_inbox").is_some_and(|cleared| cleared.contains("Max-Age=0")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_without_the_right_csrf_token_or_from_another_site_is_refused_and_changes_nothing() {
    let server = serve(false).await;
    server.start_payout("pay-csrf").await;
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/pay-csrf", Some(&cookie)).await;
    let csrf = page.csrf();
    for fields in
        [vec![("session", "pay-csrf"), ("to", "done")], vec![("csrf", "00ff"), ("session", "pay-csrf"), ("to", "done")]]
    {
        let refused = server.post_form("/decide", Some(&cookie), &fields).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
        assert!(refused.body.contains("CSRF token is missing or wrong"), "{}", refused.body);
    }
    let other_site = server
        .client
        .post(format!("{}/decide", server.base))
        .header("cookie", &cookie)
        .header("origin", "https://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&session=pay-csrf&to=done"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(other_site.status(), StatusCode::FORBIDDEN);
    let said = other_site.text().await.expect("a page");
    assert!(said.contains("sent from another site") && !said.contains("CSRF token"), "the cause is named: {said}");
    // A sign-in posted from another site carries no form cookie (it is SameSite=Strict):
    // it is told what it is, not that its CSRF token is wrong.
    let foreign_sign_in = server
        .client
        .post(format!("{}/sign-in", server.base))
        .header("origin", "https://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=00&token=x")
        .send()
        .await
        .expect("an answer");
    assert_eq!(foreign_sign_in.status(), StatusCode::FORBIDDEN);
    let said = foreign_sign_in.text().await.expect("a page");
    assert!(said.contains("sent from another site"), "{said}");
    // A link with a malformed session id says what is wrong with the id, not that some
    // session called `session` is missing.
    let malformed = server.get("/sessions/a%5Cb", Some(&cookie)).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST, "{}", malformed.body);
    assert!(malformed.body.contains("Not a session id") && !malformed.body.contains("`session`"), "{}", malformed.body);
    // Another person's token does not fit this person's forms.
    let care = server.sign_in(CARE).await;
    let borrowed =
        server.post_form("/decide", Some(&care), &[("csrf", &csrf), ("session", "pay-csrf"), ("to", "done")]).await;
    assert_eq!(borrowed.status, StatusCode::FORBIDDEN);
    assert_eq!(server.show("pay-csrf").await["status"], "awaiting_decision", "nothing was decided");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_after_a_decision_links_the_next_one_waiting_for_that_person() {
    let server = serve(false).await;
    for id in ["pay-next-a", "pay-next-b"] {
        server.start_payout(id).await;
    }
    let lead = server.sign_in(LEAD).await;
    let decide = |id: &'static str| {
        let (server, lead) = (&server, &lead);
        async move {
            let page = server.get(&format!("/sessions/{id}"), Some(lead)).await;
            let fields = [("csrf", page.csrf()), ("session", id.to_string()), ("to", "done".to_string())];
            let fields: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (*key, value.as_str())).collect();
            let decided = server.post_form("/decide", Some(lead), &fields).await;
            assert_eq!(decided.status, StatusCode::SEE_OTHER, "{}", decided.body);
            server.get(decided.location(), Some(lead)).await.body
        }
    };
    let after_first = decide("pay-next-a").await;
    assert!(
        after_first.contains(
            r#"<a class="next" href="/sessions/pay-next-b">Next waiting for your decision: pay-next-b (payout)</a>"#
        ),
        "{after_first}"
    );
    let after_second = decide("pay-next-b").await;
    assert!(after_second.contains("Nothing else is waiting for your decision."), "{after_second}");
    assert!(!after_second.contains(r#"class="next""#), "{after_second}");
    // Someone who may not decide them is pointed at none.
    server.start_payout("pay-next-c").await;
    let intern = server.sign_in(INTERN).await;
    let shown = server.get("/sessions/pay-next-a?done=decided", Some(&intern)).await.body;
    assert!(shown.contains("Nothing else is waiting for your decision."), "{shown}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_approver_may_decide_and_the_decider_is_recorded_in_the_trail() {
    let server = serve(false).await;
    server.start_payout("pay-approvers").await;
    let intern = server.sign_in(INTERN).await;
    let page = server.get("/sessions/pay-approvers", Some(&intern)).await;
    assert!(page.body.contains("You are not among them."), "{}", page.body);
    let fields = [("csrf", page.csrf()), ("session", "pay-approvers".into()), ("to", "done".into())];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (*key, value.as_str())).collect();
    let refused = server.post_form("/decide", Some(&intern), &fields).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.body.contains("intern@fernhill.example"), "the page says who was refused: {}", refused.body);

    let reader = server.sign_in(READER).await;
    let page = server.get("/sessions/pay-approvers", Some(&reader)).await;
    assert!(page.body.contains("does not hold the decide scope"));
    let refused = server
        .post_form("/decide", Some(&reader), &[("csrf", &page.csrf()), ("session", "pay-approvers"), ("to", "done")])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let lead = server.sign_in(LEAD).await;
    let page = server.get("/sessions/pay-approvers", Some(&lead)).await;
    let decided = server
        .post_form(
            "/decide",
            Some(&lead),
            &[("csrf", &page.csrf()), ("session", "pay-approvers"), ("to", "done"), ("comment", "Matches invoice 7.")],
        )
        .await;
    assert_eq!((decided.status, decided.location()), (StatusCode::SEE_OTHER, "/sessions/pay-approvers?done=decided"));
    let shown = server.show("pay-approvers").await;
    assert_eq!(shown["status"], "completed", "{shown}");
    let human = shown["trail"].as_array().and_then(|trail| trail.iter().find(|step| step["kind"] == "human")).cloned();
    assert_eq!(human.map(|step| step["decidedBy"].clone()), Some(json!("refunds-lead@fernhill.example")));
    let after = server.get("/sessions/pay-approvers?done=decided", Some(&lead)).await;
    assert!(after.body.contains("Your decision was recorded."));
    assert!(after.body.contains(r#"<span class="decider">refunds-lead@fernhill.example</span>"#), "{}", after.body);
    // The decision's record in the transcript (the note the session reads) names the decider
    // and carries the comment.
    assert!(
        after.body.contains("Runtime note (decision)")
            && after.body.contains("refunds-lead@fernhill.example (a person)")
    );
    assert!(after.body.contains("Matches invoice 7."), "{}", after.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_on_a_page_showing_another_decision_record_decides_nothing() {
    let server = serve(false).await;
    server.start_payout("pay-stale").await;
    let lead = server.sign_in(LEAD).await;
    let page = server.get("/sessions/pay-stale", Some(&lead)).await;
    assert!(page.body.contains(r#"name="decision" value=""#), "the form names its record: {}", page.body);
    let fields =
        [("csrf", page.csrf()), ("session", "pay-stale".into()), ("to", "done".into()), ("decision", "999".into())];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (*key, value.as_str())).collect();
    let stale = server.post_form("/decide", Some(&lead), &fields).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert!(stale.body.contains("no longer the one waiting"), "{}", stale.body);
    assert_eq!(server.show("pay-stale").await["status"], "awaiting_decision", "nothing was decided");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_people_deciding_one_session_one_wins_and_the_other_sees_why() {
    let server = serve(false).await;
    server.start_payout("pay-race").await;
    let (lead, care) = (server.sign_in(LEAD).await, server.sign_in(CARE).await);
    let lead_csrf = server.get("/sessions/pay-race", Some(&lead)).await.csrf();
    let care_csrf = server.get("/sessions/pay-race", Some(&care)).await.csrf();
    let lead_fields = [("csrf", lead_csrf.as_str()), ("session", "pay-race"), ("to", "done")];
    let care_fields = [("csrf", care_csrf.as_str()), ("session", "pay-race"), ("to", "declined")];
    let (first, second) = tokio::join!(
        server.post_form("/decide", Some(&lead), &lead_fields),
        server.post_form("/decide", Some(&care), &care_fields),
    );
    let mut statuses = [first.status, second.status];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::SEE_OTHER, StatusCode::CONFLICT], "{} / {}", first.body, second.body);
    let loser = if first.status == StatusCode::CONFLICT { &first } else { &second };
    assert!(
        loser.body.contains("no longer waiting for a decision")
            || loser.body.contains("Another turn of this session is running"),
        "the one who lost is told why: {}",
        loser.body
    );
    // Once it settled, a late decision names who decided.
    let shown = server.show("pay-race").await;
    let decider = shown["trail"]
        .as_array()
        .and_then(|trail| trail.iter().find(|step| step["kind"] == "human"))
        .and_then(|step| step["decidedBy"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(["refunds-lead@fernhill.example", "care-team@fernhill.example"].contains(&decider.as_str()), "{shown}");
    let late = server
        .post_form("/decide", Some(&care), &[("csrf", &care_csrf), ("session", "pay-race"), ("to", "done")])
        .await;
    assert_eq!(late.status, StatusCode::CONFLICT);
    assert!(late.body.contains(&format!("{decider} decided it")), "{}", late.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_model_and_tools_wrote_is_escaped_and_evidence_is_shown_by_kind() {
    let server = serve(false).await;
    server.start_payout("pay-xss").await;
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/pay-xss", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert_eq!(body.matches("<script").count(), 1, "only the page's own script tag: {body}");
    assert!(body.contains(r#"<script src="/assets/inbox.js" defer></script>"#));
    assert_eq!(body.matches("<img").count(), 1, "only the chart; the model's image tag is text: {body}");
    assert!(body.contains("&lt;img src=\"x\" onerror="), "{body}");
    assert!(body.contains("&lt;script&gt;window.pwned = 1&lt;/script&gt;"), "{body}");
    assert!(!body.to_ascii_lowercase().contains("javascript:"), "{body}");
    // The memo is Markdown (a table, bold), the facts JSON pretty-printed.
    assert!(
        body.contains("<h1>Payout memo</h1>") && body.contains("<strong>7</strong>") && body.contains("<table>"),
        "{body}"
    );
    assert!(body.contains("&quot;payee&quot;: &quot;Acme &lt;b&gt;Ltd&lt;/b&gt;&quot;"), "{body}");
    // Each tool call's verdict: the call the kernel refused says so.
    assert!(
        body.contains(
            "Result of <code>wire_money</code> <span class=\"verdict\" data-verdict=\"refused\">refused</span>"
        ),
        "{body}"
    );
    assert!(body.contains("Result of <code>write_file</code> <span class=\"verdict\" data-verdict=\"ok\">ok</span>"));
    // An image the decision names is shown from the evidence route, sandboxed.
    let src = "/evidence?session=pay-xss&amp;path=scratchpad%2Fchart.png";
    assert!(
        body.contains(&format!(r#"<img class="evidence" src="{src}" alt="Evidence image scratchpad/chart.png">"#)),
        "{body}"
    );
    let image = server.get(&src.replace("&amp;", "&"), Some(&cookie)).await;
    assert_eq!(image.status, StatusCode::OK);
    assert_eq!(image.headers["content-type"], "image/png");
    assert_eq!(image.headers["content-security-policy"], "default-src 'none'; sandbox");
    assert_eq!(server.get(&src.replace("&amp;", "&"), None).await.status, StatusCode::SEE_OTHER, "signed in only");
    // Evidence is served as an image only when the decision names it and it is one.
    for path in ["scratchpad/memo.md", "scratchpad/other.png", "../sessions/pay-xss/scratchpad/memo.md"] {
        let served =
            server.get(&format!("/evidence?session=pay-xss&path={}", crate::encode(path)), Some(&cookie)).await;
        assert_eq!(served.status, StatusCode::NOT_FOUND, "{path}");
    }
    // The graph shows the current state.
    assert!(body.contains(r#"<g class="node current visited human" data-state="review">"#), "{body}");
    // One button per transition, with its description.
    assert!(body.contains(r#"name="to" value="done""#) && body.contains(r#"name="to" value="declined""#));
    assert!(body.contains("Pay it.") && body.contains("Turn it down."));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_filters_by_workflow_state_and_approver_and_lists_waiting_sessions_apart() {
    let server = serve(false).await;
    server.start_payout("pay-a").await;
    server.start_refund("refund-a").await;
    let waiting = server.start("payment", "wait-a", json!({ "message": "Tell me when it is paid." })).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let cookie = server.sign_in(INTERN).await;
    let all = server.get("/", Some(&cookie)).await.body;
    assert!(all.contains("Awaiting a decision <span class=\"count\">(2)</span>"), "{all}");
    assert!(
        all.contains("Awaiting input <span class=\"count\">(1)</span>") && all.contains("the payment has not arrived")
    );
    assert!(!all.contains("Assigned to you"), "the intern is nobody's approver");
    let payouts = server.get("/?workflow=payout", Some(&cookie)).await.body;
    assert!(payouts.contains("/sessions/pay-a") && !payouts.contains("/sessions/refund-a"), "{payouts}");
    let reviews = server.get("/?state=review&order=oldest", Some(&cookie)).await.body;
    assert!(reviews.contains("/sessions/pay-a") && reviews.contains("/sessions/refund-a"));
    assert!(reviews.contains(r#"<option value="oldest" selected>"#));
    let mine = server.get("/?mine=1", Some(&cookie)).await.body;
    assert!(mine.contains("No session is waiting for a decision."), "{mine}");
    let lead = server.sign_in(LEAD).await;
    let mine = server.get("/?mine=1", Some(&lead)).await.body;
    assert!(mine.contains("/sessions/pay-a") && mine.contains("/sessions/refund-a"), "{mine}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_stream_refuses_a_last_event_id_that_is_not_one() {
    // Before, a malformed id read as none, and the page's stream started over from its
    // first event: it is refused as the API's stream refuses it.
    let server = serve(false).await;
    server.start_payout("pay-stream").await;
    let cookie = server.sign_in(LEAD).await;
    for garbage in ["-4", "soon", "99999999999999999999"] {
        let refused = server
            .client
            .get(format!("{}/live/pay-stream?after=1", server.base))
            .header(COOKIE, &cookie)
            .header("last-event-id", garbage)
            .send()
            .await
            .expect("an answer");
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "Last-Event-ID {garbage}");
        let said = refused.text().await.expect("a body");
        assert!(said.contains("Last-Event-ID"), "the header is named: {said}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_a_turn_that_keeps_the_park_and_a_delivery_is_typed_by_the_trigger_schema() {
    let server = serve(false).await;
    server.start_payout("pay-reply").await;
    let cookie = server.sign_in(LEAD).await;
    let csrf = server.get("/sessions/pay-reply", Some(&cookie)).await.csrf();
    let replied = server
        .post_form("/reply", Some(&cookie), &[("csrf", &csrf), ("session", "pay-reply"), ("message", "Any news?")])
        .await;
    assert_eq!(replied.status, StatusCode::SEE_OTHER, "{}", replied.body);
    let page = server.get("/sessions/pay-reply", Some(&cookie)).await.body;
    assert!(page.contains("Finance has your message and will decide soon."), "{page}");
    assert_eq!(server.show("pay-reply").await["status"], "awaiting_decision");
    // A delivery to a session that waits for a decision is refused for what it is: the
    // session is not waiting for input (it still waits for a decision).
    let misdelivered = server
        .post_form("/deliver", Some(&cookie), &[("csrf", &csrf), ("session", "pay-reply"), ("trigger", "paid")])
        .await;
    assert_eq!(misdelivered.status, StatusCode::CONFLICT, "{}", misdelivered.body);
    assert!(misdelivered.body.contains("not waiting for input"), "{}", misdelivered.body);
    assert!(!misdelivered.body.contains("no longer waiting for a decision"), "{}", misdelivered.body);
    // A body no browser sends: refused as it is, not taken with its bytes replaced.
    let garbled = format!("csrf={csrf}&session=pay-reply&message=%ff%fe");
    let refused = server.post_encoded("/reply", Some(&cookie), garbled.into_bytes()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(refused.body.contains("malformed"), "{}", refused.body);
    // A form past the inbox's 8 KiB: the inbox's page, saying so, not the size layer's text.
    let long = "x".repeat(9 * 1024);
    let refused = server
        .post_form("/reply", Some(&cookie), &[("csrf", &csrf), ("session", "pay-reply"), ("message", &long)])
        .await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", refused.body);
    assert!(refused.body.contains("larger than the inbox takes (8 KiB"), "{}", refused.body);
    let transcript = server.show("pay-reply").await.to_string();
    assert!(!transcript.contains('\u{fffd}'), "nothing garbled was kept: {transcript}");

    server.start("payment", "wait-typed", json!({ "message": "Tell me when it is paid." })).await;
    let page = server.get("/sessions/wait-typed", Some(&cookie)).await;
    let form = &page.body;
    assert!(
        form.contains(r#"<input id="paid-amount" name="field.amount" type="number" step="any" min="0" required"#),
        "{form}"
    );
    assert!(form.contains(r#"<select id="paid-currency" name="field.currency" required"#), "{form}");
    assert!(form.contains(r#"type="date""#) && form.contains("Euros received."));
    let refused = server
        .post_form(
            "/deliver",
            Some(&cookie),
            &[("csrf", &page.csrf()), ("session", "wait-typed"), ("trigger", "paid"), ("field.amount", "lots")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        refused.body.contains("amount") && refused.body.contains("currency"),
        "every field problem: {}",
        refused.body
    );
    let delivered = server
        .post_form(
            "/deliver",
            Some(&cookie),
            &[
                ("csrf", &page.csrf()),
                ("session", "wait-typed"),
                ("trigger", "paid"),
                ("field.amount", "40.5"),
                ("field.currency", "EUR"),
                ("field.paid_on", "2025-03-07"),
            ],
        )
        .await;
    assert_eq!(delivered.status, StatusCode::SEE_OTHER, "{}", delivered.body);
    let shown = server.show("wait-typed").await;
    assert_eq!(shown["status"], "completed", "{shown}");
    assert_eq!(shown["variables"]["amount"]["value"], json!(40.5));
    assert_eq!(shown["variables"]["currency"]["value"], json!("EUR"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_configured_token_the_inbox_serves_no_one() {
    let server = serve(true).await;
    let page = server.get("/", None).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(page.body.contains("The inbox needs a token"), "{}", page.body);
    assert_eq!(server.get("/sign-in", None).await.status, StatusCode::FORBIDDEN);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deliver_form_with_a_file_input_uploads_the_file_chosen_and_refuses_one_that_does_not_fit() {
    let server = serve(false).await;
    let start = json!({ "message": "I will send the slip.", "variables": { "order_id": "ORD-7" } });
    let waiting = server.start("slips", "slip-1", start).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/slip-1", Some(&cookie)).await;
    let form = &page.body;
    assert!(form.contains(r#"enctype="multipart/form-data""#), "a form with a file control uploads: {form}");
    assert!(
        form.contains(r#"<input id="slip_sent-slip" name="field.slip" type="file" accept=".txt" required"#),
        "{form}"
    );
    assert!(!form.contains("deliver this trigger through the API"), "{form}");
    assert!(
        !form.contains(r#"aria-label="Deliver manual""#),
        "the start's trigger, whose every input the session holds locked, gets no form: {form}"
    );
    assert!(form.contains("Nothing delivers anything here when it is due"), "a due session says what happens: {form}");
    let send = |slip: reqwest::multipart::Part| {
        let form = reqwest::multipart::Form::new()
            .text("csrf", page.csrf())
            .text("session", "slip-1")
            .text("trigger", "slip_sent")
            .text("field.note", "Here it is.")
            .part("field.slip", slip);
        server.client.post(format!("{}/deliver", server.base)).header(reqwest::header::COOKIE, &cookie).multipart(form)
    };
    let slip = |name: &str, bytes: &[u8]| reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(name.to_string());

    let refused = send(slip("slip.pdf", b"1 x walnut board")).send().await.expect("answers");
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body = refused.text().await.unwrap_or_default();
    assert!(body.contains("it accepts .txt"), "the runtime's own words: {body}");
    assert_eq!(server.show("slip-1").await["status"], "awaiting_input", "nothing was delivered");

    let delivered = send(slip("Packing Slip.TXT", b"1 x walnut board")).send().await.expect("answers");
    assert_eq!(delivered.status(), StatusCode::SEE_OTHER);
    let shown = server.show("slip-1").await;
    assert_eq!(shown["status"], "completed", "{shown}");
    assert_eq!(shown["variables"]["slip"]["value"], "scratchpad/inputs/slip.txt", "{shown}");
    assert_eq!(shown["variables"]["note"]["value"], "Here it is.", "{shown}");
    let page = server.get("/sessions/slip-1", Some(&cookie)).await.body;
    assert!(page.contains("The slip lists one walnut board."), "{page}");
    // The row still reads as the start's inputs: the delivery's locked values (`note`,
    // `slip`) do not push the order out of it.
    let listed = server.get("/?view=all&q=slip-1", Some(&cookie)).await.body;
    assert!(listed.contains(r#"<span class="key">order_id: </span>ORD-7"#), "{listed}");
    assert!(!listed.contains(r#"<span class="key">note: </span>"#), "{listed}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_decisions_read_as_the_work_they_are() {
    let server = serve(false).await;
    server.start_refund("refund-rows").await;
    let cookie = server.sign_in(LEAD).await;
    let inbox = server.get("/", Some(&cookie)).await.body;
    // The row: the request's first words as the link, its locked inputs, its id.
    assert!(
        inbox.contains(
            r#"<a href="/sessions/refund-rows">Refund request from Jonas Weber for ORD-1042: two bowls from the stoneware set arrived cr…</a>"#
        ),
        "{inbox}"
    );
    assert!(inbox.contains(r#"<span class="key">customer_email: </span>jonas.weber@example.net"#), "{inbox}");
    assert!(inbox.contains(r#"<span class="key">order_id: </span>ORD-1042"#), "{inbox}");
    assert!(inbox.contains(r#"<p class="session-id"><code>refund-rows</code></p>"#), "{inbox}");

    let page = server.get("/sessions/refund-rows", Some(&cookie)).await;
    let body = &page.body;
    // Buttons say what the decision does; the state it leads to is small beside it.
    assert!(
        body.contains(r#"Approve the decision and the reply as drafted. <span class="slug">→ review-email</span>"#),
        "{body}"
    );
    // The refine transition's description asks for a comment: the box says so.
    assert!(body.contains("Comment (required to move to decide-refund; optional otherwise)"), "{body}");
    // Values, not JSON; instants for the viewer's time zone; a legend and labelled edges.
    assert!(body.contains(r#"<span class="value">ORD-1042</span>"#), "{body}");
    assert!(body.contains(r#"<time datetime=""#), "{body}");
    assert!(body.contains(r#"<ul class="legend""#) && body.contains(r#"class="edge-label""#), "{body}");
    assert!(body.contains(">refine</text>"), "a decision's edge is labelled with its type: {body}");

    let refused = server
        .post_form(
            "/decide",
            Some(&cookie),
            &[("csrf", &page.csrf()), ("session", "refund-rows"), ("to", "decide-refund"), ("comment", "  ")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(refused.body.contains("Moving to decide-refund needs a comment"), "{}", refused.body);
    assert_eq!(server.show("refund-rows").await["status"], "awaiting_decision", "nothing was decided");
    server.stop().await;
}

/// The link of the anchor with `rel` on `page`, as a path to request.
fn rel_link(page: &str, rel: &str) -> Option<String> {
    let marker = format!(r#"rel="{rel}" href=""#);
    let start = page.find(&marker)? + marker.len();
    page[start..].split('"').next().map(|href| href.replace("&amp;", "&"))
}

/// Decides `session` as the holder of `cookie`, to `to`.
async fn decide(server: &crate::Running, cookie: &str, session: &str, to: &str) {
    let page = server.get(&format!("/sessions/{session}"), Some(cookie)).await;
    let fields = [("csrf", page.csrf()), ("session", session.to_string()), ("to", to.to_string())];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (*key, value.as_str())).collect();
    let decided = server.post_form("/decide", Some(cookie), &fields).await;
    assert_eq!(decided.status, StatusCode::SEE_OTHER, "{}", decided.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_view_lists_its_sessions_and_all_sessions_shows_each_status() {
    let server = serve(false).await;
    server.start_payout("pay-open").await;
    server.start_payout("pay-done").await;
    let waiting = server.start("payment", "wait-v", json!({ "message": "Tell me when it is paid." })).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let lead = server.sign_in(LEAD).await;
    decide(&server, &lead, "pay-done", "done").await;

    let decisions = server.get("/?view=decisions", Some(&lead)).await;
    assert_eq!(decisions.status, StatusCode::OK);
    let body = &decisions.body;
    assert!(body.contains(r#"<a href="/?view=decisions" aria-current="page">Awaiting decision</a>"#), "{body}");
    assert!(body.contains("/sessions/pay-open") && !body.contains("/sessions/pay-done"), "{body}");
    assert!(!body.contains("/sessions/wait-v") && !body.contains("Awaiting input <span"), "{body}");
    assert!(body.contains(r#"<input type="hidden" name="view" value="decisions">"#), "the filters keep the view");

    let inputs = server.get("/?view=inputs", Some(&lead)).await.body;
    assert!(inputs.contains("/sessions/wait-v") && !inputs.contains("/sessions/pay-open"), "{inputs}");
    assert!(inputs.contains("Awaiting input <span class=\"count\">(1)</span>"), "{inputs}");

    let all = server.get("/?view=all", Some(&lead)).await.body;
    for (session, status) in
        [("pay-open", "awaiting_decision"), ("pay-done", "completed"), ("wait-v", "awaiting_input")]
    {
        let row = all.split(&format!(r#"<tr data-session="{session}">"#)).nth(1).unwrap_or_default();
        let row = row.split("</tr>").next().unwrap_or_default();
        assert!(row.contains(&format!(r#"data-status="{status}">{status}</span>"#)), "{session}: {row}");
    }
    // A view's tabs keep its filters and start from the first page.
    let filtered = server.get("/?view=all&workflow=payout&after=pay-a&back=", Some(&lead)).await.body;
    assert!(filtered.contains(r#"href="/?view=decided&amp;workflow=payout""#), "{filtered}");
    assert!(filtered.contains("/sessions/pay-done") && !filtered.contains("/sessions/wait-v"), "{filtered}");
    // The default view is both queues, as before.
    let waiting = server.get("/", Some(&lead)).await.body;
    assert!(waiting.contains(r#"<a href="/" aria-current="page">Waiting</a>"#), "{waiting}");
    assert!(waiting.contains("/sessions/pay-open") && waiting.contains("/sessions/wait-v"));
    assert!(!waiting.contains("/sessions/pay-done"), "{waiting}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decided_session_shows_under_decided_by_me_for_the_decider_only() {
    let server = serve(false).await;
    server.start_payout("pay-decided").await;
    server.start_payout("pay-pending").await;
    let (lead, care) = (server.sign_in(LEAD).await, server.sign_in(CARE).await);
    let before = server.get("/?view=decided", Some(&lead)).await.body;
    assert!(before.contains("No session shows a decision of yours."), "{before}");
    decide(&server, &lead, "pay-decided", "done").await;

    let mine = server.get("/?view=decided", Some(&lead)).await.body;
    assert!(mine.contains("/sessions/pay-decided") && !mine.contains("/sessions/pay-pending"), "{mine}");
    assert!(mine.contains("Decided by you <span class=\"count\">(1)</span>"), "{mine}");
    assert!(mine.contains(r#"data-status="completed""#), "{mine}");
    for other in [care, server.sign_in(INTERN).await] {
        let theirs = server.get("/?view=decided", Some(&other)).await.body;
        assert!(!theirs.contains("/sessions/pay-decided"), "only the decider sees it: {theirs}");
        assert!(theirs.contains("No session shows a decision of yours."), "{theirs}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_matches_what_a_row_shows_case_aside_and_a_hostile_query_stays_text() {
    let server = serve(false).await;
    server.start_refund("refund-s").await;
    server.start_payout("pay-s").await;
    let cookie = server.sign_in(LEAD).await;
    for (query, found, not_found) in [
        ("jONAS", "refund-s", "pay-s"),    // the headline
        ("ord-1042", "refund-s", "pay-s"), // a summary value
        ("PAY-S", "pay-s", "refund-s"),    // the session id
        ("Pay%20invoice", "pay-s", "refund-s"),
    ] {
        let page = server.get(&format!("/?view=all&q={query}"), Some(&cookie)).await.body;
        let (found, not_found) = (format!("/sessions/{found}\""), format!("/sessions/{not_found}\""));
        assert!(page.contains(&found) && !page.contains(&not_found), "{query}: {page}");
    }
    let nothing = server.get("/?q=no-such-thing", Some(&cookie)).await.body;
    assert!(nothing.contains("No session is waiting for a decision."), "{nothing}");

    let hostile = r#""><script>alert(1)</script><img src=x onerror=alert(2)>"#;
    let page = server.get(&format!("/?view=all&q={}", crate::encode(hostile)), Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert_eq!(body.matches("<script").count(), 1, "only the page's own script: {body}");
    assert!(!body.contains("<img"), "{body}");
    assert!(
        body.contains(r#"value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;""#),
        "the search box shows the query as typed: {body}"
    );
    assert!(body.contains("q=%22%3E%3Cscript%3Ealert%281%29"), "links carry it encoded: {body}");
    assert!(page.headers.get("content-security-policy").is_some());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_go_on_after_the_last_session_and_back_to_the_ones_before() {
    let server = serve(false).await;
    for index in 1..=5 {
        server.start_payout(&format!("pay-p{index}")).await;
    }
    let waiting = server.start("payment", "wait-p", json!({ "message": "Tell me when it is paid." })).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let cookie = server.sign_in(LEAD).await;
    let shown = |page: &str| -> Vec<String> {
        (1..=5).map(|index| format!("pay-p{index}")).filter(|id| page.contains(&format!("/sessions/{id}\""))).collect()
    };
    // Served by the store's own filter (awaiting a decision), two at a time.
    let first = server.get("/?view=decisions&size=2", Some(&cookie)).await.body;
    assert_eq!(shown(&first), ["pay-p1", "pay-p2"], "{first}");
    assert!(first.contains("(2 on this page)") && rel_link(&first, "prev").is_none(), "{first}");
    let next = rel_link(&first, "next").expect("a next page");
    assert_eq!(next, "/?view=decisions&size=2&after=pay-p2&back=");
    let second = server.get(&next, Some(&cookie)).await.body;
    assert_eq!(shown(&second), ["pay-p3", "pay-p4"], "{second}");
    let third = server.get(&rel_link(&second, "next").expect("a third page"), Some(&cookie)).await.body;
    assert_eq!(shown(&third), ["pay-p5"], "{third}");
    assert!(rel_link(&third, "next").is_none() && !third.contains("/sessions/wait-p"), "{third}");
    let back = server.get(&rel_link(&third, "prev").expect("a previous page"), Some(&cookie)).await.body;
    assert_eq!(shown(&back), ["pay-p3", "pay-p4"], "{back}");
    let start = server.get(&rel_link(&back, "prev").expect("the first page"), Some(&cookie)).await.body;
    assert_eq!(shown(&start), ["pay-p1", "pay-p2"], "{start}");

    // Filtered in memory (a search), the pages go on the same way.
    let found = server.get("/?q=PAY-P&size=3&order=oldest", Some(&cookie)).await.body;
    assert_eq!(shown(&found), ["pay-p1", "pay-p2", "pay-p3"], "{found}");
    let rest = server.get(&rel_link(&found, "next").expect("a next page"), Some(&cookie)).await.body;
    assert_eq!(shown(&rest), ["pay-p4", "pay-p5"], "{rest}");
    assert!(rel_link(&rest, "next").is_none(), "{rest}");
    assert!(rel_link(&rest, "prev").is_some_and(|previous| previous.contains("order=oldest")), "{rest}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_session_says_why_it_ended() {
    let server = serve(false).await;
    let response = server
        .client
        .post(format!("{}/v1/workflows/untaped/sessions?wait=60", server.base))
        .bearer_auth(crate::ADMIN)
        .json(&json!({ "message": "Anything?", "sessionId": "failed-1" }))
        .send()
        .await
        .expect("answers");
    let _ = response.text().await;
    let shown = server.show("failed-1").await;
    assert_eq!(shown["status"], "failed", "{shown}");
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/failed-1", Some(&cookie)).await.body;
    assert!(page.contains(r#"<dt>Why it ended</dt><dd data-field="exit"><code>"#), "{page}");
    assert!(page.contains(" in stuck: "), "{page}");
    server.stop().await;
}
