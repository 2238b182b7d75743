//! Sign-in hardening (issue 29, round-3 review findings 1, 3, 4 and 12): what a local
//! reader of the sessions folder sees cannot be turned into a sign-in, one identity keeps
//! a bounded number of inbox sessions, parallel bad sign-ins are all counted, and a
//! sign-in form expires on the server, not only in the browser.

use std::sync::Arc;

use reqwest::StatusCode;

use archmax_serve::auth::token_digest_hex;
use archmax_vm::session::records::{Record, RecordKind};

use crate::{CARE, INTERN, LEAD, READER, Running, serve, serve_behind_proxy};

/// How many inbox-session records the store's folder holds, as a directory listing shows
/// them (the file names are MACs of the keys, so the listing gives a count, not keys).
fn inbox_session_files(running: &Running) -> usize {
    let folder = running.records_folder("inbox-session");
    std::fs::read_dir(&folder)
        .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
        .filter_map(Result::ok)
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .count()
}

/// The record key a sign-in cookie (`archmax_inbox=<key>.<secret hex>`) names.
fn cookie_key(cookie: &str) -> String {
    let value = cookie.strip_prefix("archmax_inbox=").unwrap_or_else(|| panic!("not an inbox cookie: {cookie}"));
    value.split('.').next().unwrap_or_default().to_string()
}

