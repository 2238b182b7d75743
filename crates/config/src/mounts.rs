//! Reading the mount table out of `archmax.toml` ([`parse_mounts`]); the table
//! itself and its path rules are [`archmax_program::mounts`], re-exported here.

use std::collections::BTreeMap;

use serde::Deserialize;

pub use archmax_program::mounts::*;

use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean};
use archmax_program::source::{FileId, Span};
use archmax_program::zones::RESERVED_ROOTS;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MountsFile {
    #[serde(default)]
    mounts: BTreeMap<toml::Spanned<String>, toml::Spanned<MountDeclaration>>,
    /// The runner's tables, read by [`crate::settings`].
    #[serde(default, rename = "connections")]
    _connections: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "schedule")]
    _schedule: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "mcp_servers")]
    _mcp_servers: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "essential_tools")]
    _essential_tools: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "context")]
    _context: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "limits")]
    _limits: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "inbox")]
    _inbox: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "providers")]
    _providers: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "models")]
    _models: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "notify")]
    _notify: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "serve")]
    _serve: Option<serde::de::IgnoredAny>,
}

/// The keys at the root of `archmax.toml`, the fields of [`MountsFile`].
const ROOT_KEYS: [&str; 12] = [
    "mounts",
    "connections",
    "schedule",
    "mcp_servers",
    "essential_tools",
    "context",
    "limits",
    "inbox",
    "providers",
    "models",
    "notify",
    "serve",
];

/// The key named by a TOML "unknown field `…`" error.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.split_once("unknown field `")?.1;
    Some(rest.split_once('`')?.0)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MountDeclaration {
    source: Option<String>,
    read_only: Option<bool>,
    governed: Option<bool>,
    searchable: Option<bool>,
}

