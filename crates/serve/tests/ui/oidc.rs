//! Signing in to the inbox through an OpenID Connect provider ([`crate::idp`]): the code
//! flow with PKCE end to end, a decision as the mapped identity, sign-out, a callback on
//! another runner of the store, every refusal the callback makes, the `__Host-` cookies
//! over HTTPS, no store write per start, and the pause after a provider that is down.
//! (The same sign-in in Chromium is in [`crate::browser`].)

use base64::Engine;
use reqwest::StatusCode;
use reqwest::header::LOCATION;
use serde_json::json;

use archmax_config::settings::oidc::OidcSettings;
use archmax_serve::inbox::oidc::Provider;

use crate::idp::{CLIENT_ID, CLIENT_SECRET, TestProvider, Twist};
use crate::{Page, Running, serve_with_oidc};

/// `[inbox.oidc]` for the test provider at `issuer`, letting in fernhill.example.
fn settings(issuer: &str) -> OidcSettings {
    OidcSettings {
        issuer: issuer.to_string(),
        client_id: CLIENT_ID.into(),
        client_secret_env: "TEST_OIDC_SECRET".into(),
        allowed_domains: vec!["fernhill.example".into()],
        allowed_groups: vec![],
        groups_claim: "groups".into(),
        identity_claim: "email".into(),
        scopes: vec!["email".into()],
        grant_scopes: vec!["read".into(), "decide".into()],
        provider_name: "Fernhill SSO".into(),
        redirect_url: None,
        trust_unverified_email: false,
    }
}

/// The provider of `settings` for a runner at `base` (its public URL).
fn provider(settings: &OidcSettings, base: &str) -> Provider {
    let secret = |variable: &str| (variable == "TEST_OIDC_SECRET").then(|| CLIENT_SECRET.to_string());
    Provider::configure(settings, Some(base), secret).expect("the provider is configured")
}

pub(crate) async fn serve_for(idp: &TestProvider) -> Running {
    let settings = settings(&idp.issuer);
    serve_with_oidc(None, &|base| provider(&settings, base)).await
}

/// A sign-in under way: the state cookie and the provider's authorize URL.
struct Started {
    cookie: String,
    authorize: String,
}

/// `GET /inbox/oidc/start` on `runner`.
async fn start(runner: &Running, idp: &TestProvider) -> Started {
    let started = runner.get("/inbox/oidc/start", None).await;
    assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.body);
    let authorize = started.location().to_string();
    assert!(authorize.starts_with(&format!("{}/authorize?", idp.issuer)), "{authorize}");
    let cookie = started.cookie("archmax_oidc").expect("the state cookie");
    assert!(cookie.contains("SameSite=Lax") && cookie.contains("HttpOnly") && cookie.contains("Path=/;"));
    Started { cookie: cookie.split(';').next().unwrap_or_default().to_string(), authorize }
}

/// The provider's answer to `authorize`: the callback's path and query.
async fn authorize(runner: &Running, started: &Started) -> String {
    let answer = runner.client.get(&started.authorize).send().await.expect("the provider answers");
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let back = answer.headers().get(LOCATION).and_then(|value| value.to_str().ok()).expect("a redirect").to_string();
    let path = back.find("/inbox/oidc/callback").map(|at| back[at..].to_string()).expect("the callback");
    assert!(path.contains("code=") && path.contains("state="), "{path}");
    path
}

/// The callback `path` sent to `runner` with `cookie`.
async fn land(runner: &Running, path: &str, cookie: Option<&str>) -> Page {
    runner.get(path, cookie).await
}

/// A whole sign-in as whoever the provider signs in: the inbox cookie.
async fn sign_in(runner: &Running, idp: &TestProvider) -> String {
    let started = start(runner, idp).await;
    let path = authorize(runner, &started).await;
    let landed = land(runner, &path, Some(&started.cookie)).await;
    assert_eq!(landed.status, StatusCode::OK, "{}", landed.body);
    let cookie = landed.cookie("archmax_inbox").expect("the inbox cookie");
    cookie.split(';').next().unwrap_or_default().to_string()
}

