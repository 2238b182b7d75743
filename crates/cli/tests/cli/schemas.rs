//! The JSON Schemas of `archmax schema`: the files under `schemas/` are what the command
//! prints (`UPDATE_GOLDEN=1` rewrites them), every workflow, case and `archmax.toml` the
//! compiler accepts in the goldens and in `specs/` validates against them (a real
//! validator, the `jsonschema` crate; YAML read through the compiler's own loader), and
//! every golden whose point is a schema-level error (an unknown or removed key, a wrong
//! type, an unknown state type, a malformed case) fails them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use archmax_compiler::Severity;
use archmax_compiler::source::FileId;
use archmax_compiler::syntax::yaml;
use serde_json::Value;

use crate::support::{archmax, repository};

const DOCUMENTS: [&str; 3] = ["workflow", "case", "config"];

/// The codes a schema alone can catch, and the schema that must catch each.
const SCHEMA_LEVEL: [(&str, &str); 6] = [
    ("AMX0100", "workflow"),
    ("AMX0101", "workflow"),
    ("AMX0102", "workflow"),
    ("AMX0201", "workflow"),
    ("AMX0011", "config"),
    ("AMX0900", "case"),
];

/// Goldens whose code is schema-level by number but whose rule is not about shape.
const NOT_SHAPE: [(&str, &str); 3] = [
    ("AMX0011-mount-source-runtime-area", "which folders a mount may serve is the zone table's rule"),
    ("AMX0011-mount-source-seal-key-folder", "which folders the runtime owns is the zone table's rule"),
    ("AMX0011-reserved-mount-key", "which mount keys are reserved is the zone table's rule"),
];

/// The schema a workspace file is checked against, by its name.
fn document_of(file: &str) -> Option<&'static str> {
    if file.ends_with("/workflow.yaml") {
        Some("workflow")
    } else if file.ends_with(".test.yaml") {
        Some("case")
    } else if file == "archmax.toml" {
        Some("config")
    } else {
        None
    }
}

fn validators() -> BTreeMap<&'static str, jsonschema::Validator> {
    DOCUMENTS
        .iter()
        .map(|name| {
            let path = repository().join(format!("schemas/{name}.schema.json"));
            let text = fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
            (*name, jsonschema::draft202012::new(&schema).unwrap_or_else(|error| panic!("{name}: {error}")))
        })
        .collect()
}

/// A file as the JSON value its schema describes; `None` when it does not parse at all.
fn instance(path: &Path) -> Option<Value> {
    let text = fs::read_to_string(path).ok()?;
    if path.extension().is_some_and(|extension| extension == "toml") {
        let table: toml::Table = toml::from_str(&text).ok()?;
        return serde_json::to_value(table).ok();
    }
    let document = yaml::load(FileId(0), &text);
    if !document.diagnostics.is_empty() {
        return None;
    }
    Some(document.root.map(|root| root.to_json()).unwrap_or(Value::Null))
}

/// Every workspace the goldens and `specs/` hold.
fn workspaces() -> Vec<PathBuf> {
    let mut roots = vec![repository().join("specs")];
    for kind in ["golden/diagnostics", "golden/runs"] {
        let mut cases: Vec<PathBuf> = fs::read_dir(repository().join(kind))
            .expect("golden folder")
            .flatten()
            .map(|entry| entry.path().join("workspace"))
            .filter(|root| root.is_dir())
            .collect();
        cases.sort();
        roots.extend(cases);
    }
    roots
}

/// The workspace-relative names of the files the compiler reports an error in.
fn files_with_errors(root: &Path) -> BTreeSet<String> {
    let Ok(analysis) = archmax_compiler::analyze(root) else {
        return BTreeSet::new();
    };
    let Ok(report) = analysis.report(&[]) else {
        return BTreeSet::new();
    };
    report
        .distinct()
        .into_iter()
        .filter(|diagnostic| diagnostic.severity == Severity::Error)
        .filter_map(|diagnostic| diagnostic.span.map(|span| analysis.sources().file(span.file).name.clone()))
        .collect()
}

