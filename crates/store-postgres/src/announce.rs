//! Announcing committed steps and events to every runner's `LISTEN`, in batches.
//!
//! The one thing to know: **PostgreSQL commits the transactions that `NOTIFY` one at a
//! time** (the notification queue is locked from the commit's start to its end, the
//! flush of its WAL record included), so one announcing transaction per step would make
//! every step wait for the flush of every other's. A commit therefore never announces
//! itself: it hands its announcement to this store's announcer, one task that sends
//! whatever has gathered since its last round in one statement per channel, as a
//! transaction of its own. While one round waits for its flush the next gathers, so a
//! fleet's commits are flushed together and the announcements of many steps cost one
//! notifying commit.
//!
//! An announcement is sent only after the commit it announces returned, so a listener
//! that reads what it names finds it durable. One that is lost (the runner died first,
//! the round failed, the queue was full) loses no step and no event: listeners read the
//! tables from their last position, so the session's next announcement brings them
//! everything after it.

use std::collections::BTreeSet;

use tokio::sync::mpsc;
use tokio_postgres::types::Type;

use crate::Pool;
use crate::notify::CHANNEL;

/// The most announcements waiting for a round; past it new ones are dropped (see the
/// module doc: nothing is lost with them).
const WAITING: usize = 16 * 1024;
/// The most announcements one round sends.
const ROUND: usize = 4 * 1024;

/// Steps on [`CHANNEL`] as `<id> <seq>`.
const STEPS: &str = "SELECT pg_notify($2, step) FROM unnest($1::text[]) AS step";
/// Events on `archmax_events` as `<root> <last event id>`, the root's last as it stands now.
const EVENTS: &str = "SELECT pg_notify('archmax_events', root || ' ' || last::text) \
     FROM archmax_event_heads WHERE root = ANY($1::text[])";

/// What a commit or a closing writer wants announced.
#[derive(Debug)]
pub(crate) enum Announcement {
    /// Step `seq` of session `id` is committed.
    Step { id: String, seq: u64 },
    /// Root `root` has new events in the table.
    Events { root: String },
}

/// The sending side, kept by the store; the announcer ends when it is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Announcer {
    sender: mpsc::Sender<Announcement>,
}

impl Announcer {
    /// The announcer of `pool`, running on `handle` until the returned value and its
    /// clones are dropped.
    pub(crate) fn start(handle: &tokio::runtime::Handle, pool: Pool) -> Announcer {
        let (sender, receiver) = mpsc::channel(WAITING);
        drop(handle.spawn(announce_rounds(pool, receiver)));
        Announcer { sender }
    }

    /// Queues `announcement` for the next round; never waits.
    pub(crate) fn announce(&self, announcement: Announcement) {
        if self.sender.try_send(announcement).is_err() {
            tracing::debug!("an announcement was dropped: the announcer is behind or stopped");
        }
    }
}

async fn announce_rounds(pool: Pool, mut receiver: mpsc::Receiver<Announcement>) {
    let mut waiting = Vec::with_capacity(ROUND);
    while receiver.recv_many(&mut waiting, ROUND).await > 0 {
        let mut steps = Vec::new();
        let mut roots = BTreeSet::new();
        for announcement in waiting.drain(..) {
            match announcement {
                Announcement::Step { id, seq } => steps.push(format!("{id} {seq}")),
                Announcement::Events { root } => {
                    roots.insert(root);
                }
            }
        }
        let roots: Vec<String> = roots.into_iter().collect();
        // Once more on a fresh connection (a reset one is the usual cause), then given up:
        // listeners catch up with the sessions' next announcements.
        let sent = match send_round(&pool, &steps, &roots).await {
            Ok(()) => Ok(()),
            Err(_) => send_round(&pool, &steps, &roots).await,
        };
        if let Err(error) = sent {
            tracing::warn!(
                "announcing {} committed steps and {} sessions' events to other runners failed twice: {error}",
                steps.len(),
                roots.len()
            );
        }
    }
}

async fn send_round(pool: &Pool, steps: &[String], roots: &[String]) -> Result<(), String> {
    let client = pool.get().await.map_err(|error| error.to_string())?;
    let channel = CHANNEL;
    let (stepped, evented) = tokio::join!(
        async {
            if steps.is_empty() {
                return Ok(0);
            }
            client.execute_typed(STEPS, &[(&steps, Type::TEXT_ARRAY), (&channel, Type::TEXT)]).await
        },
        async {
            if roots.is_empty() {
                return Ok(0);
            }
            client.execute_typed(EVENTS, &[(&roots, Type::TEXT_ARRAY)]).await
        }
    );
    stepped.and(evented).map(drop).map_err(|error| error.to_string())
}
