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
//! Children are found among the store's ids under `<caller>~`, not by counting up from
//! `~1`: a refused or mocked dispatch takes a number and leaves no session behind it.

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
        // Children are found by their ids, not by counting: a refused or mocked dispatch
        // takes a number and makes no session, and a crash may have made some past the
        // count the caller committed, so a gap says nothing about what follows it.
        let ids = match self.store().list().await {
            Ok(ids) => ids,
            Err(error) => {
                self.warn_unlisted(caller, &error);
                return settled;
            }
        };
        let mut callers = vec![caller.id.clone()];
        while let Some(parent) = callers.pop() {
            for child in children_of(&parent, &ids) {
                let found = match self.store().read(child.as_str()).await {
                    Ok(found) => found,
                    Err(error) => {
                        self.warn_unsettled(caller, &child, &error);
                        continue;
                    }
                };
                if found.is_none_or(|state| state.head.status != Status::Running) {
                    continue;
                }
                match self.settle(&parent, &child).await {
                    Ok(true) => {
                        settled.push(child.to_string());
                        callers.push(child);
                    }
                    Ok(false) => {}
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

    /// Commits `child` failed when no writer holds it and it is still running; `false`
    /// when it was left alone.
    async fn settle(&self, parent: &SessionId, child: &SessionId) -> Result<bool, StoreError> {
        let (state, mut writer) = match self.store().open(child.as_str()).await {
            Ok(open) => open,
            Err(StoreError::Busy(_) | StoreError::Missing(_)) => return Ok(false),
            Err(error) => return Err(error),
        };
        if state.head.status != Status::Running {
            return Ok(false);
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
        writer.commit(&Delta { seq: state.seq + 1, head, ..Delta::default() }).await?;
        Ok(true)
    }

    fn warn_unlisted(&self, caller: &SessionState, error: &StoreError) {
        let message = format!(
            "the sub-workflow sessions of `{}` could not be listed, so any a cut turn left running stay as they were: {error}",
            caller.id
        );
        self.emit(caller.id.as_str(), Event::Warning { scope: "sub-workflow".to_string(), message });
    }

    fn warn_unsettled(&self, caller: &SessionState, child: &SessionId, error: &StoreError) {
        let message = format!("sub-workflow session `{child}` may have been left running by a cut turn: {error}");
        self.emit(caller.id.as_str(), Event::Warning { scope: "sub-workflow".to_string(), message });
    }
}

/// The direct children of `parent` among the store's `ids`: `<parent>~<n>`, whatever
/// numbers are missing between them, in number order.
fn children_of(parent: &SessionId, ids: &[String]) -> Vec<SessionId> {
    let prefix = format!("{parent}~");
    let mut children: Vec<(u64, &String)> = ids
        .iter()
        .filter_map(|id| {
            let number = id.strip_prefix(&prefix)?;
            let plain = !number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit());
            Some((number.parse().ok().filter(|_| plain)?, id))
        })
        .collect();
    children.sort();
    children.into_iter().map(|(_, id)| SessionId::from_store(id.as_str())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_the_numbered_ids_under_the_parent_whatever_the_gaps() {
        let ids: Vec<String> =
            ["s1", "s1~1", "s1~10", "s1~1~1", "s1~3", "s1~x", "s10~1", "s1~", "s1~+2"].map(String::from).to_vec();
        let children = children_of(&SessionId::from_store("s1"), &ids);
        let children: Vec<&str> = children.iter().map(SessionId::as_str).collect();
        assert_eq!(children, ["s1~1", "s1~3", "s1~10"]);
    }
}