fn files(root: &Path, relative: &str, found: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(root.join(relative)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if relative.is_empty() { name } else { format!("{relative}/{name}") };
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            files(root, &path, found);
        } else if entry.file_type().is_ok_and(|kind| kind.is_file()) {
            found.push(path);
        }
    }
}

#[test]
fn schema_events_prints_the_committed_event_schema() {
    let here = repository();
    let printed = archmax(&here, &["schema", "events"]);
    assert_eq!(printed.code, 0, "{}", printed.stderr);
    let committed = fs::read_to_string(here.join("schemas/events.schema.json")).expect("the event schema");
    assert_eq!(printed.stdout, committed);
    let schema: Value = serde_json::from_str(&printed.stdout).expect("JSON");
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
}

#[test]
fn the_committed_schemas_are_what_the_command_prints() {
    let here = repository();
    for name in DOCUMENTS {
        let printed = archmax(&here, &["schema", name]);
        assert_eq!(printed.code, 0, "{name}: {}", printed.stderr);
        let committed = here.join(format!("schemas/{name}.schema.json"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            fs::write(&committed, &printed.stdout).expect("write the schema");
            continue;
        }
        let text = fs::read_to_string(&committed).unwrap_or_default();
        assert!(
            text == printed.stdout,
            "{} differs from `archmax schema {name}`; rerun with UPDATE_GOLDEN=1",
            committed.display()
        );
    }
}

#[test]
fn schema_writes_to_a_file_with_o() {
    let scratch = crate::support::scratch("schema-o");
    fs::create_dir_all(&scratch).expect("scratch");
    let written = archmax(&scratch, &["schema", "case", "-o", "case.json"]);
    assert_eq!(written.code, 0, "{}", written.stderr);
    let printed = archmax(&scratch, &["schema", "case"]);
    assert_eq!(fs::read_to_string(scratch.join("case.json")).expect("written"), printed.stdout);
    fs::remove_dir_all(&scratch).ok();
}

#[test]
fn every_file_the_compiler_accepts_validates_against_its_schema() {
    let validators = validators();
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for root in workspaces() {
        let refused = files_with_errors(&root);
        let mut found = Vec::new();
        files(&root, "", &mut found);
        for file in found {
            let Some(document) = document_of(&file) else { continue };
            if refused.contains(&file) {
                continue;
            }
            let Some(value) = instance(&root.join(&file)) else { continue };
            *checked.entry(document).or_default() += 1;
            let errors: Vec<String> = validators[document]
                .iter_errors(&value)
                .map(|error| format!("{} at {}", error, error.instance_path()))
                .collect();
            if !errors.is_empty() {
                failures.push(format!("{}: {}", root.join(&file).display(), errors.join("; ")));
            }
        }
    }
    assert!(failures.is_empty(), "{} accepted files fail their schema:\n{}", failures.len(), failures.join("\n"));
    for name in DOCUMENTS {
        assert!(checked.get(name).copied().unwrap_or(0) >= 3, "too few {name} files were checked: {checked:?}");
    }
}

#[test]
fn every_schema_level_golden_error_fails_its_schema() {
    let validators = validators();
    let mut failures = Vec::new();
    let mut checked = 0;
    for root in workspaces().into_iter().filter(|root| root.starts_with(repository().join("golden/diagnostics"))) {
        let case = root.parent().expect("case folder");
        if NOT_SHAPE.iter().any(|(name, _)| case.ends_with(name)) {
            continue;
        }
        let recorded: Value = serde_json::from_str(&fs::read_to_string(case.join("expected.json")).unwrap_or_default())
            .unwrap_or(Value::Null);
        let diagnostics = recorded["workflows"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|workflow| workflow["diagnostics"].as_array().into_iter().flatten());
        let mut seen = BTreeSet::new();
        for diagnostic in diagnostics {
            let (Some(code), Some(file)) = (diagnostic["code"].as_str(), diagnostic["file"].as_str()) else { continue };
            let Some((_, document)) = SCHEMA_LEVEL.iter().find(|(level, _)| *level == code) else { continue };
            if document_of(file) != Some(*document) || !seen.insert(file.to_string()) {
                continue;
            }
            let Some(value) = instance(&root.join(file)) else { continue };
            checked += 1;
            if validators[*document].is_valid(&value) {
                failures.push(format!(
                    "{} ({code}: {}) passes the {document} schema",
                    case.display(),
                    diagnostic["message"]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} schema-level errors pass their schema:\n{}", failures.len(), failures.join("\n"));
    assert!(checked >= 20, "only {checked} schema-level goldens were checked");
}

/// Whether `validate` accepts `case` as a case of a one-state workflow: no error in it.
fn validate_accepts_case(case: &str) -> bool {
    let workflow = "instructions: Answer.\ntests: { judge: {} }\nstates:\n  answer:\n    triggers:\n      manual:\n    instructions: Answer the question.\n";
    let files = [("workflows/orders/workflow.yaml", workflow), ("workflows/orders/tests/probe.test.yaml", case)];
    let analysis = archmax_compiler::analyze_workspace(archmax_compiler::load_memory(files).expect("a workspace"));
    let report = analysis.report(&[]).expect("no selection");
    !report.distinct().iter().any(|diagnostic| diagnostic.severity == Severity::Error)
}

fn yaml_value(text: &str) -> Value {
    let document = yaml::load(FileId(0), text);
    assert!(document.diagnostics.is_empty(), "{text}");
    document.root.map(|root| root.to_json()).unwrap_or(Value::Null)
}

#[test]
fn the_case_schema_judges_titles_descriptions_and_grades_as_validate_does() {
    let validators = validators();
    let spaced = "word   ".repeat(40);
    let long = "x".repeat(201);
    let title_long = "t".repeat(61);
    let cases: [(&str, String, bool); 8] = [
        ("a description long only in its spaces", format!("description: \"{spaced}\""), true),
        ("a description of 201 characters", format!("description: {long}"), false),
        ("a blank description", "description: \"   \"".to_string(), false),
        ("a description over several lines", "description: |\n  First line.\n\n  Second line.\n".to_string(), true),
        ("a title with a final line break", "title: |\n  Refund asked\ndescription: Asks.".to_string(), true),
        ("a title over two lines", "title: \"Refund\\nasked\"\ndescription: Asks.".to_string(), false),
        ("a title of 61 characters", format!("title: {title_long}\ndescription: Asks."), false),
        (
            "a grade without atLeast",
            "steps:\n  - send: Hello\n  - grade: { closedQA: Was it polite? }".to_string(),
            false,
        ),
    ];
    let mut disagreements = Vec::new();
    for (what, body, accepted) in cases {
        let mut text = body.clone();
        if !body.contains("title:") {
            text = format!("title: A probe\n{text}");
        }
        if !body.contains("steps:") {
            text.push_str("\nsteps:\n  - send: Hello\n");
        }
        let by_validate = validate_accepts_case(&text);
        let by_schema = validators["case"].is_valid(&yaml_value(&text));
        if by_validate != accepted || by_schema != accepted {
            disagreements.push(format!("{what}: expected {accepted}, validate {by_validate}, schema {by_schema}"));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn a_signature_pattern_is_a_regular_expression_in_the_workflow_schema() {
    let text = fs::read_to_string(repository().join("schemas/workflow.schema.json")).expect("the workflow schema");
    let schema: Value = serde_json::from_str(&text).expect("JSON");
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the workflow schema compiles");
    let workflow = |pattern: &str| {
        yaml_value(&format!(
            "instructions: Answer.\nstates:\n  answer:\n    triggers:\n      manual:\n        requires:\n          - {{ name: order_id, type: string, pattern: '{pattern}' }}\n    instructions: Answer.\n"
        ))
    };
    assert!(validator.is_valid(&workflow("^ORD-[0-9]+$")));
    assert!(!validator.is_valid(&workflow("^ORD-[0-9+$")), "an unclosed class must fail `format: regex`");
}

/// The flow schemas: what `archmax schema flow|flow-events` prints is the committed file.
#[test]
fn schema_flow_and_flow_events_print_the_committed_schemas() {
    let here = repository();
    for name in ["flow", "flow-events"] {
        let printed = archmax(&here, &["schema", name]);
        assert_eq!(printed.code, 0, "{name}: {}", printed.stderr);
        let committed = fs::read_to_string(here.join(format!("schemas/{name}.schema.json"))).expect("the schema");
        assert_eq!(printed.stdout, committed, "{name}");
        let schema: Value = serde_json::from_str(&printed.stdout).expect("JSON");
        assert!(jsonschema::draft202012::new(&schema).is_ok(), "{name} compiles");
    }
}

/// Every flow document under `golden/flows/` and `specs/flows/`: the reader's verdict.
fn flow_documents() -> Vec<(PathBuf, bool)> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut add = |folder: PathBuf| {
        for entry in fs::read_dir(folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path
                .extension()
                .is_some_and(|extension| ["yaml", "yml", "json"].contains(&&*extension.to_string_lossy()))
                && !path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("tape"))
            {
                paths.push(path);
            }
        }
    };
    add(repository().join("specs/flows"));
    for case in fs::read_dir(repository().join("golden/flows")).expect("golden flows").flatten() {
        add(case.path().join("workspace"));
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let accepted = archmax_flow::read::load(&path, &path.display().to_string()).document.is_some();
            (path, accepted)
        })
        .collect()
}

/// Golden flow refusals the schema alone catches (a shape, not a rule over siblings).
const FLOW_SCHEMA_LEVEL: [&str; 7] = [
    "AMX1001-no-root",
    "AMX1001-unknown-node-key",
    "AMX1002-dot-in-id",
    "AMX1005-repeat-not-a-bound",
    "AMX1006-gives-on-a-step",
    "AMX1007-unknown-kind",
    "AMX1008-command-as-a-string",
];

#[test]
fn every_flow_document_the_reader_accepts_validates_and_shape_refusals_fail() {
    let schema: Value = serde_json::from_str(archmax_flow::document::SCHEMA).expect("JSON");
    let validator = jsonschema::draft202012::new(&schema).expect("the flow schema compiles");
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut caught = BTreeSet::new();
    for (path, accepted) in flow_documents() {
        let case = path.parent().and_then(Path::parent).and_then(Path::file_name).map(|name| name.to_string_lossy());
        let shape_refusal = case.as_deref().is_some_and(|case| FLOW_SCHEMA_LEVEL.contains(&case));
        let text = fs::read_to_string(&path).unwrap_or_default();
        let value = if path.extension().is_some_and(|extension| extension == "json") {
            serde_json::from_str(&text).ok()
        } else {
            instance(&path)
        };
        let Some(value) = value else { continue };
        let errors: Vec<String> = validator.iter_errors(&value).map(|error| error.to_string()).collect();
        if accepted {
            checked += 1;
            if !errors.is_empty() {
                failures.push(format!("{} is accepted but fails the schema: {}", path.display(), errors.join("; ")));
            }
        } else if shape_refusal {
            if errors.is_empty() {
                failures.push(format!("{} is refused for its shape but passes the schema", path.display()));
            }
            caught.extend(case.map(|case| case.to_string()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 10, "too few flow documents were checked: {checked}");
    assert_eq!(caught.len(), FLOW_SCHEMA_LEVEL.len(), "every shape refusal was checked: {caught:?}");
}
