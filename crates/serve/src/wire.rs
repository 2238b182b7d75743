//! The shapes the HTTP API reads and writes, as types: request bodies, query strings,
//! path parameters and answers. `/v1/openapi.json` is derived from them
//! ([`crate::openapi`]), so each constraint the server enforces is written once, here,
//! beside the field it limits.
//!
//! The one thing to know: bodies are still read field by field (the routes' `JsonBody`
//! extractor hands the server parsed JSON, and every offending field is reported at
//! once, see `server.rs`), so these types describe the wire; a constraint added to a
//! check in the server must be added here too. The unit tests below hold the session-id
//! pattern against the VM's own check.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, SchemaType, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

pub mod session;

/// A session id, as `check_session_id` in the VM takes it from a caller: letters, digits
/// and `._~:@-`, at most 200 bytes, neither `.` nor `..`. (An id whose first segment is
/// a reserved workspace root such as `scratchpad` or a mount's name is refused too; a
/// pattern cannot name a workspace's mounts, so the description says it.)
pub const SESSION_ID_PATTERN: &str = r"^(\.*[A-Za-z0-9_~:@-][A-Za-z0-9._~:@-]*|\.{3,})$";

/// A session id a start may name: as [`SESSION_ID_PATTERN`], without `~` (reserved for the
/// ids of sub-workflow sessions, `<caller>~<n>`).
pub const NEW_SESSION_ID_PATTERN: &str = r"^(\.*[A-Za-z0-9_:@-][A-Za-z0-9._:@-]*|\.{3,})$";

/// A seeded `title`: one line, not blank, at most 200 characters.
pub const TITLE_PATTERN: &str = r"^[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]([^\n]*[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000])?[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$";

/// Text with at least one character that is not white space (the runtime trims and
/// refuses what is left empty). The class is Rust's `White_Space` set, so the document and
/// the server agree on every code point.
pub const NOT_BLANK_PATTERN: &str =
    "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// The name of a variable a caller may seed.
pub const VARIABLE_NAME_PATTERN: &str = "^[a-z][a-z0-9_]*$";

/// `variables`: values keyed by variable name, each seeded locked; `title` (a non-empty
/// line of text) listed, and other well-formed names allowed when `other_names` is set.
fn variables_schema(description: &str, other_names: bool) -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(description))
        .property_names(Some(ObjectBuilder::new().schema_type(Type::String).pattern(Some(VARIABLE_NAME_PATTERN))))
        .property(
            "title",
            ObjectBuilder::new().schema_type(Type::String).pattern(Some(TITLE_PATTERN)).max_length(Some(200)),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(other_names)))
        .into()
}

/// A start's `variables`. A start by `manual` (the default) seeds any well-formed name, as
/// its caller is the session's host; a start by a host trigger takes only what that
/// trigger declares, which one document for every workflow cannot list. The schema
/// follows the default: every name allowed, the refusal said in words.
fn start_variables_schema() -> Schema {
    variables_schema(
        "Variable values, seeded locked. Names are lowercase letters, digits and `_`, starting with a letter; \
         a seeded `title` is a non-empty line of text. A start by `manual` (the default trigger) seeds any such \
         name. A start by another trigger takes only `title` and the names that trigger declares (its \
         `requires`, and the first name of its `session:` and `message:` paths: the workflow's own, so this \
         document cannot list them); any other name is then refused with 400 naming it.",
        true,
    )
}

/// A delivery's `variables`: beyond `title`, only what the delivered trigger declares,
/// which this document cannot list; so it promises `title` alone, as the server takes it
/// on every delivery and refuses a name the trigger does not declare.
fn delivery_variables_schema() -> Schema {
    variables_schema(
        "Variable values, seeded locked. Every delivery takes `title`, a non-empty line of text. It also takes \
         the names its trigger declares (its `requires`, and the first name of its `session:` and `message:` \
         paths: the workflow's own, so this document cannot list them); any other name is refused with 400 \
         naming it. Names are lowercase letters, digits and `_`, starting with a letter.",
        false,
    )
}

