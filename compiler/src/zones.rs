//! Workspace paths: canonical form, the zone a path falls in, and the literal prefix of
//! a glob.
//!
//! The agent's workspace root is its session folder. `scratchpad/` is the open working
//! area; `large_tool_results/` and `conversation_history/` are offload areas the agent
//! only reads; `checkpoints/`, `artifacts/` and `_specs/` belong to the runtime;
//! `workflows/` is the authoring plane and never reachable. Host mounts (see
//! [`crate::host`]) sit beside these, matched by longest prefix. Every path rule of the
//! validator and of the runtime kernel classifies through [`classify`], so both agree.

use crate::host::MountTable;

/// Root names no mount may take and no session id may start with.
pub const RESERVED_ROOTS: [&str; 7] =
    ["scratchpad", "large_tool_results", "conversation_history", "checkpoints", "artifacts", "_specs", "workflows"];

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
    // Reserved roots are matched without regard to case: on a case-insensitive file
    // system `Checkpoints/` is the runtime's own folder.
    let first = canonical.split('/').next().unwrap_or("").to_ascii_lowercase();
    match first.as_str() {
        "workflows" => return Zone::GovernancePlane,
        "checkpoints" | "artifacts" | "_specs" => return Zone::RuntimeInternal,
        "large_tool_results" | "conversation_history" => return Zone::Offload,
        "scratchpad" => return Zone::Scratchpad,
        _ => {}
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
