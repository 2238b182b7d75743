//! Entries of the `tools`, `skills` and `mounts` lists.
//!
//! A tool entry is a bare name or `{ tool, args?, paths?, connection?, source? }`; every
//! glob is split into literal text and `${{…}}` holes here, so a malformed reference is
//! reported at its exact span. Skill entries are bundle slugs; mount entries are mount
//! names, or `{ mount, access }` in a grant. Whether a name exists is checked later,
//! against the workspace ([`crate::check`]).

use crate::diagnostic::{Code, Diagnostic, SpecPath};
use crate::source::{Span, Spanned};
use crate::syntax::reference::{parse_template, scan_template};
use crate::syntax::value_subspan;
use crate::syntax::yaml::{Node, NodeKind};

use super::ast::{Access, ArgGuard, Glob, MountEntry, ToolEntry};
use super::reader::{Fields, Reader};

pub(crate) const TOOL_ENTRY: Fields =
    Fields { known: &["tool", "args", "paths", "connection", "source"], removed: &[], what: "a tool entry" };

pub(crate) const MOUNT_ENTRY: Fields = Fields { known: &["mount", "access"], removed: &[], what: "a mount entry" };

/// A tools list (`allow`, `forbid`, `allow_always`, `forbid_always`).
pub(super) fn tool_entries(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>, forbid: bool) -> Vec<ToolEntry> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, "a list of tool entries");
        return Vec::new();
    };
    items.iter().enumerate().filter_map(|(index, item)| tool_entry(reader, item, &path.index(index), forbid)).collect()
}

fn tool_entry(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>, forbid: bool) -> Option<ToolEntry> {
    let entry = match &node.kind {
        NodeKind::Scalar(_) => {
            let tool = reader.nonempty_string(node, path)?;
            ToolEntry {
                tool,
                args: Vec::new(),
                paths: None,
                connection: None,
                source: None,
                span: node.span,
                partial_references: Vec::new(),
            }
        }
        NodeKind::Mapping(_) => {
            let fields = reader.fields(node, path, &TOOL_ENTRY, false)?;
            let mut tool = None;
            let mut args = Vec::new();
            let mut paths = None;
            let mut connection = None;
            let mut source = None;
            let mut partial_references = Vec::new();
            for field in fields {
                let key_path = path.key(field.key);
                match field.key {
                    "tool" => tool = reader.nonempty_string(field.value, &key_path),
                    "args" => args = arg_guards(reader, field.value, &key_path, &mut partial_references),
                    "paths" => paths = Some(globs(reader, field.value, &key_path, &mut partial_references)),
                    "connection" => connection = reader.nonempty_string(field.value, &key_path),
                    "source" => source = reader.string(field.value, &key_path),
                    _ => {}
                }
            }
            let Some(tool) = tool else {
                if node.get("tool").is_none() {
                    reader.report(
                        Diagnostic::at(Code::MissingKey, node.span, "a tool entry needs a `tool` name")
                            .with_label("no `tool` key")
                            .with_help("write `{ tool: <name>, … }`, or the bare tool name"),
                        path,
                    );
                }
                return None;
            };
            ToolEntry { tool, args, paths, connection, source, span: node.span, partial_references }
        }
        NodeKind::Sequence(_) => {
            reader.wrong_type(node, path, "a tool name or a `{ tool, … }` mapping");
            return None;
        }
    };
    if !forbid && entry.tool.value == "*" {
        reader.report(
            Diagnostic::at(
                Code::WildcardInAllow,
                entry.tool.span,
                "the tool `*` (every tool) can only be denied, never granted",
            )
            .with_label("only valid in a forbid list")
            .with_help(if path.render().starts_with("tools.") {
                "list the tools every state needs by name; governance is closed by default"
            } else {
                "list the tools this state needs by name; governance is closed by default"
            }),
            path,
        );
        return None;
    }
    Some(entry)
}

