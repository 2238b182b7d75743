//! The inbox's views (`?view=`), its filters and search, and how one page of a view is
//! read from the store.
//!
//! The views: `parked` (the default: sessions awaiting a decision, then those awaiting
//! input), `decisions`, `inputs`, `decided` (sessions whose trail records a decision by
//! the signed-in identity) and `all` (every session, with its status). The filters:
//! `workflow`, `state`, `mine` (the state's `approvers` name the viewer), `q` (a search,
//! case-insensitive, over what a row shows: its headline, its summary's values and the
//! session id; at most [`SEARCH_CHARS`] characters), and `order`.
//!
//! The one thing to know: **what the store can filter, the store filters, and no page
//! reads more than a bounded number of sessions.** A view's status or park and the
//! workflow are [`ListQuery`] filters, so a page without other filters is one
//! `list_page` call of `size` sessions (default [`PAGE_SIZE`]) after the cursor, served
//! by the store where it keeps the sessions (PostgreSQL, with one keyset query). The
//! filters the store cannot apply (state, assigned to me, decided by me, the search) are
//! applied here, in memory, to the store's pages read one after another until the page
//! is full or [`SCAN_BOUND`] sessions were read; a page cut at the bound says so, and its
//! next link goes on from where it stopped. Pages go in session-id order (the store's
//! cursor, `after=`); `order` sorts the sessions of each page by when they parked (or
//! last changed). The previous link carries the cursors of the pages before it
//! (`back=`, the last [`BACK_KEPT`]).

use archmax_config::settings::InboxSettings;
use archmax_vm::session::store::{ListQuery, StoreError, instant_ms};
use archmax_vm::session::{SessionState, SessionStore, Status};

use super::present;
use super::render::encode;

/// Sessions on a page when `size=` does not say.
pub const PAGE_SIZE: usize = 50;
/// The most sessions a page may ask for (`size=`).
pub const MAX_PAGE_SIZE: usize = 200;
/// The most sessions one page of a view reads from the store when it filters in memory.
pub const SCAN_BOUND: usize = 2_000;
/// The most characters of a search.
pub const SEARCH_CHARS: usize = 100;
/// The most earlier pages' cursors the previous link carries.
pub const BACK_KEPT: usize = 20;

/// Which sessions the inbox lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum View {
    /// Awaiting a decision or input: both queues.
    #[default]
    Parked,
    Decisions,
    Inputs,
    /// Sessions with a step the viewer decided.
    Decided,
    /// Every session, whatever its status.
    All,
}

impl View {
    /// The views, in the order their tabs show.
    pub const EVERY: [View; 5] = [View::Parked, View::Decisions, View::Inputs, View::Decided, View::All];

    /// The view's name in `?view=`.
    pub fn slug(self) -> &'static str {
        match self {
            View::Parked => "parked",
            View::Decisions => "decisions",
            View::Inputs => "inputs",
            View::Decided => "decided",
            View::All => "all",
        }
    }

    /// The view's tab.
    pub fn label(self) -> &'static str {
        match self {
            View::Parked => "Waiting",
            View::Decisions => "Awaiting decision",
            View::Inputs => "Awaiting input",
            View::Decided => "Decided by me",
            View::All => "All sessions",
        }
    }

    fn parse(text: &str) -> View {
        View::EVERY.into_iter().find(|view| view.slug() == text).unwrap_or_default()
    }

    /// What the store filters for this view: a status, or parked sessions only.
    fn store_filter(self) -> (Option<Status>, Option<bool>) {
        match self {
            View::Parked => (None, Some(true)),
            View::Decisions => (Some(Status::AwaitingDecision), None),
            View::Inputs => (Some(Status::AwaitingInput), None),
            View::Decided | View::All => (None, None),
        }
    }
}

/// The order of a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    #[default]
    Newest,
    Oldest,
}

/// A view, its filters and where its page starts (`?view=…&workflow=…&state=…&mine=1&q=…
/// &order=oldest&size=…&after=…&back=…`).
#[derive(Clone, Debug)]
pub struct InboxFilter {
    pub view: View,
    pub order: Order,
    pub workflow: Option<String>,
    pub state: Option<String>,
    /// Only sessions whose state names the viewer among its `approvers`.
    pub mine: bool,
    /// The search as typed, at most [`SEARCH_CHARS`] characters.
    pub search: Option<String>,
    /// Sessions per page, `1..=MAX_PAGE_SIZE`.
    pub size: usize,
    /// The page starts after this session id.
    pub after: Option<String>,
    /// The cursors of the pages before this one, oldest first (`""` for the first page).
    pub back: Vec<String>,
}

