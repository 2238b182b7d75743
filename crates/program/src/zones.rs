//! Workspace paths: canonical form, the zone a path falls in, and the literal prefix of
//! a glob.
//!
//! The agent's workspace root is its session folder. `scratchpad/` is the open working
//! area; `large_tool_results/` and `conversation_history/` are offload areas the agent
//! only reads; `checkpoints/`, `artifacts/` and `_specs/` belong to the runtime;
//! `workflows/` is the authoring plane and never reachable. Host mounts (see
//! `archmax_config::mounts`) sit beside these, matched by longest prefix. Every path rule of the
//! validator and of the runtime kernel classifies through [`classify`], so both agree.
//!
//! The one thing to know: [`ROOTS`] is the only list of reserved top-level names. The
//! zone a path falls in, the names no mount key or session id may take, the host areas
//! no mount source may reach, the session-root entries a listing hides and the ones the
//! session quota skips are all read from it.

use crate::mounts::MountTable;

/// Who a reserved top-level name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The agent's own working area.
    Agent,
    /// The runtime: only the VM writes there.
    Runtime,
    /// The workflow authors: the authoring plane, and the host's own table.
    Authoring,
}

/// One reserved top-level name and what the model may do with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootArea {
    pub name: &'static str,
    pub owner: Owner,
    /// The zone paths below it fall in; `None` for a name reserved only on the host
    /// (beside the workspace, never inside a session).
    pub zone: Option<Zone>,
    /// The model's file tools may read below it.
    pub model_reads: bool,
    /// The model's file tools may write below it.
    pub model_writes: bool,
    /// It shows in a listing of the session root when present.
    pub model_lists: bool,
    /// Its files count against the session's quota.
    pub counts_toward_quota: bool,
}

impl RootArea {
    /// True for a name that is a root of every session's workspace.
    pub const fn in_session(&self) -> bool {
        self.zone.is_some()
    }

    /// True for an offload area: written by the runtime, read by the model.
    pub fn is_offload(&self) -> bool {
        self.zone == Some(Zone::Offload)
    }
}

const fn session_area(name: &'static str, owner: Owner, zone: Zone) -> RootArea {
    let model_reads = matches!(zone, Zone::Scratchpad | Zone::Offload);
    RootArea {
        name,
        owner,
        zone: Some(zone),
        model_reads,
        model_writes: matches!(zone, Zone::Scratchpad),
        model_lists: model_reads,
        counts_toward_quota: matches!(owner, Owner::Agent),
    }
}

const fn workspace_area(name: &'static str, owner: Owner) -> RootArea {
    RootArea {
        name,
        owner,
        zone: None,
        model_reads: false,
        model_writes: false,
        model_lists: false,
        counts_toward_quota: false,
    }
}

/// Every reserved top-level name: the session roots first, then the names reserved only
/// in the workspace directory (the session store, the build output, `archmax.toml`,
/// and `.archmax`, which holds the runner's seal key), which no mount source may
/// reach either.
pub const ROOTS: [RootArea; 11] = [
    session_area("scratchpad", Owner::Agent, Zone::Scratchpad),
    session_area("large_tool_results", Owner::Runtime, Zone::Offload),
    session_area("conversation_history", Owner::Runtime, Zone::Offload),
    session_area("checkpoints", Owner::Runtime, Zone::RuntimeInternal),
    session_area("artifacts", Owner::Runtime, Zone::RuntimeInternal),
    session_area("_specs", Owner::Runtime, Zone::RuntimeInternal),
    session_area("workflows", Owner::Authoring, Zone::GovernancePlane),
    workspace_area("sessions", Owner::Runtime),
    workspace_area("target", Owner::Runtime),
    workspace_area("archmax.toml", Owner::Authoring),
    // The session seal key (`.archmax/seal.key`): a mount of it would show the model the
    // key that makes the session log's MACs.
    workspace_area(".archmax", Owner::Runtime),
];

const fn session_root_count() -> usize {
    let mut count = 0;
    let mut index = 0;
    while index < ROOTS.len() {
        if ROOTS[index].in_session() {
            count += 1;
        }
        index += 1;
    }
    count
}

const fn session_root_names<const N: usize>() -> [&'static str; N] {
    let mut names = [""; N];
    let (mut index, mut filled) = (0, 0);
    while index < ROOTS.len() {
        if ROOTS[index].in_session() {
            names[filled] = ROOTS[index].name;
            filled += 1;
        }
        index += 1;
    }
    names
}