fn arg_guards(
    reader: &mut Reader<'_>,
    node: &Node,
    path: &SpecPath<'_>,
    partial: &mut Vec<(String, Span)>,
) -> Vec<ArgGuard> {
    let Some(entries) = reader.mapping(node, path, false) else {
        return Vec::new();
    };
    let mut guards = Vec::new();
    for entry in entries {
        let Some(argument) = entry.key.scalar_text().filter(|name| !name.trim().is_empty()) else {
            reader.wrong_type(&entry.key, path, "an argument name");
            continue;
        };
        let argument_path = path.key(argument);
        guards.push(ArgGuard {
            argument: Spanned::new(argument.to_string(), entry.key.span),
            globs: globs(reader, &entry.value, &argument_path, partial),
        });
    }
    guards
}

/// One glob or a list of globs, each parsed for `${{…}}` holes. A glob with a malformed
/// reference is reported and dropped; its well-formed references go to `partial`, so
/// they are still judged (one typo must not hide another finding).
fn globs(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>, partial: &mut Vec<(String, Span)>) -> Vec<Glob> {
    let texts = match &node.kind {
        NodeKind::Sequence(items) => items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| glob_text(reader, item, &path.index(index)).map(|text| (text, item)))
            .collect::<Vec<_>>(),
        _ => glob_text(reader, node, path).map(|text| (text, node)).into_iter().collect(),
    };
    texts
        .into_iter()
        .filter_map(|(text, item)| match parse_template(&text.value) {
            Ok(template) => match crate::glob::Glob::compile(&template) {
                Ok(_) => Some(Glob { text, template }),
                Err(error) => {
                    reader.report(
                        Diagnostic::at(
                            Code::InvalidValue,
                            item.span,
                            format!("the glob `{}` cannot be used: {}", text.value, error.0),
                        )
                        .with_label("not a usable glob")
                        .with_help("write fewer alternatives, or split the entry into several entries"),
                        path,
                    );
                    None
                }
            },
            Err(error) => {
                let (template, _) = scan_template(&text.value);
                partial.extend(template.references().map(|(reference, _)| (reference.root.clone(), text.span)));
                let span = value_subspan(reader.source, item, &text.value, error.range.clone());
                reader.report(
                    Diagnostic::at(
                        Code::MalformedReference,
                        span,
                        format!("malformed reference in `{}`: {}", text.value, error.message),
                    )
                    .with_label("here")
                    .with_help(
                        "write `${{name}}` or `${{name.path.-1}}` with a lowercase variable name; write `$${{` for the literal characters",
                    ),
                    path,
                );
                None
            }
        })
        .collect()
}

fn glob_text(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
    match &node.kind {
        NodeKind::Scalar(scalar) if !node.is_null() && scalar.value != crate::syntax::yaml::ScalarValue::String => {
            // Numbers and booleans are matched as the text they were written as.
            Some(Spanned::new(scalar.text.clone(), node.span))
        }
        _ => reader.string(node, path),
    }
}

/// A skills list: bundle slugs, never paths or globs.
pub(super) fn skill_entries(reader: &mut Reader<'_>, node: Option<&Node>, path: &SpecPath<'_>) -> Vec<Spanned<String>> {
    match node {
        Some(node) => name_list(reader, node, path, false),
        None => Vec::new(),
    }
}

/// A list of names (skill slugs, mount names in a forbid list).
pub(super) fn name_list(
    reader: &mut Reader<'_>,
    node: &Node,
    path: &SpecPath<'_>,
    mounts: bool,
) -> Vec<Spanned<String>> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, if mounts { "a list of mount names" } else { "a list of skill slugs" });
        return Vec::new();
    };
    let mut names = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_path = path.index(index);
        if mounts && item.as_mapping().is_some() {
            reader.report(
                Diagnostic::at(
                    Code::MountEntryShape,
                    item.span,
                    "a forbid entry is a mount name alone: a denial is total, so it takes no `access`",
                )
                .with_label("a mapping in a forbid list")
                .with_help(
                    "write the mount's name; to give read-only access, grant it with `{ mount: <name>, access: read }`",
                ),
                &item_path,
            );
            continue;
        }
        let Some(name) = item.as_str() else {
            let code = if mounts { Code::MountEntryShape } else { Code::SkillEntryShape };
            reader.report(
                Diagnostic::at(
                    code,
                    item.span,
                    format!("a {} entry is a name, not {}", if mounts { "mounts" } else { "skills" }, item.type_name()),
                )
                .with_label("not a name")
                .with_help(if mounts {
                    "write the mount's name, such as `reference`"
                } else {
                    "write the bundle's slug, such as `order-data`"
                }),
                &item_path,
            );
            continue;
        };
        if let Some(problem) = name_problem(name, mounts) {
            let code = if mounts { Code::MountEntryShape } else { Code::SkillEntryShape };
            reader.report(
                Diagnostic::at(code, item.span, problem.0).with_label("not a name").with_help(problem.1),
                &item_path,
            );
            continue;
        }
        names.push(Spanned::new(name.to_string(), item.span));
    }
    names
}

