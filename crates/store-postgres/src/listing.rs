//! Listing sessions: a page of [`SessionStore::list_page`] in one keyset query, and the
//! sessions due at their resume time.
//!
//! The one thing to know: a page is `id > cursor AND <filters> ORDER BY id LIMIT n + 1`
//! on the sessions' own columns, each row carrying its snapshot and the steps after it (a
//! subquery of the same statement, so the columns the filters read and the state built
//! from the row are one moment's). The row past the page only says that another page
//! follows. Ids compare by bytes (the `id` column's collation is `"C"`, schema version 2),
//! as Rust compares strings, so a cursor means the same here as in every other store.
//! Resume times are compared as instants: `resume_due` holds each session's `resumeAt`
//! parsed as the runtime parses it. The parked sessions are also counted in one grouped
//! query ([`parked_summary`]), for the hosts' gauges.
//!
//! [`SessionStore::list_page`]: archmax_vm::session::SessionStore::list_page

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_postgres::types::{ToSql, Type};

use archmax_vm::session::store::{ListPage, ListQuery, ParkedSummary, instant_ms};
use archmax_vm::session::{Status, StoreError};

use crate::loading::fold;
use crate::{PgStore, db_error, pool_error};

/// The statuses of a parked session (waiting for a decision or for input).
const PARKED: [Status; 2] = [Status::AwaitingDecision, Status::AwaitingInput];

/// The last instant a resume time can name (9999-12-31T23:59:59.999Z): later limits
/// are held to it.
const LAST_INSTANT_MS: i64 = 253_402_300_799_999;

/// The instant `ms` (milliseconds since the epoch, at most [`LAST_INSTANT_MS`]) as a
/// query parameter.
pub(crate) fn bound(ms: u64) -> SystemTime {
    instant(i64::try_from(ms).unwrap_or(i64::MAX).min(LAST_INSTANT_MS)).unwrap_or(UNIX_EPOCH)
}

/// An instant `ms` milliseconds after the epoch (before it, when negative); `None` past
/// what the platform's clock holds.
pub(crate) fn instant(ms: i64) -> Option<SystemTime> {
    let distance = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 { UNIX_EPOCH.checked_add(distance) } else { UNIX_EPOCH.checked_sub(distance) }
}

/// A statement's parameter and its type.
type Param = (Box<dyn ToSql + Sync + Send>, Type);

/// The statement of a page, with its parameters: only the filters `query` sets.
fn statement(query: &ListQuery) -> (String, Vec<Param>) {
    let mut conditions = Vec::new();
    let mut params: Vec<Param> = Vec::new();
    let mut bind = |condition: &str, value: Box<dyn ToSql + Sync + Send>, kind: Type| {
        params.push((value, kind));
        conditions.push(condition.replace('?', &format!("${}", params.len())));
    };
    if let Some(cursor) = &query.cursor {
        // No id holds a NUL (a text column cannot), so the ids after `a\0…` are the ids after `a`.
        let cursor = cursor.split('\0').next().unwrap_or_default().to_string();
        bind("s.id > ?", Box::new(cursor), Type::TEXT);
    }
    if let Some(workflow) = &query.workflow {
        bind("s.workflow = ?", Box::new(workflow.clone()), Type::TEXT);
    }
    if let Some(status) = query.status {
        bind("s.status = ?", Box::new(status.as_str()), Type::TEXT);
    }
    if let Some(parked) = query.parked {
        let statuses: Vec<&str> = PARKED.iter().map(|status| status.as_str()).collect();
        let condition = if parked { "s.status = ANY(?)" } else { "NOT s.status = ANY(?)" };
        bind(condition, Box::new(statuses), Type::TEXT_ARRAY);
    }
    if let Some(due_by) = query.due_by {
        bind("s.resume_due <= ?", Box::new(bound(due_by)), Type::TIMESTAMPTZ);
    }
    // One past the page, to know whether another follows.
    let rows = i64::try_from(query.page_size() + 1).unwrap_or(i64::MAX);
    params.push((Box::new(rows), Type::INT8));
    let filters = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
    let sql = format!(
        "SELECT s.id, s.seq, s.snapshot_seq, s.snapshot, \
         ARRAY(SELECT st.seq FROM archmax_steps st WHERE st.session_id = s.id AND st.seq > s.snapshot_seq \
               ORDER BY st.seq), \
         ARRAY(SELECT st.delta FROM archmax_steps st WHERE st.session_id = s.id AND st.seq > s.snapshot_seq \
               ORDER BY st.seq) \
         FROM archmax_sessions s {filters} ORDER BY s.id LIMIT ${}",
        params.len()
    );
    (sql, params)
}

