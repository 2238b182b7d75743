//! The two pages: the inbox (sessions parked for a decision, then those waiting for
//! input) and a session (its graph, decision record, forms, variables, trail and
//! transcript).
//!
//! Each page is built from the store as it stands; its parts that change as the session
//! runs carry `data-region`, which the script swaps for the fresh page's when an event
//! arrives.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};

use archmax_program::program::{Program, WorkflowProgram};
use archmax_vm::session::store::{ListQuery, instant_ms};
use archmax_vm::session::{Message, SessionState, ToolStatus};

use super::render::{self, Notice, Viewer, age, encode, html_response, json_block, markdown_block, session_url};
use super::signin::{SignedIn, signed_in};
use super::{Inbox, Shared, forms, graph, present};
use crate::auth::Scope;
use crate::error::ApiError;
use archmax_config::settings::InboxSettings;

/// The order of the inbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    #[default]
    Newest,
    Oldest,
}

/// The inbox's filters (`?order=oldest&workflow=…&state=…&mine=1`).
#[derive(Clone, Debug, Default)]
pub struct InboxFilter {
    pub order: Order,
    pub workflow: Option<String>,
    pub state: Option<String>,
    /// Only sessions whose state names the viewer among its `approvers`.
    pub mine: bool,
}

impl InboxFilter {
    pub fn parse(query: Option<&str>) -> InboxFilter {
        let mut filter = InboxFilter::default();
        for (key, value) in crate::routes::query_pairs(query) {
            let value = Some(value).filter(|value| !value.is_empty());
            match key.as_str() {
                "order" => {
                    filter.order = if value.as_deref() == Some("oldest") { Order::Oldest } else { Order::Newest }
                }
                "workflow" => filter.workflow = value,
                "state" => filter.state = value,
                "mine" => filter.mine = value.is_some(),
                _ => {}
            }
        }
        filter
    }

    fn admits(&self, session: &SessionState, identity: &str) -> bool {
        let head = &session.head;
        let state = head.pending_decision.as_ref().map(|decision| decision.state.as_str()).or(head.position.as_deref());
        self.workflow.as_ref().is_none_or(|workflow| *workflow == head.workflow)
            && self.state.as_ref().is_none_or(|wanted| Some(wanted.as_str()) == state)
            && (!self.mine
                || head
                    .pending_decision
                    .as_ref()
                    .is_some_and(|decision| decision.approvers.iter().any(|approver| approver == identity)))
    }
}

/// Every parked session in the store, read a page at a time.
async fn parked_sessions(inbox: &Inbox) -> Result<Vec<SessionState>, ApiError> {
    let mut sessions = Vec::new();
    let mut cursor = None;
    loop {
        let query = ListQuery { cursor, limit: ListQuery::MAX_LIMIT, parked: Some(true), ..ListQuery::default() };
        let page = inbox.server.store.list_page(&query).await.map_err(archmax_vm::RunError::from)?;
        sessions.extend(page.sessions);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(sessions),
        }
    }
}

/// When a session parked, in milliseconds since the epoch.
fn parked_since(session: &SessionState) -> Option<i64> {
    let head = &session.head;
    let since = match (&head.pending_decision, &head.pending_input) {
        (Some(decision), _) => &decision.created_at,
        (None, Some(input)) => &input.parked_at,
        (None, None) => return i64::try_from(head.updated_at).ok(),
    };
    instant_ms(since)
}

