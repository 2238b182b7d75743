//! Budgets: the host's limits on what a session spends on models (`[limits]` of
//! `archmax.toml`, read by `archmax_config::settings::limits`), checked before a model
//! call is made, and the raise that lets a stopped session go on.
//!
//! Three limits: model calls per turn, input and output tokens per turn, and the
//! session's cost over its life, each counting what the sub-workflows spent. A check runs
//! before an agent's call (once on what is spent, before compaction could call a
//! summarizer, and once more with the prompt estimated) and before each of a grader's
//! calls. When the call would pass a limit it is not made: the session parks
//! `awaiting_input`, its `head.budget.stop` says which limit and by how much, and only a
//! raise moves it (`reply`, `deliver` or `decide` with `raise_budget`; a delivery or a
//! message without one is refused as [`crate::RunError::BudgetStopped`]). A raise adds one more
//! allowance of the cost limit (the ceiling is `max_cost_per_session × (1 + raises)`);
//! the per-turn limits start afresh with the turn a raise opens.
//!
//! The one thing to know: the token and cost checks compare what is spent plus an
//! *estimate* of the next prompt, so a session can end past a limit by one call's error
//! (the answer's tokens are never known beforehand). A sub-workflow's turn run for its
//! caller is held to its own workflow's limits too, but fails at one (exit code `budget`)
//! instead of parking, so the caller learns of it; what it spent (its calls, tokens and
//! cost) counts in its caller once it returns (`delegate::add_child_spend`). An unpriced
//! call adds nothing to the cost.

use archmax_program::program::StateId;

use crate::events::Event;
use crate::model::TokenUsage;
use crate::session::{BudgetStop, NoteKind, ParkPhase, PendingInput, Status};

use super::Turn;

/// The names of the limits, as `archmax.toml` and the events spell them.
const CALLS: &str = "max_model_calls_per_turn";
const TOKENS: &str = "max_tokens_per_turn";
const COST: &str = "max_cost_per_session";

impl<'r> Turn<'r> {
    /// The limit a model call in state `id` would pass, or `None`. With the call's
    /// `volatile` block, the tokens and cost the prompt would add are estimated;
    /// without it only what is spent already counts.
    pub(super) async fn budget_stop(&mut self, id: StateId, volatile: Option<&str>) -> Option<BudgetStop> {
        let limits = self.runtime.budget_limits(&self.session.head.workflow);
        if !limits.any() {
            return None;
        }
        let state = self.slug(id).to_string();
        let stopped_at = crate::clock::rfc3339(self.now());
        let stop = |limit: &str, ceiling: f64, spent: f64, next: Option<f64>, reason: String| BudgetStop {
            state: state.clone(),
            limit: limit.to_string(),
            ceiling,
            spent,
            next,
            reason,
            stopped_at: stopped_at.clone(),
        };
        if let Some(max) = limits.max_model_calls_per_turn {
            let calls = self.ledger.model_calls();
            if calls >= max {
                let plural = if calls == 1 { "" } else { "s" };
                let reason =
                    format!("this turn has made {calls} model call{plural}, the most `{CALLS}` ({max}) allows");
                return Some(stop(CALLS, max as f64, calls as f64, None, reason));
            }
        }
        let model = self.state(id).model.map(|model| self.program().str(model));
        let estimated = match volatile {
            Some(volatile) if limits.max_tokens_per_turn.is_some() || limits.max_cost_per_session.is_some() => {
                let scale = self.runtime.calibration().scale(&self.session.id, model).unwrap_or(1.0);
                Some((self.prompt_tokens(id, volatile).await as f64 * scale).ceil() as u64)
            }
            _ => None,
        };
        if let Some(max) = limits.max_tokens_per_turn {
            let spent = self.ledger.spent(&self.session.head.usage, self.delegations.children_usage());
            let spent = spent.input_tokens.saturating_add(spent.output_tokens);
            let next = estimated.unwrap_or(0);
            if spent >= max || spent.saturating_add(next) > max {
                let reason = if spent >= max {
                    format!("this turn has used {spent} tokens, the most `{TOKENS}` ({max}) allows")
                } else {
                    format!(
                        "this turn has used {spent} tokens and the next prompt takes about {next} more, past `{TOKENS}` ({max})"
                    )
                };
                return Some(stop(TOKENS, max as f64, spent as f64, estimated.map(|next| next as f64), reason));
            }
        }
        if let Some(max) = limits.max_cost_per_session {
            let ceiling = max * f64::from(self.session.head.budget.raises.saturating_add(1));
            let spent = self.session.head.usage.cost_usd.unwrap_or(0.0) + self.session.head.budget.children_cost_usd;
            let next = estimated.and_then(|tokens| {
                self.runtime.pricing().cost_any(&TokenUsage { input: tokens, ..TokenUsage::default() }, &[model?])
            });
            if spent >= ceiling || spent + next.unwrap_or(0.0) > ceiling {
                let raised = match self.session.head.budget.raises {
                    0 => String::new(),
                    raises => format!(" with {raises} raise{}", if raises == 1 { "" } else { "s" }),
                };
                let reason = match next {
                    Some(next) if spent < ceiling => format!(
                        "the session has spent {} and the next prompt would cost about {} more, past `{COST}` ({}{raised})",
                        dollars(spent),
                        dollars(next),
                        dollars(ceiling)
                    ),
                    _ => format!(
                        "the session has spent {}, the most `{COST}` ({}{raised}) allows",
                        dollars(spent),
                        dollars(ceiling)
                    ),
                };
                return Some(stop(COST, ceiling, spent, next, reason));
            }
        }
        None
    }

