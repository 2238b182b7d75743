//! Sub-workflow sessions a cut turn left behind, settled when their caller goes on.
//!
//! A caller's turn runs its children in the same process. When that process dies
//! mid-turn, a child it was running stays `running` with no process holding it, and
//! the caller's next turn re-enters its state and dispatches afresh under a new child id
//! (the old id stays taken). Nothing would ever continue the old child. The one thing
//! to know: only a turn on a caller whose own status was still `running` (its turn was
//! cut) settles children, and only children no writer holds: each is opened (a held one
//! is someone's to finish), found still running, and committed `failed` with an
//! `abandoned` exit naming its caller; its own children are settled the same way.

use crate::events::Event;
use crate::runtime::Runtime;
use crate::session::id::SessionId;
use crate::session::{Delta, Exit, SessionState, Status, StoreError};

/// The exit code of a sub-workflow session its caller went on without.
pub(crate) const ABANDONED: &str = "abandoned";

impl Runtime {
    /// Settles every sub-workflow session of `caller` (and theirs) that a cut turn left
    /// running and that no writer holds; returns their ids. A store error leaves that
    /// child as it was, with a warning on `caller`.
    pub(crate) async fn settle_orphans(&self, caller: &SessionState) -> Vec<String> {
        let mut settled = Vec::new();
        let mut callers = vec![(caller.id.clone(), caller.head.delegations)];
        while let Some((parent, counted)) = callers.pop() {
            // Children are numbered from 1; a crash may have created some past the
            // count the caller committed, so the walk goes on while ids are taken.
            let mut number = 0;
            loop {
                number += 1;
                let child = parent.child(number);
                let found = match self.store().read(child.as_str()).await {
                    Ok(found) => found,
                    Err(error) => {
                        self.warn_unsettled(caller, &child, &error);
                        if number > counted {
                            break;
                        }
                        continue;
                    }
                };
                let Some(state) = found else {
                    if number > counted {
                        break;
                    }
                    continue;
                };
                if state.head.status != Status::Running {
                    continue;
                }
                match self.settle(&parent, &child).await {
                    Ok(Some(delegations)) => {
                        settled.push(child.to_string());
                        callers.push((child, delegations));
                    }
                    Ok(None) => {}
                    Err(error) => self.warn_unsettled(caller, &child, &error),
                }
            }
        }
        for child in &settled {
            self.emit(
                caller.id.as_str(),
                Event::Warning {
                    scope: "sub-workflow".to_string(),
                    message: format!(
                        "sub-workflow session `{child}` was left running when a turn was cut; it is settled as failed ({ABANDONED})"
                    ),
                },
            );
        }
        settled
    }

    /// Commits `child` failed when no writer holds it and it is still running; returns
    /// how many children of its own it numbered, `None` when it was left alone.
    async fn settle(&self, parent: &SessionId, child: &SessionId) -> Result<Option<u64>, StoreError> {
        let (state, mut writer) = match self.store().open(child.as_str()).await {
            Ok(open) => open,
            Err(StoreError::Busy(_) | StoreError::Missing(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        if state.head.status != Status::Running {
            return Ok(None);
        }
        let mut head = state.head.clone();
        head.status = Status::Failed;
        head.updated_at = self.now();
        head.exit = Some(Exit {
            code: ABANDONED.to_string(),
            reason: format!(
                "its caller `{parent}` was cut mid-turn and went on without it; nothing will continue this session"
            ),
            state: head.position.clone().unwrap_or_default(),
            raised: false,
        });
        let delegations = head.delegations;
        writer.commit(&Delta { seq: state.seq + 1, head, ..Delta::default() }).await?;
        Ok(Some(delegations))
    }

    fn warn_unsettled(&self, caller: &SessionState, child: &SessionId, error: &StoreError) {
        let message = format!("sub-workflow session `{child}` may have been left running by a cut turn: {error}");
        self.emit(caller.id.as_str(), Event::Warning { scope: "sub-workflow".to_string(), message });
    }
}
