//! `archmax sessions`: the listing (the most recently moved first, filtered by
//! `--workflow`, `--status`, `--parked`), one session in full (`ID`, a unique prefix
//! accepted; `--transcript` for its conversation; `--json` for either), `rm` and `gc`
//! (removal, a sub-workflow session with its parent), and `ID --repair`, which cuts a
//! damaged session back to what still verifies.
//!
//! A session whose last turn completed in a state that is not terminal is shown as
//! `resumable`, never `completed`: it can go on where it stopped. A session still
//! `running` that no process holds had its turn cut (its process died) and is shown as
//! `interrupted` (in JSON: `interrupted` and `resumable` beside the stored status). A
//! session a flow walk filed (a section attempt, or a walk's record) shows its flow run,
//! section path and attempt (in JSON: `flow`).

mod flow_part;

use std::path::Path;
use std::process::ExitCode;

use archmax_vm::session::fs::RepairOutcome;
use archmax_vm::session::id::check_session_id;
use archmax_vm::session::summary::summary;
use archmax_vm::session::{Message, SessionState, SessionStore, Status, ToolStatus};
use archmax_vm::stdlib::vfs::Vfs;

use crate::output::thousands;
use crate::output::{failure, terminal_safe, usage};
use tokio::runtime::Runtime;

/// What `archmax sessions` lists or shows.
pub struct Query<'a> {
    pub id: Option<&'a str>,
    pub workflow: Option<&'a str>,
    /// A status as the listing prints it (`resumable` included).
    pub status: Option<&'a str>,
    /// `decision` or `input`.
    pub parked: Option<&'a str>,
    pub json: bool,
    pub transcript: bool,
}

/// The statuses `--status` takes, as the listing prints them.
const STATUSES: [&str; 8] =
    ["running", "interrupted", "completed", "resumable", "failed", "rejected", "awaiting_decision", "awaiting_input"];

pub fn run(executor: &Runtime, root: &Path, store: Option<&str>, query: &Query<'_>) -> ExitCode {
    if let Some(status) = query.status
        && !STATUSES.contains(&status)
    {
        return usage("sessions", &format!("`--status {status}` is not a status; use one of {}", STATUSES.join(", ")));
    }
    if let Some(parked) = query.parked
        && !matches!(parked, "decision" | "input")
    {
        return usage("sessions", &format!("`--parked {parked}` is neither `decision` nor `input`"));
    }
    let store = match crate::store::open_or_exit(executor, root, store, "sessions") {
        Ok(store) => store,
        Err(code) => return code,
    };
    match query.id {
        Some(id) => show(executor, store.as_ref(), id, query),
        None => list(executor, store.as_ref(), query),
    }
}

