//! The inbox in a real browser: the distribution's headless Chromium, driven through
//! its chromedriver (started here on a free loopback port) with `fantoccini`.
//!
//! Screenshots of the main pages go to `target/ui-screenshots/`, and to `golden/ui/`
//! when that file is missing or `UPDATE_GOLDEN=1` is set, so the checked-in pictures
//! change only on purpose. `ARCHMAX_CHROMIUM` and `ARCHMAX_CHROMEDRIVER` name other
//! binaries than `/usr/bin/chromium` and `chromedriver`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::{LEAD, Running, serve};

/// How many times a condition is checked, 100 ms apart, before a test gives up on it.
const ATTEMPTS: usize = 300;

struct Browser {
    client: Client,
    driver: Child,
    profile: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("an address").port()
}

/// Chromium headless with the flags this machine needs (no background networking, no
/// sandbox as root, a fresh profile), behind a chromedriver of its own.
async fn browser() -> Browser {
    browser_with(true).await
}

/// A browser that runs no page script at all (Chromium's own setting), for the
/// no-JavaScript path.
async fn browser_without_script() -> Browser {
    browser_with(false).await
}

async fn browser_with(script: bool) -> Browser {
    let chromium = std::env::var("ARCHMAX_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_string());
    let chromedriver = std::env::var("ARCHMAX_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".to_string());
    let port = free_port();
    let driver = Command::new(&chromedriver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("{chromedriver} did not start ({error}); install it: apt-get install -y chromium chromium-driver")
        });
    let profile = crate::scratch("chromium-profile");
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
            "prefs": { "profile.managed_default_content_settings.javascript": if script { 1 } else { 2 } },
        },
    });
    let Value::Object(capabilities) = capabilities else { unreachable!("an object") };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match ClientBuilder::new(connector.clone())
            .capabilities(capabilities.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => return Browser { client, driver, profile },
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver on port {port} did not give a session: {last:?}");
}

impl Browser {
    async fn goto(&self, server: &Running, path: &str) {
        self.client.goto(&format!("{}{path}", server.base)).await.expect("the page loads");
    }

    async fn script(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.expect("the script runs")
    }

    /// Waits until `condition` (a JavaScript expression) is true.
    async fn until(&self, condition: &str) {
        let script = format!("return Boolean({condition});");
        for _ in 0..ATTEMPTS {
            if self.script(&script).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let shown = self.script("return document.body.innerText").await;
        panic!("never true: {condition}\nthe page: {shown}");
    }

    /// Does `act` to the element `css` finds; finds it again when a live refresh
    /// replaced it between the finding and the act.
    async fn on_element<Act, Done>(&self, css: &str, act: Act)
    where
        Act: Fn(fantoccini::elements::Element) -> Done,
        Done: std::future::Future<Output = Result<(), fantoccini::error::CmdError>>,
    {
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => match act(element).await {
                    Ok(()) => return,
                    Err(error) => last = Some(error),
                },
                Err(error) => last = Some(error),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css}: {last:?}");
    }

    async fn fill(&self, css: &str, text: &str) {
        self.on_element(css, |field| async move { field.send_keys(text).await }).await;
    }

    async fn click(&self, css: &str) {
        self.on_element(css, |control| async move { control.click().await }).await;
    }

