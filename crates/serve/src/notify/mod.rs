//! Notifications: the outgoing webhooks of `[notify.<name>]` in `archmax.toml`, called
//! when a session parks or fails, or a decision waits longer than a notifier's
//! `waiting_after`.
//!
//! ```text
//! runtime events ─▶ NotifyListener (turn-end of a root session: parked or failed)  ─┐
//! waiting scan (waiting.rs: decisions pending past the threshold, claimed in store) ─┼─▶ queue ─▶ workers ─▶ deliver.rs
//!                                                                                    │   (bounded)  (a few at once, retries)
//!                                                                                    └─ full: dropped, warned, counted
//! ```
//!
//! Each delivery's outcome is counted (`archmax_notifications_total` by notifier and
//! outcome: `delivered`, `failed`, `dropped`), logged with the session id, and kept among
//! the last [`RECENT_KEPT`] of its notifier ([`Notifiers::recent`]). Bodies are built in
//! [`payload`]; a link to the session's page needs `[serve] public_url`, and without it a
//! notification carries none (`sessionUrl: null`), which the runner warns of at start.
//!
//! The one thing to know: **nothing here can hold up a turn**. The listener runs inside
//! the runtime's event fan-out, so it only ever `try_send`s onto a bounded queue; a full
//! queue drops the notification with a warning and a count. Everything that waits (the
//! network, retries, backoff) happens on the workers' own tasks. Parked and failed
//! notifications are sent by the runner that ran the turn, so a fleet sends each once;
//! for `waiting`, see [`waiting`].

mod deliver;
pub mod payload;
pub mod waiting;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use archmax_config::settings::RunnerSettings;
use archmax_config::settings::notify::{NotifyEvent, NotifyTarget, http_url_problem};
use archmax_vm::events::{Envelope, Event, Listener};

use crate::hub::root_session;
use crate::metrics::Metrics;
pub use deliver::Outcome;
pub use payload::Notification;

/// How a delivery ended: the `outcome` of its record and of `archmax_notifications_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryOutcome {
    /// A 2xx answer.
    Delivered,
    /// No 2xx answer within its attempts, or an answer that is not retried.
    Failed,
    /// Never sent: the queue was full.
    Dropped,
}

impl DeliveryOutcome {
    pub const ALL: [DeliveryOutcome; 3] =
        [DeliveryOutcome::Delivered, DeliveryOutcome::Failed, DeliveryOutcome::Dropped];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Failed => "failed",
            DeliveryOutcome::Dropped => "dropped",
        }
    }
}
/// Notifications waiting to be sent, all notifiers together; past it they are dropped.
pub const QUEUE_CAPACITY: usize = 1024;
/// Deliveries in flight at once.
const WORKERS: usize = 8;
/// The outcomes kept per notifier.
pub const RECENT_KEPT: usize = 32;
/// The shortest key accepted for signing, in bytes (as for incoming webhooks).
pub const MIN_SECRET_BYTES: usize = crate::webhooks::MIN_SECRET_BYTES;

/// One notifier, ready to send.
struct Configured {
    notifier: archmax_config::settings::notify::Notifier,
    url: String,
    secret: Option<Vec<u8>>,
}

/// One notification for one notifier, on the queue.
struct Job {
    notifier: usize,
    notification: Notification,
}

/// How one delivery ended, as `GET /v1/admin/notifications` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRecord {
    pub notifier: String,
    pub session: String,
    /// `parked`, `failed` or `waiting`.
    #[schema(value_type = String)]
    pub event: &'static str,
    pub outcome: DeliveryOutcome,
    pub attempts: u32,
    /// The receiver's last status, when it answered.
    pub status: Option<u16>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it ended, in milliseconds since the epoch.
    pub at_ms: u64,
}

/// Every configured notifier, the queue, and what became of the last deliveries.
pub struct Notifiers {
    configured: Vec<Configured>,
    public_url: Option<String>,
    client: Option<reqwest::Client>,
    queue: Option<mpsc::Sender<Job>>,
    receiver: Mutex<Option<mpsc::Receiver<Job>>>,
    recent: Mutex<BTreeMap<String, VecDeque<DeliveryRecord>>>,
    metrics: Arc<Metrics>,
    clock: Arc<dyn archmax_vm::clock::Clock>,
}

