//! The live record of each session's events, for `GET /v1/sessions/{id}/events` and for
//! knowing when a turn was accepted.
//!
//! The hub listens on the runtime's [`EventSink`](archmax_vm::events::EventSink): every
//! envelope is numbered within its root session (a child `<id>~<n>` counts with its
//! root), kept in a bounded buffer, and announced on the session's watch channel (and
//! counted on one channel for all sessions, [`Hub::watch_all`], which the inbox's live
//! list follows). A reader resumes after the last number it saw (`Last-Event-ID`).
//!
//! On a store a fleet shares (one with an [`EventLog`]), the events are the store's: the
//! listener also stages each one there, the store makes it durable with the session's
//! next commit and numbers it, and streams read the committed events back from the store
//! ([`Hub::since_anywhere`]), so a stream on any runner shows every turn of the session
//! wherever it ran, with the same ids, resumable with `Last-Event-ID` on any runner. A
//! task per runner ([`Hub::follow`]) listens for other runners' commits and wakes the
//! streams of the sessions they wrote events for; streams also look again every
//! [`SHARED_POLL`] in case a notification was missed. The in-memory buffer then only tells
//! a request that its turn was accepted and the inbox that something changed.
//!
//! The one thing to know: the in-memory buffer is bounded ([`EVENTS_KEPT`] per session,
//! [`SESSIONS_KEPT`] sessions, the least recently active dropped first): on a store one
//! process uses, a reader that fell further behind, or reconnects after a restart, is
//! told where its stream restarts by the first id it receives. There a session's ids
//! grow by one from a start taken from the clock ([`numbering_start`]), never from 1, so
//! an id an earlier process gave is below every id of this one (unless the system clock
//! was set back between them), and resuming with it sends every event kept rather than
//! skipping some. On a shared store, what a
//! stream shows is what committed: an event of a runner that died before its next commit
//! is shown nowhere.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use archmax_vm::events::{Envelope, Listener};
use archmax_vm::session::event_log::EventLog;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Events kept per session.
pub const EVENTS_KEPT: usize = 2048;
/// Sessions whose events are kept.
pub const SESSIONS_KEPT: usize = 4096;
/// The most bytes of events kept per session: a hostile model's 10 MiB tool arguments
/// must not become gigabytes held for a stream.
pub const SESSION_BYTES_KEPT: usize = 4 * 1024 * 1024;
/// The most bytes of events kept for all sessions together.
pub const HUB_BYTES_KEPT: usize = 256 * 1024 * 1024;
/// An event larger than this is kept without its large fields (marked `truncated`);
/// the session's transcript has them whole.
pub const EVENT_BYTES_KEPT: usize = 64 * 1024;

/// How often a stream on a shared store looks for new events without being told.
pub const SHARED_POLL: std::time::Duration = std::time::Duration::from_secs(2);
/// The most events one read from a shared store hands a stream.
const SHARED_PAGE: usize = 256;
/// The most bytes of events one read hands a stream (past the first event).
const SHARED_PAGE_BYTES: usize = 1024 * 1024;

/// One numbered event: its id within the session and its JSON.
#[derive(Clone, Debug)]
pub struct NumberedEvent {
    pub id: u64,
    pub json: String,
}

struct SessionEvents {
    /// The number of the last event.
    last: u64,
    buffer: VecDeque<NumberedEvent>,
    /// The bytes of JSON in `buffer`.
    bytes: usize,
    announce: watch::Sender<u64>,
    /// Changes when events of the session committed on any runner (shared store only):
    /// what wakes its streams. Kept apart from `announce`, which says that a turn *here*
    /// made progress (a request waiting for its turn to be accepted must not take
    /// another runner's commit for its own).
    committed: watch::Sender<u64>,
    /// When it last had an event, in hub ticks (for eviction).
    touched: u64,
}

impl SessionEvents {
    fn new(last: u64) -> SessionEvents {
        SessionEvents {
            last,
            buffer: VecDeque::new(),
            bytes: 0,
            announce: watch::channel(0).0,
            committed: watch::channel(0).0,
            touched: 0,
        }
    }
}