impl Default for InboxFilter {
    fn default() -> InboxFilter {
        InboxFilter {
            view: View::default(),
            order: Order::default(),
            workflow: None,
            state: None,
            mine: false,
            search: None,
            size: PAGE_SIZE,
            after: None,
            back: Vec::new(),
        }
    }
}

impl InboxFilter {
    pub fn parse(query: Option<&str>) -> InboxFilter {
        let mut filter = InboxFilter::default();
        for (key, value) in crate::routes::query_pairs(query) {
            if key == "back" {
                filter.back.push(value);
                continue;
            }
            let value = Some(value).filter(|value| !value.trim().is_empty());
            match key.as_str() {
                "view" => filter.view = value.as_deref().map(View::parse).unwrap_or_default(),
                "order" => {
                    filter.order = if value.as_deref() == Some("oldest") { Order::Oldest } else { Order::Newest }
                }
                "workflow" => filter.workflow = value,
                "state" => filter.state = value,
                "mine" => filter.mine = value.is_some(),
                "q" => {
                    filter.search =
                        value.map(|text| archmax_program::text::first_chars(text.trim(), SEARCH_CHARS).to_string())
                }
                "size" => {
                    filter.size =
                        value.and_then(|size| size.parse::<usize>().ok()).unwrap_or(PAGE_SIZE).clamp(1, MAX_PAGE_SIZE)
                }
                "after" => filter.after = value,
                _ => {}
            }
        }
        let excess = filter.back.len().saturating_sub(BACK_KEPT);
        filter.back.drain(..excess);
        filter
    }

    /// Whether a page needs filters the store cannot apply.
    fn filters_in_memory(&self) -> bool {
        self.state.is_some() || self.mine || self.search.is_some() || self.view == View::Decided
    }

    /// Whether `session` (which the store's filters admitted) passes the rest.
    pub fn admits(&self, session: &SessionState, identity: &str, settings: &InboxSettings) -> bool {
        let head = &session.head;
        self.state.as_ref().is_none_or(|wanted| Some(wanted.as_str()) == state_of(session))
            && (!self.mine
                || head
                    .pending_decision
                    .as_ref()
                    .is_some_and(|decision| decision.approvers.iter().any(|approver| approver == identity)))
            && (self.view != View::Decided
                || session.trail.iter().any(|step| step.decided_by.as_deref() == Some(identity)))
            && self.search.as_ref().is_none_or(|search| matches_search(session, search, settings))
    }

    /// The link to `view` with these filters, from its first page.
    pub fn view_href(&self, view: View) -> String {
        self.href(view, None, &[])
    }

    /// The link to the page after this one, which starts after `next`.
    pub fn next_href(&self, next: &str) -> String {
        let mut back = self.back.clone();
        back.push(self.after.clone().unwrap_or_default());
        let excess = back.len().saturating_sub(BACK_KEPT);
        back.drain(..excess);
        self.href(self.view, Some(next), &back)
    }

    /// The link to the page before this one; `None` on the first page.
    pub fn previous_href(&self) -> Option<String> {
        self.after.as_ref()?;
        let (after, back) = match self.back.split_last() {
            Some((after, back)) => (Some(after.as_str()).filter(|after| !after.is_empty()), back),
            None => (None, &[][..]),
        };
        Some(self.href(self.view, after, back))
    }

    fn href(&self, view: View, after: Option<&str>, back: &[String]) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if view != View::Parked {
            pairs.push(("view", view.slug()));
        }
        pairs.extend(self.workflow.as_deref().map(|workflow| ("workflow", workflow)));
        pairs.extend(self.state.as_deref().map(|state| ("state", state)));
        if self.mine {
            pairs.push(("mine", "1"));
        }
        pairs.extend(self.search.as_deref().map(|search| ("q", search)));
        if self.order == Order::Oldest {
            pairs.push(("order", "oldest"));
        }
        let size = self.size.to_string();
        if self.size != PAGE_SIZE {
            pairs.push(("size", &size));
        }
        pairs.extend(after.map(|after| ("after", after)));
        pairs.extend(back.iter().map(|cursor| ("back", cursor.as_str())));
        let query: Vec<String> = pairs.iter().map(|(key, value)| format!("{key}={}", encode(value))).collect();
        if query.is_empty() { "/".to_string() } else { format!("/?{}", query.join("&")) }
    }
}