/// Root names no mount may take and no session id may start with: the session roots of
/// [`ROOTS`], in table order.
pub const RESERVED_ROOTS: [&str; session_root_count()] = session_root_names();

/// The session root `name` names, compared without regard to ASCII case (on a
/// case-insensitive file system `Checkpoints/` is the runtime's own folder).
pub fn session_root(name: &str) -> Option<&'static RootArea> {
    ROOTS.iter().find(|root| root.in_session() && root.name.eq_ignore_ascii_case(name))
}

/// The reserved name (session root or host area) a top-level `name` is, compared
/// without regard to ASCII case.
pub fn reserved_area(name: &str) -> Option<&'static RootArea> {
    ROOTS.iter().find(|root| root.name.eq_ignore_ascii_case(name))
}

/// Where a canonical path lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zone {
    /// The workspace root itself.
    Root,
    /// `scratchpad/`: open to every granted default file tool.
    Scratchpad,
    /// `large_tool_results/`, `conversation_history/`: readable, never writable.
    Offload,
    /// `checkpoints/`, `artifacts/`, `_specs/`: the runtime's own.
    RuntimeInternal,
    /// `workflows/`: the authoring plane.
    GovernancePlane,
    /// Inside the host mount at this index of the [`MountTable`].
    Mount(usize),
    /// Any other path under the session root.
    Run,
}

impl Zone {
    pub fn describe(self, mounts: &MountTable) -> String {
        match self {
            Zone::Root => "the workspace root".to_string(),
            Zone::Scratchpad => "the scratchpad".to_string(),
            Zone::Offload => "an offload area the agent only reads".to_string(),
            Zone::RuntimeInternal => "an area the runtime owns".to_string(),
            Zone::GovernancePlane => "the authoring plane `workflows/`".to_string(),
            Zone::Mount(index) => format!("the mount `{}`", mounts.mounts[index].key),
            Zone::Run => "the session".to_string(),
        }
    }
}

/// Where a file handed to a trigger's `file` input from outside is kept in the session:
/// `scratchpad/inputs/<NAME>` plus the file's extension (`archmax_vm::handover`).
pub const HANDED_FILES: &str = "scratchpad/inputs";

/// A path that climbs above the workspace root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Escape;

/// Canonical form: no leading slash, no `.` or empty segments, `..` applied.
pub fn canonicalize(path: &str) -> Result<String, Escape> {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(Escape);
                }
            }
            other => segments.push(other),
        }
    }
    Ok(segments.join("/"))
}

/// The zone of a canonical path.
pub fn classify(canonical: &str, mounts: &MountTable) -> Zone {
    if canonical.is_empty() {
        return Zone::Root;
    }
    let first = canonical.split('/').next().unwrap_or("");
    if let Some(zone) = session_root(first).and_then(|root| root.zone) {
        return zone;
    }
    match mounts.containing(canonical) {
        Some(index) => Zone::Mount(index),
        None => Zone::Run,
    }
}

/// True when a glob segment holds a wildcard or a `${{…}}` hole.
fn is_pattern_segment(segment: &str) -> bool {
    segment.contains(['*', '?', '[', '{'])
}

/// The zone every match of `glob` must lie in, when the glob's literal prefix decides
/// it; `None` when matches could land in several zones (`**`, `*.md`, `cat*/x`).
/// An escaping prefix is reported as `Err(Escape)`.
pub fn glob_zone(glob: &str, mounts: &MountTable) -> Result<Option<Zone>, Escape> {
    let literal: Vec<&str> = glob.split('/').take_while(|segment| !is_pattern_segment(segment)).collect();
    let whole_literal = literal.len() == glob.split('/').count();
    let prefix = canonicalize(&literal.join("/"))?;
    if prefix.is_empty() {
        return Ok(if whole_literal { Some(Zone::Root) } else { None });
    }
    if whole_literal {
        return Ok(Some(classify(&prefix, mounts)));
    }
    let zone = classify(&prefix, mounts);
    if let Zone::Run = zone {
        // A pattern below `catalogs/` may still reach a mount `catalogs/eu/`.
        let deeper_mount = mounts.mounts.iter().any(|mount| {
            let key = mount.key.trim_end_matches('/');
            key.len() > prefix.len() && key.starts_with(&prefix) && key.as_bytes()[prefix.len()] == b'/'
        });
        if deeper_mount {
            return Ok(None);
        }
    }
    if let Zone::Mount(index) = zone
        && !mounts.mounts[index].directory
    {
        return Ok(None);
    }
    Ok(Some(zone))
}