#[derive(Default)]
struct HubState {
    sessions: HashMap<String, SessionEvents>,
    ticks: u64,
    /// The bytes of JSON kept across all sessions.
    bytes: usize,
    /// The highest event number this hub gave (numbering of its own only): a session
    /// whose entry was dropped and made again numbers on above it.
    highest: u64,
}

/// Where a session's numbering starts when this process numbers its events (a store
/// one process uses): above the milliseconds since the epoch times 1,000 when the
/// session's entry is made, and above every number this hub gave before.
///
/// A number from 1 would start again with every process (and with every entry the
/// buffer dropped), and a client resuming with an id of the old numbering would be
/// sent only the new events numbered above it: silently missing the others. Numbers
/// that grow with the clock put every id an earlier process gave below the new ones
/// (an earlier process would have had to give one session more than a thousand events
/// a millisecond for its numbers to reach them), so such a client is sent every event
/// kept.
///
/// A clock that went back since the earlier process (a step of the system clock) puts
/// the new numbers below some old ones: a client whose id falls among the new ones is
/// sent only the events above it. A clock past 2255 is taken as that year, so ids stay
/// exact in a JavaScript number and far below what `Last-Event-ID` takes (2^63 - 1).
fn numbering_start(highest: u64) -> u64 {
    // 2^53 less room for 2^40 events after the start: the year 2255, in milliseconds.
    const LATEST_MILLIS: u64 = ((1 << 53) - (1 << 40)) / 1000;
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(LATEST_MILLIS));
    (millis.min(LATEST_MILLIS) * 1000).max(highest)
}

/// Every session's recent events.
#[derive(Clone, Default)]
pub struct Hub {
    state: Arc<Mutex<HubState>>,
    /// How many events were recorded, all sessions together (the inbox's live list).
    recorded: Arc<watch::Sender<u64>>,
    /// The store's events, on a store a fleet shares.
    shared: Option<Arc<dyn EventLog>>,
}

/// The session whose stream an event belongs to.
pub fn root_session(session: &str) -> &str {
    session.split('~').next().unwrap_or(session)
}

impl Hub {
    /// A hub whose streams read `log` when the store keeps events for a fleet (`Some`),
    /// else its own buffer.
    pub fn shared_through(log: Option<Arc<dyn EventLog>>) -> Hub {
        Hub { shared: log, ..Hub::default() }
    }

    /// Whether streams read the store's events.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The session's events after `after`, oldest first: the store's committed ones on a
    /// shared store (at most a page; an error reading them is logged and reads as none
    /// for now), else the kept ones.
    pub async fn since_anywhere(&self, session: &str, after: u64) -> Vec<NumberedEvent> {
        let Some(log) = &self.shared else { return self.since(session, after) };
        match log.after(root_session(session), after, SHARED_PAGE).await {
            Ok(events) => {
                // A page holds at most about a MiB of events (at least one).
                let mut bytes = 0;
                events
                    .into_iter()
                    .take_while(|event| {
                        let first = bytes == 0;
                        bytes += event.json.len();
                        first || bytes <= SHARED_PAGE_BYTES
                    })
                    .map(|event| NumberedEvent { id: event.id, json: event.json })
                    .collect()
            }
            Err(error) => {
                tracing::warn!(session, "the session's events could not be read from the store: {error}");
                Vec::new()
            }
        }
    }

    /// The number of the session's last event: the store's last committed one on a
    /// shared store, else [`Hub::last`]; 0 when the store could not say.
    pub async fn last_anywhere(&self, session: &str) -> u64 {
        self.last_known(session).await.unwrap_or(0)
    }

    /// [`Hub::last_anywhere`], or `None` when the store could not say (logged).
    pub async fn last_known(&self, session: &str) -> Option<u64> {
        let Some(log) = &self.shared else { return Some(self.last(session)) };
        match log.last(root_session(session)).await {
            Ok(last) => Some(last),
            Err(error) => {
                tracing::warn!(session, "the session's last event could not be read from the store: {error}");
                None
            }
        }
    }