/// The states of `workflow` (of every workflow when `None`) in the newest programs the
/// server serves, sorted, each once: what the state filter offers.
pub(crate) fn state_choices(server: &crate::server::Server, workflow: Option<&str>) -> Vec<String> {
    let mut states: Vec<String> = server
        .newest_runtimes()
        .into_iter()
        .filter(|(slug, _)| workflow.is_none_or(|wanted| slug == wanted))
        .flat_map(|(slug, runtime)| {
            let program = runtime.program();
            program
                .workflow(&slug)
                .map(|(_, served)| served.states.iter().map(|state| program.str(state.slug).to_string()).collect())
                .unwrap_or_else(Vec::new)
        })
        .collect();
    states.sort();
    states.dedup();
    states
}

/// The inbox settings with a `summary` for each served workflow that names none: the
/// first inputs (at most [`present::DEFAULT_FACTS`]) of its first trigger, in the order
/// the workflow declares them. So a row reads the same before and after a delivery adds
/// variables, and the start's own facts (who, which invoice) come first.
pub(crate) fn with_default_summaries(server: &crate::server::Server) -> InboxSettings {
    let mut settings = server.settings.inbox.clone();
    for (slug, runtime) in server.newest_runtimes() {
        let program = runtime.program();
        let Some((_, workflow)) = program.workflow(&slug) else { continue };
        let shown = settings.workflows.entry(slug.clone()).or_default();
        if !shown.summary.is_empty() {
            continue;
        }
        if let Some(first) = workflow.triggers.first() {
            shown.summary = first
                .requires
                .iter()
                .take(present::DEFAULT_FACTS)
                .map(|input| program.str(input.name).to_string())
                .collect();
        }
    }
    settings
}

/// The state a session is in as the inbox shows it: its pending decision's, else its
/// position.
pub fn state_of(session: &SessionState) -> Option<&str> {
    let head = &session.head;
    head.pending_decision.as_ref().map(|decision| decision.state.as_str()).or(head.position.as_deref())
}

/// Whether what `session`'s row shows (its headline, its summary's values, its id)
/// contains `search`, case aside.
fn matches_search(session: &SessionState, search: &str, settings: &InboxSettings) -> bool {
    let search = search.to_lowercase();
    let summary = present::row_summary(session, &settings.for_workflow(&session.head.workflow));
    let found = |text: &str| text.to_lowercase().contains(&search);
    found(&summary.headline) || summary.facts.iter().any(|(_, value)| found(value)) || found(session.id.as_ref())
}

/// When a session parked (else last changed), in milliseconds since the epoch.
pub fn parked_since(session: &SessionState) -> Option<i64> {
    let head = &session.head;
    let since = match (&head.pending_decision, &head.pending_input) {
        (Some(decision), _) => &decision.created_at,
        (None, Some(input)) => &input.parked_at,
        (None, None) => return i64::try_from(head.updated_at).ok(),
    };
    instant_ms(since)
}

/// One page of a view.
#[derive(Debug, Default)]
pub struct ViewPage {
    /// The page's sessions, in `order`.
    pub sessions: Vec<SessionState>,
    /// The cursor of the next page, when sessions may follow.
    pub next: Option<String>,
    /// How many sessions the store handed over for this page.
    pub read: usize,
    /// Whether the page stopped at [`SCAN_BOUND`] before it was full.
    pub cut: bool,
    /// Sessions in the range read that could not be read.
    pub unreadable: Vec<String>,
}

/// One page of the view `filter` asks for, as `identity` sees it.
pub async fn read_view(
    store: &dyn SessionStore,
    filter: &InboxFilter,
    identity: &str,
    settings: &InboxSettings,
) -> Result<ViewPage, StoreError> {
    let (status, parked) = filter.view.store_filter();
    let mut query = ListQuery {
        cursor: filter.after.clone(),
        limit: filter.size,
        workflow: filter.workflow.clone(),
        status,
        parked,
        due_by: None,
    };
    let mut page = ViewPage::default();
    if !filter.filters_in_memory() {
        let listed = store.list_page(&query).await?;
        page = ViewPage {
            read: listed.sessions.len(),
            sessions: listed.sessions,
            next: listed.next,
            cut: false,
            unreadable: listed.unreadable,
        };
    } else {
        'pages: loop {
            query.limit = (SCAN_BOUND - page.read).min(ListQuery::MAX_LIMIT);
            let listed = store.list_page(&query).await?;
            page.unreadable.extend(listed.unreadable);
            let mut sessions = listed.sessions.into_iter();
            while let Some(session) = sessions.next() {
                page.read += 1;
                let id = session.id.to_string();
                if filter.admits(&session, identity, settings) {
                    page.sessions.push(session);
                }
                if page.sessions.len() == filter.size || page.read >= SCAN_BOUND {
                    let more = sessions.len() > 0 || listed.next.is_some();
                    page.next = more.then_some(id);
                    page.cut = more && page.sessions.len() < filter.size;
                    break 'pages;
                }
            }
            match listed.next {
                Some(next) => query.cursor = Some(next),
                None => break,
            }
        }
    }
    let since = |session: &SessionState| parked_since(session);
    match filter.order {
        Order::Newest => page.sessions.sort_by(|a, b| since(b).cmp(&since(a)).then_with(|| a.id.cmp(&b.id))),
        Order::Oldest => page.sessions.sort_by(|a, b| since(a).cmp(&since(b)).then_with(|| a.id.cmp(&b.id))),
    }
    Ok(page)
}