impl Default for Notifiers {
    fn default() -> Notifiers {
        Notifiers {
            configured: Vec::new(),
            public_url: None,
            client: None,
            queue: None,
            receiver: Mutex::new(None),
            recent: Mutex::new(BTreeMap::new()),
            metrics: Arc::new(Metrics::default()),
            clock: Arc::new(archmax_vm::clock::SystemClock),
        }
    }
}

impl std::fmt::Debug for Notifiers {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a key or a URL (a URL may carry a token).
        formatter.debug_list().entries(self.configured.iter().map(|entry| &entry.notifier.name)).finish()
    }
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Notifiers {
    /// Reads each notifier's key and `url_env` through `env`: an unset or short key, or a
    /// variable that holds no http(s) URL, is an error naming the notifier and the
    /// variable (never its value), so a runner never starts with a notifier that cannot send.
    pub fn configure(settings: &RunnerSettings, env: impl Fn(&str) -> Option<String>) -> Result<Notifiers, String> {
        let mut configured = Vec::new();
        for (name, notifier) in &settings.notify {
            let url = match &notifier.target {
                NotifyTarget::Url(url) => url.clone(),
                NotifyTarget::UrlEnv(variable) => match env(variable).filter(|url| !url.trim().is_empty()) {
                    None => {
                        return Err(format!(
                            "notifier `{name}` takes its URL from {variable}, which is not set; set it, or remove [notify.{name}] from archmax.toml"
                        ));
                    }
                    Some(url) => match http_url_problem(url.trim()) {
                        Some(problem) => {
                            return Err(format!(
                                "notifier `{name}`: the URL in {variable} {problem}; give an http(s) URL without credentials"
                            ));
                        }
                        None => url.trim().to_string(),
                    },
                },
            };
            let secret = match &notifier.secret_env {
                None => None,
                Some(variable) => match env(variable) {
                    Some(secret) if secret.len() >= MIN_SECRET_BYTES => Some(secret.into_bytes()),
                    Some(secret) if !secret.is_empty() => {
                        return Err(format!(
                            "notifier `{name}`: the key in {variable} is {} bytes; use at least {MIN_SECRET_BYTES} random bytes (such as `openssl rand -hex 32`)",
                            secret.len()
                        ));
                    }
                    _ => {
                        return Err(format!(
                            "notifier `{name}` signs with the key in {variable}, which is not set; set it, or remove [notify.{name}] from archmax.toml"
                        ));
                    }
                },
            };
            configured.push(Configured { notifier: notifier.clone(), url, secret });
        }
        let mut notifiers = Notifiers { configured, public_url: settings.public_url.clone(), ..Notifiers::default() };
        if !notifiers.configured.is_empty() {
            notifiers.client = Some(deliver::client()?);
            let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
            notifiers.queue = Some(sender);
            notifiers.receiver = Mutex::new(Some(receiver));
        }
        Ok(notifiers)
    }

    /// Counts into `metrics` and dates records by `clock` (the server's own).
    pub(crate) fn attach(&mut self, metrics: Arc<Metrics>, clock: Arc<dyn archmax_vm::clock::Clock>) {
        for entry in &self.configured {
            metrics.notifier_configured(&entry.notifier.name);
        }
        self.metrics = metrics;
        self.clock = clock;
    }

    pub fn is_empty(&self) -> bool {
        self.configured.is_empty()
    }

    /// Whether notifications link to the session's page (`[serve] public_url` is set).
    pub fn links(&self) -> bool {
        self.public_url.is_some()
    }

    /// Every notifier's name with its last deliveries, oldest first.
    pub fn all_recent(&self) -> Vec<(String, Vec<DeliveryRecord>)> {
        self.configured.iter().map(|entry| (entry.notifier.name.clone(), self.recent(&entry.notifier.name))).collect()
    }

    /// The last deliveries of `notifier`, oldest first.
    pub fn recent(&self, notifier: &str) -> Vec<DeliveryRecord> {
        locked(&self.recent).get(notifier).map(|kept| kept.iter().cloned().collect()).unwrap_or_default()
    }

    /// Queues `notification` for every notifier that wants it; never waits. A full queue
    /// drops it, warned and counted per notifier.
    pub fn notify(&self, notification: &Notification) {
        for (index, entry) in self.configured.iter().enumerate() {
            if entry.notifier.wants(notification.event, &notification.workflow) {
                self.enqueue(index, notification);
            }
        }
    }

    /// Queues `notification` for the notifier `name` alone (a `waiting` one it claimed).
    pub(crate) fn notify_one(&self, name: &str, notification: &Notification) {
        if let Some(index) = self.configured.iter().position(|entry| entry.notifier.name == name) {
            self.enqueue(index, notification);
        }
    }

    fn enqueue(&self, index: usize, notification: &Notification) {
        let (Some(queue), Some(entry)) = (&self.queue, self.configured.get(index)) else { return };
        let job = Job { notifier: index, notification: notification.clone() };
        if queue.try_send(job).is_err() {
            tracing::warn!(
                notifier = entry.notifier.name.as_str(),
                session = notification.session.as_str(),
                event = notification.event.as_str(),
                "the notification queue is full; this notification is dropped"
            );
            self.record(&entry.notifier.name, notification, DeliveryOutcome::Dropped, 0, None, None);
        }
    }

    fn record(
        &self,
        notifier: &str,
        notification: &Notification,
        outcome: DeliveryOutcome,
        attempts: u32,
        status: Option<u16>,
        reason: Option<String>,
    ) {
        self.metrics.notification(notifier, outcome.as_str());
        let record = DeliveryRecord {
            notifier: notifier.to_string(),
            session: notification.session.clone(),
            event: notification.event.as_str(),
            outcome,
            attempts,
            status,
            reason,
            at_ms: self.clock.now_ms(),
        };
        let mut recent = locked(&self.recent);
        let kept = recent.entry(notifier.to_string()).or_default();
        if kept.len() == RECENT_KEPT {
            kept.pop_front();
        }
        kept.push_back(record);
    }

    /// Sends what is queued, a few at once, until the queue closes or `stopping` turns true.
    pub async fn run(self: Arc<Self>, mut stopping: tokio::sync::watch::Receiver<bool>) {
        let Some(mut receiver) = locked(&self.receiver).take() else { return };
        let slots = Arc::new(Semaphore::new(WORKERS));
        loop {
            let job = tokio::select! {
                job = receiver.recv() => job,
                _ = stopping.changed() => None,
            };
            let Some(job) = job else { return };
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { return };
            let notifiers = Arc::clone(&self);
            tokio::spawn(async move {
                notifiers.send(job).await;
                drop(slot);
            });
        }
    }

    async fn send(&self, job: Job) {
        let (Some(entry), Some(client)) = (self.configured.get(job.notifier), &self.client) else { return };
        let notifier = &entry.notifier;
        let notification = &job.notification;
        let link = payload::session_link(self.public_url.as_deref(), &notification.session);
        let body = payload::body(notifier.preset, &notifier.name, notification, link.as_deref());
        let body = serde_json::to_vec(&body).unwrap_or_default();
        let target = deliver::Target {
            client,
            url: &entry.url,
            secret: entry.secret.as_deref(),
            timeout: Duration::from_millis(notifier.timeout_ms),
            max_attempts: notifier.max_attempts,
        };
        let delivery_id = delivery_id();
        let clock = Arc::clone(&self.clock);
        let now_seconds = move || i64::try_from(clock.now_ms() / 1000).unwrap_or(i64::MAX);
        let event = notification.event.as_str();
        let outcome = deliver::deliver(&target, &delivery_id, event, &body, now_seconds).await;
        let (name, session) = (notifier.name.as_str(), notification.session.as_str());
        match &outcome {
            Outcome::Delivered { attempts, status } => {
                tracing::info!(notifier = name, session, event, attempts, status, "notification delivered");
                self.record(name, notification, DeliveryOutcome::Delivered, *attempts, Some(*status), None);
            }
            Outcome::Failed { attempts, status, reason } => {
                tracing::warn!(
                    notifier = name,
                    session,
                    event,
                    attempts,
                    status,
                    reason = reason.as_str(),
                    "notification not delivered"
                );
                self.record(name, notification, DeliveryOutcome::Failed, *attempts, *status, Some(reason.clone()));
            }
        }
    }

    /// The listener that turns a root session's parked or failed turn into a notification.
    pub(crate) fn listener(self: &Arc<Self>) -> Box<dyn Listener> {
        Box::new(NotifyListener { notifiers: Arc::clone(self), parks: HashMap::new() })
    }

    /// The notifiers that want `waiting` notifications, with their thresholds.
    pub(crate) fn waiting(&self) -> impl Iterator<Item = &archmax_config::settings::notify::Notifier> {
        self.configured
            .iter()
            .map(|entry| &entry.notifier)
            .filter(|notifier| notifier.on.contains(&NotifyEvent::Waiting))
    }
}