/// One page of `query` (see [`ListPage`]).
pub(crate) async fn page(client: &tokio_postgres::Client, query: &ListQuery) -> Result<ListPage, StoreError> {
    // No workflow is named with a NUL (a text column cannot hold one): nothing matches.
    if query.workflow.as_deref().is_some_and(|workflow| workflow.contains('\0')) {
        return Ok(ListPage::default());
    }
    let (sql, params) = statement(query);
    let params: Vec<(&(dyn ToSql + Sync), Type)> =
        params.iter().map(|(value, kind)| (value.as_ref() as &(dyn ToSql + Sync), kind.clone())).collect();
    let rows = client.query_typed(&sql, &params).await.map_err(db_error(""))?;
    let size = query.page_size();
    let mut page = ListPage::default();
    for row in rows.iter().take(size) {
        let id: String = row.get(0);
        let seq: i64 = row.get(1);
        let seqs: Vec<i64> = row.get(4);
        let deltas: Vec<&[u8]> = row.get(5);
        match fold(&id, row.get(2), row.get(3), seqs.into_iter().zip(deltas)) {
            Ok(state) if i64::try_from(state.seq).ok() == Some(seq) => page.sessions.push(state),
            Ok(_) | Err(StoreError::Corrupt { .. }) => page.unreadable.push(id),
            Err(error) => return Err(error),
        }
    }
    if rows.len() > size {
        page.next = rows.get(size - 1).map(|row| row.get(0));
    }
    Ok(page)
}

/// The parked root sessions by workflow and status, with the earliest pending decision of
/// each: one grouped query on the sessions' own columns. `created_at` is compared as text:
/// the runtime writes every one as an RFC 3339 UTC instant of one shape.
pub(crate) async fn parked_summary(client: &tokio_postgres::Client) -> Result<ParkedSummary, StoreError> {
    let statuses: Vec<&str> = PARKED.iter().map(|status| status.as_str()).collect();
    let rows = client
        .query_typed(
            "SELECT workflow, status, count(*), min(head->'pending_decision'->>'created_at') \
             FROM archmax_sessions WHERE parent IS NULL AND status = ANY($1) GROUP BY workflow, status",
            &[(&statuses, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(db_error(""))?;
    let mut summary = ParkedSummary { complete: true, ..ParkedSummary::default() };
    for row in &rows {
        let workflow: String = row.get(0);
        let status: String = row.get(1);
        let Some(status) = PARKED.into_iter().find(|parked| parked.as_str() == status) else { continue };
        let count: i64 = row.get(2);
        let asked: Option<String> = row.get(3);
        summary.add(&workflow, status, count.unsigned_abs(), asked.as_deref().and_then(instant_ms));
    }
    Ok(summary)
}

impl PgStore {
    /// The ids of the sessions waiting with a resume time at or before `at_ms`
    /// (milliseconds since the epoch), soonest first. Times compare as instants.
    pub async fn due(&self, at_ms: u64) -> Result<Vec<String>, StoreError> {
        let pool = self.inner.pool.clone();
        let at = bound(at_ms);
        self.inner
            .run("", async move {
                let client = pool.get().await.map_err(pool_error(""))?;
                let rows = client
                    .query_typed(
                        "SELECT id FROM archmax_sessions WHERE resume_due IS NOT NULL AND resume_due <= $1 \
                         ORDER BY resume_due, id",
                        &[(&at, Type::TIMESTAMPTZ)],
                    )
                    .await
                    .map_err(db_error(""))?;
                Ok(rows.iter().map(|row| row.get(0)).collect())
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parked_statuses_are_the_statuses_that_park() {
        for status in Status::ALL {
            assert_eq!(PARKED.contains(&status), status.is_parked(), "{status:?}");
        }
    }

    #[test]
    fn instants_on_both_sides_of_the_epoch_and_bounds_past_the_calendar() {
        assert_eq!(instant(1_500), UNIX_EPOCH.checked_add(Duration::from_millis(1_500)));
        assert_eq!(instant(-1_500), UNIX_EPOCH.checked_sub(Duration::from_millis(1_500)));
        assert_eq!(Some(bound(u64::MAX)), instant(LAST_INSTANT_MS));
    }

    #[test]
    fn a_page_binds_only_the_filters_it_sets() {
        let (sql, params) = statement(&ListQuery::default());
        assert!(sql.ends_with("FROM archmax_sessions s  ORDER BY s.id LIMIT $1"), "{sql}");
        assert_eq!(params.len(), 1);
        let query = ListQuery {
            cursor: Some("a".into()),
            workflow: Some("w".into()),
            parked: Some(false),
            due_by: Some(0),
            ..ListQuery::default()
        };
        let (sql, params) = statement(&query);
        assert!(
            sql.contains("WHERE s.id > $1 AND s.workflow = $2 AND NOT s.status = ANY($3) AND s.resume_due <= $4"),
            "{sql}"
        );
        assert!(sql.ends_with("LIMIT $5"), "{sql}");
        assert_eq!(params.len(), 5);
    }
}
