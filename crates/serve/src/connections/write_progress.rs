//! A connection's socket with a deadline on write progress: once a write cannot go on
//! (the peer's receive window is full because it stopped reading), the peer has
//! `patience` to take some bytes; if it takes none, the write fails with
//! [`WriteStalled`] and hyper closes the connection.
//!
//! The one thing to know: the clock runs only while a write is blocked and starts over on
//! every byte the peer takes, so a slow reader that keeps reading (an event stream on a
//! poor network) is never cut, and a connection with nothing to write (waiting for the
//! next request or the next event) is not timed here at all.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// Why a connection's write failed: its peer took no byte for this long.
#[derive(Debug, thiserror::Error)]
#[error("the peer read nothing of the answer for {} s; the connection is closed", .0.as_secs_f64())]
pub struct WriteStalled(pub Duration);

/// `Io` whose writes fail once they have made no progress for `patience`.
pub(super) struct WriteProgressDeadline<Io> {
    io: Io,
    patience: Duration,
    /// Set when a write first found the socket full; cleared by any progress.
    stalled_until: Option<Pin<Box<Sleep>>>,
}

impl<Io> WriteProgressDeadline<Io> {
    pub(super) fn new(io: Io, patience: Duration) -> WriteProgressDeadline<Io> {
        WriteProgressDeadline { io, patience, stalled_until: None }
    }

    /// What a write attempt's outcome means under the deadline: progress resets the clock;
    /// a blocked write starts it (waking this task when it runs out) or, past it, fails.
    fn judge(&mut self, context: &mut Context<'_>, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match written {
            Poll::Pending => {
                let patience = self.patience;
                let stall = self.stalled_until.get_or_insert_with(|| Box::pin(tokio::time::sleep(patience)));
                match stall.as_mut().poll(context) {
                    Poll::Ready(()) => {
                        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, WriteStalled(patience))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            progress => {
                self.stalled_until = None;
                progress
            }
        }
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for WriteProgressDeadline<Io> {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buffer: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(context, buffer)
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for WriteProgressDeadline<Io> {
    fn poll_write(self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write(context, bytes);
        this.judge(context, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        pieces: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write_vectored(context, pieces);
        this.judge(context, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Ten times the reader's pause below, so a busy machine cannot make a pause look like
    /// a stall; the slow reader's whole read still takes longer than this.
    const PATIENCE: Duration = Duration::from_secs(1);
    const PAUSE: Duration = Duration::from_millis(100);
    const SLOW_ANSWER: &[u8] = b"an answer read one byte at a time";

    #[tokio::test]
    async fn a_write_the_peer_never_takes_fails_after_the_patience_and_one_it_takes_does_not() {
        // A pipe with room for 4 bytes whose far end nobody reads.
        let (near, mut far) = tokio::io::duplex(4);
        let mut guarded = WriteProgressDeadline::new(near, PATIENCE);
        guarded.write_all(b"four").await.expect("the first bytes fit");
        let refused = guarded.write_all(b"more").await.expect_err("nobody reads: the write fails");
        assert_eq!(refused.kind(), io::ErrorKind::TimedOut);
        assert!(refused.get_ref().is_some_and(|cause| cause.is::<WriteStalled>()), "{refused}");

        // A reader that takes one byte at a time, pausing between them, keeps a write
        // going however long it takes in all.
        let (near, mut slow) = tokio::io::duplex(1);
        let mut guarded = WriteProgressDeadline::new(near, PATIENCE);
        let reader = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            let mut taken = 0;
            while tokio::io::AsyncReadExt::read(&mut slow, &mut byte).await.is_ok_and(|read| read == 1) {
                taken += 1;
                tokio::time::sleep(PAUSE).await;
            }
            taken
        });
        guarded.write_all(SLOW_ANSWER).await.expect("every byte is taken in time");
        drop(guarded);
        assert_eq!(reader.await.expect("the reader ends"), SLOW_ANSWER.len());
        drop(far.shutdown().await);
    }
}