/// `POST /v1/workflows/{slug}/sessions`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRequest {
    /// The first user message; not blank.
    #[schema(pattern = "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub message: String,
    /// The trigger that starts the session (default `manual`).
    pub trigger: Option<String>,
    #[schema(schema_with = start_variables_schema)]
    pub variables: Option<BTreeMap<String, Value>>,
    /// A session id of the caller's choosing (no `~`: those name sub-workflow sessions);
    /// refused with 409 when it exists.
    #[schema(max_length = 200, pattern = r"^(\.*[A-Za-z0-9_:@-][A-Za-z0-9._:@-]*|\.{3,})$")]
    pub session_id: Option<String>,
}

/// An upload (`multipart/form-data`): the part `request` holds the route's JSON request
/// (the component `request_component`); each other part is a file for the `file` input
/// it is named after, seeded as `scratchpad/inputs/<name><.ext>`. Those names are the
/// workflow's own, which one document for every workflow cannot list (`GET
/// /v1/workflows` gives each trigger's `fileInputs`), so the schema promises the request
/// part alone, as a delivery's `variables` promises `title` alone, and says the rest in
/// words: a part no file input is named after is refused with 400 naming it.
fn upload_schema(request_component: &str, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .property(crate::routes::REQUEST_PART, utoipa::openapi::Ref::from_schema_name(request_component))
        .required(crate::routes::REQUEST_PART)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .into()
}

/// `POST /v1/workflows/{slug}/sessions` as `multipart/form-data`: a start with files.
pub struct StartUpload;

impl PartialSchema for StartUpload {
    fn schema() -> RefOr<Schema> {
        upload_schema(
            "StartRequest",
            "A start with files for the trigger's `file` inputs: the part `request` is the JSON start request; \
             each other part is one file (binary), named after the `file` input it fills (`GET /v1/workflows` \
             lists them as `fileInputs`): at most its `maxSize` and 10 MiB, its file name ending in one of its \
             `accept` entries. At most 16 parts, the files at most 40 MiB together.",
        )
    }
}

impl ToSchema for StartUpload {}

/// `POST /v1/sessions/{id}/deliver` as `multipart/form-data`: a delivery with files.
pub struct DeliverUpload;

impl PartialSchema for DeliverUpload {
    fn schema() -> RefOr<Schema> {
        upload_schema(
            "DeliverRequest",
            "A delivery with files for the trigger's `file` inputs: the part `request` is the JSON delivery; \
             each other part is one file (binary), named after the `file` input it fills (`GET /v1/workflows` \
             lists them as `fileInputs`): at most its `maxSize` and 10 MiB, its file name ending in one of its \
             `accept` entries. At most 16 parts, the files at most 40 MiB together.",
        )
    }
}

impl ToSchema for DeliverUpload {}

/// `POST /v1/sessions/{id}/messages`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageRequest {
    /// The user's message; not blank.
    #[schema(pattern = "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub message: String,
    /// Raise the session's budget (`[limits]` of `archmax.toml`); needs a token with
    /// `decide`. A session stopped at its budget takes the message and goes on;
    /// one parked for a decision gets one more allowance of its cost limit.
    #[serde(rename = "raiseBudget")]
    pub raise_budget: Option<bool>,
}

/// `POST /v1/sessions/{id}/decide`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    /// The transition taken: one the parked state declares (its slug, as the session's
    /// `park.transitions` lists them); another is refused with 400.
    #[schema(pattern = r"[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")]
    pub to: String,
    /// Why, recorded with the decision.
    pub comment: Option<String>,
    /// Raise the session's budget (`[limits]` of `archmax.toml`); needs a token with
    /// `decide`. One more allowance of its cost limit, before the decision.
    #[serde(rename = "raiseBudget")]
    pub raise_budget: Option<bool>,
}

/// `POST /v1/sessions/{id}/deliver`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliverRequest {
    /// The trigger delivered: one the workflow declares (unless `undeclared`); not blank.
    #[schema(pattern = "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub trigger: String,
    #[schema(schema_with = delivery_variables_schema)]
    pub variables: Option<BTreeMap<String, Value>>,
    /// A message delivered with the trigger.
    pub message: Option<String>,
    /// Deliver a trigger id the workflow does not declare (an `admin` token only).
    pub undeclared: Option<bool>,
    /// Raise the session's budget (`[limits]` of `archmax.toml`); needs a token with
    /// `decide`. Lifts a stop at the budget (a stopped session takes no delivery
    /// without it) and grants one more allowance of its cost limit.
    #[serde(rename = "raiseBudget")]
    pub raise_budget: Option<bool>,
}