/// The inbox's content: the filter form, then both queues of `sessions` as `filter`
/// admits them, ages counted to `now_ms`.
pub fn inbox_body(
    sessions: &[SessionState],
    filter: &InboxFilter,
    (identity, now_ms): (&str, u64),
    workflows: &[String],
    settings: &InboxSettings,
) -> Markup {
    let mut shown: Vec<(&SessionState, Option<i64>)> = sessions
        .iter()
        .filter(|session| filter.admits(session, identity))
        .map(|session| (session, parked_since(session)))
        .collect();
    shown.sort_by(|a, b| match filter.order {
        Order::Newest => b.1.cmp(&a.1).then_with(|| a.0.id.cmp(&b.0.id)),
        Order::Oldest => a.1.cmp(&b.1).then_with(|| a.0.id.cmp(&b.0.id)),
    });
    let (decisions, inputs): (Vec<_>, Vec<_>) =
        shown.into_iter().partition(|(session, _)| session.head.pending_decision.is_some());
    let mut states: Vec<&str> = sessions
        .iter()
        .filter_map(|session| {
            session
                .head
                .pending_decision
                .as_ref()
                .map(|decision| decision.state.as_str())
                .or(session.head.position.as_deref())
        })
        .collect();
    states.sort_unstable();
    states.dedup();
    html! {
        h1 { "Decision inbox" }
        form.filters method="get" action="/" aria-label="Filter the inbox" {
            div.field {
                label for="f-workflow" { "Workflow" }
                select id="f-workflow" name="workflow" {
                    option value="" { "All workflows" }
                    @for workflow in workflows {
                        option value=(workflow) selected[filter.workflow.as_deref() == Some(workflow.as_str())] { (workflow) }
                    }
                }
            }
            div.field {
                label for="f-state" { "State" }
                select id="f-state" name="state" {
                    option value="" { "All states" }
                    @for state in &states {
                        option value=(state) selected[filter.state.as_deref() == Some(*state)] { (state) }
                    }
                }
            }
            div.field {
                label for="f-order" { "Order" }
                select id="f-order" name="order" {
                    option value="newest" selected[filter.order == Order::Newest] { "Newest first" }
                    option value="oldest" selected[filter.order == Order::Oldest] { "Oldest first" }
                }
            }
            div.field.check {
                input id="f-mine" type="checkbox" name="mine" value="1" checked[filter.mine];
                label for="f-mine" { "Assigned to me" }
            }
            button type="submit" { "Filter" }
        }
        div data-region="queues" {
            (queue("decisions", "Awaiting a decision", "No session is waiting for a decision.",
                &["Session", "Workflow", "Decision", "Waiting", "Who decides"],
                decisions.iter().map(|(session, since)| decision_row(session, *since, (identity, now_ms), settings))))
            (queue("inputs", "Awaiting input", "No session is waiting for input.",
                &["Session", "Workflow", "Waiting for", "Waiting"],
                inputs.iter().map(|(session, since)| input_row(session, *since, now_ms, settings))))
        }
    }
}

/// One queue of the inbox: its heading with the count, then a table of `rows` under
/// `columns`, or `empty` when there are none.
fn queue(id: &str, heading: &str, empty: &str, columns: &[&str], rows: impl Iterator<Item = Markup>) -> Markup {
    let rows: Vec<Markup> = rows.collect();
    let heading_id = format!("{id}-heading");
    html! {
        section aria-labelledby=(heading_id) {
            h2 id=(heading_id) { (heading) " " span.count { "(" (rows.len()) ")" } }
            @if rows.is_empty() {
                p.empty { (empty) }
            } @else {
                table.queue {
                    thead { tr { @for column in columns { th scope="col" { (column) } } } }
                    tbody { @for row in rows { (row) } }
                }
            }
        }
    }
}

/// A row's first cell: the session's headline as the link to it, the variables its
/// workflow's inbox settings choose, and its id.
fn session_cell(session: &SessionState, settings: &InboxSettings) -> Markup {
    let summary = present::row_summary(session, &settings.for_workflow(&session.head.workflow));
    html! {
        td data-label="Session" {
            a href=(session_url(&session.id)) { (summary.headline) }
            @if !summary.facts.is_empty() {
                p.summary {
                    @for (index, (name, value)) in summary.facts.iter().enumerate() {
                        @if index > 0 { " · " }
                        span.fact { span.key { (name) ": " } (value) }
                    }
                }
            }
            p.session-id { code { (session.id) } }
        }
    }
}

fn input_row(session: &SessionState, since: Option<i64>, now_ms: u64, settings: &InboxSettings) -> Markup {
    let input = session.head.pending_input.as_ref();
    html! {
        tr data-session=(session.id) {
            (session_cell(session, settings))
            td data-label="Workflow" { (session.head.workflow) }
            td data-label="Waiting for" { (input.map_or("", |input| input.reason.as_str())) }
            td data-label="Waiting" { (age(now_ms, since)) }
        }
    }
}

