//! Steps committed by any process, as `LISTEN archmax_steps` hears them.
//!
//! The one thing to know: a notification is sent right after the step's own transaction,
//! on the same connection, and only when the session holds that step, so it arrives only
//! once the step is committed, and never for a refused one. A feed is a
//! connection of its own (pooled connections drop notifications); dropping the feed
//! closes it.

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

/// Committed steps, in commit order, from the moment the feed was opened.
pub struct StepFeed {
    steps: mpsc::Receiver<CommittedStep>,
    listener: tokio::task::JoinHandle<()>,
    /// The listening connection's client; dropping it ends the connection.
    _client: tokio_postgres::Client,
}

impl StepFeed {
    /// The next committed step; `None` once the connection is gone or the reader fell
    /// more than the backlog behind.
    pub async fn next(&mut self) -> Option<CommittedStep> {
        self.steps.recv().await
    }
}

impl Drop for StepFeed {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// Opens a connection, listens on [`CHANNEL`] and forwards what it hears.
pub(crate) async fn listen(config: tokio_postgres::Config, tls: MakeRustlsConnect) -> Result<StepFeed, StoreError> {
    let (client, mut connection) = config.connect(tls).await.map_err(|error| io_error("", describe(&error)))?;
    let (sender, steps) = mpsc::channel(BACKLOG);
    let listener = tokio::spawn(async move {
        while let Some(Ok(message)) = poll_fn(|context| connection.poll_message(context)).await {
            let AsyncMessage::Notification(note) = message else { continue };
            let Some((session, seq)) = note.payload().rsplit_once(' ') else { continue };
            let Ok(seq) = seq.parse() else { continue };
            if sender.try_send(CommittedStep { session: session.to_string(), seq }).is_err() {
                break;
            }
        }
    });
    let feed = StepFeed { steps, listener, _client: client };
    feed._client.batch_execute(&format!("LISTEN {CHANNEL}")).await.map_err(|error| io_error("", describe(&error)))?;
    Ok(feed)
}