/// The stored value of the live inbox-session record of each cookie, by key; a cookie
/// whose record has ended is left out.
async fn inbox_session_records(running: &Running, cookies: &[&str]) -> Vec<(String, serde_json::Value)> {
    let store = &running.server.store;
    let now = running.server.now_ms();
    let mut records = Vec::new();
    for key in cookies.iter().map(|cookie| cookie_key(cookie)) {
        if records.iter().any(|(seen, _)| *seen == key) {
            continue;
        }
        if let Ok(Some(value)) = store.read_record(RecordKind::InboxSession, &key, now).await {
            let value = serde_json::from_slice(&value).unwrap_or_else(|error| panic!("record {key}: {error}"));
            records.push((key, value));
        }
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_record_rewritten_with_another_persons_fields_does_not_sign_in_as_them() {
    let server = serve(false).await;
    server.start_refund("forged-refund").await;
    let lead = server.sign_in(LEAD).await;
    let reader = server.sign_in(READER).await;
    let records = inbox_session_records(&server, &[&lead, &reader]).await;
    assert_eq!(records.len(), 2, "both sign-ins are kept: {records:?}");
    let of = |identity: &str| {
        records.iter().find(|(_, value)| value["identity"] == identity).cloned().expect("a record of the identity")
    };
    for (key, value) in &records {
        let text = value.to_string();
        for token in [LEAD, READER] {
            assert!(!text.contains(&token_digest_hex(token)), "record {key} holds a bare token digest: {text}");
        }
    }
    let (_, lead_value) = of("refunds-lead@fernhill.example");
    let (reader_key, _) = of("reader");
    // A local writer of the sessions folder replaces the reader's record with the lead's
    // fields, then browses with the reader's cookie.
    let store = &server.server.store;
    let now = server.server.now_ms();
    store.remove_record(RecordKind::InboxSession, &reader_key).await.expect("removed");
    let forged = Record {
        kind: RecordKind::InboxSession,
        key: reader_key.clone(),
        value: serde_json::to_vec(&lead_value).expect("json"),
        expires_ms: now + 3_600_000,
    };
    assert!(store.claim_record(&forged, now).await.expect("claimed"), "the forged record is in place");
    let page = server.get("/sessions/forged-refund", Some(&reader)).await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/sign-in"),
        "the copied fields do not make the reader's cookie the lead's: {}",
        page.body
    );
    // A record of the writer's own making, at a key of its choosing, with the lead's fields.
    let chosen = "5a".repeat(32);
    let crafted = Record { key: chosen.clone(), ..forged };
    assert!(store.claim_record(&crafted, now).await.expect("claimed"));
    let cookie = format!("archmax_inbox={chosen}.{}", "77".repeat(32));
    let page = server.get("/sessions/forged-refund", Some(&cookie)).await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", page.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ninth_sign_in_of_one_identity_ends_its_oldest_inbox_session_and_other_identities_still_sign_in() {
    let server = serve(false).await;
    let mut cookies = Vec::new();
    for _ in 0..9 {
        cookies.push(server.sign_in(READER).await);
        server.clock.advance(1);
    }
    let first = server.get("/", Some(&cookies[0])).await;
    assert_eq!((first.status, first.location()), (StatusCode::SEE_OTHER, "/sign-in"), "the oldest session ended");
    for (index, cookie) in cookies.iter().enumerate().skip(1) {
        let page = server.get("/", Some(cookie)).await;
        assert_eq!(page.status, StatusCode::OK, "sign-in {} is live", index + 1);
    }
    let cookies: Vec<&str> = cookies.iter().map(String::as_str).collect();
    let readers = inbox_session_records(&server, &cookies)
        .await
        .iter()
        .filter(|(_, value)| value["identity"] == "reader")
        .count();
    assert_eq!(readers, 8, "the eight newest sign-ins are kept");
    assert_eq!(inbox_session_files(&server), 8, "the store keeps at most eight sessions of one identity");
    for token in [LEAD, CARE, INTERN] {
        let cookie = server.sign_in(token).await;
        assert_eq!(server.get("/", Some(&cookie)).await.status, StatusCode::OK);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_form_older_than_ten_minutes_is_refused_by_the_server() {
    let server = serve(false).await;
    let form = server.get("/sign-in", None).await;
    let cookie = form.cookie("archmax_sign_in").expect("a sign-in cookie");
    let cookie = cookie.split(';').next().unwrap_or_default().to_string();
    server.clock.advance(599);
    let fresh = server.get("/sign-in", None).await;
    server.clock.advance(2);
    let late = server.post_form("/sign-in", Some(&cookie), &[("csrf", &form.csrf()), ("token", LEAD)]).await;
    assert_eq!(late.status, StatusCode::FORBIDDEN, "a form kept past ten minutes is refused: {}", late.body);
    assert!(late.body.contains("expired"), "{}", late.body);
    assert!(late.cookie("archmax_inbox").is_none());
    // A form issued 2 s ago is still good.
    let fresh_cookie = fresh.cookie("archmax_sign_in").expect("a sign-in cookie");
    let fresh_cookie = fresh_cookie.split(';').next().unwrap_or_default().to_string();
    let signed = server.post_form("/sign-in", Some(&fresh_cookie), &[("csrf", &fresh.csrf()), ("token", LEAD)]).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_bad_sign_ins_from_one_client_are_all_counted_before_any_token_is_tried() {
    let server = Arc::new(serve(false).await);
    let mut forms = Vec::new();
    for _ in 0..48 {
        let form = server.get("/sign-in", None).await;
        let cookie = form.cookie("archmax_sign_in").expect("a sign-in cookie");
        forms.push((form.csrf(), cookie.split(';').next().unwrap_or_default().to_string()));
    }
    let attempts = forms.into_iter().map(|(csrf, cookie)| {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            server
                .post_form("/sign-in", Some(&cookie), &[("csrf", &csrf), ("token", "a-guessed-token-0000")])
                .await
                .status
        })
    });
    let mut tried = 0;
    let mut throttled = 0;
    for attempt in attempts.collect::<Vec<_>>() {
        match attempt.await.expect("the attempt ran") {
            StatusCode::UNAUTHORIZED => tried += 1,
            StatusCode::TOO_MANY_REQUESTS => throttled += 1,
            other => panic!("unexpected answer {other}"),
        }
    }
    assert_eq!((tried, throttled), (10, 38), "ten tokens are tried, the rest wait");
    match Arc::try_unwrap(server) {
        Ok(server) => server.stop().await,
        Err(_) => panic!("the attempts ended"),
    }
}

/// Posts the sign-in form with `token`, the request carrying `X-Forwarded-For: forwarded`.
async fn sign_in_forwarded(running: &Running, token: &str, forwarded: &str) -> StatusCode {
    let form = running.get("/sign-in", None).await;
    let cookie = form.cookie("archmax_sign_in").expect("a sign-in cookie");
    let cookie = cookie.split(';').next().unwrap_or_default().to_string();
    let body = format!("csrf={}&token={}", form.csrf(), crate::encode(token));
    let response = running
        .client
        .post(format!("{}/sign-in", running.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", cookie)
        .header("x-forwarded-for", forwarded)
        .body(body)
        .send()
        .await
        .expect("the server answers");
    response.status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_failed_sign_ins_count_against_the_forwarded_client_not_everyone() {
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let server = serve_behind_proxy(loopback).await;
    for attempt in 1..=10 {
        let status = sign_in_forwarded(&server, "a-guessed-token-0000", "198.51.100.7").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "attempt {attempt}");
    }
    let status = sign_in_forwarded(&server, "a-guessed-token-0000", "198.51.100.7").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "the guessing client waits");
    let status = sign_in_forwarded(&server, "a-guessed-token-0000", "203.0.113.1, 198.51.100.7").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "a name it writes itself is not taken");
    let status = sign_in_forwarded(&server, LEAD, "198.51.100.8").await;
    assert_eq!(status, StatusCode::SEE_OTHER, "another client behind the same proxy signs in");
    server.stop().await;

    // Without --trusted-proxy the header is nobody's word: the peer is the client.
    let direct = serve(false).await;
    for _ in 1..=10 {
        assert_eq!(sign_in_forwarded(&direct, "a-guessed-token-0000", "198.51.100.7").await, StatusCode::UNAUTHORIZED);
    }
    let status = sign_in_forwarded(&direct, LEAD, "198.51.100.8").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "the header does not make another client");
    direct.stop().await;
}
