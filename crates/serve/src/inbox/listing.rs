//! The inbox page's markup: the views as tabs, the filter and search form, one page of
//! the view (both queues, one of them, or a table of sessions with their status), and
//! the links to the pages before and after it.
//!
//! The one thing to know: it draws the page [`super::views::read_view`] read and nothing
//! more; every link keeps the view's filters, and everything shown is escaped by maud.

use maud::{Markup, html};

use archmax_config::settings::InboxSettings;
use archmax_vm::session::SessionState;

use super::present;
use super::render::{age, session_url};
use super::views::{InboxFilter, Order, PAGE_SIZE, SEARCH_CHARS, View, ViewPage, parked_since, state_of};

/// What the filter form offers to choose from.
pub struct Choices {
    pub workflows: Vec<String>,
    pub states: Vec<String>,
}

/// The most unreadable sessions a page names.
const UNREADABLE_SHOWN: usize = 5;

/// The inbox's content: the views, the filters, then `page` as its view shows it, ages
/// counted to `now_ms`.
pub fn inbox_body(
    page: &ViewPage,
    filter: &InboxFilter,
    (identity, now_ms): (&str, u64),
    choices: &Choices,
    settings: &InboxSettings,
) -> Markup {
    html! {
        h1 { "Decision inbox" }
        nav.views aria-label="Views" {
            ul {
                @for view in View::EVERY {
                    li {
                        a href=(filter.view_href(view)) aria-current=[(view == filter.view).then_some("page")] {
                            (view.label())
                        }
                    }
                }
            }
        }
        (filter_form(filter, choices))
        div data-region="queues" {
            (view_content(page, filter, (identity, now_ms), settings))
            (pager(page, filter))
        }
    }
}