fn name_problem(name: &str, mounts: bool) -> Option<(String, String)> {
    let glob = name.contains(['*', '?', '[', '{']);
    if mounts {
        if glob {
            return Some((
                format!("`{name}` is a glob; a mounts list takes mount names"),
                "name the mount (`reference`), and narrow paths inside it with a `tools.allow` entry".to_string(),
            ));
        }
        if name.trim().is_empty() {
            return Some(("a mount name must not be empty".to_string(), "write the mount's name".to_string()));
        }
        return None;
    }
    if glob || name.contains('/') {
        let slug = name.trim_start_matches("skills/").split('/').next().unwrap_or("").trim_end_matches('*');
        return Some((
            format!("`{name}` is a path or a glob; a skills list takes bundle slugs"),
            if slug.is_empty() {
                "name the bundle by its directory under `skills/`".to_string()
            } else {
                format!("write the bundle's slug, such as `{slug}`: enabling it opens the whole bundle")
            },
        ));
    }
    if name.trim().is_empty() {
        return Some(("a skill slug must not be empty".to_string(), "write the bundle's slug".to_string()));
    }
    None
}

/// A mounts grant list: names, or `{ mount, access }`.
pub(super) fn mount_entries(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<MountEntry> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, "a list of mount entries");
        return Vec::new();
    };
    let mut entries = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_path = path.index(index);
        if item.as_mapping().is_none() {
            let names = name_list_item(reader, item, &item_path);
            if let Some(name) = names {
                entries.push(MountEntry { span: name.span, name, access: None });
            }
            continue;
        }
        let Some(fields) = reader.fields(item, &item_path, &MOUNT_ENTRY, false) else {
            continue;
        };
        let mut name = None;
        let mut access = None;
        for field in fields {
            let key_path = item_path.key(field.key);
            match field.key {
                "mount" => name = name_list_item(reader, field.value, &key_path),
                "access" => match field.value.scalar_text() {
                    Some("read") => access = Some(Spanned::new(Access::Read, field.value.span)),
                    Some("read_write") => access = Some(Spanned::new(Access::ReadWrite, field.value.span)),
                    other => reader.report(
                        Diagnostic::at(
                            Code::MountEntryShape,
                            field.value.span,
                            format!(
                                "`access` must be `read` or `read_write`, not `{}`",
                                other.unwrap_or("a collection")
                            ),
                        )
                        .with_label("unknown access")
                        .with_help(
                            "write `access: read` to read the mount, or `access: read_write` to ask to write it",
                        ),
                        &key_path,
                    ),
                },
                _ => {}
            }
        }
        match name {
            Some(name) => entries.push(MountEntry { name, access, span: item.span }),
            None if item.get("mount").is_none() => reader.report(
                Diagnostic::at(Code::MissingKey, item.span, "a mount entry needs a `mount` name")
                    .with_label("no `mount` key")
                    .with_help("write `{ mount: <name>, access: read | read_write }`"),
                &item_path,
            ),
            None => {}
        }
    }
    entries
}

fn name_list_item(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
    let Some(name) = node.as_str() else {
        reader.report(
            Diagnostic::at(
                Code::MountEntryShape,
                node.span,
                format!("expected a mount name, found {}", node.type_name()),
            )
            .with_label("not a name"),
            path,
        );
        return None;
    };
    if let Some((message, help)) = name_problem(name, true) {
        reader.report(
            Diagnostic::at(Code::MountEntryShape, node.span, message).with_label("not a name").with_help(help),
            path,
        );
        return None;
    }
    Some(Spanned::new(name.to_string(), node.span))
}
