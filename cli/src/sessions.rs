//! `archmax sessions [ID] [--workflow SLUG] [--root DIR] [--json]`: a listing, or one session in full;
//! `archmax sessions ID --repair` cuts a damaged session back to what still verifies.

use std::path::Path;
use std::process::ExitCode;

use archmax_vm::session::SessionState;
use archmax_vm::session::fs::{FsStore, RepairOutcome};
use archmax_vm::session::id::check_session_id;
use archmax_vm::session::summary::summary;

use crate::output::{failure, usage};
use crate::session::thousands;

pub fn run(root: &Path, store: Option<&str>, id: Option<&str>, workflow: Option<&str>, json_output: bool) -> ExitCode {
    let store = match crate::store::open_or_exit(root, store, "sessions") {
        Ok(store) => store,
        Err(code) => return code,
    };
    let read = |id: &str| crate::store::read(store.as_ref(), id);
    match id {
        Some(id) => {
            if let Err(problem) = check_session_id(id, &[]) {
                return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
            }
            let state = match read(id) {
                Ok(Some(state)) if workflow.is_some_and(|workflow| workflow != state.head.workflow) => {
                    return failure(format!(
                        "session `{id}` belongs to workflow `{}`, not `{}`",
                        state.head.workflow,
                        workflow.unwrap_or_default()
                    ));
                }
                Ok(Some(state)) => state,
                Ok(None) => return failure(format!("there is no session `{id}`; `archmax sessions` lists them")),
                Err(error) => return failure(error),
            };
            if json_output {
                println!("{}", serde_json::to_string_pretty(&summary(&state)).unwrap_or_default());
            } else {
                print!("{}", detail(&state));
            }
            ExitCode::SUCCESS
        }
        None => {
            // One executor for the whole listing, not one per session read.
            let listed = crate::store::block_on(async {
                let ids = store.list().await?;
                let mut read = Vec::with_capacity(ids.len());
                for id in ids {
                    read.push(store.read(&id).await);
                }
                Ok::<_, archmax_vm::session::StoreError>(read)
            });
            let read = match listed {
                Ok(Ok(read)) => read,
                Ok(Err(error)) => return failure(error),
                Err(message) => return failure(message),
            };
            let mut states = Vec::with_capacity(read.len());
            for loaded in read {
                match loaded {
                    Ok(Some(state)) if workflow.is_some_and(|workflow| workflow != state.head.workflow) => {}
                    Ok(Some(state)) => states.push(state),
                    Ok(None) => {}
                    Err(error) => eprintln!("warning: {error}"),
                }
            }
            if json_output {
                let list: Vec<serde_json::Value> = states.iter().map(summary).collect();
                println!("{}", serde_json::to_string_pretty(&list).unwrap_or_default());
            } else {
                for state in &states {
                    println!("{}", row(state));
                }
            }
            ExitCode::SUCCESS
        }
    }
}

/// Repairs one session and says what was kept and what was dropped.
pub fn repair(root: &Path, store: Option<&str>, id: &str) -> ExitCode {
    if let Err(problem) = check_session_id(id, &[]) {
        return usage("sessions", &format!("`{id}` is not a usable session id: {problem}"));
    }
    let store = match crate::store::target(root, store) {
        Ok(crate::store::Target::Fs(dir)) => FsStore::new(dir),
        Ok(crate::store::Target::Postgres(_)) => {
            return failure(
                "--repair mends the filesystem store's log; the PostgreSQL store commits each step whole or not at all",
            );
        }
        Err(message) => return usage("sessions", &message),
    };
    match store.repair(id) {
        Ok(outcome) => {
            println!("{}", repair_report(id, &outcome));
            ExitCode::SUCCESS
        }
        Err(error) => failure(error),
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

fn row(state: &SessionState) -> String {
    let head = &state.head;
    let names: Vec<&str> = state.variables.keys().map(String::as_str).collect();
    let class = if head.status.is_finished() { "finished" } else { "open" };
    let mut line = format!(
        "{}  {}  {} ({class})  {}",
        state.id,
        head.workflow,
        head.status.as_str(),
        head.position.as_deref().unwrap_or("-")
    );
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

fn detail(state: &SessionState) -> String {
    let head = &state.head;
    let mut out = format!(
        "session   {}\nworkflow  {}\nspec hash {}\nstatus    {}\nstate     {}\n",
        state.id,
        head.workflow,
        if head.spec_hash.is_empty() { "-" } else { head.spec_hash.as_str() },
        head.status.as_str(),
        head.position.as_deref().unwrap_or("-")
    );
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
            "  {:<12} {}{}\n",
            step.kind,
            step.to,
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
    out
}