fn decision_row(
    session: &SessionState,
    since: Option<i64>,
    (identity, now_ms): (&str, u64),
    settings: &InboxSettings,
) -> Markup {
    let decision = session.head.pending_decision.as_ref();
    let approvers = decision.map(|decision| decision.approvers.as_slice()).unwrap_or_default();
    let mine = approvers.iter().any(|approver| approver == identity);
    html! {
        tr data-session=(session.id) {
            (session_cell(session, settings))
            td data-label="Workflow" { (session.head.workflow) }
            td data-label="Decision" {
                @if let Some(decision) = decision { (decision.title.as_deref().unwrap_or(&decision.state)) }
            }
            td data-label="Waiting" { (age(now_ms, since)) }
            td data-label="Who decides" {
                @if mine { span.badge.mine { "Assigned to you" } " " }
                @if approvers.is_empty() { "anyone with the decide scope" } @else { (approvers.join(", ")) }
            }
        }
    }
}

/// `GET /`: the inbox.
pub async fn inbox_route(State(inbox): Shared, RawQuery(query): RawQuery, headers: HeaderMap) -> Response {
    let signed = match signed_in(&inbox, &headers, Scope::Read).await {
        Ok(signed) => signed,
        Err(refused) => return refused.into_page(),
    };
    let sessions = match parked_sessions(&inbox).await {
        Ok(sessions) => sessions,
        Err(error) => return render::error_page(error.status, "The store did not answer", &error.message),
    };
    let filter = InboxFilter::parse(query.as_deref());
    let now = (signed.caller.identity.as_str(), inbox.server.now_ms());
    let body = inbox_body(&sessions, &filter, now, &inbox.server.workflows(), &inbox.server.settings.inbox);
    let viewer = Viewer { identity: &signed.caller.identity, csrf: &signed.csrf };
    html_response(StatusCode::OK, render::page("Inbox", Some(&viewer), None, Some("/live"), body))
}

/// `GET /sessions/{id}`: a session's page (`?done=` names what the viewer just did).
pub async fn session_route(
    State(inbox): Shared,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let signed = match signed_in(&inbox, &headers, Scope::Read).await {
        Ok(signed) => signed,
        Err(refused) => return refused.into_page(),
    };
    let done = crate::routes::query_pairs(query.as_deref()).into_iter().find(|(key, _)| key == "done");
    let notice = done.and_then(|(_, what)| match what.as_str() {
        "decided" => Some(Notice::info("Your decision was recorded.")),
        "replied" => Some(Notice::info("Your message was sent.")),
        "delivered" => Some(Notice::info("The input was delivered.")),
        _ => None,
    });
    session_page(&inbox, &signed, &id, StatusCode::OK, notice).await
}

/// A session's page with `notice` at its top, answered with `status`.
pub async fn session_page(
    inbox: &Arc<Inbox>,
    signed: &SignedIn,
    id: &str,
    status: StatusCode,
    notice: Option<Notice>,
) -> Response {
    // The page's stream starts after the last event before the session is read: what
    // happens from here on refreshes the page.
    let seen = inbox.server.hub.last_anywhere(id).await;
    let session = match inbox.server.session(id).await {
        Ok(session) => session,
        Err(error) => return render::error_page(error.status, "No such session", &error.message),
    };
    let runtime = inbox.server.runtime_for_session(&session).ok();
    let program = runtime.as_ref().map(|runtime| &**runtime.program());
    let evidence = read_evidence(inbox, &session).await;
    let (may_decide, may_start) = (signed.holds(inbox, Scope::Decide), signed.holds(inbox, Scope::Start));
    let settings = &inbox.server.settings;
    let view = SessionView { session: &session, settings, program, evidence: &evidence, signed, may_decide, may_start };
    let viewer = Viewer { identity: &signed.caller.identity, csrf: &signed.csrf };
    let path: Vec<String> = session.id.split('/').map(encode).collect();
    let live = format!("/live/{}?after={seen}", path.join("/"));
    let title = format!("{} · {}", session.id, session.head.workflow);
    html_response(status, render::page(&title, Some(&viewer), notice.as_ref(), Some(&live), view.render()))
}

