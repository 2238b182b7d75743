//! The JSON Schemas (`crate::authoring_schema`) list exactly the keys this schema's
//! readers accept: each closed object of a schema against the key table of the mapping
//! it describes.

use crate::authoring_schema::Document;

use super::reader::Fields;
use super::{case, governance, root, state};

fn names(schema: &serde_json::Value, pointer: &str) -> Vec<String> {
    let object = schema.pointer(pointer).unwrap_or(&serde_json::Value::Null);
    assert_eq!(object["additionalProperties"], serde_json::Value::Bool(false), "{pointer} is not closed");
    let mut names: Vec<String> =
        object["properties"].as_object().map(|map| map.keys().cloned().collect()).unwrap_or_default();
    names.sort();
    names
}

fn keys(fields: &Fields) -> Vec<String> {
    let mut keys: Vec<String> = fields.known.iter().map(|key| key.to_string()).collect();
    keys.sort();
    keys
}

#[test]
fn every_closed_workflow_object_lists_the_keys_its_reader_accepts() {
    let schema = Document::Workflow.schema();
    let table: [(&str, &Fields); 14] = [
        ("", &root::ROOT),
        ("/$defs/runtime", &root::RUNTIME),
        ("/$defs/settings", &root::SETTINGS),
        ("/$defs/settings/properties/prompt_cache", &root::PROMPT_CACHE),
        ("/$defs/tests", &root::TESTS),
        ("/$defs/tests/properties/judge", &root::JUDGE),
        ("/$defs/tests/properties/judge/properties/modelOptions", &root::MODEL_OPTIONS),
        ("/$defs/rootTools", &root::ROOT_TOOLS),
        ("/$defs/rootGrants", &root::ROOT_SKILLS),
        ("/$defs/state", &state::STATE),
        ("/$defs/stateTools", &state::STATE_TOOLS),
        ("/$defs/stateGrants", &state::STATE_GRANTS),
        ("/$defs/state/properties/budget", &state::BUDGET),
        ("/$defs/transition", &state::TRANSITION),
    ];
    for (pointer, fields) in table {
        assert_eq!(names(&schema, pointer), keys(fields), "{pointer} and {}", fields.what);
    }
    assert_eq!(names(&schema, "/$defs/toolEntry/oneOf/1"), keys(&governance::TOOL_ENTRY));
    assert_eq!(names(&schema, "/$defs/grantEntry/oneOf/1"), keys(&governance::MOUNT_ENTRY));
}

#[test]
fn every_closed_case_object_lists_the_keys_its_reader_accepts() {
    let schema = Document::Case.schema();
    assert_eq!(names(&schema, ""), keys(&case::CASE));
    assert_eq!(names(&schema, "/$defs/mock"), keys(&case::MOCK));
    assert_eq!(names(&schema, "/$defs/step"), keys(&case::steps::STEP_KEYS));
}
