//! The two pages' routes: the inbox (one page of a view, [`views`], drawn by
//! [`listing`]) and a session (its graph, the waiting decision record, forms, the
//! decisions made ([`record`]), variables, trail and transcript).
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
use archmax_vm::session::{Message, SessionState, ToolStatus};

use super::render::{self, Notice, Viewer, encode, html_response, json_block, markdown_block};
use super::signin::{SignedIn, signed_in};
use super::views::{self, InboxFilter};
use super::{Inbox, Shared, forms, graph, listing, objects, present, record};
use crate::auth::Scope;
use crate::error::ApiError;

/// `GET /`: the inbox.
pub async fn inbox_route(State(inbox): Shared, RawQuery(query): RawQuery, headers: HeaderMap) -> Response {
    let signed = match signed_in(&inbox, &headers, Scope::Read).await {
        Ok(signed) => signed,
        Err(refused) => return refused.into_page(),
    };
    let filter = InboxFilter::parse(query.as_deref());
    let identity = signed.caller.identity.as_str();
    let settings = &views::with_default_summaries(&inbox.server);
    let page = match views::read_view(&*inbox.server.store, &filter, identity, settings).await {
        Ok(page) => page,
        Err(error) => {
            let error = ApiError::from(archmax_vm::RunError::from(error));
            return render::error_page(error.status, "The store did not answer", &error.message);
        }
    };
    let choices = listing::Choices {
        workflows: inbox.server.workflows(),
        states: views::state_choices(&inbox.server, filter.workflow.as_deref()),
    };
    let body = listing::inbox_body(&page, &filter, (identity, inbox.server.now_ms()), &choices, settings);
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
    let notice = match done.as_ref().map(|(_, what)| what.as_str()) {
        Some("decided") => Some(after_decision(&inbox, &signed, &id).await),
        Some("replied") => Some(Notice::info("Your message was sent.")),
        Some("delivered") => Some(Notice::info("The input was delivered.")),
        _ => None,
    };
    session_page(&inbox, &signed, &id, StatusCode::OK, notice).await
}

/// What the page after a decision says: that it was recorded, and the next decision this
/// person may make ([`views::next_waiting`]), so a queue is worked through without going
/// back to the list.
async fn after_decision(inbox: &Arc<Inbox>, signed: &SignedIn, decided: &str) -> Notice {
    let recorded = Notice::info("Your decision was recorded.");
    if !signed.holds(inbox, Scope::Decide) {
        return recorded;
    }
    let settings = views::with_default_summaries(&inbox.server);
    match views::next_waiting(&*inbox.server.store, &signed.caller.identity, &settings, decided).await {
        Some(next) => {
            let path: Vec<String> = next.id.split('/').map(encode).collect();
            let words = format!("Next waiting for your decision: {} ({})", next.id, next.head.workflow);
            recorded.with_link(format!("/sessions/{}", path.join("/")), words)
        }
        None => Notice::info("Your decision was recorded. Nothing else is waiting for your decision."),
    }
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
        Err(error) => {
            // A malformed id is the link's fault, not a missing session: say what is wrong
            // with it, without the API's field name.
            let (title, said) = match error.status {
                StatusCode::NOT_FOUND => ("No such session", error.message.clone()),
                StatusCode::BAD_REQUEST => {
                    let problems: Vec<&str> = error
                        .details
                        .get("fields")
                        .and_then(serde_json::Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|field| field["problem"].as_str())
                        .collect();
                    let said = if problems.is_empty() { error.message.clone() } else { problems.join(" ") };
                    ("Not a session id", said)
                }
                _ => ("Session unavailable", error.message.clone()),
            };
            return render::error_page(error.status, title, &said);
        }
    };
    let runtime = inbox.server.runtime_for_session(&session).ok();
    let program = runtime.as_ref().map(|runtime| &**runtime.program());
    let evidence = read_evidence(inbox, &session).await;
    let (may_decide, may_start) = (signed.holds(inbox, Scope::Decide), signed.holds(inbox, Scope::Start));
    let settings = &inbox.server.settings;
    // What the case is, as its row in the inbox says it, at the top of its page.
    let case = present::row_summary(
        &session,
        &views::with_default_summaries(&inbox.server).for_workflow(&session.head.workflow),
    );
    let view = SessionView {
        session: &session,
        case: &case,
        settings,
        program,
        evidence: &evidence,
        signed,
        may_decide,
        may_start,
    };
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
    /// The row's headline and facts, shown under the title.
    case: &'a present::RowSummary,
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
                p.case-headline { (self.case.headline) }
                @if !self.case.facts.is_empty() {
                    p.summary {
                        @for (index, (name, value)) in self.case.facts.iter().enumerate() {
                            @if index > 0 { " · " }
                            span.fact { span.key { (name) ": " } (value) }
                        }
                    }
                }
                dl.facts {
                    dt { "Session" } dd { code { (session.id) } }
                    dt { "Workflow" } dd { (head.workflow) }
                    dt { "State" } dd data-field="state" { (head.position.as_deref().unwrap_or("(not started)")) }
                    dt { "Status" } dd { span.status data-field="status" data-status=(head.status_label()) { (head.status_label()) } }
                    @if let Some(exit) = &head.exit {
                        dt { "Why it ended" } dd data-field="exit" { code { (exit.code) } " in " (exit.state) ": " (exit.reason) }
                    }
                    dt { "Updated" } dd { (present::instant(head.updated_at)) }
                }
            }
            (self.decision())
            (self.input())
            (record::decisions(session))
            @if let Some((program, workflow)) = self.workflow() {
                section.graph-wrap data-region="graph" aria-labelledby="graph-heading" {
                    h2 id="graph-heading" { "Where it stands" }
                    div.scroll { (graph::svg(program, workflow, head.position.as_deref(), &visited)) }
                    (graph::legend())
                }
            }
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
        let approver = decision.admits(identity);
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
                                    data-needs-comment=[needing_comment.contains(&choice.to.as_str()).then_some("true")]
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
        let shapes = self.settings.inbox.for_workflow(&self.session.head.workflow).fields;
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
                            @for field in forms::fields(schema) { (objects::input_control(trigger, &field, &self.session.head.workflow, &shapes)) }
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