/// The declared evidence of a session's pending decision: each file's head and size,
/// or why it could not be read.
async fn read_evidence(inbox: &Inbox, session: &SessionState) -> Vec<EvidenceFile> {
    let Some(decision) = &session.head.pending_decision else { return Vec::new() };
    let paths = decision.evidence.clone();
    let files = match inbox.server.store.files(&session.id) {
        Ok(files) => files,
        Err(error) => {
            return paths.into_iter().map(|path| EvidenceFile { path, read: Err(error.to_string()) }).collect();
        }
    };
    // The session's files may be on disk: read them off the executor's threads.
    let read = tokio::task::spawn_blocking(move || {
        paths
            .into_iter()
            .map(|path| {
                let read = files.read_head(&path, render::EVIDENCE_SHOWN).map_err(|error| error.to_string());
                EvidenceFile { path, read }
            })
            .collect::<Vec<_>>()
    });
    read.await.unwrap_or_default()
}

/// One evidence file: its head and size, or why it could not be read.
struct EvidenceFile {
    path: String,
    read: Result<(Vec<u8>, u64), String>,
}

struct SessionView<'a> {
    session: &'a SessionState,
    settings: &'a archmax_config::settings::RunnerSettings,
    program: Option<&'a Program>,
    evidence: &'a [EvidenceFile],
    signed: &'a SignedIn,
    may_decide: bool,
    may_start: bool,
}