    /// Wakes the streams of `root` and the inbox's live list: events of it committed
    /// somewhere.
    fn touch(&self, root: &str, last: u64) {
        // Only sessions someone here follows: a fleet's other sessions make no entries.
        if let Some(events) = self.lock().sessions.get(root) {
            events.committed.send_replace(last);
        }
        self.recorded.send_modify(|count| *count += 1);
    }

    /// A receiver that changes when a stream of the session has something new to read:
    /// a commit of its events on any runner (shared store), else a new event here.
    pub fn watch_stream(&self, session: &str) -> watch::Receiver<u64> {
        let mut state = self.lock();
        let events = self.entry(&mut state, root_session(session));
        if self.shared.is_some() { events.committed.subscribe() } else { events.announce.subscribe() }
    }

    /// On a shared store, whether this runner can hear the events other runners commit:
    /// [`EventLog::check_follow`] (a feed that hears its own announcement). `serve` checks it before it listens, so a feed target
    /// that cannot be reached stops the start instead of leaving a runner whose streams
    /// never show another runner's turns. Always `Ok` on a store one process uses.
    pub async fn check_follow(&self) -> Result<(), String> {
        let Some(log) = &self.shared else { return Ok(()) };
        log.check_follow().await.map_err(|error| error.to_string())
    }