/// One session in full, or its conversation with `--transcript`.
fn show(executor: &Runtime, store: &dyn SessionStore, id: &str, query: &Query<'_>) -> ExitCode {
    if let Err(problem) = check_session_id(id, &[]) {
        return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let (id, state) = match crate::store::resolve(executor, store, id) {
        Ok(found) => found,
        Err(message) => return failure(message),
    };
    if let Some(workflow) = query.workflow
        && workflow != state.head.workflow
    {
        return failure(format!("session `{id}` belongs to workflow `{}`, not `{workflow}`", state.head.workflow));
    }
    let interrupted = is_interrupted(executor, store, &state);
    match (query.transcript, query.json) {
        (true, true) => println!("{}", serde_json::to_string_pretty(&transcript_json(&state)).unwrap_or_default()),
        (true, false) => print!("{}", terminal_safe(&transcript(&state))),
        (false, true) => {
            println!("{}", serde_json::to_string_pretty(&shown_summary(&state, interrupted)).unwrap_or_default())
        }
        (false, false) => {
            let files = store.files(&id).ok();
            print!("{}", terminal_safe(&detail(&state, files.as_deref(), interrupted)));
        }
    }
    ExitCode::SUCCESS
}

/// Every session the filters admit, the most recently moved first.
fn list(executor: &Runtime, store: &dyn SessionStore, query: &Query<'_>) -> ExitCode {
    let listed = executor.block_on(async {
        let ids = store.list().await?;
        let mut read = Vec::with_capacity(ids.len());
        for id in ids {
            read.push(store.read(&id).await);
        }
        Ok::<_, archmax_vm::session::StoreError>(read)
    });
    let read = match listed {
        Ok(read) => read,
        Err(error) => return failure(crate::store::store_problem(&error)),
    };
    let mut states = Vec::with_capacity(read.len());
    for loaded in read {
        match loaded {
            Ok(Some(state)) => {
                let interrupted = is_interrupted(executor, store, &state);
                if admits(query, &state, interrupted) {
                    states.push((state, interrupted));
                }
            }
            Ok(None) => {}
            Err(error) => eprintln!("warning: {}", crate::store::store_problem(&error)),
        }
    }
    states.sort_by(|(a, _), (b, _)| {
        b.head.updated_at.cmp(&a.head.updated_at).then_with(|| a.id.as_str().cmp(b.id.as_str()))
    });
    if query.json {
        let list: Vec<serde_json::Value> =
            states.iter().map(|(state, interrupted)| shown_summary(state, *interrupted)).collect();
        println!("{}", serde_json::to_string_pretty(&list).unwrap_or_default());
    } else {
        for (state, interrupted) in &states {
            println!("{}", terminal_safe(&row(state, *interrupted)));
        }
    }
    ExitCode::SUCCESS
}

/// Whether `state` is `running` while no writer holds it: its turn was cut (the process
/// running it died) and nothing is continuing it. A store that cannot tell says no.
fn is_interrupted(executor: &Runtime, store: &dyn SessionStore, state: &SessionState) -> bool {
    state.head.status == Status::Running
        && matches!(executor.block_on(store.is_held(state.id.as_str())), Ok(Some(false)))
}

/// The status as a person reads it: `interrupted` for a cut turn, else the head's label.
fn status_label(state: &SessionState, interrupted: bool) -> &'static str {
    if interrupted { "interrupted" } else { state.head.status_label() }
}

/// The session's JSON summary, marked `interrupted` and `resumable` when its turn was cut.
fn shown_summary(state: &SessionState, interrupted: bool) -> serde_json::Value {
    let mut shown = summary(state);
    if interrupted {
        shown["interrupted"] = serde_json::json!(true);
        shown["resumable"] = serde_json::json!(true);
    }
    shown
}

fn admits(query: &Query<'_>, state: &SessionState, interrupted: bool) -> bool {
    let head = &state.head;
    query.workflow.is_none_or(|workflow| head.workflow == workflow)
        && query.status.is_none_or(|status| status_label(state, interrupted) == status)
        && query.parked.is_none_or(|parked| match parked {
            "decision" => head.status == Status::AwaitingDecision,
            _ => head.status == Status::AwaitingInput,
        })
}

