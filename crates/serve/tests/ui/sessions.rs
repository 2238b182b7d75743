//! Inbox sessions kept in the session store: the cookie holds an opaque id whose record
//! any runner on the store reads, signing out or revoking the token ends it, sign-in is
//! throttled, and a form's sender is checked before its body is read.

use std::time::Duration;

use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use archmax_serve::auth::Auth;

use crate::{ADMIN, LEAD, READER, Running, STARTER, serve, serve_beside, tokens_file, tokens_file_without};

/// The sign-in form of `from`: its CSRF token and the cookie it is bound to.
async fn sign_in_form(from: &Running) -> (String, String) {
    let form = from.get("/sign-in", None).await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    let cookie = form.cookie("archmax_sign_in").expect("a sign-in cookie");
    (form.csrf(), cookie.split(';').next().unwrap_or_default().to_string())
}

/// Posts the sign-in form of `from` to `to` with `token`.
async fn sign_in_across(from: &Running, to: &Running, token: &str) -> crate::Page {
    let (csrf, cookie) = sign_in_form(from).await;
    to.post_form("/sign-in", Some(&cookie), &[("csrf", &csrf), ("token", token)]).await
}

fn session_cookie(page: &crate::Page) -> String {
    let cookie = page.cookie("archmax_inbox").expect("the session cookie");
    cookie.split(';').next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_signing_out_the_old_cookie_is_refused_and_its_forms_change_nothing() {
    let server = serve(false).await;
    server.start_payout("pay-signed-out").await;
    let cookie = server.sign_in(LEAD).await;
    let page = server.get("/sessions/pay-signed-out", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let csrf = page.csrf();
    let out = server.post_form("/sign-out", Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", out.body);

    // The browser's copy of the cookie, sent again (as a stolen copy would be).
    let again = server.get("/", Some(&cookie)).await;
    assert_eq!((again.status, again.location()), (StatusCode::SEE_OTHER, "/sign-in"), "signed out: {}", again.body);
    let decided = server
        .post_form("/decide", Some(&cookie), &[("csrf", &csrf), ("session", "pay-signed-out"), ("to", "done")])
        .await;
    assert_eq!((decided.status, decided.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", decided.body);
    assert_eq!(server.show("pay-signed-out").await["status"], "awaiting_decision", "nothing was decided");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_token_ends_its_inbox_session_for_good() {
    let server = serve(false).await;
    let cookie = server.sign_in(LEAD).await;
    assert_eq!(server.get("/", Some(&cookie)).await.status, StatusCode::OK);
    let revoked = Auth::configure(Some(ADMIN), Some(&tokens_file_without(&[LEAD]))).expect("tokens");
    server.server.auth.replace(revoked).expect("reloaded");
    let refused = server.get("/", Some(&cookie)).await;
    assert_eq!((refused.status, refused.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", refused.body);
    // Giving the token back does not revive the session it ended.
    server.server.auth.replace(Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens")).expect("reloaded");
    let still = server.get("/", Some(&cookie)).await;
    assert_eq!((still.status, still.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", still.body);
    assert!(server.get("/", Some(&server.sign_in(LEAD).await)).await.status == StatusCode::OK, "a new sign-in works");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_and_its_forms_work_on_every_runner_on_the_store_and_signing_out_ends_it_on_all() {
    let first = serve(false).await;
    first.start_payout("pay-shared").await;
    let second = serve_beside(&first).await;
    one_inbox_on_two_runners(first, second).await;
}

#[test]
fn a_sign_in_and_its_forms_work_on_every_runner_of_a_postgres_fleet_and_signing_out_ends_it_on_all() {
    let cluster = archmax_store_postgres::test_cluster::TestCluster::require();
    let target = cluster.database("inbox").expect("a database");
    let host = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");
    host.block_on(async {
        let first = crate::serve_on_postgres(&target).await;
        first.start_payout("pay-shared").await;
        let second = crate::serve_on_postgres(&target).await;
        one_inbox_on_two_runners(first, second).await;
    });
}

/// Signs in through `first`'s form posted to `second`, uses the cookie and a form of one
/// on the other, and signs out on one for both.
async fn one_inbox_on_two_runners(first: crate::Running, second: crate::Running) {
    // The sign-in form of one runner, posted to the other.
    let signed = sign_in_across(&first, &second, LEAD).await;
    assert_eq!((signed.status, signed.location()), (StatusCode::SEE_OTHER, "/"), "{}", signed.body);
    let cookie = session_cookie(&signed);
    assert!(!cookie.contains(&crate::encode(LEAD)) && !signed.body.contains(LEAD));
    let page = first.get("/sessions/pay-shared", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK, "the cookie of one runner works on the other: {}", page.body);
    assert!(page.body.contains("refunds-lead@fernhill.example"), "{}", page.body);
    // A form of the first runner's page, posted to the second: its CSRF token verifies.
    let out = second.post_form("/sign-out", Some(&cookie), &[("csrf", &page.csrf())]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", out.body);
    let ended = first.get("/", Some(&cookie)).await;
    assert_eq!((ended.status, ended.location()), (StatusCode::SEE_OTHER, "/sign-in"), "signed out on every runner");
    second.stop().await;
    first.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eleventh_bad_sign_in_from_one_client_is_answered_429_with_retry_after() {
    let server = serve(false).await;
    for attempt in 1..=10 {
        let refused = sign_in_across(&server, &server, "a-guessed-token-0000").await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "attempt {attempt}: {}", refused.body);
    }
    let throttled = sign_in_across(&server, &server, "a-guessed-token-0000").await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS, "{}", throttled.body);
    let retry_after: u64 = throttled
        .headers
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=15 * 60).contains(&retry_after), "{retry_after}");
    let right = sign_in_across(&server, &server, LEAD).await;
    assert_eq!(right.status, StatusCode::TOO_MANY_REQUESTS, "even a good token waits: the token is not tried");
    assert!(right.cookie("archmax_inbox").is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_token_without_the_read_scope_is_answered_403_and_not_counted_as_a_failed_sign_in() {
    let server = serve(false).await;
    for attempt in 1..=12 {
        let refused = sign_in_across(&server, &server, STARTER).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "attempt {attempt}: {}", refused.body);
        assert!(refused.body.contains("`read` scope"), "{}", refused.body);
    }
    // The client still has its whole allowance of failed sign-ins.
    for attempt in 1..=10 {
        let refused = sign_in_across(&server, &server, "a-guessed-token-0000").await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "attempt {attempt}: {}", refused.body);
    }
    let throttled = sign_in_across(&server, &server, "a-guessed-token-0000").await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS, "{}", throttled.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_signing_in_past_its_allowance_is_answered_429() {
    let server = serve(false).await;
    for attempt in 1..=30 {
        let signed = sign_in_across(&server, &server, READER).await;
        assert_eq!(signed.status, StatusCode::SEE_OTHER, "sign-in {attempt}: {}", signed.body);
    }
    let throttled = sign_in_across(&server, &server, READER).await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS, "{}", throttled.body);
    assert!(throttled.headers.get("retry-after").is_some());
    let other = sign_in_across(&server, &server, LEAD).await;
    assert_eq!(other.status, StatusCode::SEE_OTHER, "another identity is not held up: {}", other.body);
    server.stop().await;
}

/// Sends a POST's head announcing a body (under the forms' 8 KiB limit, so the size layer
/// lets it through to the handler) and only the start of it, and reads the answer's status
/// line while the rest is still owed.
async fn answer_before_the_body(running: &Running, path: &str, cookie: &str) -> String {
    let address = running.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("a connection");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-www-form-urlencoded\r\n{cookie}Content-Length: 6000\r\n\r\ncsrf="
    );
    stream.write_all(head.as_bytes()).await.expect("the head is sent");
    let mut answer = vec![0u8; 1024];
    // A hang guard only: the answer comes without the body, or this test fails.
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut answer))
        .await
        .expect("an answer")
        .expect("read");
    String::from_utf8_lossy(&answer[..read]).lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_from_no_signed_in_session_is_refused_before_its_body_arrives() {
    let server = serve(false).await;
    for path in ["/decide", "/reply", "/deliver", "/sign-out"] {
        let status = answer_before_the_body(&server, path, "").await;
        assert!(status.contains(" 303 "), "{path}: refused at once, not after the body timed out: {status}");
        let stale = "Cookie: archmax_inbox=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\r\n";
        let status = answer_before_the_body(&server, path, stale).await;
        assert!(status.contains(" 303 "), "{path} with an unknown session: {status}");
    }
    let status = answer_before_the_body(&server, "/sign-in", "").await;
    assert!(status.contains(" 403 "), "a sign-in without its form's cookie: {status}");
    let forged = "Cookie: archmax_sign_in=0123456789abcdef0123456789abcdef.00\r\n";
    let status = answer_before_the_body(&server, "/sign-in", forged).await;
    assert!(status.contains(" 403 "), "a sign-in cookie this inbox did not sign: {status}");
    server.stop().await;
}

#[test]
fn a_token_shorter_than_16_bytes_is_refused_at_start_naming_the_variable() {
    for short in ["a", "fifteen-bytes!!"] {
        let refused = Auth::configure(Some(short), Some(&tokens_file())).expect_err("a short token is refused");
        let message = refused.to_string();
        assert!(message.contains("ARCHMAX_SERVE_TOKEN") && message.contains("at least 16"), "{message}");
    }
    assert!(Auth::configure(Some("sixteen-bytes!!!"), None).is_ok());
}