impl SessionView<'_> {
    fn workflow(&self) -> Option<(&Program, &WorkflowProgram)> {
        let program = self.program?;
        program.workflow(self.session.head.workflow.as_str()).map(|(_, workflow)| (program, workflow))
    }

    /// The trigger the runner's scheduler delivers to this workflow's due sessions
    /// (`[schedule.<workflow>] wake_trigger`), if it has one.
    fn scheduled_wake(&self) -> Option<String> {
        self.settings.schedules.get(&self.session.head.workflow).map(|schedule| schedule.wake_trigger.clone())
    }

    fn render(&self) -> Markup {
        let session = self.session;
        let head = &session.head;
        let title = self.workflow().and_then(|(program, workflow)| workflow.title.map(|title| program.str(title)));
        let visited: Vec<&str> = session.trail.iter().map(|step| step.to.as_str()).collect();
        html! {
            div data-region="summary" {
                p.crumbs { a href="/" { "Inbox" } " / " (session.id) }
                h1 { (title.unwrap_or(&head.workflow)) }
                dl.facts {
                    dt { "Session" } dd { code { (session.id) } }
                    dt { "Workflow" } dd { (head.workflow) }
                    dt { "State" } dd data-field="state" { (head.position.as_deref().unwrap_or("(not started)")) }
                    dt { "Status" } dd { span.status data-field="status" data-status=(head.status_label()) { (head.status_label()) } }
                    dt { "Updated" } dd { (present::instant(head.updated_at)) }
                }
            }
            @if let Some((program, workflow)) = self.workflow() {
                section.graph-wrap data-region="graph" aria-labelledby="graph-heading" {
                    h2 id="graph-heading" { "Where it stands" }
                    div.scroll { (graph::svg(program, workflow, head.position.as_deref(), &visited)) }
                    (graph::legend())
                }
            }
            (self.decision())
            (self.input())
            section data-region="variables" aria-labelledby="variables-heading" {
                h2 id="variables-heading" { "Variables" }
                @if session.variables.is_empty() { p.empty { "No variables are set." } }
                @else {
                    table.variables {
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Value" } th scope="col" { "Locked" } } }
                        tbody {
                            @for (name, variable) in &session.variables {
                                tr { th scope="row" { (name) } td { (present::value_block(&variable.value)) } td { @if variable.locked { "locked" } } }
                            }
                        }
                    }
                }
            }
            section data-region="trail" aria-labelledby="trail-heading" {
                h2 id="trail-heading" { "Trail" }
                ol.trail {
                    @for step in &session.trail {
                        li {
                            span.kind { (step.kind.as_str()) } " → " strong { (step.to) }
                            @if let Some(by) = &step.decided_by { " by " span.decider { (by) } }
                            @if let Some(reason) = &step.reason { span.reason { " — " (reason) } }
                        }
                    }
                }
            }
            section data-region="transcript" aria-labelledby="transcript-heading" {
                h2 id="transcript-heading" { "Transcript" }
                ol.transcript {
                    @for message in &session.messages { (message_item(message)) }
                }
            }
        }
    }

    fn decision(&self) -> Markup {
        let Some(decision) = &self.session.head.pending_decision else { return html! {} };
        let identity = self.signed.caller.identity.as_str();
        let approver = decision.approvers.is_empty() || decision.approvers.iter().any(|approver| approver == identity);
        let allowed = self.may_decide && approver;
        let image_url = |path: &str| format!("/evidence?session={}&path={}", encode(&self.session.id), encode(path));
        let settings = self.settings.inbox.for_workflow(&self.session.head.workflow);
        let needing_comment: Vec<&str> = decision
            .transitions
            .iter()
            .filter(|choice| present::comment_required(choice, &settings))
            .map(|choice| choice.to.as_str())
            .collect();
        html! {
            section.decision data-region="decision" aria-labelledby="decision-heading" {
                h2 id="decision-heading" { "Decision: " (decision.title.as_deref().unwrap_or(&decision.state)) }
                (markdown_block(&decision.instructions))
                p.approvers {
                    @if decision.approvers.is_empty() { "Anyone with the decide scope may decide." }
                    @else { "Who decides: " (decision.approvers.join(", ")) "." }
                    @if !self.may_decide { " Your token does not hold the decide scope." }
                    @else if !approver { " You are not among them." }
                }
                @if !self.evidence.is_empty() {
                    h3 { "Evidence" }
                    @for EvidenceFile { path, read } in self.evidence {
                        article.evidence-file aria-label={ "Evidence " (path) } {
                            h4 { code { (path) } }
                            @match read {
                                Ok((bytes, size)) => (render::evidence_file(path, bytes, *size, &image_url(path))),
                                Err(why) => p.hint { "Not readable: " (why) },
                            }
                        }
                    }
                }
                form.decide method="post" action="/decide" {
                    input type="hidden" name="csrf" value=(self.signed.csrf);
                    input type="hidden" name="session" value=(self.session.id);
                    // The decision record this form answers: a click on a stale page
                    // never decides a later record it did not show.
                    input type="hidden" name="decision" value=(decision.seq);
                    div.field {
                        label for="comment" { (comment_label(&needing_comment, decision.transitions.len())) }
                        textarea id="comment" name="comment" rows="3" disabled[!allowed]
                            required[!needing_comment.is_empty() && needing_comment.len() == decision.transitions.len()] {}
                    }
                    div.choices role="group" aria-label="Decide" {
                        @for choice in &decision.transitions {
                            div.choice {
                                button type="submit" name="to" value=(choice.to) class={ "choice-" (choice.kind) }
                                    disabled[!allowed] {
                                    (choice.description.as_deref().map_or_else(|| format!("{}: {}", choice_label(&choice.kind), choice.to), str::to_string))
                                    " " span.slug { "→ " (choice.to) }
                                }
                            }
                        }
                    }
                }
                @if self.may_start {
                    form.reply method="post" action="/reply" {
                        input type="hidden" name="csrf" value=(self.signed.csrf);
                        input type="hidden" name="session" value=(self.session.id);
                        div.field {
                            label for="reply" { "Message to the session (it answers without moving on)" }
                            textarea id="reply" name="message" rows="2" required {}
                        }
                        button type="submit" { "Send message" }
                    }
                }
            }
        }
    }

    fn input(&self) -> Markup {
        let Some(input) = &self.session.head.pending_input else { return html! {} };
        // A trigger whose every input the session already holds locked (the start's,
        // say) takes nothing a form could give: it gets no form.
        let locked = |name: &str| self.session.variables.get(name).is_some_and(|variable| variable.locked);
        let triggers: Vec<(String, serde_json::Value)> = self
            .workflow()
            .map(|(program, workflow)| {
                workflow
                    .triggers
                    .iter()
                    .filter(|trigger| {
                        trigger.requires.is_empty()
                            || !trigger.requires.iter().all(|entry| locked(program.str(entry.name)))
                    })
                    .map(|trigger| {
                        let schema = serde_json::from_str(program.str(trigger.schema)).unwrap_or_default();
                        (program.str(trigger.id).to_string(), schema)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let wake = self.scheduled_wake();
        html! {
            section.input data-region="input" aria-labelledby="input-heading" {
                h2 id="input-heading" { "Waiting for input" }
                p { (input.reason) }
                @if let Some(at) = &input.resume_at {
                    p.hint {
                        "Due at " (present::instant_of(at)) ". "
                        @match &wake {
                            Some(trigger) => { "Then the runner delivers " code { (trigger) } " to it." }
                            None => { "Nothing delivers anything here when it is due: it goes on once an input is delivered." }
                        }
                    }
                }
                @if !self.may_start { p.hint { "Your token does not hold the start scope, which delivering needs." } }
                @else {
                    @for (trigger, schema) in &triggers {
                        @let uploads = forms::fields(schema).iter().any(|field| forms::is_file(field.schema));
                        form.deliver method="post" action="/deliver" enctype=[uploads.then_some("multipart/form-data")]
                            aria-label={ "Deliver " (trigger) } {
                            h3 { "Deliver " code { (trigger) } }
                            input type="hidden" name="csrf" value=(self.signed.csrf);
                            input type="hidden" name="session" value=(self.session.id);
                            input type="hidden" name="trigger" value=(trigger);
                            @for field in forms::fields(schema) { (forms::control(trigger, &field)) }
                            div.field {
                                label for={ (trigger) "-message" } { "Message (optional)" }
                                textarea id={ (trigger) "-message" } name="message" rows="2" {}
                            }
                            button type="submit" { "Deliver " (trigger) }
                        }
                    }
                }
            }
        }
    }
}

/// The comment box's label: optional, or required for the decisions that need it.
fn comment_label(needing: &[&str], choices: usize) -> String {
    match needing {
        [] => "Comment (optional, sent with your decision)".to_string(),
        all if all.len() == choices => "Comment (required: say why you decide as you do)".to_string(),
        some => format!("Comment (required to move to {}; optional otherwise)", some.join(" or ")),
    }
}

fn choice_label(kind: &str) -> &str {
    match kind {
        "approve" => "Approve",
        "reject" => "Reject",
        "refine" => "Send back",
        _ => "Move",
    }
}

/// The most characters of one message shown.
const MESSAGE_SHOWN: usize = 16 * 1024;

fn clipped(text: &str) -> &str {
    archmax_program::text::first_chars(text, MESSAGE_SHOWN)
}

fn message_item(message: &Message) -> Markup {
    match message {
        Message::User { text, .. } => html! {
            li.message.user { p.who { "Person" } p.text { (clipped(text)) } }
        },
        Message::Assistant { text, tool_calls } => html! {
            li.message.assistant {
                p.who { "Model" }
                @if !text.is_empty() { (markdown_block(clipped(text))) }
                @for call in tool_calls {
                    details.call {
                        summary { "Tool call " code { (call.name) } }
                        (json_block(&call.args))
                    }
                }
            }
        },
        Message::Tool { name, content, status, .. } => {
            // The runtime's own answers open with `[workflow] `: a refusal (the kernel's
            // `BLOCKED`, an unknown tool, …), except a call that ran and `FAILED`.
            let refused = content.starts_with("[workflow] ") && !content.starts_with("[workflow] FAILED");
            let verdict = match (status, refused) {
                (ToolStatus::Ok, _) => "ok",
                (ToolStatus::Error, true) => "refused",
                (ToolStatus::Error, false) => "error",
            };
            html! {
                li.message.tool {
                    details {
                        summary { "Result of " code { (name) } " " span.verdict data-verdict=(verdict) { (verdict) } }
                        pre.text { (clipped(content)) }
                    }
                }
            }
        }
        Message::Note { kind, text, .. } => html! {
            li.message.note { p.who { "Runtime note (" (kind.as_str()) ")" } p.text { (clipped(text)) } }
        },
    }
}