/// Reads `archmax.toml`. Problems become diagnostics; the table keeps what was valid.
pub fn parse_mounts(file: FileId, text: &str) -> (MountTable, Vec<Diagnostic>) {
    let mut table = MountTable::default_table();
    let mut diagnostics = Vec::new();
    let span = |range: std::ops::Range<usize>| Span::new(file, range.start, range.end);
    let parsed: MountsFile = match toml::from_str(text) {
        Ok(parsed) => parsed,
        Err(error) => {
            let range = error.span().unwrap_or(0..0);
            let message = error.message().trim().to_string();
            let help = if message.contains("unknown field") && message.contains("expected one of `source`") {
                "a mount takes `source`, `read_only`, `governed` and `searchable`; a writable mount says `read_only = false`".to_string()
            } else if message.contains("unknown field") {
                let holds = "archmax.toml holds `essential_tools` and `[mounts.\"<key>\"]`, `[connections.<slug>]`, `[schedule.<workflow>]`, `[mcp_servers.<name>]`, `[context]`, `[limits]`, `[inbox]`, `[providers.<name>]`, `[models.\"<id>\"]`, `[notify.<name>]` and `[serve]` tables, and nothing else";
                match unknown_field(&message).and_then(|field| did_you_mean(field, ROOT_KEYS)) {
                    Some(close) => format!("did you mean `{close}`? {holds}"),
                    None => holds.to_string(),
                }
            } else {
                "declare mounts as `[mounts.\"<key>\"]` tables with `source`, `read_only`, `governed` and `searchable`"
                    .to_string()
            };
            diagnostics.push(
                Diagnostic::at(Code::HostConfig, span(range), format!("archmax.toml is invalid: {message}"))
                    .with_help(help),
            );
            return (table, diagnostics);
        }
    };
    for (key, declaration) in parsed.mounts {
        let key_span = span(key.span());
        let raw = key.into_inner();
        let directory = raw.ends_with('/');
        let canonical = match mount_key_path(&raw) {
            Ok(canonical) => canonical,
            Err(MountPathError::Outside | MountPathError::RuntimeArea(_)) => {
                diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        key_span,
                        format!("the mount key `{raw}` does not name a path inside the workspace"),
                    )
                    .with_help("write a relative key such as `reference/` or `catalogs/eu/`"),
                );
                continue;
            }
            Err(MountPathError::Reserved(first)) => {
                diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        key_span,
                        format!("the mount key `{raw}` uses the reserved root name `{first}`"),
                    )
                    .with_help(format!(
                        "pick another key: {} belong to the runtime and cannot be mounted",
                        archmax_program::diagnostic::list_names(&RESERVED_ROOTS)
                    )),
                );
                continue;
            }
        };
        let declaration_span = span(declaration.span());
        let declaration = declaration.into_inner();
        let key = if directory { format!("{canonical}/") } else { canonical.clone() };
        // Without `source` the content lives at the key's path, which must pass the same check.
        let source = declaration.source.as_deref().unwrap_or(&canonical);
        let source = match mount_source_path(source) {
            Ok(source) => source,
            Err(MountPathError::RuntimeArea(area)) => {
                diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        declaration_span,
                        format!("the `source` `{source}` of mount `{raw}` lies in `{area}`, which the runtime owns"),
                    )
                    .with_help(format!(
                        "mount a folder of your own data; no mount source may be or lie inside {}",
                        archmax_program::diagnostic::list_names(&runtime_areas())
                    )),
                );
                continue;
            }
            Err(_) => {
                diagnostics.push(
                    Diagnostic::at(
                        Code::HostConfig,
                        declaration_span,
                        format!("the `source` of mount `{raw}` leaves the workspace root"),
                    )
                    .with_help("give `source` as a path relative to the workspace root"),
                );
                continue;
            }
        };
        let mount = Mount {
            name: canonical.clone(),
            key: key.clone(),
            directory,
            read_only: declaration.read_only.unwrap_or(true),
            governed: declaration.governed.unwrap_or(false),
            searchable: declaration.searchable.unwrap_or(true),
            source,
            declared: Some(key_span),
        };
        match table.mounts.iter_mut().find(|existing| existing.name == mount.name) {
            Some(existing) => *existing = mount,
            None => table.mounts.push(mount),
        }
    }
    table.mounts.sort_by(|left, right| left.key.cmp(&right.key));
    diagnostics.extend(crate::settings::parse_runner_settings(file, text).1);
    (table, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_mounts_join_the_defaults() {
        let text = "[mounts.\"catalogs/eu/\"]\ngoverned = true\nread_only = false\n";
        let (table, diagnostics) = parse_mounts(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let mount = table.by_name("catalogs/eu").expect("declared");
        assert!(mount.governed && !mount.read_only && mount.directory);
        assert_eq!(table.containing("catalogs/eu/x.json"), table.mounts.iter().position(|m| m.name == "catalogs/eu"));
        assert_eq!(table.containing("catalogs/uk/x.json"), None);
        assert!(table.by_name("skills").is_some());
    }

    #[test]
    fn reserved_keys_and_unknown_fields_are_refused() {
        let (_, diagnostics) = parse_mounts(FileId(0), "[mounts.\"scratchpad/\"]\n");
        assert_eq!(diagnostics[0].code, Code::HostConfig);
        let (_, diagnostics) = parse_mounts(FileId(0), "[mounts.\"a/\"]\nwritable = true\n");
        assert_eq!(diagnostics[0].code, Code::HostConfig);
        assert!(diagnostics[0].message.contains("writable"), "{}", diagnostics[0].message);
    }

    #[test]
    fn an_unknown_root_table_is_answered_with_the_closest_table_name() {
        let (_, diagnostics) = parse_mounts(FileId(0), "[mcp_server.payments]\ncommand = [\"pay\"]\n");
        let help = diagnostics[0].help.as_deref().unwrap_or_default();
        assert!(help.starts_with("did you mean `mcp_servers`?"), "{help}");
        let (_, diagnostics) = parse_mounts(FileId(0), "[colours]\nred = 1\n");
        let help = diagnostics[0].help.as_deref().unwrap_or_default();
        assert!(help.starts_with("archmax.toml holds"), "{help}");
        // The suggestions come from the very fields the file accepts.
        let expected = diagnostics[0].message.split_once("expected one of ").map_or("", |(_, list)| list);
        let fields: Vec<&str> = expected.split(", ").map(|field| field.trim_matches('`')).collect();
        assert_eq!(fields, ROOT_KEYS);
    }

    #[test]
    fn sources_in_runtime_areas_are_refused_naming_the_source_and_the_area() {
        let cases = [
            ("sessions", "sessions"),
            ("sessions/s1/checkpoints", "sessions"),
            ("./Sessions", "sessions"),
            ("workflows", "workflows"),
            ("workflows/rate-lookup", "workflows"),
            ("target/archmax", "target"),
            ("archmax.toml", "archmax.toml"),
            ("data/../scratchpad", "scratchpad"),
            ("checkpoints/x", "checkpoints"),
        ];
        for (source, area) in cases {
            let text = format!("[mounts.\"data/\"]\nsource = \"{source}\"\nread_only = false\n");
            let (table, diagnostics) = parse_mounts(FileId(0), &text);
            assert_eq!(diagnostics.len(), 1, "{source}: {diagnostics:?}");
            assert_eq!(diagnostics[0].code, Code::HostConfig);
            let message = &diagnostics[0].message;
            assert!(message.contains(&format!("`{source}`")) && message.contains(&format!("`{area}`")), "{message}");
            assert!(table.by_name("data").is_none(), "{source} was mounted");
        }
        // A key without `source` mounts the host path of the same name.
        let (table, diagnostics) = parse_mounts(FileId(0), "[mounts.\"target/\"]\n");
        assert!(diagnostics[0].message.contains("`target`, which the runtime owns"), "{diagnostics:?}");
        assert!(table.by_name("target").is_none());
        for source in [".", "", "data/.."] {
            let text = format!("[mounts.\"data/\"]\nsource = \"{source}\"\n");
            let (_, diagnostics) = parse_mounts(FileId(0), &text);
            assert!(diagnostics[0].message.contains("leaves the workspace root"), "{source}: {diagnostics:?}");
        }
    }

    #[test]
    fn a_mount_of_the_folder_holding_the_seal_key_is_refused_read_only_or_not() {
        for source in [".archmax", ".archmax/seal.key", "./.Archmax", "data/../.archmax/x"] {
            for read_only in [true, false] {
                let text = format!("[mounts.\"data/\"]\nsource = \"{source}\"\nread_only = {read_only}\n");
                let (table, diagnostics) = parse_mounts(FileId(0), &text);
                assert_eq!(diagnostics.len(), 1, "{source}: {diagnostics:?}");
                assert_eq!(diagnostics[0].code, Code::HostConfig);
                let message = &diagnostics[0].message;
                assert!(message.contains("lies in `.archmax`, which the runtime owns"), "{source}: {message}");
                assert!(table.by_name("data").is_none(), "{source} was mounted");
            }
        }
        // A key without `source` mounts the host folder of the same name.
        let (table, diagnostics) = parse_mounts(FileId(0), "[mounts.\".archmax/\"]\n");
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert!(table.by_name(".archmax").is_none());
    }

    #[test]
    fn the_built_in_mounts_and_ordinary_sources_still_pass() {
        for mount in &MountTable::default_table().mounts {
            assert_eq!(mount_source_path(&mount.source).as_deref(), Ok(mount.source.as_str()));
        }
        let text =
            "[mounts.\"data/\"]\nsource = \"data/sessions-archive\"\n[mounts.\"sessions/\"]\nsource = \"data\"\n";
        let (table, diagnostics) = parse_mounts(FileId(0), text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(table.by_name("sessions").map(|mount| mount.source.as_str()), Some("data"));
        assert_eq!(table.by_name("data").map(|mount| mount.source.as_str()), Some("data/sessions-archive"));
        assert!(table.by_name("skills").is_some() && table.by_name("AGENTS.md").is_some());
    }
}