/// `archmax sessions rm ID…`: removes each session (named by its whole id: the start of
/// one is refused, naming the session it would have been) with its sub-workflow
/// sessions. Every id is resolved before anything is removed, so a typo
/// removes nothing.
pub fn remove(executor: &Runtime, root: &Path, store: Option<&str>, ids: &[String]) -> ExitCode {
    // An id that is no id is a usage error, before the store is opened.
    if let Some((id, problem)) = ids.iter().find_map(|id| check_session_id(id, &[]).err().map(|problem| (id, problem)))
    {
        return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let store = match crate::store::open_or_exit(executor, root, store, "sessions") {
        Ok(store) => store,
        Err(code) => return code,
    };
    // One listing serves every id named and the sub-workflow sessions that go with them:
    // a store of many sessions is not listed once per id.
    let all = match executor.block_on(store.list()) {
        Ok(all) => all,
        Err(error) => return failure(crate::store::store_problem(&error)),
    };
    let mut resolved = Vec::with_capacity(ids.len());
    for id in ids {
        // Removing takes whole ids only: the start of one is never enough to delete it.
        if !all.contains(id) {
            let mut starting = all.iter().filter(|other| other.starts_with(id.as_str()));
            return failure(match (starting.next(), starting.next()) {
                (Some(whole), None) => {
                    format!("there is no session `{id}`; `sessions rm` takes whole ids (did you mean `{whole}`?)")
                }
                _ => format!("there is no session `{id}`; `archmax sessions` lists them"),
            });
        }
        if id.contains('~') {
            return failure(format!(
                "`{id}` is a sub-workflow session; it goes with its parent (`archmax sessions rm {}`)",
                id.split('~').next().unwrap_or_default()
            ));
        }
        match crate::store::read(executor, store.as_ref(), id) {
            Ok(Some(state)) => resolved.push((id.clone(), state)),
            Ok(None) => return failure(format!("session `{id}` was removed while it was being read")),
            Err(message) => return failure(message),
        }
    }
    let mut failed = false;
    for (id, state) in resolved {
        if state.head.status == Status::Running {
            eprintln!(
                "error: session `{id}` is running (a turn is in flight, or was cut and will be continued); stop what runs it first"
            );
            failed = true;
            continue;
        }
        match remove_with_children(executor, store.as_ref(), &id, &all) {
            Ok(0) => println!("removed session `{id}`"),
            Ok(children) => println!("removed session `{id}` and {children} sub-workflow session(s)"),
            Err(message) => {
                eprintln!("error: {message}");
                failed = true;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// Removes a session, then its sub-workflow sessions (`<id>~…`); returns how many
/// children went. The session goes first, under its lock, so one a writer holds is
/// refused with its children untouched.
fn remove_with_children(
    executor: &Runtime,
    store: &dyn SessionStore,
    id: &str,
    all: &[String],
) -> Result<usize, String> {
    if !executor.block_on(store.remove(id)).map_err(|error| error.to_string())? {
        return Err(format!("session `{id}` was already gone"));
    }
    let prefix = format!("{id}~");
    let children: Vec<&String> = all.iter().filter(|other| other.starts_with(&prefix)).collect();
    let mut removed = 0;
    for child in children.iter().rev() {
        match executor.block_on(store.remove(child)) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(error) => return Err(format!("session `{id}` was removed, but its sub-workflow session: {error}")),
        }
    }
    Ok(removed)
}

/// `archmax sessions gc --older-than DURATION [--include-parked] [--dry-run]`: removes the
/// sessions that last moved before then. Finished and resumable sessions only, unless
/// parked ones are included; a running session never. Sub-workflow sessions go with
/// their parent, never on their own.
pub fn gc(
    executor: &Runtime,
    root: &Path,
    store: Option<&str>,
    older_than: &str,
    include_parked: bool,
    dry_run: bool,
) -> ExitCode {
    let Some(age) = parse_age(older_than) else {
        return usage(
            "sessions",
            &format!(
                "`--older-than {older_than}` is not a duration; write a whole number and a unit: 45m, 12h, 30d, 8w"
            ),
        );
    };
    let store = match crate::store::open_or_exit(executor, root, store, "sessions") {
        Ok(store) => store,
        Err(code) => return code,
    };
    // The environment's clock (ARCHMAX_FIXED_CLOCK when set), as the runtime that moved them used.
    let now = match archmax_vm::clock::from_env(archmax_vm::environment::process_env) {
        Ok(clock) => clock.now_ms(),
        Err(message) => return failure(message),
    };
    let cutoff = now.saturating_sub(age);
    let listed = executor.block_on(async {
        let ids = store.list().await?;
        let mut old = Vec::new();
        for id in &ids {
            if id.contains('~') {
                continue;
            }
            if let Some(state) = store.read(id).await? {
                let head = &state.head;
                let idle = head.status.is_finished() || include_parked && head.status.is_parked();
                if idle && head.updated_at < cutoff {
                    old.push((id.clone(), head.status_label()));
                }
            }
        }
        Ok::<_, archmax_vm::session::StoreError>((ids, old))
    });
    let (all, old) = match listed {
        Ok(found) => found,
        Err(error) => return failure(crate::store::store_problem(&error)),
    };
    let mut removed = 0usize;
    let mut failed = false;
    for (id, status) in &old {
        if dry_run {
            println!("would remove `{id}` ({status})");
            continue;
        }
        match remove_with_children(executor, store.as_ref(), id, &all) {
            Ok(_) => removed += 1,
            Err(message) => {
                eprintln!("error: {message}");
                failed = true;
            }
        }
    }
    if dry_run {
        println!("{} session(s) last moved more than {older_than} ago; nothing was removed", old.len());
    } else {
        println!("removed {removed} session(s) that last moved more than {older_than} ago");
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// A duration such as `45m`, `12h`, `30d` or `8w`, in milliseconds.
fn parse_age(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit_ms: u64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => return None,
    };
    number.checked_mul(unit_ms)
}

/// Repairs one session and says what was kept and what was dropped.
pub fn repair(executor: &Runtime, root: &Path, store: Option<&str>, id: &str) -> ExitCode {
    if let Err(problem) = check_session_id(id, &[]) {
        return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let store = match crate::store::target(root, store) {
        Ok(crate::store::Target::Fs(dir)) => match crate::store::fs_store(root, dir) {
            Ok(store) => store,
            Err(message) => return failure(message),
        },
        Ok(crate::store::Target::Postgres(_)) => {
            return failure(
                "--repair mends the filesystem store's log; the PostgreSQL store commits each step whole or not at all",
            );
        }
        Err(message) => return usage("sessions", &message),
    };
    let id = match crate::store::resolve_id(executor, &store, id) {
        Ok(id) => id,
        Err(message) => return failure(message),
    };
    let id = id.as_str();
    match store.repair(id) {
        Ok(outcome) => {
            println!("{}", repair_report(id, &outcome));
            ExitCode::SUCCESS
        }
        Err(error) => failure(crate::store::store_problem(&error)),
    }
}

/// `archmax sessions ID --reseal`: rewrites one session under the current seal key,
/// adopting it as it is when an earlier build sealed it without a key. This trusts the
/// session's files: run it for sessions written before keyed seals, not for one whose
/// origin is unknown.
pub fn reseal(executor: &Runtime, root: &Path, store: Option<&str>, id: &str) -> ExitCode {
    if let Err(problem) = check_session_id(id, &[]) {
        return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let store = match crate::store::target(root, store) {
        Ok(crate::store::Target::Fs(dir)) => match crate::store::fs_store(root, dir) {
            Ok(store) => store.adopting_unkeyed_sessions(),
            Err(message) => return failure(message),
        },
        Ok(crate::store::Target::Postgres(_)) => {
            return failure("--reseal applies to the filesystem store's seal; the PostgreSQL store has none");
        }
        Err(message) => return usage("sessions", &message),
    };
    let id = match crate::store::resolve_id(executor, &store, id) {
        Ok(id) => id,
        Err(message) => return failure(message),
    };
    match store.reseal(&id) {
        Ok(seq) => {
            println!("resealed session `{id}` (through step {seq}) under seal key {}", store.seal_keys().current_id());
            ExitCode::SUCCESS
        }
        Err(error) => failure(crate::store::store_problem(&error)),
    }
}

fn repair_report(id: &str, outcome: &RepairOutcome) -> String {
    match *outcome {
        RepairOutcome::Healthy { seq } => {
            format!("session `{id}` verifies through step {seq}; nothing was changed")
        }
        RepairOutcome::Repaired { kept_through, dropped_steps, dropped_bytes } => {
            let first_dropped = kept_through + 1;
            let dropped = match dropped_steps {
                Some(0) => format!("no sealed step was lost ({dropped_bytes} unverified bytes dropped)"),
                Some(1) => format!("dropped 1 step, step {first_dropped} ({dropped_bytes} bytes)"),
                Some(count) => format!(
                    "dropped {count} steps, {first_dropped} to {} ({dropped_bytes} bytes)",
                    kept_through + count
                ),
                None => format!(
                    "dropped every step from {first_dropped} on ({dropped_bytes} bytes; the seal was unreadable, so how many is unknown)"
                ),
            };
            format!("repaired session `{id}`: kept steps through {kept_through}; {dropped}")
        }
    }
}

fn row(state: &SessionState, interrupted: bool) -> String {
    let head = &state.head;
    let names: Vec<&str> = state.variables.keys().map(String::as_str).collect();
    let mut line = format!(
        "{}  {}  {}  {}  started {}  moved {}",
        state.id,
        head.workflow,
        status_label(state, interrupted),
        head.position.as_deref().unwrap_or("-"),
        moment(head.created_at),
        moment(head.updated_at)
    );
    if let Some(flow) = &head.flow {
        line.push_str(&flow_part::row_words(flow));
    }
    if let Some(decision) = &head.pending_decision {
        let what = decision.title.clone().unwrap_or_else(|| {
            decision.instructions.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim().to_string()
        });
        let targets: Vec<&str> = decision.transitions.iter().map(|choice| choice.to.as_str()).collect();
        line.push_str(&format!("  awaiting={} decision={what:?} to={}", decision.state, targets.join("|")));
        if !decision.approvers.is_empty() {
            line.push_str(&format!(" approvers={}", decision.approvers.join(",")));
        }
    }
    if let Some(input) = &head.pending_input {
        line.push_str(&format!("  awaiting={} reason={:?}", input.state, input.reason));
        if let Some(at) = &input.resume_at {
            line.push_str(&format!(" due={at}"));
        }
    }
    line.push_str(&format!("  vars={}", names.join(",")));
    line
}

/// A stored time (milliseconds since the epoch) as UTC to the second, `-` when unset.
fn moment(ms: u64) -> String {
    if ms == 0 { "-".to_string() } else { archmax_vm::clock::rfc3339(ms) }
}

/// How many lines of an evidence file the decision report shows.
const EVIDENCE_LINES: usize = 5;
/// The most bytes of an evidence file read for them.
const EVIDENCE_BYTES: usize = 4 * 1024;

/// The first lines of an evidence file, indented, or why they cannot be shown.
fn evidence_head(files: Option<&dyn Vfs>, path: &str) -> String {
    let Some(files) = files else { return String::new() };
    let (bytes, size) = match files.read_head(path, EVIDENCE_BYTES) {
        Ok(read) => read,
        Err(error) => return format!("            ({error})\n"),
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut out = String::new();
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(EVIDENCE_LINES) {
        out.push_str(&format!("            │ {}\n", archmax_program::text::first_chars(line, 160)));
    }
    if lines.len() > EVIDENCE_LINES || size > bytes.len() as u64 {
        out.push_str("            │ …\n");
    }
    out
}

fn detail(state: &SessionState, files: Option<&dyn Vfs>, interrupted: bool) -> String {
    let head = &state.head;
    let mut out = format!(
        "session   {}\nworkflow  {}\nspec hash {}\nstatus    {}\nstate     {}\nstarted   {}\nmoved     {}\n",
        state.id,
        head.workflow,
        if head.spec_hash.is_empty() { "-" } else { head.spec_hash.as_str() },
        status_label(state, interrupted),
        head.position.as_deref().unwrap_or("-"),
        moment(head.created_at),
        moment(head.updated_at)
    );
    if interrupted {
        let advice = match &head.parent {
            Some(parent) => format!("the turn of its caller `{parent}` was cut; continuing `{parent}` settles it"),
            None => format!(
                "its turn was cut (the process running it stopped): `archmax run {} MESSAGE --session {}` continues it",
                head.workflow, state.id
            ),
        };
        out.push_str(&format!("          {advice}\n"));
    }
    if let Some(flow) = &head.flow {
        out.push_str(&flow_part::detail_lines(head, flow));
    } else if head.status == Status::Completed && head.resumable {
        out.push_str(
            "          the last turn ended in a state that is not terminal: `archmax run --session` goes on there\n",
        );
    }
    if let Some(exit) = &head.exit {
        out.push_str(&format!("exit      {}: {}\n", exit.code, exit.reason));
    }
    if let Some(reason) = &head.rejected {
        out.push_str(&format!("rejected  {reason}\n"));
    }
    if let Some(decision) = &head.pending_decision {
        out.push_str(&format!(
            "park      awaiting a decision at {}{} (#{} since {})\n",
            decision.state,
            decision.title.as_ref().map(|title| format!(" ({title})")).unwrap_or_default(),
            decision.seq,
            decision.created_at
        ));
        for line in decision.instructions.lines() {
            out.push_str(&format!("          {line}\n").replace("          \n", "\n"));
        }
        if !decision.approvers.is_empty() {
            out.push_str(&format!("          approvers: {}\n", decision.approvers.join(", ")));
        }
        for choice in &decision.transitions {
            out.push_str(&format!(
                "          → {} [{}] {}\n",
                choice.to,
                choice.kind,
                choice.description.as_deref().unwrap_or("")
            ));
        }
        for path in &decision.evidence {
            out.push_str(&format!("          evidence {path}\n"));
            out.push_str(&evidence_head(files, path));
        }
    }
    if let Some(input) = &head.pending_input {
        out.push_str(&format!("park      awaiting input at {}: {}", input.state, input.reason));
        if let Some(at) = &input.resume_at {
            out.push_str(&format!(" (due {at})"));
        }
        out.push('\n');
    }
    out.push_str("variables\n");
    for (name, variable) in &state.variables {
        out.push_str(&format!("  {name} = {}{}\n", variable.value, if variable.locked { " (locked)" } else { "" }));
    }
    out.push_str("trail\n");
    for step in &state.trail {
        out.push_str(&format!(
            "  {:<12} {}{}{}\n",
            step.kind,
            step.to,
            step.decided_by.as_ref().map(|by| format!(" (by {by})")).unwrap_or_default(),
            step.reason.as_ref().map(|reason| format!(" — {reason}")).unwrap_or_default()
        ));
    }
    let usage = &head.usage;
    out.push_str(&format!(
        "usage     in {} · out {} · cache read {} · cache write {}{}\n",
        thousands(usage.input_tokens),
        thousands(usage.output_tokens),
        thousands(usage.cache_read_tokens),
        thousands(usage.cache_creation_tokens),
        usage.cost_usd.map(|cost| format!(" · ${cost:.4}")).unwrap_or_default()
    ));
    // Past one model or role, each one's share.
    if head.spend.len() > 1 {
        for line in &head.spend {
            out.push_str(&crate::session::spend_line(line));
            out.push('\n');
        }
    }
    if !head.budget.is_empty() {
        let raises = match head.budget.raises {
            0 => "never raised".to_string(),
            1 => "raised once".to_string(),
            raises => format!("raised {raises} times"),
        };
        let stop = head.budget.stop.as_ref().map(|stop| format!("; stopped in {}: {}", stop.state, stop.reason));
        out.push_str(&format!("budget    {raises}{}\n", stop.unwrap_or_default()));
    }
    out
}

/// How a call's answer reads in a transcript: blocked by governance, refused by the
/// runtime (an advance it turned down), an error, or done.
fn verdict(status: ToolStatus, content: &str) -> &'static str {
    if content.starts_with("[workflow] BLOCKED") || content.starts_with("[workflow] FAILED") {
        "blocked"
    } else if content.starts_with("archmax_advance rejected:") || content.starts_with("[workflow] ") {
        "refused"
    } else if status == ToolStatus::Error {
        "error"
    } else {
        "ok"
    }
}

/// The answer to each tool call, by call id.
fn answers(state: &SessionState) -> std::collections::HashMap<&str, (&str, ToolStatus)> {
    state
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { call_id, content, status, .. } => Some((call_id.as_str(), (content.as_str(), *status))),
            _ => None,
        })
        .collect()
}

/// The most lines of one tool answer a transcript shows.
const ANSWER_LINES: usize = 8;

fn indented(text: &str, prefix: &str, limit: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for line in lines.iter().take(limit) {
        out.push_str(&format!("{prefix}{}\n", printable(line)));
    }
    if lines.len() > limit {
        out.push_str(&format!("{prefix}… ({} more lines)\n", lines.len() - limit));
    }
    out
}

/// One line of model or tool text as the terminal may show it ([`terminal_safe`]).
fn printable(line: &str) -> String {
    terminal_safe(line).into_owned()
}

/// `archmax sessions ID --transcript`: the conversation as a person reads it.
fn transcript(state: &SessionState) -> String {
    let answers = answers(state);
    let mut out = format!("session {} · {} · {}\n", state.id, state.head.workflow, state.head.status_label());
    for message in &state.messages {
        match message {
            Message::User { text, .. } => {
                out.push_str("\n── user\n");
                out.push_str(&indented(text, "  ", usize::MAX));
            }
            Message::Assistant { text, tool_calls } => {
                out.push_str("\n── assistant\n");
                if !text.trim().is_empty() {
                    out.push_str(&indented(text, "  ", usize::MAX));
                }
                for call in tool_calls {
                    out.push_str(&format!("  → {} {}\n", printable(&call.name), call.args));
                    match answers.get(call.id.as_str()) {
                        Some((content, status)) => {
                            out.push_str(&format!("    ← {}\n", verdict(*status, content)));
                            out.push_str(&indented(content, "      ", ANSWER_LINES));
                        }
                        None => out.push_str("    ← no answer yet\n"),
                    }
                }
            }
            Message::Tool { .. } => {}
            Message::Note { kind, text, .. } => {
                out.push_str(&format!("\n── runtime note ({})\n", kind.as_str()));
                out.push_str(&indented(text, "  ", usize::MAX));
            }
        }
    }
    if let Some(decision) = &state.head.pending_decision {
        let targets: Vec<&str> = decision.transitions.iter().map(|choice| choice.to.as_str()).collect();
        out.push_str(&format!("\n── parked: awaiting a decision at {} (to {})\n", decision.state, targets.join(", ")));
    }
    if let Some(input) = &state.head.pending_input {
        out.push_str(&format!("\n── parked: awaiting input at {}: {}\n", input.state, input.reason));
    }
    out
}

/// `archmax sessions ID --transcript --json`: the same conversation, each call with its
/// answer and verdict.
fn transcript_json(state: &SessionState) -> serde_json::Value {
    use serde_json::json;
    let answers = answers(state);
    let entries: Vec<serde_json::Value> = state
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::User { text, .. } => Some(json!({ "kind": "user", "text": text })),
            Message::Assistant { text, tool_calls } => {
                let calls: Vec<serde_json::Value> = tool_calls
                    .iter()
                    .map(|call| {
                        let answer = answers.get(call.id.as_str());
                        json!({
                            "id": call.id,
                            "tool": call.name,
                            "args": call.args,
                            "verdict": answer.map(|(content, status)| verdict(*status, content)),
                            "answer": answer.map(|(content, _)| *content),
                        })
                    })
                    .collect();
                Some(json!({ "kind": "assistant", "text": text, "calls": calls }))
            }
            Message::Tool { .. } => None,
            Message::Note { kind, text, .. } => Some(json!({ "kind": "note", "note": kind.as_str(), "text": text })),
        })
        .collect();
    let park = match (&state.head.pending_decision, &state.head.pending_input) {
        (Some(decision), _) => json!({ "channel": "decision", "state": decision.state }),
        (None, Some(input)) => json!({ "channel": "input", "state": input.state, "reason": input.reason }),
        (None, None) => serde_json::Value::Null,
    };
    let mut transcript = json!({
        "sessionId": state.id,
        "workflow": state.head.workflow,
        "status": state.head.status_label(),
        "messages": entries,
        "park": park,
    });
    // A flow walk's session says which walk, section and attempt it is.
    if let Some(flow) = &state.head.flow {
        transcript["flow"] = json!(flow);
    }
    transcript
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn a_transcript_line_cannot_drive_the_terminal() {
        assert_eq!(printable("ok\u{1b}[2Jgone\r!"), "ok\u{fffd}[2Jgone\u{fffd}!");
        assert_eq!(printable("tab\there"), "tab\there");
    }
}
