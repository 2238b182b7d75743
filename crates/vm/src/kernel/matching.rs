//! Matching a call against tool entries: the call's path arguments canonicalized (the
//! [`Subject`]), `${{…}}` holes resolved over the variables, and one entry's guards and
//! globs tried against it.
//!
//! The one thing to know: a variable's value matches literally and `*` never crosses `/`,
//! so a value can never widen a guard; a path that climbs out of the root matches no allow
//! entry and every denial.

use serde_json::Value;

use archmax_program::glob::Glob;
use archmax_program::program::{Program, Rule as Entry, ValueType};
use archmax_program::reference::{PathSegment, VarPath};
use archmax_program::tools::{PathAccess, delegation_target, path_arguments};
use archmax_program::zones::canonicalize;

use super::Reveal;

/// A path argument of the call, canonicalized.
#[derive(Clone, Debug)]
pub(super) struct PathArgument {
    /// What the argument reveals or changes ([`mod@super::reveals`]), which denials of other
    /// tools it answers to.
    pub reveals: &'static [Reveal],
    pub access: PathAccess,
    /// The canonical path, or `None` when it climbs out of the root.
    pub canonical: Option<String>,
    pub written: String,
}

/// The argument names a tool's path argument also answers to.
fn aliases(name: &'static str) -> &'static [&'static str] {
    match name {
        "file_path" => &["file_path", "path"],
        "path" => &["path", "file_path"],
        other => match other {
            "source" => &["source"],
            "destination" => &["destination"],
            _ => &[],
        },
    }
}

/// What a host tool's declared path argument reveals, by how the tool uses it: the
/// broadest reading, since the host's own code does the work.
fn declared_reveals(access: PathAccess) -> &'static [Reveal] {
    match access {
        PathAccess::Read | PathAccess::Execute => &[Reveal::Content],
        PathAccess::List => &[Reveal::Names],
        PathAccess::Search => &[Reveal::Content, Reveal::Names],
        PathAccess::Write => &[Reveal::Writes],
        PathAccess::Remove => &[Reveal::Content, Reveal::Writes],
    }
}

/// Extracts the call's path arguments (a host tool's `declared` ones, else the built-in
/// table's with their aliases), each canonicalized; `Err` names a malformed one.
pub(super) fn path_values(
    tool: &str,
    declared: Option<&[(String, PathAccess)]>,
    args: &Value,
) -> Result<Vec<PathArgument>, String> {
    let mut found = Vec::new();
    match declared {
        Some(declared) => {
            for (name, access) in declared {
                let revealed = declared_reveals(*access);
                path_value(name, *access, revealed, args.get(name.as_str()), &mut found)?;
            }
        }
        None => {
            for (name, access) in path_arguments(tool) {
                let value = aliases(name).iter().find_map(|alias| args.get(alias));
                path_value(name, *access, super::reveals(tool, name), value, &mut found)?;
            }
        }
    }
    Ok(found)
}

/// Adds one path argument's value (a path, a list of paths, or nothing) to `found`.
fn path_value(
    name: &str,
    access: PathAccess,
    revealed: &'static [Reveal],
    value: Option<&Value>,
    found: &mut Vec<PathArgument>,
) -> Result<(), String> {
    let written: Vec<String> = match value {
        // Listing and searching default to the root.
        None | Some(Value::Null) if matches!(access, PathAccess::List | PathAccess::Search) => vec![String::new()],
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                _ => Err(format!("`{name}` must be a path or a list of paths")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("`{name}` must be a path or a list of paths")),
    };
    for written in written {
        found.push(PathArgument { reveals: revealed, access, canonical: canonicalize(&written).ok(), written });
    }
    Ok(())
}

/// The value `segments` address inside `value`: own properties only, array indices
/// counted from the end when negative.
pub(crate) fn value_at<'v>(value: &'v Value, segments: &[PathSegment]) -> Option<&'v Value> {
    let mut cursor = value;
    for segment in segments {
        cursor = match (segment, cursor) {
            (PathSegment::Key(key), Value::Object(map)) => map.get(key)?,
            (PathSegment::Index(index), Value::Array(items)) => {
                let position = if *index < 0 { items.len() as i64 + index } else { *index };
                items.get(usize::try_from(position).ok()?)?
            }
            (PathSegment::Index(index), Value::Object(map)) => map.get(&index.to_string())?,
            _ => return None,
        };
    }
    Some(cursor)
}