    /// On a shared store, listens for the events any runner commits and wakes the streams
    /// they concern, until `stopping` turns true; a feed that ends is opened again a
    /// second later. Returns at once on a store one process uses.
    ///
    /// A feed that cannot be opened is logged when it first fails, then once a minute
    /// with how many attempts failed, and once more when it is heard again.
    pub async fn follow(self, mut stopping: watch::Receiver<bool>) {
        const REPORT_EVERY: u64 = 60;
        let Some(log) = self.shared.clone() else { return };
        let mut failed: u64 = 0;
        while !*stopping.borrow() {
            match log.follow().await {
                Ok(mut feed) => {
                    if failed > 0 {
                        tracing::info!(failed, "listening for other runners' events again");
                        failed = 0;
                    }
                    loop {
                        tokio::select! {
                            next = feed.next() => match next {
                                Some((root, last)) => self.touch(&root, last),
                                None => break,
                            },
                            _ = stopping.changed() => return,
                        }
                    }
                }
                Err(error) => {
                    if failed.is_multiple_of(REPORT_EVERY) {
                        tracing::warn!(
                            failed = failed + 1,
                            "cannot listen for other runners' events (streams here miss their turns until it can): {error}"
                        );
                    }
                    failed += 1;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                _ = stopping.changed() => return,
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session's entry, made when it has none: numbered from 0 on a shared store
    /// (the store numbers the events; the entry only counts), else from
    /// [`numbering_start`].
    fn entry<'a>(&self, state: &'a mut HubState, session: &str) -> &'a mut SessionEvents {
        if !state.sessions.contains_key(session) && state.sessions.len() >= SESSIONS_KEPT {
            let stalest = state.sessions.iter().min_by_key(|(_, events)| events.touched).map(|(id, _)| id.clone());
            if let Some(stalest) = stalest
                && let Some(dropped) = state.sessions.remove(&stalest)
            {
                state.bytes -= dropped.bytes;
            }
        }
        state.ticks += 1;
        let ticks = state.ticks;
        let start = if self.shared.is_some() { 0 } else { numbering_start(state.highest) };
        let events = state.sessions.entry(session.to_string()).or_insert_with(|| SessionEvents::new(start));
        events.touched = ticks;
        events
    }

    /// A receiver of the session's last event number: it changes with every new event.
    pub fn watch(&self, session: &str) -> watch::Receiver<u64> {
        let mut state = self.lock();
        self.entry(&mut state, root_session(session)).announce.subscribe()
    }

    /// A receiver of the number of events recorded for all sessions: it changes with
    /// every new event of any session.
    pub fn watch_all(&self) -> watch::Receiver<u64> {
        self.recorded.subscribe()
    }

    /// The number of the session's last event (0 when it has none here); unlike
    /// [`Hub::watch`], it keeps nothing for a session the hub does not know.
    pub fn last(&self, session: &str) -> u64 {
        self.lock().sessions.get(root_session(session)).map_or(0, |events| events.last)
    }

    /// The kept events after `after`, oldest first.
    pub fn since(&self, session: &str, after: u64) -> Vec<NumberedEvent> {
        let state = self.lock();
        state
            .sessions
            .get(root_session(session))
            .map(|events| events.buffer.iter().filter(|event| event.id > after).cloned().collect())
            .unwrap_or_default()
    }

    fn record(&self, session: &str, json: String) {
        let mut state = self.lock();
        let root = root_session(session).to_string();
        let size = json.len();
        let events = self.entry(&mut state, &root);
        events.last += 1;
        let id = events.last;
        events.buffer.push_back(NumberedEvent { id, json });
        events.bytes += size;
        let mut freed = 0;
        while events.buffer.len() > EVENTS_KEPT || (events.bytes > SESSION_BYTES_KEPT && events.buffer.len() > 1) {
            if let Some(oldest) = events.buffer.pop_front() {
                events.bytes -= oldest.json.len();
                freed += oldest.json.len();
            }
        }
        events.announce.send_replace(id);
        self.recorded.send_modify(|count| *count += 1);
        state.highest = state.highest.max(id);
        state.bytes = state.bytes + size - freed;
        // Over the hub's bound, the least recently active other sessions go first.
        while state.bytes > HUB_BYTES_KEPT {
            let stalest = state
                .sessions
                .iter()
                .filter(|(id, _)| **id != root)
                .min_by_key(|(_, events)| events.touched)
                .map(|(id, _)| id.clone());
            let Some(stalest) = stalest else { break };
            if let Some(dropped) = state.sessions.remove(&stalest) {
                state.bytes -= dropped.bytes;
            }
        }
    }

    /// A listener for the runtime's event sink that feeds this hub and the metrics.
    pub fn listener(&self, metrics: Arc<Metrics>) -> Box<dyn Listener> {
        Box::new(HubListener { hub: self.clone(), metrics })
    }
}

struct HubListener {
    hub: Hub,
    metrics: Arc<Metrics>,
}

impl Listener for HubListener {
    fn on_event(&mut self, envelope: &Envelope) {
        self.metrics.observe_event(envelope.session_id.as_deref(), &envelope.event);
        let Some(session) = envelope.session_id.as_deref() else {
            return;
        };
        if let Some(json) = bounded(envelope) {
            if let Some(log) = &self.hub.shared {
                log.stage(session, &json);
            }
            self.hub.record(session, json);
        }
    }
}

/// An envelope as the stream carries it: whole when small, else without the fields
/// over 1 KiB and marked `"truncated": true`.
fn bounded(envelope: &Envelope) -> Option<String> {
    let json = serde_json::to_string(envelope).ok()?;
    if json.len() <= EVENT_BYTES_KEPT {
        return Some(json);
    }
    let serde_json::Value::Object(fields) = serde_json::to_value(envelope).ok()? else {
        return None;
    };
    let mut kept: serde_json::Map<String, serde_json::Value> =
        fields.into_iter().filter(|(_, value)| value.to_string().len() <= 1024).collect();
    kept.insert("truncated".to_string(), serde_json::Value::Bool(true));
    serde_json::to_string(&kept).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use archmax_vm::session::StoreError;
    use archmax_vm::session::event_log::{EventFeed, LoggedEvent};
    use archmax_vm::session::store::StoreFuture;

    #[test]
    fn a_sessions_events_are_bounded_in_bytes_and_a_huge_event_is_kept_small() {
        let hub = Hub::default();
        let big = "x".repeat(SESSION_BYTES_KEPT / 4);
        for _ in 0..10 {
            hub.record("a", big.clone());
        }
        let kept = hub.since("a", 0);
        assert!(kept.iter().map(|event| event.json.len()).sum::<usize>() <= SESSION_BYTES_KEPT);
        assert_eq!(kept.last().map(|event| event.id), Some(hub.last("a")), "the newest events stay");
        let envelope = Envelope {
            seq: 1,
            ts: 0,
            level: archmax_vm::events::Level::Info,
            session_id: Some("a".to_string()),
            sub_workflow_dispatch_id: None,
            event: archmax_vm::events::Event::Warning { scope: "w".to_string(), message: "y".repeat(1 << 20) },
        };
        let shown = bounded(&envelope).expect("json");
        assert!(shown.len() < 2048 && shown.contains("\"truncated\":true") && shown.contains("\"seq\":1"), "{shown}");
    }

    #[test]
    fn events_are_numbered_per_root_session_and_read_back_after_an_id() {
        let hub = Hub::default();
        let mut watch = hub.watch("a");
        hub.record("a", "one".to_string());
        hub.record("b", "other".to_string());
        hub.record("a~1", "child".to_string());
        let ids: Vec<u64> = hub.since("a", 0).into_iter().map(|event| event.id).collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[1], ids[0] + 1, "a child's event is its root's next");
        assert_eq!(*watch.borrow_and_update(), ids[1]);
        let after_one: Vec<String> = hub.since("a", ids[0]).into_iter().map(|event| event.json).collect();
        assert_eq!(after_one, ["child"]);
        assert_eq!(hub.since("b", 0).len(), 1);
        assert!(hub.since("nobody", 0).is_empty());
    }

    #[test]
    fn the_buffer_keeps_the_newest_events() {
        let hub = Hub::default();
        for index in 0..EVENTS_KEPT + 5 {
            hub.record("a", index.to_string());
        }
        let kept = hub.since("a", 0);
        assert_eq!(kept.len(), EVENTS_KEPT);
        assert_eq!(hub.last("a") - kept[0].id + 1, EVENTS_KEPT as u64, "the five oldest were dropped");
    }

    #[test]
    fn an_id_an_earlier_process_gave_is_below_every_id_of_a_later_one() {
        // Two hubs are two processes of one server, the second started after the first.
        let earlier = Hub::default();
        for index in 0..50 {
            earlier.record("s", index.to_string());
        }
        let seen = earlier.last("s");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = Hub::default();
        for index in 0..3 {
            later.record("s", format!("new {index}"));
        }
        let resumed: Vec<String> = later.since("s", seen).into_iter().map(|event| event.json).collect();
        assert_eq!(resumed, ["new 0", "new 1", "new 2"], "a client resuming with an old id is sent every event");
        let ids: Vec<u64> = later.since("s", 0).into_iter().map(|event| event.id).collect();
        assert!(ids.windows(2).all(|pair| pair[1] == pair[0] + 1), "{ids:?}");
        assert!(ids[2] < 1 << 53, "exact in a JavaScript number: {ids:?}");
    }

    #[test]
    fn a_session_whose_entry_was_dropped_numbers_on_above_what_it_gave() {
        let hub = Hub::default();
        hub.record("s", "first".to_string());
        // As if the session had had ten billion events: more than its clock start gives.
        hub.lock().sessions.get_mut("s").expect("an entry").last += 10_000_000_000;
        hub.record("s", "second".to_string());
        let before = hub.last("s");
        hub.lock().sessions.remove("s");
        hub.record("s", "again".to_string());
        assert!(hub.last("s") > before, "{} after {before}", hub.last("s"));
    }

    #[test]
    fn on_a_shared_store_the_hub_only_counts_from_0() {
        /// A store's log that keeps nothing: only its presence matters here.
        struct Elsewhere;
        impl EventLog for Elsewhere {
            fn stage(&self, _: &str, _: &str) {}
            fn after<'a>(&'a self, _: &'a str, _: u64, _: usize) -> StoreFuture<'a, Vec<LoggedEvent>> {
                Box::pin(async { Ok(Vec::new()) })
            }
            fn last<'a>(&'a self, _: &'a str) -> StoreFuture<'a, u64> {
                Box::pin(async { Ok(0) })
            }
            fn follow(&self) -> StoreFuture<'_, Box<dyn EventFeed>> {
                Box::pin(async { Err(StoreError::Unavailable("no feed here".to_string())) })
            }
        }
        let hub = Hub::shared_through(Some(Arc::new(Elsewhere)));
        hub.record("s", "one".to_string());
        assert_eq!(hub.last("s"), 1, "the store numbers a shared session's events; the hub only counts");
    }
}