/// A random id for one delivery (all its attempts).
fn delivery_id() -> String {
    let mut bytes = [0u8; 16];
    // Should the random source fail, the id is zeros: it only helps a receiver drop repeats.
    let _ = getrandom::fill(&mut bytes);
    archmax_program::hex::hex(&bytes)
}

/// What the last `parked` event of a root session said, until its turn ends.
struct ParkSeen {
    awaiting: String,
    reason: Option<String>,
}

/// Sessions whose park the listener remembers until their turn ends.
const PARKS_KEPT: usize = 4096;

struct NotifyListener {
    notifiers: Arc<Notifiers>,
    parks: HashMap<String, ParkSeen>,
}

impl Listener for NotifyListener {
    fn on_event(&mut self, envelope: &Envelope) {
        let Some(session) = envelope.session_id.as_deref() else { return };
        let root = root_session(session);
        match &envelope.event {
            Event::Parked { awaiting, reason, .. } => {
                if self.parks.len() >= PARKS_KEPT {
                    // Turns cut between their park and their end leave entries behind.
                    self.parks.clear();
                }
                self.parks.insert(root.to_string(), ParkSeen { awaiting: awaiting.clone(), reason: reason.clone() });
            }
            // A child's turn ends inside its caller's: only the root's end is the session's.
            Event::TurnEnd { status, state, code, reason, .. } if session == root => {
                let park = self.parks.remove(root);
                let event = match status.as_str() {
                    // Only a turn that parked: a reply-only turn ends parked on the same
                    // record, which was notified when it was made.
                    "awaiting_decision" | "awaiting_input" if park.is_some() => NotifyEvent::Parked,
                    "failed" => NotifyEvent::Failed,
                    _ => return,
                };
                let Some(workflow) = self.notifiers.metrics.workflow_of_turn(root) else { return };
                let (awaiting, park_reason) = match park {
                    Some(park) => (Some(park.awaiting), park.reason),
                    None => (None, None),
                };
                self.notifiers.notify(&Notification {
                    event,
                    session: root.to_string(),
                    workflow,
                    status: status.clone(),
                    state: Some(state.clone()),
                    awaiting,
                    reason: reason.clone().or(park_reason),
                    code: code.clone(),
                    waiting_since: None,
                    at_ms: envelope.ts,
                });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use archmax_config::settings::parse_runner_settings;
    use archmax_program::source::FileId;

    const KEY: &str = "zebra-key-of-sixteen-bytes-or-more";

    fn settings(text: &str) -> RunnerSettings {
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        settings
    }

    fn parked(session: &str) -> Notification {
        Notification {
            event: NotifyEvent::Parked,
            session: session.into(),
            workflow: "desk".into(),
            status: "awaiting_decision".into(),
            state: None,
            awaiting: None,
            reason: None,
            code: None,
            waiting_since: None,
            at_ms: 0,
        }
    }

    #[test]
    fn an_unset_or_short_key_or_a_bad_url_variable_stops_the_start_naming_the_variable_not_its_value() {
        let signed = settings("[notify.ops]\nurl = \"https://x.test/hook\"\nsecret_env = \"OPS_KEY\"\n");
        let unset = Notifiers::configure(&signed, |_| None).expect_err("unset");
        assert!(unset.contains("notifier `ops`") && unset.contains("OPS_KEY") && unset.contains("not set"), "{unset}");
        let short = Notifiers::configure(&signed, |_| Some("short".into())).expect_err("short");
        assert!(short.contains("5 bytes") && short.contains("at least 16"), "{short}");
        let configured = Notifiers::configure(&signed, |_| Some(KEY.into())).expect("set");
        assert!(!format!("{configured:?}").contains("zebra"), "Debug shows no key");
        assert!(configured.links() == signed.public_url.is_some());

        let from_env = settings("[notify.team]\nurl_env = \"TEAM_URL\"\npreset = \"slack\"\n");
        let unset = Notifiers::configure(&from_env, |_| None).expect_err("unset");
        assert!(unset.contains("TEAM_URL") && unset.contains("not set"), "{unset}");
        let bad = Notifiers::configure(&from_env, |_| Some("ftp://hooks.slack.test/T0/B0/secret-token".into()))
            .expect_err("not http");
        assert!(bad.contains("TEAM_URL") && bad.contains("not an http"), "{bad}");
        assert!(!bad.contains("secret-token"), "the value is never shown: {bad}");
        let good = Notifiers::configure(&from_env, |_| Some("https://hooks.slack.test/T0/B0/secret-token".into()))
            .expect("an https URL");
        assert!(!format!("{good:?}").contains("secret-token"), "Debug shows no URL");
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_notification_counts_it_and_never_waits() {
        let settings = settings("[notify.ops]\nurl = \"https://x.test/hook\"\nsecret_env = \"OPS_KEY\"\n");
        let mut notifiers = Notifiers::configure(&settings, |_| Some(KEY.into())).expect("configured");
        let metrics = Arc::new(Metrics::default());
        notifiers.attach(Arc::clone(&metrics), Arc::new(archmax_vm::clock::FixedClock(5)));
        // No worker runs: the queue fills, and the next one is dropped at once.
        for index in 0..=QUEUE_CAPACITY {
            notifiers.notify(&parked(&format!("s-{index}")));
        }
        let recent = notifiers.recent("ops");
        assert_eq!(recent.len(), 1, "{recent:?}");
        assert_eq!(
            (recent[0].outcome, recent[0].session.as_str(), recent[0].at_ms),
            (DeliveryOutcome::Dropped, "s-1024", 5)
        );
        let store = archmax_vm::session::memory::MemoryStore::new();
        let shown = metrics.render(&store, 0).await;
        assert!(shown.contains("archmax_notifications_total{notifier=\"ops\",outcome=\"dropped\"} 1"), "{shown}");
        assert!(shown.contains("archmax_notifications_total{notifier=\"ops\",outcome=\"delivered\"} 0"), "{shown}");
        // A notification no notifier wants is not queued at all.
        let mut other = parked("s-x");
        other.event = NotifyEvent::Waiting;
        notifiers.notify(&other);
        assert_eq!(notifiers.recent("ops").len(), 1);
    }

    #[tokio::test]
    async fn a_runner_without_notifiers_shows_no_notification_metrics() {
        let metrics = Metrics::default();
        let shown = metrics.render(&archmax_vm::session::memory::MemoryStore::new(), 0).await;
        assert!(!shown.contains("archmax_notifications_total"), "{shown}");
    }

    #[test]
    fn only_a_root_turn_that_parked_or_failed_is_notified_and_a_reply_only_turn_is_not() {
        use archmax_vm::events::Level;
        let settings = settings("[notify.ops]\nurl = \"https://x.test/hook\"\nsecret_env = \"OPS_KEY\"\n");
        let mut notifiers = Notifiers::configure(&settings, |_| Some(KEY.into())).expect("configured");
        let metrics = Arc::new(Metrics::default());
        notifiers.attach(Arc::clone(&metrics), Arc::new(archmax_vm::clock::FixedClock(5)));
        metrics.turn_admitted("s1", "desk");
        let notifiers = Arc::new(notifiers);
        let mut listener = notifiers.listener();
        let mut send = |session: &str, event: Event| {
            listener.on_event(&Envelope {
                seq: 0,
                ts: 7,
                level: Level::Info,
                session_id: Some(session.to_string()),
                sub_workflow_dispatch_id: None,
                event,
            });
        };
        let turn_end = |status: &str| Event::TurnEnd {
            status: status.to_string(),
            state: "review".into(),
            terminal: false,
            code: None,
            reason: None,
        };
        let parked = || Event::Parked {
            state: "review".into(),
            awaiting: "decision".into(),
            reason: Some("over the limit".into()),
            resume_at: None,
            call_id: None,
        };
        send("s1", parked());
        send("s1~1", turn_end("completed"));
        send("s1", turn_end("awaiting_decision"));
        // A reply-only turn: it ends parked, but parked nothing.
        send("s1", turn_end("awaiting_decision"));
        // A child's failure is not its caller's end.
        send("s1~2", turn_end("failed"));
        send("s1", turn_end("failed"));
        let mut queue = locked(&notifiers.receiver).take().expect("the queue");
        let first = queue.try_recv().expect("the park").notification;
        assert_eq!((first.event, first.session.as_str(), first.workflow.as_str()), (NotifyEvent::Parked, "s1", "desk"));
        assert_eq!(
            (first.awaiting.as_deref(), first.reason.as_deref(), first.at_ms),
            (Some("decision"), Some("over the limit"), 7)
        );
        let second = queue.try_recv().expect("the failure").notification;
        assert_eq!((second.event, second.session.as_str()), (NotifyEvent::Failed, "s1"));
        assert!(queue.try_recv().is_err(), "nothing else");
    }
}