/// Resolves a `${{…}}` path over the variables to the text a glob hole matches: own
/// properties only, canonical indices (negative from the end), and a scalar at the end.
pub fn resolve_reference(path: &VarPath, variables: &Value) -> Option<String> {
    let value = value_at(variables.get(&path.root)?, &path.segments)?;
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// How one entry matched a call.
pub(super) enum Match {
    Yes,
    No,
    /// A guard named a variable that does not resolve.
    Unresolved(VarPath),
}

fn glob_matches(globs: &[Glob], value: &str, variables: &Value) -> Match {
    let mut unresolved = None;
    for glob in globs {
        match glob.matches(value, &|path| resolve_reference(path, variables)) {
            Ok(true) => return Match::Yes,
            Ok(false) => {}
            Err(missing) => unresolved = Some(missing.0),
        }
    }
    match unresolved {
        Some(path) => Match::Unresolved(path),
        None => Match::No,
    }
}

/// The text an argument is matched as: a path canonicalized, anything else as written.
fn argument_text(value: &Value, is_path: bool) -> Option<String> {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        Value::Null => String::new(),
        _ => return None,
    };
    if is_path { canonicalize(&text).ok() } else { Some(text) }
}

/// Looks a dotted argument name up in the arguments.
fn argument<'a>(args: &'a Value, dotted: &str) -> Option<&'a Value> {
    let mut value = args;
    for segment in dotted.split('.') {
        value = match value {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// A call as the rules see it: the tool, its arguments, its path arguments canonicalized,
/// and every argument name that holds a path (aliases and `file` parameters included).
pub(super) struct Subject<'a> {
    pub tool: &'a str,
    pub args: &'a Value,
    pub paths: Vec<PathArgument>,
    pub path_names: Vec<&'a str>,
    pub variables: &'a Value,
}

impl<'a> Subject<'a> {
    pub fn new(
        program: &'a Program,
        tool: &'a str,
        args: &'a Value,
        variables: &'a Value,
        declared: Option<&'a [(String, PathAccess)]>,
    ) -> Result<Subject<'a>, String> {
        let paths = path_values(tool, declared, args)?;
        Ok(Subject { tool, args, paths, path_names: path_argument_names(program, tool, declared), variables })
    }
}

/// The names of every argument of `tool` that holds a path: a host tool's declared ones,
/// else a built-in's path arguments with their aliases; a sub-workflow's `file`
/// parameters.
fn path_argument_names<'p>(
    program: &'p Program,
    tool: &str,
    declared: Option<&'p [(String, PathAccess)]>,
) -> Vec<&'p str> {
    let mut names: Vec<&'p str> = match declared {
        Some(declared) => declared.iter().map(|(name, _)| name.as_str()).collect(),
        None => path_arguments(tool).iter().flat_map(|(name, _)| aliases(name).iter().copied()).collect(),
    };
    names.extend(file_parameters(program, tool));
    names
}

/// The `file` parameters of a sub-workflow tool's target (its `manual` entry).
pub(super) fn file_parameters<'p>(program: &'p Program, tool: &str) -> Vec<&'p str> {
    let Some((_, target)) = delegation_target(tool).and_then(|slug| program.workflow(slug)) else {
        return Vec::new();
    };
    target
        .triggers
        .iter()
        .filter(|trigger| program.str(trigger.id) == "manual")
        .flat_map(|trigger| trigger.requires.iter())
        .filter(|entry| entry.ty == Some(ValueType::File))
        .map(|entry| program.str(entry.name))
        .collect()
}

/// Matches one entry against a call. An allow entry needs every guard and every path to
/// match; a forbid entry (`any_path`) denies when any path matches.
pub(super) fn entry_matches(program: &Program, entry: &Entry, subject: &Subject<'_>, any_path: bool) -> Match {
    if let Some(name) = entry.tool
        && program.str(name) != subject.tool
    {
        return Match::No;
    }
    for (argument_name, globs) in &entry.args {
        let name = program.str(*argument_name);
        let is_path = subject.path_names.contains(&name);
        let values: Vec<&Value> = match argument(subject.args, name) {
            Some(Value::Array(items)) if is_path => items.iter().collect(),
            Some(value) => vec![value],
            None => return Match::No,
        };
        for value in values {
            let Some(text) = argument_text(value, is_path) else {
                // A path that climbs out matches no allow entry, and every denial.
                return if any_path && is_path { Match::Yes } else { Match::No };
            };
            match glob_matches(globs, &text, subject.variables) {
                Match::Yes => {}
                other => return other,
            }
        }
    }
    if let Some(globs) = &entry.paths {
        if subject.paths.is_empty() {
            return Match::No;
        }
        let mut any = false;
        for path in &subject.paths {
            let Some(canonical) = &path.canonical else {
                return Match::No;
            };
            match glob_matches(globs, canonical, subject.variables) {
                Match::Yes => any = true,
                Match::No if !any_path => return Match::No,
                Match::No => {}
                unresolved @ Match::Unresolved(_) => return unresolved,
            }
        }
        if !any {
            return Match::No;
        }
    }
    Match::Yes
}
