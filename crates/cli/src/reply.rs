//! The agent's reply on stdout as it arrives.
//!
//! A session command prints what the agent says on stdout. The text comes as
//! `agent-text-delta` events (pieces of a stream, or one whole message from an adapter
//! that does not stream); [`ReplyStream`] writes each piece at once, with the blank line
//! between messages that the whole reply has, so what ends up on stdout is byte for byte
//! the reply a non-streaming run prints at the end. Only the session's own text is
//! printed: a sub-workflow's messages are its caller's business. A message that is
//! nothing but whitespace is no part of the reply, so its pieces are held back until one
//! that is not arrives.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use archmax_vm::events::{Envelope, Event, Listener};

/// Set once any of the reply has been printed.
static PRINTED: AtomicBool = AtomicBool::new(false);
/// The last thing printed does not end its line yet.
static LINE_OPEN: AtomicBool = AtomicBool::new(false);

/// Whether the reply already went to stdout as it arrived.
pub fn streamed() -> bool {
    PRINTED.load(Ordering::SeqCst)
}

/// Ends the streamed reply's last line, when it is still open.
pub fn end_line() {
    if LINE_OPEN.swap(false, Ordering::SeqCst) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }
}

/// Writes the session's reply to stdout piece by piece.
#[derive(Default)]
pub struct ReplyStream {
    /// A message is being printed (its first visible piece is out).
    open: bool,
    /// Whitespace at the start of the current message, not printed yet.
    held: String,
}

impl ReplyStream {
    fn write(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        if !self.open {
            self.held.push_str(text);
            if self.held.trim().is_empty() {
                return;
            }
            if streamed() {
                let _ = out.write_all(b"\n\n");
            }
            self.open = true;
            PRINTED.store(true, Ordering::SeqCst);
            let held = std::mem::take(&mut self.held);
            let _ = out.write_all(held.as_bytes());
        } else {
            let _ = out.write_all(text.as_bytes());
        }
        LINE_OPEN.store(true, Ordering::SeqCst);
        let _ = out.flush();
    }
}

impl Listener for ReplyStream {
    fn on_event(&mut self, envelope: &Envelope) {
        if envelope.sub_workflow_dispatch_id.is_some() {
            return;
        }
        match &envelope.event {
            Event::AgentTextDelta { text, .. } => self.write(text),
            // A message that broke off: end its line, the failure is told on stderr.
            Event::AgentText { partial: Some(true), .. } if self.open => {
                end_line();
                self.open = false;
                self.held.clear();
            }
            _ => {
                self.open = false;
                self.held.clear();
            }
        }
    }
}
