//! The prompt: a static prefix per workflow and a volatile template per state.
//!
//! The static prefix is byte-identical on every model call of a session, so providers
//! can cache it: the workspace persona (`AGENTS.md`), the platform prompt (how to move,
//! park and fail), the workspace zones, the workflow header with its instructions, and
//! `WORKFLOW.md` without HTML comments. No state appears in it.
//!
//! The volatile block is rendered per call from a template fixed here: the clock, the
//! current state, its instructions, skills and mounts, the variables set, the enforced
//! constraints, the trigger's signature, and the transitions (each marked with what
//! taking it leads to) or the terminal sentence. The runtime fills only the holes.

use crate::program::TemplatePart;
use crate::schema::ast::{State, StateKind, TransitionType, Workflow};
use crate::workspace::Workspace;

use super::Interner;

/// Markers of a block only top-level sessions get.
const TOP_LEVEL_OPEN: &str = "<!-- top-level-only -->";
const TOP_LEVEL_CLOSE: &str = "<!-- /top-level-only -->";

/// The parts of the static prefix shared by every workflow of a workspace.
pub struct PrefixParts {
    persona: String,
    platform: String,
    zones: String,
}

impl PrefixParts {
    pub fn new(workspace: &Workspace, compiled_platform_prompt: &str) -> PrefixParts {
        let persona = workspace.agents.map(|file| workspace.sources.text(file).trim().to_string()).unwrap_or_default();
        let platform = workspace
            .platform_prompt
            .map(|file| workspace.sources.text(file).to_string())
            .unwrap_or_else(|| compiled_platform_prompt.to_string());
        PrefixParts { persona, platform, zones: zones_section(workspace) }
    }

    /// The full prefix for one workflow; `child` drops the top-level-only blocks.
    pub fn render(&self, workspace: &Workspace, workflow: &Workflow, child: bool) -> String {
        let mut sections: Vec<String> = Vec::new();
        if !self.persona.is_empty() {
            sections.push(self.persona.clone());
        }
        let platform = platform_variant(&self.platform, child);
        if !platform.is_empty() {
            sections.push(platform);
        }
        sections.push(self.zones.clone());
        let mut header = match &workflow.title {
            Some(title) => format!("# Workflow: {}", title.value.trim()),
            None => "# Workflow".to_string(),
        };
        if let Some(instructions) = &workflow.instructions {
            header.push_str("\n\n## Instructions\n\n");
            header.push_str(instructions.value.trim());
        }
        sections.push(header);
        if let Some(prose) = workflow.prose {
            let prose = strip_html_comments(workspace.sources.text(prose));
            if !prose.is_empty() {
                sections.push(prose);
            }
        }
        sections.join("\n\n") + "\n"
    }
}

/// The platform prompt for a top-level session (markers removed) or a child (the
/// marked blocks removed).
pub fn platform_variant(text: &str, child: bool) -> String {
    let mut out = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed == TOP_LEVEL_OPEN {
            skipping = child;
            continue;
        }
        if trimmed == TOP_LEVEL_CLOSE {
            skipping = false;
            continue;
        }
        if !skipping {
            out.push(line);
        }
    }
    collapse_blank_lines(&out.join("\n"))
}

/// Removes `<!-- … -->` comments, trims trailing spaces, collapses runs of blank lines.
pub fn strip_html_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    collapse_blank_lines(&out)
}

fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

/// The static "Workspace zones" section, from the host's mount table.
fn zones_section(workspace: &Workspace) -> String {
    let mut lines = vec![
        "## Workspace zones".to_string(),
        String::new(),
        "The workspace root is this session's own folder: private to it, and writable where this state's rules allow. Authored content is mounted beside it, read-only unless marked otherwise.".to_string(),
        String::new(),
        "- `scratchpad/` — your working area: readable and writable in every state.".to_string(),
        "- `large_tool_results/`, `conversation_history/` — where the runtime keeps long tool results and older history; read them when you are handed a path (page through with `read_file` offset and limit). Never write there.".to_string(),
    ];
    let mut visible: Vec<&archmax_config::mounts::Mount> =
        workspace.mounts.mounts.iter().filter(|mount| !mount.governed && !mount.key.starts_with('.')).collect();
    visible.sort_by_key(|mount| (!mount.read_only, !mount.directory, mount.key.clone()));
    if !visible.is_empty() {
        let listed: Vec<String> = visible
            .iter()
            .map(|mount| {
                let posture = if mount.read_only { "read-only" } else { "read/write" };
                let browse = if mount.searchable { "" } else { ", browse only" };
                format!("`{}` — {posture}{browse}", mount.key)
            })
            .collect();
        lines.push(format!("- Mounts: {}.", listed.join("; ")));
        let mut notes = vec!["  A read-only mount refuses every write."];
        if visible.iter().any(|mount| !mount.read_only) {
            notes.push("  A read/write mount is as open as the scratchpad, but each call is still checked against this state's rules, and what you write there outlives the session.");
        }
        if visible.iter().any(|mount| !mount.searchable) {
            notes.push("  A browse-only mount is skipped by `glob` and `grep`: list it and read paths directly.");
        }
        lines.push(notes.join(""));
    }
    lines.push(
        "- Any other path at the root belongs to this session and is governed by this state's tool rules.".to_string(),
    );
    if workspace.mounts.governed().next().is_some() {
        lines.push("- Some mounts are reachable only in some states; the ones this state has are listed under \"Current state\".".to_string());
    }
    lines.join("\n")
}

