//! The turn's own bookkeeping: what one turn counts and collects about itself, apart
//! from the session it runs on.
//!
//! A [`TurnLedger`] is made when a turn opens and dropped when it ends; nothing in it is
//! stored. It counts the turn's steps (the recursion limit bounds them), numbers its
//! runtime notes, gathers what the agent said for the turn's reply, remembers where the
//! turn opened in the conversation and what the session had spent by then, and says what
//! kind of call opened it (its [`Disposition`]). The one thing to know: the turn's spend
//! is never summed call by call here; it is the session's usage now less its usage at
//! open, plus what the children it ran spent in their own sessions.

use crate::runtime::Disposition;
use crate::session::{Message, Usage};

/// What one turn keeps about itself.
///
/// Invariants: `steps` and `notes` only grow; `opened_at` is an index into the session's
/// messages at most their length when it was set (a reader clamps it all the same).
#[derive(Debug)]
pub(super) struct TurnLedger {
    /// Steps taken this turn (a model answer, its tool batch, an automated state).
    steps: usize,
    /// What the agent said this turn, one entry per answer with text.
    reply: Vec<String>,
    /// Index of the message that opened this turn: what the agent said after it counts
    /// as "already spoke".
    opened_at: usize,
    /// Runtime notes written this turn, to number the next one.
    notes: u64,
    /// The session's usage when this turn opened: the turn's own spend is the difference.
    usage_at_open: Usage,
    /// What kind of call opened the turn.
    disposition: Disposition,
}

impl TurnLedger {
    /// The ledger of a turn opening on a session of `messages` messages that has spent
    /// `usage` so far.
    pub fn opened(messages: usize, usage: Usage) -> TurnLedger {
        TurnLedger {
            steps: 0,
            reply: Vec::new(),
            opened_at: messages,
            notes: 0,
            usage_at_open: usage,
            disposition: Disposition::Turn,
        }
    }

    /// Counts one more step and returns how many the turn has taken.
    pub(crate) fn count_step(&mut self) -> usize {
        self.steps += 1;
        self.steps
    }

    /// Numbers the turn's next runtime note (from 1).
    pub(crate) fn next_note(&mut self) -> u64 {
        self.notes += 1;
        self.notes
    }

    /// Keeps one answer's text for the turn's reply.
    pub(crate) fn keep_reply(&mut self, text: String) {
        self.reply.push(text);
    }

    /// The turn's reply: every answer's text, in order, a blank line between.
    pub fn reply(&self) -> String {
        self.reply.join("\n\n")
    }

    /// The turn is taken to open at message `index` (after what its caller added).
    pub(crate) fn open_at(&mut self, index: usize) {
        self.opened_at = index;
    }

    /// The messages of `messages` that came since the turn opened.
    pub(crate) fn since_open<'a>(&self, messages: &'a [Message]) -> &'a [Message] {
        &messages[self.opened_at.min(messages.len())..]
    }

    /// Says what kind of call opened the turn.
    pub(crate) fn set_disposition(&mut self, disposition: Disposition) {
        self.disposition = disposition;
    }

    pub fn disposition(&self) -> Disposition {
        self.disposition
    }

    /// What the turn spent: the session's usage `now` less its usage at open, plus what
    /// the children it ran spent (`children`).
    pub fn spent(&self, now: &Usage, children: &Usage) -> Usage {
        let mut spent = now.since(&self.usage_at_open);
        spent.add(children);
        spent
    }
}