/// The body of `POST /v1/triggers/{trigger}`: the trigger's input, any JSON object.
#[derive(Debug)]
pub struct TriggerInput;

impl PartialSchema for TriggerInput {
    fn schema() -> RefOr<Schema> {
        let Schema::Object(mut object) = delivery_variables_schema() else {
            return delivery_variables_schema().into();
        };
        object.schema_type = SchemaType::Type(Type::Object);
        object.description = Some(
            "The trigger's input: a JSON object whose members become the session's locked variables. Beyond \
             `title`, it may carry only the members its trigger declares (the names in its `requires`, and the \
             first name of its `session:` and `message:` paths); those are the workflow's own, so this document \
             cannot list them, and any other member is refused with 400 naming it."
                .to_string(),
        );
        Schema::Object(object).into()
    }
}

impl ToSchema for TriggerInput {}

/// `?wait=`: how long a turn request waits for the turn's outcome.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds to wait for the turn's outcome (fractions allowed; more than 300 waits 300).
    /// Without it the answer is 202 as soon as the turn is accepted.
    #[param(minimum = 0, nullable = false)]
    pub wait: Option<f64>,
}

/// `POST /v1/triggers/{trigger}`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FireQuery {
    /// The workflow, when several served workflows declare the trigger.
    #[param(nullable = false)]
    pub workflow: Option<String>,
    /// Seconds to wait for the turn's outcome (fractions allowed; more than 300 waits 300).
    #[param(minimum = 0, nullable = false)]
    pub wait: Option<f64>,
}

/// A session's lifecycle status, as filters and answers spell it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Running,
    Completed,
    Failed,
    Rejected,
    AwaitingDecision,
    AwaitingInput,
}

/// `GET /v1/sessions`'s filters and page; any other parameter is refused with 400.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this workflow's sessions (no control character: 400).
    #[param(nullable = false, pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$")]
    pub workflow: Option<String>,
    /// Only sessions with this status.
    #[param(inline, nullable = false)]
    pub status: Option<SessionStatus>,
    /// Only parked (or only unparked) sessions.
    #[param(nullable = false)]
    pub parked: Option<bool>,
    /// Only sessions waiting for input whose `resumeAt` has come (compared as instants).
    #[param(nullable = false)]
    pub due: Option<bool>,
    /// The `nextCursor` of the previous page (no control character: 400).
    #[param(nullable = false, pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$")]
    pub cursor: Option<String>,
    /// Sessions per page (default 50).
    #[param(minimum = 1, maximum = 500, nullable = false)]
    pub limit: Option<u32>,
}

/// A path naming a workflow.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct WorkflowPath {
    /// The workflow's slug (its folder under `workflows/`).
    pub slug: String,
}

/// A path naming a session.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SessionPath {
    /// The session's id. Ids starting with a reserved workspace root (such as `scratchpad`)
    /// or a mount's name are refused with 400.
    #[param(max_length = 200, pattern = r"^(\.*[A-Za-z0-9_~:@-][A-Za-z0-9._~:@-]*|\.{3,})$")]
    pub id: String,
}

/// A path naming a host trigger.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TriggerPath {
    /// The trigger's id, as a workflow declares it (`manual` is not a host trigger: 400).
    pub trigger: String,
}

/// `GET /v1/sessions/{id}/events`'s header.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct EventsHeaders {
    /// Resume after this event id. On a store one process uses, a restarted server numbers
    /// above every id the one before it gave (unless the system clock was set back), so an
    /// id from before the restart resumes before every event the new process has. An id past the session's last event starts
    /// the stream over: its first id is then no greater.
    #[serde(rename = "Last-Event-ID")]
    #[param(minimum = 0, nullable = false)]
    pub last_event_id: Option<u64>,
}