/// The skill slug a glob is confined to (`skills/<slug>/…` with a literal slug).
pub fn glob_skill(glob: &str) -> Option<&str> {
    let mut segments = glob.trim_start_matches('/').split('/');
    if segments.next()? != "skills" {
        return None;
    }
    let slug = segments.next()?;
    if slug.is_empty() || is_pattern_segment(slug) || slug == "." || slug == ".." {
        return None;
    }
    Some(slug)
}

/// True when the glob can only match inside `skills/`.
pub fn glob_within_skills(glob: &str) -> bool {
    let mut segments = glob.trim_start_matches('/').split('/');
    segments.next() == Some("skills") && segments.next().is_some()
}

/// True when no match of the glob can lie inside `skills/` (the literal prefix leaves it).
pub fn glob_outside_skills(glob: &str) -> bool {
    let first = glob.trim_start_matches('/').split('/').next().unwrap_or("");
    !first.is_empty() && !is_pattern_segment(first) && first != "skills"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths() {
        assert_eq!(canonicalize("/scratchpad/./a//b/../c"), Ok("scratchpad/a/c".to_string()));
        assert_eq!(canonicalize("scratchpad/../../etc"), Err(Escape));
        assert_eq!(canonicalize(""), Ok(String::new()));
    }

    #[test]
    fn the_table_keeps_the_reserved_names_and_their_standing() {
        assert_eq!(
            RESERVED_ROOTS,
            [
                "scratchpad",
                "large_tool_results",
                "conversation_history",
                "checkpoints",
                "artifacts",
                "_specs",
                "workflows"
            ]
        );
        let hidden: Vec<&str> =
            ROOTS.iter().filter(|root| root.in_session() && !root.model_lists).map(|root| root.name).collect();
        assert_eq!(hidden, ["checkpoints", "artifacts", "_specs", "workflows"]);
        let written: Vec<&str> = ROOTS.iter().filter(|root| root.model_writes).map(|root| root.name).collect();
        assert_eq!(written, ["scratchpad"]);
        let offload: Vec<&str> = ROOTS.iter().filter(|root| root.is_offload()).map(|root| root.name).collect();
        assert_eq!(offload, ["large_tool_results", "conversation_history"]);
        assert_eq!(session_root("Checkpoints").map(|root| root.name), Some("checkpoints"));
        assert_eq!(session_root("sessions"), None);
        assert_eq!(reserved_area("Sessions").map(|root| root.owner), Some(Owner::Runtime));
    }

    #[test]
    fn zones_of_paths() {
        let mounts = MountTable::default_table();
        assert_eq!(classify("scratchpad/x", &mounts), Zone::Scratchpad);
        assert_eq!(classify("checkpoints/cp.json", &mounts), Zone::RuntimeInternal);
        assert_eq!(classify("workflows/a/workflow.yaml", &mounts), Zone::GovernancePlane);
        assert_eq!(classify("reports/a.md", &mounts), Zone::Run);
        assert!(matches!(classify("skills/a/SKILL.md", &mounts), Zone::Mount(_)));
        assert!(matches!(classify("AGENTS.md", &mounts), Zone::Mount(_)));
        assert_eq!(classify("AGENTS.md.bak", &mounts), Zone::Run);
    }

    #[test]
    fn glob_prefixes_decide_zones() {
        let mounts = MountTable::default_table();
        assert_eq!(glob_zone("scratchpad/**", &mounts), Ok(Some(Zone::Scratchpad)));
        assert_eq!(glob_zone("**/*.md", &mounts), Ok(None));
        assert_eq!(glob_zone("reports/${{id}}/*.md", &mounts), Ok(Some(Zone::Run)));
        assert_eq!(glob_zone("checkpoints/*", &mounts), Ok(Some(Zone::RuntimeInternal)));
        assert_eq!(glob_zone("../x/*", &mounts), Err(Escape));
        assert_eq!(glob_skill("skills/order-data/**"), Some("order-data"));
        assert_eq!(glob_skill("skills/*/scripts/**"), None);
        assert!(glob_outside_skills("scratchpad/**"));
        assert!(!glob_outside_skills("**"));
    }
}
