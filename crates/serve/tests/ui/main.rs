//! The decision inbox: over HTTP with `reqwest` (forms, cookies, CSRF, approvers,
//! escaping: [`http`]) and in headless Chromium through chromedriver with `fantoccini`
//! ([`browser`]). The server is the real one on loopback, serving the `specs/` workspace
//! and this test's own (`workspace/`: a payout desk whose review names approvers and
//! evidence, and a payment wait with a typed trigger), with the filesystem store and the tape adapter
//! (`inbox.tape.yaml`).

mod browser;
mod hardening;
mod http;
mod idp;
mod oidc;
mod queue;
mod sessions;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

use archmax_compiler::compile;
use archmax_compiler::lower::BuildInputs;
use archmax_serve::auth::{Auth, token_digest_hex};
use archmax_serve::turns::TurnLimits;
use archmax_serve::webhooks::Connections;
use archmax_serve::{Server, ServerParts};
use archmax_vm::clock::Clock;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::fs::FsStore;

const TAPE: &str = include_str!("inbox.tape.yaml");
/// A small PNG, the payout's chart.
pub const CHART: &[u8] = include_bytes!("chart.png");

/// Tokens: the lead and the care team are refund-desk's approvers, the intern is not.
pub const ADMIN: &str = "admin-secret-of-the-inbox-tests";
pub const LEAD: &str = "lead-secret";
pub const CARE: &str = "care-secret";
pub const INTERN: &str = "intern-secret";
pub const READER: &str = "reader-secret";
/// May start sessions only: not read them, so not sign in to the inbox.
pub const STARTER: &str = "starter-secret";

fn tokens_file() -> String {
    tokens_file_without(&[])
}

/// The tokens file without the tokens in `revoked`.
pub fn tokens_file_without(revoked: &[&str]) -> String {
    [
        ("refunds-lead@fernhill.example", "[\"decide\", \"read\", \"start\"]", LEAD),
        ("care-team@fernhill.example", "[\"decide\", \"read\"]", CARE),
        ("intern@fernhill.example", "[\"decide\", \"read\", \"start\"]", INTERN),
        ("reader", "[\"read\"]", READER),
        ("starter", "[\"start\"]", STARTER),
    ]
    .iter()
    .filter(|(_, _, token)| !revoked.contains(token))
    .map(|(identity, scopes, token)| {
        format!("[[tokens]]\nidentity = \"{identity}\"\nscopes = {scopes}\nsha256 = \"{}\"\n", token_digest_hex(token))
    })
    .collect()
}

