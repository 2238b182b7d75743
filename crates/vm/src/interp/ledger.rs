//! The turn's own bookkeeping: what one turn counts and collects about itself, apart
//! from the session it runs on.
//!
//! A [`TurnLedger`] is made when a turn opens and dropped when it ends; nothing in it is
//! stored. It counts the turn's steps (the recursion limit bounds them), numbers its
//! runtime notes, gathers what the agent said for the turn's reply, remembers where the
//! turn opened in the conversation and what the session had spent by then, and says what
//! kind of call opened it (its [`Disposition`]). The one thing to know: the turn's spend
//! is never summed call by call here; it is the session's usage now less its usage at
//! open, plus what the children it ran spent in their own sessions. Model calls are the
//! one thing counted call by call, for the budget's `max_model_calls_per_turn`.

use crate::runtime::Disposition;
use crate::session::{Message, Spend, Usage};

/// What one turn keeps about itself.
///
/// Invariants: `steps` and `notes` only grow; `opened_at` is an index into the session's
/// messages at most their length when it was set (a reader clamps it all the same).
#[derive(Debug)]
pub(super) struct TurnLedger {
    /// Steps taken this turn (a model answer, its tool batch, an automated state).
    steps: usize,
    /// Model calls this turn made and recorded (every role), for the budget.
    model_calls: u64,
    /// A budget stop met inside a loop that reports it by a marker (a grader's).
    budget_stop: Option<crate::session::BudgetStop>,
    /// What the agent said this turn, one entry per answer with text.
    reply: Vec<String>,
    /// Index of the message that opened this turn: what the agent said after it counts
    /// as "already spoke".
    opened_at: usize,
    /// Runtime notes written this turn, to number the next one.
    notes: u64,
    /// The session's usage when this turn opened: the turn's own spend is the difference.
    usage_at_open: Usage,
    /// The session's spend per model and role when this turn opened.
    spend_at_open: Vec<Spend>,
    /// What kind of call opened the turn.
    disposition: Disposition,
    /// Why a message the session owed this turn was not written ([`Self::note_unanswered`]).
    unanswered: Option<String>,
}

impl TurnLedger {
    /// The ledger of a turn opening on a session of `messages` messages that has spent
    /// `usage` so far.
    pub fn opened(messages: usize, usage: Usage, spend: &[Spend]) -> TurnLedger {
        TurnLedger {
            steps: 0,
            model_calls: 0,
            budget_stop: None,
            reply: Vec::new(),
            opened_at: messages,
            notes: 0,
            usage_at_open: usage,
            spend_at_open: spend.to_vec(),
            disposition: Disposition::Turn,
            unanswered: None,
        }
    }

    /// Counts one more step and returns how many the turn has taken.
    pub(crate) fn count_step(&mut self) -> usize {
        self.steps += 1;
        self.steps
    }

    /// Counts one more model call the turn made.
    pub(crate) fn count_model_call(&mut self) {
        self.model_calls += 1;
    }

    /// Holds a budget stop for whoever ends the loop that met it.
    pub(crate) fn hold_budget_stop(&mut self, stop: crate::session::BudgetStop) {
        self.budget_stop = Some(stop);
    }

    /// The budget stop held, if any.
    pub(crate) fn take_budget_stop(&mut self) -> Option<crate::session::BudgetStop> {
        self.budget_stop.take()
    }

    /// Counts the model calls a sub-workflow made for this turn.
    pub(crate) fn count_child_calls(&mut self, calls: u64) {
        self.model_calls = self.model_calls.saturating_add(calls);
    }

    /// The model calls the turn has made, its sub-workflows' included.
    pub(crate) fn model_calls(&self) -> u64 {
        self.model_calls
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

    /// Notes why the reply-only call answering a person's message wrote nothing (its model
    /// call failed, or a budget or the context window stopped it).
    pub(crate) fn note_unanswered(&mut self, why: String) {
        self.unanswered = Some(why);
    }

    /// Why a message the session owed this turn was not written, when one was not.
    pub fn unanswered(&self) -> Option<&str> {
        self.unanswered.as_deref()
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

    /// What the turn's own calls spent per model and role (the children's are in their
    /// sessions' accounts), from the session's account `now`.
    pub fn spent_per_model(&self, now: &[Spend]) -> Vec<Spend> {
        Spend::since(now, &self.spend_at_open)
    }
}