    /// Waits until the page's `h1` reads `text`, by WebDriver alone (no page script needed).
    async fn until_heading(&self, text: &str) {
        let mut last = None;
        for _ in 0..ATTEMPTS {
            if let Ok(heading) = self.client.find(Locator::Css("h1")).await {
                match heading.text().await {
                    Ok(found) if found == text => return,
                    found => last = Some(format!("{found:?}")),
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the page's heading never read {text:?}; last {last:?}");
    }

    async fn sign_in(&self, server: &Running, token: &str) {
        self.goto(server, "/sign-in").await;
        self.fill("#token", token).await;
        self.click("form.sign-in button[type=submit]").await;
        self.until("document.querySelector('h1') && document.querySelector('h1').textContent === 'Decision inbox'")
            .await;
    }

    /// A screenshot of the page at `width` × its full height (at most 4000 px).
    async fn screenshot(&self, name: &str, width: u32) {
        let height = self.script("return document.documentElement.scrollHeight").await.as_u64().unwrap_or(900);
        self.screenshot_at(name, width, height.clamp(600, 4000) as u32).await;
    }

    /// A screenshot of the page at `width` × `height` (for a page that runs no script).
    async fn screenshot_at(&self, name: &str, width: u32, height: u32) {
        self.client.set_window_size(width, height).await.expect("resized");
        let png = self.client.screenshot().await.expect("a screenshot");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let output = root.join("target/ui-screenshots");
        std::fs::create_dir_all(&output).expect("the screenshot folder");
        std::fs::write(output.join(name), &png).expect("the screenshot");
        let golden = root.join("golden/ui").join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() || !golden.exists() {
            std::fs::create_dir_all(golden.parent().expect("a folder")).expect("golden/ui");
            std::fs::write(golden, &png).expect("the golden screenshot");
        }
        self.client.set_window_size(width, 900).await.expect("resized");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_signs_in_sees_a_refund_park_reads_the_evidence_and_decides_it() {
    let server = serve(false).await;
    let browser = browser().await;
    browser.sign_in(&server, LEAD).await;
    browser.until("document.querySelector('main').dataset.listening === 'true'").await;
    // The refund parks while the inbox is open: its row appears without a reload.
    server.start_refund("refund-1042").await;
    browser.until("document.querySelector('tr[data-session=\"refund-1042\"]') !== null").await;
    assert_eq!(browser.script("return performance.getEntriesByType('navigation').length").await, json!(1));
    browser.screenshot("inbox.png", 1280).await;

    browser.click("a[href=\"/sessions/refund-1042\"]").await;
    browser.until("document.querySelector('section.decision') !== null").await;
    let memo = browser
        .script("return document.querySelector('article[aria-label=\"Evidence scratchpad/refund.md\"]').innerText")
        .await;
    let memo = memo.as_str().unwrap_or_default();
    assert!(memo.contains("Refund memo: ORD-1042") && memo.contains("64.00 EUR"), "{memo}");
    let current = browser.script("return document.querySelector('svg.graph g.current').dataset.state").await;
    assert_eq!(current, json!("review"));
    browser.screenshot("session.png", 1280).await;

    // Each button says what the decision does, the state it leads to small beside it.
    let approve = browser.client.find(Locator::Css("button[name=to][value=\"review-email\"]")).await.expect("a button");
    let label = approve.text().await.expect("its text");
    assert_eq!(label, "Approve the decision and the reply as drafted. → review-email");
    let slug = approve.find(Locator::Css("span.slug")).await.expect("the slug").text().await.expect("its text");
    assert_eq!(slug, "→ review-email");
    // Sending it back needs a comment: pressing its button makes the box required, and
    // the browser asks for the comment before anything is sent.
    assert_eq!(browser.script("return document.getElementById('comment').required").await, json!(false));
    browser.click("button[name=to][value=\"decide-refund\"]").await;
    browser
        .until("document.getElementById('comment').required && document.getElementById('comment').matches(':invalid')")
        .await;
    assert_eq!(browser.script("return performance.getEntriesByType('navigation').length").await, json!(1));
    assert_eq!(server.show("refund-1042").await["status"], "awaiting_decision", "nothing was sent");

    browser.fill("#comment", "The photos match the claim. Approved.").await;
    browser.click("button[name=to][value=\"review-email\"]").await;
    browser.until("document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('Your decision was recorded.')").await;
    browser.until("document.querySelector('span.status').dataset.status === 'completed'").await;
    let trail = browser.script("return document.querySelector('ol.trail').innerText").await;
    assert!(
        trail.as_str().unwrap_or_default().contains("human → review-email by refunds-lead@fernhill.example"),
        "{trail}"
    );
    // The decision record stays on the page: who, when, the choice, the comment, and
    // what was shown.
    browser.until("document.querySelector('section.decisions') !== null").await;
    let record = browser.script("return document.querySelector('section.decisions').innerText").await;
    let record = record.as_str().unwrap_or_default();
    assert!(
        record.contains("refunds-lead@fernhill.example chose Approve the decision and the reply as drafted."),
        "{record}"
    );
    assert!(record.contains("The photos match the claim. Approved."), "{record}");
    assert!(record.contains("Approve this refund before the customer hears about it."), "the instructions: {record}");
    assert!(record.contains("64.00 EUR"), "the memo as shown: {record}");
    let when = browser
        .script("return document.querySelector('section.decisions p.verdict time').getAttribute('datetime')")
        .await;
    assert_eq!(when, json!("2025-03-08T12:00:00Z"));
    browser.screenshot("session-decided.png", 1280).await;
    let _ = browser.client.clone().close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_appears_live_and_an_input_is_delivered_through_the_generated_form() {
    let server = serve(false).await;
    let browser = browser().await;
    server.start_payout("pay-live").await;
    browser.sign_in(&server, LEAD).await;
    browser.goto(&server, "/sessions/pay-live").await;
    browser.fill("#reply", "Any news?").await;
    browser.click("form.reply button[type=submit]").await;
    browser.until("document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('Your message was sent.')").await;
    browser.until("document.querySelector('main').dataset.listening === 'true'").await;
    // A message from elsewhere (the API): its answer appears on the open page.
    let sent = server
        .client
        .post(format!("{}/v1/sessions/pay-live/messages?wait=60", server.base))
        .bearer_auth(crate::ADMIN)
        .json(&json!({ "message": "Still there?" }))
        .send()
        .await
        .expect("an answer");
    assert!(sent.status().is_success());
    browser
        .until("document.querySelector('ol.transcript').innerText.includes('A colleague in finance is on it.')")
        .await;
    let transcript = browser.script("return document.querySelector('ol.transcript').innerText").await;
    assert!(transcript.as_str().unwrap_or_default().contains("Finance has your message and will decide soon."));
    assert_eq!(browser.script("return performance.getEntriesByType('navigation').length").await, json!(1));

    let waiting = server.start("payment", "wait-live", json!({ "message": "Tell me when it is paid." })).await;
    assert_eq!(waiting["status"], "awaiting_input");
    browser.goto(&server, "/sessions/wait-live").await;
    browser.fill("#paid-amount", "40.5").await;
    browser.click("#paid-currency option[value=EUR]").await;
    browser.script("document.getElementById('paid-paid_on').value = '2025-03-07'; return true").await;
    browser.screenshot("deliver.png", 1280).await;
    browser.click("form.deliver[aria-label=\"Deliver paid\"] button[type=submit]").await;
    browser.until("document.querySelector('span.status').dataset.status === 'completed'").await;
    let shown = server.show("wait-live").await;
    assert_eq!(
        (shown["variables"]["amount"]["value"].clone(), shown["variables"]["paid_on"]["value"].clone()),
        (json!(40.5), json!("2025-03-07"))
    );
    let _ = browser.client.clone().close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_markup_is_inert_a_post_without_csrf_is_refused_and_the_page_works_by_keyboard_on_a_phone() {
    let server = serve(false).await;
    let browser = browser().await;
    server.start_payout("pay-xss").await;
    browser.sign_in(&server, LEAD).await;
    browser.goto(&server, "/sessions/pay-xss").await;
    browser.until("document.querySelector('section.decision') !== null").await;
    assert_eq!(browser.script("return typeof window.pwned").await, json!("undefined"), "no script of the model ran");
    assert_eq!(
        browser
            .script("return document.querySelectorAll('main script, main img:not(.evidence), main iframe, main [onerror]').length")
            .await,
        json!(0)
    );
    // The chart the decision names is shown (it loaded under the page's CSP).
    browser.until("document.querySelector('img.evidence').complete && document.querySelector('img.evidence').naturalWidth === 48").await;
    let said = browser.script("return document.querySelector('li.message.assistant:last-of-type').innerText").await;
    assert!(said.as_str().unwrap_or_default().contains("<script>window.pwned = 1</script>"), "shown as text: {said}");

    // A POST without the form's CSRF token, from the signed-in page itself.
    let status = browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/decide', { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
                                body: 'session=pay-xss&to=done' }).then(r => done(r.status), () => done(0));",
            Vec::new(),
        )
        .await
        .expect("the fetch ran");
    assert_eq!(status, json!(403));
    assert_eq!(server.show("pay-xss").await["status"], "awaiting_decision");

    // By keyboard: Tab reaches the approve button, Enter decides.
    browser.script("document.activeElement.blur(); window.scrollTo(0, 0); return true").await;
    let mut reached = false;
    for _ in 0..60 {
        let focused = browser.client.active_element().await.expect("a focused element");
        if focused.attr("value").await.ok().flatten().as_deref() == Some("done") {
            reached = true;
            break;
        }
        focused.send_keys("\u{e004}").await.expect("Tab");
    }
    assert!(reached, "Tab reaches the approve button");
    let labelled = browser
        .script("return [...document.querySelectorAll('main input:not([type=hidden]), main textarea, main select')].every(f => f.labels && f.labels.length > 0)")
        .await;
    assert_eq!(labelled, json!(true), "every control has a label");

    // A phone's width: nothing wider than the screen but the graph's own scroller.
    browser.client.set_window_size(390, 844).await.expect("resized");
    browser.goto(&server, "/").await;
    assert_eq!(browser.script("return document.documentElement.scrollWidth <= window.innerWidth").await, json!(true));
    browser.screenshot("inbox-phone.png", 390).await;
    browser.goto(&server, "/sessions/pay-xss").await;
    assert_eq!(browser.script("return document.documentElement.scrollWidth <= window.innerWidth").await, json!(true));
    browser.screenshot("session-phone.png", 390).await;
    let _ = browser.client.clone().close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lists_views_search_and_pages_are_links_a_reviewer_follows() {
    let server = serve(false).await;
    for index in 1..=3 {
        server.start_payout(&format!("pay-v{index}")).await;
    }
    server.start_refund("refund-v").await;
    let waiting = server.start("payment", "wait-v", json!({ "message": "Tell me when it is paid." })).await;
    assert_eq!(waiting["status"], "awaiting_input");
    let browser = browser().await;
    browser.sign_in(&server, LEAD).await;
    let rows = "[...document.querySelectorAll('tr[data-session]')].map(row => row.dataset.session).sort().join(' ')";

    // The views are links; the current one is marked.
    browser.click("nav.views a[href*=\"view=inputs\"]").await;
    browser.until(&format!("{rows} === 'wait-v'")).await;
    let current = browser.script("return document.querySelector('nav.views a[aria-current=page]').textContent").await;
    assert_eq!(current, json!("Awaiting input"));
    browser.click("nav.views a[href*=\"view=decisions\"]").await;
    browser.until(&format!("{rows} === 'pay-v1 pay-v2 pay-v3 refund-v'")).await;

    // The search is a GET form: what it finds, and the box keeps the words.
    browser.fill("#f-q", "ORD-1042").await;
    browser.click("form.filters button[type=submit]").await;
    browser.until(&format!("{rows} === 'refund-v'")).await;
    assert_eq!(browser.script("return document.getElementById('f-q').value").await, json!("ORD-1042"));
    browser.screenshot("inbox-search.png", 1280).await;

    // Two at a time: next, next, and back again.
    browser.goto(&server, "/?view=decisions&size=2&order=oldest").await;
    browser.until("document.querySelectorAll('tr[data-session]').length === 2").await;
    let first = browser.script(&format!("return {rows}")).await;
    assert_eq!(browser.script("return document.querySelector('nav.pager a[rel=prev]') === null").await, json!(true));
    browser.screenshot("inbox-paged.png", 1280).await;
    browser.click("nav.pager a[rel=next]").await;
    browser.until(&format!("document.querySelectorAll('tr[data-session]').length === 2 && {rows} !== {first}")).await;
    browser.click("nav.pager a[rel=prev]").await;
    browser.until(&format!("{rows} === {first}")).await;
    let _ = browser.client.clone().close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_object_form_is_filled_and_delivered_without_javascript() {
    let server = serve(false).await;
    let waiting = server.start("claims", "claim-nojs", json!({ "message": "I will file my claim." })).await;
    assert_eq!(waiting["status"], "awaiting_input");
    let browser = browser_without_script().await;
    browser.goto(&server, "/sign-in").await;
    browser.fill("#token", LEAD).await;
    browser.click("form.sign-in button[type=submit]").await;
    // Without page scripts, wait for the sign-in's own answer (the inbox) by its heading,
    // so the next page is not asked for before the cookie is set.
    browser.until_heading("Decision inbox").await;
    browser.goto(&server, "/sessions/claim-nojs").await;
    let time = browser.client.find(Locator::Css("time")).await.expect("a time");
    assert_eq!(time.attr("data-local").await.expect("an attribute"), None, "no page script ran");

    let legend = browser.client.find(Locator::Css("fieldset[data-path=\"claim.vendor\"] > legend")).await;
    assert_eq!(legend.expect("the nested fieldset").text().await.expect("its text"), "vendor");
    browser.fill("#filed-claim-amount", "42.5").await;
    browser.click("#filed-claim-kind option[value=travel]").await;
    browser.click("#filed-claim-reimbursed").await;
    browser.fill("#filed-claim-tags", "train\nberlin").await;
    browser.fill("#filed-claim-vendor-name", "Deutsche Bahn").await;
    browser.fill("#filed-receipt", "{\"number\": \"R-7\"}").await;
    browser.screenshot_at("deliver-object.png", 1280, 3000).await;
    browser.click("form.deliver[aria-label=\"Deliver filed\"] button[type=submit]").await;
    let mut notice = String::new();
    for _ in 0..ATTEMPTS {
        if let Ok(found) = browser.client.find(Locator::Css(".notice")).await {
            notice = found.text().await.unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(notice, "The input was delivered.");
    let shown = server.show("claim-nojs").await;
    assert_eq!(
        shown["variables"]["claim"]["value"],
        json!({ "amount": 42.5, "kind": "travel", "reimbursed": true, "tags": ["train", "berlin"], "vendor": { "name": "Deutsche Bahn" } }),
        "{shown}"
    );
    assert_eq!(shown["variables"]["receipt"]["value"], json!({ "number": "R-7" }));
    let _ = browser.client.clone().close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_sign_in_in_chromium_opens_the_inbox_as_the_identity_the_provider_names() {
    let idp = crate::idp::TestProvider::start().await;
    let server = crate::oidc::serve_for(&idp).await;
    idp.sign_in_as(json!({ "email": "refunds-lead@fernhill.example", "email_verified": true }));
    let browser = browser().await;
    browser.goto(&server, "/sign-in").await;
    // Start, the provider's redirect back with the sealed cookie, the callback's page
    // that moves on to the inbox.
    browser.click("a.button[href='/inbox/oidc/start']").await;
    browser.until_heading("Decision inbox").await;
    let shown = browser.script("return document.body.innerText").await;
    assert!(shown.as_str().is_some_and(|text| text.contains("refunds-lead@fernhill.example")), "{shown}");
    let cookies = browser.client.get_all_cookies().await.expect("the browser's cookies");
    let names: Vec<String> = cookies.iter().map(|cookie| cookie.name().to_string()).collect();
    assert!(names.iter().any(|name| name == "archmax_inbox"), "{names:?}");
    assert!(!names.iter().any(|name| name == "archmax_oidc"), "the sign-in under way was cleared: {names:?}");
    drop(browser);
    server.stop().await;
    idp.stop();
}