fn scratch(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "archmax-inbox-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

fn compiled(root: &Path) -> archmax_compiler::program::Program {
    compile(root, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .map(|compiled| compiled.program)
        .unwrap_or_else(|_| panic!("{} compiles", root.display()))
}

/// The repository's example workspace.
pub fn specs_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs")
}

/// A running server and a client that follows no redirect.
pub struct Running {
    pub base: String,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<bool>>,
    scratch: PathBuf,
    /// Whether stopping removes the scratch folder (another runner may share it).
    owns_scratch: bool,
    /// The server, to change what it serves while it runs.
    pub server: Arc<Server>,
    /// The server's clock, which a test moves.
    pub clock: Arc<TestClock>,
}

/// A clock a test moves (milliseconds since the Unix epoch).
pub struct TestClock(std::sync::atomic::AtomicU64);

impl TestClock {
    /// Moves the clock `seconds` on.
    pub fn advance(&self, seconds: u64) {
        self.0.fetch_add(seconds * 1000, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Serves `specs/` and the test's workspace with tokens (or none, `open`).
pub async fn serve(open: bool) -> Running {
    serve_in(scratch("serve"), open, true, &[]).await
}

/// Serves with tokens behind a reverse proxy at `proxy` (`--trusted-proxy`).
pub async fn serve_behind_proxy(proxy: std::net::IpAddr) -> Running {
    serve_in(scratch("serve"), false, true, &[proxy]).await
}

/// A second runner on the sessions of `running` (the same sessions folder).
pub async fn serve_beside(running: &Running) -> Running {
    serve_in(running.scratch.clone(), false, false, &[]).await
}

/// A runner on PostgreSQL database `target`, with a store of its own (as another process
/// would have): several of them are a fleet.
pub async fn serve_on_postgres(target: &str) -> Running {
    let store = archmax_store_postgres::PgStore::connect(target).await.expect("the runner reaches PostgreSQL");
    serve_on(scratch("serve-pg"), Arc::new(store), (false, true, &[]), None).await
}

/// Makes a runner's OpenID Connect provider from its base URL (`http://127.0.0.1:<port>`).
pub type OidcFor<'a> = &'a dyn Fn(&str) -> archmax_serve::inbox::oidc::Provider;

/// Serves with tokens and the provider `oidc` makes; beside `running` (on its sessions
/// folder) when given.
pub async fn serve_with_oidc(beside: Option<&Running>, oidc: OidcFor<'_>) -> Running {
    let (folder, owns) = match beside {
        Some(running) => (running.scratch.clone(), false),
        None => (scratch("serve-oidc"), true),
    };
    let store = Arc::new(FsStore::for_workspace(&folder).expect("the scratch workspace's seal key"));
    serve_on(folder, store, (false, owns, &[]), Some(oidc)).await
}

async fn serve_in(scratch: PathBuf, open: bool, owns_scratch: bool, proxies: &[std::net::IpAddr]) -> Running {
    let store = Arc::new(FsStore::for_workspace(&scratch).expect("the scratch workspace's seal key"));
    serve_on(scratch, store, (open, owns_scratch, proxies), None).await
}

async fn serve_on(
    scratch: PathBuf,
    store: Arc<dyn archmax_vm::session::SessionStore>,
    (open, owns_scratch, proxies): (bool, bool, &[std::net::IpAddr]),
    oidc: Option<OidcFor<'_>>,
) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    archmax_vm::model::openai::install_tls_provider();
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/workspace");
    // 2025-03-08T12:00:00Z: two days after the refund request, so its window holds.
    let clock = Arc::new(TestClock(std::sync::atomic::AtomicU64::new(1_741_435_200_000)));
    let auth = if open { Auth::Open } else { Auth::configure(Some(ADMIN), Some(&tokens_file())).expect("tokens") };
    let server = Server::new(ServerParts {
        programs: vec![compiled(&own), compiled(&specs_root())],
        store,
        model: Arc::new(Tape::parse("inbox", TAPE).expect("the tape parses")),
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        pricing: PricingTable::default(),
        root: specs_root(),
        auth,
        limits: TurnLimits::default(),
        body_limit: 1024 * 1024,
        tools: Default::default(),
        context: Default::default(),
        budgets: Default::default(),
    })
    .expect("a server")
    .with_settings(inbox_settings(), Connections::default())
    .with_trusted_proxies(proxies.to_vec());
    let server = Arc::new(match oidc {
        Some(make) => server.with_oidc(make(&base)),
        None => server,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let served = tokio::spawn(archmax_serve::serve_with(
        listener,
        Arc::clone(&server),
        shutdown,
        archmax_serve::ConnectionLimits { grace: std::time::Duration::from_secs(5), ..Default::default() },
    ));
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client");
    Running { base, client, stop: Some(stop), served, scratch, owns_scratch, server, clock }
}

/// The test runner's `archmax.toml`: the claims workflow's `claim` input has a shape
/// (its `receipt` has none, so it stays a JSON box).
pub const SETTINGS: &str = r#"
[inbox.workflows.claims.fields.claim]
fields = [
  { name = "amount", type = "number", label = "Amount (EUR)", required = true },
  { name = "kind", type = "string", enum = ["travel", "meal", "equipment"], required = true },
  { name = "spent_on", type = "date" },
  { name = "reimbursed", type = "boolean", label = "Already reimbursed" },
  { name = "tags", type = "array" },
  { name = "vendor", type = "object", fields = [
      { name = "name", type = "string", required = true },
      { name = "country", type = "string" },
  ] },
]
"#;

fn inbox_settings() -> archmax_config::settings::RunnerSettings {
    let (settings, problems) =
        archmax_config::settings::parse_runner_settings(archmax_program::source::FileId(0), SETTINGS);
    assert!(problems.is_empty(), "{problems:?}");
    settings
}

/// What a page answered.
pub struct Page {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers.get(LOCATION).and_then(|value| value.to_str().ok()).unwrap_or_default()
    }

    /// The value of the first `name="csrf"` field.
    pub fn csrf(&self) -> String {
        let marker = r#"name="csrf" value=""#;
        let start = self.body.find(marker).map(|at| at + marker.len()).expect("a form with a CSRF token");
        self.body[start..].split('"').next().unwrap_or_default().to_string()
    }

    /// The `name=value` of the cookie `name` this answer sets.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find(|value| value.starts_with(&format!("{name}=")))
            .map(str::to_string)
    }
}

async fn page_of(response: reqwest::Response) -> Page {
    let status = response.status();
    let headers = response.headers().clone();
    Page { status, headers, body: response.text().await.unwrap_or_default() }
}

impl Running {
    pub async fn get(&self, path: &str, cookie: Option<&str>) -> Page {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(cookie) = cookie {
            request = request.header(COOKIE, cookie);
        }
        page_of(request.send().await.expect("the server answers")).await
    }

    pub async fn post_form(&self, path: &str, cookie: Option<&str>, fields: &[(&str, &str)]) -> Page {
        let body: String = fields
            .iter()
            .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
            .collect::<Vec<_>>()
            .join("&");
        self.post_encoded(path, cookie, body.into_bytes()).await
    }

    /// Posts `body` as a form's body, as it is (to send what no browser would).
    pub async fn post_encoded(&self, path: &str, cookie: Option<&str>, body: Vec<u8>) -> Page {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(cookie) = cookie {
            request = request.header(COOKIE, cookie);
        }
        page_of(request.send().await.expect("the server answers")).await
    }

    /// Signs in with `token`: the cookie header to send from then on.
    pub async fn sign_in(&self, token: &str) -> String {
        let form = self.get("/sign-in", None).await;
        assert_eq!(form.status, StatusCode::OK, "{}", form.body);
        let nonce = form.cookie("archmax_sign_in").expect("the sign-in cookie");
        let nonce = nonce.split(';').next().unwrap_or_default().to_string();
        let signed = self.post_form("/sign-in", Some(&nonce), &[("csrf", &form.csrf()), ("token", token)]).await;
        assert_eq!((signed.status, signed.location()), (StatusCode::SEE_OTHER, "/"), "{}", signed.body);
        let cookie = signed.cookie("archmax_inbox").expect("the token cookie");
        cookie.split(';').next().unwrap_or_default().to_string()
    }

    /// Starts a session through the API and waits for its first turn to end.
    pub async fn start(&self, workflow: &str, session: &str, body: Value) -> Value {
        let mut body = body;
        body["sessionId"] = json!(session);
        let response = self
            .client
            .post(format!("{}/v1/workflows/{workflow}/sessions?wait=120", self.base))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
            .await
            .expect("the server answers");
        let status = response.status();
        let shown: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(status, StatusCode::OK, "{shown}");
        shown
    }

    /// A session as the API shows it.
    pub async fn show(&self, session: &str) -> Value {
        let response = self
            .client
            .get(format!("{}/v1/sessions/{session}", self.base))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("the server answers");
        response.json().await.unwrap_or(Value::Null)
    }

    /// Starts a payout that parks for review, then puts the chart its decision names
    /// among the session's files (a model writes text only).
    pub async fn start_payout(&self, session: &str) -> Value {
        let shown = self.start("payout", session, json!({ "message": "Pay invoice 7." })).await;
        assert_eq!(shown["status"], "awaiting_decision", "{shown}");
        let store = FsStore::for_workspace(&self.scratch).expect("the scratch workspace's seal key");
        let files = archmax_vm::session::SessionStore::files(&store, session).expect("the session's files");
        files.write("scratchpad/chart.png", CHART).expect("the chart");
        shown
    }

    /// Writes `bytes` to `path` among the files of `session` (as a later state would).
    pub fn write_file(&self, session: &str, path: &str, bytes: &[u8]) {
        let store = FsStore::for_workspace(&self.scratch).expect("the scratch workspace's seal key");
        let files = archmax_vm::session::SessionStore::files(&store, session).expect("the session's files");
        files.write(path, bytes).expect("the file");
    }

    pub async fn start_refund(&self, session: &str) -> Value {
        let body = json!({
            "message": "Refund request from Jonas Weber for ORD-1042: two bowls from the stoneware set arrived cracked.",
            "variables": {
                "order_id": "ORD-1042",
                "customer_email": "jonas.weber@example.net",
                "requested_on": "2025-03-06",
                "reason": "Two of the four stoneware bowls arrived cracked. The olive wood board is fine.",
            },
        });
        let shown = self.start("refund-desk", session, body).await;
        assert_eq!(shown["status"], "awaiting_decision", "{shown}");
        shown
    }

    /// The folder of the runner's shared records of `kind` (`inbox-session`, ...), as a
    /// local user who can read the sessions folder sees it.
    pub fn records_folder(&self, kind: &str) -> PathBuf {
        self.scratch.join("sessions").join("+records").join(kind)
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.served.await;
        if self.owns_scratch {
            let _ = std::fs::remove_dir_all(&self.scratch);
        }
    }
}

pub fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}