/// What taking a transition leads to, as the agent is shown it.
pub fn marker(kind: TransitionType, target: &State) -> Option<String> {
    let mut notes: Vec<&str> = Vec::new();
    if kind != TransitionType::None {
        notes.push(kind.as_str());
    }
    match target.kind {
        StateKind::Human => notes.push("human decision node"),
        StateKind::Grader => notes.push("grader"),
        StateKind::Code => notes.push("code"),
        StateKind::Agent => {}
    }
    if target.is_terminal() {
        notes.push("terminal");
    }
    (!notes.is_empty()).then(|| notes.join(", "))
}

/// The sentence that opens the state section.
const CURRENT_STATE_NOTE: &str =
    "You are in this state now. It overrides any movement recorded earlier in the transcript.";
const TERMINAL_NOTE: &str = "This state is terminal: no transition leads out of it. Finish the work here and stop.";
const TRANSITIONS_HEADER: &str = "Transitions — pick one with `archmax_advance` once this state's work is done:";
const LONE_EDGE_HEADER: &str = "Transition — this state has a single way out and no condition of its own: call `archmax_advance` as soon as the instructions above are done, without asking anyone whether to move on.";

/// The volatile template of one state.
pub fn volatile_template(
    workspace: &Workspace,
    workflow: &Workflow,
    state: &State,
    interner: &mut Interner,
) -> Vec<TemplatePart> {
    let mut parts = vec![TemplatePart::Clock];
    let mut text = format!("\n\n## Current state: {}\n\n{CURRENT_STATE_NOTE}", state.slug.value);
    let flush = |parts: &mut Vec<TemplatePart>, text: &mut String, interner: &mut Interner| {
        if !text.is_empty() {
            parts.push(TemplatePart::Text(interner.intern(text)));
            text.clear();
        }
    };
    flush(&mut parts, &mut text, interner);
    parts.push(TemplatePart::Reentry);
    if let Some(instructions) = &state.instructions {
        text.push_str("\n\n");
        text.push_str(instructions.value.trim());
    }
    let skills = skills_section(workspace, workflow, state);
    if !skills.is_empty() {
        text.push_str("\n\n");
        text.push_str(&skills);
    }
    let mounts = mounts_section(workspace, workflow, state);
    if !mounts.is_empty() {
        text.push_str("\n\n");
        text.push_str(&mounts);
    }
    flush(&mut parts, &mut text, interner);
    parts.push(TemplatePart::Variables);
    parts.push(TemplatePart::Constraints);
    parts.push(TemplatePart::Signature);
    text.push_str("\n\n");
    text.push_str(&transitions_block(workflow, state));
    flush(&mut parts, &mut text, interner);
    parts
}

fn transitions_block(workflow: &Workflow, state: &State) -> String {
    if state.is_terminal() {
        return TERMINAL_NOTE.to_string();
    }
    let line = |transition: &crate::schema::ast::Transition| {
        let target = workflow.state(&transition.to.value);
        let marker = target.and_then(|target| marker(transition.kind, target));
        let mut line = format!("- to `{}`", transition.to.value);
        if let Some(marker) = marker {
            line.push_str(&format!(" ({marker})"));
        }
        if let Some(description) = &transition.description {
            line.push_str(" — ");
            line.push_str(&description.value.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        line
    };
    let lone = state.transitions.len() == 1 && state.transitions[0].description.is_none();
    let header = if lone { LONE_EDGE_HEADER } else { TRANSITIONS_HEADER };
    let mut lines = vec![header.to_string()];
    lines.extend(state.transitions.iter().map(line));
    lines.join("\n")
}

fn skills_section(workspace: &Workspace, workflow: &Workflow, state: &State) -> String {
    let enabled = crate::standing::enabled_skills(workspace, workflow, state);
    if enabled.is_empty() {
        return String::new();
    }
    let mut lines = vec!["## Skills available in this state".to_string(), String::new()];
    for slug in &enabled {
        let description = workspace
            .skill(slug)
            .and_then(|skill| skill.description.as_deref())
            .map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let description = if description.is_empty() || description.ends_with(['.', '!', '?']) {
            description
        } else {
            format!("{description}.")
        };
        lines.push(format!("- **`{slug}`** — {description} Read `skills/{slug}/SKILL.md` first."));
    }
    lines.push(String::new());
    lines.push("Only the skills listed here can be reached in this state.".to_string());
    lines.join("\n")
}

fn mounts_section(workspace: &Workspace, workflow: &Workflow, state: &State) -> String {
    let mut listed: Vec<String> = Vec::new();
    for mount in workspace.mounts.governed() {
        if let crate::program::MountReach::Reachable { writable } = crate::standing::mount_reach(workflow, state, mount)
        {
            let posture = if writable { "read/write" } else { "read-only" };
            let browse = if mount.searchable { "" } else { ", browse only" };
            listed.push(format!("- `{}` — {posture}{browse}", mount.key));
        }
    }
    if listed.is_empty() {
        return String::new();
    }
    listed.sort();
    let mut lines = vec!["## Mounts available in this state".to_string(), String::new()];
    lines.extend(listed);
    lines.join("\n")
}