fn filter_form(filter: &InboxFilter, choices: &Choices) -> Markup {
    let unknown_state = filter.state.as_ref().filter(|state| !choices.states.contains(state));
    html! {
        form.filters method="get" action="/" aria-label="Filter the inbox" {
            @if filter.view != View::Parked { input type="hidden" name="view" value=(filter.view.slug()); }
            @if filter.size != PAGE_SIZE { input type="hidden" name="size" value=(filter.size); }
            div.field.search {
                label for="f-q" { "Search" }
                input id="f-q" type="search" name="q" maxlength=(SEARCH_CHARS) value=[filter.search.as_deref()];
            }
            div.field {
                label for="f-workflow" { "Workflow" }
                select id="f-workflow" name="workflow" {
                    option value="" { "All workflows" }
                    @for workflow in &choices.workflows {
                        option value=(workflow) selected[filter.workflow.as_deref() == Some(workflow.as_str())] { (workflow) }
                    }
                }
            }
            div.field {
                label for="f-state" { "State" }
                select id="f-state" name="state" {
                    option value="" { "All states" }
                    @for state in choices.states.iter().chain(unknown_state) {
                        option value=(state) selected[filter.state.as_deref() == Some(state.as_str())] { (state) }
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
    }
}

/// The page's sessions as `filter`'s view lists them.
fn view_content(
    page: &ViewPage,
    filter: &InboxFilter,
    (identity, now_ms): (&str, u64),
    settings: &InboxSettings,
) -> Markup {
    let more = page.next.is_some();
    let (decisions, inputs): (Vec<&SessionState>, Vec<&SessionState>) =
        page.sessions.iter().partition(|session| session.head.pending_decision.is_some());
    let decision_queue = || {
        queue(
            ("decisions", "Awaiting a decision", "No session is waiting for a decision."),
            more,
            &["Session", "Workflow", "Decision", "Waiting", "Who decides"],
            decisions.iter().map(|session| decision_row(session, (identity, now_ms), settings)),
        )
    };
    let input_queue = || {
        queue(
            ("inputs", "Awaiting input", "No session is waiting for input."),
            more,
            &["Session", "Workflow", "Waiting for", "Waiting"],
            inputs.iter().map(|session| input_row(session, now_ms, settings)),
        )
    };
    let columns = ["Session", "Workflow", "State", "Status", "Last change"];
    let sessions = page.sessions.iter().map(|session| session_row(session, now_ms, settings));
    match filter.view {
        View::Parked => html! { (decision_queue()) (input_queue()) },
        View::Decisions => decision_queue(),
        View::Inputs => input_queue(),
        View::Decided => {
            queue(("decided", "Decided by you", "No session shows a decision of yours."), more, &columns, sessions)
        }
        View::All => queue(("all", "All sessions", "No session matches."), more, &columns, sessions),
    }
}

/// Links to the pages before and after this one, and what the page could not show.
fn pager(page: &ViewPage, filter: &InboxFilter) -> Markup {
    let previous = filter.previous_href();
    let unreadable = &page.unreadable;
    html! {
        @if page.cut {
            p.hint.cut {
                "This page read " (page.read) " sessions, as many as one page reads, and found fewer matches than fit; "
                "the next page goes on from there."
            }
        }
        @if !unreadable.is_empty() {
            p.hint {
                (unreadable.len()) " sessions could not be read: "
                @for (index, id) in unreadable.iter().take(UNREADABLE_SHOWN).enumerate() {
                    @if index > 0 { ", " }
                    code { (id) }
                }
                @if unreadable.len() > UNREADABLE_SHOWN { ", …" }
            }
        }
        @if previous.is_some() || page.next.is_some() {
            nav.pager aria-label="Pages" {
                @if let Some(href) = &previous { a rel="prev" href=(href) { "← Previous page" } }
                @if let Some(next) = &page.next { a rel="next" href=(filter.next_href(next)) { "Next page →" } }
            }
        }
    }
}

/// One queue of the inbox: its heading with the count (on this page, when `more` pages
/// follow), then a table of `rows` under `columns`, or `empty` when there are none.
fn queue(
    (id, heading, empty): (&str, &str, &str),
    more: bool,
    columns: &[&str],
    rows: impl Iterator<Item = Markup>,
) -> Markup {
    let rows: Vec<Markup> = rows.collect();
    let heading_id = format!("{id}-heading");
    html! {
        section aria-labelledby=(heading_id) {
            h2 id=(heading_id) {
                (heading) " "
                span.count { "(" (rows.len()) @if more { " on this page" } ")" }
            }
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

/// A row of the decided and all views: where the session stands and its status.
fn session_row(session: &SessionState, now_ms: u64, settings: &InboxSettings) -> Markup {
    let head = &session.head;
    html! {
        tr data-session=(session.id) {
            (session_cell(session, settings))
            td data-label="Workflow" { (head.workflow) }
            td data-label="State" { (state_of(session).unwrap_or("(not started)")) }
            td data-label="Status" { span.status data-status=(head.status_label()) { (head.status_label()) } }
            td data-label="Last change" { (age(now_ms, i64::try_from(head.updated_at).ok())) }
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

fn input_row(session: &SessionState, now_ms: u64, settings: &InboxSettings) -> Markup {
    let input = session.head.pending_input.as_ref();
    html! {
        tr data-session=(session.id) {
            (session_cell(session, settings))
            td data-label="Workflow" { (session.head.workflow) }
            td data-label="Waiting for" { (input.map_or("", |input| input.reason.as_str())) }
            td data-label="Waiting" { (age(now_ms, parked_since(session))) }
        }
    }
}

fn decision_row(session: &SessionState, (identity, now_ms): (&str, u64), settings: &InboxSettings) -> Markup {
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
            td data-label="Waiting" { (age(now_ms, parked_since(session))) }
            td data-label="Who decides" {
                @if mine { span.badge.mine { "Assigned to you" } " " }
                @if approvers.is_empty() { "anyone with the decide scope" } @else { (approvers.join(", ")) }
            }
        }
    }
}
