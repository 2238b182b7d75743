//! The one error shape of the API: `{"error": {"code", "message", "details"}}` with its
//! status, and how every [`RunError`] maps to it.
//!
//! The one thing to know: the status comes from [`RunError::kind`] (its
//! [`ErrorKind::http_status`]); input that does not hold is a 400 with every offending
//! field in `details.fields`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use archmax_vm::{ErrorKind, FieldProblem, RunError};

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable id, such as `session.busy` or `decision.not-an-approver`.
    pub code: &'static str,
    /// One sentence a person reads.
    pub message: String,
    pub details: Box<Value>,
    /// Seconds, sent as `Retry-After` (busy and saturated answers).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), details: Box::new(json!({})), retry_after: None }
    }

    pub fn with_details(mut self, details: Value) -> ApiError {
        self.details = Box::new(details);
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// Input that does not hold, with every offending field.
    pub fn invalid(message: impl Into<String>, fields: &[FieldProblem]) -> ApiError {
        let fields: Vec<Value> =
            fields.iter().map(|field| json!({ "field": field.field, "problem": field.problem })).collect();
        ApiError::new(StatusCode::BAD_REQUEST, "input.invalid", message).with_details(json!({ "fields": fields }))
    }

    /// [`ApiError::invalid`] with a message that fits the count: the one problem itself,
    /// or how many `what` (`query parameters`) do not hold.
    pub fn invalid_fields(what: &str, fields: &[FieldProblem]) -> ApiError {
        let message = match fields {
            [only] => format!("`{}`: {}", only.field, only.problem),
            many => format!("{} {what} do not hold", many.len()),
        };
        ApiError::invalid(message, fields)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server.internal", message)
    }

    pub fn body(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message, "details": self.details } })
    }
}

/// The stable code of a runtime error.
fn run_error_code(error: &RunError) -> &'static str {
    match error {
        RunError::UnknownWorkflow { .. } => "workflow.unknown",
        RunError::UnknownTrigger { .. } => "trigger.unknown",
        RunError::UnknownSession(_) => "session.unknown",
        RunError::Busy(_) => "session.busy",
        RunError::Conflict { .. } => "session.conflict",
        RunError::Refused { reason, .. } => reason.as_str(),
        RunError::AwaitedByCaller { .. } => archmax_vm::Refusal::AwaitedByCaller.as_str(),
        RunError::NotParked(_) => "session.not-parked",
        RunError::BudgetStopped { .. } => "session.budget-stopped",
        RunError::InvalidDecision(_) => "decision.invalid",
        RunError::InvalidInput { .. } => "input.invalid",
        RunError::ProgramChanged { .. } => "session.program-changed",
        RunError::UpgradeImpossible { .. } => "session.upgrade-impossible",
        RunError::Store(archmax_vm::session::StoreError::TakenOver(_)) => "session.taken-over",
        // A start that lost the race to make its named session (a retried request, or two
        // runners at once) says what the check before it says.
        RunError::Store(archmax_vm::session::StoreError::Exists(_)) => "session.exists",
        RunError::Store(archmax_vm::session::StoreError::Unavailable(_)) => "store.unavailable",
        RunError::Store(_) => "store.failed",
        // A kind of error newer than this server: its status still comes from its kind.
        _ => "error.other",
    }
}

impl From<RunError> for ApiError {
    fn from(error: RunError) -> ApiError {
        if let RunError::InvalidInput { message, fields, .. } = &error {
            return ApiError::invalid(message.clone(), fields);
        }
        let kind = error.kind();
        let status = StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let details = match &error {
            RunError::UnknownWorkflow { known, .. } => json!({ "known": known }),
            RunError::UnknownTrigger { declared, .. } => json!({ "declared": declared }),
            RunError::Conflict { expected, found, .. } => json!({ "expected": expected, "found": found }),
            RunError::BudgetStopped { stop, .. } => {
                json!({ "budget": archmax_vm::session::summary::budget_stop(stop) })
            }
            _ => json!({}),
        };
        let message = match &error {
            RunError::BudgetStopped { .. } => {
                format!("{error} (send the request again with `\"raiseBudget\": true`, as a caller that may decide)")
            }
            // The database's words name hosts, users and its pg_hba.conf: the operator reads
            // them in the log, a client only that the store is away.
            RunError::Store(archmax_vm::session::StoreError::Unavailable(why)) => {
                tracing::warn!("a request found the session store unreachable: {why}");
                "the session store cannot be reached for now; send the request again shortly".to_string()
            }
            _ => error.to_string(),
        };
        let answer = ApiError::new(status, run_error_code(&error), message).with_details(details);
        match kind {
            ErrorKind::Busy => answer.retry_after(1),
            ErrorKind::Unavailable => answer.retry_after(5),
            _ => answer,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        // What `crate::routes::note_refusals` counts and logs, wherever the refusal arose.
        if let Some(refusal) = crate::auth::Refusal::of(&self) {
            response.extensions_mut().insert(refusal);
        }
        if let Some(seconds) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use archmax_vm::session::StoreError;

    use super::*;

    #[test]
    fn a_store_that_refuses_a_second_session_or_a_writer_taken_over_answers_409_with_its_own_code() {
        for (error, code) in [
            (StoreError::Exists("s".to_string()), "session.exists"),
            (StoreError::TakenOver("s".to_string()), "session.taken-over"),
        ] {
            let answer = ApiError::from(RunError::Store(error));
            assert_eq!((answer.status, answer.code), (StatusCode::CONFLICT, code));
        }
        let failed = ApiError::from(RunError::Store(StoreError::Missing("s".to_string())));
        assert_eq!(failed.code, "store.failed");
    }

    #[test]
    fn a_store_that_cannot_be_reached_answers_503_with_a_retry() {
        let said = "PostgreSQL refused a connection: FATAL: the database system is starting up";
        let answer = ApiError::from(RunError::Store(StoreError::Unavailable(said.to_string())));
        assert_eq!((answer.status, answer.code), (StatusCode::SERVICE_UNAVAILABLE, "store.unavailable"));
        assert_eq!(answer.retry_after, Some(5));
        assert!(!answer.message.contains("starting up"), "the database's words stay in the log: {}", answer.message);
        assert!(answer.message.contains("cannot be reached"), "{}", answer.message);
    }
}