/// The session that has waited longest for a decision `identity` may make (the state
/// names no approvers, or names them), other than `except`: where the page after a
/// decision points next. Read as the decision queue reads its oldest-first page (at most
/// [`MAX_PAGE_SIZE`] sessions), so in a larger inbox it is the longest waiting of those.
pub async fn next_waiting(
    store: &dyn SessionStore,
    identity: &str,
    settings: &InboxSettings,
    except: &str,
) -> Option<SessionState> {
    let filter = InboxFilter { view: View::Decisions, order: Order::Oldest, size: MAX_PAGE_SIZE, ..Default::default() };
    let page = read_view(store, &filter, identity, settings).await.ok()?;
    page.sessions.into_iter().find(|session| {
        session.id.as_str() != except
            && session.head.pending_decision.as_ref().is_some_and(|decision| decision.admits(identity))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_filters_and_carry_the_cursors_back() {
        let filter = InboxFilter::parse(Some("view=all&q=a%26b&mine=1&size=2"));
        assert_eq!(filter.view_href(View::Decided), "/?view=decided&mine=1&q=a%26b&size=2");
        let next = filter.next_href("s-2");
        assert_eq!(next, "/?view=all&mine=1&q=a%26b&size=2&after=s-2&back=");
        let second = InboxFilter::parse(next.strip_prefix("/?"));
        assert_eq!(second.previous_href().as_deref(), Some("/?view=all&mine=1&q=a%26b&size=2"));
        let third = InboxFilter::parse(second.next_href("s-4").strip_prefix("/?"));
        assert_eq!(third.previous_href().as_deref(), Some("/?view=all&mine=1&q=a%26b&size=2&after=s-2&back="));
        assert_eq!(filter.previous_href(), None, "the first page has none");
    }

    #[tokio::test]
    async fn a_page_filtered_in_memory_reads_at_most_the_bound_and_the_next_page_goes_on() {
        use archmax_vm::session::id::SessionId;
        use archmax_vm::session::memory::MemoryStore;
        let store = MemoryStore::new();
        for index in 0..SCAN_BOUND + 100 {
            let head = archmax_vm::session::Head {
                workflow: "desk".into(),
                status: Status::AwaitingInput,
                ..Default::default()
            };
            let id = SessionId::from_store(format!("s-{index:05}"));
            store.create_writer(&SessionState { id, head, ..Default::default() }).expect("a session");
        }
        let settings = InboxSettings::default();
        let fruitless = InboxFilter::parse(Some("q=nothing-matches"));
        let first = read_view(&store, &fruitless, "me", &settings).await.expect("a page");
        assert_eq!((first.read, first.sessions.len(), first.cut), (SCAN_BOUND, 0, true));
        let next = first.next.clone().expect("the page says where it stopped");
        assert_eq!(next, format!("s-{:05}", SCAN_BOUND - 1));
        let rest = InboxFilter { after: Some(next), ..fruitless };
        let second = read_view(&store, &rest, "me", &settings).await.expect("a page");
        assert_eq!((second.read, second.next, second.cut), (100, None, false));
        // Served by the store's own filter, a page reads a page.
        let plain = read_view(&store, &InboxFilter::parse(Some("view=inputs&size=7")), "me", &settings).await;
        let plain = plain.expect("a page");
        assert_eq!((plain.read, plain.next.as_deref()), (7, Some("s-00006")));
    }

    #[test]
    fn a_search_is_bounded_and_unknown_values_fall_back() {
        let long = "x".repeat(500);
        let filter = InboxFilter::parse(Some(&format!("q={long}&view=nonsense&size=100000")));
        assert_eq!(filter.search.map(|search| search.chars().count()), Some(SEARCH_CHARS));
        assert_eq!((filter.view, filter.size), (View::Parked, MAX_PAGE_SIZE));
        let back: String = (0..50).map(|index| format!("back=c{index}&")).collect();
        assert_eq!(InboxFilter::parse(Some(&back)).back.len(), BACK_KEPT);
    }
}
