//! What other runners committed, as `LISTEN` hears it: steps on `archmax_steps`, events
//! on `archmax_events` ([`crate::events`]), each notification `<id> <number>`.
//!
//! The one thing to know: a notification is sent only once what it announces is
//! committed, and never for a refused step. A feed is a connection of its own (pooled
//! connections drop notifications, and a pooler in transaction mode cannot listen: the
//! store's listen target, [`crate::PgOptions::listen_target`], may name the server
//! directly); dropping the feed closes it.

use std::future::poll_fn;

use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use archmax_vm::session::StoreError;

use crate::{describe, io_error};

/// The channel every commit notifies.
pub const CHANNEL: &str = "archmax_steps";

/// How many notifications a feed holds for a reader that falls behind; past it the
/// feed ends (the reader re-reads the sessions it follows, then subscribes again).
const BACKLOG: usize = 4096;

/// One committed step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedStep {
    pub session: String,
    pub seq: u64,
}

/// Committed steps as runners announce them, from the moment the feed was opened: each
/// runner's in the order they committed, after their commits returned.
///
/// A feed is a wake-up, not a complete record: a step whose runner died before its
/// announcer's next round ([`crate::announce`]), or whose round failed twice, is never
/// announced. A reader that must see every step reads the sessions it follows from the
/// store now and then as well, as the server's event streams do.
pub struct StepFeed(pub(crate) Notifications);

impl StepFeed {
    /// The next committed step; `None` once the connection is gone or the reader fell
    /// more than the backlog behind.
    pub async fn next(&mut self) -> Option<CommittedStep> {
        self.0.next().await.map(|(session, seq)| CommittedStep { session, seq })
    }
}

/// `<id> <number>` notifications of one channel.
pub(crate) struct Notifications {
    items: mpsc::Receiver<(String, u64)>,
    listener: tokio::task::JoinHandle<()>,
    /// The listening connection's client; dropping it ends the connection.
    _client: tokio_postgres::Client,
}

impl Notifications {
    pub(crate) async fn next(&mut self) -> Option<(String, u64)> {
        self.items.recv().await
    }
}

impl Drop for Notifications {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// Opens a connection, listens on `channel` and forwards what it hears.
pub(crate) async fn listen(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    channel: &'static str,
) -> Result<Notifications, StoreError> {
    // No session is concerned: a connection that cannot be opened is the store being
    // out of reach for this feed, said so, not an I/O failure of some session.
    let (client, mut connection) = config
        .connect(tls)
        .await
        .map_err(|error| StoreError::Unavailable(format!("the listening connection failed: {}", describe(&error))))?;
    let (sender, items) = mpsc::channel(BACKLOG);
    let listener = tokio::spawn(async move {
        while let Some(Ok(message)) = poll_fn(|context| connection.poll_message(context)).await {
            let AsyncMessage::Notification(note) = message else { continue };
            let Some((id, number)) = note.payload().rsplit_once(' ') else { continue };
            let Ok(number) = number.parse() else { continue };
            if sender.try_send((id.to_string(), number)).is_err() {
                break;
            }
        }
    });
    let feed = Notifications { items, listener, _client: client };
    feed._client.batch_execute(&format!("LISTEN {channel}")).await.map_err(|error| io_error("", describe(&error)))?;
    Ok(feed)
}