/// A callback that fails: its page.
async fn refused(runner: &Running, idp: &TestProvider) -> Page {
    let started = start(runner, idp).await;
    let path = authorize(runner, &started).await;
    let landed = land(runner, &path, Some(&started.cookie)).await;
    assert!(landed.cookie("archmax_inbox").is_none(), "no session for a refused sign-in");
    landed
}

fn says(page: &Page, status: StatusCode, text: &str) {
    assert_eq!(page.status, status, "{}", page.body);
    assert!(page.body.contains(text), "expected «{text}» in {}", page.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_through_the_provider_decides_as_their_email_and_signs_out() {
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    runner.start_payout("pay-oidc").await;
    let page = runner.get("/sign-in", None).await;
    assert!(
        page.body.contains(r#"<a class="button" href="/inbox/oidc/start">Sign in with Fernhill SSO</a>"#),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"name="token""#), "the token form stays beside it");

    idp.sign_in_as(json!({ "email": "Refunds-Lead@Fernhill.example", "email_verified": true }));
    let started = start(&runner, &idp).await;
    assert!(started.authorize.contains("code_challenge_method=S256") && started.authorize.contains("nonce="));
    let path = authorize(&runner, &started).await;
    let landed = land(&runner, &path, Some(&started.cookie)).await;
    says(&landed, StatusCode::OK, "refunds-lead@fernhill.example");
    assert!(landed.body.contains(r#"<meta http-equiv="refresh" content="0;url=/">"#), "{}", landed.body);
    let session = landed.cookie("archmax_inbox").expect("the inbox cookie");
    assert!(session.contains("SameSite=Strict") && session.contains("HttpOnly"));
    assert!(landed.cookie("archmax_oidc").is_some_and(|cleared| cleared.contains("Max-Age=0")));
    let cookie = session.split(';').next().unwrap_or_default().to_string();

    let page = runner.get("/sessions/pay-oidc", Some(&cookie)).await;
    says(&page, StatusCode::OK, "Signed in as <strong>refunds-lead@fernhill.example</strong>");
    let decided = runner
        .post_form("/decide", Some(&cookie), &[("csrf", &page.csrf()), ("session", "pay-oidc"), ("to", "done")])
        .await;
    assert_eq!((decided.status, decided.location()), (StatusCode::SEE_OTHER, "/sessions/pay-oidc?done=decided"));
    let shown = runner.show("pay-oidc").await;
    let human = shown["trail"].as_array().and_then(|trail| trail.iter().find(|step| step["kind"] == "human")).cloned();
    assert_eq!(human.map(|step| step["decidedBy"].clone()), Some(json!("refunds-lead@fernhill.example")));

    // `grant_scopes` holds read and decide, not start.
    let page = runner.get("/", Some(&cookie)).await;
    let out = runner.post_form("/sign-out", Some(&cookie), &[("csrf", &page.csrf())]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", out.body);
    let after = runner.get("/", Some(&cookie)).await;
    assert_eq!((after.status, after.location()), (StatusCode::SEE_OTHER, "/sign-in"), "signed out");
    runner.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_the_approvers_do_not_name_may_not_decide_and_a_start_returns_where_it_was_asked() {
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    runner.start_payout("pay-oidc-intern").await;
    idp.sign_in_as(json!({ "email": "intern@fernhill.example", "email_verified": true }));
    let started = runner.get("/inbox/oidc/start?return=/sessions/pay-oidc-intern", None).await;
    let started = Started {
        cookie: started.cookie("archmax_oidc").expect("cookie").split(';').next().unwrap_or_default().to_string(),
        authorize: started.location().to_string(),
    };
    let path = authorize(&runner, &started).await;
    let landed = land(&runner, &path, Some(&started.cookie)).await;
    assert!(landed.body.contains(r#"content="0;url=/sessions/pay-oidc-intern""#), "{}", landed.body);
    let cookie = landed.cookie("archmax_inbox").expect("cookie").split(';').next().unwrap_or_default().to_string();
    let page = runner.get("/sessions/pay-oidc-intern", Some(&cookie)).await;
    assert!(page.body.contains("You are not among them."), "{}", page.body);
    let refused = runner
        .post_form("/decide", Some(&cookie), &[("csrf", &page.csrf()), ("session", "pay-oidc-intern"), ("to", "done")])
        .await;
    says(&refused, StatusCode::FORBIDDEN, "intern@fernhill.example");
    assert_eq!(runner.show("pay-oidc-intern").await["status"], "awaiting_decision");
    runner.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_started_on_one_runner_lands_on_another_and_serves_on_the_first() {
    let idp = TestProvider::start().await;
    let first = serve_for(&idp).await;
    first.start_payout("pay-oidc-fleet").await;
    // Both runners behind one public URL: the first's.
    let mut shared = settings(&idp.issuer);
    shared.redirect_url = Some(format!("{}/inbox/oidc/callback", first.base));
    let second = serve_with_oidc(Some(&first), &|base| provider(&shared, base)).await;
    idp.sign_in_as(json!({ "email": "care-team@fernhill.example", "email_verified": true }));
    let started = start(&first, &idp).await;
    let path = authorize(&first, &started).await;
    let landed = land(&second, &path, Some(&started.cookie)).await;
    says(&landed, StatusCode::OK, "care-team@fernhill.example");
    let cookie = landed.cookie("archmax_inbox").expect("cookie").split(';').next().unwrap_or_default().to_string();
    let page = first.get("/sessions/pay-oidc-fleet", Some(&cookie)).await;
    says(&page, StatusCode::OK, "Signed in as <strong>care-team@fernhill.example</strong>");
    // The landing cleared the browser's sign-in under way: the same callback again, on
    // the first runner, finds none.
    assert!(landed.cookie("archmax_oidc").is_some_and(|cleared| cleared.contains("Max-Age=0")));
    says(&land(&first, &path, None).await, StatusCode::FORBIDDEN, "already completed");
    // Replayed with the cookie kept anyway: the provider redeems a code once.
    says(&land(&first, &path, Some(&started.cookie)).await, StatusCode::FORBIDDEN, "its code was used before");
    second.stop().await;
    first.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_is_taken_once_by_its_own_browser_within_ten_minutes() {
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    // Replayed state (and its code), even with the cookie the landing cleared: refused.
    let started = start(&runner, &idp).await;
    let path = authorize(&runner, &started).await;
    assert_eq!(land(&runner, &path, Some(&started.cookie)).await.status, StatusCode::OK);
    says(&land(&runner, &path, Some(&started.cookie)).await, StatusCode::FORBIDDEN, "its code was used before");
    says(&land(&runner, &path, None).await, StatusCode::FORBIDDEN, "Start signing in again");
    // A used code with a fresh state: the provider refuses the code.
    let fresh = start(&runner, &idp).await;
    let fresh_state = state_of(&fresh.authorize);
    let code = path.split("code=").nth(1).and_then(|rest| rest.split('&').next()).unwrap_or_default();
    let replayed = format!("/inbox/oidc/callback?code={code}&state={}", crate::encode(&fresh_state));
    says(&land(&runner, &replayed, Some(&fresh.cookie)).await, StatusCode::FORBIDDEN, "its code was used before");
    // A state this inbox never made.
    let forged = format!("{}.1741435200.{}", "ab".repeat(16), "cd".repeat(32));
    let unknown = format!("/inbox/oidc/callback?code=x&state={forged}");
    says(
        &land(&runner, &unknown, Some(&format!("archmax_oidc={forged}.Lw.{}", "ef".repeat(32)))).await,
        StatusCode::BAD_REQUEST,
        "not started by this inbox",
    );
    // Another browser: the callback without the state cookie, or with another sign-in's.
    let other = start(&runner, &idp).await;
    let other_path = authorize(&runner, &other).await;
    says(&land(&runner, &other_path, None).await, StatusCode::FORBIDDEN, "started in another browser");
    says(&land(&runner, &other_path, Some(&fresh.cookie)).await, StatusCode::FORBIDDEN, "started in another browser");
    // A cookie whose path to return to was changed: its seal breaks.
    let mut parts: Vec<&str> = other.cookie.split('.').collect();
    let moved = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("/sessions/elsewhere");
    parts[3] = &moved;
    let altered = parts.join(".");
    let page = land(&runner, &other_path, Some(&altered)).await;
    says(&page, StatusCode::FORBIDDEN, "sign-in cookie was altered");
    assert!(page.body.contains("Start signing in again"), "{}", page.body);
    assert!(page.cookie("archmax_oidc").is_some_and(|cleared| cleared.contains("Max-Age=0")), "cleared");
    // Expired: the callback eleven minutes on.
    let late = start(&runner, &idp).await;
    let late_path = authorize(&runner, &late).await;
    runner.clock.advance(11 * 60);
    let page = land(&runner, &late_path, Some(&late.cookie)).await;
    says(&page, StatusCode::FORBIDDEN, "took longer than 10 minutes");
    assert!(page.body.contains("Start signing in again"), "{}", page.body);
    runner.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_cannot_be_read_is_asked_again_only_after_a_doubling_pause_and_a_good_read_is_kept() {
    let idp = TestProvider::start().await;
    idp.set_down(true);
    let runner = serve_for(&idp).await;
    let before = idp.discovery_reads();
    // Starts within each pause ask the provider once; the pause doubles from one second.
    // (The runner's clock only moves when the test moves it.)
    for (reads, retry_in) in [(1, "1 second."), (2, "2 seconds."), (3, "4 seconds."), (4, "8 seconds.")] {
        for attempt in 0..5 {
            let page = runner.get("/inbox/oidc/start", None).await;
            says(&page, StatusCode::SERVICE_UNAVAILABLE, "cannot be reached right now");
            assert!(page.headers.contains_key(reqwest::header::RETRY_AFTER), "attempt {attempt}");
            if attempt == 0 {
                assert!(page.body.contains(&format!("tried again in {retry_in}")), "{retry_in}: {}", page.body);
            }
        }
        assert_eq!(idp.discovery_reads() - before, reads, "five starts in a pause read the provider once");
        let offered = runner.get("/sign-in", None).await;
        says(&offered, StatusCode::OK, "cannot be reached right now");
        assert!(offered.body.contains("it will be tried again in"), "{}", offered.body);
        assert!(offered.body.contains("Sign in with Fernhill SSO"), "the button stays");
        // Within the pause, still no read: the last second of it.
        let pause: u64 = retry_in.split(' ').next().and_then(|n| n.parse().ok()).expect("seconds");
        runner.clock.advance(pause - 1);
        says(&runner.get("/inbox/oidc/start", None).await, StatusCode::SERVICE_UNAVAILABLE, "tried again in 1 second.");
        assert_eq!(idp.discovery_reads() - before, reads);
        runner.clock.advance(1);
    }
    // The pause stops growing at a minute.
    for _ in 0..4 {
        runner.get("/inbox/oidc/start", None).await;
        runner.clock.advance(60);
    }
    let page = runner.get("/inbox/oidc/start", None).await;
    says(&page, StatusCode::SERVICE_UNAVAILABLE, "tried again in 60 seconds.");
    assert_eq!(idp.discovery_reads() - before, 9);

    // Back up: once the pause is over, one read, kept for every sign-in after it.
    idp.set_down(false);
    runner.clock.advance(60);
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    assert!(!sign_in(&runner, &idp).await.is_empty());
    let page = runner.get("/sign-in", None).await;
    assert!(!page.body.contains("cannot be reached"), "{}", page.body);
    for _ in 0..5 {
        assert_eq!(runner.get("/inbox/oidc/start", None).await.status, StatusCode::SEE_OTHER);
    }
    assert_eq!(idp.discovery_reads() - before, 10, "the document read is kept");
    runner.stop().await;
    idp.stop();
}

/// `GET path` as a TLS-terminating proxy forwards it (`X-Forwarded-Proto: https`).
async fn https_get(runner: &Running, path: &str, cookie: Option<&str>) -> Page {
    let mut request = runner.client.get(format!("{}{path}", runner.base)).header("x-forwarded-proto", "https");
    if let Some(cookie) = cookie {
        request = request.header(reqwest::header::COOKIE, cookie);
    }
    crate::page_of(request.send().await.expect("the server answers")).await
}

/// The `name=value` of a `Set-Cookie` value.
fn pair(set_cookie: &str) -> &str {
    set_cookie.split(';').next().unwrap_or_default()
}

/// Asserts that `set_cookie` is one a browser keeps only from this very host.
fn host_only(set_cookie: &str) {
    assert!(set_cookie.starts_with("__Host-"), "{set_cookie}");
    assert!(set_cookie.contains("; Secure") && set_cookie.contains("; Path=/;"), "{set_cookie}");
    assert!(!set_cookie.to_ascii_lowercase().contains("domain="), "{set_cookie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_every_inbox_cookie_is_host_prefixed_and_only_that_name_is_read() {
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    // The token sign-in, as a proxy that terminated TLS forwards it.
    let form = https_get(&runner, "/sign-in", None).await;
    assert!(form.cookie("archmax_sign_in").is_none(), "no bare name over HTTPS");
    let form_cookie = form.cookie("__Host-archmax_sign_in").expect("the sign-in form's cookie");
    host_only(&form_cookie);
    let send = |cookie: String| {
        let body = format!("csrf={}&token={}", crate::encode(&form.csrf()), crate::encode(crate::LEAD));
        let request = runner
            .client
            .post(format!("{}/sign-in", runner.base))
            .header("x-forwarded-proto", "https")
            .header("content-type", "application/x-www-form-urlencoded")
            .header(reqwest::header::COOKIE, cookie)
            .body(body);
        async move { crate::page_of(request.send().await.expect("the server answers")).await }
    };
    // The form's cookie under its bare name (which a sibling subdomain could set) is not read.
    let bare = send(pair(&form_cookie).trim_start_matches("__Host-").to_string()).await;
    says(&bare, StatusCode::FORBIDDEN, "CSRF token is missing or wrong");
    let signed = send(pair(&form_cookie).to_string()).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    let session = signed.cookie("__Host-archmax_inbox").expect("the session cookie");
    host_only(&session);
    assert!(signed.cookie("__Host-archmax_sign_in").is_some_and(|cleared| cleared.contains("Max-Age=0")));
    let session = pair(&session).to_string();
    assert_eq!(https_get(&runner, "/", Some(&session)).await.status, StatusCode::OK);
    let bare = session.trim_start_matches("__Host-");
    let page = https_get(&runner, "/", Some(bare)).await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/sign-in"), "bare name over HTTPS");
    let page = runner.get("/", Some(&session)).await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/sign-in"), "prefixed name over HTTP");

    // The provider sign-in: its cookie is prefixed too, and the callback reads only that.
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    let mut landings = Vec::new();
    for _ in 0..2 {
        let started = https_get(&runner, "/inbox/oidc/start", None).await;
        assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.body);
        let pending = started.cookie("__Host-archmax_oidc").expect("the sign-in under way");
        host_only(&pending);
        assert!(pending.contains("SameSite=Lax"), "{pending}");
        let started = Started { cookie: pair(&pending).to_string(), authorize: started.location().to_string() };
        landings.push((authorize(&runner, &started).await, started.cookie));
    }
    let (path, cookie) = &landings[0];
    let refused = https_get(&runner, path, Some(cookie.trim_start_matches("__Host-"))).await;
    says(&refused, StatusCode::FORBIDDEN, "started in another browser");
    let (path, cookie) = &landings[1];
    let landed = https_get(&runner, path, Some(cookie)).await;
    says(&landed, StatusCode::OK, "refunds-lead@fernhill.example");
    host_only(&landed.cookie("__Host-archmax_inbox").expect("the session cookie"));
    let cleared = landed.cookie("__Host-archmax_oidc").expect("the sign-in under way, cleared");
    assert!(cleared.contains("Max-Age=0") && cleared.contains("; Secure"), "{cleared}");
    runner.stop().await;
    idp.stop();
}

/// The `state` an authorize URL carries.
fn state_of(authorize: &str) -> String {
    let query = authorize.split_once('?').map(|(_, query)| query).unwrap_or_default();
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
        .expect("a state")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_sign_ins_writes_nothing_to_the_store_however_many_one_address_starts() {
    // A start used to keep a record in the shared store (at most 10,000 of them), so an
    // anonymous client could fill it and lock everyone out; now the browser holds it.
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    let records = runner.records_folder("");
    let count = || walk_files(&records);
    let before = count();
    let mut last = None;
    for round in 0..40 {
        let started = runner.get("/inbox/oidc/start", None).await;
        assert_eq!(started.status, StatusCode::SEE_OTHER, "round {round}: {}", started.body);
        assert_eq!(count(), before, "round {round}: no record kept for a sign-in under way");
        last = Some(started);
    }
    // The last of them still signs in, from its cookie alone.
    let last = last.expect("forty starts");
    let started = Started {
        cookie: last.cookie("archmax_oidc").expect("cookie").split(';').next().unwrap_or_default().to_string(),
        authorize: last.location().to_string(),
    };
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    let path = authorize(&runner, &started).await;
    says(&land(&runner, &path, Some(&started.cookie)).await, StatusCode::OK, "refunds-lead@fernhill.example");
    runner.stop().await;
    idp.stop();
}

/// How many files lie under `folder` (none when it does not exist).
fn walk_files(folder: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(folder) else { return 0 };
    entries.filter_map(Result::ok).map(|entry| if entry.path().is_dir() { walk_files(&entry.path()) } else { 1 }).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_any_page_can_send_a_browser_to_do_not_lock_its_address_out() {
    // A page the victim opens can load `/inbox/oidc/callback?state=…` as often as it
    // likes: such refusals are not failed sign-ins, so the token sign-in still works.
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    for round in 0..12 {
        let forged = format!("/inbox/oidc/callback?code=x&state=junk{round}");
        let page = land(&runner, &forged, None).await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "round {round}: {}", page.body);
    }
    let cookie = runner.sign_in(crate::LEAD).await;
    assert_eq!(runner.get("/", Some(&cookie)).await.status, StatusCode::OK);
    runner.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_wrong_in_any_way_signs_nobody_in() {
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    let cases = [
        (Twist::Nonce, "its nonce does not belong to this sign-in"),
        (Twist::Audience, "it was issued for another client"),
        (Twist::Issuer, "it was issued by another issuer"),
        (Twist::Expired, "it has expired"),
        (Twist::UnpublishedKey, "its signature is not by a key the provider publishes"),
        (Twist::AccessTokenHash, "its at_hash does not match"),
        (Twist::Challenge, "its code was used before, expired, or does not belong to this sign-in"),
    ];
    for (twist, text) in cases {
        idp.twist(twist.clone());
        let page = refused(&runner, &idp).await;
        assert!(page.status == StatusCode::FORBIDDEN && page.body.contains(text), "{twist:?}: {}", page.body);
        assert!(!page.body.contains("eyJ"), "{twist:?}: nothing of the token is shown");
    }
    assert_eq!(idp.refused_verifiers(), 1, "the provider refused the PKCE verifier once");
    idp.twist(Twist::None);
    assert!(!sign_in(&runner, &idp).await.is_empty(), "a good token still signs in");
    runner.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_allowed_domains_and_groups_with_an_identity_claim_are_let_in() {
    let idp = TestProvider::start().await;
    let runner = serve_for(&idp).await;
    let cases = [
        (
            json!({ "email": "mallory@elsewhere.example", "email_verified": true }),
            "mallory@elsewhere.example may not sign in",
        ),
        (json!({ "email": "lead@sub.fernhill.example", "email_verified": true }), "may not sign in"),
        (json!({ "sub_only": true }), "carries no usable `email` claim"),
        (json!({ "email": "lead@fernhill.example", "email_verified": false }), "has not verified this account"),
        (json!({ "email": "lead@fernhill.example" }), "has not verified this account"),
        (
            json!({ "email": "<script>alert(1)</script>@elsewhere.example", "email_verified": true }),
            "&lt;script&gt;alert(1)&lt;/script&gt;",
        ),
    ];
    for (claims, text) in cases {
        idp.sign_in_as(claims.clone());
        let page = refused(&runner, &idp).await;
        says(&page, StatusCode::FORBIDDEN, text);
        assert!(!page.body.contains("<script>alert"), "{claims}: escaped");
    }
    runner.stop().await;

    // Groups instead of domains, by another claim.
    let mut by_group = settings(&idp.issuer);
    by_group.allowed_domains = vec![];
    by_group.allowed_groups = vec!["refund-leads".into()];
    by_group.identity_claim = "preferred_username".into();
    let runner = serve_with_oidc(None, &|base| provider(&by_group, base)).await;
    idp.sign_in_as(json!({ "preferred_username": "jo", "email": "jo@fernhill.example", "groups": ["interns"], "email_verified": true }));
    says(&refused(&runner, &idp).await, StatusCode::FORBIDDEN, "jo may not sign in");
    idp.sign_in_as(json!({ "preferred_username": "jo", "groups": ["interns", "refund-leads"] }));
    let cookie = sign_in(&runner, &idp).await;
    says(&runner.get("/", Some(&cookie)).await, StatusCode::OK, "Signed in as <strong>jo</strong>");
    runner.stop().await;
    idp.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_read_again_and_a_rotated_client_secret_ends_provider_sign_ins() {
    let idp = TestProvider::start().await;
    let settings = settings(&idp.issuer);
    let runner = serve_with_oidc(None, &|base| provider(&settings, base)).await;
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    let cookie = sign_in(&runner, &idp).await;
    idp.rotate_key();
    // Past the refresh interval, a token signed with a key the runner has not seen makes it
    // read the key set again.
    runner.clock.advance(61);
    let rotated = sign_in(&runner, &idp).await;
    assert_eq!(runner.get("/", Some(&rotated)).await.status, StatusCode::OK);
    assert_eq!(runner.get("/", Some(&cookie)).await.status, StatusCode::OK, "the earlier sign-in still serves");

    // Another runner on the store whose client secret differs: the records do not verify.
    let mut rotated_secret = settings.clone();
    rotated_secret.client_secret_env = "ROTATED".into();
    let other = serve_with_oidc(Some(&runner), &|base| {
        Provider::configure(&rotated_secret, Some(base), |_| Some("another-secret".into())).expect("configured")
    })
    .await;
    let ended = other.get("/", Some(&cookie)).await;
    assert_eq!((ended.status, ended.location()), (StatusCode::SEE_OTHER, "/sign-in"));
    other.stop().await;

    // Another runner whose settings no longer let that domain in: the sign-in it admitted
    // earlier ends there too.
    let mut narrowed = settings.clone();
    narrowed.allowed_domains = vec!["elsewhere.example".into()];
    let other = serve_with_oidc(Some(&runner), &|base| provider(&narrowed, base)).await;
    let ended = other.get("/", Some(&cookie)).await;
    assert_eq!((ended.status, ended.location()), (StatusCode::SEE_OTHER, "/sign-in"), "{}", ended.body);
    other.stop().await;
    runner.stop().await;
    idp.stop();
}

#[test]
fn a_missing_or_empty_client_secret_is_refused_naming_the_variable() {
    let settings = settings("https://login.fernhill.example");
    for value in [None, Some(String::new()), Some("  ".to_string())] {
        let refused =
            Provider::configure(&settings, Some("https://inbox.example"), |_| value.clone()).err().expect("refused");
        assert!(refused.contains("TEST_OIDC_SECRET") && refused.contains("not set or empty"), "{refused}");
    }
    let no_url = Provider::configure(&settings, None, |_| Some("secret".into())).err().expect("refused");
    assert!(no_url.contains("public_url") && no_url.contains("redirect_url"), "{no_url}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_provider_the_routes_are_not_found_and_the_page_offers_only_tokens() {
    let runner = crate::serve(false).await;
    assert_eq!(runner.get("/inbox/oidc/start", None).await.status, StatusCode::NOT_FOUND);
    assert_eq!(runner.get("/inbox/oidc/callback?code=a&state=b", None).await.status, StatusCode::NOT_FOUND);
    let page = runner.get("/sign-in", None).await;
    assert!(!page.body.contains("/inbox/oidc/start"));
    runner.stop().await;
}