/// One offending field of a refused request.
#[derive(Debug, Serialize, ToSchema)]
pub struct FieldProblemBody {
    pub field: String,
    pub problem: String,
}

/// What went wrong, beyond the code.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetails {
    /// Every offending field (400 answers).
    #[schema(nullable = false)]
    pub fields: Option<Vec<FieldProblemBody>>,
}

/// The error inside every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorObject {
    /// A stable id, such as `session.busy` or `input.invalid`.
    pub code: String,
    /// One sentence a person reads.
    pub message: String,
    pub details: ErrorDetails,
}

/// Every error answer: `{"error": {"code", "message", "details"}}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub error: ErrorObject,
}

/// 202: the turn was accepted and runs on.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub session_id: String,
    /// `running` while the turn runs.
    pub status: String,
}

/// A session: the one shape `GET /v1/sessions/{id}`, a page of sessions and a turn
/// answered within its wait use.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub session_id: String,
    pub workflow: String,
    pub status: SessionStatus,
    /// The state the session stands in (none before its first turn).
    pub workflow_state: Option<String>,
    /// Each variable's value and whether it is locked.
    #[schema(value_type = BTreeMap<String, session::SessionVariable>)]
    pub variables: Value,
    /// Every move of the session, oldest first.
    #[schema(value_type = Vec<session::TrailStep>)]
    pub trail: Value,
    /// How the session ended, once it did (null before).
    #[schema(value_type = Option<session::SessionExit>)]
    pub exit: Value,
    #[schema(value_type = session::SessionUsage)]
    pub usage: Value,
    pub spec_hash: String,
    /// When the session was created, in milliseconds since the epoch.
    #[schema(minimum = 0)]
    pub created_at: u64,
    /// When the session last changed, in milliseconds since the epoch.
    #[schema(minimum = 0)]
    pub updated_at: u64,
    /// Present (true) when a completed session may still take a delivery.
    #[schema(nullable = false)]
    pub resumable: Option<bool>,
    /// A sub-workflow's session: the session that called it.
    #[schema(nullable = false)]
    pub parent_session_id: Option<String>,
    /// While parked: the decision or input it waits for.
    #[schema(value_type = Option<session::Park>, nullable = false)]
    pub park: Option<Value>,
    /// What the session spent per model and role, in the order each was first called.
    #[schema(value_type = Option<Vec<session::SpendLine>>, nullable = false)]
    pub spend: Option<Value>,
    /// Once the host's budgets touched the session: how often a person raised them, and
    /// the limit it stopped at while it waits for a raise.
    #[schema(value_type = Option<session::SessionBudget>, nullable = false)]
    pub budget: Option<Value>,
    /// Present when a turn request waited for the outcome: what the turn did.
    #[schema(value_type = Option<session::TurnSummary>, nullable = false)]
    pub turn: Option<Value>,
    /// Present on a session a flow walk filed in a store the runner shares.
    #[schema(value_type = Option<session::FlowMarker>, nullable = false)]
    pub flow: Option<Value>,
}

/// How a firing's turn ended, as much as a webhook sender is told.
#[derive(Debug, Serialize, ToSchema)]
pub struct FiredTurn {
    /// `turn`, `deliver` or `decide`: what the firing ran.
    pub disposition: String,
}

/// 200 from `POST /v1/triggers/{trigger}` when the turn ended within the wait: the
/// session's id and status only (a webhook sender sees nothing else of the session).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fired {
    pub session_id: String,
    pub status: SessionStatus,
    pub turn: FiredTurn,
}

/// One page of `GET /v1/sessions`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionPage {
    pub sessions: Vec<Session>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
    /// Sessions that no longer load, skipped.
    #[schema(nullable = false)]
    pub unreadable: Option<Vec<String>>,
}

/// `GET /v1/sessions/{id}/transcript`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transcript {
    pub session_id: String,
    #[schema(value_type = Vec<Object>)]
    pub messages: Value,
}

/// `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub ok: bool,
}

/// `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    pub ready: bool,
    pub workflows: Vec<String>,
}

/// One workflow whose program an artifact changed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadedWorkflowBody {
    pub workflow: String,
    pub spec_hash: String,
    pub previous: Option<String>,
    /// The workflow is out of service: it starts nothing, and its parked sessions finish.
    pub disabled: bool,
}