    /// Parks the session at `stop`: the call was not made, and the session waits for a
    /// person to raise its budget. A turn run for a caller fails instead (exit code
    /// `budget`): its caller takes the failure, and the caller's own budget what it spent.
    pub(super) fn stop_at_budget(&mut self, stop: BudgetStop) {
        self.emit(Event::BudgetStopped {
            state: stop.state.clone(),
            limit: stop.limit.clone(),
            ceiling: stop.ceiling,
            spent: stop.spent,
            next: stop.next,
            reason: stop.reason.clone(),
        });
        if self.under_caller {
            self.fail("budget", &format!("the sub-workflow stopped at its budget: {}", stop.reason));
            return;
        }
        let reason = format!("a raised budget ({})", stop.reason);
        let head = &mut self.session.head;
        head.pending_input = Some(PendingInput {
            state: stop.state.clone(),
            reason: reason.clone(),
            parked_at: stop.stopped_at.clone(),
            resume_at: None,
            child: None,
        });
        head.status = Status::AwaitingInput;
        // No handoff message: it would be a model call past the very limit.
        head.park_phase = Some(ParkPhase::Suspend);
        let state = stop.state.clone();
        head.budget.stop = Some(stop);
        self.emit(Event::Parked {
            state,
            awaiting: "input".to_string(),
            reason: Some(reason),
            resume_at: None,
            call_id: None,
        });
    }

    /// A person raised the session's budget: one more allowance of the cost limit, and
    /// the stop it waited at, if any, lifted (the session runs on in the stopped state,
    /// told so by an `[event]` note). Returns whether a stop was lifted.
    pub(super) fn raise_budget(&mut self, raised_by: Option<&str>) -> bool {
        let limits = self.runtime.budget_limits(&self.session.head.workflow);
        let hold = &mut self.session.head.budget;
        hold.raises = hold.raises.saturating_add(1);
        let raises = hold.raises;
        let lifted = hold.stop.take();
        let here = self.session.head.position.clone().unwrap_or_default();
        if let Some(stop) = &lifted {
            let who = raised_by.map(|who| format!("{who} (a person)")).unwrap_or_else(|| "A person".to_string());
            let head = &mut self.session.head;
            head.pending_input = None;
            head.park_phase = None;
            head.status = Status::Running;
            self.note(
                NoteKind::Event,
                format!(
                    "[event] {who} raised the session's budget, which had stopped it in '{}' before a model call ({}). Continue this state's work.",
                    stop.state, stop.reason
                ),
            );
        }
        self.emit(Event::BudgetRaised {
            state: here,
            raised_by: raised_by.map(str::to_string),
            raises,
            max_cost: limits.max_cost_per_session.map(|max| max * f64::from(raises.saturating_add(1))),
            lifted: lifted.is_some(),
        });
        lifted.is_some()
    }
}

/// An amount of US dollars for a sentence: cents, or four decimals below a cent.
fn dollars(amount: f64) -> String {
    if amount != 0.0 && amount.abs() < 0.01 { format!("${amount:.4}") } else { format!("${amount:.2}") }
}

#[cfg(test)]
mod tests {
    use super::dollars;

    #[test]
    fn amounts_read_as_cents_unless_they_are_smaller() {
        assert_eq!(dollars(2.5), "$2.50");
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(dollars(0.00123), "$0.0012");
        assert_eq!(dollars(12.346), "$12.35");
    }
}