/// `POST /v1/admin/artifacts`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Loaded {
    /// The workflows whose program changed.
    pub loaded: Vec<LoadedWorkflowBody>,
    /// Every workflow served.
    pub workflows: Vec<String>,
}

/// `GET /v1/admin/notifications`: each notifier's last deliveries.
#[derive(Debug, Serialize, ToSchema)]
pub struct Notifications {
    /// Every notifier of `archmax.toml`, by name.
    pub notifiers: Vec<NotifierDeliveries>,
}

/// One notifier's last deliveries, oldest first (at most 32, kept in this runner's memory).
#[derive(Debug, Serialize, ToSchema)]
pub struct NotifierDeliveries {
    pub notifier: String,
    pub deliveries: Vec<crate::notify::DeliveryRecord>,
}

/// The artifact bytes `POST /v1/admin/artifacts` takes: an artifact built by
/// `archmax build` (signed when the server trusts keys).
#[derive(Debug, ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct ArtifactBytes(pub Vec<u8>);

#[cfg(test)]
mod tests {
    use super::*;
    use archmax_vm::session::id::check_session_id;

    #[test]
    fn the_documented_statuses_are_the_sessions_statuses_spelled_alike() {
        use archmax_vm::session::Status;
        // An exhaustive match: a status the VM gains fails to compile here until the
        // document's enum names it too.
        let documented = |status: Status| match status {
            Status::Running => SessionStatus::Running,
            Status::Completed => SessionStatus::Completed,
            Status::Failed => SessionStatus::Failed,
            Status::Rejected => SessionStatus::Rejected,
            Status::AwaitingDecision => SessionStatus::AwaitingDecision,
            Status::AwaitingInput => SessionStatus::AwaitingInput,
        };
        for status in Status::ALL {
            let spelled = serde_json::to_value(status).expect("a status serializes");
            assert_eq!(serde_json::to_value(documented(status)).expect("serializes"), spelled);
        }
    }

    #[test]
    fn the_documented_session_id_pattern_accepts_exactly_the_ids_the_server_takes() {
        let pattern = regex::Regex::new(SESSION_ID_PATTERN).expect("the pattern compiles");
        for id in ["abc", "session-0f", ".a", "..a", "...", "a..", "tenant-1.conv:42@x", "s~review:triage:2", "_"] {
            assert!(pattern.is_match(id), "{id} is documented");
            assert_eq!(check_session_id(id, &[]), Ok(()), "{id} is taken");
        }
        for id in ["", ".", "..", "a/b", "a b", "é", "a\n"] {
            assert!(!pattern.is_match(id), "{id:?} is not documented");
            assert!(check_session_id(id, &[]).is_err(), "{id:?} is refused");
        }
    }

    #[test]
    fn a_start_may_not_name_a_sub_workflow_id_and_a_title_is_one_line() {
        let new = regex::Regex::new(NEW_SESSION_ID_PATTERN).expect("the pattern compiles");
        assert!(new.is_match("s-1") && !new.is_match("s~1") && !new.is_match(".."));
        let title = regex::Regex::new(TITLE_PATTERN).expect("the pattern compiles");
        for good in ["Refund", " two words ", "x\n"] {
            assert!(title.is_match(good), "{good:?}");
        }
        for bad in ["", "  ", "one\ntwo", "\u{3000}"] {
            assert!(!title.is_match(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_not_blank_pattern_refuses_exactly_what_trims_to_nothing() {
        let pattern = regex::Regex::new(NOT_BLANK_PATTERN).expect("the pattern compiles");
        for text in [
            "",
            " ",
            "\t\n\r\u{b}\u{c}",
            "\u{85}\u{a0}\u{1680}\u{2000}\u{200a}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}",
        ] {
            assert!(text.trim().is_empty());
            assert!(!pattern.is_match(text), "{text:?}");
        }
        for text in ["a", " a ", "\u{1c}", "\u{200b}", "\u{feff}"] {
            assert!(!text.trim().is_empty());
            assert!(pattern.is_match(text), "{text:?}");
        }
    }
}
